//! How far each machine's lab clock is from the controller's, measured all the time a
//! lab across machines runs (sans-IO: the heartbeat feeds it).
//!
//! Every heartbeat is a sample: the controller reads its lab clock as it sends the
//! request (`sent_ns`) and as the answer arrives (`received_ns`); the agent reads its own
//! as it answers (`agent_ns`). If both ways took the same time, the agent's clock is
//! `agent_ns - (sent_ns + received_ns) / 2` ahead; the error is at most half the round
//! trip, so — as NTP's clock filter does — the sample with the shortest round trip of
//! the last [`ClockFilter::WINDOW`] is taken. An agent starts its lab clock from the
//! controller's reading when the order left, so it reads behind by the time the order
//! took to arrive and be read (milliseconds for a big plan); records made on different
//! machines (traffic flows, captures) are put on the controller's clock with this.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// One exchange, all times on lab clocks, ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub sent_ns: u64,
    pub agent_ns: u64,
    pub received_ns: u64,
}

/// A machine's lab clock against the controller's: `offset_ns` ahead (negative:
/// behind), known to within half of `rtt_ns`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offset {
    pub offset_ns: i64,
    pub rtt_ns: u64,
}

impl Offset {
    /// A time of the machine's lab clock on the controller's.
    pub fn to_controller(&self, t_ns: u64) -> u64 {
        (t_ns as i128 - self.offset_ns as i128).clamp(0, u64::MAX as i128) as u64
    }
}

/// The recent samples of one machine.
#[derive(Debug, Default)]
pub struct ClockFilter {
    recent: VecDeque<Offset>,
}

impl ClockFilter {
    /// Samples kept (one a second: the estimate follows a drifting clock within this).
    pub const WINDOW: usize = 16;

    /// Take a sample (one whose answer came before its question is ignored); returns the
    /// estimate.
    pub fn add(&mut self, s: Sample) -> Option<Offset> {
        if s.received_ns >= s.sent_ns {
            let mid = (s.sent_ns as i128 + s.received_ns as i128) / 2;
            let offset_ns = (s.agent_ns as i128 - mid).clamp(i64::MIN as i128, i64::MAX as i128) as i64;
            if self.recent.len() == Self::WINDOW {
                self.recent.pop_front();
            }
            self.recent.push_back(Offset { offset_ns, rtt_ns: s.received_ns - s.sent_ns });
        }
        self.estimate()
    }

    /// The sample of the shortest round trip among the recent ones.
    pub fn estimate(&self) -> Option<Offset> {
        self.recent.iter().min_by_key(|o| o.rtt_ns).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(sent_ns: u64, agent_ns: u64, received_ns: u64) -> Sample {
        Sample { sent_ns, agent_ns, received_ns }
    }

    #[test]
    fn a_symmetric_exchange_gives_the_offset_exactly() {
        let mut f = ClockFilter::default();
        // The agent is 3 ms behind; 100 us each way.
        let e = f.add(sample(10_000_000, 10_000_000 + 100_000 - 3_000_000, 10_200_000)).unwrap();
        assert_eq!(e, Offset { offset_ns: -3_000_000, rtt_ns: 200_000 });
        assert_eq!(e.to_controller(7_100_000), 10_100_000);
        assert_eq!(e.to_controller(0), 3_000_000);
        assert_eq!(Offset { offset_ns: 5, rtt_ns: 0 }.to_controller(2), 0);
    }

    #[test]
    fn the_shortest_round_trip_of_the_window_wins() {
        let mut f = ClockFilter::default();
        // True offset +2 ms; a slow answer (2 ms back, 0.1 ms out) misleads by 0.95 ms.
        f.add(sample(0, 2_100_000, 2_100_000));
        assert_eq!(f.estimate().unwrap().offset_ns, 1_050_000);
        f.add(sample(1_000_000_000, 1_002_050_000, 1_000_100_000));
        assert_eq!(f.estimate().unwrap(), Offset { offset_ns: 2_000_000, rtt_ns: 100_000 });
        // Later slow (and lopsided) samples do not displace it ...
        for k in 2..=ClockFilter::WINDOW as u64 {
            f.add(sample(k * 1_000_000_000, k * 1_000_000_000 + 3_000_000, k * 1_000_000_000 + 1_000_000));
        }
        assert_eq!(f.estimate().unwrap(), Offset { offset_ns: 2_000_000, rtt_ns: 100_000 });
        // ... until it leaves the window.
        f.add(sample(20_000_000_000, 20_003_000_000, 20_001_000_000));
        assert_eq!(f.estimate().unwrap(), Offset { offset_ns: 2_500_000, rtt_ns: 1_000_000 });
    }

    #[test]
    fn impossible_samples_are_ignored() {
        let mut f = ClockFilter::default();
        assert_eq!(f.add(sample(5, 0, 4)), None);
        assert_eq!(f.add(sample(0, u64::MAX, 0)).unwrap().offset_ns, i64::MAX);
    }
}
