"""Wireless: channel update cost, and the MANET example."""

import json
import os
import time

from .common import ROOT, down, engine_cpu_s, plot, sh, vemu, write_csv, write_md


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


def bench_manet():
    """The 50-node MANET at each pause time, over the simple medium (`csma: false`, as
    before issue 62) and over the 802.11 DCF (`csma: true`, 802.11b at 11 Mbit/s):
    VEMU_MANET_MACS picks (default both)."""
    import random

    duration = int(os.environ.get("VEMU_MANET_DURATION", "60"))
    pauses = [int(p) for p in os.environ.get("VEMU_MANET_PAUSES", "0,15,30,60").split(",")]
    macs = os.environ.get("VEMU_MANET_MACS", "simple,dcf").split(",")
    # VEMU_MANET_HELLO_S: babeld's hello interval (the example's 1 s; babeld's own default is 4 s).
    hello_s = int(os.environ.get("VEMU_MANET_HELLO_S", "1"))
    # VEMU_MANET_FIELDS: open (NET's open field, the default), city (NET's realistic
    # scenario: the same 1500 m x 300 m as a Manhattan grid of opaque 80 m buildings with
    # 20 m streets, members driving the streets and stopping `pause` at every crossing).
    fields = os.environ.get("VEMU_MANET_FIELDS", "open").split(",")
    base = open(os.path.join(ROOT, "examples", "manet-50.yaml")).read()
    if hello_s != 1:
        conf = ('"{% for i in ifaces %}interface {{ i.name }} type wireless hello-interval ' + str(hello_s)
                + '\\n{% endfor %}redistribute local\\n"')
        base = base.replace("{template: babeld/babeld-wireless.conf.j2}", conf)
        assert f"hello-interval {hello_s}" in base
    rows = []
    for field, mac, pause in [(f, m, p) for f in fields for m in macs for p in pauses]:
        seed = 1
        yaml = base.replace("pause: 0s", f"pause: {pause}s").replace("seed: 1", f"seed: {seed}")
        if field == "city":
            city = ("    city: {manhattan: {blocks: 15x3, block: 100m, street: 20m}}\n"
                    f"    mobility: {{model: streets, speed: 1-20, pause: {pause}s, stop: 100%}}\n")
            yaml = yaml.replace("    area: 1500x300\n", "").replace(f"    mobility: {{model: random-waypoint, speed: 0-20, pause: {pause}s}}\n", city)
            assert "model: streets" in yaml and "area:" not in yaml
        if mac == "dcf":
            # VEMU_MANET_DCF: more keys for the DCF, e.g. 'basic_rate: 11Mbit; rate_control: minstrel'.
            extra = "".join(f"    {k.strip()}\n" for k in os.environ.get("VEMU_MANET_DCF", "").split(";") if k.strip())
            yaml = yaml.replace("    range: 250m\n", "    range: 250m\n    csma: true\n    standard: 802.11b\n    rate: 11Mbit\n" + extra)
            assert "csma: true" in yaml
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
        rows.append([field, mac, hello_s, pause, duration, seed, r["sent"], r["delivered"], r["pdr"], r["delay_ms"]["mean"], r["routing_frames"], r["routing_per_delivered"], cpu])
        print(f"manet {field:4} {mac:6} hello {hello_s} s pause {pause:4} s: delivery ratio {r['pdr']:.3f} ({r['delivered']}/{r['sent']}), mean delay {r['delay_ms']['mean']:.1f} ms, "
              f"{r['routing_per_delivered']:.1f} routing frames per delivered packet, engine CPU {cpu:.1f}% of a core")
    write_md("manet", "50-node MANET with babeld", "NET's MANET scenario (50 nodes, 1500 m × 300 m, random waypoint, AODV; delivery ratio and overhead vs. pause time)",
             ["field", "MAC", "babeld hello (s)", "pause (s)", "duration (s)", "seed", "sent", "delivered", "delivery ratio", "mean delay (ms)", "routing frames", "routing / delivered", "engine CPU (%)"], rows,
             ["MAC simple: the medium without contention (csma: false); dcf: the 802.11 DCF (csma: true, 802.11b at 11 Mbit/s).",
              "field open: random waypoint in 1500 m x 300 m; city: the same area as 15 x 3 opaque buildings (80 m, 20 m streets), street mobility stopping `pause` at each crossing."])
    suffix = (f"_hello{hello_s}" if hello_s != 1 else "") + ("" if fields == ["open"] else "_" + "_".join(fields))
    write_csv(f"manet{suffix}.csv", ["field", "mac", "hello_s", "pause_s", "duration_s", "seed", "sent", "delivered", "pdr", "delay_ms_mean", "routing_frames", "routing_per_delivered", "engine_cpu_percent"], rows)
    label = {"simple": "vemu + babeld, simple medium", "dcf": "vemu + babeld, 802.11 DCF"}
    pdr, over = [], []
    for field, mac in [(f, m) for f in fields for m in macs]:
        pts = [r for r in rows if r[0] == field and r[1] == mac]
        name = label.get(mac, mac) + (f", hellos every {hello_s} s" if hello_s != 1 else "") + ("" if fields == ["open"] else f", {field}")
        pdr.append((name, [r[3] for r in pts], [r[8] for r in pts]))
        over.append((name, [r[3] for r in pts], [r[11] for r in pts]))
    plot(f"manet_pdr{suffix}.png", f"50-node MANET, babeld, 20 CBR flows, {duration} s", "pause time (s)", "packet delivery ratio", pdr)
    plot(f"manet_overhead{suffix}.png", f"50-node MANET, babeld, 20 CBR flows, {duration} s", "pause time (s)", "routing frames per delivered packet", over)
