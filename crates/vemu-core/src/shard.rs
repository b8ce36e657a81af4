//! The [`Core`]: its state, and what comes in (frames, time, commands) and goes out.

use std::collections::VecDeque;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};
use vemu_link::{
    DropCause, Impairments, Left, LinkDir, Offer, Outcome as LinkOutcome, QueueLimit, Shaper,
    FULL_FRAME_BYTES,
};
use vemu_qos::classify;
use vemu_qos::stage::Refusal;
use vemu_radio::air::Air;
use vemu_radio::medium::{Outcome, PairCounters};
use vemu_switch::snoop::{classify, Class};
use vemu_switch::{is_group, mac, Delivery, Forward, Mac, PortConfig, Snooping, Switch, BROADCAST};

use crate::api::*;
use crate::counters::{delay_bucket, ClassCounters, DirCounters, SegCounters};
use crate::gso::{self, VNET_HDR_LEN};

mod hop;
mod impair;
mod link;
mod machines;
mod segment;
mod timeline;
mod tunnels;

pub use impair::is_routing;
use impair::*;
use timeline::Timeline;
pub use tunnels::{LEND_IDLE_NS, PROBES_EARLY, PROBE_EARLY_NS, PROBE_LATER_NS};

/// [`Transmit::counter`] of frames that another machine's core counted.
const UNCOUNTED: u32 = u32::MAX;

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
    /// Its interface's address, when known ([`MemberConfig::mac`]).
    mac: Option<[u8; 6]>,
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
    medium: Air,
    /// Frames the medium holds, by id.
    frames: FxHashMap<u64, Frame>,
    next_id: u64,
    /// Which member sent from a MAC address (unicast frames go to that member only).
    /// In infrastructure mode an access point's frames do not take a station's or an
    /// ad hoc member's address from it: a bridging access point sends on the air what
    /// its bridge floods, from the others' addresses too.
    macs: FxHashMap<u64, u32>,
    /// Infrastructure mode's events acted on so far ([`Air::bss_log`]).
    bss_seen: u64,
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
    /// Whether a frame from `member` with source address `src` is one it passes on for
    /// another member (an access point's bridge flooding a station's frame back on the
    /// air), not its own.
    fn relayed(&self, member: u32, src: u64) -> bool {
        use vemu_radio::wifi::bss::Role;
        let Some(infra) = self.medium.infra() else { return false };
        let ap = |m: u32| matches!(infra.role(m), Some(Role::Ap(_)));
        ap(member) && self.macs.get(&src).is_some_and(|&m| m != member && !ap(m))
    }
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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

/// A frame waiting for its time (in [`Core::waiting`], which keeps the time).
struct Pending {
    action: Action,
    /// Wire frames and bytes it stands for.
    wire: (u32, u64),
    frame: Frame,
}

/// One copy of a frame that a direction accepted: when it leaves, what it stands for.
struct Accepted {
    at_ns: u64,
    wire: (u32, u64),
    frame: Frame,
}

/// Frames waiting in the qos stages of directions, by handle; and the frames dropped
/// since the last hop was finished.
#[derive(Default)]
struct Held {
    frames: FxHashMap<u64, (Frame, (u32, u64))>,
    next_id: u64,
    drops: Drops,
}

/// The frames a direction dropped, kept only while a capture of drops runs.
#[derive(Default)]
struct Drops {
    keep: bool,
    frames: Vec<(Frame, DropReason)>,
}

impl Drops {
    fn note(&mut self, frame: &Frame, why: DropReason) {
        if self.keep {
            self.frames.push((frame.clone(), why));
        }
    }

    /// A drop of the link model's: why, in the capture's words.
    fn note_cause(&mut self, frame: &Frame, cause: DropCause, d: &LinkDir) {
        if self.keep {
            let why = match (cause, d.last_loss_state_bad()) {
                (DropCause::Loss, None) => DropReason::Loss,
                (DropCause::Loss, Some(false)) => DropReason::LossGood,
                (DropCause::Loss, Some(true)) => DropReason::LossBad,
                (DropCause::Queue, _) => DropReason::Queue,
                (DropCause::Down, _) => DropReason::Down,
            };
            self.frames.push((frame.clone(), why));
        }
    }
}

/// A direction, named by where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hop {
    /// Link `l`, direction `dir`.
    Link(u32, u8),
    /// Member `m` of segment `g`, direction `dir` (0 egress, 1 ingress).
    Member(u32, u32, u8),
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
    /// Frames waiting for their time, a lane per action.
    waiting: Timeline<Action, Pending>,
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
    /// Frames a segment (a LAN or a radio channel) dropped, for the captures of drops: (port, time,
    /// outgoing, frame, why).
    segment_drops: Vec<(PortId, u64, bool, Frame, DropReason)>,
    spurs: Vec<SpurGroup>,
    /// Scratch list of the members a [`SpurWay::Flood`] goes to.
    spur_flood: Vec<u32>,
    /// The tunnel ports' paths to other machines.
    tunnels: tunnels::Tunnels,
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
            if self.links[link as usize].remote.is_some() {
                self.lent_frame(port, now);
            }
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
        self.waiting.next_ns().into_iter().chain(radio).chain(queries).chain(qos).min()
    }

    /// How far behind its schedule the core is at `now`: the age of the oldest thing due
    /// (0 when nothing is due). A driver that keeps up keeps this near zero.
    pub fn backlog_ns(&self, now: u64) -> u64 {
        self.poll_timeout().map_or(0, |t| now.saturating_sub(t))
    }

    /// Let time reach `now`: the radio channels carry out what is due (and what follows
    /// within [`RADIO_AHEAD_NS`]). Frames due are
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
            let seg = &mut self.segments[g as usize];
            let r = seg.radio.as_mut().expect("radio segment");
            if let Some(due) = r.medium.next_event_ns().filter(|&t| t <= now) {
                // An 802.11 channel is decided ahead by RADIO_AHEAD_NS: what it delivers
                // meanwhile waits for its own time like any frame.
                let ahead = if r.medium.standard().is_some() {
                    // Fidelity: how long after its earliest due slot the medium was decided.
                    let late = now - due;
                    seg.counters.decide_late_hist[delay_bucket(late)].fetch_add(1, Relaxed);
                    seg.counters.decide_late_max_ns.fetch_max(late, Relaxed);
                    RADIO_AHEAD_NS
                } else {
                    0
                };
                r.medium.advance(now + ahead, &mut r.outcomes);
                self.radio_outcomes(g);
            }
        }
    }

    /// The next frame due by `now`, to be written to its port. Frames that reach a
    /// switch on the way are switched here, at their own time.
    pub fn poll_transmit(&mut self, now: u64) -> Option<Transmit> {
        while let Some((at_ns, p)) = self.waiting.pop_due(now) {
            match p.action {
                Action::Switch { seg, member } => self.switch(at_ns, seg, member, p.wire, p.frame),
                Action::Ingress { link } => self.link_ingress(at_ns, link, p.frame),
                Action::Local { from, to } => {
                    if let Some(from) = from {
                        let c = &self.counters[self.links[from as usize].counters[0] as usize];
                        c.tx_frames.fetch_add(p.wire.0 as u64, Relaxed);
                        c.tx_bytes.fetch_add(p.wire.1, Relaxed);
                    }
                    self.link_ingress(at_ns, to, p.frame);
                }
                Action::Deliver { port } => {
                    if self.ports[port as usize].watched {
                        self.capture(port, now, false, CapturePoint::After, &p.frame);
                    }
                    // Fidelity: how long the frame waited here since it arrived (the
                    // far machine judged the rest).
                    if let Owner::Link { link, side } = self.ports[port as usize].owner {
                        let l = &self.links[link as usize];
                        let wait = now.saturating_sub(at_ns);
                        let c = &self.counters[l.counters[1 - side as usize] as usize];
                        c.arrival_wait_hist[delay_bucket(wait)].fetch_add(p.wire.0 as u64, Relaxed);
                        c.arrival_wait_max_ns.fetch_max(wait, Relaxed);
                    }
                    return Some(Transmit {
                        port,
                        frame: p.frame,
                        at_ns,
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
                    let late = now.saturating_sub(at_ns);
                    let c = &self.counters[counter as usize];
                    c.late_hist[delay_bucket(late)].fetch_add(p.wire.0 as u64, Relaxed);
                    c.late_max_ns.fetch_max(late, Relaxed);
                    return Some(Transmit {
                        port,
                        frame: p.frame,
                        at_ns,
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
        loop {
            match self.events.pop_front()? {
                // A link end with a kernel tunnel: its own event says where it goes.
                Event::Path { port, path } if self.tunnel_path(port, path == Path::Kernel) => {}
                ev => return Some(ev),
            }
        }
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
                return Applied::Impairments(Box::new(imp));
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
                self.held.drops.keep |= point == CapturePoint::Drops;
                if let (CapturePoint::Radio, Target::Member(g, m)) = (point, target) {
                    if let Some(r) = &mut self.segments[g].radio {
                        r.medium.set_monitor(m as u32, true);
                    }
                }
                match target {
                    Target::Link(l) => self.choose_paths(l),
                    Target::Member(g, _) => self.choose_segment_path(g),
                }
            }
            Command::Uncapture(id) => self.uncapture(&[id]),
        }
        Applied::Done
    }

    fn dirs(&mut self, target: Target) -> &mut [LinkDir; 2] {
        match target {
            Target::Link(l) => &mut self.links[l].dirs,
            Target::Member(g, m) => &mut self.segments[g].members[m].dirs,
        }
    }

    fn uncapture(&mut self, ids: &[u64]) {
        self.watches.retain(|w| !ids.contains(&w.id));
        self.held.drops.keep = self.watches.iter().any(|w| w.point == CapturePoint::Drops);
        for p in &mut self.ports {
            p.watched = false;
        }
        for w in &self.watches {
            self.ports[w.port as usize].watched = true;
        }
        // Radios watched only while a capture of theirs goes on.
        for seg in &mut self.segments {
            let Some(r) = &mut seg.radio else { continue };
            for (m, member) in seg.members.iter().enumerate() {
                let on = self
                    .watches
                    .iter()
                    .any(|w| w.port == member.port && w.point == CapturePoint::Radio);
                r.medium.set_monitor(m as u32, on);
            }
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
        let seen = |w: &&Watch| {
            w.port == port
                && !matches!(w.point, CapturePoint::Drops | CapturePoint::Radio)
                && (outgoing || w.point == point)
        };
        for w in self.watches.iter().filter(seen) {
            self.events.push_back(Event::Capture {
                capture: w.id,
                iface: w.iface,
                t_ns,
                outgoing,
                frame: frame.clone(),
                drop: None,
            });
        }
    }

    fn push(&mut self, a: Accepted, action: Action) {
        self.waiting.push(a.at_ns, action, Pending { action, wire: a.wire, frame: a.frame });
    }
}
