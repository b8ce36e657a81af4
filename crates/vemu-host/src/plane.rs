//! The lab's plane: the network namespace where the nodes' far ends, the engine's
//! TAPs, LAN bridges and the VXLAN device meet.

use super::*;

/// MTU of the plane's devices: the largest, so that the plane never drops a frame a
/// node sends (the link's own MTU is enforced by the engine, or by the far interface).
pub(crate) const PLANE_MTU: u32 = 65535;

/// The largest a TAP device takes (65535 less its Ethernet header).
pub(crate) const PLANE_TAP_MTU: u32 = 65535 - 14;

/// Names of the plane devices of link `link`'s side `side` (0 = a): the veth peer of
/// the node's interface, and the engine's TAP device.
pub fn plane_names(link: usize, side: usize) -> (String, String) {
    let s = ["a", "b"][side.min(1)];
    (format!("v{link}{s}"), format!("t{link}{s}"))
}

/// Create the lab's plane namespace (pinned at [`LabPaths::plane`]): the kernel fast
/// path's switchboard, where each link interface of a node has its veth peer and the
/// engine a TAP device (see the `vemu-fastpath` crate). Nothing in it has an address
/// or IPv6, so it sends nothing of its own.
pub fn create_plane(paths: &LabPaths) -> Result<()> {
    let pin_path = paths.plane();
    std::thread::scope(|s| {
        s.spawn(|| -> Result<()> {
            unshare(CloneFlags::CLONE_NEWNET).context("creating the plane namespace")?;
            pin_ns("net", &pin_path)?;
            write_sysctl("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1")?;
            write_sysctl("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1")?;
            // (Its LAN bridges are switches.)
            bridges_without_netfilter("/proc/sys")
        })
        .join()
        .map_err(|_| anyhow!("the thread creating the plane namespace panicked"))?
    })
}

/// Device group of the engine's TAP devices in a lab's plane, deleted together when
/// the lab goes ([`remove_plane_taps`]).
pub(crate) const PLANE_TAP_GROUP: u32 = 0x7665;

/// Make the engine's TAP devices in the plane (`taps`: the second names of
/// [`plane_names`] or [`plane_member_names`]), up, on the plane's TC block; their
/// indexes and descriptors. Runs beside the making of the nodes, and later for a link or
/// LAN that first needs the engine.
pub fn plane_taps(paths: &LabPaths, taps: &[String]) -> Result<Vec<(u32, OwnedFd)>> {
    in_netns(&paths.plane(), || {
        let mut nl = netlink::Netlink::open()?;
        let mut out = Vec::with_capacity(taps.len());
        for chunk in taps.chunks(32) {
            let _gate = NET_CONFIG.lock().unwrap_or_else(|e| e.into_inner());
            for tap in chunk {
                let fd = tap::create(tap).with_context(|| {
                    format!("making the engine's TAP device {tap} in the lab's plane")
                })?;
                let t = tap::ifindex(tap)?;
                nl.set_link(t, true, None, Some(PLANE_TAP_MTU))?;
                nl.set_group(t, PLANE_TAP_GROUP)?;
                nl.add_ingress(t, PLANE_BLOCK)?;
                out.push((t, fd));
            }
            nl.flush().context("making the engine's devices in the plane")?;
        }
        Ok(out)
    })
}

/// Delete the engine's TAP devices of a lab's plane all at once (its descriptors may
/// stay open: closing them is then quick). Nothing to do for a lab without a plane.
pub fn remove_plane_taps(paths: &LabPaths) -> Result<()> {
    in_plane(paths, "deleting the engine's devices in the plane", |nl| {
        nl.del_group(PLANE_TAP_GROUP)
    })
}

/// Send the netlink requests `f` queues in the lab's plane (`what` they do, for an
/// error); nothing to do for a lab without a plane.
pub(crate) fn in_plane(
    paths: &LabPaths,
    what: &str,
    f: impl FnOnce(&mut netlink::Netlink) -> Result<()> + Send,
) -> Result<()> {
    if !paths.plane().exists() {
        return Ok(());
    }
    in_netns(&paths.plane(), || {
        let mut nl = netlink::Netlink::open()?;
        f(&mut nl)?;
        nl.flush().with_context(|| what.to_string())
    })
}

/// The plane's shared TC blocks (see [`netlink::Netlink::add_ingress`]): the ingress of
/// every device, and the egress of LAN ports.
pub(crate) const PLANE_BLOCK: u32 = 1;

pub(crate) const PLANE_EGRESS_BLOCK: u32 = 2;

/// Make the lab's plane's shared TC blocks ([`plane_program`]): on the plane's loopback,
/// which carries nothing, so that they outlast every other device.
pub fn plane_blocks(paths: &LabPaths) -> Result<()> {
    in_netns(&paths.plane(), || {
        let mut nl = netlink::Netlink::open()?;
        nl.add_clsact_blocks(tap::ifindex("lo")?, PLANE_BLOCK, PLANE_EGRESS_BLOCK)?;
        nl.flush().context("making the plane's TC blocks")
    })
}

/// Attach the fast path's TC programs to the lab's plane ([`plane_blocks`]): `prog` to
/// the shared block every device's ingress joins, `egress` to the one of LAN ports'
/// egress. While a lab is made they come off again ([`plane_program_off`]) until
/// its first devices have joined the blocks: a qdisc that joins a block with a filter
/// waits for an RCU grace period (under the kernel's RTNL lock, every other device's
/// making waiting with it), one that joins an empty block does not, and the filters'
/// coming back later waits for none. Meanwhile what a node would send reaches the
/// plane's own stack, which has no address to answer from nor route to forward by (on
/// a LAN port, its bridge); no node runs a program yet.
pub fn plane_program(paths: &LabPaths, prog: BorrowedFd<'_>, egress: BorrowedFd<'_>) -> Result<()> {
    in_netns(&paths.plane(), || {
        let mut nl = netlink::Netlink::open()?;
        nl.add_block_bpf(PLANE_BLOCK, &prog, "vemu-steer")?;
        nl.add_block_bpf(PLANE_EGRESS_BLOCK, &egress, "vemu-leave")?;
        nl.flush().context("attaching the fast path's programs")
    })
}

/// Take the fast path's programs off the plane's blocks, which stay ([`plane_program`]).
pub fn plane_program_off(paths: &LabPaths) -> Result<()> {
    in_netns(&paths.plane(), || {
        let mut nl = netlink::Netlink::open()?;
        nl.del_block_bpf(PLANE_BLOCK, "vemu-steer")?;
        nl.del_block_bpf(PLANE_EGRESS_BLOCK, "vemu-leave")?;
        nl.flush().context("taking the fast path's programs off the plane")
    })
}

/// The UDP port of a lab's VXLAN devices ([`plane_vxlan`]), the same on every machine of
/// the lab: from a hash of its name, in 14800 … 15799 (clear of the agents' 14790 and of
/// the ephemeral ports the engines' tunnel sockets take).
pub fn vxlan_port(lab: &str) -> u16 {
    let h = lab
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    14800 + (h % 1000) as u16
}

/// The name in the plane of the lab's VXLAN device ([`plane_vxlan`]).
pub const PLANE_VXLAN: &str = "vxlan0";

/// Make the lab's VXLAN device for links to other machines ([`PLANE_VXLAN`], see
/// `vemu-fastpath`'s `Route::Tunnel`): its UDP socket on `port` of this process's
/// network namespace (the machine's, where the underlay is), the device in the plane,
/// up, on the plane's TC block; its index there. Fails where the kernel has no VXLAN or
/// the port is taken (by another lab's device: then that lab's links between machines
/// keep to the engine).
pub fn plane_vxlan(paths: &LabPaths, port: u16) -> Result<u32> {
    let plane = fs::File::open(paths.plane())
        .with_context(|| format!("opening {}", paths.plane().display()))?;
    // A name of its own in the machine's namespace for the moment it is there.
    let temp = format!("vx{:x}{:x}", std::process::id() & 0xffff, port);
    let mut nl = netlink::Netlink::open()?;
    nl.add_vxlan_external(&temp, port)?;
    nl.flush()?;
    let index = tap::ifindex(&temp)?;
    nl.move_link(index, &plane, PLANE_VXLAN)?;
    if let Err(e) = nl.flush() {
        nl.del_link(index)?;
        let _ = nl.flush();
        return Err(e);
    }
    in_netns(&paths.plane(), || {
        let mut nl = netlink::Netlink::open()?;
        let index = tap::ifindex(PLANE_VXLAN)?;
        nl.set_link(index, true, None, None)?;
        nl.add_ingress(index, PLANE_BLOCK)?;
        // (Up, its socket opens: a port another holds fails here.)
        nl.flush()
            .with_context(|| format!("opening UDP port {port} for the lab's VXLAN device"))?;
        Ok(index)
    })
}

/// Delete device `index` of the lab's plane (nothing to do without a plane).
pub fn remove_plane_device(paths: &LabPaths, index: u32) -> Result<()> {
    in_plane(paths, "deleting a device of the plane", |nl| nl.del_link(index))
}

/// A node interface's far end in the plane: its name and index there ([`plane_index`]),
/// and for a LAN port the index of the LAN's bridge.
#[derive(Debug, Clone)]
pub struct PlanePeer {
    pub name: String,
    pub index: u32,
    pub bridge: Option<u32>,
}

/// The first index of the node interfaces' far ends in the plane. Their indexes are
/// chosen (the `n`th far end made has `PLANE_INDEX_BASE + n`) rather than asked for:
/// the plane's other devices (bridges, the engine's TAP devices, ...) take the kernel's
/// next free index, counted up from 1, which stays far below.
pub const PLANE_INDEX_BASE: u32 = 1 << 24;

/// The index in the plane of the `n`th node interface's far end made there.
pub fn plane_index(n: usize) -> u32 {
    PLANE_INDEX_BASE + n as u32
}

/// Names of the plane devices of LAN `seg`'s member `member`: the veth peer of the
/// node's interface (a port of the LAN's bridge), and the engine's TAP device.
pub fn plane_member_names(seg: usize, member: usize) -> (String, String) {
    (format!("s{seg}m{member}"), format!("u{seg}m{member}"))
}

/// Name of engine shard `shard`'s fan-out device in the plane: a TAP device whose
/// frames each go to several LAN ports (see `vemu-fastpath`).
pub fn plane_fanout_name(shard: usize) -> String {
    format!("fo{shard}")
}

/// Make the bridge of LAN `seg` in the lab's plane, the kernel's switch of the LAN while
/// nothing of it needs emulating: IGMP/MLD snooping (`snooping`), its own querier
/// (`querier`), MAC addresses forgotten after `aging_ns`. Where the LAN carries IPv6
/// (`ipv6`), IPv6 is on for the querier alone (an MLD querier needs a link-local
/// address), without duplicate address detection; else it queries IGMP only. Its index
/// in the plane.
pub fn plane_bridge(
    paths: &LabPaths,
    seg: usize,
    snooping: bool,
    querier: bool,
    ipv6: bool,
    aging_ns: u64,
) -> Result<u32> {
    let name = format!("b{seg}");
    in_netns(&paths.plane(), || {
        let mut nl = netlink::Netlink::open()?;
        // Hosts are asked to answer a query within 1 s (the kernel's default is 10 s).
        // The bridge was still seen flooding group data for ~10 s after `up`: why is
        // not known (docs/scenario.md says so).
        nl.add_bridge(
            &name,
            snooping,
            querier,
            (aging_ns / 10_000_000).clamp(1, u32::MAX as u64) as u32,
            100,
        )?;
        nl.flush().with_context(|| format!("making the bridge of LAN #{seg}"))?;
        if querier && ipv6 {
            write_sysctl(&format!("/proc/sys/net/ipv6/conf/{name}/accept_dad"), "0")?;
            write_sysctl(&format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6"), "0")?;
        }
        nl.index_of(&name)
    })
}

/// A packet socket in the lab's plane that sends frames on its devices and receives
/// none (protocol 0): the engine's input probes go out on its TAP devices with it.
pub fn plane_packet_socket(paths: &LabPaths) -> Result<OwnedFd> {
    in_netns(&paths.plane(), || {
        // SAFETY: plain socket(2); the descriptor is owned at once.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error())
                .context("opening a packet socket in the plane");
        }
        // SAFETY: a new descriptor nothing else owns.
        Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
    })
}
