//! The controller process of one lab: builds it, serves its control socket until asked
//! to stop (or sent SIGTERM/SIGINT/SIGHUP), then removes every trace of it.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use nix::sys::signal::{SigSet, Signal};
use vemu_engine::{monotonic_ns, DirStats, Target};
use vemu_host::LabPaths;
use vemu_link::Impairments;
use vemu_scenario::Plan;

use crate::worker::{LocalWorker, Worker, WorkerReply, WorkerRequest};
use crate::{DirStatus, Direction, IfaceStatus, LabStatus, LinkStatus, MemberStatus, NodeStatus, Reply, Request, SegmentStatus};

/// What the lab is doing while it comes up.
#[derive(Debug, Clone)]
pub enum Event {
    /// Nodes created so far, of the total.
    Progress(usize, usize),
    Ready,
}

/// What the controller set on one link or segment port.
#[derive(Debug, Clone)]
struct PortState {
    up: bool,
    /// Forward and reverse (links), egress and ingress (segment ports).
    imps: [Impairments; 2],
}

struct Controller {
    plan: Plan,
    worker: Box<dyn Worker>,
    links: Vec<PortState>,
    members: Vec<Vec<PortState>>,
    epoch_ns: u64,
}

/// A request to stop: from a signal (`None`), or from a `down` request, which wants the
/// result and says when its reply is written.
type StopRequest = Option<(Sender<Result<(), String>>, std::sync::mpsc::Receiver<()>)>;
type Shutdown = Sender<StopRequest>;

fn call(worker: &mut dyn Worker, req: WorkerRequest) -> Result<WorkerReply, String> {
    match worker.call(req, &mut |_, _| {}) {
        WorkerReply::Error(e) => Err(e),
        r => Ok(r),
    }
}

/// The links or segment ports a name given by the user means, each with the direction
/// that its "forward" is: 0 or 1.
fn resolve(plan: &Plan, spec: &str) -> Result<Vec<(Target, usize)>, String> {
    let link_err = match plan.find_link(spec) {
        Ok((i, reversed)) => return Ok(vec![(Target::Link(i), reversed as usize)]),
        Err(e) => e,
    };
    if let Some(g) = plan.segment_index(spec) {
        // A whole segment: "forward" is from the segment to each member.
        return Ok((0..plan.segments[g].members.len()).map(|m| (Target::Member(g, m), 1)).collect());
    }
    if let Some((x, y)) = spec.split_once(':') {
        for (seg, node, forward) in [(x, y, 1), (y, x, 0)] {
            if let Some(g) = plan.segment_index(seg) {
                let Some(ni) = plan.node_index(node) else {
                    return Err(format!("no node named '{node}' in lab '{}'", plan.name));
                };
                return match plan.segments[g].members.iter().position(|m| m.end.node == ni) {
                    Some(m) => Ok(vec![(Target::Member(g, m), forward)]),
                    None => Err(format!("node '{node}' is not a member of segment '{seg}'")),
                };
            }
        }
    }
    Err(if plan.segments.is_empty() { link_err } else { format!("{link_err}, and no segment port '{spec}' (write SEGMENT:NODE)") })
}

impl Controller {
    fn state(&mut self, t: Target) -> &mut PortState {
        match t {
            Target::Link(l) => &mut self.links[l],
            Target::Member(g, m) => &mut self.members[g][m],
        }
    }

    fn status(&mut self) -> Result<LabStatus, String> {
        let WorkerReply::Stats(stats) = call(self.worker.as_mut(), WorkerRequest::Stats)? else {
            return Err("unexpected worker reply".into());
        };
        let WorkerReply::Processes(procs) = call(self.worker.as_mut(), WorkerRequest::Processes)? else {
            return Err("unexpected worker reply".into());
        };
        let paths = LabPaths::new(&self.plan.name);
        let nodes = self
            .plan
            .nodes
            .iter()
            .map(|n| NodeStatus {
                name: n.name.clone(),
                netns: paths.netns_name(&n.name),
                ifaces: n
                    .ifaces
                    .iter()
                    .map(|i| IfaceStatus {
                        name: i.name.clone(),
                        mac: i.mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":"),
                        addrs: i.addrs.iter().map(|a| a.to_string()).collect(),
                    })
                    .collect(),
                processes: procs.iter().filter(|p| p.node == n.name).cloned().collect(),
            })
            .collect();
        let dir = |st: &PortState, c: &[DirStats; 2], d: usize| DirStatus { impairments: st.imps[d].clone(), stats: c[d].clone() };
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
                forward: dir(&self.links[i], &stats.links[i], 0),
                reverse: dir(&self.links[i], &stats.links[i], 1),
            })
            .collect();
        let segments = self
            .plan
            .segments
            .iter()
            .enumerate()
            .map(|(g, seg)| SegmentStatus {
                name: seg.name.clone(),
                capacity_bps: seg.capacity_bps,
                stats: stats.segments[g].clone(),
                members: seg
                    .members
                    .iter()
                    .enumerate()
                    .map(|(m, mp)| {
                        let st = &self.members[g][m];
                        MemberStatus {
                            port: self.plan.endpoint_name(mp.end),
                            vlan: mp.vlan,
                            up: st.up,
                            egress: dir(st, &stats.members[g][m], 0),
                            ingress: dir(st, &stats.members[g][m], 1),
                        }
                    })
                    .collect(),
            })
            .collect();
        Ok(LabStatus {
            name: self.plan.name.clone(),
            pid: std::process::id(),
            uptime_ns: monotonic_ns().saturating_sub(self.epoch_ns),
            nodes,
            links,
            segments,
        })
    }

    fn handle(&mut self, req: Request) -> Result<Reply, String> {
        let ok = Reply { ok: true, error: None, status: None };
        match req {
            Request::Status => Ok(Reply { status: Some(self.status()?), ..ok }),
            Request::LinkSet { link, direction, patch } => {
                let targets = resolve(&self.plan, &link)?;
                if patch.mtu.is_some() {
                    return Err("the MTU of a link cannot be changed while the lab runs".into());
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
                // Check every direction first, so that a bad value changes nothing.
                for &(t, d) in &changes {
                    let mut imp = self.state(t).imps[d].clone();
                    patch.apply_to(&mut imp);
                    imp.validate()?;
                }
                for (t, d) in changes {
                    if let WorkerReply::Impairments(imp) =
                        call(self.worker.as_mut(), WorkerRequest::Patch { target: t, dir: d, patch: patch.clone() })?
                    {
                        self.state(t).imps[d] = imp;
                    }
                }
                Ok(ok)
            }
            Request::LinkState { link, up } => {
                for (t, _) in resolve(&self.plan, &link)? {
                    call(self.worker.as_mut(), WorkerRequest::SetUp { target: t, up })?;
                    self.state(t).up = up;
                }
                Ok(ok)
            }
            Request::Down => unreachable!("handled by the connection"),
        }
    }
}

fn serve(conn: UnixStream, ctl: Arc<Mutex<Controller>>, shutdown: Shutdown) {
    let mut out = match conn.try_clone() {
        Ok(c) => c,
        Err(_) => return,
    };
    for line in BufReader::new(conn).lines() {
        let Ok(line) = line else { return };
        let mut written = None;
        let reply = match serde_json::from_str::<Request>(&line) {
            Err(e) => Reply { ok: false, error: Some(format!("bad request: {e}")), status: None },
            Ok(Request::Down) => {
                let (tx, rx) = channel();
                let (wtx, wrx) = channel();
                written = Some(wtx);
                let _ = shutdown.send(Some((tx, wrx)));
                match rx.recv() {
                    Ok(Ok(())) => Reply { ok: true, error: None, status: None },
                    Ok(Err(e)) => Reply { ok: false, error: Some(e), status: None },
                    Err(_) => Reply { ok: false, error: Some("the controller stopped".into()), status: None },
                }
            }
            Ok(req) => match ctl.lock().unwrap().handle(req) {
                Ok(r) => r,
                Err(e) => Reply { ok: false, error: Some(e), status: None },
            },
        };
        let mut s = serde_json::to_string(&reply).unwrap_or_default();
        s.push('\n');
        let failed = out.write_all(s.as_bytes()).is_err();
        if let Some(w) = written {
            let _ = w.send(());
        }
        if failed {
            return;
        }
    }
}

/// Build the lab described by `plan`, report progress through `report`, then serve it
/// until it is taken down. Returns once everything is removed.
pub fn run(plan: Plan, mut report: impl FnMut(Event)) -> Result<()> {
    let paths = LabPaths::new(&plan.name);
    if UnixStream::connect(paths.socket()).is_ok() {
        bail!("lab '{}' is already running (take it down with 'vemu down --lab {}')", plan.name, plan.name);
    }
    if paths.dir.exists() || !vemu_host::lab_netns(&plan.name).is_empty() {
        eprintln!("removing what an earlier run of lab '{}' left behind", plan.name);
        vemu_host::remove_lab(&plan.name)?;
    }
    // Signals are taken by one thread; every thread started from here inherits the mask.
    let mut signals = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        signals.add(s);
    }
    signals.thread_block().context("blocking signals")?;

    let epoch_ns = monotonic_ns();
    let mut worker: Box<dyn Worker> = Box::new(LocalWorker::default());
    let build = WorkerRequest::Build { plan: plan.clone(), clock_epoch_ns: epoch_ns };
    if let WorkerReply::Error(e) = worker.call(build, &mut |done, total| report(Event::Progress(done, total))) {
        bail!("{e}");
    }
    let started = (|| -> Result<UnixListener> {
        std::fs::write(paths.pid_file(), format!("{}\n", std::process::id()))?;
        std::fs::write(paths.plan(), serde_json::to_vec_pretty(&plan)?)?;
        let listener = UnixListener::bind(paths.socket()).context("creating the control socket")?;
        std::fs::set_permissions(paths.socket(), std::fs::Permissions::from_mode(0o600))?;
        Ok(listener)
    })();
    let listener = match started {
        Ok(l) => l,
        Err(e) => {
            worker.call(WorkerRequest::Teardown, &mut |_, _| {});
            return Err(e);
        }
    };
    let links = plan.links.iter().map(|l| PortState { up: true, imps: [l.forward.clone(), l.reverse.clone()] }).collect();
    let members = plan
        .segments
        .iter()
        .map(|g| g.members.iter().map(|m| PortState { up: true, imps: [m.egress.clone(), m.ingress.clone()] }).collect())
        .collect();
    let ctl = Arc::new(Mutex::new(Controller { plan, worker, links, members, epoch_ns }));

    let (shutdown, stop) = channel::<StopRequest>();
    {
        let shutdown = shutdown.clone();
        std::thread::spawn(move || {
            let _ = signals.wait();
            let _ = shutdown.send(None);
        });
    }
    {
        let (ctl, shutdown) = (ctl.clone(), shutdown.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (ctl, shutdown) = (ctl.clone(), shutdown.clone());
                std::thread::spawn(move || serve(conn, ctl, shutdown));
            }
        });
    }
    report(Event::Ready);

    let reply_to = stop.recv().ok().flatten();
    let _ = std::fs::remove_file(paths.socket());
    let result = call(ctl.lock().unwrap().worker.as_mut(), WorkerRequest::Teardown).map(|_| ());
    if let Some((tx, written)) = reply_to {
        let _ = tx.send(result.clone());
        let _ = written.recv_timeout(std::time::Duration::from_secs(2));
    }
    result.map_err(anyhow::Error::msg)
}
