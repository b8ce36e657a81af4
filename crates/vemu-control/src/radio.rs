//! Movement on wireless segments: each member's mobility model advanced on the lab clock
//! at the segment's tick, positions handed to the engine, written to the lab's
//! `positions.csv`, and announced on the event stream.

use std::io::Write;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use vemu_engine::LabClock;
use vemu_radio::mobility::{Mobility, Walker};
use vemu_radio::ns2::Trace;
use vemu_radio::Pos;
use vemu_scenario::Plan;

use crate::background::Background;
use crate::lab::Controller;
use crate::LockExt;

/// The members of one wireless segment, moving.
pub(crate) struct Movers {
    pub seg: usize,
    pub tick_ns: u64,
    walkers: Vec<Walker>,
    /// Positions last handed to the engine.
    pub last: Vec<Pos>,
    /// The next tick's lab time, ns.
    next_ns: u64,
}

/// Walkers for every wireless segment of a plan.
pub(crate) fn movers(plan: &Plan) -> Vec<Movers> {
    plan.segments
        .iter()
        .enumerate()
        .filter_map(|(seg, g)| {
            let w = g.wireless.as_ref()?;
            let walkers: Vec<Walker> = w.radios.iter().map(|r| Walker::new(r.mobility.clone(), r.start, r.seed)).collect();
            let last = walkers.iter().map(|w| w.position()).collect();
            Some(Movers { seg, tick_ns: w.tick_ns, walkers, last, next_ns: w.tick_ns })
        })
        .collect()
}

impl Movers {
    /// Positions at lab time `t_ns`, and whether any changed since the last call.
    fn advance(&mut self, t_ns: u64) -> (Vec<Pos>, Vec<usize>) {
        let pos: Vec<Pos> = self.walkers.iter_mut().map(|w| w.advance(t_ns)).collect();
        let moved = (0..pos.len()).filter(|&i| pos[i] != self.last[i]).collect();
        (pos, moved)
    }

    /// Send member `m` to `to`: at once, or in a straight line at `speed_mps` from lab
    /// time `now_ns`. It then stays there (its mobility model no longer applies).
    pub fn move_to(&mut self, m: usize, to: Pos, speed_mps: Option<f64>, now_ns: u64) {
        let from = self.walkers[m].advance(now_ns);
        self.walkers[m] = match speed_mps {
            None => Walker::new(Mobility::Static, to, 0),
            Some(s) => {
                let mut w = Walker::new(Mobility::Trace(Trace { start: from, moves: vec![(now_ns, to, s)] }), from, 0);
                w.advance(now_ns);
                w
            }
        };
    }
}

impl Controller {
    /// Carry out the ticks of every wireless segment due by `now_ns`; returns when the
    /// next one is due.
    pub(crate) fn radio_ticks(&mut self, now_ns: u64) -> Option<u64> {
        for k in 0..self.movers.len() {
            while self.movers[k].next_ns <= now_ns {
                let t = self.movers[k].next_ns;
                self.movers[k].next_ns += self.movers[k].tick_ns;
                self.positions_at(k, t);
            }
        }
        self.movers.iter().map(|m| m.next_ns).min()
    }

    /// Move segment `k`'s members to their places at lab time `t_ns` and tell the engine,
    /// the log and the event stream about those that moved.
    pub(crate) fn positions_at(&mut self, k: usize, t_ns: u64) {
        let (pos, moved) = self.movers[k].advance(t_ns);
        if moved.is_empty() {
            return;
        }
        let seg = self.movers[k].seg;
        let g = &self.plan.segments[seg];
        let names: Vec<String> = moved.iter().map(|&m| self.plan.nodes[g.members[m].end.node].name.clone()).collect();
        if let Some(log) = &mut self.positions_log {
            for (&m, name) in moved.iter().zip(&names) {
                let _ = writeln!(log, "{:.3},{},{},{:.3},{:.3}", t_ns as f64 / 1e9, g.name, name, pos[m].x, pos[m].y);
            }
            let _ = log.flush();
        }
        let list: Vec<_> = moved.iter().zip(&names).map(|(&m, n)| json!({"node": n, "x_m": pos[m].x, "y_m": pos[m].y})).collect();
        self.emit(json!({"type": "positions", "segment": g.name, "t_ns": t_ns, "moved": list}));
        self.movers[k].last.clone_from(&pos);
        let _ = self.worker.call(crate::worker::WorkerRequest::Positions { seg, positions: pos }, &mut |_, _| {});
    }
}

/// The thread that advances positions (none without wireless segments).
pub(crate) fn start(ctl: Arc<Mutex<Controller>>, clock: LabClock) -> Background {
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
