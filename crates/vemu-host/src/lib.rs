//! Linux node virtualization for vemu: a node is a network namespace plus a UTS
//! namespace (hostname = node name), both pinned by bind mounts so that they cost no
//! process; programs run in the node see a private `/etc/hosts` and the node's `/sys`.
//! Interfaces are TAP devices created directly inside the node and configured through
//! netlink from one process.
//!
//! Every object carries the lab's name. A lab's state lives on a tmpfs of its own at
//! `/run/vemu/LAB/`, where the namespaces are pinned; `/run/netns/vemu-LAB.NODE` is a
//! symlink to the pinned network namespace, so that `ip netns` lists and enters nodes.
//! [`remove_lab`] removes all of it, also after a crash, with one lazy unmount of the
//! lab's tmpfs (unmounting namespaces one by one costs an RCU grace period each).

pub mod netlink;
pub mod tap;

use std::collections::HashSet;
use std::ffi::CString;
use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
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
    pub fn new(lab: &str) -> LabPaths {
        LabPaths { lab: lab.to_string(), dir: Path::new(STATE_DIR).join(lab) }
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
    pub fn uts(&self, node: &str) -> PathBuf {
        self.dir.join("uts").join(node)
    }
    pub fn hosts(&self) -> PathBuf {
        self.dir.join("hosts")
    }
    /// A node's working directory (the current directory of its `run` commands).
    pub fn node_dir(&self, node: &str) -> PathBuf {
        self.dir.join("nodes").join(node)
    }
    pub fn socket(&self) -> PathBuf {
        self.dir.join("ctl.sock")
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

/// Prepare the lab's directories and its `/etc/hosts`. Fails if the lab exists.
pub fn prepare_lab(paths: &LabPaths, hosts: &str, nodes: &[NodePlan]) -> Result<()> {
    make_shared_dir(NETNS_DIR)?;
    make_shared_dir(STATE_DIR)?;
    fs::create_dir(&paths.dir).with_context(|| format!("creating {}", paths.dir.display()))?;
    mount(Some("vemu"), &paths.dir, Some("tmpfs"), MsFlags::MS_NOSUID | MsFlags::MS_NODEV, Some("mode=0755"))
        .with_context(|| format!("mounting a tmpfs on {}", paths.dir.display()))?;
    fs::create_dir(paths.dir.join("uts"))?;
    fs::create_dir(paths.dir.join("netns"))?;
    fs::create_dir_all(paths.log_dir()).with_context(|| format!("creating {}", paths.log_dir().display()))?;
    fs::write(paths.hosts(), hosts)?;
    for n in nodes {
        fs::create_dir_all(paths.node_dir(&n.name))?;
    }
    Ok(())
}

/// Pin the calling thread's namespace `kind` ("net", "uts") at `target`.
fn pin_ns(kind: &str, target: &Path) -> Result<()> {
    fs::File::options()
        .write(true)
        .create_new(true)
        .open(target)
        .with_context(|| format!("creating {}", target.display()))?;
    let src = format!("/proc/thread-self/ns/{kind}");
    if let Err(e) = mount(Some(src.as_str()), target, None::<&str>, MsFlags::MS_BIND, None::<&str>) {
        let _ = fs::remove_file(target);
        return Err(e).with_context(|| format!("pinning the {kind} namespace at {}", target.display()));
    }
    Ok(())
}

fn write_sysctl(path: &str, value: &str) -> Result<()> {
    fs::write(path, value).with_context(|| format!("setting {path}"))
}

/// Create one node: its namespaces, its TAP interfaces (addressed, up) and routes.
/// Returns the TAP descriptors in the order of `node.ifaces`. Runs on a thread of its
/// own, since entering a namespace is per thread.
pub fn create_node(paths: &LabPaths, node: &NodePlan) -> Result<Vec<OwnedFd>> {
    let name = node.name.clone();
    let paths = paths.clone();
    let node = node.clone();
    std::thread::Builder::new()
        .name(format!("mk-{}", node.name))
        .spawn(move || -> Result<Vec<OwnedFd>> {
            unshare(CloneFlags::CLONE_NEWNET | CloneFlags::CLONE_NEWUTS).context("creating namespaces")?;
            nix::unistd::sethostname(&node.name).context("setting the hostname")?;
            pin_ns("net", &paths.netns_pin(&node.name))?;
            std::os::unix::fs::symlink(paths.netns_pin(&node.name), paths.netns(&node.name))
                .with_context(|| format!("creating {}", paths.netns(&node.name).display()))?;
            pin_ns("uts", &paths.uts(&node.name))?;
            write_sysctl("/proc/sys/net/ipv4/ip_forward", "1")?;
            write_sysctl("/proc/sys/net/ipv6/conf/all/forwarding", "1")?;
            write_sysctl("/proc/sys/net/ipv6/conf/default/forwarding", "1")?;
            // Addresses (link-local ones too) are usable at once: no duplicate address
            // detection delaying the first seconds of a lab.
            write_sysctl("/proc/sys/net/ipv6/conf/default/accept_dad", "0")?;
            write_sysctl("/proc/sys/net/ipv6/conf/all/accept_dad", "0")?;
            let mut nl = netlink::Netlink::open()?;
            nl.set_link(tap::ifindex("lo")?, true, None, None)?;
            let mut fds = Vec::with_capacity(node.ifaces.len());
            let mut idx = Vec::with_capacity(node.ifaces.len());
            for i in &node.ifaces {
                fds.push(tap::create(&i.name)?);
                let ix = tap::ifindex(&i.name)?;
                idx.push(ix);
                nl.set_link(ix, true, Some(i.mac), Some(i.mtu))?;
                for a in &i.addrs {
                    nl.add_address(ix, *a)?;
                }
            }
            nl.flush().with_context(|| format!("configuring node {}", node.name))?;
            for r in &node.routes {
                let oif = match &r.dev {
                    Some(d) => Some(idx[node.ifaces.iter().position(|i| &i.name == d).ok_or_else(|| anyhow!("no interface {d}"))?]),
                    None => None,
                };
                nl.add_route(r.dst, r.via, oif)?;
            }
            nl.flush().with_context(|| format!("adding routes of node {}", node.name))?;
            Ok(fds)
        })?
        .join()
        .map_err(|_| anyhow!("the thread creating node {name} panicked"))?
}

/// Everything a process needs to enter a node, opened before `fork` so that the child
/// only makes system calls.
pub struct NodeEntry {
    net: OwnedFd,
    uts: OwnedFd,
    hosts: CString,
}

impl NodeEntry {
    pub fn open(paths: &LabPaths, node: &str) -> Result<NodeEntry> {
        let open = |p: PathBuf| -> Result<OwnedFd> {
            Ok(fs::File::open(&p).with_context(|| format!("node '{node}' of lab '{}' does not exist ({})", paths.lab, p.display()))?.into())
        };
        Ok(NodeEntry {
            net: open(paths.netns(node))?,
            uts: open(paths.uts(node))?,
            hosts: CString::new(paths.hosts().as_os_str().as_encoded_bytes())?,
        })
    }

    /// Make `cmd` run inside the node: its network and UTS namespaces, plus a private
    /// mount namespace where `/etc/hosts` is the lab's and `/sys` shows the node's
    /// interfaces (as `ip netns exec` does).
    pub fn apply(self, cmd: &mut Command) {
        let NodeEntry { net, uts, hosts } = self;
        // SAFETY: the closure only makes async-signal-safe system calls on values prepared
        // before fork.
        unsafe {
            cmd.pre_exec(move || {
                let chk = |r: libc::c_int| if r < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) };
                chk(libc::setns(net.as_raw_fd(), libc::CLONE_NEWNET))?;
                chk(libc::setns(uts.as_raw_fd(), libc::CLONE_NEWUTS))?;
                chk(libc::unshare(libc::CLONE_NEWNS))?;
                chk(libc::mount(c"none".as_ptr(), c"/".as_ptr(), std::ptr::null(), libc::MS_REC | libc::MS_SLAVE, std::ptr::null()))?;
                chk(libc::mount(hosts.as_ptr(), c"/etc/hosts".as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null()))?;
                if libc::umount2(c"/sys".as_ptr(), libc::MNT_DETACH) == 0 {
                    chk(libc::mount(c"sysfs".as_ptr(), c"/sys".as_ptr(), c"sysfs".as_ptr(), 0, std::ptr::null()))?;
                }
                Ok(())
            });
        }
    }
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

/// Stop every process in the given network namespaces: SIGTERM, then SIGKILL for those
/// still there after `grace`.
pub fn kill_processes(netns: &[PathBuf], grace: Duration) {
    let inodes: HashSet<u64> = netns.iter().filter_map(|p| ns_inode(p)).collect();
    if inodes.is_empty() {
        return;
    }
    let signal = |sig| {
        let pids = processes_in(&inodes);
        for &pid in &pids {
            // SAFETY: plain kill(2).
            unsafe { libc::kill(pid, sig) };
        }
        !pids.is_empty()
    };
    if !signal(libc::SIGTERM) {
        return;
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if processes_in(&inodes).is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(libc::SIGKILL);
    let deadline = Instant::now() + Duration::from_secs(2);
    while !processes_in(&inodes).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Names of the labs that have anything in the kernel or in the state directory.
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
    kill_processes(&pins, Duration::from_millis(500));
    let mut errors = Vec::new();
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
