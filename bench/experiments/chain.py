"""Chains of 1..16 hops: RTT and TCP throughput vs a kernel veth chain."""

import time

from .common import VethChain, chain_yaml, down, in_node, iperf, ping_avg, plot, up, write_csv, write_md


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
