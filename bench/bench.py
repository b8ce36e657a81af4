#!/usr/bin/env python3
"""vemu benchmarks: each experiment writes CSV and PNG under bench/out/ and prints a summary.

  bench.py link    unimpaired link: TCP throughput through a vemu link and a vemu LAN segment
                   vs a raw veth pair and a Linux bridge
  bench.py accuracy set vs achieved bandwidth (1 Mbit/s..10 Gbit/s, vs tbf), delay (0.1 ms..1 s,
                   vs raw veth) and loss (0.1%..90%, vs nftables random drop)
  bench.py density accuracy vs number of links sharing the machine (1..32 pairs at 5, 54 and
                   100 Mbit/s, all TCP at once; VEMU_DENSITY_PAIRS), vs tbf on veth pairs
  bench.py cpu     CPU left for the software under test vs number of nodes (10..200, every
                   pair exchanging 500 pings/s), vs the same load on kernel veth pairs
  bench.py chain   chains of 1..16 hops: RTT and TCP throughput, vemu vs a kernel veth chain
  bench.py scale   start-up / tear-down time and memory for labs of 10, 100, 1000 nodes
                   (and 10,000), then `plan`
  bench.py plan    generated fat-trees of ~10k, ~100k, ~1M nodes planned over 100 machines
                   (vemu check --machines): time, peak memory, links cut
  bench.py switch  LAN segments: switching decision time vs ports (2..4096), and switch
                   throughput for unicast and broadcast frames of 64..1500 bytes vs ports
  bench.py api     API: time of a link change (request to reply; the engine has applied it
                   when the reply leaves), and event-stream throughput with 1000 links
  bench.py channel wireless channel update cost per tick (move everyone, recompute who
                   reaches whom) for 100, 1000, 5000 members: grid index vs every pair
  bench.py manet   examples/manet-50.yaml (50 nodes, babeld, 20 CBR flows) for each pause
                   time: delivery ratio, delay, routing overhead, engine CPU
                   (VEMU_MANET_DURATION seconds of traffic, default 60; VEMU_MANET_PAUSES,
                   default 0,15,30,60)
  bench.py mininet-scripts  the same Mininet scripts (tree64 pingAll, linear10 TCP, tree1024) under
                   Mininet 2.3 and under `vemu mininet`
  bench.py mininet the same LANs in vemu and in Mininet (Linux bridge, no controller) in one
                   run: N hosts on one switch (VEMU_MININET_SIZES, default 100,300,1000):
                   up, down, the first ping from h1 to the last host right after start,
                   and the time until h1 has reached every other host; vemu with its
                   default (snooping querier) and as a Linux bridge does (snooping: on)
  bench.py soak    a long run (VEMU_SOAK_SECONDS, default 3600) at half the links' capacity
                   with a link change every second: controller memory over time, the
                   fidelity verdict of every window, and frames lost that the model did
                   not drop (must be none); not part of `all`
  bench.py machines the same labs on one machine and across two namespace machines (real
                   agents): chain RTT with one link across, TCP across, 200-node tree up/down
  bench.py machine-hop one unimpaired link between two namespace machines on a 1500-byte
                   and a 9000-byte underlay: the RTT it adds beside the underlay's own, TCP
  bench.py lan-machines a LAN across two namespace machines: RTT within and across
                   them, and underlay datagrams per broadcast against receivers there
  bench.py placement the partitioner for labs across machines: links cut (and their weight)
                   for 1000-node graphs on 2, 4, 8 machines by a random deal, greedy
                   growing, METIS, and what vemu uses (the lighter of the two)
  bench.py ui      the web interface in headless Chromium: time until a lab of 100 and 1000
                   nodes is drawn, and frames per second while it runs and while 50
                   wireless nodes move at 10 Hz (needs chromium, chromium-driver, selenium)
  bench.py qos     DiffServ on a 10 Mbit/s link: shares of four TCP flows in classes of
                   weights 1:2:4:1 (vemu's diffserv preset vs a kernel HTB tree), and EF's
                   ping RTT while best-effort TCP fills the link (vemu FIFO, vemu
                   diffserv, HTB); VEMU_QOS_SECONDS per run (default 15)
  bench.py images  100 nodes of one image beside the same LAN without an image: up, down,
                   disk; an image's first start (copied, unpacked) beside a cached one
  bench.py engine  issue 44's table in one run, each row beside its anchor: this machine's
                   thread wake-ups, idle RTT of a shaped link and LAN (vs Mininet's TCLink),
                   a broadcast flood (vs the Linux bridge), RTT per unimpaired hop (vs a
                   veth chain), a hop between machines (vs the underlay), placement of
                   100,000 nodes (vs METIS), 32 TCP links (vs tbf); not part of `all`
  bench.py wifi-bianchi the 802.11 DCF against Bianchi's model: saturated stations with his
                   parameters, (W, m) = (32, 3), (32, 5), (128, 3), basic and RTS/CTS, 5..50
                   stations, on the virtual clock (VEMU_BIANCHI_SECONDS of lab time each),
                   and W = 32, m = 5 in real labs of 5, 10, 20 stations (VEMU_BIANCHI_LAB=0:
                   not; VEMU_BIANCHI_LAB_SECONDS each)
  bench.py wifi-chain TCP over 1..7 radio hops of 802.11b, basic and RTS/CTS access
                   (VEMU_WIFI_CHAIN_SECONDS each), beside the published shape
  bench.py wifi-hidden a hidden-terminal pair with and without RTS/CTS
  bench.py wifi-cpu the DCF's cost: a saturated 802.11g cell of 10 and 50 stations at
                   54 Mbit/s, the engine's CPU share
  bench.py wifi-scale 25, 50, 100 stations (VEMU_WIFI_SCALE_STATIONS) on 4 access
                   points bridged to a wired server: up, association, reachability
  bench.py internet made-up AS graphs of 10 to 200 ASes (VEMU_INTERNET_ASES) as BIRD
                   routers with Gao-Rexford policies: up, BGP convergence, memory and
                   CPU per AS
  bench.py papers [--quick] [--figure ID[,ID]]  every figure of the founding papers
                   (router chains to 64 hops unloaded and loaded, a radio chain with babeld,
                   Virtual Routers' FIFO and DiffServ figures, GINE's TCP under UDP, NET's
                   MANET, density and CPU) beside their published points, in one report:
                   bench/papers/report.html (not part of `all`)
  bench.py all     all of the above but soak and papers (mininet only when Mininet is installed)

Run as root from the repository (after `cargo build --release`).
"""


import os
import sys

from experiments.common import OUT
from experiments.link import bench_accuracy, bench_density, bench_link, bench_profile
from experiments.cpu import bench_cpu
from experiments.chain import bench_chain
from experiments.dataplane import bench_dataplane
from experiments.engine import bench_engine
from experiments.images import bench_images
from experiments.internet import bench_internet
from experiments.scale import bench_plan, bench_scale
from experiments.switch import bench_flood, bench_switch
from experiments.api import bench_api
from experiments.radio import bench_channel, bench_manet
from experiments.mininet import bench_mininet
from experiments.mininet_scripts import bench_mininet_scripts
from experiments.soak import bench_soak
from experiments.machines import bench_lan_machines, bench_machine_hop, bench_machines, bench_placement
from experiments.ui import bench_ui
from experiments.papers import bench_papers
from experiments.qos import bench_qos
from experiments.wifi import bench_wifi_bianchi, bench_wifi_chain, bench_wifi_cpu, bench_wifi_hidden, bench_wifi_scale


def main():
    if os.geteuid() != 0:
        sys.exit("benchmarks create namespaces: run as root")
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    todo = {
        "link": [bench_link],
        "accuracy": [bench_accuracy],
        "density": [bench_density],
        "cpu": [bench_cpu],
        "chain": [bench_chain],
        "scale": [bench_scale, bench_plan],
        "plan": [bench_plan],
        "switch": [bench_switch],
        "flood": [bench_flood],
        "api": [bench_api],
        "channel": [bench_channel],
        "manet": [bench_manet],
        "mininet": [bench_mininet],
        "mininet-scripts": [bench_mininet_scripts],
        "soak": [bench_soak],
        "machines": [bench_machines],
        "lan-machines": [bench_lan_machines],
        "machine-hop": [bench_machine_hop],
        "ui": [bench_ui],
        "placement": [bench_placement],
        "profile": [bench_profile],
        "dataplane": [bench_dataplane],
        "engine": [bench_engine],
        "qos": [bench_qos],
        "images": [bench_images],
        "internet": [bench_internet],
        "wifi-bianchi": [bench_wifi_bianchi],
        "wifi-chain": [bench_wifi_chain],
        "wifi-hidden": [bench_wifi_hidden],
        "wifi-cpu": [bench_wifi_cpu],
        "wifi-scale": [bench_wifi_scale],
        "papers": [lambda: bench_papers(sys.argv[2:])],
        "all": [bench_link, bench_accuracy, bench_density, bench_chain, bench_scale, bench_cpu, bench_switch, bench_api, bench_channel, bench_manet, bench_mininet, bench_machines, bench_machine_hop, bench_lan_machines, bench_ui, bench_placement, bench_qos, bench_wifi_bianchi],
    }
    if which not in todo:
        sys.exit(__doc__)
    for f in todo[which]:
        f()
    # One page with every summary there is (from this run and earlier ones).
    os.makedirs(OUT, exist_ok=True)
    parts = [open(os.path.join(OUT, f)).read() for f in sorted(os.listdir(OUT)) if f.endswith(".md") and f != "SUMMARY.md"]
    with open(os.path.join(OUT, "SUMMARY.md"), "w") as f:
        f.write("# vemu benchmark summaries\n\n" + "\n".join(parts))
    print(f"CSV, PNG and Markdown files are in {OUT} (all summaries: {OUT}/SUMMARY.md)")


if __name__ == "__main__":
    main()
