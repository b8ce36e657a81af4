//! The data path of one shard as a state machine: no file descriptors, no clock, no
//! threads (the style of quinn-proto and smoltcp). A driver feeds it frames read from
//! devices ([`Core::handle_frame`]), wakes it when [`Core::poll_timeout`] says, writes
//! what [`Core::poll_transmit`] hands out and carries out what [`Core::poll_event`]
//! asks (carrier changes, capture copies). Every time comes in as an argument, in
//! nanoseconds on the lab clock, and every random decision comes from the seeds in the
//! configuration, so the same inputs at the same times give the same outputs — which is
//! what the virtual-clock tests (`tests/core.rs`) rely on.
//!
//! What it owns: the ports (a node's interface, numbered in the order links and
//! segments are added), each link's two directions ([`vemu_link::LinkDir`]), each
//! segment's member directions, aggregate capacity and learning switch
//! ([`vemu_switch::Switch`]) or radio channel ([`vemu_radio::medium::Medium`]), the
//! frames in flight, the counters and the capture subscriptions.
//!
//! One frame on a link: read at port a → counted, MTU-checked, split where per-frame
//! impairments or the rate need it → each piece offered to the forward direction →
//! scheduled at its delivery time → handed out by `poll_transmit` for port b. On a LAN
//! segment the frame crosses the sender's egress direction, then (at its delivery time)
//! the aggregate capacity and the switch, then each recipient's ingress direction. On a
//! wireless segment the radio channel takes the switch's place.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};
use vemu_link::{
    DropCause, Impairments, ImpairmentsPatch, Left, LinkDir, Offer, Outcome as LinkOutcome,
    QueueLimit, Shaper, FULL_FRAME_BYTES,
};
use vemu_qos::classify;
use vemu_qos::stage::Refusal;
use vemu_radio::medium::{Medium, MediumConfig, Neighbour, Outcome, PairCounters};
use vemu_radio::Pos;
use vemu_switch::snoop::{classify, Class};
use vemu_switch::{is_group, mac, Delivery, Forward, Mac, PortConfig, Snooping, Switch, BROADCAST};

use crate::counters::{delay_bucket, ClassCounters, DirCounters, SegCounters};
use crate::gso::{self, VNET_HDR_LEN};

/// A port of the core: one node interface (a TAP device, to the driver).
pub type PortId = u32;

/// A frame as devices hand it over (virtio-net header + Ethernet frame), shared by the
/// copies a switch floods or a capture keeps.
pub type Frame = Arc<Vec<u8>>;

/// A rate-limited super-frame is split so that no piece occupies the wire longer than
/// this: bursts stay short enough that timing at the far end is as on a real wire.
pub const MAX_BURST_NS: u64 = 100_000;

/// Shortest frame the core takes: the virtio-net header, an Ethernet header and one
/// byte. Shorter ones are ignored.
pub const MIN_FRAME: usize = VNET_HDR_LEN + 15;

/// What a link or segment port is: `Link(l)` (direction 0 = forward a → b, 1 =
/// reverse) or `Member(segment, member)` (0 = egress member → switch, 1 = ingress).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    Link(usize),
    Member(usize, usize),
}

/// Direction of a link (0 = forward, 1 = reverse) or of a member port (0 = egress, 1 = ingress).
pub type Dir = usize;

/// A point-to-point link: what each direction does.
#[derive(Debug, Clone, Default)]
pub struct LinkConfig {
    /// Side a → side b.
    pub forward: Impairments,
    pub reverse: Impairments,
    /// Seeds of the forward and reverse random generators.
    pub seeds: [u64; 2],
    /// MTU of the interfaces at both ends (bytes of IP packet): a direction without an
    /// `mtu` impairment of its own drops larger frames (a node may raise its interface's
    /// MTU; the emulated wire does not follow). 0: no limit.
    pub mtu: u32,
    /// The driver can carry a direction of this link inside the kernel: the core then
    /// says, with [`Event::Path`], whenever a direction needs it or the engine.
    pub kernel_path: bool,
    /// ... and can shape a direction there with a token bucket ([`Path::Shaped`]).
    pub kernel_shaper: bool,
    /// One side is on another machine: `(side, transit_ns)`. Frames toward it leave
    /// `transit_ns` (the underlay's one-way delay) before their delivery time, so they
    /// arrive at it; frames from it come in by [`Core::handle_delivered`], their
    /// direction carried out by the other machine's core.
    pub remote: Option<(usize, u64)>,
    /// The link is a member here of a LAN whose switch is on another machine (side a:
    /// the member's interface; side b, `remote`: toward the switch): see [`Spur`].
    pub spur: Option<Spur>,
}

/// A member of a LAN segment whose switch is on another machine, carried out here as a
/// link toward it. The members of a segment on one such machine are switched among
/// themselves there, at the time frames would have reached the switch, so that nothing
/// between them crosses the underlay (twice) through the segment's machine: each
/// machine learns, as the switch does, where the source addresses its members send from
/// are — here (a member) or elsewhere (the switch handed a frame from it to a member
/// here) — and forgets an address not seen for `aging_ns`. A unicast frame to an
/// address here goes to that member only; to an address elsewhere, to the switch only;
/// a broadcast or a unicast frame to an unknown address to every other member here of
/// its VLAN and to the switch, which does not send it back to this machine
/// ([`SegmentConfig::far_switching`]); multicast to the switch (its snooping decides).
/// Only for segments without an aggregate capacity (which every frame must cross at
/// the switch) and not wireless.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spur {
    /// The segment, as numbered in the lab (the same on every machine).
    pub segment: u32,
    /// The member's access VLAN (0: none): frames are switched within one VLAN only.
    pub vlan: u16,
    pub aging_ns: u64,
}

/// One port of a segment.
#[derive(Debug, Clone, Default)]
pub struct MemberConfig {
    pub vlan: u16,
    /// Frames the member sends, on their way to the switch.
    pub egress: Impairments,
    /// Frames the switch delivers to the member.
    pub ingress: Impairments,
    /// Seeds of the egress and ingress random generators.
    pub seeds: [u64; 2],
    /// MTU of the member's interface, as [`LinkConfig::mtu`].
    pub mtu: u32,
    /// The member is on another machine: `Some(transit_ns)`. Its egress direction is
    /// carried out there (frames from it come in by [`Core::handle_delivered`] as they
    /// reach the switch); its ingress is carried out here, and frames leave toward it
    /// `transit_ns` (the underlay's one-way delay) before their delivery time.
    pub remote: Option<u64>,
}

/// A LAN segment (a learning switch) or, with `radio`, a wireless segment.
#[derive(Debug, Clone, Default)]
pub struct SegmentConfig {
    pub members: Vec<MemberConfig>,
    /// Aggregate capacity, bits/s: every frame crossing the switch occupies it for its
    /// serialization time.
    pub capacity_bps: Option<u64>,
    /// Learned MAC addresses are forgotten after this long without traffic, ns.
    pub aging_ns: u64,
    /// IGMP/MLD snooping (a LAN's switch; with `Querier` it sends queries on its own).
    /// On a wireless segment anything but `Off` filters groups at the receivers.
    pub snooping: vemu_switch::Snooping,
    /// A radio channel instead of a switch, with the members' first positions (m).
    pub radio: Option<(MediumConfig, Vec<Pos>)>,
    /// The driver can switch this LAN inside the kernel (a bridge): the core then says,
    /// with [`Event::Path`] for every member port, whenever the whole segment needs no
    /// emulation or needs the engine. (Never for a wireless segment.)
    pub kernel_path: bool,
    /// ... and can shape its ports' directions there with token buckets: a port
    /// direction whose one impairment is a rate given to the kernel's shaper keeps the
    /// LAN on the bridge ([`Path::Shaped`] for its egress, [`Event::Ingress`] for its
    /// ingress).
    pub kernel_shaper: bool,
    /// The members on each other machine are switched among themselves there ([`Spur`]):
    /// a broadcast or unicast frame from such a member is not sent back to the members
    /// of its own machine (they had it there); multicast is.
    pub far_switching: bool,
    /// No member has IPv6 on: the switch, as querier, sends IGMP queries only (no IPv6
    /// frame at all in a lab of `ipv6: none`).
    pub ipv6_off: bool,
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

/// A change to the core.
// (A command is rare — a change to the lab — and moved once into a shard's queue: its
// largest variants cost nothing that boxing would save.)
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Command {
    /// Change some impairments of one direction. Frames already scheduled keep their
    /// delivery times.
    Patch { target: Target, dir: Dir, patch: ImpairmentsPatch },
    /// Take a link or port down (frames in either direction are dropped, the
    /// interfaces lose carrier) or back up.
    SetUp { target: Target, up: bool },
    /// New positions of a wireless segment's members (one per member, m).
    Positions { seg: usize, positions: Vec<Pos> },
    /// Copy frames of one interface to capture `id`: a link end (side 0 = a, 1 = b)
    /// or a segment port (side ignored). `iface` is handed back with every copy.
    Capture { id: u64, target: Target, side: usize, iface: u32, point: CapturePoint },
    /// End capture `id`.
    Uncapture(u64),
}

/// What a command left in force.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    Done,
    /// The direction's impairments after a patch.
    Impairments(Impairments),
}

/// Something the driver must carry out.
#[derive(Debug, Clone)]
pub enum Event {
    /// Set the carrier of a port's device.
    Carrier { port: PortId, up: bool },
    /// Frames sent by the node at `port` (a link end or LAN port with a kernel path) go
    /// from now on by `path`: straight to the far end or the LAN's bridge inside the
    /// kernel ([`Path::Kernel`]: no emulation needed — on a link the direction has no
    /// impairment, is up and not captured; on a LAN the same holds for every direction
    /// of every port and the LAN has no capacity limit), through the kernel's token
    /// bucket to the far end ([`Path::Shaped`]: a link direction whose one impairment is
    /// a rate given to the kernel's shaper; on a LAN, the port's egress, through a bucket
    /// to the bridge), or to the core ([`Path::Engine`]).
    Path { port: PortId, path: Path },
    /// What the kernel's bridge sends to the node at LAN port `port` goes from now on
    /// through the token bucket `shape` (the port's ingress direction; `None`: straight).
    /// Told before the [`Event::Path`]s that put the LAN on the bridge, and before those
    /// that take it to the engine (`None`: what the engine writes for the port leaves
    /// through the same device, and must not meet a bucket).
    Ingress { port: PortId, shape: Option<Shape> },
    /// A copy for capture `capture`: `frame` (as devices hand it over; possibly a
    /// super-frame) was sent by (`outgoing`) or arrived at interface `iface` at `t_ns`.
    Capture { capture: u64, iface: u32, t_ns: u64, outgoing: bool, frame: Frame },
}

/// How long the kernel's token bucket may send back to back at its rate (at least two
/// frames): what lets it catch up when its timer fires late, and lets TCP's super-frames
/// through whole (a bucket cuts longer ones in wire frames, in software). With one frame
/// only, every late wake-up is rate lost for good (TCP got 0.80 of 100 Mbit/s here); with
/// 1 ms, 16 links of 100 Mbit/s all running TCP got 0.83 of the rate where tbf with 4 ms
/// got 0.93; with 4 ms, 0.955 as tbf. 4 ms is also htb's default depth at HZ = 250, what
/// Mininet's links get. The engine's serializer catches up from its own schedule.
pub const KERNEL_BURST_NS: u64 = 4_000_000;

/// Where it is at most [`SUPER_FRAME_BURST_NS`] at the rate, the bucket holds at least
/// this: a TCP super-frame of 64 KiB with the headers of its ~45 segments, so that it
/// crosses whole. A bucket cuts a longer frame into wire frames in software, and on a
/// path without delay TCP sends 64 KiB super-frames at any rate (its TSO sizing grows
/// them as the round trip shrinks): 32 links of 100 Mbit/s all running TCP got 0.55 of
/// the rate with a 4 ms (50 kB) bucket, every core cutting frames, and 0.956 with this
/// (tbf on veth pairs with 4 ms: 0.76–0.956). Mininet's htb lets super-frames through
/// whole at any depth.
pub const SUPER_FRAME_BYTES: u64 = 72 * 1024;
/// See [`SUPER_FRAME_BYTES`]: rates of 74 Mbit/s and more.
pub const SUPER_FRAME_BURST_NS: u64 = 8_000_000;

/// Which way a direction's frames go (see [`Event::Path`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    Engine,
    Kernel,
    Shaped(Shape),
}

impl Path {
    /// Carried inside the kernel (shaped or not).
    pub fn in_kernel(self) -> bool {
        self != Path::Engine
    }
}

/// The kernel token bucket (`tbf`) that carries out a direction's rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub rate_bps: u64,
    /// The bucket: what may leave back to back, bytes — [`KERNEL_BURST_NS`] at the
    /// rate, at least two frames of the link's MTU, and at least a super-frame
    /// ([`SUPER_FRAME_BYTES`]) where that is no more than [`SUPER_FRAME_BURST_NS`].
    pub burst_bytes: u64,
    /// What may wait, bytes (the direction's queue limit; a packet limit counts
    /// full-size frames).
    pub limit_bytes: u64,
}

/// A frame to write to a port now.
#[derive(Debug, Clone)]
pub struct Transmit {
    pub port: PortId,
    pub frame: Frame,
    /// When it was due, lab ns.
    pub at_ns: u64,
    /// Wire frames and bytes it stands for.
    pub wire_frames: u32,
    pub wire_bytes: u64,
    /// The shard counter of the direction it leaves by ([`UNCOUNTED`]: none).
    counter: u32,
}

/// [`Transmit::counter`] of frames that another machine's core counted.
const UNCOUNTED: u32 = u32::MAX;

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

/// Whose device a port is.
#[derive(Debug, Clone, Copy)]
enum Owner {
    Link {
        link: u32,
        side: u8,
    },
    Member {
        seg: u32,
        member: u32,
    },
    /// A trunk ([`Core::add_trunk`], [`Core::add_trunk_in`]).
    Trunk {
        trunk: u32,
    },
}

/// Frames of a segment toward several of its members on another machine, one copy per
/// machine: on the segment's machine, the members it serves; on theirs, the links that
/// carry out their ingress. The copy carries the receivers after the Ethernet frame:
/// `(member u32, offset ns u32)` each — the offset after the copy's time at which that
/// member's ingress takes it (radio propagation) — then how far behind its time the copy
/// arrives (ns u32: the underlay's delay less the lead it left with; the switch decides
/// at the frame's time, so the copy cannot leave before), then their count (u16), all
/// big-endian. The far machine's ingress directions take the copy at its arrival less
/// that, as if it had arrived at the frame's time.
struct TrunkState {
    port: PortId,
    /// How early copies leave (the underlay's one-way delay, measured), ns.
    transit_ns: u64,
    /// Receivers of the copy being made: (member, offset).
    pending: Vec<(u32, u32)>,
    /// On the members' machine: member → the link carrying out its ingress.
    links: FxHashMap<u32, u32>,
}

/// Most receivers one trunk copy names; more go in further copies.
pub const TRUNK_MAX_RECEIVERS: usize = 256;

struct Port {
    owner: Owner,
    /// Some capture watches this port.
    watched: bool,
}

struct LinkState {
    /// Ports of side a and side b.
    ports: [PortId; 2],
    dirs: [LinkDir; 2],
    /// Indices into the core's counters, per direction.
    counters: [u32; 2],
    /// Interface MTU (0: none), for directions without their own.
    mtu: u32,
    /// Which way each direction goes now; `None`: the link has no kernel path.
    kernel: Option<[Path; 2]>,
    /// The kernel can shape its directions ([`LinkConfig::kernel_shaper`]).
    kernel_shaper: bool,
    /// How early frames leave toward a side on another machine, per side (ns).
    transit_ns: [u64; 2],
    /// The side on another machine, if one is.
    remote: Option<usize>,
    /// A member of a segment switched elsewhere: its group here and its port in the
    /// group's switch.
    spur: Option<(u32, u32)>,
}

/// The members here of one segment switched on another machine ([`Spur`]), and the
/// learning switch ([`vemu_switch::Switch`]: VLANs, aging, a bounded table) that says
/// where the addresses they send to are: its ports are the members (their links) and,
/// one per VLAN, the way to the segment's switch (its "uplink", where an address the
/// segment's switch handed a member a frame from is learnt).
struct SpurGroup {
    segment: u32,
    aging_ns: u64,
    /// Each port of the switch: its VLAN, and the member's link (`None`: an uplink).
    ports: Vec<(PortConfig, Option<u32>)>,
    /// Made from `ports` when first needed (members join one by one as links are added).
    switch: Option<Switch>,
}

impl SpurGroup {
    /// Add member link `link` of access VLAN `vlan` (and the VLAN's uplink, if it is
    /// new); its port.
    fn add(&mut self, link: u32, vlan: u16) -> u32 {
        let port = self.ports.len() as u32;
        self.ports.push((PortConfig { vlan }, Some(link)));
        if !self.ports.iter().any(|(c, l)| l.is_none() && c.vlan == vlan) {
            self.ports.push((PortConfig { vlan }, None));
        }
        self.switch = None;
        port
    }

    /// The switch and the ports (split, so that both may be used at once).
    fn parts(&mut self) -> (&mut Switch, &[(PortConfig, Option<u32>)]) {
        let SpurGroup { ports, switch, aging_ns, .. } = self;
        let sw = switch.get_or_insert_with(|| {
            Switch::new(&ports.iter().map(|p| p.0).collect::<Vec<_>>(), *aging_ns)
        });
        (sw, ports)
    }
}

/// Where a frame from a member of a [`SpurGroup`] goes.
enum SpurWay {
    /// To the member of this link here only.
    Here(u32),
    /// To the other members here of its VLAN (left in `Core::spur_flood`), and to the
    /// switch.
    Flood,
    /// To the switch only.
    Switch,
}

struct MemberState {
    port: PortId,
    /// Egress (to the switch), ingress (from the switch).
    dirs: [LinkDir; 2],
    counters: [u32; 2],
    mtu: u32,
    /// On another machine: how early frames leave toward it (ns).
    remote: Option<u64>,
    /// The trunk toward its machine, if it has one: its ingress is carried out there.
    trunk: Option<u32>,
    /// The ingress bucket the driver was last told of ([`Event::Ingress`]).
    bucket_in: Option<Shape>,
    /// The egress path the driver was last told of, while the LAN is the kernel's.
    egress_path: Path,
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
    /// Whether the LAN is switched by the kernel now; `None`: it has no kernel path.
    kernel: Option<bool>,
    /// The kernel can shape its ports' directions ([`SegmentConfig::kernel_shaper`]).
    kernel_shaper: bool,
    /// [`SegmentConfig::far_switching`].
    far_switching: bool,
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
    /// With snooping (not `off`): the groups each member joined, by MAC address, as its
    /// own membership reports and leaves say (read as it sends them, before the air can
    /// lose them). A receiver in range is handed a group's data only if it joined, as a
    /// radio's multicast filter does; what every host must hear (see
    /// [`vemu_switch::snoop`]) and broadcast reach every receiver in range.
    groups: Option<Vec<FxHashSet<Mac>>>,
}

impl Channel {
    /// Note the groups member `member` joins or leaves in a frame it sends.
    fn note_reports(&mut self, member: u32, eth: &[u8]) {
        let Some(groups) = &mut self.groups else { return };
        if eth.first().is_none_or(|b| b & 1 == 0) {
            return;
        }
        if let Class::Report { joins, leaves, .. } = classify(eth) {
            let g = &mut groups[member as usize];
            g.extend(joins);
            for l in leaves {
                g.remove(&l);
            }
        }
    }

    /// Whether `receiver` takes a frame it hears (group data for a group it did not join:
    /// no).
    fn takes(&self, receiver: u32, eth: &[u8]) -> bool {
        let Some(groups) = &self.groups else { return true };
        if eth.first().is_none_or(|b| b & 1 == 0) {
            return true;
        }
        match classify(eth) {
            Class::Data { group, .. } => groups[receiver as usize].contains(&group),
            _ => true,
        }
    }

    /// Memberships now, over all members.
    fn group_count(&self) -> u64 {
        self.groups.as_ref().map_or(0, |g| g.iter().map(|m| m.len() as u64).sum())
    }
}

/// A capture's interest in one port.
struct Watch {
    id: u64,
    port: PortId,
    iface: u32,
    point: CapturePoint,
}

/// What to do with a frame when its time comes.
#[derive(Debug, Clone, Copy)]
enum Action {
    /// Hand it out for a port and count it as sent on a direction.
    Write { port: PortId, counter: u32 },
    /// Hand it out for a port, uncounted: a direction of another machine's core carried it.
    Deliver { port: PortId },
    /// It reaches a segment's switch (or channel) from one of its members.
    Switch { seg: u32, member: u32 },
    /// It came through a trunk: link `link`'s reverse direction (a member's ingress)
    /// takes it now.
    Ingress { link: u32 },
    /// Switched here between two members of a segment switched elsewhere ([`Spur`]):
    /// counted as sent by link `from`'s forward direction (the member's egress; `None`:
    /// the copy to the switch counts it), then link `to`'s reverse direction (the other
    /// member's ingress) takes it now.
    Local { from: Option<u32>, to: u32 },
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

/// One copy of a frame that a direction accepted: when it leaves, what it stands for.
struct Accepted {
    at_ns: u64,
    wire: (u32, u64),
    frame: Frame,
}

/// Frames waiting in the qos stages of directions, by handle.
#[derive(Default)]
struct Held {
    frames: FxHashMap<u64, (Frame, (u32, u64))>,
    next_id: u64,
}

/// A direction, named by where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hop {
    /// Link `l`, direction `dir`.
    Link(u32, u8),
    /// Member `m` of segment `g`, direction `dir` (0 egress, 1 ingress).
    Member(u32, u32, u8),
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

/// Offer a frame to one direction at `now`: count it, check the MTU, split a
/// super-frame where per-frame impairments or the rate need it, and put every copy that
/// survives into `out`. The frame's bytes are shared, not copied, unless it is split or
/// corrupted.
fn impair(
    d: &mut LinkDir,
    c: &DirCounters,
    held: &mut Held,
    iface_mtu: u32,
    now: u64,
    frame: Frame,
    out: &mut Vec<Accepted>,
) {
    let eth = &frame[VNET_HDR_LEN..];
    let g = gso::frame_gso(&frame);
    let (frames, bytes) = gso::wire_size(g.as_ref(), eth.len());
    c.rx_frames.fetch_add(frames as u64, Relaxed);
    c.rx_bytes.fetch_add(bytes, Relaxed);
    let imp = d.impairments();
    let mtu = imp.mtu.or((iface_mtu > 0).then_some(iface_mtu));
    if let (None, Some(mtu)) = (&g, mtu) {
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
                let burst_bytes =
                    (MAX_BURST_NS as u128 * rate as u128 / 8 / 1_000_000_000) as usize;
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
    if d.stage().is_some() {
        let classes = c.classes.read().map(|c| c.clone()).unwrap_or_default();
        for mut piece in pieces {
            let wire = gso::wire_size(g.as_ref(), piece.len() - VNET_HDR_LEN);
            let id = held.next_id;
            held.next_id += 1;
            let packet = classify::parse(&piece[VNET_HDR_LEN..]);
            let a = match d.offer_classed(
                now,
                id,
                &packet,
                Offer { wire_frames: wire.0, wire_bytes: wire.1 },
            ) {
                Ok(a) => a,
                Err(cause) => {
                    drop_counter(c, cause).fetch_add(wire.0 as u64, Relaxed);
                    continue;
                }
            };
            let Some(k) = classes.get(a.class) else { continue };
            k.rx_frames.fetch_add(wire.0 as u64, Relaxed);
            k.rx_bytes.fetch_add(wire.1, Relaxed);
            let (kc, dc) = match a.verdict {
                Ok(()) => {
                    if let Some(dscp) = a.remark {
                        classify::set_dscp(
                            &mut Arc::make_mut(&mut piece)[VNET_HDR_LEN..],
                            &packet,
                            dscp,
                        );
                        k.remarked.fetch_add(wire.0 as u64, Relaxed);
                    }
                    held.frames.insert(id, (piece, wire));
                    continue;
                }
                Err(Refusal::Police) => (&k.drop_police, &c.drop_police),
                Err(Refusal::Red) => (&k.drop_red, &c.drop_queue),
                Err(Refusal::Queue) => (&k.drop_queue, &c.drop_queue),
            };
            kc.fetch_add(wire.0 as u64, Relaxed);
            dc.fetch_add(wire.0 as u64, Relaxed);
        }
        drain_stage(d, c, &classes, held, now, out);
    } else {
        for piece in pieces {
            // The super-frame's headers and MSS hold for each of its pieces.
            let (pf, pb) = gso::wire_size(g.as_ref(), piece.len() - VNET_HDR_LEN);
            let o = d.offer(now, Offer { wire_frames: pf, wire_bytes: pb });
            accept(c, now, o, piece, (pf, pb), out);
        }
    }
    let (qf, qb) = d.queue_depth(now);
    c.queue_frames.store(qf, Relaxed);
    c.queue_bytes.store(qb, Relaxed);
    c.queue_frames_max.fetch_max(qf, Relaxed);
}

fn drop_counter(c: &DirCounters, cause: DropCause) -> &std::sync::atomic::AtomicU64 {
    match cause {
        DropCause::Loss => &c.drop_loss,
        DropCause::Queue => &c.drop_queue,
        DropCause::Down => &c.drop_down,
    }
}

/// Count a direction's outcome for one piece (offered at `since`) and put the copies
/// that survive into `out`, corrupted where the model says.
fn accept(
    c: &DirCounters,
    since: u64,
    o: LinkOutcome,
    piece: Frame,
    (pf, pb): (u32, u64),
    out: &mut Vec<Accepted>,
) {
    if o.duplicate.is_some() {
        c.duplicated.fetch_add(pf as u64, Relaxed);
    }
    for copy in [Some(o.first), o.duplicate].into_iter().flatten() {
        match copy {
            Err(cause) => {
                drop_counter(c, cause).fetch_add(pf as u64, Relaxed);
            }
            Ok(dl) => {
                c.delay_hist[delay_bucket(dl.at_ns.saturating_sub(since))]
                    .fetch_add(pf as u64, Relaxed);
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

/// The frames whose serialization on a qos direction started by `now`: counted per
/// class, and on to the wire after the stage.
fn drain_stage(
    d: &mut LinkDir,
    c: &DirCounters,
    classes: &[ClassCounters],
    held: &mut Held,
    now: u64,
    out: &mut Vec<Accepted>,
) {
    while let Some(Left { id, arrival_ns, class, waited_ns, outcome }) = d.poll_left(now) {
        let Some((piece, wire)) = held.frames.remove(&id) else { continue };
        if let Some(k) = class.and_then(|k| classes.get(k)) {
            k.tx_frames.fetch_add(wire.0 as u64, Relaxed);
            k.tx_bytes.fetch_add(wire.1, Relaxed);
            k.wait_hist[delay_bucket(waited_ns)].fetch_add(wire.0 as u64, Relaxed);
        }
        accept(c, arrival_ns, outcome, piece, wire, out);
    }
    if let Some(s) = d.stage() {
        for (i, k) in classes.iter().enumerate() {
            k.queue_frames.store(s.backlog(i).0, Relaxed);
        }
    }
}

/// A direction's impairments less an `mtu` that its interfaces have anyway (`iface_mtu`,
/// 0: none): the engine drops frames above the interface's MTU with or without it, and so
/// does the kernel path (the driver's kernel routes carry the MTU, see
/// [`Core::iface_mtu`]).
fn beyond_interface(d: &LinkDir, iface_mtu: u32) -> Impairments {
    let mut imp = d.impairments().clone();
    if imp.mtu.is_some_and(|m| iface_mtu > 0 && m >= iface_mtu) {
        imp.mtu = None;
    }
    imp
}

/// A direction needs no emulation: up, with no impairment at all but its shaper's choice
/// and its interfaces' MTU (what puts it on the kernel path, unless captured).
fn unemulated(d: &LinkDir, iface_mtu: u32) -> bool {
    let imp = beyond_interface(d, iface_mtu);
    d.is_up() && imp == Impairments { shaper: imp.shaper, ..Default::default() }
}

/// The kernel's token bucket for a direction that is up, whose one impairment is its
/// rate (with a queue limit) and that asks for the kernel's shaper; `mtu`: the link's
/// (0: 1500).
fn kernel_shape(d: &LinkDir, mtu: u32) -> Option<Shape> {
    let imp = &beyond_interface(d, mtu);
    let rate_bps = imp.rate_bps?;
    let only_rate = Impairments {
        rate_bps: imp.rate_bps,
        queue: imp.queue,
        shaper: Shaper::Kernel,
        ..Default::default()
    };
    if !d.is_up() || *imp != only_rate || rate_bps == 0 {
        return None;
    }
    // A frame of the MTU with its Ethernet and VLAN headers.
    let frame_bytes = u64::from(if mtu == 0 { 1500 } else { mtu }) + 18;
    let at_rate = |ns: u64| (ns as u128 * rate_bps as u128 / 8 / 1_000_000_000) as u64;
    let mut burst_bytes = at_rate(KERNEL_BURST_NS).max(2 * frame_bytes);
    if at_rate(SUPER_FRAME_BURST_NS) >= SUPER_FRAME_BYTES {
        burst_bytes = burst_bytes.max(SUPER_FRAME_BYTES);
    }
    let limit_bytes = match imp.queue_limit() {
        QueueLimit::Packets(n) => n.saturating_mul(FULL_FRAME_BYTES),
        QueueLimit::Bytes(b) => b,
    };
    Some(Shape {
        rate_bps,
        burst_bytes,
        limit_bytes: limit_bytes.clamp(frame_bytes, u64::from(u32::MAX)),
    })
}

/// The sans-IO data path of one shard (see the module documentation).
#[derive(Default)]
pub struct Core {
    ports: Vec<Port>,
    links: Vec<LinkState>,
    segments: Vec<SegState>,
    counters: Vec<Arc<DirCounters>>,
    /// Indices of the wireless segments.
    radios: Vec<u32>,
    /// LAN segments whose switch is the snooping querier (it sends queries on its own).
    queriers: Vec<u32>,
    heap: BinaryHeap<Pending>,
    seq: u64,
    /// Scratch list of accepted copies.
    accepted: Vec<Accepted>,
    watches: Vec<Watch>,
    events: VecDeque<Event>,
    /// Frames in qos stages, and the directions that have one.
    held: Held,
    qos_hops: Vec<Hop>,
    /// The latest time the driver gave (for commands, which come without one).
    now_ns: u64,
    trunks: Vec<TrunkState>,
    /// Trunks with receivers pending, and scratch space for radio deliveries through
    /// trunks: (trunk, frame id, member, time).
    trunks_pending: Vec<u32>,
    radio_remote: Vec<(u32, u64, u32, u64, Frame)>,
    spurs: Vec<SpurGroup>,
    /// Scratch list of the members a [`SpurWay::Flood`] goes to.
    spur_flood: Vec<u32>,
}

impl Core {
    pub fn new() -> Core {
        Core::default()
    }

    fn port(&mut self, owner: Owner) -> PortId {
        self.ports.push(Port { owner, watched: false });
        (self.ports.len() - 1) as PortId
    }

    fn counter(&mut self) -> u32 {
        self.counters.push(Arc::new(DirCounters::default()));
        (self.counters.len() - 1) as u32
    }

    /// Add a link; returns the ports of its sides a and b.
    pub fn add_link(&mut self, cfg: LinkConfig) -> [PortId; 2] {
        let link = self.links.len() as u32;
        let ports =
            [self.port(Owner::Link { link, side: 0 }), self.port(Owner::Link { link, side: 1 })];
        let counters = [self.counter(), self.counter()];
        let dirs =
            [LinkDir::new(cfg.forward, cfg.seeds[0]), LinkDir::new(cfg.reverse, cfg.seeds[1])];
        let mut transit_ns = [0; 2];
        if let Some((side, t)) = cfg.remote {
            transit_ns[side.min(1)] = t;
        }
        let kernel = cfg.kernel_path.then_some([Path::Engine; 2]);
        let remote = cfg.remote.map(|(side, _)| side.min(1));
        let spur = cfg.spur.filter(|_| remote == Some(1)).map(|sp| {
            let g = match self.spurs.iter().position(|g| g.segment == sp.segment) {
                Some(g) => g,
                None => {
                    self.spurs.push(SpurGroup {
                        segment: sp.segment,
                        aging_ns: sp.aging_ns,
                        ports: Vec::new(),
                        switch: None,
                    });
                    self.spurs.len() - 1
                }
            };
            (g as u32, self.spurs[g].add(link, sp.vlan))
        });
        self.links.push(LinkState {
            ports,
            dirs,
            counters,
            mtu: cfg.mtu,
            kernel,
            kernel_shaper: cfg.kernel_shaper,
            transit_ns,
            remote,
            spur,
        });
        self.track_qos(Hop::Link(link, 0));
        self.track_qos(Hop::Link(link, 1));
        self.choose_paths(link as usize);
        ports
    }

    /// Whether each direction of link `l` needs the engine, told to the driver when that
    /// changes: a direction goes by the kernel while it has no impairment, is up and
    /// neither end is captured, and through the kernel's token bucket while the same
    /// holds but for a rate whose shaper is the kernel's. Of a link to another machine,
    /// only the direction from here, and never through a token bucket (the driver sends
    /// it through the kernel's tunnel); the other machine decides the other.
    fn choose_paths(&mut self, l: usize) {
        let link = &self.links[l];
        let Some(now) = link.kernel else { return };
        let watched = link.ports.iter().any(|&p| self.ports[p as usize].watched);
        let want = [0, 1].map(|d| {
            match kernel_shape(&link.dirs[d], link.mtu)
                .filter(|_| link.kernel_shaper && link.remote.is_none())
            {
                _ if watched || link.remote == Some(d) => Path::Engine,
                _ if unemulated(&link.dirs[d], link.mtu) => Path::Kernel,
                Some(shape) => Path::Shaped(shape),
                None => Path::Engine,
            }
        });
        for d in 0..2 {
            if want[d] != now[d] {
                self.events.push_back(Event::Path { port: link.ports[d], path: want[d] });
                let c = &self.counters[link.counters[d] as usize];
                // (Toward another machine the driver says when the kernel carries it:
                // [`Core::set_kernel_carried`].)
                c.kernel_path.store(want[d].in_kernel() && link.remote.is_none(), Relaxed);
                c.kernel_shaper.store(matches!(want[d], Path::Shaped(_)), Relaxed);
            }
        }
        self.links[l].kernel = Some(want);
    }

    /// The direction from link end `port` (toward another machine) goes through the
    /// kernel now (`yes`), or through the engine: what its counters say.
    pub fn set_kernel_carried(&mut self, port: PortId, yes: bool) {
        if let Some(Owner::Link { link, side }) = self.ports.get(port as usize).map(|p| p.owner) {
            let c = self.links[link as usize].counters[side as usize];
            self.counters[c as usize].kernel_path.store(yes, Relaxed);
        }
    }

    /// The MTU of the interface at link or LAN port `port` (bytes of IP packet; 0: none),
    /// which frames on its kernel path must not exceed either.
    pub fn iface_mtu(&self, port: PortId) -> u32 {
        match self.ports.get(port as usize).map(|p| p.owner) {
            Some(Owner::Link { link, .. }) => self.links[link as usize].mtu,
            Some(Owner::Member { seg, member }) => {
                self.segments[seg as usize].members[member as usize].mtu
            }
            _ => 0,
        }
    }

    /// Whether a link or LAN with a kernel path has something on the engine's path now
    /// (its driver must have the engine's devices for it); false without a kernel path.
    pub fn needs_engine(&self, target: Target) -> bool {
        match target {
            Target::Link(l) => {
                self.links[l].kernel.is_some_and(|k| !k.iter().all(|p| p.in_kernel()))
            }
            Target::Member(g, _) => self.segments[g].kernel == Some(false),
        }
    }

    /// Add a segment; returns the port of each member.
    pub fn add_segment(&mut self, cfg: SegmentConfig) -> Vec<PortId> {
        let seg = self.segments.len() as u32;
        let ports_cfg: Vec<PortConfig> =
            cfg.members.iter().map(|m| PortConfig { vlan: m.vlan }).collect();
        let mut members = Vec::with_capacity(cfg.members.len());
        for (i, m) in cfg.members.into_iter().enumerate() {
            let port = self.port(Owner::Member { seg, member: i as u32 });
            let counters = [self.counter(), self.counter()];
            members.push(MemberState {
                port,
                dirs: [LinkDir::new(m.egress, m.seeds[0]), LinkDir::new(m.ingress, m.seeds[1])],
                counters,
                mtu: m.mtu,
                remote: m.remote,
                trunk: None,
                bucket_in: None,
                egress_path: Path::Engine,
            });
        }
        let capacity = cfg.capacity_bps.map(|rate| {
            LinkDir::new(Impairments { rate_bps: Some(rate), ..Default::default() }, 0)
        });
        let radio = cfg.radio.map(|(mc, pos)| {
            let groups =
                (cfg.snooping != Snooping::Off).then(|| vec![FxHashSet::default(); pos.len()]);
            Box::new(Channel {
                medium: Medium::new(mc, &pos),
                frames: FxHashMap::default(),
                next_id: 0,
                macs: FxHashMap::default(),
                outcomes: Vec::new(),
                groups,
            })
        });
        if radio.is_some() {
            self.radios.push(seg);
        }
        let mut switch = Switch::new(&ports_cfg, cfg.aging_ns);
        if radio.is_none() {
            switch.set_snooping(cfg.snooping);
            switch.set_query_families(true, !cfg.ipv6_off);
            if cfg.snooping == Snooping::Querier {
                self.queriers.push(seg);
            }
        }
        let ports = members.iter().map(|m| m.port).collect();
        let member_count = members.len() as u32;
        let spans = members.iter().any(|m| m.remote.is_some());
        let kernel = (cfg.kernel_path && radio.is_none() && !spans).then_some(false);
        self.segments.push(SegState {
            switch,
            members,
            capacity,
            counters: Arc::new(SegCounters::default()),
            targets: Vec::new(),
            radio,
            kernel,
            kernel_shaper: cfg.kernel_shaper,
            far_switching: cfg.far_switching,
        });
        for m in 0..member_count {
            self.track_qos(Hop::Member(seg, m, 0));
            self.track_qos(Hop::Member(seg, m, 1));
        }
        self.choose_segment_path(seg as usize);
        ports
    }

    /// On a segment's machine: a trunk toward another machine serving `members` of
    /// segment `seg` (on another machine, each added with `remote`): the switch or
    /// channel sends each frame one copy through it, naming its receivers there, whose
    /// ingress is carried out on their machine ([`Core::add_trunk_in`]). Returns its port.
    pub fn add_trunk(&mut self, seg: usize, members: &[usize]) -> PortId {
        let trunk = self.trunks.len() as u32;
        let port = self.port(Owner::Trunk { trunk });
        for &m in members {
            if let Some(ms) = self.segments.get_mut(seg).and_then(|g| g.members.get_mut(m)) {
                ms.trunk = Some(trunk);
            }
        }
        self.trunks.push(TrunkState {
            port,
            transit_ns: 0,
            pending: Vec::new(),
            links: FxHashMap::default(),
        });
        port
    }

    /// On the members' machine: the far end of a trunk, handing each copy to the ingress
    /// of the members it names — (member, link), the link's reverse direction being the
    /// member's ingress and its side a the member's interface. Returns its port.
    pub fn add_trunk_in(&mut self, members: &[(u32, usize)]) -> PortId {
        let trunk = self.trunks.len() as u32;
        let port = self.port(Owner::Trunk { trunk });
        let links = members.iter().map(|&(m, l)| (m, l as u32)).collect();
        self.trunks.push(TrunkState { port, transit_ns: 0, pending: Vec::new(), links });
        port
    }

    /// Send one copy of `frame` (due at `at_ns`) through every trunk with receivers
    /// pending, early by its transit.
    fn flush_trunks(&mut self, at_ns: u64, wire: (u32, u64), frame: &Frame) {
        for k in std::mem::take(&mut self.trunks_pending) {
            let t = &mut self.trunks[k as usize];
            let pending = std::mem::take(&mut t.pending);
            let (port, at) =
                (t.port, at_ns.saturating_sub(t.transit_ns).max(self.now_ns.min(at_ns)));
            let behind = (at + t.transit_ns).saturating_sub(at_ns).min(u32::MAX as u64) as u32;
            for chunk in pending.chunks(TRUNK_MAX_RECEIVERS) {
                let mut f = Vec::with_capacity(frame.len() + chunk.len() * 8 + 6);
                f.extend_from_slice(frame);
                for &(m, off) in chunk {
                    f.extend_from_slice(&m.to_be_bytes());
                    f.extend_from_slice(&off.to_be_bytes());
                }
                f.extend_from_slice(&behind.to_be_bytes());
                f.extend_from_slice(&(chunk.len() as u16).to_be_bytes());
                self.push(
                    Accepted { at_ns: at, wire, frame: Arc::new(f) },
                    Action::Deliver { port },
                );
            }
        }
    }

    /// A member's copy to the trunk toward its machine, if it has one (true).
    fn send_to_trunk(&mut self, seg: u32, member: u32, offset_ns: u32) -> bool {
        let Some(k) = self.segments[seg as usize].members[member as usize].trunk else {
            return false;
        };
        let t = &mut self.trunks[k as usize];
        if t.pending.is_empty() {
            self.trunks_pending.push(k);
        }
        t.pending.push((member, offset_ns));
        true
    }

    /// A copy through trunk `k` at `now`: each member it names gets it in its ingress.
    fn receive_from_trunk(&mut self, now: u64, k: u32, mut frame: Vec<u8>) {
        let n = frame.len();
        let Some(count) = frame
            .get(n.saturating_sub(2)..)
            .and_then(|b| b.try_into().ok())
            .map(u16::from_be_bytes)
        else {
            return;
        };
        let list = count as usize * 8 + 6;
        if count == 0 || n < MIN_FRAME + list {
            return;
        }
        let be32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as u64;
        let entries: Vec<(u32, u64)> = frame[n - list..n - 6]
            .chunks_exact(8)
            .map(|e| (be32(e) as u32, be32(&e[4..])))
            .collect();
        let at = now.saturating_sub(be32(&frame[n - 6..]));
        frame.truncate(n - list);
        let frame = Arc::new(frame);
        let wire = gso::wire_size(gso::frame_gso(&frame).as_ref(), frame.len() - VNET_HDR_LEN);
        let src = frame.get(VNET_HDR_LEN + 6..VNET_HDR_LEN + 12).map(mac);
        for (m, off) in entries {
            let Some(&link) = self.trunks[k as usize].links.get(&m) else { continue };
            // The switch hands it to this member: its source is not behind it, and is
            // elsewhere unless a member here sent from it lately (its own multicast).
            if let (Some((g, port)), Some(src)) =
                (self.links.get(link as usize).and_then(|l| l.spur), src)
            {
                let (sw, ports) = self.spurs[g as usize].parts();
                let here = sw
                    .lookup(now, port, src)
                    .is_some_and(|p| p != port && ports[p as usize].1.is_some());
                if !here {
                    let uplink = ports
                        .iter()
                        .position(|(c, l)| l.is_none() && c.vlan == ports[port as usize].0.vlan)
                        .expect("every VLAN has its uplink");
                    sw.learn(now, uplink as u32, src);
                }
            }
            self.push(
                Accepted { at_ns: at + off, wire, frame: frame.clone() },
                Action::Ingress { link },
            );
        }
    }

    /// A frame from a trunk reaches link `l`'s reverse direction (a member's ingress) at `t`.
    fn link_ingress(&mut self, t: u64, l: u32, frame: Frame) {
        let port = self.links[l as usize].ports[0];
        if self.ports[port as usize].watched {
            self.capture(port, t, false, CapturePoint::Before, &frame);
        }
        let mut acc = std::mem::take(&mut self.accepted);
        let link = &mut self.links[l as usize];
        impair(
            &mut link.dirs[1],
            &self.counters[link.counters[1] as usize],
            &mut self.held,
            link.mtu,
            t,
            frame,
            &mut acc,
        );
        self.finish(Hop::Link(l, 1), t, &mut acc);
        self.accepted = acc;
    }

    fn dir(&self, hop: Hop) -> (&LinkDir, u32) {
        match hop {
            Hop::Link(l, d) => {
                let l = &self.links[l as usize];
                (&l.dirs[d as usize], l.counters[d as usize])
            }
            Hop::Member(g, m, d) => {
                let m = &self.segments[g as usize].members[m as usize];
                (&m.dirs[d as usize], m.counters[d as usize])
            }
        }
    }

    /// Keep the list of directions with a qos stage, and their class counters, as the
    /// direction's impairments say.
    fn track_qos(&mut self, hop: Hop) {
        let (d, ci) = self.dir(hop);
        let names = d.stage().map(|s| s.class_names());
        let c = &self.counters[ci as usize];
        let same =
            c.classes.read().is_ok_and(|k| k.iter().map(|k| &k.name).eq(names.iter().flatten()));
        if !same {
            if let Ok(mut k) = c.classes.write() {
                *k = names
                    .iter()
                    .flatten()
                    .map(|name| ClassCounters { name: name.clone(), ..Default::default() })
                    .collect();
            }
        }
        let listed = self.qos_hops.contains(&hop);
        if names.is_some() && !listed {
            self.qos_hops.push(hop);
        } else if names.is_none() && listed {
            self.qos_hops.retain(|h| *h != hop);
        }
    }

    /// Hand what a direction's qos stage let go by `now` to the wire after it.
    fn step_hop(&mut self, hop: Hop, now: u64) {
        let mut acc = std::mem::take(&mut self.accepted);
        let (d, ci) = match hop {
            Hop::Link(l, dir) => {
                let l = &mut self.links[l as usize];
                (&mut l.dirs[dir as usize], l.counters[dir as usize])
            }
            Hop::Member(g, m, dir) => {
                let m = &mut self.segments[g as usize].members[m as usize];
                (&mut m.dirs[dir as usize], m.counters[dir as usize])
            }
        };
        let c = &self.counters[ci as usize];
        let classes = c.classes.read().map(|k| k.clone()).unwrap_or_default();
        drain_stage(d, c, &classes, &mut self.held, now, &mut acc);
        let (qf, qb) = d.queue_depth(now);
        c.queue_frames.store(qf, Relaxed);
        c.queue_bytes.store(qb, Relaxed);
        self.finish(hop, now, &mut acc);
        self.accepted = acc;
    }

    /// Schedule the copies a direction accepted toward where it leads: a link's far
    /// side (early by the underlay's delay when that is on another machine), a
    /// segment's switch, or a member's interface.
    fn finish(&mut self, hop: Hop, now: u64, acc: &mut Vec<Accepted>) {
        let (action, early) = match hop {
            Hop::Link(l, dir) => {
                let (l, dir) = (&self.links[l as usize], dir as usize);
                (
                    Action::Write { port: l.ports[1 - dir], counter: l.counters[dir] },
                    Some(l.transit_ns[1 - dir]),
                )
            }
            Hop::Member(seg, member, 0) => (Action::Switch { seg, member }, None),
            Hop::Member(seg, member, _) => {
                let m = &self.segments[seg as usize].members[member as usize];
                (Action::Write { port: m.port, counter: m.counters[1] }, m.remote)
            }
        };
        let spur = match hop {
            Hop::Link(l, 0) => self.links[l as usize].spur.map(|s| (l, s)),
            _ => None,
        };
        for mut a in acc.drain(..) {
            if let Some((from, (g, port))) = spur {
                match self.spur_switch(g, port, now, &a.frame) {
                    SpurWay::Here(to) => {
                        self.push(a, Action::Local { from: Some(from), to });
                        continue;
                    }
                    SpurWay::Flood => {
                        // (Counted as sent once: by the copy to the switch.)
                        let targets = std::mem::take(&mut self.spur_flood);
                        for &to in &targets {
                            self.push(
                                Accepted { at_ns: a.at_ns, wire: a.wire, frame: a.frame.clone() },
                                Action::Local { from: None, to },
                            );
                        }
                        self.spur_flood = targets;
                    }
                    SpurWay::Switch => {}
                }
            }
            if let Some(early) = early {
                a.at_ns = a.at_ns.saturating_sub(early).max(now);
            }
            self.push(a, action);
        }
    }

    /// A frame a member sends toward its segment's switch elsewhere (from `port` of spur
    /// group `g`), at `now`: its source learnt, where it goes ([`Spur`]). Multicast goes
    /// to the segment's switch alone, whose snooping decides.
    fn spur_switch(&mut self, g: u32, port: u32, now: u64, frame: &[u8]) -> SpurWay {
        let Some(eth) = frame.get(VNET_HDR_LEN..VNET_HDR_LEN + 12) else { return SpurWay::Switch };
        let (dst, src) = (mac(eth), mac(&eth[6..]));
        let (sw, ports) = self.spurs[g as usize].parts();
        match sw.forward(now, port, dst, src) {
            _ if is_group(dst) && dst != BROADCAST => SpurWay::Switch,
            Forward::Unicast(p) => ports[p as usize].1.map_or(SpurWay::Switch, SpurWay::Here),
            // (Behind the sender's own port: the segment's switch drops it.)
            Forward::Filter => SpurWay::Switch,
            Forward::Flood(to) => {
                self.spur_flood.clear();
                self.spur_flood.extend(to.filter_map(|p| ports[p as usize].1));
                SpurWay::Flood
            }
        }
    }

    /// Whether LAN segment `g` needs the engine, told to the driver (for every member
    /// port) when that changes: the kernel switches it while no port of it has an
    /// impairment in either direction (but a rate given to the kernel's shaper, where
    /// the driver can shape), every port is up, none is captured and the LAN has no
    /// capacity limit. It is all or nothing: one switch decides for every frame of a
    /// LAN, so that its learning and snooping see all of it. While the kernel switches
    /// it, each port's directions are told apart: straight or through a bucket.
    fn choose_segment_path(&mut self, g: usize) {
        let seg = &self.segments[g];
        let Some(now) = seg.kernel else { return };
        // Per member, its egress and ingress paths on the kernel's bridge, if it can be there.
        let on_bridge = |m: &MemberState| -> Option<[Path; 2]> {
            if self.ports[m.port as usize].watched {
                return None;
            }
            let mut paths = [Path::Kernel; 2];
            for (d, path) in paths.iter_mut().enumerate() {
                if !unemulated(&m.dirs[d], m.mtu) {
                    *path = Path::Shaped(
                        kernel_shape(&m.dirs[d], m.mtu).filter(|_| seg.kernel_shaper)?,
                    );
                }
            }
            Some(paths)
        };
        let want: Option<Vec<[Path; 2]>> =
            if seg.capacity.is_none() { seg.members.iter().map(on_bridge).collect() } else { None };
        let Some(paths) = want else {
            if now {
                // What the engine writes for a port goes out through the port's plane
                // device too, which must not shape it: the buckets toward the nodes go.
                for m in seg.members.iter().filter(|m| m.bucket_in.is_some()) {
                    self.events.push_back(Event::Ingress { port: m.port, shape: None });
                }
                for m in &seg.members {
                    self.events.push_back(Event::Path { port: m.port, path: Path::Engine });
                    for c in m.counters {
                        self.counters[c as usize].kernel_path.store(false, Relaxed);
                        self.counters[c as usize].kernel_shaper.store(false, Relaxed);
                    }
                }
                let seg = &mut self.segments[g];
                for m in &mut seg.members {
                    m.egress_path = Path::Engine;
                    m.bucket_in = None;
                }
                // Back from the kernel's bridge: what the switch knew may be stale.
                seg.switch.restart();
                seg.kernel = Some(false);
            }
            return;
        };
        // Buckets toward the nodes first, then what the nodes send.
        let seg = &mut self.segments[g];
        for (m, p) in seg.members.iter_mut().zip(&paths) {
            let shape = match p[1] {
                Path::Shaped(s) => Some(s),
                _ => None,
            };
            if shape != m.bucket_in {
                self.events.push_back(Event::Ingress { port: m.port, shape });
                m.bucket_in = shape;
            }
        }
        for (m, p) in seg.members.iter_mut().zip(&paths) {
            if !now || m.egress_path != p[0] {
                self.events.push_back(Event::Path { port: m.port, path: p[0] });
                m.egress_path = p[0];
            }
            for (d, c) in m.counters.into_iter().enumerate() {
                self.counters[c as usize].kernel_path.store(true, Relaxed);
                self.counters[c as usize]
                    .kernel_shaper
                    .store(matches!(p[d], Path::Shaped(_)), Relaxed);
            }
        }
        seg.kernel = Some(true);
    }

    pub fn port_count(&self) -> usize {
        self.ports.len()
    }

    pub fn link_count(&self) -> usize {
        self.links.len()
    }

    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// The counters of a link's or member's two directions.
    pub fn counters(&self, target: Target) -> [Arc<DirCounters>; 2] {
        let c = match target {
            Target::Link(l) => self.links[l].counters,
            Target::Member(g, m) => self.segments[g].members[m].counters,
        };
        [self.counters[c[0] as usize].clone(), self.counters[c[1] as usize].clone()]
    }

    pub fn segment_counters(&self, seg: usize) -> Arc<SegCounters> {
        self.segments[seg].counters.clone()
    }

    /// The impairments in force on one direction.
    pub fn impairments(&self, target: Target, dir: Dir) -> &Impairments {
        match target {
            Target::Link(l) => self.links[l].dirs[dir].impairments(),
            Target::Member(g, m) => self.segments[g].members[m].dirs[dir].impairments(),
        }
    }

    /// A frame read from `port` at `now`. Frames shorter than [`MIN_FRAME`] are ignored.
    pub fn handle_frame(&mut self, now: u64, port: PortId, frame: Vec<u8>) {
        if frame.len() < MIN_FRAME || port as usize >= self.ports.len() {
            return;
        }
        let owner = self.ports[port as usize].owner;
        if let Owner::Trunk { .. } = owner {
            // (A trunk is a socket: what comes from it comes by handle_delivered.)
            return;
        }
        let frame = Arc::new(frame);
        if self.ports[port as usize].watched {
            self.capture(port, now, true, CapturePoint::After, &frame);
        }
        if let Owner::Link { link, side } = owner {
            let far = self.links[link as usize].ports[1 - side as usize];
            if self.ports[far as usize].watched {
                self.capture(far, now, false, CapturePoint::Before, &frame);
            }
        }
        self.now_ns = self.now_ns.max(now);
        let mut acc = std::mem::take(&mut self.accepted);
        let hop = match owner {
            Owner::Link { link, side } => {
                // Frames read at side a travel forward (dir 0) to side b, and vice versa.
                let l = &mut self.links[link as usize];
                let dir = side as usize;
                impair(
                    &mut l.dirs[dir],
                    &self.counters[l.counters[dir] as usize],
                    &mut self.held,
                    l.mtu,
                    now,
                    frame,
                    &mut acc,
                );
                Hop::Link(link, side)
            }
            Owner::Member { seg, member } => {
                let m = &mut self.segments[seg as usize].members[member as usize];
                impair(
                    &mut m.dirs[0],
                    &self.counters[m.counters[0] as usize],
                    &mut self.held,
                    m.mtu,
                    now,
                    frame,
                    &mut acc,
                );
                Hop::Member(seg, member, 0)
            }
            Owner::Trunk { .. } => unreachable!("returned above"),
        };
        self.finish(hop, now, &mut acc);
        self.accepted = acc;
    }

    /// A frame from another machine for `port`: a link end whose far side is there
    /// (that machine's core carried out the direction and counted it: the frame is
    /// handed out for `port` at once, and captures see it arrive), or a segment member
    /// that is there (its machine carried out the member's egress: the frame reaches the
    /// switch or radio channel now).
    pub fn handle_delivered(&mut self, now: u64, port: PortId, frame: Vec<u8>) {
        if frame.len() < MIN_FRAME || port as usize >= self.ports.len() {
            return;
        }
        self.now_ns = self.now_ns.max(now);
        let action = match self.ports[port as usize].owner {
            Owner::Member { seg, member } => Action::Switch { seg, member },
            Owner::Link { .. } => Action::Deliver { port },
            Owner::Trunk { trunk } => return self.receive_from_trunk(now, trunk, frame),
        };
        let frame = Arc::new(frame);
        let wire = gso::wire_size(gso::frame_gso(&frame).as_ref(), frame.len() - VNET_HDR_LEN);
        self.push(Accepted { at_ns: now, wire, frame }, action);
    }

    /// The underlay's one-way delay toward `port`, the side of a link on another
    /// machine, is now `transit_ns` (as measured): frames toward it leave that much
    /// before their delivery time from now on.
    pub fn set_transit(&mut self, port: PortId, transit_ns: u64) {
        match self.ports.get(port as usize).map(|p| p.owner) {
            Some(Owner::Link { link, side }) => {
                let l = &mut self.links[link as usize];
                l.transit_ns[side as usize] = transit_ns;
                // Frames toward side b go forward (direction 0), toward a in reverse.
                self.counters[l.counters[1 - side as usize] as usize]
                    .transit_ns
                    .store(transit_ns, Relaxed);
            }
            Some(Owner::Member { seg, member }) => {
                let m = &mut self.segments[seg as usize].members[member as usize];
                if m.remote.is_some() {
                    m.remote = Some(transit_ns);
                    self.counters[m.counters[1] as usize].transit_ns.store(transit_ns, Relaxed);
                }
            }
            Some(Owner::Trunk { trunk }) => self.trunks[trunk as usize].transit_ns = transit_ns,
            None => {}
        }
    }

    /// The counter of the direction that carries frames toward (`toward`) or from a
    /// port whose far side is on another machine.
    fn remote_counter(&self, port: PortId, toward: bool) -> Option<&DirCounters> {
        let c = match self.ports.get(port as usize)?.owner {
            Owner::Link { link, side } => {
                self.links[link as usize].counters[side as usize ^ toward as usize]
            }
            Owner::Member { seg, member } => {
                self.segments[seg as usize].members[member as usize].counters[toward as usize]
            }
            Owner::Trunk { .. } => return None,
        };
        Some(&self.counters[c as usize])
    }

    /// The underlay lost `lost` frames in all (so far) of those that came to `port` —
    /// the far side of a link, on another machine — from there: counted for the
    /// direction from that side.
    pub fn set_underlay_lost(&mut self, port: PortId, lost: u64) {
        // Frames from side a go forward (direction 0), from b in reverse; from a member,
        // by its egress; through a trunk, toward each member it serves (its ingress).
        if let Some(Owner::Trunk { trunk }) = self.ports.get(port as usize).map(|p| p.owner) {
            for &l in self.trunks[trunk as usize].links.values() {
                self.counters[self.links[l as usize].counters[1] as usize]
                    .underlay_lost
                    .store(lost, Relaxed);
            }
        } else if let Some(c) = self.remote_counter(port, false) {
            c.underlay_lost.store(lost, Relaxed);
        }
    }

    /// A probe the driver put at the tail of `port`'s input queue waited `wait_ns` there
    /// before it was read: counted for the direction that port feeds.
    pub fn note_input_wait(&mut self, port: PortId, wait_ns: u64) {
        let (c, d) = match self.ports.get(port as usize).map(|p| p.owner) {
            Some(Owner::Link { link, side }) => {
                let l = &self.links[link as usize];
                (l.counters[side as usize], &l.dirs[side as usize])
            }
            Some(Owner::Member { seg, member }) => {
                let m = &self.segments[seg as usize].members[member as usize];
                (m.counters[0], &m.dirs[0])
            }
            Some(Owner::Trunk { .. }) | None => return,
        };
        // The driver times a frame from its arrival (the time its kernel stamped on
        // it), so what it waited for the read is part of its delay, up to the least
        // delay the direction gives: only the rest makes it late.
        let imp = d.impairments();
        let excess = wait_ns.saturating_sub(imp.delay_ns.saturating_sub(imp.jitter.amount_ns));
        let c = &self.counters[c as usize];
        c.input_wait_hist[delay_bucket(excess)].fetch_add(1, Relaxed);
        c.input_wait_max_ns.fetch_max(wait_ns, Relaxed);
    }

    /// The tunnel toward `port` (a link side on another machine) carries datagrams of up
    /// to `bytes` of payload (probed): shown in the stats of the direction toward it.
    pub fn set_path_payload(&mut self, port: PortId, bytes: u64) {
        if let Some(c) = self.remote_counter(port, true) {
            c.path_payload.store(bytes, Relaxed);
        }
    }

    /// When the core next has something to do (lab ns), if anything.
    pub fn poll_timeout(&self) -> Option<u64> {
        let radio = self.radios.iter().filter_map(|&g| {
            self.segments[g as usize].radio.as_ref().and_then(|r| r.medium.next_event_ns())
        });
        // (A LAN the kernel switches has the kernel's querier.)
        let queries = self
            .queriers
            .iter()
            .filter(|&&g| self.segments[g as usize].kernel != Some(true))
            .filter_map(|&g| self.segments[g as usize].switch.next_query_ns());
        let qos = self.qos_hops.iter().filter_map(|&h| self.dir(h).0.next_event_ns());
        self.heap.peek().map(|p| p.at_ns).into_iter().chain(radio).chain(queries).chain(qos).min()
    }

    /// How far behind its schedule the core is at `now`: the age of the oldest thing due
    /// (0 when nothing is due). A driver that keeps up keeps this near zero.
    pub fn backlog_ns(&self, now: u64) -> u64 {
        self.poll_timeout().map_or(0, |t| now.saturating_sub(t))
    }

    /// Let time reach `now`: the radio channels carry out what is due. Frames due are
    /// then handed out by [`Core::poll_transmit`].
    pub fn handle_timeout(&mut self, now: u64) {
        self.now_ns = self.now_ns.max(now);
        for k in 0..self.qos_hops.len() {
            let hop = self.qos_hops[k];
            if self.dir(hop).0.next_event_ns().is_some_and(|t| t <= now) {
                self.step_hop(hop, now);
            }
        }
        for k in 0..self.queriers.len() {
            let g = self.queriers[k];
            if self.segments[g as usize].kernel == Some(true) {
                continue;
            }
            for (ports, eth) in self.segments[g as usize].switch.poll_queries(now) {
                // A query is the switch's own frame: it leaves through each port's
                // ingress direction (toward the node), impairments and all.
                let mut f = vec![0u8; VNET_HDR_LEN];
                f.extend_from_slice(&eth);
                let frame: Frame = Arc::new(f);
                let mut acc = std::mem::take(&mut self.accepted);
                for p in ports {
                    self.offer_to_member(g, p, now, frame.clone(), &mut acc);
                }
                self.accepted = acc;
            }
        }
        for k in 0..self.radios.len() {
            let g = self.radios[k];
            let r = self.segments[g as usize].radio.as_mut().expect("radio segment");
            if r.medium.next_event_ns().is_some_and(|t| t <= now) {
                r.medium.advance(now, &mut r.outcomes);
                self.radio_outcomes(g);
            }
        }
    }

    /// The next frame due by `now`, to be written to its port. Frames that reach a
    /// switch on the way are switched here, at their own time.
    pub fn poll_transmit(&mut self, now: u64) -> Option<Transmit> {
        while self.heap.peek().is_some_and(|p| p.at_ns <= now) {
            let p = self.heap.pop().expect("peeked");
            match p.action {
                Action::Switch { seg, member } => {
                    self.switch(p.at_ns, seg, member, p.wire, p.frame)
                }
                Action::Ingress { link } => self.link_ingress(p.at_ns, link, p.frame),
                Action::Local { from, to } => {
                    if let Some(from) = from {
                        let c = &self.counters[self.links[from as usize].counters[0] as usize];
                        c.tx_frames.fetch_add(p.wire.0 as u64, Relaxed);
                        c.tx_bytes.fetch_add(p.wire.1, Relaxed);
                    }
                    self.link_ingress(p.at_ns, to, p.frame);
                }
                Action::Deliver { port } => {
                    if self.ports[port as usize].watched {
                        self.capture(port, now, false, CapturePoint::After, &p.frame);
                    }
                    // Fidelity: how long the frame waited here since it arrived (the
                    // far machine judged the rest).
                    if let Owner::Link { link, side } = self.ports[port as usize].owner {
                        let l = &self.links[link as usize];
                        let wait = now.saturating_sub(p.at_ns);
                        let c = &self.counters[l.counters[1 - side as usize] as usize];
                        c.arrival_wait_hist[delay_bucket(wait)].fetch_add(p.wire.0 as u64, Relaxed);
                        c.arrival_wait_max_ns.fetch_max(wait, Relaxed);
                    }
                    return Some(Transmit {
                        port,
                        frame: p.frame,
                        at_ns: p.at_ns,
                        wire_frames: p.wire.0,
                        wire_bytes: p.wire.1,
                        counter: UNCOUNTED,
                    });
                }
                Action::Write { port, counter } => {
                    if self.ports[port as usize].watched {
                        self.capture(port, now, false, CapturePoint::After, &p.frame);
                    }
                    // Fidelity: how late the frame leaves compared with its schedule.
                    let late = now.saturating_sub(p.at_ns);
                    let c = &self.counters[counter as usize];
                    c.late_hist[delay_bucket(late)].fetch_add(p.wire.0 as u64, Relaxed);
                    c.late_max_ns.fetch_max(late, Relaxed);
                    return Some(Transmit {
                        port,
                        frame: p.frame,
                        at_ns: p.at_ns,
                        wire_frames: p.wire.0,
                        wire_bytes: p.wire.1,
                        counter,
                    });
                }
            }
        }
        None
    }

    /// The driver wrote `tx` (`ok`) or the device refused it.
    pub fn on_written(&mut self, tx: &Transmit, ok: bool) {
        let Some(c) = self.counters.get(tx.counter as usize) else { return };
        if ok {
            c.tx_frames.fetch_add(tx.wire_frames as u64, Relaxed);
            c.tx_bytes.fetch_add(tx.wire_bytes, Relaxed);
        } else {
            c.write_errors.fetch_add(1, Relaxed);
        }
    }

    /// The next thing the driver must carry out.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Carry out a command.
    pub fn apply(&mut self, cmd: Command) -> Applied {
        match cmd {
            Command::Patch { target, dir, patch } => {
                let now = self.now_ns;
                let d = &mut self.dirs(target)[dir.min(1)];
                let mut imp = d.impairments().clone();
                patch.apply_to(&mut imp);
                d.set_impairments(now, imp.clone());
                let hop = match target {
                    Target::Link(l) => Hop::Link(l as u32, dir.min(1) as u8),
                    Target::Member(g, m) => Hop::Member(g as u32, m as u32, dir.min(1) as u8),
                };
                // Frames a changed stage let go (or refused) leave now.
                self.step_hop(hop, now);
                self.track_qos(hop);
                match target {
                    Target::Link(l) => self.choose_paths(l),
                    Target::Member(g, _) => self.choose_segment_path(g),
                }
                return Applied::Impairments(imp);
            }
            Command::SetUp { target, up } => {
                for d in self.dirs(target).iter_mut() {
                    d.set_up(up);
                }
                let ports = match target {
                    Target::Link(l) => {
                        self.choose_paths(l);
                        self.links[l].ports.to_vec()
                    }
                    Target::Member(g, m) => {
                        let seg = &mut self.segments[g];
                        seg.switch.set_port_up(m as u32, up);
                        if let Some(r) = &mut seg.radio {
                            r.medium.set_up(m as u32, up, &mut r.outcomes);
                            self.radio_outcomes(g as u32);
                        }
                        self.choose_segment_path(g);
                        vec![self.segments[g].members[m].port]
                    }
                };
                // The interfaces see their carrier come and go, as on real hardware.
                self.events.extend(ports.into_iter().map(|port| Event::Carrier { port, up }));
            }
            Command::Positions { seg, positions } => {
                if let Some(r) = self.segments.get_mut(seg).and_then(|g| g.radio.as_mut()) {
                    if positions.len() == r.medium.positions().len() {
                        r.medium.set_positions(&positions);
                    }
                }
            }
            Command::Capture { id, target, side, iface, point } => {
                let port = match target {
                    Target::Link(l) => self.links[l].ports[side.min(1)],
                    Target::Member(g, m) => self.segments[g].members[m].port,
                };
                self.ports[port as usize].watched = true;
                self.watches.push(Watch { id, port, iface, point });
                match target {
                    Target::Link(l) => self.choose_paths(l),
                    Target::Member(g, _) => self.choose_segment_path(g),
                }
            }
            Command::Uncapture(id) => self.uncapture(&[id]),
        }
        Applied::Done
    }

    /// Positions, neighbours and per-pair counters of wireless segment `seg`.
    pub fn radio(&self, seg: usize) -> Option<RadioSnapshot> {
        let m = &self.segments.get(seg)?.radio.as_ref()?.medium;
        let n = m.positions().len() as u32;
        let mut pairs: Vec<(u32, u32, PairCounters)> =
            m.pairs().map(|((a, b), c)| (a, b, c)).collect();
        pairs.sort_by_key(|p| (p.0, p.1));
        Some(RadioSnapshot {
            positions: m.positions().to_vec(),
            neighbours: (0..n).map(|i| m.neighbours(i).to_vec()).collect(),
            pairs,
        })
    }

    fn dirs(&mut self, target: Target) -> &mut [LinkDir; 2] {
        match target {
            Target::Link(l) => &mut self.links[l].dirs,
            Target::Member(g, m) => &mut self.segments[g].members[m].dirs,
        }
    }

    fn uncapture(&mut self, ids: &[u64]) {
        self.watches.retain(|w| !ids.contains(&w.id));
        for p in &mut self.ports {
            p.watched = false;
        }
        for w in &self.watches {
            self.ports[w.port as usize].watched = true;
        }
        for l in 0..self.links.len() {
            self.choose_paths(l);
        }
        for g in 0..self.segments.len() {
            self.choose_segment_path(g);
        }
    }

    /// Copy a frame to the captures on `port`: `outgoing` frames to all of them,
    /// arriving ones to those at `point`.
    fn capture(
        &mut self,
        port: PortId,
        t_ns: u64,
        outgoing: bool,
        point: CapturePoint,
        frame: &Frame,
    ) {
        // What arrives at an interface on another machine is that machine's to record
        // (a capture there watches this side too, only to keep its frames off the
        // kernel path).
        if let (CapturePoint::After, false, Owner::Link { link, side }) =
            (point, outgoing, self.ports[port as usize].owner)
        {
            if self.links[link as usize].remote == Some(side as usize) {
                return;
            }
        }
        for w in self.watches.iter().filter(|w| w.port == port && (outgoing || w.point == point)) {
            self.events.push_back(Event::Capture {
                capture: w.id,
                iface: w.iface,
                t_ns,
                outgoing,
                frame: frame.clone(),
            });
        }
    }

    fn push(&mut self, a: Accepted, action: Action) {
        self.seq += 1;
        self.heap.push(Pending {
            at_ns: a.at_ns,
            seq: self.seq,
            action,
            wire: a.wire,
            frame: a.frame,
        });
    }

    /// Offer a copy to a member's ingress direction at `t` and schedule what survives.
    fn offer_to_member(
        &mut self,
        seg: u32,
        member: u32,
        t: u64,
        frame: Frame,
        acc: &mut Vec<Accepted>,
    ) {
        let port = self.segments[seg as usize].members[member as usize].port;
        if self.ports[port as usize].watched {
            self.capture(port, t, false, CapturePoint::Before, &frame);
        }
        let m = &mut self.segments[seg as usize].members[member as usize];
        impair(
            &mut m.dirs[1],
            &self.counters[m.counters[1] as usize],
            &mut self.held,
            m.mtu,
            t,
            frame,
            acc,
        );
        self.finish(Hop::Member(seg, member, 1), t, acc);
    }

    /// A frame reaches a segment's switch at `t`: it crosses the aggregate capacity, the
    /// switch decides its ports, and each of their ingress directions takes a copy that
    /// shares the frame's bytes.
    fn switch(&mut self, t: u64, seg: u32, member: u32, wire: (u32, u64), frame: Frame) {
        let g = &mut self.segments[seg as usize];
        // (A member on another machine: its machine counted its egress.)
        if g.members[member as usize].remote.is_none() {
            let sent = &self.counters[g.members[member as usize].counters[0] as usize];
            sent.tx_frames.fetch_add(wire.0 as u64, Relaxed);
            sent.tx_bytes.fetch_add(wire.1, Relaxed);
        }
        if g.radio.is_some() {
            self.send_on_air(t, seg, member, wire, frame);
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
        let mut targets = std::mem::take(&mut g.targets);
        let ctr = match g.switch.forward_frame(t, member, &frame[VNET_HDR_LEN..], &mut targets) {
            Delivery::Unicast => &g.counters.unicast,
            Delivery::Flood => &g.counters.flooded,
            Delivery::Multicast => &g.counters.multicast,
            Delivery::Filter => &g.counters.filtered,
        };
        ctr.fetch_add(wire.0 as u64, Relaxed);
        g.counters.learned.store(g.switch.learned() as u64, Relaxed);
        g.counters.learn_refused.store(g.switch.refused(), Relaxed);
        g.counters.groups.store(g.switch.group_count() as u64, Relaxed);
        g.counters.groups_refused.store(g.switch.groups_refused(), Relaxed);
        // Members on the sender's own machine had a broadcast or unicast frame there.
        let dst = frame.get(VNET_HDR_LEN..VNET_HDR_LEN + 6).map_or(0, mac);
        let had_it = g.members[member as usize]
            .trunk
            .filter(|_| g.far_switching && (!is_group(dst) || dst == BROADCAST));
        if let Some(k) = had_it {
            let members = &g.members;
            targets.retain(|&p| members[p as usize].trunk != Some(k));
        }
        let mut acc = std::mem::take(&mut self.accepted);
        for &p in &targets {
            if !self.send_to_trunk(seg, p, 0) {
                self.offer_to_member(seg, p, t_out, frame.clone(), &mut acc);
            }
        }
        self.accepted = acc;
        self.flush_trunks(t_out, wire, &frame);
        self.segments[seg as usize].targets = targets;
    }

    /// A frame reaches a wireless segment's channel: on the air every wire frame is its
    /// own transmission, queued at the sender's radio.
    fn send_on_air(&mut self, t: u64, seg: u32, member: u32, wire: (u32, u64), frame: Frame) {
        let g = &mut self.segments[seg as usize];
        let r = g.radio.as_mut().expect("radio segment");
        let gs = gso::frame_gso(&frame);
        let pieces: Vec<Frame> = match &gs {
            Some(gs) if wire.0 > 1 => gso::split(&frame, gs, 1).into_iter().map(Arc::new).collect(),
            _ => vec![frame],
        };
        for piece in pieces {
            let eth = &piece[VNET_HDR_LEN..];
            let (dst, src) = (vemu_switch::mac(&eth[0..6]), vemu_switch::mac(&eth[6..12]));
            r.macs.insert(src, member);
            r.note_reports(member, eth);
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
        g.counters.groups.store(r.group_count(), Relaxed);
    }

    /// Hand the frames a wireless channel delivered to their receivers' ingress
    /// directions, and forget those it is done with.
    fn radio_outcomes(&mut self, seg: u32) {
        let Some(r) = &mut self.segments[seg as usize].radio else { return };
        let mut outcomes = std::mem::take(&mut r.outcomes);
        let mut acc = std::mem::take(&mut self.accepted);
        for o in outcomes.drain(..) {
            let r = self.segments[seg as usize].radio.as_mut().expect("radio segment");
            match o {
                Outcome::Done { id } => {
                    r.frames.remove(&id);
                }
                Outcome::Deliver { id, receiver, at_ns } => {
                    let Some(frame) = r.frames.get(&id).cloned() else { continue };
                    if !r.takes(receiver, &frame[VNET_HDR_LEN..]) {
                        self.segments[seg as usize].counters.filtered.fetch_add(1, Relaxed);
                        continue;
                    }
                    match self.segments[seg as usize].members[receiver as usize].trunk {
                        Some(k) => self.radio_remote.push((k, id, receiver, at_ns, frame)),
                        None => self.offer_to_member(seg, receiver, at_ns, frame, &mut acc),
                    }
                }
            }
        }
        self.accepted = acc;
        // Receivers on other machines: one copy per machine and transmission, each
        // receiver at its own offset after the earliest.
        let mut remote = std::mem::take(&mut self.radio_remote);
        remote.sort_unstable_by_key(|&(k, id, m, at, _)| (id, k, at, m));
        for group in remote.chunk_by(|a, b| (a.0, a.1) == (b.0, b.1)) {
            let (first, frame) = (group[0].3, &group[0].4);
            for &(_, _, m, at, _) in group {
                self.send_to_trunk(seg, m, (at - first).min(u32::MAX as u64) as u32);
            }
            let wire = gso::wire_size(gso::frame_gso(frame).as_ref(), frame.len() - VNET_HDR_LEN);
            self.flush_trunks(first, wire, frame);
        }
        remote.clear();
        self.radio_remote = remote;
        if let Some(r) = &mut self.segments[seg as usize].radio {
            r.outcomes = outcomes;
        }
    }
}
