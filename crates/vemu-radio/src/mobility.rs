//! Mobility models, advanced on the lab clock. A [`Walker`] is one node's movement:
//! a sequence of straight legs (toward a point at a speed) and pauses, each model
//! choosing the next leg from its own seeded generator.

use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::ns2::Trace;
use crate::Pos;

/// A rectangle from (0, 0) to (width, height), metres.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Area {
    pub width_m: f64,
    pub height_m: f64,
}

impl Area {
    pub fn contains(&self, p: Pos) -> bool {
        (0.0..=self.width_m).contains(&p.x) && (0.0..=self.height_m).contains(&p.y)
    }
    fn clamp(&self, p: Pos) -> Pos {
        Pos::new(p.x.clamp(0.0, self.width_m), p.y.clamp(0.0, self.height_m))
    }
    fn centre(&self) -> Pos {
        Pos::new(self.width_m / 2.0, self.height_m / 2.0)
    }
    /// Where a ray from `p` (inside) with heading `theta` leaves the area.
    fn exit(&self, p: Pos, theta: f64) -> Pos {
        let (dx, dy) = (theta.cos(), theta.sin());
        let mut t = f64::INFINITY;
        if dx > 1e-12 {
            t = t.min((self.width_m - p.x) / dx);
        } else if dx < -1e-12 {
            t = t.min(-p.x / dx);
        }
        if dy > 1e-12 {
            t = t.min((self.height_m - p.y) / dy);
        } else if dy < -1e-12 {
            t = t.min(-p.y / dy);
        }
        self.clamp(Pos::new(p.x + dx * t, p.y + dy * t))
    }
}

/// Random waypoint: pick a point of the area uniformly and a speed uniformly in
/// [min, max], go there in a straight line, pause, repeat.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RandomWaypoint {
    pub area: Area,
    pub min_speed_mps: f64,
    pub max_speed_mps: f64,
    pub pause_ns: u64,
}

/// How a node moves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "kebab-case")]
pub enum Mobility {
    /// Stands still.
    Static,
    RandomWaypoint(RandomWaypoint),
    /// Random direction: pick a heading uniformly and a speed in [min, max], travel to
    /// the edge of the area, pause, repeat (nodes spread evenly, unlike random waypoint).
    RandomDirection(RandomWaypoint),
    /// Random walk: every `interval_ns` a new heading (uniform) and speed in [min, max];
    /// a node reaching the edge bounces off it.
    RandomWalk {
        area: Area,
        min_speed_mps: f64,
        max_speed_mps: f64,
        interval_ns: u64,
    },
    /// Gauss-Markov (Liang and Haas): every `interval_ns`, speed and heading are
    /// `alpha` × the previous value + (1 − alpha) × the mean + a normal draw scaled by
    /// √(1 − alpha²) (σ `speed_sigma_mps`, `heading_sigma_rad`); the mean heading
    /// points away from an edge the node comes near. Bounces off the edge.
    GaussMarkov {
        area: Area,
        mean_speed_mps: f64,
        alpha: f64,
        speed_sigma_mps: f64,
        heading_sigma_rad: f64,
        interval_ns: u64,
    },
    /// Replays an ns-2 movement trace.
    Trace(Trace),
    /// Along a city's streets (NET's street mobility): from crossing to crossing.
    Streets(Box<Streets>),
}

/// Street mobility: a node starts at the crossing nearest its place; at every crossing
/// it turns into one of the other streets there (uniformly; back only at a dead end),
/// drives it at a speed drawn uniformly in [min, max], and at the next crossing stops
/// for `pause_ns` with `stop_probability` (a red light) before turning again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Streets {
    pub roads: crate::city::Roads,
    pub min_speed_mps: f64,
    pub max_speed_mps: f64,
    pub stop_probability: f64,
    pub pause_ns: u64,
}

/// Slowest speed drawn, m/s: a speed of 0 would never arrive (random waypoint's known
/// decay toward standing still).
const MIN_SPEED_MPS: f64 = 0.01;

/// One node moving under a model.
#[derive(Debug, Clone)]
pub struct Walker {
    model: Mobility,
    pos: Pos,
    target: Pos,
    speed_mps: f64,
    /// Lab time until which the node stands still, ns.
    pause_until_ns: u64,
    /// Lab time at which the current leg ends even if the target is not reached (random
    /// walk and Gauss-Markov legs are timed), ns.
    leg_end_ns: u64,
    /// Gauss-Markov's current speed and heading.
    gm: (f64, f64),
    /// Time left of a timed leg cut short by the edge, and its heading after bouncing.
    bounce: Option<(u64, f64)>,
    now_ns: u64,
    rng: ChaCha8Rng,
    /// How far a trace has been followed.
    cursor: Option<crate::ns2::TraceCursor>,
    /// On streets: each crossing's neighbours, the crossing driven to and the one left.
    streets: Option<(Vec<Vec<u32>>, u32, Option<u32>)>,
}

impl Walker {
    /// A node at `start` at lab time 0. Waypoint and direction models first pause.
    pub fn new(model: Mobility, start: Pos, seed: u64) -> Walker {
        let pause_ns = match &model {
            Mobility::RandomWaypoint(m) | Mobility::RandomDirection(m) => m.pause_ns,
            _ => 0,
        };
        let mut streets = None;
        let start = match &model {
            Mobility::Trace(t) => t.position_at(0),
            Mobility::Streets(st) => match st.roads.nearest(start) {
                Some(c) => {
                    streets = Some((st.roads.neighbours(), c, None));
                    st.roads.crossings[c as usize]
                }
                None => start,
            },
            _ => start,
        };
        let mut w = Walker {
            model,
            pos: start,
            target: start,
            speed_mps: 0.0,
            pause_until_ns: pause_ns,
            leg_end_ns: u64::MAX,
            gm: (0.0, 0.0),
            bounce: None,
            now_ns: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
            cursor: None,
            streets,
        };
        if let Mobility::GaussMarkov { mean_speed_mps, .. } = w.model {
            let heading = w.uniform() * std::f64::consts::TAU;
            w.gm = (mean_speed_mps, heading);
        }
        w.next_leg();
        w
    }

    fn uniform(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A standard normal draw (Box-Muller).
    fn normal(&mut self) -> f64 {
        let u1 = self.uniform().max(1e-300);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    fn speed(&mut self, min: f64, max: f64) -> f64 {
        let (lo, hi) = (min.max(MIN_SPEED_MPS), max.max(MIN_SPEED_MPS));
        lo + (hi - lo) * self.uniform()
    }

    /// A timed leg from the current position: heading `theta` at the current speed for
    /// `dur_ns`, cut at the edge (the rest of the time continues, bounced).
    fn timed_leg(&mut self, area: Area, theta: f64, dur_ns: u64) {
        let want = Pos::new(
            self.pos.x + theta.cos() * self.speed_mps * dur_ns as f64 / 1e9,
            self.pos.y + theta.sin() * self.speed_mps * dur_ns as f64 / 1e9,
        );
        if area.contains(want) {
            self.target = want;
            self.leg_end_ns = self.now_ns + dur_ns;
            return;
        }
        let edge = area.exit(self.pos, theta);
        let used_ns = ((self.pos.distance(edge) / self.speed_mps) * 1e9) as u64;
        let (dx, dy) = (theta.cos(), theta.sin());
        let (bx, by) = (
            if (edge.x <= 1e-9 && dx < 0.0) || (edge.x >= area.width_m - 1e-9 && dx > 0.0) {
                -dx
            } else {
                dx
            },
            if (edge.y <= 1e-9 && dy < 0.0) || (edge.y >= area.height_m - 1e-9 && dy > 0.0) {
                -dy
            } else {
                dy
            },
        );
        self.target = edge;
        self.leg_end_ns = u64::MAX;
        self.bounce = Some((dur_ns.saturating_sub(used_ns).max(1), by.atan2(bx)));
    }

    /// Choose the next leg at the current position and time.
    fn next_leg(&mut self) {
        self.leg_end_ns = u64::MAX;
        if let Some((left_ns, theta)) = self.bounce.take() {
            let area = match self.model {
                Mobility::RandomWalk { area, .. } | Mobility::GaussMarkov { area, .. } => area,
                _ => unreachable!("only timed legs bounce"),
            };
            self.timed_leg(area, theta, left_ns);
            return;
        }
        if matches!(self.model, Mobility::Streets(_)) {
            self.next_street();
            return;
        }
        match self.model.clone() {
            Mobility::Static | Mobility::Trace(_) | Mobility::Streets(_) => {}
            Mobility::RandomWaypoint(m) => {
                self.target =
                    Pos::new(self.uniform() * m.area.width_m, self.uniform() * m.area.height_m);
                self.speed_mps = self.speed(m.min_speed_mps, m.max_speed_mps);
            }
            Mobility::RandomDirection(m) => {
                let theta = self.uniform() * std::f64::consts::TAU;
                self.target = m.area.exit(self.pos, theta);
                self.speed_mps = self.speed(m.min_speed_mps, m.max_speed_mps);
            }
            Mobility::RandomWalk { area, min_speed_mps, max_speed_mps, interval_ns } => {
                let theta = self.uniform() * std::f64::consts::TAU;
                self.speed_mps = self.speed(min_speed_mps, max_speed_mps);
                self.timed_leg(area, theta, interval_ns);
            }
            Mobility::GaussMarkov {
                area,
                mean_speed_mps,
                alpha,
                speed_sigma_mps,
                heading_sigma_rad,
                interval_ns,
            } => {
                // Near an edge (within a tenth of the area), the mean heading points to the centre.
                let c = area.centre();
                let near = self.pos.x < area.width_m * 0.1
                    || self.pos.x > area.width_m * 0.9
                    || self.pos.y < area.height_m * 0.1
                    || self.pos.y > area.height_m * 0.9;
                let mean_heading =
                    if near { (c.y - self.pos.y).atan2(c.x - self.pos.x) } else { self.gm.1 };
                // Take the heading's mean the short way round.
                let mut dh = mean_heading - self.gm.1;
                dh = (dh + std::f64::consts::PI).rem_euclid(std::f64::consts::TAU)
                    - std::f64::consts::PI;
                let k = (1.0 - alpha * alpha).sqrt();
                let speed = (alpha * self.gm.0
                    + (1.0 - alpha) * mean_speed_mps
                    + k * speed_sigma_mps * self.normal())
                .max(0.0);
                let heading =
                    self.gm.1 + (1.0 - alpha) * dh + k * heading_sigma_rad * self.normal();
                self.gm = (speed, heading);
                self.speed_mps = speed.max(MIN_SPEED_MPS);
                self.timed_leg(area, heading, interval_ns);
            }
        }
    }

    /// On streets, at a crossing: turn into one of its other streets (back only at a
    /// dead end) at a new speed.
    fn next_street(&mut self) {
        let Some((n, at, from)) = &self.streets else { return };
        let ways = &n[*at as usize];
        let onward: Vec<u32> = ways.iter().copied().filter(|w| Some(*w) != *from).collect();
        let choice = if onward.is_empty() { ways.clone() } else { onward };
        let at = *at;
        if choice.is_empty() {
            return; // a crossing without streets: stand there
        }
        let pick = choice[((self.uniform() * choice.len() as f64) as usize).min(choice.len() - 1)];
        let Mobility::Streets(st) = &self.model else { return };
        let (target, lo, hi) =
            (st.roads.crossings[pick as usize], st.min_speed_mps, st.max_speed_mps);
        self.target = target;
        self.speed_mps = self.speed(lo, hi);
        self.streets.as_mut().expect("on streets").1 = pick;
        self.streets.as_mut().expect("on streets").2 = Some(at);
    }

    pub fn position(&self) -> Pos {
        self.pos
    }

    /// Current speed, m/s (0 while pausing).
    pub fn speed_mps(&self, now_ns: u64) -> f64 {
        if now_ns < self.pause_until_ns || self.pos == self.target {
            0.0
        } else {
            self.speed_mps
        }
    }

    /// Move to lab time `now_ns` (never backwards) and return the position.
    pub fn advance(&mut self, now_ns: u64) -> Pos {
        if let Mobility::Trace(t) = &self.model {
            self.now_ns = self.now_ns.max(now_ns);
            self.pos = self.cursor.get_or_insert_with(|| t.cursor()).advance(t, self.now_ns);
            return self.pos;
        }
        if matches!(self.model, Mobility::Static) {
            self.now_ns = self.now_ns.max(now_ns);
            return self.pos;
        }
        while self.now_ns < now_ns {
            if self.now_ns < self.pause_until_ns {
                self.now_ns = self.pause_until_ns.min(now_ns);
                continue;
            }
            let dist = self.pos.distance(self.target);
            let need_ns = ((dist / self.speed_mps * 1e9).ceil() as u64)
                .min(self.leg_end_ns.saturating_sub(self.now_ns));
            let dt = now_ns - self.now_ns;
            if need_ns <= dt {
                self.pos = self.target;
                self.now_ns += need_ns;
                if let Mobility::RandomWaypoint(m) | Mobility::RandomDirection(m) = self.model {
                    if self.bounce.is_none() {
                        self.pause_until_ns = self.now_ns + m.pause_ns;
                    }
                }
                if let Mobility::Streets(st) = &self.model {
                    let (p, pause) = (st.stop_probability, st.pause_ns);
                    if self.uniform() < p {
                        self.pause_until_ns = self.now_ns + pause;
                    }
                }
                self.next_leg();
            } else {
                let f = (dt as f64 / 1e9) * self.speed_mps / dist;
                self.pos = Pos::new(
                    self.pos.x + (self.target.x - self.pos.x) * f,
                    self.pos.y + (self.target.y - self.pos.y) * f,
                );
                self.now_ns = now_ns;
            }
        }
        self.pos
    }
}
