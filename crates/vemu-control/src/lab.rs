//! A running lab as the controller holds it: what was built (the plan), what was set
//! at run time, and every operation on it (status, link and node changes, captures,
//! statistics). Operations fail with a [`LabError`]; the HTTP layer ([`crate::api`])
//! maps it to a status code, and nothing here knows about HTTP.

use std::sync::mpsc::Sender;

use serde_json::{json, Value};
use vemu_engine::{DirStats, LabClock, Target};
use vemu_link::Impairments;
use vemu_scenario::{Plan, PortRef};

use crate::error::LabError;
use vemu_machine::worker::{Counters, Worker};
use vemu_scenario::Limits;
mod flows;
mod mobility;
pub mod saved;
mod status;
pub(crate) mod wifi;
use status::dir_status;
#[cfg(test)]
mod tests;

use crate::{Direction, LabStatus, LinkStatus};

/// A change of a node's limits: a field that is `Some` sets (`Some(None)`: lifts) that limit.
#[derive(Debug, Clone, Copy, Default)]
pub struct LimitsPatch {
    pub cpu_cores: Option<Option<f64>>,
    pub memory_bytes: Option<Option<u64>>,
    pub pids: Option<Option<u64>>,
}

/// What the controller set on one link or segment port.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PortState {
    pub(crate) up: bool,
    /// Forward and reverse (links), egress and ingress (segment ports).
    pub(crate) imps: [Impairments; 2],
}

impl PortState {
    /// Each link's state as the plan sets it.
    pub(crate) fn of_links(plan: &Plan) -> Vec<PortState> {
        plan.links
            .iter()
            .map(|l| PortState { up: true, imps: [(*l.forward).clone(), (*l.reverse).clone()] })
            .collect()
    }

    /// Whether it is up with these impairments (as the plan sets it).
    pub(crate) fn is(&self, a: &Impairments, b: &Impairments) -> bool {
        self.up && self.imps[0] == *a && self.imps[1] == *b
    }

    /// Each segment port's state as the plan sets it, by segment.
    pub(crate) fn of_members(plan: &Plan) -> Vec<Vec<PortState>> {
        plan.segments
            .iter()
            .map(|g| {
                g.members
                    .iter()
                    .map(|m| PortState { up: true, imps: [m.egress.clone(), m.ingress.clone()] })
                    .collect()
            })
            .collect()
    }
}

pub struct Controller {
    pub(crate) plan: Plan,
    pub(crate) worker: Box<dyn Worker>,
    pub(crate) links: Vec<PortState>,
    pub(crate) members: Vec<Vec<PortState>>,
    /// Nodes taken down with `stop`.
    pub(crate) stopped: Vec<bool>,
    /// The lab clock (its zero is when the lab started building).
    pub(crate) clock: LabClock,
    /// CLOCK_REALTIME at the lab clock's zero, ns since 1970 (for capture timestamps).
    pub realtime_epoch_ns: u64,
    /// Where events go (the API's event stream).
    pub(crate) events: tokio::sync::broadcast::Sender<Value>,
    /// Members of wireless segments and how they move.
    pub(crate) movers: Vec<crate::radio::Movers>,
    /// `positions.csv` in the lab's log directory.
    pub(crate) positions_log: Option<std::io::BufWriter<std::fs::File>>,
    /// What was read of each infrastructure channel's events, by segment.
    pub(crate) wifi: std::collections::HashMap<usize, wifi::WifiSeen>,
    /// `wifi.csv` in the lab's log directory.
    pub(crate) wifi_log: Option<std::io::BufWriter<std::fs::File>>,
    /// Traffic flows started so far.
    pub(crate) flows: Vec<vemu_machine::traffic::Flow>,
    /// Flows asked for so far, started or not: the next flow's number (and UDP port). A
    /// flow whose source failed to start may leave its sink listening until its end
    /// time; its port is never given again.
    pub(crate) flows_asked: u32,
    /// Bytes of each flow record file of another machine copied here so far, as that
    /// machine has them (the copies here differ: their times are moved to this clock).
    pub(crate) records_copied: std::collections::HashMap<String, u64>,
    /// What the fidelity monitor has seen.
    pub(crate) watch: crate::fidelity::Watch,
    /// The judge of the lab's checks (`expect:`).
    pub(crate) judge: crate::expect::Judge,
    /// Machines lost (their agents stopped answering), by number in the plan.
    pub(crate) lost: Vec<bool>,
    /// The links and ports a machine's loss took down (machine, target): up again if it
    /// rejoins.
    pub(crate) lost_took: Vec<(usize, Target)>,
    /// The nodes' use as last read (lab ns, per node): the event stream reads it at most
    /// once a second (a read is two files per node).
    pub(crate) usage: Option<(u64, Vec<vemu_host::cgroup::Usage>)>,
    /// Timeline firings carried out so far (see [`saved`]).
    pub(crate) timeline_fired: u64,
    /// Where the API is served on TCP besides the lab's socket.
    pub(crate) api_tcp: Option<std::net::SocketAddr>,
}

/// The thread that looks, every second, for machines of a lab across machines that were
/// lost (see [`Controller::check_machines`]).
pub(crate) fn watch_machines(
    ctl: std::sync::Arc<std::sync::Mutex<Controller>>,
    needed: bool,
) -> crate::background::Background {
    use crate::LockExt;
    crate::background::Background::spawn("vemu-machines", needed, move |stop| {
        while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
            stop.recv_timeout(std::time::Duration::from_secs(1))
        {
            ctl.locked().check_machines();
        }
    })
}

/// A request to stop: from a signal (`None`), or from the API, which wants the result.
pub type StopRequest = Option<Sender<Result<(), String>>>;

/// The engine targets a name given by the user means, each with the direction that its
/// "forward" is.
fn resolve(plan: &Plan, spec: &str) -> Result<Vec<(Target, usize)>, LabError> {
    let ports = plan.ports(spec).map_err(LabError::not_found)?;
    Ok(ports
        .into_iter()
        .map(|(p, fwd)| {
            let t = match p {
                PortRef::Link(l) => Target::Link(l),
                PortRef::Member(g, m) => Target::Member(g, m),
            };
            (t, fwd)
        })
        .collect())
}

/// A capture's interface as its pcapng file describes it: `node:iface` (with the point
/// when there are several), where its times come from (for a node on another machine),
/// and whether it carries a radio's 802.11 frames (radiotap) rather than Ethernet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturedIface {
    pub name: String,
    pub description: Option<String>,
    pub radio: bool,
}

impl Controller {
    /// The controller of `plan` as `worker` built it (or holds it, for a takeover), on
    /// the lab clock `clock`, whose zero was `realtime_epoch_ns` (CLOCK_REALTIME, ns since
    /// 1970): nothing changed yet, nothing moving, no flow.
    pub(crate) fn new(
        plan: Plan,
        worker: Box<dyn Worker>,
        clock: LabClock,
        realtime_epoch_ns: u64,
    ) -> Controller {
        let (events, _) = tokio::sync::broadcast::channel(1024);
        let judge = crate::expect::Judge::new(plan.expect.clone());
        Controller {
            links: PortState::of_links(&plan),
            members: PortState::of_members(&plan),
            stopped: vec![false; plan.nodes.len()],
            lost: vec![false; plan.machines.len()],
            plan,
            worker,
            clock,
            realtime_epoch_ns,
            events,
            movers: Vec::new(),
            positions_log: None,
            wifi: Default::default(),
            wifi_log: None,
            flows: Vec::new(),
            flows_asked: 0,
            records_copied: Default::default(),
            watch: Default::default(),
            judge,
            lost_took: Vec::new(),
            usage: None,
            timeline_fired: 0,
            api_tcp: None,
        }
    }

    fn state(&mut self, t: Target) -> &mut PortState {
        match t {
            Target::Link(l) => &mut self.links[l],
            Target::Member(g, m) => &mut self.members[g][m],
        }
    }

    /// The lab clock's time, ns.
    pub fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    pub fn events(&self) -> &tokio::sync::broadcast::Sender<Value> {
        &self.events
    }

    pub(crate) fn emit(&self, ev: Value) {
        let _ = self.events.send(ev);
    }

    /// Whether machine `m` was found lost (never for a lab on one machine).
    fn machine_lost(&self, m: usize) -> bool {
        self.lost.get(m).copied().unwrap_or(false)
    }

    /// The links and segment ports between machine `m` and the others.
    fn crossing(&self, m: usize) -> Vec<Target> {
        let mut out = Vec::new();
        for (l, lp) in self.plan.links.iter().enumerate() {
            let (ma, mb) = (self.plan.nodes[lp.a.node].machine, self.plan.nodes[lp.b.node].machine);
            if ma != mb && (ma == m || mb == m) {
                out.push(Target::Link(l));
            }
        }
        for g in 0..self.plan.segments.len() {
            let at = self.plan.segment_machine(g);
            for (k, member) in self.plan.segments[g].members.iter().enumerate() {
                let mk = self.plan.nodes[member.end.node].machine;
                if mk != at && (mk == m || at == m) {
                    out.push(Target::Member(g, k));
                }
            }
        }
        out
    }

    /// A link's or port's name for people.
    fn target_name(&self, t: Target) -> String {
        match t {
            Target::Link(l) => self.plan.links[l].name.clone(),
            Target::Member(g, k) => format!(
                "{} ({})",
                self.plan.segments[g].name,
                self.plan.endpoint_name(self.plan.segments[g].members[k].end)
            ),
        }
    }

    /// Machines the worker found lost since the last look: the links between them and
    /// the others go down (carrier drops on the surviving ends, as when a cable is
    /// pulled: routing reacts), their nodes are marked lost, and an event says so. The
    /// rest runs on. Lost machines whose agents answer again rejoin ([`Controller::rejoin`]).
    pub(crate) fn check_machines(&mut self) {
        let lost_now = self.worker.lost_machines();
        for m in 0..self.lost.len() {
            if self.lost[m] && !lost_now.contains(&m) {
                self.rejoin(m);
            }
        }
        for m in lost_now {
            let Some(machine) = self.plan.machines.get(m).filter(|_| !self.lost[m]).cloned() else {
                continue;
            };
            self.lost[m] = true;
            let nodes: Vec<String> =
                self.plan.nodes.iter().filter(|n| n.machine == m).map(|n| n.name.clone()).collect();
            let mut links = Vec::new();
            for t in self.crossing(m) {
                if !self.state(t).up {
                    continue;
                }
                self.state(t).up = false;
                self.lost_took.push((m, t));
                if let Err(e) = self.worker.set_up(t, false) {
                    eprintln!("vemu: taking '{}' down: {e}", self.target_name(t));
                }
                links.push(self.target_name(t));
            }
            let reason = format!(
                "its agent ({}) stopped answering the controller's heartbeats or lost its share",
                machine.address
            );
            eprintln!(
                "vemu: machine '{}' is lost: {reason}; {} nodes lost, links down: {}",
                machine.name,
                nodes.len(),
                links.join(", ")
            );
            self.emit(json!({"type": "machine-lost", "machine": machine.name, "reason": reason, "nodes": nodes, "links": links}));
            self.save();
        }
    }

    /// Machine `m`, lost, answers again with its share: every link and port between it
    /// and the others gets its settings of now (changes made meanwhile did not reach
    /// it), those its loss took down come up again, and an event says so. (Its nodes
    /// ran on; what else changed meanwhile — limits, stopped nodes, positions — is not
    /// handed on.)
    fn rejoin(&mut self, m: usize) {
        self.lost[m] = false;
        let took: Vec<Target> =
            self.lost_took.iter().filter(|(lm, _)| *lm == m).map(|&(_, t)| t).collect();
        self.lost_took.retain(|(lm, _)| *lm != m);
        let mut links = Vec::new();
        for t in self.crossing(m) {
            for d in 0..2 {
                let patch = vemu_link::ImpairmentsPatch::whole(&self.state(t).imps[d]);
                if let Err(e) = self.worker.patch(t, d, patch) {
                    eprintln!("vemu: '{}' on the machine that rejoins: {e}", self.target_name(t));
                }
            }
            let up = self.state(t).up || took.contains(&t);
            if let Err(e) = self.worker.set_up(t, up) {
                eprintln!(
                    "vemu: taking '{}' {}: {e}",
                    self.target_name(t),
                    if up { "up" } else { "down" }
                );
            }
            self.state(t).up = up;
            if took.contains(&t) {
                links.push(self.target_name(t));
            }
        }
        let machine = &self.plan.machines[m];
        eprintln!("vemu: machine '{}' ({}) answers again with its share: it rejoins the lab; links up again: {}", machine.name, machine.address, links.join(", "));
        self.emit(json!({"type": "machine-rejoined", "machine": machine.name, "links": links}));
        self.save();
    }

    /// The engine's counters of every link direction and segment port: zeros for what
    /// no engine counted (every machine of the lab lost).
    pub(crate) fn counters(&mut self) -> Result<Counters, LabError> {
        let mut c = self.worker.stats()?;
        c.links.resize_with(self.plan.links.len(), Default::default);
        c.members.resize_with(self.plan.segments.len(), Vec::new);
        for (m, g) in c.members.iter_mut().zip(&self.plan.segments) {
            m.resize_with(g.members.len(), Default::default);
        }
        c.segments.resize_with(self.plan.segments.len(), Default::default);
        Ok(c)
    }

    /// The nodes' kernel counters of their TAP interfaces.
    pub(crate) fn tap_queues(&mut self) -> Result<Vec<vemu_machine::worker::TapQueue>, LabError> {
        Ok(self.worker.tap_queues()?)
    }

    /// The fidelity verdict on the whole run so far (`invalid` when the counters cannot
    /// be read).
    pub(crate) fn run_verdict(&mut self) -> crate::fidelity::Verdict {
        match self.counters() {
            Ok(c) => self.fidelity(&c).verdict,
            Err(_) => crate::fidelity::Verdict::Invalid,
        }
    }

    /// The fidelity verdict on the whole run so far: `c` and what the monitor saw.
    fn fidelity(&self, c: &Counters) -> crate::fidelity::Fidelity {
        let uptime_ns = self.clock.now_ns().max(1) as f64;
        let w = &self.watch;
        let engine = crate::fidelity::EngineEvidence {
            shard_busy: c.shard_work_ns.iter().map(|&ns| ns as f64 / uptime_ns).collect(),
            windows: w.windows,
            saturated_windows: w.saturated_windows,
            taps: w.taps.clone(),
            faults: c.engine_faults.clone(),
            cpu: w.cpu.clone(),
            channels: self.channel_decisions(c),
        };
        let directions = self.named_directions(c);
        let run = crate::fidelity::links_pace_of(&directions);
        let engine = crate::fidelity::EngineEvidence { cpu: w.cpu.run_kept_pace(run), ..engine };
        crate::fidelity::assess(directions, &engine, &self.plan.fidelity)
    }

    /// The decisions of each 802.11 channel (`csma: true`) in `c`, by segment name.
    pub(crate) fn channel_decisions(&self, c: &Counters) -> Vec<crate::fidelity::ChannelDecisions> {
        let dcf = |g: &vemu_scenario::SegmentPlan| {
            g.wireless.as_ref().is_some_and(|w| w.medium.dcf.is_some())
        };
        self.plan
            .segments
            .iter()
            .zip(&c.segments)
            .filter(|(g, _)| dcf(g))
            .map(|(g, s)| crate::fidelity::ChannelDecisions {
                name: g.name.clone(),
                late_hist: s.decide_late_hist.clone(),
                max_late_ns: s.decide_late_max_ns,
            })
            .collect()
    }

    /// Every direction of `c`, named for people: `LINK forward`, `SEGMENT NODE:IFACE egress`.
    pub(crate) fn named_directions<'a>(&self, c: &'a Counters) -> Vec<(String, &'a DirStats)> {
        let mut out = Vec::new();
        for (l, s) in self.plan.links.iter().zip(&c.links) {
            out.push((format!("{} forward", l.name), &s[0]));
            out.push((format!("{} reverse", l.name), &s[1]));
        }
        for (g, seg) in self.plan.segments.iter().enumerate() {
            for (m, s) in seg.members.iter().zip(&c.members[g]) {
                let port = self.plan.endpoint_name(m.end);
                out.push((format!("{} {port} egress", seg.name), &s[0]));
                out.push((format!("{} {port} ingress", seg.name), &s[1]));
            }
        }
        out
    }

    /// For each machine, the links from it to each other machine, by their rates set now,
    /// against the `measured` underlay ([`vemu_machine::worker::Worker::underlay`]). One pass
    /// over the links, whatever the number of machines.
    fn underlay_by_machine(
        &self,
        measured: &[(usize, usize, Option<u64>)],
    ) -> Vec<Vec<crate::UnderlayStatus>> {
        let mut out: Vec<Vec<crate::UnderlayStatus>> = vec![Vec::new(); self.plan.machines.len()];
        let mut row: std::collections::HashMap<(usize, usize), usize> =
            std::collections::HashMap::new();
        for (i, l) in self.plan.links.iter().enumerate() {
            let (ma, mb) = (self.plan.nodes[l.a.node].machine, self.plan.nodes[l.b.node].machine);
            if ma == mb {
                continue;
            }
            // Forward leaves a's machine, reverse b's.
            for (from, to, dir) in [(ma, mb, 0), (mb, ma, 1)] {
                let k = *row.entry((from, to)).or_insert_with(|| {
                    let measured_bps =
                        measured.iter().find(|m| (m.0, m.1) == (from, to)).and_then(|m| m.2);
                    out[from].push(crate::UnderlayStatus {
                        to: self.plan.machines[to].name.clone(),
                        links: 0,
                        set_bps: 0,
                        unlimited_links: 0,
                        measured_bps,
                    });
                    out[from].len() - 1
                });
                let u = &mut out[from][k];
                u.links += 1;
                match self.links[i].imps[dir].rate_bps {
                    Some(r) => u.set_bps = u.set_bps.saturating_add(r),
                    None => u.unlimited_links += 1,
                }
            }
        }
        out
    }

    /// Every machine's links set faster than the underlay carried that way.
    pub fn underlay_warnings(&self) -> Vec<String> {
        let measured = self.worker.underlay();
        self.underlay_by_machine(&measured)
            .into_iter()
            .enumerate()
            .flat_map(|(m, rows)| {
                rows.into_iter()
                    .filter_map(|u| u.warning(&self.plan.machines[m].name))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    pub fn status(&mut self) -> Result<LabStatus, LabError> {
        let stats = self.counters()?;
        let procs = self.worker.processes()?;
        let usage = self.worker.usage()?;
        let mut radios = Vec::new();
        for g in 0..self.plan.segments.len() {
            radios.push(match self.plan.segments[g].wireless.is_some() {
                true => Some(self.worker.radio(g, u64::MAX)?),
                false => None,
            });
        }
        let links = self
            .plan
            .links
            .iter()
            .enumerate()
            .map(|(i, l)| LinkStatus {
                name: l.name.clone(),
                a: self.plan.endpoint_name(l.a),
                b: self.plan.endpoint_name(l.b),
                up: self.links[i].up,
                forward: dir_status(&self.links[i], &stats.links[i], 0),
                reverse: dir_status(&self.links[i], &stats.links[i], 1),
            })
            .collect();
        Ok(LabStatus {
            fidelity: Some(self.fidelity(&stats)),
            fidelity_now: self.watch.now.clone(),
            fast_path: stats.fast_path.clone(),
            name: self.plan.name.clone(),
            pid: std::process::id(),
            uptime_ns: self.clock.now_ns(),
            nodes: self.node_statuses(&procs, &usage),
            links,
            segments: self.segment_statuses(&stats, &radios),
            machines: self.machine_statuses(),
            diverts: self.divert_statuses(&stats),
        })
    }

    /// Change impairments of links or segment ports; unspecified values stay. Every
    /// direction is checked first, so that a bad value changes nothing.
    pub fn link_set(
        &mut self,
        spec: &str,
        direction: Direction,
        patch: vemu_link::ImpairmentsPatch,
    ) -> Result<(), LabError> {
        let targets = resolve(&self.plan, spec)?;
        if patch.mtu.is_some() {
            return Err(LabError::invalid(
                "the MTU of a link cannot be changed while the lab runs",
            ));
        }
        let changes: Vec<(Target, usize)> = targets
            .into_iter()
            .flat_map(|(t, fwd)| {
                let dirs = match direction {
                    Direction::Both => vec![0, 1],
                    Direction::Forward => vec![fwd],
                    Direction::Reverse => vec![1 - fwd],
                };
                dirs.into_iter().map(move |d| (t, d))
            })
            .collect();
        for &(t, d) in &changes {
            let mut imp = self.state(t).imps[d].clone();
            patch.apply_to(&mut imp);
            imp.validate().map_err(LabError::invalid)?;
        }
        for (t, d) in changes {
            if let Some(imp) = self.worker.patch(t, d, patch.clone())? {
                self.emit(json!({"type": "link", "link": spec, "target": t, "direction": d, "impairments": imp}));
                self.state(t).imps[d] = imp;
            }
        }
        self.save();
        Ok(())
    }

    /// Take links or segment ports down (carrier lost, frames dropped) or back up.
    pub fn link_state(&mut self, spec: &str, up: bool) -> Result<(), LabError> {
        for (t, _) in resolve(&self.plan, spec)? {
            self.worker.set_up(t, up)?;
            self.state(t).up = up;
            self.emit(json!({"type": "link", "link": spec, "target": t, "up": up}));
        }
        self.save();
        Ok(())
    }

    /// Move a node on every wireless segment it is a member of: at once to `to`, or at
    /// `speed_mps` in a straight line. It stays there afterwards.
    pub fn node_move(
        &mut self,
        node: &str,
        to: vemu_radio::Pos,
        speed_mps: Option<f64>,
    ) -> Result<(), LabError> {
        let ni = self.node_index(node)?;
        if !(to.x.is_finite() && to.y.is_finite())
            || speed_mps.is_some_and(|s| !(s.is_finite() && s > 0.0))
        {
            return Err(LabError::invalid(
                "a position needs finite x and y, and a speed must be greater than 0",
            ));
        }
        let now = self.clock.now_ns();
        let mut found = false;
        for k in 0..self.movers.len() {
            let seg = self.movers[k].seg;
            if let Some(m) = self.plan.segments[seg].members.iter().position(|m| m.end.node == ni) {
                self.movers[k].move_to(m, to, speed_mps, now);
                self.positions_at(k, now);
                found = true;
            }
        }
        if !found {
            return Err(LabError::invalid(format!(
                "node '{node}' is not a member of a wireless segment"
            )));
        }
        Ok(())
    }

    /// Change a node's CPU, memory and process limits: each field `patch` has sets that
    /// limit (`Some(None)` lifts it); returns the limits now in force.
    pub fn node_limits(&mut self, node: &str, patch: LimitsPatch) -> Result<Limits, LabError> {
        let ni = self.made_node(node)?;
        let mut l = self.plan.nodes[ni].limits;
        l.cpu_cores = patch.cpu_cores.unwrap_or(l.cpu_cores);
        l.memory_bytes = patch.memory_bytes.unwrap_or(l.memory_bytes);
        l.pids = patch.pids.unwrap_or(l.pids);
        l.check().map_err(LabError::invalid)?;
        self.worker.set_limits(node, l)?;
        self.plan.nodes[ni].limits = l;
        self.save();
        self.emit(serde_json::json!({"type": "node", "node": node, "limits": l}));
        Ok(l)
    }

    /// The way into `node` (one vemu made): here, or the agent of the machine that
    /// hosts it.
    pub fn door(&self, node: &str) -> Result<vemu_machine::door::Door, LabError> {
        let i = self.made_node(node)?;
        let m = self.plan.nodes[i].machine;
        if self.machine_lost(m) {
            return Err(LabError::invalid(format!(
                "node '{node}' is on machine '{}', which is lost",
                self.plan.machines[m].name
            )));
        }
        Ok(self.worker.door(i)?)
    }

    pub fn node_index(&self, node: &str) -> Result<usize, LabError> {
        self.plan.node_index(node).ok_or_else(|| {
            LabError::not_found(format!("no node named '{node}' in lab '{}'", self.plan.name))
        })
    }

    /// A node vemu made (not the machine itself, `kind: host`, nor a NIC's wire, `kind:
    /// external`): one that programs can be run in, stopped and limited.
    pub fn made_node(&self, node: &str) -> Result<usize, LabError> {
        let i = self.node_index(node)?;
        let n = &self.plan.nodes[i];
        let iface = n.ifaces.first().map_or("?", |i| i.name.as_str());
        match n.kind.not_entered(node, iface) {
            None => Ok(i),
            Some(why) => Err(LabError::invalid(why)),
        }
    }

    /// Stop every process in a node (its `run` commands are not restarted), or start
    /// its `run` commands again.
    pub fn node_state(&mut self, node: &str, up: bool) -> Result<(), LabError> {
        let ni = self.made_node(node)?;
        self.worker.node_state(node, up)?;
        self.stopped[ni] = !up;
        self.save();
        self.emit(json!({"type": "node", "node": node, "up": up}));
        Ok(())
    }

    /// Start capturing on `spec`: `NODE` (every interface) or `NODE:IFACE`, at each of
    /// `points` (one pcapng interface per interface and point: `n1:eth0 (drops)` when
    /// there are several). Returns the capture's id and the names of its interfaces, in
    /// the order of `Captured::iface`.
    pub fn capture_start(
        &mut self,
        spec: &str,
        points: &[vemu_engine::CapturePoint],
        tx: std::sync::mpsc::SyncSender<vemu_engine::Captured>,
    ) -> Result<(u64, Vec<CapturedIface>), LabError> {
        let (node, iface) = match spec.split_once(':') {
            Some((n, i)) => (n, Some(i)),
            None => (spec, None),
        };
        let ni = self.node_index(node)?;
        let n = &self.plan.nodes[ni];
        let mut taps = Vec::new();
        let mut names = Vec::new();
        for (ii, i) in n.ifaces.iter().enumerate() {
            if iface.is_some_and(|want| want != i.name) {
                continue;
            }
            let (target, side) = match i.attach {
                vemu_scenario::Attach::Link(l) => {
                    let lp = &self.plan.links[l];
                    (Target::Link(l), usize::from(!(lp.a.node == ni && lp.a.iface == ii)))
                }
                vemu_scenario::Attach::Segment(g, m) => (Target::Member(g, m), 0),
            };
            for &point in points {
                let radio = point == vemu_engine::CapturePoint::Radio;
                if radio {
                    self.radio_capturable(node, &i.name, i.attach)?;
                }
                let iface = names.len() as u32;
                taps.push(vemu_engine::CaptureSpec { target, side, iface, point });
                let name = match points.len() {
                    1 => format!("{}:{}", n.name, i.name),
                    _ => format!("{}:{} ({})", n.name, i.name, point.name()),
                };
                names.push(CapturedIface { name, description: self.clock_note(n.machine), radio });
            }
        }
        if taps.is_empty() {
            let have: Vec<&str> = n.ifaces.iter().map(|i| i.name.as_str()).collect();
            return Err(LabError::not_found(format!(
                "node '{node}' has no interface '{}' (it has: {})",
                iface.unwrap_or(""),
                have.join(", ")
            )));
        }
        let id =
            self.worker.capture(&taps, tx).map_err(|e| LabError::internal(format!("{e:#}")))?;
        Ok((id, names))
    }

    /// A radio capture needs a member of a wireless segment with the 802.11 MAC.
    fn radio_capturable(
        &self,
        node: &str,
        iface: &str,
        attach: vemu_scenario::Attach,
    ) -> Result<(), LabError> {
        let seg = match attach {
            vemu_scenario::Attach::Segment(g, _) => &self.plan.segments[g],
            vemu_scenario::Attach::Link(_) => {
                return Err(LabError::invalid(format!(
                    "{node}:{iface} is on a link, not a radio: the 'radio' capture point is a wireless segment's"
                )))
            }
        };
        match &seg.wireless {
            Some(w) if w.medium.dcf.is_some() => Ok(()),
            Some(_) => Err(LabError::invalid(format!(
                "{node}:{iface} is on wireless segment '{}' without the 802.11 MAC: the 'radio' capture point needs 'csma: true'",
                seg.name
            ))),
            None => Err(LabError::invalid(format!(
                "{node}:{iface} is on LAN '{}', not a radio: the 'radio' capture point is a wireless segment's",
                seg.name
            ))),
        }
    }

    /// For a capture's interfaces on machine `m` of a lab across machines: where their
    /// times come from, and how far they can be off (what the pcapng file says of them).
    fn clock_note(&self, m: usize) -> Option<String> {
        let name = &self.plan.machines.get(m)?.name;
        Some(match self.worker.clock_offsets().get(m).copied().flatten() {
            Some(o) => format!(
                "on machine {name}: times moved to the controller's lab clock by {:+} ns, within ±{} ns ({}, at the capture's start)",
                -o.offset_ns,
                o.bound_ns(),
                match o.wall_bound_ns {
                    Some(_) => "the maximum errors of both machines' disciplined wall clocks, as their kernels say",
                    None => "half the shortest of its last heartbeats' round trips",
                }
            ),
            None => format!("on machine {name}: times on that machine's lab clock (its offset to the controller's was not measured yet)"),
        })
    }

    pub fn capture_stop(&mut self, id: u64) {
        self.worker.stop_capture(id);
    }

    /// Counters only, for the event stream and `GET /v1/stats`.
    pub fn stats(&mut self) -> Result<Value, LabError> {
        let c = self.counters()?;
        let links: Vec<Value> = self
            .plan
            .links
            .iter()
            .zip(&c.links)
            .map(|(l, s)| json!({"name": l.name, "forward": s[0], "reverse": s[1]}))
            .collect();
        let segments: Vec<Value> = self
            .plan
            .segments
            .iter()
            .enumerate()
            .map(|(g, seg)| {
                let members: Vec<Value> = seg
                    .members
                    .iter()
                    .zip(&c.members[g])
                    .map(|(m, s)| json!({"port": self.plan.endpoint_name(m.end), "egress": s[0], "ingress": s[1]}))
                    .collect();
                json!({"name": seg.name, "switch": c.segments[g], "members": members})
            })
            .collect();
        let now = self.clock.now_ns();
        if self.usage.as_ref().is_none_or(|(t, _)| now.saturating_sub(*t) >= 1_000_000_000) {
            self.usage = Some((now, self.worker.usage()?));
        }
        let (usage_t, usage) =
            self.usage.as_ref().map(|(t, u)| (*t, u.as_slice())).unwrap_or((now, &[]));
        // Nodes vemu makes: CPU time and memory in use (as of `t_ns`, read once a second).
        let nodes: Vec<Value> = self
            .plan
            .nodes
            .iter()
            .zip(usage)
            .filter(|(n, _)| n.kind.is_made())
            .map(|(n, u)| json!({"name": n.name, "t_ns": usage_t, "cpu_ns": u.cpu_ns, "memory_bytes": u.memory_bytes, "processes": u.processes}))
            .collect();
        let diverts: Vec<Value> = self
            .plan
            .diverts
            .iter()
            .zip(&c.diverts)
            .map(|(d, s)| json!({"name": d.name, "forward": s[0], "reverse": s[1]}))
            .collect();
        let mut v = json!({"t_ns": now, "delay_buckets_ns": crate::DELAY_BUCKETS_NS, "links": links, "segments": segments, "nodes": nodes, "diverts": diverts});
        v["fidelity"] = json!(self.fidelity(&c));
        v["fidelity_now"] = json!(self.watch.now);
        Ok(v)
    }
}
