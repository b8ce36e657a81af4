//! Which directions go by the kernel (the fast path) and when they change path.

use super::*;

#[test]
fn unimpaired_directions_of_a_kernel_path_link_go_by_the_kernel() {
    let (s, a, _) = kernel_link(imp(), delay(MS));
    // Only the unimpaired direction (a → b, chosen at a) leaves the engine.
    assert_eq!(paths(&s), vec![(a, true)]);
    assert!(s.core.needs_engine(Target::Link(0)), "one direction is the engine's");
    assert!(s.stats(Target::Link(0), 0).kernel_path);
    assert!(!s.stats(Target::Link(0), 1).kernel_path);
    // A link without a kernel path never asks.
    let (s, _, _) = link(imp(), imp());
    assert_eq!(paths(&s), vec![]);
}

#[test]
fn a_direction_changes_path_when_its_impairments_come_and_go() {
    let (mut s, a, b) = kernel_link(imp(), imp());
    assert_eq!(paths(&s), vec![(a, true), (b, true)]);
    assert!(!s.core.needs_engine(Target::Link(0)));
    let set = |d| ImpairmentsPatch { delay_ns: Some(d), ..Default::default() };
    s.apply(Command::Patch { target: Target::Link(0), dir: 1, patch: set(MS) });
    assert_eq!(paths(&s)[2..], [(b, false)]);
    // The engine's path emulates it from then on.
    s.send(0, b, udp(100, 1));
    s.finish();
    assert_eq!(s.times(a), vec![MS]);
    // Any impairment at all keeps it in the engine: a rate, a loss, a queue limit.
    s.apply(Command::Patch {
        target: Target::Link(0),
        dir: 1,
        patch: ImpairmentsPatch {
            delay_ns: Some(0),
            rate_bps: Some(Some(1_000_000)),
            ..Default::default()
        },
    });
    assert_eq!(paths(&s).len(), 3, "still impaired: no change asked");
    s.apply(Command::Patch {
        target: Target::Link(0),
        dir: 1,
        patch: ImpairmentsPatch { rate_bps: Some(None), ..Default::default() },
    });
    assert_eq!(paths(&s)[3..], [(b, true)]);
    // The same patch again changes nothing.
    s.apply(Command::Patch { target: Target::Link(0), dir: 1, patch: set(0) });
    assert_eq!(paths(&s).len(), 4);
}

#[test]
fn an_mtu_the_interfaces_have_anyway_keeps_a_direction_on_the_kernel_path() {
    // `mtu: 1446` on a link makes both interfaces 1446 bytes: the direction's limit is
    // theirs, which the kernel path enforces too (its routes carry the MTU).
    let mtu = |m| Impairments { mtu: Some(m), ..Default::default() };
    let mut core = Core::new();
    let [a, b] = core.add_link(LinkConfig {
        forward: mtu(1446),
        reverse: imp(),
        seeds: [1, 2],
        mtu: 1446,
        kernel_path: true,
        kernel_shaper: true,
        remote: None,
        spur: None,
    });
    let mut s = Sim::new(core);
    s.drain_events();
    assert_eq!(paths(&s), vec![(a, true), (b, true)]);
    assert_eq!((s.core.iface_mtu(a), s.core.iface_mtu(b)), (1446, 1446));
    // A limit below the interfaces' is the engine's to carry out, and back.
    let set = |m| ImpairmentsPatch { mtu: Some(Some(m)), ..Default::default() };
    s.apply(Command::Patch { target: Target::Link(0), dir: 0, patch: set(1300) });
    assert_eq!(paths(&s)[2..], [(a, false)]);
    s.send(0, a, udp(1400, 1));
    s.finish();
    assert_eq!(
        s.stats(Target::Link(0), 0).drop_mtu,
        1,
        "1386 bytes beyond the Ethernet header over a 1300-byte limit"
    );
    s.apply(Command::Patch { target: Target::Link(0), dir: 0, patch: set(1446) });
    assert_eq!(paths(&s)[3..], [(a, true)]);
    // With a rate for the kernel's shaper: its token bucket.
    s.apply(Command::Patch {
        target: Target::Link(0),
        dir: 0,
        patch: ImpairmentsPatch {
            rate_bps: Some(Some(10_000_000)),
            shaper: Some(Shaper::Kernel),
            ..Default::default()
        },
    });
    assert!(
        matches!(full_paths(&s)[4..], [(p, Path::Shaped(Shape { rate_bps: 10_000_000, .. }))] if p == a)
    );
}

#[test]
fn a_rate_alone_given_to_the_kernels_shaper_goes_by_the_kernels_token_bucket() {
    let kernel =
        |rate| Impairments { rate_bps: Some(rate), shaper: Shaper::Kernel, ..Default::default() };
    let mut queued = kernel(1_000_000);
    queued.queue = Some(QueueLimit::Bytes(50_000));
    let (mut s, a, b) = kernel_link(kernel(100_000_000), queued);
    // 4 ms at the rate (at least two frames of the MTU with their headers, and a TCP
    // super-frame where that is at most 8 ms: 50 kB at 100 Mbit/s grows to 72 KiB); the
    // queue limit in bytes (the default 1000 packets as full-size frames).
    let fwd = Shape { rate_bps: 100_000_000, burst_bytes: 72 * 1024, limit_bytes: 1000 * 1514 };
    let rev = Shape { rate_bps: 1_000_000, burst_bytes: 2 * 1518, limit_bytes: 50_000 };
    assert_eq!(full_paths(&s), vec![(a, Path::Shaped(fwd)), (b, Path::Shaped(rev))]);
    assert!(!s.core.needs_engine(Target::Link(0)), "both directions are the kernel's");
    let st = s.stats(Target::Link(0), 0);
    assert!(st.kernel_path && st.kernel_shaper);
    // A new rate is a new bucket; anything else besides the rate takes the engine's
    // serializer, and back.
    s.apply(Command::Patch {
        target: Target::Link(0),
        dir: 0,
        patch: ImpairmentsPatch { rate_bps: Some(Some(1_000_000_000)), ..Default::default() },
    });
    assert_eq!(
        full_paths(&s)[2..],
        [(
            a,
            Path::Shaped(Shape {
                rate_bps: 1_000_000_000,
                burst_bytes: 500_000,
                limit_bytes: 1000 * 1514
            })
        )]
    );
    s.apply(Command::Patch {
        target: Target::Link(0),
        dir: 0,
        patch: ImpairmentsPatch { delay_ns: Some(MS), ..Default::default() },
    });
    assert_eq!(full_paths(&s)[3..], [(a, Path::Engine)]);
    assert!(!s.stats(Target::Link(0), 0).kernel_shaper);
    s.send(0, a, udp(1250, 1));
    s.finish();
    assert_eq!(
        s.times(b),
        vec![10_000 + MS],
        "the engine serializes: 1250 bytes at 1 Gbit/s, then the delay"
    );
    s.apply(Command::Patch {
        target: Target::Link(0),
        dir: 0,
        patch: ImpairmentsPatch { delay_ns: Some(0), ..Default::default() },
    });
    assert!(matches!(full_paths(&s)[4..], [(p, Path::Shaped(_))] if p == a));
    // The rate removed: nothing to shape, the plain kernel path; the engine's shaper
    // (the default): the engine.
    s.apply(Command::Patch {
        target: Target::Link(0),
        dir: 0,
        patch: ImpairmentsPatch { rate_bps: Some(None), ..Default::default() },
    });
    assert_eq!(full_paths(&s)[5..], [(a, Path::Kernel)]);
    s.apply(Command::Patch {
        target: Target::Link(0),
        dir: 1,
        patch: ImpairmentsPatch { shaper: Some(Shaper::Engine), ..Default::default() },
    });
    assert_eq!(full_paths(&s)[6..], [(b, Path::Engine)]);
    // Captured: the engine, whatever the shaper.
    s.apply(Command::Patch {
        target: Target::Link(0),
        dir: 0,
        patch: ImpairmentsPatch { rate_bps: Some(Some(1_000_000)), ..Default::default() },
    });
    s.apply(Command::Capture {
        id: 3,
        target: Target::Link(0),
        side: 0,
        iface: 0,
        point: CapturePoint::After,
    });
    assert_eq!(full_paths(&s).last(), Some(&(a, Path::Engine)));
    s.apply(Command::Uncapture(3));
    assert!(matches!(full_paths(&s).last(), Some((p, Path::Shaped(_))) if *p == a));
    // A super-frame (72 KiB) is 8 ms at 73.7 Mbit/s: above that the bucket holds one.
    let burst = |s: &Sim| match full_paths(s).last() {
        Some((_, Path::Shaped(shape))) => shape.burst_bytes,
        other => panic!("{other:?}"),
    };
    s.apply(Command::Patch {
        target: Target::Link(0),
        dir: 0,
        patch: ImpairmentsPatch { rate_bps: Some(Some(73_000_000)), ..Default::default() },
    });
    assert_eq!(burst(&s), 36_500, "4 ms at 73 Mbit/s");
    s.apply(Command::Patch {
        target: Target::Link(0),
        dir: 0,
        patch: ImpairmentsPatch { rate_bps: Some(Some(74_000_000)), ..Default::default() },
    });
    assert_eq!(burst(&s), 72 * 1024, "a super-frame at 74 Mbit/s");
}

#[test]
fn a_link_down_or_captured_goes_through_the_engine() {
    let (mut s, a, b) = kernel_link(imp(), imp());
    s.apply(Command::SetUp { target: Target::Link(0), up: false });
    assert_eq!(paths(&s)[2..], [(a, false), (b, false)]);
    // The engine drops what the nodes send while the link is down.
    s.send(0, a, udp(100, 1));
    s.finish();
    assert_eq!(s.times(b), Vec::<u64>::new());
    assert_eq!(s.stats(Target::Link(0), 0).drop_down, 1);
    s.apply(Command::SetUp { target: Target::Link(0), up: true });
    assert_eq!(paths(&s)[4..], [(a, true), (b, true)]);
    // A capture on either end brings both directions to the engine, which copies them;
    // its end sends them back.
    s.apply(Command::Capture {
        id: 7,
        target: Target::Link(0),
        side: 1,
        iface: 0,
        point: CapturePoint::After,
    });
    assert_eq!(paths(&s)[6..], [(a, false), (b, false)]);
    s.apply(Command::Uncapture(7));
    assert_eq!(paths(&s)[8..], [(a, true), (b, true)]);
}

/// A LAN is switched by the kernel while nothing of it needs emulating, all or nothing:
/// an impairment on one direction of one port, a port down, a capture or a capacity
/// bring every port to the engine; lifting it sends them back.
#[test]
fn a_lan_goes_by_the_kernel_while_nothing_of_it_needs_emulating() {
    let (mut s, p, first) = kernel_lan(3, None, vemu_switch::Snooping::On, imp());
    assert_eq!(
        first,
        p.iter().map(|&q| (q, true)).collect::<Vec<_>>(),
        "every port to the kernel at once"
    );
    assert!(!s.core.needs_engine(Target::Member(0, 0)));
    assert!(
        s.stats(Target::Member(0, 2), 0).kernel_path
            && s.stats(Target::Member(0, 2), 1).kernel_path
    );
    let set = |d| ImpairmentsPatch { delay_ns: Some(d), ..Default::default() };
    s.apply(Command::Patch { target: Target::Member(0, 1), dir: 1, patch: set(MS) });
    assert_eq!(
        paths(&s),
        p.iter().map(|&q| (q, false)).collect::<Vec<_>>(),
        "one port's impairment takes the whole LAN to the engine"
    );
    assert!(s.core.needs_engine(Target::Member(0, 2)));
    assert!(!s.stats(Target::Member(0, 0), 0).kernel_path);
    // The engine switches it from then on: a broadcast from 0 reaches 1 after its 1 ms.
    s.send(0, p[0], udp(60, 1));
    s.finish();
    assert_eq!(s.times(p[1]), vec![MS]);
    assert_eq!(s.times(p[2]), vec![0]);
    s.events.clear();
    s.apply(Command::Patch { target: Target::Member(0, 1), dir: 1, patch: set(0) });
    assert_eq!(paths(&s), p.iter().map(|&q| (q, true)).collect::<Vec<_>>());
    s.events.clear();
    s.apply(Command::SetUp { target: Target::Member(0, 2), up: false });
    assert_eq!(paths(&s).len(), 3);
    assert!(paths(&s).iter().all(|&(_, k)| !k), "a port down: the engine drops its frames");
    s.events.clear();
    s.apply(Command::SetUp { target: Target::Member(0, 2), up: true });
    assert!(paths(&s).iter().all(|&(_, k)| k));
    s.events.clear();
    s.apply(Command::Capture {
        id: 3,
        target: Target::Member(0, 0),
        side: 0,
        iface: 0,
        point: CapturePoint::After,
    });
    assert!(
        paths(&s).len() == 3 && paths(&s).iter().all(|&(_, k)| !k),
        "a capture needs the engine's copies"
    );
    s.events.clear();
    s.apply(Command::Uncapture(3));
    assert!(paths(&s).len() == 3 && paths(&s).iter().all(|&(_, k)| k));
    // Impaired from the start, or with a capacity: the engine from the start (no path
    // asked: the engine is where a LAN starts).
    let (_, _, first) = kernel_lan(3, None, vemu_switch::Snooping::On, delay(MS));
    assert_eq!(first, vec![]);
    let (_, _, first) = kernel_lan(3, Some(1_000_000_000), vemu_switch::Snooping::On, imp());
    assert_eq!(first, vec![]);
    // A LAN without a kernel path never asks; nor does a wireless one.
    let (s, _) = plain_lan(3);
    assert_eq!(paths(&s), vec![]);
}

/// A LAN port direction whose one impairment is a rate given to the kernel's shaper
/// keeps the LAN on the kernel's bridge where the driver can shape there: its egress
/// through a bucket ([`Path::Shaped`]), its ingress through one ([`Event::Ingress`],
/// told before the paths); anything else still takes the whole LAN to the engine, and
/// only what changed is told again.
#[test]
fn a_lan_whose_rates_the_kernel_shapes_stays_on_the_bridge() {
    let kernel =
        |rate| Impairments { rate_bps: Some(rate), shaper: Shaper::Kernel, ..Default::default() };
    let lan = |shaper: bool| {
        let mut core = Core::new();
        let members = (0..3)
            .map(|i| MemberConfig {
                vlan: 1,
                egress: if i == 1 { kernel(50_000_000) } else { imp() },
                ingress: if i == 0 { kernel(10_000_000) } else { imp() },
                seeds: [2 * i, 2 * i + 1],
                mtu: 1500,
                ..Default::default()
            })
            .collect();
        let ports = core.add_segment(SegmentConfig {
            members,
            aging_ns: 300_000 * MS,
            kernel_path: true,
            kernel_shaper: shaper,
            ..Default::default()
        });
        let mut s = Sim::new(core);
        s.drain_events();
        (s, ports)
    };
    let (mut s, p) = lan(true);
    // 4 ms at the rate, at least two frames of 1518 bytes; the default queue of 1000 full frames.
    // 4 ms at the rate, at least two frames (and a super-frame from 74 Mbit/s on).
    let bucket = |rate: u64| Shape {
        rate_bps: rate,
        burst_bytes: (rate / 250 / 8).max(3036),
        limit_bytes: 1000 * 1514,
    };
    let (b0, b1) = (bucket(10_000_000), bucket(50_000_000));
    let first = vec![
        (p[0], None, Some(b0)),
        (p[0], Some(Path::Kernel), None),
        (p[1], Some(Path::Shaped(b1)), None),
        (p[2], Some(Path::Kernel), None),
    ];
    assert_eq!(lan_events(&s), first, "the buckets toward the nodes first, then every port's path");
    assert!(!s.core.needs_engine(Target::Member(0, 0)));
    let (e0, e1) = (s.stats(Target::Member(0, 0), 0), s.stats(Target::Member(0, 0), 1));
    assert!(e0.kernel_path && !e0.kernel_shaper && e1.kernel_path && e1.kernel_shaper);
    // A delay anywhere: every port to the engine, the buckets toward the nodes first
    // taken away (the engine's frames for a port leave through the same device).
    s.events.clear();
    s.apply(Command::Patch {
        target: Target::Member(0, 2),
        dir: 0,
        patch: ImpairmentsPatch { delay_ns: Some(MS), ..Default::default() },
    });
    let to_engine: Vec<_> = [(p[0], None, None)]
        .into_iter()
        .chain(p.iter().map(|&q| (q, Some(Path::Engine), None)))
        .collect();
    assert_eq!(lan_events(&s), to_engine);
    assert!(!s.stats(Target::Member(0, 0), 1).kernel_shaper);
    // The engine serializes port 0's ingress at 10 Mbit/s: a 1500-byte frame from 1
    // takes 1200 µs there (port 1's 50 Mbit/s egress first: 240 µs).
    s.send(0, p[1], udp(1500, 1));
    s.finish();
    assert_eq!(s.times(p[0]), vec![240_000 + 1_200_000]);
    // Taken away: back on the bridge, its bucket and paths told again.
    s.events.clear();
    s.apply(Command::Patch {
        target: Target::Member(0, 2),
        dir: 0,
        patch: ImpairmentsPatch { delay_ns: Some(0), ..Default::default() },
    });
    assert_eq!(lan_events(&s), first);
    // Port 0's ingress rate lifted: only its bucket goes; a new rate on port 2's: a bucket.
    s.events.clear();
    s.apply(Command::Patch {
        target: Target::Member(0, 0),
        dir: 1,
        patch: ImpairmentsPatch { rate_bps: Some(None), ..Default::default() },
    });
    assert_eq!(lan_events(&s), vec![(p[0], None, None)]);
    s.events.clear();
    s.apply(Command::Patch {
        target: Target::Member(0, 2),
        dir: 1,
        patch: ImpairmentsPatch {
            rate_bps: Some(Some(20_000_000)),
            shaper: Some(Shaper::Kernel),
            ..Default::default()
        },
    });
    assert_eq!(lan_events(&s), vec![(p[2], None, Some(bucket(20_000_000)))]);
    // The engine's shaper asked for on one port: the engine (port 2's bucket goes).
    s.events.clear();
    s.apply(Command::Patch {
        target: Target::Member(0, 1),
        dir: 0,
        patch: ImpairmentsPatch { shaper: Some(Shaper::Engine), ..Default::default() },
    });
    let to_engine: Vec<_> = [(p[2], None, None)]
        .into_iter()
        .chain(p.iter().map(|&q| (q, Some(Path::Engine), None)))
        .collect();
    assert_eq!(lan_events(&s), to_engine);
    // A driver that cannot shape on the bridge: the engine from the start.
    let (s, _) = lan(false);
    assert_eq!(lan_events(&s), vec![]);
    assert!(s.core.needs_engine(Target::Member(0, 0)));
}

/// The switch of a LAN the kernel switches sends no queries of its own (the kernel's
/// bridge is the querier then); taken to the engine, it queries at once.
#[test]
fn a_kernel_switched_lan_leaves_the_queries_to_the_kernel() {
    let (mut s, p, _) = kernel_lan(2, None, vemu_switch::Snooping::Querier, imp());
    assert_eq!(s.core.poll_timeout(), None, "nothing to do while the kernel switches");
    s.run_until(40_000 * MS);
    assert!(s.out.is_empty());
    s.apply(Command::Patch {
        target: Target::Member(0, 0),
        dir: 0,
        patch: ImpairmentsPatch { delay_ns: Some(MS), ..Default::default() },
    });
    assert_eq!(s.core.poll_timeout(), Some(0), "queries due since the start go at once");
    s.run_until(40_001 * MS);
    let to: Vec<PortId> = s.out.iter().map(|(_, q, _)| *q).collect();
    assert_eq!(to, [p[0], p[1], p[0], p[1]], "an IGMP and an MLD query to each port");
}
