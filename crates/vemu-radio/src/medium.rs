//! The wireless medium: a shared radio channel between the members of a wireless
//! segment. Sans-IO: frames come in with [`Medium::offer`], time moves with
//! [`Medium::advance`], and the medium says which member receives which frame when.
//!
//! A transmission occupies the channel for its airtime (preamble + bits / rate) around
//! its sender: every member within carrier-sense range senses it busy and waits
//! (spatial reuse beyond that range). Each member in reception range then receives it
//! independently with the propagation model's probability for the current distance,
//! drawn from a counter-based generator keyed by (seed, sender, receiver, the sender's
//! transmission number): the same seed and the same offered frames give the same
//! decisions, whatever else happens in between.
//!
//! Without CSMA the channel is shared perfectly (a member starts as soon as it senses
//! the channel idle; nothing collides). With CSMA/CA (802.11 DCF, simplified: DIFS,
//! a random backoff of 0..=CW slots frozen while the channel is busy, no RTS/CTS, no
//! retransmissions) members that start within one slot of each other cannot hear each
//! other and collide, and so do hidden terminals: a reception fails when another
//! transmission overlapping it comes from within carrier-sense range of the receiver,
//! or when the receiver itself transmits meanwhile.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::propagation::{Model, Radio, C};
use crate::{splitmix64 as mix, Pos};
pub use crate::{Neighbour, PairCounters};

/// 802.11b DSSS timing: slot, DIFS, minimum contention window.
pub const SLOT_NS: u64 = 20_000;
pub const DIFS_NS: u64 = 50_000;
pub const CW_MIN: u64 = 31;

/// How a wireless segment's channel behaves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MediumConfig {
    pub model: Model,
    pub radio: Radio,
    /// Bit rate of transmissions, bits/s.
    pub rate_bps: u64,
    /// Time every transmission takes before its first bit (PLCP preamble + header), ns.
    pub preamble_ns: u64,
    /// Members within this distance sense each other's transmissions, m.
    pub carrier_sense_m: f64,
    /// Simulate 802.11 DCF contention and collisions.
    pub csma: bool,
    /// Frames a member may have waiting for the channel; more are dropped.
    pub queue_frames: usize,
    pub seed: u64,
    /// The 802.11 DCF instead of this medium's simple CSMA ([`crate::wifi::dcf`]: what
    /// a segment's `csma: true` gives): its configuration and each member's radio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dcf: Option<Box<crate::wifi::dcf::DcfSetup>>,
    /// Buildings in the way and streets to drive ([`crate::city`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub city: Option<Box<crate::city::City>>,
    /// A wired hub instead of a radio channel ([`crate::hub`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub: Option<HubConfig>,
}

/// A hub's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HubConfig {
    /// Bit rate, bits/s (10 Mbit/s: 10BASE-T; 100 Mbit/s: a Fast Ethernet hub).
    pub rate_bps: u64,
    /// From one member's port to another's, ns: the window in which two transmissions
    /// collide.
    pub prop_ns: u64,
    /// Frames a member may have waiting; more are dropped.
    pub queue_frames: usize,
    pub seed: u64,
}

impl Default for HubConfig {
    fn default() -> HubConfig {
        HubConfig { rate_bps: 10_000_000, prop_ns: 2_000, queue_frames: 100, seed: 0 }
    }
}

impl MediumConfig {
    /// An 802.11 channel of `standard` (the DCF with its preset timing and rates) under
    /// `model`, with the default radio, `roles` for its members (empty: ad hoc) and
    /// every member's radio the same: what a segment's `csma: true` gives, less its
    /// scenario's settings.
    pub fn dcf_channel(
        standard: crate::wifi::phy::Standard,
        model: Model,
        roles: Vec<crate::wifi::bss::Role>,
        members: usize,
        seed: u64,
    ) -> MediumConfig {
        use crate::wifi::dcf::{DcfConfig, DcfSetup, StationConfig};
        let config = DcfConfig::preset(crate::wifi::phy::Timing::preset(standard), model, seed);
        let stations = vec![StationConfig::default(); members];
        MediumConfig {
            model,
            radio: Radio::default(),
            rate_bps: 54_000_000,
            preamble_ns: 0,
            carrier_sense_m: 0.0,
            csma: true,
            queue_frames: 64,
            seed,
            dcf: Some(Box::new(DcfSetup { config, stations, roles })),
            city: None,
            hub: None,
        }
    }
}

/// A frame's arrival at a member, or the end of the medium's use of a frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Frame `id` arrives at member `receiver` at lab time `at_ns`.
    Deliver { id: u64, receiver: u32, at_ns: u64 },
    /// Frame `id` did not reach member `receiver`, in reception range of its sender, at
    /// the end of its transmission (`at_ns`): lost to another transmission overlapping
    /// it (`collision`), else to the propagation model (too weak).
    Lost { id: u64, receiver: u32, at_ns: u64, collision: bool },
    /// Frame `id` for member `receiver` was given up by its sender after its retry
    /// limit (the DCF's; at `at_ns`).
    Dropped { id: u64, receiver: u32, at_ns: u64 },
    /// The medium is done with frame `id` (every `Deliver` for it came before).
    Done { id: u64 },
    /// A monitored member's radio decoded or sent a frame (the DCF's only).
    Heard(Box<crate::wifi::dcf::Heard>),
    /// The same for a management frame of infrastructure mode, with what it says.
    HeardMgmt(Box<crate::wifi::monitor::MgmtHeard>),
}

#[derive(Debug, Clone, Copy)]
struct Queued {
    id: u64,
    airtime_ns: u64,
    /// The member the frame is addressed to, when known (otherwise every member in range).
    dst: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Idle,
    /// Will try to start at `at_ns`; `from_ns` is when its wait (DIFS + `slots`) began.
    Waiting {
        at_ns: u64,
        from_ns: u64,
        slots: u64,
    },
    Transmitting,
}

#[derive(Debug, Clone)]
struct Member {
    up: bool,
    queue: VecDeque<Queued>,
    state: State,
    /// The channel as this member senses it: busy from `busy_start_ns` until `busy_until_ns`.
    busy_start_ns: u64,
    busy_until_ns: u64,
    /// Transmissions so far (keys the random draws).
    tx_count: u64,
    neighbours: Vec<Neighbour>,
    /// Members within carrier-sense range (not itself).
    sensers: Vec<u32>,
}

#[derive(Debug, Clone, Copy)]
struct Tx {
    sender: u32,
    id: u64,
    start_ns: u64,
    end_ns: u64,
    dst: Option<u32>,
    n: u64,
    ended: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A waiting member's wait is over.
    Attempt(u32),
    /// A transmission (index into `txs` by id) ends.
    End(u64),
}

/// A uniform draw in [0, 1) keyed by (seed, a, b, n).
fn draw(seed: u64, a: u32, b: u32, n: u64) -> f64 {
    (mix(mix(mix(seed ^ a as u64) ^ b as u64) ^ n) >> 11) as f64 / (1u64 << 53) as f64
}

/// The channel of one wireless segment.
#[derive(Debug, Clone)]
pub struct Medium {
    cfg: MediumConfig,
    /// Beyond this distance no frame is received, m (where the probability falls below 1e-6).
    reach_m: f64,
    pos: Vec<Pos>,
    members: Vec<Member>,
    events: BinaryHeap<Reverse<(u64, u64, Event)>>,
    seq: u64,
    txs: Vec<Tx>,
    pairs: FxHashMap<(u32, u32), PairCounters>,
    /// The city's walls, indexed ([`MediumConfig::city`]).
    walls: Option<crate::city::Walls>,
}

impl Medium {
    pub fn new(cfg: MediumConfig, positions: &[Pos]) -> Medium {
        let reach_m = reach(&cfg);
        let members = positions
            .iter()
            .map(|_| Member {
                up: true,
                queue: VecDeque::new(),
                state: State::Idle,
                busy_start_ns: 0,
                busy_until_ns: 0,
                tx_count: 0,
                neighbours: Vec::new(),
                sensers: Vec::new(),
            })
            .collect();
        let walls = cfg.city.as_deref().map(crate::city::Walls::new);
        let mut m = Medium {
            walls,
            cfg,
            reach_m,
            pos: positions.to_vec(),
            members,
            events: BinaryHeap::new(),
            seq: 0,
            txs: Vec::new(),
            pairs: FxHashMap::default(),
        };
        m.set_positions(positions);
        m
    }

    pub fn config(&self) -> &MediumConfig {
        &self.cfg
    }

    /// The distance beyond which nothing is received, m.
    pub fn reach_m(&self) -> f64 {
        self.reach_m
    }

    pub fn positions(&self) -> &[Pos] {
        &self.pos
    }

    /// Members a frame from `member` may reach now.
    pub fn neighbours(&self, member: u32) -> &[Neighbour] {
        &self.members[member as usize].neighbours
    }

    /// Delivery counters of every pair that has seen a transmission.
    pub fn pairs(&self) -> impl Iterator<Item = ((u32, u32), PairCounters)> + '_ {
        self.pairs.iter().map(|(k, v)| (*k, *v))
    }

    /// Airtime of a transmission of `wire_frames` frames totalling `wire_bytes`, ns.
    pub fn airtime_ns(&self, wire_frames: u32, wire_bytes: u64) -> u64 {
        wire_frames as u64 * self.cfg.preamble_ns
            + (wire_bytes as u128 * 8 * 1_000_000_000 / self.cfg.rate_bps.max(1) as u128) as u64
    }

    /// New positions (one per member): recompute who is within reach and carrier-sense
    /// range of whom, with a grid of cells as large as the larger range, so that the
    /// cost grows with members × members nearby, not members².
    pub fn set_positions(&mut self, positions: &[Pos]) {
        assert_eq!(positions.len(), self.members.len(), "one position per member");
        self.pos.copy_from_slice(positions);
        let cell = self.reach_m.max(self.cfg.carrier_sense_m).max(1.0);
        let key = |p: Pos| ((p.x / cell).floor() as i64, (p.y / cell).floor() as i64);
        let mut grid: FxHashMap<(i64, i64), Vec<u32>> = FxHashMap::default();
        for (i, &p) in self.pos.iter().enumerate() {
            grid.entry(key(p)).or_default().push(i as u32);
        }
        for i in 0..self.members.len() {
            let p = self.pos[i];
            let (cx, cy) = key(p);
            let mut nb = std::mem::take(&mut self.members[i].neighbours);
            let mut cs = std::mem::take(&mut self.members[i].sensers);
            nb.clear();
            cs.clear();
            for gx in cx - 1..=cx + 1 {
                for gy in cy - 1..=cy + 1 {
                    for &j in grid.get(&(gx, gy)).map_or(&[][..], |v| &v[..]) {
                        if j as usize == i {
                            continue;
                        }
                        let d = p.distance(self.pos[j as usize]);
                        if d > self.cfg.carrier_sense_m.max(self.reach_m) {
                            continue;
                        }
                        let loss_db =
                            self.walls.as_ref().map_or(0.0, |w| w.loss_db(p, self.pos[j as usize]));
                        // (An opaque building hides a sender; walls that only weaken
                        // leave carrier sense to the distance.)
                        if d <= self.cfg.carrier_sense_m && loss_db.is_finite() {
                            cs.push(j);
                        }
                        if d <= self.reach_m {
                            let (model, radio) = (&self.cfg.model, &self.cfg.radio);
                            let w = model.mean_rx_power_lossy_w(radio, d, loss_db);
                            let pr = model.probability_at(radio, w);
                            if pr > 0.0 {
                                nb.push(Neighbour {
                                    member: j,
                                    distance_m: d,
                                    delivery_probability: pr,
                                    signal_dbm: (w > 0.0 && w.is_finite()).then(|| crate::dbm(w)),
                                });
                            }
                        }
                    }
                }
            }
            nb.sort_by_key(|n| n.member);
            cs.sort_unstable();
            self.members[i].neighbours = nb;
            self.members[i].sensers = cs;
        }
    }

    /// Switch a member's radio on or off. Off, it neither sends nor receives; frames
    /// waiting in its queue are dropped (their `Done` goes to `out`).
    pub fn set_up(&mut self, member: u32, up: bool, out: &mut Vec<Outcome>) {
        let m = &mut self.members[member as usize];
        m.up = up;
        if !up {
            let transmitting = m.state == State::Transmitting;
            let keep = if transmitting { 1 } else { 0 };
            while m.queue.len() > keep {
                let q = m.queue.pop_back().unwrap();
                out.push(Outcome::Done { id: q.id });
            }
            if !transmitting {
                m.state = State::Idle;
            }
        }
    }

    /// A frame from `sender` at `now_ns`, occupying the channel for `airtime_ns`,
    /// addressed to member `dst` when known. False (and nothing queued) when the sender
    /// is down or its queue is full.
    pub fn offer(
        &mut self,
        now_ns: u64,
        sender: u32,
        id: u64,
        airtime_ns: u64,
        dst: Option<u32>,
    ) -> bool {
        let m = &mut self.members[sender as usize];
        if !m.up || m.queue.len() >= self.cfg.queue_frames {
            return false;
        }
        m.queue.push_back(Queued { id, airtime_ns, dst });
        if m.state == State::Idle {
            self.wait(sender, now_ns, None);
        }
        true
    }

    /// When the medium next has something to do, lab ns.
    pub fn next_event_ns(&self) -> Option<u64> {
        self.events.peek().map(|Reverse((t, _, _))| *t)
    }

    fn schedule(&mut self, at_ns: u64, e: Event) {
        self.seq += 1;
        self.events.push(Reverse((at_ns, self.seq, e)));
    }

    /// Start waiting for the channel: from when it is next idle, DIFS and a backoff
    /// (kept from an earlier wait, or drawn) under CSMA; at once without.
    fn wait(&mut self, i: u32, now_ns: u64, slots: Option<u64>) {
        let m = &self.members[i as usize];
        let from_ns = now_ns.max(m.busy_until_ns);
        let (at_ns, slots) = if self.cfg.csma {
            let slots = slots.unwrap_or_else(|| {
                (draw(self.cfg.seed, i, u32::MAX, m.tx_count) * (CW_MIN + 1) as f64) as u64
            });
            (from_ns + DIFS_NS + slots * SLOT_NS, slots)
        } else {
            (from_ns, 0)
        };
        self.members[i as usize].state = State::Waiting { at_ns, from_ns, slots };
        self.schedule(at_ns, Event::Attempt(i));
    }

    /// Carry out everything due by `now_ns`; arrivals and finished frames go to `out`.
    pub fn advance(&mut self, now_ns: u64, out: &mut Vec<Outcome>) {
        while let Some(&Reverse((t, _, e))) = self.events.peek() {
            if t > now_ns {
                break;
            }
            self.events.pop();
            match e {
                Event::Attempt(i) => self.attempt(i, t),
                Event::End(id) => self.end(id, t, out),
            }
        }
    }

    fn attempt(&mut self, i: u32, t: u64) {
        let m = &self.members[i as usize];
        let State::Waiting { at_ns, from_ns, slots } = m.state else { return };
        if at_ns != t || !m.up || m.queue.is_empty() {
            if m.queue.is_empty() || !m.up {
                self.members[i as usize].state = State::Idle;
            }
            return;
        }
        // Busy since the wait began, and not just now (a transmission that started less
        // than a slot ago cannot be sensed yet under CSMA: both go, and collide).
        let sensed = m.busy_until_ns > t && !(self.cfg.csma && t < m.busy_start_ns + SLOT_NS);
        if sensed {
            // Freeze the backoff: slots that passed before the channel went busy are spent.
            let counted_from = from_ns + DIFS_NS;
            let spent = if self.cfg.csma {
                (m.busy_start_ns.saturating_sub(counted_from) / SLOT_NS).min(slots)
            } else {
                0
            };
            self.wait(i, t, Some(slots - spent));
            return;
        }
        let q = *m.queue.front().unwrap();
        let n = m.tx_count;
        let end_ns = t + q.airtime_ns.max(1);
        self.members[i as usize].state = State::Transmitting;
        self.members[i as usize].tx_count += 1;
        for k in 0..self.members[i as usize].sensers.len() {
            let j = self.members[i as usize].sensers[k] as usize;
            let s = &mut self.members[j];
            if s.busy_until_ns <= t {
                s.busy_start_ns = t;
            }
            s.busy_until_ns = s.busy_until_ns.max(end_ns);
        }
        self.txs.push(Tx { sender: i, id: q.id, start_ns: t, end_ns, dst: q.dst, n, ended: false });
        self.schedule(end_ns, Event::End(q.id));
    }

    fn end(&mut self, id: u64, t: u64, out: &mut Vec<Outcome>) {
        let Some(k) = self.txs.iter().position(|x| x.id == id && !x.ended) else { return };
        self.txs[k].ended = true;
        let tx = self.txs[k];
        let i = tx.sender as usize;
        let cs2 = self.cfg.carrier_sense_m;
        let neighbours = std::mem::take(&mut self.members[i].neighbours);
        for nb in &neighbours {
            if tx.dst.is_some_and(|d| d != nb.member)
                || !self.members[nb.member as usize].up
                || !self.members[i].up
            {
                continue;
            }
            let j = nb.member;
            let pj = self.pos[j as usize];
            let collided = self.cfg.csma
                && self.txs.iter().any(|u| {
                    u.id != tx.id
                        && u.start_ns < tx.end_ns
                        && u.end_ns > tx.start_ns
                        && (u.sender == j || self.pos[u.sender as usize].distance(pj) <= cs2)
                });
            let c = self.pairs.entry((tx.sender, j)).or_default();
            c.sent += 1;
            if collided {
                c.lost_collision += 1;
                out.push(Outcome::Lost { id, receiver: j, at_ns: t, collision: true });
            } else if draw(self.cfg.seed, tx.sender, j, tx.n) < nb.delivery_probability {
                c.delivered += 1;
                let prop_ns = (nb.distance_m / C * 1e9).round() as u64;
                out.push(Outcome::Deliver { id, receiver: j, at_ns: t + prop_ns });
            } else {
                c.lost_channel += 1;
                out.push(Outcome::Lost { id, receiver: j, at_ns: t, collision: false });
            }
        }
        self.members[i].neighbours = neighbours;
        out.push(Outcome::Done { id });
        // Forget transmissions that nothing still on the air overlaps.
        let oldest_on_air =
            self.txs.iter().filter(|x| !x.ended).map(|x| x.start_ns).min().unwrap_or(u64::MAX);
        self.txs.retain(|x| !x.ended || x.end_ns > oldest_on_air);
        let m = &mut self.members[i];
        m.queue.pop_front();
        m.state = State::Idle;
        if m.up && !m.queue.is_empty() {
            self.wait(i as u32, t, None);
        }
    }
}

/// The distance beyond which the probability of reception is below 1e-6, m.
fn reach(cfg: &MediumConfig) -> f64 {
    let p = |d: f64| cfg.model.delivery_probability(&cfg.radio, d);
    if p(1e7) > 1e-6 {
        return 1e7;
    }
    let (mut lo, mut hi) = (0.0f64, 1e7f64);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if p(mid) > 1e-6 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}
