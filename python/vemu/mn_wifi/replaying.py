"""Mininet-WiFi's replayed mobility (``mn_wifi.replaying``): a station (or access point)
given a list of positions ``p`` — and optionally their times ``time``, in seconds — is
moved through them on the running lab, at those times or ``speed`` positions a second
(1 unless the node was added with ``speed=``), from a thread, as Mininet-WiFi replays
them. Each step is a move of vemu's own (``vemu node move``): the radio channel follows at
once. Replayed bandwidth, network conditions and RSSI (which set ``tc`` on a station's
interface or place it from a signal level) are not emulated: vemu's channel decides the
rate and the losses."""

import threading
import time

from vemu.mininet.log import info
from vemu.mininet.node import NotEmulated
from vemu.mn_wifi.link import _Refused

#: Why the other replayers are refused.
WHY = "is not emulated: vemu's 802.11 channel decides rates, losses and signal from positions (docs/mininet.md)"


def schedule(nodes):
    """The moves to replay: (seconds from the start, node, 'x,y,z'), in time order."""
    out = []
    for node in nodes:
        positions = list(getattr(node, 'p', None) or [])
        times = getattr(node, 'time', None)
        if times:
            out += [(float(t), node, p) for t, p in zip(times, positions)]
            continue
        speed = float((getattr(node, 'params', {}) or {}).get('speed') or 1.0)
        out += [((i + 1) / speed, node, p) for i, p in enumerate(positions)]
    out.sort(key=lambda m: m[0])
    return out


def _pos(p):
    return p if isinstance(p, str) else ','.join(str(v) for v in p)


class ReplayingMobility(object):
    "Replay the positions of ``nodes`` (default: the network's stations and access points)."

    def __init__(self, net, nodes=None):
        self.net = net
        nodes = list(nodes) if nodes is not None else net.stations + net.aps
        self.moves = schedule(nodes)
        self._keep_alive = True
        self.thread_ = threading.Thread(name='replayingMobility', target=self.mobility, daemon=True)
        self.thread_.start()

    def mobility(self):
        start = time.time()
        for at, node, pos in self.moves:
            wait = start + at - time.time()
            if wait > 0:
                time.sleep(wait)
            if not self._keep_alive:
                return
            try:
                node.setPosition(_pos(pos))
            except NotEmulated as e:
                info('*** replaying %s: %s\n' % (node, e))
        info('*** Replaying process finished\n')

    def stop(self):
        self._keep_alive = False


#: The name older Mininet-WiFi releases gave it.
replayingMobility = ReplayingMobility


class ReplayingBandwidth(_Refused):
    what = 'ReplayingBandwidth (tc on a station from a trace) ' + WHY


class ReplayingNetworkConditions(_Refused):
    what = 'ReplayingNetworkConditions (tc on a station from a trace) ' + WHY


class ReplayingRSSI(_Refused):
    what = 'ReplayingRSSI (positions from signal levels) ' + WHY
