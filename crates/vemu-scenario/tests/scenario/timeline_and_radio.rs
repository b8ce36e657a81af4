//! The timeline, wireless segments, mobility and traces, fidelity thresholds.

use super::*;

#[test]
fn timeline_events_are_planned_and_checked() {
    use vemu_scenario::{Direction, EventAction, EventTarget};
    let base = "nodes: {a: {}, b: {}}\nlinks:\n  - endpoints: [a, b]\nevents:\n";
    let p = ok(&format!(
        "{base}  - {{at: 5s, link: a:b, set: {{delay: 100ms}}}}\n  - {{every: 10s, until: 60s, link: b:a, direction: forward, cycle: [{{bandwidth: 1Mbit}}, {{bandwidth: 10Mbit}}]}}\n  - {{at: 1s, link: a:b, ramp: {{from: {{delay: 10ms}}, to: {{delay: 200ms}}, over: 60s}}}}\n  - {{at: 2s, node: a, run: 'echo hi'}}\n  - {{at: 3s, node: b, state: stop}}\n  - {{at: 4s, link: a:b, state: down}}\n"
    ));
    assert_eq!(p.events.len(), 6);
    assert_eq!(p.events[0].at_ns, 5_000_000_000);
    assert_eq!(p.events[1].at_ns, 0);
    assert_eq!(p.events[1].every_ns, Some(10_000_000_000));
    assert_eq!(
        p.events[1].target,
        EventTarget::Link { spec: "b:a".into(), direction: Direction::Forward }
    );
    assert!(matches!(
        &p.events[2].action,
        EventAction::Ramp { over_ns: 60_000_000_000, step_ns: 1_000_000_000, .. }
    ));
    assert_eq!(p.events[4].action, EventAction::State(false));
    for (bad, want) in [
        ("  - {at: 1s, link: a:c, set: {delay: 1ms}}\n", "events[0]: no node named 'c'"),
        ("  - {at: 1s, node: z, run: x}\n", "unknown node 'z'"),
        ("  - {at: 1s, link: a:b}\n", "needs one action"),
        ("  - {at: 1s, link: a:b, set: {delay: 1ms}, state: up}\n", "one action, found"),
        ("  - {at: 1s, node: a, set: {delay: 1ms}}\n", "'set' does not apply to a node"),
        ("  - {at: 1s, link: a:b, state: stop}\n", "a link's state is 'up' or 'down'"),
        (
            "  - {at: 1s, link: a:b, ramp: {from: {delay: 1ms}, to: {loss: 1%}, over: 1s}}\n",
            "needs 'delay' in both",
        ),
        ("  - {at: 1s, link: a:b, cycle: [{loss: 1%}, {loss: 2%}]}\n", "a cycle needs 'every'"),
        ("  - {at: 1s, link: a:b, set: {loss: 150%}}\n", "between 0% and 100%"),
        ("  - {link: a:b, set: {loss: 1%}}\n", "needs 'at'"),
    ] {
        let m = one_error(&format!("{base}{bad}"));
        assert!(m.contains(want), "{bad}: {m}");
    }
}

#[test]
fn wireless_segments_plan_radios_positions_and_mobility() {
    use vemu_radio::mobility::Mobility;
    use vemu_radio::propagation::Model;
    let p = ok(RADIO);
    let g = &p.segments[0];
    let w = g.wireless.as_ref().expect("a wireless segment");
    // ns-2's defaults: two-ray ground, 250 m, 11 Mbit/s, no CSMA, carrier sense 2.2 × range.
    assert_eq!(w.medium.model, Model::TwoRayGround);
    assert!((w.medium.model.range_m(&w.medium.radio) - 250.0).abs() < 0.01);
    assert_eq!((w.medium.rate_bps, w.medium.csma, w.tick_ns), (11_000_000, false, 100_000_000));
    assert!((w.medium.carrier_sense_m - 550.0).abs() < 0.01);
    assert_eq!(w.radios[0].start, vemu_radio::Pos::new(10.0, 20.0));
    assert!(
        matches!(w.radios[0].mobility, Mobility::RandomWaypoint(m) if m.max_speed_mps == 20.0 && m.pause_ns == 2_000_000_000)
    );
    assert_eq!(w.radios[1].mobility, Mobility::Static);
    // Members without a position get a seeded place in the area, the same every time.
    let c = w.radios[2].start;
    assert!(c.x <= 1000.0 && c.y <= 200.0 && c != w.radios[1].start);
    assert_eq!(ok(RADIO).segments[0].wireless.as_ref().unwrap().radios[2].start, c);
    // One subnet for the channel; no static routes through it (routing daemons' job).
    assert!(p.nodes.iter().all(|n| n.ifaces.len() == 1 && n.routes.is_empty()));
    // Log-distance with its settings, CSMA and a given threshold.
    let p = ok("nodes: {a: {}, b: {}}\nsegments:\n  air: {kind: wireless, propagation: log-distance, exponent: 2.5, sigma: 3dB, rx_threshold: -80dBm, csma: true, standard: 802.11g, rate: 54Mbit, tick: 20ms, members: [{node: a, position: '0,0'}, {node: b, position: [1km, 0]}]}\n");
    let w = p.segments[0].wireless.as_ref().unwrap();
    assert_eq!(w.medium.model, Model::LogDistance { exponent: 2.5, d0_m: 1.0, sigma_db: 3.0 });
    assert!((vemu_radio::dbm(w.medium.radio.rx_threshold_w) + 80.0).abs() < 1e-9);
    assert!(w.medium.csma && w.medium.rate_bps == 54_000_000 && w.tick_ns == 20_000_000);
    assert_eq!(w.radios[1].start, vemu_radio::Pos::new(1000.0, 0.0));
    // `csma: true` is the 802.11 DCF: the standard's timing, the rate given, its
    // thresholds from the channel's.
    let d = w.medium.dcf.as_ref().expect("csma: true makes the DCF");
    assert_eq!(d.config.timing.standard, vemu_radio::wifi::phy::Standard::G);
    assert_eq!(d.config.rate, vemu_radio::wifi::rate::RateControl::Constant { mode: 7 });
    assert!((d.config.cca_pd_dbm + 80.0).abs() < 1e-9 && d.config.seed != 0);
    assert_eq!(d.stations.len(), 2);
}

#[test]
fn an_80211_segment_takes_its_standard_rates_retries_and_members_radios() {
    let p = ok("nodes: {a: {}, b: {}}\nsegments:\n  air:\n    kind: wireless\n    csma: true\n    standard: 802.11a\n    rate_control: aarf\n    rts_threshold: 500\n    short_retry: none\n    long_retry: 2\n    members: [{node: a, position: '0,0', channel: 40, tx_power: 15dBm, antenna_gain: 3dBi}, {node: b, position: '10,0', channel: 40}]\n");
    let d = p.segments[0].wireless.as_ref().unwrap().medium.dcf.clone().unwrap();
    assert_eq!(d.config.timing.standard, vemu_radio::wifi::phy::Standard::A);
    assert_eq!(d.config.rate, vemu_radio::wifi::rate::RateControl::Aarf);
    assert_eq!(
        (d.config.rts_threshold_bytes, d.config.short_retry_limit, d.config.long_retry_limit),
        (Some(500), None, Some(2))
    );
    assert_eq!((d.stations[0].channel, d.stations[1].channel), (40, 40));
    assert!(
        (d.stations[0].tx_power_dbm.unwrap() - 15.0).abs() < 1e-9
            && (d.stations[0].gain_dbi - 3.0).abs() < 1e-9
    );
    // Every timing and window value can be overridden: DIFS and EIFS follow a new slot.
    let p = ok("nodes: {a: {}, b: {}}\nsegments:\n  air: {kind: wireless, csma: true, standard: fhss, slot: 20us, cw_min: 15, cw_max: 255, ack_timeout: 128us, members: [{node: a, position: '0,0'}, {node: b, position: '10,0'}]}\n");
    let d = p.segments[0].wireless.as_ref().unwrap().medium.dcf.clone().unwrap();
    let t = &d.config.timing;
    assert_eq!((t.slot_ns, t.sifs_ns, t.difs_ns), (20_000, 28_000, 68_000));
    assert_eq!((t.cw_min, t.cw_max, d.config.ack_timeout_ns), (15, 255, Some(128_000)));
    assert_eq!(t.eifs_ns, 28_000 + 128_000 + 112_000 + 68_000, "SIFS + ACK at 1 Mbit/s + DIFS");
    let p = ok("nodes: {a: {}, b: {}}\nsegments:\n  air: {kind: wireless, csma: true, basic_rate: 2Mbit, members: [{node: a, position: '0,0'}, {node: b, position: '1,0'}]}\n");
    let t = p.segments[0].wireless.as_ref().unwrap().medium.dcf.clone().unwrap().config.timing;
    assert_eq!(t.basic_mode().rate_bps, 2_000_000, "802.11b's second rate");
    let e = bad("nodes: {a: {}, b: {}}\nsegments:\n  air: {kind: wireless, csma: true, basic_rate: 6Mbit, members: [{node: a, position: '0,0'}, {node: b, position: '1,0'}]}\n");
    assert!(e.to_string().contains("segments.air.basic_rate: 6 Mbit/s is not a rate of B"), "{e}");
    let p = ok("nodes: {a: {}, b: {}}\nsegments:\n  air: {kind: wireless, csma: true, standard: fhss, eifs: 128us, members: [{node: a, position: '0,0'}, {node: b, position: '1,0'}]}\n");
    let t = p.segments[0].wireless.as_ref().unwrap().medium.dcf.clone().unwrap().config.timing;
    assert_eq!((t.difs_ns, t.eifs_ns), (128_000, 128_000));
    let e = bad("nodes: {a: {}}\nsegments:\n  air: {kind: wireless, csma: true, cw_min: 63, cw_max: 31, members: [{node: a, position: '0,0'}]}\n");
    assert!(
        e.to_string().contains("segments.air.cw_min")
            && e.to_string().contains("cw_min 63 and cw_max 31"),
        "{e}"
    );
    // Hostile values: a huge time, a huge window, a negative one.
    let e = bad("nodes: {a: {}, b: {}}\nsegments:\n  air: {kind: wireless, csma: true, slot: 100000000h, ack_timeout: 2s, members: [{node: a, position: '0,0'}, {node: b, position: '1,0'}]}\n");
    assert!(
        e.to_string().contains("segments.air.slot: '100000000h' is longer than a second"),
        "{e}"
    );
    assert!(
        e.to_string().contains("segments.air.ack_timeout: '2s' is longer than a second"),
        "{e}"
    );
    let e = bad("nodes: {a: {}, b: {}}\nsegments:\n  air: {kind: wireless, csma: true, cw_max: 4294967295, members: [{node: a, position: '0,0'}, {node: b, position: '1,0'}]}\n");
    assert!(e.to_string().contains("expected cw_min <= cw_max <= 65535"), "{e}");
    let e = bad("nodes: {a: {}, b: {}}\nsegments:\n  air: {kind: wireless, csma: true, cw_min: -1, members: [{node: a, position: '0,0'}, {node: b, position: '1,0'}]}\n");
    assert!(e.to_string().contains("segments.air.cw_min: expected a number of slots"), "{e}");
    let e = bad("nodes: {a: {}}\nsegments:\n  air: {kind: wireless, csma: true, sifs: 10, members: [{node: a, position: '0,0'}]}\n");
    assert!(
        e.to_string().contains("segments.air.sifs") && e.to_string().contains("needs a unit"),
        "{e}"
    );
    // A unit disk's infinite powers make no threshold: the plan keeps finite ones (it
    // is written as JSON, where an infinity is null and does not read back).
    let p = ok("nodes: {a: {}, b: {}}\nsegments:\n  air: {kind: wireless, propagation: unit-disk, range: 250m, csma: true, members: [{node: a, position: '0,0'}, {node: b, position: '10,0'}]}\n");
    let c = &p.segments[0].wireless.as_ref().unwrap().medium.dcf.as_ref().unwrap().config;
    assert!([c.cca_pd_dbm, c.cca_ed_dbm, c.noise_dbm].iter().all(|x| x.is_finite()), "{c:?}");
    let json = serde_json::to_string(&p).unwrap();
    serde_json::from_str::<vemu_scenario::Plan>(&json).expect("the plan reads back");
    // Without csma: the old medium, and the MAC's keys refused naming them.
    let e = bad("nodes: {a: {}}\nsegments:\n  air: {kind: wireless, standard: 802.11a, members: [{node: a, position: '0,0', channel: 3}]}\n");
    let text = e.to_string();
    assert!(
        text.contains("segments.air.standard") && text.contains("needs 'csma: true'"),
        "{text}"
    );
    assert!(text.contains("segments.air.members[0].channel"), "{text}");
    // A rate the standard does not have.
    let e = bad("nodes: {a: {}}\nsegments:\n  air: {kind: wireless, csma: true, standard: 802.11b, rate: 54Mbit, members: [{node: a, position: '0,0'}]}\n");
    assert!(
        e.to_string()
            .contains("54 Mbit/s is not a rate of B: one of 1Mbit, 2Mbit, 5.5Mbit, 11Mbit"),
        "{e}"
    );
    let e = bad("nodes: {a: {}}\nsegments:\n  air: {kind: wireless, csma: true, standard: 802.11n, members: [{node: a, position: '0,0'}]}\n");
    assert!(
        e.to_string().contains("expected a standard: 802.11b, 802.11a, 802.11g or fhss"),
        "{e}"
    );
}

#[test]
fn wireless_errors_name_the_field() {
    let seg = |body: &str| {
        one_error(&format!(
            "nodes: {{a: {{}}, b: {{}}}}\nsegments:\n  air:\n    kind: wireless\n{body}"
        ))
    };
    each_error_says(
        seg,
        &[
            ("    propagation: rayleigh\n    members: [{node: a, position: [0, 0]}, {node: b, position: [1, 0]}]\n", "t.yaml:5:18: segments.air.propagation: unknown propagation model 'rayleigh'"),
            ("    members: [a, {node: b, position: [1, 0]}]\n", "segments.air.members[0]: member 'a' needs a 'position'"),
            ("    members: [{node: a, position: [-1, 0]}, {node: b, position: [1, 0]}]\n", "segments.air.members[0].position: expected a position like [100, 50]"),
            ("    mobility: {model: random-walk, speed: 1-5}\n    members: [{node: a, position: [0, 0]}, {node: b, position: [1, 0]}]\n", "segments.air.mobility: 'random-walk' needs the segment's 'area'"),
            ("    area: 100x100\n    mobility: {model: random-waypoint, speed: 20-5}\n    members: [a, b]\n", "segments.air.mobility.speed: expected a speed like 5 or a range like 0-20 (m/s), got '20-5'"),
            ("    area: 100x100\n    members: [a, {node: b, position: [150, 0]}]\n", "segments.air.members[1].position: (150, 0) is outside the area 100x100"),
            ("    capacity: 10Mbit\n    members: [{node: a, position: [0, 0]}, {node: b, position: [1, 0]}]\n", "segments.air.capacity: 'capacity' applies to 'kind: lan' segments only"),
            ("    tick: 5s\n    members: [{node: a, position: [0, 0]}, {node: b, position: [1, 0]}]\n", "segments.air.tick: tick must be between 1ms and 1s"),
            ("    trace: /nonexistent.tcl\n    members: [a, b]\n", "cannot read ns-2 trace '/nonexistent.tcl'"),
        ],
    );
    // A wrong position is said once, not also as a missing one.
    let m = seg("    members: [{node: a, position: [-1, 0]}, {node: b, position: [1, 0]}]\n");
    assert!(!m.contains("needs a 'position'"), "{m}");
    let m = one_error("nodes: {a: {}, b: {}}\nsegments:\n  lan: {members: [{node: a, position: [0, 0]}, b], range: 100m}\n");
    assert!(
        m.contains("segments.lan.range: 'range' applies to 'kind: wireless' segments only"),
        "{m}"
    );
    assert!(m.contains("segments.lan.members[0].position: 'position' applies to members of 'kind: wireless' segments only"), "{m}");
    let m = one_error("nodes:\n  a: {sysctl: {kernel.panic: 1}}\n");
    assert!(m.contains("t.yaml:2:16: nodes.a.sysctl.kernel.panic: 'kernel.panic' is not a network sysctl of the node"), "{m}");
}

#[test]
fn ns2_traces_move_members_by_order_or_by_map() {
    let dir = std::env::temp_dir().join("vemu-scenario-ns2");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("moves.tcl"), "$node_(0) set X_ 5.0\n$node_(0) set Y_ 6.0\n$node_(1) set X_ 7.0\n$node_(1) set Y_ 8.0\n$ns_ at 1.0 \"$node_(1) setdest 100.0 8.0 10.0\"\n").unwrap();
    let by_order = "nodes: {a: {}, b: {}}\nsegments:\n  air: {kind: wireless, trace: moves.tcl, members: [a, b]}\n";
    let mut p = vemu_scenario::load_str_in(by_order, "t.yaml", "t", None, Some(&dir))
        .unwrap_or_else(|e| panic!("{e}"));
    // The plan names the file; its moves are read when the lab starts.
    let json = serde_json::to_string(&p).unwrap();
    assert!(json.contains("moves.tcl") && !json.contains("100.0"), "{json}");
    p.load_traces().unwrap();
    let w = p.segments[0].wireless.as_ref().unwrap();
    assert_eq!(
        (w.radios[0].start, w.radios[1].start),
        (vemu_radio::Pos::new(5.0, 6.0), vemu_radio::Pos::new(7.0, 8.0))
    );
    let mut walker =
        vemu_radio::mobility::Walker::new(w.radios[1].mobility.clone(), w.radios[1].start, 0);
    assert_eq!(walker.advance(3_000_000_000), vemu_radio::Pos::new(27.0, 8.0));
    let by_map = "nodes: {a: {}, b: {}}\nsegments:\n  air: {kind: wireless, trace: {file: moves.tcl, nodes: {a: 1}}, members: [a, {node: b, position: [1, 1]}]}\n";
    let p = vemu_scenario::load_str_in(by_map, "t.yaml", "t", None, Some(&dir))
        .unwrap_or_else(|e| panic!("{e}"));
    let w = p.segments[0].wireless.as_ref().unwrap();
    assert_eq!(
        (w.radios[0].start, w.radios[1].start),
        (vemu_radio::Pos::new(7.0, 8.0), vemu_radio::Pos::new(1.0, 1.0))
    );
    let e = vemu_scenario::load_str_in(
        &by_map.replace("a: 1", "a: 7"),
        "t.yaml",
        "t",
        None,
        Some(&dir),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("segments.air.trace.nodes.a: the trace has no $node_(7) (it has 2 nodes)"),
        "{e}"
    );
    // A file that changed between the check and the lab's start is refused.
    let mut p = vemu_scenario::load_str_in(by_map, "t.yaml", "t", None, Some(&dir)).unwrap();
    std::fs::write(dir.join("moves.tcl"), "$node_(0) set X_ 5.0\n").unwrap();
    let e = p.load_traces().unwrap_err();
    assert!(
        e.contains("moves.tcl' of segment 'air' changed since the scenario was checked"),
        "{e}"
    );
}

#[test]
fn move_events_need_a_wireless_member() {
    use vemu_scenario::EventAction;
    let yaml = format!("{RADIO}events:\n  - {{at: 5s, node: a, move: [500, 100]}}\n  - {{at: 9s, node: b, move: {{to: '10,20', speed: 5}}}}\n");
    let p = ok(&yaml);
    assert_eq!(p.events[0].action, EventAction::Move { x_m: 500.0, y_m: 100.0, speed_mps: None });
    assert_eq!(
        p.events[1].action,
        EventAction::Move { x_m: 10.0, y_m: 20.0, speed_mps: Some(5.0) }
    );
    let m = one_error("nodes: {a: {}, b: {}}\nlinks: [{endpoints: [a, b]}]\nevents:\n  - {at: 1s, node: a, move: [1, 2]}\n");
    assert!(
        m.contains("events[0]: node 'a' is not a member of a wireless segment, so it cannot move"),
        "{m}"
    );
    let m = one_error(&format!("{RADIO}events:\n  - {{at: 1s, link: air:a, move: [1, 2]}}\n"));
    assert!(m.contains("'move' does not apply to a link"), "{m}");
    let m = one_error(&format!(
        "{RADIO}events:\n  - {{at: 1s, node: a, move: {{to: [1, 2], speed: -3}}}}\n"
    ));
    assert!(
        m.contains("events[0].move.speed: expected a speed in m/s greater than 0, got '-3'"),
        "{m}"
    );
}

#[test]
fn fidelity_thresholds() {
    let p = ok("nodes: {a: {}}\nfidelity: {late: 500us, degraded: 2%, invalid: 20%, min_frames: 10, busy: 80%}\n");
    let f = &p.fidelity;
    assert_eq!(
        (f.late_ns, f.degraded_fraction, f.invalid_fraction, f.min_frames, f.busy_fraction),
        (500_000, 0.02, 0.2, 10, 0.8)
    );
    assert_eq!(ok("nodes: {a: {}}\n").fidelity, vemu_scenario::FidelityThresholds::default());
    let m = one_error("nodes: {a: {}}\nfidelity: {busy: 0.8}\n");
    assert!(m.contains("t.yaml:2:18: fidelity.busy: '0.8' needs a % sign"), "{m}");
    let m = one_error("nodes: {a: {}}\nfidelity: {degraded: 20%, invalid: 10%}\n");
    assert!(m.contains("'invalid' must be at least 'degraded'"), "{m}");
}

/// Infrastructure mode (issue 64): an access point's and a station's keys, into the
/// DCF's roles; the wrong key for a role, a role without an SSID, an SSID no access
/// point serves, and roles without the 802.11 MAC are refused at the key.
#[test]
fn access_points_and_stations_take_their_keys_and_refuse_the_others() {
    use vemu_radio::wifi::bss::{Role, Scan};
    let plan = load_str(
        "nodes: {ap: {}, s1: {}, s2: {}, x: {}}\nsegments:\n  air:\n    kind: wireless\n    csma: true\n    members:\n      - {node: ap, position: [0, 0], role: ap, ssid: lab, beacon_interval: 50ms, isolation: true}\n      - {node: s1, position: [5, 0], role: station, ssid: lab, scan: passive, roam_threshold: -75dBm, hysteresis: 3dB, scan_interval: 500ms}\n      - {node: s2, position: [9, 0], role: station, ssid: lab}\n      - {node: x, position: [9, 9]}\n",
        "t.yaml",
        "t",
        None,
    )
    .unwrap();
    let w = plan.segments[0].wireless.as_ref().unwrap();
    let roles = &w.medium.dcf.as_ref().unwrap().roles;
    let Role::Ap(ap) = &roles[0] else { panic!("{roles:?}") };
    assert_eq!((ap.ssid.as_str(), ap.beacon_interval_ns, ap.isolation), ("lab", 50_000_000, true));
    let Role::Station(s) = &roles[1] else { panic!("{roles:?}") };
    assert_eq!(s.scan, Scan::Passive);
    assert!((s.roam_threshold_dbm + 75.0).abs() < 1e-9 && s.hysteresis_db == 3.0);
    assert_eq!(s.scan_interval_ns, 500_000_000);
    assert_eq!(roles[3], Role::AdHoc);
    // Static routes cross an infrastructure channel, as a LAN.
    assert!(plan.segments[0].routed());

    let seg = |members: &str| {
        one_error(&format!(
            "nodes: {{a: {{}}, b: {{}}}}\nsegments:\n  air:\n    kind: wireless\n    csma: true\n    members:\n{members}"
        ))
    };
    each_error_says(
        seg,
        &[
            ("      - {node: a, position: [0, 0], role: router}\n      - {node: b, position: [1, 0]}\n", "segments.air.members[0].role: expected ap, station or adhoc, got 'router'"),
            ("      - {node: a, position: [0, 0], role: ap}\n      - {node: b, position: [1, 0]}\n", "segments.air.members[0].ssid: a member with 'role: ap' needs an 'ssid'"),
            ("      - {node: a, position: [0, 0], role: ap, ssid: lab}\n      - {node: b, position: [1, 0], role: station, ssid: other}\n", "segments.air.members[1].ssid: no access point of this segment has SSID 'other'"),
            ("      - {node: a, position: [0, 0], role: station}\n      - {node: b, position: [1, 0]}\n", "segments.air.members[0].role: a station needs an access point ('role: ap') on its segment"),
            ("      - {node: a, position: [0, 0], role: ap, ssid: lab, scan: active}\n      - {node: b, position: [1, 0]}\n", "segments.air.members[0].scan: 'scan' is a station's ('role: station'), and this member's role is ap"),
            ("      - {node: a, position: [0, 0], ssid: lab}\n      - {node: b, position: [1, 0]}\n", "segments.air.members[0].ssid: 'ssid' is an access point's or a station's, and this member's role is adhoc"),
            ("      - {node: a, position: [0, 0], role: ap, ssid: lab, beacon_interval: 1us}\n      - {node: b, position: [1, 0]}\n", "segments.air.members[0].beacon_interval: a beacon interval is 1 TU"),
            ("      - {node: a, position: [0, 0], role: ap, ssid: '0123456789012345678901234567890123'}\n      - {node: b, position: [1, 0]}\n", "an SSID is 1 to 32 bytes"),
        ],
    );
    // A station's default roam threshold: 6 dB over the channel's reception.
    let Role::Station(s2) = &roles[2] else { panic!("{roles:?}") };
    let reception = w.medium.dcf.as_ref().unwrap().config.cca_pd_dbm;
    assert!((s2.roam_threshold_dbm - reception - 6.0).abs() < 1e-9, "{s2:?}");
    // A station without an SSID joins any access point.
    let any = load_str("nodes: {a: {}, b: {}}\nsegments:\n  air:\n    kind: wireless\n    csma: true\n    members:\n      - {node: a, position: [0, 0], role: ap, ssid: lab}\n      - {node: b, position: [1, 0], role: station}\n", "t.yaml", "t", None).unwrap();
    let roles = &any.segments[0].wireless.as_ref().unwrap().medium.dcf.as_ref().unwrap().roles;
    assert!(matches!(&roles[1], Role::Station(s) if s.ssid.is_empty()), "{roles:?}");
    // No bridge unless asked.
    assert!(plan.nodes.iter().all(|n| n.bridge.is_empty()));

    // A bridging access point: its radio interface and the others (all, or those named)
    // in its bridge; refused where it cannot be.
    let bridged = |bridge: &str| {
        format!("nodes: {{a: {{}}, b: {{}}, c: {{}}}}\nlinks: [{{endpoints: [a, c]}}, {{endpoints: [a, c]}}]\nsegments:\n  air:\n    kind: wireless\n    csma: true\n    members:\n      - {{node: a, iface: wlan0, position: [0, 0], role: ap, ssid: lab, bridge: {bridge}}}\n      - {{node: b, position: [1, 0], role: station, ssid: lab}}\n")
    };
    let plan = load_str(&bridged("true"), "t.yaml", "t", None).unwrap();
    assert_eq!(plan.nodes[0].bridge, ["wlan0", "eth0", "eth1"]);
    let plan = load_str(&bridged("[eth1]"), "t.yaml", "t", None).unwrap();
    assert_eq!(plan.nodes[0].bridge, ["wlan0", "eth1"]);
    let plan = load_str(&bridged("false"), "t.yaml", "t", None).unwrap();
    assert!(plan.nodes[0].bridge.is_empty());
    // A LAN and the BSS bridged to it share a subnet: static routing gives no node a
    // route to a subnet it is on (the kernel has it already, and refuses a second).
    let plan = load_str(
        "nodes: {srv: {}, ap: {}, sta: {}}\nsegments:\n  wired: {kind: lan, members: [{node: srv, ip: [10.9.0.1/24]}, {node: ap, ip: [10.9.0.2/24]}]}\n  air:\n    kind: wireless\n    csma: true\n    members:\n      - {node: ap, ip: none, position: [0, 0], role: ap, ssid: lab, bridge: true}\n      - {node: sta, ip: [10.9.0.10/24], position: [1, 0], role: station, ssid: lab}\n",
        "t.yaml",
        "t",
        None,
    )
    .unwrap();
    let own: ipnet::IpNet = "10.9.0.0/24".parse().unwrap();
    assert!(plan.nodes.iter().all(|n| n.routes.iter().all(|r| r.dst != own)), "{:?}", plan.nodes);
    each_error_says(
        |b: &str| one_error(&bridged(b)),
        &[
            ("[eth7]", "segments.air.members[0].bridge: node 'a' has no interface 'eth7' (it has eth0, eth1, wlan0)"),
            ("[wlan0]", "'wlan0' is the radio interface itself"),
            ("[]", "an empty list bridges nothing"),
            ("maybe", "segments.air.members[0].bridge: expected true or false, got 'maybe'"),
        ],
    );
    let e = seg("      - {node: a, position: [0, 0], role: ap, ssid: lab, bridge: true}\n      - {node: b, position: [1, 0], role: station, ssid: lab}\n");
    assert!(e.contains("segments.air.members[0].bridge: node 'a' has no other interface"), "{e}");
    let e = seg("      - {node: a, position: [0, 0], role: ap, ssid: lab}\n      - {node: b, position: [1, 0], role: station, ssid: lab, bridge: true}\n");
    assert!(
        e.contains("'bridge' is an access point's ('role: ap'), and this member's role is station"),
        "{e}"
    );
    // Without the 802.11 MAC there are no access points.
    let e = one_error("nodes: {a: {}}\nsegments:\n  air: {kind: wireless, members: [{node: a, position: '0,0', role: ap, ssid: x}]}\n");
    assert!(e.contains("segments.air.members[0].role") && e.contains("needs 'csma: true'"), "{e}");
}

/// NET's city (issue 65 #7): a Manhattan grid or obstacles and roads (inline or
/// GeoJSON, metres or longitude/latitude), its area, street mobility; errors named.
#[test]
fn a_city_of_buildings_and_streets_is_planned() {
    use vemu_radio::mobility::Mobility;
    let p = ok("
nodes: {a: {}, b: {}}
segments:
  town:
    kind: wireless
    members: [a, {node: b, position: [100, 100]}]
    city: {manhattan: {blocks: 4x3, block: 120m, street: 30m}, wall: 8dB}
    mobility: {model: streets, speed: 5-15, pause: 2s, stop: 25%}
");
    let w = p.segments[0].wireless.as_ref().unwrap();
    let city = w.medium.city.as_ref().unwrap();
    assert_eq!(city.obstacles.len(), 12);
    assert_eq!(city.obstacles[0].wall_db, Some(8.0));
    assert_eq!(city.roads.crossings.len(), 20);
    let Mobility::Streets(st) = &w.radios[0].mobility else { panic!("{:?}", w.radios[0].mobility) };
    assert_eq!(
        (st.min_speed_mps, st.max_speed_mps, st.stop_probability, st.pause_ns),
        (5.0, 15.0, 0.25, 2_000_000_000)
    );
    // Placed at random within the city (480 x 360 m).
    let s = w.radios[0].start;
    assert!((0.0..=480.0).contains(&s.x) && (0.0..=360.0).contains(&s.y), "{s:?}");

    let dir = std::env::temp_dir().join(format!("vemu-city-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let geo = r#"{"type": "FeatureCollection", "features": [
      {"type": "Feature", "properties": {"wall_db": 6}, "geometry": {"type": "Polygon", "coordinates": [[[13.40, 52.52], [13.401, 52.52], [13.401, 52.5205], [13.40, 52.52]]]}},
      {"type": "Feature", "properties": {"opaque": true}, "geometry": {"type": "MultiPolygon", "coordinates": [[[[13.402, 52.52], [13.403, 52.52], [13.403, 52.521]]]]}},
      {"type": "Feature", "properties": {}, "geometry": {"type": "LineString", "coordinates": [[13.40, 52.5199], [13.403, 52.5199], [13.403, 52.522]]}}
    ]}"#;
    std::fs::write(dir.join("berlin.geojson"), geo).unwrap();
    let y = "nodes: {a: {}, b: {}}\nsegments:\n  town:\n    kind: wireless\n    members: [a, b]\n    city: {obstacles: berlin.geojson, roads: berlin.geojson, lonlat: true}\n    mobility: {model: streets, speed: 10}\n";
    std::fs::write(dir.join("lab.yaml"), y).unwrap();
    let p = load(&dir.join("lab.yaml"), None).unwrap();
    let city = p.segments[0].wireless.as_ref().unwrap().medium.city.clone().unwrap();
    assert_eq!(city.obstacles.len(), 2);
    assert_eq!((city.obstacles[0].wall_db, city.obstacles[1].wall_db), (Some(6.0), None));
    assert_eq!((city.roads.crossings.len(), city.roads.streets.len()), (3, 2));
    // 0.003° of longitude at 52.52° N is 203 m; the road's corner is 0.0021° (233.5 m) north.
    let corner = city.roads.crossings[1];
    assert!((corner.x - 203.0).abs() < 1.0 && corner.y.abs() < 1e-6, "{corner:?}");
    assert!((city.roads.crossings[2].y - 233.5).abs() < 1.0, "{:?}", city.roads.crossings[2]);
    std::fs::write(dir.join("bad.geojson"), "{\"type\": \"Polygon\"").unwrap();
    std::fs::write(dir.join("lab2.yaml"), y.replace("berlin", "bad")).unwrap();
    let e = load(&dir.join("lab2.yaml"), None).unwrap_err().to_string();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(e.contains("bad.geojson:1: not JSON"), "{e}");

    let base =
        "nodes: {a: {}, b: {}}\nsegments:\n  town:\n    kind: wireless\n    members: [a, b]\n";
    for (keys, want) in [
        ("    area: 100x100\n    mobility: {model: streets, speed: 5}\n", "'streets' needs the segment's 'city'"),
        ("    city: {manhattan: {blocks: 0x3}}\n", "1 to 100 each"),
        ("    city: {manhattan: {blocks: 2x2, block: 50m, street: 60m}}\n", "narrower than the block"),
        ("    city: {manhattan: {blocks: 2x2}, roads: [[[0, 0], [1, 1]]]}\n", "give 'manhattan' or obstacles and roads"),
        ("    city: {wall: 5dB}\n", "a city needs 'manhattan'"),
        ("    city: {obstacles: [{polygon: [[0, 0], [1, 1]]}]}\n", "at least three corners"),
        ("    city: {manhattan: {blocks: 2x2}, wall: thick}\n", "or opaque"),
        ("    city: {manhattan: {blocks: 2x2}}\n    mobility: {model: streets, speed: 5, interval: 1s}\n", "'interval' does not apply to 'streets'"),
    ] {
        let m = one_error(&format!("{base}{keys}"));
        assert!(m.contains(want) && m.contains("segments.town."), "{keys}: {m}");
    }
}
