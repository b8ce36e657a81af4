//! Mobility models, advanced on the lab clock. A [`Walker`] is one node's movement.

use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

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

/// Slowest speed drawn, m/s: a speed of 0 would never arrive (random waypoint's known
/// decay toward standing still).
const MIN_SPEED_MPS: f64 = 0.01;

/// One node moving under a model.
#[derive(Debug, Clone)]
pub struct Walker {
    model: RandomWaypoint,
    pos: Pos,
    target: Pos,
    speed_mps: f64,
    /// Lab time until which the node stands still, ns.
    pause_until_ns: u64,
    now_ns: u64,
    rng: ChaCha8Rng,
}

impl Walker {
    /// A node at `start` at lab time 0; it first pauses, then moves.
    pub fn new(model: RandomWaypoint, start: Pos, seed: u64) -> Walker {
        let mut w = Walker { model, pos: start, target: start, speed_mps: 0.0, pause_until_ns: model.pause_ns, now_ns: 0, rng: ChaCha8Rng::seed_from_u64(seed) };
        w.pick();
        w
    }

    fn uniform(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn pick(&mut self) {
        let a = self.model.area;
        self.target = Pos::new(self.uniform() * a.width_m, self.uniform() * a.height_m);
        let (lo, hi) = (self.model.min_speed_mps.max(MIN_SPEED_MPS), self.model.max_speed_mps.max(MIN_SPEED_MPS));
        self.speed_mps = lo + (hi - lo) * self.uniform();
    }

    pub fn position(&self) -> Pos {
        self.pos
    }

    /// Current speed, m/s (0 while pausing).
    pub fn speed_mps(&self, now_ns: u64) -> f64 {
        if now_ns < self.pause_until_ns {
            0.0
        } else {
            self.speed_mps
        }
    }

    /// Move to lab time `now_ns` (never backwards) and return the position.
    pub fn advance(&mut self, now_ns: u64) -> Pos {
        while self.now_ns < now_ns {
            if self.now_ns < self.pause_until_ns {
                self.now_ns = self.pause_until_ns.min(now_ns);
                continue;
            }
            let dist = self.pos.distance(self.target);
            let need_ns = (dist / self.speed_mps * 1e9).ceil() as u64;
            let dt = now_ns - self.now_ns;
            if need_ns <= dt {
                self.pos = self.target;
                self.now_ns += need_ns;
                self.pause_until_ns = self.now_ns + self.model.pause_ns;
                self.pick();
            } else {
                let f = (dt as f64 / 1e9) * self.speed_mps / dist;
                self.pos = Pos::new(self.pos.x + (self.target.x - self.pos.x) * f, self.pos.y + (self.target.y - self.pos.y) * f);
                self.now_ns = now_ns;
            }
        }
        self.pos
    }
}
