"""vemu.mininet against real labs (root): Mininet's API, its strings, TCLink's figures,
the CLI and `vemu mn`, and Mininet's own examples run unmodified by `vemu mininet`."""

import io
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from vemu.mininet import _scenario
from vemu.mininet.cli import CLI  # noqa: F401 (the module imports)
from vemu.mininet.link import TCLink, TCIntf, impairments
from vemu.mininet.log import StreamHandlerNoNewline, lg
from vemu.mininet.net import Mininet
from vemu.mininet.node import CPULimitedHost, Host, NotEmulated, RemoteController
from vemu.mininet.nodelib import NAT
from vemu.mininet.topo import LinearTopo, SingleSwitchTopo, Topo

VEMU = os.environ["VEMU"]
HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "mininet_examples")
root = pytest.mark.skipif(os.geteuid() != 0, reason="labs need root")


def labs():
    out = subprocess.run([VEMU, "ls"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith("mn-")]


@pytest.fixture
def net_of():
    """Build and start a Mininet network; stopped (its lab down) after the test."""
    nets = []

    def make(*args, **kwargs):
        net = Mininet(*args, **kwargs)
        nets.append(net)
        net.start()
        return net

    yield make
    for net in nets:
        net.stop()


def rtt_min_ms(out):
    m = re.search(r"rtt min/avg/max/mdev = ([\d.]+)/", out)
    assert m, out
    return float(m.group(1))


# --- the planner, without a lab ---------------------------------------------------------


def test_tclink_parameters_in_vemus_units():
    assert impairments(bw=5, delay="15ms", jitter=2, loss=10, max_queue_size=100) == {
        "bandwidth": "5000000bit", "delay": "15ms", "jitter": "2us", "loss": "10%", "queue": "100"}
    assert impairments(bw=0.5, loss=0) == {"bandwidth": "500000bit"}
    with pytest.raises(ValueError, match="delay"):
        impairments(delay="fast")
    with pytest.raises(ValueError, match="loss"):
        impairments(loss=150)


def test_switches_become_segments_or_bridges():
    class T(Topo):
        def build(self):
            h1, h2, h3 = (self.addHost(h) for h in ("h1", "h2", "h3"))
            s1, s2, s3 = (self.addSwitch(s) for s in ("s1", "s2", "s3"))
            self.addLink(h1, s1, bw=5, delay="15ms")
            self.addLink(h2, s2)
            self.addLink(s2, s3)
            self.addLink(h3, s3)

    net = Mininet(topo=T(), link=TCLink, build=False)
    net.buildFromTopo(net.topo)
    p = _scenario.plan("t", net.hosts, net.switches, net.links)
    assert p.switches == {"s1": "segment", "s2": "bridge", "s3": "bridge"}
    assert p.bridges == {"s2": ["s2-eth1", "s2-eth2"], "s3": ["s3-eth1", "s3-eth2"]}
    port = p.scenario["segments"]["s1"]["members"][0]
    # h1's interface shapes what h1 sends, the switch's what h1 receives.
    assert port["iface"] == "h1-eth0" and port["ip"] == ["10.0.0.1/8"]
    assert port["egress"] == port["ingress"] == {"bandwidth": "5000000bit", "delay": "15ms"}
    names = [link["name"] for link in p.scenario["links"]]
    assert sorted(names) == ["h2-eth0_s2-eth1", "h3-eth0_s3-eth2", "s2-eth2_s3-eth1"]
    # Beside a bridge's port (no address) a host's end has its own, given by vemu: no
    # shell has to set it afterwards.
    h2_end, s2_end = p.scenario["links"][0]["endpoints"]
    assert (h2_end["ip"], s2_end["ip"]) == (["10.0.0.2/8"], "none")
    assert all(p.built[i] for link in net.links for i in (link.intf1, link.intf2))
    assert p.specs[net.links[0]] == ("h1:s1", "forward", "reverse")


# --- real labs -----------------------------------------------------------------------------


@pytest.fixture
def printed():
    """What Mininet's logger prints (output, info, warn, error), as a StringIO."""
    buf = io.StringIO()
    handler = StreamHandlerNoNewline(buf)
    lg.addHandler(handler)
    yield buf
    lg.removeHandler(handler)


class HostV4(Host):
    "As Mininet's treeping64 example: commands in __init__, before the network exists."

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cmd("sysctl -w net.ipv6.conf.all.disable_ipv6=1")


@root
def test_names_addresses_strings_and_shells(net_of, printed):
    net = net_of(topo=SingleSwitchTopo(3), autoSetMacs=True, host=HostV4)
    # (HostV4's command ran once the node existed.)
    assert net["h2"].cmd("cat /proc/sys/net/ipv6/conf/all/disable_ipv6").strip() == "1"
    assert net.lab in labs()
    h1, h2, h3 = net.get("h1", "h2", "h3")
    assert [h.IP() for h in (h1, h2, h3)] == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    assert h1.intfNames() == ["h1-eth0"] and net["s1"].intfNames() == ["s1-eth1", "s1-eth2", "s1-eth3"]
    assert "link/ether 00:00:00:00:00:02" in h2.cmd("ip link show h2-eth0")
    assert "10.0.0.3/8" in h3.cmd("ip -4 addr show h3-eth0")
    printed.truncate(0)
    assert net.pingAll() == 0.0
    out = printed.getvalue()
    assert "h1 -> h2 h3 \n" in out and "*** Results: 0% dropped (6/6 received)" in out
    # One shell a node: its directory and variables stay between commands.
    h1.cmd("cd /tmp; X=42")
    assert h1.cmd("pwd; echo $X").split() == ["/tmp", "42"]
    h2.sendCmd("sleep 0.2; echo done")
    assert h2.waiting and h2.waitOutput().strip() == "done" and not h2.waiting
    out, err, code = h3.pexec("ip", "-br", "addr", "show", "h3-eth0")
    assert code == 0 and "10.0.0.3/8" in out
    p = h1.popen("ping -c 1 10.0.0.2")
    assert b"1 received" in p.communicate()[0]
    # A signal to the popen reaches the command in the node (vemu exec passes it on).
    p = h1.popen("sleep 30")
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    assert p.wait(timeout=5) == 128 + signal.SIGINT
    # ^C interrupts the command in the foreground.
    h3.sendCmd("sleep 30")
    time.sleep(0.3)
    h3.sendInt()
    h3.waitOutput()
    assert h3.cmd("echo $((1+1))").strip() == "2"
    sent, received = Mininet._parsePing(h1.cmd("ping -c1", h3.IP()))
    assert (sent, received) == (1, 1)


class Shaped(Topo):
    """h1, h2, h3 on s1: h1's link 5 Mbit/s, 15 ms; h2's 15 ms; h3's 10 % loss."""

    def build(self):
        s1 = self.addSwitch("s1")
        self.addLink(self.addHost("h1"), s1, bw=5, delay="15ms")
        self.addLink(self.addHost("h2"), s1, delay="15ms")
        self.addLink(self.addHost("h3"), s1, loss=10)


@root
def test_tclink_figures_and_changes_at_run_time(net_of):
    net = net_of(topo=Shaped(), link=TCLink)
    h1, h2, h3 = net.get("h1", "h2", "h3")
    h1.cmd("ping -c1 -W2", h2.IP())  # (ARP)
    # 15 ms on each interface, four interfaces on the way: about 60 ms.
    rtt = rtt_min_ms(h1.cmd("ping -c 3 -i 0.2", h2.IP()))
    assert 59.5 <= rtt <= 68, rtt
    server, client = net.iperf((h1, h2), seconds=3)
    rate = float(server.split()[0]) * {"Kbits/sec": 1e-3, "Mbits/sec": 1, "Gbits/sec": 1e3}[server.split()[1]]
    assert 4.0 <= rate <= 6.0, (server, client)
    out = h3.cmd("ping -q -c 100 -i 0.01 -W 1", h2.IP())
    sent, received = Mininet._parsePing(out)
    lost = 100 * (sent - received) / sent
    assert 4 <= lost <= 45, out  # 10 % each way: 19 % expected
    # intf.config() at run time replaces the interface's settings, as TCIntf's does.
    link = net.linksBetween(h1, net["s1"])[0]
    assert isinstance(link.intf1, TCIntf)
    link.intf1.config(bw=5, delay="50ms")
    rtt = rtt_min_ms(h1.cmd("ping -c 3 -i 0.2", h2.IP()))
    assert 94 <= rtt <= 105, rtt
    # The link goes down and comes back.
    net.configLinkStatus("s1", "h1", "down")
    assert "0 received" in h1.cmd("ping -c1 -W1", h2.IP())
    net.configLinkStatus("s1", "h1", "up")
    assert "1 received" in h1.cmd("ping -c1 -W2", h2.IP())


@root
def test_switch_chain_cpu_limit_and_refusals(net_of, printed):
    net = net_of(topo=LinearTopo(3), link=TCLink, host=CPULimitedHost, controller=RemoteController)
    assert "OpenFlow is not emulated" in printed.getvalue()
    h1, h3 = net.get("h1", "h3")
    assert "1 received" in h1.cmd("ping -c1 -W2", h3.IP())
    net.configLinkStatus("s1", "s2", "down")
    assert "0 received" in h1.cmd("ping -c1 -W1", h3.IP())
    net.configLinkStatus("s1", "s2", "up")
    assert "1 received" in h1.cmd("ping -c1 -W2", h3.IP())
    # The bridge of s2 joins its three ports (h2, s1, s3).
    assert net["s2"].cmd("ip -br link show master br0").count("s2-eth") == 3
    # A switch, not a firewall: with br_netfilter in the kernel, its frames pass no
    # iptables hooks (as with a kernel without it).
    if os.path.exists("/proc/sys/net/bridge"):
        assert net["s2"].cmd("cat /proc/sys/net/bridge/bridge-nf-call-iptables").strip() == "0"
    with pytest.raises(NotEmulated, match="OpenFlow is not emulated"):
        net["s1"].dpctl("dump-flows")
    # CPULimitedHost: cpu is a share of the machine, vemu's limit is in cores.
    h1.setCPUFrac(0.1)
    cores = os.cpu_count()
    status = subprocess.run([VEMU, "status", "--lab", net.lab], capture_output=True, text=True).stdout
    assert re.search(r"cpu %g\b" % round(0.1 * cores, 4), status), status
    with pytest.raises(NotEmulated, match="rt"):
        CPULimitedHost("h9", sched="rt")


@root
def test_addnat_is_the_machines_way_out():
    """net.addNAT() (and mn --nat): the machine joined to the switch, the hosts' default
    route through it, and their traffic masqueraded beyond the machine — here to a
    namespace on a veth of the machine with no route back to the lab; the rules go
    with the lab."""
    outside, veth = "vemu-t-mnout", "vt-mnout0"

    def undo():
        subprocess.run(["ip", "link", "del", veth], capture_output=True)
        subprocess.run(["ip", "netns", "del", outside], capture_output=True)

    def nat_tables():
        return "vemu_mgmt_" in run(["nft", "list", "tables"]).stdout

    undo()
    try:
        for c in ["ip netns add %s" % outside,
                  "ip link add %s type veth peer name vt-mnout1 netns %s" % (veth, outside),
                  "ip addr add 203.0.113.1/24 dev %s" % veth, "ip link set %s up" % veth,
                  "ip -n %s addr add 203.0.113.2/24 dev vt-mnout1" % outside,
                  "ip -n %s link set vt-mnout1 up" % outside]:
            r = run(["sh", "-c", c])
            assert r.returncode == 0, (c, r.stderr)
        net = Mininet(topo=SingleSwitchTopo(2))
        nat = net.addNAT()
        nat.configDefault()
        net.start()
        try:
            h1 = net.get("h1")
            assert nat.IP() == "10.0.0.3"
            assert "via 10.0.0.3" in h1.cmd("ip route show default")
            out = h1.cmd("ping -c2 -W2 203.0.113.2")
            assert "2 received" in out, out
            assert run(["ip", "-n", outside, "route", "get", "10.0.0.1"]).returncode != 0
            assert nat_tables()
            # The NAT's commands run on the machine (its interface is the machine's).
            assert "nat0-eth0" in nat.cmd("ip -br link show nat0-eth0")
            assert net.pingAll() == 0
        finally:
            net.stop()
        assert not nat_tables() and not labs()
        r = run([VEMU, "mn", "--nat", "--topo", "single,2", "--test", "pingall"])
        assert r.returncode == 0 and "0% dropped (6/6 received)" in r.stdout + r.stderr, r.stderr
        assert not nat_tables() and not labs()
    finally:
        undo()


def run(args, stdin="", timeout=120, env=None):
    return subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=timeout, env=env)


@root
def test_mn_and_its_prompt():
    r = run([VEMU, "mn", "--topo", "linear,2", "--test", "pingall+iperfudp"])
    assert r.returncode == 0, r.stderr
    assert "*** Results: 0% dropped (2/2 received)" in r.stdout + r.stderr
    assert re.search(r"\*\*\* Results: \['10M', '[\d.]+ Mbits/sec'", r.stdout + r.stderr), r.stdout + r.stderr
    r = run([VEMU, "mn", "--topo", "single,2", "--link", "tc,delay=10ms", "--mac"],
            stdin="h1 ping -c 2 -i 0.2 h2\nnet\nsh echo hello\npy h2.IP()\n")
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert 39.5 <= rtt_min_ms(out) <= 48, out
    assert "h1 h1-eth0:s1-eth1" in out and "hello" in out and "10.0.0.2" in out
    assert not labs()


@root
def test_a_script_killed_leaves_a_lab_that_vemu_clean_removes(tmp_path):
    script = tmp_path / "hang.py"
    script.write_text("from mininet.net import Mininet\nfrom mininet.topo import SingleSwitchTopo\n"
                      "import time\nnet = Mininet(topo=SingleSwitchTopo(2))\nnet.start()\n"
                      "print('up', flush=True)\ntime.sleep(60)\n")
    p = subprocess.Popen([VEMU, "mininet", str(script)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "up"
    left = labs()
    assert len(left) == 1

    def kill():
        # SIGKILL to vemu mininet and its python: no atexit, the lab stays, as Mininet's would.
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        for pid in [pid for pid in os.listdir("/proc") if pid.isdigit()]:
            try:
                if str(script).encode() in open("/proc/%s/cmdline" % pid, "rb").read():
                    os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.2)

    kill()
    assert labs() == left
    # The lab belonged to the script (vemu up --owner): vemu clean takes it down.
    r = run([VEMU, "clean"])
    assert r.returncode == 0 and "which has ended" in r.stderr, r.stderr
    assert not labs()
    # mn -c takes down what Mininet scripts left: not a running script's lab (issue 61:
    # it took down another script's), but the same lab once its script has ended.
    p = subprocess.Popen([VEMU, "mininet", str(script)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "up"
    running = labs()
    assert run([VEMU, "mn", "-c"]).returncode == 0
    assert labs() == running
    kill()
    assert run([VEMU, "mn", "-c"]).returncode == 0
    assert not labs()


@root
def test_mn_refuses_a_topology_too_big_at_once():
    # Issue 61: linear,100000000 grew without bound; tree,depth=100000 ended in a
    # RecursionError with exit 0.
    for topo in ["linear,100000000", "tree,depth=100000", "tree,depth=17,fanout=2", "torus,400,400"]:
        t0 = time.time()
        r = run([VEMU, "mn", "--topo", topo, "--test", "none"], timeout=60)
        assert r.returncode == 2 and "more than 100000 nodes" in r.stderr, (topo, r.stderr)
        assert time.time() - t0 < 30, topo
    r = run([VEMU, "mn", "--topo", "linear,-3", "--test", "none"], timeout=60)
    assert r.returncode == 2 and "whole number" in r.stderr, r.stderr
    assert not labs()


def test_mn_counts_the_builtin_topologies_as_they_are_built():
    from vemu.mininet.mn import topoSize
    from vemu.mininet.topolib import TorusTopo, TreeTopo
    for topo, built in [("linear,4,3", LinearTopo(4, 3)), ("tree,depth=3,fanout=3", TreeTopo(3, 3)),
                        ("single,5", SingleSwitchTopo(5)), ("torus,3,4,2", TorusTopo(3, 4, 2)),
                        ("tree,depth=0", TreeTopo(0, 2))]:
        assert topoSize(topo) == len(built.nodes()), topo


def test_a_deep_tree_is_built_without_recursion_and_numbered_as_mininet_does():
    from vemu.mininet.topolib import TreeTopo

    class Recursive(TreeTopo):
        "Mininet 2.3.0's recursive addTree, to compare with."
        def addTree(self, depth, fanout):
            if depth > 0:
                node = self.addSwitch('s%s' % self.switchNum)
                self.switchNum += 1
                for _ in range(fanout):
                    self.addLink(node, self.addTree(depth - 1, fanout))
            else:
                node = self.addHost('h%s' % self.hostNum)
                self.hostNum += 1
            return node

    for depth, fanout in [(1, 2), (2, 3), (3, 2), (4, 1), (0, 5)]:
        a, b = TreeTopo(depth, fanout), Recursive(depth, fanout)
        assert a.nodes(sort=False) == b.nodes(sort=False)
        assert a.links(sort=False, withInfo=True) == b.links(sort=False, withInfo=True)
    deep = TreeTopo(5000, 1)
    assert len(deep.nodes()) == 5001


@root
def test_mininet_path_serves_import_mininet(tmp_path):
    path = run([VEMU, "mininet", "--path"]).stdout.strip()
    assert os.path.isdir(os.path.join(path, "mininet")) and os.path.isdir(os.path.join(path, "vemu"))
    # (Not among the labs' directories: vemu ls and vemu clean leave it alone.)
    assert not path.startswith("/run/vemu/")
    assert "python" not in run([VEMU, "ls"]).stdout
    env = dict(os.environ, PYTHONPATH=path)
    r = run([sys.executable, "-c", "import mininet.net, mininet.node as n; print(mininet.net.VERSION, n.OVSSwitch.__module__)"],
            env=env)
    assert r.stdout.split() == ["2.3.0", "vemu.mininet.node"], r.stderr
    # Without $VEMU and with no vemu on PATH (sudo's secure path), the package finds the
    # executable that wrote it out.
    env = {k: v for k, v in os.environ.items() if k != "VEMU"}
    env.update(PYTHONPATH=path, PATH="/usr/sbin:/usr/bin:/sbin:/bin")
    r = run([sys.executable, "-c", "import vemu; print(vemu.find_vemu())"], env=env)
    assert os.path.samefile(r.stdout.strip(), VEMU), (r.stdout, r.stderr)
    r = run([VEMU, "mininet", str(tmp_path / "none.py")])
    assert r.returncode != 0 and "no such script" in r.stderr


@root
@pytest.mark.parametrize("example,stdin,expect", [
    ("emptynet", "h1 ping -c1 h2\n", "1 received"),
    ("multitest", "", "*** Results: 0% dropped (12/12 received)"),
    ("linuxrouter", "h1 ping -c1 h3\nr0 route -n\n", "1 received"),
    ("multilink", "", "*** Stopping 4 links"),
    ("natnet", "h1 ping -c1 -W2 h0\nh2 ping -c1 -W2 h0\n", "1 received"),
    # (Polls every host's stdout before its first command: shells start when asked for.)
    ("multiping", "", "10.0.0.200 1 packets transmitted, 0 received"),
])
def test_mininets_own_examples_unmodified(example, stdin, expect):
    r = run([VEMU, "mininet", os.path.join(EXAMPLES, example + ".py")], stdin=stdin)
    out = r.stdout + r.stderr
    assert expect in out, out
    assert r.returncode == 0, out
    assert "Traceback" not in out
    if example == "natnet":
        # Both private networks reached h0, each through its NAT (the one address h0
        # knows: 0 received would be h0 answering 192.168.x, which it has no route to).
        assert out.count("1 received") == 2, out
    if example == "multiping":
        assert re.search(r"h1: 10\.0\.0\.1 -> 10\.0\.0\.[234] 1 packets transmitted, 1 received", out), out
    if example == "linuxrouter":
        assert "192.168.1.0     0.0.0.0         255.255.255.0   U" in out
    assert not labs()
