//! Linux node virtualization for vemu: a node is a network namespace, a UTS namespace
//! (hostname = node name) and a mount namespace, all pinned by bind mounts so that they
//! cost no process. In its mount namespace a node sees the lab's `/etc/hosts`, its own
//! `/sys` and `/run`, and copy-on-write overlays of `/etc`, `/var/lib` and `/var/log`
//! holding its own files (so one daemon runs in every node with its own configuration,
//! pid files and sockets).
//! Interfaces are TAP devices created directly inside the node and configured through
//! netlink from one process.
//!
//! Every object carries the lab's name. A lab's state lives on a tmpfs of its own at
//! `/run/vemu/LAB/`, where the namespaces are pinned; `/run/netns/vemu-LAB.NODE` is a
//! symlink to the pinned network namespace, so that `ip netns` lists and enters nodes.
//! [`remove_lab`] removes all of it, also after a crash, with one lazy unmount of the
//! lab's tmpfs (unmounting namespaces one by one costs an RCU grace period each).

pub mod cgroup;
pub mod confine;
pub mod divert;
pub mod netlink;
pub mod nic;
pub mod tap;

use std::collections::HashSet;
use std::fs;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::{unshare, CloneFlags};
use vemu_scenario::NodePlan;

pub const NETNS_DIR: &str = "/run/netns";
pub const STATE_DIR: &str = "/run/vemu";
/// Prefix of every network namespace vemu creates.
pub const NETNS_PREFIX: &str = "vemu-";

/// Where a lab keeps its state.
#[derive(Debug, Clone)]
pub struct LabPaths {
    pub lab: String,
    pub dir: PathBuf,
}

impl LabPaths {
    /// A lab's paths, or (`lab` a [`share_name`]) those of a machine's share of one.
    pub fn new(lab: &str) -> LabPaths {
        LabPaths { lab: lab.to_string(), dir: Path::new(STATE_DIR).join(lab) }
    }
    /// The lab's own name (a share's is its lab's): what programs in nodes see as `VEMU_LAB`.
    pub fn lab_name(&self) -> &str {
        share_of(&self.lab).map_or(&self.lab, |(lab, _)| lab)
    }
    pub fn netns_name(&self, node: &str) -> String {
        format!("{NETNS_PREFIX}{}.{node}", self.lab)
    }
    /// The symlink `ip netns` sees.
    pub fn netns(&self, node: &str) -> PathBuf {
        Path::new(NETNS_DIR).join(self.netns_name(node))
    }
    /// Where the network namespace is pinned.
    pub fn netns_pin(&self, node: &str) -> PathBuf {
        self.dir.join("netns").join(node)
    }
    /// Where the lab's plane namespace is pinned: the far ends of the nodes' link
    /// interfaces and the engine's TAP devices for them (see [`create_plane`]).
    pub fn plane(&self) -> PathBuf {
        self.dir.join("plane")
    }
    pub fn uts(&self, node: &str) -> PathBuf {
        self.dir.join("uts").join(node)
    }
    /// Where the node's mount namespace (its private view of the filesystem) is pinned.
    pub fn mnt(&self, node: &str) -> PathBuf {
        self.dir.join("mnt").join(node)
    }
    /// Where the node's PID namespace is pinned, once its first process runs.
    pub fn pidns(&self, node: &str) -> PathBuf {
        self.dir.join("pid").join(node)
    }
    /// Present for a node with PIDs of its own (`isolation: pid`); its lock guards the
    /// making of the node's PID namespace.
    pub fn pidns_wanted(&self, node: &str) -> PathBuf {
        self.dir.join("pid").join(format!("{node}.wanted"))
    }
    /// Present when the lab is a tenant's: its nodes are confined ([`confine`]).
    pub fn confined(&self) -> PathBuf {
        self.dir.join("confined")
    }
    /// Present once the node's own `/sys` is mounted ([`node_sysfs`]); its lock guards
    /// the mounting.
    pub fn sys_mounted(&self, node: &str) -> PathBuf {
        self.dir.join("sys").join(node)
    }
    /// The node's private directories: `upper/` and `work/` of its overlays on
    /// [`PRIVATE_OVERLAYS`], and `run/`, its `/run`.
    pub fn node_fs(&self, node: &str) -> PathBuf {
        self.dir.join("fs").join(node)
    }
    pub fn hosts(&self) -> PathBuf {
        self.dir.join("hosts")
    }
    /// A node's working directory (the current directory of its `run` commands).
    pub fn node_dir(&self, node: &str) -> PathBuf {
        self.dir.join("nodes").join(node)
    }
    /// The controller's HTTP API (root only).
    pub fn socket(&self) -> PathBuf {
        self.dir.join("api.sock")
    }
    /// Bearer token of the API's TCP listener, when there is one (root only).
    pub fn api_token(&self) -> PathBuf {
        self.dir.join("api-token")
    }
    /// Address of the API's TCP listener, when there is one.
    pub fn api_address(&self) -> PathBuf {
        self.dir.join("api-address")
    }
    pub fn plan(&self) -> PathBuf {
        self.dir.join("plan.json")
    }
    pub fn pid_file(&self) -> PathBuf {
        self.dir.join("daemon.pid")
    }
    /// Logs outlive the lab, so they are kept under /var/log.
    pub fn log_dir(&self) -> PathBuf {
        Path::new("/var/log/vemu").join(&self.lab)
    }
    /// Output of a node's `run` commands.
    pub fn node_log(&self, node: &str) -> PathBuf {
        self.log_dir().join(format!("{node}.log"))
    }
}

/// Make `dir` a shared mount point, as iproute2 does for /run/netns, so that namespace
/// mounts made later propagate into (and their removal out of) other mount namespaces.
fn make_shared_dir(dir: &str) -> Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("creating {dir}"))?;
    for _ in 0..2 {
        match mount(None::<&str>, dir, Some("none"), MsFlags::MS_SHARED | MsFlags::MS_REC, None::<&str>) {
            Ok(()) => return Ok(()),
            Err(nix::errno::Errno::EINVAL) => {
                mount(Some(dir), dir, Some("none"), MsFlags::MS_BIND | MsFlags::MS_REC, None::<&str>)
                    .with_context(|| format!("bind-mounting {dir} onto itself"))?;
            }
            Err(e) => return Err(e).with_context(|| format!("making {dir} a shared mount")),
        }
    }
    bail!("could not make {dir} a shared mount")
}

/// Make `dir` a mount point of its own that propagates nothing. The nodes' mount
/// namespaces are pinned there, and the kernel refuses to copy a mount namespace file
/// into another mount namespace (EINVAL): under the lab's shared tmpfs, a pin would be
/// propagated into every mount namespace holding a copy of it — the one of a process
/// started with `ip netns exec` (its mounts are slaves of the machine's), or ones still
/// going away — and each such copy made pinning, and so `up`, fail.
fn private_dir(dir: &Path) -> Result<()> {
    mount(Some(dir), dir, None::<&str>, MsFlags::MS_BIND, None::<&str>).with_context(|| format!("bind-mounting {} onto itself", dir.display()))?;
    mount(None::<&str>, dir, None::<&str>, MsFlags::MS_PRIVATE, None::<&str>).with_context(|| format!("making {} a private mount", dir.display()))
}

/// Kernel limits a lab needs, as (sysctl, least value). The neighbour (ARP and NDP)
/// tables are shared by every network namespace of the machine, and their default hard
/// limit (1024 entries) is reached by one LAN of 33 hosts that all talk to each other:
/// beyond it, sends fail with ENOBUFS.
const HOST_LIMITS: &[(&str, u64)] = &[
    ("/proc/sys/net/ipv4/neigh/default/gc_thresh1", 4096),
    ("/proc/sys/net/ipv4/neigh/default/gc_thresh2", 262144),
    ("/proc/sys/net/ipv4/neigh/default/gc_thresh3", 1048576),
    ("/proc/sys/net/ipv6/neigh/default/gc_thresh1", 4096),
    ("/proc/sys/net/ipv6/neigh/default/gc_thresh2", 262144),
    ("/proc/sys/net/ipv6/neigh/default/gc_thresh3", 1048576),
];

/// Raise the machine's kernel limits that labs outgrow (never lowers one). These are
/// tuning values, not lab objects, so they stay after the lab (as with Mininet).
fn raise_host_limits() -> Result<()> {
    for (path, least) in HOST_LIMITS {
        // Only the machine's first network namespace has them (an agent may run in
        // another: the limits are the machine's, raised from there).
        if !Path::new(path).exists() {
            continue;
        }
        let now: u64 = fs::read_to_string(path).with_context(|| format!("reading {path}"))?.trim().parse().unwrap_or(0);
        if now < *least {
            write_sysctl(path, &least.to_string())?;
        }
    }
    Ok(())
}

/// Descriptors a lab's controller keeps open besides its devices and node sockets: API
/// connections (256 on TCP, 256 on the Unix socket), captures, logs, each engine shard's epoll
/// set, eventfd and io_uring.
pub const CONTROLLER_FILES: u64 = 700;

/// Open files a lab's controller needs at the start: a TAP device per link end and per
/// LAN member, a netlink socket per node (the nodes' TAP counters), and
/// [`CONTROLLER_FILES`]. With the kernel fast path (`fast_path`), a link or plain LAN
/// (no radio, one VLAN) that starts unimpaired has no TAP device until it needs the
/// engine.
pub fn files_needed(plan: &vemu_scenario::Plan, fast_path: bool) -> u64 {
    let members: usize = (0..plan.segments.len()).filter(|&g| !(fast_path && plan.kernel_lan(g) && plan.segments[g].unimpaired())).map(|g| plan.segments[g].members.len()).sum();
    let links = plan.links.iter().filter(|l| !(fast_path && l.unimpaired())).count();
    2 * links as u64 + members as u64 + plan.nodes.len() as u64 + CONTROLLER_FILES
}

/// Make sure this process may open `needed` files: raise the soft RLIMIT_NOFILE up to
/// the hard one if need be; fail at once, naming the limit, if even that is too low
/// (rather than failing at the 10,000th node and rolling back for minutes).
pub fn ensure_open_files(needed: u64) -> Result<()> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit fills the struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error()).context("reading RLIMIT_NOFILE");
    }
    if lim.rlim_cur >= needed {
        return Ok(());
    }
    if lim.rlim_max < needed {
        bail!(
            "this lab needs about {needed} open files (2 per impaired link, 1 per member of an impaired LAN, 1 per node, {CONTROLLER_FILES} for the controller) \
             but the hard limit on open files here is {} (RLIMIT_NOFILE): raise it (ulimit -Hn as root, LimitNOFILE= for a service, \
             /etc/security/limits.conf) or make the lab smaller",
            lim.rlim_max
        );
    }
    let raised = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
    // SAFETY: setrlimit with a valid struct (soft up to hard needs no privilege).
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        return Err(std::io::Error::last_os_error()).context("raising the soft RLIMIT_NOFILE to the hard one");
    }
    Ok(())
}

/// Prepare the lab's directories and its `/etc/hosts`. Fails if the lab exists.
pub fn prepare_lab(paths: &LabPaths, hosts: &str, nodes: &[NodePlan], storage_bytes: u64, confined: bool) -> Result<()> {
    raise_host_limits()?;
    make_shared_dir(NETNS_DIR)?;
    make_shared_dir(STATE_DIR)?;
    fs::create_dir(&paths.dir).with_context(|| format!("creating {}", paths.dir.display()))?;
    // Sized: a node that fills its /var/log fills the lab's allowance, not the machine's memory.
    let options = format!("mode=0755,size={storage_bytes}");
    mount(Some("vemu"), &paths.dir, Some("tmpfs"), MsFlags::MS_NOSUID | MsFlags::MS_NODEV, Some(options.as_str()))
        .with_context(|| format!("mounting a tmpfs on {}", paths.dir.display()))?;
    for d in ["uts", "netns", "mnt", "pid", "sys"] {
        fs::create_dir(paths.dir.join(d))?;
    }
    private_dir(&paths.dir.join("mnt"))?;
    fs::create_dir_all(paths.log_dir()).with_context(|| format!("creating {}", paths.log_dir().display()))?;
    fs::write(paths.hosts(), hosts)?;
    if confined {
        fs::write(paths.confined(), "")?;
    }
    for n in nodes {
        fs::create_dir_all(paths.node_dir(&n.name))?;
        if n.own_pids {
            fs::write(paths.pidns_wanted(&n.name), "")?;
        }
        let root = paths.node_fs(&n.name);
        for d in PRIVATE_OVERLAYS {
            fs::create_dir_all(root.join("upper").join(&d[1..]))?;
            fs::create_dir_all(root.join("work").join(&d[1..]))?;
        }
        fs::create_dir_all(root.join("run/lock"))?;
        for f in &n.files {
            write_node_file(&root, f).with_context(|| format!("writing {} of node {}", f.path, n.name))?;
        }
    }
    Ok(())
}

/// Directories every node sees through a copy-on-write overlay of its own: what a node
/// writes there stays in the node (and goes with the lab).
pub const PRIVATE_OVERLAYS: &[&str] = &["/etc", "/var/lib", "/var/log"];

/// Put a node's file where its private view will show it: in the upper layer of an
/// overlay, or in its `/run`. Directories on the way get the owner and mode of the
/// machine's own, so that daemons can use them as usual.
fn write_node_file(root: &Path, f: &vemu_scenario::FilePlan) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let rel = Path::new(&f.path).strip_prefix("/")?;
    let base = if rel.starts_with("run") { root.to_path_buf() } else { root.join("upper") };
    let mut host = PathBuf::from("/");
    let mut dir = base.clone();
    if let Some(parent) = rel.parent() {
        for c in parent.components() {
            host.push(c);
            dir.push(c);
            if !dir.exists() {
                fs::create_dir(&dir)?;
                if let Ok(m) = fs::metadata(&host) {
                    fs::set_permissions(&dir, fs::Permissions::from_mode(m.mode() & 0o7777))?;
                    nix::unistd::chown(&dir, Some(m.uid().into()), Some(m.gid().into()))?;
                }
            }
        }
    }
    let target = base.join(rel);
    fs::write(&target, &f.content)?;
    fs::set_permissions(&target, fs::Permissions::from_mode(f.mode))?;
    // Owned like the directory it is in (e.g. frr:frr in /etc/frr).
    if let Some(m) = target.parent().and_then(|p| fs::metadata(p).ok()) {
        nix::unistd::chown(&target, Some(m.uid().into()), Some(m.gid().into()))?;
    }
    Ok(())
}

/// Pin the calling thread's namespace `kind` ("net", "uts") at `target`.
fn pin_ns(kind: &str, target: &Path) -> Result<()> {
    pin(&format!("/proc/thread-self/ns/{kind}"), target).with_context(|| format!("pinning the {kind} namespace"))
}

/// Keep the namespace file `src` alive by bind-mounting it on a new file `target`.
fn pin(src: &str, target: &Path) -> Result<()> {
    fs::File::options()
        .write(true)
        .create_new(true)
        .open(target)
        .with_context(|| format!("creating {}", target.display()))?;
    if let Err(e) = mount(Some(src), target, None::<&str>, MsFlags::MS_BIND, None::<&str>) {
        let _ = fs::remove_file(target);
        return Err(e).with_context(|| format!("bind-mounting {src} on {}", target.display()));
    }
    Ok(())
}

fn write_sysctl(path: &str, value: &str) -> Result<()> {
    fs::write(path, value).with_context(|| format!("setting {path}"))
}

/// A mount namespace to copy the nodes' from: the machine's mounts, made private (so
/// that what is mounted later, such as pinned namespaces, does not propagate into
/// nodes), without `/run/netns` and without other labs' state, which would otherwise
/// keep their namespaces alive. Returns a descriptor of it.
pub fn mount_template(paths: &LabPaths) -> Result<OwnedFd> {
    let paths = paths.clone();
    std::thread::Builder::new()
        .name("mk-mnt".into())
        .spawn(move || -> Result<OwnedFd> {
            unshare(CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_FS).context("creating a mount namespace")?;
            mount(None::<&str>, "/", None::<&str>, MsFlags::MS_REC | MsFlags::MS_PRIVATE, None::<&str>)
                .context("making the nodes' mounts private")?;
            let _ = umount2(NETNS_DIR, MntFlags::MNT_DETACH);
            if let Ok(d) = fs::read_dir(STATE_DIR) {
                for e in d.flatten().filter(|e| e.path() != paths.dir) {
                    let _ = umount2(&e.path(), MntFlags::MNT_DETACH);
                }
            }
            Ok(fs::File::open("/proc/thread-self/ns/mnt").context("opening the template mount namespace")?.into())
        })?
        .join()
        .map_err(|_| anyhow!("the thread creating the nodes' mount namespace panicked"))?
}

/// The kernel's id of the mount namespace at `path` (`NS_GET_MNTNS_ID`, Linux 6.8), if
/// it tells.
fn mnt_ns_id(path: &str) -> Option<u64> {
    const NS_GET_MNTNS_ID: libc::c_ulong = 0x8008_b705;
    let f = fs::File::open(path).ok()?;
    let mut id: u64 = 0;
    // SAFETY: the ioctl writes one u64 through the pointer.
    (unsafe { libc::ioctl(f.as_raw_fd(), NS_GET_MNTNS_ID, &mut id) } == 0).then_some(id)
}

/// Move the calling thread (with a filesystem context of its own) into a new mount
/// namespace copied from `template`, whose id is above `above` (the namespace of the
/// process that will pin it). The kernel refuses to pin a mount namespace from one
/// that is not older ("a loop"), and it hands out ids in per-CPU batches
/// ([`MNT_NS_ID_BATCH`] at a time), so a new namespace can be "older" than its maker's:
/// seen whenever vemu itself runs in a mount namespace of its own (a container, an
/// agent), never from the machine's first one (id 1). The first tries make the namespace
/// on each CPU the thread may run on, one of which may be handing out the newest ids;
/// where none is (one CPU allowed, say a container's or `taskset`'s), the CPU's batch
/// is used up until the next one it takes is newer.
fn new_mount_ns_after(template: &OwnedFd, above: Option<u64>) -> Result<()> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it for this thread.
    let mut allowed: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let have = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut allowed) } == 0;
    // SAFETY: CPU_ISSET reads the set filled above.
    let cpus: Vec<usize> = if have { (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &allowed) }).collect() } else { Vec::new() };
    let tries = cpus.len().max(1) + 2 * MNT_NS_ID_BATCH;
    let mut result = Ok(());
    for attempt in 0..tries {
        nix::sched::setns(template, CloneFlags::CLONE_NEWNS).context("entering the template mount namespace")?;
        unshare(CloneFlags::CLONE_NEWNS).context("creating the node's mount namespace")?;
        let (Some(above), Some(id)) = (above, mnt_ns_id("/proc/thread-self/ns/mnt")) else { break };
        if id > above {
            break;
        }
        if attempt + 1 == tries {
            result = Err(anyhow!("could not make a mount namespace newer than vemu's own (id {above}; got {id} after {tries} tries)"));
            break;
        }
        if cpus.len() > 1 {
            // SAFETY: as above; a set with one of the allowed CPUs.
            let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            unsafe { libc::CPU_SET(cpus[attempt % cpus.len()], &mut one) };
            unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one) };
        }
    }
    if have && cpus.len() > 1 {
        // SAFETY: restoring the set read above.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &allowed) };
    }
    result
}

/// How many namespace ids a CPU takes at a time (the kernel's `COOKIE_LOCAL_BATCH`).
const MNT_NS_ID_BATCH: usize = 4096;

/// Give the calling thread (already in the node's network namespace) the node's own
/// mount namespace: a copy of `template` with copy-on-write overlays on
/// [`PRIVATE_OVERLAYS`], the lab's `/etc/hosts` and its own `/run` (its `/sys` comes
/// with its first process: [`node_sysfs`]).
fn enter_node_mounts(paths: &LabPaths, node: &str, template: &OwnedFd) -> Result<()> {
    unshare(CloneFlags::CLONE_FS).context("unsharing the filesystem context")?;
    new_mount_ns_after(template, mnt_ns_id("/proc/self/ns/mnt"))?;
    let root = paths.node_fs(node);
    let confined = paths.confined().exists();
    if confined {
        confine::read_only_view(&paths.dir)?;
    }
    for d in PRIVATE_OVERLAYS {
        if !Path::new(d).is_dir() {
            continue;
        }
        let opts = format!(
            "lowerdir={d},upperdir={},workdir={}",
            root.join("upper").join(&d[1..]).display(),
            root.join("work").join(&d[1..]).display()
        );
        mount(Some("vemu"), *d, Some("overlay"), MsFlags::empty(), Some(opts.as_str()))
            .with_context(|| format!("mounting the node's overlay on {d}"))?;
    }
    mount(Some(&paths.hosts()), "/etc/hosts", None::<&str>, MsFlags::MS_BIND, None::<&str>).context("binding /etc/hosts")?;
    if confined {
        confine::confine_mounts(&root).with_context(|| format!("confining node {node}'s mounts"))?;
    }
    mount(Some(&root.join("run")), "/run", None::<&str>, MsFlags::MS_BIND, None::<&str>).context("binding the node's /run")?;
    Ok(())
}

/// Mount the node's own `/sys` (its network namespace's interfaces) in its mount
/// namespace, the first time one of its processes starts: a node that runs nothing
/// costs no sysfs. (Each sysfs mount is looked up among all the machine's — one per
/// network namespace that has one — so mounting one for every node of a 10,000-node lab
/// cost a sixth of its `up`.) The marker's lock makes one process mount it while others
/// wait.
fn node_sysfs(paths: &LabPaths, node: &str, net: &OwnedFd, mnt: &OwnedFd) -> Result<()> {
    let marker = paths.sys_mounted(node);
    if marker.exists() {
        return Ok(());
    }
    let lock = fs::OpenOptions::new().create(true).append(true).open(marker.with_extension("lock")).with_context(|| format!("opening {}", marker.display()))?;
    // SAFETY: flock on a descriptor we own; released when it is closed.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(std::io::Error::last_os_error()).context("locking the node's /sys");
    }
    if marker.exists() {
        return Ok(());
    }
    // (Looked at here: the node's mounts show its own /run, not the lab's state.)
    let confined = paths.confined().exists();
    std::thread::scope(|s| {
        s.spawn(|| -> Result<()> {
            unshare(CloneFlags::CLONE_FS).context("unsharing the filesystem context")?;
            nix::sched::setns(net, CloneFlags::CLONE_NEWNET).context("entering the node")?;
            nix::sched::setns(mnt, CloneFlags::CLONE_NEWNS).context("entering the node's mounts")?;
            if umount2("/sys", MntFlags::MNT_DETACH).is_ok() {
                // A confined node's read-only.
                let ro = if confined { MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC | MsFlags::MS_NODEV } else { MsFlags::empty() };
                mount(Some("sysfs"), "/sys", Some("sysfs"), ro, None::<&str>).context("mounting the node's /sys")?;
            }
            Ok(())
        })
        .join()
        .map_err(|_| anyhow!("the thread mounting node {node}'s /sys panicked"))?
    })?;
    fs::write(&marker, "").with_context(|| format!("writing {}", marker.display()))
}

/// MTU of the plane's devices: the largest, so that the plane never drops a frame a
/// node sends (the link's own MTU is enforced by the engine, or by the far interface).
const PLANE_MTU: u32 = 65535;
/// The largest a TAP device takes (65535 less its Ethernet header).
const PLANE_TAP_MTU: u32 = 65535 - 14;

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
            write_sysctl("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1")
        })
        .join()
        .map_err(|_| anyhow!("the thread creating the plane namespace panicked"))?
    })
}

/// Run `f` on a thread of its own inside the network namespace pinned at `netns`
/// (entering a namespace is per thread; the caller's thread does not move). What `f`
/// opens there (sockets, TAP devices) stays there.
pub fn in_netns<T: Send>(netns: &Path, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    let ns = fs::File::open(netns).with_context(|| format!("opening {}", netns.display()))?;
    std::thread::scope(|s| {
        s.spawn(|| {
            nix::sched::setns(&ns, CloneFlags::CLONE_NEWNET).with_context(|| format!("entering {}", netns.display()))?;
            f()
        })
        .join()
        .map_err(|_| anyhow!("the thread entering {} panicked", netns.display()))?
    })
}

/// Device group of the engine's TAP devices in a lab's plane, deleted together when
/// the lab goes ([`remove_plane_taps`]).
const PLANE_TAP_GROUP: u32 = 0x7665;

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
                let fd = tap::create(tap).with_context(|| format!("making the engine's TAP device {tap} in the lab's plane"))?;
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
    in_plane(paths, "deleting the engine's devices in the plane", |nl| nl.del_group(PLANE_TAP_GROUP))
}

/// Send the netlink requests `f` queues in the lab's plane (`what` they do, for an
/// error); nothing to do for a lab without a plane.
fn in_plane(paths: &LabPaths, what: &str, f: impl FnOnce(&mut netlink::Netlink) -> Result<()> + Send) -> Result<()> {
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
const PLANE_BLOCK: u32 = 1;
const PLANE_EGRESS_BLOCK: u32 = 2;

/// Attach the fast path's TC programs to the lab's plane: `prog` to the shared block
/// every device's ingress joins, `egress` to the one of LAN ports' egress (the blocks
/// live on the plane's loopback, which carries nothing, so that they outlast every
/// other device).
pub fn plane_program(paths: &LabPaths, prog: BorrowedFd<'_>, egress: BorrowedFd<'_>) -> Result<()> {
    in_netns(&paths.plane(), || {
        let mut nl = netlink::Netlink::open()?;
        nl.add_clsact_blocks(tap::ifindex("lo")?, PLANE_BLOCK, PLANE_EGRESS_BLOCK)?;
        nl.add_block_bpf(PLANE_BLOCK, &prog, "vemu-steer")?;
        nl.add_block_bpf(PLANE_EGRESS_BLOCK, &egress, "vemu-leave")?;
        nl.flush().context("attaching the fast path's programs")
    })
}

/// The UDP port of a lab's VXLAN devices ([`plane_vxlan`]), the same on every machine of
/// the lab: from a hash of its name, in 14800 … 15799 (clear of the agents' 14790 and of
/// the ephemeral ports the engines' tunnel sockets take).
pub fn vxlan_port(lab: &str) -> u16 {
    let h = lab.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
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
    let plane = fs::File::open(paths.plane()).with_context(|| format!("opening {}", paths.plane().display()))?;
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
        nl.flush().with_context(|| format!("opening UDP port {port} for the lab's VXLAN device"))?;
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
pub fn plane_bridge(paths: &LabPaths, seg: usize, snooping: bool, querier: bool, ipv6: bool, aging_ns: u64) -> Result<u32> {
    let name = format!("b{seg}");
    in_netns(&paths.plane(), || {
        let mut nl = netlink::Netlink::open()?;
        // Hosts are asked to answer a query within 1 s (the kernel's default is 10 s).
        // The bridge was still seen flooding group data for ~10 s after `up`: why is
        // not known (docs/scenario.md says so).
        nl.add_bridge(&name, snooping, querier, (aging_ns / 10_000_000).clamp(1, u32::MAX as u64) as u32, 100)?;
        nl.flush().with_context(|| format!("making the bridge of LAN #{seg}"))?;
        if querier && ipv6 {
            write_sysctl(&format!("/proc/sys/net/ipv6/conf/{name}/accept_dad"), "0")?;
            write_sysctl(&format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6"), "0")?;
        }
        nl.index_of(&name)
    })
}

/// Held while a node's thread writes sysctls and configures its devices. Writing
/// `ip_forward` or an IPv6 `forwarding` needs the kernel's RTNL lock, which the kernel
/// only tries for, restarting the write while another thread holds it: with the
/// build threads all creating devices, those writes spun for seconds (a third of
/// the CPU time of a 1000-node `up`). Devices cannot be made in parallel anyway.
static NET_CONFIG: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Create one node: its namespaces, its interfaces (addressed, up), loopback addresses,
/// routes and private filesystem view. An interface whose `plane_peers` entry names a
/// peer is one end of a veth pair whose other end (with that name) is in the lab's
/// plane namespace; the others are TAP devices, whose descriptors are returned (in the
/// order of `node.ifaces`). Runs on a thread of its own, since entering a namespace is
/// per thread. (A node's PID namespace is made when its first process starts:
/// [`NodeEntry::open`].)
pub fn create_node(paths: &LabPaths, node: &NodePlan, template: &OwnedFd, plane_peers: &[Option<PlanePeer>]) -> Result<Vec<Option<OwnedFd>>> {
    let name = node.name.clone();
    let template = template.try_clone().context("duplicating the template descriptor")?;
    let plane = match plane_peers.iter().any(Option::is_some) {
        true => Some(fs::File::open(paths.plane()).with_context(|| format!("opening {}", paths.plane().display()))?),
        false => None,
    };
    let plane_peers = plane_peers.to_vec();
    let (tid_tx, tid_rx) = std::sync::mpsc::channel::<i32>();
    let (pinned_tx, pinned_rx) = std::sync::mpsc::channel::<Pinned>();
    let worker = {
        let paths = paths.clone();
        let node = node.clone();
        std::thread::Builder::new().name(format!("mk-{}", node.name)).spawn(move || -> Result<Vec<Option<OwnedFd>>> {
            // A socket in the plane for the far ends of the node's link interfaces,
            // opened from there before the thread leaves for the node's own namespace.
            let mut plane_nl = match &plane {
                Some(p) => {
                    nix::sched::setns(p, CloneFlags::CLONE_NEWNET).context("entering the lab's plane")?;
                    Some(netlink::Netlink::open()?)
                }
                None => None,
            };
            unshare(CloneFlags::CLONE_NEWNET | CloneFlags::CLONE_NEWUTS).context("creating namespaces")?;
            nix::unistd::sethostname(&node.name).context("setting the hostname")?;
            pin_ns("net", &paths.netns_pin(&node.name))?;
            std::os::unix::fs::symlink(paths.netns_pin(&node.name), paths.netns(&node.name))
                .with_context(|| format!("creating {}", paths.netns(&node.name).display()))?;
            pin_ns("uts", &paths.uts(&node.name))?;
            // A mount namespace cannot be pinned from inside itself: the caller does it,
            // and may ask for another one (see [`PIN_RETRIES`]).
            loop {
                enter_node_mounts(&paths, &node.name, &template)?;
                let _ = tid_tx.send(nix::unistd::gettid().as_raw());
                match pinned_rx.recv() {
                    Ok(Pinned::Done) => break,
                    Ok(Pinned::Again) => continue,
                    _ => bail!("the node's mount namespace could not be pinned"),
                }
            }
            // The sysctls through a procfs of the node's own, mounted for the while: in
            // the machine's /proc every namespace's /proc/sys/net/... entries are cached
            // side by side under one parent, and the kernel compares a name against all
            // of them on each lookup (a third of the CPU of a 10,000-node `up` went there).
            mount(Some("proc"), "/proc", Some("proc"), MsFlags::empty(), None::<&str>).context("mounting a procfs for the node's sysctls")?;
            let _gate = NET_CONFIG.lock().unwrap_or_else(|e| e.into_inner());
            write_sysctl("/proc/sys/net/ipv4/ip_forward", "1")?;
            write_sysctl("/proc/sys/net/ipv6/conf/all/forwarding", "1")?;
            write_sysctl("/proc/sys/net/ipv6/conf/default/forwarding", "1")?;
            // Addresses (link-local ones too) are usable at once: no duplicate address
            // detection delaying the first seconds of a lab.
            write_sysctl("/proc/sys/net/ipv6/conf/default/accept_dad", "0")?;
            write_sysctl("/proc/sys/net/ipv6/conf/all/accept_dad", "0")?;
            for (k, v) in &node.sysctls {
                write_sysctl(&format!("/proc/sys/{}", k.replace('.', "/")), v).with_context(|| format!("setting sysctl {k} = {v}"))?;
            }
            umount2("/proc", MntFlags::MNT_DETACH).context("unmounting the node's sysctl procfs")?;
            let mut nl = netlink::Netlink::open()?;
            let lo = tap::ifindex("lo")?;
            nl.set_link(lo, true, None, None)?;
            for a in &node.loopback {
                nl.add_address(lo, *a)?;
            }
            node_interfaces(&mut nl, &node, &plane_peers, plane_nl.as_mut(), false)
        })?
    };
    let mut attempt = 0;
    while let Ok(tid) = tid_rx.recv() {
        let r = pin(&format!("/proc/self/task/{tid}/ns/mnt"), &paths.mnt(&name));
        let einval = r.as_ref().err().and_then(|e| e.root_cause().downcast_ref::<nix::errno::Errno>()) == Some(&nix::errno::Errno::EINVAL);
        match r {
            Ok(()) => {
                let _ = pinned_tx.send(Pinned::Done);
                break;
            }
            Err(_) if einval && attempt < PIN_RETRIES => {
                attempt += 1;
                eprintln!("vemu: node {name}: the kernel refused to pin its mount namespace (EINVAL); making another (attempt {attempt})");
                std::thread::sleep(Duration::from_millis(25 << attempt));
                let _ = pinned_tx.send(Pinned::Again);
            }
            Err(e) => {
                let _ = pinned_tx.send(Pinned::Failed);
                return Err(e).with_context(|| format!("pinning the mount namespace of node {name} (tried {} times)", attempt + 1));
            }
        }
    }
    let fds = worker.join().map_err(|_| anyhow!("the thread creating node {name} panicked"))??;
    if !node.limits.is_none() {
        cgroup::set_limits(&paths.lab, &name, &node.limits)?;
    }
    Ok(fds)
}

/// Give the machine vemu runs on — a node of kind `host` — its interfaces to the lab,
/// their addresses, and routes to the lab's prefixes, in the calling process's network
/// namespace. Nothing else of the machine changes: no namespace, sysctl or loopback
/// address. What is made goes by itself when the lab goes: a TAP device with its
/// descriptor (held by the engine), a veth with its peer in the lab's plane namespace,
/// addresses and routes with their interface. An interface name the machine already
/// has is refused before anything is made.
pub fn create_host_node(paths: &LabPaths, node: &NodePlan, plane_peers: &[Option<PlanePeer>]) -> Result<Vec<Option<OwnedFd>>> {
    let plane = match plane_peers.iter().any(Option::is_some) {
        true => Some(fs::File::open(paths.plane()).with_context(|| format!("opening {}", paths.plane().display()))?),
        false => None,
    };
    for i in &node.ifaces {
        if tap::ifindex(&i.name).is_ok() {
            bail!("the machine has an interface named {} already (its own, or another lab's): name this one otherwise with 'iface:'", i.name);
        }
    }
    let _gate = NET_CONFIG.lock().unwrap_or_else(|e| e.into_inner());
    let mut nl = netlink::Netlink::open()?;
    let mut plane_nl = match &plane {
        Some(_) => Some(netlink::Netlink::open_in(&paths.plane())?),
        None => None,
    };
    let made = node_interfaces(&mut nl, node, plane_peers, plane_nl.as_mut(), true);
    // Whatever was made (none of these names was the machine's before), so that down
    // and clean delete exactly that.
    let names: Vec<&str> = node.ifaces.iter().map(|i| i.name.as_str()).collect();
    record_host_ifaces(paths, &names)?;
    made
}

/// A node of kind `external`: its one interface is a NIC of the machine (of the calling
/// process's network namespace), opened as a port of the lab (see [`nic`]). Nothing is
/// made; the descriptor goes with the engine.
pub fn create_external_node(node: &NodePlan) -> Result<Vec<Option<OwnedFd>>> {
    node.ifaces.iter().map(|i| nic::open(&i.name).map(Some)).collect()
}

/// Where a lab notes the interfaces it gave the machine ("NAME IFINDEX" lines), and the
/// network namespace they are in (the controller's, pinned: `vemu clean` may run in
/// another one).
fn host_ifaces_file(paths: &LabPaths) -> PathBuf {
    paths.dir.join("host-ifaces")
}
fn host_netns_pin(paths: &LabPaths) -> PathBuf {
    paths.dir.join("host-net")
}

/// Pin the calling thread's network namespace (the machine's) in the lab's state, once:
/// what a lab makes there is removed there by `down` and `clean`, wherever they run.
fn pin_host_netns(paths: &LabPaths) -> Result<()> {
    let pin_path = host_netns_pin(paths);
    if !pin_path.exists() {
        pin("/proc/thread-self/ns/net", &pin_path).context("pinning the machine's network namespace")?;
    }
    Ok(())
}

fn record_host_ifaces(paths: &LabPaths, names: &[&str]) -> Result<()> {
    pin_host_netns(paths)?;
    let lines: String = names.iter().filter_map(|n| tap::ifindex(n).ok().map(|ix| format!("{n} {ix}\n"))).collect();
    let mut f = fs::File::options().create(true).append(true).open(host_ifaces_file(paths)).context("noting the machine's interfaces")?;
    std::io::Write::write_all(&mut f, lines.as_bytes()).context("noting the machine's interfaces")
}

/// Delete the interfaces a lab gave the machine, in the namespace they were made in,
/// each only if its name still has the index noted (never one the machine made since).
/// They would go by themselves (a TAP with its descriptor, a veth with its peer's plane
/// namespace), but a namespace is destroyed some time after its last reference: this
/// way they are gone when `down` or `clean` returns.
fn remove_host_ifaces(paths: &LabPaths) -> Result<()> {
    let Ok(list) = fs::read_to_string(host_ifaces_file(paths)) else { return Ok(()) };
    let noted: Vec<(String, u32)> = list.lines().filter_map(|l| l.split_once(' ')).filter_map(|(n, ix)| Some((n.to_string(), ix.parse().ok()?))).collect();
    in_netns(&host_netns_pin(paths), move || {
        let mut nl = netlink::Netlink::open()?;
        for (name, ix) in &noted {
            if tap::ifindex(name).ok() == Some(*ix) {
                nl.del_link(*ix)?;
            }
        }
        nl.flush().context("deleting the machine's interfaces to the lab")
    })
}

/// What the thread making a node hears about its mount namespace.
enum Pinned {
    Done,
    /// Make another: the kernel refused to pin this one.
    Again,
    Failed,
}

/// How often a node's mount namespace is made again when the kernel refuses to pin it
/// (EINVAL), waiting 50 ms, 100 ms, ... in between (6.4 s in all). Seen for some seconds
/// after a machine's other mount namespaces went away in numbers (an agent's share of
/// a lab ending; the ids vemu compares were in order, so not the loop check): the labs
/// started then failed, one started 10 s later did not.
const PIN_RETRIES: u32 = 7;

/// Make a node's interfaces in the calling thread's network namespace (a veth whose peer
/// goes into the plane, or a TAP device whose descriptor is returned), with their MAC,
/// MTU and addresses, then its routes. On the `host`, each interface's IPv6 is turned
/// off on its own when the node's sysctls ask for it for all (the machine's defaults
/// are not vemu's to change).
fn node_interfaces(nl: &mut netlink::Netlink, node: &NodePlan, plane_peers: &[Option<PlanePeer>], mut plane: Option<&mut netlink::Netlink>, host: bool) -> Result<Vec<Option<OwnedFd>>> {
    let no_ipv6 = host && node.sysctls.iter().any(|(k, v)| k == "net.ipv6.conf.default.disable_ipv6" && v == "1");
    let mut fds = Vec::with_capacity(node.ifaces.len());
    let mut idx = Vec::with_capacity(node.ifaces.len());
    for (k, i) in node.ifaces.iter().enumerate() {
        match (plane_peers.get(k).and_then(Option::as_ref), plane.as_mut()) {
            (Some(peer), Some(pnl)) => {
                // Made from the plane, where its far end has the index chosen for it
                // (see [`PLANE_INDEX_BASE`]); the interface here takes the next free one.
                // The far end is up at once and on the fast path's block. (Left down, it
                // would wait in the kernel's queue of link events, which is walked whole
                // each time a device comes up: quadratic in big labs.)
                let here = fs::File::open("/proc/thread-self/ns/net").context("opening the node's network namespace")?;
                let v = peer.index;
                pnl.add_veth_at(&peer.name, v, PLANE_MTU, peer.bridge.is_none(), &i.name, i.mac, i.mtu, &here)?;
                pnl.flush().with_context(|| format!("creating interface {}", i.name))?;
                match peer.bridge {
                    // A LAN port: also a port of the LAN's bridge (which brings it up),
                    // with the egress block.
                    Some(br) => {
                        pnl.set_master(v, br)?;
                        pnl.add_clsact_blocks(v, PLANE_BLOCK, PLANE_EGRESS_BLOCK)?;
                    }
                    None => pnl.add_ingress(v, PLANE_BLOCK)?,
                }
                fds.push(None);
            }
            _ => fds.push(Some(tap::create(&i.name)?)),
        }
        let ix = tap::ifindex(&i.name)?;
        idx.push(ix);
        if no_ipv6 {
            write_sysctl(&format!("/proc/sys/net/ipv6/conf/{}/disable_ipv6", i.name), "1")?;
        }
        nl.set_link(ix, true, Some(i.mac), Some(i.mtu))?;
        for a in &i.addrs {
            nl.add_address(ix, *a)?;
        }
    }
    nl.flush().with_context(|| format!("configuring node {}", node.name))?;
    if let Some(pnl) = plane.as_mut() {
        pnl.flush().context("attaching the node's link interfaces to the plane")?;
    }
    for r in &node.routes {
        let oif = match &r.dev {
            Some(d) => Some(idx[node.ifaces.iter().position(|i| &i.name == d).ok_or_else(|| anyhow!("no interface {d}"))?]),
            None => None,
        };
        nl.add_route(r.dst, r.via, oif)?;
    }
    nl.flush().with_context(|| format!("adding routes of node {}", node.name))?;
    Ok(fds)
}

/// The PID namespace of a node that has PIDs of its own, made (with its first process)
/// the first time one of the node's processes starts, so that nodes that run nothing
/// cost nothing. `wanted` is the node's marker file, whose lock makes one process
/// (the controller, or a `vemu exec`) make it while others wait.
fn pid_namespace(paths: &LabPaths, node: &str, wanted: &fs::File, ns: [&OwnedFd; 3]) -> Result<OwnedFd> {
    let pin_path = paths.pidns(node);
    // Always under the lock: the pin is a file before it is a namespace (made, then
    // bind-mounted), and only its maker knows when it is both.
    // SAFETY: flock on a descriptor we own; released when it is closed.
    if unsafe { libc::flock(wanted.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(std::io::Error::last_os_error()).context("locking the node's PID namespace");
    }
    if let Ok(f) = fs::File::open(&pin_path) {
        return Ok(f.into());
    }
    let init = init_program()?;
    let confined = paths.confined().exists();
    let ns: Vec<OwnedFd> = ns.iter().map(|f| f.try_clone()).collect::<std::io::Result<_>>()?;
    let node_name = node.to_string();
    let pid = std::thread::scope(|s| {
        s.spawn(move || -> Result<u32> {
            unshare(CloneFlags::CLONE_FS).context("unsharing the filesystem context")?;
            for (fd, kind) in ns.iter().zip([CloneFlags::CLONE_NEWNET, CloneFlags::CLONE_NEWUTS, CloneFlags::CLONE_NEWNS]) {
                nix::sched::setns(fd, kind).context("entering the node")?;
            }
            start_init(&init, &node_name, confined)
        })
        .join()
        .map_err(|_| anyhow!("the thread starting node {node}'s init panicked"))?
    })?;
    pin(&format!("/proc/{pid}/ns/pid"), &pin_path).with_context(|| format!("pinning the PID namespace of node {node}"))?;
    Ok(fs::File::open(&pin_path)?.into())
}

/// From a thread inside the node's namespaces: make a PID namespace and start its first
/// process, `init NODE [--confined]`, which mounts the node's own `/proc` (for a
/// confined node, with `/proc/sys` read-only but for `net`) and says so.
/// Returns its PID (in the machine's PID namespace).
fn start_init(init: &Path, node: &str, confined: bool) -> Result<u32> {
    use std::io::Read;
    unshare(CloneFlags::CLONE_NEWPID).context("creating the node's PID namespace")?;
    let mut child = Command::new(init)
        .arg(node)
        .args(confined.then_some("--confined"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .with_context(|| format!("starting the node's init {}", init.display()))?;
    let mut said = String::new();
    let _ = child.stdout.take().map(|mut o| o.read_to_string(&mut said));
    if said.trim() != INIT_READY {
        let _ = child.kill();
        let _ = child.wait();
        bail!("the node's init ({}) failed: {}", init.display(), said.trim());
    }
    // Not waited for here: it lives as long as the node, and the controller (its
    // parent, a subreaper) reaps it when it ends.
    Ok(child.id())
}

/// The OOM score adjustment of the controller and the agents: least likely to be killed
/// when the machine runs out of memory (the nodes' programs, at 0, go first), but not
/// exempt (-1000). Their children in nodes are set back to 0 ([`NodeEntry::spawn`]).
pub const OOM_SCORE_ADJ: &str = "-900";

/// Make this process (a controller or an agent) an unlikely victim of the OOM killer.
pub fn avoid_oom_killer() {
    if let Err(e) = fs::write("/proc/self/oom_score_adj", OOM_SCORE_ADJ) {
        eprintln!("vemu: cannot lower this process's OOM score ({e}): the OOM killer may pick it before the nodes' programs");
    }
}

/// The nodes' init program, `vemu-init`, installed beside the running executable
/// (`cargo build` puts both in `target/…/`, `cargo install` both in `~/.cargo/bin`).
pub fn init_program() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("finding the running executable")?;
    let init = exe.with_file_name("vemu-init");
    if !init.is_file() {
        bail!("{} is missing: vemu-init (each node's first process) must be installed beside {}", init.display(), exe.display());
    }
    Ok(init)
}

/// What the init program prints once the node's `/proc` is mounted.
const INIT_READY: &str = "ready";

/// Everything a process needs to enter a node, opened before `fork` so that the child
/// only makes system calls.
pub struct NodeEntry {
    net: OwnedFd,
    uts: OwnedFd,
    mnt: OwnedFd,
    /// The node's PID namespace, when it has one.
    pid: Option<OwnedFd>,
    /// The node's `cgroup.procs` files (see [`cgroup`]).
    cgroups: Vec<OwnedFd>,
    /// A tenant's node: its processes lose capabilities and get a seccomp filter
    /// ([`confine`]).
    confined: Option<std::sync::Arc<confine::NodeFilter>>,
}

impl NodeEntry {
    pub fn open(paths: &LabPaths, node: &str) -> Result<NodeEntry> {
        let open = |p: PathBuf| -> Result<OwnedFd> {
            Ok(fs::File::open(&p).with_context(|| format!("node '{node}' of lab '{}' does not exist ({})", paths.lab, p.display()))?.into())
        };
        let (net, uts, mnt) = (open(paths.netns(node))?, open(paths.uts(node))?, open(paths.mnt(node))?);
        node_sysfs(paths, node, &net, &mnt)?;
        let pid = match fs::File::open(paths.pidns_wanted(node)) {
            Ok(wanted) => Some(pid_namespace(paths, node, &wanted, [&net, &uts, &mnt])?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).with_context(|| format!("opening {}", paths.pidns_wanted(node).display())),
        };
        let cgroups = cgroup::procs_files(&paths.lab, node)?;
        let confined = match paths.confined().exists() {
            true => Some(node_filter()?),
            false => None,
        };
        Ok(NodeEntry { net, uts, mnt, pid, cgroups, confined })
    }

    /// Start `cmd` inside the node, with `spawn` (e.g. `Command::spawn`): in its network,
    /// UTS and mount namespaces (where `/etc/hosts` is the lab's, `/sys` shows the node's
    /// interfaces, and `/etc`, `/var/lib`, `/var/log` and `/run` are the node's own) and
    /// in its PID namespace when it has one (then the command sees the node's
    /// processes only), and in the node's cgroups (its CPU, memory and process limits).
    /// The working directory stays the one `cmd` was given.
    pub fn spawn<T>(self, cmd: &mut Command, spawn: impl FnOnce(&mut Command) -> std::io::Result<T> + Send) -> std::io::Result<T>
    where
        T: Send,
    {
        let NodeEntry { net, uts, mnt, pid, cgroups, confined } = self;
        // SAFETY: the closure only makes async-signal-safe system calls on values prepared
        // before fork.
        unsafe {
            cmd.pre_exec(move || {
                let chk = |r: libc::c_int| if r < 0 { Err(std::io::Error::last_os_error()) } else { Ok(r) };
                // The controller and the agents keep clear of the OOM killer
                // ([`OOM_SCORE_ADJ`]); a node's programs are ordinary victims again.
                let adj = libc::open(c"/proc/self/oom_score_adj".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if adj >= 0 {
                    libc::write(adj, c"0".as_ptr().cast(), 1);
                    libc::close(adj);
                }
                for f in &cgroups {
                    // "0": the writing process itself.
                    chk(libc::write(f.as_raw_fd(), c"0".as_ptr().cast(), 1) as libc::c_int)?;
                }
                // A cgroup namespace rooted where it now is (the node's cgroups, where it
                // has any): a cgroup file system mounted in the node shows the node's own
                // subtree, and the process cannot move out of its limits.
                if !cgroups.is_empty() {
                    chk(libc::unshare(libc::CLONE_NEWCGROUP))?;
                }
                chk(libc::setns(net.as_raw_fd(), libc::CLONE_NEWNET))?;
                chk(libc::setns(uts.as_raw_fd(), libc::CLONE_NEWUTS))?;
                // Entering a mount namespace moves to its root: come back afterwards.
                let cwd = chk(libc::open(c".".as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC))?;
                chk(libc::setns(mnt.as_raw_fd(), libc::CLONE_NEWNS))?;
                chk(libc::fchdir(cwd))?;
                libc::close(cwd);
                if let Some(filter) = &confined {
                    confine::drop_capabilities()?;
                    filter.apply()?;
                }
                Ok(())
            });
        }
        let Some(pid) = pid else { return spawn(cmd) };
        // A PID namespace is entered by the children of whoever enters it, and there
        // is no way back: a thread of its own enters it and forks.
        std::thread::scope(|s| {
            s.spawn(move || {
                // SAFETY: setns on a descriptor we own; affects this thread's children only.
                if unsafe { libc::setns(pid.as_raw_fd(), libc::CLONE_NEWPID) } != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                spawn(cmd).map_err(|e| {
                    if e.raw_os_error() == Some(libc::ENOMEM) {
                        // fork(2) into a PID namespace whose first process is gone.
                        std::io::Error::other("the node's init process is gone (was it killed from outside?); restart the lab")
                    } else {
                        e
                    }
                })
            })
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the thread starting a process in the node panicked")))
        })
    }
}

/// The confined nodes' seccomp filter, compiled once a process.
fn node_filter() -> Result<std::sync::Arc<confine::NodeFilter>> {
    static FILTER: std::sync::OnceLock<std::sync::Arc<confine::NodeFilter>> = std::sync::OnceLock::new();
    if let Some(f) = FILTER.get() {
        return Ok(f.clone());
    }
    let f = std::sync::Arc::new(confine::NodeFilter::new()?);
    Ok(FILTER.get_or_init(|| f).clone())
}

/// Inode of a namespace file (what `/proc/PID/ns/net` of its members points to).
fn ns_inode(path: &Path) -> Option<u64> {
    fs::metadata(path).ok().map(|m| m.ino())
}

/// Every process whose network namespace is one of `inodes`.
fn processes_in(inodes: &HashSet<u64>) -> Vec<i32> {
    let me = std::process::id() as i32;
    let Ok(dir) = fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| ns_inode(Path::new(&format!("/proc/{pid}/ns/net"))).is_some_and(|i| inodes.contains(&i)))
        .collect()
}

/// Whether `pid` is the first process of a PID namespace below the machine's (a node's
/// init): its `NSpid` line ends in 1.
fn is_node_init(pid: i32) -> bool {
    let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) else { return false };
    status.lines().find_map(|l| l.strip_prefix("NSpid:")).is_some_and(|l| {
        let ids: Vec<&str> = l.split_whitespace().collect();
        ids.len() > 1 && ids.last() == Some(&"1")
    })
}

/// Stop every process in the given network namespaces: SIGTERM, then SIGKILL for those
/// still there after `grace`. The nodes' inits ignore SIGTERM and are not waited for;
/// they get SIGKILL at the end (which ends what is left of their node), unless
/// `keep_inits` (a node that stops but may start again keeps its PID namespace).
pub fn kill_processes(netns: &[PathBuf], grace: Duration, keep_inits: bool) {
    let inodes: HashSet<u64> = netns.iter().filter_map(|p| ns_inode(p)).collect();
    if inodes.is_empty() {
        return;
    }
    let others = || -> Vec<i32> { processes_in(&inodes).into_iter().filter(|&p| !is_node_init(p)).collect() };
    let signal = |pids: &[i32], sig| {
        for &pid in pids {
            // SAFETY: plain kill(2).
            unsafe { libc::kill(pid, sig) };
        }
    };
    let pids = others();
    signal(&pids, libc::SIGTERM);
    let deadline = Instant::now() + grace;
    let mut left = pids;
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        left = others();
    }
    let last = if keep_inits { others() } else { processes_in(&inodes) };
    if last.is_empty() {
        return;
    }
    signal(&last, libc::SIGKILL);
    let deadline = Instant::now() + Duration::from_secs(2);
    let remaining = || if keep_inits { others() } else { processes_in(&inodes) };
    while !remaining().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The name under which an agent keeps machine `machine`'s share of lab `lab` (its
/// directory, namespaces, cgroups and logs; its lock is [`LabLock`]'s of that name, held
/// by the agent while it holds the share). It can never be a lab's own name ('@' is not
/// allowed in one), so a lab's controller may run on a machine that also holds a share
/// of the lab.
pub fn share_name(lab: &str, machine: &str) -> String {
    format!("{lab}@{machine}")
}

/// The lab and the machine of a share's name ([`share_name`]); `None` for a lab's own.
pub fn share_of(name: &str) -> Option<(&str, &str)> {
    name.split_once('@')
}

/// Names of the labs (and the shares of labs, see [`share_name`]) that have anything in
/// the kernel or in the state directory.
pub fn labs_present() -> Vec<String> {
    let mut labs: Vec<String> = Vec::new();
    if let Ok(d) = fs::read_dir(NETNS_DIR) {
        for e in d.flatten() {
            if let Some(rest) = e.file_name().to_str().and_then(|n| n.strip_prefix(NETNS_PREFIX)) {
                if let Some((lab, _)) = rest.split_once('.') {
                    labs.push(lab.to_string());
                }
            }
        }
    }
    if let Ok(d) = fs::read_dir(STATE_DIR) {
        labs.extend(d.flatten().filter(|e| e.path().is_dir()).filter_map(|e| e.file_name().to_str().map(String::from)));
    }
    labs.sort();
    labs.dedup();
    labs
}

/// A packet socket in the lab's plane that sends frames on its devices and receives
/// none (protocol 0): the engine's input probes go out on its TAP devices with it.
pub fn plane_packet_socket(paths: &LabPaths) -> Result<OwnedFd> {
    in_netns(&paths.plane(), || {
        // SAFETY: plain socket(2); the descriptor is owned at once.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error()).context("opening a packet socket in the plane");
        }
        // SAFETY: a new descriptor nothing else owns.
        Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
    })
}

/// Network namespaces of a lab, by what is in /run/netns.
pub fn lab_netns(lab: &str) -> Vec<PathBuf> {
    let prefix = LabPaths::new(lab).netns_name("");
    let Ok(d) = fs::read_dir(NETNS_DIR) else { return Vec::new() };
    d.flatten().filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with(&prefix))).map(|e| e.path()).collect()
}

/// Remove everything a lab left: its processes, namespaces and state directory. The
/// TAP devices go with the namespaces (and with the engine that holds them).
pub fn remove_lab(lab: &str) -> Result<()> {
    let paths = LabPaths::new(lab);
    let links = lab_netns(lab);
    let mut pins: Vec<PathBuf> = links.clone();
    if let Ok(d) = fs::read_dir(paths.dir.join("netns")) {
        pins.extend(d.flatten().map(|e| e.path()));
    }
    kill_processes(&pins, Duration::from_millis(500), false);
    let mut errors = Vec::new();
    if let Err(e) = remove_host_ifaces(&paths) {
        errors.push(format!("{e:#}"));
    }
    if let Err(e) = divert::remove(&paths, &host_netns_pin(&paths)) {
        errors.push(format!("{e:#}"));
    }
    if let Err(e) = cgroup::remove_lab(lab) {
        errors.push(format!("{e:#}"));
    }
    for l in &links {
        if let Err(e) = fs::remove_file(l) {
            if e.kind() != std::io::ErrorKind::NotFound {
                errors.push(format!("removing {}: {e}", l.display()));
            }
        }
    }
    if paths.dir.exists() {
        // One lazy unmount takes the lab's tmpfs and every namespace pinned on it.
        let _ = umount2(&paths.dir, MntFlags::MNT_DETACH);
        if let Err(e) = fs::remove_dir_all(&paths.dir) {
            errors.push(format!("removing {}: {e}", paths.dir.display()));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        bail!(errors.join("; "))
    }
}

/// An exclusive hold on a lab's name (`flock` on `/run/vemu/LAB.lock`), taken by `vemu up`
/// before anything is built and held by the lab's controller for its whole life: a
/// second `up` of the same name fails at once, and `clean` can tell a lab being built
/// (lock held by a live process) from one a crash left behind. The lock goes with the
/// last descriptor of it, so it cannot outlive a killed controller. Its owner removes the
/// file when done ([`LabLock::release`]); whoever locks it checks that the path still
/// names the file it locked, so two processes never hold two files of one name.
#[derive(Debug)]
pub struct LabLock {
    file: fs::File,
    path: PathBuf,
}

impl LabLock {
    pub fn path(lab: &str) -> PathBuf {
        Path::new(STATE_DIR).join(format!("{lab}.lock"))
    }

    /// The lock, or `None` when another process holds it.
    pub fn try_acquire(lab: &str) -> Result<Option<LabLock>> {
        fs::create_dir_all(STATE_DIR).with_context(|| format!("creating {STATE_DIR}"))?;
        let path = LabLock::path(lab);
        loop {
            let f = fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).mode(0o600).open(&path).with_context(|| format!("opening {}", path.display()))?;
            // SAFETY: flock on a descriptor we own.
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::WouldBlock {
                    return Ok(None);
                }
                return Err(e).with_context(|| format!("locking {}", path.display()));
            }
            // The owner before us may have removed the file between our open and our
            // lock: then we hold a file nobody else can find, so try again.
            let l = LabLock { file: f, path: path.clone() };
            if l.is_at_its_path() {
                return Ok(Some(l));
            }
        }
    }

    /// The lock, waiting up to `wait` for a holder that only looks (see [`LabLock::held`]);
    /// `None` when another process still holds it.
    pub fn acquire_within(lab: &str, wait: Duration) -> Result<Option<LabLock>> {
        let until = Instant::now() + wait;
        loop {
            match LabLock::try_acquire(lab)? {
                None if Instant::now() < until => std::thread::sleep(Duration::from_millis(10)),
                r => return Ok(r),
            }
        }
    }

    /// Whether the lock file's path still names the file this lock holds.
    fn is_at_its_path(&self) -> bool {
        let ours = self.file.metadata().map(|m| m.ino()).ok();
        fs::metadata(&self.path).map(|m| m.ino()).ok() == ours
    }

    /// Whether a live process holds lab `lab`'s name. Looking takes the lock for an
    /// instant (and leaves the file): an `up` at that instant waits ([`LabLock::acquire_within`]).
    pub fn held(lab: &str) -> bool {
        LabLock::path(lab).exists() && matches!(LabLock::try_acquire(lab), Ok(None))
    }

    /// Give the name up for good: remove the file, then the lock.
    pub fn release(self) {
        // Only the file we hold (never one a later owner created).
        if self.is_at_its_path() {
            let _ = fs::remove_file(&self.path);
        }
    }

    /// The descriptor number to hand to a child process, which inherits the lock.
    pub fn inheritable_fd(&self) -> Result<i32> {
        let fd = self.file.as_raw_fd();
        // SAFETY: fcntl on a descriptor we own; clearing FD_CLOEXEC.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } != 0 {
            return Err(std::io::Error::last_os_error()).context("handing the lab lock on");
        }
        Ok(fd)
    }

    /// Adopt lab `lab`'s lock, inherited from the parent process as descriptor `fd`.
    ///
    /// # Safety
    /// `fd` must be an open descriptor of the lab's lock file that nothing else owns.
    pub unsafe fn from_fd(fd: i32, lab: &str) -> LabLock {
        // SAFETY: the caller promises an owned, open descriptor.
        let f = unsafe { <fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        // SAFETY: fcntl on that descriptor; it is closed again on exec.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        LabLock { file: f, path: LabLock::path(lab) }
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    /// A thread that may run on one CPU only still gets a mount namespace newer than a
    /// given id: it uses its CPU's ids up until they pass it (run as root; Linux 6.8+).
    #[test]
    fn a_newer_mount_namespace_is_made_on_one_cpu() {
        std::thread::spawn(|| {
            unshare(CloneFlags::CLONE_FS).unwrap();
            // SAFETY: cpu_set_t is plain data; one CPU, the one this thread runs on.
            let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            unsafe { libc::CPU_SET(libc::sched_getcpu().max(0) as usize, &mut one) };
            assert_eq!(unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one) }, 0);
            let template: OwnedFd = fs::File::open("/proc/self/ns/mnt").unwrap().into();
            unshare(CloneFlags::CLONE_NEWNS).unwrap();
            let Some(now) = mnt_ns_id("/proc/thread-self/ns/mnt") else { return }; // (an older kernel)
            // Ten ids ahead: ten namespaces or more on this CPU.
            new_mount_ns_after(&template, Some(now + 10)).unwrap();
            assert!(mnt_ns_id("/proc/thread-self/ns/mnt").unwrap() > now + 10);
        })
        .join()
        .unwrap();
    }
}
