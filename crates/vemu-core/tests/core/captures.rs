//! Captures, and the bounded address table.

use super::*;

#[test]
fn capture_after_sees_what_leaves_and_arrives() {
    let (mut s, a, b) = link(delay(2 * MS), imp());
    s.apply(Command::Capture {
        id: 1,
        target: Target::Link(0),
        side: 1,
        iface: 0,
        point: CapturePoint::After,
    });
    s.apply(Command::Capture {
        id: 1,
        target: Target::Link(0),
        side: 0,
        iface: 1,
        point: CapturePoint::After,
    });
    s.send(0, a, udp(64, 5));
    s.send(MS, b, udp(64, 6));
    s.finish();
    let c = captures(&s);
    // a sends 5 at 0 (iface 1, outgoing), b sends 6 at 1 ms (iface 0, outgoing) and 6
    // arrives at a at 1 ms, 5 arrives at b at 2 ms.
    assert!(c.contains(&(1, 1, 0, true, 5)));
    assert!(c.contains(&(1, 0, MS, true, 6)));
    assert!(c.contains(&(1, 1, MS, false, 6)));
    assert!(c.contains(&(1, 0, 2 * MS, false, 5)));
    assert_eq!(c.len(), 4);
}

#[test]
fn capture_before_sees_frames_the_link_drops() {
    let (mut s, a, _b) =
        link(Impairments { loss: Loss::Bernoulli { rate: 1.0, correlation: 0.0 }, ..imp() }, imp());
    s.apply(Command::Capture {
        id: 3,
        target: Target::Link(0),
        side: 1,
        iface: 0,
        point: CapturePoint::Before,
    });
    s.send(0, a, udp(64, 1));
    s.finish();
    assert_eq!(captures(&s), vec![(3, 0, 0, false, 1)]);
    assert!(s.out.is_empty());
}

#[test]
fn capture_on_a_lan_port_and_its_end() {
    let (mut s, p) = lan(vec![(1, imp(), imp()), (1, imp(), delay(MS))], None, 300_000 * MS);
    s.apply(Command::Capture {
        id: 9,
        target: Target::Member(0, 1),
        side: 0,
        iface: 0,
        point: CapturePoint::Before,
    });
    s.apply(Command::Capture {
        id: 10,
        target: Target::Member(0, 1),
        side: 0,
        iface: 0,
        point: CapturePoint::After,
    });
    s.send(0, p[0], eth([0xff; 6], mac(10), 64, 4));
    s.finish();
    let c = captures(&s);
    assert!(c.contains(&(9, 0, 0, false, 4)), "before the port's ingress delay");
    assert!(c.contains(&(10, 0, MS, false, 4)), "as delivered");
    s.events.clear();
    s.apply(Command::Uncapture(9));
    s.apply(Command::Uncapture(10));
    s.send(2 * MS, p[0], eth([0xff; 6], mac(10), 64, 5));
    s.finish();
    assert!(captures(&s).is_empty());
    assert_eq!(s.arrivals(p[1]).len(), 2);
}

#[test]
fn random_source_addresses_fill_the_table_only_to_its_cap() {
    let (mut s, p) = plain_lan(3);
    let mut st = 7u64;
    for i in 0..10_000u64 {
        let src = (xorshift(&mut st) & 0xfeff_ffff_ffff).to_be_bytes();
        s.send(i * US, p[0], eth([0xff; 6], src[2..8].try_into().unwrap(), 64, i as u32));
    }
    s.finish();
    let seg = s.core.segment_counters(0).snapshot();
    assert_eq!(seg.learned, vemu_switch::DEFAULT_MAX_LEARNED as u64);
    assert_eq!(seg.learn_refused, 10_000 - vemu_switch::DEFAULT_MAX_LEARNED as u64);
}
