"""vemu.mn_wifi: Mininet-WiFi's API on vemu's own 802.11 channel — the radio planner
without a lab, and Mininet-WiFi's own examples run unmodified by `vemu mininet` (root)
on this machine, which has no mac80211_hwsim."""

import glob
import math
import os
import subprocess

import pytest

from vemu.mn_wifi import _radio
from vemu.mn_wifi.link import ITSLink, adhoc, mesh, wmediumd  # noqa: F401 (the names)
from vemu.mn_wifi.net import Mininet_wifi
from vemu.mininet.node import NotEmulated

VEMU = os.environ["VEMU"]
HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "mn_wifi_examples")
root = pytest.mark.skipif(os.geteuid() != 0, reason="labs need root")


# --- the radio planner, without a lab ---------------------------------------------------


def test_ranges_and_powers_are_mininet_wifis():
    # Mininet-WiFi's default radio (14 dBm, 5 dBi, channel 1, logDistance exp 3, heard
    # down to -91 dBm): 316 m; exp 5 (its handover example): 31.6 m.
    f = _radio.frequency_hz(1)
    assert f == 2.412e9 and _radio.frequency_hz(36) == 5.18e9
    assert abs(_radio.range_of(14, f, exp=3) - 316.2) < 0.1
    assert abs(_radio.range_of(14, f, exp=5) - 31.62) < 0.01
    # setRange: the power that gives that range, and back.
    for r in (10.0, 33.0, 250.0):
        tx = _radio.tx_power_for_range(r, f, 'logDistance', 4)
        assert abs(_radio.range_of(tx, f, 'logDistance', 4) - r) < 1e-6
    assert _radio.standard('n', 1) == '802.11g' and _radio.standard('a', 36) == '802.11a'
    with pytest.raises(_radio.NotMapped, match="channel 200"):
        _radio.frequency_hz(200)


def test_a_network_becomes_one_segment_of_access_points_and_stations():
    m = _radio.Member
    members = [
        m('ap1', 'ap1-wlan1', 'ap', position=(50, 50), ssid='lab', isolation=True, bridge=True),
        m('sta1', 'sta1-wlan0', 'station', ip='10.0.0.1/8', position=(30, 60), ssid='lab',
          range_m=40),
        m('sta2', 'sta2-wlan0', 'station', ip='10.0.0.2/8'),
    ]
    seg = _radio.segment(members, channel=6, mode='g', model='logNormalShadowing', exp=4,
                         variance=3)
    assert (seg['csma'], seg['standard'], seg['frequency']) == (True, '802.11g', '2437MHz')
    assert (seg['propagation'], seg['exponent'], seg['sigma']) == ('log-distance', 4.0, '3dB')
    assert seg['rx_threshold'] == '-91dBm'
    ap, s1, s2 = seg['members']
    assert (ap['role'], ap['ssid'], ap['isolation'], ap['bridge'], ap['ip']) == ('ap', 'lab', True, True, 'none')
    assert (s1['role'], s1['ssid'], s1['ip']) == ('station', 'lab', ['10.0.0.1/8'])
    # Its range as the power that reaches -91 dBm at 40 m (5 dBi each end).
    tx = float(s1['tx_power'][:-3])
    assert abs(_radio.range_of(tx, 2.437e9, 'logDistance', 4) - 40) < 0.01
    # A station without a link to an access point joins any; one without a position is
    # placed beside the first placed radio.
    assert 'ssid' not in s2 and s2['position'] == [53.0, 50]
    # Every radio on the network's channel but access points given their own: a
    # second access point on channel 11 stays there, the stations start on 6 and scan.
    assert [e['channel'] for e in seg['members']] == [6, 6, 6]
    seg = _radio.segment(members + [m('ap2', 'ap2-wlan1', 'ap', ssid='lab', channel='11')],
                         channel=6)
    assert [e['channel'] for e in seg['members']] == [6, 6, 6, 11]
    with pytest.raises(_radio.NotMapped, match="ap5 on channel 36 .* one band"):
        _radio.segment(members + [m('ap5', 'ap5-wlan1', 'ap', ssid='lab', channel=36)],
                       channel=6)
    with pytest.raises(_radio.NotMapped, match="ITU"):
        _radio.segment(members, model='ITU')
    # A mobility model: the area, speeds and pause; access points stay.
    seg = _radio.segment(members, mobility={'model': 'RandomWayPoint', 'max_x': 100,
                                            'max_y': 80, 'min_v': 0.5, 'max_v': 2})
    assert seg['area'] == '100x80' and seg['mobility']['model'] == 'random-waypoint'
    assert seg['mobility']['speed'] == '0.5-2' and seg['members'][0]['mobility'] == 'static'
    with pytest.raises(_radio.NotMapped, match="mobility model 'TimeVariantCommunity'"):
        _radio.segment(members, mobility={'model': 'TimeVariantCommunity'})


def test_mobility_start_and_stop_become_timeline_moves():
    ev = _radio.moves('sta1', 1, 10, (10, 30), (60, 30))
    assert ev[0] == {'at': '1000ms', 'node': 'sta1', 'move': [10, 30]}
    assert ev[1]['move']['to'] == [60, 30]
    assert abs(ev[1]['move']['speed'] - 50 / 9) < 1e-6
    # Through waypoints: one speed, each leg starting when the last arrives.
    ev = _radio.moves('sta2', 0, 20, (0, 0), (0, 20), via=[(10, 0), (10, 20)])
    assert [e['at'] for e in ev] == ['0ms', '0ms', '5000ms', '15000ms']
    with pytest.raises(_radio.NotMapped, match="stops"):
        _radio.moves('sta1', 5, 2, (0, 0), (1, 1))


def test_what_cannot_map_is_refused_with_its_reason():
    net = Mininet_wifi()
    sta = net.addStation('sta1')
    with pytest.raises(NotEmulated, match="802.11p"):
        net.addLink(sta, cls=ITSLink)
    with pytest.raises(NotEmulated, match="olsrd"):
        net.addLink(sta, cls=adhoc, ssid='x', proto='olsrd')
    with pytest.raises(NotEmulated, match="propagation model 'young'"):
        net.setPropagationModel(model='young')
    with pytest.raises(NotEmulated, match="Wi-Fi Direct"):
        Mininet_wifi(configWiFiDirect=True)
    with pytest.raises(NotEmulated, match="one radio"):
        net.addStation('sta2', wlans=2)
    # Names as Mininet-WiFi gives them.
    ap = net.addAccessPoint('ap1', ssid='s', position='1,2,0')
    assert sta.params['wlan'] == ['sta1-wlan0'] and sta.wintfs[0].name == 'sta1-wlan0'
    assert ap.wintfs[0].name == 'ap1-wlan1' and ap.position == [1.0, 2.0, 0.0]
    assert sta.IP() == '10.0.0.1'


def test_replayed_positions_are_scheduled_by_time_or_speed():
    from vemu.mn_wifi.replaying import ReplayingBandwidth, schedule
    net = Mininet_wifi()
    a = net.addStation('sta1', speed=4)
    b = net.addStation('sta2')
    c = net.addStation('sta3')
    a.p = ['1,0,0', '2,0,0', '3,0,0']
    b.p, b.time = ['5,5,0', '6,6,0'], [0.3, 2]
    c.p = [(7, 7, 0)]
    got = [(t, n.name, p) for t, n, p in schedule([a, b, c])]
    assert got == [(0.25, 'sta1', '1,0,0'), (0.3, 'sta2', '5,5,0'), (0.5, 'sta1', '2,0,0'),
                   (0.75, 'sta1', '3,0,0'), (1.0, 'sta3', (7, 7, 0)), (2.0, 'sta2', '6,6,0')]
    with pytest.raises(NotEmulated, match="ReplayingBandwidth"):
        ReplayingBandwidth(net)


def test_a_wireless_topo_builds_its_stations_access_points_and_links():
    from vemu.mn_wifi.topo import LinearWirelessTopo, SingleAPTopo
    topo = LinearWirelessTopo(k=2, n=2)
    assert topo.aps() == ['ap1', 'ap2'] and len(topo.stations()) == 4 and topo.hosts() == []
    net = Mininet_wifi()
    net.buildFromTopo(topo)
    assert [s.name for s in net.stations] == ['sta1ap1', 'sta1ap2', 'sta2ap1', 'sta2ap2']
    assert net['sta1ap2'].ap is net['ap2'] and net['ap1'].ssid == 'ssid_ap1'
    plan = net.labPlan('t-topo').scenario
    assert [[e['node'] for e in l['endpoints']] for l in plan['links']] == [['ap2', 'ap1']], plan['links']
    roles = {m['node']: m['role'] for m in plan['segments']['wlan']['members']}
    assert roles == {'ap1': 'ap', 'ap2': 'ap', 'sta1ap1': 'station', 'sta1ap2': 'station',
                     'sta2ap1': 'station', 'sta2ap2': 'station'}, roles
    assert len(SingleAPTopo(k=3).stations()) == 3


# --- Mininet-WiFi's own examples, unmodified --------------------------------------------


def run(script, stdin, *args):
    return subprocess.run([VEMU, "mininet", os.path.join(EXAMPLES, script)] + list(args),
                          input=stdin, capture_output=True, text=True, timeout=300)


def wifi_log():
    logs = sorted(glob.glob('/var/log/vemu/mn-*/wifi.csv'), key=os.path.getmtime)
    return open(logs[-1]).read() if logs else ''


@root
def test_position_example_stations_reach_a_wired_host_through_the_bridging_ap():
    r = run("position.py", "sta1 ping -c1 -W2 h1\ndistance sta1 ap1\nposition sta2\npingall\n", "-p")
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "Traceback" not in out, out
    assert "1 received" in out, out
    assert "The distance between sta1 and ap1 is 22.36 meters" in out, out
    assert "sta2: 70,30,0" in out, out
    assert "*** Results: 0% dropped (6/6 received)" in out, out


@root
def test_handover_example_a_walking_station_roams_to_the_next_ap():
    # sta1 walks from (10,30) to (60,30) between t=1 s and 10 s: from ap1 (15,30) to ap2
    # (55,30), ranges 31.6 m (logDistance, exponent 5).
    r = run("handover.py", "py sta1.wintfs[0].associatedTo\npy 'ch%s' % sta1.wintfs[0].channel\n"
            "sh sleep 10.5\npy sta1.wintfs[0].associatedTo\npy 'ch%s' % sta1.wintfs[0].channel\n"
            "py sta1.position\nsta1 ping -c1 -W2 sta2\n", "-p")
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "Traceback" not in out, out
    assert out.index("ap1-wlan1") < out.index("ap2-wlan1"), out
    # ap1 is on channel 1, ap2 on 6: the station scanned both and moved its radio.
    assert out.index("ch1") < out.index("ap2-wlan1") < out.index("ch6"), out
    assert "[60.0, 30.0, 0.0]" in out, out
    # Through ap2, the wired link between the access points, and ap1.
    assert "1 received" in out, out
    log = wifi_log()
    assert ",roamed,sta1,ap2,ap1," in log, log


@root
def test_simplewifitopology_client_isolation_holds_and_openflow_is_said_not_run():
    r = run("simplewifitopology.py", "sta1 ping -c1 -W1 sta2\n")
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "Traceback" not in out, out
    assert "0 received" in out, out
    assert '"ovs-ofctl" not run' in out, out


@root
def test_adhoc_example_neighbours_reach_each_other_and_no_further():
    # 40 m apart with a 74.99 m range (exponent 4): sta2 hears both, sta1 and sta3 do not.
    r = run("adhoc.py", "pingall\n")
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "Traceback" not in out, out
    assert "sta1 -> sta2 X" in out and "sta2 -> sta1 sta3" in out, out
    assert math.isclose(_radio.range_of(14, 2.432e9, exp=4), 74.99, abs_tol=0.01)


REPLAY = """
from mininet.log import setLogLevel
from mn_wifi.net import Mininet_wifi
from mn_wifi.cli import CLI
from mn_wifi.replaying import ReplayingMobility

setLogLevel('info')
net = Mininet_wifi()
sta1 = net.addStation('sta1', position='10,10,0', speed=4)
sta2 = net.addStation('sta2', position='20,10,0')
ap1 = net.addAccessPoint('ap1', ssid='s', position='15,15,0')
net.configureNodes()
net.addLink(sta1, ap1)
net.addLink(sta2, ap1)
net.plotGraph(max_x=40, max_y=40)
net.build()
ap1.start([])
sta1.p = ['%d,10,0' % x for x in range(11, 19)]  # 8 positions, 4 a second: 2 s
sta2.p, sta2.time = ['20,20,0', '20,30,0'], [0.5, 1.0]
ReplayingMobility(net)
CLI(net)
net.stop()
"""


@root
def test_replayed_mobility_moves_stations_on_the_lab_and_plotgraph_draws_a_png(tmp_path):
    script = tmp_path / "replay.py"
    script.write_text(REPLAY)
    png = tmp_path / "plot.png"
    r = subprocess.run([VEMU, "mininet", str(script)], input="py sta1.position\nsh sleep 2.6\n"
                       "py sta1.position\npy sta2.position\nsta1 ping -c1 -W2 sta2\n",
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, VEMU_PLOT=str(png)))
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "Traceback" not in out, out
    # plotGraph drew the network into a PNG once the lab was up.
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "plotGraph: drawn to" in out, out
    assert "[10.0, 10.0, 0.0]" in out and "[18.0, 10.0, 0.0]" in out, out
    assert "[20.0, 30.0, 0.0]" in out, out
    assert "1 received" in out, out

