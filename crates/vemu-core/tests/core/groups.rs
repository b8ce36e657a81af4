//! Backlog ages, radio and LAN multicast groups, the querier.

use super::*;

/// Readiness (`vemu up` waits for it): the backlog is the age of the oldest frame due
/// and not yet handed out. A flood on a 1 ms LAN is due 1 ms later; a driver that does
/// not write for 5 ms is 4 ms behind; once it writes everything due it is caught up.
#[test]
fn backlog_is_the_age_of_the_oldest_due_frame() {
    let members = (0..50).map(|_| (1u16, delay(MS), imp())).collect();
    let (mut sim, ports) = lan(members, None, 300_000 * MS);
    assert_eq!(sim.core.backlog_ns(0), 0, "an idle core is never behind");
    sim.core.handle_frame(0, ports[0], eth([0xff; 6], mac(1), 100, 1));
    assert_eq!(sim.core.backlog_ns(MS / 2), 0, "nothing due before the port's delay");
    assert_eq!(sim.core.backlog_ns(5 * MS), 4 * MS);
    // Write only part of what is due: still behind by the oldest left.
    sim.now = 5 * MS;
    sim.core.handle_timeout(sim.now);
    for _ in 0..10 {
        let tx = sim.core.poll_transmit(sim.now).expect("frames due");
        sim.core.on_written(&tx, true);
    }
    assert_eq!(sim.core.backlog_ns(5 * MS), 4 * MS);
    sim.finish();
    assert_eq!(sim.out.len(), 49 - 10);
    assert_eq!(sim.core.backlog_ns(sim.now), 0, "caught up once everything due is written");
}

/// On a wireless segment a receiver in range takes a group's data only once it reported
/// the group (its report read as it was sent) and no longer after its leave, as a
/// radio's multicast filter does; 224.0.0.x, the reports themselves and broadcast reach
/// everyone in range. With `snooping: off` every receiver takes everything.
#[test]
fn radio_receivers_take_the_groups_they_joined_only() {
    for (snooping, p1, p2, filtered) in [
        (vemu_switch::Snooping::On, vec![2, 3, 6], vec![1, 3, 4, 6], 5),
        (vemu_switch::Snooping::Off, vec![0, 2, 3, 5, 6], vec![0, 1, 2, 3, 4, 5, 6], 0),
    ] {
        let mut core = Core::new();
        let cfg = MediumConfig {
            model: Model::UnitDisk { range_m: 250.0 },
            radio: Radio::default(),
            rate_bps: 11_000_000,
            preamble_ns: 0,
            carrier_sense_m: 250.0,
            csma: false,
            queue_frames: 1000,
            seed: 7,
            dcf: None,
            city: None,
            hub: None,
        };
        let pos = vec![Pos::new(0.0, 0.0), Pos::new(10.0, 0.0), Pos::new(20.0, 0.0)];
        let members = (0..3)
            .map(|i| MemberConfig { vlan: 1, seeds: [i, 100 + i], ..Default::default() })
            .collect();
        let p = core.add_segment(SegmentConfig {
            members,
            aging_ns: 300_000 * MS,
            snooping,
            radio: Some((cfg, pos)),
            ..Default::default()
        });
        let mut s = Sim::new(core);
        let g = [239, 1, 1, 1];
        s.send(0, p[0], ip4_group(1, g, 17, &[0; 12])); // nobody joined yet
        s.send(MS, p[1], ip4_group(2, g, 2, &[0x16, 0, 0, 0, 239, 1, 1, 1])); // 1 joins
        s.send(2 * MS, p[0], ip4_group(1, g, 17, &[0; 12]));
        s.send(3 * MS, p[0], ip4_group(1, [224, 0, 0, 5], 89, &[0; 12])); // OSPF: everyone
        s.send(4 * MS, p[1], ip4_group(2, [224, 0, 0, 2], 2, &[0x17, 0, 0, 0, 239, 1, 1, 1])); // 1 leaves
        s.send(5 * MS, p[0], ip4_group(1, g, 17, &[0; 12]));
        s.send(6 * MS, p[0], eth([0xff; 6], mac(1), 100, 7)); // broadcast: everyone
        s.finish();
        // Which of the sends (one a millisecond; each on the air well under 1 ms) each took.
        let slots = |port| s.times(port).iter().map(|t| t / MS).collect::<Vec<_>>();
        assert_eq!(slots(p[1]), p1, "{snooping:?}: member 1");
        assert_eq!(slots(p[2]), p2, "{snooping:?}: member 2 never joined");
        let seg = s.core.segment_counters(0).snapshot();
        assert_eq!(
            (seg.filtered, seg.groups),
            (filtered, 0),
            "{snooping:?}: receptions held back; groups left"
        );
    }
}

/// A LAN whose switch is the snooping querier: it sends its general queries through each
/// port's impairments at 0 s and 31.25 s; a host's report keeps a group's data to it
/// (and away from the others).
#[test]
fn a_querier_lan_queries_on_schedule_and_delivers_groups_to_members_only() {
    let mut core = Core::new();
    let members = (0..3)
        .map(|i| MemberConfig {
            vlan: 1,
            ingress: delay(MS),
            seeds: [2 * i, 2 * i + 1],
            ..Default::default()
        })
        .collect();
    let ports = core.add_segment(SegmentConfig {
        members,
        aging_ns: 300_000 * MS,
        snooping: vemu_switch::Snooping::Querier,
        ..Default::default()
    });
    let mut sim = Sim::new(core);
    assert_eq!(sim.core.poll_timeout(), Some(0), "the first queries are due at once");
    sim.run_until(2 * MS);
    let queries: Vec<(u64, PortId)> = sim.out.iter().map(|(t, p, _)| (*t, *p)).collect();
    assert_eq!(queries.len(), 6, "an IGMP and an MLD query to each port");
    assert!(queries.iter().all(|&(t, _)| t == MS), "each after its port's 1 ms: {queries:?}");
    assert_eq!(sim.core.poll_timeout(), Some(31_250 * MS));
    // Port 1's host joins 239.1.1.1 (IGMPv2 report); port 0 sends to the group.
    let ip4 = ip4_group;
    let g = [239, 1, 1, 1];
    sim.out.clear();
    sim.send(10 * MS, ports[1], ip4(2, g, 2, &[0x16, 0, 0, 0, 239, 1, 1, 1]));
    sim.send(20 * MS, ports[0], ip4(1, g, 17, &[0; 12]));
    sim.run_until(100 * MS);
    let got: Vec<PortId> = sim.out.iter().map(|(_, p, _)| *p).collect();
    assert_eq!(got, [ports[1]], "the report reaches no host; the data reaches the member only");
    let seg = sim.core.segment_counters(0).snapshot();
    assert_eq!((seg.multicast, seg.groups), (2, 1));
    sim.run_until(31_251 * MS);
    assert_eq!(sim.out.len(), 1 + 6, "the second round of queries");
}
