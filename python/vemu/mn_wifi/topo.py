"""Mininet-WiFi's topologies (``mn_wifi.topo``): a Topo with stations and access points
beside hosts and switches, and its SingleAPTopo, MinimalWirelessTopo and
LinearWirelessTopo, built by ``Mininet_wifi(topo=...)`` as its own scripts would."""

from vemu.mininet.topo import Topo as MnTopo
from vemu.mininet.util import irange


class Topo(MnTopo):
    "A topology of stations, access points, hosts and switches."

    def __init__(self, *args, **params):
        self.link_pairs = []
        MnTopo.__init__(self, *args, **params)

    def addStation(self, name, **opts):
        if not opts and self.hopts:
            opts = self.hopts
        return self.addNode(name, isStation=True, **opts)

    def addAccessPoint(self, name, **opts):
        if not opts and self.sopts:
            opts = self.sopts
        return self.addNode(name, isAP=True, **opts)

    def addCar(self, name, **opts):
        return self.addStation(name, **opts)

    def addHost(self, name, **opts):
        if not opts and self.hopts:
            opts = self.hopts
        return self.addNode(name, isHost=True, **opts)

    def _with(self, flag, sort=True):
        return [n for n in self.nodes(sort) if self.g.node[n].get(flag)]

    def stations(self, sort=True):
        return self._with('isStation', sort)

    def aps(self, sort=True):
        return self._with('isAP', sort)

    def switches(self, sort=True):
        return self._with('isSwitch', sort)

    def hosts(self, sort=True):
        "Hosts alone (stations and access points are listed apart)."
        return [n for n in self.nodes(sort)
                if not any(self.g.node[n].get(f) for f in ('isSwitch', 'isStation', 'isAP'))]

    def pairs(self):
        return self.link_pairs


class SingleAPTopo(Topo):
    "One access point and k stations joined to it."

    def build(self, k=2, **_opts):
        self.k = k
        ap = self.addAccessPoint('ap1')
        for h in irange(1, k):
            sta = self.addStation('sta%s' % h)
            self.addLink(sta, ap)
            self.link_pairs.append((sta, ap))


class MinimalWirelessTopo(SingleAPTopo):
    "Two stations and one access point."

    def build(self):
        return SingleAPTopo.build(self, k=2)


class LinearWirelessTopo(Topo):
    "k access points in a line (wired to the previous one), n stations on each."

    def build(self, k=2, n=1, **_opts):
        self.k, self.n = k, n
        name = (lambda i, j: 'sta%s' % i) if n == 1 else (lambda i, j: 'sta%sap%d' % (j, i))
        last = None
        for i in irange(1, k):
            ap = self.addAccessPoint('ap%s' % i, ssid='ssid_ap%s' % i)
            for j in irange(1, n):
                sta = self.addStation(name(i, j))
                self.addLink(sta, ap)
                self.link_pairs.append((sta, ap))
            if last:
                self.addLink(ap, last)
            last = ap
