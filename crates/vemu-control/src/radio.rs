//! Movement on wireless segments: each member's mobility model advanced on the lab clock
//! at the segment's tick, positions handed to the engine, written to the lab's
//! `positions.csv`, and announced on the event stream.

use vemu_radio::mobility::{Mobility, Walker};
use vemu_radio::ns2::Trace;
use vemu_radio::Pos;
use vemu_scenario::Plan;

/// The members of one wireless segment, moving.
pub(crate) struct Movers {
    pub seg: usize,
    pub tick_ns: u64,
    walkers: Vec<Walker>,
    /// Positions last handed to the engine.
    pub last: Vec<Pos>,
    /// The next tick's lab time, ns.
    pub next_ns: u64,
}

/// Walkers for every wireless segment of a plan.
pub(crate) fn movers(plan: &Plan) -> Vec<Movers> {
    plan.segments
        .iter()
        .enumerate()
        .filter_map(|(seg, g)| {
            let w = g.wireless.as_ref()?;
            let walkers: Vec<Walker> =
                w.radios.iter().map(|r| Walker::new(r.mobility.clone(), r.start, r.seed)).collect();
            let last = walkers.iter().map(|w| w.position()).collect();
            Some(Movers { seg, tick_ns: w.tick_ns, walkers, last, next_ns: w.tick_ns })
        })
        .collect()
}

impl Movers {
    /// The time of the next tick if it is due by `now_ns` (the tick after it then
    /// becomes the next); `None` when none is due yet.
    pub fn next_due(&mut self, now_ns: u64) -> Option<u64> {
        let t = self.next_ns;
        (t <= now_ns).then(|| {
            self.next_ns += self.tick_ns;
            t
        })
    }

    /// Positions at lab time `t_ns`, and whether any changed since the last call.
    pub fn advance(&mut self, t_ns: u64) -> (Vec<Pos>, Vec<usize>) {
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
                let mut w = Walker::new(
                    Mobility::Trace(Trace { start: from, moves: vec![(now_ns, to, s)] }),
                    from,
                    0,
                );
                w.advance(now_ns);
                w
            }
        };
    }
}
