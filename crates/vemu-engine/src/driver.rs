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
use crate::core::input::{self, arrival_time, input_probe_time, INPUT_PROBE_EVERY_NS};
use crate::core::{Applied, Command, Core, Event, Frame, Path, RadioSnapshot, Shape, Transmit};
use crate::gso;
use crate::gso::VNET_HDR_LEN;
use crate::schedule::{self, Priority, Schedule, Writers};
use crate::tunnel;
use nix::sys::socket::SockaddrLike;
use vemu_fastpath::{Bucket, FastPath, Route};
use vemu_sys::cpus::{self, CpuSet};

mod sched;
mod spawn;
mod udp;

pub(crate) use sched::raise_session_group;
use sched::{machine_pressure_ns, move_to, set_priority};
pub use sched::{FOLLOW_ENV, NORMAL_NICE, PRIORITY_ENV};
pub(crate) use spawn::ShardHandle;
use udp::*;
pub(crate) use udp::{Seal, TunnelPort};

/// Largest frame TAP hands over: a 64 KiB super-frame plus headers.
const MAX_FRAME: usize = 65536 + 256;
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
    /// Dropped on its way (a capture of drops), and why.
    pub drop: Option<crate::core::DropReason>,
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
        bss_after: u64,
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

/// Environment variable for fault-injection tests: `VEMU_ENGINE_FAULT=panic-after:N`
/// makes the first shard panic after it has read N frames; `stall-reads-us:N` makes
/// every shard wait N µs before each look at a device (an engine too slow to read: frames
/// wait in the input queues, and are written on time after it).
pub const FAULT_ENV: &str = "VEMU_ENGINE_FAULT";

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
/// waits for the kernel's RCU barriers, waits that overlap when the closes run side by
/// side (bench/README.md, "The driver").
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
    /// The shard's tunnel socket, and its tunnel ports by the VNIs they take; its keys
    /// (none in a lab of one machine).
    tunnel: Option<OwnedFd>,
    seal: Option<Seal>,
    tunnel_ports: FxHashMap<u32, usize>,
    /// Where each capture's copies go.
    sinks: FxHashMap<u64, SyncSender<Captured>>,
    /// Its priority and how long it spins before deadlines.
    schedule: Schedule,
    /// Where the frames it reads come from, and what follows for its sleeping.
    writers: Writers,
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
            seal: None,
            tunnel_ports: FxHashMap::default(),
            sinks: FxHashMap::default(),
            schedule: Schedule::new(Priority::Normal, 0),
            writers: Writers::default(),
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
        // The CPUs the shard may run on: it may move to one of them (see `Writers`).
        let allowed = CpuSet::allowed();
        let follow = std::env::var(FOLLOW_ENV).as_deref() != Ok("off");
        loop {
            let now = self.clock.now_ns();
            if self.core.poll_timeout().is_some_and(|t| t <= now) {
                self.core.handle_timeout(now);
                self.timers_ns = now;
                self.transmit();
                let done = self.clock.now_ns();
                work_ns += done.saturating_sub(now);
                linger_until = done + self.linger_ns(done);
            }
            if self.core.probe_timeout().is_some_and(|t| t <= now) {
                self.probe_tunnels(now);
            }
            if self.next_input_probe_ns.is_some_and(|t| t <= now) {
                self.probe_inputs(now);
            }
            if let Some(p) = self.schedule.review(now, work_ns, machine_pressure_ns) {
                if set_priority(p) != p {
                    self.schedule = Schedule::new(Priority::Normal, now);
                } else if p == Priority::Normal && !std::mem::replace(&mut told_busy, true) {
                    eprintln!("engine: a shard was busy over {:.0}% of {} ms, or over {:.0}% while the machine's tasks waited for a CPU over {:.0}% of it: it leaves real-time priority until under {:.0}% and the waiting under {:.0}% (its frames may then wait behind the nodes' programs)", schedule::HIGH_LOAD * 100.0, schedule::WINDOW_NS / 1_000_000, schedule::PRESSED_LOAD * 100.0, schedule::HIGH_PRESSURE * 100.0, schedule::LOW_LOAD * 100.0, schedule::LOW_PRESSURE * 100.0);
                }
            }
            // How long until the core's next deadline, and so until the shard wakes
            // for it: that much earlier than the wake-ups of a sleep as long came late.
            let core_until = self.core.poll_timeout().map(|at| at.saturating_sub(now));
            let through = self.writers.spin_through_ns(now);
            let core_due = core_until.map(|until| match until <= through {
                true => 0,
                false => until.saturating_sub(self.schedule.spin_ns(until)),
            });
            let probe_due = self
                .core
                .probe_timeout()
                .into_iter()
                .chain(self.next_input_probe_ns)
                .min()
                .map(|at| at.saturating_sub(now));
            let lingering = now < linger_until;
            // Polling for a deadline, not after work (see `Schedule::spun`).
            let spinning = !lingering && core_due == Some(0) && core_until.is_some_and(|u| u > 0);
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
            // When the shard goes to sleep (none: it polls).
            let asleep_at = (timeout != Some(0)).then(|| {
                if let Some(cpu) = self.writers.sleeping(timeout) {
                    move_to(cpu, allowed.as_ref());
                }
                self.clock.now_ns()
            });
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
            let here = (follow && self.schedule.priority() == Priority::Realtime)
                .then(cpus::current)
                .flatten();
            self.writers.woke(woke, here, asleep_at.map_or(0, |t| woke.saturating_sub(t)));
            if let (0, Some(at)) = (n, wake_at) {
                // A timed wake-up: learn how late they come.
                self.schedule.woke(asked_until, woke.saturating_sub(at));
            }
            if n == 0 && lingering {
                self.schedule.lingered(woke.saturating_sub(now));
            }
            if n == 0 && spinning {
                self.schedule.spun(woke.saturating_sub(now));
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
                linger_until = done + self.linger_ns(done);
            }
            self.work_ns.store(work_ns, Relaxed);
        }
    }

    /// How long to poll after work done at `now`: the schedule's lingering, unless the
    /// frames came from a sender on this CPU, waiting for the shard to sleep
    /// ([`Writers`]).
    fn linger_ns(&self, now: u64) -> u64 {
        match self.writers.linger_worth(now) {
            true => self.schedule.linger_ns(),
            false => 0,
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
            // (The clock is read once a batch: what falls due while it is gathered and
            // written goes in the next one, microseconds later.)
            let t = self.clock.now_ns();
            self.timers_ns = t;
            while self.batch.len() + 1 < batch::BATCH && polled < WRITE_BATCH {
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
                        let sent =
                            t.send(tunnel_fd, &tx.frame, tx.at_ns, payload, self.seal.as_mut());
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
        input::fans_out(p.far == Far::Bridge, p.devs.tap.is_some(), &tx.frame)
            .then_some(p.devs.veth)
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
                Event::TunnelRoute { port, kernel, split } => {
                    self.tunnel_route(port, kernel, split)
                }
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
                Event::Capture { capture, iface, t_ns, outgoing, frame, drop } => {
                    let Some(tx) = self.sinks.get(&capture) else { continue };
                    if !split.as_ref().is_some_and(|(f, _)| Arc::ptr_eq(f, &frame)) {
                        split = Some((frame.clone(), gso::wire_frames(&frame)));
                    }
                    let wire = &split.as_ref().expect("just set").1;
                    for f in wire.iter().cloned() {
                        if let Err(TrySendError::Disconnected(_)) =
                            tx.try_send(Captured { t_ns, iface, outgoing, frame: f, drop })
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
                Ok(Control::Radio { seg, bss_after, done }) => {
                    let _ = done.send(self.core.radio(seg, bss_after).unwrap_or_default());
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
                // (Sealed, it is `size` bytes on the wire.)
                let mut d = tunnel::probe(t.vni_out, now, false, unsealed_size(&self.seal, size));
                if let Some(s) = self.seal.as_mut() {
                    s.seal(&mut d);
                }
                // (Larger than the interface sends whole: a probe of the pieces the
                // kernel's tunnel would send, so without DF, as they go.)
                if size > t.max_payload {
                    send_fragmented(fd, t.far.as_ref(), &d);
                } else {
                    send_datagram(fd, t.far.as_ref(), &d);
                }
            }
        }
        probes.clear();
        self.probes = probes;
        self.events();
    }

    /// Route link end `port` through its kernel tunnel ([`Far::Tunnel`]; `split`: one
    /// that lends the direction to the engine's TAP device for bulk TCP) or back through
    /// the engine, as the core asks ([`Event::TunnelRoute`]), and tell it when done.
    fn tunnel_route(&mut self, port: u32, kernel: bool, split: bool) {
        let (Some(fast), Some(PortDev::Plane(p))) = (&self.fast, self.devs.get(port as usize))
        else {
            return;
        };
        let Far::Tunnel { vxlan, remote, vni, .. } = p.far else { return };
        let mtu = self.core.iface_mtu(port);
        let route = match (kernel, p.devs.tap) {
            (true, tap) => {
                Route::Tunnel { vxlan, remote, vni, mtu, lend_to: tap.filter(|_| split) }
            }
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
        let taps: Vec<Option<u32>> = (0..self.devs.len())
            .map(|port| match self.devs.get(port) {
                Some(PortDev::Plane(p)) => p.devs.tap,
                _ => None,
            })
            .collect();
        let last: Vec<Option<u64>> = (0..taps.len())
            .map(|port| taps[port].and(self.last_read_ns.get(port).copied().flatten()))
            .collect();
        let (ports, next) = input::input_probe_round(&last, self.input_probe_cursor, now);
        self.input_probe_cursor = next;
        for port in ports {
            let Some(tap) = taps[port] else { continue };
            // SAFETY: sockaddr_ll is plain data.
            let mut to: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            to.sll_family = libc::AF_PACKET as u16;
            to.sll_ifindex = tap as i32;
            to.sll_halen = 6;
            let f = input::input_probe_frame(self.clock.now_ns());
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
                if !from_far {
                    continue;
                }
                // Forged, damaged or replayed: dropped before anything reads it.
                let d = match self.seal.as_mut().map(|s| s.open(d)) {
                    None => d,
                    Some(Ok(body)) => body,
                    Some(Err(_)) => {
                        if let Some(PortDev::Tunnel(t)) = self.devs.get_mut(port) {
                            t.forged += 1;
                            self.core.set_underlay_forged(port as u32, t.forged);
                        }
                        continue;
                    }
                };
                self.writers.read_from(None);
                self.tunnel_datagram(port, fd, d, got.held_ns[i]);
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
                let mut a = tunnel::probe(t.vni_in, p.t_ns.saturating_add(held_ns), true, p.size);
                if let Some(s) = self.seal.as_mut() {
                    s.seal(&mut a);
                }
                send_datagram(fd, t.far.as_ref(), &a);
            } else if p.answer && p.vni == t.vni_out {
                // (The size on the wire: with its seal.)
                let size = p.size + self.seal.as_ref().map_or(0, |_| tunnel::AUTH_LEN);
                self.core.handle_probe_answer(port as u32, size, arrived.saturating_sub(p.t_ns));
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
            // of frames already written): copying 64 KiB again in user space costs a busy
            // shard (bench/README.md, "The driver"). A small one is copied out.
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
    /// devices, but GSO super-frames, the time and CPU it arrived on
    /// ([`vemu_fastpath::Stamp`]): taken off here, it times the frame, so that the time
    /// the frame waited for the shard to wake and read it is part of its delay, not added
    /// to it, and tells [`Shard::writers`] where its sender ran. Time never goes back for
    /// the core: not before the last time it carried out what was due (frames reaching a
    /// LAN's switch, say, were decided then), nor before this port's previous frame.
    fn arrival(&mut self, port: usize, now: u64) -> u64 {
        // (Not a super-frame of any kind: what the program sees as gso_size 0.)
        let stamp = (self.buf.len() >= VNET_HDR_LEN + vemu_fastpath::STAMP_LEN
            && matches!(self.devs.get(port), Some(PortDev::Plane(_)))
            && gso::VnetHdr::parse(&self.buf).gso_type == 0)
            .then(|| vemu_fastpath::Stamp::at_end(&self.buf))
            .flatten();
        self.writers.read_from(stamp.map(|s| s.cpu));
        if stamp.is_some() {
            self.buf.truncate(self.buf.len() - vemu_fastpath::STAMP_LEN);
        }
        let Some(last) = self.last_arrival_ns.get_mut(port) else { return now };
        let stamped = stamp.map(|s| s.ns.saturating_sub(self.clock.epoch_ns));
        arrival_time(stamped, last, self.timers_ns, now)
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
