//! The machine's own traffic through emulated paths (`divert:`): packets the lab's
//! rules queue (see `vemu_host::divert`) arrive here from netfilter queues and are
//! offered to the path direction's [`LinkDir`]:
//!
//! - the machine's outgoing packets (forward) are copied whole and dropped from the
//!   queue at once, and the copy is sent at its delivery time through a raw IP socket
//!   whose packets carry [`REINJECT_MARK`] (the rules let those pass). Holding the
//!   original in the kernel instead would count against the sending socket's memory:
//!   TCP's small-queue limit (about 1 ms of its rate) would then throttle every flow
//!   to a few packets per delay;
//! - replies (reverse) stay in the kernel, and only their ids are held: at their
//!   delivery time they go on (verdict ACCEPT). The kernel timestamped them on arrival,
//!   before the hold, so programs that read that stamp (ping's RTT; `ping -U` does not)
//!   do not see the reverse delay; TCP and applications do.
//!
//! Packets the model drops are dropped (verdict DROP).
//!
//! The netfilter queue protocol (nfnetlink_queue) is spoken here directly over a
//! netlink socket: binding queues, reading packet messages, sending verdicts — a few
//! fixed-layout messages ([`parse_packets`] reads what the kernel sends, and is fuzzed).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{anyhow, bail, Context, Result};
use vemu_link::{DropCause, Impairments, LinkDir, Offer};

use crate::clock::LabClock;
use crate::counters::{delay_bucket, DirCounters, DirStats};

const NFNL_SUBSYS_QUEUE: u16 = 3;
const NFQNL_MSG_PACKET: u16 = 0;
const NFQNL_MSG_VERDICT: u16 = 1;
const NFQNL_MSG_CONFIG: u16 = 2;
const NFQA_PACKET_HDR: u16 = 1;
const NFQA_VERDICT_HDR: u16 = 2;
const NFQA_PAYLOAD: u16 = 10;
/// The packet's length when the copy was cut short.
const NFQA_CAP_LEN: u16 = 13;
const NFQA_CFG_CMD: u16 = 1;
const NFQA_CFG_PARAMS: u16 = 2;
const NFQA_CFG_QUEUE_MAXLEN: u16 = 3;
const NFQA_CFG_MASK: u16 = 4;
const NFQA_CFG_FLAGS: u16 = 5;
const NFQNL_CFG_CMD_BIND: u8 = 1;
const NFQNL_COPY_PACKET: u8 = 2;
const NFQA_CFG_F_FAIL_OPEN: u32 = 1;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLMSG_ERROR: u16 = 2;
const NF_DROP: u32 = 0;
const NF_ACCEPT: u32 = 1;
/// The mark (SO_MARK) of the copies sent back out: the queueing rules let them pass.
pub const REINJECT_MARK: u32 = 0x5645_4d55;
/// Packets a queue holds before the kernel lets more pass unqueued (fail-open).
const QUEUE_MAXLEN: u32 = 4096;

/// One path: its name and what each direction does (forward: the machine's outgoing
/// packets; reverse: the replies).
#[derive(Debug, Clone)]
pub struct DivertSpec {
    pub name: String,
    pub forward: Impairments,
    pub reverse: Impairments,
    pub seeds: [u64; 2],
}

/// A queued packet as the kernel announced it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedPacket {
    pub queue: u16,
    pub id: u32,
    /// Bytes of the IP packet.
    pub len: usize,
    /// Where the copy of the packet is in the buffer parsed, when it is whole.
    pub payload: Option<std::ops::Range<usize>>,
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// The packet messages in a buffer of netlink messages from the kernel (anything else,
/// and anything malformed, is skipped).
pub fn parse_packets(buf: &[u8], out: &mut Vec<QueuedPacket>) {
    let mut at = 0;
    while buf.len() >= at + 16 {
        let len = u32::from_ne_bytes(buf[at..at + 4].try_into().expect("4 bytes")) as usize;
        let kind = u16::from_ne_bytes([buf[at + 4], buf[at + 5]]);
        if len < 16 || at + len > buf.len() {
            return;
        }
        let msg = &buf[at..at + len];
        at += align4(len);
        if kind != (NFNL_SUBSYS_QUEUE << 8 | NFQNL_MSG_PACKET) || msg.len() < 20 {
            continue;
        }
        let queue = u16::from_be_bytes([msg[18], msg[19]]);
        let (mut id, mut payload, mut cap_len) = (None, 0..0, None);
        let mut a = 20;
        while msg.len() >= a + 4 {
            let alen = u16::from_ne_bytes([msg[a], msg[a + 1]]) as usize;
            let atype = u16::from_ne_bytes([msg[a + 2], msg[a + 3]]) & 0x7fff;
            if alen < 4 || a + alen > msg.len() {
                break;
            }
            let val = &msg[a + 4..a + alen];
            match atype {
                NFQA_PACKET_HDR if val.len() >= 4 => {
                    id = Some(u32::from_be_bytes(val[0..4].try_into().expect("4 bytes")))
                }
                NFQA_PAYLOAD => payload = (at - align4(len)) + a + 4..(at - align4(len)) + a + alen,
                NFQA_CAP_LEN if val.len() >= 4 => {
                    cap_len =
                        Some(u32::from_be_bytes(val[0..4].try_into().expect("4 bytes")) as usize)
                }
                _ => {}
            }
            a += align4(alen);
        }
        if let Some(id) = id {
            let len = cap_len.unwrap_or(payload.len());
            let whole = cap_len.is_none() && !payload.is_empty();
            out.push(QueuedPacket { queue, id, len, payload: whole.then_some(payload) });
        }
    }
}

/// A netlink message of `kind` for `queue`, with the attributes `attrs` writes.
fn message(
    seq: u32,
    kind: u16,
    flags: u16,
    queue: u16,
    attrs: impl FnOnce(&mut Vec<u8>),
) -> Vec<u8> {
    let mut m = vec![0u8; 16];
    m[4..6].copy_from_slice(&(NFNL_SUBSYS_QUEUE << 8 | kind).to_ne_bytes());
    m[6..8].copy_from_slice(&(NLM_F_REQUEST | flags).to_ne_bytes());
    m[8..12].copy_from_slice(&seq.to_ne_bytes());
    // nfgenmsg: family AF_UNSPEC, version 0, the queue (big-endian).
    m.extend_from_slice(&[0, 0]);
    m.extend_from_slice(&queue.to_be_bytes());
    attrs(&mut m);
    let len = m.len() as u32;
    m[0..4].copy_from_slice(&len.to_ne_bytes());
    m
}

/// A netlink socket speaking nfnetlink_queue.
struct NfQueue {
    fd: OwnedFd,
    seq: u32,
}

fn put_attr(m: &mut Vec<u8>, kind: u16, val: &[u8]) {
    m.extend_from_slice(&((4 + val.len()) as u16).to_ne_bytes());
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(val);
    m.resize(align4(m.len()), 0);
}

impl NfQueue {
    fn open() -> Result<NfQueue> {
        // SAFETY: plain socket(2); the descriptor is owned at once.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_NETFILTER,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error())
                .context("opening a netfilter netlink socket");
        }
        // SAFETY: fd is a new descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let big: libc::c_int = 8 << 20;
        // SAFETY: an int option on our socket.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&big as *const libc::c_int).cast(),
                4,
            )
        };
        Ok(NfQueue { fd, seq: 0 })
    }

    fn message(
        &mut self,
        kind: u16,
        flags: u16,
        queue: u16,
        attrs: impl FnOnce(&mut Vec<u8>),
    ) -> Vec<u8> {
        self.seq += 1;
        message(self.seq, kind, flags, queue, attrs)
    }

    fn send(&self, m: &[u8]) -> std::io::Result<()> {
        // SAFETY: send(2) of a buffer we own, to the kernel (the socket's default peer).
        if unsafe { libc::send(self.fd.as_raw_fd(), m.as_ptr().cast(), m.len(), 0) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Send a configuration message and wait for its acknowledgement.
    fn configure(
        &mut self,
        queue: u16,
        what: &str,
        attrs: impl FnOnce(&mut Vec<u8>),
    ) -> Result<()> {
        let m = self.message(NFQNL_MSG_CONFIG, NLM_F_ACK, queue, attrs);
        self.send(&m).with_context(|| format!("{what} (queue {queue})"))?;
        let mut buf = vec![0u8; 8192];
        loop {
            // SAFETY: recv(2) into a buffer we own.
            let n =
                unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                return Err(std::io::Error::last_os_error())
                    .with_context(|| format!("{what} (queue {queue})"));
            }
            let b = &buf[..n as usize];
            if b.len() >= 20 && u16::from_ne_bytes([b[4], b[5]]) == NLMSG_ERROR {
                let err = i32::from_ne_bytes(b[16..20].try_into().expect("4 bytes"));
                if err == 0 {
                    return Ok(());
                }
                let e = std::io::Error::from_raw_os_error(-err);
                if -err == libc::EBUSY || -err == libc::EPERM {
                    bail!("{what}: netfilter queue {queue} is taken (another program, or another lab's divert): {e}");
                }
                return Err(e).with_context(|| format!("{what} (queue {queue})"));
            }
        }
    }

    /// Bind `queue`, asking for `copy` bytes of each packet.
    fn bind(&mut self, queue: u16, copy: u32) -> Result<()> {
        self.configure(queue, "binding a netfilter queue", |m| {
            put_attr(m, NFQA_CFG_CMD, &[NFQNL_CFG_CMD_BIND, 0, 0, 0])
        })?;
        let mut params = copy.to_be_bytes().to_vec();
        params.push(NFQNL_COPY_PACKET);
        self.configure(queue, "setting a netfilter queue's copy mode", |m| {
            put_attr(m, NFQA_CFG_PARAMS, &params)
        })?;
        self.configure(queue, "setting a netfilter queue's length", |m| {
            put_attr(m, NFQA_CFG_QUEUE_MAXLEN, &QUEUE_MAXLEN.to_be_bytes())
        })?;
        self.configure(queue, "making a netfilter queue fail open", |m| {
            put_attr(m, NFQA_CFG_MASK, &NFQA_CFG_F_FAIL_OPEN.to_be_bytes());
            put_attr(m, NFQA_CFG_FLAGS, &NFQA_CFG_F_FAIL_OPEN.to_be_bytes());
        })
    }

    fn verdict(&mut self, queue: u16, id: u32, verdict: u32) -> std::io::Result<()> {
        let mut hdr = verdict.to_be_bytes().to_vec();
        hdr.extend_from_slice(&id.to_be_bytes());
        let m = self.message(NFQNL_MSG_VERDICT, 0, queue, |m| put_attr(m, NFQA_VERDICT_HDR, &hdr));
        self.send(&m)
    }
}

/// One direction of a path: its model and counters.
struct Way {
    dir: LinkDir,
    counters: Arc<DirCounters>,
}

/// The diverted paths of a lab and the thread that carries them out.
pub struct Diverter {
    counters: Vec<[Arc<DirCounters>; 2]>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Diverter {
    /// Bind queues `base`, `base + 1`, … (two per path: forward, reverse) and start
    /// holding what comes in. Fails (with nothing left bound) when a queue is taken.
    pub fn start(base: u16, specs: Vec<DivertSpec>, clock: LabClock) -> Result<Diverter> {
        let mut q = NfQueue::open()?;
        for i in 0..2 * specs.len() as u16 {
            // Outgoing packets are copied whole (to be sent again); of replies, the
            // headers do (they stay in the kernel).
            q.bind(base + i, if i % 2 == 0 { 0xffff } else { 64 })?;
        }
        let raw = [raw_socket(libc::AF_INET)?, raw_socket(libc::AF_INET6)?];
        let mut ways: Vec<Way> = Vec::with_capacity(2 * specs.len());
        let mut counters = Vec::with_capacity(specs.len());
        for s in specs {
            let c = [Arc::new(DirCounters::default()), Arc::new(DirCounters::default())];
            ways.push(Way { dir: LinkDir::new(s.forward, s.seeds[0]), counters: c[0].clone() });
            ways.push(Way { dir: LinkDir::new(s.reverse, s.seeds[1]), counters: c[1].clone() });
            counters.push(c);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("vemu-divert".into())
            .spawn(move || {
                if let Err(e) = run(q, raw, base, ways, clock, &flag) {
                    eprintln!("vemu: diverted paths stopped: {e:#}");
                }
            })
            .context("starting the diverted paths' thread")?;
        Ok(Diverter { counters, stop, thread: Some(thread) })
    }

    /// Forward and reverse counters of each path.
    pub fn stats(&self) -> Vec<[DirStats; 2]> {
        self.counters.iter().map(|c| [c[0].snapshot(), c[1].snapshot()]).collect()
    }

    /// Let every held packet go and stop (the socket closes; the queues' `bypass` rules
    /// then let packets pass until the rules are gone).
    pub fn stop(mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Diverter {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A raw IP socket of `family` that sends whole IP packets, marked [`REINJECT_MARK`].
fn raw_socket(family: libc::c_int) -> Result<OwnedFd> {
    // SAFETY: plain socket(2); the descriptor is owned at once.
    let fd =
        unsafe { libc::socket(family, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::IPPROTO_RAW) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error())
            .context("opening a raw socket for diverted packets");
    }
    // SAFETY: fd is a new descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let one: libc::c_int = 1;
    let mark = REINJECT_MARK as libc::c_int;
    // SAFETY: int options on our socket. (IPPROTO_RAW implies IP_HDRINCL for IPv4.)
    unsafe {
        if libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MARK,
            (&mark as *const libc::c_int).cast(),
            4,
        ) < 0
        {
            return Err(std::io::Error::last_os_error())
                .context("marking the raw socket of diverted packets");
        }
        if family == libc::AF_INET6 {
            const IPV6_HDRINCL: libc::c_int = 36;
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::IPPROTO_IPV6,
                IPV6_HDRINCL,
                (&one as *const libc::c_int).cast(),
                4,
            );
        }
    }
    Ok(fd)
}

/// Send a whole IP packet out again, to its destination.
fn reinject(raw: &[OwnedFd; 2], packet: &[u8]) -> std::io::Result<()> {
    let bad = || std::io::Error::from(std::io::ErrorKind::InvalidData);
    let r = match packet.first().map(|b| b >> 4) {
        Some(4) if packet.len() >= 20 => {
            // SAFETY: sockaddr_in is plain data.
            let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
            sa.sin_family = libc::AF_INET as libc::sa_family_t;
            sa.sin_addr.s_addr = u32::from_ne_bytes(packet[16..20].try_into().expect("4 bytes"));
            // SAFETY: sendto(2) of our buffer to an address we built.
            unsafe {
                libc::sendto(
                    raw[0].as_raw_fd(),
                    packet.as_ptr().cast(),
                    packet.len(),
                    0,
                    (&sa as *const libc::sockaddr_in).cast(),
                    std::mem::size_of_val(&sa) as u32,
                )
            }
        }
        Some(6) if packet.len() >= 40 => {
            // SAFETY: sockaddr_in6 is plain data.
            let mut sa: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
            sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sa.sin6_addr.s6_addr.copy_from_slice(&packet[24..40]);
            // SAFETY: as above.
            unsafe {
                libc::sendto(
                    raw[1].as_raw_fd(),
                    packet.as_ptr().cast(),
                    packet.len(),
                    0,
                    (&sa as *const libc::sockaddr_in6).cast(),
                    std::mem::size_of_val(&sa) as u32,
                )
            }
        }
        _ => return Err(bad()),
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// What a held packet is: one the kernel keeps (queue, id), or a copy to send again.
enum Held {
    Verdict(u16, u32),
    Copy(u16, Vec<u8>),
}

/// The thread: read what the queues hand over, decide with the model, let go on time.
fn run(
    mut q: NfQueue,
    raw: [OwnedFd; 2],
    base: u16,
    mut ways: Vec<Way>,
    clock: LabClock,
    stop: &AtomicBool,
) -> Result<()> {
    // (delivery time, order): a min-heap, and what each order number holds.
    let mut held: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
    let mut what: std::collections::HashMap<u64, Held> = std::collections::HashMap::new();
    let mut order = 0u64;
    let mut buf = vec![0u8; 256 * 1024];
    let mut packets = Vec::new();
    let fd = q.fd.as_raw_fd();
    while !stop.load(Relaxed) {
        let now = clock.now_ns();
        while let Some(&Reverse((at, k))) = held.peek() {
            if at > now {
                break;
            }
            held.pop();
            let Some(h) = what.remove(&k) else { continue };
            let (queue, sent) = match h {
                Held::Verdict(queue, id) => (queue, q.verdict(queue, id, NF_ACCEPT)),
                Held::Copy(queue, packet) => (queue, reinject(&raw, &packet)),
            };
            let w = &ways[(queue - base) as usize];
            match sent {
                Ok(()) => {
                    w.counters.tx_frames.fetch_add(1, Relaxed);
                    let late = now - at;
                    w.counters.late_hist[delay_bucket(late)].fetch_add(1, Relaxed);
                    w.counters.late_max_ns.fetch_max(late, Relaxed);
                }
                Err(_) => {
                    w.counters.write_errors.fetch_add(1, Relaxed);
                }
            }
        }
        // Wait for packets or the next delivery (at most 50 ms, to see `stop`).
        let wait_ns = held.peek().map_or(50_000_000, |Reverse((at, ..))| {
            at.saturating_sub(clock.now_ns()).min(50_000_000)
        });
        let ts = libc::timespec {
            tv_sec: (wait_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (wait_ns % 1_000_000_000) as libc::c_long,
        };
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: ppoll(2) on one descriptor we own, with a timeout we own.
        let r = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        if r <= 0 {
            continue;
        }
        loop {
            // SAFETY: recv(2) into a buffer we own, without waiting.
            let n =
                unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
            if n <= 0 {
                let e = std::io::Error::last_os_error();
                if n < 0 && e.raw_os_error() == Some(libc::ENOBUFS) {
                    // The socket overflowed: those packets stay queued until fail-open
                    // or their queue's length lets others pass; go on.
                    continue;
                }
                break;
            }
            let now = clock.now_ns();
            packets.clear();
            parse_packets(&buf[..n as usize], &mut packets);
            for p in &packets {
                let Some(w) = p.queue.checked_sub(base).and_then(|k| ways.get_mut(k as usize))
                else {
                    continue;
                };
                let outgoing = (p.queue - base).is_multiple_of(2);
                if outgoing {
                    // The copy is ours: the original goes at once (see the module's note).
                    q.verdict(p.queue, p.id, NF_DROP)
                        .map_err(|e| anyhow!("taking a diverted packet: {e}"))?;
                }
                w.counters.rx_frames.fetch_add(1, Relaxed);
                w.counters.rx_bytes.fetch_add(p.len as u64 + 14, Relaxed);
                let o = w.dir.offer(now, Offer::single(p.len as u64 + 14));
                let (qf, qb) = w.dir.queue_depth(now);
                w.counters.queue_frames.store(qf, Relaxed);
                w.counters.queue_bytes.store(qb, Relaxed);
                w.counters.queue_frames_max.fetch_max(qf, Relaxed);
                match o.first {
                    Ok(d) => {
                        w.counters.tx_bytes.fetch_add(p.len as u64 + 14, Relaxed);
                        w.counters.delay_hist[delay_bucket(d.at_ns - now)].fetch_add(1, Relaxed);
                        order += 1;
                        let h = match (outgoing, p.payload.clone()) {
                            (true, Some(range)) => Held::Copy(p.queue, buf[range].to_vec()),
                            (true, None) => {
                                // Not copied whole (never seen: packets are cut to the MTU).
                                w.counters.write_errors.fetch_add(1, Relaxed);
                                continue;
                            }
                            (false, _) => Held::Verdict(p.queue, p.id),
                        };
                        what.insert(order, h);
                        held.push(Reverse((d.at_ns, order)));
                    }
                    Err(cause) => {
                        let c = match cause {
                            DropCause::Loss => &w.counters.drop_loss,
                            DropCause::Queue => &w.counters.drop_queue,
                            DropCause::Down => &w.counters.drop_down,
                        };
                        c.fetch_add(1, Relaxed);
                        if !outgoing {
                            q.verdict(p.queue, p.id, NF_DROP)
                                .map_err(|e| anyhow!("dropping a diverted packet: {e}"))?;
                        }
                    }
                }
            }
        }
    }
    // Whatever is still held goes now.
    while let Some(Reverse((_, k))) = held.pop() {
        match what.remove(&k) {
            Some(Held::Verdict(queue, id)) => {
                let _ = q.verdict(queue, id, NF_ACCEPT);
            }
            Some(Held::Copy(_, packet)) => {
                let _ = reinject(&raw, &packet);
            }
            None => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A packet message as the kernel sends it.
    fn packet_msg(queue: u16, id: u32, payload: &[u8], cap_len: Option<u32>) -> Vec<u8> {
        let mut m = message(1, NFQNL_MSG_PACKET, 0, queue, |m| {
            let mut hdr = id.to_be_bytes().to_vec();
            hdr.extend_from_slice(&[0x08, 0x00, 3]);
            put_attr(m, NFQA_PACKET_HDR, &hdr);
            put_attr(m, NFQA_PAYLOAD, payload);
            if let Some(c) = cap_len {
                put_attr(m, NFQA_CAP_LEN, &c.to_be_bytes());
            }
        });
        m.resize(align4(m.len()), 0);
        m
    }

    #[test]
    fn packet_messages_parse_and_garbage_is_skipped() {
        let mut buf = packet_msg(8200, 7, &[0x45; 60], None);
        // Copied in part: the length is the packet's.
        buf.extend(packet_msg(8201, 8, &[0x45; 64], Some(1500)));
        let mut out = Vec::new();
        parse_packets(&buf, &mut out);
        assert_eq!((out[0].queue, out[0].id, out[0].len), (8200, 7, 60));
        assert_eq!(&buf[out[0].payload.clone().unwrap()], &[0x45; 60]);
        assert_eq!(
            (out[1].queue, out[1].id, out[1].len, out[1].payload.clone()),
            (8201, 8, 1500, None)
        );
        // Truncated or lying lengths never read past the buffer.
        for cut in 0..buf.len() {
            out.clear();
            parse_packets(&buf[..cut], &mut out);
            assert!(out.len() <= 2);
        }
        let mut bad = buf.clone();
        bad[0] = 0xff;
        out.clear();
        parse_packets(&bad, &mut out);
        assert!(out.is_empty());
    }
}
