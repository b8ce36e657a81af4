//! Random early detection (Floyd and Jacobson, "Random Early Detection Gateways for
//! Congestion Avoidance", 1993) and weighted RED: one average queue, one RED profile
//! per drop precedence (colour).

use crate::Color;

/// A RED profile. Thresholds are on the average queue, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RedParams {
    pub min_bytes: u64,
    pub max_bytes: u64,
    /// Drop probability as the average reaches `max_bytes` (0 < max_p ≤ 1).
    pub max_p: f64,
}

impl RedParams {
    pub fn validate(&self) -> Result<(), String> {
        if self.min_bytes >= self.max_bytes {
            return Err(format!(
                "RED needs min < max (got {} and {} bytes)",
                self.min_bytes, self.max_bytes
            ));
        }
        if !(self.max_p > 0.0 && self.max_p <= 1.0) {
            return Err(format!("RED's max_p must be in (0, 1], got {}", self.max_p));
        }
        Ok(())
    }
}

/// What RED decides for an arriving packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Enqueue,
    /// Dropped at random between the thresholds.
    EarlyDrop,
    /// Dropped because the average is at or over the maximum threshold.
    ForcedDrop,
}

/// The average queue and the random source shared by a queue's profiles.
#[derive(Debug, Clone)]
pub struct Red {
    /// Weight of the current queue in the average (Floyd–Jacobson's w_q, e.g. 0.002).
    weight: f64,
    /// Time to send a typical packet, ns: how an idle period ages the average.
    typical_ns: u64,
    avg: f64,
    /// Since when the queue has been empty (None: it is not).
    idle_since_ns: Option<u64>,
    /// Packets since the last drop, per colour (−1: below the minimum threshold).
    count: [i64; 3],
    rng: u64,
}

impl Red {
    pub fn new(weight: f64, typical_ns: u64, seed: u64) -> Red {
        Red {
            weight: weight.clamp(1e-6, 1.0),
            typical_ns: typical_ns.max(1),
            avg: 0.0,
            idle_since_ns: Some(0),
            count: [-1; 3],
            rng: seed | 1,
        }
    }

    /// The average queue, bytes.
    pub fn average(&self) -> f64 {
        self.avg
    }

    /// The queue just became empty at `now_ns`.
    pub fn emptied(&mut self, now_ns: u64) {
        self.idle_since_ns = Some(now_ns);
    }

    fn uniform(&mut self) -> f64 {
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A packet of colour `color` arrives at `now_ns` while `queue_bytes` wait: update the
    /// average and decide by the colour's profile.
    pub fn arrival(
        &mut self,
        now_ns: u64,
        queue_bytes: u64,
        color: Color,
        p: &RedParams,
    ) -> Verdict {
        match self.idle_since_ns.take() {
            // "avg ← (1 − w_q)^m avg", m the packets that could have been sent meanwhile.
            Some(since) if queue_bytes == 0 => {
                let m = now_ns.saturating_sub(since) as f64 / self.typical_ns as f64;
                self.avg *= (1.0 - self.weight).powf(m);
            }
            _ => self.avg += self.weight * (queue_bytes as f64 - self.avg),
        }
        let c = &mut self.count[color as usize];
        if self.avg < p.min_bytes as f64 {
            *c = -1;
            return Verdict::Enqueue;
        }
        if self.avg >= p.max_bytes as f64 {
            *c = 0;
            return Verdict::ForcedDrop;
        }
        *c += 1;
        let pb = p.max_p * (self.avg - p.min_bytes as f64) / (p.max_bytes - p.min_bytes) as f64;
        let n = *c as f64;
        // p_a = p_b / (1 − count·p_b): drops spread evenly rather than in clusters.
        let pa = if n * pb >= 1.0 { 1.0 } else { pb / (1.0 - n * pb) };
        if self.uniform() < pa {
            self.count[color as usize] = 0;
            Verdict::EarlyDrop
        } else {
            Verdict::Enqueue
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: RedParams = RedParams { min_bytes: 10_000, max_bytes: 30_000, max_p: 0.1 };

    #[test]
    fn below_min_never_drops_and_over_max_always_does() {
        let mut r = Red::new(1.0, 1000, 7);
        assert!((0..10_000).all(|i| r.arrival(i, 9_999, Color::Green, &P) == Verdict::Enqueue));
        assert!((0..10_000).all(|i| r.arrival(i, 30_000, Color::Green, &P) == Verdict::ForcedDrop));
    }

    #[test]
    fn between_thresholds_drops_are_spread_evenly() {
        // avg held at the middle: p_b = 0.05. With count counted before p_a (Floyd and
        // Jacobson's Fig. 2) the gap between drops is uniform on 1..=19 packets: P(X = n)
        // = p_b / (1 − p_b). So a drop rate of 1/10, and never a gap over 19.
        let mut r = Red::new(1.0, 1000, 42);
        let (mut drops, mut gap, mut longest) = (0u32, 0u32, 0u32);
        for i in 0..200_000 {
            gap += 1;
            if r.arrival(i, 20_000, Color::Green, &P) == Verdict::EarlyDrop {
                drops += 1;
                longest = longest.max(gap);
                gap = 0;
            }
        }
        let rate = drops as f64 / 200_000.0;
        assert!((rate - 0.1).abs() < 0.003, "drop rate {rate}");
        assert!(longest <= 19, "a gap of {longest} packets");
    }

    #[test]
    fn the_average_is_an_ewma_and_idle_time_ages_it() {
        let mut r = Red::new(0.002, 1000, 1);
        for i in 0..1000 {
            r.arrival(i, 50_000, Color::Green, &P);
        }
        // Every arrival to a non-empty queue is one step of the average.
        let want = 50_000.0 * (1.0 - 0.998f64.powi(1000));
        assert!((r.average() - want).abs() < 1e-6 * want, "{} vs {want}", r.average());
        // Idle for 500 typical packet times: the average decays by (1 − w)^500.
        let before = r.average();
        r.emptied(10_000);
        r.arrival(10_000 + 500 * 1000, 0, Color::Green, &P);
        assert!((r.average() - before * 0.998f64.powi(500)).abs() < 1e-6 * before);
    }

    #[test]
    fn wred_drops_red_before_yellow_before_green() {
        // AF-style profiles over one average: red from 5 kB, yellow from 10 kB, green from 20 kB.
        let prof = |min, max| RedParams { min_bytes: min, max_bytes: max, max_p: 0.2 };
        let (g, y, rd) = (prof(20_000, 40_000), prof(10_000, 40_000), prof(5_000, 40_000));
        let mut r = Red::new(1.0, 1000, 3);
        let mut dropped = [0u32; 3];
        for i in 0..30_000u64 {
            for (k, (c, p)) in
                [(Color::Green, &g), (Color::Yellow, &y), (Color::Red, &rd)].into_iter().enumerate()
            {
                if r.arrival(i, 15_000, c, p) != Verdict::Enqueue {
                    dropped[k] += 1;
                }
            }
        }
        assert_eq!(dropped[0], 0, "green below its minimum");
        assert!(dropped[2] > dropped[1] && dropped[1] > 0, "{dropped:?}");
        assert!(RedParams { min_bytes: 5, max_bytes: 5, max_p: 0.1 }.validate().is_err());
        assert!(RedParams { min_bytes: 1, max_bytes: 5, max_p: 0.0 }.validate().is_err());
    }
}
