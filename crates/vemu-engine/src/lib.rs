//! vemu's data plane. The data path of a shard is a sans-IO state machine,
//! [`core::Core`]: it owns a share of the links and segments, decides what happens to
//! every frame and when, on the lab clock it is handed. Each shard's driver
//! ([`driver`]) is one thread with one epoll set that feeds the core the frames its TAP
//! devices hand over and writes what the core hands out at the decided times. The
//! [`Engine`] starts the shards, places each link and segment on one of them and passes
//! the controller's commands on. An idle link or segment costs nothing: no thread, no
//! timer.

mod batch;
pub mod clock;
pub mod divert;
mod driver;

/// The sans-IO data path, its counters and wire formats: the `vemu-core` crate.
pub use vemu_core as core;
pub use vemu_core::{counters, gso, schedule, tunnel};

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use anyhow::{anyhow, Result};
use vemu_link::{Impairments, ImpairmentsPatch};
use vemu_radio::medium::MediumConfig;
use vemu_radio::Pos;

pub use crate::batch::WRITES_ENV;
pub use crate::clock::{monotonic_ns, LabClock};
pub use crate::core::{is_routing, CapturePoint, Dir, DropReason, RadioSnapshot, Target};
use crate::core::{Command, Core, LinkConfig, MemberConfig, SegmentConfig};
pub use crate::counters::{
    bucket_quantile_ns, DirCounters, DirStats, SegCounters, SegStats, DELAY_BUCKETS_NS,
};
pub use crate::driver::TUNNEL_FRAME_EXTRA;
pub use crate::driver::{Captured, PlaneDevs, FAULT_ENV, NORMAL_NICE};
use crate::driver::{Control, Far, PlanePort, PortDev, ShardHandle, TunnelPort};
pub use vemu_fastpath::{FastPath, Route, DENSE_BASE};
pub use vemu_switch::Snooping;

/// A link to emulate: the TAP devices of its two ends and what each direction does.
pub struct LinkSpec {
    /// Frames read here travel `forward` to `b`. `None` only for a link with `plane`
    /// devices whose TAP devices are not made yet (see [`MakeTaps`]).
    pub a: Option<OwnedFd>,
    pub b: Option<OwnedFd>,
    /// With the kernel fast path: the plane devices of ends a and b (the TAP devices
    /// above are then the engine's, in the plane).
    pub plane: Option<[PlaneDevs; 2]>,
    pub forward: Impairments,
    pub reverse: Impairments,
    /// Seeds of the forward and reverse random generators.
    pub seeds: [u64; 2],
    /// MTU of both ends' interfaces (see [`core::LinkConfig::mtu`]).
    pub mtu: u32,
    /// One side is on another machine: its descriptor above is `None`; the link's
    /// frames go through its shard's tunnel socket ([`RemoteEnd::socket`]).
    pub remote: Option<RemoteEnd>,
    /// With `remote` and the kernel fast path: the kernel's way to that machine.
    pub kernel_tunnel: Option<KernelTunnel>,
    /// A member here of a LAN switched on another machine ([`core::Spur`]).
    pub spur: Option<core::Spur>,
}

/// The kernel fast path of a link end here whose far side is on another machine: the
/// node's interface is a veth whose peer `local` is in the plane (the descriptor of
/// this side in [`LinkSpec`] is then its TAP device's, in the plane), and — when that
/// machine has the lab's VXLAN device too (`remote`: its underlay address) — while the
/// direction from here needs no emulation its frames go through the lab's VXLAN device
/// `vxlan` there, once the underlay's path is found to carry them whole; what that
/// machine sends this way arrives on the same device and goes straight to the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelTunnel {
    pub local: PlaneDevs,
    pub vxlan: u32,
    pub remote: Option<std::net::IpAddr>,
}

/// The side of a link that is on another machine (see [`tunnel`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteEnd {
    /// 0 = a, 1 = b.
    pub side: usize,
    /// The link's number in the lab (the same on every machine): its VNIs.
    pub link_id: u32,
    /// The underlay's one-way delay to that machine, ns.
    pub transit_ns: u64,
    /// Largest UDP payload the underlay's interface carries, bytes (the path may carry
    /// less: probed).
    pub payload: usize,
    /// The underlay is IPv6 (its headers are longer).
    pub ipv6: bool,
    /// The shard whose tunnel socket carries it (see [`Engine::start`]: one socket per
    /// shard for every link, member and trunk to other machines, their VNIs telling
    /// them apart), and the far end's socket: its datagrams go there, and only
    /// datagrams from there are taken.
    pub socket: usize,
    pub far: Option<std::net::SocketAddr>,
}

/// A lab's key for the datagrams between its machines' engines, and this machine's
/// number in the lab (each shard's datagrams carry it: [`tunnel::auth`]).
#[derive(Clone, Copy)]
pub struct TunnelKey {
    pub key: [u8; 32],
    pub machine: usize,
}

/// The port of the far end `r` of a tunnel, sending in direction `dir_out`, delivering
/// to port `deliver_to`.
fn tunnel_port(r: &RemoteEnd, dir_out: u8, deliver_to: u32) -> PortDev {
    PortDev::Tunnel(Box::new(TunnelPort::new(
        r.link_id, r.payload, r.ipv6, r.far, dir_out, deliver_to,
    )))
}

/// Shards an engine of `links` and `segments` runs on `cores` cores: what
/// [`Engine::start`] uses, and so how many tunnel sockets it takes.
pub fn shard_count(cores: usize, links: usize, segments: usize) -> usize {
    cores.clamp(1, (links + segments).max(1))
}

/// Makes the engine's TAP devices in the plane of both ends of a link, or of every
/// member of a LAN (numbers: the engine's, in the order given to [`Engine::start`]),
/// up and steered by the fast path's program: their indexes there and descriptors, in
/// the order of the ends or members. A link or LAN the kernel carries needs none — a lab
/// of 10,000 unimpaired links has no TAP device and holds no descriptor for its links —
/// so they are made when it first needs the engine (impairments set, taken down, a
/// capture), before the command that needs them reaches the shard, and kept until the
/// lab ends.
pub type MakeTaps = Arc<dyn Fn(TapsOf) -> Result<Vec<(u32, OwnedFd)>> + Send + Sync>;

/// Whose TAP devices [`MakeTaps`] makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TapsOf {
    Link(usize),
    Segment(usize),
    /// The fan-out device of shard `n` ([`vemu_fastpath::Route::FanOut`]): one.
    FanOut(usize),
}

/// The kernel fast path of a lab's links: its program and maps, and how to make the
/// engine's TAP devices of a link when they are needed.
#[derive(Clone)]
pub struct Fast {
    pub path: Arc<FastPath>,
    pub make_taps: MakeTaps,
    /// A packet socket in the plane: the engine sends probes on its TAP devices with it,
    /// which queue behind the frames waiting there (see [`driver`]'s input probes).
    pub probe: Option<Arc<OwnedFd>>,
}

/// A switched LAN segment (or, with `radio`, a wireless one) to emulate.
pub struct SegmentSpec {
    pub members: Vec<MemberSpec>,
    /// Aggregate capacity of the segment, bits/s.
    pub capacity_bps: Option<u64>,
    /// Learned MAC addresses are forgotten after this long without traffic, ns.
    pub aging_ns: u64,
    /// IGMP/MLD snooping of a LAN segment (a wireless one: its receivers' group filter).
    pub snooping: vemu_switch::Snooping,
    /// A radio channel instead of a switch, with the members' first positions.
    pub radio: Option<(MediumConfig, Vec<Pos>)>,
    /// With the kernel fast path, a LAN's plane devices, one per member (the TAP
    /// devices above are then the engine's, in the plane; the veths are ports of the
    /// LAN's bridge there).
    pub plane: Option<Vec<PlaneDevs>>,
    /// Toward each other machine with members (added with `remote`): one trunk.
    pub trunks: Vec<TrunkSpec>,
    /// Its members on each other machine are switched among themselves there
    /// ([`core::SegmentConfig::far_switching`], [`LinkSpec::spur`]).
    pub far_switching: bool,
    /// No member has IPv6 on: its querier sends IGMP queries only
    /// ([`core::SegmentConfig::ipv6_off`]).
    pub ipv6_off: bool,
}

/// A trunk of a segment whose switch or channel is here, toward the members `members`
/// (their numbers in the segment) on another machine: each frame crosses it once, with
/// the members that receive it ([`core::Core::add_trunk`]), through its shard's tunnel
/// socket; `remote.side` is 0.
pub struct TrunkSpec {
    pub remote: RemoteEnd,
    pub members: Vec<usize>,
}

/// The far end of a trunk, on the machine of a segment's members whose switch is on
/// another machine: each `(member, link)` names a member and the link (an index into
/// [`Engine::start`]'s `links`) whose reverse direction carries out its ingress.
/// `remote.side` is 1.
pub struct TrunkInSpec {
    pub remote: RemoteEnd,
    pub members: Vec<(u32, usize)>,
}

/// One port of a segment: a member's TAP device.
pub struct MemberSpec {
    /// `None` only for a LAN with `plane` devices whose TAP devices are not made yet.
    pub fd: Option<OwnedFd>,
    pub vlan: u16,
    /// Frames the member sends, on their way to the switch.
    pub egress: Impairments,
    /// Frames the switch delivers to the member.
    pub ingress: Impairments,
    /// Seeds of the egress and ingress random generators.
    pub seeds: [u64; 2],
    /// MTU of the member's interface.
    pub mtu: u32,
    /// Its interface's MAC address (a radio's own address in captures).
    pub mac: [u8; 6],
    /// The member is on another machine (`side` 0: the member's; its VNIs are those of
    /// its tunnel): `fd` is then `None`, and that machine's engine carries out the
    /// member's egress.
    pub remote: Option<RemoteEnd>,
}

/// An interface to capture on: a link end (`Target::Link`, side 0 = a, 1 = b) or a
/// segment port (`Target::Member`, side 0).
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct CaptureSpec {
    pub target: Target,
    pub side: usize,
    pub iface: u32,
    pub point: CapturePoint,
}

/// Which links and segments (by the engine's numbers) have plane devices but no TAP
/// devices yet.
#[derive(Debug, Default)]
struct Tapless {
    links: Vec<bool>,
    segments: Vec<bool>,
}

/// Route the plane devices `ends` that have TAP devices through the engine: what the
/// engine writes goes to the node; what the node sends, to the engine (until the core
/// puts the direction or LAN on the kernel path).
fn route_to_engine(f: &Fast, ends: &[PlaneDevs], of: TapsOf) -> Result<()> {
    for end in ends {
        if let Some(tap) = end.tap {
            f.path.route(tap, delivery(of, end.veth))?;
            f.path.route(end.veth, Route::Engine { tap })?;
        }
    }
    Ok(())
}

/// How what the engine writes to the TAP device of plane device `veth` reaches the
/// node: a link's straight into the node's interface; a LAN port's through the port's
/// egress, where the frames of the shard's fan-out device go too (one order for both).
fn delivery(of: TapsOf, veth: u32) -> Route {
    match of {
        TapsOf::Segment(_) => Route::DeliverLan { port: veth },
        _ => Route::Deliver { peer_of: veth },
    }
}

/// The two devices [`MakeTaps`] made for a link.
fn two(made: Vec<(u32, OwnedFd)>) -> Result<[(u32, OwnedFd); 2]> {
    let n = made.len();
    made.try_into().map_err(|_| anyhow!("{n} TAP devices made for a link"))
}

/// The running data plane of a lab (or of this machine's share of it).
pub struct Engine {
    shards: Vec<ShardHandle>,
    /// For each link: its shard and its index there, and its ports there (ends a and b).
    link_place: Vec<(usize, usize)>,
    link_ports: Vec<[u32; 2]>,
    /// For each segment: its shard and its index there.
    seg_place: Vec<(usize, usize)>,
    link_counters: Vec<[Arc<DirCounters>; 2]>,
    member_counters: Vec<Vec<[Arc<DirCounters>; 2]>>,
    seg_counters: Vec<Arc<SegCounters>>,
    /// The kernel fast path, and each link's plane veths (ends a and b) when it has one.
    fast: Option<Fast>,
    link_veths: Vec<Option<[u32; 2]>>,
    /// Each link with a kernel tunnel to another machine: its side here and plane veth.
    tunnel_veths: Vec<Option<(usize, u32)>>,
    /// Links and segments with plane devices whose TAP devices are not made yet.
    tapless: std::sync::Mutex<Tapless>,
    /// Each segment's plane veths (one per member) when it has them, and its ports.
    seg_veths: Vec<Option<Vec<u32>>>,
    seg_ports: Vec<Vec<u32>>,
    pub clock: LabClock,
    /// Devices of halted shards, closed by [`Engine::stop`]. (A halted shard answers
    /// nothing: commands to it are dropped, and waits for it end at once.)
    halted: Vec<OwnedFd>,
}

/// Shard parts being assembled: each core, its ports' descriptors and kinds.
type Parts = (Core, Vec<Option<OwnedFd>>, Vec<PortDev>);

/// An engine being put together by [`Engine::start`]: each link, segment and trunk
/// placed on a shard's core with its devices (the link and segment's number there, its
/// ports, counters and plane devices noted for the engine), then the shards started.
struct Assembly {
    n: usize,
    cores: Vec<Parts>,
    /// Shards that have a tunnel socket.
    sockets: Vec<bool>,
    /// The links a trunk feeds share its shard: that of the first (by link).
    with: Vec<Option<usize>>,
    link_place: Vec<(usize, usize)>,
    link_counters: Vec<[Arc<DirCounters>; 2]>,
    link_veths: Vec<Option<[u32; 2]>>,
    tunnel_veths: Vec<Option<(usize, u32)>>,
    tapless: Tapless,
    link_ports: Vec<[u32; 2]>,
    seg_place: Vec<(usize, usize)>,
    member_counters: Vec<Vec<[Arc<DirCounters>; 2]>>,
    seg_counters: Vec<Arc<SegCounters>>,
    seg_veths: Vec<Option<Vec<u32>>>,
    seg_ports: Vec<Vec<u32>>,
}

impl Assembly {
    fn new(
        n: usize,
        links: &[LinkSpec],
        trunks_in: &[TrunkInSpec],
        tunnel_sockets: &[Option<OwnedFd>],
    ) -> Assembly {
        let mut with: Vec<Option<usize>> = vec![None; links.len()];
        for t in trunks_in {
            let first = t.members.iter().map(|m| m.1).min().unwrap_or(0);
            for &(_, k) in &t.members {
                if k != first && k < with.len() {
                    with[k] = Some(first);
                }
            }
        }
        Assembly {
            n,
            cores: (0..n).map(|_| (Core::new(), Vec::new(), Vec::new())).collect(),
            sockets: (0..n).map(|s| tunnel_sockets.get(s).is_some_and(Option::is_some)).collect(),
            with,
            link_place: Vec::new(),
            link_counters: Vec::new(),
            link_veths: Vec::new(),
            tunnel_veths: Vec::new(),
            tapless: Tapless::default(),
            link_ports: Vec::new(),
            seg_place: Vec::new(),
            member_counters: Vec::new(),
            seg_counters: Vec::new(),
            seg_veths: Vec::new(),
            seg_ports: Vec::new(),
        }
    }

    /// The shard of a tunnel's socket.
    fn tunneled(&self, r: &RemoteEnd) -> Result<usize> {
        match self.sockets.get(r.socket) {
            Some(true) => Ok(r.socket),
            _ => Err(anyhow!(
                "tunnel {} has no socket (shard {} of {})",
                r.link_id,
                r.socket,
                self.n
            )),
        }
    }

    /// The shard with the fewest devices.
    fn lightest(&self) -> usize {
        schedule::lightest_shard(self.cores.iter().take(self.n).map(|c| c.1.len()))
    }

    /// Link `k`: on the shard of its trunk's first link, of its tunnel, or the lightest.
    fn add_link(&mut self, k: usize, mut l: LinkSpec, fast: &Option<Fast>) -> Result<()> {
        let s = match (self.with[k], l.remote) {
            (Some(f), _) => self.link_place[f].0,
            (None, Some(r)) => self.tunneled(&r)?,
            (None, None) => self.lightest(),
        };
        let (core, fds, plane) = &mut self.cores[s];
        let local = core.link_count();
        let mut devs = l.plane.filter(|_| fast.is_some() && l.remote.is_none());
        let remote = l.remote.map(|r| (r.side.min(1), r.transit_ns));
        let tunneled = l.kernel_tunnel.filter(|_| fast.is_some() && l.remote.is_some());
        // This end's plane veth, where the kernel's tunnel to a known far machine
        // may carry its direction: (the side here, veth).
        let tunnel_veth = l
            .remote
            .zip(tunneled.filter(|t| t.remote.is_some()))
            .map(|(r, t)| (1 - r.side.min(1), t.local.veth));
        let kernel_path = devs.is_some() || tunnel_veth.is_some();
        let ports = core.add_link(LinkConfig {
            forward: l.forward,
            reverse: l.reverse,
            seeds: l.seeds,
            mtu: l.mtu,
            kernel_path,
            kernel_shaper: fast.as_ref().is_some_and(|f| f.path.shaper().is_ok()),
            remote,
            spur: l.spur,
        });
        if let (Some(d), Some(f), None, true) =
            (devs.as_mut(), &fast, &l.a, core.needs_engine(Target::Link(local)))
        {
            // (Made beside the nodes, normally; here if they were not.)
            let [(ta, fa), (tb, fb)] = two((f.make_taps)(TapsOf::Link(k))?)?;
            (d[0].tap, d[1].tap, l.a, l.b) = (Some(ta), Some(tb), Some(fa), Some(fb));
        }
        if let (Some(d), Some(f)) = (&devs, &fast) {
            route_to_engine(f, d, TapsOf::Link(k))?;
        }
        self.tapless.links.push(devs.is_some_and(|d| d[0].tap.is_none()));
        fds.extend([l.a, l.b]);
        match (devs, l.remote) {
            (_, Some(r)) => {
                let side = r.side.min(1);
                let mut kinds = [PortDev::Tap, PortDev::Tap];
                kinds[side] = tunnel_port(&r, 1 - side as u8, ports[1 - side]);
                if let (Some(kt), Some(f)) = (tunneled, &fast) {
                    // The local end: as a link end in the plane, and what the other
                    // machine sends through the kernel goes to its node.
                    route_to_engine(f, &[kt.local], TapsOf::Link(k))?;
                    let far = match kt.remote {
                        Some(remote) => {
                            f.path.tunnel_in(
                                tunnel::vni(r.link_id, side as u8),
                                remote,
                                kt.local.veth,
                            )?;
                            Far::Tunnel {
                                vxlan: kt.vxlan,
                                remote,
                                vni: tunnel::vni(r.link_id, 1 - side as u8),
                                port: ports[side],
                                needs_payload: l.mtu as usize + TUNNEL_FRAME_EXTRA,
                            }
                        }
                        None => Far::Nowhere,
                    };
                    kinds[1 - side] = PortDev::Plane(PlanePort::new(kt.local, far));
                }
                plane.extend(kinds);
            }
            (Some([a, b]), None) => plane.extend([
                PortDev::Plane(PlanePort::new(a, Far::Veth(b.veth))),
                PortDev::Plane(PlanePort::new(b, Far::Veth(a.veth))),
            ]),
            (None, None) => plane.extend([PortDev::Tap, PortDev::Tap]),
        }
        self.tunnel_veths.push(tunnel_veth);
        self.link_veths.push(devs.map(|[a, b]| [a.veth, b.veth]));
        self.link_ports.push(ports);
        self.link_counters.push(core.counters(Target::Link(local)));
        self.link_place.push((s, local));
        Ok(())
    }

    /// Segment `k`: on the shard of its tunnels, or the lightest.
    fn add_segment(&mut self, k: usize, mut g: SegmentSpec, fast: &Option<Fast>) -> Result<()> {
        let s = match g
            .members
            .iter()
            .filter_map(|m| m.remote)
            .chain(g.trunks.iter().map(|t| t.remote))
            .next()
        {
            Some(r) => self.tunneled(&r)?,
            None => self.lightest(),
        };
        let (core, fds, plane) = &mut self.cores[s];
        let local = core.segment_count();
        let spans = g.members.iter().any(|m| m.remote.is_some());
        let mut devs = g.plane.take().filter(|d| {
            fast.is_some() && g.radio.is_none() && !spans && d.len() == g.members.len()
        });
        let mut fds_of: Vec<Option<OwnedFd>> = Vec::with_capacity(g.members.len());
        let mut members = Vec::with_capacity(g.members.len());
        let mut remotes = Vec::with_capacity(g.members.len());
        for m in g.members {
            fds_of.push(m.fd);
            remotes.push(m.remote);
            members.push(MemberConfig {
                vlan: m.vlan,
                egress: m.egress,
                ingress: m.ingress,
                seeds: m.seeds,
                mtu: m.mtu,
                mac: Some(m.mac),
                remote: m.remote.map(|r| r.transit_ns),
            });
        }
        let count = members.len();
        let ports = core.add_segment(SegmentConfig {
            members,
            capacity_bps: g.capacity_bps,
            aging_ns: g.aging_ns,
            snooping: g.snooping,
            radio: g.radio,
            kernel_path: devs.is_some(),
            kernel_shaper: devs.is_some()
                && fast.as_ref().is_some_and(|f| f.path.bridge_shaper().is_ok()),
            far_switching: g.far_switching,
            ipv6_off: g.ipv6_off,
        });
        if let (Some(d), Some(f), true) =
            (devs.as_mut(), &fast, core.needs_engine(Target::Member(local, 0)))
        {
            if fds_of.iter().any(Option::is_none) {
                // (Made beside the nodes, normally; here if they were not.)
                let made = (f.make_taps)(TapsOf::Segment(k))?;
                if made.len() != d.len() {
                    return Err(anyhow!(
                        "{} TAP devices made for a LAN of {}",
                        made.len(),
                        d.len()
                    ));
                }
                for ((dev, fd), (tap, made_fd)) in d.iter_mut().zip(&mut fds_of).zip(made) {
                    (dev.tap, *fd) = (Some(tap), Some(made_fd));
                }
            }
        }
        if let (Some(d), Some(f)) = (&devs, &fast) {
            route_to_engine(f, d, TapsOf::Segment(k))?;
        }
        self.tapless
            .segments
            .push(devs.as_ref().is_some_and(|d| d.iter().any(|x| x.tap.is_none())));
        for (i, fd) in fds_of.into_iter().enumerate() {
            fds.push(fd);
            plane.push(match (&devs, remotes[i]) {
                // The member's machine sends in direction 0 (egress), this one in 1.
                (_, Some(r)) => tunnel_port(&r, 1, ports[i]),
                (Some(d), None) => PortDev::Plane(PlanePort::new(d[i], Far::Bridge)),
                (None, None) => PortDev::Tap,
            });
        }
        self.member_counters
            .push((0..count).map(|m| core.counters(Target::Member(local, m))).collect());
        self.seg_counters.push(core.segment_counters(local));
        self.seg_place.push((s, local));
        self.seg_veths.push(devs.map(|d| d.iter().map(|x| x.veth).collect()));
        for t in g.trunks {
            let port = core.add_trunk(local, &t.members);
            fds.push(None);
            plane.push(tunnel_port(&t.remote, 1, port));
        }
        self.seg_ports.push(ports);
        Ok(())
    }

    /// A trunk that ends here: on the shard of the links it feeds.
    fn add_trunk_in(&mut self, t: TrunkInSpec) {
        let Some(&(s, _)) = t.members.first().and_then(|m| self.link_place.get(m.1)) else {
            return;
        };
        let (core, fds, plane) = &mut self.cores[s];
        let members: Vec<(u32, usize)> =
            t.members.iter().map(|&(m, k)| (m, self.link_place[k].1)).collect();
        let port = core.add_trunk_in(&members);
        fds.push(None);
        plane.push(tunnel_port(&t.remote, 0, port));
    }

    /// Start every shard (with its fan-out device where it has LAN ports in the plane).
    fn start(
        self,
        fast: Option<Fast>,
        tunnel_sockets: Vec<Option<OwnedFd>>,
        tunnel_key: Option<TunnelKey>,
        clock: LabClock,
    ) -> Result<Engine> {
        let key = tunnel_key.map(|k| (Arc::new(tunnel::auth::Key::new(&k.key)), k.machine));
        let n = self.n;
        driver::raise_session_group();
        let mut handles = Vec::new();
        let mut tunnel_sockets = tunnel_sockets;
        tunnel_sockets.resize_with(n, || None);
        for ((s, (core, fds, plane)), tunnel) in
            self.cores.into_iter().enumerate().zip(tunnel_sockets)
        {
            // A shard with LAN ports in the plane writes a frame for several of them once,
            // to its fan-out device (without one, once for each).
            let lan = plane.iter().any(|d| matches!(d, PortDev::Plane(p) if p.far == Far::Bridge));
            let fanout = match &fast {
                Some(f) if lan => match (f.make_taps)(TapsOf::FanOut(s)).and_then(|mut made| {
                    made.pop().ok_or_else(|| anyhow!("no fan-out device made"))
                }) {
                    Ok((tap, fd)) => f.path.route(tap, Route::FanOut).map(|()| Some(fd))?,
                    Err(e) => {
                        eprintln!(
                            "engine: {e:#}: a frame for several LAN ports is written to each"
                        );
                        None
                    }
                },
                _ => None,
            };
            handles.push(ShardHandle::spawn(
                s,
                core,
                fds,
                plane,
                fast.as_ref().map(|f| f.path.clone()),
                fast.as_ref().and_then(|f| f.probe.clone()),
                fanout,
                tunnel,
                key.as_ref().map(|(k, machine)| driver::Seal::new(k.clone(), *machine, s)),
                clock,
            )?);
        }
        let tapless = std::sync::Mutex::new(self.tapless);
        Ok(Engine {
            shards: handles,
            link_place: self.link_place,
            link_ports: self.link_ports,
            seg_place: self.seg_place,
            link_counters: self.link_counters,
            member_counters: self.member_counters,
            seg_counters: self.seg_counters,
            fast,
            link_veths: self.link_veths,
            tunnel_veths: self.tunnel_veths,
            tapless,
            seg_veths: self.seg_veths,
            seg_ports: self.seg_ports,
            clock,
            halted: Vec::new(),
        })
    }
}

impl Engine {
    /// Start emulating `links` and `segments` on `shards` threads (at least one). Each
    /// link and each segment belongs to one shard; they are spread so that every shard
    /// has about as many devices. With `fast`, the links that have plane devices carry
    /// each direction that needs no emulation inside the kernel.
    ///
    /// Links, members and trunks toward other machines ([`RemoteEnd`]) go through the
    /// UDP socket of the shard their `socket` names (`tunnel_sockets`, one per shard of
    /// [`shard_count`]): a link with one is on that shard, and so is a segment with one.
    /// With `tunnel_key` (a lab across machines) every datagram they carry is sealed
    /// and opened under the lab's key ([`tunnel::auth`]).
    #[allow(clippy::too_many_arguments)] // (each a part of the lab, given once)
    pub fn start(
        links: Vec<LinkSpec>,
        segments: Vec<SegmentSpec>,
        trunks_in: Vec<TrunkInSpec>,
        shards: usize,
        clock: LabClock,
        fast: Option<Fast>,
        tunnel_sockets: Vec<Option<OwnedFd>>,
        tunnel_key: Option<TunnelKey>,
    ) -> Result<Engine> {
        let n = shard_count(shards, links.len(), segments.len());
        let mut a = Assembly::new(n, &links, &trunks_in, &tunnel_sockets);
        for (k, l) in links.into_iter().enumerate() {
            a.add_link(k, l, &fast)?;
        }
        for (k, g) in segments.into_iter().enumerate() {
            a.add_segment(k, g, &fast)?;
        }
        for t in trunks_in {
            a.add_trunk_in(t);
        }
        a.start(fast, tunnel_sockets, tunnel_key, clock)
    }

    /// Make the engine's TAP devices of a link or LAN (`target`'s) if it has plane
    /// devices and none yet (see [`MakeTaps`]), and hand them to its shard: before
    /// anything that may take it off the kernel path. Fails (and it keeps its paths)
    /// when they cannot be made.
    fn ensure_taps(&self, target: Target) -> Result<()> {
        let mut tapless = self.tapless.lock().unwrap_or_else(|e| e.into_inner());
        let Some(fast) = &self.fast else { return Ok(()) };
        let (of, veths, ports, shard) = match target {
            Target::Link(l) => {
                match (tapless.links.get(l).copied(), self.link_veths.get(l).copied().flatten()) {
                    (Some(true), Some(v)) => (
                        TapsOf::Link(l),
                        v.to_vec(),
                        self.link_ports[l].to_vec(),
                        self.link_place[l].0,
                    ),
                    _ => return Ok(()),
                }
            }
            Target::Member(g, _) => match (
                tapless.segments.get(g).copied(),
                self.seg_veths.get(g).and_then(|v| v.clone()),
            ) {
                (Some(true), Some(v)) => {
                    (TapsOf::Segment(g), v, self.seg_ports[g].clone(), self.seg_place[g].0)
                }
                _ => return Ok(()),
            },
        };
        let made = (fast.make_taps)(of)?;
        if made.len() != veths.len() {
            return Err(anyhow!("{} TAP devices made for {} ports", made.len(), veths.len()));
        }
        let mut taps = Vec::with_capacity(made.len());
        for ((tap, fd), (veth, port)) in made.into_iter().zip(veths.into_iter().zip(ports)) {
            fast.path.route(tap, delivery(of, veth))?;
            taps.push((port, tap, fd));
        }
        self.shards[shard].send(Control::Taps(taps));
        match target {
            Target::Link(l) => tapless.links[l] = false,
            Target::Member(g, _) => tapless.segments[g] = false,
        }
        Ok(())
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

    /// Shards that died on their own (a panic), and why: their links and segments no
    /// longer forward anything.
    pub fn faults(&self) -> Vec<String> {
        self.shards
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                s.died
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .as_ref()
                    .map(|why| format!("engine shard {i} died: {why}"))
            })
            .collect()
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
    pub fn patch(&self, target: Target, dir: Dir, patch: ImpairmentsPatch) -> Result<Impairments> {
        self.ensure_taps(target)?;
        let (s, t) = self.place(target);
        self.shards[s]
            .patched(Command::Patch { target: t, dir, patch })
            .ok_or_else(|| anyhow!("the engine has stopped"))
    }

    /// Take a link or a segment port down (frames offered in either direction are
    /// dropped, and the interfaces lose their carrier) or back up.
    pub fn set_up(&self, target: Target, up: bool) -> Result<()> {
        if !up {
            self.ensure_taps(target)?;
        }
        let (s, t) = self.place(target);
        self.shards[s].apply(Command::SetUp { target: t, up });
        Ok(())
    }

    /// Counters of both directions of a link or port: what the engine carried plus, on
    /// a link with a kernel path, what the kernel carried.
    pub fn stats(&self, target: Target) -> [DirStats; 2] {
        let c = match target {
            Target::Link(l) => &self.link_counters[l],
            Target::Member(g, m) => &self.member_counters[g][m],
        };
        let mut s = [c[0].snapshot(), c[1].snapshot()];
        let add = |d: &mut DirStats, k: vemu_fastpath::Counted| {
            d.rx_frames += k.frames;
            d.tx_frames += k.frames;
            d.rx_bytes += k.bytes;
            d.tx_bytes += k.bytes;
        };
        // Through a kernel token bucket (on device `dev`): what came in, and what the
        // bucket sent on, dropped and holds.
        let bucket =
            |d: &mut DirStats, fast: &FastPath, into: vemu_fastpath::Counted, dev: Option<u32>| {
                if into.frames == 0 {
                    return;
                }
                let b = dev.map(|dev| fast.shaped(dev).unwrap_or_default()).unwrap_or_default();
                let b = b.in_wire_frames(into.frames, into.bytes);
                d.rx_frames += into.frames;
                d.rx_bytes += into.bytes;
                d.tx_frames += b.frames;
                d.tx_bytes += b.bytes;
                d.drop_queue += b.drops;
                d.queue_frames += b.queue_frames;
                d.queue_bytes += b.queue_bytes;
                d.queue_frames_max = d.queue_frames_max.max(b.queue_frames);
            };
        match (target, &self.fast) {
            (Target::Link(l), Some(fast)) => {
                if let Some(veths) = self.link_veths[l] {
                    for (d, veth) in veths.into_iter().enumerate() {
                        add(&mut s[d], fast.path.counted(veth));
                        // (The bucket is on the far end's plane device.)
                        bucket(
                            &mut s[d],
                            &fast.path,
                            fast.path.counted_shaped(veth),
                            Some(veths[1 - d]),
                        );
                    }
                }
                // (Through the kernel's tunnel: what left this side.)
                if let Some((d, veth)) = self.tunnel_veths[l] {
                    add(&mut s[d], fast.path.counted(veth));
                }
            }
            // A LAN port: what the node sent to the bridge (egress; through the bucket
            // of the port's IFB device when shaped), and what the bridge sent it
            // (ingress; through the bucket at the port's root when shaped).
            (Target::Member(g, m), Some(fast)) => {
                if let Some(&veth) = self.seg_veths[g].as_ref().and_then(|v| v.get(m)) {
                    add(&mut s[0], fast.path.counted(veth));
                    bucket(
                        &mut s[0],
                        &fast.path,
                        fast.path.counted_shaped(veth),
                        fast.path.ifb_of(veth),
                    );
                    add(&mut s[1], fast.path.counted_out(veth));
                    bucket(&mut s[1], &fast.path, fast.path.counted_out_shaped(veth), Some(veth));
                }
            }
            _ => {}
        }
        s
    }

    /// Move the members of wireless segment `seg` (one position per member, m).
    pub fn set_positions(&self, seg: usize, positions: Vec<Pos>) {
        let (s, i) = self.seg_place[seg];
        self.shards[s].send(Control::Apply(Command::Positions { seg: i, positions }, None));
    }

    /// Positions, neighbours and per-pair delivery counters of wireless segment `seg`,
    /// and its infrastructure mode's events numbered after `bss_after`.
    pub fn radio(&self, seg: usize, bss_after: u64) -> RadioSnapshot {
        let (s, i) = self.seg_place[seg];
        let (done, rx) = std::sync::mpsc::channel();
        self.shards[s].send(Control::Radio { seg: i, bss_after, done });
        rx.recv().unwrap_or_default()
    }

    pub fn segment_stats(&self, seg: usize) -> SegStats {
        self.seg_counters[seg].snapshot()
    }

    /// Start capturing on interfaces: every frame they send, and every frame arriving at
    /// them (at `point`), goes to `tx` as wire frames with lab-clock times. When `tx`
    /// is full, frames are skipped (the data plane never waits for a capture); when its
    /// receiver is gone, the capture ends by itself.
    pub fn capture(
        &self,
        on: &[CaptureSpec],
        tx: std::sync::mpsc::SyncSender<Captured>,
    ) -> Result<u64> {
        for c in on {
            self.ensure_taps(c.target)?;
        }
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let id = NEXT.fetch_add(1, Relaxed);
        for (s, shard) in self.shards.iter().enumerate() {
            let mine: Vec<(Target, &CaptureSpec)> = on
                .iter()
                .map(|c| (self.place(c.target), c))
                .filter(|((cs, _), _)| *cs == s)
                .map(|((_, t), c)| (t, c))
                .collect();
            if mine.is_empty() {
                continue;
            }
            shard.send(Control::CaptureSink { id, tx: tx.clone() });
            for (target, c) in mine {
                shard.send(Control::Apply(
                    Command::Capture { id, target, side: c.side, iface: c.iface, point: c.point },
                    None,
                ));
            }
        }
        Ok(id)
    }

    /// End a capture.
    pub fn stop_capture(&self, id: u64) {
        for s in &self.shards {
            s.send(Control::Apply(Command::Uncapture(id), None));
        }
    }

    /// How far behind its schedule the furthest-behind shard is, ns: 0 when every frame
    /// due has been written (a halted shard counts as 0).
    pub fn backlog_ns(&self) -> u64 {
        let asks: Vec<_> = self
            .shards
            .iter()
            .map(|s| {
                let (tx, rx) = std::sync::mpsc::channel();
                s.send(Control::Backlog(tx));
                rx
            })
            .collect();
        asks.into_iter().filter_map(|rx| rx.recv().ok()).max().unwrap_or(0)
    }

    /// Stop forwarding at once: every shard ends, dropping what it still had queued
    /// (a backlog is never waited for). The TAP devices stay open, so that the nodes'
    /// interfaces stay until [`Engine::stop`].
    pub fn halt(&mut self) {
        for s in &self.shards {
            s.send(Control::Stop);
        }
        for s in &mut self.shards {
            self.halted.extend(s.join());
        }
    }

    /// Halt (if not yet) and close the TAP devices (what dropping the engine does).
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.halt();
        driver::close_all(std::mem::take(&mut self.halted));
    }
}
