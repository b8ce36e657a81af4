//! Links and segments across machines: tunnels, underlay transit and loss, who
//! shapes, who switches, captures on the far side, arrival waits.

use super::*;

#[test]
fn a_link_across_machines_keeps_its_set_delay_the_underlay_transit_included() {
    let mut s = Split::new(delay(5 * MS), delay(2 * MS), 300 * US);
    s.machines[0].core.handle_frame(0, s.ports[0][0], udp(1514, 1));
    s.machines[1].core.handle_frame(10 * US, s.ports[1][1], udp(200, 2));
    s.run_until(20 * MS);
    // Full-size frames cross in two datagrams and are made whole.
    assert_eq!(s.delivered[1], vec![(5 * MS, 1)]);
    assert_eq!(s.delivered[0], vec![(10 * US + 2 * MS, 2)]);
    // Each direction is counted once, by the machine that carries it out: the sums of
    // both machines' counters are the link's.
    let fwd: Vec<_> = (0..2).map(|m| s.machines[m].stats(Target::Link(0), 0)).collect();
    assert_eq!(
        (fwd[0].rx_frames, fwd[0].tx_frames, fwd[1].rx_frames, fwd[1].tx_frames),
        (1, 1, 0, 0)
    );
    let rev: Vec<_> = (0..2).map(|m| s.machines[m].stats(Target::Link(0), 1)).collect();
    assert_eq!(
        (rev[0].rx_frames, rev[0].tx_frames, rev[1].rx_frames, rev[1].tx_frames),
        (0, 0, 1, 1)
    );
    // A cross-machine link never takes the kernel path.
    assert!(s.machines.iter().all(|m| m.events.iter().all(|e| !matches!(e, Event::Path { .. }))));
}

#[test]
fn frames_the_underlay_loses_are_counted_for_the_direction_they_were_going() {
    let mut s = Split::new(delay(MS), imp(), 100 * US);
    s.underlay_drops = vec![1, 2];
    for i in 0..5u32 {
        s.machines[0].core.handle_frame(u64::from(i) * 10 * US, s.ports[0][0], udp(300, i));
    }
    s.run_until(10 * MS);
    let got: Vec<u32> = s.delivered[1].iter().map(|d| d.1).collect();
    assert_eq!(got, [0, 3, 4]);
    // Counted by the receiving machine, for the direction from the far side (forward);
    // the model dropped nothing.
    assert_eq!(s.machines[1].stats(Target::Link(0), 0).underlay_lost, 2);
    assert_eq!(s.machines[1].stats(Target::Link(0), 1).underlay_lost, 0);
    assert_eq!(s.machines[0].stats(Target::Link(0), 0).drop_loss, 0);
}

#[test]
fn a_set_delay_below_the_underlay_transit_arrives_at_the_transit() {
    let mut s = Split::new(delay(100 * US), imp(), 300 * US);
    s.machines[0].core.handle_frame(MS, s.ports[0][0], udp(100, 7));
    s.run_until(5 * MS);
    assert_eq!(s.delivered[1], vec![(MS + 300 * US, 7)]);
}

#[test]
fn rate_and_loss_of_a_cross_machine_link_are_the_senders() {
    // 10 Mbit/s: a 1250-byte frame takes 1 ms on the wire; every other frame lost.
    let lossy = Impairments {
        rate_bps: Some(10_000_000),
        loss: Loss::Bernoulli { rate: 0.5, correlation: 0.0 },
        ..imp()
    };
    let mut s = Split::new(lossy, imp(), 200 * US);
    for i in 0..200 {
        s.machines[0].core.handle_frame(0, s.ports[0][0], udp(1250, i));
    }
    s.run_until(1000 * MS);
    let got = &s.delivered[1];
    assert!((80..=120).contains(&got.len()), "{}", got.len());
    // Frames that survive keep the wire's spacing: at least 1 ms apart, in order.
    assert!(got.windows(2).all(|w| w[1].0 - w[0].0 >= MS && w[1].1 > w[0].1), "{got:?}");
    let st = s.machines[0].stats(Target::Link(0), 0);
    assert_eq!(st.drop_loss + st.tx_frames, 200);
    assert_eq!(st.tx_frames as usize, got.len());
}

#[test]
fn captures_on_the_receiving_machine_see_frames_from_the_other() {
    let mut s = Split::new(delay(MS), imp(), 100 * US);
    s.machines[1].apply(Command::Capture {
        id: 9,
        target: Target::Link(0),
        side: 1,
        iface: 0,
        point: CapturePoint::After,
    });
    s.machines[0].core.handle_frame(0, s.ports[0][0], udp(300, 3));
    s.run_until(5 * MS);
    s.machines[1].drain_events();
    let caps: Vec<u64> = s.machines[1]
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Capture { capture: 9, t_ns, outgoing: false, .. } => Some(*t_ns),
            _ => None,
        })
        .collect();
    assert_eq!(caps, vec![MS]);
    assert_eq!(s.delivered[1].len(), 1);
}

#[test]
fn a_lan_member_on_another_machine_has_its_egress_there_and_its_ingress_at_the_switch() {
    // The LAN's machine (the switch) holds members 0 and 1; member 2 is on another
    // machine, reached over an underlay of 100 us one way. There, the member's port is a
    // link whose forward direction is its egress and whose far side is the switch.
    let t = 100 * US;
    let mut owner = Core::new();
    let members = vec![
        MemberConfig { vlan: 1, ingress: delay(MS), seeds: [1, 2], ..Default::default() },
        MemberConfig { vlan: 1, seeds: [3, 4], ..Default::default() },
        MemberConfig {
            vlan: 1,
            egress: delay(2 * MS),
            ingress: delay(MS),
            seeds: [5, 6],
            remote: Some(t),
            ..Default::default()
        },
    ];
    let p = owner.add_segment(SegmentConfig {
        members,
        aging_ns: 300_000 * MS,
        kernel_path: true,
        ..Default::default()
    });
    let mut owner = Sim::new(owner);
    let mut far = Core::new();
    let [node, tunnel] = far.add_link(LinkConfig {
        forward: delay(2 * MS),
        reverse: delay(MS),
        seeds: [5, 6],
        mtu: 1500,
        kernel_path: false,
        kernel_shaper: false,
        remote: Some((1, t)),
        spur: None,
    });
    let mut far = Sim::new(far);
    // Member 2's node broadcasts at 0: its egress (2 ms) runs on its machine, which sends
    // the frame early by the underlay's delay, so that it reaches the switch at 2 ms.
    far.send(0, node, eth([0xff; 6], mac(3), 100, 1));
    far.run_until(5 * MS);
    let (left, port, frame) = far.out.remove(0);
    assert_eq!((left, port), (2 * MS - t, tunnel));
    owner.core.handle_delivered(left + t, p[2], frame.to_vec());
    owner.now = left + t;
    owner.run_until(10 * MS);
    let got: Vec<(u64, PortId, u32)> =
        owner.out.drain(..).map(|(at, port, f)| (at, port, seq_of(&f))).collect();
    assert_eq!(got, vec![(2 * MS, p[1], 1), (3 * MS, p[0], 1)]);
    // Member 0 broadcasts at 10 ms: member 2's ingress (1 ms) runs at the switch, whose
    // machine sends early by the underlay's delay; the far machine delivers on arrival.
    owner.send(10 * MS, p[0], eth([0xff; 6], mac(1), 100, 2));
    owner.run_until(20 * MS);
    let got: Vec<(u64, PortId, u32)> =
        owner.out.drain(..).map(|(at, port, f)| (at, port, seq_of(&f))).collect();
    assert_eq!(got, vec![(10 * MS, p[1], 2), (11 * MS - t, p[2], 2)]);
    // Each direction counted once, where it is carried out; no kernel path for a LAN
    // that spans machines.
    assert_eq!(
        (owner.stats(Target::Member(0, 2), 0).tx_frames, far.stats(Target::Link(0), 0).tx_frames),
        (0, 1)
    );
    assert_eq!(owner.stats(Target::Member(0, 2), 1).tx_frames, 1);
    assert!(owner.events.iter().all(|e| !matches!(e, Event::Path { .. })));
    // The measured transit is the new lead.
    owner.core.set_transit(p[2], 40 * US);
    owner.send(30 * MS, p[1], eth([0xff; 6], mac(2), 100, 3));
    owner.run_until(40 * MS);
    assert_eq!(owner.out.iter().find(|o| o.1 == p[2]).map(|o| o.0), Some(31 * MS - 40 * US));
    assert_eq!(owner.stats(Target::Member(0, 2), 1).transit_ns, 40 * US);
}

#[test]
fn a_flooded_frame_crosses_to_another_machine_once_and_each_member_there_has_its_own_ingress() {
    let t = 100 * US;
    let mut s = Trunked::new([delay(MS), delay(3 * MS)], None, t);
    s.owner.send(0, s.ports[0], eth([0xff; 6], mac(1), 100, 7));
    let (local, copies) = s.run_until(10 * MS, t);
    assert_eq!(local, vec![(0, s.ports[1], 7)]);
    // One copy for both members of the far machine, leaving early by the transit; each
    // member's ingress (1 ms, 3 ms) runs there, from the frame's time at the switch.
    assert_eq!(copies, 1);
    assert_eq!(s.far_out(), vec![(MS, s.nodes[0][0], 7), (3 * MS, s.nodes[1][0], 7)]);
    // Counted once: the far machine's reverse directions, not the owner's ingress.
    assert_eq!(
        (
            s.far.stats(Target::Link(0), 1).tx_frames,
            s.owner.stats(Target::Member(0, 2), 1).tx_frames
        ),
        (1, 0)
    );
    // A unicast to member 3 (learnt) goes to it alone, still through the trunk.
    s.far.send(10 * MS, s.nodes[1][0], eth(mac(1), mac(4), 100, 8));
    s.far.run_until(11 * MS);
    let (at, _, f) = s.far.out.remove(0);
    s.owner.core.handle_delivered(at + t, s.ports[3], f.to_vec());
    s.owner.now = at + t;
    let (local, _) = s.run_until(12 * MS, t);
    // (No egress delay to hide the underlay's: it arrives after the transit.)
    assert_eq!(local, vec![(10 * MS + t, s.ports[0], 8)]);
    s.owner.send(20 * MS, s.ports[0], eth(mac(4), mac(1), 100, 9));
    let (local, copies) = s.run_until(30 * MS, t);
    assert!(local.is_empty() && copies == 1);
    assert_eq!(s.far_out(), vec![(23 * MS, s.nodes[1][0], 9)]);
    // A copy naming nobody, or cut short, is dropped whole.
    for bad in [eth([0xff; 6], mac(1), 100, 1), vec![0xff; 3]] {
        s.far.core.handle_delivered(40 * MS, s.trunk_in, bad);
    }
    s.far.run_until(50 * MS);
    assert!(s.far_out().is_empty());
}

#[test]
fn members_on_another_machine_are_switched_among_themselves_there() {
    let t = 100 * US;
    let spur = Spur { segment: 0, vlan: 1, aging_ns: 50 * MS };
    let mut s = Trunked::with([delay(MS), delay(MS)], delay(2 * MS), None, t, Some(spur));
    let to_owner = |s: &mut Trunked| -> Vec<(u64, PortId, Vec<u8>)> {
        let tunnels = [s.nodes[0][1], s.nodes[1][1]];
        let (sent, rest): (Vec<_>, Vec<_>) =
            s.far.out.drain(..).partition(|o| tunnels.contains(&o.1));
        s.far.out = rest;
        sent.into_iter().map(|(at, port, f)| (at, port, f.to_vec())).collect()
    };
    let seqs = |v: &[(u64, PortId, Vec<u8>)]| v.iter().map(|o| seq_of(&o.2)).collect::<Vec<_>>();
    // Member 2 (MAC 3) broadcasts: member 3, on the same machine, gets it there (2 ms of
    // egress to the switch's time, 1 ms of ingress); the switch gets it early by the
    // underlay's delay, hands it to members 0 and 1, and sends nothing back.
    s.far.send(0, s.nodes[0][0], eth([0xff; 6], mac(3), 100, 1));
    s.far.run_until(2 * MS - t);
    let sent = to_owner(&mut s);
    assert_eq!(
        sent.iter().map(|o| (o.0, o.1, seq_of(&o.2))).collect::<Vec<_>>(),
        vec![(2 * MS - t, s.nodes[0][1], 1)]
    );
    s.owner.core.handle_delivered(2 * MS, s.ports[2], sent[0].2.clone());
    s.owner.now = 2 * MS;
    let (local, copies) = s.run_until(10 * MS, t);
    assert_eq!((local, copies), (vec![(2 * MS, s.ports[0], 1), (2 * MS, s.ports[1], 1)], 0));
    assert_eq!(s.far_out(), vec![(3 * MS, s.nodes[1][0], 1)]);
    // Counted once each way: member 2's egress (its copy to the switch), member 3's ingress.
    assert_eq!(
        (s.far.stats(Target::Link(0), 0).tx_frames, s.far.stats(Target::Link(1), 1).tx_frames),
        (1, 1)
    );
    // Member 3 answers member 2: switched there; nothing to the switch.
    s.far.send(10 * MS, s.nodes[1][0], eth(mac(3), mac(4), 100, 2));
    s.far.run_until(20 * MS);
    assert!(to_owner(&mut s).is_empty());
    assert_eq!(s.far_out(), vec![(13 * MS, s.nodes[0][0], 2)]);
    assert_eq!(
        (s.far.stats(Target::Link(1), 0).tx_frames, s.far.stats(Target::Link(0), 1).tx_frames),
        (1, 1)
    );
    // And back, to MAC 4, learnt from the answer.
    s.far.send(20 * MS, s.nodes[0][0], eth(mac(4), mac(3), 100, 3));
    s.far.run_until(30 * MS);
    assert!(to_owner(&mut s).is_empty());
    assert_eq!(s.far_out(), vec![(23 * MS, s.nodes[1][0], 3)]);
    // To an unknown address (MAC 1, member 0's): member 3 and the switch, which floods
    // it to its own machine's members only (member 0 has not sent yet).
    s.far.send(30 * MS, s.nodes[0][0], eth(mac(1), mac(3), 100, 4));
    s.far.run_until(32 * MS - t);
    let sent = to_owner(&mut s);
    assert_eq!(seqs(&sent), vec![4]);
    s.owner.core.handle_delivered(32 * MS, s.ports[2], sent[0].2.clone());
    s.owner.now = 32 * MS;
    let (local, copies) = s.run_until(34 * MS, t);
    assert_eq!((local, copies), (vec![(32 * MS, s.ports[0], 4), (32 * MS, s.ports[1], 4)], 0));
    assert_eq!(s.far_out(), vec![(33 * MS, s.nodes[1][0], 4)]);
    // Member 0 answers: through the trunk to member 2; its machine learns MAC 1 is
    // elsewhere, and the next frame to it goes to the switch alone.
    s.owner.send(40 * MS, s.ports[0], eth(mac(3), mac(1), 100, 5));
    let (_, copies) = s.run_until(41 * MS, t);
    assert_eq!(copies, 1);
    assert_eq!(s.far_out(), vec![(41 * MS, s.nodes[0][0], 5)]);
    s.far.send(42 * MS, s.nodes[0][0], eth(mac(1), mac(3), 100, 6));
    s.far.run_until(45 * MS);
    assert_eq!(seqs(&to_owner(&mut s)), vec![6]);
    assert!(s.far_out().is_empty(), "not flooded to member 3");
    // Multicast goes to the switch alone (its snooping decides), which sends it back to
    // this machine's members too.
    s.far.send(50 * MS, s.nodes[0][0], eth([0x01, 0, 0x5e, 0, 0, 9], mac(3), 100, 7));
    s.far.run_until(52 * MS - t);
    let sent = to_owner(&mut s);
    assert_eq!(seqs(&sent), vec![7]);
    assert!(s.far_out().is_empty());
    s.owner.core.handle_delivered(52 * MS, s.ports[2], sent[0].2.clone());
    s.owner.now = 52 * MS;
    let (_, copies) = s.run_until(54 * MS, t);
    assert_eq!(copies, 1);
    assert_eq!(s.far_out(), vec![(53 * MS, s.nodes[1][0], 7)]);
    // ... and that copy (from MAC 3, which member 2 sent from lately) does not make MAC 3
    // "elsewhere": member 3 to MAC 3 stays on this machine.
    s.far.send(60 * MS, s.nodes[1][0], eth(mac(3), mac(4), 100, 8));
    s.far.run_until(70 * MS);
    assert!(to_owner(&mut s).is_empty());
    assert_eq!(s.far_out(), vec![(63 * MS, s.nodes[0][0], 8)]);
    // The switch hands member 2 a frame from MAC 4 (it moved to member 0): elsewhere now.
    s.owner.send(70 * MS, s.ports[0], eth([0xff; 6], mac(4), 100, 9));
    let (_, copies) = s.run_until(80 * MS, t);
    assert_eq!(copies, 1);
    s.far_out();
    s.far.send(80 * MS, s.nodes[0][0], eth(mac(4), mac(3), 100, 10));
    s.far.run_until(85 * MS);
    assert_eq!(seqs(&to_owner(&mut s)), vec![10]);
    assert!(s.far_out().is_empty());
    // An address not heard from for the aging time is unknown again: flooded.
    s.far.send(200 * MS, s.nodes[1][0], eth(mac(3), mac(4), 100, 11));
    s.far.run_until(210 * MS);
    assert_eq!(seqs(&to_owner(&mut s)), vec![11]);
    assert_eq!(s.far_out(), vec![(203 * MS, s.nodes[0][0], 11)]);
}

/// A member sending from ever new source addresses does not grow its machine's table
/// without end: past the bound new addresses are not learnt, and frames to them go
/// everywhere (the other members there and the segment's switch), as on a full switch.
#[test]
fn members_on_another_machine_learn_a_bounded_number_of_addresses() {
    let t = 100 * US;
    let spur = Spur { segment: 0, vlan: 1, aging_ns: 300_000 * MS };
    let mut s = Trunked::with([imp(), imp()], imp(), None, t, Some(spur));
    for i in 0..(vemu_switch::DEFAULT_MAX_LEARNED as u32 + 100) {
        let src = [0x02, 0x10, (i >> 16) as u8, (i >> 8) as u8, i as u8, 1];
        s.far.send(u64::from(i) * US, s.nodes[0][0], eth([0xff; 6], src, 64, i));
    }
    s.far.run_until(20 * MS);
    s.far.out.clear();
    // MAC 4 (member 3) comes too late to be learnt: a frame to it floods.
    s.far.send(30 * MS, s.nodes[1][0], eth([0xff; 6], mac(4), 64, 1));
    s.far.send(31 * MS, s.nodes[0][0], eth(mac(4), mac(3), 64, 2));
    s.far.run_until(40 * MS);
    let to_2: Vec<u32> = s
        .far
        .out
        .iter()
        .filter(|o| o.1 == s.nodes[0][1] || o.1 == s.nodes[1][0])
        .map(|o| seq_of(&o.2))
        .collect();
    assert_eq!(
        to_2,
        vec![2, 2],
        "to the switch and to member 3 alike: {:?}",
        s.far.out.iter().map(|o| (o.1, seq_of(&o.2))).collect::<Vec<_>>()
    );
}

#[test]
fn a_radio_transmission_reaches_the_far_machines_receivers_in_one_copy_at_their_own_times() {
    let t = 50 * US;
    let cfg = MediumConfig {
        model: Model::UnitDisk { range_m: 2000.0 },
        radio: Radio::default(),
        rate_bps: 54_000_000,
        preamble_ns: 0,
        carrier_sense_m: 2000.0,
        csma: false,
        queue_frames: 100,
        seed: 3,
        dcf: None,
        city: None,
        hub: None,
    };
    // Members 2 and 3 at 300 m and 1500 m from member 0: 1 us and 5 us of propagation.
    let pos = vec![
        Pos::new(0.0, 0.0),
        Pos::new(3000.0, 0.0),
        Pos::new(299.792458, 0.0),
        Pos::new(1498.96229, 0.0),
    ];
    // (Ingress delays longer than the underlay's, which they hide.)
    let mut s = Trunked::new([delay(MS), delay(MS)], Some((cfg, pos)), t);
    s.owner.send(0, s.ports[0], eth([0xff; 6], mac(1), 100, 5));
    let (local, copies) = s.run_until(10 * MS, t);
    assert!(local.is_empty(), "member 1 is out of range: {local:?}");
    assert_eq!(copies, 1);
    let got = s.far_out();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!((got[0].1, got[1].1), (s.nodes[0][0], s.nodes[1][0]));
    assert_eq!(got[1].0 - got[0].0, 4 * US, "each receiver at its own propagation delay: {got:?}");
}

/// An access point on another machine than its channel: a station's association is
/// announced up the access point's node port there — 802.11f's update crosses the
/// trunk as the channel's frames to that access point do — before the station sent
/// anything, so that the wired side beyond learns where the station is at once.
#[test]
fn a_station_joining_an_access_point_on_another_machine_is_announced_there() {
    use vemu_radio::wifi::bss::{ApConfig, Role, StaConfig};
    use vemu_radio::wifi::phy::Standard;
    let roles = vec![
        Role::Station(StaConfig::new("lab")),
        Role::AdHoc,
        Role::Ap(ApConfig::new("lab")),
        Role::AdHoc,
    ];
    let cfg = MediumConfig::dcf_channel(Standard::G, Model::FreeSpace, roles, 4, 3);
    let pos = (0..4).map(|i| Pos::new(10.0 * f64::from(i), 0.0)).collect();
    let transit = 50 * US;
    let mut s = Trunked::new([imp(), imp()], Some((cfg, pos)), transit);
    s.run_until(300 * MS, transit);
    let updates: Vec<_> = s
        .far
        .out
        .iter()
        .filter(|o| o.2[VNET_HDR_LEN + 12..VNET_HDR_LEN + 20] == [0, 6, 0, 1, 0xaf, 0x81, 1, 0])
        .collect();
    assert_eq!(updates.len(), 1, "{:?}", s.far.out.iter().map(|o| o.1).collect::<Vec<_>>());
    assert_eq!(updates[0].1, s.nodes[0][0], "up member 2's (the access point's) node port");
    assert_eq!(updates[0].2[VNET_HDR_LEN..VNET_HDR_LEN + 6], [0xff; 6]);
    assert_eq!(updates[0].2[VNET_HDR_LEN + 6..VNET_HDR_LEN + 12], mac(40), "from the station");
    // (After the association, which takes an active scan of 30 ms and four frames.)
    assert!(updates[0].0 > 30 * MS && updates[0].0 < 60 * MS, "{}", updates[0].0);
}

#[test]
fn a_frame_from_another_machine_counts_its_wait_between_arrival_and_write() {
    // The far machine carried out the direction; this one hands the frame to the node
    // on arrival. An engine that writes it 3 ms after it arrived shows that wait in the
    // direction's arrival histogram (which the far machine cannot see); one on time, 0.
    let mut c = Core::new();
    let [node, tunnel] = c.add_link(LinkConfig {
        forward: delay(MS),
        reverse: delay(MS),
        seeds: [1, 2],
        mtu: 1500,
        kernel_path: false,
        kernel_shaper: false,
        remote: Some((1, 50 * US)),
        spur: None,
    });
    c.handle_delivered(5 * MS, node, eth(mac(1), mac(2), 100, 1));
    assert!(c.poll_transmit(5 * MS - 1).is_none());
    let tx = c.poll_transmit(8 * MS).expect("due since its arrival");
    assert_eq!((tx.port, seq_of(&tx.frame)), (node, 1));
    c.handle_delivered(9 * MS, node, eth(mac(1), mac(2), 100, 2));
    assert_eq!(c.poll_transmit(9 * MS).map(|t| t.port), Some(node));
    let toward_node = c.counters(Target::Link(0))[1].snapshot();
    let bucket =
        |ns: u64| vemu_core::counters::DELAY_BUCKETS_NS.iter().position(|&b| ns <= b).unwrap();
    let mut want = vec![0; vemu_core::counters::DELAY_BUCKETS_NS.len() + 1];
    want[bucket(3 * MS)] = 1;
    want[bucket(0)] = 1;
    assert_eq!((toward_node.arrival_wait_hist, toward_node.arrival_wait_max_ns), (want, 3 * MS));
    // Nothing of it on the direction this machine carries out (toward the tunnel), and
    // the frames are not counted as this machine's.
    let toward_far = c.counters(Target::Link(0))[0].snapshot();
    assert!(
        toward_far.arrival_wait_hist.is_empty()
            && toward_node.tx_frames == 0
            && toward_node.late_hist.iter().sum::<u64>() == 0
    );
    let _ = tunnel;
}

#[test]
fn a_link_to_another_machine_puts_only_its_direction_from_here_on_the_kernel_path() {
    // Side a here, side b on another machine (its port here is the tunnel's), with the
    // kernel's tunnel: the direction a -> b needs no emulation, so it goes by the kernel;
    // b -> a is the other machine's to decide and never gets a path here.
    let mut c = Core::new();
    let [node, tunnel] = c.add_link(LinkConfig {
        forward: imp(),
        reverse: delay(MS),
        seeds: [1, 2],
        mtu: 1500,
        kernel_path: true,
        kernel_shaper: true,
        remote: Some((1, 50 * US)),
        spur: None,
    });
    let mut s = Sim::new(c);
    s.drain_events();
    assert_eq!(full_paths(&s), vec![(node, Path::Kernel)]);
    // (Its counters say "kernel" once the driver sends it there: when the underlay's
    // path carries its frames whole.)
    assert!(!s.stats(Target::Link(0), 0).kernel_path && !s.stats(Target::Link(0), 1).kernel_path);
    s.core.set_kernel_carried(node, true);
    assert!(s.stats(Target::Link(0), 0).kernel_path && !s.stats(Target::Link(0), 1).kernel_path);
    // A rate: the engine's (the kernel's token bucket is not on the way to another
    // machine); taken off: the kernel's again.
    s.apply(Command::Patch {
        target: Target::Link(0),
        dir: 0,
        patch: ImpairmentsPatch { rate_bps: Some(Some(80_000_000)), ..Default::default() },
    });
    s.apply(Command::Patch {
        target: Target::Link(0),
        dir: 0,
        patch: ImpairmentsPatch { rate_bps: Some(None), ..Default::default() },
    });
    assert_eq!(
        full_paths(&s),
        vec![(node, Path::Kernel), (node, Path::Engine), (node, Path::Kernel)]
    );
    // A capture of the far end (what arrives at b is recorded on b's machine; here it
    // only keeps a -> b off the kernel path, and records nothing arriving there).
    s.apply(Command::Capture {
        id: 7,
        target: Target::Link(0),
        side: 1,
        iface: 0,
        point: CapturePoint::After,
    });
    assert_eq!(full_paths(&s).last(), Some(&(node, Path::Engine)));
    s.send(MS, node, eth(mac(2), mac(1), 100, 1));
    s.run_until(3 * MS);
    assert_eq!(s.out.iter().map(|o| o.1).collect::<Vec<_>>(), vec![tunnel]);
    assert!(
        !s.events.iter().any(|e| matches!(e, Event::Capture { outgoing: false, .. })),
        "{:?}",
        s.events
    );
    s.apply(Command::Uncapture(7));
    assert_eq!(full_paths(&s).last(), Some(&(node, Path::Kernel)));
    assert!(full_paths(&s).iter().all(|&(p, _)| p == node));
}
