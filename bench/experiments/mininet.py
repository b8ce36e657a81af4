"""The same LANs and links in vemu and in Mininet, in one run."""

import json
import os
import subprocess
import time

from .common import addresses_of, down, in_node, iperf, ping_rtts_ms, plot, rtt_stats, sh, up, vemu, wait_idle, write_csv, write_md


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


MININET_LINK = r"""
import sys, time, json
from mininet.net import Mininet
from mininet.link import TCLink, Link
from mininet.nodelib import LinuxBridge
from mininet.log import setLogLevel
setLogLevel("error")
bw = float(sys.argv[1])  # Mbit/s, 0: unshaped
lan = len(sys.argv) > 2 and sys.argv[2] == "lan"  # h1 - s1 - h2, both host links shaped
interval = sys.argv[3] if len(sys.argv) > 3 else "0.01"  # s between the 500 pings
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
pings = h1.cmd(f"ping -c 500 -i {interval} {h2.IP()}")
rtts = [float(l.split("time=")[1].split()[0]) for l in pings.splitlines() if "time=" in l]
out = h1.cmd(f"iperf3 -c {h2.IP()} -t 5 -O 1 -J")
goodput = json.loads(out)["end"]["sum_received"]["bits_per_second"]
h2.cmd("pkill iperf3")
net.stop()
print(json.dumps({"goodput": goodput, "rtts": rtts}))
"""


def mininet_link(bw_mbit, lan=False, interval="0.01"):
    """Two Mininet hosts on one link, or on a switch (`lan`: both host links shaped),
    shaped to bw_mbit (0: unshaped); 500 pings `interval` s apart."""
    return run_mininet(MININET_LINK, [bw_mbit, "lan" if lan else "link", interval], 600)


def vemu_link(bw_mbit, shaper="engine", lan=False, interval="0.01"):
    """Two vemu nodes on one link, or on a LAN (`lan`: every port shaped both ways); 500
    pings `interval` s apart."""
    name = "bml"
    bw = f"\n    bandwidth: {int(bw_mbit)}Mbit\n    shaper: {shaper}" if bw_mbit else ""
    joined = f"segments:\n  lan:\n    members: [a, b]{bw}\n" if lan else f"links:\n  - endpoints: [a, b]{bw}\n"
    up(name, f"name: {name}\naddressing: {{ipv6: none}}\nnodes:\n  a: {{}}\n  b: {{run: ['iperf3 -s -D']}}\n{joined}")
    time.sleep(0.5)
    b = addresses_of(json.loads(vemu("status", "--lab", name, "--json")), "b")
    sh(*in_node(name, "a"), "ping", "-c", "2", "-i", "0.1", b, check=False)
    pings = sh(*in_node(name, "a"), "ping", "-c", "500", "-i", interval, b)
    rtts = ping_rtts_ms(pings)
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
