//! What a driver and the core exchange: configurations, commands, events, frames to
//! write, paths.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use vemu_link::{Impairments, ImpairmentsPatch};
use vemu_radio::medium::{MediumConfig, Neighbour, PairCounters};
use vemu_radio::Pos;

use crate::gso::VNET_HDR_LEN;

/// A port of the core: one node interface (a TAP device, to the driver).
pub type PortId = u32;

/// A frame as devices hand it over (virtio-net header + Ethernet frame), shared by the
/// copies a switch floods or a capture keeps.
pub type Frame = Arc<Vec<u8>>;

/// A rate-limited super-frame is split so that no piece occupies the wire longer than
/// this: a piece arrives whole when its last byte has crossed (as a NIC's interrupt
/// moderation and GRO hand a burst to the stack), so no wire frame comes more than this
/// after it would have alone — the fidelity monitor's default bound for a late frame. (100 µs
/// split every super-frame at 100 Mbit/s into single frames, and the copies, writes and
/// per-frame TCP receive work took the CPU of 32 such links on two cores:
/// docs/design.md, "One frame's way".)
pub const MAX_BURST_NS: u64 = 1_000_000;

/// How far ahead of the lab clock an 802.11 channel is decided when it is due. An 802.11
/// channel with stations backing off has an event every slot (9 µs for OFDM): waking the
/// engine for each cost a core at 50 saturated stations (bench/README.md, `wifi-cpu`).
/// Its decisions stay slot-exact on the lab clock and what it delivers is written at its
/// own time; only a frame a node sends meanwhile reaches its radio up to this late.
pub const RADIO_AHEAD_NS: u64 = 50_000;

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
    /// arrive at it; frames from it come in by [`Core::handle_delivered`](crate::Core::handle_delivered), their
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
    /// Its interface's MAC address, when known: a radio's own address in captures (the
    /// channel's table also maps the addresses a bridging access point passes on).
    pub mac: Option<[u8; 6]>,
    /// The member is on another machine: `Some(transit_ns)`. Its egress direction is
    /// carried out there (frames from it come in by [`Core::handle_delivered`](crate::Core::handle_delivered) as they
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
    /// The frames the emulation dropped on their way from or to the interface (the
    /// directions of its link or LAN port), each with its [`DropReason`].
    Drops,
    /// What a wireless member's radio decoded or sent (a segment with the 802.11 MAC):
    /// data, ACK, RTS and CTS frames as 802.11 frames behind radiotap headers
    /// ([`vemu_radio::wifi::monitor`]).
    Radio,
}

impl CapturePoint {
    /// As the API and the command line name it.
    pub fn name(self) -> &'static str {
        match self {
            CapturePoint::After => "after",
            CapturePoint::Before => "before",
            CapturePoint::Drops => "drops",
            CapturePoint::Radio => "radio",
        }
    }

    /// `after`, `before`, `drops`, `radio`, or several of them separated by commas (each
    /// once).
    pub fn parse_list(s: &str) -> Result<Vec<CapturePoint>, String> {
        let mut out = Vec::new();
        for p in s.split(',').map(str::trim) {
            let point = match p {
                "after" => CapturePoint::After,
                "before" => CapturePoint::Before,
                "drops" => CapturePoint::Drops,
                "radio" => CapturePoint::Radio,
                _ => return Err(format!("unknown capture point '{p}': after, before, drops or radio (or several, comma-separated)")),
            };
            if !out.contains(&point) {
                out.push(point);
            }
        }
        Ok(out)
    }
}

/// Why the emulation dropped a frame (what a capture at [`CapturePoint::Drops`] says
/// of each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DropReason {
    /// The random loss model (`loss:`).
    Loss,
    /// The Gilbert-Elliott loss model, in its good state.
    LossGood,
    /// The Gilbert-Elliott loss model, in its bad state (a burst).
    LossBad,
    /// The queue in front of the serializer (or a qos class's) was full.
    Queue,
    /// RED/WRED dropped it early (a qos class's `red:`).
    Red,
    /// A qos policer: over its rate.
    Police,
    /// The link or port was down.
    Down,
    /// Larger than the direction's MTU.
    Mtu,
    /// A radio channel: the sender's queue for the channel was full.
    RadioQueue,
    /// A radio channel: another transmission overlapped it at the receiver.
    Collision,
    /// A radio channel: too weak at the receiver (the propagation model's draw).
    Weak,
    /// A LAN: its shared capacity (`capacity:`) could not take it.
    Capacity,
    /// A LAN: its switch had no port to send it to (its destination is behind the
    /// sender's own port, or in no VLAN of another port).
    Switch,
    /// A radio channel (802.11 DCF): its sender gave up after its retry limit.
    RetryLimit,
}

impl DropReason {
    pub const ALL: [DropReason; 14] = [
        DropReason::Loss,
        DropReason::LossGood,
        DropReason::LossBad,
        DropReason::Queue,
        DropReason::Red,
        DropReason::Police,
        DropReason::Down,
        DropReason::Mtu,
        DropReason::RadioQueue,
        DropReason::Collision,
        DropReason::Weak,
        DropReason::Capacity,
        DropReason::Switch,
        DropReason::RetryLimit,
    ];

    /// Its name (as in JSON).
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Loss => "loss",
            DropReason::LossGood => "loss-good",
            DropReason::LossBad => "loss-bad",
            DropReason::Queue => "queue",
            DropReason::Red => "red",
            DropReason::Police => "police",
            DropReason::Down => "down",
            DropReason::Mtu => "mtu",
            DropReason::RadioQueue => "radio-queue",
            DropReason::Collision => "collision",
            DropReason::Weak => "weak",
            DropReason::Capacity => "capacity",
            DropReason::Switch => "switch",
            DropReason::RetryLimit => "retry-limit",
        }
    }

    /// In words, for a capture's comment.
    pub fn describe(self) -> &'static str {
        match self {
            DropReason::Loss => "random loss (the link's loss model)",
            DropReason::LossGood => "loss, Gilbert-Elliott model in its good state",
            DropReason::LossBad => "loss, Gilbert-Elliott model in its bad state (a burst)",
            DropReason::Queue => "queue full (the queue before the serializer)",
            DropReason::Red => "RED/WRED early drop",
            DropReason::Police => "policer: over its rate",
            DropReason::Down => "link down",
            DropReason::Mtu => "larger than the MTU",
            DropReason::RadioQueue => "radio: the sender's queue for the channel was full",
            DropReason::Collision => "radio: collision (another transmission overlapped it)",
            DropReason::Weak => "radio: signal too weak at the receiver (propagation model)",
            DropReason::Capacity => "LAN: its shared capacity was full",
            DropReason::Switch => {
                "LAN: the switch had no port for it (its destination is behind the sender's port)"
            }
            DropReason::RetryLimit => "radio: its sender gave up after the retry limit (802.11)",
        }
    }

    /// A byte for the wire (1…; 0 is "not a drop").
    pub fn code(self) -> u8 {
        DropReason::ALL.iter().position(|r| *r == self).expect("listed") as u8 + 1
    }

    pub fn from_code(code: u8) -> Option<DropReason> {
        DropReason::ALL.get((code as usize).checked_sub(1)?).copied()
    }
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
    /// The direction's impairments after a patch (boxed: a command's usual answer is
    /// `Done`).
    Impairments(Box<Impairments>),
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
    /// The direction from link end `port` (one given to [`Core::add_kernel_tunnel`](crate::Core::add_kernel_tunnel)) goes
    /// from now on through the kernel's tunnel to the other machine (`kernel`), or through
    /// the engine's; the driver says when it does ([`Core::set_kernel_carried`](crate::Core::set_kernel_carried)).
    /// `split`: the underlay carries the link's frames only in the pieces the kernel cuts
    /// its tunnel's packets into; the route lends the direction to the engine's TAP
    /// device when bulk TCP comes ([`LEND_IDLE_NS`](crate::LEND_IDLE_NS)).
    TunnelRoute { port: PortId, kernel: bool, split: bool },
    /// A copy for capture `capture`: `frame` (as devices hand it over; possibly a
    /// super-frame) was sent by (`outgoing`) or arrived at interface `iface` at `t_ns` —
    /// or, with `drop`, was dropped on its way from or to it, and why.
    Capture {
        capture: u64,
        iface: u32,
        t_ns: u64,
        outgoing: bool,
        frame: Frame,
        drop: Option<DropReason>,
    },
}

/// How long the kernel's token bucket may send back to back at its rate (at least two
/// frames): what lets it catch up when its timer fires late, and lets TCP's super-frames
/// through whole (a bucket cuts longer ones in wire frames, in software). Shorter, every
/// late wake-up is rate lost for good; 4 ms matches tbf's and htb's usual depth
/// (Mininet's links) — figures in bench/README.md, "The kernel's token buckets". The
/// engine's serializer catches up from its own schedule.
pub const KERNEL_BURST_NS: u64 = 4_000_000;

/// Where it is at most [`SUPER_FRAME_BURST_NS`] at the rate, the bucket holds at least
/// this: a TCP super-frame of 64 KiB with the headers of its ~45 segments, so that it
/// crosses whole. A bucket cuts a longer frame into wire frames in software, and on a
/// path without delay TCP sends 64 KiB super-frames at any rate (its TSO sizing grows
/// them as the round trip shrinks): with a smaller bucket every core is busy cutting
/// frames and links fall far below their rate (bench/README.md, "The kernel's token
/// buckets"). Mininet's htb lets super-frames through whole at any depth.
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
    pub(crate) counter: u32,
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
    /// Per member, what its 802.11 MAC did (its rate, retries, CW, drops) — a DCF
    /// channel's only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stations: Option<Vec<vemu_radio::wifi::dcf::StationStats>>,
    /// Per member, its part in infrastructure mode (a channel with access points).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bss: Option<Vec<vemu_radio::wifi::bss::MemberState>>,
    /// Infrastructure mode's events numbered after those asked for, with their numbers
    /// (the channel keeps the last [`vemu_radio::air::BSS_LOG`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bss_log: Vec<(u64, vemu_radio::wifi::bss::BssEvent)>,
    /// Per member of a hub: frames it sent, its collisions, frames it gave up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub: Option<Vec<vemu_radio::hub::HubStats>>,
}

#[cfg(test)]
mod point_tests {
    use super::CapturePoint;

    #[test]
    fn capture_points_are_named_alone_or_several() {
        assert_eq!(CapturePoint::parse_list("drops"), Ok(vec![CapturePoint::Drops]));
        assert_eq!(
            CapturePoint::parse_list("after, drops,after"),
            Ok(vec![CapturePoint::After, CapturePoint::Drops])
        );
        assert!(CapturePoint::parse_list("after,inside").unwrap_err().contains("'inside'"));
        assert!(CapturePoint::parse_list("").is_err());
        assert_eq!(CapturePoint::Before.name(), "before");
    }
}
