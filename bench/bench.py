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
  bench.py all     all of the above but soak (mininet only when Mininet is installed)

Run as root from the repository (after `cargo build --release`).
"""

import csv
import ipaddress
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "bench", "out")
# VEMU=/path/to/vemu runs another binary (a copy, so that a build during a long run
# cannot pull it away).
VEMU = os.environ.get("VEMU") or os.path.join(ROOT, "target", "release", "vemu")


def sh(*args, check=True, capture=True):
    r = subprocess.run(list(args), capture_output=capture, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {r.stdout}{r.stderr}")
    return r.stdout


def vemu(*args, check=True):
    return sh(VEMU, *args, check=check)


def up(name, yaml, fast_path=True):
    """Bring a lab up; fast_path=False runs every link direction through the engine."""
    path = os.path.join(tempfile.gettempdir(), f"bench-{name}.yaml")
    with open(path, "w") as f:
        f.write(yaml)
    t0 = time.monotonic()
    env = dict(os.environ, VEMU_FAST_PATH="on" if fast_path else "off")
    r = subprocess.run([VEMU, "up", path, "--name", name], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"vemu up {name} failed: {r.stdout}{r.stderr}")
    return time.monotonic() - t0


def down(name):
    t0 = time.monotonic()
    vemu("down", "--lab", name, check=False)
    return time.monotonic() - t0


def iperf(prefix, server_ip, seconds=5):
    """TCP goodput in bit/s; prefix runs a command in the client's namespace."""
    out = sh(*prefix, "iperf3", "-c", server_ip, "-t", str(seconds), "-O", "1", "-J")
    return json.loads(out)["end"]["sum_received"]["bits_per_second"]


def ping_avg(prefix, target, count=50):
    sh(*prefix, "ping", "-c", "2", "-i", "0.1", target, check=False)
    out = sh(*prefix, "ping", "-q", "-c", str(count), "-i", "0.01", target)
    line = [l for l in out.splitlines() if l.startswith("rtt")][0]
    return float(line.split("=")[1].split("/")[1])


def chain_yaml(name, hops, server=True):
    nodes = "".join(f"  n{i}: {{}}\n" for i in range(1, hops + 2))
    if server:
        nodes = nodes.replace(f"  n{hops + 1}: {{}}", f"  n{hops + 1}: {{run: ['iperf3 -s -D']}}")
    links = "".join(f"  - endpoints: [n{i}, n{i + 1}]\n" for i in range(1, hops + 1))
    return f"name: {name}\naddressing: {{ipv6: none}}\nnodes:\n{nodes}links:\n{links}"


class VethChain:
    """The kernel baseline: namespaces joined by veth pairs, forwarding in the kernel."""

    def __init__(self, hops, prefix="kb"):
        self.hops = hops
        self.ns = [f"{prefix}{i}" for i in range(1, hops + 2)]
        for n in self.ns:
            sh("ip", "netns", "add", n)
            sh("ip", "-n", n, "link", "set", "lo", "up")
            sh("ip", "netns", "exec", n, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        for i in range(hops):
            a, b = self.ns[i], self.ns[i + 1]
            sh("ip", "link", "add", "kbv", "netns", a, "type", "veth", "peer", "name", "kbw", "netns", b)
            sh("ip", "-n", a, "link", "set", "kbv", "name", f"r{i}")
            sh("ip", "-n", b, "link", "set", "kbw", "name", f"l{i}")
            sh("ip", "-n", a, "addr", "add", f"10.200.{i}.1/30", "dev", f"r{i}")
            sh("ip", "-n", b, "addr", "add", f"10.200.{i}.2/30", "dev", f"l{i}")
            sh("ip", "-n", a, "link", "set", f"r{i}", "up")
            sh("ip", "-n", b, "link", "set", f"l{i}", "up")
        for k, n in enumerate(self.ns):
            for i in range(self.hops):
                if i == k or i == k - 1:
                    continue
                via = f"10.200.{k}.2" if i > k else f"10.200.{k - 1}.1"
                sh("ip", "-n", n, "route", "add", f"10.200.{i}.0/30", "via", via)
        sh("ip", "netns", "exec", self.ns[-1], "iperf3", "-s", "-D")
        self.server = f"10.200.{hops - 1}.2"
        time.sleep(0.3)

    def prefix(self, i=0):
        return ["ip", "netns", "exec", self.ns[i]]

    def close(self):
        close_namespaces(self.ns)


class KernelBridge:
    """The kernel baseline of a LAN segment: two namespaces on a Linux bridge (in a third)."""

    def __init__(self):
        self.ns = ["kbr0", "kbr1", "kbr2"]
        for n in self.ns:
            sh("ip", "netns", "add", n)
            sh("ip", "-n", n, "link", "set", "lo", "up")
        sh("ip", "-n", "kbr0", "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", "kbr0", "link", "set", "br0", "up")
        for i in (1, 2):
            sh("ip", "link", "add", "kbv", "netns", "kbr0", "type", "veth", "peer", "name", "eth0", "netns", f"kbr{i}")
            sh("ip", "-n", "kbr0", "link", "set", "kbv", "name", f"p{i}")
            sh("ip", "-n", "kbr0", "link", "set", f"p{i}", "master", "br0", "up")
            sh("ip", "-n", f"kbr{i}", "addr", "add", f"10.201.0.{i}/24", "dev", "eth0")
            sh("ip", "-n", f"kbr{i}", "link", "set", "eth0", "up")
        sh("ip", "netns", "exec", "kbr2", "iperf3", "-s", "-D")
        self.server = "10.201.0.2"
        time.sleep(0.3)

    def prefix(self):
        return ["ip", "netns", "exec", "kbr1"]

    def close(self):
        close_namespaces(self.ns)


def close_namespaces(names):
    """Kill what runs in the baseline's namespaces and delete them."""
    for n in names:
        for p in sh("ip", "netns", "pids", n, check=False).split():
            sh("kill", "-9", p, check=False)
        sh("ip", "netns", "del", n, check=False)


def published(experiment):
    """Published figures for an experiment, from bench/published.csv (with sources)."""
    path = os.path.join(ROOT, "bench", "published.csv")
    with open(path) as f:
        return [r for r in csv.DictReader(f) if r["experiment"] == experiment]


def write_md(name, title, mirrors, header, rows, notes=()):
    """A Markdown summary: what the experiment mirrors, vemu beside the baselines, the
    published figures and how to read them. Printed and written to bench/out/NAME.md."""
    fmt = lambda v: f"{v:.4g}" if isinstance(v, float) else str(v)
    lines = [f"## {title}", "", f"Mirrors: {mirrors}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows]
    pub = published(name)
    lines += ["", "Published figures:" if pub else "Published figures: none transcribed (see bench/README.md)."]
    for r in pub:
        lines.append(f"- {r['quantity']} ({r['setting']}): **{r['value']} {r['unit']}** — {r['source']}")
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
    text = "\n".join(lines) + "\n"
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, f"{name}.md"), "w") as f:
        f.write(text)
    print(text)


def fidelity_of(lab):
    """The lab's fidelity verdict on its whole run so far (from the controller), with
    its evidence unless `ok`: late frames, kernel drops on TAP queues, saturated seconds."""
    f = json.loads(vemu("status", "--lab", lab, "--json"))["fidelity"]
    if f["verdict"] == "ok":
        return "ok"
    late = f["late_frames"] / max(f["frames"], 1) * 100
    return f"{f['verdict']} ({late:.1f}% late, {f['tap_dropped']} TAP drops, busy in {f['saturated_windows']}/{f['windows']} s)"


def tbf(ns, dev, rate_bps):
    """Kernel rate limiting: a token bucket on a device's egress (the baseline for links
    with a bandwidth). Burst: 4 ms at the rate, at least 4 full frames; 50 ms of queue."""
    burst = max(4 * 1514, int(rate_bps / 8 * 0.004))
    sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", f"{int(rate_bps)}bit", "burst", str(burst), "latency", "50ms")


LOSS_PORT = 5999


def nft_loss(ns, fraction):
    """Kernel random loss of the UDP datagrams a namespace sends to LOSS_PORT (nftables
    numgen): the baseline for a link with loss."""
    n = round(fraction * 100000)
    rules = f"table inet bench {{\n chain out {{\n  type filter hook output priority 0;\n  udp dport {LOSS_PORT} numgen random mod 100000 < {n} drop\n }}\n}}\n"
    subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=rules, text=True, check=True)


def udp_loss(send_prefix, recv_prefix, target, count, rate=5000):
    """Fraction of `count` UDP datagrams (`rate` per second, one way: no replies that
    could be lost too, no sender that slows down when answers are missing) that did
    not arrive."""
    recv = ("import socket, sys\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            f"s.bind(('0.0.0.0', {LOSS_PORT}))\ns.settimeout(2)\nprint('ready', flush=True)\nn = 0\n"
            "try:\n    while True:\n        s.recv(2048)\n        n += 1\nexcept socket.timeout:\n    print(n)\n")
    send = ("import socket, time\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\nt = time.perf_counter()\n"
            f"for i in range({count}):\n    try:\n        s.sendto(b'x' * 100, ('{target}', {LOSS_PORT}))\n"
            "    except PermissionError:\n        pass  # dropped by the nftables rule on the way out\n"
            f"    t += {1 / rate}\n    d = t - time.perf_counter()\n    if d > 0:\n        time.sleep(d)\n")
    r = subprocess.Popen([*recv_prefix, "python3", "-c", recv], stdout=subprocess.PIPE, text=True)
    r.stdout.readline()
    sh(*send_prefix, "python3", "-c", send)
    return 1 - int(r.communicate()[0]) / count


def write_csv(name, header, rows):
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, name)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def plot(name, title, xlabel, ylabel, series, logx=False, logy=False):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, xs, ys in series:
        ax.plot(xs, ys, marker="o", label=label)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = os.path.join(OUT, name)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def in_node(lab, node):
    """Run a command in a vemu node's network namespace (enough for ping and iperf3)."""
    return ["ip", "netns", "exec", f"vemu-{lab}.{node}"]


def pairs_yaml(name, n, link=""):
    """n client/server pairs c_i -- s_i (s_i runs an iperf3 server); link: extra keys."""
    nodes = "".join(f"  c{i}: {{}}\n  s{i}: {{run: ['iperf3 -s -D']}}\n" for i in range(n))
    links = "".join(f"  - {{endpoints: [c{i}, s{i}]{', ' + link if link else ''}}}\n" for i in range(n))
    return f"name: {name}\nrouting: none\naddressing: {{ipv6: none}}\nnodes:\n{nodes}links:\n{links}"


def addresses(lab):
    """Each node's first IPv4 address, from the controller."""
    st = json.loads(vemu("status", "--lab", lab, "--json"))
    return {n["name"]: n["ifaces"][0]["addrs"][0].split("/")[0] for n in st["nodes"] if n["ifaces"]}


def bench_link():
    rows = []
    lan = "name: bl\naddressing: {ipv6: none}\nnodes:\n  n1: {}\n  n2: {run: ['iperf3 -s -D']}\nsegments:\n  lan: {members: [n1, n2]}\n"
    for rep in range(3):
        k = VethChain(1)
        try:
            veth = iperf(k.prefix(0), k.server)
        finally:
            k.close()
        k = KernelBridge()
        try:
            bridge = iperf(k.prefix(), k.server)
        finally:
            k.close()
        got = []
        for yaml in [chain_yaml("bl", 1), lan]:
            up("bl", yaml)
            try:
                time.sleep(0.3)
                got.append(iperf(in_node("bl", "n1"), addresses("bl")["n2"]))
            finally:
                down("bl")
        rows.append([rep, veth / 1e9, bridge / 1e9, got[0] / 1e9, got[1] / 1e9])
        print(f"link run {rep}: veth {veth/1e9:.2f}, Linux bridge {bridge/1e9:.2f}, vemu link {got[0]/1e9:.2f}, vemu LAN segment {got[1]/1e9:.2f} Gbit/s")
    write_csv("link.csv", ["run", "veth_gbps", "bridge_gbps", "vemu_link_gbps", "vemu_lan_gbps"], rows)
    runs = [r[0] for r in rows]
    plot(
        "link.png",
        "Unimpaired link: TCP goodput (iperf3)",
        "run",
        "Gbit/s",
        [("raw veth pair", runs, [r[1] for r in rows]), ("Linux bridge", runs, [r[2] for r in rows]), ("vemu link", runs, [r[3] for r in rows]), ("vemu LAN segment", runs, [r[4] for r in rows])],
    )
    mean = lambda i: sum(r[i] for r in rows) / len(rows)
    write_md(
        "link",
        "Unimpaired link: TCP goodput",
        "the cost of a user-space data plane against the kernel's best case (GINE Table VI's unlimited row; NET's virtual routing vs. a real wire)",
        ["path", "Gbit/s (mean of 3)", "vs. raw veth"],
        [["raw veth pair (kernel)", mean(1), 1.0], ["Linux bridge (kernel)", mean(2), mean(2) / mean(1)], ["vemu link", mean(3), mean(3) / mean(1)], ["vemu LAN segment (2 ports)", mean(4), mean(4) / mean(1)]],
        ["vemu copies every frame through user space twice (TAP read, TAP write) but keeps TCP super-frames whole when nothing needs them split."],
    )


def bench_profile():
    """Where the engine's CPU goes on one link carrying TCP through the engine (the
    fast path off, no impairment): perf's call-graph profile of the controller's engine
    threads while iperf3 runs, with the top functions by thread kind in a summary."""
    if shutil.which("perf") is None:
        sh("apt-get", "install", "-y", "-qq", "linux-perf")
    name = "bprof"
    seconds = int(os.environ.get("VEMU_PROFILE_SECONDS", "6"))
    up(name, chain_yaml(name, 1), fast_path=False)
    data = os.path.join(OUT, "profile.data")
    try:
        time.sleep(0.3)
        pid = str(json.loads(vemu("status", "--lab", name, "--json"))["pid"])
        server = addresses(name)["n2"]
        client = subprocess.Popen(in_node(name, "n1") + ["iperf3", "-c", server, "-t", str(seconds + 2), "-J"], stdout=subprocess.PIPE, text=True)
        time.sleep(1)
        sh("perf", "record", "-q", "-g", "-F", "999", "-p", pid, "-o", data, "--", "sleep", str(seconds))
        out, _ = client.communicate()
        gbps = json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e9
    finally:
        down(name)
    # Flat profile of the engine's threads (vemu-engine-N), and every thread's share.
    report = sh("perf", "report", "-i", data, "--stdio", "--no-children", "--comms", ",".join(f"vemu-engine-{i}" for i in range(16)), "--sort", "sym", "-g", "none", "--percent-limit", "0.5")
    threads = sh("perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "comm", "-g", "none", "--percent-limit", "0.5")
    with open(os.path.join(OUT, "profile.txt"), "w") as f:
        f.write(f"# one vemu link through the engine, iperf3 TCP {gbps:.2f} Gbit/s; perf record -g -F 999 -p CONTROLLER for {seconds} s\n\n")
        f.write("## by thread\n" + threads + "\n## engine threads, by function\n" + report)
    rows = []
    for line in report.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0].endswith("%"):
            rows.append([float(parts[0].rstrip("%")), " ".join(parts[2:])])
    rows = rows[:20]
    write_csv("profile.csv", ["percent_of_engine_samples", "function"], rows)
    print(f"profile: one link through the engine at {gbps:.2f} Gbit/s; engine threads' top functions:")
    for pct, fn in rows[:12]:
        print(f"  {pct:5.1f}%  {fn}")
    write_md("profile", "Where the engine's CPU goes (one link, TCP, engine path)", "issue 15's ask for a CPU profile of the one-link case",
             ["% of the engine threads' samples", "function"], rows,
             [f"iperf3 TCP through the engine: {gbps:.2f} Gbit/s. The whole report (by thread, then by function) is profile.txt; perf's data is profile.data (perf report -i bench/out/profile.data)."])


def bench_accuracy():
    """Set vs. achieved bandwidth, delay and loss on one link, beside kernel baselines."""
    # Bandwidth: TCP goodput through a vemu link of the set rate vs. tbf on a veth pair.
    bw = []
    for rate in [1e6, 10e6, 100e6, 1e9, 10e9]:
        k = VethChain(1)
        try:
            tbf(k.ns[0], "r0", rate)
            kernel = iperf(k.prefix(0), k.server)
        finally:
            k.close()
        up("ba", pairs_yaml("ba", 1, f"bandwidth: {int(rate)}bit"))
        try:
            time.sleep(0.3)
            v = iperf(in_node("ba", "c0"), addresses("ba")["s0"])
            verdict = fidelity_of("ba")
        finally:
            down("ba")
        bw.append([rate / 1e6, v / 1e6, v / rate, kernel / 1e6, kernel / rate, verdict])
        print(f"accuracy bandwidth {rate/1e6:g} Mbit/s: vemu {v/1e6:.2f} ({v/rate:.3f}), tbf {kernel/1e6:.2f} ({kernel/rate:.3f}), fidelity {verdict}")
    write_csv("accuracy_bandwidth.csv", ["set_mbps", "vemu_mbps", "vemu_ratio", "tbf_mbps", "tbf_ratio", "vemu_fidelity"], bw)
    plot("accuracy_bandwidth.png", "Set vs. achieved bandwidth (TCP goodput)", "set (Mbit/s)", "achieved / set",
         [("vemu link", [r[0] for r in bw], [r[2] for r in bw]), ("kernel tbf on veth", [r[0] for r in bw], [r[4] for r in bw]),
          ("TCP/IP ceiling 1448/1514", [r[0] for r in bw], [1448 / 1514] * len(bw))], logx=True)

    # Delay: ping RTT through a vemu link with the set delay in each direction.
    k = VethChain(1)
    try:
        veth_rtt = ping_avg(k.prefix(0), k.server)
    finally:
        k.close()
    dl = []
    for d_ms in [0, 0.1, 1, 10, 100, 1000]:
        up("ba", pairs_yaml("ba", 1, f"delay: {round(d_ms * 1000)}us" if d_ms else ""))
        try:
            rtt = ping_avg(in_node("ba", "c0"), addresses("ba")["s0"], count=20 if d_ms >= 100 else 50)
        finally:
            down("ba")
        dl.append([d_ms, 2 * d_ms, rtt, rtt - 2 * d_ms, veth_rtt])
        print(f"accuracy delay {d_ms:g} ms each way: RTT {rtt:.3f} ms (set {2*d_ms:g} ms, +{rtt - 2*d_ms:.3f} ms); raw veth RTT {veth_rtt:.3f} ms")
    write_csv("accuracy_delay.csv", ["set_one_way_ms", "set_rtt_ms", "vemu_rtt_ms", "vemu_excess_ms", "veth_rtt_ms"], dl)
    plot("accuracy_delay.png", "Set vs. measured delay (ping RTT)", "set RTT (ms)", "measured RTT (ms)",
         [("vemu", [r[1] for r in dl[1:]], [r[2] for r in dl[1:]]), ("set", [r[1] for r in dl[1:]], [r[1] for r in dl[1:]])], logx=True, logy=True)

    # Loss: 20000 UDP datagrams one way, the loss on that way; kernel: nftables random drop.
    ls = []
    count = 20000
    for p in [0.001, 0.01, 0.1, 0.5, 0.9]:
        k = VethChain(1)
        try:
            nft_loss(k.ns[0], p)
            kernel = udp_loss(k.prefix(0), k.prefix(1), k.server, count)
        finally:
            k.close()
        up("ba", pairs_yaml("ba", 1, f"forward: {{loss: {p * 100:g}%}}"))
        try:
            # A static neighbour entry: at 90% loss ARP requests are lost as well (as on a
            # real lossy link), and c0 could spend the whole run resolving s0's address.
            st = json.loads(vemu("status", "--lab", "ba", "--json"))
            s0 = [n for n in st["nodes"] if n["name"] == "s0"][0]["ifaces"][0]
            s0_addr = s0["addrs"][0].split("/")[0]
            sh(*in_node("ba", "c0"), "ip", "neigh", "replace", s0_addr, "lladdr", s0["mac"], "dev", "eth0", "nud", "permanent")
            v = udp_loss(in_node("ba", "c0"), in_node("ba", "s0"), s0_addr, count)
        finally:
            down("ba")
        sigma = (p * (1 - p) / count) ** 0.5
        ls.append([p * 100, v * 100, (v - p) / sigma, kernel * 100, (kernel - p) / sigma])
        print(f"accuracy loss {p*100:g}%: vemu {v*100:.3f}% ({(v-p)/sigma:+.1f} σ), nftables {kernel*100:.3f}% ({(kernel-p)/sigma:+.1f} σ)")
    write_csv("accuracy_loss.csv", ["set_percent", "vemu_percent", "vemu_sigmas", "nft_percent", "nft_sigmas"], ls)
    plot("accuracy_loss.png", "Set vs. measured loss (20000 UDP datagrams)", "set loss (%)", "measured loss (%)",
         [("vemu", [r[0] for r in ls], [r[1] for r in ls]), ("kernel nftables numgen", [r[0] for r in ls], [r[3] for r in ls]), ("set", [r[0] for r in ls], [r[0] for r in ls])], logx=True, logy=True)

    write_md(
        "accuracy",
        "Link accuracy: set vs. achieved bandwidth, delay and loss",
        "GINE Table VI (set vs. measured bandwidth, delay, loss); NET Figs. 9–11 (accuracy of the emulated bandwidth)",
        ["quantity", "set", "vemu", "vemu / set or error", "kernel baseline", "baseline / set or error", "vemu fidelity"],
        [["bandwidth (TCP goodput)", f"{r[0]:g} Mbit/s", f"{r[1]:.3g} Mbit/s", f"{r[2]:.3f}", f"tbf {r[3]:.3g} Mbit/s", f"{r[4]:.3f}", r[5]] for r in bw]
        + [["delay (ping RTT)", f"{r[1]:g} ms", f"{r[2]:.3f} ms", f"+{r[3]:.3f} ms", f"raw veth RTT {r[4]:.3f} ms", "(no netem here)", ""] for r in dl]
        + [["loss (UDP, one way)", f"{r[0]:g}%", f"{r[1]:.3f}%", f"{r[2]:+.1f} σ", f"nftables {r[3]:.3f}%", f"{r[4]:+.1f} σ", ""] for r in ls],
        [
            "Bandwidth counts whole Ethernet frames, so TCP goodput tops out at 1448/1514 = 0.956 of the set rate.",
            "Delay: the excess over the set RTT is the data plane's own cost (compare the raw veth RTT, which has no emulation at all).",
            "Loss: σ is the binomial standard deviation for 20000 trials; |z| < 4 means the measured rate agrees with the setting.",
        ],
    )


def bench_density():
    """Accuracy vs. the number of links sharing the machine: n pairs, each on a link of
    the same rate, all running TCP at once (NET Figs. 9–11)."""
    counts = [int(x) for x in os.environ.get("VEMU_DENSITY_PAIRS", "1,2,4,8,16,32").split(",")]
    rows = []
    rates = [float(x) * 1e6 for x in os.environ.get("VEMU_DENSITY_MBPS", "5,54,100").split(",")]
    for rate in rates:
        for n in counts:
            def run_all(prefixes, servers):
                procs = [subprocess.Popen([*pre, "iperf3", "-c", srv, "-t", "4", "-O", "1", "-J"], stdout=subprocess.PIPE, text=True) for pre, srv in zip(prefixes, servers)]
                return [json.loads(p.communicate()[0])["end"]["sum_received"]["bits_per_second"] / rate for p in procs]

            kern = [VethChain(1, prefix=f"kd{i}-") for i in range(n)]
            try:
                for k in kern:
                    tbf(k.ns[0], "r0", rate)
                kr = run_all([k.prefix(0) for k in kern], [k.server for k in kern])
            finally:
                for k in kern:
                    k.close()
            def vemu_run(shaper):
                up("bd", pairs_yaml("bd", n, f"bandwidth: {int(rate)}bit, shaper: {shaper}"))
                try:
                    time.sleep(0.5)
                    addr = addresses("bd")
                    r = run_all([in_node("bd", f"c{i}") for i in range(n)], [addr[f"s{i}"] for i in range(n)])
                    return r, fidelity_of("bd"), sh(*in_node("bd", "c0"), "sysctl", "-n", "net.ipv4.tcp_congestion_control").strip()
                finally:
                    down("bd")
            vr, verdict, cc = vemu_run("engine")
            sr, sverdict, _ = vemu_run("kernel")
            rows.append([rate / 1e6, n, sum(vr) / n, min(vr), sum(kr) / n, min(kr), verdict, sum(sr) / n, min(sr), sverdict])
            print(f"density {rate/1e6:g} Mbit/s x {n:2} links: vemu mean {sum(vr)/n:.3f} min {min(vr):.3f} of the set rate ({verdict}); "
                  f"vemu shaper: kernel mean {sum(sr)/n:.3f} min {min(sr):.3f} ({sverdict}); tbf mean {sum(kr)/n:.3f} min {min(kr):.3f}")
    write_csv("density.csv", ["rate_mbps", "links", "vemu_mean_ratio", "vemu_min_ratio", "tbf_mean_ratio", "tbf_min_ratio", "vemu_fidelity",
                              "vemu_kernel_shaper_mean_ratio", "vemu_kernel_shaper_min_ratio", "vemu_kernel_shaper_fidelity"], rows)
    series = []
    for rate in sorted({r[0] for r in rows}):
        pts = [r for r in rows if r[0] == rate]
        series.append((f"vemu {rate:g} Mbit/s (worst link)", [r[1] for r in pts], [r[3] for r in pts]))
        series.append((f"vemu shaper: kernel {rate:g} Mbit/s (worst link)", [r[1] for r in pts], [r[8] for r in pts]))
        series.append((f"tbf {rate:g} Mbit/s (worst link)", [r[1] for r in pts], [r[5] for r in pts]))
    plot("density.png", "Accuracy vs. links sharing the machine (all TCP at once)", "links (2 nodes each)", "achieved / set rate", series, logx=True)
    notes = []
    for rate in sorted({r[0] for r in rows}):
        for name, col in [("engine's serializer", 3), ("kernel's shaper (shaper: kernel)", 8)]:
            good = [r[1] for r in rows if r[0] == rate and r[col] >= 0.95 * 1448 / 1514]
            notes.append(f"{rate:g} Mbit/s, {name}: every link within 5% of the TCP ceiling up to {max(good) if good else 0} links ({2 * max(good) if good else 0} nodes) on this machine.")
    notes.append("The fidelity column is the monitor's verdict on the run: it must turn from ok when the worst link falls behind.")
    notes.append(f"TCP congestion control in the nodes and in the baseline's namespaces: {cc} (the machine's default; it changes the figures: with cubic, 32 x 54 Mbit/s reached 0.84-0.86 through vemu where BBR reached 0.71-0.77).")
    write_md("density", "Accuracy vs. nodes sharing the machine", "NET Figs. 9–11 (how many virtual nodes per machine before the emulated 5/54/100 Mbit/s degrade)",
             ["set rate (Mbit/s)", "links", "vemu mean / set", "vemu worst / set", "tbf mean / set", "tbf worst / set", "vemu fidelity",
              "shaper: kernel mean / set", "shaper: kernel worst / set", "shaper: kernel fidelity"], rows, notes)


def wait_idle(threshold=0.9, timeout=30):
    """Wait until the machine is idle (the kernel frees deleted namespaces in the
    background, for seconds after a big lab or baseline is gone)."""
    def busy_idle():
        f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
        return sum(f) - f[3] - f[4], f[3] + f[4]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        b0, i0 = busy_idle()
        time.sleep(0.5)
        b1, i1 = busy_idle()
        if (i1 - i0) / max((b1 - b0) + (i1 - i0), 1) >= threshold:
            return


def cpu_probe(seconds=4):
    """The share of the machine a CPU-bound program gets: one busy loop per core for
    `seconds`, their CPU time over the wall time of all cores (1.0 = the whole machine).
    CPU time, not iterations: the loops' speed varies with the machine, their share not."""
    # Each loop pinned to its core: left alone, the scheduler sometimes keeps both on
    # one core for seconds and the probe would measure placement, not what is left.
    code = "import os, sys, time\nos.sched_setaffinity(0, {int(sys.argv[1])})\n" \
        f"end = time.perf_counter() + {seconds}\nwhile time.perf_counter() < end:\n    pass\nprint(time.process_time())"
    cores = os.cpu_count() or 1
    t0 = time.perf_counter()
    procs = [subprocess.Popen(["python3", "-c", code, str(c)], stdout=subprocess.PIPE, text=True) for c in range(cores)]
    cpu = sum(float(p.communicate()[0]) for p in procs)
    return cpu / ((time.perf_counter() - t0) * cores)


def bench_cpu():
    """CPU left for the software under test vs. the number of nodes, every pair of nodes
    exchanging 500 pings/s of 1000 bytes (NET Fig. 16)."""
    wait_idle()
    base = cpu_probe()
    print(f"cpu: on the empty machine the busy loops get {base:.3f} of it")
    rows = []
    for n in [10, 50, 100, 200]:
        pairs = n // 2

        def load(prefixes, servers):
            return [subprocess.Popen([*pre, "ping", "-q", "-i", "0.002", "-s", "1000", "-w", "6", srv], stdout=subprocess.DEVNULL) for pre, srv in zip(prefixes, servers)]

        kern = [VethChain(1, prefix=f"kc{i}-") for i in range(pairs)]
        try:
            wait_idle()
            procs = load([k.prefix(0) for k in kern], [k.server for k in kern])
            time.sleep(1)
            k_left = cpu_probe()
            for p in procs:
                p.wait()
        finally:
            for k in kern:
                k.close()
        wait_idle()
        up("bcpu", pairs_yaml("bcpu", pairs))
        try:
            wait_idle()
            idle = cpu_probe()
            addr = addresses("bcpu")
            procs = load([in_node("bcpu", f"c{i}") for i in range(pairs)], [addr[f"s{i}"] for i in range(pairs)])
            time.sleep(1)
            cpu0, t0 = engine_cpu_s("bcpu"), time.monotonic()
            v_left = cpu_probe()
            engine = (engine_cpu_s("bcpu") - cpu0) / (time.monotonic() - t0) * 100
            for p in procs:
                p.wait()
            verdict = fidelity_of("bcpu")
        finally:
            down("bcpu")
        rows.append([n, pairs * 1000, idle, v_left, engine, k_left, verdict])
        print(f"cpu {n:4} nodes ({pairs * 1000} pings/s): left for software under test: vemu idle {idle:.3f}, vemu loaded {v_left:.3f} (engine {engine:.0f}% of a core, {verdict}), kernel veth {k_left:.3f}")
    write_csv("cpu.csv", ["nodes", "pings_per_s", "vemu_idle_left", "vemu_loaded_left", "engine_cpu_percent", "kernel_loaded_left", "vemu_fidelity"], rows)
    ns = [r[0] for r in rows]
    plot("cpu.png", "CPU left for the software under test", "nodes", "fraction of an empty machine",
         [("vemu, idle lab", ns, [r[2] for r in rows]), ("vemu, 500 pings/s per pair", ns, [r[3] for r in rows]), ("kernel veth pairs, same pings", ns, [r[5] for r in rows])], logx=True)
    write_md("cpu", "CPU left for the software under test", "NET Fig. 16 (CPU available to the software under test vs. number of virtual nodes)",
             ["nodes", "pings/s (all pairs)", "vemu idle: left", "vemu loaded: left", "engine CPU (% of a core)", "kernel veth, same load: left", "vemu fidelity"], rows,
             [f"'left' is the CPU time two busy loops (one per core) get over 4 s, as a fraction of both cores' time; on the empty machine they got {base:.3f}.",
              "The difference between vemu and the kernel column is what emulation costs; idle nodes cost nothing (no process, no timer)."])


def bench_chain():
    """Each chain three ways in one run: the kernel's veth chain, vemu (unimpaired links
    go by its kernel fast path) and vemu with every direction in its engine."""
    rows = []
    for hops in [1, 2, 4, 8, 12, 16]:
        k = VethChain(hops)
        try:
            k_rtt = ping_avg(k.prefix(0), k.server)
            k_bw = iperf(k.prefix(0), k.server)
        finally:
            k.close()
        row = [hops, k_rtt]
        measured = {}
        for fast in (True, False):
            name = "bc"
            up(name, chain_yaml(name, hops), fast_path=fast)
            try:
                time.sleep(0.3)
                target = f"10.0.0.{4 * (hops - 1) + 2}"
                pre = in_node(name, "n1")
                measured[fast] = (ping_avg(pre, target), iperf(pre, target))
            finally:
                down(name)
        (f_rtt, f_bw), (e_rtt, e_bw) = measured[True], measured[False]
        rows.append([hops, k_rtt, f_rtt, e_rtt, k_bw / 1e9, f_bw / 1e9, e_bw / 1e9])
        print(f"chain {hops:2d} hops: RTT kernel {k_rtt:.3f} ms, vemu {f_rtt:.3f} ms, engine path {e_rtt:.3f} ms; "
              f"TCP kernel {k_bw/1e9:.2f}, vemu {f_bw/1e9:.2f}, engine path {e_bw/1e9:.2f} Gbit/s")
    write_csv("chain.csv", ["hops", "kernel_rtt_ms", "vemu_rtt_ms", "vemu_engine_rtt_ms", "kernel_gbps", "vemu_gbps", "vemu_engine_gbps"], rows)
    hops = [r[0] for r in rows]
    series = lambda i: [r[i] for r in rows]
    plot("chain_rtt.png", "Chain: unimpaired RTT vs hops", "hops", "RTT (ms)",
         [("kernel veth chain", hops, series(1)), ("vemu (kernel fast path)", hops, series(2)), ("vemu, engine path", hops, series(3))])
    plot("chain_tcp.png", "Chain: TCP goodput vs hops", "hops", "Gbit/s",
         [("kernel veth chain", hops, series(4)), ("vemu (kernel fast path)", hops, series(5)), ("vemu, engine path", hops, series(6))])
    per_hop = lambda i: (rows[-1][i] - rows[0][i]) / (rows[-1][0] - rows[0][0])
    ratio = lambda h, i: next(r[i] / r[4] for r in rows if r[0] == h)
    write_md("chain", "Chain: RTT and TCP throughput vs. hops (static routes)", "NET Figs. 13–15, vimage Fig. 6, GINE Tables III–V",
             ["hops", "kernel RTT (ms)", "vemu RTT (ms)", "engine-path RTT (ms)", "kernel TCP (Gbit/s)", "vemu TCP (Gbit/s)", "engine-path TCP (Gbit/s)"], rows,
             [f"RTT per added hop: kernel {per_hop(1) * 1000:.1f} µs, vemu {per_hop(2) * 1000:.1f} µs, engine path {per_hop(3) * 1000:.1f} µs (slope from {rows[0][0]} to {rows[-1][0]} hops).",
              f"TCP ÷ kernel at 1 / 8 / 16 hops: vemu {ratio(1, 5):.2f} / {ratio(8, 5):.2f} / {ratio(16, 5):.2f}, engine path {ratio(1, 6):.2f} / {ratio(8, 6):.2f} / {ratio(16, 6):.2f}.",
              "Unimpaired links go by vemu's kernel fast path (veth peers steered by a TC program); the engine path is what any impaired direction takes.",
              "Throughput through many hops is bounded by CPU: every hop's forwarding (and, on the engine path, the engine's work) shares the two cores."])


def bench_dataplane():
    """Issue 15's table in one run: one unimpaired link's TCP goodput against a raw veth
    pair, RTT added per unimpaired hop, TCP through 8 and 16 hops against the kernel's
    veth chain, 32 links of 100 Mbit/s all running TCP, and a 10,000-node tree up and
    down — for vemu as built, and (VEMU_BEFORE=/path/to/vemu) for an earlier vemu, beside
    the kernel baselines measured in the same run. The earlier build's 10,000-node tree is
    only tried with VEMU_BEFORE_SCALE=1 (before issue 15 it did not fit this machine's open
    files and failed after 15 minutes)."""
    global VEMU
    after = VEMU
    builds = [("after", after)]
    if os.environ.get("VEMU_BEFORE"):
        builds.insert(0, ("before", os.environ["VEMU_BEFORE"]))
    rows = []
    # The kernel's figures, once.
    veth = []
    for _ in range(3):
        k = VethChain(1)
        try:
            veth.append(iperf(k.prefix(0), k.server))
        finally:
            k.close()
    # Each chain's RTT and TCP goodput: the median of 3 (a 2-core machine's figures
    # move by a fifth between runs).
    kern = {}
    for hops in (1, 8, 16):
        runs = []
        for _ in range(3):
            k = VethChain(hops)
            try:
                runs.append((ping_avg(k.prefix(0), k.server), iperf(k.prefix(0), k.server)))
            finally:
                k.close()
        kern[hops] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
    veth_bps = sum(veth) / len(veth)
    k_per_hop = (kern[16][0] - kern[1][0]) / 15 * 1000
    dens_rate, dens_n = 100e6, int(os.environ.get("VEMU_DATAPLANE_LINKS", "32"))
    kd = [VethChain(1, prefix=f"kd{i}-") for i in range(dens_n)]
    try:
        for k in kd:
            tbf(k.ns[0], "r0", dens_rate)
        procs = [subprocess.Popen([*k.prefix(0), "iperf3", "-c", k.server, "-t", "4", "-O", "1", "-J"], stdout=subprocess.PIPE, text=True) for k in kd]
        tbf_r = [json.loads(p.communicate()[0])["end"]["sum_received"]["bits_per_second"] / dens_rate for p in procs]
    finally:
        for k in kd:
            k.close()
    rows.append(["kernel", veth_bps / 1e9, 1.0, k_per_hop, kern[8][1] / 1e9, 1.0, kern[16][1] / 1e9, 1.0, f"tbf {sum(tbf_r) / dens_n:.3f} / {min(tbf_r):.3f}", "", ""])
    print(f"dataplane kernel: veth {veth_bps/1e9:.2f} Gbit/s, RTT per hop {k_per_hop:.1f} us, 8 hops {kern[8][1]/1e9:.2f}, 16 hops {kern[16][1]/1e9:.2f} Gbit/s; "
          f"{dens_n} x tbf 100 Mbit/s mean {sum(tbf_r)/dens_n:.3f} worst {min(tbf_r):.3f}")
    for label, binary in builds:
        VEMU = binary
        try:
            link = []
            for _ in range(3):
                up("bdp", chain_yaml("bdp", 1))
                try:
                    time.sleep(0.3)
                    link.append(iperf(in_node("bdp", "n1"), "10.0.0.2"))
                finally:
                    down("bdp")
            chain = {}
            for hops in (1, 8, 16):
                runs = []
                for _ in range(3):
                    up("bdp", chain_yaml("bdp", hops))
                    try:
                        time.sleep(0.3)
                        target, pre = f"10.0.0.{4 * (hops - 1) + 2}", in_node("bdp", "n1")
                        runs.append((ping_avg(pre, target), iperf(pre, target)))
                    finally:
                        down("bdp")
                chain[hops] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
            per_hop = (chain[16][0] - chain[1][0]) / 15 * 1000
            dens = []
            for shaper in (["engine", "kernel"] if label == "after" else ["engine"]):
                up("bdp", pairs_yaml("bdp", dens_n, f"bandwidth: 100Mbit, shaper: {shaper}") if label == "after" else pairs_yaml("bdp", dens_n, "bandwidth: 100Mbit"))
                try:
                    time.sleep(0.5)
                    addr = addresses("bdp")
                    procs = [subprocess.Popen([*in_node("bdp", f"c{i}"), "iperf3", "-c", addr[f"s{i}"], "-t", "4", "-O", "1", "-J"], stdout=subprocess.PIPE, text=True) for i in range(dens_n)]
                    r = [json.loads(p.communicate()[0])["end"]["sum_received"]["bits_per_second"] / dens_rate for p in procs]
                    dens.append(f"{shaper}: {sum(r) / dens_n:.3f} / {min(r):.3f} {fidelity_of('bdp')}")
                finally:
                    down("bdp")
            scale = ""
            if label == "after" or os.environ.get("VEMU_BEFORE_SCALE"):
                n = 10000
                nodes = "".join(f"  n{i}: {{}}\n" for i in range(1, n + 1))
                links = "".join(f"  - endpoints: [n{i // 2}, n{i}]\n" for i in range(2, n + 1))
                time.sleep(3)
                try:
                    t_up = up("bdp", f"name: bdp\nrouting: none\naddressing: {{ipv6: none}}\nnodes:\n{nodes}links:\n{links}")
                    scale = f"up {t_up:.1f} s, down {down('bdp'):.1f} s"
                except RuntimeError as e:
                    scale = f"failed: {str(e).splitlines()[-1][:120]}"
                    vemu("clean", check=False)
        finally:
            VEMU = after
        mean = sum(link) / len(link)
        rows.append([label, mean / 1e9, mean / veth_bps, per_hop, chain[8][1] / 1e9, chain[8][1] / kern[8][1], chain[16][1] / 1e9, chain[16][1] / kern[16][1], "; ".join(dens), scale, binary])
        print(f"dataplane {label}: link {mean/1e9:.2f} Gbit/s ({mean/veth_bps:.2f} of veth), RTT per hop {per_hop:.1f} us, "
              f"8 hops {chain[8][1]/1e9:.2f} ({chain[8][1]/kern[8][1]:.2f}), 16 hops {chain[16][1]/1e9:.2f} ({chain[16][1]/kern[16][1]:.2f}); "
              f"{dens_n} x 100 Mbit/s {'; '.join(dens)}; 10,000 nodes {scale or 'not tried'}")
    header = ["build", "one link TCP (Gbit/s)", "÷ raw veth", "RTT per hop (µs)", "8 hops TCP (Gbit/s)", "÷ kernel", "16 hops TCP (Gbit/s)", "÷ kernel",
              f"{dens_n} x 100 Mbit/s TCP: mean / worst ÷ set, verdict", "10,000-node tree", "binary"]
    write_csv("dataplane.csv", header, rows)
    builds_ = [r for r in rows if r[0] != "kernel"]
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.2))
    names = ["one link ÷ veth", "8 hops ÷ kernel", "16 hops ÷ kernel"]
    width = 0.8 / max(len(builds_), 1)
    for j, r in enumerate(builds_):
        ax.bar([i + j * width for i in range(3)], [r[2], r[5], r[7]], width, label=f"vemu {r[0]}")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xticks([i + width * (len(builds_) - 1) / 2 for i in range(3)], names)
    ax.set_ylabel("TCP goodput ÷ kernel baseline")
    ax.set_title("Unimpaired data plane against the kernel (issue 15)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "dataplane.png"), dpi=110)
    plt.close(fig)
    write_md("dataplane", "Data plane at kernel speed: issue 15's table in one run", "issue 15's goals (one link ≥ 0.9 of a veth pair, ≤ 8 µs RTT per hop, 8 hops ≥ 0.8 and 16 hops ≥ 0.7 of the kernel chain, 32 x 100 Mbit/s links accurate with verdict ok, 10,000 nodes up and down in ≤ 30 s each)",
             header[:-1], [r[:-1] for r in rows],
             ["Unimpaired links go by vemu's kernel fast path; the density row runs with the engine's serializer and with shaper: kernel (the kernel's token bucket on the fast path).",
              "One link: the mean of 3 runs; chains (RTT and TCP, kernel and vemu alike): the median of 3 runs each; RTT per hop: the slope from 1 to 16 hops.",
              "before: " + (os.environ.get("VEMU_BEFORE") or "not run (VEMU_BEFORE=/path/to/an earlier vemu)") + ". The kernel row was measured once, in this run, beside both."])


def mem_available_kib():
    for line in open("/proc/meminfo"):
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    return 0


def rss_kib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def bench_scale():
    rows = []
    for n in [10, 100, 1000, 10000]:
        for routing in ["static", "none"]:
            if routing == "static" and n > 1000:
                # Static routes are aggregated (~20-100 a node in a 1000-node tree, not
                # 999); 10,000 nodes are measured without them (see README).
                continue
            name = "bs"
            # A tree: node i hangs off node i // 2 (a connected lab with n - 1 links).
            nodes = "".join(f"  n{i}: {{}}\n" for i in range(1, n + 1))
            links = "".join(f"  - endpoints: [n{i // 2}, n{i}]\n" for i in range(2, n + 1))
            yaml = f"name: {name}\nrouting: {routing}\naddressing: {{ipv6: none}}\nnodes:\n{nodes}links:\n{links}"
            time.sleep(3)  # let the kernel finish freeing the previous lab
            mem0 = mem_available_kib()
            t_up = up(name, yaml)
            status = json.loads(vemu("status", "--lab", name, "--json"))
            rss = rss_kib(status["pid"])
            mem1 = mem_available_kib()
            t_down = down(name)
            rows.append([n, routing, t_up, t_down, rss / 1024, (mem0 - mem1) / 1024])
            print(f"scale {n:5d} nodes, routing {routing:6s}: up {t_up:6.2f} s, down {t_down:6.2f} s, controller RSS {rss/1024:6.1f} MiB, machine memory used {(mem0-mem1)/1024:7.1f} MiB")
    write_csv("scale.csv", ["nodes", "routing", "up_s", "down_s", "controller_rss_mib", "system_mem_mib"], rows)
    none = [r for r in rows if r[1] == "none"]
    ns = [r[0] for r in none]
    plot("scale_time.png", "Lab start-up / tear-down (tree, routing: none)", "nodes", "seconds", [("up", ns, [r[2] for r in none]), ("down", ns, [r[3] for r in none])], logx=True, logy=True)
    plot("scale_mem.png", "Lab memory (tree, routing: none)", "nodes", "MiB", [("controller RSS", ns, [r[4] for r in none]), ("machine (MemAvailable drop)", ns, [r[5] for r in none])], logx=True, logy=True)
    write_md("scale", "Scale: start-up, tear-down and memory", "NET's headline (virtual nodes per testbed machine); NET Fig. 16's node counts",
             ["nodes", "routing", "up (s)", "down (s)", "controller RSS (MiB)", "machine memory (MiB)"], rows,
             ["Static routing computes a shortest-path tree per node (O(n² log n)) and installs aggregated routes (siblings in the address space with the same next hop merged): 10,000 nodes are measured without it."])


def bench_switch():
    # Decision time: the sans-IO switch alone, in a tight loop.
    out = sh("cargo", "run", "--release", "-q", "-p", "vemu-switch", "--example", "decision")
    rows = [l.split(",") for l in out.strip().splitlines()[1:]]
    rows = [[int(r[0]), float(r[1]), float(r[2]), float(r[3])] for r in rows]
    write_csv("switch_decision.csv", ["ports", "unicast_ns_per_frame", "flood_ns_per_frame", "flood_ns_per_recipient"], rows)
    ports = [r[0] for r in rows]
    plot(
        "switch_decision.png",
        "Switching decision time per frame (learned unicast)",
        "ports",
        "ns per frame",
        [("vemu-switch, unicast", ports, [r[1] for r in rows]), ("NET kernel switch, P4 2.4 GHz (published)", ports, [98] * len(ports))],
        logx=True,
    )
    print("switch decision, unicast ns/frame: " + ", ".join(f"{r[0]} ports {r[1]:.1f}" for r in rows))

    # Throughput: frames blasted from h1 through the engine's switch to the other members.
    sh("cargo", "build", "--release", "-q", "--example", "blast", "-p", "vemu")
    blast = os.path.join(ROOT, "target", "release", "examples", "blast")
    seconds = 2
    table = []
    for n in [2, 4, 8, 16, 32, 64]:
        name = f"b-sw{n}"
        nodes = "".join(f"  h{i}: {{}}\n" for i in range(1, n + 1))
        members = ", ".join(f"h{i}" for i in range(1, n + 1))
        up(name, f"name: {name}\naddressing: {{ipv6: none}}\nnodes:\n{nodes}segments:\n  lan: {{members: [{members}]}}\n")
        try:
            st = json.loads(vemu("status", "--json", "--lab", name))
            h2_mac = [x for x in st["nodes"] if x["name"] == "h2"][0]["ifaces"][0]["mac"]
            vemu("exec", "--lab", name, "h1", "--", "ping", "-c", "1", "-W", "1", "h2", check=False)
            for mode, dst in [("unicast", h2_mac), ("broadcast", "broadcast")]:
                for size in [64, 512, 1500]:
                    def delivered():
                        s = json.loads(vemu("status", "--json", "--lab", name))
                        return sum(m["ingress"]["stats"]["tx_frames"] for m in s["segments"][0]["members"])
                    before = delivered()
                    sent = int(vemu("exec", "--lab", name, "h1", "--", blast, "eth0", dst, str(size), str(seconds)).strip())
                    time.sleep(0.2)
                    got = delivered() - before
                    fps = got / seconds
                    table.append([n, mode, size, sent / seconds, fps, fps * size * 8 / 1e9])
        finally:
            down(name)
    write_csv("switch_throughput.csv", ["ports", "mode", "frame_bytes", "offered_fps", "delivered_fps", "delivered_gbps"], table)
    series = []
    for mode in ["unicast", "broadcast"]:
        for size in [64, 512, 1500]:
            pts = [r for r in table if r[1] == mode and r[2] == size]
            series.append((f"{mode} {size} B", [r[0] for r in pts], [r[5] for r in pts]))
    plot("switch_throughput.png", "LAN segment throughput (all recipients together)", "ports", "Gbit/s delivered", series, logx=True)
    write_md("switch", "LAN segments: switching decision and throughput", "NET's kernel switch (decision time, unicast throughput)",
             ["ports", "mode", "frame (B)", "offered (frames/s)", "delivered (frames/s)", "delivered (Gbit/s)"], table,
             ["Decision time per frame, learned unicast: " + ", ".join(f"{r[0]} ports {r[1]:.1f} ns" for r in rows)])


def bench_api():
    sys.path.insert(0, os.path.join(ROOT, "python"))
    from vemu import Lab  # noqa: E402

    # (1) Link changes: request -> reply, 1000 times, alternating values.
    up("b-api", "name: b-api\naddressing: {ipv6: none}\nnodes: {a: {}, b: {}}\nlinks:\n  - endpoints: [a, b]\n")
    try:
        lab = Lab("b-api")
        link = lab.link("a", "b")
        times = []
        for i in range(1000):
            t0 = time.perf_counter()
            link.set(delay=f"{i % 7}ms")
            times.append((time.perf_counter() - t0) * 1e6)
        times.sort()
        p50, p99, mx = times[len(times) // 2], times[int(len(times) * 0.99)], times[-1]
    finally:
        down("b-api")
    write_csv("api_latency.csv", ["request", "microseconds"], list(enumerate(times)))
    plot("api_latency.png", "Link change: request to reply (sorted)", "request (sorted)", "µs", [("PATCH /v1/links/a:b", list(range(len(times))), times)])
    print(f"api: link change request->reply (engine updated before the reply) p50 {p50:.0f} µs, p99 {p99:.0f} µs, max {mx:.0f} µs")

    # (2) Event stream with 1000 links (a star: hub + 1000 leaves).
    n = 1000
    nodes = "".join(f"  l{i}: {{}}\n" for i in range(n))
    links = "".join(f"  - endpoints: [hub, l{i}]\n" for i in range(n))
    up("b-api1k", f"name: b-api1k\nrouting: none\naddressing: {{ipv6: none}}\nnodes:\n  hub: {{}}\n{nodes}links:\n{links}")
    rows = []
    try:
        lab = Lab("b-api1k")
        for period in ["1s", "200ms", "50ms", "10ms"]:
            got, nbytes = 0, 0
            t0 = time.monotonic()
            for ev in lab.events(stats=period):
                if ev["type"] == "stats":
                    got += 1
                    nbytes += len(json.dumps(ev))
                if time.monotonic() - t0 >= 5:
                    break
            dt = time.monotonic() - t0
            rows.append([period, got / dt, nbytes / dt / 1e6])
            print(f"api: event stream, 1000 links, stats every {period:>5}: {got / dt:6.1f} snapshots/s, {nbytes / dt / 1e6:6.2f} MB/s of JSON")
        # Link-change events as fast as requests go.
        import threading

        seen = []

        def read():
            for ev in lab.events(stats=None):
                if ev["type"] == "link":
                    seen.append(time.monotonic())
                    if len(seen) >= n:
                        return

        t = threading.Thread(target=read)
        t.start()
        time.sleep(0.3)
        t0 = time.monotonic()
        for i in range(n):
            lab.link("hub", f"l{i}").set(delay="1ms", direction="forward")
        t.join(timeout=60)
        dt = (seen[-1] - t0) if seen else float("nan")
        rows.append(["link events", len(seen) / dt, 0])
        print(f"api: {len(seen)} link-change events delivered in {dt:.2f} s ({len(seen) / dt:.0f} events/s, bounded by the requests)")
    finally:
        down("b-api1k")
    write_csv("api_events.csv", ["stats_period", "per_second", "mb_per_second"], rows)


def bench_channel():
    out = sh("cargo", "run", "--release", "-q", "-p", "vemu-radio", "--example", "channel")
    rows = [l.split(",") for l in out.strip().splitlines()[1:]]
    rows = [[int(r[0]), r[1], float(r[2]), float(r[3]), float(r[4])] for r in rows]
    write_csv("channel.csv", ["members", "layout", "grid_us_per_tick", "all_pairs_us_per_tick", "mean_neighbours"], rows)
    series = []
    for layout in ["density", "fixed"]:
        pts = [r for r in rows if r[1] == layout]
        series.append((f"grid index, {layout}", [r[0] for r in pts], [r[2] / 1e3 for r in pts]))
        series.append((f"every pair, {layout}", [r[0] for r in pts], [r[3] / 1e3 for r in pts]))
    n0 = rows[0][0]
    base = [r for r in rows if r[1] == "density"][0][2]
    series.append(("linear growth from 100 (density)", [r[0] for r in rows if r[1] == "density"], [base / 1e3 * r[0] / n0 for r in rows if r[1] == "density"]))
    plot("channel.png", "Channel update per tick (positions + neighbour sets)", "members", "ms per tick", series, logx=True, logy=True)
    write_md("channel", "Wireless channel update per tick", "NET's MANET density (50 members per 1500 m × 300 m), grown to 5000 members",
             ["members", "layout", "grid (µs/tick)", "every pair (µs/tick)", "neighbours each"], rows)
    for r in rows:
        print(f"channel {r[0]:5} members ({r[1]:7}): {r[2]/1e3:8.2f} ms/tick with the grid, {r[3]/1e3:8.2f} ms checking every pair, {r[4]:.0f} neighbours each")


def engine_cpu_s(lab):
    """CPU seconds used so far by the lab's engine threads."""
    pid = open(f"/run/vemu/{lab}/daemon.pid").read().strip()
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            name = open(f"/proc/{pid}/task/{t}/comm").read().strip()
            if name.startswith("vemu-engine"):
                f = open(f"/proc/{pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()
                total += int(f[11]) + int(f[12])
        except OSError:
            pass
    return total / os.sysconf("SC_CLK_TCK")


def bench_manet():
    import random

    duration = int(os.environ.get("VEMU_MANET_DURATION", "60"))
    pauses = [int(p) for p in os.environ.get("VEMU_MANET_PAUSES", "0,15,30,60").split(",")]
    base = open(os.path.join(ROOT, "examples", "manet-50.yaml")).read()
    rows = []
    for pause in pauses:
        seed = 1
        yaml = base.replace("pause: 0s", f"pause: {pause}s").replace("seed: 1", f"seed: {seed}")
        path = os.path.join(ROOT, "examples", f".bench-manet-{pause}.yaml")
        with open(path, "w") as f:
            f.write(yaml)
        try:
            vemu("up", path, "--name", "b-manet")
        finally:
            os.remove(path)
        try:
            rng = random.Random(seed)
            for _ in range(20):
                a, b = rng.sample(range(1, 51), 2)
                vemu("traffic", "cbr", "--lab", "b-manet", "--from", f"n{a}", "--to", f"n{b}", "--size", "64", "--rate", "4/s", "--start", "10s", "--duration", f"{duration}s")
            cpu0, t0 = engine_cpu_s("b-manet"), time.monotonic()
            time.sleep(10 + duration + 2)
            cpu = (engine_cpu_s("b-manet") - cpu0) / (time.monotonic() - t0) * 100
        finally:
            down("b-manet")
        r = json.loads(vemu("report", "--lab", "b-manet", "--json"))
        rows.append([pause, duration, seed, r["sent"], r["delivered"], r["pdr"], r["delay_ms"]["mean"], r["routing_frames"], r["routing_per_delivered"], cpu])
        print(f"manet pause {pause:4} s: delivery ratio {r['pdr']:.3f} ({r['delivered']}/{r['sent']}), mean delay {r['delay_ms']['mean']:.1f} ms, "
              f"{r['routing_per_delivered']:.1f} routing frames per delivered packet, engine CPU {cpu:.1f}% of a core")
    write_md("manet", "50-node MANET with babeld", "NET's MANET scenario (50 nodes, 1500 m × 300 m, random waypoint, AODV; delivery ratio and overhead vs. pause time)",
             ["pause (s)", "duration (s)", "seed", "sent", "delivered", "delivery ratio", "mean delay (ms)", "routing frames", "routing / delivered", "engine CPU (%)"], rows)
    write_csv("manet.csv", ["pause_s", "duration_s", "seed", "sent", "delivered", "pdr", "delay_ms_mean", "routing_frames", "routing_per_delivered", "engine_cpu_percent"], rows)
    xs = [r[0] for r in rows]
    plot("manet_pdr.png", f"50-node MANET, babeld, 20 CBR flows, {duration} s", "pause time (s)", "packet delivery ratio", [("vemu + babeld", xs, [r[5] for r in rows])])
    plot("manet_overhead.png", f"50-node MANET, babeld, 20 CBR flows, {duration} s", "pause time (s)", "routing frames per delivered packet", [("vemu + babeld", xs, [r[8] for r in rows])])


# Debian's Mininet is a module of the system's Python (another python3 may come first on PATH).
MININET_PYTHON = "/usr/bin/python3"

MININET_LAN = r"""
import sys, time, json
from mininet.net import Mininet
from mininet.topo import SingleSwitchTopo
from mininet.nodelib import LinuxBridge
from mininet.log import setLogLevel
setLogLevel("error")
n = int(sys.argv[1])
t0 = time.monotonic()
# The constructor builds the hosts, links and switch; start() brings the switch up.
net = Mininet(topo=SingleSwitchTopo(n), switch=LinuxBridge, controller=None, autoSetMacs=True)
net.start()
t_up = time.monotonic() - t0
hosts = net.hosts
first = hosts[0].cmd(f"ping -c 1 -W 1 {hosts[-1].IP()}")
ok = " 1 received" in first
rtt = float(first.split("time=")[1].split()[0]) if ok else None
t0 = time.monotonic()
# Through a file: Mininet types commands into a terminal, whose lines end at 4096 bytes.
with open("/tmp/bench-mininet-targets", "w") as f:
    f.write("\n".join(h.IP() for h in hosts[1:]) + "\n")
out = hosts[0].cmd("n=0; for a in $(cat /tmp/bench-mininet-targets); do ping -c 1 -W 1 $a >/dev/null && n=$((n+1)); done; echo $n")
reached = int(out.strip().split()[-1])
t_all = time.monotonic() - t0
t0 = time.monotonic()
net.stop()
t_down = time.monotonic() - t0
print(json.dumps({"up": t_up, "down": t_down, "first_ok": ok, "first_rtt_ms": rtt, "reached": reached, "all_s": t_all}))
"""


def run_mininet(script, arg, timeout_s):
    """Run a Mininet script in a process of its own (its net.stop() removes what it
    made); its result is the last JSON line it prints."""
    args = [str(a) for a in (arg if isinstance(arg, (list, tuple)) else [arg])]
    r = subprocess.run([MININET_PYTHON, "-c", script, *args], capture_output=True, text=True, timeout=timeout_s)
    line = [l for l in r.stdout.splitlines() if l.startswith("{")]
    if not line:
        # Only after a failure: `mn -c` also deletes every /tmp/*.log and /tmp/*.out.
        subprocess.run(["mn", "-c"], capture_output=True)
        raise RuntimeError(f"mininet failed: {r.stdout[-2000:]}{r.stderr[-2000:]}")
    return json.loads(line[-1])


def mininet_lan(n):
    """One LAN of n hosts in Mininet."""
    return run_mininet(MININET_LAN, n, 3600)


def vemu_lan(n, snooping):
    """The same LAN in vemu: hosts h1..hn on one segment, default addressing (IPv4 and IPv6)."""
    name = "bmn"
    nodes = "".join(f"  h{i}: {{}}\n" for i in range(1, n + 1))
    members = ", ".join(f"h{i}" for i in range(1, n + 1))
    yaml = f"name: {name}\nrouting: none\nnodes:\n{nodes}segments:\n  s:\n    snooping: {snooping}\n    members: [{members}]\n"
    t_up = up(name, yaml)
    status = json.loads(vemu("status", "--lab", name, "--json"))
    first = sh(*in_node(name, "h1"), "ping", "-c", "1", "-W", "1", addresses_of(status, f"h{n}"), check=False)
    ok = " 1 received" in first
    rtt = float(first.split("time=")[1].split()[0]) if ok else None
    targets = " ".join(a for a in (addresses_of(status, f"h{i}") for i in range(2, n + 1)) if a)
    t0 = time.monotonic()
    out = sh(*in_node(name, "h1"), "sh", "-c", f"n=0; for a in {targets}; do ping -c 1 -W 1 $a >/dev/null && n=$((n+1)); done; echo $n")
    reached = int(out.strip().split()[-1])
    t_all = time.monotonic() - t0
    t_down = down(name)
    return {"up": t_up, "down": t_down, "first_ok": ok, "first_rtt_ms": rtt, "reached": reached, "all_s": t_all}


def addresses_of(status, node):
    """A node's first IPv4 address in a status document."""
    for nd in status["nodes"]:
        if nd["name"] == node:
            for i in nd["ifaces"]:
                for a in i["addrs"]:
                    if ":" not in a:
                        return a.split("/")[0]
    return None


MININET_LINK = r"""
import sys, time, json
from mininet.net import Mininet
from mininet.link import TCLink, Link
from mininet.nodelib import LinuxBridge
from mininet.log import setLogLevel
setLogLevel("error")
bw = float(sys.argv[1])  # Mbit/s, 0: unshaped
lan = len(sys.argv) > 2 and sys.argv[2] == "lan"  # h1 - s1 - h2, both host links shaped
net = Mininet(controller=None, link=TCLink if bw else Link, switch=LinuxBridge)
h1, h2 = net.addHost("h1"), net.addHost("h2")
ends = [(h1, net.addSwitch("s1")), (net.get("s1"), h2)] if lan else [(h1, h2)]
for a, b in ends:
    if bw:
        net.addLink(a, b, bw=bw)
    else:
        net.addLink(a, b)
net.start()
h2.cmd("iperf3 -s -D")
time.sleep(0.5)
h1.cmd(f"ping -c 2 -i 0.1 {h2.IP()}")
pings = h1.cmd(f"ping -c 500 -i 0.01 {h2.IP()}")
rtts = [float(l.split("time=")[1].split()[0]) for l in pings.splitlines() if "time=" in l]
out = h1.cmd(f"iperf3 -c {h2.IP()} -t 5 -O 1 -J")
goodput = json.loads(out)["end"]["sum_received"]["bits_per_second"]
h2.cmd("pkill iperf3")
net.stop()
print(json.dumps({"goodput": goodput, "rtts": rtts}))
"""


def rtt_stats(rtts):
    """(median, p99, max) of round-trip times, ms."""
    r = sorted(rtts)
    if not r:
        return (float("nan"),) * 3
    return (r[len(r) // 2], r[min(len(r) - 1, int(len(r) * 0.99))], r[-1])


def mininet_link(bw_mbit, lan=False):
    """Two Mininet hosts on one link, or on a switch (`lan`: both host links shaped),
    shaped to bw_mbit (0: unshaped)."""
    return run_mininet(MININET_LINK, [bw_mbit, "lan"] if lan else bw_mbit, 600)


def vemu_link(bw_mbit, shaper="engine", lan=False):
    """Two vemu nodes on one link, or on a LAN (`lan`: every port shaped both ways)."""
    name = "bml"
    bw = f"\n    bandwidth: {int(bw_mbit)}Mbit\n    shaper: {shaper}" if bw_mbit else ""
    joined = f"segments:\n  lan:\n    members: [a, b]{bw}\n" if lan else f"links:\n  - endpoints: [a, b]{bw}\n"
    up(name, f"name: {name}\naddressing: {{ipv6: none}}\nnodes:\n  a: {{}}\n  b: {{run: ['iperf3 -s -D']}}\n{joined}")
    time.sleep(0.5)
    b = addresses_of(json.loads(vemu("status", "--lab", name, "--json")), "b")
    sh(*in_node(name, "a"), "ping", "-c", "2", "-i", "0.1", b, check=False)
    pings = sh(*in_node(name, "a"), "ping", "-c", "500", "-i", "0.01", b)
    rtts = [float(l.split("time=")[1].split()[0]) for l in pings.splitlines() if "time=" in l]
    goodput = iperf(in_node(name, "a"), b)
    down(name)
    return {"goodput": goodput, "rtts": rtts}


def bench_mininet():
    if subprocess.run([MININET_PYTHON, "-c", "import mininet"], capture_output=True).returncode != 0:
        print("mininet: Mininet is not installed (bench/run.sh mininet installs it); skipped")
        return
    # (VEMU_MININET_SIZES="" compares the links only.)
    sizes = [int(x) for x in os.environ.get("VEMU_MININET_SIZES", "100,300,1000").split(",") if x]
    rows = []
    for n in sizes:
        runs = [("vemu (snooping querier, default)", lambda: vemu_lan(n, "querier")), ("vemu (snooping on, as a Linux bridge)", lambda: vemu_lan(n, "on")), ("Mininet 2.3 (Linux bridge)", lambda: mininet_lan(n))]
        got = {}
        for label, run in runs:
            wait_idle()
            r = run()
            got[label] = r
            first = f"{r['first_rtt_ms']:.3f} ms" if r["first_ok"] else "LOST"
            print(f"mininet LAN {n:5d} hosts, {label:38s}: up {r['up']:7.2f} s, down {r['down']:7.2f} s, first ping {first}, h1 reached {r['reached']}/{n - 1} in {r['all_s']:.1f} s")
            rows.append([n, label, r["up"], r["down"], "yes" if r["first_ok"] else "no", r["first_rtt_ms"] if r["first_ok"] else "", r["reached"], r["all_s"]])
        mn = got["Mininet 2.3 (Linux bridge)"]
        v = got["vemu (snooping querier, default)"]
        rows.append([n, "ratio vemu (default) / Mininet", v["up"] / mn["up"], v["down"] / mn["down"], "", "", "", v["all_s"] / max(mn["all_s"], 1e-9)])
    if rows:
        bench_mininet_lan_outputs(rows)
    bench_mininet_links()


def bench_mininet_lan_outputs(rows):
    write_csv("mininet.csv", ["hosts", "system", "up_s", "down_s", "first_ping_ok", "first_ping_ms", "reached", "reach_all_s"], rows)
    for col, idx, label in [("up", 2, "start-up (s)"), ("down", 3, "tear-down (s)")]:
        series = []
        for system in ["vemu (snooping querier, default)", "vemu (snooping on, as a Linux bridge)", "Mininet 2.3 (Linux bridge)"]:
            pts = [(r[0], r[idx]) for r in rows if r[1] == system]
            series.append((system, [p[0] for p in pts], [p[1] for p in pts]))
        plot(f"mininet_{col}.png", f"LAN of N hosts on one switch: {label}", "hosts", "seconds", series, logx=True, logy=True)
    write_md("mininet", "vemu beside Mininet: one big LAN", "what a Mininet user does first (N hosts on one switch, ping); Mininet 2.3 with the Linux bridge and no controller",
             ["hosts", "system", "up (s)", "down (s)", "first ping answered", "first ping (ms)", "h1 reached", "h1 reaches all (s)"], rows,
             ["Goals (issue 20): up and down at most 0.2x Mininet's at every size, every first ping answered.",
              "Both with IPv6 on (Mininet's hosts keep it); h1 pings every other host's IPv4 address once, in turn."])


def bench_mininet_links():
    link_rows = []
    for lan in [False, True]:
        for bw in [0, 100, 1000]:
            got = {}
            runs = [("vemu", lambda: vemu_link(bw, lan=lan)), ("Mininet 2.3", lambda: mininet_link(bw, lan))]
            if bw:
                runs.insert(1, ("vemu shaper: kernel", lambda: vemu_link(bw, "kernel", lan)))
            for label, run in runs:
                wait_idle()
                got[label] = run()
            m = got["Mininet 2.3"]
            ms = rtt_stats(m["rtts"])
            setting = (f"{bw} Mbit/s" if bw else "unshaped") + (" LAN" if lan else " link")
            for label in [l for l, _ in runs if l != "Mininet 2.3"]:
                v = got[label]
                vs = rtt_stats(v["rtts"])
                print(f"mininet {setting:15s}, {label:19s}: TCP vemu {v['goodput']/1e6:8.1f} Mbit/s, Mininet {m['goodput']/1e6:8.1f} Mbit/s; "
                      f"idle RTT median/p99/max vemu {vs[0]:.3f}/{vs[1]:.3f}/{vs[2]:.3f} ms, Mininet {ms[0]:.3f}/{ms[1]:.3f}/{ms[2]:.3f} ms")
                link_rows.append([f"{setting}, {label}", v["goodput"] / 1e6, m["goodput"] / 1e6, *vs, *ms, vs[0] / ms[0], vs[1] / ms[1]])
    write_csv("mininet_link.csv", ["link", "vemu_mbit", "mininet_mbit", "vemu_rtt_median_ms", "vemu_rtt_p99_ms", "vemu_rtt_max_ms", "mininet_rtt_median_ms", "mininet_rtt_p99_ms", "mininet_rtt_max_ms", "ratio_median", "ratio_p99"], link_rows)
    write_md("mininet_link", "vemu beside Mininet: one link or a LAN of two, unshaped and shaped", "Mininet's TCLink (htb for the rate; netem is absent here, so no delay) between two hosts, or between each of two hosts and a Linux bridge",
             ["link", "vemu TCP (Mbit/s)", "Mininet TCP (Mbit/s)", "vemu RTT median", "p99", "max (ms)", "Mininet RTT median", "p99", "max (ms)", "ratio median", "ratio p99"], link_rows,
             ["Goal (issue 20): idle RTT on a shaped link or LAN at most 1.5x Mininet's at the median and p99. 500 pings 10 ms apart, then iperf3 TCP for 5 s.",
              "vemu: the engine's exact serializer (the default; an idle ping waits its transmission time and the engine's wake-up) and shaper: kernel (the kernel's token buckets on the fast path, as Mininet shapes: on a LAN, both ways of every port).",
              "A LAN of two: every frame crosses the sender's port and the receiver's, shaped at the rate on each (Mininet: htb on both ends of each host's link)."])


def bench_soak():
    """Half the capacity of 4 links (UDP at 50 of 100 Mbit/s, 5 ms) for a long time, the
    delay of one link changed every second; every 10 s: the controller's memory and the
    last window's fidelity. At the end, per direction, frames received by the link that
    it neither delivered nor dropped by its model (loss, queue, down, MTU) nor duplicated."""
    secs = int(os.environ.get("VEMU_SOAK_SECONDS", "3600"))
    name, pairs = "bsoak", 4
    up(name, pairs_yaml(name, pairs, "bandwidth: 100Mbit, delay: 5ms"))
    rows, t0 = [], time.monotonic()
    # The machine's own lateness beside vemu's: a real-time thread above the engine's
    # (rt-tests' cyclictest, SCHED_FIFO 95, one per core) waking every ms all along.
    hist = os.path.join(OUT, "soak_platform_hist.txt")
    platform = subprocess.Popen(["cyclictest", "-m", "-q", "-p", "95", "-t", str(os.cpu_count()), "-a", "-i", "1000", "-D", str(secs),
                                 "-h", "30000", f"--histfile={hist}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) if shutil.which("cyclictest") else None
    try:
        status = json.loads(vemu("status", "--lab", name, "--json"))
        pid = status["pid"]
        clients = [subprocess.Popen(in_node(name, f"c{i}") + ["iperf3", "-u", "-b", "50M", "-l", "1400", "-t", str(secs), "-c", addresses_of(status, f"s{i}")],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in range(pairs)]
        k = 0
        while time.monotonic() - t0 < secs:
            time.sleep(1)
            k += 1
            vemu("link", "set", "--lab", name, f"c{k % pairs}:s{k % pairs}", "--delay", f"{5 + k % 6}ms")
            if k % 10 == 0:
                st = json.loads(vemu("status", "--lab", name, "--json"))
                now = st.get("fidelity_now") or {}
                rows.append([round(time.monotonic() - t0), rss_kib(pid), now.get("verdict", "-"), st["fidelity"]["frames"], st["fidelity"]["late_frames"], st["fidelity"]["tap_dropped"]])
                print(f"soak {rows[-1][0]:5d} s: controller RSS {rows[-1][1] / 1024:.1f} MiB, last window {rows[-1][2]}, frames {rows[-1][3]}, late {rows[-1][4]}")
        for c in clients:
            c.wait(timeout=30)
        time.sleep(2)
        st = json.loads(vemu("status", "--lab", name, "--json"))
    finally:
        if platform:
            try:
                platform.wait(timeout=30)
            except subprocess.TimeoutExpired:
                platform.terminate()  # it writes its histogram as it stops
                platform.wait(timeout=30)
        down(name)
    # Every window the fidelity monitor judged not ok is in the controller's log.
    log = open(f"/var/log/vemu/{name}/vemu.log", errors="replace").read()
    windows_not_ok = len(re.findall(r"^\[[0-9.]+ s\] fidelity (DEGRADED|INVALID)", log, re.M))
    platform_notes = ["The machine's own lateness: not measured (no cyclictest; rt-tests)."]
    if platform and os.path.exists(hist):
        over = {1000: 0, 5000: 0}
        worst = 0
        for line in open(hist):
            if line.startswith("#"):
                m = re.match(r"# Max Latencies:(.*)", line)
                worst = max([int(v) for v in m.group(1).split()] + [worst]) if m else worst
                continue
            f = line.split()
            if len(f) > 1:
                for t in over:
                    if int(f[0]) > t:
                        over[t] += sum(int(v) for v in f[1:])
        latest_ms = max(l[d]["stats"]["late_max_ns"] for l in st["links"] for d in ("forward", "reverse")) / 1e6
        verdict = (f"vemu's latest frame ({latest_ms:.1f} ms) was no later than the machine's worst stall: late frames are what the machine did to any thread"
                   if latest_ms <= worst / 1000 else
                   f"vemu's latest frame ({latest_ms:.1f} ms) was later than any stall the machine showed: the engine itself was late")
        platform_notes = [f"The machine's own lateness over the run (cyclictest, SCHED_FIFO 95, above the engine, a wake-up every ms per core): "
                          f"worst {worst / 1000:.1f} ms, {over[1000]} wake-ups over 1 ms late, {over[5000]} over 5 ms; {verdict}."]
    unexplained = []
    for l in st["links"]:
        for d in ("forward", "reverse"):
            x = l[d]["stats"]
            lost = x["rx_frames"] + x["duplicated"] - x["tx_frames"] - x["drop_loss"] - x["drop_queue"] - x["drop_down"] - x["drop_mtu"] - x["write_errors"] - x.get("drop_police", 0)
            unexplained.append(lost)
    write_csv("soak.csv", ["t_s", "controller_rss_kib", "window_verdict", "frames", "late_frames", "tap_dropped"], rows)
    plot("soak.png", "Soak: controller memory over the run", "s", "RSS (MiB)", [("controller", [r[0] for r in rows], [r[1] / 1024 for r in rows])])
    not_ok = sum(1 for r in rows if r[2] not in ("ok", "-"))
    rss = [r[1] for r in rows] or [0]
    write_md("soak", f"Soak: {secs} s at half capacity with a link change every second", "issue 13's soak run",
             ["t (s)", "controller RSS (KiB)", "last window", "frames", "late frames", "TAP drops"], rows[:: max(1, len(rows) // 20)],
             [f"Controller RSS first / last / max: {rss[0] / 1024:.1f} / {rss[-1] / 1024:.1f} / {max(rss) / 1024:.1f} MiB.",
              f"Samples whose last window was not ok: {not_ok} of {len(rows)}; 1-s windows the monitor judged not ok (its log): {windows_not_ok} of ~{secs}; "
              f"whole run: {st['fidelity']['verdict']} ({st['fidelity']['late_frames']} of {st['fidelity']['frames']} frames late).",
              f"Frames lost that the model did not drop, per direction: {unexplained} (must be all 0).", *platform_notes])


class NsMachines:
    """Machines made of namespaces, as in crates/vemu/tests/machines.rs: each a network
    namespace running a real `vemu agent` in a mount namespace of its own, on a bridge
    (the underlay); the controller in a namespace of its own on the same bridge."""

    def __init__(self, n, tag="bm", net=76, pin=True, mtu=1500):
        self.tag, self.net, self.n = tag, net, n
        self.token = os.path.join(tempfile.gettempdir(), f"vemu-{tag}-token")
        with open(self.token, "w") as f:
            f.write("bench-token-0123456789abcdef\n")
        os.chmod(self.token, 0o600)  # the agents refuse a token others can read
        ul = f"{tag}-ul"
        sh("ip", "netns", "add", ul)
        sh("ip", "-n", ul, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", ul, "link", "set", "br0", "up")
        hosts = [str(i) for i in range(n)] + ["ctl"]
        for i, h in enumerate(hosts):
            ns = f"{tag}-{h}"
            ip = f"10.{net}.0.254" if h == "ctl" else f"10.{net}.0.{i + 1}"
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", f"{tag}u{i}", "netns", ul, "mtu", str(mtu), "type", "veth", "peer", "name", "eth0", "netns", ns, "mtu", str(mtu))
            sh("ip", "-n", ul, "link", "set", f"{tag}u{i}", "master", "br0", "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
        os.makedirs("/run/vemu", exist_ok=True)
        self.agents = []
        for i in range(n):
            script = f"mount -t tmpfs tmpfs /run/vemu && mount -t tmpfs tmpfs /run/netns && mkdir -p /var/log/vemu && mount -t tmpfs tmpfs /var/log/vemu && exec {VEMU} agent --listen 10.{net}.0.{i + 1} --token-file {self.token}"
            # Each machine's agent (and so its engine and its nodes' programs) on a core
            # of its own, as on machines of their own (with more machines than cores,
            # in turn); pin=False lets them all share every core.
            cpu = ["taskset", "-c", str(i % (os.cpu_count() or 1))] if pin else []
            self.agents.append(subprocess.Popen([*cpu, "nsenter", f"--net=/run/netns/{tag}-{i}", "unshare", "-m", "--propagation", "private", "sh", "-c", script],
                                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1.0)

    def machines_yaml(self):
        return "machines: {" + ", ".join(f"m{i}: 10.{self.net}.0.{i + 1}" for i in range(self.n)) + "}\n"

    def up(self, name, yaml):
        path = os.path.join(tempfile.gettempdir(), f"bench-{name}.yaml")
        with open(path, "w") as f:
            f.write(yaml)
        t0 = time.monotonic()
        r = subprocess.run(["ip", "netns", "exec", f"{self.tag}-ctl", VEMU, "up", path, "--name", name], capture_output=True, text=True,
                           env=dict(os.environ, VEMU_AGENT_TOKEN_FILE=self.token))
        if r.returncode != 0:
            raise RuntimeError(f"vemu up {name} across machines failed: {r.stdout}{r.stderr}")
        return time.monotonic() - t0

    def in_node(self, machine, lab, node):
        return ["nsenter", "-t", str(self.agents[machine].pid), "-m", VEMU, "exec", "--lab", lab, node, "--"]

    def close(self):
        for a in self.agents:
            a.terminate()
        for a in self.agents:
            a.wait()
        for ns in sh("ip", "netns", "list").split("\n"):
            n = ns.split(" ")[0]
            if n.startswith(f"{self.tag}-"):
                sh("ip", "netns", "del", n, check=False)


def tree_yaml(name, n):
    """A binary tree of n nodes, no routing, IPv4 only."""
    nodes = "".join(f"  n{i}: {{}}\n" for i in range(1, n + 1))
    links = "".join(f"  - endpoints: [n{i // 2}, n{i}]\n" for i in range(2, n + 1))
    return f"name: {name}\nrouting: none\naddressing: {{ipv6: none}}\nnodes:\n{nodes}links:\n{links}"


def bench_machines():
    """The same labs on one machine and across two namespace machines: RTT through a
    chain of 8 hops (unimpaired, and 1 ms a hop) whose middle link crosses machines, TCP
    across at 100 Mbit/s, and up/down time of a 200-node tree."""
    hops = 8
    rows = []
    m = NsMachines(2)
    try:
        def chain(name, extra, pinned):
            y = chain_yaml(name, hops).replace("links:", "links:") + ""
            if extra:
                y = y.replace("]\n", "]\n" + extra)
            if pinned:
                y = m.machines_yaml() + y.replace("  n1: {}", "  n1: {machine: m0}").replace(f"  n{hops + 1}: {{run:", f"  n{hops + 1}: {{machine: m1, run:")
            return y
        target = f"10.0.0.{4 * (hops - 1) + 2}"
        for label, extra in [("unimpaired", ""), ("1 ms a hop", "    delay: 1ms\n"), ("100 Mbit/s a hop", "    bandwidth: 100Mbit\n")]:
            res = {}
            for across in (False, True):
                name = "bm"
                if across:
                    m.up(name, chain(name, extra, True))
                    pre = m.in_node(0, name, "n1")
                else:
                    up(name, chain(name, extra, False))
                    pre = in_node(name, "n1")
                try:
                    time.sleep(1.5)  # the underlay probes settle
                    rtt = ping_avg(pre, target)
                    bw = iperf(pre, target, 4) if "Mbit" in label else float("nan")
                    res[across] = (rtt, bw)
                finally:
                    down(name)
            rows.append([label, res[False][0], res[True][0], res[False][1] / 1e6, res[True][1] / 1e6])
            print(f"machines: chain of {hops} ({label}): RTT one machine {res[False][0]:.3f} ms, across two {res[True][0]:.3f} ms"
                  + (f"; TCP {res[False][1]/1e6:.1f} vs {res[True][1]/1e6:.1f} Mbit/s" if "Mbit" in label else ""))
        n = 200
        tree = tree_yaml("bt", n)
        t_up1 = up("bt", tree)
        t_down1 = down("bt")
        time.sleep(2)
        t_up2 = m.up("bt", m.machines_yaml() + tree)
        t_down2 = down("bt")
        rows.append([f"{n}-node tree up / down (s)", t_up1, t_up2, t_down1, t_down2])
        print(f"machines: {n}-node tree up {t_up1:.2f} s / down {t_down1:.2f} s on one machine; up {t_up2:.2f} s / down {t_down2:.2f} s across two")
    finally:
        m.close()
    # Four machines (issue 14's goal: up in at most twice the one-machine time); the
    # tree's links cross between several pairs, whose underlay probes share rounds.
    m4 = NsMachines(4, tag="bm4", net=77)
    try:
        for size in (n, 1000):
            tree_n = tree if size == n else tree_yaml("bt", size)
            if size == n:
                t1 = (t_up1, t_down1)
            else:
                t_up = up("bt", tree_n)
                rss1 = rss_kib(json.loads(vemu("status", "--lab", "bt", "--json"))["pid"])
                t1 = (t_up, down("bt"))
            time.sleep(2)
            t_up4 = m4.up("bt", m4.machines_yaml() + tree_n)
            st = json.loads(subprocess.run(["ip", "netns", "exec", "bm4-ctl", VEMU, "status", "--lab", "bt", "--json"], capture_output=True, text=True, check=True).stdout)
            measured = [(mm["name"], u["to"], u.get("measured_bps")) for mm in st.get("machines", []) for u in mm.get("underlay", [])]
            # Memory: the controller (in the controller's namespace) and each machine's
            # agent (its engine's threads and the share's state; the nodes' programs
            # are processes of their own).
            rss_ctl4, rss_agents = rss_kib(st["pid"]), [rss_kib(a.pid) for a in m4.agents]
            t_down4 = down("bt")
            rows.append([f"{size}-node tree up / down, one machine and 4 (s)", t1[0], t_up4, t1[1], t_down4])
            print(f"machines: {size}-node tree up {t1[0]:.2f} s / down {t1[1]:.2f} s on one machine; up {t_up4:.2f} s / down {t_down4:.2f} s across four "
                  f"({t_up4 / t1[0]:.2f}x one machine's up; goal <= 2x); underlay measured in {sum(1 for x in measured if x[2])} of {len(measured)} directions")
            if size != n:
                rows.append([f"{size}-node tree memory (MiB): controller on one machine / on 4; agents on 4 min / max",
                             rss1 / 1024, rss_ctl4 / 1024, min(rss_agents) / 1024, max(rss_agents) / 1024])
                print(f"machines: {size}-node tree memory: controller {rss1 / 1024:.1f} MiB on one machine, {rss_ctl4 / 1024:.1f} MiB across four; "
                      f"agents {', '.join(f'{r / 1024:.1f}' for r in rss_agents)} MiB")
    finally:
        m4.close()
    write_csv("machines.csv", ["case", "one_machine", "two_machines", "one_machine_b", "two_machines_b"], rows)
    labels = [r[0] for r in rows[:2]]
    plot("machines_rtt.png", f"Chain of {hops} hops: RTT on one machine and across two", "case (0: unimpaired, 1: 1 ms a hop)", "RTT (ms)",
         [("one machine", list(range(len(labels))), [r[1] for r in rows[:2]]), ("two machines (one link across)", list(range(len(labels))), [r[2] for r in rows[:2]])])
    extra_hop = (rows[0][2] - rows[0][1]) * 1000 / 2
    write_md("machines", "Labs across machines (machines made of namespaces on one computer)", "Virtual Routers' distributed hops, NET's multi-machine testbed",
             ["case", "one machine", "two (four) machines", "one machine (2nd figure)", "two (four) machines (2nd figure)"], rows,
             [f"Rows 1-3: RTT (ms) of a chain of {hops} hops whose middle link crosses machines; row 3's 2nd figures: TCP (Mbit/s). Then: up (s), then down (s), on one machine and across two, then four; last row: resident memory (VmRSS, MiB) of the controller and the agents.",
              f"The link between machines goes through both engines and the underlay instead of the kernel fast path: it adds {extra_hop:.0f} µs one way to the unimpaired chain.",
              "With set delays the underlay's measured delay is taken off, so RTT stays the set one plus the engines' passes.",
              "Each namespace machine's agent, engine and node programs are pinned to one core of this computer's two (taskset; four machines: two a core), where the one-machine lab has both: the same cores in all, as two real machines of one core each would have.",
              "Unpinned, every machine's engine shards (one per core each) and nodes share both cores, and TCP through the 8-hop chain at 100 Mbit/s a hop got 89 Mbit/s across against 95 on one machine, with frames up to 5 ms late on every link: the emulation of machines starved itself, not the tunnel (pinned: 94.5-94.8)."])


def bench_machine_hop():
    """One unimpaired link between two namespace machines (real agents, each pinned to a
    core), on an underlay of 1500-byte and of 9000-byte interfaces: the RTT it adds to the
    same link on one machine, against the underlay's own RTT (a ping between the two
    machines' addresses), whether the kernel's tunnel carries it, and TCP across."""
    yaml = "name: bh\naddressing: {ipv6: none}\nnodes:\n  n1: {}\n  n2: {run: ['iperf3 -s -D']}\nlinks:\n  - endpoints: [n1, n2]\n"
    count = 200
    up("bh", yaml)
    try:
        time.sleep(1)
        rtt1 = ping_avg(in_node("bh", "n1"), "10.0.0.2", count)
        tcp1 = iperf(in_node("bh", "n1"), "10.0.0.2", 4)
    finally:
        down("bh")
    print(f"machine hop: one machine: RTT {rtt1 * 1000:.1f} us, TCP {tcp1 / 1e9:.2f} Gbit/s")
    rows = []
    # The link's own MTU: the interfaces' default (1500), or 1446, which leaves room in a
    # 1500-byte underlay's datagrams for the VXLAN and Ethernet headers.
    for mtu, link_mtu in ((1500, None), (1500, 1446), (9000, None)):
        m = NsMachines(2, tag="bh", net=75, mtu=mtu)
        try:
            under = ping_avg(["ip", "netns", "exec", "bh-0"], "10.75.0.2", count)
            y = yaml if link_mtu is None else yaml.replace("endpoints: [n1, n2]", f"endpoints: [n1, n2]\n    mtu: {link_mtu}")
            m.up("bh", m.machines_yaml() + y.replace("n1: {}", "n1: {machine: m0}").replace("n2: {run", "n2: {machine: m1, run"))
            try:
                time.sleep(2)  # the tunnels' path MTU probes
                st = json.loads(subprocess.run(["ip", "netns", "exec", "bh-ctl", VEMU, "status", "--lab", "bh", "--json"], capture_output=True, text=True, check=True).stdout)
                link = st["links"][0]
                kernel = all(link[d]["stats"].get("kernel_path") for d in ("forward", "reverse"))
                rtt = ping_avg(m.in_node(0, "bh", "n1"), "10.0.0.2", count)
                tcp = iperf(m.in_node(0, "bh", "n1"), "10.0.0.2", 4)
            finally:
                down("bh")
        finally:
            m.close()
        added = (rtt - rtt1) * 1000 / 2
        rows.append([mtu, link_mtu or 1500, "kernel tunnel" if kernel else "engines", rtt1 * 1000, under * 1000, rtt * 1000, added, under * 1000 / 2, tcp1 / 1e9, tcp / 1e9])
        print(f"machine hop: {mtu}-byte underlay, link MTU {link_mtu or 1500} ({rows[-1][2]}): RTT across {rtt * 1000:.1f} us vs {rtt1 * 1000:.1f} on one machine; "
              f"the hop adds {added:.1f} us one way, the underlay alone {under * 1000 / 2:.1f} us one way "
              f"({'within' if added <= under * 1000 / 2 + 20 else 'beyond'} issue 14's goal: underlay + 20 us); TCP {tcp / 1e9:.2f} Gbit/s across")
    write_csv("machine_hop.csv", ["underlay_mtu", "link_mtu", "carried_by", "rtt_one_machine_us", "rtt_underlay_us", "rtt_across_us", "added_one_way_us", "underlay_one_way_us", "tcp_one_machine_gbps", "tcp_across_gbps"], rows)
    xs = list(range(len(rows)))
    plot("machine_hop.png", "One unimpaired link: RTT on one machine, across two, and the underlay's", "underlay / link MTU (0: 1500/1500, 1: 1500/1446, 2: 9000/1500)", "RTT (us)",
         [("one machine", xs, [r[3] for r in rows]), ("underlay alone", xs, [r[4] for r in rows]), ("across two machines", xs, [r[5] for r in rows])])
    write_md("machine_hop", "One hop between machines (machines made of namespaces)", "Virtual Routers' per-distributed-hop overhead; issue 14's goal (a hop across adds at most the underlay's delay + 20 us)",
             ["underlay MTU", "link MTU", "carried by", "RTT one machine (us)", "RTT underlay (us)", "RTT across (us)", "added one way (us)", "underlay one way (us)", "TCP one machine (Gbit/s)", "TCP across (Gbit/s)"], rows,
             ["Where the underlay carries whole frames (9000 bytes here, or links of mtu 1446 on 1500), an unimpaired direction goes through the kernel's VXLAN devices; otherwise both engines carry it, cutting full-size frames in two datagrams.",
              "Each namespace machine's agent is pinned to one core of this computer's two; the underlay is a Linux bridge between namespaces."])


def bench_lan_machines():
    """A LAN whose members are on two namespace machines (its switch on m0), every port
    1 ms: RTT between members on one machine, across, and between two members of m1
    (unicast switched on m1) with the underlay datagrams that ping costs; and what a
    broadcast costs the underlay: datagrams m1
    receives per broadcast frame sent on m0, against the number of m1's members that
    receive it (vemu sends one copy per machine through the segment's trunk)."""
    rows = []
    m = NsMachines(2, tag="bl", net=75)
    try:
        for k in (2, 8, 32):
            hosts = "".join(f"  h{i}: {{machine: m{0 if i < k else 1}}}\n" for i in range(2 * k))
            members = "".join(f"      - {{node: h{i}}}\n" for i in range(2 * k))
            yaml = (m.machines_yaml() + f"name: bl\nrouting: none\naddressing: {{ipv6: none}}\ndefaults:\n  node:\n    sysctl: {{net.ipv4.icmp_echo_ignore_broadcasts: '1'}}\n"
                    f"nodes:\n{hosts}segments:\n  lan:\n    delay: 1ms\n    members:\n{members}")
            m.up("bl", yaml)
            t_up = time.monotonic()
            try:
                time.sleep(1.5)  # the underlay probes settle
                ip = lambda i: f"10.0.0.{i + 1}"
                local = ping_avg(m.in_node(0, "bl", "h0"), ip(1), 20)
                across = ping_avg(m.in_node(0, "bl", "h0"), ip(k), 20)
                st = json.loads(subprocess.run(["ip", "netns", "exec", "bl-ctl", VEMU, "status", "--lab", "bl", "--json"], capture_output=True, text=True, check=True).stdout)
                tr = [(x["egress"]["stats"]["transit_ns"], x["ingress"]["stats"]["transit_ns"]) for x in st["segments"][0]["members"][k:k + 2]]
                print(f"  (far members' underlay delays as measured, egress/ingress, ns: {tr})")
                rx = lambda: int(sh("ip", "netns", "exec", "bl-1", "cat", "/sys/class/net/eth0/statistics/rx_packets").strip())
                # The underlay's own traffic meanwhile (probes, heartbeats) from an idle stretch,
                # once the tunnels' first 5 s of frequent probes are over.
                time.sleep(max(0.0, 6.0 - (time.monotonic() - t_up)))
                n, secs = 200, 2.0
                r0 = rx()
                time.sleep(secs)
                idle = rx() - r0
                # Unicast between two members of m1: datagrams m1's underlay port receives
                # during the 22 pings (2 a ping if they went through m0's switch), beside
                # what the idle rate above makes of that time.
                r0, t0 = rx(), time.monotonic()
                far = ping_avg(m.in_node(1, "bl", f"h{k}"), ip(k + 1), 20)
                far_raw, far_idle = rx() - r0, idle * (time.monotonic() - t0) / secs
                r0 = rx()
                t0 = time.monotonic()
                cidr = sh(*m.in_node(0, "bl", "h0"), "ip", "-o", "-4", "addr", "show", "dev", "eth0").split(" inet ")[1].split()[0]
                brd = str(ipaddress.ip_interface(cidr).network.broadcast_address)
                out = sh(*m.in_node(0, "bl", "h0"), "ping", "-b", "-q", "-c", str(n), "-i", str(secs / n), "-W", "1", brd, check=False)
                if f"{n} packets transmitted" not in out:
                    raise RuntimeError(f"broadcast ping to {brd}: {out}")
                busy_s = time.monotonic() - t0
                per = (rx() - r0 - idle * busy_s / secs) / n
            finally:
                down("bl")
            rows.append([2 * k, k, local, across, far, per, far_raw, round(far_idle, 1)])
            print(f"lan across machines: {2 * k} members ({k} on m1), 1 ms a port: RTT {local:.3f} ms on m0, {across:.3f} ms m0 -> m1, "
                  f"{far:.3f} ms between two of m1 (set 4 ms; {far_raw} underlay datagrams on m1 during its 22 pings, {far_idle:.1f} idle traffic); {per:.2f} underlay datagrams on m1 per broadcast ({k} receivers there)")
            time.sleep(1)
    finally:
        m.close()
    write_csv("lan_machines.csv", ["members", "members_on_m1", "rtt_m0_ms", "rtt_m0_m1_ms", "rtt_m1_m1_ms", "datagrams_per_broadcast", "datagrams_during_22_m1_pings", "idle_datagrams_then"], rows)
    plot("lan_machines.png", "LAN across two machines: underlay datagrams per broadcast", "members on the far machine", "datagrams on m1 per broadcast",
         [("vemu (one copy per machine)", [r[1] for r in rows], [r[5] for r in rows]), ("one copy per receiver", [r[1] for r in rows], [r[1] for r in rows])], logx=True, logy=True)
    write_md("lan_machines", "A LAN across two machines (machines made of namespaces)", "Megalos (a LAN frame only to the machines of its recipients)",
             ["members", "on m1", "RTT on m0 (ms)", "RTT m0 -> m1 (ms)", "RTT m1 -> m1 (ms)", "underlay datagrams on m1 per broadcast", "underlay datagrams on m1 during 22 pings m1 -> m1", "idle traffic expected then"], rows,
             ["Every port has 1 ms of delay each way: every RTT is set to 4 ms; unicast between two members of m1 is switched on m1 (no underlay crossing; before stop 36 it went through m0's switch, two crossings a frame).",
              "A broadcast from h0 on m0 reaches all m1 members through one trunk copy (datagrams per broadcast ~1 whatever the number of receivers); the idle underlay traffic (probes, heartbeats) measured just before is taken off.",
              "RTTs below the set 4 ms are frames arriving early: frames toward another machine leave early by the underlay's one-way delay as estimated (half the shortest probe round trip between kernel receive times, printed per far member); an estimate above the true delay makes them arrive early."])


def bench_placement():
    out = subprocess.run(["cargo", "run", "--release", "--quiet", "-p", "vemu-scenario", "--example", "placement"],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    rows = list(csv.reader(out.strip().splitlines()))
    header, rows = rows[0], rows[1:]
    write_csv("placement.csv", header, rows)
    series = []
    for graph in sorted({r[0] for r in rows}):
        for method in ["random", "greedy", "metis", "vemu"]:
            pts = [(int(r[3]), int(r[6])) for r in rows if r[0] == graph and r[4] == method]
            series.append((f"{graph}: {method}", [p[0] for p in pts], [p[1] for p in pts]))
    plot("placement.png", "Placement of 1000 nodes: weight of the links cut", "machines", "Mbit/s cut", series, logy=True)
    table = [[r[0], r[3], r[4], int(r[5]), int(r[6]), float(r[7]), float(r[8])] for r in rows]
    for r in table:
        print(f"placement {r[0]:10s} {r[1]} machines {r[2]:7s}: {r[3]:5d} links cut ({r[4]} Mbit/s), heaviest machine {r[5]:.3f} x balanced, {r[6]:.1f} ms")
    write_md("placement", "Placement: what crosses between machines", "MaxiNet's METIS placement (issue 14's partitioner goal)",
             ["graph", "machines", "method", "links cut", "Mbit/s cut", "heaviest machine ÷ balanced", "ms"], table,
             ["Graphs of 1000 nodes: random geometric (radius 0.05 of a unit square) and preferential attachment (2 links per new node); links weigh 1000, 100 or 10 Mbit/s in turn.",
              "vemu = the lighter cut of METIS and greedy growing, each refined by single moves; random = an even deal of the nodes."])


def chromium():
    """Headless Chromium under Selenium, as the web interface's tests drive it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--window-size=1400,900", f"--user-data-dir={tempfile.mkdtemp(prefix='vemu-bench-ui-')}"]:
        opts.add_argument(a)
    d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    d.set_script_timeout(60)
    return d


# Counts animation frames for `ms` (the page's main thread draws the graph in them: a
# busy page gets fewer): frames per second and the longest gap between two.
FPS_JS = """
const [ms, done] = arguments;
const t = [];
function f(now) { t.push(now); if (now - t[0] < ms) requestAnimationFrame(f); else done([(t.length - 1) * 1000 / (now - t[0]), Math.max(...t.slice(1).map((x, i) => x - t[i]))]); }
requestAnimationFrame(f);
"""


def ui_measure(d, url, name):
    """Open the lab's page: ms from navigation to the drawn graph (the page's own clock),
    then frames per second over 10 s."""
    d.get(url)
    end = time.monotonic() + 120
    while not d.execute_script("return !!(window.vemu && window.vemu.ready && window.vemu.lab.name === arguments[0])", name):
        if time.monotonic() > end:
            raise RuntimeError(f"the page of {name} did not load")
        time.sleep(0.05)
    load_ms = d.execute_script("return window.vemu.readyMs")
    elements = d.execute_script("return window.vemu.cy.elements().length")
    fps, gap = d.execute_async_script(FPS_JS, 10000)
    return load_ms, elements, fps, gap


def bench_ui():
    rows = []
    d = chromium()
    try:
        for n in [100, 1000]:
            name = "bui"
            nodes = "".join(f"  n{i}: {{}}\n" for i in range(1, n + 1))
            links = "".join(f"  - endpoints: [n{i // 2}, n{i}]\n" for i in range(2, n + 1))
            yaml = f"name: {name}\nrouting: none\naddressing: {{ipv6: none}}\nnodes:\n{nodes}links:\n{links}"
            time.sleep(3)
            up(name, yaml)
            try:
                url = vemu("ui", "--lab", name).split("web interface: ", 1)[1].split()[0]
                load_ms, elements, fps, gap = ui_measure(d, url, name)
            finally:
                down(name)
            rows.append([f"tree of {n} nodes", n, elements, round(load_ms), round(fps, 1), round(gap, 1)])
            print(f"ui {rows[-1][0]}: drawn {load_ms:.0f} ms after navigation ({elements} elements), {fps:.1f} frames/s, longest frame gap {gap:.0f} ms")
        # 50 wireless nodes moving at 10 Hz (examples/manet-50.yaml's segment, without
        # its routing daemons).
        names = ", ".join(f"n{i}" for i in range(1, 51))
        manet = (f"name: bui-manet\nseed: 1\nrouting: none\naddressing: {{ipv6: none}}\nnodes: {{{', '.join(f'n{i}: {{}}' for i in range(1, 51))}}}\n"
                 f"segments:\n  radio:\n    kind: wireless\n    area: 1500x300\n    range: 250m\n    tick: 100ms\n"
                 f"    mobility: {{model: random-waypoint, speed: 0-20, pause: 0s}}\n    members: [{names}]\n")
        time.sleep(3)
        up("bui-manet", manet)
        try:
            url = vemu("ui", "--lab", "bui-manet").split("web interface: ", 1)[1].split()[0]
            load_ms, elements, fps, gap = ui_measure(d, url, "bui-manet")
            moved = d.execute_script("return window.vemu.moves || 0")
        finally:
            down("bui-manet")
        rows.append(["50 wireless nodes moving at 10 Hz", 50, elements, round(load_ms), round(fps, 1), round(gap, 1)])
        print(f"ui {rows[-1][0]}: drawn {load_ms:.0f} ms, {fps:.1f} frames/s, longest frame gap {gap:.0f} ms ({moved} position updates drawn)")
    finally:
        d.quit()
    write_csv("ui.csv", ["case", "nodes", "graph_elements", "drawn_ms", "frames_per_s", "longest_frame_gap_ms"], rows)
    trees = [r for r in rows if r[0].startswith("tree")]
    plot("ui.png", "Web interface: time until the lab is drawn", "nodes", "ms", [("page load to drawn graph", [r[1] for r in trees], [r[3] for r in trees])], logx=True)
    write_md("ui", "Web interface: drawing and interactivity (headless Chromium)", "issue 16's goals: a 1000-node lab drawn in 2 s; 30 frames/s while 50 wireless nodes move at 10 Hz",
             ["case", "nodes", "graph elements", "drawn (ms)", "frames/s", "longest frame gap (ms)"], rows,
             ["Headless Chromium with software rendering on the same 2-core machine as the lab; a desktop browser with a GPU draws faster.",
              "Frames per second = requestAnimationFrame callbacks over 10 s (the browser's cap is 60): fewer means the page's main thread was busy drawing or handling events."])


# DiffServ (issue 17): four TCP flows, one per class, on one 10 Mbit/s link.
QOS_CLASSES = [("af1", 10, 1), ("af2", 18, 2), ("af4", 34, 4), ("be", 0, 1)]  # name, DSCP, preset weight
QOS_RATE_MBIT = 10


def qos_flows(prefix, server, seconds, tos_port):
    """Run one iperf3 TCP client per (tos, port) at once; their goodputs, bit/s."""
    procs = [subprocess.Popen([*prefix, "iperf3", "-c", server, "-p", str(port), "-S", str(tos), "-t", str(seconds), "-O", "2", "-J"], stdout=subprocess.PIPE, text=True)
             for tos, port in tos_port]
    return [json.loads(p.communicate()[0])["end"]["sum_received"]["bits_per_second"] for p in procs]


def ef_and_be_rtts(prefix, target, seconds):
    """RTTs (ms) of EF pings (TOS 184, 20 a second) and best-effort pings (5 a second),
    sent side by side for `seconds`."""
    run = lambda tos, interval: subprocess.Popen([*prefix, "ping", "-n", "-Q", str(tos), "-c", str(int(seconds / interval)), "-i", str(interval), target],
                                                 stdout=subprocess.PIPE, text=True)
    ps = [run(184, 0.05), run(0, 0.2)]
    return [[float(l.split("time=")[1].split()[0]) for l in p.communicate()[0].splitlines() if "time=" in l] for p in ps]


class KernelPair:
    """Two namespaces on a veth pair, the sender's side shaped by an HTB tree: the kernel
    baseline for class shares (HTB classes at rates in the weights' proportion, each
    allowed to borrow up to the link) and for EF (a class of its own served first)."""

    def __init__(self, classes):
        self.ns = ["kq0", "kq1"]
        for n in self.ns:
            sh("ip", "netns", "add", n)
            sh("ip", "-n", n, "link", "set", "lo", "up")
        sh("ip", "link", "add", "eth0", "netns", "kq0", "type", "veth", "peer", "name", "eth0", "netns", "kq1")
        for i, n in enumerate(self.ns):
            sh("ip", "-n", n, "addr", "add", f"10.202.0.{i + 1}/24", "dev", "eth0")
            sh("ip", "-n", n, "link", "set", "eth0", "up")
        tc = lambda *a: sh("ip", "netns", "exec", "kq0", "tc", *a)
        rate = f"{QOS_RATE_MBIT}mbit"
        tc("qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", str(10 * len(classes)))
        tc("class", "add", "dev", "eth0", "parent", "1:", "classid", "1:1", "htb", "rate", rate, "ceil", rate)
        total = sum(c[1] for c in classes)
        for i, (dscp, weight, prio) in enumerate(classes):
            cid = f"1:{10 * (i + 1)}"
            r = f"{QOS_RATE_MBIT * 1000 * weight // total}kbit"
            tc("class", "add", "dev", "eth0", "parent", "1:1", "classid", cid, "htb", "rate", r, "ceil", rate, "prio", str(prio))
            tc("filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match", "ip", "dsfield", hex(dscp << 2), "0xfc", "flowid", cid)
        for port in range(5201, 5201 + len(QOS_CLASSES)):
            sh("ip", "netns", "exec", "kq1", "iperf3", "-s", "-D", "-p", str(port))
        self.server = "10.202.0.2"
        time.sleep(0.3)

    def prefix(self):
        return ["ip", "netns", "exec", "kq0"]

    def close(self):
        close_namespaces(self.ns)


def bench_qos():
    seconds = int(os.environ.get("VEMU_QOS_SECONDS", "15"))
    servers = " ".join(f"'iperf3 -s -D -p {5201 + i}'," for i in range(len(QOS_CLASSES)))
    lab = lambda qos: (f"name: bq\naddressing: {{ipv6: none}}\nnodes:\n  a: {{}}\n  b: {{run: [{servers}]}}\n"
                       f"links:\n  - endpoints: [a, b]\n    bandwidth: {QOS_RATE_MBIT}Mbit\n    delay: 2ms\n" + (f"    qos: {qos}\n" if qos else ""))
    tos_port = [(d << 2, 5201 + i) for i, (_, d, _) in enumerate(QOS_CLASSES)]
    weights = [w for _, _, w in QOS_CLASSES]
    want = [w / sum(weights) for w in weights]
    # 1. Shares: vemu's DRR (the diffserv preset) and from its class counters, vs HTB.
    up("bq", lab("diffserv"))
    try:
        time.sleep(0.5)
        b = addresses_of(json.loads(vemu("status", "--lab", "bq", "--json")), "b")
        sh(*in_node("bq", "a"), "ping", "-c", "2", "-i", "0.1", b, check=False)
        before = {c["name"]: c["tx_bytes"] for c in json.loads(vemu("status", "--lab", "bq", "--json"))["links"][0]["forward"]["stats"]["classes"]}
        vemu_bps = qos_flows(in_node("bq", "a"), b, seconds, tos_port)
        after = {c["name"]: c for c in json.loads(vemu("status", "--lab", "bq", "--json"))["links"][0]["forward"]["stats"]["classes"]}
        counted = [after[n]["tx_bytes"] - before[n] for n, _, _ in QOS_CLASSES]
        fidelity = fidelity_of("bq")
    finally:
        down("bq")
    k = KernelPair([(d, w, 1) for _, d, w in QOS_CLASSES])
    try:
        kernel_bps = qos_flows(k.prefix(), k.server, seconds, tos_port)
    finally:
        k.close()
    share = lambda v: [x / sum(v) for x in v]
    rows = [[n, w, want[i], share(vemu_bps)[i], share(counted)[i], share(kernel_bps)[i], vemu_bps[i] / 1e6, kernel_bps[i] / 1e6]
            for i, (n, _, w) in enumerate(QOS_CLASSES)]
    write_csv("qos_shares.csv", ["class", "weight", "configured_share", "vemu_share_goodput", "vemu_share_counted", "htb_share_goodput", "vemu_mbps", "htb_mbps"], rows)
    # 2. EF's delay while best-effort TCP fills the link: vemu FIFO, vemu diffserv, HTB.
    ef = {}
    for name, qos in [("vemu, one FIFO", None), ("vemu, qos: diffserv", "diffserv")]:
        up("bq", lab(qos))
        try:
            time.sleep(0.5)
            b = addresses_of(json.loads(vemu("status", "--lab", "bq", "--json")), "b")
            sh(*in_node("bq", "a"), "ping", "-c", "2", "-i", "0.1", b, check=False)
            bulk = subprocess.Popen([*in_node("bq", "a"), "iperf3", "-c", b, "-P", "4", "-t", str(seconds + 3)], stdout=subprocess.DEVNULL)
            time.sleep(2)
            ef[name] = ef_and_be_rtts(in_node("bq", "a"), b, seconds)
            bulk.wait()
        finally:
            down("bq")
    k = KernelPair([(46, 3, 0), (0, 7, 1)])
    try:
        bulk = subprocess.Popen([*k.prefix(), "iperf3", "-c", k.server, "-p", "5204", "-P", "4", "-t", str(seconds + 3)], stdout=subprocess.DEVNULL)
        time.sleep(2)
        ef["kernel, HTB with an EF class"] = ef_and_be_rtts(k.prefix(), k.server, seconds)
        bulk.wait()
    finally:
        k.close()
    ef_rows = [[name, *rtt_stats(e), *rtt_stats(be)[:1]] for name, (e, be) in ef.items()]
    write_csv("qos_ef.csv", ["setup", "ef_rtt_median_ms", "ef_rtt_p99_ms", "ef_rtt_max_ms", "be_rtt_median_ms"], ef_rows)
    x = list(range(len(QOS_CLASSES)))
    plot("qos_shares.png", f"Class shares of a {QOS_RATE_MBIT} Mbit/s link, one TCP flow per class", "class (0 af1 w1, 1 af2 w2, 2 af4 w4, 3 be w1)", "share of the link",
         [("configured (weights)", x, want), ("vemu (iperf3 goodput)", x, share(vemu_bps)), ("vemu (class counters)", x, share(counted)), ("kernel HTB", x, share(kernel_bps))])
    write_md(
        "qos",
        "DiffServ: class shares and EF delay",
        "Virtual Routers' DiffServ experiments (Sec. 3.2: bandwidth sharing of assured and best-effort flows) and RFC 2598's EF",
        ["class", "weight", "configured share", "vemu share (goodput)", "vemu share (counters)", "HTB share", "vemu Mbit/s", "HTB Mbit/s"],
        rows + [[], ["EF ping RTT under 4 best-effort TCP flows", "median ms", "p99 ms", "max ms", "best-effort ping median ms", "", "", ""]]
        + [[r[0], r[1], r[2], r[3], r[4], "", "", ""] for r in ef_rows],
        [f"{QOS_RATE_MBIT} Mbit/s link, 2 ms delay each way (round trip 4 ms); {seconds} s per run; diffserv preset (EF strict priority policed to 30%, AF1-AF4 weights 1:2:3:4 with WRED, best effort 1). Fidelity of the shares run: {fidelity}.",
         "HTB assures each class its rate (proportional to the weights) and lends the rest; vemu's DRR serves backlogged classes by weight: with every class backlogged both should give the configured shares.",
         "The kernel baseline runs on a bare veth pair (no delay), so its best-effort RTT is the queue alone."],
    )


def bench_flood():
    """Issue 20's flood goal: a LAN whose every port is impaired (1 ms of delay, so the
    engine switches it), h1 sending broadcast frames of 64 B as fast as it can for a few
    seconds; deliveries per second (frames written to recipients, the engine's counters)
    with one write(2) per delivery and with io_uring batches, in the same run. The LAN is
    one shard: one engine core."""
    sh("cargo", "build", "--release", "-q", "--example", "blast", "-p", "vemu")
    blast = os.path.join(ROOT, "target", "release", "examples", "blast")
    seconds, rounds = 3, 3
    table = []
    for n in [8, 32, 128]:
        for writes in ["syscall", "io_uring"]:
            name = f"bfl{n}"
            nodes = "".join(f"  h{i}: {{}}\n" for i in range(1, n + 1))
            members = ", ".join(f"h{i}" for i in range(1, n + 1))
            os.environ["VEMU_ENGINE_WRITES"] = writes
            try:
                up(name, f"name: {name}\naddressing: {{ipv6: none}}\nnodes:\n{nodes}segments:\n  lan: {{members: [{members}], delay: 1ms, snooping: off}}\n")
            finally:
                del os.environ["VEMU_ENGINE_WRITES"]
            try:
                def delivered():
                    st = json.loads(vemu("status", "--json", "--lab", name))
                    return sum(m["ingress"]["stats"]["tx_frames"] for m in st["segments"][0]["members"]), st["fidelity"]
                def rounds_of(*rate):
                    rates, late = [], []
                    for _ in range(rounds):
                        before, f0 = delivered()
                        vemu("exec", "--lab", name, "h1", "--", blast, "eth0", "broadcast", "64", str(seconds), *rate)
                        time.sleep(1.2)  # the last frames' 1 ms delay, and any backlog
                        after, f1 = delivered()
                        rates.append((after - before) / seconds)
                        late.append((f1["late_frames"] - f0["late_frames"]) / max(1, f1["frames"] - f0["frames"]))
                    return rates, late
                # Paced to 1 M deliveries/s, then as fast as h1 can send (the engine
                # saturated: its backlog would spill into a later round).
                for offered, rate in [("1 M deliveries/s", (str(round(1e6 / (n - 1))),)), ("all h1 can", ())]:
                    rates, late = rounds_of(*rate)
                    table.append([n, writes, offered, round(statistics.median(rates)), round(min(rates)), round(max(rates)), f"{100 * max(late):.2f}"])
                    print(f"flood {n} ports, {writes}, offered {offered}: {table[-1][3] / 1e6:.2f} M deliveries/s (rounds {', '.join(f'{r / 1e6:.2f}' for r in rates)}), "
                          f"frames over 1 ms late: worst round {100 * max(late):.2f}%")
            finally:
                down(name)
    write_csv("flood.csv", ["ports", "writes", "offered", "deliveries_per_s_median", "min", "max", "late_percent_worst_round"], table)
    series = [(w, [r[0] for r in table if r[1] == w and r[2] == "all h1 can"], [r[3] / 1e6 for r in table if r[1] == w and r[2] == "all h1 can"]) for w in ["syscall", "io_uring"]]
    plot("flood.png", "Broadcast flood on an impaired LAN (1 ms per port): deliveries per second, one engine core", "ports", "M deliveries/s", series, logx=True)
    write_md("flood", "Flooding an impaired LAN: one write(2) per delivery vs io_uring batches", "issue 20's goal of >= 1 M deliveries/s per engine core on an impaired LAN",
             ["ports", "writes", "offered", "deliveries/s (median)", "min", "max", "frames > 1 ms late (worst round, %)"], table,
             [f"h1 sends 64-byte broadcast frames with AF_PACKET sendmmsg as fast as it can for {seconds} s, {rounds} rounds per setting; every port of the LAN has 1 ms of delay, so the engine switches it (one shard, one core of 2); snooping off.",
              "Deliveries are frames the engine wrote towards recipients (its counters), whatever the receivers' kernels do with them; the sender's TAP queue drops what the engine cannot read in time, as an overloaded port would.",
              "Saturated, frames wait in the engine and the lab's fidelity is rightly not ok; paced to 1 M deliveries/s (h1 sends 1 M / (ports - 1) frames a second, evenly), the late share is what the fidelity monitor judges (degraded above 1 %)."])


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
        "scale": [bench_scale],
        "switch": [bench_switch],
        "flood": [bench_flood],
        "api": [bench_api],
        "channel": [bench_channel],
        "manet": [bench_manet],
        "mininet": [bench_mininet],
        "soak": [bench_soak],
        "machines": [bench_machines],
        "lan-machines": [bench_lan_machines],
        "machine-hop": [bench_machine_hop],
        "ui": [bench_ui],
        "placement": [bench_placement],
        "profile": [bench_profile],
        "dataplane": [bench_dataplane],
        "qos": [bench_qos],
        "all": [bench_link, bench_accuracy, bench_density, bench_chain, bench_scale, bench_cpu, bench_switch, bench_api, bench_channel, bench_manet, bench_mininet, bench_machines, bench_machine_hop, bench_lan_machines, bench_ui, bench_placement, bench_qos],
    }
    if which not in todo:
        sys.exit(__doc__)
    for f in todo[which]:
        f()
    # One page with every summary there is (from this run and earlier ones).
    parts = [open(os.path.join(OUT, f)).read() for f in sorted(os.listdir(OUT)) if f.endswith(".md") and f != "SUMMARY.md"]
    with open(os.path.join(OUT, "SUMMARY.md"), "w") as f:
        f.write("# vemu benchmark summaries\n\n" + "\n".join(parts))
    print(f"CSV, PNG and Markdown files are in {OUT} (all summaries: {OUT}/SUMMARY.md)")


if __name__ == "__main__":
    main()
