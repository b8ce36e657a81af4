"""Mininet-WiFi's nodes on vemu: a station is a vemu node with a radio interface
(``sta1-wlan0``) on the network's 802.11 channel; an access point is a vemu node whose
radio (``ap1-wlan1``) is an access point of that channel and which, when it has wired
links, bridges them with its radio (a learning bridge: OpenFlow is not emulated, so
``failMode`` and controllers change nothing). Positions, signal and association are
read from the running lab (``vemu status``)."""

import json
import math
import subprocess

from vemu.mininet.link import Intf
from vemu.mininet.log import warn
from vemu.mininet.node import Host, Node, NotEmulated
from vemu.mn_wifi import _radio


def _vemu():
    from vemu import find_vemu
    return find_vemu()


def _radio_status(lab):
    """Each wireless member of the lab's radio segment, by node name: its status."""
    r = subprocess.run([_vemu(), 'status', '--lab', lab, '--json'], capture_output=True,
                       text=True)
    if r.returncode != 0:
        return {}
    out = {}
    for seg in json.loads(r.stdout).get('segments', []):
        for m in seg.get('members', []):
            if m.get('radio'):
                out[m['port'].split(':')[0]] = m['radio']
    return out


class WirelessIntf(Intf):
    """A radio interface: its place on the channel, and what the lab says of it."""

    def __init__(self, name, node=None, port=None, **params):
        Intf.__init__(self, name, node=node, port=port, **params)
        self.txpower = params.get('txpower')
        self.antennaGain = params.get('antennaGain', _radio.ANTENNA_GAIN_DBI)
        self.range = params.get('range')
        self.mode = params.get('mode')
        self._channel = params.get('channel')
        self.ssid = params.get('ssid')

    def _status(self):
        lab = self.node.lab
        return _radio_status(lab).get(self.node.name, {}) if lab else {}

    @property
    def rssi(self):
        "The signal it hears its access point at, dBm (0: none)."
        w = self._status().get('wifi') or {}
        return w.get('signal_dbm', 0)

    @property
    def channel(self):
        "The channel its radio is on (a station's: its access point's, once joined)."
        w = self._status().get('wifi') or {}
        return str(w['channel']) if w.get('channel') is not None else self._channel

    @channel.setter
    def channel(self, channel):
        self._channel = channel

    @property
    def associatedTo(self):
        "Its access point's radio interface (None: not associated)."
        w = self._status().get('wifi') or {}
        ap = w.get('ap')
        net = getattr(self.node, 'net', None)
        if not ap or net is None or ap not in net.nameToNode:
            return None
        return net.nameToNode[ap].wintfs.get(0)

    def delete(self):
        pass


class Node_wifi(Node):
    """A node with radio interfaces (``wintfs``) and a place in the plane."""

    def __init__(self, name, inNamespace=True, **params):
        Node.__init__(self, name, inNamespace=inNamespace, **params)
        self.wintfs = {}
        self.net = None
        pos = params.get('position')
        #: Where it is, [x, y, z] in metres (as given; the lab's live place when up).
        self._position = None
        if pos is not None:
            xy = _radio.parse_position(pos)
            z = float(str(pos).split(',')[2]) if isinstance(pos, str) and pos.count(',') >= 2 else 0.0
            self._position = [xy[0], xy[1], z]
        #: Waypoints for ``mobility()`` (Mininet-WiFi's ``node.coord``).
        self.coord = []

    def addWIntf(self, name, port, **params):
        intf = WirelessIntf(name, node=self, port=port, **params)
        self.wintfs[len(self.wintfs)] = intf
        self.params.setdefault('wlan', []).append(name)
        return intf

    @property
    def position(self):
        if self.lab:
            r = _radio_status(self.lab).get(self.name)
            if r:
                z = self._position[2] if self._position else 0.0
                return [round(r['x_m'], 2), round(r['y_m'], 2), z]
        return self._position

    @position.setter
    def position(self, pos):
        self.setPosition(pos if isinstance(pos, str) else ','.join(str(v) for v in pos))

    def setPosition(self, pos):
        "Move it now ('x,y,z'): at once, in the running lab."
        x, y = _radio.parse_position(pos)
        parts = str(pos).split(',')
        self._position = [x, y, float(parts[2]) if len(parts) > 2 else 0.0]
        if self.lab:
            r = subprocess.run([_vemu(), 'node', 'move', '--lab', self.lab, self.name,
                                '--to', '%g,%g' % (x, y)], capture_output=True, text=True)
            if r.returncode != 0:
                raise NotEmulated('moving %s: %s' % (self.name, r.stderr.strip()))

    def get_distance_to(self, dst):
        a, b = self.position, dst.position
        if a is None or b is None:
            raise AttributeError('Node %s or/and node %s does not have a defined position.'
                                 % (self, dst))
        return round(math.sqrt(sum((float(p) - float(q)) ** 2 for p, q in zip(a, b))), 2)

    def setRange(self, range, intf=None):
        self._before_lab('setRange')
        self.wintfs[0].range = float(range)

    def setTxPower(self, txpower, intf=None):
        self._before_lab('setTxPower')
        self.wintfs[0].txpower = float(txpower)

    def setAntennaGain(self, gain, intf=None):
        self._before_lab('setAntennaGain')
        self.wintfs[0].antennaGain = float(gain)

    def _before_lab(self, what):
        if self.lab:
            raise NotEmulated('%s of %s: vemu sets radios when it builds the network, '
                              'not while it runs' % (what, self.name))

    #: Commands of the Linux wireless stack and Open vSwitch: not run (there is no
    #: mac80211 radio, hostapd or Open vSwitch in a vemu node), with a warning.
    NOT_RUN = ('ovs-ofctl', 'ovs-vsctl', 'dpctl', 'hostapd', 'hostapd_cli', 'iw', 'iwconfig',
               'wpa_supplicant', 'wpa_cli')

    def cmd(self, *args, **kwargs):
        line = ' '.join(str(a) for a in args).strip()
        word = line.split(' ', 1)[0]
        if word in self.NOT_RUN:
            warn('*** %s: "%s" not run: vemu emulates 802.11 in its own channel (no '
                 'mac80211 radio, hostapd or Open vSwitch in its nodes; access points are '
                 'learning bridges: docs/mininet.md)\n' % (self.name, word))
            return ''
        return Node.cmd(self, *args, **kwargs)

    def setIP6(self, ip, prefixLen=64, intf=None, **kwargs):
        if '/' not in ip:
            ip = '%s/%s' % (ip, prefixLen)
        return self.cmd('ip -6 addr add %s dev %s' % (ip, self.intf(intf)))

    # Modes Mininet-WiFi sets with iw: the radio's part is the scenario's.
    def setAdhocMode(self, intf=None, **kwargs):
        raise NotEmulated('setAdhocMode: give the link instead (net.addLink(sta, cls=adhoc, ...))')

    setMeshMode = setAdhocMode

    def setManagedMode(self, intf=None):
        raise NotEmulated('setManagedMode: a station is managed unless linked with cls=adhoc or mesh')

    def setMasterMode(self, intf=None, **kwargs):
        raise NotEmulated('setMasterMode: add an access point with net.addAccessPoint()')

    def setAssociation(self, ap, intf=None):
        raise NotEmulated('setAssociation: stations roam by signal in vemu (net.addLink(sta, ap) '
                          'before build() picks the SSID)')

    def roam(self, bssid, intf=None):
        raise NotEmulated('roam: stations roam by signal in vemu (roam_threshold, hysteresis)')


class Station(Node_wifi, Host):
    "A station: a host with a radio."


class CPULimitedStation(Station):
    "A station (CPU limits: give the node's 'cpu' as for a host)."


class Car(Station):
    "A car is a station that moves (its mobility is the script's)."


class AP(Node_wifi):
    """An access point: a node whose radio serves its SSID and which bridges its radio
    with its wired interfaces."""

    portBase = 1

    def __init__(self, name, ssid='new-ssid', mode='g', channel=1, failMode='secure',
                 client_isolation=False, passwd=None, encrypt=None, dpid=None, **params):
        Node_wifi.__init__(self, name, ssid=ssid, mode=mode, channel=channel, **params)
        self.ssid, self.mode, self.channel = ssid, mode, channel
        self.failMode = failMode
        self.client_isolation = client_isolation
        if encrypt or passwd:
            warn('*** %s: %s is not emulated: its stations associate with open '
                 'authentication (docs/mininet.md)\n' % (name, encrypt or 'WPA'))
        self.dpid = dpid

    def start(self, controllers):
        "Nothing to start: the lab's access point runs once it is up."

    def stop(self, deleteIntfs=True):
        pass

    def connected(self):
        return True

    def dpctl(self, *args):
        return self.cmd('dpctl', *args)


class OVSKernelAP(AP):
    "Mininet-WiFi's default access point (a learning bridge here)."


OVSAP = OVSKernelAP
OVSBridgeAP = OVSKernelAP
UserAP = OVSKernelAP
