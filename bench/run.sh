#!/usr/bin/env bash
# Run vemu's benchmarks (all, or one experiment: see bench/README.md). Root; installs
# matplotlib and nftables (the kernel loss baseline) when missing.
set -euo pipefail
. "$(dirname "$0")/../scripts/setup.sh"
python3 -c 'import matplotlib' 2>/dev/null || python3 -m pip install -q matplotlib || apt-get install -y -qq python3-matplotlib
command -v nft >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nftables >/dev/null
case "${1:-all}" in
    # Not a measurement: every fuzz target for 10 minutes (scripts/fuzz.sh, docs/security.md).
    fuzz) exec scripts/fuzz.sh "${VEMU_FUZZ_SECONDS:-600}" ;;
    mininet|mininet-scripts|engine|all) command -v mn >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mininet bridge-utils >/dev/null ;;
esac
cargo build --release --quiet
[ $# -gt 0 ] || set -- all
exec python3 -u bench/bench.py "$@"
