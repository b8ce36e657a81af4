//! Counters the data path keeps per link direction and per segment, shared with the
//! threads that read statistics (atomics: the data path never waits for a reader).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

/// Upper bounds (ns) of the buckets of [`DirStats::delay_hist`]: 1-2-5 steps from 1 µs
/// to 10 s; a last bucket takes everything longer.
pub const DELAY_BUCKETS_NS: [u64; 22] = [
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
    200_000_000,
    500_000_000,
    1_000_000_000,
    2_000_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// The histogram bucket of a delay: the index of the first of [`DELAY_BUCKETS_NS`] not
/// below it (one past the end when longer than all).
pub fn delay_bucket(ns: u64) -> usize {
    DELAY_BUCKETS_NS.iter().position(|&b| ns <= b).unwrap_or(DELAY_BUCKETS_NS.len())
}

/// Upper bound (ns) of the bucket of a [`DELAY_BUCKETS_NS`] histogram that holds its `q`
/// quantile (0 < q ≤ 1); `u64::MAX` for the last, open bucket; `None` when it is empty.
pub fn bucket_quantile_ns(hist: &[u64], q: f64) -> Option<u64> {
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return None;
    }
    let want = ((total as f64 * q).ceil() as u64).max(1);
    let mut acc = 0;
    for (i, &n) in hist.iter().enumerate() {
        acc += n;
        if acc >= want {
            return Some(DELAY_BUCKETS_NS.get(i).copied().unwrap_or(u64::MAX));
        }
    }
    Some(u64::MAX)
}

/// Counters of one link direction, in wire frames and wire bytes.
#[derive(Debug, Default)]
pub struct DirCounters {
    pub rx_frames: AtomicU64,
    pub rx_bytes: AtomicU64,
    pub tx_frames: AtomicU64,
    pub tx_bytes: AtomicU64,
    pub drop_loss: AtomicU64,
    pub drop_queue: AtomicU64,
    pub drop_down: AtomicU64,
    pub drop_mtu: AtomicU64,
    pub duplicated: AtomicU64,
    pub corrupted: AtomicU64,
    /// Frames the far TAP device refused.
    pub write_errors: AtomicU64,
    /// Frames and bytes waiting for the serializer, as of the last frame offered.
    pub queue_frames: AtomicU64,
    pub queue_bytes: AtomicU64,
    /// The most frames ever waiting.
    pub queue_frames_max: AtomicU64,
    /// How long accepted frames were held (queue + serialization + delay + jitter), by
    /// bucket of [`DELAY_BUCKETS_NS`].
    pub delay_hist: [AtomicU64; DELAY_BUCKETS_NS.len() + 1],
    /// Fidelity: how late frames were written compared with their scheduled time (the
    /// engine's own lateness, not emulated delay), by bucket of [`DELAY_BUCKETS_NS`];
    /// the first bucket also holds frames on time.
    pub late_hist: [AtomicU64; DELAY_BUCKETS_NS.len() + 1],
    /// The latest any frame was written, ns.
    pub late_max_ns: AtomicU64,
    /// The direction goes by the kernel now (the fast path), not through the engine.
    pub kernel_path: AtomicBool,
    /// ... through the kernel's token bucket (a rate given to the kernel's shaper).
    pub kernel_shaper: AtomicBool,
    /// Toward another machine, on a kernel tunnel that carries its frames in pieces:
    /// lent to the engines for bulk TCP now ([`crate::LEND_IDLE_NS`]).
    pub tunnel_lent: AtomicBool,
    /// Toward a side on another machine: the underlay's one-way delay as measured (half
    /// the shortest probed round trip), taken off the direction's delay, ns.
    pub transit_ns: AtomicU64,
    /// Toward a side on another machine: the largest UDP payload the underlay's path was
    /// found to carry (probed), bytes.
    pub path_payload: AtomicU64,
    /// Frames a qos meter dropped (its colour's action).
    pub drop_police: AtomicU64,
    /// From a side on another machine: frames the underlay lost or reordered past use
    /// (tunnel sequence gaps, frames missing pieces, late ones) — not the model's loss.
    pub underlay_lost: AtomicU64,
    /// From a side on another machine: datagrams from its address whose tag did not
    /// verify, or replays (`tunnel::auth`): dropped unread.
    pub underlay_forged: AtomicU64,
    /// Fidelity: how long the engine's probes waited in the port's input queue (the
    /// TAP device's) before the engine read them, beyond the least delay the direction
    /// gives (frames are timed from their arrival, so their delay absorbs that much of
    /// the wait) — what makes frames late unseen by `late_hist` — by bucket of
    /// [`DELAY_BUCKETS_NS`]; and the longest wait (all of it).
    pub input_wait_hist: [AtomicU64; DELAY_BUCKETS_NS.len() + 1],
    pub input_wait_max_ns: AtomicU64,
    /// Fidelity, from a side on another machine (whose engine carried the direction
    /// out and counted its frames): how long frames waited here from their arrival (the
    /// kernel's time of the datagram) until the engine wrote them to the node — this
    /// engine's own lateness, which the far one cannot see — by bucket of
    /// [`DELAY_BUCKETS_NS`]; and the longest wait.
    pub arrival_wait_hist: [AtomicU64; DELAY_BUCKETS_NS.len() + 1],
    pub arrival_wait_max_ns: AtomicU64,
    /// The serializer's pace (`vemu_link::Pace`), as of the last frame offered: time
    /// sending, and time idle between frames no more than `PACE_GAP_NS` apart, ns.
    pub serializer_busy_ns: AtomicU64,
    pub serializer_gap_ns: AtomicU64,
    /// With `qos`: per-class counters (replaced when the classes change; the data path
    /// takes the lock to read only when a frame crosses a qos stage).
    pub classes: RwLock<Arc<[ClassCounters]>>,
}

/// Counters of one qos class of a direction, in wire frames and bytes.
#[derive(Debug, Default)]
pub struct ClassCounters {
    pub name: String,
    /// Frames that reached the class (before its meter, RED and limit).
    pub rx_frames: AtomicU64,
    pub rx_bytes: AtomicU64,
    /// Frames that left its queue for the wire.
    pub tx_frames: AtomicU64,
    pub tx_bytes: AtomicU64,
    pub drop_police: AtomicU64,
    /// Dropped early by RED / WRED.
    pub drop_red: AtomicU64,
    /// Dropped because the class's queue was full.
    pub drop_queue: AtomicU64,
    /// Frames whose DSCP the meter's action or the class re-marked.
    pub remarked: AtomicU64,
    /// Frames waiting now (as of the last frame offered or sent).
    pub queue_frames: AtomicU64,
    /// Time frames waited for the serializer, by bucket of [`DELAY_BUCKETS_NS`].
    pub wait_hist: [AtomicU64; DELAY_BUCKETS_NS.len() + 1],
}

/// A snapshot of [`ClassCounters`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassStats {
    pub name: String,
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    pub drop_police: u64,
    pub drop_red: u64,
    pub drop_queue: u64,
    pub remarked: u64,
    pub queue_frames: u64,
    /// Frames by time waited for the serializer, per bucket of [`DELAY_BUCKETS_NS`].
    pub wait_hist: Vec<u64>,
}

impl ClassCounters {
    pub fn snapshot(&self) -> ClassStats {
        ClassStats {
            name: self.name.clone(),
            rx_frames: self.rx_frames.load(Relaxed),
            rx_bytes: self.rx_bytes.load(Relaxed),
            tx_frames: self.tx_frames.load(Relaxed),
            tx_bytes: self.tx_bytes.load(Relaxed),
            drop_police: self.drop_police.load(Relaxed),
            drop_red: self.drop_red.load(Relaxed),
            drop_queue: self.drop_queue.load(Relaxed),
            remarked: self.remarked.load(Relaxed),
            queue_frames: self.queue_frames.load(Relaxed),
            wait_hist: self.wait_hist.iter().map(|b| b.load(Relaxed)).collect(),
        }
    }
}

/// A snapshot of [`DirCounters`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirStats {
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    pub drop_loss: u64,
    pub drop_queue: u64,
    pub drop_down: u64,
    pub drop_mtu: u64,
    pub duplicated: u64,
    pub corrupted: u64,
    pub write_errors: u64,
    #[serde(default)]
    pub queue_frames: u64,
    #[serde(default)]
    pub queue_bytes: u64,
    #[serde(default)]
    pub queue_frames_max: u64,
    /// Frames by time held, per bucket of [`DELAY_BUCKETS_NS`] (the last: longer).
    #[serde(default)]
    pub delay_hist: Vec<u64>,
    /// Frames by how late the engine wrote them, per bucket of [`DELAY_BUCKETS_NS`].
    #[serde(default)]
    pub late_hist: Vec<u64>,
    #[serde(default)]
    pub late_max_ns: u64,
    /// Carried by the kernel now (no emulation needed), not by the engine.
    #[serde(default)]
    pub kernel_path: bool,
    /// ... and shaped there by the kernel's token bucket (`shaper: kernel`).
    #[serde(default)]
    pub kernel_shaper: bool,
    /// Toward another machine: the kernel's tunnel, which carries this direction's
    /// frames in pieces, lent it to the engines' tunnels for bulk TCP, until it is idle.
    #[serde(default)]
    pub tunnel_lent: bool,
    /// Toward another machine: the underlay's measured one-way delay, ns (0: none).
    #[serde(default)]
    pub transit_ns: u64,
    /// Toward another machine: the largest tunnel datagram payload in use, bytes (what
    /// the underlay's path was found to carry; frames longer are cut in pieces).
    #[serde(default)]
    pub path_payload_bytes: u64,
    /// Frames a qos meter dropped.
    #[serde(default)]
    pub drop_police: u64,
    /// From another machine: frames the underlay lost (not the model's loss).
    #[serde(default)]
    pub underlay_lost: u64,
    /// From another machine: datagrams that were forged, damaged or replayed, dropped.
    #[serde(default)]
    pub underlay_forged: u64,
    /// Probes of the direction's input queue, by how long they waited there before the
    /// engine read them, per bucket of [`DELAY_BUCKETS_NS`] (empty: never probed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub input_wait_hist: Vec<u64>,
    #[serde(default)]
    pub input_wait_max_ns: u64,
    /// From another machine: frames by how long they waited here from their arrival
    /// until the engine wrote them to the node, per bucket of [`DELAY_BUCKETS_NS`]
    /// (empty: none came that way).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arrival_wait_hist: Vec<u64>,
    #[serde(default)]
    pub arrival_wait_max_ns: u64,
    /// The serializer's pace: time sending, and time idle between frames no more than
    /// `vemu_link::PACE_GAP_NS` apart (a sender that fell behind), ns.
    #[serde(default)]
    pub serializer_busy_ns: u64,
    #[serde(default)]
    pub serializer_gap_ns: u64,
    /// With `qos`: each class's counters, in the order of the classes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassStats>,
}

/// `$a.f += $b.f` for each field `f` named.
/// Add histogram `b`'s counts to `a`'s (made as long as `b`).
fn add_hist(a: &mut Vec<u64>, b: &[u64]) {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
}

macro_rules! add_fields {
    ($a:ident, $b:ident, $($f:ident),+) => {
        $($a.$f += $b.$f;)+
    };
}

impl DirStats {
    /// Frames the emulation dropped in this direction, whatever the reason (loss, queue
    /// with RED, link down, MTU, policer).
    pub fn dropped(&self) -> u64 {
        self.drop_loss + self.drop_queue + self.drop_down + self.drop_mtu + self.drop_police
    }

    /// Add another machine's counts of the same direction (a direction of a link
    /// between machines is counted in part by each: see `core::Core::handle_delivered`).
    pub fn merge(&mut self, o: &DirStats) {
        let add = add_hist;
        add_fields!(
            self, o, rx_frames, rx_bytes, tx_frames, tx_bytes, drop_loss, drop_queue, drop_down,
            drop_mtu
        );
        add_fields!(
            self,
            o,
            duplicated,
            corrupted,
            write_errors,
            queue_frames,
            queue_bytes,
            drop_police,
            underlay_lost,
            underlay_forged,
            serializer_busy_ns,
            serializer_gap_ns
        );
        self.queue_frames_max = self.queue_frames_max.max(o.queue_frames_max);
        add(&mut self.delay_hist, &o.delay_hist);
        add(&mut self.late_hist, &o.late_hist);
        self.late_max_ns = self.late_max_ns.max(o.late_max_ns);
        self.kernel_path |= o.kernel_path;
        self.kernel_shaper |= o.kernel_shaper;
        self.tunnel_lent |= o.tunnel_lent;
        self.transit_ns = self.transit_ns.max(o.transit_ns);
        self.path_payload_bytes = self.path_payload_bytes.max(o.path_payload_bytes);
        add(&mut self.input_wait_hist, &o.input_wait_hist);
        self.input_wait_max_ns = self.input_wait_max_ns.max(o.input_wait_max_ns);
        add(&mut self.arrival_wait_hist, &o.arrival_wait_hist);
        self.arrival_wait_max_ns = self.arrival_wait_max_ns.max(o.arrival_wait_max_ns);
        // One machine carries out a direction's qos stage; the other has no classes.
        if self.classes.is_empty() {
            self.classes = o.classes.clone();
        }
    }
}

/// A histogram's counts, or none if all are 0.
fn nonzero(h: &[AtomicU64]) -> Vec<u64> {
    let h: Vec<u64> = h.iter().map(|b| b.load(Relaxed)).collect();
    if h.iter().all(|&n| n == 0) {
        Vec::new()
    } else {
        h
    }
}

impl DirCounters {
    pub fn snapshot(&self) -> DirStats {
        DirStats {
            rx_frames: self.rx_frames.load(Relaxed),
            rx_bytes: self.rx_bytes.load(Relaxed),
            tx_frames: self.tx_frames.load(Relaxed),
            tx_bytes: self.tx_bytes.load(Relaxed),
            drop_loss: self.drop_loss.load(Relaxed),
            drop_queue: self.drop_queue.load(Relaxed),
            drop_down: self.drop_down.load(Relaxed),
            drop_mtu: self.drop_mtu.load(Relaxed),
            duplicated: self.duplicated.load(Relaxed),
            corrupted: self.corrupted.load(Relaxed),
            write_errors: self.write_errors.load(Relaxed),
            queue_frames: self.queue_frames.load(Relaxed),
            queue_bytes: self.queue_bytes.load(Relaxed),
            queue_frames_max: self.queue_frames_max.load(Relaxed),
            delay_hist: self.delay_hist.iter().map(|b| b.load(Relaxed)).collect(),
            late_hist: self.late_hist.iter().map(|b| b.load(Relaxed)).collect(),
            late_max_ns: self.late_max_ns.load(Relaxed),
            kernel_path: self.kernel_path.load(Relaxed),
            kernel_shaper: self.kernel_shaper.load(Relaxed),
            tunnel_lent: self.tunnel_lent.load(Relaxed),
            transit_ns: self.transit_ns.load(Relaxed),
            path_payload_bytes: self.path_payload.load(Relaxed),
            drop_police: self.drop_police.load(Relaxed),
            underlay_lost: self.underlay_lost.load(Relaxed),
            underlay_forged: self.underlay_forged.load(Relaxed),
            input_wait_hist: nonzero(&self.input_wait_hist),
            input_wait_max_ns: self.input_wait_max_ns.load(Relaxed),
            arrival_wait_hist: nonzero(&self.arrival_wait_hist),
            arrival_wait_max_ns: self.arrival_wait_max_ns.load(Relaxed),
            serializer_busy_ns: self.serializer_busy_ns.load(Relaxed),
            serializer_gap_ns: self.serializer_gap_ns.load(Relaxed),
            classes: self
                .classes
                .read()
                .map(|c| c.iter().map(ClassCounters::snapshot).collect())
                .unwrap_or_default(),
        }
    }
}

/// Counters of a segment's switch, in wire frames.
#[derive(Debug, Default)]
pub struct SegCounters {
    /// Frames sent to one learned port.
    pub unicast: AtomicU64,
    /// Frames flooded to every other port of their VLAN (broadcast, multicast, unknown).
    pub flooded: AtomicU64,
    /// Frames whose destination is on their ingress port. Wireless segments: receptions
    /// held back because the receiver did not join the frame's group.
    pub filtered: AtomicU64,
    /// Frames dropped because the segment's aggregate capacity queue was full (on a
    /// wireless segment: the sender's radio queue).
    pub drop_capacity: AtomicU64,
    /// Wireless segments: frames put on the air, and those of them that routing
    /// protocols sent (see [`is_routing`](crate::is_routing)).
    pub air_frames: AtomicU64,
    pub routing_frames: AtomicU64,
    /// LAN segments: addresses the switch has learned now, and new ones it could not
    /// learn because its table was full (their frames flood).
    pub learned: AtomicU64,
    pub learn_refused: AtomicU64,
    /// LAN segments with snooping: frames sent to their group's members and router
    /// ports only (maybe none), and the groups with members now (wireless segments: the
    /// memberships, over all members).
    pub multicast: AtomicU64,
    pub groups: AtomicU64,
    /// Group joins the switch could not record (its membership table was full).
    pub groups_refused: AtomicU64,
    /// 802.11 channels: how late the engine decided the medium, per decision — the
    /// time it came to it after the earliest slot then due (a slot decided late on the
    /// engine clock), by bucket of [`DELAY_BUCKETS_NS`]; and the latest.
    pub decide_late_hist: [AtomicU64; DELAY_BUCKETS_NS.len() + 1],
    pub decide_late_max_ns: AtomicU64,
}

/// A snapshot of [`SegCounters`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegStats {
    pub unicast: u64,
    pub flooded: u64,
    pub filtered: u64,
    pub drop_capacity: u64,
    #[serde(default)]
    pub air_frames: u64,
    #[serde(default)]
    pub routing_frames: u64,
    #[serde(default)]
    pub learned: u64,
    #[serde(default)]
    pub learn_refused: u64,
    #[serde(default)]
    pub multicast: u64,
    #[serde(default)]
    pub groups: u64,
    #[serde(default)]
    pub groups_refused: u64,
    /// 802.11 channels: decisions by how late they were taken ([`SegCounters`]).
    #[serde(default)]
    pub decide_late_hist: Vec<u64>,
    #[serde(default)]
    pub decide_late_max_ns: u64,
}

impl SegStats {
    /// Add another machine's counts of the same segment (one machine holds a segment:
    /// the others count nothing).
    pub fn merge(&mut self, o: &SegStats) {
        add_fields!(self, o, unicast, flooded, filtered, drop_capacity, air_frames, routing_frames);
        add_fields!(self, o, learned, learn_refused, multicast, groups, groups_refused);
        add_hist(&mut self.decide_late_hist, &o.decide_late_hist);
        self.decide_late_max_ns = self.decide_late_max_ns.max(o.decide_late_max_ns);
    }
}

impl SegCounters {
    pub fn snapshot(&self) -> SegStats {
        SegStats {
            unicast: self.unicast.load(Relaxed),
            flooded: self.flooded.load(Relaxed),
            filtered: self.filtered.load(Relaxed),
            drop_capacity: self.drop_capacity.load(Relaxed),
            air_frames: self.air_frames.load(Relaxed),
            routing_frames: self.routing_frames.load(Relaxed),
            learned: self.learned.load(Relaxed),
            learn_refused: self.learn_refused.load(Relaxed),
            multicast: self.multicast.load(Relaxed),
            groups: self.groups.load(Relaxed),
            groups_refused: self.groups_refused.load(Relaxed),
            decide_late_hist: self.decide_late_hist.iter().map(|a| a.load(Relaxed)).collect(),
            decide_late_max_ns: self.decide_late_max_ns.load(Relaxed),
        }
    }
}
