use super::*;

fn dir(on_time: u64, late_2ms: u64, errors: u64) -> DirStats {
    let mut h = vec![0; DELAY_BUCKETS_NS.len() + 1];
    h[3] = on_time; // ≤ 10 µs
    h[10] = late_2ms; // (1 ms, 2 ms]
    DirStats {
        late_hist: h,
        write_errors: errors,
        late_max_ns: if late_2ms > 0 { 1_900_000 } else { 9_000 },
        ..DirStats::default()
    }
}

/// An 802.11 channel decided late is judged as late frames are, by its own name,
/// while its members' frames were all written on time.
#[test]
fn a_radio_channel_decided_late_is_judged_by_its_decisions() {
    let th = FidelityThresholds::default();
    let frames = dir(10_000, 0, 0);
    let channel = |late| ChannelDecisions {
        name: "air".into(),
        late_hist: dir(10_000 - late, late, 0).late_hist,
        max_late_ns: 1_900_000,
    };
    let on_time = EngineEvidence { channels: vec![channel(0)], ..Default::default() };
    let f = assess([("air n1:wlan0 egress".to_string(), &frames)], &on_time, &th);
    assert_eq!((f.verdict, f.affected.len()), (Verdict::Ok, 0));
    let late = EngineEvidence { channels: vec![channel(300)], ..Default::default() };
    let f = assess([("air n1:wlan0 egress".to_string(), &frames)], &late, &th);
    assert_eq!(f.verdict, Verdict::Degraded);
    let a = &f.affected[0];
    assert_eq!((a.name.as_str(), a.frames, a.late_frames), ("air 802.11 decisions", 10_000, 300));
    // A window's decisions: the counts since the window before.
    let w = channel(300).since(&channel(100));
    assert_eq!(w.late_hist.iter().sum::<u64>(), 200);
}

#[test]
fn verdicts_follow_the_measured_lateness() {
    let th = FidelityThresholds::default();
    let (a, b, c) = (dir(10_000, 0, 0), dir(9_800, 200, 0), dir(5_000, 5_000, 10));
    let none = EngineEvidence::default();
    let f = assess([("a".to_string(), &a)], &none, &th);
    assert_eq!((f.verdict, f.affected.len()), (Verdict::Ok, 0));
    // An ok verdict still says how late the latest frame was.
    assert!(describe(&f).contains("; the latest 9 µs late"), "{}", describe(&f));
    let f = assess([("a".to_string(), &a), ("b".to_string(), &b)], &none, &th);
    assert_eq!(f.verdict, Verdict::Degraded);
    assert_eq!(f.max_late_ns, 1_900_000);
    assert_eq!(f.affected[0].name, "b");
    assert_eq!(f.affected[0].p99_late_ns, 2_000_000);
    let f =
        assess([("a".to_string(), &a), ("b".to_string(), &b), ("c".to_string(), &c)], &none, &th);
    assert_eq!(f.verdict, Verdict::Invalid);
    assert_eq!((f.affected[0].name.as_str(), f.affected[0].late_frames), ("c", 5_010));
    assert!(describe(&f).contains("INVALID"), "{}", describe(&f));
    // Too few frames to judge one direction by.
    let f = assess([("d".to_string(), &dir(10, 10, 0))], &none, &th);
    assert_eq!(f.verdict, Verdict::Ok);
    // Windows: the difference of two snapshots.
    let d = delta(&dir(10_000, 200, 0), &dir(9_000, 0, 0));
    assert_eq!((d.late_hist[3], d.late_hist[10]), (1_000, 200));
    assert_eq!(d.late_max_ns, 1_900_000, "the run's latest came in this window");
    let d = delta(&dir(10_000, 200, 0), &dir(9_000, 200, 0));
    assert_eq!(d.late_max_ns, 10_000, "a window of on-time frames: at most its bucket");
}

#[test]
fn frames_the_underlay_lost_count_against_the_direction() {
    // Issue 14: a link between machines set faster than the underlay carries; the
    // far engine sees sequence gaps. All written on time, 3% lost on the way.
    let th = FidelityThresholds::default();
    let mut d = dir(9_700, 0, 0);
    d.underlay_lost = 300;
    let f = assess([("x".to_string(), &d)], &EngineEvidence::default(), &th);
    assert_eq!(
        (f.verdict, f.affected[0].underlay_lost, f.affected[0].late_frames),
        (Verdict::Degraded, 300, 300)
    );
    assert!(describe(&f).contains("300 lost by the underlay between machines"), "{}", describe(&f));
    let mut before = d.clone();
    before.underlay_lost = 100;
    assert_eq!(delta(&d, &before).underlay_lost, 200);
}

#[test]
fn frames_written_on_time_after_a_long_wait_in_the_input_queue_count_as_late() {
    // Issue 20: every frame written on time, but a fifth of the probes waited 2 ms in
    // the TAP's queue before the engine read them (the default threshold is 1 ms).
    let th = FidelityThresholds::default();
    let mut d = dir(10_000, 0, 0);
    d.input_wait_hist = vec![0; DELAY_BUCKETS_NS.len() + 1];
    d.input_wait_hist[4] = 80; // ≤ 20 µs
    d.input_wait_hist[10] = 20; // ≤ 2 ms
    let f = assess([("a".to_string(), &d)], &EngineEvidence::default(), &th);
    assert_eq!(f.verdict, Verdict::Invalid);
    assert_eq!(
        (f.late_frames, f.affected[0].input_late_probes, f.affected[0].p99_input_wait_ns),
        (2_000, 20, 2_000_000)
    );
    assert!(
        describe(&f).contains("input queue: p99 2.0 ms, 20 of 100 probes waited longer"),
        "{}",
        describe(&f)
    );
    // Too few probes say nothing; quick ones say all is well.
    d.input_wait_hist[10] = 2;
    d.input_wait_hist[4] = 2;
    assert_eq!(
        assess([("a".to_string(), &d)], &EngineEvidence::default(), &th).verdict,
        Verdict::Ok
    );
    d.input_wait_hist[10] = 0;
    d.input_wait_hist[4] = 500;
    assert_eq!(
        assess([("a".to_string(), &d)], &EngineEvidence::default(), &th).verdict,
        Verdict::Ok
    );
    // A window: the probes between two snapshots.
    let mut later = d.clone();
    later.input_wait_hist[10] = 7;
    assert_eq!(delta(&later, &d).input_wait_hist[10], 7);
}

#[test]
fn frames_from_another_machine_that_wait_there_before_their_write_count_as_late() {
    // Issue 14: the sending machine wrote every frame to the underlay on time; the
    // receiving machine's engine, busy, wrote a fifth of them to the node 2 ms after
    // they arrived (the default threshold is 1 ms).
    let th = FidelityThresholds::default();
    let mut d = dir(10_000, 0, 0);
    d.arrival_wait_hist = vec![0; DELAY_BUCKETS_NS.len() + 1];
    d.arrival_wait_hist[4] = 8_000; // ≤ 20 µs
    d.arrival_wait_hist[10] = 2_000; // ≤ 2 ms
    let f = assess([("a".to_string(), &d)], &EngineEvidence::default(), &th);
    assert_eq!(f.verdict, Verdict::Invalid);
    assert_eq!(
        (f.late_frames, f.affected[0].arrival_late_frames, f.affected[0].p99_arrival_wait_ns),
        (2_000, 2_000, 2_000_000)
    );
    assert!(
        describe(&f).contains(
            "on the receiving machine: p99 2.0 ms from arrival to write, 2000 frames waited longer"
        ),
        "{}",
        describe(&f)
    );
    // Late on both machines: counted on each, at most every frame.
    let mut both = d.clone();
    both.late_hist[3] = 0;
    both.late_hist[10] = 10_000;
    assert_eq!(
        assess([("a".to_string(), &both)], &EngineEvidence::default(), &th).late_frames,
        10_000
    );
    // Quick writes say all is well; a window holds the waits between two snapshots.
    d.arrival_wait_hist[10] = 0;
    assert_eq!(
        assess([("a".to_string(), &d)], &EngineEvidence::default(), &th).verdict,
        Verdict::Ok
    );
    let mut later = d.clone();
    later.arrival_wait_hist[10] = 7;
    assert_eq!(delta(&later, &d).arrival_wait_hist[10], 7);
}

#[test]
fn full_tap_queues_and_a_saturated_engine_count_too() {
    let th = FidelityThresholds::default();
    let a = dir(10_000, 0, 0);
    let tap = |dropped| TapQueue { port: "n1:eth0".into(), read: 10_000, dropped };
    // Every frame on time, but the kernel dropped 5% of what n1 sent.
    let f = assess(
        [("a".to_string(), &a)],
        &EngineEvidence { taps: vec![tap(500)], ..Default::default() },
        &th,
    );
    assert_eq!(f.verdict, Verdict::Degraded);
    assert_eq!((f.taps_affected[0].port.as_str(), f.tap_dropped), ("n1:eth0", 500));
    assert!(describe(&f).contains("n1:eth0 TAP queue: 4.8% dropped"), "{}", describe(&f));
    let f = assess(
        [("a".to_string(), &a)],
        &EngineEvidence { taps: vec![tap(5_000)], ..Default::default() },
        &th,
    );
    assert_eq!(f.verdict, Verdict::Invalid);
    let f = assess(
        [("a".to_string(), &a)],
        &EngineEvidence { taps: vec![tap(50)], ..Default::default() },
        &th,
    );
    assert_eq!(f.verdict, Verdict::Ok);
    // A shard saturated in 2 of 100 windows: no headroom left, degraded; 1 of 100 is not.
    let busy = |saturated_windows| EngineEvidence {
        shard_busy: vec![0.5],
        windows: 100,
        saturated_windows,
        ..Default::default()
    };
    assert_eq!(assess([("a".to_string(), &a)], &busy(2), &th).verdict, Verdict::Degraded);
    assert_eq!(assess([("a".to_string(), &a)], &busy(1), &th).verdict, Verdict::Ok);
    // Window deltas of the TAP counters.
    let d = tap_delta(&[tap(700)], &[tap(500)]);
    assert_eq!((d[0].read, d[0].dropped), (0, 200));
}

#[test]
fn seconds_in_which_the_software_waited_for_a_cpu_judge_the_run() {
    use vemu_host::cpu_wait::NodeWait;
    use vemu_machine::worker::MachineCpu;
    let th = FidelityThresholds::default();
    let m = |pressure_us: u64, at_s: u64, waits: &[(&str, u64)]| MachineCpu {
        machine: String::new(),
        pressure_us: Some(pressure_us),
        steal_us: Some((at_s * 20_000, 2)),
        read_at_ns: at_s * 1_000_000_000,
        nodes: waits
            .iter()
            .map(|(n, w)| NodeWait { node: n.to_string(), wait_ns: *w, cpu_ns: 0 })
            .collect(),
        nodes_counted: true,
    };
    // A second in which some task waited 0.95 s (s1's processes 0.6 s, s2's 0.2 s)…
    let t0 = [m(0, 0, &[("s1", 0), ("s2", 0)])];
    let t1 = [m(950_000, 1, &[("s1", 600_000_000), ("s2", 200_000_000)])];
    let starved = CpuEvidence::window(&t1, &t0, &th);
    assert_eq!((starved.windows, starved.starved_windows), (1, 1));
    // The hypervisor took 20 ms of the second's 2 CPU-seconds: 1%, noted.
    assert_eq!(starved.stolen_windows, 1);
    assert!((starved.worst_steal - 0.01).abs() < 1e-9, "{}", starved.worst_steal);
    assert!((starved.worst_pressure - 0.95).abs() < 1e-9);
    assert_eq!(starved.waiting_nodes[0].0, "s1");
    // The same pressure from other software (the nodes waited 5% at most) is not
    // the lab's starvation; where the nodes' waits were not counted, it is.
    let foreign = [m(950_000, 1, &[("s1", 50_000_000), ("s2", 0)])];
    assert_eq!(CpuEvidence::window(&foreign, &t0, &th).starved_windows, 0);
    let mut uncounted = foreign.clone();
    uncounted[0].nodes_counted = false;
    assert_eq!(CpuEvidence::window(&uncounted, &t0, &th).starved_windows, 1);
    // …then a second of 5% (a reading read late is measured over its own span).
    let t2 = [m(1_050_000, 3, &[("s1", 600_000_000), ("s2", 200_000_000)])];
    let quiet = CpuEvidence::window(&t2, &t1, &th);
    assert_eq!((quiet.starved_windows, quiet.worst_pressure), (0, 0.05));
    // One starved second in 99 is more than 1%: degraded, in words, the worst named.
    let mut run = CpuEvidence::default();
    for _ in 0..98 {
        run.add(&quiet);
    }
    run.add(&starved);
    let engine = EngineEvidence { cpu: run, ..EngineEvidence::default() };
    let f = assess(Vec::<(String, &DirStats)>::new(), &engine, &th);
    assert_eq!(f.verdict, Verdict::Degraded);
    let text = describe(&f);
    assert!(text.contains("the lab's software waited for CPU: in 1 of 99 seconds the machine's tasks waited more than 90% of the time (up to 95%)"), "{text}");
    assert!(text.contains("nodes that waited most (of those seconds): s1 60%, s2 20%"), "{text}");
    assert!(text.contains("the hypervisor took this machine's CPUs in 99 of 99 seconds (up to 1.0% of a second's CPU time)"), "{text}");
    // Quiet seconds only: ok; no reading (no PSI, or a first window): nothing judged.
    let mut ok = CpuEvidence::default();
    ok.add(&quiet);
    ok.add(&CpuEvidence::window(&t0, &[], &th));
    assert_eq!(ok.windows, 1);
    let engine = EngineEvidence { cpu: ok, ..EngineEvidence::default() };
    assert_eq!(assess(Vec::<(String, &DirStats)>::new(), &engine, &th).verdict, Verdict::Ok);
    // A starved second in which the links kept their pace is paced, not starved.
    let mut paced = starved.clone();
    paced.links(LinksPace::Kept);
    assert_eq!((paced.starved_windows, paced.paced_windows), (0, 1));
    let mut run = CpuEvidence::default();
    run.add(&paced);
    run.add(&quiet);
    let engine = EngineEvidence { cpu: run, ..EngineEvidence::default() };
    let f = assess(Vec::<(String, &DirStats)>::new(), &engine, &th);
    assert_eq!(f.verdict, Verdict::Ok);
    let text = describe(&f);
    assert!(text.contains("the machine's tasks also waited for CPU in 1 of 2 seconds, but the links carrying bulk traffic kept their set rates (their serializers busy at least 93% of the time they had traffic): not counted"), "{text}");
    let mut quiet_too = quiet.clone();
    quiet_too.links(LinksPace::Kept);
    assert_eq!((quiet_too.starved_windows, quiet_too.paced_windows), (0, 0));
    // A starved second whose links fell short is slowed: starved, unless the run's
    // links kept their pace over the whole run; without bulk traffic, just starved.
    let mut slowed = starved.clone();
    slowed.links(LinksPace::Fell);
    let mut light = starved.clone();
    light.links(LinksPace::NoBulk);
    assert_eq!((slowed.starved_windows, slowed.slowed_windows), (1, 1));
    assert_eq!((light.starved_windows, light.slowed_windows), (1, 0));
    let mut run = CpuEvidence::default();
    for w in [&slowed, &paced, &light, &quiet] {
        run.add(w);
    }
    let held = run.run_kept_pace(LinksPace::Kept);
    assert_eq!((held.starved_windows, held.paced_windows, held.slowed_windows), (1, 2, 0));
    // (The nodes' waits are those of the seconds still starved: s1 60% of each.)
    assert_eq!(held.summary().waiting_nodes[0], ("s1".to_string(), 0.6));
    for pace in [LinksPace::Fell, LinksPace::NoBulk] {
        let fell = run.run_kept_pace(pace);
        assert_eq!((fell.starved_windows, fell.paced_windows, fell.slowed_windows), (2, 1, 1));
        assert_eq!(fell.summary().waiting_nodes[0], ("s1".to_string(), 0.6));
    }
}

#[test]
fn links_keep_their_pace_when_every_bulk_direction_kept_its_serializer_busy() {
    let dir = |tx_bytes: u64, busy_ms: u64, gap_ms: u64| DirStats {
        tx_bytes,
        serializer_busy_ns: busy_ms * 1_000_000,
        serializer_gap_ns: gap_ms * 1_000_000,
        ..DirStats::default()
    };
    let acks = dir(300_000, 24, 900);
    // A TCP flow's data at 100 Mbit/s, its serializer busy 990 of 1000 ms; the
    // acknowledgements the other way do not count (an eighth of the data or less).
    let held = dir(12_000_000, 990, 10);
    let pace = |pairs: &[(&DirStats, &DirStats)]| links_pace(pairs.iter().copied());
    assert_eq!(pace(&[(&held, &acks)]), LinksPace::Kept);
    assert_eq!(pace(&[(&acks, &held)]), LinksPace::Kept, "either way round");
    // A flow that ended a third into the window: its pace is over its traffic.
    let ending = dir(4_000_000, 330, 2);
    assert_eq!(pace(&[(&held, &acks), (&ending, &acks)]), LinksPace::Kept);
    // One that fell behind: idle 120 of 1000 ms between frames.
    let fell = dir(10_000_000, 880, 120);
    assert_eq!(pace(&[(&held, &acks), (&fell, &acks)]), LinksPace::Fell);
    // A bulk direction without the engine's serializer cannot show its pace.
    let unpaced = dir(12_000_000, 0, 0);
    assert_eq!(pace(&[(&held, &acks), (&unpaced, &acks)]), LinksPace::Fell);
    // No bulk traffic at all (pings, both ways alike): nothing witnesses the window.
    let ping = dir(9_800, 1, 990);
    assert_eq!(pace(&[(&ping, &ping)]), LinksPace::NoBulk);
    assert_eq!(pace(&[]), LinksPace::NoBulk);
}
