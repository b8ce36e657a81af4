//! The orders of a lab across machines, carried out by the agents: each sent where it
//! belongs (every machine, the node's, the link's ends') and the answers merged.

use vemu_engine::RadioSnapshot;
use vemu_link::{Impairments, ImpairmentsPatch};

use super::*;
use vemu_machine::door::Door;
use vemu_machine::supervise::ProcStatus;
use vemu_machine::worker::TapQueue;

impl Worker for Cluster {
    fn build(
        &mut self,
        plan: Plan,
        clock_epoch_ns: u64,
        _progress: &mut dyn FnMut(usize, usize),
    ) -> Result<(), WorkerError> {
        answer(self.build_everywhere(plan, clock_epoch_ns), "Build", done)
    }

    fn patch(
        &mut self,
        target: Target,
        dir: usize,
        patch: ImpairmentsPatch,
    ) -> Result<Option<Impairments>, WorkerError> {
        answer(self.patch_where_carried(target, dir, patch), "Patch", |r| match r {
            WorkerReply::Impairments(i) => Some(Some(i)),
            WorkerReply::Done => Some(None),
            _ => None,
        })
    }

    fn set_up(&mut self, target: Target, up: bool) -> Result<(), WorkerError> {
        let r =
            Self::first(self.each(&self.machines_of(target), &WorkerRequest::SetUp { target, up }));
        answer(r, "SetUp", done)
    }

    fn node_state(&mut self, node: &str, up: bool) -> Result<(), WorkerError> {
        let r = self.at_node(node, WorkerRequest::NodeState { node: node.to_string(), up });
        answer(r, "NodeState", done)
    }

    fn stats(&mut self) -> Result<Counters, WorkerError> {
        self.stats_merged()
    }

    fn processes(&mut self) -> Result<Vec<ProcStatus>, WorkerError> {
        let all = self.gather(&WorkerRequest::Processes, |r| match r {
            WorkerReply::Processes(p) => Some(p),
            _ => None,
        })?;
        Ok(all.concat())
    }

    fn positions(
        &mut self,
        seg: usize,
        positions: Vec<vemu_radio::Pos>,
    ) -> Result<(), WorkerError> {
        answer(self.at_segment(seg, WorkerRequest::Positions { seg, positions }), "Positions", done)
    }

    fn radio(&mut self, seg: usize, bss_after: u64) -> Result<RadioSnapshot, WorkerError> {
        let order = WorkerRequest::Radio { seg, bss_after };
        answer(self.at_segment(seg, order), "Radio", |r| match r {
            WorkerReply::Radio(r) => Some(r),
            _ => None,
        })
    }

    fn tap_queues(&mut self) -> Result<Vec<TapQueue>, WorkerError> {
        let all = self.gather(&WorkerRequest::TapQueues, |r| match r {
            WorkerReply::TapQueues(q) => Some(q),
            _ => None,
        })?;
        Ok(all.concat())
    }

    fn backlog(&mut self) -> Result<u64, WorkerError> {
        let all = self.gather(&WorkerRequest::Backlog, |r| match r {
            WorkerReply::Backlog(b) => Some(b),
            _ => None,
        })?;
        Ok(all.into_iter().max().unwrap_or(0))
    }

    fn set_limits(&mut self, node: &str, limits: vemu_scenario::Limits) -> Result<(), WorkerError> {
        let r = self.at_node(node, WorkerRequest::SetLimits { node: node.to_string(), limits });
        answer(r, "SetLimits", done)
    }

    fn usage(&mut self) -> Result<Vec<vemu_host::cgroup::Usage>, WorkerError> {
        self.usage_by_node()
    }

    fn traffic_end(
        &mut self,
        node: &str,
        end: vemu_machine::traffic::End,
    ) -> Result<(), WorkerError> {
        let r = self.at_node(node, WorkerRequest::TrafficEnd { node: node.to_string(), end });
        answer(r, "TrafficEnd", done)
    }

    fn traffic_records(
        &mut self,
        node: &str,
        file: &str,
        offset: u64,
    ) -> Result<String, WorkerError> {
        let req = WorkerRequest::TrafficRecords {
            node: node.to_string(),
            file: file.to_string(),
            offset,
        };
        answer(self.at_node(node, req), "TrafficRecords", |r| match r {
            WorkerReply::Text(t) => Some(t),
            _ => None,
        })
    }

    fn teardown(&mut self) -> Result<(), WorkerError> {
        answer(self.tear_down(), "Teardown", done)
    }

    /// Each machine that sees frames of the interfaces captures its part and streams
    /// copies here ([`CaptureRecord`]s). What arrives at an interface (`After`) is seen
    /// by the node's machine only (the far machine's copy toward its tunnel would repeat
    /// it); what enters a link at its other end (`Before`) is seen where that end is, so
    /// both machines of the link take part (each records only what it sees).
    fn capture(
        &mut self,
        on: &[CaptureSpec],
        tx: std::sync::mpsc::SyncSender<Captured>,
    ) -> Result<u64> {
        let mut per: std::collections::BTreeMap<usize, Vec<CaptureSpec>> = Default::default();
        for c in on {
            // (A segment member, side a of its tunnel, sees both points on its machine:
            // its ingress is carried out there.)
            let (side, point) = match (c.target, c.point) {
                (
                    Target::Member(..),
                    vemu_engine::CapturePoint::Drops | vemu_engine::CapturePoint::Radio,
                ) => (0, c.point),
                (Target::Member(..), _) => (0, vemu_engine::CapturePoint::After),
                (Target::Link(_), _) => (c.side.min(1), c.point),
            };
            // (A link's other machine takes part in a capture of what arrives, only to
            // keep its direction toward the interface off the kernel path: it records
            // nothing of it.)
            let machines = match (point, c.target) {
                // (Drops: each machine records those of the directions it carries out.)
                // (Radio: the machines that decide the segment's channel.)
                (
                    vemu_engine::CapturePoint::Before
                    | vemu_engine::CapturePoint::Drops
                    | vemu_engine::CapturePoint::Radio,
                    _,
                )
                | (_, Target::Link(_)) => self.machines_of(c.target),
                (vemu_engine::CapturePoint::After, _) => self
                    .tunnel_at
                    .get(self.tunnel(c.target))
                    .map(|at| vec![at[side]])
                    .unwrap_or_default(),
            };
            for m in machines {
                per.entry(m).or_default().push(*c);
            }
        }
        let mut stops = Vec::new();
        for (m, specs) in per {
            match self.start_capture(m, &specs, tx.clone()) {
                Ok(stop) => stops.push(stop),
                Err(e) => {
                    for s in stops {
                        let _ = s.send(());
                    }
                    return Err(e);
                }
            }
        }
        let id = self.next_capture;
        self.next_capture += 1;
        self.captures.insert(id, stops);
        Ok(id)
    }

    fn stop_capture(&mut self, id: u64) {
        for s in self.captures.remove(&id).unwrap_or_default() {
            let _ = s.send(());
        }
    }

    fn door(&self, node: usize) -> Result<Door, WorkerError> {
        // Every node of a lab across machines is on an agent's machine (the
        // controller's own included): the agent enters it.
        let m = self.node_at.get(node).ok_or_else(|| WorkerError::caller("no such node"))?;
        Ok(Door::Agent { route: self.agents[*m].route.clone(), lab: self.lab.clone() })
    }

    fn lost_machines(&self) -> Vec<usize> {
        (0..self.agents.len()).filter(|&m| self.lost(m)).collect()
    }

    fn clock_offsets(&self) -> Vec<Option<Offset>> {
        (0..self.agents.len()).map(|m| self.health.offset(m)).collect()
    }

    fn underlay(&self) -> Vec<(usize, usize, Option<u64>)> {
        self.underlay.clone()
    }

    fn keep_saved(&self, state: Arc<Vec<u8>>) {
        let mut s = self.health.saved.lock().unwrap_or_else(|e| e.into_inner());
        *s = (s.0 + 1, Some(state));
        self.health.saved_changed.notify_all();
    }
}

/// An agent's answer as the order's result: its refusal, or what `f` takes of it (an
/// answer of another kind is a mismatched agent's).
fn answer<T>(
    r: WorkerReply,
    order: &str,
    f: impl FnOnce(WorkerReply) -> Option<T>,
) -> Result<T, WorkerError> {
    match r {
        WorkerReply::Error(e) => Err(e),
        r => {
            let what = vemu_machine::worker::unexpected(order, &r);
            f(r).ok_or(what)
        }
    }
}

/// An order answered with nothing but its being done.
fn done(r: WorkerReply) -> Option<()> {
    matches!(r, WorkerReply::Done).then_some(())
}

impl Cluster {
    /// Carry out `req` on the machine of node `node`.
    fn at_node(&self, node: &str, req: WorkerRequest) -> WorkerReply {
        match self.node_machine(node) {
            Ok(m) => self.agents[m].call(&self.lab, &req),
            Err(e) => WorkerReply::Error(e),
        }
    }

    /// Carry out `req` on the machine that decides segment `seg`.
    fn at_segment(&self, seg: usize, req: WorkerRequest) -> WorkerReply {
        match self.seg_at.get(seg) {
            Some(&m) => self.agents[m].call(&self.lab, &req),
            None => WorkerReply::Error(WorkerError::caller(format!("no segment {seg}"))),
        }
    }

    /// Build every machine's share, measuring the underlay meanwhile; then watch the
    /// machines (heartbeats).
    fn build_everywhere(&mut self, plan: Plan, clock_epoch_ns: u64) -> WorkerReply {
        // The underlay is measured while the shares are built: building takes
        // the machines' CPUs, the probes their network (on one computer, as in
        // the tests, they share the CPUs and the figures are lower bounds) —
        // where a link with a rate crosses it: a lab of unlimited links waits
        // for no probe (a direction is measured when a rate is first set there).
        let this = &*self;
        let rated = this.rated_directions(&plan);
        let (built, underlay) = std::thread::scope(|s| {
            let probes = s.spawn(|| this.measure_underlay(&rated));
            let built = this.build(plan, clock_epoch_ns);
            (built, probes.join().unwrap_or_default())
        });
        self.underlay = underlay;
        match built {
            WorkerReply::Done => {
                match self.start_heartbeats(LabClock { epoch_ns: clock_epoch_ns }) {
                    Ok(()) => WorkerReply::Done,
                    Err(e) => {
                        let _ = self.tear_down();
                        WorkerReply::error(format!("starting the heartbeats: {e:#}"))
                    }
                }
            }
            r => r,
        }
    }

    /// Change one direction on both machines of its link (or port); the one that sends
    /// that way answers.
    fn patch_where_carried(
        &mut self,
        target: Target,
        dir: usize,
        patch: ImpairmentsPatch,
    ) -> WorkerReply {
        // Both machines of a link keep its impairments; the one that sends in
        // direction `dir` carries them out and answers.
        let ms = self.machines_of(target);
        // (A segment member's two directions are both carried out on its node's
        // machine: its ingress after the trunk from the segment's.)
        let side = if let Target::Member(..) = target { 0 } else { dir.min(1) };
        let sender = self.tunnel_at.get(self.tunnel(target)).map_or(usize::MAX, |at| at[side]);
        let replies = self.each(&ms, &WorkerRequest::Patch { target, dir, patch });
        let reply = match ms.iter().position(|&m| m == sender).map(|i| replies[i].clone()) {
            Some(r @ WorkerReply::Impairments(_)) => r,
            _ => Self::first(replies),
        };
        // A rate set on a link between machines, that way, for the first time:
        // the underlay is measured that way now.
        if let (WorkerReply::Impairments(i), Target::Link(l)) = (&reply, target) {
            if let (Some(_), Some([a, b])) =
                (i.rate_bps, self.link_machines.get(l).copied().flatten())
            {
                let way = if dir == 0 { (a, b) } else { (b, a) };
                if !self.underlay.iter().any(|u| (u.0, u.1) == way)
                    && !self.lost(way.0)
                    && !self.lost(way.1)
                {
                    let measured = self.measure_underlay(&[way]);
                    self.underlay.extend(measured);
                }
            }
        }
        reply
    }

    /// Every machine's counters, summed (each direction is counted where it is
    /// carried out).
    fn stats_merged(&self) -> Result<Counters, WorkerError> {
        let all = self.gather(&WorkerRequest::Stats, |r| match r {
            WorkerReply::Stats(c) => Some(c),
            _ => None,
        })?;
        let mut total: Option<Counters> = None;
        for c in all {
            let Some(t) = total.as_mut() else {
                total = Some(c);
                continue;
            };
            for (a, b) in t.links.iter_mut().zip(&c.links) {
                a[0].merge(&b[0]);
                a[1].merge(&b[1]);
            }
            for (ga, gb) in t.members.iter_mut().zip(&c.members) {
                for (a, b) in ga.iter_mut().zip(gb) {
                    a[0].merge(&b[0]);
                    a[1].merge(&b[1]);
                }
            }
            for (a, b) in t.segments.iter_mut().zip(&c.segments) {
                a.merge(b);
            }
            t.shard_work_ns.extend(c.shard_work_ns);
            if t.fast_path != c.fast_path {
                t.fast_path = format!("{}; {}", t.fast_path, c.fast_path);
            }
            t.engine_faults.extend(c.engine_faults);
            t.cpu.extend(c.cpu);
        }
        Ok(total.unwrap_or_default())
    }

    /// Each node's use, from its machine (nothing from lost machines).
    fn usage_by_node(&self) -> Result<Vec<vemu_host::cgroup::Usage>, WorkerError> {
        let live = self.all();
        let mut per_machine = vec![Vec::new(); self.agents.len()];
        for (&m, r) in live.iter().zip(self.each(&live, &WorkerRequest::Usage)) {
            per_machine[m] = answer(r, "Usage", |r| match r {
                WorkerReply::Usage(u) => Some(u),
                _ => None,
            })?;
        }
        Ok(self
            .node_at
            .iter()
            .enumerate()
            .map(|(i, &m)| per_machine[m].get(i).cloned().unwrap_or_default())
            .collect())
    }

    /// Take every share down, lost machines' too (in case they are back; if not, their
    /// agents remove their shares when the lease ends or when they start again), and
    /// the lab's directory here.
    fn tear_down(&self) -> WorkerReply {
        // Lost machines too, in case they are back; if not, their agents remove
        // their shares when the lease ends or when they start again.
        let every: Vec<usize> = (0..self.agents.len()).collect();
        let mut errors = Vec::new();
        for (m, r) in every.iter().zip(self.each(&every, &WorkerRequest::Teardown)) {
            match r {
                WorkerReply::Error(e) if self.lost(*m) => eprintln!("vemu: lost {e} (its agent removes its share when its lease of {} s ends, or when it starts again)", self.lease_s),
                WorkerReply::Error(e) => errors.push(e.message),
                _ => {}
            }
        }
        // This machine kept only the lab's directory.
        if let Err(e) = vemu_host::remove_lab(&self.lab) {
            errors.push(format!("{e:#}"));
        }
        match errors.is_empty() {
            true => WorkerReply::Done,
            false => WorkerReply::error(errors.join("; ")),
        }
    }
}
