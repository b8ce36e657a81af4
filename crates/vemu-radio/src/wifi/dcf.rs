//! The 802.11 DCF, decided slot by slot on the lab clock (sans-IO: frames in with
//! [`Dcf::offer`], time with [`Dcf::advance`], what happened out as [`Outcome`]s).
//!
//! Each station contends as 802.11 says: a backoff drawn uniformly in [0, CW], counted
//! down one slot at a time while its medium is idle after DIFS (EIFS after a frame it
//! received in error), frozen while busy and resumed after the next DIFS; stations whose
//! counters run out in the same slot transmit together and collide. Its medium is busy
//! while it transmits, while a transmission reaches it above the carrier-sense
//! thresholds (preamble detection, energy detection: the propagation delay after it
//! starts), and while its NAV (set from the Duration field of frames it decodes, not for
//! it) runs. A unicast data frame is acknowledged after SIFS at the basic rate; no ACK
//! by the timeout is a failure: CW doubles (up to CWmax) and the frame is sent again
//! until its retry limit (short or long, by the RTS threshold; `None`: no limit), then
//! dropped and reported. Frames above the RTS threshold go after an RTS/CTS exchange.
//! Broadcasts go once at the basic rate, unacknowledged. After every transmission the
//! station draws a new backoff (post-backoff). Receivers detect duplicates by sequence
//! number and retry bit.
//!
//! Reception is decided by SINR over the whole frame: the interference of every other
//! transmission overlapping it is summed, piece by piece where it changes, and each
//! piece's bits are received with the success rate of the frame's rate at that SINR
//! ([`phy::success_rate`]). A receiver locks onto the first frame whose preamble it
//! detects (above the preamble threshold and the minimum SINR) and not on frames that
//! start while it receives or transmits: a strong frame captures the channel over a
//! weak later one, a weak one loses to a strong one overlapping it. Stations on
//! different channels neither hear nor disturb each other.
//!
//! Not modelled: frame aggregation, block ACK, QoS (EDCA), MIMO, fragmentation,
//! preamble capture of a stronger frame that starts later, adjacent-channel
//! interference.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::phy::{self, Mode, Timing};
use super::rate::{RateControl, RateState};
use crate::propagation::{Model, Radio, C};
use crate::{splitmix64 as mix, Pos};

mod reception;

/// How a channel's stations behave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DcfConfig {
    pub timing: Timing,
    pub model: Model,
    /// Transmit power, antenna gains and frequency (per-station power and gain are in
    /// [`StationConfig`]).
    pub radio: Radio,
    /// Thermal noise and the receiver's noise figure, dBm.
    pub noise_dbm: f64,
    /// A frame's preamble is detected above this power and [`DcfConfig::min_sinr_db`];
    /// anything else above the energy threshold keeps the medium busy too.
    pub cca_pd_dbm: f64,
    pub cca_ed_dbm: f64,
    pub min_sinr_db: f64,
    /// Frames of more payload than this go after RTS/CTS (`None`: never).
    pub rts_threshold_bytes: Option<u64>,
    /// Attempts of a frame before it is dropped: short (RTS, frames up to the RTS
    /// threshold) and long (frames above it); `None`: no limit.
    pub short_retry_limit: Option<u32>,
    pub long_retry_limit: Option<u32>,
    /// How long a sender waits for an ACK or CTS after its frame ends before it calls it
    /// lost (`None`: SIFS + a slot + the basic rate's preamble, as 802.11 says).
    pub ack_timeout_ns: Option<u64>,
    pub rate: RateControl,
    /// Frames a station may have waiting; more are refused.
    pub queue_frames: usize,
    pub seed: u64,
}

impl DcfConfig {
    /// A standard's defaults: 20 dBm, no antenna gain, noise −94 dBm, preamble detection
    /// −82 dBm, energy detection −62 dBm, 7/4 retries, no RTS/CTS, the top rate.
    pub fn preset(timing: Timing, model: Model, seed: u64) -> DcfConfig {
        let top = timing.modes.len().saturating_sub(1);
        let frequency_hz = match timing.standard {
            phy::Standard::A => 5.18e9,
            _ => 2.412e9,
        };
        DcfConfig {
            timing,
            model,
            radio: Radio {
                tx_power_w: 0.1,
                frequency_hz,
                rx_threshold_w: crate::watts(-82.0),
                ..Radio::default()
            },
            noise_dbm: -94.0,
            cca_pd_dbm: -82.0,
            cca_ed_dbm: -62.0,
            min_sinr_db: 4.0,
            rts_threshold_bytes: None,
            short_retry_limit: Some(7),
            long_retry_limit: Some(4),
            ack_timeout_ns: None,
            rate: RateControl::Constant { mode: top },
            queue_frames: 64,
            seed,
        }
    }
}

/// A channel's configuration and each station's radio (in the members' order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DcfSetup {
    pub config: DcfConfig,
    pub stations: Vec<StationConfig>,
    /// Each member's part in infrastructure mode ([`crate::wifi::bss`]); none, or all
    /// ad hoc: an ad hoc channel.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<crate::wifi::bss::Role>,
}

/// One station's radio.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StationConfig {
    /// Transmit power, dBm (`None`: the channel's).
    pub tx_power_dbm: Option<f64>,
    pub gain_dbi: f64,
    pub channel: u16,
}

impl Default for StationConfig {
    fn default() -> StationConfig {
        StationConfig { tx_power_dbm: None, gain_dbi: 0.0, channel: 1 }
    }
}

/// Why a frame did not reach a station.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LossReason {
    /// Received with errors: the signal too weak for its rate, or interference.
    Sinr,
    /// Another frame was on the air at its start (the receiver was locked on it) or the
    /// receiver was transmitting.
    Busy,
    /// Its sender gave up after the retry limit.
    RetryLimit,
}

/// What the channel did with a frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Frame `id` arrives at station `receiver` at `at_ns` (once, duplicates are not).
    Deliver { id: u64, receiver: u32, at_ns: u64 },
    /// A broadcast `id` did not reach station `receiver`, whose radio detected it (an
    /// attempt of a unicast frame that fails is retried: see `Dropped`).
    Lost { id: u64, receiver: u32, at_ns: u64, reason: LossReason },
    /// Frame `id` was dropped by its sender (`receiver`: its destination; broadcasts are
    /// never dropped so).
    Dropped { id: u64, receiver: u32, at_ns: u64, reason: LossReason },
    /// The channel is done with frame `id`.
    Done { id: u64 },
    /// A monitored station's radio decoded (or sent) a frame.
    Heard(Box<Heard>),
}

/// What a station did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StationStats {
    /// Data frames put on the air (each attempt), of which retries; RTS sent.
    pub tx_data: u64,
    pub tx_retries: u64,
    pub tx_rts: u64,
    /// Unicast frames acknowledged; dropped at their retry limit.
    pub acked: u64,
    pub dropped_retry_limit: u64,
    /// Frames it received intact, and with errors.
    pub rx_ok: u64,
    pub rx_error: u64,
    /// Its contention window now, and the rate (index, and bit/s) of its last data frame.
    pub cw: u32,
    pub mode: usize,
    #[serde(default)]
    pub rate_bps: u64,
}

/// A frame's kind on the air.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Data,
    Ack,
    Rts,
    Cts,
}

/// A frame a monitored station's radio decoded, or sent itself: what a capture of its
/// radio shows ([`Dcf::set_monitor`], [`super::monitor`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Heard {
    /// Whose radio.
    pub station: u32,
    /// When the frame ended there (its reception time).
    pub at_ns: u64,
    pub kind: Kind,
    pub sender: u32,
    /// The station it is for (`None`: broadcast).
    pub dst: Option<u32>,
    /// A data frame's id (as offered), sequence number and retry bit.
    pub id: Option<u64>,
    pub seq: u16,
    pub retry: bool,
    /// The Duration field, ns.
    pub duration_ns: u64,
    pub mode: Mode,
    pub channel: u16,
    /// The power it was received with (`None`: its own transmission), and the noise.
    pub signal_dbm: Option<f64>,
    pub noise_dbm: f64,
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    id: u64,
    dst: Option<u32>,
    bytes: u64,
    seq: u16,
    short_retries: u32,
    long_retries: u32,
    tried: bool,
}

#[derive(Debug, Clone, Copy)]
struct Tx {
    n: u64,
    sender: u32,
    kind: Kind,
    start_ns: u64,
    end_ns: u64,
    mode: Mode,
    bits: u64,
    dst: Option<u32>,
    /// The Duration field: how long after its end the exchange holds the medium.
    nav_ns: u64,
    frame: Option<Frame>,
    retry: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// Contending (or idle with nothing to send).
    None,
    Ack,
    Cts,
    /// A broadcast sent, on its way to the farthest receiver: it is done after that.
    Sent,
}

#[derive(Debug, Clone)]
struct Station {
    cfg: StationConfig,
    up: bool,
    queue: VecDeque<Frame>,
    cw: u32,
    /// Slots left, when a backoff is running; counted from `backoff_from_ns`.
    backoff: Option<u64>,
    backoff_from_ns: u64,
    /// Invalidates access events scheduled before.
    gen: u64,
    /// Invalidates the timeout scheduled before (an answer came, or the radio went off).
    wait_gen: u64,
    transmitting: bool,
    wait: Wait,
    /// Transmissions it senses now (their numbers), its NAV, when its medium went idle.
    sensed: Vec<u64>,
    nav_until_ns: u64,
    idle_since_ns: u64,
    eifs: bool,
    /// The transmission it is receiving.
    locked: Option<u64>,
    seq: u16,
    /// The last (sequence, retry) taken from each sender.
    last_seq: FxHashMap<u32, u16>,
    rates: FxHashMap<Option<u32>, RateState>,
    stats: StationStats,
    draws: u64,
    /// A capture watches its radio: what it decodes and sends is [`Outcome::Heard`].
    monitor: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// Station `s`'s backoff runs out (if its generation is still `g`).
    Access(u32, u64),
    /// Transmission `n` reaches station `s` (its start), or stops reaching it.
    Reach(u64, u32),
    Leave(u64, u32),
    End(u64),
    /// Station `s`'s wait for an ACK or CTS is over (generation `g`).
    Timeout(u32, u64),
    /// Station `s` answers station `to`: an ACK (0), a CTS (1) holding the medium for the
    /// Duration given, or (2, after a CTS) its data frame.
    Answer(u32, u32, u64, u8),
    /// Station `s`'s NAV runs out.
    NavEnd(u32),
}

/// The stations of one channel.
#[derive(Debug, Clone)]
pub struct Dcf {
    cfg: DcfConfig,
    /// Delivery counters of each (sender, receiver) pair: data frames for it (or
    /// broadcast) that reached its radio.
    pairs: FxHashMap<(u32, u32), crate::PairCounters>,
    pos: Vec<Pos>,
    /// Received powers (dBm, W) by (sender, receiver), computed when first asked and
    /// forgotten when stations move.
    power: std::cell::RefCell<FxHashMap<(u32, u32), (f64, f64)>>,
    /// Buildings in the way ([`crate::city`]), indexed.
    walls: Option<crate::city::Walls>,
    /// The configuration's noise, W.
    noise_w: f64,
    sta: Vec<Station>,
    events: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    seq: u64,
    /// Transmissions on the air, or that something on the air overlaps.
    air: Vec<Tx>,
    /// Broadcasts lost to stations that could not receive them, for the next outcomes.
    lost: Vec<(u64, u32, u64, LossReason)>,
    /// What monitored stations sent, for the next outcomes.
    sent_heard: Vec<Heard>,
    next_tx: u64,
    now_ns: u64,
    /// What a 1200-byte frame costs the channel at each rate (airtime, SIFS, ACK, DIFS
    /// and the mean first backoff), for Minstrel's throughput estimates.
    rate_cost_ns: Vec<u64>,
}

/// How long an ended transmission is kept for the stations it still reaches, ns.
const KEEP_NS: u64 = 1_000_000;

/// A uniform draw in [0, 1) keyed by (seed, a, b, n).
fn draw(seed: u64, a: u64, b: u64, n: u64) -> f64 {
    (mix(mix(mix(seed ^ a) ^ b) ^ n) >> 11) as f64 / (1u64 << 53) as f64
}

fn db(x: f64) -> f64 {
    10f64.powf(x / 10.0)
}

impl Dcf {
    pub fn new(cfg: DcfConfig, positions: &[Pos], stations: &[StationConfig]) -> Dcf {
        let cw = cfg.timing.cw_min;
        let sta = positions
            .iter()
            .enumerate()
            .map(|(i, _)| Station {
                cfg: stations.get(i).copied().unwrap_or_default(),
                up: true,
                queue: VecDeque::new(),
                cw,
                backoff: None,
                backoff_from_ns: 0,
                gen: 0,
                wait_gen: 0,
                transmitting: false,
                wait: Wait::None,
                sensed: Vec::new(),
                nav_until_ns: 0,
                idle_since_ns: 0,
                eifs: false,
                locked: None,
                seq: 0,
                last_seq: FxHashMap::default(),
                rates: FxHashMap::default(),
                stats: StationStats { cw, ..StationStats::default() },
                draws: 0,
                monitor: false,
            })
            .collect();
        let noise_w = crate::watts(cfg.noise_dbm);
        let t = &cfg.timing;
        let rate_cost_ns = t
            .modes
            .iter()
            .map(|&m| {
                t.data_ns(m, 1200)
                    + t.sifs_ns
                    + t.ack_ns()
                    + t.difs_ns
                    + t.slot_ns * u64::from(cw) / 2
            })
            .collect();
        Dcf {
            rate_cost_ns,
            cfg,
            pairs: FxHashMap::default(),
            pos: positions.to_vec(),
            power: Default::default(),
            walls: None,
            noise_w,
            sta,
            events: BinaryHeap::new(),
            seq: 0,
            air: Vec::new(),
            lost: Vec::new(),
            sent_heard: Vec::new(),
            next_tx: 0,
            now_ns: 0,
        }
    }

    /// The rate (index) station `s`'s rate control holds best for frames to `dst` (a
    /// Minstrel sample or a retry may go at another), once it has sent to it.
    pub fn rate(&self, s: u32, dst: Option<u32>) -> Option<usize> {
        self.sta.get(s as usize)?.rates.get(&dst).map(|r| r.mode)
    }

    pub fn config(&self) -> &DcfConfig {
        &self.cfg
    }

    pub fn stats(&self, s: u32) -> StationStats {
        self.sta[s as usize].stats
    }

    /// Slots left of station `s`'s backoff, when one is running (frozen or counting).
    pub fn backoff(&self, s: u32) -> Option<u64> {
        self.sta[s as usize].backoff
    }

    /// Delivery counters of every pair that has seen a data frame.
    pub fn pairs(&self) -> impl Iterator<Item = ((u32, u32), crate::PairCounters)> + '_ {
        self.pairs.iter().map(|(k, v)| (*k, *v))
    }

    pub fn positions(&self) -> &[Pos] {
        &self.pos
    }

    /// The stations a frame from `s` reaches above the preamble threshold now, with the
    /// chance that a 1500-byte frame at its current rate arrives intact alone.
    pub fn neighbours(&self, s: u32) -> Vec<crate::Neighbour> {
        let mode = self.sta[s as usize]
            .rates
            .values()
            .map(|r| r.mode)
            .max()
            .map_or(self.cfg.timing.basic_mode(), |m| self.cfg.timing.modes[m]);
        let noise = self.noise_w;
        (0..self.sta.len() as u32)
            .filter(|&j| j != s)
            .filter_map(|j| {
                let (rx, rx_w) = self.power_at(s, j);
                if rx < self.cfg.cca_pd_dbm {
                    return None;
                }
                let p = phy::success_rate(mode, rx_w / noise, 1500 * 8);
                Some(crate::Neighbour {
                    member: j,
                    distance_m: self.pos[s as usize].distance(self.pos[j as usize]),
                    delivery_probability: p,
                    signal_dbm: Some(self.rx_dbm(j, s)).filter(|x| x.is_finite()),
                })
            })
            .collect()
    }

    /// Frames waiting at station `s`.
    pub fn queued(&self, s: u32) -> usize {
        self.sta[s as usize].queue.len()
    }

    /// Put a city's walls between the stations (received powers computed anew).
    pub fn set_walls(&mut self, walls: Option<crate::city::Walls>) {
        self.walls = walls;
        self.power.borrow_mut().clear();
    }

    /// Move the stations (one position each).
    pub fn set_positions(&mut self, positions: &[Pos]) {
        self.pos.copy_from_slice(positions);
        self.power.get_mut().clear();
    }

    /// Tune station `s`'s radio to `channel`: from now it hears (and is heard on) that
    /// channel only; a frame it was receiving is lost to it, and what it sends next
    /// goes there.
    pub fn set_channel(&mut self, s: u32, channel: u16) {
        let Some(st) = self.sta.get_mut(s as usize) else { return };
        if st.cfg.channel != channel {
            st.cfg.channel = channel;
            self.power.get_mut().retain(|&(a, b), _| a != s && b != s);
        }
    }

    /// When the channel next has something to do, lab ns.
    pub fn next_event_ns(&self) -> Option<u64> {
        self.events.peek().map(|Reverse((t, _, _))| *t)
    }

    fn at(&mut self, t: u64, e: Ev) {
        self.seq += 1;
        self.events.push(Reverse((t, self.seq, e)));
    }

    /// A frame of `bytes` of payload from station `s` at `now_ns`, to `dst` (`None`: a
    /// broadcast). False when `s` is down or its queue is full.
    pub fn offer(&mut self, now_ns: u64, s: u32, id: u64, bytes: u64, dst: Option<u32>) -> bool {
        // (A channel decided ahead of its driver's clock takes the frame when it is.)
        let now_ns = self.now_ns.max(now_ns);
        self.now_ns = now_ns;
        let st = &mut self.sta[s as usize];
        if !st.up || st.queue.len() >= self.cfg.queue_frames {
            return false;
        }
        st.seq = st.seq.wrapping_add(1) & 0x0fff;
        let f =
            Frame { id, dst, bytes, seq: st.seq, short_retries: 0, long_retries: 0, tried: false };
        st.queue.push_back(f);
        if st.backoff.is_none() && st.wait == Wait::None && !st.transmitting {
            // Idle for DIFS already: it may go at once (a backoff of 0); else it draws one.
            let idle = !self.busy(s, now_ns);
            let ifs = self.ifs(s);
            let st = &mut self.sta[s as usize];
            if idle && now_ns >= st.idle_since_ns + ifs {
                st.backoff = Some(0);
                st.backoff_from_ns = now_ns;
            } else {
                self.new_backoff(s, now_ns);
            }
        }
        self.contend(s, now_ns);
        true
    }

    fn busy(&self, s: u32, t: u64) -> bool {
        let st = &self.sta[s as usize];
        st.transmitting || !st.sensed.is_empty() || st.nav_until_ns > t
    }

    fn ifs(&self, s: u32) -> u64 {
        match self.sta[s as usize].eifs {
            true => self.cfg.timing.eifs_ns,
            false => self.cfg.timing.difs_ns,
        }
    }

    fn new_backoff(&mut self, s: u32, from_ns: u64) {
        let seed = self.cfg.seed;
        let st = &mut self.sta[s as usize];
        st.draws += 1;
        let slots = (draw(seed, u64::from(s), u64::MAX, st.draws) * f64::from(st.cw + 1)) as u64;
        st.backoff = Some(slots.min(u64::from(st.cw)));
        st.backoff_from_ns = from_ns;
    }

    /// Schedule station `s`'s access, if it is contending and its medium is idle.
    fn contend(&mut self, s: u32, now_ns: u64) {
        if self.busy(s, now_ns) || self.sta[s as usize].wait != Wait::None {
            return;
        }
        if self.sta[s as usize].backoff.is_none() {
            if self.sta[s as usize].queue.is_empty() {
                return;
            }
            // A frame came while it was busy (answering, say): it backs off.
            self.new_backoff(s, now_ns);
        }
        let ifs = self.ifs(s);
        let slot = self.cfg.timing.slot_ns;
        let st = &mut self.sta[s as usize];
        let Some(slots) = st.backoff else { return };
        if st.queue.is_empty() && slots == 0 {
            // A post-backoff done with nothing to send.
            st.backoff = None;
            return;
        }
        st.gen += 1;
        let start = (st.idle_since_ns + ifs).max(st.backoff_from_ns);
        let (g, at) = (st.gen, start + slots * slot);
        self.at(at.max(now_ns), Ev::Access(s, g));
    }

    /// Station `s`'s medium went busy at `t`: its backoff freezes (whole idle slots
    /// since it started counting are spent).
    fn freeze(&mut self, s: u32, t: u64) {
        let ifs = self.ifs(s);
        let slot = self.cfg.timing.slot_ns;
        let st = &mut self.sta[s as usize];
        st.gen += 1;
        if let Some(b) = st.backoff {
            let start = (st.idle_since_ns + ifs).max(st.backoff_from_ns);
            let spent = if t > start { (t - start) / slot } else { 0 };
            st.backoff = Some(b - spent.min(b));
            st.backoff_from_ns = t;
        }
    }

    /// Carry out everything due by `now_ns`; what happened goes to `out`.
    pub fn advance(&mut self, now_ns: u64, out: &mut Vec<Outcome>) {
        while let Some(&Reverse((t, _, e))) = self.events.peek() {
            if t > now_ns {
                break;
            }
            self.events.pop();
            self.now_ns = t;
            match e {
                Ev::Access(s, g) => self.access(s, g, t),
                Ev::Reach(n, s) => self.reach(n, s, t),
                Ev::Leave(n, s) => self.leave(n, s, t, out),
                Ev::End(n) => self.end(n, t),
                Ev::Timeout(s, g) => self.timeout(s, g, t, out),
                Ev::Answer(s, to, nav, k) => self.answer(s, to, nav, k, t),
                Ev::NavEnd(s) => self.became_idle(s, t),
            }
            for (id, r, at, reason) in self.lost.drain(..) {
                out.push(Outcome::Lost { id, receiver: r, at_ns: at, reason });
            }
            out.extend(self.sent_heard.drain(..).map(|h| Outcome::Heard(Box::new(h))));
        }
        self.now_ns = self.now_ns.max(now_ns);
    }

    fn access(&mut self, s: u32, g: u64, t: u64) {
        let st = &self.sta[s as usize];
        if st.gen != g || !st.up || self.busy(s, t) {
            return;
        }
        let Some(&f) = st.queue.front() else {
            self.sta[s as usize].backoff = None;
            return;
        };
        self.sta[s as usize].backoff = None;
        let rts = f.dst.is_some() && self.cfg.rts_threshold_bytes.is_some_and(|thr| f.bytes > thr);
        let mode = self.data_mode(s, &f, t);
        let timing = &self.cfg.timing;
        let data_ns = timing.data_ns(mode, f.bytes);
        let bits = timing.data_header_bits + f.bytes * 8;
        if rts {
            let nav = 3 * timing.sifs_ns + timing.cts_ns() + data_ns + timing.ack_ns();
            let (basic, rts_bits) = (timing.basic_mode(), timing.rts_bits);
            self.sta[s as usize].stats.tx_rts += 1;
            self.transmit(s, Kind::Rts, basic, rts_bits, f.dst, nav, Some(f), t);
        } else {
            let nav = if f.dst.is_some() { timing.sifs_ns + timing.ack_ns() } else { 0 };
            let mode = if f.dst.is_some() { mode } else { timing.basic_mode() };
            self.send_data(s, f, mode, bits, nav, t);
        }
    }

    /// The rate of this attempt at frame `f` (its rate control's choice, kept as the
    /// station's `mode` until the attempt ends).
    fn data_mode(&mut self, s: u32, f: &Frame, t: u64) -> Mode {
        let (control, modes) = (self.cfg.rate, self.cfg.timing.modes.len());
        let seed = mix(self.cfg.seed ^ (u64::from(s) << 32) ^ u64::from(f.dst.unwrap_or(u32::MAX)));
        let st = &mut self.sta[s as usize];
        let r = st.rates.entry(f.dst).or_insert_with(|| RateState::new(control, modes, seed));
        let i = r.pick(f.short_retries + f.long_retries, t, &self.rate_cost_ns);
        st.stats.mode = i;
        st.stats.rate_bps = self.cfg.timing.modes[i].rate_bps;
        self.cfg.timing.modes[i]
    }

    fn send_data(&mut self, s: u32, f: Frame, mode: Mode, bits: u64, nav: u64, t: u64) {
        let st = &mut self.sta[s as usize];
        st.stats.tx_data += 1;
        st.stats.tx_retries += u64::from(f.tried);
        if let Some(q) = st.queue.front_mut() {
            q.tried = true;
        }
        self.transmit(s, Kind::Data, mode, bits, f.dst, nav, Some(f), t);
    }

    #[allow(clippy::too_many_arguments)] // (a frame's fields, each given once)
    fn transmit(
        &mut self,
        s: u32,
        kind: Kind,
        mode: Mode,
        bits: u64,
        dst: Option<u32>,
        nav_ns: u64,
        frame: Option<Frame>,
        t: u64,
    ) {
        let timing = &self.cfg.timing;
        let dur = timing.airtime_bits_ns(mode, bits);
        let n = self.next_tx;
        self.next_tx += 1;
        let channel = self.sta[s as usize].cfg.channel;
        let retry = frame.is_some_and(|f| f.tried) && kind == Kind::Data;
        let tx = Tx {
            n,
            sender: s,
            kind,
            start_ns: t,
            end_ns: t + dur.max(1),
            mode,
            bits,
            dst,
            nav_ns,
            frame,
            retry,
        };
        self.air.push(tx);
        if self.sta[s as usize].monitor {
            let h = self.heard(s, &tx, tx.end_ns, None);
            self.sent_heard.push(h);
        }
        // The sender: busy while it sends; a lock on anything else is lost.
        self.freeze(s, t);
        let st = &mut self.sta[s as usize];
        st.transmitting = true;
        st.locked = None;
        self.at(tx.end_ns, Ev::End(n));
        // (A station that can neither detect nor sense it has nothing to do with it: its
        // power still counts as interference, from the list of what is on the air.)
        let floor = self.cfg.cca_pd_dbm.min(self.cfg.cca_ed_dbm);
        for j in 0..self.sta.len() as u32 {
            if j != s && self.sta[j as usize].cfg.channel == channel && self.rx_dbm(s, j) >= floor {
                let p = self.prop_ns(s, j);
                self.at(t + p, Ev::Reach(n, j));
            }
        }
    }

    /// Capture station `s`'s radio (`on`) or stop: while on, every frame it decodes or
    /// sends is an [`Outcome::Heard`].
    pub fn set_monitor(&mut self, s: u32, on: bool) {
        if let Some(st) = self.sta.get_mut(s as usize) {
            st.monitor = on;
        }
    }

    /// An ACK (`k` 0), a CTS (1), or the data frame after a CTS (2), from station `s` in
    /// answer to transmission `n`.
    fn answer(&mut self, s: u32, to: u32, nav: u64, k: u8, t: u64) {
        if !self.sta[s as usize].up || self.sta[s as usize].transmitting {
            return;
        }
        let timing = &self.cfg.timing;
        let basic = timing.basic_mode();
        match k {
            0 => self.transmit(s, Kind::Ack, basic, timing.ack_bits, Some(to), 0, None, t),
            1 => {
                let nav = nav.saturating_sub(timing.sifs_ns + timing.cts_ns());
                self.transmit(s, Kind::Cts, basic, timing.cts_bits, Some(to), nav, None, t)
            }
            _ => {
                let st = &self.sta[s as usize];
                let Some(&f) = st.queue.front() else { return };
                // (The rate chosen when the RTS went: its Duration counted on it.)
                let mode = self.cfg.timing.modes[st.stats.mode];
                let timing = &self.cfg.timing;
                let bits = timing.data_header_bits + f.bytes * 8;
                let nav = timing.sifs_ns + timing.ack_ns();
                self.send_data(s, f, mode, bits, nav, t);
            }
        }
    }

    fn end(&mut self, n: u64, t: u64) {
        let Some(&tx) = self.tx(n) else { return };
        let s = tx.sender;
        self.sta[s as usize].transmitting = false;
        let timeout = self.cfg.ack_timeout_ns.unwrap_or(
            self.cfg.timing.sifs_ns + self.cfg.timing.slot_ns + self.cfg.timing.preamble_ns,
        );
        match (tx.kind, tx.dst) {
            (Kind::Data, Some(_)) | (Kind::Rts, _) => {
                let st = &mut self.sta[s as usize];
                st.wait = if tx.kind == Kind::Data { Wait::Ack } else { Wait::Cts };
                st.wait_gen += 1;
                let g = st.wait_gen;
                self.at(t + timeout, Ev::Timeout(s, g));
            }
            (Kind::Data, None) => {
                // Done once every station it reaches has had it.
                let far = (0..self.sta.len() as u32)
                    .filter(|&j| j != s)
                    .map(|j| self.prop_ns(s, j))
                    .max()
                    .unwrap_or(0);
                let st = &mut self.sta[s as usize];
                st.wait = Wait::Sent;
                st.wait_gen += 1;
                let g = st.wait_gen;
                self.at(t + far + 1, Ev::Timeout(s, g));
            }
            _ => {}
        }
        // Forget transmissions nothing on the air overlaps any more, once every
        // station has had them (a propagation delay is microseconds).
        let oldest = self.air.iter().filter(|x| x.end_ns > t).map(|x| x.start_ns).min();
        self.air.retain(|x| x.end_ns + KEEP_NS > t || oldest.is_some_and(|o| x.end_ns > o));
        if !self.busy(s, t) {
            self.became_idle(s, t);
        }
    }

    fn timeout(&mut self, s: u32, g: u64, t: u64, out: &mut Vec<Outcome>) {
        let st = &self.sta[s as usize];
        if st.wait_gen != g || st.wait == Wait::None {
            return;
        }
        if st.wait == Wait::Sent {
            self.sta[s as usize].wait = Wait::None;
            return self.finish(s, true, t, out);
        }
        // An answer already on its way in: wait for it.
        if let Some(n) = st.locked {
            if let Some(&u) = self.tx(n) {
                if u.dst == Some(s) && matches!(u.kind, Kind::Ack | Kind::Cts) {
                    return;
                }
            }
        }
        self.sta[s as usize].wait = Wait::None;
        self.finish(s, false, t, out);
    }

    /// The end of an attempt at the head frame of station `s`: acknowledged (`ok`, or a
    /// broadcast sent) or failed. A new backoff follows either way.
    fn finish(&mut self, s: u32, ok: bool, t: u64, out: &mut Vec<Outcome>) {
        let (control, modes) = (self.cfg.rate, self.cfg.timing.modes.len());
        let (cw_min, cw_max) = (self.cfg.timing.cw_min, self.cfg.timing.cw_max);
        let threshold = self.cfg.rts_threshold_bytes;
        let (short_limit, long_limit) = (self.cfg.short_retry_limit, self.cfg.long_retry_limit);
        let st = &mut self.sta[s as usize];
        let Some(f) = st.queue.front_mut() else { return };
        let unicast = f.dst.is_some();
        if unicast {
            if let Some(r) = st.rates.get_mut(&f.dst) {
                r.report(control, modes, st.stats.mode, ok);
            }
        }
        let mut done = ok || !unicast;
        if ok {
            st.cw = cw_min;
            if unicast {
                st.stats.acked += 1;
            }
        } else {
            let long = threshold.is_some_and(|thr| f.bytes > thr);
            let (count, limit) = match long {
                true => (&mut f.long_retries, long_limit),
                false => (&mut f.short_retries, short_limit),
            };
            *count += 1;
            if limit.is_some_and(|l| *count >= l) {
                st.stats.dropped_retry_limit += 1;
                let (id, dst) = (f.id, f.dst.unwrap_or(u32::MAX));
                out.push(Outcome::Dropped {
                    id,
                    receiver: dst,
                    at_ns: t,
                    reason: LossReason::RetryLimit,
                });
                st.cw = cw_min;
                done = true;
            } else {
                st.cw = (2 * (st.cw + 1) - 1).min(cw_max);
            }
        }
        if done {
            let f = st.queue.pop_front().expect("the head frame");
            out.push(Outcome::Done { id: f.id });
        }
        st.stats.cw = st.cw;
        self.new_backoff(s, t);
        self.contend(s, t);
    }

    fn became_idle(&mut self, s: u32, t: u64) {
        if self.busy(s, t) {
            return;
        }
        self.sta[s as usize].idle_since_ns = t;
        self.contend(s, t);
    }

    /// Switch a station's radio on or off. Off, it neither sends nor receives; its
    /// queue is dropped (each frame's `Done` goes to `out`).
    pub fn set_up(&mut self, s: u32, up: bool, out: &mut Vec<Outcome>) {
        let st = &mut self.sta[s as usize];
        st.up = up;
        if !up {
            st.gen += 1;
            st.wait_gen += 1;
            st.wait = Wait::None;
            st.backoff = None;
            st.locked = None;
            for f in st.queue.drain(..) {
                out.push(Outcome::Done { id: f.id });
            }
        }
    }
}
