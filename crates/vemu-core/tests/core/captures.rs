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

/// A capture of drops: every frame a direction dropped, with its reason, on the
/// interface it came from (outgoing) and the one it was going to; as many of each reason
/// as the direction's counters.
#[test]
fn a_capture_of_drops_says_why_each_frame_was_dropped() {
    let lossy = Impairments {
        loss: Loss::Bernoulli { rate: 0.3, correlation: 0.0 },
        rate_bps: Some(8_000_000),
        queue: Some(QueueLimit::Packets(5)),
        mtu: Some(1000),
        ..imp()
    };
    let (mut s, a, b) = link(lossy, imp());
    for (id, side) in [(1, 0), (2, 1)] {
        s.apply(Command::Capture {
            id,
            target: Target::Link(0),
            side,
            iface: 0,
            point: CapturePoint::Drops,
        });
    }
    // 200 frames at once: the queue holds 5, loss takes some; one too large.
    for i in 0..200 {
        s.send(0, a, udp(64, i));
    }
    s.send(0, a, udp(1200, 999));
    s.finish();
    let d = dropped(&s);
    let st = s.stats(Target::Link(0), 0);
    let count =
        |id: u64, why: DropReason| d.iter().filter(|x| x.0 == id && x.4 == why).count() as u64;
    for (id, outgoing) in [(1, true), (2, false)] {
        assert!(d.iter().filter(|x| x.0 == id).all(|x| x.2 == outgoing), "{d:?}");
        assert_eq!(count(id, DropReason::Loss), st.drop_loss, "{d:?}");
        assert_eq!(count(id, DropReason::Queue), st.drop_queue);
        assert_eq!(count(id, DropReason::Mtu), st.drop_mtu);
    }
    assert!(st.drop_loss > 20 && st.drop_queue > 100 && st.drop_mtu == 1, "{st:?}");
    assert!(d.contains(&(2, 0, false, 999, DropReason::Mtu)));
    // What was delivered was not captured as dropped.
    let delivered: Vec<u32> = s.arrivals(b).iter().map(|f| f.1).collect();
    assert!(delivered.iter().all(|q| !d.iter().any(|x| x.3 == *q)), "{delivered:?}");
    assert_eq!(delivered.len() as u64 + st.drop_loss + st.drop_queue + 1, 201);
    // Down, and a Gilbert-Elliott model that loses everything in its bad state and
    // nothing in its good one: each loss is a burst's.
    s.events.clear();
    s.apply(Command::SetUp { target: Target::Link(0), up: false });
    s.send(MS * 1000, a, udp(64, 500));
    s.finish();
    assert_eq!(
        dropped(&s),
        vec![(1, 0, true, 500, DropReason::Down), (2, 0, false, 500, DropReason::Down)]
    );
    s.apply(Command::SetUp { target: Target::Link(0), up: true });
    s.apply(Command::Patch {
        target: Target::Link(0),
        dir: 0,
        patch: ImpairmentsPatch {
            loss: Some(Loss::GilbertElliott { p: 0.2, r: 0.3, h: 0.0, k: 1.0 }),
            ..Default::default()
        },
    });
    s.events.clear();
    for i in 0..300 {
        s.send(MS * 2000 + i as u64 * MS, a, udp(64, 1000 + i));
    }
    s.finish();
    let d = dropped(&s);
    assert!(d.len() > 40, "{}", d.len());
    assert!(d.iter().all(|x| x.4 == DropReason::LossBad), "{d:?}");
    // No capture of drops: nothing kept.
    s.events.clear();
    s.apply(Command::Uncapture(1));
    s.apply(Command::Uncapture(2));
    for i in 0..50 {
        s.send(MS * 3000 + i as u64 * MS, a, udp(64, 2000 + i));
    }
    s.finish();
    assert!(dropped(&s).is_empty());
}

/// On a radio channel: the collisions of hidden terminals and the frames too weak at a
/// receiver, each captured at the receiver's port with its reason, as many as the
/// channel's pair counters count.
#[test]
fn a_capture_of_drops_on_a_radio_channel_says_collision_or_weak() {
    let (mut s, p) = hidden_terminals();
    s.apply(Command::Capture {
        id: 4,
        target: Target::Member(0, 1),
        side: 0,
        iface: 0,
        point: CapturePoint::Drops,
    });
    for i in 0..50 {
        s.send(0, p[0], eth(mac(11), mac(10), 250, i));
        s.send(0, p[2], eth(mac(11), mac(12), 250, 1000 + i));
    }
    s.finish();
    let snap = s.core.radio(0, u64::MAX).unwrap();
    let to_1 = |f: fn(&vemu_radio::medium::PairCounters) -> u64| -> u64 {
        snap.pairs.iter().filter(|p| p.1 == 1).map(|p| f(&p.2)).sum()
    };
    let d = dropped(&s);
    let n = |why| d.iter().filter(|x| x.4 == why).count() as u64;
    assert!(n(DropReason::Collision) > 20, "{d:?}");
    assert_eq!(n(DropReason::Collision), to_1(|c| c.lost_collision));
    assert!(d.iter().all(|x| x.0 == 4 && !x.2), "{d:?}");
    // Far apart on a lossy model: what is too weak.
    let model = Model::LogDistance { exponent: 3.0, d0_m: 1.0, sigma_db: 6.0 };
    let (mut s, p) = radio_with(&[(0.0, 0.0), (120.0, 0.0)], model, false, 11_000_000, 5, 550.0);
    s.apply(Command::Capture {
        id: 5,
        target: Target::Member(0, 1),
        side: 0,
        iface: 0,
        point: CapturePoint::Drops,
    });
    for i in 0..300 {
        s.send(i as u64 * MS, p[0], eth([0xff; 6], mac(10), 100, i));
    }
    s.finish();
    let snap = s.core.radio(0, u64::MAX).unwrap();
    let weak: u64 = snap.pairs.iter().filter(|p| p.1 == 1).map(|p| p.2.lost_channel).sum();
    let d = dropped(&s);
    assert!(weak > 10, "{weak}");
    assert_eq!(d.len() as u64, weak, "{d:?}");
    assert!(d.iter().all(|x| x.4 == DropReason::Weak));
    assert_eq!(d.len() + s.arrivals(p[1]).len(), 300);
}

#[test]
fn a_capture_of_drops_on_a_lan_says_capacity_or_switch() {
    let drops_on = |s: &mut Sim, member: usize| {
        s.apply(Command::Capture {
            id: 6,
            target: Target::Member(0, member),
            side: 0,
            iface: 0,
            point: CapturePoint::Drops,
        })
    };
    // A LAN of 1 Mbit/s shared: a burst from port 0 beyond what it can hold.
    let members = vec![(1, imp(), imp()), (1, imp(), imp()), (1, imp(), imp())];
    let (mut s, p) = lan(members, Some(1_000_000), 300_000 * MS);
    drops_on(&mut s, 0);
    // (Its queue holds 1,000 frames.)
    for i in 0..1200 {
        s.send(0, p[0], eth([0xff; 6], mac(10), 1000, i));
    }
    s.finish();
    let seg = s.core.segment_counters(0).snapshot();
    let d = dropped(&s);
    assert!(seg.drop_capacity >= 150, "{seg:?}");
    assert_eq!(d.len() as u64, seg.drop_capacity);
    assert!(d.iter().all(|x| x.4 == DropReason::Capacity && x.2), "sent by port 0: {d:?}");
    // A frame to an address behind its sender's own port: the switch has nowhere to
    // send it.
    let (mut s, p) = plain_lan(3);
    drops_on(&mut s, 0);
    s.send(0, p[0], eth([0xff; 6], mac(20), 64, 1)); // mac(20) is behind port 0
    s.send(MS, p[0], eth(mac(20), mac(21), 64, 2));
    s.send(2 * MS, p[1], eth(mac(20), mac(11), 64, 3)); // delivered to port 0
    s.finish();
    assert_eq!(dropped(&s), vec![(6, 0, true, 2, DropReason::Switch)]);
    assert_eq!(s.core.segment_counters(0).snapshot().filtered, 1);
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
