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
pub(crate) fn start(ctl: Arc<Mutex<Controller>>, events: Vec<TimedEvent>, clock: LabClock) -> Background {
    Background::spawn("vemu-timeline", !events.is_empty(), move |stop| run(ctl, events, clock, stop))
}

fn run(ctl: Arc<Mutex<Controller>>, events: Vec<TimedEvent>, clock: LabClock, stop: Receiver<()>) {
    let mut heap = BinaryHeap::new();
    let mut seq = 0u64;
    let mut push = |heap: &mut BinaryHeap<Reverse<Firing>>, t_ns, idx, rep, step| {
        seq += 1;
        heap.push(Reverse(Firing { t_ns, seq, idx, rep, step }));
    };
    for (idx, e) in events.iter().enumerate() {
        push(&mut heap, e.at_ns, idx, 0, None);
    }
    while let Some(Reverse(f)) = heap.pop() {
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
        // What follows this firing.
        if let (EventAction::Ramp { over_ns, step_ns, .. }, None) = (&e.action, f.step) {
            let steps = over_ns.div_ceil(*step_ns).max(1);
            for j in 1..=steps {
                push(&mut heap, f.t_ns + (j * step_ns).min(*over_ns), f.idx, f.rep, Some(j));
            }
        }
        if let (Some(every), None) = (e.every_ns, f.step) {
            let next = f.t_ns + every;
            if e.until_ns.is_none_or(|u| next <= u) {
                push(&mut heap, next, f.idx, f.rep + 1, None);
            }
        }
        if let Err(m) = apply(&ctl, e, f) {
            eprintln!("timeline: events[{}] at {} ns: {m}", f.idx, f.t_ns);
            ctl.lock().unwrap().emit(json!({"type": "warning", "message": format!("timeline events[{}]: {m}", f.idx)}));
        }
    }
}

fn apply(ctl: &Arc<Mutex<Controller>>, e: &TimedEvent, f: Firing) -> Result<(), String> {
    let mut c = ctl.lock().unwrap();
    c.emit(json!({"type": "timeline", "event": f.idx, "t_ns": f.t_ns, "repetition": f.rep, "step": f.step}));
    let set = |c: &mut Controller, spec: &str, dir, patch: ImpairmentsPatch| c.link_set(spec, dir, patch).map_err(|e| e.to_string());
    match (&e.target, &e.action) {
        (EventTarget::Link { spec, direction }, EventAction::Set(p)) => set(&mut c, spec, *direction, p.clone()),
        (EventTarget::Link { spec, direction }, EventAction::Cycle(list)) => set(&mut c, spec, *direction, list[(f.rep as usize) % list.len()].clone()),
        (EventTarget::Link { spec, direction }, EventAction::Ramp { from, to, over_ns, step_ns }) => {
            let done = f.step.map_or(0, |j| (j * step_ns).min(*over_ns));
            let frac = if *over_ns == 0 { 1.0 } else { done as f64 / *over_ns as f64 };
            let patch = ImpairmentsPatch::interpolate(from, to, frac)?;
            set(&mut c, spec, *direction, patch)
        }
        (EventTarget::Link { spec, .. }, EventAction::State(up)) => c.link_state(spec, *up).map_err(|e| e.to_string()),
        (EventTarget::Node(n), EventAction::State(up)) => c.node_state(n, *up).map_err(|e| e.to_string()),
        (EventTarget::Node(n), EventAction::Move { x_m, y_m, speed_mps }) => c.node_move(n, vemu_radio::Pos::new(*x_m, *y_m), *speed_mps).map_err(|e| e.to_string()),
        (EventTarget::Node(n), EventAction::Run(cmd)) => {
            let paths = vemu_host::LabPaths::new(&c.plan().name);
            crate::supervise::spawn(&paths, n, cmd).map(drop).map_err(|e| format!("running '{cmd}' in {n}: {e}"))
        }
        _ => Err("this action does not apply to this target".into()),
    }
}
