"""Mininet-WiFi's network on vemu: ``Mininet_wifi`` builds a vemu lab whose radio is
vemu's own 802.11 channel (``_radio``: the DCF slot by slot, access points and
stations associating with real management frames, roaming by signal) — no
mac80211_hwsim, wmediumd, hostapd or Open vSwitch needed. Stations and hosts are
vemu nodes, access points nodes bridging their radio with their wired links."""

import os
import time

from vemu.mininet.link import Link, TCLink
from vemu.mininet.log import info, warn
from vemu.mininet.net import Mininet
from vemu.mininet.node import NotEmulated
from vemu.mininet.util import BaseString
from vemu.mininet import _scenario
from vemu.mn_wifi import _radio
from vemu.mn_wifi.link import WirelessLink, adhoc, _Refused
from vemu.mn_wifi.node import AP, Car, OVSKernelAP, Station

#: Routing daemons an ad hoc or mesh link's ``proto`` may start, as their commands
#: (Debian has babeld; the others Mininet-WiFi names are not packaged).
PROTOCOLS = {'babel': 'babeld %s'}


class _RadioLink(object):
    "An association (station, access point) or an ad hoc radio: not a vemu link."

    def __init__(self, intf1, intf2=None):
        self.intf1, self.intf2 = intf1, intf2

    def stop(self):
        pass

    def delete(self):
        pass

    def __str__(self):
        return '%s<~>%s' % (self.intf1, self.intf2 or '(ad hoc)')


class Mininet_wifi(Mininet):
    """Mininet-WiFi's network: stations, access points, hosts, switches and their links,
    built as a vemu lab."""

    def __init__(self, accessPoint=OVSKernelAP, station=Station, car=Car, link=WirelessLink,
                 ssid='new-ssid', mode='g', channel=1, wmediumd_mode=None, noise_th=-91,
                 fading_cof=0, client_isolation=False, autoAssociation=True,
                 allAutoAssociation=True, plot=False, plot3d=False, ac_method=None,
                 configWiFiDirect=False, config4addr=False, docker=False, roads=0,
                 encrypt='', passwd=None, ieee80211w=None, freq=2.4, band=20, cca_th=-90,
                 disable_tcp_checksum=False, ifb=False, rec_rssi=False, json_file=None,
                 autoSetPositions=False, **kwargs):
        for flag, what in ((configWiFiDirect, 'configWiFiDirect (Wi-Fi Direct)'),
                           (config4addr, 'config4addr (4-address frames)'),
                           (docker, 'docker'), (roads, 'roads (vanet)')):
            if flag:
                raise NotEmulated('%s: not emulated by vemu (docs/mininet.md)' % what)
        if encrypt or passwd:
            warn('*** %s is not emulated: stations associate with open authentication '
                 '(docs/mininet.md)\n' % (encrypt or 'WPA'))
        wired = link if isinstance(link, type) and issubclass(link, Link) else Link
        self.accessPoint, self.station, self.car = accessPoint, station, car
        self.ssid, self.mode, self.channel = ssid, mode, channel
        self.noise_th = noise_th
        self.client_isolation = client_isolation
        self.stations, self.aps, self.cars = [], [], []
        #: Associations and ad hoc radios (not vemu links).
        self.wlinks = []
        self.propagation = {'model': 'logDistance', 'exp': 3, 'sL': 1, 'variance': 2}
        self.mob_model = None
        self.mob_moves = {}
        self.drawn = None
        Mininet.__init__(self, link=wired, **kwargs)

    # --- nodes --------------------------------------------------------------------

    def _addRadioNode(self, node, lst):
        node.netUp = self.ensureLab
        node.net = self
        lst.append(node)
        self.nameToNode[node.name] = node
        return node

    def addStation(self, name, cls=None, **params):
        """A station: a host whose first interface is its radio (``NAME-wlan0``), with
        the next address of the network's base as Mininet gives hosts."""
        if int(params.get('wlans', 1)) != 1:
            raise NotEmulated('%s: wlans=%s: vemu gives a station one radio' % (name, params['wlans']))
        defaults = {'ip': '%s/%s' % (self._nextIP(), self.prefixLen)}
        defaults.update(params)
        sta = (cls or self.station)(name, **defaults)
        sta.addWIntf('%s-wlan0' % name, 0, ip=defaults.get('ip'), mac=defaults.get('mac'),
                     txpower=params.get('txpower'), antennaGain=params.get('antennaGain', 5),
                     range=params.get('range'))
        self.hosts.append(sta)
        return self._addRadioNode(sta, self.stations)

    def addCar(self, name, cls=None, **params):
        return self.addStation(name, cls=cls or self.car, **params)

    def _nextIP(self):
        from vemu.mininet.util import ipAdd
        ip = ipAdd(self.nextIP, ipBaseNum=self.ipBaseNum, prefixLen=self.prefixLen)
        self.nextIP += 1
        return ip

    def addAccessPoint(self, name, cls=None, **params):
        """An access point: a node whose radio (``NAME-wlan1``) serves its SSID, bridged
        with its wired links."""
        defaults = {'ssid': self.ssid, 'mode': self.mode, 'channel': self.channel,
                    'client_isolation': self.client_isolation}
        defaults.update(params)
        ap = (cls or self.accessPoint)(name, **defaults)
        ap.addWIntf('%s-wlan1' % name, 1, mac=params.get('mac'), txpower=params.get('txpower'),
                    antennaGain=params.get('antennaGain', 5), range=params.get('range'))
        return self._addRadioNode(ap, self.aps)

    def addLink(self, node1, node2=None, port1=None, port2=None, cls=None, **params):
        """A wired link (a vemu link), an association (a station and an access point: the
        station joins that access point's SSID), or an ad hoc/mesh radio
        (``cls=adhoc``/``mesh``: ``ssid``, ``proto``)."""
        node1 = self[node1] if isinstance(node1, BaseString) else node1
        node2 = self[node2] if isinstance(node2, BaseString) else node2
        if isinstance(cls, type) and issubclass(cls, _Refused):
            cls()
        if isinstance(cls, type) and issubclass(cls, adhoc) or node2 is None:
            if not isinstance(node1, (Station, AP)) or not node1.wintfs:
                raise NotEmulated('%s: an ad hoc or mesh link needs a station' % node1)
            proto = params.get('proto')
            if proto and proto not in PROTOCOLS:
                raise NotEmulated("proto=%r: vemu's nodes have %s (Debian packages no other "
                                  "Mininet-WiFi names)" % (proto, ', '.join(PROTOCOLS)))
            node1.adhoc = {'ssid': params.get('ssid'), 'proto': proto,
                           'mode': getattr(cls, 'mode', 'adhoc')}
            link = _RadioLink(node1.wintfs[0])
            self.wlinks.append(link)
            return link
        radio = cls is None or (isinstance(cls, type) and issubclass(cls, WirelessLink))
        sta, ap = ((node1, node2) if isinstance(node1, Station) else (node2, node1))
        if radio and isinstance(sta, Station) and isinstance(ap, AP):
            sta.ap = ap
            link = _RadioLink(sta.wintfs[0], ap.wintfs[0])
            self.wlinks.append(link)
            return link
        if isinstance(node1, Station) and isinstance(node2, Station) and radio and cls is not None:
            raise NotEmulated('%s-%s: two stations meet on the air in ad hoc mode '
                              '(cls=adhoc), not by a link' % (node1, node2))
        if cls is not None and isinstance(cls, type) and issubclass(cls, WirelessLink):
            cls = None
        if cls is None and any(k in params for k in ('bw', 'delay', 'loss', 'jitter')):
            cls = TCLink
        return Mininet.addLink(self, node1, node2, port1=port1, port2=port2, cls=cls, **params)

    def buildFromTopo(self, topo=None):
        """Build from a topology (``mn_wifi.topo``, or Mininet's): its stations, access
        points, hosts and switches, then its links (a station's to an access point an
        association)."""
        flags = ('isStation', 'isAP', 'isHost', 'isSwitch')
        opts = lambda n: {k: v for k, v in topo.nodeInfo(n).items() if k not in flags}
        wifi = hasattr(topo, 'stations')
        if not wifi:
            return Mininet.buildFromTopo(self, topo)
        info('*** Creating network\n')
        for kind, names, add in (('stations', topo.stations(), self.addStation),
                                 ('access points', topo.aps(), self.addAccessPoint),
                                 ('hosts', topo.hosts(), self.addHost),
                                 ('switches', topo.switches(), self.addSwitch)):
            if names:
                info('*** Adding %s:\n%s\n' % (kind, ' '.join(names)))
            for n in names:
                add(n, **opts(n))
        info('*** Adding links:\n')
        for src, dst, params in topo.links(sort=True, withInfo=True):
            params = dict(params)
            self.addLink(params.pop('node1', src), params.pop('node2', dst), **params)
            info('(%s, %s) ' % (src, dst))
        info('\n')

    # --- what Mininet-WiFi configures with iw and wmediumd ---------------------------

    def configureNodes(self):
        "Nothing to do: vemu gives the radios their parameters when it builds the lab."

    configureWifiNodes = configureNodes

    def setPropagationModel(self, **kwargs):
        model = kwargs.get('model', 'logDistance')
        if model not in _radio.MODELS:
            raise NotEmulated('propagation model %r: vemu has %s' % (model, ', '.join(sorted(_radio.MODELS))))
        self.propagation.update(kwargs)

    def setMobilityModel(self, **kwargs):
        if kwargs.get('model') not in _radio.MOBILITY:
            raise NotEmulated('mobility model %r: vemu has %s'
                              % (kwargs.get('model'), ', '.join(sorted(_radio.MOBILITY))))
        self.mob_model = dict(kwargs)

    def startMobility(self, **kwargs):
        if 'model' in kwargs:
            self.setMobilityModel(**kwargs)
        if int(kwargs.get('mob_rep', 1)) != 1 or kwargs.get('reverse'):
            warn('*** startMobility: mob_rep and reverse are not emulated: each move once\n')

    def stopMobility(self, **kwargs):
        "The moves end by themselves (each arrives at its stop time)."

    def mobility(self, node, event, time=0, position=None, **kwargs):
        node = self[node] if isinstance(node, BaseString) else node
        if event not in ('start', 'stop'):
            raise NotEmulated("mobility(%s, %r): 'start' or 'stop'" % (node, event))
        self.mob_moves.setdefault(node.name, {})[event] = (float(time), position)

    def plotGraph(self, **kwargs):
        """Draw the network to a PNG (``VEMU_PLOT`` names the file; by default
        ``LAB-plot.png`` here) once its lab is up — and again at each call after — and
        live on the lab's web page (``vemu ui``)."""
        self.drawn = kwargs
        if self.lab:
            self._plot()

    def _plot(self):
        from vemu.mn_wifi.plot import plot_png
        return plot_png(self, os.environ.get('VEMU_PLOT') or '%s-plot.png' % self.lab, **self.drawn)

    plotGraph3D = plotGraph

    def stop_simulation(self):
        warn('*** vemu does not pause the movement of a running lab\n')

    start_simulation = stop_simulation

    def get_distance(self, src, dst):
        try:
            a, b = self.nameToNode[src], self.nameToNode[dst]
            info('The distance between %s and %s is %s meters\n' % (a, b, a.get_distance_to(b)))
        except KeyError:
            info('node %s or/and node %s does not exist\n' % (dst, src))
        except AttributeError as e:
            info(str(e) + '\n')

    # --- the lab ------------------------------------------------------------------

    def build(self):
        """Build the network and bring its lab up at once: its radios start beaconing
        and associating, and its movements start on the lab's clock, as Mininet-WiFi's
        do when it builds."""
        Mininet.build(self)
        self.ensureLab()
        self.waitAssociated()
        if self.drawn is not None and self.lab:
            self._plot()

    def waitAssociated(self, timeout=3.0):
        """Wait (up to ``timeout`` s) until each station that has an access point in its
        network is associated, as Mininet-WiFi's ``addLink(sta, ap)`` returns once
        ``iw`` connected: a first ping does not meet a station still scanning."""
        from vemu.mn_wifi.node import _radio_status
        want = [s.name for s in self.stations if self.aps and not getattr(s, 'adhoc', None)]
        deadline = time.time() + timeout
        while want and self.lab and time.time() < deadline:
            st = _radio_status(self.lab)
            want = [s for s in want if not (st.get(s, {}).get('wifi') or {}).get('ap')]
            if want:
                time.sleep(0.05)
        if want:
            warn('*** %s: not associated after %gs (no access point in range?)\n'
                 % (', '.join(want), timeout))
        return not want

    def labNodes(self):
        return self.hosts + self.switches + self.aps

    def labPlan(self, name):
        aps = {ap.name for ap in self.aps}
        p = _scenario.plan(name, self.hosts + self.aps, self.switches, self.links, bridged=aps)
        members = []
        wired = {ap.name: any(i.link is not None for i in ap.intfList()) for ap in self.aps}
        for ap in self.aps:
            w = ap.wintfs[0]
            members.append(_radio.Member(
                ap.name, w.name, 'ap', mac=w.mac, position=_xy(ap), tx_dbm=w.txpower,
                range_m=w.range, gain_dbi=w.antennaGain, ssid=ap.ssid,
                isolation=bool(ap.client_isolation), bridge=wired[ap.name], channel=ap.channel))
        net = None
        for sta in self.stations:
            w = sta.wintfs[0]
            ip = w.params.get('ip')
            ip = ip if not ip or '/' in ip else ip + '/8'
            if ip:
                n = _net(ip)
                net = net or n
                if n != net:
                    ip = None
            role = 'station' if self.aps and not getattr(sta, 'adhoc', None) else 'adhoc'
            ap = getattr(sta, 'ap', None)
            members.append(_radio.Member(
                sta.name, w.name, role, ip=ip, mac=w.mac, position=_xy(sta), tx_dbm=w.txpower,
                range_m=w.range, gain_dbi=w.antennaGain, ssid=ap.ssid if ap else None))
            p.built[w] = bool(ip) or not w.params.get('ip')
            p.given[w] = (ip, w.mac)
            proto = (getattr(sta, 'adhoc', None) or {}).get('proto')
            if proto:
                p.scenario['nodes'][sta.name].setdefault('run', []).append(PROTOCOLS[proto] % w.name)
        for ap in self.aps:
            p.built[ap.wintfs[0]] = True
            p.given[ap.wintfs[0]] = (None, ap.wintfs[0].mac)
        if len(members) < 2:
            return p
        channel = self.aps[0].channel if self.aps else self.channel
        mode = self.aps[0].mode if self.aps else self.mode
        try:
            seg = _radio.segment(members, channel=channel, mode=mode,
                                 model=self.propagation.get('model', 'logDistance'),
                                 exp=self.propagation.get('exp', 3),
                                 variance=self.propagation.get('variance', 2),
                                 system_loss=self.propagation.get('sL', 1),
                                 noise_th=self.noise_th, mobility=self.mob_model)
            events = []
            for node, ev in sorted(self.mob_moves.items()):
                events += self._moves(self.nameToNode[node], ev)
        except _radio.NotMapped as e:
            raise NotEmulated(str(e))
        if not any(isinstance(m.get('ip'), list) for m in seg['members']):
            seg['ipv4'] = 'none'
        p.scenario.setdefault('segments', {})['wlan'] = seg
        if events:
            p.scenario['events'] = events
        if self.mob_model and self.mob_model.get('seed') is not None:
            p.scenario['seed'] = int(self.mob_model['seed'])
        return p

    def _moves(self, node, ev):
        if 'start' not in ev or 'stop' not in ev:
            raise _radio.NotMapped('mobility of %s: needs a start and a stop' % node)
        (t1, p1), (t2, p2) = ev['start'], ev['stop']
        coord = [_radio.parse_position(c) for c in (node.coord or [])]
        here = _xy(node)
        start = _radio.parse_position(p1) if p1 else (coord[0] if coord else here)
        stop = _radio.parse_position(p2) if p2 else (coord[-1] if coord else here)
        if start is None or stop is None:
            raise _radio.NotMapped('mobility of %s: give it a position (or coord)' % node)
        via = coord[1:-1] if coord and not p1 and not p2 else []
        return _radio.moves(node.name, t1, t2, start, stop, via)

    def stop(self):
        for ap in self.aps:
            ap.terminate()
        Mininet.stop(self)


def _xy(node):
    pos = node._position
    return (pos[0], pos[1]) if pos else None


def _net(ip):
    import ipaddress
    return ipaddress.ip_interface(ip).network

