//! A network interface of the machine (a NIC) as a port of the lab: what is on its wire
//! joins the lab (a node of kind `external`). Frames are read and written through an
//! `AF_PACKET` socket bound to it, with the same virtio-net header as vemu's TAP devices
//! (`PACKET_VNET_HDR`: checksum offload and GRO/TSO super-frames cross it whole), so
//! the engine drives it as a TAP device.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use anyhow::{anyhow, bail, Result};

use crate::tap;

const PACKET_ADD_MEMBERSHIP: libc::c_int = 1;
const PACKET_MR_PROMISC: libc::c_ushort = 1;
const PACKET_VNET_HDR: libc::c_int = 15;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const ETH_P_ALL: u16 = 0x0003;
/// Room for bursts from the wire while the engine is busy.
const RCVBUF_BYTES: libc::c_int = 4 << 20;

fn setsockopt<T>(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
    what: &str,
) -> Result<()> {
    // SAFETY: value points to a T of the size given.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error()).map_err(|e| anyhow!("{what}: {e}"));
    }
    Ok(())
}

/// Whether interface `name` of the calling thread's network namespace is up.
fn is_up(sock: &OwnedFd, name: &str) -> Result<bool> {
    // SAFETY: an all-zero ifreq is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS fills the ifreq's flags.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
        bail!("reading the flags of {name}: {}", std::io::Error::last_os_error());
    }
    // SAFETY: SIOCGIFFLAGS set the flags member of the union.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    Ok(flags & libc::IFF_UP as libc::c_short != 0)
}

/// Open interface `name` (of the calling thread's network namespace) as a port: every
/// frame on its wire is read (promiscuous, for as long as the descriptor lives), frames
/// written go out on the wire, and what the machine itself sends there is not read. The
/// interface must exist and be up; vemu changes nothing else of it.
pub fn open(name: &str) -> Result<OwnedFd> {
    let index = tap::ifindex(name).map_err(|_| {
        anyhow!(
            "the machine has no interface named {name} (the 'iface' of a node of kind 'external')"
        )
    })?;
    // Protocol 0: nothing is received before the socket is bound to the interface.
    // SAFETY: socket(2) returns a new descriptor or -1.
    let raw = unsafe {
        libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0)
    };
    if raw < 0 {
        bail!("opening a packet socket for {name}: {}", std::io::Error::last_os_error());
    }
    // SAFETY: raw is a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    if !is_up(&fd, name)? {
        bail!("interface {name} is down: bring it up first (ip link set {name} up); vemu uses it as it is");
    }
    setsockopt(
        &fd,
        libc::SOL_PACKET,
        PACKET_VNET_HDR,
        &1 as &libc::c_int,
        "asking for virtio-net headers",
    )?;
    setsockopt(
        &fd,
        libc::SOL_PACKET,
        PACKET_IGNORE_OUTGOING,
        &1 as &libc::c_int,
        "leaving out outgoing frames",
    )?;
    setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &RCVBUF_BYTES, "sizing the receive buffer")?;
    // SAFETY: an all-zero sockaddr_ll is valid; the fields set below make it a binding.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as u16;
    addr.sll_protocol = ETH_P_ALL.to_be();
    addr.sll_ifindex = index as i32;
    // SAFETY: addr is a sockaddr_ll of the size given.
    if unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    } < 0
    {
        bail!("binding a packet socket to {name}: {}", std::io::Error::last_os_error());
    }
    let mreq = libc::packet_mreq {
        mr_ifindex: index as i32,
        mr_type: PACKET_MR_PROMISC,
        mr_alen: 0,
        mr_address: [0; 8],
    };
    setsockopt(
        &fd,
        libc::SOL_PACKET,
        PACKET_ADD_MEMBERSHIP,
        &mreq,
        "making the interface promiscuous",
    )?;
    Ok(fd)
}
