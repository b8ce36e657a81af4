use super::*;

const S: u64 = 1_000_000_000;

fn reach(name: &str, start_s: u64, within_s: u64) -> Expectation {
    Expectation {
        name: name.into(),
        start_ns: start_s * S,
        after: None,
        within_ns: within_s * S,
        check: Check::Reach {
            from: "h1".into(),
            to: "10.0.0.9".parse().unwrap(),
            to_name: "h9".into(),
            port: None,
        },
    }
}

#[test]
fn a_check_passes_when_it_first_holds_and_fails_past_its_deadline() {
    let mut j = Judge::new(vec![reach("a", 0, 5), reach("b", 3, 2)]);
    // At 1 s only the first has started.
    assert_eq!(j.due(S).iter().map(|d| d.0).collect::<Vec<_>>(), [0]);
    j.probed(0, S, false, "100% packet loss\n");
    assert_eq!(j.results()[0].detail, "not yet (last: 100% packet loss)");
    j.probed(0, S + 370_000_000, true, "");
    assert_eq!(j.results()[0].outcome, Outcome::Passed);
    assert_eq!(j.results()[0].measured_ns, Some(1_370_000_000));
    assert_eq!(j.results()[0].line(), "a: passed, 1.4 s ≤ 5.0 s");
    // The second never holds: failed at 5 s, not before.
    j.probed(1, 4 * S, false, "no route to host");
    j.tick(4 * S, Verdict::Ok);
    assert_eq!(j.results()[1].outcome, Outcome::Pending);
    assert!(!j.done());
    j.tick(5 * S, Verdict::Ok);
    assert_eq!(j.results()[1].outcome, Outcome::Failed);
    assert_eq!(j.results()[1].detail, "did not hold within 2.0 s (last: no route to host)");
    assert!(!j.done(), "probed on to say when it held");
    assert_eq!(exit_status(j.results()), 1);
    // A probe that holds after the deadline does not pass it: failed, and when.
    let mut late = Judge::new(vec![reach("c", 0, 1)]);
    late.probed(0, 2 * S, true, "");
    assert_eq!(late.results()[0].outcome, Outcome::Failed);
    assert_eq!(late.results()[0].detail, "did not hold within 1.0 s (held after 2.0 s)");
    late.window(0, 3 * S, Verdict::Ok, false);
    assert!(late.done());
    // A failed check is probed on to say when it held (the exit stays a failure).
    assert_eq!(j.due(6 * S).iter().map(|d| d.0).collect::<Vec<_>>(), [1]);
    j.probed(1, 6 * S + 500_000_000, true, "");
    assert_eq!(j.results()[1].outcome, Outcome::Failed);
    assert_eq!(j.results()[1].detail, "did not hold within 2.0 s (held after 3.5 s)");
    assert_eq!(j.results()[1].measured_ns, Some(3_500_000_000));
    j.window(0, 7 * S, Verdict::Ok, false);
    assert!(j.done() && j.due(7 * S).is_empty());
    // One that never holds is said so, LATE_NS after its deadline.
    let mut never = Judge::new(vec![reach("d", 0, 1)]);
    never.tick(S, Verdict::Ok);
    assert!(!never.done());
    never.tick(S + LATE_NS, Verdict::Ok);
    assert!(never.done());
    assert_eq!(
        never.results()[0].detail,
        "did not hold within 1.0 s (not held 10.0 s later either)"
    );
}

#[test]
fn a_check_measured_while_the_monitor_judged_the_lab_not_ok_is_untrustworthy() {
    let mut j = Judge::new(vec![reach("a", 0, 5), reach("b", 10, 5)]);
    j.window(2 * S, 3 * S, Verdict::Invalid, false);
    j.probed(0, 4 * S, true, "");
    assert_eq!(j.results()[0].outcome, Outcome::Untrustworthy);
    assert!(j.results()[0].detail.starts_with("passed (4.0 s ≤ 5.0 s), but the fidelity monitor judged the lab invalid from 2.0 s to 3.0 s"), "{}", j.results()[0].detail);
    // A check measured after the bad window is judged as usual…
    j.probed(1, 11 * S, true, "");
    assert_eq!(j.results()[1].outcome, Outcome::Passed);
    assert_eq!(exit_status(j.results()), 3);
    // …until the monitor has judged that second: not done before, and untrustworthy
    // if it says the second was not ok.
    j.tick(11 * S + 100, Verdict::Ok);
    assert!(!j.done(), "the second of the measurement not judged yet");
    j.window(10 * S, 11 * S + 500_000_000, Verdict::Degraded, false);
    assert_eq!(j.results()[1].outcome, Outcome::Untrustworthy);
    assert!(
        j.results()[1].detail.starts_with(
            "passed (1.0 s ≤ 5.0 s), but the fidelity monitor judged the lab degraded"
        ),
        "{}",
        j.results()[1].detail
    );
    assert!(j.done());
    // Failed under a bad window, then held later (what CI saw): when it held is
    // said, and why it cannot be trusted is kept.
    let mut late = Judge::new(vec![reach("c", 4, 3)]);
    late.window(4 * S, 6 * S, Verdict::Invalid, false);
    late.probed(0, 5 * S, false, "100% packet loss");
    late.tick(7 * S, Verdict::Invalid);
    assert_eq!(late.results()[0].outcome, Outcome::Untrustworthy);
    late.probed(0, 8 * S + 900_000_000, true, "");
    assert_eq!(
        late.results()[0].detail,
        "failed (did not hold within 3.0 s (held after 4.9 s)), but the fidelity monitor judged the lab invalid from 4.0 s to 6.0 s (lab clock): the network measured was not the one configured"
    );
    // A second the monitor judged ok because the bulk links kept their rates while
    // the lab's software waited for CPU: a check's timing is not to be trusted then.
    let mut paced = Judge::new(vec![reach("p", 0, 5)]);
    paced.window(0, 2 * S, Verdict::Ok, true);
    paced.probed(0, S, false, "100% packet loss");
    paced.tick(6 * S, Verdict::Ok);
    assert_eq!(paced.results()[0].outcome, Outcome::Untrustworthy);
    assert!(paced.results()[0].detail.ends_with("but the lab's software waited for CPU from 0 µs to 2.0 s (lab clock; its bulk links kept their rates): what the check timed may reflect this machine's CPU, not the network"), "{}", paced.results()[0].detail);
    // A check measured before the monitor's first window (a lab slow to come up: its
    // check at 4 s was made at once, before the monitor first read the lab) is judged
    // by that first window; before a later one, it is not.
    let mut early = Judge::new(vec![reach("e", 4, 3), reach("f", 6, 3)]);
    early.probed(0, 4 * S + 170_000_000, true, "");
    early.window(4 * S + 300_000_000, 5 * S + 300_000_000, Verdict::Ok, true);
    assert_eq!(early.results()[0].outcome, Outcome::Untrustworthy);
    assert!(early.results()[0].detail.ends_with("waited for CPU from 4.3 s to 5.3 s (lab clock; its bulk links kept their rates): what the check timed may reflect this machine's CPU, not the network"), "{}", early.results()[0].detail);
    early.probed(1, 6 * S + 400_000_000, true, "");
    early.window(6 * S + 500_000_000, 7 * S + 500_000_000, Verdict::Invalid, false);
    assert_eq!(early.results()[1].outcome, Outcome::Passed);
    let mut ok_first = Judge::new(vec![reach("g", 4, 3)]);
    ok_first.probed(0, 4 * S + 170_000_000, true, "");
    ok_first.window(4 * S + 300_000_000, 5 * S + 300_000_000, Verdict::Ok, false);
    assert_eq!(ok_first.results()[0].outcome, Outcome::Passed);
    assert!(ok_first.done());
    // A probe that began before a bad window and ran into it: its check is distrusted,
    // and the judge waits for the monitor's word on the probe's end, not its start.
    let mut long = Judge::new(vec![reach("l", 0, 5)]);
    long.window(0, 2 * S, Verdict::Ok, false);
    long.probed(0, S + 900_000_000, true, "");
    long.probe_ended(0, 2 * S + 100_000_000);
    assert_eq!(long.results()[0].outcome, Outcome::Passed);
    assert!(!long.done(), "the probe's end not judged yet");
    long.window(2 * S, 3 * S, Verdict::Ok, true);
    assert_eq!(long.results()[0].outcome, Outcome::Untrustworthy);
    assert!(
        long.results()[0].detail.starts_with(
            "passed (1.9 s ≤ 5.0 s), but the lab's software waited for CPU from 2.0 s"
        ),
        "{}",
        long.results()[0].detail
    );
    assert!(long.done());
    // A monitor that says nothing: the judge waits JUDGED_WAIT_NS, no more.
    let mut quiet = Judge::new(vec![reach("q", 0, 5)]);
    quiet.probed(0, S, true, "");
    quiet.tick(2 * S, Verdict::Ok);
    assert!(!quiet.done());
    quiet.tick(S + JUDGED_WAIT_NS, Verdict::Ok);
    assert!(quiet.done());
}

#[test]
fn the_fidelity_check_is_the_run_s_verdict_at_its_deadline() {
    let check = |worst: &str| Expectation {
        name: format!("fidelity {worst}"),
        start_ns: 0,
        after: None,
        within_ns: 10 * S,
        check: Check::Fidelity { worst: worst.into() },
    };
    let mut j = Judge::new(vec![check("ok"), check("degraded")]);
    assert!(j.due(20 * S).is_empty(), "nothing to probe");
    j.tick(10 * S, Verdict::Degraded);
    assert_eq!(j.results()[0].outcome, Outcome::Failed);
    assert_eq!(j.results()[0].detail, "degraded, worse than ok");
    assert_eq!(j.results()[1].outcome, Outcome::Passed);
}

#[test]
fn a_drops_check_counts_from_its_start_fails_beyond_its_bound_passes_at_its_deadline() {
    let check = |link: usize, start_s: u64| Expectation {
        name: format!("drops {link}"),
        start_ns: start_s * S,
        after: None,
        within_ns: 10 * S,
        check: Check::Drops { link, link_name: format!("l{link}"), at_most: 5 },
    };
    let mut j = Judge::new(vec![check(0, 0), check(1, 2)]);
    assert!(j.due(S).is_empty(), "nothing to probe in a node");
    assert!(j.needs_link_drops(0) && j.needs_link_drops(S));
    assert!(j.starts_counting_drops(0));
    // Link 1 had dropped 100 before its check started: those do not count.
    j.link_drops(0, &[0, 100]);
    assert!(!j.starts_counting_drops(S), "the first counts from 0, the second not started");
    assert!(j.starts_counting_drops(3 * S), "the second starts");
    j.link_drops(3 * S, &[4, 103]);
    assert!(!j.starts_counting_drops(3 * S));
    assert_eq!(j.results()[0].detail, "not yet (last: 4 drops so far)");
    j.link_drops(4 * S, &[4, 109]);
    assert_eq!(j.results()[1].outcome, Outcome::Failed);
    assert_eq!(j.results()[1].detail, "6 drops > 5 (by 2.0 s)");
    // (Ticks do not judge them: past the deadline, the counters do.)
    j.tick(10 * S, Verdict::Ok);
    assert_eq!(j.results()[0].outcome, Outcome::Pending);
    j.link_drops(10 * S, &[5, 109]);
    assert_eq!(j.results()[0].line(), "drops 0: passed, 5 drops ≤ 5");
    j.window(0, 11 * S, Verdict::Ok, false);
    assert!(j.done() && !j.needs_link_drops(11 * S));
}

#[test]
fn percentiles_are_by_nearest_rank() {
    let v: Vec<u64> = (1..=10).collect();
    assert_eq!(nearest_rank(&v, 50.0), Some(5), "5 of 10 are at or below 5");
    assert_eq!(nearest_rank(&v, 95.0), Some(10));
    assert_eq!(nearest_rank(&v, 100.0), Some(10));
    assert_eq!(nearest_rank(&v, 1.0), Some(1));
    assert_eq!(nearest_rank(&v, 0.0), Some(1), "the smallest, not nothing");
    assert_eq!(nearest_rank::<u64>(&[], 50.0), None);
    let m = FlowMeasure { sent: 10, delivered: 10, delays_ns: v, size_bytes: 100 };
    assert_eq!(m.delay_ns(50), Some(5));
}

#[test]
fn a_flow_check_starts_its_flow_and_is_judged_by_its_bounds_once_it_has_run() {
    use vemu_scenario::expect::FlowBounds;
    let check = |name: &str, start_s: u64, bounds: FlowBounds| Expectation {
        name: name.into(),
        start_ns: start_s * S,
        after: None,
        within_ns: 12 * S,
        check: Check::Flow(vemu_scenario::expect::FlowCheck {
            from: "h1".into(),
            to: "h2".into(),
            size_bytes: 1000,
            rate_pps: 100.0,
            duration_ns: 10 * S,
            bounds,
        }),
    };
    let tight =
        FlowBounds { delivery: Some(0.99), delay_ns: vec![(95, 15_000_000)], goodput_bps: None };
    let loose = FlowBounds {
        delivery: Some(0.8),
        delay_ns: vec![(50, 15_000_000), (100, 40_000_000)],
        goodput_bps: Some(700_000),
    };
    let mut j = Judge::new(vec![
        check("tight", 0, tight),
        check("loose", 0, loose),
        check("later", 5, FlowBounds { delivery: Some(0.5), ..Default::default() }),
    ]);
    assert!(j.due(0).is_empty(), "nothing to probe in a node");
    assert_eq!(j.flows_to_start(0).iter().map(|(i, _)| *i).collect::<Vec<_>>(), [0, 1]);
    j.flow_started(0, 0, Ok(7));
    j.flow_started(1, 0, Ok(8));
    assert!(j.flows_to_start(S).is_empty(), "started once");
    assert_eq!(j.flows_to_start(5 * S).len(), 1, "the third starts at 5 s");
    j.flow_started(2, 5 * S, Err("node 'h2' is stopped".into()));
    assert_eq!(
        j.results()[2].line(),
        "later: FAILED, its flow could not start: node 'h2' is stopped"
    );
    // Not judged before the flow has run and settled; ticks leave it to its records.
    assert!(j.flows_to_judge(11 * S).is_empty());
    j.tick(12 * S, Verdict::Ok);
    assert_eq!(j.results()[0].outcome, Outcome::Pending);
    assert_eq!(j.flows_to_judge(12 * S), [(0, 7), (1, 8)]);
    // 900 of 1000 delivered, delays 10 ms for most, 30 ms for the slowest 10.
    let delays: Vec<u64> =
        (0..900).map(|k| if k < 890 { 10_000_000 } else { 30_000_000 }).collect();
    let m = FlowMeasure { sent: 1000, delivered: 900, delays_ns: delays, size_bytes: 1000 };
    j.flow_measured(0, 12 * S, Ok(m.clone()));
    j.flow_measured(1, 12 * S, Ok(m));
    assert_eq!(j.results()[0].outcome, Outcome::Failed);
    assert_eq!(
        j.results()[0].detail,
        "delivery 90.0% < 99.0% (900 of 1000), delay p95 10.0 ms ≤ 15.0 ms"
    );
    assert_eq!(j.results()[1].outcome, Outcome::Passed);
    let flow = j.results()[1].flow.clone().unwrap();
    assert_eq!((flow.sent, flow.delivered, flow.delivery), (1000, 900, 0.9));
    assert_eq!((flow.delay_p50_ns, flow.delay_max_ns), (Some(10_000_000), Some(30_000_000)));
    assert_eq!(flow.goodput_bps, 720_000);
    assert_eq!(j.results()[1].detail, "delivery 90.0% ≥ 80.0% (900 of 1000), delay p50 10.0 ms ≤ 15.0 ms, delay max 30.0 ms ≤ 40.0 ms, goodput 720.0 kbit/s ≥ 700.0 kbit/s");
    // A window judged bad over the flow's run makes its result untrustworthy.
    j.window(3 * S, 4 * S, Verdict::Invalid, false);
    assert_eq!(j.results()[1].outcome, Outcome::Untrustworthy);
    j.window(4 * S, 13 * S, Verdict::Ok, false);
    assert!(j.done());
}

#[test]
fn a_flow_that_delivered_nothing_meets_no_delay_bound() {
    let m = FlowMeasure { sent: 10, ..Default::default() };
    let b = vemu_scenario::expect::FlowBounds { delay_ns: vec![(99, S)], ..Default::default() };
    assert_eq!(m.against(&b, S), ("delay p99: nothing delivered".to_string(), false));
    let m = FlowMeasure { sent: 3, delivered: 3, delays_ns: vec![1, 2, 3], size_bytes: 24 };
    assert_eq!((m.delay_ns(50), m.delay_ns(95), m.delay_ns(100)), (Some(2), Some(3), Some(3)));
}
