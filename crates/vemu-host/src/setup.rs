//! Making a lab's state: its tmpfs, directories, `/etc/hosts`, the nodes' private
//! files, the machine's limits labs outgrow (open files, neighbour tables), and writing
//! sysctls one thread at a time.

use super::*;

/// Make `dir` a shared mount point, as iproute2 does for /run/netns, so that namespace
/// mounts made later propagate into (and their removal out of) other mount namespaces.
pub(crate) fn make_shared_dir(dir: &str) -> Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("creating {dir}"))?;
    for _ in 0..2 {
        match mount(
            None::<&str>,
            dir,
            Some("none"),
            MsFlags::MS_SHARED | MsFlags::MS_REC,
            None::<&str>,
        ) {
            Ok(()) => return Ok(()),
            Err(nix::errno::Errno::EINVAL) => {
                mount(
                    Some(dir),
                    dir,
                    Some("none"),
                    MsFlags::MS_BIND | MsFlags::MS_REC,
                    None::<&str>,
                )
                .with_context(|| format!("bind-mounting {dir} onto itself"))?;
            }
            Err(e) => return Err(e).with_context(|| format!("making {dir} a shared mount")),
        }
    }
    bail!("could not make {dir} a shared mount")
}

/// Make [`NETNS_DIR`] ready for a lab's names of its namespaces (one symlink each, for
/// `ip netns`): a shared mount point ([`make_shared_dir`]), on a tmpfs. On a machine
/// whose `/run` is a disk's filesystem rather than the usual tmpfs, each symlink there
/// allocates an inode: 10,000 of them took 1.5 s of CPU on ext4 against 0.02 s on a
/// tmpfs (a tenth of a 10,000-node `up`). So where the directory is not on a tmpfs and
/// holds nothing (nobody's name would be hidden), a tmpfs is mounted
/// there first. It stays, as iproute2's mount of the directory onto itself does:
/// namespaces named later, by anyone, are named on it as they would be on such a
/// machine's `/run`.
pub(crate) fn prepare_netns_dir() -> Result<()> {
    fs::create_dir_all(NETNS_DIR).with_context(|| format!("creating {NETNS_DIR}"))?;
    fs::create_dir_all(STATE_DIR).with_context(|| format!("creating {STATE_DIR}"))?;
    // (Two labs coming up at once: one mount, and no name made under a later one. The
    // lock is on vemu's state directory itself, so that it leaves no file behind.)
    let state = fs::File::open(STATE_DIR).with_context(|| format!("opening {STATE_DIR}"))?;
    crate::lock::wait_for_lock(&state).with_context(|| format!("locking {STATE_DIR}"))?;
    let kind = nix::sys::statfs::statfs(NETNS_DIR)
        .with_context(|| format!("asking what filesystem {NETNS_DIR} is on"))?
        .filesystem_type();
    let in_memory = kind == nix::sys::statfs::TMPFS_MAGIC;
    let empty =
        fs::read_dir(NETNS_DIR).with_context(|| format!("reading {NETNS_DIR}"))?.next().is_none();
    if !in_memory && empty {
        mount(
            Some("vemu-netns"),
            NETNS_DIR,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            Some("mode=0755"),
        )
        .with_context(|| format!("mounting a tmpfs on {NETNS_DIR}"))?;
    }
    make_shared_dir(NETNS_DIR)
}

/// Make `dir` a mount point of its own that propagates nothing. The nodes' mount
/// namespaces are pinned there, and the kernel refuses to copy a mount namespace file
/// into another mount namespace (EINVAL): under the lab's shared tmpfs, a pin would be
/// propagated into every mount namespace holding a copy of it — the one of a process
/// started with `ip netns exec` (its mounts are slaves of the machine's), or ones still
/// going away — and each such copy made pinning, and so `up`, fail.
pub(crate) fn private_dir(dir: &Path) -> Result<()> {
    mount(Some(dir), dir, None::<&str>, MsFlags::MS_BIND, None::<&str>)
        .with_context(|| format!("bind-mounting {} onto itself", dir.display()))?;
    mount(None::<&str>, dir, None::<&str>, MsFlags::MS_PRIVATE, None::<&str>)
        .with_context(|| format!("making {} a private mount", dir.display()))
}

/// Kernel limits a lab needs, as (sysctl, least value). The neighbour (ARP and NDP)
/// tables are shared by every network namespace of the machine, and their default hard
/// limit (1024 entries) is reached by one LAN of 33 hosts that all talk to each other:
/// beyond it, sends fail with ENOBUFS.
pub(crate) const HOST_LIMITS: &[(&str, u64)] = &[
    ("/proc/sys/net/ipv4/neigh/default/gc_thresh1", 4096),
    ("/proc/sys/net/ipv4/neigh/default/gc_thresh2", 262144),
    ("/proc/sys/net/ipv4/neigh/default/gc_thresh3", 1048576),
    ("/proc/sys/net/ipv6/neigh/default/gc_thresh1", 4096),
    ("/proc/sys/net/ipv6/neigh/default/gc_thresh2", 262144),
    ("/proc/sys/net/ipv6/neigh/default/gc_thresh3", 1048576),
];

/// Raise the machine's kernel limits that labs outgrow (never lowers one). These are
/// tuning values, not lab objects, so they stay after the lab (as with Mininet).
pub(crate) fn raise_host_limits() -> Result<()> {
    for (path, least) in HOST_LIMITS {
        // Only the machine's first network namespace has them (an agent may run in
        // another: the limits are the machine's, raised from there).
        if !Path::new(path).exists() {
            continue;
        }
        let now: u64 = fs::read_to_string(path)
            .with_context(|| format!("reading {path}"))?
            .trim()
            .parse()
            .unwrap_or(0);
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
    let members: usize = (0..plan.segments.len())
        .filter(|&g| !(fast_path && plan.kernel_lan(g) && plan.segment_unimpaired(g)))
        .map(|g| plan.segments[g].members.len())
        .sum();
    let links = (0..plan.links.len()).filter(|&l| !(fast_path && plan.link_unimpaired(l))).count();
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
        return Err(std::io::Error::last_os_error())
            .context("raising the soft RLIMIT_NOFILE to the hard one");
    }
    Ok(())
}

/// Prepare the lab's directories and its `/etc/hosts`. Fails if the lab exists.
pub fn prepare_lab(
    paths: &LabPaths,
    hosts: &str,
    nodes: &[NodePlan],
    storage_bytes: u64,
    confined: bool,
) -> Result<()> {
    raise_host_limits()?;
    prepare_netns_dir()?;
    make_shared_dir(STATE_DIR)?;
    fs::create_dir(&paths.dir).with_context(|| format!("creating {}", paths.dir.display()))?;
    // Sized: a node that fills its /var/log fills the lab's allowance, not the machine's memory.
    let options = format!("mode=0755,size={storage_bytes}");
    mount(
        Some("vemu"),
        &paths.dir,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(options.as_str()),
    )
    .with_context(|| format!("mounting a tmpfs on {}", paths.dir.display()))?;
    for d in ["uts", "netns", "mnt", "pid", "sys"] {
        fs::create_dir(paths.dir.join(d))?;
    }
    private_dir(&paths.dir.join("mnt"))?;
    fs::create_dir_all(paths.log_dir())
        .with_context(|| format!("creating {}", paths.log_dir().display()))?;
    fs::write(paths.hosts(), hosts)?;
    if confined {
        fs::write(paths.confined(), "")?;
    }
    for n in nodes {
        fs::create_dir_all(paths.node_dir(&n.name))?;
        if n.own_pids {
            fs::write(paths.pidns_wanted(&n.name), "")?;
        }
        // A node of an image writes over the whole image (`image/upper`); the others
        // over some of the machine's directories, made now only for a node given files
        // (for the others, when their mounts are: [`node_fs_dirs`]).
        let root = paths.node_fs(&n.name);
        let upper = match n.image.is_some() {
            true => {
                for d in ["image/upper", "image/work", "root", "run/lock"] {
                    fs::create_dir_all(root.join(d))?;
                }
                root.join("image/upper")
            }
            false if n.files.is_empty() => continue,
            false => {
                node_fs_dirs(&root)?;
                root.join("upper")
            }
        };
        for f in &n.files {
            write_node_file(&root, &upper, f)
                .with_context(|| format!("writing {} of node {}", f.path, n.name))?;
        }
    }
    Ok(())
}

/// The directories of a node's own files, `root` ([`LabPaths::node_fs`]), its mounts
/// need: the upper and work directories of its overlays on [`PRIVATE_OVERLAYS`] and its
/// `/run`. Made as the lab comes up for a node given files, and for the others when
/// their mounts are (`mounts::node_mounts`): 11 directories a node took 0.3 s of a
/// 10,000-node lab's `up`.
pub(crate) fn node_fs_dirs(root: &Path) -> Result<()> {
    for d in PRIVATE_OVERLAYS {
        for side in ["upper", "work"] {
            let dir = root.join(side).join(&d[1..]);
            fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        }
    }
    let run = root.join("run/lock");
    fs::create_dir_all(&run).with_context(|| format!("creating {}", run.display()))
}

/// Directories every node sees through a copy-on-write overlay of its own: what a node
/// writes there stays in the node (and goes with the lab).
pub const PRIVATE_OVERLAYS: &[&str] = &["/etc", "/var/lib", "/var/log"];

/// Put a node's file where its private view will show it: in the upper layer of an
/// overlay (`upper`), or in its `/run`. Directories on the way get the owner and mode of
/// the machine's own, so that daemons can use them as usual.
pub(crate) fn write_node_file(
    root: &Path,
    upper: &Path,
    f: &vemu_scenario::FilePlan,
) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let rel = Path::new(&f.path).strip_prefix("/")?;
    let base = if rel.starts_with("run") { root.to_path_buf() } else { upper.to_path_buf() };
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

pub(crate) fn write_sysctl(path: &str, value: &str) -> Result<()> {
    fs::write(path, value).with_context(|| format!("setting {path}"))
}

/// A procfs of the calling thread's own, mounted nowhere (`fsopen`, `fsmount`), for its
/// network namespace's sysctls: in the machine's `/proc` every namespace's
/// `/proc/sys/net/...` entries are cached side by side under one parent, and the kernel
/// compares a name against all of them on each lookup (a third of the CPU of a
/// 10,000-node `up` went there); and it needs no mount namespace to be mounted in.
pub(crate) struct OwnProc(OwnedFd);

impl OwnProc {
    pub(crate) fn new() -> Result<OwnProc> {
        const FSOPEN_CLOEXEC: libc::c_uint = 1;
        const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
        const FSMOUNT_CLOEXEC: libc::c_uint = 1;
        // SAFETY: fsopen with a NUL-terminated name.
        let fs =
            new_fd(unsafe { libc::syscall(libc::SYS_fsopen, c"proc".as_ptr(), FSOPEN_CLOEXEC) })
                .context("opening a procfs (fsopen)")?;
        let null = std::ptr::null::<libc::c_char>();
        // SAFETY: fsconfig's create command takes no key or value.
        if unsafe {
            libc::syscall(libc::SYS_fsconfig, fs.as_raw_fd(), FSCONFIG_CMD_CREATE, null, null, 0)
        } < 0
        {
            return Err(std::io::Error::last_os_error()).context("making a procfs (fsconfig)");
        }
        // SAFETY: fsmount of our descriptor.
        let mnt =
            new_fd(unsafe { libc::syscall(libc::SYS_fsmount, fs.as_raw_fd(), FSMOUNT_CLOEXEC, 0) })
                .context("mounting a procfs (fsmount)")?;
        Ok(OwnProc(mnt))
    }

    /// Its `sys` directory, as a path.
    pub(crate) fn sys_root(&self) -> String {
        format!("/proc/self/fd/{}/sys", self.0.as_raw_fd())
    }

    /// The path of sysctl `key` (`net/ipv4/ip_forward`).
    pub(crate) fn sys(&self, key: &str) -> String {
        format!("{}/{key}", self.sys_root())
    }
}

/// The descriptor a system call returned (`ret`, -1 on failure, then `errno`), now ours.
pub(crate) fn new_fd(ret: libc::c_long) -> std::io::Result<OwnedFd> {
    match i32::try_from(ret) {
        // SAFETY: the call made this descriptor, and nothing else owns it.
        Ok(fd) if fd >= 0 => Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) }),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Frames bridged in the calling thread's network namespace pass no iptables,
/// ip6tables or arptables hooks: a bridge of vemu's is a switch, whether the machine
/// has `br_netfilter` loaded (by other software: Docker, Kubernetes) or not — with it,
/// each new namespace would send bridged frames through its netfilter hooks (a tenth
/// of Mininet's linear10 TCP throughput went there). Nothing to do without it.
/// `sys`: where the calling thread's `/proc/sys` is (see [`OwnProc`]).
pub(crate) fn bridges_without_netfilter(sys: &str) -> Result<()> {
    for t in ["iptables", "ip6tables", "arptables"] {
        let path = format!("{sys}/net/bridge/bridge-nf-call-{t}");
        if Path::new(&path).exists() {
            write_sysctl(&path, "0")?;
        }
    }
    Ok(())
}

/// Held while a node's thread writes sysctls and configures its devices. Writing
/// `ip_forward` or an IPv6 `forwarding` needs the kernel's RTNL lock, which the kernel
/// only tries for, restarting the write while another thread holds it: with the
/// build threads all creating devices, those writes spun for seconds (a third of
/// the CPU time of a 1000-node `up`). Devices cannot be made in parallel anyway.
pub(crate) static NET_CONFIG: std::sync::Mutex<()> = std::sync::Mutex::new(());
