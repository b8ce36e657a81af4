//! LAN segments: learning, flooding, VLANs, ageing, port down, capacity, per-port
//! impairments.

use super::*;

#[test]
fn unknown_unicast_floods_then_learning_narrows_it() {
    let (mut s, p) = plain_lan(4);
    s.send(0, p[0], eth(mac(12), mac(10), 64, 1));
    s.finish();
    let mut got: Vec<PortId> = s.out.iter().map(|o| o.1).collect();
    got.sort();
    assert_eq!(got, vec![p[1], p[2], p[3]]);
    // Member 2 answers: the switch knows where both live now.
    s.out.clear();
    s.send(MS, p[2], eth(mac(10), mac(12), 64, 2));
    s.send(2 * MS, p[0], eth(mac(12), mac(10), 64, 3));
    s.finish();
    assert_eq!(s.arrivals(p[0]), vec![(MS, 2)]);
    assert_eq!(s.arrivals(p[2]), vec![(2 * MS, 3)]);
    assert_eq!(s.out.len(), 2);
    let seg = s.core.segment_counters(0).snapshot();
    assert_eq!((seg.flooded, seg.unicast), (1, 2));
}

#[test]
fn broadcast_reaches_every_other_port_never_the_sender() {
    let (mut s, p) = plain_lan(5);
    s.send(0, p[3], eth([0xff; 6], mac(13), 64, 7));
    s.finish();
    let mut got: Vec<PortId> = s.out.iter().map(|o| o.1).collect();
    got.sort();
    assert_eq!(got, vec![p[0], p[1], p[2], p[4]]);
}

#[test]
fn flooded_copies_share_one_buffer() {
    let (mut s, p) = plain_lan(6);
    s.send(0, p[0], eth([0xff; 6], mac(10), 64, 7));
    s.finish();
    assert_eq!(s.out.len(), 5);
    assert!(s.out.windows(2).all(|w| Arc::ptr_eq(&w[0].2, &w[1].2)));
}

#[test]
fn vlans_are_separate_broadcast_domains() {
    let (mut s, p) = lan(
        vec![(10, imp(), imp()), (10, imp(), imp()), (20, imp(), imp()), (20, imp(), imp())],
        None,
        300_000 * MS,
    );
    s.send(0, p[0], eth([0xff; 6], mac(10), 64, 1));
    s.send(0, p[2], eth([0xff; 6], mac(12), 64, 2));
    s.finish();
    assert_eq!(s.arrivals(p[1]), vec![(0, 1)]);
    assert_eq!(s.arrivals(p[3]), vec![(0, 2)]);
    assert_eq!(s.out.len(), 2);
}

#[test]
fn destination_on_the_ingress_port_is_filtered() {
    let (mut s, p) = plain_lan(3);
    s.send(0, p[0], eth(mac(20), mac(10), 64, 1)); // learn 10 on port 0
    s.send(MS, p[0], eth(mac(10), mac(11), 64, 2)); // to 10, from port 0 again
    s.finish();
    assert_eq!(s.core.segment_counters(0).snapshot().filtered, 1);
    assert!(s.arrivals(p[0]).is_empty());
}

#[test]
fn learned_addresses_age_out() {
    let (mut s, p) = lan((0..3).map(|_| (1, imp(), imp())).collect(), None, 10 * MS);
    s.send(0, p[1], eth(mac(10), mac(11), 64, 1)); // 11 lives on port 1
    s.send(5 * MS, p[0], eth(mac(11), mac(10), 64, 2));
    s.finish();
    assert_eq!(s.arrivals(p[2]).len(), 1, "only the first (unknown) frame flooded");
    s.send(30 * MS, p[0], eth(mac(11), mac(10), 64, 3));
    s.finish();
    assert_eq!(s.arrivals(p[2]).len(), 2, "11 was forgotten: flooded again");
}

#[test]
fn port_down_forgets_its_addresses_and_drops_carrier() {
    let (mut s, p) = plain_lan(3);
    s.send(0, p[1], eth([0xff; 6], mac(11), 64, 1));
    s.apply(Command::SetUp { target: Target::Member(0, 1), up: false });
    assert!(matches!(s.events.last(), Some(Event::Carrier { port, up: false }) if *port == p[1]));
    s.out.clear();
    s.send(MS, p[0], eth(mac(11), mac(10), 64, 2));
    s.send(MS, p[1], eth(mac(10), mac(11), 64, 3));
    s.finish();
    // Unknown again: flooded, but not to the port that is down; the down port sends nothing.
    assert_eq!(s.out.iter().map(|o| o.1).collect::<Vec<_>>(), vec![p[2]]);
    assert_eq!(s.stats(Target::Member(0, 1), 0).drop_down, 1);
}

#[test]
fn segment_capacity_is_shared_by_all_senders() {
    // 1000-byte frames on an 8 Mbit/s switch: 1 ms each, whoever sends.
    let (mut s, p) =
        lan((0..3).map(|_| (1, imp(), imp())).collect(), Some(8_000_000), 300_000 * MS);
    s.send(0, p[0], eth(mac(12), mac(10), 1000, 1));
    s.send(0, p[1], eth(mac(12), mac(11), 1000, 2));
    s.send(0, p[0], eth(mac(12), mac(10), 1000, 3));
    s.finish();
    assert_eq!(s.arrivals(p[2]), vec![(MS, 1), (2 * MS, 2), (3 * MS, 3)]);
}

#[test]
fn each_port_has_its_own_ingress_impairments() {
    let (mut s, p) = lan(
        vec![(1, imp(), imp()), (1, imp(), delay(5 * MS)), (1, imp(), delay(MS))],
        None,
        300_000 * MS,
    );
    s.send(0, p[0], eth([0xff; 6], mac(10), 64, 1));
    s.finish();
    assert_eq!(s.arrivals(p[1]), vec![(5 * MS, 1)]);
    assert_eq!(s.arrivals(p[2]), vec![(MS, 1)]);
}

#[test]
fn egress_impairments_act_before_the_switch() {
    let (mut s, p) = lan(
        vec![(1, delay(2 * MS), imp()), (1, imp(), delay(3 * MS)), (1, imp(), imp())],
        None,
        300_000 * MS,
    );
    s.send(0, p[0], eth([0xff; 6], mac(10), 64, 1));
    s.finish();
    assert_eq!(s.arrivals(p[1]), vec![(5 * MS, 1)]);
    assert_eq!(s.arrivals(p[2]), vec![(2 * MS, 1)]);
    let eg = s.stats(Target::Member(0, 0), 0);
    assert_eq!((eg.rx_frames, eg.tx_frames), (1, 1));
    assert_eq!(s.stats(Target::Member(0, 1), 1).tx_frames, 1);
}

#[test]
fn a_corrupting_port_gets_its_own_copy() {
    let (mut s, p) = lan(
        vec![
            (1, imp(), imp()),
            (
                1,
                imp(),
                Impairments { corrupt: Chance { probability: 1.0, correlation: 0.0 }, ..imp() },
            ),
            (1, imp(), imp()),
            (1, imp(), imp()),
        ],
        None,
        300_000 * MS,
    );
    let f = eth([0xff; 6], mac(10), 64, 1);
    s.send(0, p[0], f.clone());
    s.finish();
    let of = |port| s.out.iter().find(|o| o.1 == port).unwrap().2.clone();
    assert!(Arc::ptr_eq(&of(p[2]), &of(p[3])));
    assert_eq!(**of(p[2]), f);
    assert_ne!(**of(p[1]), f);
}

#[test]
fn lan_port_patch_changes_one_direction() {
    let (mut s, p) = plain_lan(2);
    s.apply(Command::Patch {
        target: Target::Member(0, 1),
        dir: 1,
        patch: ImpairmentsPatch { delay_ns: Some(4 * MS), ..Default::default() },
    });
    s.send(0, p[0], eth([0xff; 6], mac(10), 64, 1));
    s.send(0, p[1], eth([0xff; 6], mac(11), 64, 2));
    s.finish();
    assert_eq!(s.arrivals(p[1]), vec![(4 * MS, 1)]);
    assert_eq!(s.arrivals(p[0]), vec![(0, 2)]);
}
