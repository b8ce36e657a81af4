"""DiffServ on a 10 Mbit/s link, vs a kernel HTB tree."""

import json
import os
import subprocess
import time

from .common import addresses_of, close_namespaces, down, fidelity_of, in_node, ping_rtts_ms, plot, rtt_stats, sh, up, vemu, write_csv, write_md


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
    return [ping_rtts_ms(p.communicate()[0]) for p in ps]


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
