//! Links: delay, rate, queues, jitter, loss, duplication, corruption, reordering, MTU,
//! changes at run time, link down, counters and lateness.

use super::*;

#[test]
fn unimpaired_link_delivers_at_once_and_in_order() {
    let (mut s, a, b) = link(imp(), imp());
    for i in 0..5 {
        s.send(10 * US * i as u64, a, udp(100, i));
    }
    s.finish();
    assert_eq!(s.arrivals(b), (0..5).map(|i| (10 * US * i as u64, i)).collect::<Vec<_>>());
    assert!(s.arrivals(a).is_empty());
}

#[test]
fn delay_is_exact_per_frame() {
    let (mut s, a, b) = link(delay(5 * MS), imp());
    for i in 0..10u32 {
        s.send(i as u64 * 333_333, a, udp(64, i));
    }
    s.finish();
    let want: Vec<(u64, u32)> = (0..10u32).map(|i| (i as u64 * 333_333 + 5 * MS, i)).collect();
    assert_eq!(s.arrivals(b), want);
}

#[test]
fn directions_are_independent() {
    let (mut s, a, b) = link(delay(2 * MS), delay(7 * MS));
    s.send(0, a, udp(64, 1));
    s.send(0, b, udp(64, 2));
    s.finish();
    assert_eq!(s.arrivals(b), vec![(2 * MS, 1)]);
    assert_eq!(s.arrivals(a), vec![(7 * MS, 2)]);
}

#[test]
fn serialization_at_the_set_rate() {
    // 1000 wire bytes at 8 Mbit/s take exactly 1 ms each.
    let (mut s, a, b) = link(rate(8_000_000), imp());
    for i in 0..4 {
        s.send(0, a, udp(1000, i));
    }
    s.finish();
    assert_eq!(s.times(b), vec![MS, 2 * MS, 3 * MS, 4 * MS]);
}

#[test]
fn serialization_then_delay() {
    let (mut s, a, b) =
        link(Impairments { rate_bps: Some(8_000_000), delay_ns: 10 * MS, ..imp() }, imp());
    s.send(0, a, udp(1000, 0));
    s.send(0, a, udp(500, 1));
    s.send(5 * MS, a, udp(1000, 2));
    s.finish();
    assert_eq!(s.times(b), vec![11 * MS, 11 * MS + 500 * US, 16 * MS]);
}

#[test]
fn idle_serializer_starts_fresh() {
    let (mut s, a, b) = link(rate(8_000_000), imp());
    s.send(0, a, udp(1000, 0));
    s.send(100 * MS, a, udp(1000, 1));
    s.finish();
    assert_eq!(s.times(b), vec![MS, 101 * MS]);
}

#[test]
fn queue_limit_in_packets_drops_the_excess() {
    let (mut s, a, b) = link(
        Impairments { rate_bps: Some(8_000_000), queue: Some(QueueLimit::Packets(3)), ..imp() },
        imp(),
    );
    for i in 0..10 {
        s.send(0, a, udp(1000, i));
    }
    s.finish();
    assert_eq!(s.arrivals(b).iter().map(|x| x.1).collect::<Vec<_>>(), vec![0, 1, 2]);
    let st = s.stats(Target::Link(0), 0);
    assert_eq!((st.rx_frames, st.tx_frames, st.drop_queue), (10, 3, 7));
    assert_eq!(st.queue_frames_max, 3);
}

#[test]
fn queue_limit_in_bytes() {
    let (mut s, a, b) = link(
        Impairments { rate_bps: Some(8_000_000), queue: Some(QueueLimit::Bytes(2500)), ..imp() },
        imp(),
    );
    for i in 0..5 {
        s.send(0, a, udp(1000, i));
    }
    // After the first leaves the queue (1 ms), there is room again.
    s.send(MS, a, udp(1000, 9));
    s.finish();
    assert_eq!(s.arrivals(b).iter().map(|x| x.1).collect::<Vec<_>>(), vec![0, 1, 9]);
    assert_eq!(s.stats(Target::Link(0), 0).drop_queue, 3);
}

#[test]
fn queue_drains_over_time() {
    let (mut s, a, _b) = link(rate(8_000_000), imp());
    for i in 0..5 {
        s.send(0, a, udp(1000, i));
    }
    assert_eq!(s.stats(Target::Link(0), 0).queue_frames, 5);
    s.send(3 * MS, a, udp(1000, 5));
    // Three left by 3 ms; two waiting plus the new one.
    assert_eq!(s.stats(Target::Link(0), 0).queue_frames, 3);
}

#[test]
fn uniform_jitter_stays_in_bounds_and_never_reorders() {
    let j = Jitter { amount_ns: 2 * MS, distribution: Distribution::Uniform, correlation: 0.0 };
    let (mut s, a, b) = link(Impairments { delay_ns: 10 * MS, jitter: j, ..imp() }, imp());
    for i in 0..1000u32 {
        s.send(i as u64 * 5 * MS, a, udp(64, i));
    }
    s.finish();
    let arr = s.arrivals(b);
    assert_eq!(arr.len(), 1000);
    let mut spread = Vec::new();
    for (k, &(t, i)) in arr.iter().enumerate() {
        assert_eq!(i, k as u32, "in order");
        let d = t - i as u64 * 5 * MS;
        assert!((8 * MS..=12 * MS).contains(&d), "delay {d}");
        spread.push(d);
    }
    let mean = spread.iter().sum::<u64>() as f64 / 1000.0;
    assert!((mean - 10e6).abs() < 0.1e6, "mean {mean}");
    assert!(spread.iter().any(|&d| d < 9 * MS) && spread.iter().any(|&d| d > 11 * MS));
}

#[test]
fn jitter_never_lets_a_frame_overtake() {
    // Frames closer together than the jitter: a later frame waits for the earlier one.
    let j = Jitter { amount_ns: 5 * MS, distribution: Distribution::Normal, correlation: 0.0 };
    let (mut s, a, b) = link(Impairments { delay_ns: 20 * MS, jitter: j, ..imp() }, imp());
    for i in 0..500u32 {
        s.send(i as u64 * 100 * US, a, udp(64, i));
    }
    s.finish();
    let arr = s.arrivals(b);
    assert!(arr.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1));
}

#[test]
fn same_seed_same_times_other_seed_other_times() {
    let j = Jitter { amount_ns: 3 * MS, distribution: Distribution::Pareto, correlation: 0.25 };
    let cfg = Impairments {
        delay_ns: 10 * MS,
        jitter: j,
        loss: Loss::Bernoulli { rate: 0.1, correlation: 0.0 },
        ..imp()
    };
    let run = |seed: u64| {
        let (mut s, a, b) = link_seeded(cfg.clone(), imp(), [seed, 0]);
        for i in 0..300u32 {
            s.send(i as u64 * 4 * MS, a, udp(64, i));
        }
        s.finish();
        s.arrivals(b)
    };
    assert_eq!(run(11), run(11));
    assert_ne!(run(11), run(12));
}

#[test]
fn full_loss_drops_everything_and_counts_it() {
    let (mut s, a, b) =
        link(Impairments { loss: Loss::Bernoulli { rate: 1.0, correlation: 0.0 }, ..imp() }, imp());
    for i in 0..50 {
        s.send(i, a, udp(64, i as u32));
    }
    s.finish();
    assert!(s.arrivals(b).is_empty());
    let st = s.stats(Target::Link(0), 0);
    assert_eq!((st.rx_frames, st.drop_loss, st.tx_frames), (50, 50, 0));
}

#[test]
fn bernoulli_loss_rate_within_binomial_bounds() {
    let (mut s, a, b) =
        link(Impairments { loss: Loss::Bernoulli { rate: 0.3, correlation: 0.0 }, ..imp() }, imp());
    let n = 20_000u32;
    for i in 0..n {
        s.send(i as u64 * US, a, udp(64, i));
    }
    s.finish();
    let lost = n as f64 - s.arrivals(b).len() as f64;
    // 5 σ of a binomial(20000, 0.3): ±324 frames.
    let sigma = (n as f64 * 0.3 * 0.7).sqrt();
    assert!((lost - 0.3 * n as f64).abs() < 5.0 * sigma, "lost {lost}");
    assert_eq!(s.stats(Target::Link(0), 0).drop_loss as f64, lost);
}

#[test]
fn gilbert_elliott_loses_in_bursts() {
    // p = 1% Good→Bad, r = 25% Bad→Good, all lost in Bad, none in Good:
    // loss = p / (p + r) = 3.85%, mean burst = 1 / r = 4 frames.
    let ge = Loss::GilbertElliott { p: 0.01, r: 0.25, h: 0.0, k: 1.0 };
    let (mut s, a, b) = link(Impairments { loss: ge, ..imp() }, imp());
    let n = 100_000u32;
    for i in 0..n {
        s.send(i as u64 * US, a, udp(64, i));
    }
    s.finish();
    let mut got = vec![false; n as usize];
    for (_, i) in s.arrivals(b) {
        got[i as usize] = true;
    }
    let lost = got.iter().filter(|&&g| !g).count() as f64;
    let rate = lost / n as f64;
    assert!((rate - 0.0385).abs() < 0.008, "loss rate {rate}");
    let bursts = got.windows(2).filter(|w| w[0] && !w[1]).count() as f64;
    let mean_burst = lost / bursts;
    assert!((3.3..4.8).contains(&mean_burst), "mean burst {mean_burst}");
    // Bernoulli at the same rate has mean bursts near 1 / (1 - 0.0385) ≈ 1.04.
}

#[test]
fn duplication_sends_two_copies() {
    let (mut s, a, b) = link(
        Impairments {
            duplicate: Chance { probability: 1.0, correlation: 0.0 },
            delay_ns: MS,
            ..imp()
        },
        imp(),
    );
    for i in 0..3 {
        s.send(0, a, udp(64, i));
    }
    s.finish();
    assert_eq!(s.arrivals(b).iter().map(|x| x.1).collect::<Vec<_>>(), vec![0, 0, 1, 1, 2, 2]);
    let st = s.stats(Target::Link(0), 0);
    assert_eq!((st.duplicated, st.tx_frames), (3, 6));
}

#[test]
fn corruption_flips_exactly_one_bit() {
    let (mut s, a, b) = link(
        Impairments { corrupt: Chance { probability: 1.0, correlation: 0.0 }, ..imp() },
        imp(),
    );
    let mut sent = Vec::new();
    for i in 0..100u32 {
        let f = udp(200, i);
        sent.push(f.clone());
        s.send(i as u64, a, f);
    }
    s.finish();
    let out: Vec<&Frame> = s.out.iter().filter(|o| o.1 == b).map(|o| &o.2).collect();
    assert_eq!(out.len(), 100);
    for (f, o) in sent.iter().zip(out) {
        let flipped: u32 = f.iter().zip(o.iter()).map(|(x, y)| (x ^ y).count_ones()).sum();
        assert_eq!(flipped, 1);
    }
    assert_eq!(s.stats(Target::Link(0), 0).corrupted, 100);
}

#[test]
fn reordered_frames_skip_the_delay() {
    let r = Reorder { probability: 1.0, correlation: 0.0, gap: 5 };
    let (mut s, a, b) = link(Impairments { delay_ns: 10 * MS, reorder: r, ..imp() }, imp());
    for i in 0..10u32 {
        s.send(i as u64 * MS, a, udp(64, i));
    }
    s.finish();
    // Every 5th frame (gap 5) goes at once and overtakes the frames delayed before it.
    let arr = s.arrivals(b);
    assert_eq!(arr.iter().map(|x| x.1).collect::<Vec<_>>(), vec![4, 9, 0, 1, 2, 3, 5, 6, 7, 8]);
    assert!(arr.contains(&(4 * MS, 4)) && arr.contains(&(9 * MS, 9)));
    assert!(arr.contains(&(10 * MS, 0)));
}

#[test]
fn mtu_drops_larger_frames_and_counts_them() {
    let (mut s, a, b) = link(Impairments { mtu: Some(1000), ..imp() }, imp());
    s.send(0, a, udp(1014, 1)); // 1000 bytes of IP: fits
    s.send(0, a, udp(1015, 2));
    let mut tagged = udp(1018, 3); // 802.1Q: 4 more bytes allowed
    tagged[VNET_HDR_LEN + 12..VNET_HDR_LEN + 14].copy_from_slice(&[0x81, 0x00]);
    s.send(0, a, tagged);
    s.finish();
    assert_eq!(s.arrivals(b).len(), 2);
    assert_eq!(s.stats(Target::Link(0), 0).drop_mtu, 1);
}

#[test]
fn the_interface_mtu_holds_without_an_mtu_impairment() {
    // A node raised its interface's MTU to 65521 and sent a 60 KB frame: a "1500" wire
    // must not carry it.
    let mut core = Core::new();
    let [a, b] = core.add_link(LinkConfig { mtu: 1500, ..Default::default() });
    let mut s = Sim::new(core);
    s.send(0, a, udp(1514, 1));
    s.send(0, a, udp(60_000, 2));
    s.finish();
    assert_eq!(s.arrivals(b), vec![(0, 1)]);
    assert_eq!(s.stats(Target::Link(0), 0).drop_mtu, 1);
    // A direction's own mtu wins over the interface's.
    let mut core = Core::new();
    let [a, b] = core.add_link(LinkConfig {
        mtu: 1500,
        forward: Impairments { mtu: Some(9000), ..imp() },
        ..Default::default()
    });
    let mut s = Sim::new(core);
    s.send(0, a, udp(9014, 1));
    s.finish();
    assert_eq!(s.arrivals(b).len(), 1);
    // LAN ports too.
    let mut core = Core::new();
    let p = core.add_segment(SegmentConfig {
        members: (0..2)
            .map(|_| MemberConfig { vlan: 1, mtu: 1500, ..Default::default() })
            .collect(),
        capacity_bps: None,
        aging_ns: MS,
        radio: None,
        ..Default::default()
    });
    let mut s = Sim::new(core);
    s.send(0, p[0], eth([0xff; 6], mac(10), 4000, 1));
    s.finish();
    assert!(s.out.is_empty());
    assert_eq!(s.stats(Target::Member(0, 0), 0).drop_mtu, 1);
}

#[test]
fn patch_mid_stream_keeps_scheduled_frames() {
    let (mut s, a, b) = link(delay(10 * MS), imp());
    s.send(0, a, udp(64, 0));
    s.send(MS, a, udp(64, 1));
    let r = s.apply(Command::Patch {
        target: Target::Link(0),
        dir: 0,
        patch: ImpairmentsPatch { delay_ns: Some(MS), ..Default::default() },
    });
    assert_eq!(r, Applied::Impairments(Box::new(delay(MS))));
    s.send(2 * MS, a, udp(64, 2));
    s.finish();
    // The frame sent after the change may not overtake those already in flight.
    assert_eq!(s.arrivals(b), vec![(10 * MS, 0), (11 * MS, 1), (11 * MS, 2)]);
    s.send(20 * MS, a, udp(64, 3));
    s.finish();
    assert_eq!(s.arrivals(b).last(), Some(&(21 * MS, 3)));
    assert_eq!(s.core.impairments(Target::Link(0), 0).delay_ns, MS);
    assert_eq!(s.core.impairments(Target::Link(0), 1).delay_ns, 0);
}

#[test]
fn rate_change_takes_effect_for_the_next_frame() {
    let (mut s, a, b) = link(rate(8_000_000), imp());
    s.send(0, a, udp(1000, 0));
    s.apply(Command::Patch {
        target: Target::Link(0),
        dir: 0,
        patch: ImpairmentsPatch { rate_bps: Some(Some(80_000_000)), ..Default::default() },
    });
    s.send(0, a, udp(1000, 1));
    s.finish();
    assert_eq!(s.times(b), vec![MS, MS + 100 * US]);
}

#[test]
fn link_down_drops_and_drops_carrier_then_recovers() {
    let (mut s, a, b) = link(imp(), imp());
    s.apply(Command::SetUp { target: Target::Link(0), up: false });
    let carriers: Vec<(PortId, bool)> = s
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Carrier { port, up } => Some((*port, *up)),
            _ => None,
        })
        .collect();
    assert_eq!(carriers, vec![(a, false), (b, false)]);
    s.send(0, a, udp(64, 0));
    s.send(0, b, udp(64, 1));
    s.finish();
    assert!(s.out.is_empty());
    assert_eq!(s.stats(Target::Link(0), 0).drop_down, 1);
    assert_eq!(s.stats(Target::Link(0), 1).drop_down, 1);
    s.apply(Command::SetUp { target: Target::Link(0), up: true });
    assert!(matches!(s.events.last(), Some(Event::Carrier { up: true, .. })));
    s.send(MS, a, udp(64, 2));
    s.finish();
    assert_eq!(s.arrivals(b), vec![(MS, 2)]);
}

#[test]
fn counters_count_wire_frames_and_refused_writes() {
    let (mut s, a, b) = link(imp(), imp());
    s.send(0, a, udp(100, 0));
    s.send(0, a, udp(200, 1));
    s.finish();
    s.refuse.push(b);
    s.send(MS, a, udp(300, 2));
    s.finish();
    let st = s.stats(Target::Link(0), 0);
    assert_eq!((st.rx_frames, st.rx_bytes), (3, 600));
    assert_eq!((st.tx_frames, st.tx_bytes, st.write_errors), (2, 300, 1));
}

#[test]
fn delay_histogram_buckets_the_time_held() {
    let (mut s, a, _b) = link(delay(3 * MS), imp());
    for i in 0..7 {
        s.send(0, a, udp(64, i));
    }
    s.finish();
    let h = s.stats(Target::Link(0), 0).delay_hist;
    let i = vemu_core::counters::DELAY_BUCKETS_NS.iter().position(|&b| b == 5 * MS).unwrap();
    assert_eq!(h[i], 7);
    assert_eq!(h.iter().sum::<u64>(), 7);
}

#[test]
fn lateness_is_measured_against_the_schedule() {
    let (mut s, a, _b) = link(delay(MS), imp());
    s.core.handle_frame(0, a, udp(64, 0));
    s.core.handle_frame(0, a, udp(64, 1));
    // The driver comes 3 ms late for the first frame, on time for nothing.
    let tx = s.core.poll_transmit(4 * MS).unwrap();
    s.core.on_written(&tx, true);
    assert_eq!(tx.at_ns, MS);
    let tx = s.core.poll_transmit(4 * MS).unwrap();
    s.core.on_written(&tx, true);
    let st = s.stats(Target::Link(0), 0);
    assert_eq!(st.late_max_ns, 3 * MS);
    let i = vemu_core::counters::DELAY_BUCKETS_NS.iter().position(|&b| b == 5 * MS).unwrap();
    assert_eq!(st.late_hist[i], 2);
}

#[test]
fn nothing_is_handed_out_early() {
    let (mut s, a, _b) = link(delay(MS), imp());
    s.core.handle_frame(0, a, udp(64, 0));
    assert_eq!(s.core.poll_timeout(), Some(MS));
    assert!(s.core.poll_transmit(MS - 1).is_none());
    assert!(s.core.poll_transmit(MS).is_some());
    assert_eq!(s.core.poll_timeout(), None);
}

/// Issue 65 #3: a flow of a direction (here EF-marked frames) takes its own pipe — its
/// delay, without the direction's rate — while the other frames keep theirs, untouched by
/// it; removed at run time, the flow's frames take the direction's pipe again.
#[test]
fn a_flow_class_delays_only_its_flow() {
    use vemu_link::Flow;
    use vemu_qos::classify::Match;
    let ef = Flow {
        matches: Match { dscp: vec![46], ..Default::default() },
        impairments: Impairments { delay_ns: 50 * MS, ..imp() },
    };
    let main =
        Impairments { rate_bps: Some(8_000_000), delay_ns: 10 * MS, flows: vec![ef], ..imp() };
    let (mut s, a, b) = link(main, imp());
    // Best effort and EF frames of 1000 bytes, all at once: 1 ms each at 8 Mbit/s.
    for i in 0..4u32 {
        s.send(0, a, ipv4_dscp(0, 1000, i));
        s.send(0, a, ipv4_dscp(46, 1000, 100 + i));
    }
    s.finish();
    let got: Vec<(u64, u32)> =
        s.out.iter().filter(|o| o.1 == b).map(|o| (o.0, qos_seq(&o.2))).collect();
    let mut want: Vec<(u64, u32)> = (0..4u32).map(|i| ((i as u64 + 1) * MS + 10 * MS, i)).collect();
    want.extend((0..4u32).map(|i| (50 * MS, 100 + i)));
    let mut got_sorted = got.clone();
    got_sorted.sort_by_key(|&(t, q)| (q >= 100, t, q));
    assert_eq!(got_sorted, want, "{got:?}");
    // Every frame counted on the direction.
    assert_eq!(s.stats(Target::Link(0), 0).rx_frames, 8);
    // Without the flow, EF frames queue behind best effort at the direction's rate.
    s.apply(Command::Patch {
        target: Target::Link(0),
        dir: 0,
        patch: ImpairmentsPatch { flows: Some(Vec::new()), ..Default::default() },
    });
    s.send(100 * MS, a, ipv4_dscp(0, 1000, 10));
    s.send(100 * MS, a, ipv4_dscp(46, 1000, 110));
    s.finish();
    let late: Vec<(u64, u32)> =
        s.out.iter().filter(|o| o.1 == b && o.0 > 100 * MS).map(|o| (o.0, qos_seq(&o.2))).collect();
    assert_eq!(late, vec![(111 * MS, 10), (112 * MS, 110)]);
}

/// A flow matched by ICMP type: echo requests lost, other frames through.
#[test]
fn a_flow_by_icmp_type_loses_only_echo_requests() {
    use vemu_link::{Flow, Loss};
    use vemu_qos::classify::Match;
    let lossy = Flow {
        matches: Match { proto: Some(1), icmp_type: Some(8), ..Default::default() },
        impairments: Impairments { loss: Loss::Bernoulli { rate: 1.0, correlation: 0.0 }, ..imp() },
    };
    let (mut s, a, b) = link(Impairments { flows: vec![lossy], ..imp() }, imp());
    let icmp = |ty: u8, seq: u32| {
        let mut f = ipv4_dscp(0, 100, seq);
        let ip = VNET_HDR_LEN + 14;
        f[ip + 9] = 1; // ICMP
        f[ip + 20] = ty;
        f
    };
    s.send(0, a, icmp(8, 1));
    s.send(0, a, icmp(0, 2));
    s.send(0, a, ipv4_dscp(0, 100, 3));
    s.finish();
    let got: Vec<u32> = s.out.iter().filter(|o| o.1 == b).map(|o| qos_seq(&o.2)).collect();
    assert_eq!(got, vec![2, 3]);
    assert_eq!(s.stats(Target::Link(0), 0).drop_loss, 1);
}
