#!/usr/bin/env bash
# The main job: build vemu, bring up examples/quickstart.yaml, show ping and iperf3
# across the emulated links, take the lab down. Run as root.
set -euo pipefail
. "$(dirname "$0")/../scripts/setup.sh"
cargo build --release --quiet
vemu=./target/release/vemu
trap '$vemu down --lab quickstart >/dev/null 2>&1 || true' EXIT

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
say "vemu up examples/quickstart.yaml   (client --100Mbit,5ms-- router --20Mbit,10ms-- server)"
$vemu up examples/quickstart.yaml
say "vemu exec client -- ping -4 -c 5 server   (expect ~30 ms: 2 x (5 + 10) ms)"
$vemu exec client -- ping -4 -c 5 -i 0.2 server
say "vemu exec client -- iperf3 -c server -t 5   (expect ~19 Mbit/s: the 20 Mbit/s link, minus headers)"
$vemu exec client -- iperf3 -4 -c server -t 5 -O 1
say "vemu link set router:server --delay 50ms   (at run time)"
$vemu link set router:server --delay 50ms
$vemu exec client -- ping -4 -c 3 -i 0.2 server
say "vemu status"
$vemu status
say "vemu down"
$vemu down --lab quickstart
trap - EXIT
