"""LAN segments: switching decisions, switch throughput, floods."""

import json
import os
import statistics
import time

from .common import ROOT, close_namespaces, down, plot, sh, up, vemu, write_csv, write_md


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
    blast = blast_binary()
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


def blast_binary():
    """The frame generator (crates/vemu/examples/blast.rs), built."""
    sh("cargo", "build", "--release", "-q", "--example", "blast", "-p", "vemu")
    return os.path.join(ROOT, "target", "release", "examples", "blast")


def vemu_flood(n, seconds, rounds, writes=None, offers=(("all h1 can", ()),)):
    """A LAN of n members, every port 1 ms (the engine switches it; snooping off), h1
    blasting 64-byte broadcasts for `seconds`, `rounds` times per offer (a label and the
    blast's rate arguments): per offer, the deliveries per second of each round (frames
    the engine wrote towards recipients, its counters) and the share of frames late."""
    blast = blast_binary()
    name = f"bfl{n}"
    nodes = "".join(f"  h{i}: {{}}\n" for i in range(1, n + 1))
    members = ", ".join(f"h{i}" for i in range(1, n + 1))
    if writes:
        os.environ["VEMU_ENGINE_WRITES"] = writes
    try:
        up(name, f"name: {name}\naddressing: {{ipv6: none}}\nnodes:\n{nodes}segments:\n  lan: {{members: [{members}], delay: 1ms, snooping: off}}\n")
    finally:
        os.environ.pop("VEMU_ENGINE_WRITES", None)
    out = []
    try:
        def delivered():
            st = json.loads(vemu("status", "--json", "--lab", name))
            return sum(m["ingress"]["stats"]["tx_frames"] for m in st["segments"][0]["members"]), st["fidelity"]
        for offered, rate in offers:
            rates, late = [], []
            for _ in range(rounds):
                before, f0 = delivered()
                vemu("exec", "--lab", name, "h1", "--", blast, "eth0", "broadcast", "64", str(seconds), *rate)
                time.sleep(1.2)  # the last frames' 1 ms delay, and any backlog
                after, f1 = delivered()
                rates.append((after - before) / seconds)
                late.append((f1["late_frames"] - f0["late_frames"]) / max(1, f1["frames"] - f0["frames"]))
            out.append((offered, rates, late))
    finally:
        down(name)
    return out


def bridge_flood(n, seconds, rounds):
    """The kernel's anchor for vemu_flood: n namespaces on a Linux bridge (in its own
    namespace), h1 blasting 64-byte broadcasts as fast as it can for `seconds`: the
    deliveries per second of each round (frames the bridge sent out of the other members'
    ports, their veth counters)."""
    blast = blast_binary()
    ns = [f"kfl{i}" for i in range(n + 1)]
    try:
        for x in ns:
            sh("ip", "netns", "add", x)
        sh("ip", "-n", ns[0], "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", ns[0], "link", "set", "br0", "up")
        for i in range(1, n + 1):
            sh("ip", "link", "add", "kfv", "netns", ns[0], "type", "veth", "peer", "name", "eth0", "netns", ns[i])
            sh("ip", "-n", ns[0], "link", "set", "kfv", "name", f"p{i}")
            sh("ip", "-n", ns[0], "link", "set", f"p{i}", "master", "br0", "up")
            sh("ip", "-n", ns[i], "link", "set", "eth0", "up")
        time.sleep(0.5)

        def delivered():
            # Every port's counters in one `ip` (not one process per port).
            links = json.loads(sh("ip", "-n", ns[0], "-s", "-j", "link", "show"))
            ports = {f"p{i}" for i in range(2, n + 1)}
            return sum(l["stats64"]["tx"]["packets"] for l in links if l["ifname"] in ports)
        rates = []
        for _ in range(rounds):
            before = delivered()
            sh("ip", "netns", "exec", ns[1], blast, "eth0", "broadcast", "64", str(seconds))
            time.sleep(0.2)
            rates.append((delivered() - before) / seconds)
        return rates
    finally:
        close_namespaces(ns)


def bench_flood():
    """Issue 20's flood goal: a LAN whose every port is impaired (1 ms of delay, so the
    engine switches it), h1 sending broadcast frames of 64 B as fast as it can for a few
    seconds; deliveries per second (frames written to recipients, the engine's counters)
    with one write(2) per delivery and with io_uring batches, in the same run. The LAN is
    one shard: one engine core."""
    seconds, rounds = 3, 3
    table = []
    for n in [8, 32, 128]:
        for writes in ["syscall", "io_uring"]:
            # Paced to 1 M deliveries/s, then as fast as h1 can send (the engine
            # saturated: its backlog would spill into a later round).
            offers = [("1 M deliveries/s", (str(round(1e6 / (n - 1))),)), ("all h1 can", ())]
            for offered, rates, late in vemu_flood(n, seconds, rounds, writes, offers):
                table.append([n, writes, offered, round(statistics.median(rates)), round(min(rates)), round(max(rates)), f"{100 * max(late):.2f}"])
                print(f"flood {n} ports, {writes}, offered {offered}: {table[-1][3] / 1e6:.2f} M deliveries/s (rounds {', '.join(f'{r / 1e6:.2f}' for r in rates)}), "
                      f"frames over 1 ms late: worst round {100 * max(late):.2f}%")
    write_csv("flood.csv", ["ports", "writes", "offered", "deliveries_per_s_median", "min", "max", "late_percent_worst_round"], table)
    series = [(w, [r[0] for r in table if r[1] == w and r[2] == "all h1 can"], [r[3] / 1e6 for r in table if r[1] == w and r[2] == "all h1 can"]) for w in ["syscall", "io_uring"]]
    plot("flood.png", "Broadcast flood on an impaired LAN (1 ms per port): deliveries per second, one engine core", "ports", "M deliveries/s", series, logx=True)
    write_md("flood", "Flooding an impaired LAN: one write(2) per delivery vs io_uring batches", "issue 20's goal of >= 1 M deliveries/s per engine core on an impaired LAN",
             ["ports", "writes", "offered", "deliveries/s (median)", "min", "max", "frames > 1 ms late (worst round, %)"], table,
             [f"h1 sends 64-byte broadcast frames with AF_PACKET sendmmsg as fast as it can for {seconds} s, {rounds} rounds per setting; every port of the LAN has 1 ms of delay, so the engine switches it (one shard, one core of 2); snooping off.",
              "Deliveries are frames the engine wrote towards recipients (its counters), whatever the receivers' kernels do with them; the sender's TAP queue drops what the engine cannot read in time, as an overloaded port would.",
              "Saturated, frames wait in the engine and the lab's fidelity is rightly not ok; paced to 1 M deliveries/s (h1 sends 1 M / (ports - 1) frames a second, evenly), the late share is what the fidelity monitor judges (degraded above 1 %)."])
