//! A shard's tunnel ports: the far side of a link (or a trunk) on another machine as a
//! port, and the UDP socket I/O they share — segmented sends, batched receives with the
//! kernel's arrival time. What size to send and when to probe is the core's
//! ([`Core::tunnel_payload`], [`Core::handle_probe_timeout`]).

use super::*;

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
    pub(super) max_payload: usize,
    pub(super) ipv6: bool,
    pub seq: u32,
    pub reasm: tunnel::Reassembler,
    pub dgrams: Vec<Vec<u8>>,
    /// The pieces of a frame go by UDP segmentation offload (see [`send_datagrams`])
    /// until the kernel refuses it once; the buffer they are laid out in.
    pub(super) gso: bool,
    pub(super) gso_buf: Vec<u8>,
    /// Datagrams from the far end whose tag did not verify (or replays), dropped.
    pub(super) forged: u64,
}

/// A shard's keys of its tunnel datagrams ([`tunnel::auth`]): what it sends is sealed,
/// what it receives opened.
pub(crate) struct Seal {
    key: Arc<tunnel::auth::Key>,
    sealer: tunnel::auth::Sealer,
    opener: tunnel::auth::Opener,
}

impl Seal {
    /// For shard `shard` of machine `machine` of a lab whose key is `key`.
    pub(crate) fn new(key: Arc<tunnel::auth::Key>, machine: usize, shard: usize) -> Seal {
        let sender = tunnel::auth::sender(machine, shard);
        Seal { key, sealer: tunnel::auth::Sealer::new(sender), opener: Default::default() }
    }

    pub(crate) fn seal(&mut self, d: &mut Vec<u8>) {
        self.sealer.seal(&self.key, d);
    }

    pub(crate) fn open<'a>(&mut self, d: &'a [u8]) -> Result<&'a [u8], tunnel::auth::AuthError> {
        self.opener.open(&self.key, d)
    }
}

/// What a datagram of `size` bytes on the wire holds of its own with `seal` (or without).
pub(crate) fn unsealed_size(seal: &Option<Seal>, size: usize) -> usize {
    match seal {
        Some(_) => size.saturating_sub(tunnel::AUTH_LEN),
        None => size,
    }
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
            forged: 0,
        }
    }

    /// Send a frame that left at `at_ns` in datagrams of `payload` bytes: `Ok` when every
    /// datagram went, else the error of the first that did not (`EMSGSIZE`: too long for
    /// the machine's own interface).
    pub(super) fn send(
        &mut self,
        fd: RawFd,
        frame: &[u8],
        at_ns: u64,
        payload: usize,
        seal: Option<&mut Seal>,
    ) -> Result<(), i32> {
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
        if let Some(s) = seal {
            for d in &mut self.dgrams {
                s.seal(d);
            }
        }
        send_datagrams(fd, Some(&far), &self.dgrams, &mut self.gso_buf, &mut self.gso)
    }
}

/// A socket address as the kernel takes it (`sockaddr_in` or `sockaddr_in6`): nix's.
pub(super) type SockAddr = nix::sys::socket::SockaddrStorage;

/// `UDP_SEGMENT` (linux/udp.h), which the libc crate has only for some C libraries.
pub(super) const UDP_SEGMENT: libc::c_int = 103;
/// At most this many datagrams, and this many bytes of them, in one segmented send: the
/// kernel's limits (`UDP_MAX_SEGMENTS`; one UDP datagram's payload, with room for IPv6).
pub(super) const GSO_MAX_SEGMENTS: usize = 64;
pub(super) const GSO_MAX_BYTES: usize = 65_000;

/// Send datagrams `ds` on a UDP socket (to `to`, or where it is connected) without
/// waiting — each as long as the first but the last, which is no longer, as
/// [`tunnel::encode`] cuts a frame — in as few system calls as the kernel allows: runs of them laid out in `buf` and cut at the
/// first's length by UDP segmentation offload (`UDP_SEGMENT`, one `sendmsg` for up to
/// 64), while `gso` holds (cleared for good when the kernel refuses a segmented send
/// that it then takes one by one). `Ok` when every datagram went, else the error of the
/// first that did not (`EMSGSIZE`: too big for the machine's own interface).
pub(super) fn send_datagrams(
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
pub(super) fn send_segmented(
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
pub(super) const RECV_BATCH: usize = 32;
/// Room for one datagram: the largest a UDP socket delivers.
pub(super) const DATAGRAM_MAX: usize = 65_536;

/// Datagrams received by one [`recv_batch`]: each one's bytes (in `bufs[i][..len[i]]`)
/// and how long it waited in the socket, by the kernel's receive timestamp (0 without
/// one).
pub(crate) struct Received {
    pub(super) bufs: Vec<Vec<u8>>,
    pub(super) len: Vec<usize>,
    pub(super) held_ns: Vec<u64>,
    /// Where each came from, as the kernel wrote it, and its length.
    pub(super) names: Vec<libc::sockaddr_storage>,
    pub(super) name_len: Vec<libc::socklen_t>,
}

impl Received {
    pub(super) fn new() -> Received {
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
    pub(super) fn from(&self, i: usize) -> Option<SockAddr> {
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
pub(super) fn recv_batch(fd: RawFd, r: &mut Received) -> Option<usize> {
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
pub(super) fn send_datagram(fd: RawFd, to: Option<&SockAddr>, d: &[u8]) -> bool {
    // SAFETY: sending bytes we hold on a descriptor we own, to an address we built.
    let n = match to {
        Some(to) => unsafe {
            libc::sendto(fd, d.as_ptr().cast(), d.len(), libc::MSG_DONTWAIT, to.as_ptr(), to.len())
        },
        None => unsafe { libc::send(fd, d.as_ptr().cast(), d.len(), libc::MSG_DONTWAIT) },
    };
    n == d.len() as isize
}

/// [`send_datagram`] without DF, for once (an IPv4 tunnel socket: path MTU discovery
/// is the engine's own, every other datagram has DF): a datagram larger than the
/// interface sends whole goes in the pieces the kernel cuts it into, as the kernel's
/// VXLAN device sends its packets.
pub(super) fn send_fragmented(fd: RawFd, to: Option<&SockAddr>, d: &[u8]) -> bool {
    let set = |mode: libc::c_int| {
        // SAFETY: an int option on a socket we own.
        unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_IP,
                libc::IP_MTU_DISCOVER,
                (&mode as *const libc::c_int).cast(),
                4,
            ) == 0
        }
    };
    if !set(libc::IP_PMTUDISC_DONT) {
        return false;
    }
    let sent = send_datagram(fd, to, d);
    set(libc::IP_PMTUDISC_PROBE);
    sent
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
