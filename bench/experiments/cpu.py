"""CPU left for the software under test vs number of nodes."""

import os
import subprocess
import time

from .common import VethChain, addresses, down, engine_cpu_s, fidelity_of, in_node, pairs_yaml, plot, up, wait_idle, write_csv, write_md


def cpu_probe(seconds=4):
    """The share of the machine a CPU-bound program gets: one busy loop per core for
    `seconds`, their CPU time over the wall time of all cores (1.0 = the whole machine).
    CPU time, not iterations: the loops' speed varies with the machine, their share not."""
    # Each loop pinned to its core: left alone, the scheduler sometimes keeps both on
    # one core for seconds and the probe would measure placement, not what is left.
    code = "import os, sys, time\nos.sched_setaffinity(0, {int(sys.argv[1])})\n" \
        f"end = time.perf_counter() + {seconds}\nwhile time.perf_counter() < end:\n    pass\nprint(time.process_time())"
    cores = os.cpu_count() or 1
    t0 = time.perf_counter()
    procs = [subprocess.Popen(["python3", "-c", code, str(c)], stdout=subprocess.PIPE, text=True) for c in range(cores)]
    cpu = sum(float(p.communicate()[0]) for p in procs)
    return cpu / ((time.perf_counter() - t0) * cores)


def bench_cpu():
    """CPU left for the software under test vs. the number of nodes, every pair of nodes
    exchanging 500 pings/s of 1000 bytes (NET Fig. 16)."""
    wait_idle()
    base = cpu_probe()
    print(f"cpu: on the empty machine the busy loops get {base:.3f} of it")
    rows = []
    for n in [int(x) for x in os.environ.get("VEMU_CPU_NODES", "10,50,100,200").split(",")]:
        pairs = n // 2

        def load(prefixes, servers):
            return [subprocess.Popen([*pre, "ping", "-q", "-i", "0.002", "-s", "1000", "-w", "6", srv], stdout=subprocess.DEVNULL) for pre, srv in zip(prefixes, servers)]

        kern = [VethChain(1, prefix=f"kc{i}-") for i in range(pairs)]
        try:
            wait_idle()
            procs = load([k.prefix(0) for k in kern], [k.server for k in kern])
            time.sleep(1)
            k_left = cpu_probe()
            for p in procs:
                p.wait()
        finally:
            for k in kern:
                k.close()
        wait_idle()
        up("bcpu", pairs_yaml("bcpu", pairs))
        try:
            wait_idle()
            idle = cpu_probe()
            addr = addresses("bcpu")
            procs = load([in_node("bcpu", f"c{i}") for i in range(pairs)], [addr[f"s{i}"] for i in range(pairs)])
            time.sleep(1)
            cpu0, t0 = engine_cpu_s("bcpu"), time.monotonic()
            v_left = cpu_probe()
            engine = (engine_cpu_s("bcpu") - cpu0) / (time.monotonic() - t0) * 100
            for p in procs:
                p.wait()
            verdict = fidelity_of("bcpu")
        finally:
            down("bcpu")
        rows.append([n, pairs * 1000, idle, v_left, engine, k_left, verdict])
        print(f"cpu {n:4} nodes ({pairs * 1000} pings/s): left for software under test: vemu idle {idle:.3f}, vemu loaded {v_left:.3f} (engine {engine:.0f}% of a core, {verdict}), kernel veth {k_left:.3f}")
    write_csv("cpu.csv", ["nodes", "pings_per_s", "vemu_idle_left", "vemu_loaded_left", "engine_cpu_percent", "kernel_loaded_left", "vemu_fidelity"], rows)
    ns = [r[0] for r in rows]
    plot("cpu.png", "CPU left for the software under test", "nodes", "fraction of an empty machine",
         [("vemu, idle lab", ns, [r[2] for r in rows]), ("vemu, 500 pings/s per pair", ns, [r[3] for r in rows]), ("kernel veth pairs, same pings", ns, [r[5] for r in rows])], logx=True)
    write_md("cpu", "CPU left for the software under test", "NET Fig. 16 (CPU available to the software under test vs. number of virtual nodes)",
             ["nodes", "pings/s (all pairs)", "vemu idle: left", "vemu loaded: left", "engine CPU (% of a core)", "kernel veth, same load: left", "vemu fidelity"], rows,
             [f"'left' is the CPU time two busy loops (one per core) get over 4 s, as a fraction of both cores' time; on the empty machine they got {base:.3f}.",
              "The difference between vemu and the kernel column is what emulation costs; idle nodes cost nothing (no process, no timer)."])
