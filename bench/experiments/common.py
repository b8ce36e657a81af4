"""What every experiment uses: running vemu and commands, kernel baselines (veth
pairs, bridges, tbf, nftables loss), published figures, and writing CSV, PNG and
Markdown."""

import csv
import json
import os
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "bench", "out")
# VEMU=/path/to/vemu runs another binary (a copy, so that a build during a long run
# cannot pull it away).
VEMU = os.environ.get("VEMU") or os.path.join(ROOT, "target", "release", "vemu")


def sh(*args, check=True, capture=True):
    r = subprocess.run(list(args), capture_output=capture, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {r.stdout}{r.stderr}")
    return r.stdout


def vemu(*args, check=True):
    return sh(VEMU, *args, check=check)


def up(name, yaml, fast_path=True):
    """Bring a lab up; fast_path=False runs every link direction through the engine."""
    path = os.path.join(tempfile.gettempdir(), f"bench-{name}.yaml")
    with open(path, "w") as f:
        f.write(yaml)
    t0 = time.monotonic()
    env = dict(os.environ, VEMU_FAST_PATH="on" if fast_path else "off")
    r = subprocess.run([VEMU, "up", path, "--name", name], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"vemu up {name} failed: {r.stdout}{r.stderr}")
    return time.monotonic() - t0


def down(name):
    t0 = time.monotonic()
    vemu("down", "--lab", name, check=False)
    return time.monotonic() - t0


def iperf(prefix, server_ip, seconds=5):
    """TCP goodput in bit/s; prefix runs a command in the client's namespace."""
    out = sh(*prefix, "iperf3", "-c", server_ip, "-t", str(seconds), "-O", "1", "-J")
    return json.loads(out)["end"]["sum_received"]["bits_per_second"]


def ping_avg(prefix, target, count=50):
    sh(*prefix, "ping", "-c", "2", "-i", "0.1", target, check=False)
    out = sh(*prefix, "ping", "-q", "-c", str(count), "-i", "0.01", target)
    line = [l for l in out.splitlines() if l.startswith("rtt")][0]
    return float(line.split("=")[1].split("/")[1])


def chain_yaml(name, hops, server=True):
    nodes = "".join(f"  n{i}: {{}}\n" for i in range(1, hops + 2))
    if server:
        nodes = nodes.replace(f"  n{hops + 1}: {{}}", f"  n{hops + 1}: {{run: ['iperf3 -s -D']}}")
    links = "".join(f"  - endpoints: [n{i}, n{i + 1}]\n" for i in range(1, hops + 1))
    return f"name: {name}\naddressing: {{ipv6: none}}\nnodes:\n{nodes}links:\n{links}"


class VethChain:
    """The kernel baseline: namespaces joined by veth pairs, forwarding in the kernel."""

    def __init__(self, hops, prefix="kb"):
        self.hops = hops
        self.ns = [f"{prefix}{i}" for i in range(1, hops + 2)]
        for n in self.ns:
            sh("ip", "netns", "add", n)
            sh("ip", "-n", n, "link", "set", "lo", "up")
            sh("ip", "netns", "exec", n, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        for i in range(hops):
            a, b = self.ns[i], self.ns[i + 1]
            sh("ip", "link", "add", "kbv", "netns", a, "type", "veth", "peer", "name", "kbw", "netns", b)
            sh("ip", "-n", a, "link", "set", "kbv", "name", f"r{i}")
            sh("ip", "-n", b, "link", "set", "kbw", "name", f"l{i}")
            sh("ip", "-n", a, "addr", "add", f"10.200.{i}.1/30", "dev", f"r{i}")
            sh("ip", "-n", b, "addr", "add", f"10.200.{i}.2/30", "dev", f"l{i}")
            sh("ip", "-n", a, "link", "set", f"r{i}", "up")
            sh("ip", "-n", b, "link", "set", f"l{i}", "up")
        for k, n in enumerate(self.ns):
            for i in range(self.hops):
                if i == k or i == k - 1:
                    continue
                via = f"10.200.{k}.2" if i > k else f"10.200.{k - 1}.1"
                sh("ip", "-n", n, "route", "add", f"10.200.{i}.0/30", "via", via)
        sh("ip", "netns", "exec", self.ns[-1], "iperf3", "-s", "-D")
        self.server = f"10.200.{hops - 1}.2"
        time.sleep(0.3)

    def prefix(self, i=0):
        return ["ip", "netns", "exec", self.ns[i]]

    def close(self):
        close_namespaces(self.ns)


class KernelBridge:
    """The kernel baseline of a LAN segment: two namespaces on a Linux bridge (in a third)."""

    def __init__(self):
        self.ns = ["kbr0", "kbr1", "kbr2"]
        for n in self.ns:
            sh("ip", "netns", "add", n)
            sh("ip", "-n", n, "link", "set", "lo", "up")
        sh("ip", "-n", "kbr0", "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", "kbr0", "link", "set", "br0", "up")
        for i in (1, 2):
            sh("ip", "link", "add", "kbv", "netns", "kbr0", "type", "veth", "peer", "name", "eth0", "netns", f"kbr{i}")
            sh("ip", "-n", "kbr0", "link", "set", "kbv", "name", f"p{i}")
            sh("ip", "-n", "kbr0", "link", "set", f"p{i}", "master", "br0", "up")
            sh("ip", "-n", f"kbr{i}", "addr", "add", f"10.201.0.{i}/24", "dev", "eth0")
            sh("ip", "-n", f"kbr{i}", "link", "set", "eth0", "up")
        sh("ip", "netns", "exec", "kbr2", "iperf3", "-s", "-D")
        self.server = "10.201.0.2"
        time.sleep(0.3)

    def prefix(self):
        return ["ip", "netns", "exec", "kbr1"]

    def close(self):
        close_namespaces(self.ns)


def close_namespaces(names):
    """Kill what runs in the baseline's namespaces and delete them."""
    for n in names:
        for p in sh("ip", "netns", "pids", n, check=False).split():
            sh("kill", "-9", p, check=False)
        sh("ip", "netns", "del", n, check=False)


def published(experiment):
    """Published figures for an experiment, from bench/published.csv (with sources)."""
    path = os.path.join(ROOT, "bench", "published.csv")
    with open(path) as f:
        return [r for r in csv.DictReader(f) if r["experiment"] == experiment]


def write_md(name, title, mirrors, header, rows, notes=()):
    """A Markdown summary: what the experiment mirrors, vemu beside the baselines, the
    published figures and how to read them. Printed and written to bench/out/NAME.md."""
    fmt = lambda v: f"{v:.4g}" if isinstance(v, float) else str(v)
    lines = [f"## {title}", "", f"Mirrors: {mirrors}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows]
    pub = published(name)
    lines += ["", "Published figures:" if pub else "Published figures: none transcribed (see bench/README.md)."]
    for r in pub:
        lines.append(f"- {r['quantity']} ({r['setting']}): **{r['value']} {r['unit']}** — {r['source']}")
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
    text = "\n".join(lines) + "\n"
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, f"{name}.md"), "w") as f:
        f.write(text)
    print(text)


def fidelity_of(lab):
    """The lab's fidelity verdict on its whole run so far (from the controller), with
    its evidence unless `ok`: late frames, kernel drops on TAP queues, saturated seconds,
    seconds in which the machine's tasks waited for a CPU beyond the threshold."""
    f = json.loads(vemu("status", "--lab", lab, "--json"))["fidelity"]
    if f["verdict"] == "ok":
        return "ok"
    late = f["late_frames"] / max(f["frames"], 1) * 100
    cpu = f.get("cpu", {})
    return (f"{f['verdict']} ({late:.1f}% late, {f['tap_dropped']} TAP drops, busy in {f['saturated_windows']}/{f['windows']} s, "
            f"CPU-starved {cpu.get('starved_windows', 0)}/{cpu.get('windows', 0)} s up to {cpu.get('worst_pressure', 0) * 100:.0f}%)")


def tbf(ns, dev, rate_bps):
    """Kernel rate limiting: a token bucket on a device's egress (the baseline for links
    with a bandwidth). Burst: 4 ms at the rate, at least 4 full frames; 50 ms of queue."""
    burst = max(4 * 1514, int(rate_bps / 8 * 0.004))
    sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", f"{int(rate_bps)}bit", "burst", str(burst), "latency", "50ms")


LOSS_PORT = 5999


def nft_loss(ns, fraction):
    """Kernel random loss of the UDP datagrams a namespace sends to LOSS_PORT (nftables
    numgen): the baseline for a link with loss."""
    n = round(fraction * 100000)
    rules = f"table inet bench {{\n chain out {{\n  type filter hook output priority 0;\n  udp dport {LOSS_PORT} numgen random mod 100000 < {n} drop\n }}\n}}\n"
    subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=rules, text=True, check=True)


def udp_loss(send_prefix, recv_prefix, target, count, rate=5000):
    """Fraction of `count` UDP datagrams (`rate` per second, one way: no replies that
    could be lost too, no sender that slows down when answers are missing) that did
    not arrive."""
    recv = ("import socket, sys\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            f"s.bind(('0.0.0.0', {LOSS_PORT}))\ns.settimeout(2)\nprint('ready', flush=True)\nn = 0\n"
            "try:\n    while True:\n        s.recv(2048)\n        n += 1\nexcept socket.timeout:\n    print(n)\n")
    send = ("import socket, time\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\nt = time.perf_counter()\n"
            f"for i in range({count}):\n    try:\n        s.sendto(b'x' * 100, ('{target}', {LOSS_PORT}))\n"
            "    except PermissionError:\n        pass  # dropped by the nftables rule on the way out\n"
            f"    t += {1 / rate}\n    d = t - time.perf_counter()\n    if d > 0:\n        time.sleep(d)\n")
    r = subprocess.Popen([*recv_prefix, "python3", "-c", recv], stdout=subprocess.PIPE, text=True)
    r.stdout.readline()
    sh(*send_prefix, "python3", "-c", send)
    return 1 - int(r.communicate()[0]) / count


def write_csv(name, header, rows):
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, name)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def plot(name, title, xlabel, ylabel, series, logx=False, logy=False):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, xs, ys in series:
        ax.plot(xs, ys, marker="o", label=label)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = os.path.join(OUT, name)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def in_node(lab, node):
    """Run a command in a vemu node's network namespace (enough for ping and iperf3)."""
    return ["ip", "netns", "exec", f"vemu-{lab}.{node}"]


def pairs_yaml(name, n, link=""):
    """n client/server pairs c_i -- s_i (s_i runs an iperf3 server); link: extra keys."""
    nodes = "".join(f"  c{i}: {{}}\n  s{i}: {{run: ['iperf3 -s -D']}}\n" for i in range(n))
    links = "".join(f"  - {{endpoints: [c{i}, s{i}]{', ' + link if link else ''}}}\n" for i in range(n))
    return f"name: {name}\nrouting: none\naddressing: {{ipv6: none}}\nnodes:\n{nodes}links:\n{links}"


def addresses(lab):
    """Each node's first IPv4 address, from the controller."""
    st = json.loads(vemu("status", "--lab", lab, "--json"))
    return {n["name"]: n["ifaces"][0]["addrs"][0].split("/")[0] for n in st["nodes"] if n["ifaces"]}


def wait_idle(threshold=0.9, timeout=30):
    """Wait until the machine is idle (the kernel frees deleted namespaces in the
    background, for seconds after a big lab or baseline is gone)."""
    def busy_idle():
        f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
        return sum(f) - f[3] - f[4], f[3] + f[4]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        b0, i0 = busy_idle()
        time.sleep(0.5)
        b1, i1 = busy_idle()
        if (i1 - i0) / max((b1 - b0) + (i1 - i0), 1) >= threshold:
            return


def rss_kib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def engine_cpu_s(lab):
    """CPU seconds used so far by the lab's engine threads."""
    pid = open(f"/run/vemu/{lab}/daemon.pid").read().strip()
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            name = open(f"/proc/{pid}/task/{t}/comm").read().strip()
            if name.startswith("vemu-engine"):
                f = open(f"/proc/{pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()
                total += int(f[11]) + int(f[12])
        except OSError:
            pass
    return total / os.sysconf("SC_CLK_TCK")


def addresses_of(status, node):
    """A node's first IPv4 address in a status document."""
    for nd in status["nodes"]:
        if nd["name"] == node:
            for i in nd["ifaces"]:
                for a in i["addrs"]:
                    if ":" not in a:
                        return a.split("/")[0]
    return None


def ping_rtts_ms(text):
    """Each reply's RTT (ms) in what ping printed."""
    return [float(l.split("time=")[1].split()[0]) for l in text.splitlines() if "time=" in l]


def rtt_stats(rtts):
    """(median, p99, max) of round-trip times, ms."""
    r = sorted(rtts)
    if not r:
        return (float("nan"),) * 3
    return (r[len(r) // 2], r[min(len(r) - 1, int(len(r) * 0.99))], r[-1])
