"""An AS-level Internet in a box (issue 66): made-up AS graphs of n ASes (`vemu import
--as-graph n`, CAIDA's form) imported as one BIRD router per AS with Gao-Rexford
policies. For each size: how long `vemu up` takes (building the lab, then waiting for its routers
to answer `birdc`), how long BGP takes to converge (every router holding a route to every
other AS's prefix in its kernel; and the last route change any router made, with the
updates they sent, from `vemu report bgp`), and what an AS costs (BIRD's resident memory
and CPU time per AS, up to convergence)."""

import json
import os
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from .common import VEMU, down, plot, rss_kib, vemu, write_csv, write_md

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
        path_yaml = f"/tmp/bench-{lab}.yaml"
        with open(path_yaml, "w") as f:
            f.write(yaml)
        t_up = time.monotonic()
        r = subprocess.run([VEMU, "up", path_yaml], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"vemu up {lab} failed: {r.stdout}{r.stderr}")
        up_s = time.monotonic() - t_up
        # (`vemu up` builds the lab, then waits for every router to answer: it says when.)
        m = re.search(r"routers answer \(([0-9.]+) s after up\)", r.stderr)
        ready_s = float(m.group(1)) if m else float("nan")
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
            # What the routers say, once quiet: their last route change (lab clock) and
            # the routes they exported.
            time.sleep(3)
            bgp = json.loads(vemu("report", "bgp", "--json", "--lab", lab))
            last_change_s = (bgp["last_change_ns"] or 0) / 1e9
        finally:
            down(lab)
        row = [n, rels, up_s - ready_s, ready_s, converged_s, last_change_s, bgp["updates_sent"],
               bgp["established"], bgp["sessions"], rss_mib / n, 1000 * cpu / n]
        rows.append(row)
        print(f"internet: {n} ASes, {rels} relationships: built in {up_s - ready_s:.1f} s, routers answered {ready_s:.1f} s after, "
              f"converged {converged_s:.1f} s after up (last route change at {last_change_s:.1f} s of the lab clock, "
              f"{bgp['updates_sent']} routes exported), {rss_mib / n:.1f} MiB and {1000 * cpu / n:.0f} ms of CPU per AS ({len(pids)} BIRDs)")
    write_csv("internet.csv", ["ases", "relationships", "build_s", "routers_ready_s", "converged_after_up_s", "last_route_change_s",
                               "routes_exported", "sessions_established", "sessions", "bird_rss_mib_per_as", "bird_cpu_ms_per_as"], rows)
    plot("internet.png", "An AS-level Internet: BGP convergence against ASes", "ASes", "seconds",
         [("vemu up: the lab built", [r[0] for r in rows], [r[2] for r in rows]),
          ("vemu up: then its routers answered", [r[0] for r in rows], [r[3] for r in rows]),
          ("BGP's last route change (lab clock)", [r[0] for r in rows], [r[5] for r in rows])])
    write_md("internet", "An AS-level Internet: BIRD routers with Gao-Rexford policies",
             "issue 66 (the SEED emulator's and ETH's mini-Internet's use: ASes with BGP policies on one machine); "
             "convergence against the number of ASes",
             ["ASes", "relationships", "built (s)", "routers answered after (s)", "converged after up (s)",
              "last route change (lab clock, s)", "routes exported", "sessions established", "sessions", "BIRD MiB per AS",
              "BIRD CPU ms per AS"], rows,
             ["Made-up AS graphs (`vemu import --as-graph n --seed 1`: a peering tier-1 clique, providers by preferential "
              "attachment, some peering), imported without hosts; converged = every router's kernel holds a BIRD route to each "
              "of the n-1 other ASes' /24s (polled every 0.2 s with `ip route`); the last route change and the routes exported "
              "(announced and withdrawn, summed over the routers) are `vemu report bgp`'s, read 3 s after; a session counts at "
              "both ends; memory is the BIRDs' resident set after "
              "convergence, CPU their user+system time up to then. The SEED emulator and the mini-Internet publish no "
              "figures of this kind to set beside these."])
