//! The thin driver of one shard: a thread with one epoll set that reads frames from the
//! shard's TAP devices into its [`Core`], sleeps until the core's next deadline, writes
//! what the core hands out, sets carriers and passes capture copies on. It owns no
//! policy: every decision about a frame is the core's.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, Sender, SyncSender, TryRecvError, TrySendError};
use std::sync::Arc;

use anyhow::{Context, Result};
use rustc_hash::FxHashMap;
use vemu_link::Impairments;

use crate::batch::{self, TapWriter};
use crate::clock::LabClock;
use crate::core::{Applied, Command, Core, Event, Frame, Path, RadioSnapshot, Shape, Transmit};
use crate::gso;
use crate::gso::VNET_HDR_LEN;
use crate::schedule::{self, Priority, Schedule};
use crate::tunnel;
use nix::sys::socket::SockaddrLike;
use vemu_fastpath::{Bucket, FastPath, Route};

/// Largest frame TAP hands over: a 64 KiB super-frame plus headers.
const MAX_FRAME: usize = 65536 + 256;
/// Largest frame written to the fan-out device (with its virtio-net header), before
/// the list of ports: a jumbo frame.
const FANOUT_FRAME_MAX: usize = 9216 + VNET_HDR_LEN;
/// Frames read shorter than this are copied out of the read buffer; longer ones take it
/// with them (see `Shard::read_from`).
const COPY_BELOW: usize = 4096;
/// Frames read from one device before looking at the others and the timers.
const READ_BATCH: usize = 32;
/// Frames written before looking at control messages and devices again: a backlog (a
/// LAN's start-up flood) must not keep a shard from hearing "stop" for seconds.
const WRITE_BATCH: usize = 1024;
const WAKE_TOKEN: u64 = u64::MAX;
/// The shard's tunnel socket (see [`Shard::read_tunnels`]).
const TUNNEL_TOKEN: u64 = u64::MAX - 1;
/// Threads closing TAP devices at once when the engine stops.
const CLOSE_THREADS: usize = 32;

const TUNSETCARRIER: libc::c_ulong = 0x4004_54e2;

/// A link end's devices in the lab's plane namespace (see `vemu-fastpath`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlaneDevs {
    /// The veth peer of the node's interface.
    pub veth: u32,
    /// The engine's TAP device, once made.
    pub tap: Option<u32>,
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

/// What the engine asks of a shard.
#[allow(clippy::large_enum_variant)] // (as `Command`: rare, moved once)
pub(crate) enum Control {
    Apply(Command, Option<Sender<Applied>>),
    /// A capture's sink, before its `Command::Capture`s.
    CaptureSink {
        id: u64,
        tx: SyncSender<Captured>,
    },
    Radio {
        seg: usize,
        done: Sender<RadioSnapshot>,
    },
    /// How far behind its schedule the shard is, ns ([`Core::backlog_ns`]).
    Backlog(Sender<u64>),
    /// The engine's TAP devices of a link's ends or a LAN's ports in the plane, just
    /// made: (port, index in the plane, descriptor). Sent before the command that needs
    /// them.
    Taps(Vec<(u32, u32, OwnedFd)>),
    Stop,
}

/// A port with a kernel path: its plane devices, and the kernel's route of what its node
/// sends while on that path ([`Far`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PlanePort {
    pub devs: PlaneDevs,
    pub far: Far,
}

impl PlanePort {
    pub fn new(devs: PlaneDevs, far: Far) -> PlanePort {
        PlanePort { devs, far }
    }
}

/// Where the kernel sends what a node sends while its direction is on the kernel path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Far {
    /// The far end's veth (a link on this machine).
    Veth(u32),
    /// The LAN's bridge.
    Bridge,
    /// Another machine, through the lab's VXLAN device `vxlan` to `remote` with VNI
    /// `vni`: when the link's tunnel port `port` has found the underlay's path to carry
    /// `needs_payload` bytes a datagram (a whole frame and its VXLAN header).
    Tunnel { vxlan: u32, remote: std::net::IpAddr, vni: u32, port: u32, needs_payload: usize },
    /// Nowhere: a link end toward another machine that has no kernel tunnel.
    Nowhere,
}

/// UDP payload a frame needs beyond its interface's MTU through the kernel's VXLAN
/// device: its Ethernet header (14), a VLAN tag (4), the VXLAN header (8).
pub const TUNNEL_FRAME_EXTRA: usize = 26;

/// What a port's descriptor is.
pub(crate) enum PortDev {
    /// A TAP device (a node's interface, or the engine's in the plane without a
    /// kernel path).
    Tap,
    /// The engine's TAP device in the plane of a link end with a kernel path.
    Plane(PlanePort),
    /// The far side of a link on another machine, through the shard's tunnel socket
    /// ([`crate::tunnel`]); no descriptor of its own.
    Tunnel(Box<TunnelPort>),
}

/// The far side of a link on another machine, as a port: frames written to it cross
/// the underlay from the shard's tunnel socket to `far`, and what the socket receives
/// from `far` with this port's VNIs goes to the link's local port.
pub(crate) struct TunnelPort {
    /// The far machine's socket (set once the machines exchanged their addresses).
    pub far: Option<SockAddr>,
    /// VNI of the frames sent, and of those taken.
    pub vni_out: u32,
    pub vni_in: u32,
    /// The link's local port.
    pub deliver_to: u32,
    /// What the underlay's interface carries a datagram, and over IPv6: given to the
    /// core, which chooses the size in use ([`Core::tunnel_payload`]: path MTU discovery of
    /// our own, as the underlay may drop larger datagrams without a word).
    max_payload: usize,
    ipv6: bool,
    pub seq: u32,
    pub reasm: tunnel::Reassembler,
    pub dgrams: Vec<Vec<u8>>,
    /// The pieces of a frame go by UDP segmentation offload (see [`send_datagrams`])
    /// until the kernel refuses it once; the buffer they are laid out in.
    gso: bool,
    gso_buf: Vec<u8>,
}

impl TunnelPort {
    /// The port of tunnel `id` to the far socket `far`, sending in direction `dir_out`
    /// (receiving in the other), handing what it receives to the core as for port
    /// `deliver_to`; the underlay's interface carries `payload` bytes of UDP (`ipv6`:
    /// over IPv6).
    pub fn new(
        id: u32,
        payload: usize,
        ipv6: bool,
        far: Option<std::net::SocketAddr>,
        dir_out: u8,
        deliver_to: u32,
    ) -> TunnelPort {
        TunnelPort {
            far: far.map(SockAddr::from),
            vni_out: tunnel::vni(id, dir_out),
            vni_in: tunnel::vni(id, 1 - dir_out),
            deliver_to,
            max_payload: payload,
            ipv6,
            seq: 0,
            reasm: tunnel::Reassembler::new(),
            dgrams: Vec::new(),
            gso: true,
            gso_buf: Vec::new(),
        }
    }

    /// Send a frame that left at `at_ns` in datagrams of `payload` bytes: `Ok` when every
    /// datagram went, else the error of the first that did not (`EMSGSIZE`: too long for
    /// the machine's own interface).
    fn send(&mut self, fd: RawFd, frame: &[u8], at_ns: u64, payload: usize) -> Result<(), i32> {
        let Some(far) = self.far else { return Err(libc::ENOTCONN) };
        self.dgrams.clear();
        tunnel::encode(
            frame,
            tunnel::Meta { vni: self.vni_out, seq: self.seq, departure_ns: at_ns },
            payload,
            &mut self.dgrams,
        );
        self.seq = self.seq.wrapping_add(1);
        if self.dgrams.is_empty() {
            return Err(libc::EINVAL);
        }
        send_datagrams(fd, Some(&far), &self.dgrams, &mut self.gso_buf, &mut self.gso)
    }
}

/// A socket address as the kernel takes it (`sockaddr_in` or `sockaddr_in6`): nix's.
type SockAddr = nix::sys::socket::SockaddrStorage;

/// `UDP_SEGMENT` (linux/udp.h), which the libc crate has only for some C libraries.
const UDP_SEGMENT: libc::c_int = 103;
/// At most this many datagrams, and this many bytes of them, in one segmented send: the
/// kernel's limits (`UDP_MAX_SEGMENTS`; one UDP datagram's payload, with room for IPv6).
const GSO_MAX_SEGMENTS: usize = 64;
const GSO_MAX_BYTES: usize = 65_000;

/// Send datagrams `ds` on a UDP socket (to `to`, or where it is connected) without
/// waiting — each as long as the first but the last, which is no longer, as
/// [`tunnel::encode`] cuts a frame — in as few system calls as the kernel allows: runs of them laid out in `buf` and cut at the
/// first's length by UDP segmentation offload (`UDP_SEGMENT`, one `sendmsg` for up to
/// 64), while `gso` holds (cleared for good when the kernel refuses a segmented send
/// that it then takes one by one). `Ok` when every datagram went, else the error of the
/// first that did not (`EMSGSIZE`: too big for the machine's own interface).
fn send_datagrams(
    fd: RawFd,
    to: Option<&SockAddr>,
    ds: &[Vec<u8>],
    buf: &mut Vec<u8>,
    gso: &mut bool,
) -> std::result::Result<(), i32> {
    let Some(seg) = ds.first().map(Vec::len) else { return Ok(()) };
    let uniform = ds.len() > 1
        && ds[..ds.len() - 1].iter().all(|d| d.len() == seg)
        && ds[ds.len() - 1].len() <= seg
        && seg <= u16::MAX as usize;
    let mut sent = 0;
    let mut refused = false;
    if *gso && uniform {
        let per = (GSO_MAX_BYTES / seg).clamp(1, GSO_MAX_SEGMENTS);
        while ds.len() - sent > 1 {
            let run = &ds[sent..(sent + per).min(ds.len())];
            buf.clear();
            for d in run {
                buf.extend_from_slice(d);
            }
            match send_segmented(fd, to, buf, seg as u16) {
                Ok(()) => sent += run.len(),
                Err(e)
                    if matches!(
                        e,
                        libc::EMSGSIZE | libc::EAGAIN | libc::ENOBUFS | libc::ECONNREFUSED
                    ) =>
                {
                    return Err(e)
                }
                Err(_) => {
                    refused = true;
                    break;
                }
            }
        }
    }
    let mut first_err = None;
    for d in &ds[sent..] {
        if !send_datagram(fd, to, d) {
            first_err
                .get_or_insert(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO));
        }
    }
    if refused && first_err.is_none() {
        // The kernel takes the datagrams, not their segmented send.
        *gso = false;
    }
    first_err.map_or(Ok(()), Err)
}

/// One `sendmsg` of `buf`, which the kernel cuts into datagrams of `seg` bytes (the last
/// may be shorter); the error number if it fails.
fn send_segmented(
    fd: RawFd,
    to: Option<&SockAddr>,
    buf: &[u8],
    seg: u16,
) -> std::result::Result<(), i32> {
    let mut iov = libc::iovec { iov_base: buf.as_ptr() as *mut libc::c_void, iov_len: buf.len() };
    let mut control = [0u64; 4];
    // SAFETY: msghdr is plain data; the pointers set below outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    if let Some(to) = to {
        msg.msg_name = to.as_ptr() as *mut libc::c_void;
        msg.msg_namelen = to.len();
    }
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE/CMSG_LEN are arithmetic.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(2) } as _;
    // SAFETY: one control message of 2 bytes written inside `control`, which is larger
    // than CMSG_SPACE(2); then sendmsg(2) of bytes we hold on a descriptor we own.
    let n = unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::IPPROTO_UDP;
        (*c).cmsg_type = UDP_SEGMENT;
        (*c).cmsg_len = libc::CMSG_LEN(2) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), seg);
        libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT)
    };
    match n == buf.len() as isize {
        true => Ok(()),
        false => Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)),
    }
}

/// Datagrams a tunnel's socket gives at once ([`recv_batch`]).
const RECV_BATCH: usize = 32;
/// Room for one datagram: the largest a UDP socket delivers.
const DATAGRAM_MAX: usize = 65_536;

/// Datagrams received by one [`recv_batch`]: each one's bytes (in `bufs[i][..len[i]]`)
/// and how long it waited in the socket, by the kernel's receive timestamp (0 without
/// one).
pub(crate) struct Received {
    bufs: Vec<Vec<u8>>,
    len: Vec<usize>,
    held_ns: Vec<u64>,
    /// Where each came from, as the kernel wrote it, and its length.
    names: Vec<libc::sockaddr_storage>,
    name_len: Vec<libc::socklen_t>,
}

impl Received {
    fn new() -> Received {
        // SAFETY: sockaddr_storage is plain data.
        let name: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        Received {
            bufs: Vec::new(),
            len: vec![0; RECV_BATCH],
            held_ns: vec![0; RECV_BATCH],
            names: vec![name; RECV_BATCH],
            name_len: vec![0; RECV_BATCH],
        }
    }

    /// Where datagram `i` came from.
    fn from(&self, i: usize) -> Option<SockAddr> {
        // SAFETY: the address the kernel wrote, of the length it said (checked by nix).
        unsafe {
            SockAddr::from_raw(
                (&self.names[i] as *const libc::sockaddr_storage).cast(),
                Some(self.name_len[i]),
            )
        }
    }
}

/// Receive what a socket holds, up to [`RECV_BATCH`] datagrams in one `recvmmsg`,
/// without waiting: how many (`Some(0)`: the socket reported an error, such as an ICMP
/// error of an earlier send, and there may be more); `None` when nothing is waiting.
fn recv_batch(fd: RawFd, r: &mut Received) -> Option<usize> {
    if r.bufs.is_empty() {
        // (Made the first time: only shards with tunnels need them.)
        r.bufs = (0..RECV_BATCH).map(|_| vec![0u8; DATAGRAM_MAX]).collect();
    }
    // (On the stack: this runs at every wake-up of a shard with tunnels.)
    let mut iovs: [libc::iovec; RECV_BATCH] = std::array::from_fn(|i| libc::iovec {
        iov_base: r.bufs[i].as_mut_ptr().cast(),
        iov_len: r.bufs[i].len(),
    });
    let mut controls = [[0u64; 8]; RECV_BATCH];
    let names = r.names.as_mut_ptr();
    // SAFETY: mmsghdr is plain data; each points at its own address, iovec and control
    // buffer, which outlive the call (`names` has RECV_BATCH entries).
    let mut msgs: [libc::mmsghdr; RECV_BATCH] = std::array::from_fn(|i| {
        let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
        m.msg_hdr.msg_name = unsafe { names.add(i) }.cast();
        m.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        m.msg_hdr.msg_iov = &mut iovs[i];
        m.msg_hdr.msg_iovlen = 1;
        m.msg_hdr.msg_control = controls[i].as_mut_ptr().cast();
        m.msg_hdr.msg_controllen = std::mem::size_of_val(&controls[i]) as _;
        m
    });
    // SAFETY: recvmmsg(2) into buffers we own, sized as told.
    let n = unsafe {
        libc::recvmmsg(
            fd,
            msgs.as_mut_ptr(),
            RECV_BATCH as u32,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    if n < 0 {
        return match std::io::Error::last_os_error().kind() {
            std::io::ErrorKind::WouldBlock => None,
            _ => Some(0),
        };
    }
    // SAFETY: timespec is plain data; clock_gettime writes into the one we own.
    let mut now: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut now) };
    let ns = |t: &libc::timespec| t.tv_sec as i128 * 1_000_000_000 + t.tv_nsec as i128;
    for (i, m) in msgs.iter().take(n as usize).enumerate() {
        r.len[i] = m.msg_len as usize;
        r.name_len[i] = m.msg_hdr.msg_namelen;
        r.held_ns[i] = 0;
        // SAFETY: walking the control messages the kernel wrote into this message's buffer.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&m.msg_hdr);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                    let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    // (A realtime clock stepped meanwhile could make it absurd: at most 1 s.)
                    r.held_ns[i] = (ns(&now) - ns(&ts)).clamp(0, 1_000_000_000) as u64;
                }
                c = libc::CMSG_NXTHDR(&m.msg_hdr, c);
            }
        }
    }
    Some(n as usize)
}

/// Send one datagram on a UDP socket (to `to`, or where it is connected) without
/// waiting; whether it went whole.
fn send_datagram(fd: RawFd, to: Option<&SockAddr>, d: &[u8]) -> bool {
    // SAFETY: sending bytes we hold on a descriptor we own, to an address we built.
    let n = match to {
        Some(to) => unsafe {
            libc::sendto(fd, d.as_ptr().cast(), d.len(), libc::MSG_DONTWAIT, to.as_ptr(), to.len())
        },
        None => unsafe { libc::send(fd, d.as_ptr().cast(), d.len(), libc::MSG_DONTWAIT) },
    };
    n == d.len() as isize
}

/// What a shard writes to one device: a frame the core handed out, or one frame for the
/// fan-out device with the list of LAN ports at its end, standing for the copies the
/// core handed out for each of them.
pub(crate) enum Out {
    One(Transmit),
    Fan { bytes: Vec<u8>, txs: Vec<Transmit> },
}

impl Out {
    fn transmits(&self) -> &[Transmit] {
        match self {
            Out::One(tx) => std::slice::from_ref(tx),
            Out::Fan { txs, .. } => txs,
        }
    }
}

impl batch::Bytes for Out {
    fn bytes(&self) -> &[u8] {
        match self {
            Out::One(tx) => &tx.frame,
            Out::Fan { bytes, .. } => bytes,
        }
    }
}

/// The handle the engine keeps of a running shard.
pub(crate) struct ShardHandle {
    tx: Sender<Control>,
    wake: OwnedFd,
    /// Nanoseconds the shard has spent working (see [`Shard::work_ns`]).
    pub work_ns: Arc<AtomicU64>,
    /// Why the shard's thread ended on its own (it panicked), if it did.
    pub died: Arc<std::sync::Mutex<Option<String>>>,
    thread: Option<std::thread::JoinHandle<Vec<OwnedFd>>>,
}

/// Environment variable for fault-injection tests: `VEMU_ENGINE_FAULT=panic-after:N`
/// makes the first shard panic after it has read N frames; `stall-reads-us:N` makes
/// every shard wait N µs before each look at a device (an engine too slow to read: frames
/// wait in the input queues, and are written on time after it).
pub const FAULT_ENV: &str = "VEMU_ENGINE_FAULT";

impl ShardHandle {
    /// Start a shard thread running `core` over `fds` (one per port of the core, in
    /// order), with the ports' plane devices (`plane`, one per port) on `fast`.
    /// `fanout`: the shard's fan-out device in the plane (see [`Shard::fan_target`]).
    /// `tunnel`: the shard's UDP socket for its tunnel ports (see [`TunnelPort`]).
    #[allow(clippy::too_many_arguments)]
    pub fn spawn(
        index: usize,
        core: Core,
        fds: Vec<Option<OwnedFd>>,
        devs: Vec<PortDev>,
        fast: Option<Arc<FastPath>>,
        probe: Option<Arc<OwnedFd>>,
        fanout: Option<OwnedFd>,
        tunnel: Option<OwnedFd>,
        clock: LabClock,
    ) -> Result<ShardHandle> {
        assert_eq!(core.port_count(), fds.len(), "one device per port");
        assert_eq!(fds.len(), devs.len(), "one kind per port");
        // SAFETY: eventfd returns a new descriptor or -1.
        let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(std::io::Error::last_os_error()).context("creating an eventfd");
        }
        // SAFETY: efd is a fresh descriptor we own.
        let wake = unsafe { OwnedFd::from_raw_fd(efd) };
        let (tx, rx) = std::sync::mpsc::channel();
        let mut shard = Shard::new(core, fds, rx, wake.as_raw_fd(), clock)?;
        shard.devs = devs;
        // The far sockets, named by their place in this list for the core (which has
        // the tunnels to one probed together).
        let mut fars: Vec<SockAddr> = Vec::new();
        for (port, d) in shard.devs.iter().enumerate() {
            match d {
                PortDev::Tunnel(t) => {
                    let far = t.far.map(|a| match fars.iter().position(|f| *f == a) {
                        Some(i) => i as u64,
                        None => {
                            fars.push(a);
                            (fars.len() - 1) as u64
                        }
                    });
                    shard.core.add_tunnel(port as u32, far, t.max_payload, t.ipv6);
                    // What comes with either VNI of its link: frames and probes the far
                    // side sends (vni_in), answers to this side's probes (vni_out).
                    shard.tunnel_ports.insert(t.vni_in, port);
                    shard.tunnel_ports.insert(t.vni_out, port);
                }
                PortDev::Plane(PlanePort {
                    far: Far::Tunnel { port: tunnel, needs_payload, .. },
                    ..
                }) => shard.core.add_kernel_tunnel(port as u32, *tunnel, *needs_payload),
                _ => {}
            }
        }
        if let Some(t) = &tunnel {
            epoll_add(shard.epoll.as_raw_fd(), t.as_raw_fd(), TUNNEL_TOKEN)?;
        }
        shard.tunnel = tunnel;
        shard.fast = fast;
        shard.last_arrival_ns = vec![0; shard.fds.len()];
        if probe.is_some() {
            shard.last_read_ns = vec![None; shard.fds.len()];
            shard.next_input_probe_ns = Some(INPUT_PROBE_EVERY_NS);
        }
        shard.probe_sock = probe;
        shard.fanout = fanout;
        // The first choice of paths is carried out before any frame moves.
        shard.events();
        if index == 0 {
            shard.panic_after = std::env::var(FAULT_ENV)
                .ok()
                .and_then(|v| v.strip_prefix("panic-after:").and_then(|n| n.parse().ok()));
        }
        shard.stall_reads_ns = std::env::var(FAULT_ENV)
            .ok()
            .and_then(|v| v.strip_prefix("stall-reads-us:").and_then(|n| n.parse::<u64>().ok()))
            .map_or(0, |us| us * 1000);
        let work_ns = shard.work_ns.clone();
        let died = Arc::new(std::sync::Mutex::new(None));
        let report = died.clone();
        let thread =
            std::thread::Builder::new().name(format!("vemu-engine-{index}")).spawn(move || {
                // A shard that panics (a bug) must not pass unnoticed: its links stop, and
                // the controller says so (status, events, the fidelity verdict).
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| shard.run())) {
                    Ok(fds) => fds,
                    Err(p) => {
                        let why = p
                            .downcast_ref::<&str>()
                            .map(|s| s.to_string())
                            .or_else(|| p.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "a panic".into());
                        *report.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
                        std::mem::take(&mut shard.fds).into_iter().flatten().collect()
                    }
                }
            })?;
        Ok(ShardHandle { tx, wake, work_ns, died, thread: Some(thread) })
    }

    pub fn send(&self, c: Control) {
        let _ = self.tx.send(c);
        let one: u64 = 1;
        // SAFETY: writing 8 bytes to an eventfd.
        unsafe { libc::write(self.wake.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Apply a command and wait until the shard has.
    pub fn apply(&self, cmd: Command) -> Option<Applied> {
        let (done, rx) = std::sync::mpsc::channel();
        self.send(Control::Apply(cmd, Some(done)));
        rx.recv().ok()
    }

    /// Apply a patch; the impairments now in force, or None when the shard has stopped.
    pub fn patched(&self, cmd: Command) -> Option<Impairments> {
        match self.apply(cmd)? {
            Applied::Impairments(i) => Some(i),
            Applied::Done => None,
        }
    }

    /// Wait for the shard to end (after [`Control::Stop`]); its devices, still open.
    pub fn join(&mut self) -> Vec<OwnedFd> {
        self.thread.take().and_then(|t| t.join().ok()).unwrap_or_default()
    }
}

/// Watch `fd` for frames to read, with `token`.
fn epoll_add(ep: RawFd, fd: RawFd, token: u64) -> Result<()> {
    let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: token };
    // SAFETY: valid epoll and descriptor.
    if unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
        return Err(std::io::Error::last_os_error()).context("adding a device to epoll");
    }
    Ok(())
}

/// Close TAP descriptors from many threads: each close unregisters a device and then
/// waits for the kernel's RCU barriers (~30 ms here), waits that overlap when the
/// closes run side by side (one by one, 1000 nodes took 36 s to tear down).
pub(crate) fn close_all(fds: Vec<OwnedFd>) {
    let per = fds.len().div_ceil(CLOSE_THREADS).max(1);
    let mut fds = fds;
    std::thread::scope(|s| {
        while !fds.is_empty() {
            let chunk: Vec<OwnedFd> = fds.drain(..per.min(fds.len())).collect();
            s.spawn(move || drop(chunk));
        }
    });
}

/// Environment variable of `vemu up` that chooses the shards' priority:
/// `VEMU_ENGINE_PRIORITY=normal` keeps them at niceness −10 (see [`crate::schedule`]).
pub const PRIORITY_ENV: &str = "VEMU_ENGINE_PRIORITY";
/// Real-time priority of the shards (SCHED_FIFO, 1..99): above ordinary programs, below
/// the kernel's own real-time threads.
const FIFO_PRIORITY: i32 = 10;

/// Put the calling shard thread at `p`; the priority it has afterwards (real time can be
/// refused: no privilege, or a container's limits).
fn set_priority(p: Priority) -> Priority {
    if p == Priority::Realtime {
        let param = libc::sched_param { sched_priority: FIFO_PRIORITY };
        // SAFETY: sched_setscheduler on the calling thread (0) with a valid sched_param.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0 {
            return Priority::Realtime;
        }
    }
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: as above; then setpriority on this thread (its tid) with an integer niceness.
    unsafe {
        libc::sched_setscheduler(0, libc::SCHED_OTHER, &param);
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, -10);
    }
    Priority::Normal
}

/// Set the carrier of a TAP device (what `ip link` shows as LOWER_UP / NO-CARRIER).
fn set_carrier(fd: RawFd, on: bool) {
    let v: libc::c_int = on as libc::c_int;
    // SAFETY: TUNSETCARRIER reads an int through the pointer.
    unsafe { libc::ioctl(fd, TUNSETCARRIER, &v) };
}

struct Shard {
    core: Core,
    /// The device of each port of the core (none yet: a link end or LAN port of the
    /// plane whose TAP device is made when it first needs the engine, see
    /// [`Control::Taps`]).
    fds: Vec<Option<OwnedFd>>,
    rx: Receiver<Control>,
    wake_fd: RawFd,
    epoll: OwnedFd,
    clock: LabClock,
    /// What a device read last: room for [`MAX_FRAME`] bytes, none of them needing to
    /// be zeroed first (the kernel writes what is read).
    buf: Vec<u8>,
    /// Buffers of what the tunnel socket gives (see [`recv_batch`]).
    received: Option<Received>,
    /// The shard's tunnel socket, and its tunnel ports by the VNIs they take.
    tunnel: Option<OwnedFd>,
    tunnel_ports: FxHashMap<u32, usize>,
    /// Where each capture's copies go.
    sinks: FxHashMap<u64, SyncSender<Captured>>,
    /// Its priority and how long it spins before deadlines.
    schedule: Schedule,
    /// Time spent handling frames, timers and control messages, ns: the shard's load.
    /// Not its CPU time, which also counts the spinning before deadlines.
    work_ns: Arc<AtomicU64>,
    /// What each port's descriptor is, and the fast path.
    devs: Vec<PortDev>,
    fast: Option<Arc<FastPath>>,
    /// Fault injection ([`FAULT_ENV`]): frames to read before panicking.
    panic_after: Option<u64>,
    /// Fault injection ([`FAULT_ENV`]): wait this long before each read of a device, ns.
    stall_reads_ns: u64,
    /// The probes of a round (see [`Core::handle_probe_timeout`]).
    probes: Vec<(u32, usize)>,
    /// Input probes (see [`INPUT_PROBE_EVERY_NS`]): the plane's packet socket, when the
    /// next round is, where it goes on, and when each port last read a frame.
    probe_sock: Option<Arc<OwnedFd>>,
    next_input_probe_ns: Option<u64>,
    input_probe_cursor: usize,
    last_read_ns: Vec<Option<u64>>,
    /// Frames read from the plane's TAP devices are timed from their arrival there
    /// (see [`Shard::arrival`]): up to when the core last carried out what was due (its
    /// timers, its frames due), and the arrival time last given to it for each port.
    timers_ns: u64,
    last_arrival_ns: Vec<u64>,
    /// Writes frames to TAP devices a batch at a time, and the batch being filled.
    writer: TapWriter<Out>,
    batch: batch::Batch<Out>,
    /// The fan-out device (see [`Shard::fan_target`]), and the copies of one frame for
    /// LAN ports gathered for it: each with its port's plane device.
    fanout: Option<OwnedFd>,
    fan: Vec<(Transmit, u32)>,
}

/// Input probes: every 100 ms, each plane TAP port that read a frame in the last 2 s
/// (at most [`INPUT_PROBES_PER_ROUND`] a round, in turn) gets a probe frame sent on its
/// TAP device through a packet socket: the kernel queues it behind the frames waiting
/// for the engine there, and when the engine reads it, how long it waited is what those
/// frames waited before the engine saw them — time the lateness of writes cannot show.
const INPUT_PROBE_EVERY_NS: u64 = 100_000_000;
const INPUT_PROBE_ACTIVE_NS: u64 = 2_000_000_000;
const INPUT_PROBES_PER_ROUND: usize = 64;
/// A probe frame: local experimental ethertype, this tag, the lab time sent (ns, BE).
const INPUT_PROBE_TAG: &[u8; 8] = b"VEMU-IWP";

/// The probe frame sent at lab time `t_ns`.
fn input_probe_frame(t_ns: u64) -> [u8; 60] {
    let mut f = [0u8; 60];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0]);
    f[6..12].copy_from_slice(&[0x02, 0x56, 0x45, 0x4d, 0x55, 0x01]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f[14..22].copy_from_slice(INPUT_PROBE_TAG);
    f[22..30].copy_from_slice(&t_ns.to_be_bytes());
    f
}

/// The lab time an Ethernet frame was sent at, if it is an input probe.
pub(crate) fn input_probe_time(eth: &[u8]) -> Option<u64> {
    (eth.len() >= 30 && eth[12..14] == [0x88, 0xb5] && &eth[14..22] == INPUT_PROBE_TAG)
        .then(|| u64::from_be_bytes(eth[22..30].try_into().expect("8 bytes")))
}

impl Shard {
    fn new(
        core: Core,
        fds: Vec<Option<OwnedFd>>,
        rx: Receiver<Control>,
        wake_fd: RawFd,
        clock: LabClock,
    ) -> Result<Shard> {
        // SAFETY: epoll_create1 returns a new descriptor or -1.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(std::io::Error::last_os_error()).context("creating an epoll set");
        }
        // SAFETY: ep is a fresh descriptor we own.
        let epoll = unsafe { OwnedFd::from_raw_fd(ep) };
        epoll_add(ep, wake_fd, WAKE_TOKEN)?;
        for (i, fd) in fds.iter().enumerate() {
            if let Some(fd) = fd {
                epoll_add(ep, fd.as_raw_fd(), i as u64)?;
            }
        }
        Ok(Shard {
            core,
            fds,
            rx,
            wake_fd,
            epoll,
            clock,
            buf: Vec::with_capacity(MAX_FRAME),
            received: None,
            tunnel: None,
            tunnel_ports: FxHashMap::default(),
            sinks: FxHashMap::default(),
            schedule: Schedule::new(Priority::Normal, 0),
            work_ns: Arc::new(AtomicU64::new(0)),
            devs: Vec::new(),
            fast: None,
            panic_after: None,
            stall_reads_ns: 0,
            probes: Vec::new(),
            probe_sock: None,
            next_input_probe_ns: None,
            input_probe_cursor: 0,
            last_read_ns: Vec::new(),
            timers_ns: 0,
            last_arrival_ns: Vec::new(),
            writer: TapWriter::new(),
            batch: Vec::with_capacity(batch::BATCH),
            fanout: None,
            fan: Vec::new(),
        })
    }

    /// The descriptor of a port (-1 while it has none: writes to it fail).
    fn fd(&self, port: usize) -> RawFd {
        self.fds.get(port).and_then(|f| f.as_ref()).map_or(-1, |f| f.as_raw_fd())
    }

    /// The shard's tunnel socket (-1 without one).
    fn tunnel_fd(&self) -> RawFd {
        self.tunnel.as_ref().map_or(-1, |f| f.as_raw_fd())
    }

    /// Forward until told to stop; then hand the devices back (frames still queued are
    /// dropped with the core).
    fn run(&mut self) -> Vec<OwnedFd> {
        // Timers as precise as the kernel allows: no slack on our sleeps.
        // SAFETY: prctl with an integer argument.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
        let asked = match std::env::var(PRIORITY_ENV).as_deref() {
            Ok("normal") => Priority::Normal,
            _ => Priority::Realtime,
        };
        self.schedule = Schedule::new(set_priority(asked), self.clock.now_ns());
        let mut told_busy = false;
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
        let mut work_ns = 0u64;
        // After working, poll until then before sleeping (see `schedule`).
        let mut linger_until = 0u64;
        loop {
            let now = self.clock.now_ns();
            if self.core.poll_timeout().is_some_and(|t| t <= now) {
                self.core.handle_timeout(now);
                self.timers_ns = now;
                self.transmit();
                let done = self.clock.now_ns();
                work_ns += done.saturating_sub(now);
                linger_until = done + self.schedule.linger_ns();
            }
            if self.core.probe_timeout().is_some_and(|t| t <= now) {
                self.probe_tunnels(now);
            }
            if self.next_input_probe_ns.is_some_and(|t| t <= now) {
                self.probe_inputs(now);
            }
            if let Some(p) = self.schedule.review(now, work_ns) {
                if set_priority(p) != p {
                    self.schedule = Schedule::new(Priority::Normal, now);
                } else if p == Priority::Normal && !std::mem::replace(&mut told_busy, true) {
                    eprintln!("engine: a shard was busy over {:.0}% of {} ms: it leaves real-time priority until under {:.0}% (its frames may then wait behind the nodes' programs)", schedule::HIGH_LOAD * 100.0, schedule::WINDOW_NS / 1_000_000, schedule::LOW_LOAD * 100.0);
                }
            }
            // How long until the core's next deadline, and so until the shard wakes
            // for it: that much earlier than the wake-ups of a sleep as long came late.
            let core_until = self.core.poll_timeout().map(|at| at.saturating_sub(now));
            let core_due =
                core_until.map(|until| until.saturating_sub(self.schedule.spin_ns(until)));
            let probe_due = self
                .core
                .probe_timeout()
                .into_iter()
                .chain(self.next_input_probe_ns)
                .min()
                .map(|at| at.saturating_sub(now));
            let lingering = now < linger_until;
            let timeout = match (core_due, probe_due) {
                _ if lingering => Some(0),
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            // The wake-up's time, and how far its deadline was (the class of its sleep).
            let wake_at = timeout.filter(|&t| t > 0).map(|t| now + t);
            let asked_until = match (core_due, core_until) {
                (Some(d), Some(u)) if timeout == Some(d) => u,
                _ => timeout.unwrap_or(0),
            };
            let ts = timeout.map(|ns| libc::timespec {
                tv_sec: (ns / 1_000_000_000) as i64,
                tv_nsec: (ns % 1_000_000_000) as i64,
            });
            let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
            // SAFETY: events has room for its length; tsp is null or valid.
            let n = unsafe {
                libc::epoll_pwait2(
                    self.epoll.as_raw_fd(),
                    events.as_mut_ptr(),
                    events.len() as i32,
                    tsp,
                    std::ptr::null(),
                )
            };
            if n < 0 {
                continue; // EINTR
            }
            let woke = self.clock.now_ns();
            if let (0, Some(at)) = (n, wake_at) {
                // A timed wake-up: learn how late they come.
                self.schedule.woke(asked_until, woke.saturating_sub(at));
            }
            if n == 0 && lingering {
                self.schedule.lingered(woke.saturating_sub(now));
            }
            for ev in &events[..n as usize] {
                if ev.u64 == WAKE_TOKEN {
                    let mut v: u64 = 0;
                    // SAFETY: reading 8 bytes from an eventfd.
                    unsafe { libc::read(self.wake_fd, (&mut v as *mut u64).cast(), 8) };
                    if !self.control() {
                        return std::mem::take(&mut self.fds)
                            .into_iter()
                            .flatten()
                            .chain(self.tunnel.take())
                            .collect();
                    }
                    continue;
                }
                if ev.u64 == TUNNEL_TOKEN {
                    self.read_tunnels();
                    continue;
                }
                let port = ev.u64 as usize;
                if ev.events & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0 {
                    self.forget(port);
                    continue;
                }
                self.read_from(port);
            }
            self.events();
            if n > 0 {
                let done = self.clock.now_ns();
                work_ns += done.saturating_sub(woke);
                linger_until = done + self.schedule.linger_ns();
            }
            self.work_ns.store(work_ns, Relaxed);
        }
    }

    /// Write the frames that are due, up to [`WRITE_BATCH`] (the rest stay due: the
    /// loop comes back at once, after a look at control messages and devices).
    fn transmit(&mut self) {
        let mut polled = 0;
        let mut more = true;
        while more && polled < WRITE_BATCH {
            // Up to a batch of TAP frames, written together ([`batch`]); a tunnel's
            // datagrams go at once. (One place is kept for the copies being gathered.)
            while self.batch.len() + 1 < batch::BATCH && polled < WRITE_BATCH {
                let t = self.clock.now_ns();
                self.timers_ns = t;
                let Some(tx) = self.core.poll_transmit(t) else {
                    more = false;
                    break;
                };
                polled += 1;
                if let Some(port) = self.fan_target(&tx) {
                    if self.fan.first().is_some_and(|(f, _)| !Arc::ptr_eq(&f.frame, &tx.frame))
                        || self.fan.len() == vemu_fastpath::FANOUT_MAX
                    {
                        self.flush_fan();
                    }
                    self.fan.push((tx, port));
                    continue;
                }
                self.flush_fan();
                let fd = self.fd(tx.port as usize);
                let tunnel_fd = self.tunnel_fd();
                match self.devs.get_mut(tx.port as usize) {
                    Some(PortDev::Tunnel(t)) => {
                        let payload = self.core.tunnel_payload(tx.port);
                        let sent = t.send(tunnel_fd, &tx.frame, tx.at_ns, payload);
                        if sent == Err(libc::EMSGSIZE) {
                            self.core.handle_too_big(tx.port);
                        }
                        self.core.on_written(&tx, sent.is_ok());
                    }
                    _ => self.batch.push((fd, Out::One(tx))),
                }
            }
            self.flush_fan();
            let core = &mut self.core;
            self.writer.write(&mut self.batch, |out, ok| {
                for tx in out.transmits() {
                    core.on_written(tx, ok);
                }
            });
        }
        self.events();
    }

    /// Whether a frame for a LAN port goes by the fan-out device, and the port's plane
    /// device if so: a LAN port in the plane whose LAN the engine switches (it has a TAP
    /// device), a frame that is not a TCP super-frame (those cannot carry the list of
    /// ports at their end). The copies of one frame for several ports are then written
    /// once, and the kernel clones them to each port ([`vemu_fastpath::Route::FanOut`]):
    /// a flood costs one write, not one per port. The rest of what the engine writes for
    /// a LAN port goes through the port's own TAP device to the same place, the port's
    /// egress, so that each port's frames keep their order.
    fn fan_target(&self, tx: &Transmit) -> Option<u32> {
        self.fanout.as_ref()?;
        let Some(PortDev::Plane(p)) = self.devs.get(tx.port as usize) else { return None };
        let plain = tx.frame.get(1) == Some(&0) && tx.frame.len() <= FANOUT_FRAME_MAX;
        (p.far == Far::Bridge && p.devs.tap.is_some() && plain).then_some(p.devs.veth)
    }

    /// Put the copies gathered for the fan-out device in the batch: one write naming
    /// their ports, or a plain write to the one port's TAP device.
    fn flush_fan(&mut self) {
        match self.fan.len() {
            0 => {}
            1 => {
                let (tx, _) = self.fan.pop().expect("one");
                let fd = self.fd(tx.port as usize);
                self.batch.push((fd, Out::One(tx)));
            }
            n => {
                let (txs, ports): (Vec<Transmit>, Vec<u32>) = self.fan.drain(..).unzip();
                let mut bytes = Vec::with_capacity(txs[0].frame.len() + 4 * n + 4);
                bytes.extend_from_slice(&txs[0].frame);
                vemu_fastpath::fanout_trailer(&ports, &mut bytes);
                let fd = self.fanout.as_ref().map_or(-1, |f| f.as_raw_fd());
                self.batch.push((fd, Out::Fan { bytes, txs }));
            }
        }
    }

    /// Carry out what the core asks: carriers and capture copies. A capture whose
    /// reader is gone ends; a full one skips frames (the data plane never waits).
    fn events(&mut self) {
        // Captures watching the same port get the same frame: split it into wire frames once.
        let mut split: Option<(Frame, Vec<Vec<u8>>)> = None;
        while let Some(ev) = self.core.poll_event() {
            match ev {
                Event::Carrier { port, up } => match (self.devs.get(port as usize), &self.fast) {
                    // The node's interface is the veth peer of a plane device.
                    (Some(PortDev::Plane(p)), Some(fast)) => {
                        // A link to another machine that is down here takes nothing that
                        // machine's kernel still sends (a machine found lost may go on).
                        let r = match p.far {
                            Far::Tunnel { remote, vni, .. } => fast.tunnel_in_set(
                                tunnel::vni_reverse(vni),
                                remote,
                                p.devs.veth,
                                up,
                            ),
                            _ => Ok(()),
                        };
                        if let Err(e) = r.and_then(|()| fast.set_device_up(p.devs.veth, up)) {
                            eprintln!("engine: {e:#}");
                        }
                    }
                    // The other machine sets the carrier of its side.
                    (Some(PortDev::Tunnel(_)), _) => {}
                    _ => set_carrier(self.fd(port as usize), up),
                },
                Event::TunnelRoute { port, kernel } => self.tunnel_route(port, kernel),
                Event::Path { port, path } => {
                    if let (Some(PortDev::Plane(p)), Some(fast)) =
                        (self.devs.get(port as usize), &self.fast)
                    {
                        let route = match (path, p.devs.tap, p.far) {
                            (Path::Kernel, _, Far::Veth(peer_of)) => {
                                Ok(Some(Route::Kernel { peer_of, mtu: self.core.iface_mtu(port) }))
                            }
                            (Path::Kernel, _, Far::Bridge) => Ok(Some(Route::Bridge)),
                            (_, _, Far::Tunnel { .. } | Far::Nowhere) => Ok(None),
                            // The bucket first, then the frames: a link's on the far
                            // end's plane device, a LAN port's on its IFB device.
                            (Path::Shaped(shape), _, Far::Veth(via)) => {
                                fast.shape(via, bucket(shape)).map(|()| Some(Route::Shaped { via }))
                            }
                            (Path::Shaped(shape), _, Far::Bridge) => {
                                fast.ifb(p.devs.veth).and_then(|ifb| {
                                    fast.shape(ifb, bucket(shape))
                                        .map(|()| Some(Route::BridgeShaped { ifb }))
                                })
                            }
                            (Path::Engine, Some(tap), _) => Ok(Some(Route::Engine { tap })),
                            // (The engine makes a link's or LAN's TAP devices before
                            // anything that takes it off the kernel path reaches the core.)
                            _ => Ok(None),
                        };
                        if let Err(e) =
                            route.and_then(|r| r.map_or(Ok(()), |r| fast.route(p.devs.veth, r)))
                        {
                            eprintln!("engine: {e:#}");
                        }
                    }
                }
                // What a LAN's bridge sends to a port: through a bucket at the port's
                // root, or straight.
                Event::Ingress { port, shape } => {
                    if let (Some(PortDev::Plane(p)), Some(fast)) =
                        (self.devs.get(port as usize), &self.fast)
                    {
                        if let Err(e) = fast.shape_out(p.devs.veth, shape.map(bucket)) {
                            eprintln!("engine: {e:#}");
                        }
                    }
                }
                Event::Capture { capture, iface, t_ns, outgoing, frame } => {
                    let Some(tx) = self.sinks.get(&capture) else { continue };
                    if !split.as_ref().is_some_and(|(f, _)| Arc::ptr_eq(f, &frame)) {
                        split = Some((frame.clone(), gso::wire_frames(&frame)));
                    }
                    let wire = &split.as_ref().expect("just set").1;
                    for f in wire.iter().cloned() {
                        if let Err(TrySendError::Disconnected(_)) =
                            tx.try_send(Captured { t_ns, iface, outgoing, frame: f })
                        {
                            self.sinks.remove(&capture);
                            self.core.apply(Command::Uncapture(capture));
                            break;
                        }
                    }
                }
            }
        }
    }

    /// Apply control messages; false when asked to stop.
    fn control(&mut self) -> bool {
        loop {
            match self.rx.try_recv() {
                Ok(Control::Apply(cmd, done)) => {
                    if let Command::Uncapture(id) = cmd {
                        self.sinks.remove(&id);
                    }
                    let r = self.core.apply(cmd);
                    if let Some(done) = done {
                        let _ = done.send(r);
                    }
                }
                Ok(Control::CaptureSink { id, tx }) => {
                    self.sinks.insert(id, tx);
                }
                Ok(Control::Radio { seg, done }) => {
                    let _ = done.send(self.core.radio(seg).unwrap_or_default());
                }
                Ok(Control::Taps(taps)) => {
                    for (port, tap, fd) in taps {
                        let port = port as usize;
                        if let Err(e) =
                            epoll_add(self.epoll.as_raw_fd(), fd.as_raw_fd(), port as u64)
                        {
                            eprintln!("engine: {e:#}");
                        }
                        if let Some(PortDev::Plane(p)) = self.devs.get_mut(port) {
                            p.devs.tap = Some(tap);
                        }
                        self.fds[port] = Some(fd);
                    }
                }
                Ok(Control::Backlog(done)) => {
                    let _ = done.send(self.core.backlog_ns(self.clock.now_ns()));
                }
                Ok(Control::Stop) | Err(TryRecvError::Disconnected) => return false,
                Err(TryRecvError::Empty) => break,
            }
        }
        self.events();
        true
    }

    /// Stop polling a device that went away (its namespace was removed).
    fn forget(&mut self, port: usize) {
        let fd = self.fd(port);
        // SAFETY: removing a descriptor from our epoll set.
        unsafe {
            libc::epoll_ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut())
        };
    }

    /// Send a probe round's probes, if one is due (see [`Core::handle_probe_timeout`]).
    fn probe_tunnels(&mut self, now: u64) {
        let mut probes = std::mem::take(&mut self.probes);
        self.core.handle_probe_timeout(now, &mut probes);
        let fd = self.tunnel_fd();
        for &(port, size) in &probes {
            if let Some(PortDev::Tunnel(t)) = self.devs.get(port as usize) {
                send_datagram(fd, t.far.as_ref(), &tunnel::probe(t.vni_out, now, false, size));
            }
        }
        probes.clear();
        self.probes = probes;
        self.events();
    }

    /// Route link end `port` through its kernel tunnel ([`Far::Tunnel`]) or back through
    /// the engine, as the core asks ([`Event::TunnelRoute`]), and tell it when done.
    fn tunnel_route(&mut self, port: u32, kernel: bool) {
        let (Some(fast), Some(PortDev::Plane(p))) = (&self.fast, self.devs.get(port as usize))
        else {
            return;
        };
        let Far::Tunnel { vxlan, remote, vni, .. } = p.far else { return };
        let route = match (kernel, p.devs.tap) {
            (true, _) => Route::Tunnel { vxlan, remote, vni, mtu: self.core.iface_mtu(port) },
            (false, Some(tap)) => Route::Engine { tap },
            (false, None) => return,
        };
        match fast.route(p.devs.veth, route) {
            Ok(()) => self.core.set_kernel_carried(port, kernel),
            Err(e) => eprintln!("engine: {e:#}"),
        }
    }

    /// Send this round's input probes (see [`INPUT_PROBE_EVERY_NS`]).
    fn probe_inputs(&mut self, now: u64) {
        self.next_input_probe_ns = Some(now + INPUT_PROBE_EVERY_NS);
        let Some(sock) = self.probe_sock.clone() else { return };
        let n = self.devs.len();
        let mut sent = 0;
        for k in 0..n {
            let port = (self.input_probe_cursor + k) % n;
            let Some(PortDev::Plane(p)) = self.devs.get(port) else { continue };
            let (Some(tap), Some(Some(last))) = (p.devs.tap, self.last_read_ns.get(port)) else {
                continue;
            };
            if now.saturating_sub(*last) > INPUT_PROBE_ACTIVE_NS {
                continue;
            }
            // SAFETY: sockaddr_ll is plain data.
            let mut to: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            to.sll_family = libc::AF_PACKET as u16;
            to.sll_ifindex = tap as i32;
            to.sll_halen = 6;
            let f = input_probe_frame(self.clock.now_ns());
            // SAFETY: sendto(2) of a frame we hold, to an address we built.
            unsafe {
                libc::sendto(
                    sock.as_raw_fd(),
                    f.as_ptr().cast(),
                    f.len(),
                    libc::MSG_DONTWAIT,
                    (&to as *const libc::sockaddr_ll).cast(),
                    std::mem::size_of::<libc::sockaddr_ll>() as u32,
                )
            };
            sent += 1;
            if sent == INPUT_PROBES_PER_ROUND {
                self.input_probe_cursor = (port + 1) % n;
                return;
            }
        }
    }

    /// Take the datagrams the shard's tunnel socket holds, each to the tunnel port of
    /// its VNI if it comes from that port's far end (anything else is dropped): frames
    /// made whole go to the link's local port; probes are answered, and answers measure
    /// the underlay.
    ///
    /// Each datagram's time of arrival is the kernel's (`SO_TIMESTAMPNS`, set on tunnel
    /// sockets), not when this thread got round to it: a frame is handed to the core as
    /// of then (so the engine's own wake-up shows as lateness, not as underlay delay), a
    /// probe's answer carries the probe's send time moved on by how long the probe sat
    /// here, and the round trip of an answer ends when it arrived. The round trip is then
    /// the underlay's alone, and half of it the lead frames leave with.
    fn read_tunnels(&mut self) {
        let fd = self.tunnel_fd();
        let mut got = self.received.take().unwrap_or_else(Received::new);
        for _ in 0..READ_BATCH * 4 / RECV_BATCH {
            let Some(n) = recv_batch(fd, &mut got) else { break };
            for i in 0..n {
                let d = &got.bufs[i][..got.len[i]];
                let Some(&port) = tunnel::vni_of(d).and_then(|v| self.tunnel_ports.get(&v)) else {
                    continue;
                };
                let from_far = matches!(self.devs.get(port), Some(PortDev::Tunnel(t)) if t.far.is_some() && t.far == got.from(i));
                if from_far {
                    self.tunnel_datagram(port, fd, d, got.held_ns[i]);
                }
            }
        }
        self.received = Some(got);
    }

    /// One datagram tunnel port `port` received on the shard's socket `fd`, after it
    /// waited `held_ns` there (see [`Shard::read_tunnels`]).
    fn tunnel_datagram(&mut self, port: usize, fd: RawFd, d: &[u8], held_ns: u64) {
        let Some(PortDev::Tunnel(t)) = self.devs.get_mut(port) else { return };
        let arrived = self.clock.now_ns().saturating_sub(held_ns);
        if let Some(p) = tunnel::parse_probe(d) {
            if !p.answer && p.vni == t.vni_in {
                send_datagram(
                    fd,
                    t.far.as_ref(),
                    &tunnel::probe(t.vni_in, p.t_ns.saturating_add(held_ns), true, p.size),
                );
            } else if p.answer && p.vni == t.vni_out {
                self.core.handle_probe_answer(port as u32, p.size, arrived.saturating_sub(p.t_ns));
            }
            return;
        }
        let Ok(piece) = tunnel::decode(d) else { return };
        if piece.meta.vni != t.vni_in {
            return;
        }
        if let Some(whole) = t.reasm.push(&piece) {
            self.core.handle_delivered(arrived, t.deliver_to, whole.frame);
        }
        let c = t.reasm.counts(t.vni_in);
        self.core.set_underlay_lost(port as u32, c.lost + c.late + c.out_of_window);
    }

    fn read_from(&mut self, port: usize) {
        let fd = self.fd(port);
        if self.stall_reads_ns > 0 {
            std::thread::sleep(std::time::Duration::from_nanos(self.stall_reads_ns));
        }
        for _ in 0..READ_BATCH {
            self.buf.clear();
            // SAFETY: buf has room for MAX_FRAME bytes.
            let n = unsafe { libc::read(fd, self.buf.as_mut_ptr().cast(), self.buf.capacity()) };
            if n <= 0 {
                if n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::WouldBlock
                {
                    self.forget(port);
                }
                return;
            }
            let now = self.clock.now_ns();
            // A big frame (a TCP super-frame) goes to the core in the buffer it was read
            // into, and the next read gets a new one (the allocator hands back the memory
            // of frames already written): copying 64 KiB again in user space was 6% of a
            // busy shard's time (bench/run.sh profile). A small one is copied out.
            // SAFETY: the kernel wrote n bytes, at most the capacity.
            unsafe { self.buf.set_len(n as usize) };
            if let Some(t) = self.last_read_ns.get_mut(port) {
                if let Some(sent) = self.buf.get(VNET_HDR_LEN..).and_then(input_probe_time) {
                    self.core.note_input_wait(port as u32, now.saturating_sub(sent));
                    continue;
                }
                *t = Some(now);
            }
            let at = self.arrival(port, now);
            let frame = if self.buf.len() >= COPY_BELOW {
                std::mem::replace(&mut self.buf, Vec::with_capacity(MAX_FRAME))
            } else {
                self.buf.clone()
            };
            self.core.handle_frame(at, port as u32, frame);
            if let Some(left) = self.panic_after.as_mut() {
                *left = left.saturating_sub(1);
                if *left == 0 {
                    panic!("injected fault ({FAULT_ENV})");
                }
            }
        }
    }

    /// When the frame just read from `port` (in `buf`) reached the engine, read at `now`.
    /// The plane's program appends to every frame it passes to one of the engine's TAP
    /// devices, but GSO super-frames, the time it arrived (`vemu_fastpath::STAMP_LEN`
    /// bytes, CLOCK_MONOTONIC): taken off here, it times the frame, so that the time the
    /// frame waited for the shard to wake and read it is part of its delay, not added to
    /// it. Time never goes back for the core: not before the last time it carried out
    /// what was due (frames reaching a LAN's switch, say, were decided then), nor before
    /// this port's previous frame.
    fn arrival(&mut self, port: usize, now: u64) -> u64 {
        // (Not a super-frame of any kind: what the program sees as gso_size 0.)
        let stamped = self.buf.len() >= VNET_HDR_LEN + vemu_fastpath::STAMP_LEN
            && matches!(self.devs.get(port), Some(PortDev::Plane(_)))
            && gso::VnetHdr::parse(&self.buf).gso_type == 0;
        if !stamped {
            return now;
        }
        let at = self.buf.len() - vemu_fastpath::STAMP_LEN;
        let mono = u64::from_ne_bytes(self.buf[at..].try_into().expect("8 bytes"));
        self.buf.truncate(at);
        let Some(last) = self.last_arrival_ns.get_mut(port) else { return now };
        let t =
            mono.saturating_sub(self.clock.epoch_ns).clamp(self.timers_ns.max(*last).min(now), now);
        *last = t;
        t
    }
}

/// The kernel's token bucket for a shaped direction.
fn bucket(s: Shape) -> Bucket {
    let bytes = |b: u64| b.min(u64::from(u32::MAX)) as u32;
    Bucket {
        rate_bps: s.rate_bps,
        burst_bytes: bytes(s.burst_bytes),
        limit_bytes: bytes(s.limit_bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// Two UDP sockets on loopback joined to each other, the receiver timestamping.
    fn pair() -> (std::net::UdpSocket, std::net::UdpSocket) {
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        b.connect(a.local_addr().unwrap()).unwrap();
        for (opt, v) in [(libc::SO_TIMESTAMPNS, 1 as libc::c_int), (libc::SO_RCVBUFFORCE, 4 << 20)]
        {
            // SAFETY: an int option on a socket we own.
            assert_eq!(
                unsafe {
                    libc::setsockopt(
                        b.as_raw_fd(),
                        libc::SOL_SOCKET,
                        opt,
                        (&v as *const libc::c_int).cast(),
                        4,
                    )
                },
                0
            );
        }
        (a, b)
    }

    /// Everything `b` holds, datagram by datagram, in `recv_batch` calls (how many).
    fn drain(b: &std::net::UdpSocket) -> (Vec<Vec<u8>>, usize) {
        let (mut got, mut r, mut calls) = (Vec::new(), Received::new(), 0);
        while let Some(n) = recv_batch(b.as_raw_fd(), &mut r) {
            calls += 1;
            got.extend((0..n).map(|i| r.bufs[i][..r.len[i]].to_vec()));
        }
        (got, calls)
    }

    /// The pieces of a super-frame leave in a few segmented sends and arrive as the
    /// datagrams they are, in order, in batches; so do they one by one without
    /// segmentation offload, and a frame that is one datagram.
    #[test]
    fn a_frames_pieces_cross_in_few_system_calls_each_as_its_own_datagram() {
        let (a, b) = pair();
        let mut frame = vec![0u8; VNET_HDR_LEN];
        frame.extend((0..64_000u32).map(|i| (i * 7 % 251) as u8));
        for (gso, len) in [(true, frame.len()), (false, frame.len()), (true, VNET_HDR_LEN + 100)] {
            let mut ds = Vec::new();
            let n = tunnel::encode(
                &frame[..len],
                tunnel::Meta { vni: 7, seq: 1, departure_ns: 5 },
                1472,
                &mut ds,
            );
            assert_eq!(n, ds.len());
            let (mut buf, mut on) = (Vec::new(), gso);
            assert_eq!(send_datagrams(a.as_raw_fd(), None, &ds, &mut buf, &mut on), Ok(()));
            assert_eq!(on, gso, "the kernel took segmented sends");
            let (got, calls) = drain(&b);
            assert_eq!(got, ds, "{n} datagrams, gso {gso}");
            assert!(calls <= n.div_ceil(RECV_BATCH) + 1, "{calls} receive calls for {n} datagrams");
            // Made whole again.
            let mut r = tunnel::Reassembler::new();
            let whole = got
                .iter()
                .filter_map(|d| r.push(&tunnel::decode(d).unwrap()))
                .next()
                .expect("the frame, whole");
            assert_eq!(whole.frame, frame[..len]);
        }
        // Datagrams as large as the kernel allows: 64 KiB frames in pieces of 9000 bytes.
        let mut ds = Vec::new();
        tunnel::encode(&frame, tunnel::Meta { vni: 9, seq: 2, departure_ns: 6 }, 8972, &mut ds);
        let (mut buf, mut on) = (Vec::new(), true);
        assert_eq!(send_datagrams(a.as_raw_fd(), None, &ds, &mut buf, &mut on), Ok(()));
        assert_eq!(drain(&b).0, ds);
    }

    /// Unconnected, as a shard's tunnel socket is: datagrams go to the address given,
    /// and each one received says where it came from.
    #[test]
    fn datagrams_go_where_told_and_say_where_they_came_from() {
        for any in ["127.0.0.1:0", "[::1]:0"] {
            let (a, b, c) = (
                std::net::UdpSocket::bind(any).unwrap(),
                std::net::UdpSocket::bind(any).unwrap(),
                std::net::UdpSocket::bind(any).unwrap(),
            );
            let to_b = SockAddr::from(b.local_addr().unwrap());
            assert!(
                to_b == SockAddr::from(b.local_addr().unwrap())
                    && to_b != SockAddr::from(c.local_addr().unwrap())
            );
            let mut ds = Vec::new();
            tunnel::encode(
                &[0u8; VNET_HDR_LEN + 3000],
                tunnel::Meta { vni: 3, seq: 0, departure_ns: 0 },
                1472,
                &mut ds,
            );
            let (mut buf, mut on) = (Vec::new(), true);
            assert_eq!(send_datagrams(a.as_raw_fd(), Some(&to_b), &ds, &mut buf, &mut on), Ok(()));
            assert!(send_datagram(c.as_raw_fd(), Some(&to_b), b"from c"));
            let mut r = Received::new();
            let mut got = Vec::new();
            while let Some(n) = recv_batch(b.as_raw_fd(), &mut r) {
                got.extend((0..n).map(|i| (r.bufs[i][..r.len[i]].to_vec(), r.from(i))));
            }
            let want: Vec<_> = ds
                .iter()
                .map(|d| (d.clone(), Some(SockAddr::from(a.local_addr().unwrap()))))
                .chain([(b"from c".to_vec(), Some(SockAddr::from(c.local_addr().unwrap())))])
                .collect();
            assert_eq!(got, want, "{any}");
            assert_eq!(tunnel::vni_of(&got[0].0), Some(3));
        }
    }

    /// A datagram waiting in the socket: its wait, from the kernel's timestamp.
    #[test]
    fn a_received_datagram_tells_how_long_it_waited() {
        let (a, b) = pair();
        // (The kernel turns its receive timestamps on a moment after the first socket asks.)
        std::thread::sleep(std::time::Duration::from_millis(100));
        a.send(b"hello").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let mut r = Received::new();
        assert_eq!(recv_batch(b.as_raw_fd(), &mut r), Some(1));
        assert_eq!(&r.bufs[0][..r.len[0]], b"hello");
        assert!((25_000_000..1_000_000_000).contains(&r.held_ns[0]), "waited {} ns", r.held_ns[0]);
        assert_eq!(recv_batch(b.as_raw_fd(), &mut r), None);
    }
}
