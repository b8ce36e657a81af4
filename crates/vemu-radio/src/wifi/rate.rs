//! Rate adaptation per link (sender → receiver): a constant rate, or ARF / AARF (Kamerman
//! and Monteban's Auto Rate Fallback; Lacage, Manshaei and Turletti's adaptive variant):
//! up a rate after a run of successes, down after two failures in a row, and down at once
//! when the first frame at a new rate fails — AARF then waits twice as long before trying
//! to go up again.

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
}

/// ARF's run of successes before it tries the next rate up, and AARF's longest.
const ARF_SUCCESSES: u32 = 10;
const AARF_MAX_SUCCESSES: u32 = 50;

/// One link's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateState {
    pub mode: usize,
    successes: u32,
    failures: u32,
    /// The last change was up, and no frame has been sent at it yet.
    probing: bool,
    threshold: u32,
}

impl RateState {
    /// A link starting at the highest rate of `modes` under ARF/AARF (the constant one
    /// otherwise).
    pub fn new(control: RateControl, modes: usize) -> RateState {
        let top = modes.saturating_sub(1);
        let mode = match control {
            RateControl::Constant { mode } => mode.min(top),
            RateControl::Arf | RateControl::Aarf => top,
        };
        RateState { mode, successes: 0, failures: 0, probing: false, threshold: ARF_SUCCESSES }
    }

    /// A frame at `self.mode` was acknowledged (`ok`) or not.
    pub fn report(&mut self, control: RateControl, modes: usize, ok: bool) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_steps_down_after_two_failures_and_up_after_ten_successes() {
        let mut r = RateState::new(RateControl::Arf, 8);
        assert_eq!(r.mode, 7);
        r.report(RateControl::Arf, 8, false);
        assert_eq!(r.mode, 7);
        r.report(RateControl::Arf, 8, false);
        assert_eq!(r.mode, 6);
        for _ in 0..9 {
            r.report(RateControl::Arf, 8, true);
        }
        assert_eq!(r.mode, 6);
        r.report(RateControl::Arf, 8, true);
        assert_eq!(r.mode, 7, "up after ten");
        // The first frame at the new rate fails: down at once.
        r.report(RateControl::Arf, 8, false);
        assert_eq!(r.mode, 6);
    }

    #[test]
    fn aarf_waits_longer_after_a_failed_probe_and_a_constant_rate_stays() {
        let mut r = RateState::new(RateControl::Aarf, 4);
        r.report(RateControl::Aarf, 4, false);
        r.report(RateControl::Aarf, 4, false);
        assert_eq!(r.mode, 2);
        for _ in 0..10 {
            r.report(RateControl::Aarf, 4, true);
        }
        assert_eq!(r.mode, 3);
        r.report(RateControl::Aarf, 4, false);
        assert_eq!(r.mode, 2);
        for _ in 0..19 {
            r.report(RateControl::Aarf, 4, true);
        }
        assert_eq!(r.mode, 2, "AARF now waits for 20");
        r.report(RateControl::Aarf, 4, true);
        assert_eq!(r.mode, 3);
        let mut c = RateState::new(RateControl::Constant { mode: 1 }, 4);
        for ok in [false, false, false, true] {
            c.report(RateControl::Constant { mode: 1 }, 4, ok);
        }
        assert_eq!(c.mode, 1);
    }
}
