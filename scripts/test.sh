#!/usr/bin/env bash
# Run every test: unit tests of the sans-IO cores, integration tests with real
# namespaces, ping, iperf3 and routing daemons (these need root), and the Python
# client's tests against real labs. Installs what is missing first.
set -euo pipefail
. "$(dirname "$0")/../scripts/setup.sh"
cargo test --workspace --release "$@"
VEMU="$PWD/target/release/vemu" python3 -m pytest -q python/tests
