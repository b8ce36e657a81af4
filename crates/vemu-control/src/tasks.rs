//! The lab's threads that act on its controller on the lab clock: the mobility ticker
//! ([`crate::radio`]) and the fidelity monitor ([`crate::fidelity`]). The daemon starts
//! them once the lab is up; dropping their [`Background`] stops them.

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use vemu_engine::{DirStats, LabClock};

use crate::background::Background;
use crate::fidelity::{
    assess, delta, describe, tap_delta, CpuEvidence, EngineEvidence, Verdict, WINDOW,
};
use crate::lab::Controller;
use crate::LockExt;
use vemu_machine::traffic::Flow;

/// The thread that advances positions (none without wireless segments).
pub(crate) fn mobility(ctl: Arc<Mutex<Controller>>, clock: LabClock) -> Background {
    let any = !ctl.locked().movers.is_empty();
    Background::spawn("vemu-mobility", any, move |stop| run(ctl, clock, stop))
}

fn run(ctl: Arc<Mutex<Controller>>, clock: LabClock, stop: Receiver<()>) {
    loop {
        let now = clock.now_ns();
        let Some(next) = ctl.locked().radio_ticks(now) else { return };
        let wait = next.saturating_sub(clock.now_ns());
        match stop.recv_timeout(Duration::from_nanos(wait)) {
            Err(RecvTimeoutError::Timeout) => {}
            _ => return,
        }
    }
}

/// The thread that reads, every [`WIFI_POLL`], what the infrastructure channels did
/// (none without one).
pub(crate) fn wifi(ctl: Arc<Mutex<Controller>>) -> Background {
    let any = !crate::lab::wifi::infra_segments(&ctl.locked().plan).is_empty();
    Background::spawn("vemu-wifi", any, move |stop| {
        while let Err(RecvTimeoutError::Timeout) = stop.recv_timeout(WIFI_POLL) {
            ctl.locked().wifi_poll();
        }
    })
}

/// How often the controller reads the infrastructure channels' events: what the event
/// stream lags behind them at most (their times are the channel's own).
pub(crate) const WIFI_POLL: Duration = Duration::from_millis(200);

/// The thread that judges every [`WINDOW`] of the run and warns while it is not `ok`.
pub(crate) fn fidelity_monitor(ctl: Arc<Mutex<Controller>>) -> Background {
    Background::spawn("vemu-fidelity", true, move |stop| {
        // Above the nodes' programs, at the niceness of a busy engine shard (-10; shards
        // are real-time when they can be): the instrument that says whether the lab's
        // software was starved of CPU must not be starved itself. Its reading walks the
        // nodes' threads in /proc (3-10 ms on an idle machine): at niceness 10 it judged a
        // lab starved by 32 TCP flows in windows of up to 7 s, after the fact; at the
        // ordinary priority, beside those flows, a reading took 0.1-0.3 s here (6-9 ms of
        // CPU) and once 5.9 s in CI (one window for the whole run). The walk also stops
        // at a budget ([`vemu_host::cpu_wait`]).
        raise_priority();
        // The first window starts when the monitor can first read the lab (the lab is up:
        // its bring-up holds the controller), with the machines' CPU then. (It started
        // at 0 without a CPU reading: a first window stretched over a long bring-up was
        // judged ok whatever the load, and a check in it trusted.)
        let mut before: Vec<DirStats> = Vec::new();
        let mut work_before: Vec<u64> = Vec::new();
        let mut channels_before: Vec<crate::fidelity::ChannelDecisions> = Vec::new();
        let mut cpu_before: Vec<vemu_machine::worker::MachineCpu> = Vec::new();
        let mut t_before = 0u64;
        // This machine's CPU is read without the controller: its walk of the nodes'
        // threads in /proc takes milliseconds, more under load, and the API waited
        // behind it (issue 61). (A lab across machines: each agent reads its own.)
        let cpu_reader = ctl.locked().worker.cpu_reader();
        let read_cpu = || cpu_reader.as_ref().map(|r| vec![r.read()]);
        {
            let cpu_now = read_cpu();
            let mut c = ctl.locked();
            if let Ok(mut counters) = c.counters() {
                if let Some(cpu) = cpu_now {
                    counters.cpu = cpu;
                }
                before =
                    c.named_directions(&counters).into_iter().map(|(_, d)| d.clone()).collect();
                channels_before = c.channel_decisions(&counters);
                (work_before, cpu_before) = (counters.shard_work_ns.clone(), counters.cpu.clone());
                t_before = c.clock.now_ns();
            }
        }
        let mut was = Verdict::Ok;
        while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stop.recv_timeout(WINDOW) {
            let cpu_now = read_cpu();
            let waited = std::time::Instant::now();
            let mut c = ctl.locked();
            let locked = waited.elapsed();
            let counters = match c.counters() {
                Ok(mut counters) => {
                    if let Some(cpu) = cpu_now.clone() {
                        counters.cpu = cpu;
                    }
                    counters
                }
                Err(e) => {
                    eprintln!("fidelity monitor: reading the lab's counters: {e}");
                    continue;
                }
            };
            let read = waited.elapsed() - locked;
            let taps = c.tap_queues().unwrap_or_else(|e| {
                eprintln!("fidelity monitor: reading the TAP counters: {e}");
                Vec::new()
            });
            let t_ns = c.clock.now_ns();
            let now = c.named_directions(&counters);
            let window: Vec<(String, DirStats)> = now
                .iter()
                .enumerate()
                .map(|(i, (n, d))| {
                    (n.clone(), before.get(i).map_or_else(|| (*d).clone(), |b| delta(d, b)))
                })
                .collect();
            before = now.into_iter().map(|(_, d)| d.clone()).collect();
            let span = t_ns.saturating_sub(t_before).max(1) as f64;
            if span > 2.0 * WINDOW.as_nanos() as f64 {
                // (Said, so that a verdict resting on few windows shows why.)
                eprintln!(
                    "fidelity monitor: a window of {:.1} s (waited {:.2} s for the controller, \
                     {:.2} s reading the counters)",
                    span / 1e9,
                    locked.as_secs_f64(),
                    read.as_secs_f64()
                );
            }
            let shard_busy: Vec<f64> = counters
                .shard_work_ns
                .iter()
                .enumerate()
                .map(|(i, w)| {
                    w.saturating_sub(work_before.get(i).copied().unwrap_or(0)) as f64 / span
                })
                .collect();
            let saturated = shard_busy.iter().any(|&b| b > c.plan.fidelity.busy_fraction);
            let window_from = t_before;
            (work_before, t_before) = (counters.shard_work_ns.clone(), t_ns);
            let mut cpu = CpuEvidence::window(&counters.cpu, &cpu_before, &c.plan.fidelity);
            cpu.links(crate::fidelity::links_pace_of(&window));
            cpu_before = counters.cpu.clone();
            let channels_now = c.channel_decisions(&counters);
            let channels = channels_now
                .iter()
                .enumerate()
                .map(|(i, ch)| channels_before.get(i).map_or_else(|| ch.clone(), |b| ch.since(b)))
                .collect();
            channels_before = channels_now;
            let engine = EngineEvidence {
                channels,
                shard_busy,
                windows: 1,
                saturated_windows: saturated as u64,
                taps: tap_delta(&taps, &c.watch.taps),
                faults: counters.engine_faults.clone(),
                cpu: cpu.clone(),
            };
            let f = assess(window.iter().map(|(n, d)| (n.clone(), d)), &engine, &c.plan.fidelity);
            c.judge.window(window_from, t_ns, f.verdict, f.cpu.paced_windows > 0);
            if f.verdict != Verdict::Ok || was != Verdict::Ok {
                eprintln!("[{:.1} s] {}", t_ns as f64 / 1e9, describe(&f));
                c.emit(serde_json::json!({"type": "fidelity", "t_ns": t_ns, "window_ns": WINDOW.as_nanos() as u64, "fidelity": f}));
            }
            was = f.verdict;
            let w = &mut c.watch;
            w.windows += 1;
            w.saturated_windows += saturated as u64;
            w.cpu.add(&cpu);
            for n in cpu_before.iter().flat_map(|m| &m.nodes) {
                w.cpu_waits.insert(n.node.clone(), n.wait_ns);
            }
            w.taps = taps;
            w.now = Some(f);
        }
    })
}

/// Put the calling thread at the shards' niceness at normal priority (see
/// [`fidelity_monitor`]; it weighs within the controller's session group, which the
/// engine raises to it too); left as it is where that is refused (no privilege): the
/// monitor's log then shows its long windows.
fn raise_priority() {
    let nice = vemu_engine::NORMAL_NICE;
    // SAFETY: setpriority on the calling thread (its tid) with an integer niceness.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, nice) };
    if r != 0 {
        eprintln!(
            "fidelity monitor: cannot raise its priority ({}): it may judge late under load",
            std::io::Error::last_os_error()
        );
    }
}

/// Pass the links' drops so far to the judge's `drops` checks, if one is counting.
fn link_drops(c: &mut Controller, now_ns: u64) {
    if !c.judge.needs_link_drops(now_ns) {
        return;
    }
    if let Ok(counters) = c.counters() {
        let drops: Vec<u64> =
            counters.links.iter().map(|dirs| dirs.iter().map(|d| d.dropped()).sum()).collect();
        c.judge.link_drops(now_ns, &drops);
    }
}

/// Start the flows of the `flow` checks that start at `now_ns` (as `vemu traffic cbr`
/// does, from the check's start).
fn start_flows(c: &mut Controller, now_ns: u64) {
    let starting: Vec<(usize, vemu_machine::traffic::CbrRequest)> = c
        .judge
        .flows_to_start(now_ns)
        .into_iter()
        .filter_map(|(i, e)| match &e.check {
            vemu_scenario::expect::Check::Flow(f) => Some((
                i,
                vemu_machine::traffic::CbrRequest {
                    from: f.from.clone(),
                    to: f.to.clone(),
                    size_bytes: f.size_bytes,
                    rate_pps: f.rate_pps,
                    start_ns: Some(e.start_ns),
                    duration_ns: Some(f.duration_ns),
                    count: None,
                    to_addr: None,
                },
            )),
            _ => None,
        })
        .collect();
    for (i, r) in starting {
        let id = match c.traffic_cbr(r) {
            Ok(v) => v["id"].as_u64().map(|id| id as u32).ok_or_else(|| "no flow id".to_string()),
            Err(e) => Err(e.to_string()),
        };
        c.judge.flow_started(i, now_ns, id);
    }
}

/// The `flow` checks whose flows have run at `now_ns`, with their flows (records
/// gathered here from the other machines first), to be measured without holding the
/// controller: reading a flow's records is reading files.
fn flows_to_judge(c: &mut Controller, now_ns: u64) -> Vec<(usize, u32, Option<Flow>)> {
    let due = c.judge.flows_to_judge(now_ns);
    if due.is_empty() {
        return Vec::new();
    }
    let _ = c.collect_traffic();
    due.into_iter().map(|(i, id)| (i, id, c.flows.iter().find(|f| f.id == id).cloned())).collect()
}

/// Measure flows from their records (see [`flows_to_judge`]).
fn measure_flows(
    lab: &str,
    due: Vec<(usize, u32, Option<Flow>)>,
) -> Vec<(usize, Result<crate::expect::FlowMeasure, String>)> {
    let log = vemu_host::LabPaths::new(lab).log_dir();
    due.into_iter()
        .map(|(i, id, f)| {
            let m = match f {
                Some(f) => crate::report::flow_measure(&log, &f).map_err(|e| format!("{e:#}")),
                None => Err(format!("no flow {id}")),
            };
            (i, m)
        })
        .collect()
}

/// How often the judge probes the checks that are due.
const PROBE_EVERY: Duration = Duration::from_millis(200);

/// The thread that judges the lab's checks (`expect:`): every [`PROBE_EVERY`] it probes
/// those due, all at once, and passes their results, the lab clock and (for a fidelity
/// check) the run's verdict to the judge; it says each check's result as it resolves
/// (the controller's log, `expect` events) and ends when all are.
pub(crate) fn expectations(ctl: Arc<Mutex<Controller>>, clock: LabClock) -> Background {
    use crate::expect::{probe, Outcome};
    use vemu_scenario::expect::Check;
    let any = !ctl.locked().judge.done();
    Background::spawn("vemu-expect", any, move |stop| loop {
        let now = clock.now_ns();
        // Each check's outcome before this round (a check resolved in it is said: also
        // a flow check whose flow could not start).
        let before: Vec<Outcome> = ctl.locked().judge.results().iter().map(|r| r.outcome).collect();
        // (Before the probes too when a `drops` check starts: it counts from its start,
        // not from after the traffic a probe of this round makes.)
        {
            let mut c = ctl.locked();
            if c.judge.starts_counting_drops(now) {
                link_drops(&mut c, now);
            }
        }
        start_flows(&mut ctl.locked(), now);
        let due: Vec<_> = {
            let c = ctl.locked();
            c.judge
                .due(now)
                .into_iter()
                .map(|(i, check)| {
                    let node = match check {
                        Check::Reach { from, .. } => from,
                        Check::Route { node, .. }
                        | Check::Run { node, .. }
                        | Check::ValleyFree { node, .. } => node,
                        Check::Fidelity { .. } | Check::Drops { .. } | Check::Flow(_) => "",
                    };
                    let left_s = c.judge.deadline_ns(i).saturating_sub(now) as f64 / 1e9;
                    (i, check.clone(), c.door(node), left_s)
                })
                .collect()
        };
        let probed: Vec<(usize, bool, String, u64)> = std::thread::scope(|s| {
            let running: Vec<_> = due
                .into_iter()
                .map(|(i, check, door, left_s)| {
                    s.spawn(move || match door {
                        Ok(d) => {
                            let (holds, why) = probe::holds(d, &check, left_s);
                            (i, holds, why, clock.now_ns())
                        }
                        Err(e) => (i, false, e.to_string(), clock.now_ns()),
                    })
                })
                .collect();
            running.into_iter().filter_map(|h| h.join().ok()).collect()
        });
        let (lab, flows) = {
            let mut c = ctl.locked();
            (c.plan.name.clone(), flows_to_judge(&mut c, clock.now_ns()))
        };
        let measured = measure_flows(&lab, flows);
        {
            let mut c = ctl.locked();
            for (i, holds, why, ended) in probed {
                c.judge.probed(i, now, holds, &why);
                c.judge.probe_ended(i, ended);
            }
            let t = clock.now_ns();
            let run = if c.judge.needs_run_verdict(t) { c.run_verdict() } else { Verdict::Ok };
            link_drops(&mut c, t);
            for (i, m) in measured {
                c.judge.flow_measured(i, t, m);
            }
            c.judge.tick(t, run);
            for (r, was) in c.judge.results().iter().zip(before) {
                if was == Outcome::Pending && r.outcome != Outcome::Pending {
                    eprintln!("[{:.1} s] check {}", t as f64 / 1e9, r.line());
                    c.emit(serde_json::json!({"type": "expect", "t_ns": t, "check": r}));
                }
            }
            if c.judge.done() {
                return;
            }
        }
        if !matches!(stop.recv_timeout(PROBE_EVERY), Err(RecvTimeoutError::Timeout)) {
            return;
        }
    })
}
