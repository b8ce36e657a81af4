#!/usr/bin/env bash
# Run vemu's benchmarks (all, or one of: link chain scale switch api). Root; installs matplotlib.
set -euo pipefail
. "$(dirname "$0")/../scripts/setup.sh"
python3 -c 'import matplotlib' 2>/dev/null || python3 -m pip install -q matplotlib || apt-get install -y -qq python3-matplotlib
cargo build --release --quiet
exec python3 bench/bench.py "${1:-all}"
