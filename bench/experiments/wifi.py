"""802.11 DCF validated against Bianchi's model (issue 62): saturated stations sending to
one receiver with Bianchi's FHSS parameters and no retry limit, for each (W, m) of his
validation in basic and RTS/CTS access, 5 to 50 stations, beside his model computed from
the paper's formulas (crates/vemu-radio/src/wifi/bianchi.rs). `clock` is `virtual` for
the DCF core run on its virtual clock (crates/vemu-radio/examples/bianchi.rs), `lab` for
real labs: the nodes' own programs sending saturated UDP over a `csma: true` segment."""

import json
import os
import signal
import subprocess
import time

from .common import OUT, ROOT, addresses, down, engine_cpu_s, fidelity_of, in_node, plot, sh, up, vemu, write_csv, write_md

# Lab time each case runs (after a tenth of warm-up), s: ~10,000 frames at 1 Mbit/s.
SECONDS = int(os.environ.get("VEMU_BIANCHI_SECONDS", "100"))
# Real labs: seconds measured after a warm-up, and the station counts.
LAB_SECONDS = int(os.environ.get("VEMU_BIANCHI_LAB_SECONDS", "30"))
LAB_STATIONS = [int(n) for n in os.environ.get("VEMU_BIANCHI_LAB_STATIONS", "5,10,20").split(",")]

# A station's program: UDP datagrams of 987 bytes (a 1023-byte 802.11 payload: IP and
# UDP headers and LLC/SNAP) at 1 Mbit/s — more than its share, so that its queue is never
# empty — to the receiver's discard port.
SENDER = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
data, dst, gap = b"x" * 987, (sys.argv[1], 9), 1029 * 8 / 1e6
t = time.monotonic()
while True:
    try:
        s.sendto(data, dst)
    except OSError:
        pass
    t += gap
    time.sleep(max(0.0, t - time.monotonic()))
"""
# The receiver's: take every datagram (no ICMP port unreachable back over the air).
SINK = """
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 9))
while True:
    s.recv(4096)
"""


def bianchi_yaml(name, n):
    """n stations on a circle of 2 m around the receiver r (every frame heard by all at the
    same power: no capture), Bianchi's FHSS parameters, no retry limit, and as his model
    the ACK timeout and EIFS equal to DIFS (128 µs)."""
    import math

    members = ["      - {node: r, position: [5, 5]}"]
    for i in range(n):
        a = 2 * math.pi * i / n
        members.append(f"      - {{node: s{i + 1}, position: [{5 + 2 * math.cos(a):.3f}, {5 + 2 * math.sin(a):.3f}]}}")
    nodes = "".join(f"  s{i + 1}: {{}}\n" for i in range(n))
    return (f"name: {name}\nrouting: none\nnodes:\n  r: {{}}\n{nodes}segments:\n  air:\n    kind: wireless\n"
            "    ipv6: none\n    propagation: free-space\n    range: 250m\n    csma: true\n    standard: fhss\n"
            "    short_retry: none\n    long_retry: none\n    ack_timeout: 128us\n    eifs: 128us\n"
            "    members:\n" + "\n".join(members) + "\n")


def rx_counters(lab, node):
    base = "/sys/class/net/eth0/statistics/"
    out = sh(*in_node(lab, node), "cat", base + "rx_bytes", base + "rx_packets")
    b, p = out.split()
    return int(b), int(p)


def saturate(lab, senders, rate_bps, payload):
    """The SINK in node r and the SENDER in each of `senders`, sending to r; returns the
    processes (for stop())."""
    dst = addresses(lab)["r"]
    procs = [subprocess.Popen([*in_node(lab, "r"), "python3", "-c", SINK], start_new_session=True)]
    return procs + start_senders(lab, senders, dst, rate_bps, payload)


def received(lab, node, seconds):
    """What `node`'s interface received over `seconds`: bytes, frames, and the time it took."""
    b0, p0, t0 = *rx_counters(lab, node), time.monotonic()
    time.sleep(seconds)
    b1, p1, t1 = *rx_counters(lab, node), time.monotonic()
    return b1 - b0, p1 - p0, t1 - t0


def lab_rows():
    """W = 32, m = 5, basic access (the FHSS preset's window), in real labs."""
    model = subprocess.run(["cargo", "run", "--release", "--quiet", "-p", "vemu-radio", "--example", "bianchi", "--",
                            "--model", "32", "5", "basic", *map(str, LAB_STATIONS)],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout
    model = {int(l.split(",")[0]): float(l.split(",")[1]) for l in model.split()}
    rows = []
    for n in LAB_STATIONS:
        lab = "b-bianchi"
        up(lab, bianchi_yaml(lab, n))
        procs = []
        try:
            procs = saturate(lab, [f"s{i + 1}" for i in range(n)], 1e6, 987)
            time.sleep(max(3, LAB_SECONDS // 10))
            got_bytes, frames, secs = received(lab, "r", LAB_SECONDS)
        finally:
            stop(procs)
            down(lab)
        # Each frame's 802.11 payload: its Ethernet bytes less the 14-byte header, plus
        # the 8-byte LLC/SNAP header; over the channel's 1 Mbit/s.
        got = (got_bytes - 6 * frames) * 8 / secs / 1e6
        rows.append(["lab", 32, 5, "basic", n, got, model[n], (got - model[n]) / model[n] * 100, frames, ""])
    return rows


def bench_wifi_bianchi():
    out = subprocess.run(["cargo", "run", "--release", "--quiet", "-p", "vemu-radio", "--example", "bianchi"],
                         cwd=ROOT, capture_output=True, text=True, check=True, env=dict(os.environ, SECONDS=str(SECONDS))).stdout
    lines = out.strip().splitlines()
    header = lines[0].split(",")
    rows = [l.split(",") for l in lines[1:]]
    table = []
    for clock, w, m, access, n, got, model, delivered, attempts in rows:
        got, model = float(got), float(model)
        off = (got - model) / model * 100
        table.append([clock, int(w), int(m), access, int(n), got, model, off, int(delivered), int(attempts)])
    if os.environ.get("VEMU_BIANCHI_LAB", "1") != "0":
        table += lab_rows()
    write_csv("wifi_bianchi.csv", ["clock", "cw_min", "stages", "access", "stations", "throughput", "model", "off_pct", "delivered", "attempts"],
              table)
    plot_fig6(table)
    virtual = [r for r in table if r[0] == "virtual"]
    labs = [r for r in table if r[0] == "lab"]
    worst = max(abs(r[7]) for r in virtual)
    held = sum(1 for r in virtual if abs(r[7]) <= 2.0)
    lab_held = sum(1 for r in labs if abs(r[7]) <= 5.0)
    lab_worst = max((abs(r[7]) for r in labs), default=0.0)
    for r in table:
        print(f"wifi-bianchi: {r[0]:7} W={r[1]} m={r[2]} {r[3]:5} {r[4]:2} stations: {r[5]:.4f} (model {r[6]:.4f}, {r[7]:+.2f} %)")
    print(f"wifi-bianchi: virtual clock: {held} of {len(virtual)} within 2 % of the model (worst {worst:.2f} %), {SECONDS} s of lab time each")
    if labs:
        print(f"wifi-bianchi: real labs: {lab_held} of {len(labs)} within 5 % of the model (worst {lab_worst:.2f} %), {LAB_SECONDS} s each")
    write_md("wifi_bianchi", "802.11 DCF against Bianchi's model", "Bianchi, IEEE JSAC 18(3) 2000, Fig. 6 (basic access) and Fig. 7 (RTS/CTS); ns-3 validates its DCF the same way",
             ["clock", "W", "m", "access", "stations", "throughput", "model", "off (%)", "delivered", "attempts"], table,
             [f"Virtual clock: {held} of {len(virtual)} rows within 2 % of the model; the worst {worst:.2f} %.",
              f"Real labs: {lab_held} of {len(labs)} rows within 5 % of the model; the worst {lab_worst:.2f} % ({LAB_SECONDS} s each after a warm-up; n stations on a circle of 2 m around the receiver, each a Python program sending 987-byte UDP datagrams at 1 Mbit/s; throughput from the receiver's interface counters, each frame's 802.11 payload its Ethernet bytes − 14 + 8).",
              f"Each row: {SECONDS} s of lab time on the virtual clock (the first tenth a warm-up), 1023-byte payloads, no retry limit, every station within carrier sense of every other.",
              "As Bianchi's model assumes, stations that collided resume counting slots DIFS after the medium is idle, as the others do (their ACK/CTS timeout is DIFS), and EIFS is DIFS.",
              "In the labs the same: `ack_timeout: 128us`, `eifs: 128us`, `short_retry: none`, `long_retry: none`, `standard: fhss`."])


def plot_fig6(table):
    """As Bianchi's Fig. 6 and 7: the model's curves (lines) and vemu's runs (marks), one
    colour per (W, m), basic access left, RTS/CTS right."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    for ax, access in zip(axes, ("basic", "rts")):
        for k, (w, m) in enumerate(sorted({(r[1], r[2]) for r in table})):
            pts = [r for r in table if (r[0], r[1], r[2], r[3]) == ("virtual", w, m, access)]
            ns = [r[4] for r in pts]
            colour = f"C{k}"
            ax.plot(ns, [r[6] for r in pts], "-", color=colour, label=f"model W={w} m={m}")
            ax.plot(ns, [r[5] for r in pts], "x", color=colour, markersize=9, label=f"vemu W={w} m={m}")
            labs = [r for r in table if (r[0], r[1], r[2], r[3]) == ("lab", w, m, access)]
            if labs:
                ax.plot([r[4] for r in labs], [r[5] for r in labs], "o", color=colour, fillstyle="none", markersize=9,
                        label=f"vemu lab W={w} m={m}")
        ax.set_title("basic access (Fig. 6)" if access == "basic" else "RTS/CTS (Fig. 7)")
        ax.set_xlabel("stations")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("saturation throughput (of 1 Mbit/s)")
    for ax in axes:
        ax.legend(fontsize=7, loc="lower left" if ax is axes[0] else "lower right")
    fig.tight_layout()
    os.makedirs(OUT, exist_ok=True)
    fig.savefig(os.path.join(OUT, "wifi_bianchi.png"), dpi=110)
    plt.close(fig)


def start_senders(lab, senders, dst, rate_bps, payload):
    """The SENDER program in each of `senders` (nodes), `payload`-byte UDP datagrams at
    `rate_bps` to `dst`; returns the processes."""
    sender = SENDER.replace('b"x" * 987', f'b"x" * {payload}').replace("1029 * 8 / 1e6", f"{payload + 42} * 8 / {rate_bps}")
    st = json.loads(vemu("status", "--lab", lab, "--json"))
    mac = next(i["mac"] for n in st["nodes"] for i in n["ifaces"] if any(a.split("/")[0] == dst for a in i["addrs"]))
    procs = []
    for s in senders:
        # A permanent neighbour: no ARP over the air while it runs.
        sh(*in_node(lab, s), "ip", "neigh", "replace", dst, "lladdr", mac, "dev", "eth0", "nud", "permanent")
        procs.append(subprocess.Popen([*in_node(lab, s), "python3", "-c", sender, dst], start_new_session=True))
    return procs


def stop(procs):
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def chain_lab_yaml(name, hops, rts):
    """hops + 1 nodes 200 m apart on one 802.11b channel at 11 Mbit/s, ns-2's radio:
    250 m reception, 550 m carrier sense (two-ray ground): each node reaches its
    neighbours only, and senses two hops away."""
    nodes = "".join(f"  n{i}: {{}}\n" for i in range(1, hops + 2))
    members = "".join(f"      - {{node: n{i}, position: [{200 * (i - 1)}, 0]}}\n" for i in range(1, hops + 2))
    return (f"name: {name}\nrouting: none\nnodes:\n{nodes}segments:\n  air:\n    kind: wireless\n    ipv6: none\n"
            "    propagation: two-ray-ground\n    range: 250m\n    carrier_sense: 550m\n    csma: true\n    standard: 802.11b\n"
            f"    rate: 11Mbit\n{'    rts_threshold: 0' + chr(10) if rts else ''}    members:\n{members}")


def chain_routes(lab, hops, addr):
    """Static routes along the chain (no routing daemon: the MAC alone is measured), no
    ICMP redirects (every node forwards out of the interface the packet came in by)."""
    for i in range(1, hops + 2):
        cmds = ["sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.send_redirects=0 net.ipv4.conf.eth0.send_redirects=0"]
        for j in range(1, hops + 2):
            if abs(i - j) > 1:
                via = addr[f"n{i + 1}"] if j > i else addr[f"n{i - 1}"]
                cmds.append(f"ip route replace {addr[f'n{j}']}/32 via {via}")
        sh(*in_node(lab, f"n{i}"), "sh", "-c", " && ".join(cmds))


def bench_wifi_chain():
    """TCP over a chain of 1..7 radio hops (802.11b, 11 Mbit/s), with and without RTS/CTS:
    throughput against hops beside the published shape (at best 1/4 of one hop's from
    four hops on, as 802.11's spatial reuse allows; about 1/7 measured in simulation)."""
    seconds = int(os.environ.get("VEMU_WIFI_CHAIN_SECONDS", "20"))
    hops_list = [int(h) for h in os.environ.get("VEMU_WIFI_CHAIN_HOPS", "1,2,3,4,5,6,7").split(",")]
    rows = []
    for rts in (False, True):
        for hops in hops_list:
            lab = "b-wchain"
            up(lab, chain_lab_yaml(lab, hops, rts))
            try:
                addr = addresses(lab)
                chain_routes(lab, hops, addr)
                last = f"n{hops + 1}"
                srv = subprocess.Popen([*in_node(lab, last), "iperf3", "-s", "-1"], stdout=subprocess.DEVNULL, start_new_session=True)
                time.sleep(0.5)
                sh(*in_node(lab, "n1"), "ping", "-c", "3", "-i", "0.3", "-W", "5", addr[last], check=False)
                out = sh(*in_node(lab, "n1"), "iperf3", "-c", addr[last], "-t", str(seconds), "-O", "2", "-J", check=False)
                stop([srv])
                try:
                    bps = json.loads(out)["end"]["sum_received"]["bits_per_second"]
                except (ValueError, KeyError):
                    bps = 0.0
                st = json.loads(vemu("status", "--lab", lab, "--json"))
                macs = [m["radio"].get("mac") or {} for m in st["segments"][0]["members"]]
                retries = sum(m.get("tx_retries", 0) for m in macs)
                sent = sum(m.get("tx_data", 0) for m in macs)
                dropped = sum(m.get("dropped_retry_limit", 0) for m in macs)
            finally:
                down(lab)
            rows.append(["rts" if rts else "basic", hops, bps / 1e6, retries / max(sent, 1), dropped])
            print(f"wifi-chain: {'RTS/CTS' if rts else 'basic  '} {hops} hops: TCP {bps / 1e6:.2f} Mbit/s, "
                  f"{retries / max(sent, 1) * 100:.1f} % of data frames retries, {dropped} dropped at the retry limit")
    for r in rows:
        one = next((x[2] for x in rows if x[0] == r[0] and x[1] == 1), None)
        r.append(r[2] / one if one else float("nan"))
    write_csv("wifi_chain.csv", ["access", "hops", "tcp_mbps", "retry_share", "dropped_retry_limit", "of_one_hop"], rows)
    series = []
    for access in ("basic", "rts"):
        pts = [r for r in rows if r[0] == access]
        series.append((f"vemu, {'RTS/CTS' if access == 'rts' else 'basic access'}", [r[1] for r in pts], [r[2] for r in pts]))
    one = next((r[2] for r in rows if r[0] == "basic" and r[1] == 1), 0)
    hs = sorted({r[1] for r in rows})
    series.append(("published bound: one hop's / hops, 1/4 from 4 hops", hs, [one / min(h, 4) for h in hs]))
    series.append(("published simulation: about 1/7 of one hop's", hs, [one / 7 if h >= 4 else None for h in hs]))
    plot("wifi_chain.png", "TCP over a chain of 802.11b radio hops (11 Mbit/s, 200 m apart)", "hops", "TCP throughput (Mbit/s)",
         [(n, [x for x, y in zip(xs, ys) if y is not None], [y for y in ys if y is not None]) for n, xs, ys in series])
    write_md("wifi_chain", "TCP over a chain of radio hops", "Li et al., Capacity of Ad Hoc Wireless Networks (MobiCom 2001), as quoted in vemu issue 62; NET vs Xen/UML Sec. 4.2 (TCP over an 11 Mbit/s chain)",
             ["access", "hops", "TCP (Mbit/s)", "retries / data frames", "dropped (retry limit)", "of one hop's"], rows,
             [f"iperf3 TCP for {seconds} s from n1 to the chain's end; nodes 200 m apart, 250 m reception, 550 m carrier sense (ns-2's two-ray radio), static routes.",
              "Published shape: a chain's TCP throughput falls to at best a quarter of one hop's from four hops on (a node's transmissions keep its neighbours within carrier-sense range quiet), about 1/7 in Li et al.'s simulations."])


def bench_wifi_hidden():
    """A hidden-terminal pair: a and c each send saturated UDP to r between them; they
    cannot sense each other. Without RTS/CTS their frames overlap at r; with it, r's CTS
    keeps the other quiet — at the price of an RTS and a CTS at the 1 Mbit/s basic rate
    before every frame, which 802.11b at 2 Mbit/s repays and at 11 Mbit/s may not."""
    seconds = int(os.environ.get("VEMU_WIFI_HIDDEN_SECONDS", "20"))
    rows = []
    for rate in (2, 11):
        for rts in (False, True):
            lab = "b-whidden"
            yaml = (f"name: {lab}\nrouting: none\nnodes: {{a: {{}}, r: {{}}, c: {{}}}}\nsegments:\n  air:\n    kind: wireless\n    ipv6: none\n"
                    "    propagation: two-ray-ground\n    range: 250m\n    carrier_sense: 250m\n    csma: true\n    standard: 802.11b\n"
                    f"    rate: {rate}Mbit\n{'    rts_threshold: 0' + chr(10) if rts else ''}    members:\n      - {{node: a, position: [0, 0]}}\n"
                    "      - {node: r, position: [200, 0]}\n      - {node: c, position: [400, 0]}\n")
            up(lab, yaml)
            procs = []
            try:
                procs = saturate(lab, ["a", "c"], 1.5 * rate * 1e6, 1400)
                time.sleep(3)
                got_bytes, _, secs = received(lab, "r", seconds)
                st = json.loads(vemu("status", "--lab", lab, "--json"))
            finally:
                stop(procs)
                down(lab)
            members = st["segments"][0]["members"]
            macs = [m["radio"].get("mac") or {} for m in members]
            collided = sum(p["lost_collision"] for m in members for p in m["radio"]["sent_to"] if p["node"] == "r")
            sent = sum(m.get("tx_data", 0) for m in macs)
            mbps = got_bytes * 8 / secs / 1e6
            dropped = sum(m.get("dropped_retry_limit", 0) for m in macs)
            rows.append([rate, "rts" if rts else "basic", mbps, collided / max(sent, 1), dropped])
            print(f"wifi-hidden: {rate:2} Mbit/s {'RTS/CTS' if rts else 'basic  '}: {mbps:.2f} Mbit/s at r, "
                  f"{collided / max(sent, 1) * 100:.1f} % of data frames collided, {dropped} dropped at the retry limit")
    write_csv("wifi_hidden.csv", ["rate_mbps", "access", "mbps_at_receiver", "collided_share", "dropped_retry_limit"], rows)
    write_md("wifi_hidden", "A hidden-terminal pair, with and without RTS/CTS", "the classic hidden-terminal experiment (802.11's reason for RTS/CTS)",
             ["rate (Mbit/s)", "access", "Mbit/s at r", "collided / data frames", "dropped (retry limit)"], rows,
             [f"a and c 400 m apart, r between them (250 m reception and carrier sense), each sending 1400-byte UDP at 1.5 times the channel's rate to r for {seconds} s; 802.11b, long preamble; RTS and CTS at 1 Mbit/s."])


def bench_wifi_cpu():
    """The MAC's cost: a saturated cell of 50 stations sending to one receiver on 802.11g
    at 54 Mbit/s, the engine's CPU share while it runs and what the cell carries."""
    seconds = int(os.environ.get("VEMU_WIFI_CPU_SECONDS", "30"))
    rows = []
    for n in [int(x) for x in os.environ.get("VEMU_WIFI_CPU_STATIONS", "10,50").split(",")]:
        lab = "b-wcpu"
        members = ["      - {node: r, position: [0, 0]}"] + [f"      - {{node: s{i}, position: [{5 + i % 10}, {i // 10}]}}" for i in range(1, n + 1)]
        nodes = "".join(f"  s{i}: {{}}\n" for i in range(1, n + 1))
        yaml = (f"name: {lab}\nrouting: none\nnodes:\n  r: {{}}\n{nodes}segments:\n  air:\n    kind: wireless\n    ipv6: none\n"
                "    propagation: free-space\n    range: 250m\n    csma: true\n    standard: 802.11g\n    rate: 54Mbit\n    members:\n"
                + "\n".join(members) + "\n")
        up(lab, yaml)
        procs = []
        try:
            procs = saturate(lab, [f"s{i}" for i in range(1, n + 1)], 60e6 / n, 1400)
            time.sleep(3)
            cpu0, t0 = engine_cpu_s(lab), time.monotonic()
            got_bytes, got_frames, secs = received(lab, "r", seconds)
            cpu = (engine_cpu_s(lab) - cpu0) / (time.monotonic() - t0) * 100
            verdict = fidelity_of(lab)
        finally:
            stop(procs)
            down(lab)
        mbps = got_bytes * 8 / secs / 1e6
        frames = got_frames / secs
        rows.append([n, mbps, frames, cpu, verdict])
        print(f"wifi-cpu: {n} stations at 54 Mbit/s: {mbps:.1f} Mbit/s ({frames:.0f} frames/s) at the receiver, engine CPU {cpu:.1f} % of a core, fidelity {verdict or '?'}")
    write_csv("wifi_cpu.csv", ["stations", "mbps_at_receiver", "frames_per_s", "engine_cpu_percent", "fidelity"], rows)
    write_md("wifi_cpu", "The DCF's cost: a saturated 802.11g cell", "issue 62's cost target (50 stations at 54 Mbit/s in real time)",
             ["stations", "Mbit/s at the receiver", "frames/s", "engine CPU (% of a core)", "fidelity"], rows,
             [f"Each station a Python program sending 1400-byte UDP (60 Mbit/s offered in all) to one receiver for {seconds} s; the engine's threads' CPU time over wall-clock time."])


def scale_yaml(lab, n, channels=(1, 1, 1, 1)):
    """4 access points at the corners of a 200 m square's inner quarter (on `channels`),
    bridged to one wired LAN with a server; n stations at random places of the square
    (the lab's seed), all in one subnet, switched on on channel 1."""
    aps = [(50, 50), (150, 50), (50, 150), (150, 150)]
    nodes = "".join(f"  ap{k}: {{}}\n" for k in range(4)) + "  srv: {}\n" + "".join(f"  s{i}: {{}}\n" for i in range(n))
    wired = "      - {node: srv, ip: [10.9.255.1/16]}\n" + "".join(f"      - {{node: ap{k}, iface: eth1, ip: none}}\n" for k in range(4))
    air = "".join(f"      - {{node: ap{k}, iface: wlan0, ip: none, position: [{x}, {y}], role: ap, ssid: lab, bridge: true, channel: {c}}}\n"
                  for k, ((x, y), c) in enumerate(zip(aps, channels)))
    air += "".join(f"      - {{node: s{i}, ip: [10.9.{1 + i // 250}.{1 + i % 250}/16], role: station, ssid: lab}}\n" for i in range(n))
    return (f"name: {lab}\nrouting: none\naddressing: {{ipv6: none}}\nseed: 7\nnodes:\n{nodes}segments:\n"
            f"  wired:\n    kind: lan\n    members:\n{wired}"
            "  air:\n    kind: wireless\n    propagation: log-distance\n    exponent: 3\n    sigma: 0dB\n    range: 120m\n"
            f"    csma: true\n    standard: 802.11g\n    area: 200x200\n    members:\n{air}")


def bench_wifi_scale():
    """Infrastructure mode at scale: n stations on 4 access points bridged to a wired
    server. How long `vemu up` takes, when (lab clock) the last station associated, and
    how many reach the server (3 pings each, all stations at once)."""
    from concurrent.futures import ThreadPoolExecutor

    rows = []
    sizes = [int(x) for x in os.environ.get("VEMU_WIFI_SCALE_STATIONS", "25,50,100").split(",")]
    # (The usual plan of 2.4 GHz access points, 1, 6 and 11, for the largest: stations
    # scan the three channels and two BSSs share each.)
    for n, channels in [(n, (1, 1, 1, 1)) for n in sizes] + [(max(sizes), (1, 6, 11, 1))]:
        lab = "b-wscale"
        up_s = up(lab, scale_yaml(lab, n, channels))
        try:
            t0 = time.monotonic()
            while True:
                st = json.loads(vemu("status", "--lab", lab, "--json"))
                air = next(g for g in st["segments"] if g["name"] == "air")
                joined = sum(1 for m in air["members"] if (m["radio"].get("wifi") or {}).get("ap"))
                if joined == n or time.monotonic() - t0 > 10:
                    break
                time.sleep(0.2)
            log = open(f"/var/log/vemu/{lab}/wifi.csv").read().splitlines()[1:]
            assoc = [float(line.split(",")[0]) for line in log if ",associated," in line]
            last_assoc_s = max(assoc) if assoc else float("nan")

            def reach(i):
                r = subprocess.run(in_node(lab, f"s{i}") + ["ping", "-c", "3", "-i", "0.3", "-W", "2", "-q", "10.9.255.1"],
                                   capture_output=True, text=True)
                return " 0 received" not in r.stdout and r.returncode == 0

            with ThreadPoolExecutor(max_workers=32) as ex:
                reached = sum(ex.map(reach, range(n)))
        finally:
            down(lab)
        plan = "/".join(str(c) for c in channels)
        rows.append([n, plan, up_s, last_assoc_s, joined, reached])
        print(f"wifi-scale: {n} stations on 4 APs (channels {plan}): up in {up_s:.1f} s, {joined} associated "
              f"(the last {last_assoc_s:.2f} s into the lab clock), {reached} reach the server")
    write_csv("wifi_scale.csv", ["stations", "ap_channels", "up_s", "last_association_s", "associated", "reached_server"], rows)
    one = [r for r in rows if r[1] == "1/1/1/1"]
    plot("wifi_scale.png", "Stations on 4 access points: up and associated", "stations", "seconds",
         [("vemu up (wall)", [r[0] for r in one], [r[2] for r in one]),
          ("last association (lab clock)", [r[0] for r in one], [r[3] for r in one]),
          ("last association, APs on 1/6/11/1", [r[0] for r in rows if r not in one], [r[3] for r in rows if r not in one])])
    write_md("wifi_scale", "Stations on 4 access points, bridged to a wired server",
             "issue 64's scale goal (100 stations on 4 APs associated within 10 s of up, all reaching a wired server); Mininet-WiFi's users report pings stopping beyond ~20 stations (its issue #289)",
             ["stations", "AP channels", "vemu up (s)", "last association (lab s)", "associated", "reach the server"], rows,
             ["802.11g, log-distance (exponent 3), 120 m range, 4 access points 100 m apart bridged to one LAN; stations at random places of the 200 m square; "
              "each station pings the server 3 times, all at once (32 at a time). Mininet-WiFi itself cannot run on this machine (no mac80211_hwsim): no side-by-side figure."])
