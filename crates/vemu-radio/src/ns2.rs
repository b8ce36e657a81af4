//! ns-2 movement files (`setdest` output, BonnMotion's ns-2 export): initial positions
//! (`$node_(i) set X_ 10.0`) and timed destinations
//! (`$ns_ at 2.5 "$node_(i) setdest 100.0 50.0 3.0"`), replayed on the lab clock.

use serde::{Deserialize, Serialize};

use crate::Pos;

/// One node's movement from an ns-2 file.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Trace {
    pub start: Pos,
    /// (time ns, destination, speed m/s), in time order.
    pub moves: Vec<(u64, Pos, f64)>,
}

impl Trace {
    /// Position at lab time `t_ns`: each `setdest` sends the node from where it is
    /// toward the destination in a straight line at the speed, until it arrives or the
    /// next `setdest` redirects it.
    pub fn position_at(&self, t_ns: u64) -> Pos {
        self.cursor().advance(self, t_ns)
    }

    /// A reader of this trace from lab time 0, for positions at times that only grow:
    /// each move is looked at once (a trace may have millions).
    pub fn cursor(&self) -> TraceCursor {
        TraceCursor { next: 0, pos: self.start, since_ns: 0, heading: None }
    }
}

/// Where a node following a [`Trace`] is, as time goes forward.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceCursor {
    /// The first move not yet begun.
    next: usize,
    /// Position at `since_ns`, the start of the current move.
    pos: Pos,
    since_ns: u64,
    /// The current move's destination and speed, m/s.
    heading: Option<(Pos, f64)>,
}

impl TraceCursor {
    /// Position at lab time `t_ns` (not earlier than the last call's).
    pub fn advance(&mut self, trace: &Trace, t_ns: u64) -> Pos {
        let t_ns = t_ns.max(self.since_ns);
        while let Some(&(at, dest, speed)) = trace.moves.get(self.next).filter(|m| m.0 <= t_ns) {
            self.pos = self.along(at);
            self.since_ns = at;
            self.heading = Some((dest, speed));
            self.next += 1;
        }
        self.along(t_ns)
    }

    /// Where the current move has taken the node at `to_ns`.
    fn along(&self, to_ns: u64) -> Pos {
        let Some((dest, speed)) = self.heading else { return self.pos };
        let dist = self.pos.distance(dest);
        let travel = speed * (to_ns - self.since_ns) as f64 / 1e9;
        if dist == 0.0 || travel >= dist {
            dest
        } else {
            let f = travel / dist;
            Pos::new(self.pos.x + (dest.x - self.pos.x) * f, self.pos.y + (dest.y - self.pos.y) * f)
        }
    }
}

/// A parse error, with its 1-based line.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

/// Node indices a movement file may use by default (`$node_(0)` … `$node_(65535)`).
pub const MAX_NODES: usize = 65_536;

fn node_index(s: &str) -> Option<usize> {
    s.trim().strip_prefix("$node_(")?.strip_suffix(')')?.parse().ok()
}

fn num(s: &str, line: usize, what: &str) -> Result<f64, ParseError> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| ParseError { line, message: format!("{what} '{s}' is not a number") })
}

/// Parse a movement file into one trace per node index (nodes the file never mentions
/// stay at the origin, with no moves). Indices must be below `max_nodes`.
pub fn parse(text: &str, max_nodes: usize) -> Result<Vec<Trace>, ParseError> {
    let mut traces: Vec<Trace> = Vec::new();
    let mut entries: Vec<(usize, u64, Pos, f64)> = Vec::new();
    let mut starts: Vec<(usize, char, f64)> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = n + 1;
        let l = raw.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let bad = |m: &str| ParseError { line, message: format!("{m}: '{l}'") };
        let words: Vec<&str> = l.split_whitespace().collect();
        if words.first().is_some_and(|w| w.starts_with("$node_(")) && words.get(1) == Some(&"set") {
            let i = node_index(words[0]).filter(|&i| i < max_nodes).ok_or_else(|| {
                bad(&format!("bad node reference (indices go from 0 to {})", max_nodes - 1))
            })?;
            let axis = match words.get(2) {
                Some(&"X_") => 'x',
                Some(&"Y_") => 'y',
                Some(&"Z_") => 'z',
                _ => return Err(bad("expected 'set X_', 'set Y_' or 'set Z_'")),
            };
            let v = num(words.get(3).ok_or_else(|| bad("missing value"))?, line, "coordinate")?;
            starts.push((i, axis, v));
        } else if words.first() == Some(&"$ns_") && words.get(1) == Some(&"at") {
            let t = num(words.get(2).ok_or_else(|| bad("missing time"))?, line, "time")?;
            if t < 0.0 {
                return Err(bad("negative time"));
            }
            let q = l.find('"').ok_or_else(|| bad("expected a quoted command"))?;
            let cmd: Vec<&str> = l[q + 1..].trim_end_matches('"').split_whitespace().collect();
            if cmd.get(1) != Some(&"setdest") || cmd.len() != 5 {
                return Err(bad("expected \"$node_(i) setdest X Y SPEED\""));
            }
            let i = node_index(cmd[0]).filter(|&i| i < max_nodes).ok_or_else(|| {
                bad(&format!("bad node reference (indices go from 0 to {})", max_nodes - 1))
            })?;
            let (x, y, s) =
                (num(cmd[2], line, "x")?, num(cmd[3], line, "y")?, num(cmd[4], line, "speed")?);
            if s < 0.0 {
                return Err(bad("negative speed"));
            }
            entries.push((i, (t * 1e9).round() as u64, Pos::new(x, y), s));
        } else {
            return Err(bad("not an ns-2 movement line"));
        }
    }
    let nodes =
        starts.iter().map(|s| s.0).chain(entries.iter().map(|e| e.0)).max().map_or(0, |m| m + 1);
    traces.resize(nodes, Trace::default());
    for (i, axis, v) in starts {
        match axis {
            'x' => traces[i].start.x = v,
            'y' => traces[i].start.y = v,
            _ => {}
        }
    }
    // Stable: lines with the same time keep their order.
    entries.sort_by_key(|e| e.1);
    for (i, t, p, s) in entries {
        traces[i].moves.push((t, p, s));
    }
    Ok(traces)
}
