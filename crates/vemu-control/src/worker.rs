//! What the controller asks of a machine that hosts a lab (or its share of one), as
//! serializable messages, and the in-process worker for labs on this machine.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::{anyhow, Result};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use vemu_engine::{Captured, CaptureSpec, DirStats, Engine, FastPath, LabClock, LinkSpec, MemberSpec, PlaneDevs, RadioSnapshot, SegStats, SegmentSpec, Target};
use vemu_fastpath::Route;
use vemu_host::LabPaths;
use vemu_link::{Impairments, ImpairmentsPatch};
use vemu_scenario::Plan;

use crate::supervise::{ProcStatus, Supervisor};
use crate::derive_seed;
use crate::LockExt;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum WorkerRequest {
    /// Build the nodes and links of the plan and start their commands.
    Build { plan: Plan, clock_epoch_ns: u64 },
    /// Change one direction of a link (0 = forward, 1 = reverse) or of a segment port
    /// (0 = egress, 1 = ingress).
    Patch { target: Target, dir: usize, patch: ImpairmentsPatch },
    SetUp { target: Target, up: bool },
    /// Stop every process in a node (`up: false`) or start its commands again.
    NodeState { node: String, up: bool },
    Stats,
    Processes,
    /// New positions of a wireless segment's members (one per member, m).
    Positions { seg: usize, positions: Vec<vemu_radio::Pos> },
    /// Positions, neighbours and per-pair counters of a wireless segment.
    Radio { seg: usize },
    /// The nodes' kernel counters of their TAP interfaces.
    TapQueues,
    /// How far behind its schedule the data plane is, ns.
    Backlog,
    /// Set (or lift) a node's CPU, memory and process limits.
    SetLimits { node: String, limits: vemu_scenario::Limits },
    /// What each node's processes use, in the plan's order of nodes.
    Usage,
    Teardown,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum WorkerReply {
    Done,
    Impairments(Impairments),
    Stats(Counters),
    Processes(Vec<ProcStatus>),
    Radio(RadioSnapshot),
    TapQueues(Vec<TapQueue>),
    Backlog(u64),
    Usage(Vec<vemu_host::cgroup::Usage>),
    Error(String),
}

/// A node's TAP interface as the node's kernel counts it. What the node sends waits in
/// the TAP's queue until the engine reads it; when the engine falls behind the queue
/// fills and the kernel drops frames (before any emulation: not emulated loss).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TapQueue {
    /// `NODE:IFACE`.
    pub port: String,
    /// Frames the engine read.
    pub read: u64,
    /// Frames dropped on the full queue.
    pub dropped: u64,
}

/// Counters of everything a worker emulates.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Counters {
    /// Per link, forward and reverse.
    pub links: Vec<[DirStats; 2]>,
    /// Per segment, per member: egress and ingress.
    pub members: Vec<Vec<[DirStats; 2]>>,
    pub segments: Vec<SegStats>,
    /// Per engine shard, nanoseconds spent working since the start ([`Engine::work_ns`]).
    pub shard_work_ns: Vec<u64>,
    /// Whether unimpaired link directions go by the kernel: "on", or "off: why".
    #[serde(default)]
    pub fast_path: String,
    /// Engine shards that died, and why ([`Engine::faults`]).
    #[serde(default)]
    pub engine_faults: Vec<String>,
}

/// Environment variable of `vemu up`: `VEMU_FAST_PATH=off` runs every link direction
/// through the engine (to compare, or to test the engine's path).
pub const FAST_PATH_ENV: &str = "VEMU_FAST_PATH";

/// A machine that hosts nodes and links.
pub trait Worker: Send {
    fn call(&mut self, req: WorkerRequest, progress: &mut dyn FnMut(usize, usize)) -> WorkerReply;

    /// Start capturing on interfaces (see [`Engine::capture`]); returns its id.
    fn capture(&mut self, on: &[CaptureSpec], tx: std::sync::mpsc::SyncSender<Captured>) -> Result<u64>;

    fn stop_capture(&mut self, id: u64);
}

/// Nodes created concurrently while a lab comes up.
const BUILD_THREADS: usize = 4;

/// The worker for this machine.
#[derive(Default)]
pub struct LocalWorker {
    lab: Option<LabPaths>,
    engine: Option<Engine>,
    supervisor: Option<Supervisor>,
    /// Members of each segment.
    sizes: Vec<usize>,
    /// Each node's name and interfaces.
    ifaces: Vec<(String, Vec<String>)>,
    /// A netlink socket in the namespace of each node with TAP interfaces (its name and
    /// theirs), opened when first asked for TAP counters (they hold the namespaces:
    /// closed before the lab is removed).
    node_sockets: Option<Vec<(String, Vec<String>, vemu_host::netlink::Netlink)>>,
    /// "on", or why the kernel fast path is off.
    fast_path: String,
    /// Each link interface's devices in the plane (`NODE:IFACE`, veth peer, engine's
    /// TAP), whose counters stand for the interface's queue, and a netlink socket there.
    plane_taps: Vec<(String, (String, String))>,
    plane_socket: Option<vemu_host::netlink::Netlink>,
}

/// Load the kernel fast path for a lab with links, or say why not.
fn fast_path(paths: &LabPaths, plan: &Plan) -> Result<Arc<FastPath>, String> {
    if plan.links.is_empty() {
        return Err("the lab has no point-to-point links".into());
    }
    if std::env::var(FAST_PATH_ENV).is_ok_and(|v| v == "off") {
        return Err(format!("{FAST_PATH_ENV}=off"));
    }
    vemu_host::create_plane(paths).map_err(|e| format!("{e:#}"))?;
    let ctl = vemu_host::in_netns(&paths.plane(), || Ok(std::os::unix::net::UnixDatagram::unbound()?.into())).map_err(|e| format!("{e:#}"))?;
    FastPath::load(ctl).map(Arc::new).map_err(|e| format!("{e:#}"))
}

impl LocalWorker {
    fn build(&mut self, plan: Plan, epoch: u64, progress: &mut dyn FnMut(usize, usize)) -> Result<()> {
        let paths = LabPaths::new(&plan.name);
        let hosts: String = std::iter::once("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n".to_string())
            .chain(plan.hosts.iter().map(|(a, n)| format!("{a}\t{n}\n")))
            .collect();
        vemu_host::prepare_lab(&paths, &hosts, &plan.nodes, plan.storage_bytes)?;
        self.lab = Some(paths.clone());
        self.sizes = plan.segments.iter().map(|g| g.members.len()).collect();
        self.ifaces = plan.nodes.iter().map(|n| (n.name.clone(), n.ifaces.iter().map(|i| i.name.clone()).collect())).collect();
        let template = vemu_host::mount_template(&paths)?;
        let fast = match fast_path(&paths, &plan) {
            Ok(f) => {
                self.fast_path = "on".into();
                Some(f)
            }
            Err(why) => {
                if !plan.links.is_empty() {
                    eprintln!("kernel fast path off ({why}): every link direction goes through the engine");
                }
                self.fast_path = format!("off: {why}");
                None
            }
        };
        // With the fast path, a link's interfaces are veths whose peers are in the plane.
        let mut peers: Vec<Vec<Option<String>>> = plan.nodes.iter().map(|n| vec![None; n.ifaces.len()]).collect();
        if fast.is_some() {
            for (l, link) in plan.links.iter().enumerate() {
                for (side, e) in [link.a, link.b].into_iter().enumerate() {
                    peers[e.node][e.iface] = Some(vemu_host::plane_names(l, side).0);
                }
            }
        }

        // Nodes, a few at a time.
        let total = plan.nodes.len();
        let taps: Vec<Mutex<Option<Vec<Option<OwnedFd>>>>> = (0..total).map(|_| Mutex::new(None)).collect();
        let next = AtomicUsize::new(0);
        let done = AtomicUsize::new(0);
        let first_error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        // The plane's names of each link end (veth peer, engine's TAP), links in order.
        let names: Vec<(String, String)> = match fast {
            Some(_) => (0..plan.links.len()).flat_map(|l| [0, 1].map(|side| vemu_host::plane_names(l, side))).collect(),
            None => Vec::new(),
        };
        let plane_taps = std::thread::scope(|s| {
            // The engine's TAP devices in the plane are made meanwhile (the nodes'
            // threads spend much of their time on other things than devices).
            let plane_taps = fast.as_ref().map(|fast| {
                let taps: Vec<String> = names.iter().map(|(_, t)| t.clone()).collect();
                let paths = &paths;
                s.spawn(move || vemu_host::plane_taps(paths, &taps, fast.program()))
            });
            for _ in 0..BUILD_THREADS.min(total) {
                let tx = tx.clone();
                s.spawn(|| {
                    let tx = tx;
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= total || first_error.locked().is_some() {
                            break;
                        }
                        match vemu_host::create_node(&paths, &plan.nodes[i], &template, &peers[i]) {
                            Ok(fds) => *taps[i].locked() = Some(fds),
                            Err(e) => {
                                let e = e.context(format!("creating node '{}'", plan.nodes[i].name));
                                first_error.locked().get_or_insert(e);
                            }
                        }
                        done.fetch_add(1, Ordering::Relaxed);
                        let _ = tx.send(());
                    }
                });
            }
            drop(tx);
            while rx.recv().is_ok() {
                progress(done.load(Ordering::Relaxed), total);
            }
            plane_taps.map(|t| t.join().unwrap_or_else(|_| Err(anyhow!("the thread making the plane's devices panicked"))))
        });
        if let Some(e) = first_error.into_inner().unwrap() {
            return Err(e);
        }
        let plane_taps = plane_taps.transpose()?;

        // Links: hand both TAP devices of each to the engine (with the fast path, the
        // engine's own in the plane: frames reach them only while a direction needs it).
        let mut taps: Vec<Vec<Option<OwnedFd>>> = taps.into_iter().map(|m| m.into_inner().unwrap().unwrap_or_default()).collect();
        let mut plane: Vec<Option<(OwnedFd, PlaneDevs)>> = Vec::new();
        if let (Some(fast), Some(plane_taps)) = (&fast, plane_taps) {
            let veths: Vec<String> = names.iter().map(|(v, _)| v.clone()).collect();
            let veths = vemu_host::attach_plane(&paths, &veths, fast.program())?;
            for (i, (veth, (tap, fd))) in veths.into_iter().zip(plane_taps).enumerate() {
                let (l, side) = (i / 2, i % 2);
                fast.route(tap, Route::Deliver { peer_of: veth })?;
                fast.route(veth, Route::Engine { tap })?;
                let end = if side == 0 { plan.links[l].a } else { plan.links[l].b };
                self.plane_taps.push((plan.endpoint_name(end), names[i].clone()));
                plane.push(Some((fd, PlaneDevs { veth, tap })));
            }
        }
        let mut specs = Vec::with_capacity(plan.links.len());
        for (i, l) in plan.links.iter().enumerate() {
            let mut take = |e: vemu_scenario::EndpointRef, side: usize| -> Result<(OwnedFd, Option<PlaneDevs>)> {
                if let Some((fd, devs)) = plane.get_mut(2 * i + side).and_then(Option::take) {
                    return Ok((fd, Some(devs)));
                }
                let fd = taps[e.node][e.iface].take().ok_or_else(|| anyhow!("interface {} was not created", plan.endpoint_name(e)))?;
                Ok((fd, None))
            };
            let (a, pa) = take(l.a, 0)?;
            let (b, pb) = take(l.b, 1)?;
            specs.push(LinkSpec {
                mtu: plan.nodes[l.a.node].ifaces[l.a.iface].mtu,
                a,
                b,
                plane: pa.zip(pb).map(|(a, b)| [a, b]),
                forward: l.forward.clone(),
                reverse: l.reverse.clone(),
                seeds: [derive_seed(plan.seed, 2 * i as u64), derive_seed(plan.seed, 2 * i as u64 + 1)],
                remote: None,
            });
        }
        // Random streams: 2 per link, then 2 per segment member, all from the lab seed.
        let mut stream = 2 * plan.links.len() as u64;
        let mut segments = Vec::with_capacity(plan.segments.len());
        for g in &plan.segments {
            let mut members = Vec::with_capacity(g.members.len());
            for m in &g.members {
                let e = m.end;
                let fd = taps[e.node][e.iface].take().ok_or_else(|| anyhow!("interface {} was not created", plan.endpoint_name(e)))?;
                members.push(MemberSpec {
                    mtu: plan.nodes[e.node].ifaces[e.iface].mtu,
                    fd,
                    vlan: m.vlan,
                    egress: m.egress.clone(),
                    ingress: m.ingress.clone(),
                    seeds: [derive_seed(plan.seed, stream), derive_seed(plan.seed, stream + 1)],
                });
                stream += 2;
            }
            let radio = g.wireless.as_ref().map(|w| (w.medium.clone(), w.radios.iter().map(|r| r.start).collect()));
            segments.push(SegmentSpec { members, capacity_bps: g.capacity_bps, aging_ns: g.aging_ns, snooping: g.snooping, radio });
        }
        let shards = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        self.engine = Some(Engine::start(specs, segments, shards, LabClock { epoch_ns: epoch }, fast)?);

        let commands = plan.nodes.iter().flat_map(|n| n.run.iter().map(|c| (n.name.clone(), c.clone()))).collect();
        self.supervisor = Some(Supervisor::start(paths, commands));
        Ok(())
    }

    fn tap_queues(&mut self) -> Result<Vec<TapQueue>> {
        let paths = self.lab.as_ref().ok_or_else(|| anyhow!("the lab is not built"))?;
        // Link interfaces with the fast path: the engine's TAP devices in the plane.
        let mut out = Vec::new();
        let on_plane: HashSet<&str> = self.plane_taps.iter().map(|(port, _)| port.as_str()).collect();
        if !self.plane_taps.is_empty() {
            if self.plane_socket.is_none() {
                self.plane_socket = Some(vemu_host::netlink::Netlink::open_in(&paths.plane())?);
            }
            let stats: HashMap<String, _> = self.plane_socket.as_mut().unwrap().link_stats()?.into_iter().collect();
            for (port, (veth, tap)) in &self.plane_taps {
                // Frames are lost on the way to the engine where the plane's backlog is
                // full (the veth peer's rx_dropped) or the TAP's queue is (its tx_dropped).
                // (The veth peer also counts what a node sends while its link is down.)
                if let (Some(v), Some(t)) = (stats.get(veth), stats.get(tap)) {
                    out.push(TapQueue { port: port.clone(), read: t.tx_packets, dropped: t.tx_dropped + v.rx_dropped });
                }
            }
        }
        // The others are TAP devices in the nodes: a socket in each node that has one.
        if self.node_sockets.is_none() {
            let mut socks = Vec::new();
            for (n, ifaces) in &self.ifaces {
                let taps: Vec<String> = ifaces.iter().filter(|i| !on_plane.contains(format!("{n}:{i}").as_str())).cloned().collect();
                if !taps.is_empty() {
                    socks.push((n.clone(), taps, vemu_host::netlink::Netlink::open_in(&paths.netns_pin(n))?));
                }
            }
            self.node_sockets = Some(socks);
        }
        for (node, taps, sock) in self.node_sockets.iter_mut().flatten() {
            for (name, st) in sock.link_stats()? {
                if taps.contains(&name) {
                    out.push(TapQueue { port: format!("{node}:{name}"), read: st.tx_packets, dropped: st.tx_dropped });
                }
            }
        }
        Ok(out)
    }

    fn teardown(&mut self) -> Result<()> {
        self.node_sockets = None;
        self.plane_socket = None;
        // Forwarding ends first, whatever it had queued (a start-up flood must not hold
        // `down` up); the devices stay open until the nodes' processes are gone.
        if let Some(e) = self.engine.as_mut() {
            e.halt();
        }
        if let Some(mut s) = self.supervisor.take() {
            s.stop();
        }
        // Processes and namespaces next, so nothing in a node sees its interfaces
        // vanish while it still runs; then the engine closes the TAP devices.
        let removed = match self.lab.take() {
            Some(paths) => vemu_host::remove_lab(&paths.lab),
            None => Ok(()),
        };
        if let Some(e) = self.engine.take() {
            e.stop();
        }
        removed
    }

    fn engine(&self) -> Result<&Engine> {
        self.engine.as_ref().ok_or_else(|| anyhow!("the lab is not built"))
    }
}

impl Worker for LocalWorker {
    fn capture(&mut self, on: &[CaptureSpec], tx: std::sync::mpsc::SyncSender<Captured>) -> Result<u64> {
        Ok(self.engine()?.capture(on, tx))
    }

    fn stop_capture(&mut self, id: u64) {
        if let Some(e) = &self.engine {
            e.stop_capture(id);
        }
    }

    fn call(&mut self, req: WorkerRequest, progress: &mut dyn FnMut(usize, usize)) -> WorkerReply {
        let r: Result<WorkerReply> = (|| match req {
            WorkerRequest::Build { plan, clock_epoch_ns } => {
                if let Err(e) = self.build(plan, clock_epoch_ns, progress) {
                    // Never leave a half-built lab.
                    if let Err(e2) = self.teardown() {
                        return Err(e.context(format!("and cleaning up failed too: {e2:#}")));
                    }
                    return Err(e);
                }
                Ok(WorkerReply::Done)
            }
            WorkerRequest::Patch { target, dir, patch } => Ok(WorkerReply::Impairments(self.engine()?.patch(target, dir, patch)?)),
            WorkerRequest::SetUp { target, up } => {
                self.engine()?.set_up(target, up);
                Ok(WorkerReply::Done)
            }
            WorkerRequest::Stats => {
                let e = self.engine()?;
                Ok(WorkerReply::Stats(Counters {
                    links: (0..e.link_count()).map(|i| e.stats(Target::Link(i))).collect(),
                    members: self.sizes.iter().enumerate().map(|(g, &n)| (0..n).map(|m| e.stats(Target::Member(g, m))).collect()).collect(),
                    segments: (0..self.sizes.len()).map(|g| e.segment_stats(g)).collect(),
                    shard_work_ns: e.work_ns(),
                    fast_path: self.fast_path.clone(),
                    engine_faults: e.faults(),
                }))
            }
            WorkerRequest::NodeState { node, up } => {
                let (Some(sup), Some(paths)) = (&self.supervisor, &self.lab) else {
                    return Err(anyhow!("the lab is not built"));
                };
                if up {
                    sup.start_node(paths, &node);
                } else {
                    sup.stop_node(paths, &node, std::time::Duration::from_secs(2));
                }
                Ok(WorkerReply::Done)
            }
            WorkerRequest::Processes => {
                Ok(WorkerReply::Processes(self.supervisor.as_ref().map(|s| s.status()).unwrap_or_default()))
            }
            WorkerRequest::Positions { seg, positions } => {
                self.engine()?.set_positions(seg, positions);
                Ok(WorkerReply::Done)
            }
            WorkerRequest::Radio { seg } => Ok(WorkerReply::Radio(self.engine()?.radio(seg))),
            WorkerRequest::TapQueues => Ok(WorkerReply::TapQueues(self.tap_queues()?)),
            WorkerRequest::Backlog => Ok(WorkerReply::Backlog(self.engine()?.backlog_ns())),
            WorkerRequest::SetLimits { node, limits } => {
                let paths = self.lab.as_ref().ok_or_else(|| anyhow!("the lab is not built"))?;
                vemu_host::cgroup::set_limits(&paths.lab, &node, &limits)?;
                Ok(WorkerReply::Done)
            }
            WorkerRequest::Usage => {
                let paths = self.lab.as_ref().ok_or_else(|| anyhow!("the lab is not built"))?;
                Ok(WorkerReply::Usage(self.ifaces.iter().map(|(n, _)| vemu_host::cgroup::usage(&paths.lab, n)).collect()))
            }
            WorkerRequest::Teardown => {
                self.teardown()?;
                Ok(WorkerReply::Done)
            }
        })();
        r.unwrap_or_else(|e| WorkerReply::Error(format!("{e:#}")))
    }
}
