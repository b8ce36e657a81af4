"""A link, its profile, its accuracy (bandwidth, delay, loss) and density (links sharing the machine)."""

import json
import os
import shutil
import subprocess
import time

from .common import KernelBridge, OUT, VethChain, addresses, chain_yaml, down, fidelity_of, in_node, iperf, nft_loss, pairs_yaml, ping_avg, plot, sh, tbf, udp_loss, up, vemu, write_csv, write_md


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


def density_row(rate, n, kernel_shaper=True):
    """n pairs on links of `rate` bit/s, all running TCP for 4 s at once, three ways in
    turn: tbf on veth pairs, vemu's engine, vemu's `shaper: kernel` (kernel_shaper). The
    row [Mbit/s, n, engine mean, worst, tbf mean, worst, engine verdict, kernel-shaper
    mean, worst, verdict] (ratios to the set rate) and the nodes' TCP congestion control."""
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
    sr, sverdict = ([float("nan")], "") if not kernel_shaper else vemu_run("kernel")[:2]
    return [rate / 1e6, n, sum(vr) / n, min(vr), sum(kr) / n, min(kr), verdict, sum(sr) / len(sr), min(sr), sverdict], cc


def bench_density():
    """Accuracy vs. the number of links sharing the machine: n pairs, each on a link of
    the same rate, all running TCP at once (NET Figs. 9–11)."""
    counts = [int(x) for x in os.environ.get("VEMU_DENSITY_PAIRS", "1,2,4,8,16,32").split(",")]
    rows = []
    rates = [float(x) * 1e6 for x in os.environ.get("VEMU_DENSITY_MBPS", "5,54,100").split(",")]
    for rate in rates:
        for n in counts:
            row, cc = density_row(rate, n)
            rows.append(row)
            vr_mean, vr_min, kr_mean, kr_min, verdict, sr_mean, sr_min, sverdict = row[2:]
            print(f"density {rate/1e6:g} Mbit/s x {n:2} links: vemu mean {vr_mean:.3f} min {vr_min:.3f} of the set rate ({verdict}); "
                  f"vemu shaper: kernel mean {sr_mean:.3f} min {sr_min:.3f} ({sverdict}); tbf mean {kr_mean:.3f} min {kr_min:.3f}")
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
    ceiling = 1448 / 1514
    agree = [(r[0], r[1], name) for r in rows for name, col, verdict in [("engine", 3, r[6]), ("kernel", 8, r[9])]
             if (r[col] / ceiling >= 0.93) == (verdict == "ok")]
    disagree = [f"{r[0]:g} x {r[1]} {name}" for r in rows for name, col, verdict in [("engine", 3, r[6]), ("kernel", 8, r[9])]
                if (r[col] / ceiling >= 0.93) != (verdict == "ok")]
    print(f"density: the verdict is ok exactly where the worst link held 0.93 of its TCP ceiling in {len(agree)} of {2 * len(rows)} runs" + (f"; not in {', '.join(disagree)}" if disagree else ""))
    notes.append(f"The fidelity column is the monitor's verdict on the run: it must turn from ok when the worst link falls below 0.93 of its TCP ceiling (0.889 of the set rate). It did so in {len(agree)} of {2 * len(rows)} runs" + (f" (not in {', '.join(disagree)})." if disagree else "."))
    notes.append(f"TCP congestion control in the nodes and in the baseline's namespaces: {cc} (the machine's default; it changes the figures: with cubic, 32 x 54 Mbit/s reached 0.84-0.86 through vemu where BBR reached 0.71-0.77).")
    write_md("density", "Accuracy vs. nodes sharing the machine", "NET Figs. 9–11 (how many virtual nodes per machine before the emulated 5/54/100 Mbit/s degrade)",
             ["set rate (Mbit/s)", "links", "vemu mean / set", "vemu worst / set", "tbf mean / set", "tbf worst / set", "vemu fidelity",
              "shaper: kernel mean / set", "shaper: kernel worst / set", "shaper: kernel fidelity"], rows, notes)
