use vemu_radio::mobility::{Area, Mobility, RandomWaypoint, Walker};
use vemu_radio::propagation::{erfc, Model, Radio};
use vemu_radio::{dbm, Pos};

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs()
}

#[test]
fn free_space_is_friis() {
    // 1 W at 2.4 GHz, unit gains: Pr = (λ / 4πd)² W.
    let r = Radio { tx_power_w: 1.0, frequency_hz: 2.4e9, ..Radio::default() };
    let lambda = 299_792_458.0 / 2.4e9;
    for d in [1.0, 10.0, 100.0, 1000.0] {
        let want = (lambda / (4.0 * std::f64::consts::PI * d)).powi(2);
        assert!(close(Model::FreeSpace.mean_rx_power_w(&r, d), want, 1e-12), "{d}");
    }
    // Textbook figure: 1 W (30 dBm) at 2.4 GHz over 100 m arrives at -50.05 dBm.
    assert!((dbm(Model::FreeSpace.mean_rx_power_w(&r, 100.0)) - (-50.05)).abs() < 0.01);
    // 6 dB less per doubling of distance.
    let a = dbm(Model::FreeSpace.mean_rx_power_w(&r, 50.0));
    let b = dbm(Model::FreeSpace.mean_rx_power_w(&r, 100.0));
    assert!((a - b - 6.0206).abs() < 1e-3);
}

#[test]
fn two_ray_ground_gives_ns2s_250_m_range() {
    let r = Radio::default();
    let m = Model::TwoRayGround;
    // Beyond the crossover (~86 m at 914 MHz, 1.5 m antennas): Pt ht² hr² / d⁴.
    let p250 = m.mean_rx_power_w(&r, 250.0);
    assert!(close(p250, 0.281_838_15 * 1.5f64.powi(4) / 250f64.powi(4), 1e-12));
    assert!(close(p250, 3.652e-10, 1e-3), "{p250}");
    assert!((m.range_m(&r) - 250.0).abs() < 0.1, "{}", m.range_m(&r));
    // 12 dB less per doubling of distance beyond the crossover.
    assert!(
        (dbm(m.mean_rx_power_w(&r, 200.0)) - dbm(m.mean_rx_power_w(&r, 400.0)) - 12.041).abs()
            < 1e-3
    );
    // Friis below the crossover.
    assert_eq!(m.mean_rx_power_w(&r, 50.0), Model::FreeSpace.mean_rx_power_w(&r, 50.0));
    assert_eq!(m.delivery_probability(&r, 249.0), 1.0);
    assert_eq!(m.delivery_probability(&r, 251.0), 0.0);
}

#[test]
fn unit_disk_and_log_distance_with_shadowing() {
    let r = Radio::default();
    let u = Model::UnitDisk { range_m: 250.0 };
    assert_eq!((u.delivery_probability(&r, 250.0), u.delivery_probability(&r, 250.1)), (1.0, 0.0));
    let l = Model::LogDistance { exponent: 3.0, d0_m: 1.0, sigma_db: 4.0 };
    // 30 dB per decade beyond d0.
    assert!(
        (dbm(l.mean_rx_power_w(&r, 10.0)) - dbm(l.mean_rx_power_w(&r, 100.0)) - 30.0).abs() < 1e-9
    );
    // At the mean range, half the frames arrive; 1 σ closer, 84%.
    let d50 = l.range_m(&r);
    assert!((l.delivery_probability(&r, d50) - 0.5).abs() < 1e-6);
    let d1 = d50 / 10f64.powf(4.0 / 30.0);
    assert!((l.delivery_probability(&r, d1) - 0.841_344_7).abs() < 1e-6);
    // erfc itself.
    assert!(
        (erfc(0.0) - 1.0).abs() < 1e-7
            && (erfc(1.0) - 0.157_299_2).abs() < 1e-6
            && (erfc(-1.0) - 1.842_700_8).abs() < 1e-6
    );
}

#[test]
fn random_waypoint_stays_in_the_area_respects_speeds_and_pauses() {
    let model = RandomWaypoint {
        area: Area { width_m: 1500.0, height_m: 300.0 },
        min_speed_mps: 1.0,
        max_speed_mps: 20.0,
        pause_ns: 2_000_000_000,
    };
    let mut w = Walker::new(Mobility::RandomWaypoint(model), Pos::new(10.0, 10.0), 7);
    let step = 100_000_000u64; // 100 ms
    let mut prev = w.position();
    let mut still_steps = 0;
    let mut moved = 0.0;
    for k in 1..=20_000u64 {
        let p = w.advance(k * step);
        assert!(model.area.contains(p), "{p:?}");
        let d = p.distance(prev);
        assert!(d <= 20.0 * 0.1 + 1e-9, "moved {d} m in 100 ms");
        if d == 0.0 {
            still_steps += 1;
        }
        moved += d;
        prev = p;
    }
    // Pauses of 2 s happen (20 steps of standing still each) and the node gets around.
    assert!(still_steps >= 20, "{still_steps}");
    assert!(moved > 10_000.0, "{moved}");
    // First 2 s: the initial pause.
    let mut w2 = Walker::new(Mobility::RandomWaypoint(model), Pos::new(10.0, 10.0), 7);
    assert_eq!(w2.advance(1_999_999_999), Pos::new(10.0, 10.0));
    assert!(w2.advance(2_100_000_000) != Pos::new(10.0, 10.0));
}

#[test]
fn same_seed_same_trace() {
    let model = RandomWaypoint {
        area: Area { width_m: 500.0, height_m: 500.0 },
        min_speed_mps: 0.0,
        max_speed_mps: 10.0,
        pause_ns: 0,
    };
    let trace = |seed| {
        let mut w = Walker::new(Mobility::RandomWaypoint(model), Pos::new(0.0, 0.0), seed);
        (1..=1000u64).map(|k| w.advance(k * 50_000_000)).collect::<Vec<_>>()
    };
    assert_eq!(trace(3), trace(3));
    assert_ne!(trace(3), trace(4));
    // Advancing in big or small steps reaches the same place.
    let mut a = Walker::new(Mobility::RandomWaypoint(model), Pos::new(0.0, 0.0), 9);
    let mut b = Walker::new(Mobility::RandomWaypoint(model), Pos::new(0.0, 0.0), 9);
    for k in 1..=100u64 {
        a.advance(k * 10_000_000);
    }
    let (pa, pb) = (a.advance(1_000_000_000), b.advance(1_000_000_000));
    assert!(pa.distance(pb) < 1e-6, "{pa:?} {pb:?}");
}

#[test]
fn ns2_movement_files_replay_to_exact_positions() {
    use vemu_radio::ns2;
    let text = r#"
# nodes: 2, pause: 0.0, max speed: 10.0
$node_(0) set X_ 100.0
$node_(0) set Y_ 50.0
$node_(0) set Z_ 0.0
$node_(1) set X_ 0.0
$node_(1) set Y_ 0.0
$ns_ at 1.0 "$node_(0) setdest 200.0 50.0 10.0"
$ns_ at 2.0 "$node_(1) setdest 30.0 40.0 5.0"
$ns_ at 3.0 "$node_(0) setdest 150.0 50.0 20.0"
"#;
    let t = ns2::parse(text, ns2::MAX_NODES).unwrap();
    assert_eq!(t.len(), 2);
    let s = |x: f64| (x * 1e9) as u64;
    // Node 0: still until 1 s, then +10 m/s along x; redirected at 3 s (at x = 120)
    // back toward 150 at 20 m/s: there at 4.5 s, then stays.
    assert_eq!(t[0].position_at(s(0.5)), Pos::new(100.0, 50.0));
    assert_eq!(t[0].position_at(s(2.0)), Pos::new(110.0, 50.0));
    assert_eq!(t[0].position_at(s(3.0)), Pos::new(120.0, 50.0));
    assert_eq!(t[0].position_at(s(4.0)), Pos::new(140.0, 50.0));
    assert_eq!(t[0].position_at(s(10.0)), Pos::new(150.0, 50.0));
    // Node 1: 50 m toward (30, 40) at 5 m/s from 2 s: 15 m done at 5 s, arrived at 12 s.
    assert_eq!(t[1].position_at(s(5.0)), Pos::new(9.0, 12.0));
    assert_eq!(t[1].position_at(s(12.0)), Pos::new(30.0, 40.0));
    assert_eq!(t[1].position_at(s(100.0)), Pos::new(30.0, 40.0));
    let e = ns2::parse("$node_(0) set X_ 1\n$ns_ at 1 \"$node_(0) setdest 1 2\"\n", ns2::MAX_NODES)
        .unwrap_err();
    assert_eq!(e.line, 2);
    assert!(e.message.contains("setdest X Y SPEED"), "{e:?}");
    assert_eq!(ns2::parse("hello", ns2::MAX_NODES).unwrap_err().line, 1);
}

#[test]
fn ns2_hostile_node_indices_are_refused_with_their_line() {
    // 28 bytes that once asked for 50 million traces, an index that overflowed, 10^12.
    for idx in ["50000000", "18446744073709551615", "1000000000000", "18446744073709551616"] {
        let text = format!("# x\n$node_({idx}) set X_ 1.0\n");
        let e = vemu_radio::ns2::parse(&text, 5).unwrap_err();
        assert_eq!(e.line, 2, "{e:?}");
        assert!(e.message.contains("bad node reference"), "{e:?}");
        let e = vemu_radio::ns2::parse(
            &format!("$ns_ at 1.0 \"$node_({idx}) setdest 1 2 3\"\n"),
            vemu_radio::ns2::MAX_NODES,
        )
        .unwrap_err();
        assert_eq!(e.line, 1);
    }
    assert_eq!(vemu_radio::ns2::parse("$node_(4) set X_ 1.0\n", 5).unwrap().len(), 5);
    assert!(vemu_radio::ns2::parse("$node_(5) set X_ 1.0\n", 5).is_err());
}

fn walker_stays_inside(model: Mobility, max_speed: f64) -> f64 {
    let area = Area { width_m: 400.0, height_m: 200.0 };
    let mut w = Walker::new(model, Pos::new(200.0, 100.0), 11);
    let mut prev = w.position();
    let mut moved = 0.0;
    for k in 1..=20_000u64 {
        let p = w.advance(k * 50_000_000);
        assert!(area.contains(p), "{p:?}");
        let d = p.distance(prev);
        assert!(d <= max_speed * 0.05 + 1e-6, "moved {d} m in 50 ms");
        moved += d;
        prev = p;
    }
    moved
}

#[test]
fn random_walk_direction_and_gauss_markov_stay_in_the_area() {
    let area = Area { width_m: 400.0, height_m: 200.0 };
    let rd =
        RandomWaypoint { area, min_speed_mps: 2.0, max_speed_mps: 5.0, pause_ns: 1_000_000_000 };
    // 1000 s at 2..5 m/s: a walker that gets stuck at an edge would not cover this.
    assert!(walker_stays_inside(Mobility::RandomDirection(rd), 5.0) > 1000.0);
    let rw = Mobility::RandomWalk {
        area,
        min_speed_mps: 1.0,
        max_speed_mps: 10.0,
        interval_ns: 3_000_000_000,
    };
    assert!(walker_stays_inside(rw, 10.0) > 3000.0);
    let gm = Mobility::GaussMarkov {
        area,
        mean_speed_mps: 5.0,
        alpha: 0.75,
        speed_sigma_mps: 1.0,
        heading_sigma_rad: 0.5,
        interval_ns: 1_000_000_000,
    };
    // Speeds are unbounded normal draws; 5 m/s mean, σ 1: well under 12 m/s.
    let moved = walker_stays_inside(gm, 12.0);
    assert!((3000.0..6500.0).contains(&moved), "{moved}");
    // Random direction ends every leg at the edge of the area.
    let mut w = Walker::new(
        Mobility::RandomDirection(RandomWaypoint { pause_ns: 5_000_000_000, ..rd }),
        Pos::new(200.0, 100.0),
        5,
    );
    let (mut at_edge, mut elsewhere) = (0, 0);
    for k in 51..=4000u64 {
        let p = w.advance(k * 100_000_000);
        if w.speed_mps(k * 100_000_000) == 0.0 {
            if p.x < 1e-6 || p.y < 1e-6 || p.x > 400.0 - 1e-6 || p.y > 200.0 - 1e-6 {
                at_edge += 1;
            } else {
                elsewhere += 1;
            }
        }
    }
    assert!(at_edge >= 50 && elsewhere == 0, "{at_edge} {elsewhere}");
}

mod medium {
    use vemu_radio::medium::{Medium, MediumConfig, Outcome, CW_MIN, DIFS_NS, SLOT_NS};
    use vemu_radio::propagation::{Model, Radio};
    use vemu_radio::Pos;

    fn cfg(model: Model, csma: bool, seed: u64) -> MediumConfig {
        MediumConfig {
            model,
            radio: Radio::default(),
            rate_bps: 10_000_000,
            preamble_ns: 0,
            carrier_sense_m: 550.0,
            csma,
            queue_frames: 1000,
            seed,
            dcf: None,
            city: None,
            hub: None,
        }
    }

    /// Run until nothing is left; every outcome with its time.
    fn drain(m: &mut Medium) -> Vec<Outcome> {
        let mut out = Vec::new();
        while let Some(t) = m.next_event_ns() {
            m.advance(t, &mut out);
        }
        out
    }

    fn delivered(out: &[Outcome]) -> Vec<(u64, u32, u64)> {
        out.iter()
            .filter_map(|o| {
                if let Outcome::Deliver { id, receiver, at_ns } = *o {
                    Some((id, receiver, at_ns))
                } else {
                    None
                }
            })
            .collect()
    }

    #[test]
    fn airtime_is_shared_within_carrier_sense_range_and_reused_beyond() {
        let disk = Model::UnitDisk { range_m: 250.0 };
        // Two senders 100 m apart, each with 10 frames of 1250 bytes (1 ms at 10 Mbit/s).
        let mut m = Medium::new(cfg(disk, false, 1), &[Pos::new(0.0, 0.0), Pos::new(100.0, 0.0)]);
        for k in 0..10u64 {
            assert!(m.offer(0, 0, k, 1_000_000, None));
            assert!(m.offer(0, 1, 100 + k, 1_000_000, None));
        }
        let out = drain(&mut m);
        let d = delivered(&out);
        assert_eq!(d.len(), 20);
        // One at a time: the last frame arrives after 20 ms of airtime, none overlap.
        let mut ends: Vec<u64> = d.iter().map(|x| x.2).collect();
        ends.sort();
        for (k, e) in ends.iter().enumerate() {
            let want = (k as u64 + 1) * 1_000_000;
            assert!(e.abs_diff(want) < 1_000, "{k}: {e}");
        }
        // 2 km apart: both send at once, 10 ms for all.
        let mut m = Medium::new(
            cfg(disk, false, 1),
            &[
                Pos::new(0.0, 0.0),
                Pos::new(50.0, 0.0),
                Pos::new(2000.0, 0.0),
                Pos::new(2050.0, 0.0),
            ],
        );
        for k in 0..10u64 {
            m.offer(0, 0, k, 1_000_000, Some(1));
            m.offer(0, 2, 100 + k, 1_000_000, Some(3));
        }
        let d = delivered(&drain(&mut m));
        assert_eq!(d.len(), 20);
        assert!(d.iter().all(|x| x.2 <= 10_000_000 + 1_000), "{d:?}");
        // A full queue refuses frames.
        let mut m = Medium::new(
            MediumConfig { queue_frames: 3, ..cfg(disk, false, 1) },
            &[Pos::new(0.0, 0.0), Pos::new(1.0, 0.0)],
        );
        assert_eq!((0..5).map(|k| m.offer(0, 0, k, 1000, None)).filter(|&ok| ok).count(), 3);
    }

    #[test]
    fn neighbours_follow_positions() {
        let disk = Model::UnitDisk { range_m: 250.0 };
        let line: Vec<Pos> = (0..5).map(|i| Pos::new(i as f64 * 250.0, 0.0)).collect();
        let mut m = Medium::new(cfg(disk, false, 1), &line);
        let ids = |m: &Medium, i: u32| m.neighbours(i).iter().map(|n| n.member).collect::<Vec<_>>();
        assert_eq!(ids(&m, 0), vec![1]);
        assert_eq!(ids(&m, 2), vec![1, 3]);
        let mut moved = line.clone();
        moved[2] = Pos::new(500.0, 1000.0);
        m.set_positions(&moved);
        assert!(ids(&m, 2).is_empty() && ids(&m, 1) == vec![0]);
        // The grid finds what a comparison of every pair finds, in a big random field.
        let mut pts = Vec::new();
        let mut s = 12345u64;
        for _ in 0..2000 {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let x = (s >> 33) as f64 / (1u64 << 31) as f64 * 10_000.0;
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let y = (s >> 33) as f64 / (1u64 << 31) as f64 * 3_000.0;
            pts.push(Pos::new(x, y));
        }
        let m = Medium::new(cfg(disk, false, 1), &pts);
        for i in (0..2000).step_by(97) {
            let want: Vec<u32> = (0..2000u32)
                .filter(|&j| j != i && pts[i as usize].distance(pts[j as usize]) <= 250.0)
                .collect();
            assert_eq!(ids(&m, i), want);
        }
    }

    #[test]
    fn same_seed_same_decisions_and_loss_follows_the_model() {
        let ld = Model::LogDistance { exponent: 3.0, d0_m: 1.0, sigma_db: 6.0 };
        let run = |seed: u64| {
            let mut m = Medium::new(
                cfg(ld, false, seed),
                &[Pos::new(0.0, 0.0), Pos::new(80.0, 0.0), Pos::new(0.0, 120.0)],
            );
            let mut out = Vec::new();
            for k in 0..4000u64 {
                m.offer(k * 200_000, (k % 3) as u32, k, 100_000, None);
                m.advance(k * 200_000, &mut out);
            }
            out.extend(drain(&mut m));
            (delivered(&out).into_iter().map(|d| (d.0, d.1)).collect::<Vec<_>>(), m)
        };
        let (a, m) = run(7);
        let (b, _) = run(7);
        let (c, _) = run(8);
        assert_eq!(a, b);
        assert_ne!(a, c);
        // Each pair's delivery ratio is its probability, within 4 standard deviations.
        for ((s, r), pc) in m.pairs() {
            let p = m.neighbours(s).iter().find(|n| n.member == r).unwrap().delivery_probability;
            let n = pc.sent as f64;
            let sd = (p * (1.0 - p) / n).sqrt();
            let ratio = pc.delivered as f64 / n;
            assert!((ratio - p).abs() <= 4.0 * sd + 1e-9, "{s}->{r}: {ratio} vs {p} (n {n})");
            assert_eq!(pc.lost_collision, 0);
        }
    }

    #[test]
    fn csma_backs_off_and_hidden_terminals_collide() {
        let disk = Model::UnitDisk { range_m: 250.0 };
        // Two senders in range of each other: CSMA serialises them (a few same-slot
        // collisions at most), each wait at least DIFS.
        let mut m = Medium::new(
            MediumConfig { carrier_sense_m: 250.0, ..cfg(disk, true, 3) },
            &[Pos::new(0.0, 0.0), Pos::new(100.0, 0.0), Pos::new(50.0, 50.0)],
        );
        for k in 0..200u64 {
            m.offer(0, 0, k, 500_000, Some(2));
            m.offer(0, 1, 1000 + k, 500_000, Some(2));
        }
        let out = drain(&mut m);
        let d = delivered(&out);
        let pc: u64 = m.pairs().map(|(_, c)| c.lost_collision).sum();
        assert!(d.len() + pc as usize == 400 && pc < 60, "delivered {} collided {pc}", d.len());
        // Every transmission waits DIFS and on average CW/2 slots: 400 frames take longer
        // than their airtime alone, and not more than with the longest backoff each time.
        let (first, last) =
            (d.iter().map(|x| x.2).min().unwrap(), d.iter().map(|x| x.2).max().unwrap());
        assert!(first >= DIFS_NS + 500_000, "{first}");
        assert!(
            (400 * (500_000 + DIFS_NS)..=400 * (500_000 + DIFS_NS + CW_MIN * SLOT_NS))
                .contains(&last),
            "{last}"
        );
        // Hidden terminals: 0 and 2 are 400 m apart (out of carrier-sense range), both
        // send to 1 in the middle, at the same time: their frames collide at 1.
        let mut m = Medium::new(
            MediumConfig { carrier_sense_m: 250.0, ..cfg(disk, true, 3) },
            &[Pos::new(0.0, 0.0), Pos::new(200.0, 0.0), Pos::new(400.0, 0.0)],
        );
        for k in 0..50u64 {
            m.offer(0, 0, k, 2_000_000, Some(1));
            m.offer(0, 2, 1000 + k, 2_000_000, Some(1));
        }
        drain(&mut m);
        let lost: u64 = m.pairs().map(|(_, c)| c.lost_collision).sum();
        assert!(lost >= 90, "{lost}");
        // Without CSMA the channel is ideal: nothing collides.
        let mut m = Medium::new(
            MediumConfig { carrier_sense_m: 250.0, ..cfg(disk, false, 3) },
            &[Pos::new(0.0, 0.0), Pos::new(200.0, 0.0), Pos::new(400.0, 0.0)],
        );
        for k in 0..50u64 {
            m.offer(0, 0, k, 2_000_000, Some(1));
            m.offer(0, 2, 1000 + k, 2_000_000, Some(1));
        }
        assert_eq!(delivered(&drain(&mut m)).len(), 100);
    }
}

/// The walker follows a trace with a cursor (each move looked at once); it must agree
/// with replaying the trace from the start at every time.
#[test]
fn trace_cursor_agrees_with_replaying_from_the_start() {
    use vemu_radio::ns2::Trace;
    let mut moves = Vec::new();
    let mut rng = 7u64;
    let mut next = || {
        rng = vemu_radio::splitmix64(rng);
        rng
    };
    let mut t = 0u64;
    for _ in 0..500 {
        t += next() % 3_000_000_000;
        moves.push((
            t,
            vemu_radio::Pos::new((next() % 1000) as f64, (next() % 1000) as f64),
            (next() % 30) as f64,
        ));
    }
    let trace = Trace { start: vemu_radio::Pos::new(3.0, 4.0), moves };
    let mut walker = vemu_radio::mobility::Walker::new(
        vemu_radio::mobility::Mobility::Trace(trace.clone()),
        trace.start,
        0,
    );
    let mut now = 0u64;
    while now < t + 5_000_000_000 {
        let a = walker.advance(now);
        let b = trace.position_at(now);
        assert!(a.distance(b) < 1e-9, "at {now} ns: cursor {a:?}, replay {b:?}");
        now += next() % 700_000_000;
    }
}

/// NET's street mobility: on a Manhattan grid a node only ever stands on a street, turns
/// at crossings (never back but at a dead end), drives within its speeds and stops at
/// about the given share of crossings.
#[test]
fn street_mobility_keeps_to_the_streets() {
    use vemu_radio::city::City;
    use vemu_radio::mobility::Streets;
    let city = City::manhattan((5, 5), 100.0, 20.0, None);
    let st = Streets {
        roads: city.roads.clone(),
        min_speed_mps: 5.0,
        max_speed_mps: 15.0,
        stop_probability: 0.5,
        pause_ns: 3_000_000_000,
    };
    let mut w = Walker::new(Mobility::Streets(Box::new(st)), Pos::new(240.0, 333.0), 7);
    // It starts at the nearest crossing.
    assert_eq!(w.position(), Pos::new(200.0, 300.0));
    let (mut prev, mut moved_m, mut still) = (w.position(), 0.0, 0);
    let step_ns = 100_000_000;
    for i in 1..=36_000u64 {
        let p = w.advance(i * step_ns);
        let on_x = (p.x / 100.0 - (p.x / 100.0).round()).abs() < 1e-6;
        let on_y = (p.y / 100.0 - (p.y / 100.0).round()).abs() < 1e-6;
        assert!(on_x || on_y, "off the streets at {p:?}");
        assert!((0.0..=500.0).contains(&p.x) && (0.0..=500.0).contains(&p.y), "{p:?}");
        let d = p.distance(prev);
        assert!(d <= 15.0 * 0.1 + 1e-6, "{d} m in 100 ms");
        if d == 0.0 {
            still += 1;
        }
        moved_m += d;
        prev = p;
    }
    // An hour of 100 m streets: driven at 1/E[1/v] = 10/ln 3 = 9.10 m/s on average
    // (slow streets take longer), stopped 3 s at half the crossings.
    let (hour_s, still_s) = (3600.0, still as f64 * 0.1);
    let mean_speed = moved_m / (hour_s - still_s);
    let stops_s = moved_m / 100.0 * 0.5 * 3.0;
    eprintln!("{moved_m:.0} m in an hour, {mean_speed:.2} m/s driving, {still_s:.0} s stopped ({stops_s:.0} expected)");
    assert!((8.6..9.6).contains(&mean_speed), "{mean_speed}");
    assert!((still_s - stops_s).abs() < 0.3 * stops_s, "{still_s} s stopped");
}

/// NET's obstacles: a building between two members takes its walls' loss off the
/// signal (10 dB for two walls of 5), or every frame (opaque) — on the 802.11 channel
/// and on the simple medium alike; along the street they hear each other as before.
#[test]
fn a_building_between_two_members_weakens_or_blocks_them() {
    use vemu_radio::air::Air;
    use vemu_radio::city::City;
    use vemu_radio::medium::MediumConfig;
    use vemu_radio::wifi::phy::Standard;
    // Members on either side of the middle block of a 3x3 city (110-190 each way), and
    // a third along the street from the first.
    let pos = [Pos::new(100.0, 150.0), Pos::new(200.0, 150.0), Pos::new(100.0, 250.0)];
    let signal = |city: Option<City>, dcf: bool| {
        let mut cfg = MediumConfig::dcf_channel(Standard::B, Model::FreeSpace, Vec::new(), 3, 1);
        if !dcf {
            cfg.dcf = None;
        }
        cfg.city = city.map(Box::new);
        let air = Air::new(cfg, &pos);
        let find =
            |to: u32| air.neighbours(0).iter().find(|n| n.member == to).and_then(|n| n.signal_dbm);
        (find(1), find(2))
    };
    for dcf in [true, false] {
        let (open, street) = signal(None, dcf);
        let (walled, street_w) = signal(Some(City::manhattan((3, 3), 100.0, 20.0, Some(5.0))), dcf);
        let (opaque, street_o) = signal(Some(City::manhattan((3, 3), 100.0, 20.0, None)), dcf);
        let (open, walled) =
            (open.expect("heard in the open"), walled.expect("heard through walls"));
        assert!(
            (open - walled - 10.0).abs() < 1e-9,
            "dcf {dcf}: {open} dBm open, {walled} dBm through two walls"
        );
        assert_eq!(opaque, None, "dcf {dcf}: heard through an opaque building");
        assert_eq!(
            (street, street),
            (street_w, street_o),
            "dcf {dcf}: the street's member changed"
        );
    }
}

/// A received-power map is dark behind an opaque building, weaker farther along the street.
#[test]
fn a_power_map_is_dark_behind_an_opaque_building() {
    use vemu_radio::medium::MediumConfig;
    let mut cfg = MediumConfig::dcf_channel(
        vemu_radio::wifi::phy::Standard::G,
        Model::FreeSpace,
        Vec::new(),
        1,
        1,
    );
    cfg.city = Some(Box::new(vemu_radio::city::City::manhattan((3, 3), 100.0, 20.0, None)));
    // From the street west of the middle block, 30 x 30 cells of 10 m.
    let m = vemu_radio::air::power_map(
        &cfg,
        0,
        Pos::new(100.0, 150.0),
        (0.0, 0.0),
        (300.0, 300.0),
        10.0,
    );
    assert_eq!((m.cols, m.rows, m.dbm.len()), (30, 30, 900));
    let at = |x: f64, y: f64| m.dbm[(y / 10.0) as usize * 30 + (x / 10.0) as usize];
    assert_eq!(at(255.0, 155.0), None, "behind the middle block");
    let (near, far) = (at(105.0, 165.0).unwrap(), at(105.0, 285.0).unwrap());
    assert!(near > far && far > m.threshold_dbm, "{near} {far} {}", m.threshold_dbm);
}
