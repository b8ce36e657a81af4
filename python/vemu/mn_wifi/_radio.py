"""A Mininet-WiFi network's radio as a vemu wireless segment (sans-IO: the network's
description in, scenario keys out).

- One segment, ``wlan``, on vemu's 802.11 DCF (``csma: true``): access points are
  ``role: ap`` members (their SSID, client isolation, and ``bridge: true`` when they have
  wired links: the access point's node bridges its radio to them, as Mininet-WiFi's
  switch-access points do); stations linked to an access point join its SSID, other
  stations any access point (the strongest they hear); without access points, and for
  ``adhoc``/``mesh`` links, members are ad hoc.
- Each access point keeps its channel (``channel=``); stations and ad hoc radios start
  on the first access point's (or the network's), and a station scans every access
  point's channel in turn and joins its access point on that one's channel, as vemu's
  stations do. One band: access points on 2.4 and 5 GHz channels at once are refused
  (the segment has one frequency).
- Propagation as Mininet-WiFi computes it: ``logDistance`` (exponent ``exp``, 1 m
  reference), ``logNormalShadowing`` (the same with ``variance`` dB of shadowing),
  ``friis``, ``twoRayGround``; a node's ``range`` sets its transmit power so that it is
  heard down to the noise threshold at that distance (Mininet-WiFi's ``setRange``),
  and the noise threshold (``noise_th``, -91 dBm) is where frames are received.
- Movement: ``setMobilityModel`` (RandomWayPoint, RandomDirection, RandomWalk,
  GaussMarkov) moves the stations in ``max_x`` x ``max_y``; ``mobility(node, 'start' /
  'stop', time, position)`` becomes timeline moves (a jump to the start and a walk at
  the speed that arrives at the stop time), through ``node.coord`` waypoints if given.
"""

import math

NOISE_TH_DBM = -91.0
TX_POWER_DBM = 14.0
ANTENNA_GAIN_DBI = 5.0

MODELS = {'logDistance', 'logNormalShadowing', 'friis', 'twoRayGround'}
MOBILITY = {'RandomWayPoint': 'random-waypoint', 'RandomDirection': 'random-direction',
            'RandomWalk': 'random-walk', 'GaussMarkov': 'gauss-markov'}


class NotMapped(Exception):
    """What a Mininet-WiFi script asked for that vemu's radio does not emulate."""


def frequency_hz(channel):
    """A Wi-Fi channel's centre frequency."""
    c = int(channel)
    if c == 14:
        return 2.484e9
    if 1 <= c <= 13:
        return (2407 + 5 * c) * 1e6
    if 32 <= c <= 196:
        return (5000 + 5 * c) * 1e6
    raise NotMapped('channel %r: not a 2.4 or 5 GHz Wi-Fi channel' % (channel,))


def standard(mode, channel):
    """vemu's 802.11 standard for a Mininet-WiFi ``mode`` (HT and later: the legacy
    standard of their band: vemu models 802.11a/b/g rates)."""
    m = str(mode or 'g').lower()
    if m == 'b':
        return '802.11b'
    if m == 'a' or frequency_hz(channel) > 3e9:
        return '802.11a'
    if m in ('g', 'n', 'ax', 'be'):
        return '802.11g'
    if m == 'ac':
        return '802.11a'
    raise NotMapped('mode %r: expected a, b, g, n, ac or ax' % (mode,))


def parse_position(pos):
    """Mininet-WiFi's 'x,y,z' (or a list): (x, y) in metres; z is dropped (vemu's plane
    is two-dimensional)."""
    if pos is None:
        return None
    parts = pos.split(',') if isinstance(pos, str) else list(pos)
    try:
        xs = [float(v) for v in parts]
    except ValueError:
        raise NotMapped('position %r: expected "x,y,z" in metres' % (pos,))
    if len(xs) < 2:
        raise NotMapped('position %r: expected "x,y,z" in metres' % (pos,))
    return xs[0], xs[1]


def path_loss_1m_db(freq_hz, system_loss=1.0):
    """Friis' loss at 1 m, as Mininet-WiFi rounds it."""
    lam = 299792458.0 / freq_hz
    return int(10 * math.log10((4 * math.pi) ** 2 * system_loss / lam ** 2))


def exponent(model, exp):
    return {'friis': 2.0, 'twoRayGround': 4.0}.get(model, float(exp))


def tx_power_for_range(range_m, freq_hz, model='logDistance', exp=3.0, gain_dbi=ANTENNA_GAIN_DBI,
                       noise_th=NOISE_TH_DBM, system_loss=1.0):
    """The transmit power (dBm) at which a node is heard down to ``noise_th`` at
    ``range_m`` by a receiver of the same gain: Mininet-WiFi's ``setRange``."""
    n = exponent(model, exp)
    pl = path_loss_1m_db(freq_hz, system_loss)
    return 10 * n * math.log10(float(range_m)) + pl + noise_th - 2 * float(gain_dbi)


def range_of(tx_dbm, freq_hz, model='logDistance', exp=3.0, gain_dbi=ANTENNA_GAIN_DBI,
             noise_th=NOISE_TH_DBM, system_loss=1.0):
    """The distance at which a node of ``tx_dbm`` is heard at ``noise_th``."""
    n = exponent(model, exp)
    pl = path_loss_1m_db(freq_hz, system_loss)
    return 10 ** ((float(tx_dbm) + 2 * float(gain_dbi) - pl - noise_th) / (10 * n))


class Member(object):
    """A radio of the network, as the script described it."""

    def __init__(self, node, iface, role, ip=None, mac=None, position=None, tx_dbm=None,
                 range_m=None, gain_dbi=None, ssid=None, isolation=False, bridge=False,
                 channel=None):
        self.node, self.iface, self.role = node, iface, role
        self.channel = channel
        self.ip, self.mac = ip, mac
        self.position = position
        self.tx_dbm, self.range_m, self.gain_dbi = tx_dbm, range_m, gain_dbi
        self.ssid, self.isolation, self.bridge = ssid, isolation, bridge


def segment(members, channel=1, mode='g', model='logDistance', exp=3.0, variance=2.0,
            system_loss=1.0, noise_th=NOISE_TH_DBM, mobility=None):
    """The ``wlan`` segment's keys for ``members`` (a list of :class:`Member`).
    ``mobility``: Mininet-WiFi's setMobilityModel arguments, or None."""
    if model not in MODELS:
        raise NotMapped('propagation model %r: vemu has logDistance, logNormalShadowing, '
                        'friis and twoRayGround' % (model,))
    freq = frequency_hz(channel)
    for m in members:
        if m.channel is not None and (frequency_hz(m.channel) > 3e9) != (freq > 3e9):
            raise NotMapped('%s on channel %s and the network on channel %s: vemu\'s '
                            'channel is one band (2.4 or 5 GHz)' % (m.node, m.channel, channel))
    seg = {
        'kind': 'wireless',
        'csma': True,
        'standard': standard(mode, channel),
        'rate_control': 'minstrel',
        'frequency': '%gMHz' % (freq / 1e6),
        'tx_power': '%gdBm' % TX_POWER_DBM,
        'rx_threshold': '%gdBm' % float(noise_th),
    }
    if model in ('logDistance', 'logNormalShadowing'):
        seg['propagation'] = 'log-distance'
        seg['exponent'] = float(exp)
        seg['reference_distance'] = '1m'
        seg['sigma'] = '%gdB' % (float(variance) if model == 'logNormalShadowing' else 0.0)
    elif model == 'friis':
        seg['propagation'] = 'free-space'
    else:
        seg['propagation'] = 'two-ray-ground'
    placed = [m.position for m in members if m.position]
    if mobility:
        name = mobility.get('model')
        if name not in MOBILITY:
            raise NotMapped('mobility model %r: vemu has %s' % (name, ', '.join(sorted(MOBILITY))))
        mx, my = float(mobility.get('max_x', 100)), float(mobility.get('max_y', 100))
        seg['area'] = '%gx%g' % (mx, my)
        lo, hi = float(mobility.get('min_v', 1)), float(mobility.get('max_v', 10))
        mob = {'model': MOBILITY[name], 'speed': '%g-%g' % (lo, max(lo, hi))}
        if name in ('RandomWayPoint', 'RandomDirection'):
            mob['pause'] = '%gs' % float(mobility.get('max_wt', mobility.get('min_wt', 0)) or 0)
        seg['mobility'] = mob
    out = []
    for i, m in enumerate(members):
        e = {'node': m.node, 'iface': m.iface}
        e['ip'] = [m.ip] if m.ip else 'none'
        if m.mac:
            e['mac'] = m.mac
        pos = m.position
        if pos is None and not mobility:
            # (Where the script gave none: beside the first placed radio, so that all
            # hear each other, as Mininet-WiFi's radios without positions do.)
            x, y = placed[0] if placed else (0.0, 0.0)
            pos = (x + 1.0 + i % 10, y + i // 10)
        if pos is not None:
            e['position'] = [pos[0], pos[1]]
        if mobility and (m.role == 'ap' or m.position is not None):
            e['mobility'] = 'static'
        e['channel'] = int(m.channel if m.channel is not None else channel)
        gain = ANTENNA_GAIN_DBI if m.gain_dbi is None else float(m.gain_dbi)
        tx = m.tx_dbm
        if m.range_m is not None:
            tx = tx_power_for_range(m.range_m, freq, model, exp, gain, noise_th, system_loss)
        if tx is not None:
            e['tx_power'] = '%.2fdBm' % float(tx)
        # (vemu's gain is the antenna's, on both ends of each frame, as Mininet-WiFi's.)
        e['antenna_gain'] = '%gdBi' % gain
        if m.role == 'ap':
            e['role'] = 'ap'
            e['ssid'] = m.ssid
            if m.isolation:
                e['isolation'] = True
            if m.bridge:
                e['bridge'] = True
        elif m.role == 'station':
            e['role'] = 'station'
            if m.ssid:
                e['ssid'] = m.ssid
        out.append(e)
    seg['members'] = out
    return seg


def moves(node, start_t, stop_t, start_pos, stop_pos, via=()):
    """Timeline events that take ``node`` to ``start_pos`` at ``start_t`` (s) and walk it
    (through ``via``) to ``stop_pos``, arriving at ``stop_t``."""
    if stop_t <= start_t:
        raise NotMapped('mobility of %s: it stops (%gs) before it starts (%gs)'
                        % (node, stop_t, start_t))
    points = [start_pos] + list(via) + [stop_pos]
    total = sum(math.hypot(b[0] - a[0], b[1] - a[1]) for a, b in zip(points, points[1:]))
    events = [{'at': '%gms' % round(start_t * 1000, 3), 'node': node,
               'move': [start_pos[0], start_pos[1]]}]
    if total == 0:
        return events
    speed = total / (stop_t - start_t)
    t = start_t
    for a, b in zip(points, points[1:]):
        d = math.hypot(b[0] - a[0], b[1] - a[1])
        if d == 0:
            continue
        events.append({'at': '%gms' % round(t * 1000, 3), 'node': node,
                       'move': {'to': [b[0], b[1]], 'speed': round(speed, 6)}})
        t += d / speed
    return events
