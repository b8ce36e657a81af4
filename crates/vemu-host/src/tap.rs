//! TAP devices with a virtio-net header and TSO/checksum offloads.

use std::ffi::CStr;
use std::fs::OpenOptions;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;

use anyhow::{bail, Context, Result};

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const IFF_TAP: libc::c_short = 0x0002;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_VNET_HDR: libc::c_short = 0x4000;
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO6: libc::c_uint = 0x04;

#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// Create a TAP device named `name` in the calling thread's network namespace. The
/// device lives as long as the returned descriptor. Frames read from it start with a
/// 10-byte virtio-net header and may be TCP super-frames of up to 64 KiB; checksums of
/// outgoing frames may be left for the receiver (`VIRTIO_NET_HDR_F_NEEDS_CSUM`).
pub fn create(name: &str) -> Result<OwnedFd> {
    if name.len() >= libc::IFNAMSIZ {
        bail!("interface name '{name}' is longer than {} characters", libc::IFNAMSIZ - 1);
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open("/dev/net/tun")
        .context("opening /dev/net/tun")?;
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        flags: IFF_TAP | IFF_NO_PI | IFF_VNET_HDR,
        _pad: [0; 22],
    };
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: TUNSETIFF reads and writes an ifreq, which IfReq lays out.
    if unsafe { libc::ioctl(file.as_raw_fd(), TUNSETIFF, &mut req) } < 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("creating TAP device {name}"));
    }
    let offloads = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6;
    // SAFETY: TUNSETOFFLOAD takes an unsigned int by value.
    if unsafe { libc::ioctl(file.as_raw_fd(), TUNSETOFFLOAD, offloads as libc::c_ulong) } < 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("enabling offloads on {name}"));
    }
    Ok(file.into())
}

/// Index of an interface in the calling thread's network namespace.
pub fn ifindex(name: &str) -> Result<u32> {
    let c = std::ffi::CString::new(name)?;
    let cstr: &CStr = &c;
    // SAFETY: a valid NUL-terminated string.
    let idx = unsafe { libc::if_nametoindex(cstr.as_ptr()) };
    if idx == 0 {
        bail!("no interface named {name}");
    }
    Ok(idx)
}
