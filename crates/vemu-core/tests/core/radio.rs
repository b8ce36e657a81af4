//! The radio channel: range, turns on the air, carrier sense, hidden terminals,
//! movement, seeds.

use super::*;

#[test]
fn radio_reaches_members_in_range_only() {
    // 11 Mbit/s, 100-byte frame: 800 bits → 72727 ns of airtime.
    let (mut s, p) = radio(&[(0.0, 0.0), (200.0, 0.0), (400.0, 0.0)], false, 11_000_000);
    s.send(0, p[0], eth([0xff; 6], mac(10), 100, 1));
    s.finish();
    let airtime: u64 = 100 * 8 * 1_000_000_000 / 11_000_000;
    let d = s.arrivals(p[1]);
    assert_eq!(d.len(), 1);
    // Airtime, plus 200 m at the speed of light (667 ns).
    assert!((d[0].0 as i64 - airtime as i64 - 667).abs() <= 1, "{d:?}");
    assert!(s.arrivals(p[2]).is_empty(), "400 m is out of range");
    let seg = s.core.segment_counters(0).snapshot();
    assert_eq!(seg.air_frames, 1);
}

#[test]
fn radio_frames_of_one_sender_take_turns_on_the_air() {
    let (mut s, p) = radio(&[(0.0, 0.0), (0.0, 0.0)], false, 8_000_000);
    for i in 0..3 {
        s.send(0, p[0], eth([0xff; 6], mac(10), 1000, i)); // 1 ms of air each
    }
    s.finish();
    assert_eq!(s.times(p[1]), vec![MS, 2 * MS, 3 * MS]);
}

#[test]
fn radio_members_in_carrier_sense_range_share_the_air() {
    let (mut s, p) = radio(&[(0.0, 0.0), (10.0, 0.0), (5.0, 5.0)], false, 8_000_000);
    s.send(0, p[0], eth([0xff; 6], mac(10), 1000, 1));
    s.send(0, p[1], eth([0xff; 6], mac(11), 1000, 2));
    s.finish();
    let t = s.arrivals(p[2]);
    assert_eq!(t.len(), 2);
    assert!(t[1].0 >= t[0].0 + MS, "one after the other: {t:?}");
}

#[test]
fn moved_member_leaves_and_rejoins_range() {
    let (mut s, p) = radio(&[(0.0, 0.0), (100.0, 0.0)], false, 11_000_000);
    s.apply(Command::Positions {
        seg: 0,
        positions: vec![Pos::new(0.0, 0.0), Pos::new(1000.0, 0.0)],
    });
    s.send(0, p[0], eth([0xff; 6], mac(10), 100, 1));
    s.finish();
    assert!(s.arrivals(p[1]).is_empty());
    s.apply(Command::Positions {
        seg: 0,
        positions: vec![Pos::new(0.0, 0.0), Pos::new(50.0, 0.0)],
    });
    s.send(10 * MS, p[0], eth([0xff; 6], mac(10), 100, 2));
    s.finish();
    assert_eq!(s.arrivals(p[1]).len(), 1);
    let snap = s.core.radio(0, u64::MAX).unwrap();
    assert_eq!(snap.positions[1], Pos::new(50.0, 0.0));
    assert_eq!(snap.neighbours[0].len(), 1);
}

#[test]
fn radio_unicast_goes_to_the_learned_member_only() {
    let (mut s, p) = radio(&[(0.0, 0.0), (10.0, 0.0), (20.0, 0.0)], false, 11_000_000);
    s.send(0, p[2], eth([0xff; 6], mac(12), 100, 1)); // the channel learns 12 is member 2
    s.send(MS, p[0], eth(mac(12), mac(10), 100, 2));
    s.finish();
    assert_eq!(s.arrivals(p[2]).len(), 1);
    assert_eq!(s.arrivals(p[1]).iter().filter(|a| a.1 == 2).count(), 0);
}

#[test]
fn hidden_terminals_collide_under_csma() {
    let (mut s, p) = hidden_terminals();
    for i in 0..50 {
        s.send(0, p[0], eth(mac(11), mac(10), 250, i));
        s.send(0, p[2], eth(mac(11), mac(12), 250, 1000 + i));
    }
    s.finish();
    let snap = s.core.radio(0, u64::MAX).unwrap();
    let collided: u64 = snap.pairs.iter().map(|p| p.2.lost_collision).sum();
    let delivered = s.arrivals(p[1]).len() as u64;
    assert!(collided > 20, "collided {collided}");
    assert!(delivered + collided <= 100);
}

#[test]
fn radio_member_down_neither_sends_nor_receives() {
    let (mut s, p) = radio(&[(0.0, 0.0), (10.0, 0.0), (20.0, 0.0)], false, 11_000_000);
    s.apply(Command::SetUp { target: Target::Member(0, 2), up: false });
    s.send(0, p[0], eth([0xff; 6], mac(10), 100, 1));
    s.send(0, p[2], eth([0xff; 6], mac(12), 100, 2));
    s.finish();
    assert_eq!(s.arrivals(p[1]).iter().map(|a| a.1).collect::<Vec<_>>(), vec![1]);
    assert!(s.arrivals(p[2]).is_empty());
}

#[test]
fn radio_decisions_repeat_with_the_seed() {
    let model = Model::LogDistance { exponent: 3.0, d0_m: 1.0, sigma_db: 6.0 };
    let run = |seed: u64| {
        let (mut s, p) = radio_with(
            &[(0.0, 0.0), (60.0, 0.0), (120.0, 0.0)],
            model,
            false,
            11_000_000,
            seed,
            550.0,
        );
        for i in 0..300 {
            s.send(i as u64 * MS, p[0], eth([0xff; 6], mac(10), 100, i));
        }
        s.finish();
        (s.arrivals(p[1]), s.arrivals(p[2]))
    };
    let (a, b) = run(5);
    assert_eq!((a.clone(), b.clone()), run(5));
    assert_ne!((a.clone(), b.clone()), run(6));
    assert!(
        !a.is_empty() && a.len() < 300 || !b.is_empty() && b.len() < 300,
        "some but not all delivered"
    );
}

#[test]
fn routing_frames_on_the_air_are_counted() {
    let (mut s, p) = radio(&[(0.0, 0.0), (10.0, 0.0)], false, 11_000_000);
    s.send(0, p[0], ipv4_udp(6696)); // babel
    s.send(0, p[0], ipv4_udp(5001)); // data
    s.finish();
    let seg = s.core.segment_counters(0).snapshot();
    assert_eq!((seg.air_frames, seg.routing_frames), (2, 1));
}

/// An 802.11 channel (`csma: true`, the DCF) of two stations 10 m apart, 802.11b.
fn dcf_pair() -> (Sim, Vec<PortId>) {
    use vemu_radio::wifi::dcf::{DcfConfig, DcfSetup, StationConfig};
    use vemu_radio::wifi::phy::{Standard, Timing};
    let mut core = Core::new();
    let cfg = MediumConfig {
        model: Model::FreeSpace,
        radio: Radio::default(),
        rate_bps: 11_000_000,
        preamble_ns: 0,
        carrier_sense_m: 250.0,
        csma: true,
        queue_frames: 1000,
        seed: 5,
        dcf: Some(Box::new(DcfSetup {
            config: DcfConfig::preset(Timing::preset(Standard::B), Model::FreeSpace, 5),
            stations: vec![StationConfig::default(); 2],
            roles: Vec::new(),
        })),
        city: None,
        hub: None,
    };
    let members =
        (0..2).map(|i| MemberConfig { vlan: 1, seeds: [i, 100 + i], ..Default::default() });
    let ports = core.add_segment(SegmentConfig {
        members: members.collect(),
        aging_ns: 300_000 * MS,
        radio: Some((cfg, vec![Pos::new(0.0, 0.0), Pos::new(10.0, 0.0)])),
        ..Default::default()
    });
    (Sim::new(core), ports)
}

/// Fidelity of an 802.11 channel: each time the engine decides the medium it counts how
/// long after the earliest slot then due it came (`decide_late_hist`). A driver on time
/// decides every slot at its time; one that comes 3 ms late says so.
#[test]
fn a_channel_decided_after_its_slot_counts_the_lateness() {
    let (mut s, p) = dcf_pair();
    s.send(0, p[0], eth(mac(11), mac(10), 500, 1));
    s.finish();
    assert_eq!(s.arrivals(p[1]).len(), 1);
    let seg = s.core.segment_counters(0).snapshot();
    let decisions: u64 = seg.decide_late_hist.iter().sum();
    assert!(decisions > 0 && decisions == seg.decide_late_hist[0], "{seg:?}");
    assert_eq!(seg.decide_late_max_ns, 0);

    let (mut s, p) = dcf_pair();
    s.core.handle_frame(0, p[0], eth(mac(11), mac(10), 500, 1));
    // The driver comes back 3 ms after the frame was offered (its DIFS long past).
    s.now = 3 * MS;
    s.step();
    s.finish();
    assert_eq!(s.arrivals(p[1]).len(), 1, "decided late, but decided");
    let seg = s.core.segment_counters(0).snapshot();
    let bucket = vemu_core::counters::delay_bucket(seg.decide_late_max_ns);
    assert!(seg.decide_late_max_ns > 2 * MS && seg.decide_late_max_ns <= 3 * MS, "{seg:?}");
    assert_eq!(seg.decide_late_hist[bucket], 1, "{seg:?}");
}

/// An 802.11g channel in infrastructure mode: access points 0 and 1 (800 m apart) of
/// one SSID and a station (2) beside the first.
fn two_bss() -> (Sim, Vec<PortId>) {
    two_bss_with(false)
}

/// The same, the core told each member's interface address (`mac(30 + member)`) or not.
fn two_bss_with(macs: bool) -> (Sim, Vec<PortId>) {
    use vemu_radio::wifi::bss::{ApConfig, Role, StaConfig};
    use vemu_radio::wifi::phy::Standard;
    let mut core = Core::new();
    let ap = || Role::Ap(ApConfig::new("lab"));
    let roles = vec![ap(), ap(), Role::Station(StaConfig::new("lab"))];
    let mut cfg = MediumConfig::dcf_channel(Standard::G, Model::FreeSpace, roles, 3, 5);
    cfg.queue_frames = 1000;
    let members = (0..3u8).map(|i| MemberConfig {
        vlan: 1,
        seeds: [u64::from(i), 100 + u64::from(i)],
        mac: macs.then(|| mac(30 + i)),
        ..Default::default()
    });
    let pos = vec![Pos::new(0.0, 0.0), Pos::new(800.0, 0.0), Pos::new(20.0, 0.0)];
    let ports = core.add_segment(SegmentConfig {
        members: members.collect(),
        aging_ns: 300_000 * MS,
        radio: Some((cfg, pos)),
        ..Default::default()
    });
    (Sim::new(core), ports)
}

/// A station that roams is announced up its new access point's port as 802.11f's
/// Layer 2 Update (a broadcast XID frame from its address), so that the bridge behind
/// that access point learns where it is; a bridge flooding the station's frames back
/// on the air does not take its address from it.
#[test]
fn a_roaming_station_is_announced_up_its_new_access_point() {
    let (mut s, p) = two_bss();
    s.run_until(300 * MS);
    // The station sends (to its access point's node): the channel learns its address.
    s.send(300 * MS, p[2], eth(mac(20), mac(12), 200, 1));
    s.run_until(400 * MS);
    assert_eq!(s.arrivals(p[0]), [(s.arrivals(p[0])[0].0, 1)]);
    // Access point 1's bridge floods a frame from the station on the air (as a bridge
    // joined to the first access point's wired side does): the address stays the
    // station's.
    s.send(400 * MS, p[1], eth([0xff; 6], mac(12), 200, 2));
    s.run_until(500 * MS);
    let before = s.out.len();
    // It walks to access point 1 and roams (scans every second while weak).
    s.apply(Command::Positions {
        seg: 0,
        positions: vec![Pos::new(0.0, 0.0), Pos::new(800.0, 0.0), Pos::new(780.0, 0.0)],
    });
    s.run_until(4_000 * MS);
    let updates: Vec<_> = s.out[before..]
        .iter()
        .filter(|o| o.2[VNET_HDR_LEN..VNET_HDR_LEN + 6] == [0xff; 6])
        .filter(|o| o.2[VNET_HDR_LEN + 12..VNET_HDR_LEN + 20] == [0, 6, 0, 1, 0xaf, 0x81, 1, 0])
        .collect();
    assert_eq!(updates.len(), 1, "{:?}", s.out[before..].iter().map(|o| o.1).collect::<Vec<_>>());
    assert_eq!(updates[0].1, p[1]);
    assert_eq!(updates[0].2[VNET_HDR_LEN + 6..VNET_HDR_LEN + 12], mac(12));
    assert_eq!(updates[0].2.len(), VNET_HDR_LEN + 60);
    // A frame for the station from its new access point reaches it (its address was
    // not taken by the flood).
    s.send(4_000 * MS, p[1], eth(mac(12), mac(21), 200, 3));
    s.run_until(4_100 * MS);
    assert!(s.arrivals(p[2]).iter().any(|a| a.1 == 3), "{:?}", s.arrivals(p[2]));
}

/// A capture of an access point's radio shows infrastructure mode's management frames
/// as 802.11 frames: its beacons (with its SSID, from its own address), the station's
/// probe request, and the authentication and association that follow.
#[test]
fn management_frames_reach_the_radio_captures() {
    let (mut s, _) = two_bss();
    s.apply(Command::Capture {
        id: 1,
        target: Target::Member(0, 0),
        side: 0,
        iface: 7,
        point: CapturePoint::Radio,
    });
    s.run_until(300 * MS);
    let frames: Vec<Vec<u8>> = s
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Capture { capture: 1, frame, .. } => {
                let f = &frame[VNET_HDR_LEN..];
                let rt = u16::from_le_bytes([f[2], f[3]]) as usize;
                Some(f[rt..].to_vec())
            }
            _ => None,
        })
        .collect();
    let subtypes: Vec<u8> = frames.iter().map(|w| w[0]).collect();
    // Beacons (0x80) every 102.4 ms: 3 in 300 ms; probe request (0x40) and response
    // (0x50); authentication (0xb0) both ways; association request (0x00) and
    // response (0x10); and the ACKs (0xd4) of the unicast ones.
    assert!(subtypes.iter().filter(|&&t| t == 0x80).count() >= 2, "{subtypes:x?}");
    for t in [0x40, 0x50, 0xb0, 0x00, 0x10, 0xd4] {
        assert!(subtypes.contains(&t), "{t:x} missing in {subtypes:x?}");
    }
    let beacon = frames.iter().find(|w| w[0] == 0x80).unwrap();
    assert_eq!(&beacon[4..10], &[0xff; 6]);
    assert_eq!(beacon[10..16], beacon[16..22], "sent by its BSSID");
    assert_eq!(&beacon[24 + 12..24 + 17], &[0, 3, b'l', b'a', b'b']);
}

/// A station whose interface address the core was told is announced on its first
/// association, before it sent anything.
#[test]
fn a_station_is_announced_by_its_interface_address_before_it_sends() {
    let (mut s, p) = two_bss_with(true);
    s.run_until(300 * MS);
    let update = s
        .out
        .iter()
        .find(|o| o.2[VNET_HDR_LEN + 12..VNET_HDR_LEN + 20] == [0, 6, 0, 1, 0xaf, 0x81, 1, 0]);
    let update = update.expect("an 802.11f update");
    assert_eq!(update.1, p[0]);
    assert_eq!(update.2[VNET_HDR_LEN + 6..VNET_HDR_LEN + 12], mac(32));
}
