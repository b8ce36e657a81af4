"""Start-up / tear-down time and memory of labs of 10..1000 nodes."""

import json
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
