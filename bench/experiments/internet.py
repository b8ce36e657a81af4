"""An AS-level Internet in a box (issue 66): made-up AS graphs of n ASes (`vemu import
--as-graph n`, CAIDA's form) imported as one BIRD router per AS with Gao-Rexford
policies. For each size: how long `vemu up` takes, how long BGP takes to converge (every
router holding a route to every other AS's prefix in its kernel), and what an AS costs
(BIRD's resident memory and CPU time per AS, up to convergence)."""

import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from .common import down, plot, rss_kib, up, vemu, write_csv, write_md

SIZES = [int(n) for n in os.environ.get("VEMU_INTERNET_ASES", "10,25,50,100,200").split(",")]
# Longest wait for convergence, s.
TIMEOUT_S = float(os.environ.get("VEMU_INTERNET_TIMEOUT", "300"))


def bird_routes(lab, asn):
    """Routes BIRD installed in AS `asn`'s kernel table."""
    r = subprocess.run(["ip", "-n", f"vemu-{lab}.as{asn}", "-4", "route", "show", "proto", "bird"],
                       capture_output=True, text=True)
    return len(r.stdout.splitlines())


def bird_pids():
    r = subprocess.run(["pgrep", "-x", "bird"], capture_output=True, text=True)
    return [int(p) for p in r.stdout.split()]


def cpu_s(pid):
    try:
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def bench_internet():
    rows = []
    for n in SIZES:
        lab = "b-inet"
        rel = vemu("import", "--as-graph", str(n), "--seed", "1")
        ases = [int(line.split("|")[0]) for line in rel.splitlines() if line and not line.startswith("#")]
        ases = sorted(set(ases) | {int(line.split("|")[1]) for line in rel.splitlines() if line and not line.startswith("#")})
        path = f"/tmp/bench-as{n}.txt"
        with open(path, "w") as f:
            f.write(rel)
        yaml = vemu("import", path, "--name", lab)
        rels = sum(1 for line in rel.splitlines() if line and not line.startswith("#"))
        up_s = up(lab, yaml)
        t0 = time.monotonic()
        try:
            converged_s = float("nan")
            with ThreadPoolExecutor(max_workers=16) as ex:
                while time.monotonic() - t0 < TIMEOUT_S:
                    counts = list(ex.map(lambda a: bird_routes(lab, a), ases))
                    if all(c >= n - 1 for c in counts):
                        converged_s = time.monotonic() - t0
                        break
                    time.sleep(0.2)
            pids = bird_pids()
            rss_mib = sum(rss_kib(p) for p in pids) / 1024
            cpu = sum(cpu_s(p) for p in pids)
        finally:
            down(lab)
        row = [n, rels, up_s, converged_s, rss_mib / n, 1000 * cpu / n]
        rows.append(row)
        print(f"internet: {n} ASes, {rels} relationships: up {up_s:.1f} s, converged {converged_s:.1f} s after up, "
              f"{rss_mib / n:.1f} MiB and {1000 * cpu / n:.0f} ms of CPU per AS ({len(pids)} BIRDs)")
    write_csv("internet.csv", ["ases", "relationships", "up_s", "converged_s", "bird_rss_mib_per_as", "bird_cpu_ms_per_as"], rows)
    plot("internet.png", "An AS-level Internet: BGP convergence against ASes", "ASes", "seconds",
         [("vemu up", [r[0] for r in rows], [r[2] for r in rows]),
          ("BGP converged (after up)", [r[0] for r in rows], [r[3] for r in rows])])
    write_md("internet", "An AS-level Internet: BIRD routers with Gao-Rexford policies",
             "issue 66 (the SEED emulator's and ETH's mini-Internet's use: ASes with BGP policies on one machine); "
             "convergence against the number of ASes",
             ["ASes", "relationships", "vemu up (s)", "converged after up (s)", "BIRD MiB per AS", "BIRD CPU ms per AS"], rows,
             ["Made-up AS graphs (`vemu import --as-graph n --seed 1`: a peering tier-1 clique, providers by preferential "
              "attachment, some peering), imported without hosts; converged = every router's kernel holds a BIRD route to each "
              "of the n-1 other ASes' /24s (polled every 0.2 s with `ip route`); memory is the BIRDs' resident set after "
              "convergence, CPU their user+system time up to then. The SEED emulator and the mini-Internet publish no "
              "figures of this kind to set beside these."])
