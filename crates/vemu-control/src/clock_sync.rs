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
//!
//! Where an NTP or PTP daemon (chronyd, ntpd, ...) disciplines both machines' wall
//! clocks, the kernel knows how far each may be off (`adjtimex`: synchronized, within
//! its maximum error), and that is often far tighter than half a round trip over TLS.
//! Each side then also reads its wall clock together with its lab clock ([`Wall`]); the
//! lab clocks differ by what separates those pairs, within the two maximum errors, and
//! a sample whose bound that way is smaller uses it.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// One exchange, all times on lab clocks, ns; and each side's wall clock with its lab
/// clock, where a daemon disciplines it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub sent_ns: u64,
    pub agent_ns: u64,
    pub received_ns: u64,
    pub agent_wall: Option<Wall>,
    pub controller_wall: Option<Wall>,
}

/// A machine's lab clock and wall clock read together (`lab_ns`, `wall_ns`), and how far
/// the wall clock may be off true time (`max_error_ns`: the kernel's maximum error of a
/// disciplined clock, plus the time the two readings took).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wall {
    pub lab_ns: u64,
    pub wall_ns: u64,
    pub max_error_ns: u64,
}

impl Wall {
    /// This machine's, if a daemon disciplines its wall clock (the kernel says it is
    /// synchronized); `None` otherwise.
    pub fn read(clock: vemu_engine::LabClock) -> Option<Wall> {
        // SAFETY: adjtimex with modes 0 only reads; timex is plain data.
        let mut t: libc::timex = unsafe { std::mem::zeroed() };
        let state = unsafe { libc::adjtimex(&mut t) };
        if state < 0
            || state == libc::TIME_ERROR
            || t.status & libc::STA_UNSYNC != 0
            || t.maxerror < 0
        {
            return None;
        }
        let before = clock.now_ns();
        let wall =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).ok()?.as_nanos()
                as u64;
        let after = clock.now_ns();
        Some(Wall {
            lab_ns: before / 2 + after / 2,
            wall_ns: wall,
            max_error_ns: t.maxerror as u64 * 1000 + (after - before) / 2,
        })
    }
}

pub use vemu_machine::clock::Offset;

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
            let rtt_ns = s.received_ns - s.sent_ns;
            let mid = (s.sent_ns as i128 + s.received_ns as i128) / 2;
            let mut o =
                Offset { offset_ns: clamp(s.agent_ns as i128 - mid), rtt_ns, wall_bound_ns: None };
            // Both wall clocks disciplined: lab − wall on each side, within both errors.
            if let (Some(a), Some(c)) = (s.agent_wall, s.controller_wall) {
                let bound = a.max_error_ns.saturating_add(c.max_error_ns);
                if bound < rtt_ns / 2 {
                    let ahead = (a.lab_ns as i128 - a.wall_ns as i128)
                        - (c.lab_ns as i128 - c.wall_ns as i128);
                    o = Offset { offset_ns: clamp(ahead), rtt_ns, wall_bound_ns: Some(bound) };
                }
            }
            if self.recent.len() == Self::WINDOW {
                self.recent.pop_front();
            }
            self.recent.push_back(o);
        }
        self.estimate()
    }

    /// The sample known most closely among the recent ones (the shortest round trip,
    /// or a tighter bound from disciplined wall clocks).
    pub fn estimate(&self) -> Option<Offset> {
        self.recent.iter().min_by_key(|o| o.bound_ns()).copied()
    }
}

fn clamp(ns: i128) -> i64 {
    ns.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(sent_ns: u64, agent_ns: u64, received_ns: u64) -> Sample {
        Sample { sent_ns, agent_ns, received_ns, agent_wall: None, controller_wall: None }
    }

    fn offset(offset_ns: i64, rtt_ns: u64) -> Offset {
        Offset { offset_ns, rtt_ns, wall_bound_ns: None }
    }

    #[test]
    fn a_symmetric_exchange_gives_the_offset_exactly() {
        let mut f = ClockFilter::default();
        // The agent is 3 ms behind; 100 us each way.
        let e = f.add(sample(10_000_000, 10_000_000 + 100_000 - 3_000_000, 10_200_000)).unwrap();
        assert_eq!(e, offset(-3_000_000, 200_000));
        assert_eq!(e.to_controller(7_100_000), 10_100_000);
        assert_eq!(e.to_controller(0), 3_000_000);
        assert_eq!(offset(5, 0).to_controller(2), 0);
    }

    #[test]
    fn the_shortest_round_trip_of_the_window_wins() {
        let mut f = ClockFilter::default();
        // True offset +2 ms; a slow answer (2 ms back, 0.1 ms out) misleads by 0.95 ms.
        f.add(sample(0, 2_100_000, 2_100_000));
        assert_eq!(f.estimate().unwrap().offset_ns, 1_050_000);
        f.add(sample(1_000_000_000, 1_002_050_000, 1_000_100_000));
        assert_eq!(f.estimate().unwrap(), offset(2_000_000, 100_000));
        // Later slow (and lopsided) samples do not displace it ...
        for k in 2..=ClockFilter::WINDOW as u64 {
            f.add(sample(
                k * 1_000_000_000,
                k * 1_000_000_000 + 3_000_000,
                k * 1_000_000_000 + 1_000_000,
            ));
        }
        assert_eq!(f.estimate().unwrap(), offset(2_000_000, 100_000));
        // ... until it leaves the window.
        f.add(sample(20_000_000_000, 20_003_000_000, 20_001_000_000));
        assert_eq!(f.estimate().unwrap(), offset(2_500_000, 1_000_000));
    }

    #[test]
    fn disciplined_wall_clocks_give_a_tighter_bound_than_the_round_trip() {
        let mut f = ClockFilter::default();
        // The agent's lab clock is 3 ms behind the controller's; the agent's wall clock is
        // 20 us ahead of the controller's (both within 30 us of true time, as the kernel
        // says of clocks an NTP or PTP daemon keeps); a slow heartbeat (2 ms round trip)
        // alone is known within 1 ms. The controller reads its clocks as the answer
        // arrives, 1.9 ms after the agent read its own.
        let wall = |lab_ns: u64, wall_ns: u64| Some(Wall { lab_ns, wall_ns, max_error_ns: 30_000 });
        let mut s = sample(10_000_000, 10_100_000 - 3_000_000, 12_000_000);
        s.agent_wall = wall(7_100_000, 1_000_000_000_020_000 + 100_000);
        s.controller_wall = wall(12_000_000, 1_000_000_000_000_000 + 2_000_000);
        let e = f.add(s).unwrap();
        // (Off by the wall clocks' 20 us, within the 60 us said.)
        assert_eq!(
            (e.offset_ns, e.bound_ns(), e.wall_bound_ns),
            (-3_020_000, 60_000, Some(60_000))
        );
        // A later exchange with a 100 us round trip is known better: it wins.
        assert_eq!(
            f.add(sample(20_000_000, 20_050_000 - 3_000_000, 20_100_000)).unwrap(),
            offset(-3_000_000, 100_000)
        );
        // Without both sides disciplined, or with their errors larger than half the round
        // trip, the round trip's bound holds.
        let mut g = ClockFilter::default();
        let mut s = sample(0, 1_000_000, 2_000_000);
        s.agent_wall = wall(1_000_000, 5);
        assert_eq!(g.add(s).unwrap(), offset(0, 2_000_000));
        let mut h = ClockFilter::default();
        let mut s = sample(0, 50_000, 100_000);
        s.agent_wall = wall(50_000, 50_000);
        s.controller_wall = wall(100_000, 100_000);
        assert_eq!(h.add(s).unwrap(), offset(0, 100_000));
    }

    #[test]
    fn impossible_samples_are_ignored() {
        let mut f = ClockFilter::default();
        assert_eq!(f.add(sample(5, 0, 4)), None);
        assert_eq!(f.add(sample(0, u64::MAX, 0)).unwrap().offset_ns, i64::MAX);
    }
}
