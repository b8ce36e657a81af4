"""Issue 44's table in one run: every row measured beside its anchor, and whether it
holds its goal."""

import csv
import os
import statistics
import subprocess
import time

from .common import ROOT, VethChain, chain_yaml, down, in_node, ping_rtts_ms, plot, rtt_stats, sh, up, wait_idle, write_csv, write_md
from .link import density_row
from .machines import machine_hop, one_machine_hop
from .mininet import MININET_PYTHON, mininet_link, vemu_link
from .switch import bridge_flood, vemu_flood

# An idle ping's Ethernet frame (84 bytes of IP, 14 of header): what the engine's
# serializer times.
PING_FRAME_BITS = 98 * 8


def wakeups():
    """What waking a sleeping thread costs on this machine, without vemu
    (crates/vemu/examples/wakeup.rs): {placement: (median, p99, max) µs of a round trip}."""
    sh("cargo", "build", "--release", "-q", "--example", "wakeup", "-p", "vemu")
    out = sh(os.path.join(ROOT, "target", "release", "examples", "wakeup"), "10000", "300")
    return {r["placement"]: (float(r["median_us"]), float(r["p99_us"]), float(r["max_us"])) for r in csv.DictReader(out.strip().splitlines())}


def ping_times_ms(prefix, target, count, interval):
    """Each reply's RTT (ms) of `count` pings `interval` seconds apart."""
    return ping_rtts_ms(subprocess.run([*prefix, "ping", "-c", str(count), "-i", interval, target], capture_output=True, text=True).stdout)


def per_hop_us(rounds=5, count=100):
    """RTT added per unimpaired hop (µs, slope of the median RTT from 1 to 16 hops): the
    kernel's veth chain and vemu (its kernel fast path), all four chains up at once and
    pinged in turn, `rounds` times, so that the machine's drift falls on both alike. Pings
    10 ms apart (idle: the CPU halts between them, and on this VM the path then runs
    cold) and 2 ms apart (back to back: it stays warm). {interval: (kernel, vemu)}."""
    chains = {"k1": VethChain(1, "ka"), "k16": VethChain(16, "kb")}
    try:
        for hops in (1, 16):
            up(f"beh{hops}", chain_yaml(f"beh{hops}", hops, server=False))
        time.sleep(0.3)
        ways = {"k1": (chains["k1"].prefix(0), chains["k1"].server), "k16": (chains["k16"].prefix(0), chains["k16"].server),
                "v1": (in_node("beh1", "n1"), "10.0.0.2"), "v16": (in_node("beh16", "n1"), f"10.0.0.{4 * 15 + 2}")}
        out = {}
        for interval in ("0.01", "0.002"):
            rtts = {k: [] for k in ways}
            for _ in range(rounds):
                for k, (prefix, target) in ways.items():
                    rtts[k] += ping_times_ms(prefix, target, count, interval)
            m = {k: statistics.median(v) for k, v in rtts.items()}
            out[interval] = ((m["k16"] - m["k1"]) / 15 * 1000, (m["v16"] - m["v1"]) / 15 * 1000)
        return out
    finally:
        for c in chains.values():
            c.close()
        for hops in (1, 16):
            down(f"beh{hops}")


def bench_engine():
    """Each row of issue 44's table beside its anchor, in this order: what the machine
    costs (a thread woken on the same CPU and on the other), the idle RTT of a shaped link
    and LAN (vemu's engine, its `shaper: kernel`, Mininet's TCLink), a flood through an
    impaired LAN (the Linux bridge), the RTT per unimpaired hop (a veth chain), a hop
    between machines (the underlay), placement (METIS' best) and density (tbf)."""
    rows = []  # [row, vemu, anchor, goal, holds]

    def row(what, now, anchor, goal, holds):
        rows.append([what, now, anchor, goal, "yes" if holds else "no"])
        print(f"engine: {what}: {now} | {anchor} | goal {goal}: {'holds' if holds else 'does not hold'}")

    w = wakeups()
    for placement, (med, p99, mx) in w.items():
        print(f"engine: machine: a sleeping thread woken and answering ({placement}): median {med:.1f} / p99 {p99:.1f} / max {mx:.1f} us")
    wake = f"thread round trip, 10 ms apart: one CPU {w['one cpu'][0]:.0f} / {w['one cpu'][1]:.0f} us, two CPUs {w['two cpus'][0]:.0f} / {w['two cpus'][1]:.0f} us (median / p99)" if "two cpus" in w else ""
    rows.append(["this machine's wake-ups (no vemu)", wake, "", "", ""])

    have_mininet = subprocess.run([MININET_PYTHON, "-c", "import mininet"], capture_output=True).returncode == 0
    plots = []
    for bw, lan in [(100, False), (1000, False), (100, True)]:
        setting = f"idle RTT, {bw} Mbit/s {'LAN of 2' if lan else 'link'}"
        wait_idle()
        v = rtt_stats(vemu_link(bw, lan=lan)["rtts"])
        k = rtt_stats(vemu_link(bw, "kernel", lan)["rtts"])
        # The engine's exact serializer: the ping and its reply each take their
        # transmission time once per shaped port crossed (two on a LAN).
        ser_ms = 2 * (2 if lan else 1) * PING_FRAME_BITS / (bw * 1e6) * 1000
        now = f"{v[0]:.3f} / {v[1]:.3f} / {v[2]:.3f} ms (of it {ser_ms * 1000:.1f} us transmission)"
        if have_mininet:
            wait_idle()
            m = rtt_stats(mininet_link(bw, lan)["rtts"])
            anchor = f"Mininet {m[0]:.3f} / {m[1]:.3f} / {m[2]:.3f}; shaper: kernel {k[0]:.3f} / {k[1]:.3f} / {k[2]:.3f}"
            holds = v[0] <= 1.5 * m[0] and v[1] <= 1.5 * m[1] and v[2] <= 1.0
            row(setting + " (median / p99 / max)", now, anchor, f"<= 1.5x Mininet's median ({1.5 * m[0]:.3f}) and p99 ({1.5 * m[1]:.3f}), max <= 1 ms", holds)
            plots.append((setting, v, m, k))
        else:
            row(setting + " (median / p99 / max)", now, f"shaper: kernel {k[0]:.3f} / {k[1]:.3f} / {k[2]:.3f}; Mininet not installed (bench/run.sh engine installs it)", "<= 1.5x Mininet", False)

    if have_mininet:
        # What idling costs on this machine: the 100 Mbit/s link again, pings 5 ms apart
        # (on this VM a CPU idle for 5 ms comes back warm, for 10 ms cold), both systems.
        wait_idle()
        v5 = rtt_stats(vemu_link(100, interval="0.005")["rtts"])
        wait_idle()
        m5 = rtt_stats(mininet_link(100, interval="0.005")["rtts"])
        rows.append(["idle RTT, 100 Mbit/s link, pings 5 ms apart (median / p99 / max; no goal)", f"{v5[0]:.3f} / {v5[1]:.3f} / {v5[2]:.3f} ms", f"Mininet {m5[0]:.3f} / {m5[1]:.3f} / {m5[2]:.3f}", "", ""])
        print(f"engine: idle RTT 100 Mbit/s link, 5 ms apart: vemu {v5[0]:.3f} / {v5[1]:.3f} / {v5[2]:.3f} ms, Mininet {m5[0]:.3f} / {m5[1]:.3f} / {m5[2]:.3f}")

    seconds, rounds = 3, 3
    for n in (8, 32):
        wait_idle()
        _, rates, _ = vemu_flood(n, seconds, rounds)[0]
        wait_idle()
        bridge = bridge_flood(n, seconds, rounds)
        v, b = statistics.median(rates), statistics.median(bridge)
        row(f"flood, {n} ports, 64-byte broadcasts, deliveries/s (1 ms every port in vemu)", f"{v / 1e6:.2f} M/s (rounds {', '.join(f'{r / 1e6:.2f}' for r in rates)})",
            f"Linux bridge {b / 1e6:.2f} M/s (rounds {', '.join(f'{r / 1e6:.2f}' for r in bridge)})", ">= the bridge", v >= b)

    wait_idle()
    hop = per_hop_us()
    (k_hop, v_hop), (k_warm, v_warm) = hop["0.01"], hop["0.002"]
    row("RTT per unimpaired hop (1 to 16 hops; pings 10 ms apart, and 2 ms apart)", f"{v_hop:.2f} us ({v_hop / k_hop:.2f}x); {v_warm:.2f} us ({v_warm / k_warm:.2f}x)",
        f"veth chain {k_hop:.2f} us; {k_warm:.2f} us", "<= 1.0x", v_hop <= k_hop)

    wait_idle()
    rtt1, _ = one_machine_hop()
    under, kernel, rtt, _ = machine_hop(1500)
    added, under_1 = (rtt - rtt1) * 1000 / 2, under * 1000 / 2
    row("hop between machines, 1500-byte underlay, link MTU 1500, added one way", f"{added:.1f} us ({'kernel tunnel' if kernel else 'engines'})",
        f"underlay {under_1:.1f} us one way", f"<= underlay + 50 ({under_1 + 50:.1f} us)", added <= under_1 + 50)

    out = subprocess.run(["cargo", "run", "--release", "--quiet", "-p", "vemu-scenario", "--example", "placement"], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    cl = {r["method"]: r for r in csv.DictReader(out.strip().splitlines()) if r["graph"] == "clusters"}
    pv, pm = cl["vemu"], cl["metis-best"]
    cut_v, cut_m, ms, bal = int(pv["cut_weight"]), int(pm["cut_weight"]), float(pv["ms"]), float(pv["max_load_over_balanced"])
    row("placement, 100,000 nodes in 10 clusters on 10 machines", f"cut {pv['cut_links']} links / {cut_v} Mbit/s, {ms / 1000:.2f} s, heaviest machine {bal:.3f}x balanced",
        f"METIS' best {cut_m} Mbit/s; natural cut 300", "<= 10 s, cut <= 1.1x METIS' best, balance within 3 %", ms <= 10_000 and cut_v <= 1.1 * cut_m and bal <= 1.03)

    wait_idle()
    d, _ = density_row(100e6, 32, kernel_shaper=False)
    ceiling = 1448 / 1514
    row("density, 32 links of 100 Mbit/s all running TCP", f"worst link {d[3]:.3f} of the rate ({d[3] / ceiling:.3f} of TCP's ceiling), mean {d[2]:.3f}, verdict {d[6]}",
        f"tbf worst {d[5]:.3f}, mean {d[4]:.3f}", "every link >= 0.93, verdict ok", d[3] >= 0.93 and d[6] == "ok")

    write_csv("engine.csv", ["row", "vemu", "anchor", "goal", "holds"], rows)
    if plots:
        labels = [p[0].replace("idle RTT, ", "") for p in plots]
        xs = list(range(len(plots)))
        plot("engine.png", "Idle RTT (median), shaped link or LAN: vemu's engine beside Mininet and vemu's kernel shaper", "0: 100 Mbit/s link, 1: 1 Gbit/s link, 2: 100 Mbit/s LAN of 2", "ms",
             [("vemu (engine, exact serializer)", xs, [p[1][0] for p in plots]), ("Mininet TCLink", xs, [p[2][0] for p in plots]), ("vemu shaper: kernel", xs, [p[3][0] for p in plots])])
        print("engine: plotted " + ", ".join(labels))
    held = sum(r[4] == "yes" for r in rows)
    print(f"engine: {held} of {sum(r[4] != '' for r in rows)} rows hold their goal")
    write_md("engine", "The engine path beside its anchors (issue 44)", "Mininet's TCLink and Linux bridge, the kernel's veth chain, the underlay, METIS, tbf",
             ["row", "vemu", "anchor (same run)", "goal", "holds"], rows,
             ["One run of `bench/run.sh engine` on this machine. Idle RTT: 500 pings 10 ms apart, vemu's default shaper (the engine's exact serializer) against Mininet's TCLink (htb) and vemu's `shaper: kernel`. The same link pinged 5 ms apart has no goal: it shows what idling costs here (a CPU of this VM idle 5 ms answers warm, idle 10 ms cold), to both systems.",
              "The first row measures no emulator: two threads waking each other through eventfds, 10 ms apart, on one CPU and on two. An idle engine shard and the program it answers are such threads; a virtual machine wakes an idle CPU through its hypervisor.",
              "Flood: h1 blasts 64-byte broadcasts as fast as it can for 3 s, 3 rounds; vemu's LAN has 1 ms on every port (the engine switches it), the bridge none; deliveries are frames sent towards the other members (the engine's counters, the bridge ports' tx_packets).",
              "Machine hop: two namespace machines, agents pinned to one core each; the underlay is a Linux bridge. Placement: crates/vemu-scenario/examples/placement.rs. Density: 4 s of iperf3 on each link at once, the fidelity monitor's verdict."])
