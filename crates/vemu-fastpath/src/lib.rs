//! vemu's kernel fast path.
//!
//! A node's link interface is one end of a veth pair; the other end lives in the lab's
//! *plane* namespace, beside a TAP device of the engine's. One TC ingress program
//! (`bpf/steer.bpf.c`, attached to every device of the plane) looks up where a frame
//! goes by the device it came in by:
//!
//! - [`Route::Kernel`]: straight to the far node's interface (`bpf_redirect_peer`, the
//!   way Cilium moves pod traffic), counted in a per-CPU map: a link direction that
//!   needs no emulation at the moment never leaves the kernel;
//! - [`Route::Engine`]: to the engine's TAP device, whose reader emulates the direction;
//! - [`Route::Deliver`]: what the engine writes to its TAP device goes on to the node
//!   (for a LAN port, [`Route::DeliverLan`]: through the egress of the port's plane
//!   device, marked as the engine's, where a LAN's frames from the engine's fan-out
//!   device go too — [`Route::FanOut`], one write for several ports — so that a port's
//!   frames keep their order whichever way they came);
//! - [`Route::Bridge`]: on to the device's own receive path — a LAN port's, whose bridge
//!   switches the LAN inside the kernel — counted; a second program on the port's egress
//!   ([`FastPath::egress_program`]) lets out and counts what the bridge sends to the node
//!   while the port's route is this one, and drops it otherwise;
//! - [`Route::Shaped`]: to the egress of the far node's plane device, whose root qdisc is
//!   a token bucket ([`FastPath::shape`]) that holds the direction to its rate before
//!   the veth hands frames to the far node; counted apart, and the bucket's own
//!   counters ([`FastPath::shaped`]) say what it sent, dropped and holds;
//! - [`Route::BridgeShaped`]: a LAN port whose node's frames the kernel shapes — to the
//!   egress of the port's IFB device ([`FastPath::ifb`]), whose root qdisc is a token
//!   bucket and which hands each frame back to the port's receive path (past the
//!   program), so that the bridge switches it after the bucket. What the bridge sends
//!   to such a port is shaped by a bucket at the root of the port itself.
//!
//! - [`Route::Tunnel`]: a link end whose far side is on another machine — to the lab's
//!   VXLAN device in the plane (its socket on the machine's underlay), with the link's
//!   tunnel key (the far machine's address, the VNI), counted; what that device
//!   receives ([`Route::FromTunnel`]) goes by its VNI to the node interface named with
//!   [`FastPath::tunnel_in`], if it came from the machine named there.
//!
//! Switching a direction between the kernel and the engine is one map update: the
//! nodes see the same interface, addresses, MAC and carrier throughout.

use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::Mutex;
use vemu_sys::netlink::Netlink;

use anyhow::{anyhow, bail, Context, Result};
use aya::maps::{Array, HashMap, MapData, MapError, PerCpuArray, PerCpuHashMap, PerCpuValues};
use aya::programs::{ProgramFd, SchedClassifier};
use aya::{Ebpf, EbpfLoader};

mod netlink;
pub use netlink::{Bucket, BucketStats};

/// The compiled program; empty when vemu was built without clang.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/steer.o"));

/// `route.flags` bits, as in `bpf/steer.bpf.c`.
const ROUTE_PEER: u32 = 1;
const ROUTE_COUNT: u32 = 2;
const ROUTE_PASS: u32 = 4;
const ROUTE_SHAPED: u32 = 8;
const ROUTE_OUT_SHAPED: u32 = 16;
const ROUTE_MARKED: u32 = 32;
const ROUTE_FANOUT: u32 = 64;
const ROUTE_STAMP: u32 = 128;
const ROUTE_TUNNEL: u32 = 256;
const ROUTE_TUNNEL_IN: u32 = 512;
const ROUTE_SPLIT: u32 = 1024;
/// Where a route's MTU sits in its flags (see [`Route::Kernel`]).
const ROUTE_MTU_SHIFT: u32 = 16;

/// The flag bits of an MTU (bytes of IP packet; 0: none).
fn mtu_flags(mtu: u32) -> u32 {
    mtu.min(0xffff) << ROUTE_MTU_SHIFT
}
/// Bytes at the end of a frame the engine reads from a TAP device of the plane, unless
/// it is a GSO super-frame ([`Stamp`]). See [`Route::Engine`].
pub const STAMP_LEN: usize = 16;

/// What the plane's program appends to a frame for the engine: when and on which CPU
/// the frame arrived in the plane — its sender's CPU, as a veth hands a frame to its
/// peer on the sending CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// CLOCK_MONOTONIC, ns.
    pub ns: u64,
    pub cpu: u32,
}

impl Stamp {
    /// The stamp at the end of `frame` ([`STAMP_LEN`] bytes, host order), if it has room.
    pub fn at_end(frame: &[u8]) -> Option<Stamp> {
        let at = frame.len().checked_sub(STAMP_LEN)?;
        let ns = u64::from_ne_bytes(frame[at..at + 8].try_into().ok()?);
        let cpu = u32::from_ne_bytes(frame[at + 8..at + 12].try_into().ok()?);
        Some(Stamp { ns, cpu })
    }
}

/// The end of a frame written to the fan-out device ([`Route::FanOut`]): the plane
/// devices it goes to (a `u32` index each, host order), their count (`u16`) and this.
const FANOUT_MAGIC: u16 = 0xfa17;
/// Most LAN ports one fan-out frame names.
pub const FANOUT_MAX: usize = 64;

/// Append to `frame` (as written to the fan-out device) the LAN ports (plane devices)
/// it goes to: at most [`FANOUT_MAX`].
pub fn fanout_trailer(targets: &[u32], frame: &mut Vec<u8>) {
    debug_assert!(!targets.is_empty() && targets.len() <= FANOUT_MAX);
    for t in targets {
        frame.extend(t.to_ne_bytes());
    }
    frame.extend((targets.len() as u16).to_ne_bytes());
    frame.extend(FANOUT_MAGIC.to_ne_bytes());
}
/// Plane devices from this index on are the far ends of the nodes' interfaces, whose
/// indexes vemu chooses (`vemu_host::PLANE_INDEX_BASE` + n, made first n, n < the count
/// given to [`FastPath::load`]): their routes and counters are in arrays (by n), which
/// the program indexes without hashing; other devices' in hashes (as in
/// `bpf/steer.bpf.c`).
pub const DENSE_BASE: u32 = 1 << 24;
/// Counters a dense device has: in, in to a token bucket, out, out to a token bucket.
const DENSE_COUNTS: u32 = 4;

/// Bit of the counts' key for what leaves a device.
const OUT: u32 = 0x8000_0000;
/// Bit of the counts' key for what a device's frames took to a token bucket.
const SHAPED: u32 = 0x4000_0000;
/// `bpf_map_update_elem` flag: only if the key is not there yet.
const BPF_NOEXIST: u64 = 1;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct RouteValue {
    ifindex: u32,
    flags: u32,
}
// SAFETY: plain integers, laid out as the program's `struct route`.
unsafe impl aya::Pod for RouteValue {}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counted {
    /// Wire frames (a TCP super-frame counts its segments).
    pub frames: u64,
    /// Wire bytes (every segment with its own headers).
    pub bytes: u64,
}
// SAFETY: plain integers, laid out as the program's `struct count`.
unsafe impl aya::Pod for Counted {}

/// The program's `struct tunnel_out` and `struct tunnel_in` (IPv4 addresses in host order).
/// A machine's underlay address as the program's `struct underlay` has it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct Underlay {
    addr: [u32; 4],
    v6: u32,
}

impl From<IpAddr> for Underlay {
    fn from(a: IpAddr) -> Underlay {
        match a {
            // (Host order, as the kernel gives `remote_ipv4`.)
            IpAddr::V4(a) => Underlay { addr: [u32::from(a), 0, 0, 0], v6: 0 },
            // (The 16 bytes as they are, as `remote_ipv6` holds them.)
            IpAddr::V6(a) => {
                let o = a.octets();
                let w = |i: usize| u32::from_ne_bytes([o[i], o[i + 1], o[i + 2], o[i + 3]]);
                Underlay { addr: [w(0), w(4), w(8), w(12)], v6: 1 }
            }
        }
    }
}

/// `struct tunnel_out`: the tunnel key of a link end's frames.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct TunnelOut {
    to: Underlay,
    vni: u32,
    /// The engine's TAP device of the link end, to lend the direction to (0: none).
    tap: u32,
}

/// `struct tunnel_in`: where frames with a VNI go, and the machine they may come from.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct TunnelIn {
    from: Underlay,
    peer_of: u32,
}
// SAFETY: plain integers, laid out as the program's structs.
unsafe impl aya::Pod for TunnelOut {}
// SAFETY: as above.
unsafe impl aya::Pod for TunnelIn {}

/// Load the classifier `name` of the object; its descriptor.
fn classifier(ebpf: &mut Ebpf, name: &str) -> Result<ProgramFd> {
    let prog: &mut SchedClassifier = ebpf
        .program_mut(name)
        .ok_or_else(|| anyhow!("the TC program has no '{name}' section"))?
        .try_into()
        .with_context(|| format!("the TC program '{name}' is not a classifier"))?;
    prog.load().with_context(|| format!("the kernel refused the TC program '{name}'"))?;
    prog.fd()?.try_clone().context("duplicating a program's descriptor")
}

/// Where frames arriving at a plane device go (devices are named by their index in the
/// plane namespace).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// To the node interface that is the veth peer of `peer_of`, counted; a frame longer
    /// than `mtu` (the link's interfaces' MTU, bytes of IP packet; 0: none) with its
    /// Ethernet header is dropped, as the engine drops it (uncounted here), so that a node
    /// that raised its own interface's MTU gets no further than the link allows.
    Kernel { peer_of: u32, mtu: u32 },
    /// To the engine's TAP device `tap`; a frame that is not a GSO super-frame gets the
    /// time and CPU it arrived on appended ([`Stamp`]), so that the engine times it from
    /// then and not from when it got round to reading it.
    Engine { tap: u32 },
    /// To the node interface that is the veth peer of `peer_of` (frames the engine wrote).
    Deliver { peer_of: u32 },
    /// To the egress of LAN port `port` (a plane device, whose veth peer is the node's
    /// interface), marked as the engine's: what the engine wrote for the port.
    DeliverLan { port: u32 },
    /// The engine's fan-out device: each frame goes, cloned, to the LAN ports named at
    /// its end ([`fanout_trailer`]), as by [`Route::DeliverLan`].
    FanOut,
    /// On to the device's bridge (a LAN the kernel switches), counted both ways.
    Bridge,
    /// To the egress of plane device `via` (through its token bucket, see
    /// [`FastPath::shape`], to its veth peer), counted apart from [`Route::Kernel`].
    Shaped { via: u32 },
    /// Through the token bucket of IFB device `ifb` ([`FastPath::ifb`]), then on to the
    /// device's bridge; counted apart from [`Route::Bridge`] on the way in, and as it
    /// on the way out.
    BridgeShaped { ifb: u32 },
    /// To another machine: through the lab's VXLAN device `vxlan` to `remote` (its
    /// underlay address) with VNI `vni`, counted and held to `mtu` as [`Route::Kernel`].
    /// `lend_to`: the underlay carries the link's frames only in pieces (the kernel
    /// fragments the tunnel's packets); a GSO super-frame (bulk TCP, which the engine's
    /// tunnel carries faster, whole) then lends the direction to the engine's TAP device
    /// `lend_to`: that frame and every later one go there, as by [`Route::Engine`],
    /// until this route is written again.
    Tunnel { vxlan: u32, remote: IpAddr, vni: u32, mtu: u32, lend_to: Option<u32> },
    /// The lab's VXLAN device: what it receives goes by VNI ([`FastPath::tunnel_in`]).
    FromTunnel,
}

/// Where routes are: by device index (hash), or by n for [`DENSE_BASE`] + n (array).
struct Routes {
    hash: HashMap<MapData, u32, RouteValue>,
    dense: Array<MapData, RouteValue>,
}

impl Routes {
    /// (A dense device's route with no flag is no route: the array holds every slot.)
    fn get(&self, dev: u32) -> Option<RouteValue> {
        match dev.checked_sub(DENSE_BASE) {
            Some(n) => self.dense.get(&n, 0).ok().filter(|r| r.flags != 0),
            None => self.hash.get(&dev, 0).ok(),
        }
    }

    fn set(&mut self, dev: u32, r: RouteValue) -> Result<()> {
        match dev.checked_sub(DENSE_BASE) {
            Some(n) => self.dense.set(n, r, 0),
            None => self.hash.insert(dev, r, 0),
        }
        .with_context(|| format!("routing plane device {dev}"))
    }
}

/// Counters by key (a device's index with [`OUT`] and [`SHAPED`] bits): in a hash, or
/// for a dense device in an array ([`dense_slot`]).
struct Counts {
    hash: PerCpuHashMap<MapData, u32, Counted>,
    dense: PerCpuArray<MapData, Counted>,
}

/// The slot in the counters' array of key `key`, if its device is a dense one.
fn dense_slot(key: u32) -> Option<u32> {
    let n = (key & !(OUT | SHAPED)).checked_sub(DENSE_BASE)?;
    Some(n * DENSE_COUNTS + if key & OUT != 0 { 2 } else { 0 } + u32::from(key & SHAPED != 0))
}

/// The loaded program and its maps, for one lab.
pub struct FastPath {
    prog: ProgramFd,
    egress: ProgramFd,
    routes: Mutex<Routes>,
    counts: Mutex<Counts>,
    /// Tunnel keys of link ends toward other machines, by plane device; and where
    /// frames from them go, by VNI (see [`Route::Tunnel`]).
    tunnels_out: Mutex<HashMap<MapData, u32, TunnelOut>>,
    tunnels_in: Mutex<HashMap<MapData, u32, TunnelIn>>,
    /// A route netlink socket in the plane namespace: its devices are taken down and up
    /// (ioctls) and their token buckets set and read (requests) through it.
    ctl: Mutex<Netlink>,
    /// Whether the kernel makes token buckets (see [`FastPath::shaper`]).
    shaper: std::result::Result<(), String>,
    /// The IFB device made for each LAN port (plane device) whose node's frames the
    /// kernel shapes ([`FastPath::ifb`]).
    ifbs: Mutex<std::collections::HashMap<u32, u32>>,
    /// LAN ports whose bridge's frames go through a bucket at their root
    /// ([`FastPath::shape_out`]): their routes say so, for the counts.
    shaped_out: Mutex<std::collections::HashSet<u32>>,
    /// Devices that were ever given a bucket: only theirs are asked for.
    ever_shaped: Mutex<std::collections::HashSet<u32>>,
    /// Whether the kernel makes IFB devices (see [`FastPath::bridge_shaper`]), once asked.
    ifb_probe: std::sync::OnceLock<std::result::Result<(), String>>,
    /// What buckets taken away ([`FastPath::unshape`]) had done, by device.
    retired: Mutex<std::collections::HashMap<u32, BucketStats>>,
    /// Keeps the program loaded.
    _ebpf: Ebpf,
}

impl FastPath {
    /// Load the program for a lab; `ctl` is a route netlink client opened in the lab's
    /// plane namespace (`Netlink::open_in`), through which its devices are taken down
    /// and up and given token buckets. Fails (and the lab runs every link through its
    /// engine) where the kernel refuses BPF programs or vemu was built without clang.
    pub fn load(ctl: Netlink, dense_devices: u32) -> Result<FastPath> {
        if OBJECT.is_empty() {
            bail!("vemu was built without clang, so without its TC program");
        }
        // (Their indexes must stay clear of the counters' key bits.)
        if dense_devices > SHAPED - DENSE_BASE {
            bail!("{dense_devices} plane devices are more than the fast path can index");
        }
        let n = dense_devices.max(1);
        let mut ebpf = EbpfLoader::new()
            .set_max_entries("routes_dense", n)
            .set_max_entries("counts_dense", n * DENSE_COUNTS)
            .load(OBJECT)
            .context("loading the TC program")?;
        let prog = classifier(&mut ebpf, "steer")?;
        let egress = classifier(&mut ebpf, "leave")?;
        let mut map = |name: &str| ebpf.take_map(name).ok_or_else(|| anyhow!("no map '{name}'"));
        let routes = Routes {
            hash: HashMap::try_from(map("routes")?)?,
            dense: Array::try_from(map("routes_dense")?)?,
        };
        let counts = Counts {
            hash: PerCpuHashMap::try_from(map("counts")?)?,
            dense: PerCpuArray::try_from(map("counts_dense")?)?,
        };
        let tunnels_out = Mutex::new(HashMap::try_from(map("tunnels_out")?)?);
        let tunnels_in = Mutex::new(HashMap::try_from(map("tunnels_in")?)?);
        let mut fast = FastPath {
            prog,
            egress,
            routes: Mutex::new(routes),
            counts: Mutex::new(counts),
            tunnels_out,
            tunnels_in,
            ctl: Mutex::new(ctl),
            shaper: Ok(()),
            ifbs: Mutex::default(),
            shaped_out: Mutex::default(),
            ever_shaped: Mutex::default(),
            ifb_probe: std::sync::OnceLock::new(),
            retired: Mutex::default(),
            _ebpf: ebpf,
        };
        fast.shaper = fast.try_shaper().map_err(|e| format!("{e:#}"));
        Ok(fast)
    }

    /// The program, to attach to the plane's devices (`tc filter … bpf da`).
    pub fn program(&self) -> BorrowedFd<'_> {
        self.prog.as_fd()
    }

    /// The program for the egress of LAN ports (see [`Route::Bridge`]).
    pub fn egress_program(&self) -> BorrowedFd<'_> {
        self.egress.as_fd()
    }

    /// Send frames arriving at plane device `from` by `route`.
    pub fn route(&self, from: u32, route: Route) -> Result<()> {
        let value = match route {
            Route::Kernel { peer_of, mtu } => {
                self.count(from)?;
                RouteValue { ifindex: peer_of, flags: ROUTE_PEER | ROUTE_COUNT | mtu_flags(mtu) }
            }
            Route::Engine { tap } => RouteValue { ifindex: tap, flags: ROUTE_STAMP },
            Route::Deliver { peer_of } => RouteValue { ifindex: peer_of, flags: ROUTE_PEER },
            Route::DeliverLan { port } => RouteValue { ifindex: port, flags: ROUTE_MARKED },
            Route::FanOut => RouteValue { ifindex: 0, flags: ROUTE_FANOUT },
            Route::Bridge => {
                self.count(from)?;
                self.count(from | OUT)?;
                RouteValue { ifindex: 0, flags: ROUTE_PASS | ROUTE_COUNT | self.out_flag(from) }
            }
            Route::Shaped { via } => {
                self.count(from | SHAPED)?;
                RouteValue { ifindex: via, flags: ROUTE_COUNT | ROUTE_SHAPED }
            }
            Route::BridgeShaped { ifb } => {
                self.count(from | SHAPED)?;
                self.count(from | OUT)?;
                RouteValue {
                    ifindex: ifb,
                    flags: ROUTE_PASS | ROUTE_COUNT | ROUTE_SHAPED | self.out_flag(from),
                }
            }
            Route::Tunnel { vxlan, remote, vni, mtu, lend_to } => {
                self.count(from)?;
                let key = TunnelOut { to: remote.into(), vni, tap: lend_to.unwrap_or(0) };
                self.tunnels_out
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(from, key, 0)
                    .with_context(|| format!("the tunnel key of plane device {from}"))?;
                let split = if lend_to.is_some() { ROUTE_SPLIT } else { 0 };
                RouteValue {
                    ifindex: vxlan,
                    flags: ROUTE_TUNNEL | ROUTE_COUNT | split | mtu_flags(mtu),
                }
            }
            Route::FromTunnel => RouteValue { ifindex: 0, flags: ROUTE_TUNNEL_IN },
        };
        self.routes.lock().unwrap_or_else(|p| p.into_inner()).set(from, value)
    }

    /// Frames the lab's VXLAN device receives with VNI `vni` from `remote` (another
    /// machine's underlay address) go to the node interface that is the veth peer of
    /// plane device `peer_of`; from anywhere else they are dropped.
    pub fn tunnel_in(&self, vni: u32, remote: IpAddr, peer_of: u32) -> Result<()> {
        let v = TunnelIn { from: remote.into(), peer_of };
        self.tunnels_in
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(vni, v, 0)
            .with_context(|| format!("routing VNI {vni} from the underlay"))
    }

    /// [`FastPath::tunnel_in`] (`on`), or frames with VNI `vni` dropped (`!on`).
    pub fn tunnel_in_set(&self, vni: u32, remote: IpAddr, peer_of: u32, on: bool) -> Result<()> {
        if on {
            return self.tunnel_in(vni, remote, peer_of);
        }
        match self.tunnels_in.lock().unwrap_or_else(|p| p.into_inner()).remove(&vni) {
            Err(MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::ENOENT) => {
                Ok(())
            }
            r => r.with_context(|| format!("stopping VNI {vni} from the underlay")),
        }
    }

    /// [`ROUTE_OUT_SHAPED`] for a LAN port whose bridge's frames go through a bucket.
    fn out_flag(&self, port: u32) -> u32 {
        if self.shaped_out.lock().unwrap_or_else(|p| p.into_inner()).contains(&port) {
            ROUTE_OUT_SHAPED
        } else {
            0
        }
    }

    /// What LAN port `port`'s bridge sends it goes through a token bucket at its root
    /// (`Some`), or straight (`None`, taking the bucket away): the port's ingress while
    /// the kernel switches its LAN.
    pub fn shape_out(&self, port: u32, bucket: Option<Bucket>) -> Result<()> {
        match bucket {
            Some(b) => {
                self.shape(port, b)?;
                self.count(port | OUT | SHAPED)?;
                self.shaped_out.lock().unwrap_or_else(|p| p.into_inner()).insert(port);
            }
            None => {
                self.shaped_out.lock().unwrap_or_else(|p| p.into_inner()).remove(&port);
                self.unshape(port)?;
            }
        }
        // The port's route (if it has one yet) says so to the program that counts.
        let mut routes = self.routes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(mut r) = routes.get(port) {
            r.flags =
                (r.flags & !ROUTE_OUT_SHAPED) | if bucket.is_some() { ROUTE_OUT_SHAPED } else { 0 };
            routes.set(port, r)?;
        }
        Ok(())
    }

    /// Make counter `key` (from the first kernel route on, kept across switches).
    fn count(&self, key: u32) -> Result<()> {
        // (A dense device's counters are there from the start, at zero.)
        if dense_slot(key).is_some() {
            return Ok(());
        }
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        // (aya's per-CPU lookup cannot tell a missing key: insert unless present.)
        let cpus = aya::util::nr_cpus().map_err(|(_, e)| e)?;
        match counts.hash.insert(
            key,
            PerCpuValues::try_from(vec![Counted::default(); cpus])?,
            BPF_NOEXIST,
        ) {
            Err(MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::EEXIST) => {
                Ok(())
            }
            r => r.with_context(|| format!("counting plane device {}", key & !OUT)),
        }
    }

    /// What the kernel carried from plane device `from` (all CPUs, since the first
    /// [`Route::Kernel`] or [`Route::Bridge`] from it).
    pub fn counted(&self, from: u32) -> Counted {
        self.counted_key(from)
    }

    /// What came in by plane device `from` and was taken to a token bucket (all CPUs,
    /// since its first [`Route::Shaped`]).
    pub fn counted_shaped(&self, from: u32) -> Counted {
        self.counted_key(from | SHAPED)
    }

    /// What the kernel's bridge sent out of plane device `to` toward its node (all
    /// CPUs, since its first [`Route::Bridge`]), not counting what a bucket at its root
    /// took ([`FastPath::counted_out_shaped`]).
    pub fn counted_out(&self, to: u32) -> Counted {
        self.counted_key(to | OUT)
    }

    /// What the kernel's bridge sent toward plane device `to`'s node into the bucket at
    /// its root ([`FastPath::shape_out`]).
    pub fn counted_out_shaped(&self, to: u32) -> Counted {
        self.counted_key(to | OUT | SHAPED)
    }

    /// The IFB device of LAN port `port`, if one was made ([`FastPath::ifb`]).
    pub fn ifb_of(&self, port: u32) -> Option<u32> {
        self.ifbs.lock().unwrap_or_else(|p| p.into_inner()).get(&port).copied()
    }

    fn counted_key(&self, key: u32) -> Counted {
        let counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let per_cpu = match dense_slot(key) {
            Some(slot) => counts.dense.get(&slot, 0),
            None => counts.hash.get(&key, 0),
        };
        match per_cpu {
            Ok(per_cpu) => per_cpu.iter().fold(Counted::default(), |a, c| Counted {
                frames: a.frames + c.frames,
                bytes: a.bytes + c.bytes,
            }),
            Err(_) => Counted::default(),
        }
    }

    /// Take plane device `ifindex` down or up: its veth peer, a node's interface, loses
    /// or regains its carrier.
    pub fn set_device_up(&self, ifindex: u32, up: bool) -> Result<()> {
        // SAFETY: ifreq is plain data; every ioctl below reads or writes one.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        req.ifr_ifru.ifru_ifindex = ifindex as i32;
        let ctl = self.ctl.lock().unwrap_or_else(|p| p.into_inner());
        let fd = ctl.as_raw_fd();
        // SAFETY: as above.
        if unsafe { libc::ioctl(fd, libc::SIOCGIFNAME, &mut req) } < 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("naming plane device {ifindex}"));
        }
        // SAFETY: as above.
        if unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) } < 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("reading the flags of plane device {ifindex}"));
        }
        // SAFETY: the union's flags member, as SIOCGIFFLAGS filled it.
        let flags = unsafe { req.ifr_ifru.ifru_flags };
        let up_flag = libc::IFF_UP as libc::c_short;
        req.ifr_ifru.ifru_flags = if up { flags | up_flag } else { flags & !up_flag };
        // SAFETY: as above.
        if unsafe { libc::ioctl(fd, libc::SIOCSIFFLAGS, &req) } < 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("setting plane device {ifindex} up={up}"));
        }
        Ok(())
    }

    /// Whether the kernel makes token buckets here (it may lack `sch_tbf`): if not, why.
    /// Directions that ask for the kernel's shaper must then be left to the engine.
    pub fn shaper(&self) -> std::result::Result<(), &str> {
        self.shaper.as_ref().map(|_| ()).map_err(String::as_str)
    }

    /// Whether LAN ports can be shaped here too ([`Route::BridgeShaped`]): token buckets
    /// and IFB devices (the kernel may lack `ifb`); if not, why. Found out the first time
    /// it is asked, by making an IFB device (`qprobe`, left in the plane: making one is a
    /// few ms, taking one away waits for the kernel's RCU grace period).
    pub fn bridge_shaper(&self) -> std::result::Result<(), &str> {
        self.shaper()?;
        let probe = self.ifb_probe.get_or_init(|| {
            let mut ctl = self.ctl.lock().unwrap_or_else(|p| p.into_inner());
            ctl.request(netlink::new_ifb("qprobe"), netlink::CREATE_NEW)
                .map(|_| ())
                .map_err(|e| format!("the kernel makes no IFB device: {e:#}"))
        });
        probe.as_ref().map(|_| ()).map_err(String::as_str)
    }

    /// Give the namespace's loopback device (index 1) a bucket and take it away.
    fn try_shaper(&self) -> Result<()> {
        self.shape(1, Bucket { rate_bps: 1_000_000, burst_bytes: 3036, limit_bytes: 3036 })?;
        let mut ctl = self.ctl.lock().unwrap_or_else(|p| p.into_inner());
        ctl.request(netlink::delete_root(1), 0).context("taking a token bucket away")?;
        Ok(())
    }

    /// Make (or change) the token bucket at the root of plane device `ifindex`'s egress.
    /// Its counters are kept across changes.
    pub fn shape(&self, ifindex: u32, bucket: Bucket) -> Result<()> {
        let mut ctl = self.ctl.lock().unwrap_or_else(|p| p.into_inner());
        ctl.request(netlink::tbf(ifindex, bucket), netlink::CREATE_OR_CHANGE).with_context(
            || format!("giving plane device {ifindex} a token bucket of {} bit/s", bucket.rate_bps),
        )?;
        self.ever_shaped.lock().unwrap_or_else(|p| p.into_inner()).insert(ifindex);
        Ok(())
    }

    /// What the token bucket of plane device `ifindex` did (see [`FastPath::shape`]),
    /// with what its earlier buckets taken away did ([`FastPath::unshape`]); zeros for
    /// a device that never had one.
    pub fn shaped(&self, ifindex: u32) -> Result<BucketStats> {
        let retired = self
            .retired
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&ifindex)
            .copied()
            .unwrap_or_default();
        Ok(match self.live_bucket(ifindex)? {
            Some(live) => BucketStats {
                frames: live.frames + retired.frames,
                bytes: live.bytes + retired.bytes,
                drops: live.drops + retired.drops,
                queue_frames: live.queue_frames,
                queue_bytes: live.queue_bytes,
            },
            None => retired,
        })
    }

    /// The counters of the bucket at the root of `ifindex` now, if it has one.
    fn live_bucket(&self, ifindex: u32) -> Result<Option<BucketStats>> {
        if !self.ever_shaped.lock().unwrap_or_else(|p| p.into_inner()).contains(&ifindex) {
            return Ok(None);
        }
        let mut ctl = self.ctl.lock().unwrap_or_else(|p| p.into_inner());
        match ctl.request(netlink::get_root(ifindex), netlink::ECHO) {
            Ok(reply) => Ok(reply.filter(netlink::is_tbf).map(|m| netlink::bucket_stats(&m))),
            Err(e)
                if e.downcast_ref::<std::io::Error>()
                    .and_then(std::io::Error::raw_os_error)
                    .is_some_and(|c| c == libc::ENOENT || c == libc::EINVAL) =>
            {
                Ok(None)
            }
            Err(e) => Err(e.context(format!("reading the token bucket of plane device {ifindex}"))),
        }
    }

    /// Take the token bucket at the root of plane device `ifindex` away (if it has
    /// one), keeping what it did for [`FastPath::shaped`].
    pub fn unshape(&self, ifindex: u32) -> Result<()> {
        let Some(last) = self.live_bucket(ifindex)? else { return Ok(()) };
        {
            let mut ctl = self.ctl.lock().unwrap_or_else(|p| p.into_inner());
            ctl.request(netlink::delete_root(ifindex), 0).with_context(|| {
                format!("taking the token bucket of plane device {ifindex} away")
            })?;
        }
        let mut retired = self.retired.lock().unwrap_or_else(|p| p.into_inner());
        let r = retired.entry(ifindex).or_default();
        r.frames += last.frames;
        r.bytes += last.bytes;
        r.drops += last.drops;
        Ok(())
    }

    /// The IFB device of LAN port `port` (a plane device), made and brought up the
    /// first time it is asked for: the egress of a port whose node's frames the kernel
    /// shapes ([`Route::BridgeShaped`]). It lives in the plane, and goes with it.
    pub fn ifb(&self, port: u32) -> Result<u32> {
        let mut ifbs = self.ifbs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&ifb) = ifbs.get(&port) {
            return Ok(ifb);
        }
        let name = format!("q{port}");
        let mut ctl = self.ctl.lock().unwrap_or_else(|p| p.into_inner());
        ctl.request(netlink::new_ifb(&name), netlink::CREATE_NEW).with_context(|| {
            format!(
                "making the IFB device of plane device {port} (the kernel needs the ifb module)"
            )
        })?;
        // SAFETY: ifreq is plain data; SIOCGIFINDEX reads its name and writes its index.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
            *d = s as libc::c_char;
        }
        // SAFETY: as above.
        if unsafe { libc::ioctl(ctl.as_raw_fd(), libc::SIOCGIFINDEX, &mut req) } < 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("finding IFB device {name}"));
        }
        // SAFETY: the union's index member, as SIOCGIFINDEX filled it.
        let ifb = unsafe { req.ifr_ifru.ifru_ifindex } as u32;
        ifbs.insert(port, ifb);
        Ok(ifb)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_is_read_from_the_end_of_a_frame() {
        let mut frame = vec![0xab; 60];
        frame.extend_from_slice(&123_456_789u64.to_ne_bytes());
        frame.extend_from_slice(&3u32.to_ne_bytes());
        frame.extend_from_slice(&[0; 4]);
        assert_eq!(Stamp::at_end(&frame), Some(Stamp { ns: 123_456_789, cpu: 3 }));
        assert_eq!(Stamp::at_end(&frame[..STAMP_LEN - 1]), None, "no room: no stamp");
    }
}
