"""Labs across namespace machines (real agents), a hop between machines, LANs across them, and the partitioner."""

import csv
import ipaddress
import json
import os
import subprocess
import tempfile
import time

from .common import ROOT, VEMU, chain_yaml, down, in_node, iperf, ping_avg, plot, rss_kib, sh, up, vemu, write_csv, write_md


class NsMachines:
    """Machines made of namespaces, as in crates/vemu/tests/machines.rs: each a network
    namespace running a real `vemu agent` in a mount namespace of its own, on a bridge
    (the underlay); the controller in a namespace of its own on the same bridge."""

    def __init__(self, n, tag="bm", net=76, pin=True, mtu=1500):
        self.tag, self.net, self.n = tag, net, n
        self.token = os.path.join(tempfile.gettempdir(), f"vemu-{tag}-token")
        with open(self.token, "w") as f:
            f.write("bench-token-0123456789abcdef\n")
        os.chmod(self.token, 0o600)  # the agents refuse a token others can read
        ul = f"{tag}-ul"
        sh("ip", "netns", "add", ul)
        sh("ip", "-n", ul, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", ul, "link", "set", "br0", "up")
        hosts = [str(i) for i in range(n)] + ["ctl"]
        for i, h in enumerate(hosts):
            ns = f"{tag}-{h}"
            ip = f"10.{net}.0.254" if h == "ctl" else f"10.{net}.0.{i + 1}"
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", f"{tag}u{i}", "netns", ul, "mtu", str(mtu), "type", "veth", "peer", "name", "eth0", "netns", ns, "mtu", str(mtu))
            sh("ip", "-n", ul, "link", "set", f"{tag}u{i}", "master", "br0", "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
        os.makedirs("/run/vemu", exist_ok=True)
        self.agents = []
        for i in range(n):
            script = f"mount -t tmpfs tmpfs /run/vemu && mount -t tmpfs tmpfs /run/netns && mkdir -p /var/log/vemu && mount -t tmpfs tmpfs /var/log/vemu && exec {VEMU} agent --listen 10.{net}.0.{i + 1} --token-file {self.token}"
            # Each machine's agent (and so its engine and its nodes' programs) on a core
            # of its own, as on machines of their own (with more machines than cores,
            # in turn); pin=False lets them all share every core.
            cpu = ["taskset", "-c", str(i % (os.cpu_count() or 1))] if pin else []
            self.agents.append(subprocess.Popen([*cpu, "nsenter", f"--net=/run/netns/{tag}-{i}", "unshare", "-m", "--propagation", "private", "sh", "-c", script],
                                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1.0)

    def machines_yaml(self):
        return "machines: {" + ", ".join(f"m{i}: 10.{self.net}.0.{i + 1}" for i in range(self.n)) + "}\n"

    def up(self, name, yaml):
        path = os.path.join(tempfile.gettempdir(), f"bench-{name}.yaml")
        with open(path, "w") as f:
            f.write(yaml)
        t0 = time.monotonic()
        r = subprocess.run(["ip", "netns", "exec", f"{self.tag}-ctl", VEMU, "up", path, "--name", name], capture_output=True, text=True,
                           env=dict(os.environ, VEMU_AGENT_TOKEN_FILE=self.token))
        if r.returncode != 0:
            raise RuntimeError(f"vemu up {name} across machines failed: {r.stdout}{r.stderr}")
        return time.monotonic() - t0

    def in_node(self, machine, lab, node):
        return ["nsenter", "-t", str(self.agents[machine].pid), "-m", VEMU, "exec", "--lab", lab, node, "--"]

    def close(self):
        for a in self.agents:
            a.terminate()
        for a in self.agents:
            a.wait()
        for ns in sh("ip", "netns", "list").split("\n"):
            n = ns.split(" ")[0]
            if n.startswith(f"{self.tag}-"):
                sh("ip", "netns", "del", n, check=False)


def tree_yaml(name, n):
    """A binary tree of n nodes, no routing, IPv4 only."""
    nodes = "".join(f"  n{i}: {{}}\n" for i in range(1, n + 1))
    links = "".join(f"  - endpoints: [n{i // 2}, n{i}]\n" for i in range(2, n + 1))
    return f"name: {name}\nrouting: none\naddressing: {{ipv6: none}}\nnodes:\n{nodes}links:\n{links}"


def bench_machines():
    """The same labs on one machine and across two namespace machines: RTT through a
    chain of 8 hops (unimpaired, and 1 ms a hop) whose middle link crosses machines, TCP
    across at 100 Mbit/s, and up/down time of a 200-node tree."""
    hops = 8
    rows = []
    m = NsMachines(2)
    try:
        def chain(name, extra, pinned):
            y = chain_yaml(name, hops).replace("links:", "links:") + ""
            if extra:
                y = y.replace("]\n", "]\n" + extra)
            if pinned:
                y = m.machines_yaml() + y.replace("  n1: {}", "  n1: {machine: m0}").replace(f"  n{hops + 1}: {{run:", f"  n{hops + 1}: {{machine: m1, run:")
            return y
        target = f"10.0.0.{4 * (hops - 1) + 2}"
        for label, extra in [("unimpaired", ""), ("1 ms a hop", "    delay: 1ms\n"), ("100 Mbit/s a hop", "    bandwidth: 100Mbit\n")]:
            res = {}
            for across in (False, True):
                name = "bm"
                if across:
                    m.up(name, chain(name, extra, True))
                    pre = m.in_node(0, name, "n1")
                else:
                    up(name, chain(name, extra, False))
                    pre = in_node(name, "n1")
                try:
                    time.sleep(1.5)  # the underlay probes settle
                    rtt = ping_avg(pre, target)
                    bw = iperf(pre, target, 4) if "Mbit" in label else float("nan")
                    res[across] = (rtt, bw)
                finally:
                    down(name)
            rows.append([label, res[False][0], res[True][0], res[False][1] / 1e6, res[True][1] / 1e6])
            print(f"machines: chain of {hops} ({label}): RTT one machine {res[False][0]:.3f} ms, across two {res[True][0]:.3f} ms"
                  + (f"; TCP {res[False][1]/1e6:.1f} vs {res[True][1]/1e6:.1f} Mbit/s" if "Mbit" in label else ""))
        n = 200
        tree = tree_yaml("bt", n)
        t_up1 = up("bt", tree)
        t_down1 = down("bt")
        time.sleep(2)
        t_up2 = m.up("bt", m.machines_yaml() + tree)
        t_down2 = down("bt")
        rows.append([f"{n}-node tree up / down (s)", t_up1, t_up2, t_down1, t_down2])
        print(f"machines: {n}-node tree up {t_up1:.2f} s / down {t_down1:.2f} s on one machine; up {t_up2:.2f} s / down {t_down2:.2f} s across two")
    finally:
        m.close()
    # Four machines (issue 14's goal: up in at most twice the one-machine time); the
    # tree's links cross between several pairs, whose underlay probes share rounds.
    m4 = NsMachines(4, tag="bm4", net=77)
    try:
        for size in (n, 1000):
            tree_n = tree if size == n else tree_yaml("bt", size)
            if size == n:
                t1 = (t_up1, t_down1)
            else:
                t_up = up("bt", tree_n)
                rss1 = rss_kib(json.loads(vemu("status", "--lab", "bt", "--json"))["pid"])
                t1 = (t_up, down("bt"))
            time.sleep(2)
            t_up4 = m4.up("bt", m4.machines_yaml() + tree_n)
            st = json.loads(subprocess.run(["ip", "netns", "exec", "bm4-ctl", VEMU, "status", "--lab", "bt", "--json"], capture_output=True, text=True, check=True).stdout)
            measured = [(mm["name"], u["to"], u.get("measured_bps")) for mm in st.get("machines", []) for u in mm.get("underlay", [])]
            # Memory: the controller (in the controller's namespace) and each machine's
            # agent (its engine's threads and the share's state; the nodes' programs
            # are processes of their own).
            rss_ctl4, rss_agents = rss_kib(st["pid"]), [rss_kib(a.pid) for a in m4.agents]
            t_down4 = down("bt")
            rows.append([f"{size}-node tree up / down, one machine and 4 (s)", t1[0], t_up4, t1[1], t_down4])
            print(f"machines: {size}-node tree up {t1[0]:.2f} s / down {t1[1]:.2f} s on one machine; up {t_up4:.2f} s / down {t_down4:.2f} s across four "
                  f"({t_up4 / t1[0]:.2f}x one machine's up; goal <= 2x); underlay measured in {sum(1 for x in measured if x[2])} of {len(measured)} directions")
            if size != n:
                rows.append([f"{size}-node tree memory (MiB): controller on one machine / on 4; agents on 4 min / max",
                             rss1 / 1024, rss_ctl4 / 1024, min(rss_agents) / 1024, max(rss_agents) / 1024])
                print(f"machines: {size}-node tree memory: controller {rss1 / 1024:.1f} MiB on one machine, {rss_ctl4 / 1024:.1f} MiB across four; "
                      f"agents {', '.join(f'{r / 1024:.1f}' for r in rss_agents)} MiB")
    finally:
        m4.close()
    write_csv("machines.csv", ["case", "one_machine", "two_machines", "one_machine_b", "two_machines_b"], rows)
    labels = [r[0] for r in rows[:2]]
    plot("machines_rtt.png", f"Chain of {hops} hops: RTT on one machine and across two", "case (0: unimpaired, 1: 1 ms a hop)", "RTT (ms)",
         [("one machine", list(range(len(labels))), [r[1] for r in rows[:2]]), ("two machines (one link across)", list(range(len(labels))), [r[2] for r in rows[:2]])])
    extra_hop = (rows[0][2] - rows[0][1]) * 1000 / 2
    write_md("machines", "Labs across machines (machines made of namespaces on one computer)", "Virtual Routers' distributed hops, NET's multi-machine testbed",
             ["case", "one machine", "two (four) machines", "one machine (2nd figure)", "two (four) machines (2nd figure)"], rows,
             [f"Rows 1-3: RTT (ms) of a chain of {hops} hops whose middle link crosses machines; row 3's 2nd figures: TCP (Mbit/s). Then: up (s), then down (s), on one machine and across two, then four; last row: resident memory (VmRSS, MiB) of the controller and the agents.",
              f"The link between machines goes through both engines and the underlay instead of the kernel fast path: it adds {extra_hop:.0f} µs one way to the unimpaired chain.",
              "With set delays the underlay's measured delay is taken off, so RTT stays the set one plus the engines' passes.",
              "Each namespace machine's agent, engine and node programs are pinned to one core of this computer's two (taskset; four machines: two a core), where the one-machine lab has both: the same cores in all, as two real machines of one core each would have.",
              "Unpinned, every machine's engine shards (one per core each) and nodes share both cores, and TCP through the 8-hop chain at 100 Mbit/s a hop got 89 Mbit/s across against 95 on one machine, with frames up to 5 ms late on every link: the emulation of machines starved itself, not the tunnel (pinned: 94.5-94.8)."])


MACHINE_HOP_YAML = "name: bh\naddressing: {ipv6: none}\nnodes:\n  n1: {}\n  n2: {run: ['iperf3 -s -D']}\nlinks:\n  - endpoints: [n1, n2]\n"


def one_machine_hop(count=200):
    """The link of machine_hop on one machine: ping RTT (mean, ms) and TCP (bit/s)."""
    up("bh", MACHINE_HOP_YAML)
    try:
        time.sleep(1)
        return ping_avg(in_node("bh", "n1"), "10.0.0.2", count), iperf(in_node("bh", "n1"), "10.0.0.2", 4)
    finally:
        down("bh")


def machine_hop(mtu, link_mtu=None, count=200):
    """One unimpaired link between two namespace machines (real agents, each pinned to a
    core) on an underlay of `mtu`-byte interfaces, the link's own MTU `link_mtu` (None:
    the interfaces'): the underlay's ping RTT (mean, ms), whether the kernel's tunnel
    carries both directions, the link's ping RTT across (mean, ms) and TCP across (bit/s)."""
    m = NsMachines(2, tag="bh", net=75, mtu=mtu)
    try:
        under = ping_avg(["ip", "netns", "exec", "bh-0"], "10.75.0.2", count)
        y = MACHINE_HOP_YAML if link_mtu is None else MACHINE_HOP_YAML.replace("endpoints: [n1, n2]", f"endpoints: [n1, n2]\n    mtu: {link_mtu}")
        m.up("bh", m.machines_yaml() + y.replace("n1: {}", "n1: {machine: m0}").replace("n2: {run", "n2: {machine: m1, run"))
        try:
            time.sleep(2)  # the tunnels' path MTU probes
            st = json.loads(subprocess.run(["ip", "netns", "exec", "bh-ctl", VEMU, "status", "--lab", "bh", "--json"], capture_output=True, text=True, check=True).stdout)
            link = st["links"][0]
            kernel = all(link[d]["stats"].get("kernel_path") for d in ("forward", "reverse"))
            rtt = ping_avg(m.in_node(0, "bh", "n1"), "10.0.0.2", count)
            tcp = iperf(m.in_node(0, "bh", "n1"), "10.0.0.2", 4)
        finally:
            down("bh")
    finally:
        m.close()
    return under, kernel, rtt, tcp


def bench_machine_hop():
    """One unimpaired link between two namespace machines (real agents, each pinned to a
    core), on an underlay of 1500-byte and of 9000-byte interfaces: the RTT it adds to the
    same link on one machine, against the underlay's own RTT (a ping between the two
    machines' addresses), whether the kernel's tunnel carries it, and TCP across."""
    rtt1, tcp1 = one_machine_hop()
    print(f"machine hop: one machine: RTT {rtt1 * 1000:.1f} us, TCP {tcp1 / 1e9:.2f} Gbit/s")
    rows = []
    # The link's own MTU: the interfaces' default (1500), or 1446, which leaves room in a
    # 1500-byte underlay's datagrams for the VXLAN and Ethernet headers.
    for mtu, link_mtu in ((1500, None), (1500, 1446), (9000, None)):
        under, kernel, rtt, tcp = machine_hop(mtu, link_mtu)
        added = (rtt - rtt1) * 1000 / 2
        rows.append([mtu, link_mtu or 1500, "kernel tunnel" if kernel else "engines", rtt1 * 1000, under * 1000, rtt * 1000, added, under * 1000 / 2, tcp1 / 1e9, tcp / 1e9])
        print(f"machine hop: {mtu}-byte underlay, link MTU {link_mtu or 1500} ({rows[-1][2]}): RTT across {rtt * 1000:.1f} us vs {rtt1 * 1000:.1f} on one machine; "
              f"the hop adds {added:.1f} us one way, the underlay alone {under * 1000 / 2:.1f} us one way "
              f"({'within' if added <= under * 1000 / 2 + 20 else 'beyond'} issue 14's goal: underlay + 20 us); TCP {tcp / 1e9:.2f} Gbit/s across")
    # What authenticating the engines' datagrams costs (tunnel::auth, AES-256-GCM over
    # each datagram, sealed at one end and opened at the other): per datagram and size.
    auth = subprocess.run(["cargo", "run", "--release", "--quiet", "-p", "vemu-core", "--example", "tunnel_auth"],
                          cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip().splitlines()
    auth_rows = [[float(x) for x in l.split(",")] for l in auth[1:]]
    write_csv("tunnel_auth.csv", auth[0].split(","), auth_rows)
    for size, seal, open_, gbps in auth_rows:
        print(f"machine hop: sealing a {size:.0f}-byte datagram {seal:.0f} ns, opening it {open_:.0f} ns ({gbps:.1f} Gbit/s of one core)")
    full = next((r for r in auth_rows if r[0] == 1444), auth_rows[-1])
    write_csv("machine_hop.csv", ["underlay_mtu", "link_mtu", "carried_by", "rtt_one_machine_us", "rtt_underlay_us", "rtt_across_us", "added_one_way_us", "underlay_one_way_us", "tcp_one_machine_gbps", "tcp_across_gbps"], rows)
    xs = list(range(len(rows)))
    plot("machine_hop.png", "One unimpaired link: RTT on one machine, across two, and the underlay's", "underlay / link MTU (0: 1500/1500, 1: 1500/1446, 2: 9000/1500)", "RTT (us)",
         [("one machine", xs, [r[3] for r in rows]), ("underlay alone", xs, [r[4] for r in rows]), ("across two machines", xs, [r[5] for r in rows])])
    write_md("machine_hop", "One hop between machines (machines made of namespaces)", "Virtual Routers' per-distributed-hop overhead; issue 14's goal (a hop across adds at most the underlay's delay + 20 us)",
             ["underlay MTU", "link MTU", "carried by", "RTT one machine (us)", "RTT underlay (us)", "RTT across (us)", "added one way (us)", "underlay one way (us)", "TCP one machine (Gbit/s)", "TCP across (Gbit/s)"], rows,
             ["Where the underlay carries whole frames (9000 bytes here, or links of mtu 1446 on 1500), an unimpaired direction goes through the kernel's VXLAN devices; otherwise both engines carry it, cutting full-size frames in two datagrams.",
              f"The engines' datagrams are authenticated (AES-256-GCM, tunnel::auth): a full 1444-byte datagram costs {full[1]:.0f} ns to seal and {full[2]:.0f} ns to open (tunnel_auth.csv), in the engines' rows above.",
              "Each namespace machine's agent is pinned to one core of this computer's two; the underlay is a Linux bridge between namespaces."])


def bench_lan_machines():
    """A LAN whose members are on two namespace machines (its switch on m0), every port
    1 ms: RTT between members on one machine, across, and between two members of m1
    (unicast switched on m1) with the underlay datagrams that ping costs; and what a
    broadcast costs the underlay: datagrams m1
    receives per broadcast frame sent on m0, against the number of m1's members that
    receive it (vemu sends one copy per machine through the segment's trunk)."""
    rows = []
    m = NsMachines(2, tag="bl", net=75)
    try:
        for k in (2, 8, 32):
            hosts = "".join(f"  h{i}: {{machine: m{0 if i < k else 1}}}\n" for i in range(2 * k))
            members = "".join(f"      - {{node: h{i}}}\n" for i in range(2 * k))
            yaml = (m.machines_yaml() + f"name: bl\nrouting: none\naddressing: {{ipv6: none}}\ndefaults:\n  node:\n    sysctl: {{net.ipv4.icmp_echo_ignore_broadcasts: '1'}}\n"
                    f"nodes:\n{hosts}segments:\n  lan:\n    delay: 1ms\n    members:\n{members}")
            m.up("bl", yaml)
            t_up = time.monotonic()
            try:
                time.sleep(1.5)  # the underlay probes settle
                ip = lambda i: f"10.0.0.{i + 1}"
                local = ping_avg(m.in_node(0, "bl", "h0"), ip(1), 20)
                across = ping_avg(m.in_node(0, "bl", "h0"), ip(k), 20)
                st = json.loads(subprocess.run(["ip", "netns", "exec", "bl-ctl", VEMU, "status", "--lab", "bl", "--json"], capture_output=True, text=True, check=True).stdout)
                tr = [(x["egress"]["stats"]["transit_ns"], x["ingress"]["stats"]["transit_ns"]) for x in st["segments"][0]["members"][k:k + 2]]
                print(f"  (far members' underlay delays as measured, egress/ingress, ns: {tr})")
                rx = lambda: int(sh("ip", "netns", "exec", "bl-1", "cat", "/sys/class/net/eth0/statistics/rx_packets").strip())
                # The underlay's own traffic meanwhile (probes, heartbeats) from an idle stretch,
                # once the tunnels' first 5 s of frequent probes are over.
                time.sleep(max(0.0, 6.0 - (time.monotonic() - t_up)))
                n, secs = 200, 2.0
                r0 = rx()
                time.sleep(secs)
                idle = rx() - r0
                # Unicast between two members of m1: datagrams m1's underlay port receives
                # during the 22 pings (2 a ping if they went through m0's switch), beside
                # what the idle rate above makes of that time.
                r0, t0 = rx(), time.monotonic()
                far = ping_avg(m.in_node(1, "bl", f"h{k}"), ip(k + 1), 20)
                far_raw, far_idle = rx() - r0, idle * (time.monotonic() - t0) / secs
                r0 = rx()
                t0 = time.monotonic()
                cidr = sh(*m.in_node(0, "bl", "h0"), "ip", "-o", "-4", "addr", "show", "dev", "eth0").split(" inet ")[1].split()[0]
                brd = str(ipaddress.ip_interface(cidr).network.broadcast_address)
                out = sh(*m.in_node(0, "bl", "h0"), "ping", "-b", "-q", "-c", str(n), "-i", str(secs / n), "-W", "1", brd, check=False)
                if f"{n} packets transmitted" not in out:
                    raise RuntimeError(f"broadcast ping to {brd}: {out}")
                busy_s = time.monotonic() - t0
                per = (rx() - r0 - idle * busy_s / secs) / n
            finally:
                down("bl")
            rows.append([2 * k, k, local, across, far, per, far_raw, round(far_idle, 1)])
            print(f"lan across machines: {2 * k} members ({k} on m1), 1 ms a port: RTT {local:.3f} ms on m0, {across:.3f} ms m0 -> m1, "
                  f"{far:.3f} ms between two of m1 (set 4 ms; {far_raw} underlay datagrams on m1 during its 22 pings, {far_idle:.1f} idle traffic); {per:.2f} underlay datagrams on m1 per broadcast ({k} receivers there)")
            time.sleep(1)
    finally:
        m.close()
    write_csv("lan_machines.csv", ["members", "members_on_m1", "rtt_m0_ms", "rtt_m0_m1_ms", "rtt_m1_m1_ms", "datagrams_per_broadcast", "datagrams_during_22_m1_pings", "idle_datagrams_then"], rows)
    plot("lan_machines.png", "LAN across two machines: underlay datagrams per broadcast", "members on the far machine", "datagrams on m1 per broadcast",
         [("vemu (one copy per machine)", [r[1] for r in rows], [r[5] for r in rows]), ("one copy per receiver", [r[1] for r in rows], [r[1] for r in rows])], logx=True, logy=True)
    write_md("lan_machines", "A LAN across two machines (machines made of namespaces)", "Megalos (a LAN frame only to the machines of its recipients)",
             ["members", "on m1", "RTT on m0 (ms)", "RTT m0 -> m1 (ms)", "RTT m1 -> m1 (ms)", "underlay datagrams on m1 per broadcast", "underlay datagrams on m1 during 22 pings m1 -> m1", "idle traffic expected then"], rows,
             ["Every port has 1 ms of delay each way: every RTT is set to 4 ms; unicast between two members of m1 is switched on m1 (no underlay crossing; before stop 36 it went through m0's switch, two crossings a frame).",
              "A broadcast from h0 on m0 reaches all m1 members through one trunk copy (datagrams per broadcast ~1 whatever the number of receivers); the idle underlay traffic (probes, heartbeats) measured just before is taken off.",
              "RTTs below the set 4 ms are frames arriving early: frames toward another machine leave early by the underlay's one-way delay as estimated (half the shortest probe round trip between kernel receive times, printed per far member); an estimate above the true delay makes them arrive early."])


def bench_placement():
    out = subprocess.run(["cargo", "run", "--release", "--quiet", "-p", "vemu-scenario", "--example", "placement"],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    rows = list(csv.reader(out.strip().splitlines()))
    header, rows = rows[0], rows[1:]
    write_csv("placement.csv", header, rows)
    series = []
    for graph in sorted({r[0] for r in rows}):
        for method in ["random", "greedy", "metis", "classes", "vemu", "metis-best", "cones"]:
            pts = [(int(r[3]), int(r[6])) for r in rows if r[0] == graph and r[4] == method]
            if pts:
                series.append((f"{graph}: {method}", [p[0] for p in pts], [p[1] for p in pts]))
    plot("placement.png", "Placement (1000 nodes; clusters: 100,000; generated: 1,344-10,040): weight of the links cut", "machines", "Mbit/s cut", series, logy=True)
    table = [[r[0], r[3], r[4], int(r[5]), int(r[6]), float(r[7]), float(r[8])] for r in rows]
    for r in table:
        print(f"placement {r[0]:10s} {r[1]:>2} machines {r[2]:10s}: {r[3]:5d} links cut ({r[4]} Mbit/s), heaviest machine {r[5]:.3f} x balanced, {r[6]:.1f} ms")
    write_md("placement", "Placement: what crosses between machines", "MaxiNet's METIS placement (issue 14's partitioner goal)",
             ["graph", "machines", "method", "links cut", "Mbit/s cut", "heaviest machine ÷ balanced", "ms"], table,
             ["Graphs of 1000 nodes: random geometric (radius 0.05 of a unit square) and preferential attachment (2 links per new node); links weigh 1000, 100 or 10 Mbit/s in turn.",
              "clusters: 100,000 nodes, 10 random trees of 10,000 (100 Mbit/s links) joined by 30 links of 10 Mbit/s, on 10 machines; the natural cut is 300 Mbit/s.",
              "vemu = the lightest cut of METIS, greedy growing and the link-class candidates (pods of heavier links contracted), each refined by single moves; random = an even deal of the nodes; metis-best = METIS alone, the lightest of 6 runs (seeds 1-3, k-way and recursive, 10 cuts each), its time the sum.",
              "Generated graphs (issue 66), on 10 machines: fat-tree-16 (1,344 nodes; core and aggregation links 10 Gbit/s, host links 1 Gbit/s), transit-stub (4 transit domains of 10 routers, 5 stub domains of 50 under each: 10,040 nodes; transit 10 Gbit/s, access 1 Gbit/s, stub 100 Mbit/s), barabasi-albert (10,000 nodes, m = 2) and as-graph (vemu import --as-graph 10000: 10,000 ASes, 15,756 relationships). cones = the AS graph's own partition: each AS under its first provider, the largest subtrees that fit a machine kept whole and dealt largest first, the ASes above them where most of their subtree went."])
