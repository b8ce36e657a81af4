//! Nodes: making one (namespaces, interfaces, addresses, routes, sysctls), its PID
//! namespace and init, and entering it to start a process ([`NodeEntry`]).

use super::*;

/// Create one node: its namespaces, its interfaces (addressed, up), loopback addresses
/// and routes. An interface whose `plane_peers` entry names a peer is one end of a veth
/// pair whose other end (with that name) is in the lab's plane namespace; the others are
/// TAP devices, whose descriptors are returned (in the order of `node.ifaces`). Runs on
/// a thread of its own, since entering a namespace is per thread. (A node's mount
/// namespace, its private view of the filesystem, and its PID namespace are made when
/// its first process starts: [`NodeEntry::open`].)
pub fn create_node(
    paths: &LabPaths,
    node: &NodePlan,
    plane_peers: &[Option<PlanePeer>],
) -> Result<Vec<Option<OwnedFd>>> {
    let name = node.name.clone();
    let plane = match plane_peers.iter().any(Option::is_some) {
        true => Some(
            fs::File::open(paths.plane())
                .with_context(|| format!("opening {}", paths.plane().display()))?,
        ),
        false => None,
    };
    let plane_peers = plane_peers.to_vec();
    let worker = {
        let paths = paths.clone();
        let node = node.clone();
        std::thread::Builder::new().name(format!("mk-{}", node.name)).spawn(
            move || -> Result<Vec<Option<OwnedFd>>> {
                // A socket in the machine's namespace for the node's management interface,
                // when the lab has a management network.
                let mut host_nl = match node.mgmt.is_empty() {
                    true => None,
                    false => Some(netlink::Netlink::open()?),
                };
                // A socket in the plane for the far ends of the node's link interfaces,
                // opened from there before the thread leaves for the node's own namespace.
                let mut plane_nl = match &plane {
                    Some(p) => {
                        nix::sched::setns(p, CloneFlags::CLONE_NEWNET)
                            .context("entering the lab's plane")?;
                        Some(netlink::Netlink::open()?)
                    }
                    None => None,
                };
                unshare(CloneFlags::CLONE_NEWNET | CloneFlags::CLONE_NEWUTS)
                    .context("creating namespaces")?;
                nix::unistd::sethostname(&node.name).context("setting the hostname")?;
                pin_ns("net", &paths.netns_pin(&node.name))?;
                std::os::unix::fs::symlink(paths.netns_pin(&node.name), paths.netns(&node.name))
                    .with_context(|| format!("creating {}", paths.netns(&node.name).display()))?;
                pin_ns("uts", &paths.uts(&node.name))?;
                let proc = OwnProc::new()?;
                // Addresses (link-local ones too) are usable at once: no duplicate address
                // detection delaying the first seconds of a lab. (These two need no RTNL
                // lock, unlike the others: written before the gate.)
                write_sysctl(&proc.sys("net/ipv6/conf/default/accept_dad"), "0")?;
                write_sysctl(&proc.sys("net/ipv6/conf/all/accept_dad"), "0")?;
                // The node's forwarding sysctls and devices, in one hold of the gate.
                let gate = NET_CONFIG.lock().unwrap_or_else(|e| e.into_inner());
                write_sysctl(&proc.sys("net/ipv4/ip_forward"), "1")?;
                write_sysctl(&proc.sys("net/ipv6/conf/all/forwarding"), "1")?;
                write_sysctl(&proc.sys("net/ipv6/conf/default/forwarding"), "1")?;
                // (An access point's bridge is a switch; the node's own settings after.)
                if !node.bridge.is_empty() {
                    bridges_without_netfilter(&proc.sys_root())?;
                }
                for (k, v) in &node.sysctls {
                    write_sysctl(&proc.sys(&k.replace('.', "/")), v)
                        .with_context(|| format!("setting sysctl {k} = {v}"))?;
                }
                let mut nl = netlink::Netlink::open()?;
                let lo = tap::ifindex("lo")?;
                nl.set_link(lo, true, None, None)?;
                for a in &node.loopback {
                    nl.add_address(lo, *a)?;
                }
                let fds = node_interfaces(&mut nl, &node, &plane_peers, plane_nl.as_mut(), false)?;
                if let Some(hnl) = host_nl.as_mut() {
                    mgmt_interface(hnl, &mut nl, &paths.lab, &node).with_context(|| {
                        format!("giving node {} its management interface", node.name)
                    })?;
                }
                drop(gate);
                // (Let go outside the gate: the kernel waits for an RCU grace period as
                // a mount goes, and every other node's thread would wait too.)
                drop(proc);
                Ok(fds)
            },
        )?
    };
    let fds = worker.join().map_err(|_| anyhow!("the thread creating node {name} panicked"))??;
    if !node.limits.is_none() {
        cgroup::set_limits(&paths.lab, &name, &node.limits)?;
    }
    if paths.confined().exists() {
        cgroup::confine_devices(&paths.lab, &name)
            .with_context(|| format!("limiting the devices of node {name}"))?;
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
pub fn create_host_node(
    paths: &LabPaths,
    node: &NodePlan,
    plane_peers: &[Option<PlanePeer>],
) -> Result<Vec<Option<OwnedFd>>> {
    let plane = match plane_peers.iter().any(Option::is_some) {
        true => Some(
            fs::File::open(paths.plane())
                .with_context(|| format!("opening {}", paths.plane().display()))?,
        ),
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
pub(crate) fn host_ifaces_file(paths: &LabPaths) -> PathBuf {
    paths.dir.join("host-ifaces")
}

pub(crate) fn host_netns_pin(paths: &LabPaths) -> PathBuf {
    paths.dir.join("host-net")
}

/// Pin the calling thread's network namespace (the machine's) in the lab's state, once:
/// what a lab makes there is removed there by `down` and `clean`, wherever they run.
pub(crate) fn pin_host_netns(paths: &LabPaths) -> Result<()> {
    let pin_path = host_netns_pin(paths);
    if !pin_path.exists() {
        pin("/proc/thread-self/ns/net", &pin_path)
            .context("pinning the machine's network namespace")?;
    }
    Ok(())
}

pub(crate) fn record_host_ifaces(paths: &LabPaths, names: &[&str]) -> Result<()> {
    pin_host_netns(paths)?;
    let lines: String =
        names.iter().filter_map(|n| tap::ifindex(n).ok().map(|ix| format!("{n} {ix}\n"))).collect();
    let mut f = fs::File::options()
        .create(true)
        .append(true)
        .open(host_ifaces_file(paths))
        .context("noting the machine's interfaces")?;
    std::io::Write::write_all(&mut f, lines.as_bytes()).context("noting the machine's interfaces")
}

/// Delete the interfaces a lab gave the machine, in the namespace they were made in,
/// each only if its name still has the index noted (never one the machine made since).
/// They would go by themselves (a TAP with its descriptor, a veth with its peer's plane
/// namespace), but a namespace is destroyed some time after its last reference: this
/// way they are gone when `down` or `clean` returns.
pub(crate) fn remove_host_ifaces(paths: &LabPaths) -> Result<()> {
    let Ok(list) = fs::read_to_string(host_ifaces_file(paths)) else { return Ok(()) };
    let noted: Vec<(String, u32)> = list
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter_map(|(n, ix)| Some((n.to_string(), ix.parse().ok()?)))
        .collect();
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

/// Make a node's interfaces in the calling thread's network namespace (a veth whose peer
/// goes into the plane, or a TAP device whose descriptor is returned), with their MAC,
/// MTU and addresses, then its routes. On the `host`, each interface's IPv6 is turned
/// off on its own when the node's sysctls ask for it for all (the machine's defaults
/// are not vemu's to change).
pub(crate) fn node_interfaces(
    nl: &mut netlink::Netlink,
    node: &NodePlan,
    plane_peers: &[Option<PlanePeer>],
    mut plane: Option<&mut netlink::Netlink>,
    host: bool,
) -> Result<Vec<Option<OwnedFd>>> {
    let no_ipv6 = host
        && node.sysctls.iter().any(|(k, v)| k == "net.ipv6.conf.default.disable_ipv6" && v == "1");
    let mut fds = Vec::with_capacity(node.ifaces.len());
    let mut idx = Vec::with_capacity(node.ifaces.len());
    for (k, i) in node.ifaces.iter().enumerate() {
        let veth = match (plane_peers.get(k).and_then(Option::as_ref), plane.as_mut()) {
            (Some(peer), Some(pnl)) => {
                // Made from the plane, where its far end has the index chosen for it
                // (see [`PLANE_INDEX_BASE`]); the interface here takes the next free one.
                // The far end goes on the fast path's block and up with this node's
                // next batch of requests. (Its qdisc is added while it is down: on a
                // device that is up the kernel waits for an RCU grace period under the
                // RTNL lock. Left down for long, it would wait in the kernel's queue of
                // link events, which is walked whole each time a device comes up:
                // quadratic in big labs.)
                let here = fs::File::open("/proc/thread-self/ns/net")
                    .context("opening the node's network namespace")?;
                let v = peer.index;
                pnl.add_veth_at(&peer.name, v, PLANE_MTU, false, &i.name, i.mac, i.mtu, &here)?;
                pnl.flush().with_context(|| format!("creating interface {}", i.name))?;
                match peer.bridge {
                    // A LAN port: also a port of the LAN's bridge (which brings it up),
                    // with the egress block.
                    Some(br) => {
                        pnl.add_clsact_blocks(v, PLANE_BLOCK, PLANE_EGRESS_BLOCK)?;
                        pnl.set_master(v, br)?;
                    }
                    None => {
                        pnl.add_ingress(v, PLANE_BLOCK)?;
                        pnl.set_link(v, true, None, None)?;
                    }
                }
                fds.push(None);
                true
            }
            _ => {
                fds.push(Some(tap::create(&i.name)?));
                false
            }
        };
        let ix = tap::ifindex(&i.name)?;
        idx.push(ix);
        if no_ipv6 {
            write_sysctl(&format!("/proc/sys/net/ipv6/conf/{}/disable_ipv6", i.name), "1")?;
        }
        // A veth was made with its MAC and MTU (setting a MAC again, even the same, has
        // the kernel tell every listener of a changed address).
        match veth {
            true => nl.set_link(ix, true, None, None)?,
            false => nl.set_link(ix, true, Some(i.mac), Some(i.mtu))?,
        }
        if !node.bridge.contains(&i.name) {
            for a in &i.addrs {
                nl.add_address(ix, *a)?;
            }
        }
    }
    nl.flush().with_context(|| format!("configuring node {}", node.name))?;
    let bridge = ap_bridge(nl, node, &idx)?;
    if let Some(pnl) = plane.as_mut() {
        pnl.flush().context("attaching the node's link interfaces to the plane")?;
    }
    for r in &node.routes {
        let oif = match &r.dev {
            Some(d) if node.bridge.contains(d) => bridge,
            Some(d) => Some(
                idx[node
                    .ifaces
                    .iter()
                    .position(|i| &i.name == d)
                    .ok_or_else(|| anyhow!("no interface {d}"))?],
            ),
            None => None,
        };
        nl.add_route_in(r.table, r.dst, r.via, oif, None)?;
    }
    nl.flush().with_context(|| format!("adding routes of node {}", node.name))?;
    for r in &node.rules {
        for rule in kernel_rules(r) {
            nl.add_rule(&rule)?;
        }
    }
    nl.flush().with_context(|| format!("adding policy routing rules of node {}", node.name))?;
    Ok(fds)
}

/// A rule of the plan as the kernel's rules: one per family it applies to.
fn kernel_rules(r: &vemu_scenario::policy::RulePlan) -> Vec<netlink::Rule> {
    use vemu_scenario::policy::RuleAction;
    let action = match r.action {
        RuleAction::Table(t) => netlink::RuleKind::Table(t),
        RuleAction::Blackhole => netlink::RuleKind::Blackhole,
        RuleAction::Unreachable => netlink::RuleKind::Unreachable,
        RuleAction::Prohibit => netlink::RuleKind::Prohibit,
    };
    let families = match r.v6 {
        Some(v6) => vec![v6],
        None => vec![false, true],
    };
    families
        .into_iter()
        .map(|v6| netlink::Rule {
            v6,
            priority: r.priority,
            from: r.from,
            to: r.to,
            iif: r.iif.clone(),
            oif: r.oif.clone(),
            ip_proto: r.proto,
            sport: r.sport,
            dport: r.dport,
            dscp: r.dscp,
            action,
        })
        .collect()
}

/// An access point's bridge ([`NodePlan::bridge`]): its ports joined, with the radio
/// interface's MAC and the ports' addresses; its index (none without one).
fn ap_bridge(nl: &mut netlink::Netlink, node: &NodePlan, idx: &[u32]) -> Result<Option<u32>> {
    let ports: Vec<usize> = node
        .bridge
        .iter()
        .map(|b| node.ifaces.iter().position(|i| &i.name == b))
        .collect::<Option<_>>()
        .ok_or_else(|| anyhow!("node {}: a bridge port it does not have", node.name))?;
    let Some(&radio) = ports.first() else { return Ok(None) };
    // (No snooping: a station's multicast reaches the wired side as on an AP; MACs
    // forgotten after the kernel's usual 300 s.)
    nl.add_bridge(vemu_scenario::AP_BRIDGE, false, false, 30_000, 1_000)?;
    nl.flush().with_context(|| format!("creating node {}'s bridge", node.name))?;
    let br = tap::ifindex(vemu_scenario::AP_BRIDGE)?;
    let mtu = ports.iter().map(|&p| node.ifaces[p].mtu).min().expect("a port");
    nl.set_link(br, true, Some(node.ifaces[radio].mac), Some(mtu))?;
    for &p in &ports {
        nl.set_master(idx[p], br)?;
        for a in &node.ifaces[p].addrs {
            nl.add_address(br, *a)?;
        }
    }
    nl.flush().with_context(|| format!("bridging node {}'s interfaces", node.name))?;
    Ok(Some(br))
}

/// The PID namespace of a node that has PIDs of its own, made (with its first process)
/// the first time one of the node's processes starts, so that nodes that run nothing
/// cost nothing. `wanted` is the node's marker file, whose lock makes one process
/// (the controller, or a `vemu exec`) make it while others wait. Its init joins the
/// node's cgroups (`cgroups`: their `cgroup.procs` files), as every process of the node.
pub(crate) fn pid_namespace(
    paths: &LabPaths,
    node: &str,
    wanted: &fs::File,
    ns: [&OwnedFd; 3],
    cgroups: &[OwnedFd],
) -> Result<OwnedFd> {
    let pin_path = paths.pidns(node);
    // Always under the lock: the pin is a file before it is a namespace (made, then
    // bind-mounted), and only its maker knows when it is both.
    lock::wait_for_lock(wanted).context("locking the node's PID namespace")?;
    if let Ok(f) = fs::File::open(&pin_path) {
        return Ok(f.into());
    }
    // Opened here, in the machine's mounts: the node's view may not show where vemu is
    // installed (a confined node has a /tmp of its own, for one).
    let init_path = init_program()?;
    let init = fs::File::open(&init_path)
        .with_context(|| format!("opening the nodes' init {}", init_path.display()))?;
    let confined = paths.confined().exists();
    let ns: Vec<OwnedFd> = ns.iter().map(|f| f.try_clone()).collect::<std::io::Result<_>>()?;
    let node_name = node.to_string();
    // A node of an image: its init starts from the machine's files and enters the
    // node's mounts itself (the image's C library may not be the machine's).
    let image_mnt = images::of_node(paths, node)?.map(|_| paths.mnt(node));
    let pid = std::thread::scope(|s| {
        s.spawn(move || -> Result<u32> {
            unshare(CloneFlags::CLONE_FS).context("unsharing the filesystem context")?;
            let enter = if image_mnt.is_some() { 2 } else { 3 };
            for (fd, kind) in ns
                .iter()
                .zip([CloneFlags::CLONE_NEWNET, CloneFlags::CLONE_NEWUTS, CloneFlags::CLONE_NEWNS])
                .take(enter)
            {
                nix::sched::setns(fd, kind).context("entering the node")?;
            }
            start_init(&init, &node_name, confined, image_mnt.as_deref(), cgroups)
        })
        .join()
        .map_err(|_| anyhow!("the thread starting node {node}'s init panicked"))?
    })?;
    pin(&format!("/proc/{pid}/ns/pid"), &pin_path)
        .with_context(|| format!("pinning the PID namespace of node {node}"))?;
    Ok(fs::File::open(&pin_path)?.into())
}

/// From a thread inside the node's namespaces: make a PID namespace and start its first
/// process, `init NODE [--confined] [--mnt PATH]`, which enters the node's mounts when
/// told where they are pinned (a node of an image), mounts the node's own `/proc` (for
/// a confined node, with `/proc/sys` read-only but for `net`) and says so. `init` is the
/// program, opened before the node's mounts were entered: it runs from that handle,
/// whatever the node's view shows. It starts in the node's cgroups (`cgroups`, their
/// `cgroup.procs` files) and a cgroup namespace rooted there, as the node's other
/// processes ([`NodeEntry::spawn`]). Returns its PID (in the machine's PID namespace).
pub(crate) fn start_init(
    init: &fs::File,
    node: &str,
    confined: bool,
    mnt: Option<&Path>,
    cgroups: &[OwnedFd],
) -> Result<u32> {
    use std::io::Read;
    unshare(CloneFlags::CLONE_NEWPID).context("creating the node's PID namespace")?;
    let procs: Vec<i32> = cgroups.iter().map(AsRawFd::as_raw_fd).collect();
    let mut cmd = Command::new(format!("/proc/self/fd/{}", init.as_raw_fd()));
    cmd.arg0("vemu-init");
    // SAFETY: write and unshare only, on descriptors that stay open until the spawn
    // returns.
    unsafe {
        cmd.pre_exec(move || {
            for &f in &procs {
                // "0": the writing process itself.
                if libc::write(f, c"0".as_ptr().cast(), 1) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if !procs.is_empty() && libc::unshare(libc::CLONE_NEWCGROUP) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd
        .arg(node)
        .args(confined.then_some("--confined"))
        .args(mnt.map(|m| [std::ffi::OsStr::new("--mnt"), m.as_os_str()]).into_iter().flatten())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("starting the node's init")?;
    let mut said = String::new();
    let _ = child.stdout.take().map(|mut o| o.read_to_string(&mut said));
    if said.trim() != INIT_READY {
        let _ = child.kill();
        let _ = child.wait();
        bail!("the node's init failed: {}", said.trim());
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
        bail!(
            "{} is missing: vemu-init (each node's first process) must be installed beside {}",
            init.display(),
            exe.display()
        );
    }
    Ok(init)
}

/// What the init program prints once the node's `/proc` is mounted.
pub(crate) const INIT_READY: &str = "ready";

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
    /// A node of an image: its processes start in the image's working directory, as its
    /// user, with its environment.
    image: Option<ImageProcess>,
    /// A node whose root is its own (a tenant's: [`crate::tenant_root`]): its processes
    /// start in it, at `/`, not in the caller's directory (which it does not hold).
    own_root: bool,
}

/// How a process starts in a node of an image ([`images::Image`]).
struct ImageProcess {
    cwd: std::ffi::CString,
    uid: u32,
    gid: u32,
    env: Vec<(String, String)>,
}

impl NodeEntry {
    pub fn open(paths: &LabPaths, node: &str) -> Result<NodeEntry> {
        let open = |p: PathBuf| -> Result<OwnedFd> {
            Ok(fs::File::open(&p)
                .with_context(|| {
                    format!("node '{node}' of lab '{}' does not exist ({})", paths.lab, p.display())
                })?
                .into())
        };
        let (net, uts) = (open(paths.netns(node))?, open(paths.uts(node))?);
        let mnt = node_mounts(paths, node)?;
        node_sysfs(paths, node, &net, &mnt)?;
        let cgroups = cgroup::procs_files(&paths.lab, node)?;
        let pid = match fs::File::open(paths.pidns_wanted(node)) {
            Ok(wanted) => Some(pid_namespace(paths, node, &wanted, [&net, &uts, &mnt], &cgroups)?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("opening {}", paths.pidns_wanted(node).display()))
            }
        };
        let confined = match paths.confined().exists() {
            true => Some(node_filter()?),
            false => None,
        };
        let image = images::of_node(paths, node)?.map(|i| ImageProcess {
            cwd: std::ffi::CString::new(i.cwd).unwrap_or_else(|_| c"/".to_owned()),
            uid: i.uid,
            gid: i.gid,
            env: i
                .env
                .iter()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        });
        let own_root = confined.is_some() && image.is_none();
        Ok(NodeEntry { net, uts, mnt, pid, cgroups, confined, image, own_root })
    }

    /// Start `cmd` inside the node, with `spawn` (e.g. `Command::spawn`): in its network,
    /// UTS and mount namespaces (where `/etc/hosts` is the lab's, `/sys` shows the node's
    /// interfaces, and `/etc`, `/var/lib`, `/var/log` and `/run` are the node's own) and
    /// in its PID namespace when it has one (then the command sees the node's
    /// processes only), and in the node's cgroups (its CPU, memory and process limits).
    /// The working directory stays the one `cmd` was given — but in a node of an image,
    /// whose processes start as the image says (its working directory, user and
    /// environment, under what `cmd` sets itself).
    pub fn spawn<T>(
        self,
        cmd: &mut Command,
        spawn: impl FnOnce(&mut Command) -> std::io::Result<T> + Send,
    ) -> std::io::Result<T>
    where
        T: Send,
    {
        let NodeEntry { net, uts, mnt, pid, cgroups, confined, image, own_root } = self;
        if let Some(i) = &image {
            let set: Vec<String> =
                cmd.get_envs().map(|(k, _)| k.to_string_lossy().into_owned()).collect();
            for (k, v) in i.env.iter().filter(|(k, _)| !set.contains(k)) {
                cmd.env(k, v);
            }
        }
        // SAFETY: the closure only makes async-signal-safe system calls on values prepared
        // before fork.
        unsafe {
            cmd.pre_exec(move || {
                let chk = |r: libc::c_int| {
                    if r < 0 {
                        Err(std::io::Error::last_os_error())
                    } else {
                        Ok(r)
                    }
                };
                // The controller and the agents keep clear of the OOM killer
                // ([`OOM_SCORE_ADJ`]); a node's programs are ordinary victims again.
                let adj = libc::open(
                    c"/proc/self/oom_score_adj".as_ptr(),
                    libc::O_WRONLY | libc::O_CLOEXEC,
                );
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
                let cwd = chk(libc::open(
                    c".".as_ptr(),
                    libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
                ))?;
                chk(libc::setns(mnt.as_raw_fd(), libc::CLONE_NEWNS))?;
                // Capabilities go before an image's user is taken: dropping them from the
                // bounding set needs CAP_SETPCAP, which a user other than root has not.
                if confined.is_some() {
                    confine::drop_capabilities()?;
                }
                match &image {
                    None if own_root => {
                        chk(libc::chdir(c"/".as_ptr()))?;
                    }
                    None => {
                        chk(libc::fchdir(cwd))?;
                    }
                    Some(i) => {
                        // The image's directory (its root if the image lacks it), then
                        // its user.
                        if libc::chdir(i.cwd.as_ptr()) != 0 {
                            chk(libc::chdir(c"/".as_ptr()))?;
                        }
                        if i.uid != 0 || i.gid != 0 {
                            chk(libc::setgroups(0, std::ptr::null()))?;
                            chk(libc::setgid(i.gid))?;
                            chk(libc::setuid(i.uid))?;
                        }
                    }
                }
                libc::close(cwd);
                if let Some(filter) = &confined {
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
pub(crate) fn node_filter() -> Result<std::sync::Arc<confine::NodeFilter>> {
    static FILTER: std::sync::OnceLock<std::sync::Arc<confine::NodeFilter>> =
        std::sync::OnceLock::new();
    if let Some(f) = FILTER.get() {
        return Ok(f.clone());
    }
    let f = std::sync::Arc::new(confine::NodeFilter::new()?);
    Ok(FILTER.get_or_init(|| f).clone())
}

/// The name of a lab's management bridge on the machine.
pub fn mgmt_bridge_name(lab: &str) -> String {
    format!("vmb{:010x}", lock::stable_hash(lab) & 0xff_ffff_ffff)
}

/// The name, on the machine, of the far end of a node's `mgmt0`.
fn mgmt_peer_name(lab: &str, node: &str) -> String {
    format!("vm{:011x}", lock::stable_hash(&format!("{lab}/{node}")) & 0x7ff_ffff_ffff)
}

/// Make the lab's management bridge in the calling process's network namespace (the
/// machine's), with the machine's addresses on it (`gateway`), and note it for `down`
/// and `clean`. Its nodes' `mgmt0` join it as they are made.
pub fn make_mgmt_bridge(paths: &LabPaths, gateway: &[ipnet::IpNet]) -> Result<()> {
    let name = mgmt_bridge_name(&paths.lab);
    if tap::ifindex(&name).is_ok() {
        bail!(
            "the machine has an interface named {name} already (another lab's management bridge?)"
        );
    }
    let mut nl = netlink::Netlink::open()?;
    nl.add_bridge(&name, false, false, 30_000, 100)?;
    nl.flush().with_context(|| format!("making the management bridge {name}"))?;
    record_host_ifaces(paths, &[name.as_str()])?;
    let ix = nl.index_of(&name)?;
    for a in gateway {
        nl.add_address(ix, *a)?;
    }
    nl.set_link(ix, true, None, None)?;
    nl.flush().with_context(|| format!("addressing the management bridge {name}"))
}

/// Give the node (whose namespace the calling thread is in; `nl` its socket) its
/// `mgmt0`, a veth whose far end (through `host`, a socket in the machine's namespace)
/// is a port of the lab's management bridge, with the node's management addresses and
/// no route beyond its subnet unless the lab asks for NAT (then a default route that
/// any of the lab's own outranks).
fn mgmt_interface(
    host: &mut netlink::Netlink,
    nl: &mut netlink::Netlink,
    lab: &str,
    node: &NodePlan,
) -> Result<()> {
    let here = fs::File::open("/proc/thread-self/ns/net")
        .context("opening the node's network namespace")?;
    let peer = mgmt_peer_name(lab, &node.name);
    let h = lock::stable_hash(&node.name).to_be_bytes();
    let mac = [0x02, 0x4d, h[4], h[5], h[6], h[7]];
    host.add_veth_at(&peer, 0, 1500, true, "mgmt0", mac, 1500, &here)?;
    host.flush()?;
    let (pix, br) = (host.index_of(&peer)?, host.index_of(&mgmt_bridge_name(lab))?);
    host.set_master(pix, br)?;
    host.flush()?;
    let ix = tap::ifindex("mgmt0")?;
    nl.set_link(ix, true, None, None)?;
    for a in &node.mgmt {
        nl.add_address(ix, *a)?;
    }
    nl.flush()?;
    if let Some(gw) = node.mgmt_gateway {
        let any: ipnet::IpNet = "0.0.0.0/0".parse().expect("a prefix");
        let metric = Some(vemu_scenario::MGMT_DEFAULT_METRIC);
        nl.add_route(any, Some(gw.into()), Some(ix), metric)?;
        nl.flush()?;
    }
    Ok(())
}
