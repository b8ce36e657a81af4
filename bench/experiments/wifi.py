"""802.11 DCF validated against Bianchi's model (issue 62): saturated stations sending to
one receiver with Bianchi's FHSS parameters and no retry limit, for each (W, m) of his
validation in basic and RTS/CTS access, 5 to 50 stations, beside his model computed from
the paper's formulas (crates/vemu-radio/src/wifi/bianchi.rs). `clock` is `virtual` for
the DCF core run on its virtual clock (crates/vemu-radio/examples/bianchi.rs)."""

import os
import subprocess

from .common import OUT, ROOT, write_csv, write_md

# Lab time each case runs (after a tenth of warm-up), s: ~10,000 frames at 1 Mbit/s.
SECONDS = int(os.environ.get("VEMU_BIANCHI_SECONDS", "100"))


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
    write_csv("wifi_bianchi.csv", ["clock", "cw_min", "stages", "access", "stations", "throughput", "model", "off_pct", "delivered", "attempts"],
              table)
    plot_fig6(table)
    worst = max(abs(r[7]) for r in table)
    held = sum(1 for r in table if abs(r[7]) <= 2.0)
    for r in table:
        print(f"wifi-bianchi: W={r[1]} m={r[2]} {r[3]:5} {r[4]:2} stations: {r[5]:.4f} (model {r[6]:.4f}, {r[7]:+.2f} %)")
    print(f"wifi-bianchi: {held} of {len(table)} within 2 % of the model (worst {worst:.2f} %), {SECONDS} s of lab time each")
    write_md("wifi_bianchi", "802.11 DCF against Bianchi's model", "Bianchi, IEEE JSAC 18(3) 2000, Fig. 6 (basic access) and Fig. 7 (RTS/CTS); ns-3 validates its DCF the same way",
             ["clock", "W", "m", "access", "stations", "throughput", "model", "off (%)", "delivered", "attempts"], table,
             [f"{held} of {len(table)} rows within 2 % of the model; the worst {worst:.2f} %.",
              f"Each row: {SECONDS} s of lab time on the virtual clock (the first tenth a warm-up), 1023-byte payloads, no retry limit, every station within carrier sense of every other.",
              "As Bianchi's model assumes, stations that collided resume counting slots DIFS after the medium is idle, as the others do (their ACK/CTS timeout is DIFS), and EIFS is DIFS.",
              "Real labs (`clock` lab: the nodes' own programs over the DCF) are not in this run yet: the DCF is not yet the wireless segments' channel (docs/wireless.md)."])


def plot_fig6(table):
    """As Bianchi's Fig. 6 and 7: the model's curves (lines) and vemu's runs (marks), one
    colour per (W, m), basic access left, RTS/CTS right."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    for ax, access in zip(axes, ("basic", "rts")):
        for k, (w, m) in enumerate(sorted({(r[1], r[2]) for r in table})):
            pts = [r for r in table if (r[1], r[2], r[3]) == (w, m, access)]
            ns = [r[4] for r in pts]
            colour = f"C{k}"
            ax.plot(ns, [r[6] for r in pts], "-", color=colour, label=f"model W={w} m={m}")
            ax.plot(ns, [r[5] for r in pts], "x", color=colour, markersize=9, label=f"vemu W={w} m={m}")
        ax.set_title("basic access (Fig. 6)" if access == "basic" else "RTS/CTS (Fig. 7)")
        ax.set_xlabel("stations")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("saturation throughput (of 1 Mbit/s)")
    axes[1].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    os.makedirs(OUT, exist_ok=True)
    fig.savefig(os.path.join(OUT, "wifi_bianchi.png"), dpi=110)
    plt.close(fig)
