"""Mininet's node library on vemu: ``LinuxBridge`` (a learning switch, with STP where
the switch is a bridge of its own) and ``NAT`` (the machine as the hosts' way out, or a
masquerading node)."""

import ipaddress

from vemu.mininet.node import Node, Switch


class LinuxBridge(Switch):
    "Linux Bridge (with optional spanning tree)"

    nextPrio = 100

    def __init__(self, name, stp=False, prio=None, **kwargs):
        self.stp = stp
        if prio:
            self.prio = prio
        else:
            self.prio = LinuxBridge.nextPrio
            LinuxBridge.nextPrio += 1
        Switch.__init__(self, name, **kwargs)

    def connected(self):
        if self.stp and self.where == 'node':
            return 'forwarding' in self.cmd('bridge link show')
        return True

    def dpctl(self, *args):
        return self.cmd('bridge', *args)


class NAT(Node):
    """Mininet's NAT: the hosts' way beyond their network.

    - In the machine's namespace (``inNamespace=False``, what ``net.addNAT()`` and
      ``mn --nat`` make): the NAT is vemu's host node with ``nat: true`` — the machine
      itself joined to the switch, IPv4 from the lab masqueraded as the machine's where
      it leaves by another interface, forwarding on while the lab is up; the rules are
      the lab's and go with it (docs/scenario.md, "The machine itself as a node").
    - In a namespace (``natnet.py``'s NATs between two of the lab's networks): a lab
      node that masquerades ``subnet`` leaving for elsewhere, as Mininet's rules do
      (nftables in the node instead of iptables)."""

    def __init__(self, name, subnet='10.0/8', localIntf=None, flush=False, **params):
        super(NAT, self).__init__(name, **params)
        self.subnet = subnet
        self.localIntf = localIntf
        self.flush = flush

    def setManualConfig(self, intf):
        "Mininet keeps NetworkManager off the interface; vemu's interfaces are its own."

    def config(self, **params):
        super(NAT, self).config(**params)
        if not self.localIntf:
            self.localIntf = self.defaultIntf()
        if not self.inNamespace:
            return
        net = _network(self.subnet)
        local = str(self.localIntf)
        # (Once: config may run again, as configDefault() after the network's.)
        self.cmd('nft delete table ip mininet_nat 2>/dev/null')
        self.cmd("nft -f - <<'EOF'\n"
                 'table ip mininet_nat {\n'
                 '  chain forward {\n'
                 '    type filter hook forward priority filter; policy accept;\n'
                 '    iifname "%s" ip daddr %s drop\n'
                 '  }\n'
                 '  chain postrouting {\n'
                 '    type nat hook postrouting priority srcnat; policy accept;\n'
                 '    ip saddr %s ip daddr != %s masquerade\n'
                 '  }\n'
                 '}\nEOF' % (local, net, net, net))
        self.cmd('sysctl -q -w net.ipv4.ip_forward=1')


def _network(subnet):
    """Mininet's subnets may leave octets out ('10.0/8'): the network in full."""
    addr, _, plen = subnet.partition('/')
    octets = addr.split('.')
    octets += ['0'] * (4 - len(octets))
    return str(ipaddress.ip_network('%s/%s' % ('.'.join(octets), plen or '32'), strict=False))
