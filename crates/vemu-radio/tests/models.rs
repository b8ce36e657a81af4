use vemu_radio::mobility::{Area, RandomWaypoint, Walker};
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
    assert!((dbm(m.mean_rx_power_w(&r, 200.0)) - dbm(m.mean_rx_power_w(&r, 400.0)) - 12.041).abs() < 1e-3);
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
    assert!((dbm(l.mean_rx_power_w(&r, 10.0)) - dbm(l.mean_rx_power_w(&r, 100.0)) - 30.0).abs() < 1e-9);
    // At the mean range, half the frames arrive; 1 σ closer, 84%.
    let d50 = l.range_m(&r);
    assert!((l.delivery_probability(&r, d50) - 0.5).abs() < 1e-6);
    let d1 = d50 / 10f64.powf(4.0 / 30.0);
    assert!((l.delivery_probability(&r, d1) - 0.841_344_7).abs() < 1e-6);
    // erfc itself.
    assert!((erfc(0.0) - 1.0).abs() < 1e-7 && (erfc(1.0) - 0.157_299_2).abs() < 1e-6 && (erfc(-1.0) - 1.842_700_8).abs() < 1e-6);
}

#[test]
fn random_waypoint_stays_in_the_area_respects_speeds_and_pauses() {
    let model = RandomWaypoint { area: Area { width_m: 1500.0, height_m: 300.0 }, min_speed_mps: 1.0, max_speed_mps: 20.0, pause_ns: 2_000_000_000 };
    let mut w = Walker::new(model, Pos::new(10.0, 10.0), 7);
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
    let mut w2 = Walker::new(model, Pos::new(10.0, 10.0), 7);
    assert_eq!(w2.advance(1_999_999_999), Pos::new(10.0, 10.0));
    assert!(w2.advance(2_100_000_000) != Pos::new(10.0, 10.0));
}

#[test]
fn same_seed_same_trace() {
    let model = RandomWaypoint { area: Area { width_m: 500.0, height_m: 500.0 }, min_speed_mps: 0.0, max_speed_mps: 10.0, pause_ns: 0 };
    let trace = |seed| {
        let mut w = Walker::new(model, Pos::new(0.0, 0.0), seed);
        (1..=1000u64).map(|k| w.advance(k * 50_000_000)).collect::<Vec<_>>()
    };
    assert_eq!(trace(3), trace(3));
    assert_ne!(trace(3), trace(4));
    // Advancing in big or small steps reaches the same place.
    let mut a = Walker::new(model, Pos::new(0.0, 0.0), 9);
    let mut b = Walker::new(model, Pos::new(0.0, 0.0), 9);
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
    let t = ns2::parse(text).unwrap();
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
    let e = ns2::parse("$node_(0) set X_ 1\n$ns_ at 1 \"$node_(0) setdest 1 2\"\n").unwrap_err();
    assert_eq!(e.line, 2);
    assert!(e.message.contains("setdest X Y SPEED"), "{e:?}");
    assert_eq!(ns2::parse("hello").unwrap_err().line, 1);
}
