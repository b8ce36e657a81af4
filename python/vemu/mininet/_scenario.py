"""A Mininet network as a vemu scenario (sans-IO: objects in, scenario text out).

- Hosts and other non-switch nodes become vemu nodes; a ``CPULimitedHost``'s ``cpu``
  (a fraction of the machine) becomes a limit in cores. A ``NAT`` in the machine's
  namespace (``net.addNAT()``) becomes the machine itself: vemu's host node, with
  ``nat: true``.
- A switch linked only to non-switches becomes a LAN segment of that name (vemu's
  learning switch); each link to it a port whose ``egress`` is what the node's
  interface shapes and whose ``ingress`` what the switch's interface shapes.
- A switch linked to other switches (or twice to one node) becomes a node whose ports a Linux bridge joins
  (``bridges`` says which), every one of its links a vemu link: vemu's segments are not
  linked to each other, and a link between switches carries its own impairments.
- Addresses: what Mininet gives a host (``ip``, on its default interface) or an
  interface (``params1={'ip': ...}``) is given to vemu where vemu can take it (both ends
  of a link in one subnet; a segment's members in one subnet per family); the rest is
  left to the node's shell afterwards (``Intf.built`` stays False).
"""

import ipaddress
import json
import re

from vemu.mininet.link import TCIntf
from vemu.mininet.node import Controller, CPULimitedHost, Switch
from vemu.mininet.nodelib import NAT

_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$')


class Plan(object):
    """What :func:`plan` decided."""

    def __init__(self):
        self.scenario = {}
        #: Switch name -> 'segment' or 'bridge'.
        self.switches = {}
        #: Bridge switch name -> its port interface names, in port order.
        self.bridges = {}
        #: Intf -> True where vemu gives its address and MAC.
        self.built = {}
        #: Intf -> (address 'a.b.c.d/len' or None, MAC or None) that vemu gives it.
        self.given = {}
        #: Link -> (spec, direction of intf1, direction of intf2).
        self.specs = {}
        #: The node that is the machine itself (a NAT in its namespace), if any.
        self.machine = None

    def text(self):
        return json.dumps(self.scenario, indent=1)


def _addr(intf):
    """The address Mininet would give this interface, as 'a.b.c.d/len', or None."""
    ip = intf.params.get('ip')
    node = intf.node
    if not ip and node.defaultIntf() is intf:
        ip = node.params.get('ip')
    if not ip:
        return None
    return ip if '/' in ip else ip + '/8'


def _mac(intf):
    mac = intf.params.get('mac')
    if not mac and intf.node.defaultIntf() is intf:
        mac = intf.node.params.get('mac')
    return mac


def _tc(intf):
    return dict(intf.impairments) if isinstance(intf, TCIntf) else {}


def plan(name, hosts, switches, links, bridged=()):
    """The scenario of a network named ``name``. ``bridged``: names of nodes whose
    interfaces a bridge in them joins (Mininet-WiFi's access points): like a switch's
    ports, their ends have no address, and the far end of a link to one keeps its own."""
    p = Plan()
    is_switch = {s.name for s in switches}
    bridged = set(bridged)
    for s in switches:
        p.switches[s.name] = 'segment'
    for link in links:
        a, b = link.intf1.node, link.intf2.node
        if isinstance(a, Controller) or isinstance(b, Controller):
            raise ValueError('link %s: controllers are not in the data plane here' % link)
        if a.name in is_switch and b.name in is_switch:
            p.switches[a.name] = p.switches[b.name] = 'bridge'
    # A switch with two ports to one node is a bridge too: a node is a LAN segment's
    # member once.
    for s in switches:
        peers = [i.link.intf2.node if i.link.intf1 is i else i.link.intf1.node
                 for i in s.intfList() if i.link is not None]
        if len(peers) != len(set(peers)):
            p.switches[s.name] = 'bridge'
    nodes = {}
    for h in hosts:
        spec = {}
        if isinstance(h, NAT) and not h.inNamespace:
            if p.machine:
                raise ValueError('%s and %s: the machine can be one NAT of a network only'
                                 % (p.machine, h.name))
            p.machine = h.name
            spec = {'kind': 'host', 'nat': True}
        elif isinstance(h, CPULimitedHost) and h.cpuCores() is not None:
            spec['cpu'] = h.cpuCores()
        nodes[h.name] = spec
    for s in switches:
        if p.switches[s.name] == 'bridge':
            nodes[s.name] = {}
            p.bridges[s.name] = [i.name for i in s.intfList()]
    out = []
    segments = {}
    nets = {}  # the IPv4 subnet of each segment: its first addressed member's

    def end(intf, addr_ok):
        e = {'node': intf.node.name, 'iface': intf.name}
        addr = _addr(intf) if intf.node.name not in is_switch | bridged else None
        if addr and addr_ok(addr):
            e['ip'] = [addr]
        else:
            e['ip'] = 'none'
        mac = _mac(intf)
        if mac and intf.node.name not in is_switch:
            e['mac'] = mac
        p.built[intf] = e['ip'] != 'none' or addr is None
        p.given[intf] = (addr if e['ip'] != 'none' else None, e.get('mac'))
        return e

    for n, link in enumerate(links):
        i1, i2 = link.intf1, link.intf2
        seg1 = p.switches.get(i1.node.name) == 'segment'
        seg2 = p.switches.get(i2.node.name) == 'segment'
        if seg1 or seg2:
            sw, other = (i1, i2) if seg1 else (i2, i1)
            if seg1 and seg2:
                raise ValueError('link %s: between two switches' % link)
            members = segments.setdefault(sw.node.name, [])
            m = end(other, lambda a, sw=sw.node.name: _fits(nets, sw, a))
            egress, ingress = _tc(other), _tc(sw)
            if egress:
                m['egress'] = egress
            if ingress:
                m['ingress'] = ingress
            members.append(m)
            p.built[sw] = True
            # (NODE:SEGMENT: its forward direction is the node's egress.)
            spec = '%s:%s' % (other.node.name, sw.node.name)
            p.specs[link] = (spec, 'forward', 'reverse') if other is i1 else (spec, 'reverse', 'forward')
            continue
        lname = '%s_%s' % (i1.name, i2.name)
        if not _NAME.match(lname) or any(l.get('name') == lname for l in out):
            lname = 'l%d' % n
        # An end takes its address where vemu can give it: beside a switch's port
        # (which has none), or with the other end's in one subnet.
        a1, a2 = _addr(i1), _addr(i2)
        sw1 = i1.node.name in is_switch or i1.node.name in bridged
        sw2 = i2.node.name in is_switch or i2.node.name in bridged
        ok = sw1 or sw2 or bool(a1 and a2 and _same_subnet(a1, a2))
        e1 = end(i1, lambda _a: ok)
        e2 = end(i2, lambda _a: ok)
        entry = {'name': lname, 'endpoints': [e1, e2]}
        if _tc(i1):
            entry['forward'] = _tc(i1)
        if _tc(i2):
            entry['reverse'] = _tc(i2)
        out.append(entry)
        p.specs[link] = (lname, 'forward', 'reverse')
    p.scenario = {
        'name': name,
        'addressing': {'ipv4': 'none', 'ipv6': 'link-local'},
        'routing': 'none',
        'nodes': nodes,
    }
    if out:
        p.scenario['links'] = out
    if segments:
        p.scenario['segments'] = {
            s: {'kind': 'lan', 'members': m} for s, m in segments.items() if m
        }
        for s, m in p.scenario['segments'].items():
            if not any(isinstance(e.get('ip'), list) for e in m['members']):
                m['ipv4'] = 'none'
    return p


def _fits(nets, segment, addr):
    net = ipaddress.ip_interface(addr).network
    have = nets.setdefault(segment, net)
    return have == net


def _same_subnet(a, b):
    ia, ib = ipaddress.ip_interface(a), ipaddress.ip_interface(b)
    return ia.network == ib.network and ia.ip != ib.ip
