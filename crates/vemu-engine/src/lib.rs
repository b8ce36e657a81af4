//! vemu's data plane. Each shard is one thread with one epoll set and one timer heap;
//! it owns a share of the links and LAN segments, reads frames from their TAP devices,
//! asks each direction's [`vemu_link::LinkDir`] what to do with them, and writes them
//! to the far TAP at the decided time on the lab clock. On a segment a frame crosses
//! its sender's egress direction, the segment's aggregate capacity, the learning
//! switch ([`vemu_switch::Switch`]) and then each recipient's ingress direction. On a
//! wireless segment the radio channel ([`vemu_radio::medium::Medium`]) takes the
//! switch's place: it decides when each frame is on the air and which members receive
//! it. An idle link or segment costs nothing: no thread, no timer.

pub mod gso;

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use rustc_hash::FxHashMap;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use vemu_link::{DropCause, Impairments, ImpairmentsPatch, LinkDir, Offer};
use vemu_radio::medium::{Medium, MediumConfig, Neighbour, Outcome, PairCounters};
use vemu_radio::Pos;
use vemu_switch::{Forward, PortConfig, Switch};

use gso::{VnetHdr, VNET_HDR_LEN};

/// Largest frame TAP hands over: a 64 KiB super-frame plus headers.
const MAX_FRAME: usize = 65536 + 256;
/// A rate-limited super-frame is split so that no piece occupies the wire longer than
/// this: bursts stay short enough that timing at the far end is as on a real wire.
const MAX_BURST_NS: u64 = 100_000;
/// Frames read from one device before looking at the others and the timers.
const READ_BATCH: usize = 32;
/// The shard sleeps until at least this long before the next delivery time and polls its
/// devices without sleeping for the rest: waking from a sleep takes tens of microseconds
/// on a virtual machine, which would otherwise add to the delay of every hop. The cost
/// is at most this much CPU per timer, and nothing while no frame is in flight.
const SPIN_NS: u64 = 80_000;
/// The margin grows to twice the wake-up lateness the shard observes (smoothed), up to this.
const MAX_SPIN_NS: u64 = 1_000_000;

/// The one lab clock: nanoseconds of CLOCK_MONOTONIC since the lab's epoch.
#[derive(Debug, Clone, Copy)]
pub struct LabClock {
    pub epoch_ns: u64,
}

pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl LabClock {
    pub fn start() -> LabClock {
        LabClock { epoch_ns: monotonic_ns() }
    }
    pub fn now_ns(&self) -> u64 {
        monotonic_ns().saturating_sub(self.epoch_ns)
    }
}

/// A link to emulate: the TAP devices of its two ends and what each direction does.
pub struct LinkSpec {
    /// Frames read here travel `forward` to `b`.
    pub a: OwnedFd,
    pub b: OwnedFd,
    pub forward: Impairments,
    pub reverse: Impairments,
    /// Seeds of the forward and reverse random generators.
    pub seeds: [u64; 2],
}

/// A switched LAN segment to emulate.
pub struct SegmentSpec {
    pub members: Vec<MemberSpec>,
    /// Aggregate capacity of the segment, bits/s: every frame crossing the switch
    /// occupies it for its serialization time.
    pub capacity_bps: Option<u64>,
    /// Learned MAC addresses are forgotten after this long without traffic, ns.
    pub aging_ns: u64,
    /// A radio channel instead of a switch, with the members' first positions.
    pub radio: Option<(MediumConfig, Vec<Pos>)>,
}

/// What a wireless segment's channel looks like now.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RadioSnapshot {
    /// Per member, m.
    pub positions: Vec<Pos>,
    /// Per member: the members its frames may reach, with the chance.
    pub neighbours: Vec<Vec<Neighbour>>,
    /// (sender, receiver, counters) of every pair that has seen a transmission.
    pub pairs: Vec<(u32, u32, PairCounters)>,
}

/// One port of a segment: a member's TAP device.
pub struct MemberSpec {
    pub fd: OwnedFd,
    pub vlan: u16,
    /// Frames the member sends, on their way to the switch.
    pub egress: Impairments,
    /// Frames the switch delivers to the member.
    pub ingress: Impairments,
    /// Seeds of the egress and ingress random generators.
    pub seeds: [u64; 2],
}

/// What a control message or counter query is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// A link; direction 0 = forward (a → b), 1 = reverse.
    Link(usize),
    /// A member port of a segment; direction 0 = egress (member → switch), 1 = ingress.
    Member(usize, usize),
}

/// Direction of a link (0 = forward, 1 = reverse) or of a member port (0 = egress, 1 = ingress).
pub type Dir = usize;

/// Upper bounds (ns) of the buckets of [`DirStats::delay_hist`]: 1-2-5 steps from 1 µs
/// to 10 s; a last bucket takes everything longer.
pub const DELAY_BUCKETS_NS: [u64; 22] = [
    1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000, 2_000_000, 5_000_000, 10_000_000, 20_000_000,
    50_000_000, 100_000_000, 200_000_000, 500_000_000, 1_000_000_000, 2_000_000_000, 5_000_000_000, 10_000_000_000,
];

fn delay_bucket(ns: u64) -> usize {
    DELAY_BUCKETS_NS.iter().position(|&b| ns <= b).unwrap_or(DELAY_BUCKETS_NS.len())
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
        }
    }
}

/// Where a capture records frames arriving at an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum CapturePoint {
    /// As delivered to the interface, after the impairments (what the node receives).
    #[default]
    After,
    /// As they entered the link at the other end, before the impairments (frames the
    /// link then drops are included).
    Before,
}

/// One frame seen by a capture: an Ethernet frame as on the wire.
#[derive(Debug, Clone)]
pub struct Captured {
    /// Lab-clock time, ns.
    pub t_ns: u64,
    /// Which of the capture's interfaces (the index it was given).
    pub iface: u32,
    /// Sent by the node (true) or arriving at it.
    pub outgoing: bool,
    pub frame: Vec<u8>,
}

/// An interface to capture on: a link end (`Target::Link`, side 0 = a, 1 = b) or a
/// segment port (`Target::Member`, side 0).
#[derive(Debug, Clone, Copy)]
pub struct TapSpec {
    pub target: Target,
    pub side: usize,
    pub iface: u32,
    pub point: CapturePoint,
}

/// Counters of a segment's switch, in wire frames.
#[derive(Debug, Default)]
pub struct SegCounters {
    /// Frames sent to one learned port.
    pub unicast: AtomicU64,
    /// Frames flooded to every other port of their VLAN (broadcast, multicast, unknown).
    pub flooded: AtomicU64,
    /// Frames whose destination is on their ingress port.
    pub filtered: AtomicU64,
    /// Frames dropped because the segment's aggregate capacity queue was full (on a
    /// wireless segment: the sender's radio queue).
    pub drop_capacity: AtomicU64,
    /// Wireless segments: frames put on the air, and those of them that routing
    /// protocols sent (see [`is_routing`]).
    pub air_frames: AtomicU64,
    pub routing_frames: AtomicU64,
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
        }
    }
}

struct Tap {
    id: u64,
    port: u32,
    iface: u32,
    point: CapturePoint,
    tx: std::sync::mpsc::SyncSender<Captured>,
}

enum Control {
    /// A tap on the port of a (shard-local) target and side.
    Tap { tap: Tap, target: Target, side: usize },
    Untap(u64),
    Patch { target: Target, dir: Dir, patch: ImpairmentsPatch, done: Sender<Impairments> },
    SetUp { target: Target, up: bool, done: Sender<()> },
    /// New positions of a (shard-local) wireless segment's members.
    Positions { seg: usize, positions: Vec<Pos> },
    Radio { seg: usize, done: Sender<RadioSnapshot> },
    Stop,
}

struct ShardHandle {
    tx: Sender<Control>,
    wake: OwnedFd,
    /// Nanoseconds the shard has spent working (see [`Shard::work_ns`]).
    work_ns: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl ShardHandle {
    fn send(&self, c: Control) {
        let _ = self.tx.send(c);
        let one: u64 = 1;
        // SAFETY: writing 8 bytes to an eventfd.
        unsafe { libc::write(self.wake.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }
}

/// The running data plane of a lab (or of this machine's share of it).
pub struct Engine {
    shards: Vec<ShardHandle>,
    /// For each link: its shard and its index there.
    link_place: Vec<(usize, usize)>,
    /// For each segment: its shard and its index there.
    seg_place: Vec<(usize, usize)>,
    link_counters: Vec<[Arc<DirCounters>; 2]>,
    member_counters: Vec<Vec<[Arc<DirCounters>; 2]>>,
    seg_counters: Vec<Arc<SegCounters>>,
    pub clock: LabClock,
}

fn counter_pair() -> [Arc<DirCounters>; 2] {
    [Arc::new(DirCounters::default()), Arc::new(DirCounters::default())]
}

/// What one shard is given to run.
#[derive(Default)]
struct ShardInit {
    ports: Vec<Port>,
    links: Vec<LinkState>,
    segments: Vec<SegState>,
    counters: Vec<Arc<DirCounters>>,
    /// Indices of the wireless segments.
    radios: Vec<u32>,
}

impl ShardInit {
    fn port(&mut self, fd: OwnedFd, owner: Owner) -> u32 {
        self.ports.push(Port { fd, owner, tapped: false });
        (self.ports.len() - 1) as u32
    }
    fn counter(&mut self, c: &Arc<DirCounters>) -> u32 {
        self.counters.push(c.clone());
        (self.counters.len() - 1) as u32
    }
}

impl Engine {
    /// Start emulating `links` and `segments` on `shards` threads (at least one). Each
    /// link and each segment belongs to one shard; they are spread so that every shard
    /// has about as many devices.
    pub fn start(links: Vec<LinkSpec>, segments: Vec<SegmentSpec>, shards: usize, clock: LabClock) -> Result<Engine> {
        let n = shards.clamp(1, (links.len() + segments.len()).max(1));
        let mut init: Vec<ShardInit> = (0..n).map(|_| ShardInit::default()).collect();
        let lightest = |init: &[ShardInit]| (0..n).min_by_key(|&s| init[s].ports.len()).unwrap();
        let mut link_place = Vec::new();
        let mut link_counters = Vec::new();
        for l in links {
            let s = lightest(&init);
            let sh = &mut init[s];
            let idx = sh.links.len() as u32;
            let c = counter_pair();
            let ports = [sh.port(l.a, Owner::Link { link: idx, side: 0 }), sh.port(l.b, Owner::Link { link: idx, side: 1 })];
            let counters = [sh.counter(&c[0]), sh.counter(&c[1])];
            sh.links.push(LinkState { ports, dirs: [LinkDir::new(l.forward, l.seeds[0]), LinkDir::new(l.reverse, l.seeds[1])], counters });
            link_place.push((s, idx as usize));
            link_counters.push(c);
        }
        let mut seg_place = Vec::new();
        let mut member_counters = Vec::new();
        let mut seg_counters = Vec::new();
        for g in segments {
            let s = lightest(&init);
            let sh = &mut init[s];
            let idx = sh.segments.len() as u32;
            let cfg: Vec<PortConfig> = g.members.iter().map(|m| PortConfig { vlan: m.vlan }).collect();
            let mut members = Vec::new();
            let mut mc = Vec::new();
            for (mi, m) in g.members.into_iter().enumerate() {
                let c = counter_pair();
                let port = sh.port(m.fd, Owner::Member { seg: idx, member: mi as u32 });
                let counters = [sh.counter(&c[0]), sh.counter(&c[1])];
                members.push(MemberState { port, dirs: [LinkDir::new(m.egress, m.seeds[0]), LinkDir::new(m.ingress, m.seeds[1])], counters });
                mc.push(c);
            }
            let capacity = g.capacity_bps.map(|rate| LinkDir::new(Impairments { rate_bps: Some(rate), ..Default::default() }, 0));
            let sc = Arc::new(SegCounters::default());
            let radio = g.radio.map(|(cfg, pos)| {
                Box::new(Channel { medium: Medium::new(cfg, &pos), frames: FxHashMap::default(), next_id: 0, macs: FxHashMap::default(), outcomes: Vec::new() })
            });
            if radio.is_some() {
                sh.radios.push(idx);
            }
            sh.segments.push(SegState { switch: Switch::new(&cfg, g.aging_ns), members, capacity, counters: sc.clone(), targets: Vec::new(), radio });
            seg_place.push((s, idx as usize));
            member_counters.push(mc);
            seg_counters.push(sc);
        }
        let mut handles = Vec::new();
        for (s, work) in init.into_iter().enumerate() {
            // SAFETY: eventfd returns a new descriptor or -1.
            let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
            if efd < 0 {
                return Err(std::io::Error::last_os_error()).context("creating an eventfd");
            }
            // SAFETY: efd is a fresh descriptor we own.
            let wake = unsafe { OwnedFd::from_raw_fd(efd) };
            let (tx, rx) = channel();
            let mut shard = Shard::new(work, rx, wake.as_raw_fd(), clock)?;
            let work_ns = shard.work_ns.clone();
            let thread = std::thread::Builder::new().name(format!("vemu-engine-{s}")).spawn(move || shard.run())?;
            handles.push(ShardHandle { tx, wake, work_ns, thread: Some(thread) });
        }
        Ok(Engine { shards: handles, link_place, seg_place, link_counters, member_counters, seg_counters, clock })
    }

    /// Per shard, nanoseconds spent working since the start (handling frames, timers
    /// and control; not the idle spinning before deadlines). Its growth over a stretch of
    /// wall time is the shard's load: near 1 it cannot take more.
    pub fn work_ns(&self) -> Vec<u64> {
        self.shards.iter().map(|s| s.work_ns.load(Relaxed)).collect()
    }

    pub fn link_count(&self) -> usize {
        self.link_place.len()
    }

    /// The shard that runs `target`, and the target as that shard numbers it.
    fn place(&self, target: Target) -> (usize, Target) {
        match target {
            Target::Link(l) => {
                let (s, i) = self.link_place[l];
                (s, Target::Link(i))
            }
            Target::Member(g, m) => {
                let (s, i) = self.seg_place[g];
                (s, Target::Member(i, m))
            }
        }
    }

    /// Change some impairments of one direction; returns the impairments now in force.
    /// Frames already scheduled keep their delivery times.
    pub fn patch(&self, target: Target, dir: Dir, patch: ImpairmentsPatch) -> Impairments {
        let (s, t) = self.place(target);
        let (done, rx) = channel();
        self.shards[s].send(Control::Patch { target: t, dir, patch, done });
        rx.recv().expect("engine shard stopped")
    }

    /// Take a link or a segment port down (frames offered in either direction are
    /// dropped, and the interfaces lose their carrier) or back up.
    pub fn set_up(&self, target: Target, up: bool) {
        let (s, t) = self.place(target);
        let (done, rx) = channel();
        self.shards[s].send(Control::SetUp { target: t, up, done });
        let _ = rx.recv();
    }

    pub fn stats(&self, target: Target) -> [DirStats; 2] {
        let c = match target {
            Target::Link(l) => &self.link_counters[l],
            Target::Member(g, m) => &self.member_counters[g][m],
        };
        [c[0].snapshot(), c[1].snapshot()]
    }

    /// Move the members of wireless segment `seg` (one position per member, m).
    pub fn set_positions(&self, seg: usize, positions: Vec<Pos>) {
        let (s, i) = self.seg_place[seg];
        self.shards[s].send(Control::Positions { seg: i, positions });
    }

    /// Positions, neighbours and per-pair delivery counters of wireless segment `seg`.
    pub fn radio(&self, seg: usize) -> RadioSnapshot {
        let (s, i) = self.seg_place[seg];
        let (done, rx) = channel();
        self.shards[s].send(Control::Radio { seg: i, done });
        rx.recv().unwrap_or_default()
    }

    pub fn segment_stats(&self, seg: usize) -> SegStats {
        self.seg_counters[seg].snapshot()
    }

    /// Start capturing on interfaces: every frame they send, and every frame arriving at
    /// them (at `point`), goes to `tx` as wire frames with lab-clock times. When `tx`
    /// is full, frames are skipped (the data plane never waits for a capture); when its
    /// receiver is gone, the capture ends by itself.
    pub fn capture(&self, taps: &[TapSpec], tx: std::sync::mpsc::SyncSender<Captured>) -> u64 {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let id = NEXT.fetch_add(1, Relaxed);
        for t in taps {
            let (s, local) = self.place(t.target);
            let tap = Tap { id, port: 0, iface: t.iface, point: t.point, tx: tx.clone() };
            self.shards[s].send(Control::Tap { tap, target: local, side: t.side });
        }
        id
    }

    /// End a capture.
    pub fn stop_capture(&self, id: u64) {
        for s in &self.shards {
            s.send(Control::Untap(id));
        }
    }

    /// Stop every shard and close the TAP devices.
    pub fn stop(mut self) {
        self.stop_shards();
    }

    fn stop_shards(&mut self) {
        for s in &self.shards {
            s.send(Control::Stop);
        }
        for s in &mut self.shards {
            if let Some(t) = s.thread.take() {
                let _ = t.join();
            }
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop_shards();
    }
}

/// Whose device a port is.
#[derive(Debug, Clone, Copy)]
enum Owner {
    Link { link: u32, side: u8 },
    Member { seg: u32, member: u32 },
}

struct Port {
    fd: OwnedFd,
    owner: Owner,
    /// Some capture watches this port.
    tapped: bool,
}

struct LinkState {
    /// Ports of side a and side b.
    ports: [u32; 2],
    dirs: [LinkDir; 2],
    /// Indices into the shard's counters, per direction.
    counters: [u32; 2],
}

struct MemberState {
    port: u32,
    /// Egress (to the switch), ingress (from the switch).
    dirs: [LinkDir; 2],
    counters: [u32; 2],
}

struct SegState {
    switch: Switch,
    members: Vec<MemberState>,
    /// The aggregate capacity every frame crossing the switch shares.
    capacity: Option<LinkDir>,
    counters: Arc<SegCounters>,
    /// Scratch list of the ports a frame goes to.
    targets: Vec<u32>,
    /// A wireless segment's channel (the switch is then unused).
    radio: Option<Box<Channel>>,
}

/// The channel of a wireless segment and the frames on it.
struct Channel {
    medium: Medium,
    /// Frames the medium holds, by id.
    frames: FxHashMap<u64, Frame>,
    next_id: u64,
    /// Which member sent from a MAC address (unicast frames go to that member only).
    macs: FxHashMap<u64, u32>,
    /// Scratch list of the medium's outcomes.
    outcomes: Vec<Outcome>,
}

/// Whether an Ethernet frame carries a routing protocol's message: OSPF (IP protocol 89)
/// or UDP to babel (6696), OLSR (698), AODV (654), RIP (520) or RIPng (521). Counted on
/// wireless segments for the routing overhead of MANET experiments.
pub fn is_routing(eth: &[u8]) -> bool {
    const PORTS: [u16; 5] = [6696, 698, 654, 520, 521];
    let at = |i: usize| eth.get(i).copied();
    let port = |i: usize| Some(u16::from_be_bytes([at(i)?, at(i + 1)?]));
    match (at(12), at(13)) {
        (Some(0x08), Some(0x00)) => {
            let ihl = (at(14).unwrap_or(0) & 0x0f) as usize * 4;
            match at(23) {
                Some(89) => true,
                Some(17) => port(14 + ihl + 2).is_some_and(|p| PORTS.contains(&p)),
                _ => false,
            }
        }
        (Some(0x86), Some(0xdd)) => match at(20) {
            Some(89) => true,
            Some(17) => port(54 + 2).is_some_and(|p| PORTS.contains(&p)),
            _ => false,
        },
        _ => false,
    }
}

/// A frame (virtio-net header + Ethernet frame), shared by the copies a switch floods.
type Frame = Arc<Vec<u8>>;

/// What to do with a frame when its time comes.
#[derive(Debug, Clone, Copy)]
enum Action {
    /// Write it to a port and count it as sent on a direction.
    Write { port: u32, counter: u32 },
    /// It reaches a segment's switch from one of its members.
    Switch { seg: u32, member: u32 },
}

/// A frame waiting for its time.
struct Pending {
    at_ns: u64,
    seq: u64,
    action: Action,
    /// Wire frames and bytes it stands for.
    wire: (u32, u64),
    frame: Frame,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        (self.at_ns, self.seq) == (o.at_ns, o.seq)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    /// Reversed, so that the BinaryHeap pops the earliest first (FIFO among equals).
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at_ns, o.seq).cmp(&(self.at_ns, self.seq))
    }
}

const WAKE_TOKEN: u64 = u64::MAX;

/// Threads closing TAP devices at once when the engine stops.
const CLOSE_THREADS: usize = 32;

/// Close TAP descriptors from many threads: each close unregisters a device and then
/// waits for the kernel's RCU barriers (~30 ms here), waits that overlap when the
/// closes run side by side (one by one, 1000 nodes took 36 s to tear down).
fn close_all(fds: Vec<OwnedFd>) {
    let per = fds.len().div_ceil(CLOSE_THREADS).max(1);
    let mut fds = fds;
    std::thread::scope(|s| {
        while !fds.is_empty() {
            let chunk: Vec<OwnedFd> = fds.drain(..per.min(fds.len())).collect();
            s.spawn(move || drop(chunk));
        }
    });
}

/// One copy of a frame that a direction accepted: when it leaves, what it stands for.
struct Accepted {
    at_ns: u64,
    wire: (u32, u64),
    frame: Frame,
}

/// Offer a frame to one direction at `now`: count it, check the MTU, split a
/// super-frame where per-frame impairments or the rate need it, and put every copy that
/// survives into `out`. The frame's bytes are shared, not copied, unless it is split or
/// corrupted.
fn impair(d: &mut LinkDir, c: &DirCounters, now: u64, frame: Frame, out: &mut Vec<Accepted>) {
    let hdr = VnetHdr::parse(&frame);
    let eth = &frame[VNET_HDR_LEN..];
    let g = if hdr.gso_type != 0 { gso::tcp_gso(&hdr, eth) } else { None };
    let (frames, bytes) = gso::wire_size(g.as_ref(), eth.len());
    c.rx_frames.fetch_add(frames as u64, Relaxed);
    c.rx_bytes.fetch_add(bytes, Relaxed);
    let imp = d.impairments();
    if let (None, Some(mtu)) = (&g, imp.mtu) {
        if eth.len() > mtu as usize + 14 + if eth.get(12..14) == Some(&[0x81, 0]) { 4 } else { 0 } {
            c.drop_mtu.fetch_add(1, Relaxed);
            return;
        }
    }
    let pieces: Vec<Frame> = match &g {
        Some(g) if frames > 1 => {
            let per_piece = if imp.needs_per_frame() {
                1
            } else if let Some(rate) = imp.rate_bps {
                let burst_bytes = (MAX_BURST_NS as u128 * rate as u128 / 8 / 1_000_000_000) as usize;
                (burst_bytes / (g.mss + g.hdr_len)).max(1)
            } else {
                frames as usize
            };
            if per_piece < frames as usize {
                gso::split(&frame, g, per_piece).into_iter().map(Arc::new).collect()
            } else {
                vec![frame]
            }
        }
        _ => vec![frame],
    };
    for piece in pieces {
        // The super-frame's headers and MSS hold for each of its pieces.
        let (pf, pb) = gso::wire_size(g.as_ref(), piece.len() - VNET_HDR_LEN);
        let o = d.offer(now, Offer { wire_frames: pf, wire_bytes: pb });
        if o.duplicate.is_some() {
            c.duplicated.fetch_add(pf as u64, Relaxed);
        }
        for copy in [Some(o.first), o.duplicate].into_iter().flatten() {
            match copy {
                Err(cause) => {
                    let ctr = match cause {
                        DropCause::Loss => &c.drop_loss,
                        DropCause::Queue => &c.drop_queue,
                        DropCause::Down => &c.drop_down,
                    };
                    ctr.fetch_add(pf as u64, Relaxed);
                }
                Ok(dl) => {
                    c.delay_hist[delay_bucket(dl.at_ns.saturating_sub(now))].fetch_add(pf as u64, Relaxed);
                    let mut f = piece.clone();
                    if let Some(r) = dl.corrupt {
                        let bytes = Arc::make_mut(&mut f);
                        gso::finish_checksum(bytes);
                        let bits = ((bytes.len() - VNET_HDR_LEN) * 8) as u32;
                        let bit = (r % bits) as usize;
                        bytes[VNET_HDR_LEN + bit / 8] ^= 1 << (bit % 8);
                        c.corrupted.fetch_add(1, Relaxed);
                    }
                    out.push(Accepted { at_ns: dl.at_ns, wire: (pf, pb), frame: f });
                }
            }
        }
    }
    let (qf, qb) = d.queue_depth(now);
    c.queue_frames.store(qf, Relaxed);
    c.queue_bytes.store(qb, Relaxed);
    c.queue_frames_max.fetch_max(qf, Relaxed);
}

struct Shard {
    ports: Vec<Port>,
    links: Vec<LinkState>,
    segments: Vec<SegState>,
    counters: Vec<Arc<DirCounters>>,
    /// Indices of the wireless segments.
    radios: Vec<u32>,
    rx: Receiver<Control>,
    wake_fd: RawFd,
    epoll: OwnedFd,
    heap: BinaryHeap<Pending>,
    seq: u64,
    clock: LabClock,
    buf: Vec<u8>,
    /// Scratch list of accepted copies.
    accepted: Vec<Accepted>,
    /// How late timed wake-ups come, smoothed (ns), and the margin it calls for.
    wake_late_ns: u64,
    spin_ns: u64,
    taps: Vec<Tap>,
    /// Time spent handling frames, timers and control messages, ns: the shard's load.
    /// Not its CPU time, which also counts the spinning before deadlines.
    work_ns: Arc<AtomicU64>,
}

impl Shard {
    fn new(work: ShardInit, rx: Receiver<Control>, wake_fd: RawFd, clock: LabClock) -> Result<Shard> {
        // SAFETY: epoll_create1 returns a new descriptor or -1.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(std::io::Error::last_os_error()).context("creating an epoll set");
        }
        // SAFETY: ep is a fresh descriptor we own.
        let epoll = unsafe { OwnedFd::from_raw_fd(ep) };
        let add = |fd: RawFd, token: u64| -> Result<()> {
            let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: token };
            // SAFETY: valid epoll and descriptor.
            if unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
                return Err(std::io::Error::last_os_error()).context("adding a device to epoll");
            }
            Ok(())
        };
        add(wake_fd, WAKE_TOKEN)?;
        for (i, p) in work.ports.iter().enumerate() {
            add(p.fd.as_raw_fd(), i as u64)?;
        }
        Ok(Shard {
            ports: work.ports,
            links: work.links,
            segments: work.segments,
            counters: work.counters,
            radios: work.radios,
            rx,
            wake_fd,
            epoll,
            heap: BinaryHeap::new(),
            seq: 0,
            clock,
            buf: vec![0; MAX_FRAME],
            accepted: Vec::new(),
            wake_late_ns: 0,
            spin_ns: SPIN_NS,
            taps: Vec::new(),
            work_ns: Arc::new(AtomicU64::new(0)),
        })
    }

    fn run(&mut self) {
        // Timers as precise as the kernel allows: no slack on our sleeps.
        // SAFETY: prctl with an integer argument.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
        // This thread keeps the schedule: when it shares a core with the nodes'
        // programs it must win, or frames are late by their time slices (seen: 1.5–6%
        // of frames over 1 ms late at 6 × 500 pings/s on 2 cores). Niceness -10 weighs
        // it ~10× a normal process; it sleeps whenever nothing is due. Without the
        // privilege the call fails and the thread keeps the default.
        // SAFETY: setpriority on this thread (its tid) with an integer niceness.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, -10) };
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
        let mut work_ns = 0u64;
        loop {
            let now = self.clock.now_ns();
            if self.run_due(now) {
                work_ns += self.clock.now_ns().saturating_sub(now);
            }
            let next = self.heap.peek().map(|p| p.at_ns).into_iter().chain(self.radio_events()).min();
            let timeout = next.map(|at| at.saturating_sub(now).saturating_sub(self.spin_ns));
            let wake_at = timeout.filter(|&t| t > 0).map(|t| now + t);
            let ts = timeout.map(|ns| libc::timespec { tv_sec: (ns / 1_000_000_000) as i64, tv_nsec: (ns % 1_000_000_000) as i64 });
            let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
            // SAFETY: events has room for its length; tsp is null or valid.
            let n = unsafe {
                libc::epoll_pwait2(self.epoll.as_raw_fd(), events.as_mut_ptr(), events.len() as i32, tsp, std::ptr::null())
            };
            if n < 0 {
                continue; // EINTR
            }
            let woke = self.clock.now_ns();
            if let (0, Some(at)) = (n, wake_at) {
                // A timed wake-up: learn how late they come.
                let late = woke.saturating_sub(at);
                self.wake_late_ns = (self.wake_late_ns * 7 + late) / 8;
                self.spin_ns = (2 * self.wake_late_ns).clamp(SPIN_NS, MAX_SPIN_NS);
            }
            for ev in &events[..n as usize] {
                if ev.u64 == WAKE_TOKEN {
                    let mut v: u64 = 0;
                    // SAFETY: reading 8 bytes from an eventfd.
                    unsafe { libc::read(self.wake_fd, (&mut v as *mut u64).cast(), 8) };
                    if !self.control() {
                        return;
                    }
                    continue;
                }
                let port = ev.u64 as usize;
                if ev.events & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0 {
                    self.forget(port);
                    continue;
                }
                self.read_from(port);
            }
            if n > 0 {
                work_ns += self.clock.now_ns().saturating_sub(woke);
            }
            self.work_ns.store(work_ns, Relaxed);
        }
    }

    /// The directions and the ports (for the carrier) of a control message's target.
    fn target(&mut self, target: Target) -> (&mut [LinkDir; 2], Vec<u32>) {
        match target {
            Target::Link(l) => {
                let l = &mut self.links[l];
                (&mut l.dirs, l.ports.to_vec())
            }
            Target::Member(g, m) => {
                let m = &mut self.segments[g].members[m];
                (&mut m.dirs, vec![m.port])
            }
        }
    }

    /// Apply control messages; false when asked to stop.
    fn control(&mut self) -> bool {
        while let Ok(c) = self.rx.try_recv() {
            match c {
                Control::Tap { mut tap, target, side } => {
                    tap.port = match target {
                        Target::Link(l) => self.links[l].ports[side.min(1)],
                        Target::Member(g, m) => self.segments[g].members[m].port,
                    };
                    self.ports[tap.port as usize].tapped = true;
                    self.taps.push(tap);
                }
                Control::Untap(id) => {
                    self.taps.retain(|t| t.id != id);
                    self.retap();
                }
                Control::Patch { target, dir, patch, done } => {
                    let d = &mut self.target(target).0[dir];
                    let mut imp = d.impairments().clone();
                    patch.apply_to(&mut imp);
                    d.set_impairments(imp.clone());
                    let _ = done.send(imp);
                }
                Control::SetUp { target, up, done } => {
                    let (dirs, ports) = self.target(target);
                    for d in dirs.iter_mut() {
                        d.set_up(up);
                    }
                    if let Target::Member(g, m) = target {
                        self.segments[g].switch.set_port_up(m as u32, up);
                        if let Some(r) = &mut self.segments[g].radio {
                            r.medium.set_up(m as u32, up, &mut r.outcomes);
                            self.radio_outcomes(g as u32);
                        }
                    }
                    // The interfaces see their carrier come and go, as on real hardware.
                    for p in ports {
                        let _ = vemu_host::tap::set_carrier(&self.ports[p as usize].fd, up);
                    }
                    let _ = done.send(());
                }
                Control::Positions { seg, positions } => {
                    if let Some(r) = &mut self.segments[seg].radio {
                        if positions.len() == r.medium.positions().len() {
                            r.medium.set_positions(&positions);
                        }
                    }
                }
                Control::Radio { seg, done } => {
                    if let Some(r) = &self.segments[seg].radio {
                        let m = &r.medium;
                        let n = m.positions().len() as u32;
                        let mut pairs: Vec<(u32, u32, PairCounters)> = m.pairs().map(|((a, b), c)| (a, b, c)).collect();
                        pairs.sort_by_key(|p| (p.0, p.1));
                        let _ = done.send(RadioSnapshot { positions: m.positions().to_vec(), neighbours: (0..n).map(|i| m.neighbours(i).to_vec()).collect(), pairs });
                    }
                }
                Control::Stop => {
                    close_all(std::mem::take(&mut self.ports).into_iter().map(|p| p.fd).collect());
                    return false;
                }
            }
        }
        true
    }

    /// Recompute which ports are watched, after taps went away.
    fn retap(&mut self) {
        for p in &mut self.ports {
            p.tapped = false;
        }
        for t in &self.taps {
            self.ports[t.port as usize].tapped = true;
        }
    }

    /// Hand a frame to the captures on `port`: `outgoing` frames to all of them,
    /// arriving ones to those at `point`. Captures whose reader is gone end.
    fn tap(&mut self, port: u32, t_ns: u64, outgoing: bool, point: CapturePoint, pkt: &[u8]) {
        let mut frames: Option<Vec<Vec<u8>>> = None;
        let mut gone: Vec<u64> = Vec::new();
        for t in self.taps.iter().filter(|t| t.port == port && (outgoing || t.point == point)) {
            let frames = frames.get_or_insert_with(|| gso::wire_frames(pkt));
            for f in frames.iter() {
                let c = Captured { t_ns, iface: t.iface, outgoing, frame: f.clone() };
                if let Err(std::sync::mpsc::TrySendError::Disconnected(_)) = t.tx.try_send(c) {
                    gone.push(t.id);
                    break;
                }
            }
        }
        if !gone.is_empty() {
            self.taps.retain(|t| !gone.contains(&t.id));
            self.retap();
        }
    }

    /// Stop polling a device that went away (its namespace was removed).
    fn forget(&mut self, port: usize) {
        let fd = self.ports[port].fd.as_raw_fd();
        // SAFETY: removing a descriptor from our epoll set.
        unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) };
    }

    fn read_from(&mut self, port: usize) {
        let fd = self.ports[port].fd.as_raw_fd();
        for _ in 0..READ_BATCH {
            // SAFETY: buf has MAX_FRAME bytes.
            let n = unsafe { libc::read(fd, self.buf.as_mut_ptr().cast(), self.buf.len()) };
            if n <= 0 {
                if n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::WouldBlock {
                    self.forget(port);
                }
                return;
            }
            let n = n as usize;
            if n <= VNET_HDR_LEN + 14 {
                continue;
            }
            let now = self.clock.now_ns();
            let frame = Arc::new(self.buf[..n].to_vec());
            if self.ports[port].tapped {
                self.tap(port as u32, now, true, CapturePoint::After, &frame);
            }
            if let Owner::Link { link, side } = self.ports[port].owner {
                let far = self.links[link as usize].ports[1 - side as usize];
                if self.ports[far as usize].tapped {
                    self.tap(far, now, false, CapturePoint::Before, &frame);
                }
            }
            let mut acc = std::mem::take(&mut self.accepted);
            match self.ports[port].owner {
                Owner::Link { link, side } => {
                    // Frames read at side a travel forward (dir 0) to side b, and vice versa.
                    let l = &mut self.links[link as usize];
                    let dir = side as usize;
                    impair(&mut l.dirs[dir], &self.counters[l.counters[dir] as usize], now, frame, &mut acc);
                    let action = Action::Write { port: l.ports[1 - dir], counter: l.counters[dir] };
                    for a in acc.drain(..) {
                        self.push(a, action);
                    }
                }
                Owner::Member { seg, member } => {
                    let m = &mut self.segments[seg as usize].members[member as usize];
                    impair(&mut m.dirs[0], &self.counters[m.counters[0] as usize], now, frame, &mut acc);
                    for a in acc.drain(..) {
                        self.push(a, Action::Switch { seg, member });
                    }
                }
            }
            self.accepted = acc;
        }
    }

    fn push(&mut self, a: Accepted, action: Action) {
        self.seq += 1;
        self.heap.push(Pending { at_ns: a.at_ns, seq: self.seq, action, wire: a.wire, frame: a.frame });
    }

    /// A frame reaches a segment's switch at `t`: it crosses the aggregate capacity, the
    /// switch decides its ports, and each of their ingress directions takes a copy that
    /// shares the frame's bytes.
    fn switch(&mut self, t: u64, seg: u32, member: u32, wire: (u32, u64), frame: Frame) {
        let g = &mut self.segments[seg as usize];
        let sent = &self.counters[g.members[member as usize].counters[0] as usize];
        sent.tx_frames.fetch_add(wire.0 as u64, Relaxed);
        sent.tx_bytes.fetch_add(wire.1, Relaxed);
        if let Some(r) = &mut g.radio {
            // On the air every wire frame is its own transmission.
            let hdr = VnetHdr::parse(&frame);
            let gs = if hdr.gso_type != 0 { gso::tcp_gso(&hdr, &frame[VNET_HDR_LEN..]) } else { None };
            let pieces: Vec<Frame> = match &gs {
                Some(gs) if wire.0 > 1 => gso::split(&frame, gs, 1).into_iter().map(Arc::new).collect(),
                _ => vec![frame],
            };
            for piece in pieces {
                let eth = &piece[VNET_HDR_LEN..];
                let (dst, src) = (vemu_switch::mac(&eth[0..6]), vemu_switch::mac(&eth[6..12]));
                r.macs.insert(src, member);
                let to = if eth[0] & 1 == 0 { r.macs.get(&dst).copied() } else { None };
                let pw = gso::wire_size(gs.as_ref(), piece.len() - VNET_HDR_LEN);
                let id = r.next_id;
                r.next_id += 1;
                if r.medium.offer(t, member, id, r.medium.airtime_ns(pw.0, pw.1), to) {
                    g.counters.air_frames.fetch_add(1, Relaxed);
                    if is_routing(eth) {
                        g.counters.routing_frames.fetch_add(1, Relaxed);
                    }
                    r.frames.insert(id, piece);
                } else {
                    g.counters.drop_capacity.fetch_add(pw.0 as u64, Relaxed);
                }
            }
            return;
        }
        let mut t_out = t;
        if let Some(cap) = &mut g.capacity {
            match cap.offer(t, Offer { wire_frames: wire.0, wire_bytes: wire.1 }).first {
                Ok(dl) => t_out = dl.at_ns,
                Err(_) => {
                    g.counters.drop_capacity.fetch_add(wire.0 as u64, Relaxed);
                    return;
                }
            }
        }
        let eth = &frame[VNET_HDR_LEN..];
        let (dst, src) = (vemu_switch::mac(&eth[0..6]), vemu_switch::mac(&eth[6..12]));
        let mut targets = std::mem::take(&mut g.targets);
        targets.clear();
        let ctr = match g.switch.forward(t, member, dst, src) {
            Forward::Unicast(p) => {
                targets.push(p);
                &g.counters.unicast
            }
            Forward::Flood(ports) => {
                targets.extend(ports);
                &g.counters.flooded
            }
            Forward::Filter => &g.counters.filtered,
        };
        ctr.fetch_add(wire.0 as u64, Relaxed);
        let mut acc = std::mem::take(&mut self.accepted);
        for &p in &targets {
            let port = self.segments[seg as usize].members[p as usize].port;
            if self.ports[port as usize].tapped {
                self.tap(port, t, false, CapturePoint::Before, &frame);
            }
            let m = &mut self.segments[seg as usize].members[p as usize];
            impair(&mut m.dirs[1], &self.counters[m.counters[1] as usize], t_out, frame.clone(), &mut acc);
            let action = Action::Write { port: m.port, counter: m.counters[1] };
            for a in acc.drain(..) {
                self.push(a, action);
            }
        }
        self.accepted = acc;
        self.segments[seg as usize].targets = targets;
    }

    /// When the next wireless channel event is due.
    fn radio_events(&self) -> Option<u64> {
        self.radios.iter().filter_map(|&g| self.segments[g as usize].radio.as_ref().and_then(|r| r.medium.next_event_ns())).min()
    }

    /// Hand the frames a wireless channel delivered to their receivers' ingress
    /// directions, and forget those it is done with.
    fn radio_outcomes(&mut self, seg: u32) {
        let g = &mut self.segments[seg as usize];
        let Some(r) = &mut g.radio else { return };
        let mut outcomes = std::mem::take(&mut r.outcomes);
        let mut acc = std::mem::take(&mut self.accepted);
        for o in outcomes.drain(..) {
            let g = &mut self.segments[seg as usize];
            let r = g.radio.as_mut().unwrap();
            match o {
                Outcome::Done { id } => {
                    r.frames.remove(&id);
                }
                Outcome::Deliver { id, receiver, at_ns } => {
                    let Some(frame) = r.frames.get(&id).cloned() else { continue };
                    let port = g.members[receiver as usize].port;
                    if self.ports[port as usize].tapped {
                        self.tap(port, at_ns, false, CapturePoint::Before, &frame);
                    }
                    let m = &mut self.segments[seg as usize].members[receiver as usize];
                    impair(&mut m.dirs[1], &self.counters[m.counters[1] as usize], at_ns, frame, &mut acc);
                    let action = Action::Write { port: m.port, counter: m.counters[1] };
                    for a in acc.drain(..) {
                        self.push(a, action);
                    }
                }
            }
        }
        self.accepted = acc;
        if let Some(r) = &mut self.segments[seg as usize].radio {
            r.outcomes = outcomes;
        }
    }

    /// Carry out everything whose time has come; false when nothing had.
    fn run_due(&mut self, now: u64) -> bool {
        let mut worked = false;
        for k in 0..self.radios.len() {
            let g = self.radios[k];
            let r = self.segments[g as usize].radio.as_mut().unwrap();
            if r.medium.next_event_ns().is_some_and(|t| t <= now) {
                r.medium.advance(now, &mut r.outcomes);
                self.radio_outcomes(g);
                worked = true;
            }
        }
        while self.heap.peek().is_some_and(|p| p.at_ns <= now) {
            let p = self.heap.pop().unwrap();
            worked = true;
            match p.action {
                Action::Switch { seg, member } => self.switch(p.at_ns, seg, member, p.wire, p.frame),
                Action::Write { port, counter } => {
                    let t = self.clock.now_ns();
                    if self.ports[port as usize].tapped {
                        self.tap(port, t, false, CapturePoint::After, &p.frame);
                    }
                    let late = t.saturating_sub(p.at_ns);
                    let c = &self.counters[counter as usize];
                    c.late_hist[delay_bucket(late)].fetch_add(p.wire.0 as u64, Relaxed);
                    c.late_max_ns.fetch_max(late, Relaxed);
                    let fd = self.ports[port as usize].fd.as_raw_fd();
                    let c = &self.counters[counter as usize];
                    // SAFETY: writing a frame we hold to a TAP descriptor.
                    let w = unsafe { libc::write(fd, p.frame.as_ptr().cast(), p.frame.len()) };
                    if w < 0 {
                        c.write_errors.fetch_add(1, Relaxed);
                        continue;
                    }
                    c.tx_frames.fetch_add(p.wire.0 as u64, Relaxed);
                    c.tx_bytes.fetch_add(p.wire.1, Relaxed);
                }
            }
        }
        worked
    }
}
