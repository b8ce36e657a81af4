//! A hub: an 802.3 repeater on a shared, half-duplex medium (IMUNES' `hub`), driven
//! through the same face as a radio channel ([`crate::air::Air`]) — frames offered by
//! members, time advanced, deliveries out — because it is one: a medium every member
//! hears, decided on the lab clock.
//!
//! CSMA/CD as 802.3 clause 4 has it: a member with a frame listens; the medium busy, it
//! waits for it to fall idle and then the interframe gap (96 bit times), and sends
//! (1-persistent: those waiting together start together, and collide). A transmission is
//! heard by the others `prop_ns` after it starts: two that start within that window
//! collide; each sender notices it then, sends a 32-bit jam and stops, and after its
//! n-th collision waits r slot times (512 bit times), r uniform in 0 .. 2^min(n, 10) − 1,
//! before trying again; after 16 attempts it gives the frame up. A frame that gets
//! through is repeated to every other member (the hub does not learn addresses: each
//! receiver's interface keeps what is for it), `prop_ns` after it ends.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use serde::{Deserialize, Serialize};

pub use crate::medium::HubConfig;
use crate::medium::Outcome;
use crate::splitmix64;
use crate::{Neighbour, PairCounters};

/// Attempts before a frame is given up (802.3's attemptLimit).
pub const ATTEMPT_LIMIT: u32 = 16;
/// Collisions after which the backoff range stops growing (802.3's backoffLimit).
pub const BACKOFF_LIMIT: u32 = 10;
/// Slot time, interframe gap, jam, in bit times.
const SLOT_BITS: u64 = 512;
const IFG_BITS: u64 = 96;
const JAM_BITS: u64 = 32;
/// Preamble and start-of-frame delimiter, frame check sequence, bytes; the shortest
/// frame (with its FCS), bytes.
const PREAMBLE_BYTES: u64 = 8;
const FCS_BYTES: u64 = 4;
const MIN_FRAME_BYTES: u64 = 64;
/// What each frame of a super-frame adds when they are sent back to back: preamble,
/// FCS and the gap, bytes.
pub const PER_FRAME_OVERHEAD_BYTES: u64 = PREAMBLE_BYTES + FCS_BYTES + IFG_BITS / 8;

/// What each member's interface did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HubStats {
    pub sent: u64,
    pub collisions: u64,
    /// Frames given up after [`ATTEMPT_LIMIT`] attempts.
    pub dropped: u64,
}

#[derive(Debug, Clone, Copy)]
struct Queued {
    id: u64,
    wire_bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// Nothing to send, or waiting for its next attempt (an event is due).
    Idle,
    Waiting,
    /// Sending its head frame from `start_ns`; ends at `end_ns` unless it collides.
    Sending {
        start_ns: u64,
        end_ns: u64,
    },
    /// Jamming after a collision until `until_ns`.
    Jamming {
        until_ns: u64,
    },
}

#[derive(Debug, Clone)]
struct Member {
    up: bool,
    queue: VecDeque<Queued>,
    state: State,
    attempts: u32,
    stats: HubStats,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// Member tries to send its head frame.
    Attempt(u32),
    /// Member's transmission ends (well, if it is still sending then).
    End(u32),
    /// Member notices a collision (if it is still sending then).
    Collide(u32),
    /// Member's jam ends.
    JamEnd(u32),
}

/// The hub: its members and the medium's state.
#[derive(Debug, Clone)]
pub struct Hub {
    cfg: HubConfig,
    members: Vec<Member>,
    events: BinaryHeap<Reverse<(u64, u64, Event)>>,
    seq: u64,
    /// When the medium, as the members sense it, was last busy until, ns (never: None).
    busy_until_ns: Option<u64>,
    draws: u64,
    pairs: Vec<PairCounters>,
    out: Vec<Outcome>,
}

impl Hub {
    pub fn new(cfg: HubConfig, members: usize) -> Hub {
        let m = Member {
            up: true,
            queue: VecDeque::new(),
            state: State::Idle,
            attempts: 0,
            stats: HubStats::default(),
        };
        Hub {
            cfg,
            members: vec![m; members],
            events: BinaryHeap::new(),
            seq: 0,
            busy_until_ns: None,
            draws: 0,
            pairs: vec![PairCounters::default(); members * members],
            out: Vec::new(),
        }
    }

    pub fn config(&self) -> &HubConfig {
        &self.cfg
    }

    fn bits_ns(&self, bits: u64) -> u64 {
        (bits as u128 * 1_000_000_000 / self.cfg.rate_bps.max(1) as u128) as u64
    }

    /// A frame's time on the wire: preamble, the frame padded to 64 bytes with its FCS.
    pub fn airtime_ns(&self, wire_bytes: u64) -> u64 {
        self.bits_ns((PREAMBLE_BYTES + (wire_bytes + FCS_BYTES).max(MIN_FRAME_BYTES)) * 8)
    }

    fn at(&mut self, t: u64, e: Event) {
        self.seq += 1;
        self.events.push(Reverse((t, self.seq, e)));
    }

    /// A frame of `wire_bytes` (Ethernet header included, no FCS) from `member`. False
    /// when refused (the member is down or its queue is full).
    pub fn offer(&mut self, now_ns: u64, member: u32, id: u64, wire_bytes: u64) -> bool {
        let cap = self.cfg.queue_frames;
        let m = &mut self.members[member as usize];
        if !m.up || m.queue.len() >= cap {
            return false;
        }
        m.queue.push_back(Queued { id, wire_bytes });
        if m.state == State::Idle && m.queue.len() == 1 {
            m.state = State::Waiting;
            m.attempts = 0;
            self.at(now_ns, Event::Attempt(member));
        }
        true
    }

    pub fn next_event_ns(&self) -> Option<u64> {
        self.events.peek().map(|Reverse((t, _, _))| *t)
    }

    /// Carry out everything due by `now_ns`.
    pub fn advance(&mut self, now_ns: u64, out: &mut Vec<Outcome>) {
        while let Some(&Reverse((t, _, e))) = self.events.peek() {
            if t > now_ns {
                break;
            }
            self.events.pop();
            match e {
                Event::Attempt(m) => self.attempt(m, t),
                Event::End(m) => self.end(m, t),
                Event::Collide(m) => self.collide(m, t),
                Event::JamEnd(m) => self.jam_end(m, t),
            }
        }
        out.append(&mut self.out);
    }

    /// Whether the medium is busy as a member senses it at `t`: a transmission (or jam)
    /// heard by then, still on.
    fn sensed_busy_until(&self, t: u64) -> Option<u64> {
        let p = self.cfg.prop_ns;
        let mut until = None::<u64>;
        for m in &self.members {
            let (start, end) = match m.state {
                State::Sending { start_ns, end_ns } => (start_ns, end_ns),
                State::Jamming { until_ns } => (0, until_ns),
                _ => continue,
            };
            if start + p <= t && end + p > t {
                until = Some(until.map_or(end + p, |u: u64| u.max(end + p)));
            }
        }
        until
    }

    fn attempt(&mut self, m: u32, t: u64) {
        let mi = m as usize;
        if !self.members[mi].up
            || self.members[mi].state != State::Waiting
            || self.members[mi].queue.is_empty()
        {
            return;
        }
        // Busy: wait for idle, then the gap (1-persistent).
        let ifg = self.bits_ns(IFG_BITS);
        if let Some(until) = self.sensed_busy_until(t) {
            self.at(until + ifg, Event::Attempt(m));
            return;
        }
        if let Some(at) = self.busy_until_ns.map(|b| b + ifg).filter(|&at| t < at) {
            self.at(at, Event::Attempt(m));
            return;
        }
        let bytes = self.members[mi].queue[0].wire_bytes;
        let end = t + self.airtime_ns(bytes);
        self.members[mi].state = State::Sending { start_ns: t, end_ns: end };
        // Another transmission not yet heard (started within the window): both collide,
        // each noticing when the other's signal reaches it.
        let p = self.cfg.prop_ns;
        let others: Vec<(u32, u64)> = self
            .members
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != mi)
            .filter_map(|(j, o)| match o.state {
                State::Sending { start_ns, .. } if start_ns + p > t => Some((j as u32, start_ns)),
                _ => None,
            })
            .collect();
        if others.is_empty() {
            self.at(end, Event::End(m));
            return;
        }
        let first_other = others.iter().map(|o| o.1).min().expect("others");
        self.at(first_other + p, Event::Collide(m));
        for (j, _) in others {
            self.at(t + p, Event::Collide(j));
        }
    }

    fn end(&mut self, m: u32, t: u64) {
        let mi = m as usize;
        let State::Sending { end_ns, .. } = self.members[mi].state else { return };
        if end_ns != t {
            return;
        }
        let q = self.members[mi].queue.pop_front().expect("a frame was being sent");
        self.members[mi].stats.sent += 1;
        self.busy_until_ns = self.busy_until_ns.max(Some(t + self.cfg.prop_ns));
        let n = self.members.len();
        for r in 0..n {
            if r != mi && self.members[r].up {
                self.pairs[mi * n + r].sent += 1;
                self.pairs[mi * n + r].delivered += 1;
                self.out.push(Outcome::Deliver {
                    id: q.id,
                    receiver: r as u32,
                    at_ns: t + self.cfg.prop_ns,
                });
            }
        }
        self.out.push(Outcome::Done { id: q.id });
        self.next_frame(m, t + self.cfg.prop_ns);
    }

    fn collide(&mut self, m: u32, t: u64) {
        let mi = m as usize;
        if !matches!(self.members[mi].state, State::Sending { .. }) {
            return;
        }
        let until = t + self.bits_ns(JAM_BITS);
        self.members[mi].state = State::Jamming { until_ns: until };
        self.members[mi].stats.collisions += 1;
        self.busy_until_ns = self.busy_until_ns.max(Some(until + self.cfg.prop_ns));
        self.at(until, Event::JamEnd(m));
    }

    fn jam_end(&mut self, m: u32, t: u64) {
        let mi = m as usize;
        if self.members[mi].state != (State::Jamming { until_ns: t }) {
            return;
        }
        self.members[mi].attempts += 1;
        let n = self.members[mi].attempts;
        if n >= ATTEMPT_LIMIT {
            let q = self.members[mi].queue.pop_front().expect("a frame collided");
            self.members[mi].stats.dropped += 1;
            self.out.push(Outcome::Dropped { id: q.id, receiver: m, at_ns: t });
            self.out.push(Outcome::Done { id: q.id });
            self.next_frame(m, t);
            return;
        }
        let k = n.min(BACKOFF_LIMIT);
        self.draws += 1;
        let r = splitmix64(self.cfg.seed ^ splitmix64(self.draws)) % (1u64 << k);
        self.members[mi].state = State::Waiting;
        let at = t + r * self.bits_ns(SLOT_BITS);
        self.at(at, Event::Attempt(m));
    }

    /// The member's next frame, if any, from `t`.
    fn next_frame(&mut self, m: u32, t: u64) {
        let mi = m as usize;
        self.members[mi].attempts = 0;
        if self.members[mi].queue.is_empty() {
            self.members[mi].state = State::Idle;
        } else {
            self.members[mi].state = State::Waiting;
            self.at(t, Event::Attempt(m));
        }
    }

    /// Switch a member's port on or off. Off, it neither sends nor receives; frames
    /// waiting at it are dropped (their `Done` goes to `out`).
    pub fn set_up(&mut self, member: u32, up: bool, out: &mut Vec<Outcome>) {
        let m = &mut self.members[member as usize];
        m.up = up;
        if !up {
            for q in m.queue.drain(..) {
                out.push(Outcome::Done { id: q.id });
            }
            m.state = State::Idle;
        }
    }

    /// Every other member, as a radio channel lists neighbours (all at distance 0).
    pub fn neighbours(&self, member: u32) -> Vec<Neighbour> {
        (0..self.members.len() as u32)
            .filter(|&j| j != member)
            .map(|j| Neighbour {
                member: j,
                distance_m: 0.0,
                delivery_probability: 1.0,
                signal_dbm: None,
            })
            .collect()
    }

    /// Delivery counters of every pair that has carried a frame.
    pub fn pairs(&self) -> Vec<((u32, u32), PairCounters)> {
        let n = self.members.len();
        (0..n * n)
            .filter(|&i| self.pairs[i].sent > 0)
            .map(|i| (((i / n) as u32, (i % n) as u32), self.pairs[i]))
            .collect()
    }

    pub fn stats(&self, member: u32) -> HubStats {
        self.members[member as usize].stats
    }

    pub fn members(&self) -> usize {
        self.members.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;

    fn run(h: &mut Hub) -> Vec<Outcome> {
        let mut out = Vec::new();
        while let Some(t) = h.next_event_ns() {
            h.advance(t, &mut out);
        }
        out
    }

    fn delivered(out: &[Outcome]) -> Vec<(u64, u32, u64)> {
        out.iter()
            .filter_map(|o| match o {
                Outcome::Deliver { id, receiver, at_ns } => Some((*id, *receiver, *at_ns)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_lone_frame_takes_its_airtime_and_reaches_every_other_member() {
        let mut h = Hub::new(HubConfig { prop_ns: 0, ..HubConfig::default() }, 3);
        // 1000 bytes + 4 FCS + 8 preamble at 10 Mbit/s: 809.6 µs.
        assert!(h.offer(0, 0, 7, 1000));
        let out = run(&mut h);
        assert_eq!(delivered(&out), vec![(7, 1, 809_600), (7, 2, 809_600)]);
        // A 60-byte frame is padded to the 64-byte minimum: 72 bytes, 57.6 µs.
        assert_eq!(h.airtime_ns(60), 57_600);
    }

    #[test]
    fn back_to_back_frames_keep_the_interframe_gap() {
        let mut h = Hub::new(HubConfig { prop_ns: 0, ..HubConfig::default() }, 2);
        h.offer(0, 0, 1, 1000);
        h.offer(0, 0, 2, 1000);
        let out = run(&mut h);
        assert_eq!(delivered(&out), vec![(1, 1, 809_600), (2, 1, 809_600 + 9_600 + 809_600)]);
    }

    #[test]
    fn two_members_starting_together_collide_jam_and_back_off() {
        let mut h = Hub::new(HubConfig { prop_ns: 2 * US, seed: 3, ..HubConfig::default() }, 2);
        h.offer(0, 0, 1, 1000);
        h.offer(1_000, 1, 2, 1000);
        let out = run(&mut h);
        let d = delivered(&out);
        // Both frames arrive, one after the other, after at least one collision each.
        assert_eq!(d.len(), 2, "{out:?}");
        assert!(h.stats(0).collisions >= 1 && h.stats(1).collisions >= 1);
        // Neither was on the wire at the same time as the other: 809.6 µs apart at least.
        let (t0, t1) = (d[0].2.min(d[1].2), d[0].2.max(d[1].2));
        assert!(t1 - t0 >= 809_600 + 9_600, "{d:?}");
    }

    #[test]
    fn a_frame_heard_in_time_is_deferred_to_not_collided_with() {
        let mut h = Hub::new(HubConfig { prop_ns: 2 * US, ..HubConfig::default() }, 2);
        h.offer(0, 0, 1, 1000);
        // 100 µs later member 1 senses member 0's frame and waits for it (and the gap).
        h.offer(100 * US, 1, 2, 1000);
        let out = run(&mut h);
        assert_eq!(h.stats(0).collisions + h.stats(1).collisions, 0);
        let d = delivered(&out);
        assert_eq!(d[0], (1, 1, 809_600 + 2 * US));
        // Member 1 starts when the medium is idle at its port plus the gap.
        assert_eq!(d[1], (2, 0, 809_600 + 2 * US + 9_600 + 809_600 + 2 * US));
    }

    /// Saturated members share the hub with the efficiency of 1-persistent CSMA/CD and
    /// binary exponential backoff: most of the rate, less with more of them, and each
    /// member about its share.
    #[test]
    fn saturated_members_share_the_hub() {
        for (n, lo, hi) in [(2usize, 0.90, 0.995), (10, 0.75, 0.99)] {
            let mut h = Hub::new(
                HubConfig {
                    prop_ns: 2 * US,
                    seed: 11,
                    queue_frames: 1_000_000,
                    ..HubConfig::default()
                },
                n,
            );
            let frames = 400u64;
            for m in 0..n as u32 {
                for k in 0..frames {
                    h.offer(0, m, m as u64 * 1_000_000 + k, 1500);
                }
            }
            let mut out = Vec::new();
            let mut end = 0;
            while let Some(t) = h.next_event_ns() {
                h.advance(t, &mut out);
                end = t;
            }
            let ok: u64 = (0..n as u32).map(|m| h.stats(m).sent).sum();
            let dropped: u64 = (0..n as u32).map(|m| h.stats(m).dropped).sum();
            assert_eq!(ok + dropped, frames * n as u64);
            let efficiency = ok as f64 * h.airtime_ns(1500) as f64 / end as f64;
            let collisions: u64 = (0..n as u32).map(|m| h.stats(m).collisions).sum();
            eprintln!("{n} members: efficiency {efficiency:.3}, {collisions} collisions, {dropped} dropped");
            assert!((lo..hi).contains(&efficiency), "{n} members: efficiency {efficiency}");
            assert!(collisions > 0);
        }
    }
}
