//! Rate adaptation per link (sender → receiver): a constant rate, or ARF / AARF (Kamerman
//! and Monteban's Auto Rate Fallback; Lacage, Manshaei and Turletti's adaptive variant):
//! up a rate after a run of successes, down after two failures in a row, and down at once
//! when the first frame at a new rate fails — AARF then waits twice as long before trying
//! to go up again — or a Minstrel-like sampler (Linux's default for legacy rates): each
//! rate's success probability averaged over intervals of the lab clock, the rate of the
//! best expected throughput used, a tenth of the frames sent at another rate to sample
//! it, and a retry chain falling back to the second best, the most reliable and the
//! lowest rate.

use serde::{Deserialize, Serialize};

/// How a station chooses its data rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "control", rename_all = "kebab-case")]
pub enum RateControl {
    /// Always the rate of this index in the standard's list (lowest first).
    Constant {
        mode: usize,
    },
    Arf,
    Aarf,
    Minstrel,
}

/// ARF's run of successes before it tries the next rate up, and AARF's longest.
const ARF_SUCCESSES: u32 = 10;
const AARF_MAX_SUCCESSES: u32 = 50;

/// Minstrel's interval between statistics updates, its averaging weight of the past, and
/// one frame in how many sent at a sampled rate.
pub const MINSTREL_INTERVAL_NS: u64 = 100_000_000;
const MINSTREL_EWMA_OLD: f64 = 0.75;
const MINSTREL_SAMPLE_EVERY: u64 = 10;
/// The most rates a standard has (802.11a/g's eight).
pub const MAX_MODES: usize = 8;

/// One link's state.
#[derive(Debug, Clone, PartialEq)]
pub struct RateState {
    /// ARF's rate now; Minstrel's best (by expected throughput).
    pub mode: usize,
    successes: u32,
    failures: u32,
    /// The last change was up, and no frame has been sent at it yet.
    probing: bool,
    threshold: u32,
    minstrel: Option<Box<Minstrel>>,
}

/// Minstrel's statistics of one link.
#[derive(Debug, Clone, PartialEq)]
struct Minstrel {
    seed: u64,
    /// This interval's attempts and successes per rate, and the averaged success
    /// probability (`None`: never tried).
    attempts: [u32; MAX_MODES],
    successes: [u32; MAX_MODES],
    prob: [Option<f64>; MAX_MODES],
    second: usize,
    reliable: usize,
    next_update_ns: u64,
    frames: u64,
    /// Frames sent at a sampled rate, in all.
    samples: u64,
}

impl RateState {
    /// A link starting at the highest rate of `modes` under ARF/AARF, the lowest under
    /// Minstrel (until it has sampled the others), the constant one otherwise; `seed`
    /// keys Minstrel's sampling.
    pub fn new(control: RateControl, modes: usize, seed: u64) -> RateState {
        let top = modes.clamp(1, MAX_MODES) - 1;
        let mode = match control {
            RateControl::Constant { mode } => mode.min(top),
            RateControl::Arf | RateControl::Aarf => top,
            RateControl::Minstrel => 0,
        };
        let minstrel = (control == RateControl::Minstrel).then(|| {
            Box::new(Minstrel {
                seed,
                attempts: [0; MAX_MODES],
                successes: [0; MAX_MODES],
                prob: [None; MAX_MODES],
                second: 0,
                reliable: 0,
                next_update_ns: 0,
                frames: 0,
                samples: 0,
            })
        });
        RateState {
            mode,
            successes: 0,
            failures: 0,
            probing: false,
            threshold: ARF_SUCCESSES,
            minstrel,
        }
    }

    /// The rate of a frame's attempt number `attempt` (0: its first) at `now_ns`;
    /// `cost_ns[i]` is what a frame at rate `i` costs the channel (its airtime, ACK and
    /// mean backoff), from which Minstrel estimates throughput. ARF's rate and a constant
    /// one are the same for every attempt.
    pub fn pick(&mut self, attempt: u32, now_ns: u64, cost_ns: &[u64]) -> usize {
        let Some(m) = self.minstrel.as_deref_mut() else { return self.mode };
        let modes = cost_ns.len().clamp(1, MAX_MODES);
        if now_ns >= m.next_update_ns {
            self.mode = m.update(&cost_ns[..modes], self.mode);
            m.next_update_ns = now_ns + MINSTREL_INTERVAL_NS;
        }
        match attempt {
            0 => {
                m.frames += 1;
                if m.frames % MINSTREL_SAMPLE_EVERY != 0 || modes == 1 {
                    return self.mode;
                }
                // Another rate, at random: a slower one only if never tried (it cannot
                // beat the best otherwise: the best is already more reliable per time).
                let r = crate::splitmix64(m.seed ^ m.frames) as usize % (modes - 1);
                let j = if r >= self.mode { r + 1 } else { r };
                if j < self.mode && m.prob[j].is_some() {
                    return self.mode;
                }
                m.samples += 1;
                j
            }
            1 => self.mode,
            2 | 3 => m.second,
            4 | 5 => m.reliable,
            _ => 0,
        }
    }

    /// Frames sent at a sampled rate so far (Minstrel's only).
    pub fn samples(&self) -> u64 {
        self.minstrel.as_ref().map_or(0, |m| m.samples)
    }

    /// A frame sent at rate `mode` was acknowledged (`ok`) or not.
    pub fn report(&mut self, control: RateControl, modes: usize, mode: usize, ok: bool) {
        if let Some(m) = self.minstrel.as_deref_mut() {
            if mode < MAX_MODES {
                m.attempts[mode] += 1;
                m.successes[mode] += u32::from(ok);
            }
            return;
        }
        if matches!(control, RateControl::Constant { .. }) {
            return;
        }
        let aarf = control == RateControl::Aarf;
        if ok {
            self.failures = 0;
            self.successes += 1;
            self.probing = false;
            if self.successes >= self.threshold && self.mode + 1 < modes {
                self.mode += 1;
                self.successes = 0;
                self.probing = true;
            }
        } else {
            self.successes = 0;
            self.failures += 1;
            if self.probing {
                // The first frame at the new rate failed: back down at once.
                self.probing = false;
                self.failures = 0;
                self.mode = self.mode.saturating_sub(1);
                if aarf {
                    self.threshold = (self.threshold * 2).min(AARF_MAX_SUCCESSES);
                }
            } else if self.failures >= 2 {
                self.failures = 0;
                self.mode = self.mode.saturating_sub(1);
                if aarf {
                    self.threshold = ARF_SUCCESSES;
                }
            }
        }
    }
}

impl Minstrel {
    /// The interval's counts folded into the averages; the best rate (returned), the
    /// second best and the most reliable chosen again.
    fn update(&mut self, cost_ns: &[u64], best: usize) -> usize {
        for i in 0..cost_ns.len() {
            if self.attempts[i] > 0 {
                let p = f64::from(self.successes[i]) / f64::from(self.attempts[i]);
                self.prob[i] = Some(match self.prob[i] {
                    None => p,
                    Some(old) => MINSTREL_EWMA_OLD * old + (1.0 - MINSTREL_EWMA_OLD) * p,
                });
            }
            (self.attempts[i], self.successes[i]) = (0, 0);
        }
        // Expected throughput: success probability per unit of channel time (as Linux,
        // none below 10 %).
        let tp = |i: usize| match self.prob[i] {
            Some(p) if p >= 0.1 => p / cost_ns[i].max(1) as f64,
            _ => 0.0,
        };
        let mut order: Vec<usize> = (0..cost_ns.len()).collect();
        order.sort_by(|&a, &b| tp(b).total_cmp(&tp(a)).then(b.cmp(&a)));
        if tp(order[0]) == 0.0 {
            // Nothing measured yet: stay.
            return best;
        }
        self.second = if order.len() > 1 && tp(order[1]) > 0.0 { order[1] } else { 0 };
        // The most reliable: the fastest above 95 %, else the most likely to arrive.
        self.reliable = (0..cost_ns.len())
            .filter(|&i| self.prob[i].is_some_and(|p| p >= 0.95))
            .max_by(|&a, &b| tp(a).total_cmp(&tp(b)))
            .unwrap_or_else(|| {
                (0..cost_ns.len())
                    .max_by(|&a, &b| {
                        self.prob[a].unwrap_or(0.0).total_cmp(&self.prob[b].unwrap_or(0.0))
                    })
                    .unwrap_or(0)
            });
        order[0]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_steps_down_after_two_failures_and_up_after_ten_successes() {
        let mut r = RateState::new(RateControl::Arf, 8, 1);
        assert_eq!(r.mode, 7);
        r.report(RateControl::Arf, 8, r.mode, false);
        assert_eq!(r.mode, 7);
        r.report(RateControl::Arf, 8, r.mode, false);
        assert_eq!(r.mode, 6);
        for _ in 0..9 {
            r.report(RateControl::Arf, 8, r.mode, true);
        }
        assert_eq!(r.mode, 6);
        r.report(RateControl::Arf, 8, r.mode, true);
        assert_eq!(r.mode, 7, "up after ten");
        // The first frame at the new rate fails: down at once.
        r.report(RateControl::Arf, 8, r.mode, false);
        assert_eq!(r.mode, 6);
    }

    #[test]
    fn aarf_waits_longer_after_a_failed_probe_and_a_constant_rate_stays() {
        let mut r = RateState::new(RateControl::Aarf, 4, 1);
        r.report(RateControl::Aarf, 4, r.mode, false);
        r.report(RateControl::Aarf, 4, r.mode, false);
        assert_eq!(r.mode, 2);
        for _ in 0..10 {
            r.report(RateControl::Aarf, 4, r.mode, true);
        }
        assert_eq!(r.mode, 3);
        r.report(RateControl::Aarf, 4, r.mode, false);
        assert_eq!(r.mode, 2);
        for _ in 0..19 {
            r.report(RateControl::Aarf, 4, r.mode, true);
        }
        assert_eq!(r.mode, 2, "AARF now waits for 20");
        r.report(RateControl::Aarf, 4, r.mode, true);
        assert_eq!(r.mode, 3);
        let mut c = RateState::new(RateControl::Constant { mode: 1 }, 4, 1);
        for ok in [false, false, false, true] {
            c.report(RateControl::Constant { mode: 1 }, 4, 1, ok);
        }
        assert_eq!(c.mode, 1);
    }

    /// Minstrel on a made-up link where rates above 5 never arrive and rate 5 does 90 %
    /// of the time: it settles on the rate of the best expected throughput, keeps sampling
    /// the others, and falls back along its chain.
    #[test]
    fn minstrel_settles_on_the_best_throughput_and_keeps_sampling() {
        let cost: Vec<u64> = (0..8).map(|i| 2_000_000 / (i as u64 + 1)).collect();
        // (Every tenth attempt at rate 5 fails.)
        let arrives = |mode: usize, tried: u64| match mode {
            0..=4 => true,
            5 => !tried.is_multiple_of(10),
            _ => false,
        };
        let mut r = RateState::new(RateControl::Minstrel, 8, 7);
        assert_eq!(r.mode, 0, "starts at the lowest rate");
        let mut at = [0u64; 8];
        for k in 0..20_000u64 {
            let now = k * 1_000_000; // a frame a millisecond: 100 an interval
            let mut attempt = 0;
            loop {
                let mode = r.pick(attempt, now, &cost);
                at[mode] += 1;
                let ok = arrives(mode, at[mode]);
                r.report(RateControl::Minstrel, 8, mode, ok);
                if ok || attempt >= 7 {
                    break;
                }
                attempt += 1;
            }
        }
        // Rate 5: 0.9 / (2 ms / 6) beats rate 4's 1.0 / (2 ms / 5).
        assert_eq!(r.mode, 5, "{at:?}");
        let m = r.minstrel.as_ref().unwrap();
        assert_eq!(m.reliable, 4, "the fastest rate that always arrives");
        assert!(r.samples() > 300 && at[7] > 100, "{at:?}");
        // Sampling is a tenth of the frames at most: the best rate carries the most.
        assert!(at[5] > 10_000, "{at:?}");
        // The same seed, the same choices.
        let mut a = RateState::new(RateControl::Minstrel, 8, 7);
        let mut b = RateState::new(RateControl::Minstrel, 8, 7);
        for k in 0..1000 {
            assert_eq!(a.pick(0, k * 1_000_000, &cost), b.pick(0, k * 1_000_000, &cost));
        }
    }
}
