#!/usr/bin/env python3
"""vemu benchmarks: each experiment writes CSV and PNG under bench/out/ and prints a summary.

  bench.py link    unimpaired link: TCP throughput through vemu vs a raw veth pair
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
  bench.py all     all of the above

Run as root from the repository (after `cargo build --release`).
"""

import csv
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "bench", "out")
VEMU = os.path.join(ROOT, "target", "release", "vemu")


def sh(*args, check=True, capture=True):
    r = subprocess.run(list(args), capture_output=capture, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {r.stdout}{r.stderr}")
    return r.stdout


def vemu(*args, check=True):
    return sh(VEMU, *args, check=check)


def up(name, yaml):
    path = os.path.join(tempfile.gettempdir(), f"bench-{name}.yaml")
    with open(path, "w") as f:
        f.write(yaml)
    t0 = time.monotonic()
    vemu("up", path, "--name", name)
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

    def __init__(self, hops):
        self.hops = hops
        self.ns = [f"kb{i}" for i in range(1, hops + 2)]
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
        for n in self.ns:
            pids = sh("ip", "netns", "pids", n, check=False).split()
            for p in pids:
                sh("kill", "-9", p, check=False)
            sh("ip", "netns", "del", n, check=False)


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


def bench_link():
    rows = []
    for rep in range(3):
        k = VethChain(1)
        try:
            veth = iperf(k.prefix(0), k.server)
        finally:
            k.close()
        up("bl", chain_yaml("bl", 1))
        try:
            time.sleep(0.3)
            v = iperf(["sh", "-c", f"exec {VEMU} exec --lab bl n1 -- \"$@\"", "-"], "10.0.0.2")
        finally:
            down("bl")
        rows.append([rep, veth / 1e9, v / 1e9, v / veth])
    write_csv("link.csv", ["run", "veth_gbps", "vemu_gbps", "ratio"], rows)
    plot(
        "link.png",
        "Unimpaired link: TCP goodput (iperf3)",
        "run",
        "Gbit/s",
        [("raw veth pair", [r[0] for r in rows], [r[1] for r in rows]), ("vemu link", [r[0] for r in rows], [r[2] for r in rows])],
    )
    mean = lambda i: sum(r[i] for r in rows) / len(rows)
    print(f"link: veth {mean(1):.2f} Gbit/s, vemu {mean(2):.2f} Gbit/s, ratio {mean(3):.3f} (mean of {len(rows)} runs)")


def bench_chain():
    rows = []
    for hops in [1, 2, 4, 8, 12, 16]:
        k = VethChain(hops)
        try:
            k_rtt = ping_avg(k.prefix(0), k.server)
            k_bw = iperf(k.prefix(0), k.server)
        finally:
            k.close()
        name = "bc"
        up(name, chain_yaml(name, hops))
        try:
            time.sleep(0.3)
            target = f"10.0.0.{4 * (hops - 1) + 2}"
            pre = ["sh", "-c", f"exec {VEMU} exec --lab {name} n1 -- \"$@\"", "-"]
            v_rtt = ping_avg(pre, target)
            v_bw = iperf(pre, target)
        finally:
            down(name)
        rows.append([hops, k_rtt, v_rtt, k_bw / 1e9, v_bw / 1e9])
        print(f"chain {hops:2d} hops: RTT kernel {k_rtt:.3f} ms vemu {v_rtt:.3f} ms; TCP kernel {k_bw/1e9:.2f} vemu {v_bw/1e9:.2f} Gbit/s")
    write_csv("chain.csv", ["hops", "kernel_rtt_ms", "vemu_rtt_ms", "kernel_gbps", "vemu_gbps"], rows)
    hops = [r[0] for r in rows]
    plot("chain_rtt.png", "Chain: unimpaired RTT vs hops", "hops", "RTT (ms)", [("kernel veth chain", hops, [r[1] for r in rows]), ("vemu", hops, [r[2] for r in rows])])
    plot("chain_tcp.png", "Chain: TCP goodput vs hops", "hops", "Gbit/s", [("kernel veth chain", hops, [r[3] for r in rows]), ("vemu", hops, [r[4] for r in rows])])


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
    for n in [10, 100, 1000]:
        for routing in ["static", "none"]:
            if routing == "static" and n > 100:
                # Full static routes are n * links entries (1M for 1000 nodes); see README.
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
    for r in table:
        print(f"switch {r[1]:9} {r[2]:5} B, {r[0]:3} ports: {r[4]/1e3:8.0f} kframes/s delivered = {r[5]:6.2f} Gbit/s (offered {r[3]/1e3:.0f} kframes/s)")


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
    write_csv("manet.csv", ["pause_s", "duration_s", "seed", "sent", "delivered", "pdr", "delay_ms_mean", "routing_frames", "routing_per_delivered", "engine_cpu_percent"], rows)
    xs = [r[0] for r in rows]
    plot("manet_pdr.png", f"50-node MANET, babeld, 20 CBR flows, {duration} s", "pause time (s)", "packet delivery ratio", [("vemu + babeld", xs, [r[5] for r in rows])])
    plot("manet_overhead.png", f"50-node MANET, babeld, 20 CBR flows, {duration} s", "pause time (s)", "routing frames per delivered packet", [("vemu + babeld", xs, [r[8] for r in rows])])


def main():
    if os.geteuid() != 0:
        sys.exit("benchmarks create namespaces: run as root")
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    todo = {
        "link": [bench_link],
        "chain": [bench_chain],
        "scale": [bench_scale],
        "switch": [bench_switch],
        "api": [bench_api],
        "channel": [bench_channel],
        "manet": [bench_manet],
        "all": [bench_link, bench_chain, bench_scale, bench_switch, bench_api, bench_channel, bench_manet],
    }
    if which not in todo:
        sys.exit(__doc__)
    for f in todo[which]:
        f()
    print(f"CSV and PNG files are in {OUT}")


if __name__ == "__main__":
    main()
