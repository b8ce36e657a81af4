"""Start-up / tear-down time and memory of labs of 10..1000 nodes."""

import json
import os
import time

from .common import down, plot, rss_kib, up, vemu, write_csv, write_md


def mem_available_kib():
    for line in open("/proc/meminfo"):
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    return 0


def bench_scale():
    rows = []
    for n in [10, 100, 1000, 10000]:
        for routing in ["static", "none"]:
            if routing == "static" and n > 1000:
                # Static routes are aggregated (~20-100 a node in a 1000-node tree, not
                # 999); 10,000 nodes are measured without them (see README).
                continue
            name = "bs"
            # A tree: node i hangs off node i // 2 (a connected lab with n - 1 links).
            nodes = "".join(f"  n{i}: {{}}\n" for i in range(1, n + 1))
            links = "".join(f"  - endpoints: [n{i // 2}, n{i}]\n" for i in range(2, n + 1))
            yaml = f"name: {name}\nrouting: {routing}\naddressing: {{ipv6: none}}\nnodes:\n{nodes}links:\n{links}"
            time.sleep(3)  # let the kernel finish freeing the previous lab
            mem0 = mem_available_kib()
            t_up = up(name, yaml)
            status = json.loads(vemu("status", "--lab", name, "--json"))
            rss = rss_kib(status["pid"])
            mem1 = mem_available_kib()
            t_down = down(name)
            rows.append([n, routing, t_up, t_down, rss / 1024, (mem0 - mem1) / 1024])
            print(f"scale {n:5d} nodes, routing {routing:6s}: up {t_up:6.2f} s, down {t_down:6.2f} s, controller RSS {rss/1024:6.1f} MiB, machine memory used {(mem0-mem1)/1024:7.1f} MiB")
    write_csv("scale.csv", ["nodes", "routing", "up_s", "down_s", "controller_rss_mib", "system_mem_mib"], rows)
    none = [r for r in rows if r[1] == "none"]
    ns = [r[0] for r in none]
    plot("scale_time.png", "Lab start-up / tear-down (tree, routing: none)", "nodes", "seconds", [("up", ns, [r[2] for r in none]), ("down", ns, [r[3] for r in none])], logx=True, logy=True)
    plot("scale_mem.png", "Lab memory (tree, routing: none)", "nodes", "MiB", [("controller RSS", ns, [r[4] for r in none]), ("machine (MemAvailable drop)", ns, [r[5] for r in none])], logx=True, logy=True)
    write_md("scale", "Scale: start-up, tear-down and memory", "NET's headline (virtual nodes per testbed machine); NET Fig. 16's node counts",
             ["nodes", "routing", "up (s)", "down (s)", "controller RSS (MiB)", "machine memory (MiB)"], rows,
             ["Static routing computes a shortest-path tree per node (O(n² log n)) and installs aggregated routes (siblings in the address space with the same next hop merged): 10,000 nodes are measured without it."])



def check_measured(path, machines):
    """`vemu check --machines` of a scenario: wall time (s), peak memory (MiB) and the
    links its placement cuts. Started by a small Python of its own: a child's peak
    memory counts what its parent held when it forked (this one's, with the bench's
    YAML, is hundreds of MiB)."""
    import re
    import subprocess
    import sys

    from .common import VEMU

    starter = ("import os, sys, time\n"
               "t = time.monotonic()\n"
               "pid = os.fork()\n"
               "if pid == 0:\n"
               "    os.execv(sys.argv[2], sys.argv[2:])\n"
               "_, status, usage = os.wait4(pid, 0)\n"
               "os.write(int(sys.argv[1]), f'{time.monotonic() - t} {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)}'.encode())\n")
    r_fd, w_fd = os.pipe()
    proc = subprocess.Popen([sys.executable, "-c", starter, str(w_fd), VEMU, "check", "--machines", machines, path],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, pass_fds=(w_fd,))
    os.close(w_fd)
    text, err = proc.communicate()
    with os.fdopen(r_fd) as f:
        secs, kib, code = f.read().split()
    if int(code) != 0:
        raise RuntimeError(f"vemu check {path}: {err.strip()}")
    cut = re.search(r"^cut: (\d+) links", text, re.M)
    nodes = re.search(r"with (\d+) nodes and (\d+) links", text)
    return float(secs), int(kib) / 1024, int(cut.group(1)) if cut else 0, int(nodes.group(1)), int(nodes.group(2))


def bench_plan():
    """Planning without building: generated fat-trees of ~10k, ~100k and ~1M nodes
    placed over 100 machines by `vemu check --machines` (issue 66: 1,000,000 nodes in
    <= 60 s and <= 4 GiB, growing linearly)."""
    import os
    import tempfile

    machines = ",".join(f"m{i}=10.9.{i // 250}.{i % 250 + 1}" for i in range(100))
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for k in [34, 74, 156]:
            path = os.path.join(d, f"ft{k}.yaml")
            with open(path, "w") as f:
                f.write(f"name: plan{k}\nrouting: none\naddressing: {{ipv4: 10.0.0.0/8, ipv4_prefix: 31, ipv6: none}}\n"
                        f"generate:\n  ft:\n    fat-tree: {{k: {k}}}\n    tiers: {{core: {{bandwidth: 10Gbit}}, aggregation: {{bandwidth: 10Gbit}}, host: {{bandwidth: 1Gbit}}}}\n")
            secs, mib, cut, nodes, links = check_measured(path, machines)
            rows.append([nodes, links, 100, round(secs, 2), round(mib), cut, round(mib * 1024 / nodes, 2)])
            print(f"plan fat-tree k={k}: {nodes} nodes, {links} links over 100 machines: {secs:.2f} s, peak {mib:.0f} MiB ({mib * 1024 / nodes:.2f} KiB a node), {cut} links cut")
    write_csv("plan.csv", ["nodes", "links", "machines", "seconds", "peak_mib", "links_cut", "kib_per_node"], rows)
    ns = [r[0] for r in rows]
    first = rows[0]
    plot("plan_time.png", "Planning a generated fat-tree over 100 machines (vemu check)", "nodes", "seconds",
         [("vemu check --machines", ns, [r[3] for r in rows]), ("linear from the smallest", ns, [first[3] * n / first[0] for n in ns])], logx=True, logy=True)
    plot("plan_mem.png", "Planning a generated fat-tree over 100 machines: peak memory", "nodes", "MiB",
         [("peak RSS", ns, [r[4] for r in rows]), ("linear from the smallest", ns, [first[4] * n / first[0] for n in ns]), ("4 GiB (the goal)", ns, [4096] * len(ns))], logx=True, logy=True)
    write_md("plan", "Planning: a generated lab over 100 machines, nothing built", "issue 66 (1,000,000 nodes planned in <= 60 s, <= 4 GiB); NET's 64-machine testbed",
             ["nodes", "links", "machines", "seconds", "peak MiB", "links cut", "KiB a node"], rows,
             ["Fat-trees k = 34, 74, 156 (hosts included; core and aggregation links 10 Gbit/s, host links 1 Gbit/s): the scenario is 6 lines, its nodes and links are generated, addressed (/31 a link) and placed (the lightest of METIS, greedy growing and the link classes, refined), then printed per machine.",
              "Most links cut are core links: every pod reaches every core switch, and 156 pods do not fit 100 machines pod by pod."])
