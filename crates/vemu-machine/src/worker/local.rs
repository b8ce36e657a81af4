//! The worker for labs on this machine (and for an agent's share of one): it builds
//! nodes, links and the engine from a plan, and carries out the controller's orders.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Context, Result};
use vemu_engine::core::Spur;
use vemu_engine::divert::{DivertSpec, Diverter};
use vemu_engine::{
    CaptureSpec, Captured, DirStats, Engine, Fast, FastPath, KernelTunnel, LabClock, LinkSpec,
    MakeTaps, MemberSpec, PlaneDevs, RemoteEnd, SegStats, SegmentSpec, TapsOf, Target, TrunkInSpec,
    TrunkSpec,
};
use vemu_host::LabPaths;
use vemu_scenario::{NodeKind, Plan};

use super::layout::{divert_seeds, link_seeds, member_seeds, Layout, PlaneEnd};
use super::*;
use crate::supervise::Supervisor;
use crate::LockExt;

mod build;

/// A share built and waiting for its tunnels' far ends.
struct Pending {
    specs: Vec<LinkSpec>,
    segments: Vec<SegmentSpec>,
    trunks_in: Vec<TrunkInSpec>,
    fast: Option<Fast>,
    clock: LabClock,
    commands: Vec<(String, String)>,
    /// Largest size of a node's log (the plan's `log_bytes`).
    log_bytes: u64,
    /// The first netfilter queue of the lab's diverted paths (rules in place), and the paths.
    diverts: Option<(u16, Vec<DivertSpec>)>,
    /// The engine's shards, and the tunnel socket of each that has one.
    shards: usize,
    tunnel_sockets: Vec<Option<OwnedFd>>,
    /// The lab's key of the datagrams between machines (a share's).
    tunnel_key: Option<vemu_engine::TunnelKey>,
}

/// Socket buffers of an engine shard's tunnel socket, bytes (it carries all the
/// shard's links to other machines).
const TUNNEL_SOCKET_BUFFER: usize = 16 << 20;

/// Nodes created concurrently while a lab comes up.
const BUILD_THREADS: usize = 4;

/// The worker for this machine.
#[derive(Default)]
pub struct LocalWorker {
    lab: Option<LabPaths>,
    engine: Option<Engine>,
    supervisor: Option<Supervisor>,
    /// Members of each segment of the lab.
    sizes: Vec<usize>,
    /// Every node of the lab, by name, and the lab's number of links.
    nodes: Vec<String>,
    lab_links: usize,
    /// The links and segments of the lab with an end on this machine, in the engine's order.
    links_here: Vec<usize>,
    segs_here: Vec<usize>,
    /// Members here (segment, member) of segments whose switch or channel is on another
    /// machine: each is a link of the engine's, after `links_here` (forward = the
    /// member's egress, its side b a tunnel to the segment's machine).
    spurs_here: Vec<(usize, usize)>,
    /// A share built, waiting for [`WorkerRequest::Connect`].
    pending: Option<Pending>,
    /// Each node of this machine: its name, interfaces and kind.
    ifaces: Vec<(String, Vec<String>, NodeKind)>,
    /// A netlink socket in the namespace of each node with TAP interfaces (its name and
    /// theirs), opened when first asked for TAP counters (they hold the namespaces:
    /// closed before the lab is removed).
    node_sockets: Option<Vec<(String, Vec<String>, vemu_host::netlink::Netlink)>>,
    /// "on", or why the kernel fast path is off.
    fast_path: String,
    /// Each link interface and LAN port with devices in the plane, whose counters stand
    /// for the interface's queue once the engine's TAP device is made; the index of each
    /// TAP device made so far in the plane, by name; and a netlink socket there.
    plane_ports: Vec<PlanePort>,
    tap_indexes: Arc<Mutex<HashMap<String, u32>>>,
    plane_socket: Option<vemu_host::netlink::Netlink>,
    /// The machine's traffic through the lab's diverted paths.
    diverter: Option<Diverter>,
    /// The lab's VXLAN device in the plane (its index), when made.
    vxlan: Option<u32>,
    /// The lab clock, once the share started.
    clock: Option<LabClock>,
    /// This machine's name in the plan (empty: a lab of one machine), and what its
    /// software waited for a CPU.
    machine: String,
    cpu_watch: Arc<Mutex<vemu_host::cpu_wait::CpuWatch>>,
    /// A [`CpuReader`] was handed out ([`Worker::cpu_reader`]): its holder reads what
    /// the software waited for, and `Stats` no longer does.
    cpu_lent: bool,
}

// The far ends' indexes that vemu-host chooses are those the fast path keeps in arrays.
const _: () = assert!(vemu_host::PLANE_INDEX_BASE == vemu_engine::DENSE_BASE);

/// A link end or LAN port with devices in the plane.
struct PlanePort {
    /// `NODE:IFACE`.
    port: String,
    /// The index of the veth peer of the node's interface.
    veth: u32,
    /// The name of the engine's TAP device (made when the port first needs the engine).
    tap: String,
}

impl LocalWorker {
    /// Whether node `node` is on this machine.
    pub fn hosts(&self, node: &str) -> bool {
        self.ifaces.iter().any(|(n, _, _)| n == node)
    }

    /// Start the share built: join its tunnels to the other machines' (`peers`: link,
    /// address of its socket there), start the engine and the nodes' commands.
    pub fn connect(
        &mut self,
        peers: &[(usize, SocketAddr)],
        vxlan: &[(usize, std::net::IpAddr)],
    ) -> Result<()> {
        let Some(mut p) = self.pending.take() else { bail!("nothing is waiting to start") };
        // The kernel's way to the machines that have it too.
        for l in &mut p.specs {
            if let (Some(kt), Some(r)) = (l.kernel_tunnel.as_mut(), l.remote) {
                kt.remote = vxlan.iter().find(|(t, _)| *t == r.link_id as usize).map(|(_, a)| *a);
            }
        }
        // Every tunnel's far end: of links, of segment members, of trunks (both ends).
        let far = |r: &mut RemoteEnd| -> Result<()> {
            let t = r.link_id as usize;
            r.far = Some(
                peers
                    .iter()
                    .find(|(l, _)| *l == t)
                    .map(|(_, a)| *a)
                    .ok_or_else(|| anyhow!("no tunnel address for tunnel {t}"))?,
            );
            Ok(())
        };
        for r in p.specs.iter_mut().filter_map(|l| l.remote.as_mut()) {
            far(r)?;
        }
        for g in &mut p.segments {
            for r in g.members.iter_mut().filter_map(|m| m.remote.as_mut()) {
                far(r)?;
            }
            for t in &mut g.trunks {
                far(&mut t.remote)?;
            }
        }
        for t in &mut p.trunks_in {
            far(&mut t.remote)?;
        }
        self.clock = Some(p.clock);
        self.engine = Some(Engine::start(
            p.specs,
            p.segments,
            p.trunks_in,
            p.shards,
            p.clock,
            p.fast,
            p.tunnel_sockets,
            p.tunnel_key,
        )?);
        if let Some((base, specs)) = p.diverts {
            self.diverter = Some(Diverter::start(base, specs, p.clock)?);
        }
        let paths = self.lab.clone().ok_or_else(|| anyhow!("the lab is not built"))?;
        self.supervisor = Some(Supervisor::start(paths, p.commands, p.log_bytes));
        Ok(())
    }

    fn read_tap_queues(&mut self) -> Result<Vec<TapQueue>> {
        let paths = self.lab.as_ref().ok_or_else(|| anyhow!("the lab is not built"))?;
        // Link interfaces with the fast path: the engine's TAP devices in the plane.
        let mut out = Vec::new();
        let on_plane: HashSet<&str> = self.plane_ports.iter().map(|p| p.port.as_str()).collect();
        // Only ports whose TAP device is made (the others never reached the engine),
        // each asked for by index: a lab on the kernel fast path asks nothing.
        let taps = self.tap_indexes.locked();
        let made: Vec<(&PlanePort, u32)> =
            self.plane_ports.iter().filter_map(|p| Some((p, *taps.get(&p.tap)?))).collect();
        drop(taps);
        if !made.is_empty() {
            if self.plane_socket.is_none() {
                self.plane_socket = Some(vemu_host::netlink::Netlink::open_in(&paths.plane())?);
            }
            let sock = self.plane_socket.as_mut().expect("opened above");
            for (p, tap) in made {
                // Frames are lost on the way to the engine where the plane's backlog is
                // full (the veth peer's rx_dropped) or the TAP's queue is (its tx_dropped).
                // (The veth peer also counts what a node sends while its link is down.)
                let (v, t) = (sock.stats_of(p.veth)?, sock.stats_of(tap)?);
                out.push(TapQueue {
                    port: p.port.clone(),
                    read: t.tx_packets,
                    dropped: t.tx_dropped + v.rx_dropped,
                });
            }
        }
        // The others are TAP devices in the nodes: a socket in each node that has one.
        if self.node_sockets.is_none() {
            let mut socks = Vec::new();
            // (A NIC's counters say nothing of the engine's reading: not watched.)
            for (n, ifaces, kind) in self.ifaces.iter().filter(|(_, _, k)| *k != NodeKind::External)
            {
                let taps: Vec<String> = ifaces
                    .iter()
                    .filter(|i| !on_plane.contains(format!("{n}:{i}").as_str()))
                    .cloned()
                    .collect();
                if !taps.is_empty() {
                    let sock = match kind {
                        NodeKind::Host => vemu_host::netlink::Netlink::open()?,
                        _ => vemu_host::netlink::Netlink::open_in(&paths.netns_pin(n))?,
                    };
                    socks.push((n.clone(), taps, sock));
                }
            }
            self.node_sockets = Some(socks);
        }
        for (node, taps, sock) in self.node_sockets.iter_mut().flatten() {
            for (name, st) in sock.link_stats()? {
                if taps.contains(&name) {
                    out.push(TapQueue {
                        port: format!("{node}:{name}"),
                        read: st.tx_packets,
                        dropped: st.tx_dropped,
                    });
                }
            }
        }
        Ok(out)
    }

    fn take_down(&mut self) -> Result<()> {
        self.node_sockets = None;
        self.plane_socket = None;
        // Forwarding ends first, whatever it had queued (a start-up flood must not hold
        // `down` up); the devices stay open until the nodes' processes are gone.
        if let Some(e) = self.engine.as_mut() {
            e.halt();
        }
        if let Some(d) = self.diverter.take() {
            d.stop();
        }
        if let Some(mut s) = self.supervisor.take() {
            s.stop();
        }
        // The engine's devices in the plane go together (closing their descriptors one
        // by one would wait for the kernel once per device); the nodes see nothing of it.
        // The VXLAN device goes now too, and its UDP port with it (not whenever the
        // plane namespace does).
        if let Some(paths) = &self.lab {
            if let Err(e) = vemu_host::remove_plane_taps(paths) {
                eprintln!("vemu: {e:#}");
            }
            if let Some(ix) = self.vxlan.take() {
                if let Err(e) = vemu_host::remove_plane_device(paths, ix) {
                    eprintln!("vemu: {e:#}");
                }
            }
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

    /// The engine's number of a link or segment of the lab.
    fn local(&self, target: Target) -> Result<Target> {
        Ok(match target {
            Target::Link(l) => Target::Link(
                self.links_here
                    .iter()
                    .position(|&x| x == l)
                    .ok_or_else(|| anyhow!("link {l} is not on this machine"))?,
            ),
            // A member here whose segment is elsewhere: its link toward it.
            Target::Member(g, m) => match self.spurs_here.iter().position(|&x| x == (g, m)) {
                Some(j) => Target::Link(self.links_here.len() + j),
                None => Target::Member(self.local_seg(g)?, m),
            },
        })
    }

    fn local_seg(&self, g: usize) -> Result<usize> {
        self.segs_here
            .iter()
            .position(|&x| x == g)
            .ok_or_else(|| anyhow!("segment {g} is not on this machine"))
    }
}

impl LocalWorker {
    /// What reads this machine's CPU waits for the lab's nodes here (once the lab is
    /// built).
    fn cpu_reader_here(&self) -> Option<CpuReader> {
        Some(CpuReader {
            watch: self.cpu_watch.clone(),
            paths: self.lab.clone()?,
            nodes: self.ifaces.iter().map(|(n, ..)| n.clone()).collect(),
            machine: self.machine.clone(),
        })
    }
}

impl Worker for LocalWorker {
    fn cpu_reader(&mut self) -> Option<CpuReader> {
        let r = self.cpu_reader_here()?;
        self.cpu_lent = true;
        Some(r)
    }

    fn door(&self, node: usize) -> Result<crate::door::Door, WorkerError> {
        let paths = self.lab.clone().ok_or_else(|| WorkerError::caller("the lab is not built"))?;
        let name = self.nodes.get(node).ok_or_else(|| WorkerError::caller("no such node"))?;
        Ok(crate::door::Door::Here(crate::door::HereDoor::new(paths, name)))
    }

    fn capture(
        &mut self,
        on: &[CaptureSpec],
        tx: std::sync::mpsc::SyncSender<Captured>,
    ) -> Result<u64> {
        // (A member's link toward its segment has the member at side a. A link keeps
        // its side, whatever its number here.)
        let on = on
            .iter()
            .map(|c| {
                let target = self.local(c.target)?;
                let side = match (c.target, target) {
                    (Target::Member(..), Target::Link(_)) => 0,
                    _ => c.side,
                };
                Ok(CaptureSpec { target, side, ..*c })
            })
            .collect::<Result<Vec<_>>>()?;
        self.engine()?.capture(&on, tx)
    }

    fn stop_capture(&mut self, id: u64) {
        if let Some(e) = &self.engine {
            e.stop_capture(id);
        }
    }

    fn build(
        &mut self,
        plan: Plan,
        clock_epoch_ns: u64,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<(), WorkerError> {
        self.build_or_undo(plan, clock_epoch_ns, None, progress).map(drop)
    }

    fn patch(
        &mut self,
        target: Target,
        dir: usize,
        patch: ImpairmentsPatch,
    ) -> Result<Option<Impairments>, WorkerError> {
        let target = self.local(target).map_err(internal)?;
        Ok(Some(self.engine().map_err(internal)?.patch(target, dir, patch).map_err(internal)?))
    }

    fn set_up(&mut self, target: Target, up: bool) -> Result<(), WorkerError> {
        let target = self.local(target).map_err(internal)?;
        self.engine().map_err(internal)?.set_up(target, up).map_err(internal)
    }

    fn node_state(&mut self, node: &str, up: bool) -> Result<(), WorkerError> {
        let (Some(sup), Some(paths)) = (&self.supervisor, &self.lab) else {
            return Err(WorkerError::internal("the lab is not built"));
        };
        if up {
            sup.start_node(paths, node);
        } else {
            sup.stop_node(paths, node, std::time::Duration::from_secs(2));
        }
        Ok(())
    }

    fn stats(&mut self) -> Result<Counters, WorkerError> {
        let cpu = match (self.cpu_lent, self.cpu_reader_here()) {
            (false, Some(r)) => vec![r.read()],
            _ => Vec::new(),
        };
        let e = self.engine().map_err(internal)?;
        // In the lab's numbering: what is not on this machine counts nothing here.
        let mut links = vec![<[DirStats; 2]>::default(); self.lab_links];
        for (k, &l) in self.links_here.iter().enumerate() {
            links[l] = e.stats(Target::Link(k));
        }
        let mut members: Vec<Vec<[DirStats; 2]>> =
            self.sizes.iter().map(|&n| vec![Default::default(); n]).collect();
        let mut segments = vec![SegStats::default(); self.sizes.len()];
        for (k, &g) in self.segs_here.iter().enumerate() {
            members[g] = (0..self.sizes[g]).map(|m| e.stats(Target::Member(k, m))).collect();
            segments[g] = e.segment_stats(k);
        }
        for (j, &(g, m)) in self.spurs_here.iter().enumerate() {
            members[g][m] = e.stats(Target::Link(self.links_here.len() + j));
        }
        let diverts = self.diverter.as_ref().map(|d| d.stats()).unwrap_or_default();
        Ok(Counters {
            links,
            members,
            segments,
            shard_work_ns: e.work_ns(),
            fast_path: self.fast_path.clone(),
            engine_faults: e.faults(),
            diverts,
            cpu,
        })
    }

    fn processes(&mut self) -> Result<Vec<ProcStatus>, WorkerError> {
        Ok(self.supervisor.as_ref().map(|s| s.status()).unwrap_or_default())
    }

    fn positions(
        &mut self,
        seg: usize,
        positions: Vec<vemu_radio::Pos>,
    ) -> Result<(), WorkerError> {
        let seg = self.local_seg(seg).map_err(internal)?;
        self.engine().map_err(internal)?.set_positions(seg, positions);
        Ok(())
    }

    fn radio(&mut self, seg: usize, bss_after: u64) -> Result<RadioSnapshot, WorkerError> {
        let seg = self.local_seg(seg).map_err(internal)?;
        Ok(self.engine().map_err(internal)?.radio(seg, bss_after))
    }

    fn tap_queues(&mut self) -> Result<Vec<TapQueue>, WorkerError> {
        self.read_tap_queues().map_err(internal)
    }

    fn backlog(&mut self) -> Result<u64, WorkerError> {
        Ok(self.engine().map_err(internal)?.backlog_ns())
    }

    fn set_limits(&mut self, node: &str, limits: vemu_scenario::Limits) -> Result<(), WorkerError> {
        let paths =
            self.lab.as_ref().ok_or_else(|| WorkerError::internal("the lab is not built"))?;
        vemu_host::cgroup::set_limits(&paths.lab, node, &limits).map_err(internal)
    }

    fn usage(&mut self) -> Result<Vec<vemu_host::cgroup::Usage>, WorkerError> {
        let paths =
            self.lab.as_ref().ok_or_else(|| WorkerError::internal("the lab is not built"))?;
        // In the lab's order of nodes; those of other machines use nothing here.
        let here: HashSet<&str> = self.ifaces.iter().map(|(n, _, _)| n.as_str()).collect();
        Ok(self
            .nodes
            .iter()
            .map(|n| match here.contains(n.as_str()) {
                true => vemu_host::cgroup::usage(&paths.lab, n),
                false => Default::default(),
            })
            .collect())
    }

    fn traffic_end(&mut self, node: &str, end: crate::traffic::End) -> Result<(), WorkerError> {
        let (Some(paths), Some(clock)) = (&self.lab, self.clock) else {
            return Err(WorkerError::internal("the lab is not running"));
        };
        if !self.hosts(node) {
            return Err(WorkerError::internal(format!("node '{node}' is not on this machine")));
        }
        crate::traffic::start_end(paths, node, &end, clock).map_err(internal)
    }

    fn traffic_records(
        &mut self,
        _node: &str,
        file: &str,
        offset: u64,
    ) -> Result<String, WorkerError> {
        let paths =
            self.lab.as_ref().ok_or_else(|| WorkerError::internal("the lab is not built"))?;
        crate::traffic::records_chunk(paths, file, offset).map_err(internal)
    }

    fn teardown(&mut self) -> Result<(), WorkerError> {
        self.take_down().map_err(internal)
    }
}

/// What only an agent asks of its machine's share.
impl LocalWorker {
    /// Build the plan (with `share`: this machine's part of it, answering with its
    /// tunnel endpoints and whether it made the lab's VXLAN device); a failed build is
    /// taken down again.
    pub fn build_or_undo(
        &mut self,
        plan: Plan,
        clock_epoch_ns: u64,
        share: Option<Share>,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<(Vec<(usize, SocketAddr)>, bool), WorkerError> {
        match self.build_share(plan, clock_epoch_ns, share, progress) {
            Ok(endpoints) => Ok((endpoints, self.vxlan.is_some())),
            Err(e) => {
                // Never leave a half-built lab.
                if let Err(e2) = self.take_down() {
                    return Err(internal(e.context(format!("and cleaning up failed too: {e2:#}"))));
                }
                Err(internal(e))
            }
        }
    }

    /// What this machine holds of the lab for a controller that takes it over from
    /// another machine: a JSON object with the lab's `plan`, the `saved` state its
    /// controller last handed on (null if none) and what the lab clock reads here
    /// (`lab_now_ns`).
    pub fn state(&self) -> Result<String, WorkerError> {
        let paths =
            self.lab.as_ref().ok_or_else(|| WorkerError::internal("the lab is not built"))?;
        let plan: serde_json::Value = std::fs::read(paths.plan())
            .context("reading the lab's plan")
            .and_then(|b| serde_json::from_slice(&b).context("reading the lab's plan"))
            .map_err(internal)?;
        let saved: serde_json::Value = std::fs::read(saved_copy(paths))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let lab_now_ns = self.clock.map(|c| c.now_ns());
        Ok(serde_json::json!({"plan": plan, "saved": saved, "lab_now_ns": lab_now_ns}).to_string())
    }
}
