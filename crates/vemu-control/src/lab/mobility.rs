//! The controller's side of movement on wireless segments ([`crate::radio`]): ticks
//! carried out on the lab clock, positions handed to the engine, the log and the event
//! stream.

use std::io::Write;

use serde_json::json;

use super::Controller;

impl Controller {
    /// Carry out the ticks of every wireless segment due by `now_ns`; returns when the
    /// next one is due.
    pub(crate) fn radio_ticks(&mut self, now_ns: u64) -> Option<u64> {
        for k in 0..self.movers.len() {
            while let Some(t) = self.movers[k].next_due(now_ns) {
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
        let names: Vec<String> =
            moved.iter().map(|&m| self.plan.nodes[g.members[m].end.node].name.clone()).collect();
        if let Some(log) = &mut self.positions_log {
            for (&m, name) in moved.iter().zip(&names) {
                let _ = writeln!(
                    log,
                    "{:.3},{},{},{:.3},{:.3}",
                    t_ns as f64 / 1e9,
                    g.name,
                    name,
                    pos[m].x,
                    pos[m].y
                );
            }
            let _ = log.flush();
        }
        let list: Vec<_> = moved
            .iter()
            .zip(&names)
            .map(|(&m, n)| json!({"node": n, "x_m": pos[m].x, "y_m": pos[m].y}))
            .collect();
        self.emit(json!({"type": "positions", "segment": g.name, "t_ns": t_ns, "moved": list}));
        self.movers[k].last.clone_from(&pos);
        let _ = self.worker.positions(seg, pos);
    }
}
