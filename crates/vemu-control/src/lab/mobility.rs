//! The controller's side of movement on wireless segments ([`crate::radio`]): ticks
//! carried out on the lab clock, positions handed to the engine, the log and the event
//! stream.

use std::io::Write;

use serde_json::json;

use super::{Controller, LabError};

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

/// Most cells of a received-power map.
pub const MAX_POWER_CELLS: usize = 40_000;

impl Controller {
    /// The wireless segment named `segment` (its index and its radio plan).
    fn wireless_segment(
        &self,
        segment: &str,
    ) -> Result<(usize, &vemu_scenario::WirelessPlan), LabError> {
        let (g, seg) = self
            .plan
            .segments
            .iter()
            .enumerate()
            .find(|(_, s)| s.name == segment)
            .ok_or_else(|| LabError::not_found(format!("no segment named '{segment}'")))?;
        let w = seg.wireless.as_ref().ok_or_else(|| {
            LabError::invalid(format!("segment '{segment}' is not a wireless segment"))
        })?;
        Ok((g, w))
    }

    /// A wireless segment's city (its buildings and streets), if it has one.
    pub fn city(&self, segment: &str) -> Result<Option<vemu_radio::city::City>, LabError> {
        Ok(self.wireless_segment(segment)?.1.medium.city.as_deref().cloned())
    }

    /// What a receiver would hear of `node`'s radio on wireless segment `segment` at each
    /// point of the plane (cells of `cell_m`, or about 60 across): over the city, or the
    /// members' extent widened by the channel's range.
    pub fn power_map(
        &self,
        segment: &str,
        node: &str,
        cell_m: Option<f64>,
    ) -> Result<vemu_radio::city::PowerMap, LabError> {
        let (g, w) = self.wireless_segment(segment)?;
        let ni = self.node_index(node)?;
        let m = self.plan.segments[g].members.iter().position(|m| m.end.node == ni).ok_or_else(
            || LabError::invalid(format!("node '{node}' is not a member of '{segment}'")),
        )?;
        let pos = self.movers.iter().find(|k| k.seg == g).map_or(w.radios[m].start, |k| k.last[m]);
        let (lo, hi) = match w.medium.city.as_deref().map(|c| c.extent()) {
            Some((cw, ch)) if cw > 0.0 && ch > 0.0 => ((0.0, 0.0), (cw, ch)),
            _ => {
                let r = w.medium.model.range_m(&w.medium.radio).min(10_000.0);
                let last = self.movers.iter().find(|k| k.seg == g).map(|k| k.last.clone());
                let pts = last.unwrap_or_else(|| w.radios.iter().map(|r| r.start).collect());
                let (mut lo, mut hi) = ((pos.x, pos.y), (pos.x, pos.y));
                for p in pts {
                    lo = (lo.0.min(p.x), lo.1.min(p.y));
                    hi = (hi.0.max(p.x), hi.1.max(p.y));
                }
                ((lo.0 - r, lo.1 - r), (hi.0 + r, hi.1 + r))
            }
        };
        let (width, height) = (hi.0 - lo.0, hi.1 - lo.1);
        let least = (width * height / MAX_POWER_CELLS as f64).sqrt();
        let cell = match cell_m {
            Some(c) if !(c.is_finite() && c > 0.0) => {
                return Err(LabError::invalid(format!(
                    "a cell is a size in metres above 0, got {c}"
                )))
            }
            Some(c) => c.max(least),
            None => (width.max(height) / 60.0).max(least),
        };
        Ok(vemu_radio::air::power_map(&w.medium, m, pos, lo, (width, height), cell))
    }
}
