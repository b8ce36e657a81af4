//! Confined nodes: those of a tenant's lab (`vemu up --tenant`, every Kubernetes
//! VemuLab). Their processes keep what network software needs (their own network
//! namespace to administer, raw sockets, low ports, changing users) and lose what would
//! reach the machine:
//!
//! - **files**: a root of their own — an image's, or ([`crate::tenant_root`]) the
//!   machine's programs and libraries read-only with what anyone may read of its `/etc`
//!   and `/var`'s directories, nothing of `/root`, `/home` or its other directories;
//!   without set-user-ID or devices ([`confine_image_root`]); the node writes only its own
//!   overlays, its `/run`, `/tmp` and `/var/tmp` (in the lab's sized storage); vemu's
//!   logs and secrets the machine names ([`hide_in_confined_nodes`]: the agent's token)
//!   are not copied and covered by empty ones;
//! - **devices**: a `/dev` of their own with `null`, `zero`, `full`, `random`,
//!   `urandom`, `tty`, `net/tun`, a private `pts` and `shm`; every other mount they see
//!   without devices, and their cgroup lets them open only those ([`crate::devices`]);
//! - **kernel settings**: `/proc/sys` read-only but for the node's own `net.*`, `/sys`
//!   read-only, `/proc/sysrq-trigger` read-only;
//! - **capabilities** ([`drop_capabilities`], at every start of a process in the node):
//!   no module loading, raw I/O, ptrace, real-time scheduling, clock, `mknod`, BPF, or
//!   `open_by_handle_at` (`CAP_DAC_READ_SEARCH`). `CAP_SYS_ADMIN` stays (FRR's daemons
//!   refuse to start without it), its dangerous uses denied by a seccomp filter
//!   ([`NodeFilter`]): mounting and unmounting (nothing above can be undone), entering or
//!   making namespaces, BPF, perf events, kernel keys, swap, quotas, modules, kexec,
//!   file handles, the kernel log, clocks, reboot.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result};
use nix::mount::{mount, MsFlags};

/// The capabilities a confined node's processes keep (the container runtimes' default
/// set without `CAP_MKNOD`, plus what routing software uses: administering its own
/// network namespace, broadcasting, locking memory).
pub const KEPT_CAPABILITIES: &[u32] = &[
    0,  // CAP_CHOWN
    1,  // CAP_DAC_OVERRIDE
    3,  // CAP_FOWNER
    4,  // CAP_FSETID
    5,  // CAP_KILL (its own PID namespace's processes)
    6,  // CAP_SETGID
    7,  // CAP_SETUID
    8,  // CAP_SETPCAP
    10, // CAP_NET_BIND_SERVICE
    11, // CAP_NET_BROADCAST
    12, // CAP_NET_ADMIN (its own network namespace)
    13, // CAP_NET_RAW
    14, // CAP_IPC_LOCK
    18, // CAP_SYS_CHROOT
    21, // CAP_SYS_ADMIN (FRR insists; what it allows that reaches further is filtered)
    29, // CAP_AUDIT_WRITE
    31, // CAP_SETFCAP
];

/// Drop every capability but [`KEPT_CAPABILITIES`] from the calling process: from its
/// bounding set (so that no program it runs, set-user-ID or not, gets one back), its
/// ambient, inheritable, permitted and effective sets. Async-signal-safe (system calls
/// only): for `pre_exec`, after the process has entered the node's namespaces.
pub fn drop_capabilities() -> std::io::Result<()> {
    let kept = KEPT_CAPABILITIES.iter().fold(0u64, |m, &c| m | (1 << c));
    // SAFETY: prctl and capget/capset with valid pointers to local values.
    unsafe {
        libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
        for cap in 0..64u32 {
            if kept & (1 << cap) == 0
                && libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0
            {
                // EINVAL: beyond the kernel's last capability.
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINVAL) {
                    return Err(e);
                }
            }
        }
        #[repr(C)]
        struct Header {
            version: u32,
            pid: libc::c_int,
        }
        #[repr(C)]
        #[derive(Clone, Copy)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        let mut header = Header { version: 0x2008_0522, pid: 0 }; // _LINUX_CAPABILITY_VERSION_3
        let mut data = [Data { effective: 0, permitted: 0, inheritable: 0 }; 2];
        if libc::syscall(libc::SYS_capget, &mut header as *mut Header, data.as_mut_ptr()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        for (i, d) in data.iter_mut().enumerate() {
            let k = (kept >> (32 * i)) as u32;
            d.effective &= k;
            d.permitted &= k;
            d.inheritable &= k;
        }
        if libc::syscall(libc::SYS_capset, &mut header as *mut Header, data.as_ptr()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The seccomp filters of a confined node's processes: every system call that
/// `CAP_SYS_ADMIN` would let reach beyond the node fails with EPERM; `clone3` with ENOSYS
/// (its flags are in memory a filter cannot read: the C library falls back to `clone`,
/// whose namespace flags are filtered).
pub struct NodeFilter {
    deny: seccompiler::BpfProgram,
    no_clone3: seccompiler::BpfProgram,
}

/// Namespace flags of `clone` and `unshare` a confined node may not use.
const NEW_NAMESPACES: [u64; 8] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWCGROUP as u64,
    0x80, // CLONE_NEWTIME
];

/// System calls a confined node may not make at all.
const DENIED: &[libc::c_long] = &[
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_mount_setattr,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_setns,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_fanotify_init,
    libc::SYS_add_key,
    libc::SYS_keyctl,
    libc::SYS_request_key,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_quotactl,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_syslog,
    libc::SYS_acct,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_reboot,
    libc::SYS_vhangup,
    libc::SYS_userfaultfd,
];

impl NodeFilter {
    /// The filters, compiled for this machine's architecture.
    pub fn new() -> Result<NodeFilter> {
        use seccompiler::{
            SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
            SeccompRule,
        };
        use std::collections::BTreeMap;
        let arch: seccompiler::TargetArch = std::env::consts::ARCH
            .try_into()
            .map_err(|e| anyhow::anyhow!("seccomp on {}: {e}", std::env::consts::ARCH))?;
        let flag_rules = || -> Result<Vec<SeccompRule>> {
            NEW_NAMESPACES
                .iter()
                .map(|&f| {
                    Ok(SeccompRule::new(vec![SeccompCondition::new(
                        0,
                        SeccompCmpArgLen::Qword,
                        SeccompCmpOp::MaskedEq(f),
                        f,
                    )?])?)
                })
                .collect()
        };
        let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
            DENIED.iter().map(|&s| (s, Vec::new())).collect();
        rules.insert(libc::SYS_clone, flag_rules()?);
        rules.insert(libc::SYS_unshare, flag_rules()?);
        let deny = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM as u32),
            arch,
        )?
        .try_into()?;
        let clone3 = BTreeMap::from([(libc::SYS_clone3, Vec::new())]);
        let no_clone3 = SeccompFilter::new(
            clone3,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::ENOSYS as u32),
            arch,
        )?
        .try_into()?;
        Ok(NodeFilter { deny, no_clone3 })
    }

    /// Install the filters on the calling process (and, for good, on everything it
    /// runs). Async-signal-safe: for `pre_exec`, after [`drop_capabilities`].
    pub fn apply(&self) -> std::io::Result<()> {
        for f in [&self.deny, &self.no_clone3] {
            seccompiler::apply_filter(f).map_err(|e| {
                std::io::Error::other(format!("installing the node's seccomp filter: {e}"))
            })?;
        }
        Ok(())
    }
}

/// Paths of this machine that confined nodes must not read (the agent's token),
/// covered in their view.
static HIDDEN: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Cover `path` (a file or a directory) in the view of every confined node made from now
/// on.
pub fn hide_in_confined_nodes(path: &Path) {
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut h = HIDDEN.lock().unwrap_or_else(|e| e.into_inner());
    if !h.contains(&path) {
        h.push(path);
    }
}

/// vemu's own directories that confined nodes see through their overlays and must not:
/// the logs of every node of every lab, the agents' token where it is by default.
const VEMU_DIRS: &[&str] = &["/var/log/vemu", "/etc/vemu"];

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}
const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const AT_RECURSIVE: libc::c_uint = 0x8000;

/// `mount_setattr(2)` on `path` (and every mount below it if `recursive`).
fn set_mount_attr(path: &Path, recursive: bool, set: u64, clear: u64) -> Result<()> {
    let c =
        std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).context("a path with a NUL")?;
    let attr = MountAttr { attr_set: set, attr_clr: clear, propagation: 0, userns_fd: 0 };
    let flags = if recursive { AT_RECURSIVE } else { 0 };
    // SAFETY: mount_setattr with a valid C string and a struct of the size given.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("changing the mount flags of {}", path.display()));
    }
    Ok(())
}

/// The mount at `path` and every one below it read-only, without set-user-ID and
/// without devices (what the machine lends a tenant's root).
pub(crate) fn read_only_tree(path: &Path) -> Result<()> {
    set_mount_attr(path, true, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0)
}

/// What confined nodes must not see of the machine: [`hide_in_confined_nodes`]'s
/// paths and vemu's own directories.
pub(crate) fn hidden_paths() -> Vec<PathBuf> {
    let mut v = HIDDEN.lock().unwrap_or_else(|e| e.into_inner()).clone();
    v.extend(VEMU_DIRS.iter().map(PathBuf::from));
    v
}

fn bind(src: &Path, dst: &Path, flags: MsFlags) -> Result<()> {
    mount(Some(src), dst, None::<&str>, MsFlags::MS_BIND | flags, None::<&str>)
        .with_context(|| format!("binding {} on {}", src.display(), dst.display()))
}

/// The devices a confined node has.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty", "net/tun"];

/// The last steps of a confined node's mounts, whose root (`top`, not yet its root) is
/// an image's or its own ([`crate::tenant_root`]): the root without set-user-ID or
/// devices, what the machine lends it (`/proc`, `/sys`) read-only, then `/dev`, `/tmp`
/// and `/var/tmp` of its own (made in `root`, the node's directory in the lab's
/// storage), `/proc/sys` writable for `net.*` only, and what must stay unseen covered.
/// The root stays the node's to write (its own overlay, in the lab's sized storage).
pub fn confine_image_root(top: &Path, root: &Path) -> Result<()> {
    set_mount_attr(top, false, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0)?;
    for lent in ["proc", "sys"] {
        let attrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
        set_mount_attr(&top.join(lent), true, attrs, 0)?;
    }
    confine_mounts_at(top, root)
}

/// `/dev`, `/tmp`, `/var/tmp`, `/proc/sys` and what is covered, in the tree at `top`.
fn confine_mounts_at(top: &Path, root: &Path) -> Result<()> {
    let at = |p: &str| top.join(p.trim_start_matches('/'));
    // /dev: made aside, then moved over the machine's.
    let dev = root.join("dev");
    fs::create_dir_all(&dev)?;
    let nosuid_noexec = MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC;
    // Without devices itself: each device below is a mount of its own, of the machine's.
    let flags = nosuid_noexec | MsFlags::MS_NODEV;
    mount(Some("vemu-dev"), &dev, Some("tmpfs"), flags, Some("mode=0755,size=64k"))
        .context("mounting the node's /dev")?;
    for d in DEVICES {
        let src = Path::new("/dev").join(d);
        if !src.exists() {
            continue;
        }
        let dst = dev.join(d);
        if let Some(p) = dst.parent() {
            fs::create_dir_all(p)?;
        }
        fs::write(&dst, "")?;
        bind(&src, &dst, MsFlags::empty())?;
        // (A bind takes the flags of where it comes from, which may be without devices.)
        set_mount_attr(&dst, false, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV)?;
    }
    for d in ["pts", "shm"] {
        fs::create_dir(dev.join(d))?;
    }
    mount(
        Some("devpts"),
        &dev.join("pts"),
        Some("devpts"),
        nosuid_noexec,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    )
    .context("mounting the node's /dev/pts")?;
    mount(
        Some("shm"),
        &dev.join("shm"),
        Some("tmpfs"),
        nosuid_noexec | MsFlags::MS_NODEV,
        Some("mode=1777,size=64m"),
    )
    .context("mounting the node's /dev/shm")?;
    for (link, to) in [
        ("ptmx", "pts/ptmx"),
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(to, dev.join(link))?;
    }
    mount(Some(&dev), &at("/dev"), None::<&str>, MsFlags::MS_MOVE, None::<&str>)
        .context("moving the node's /dev in place")?;
    // /tmp and /var/tmp: the node's own, in the lab's storage.
    for (dir, place) in [("tmp", "/tmp"), ("var-tmp", "/var/tmp")] {
        let d = root.join(dir);
        fs::create_dir_all(&d)?;
        fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o1777))?;
        if at(place).is_dir() {
            bind(&d, &at(place), MsFlags::empty())?;
            set_mount_attr(&at(place), false, 0, MOUNT_ATTR_RDONLY)?;
        }
    }
    // The lab's /etc/hosts, shared by its nodes: read-only.
    set_mount_attr(&at("/etc/hosts"), false, MOUNT_ATTR_RDONLY, 0)?;
    // The machine's /proc (the node's own, when it has one, is mounted by its init,
    // which does the same): net.* writable, the rest read-only (as all is now).
    proc_sys_net_writable(&at("/proc"))?;
    // Covered: an empty directory, or an empty file, read-only.
    let empty_dir = root.join("hidden");
    fs::create_dir_all(&empty_dir)?;
    let empty_file = root.join("hidden-file");
    fs::write(&empty_file, "")?;
    let hidden = HIDDEN.lock().unwrap_or_else(|e| e.into_inner()).clone();
    for p in hidden.iter().map(PathBuf::as_path).chain(VEMU_DIRS.iter().map(Path::new)) {
        let p = at(&p.to_string_lossy());
        let src = match fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => &empty_dir,
            Ok(_) => &empty_file,
            Err(_) => continue,
        };
        bind(src, &p, MsFlags::empty())?;
        set_mount_attr(&p, false, MOUNT_ATTR_RDONLY, 0)?;
    }
    Ok(())
}

/// In a proc file system at `proc` that is read-only: its `sys/net` writable (the
/// node's own network settings).
pub fn proc_sys_net_writable(proc: &Path) -> Result<()> {
    let net = proc.join("sys/net");
    bind(&net, &net, MsFlags::empty())?;
    set_mount_attr(&net, false, 0, MOUNT_ATTR_RDONLY)
}
