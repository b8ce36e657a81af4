#!/usr/bin/env bash
# Run every test: unit tests of the sans-IO cores and integration tests with real
# namespaces, ping and iperf3 (these need root). Installs what is missing first.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
    echo "vemu's tests create network namespaces: run as root (sudo $0)" >&2
    exit 1
fi
./scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
cargo test --workspace --release "$@"
