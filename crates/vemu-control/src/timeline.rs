//! The scenario's timeline (`events:`): actions at lab-clock times, repeated, ramped or
//! cycled, carried out by one thread through the controller (as API requests would be).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use vemu_engine::LabClock;
use vemu_link::ImpairmentsPatch;
use vemu_scenario::{EventAction, EventTarget, TimedEvent};

use crate::background::Background;
use crate::lab::Controller;
use crate::LockExt;

/// One firing: event `idx`, its repetition `rep`, and for ramps the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Firing {
    t_ns: u64,
    seq: u64,
    idx: usize,
    rep: u64,
    step: Option<u64>,
}

/// Run `events` against the controller; times are on the lab clock.
/// `skip`: the first firings, carried out by an earlier controller of the lab (which
/// died; see [`crate::lab::saved`]); the ones after them that fell due meanwhile are
/// carried out at once.
pub(crate) fn start(
    ctl: Arc<Mutex<Controller>>,
    events: Vec<TimedEvent>,
    clock: LabClock,
    skip: u64,
) -> Background {
    Background::spawn("vemu-timeline", !events.is_empty(), move |stop| {
        run(ctl, events, clock, skip, stop)
    })
}

fn run(
    ctl: Arc<Mutex<Controller>>,
    events: Vec<TimedEvent>,
    clock: LabClock,
    skip: u64,
    stop: Receiver<()>,
) {
    let mut heap = BinaryHeap::new();
    let mut seq = 0u64;
    let mut push = |heap: &mut BinaryHeap<Reverse<Firing>>, t_ns, idx, rep, step| {
        seq += 1;
        heap.push(Reverse(Firing { t_ns, seq, idx, rep, step }));
    };
    for (idx, e) in events.iter().enumerate() {
        push(&mut heap, e.at_ns, idx, 0, None);
    }
    let mut skipped = 0u64;
    while let Some(Reverse(f)) = heap.pop() {
        if skipped < skip {
            skipped += 1;
            for (t_ns, rep, step) in following(&events[f.idx], &f) {
                push(&mut heap, t_ns, f.idx, rep, step);
            }
            continue;
        }
        let now = clock.now_ns();
        if f.t_ns > now {
            match stop.recv_timeout(Duration::from_nanos(f.t_ns - now)) {
                Err(RecvTimeoutError::Timeout) => {}
                _ => return,
            }
        } else if stop.try_recv().is_ok() {
            return;
        }
        let e = &events[f.idx];
        for (t_ns, rep, step) in following(e, &f) {
            push(&mut heap, t_ns, f.idx, rep, step);
        }
        if let Err(m) = apply(&ctl, e, f) {
            eprintln!("timeline: events[{}] at {} ns: {m}", f.idx, f.t_ns);
            ctl.locked().emit(
                json!({"type": "warning", "message": format!("timeline events[{}]: {m}", f.idx)}),
            );
        }
    }
}

/// The firings that follow `f` of event `e`, as (time, repetition, step): at most the
/// next step of a ramp and the next repetition of an `every`. A ramp's steps are made
/// one at a time, so a ramp of any length costs one pending firing, not one per step.
fn following(e: &TimedEvent, f: &Firing) -> Vec<(u64, u64, Option<u64>)> {
    let mut out = Vec::new();
    if let EventAction::Ramp { over_ns, step_ns, .. } = &e.action {
        let steps = over_ns.div_ceil(*step_ns).max(1);
        let j = f.step.unwrap_or(0) + 1;
        if j <= steps {
            let at = |k: u64| k.saturating_mul(*step_ns).min(*over_ns);
            let start = f.t_ns - f.step.map_or(0, at);
            out.push((start.saturating_add(at(j)), f.rep, Some(j)));
        }
    }
    if let (Some(every), None) = (e.every_ns, f.step) {
        let next = f.t_ns.saturating_add(every);
        if e.until_ns.is_none_or(|u| next <= u) {
            out.push((next, f.rep + 1, None));
        }
    }
    out
}

fn apply(ctl: &Arc<Mutex<Controller>>, e: &TimedEvent, f: Firing) -> Result<(), String> {
    let mut c = ctl.locked();
    c.emit(json!({"type": "timeline", "event": f.idx, "t_ns": f.t_ns, "repetition": f.rep, "step": f.step}));
    // Counted before the change is made, so that a change that saves the controller's
    // state (see `crate::lab::saved`) saves the count with it: a controller taking over
    // never carries a firing out twice. The count of the others is saved after them.
    c.timeline_fired += 1;
    let r = carry_out(&mut c, e, f);
    c.save();
    r
}

/// What firing `f` of event `e` does, on the controller `c`.
fn carry_out(c: &mut Controller, e: &TimedEvent, f: Firing) -> Result<(), String> {
    let set = |c: &mut Controller, spec: &str, dir, patch: ImpairmentsPatch| {
        c.link_set(spec, dir, patch).map_err(|e| e.to_string())
    };
    match (&e.target, &e.action) {
        (EventTarget::Link { spec, direction }, EventAction::Set(p)) => {
            set(c, spec, *direction, p.clone())
        }
        (EventTarget::Link { spec, direction }, EventAction::Cycle(list)) => {
            set(c, spec, *direction, list[(f.rep as usize) % list.len()].clone())
        }
        (
            EventTarget::Link { spec, direction },
            EventAction::Ramp { from, to, over_ns, step_ns },
        ) => {
            let done = f.step.map_or(0, |j| (j * step_ns).min(*over_ns));
            let frac = if *over_ns == 0 { 1.0 } else { done as f64 / *over_ns as f64 };
            let patch = ImpairmentsPatch::interpolate(from, to, frac)?;
            set(c, spec, *direction, patch)
        }
        (EventTarget::Link { spec, .. }, EventAction::State(up)) => {
            c.link_state(spec, *up).map_err(|e| e.to_string())
        }
        (EventTarget::Node(n), EventAction::State(up)) => {
            c.node_state(n, *up).map_err(|e| e.to_string())
        }
        (EventTarget::Node(n), EventAction::Move { x_m, y_m, speed_mps }) => {
            c.node_move(n, vemu_radio::Pos::new(*x_m, *y_m), *speed_mps).map_err(|e| e.to_string())
        }
        (EventTarget::Node(n), EventAction::Run(cmd)) => {
            let paths = vemu_host::LabPaths::new(&c.plan().name);
            vemu_machine::supervise::spawn(&paths, n, cmd)
                .map(drop)
                .map_err(|e| format!("running '{cmd}' in {n}: {e}"))
        }
        _ => Err("this action does not apply to this target".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vemu_link::ImpairmentsPatch;
    use vemu_scenario::{Direction, EventTarget};

    fn ramp(over_ns: u64, step_ns: u64, every_ns: Option<u64>) -> TimedEvent {
        let p = ImpairmentsPatch { delay_ns: Some(0), ..Default::default() };
        TimedEvent {
            at_ns: 1_000,
            every_ns,
            until_ns: None,
            target: EventTarget::Link { spec: "a:b".into(), direction: Direction::Both },
            action: EventAction::Ramp { from: p.clone(), to: p, over_ns, step_ns },
        }
    }

    /// Walk the firings of one event as the timeline would, up to `n` of them.
    fn walk(e: &TimedEvent, n: usize) -> Vec<(u64, u64, Option<u64>)> {
        let mut heap = BinaryHeap::new();
        heap.push(Reverse((e.at_ns, 0u64, None::<u64>)));
        let mut seen = Vec::new();
        while let Some(Reverse((t_ns, rep, step))) = heap.pop() {
            seen.push((t_ns, rep, step));
            if seen.len() == n {
                break;
            }
            let f = Firing { t_ns, seq: 0, idx: 0, rep, step };
            let next = following(e, &f);
            assert!(next.len() <= 2, "one firing makes at most two more");
            heap.extend(next.into_iter().map(Reverse));
        }
        seen
    }

    #[test]
    fn ramp_steps_come_one_at_a_time_on_their_schedule() {
        let s = walk(&ramp(35, 10, None), 100);
        assert_eq!(
            s,
            vec![
                (1_000, 0, None),
                (1_010, 0, Some(1)),
                (1_020, 0, Some(2)),
                (1_030, 0, Some(3)),
                (1_035, 0, Some(4))
            ]
        );
    }

    #[test]
    fn a_ramp_of_ten_billion_steps_costs_one_pending_firing() {
        // over: 100000000s, step: 10ms — once made all at once, the controller grew by
        // 350 MB/s until allocation failed.
        let e = ramp(100_000_000_000_000_000, 10_000_000, None);
        let s = walk(&e, 1000);
        assert_eq!(s.len(), 1000);
        assert_eq!(s[999], (1_000 + 999 * 10_000_000, 0, Some(999)));
    }

    #[test]
    fn repeated_ramps_restart_their_steps() {
        let s = walk(&ramp(20, 10, Some(100)), 7);
        assert_eq!(
            s,
            vec![
                (1_000, 0, None),
                (1_010, 0, Some(1)),
                (1_020, 0, Some(2)),
                (1_100, 1, None),
                (1_110, 1, Some(1)),
                (1_120, 1, Some(2)),
                (1_200, 2, None)
            ]
        );
    }
}
