#!/usr/bin/env bash
# Run every test: unit tests of the sans-IO cores and integration tests with real
# namespaces, ping and iperf3 (these need root). Installs what is missing first.
set -euo pipefail
. "$(dirname "$0")/../scripts/setup.sh"
cargo test --workspace --release "$@"
