//! vemu's data plane. Each shard is one thread with one epoll set and one timer heap;
//! it owns a share of the links, reads frames from their TAP devices, asks each link
//! direction's [`vemu_link::LinkDir`] what to do with them, and writes them to the far
//! TAP at the decided time on the lab clock. An idle link costs nothing: no thread, no
//! timer.

pub mod gso;

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use vemu_link::{DropCause, Impairments, ImpairmentsPatch, LinkDir, Offer};

use gso::{VnetHdr, VNET_HDR_LEN};

/// Largest frame TAP hands over: a 64 KiB super-frame plus headers.
const MAX_FRAME: usize = 65536 + 256;
/// A rate-limited super-frame is split so that no piece occupies the wire longer than
/// this: bursts stay short enough that timing at the far end is as on a real wire.
const MAX_BURST_NS: u64 = 100_000;
/// Frames read from one device before looking at the others and the timers.
const READ_BATCH: usize = 32;
/// The shard sleeps until this long before the next delivery time and polls its devices
/// without sleeping for the rest: waking from a sleep takes tens of microseconds on a
/// virtual machine, which would otherwise add to the delay of every hop. The cost is at
/// most this much CPU per timer, and nothing while no frame is in flight.
const SPIN_NS: u64 = 80_000;

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

/// Direction of a link: 0 = forward (a → b), 1 = reverse (b → a).
pub type Dir = usize;

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
        }
    }
}

enum Control {
    Patch { link: usize, dir: Dir, patch: ImpairmentsPatch, done: Sender<Impairments> },
    SetUp { link: usize, up: bool, done: Sender<()> },
    Stop,
}

struct ShardHandle {
    tx: Sender<Control>,
    wake: OwnedFd,
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
    place: Vec<(usize, usize)>,
    counters: Vec<[Arc<DirCounters>; 2]>,
    pub clock: LabClock,
}

impl Engine {
    /// Start emulating `links` on `shards` threads (at least one).
    pub fn start(links: Vec<LinkSpec>, shards: usize, clock: LabClock) -> Result<Engine> {
        let n = shards.clamp(1, links.len().max(1));
        let mut per_shard: Vec<Vec<LinkState>> = (0..n).map(|_| Vec::new()).collect();
        let mut place = Vec::new();
        let mut counters = Vec::new();
        for (i, l) in links.into_iter().enumerate() {
            let s = i % n;
            let c = [Arc::new(DirCounters::default()), Arc::new(DirCounters::default())];
            place.push((s, per_shard[s].len()));
            counters.push(c.clone());
            per_shard[s].push(LinkState {
                fds: [l.a, l.b],
                dirs: [LinkDir::new(l.forward, l.seeds[0]), LinkDir::new(l.reverse, l.seeds[1])],
                counters: c,
            });
        }
        let mut handles = Vec::new();
        for (s, links) in per_shard.into_iter().enumerate() {
            // SAFETY: eventfd returns a new descriptor or -1.
            let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
            if efd < 0 {
                return Err(std::io::Error::last_os_error()).context("creating an eventfd");
            }
            // SAFETY: efd is a fresh descriptor we own.
            let wake = unsafe { OwnedFd::from_raw_fd(efd) };
            let (tx, rx) = channel();
            let mut shard = Shard::new(links, rx, wake.as_raw_fd(), clock)?;
            let thread = std::thread::Builder::new().name(format!("vemu-engine-{s}")).spawn(move || shard.run())?;
            handles.push(ShardHandle { tx, wake, thread: Some(thread) });
        }
        Ok(Engine { shards: handles, place, counters, clock })
    }

    pub fn link_count(&self) -> usize {
        self.place.len()
    }

    /// Change some impairments of one direction; returns the impairments now in force.
    /// Frames already scheduled keep their delivery times.
    pub fn patch(&self, link: usize, dir: Dir, patch: ImpairmentsPatch) -> Impairments {
        let (s, i) = self.place[link];
        let (done, rx) = channel();
        self.shards[s].send(Control::Patch { link: i, dir, patch, done });
        rx.recv().expect("engine shard stopped")
    }

    /// Take a link down (both directions drop what is offered) or back up.
    pub fn set_up(&self, link: usize, up: bool) {
        let (s, i) = self.place[link];
        let (done, rx) = channel();
        self.shards[s].send(Control::SetUp { link: i, up, done });
        let _ = rx.recv();
    }

    pub fn stats(&self, link: usize) -> [DirStats; 2] {
        let c = &self.counters[link];
        [c[0].snapshot(), c[1].snapshot()]
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

struct LinkState {
    fds: [OwnedFd; 2],
    dirs: [LinkDir; 2],
    counters: [Arc<DirCounters>; 2],
}

/// A frame waiting for its delivery time.
struct Pending {
    at_ns: u64,
    seq: u64,
    link: u32,
    /// Device to write to: 0 = a, 1 = b.
    side: u8,
    dir: u8,
    /// Wire frames and bytes it stands for.
    wire: (u32, u64),
    frame: Vec<u8>,
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

struct Shard {
    links: Vec<LinkState>,
    rx: Receiver<Control>,
    wake_fd: RawFd,
    epoll: OwnedFd,
    heap: BinaryHeap<Pending>,
    seq: u64,
    clock: LabClock,
    buf: Vec<u8>,
}

impl Shard {
    fn new(links: Vec<LinkState>, rx: Receiver<Control>, wake_fd: RawFd, clock: LabClock) -> Result<Shard> {
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
        for (i, l) in links.iter().enumerate() {
            for side in 0..2 {
                add(l.fds[side].as_raw_fd(), (i as u64) << 1 | side as u64)?;
            }
        }
        Ok(Shard { links, rx, wake_fd, epoll, heap: BinaryHeap::new(), seq: 0, clock, buf: vec![0; MAX_FRAME] })
    }

    fn run(&mut self) {
        // Timers as precise as the kernel allows: no slack on our sleeps.
        // SAFETY: prctl with an integer argument.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
        loop {
            let now = self.clock.now_ns();
            self.deliver_due(now);
            let timeout = self.heap.peek().map(|p| p.at_ns.saturating_sub(now).saturating_sub(SPIN_NS));
            let ts = timeout.map(|ns| libc::timespec { tv_sec: (ns / 1_000_000_000) as i64, tv_nsec: (ns % 1_000_000_000) as i64 });
            let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
            // SAFETY: events has room for its length; tsp is null or valid.
            let n = unsafe {
                libc::epoll_pwait2(self.epoll.as_raw_fd(), events.as_mut_ptr(), events.len() as i32, tsp, std::ptr::null())
            };
            if n < 0 {
                continue; // EINTR
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
                let link = (ev.u64 >> 1) as usize;
                let side = (ev.u64 & 1) as usize;
                if ev.events & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0 {
                    self.forget(link, side);
                    continue;
                }
                self.read_from(link, side);
            }
        }
    }

    /// Apply control messages; false when asked to stop.
    fn control(&mut self) -> bool {
        while let Ok(c) = self.rx.try_recv() {
            match c {
                Control::Patch { link, dir, patch, done } => {
                    let d = &mut self.links[link].dirs[dir];
                    let mut imp = d.impairments().clone();
                    patch.apply_to(&mut imp);
                    d.set_impairments(imp.clone());
                    let _ = done.send(imp);
                }
                Control::SetUp { link, up, done } => {
                    for d in &mut self.links[link].dirs {
                        d.set_up(up);
                    }
                    let _ = done.send(());
                }
                Control::Stop => {
                    close_all(std::mem::take(&mut self.links).into_iter().flat_map(|l| l.fds).collect());
                    return false;
                }
            }
        }
        true
    }

    /// Stop polling a device that went away (its namespace was removed).
    fn forget(&mut self, link: usize, side: usize) {
        let fd = self.links[link].fds[side].as_raw_fd();
        // SAFETY: removing a descriptor from our epoll set.
        unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) };
    }

    fn read_from(&mut self, link: usize, side: usize) {
        let fd = self.links[link].fds[side].as_raw_fd();
        for _ in 0..READ_BATCH {
            // SAFETY: buf has MAX_FRAME bytes.
            let n = unsafe { libc::read(fd, self.buf.as_mut_ptr().cast(), self.buf.len()) };
            if n <= 0 {
                if n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::WouldBlock {
                    self.forget(link, side);
                }
                return;
            }
            let n = n as usize;
            if n <= VNET_HDR_LEN {
                continue;
            }
            let now = self.clock.now_ns();
            // Frames read at side a travel forward (dir 0) to side b, and vice versa.
            self.offer(link, side, now, n);
        }
    }

    fn offer(&mut self, link: usize, dir: Dir, now: u64, n: usize) {
        let pkt = &self.buf[..n];
        let hdr = VnetHdr::parse(pkt);
        let frame = &pkt[VNET_HDR_LEN..];
        let g = if hdr.gso_type != 0 { gso::tcp_gso(&hdr, frame) } else { None };
        let (frames, bytes) = gso::wire_size(g.as_ref(), frame.len());
        let l = &mut self.links[link];
        let c = &l.counters[dir];
        c.rx_frames.fetch_add(frames as u64, Relaxed);
        c.rx_bytes.fetch_add(bytes, Relaxed);
        let d = &mut l.dirs[dir];
        let imp = d.impairments();
        if let (None, Some(mtu)) = (&g, imp.mtu) {
            if frame.len() > mtu as usize + 14 + if frame.get(12..14) == Some(&[0x81, 0]) { 4 } else { 0 } {
                c.drop_mtu.fetch_add(1, Relaxed);
                return;
            }
        }
        let pieces: Vec<Vec<u8>> = match &g {
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
                    gso::split(pkt, g, per_piece)
                } else {
                    vec![pkt.to_vec()]
                }
            }
            _ => vec![pkt.to_vec()],
        };
        for piece in pieces {
            // The super-frame's headers and MSS hold for each of its pieces.
            let (pf, pb) = gso::wire_size(g.as_ref(), piece.len() - VNET_HDR_LEN);
            let out = d.offer(now, Offer { wire_frames: pf, wire_bytes: pb });
            let copies = [Some(out.first), out.duplicate];
            if out.duplicate.is_some() {
                c.duplicated.fetch_add(pf as u64, Relaxed);
            }
            let mut piece = Some(piece);
            for (k, copy) in copies.into_iter().flatten().enumerate() {
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
                        let last = k == 1 || out.duplicate.is_none();
                        let mut f = if last { piece.take().unwrap() } else { piece.clone().unwrap() };
                        if let Some(r) = dl.corrupt {
                            gso::finish_checksum(&mut f);
                            let bits = ((f.len() - VNET_HDR_LEN) * 8) as u32;
                            let bit = (r % bits) as usize;
                            f[VNET_HDR_LEN + bit / 8] ^= 1 << (bit % 8);
                            c.corrupted.fetch_add(1, Relaxed);
                        }
                        self.seq += 1;
                        self.heap.push(Pending {
                            at_ns: dl.at_ns,
                            seq: self.seq,
                            link: link as u32,
                            side: (1 - dir) as u8,
                            dir: dir as u8,
                            wire: (pf, pb),
                            frame: f,
                        });
                    }
                }
            }
        }
    }

    fn deliver_due(&mut self, now: u64) {
        while self.heap.peek().is_some_and(|p| p.at_ns <= now) {
            let p = self.heap.pop().unwrap();
            let l = &self.links[p.link as usize];
            let fd = l.fds[p.side as usize].as_raw_fd();
            let c = &l.counters[p.dir as usize];
            // SAFETY: writing a frame we own to a TAP descriptor.
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
