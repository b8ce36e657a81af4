//! The worker of a lab that spans machines: every order goes to the `vemu agent`s of
//! the machines it concerns, and their answers are merged into the lab's.
//!
//! Bring-up goes in phases ([`bringup`]): every agent builds its share (nodes, devices,
//! tunnel sockets) and says where its tunnels listen; then each is told where its
//! tunnels' far ends are and starts its engine and commands. A failed phase takes every
//! share down again.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use vemu_engine::{CaptureSpec, Captured, LabClock, Target};
use vemu_scenario::Plan;

use crate::clock_sync::{ClockFilter, Offset, Sample, Wall};
use crate::wire::AgentHello;
use vemu_machine::route::{AgentRoute, MAX_UNDERLAY_PROBES, UNDERLAY_PROBE};
use vemu_machine::worker::{Counters, Worker, WorkerError, WorkerReply, WorkerRequest};

mod bringup;
mod orders;

/// Environment variable naming the file with the agents' bearer token (default
/// [`DEFAULT_TOKEN_FILE`]).
pub const TOKEN_FILE_ENV: &str = "VEMU_AGENT_TOKEN_FILE";
pub const DEFAULT_TOKEN_FILE: &str = "/etc/vemu/agent-token";

/// Heartbeats: how often each agent is asked, how long its answer may take, and how
/// many missed in a row make its machine lost.
const HEARTBEAT: Duration = Duration::from_secs(1);
const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(1);
pub const MISSED_HEARTBEATS: u32 = 3;
/// A new controller state goes to the agents at once, not with the next heartbeat — at
/// most once in this long (a timeline that changes links every millisecond sends it
/// 10 times a second), and no more than [`STATE_BYTES_PER_S`] to each agent (the state
/// holds the settings of every link changed at run time: some MB once a timeline has
/// changed 10,000).
const STATE_GAP: Duration = Duration::from_millis(100);
const STATE_BYTES_PER_S: f64 = 4e6;

/// How long after handing on a state of `bytes` the next may go.
fn state_gap(bytes: usize) -> Duration {
    STATE_GAP.max(Duration::from_secs_f64(bytes as f64 / STATE_BYTES_PER_S))
}

/// Environment variable of the controller: seconds an agent keeps its share of a lab
/// without hearing from the controller (default [`DEFAULT_LEASE_S`]), e.g. after the
/// controller's machine died.
pub const LEASE_ENV: &str = "VEMU_AGENT_LEASE";
pub const DEFAULT_LEASE_S: u64 = 60;

/// The lease agents are given, from [`LEASE_ENV`].
pub fn lease_s() -> Result<u64> {
    match std::env::var(LEASE_ENV) {
        Err(_) => Ok(DEFAULT_LEASE_S),
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(s) if (2..=86_400).contains(&s) => Ok(s),
            _ => {
                anyhow::bail!("{LEASE_ENV} must be a number of seconds from 2 to 86400, got '{v}'")
            }
        },
    }
}

/// The token agents expect, from [`TOKEN_FILE_ENV`]'s file.
pub fn agent_token() -> Result<String> {
    let path = std::env::var(TOKEN_FILE_ENV).unwrap_or_else(|_| DEFAULT_TOKEN_FILE.into());
    read_token(std::path::Path::new(&path))
        .with_context(|| format!("the agents' token (set {TOKEN_FILE_ENV} to another file)"))
}

/// The agents' token from `path`: a file only its owner may read or write (as ssh
/// insists for keys: a token others can read is no secret), of at least 16 characters.
pub fn read_token(path: &std::path::Path) -> Result<String> {
    // Never shown to a tenant's nodes this process makes.
    vemu_host::confine::hide_in_confined_nodes(path);
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        anyhow::bail!("{} is open to others (mode {mode:04o}): the token must be readable by its owner alone (chmod 600 {})", path.display(), path.display());
    }
    let t = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let t = t.trim().to_string();
    if t.len() < 16 {
        anyhow::bail!("{}: the token must have at least 16 characters", path.display());
    }
    Ok(t)
}

/// `pairs` (sender, receiver) in rounds in which no machine takes part twice, each in
/// the first round it fits, in the order given. Not even as sender of one probe and
/// receiver of another: the probes are TCP, and the acknowledgements of one direction
/// queue behind the other direction's data (which then holds it to its own rate:
/// bench/README.md, "The controller").
fn probe_rounds(pairs: &[(usize, usize)]) -> Vec<Vec<(usize, usize)>> {
    let mut rounds: Vec<Vec<(usize, usize)>> = Vec::new();
    for &(a, b) in pairs {
        match rounds
            .iter_mut()
            .find(|r| r.iter().all(|&(x, y)| x != a && x != b && y != a && y != b))
        {
            Some(r) => r.push((a, b)),
            None => rounds.push(vec![(a, b)]),
        }
    }
    rounds
}

/// A connection to one machine's agent, for the worker's orders.
struct AgentClient {
    route: AgentRoute,
    rt: tokio::runtime::Runtime,
}

impl AgentClient {
    fn new(route: AgentRoute) -> Result<AgentClient> {
        Ok(AgentClient {
            route,
            rt: tokio::runtime::Builder::new_current_thread().enable_all().build()?,
        })
    }

    fn hello(&self) -> Result<AgentHello> {
        let bytes = self
            .rt
            .block_on(self.route.send("GET", "/v1/agent", String::new()))
            .with_context(|| self.what())?;
        serde_json::from_slice(&bytes)
            .with_context(|| format!("{}: not an agent's answer", self.what()))
    }

    fn call(&self, lab: &str, req: &WorkerRequest) -> WorkerReply {
        let body = match serde_json::to_string(req) {
            Ok(b) => b,
            Err(e) => return WorkerReply::error(e.to_string()),
        };
        // No answer is the machine's: lost, for this order.
        let bytes =
            match self.rt.block_on(self.route.send("POST", &format!("/v1/agent/labs/{lab}"), body))
            {
                Ok(b) => b,
                Err(e) => {
                    return WorkerReply::Error(WorkerError::lost(format!("{}: {e:#}", self.what())))
                }
            };
        match serde_json::from_slice::<WorkerReply>(&bytes) {
            Ok(WorkerReply::Error(e)) => WorkerReply::Error(e.within(&self.what())),
            Ok(r) => r,
            Err(e) => WorkerReply::error(format!("{}: not an agent's answer: {e}", self.what())),
        }
    }

    fn what(&self) -> String {
        self.route.what()
    }
}

/// Tell every machine of `plan` to take its share down (for `vemu clean` after the
/// controller died); what could not be done, one message per machine.
pub fn teardown_everywhere(plan: &Plan) -> Vec<String> {
    let (token, tls) = match (agent_token(), vemu_machine::channel::client_config()) {
        (Ok(t), Ok(c)) => (t, c),
        (Err(e), _) | (_, Err(e)) => {
            return vec![format!(
                "{e:#} (the agents take lab '{}' down when their leases end)",
                plan.name
            )]
        }
    };
    std::thread::scope(|s| {
        let handles: Vec<_> = plan
            .machines
            .iter()
            .map(|m| {
                let route = AgentRoute::new(m, &token, &tls);
                s.spawn(move || {
                    let a = AgentClient::new(route).map_err(|e| e.to_string())?;
                    match a.call(&plan.name, &WorkerRequest::Teardown) {
                        WorkerReply::Error(e) => Err(e.message),
                        _ => Ok(()),
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().unwrap_or_else(|_| Err("a thread panicked".into())).err())
            .collect()
    })
}

/// What the agent at `address` holds of lab `lab` for a controller that takes it over
/// from another machine: the lab's plan and the state its controller last handed on
/// (JSON; `None` if it handed none on), with the lab clock's zero moved to this
/// machine's monotonic clock (the dead controller's was another machine's): the agent's
/// lab clock, read halfway through the exchange.
pub fn fetch_state(
    address: SocketAddr,
    lab: &str,
) -> Result<(serde_json::Value, Option<serde_json::Value>)> {
    let (token, tls) = (agent_token()?, vemu_machine::channel::client_config()?);
    let a = AgentClient::new(AgentRoute::to_peer(address, &token, &tls))?;
    let asked_ns = vemu_engine::monotonic_ns();
    match a.call(lab, &WorkerRequest::State) {
        WorkerReply::Text(t) => {
            let answered_ns = vemu_engine::monotonic_ns();
            let mut v: serde_json::Value = serde_json::from_str(&t)
                .ok()
                .filter(serde_json::Value::is_object)
                .ok_or_else(|| anyhow::anyhow!("{}: not a lab's state", a.what()))?;
            let mut saved = Some(v["saved"].take()).filter(|s| s.is_object());
            if let (Some(s), Some(lab_now)) = (saved.as_mut(), v["lab_now_ns"].as_u64()) {
                s["clock_epoch_ns"] =
                    (asked_ns / 2 + answered_ns / 2).saturating_sub(lab_now).into();
            }
            Ok((v["plan"].take(), saved))
        }
        WorkerReply::Error(e) => anyhow::bail!("{}: {e}", a.what()),
        _ => anyhow::bail!("{}: an answer that is not a lab's state", a.what()),
    }
}

/// A lab's machines, as one worker.
pub struct Cluster {
    lab: String,
    agents: Vec<AgentClient>,
    /// Each node's machine, each tunnel's machines (sides a and b: a link's ends, then a
    /// segment member's and its segment's; see [`Plan::tunnel_machines`]), each
    /// segment's machine and its members' first tunnel.
    node_at: Vec<usize>,
    tunnel_at: Vec<[usize; 2]>,
    seg_at: Vec<usize>,
    member_base: Vec<usize>,
    node_names: Vec<String>,
    /// Captures running, by id: a way to stop each machine's part.
    captures: std::collections::HashMap<u64, Vec<tokio::sync::oneshot::Sender<()>>>,
    next_capture: u64,
    /// Which machines are lost (set by the heartbeat thread).
    health: Arc<Health>,
    heartbeat: Option<std::thread::JoinHandle<()>>,
    lease_s: u64,
    /// The underlay's capacity between machines with links between them, measured as
    /// the lab came up or when a rate was first set on a link that way: (from, to,
    /// bits/s; `None` if the measure failed).
    underlay: Vec<(usize, usize, Option<u64>)>,
    /// Each link's machines, when they differ ([`Cluster::rated_directions`]).
    link_machines: Vec<Option<[usize; 2]>>,
}

struct Health {
    lost: Vec<AtomicBool>,
    stop: AtomicBool,
    /// Each machine's lab clock against ours, from the heartbeats.
    clocks: Vec<std::sync::Mutex<ClockFilter>>,
    /// The controller's state as last saved, and its version: each agent that has an
    /// older one gets it at once (within [`STATE_GAP`] of the last time), and with every
    /// heartbeat until it took it ([`Worker::keep_saved`]).
    saved: std::sync::Mutex<(u64, Option<Arc<Vec<u8>>>)>,
    /// Told when `saved` changes.
    saved_changed: std::sync::Condvar,
}

impl Health {
    fn offset(&self, m: usize) -> Option<Offset> {
        self.clocks.get(m).and_then(|c| c.lock().unwrap_or_else(|e| e.into_inner()).estimate())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.health.stop.store(true, Ordering::Relaxed);
        self.health.saved_changed.notify_all();
        if let Some(t) = self.heartbeat.take() {
            let _ = t.join();
        }
    }
}

impl Cluster {
    /// Reach every machine of `plan` (checking its agent answers and takes the token).
    pub fn connect(plan: &Plan, token: &str) -> Result<Cluster> {
        Cluster::connect_agents(plan, token, |a, lab| {
            let hello = a.hello()?;
            if hello.labs.iter().any(|l| l == lab) {
                anyhow::bail!(
                    "{} already holds a share of lab '{lab}' (take it down first)",
                    a.what()
                );
            }
            Ok(())
        })
    }

    /// A client for every machine of `plan`, each checked by `check` first.
    fn connect_agents(
        plan: &Plan,
        token: &str,
        check: impl Fn(&AgentClient, &str) -> Result<()>,
    ) -> Result<Cluster> {
        let mut agents = Vec::new();
        let tls = vemu_machine::channel::client_config()?;
        for m in &plan.machines {
            let a = AgentClient::new(AgentRoute::new(m, token, &tls))?;
            check(&a, &plan.name)?;
            agents.push(a);
        }
        let node_at: Vec<usize> = plan.nodes.iter().map(|n| n.machine).collect();
        let link_machines = plan
            .links
            .iter()
            .map(|l| Some([node_at[l.a.node], node_at[l.b.node]]).filter(|[a, b]| a != b))
            .collect();
        Ok(Cluster {
            link_machines,
            lab: plan.name.clone(),
            tunnel_at: plan.tunnel_machines(),
            seg_at: (0..plan.segments.len()).map(|g| plan.segment_machine(g)).collect(),
            member_base: (0..plan.segments.len()).map(|g| plan.member_tunnel(g, 0)).collect(),
            node_names: plan.nodes.iter().map(|n| n.name.clone()).collect(),
            node_at,
            agents,
            captures: Default::default(),
            next_capture: 1,
            health: Arc::new(Health {
                lost: plan.machines.iter().map(|_| AtomicBool::new(false)).collect(),
                stop: AtomicBool::new(false),
                clocks: plan.machines.iter().map(|_| Default::default()).collect(),
                saved: Default::default(),
                saved_changed: Default::default(),
            }),
            heartbeat: None,
            lease_s: lease_s()?,
            underlay: Vec::new(),
        })
    }

    /// Take over lab `plan` (built by an earlier controller, which died) from the agents
    /// that hold its shares: heartbeats start at once, on the lab clock of `clock` (the
    /// agents' clocks started from it). A machine whose agent does not answer, or no
    /// longer holds its share, is lost from the start (its links are taken down as for
    /// any lost machine); a lab no agent holds any more is an error.
    pub fn attach(
        plan: &Plan,
        token: &str,
        clock: LabClock,
        underlay: Vec<(usize, usize, Option<u64>)>,
    ) -> Result<Cluster> {
        let mut cluster = Cluster::connect_agents(plan, token, |_, _| Ok(()))?;
        let held: Vec<Result<(), String>> = std::thread::scope(|s| {
            let handles: Vec<_> = cluster.agents.iter().map(|a| s.spawn(|| match a.hello() {
                Ok(h) if h.labs.contains(&plan.name) => Ok(()),
                Ok(_) => Err(format!("{} no longer holds a share of lab '{}' (its lease ended, or it restarted)", a.what(), plan.name)),
                Err(e) => Err(format!("{e:#}")),
            })).collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("a thread panicked".into())))
                .collect()
        });
        if held.iter().all(Result::is_err) {
            let why: Vec<String> = held.into_iter().filter_map(Result::err).collect();
            anyhow::bail!(
                "no machine holds lab '{}' any more ({}); 'vemu clean' removes what is left of it",
                plan.name,
                why.join("; ")
            );
        }
        for (m, h) in held.into_iter().enumerate() {
            if let Err(e) = h {
                eprintln!("vemu: {e}: lost");
                cluster.health.lost[m].store(true, Ordering::Relaxed);
            }
        }
        cluster.underlay = underlay;
        cluster.start_heartbeats(clock)?;
        Ok(cluster)
    }

    /// Send `req` to machines `to` side by side; their answers in that order.
    fn each(&self, to: &[usize], req: &WorkerRequest) -> Vec<WorkerReply> {
        std::thread::scope(|s| {
            let handles: Vec<_> =
                to.iter().map(|&m| s.spawn(move || self.agents[m].call(&self.lab, req))).collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| WorkerReply::error("a thread panicked")))
                .collect()
        })
    }

    /// The machines not lost.
    fn all(&self) -> Vec<usize> {
        (0..self.agents.len()).filter(|&m| !self.lost(m)).collect()
    }

    fn lost(&self, m: usize) -> bool {
        self.health.lost[m].load(Ordering::Relaxed)
    }

    /// Ask every machine, every [`HEARTBEAT`], whether it still holds its share (which
    /// renews its lease); [`MISSED_HEARTBEATS`] unanswered in a row make it lost, an
    /// answer from a lost one makes it rejoin (not once its agent said it holds no share).
    /// Each answer says what the machine's lab clock read: a sample of its offset from
    /// `clock`, the controller's ([`crate::clock_sync`]).
    fn start_heartbeats(&mut self, clock: LabClock) -> Result<()> {
        let routes: Vec<AgentRoute> = self.agents.iter().map(|a| a.route.clone()).collect();
        let (health, lab) = (self.health.clone(), self.lab.clone());
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let t = std::thread::Builder::new().name("vemu-heartbeat".into()).spawn(move || {
            let mut missed = vec![0u32; routes.len()];
            // Machines whose agent said it holds no share (it restarted): never back.
            let mut gone = vec![false; routes.len()];
            // The version of the controller's state each agent has.
            let mut has = vec![0u64; routes.len()];
            let mut next = std::time::Instant::now();
            // When a round last carried a state, and the gap its size asks after it.
            let (mut last_state, mut gap) = (next, Duration::ZERO);
            while !health.stop.load(Ordering::Relaxed) {
                // Until the next heartbeat, or a state newer than what a machine that
                // answered last time has (an early round, for those machines only).
                let oldest = (0..routes.len()).filter(|&m| !health.lost[m].load(Ordering::Relaxed) && !routes[m].suspect.load(Ordering::Relaxed)).map(|m| has[m]).min();
                let regular = {
                    let mut g = health.saved.lock().unwrap_or_else(|e| e.into_inner());
                    loop {
                        let now = std::time::Instant::now();
                        if now >= next {
                            break true;
                        }
                        let newer = oldest.is_some_and(|o| g.0 > o);
                        if newer && now >= last_state + gap {
                            break false;
                        }
                        let until = if newer { next.min(last_state + gap) } else { next };
                        g = health.saved_changed.wait_timeout(g, until - now).unwrap_or_else(|e| e.into_inner()).0;
                    }
                };
                if health.stop.load(Ordering::Relaxed) {
                    break;
                }
                if regular {
                    next += HEARTBEAT;
                }
                let now = std::time::Instant::now();
                let (version, state) = health.saved.lock().unwrap_or_else(|e| e.into_inner()).clone();
                // (A heartbeat carries the state only once its gap has passed too.)
                let hand_on = state.as_ref().filter(|_| now >= last_state + gap);
                if let Some(s) = hand_on.filter(|_| (0..routes.len()).any(|m| has[m] < version)) {
                    (last_state, gap) = (now, state_gap(s.len()));
                }
                // (Lost machines too, at each heartbeat, unless their agent said it holds
                // no share: one that answers again rejoins.)
                let asked = |m: usize| match health.lost[m].load(Ordering::Relaxed) {
                    true => regular && !gone[m],
                    false => regular || (has[m] < version && !routes[m].suspect.load(Ordering::Relaxed)),
                };
                let asks = routes.iter().enumerate().filter(|(m, _)| asked(*m)).map(|(m, r)| {
                    let path = format!("/v1/agent/labs/{lab}/lease");
                    // With the controller's state, if the agent's is older.
                    let body = match (hand_on, has[m] < version) {
                        (Some(s), true) => hyper::body::Bytes::from(s.as_ref().clone()),
                        _ => hyper::body::Bytes::new(),
                    };
                    // The answer's head and body, within the heartbeat's time.
                    let ask = async move {
                        use http_body_util::BodyExt;
                        let (res, sent_ns, received_ns) = r.request_timed("POST", &path, http_body_util::Full::new(body), Some(clock)).await?;
                        let status = res.status();
                        let body = res.into_body().collect().await?.to_bytes();
                        anyhow::Ok((status, body, sent_ns, received_ns))
                    };
                    async move { (m, tokio::time::timeout(HEARTBEAT_TIMEOUT, ask).await) }
                });
                for (m, answer) in rt.block_on(futures_util::future::join_all(asks)) {
                    let answered = matches!(&answer, Ok(Ok((status, ..))) if status.is_success());
                    if !regular && !answered {
                        // (Only heartbeats count as missed; the next one carries the state.)
                        continue;
                    }
                    routes[m].suspect.store(!answered, Ordering::Relaxed);
                    let was_lost = health.lost[m].load(Ordering::Relaxed);
                    match answer {
                        Ok(Ok((status, body, sent_ns, received_ns))) if status.is_success() => {
                            missed[m] = 0;
                            if was_lost {
                                // (The controller's state goes to it again.)
                                eprintln!("vemu: {}: answers again", routes[m].what());
                                has[m] = 0;
                                health.lost[m].store(false, Ordering::Relaxed);
                            }
                            if hand_on.is_some() {
                                has[m] = version;
                            }
                            let v = serde_json::from_slice::<serde_json::Value>(&body).unwrap_or_default();
                            if let Some(agent_ns) = v["lab_now_ns"].as_u64() {
                                // (Disciplined wall clocks: the agent's with its answer, ours now.)
                                let agent_wall = serde_json::from_value::<Wall>(v["wall"].clone()).ok();
                                let controller_wall = agent_wall.and_then(|_| Wall::read(clock));
                                health.clocks[m].lock().unwrap_or_else(|e| e.into_inner()).add(Sample { sent_ns, agent_ns, received_ns, agent_wall, controller_wall });
                            }
                        }
                        Ok(Ok((status, body, ..))) if status == hyper::StatusCode::NOT_FOUND => {
                            // The agent holds no share: it restarted (and removed what it
                            // held). Gone at once.
                            eprintln!("vemu: {}: {}", routes[m].what(), crate::error::error_message(&body).unwrap_or_else(|| format!("HTTP {status}")));
                            health.lost[m].store(true, Ordering::Relaxed);
                            gone[m] = true;
                        }
                        _ => {
                            missed[m] += 1;
                            if missed[m] >= MISSED_HEARTBEATS && !was_lost {
                                eprintln!("vemu: {}: no answer to {MISSED_HEARTBEATS} heartbeats in a row: lost", routes[m].what());
                                health.lost[m].store(true, Ordering::Relaxed);
                            }
                        }
                    }
                }
            }
        })?;
        self.heartbeat = Some(t);
        Ok(())
    }

    /// The directions between machines (sender, receiver) that a link with a rate set
    /// crosses, from `plan`: those whose rates are weighed against the underlay
    /// ([`crate::UnderlayStatus`]; links without a rate are not).
    fn rated_directions(&self, plan: &Plan) -> Vec<(usize, usize)> {
        let mut pairs = std::collections::BTreeSet::new();
        for (l, m) in plan.links.iter().zip(&self.link_machines) {
            let Some([a, b]) = *m else { continue };
            if l.forward.rate_bps.is_some() {
                pairs.insert((a, b));
            }
            if l.reverse.rate_bps.is_some() {
                pairs.insert((b, a));
            }
        }
        pairs.into_iter().collect()
    }

    /// Measure the underlay in the directions `pairs` (the first [`MAX_UNDERLAY_PROBES`],
    /// [`UNDERLAY_PROBE`] each), in rounds in which no machine takes part twice
    /// ([`probe_rounds`]): a 4-machine ring takes 4 rounds instead of 8. Probes of one
    /// round could still share a switch. A measure that fails is said and left out; the
    /// lab runs anyway.
    fn measure_underlay(&self, pairs: &[(usize, usize)]) -> Vec<(usize, usize, Option<u64>)> {
        let mut measured = Vec::new();
        let pairs: Vec<(usize, usize)> = pairs.iter().copied().take(MAX_UNDERLAY_PROBES).collect();
        for round in probe_rounds(&pairs) {
            // Directions with no machine in common are measured at once (each by its
            // own sender's runtime); the others wait for their round.
            let results: Vec<Result<u64>> = std::thread::scope(|scope| {
                let probes: Vec<_> = round
                    .iter()
                    .map(|&(a, b)| {
                        let (agent, to) = (&self.agents[a], self.agents[b].route.address);
                        scope.spawn(move || {
                            let body = serde_json::json!({"lab": self.lab, "to": to, "duration_ms": UNDERLAY_PROBE.as_millis() as u64}).to_string();
                            agent
                                .rt
                                .block_on(agent.route.send("POST", "/v1/agent/underlay/probe", body))
                                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b)?["bps"].as_u64().ok_or_else(|| anyhow!("an answer without 'bps'")))
                        })
                    })
                    .collect();
                probes
                    .into_iter()
                    .map(|p| {
                        p.join().unwrap_or_else(|_| Err(anyhow!("the probe's thread panicked")))
                    })
                    .collect()
            });
            for (&(a, b), bps) in round.iter().zip(results) {
                if let Err(e) = &bps {
                    eprintln!("vemu: {}: {e:#}", self.agents[a].what());
                }
                measured.push((a, b, bps.ok()));
            }
        }
        measured
    }

    /// The tunnel of a link or segment port: a member's goes from its node (side a) to
    /// its segment's machine (side b), forward being its egress.
    fn tunnel(&self, target: Target) -> usize {
        match target {
            Target::Link(l) => l,
            Target::Member(g, k) => self.member_base.get(g).map_or(usize::MAX, |b| b + k),
        }
    }

    /// The machines a link or segment port is on (a member's: its node's and its
    /// segment's).
    fn machines_of(&self, target: Target) -> Vec<usize> {
        let mut v = self.tunnel_at.get(self.tunnel(target)).map(|m| m.to_vec()).unwrap_or_default();
        v.dedup();
        v.retain(|&m| !self.lost(m));
        v
    }

    fn node_machine(&self, node: &str) -> Result<usize, WorkerError> {
        let m = self
            .node_names
            .iter()
            .position(|n| n == node)
            .map(|i| self.node_at[i])
            .ok_or_else(|| WorkerError::caller(format!("no node '{node}'")))?;
        match self.lost(m) {
            true => Err(WorkerError::lost(format!(
                "node '{node}' is on {}, which is lost",
                self.agents[m].what()
            ))),
            false => Ok(m),
        }
    }

    /// Every machine's answer to `req` (but lost ones'), taken apart by `pick`; the
    /// first refusal instead, or an internal error for an answer `pick` does not take.
    fn gather<T>(
        &self,
        req: &WorkerRequest,
        pick: impl Fn(WorkerReply) -> Option<T>,
    ) -> Result<Vec<T>, WorkerError> {
        self.each(&self.all(), req)
            .into_iter()
            .map(|r| match r {
                WorkerReply::Error(e) => Err(e),
                r => {
                    pick(r).ok_or_else(|| WorkerError::internal("an agent answered the wrong kind"))
                }
            })
            .collect()
    }

    /// The first error among answers, else the first answer.
    fn first(replies: Vec<WorkerReply>) -> WorkerReply {
        let mut first = None;
        for r in replies {
            if let WorkerReply::Error(_) = r {
                return r;
            }
            first.get_or_insert(r);
        }
        first.unwrap_or(WorkerReply::Done)
    }

    /// Start machine `m`'s part of a capture; a thread passes its frames to `tx` until
    /// the returned sender fires, the agent's stream ends or `tx`'s receiver is gone.
    fn start_capture(
        &self,
        m: usize,
        specs: &[CaptureSpec],
        tx: std::sync::mpsc::SyncSender<Captured>,
    ) -> Result<tokio::sync::oneshot::Sender<()>> {
        use http_body_util::BodyExt;
        let route = self.agents[m].route.clone();
        let health = self.health.clone();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let body = serde_json::to_vec(specs)?;
        let res = rt
            .block_on(route.request(
                "POST",
                &format!("/v1/agent/labs/{}/capture", self.lab),
                body.into(),
            ))
            .with_context(|| route.what())?;
        if !res.status().is_success() {
            let m = rt.block_on(AgentRoute::failure(res));
            return Err(anyhow!("{}: {m}", route.what()));
        }
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new().name("vemu-capture-in".into()).spawn(move || {
            rt.block_on(async move {
                let mut body = res.into_body();
                let (mut buf, mut frames) = (Vec::new(), Vec::new());
                loop {
                    tokio::select! {
                        _ = &mut stopped => return,
                        f = body.frame() => {
                            let Some(Ok(f)) = f else { return };
                            let Some(d) = f.data_ref() else { continue };
                            buf.extend_from_slice(d);
                            if let Err(e) = crate::wire::CaptureRecord::decode(&mut buf, &mut frames) {
                                eprintln!("vemu: capture from {}: {e}", route.what());
                                return;
                            }
                            // On the controller's lab clock (as the other machines' frames).
                            let offset = health.offset(m).unwrap_or_default();
                            for mut c in frames.drain(..) {
                                c.t_ns = offset.to_controller(c.t_ns);
                                if tx.send(c).is_err() {
                                    return;
                                }
                            }
                        }
                    }
                }
            })
        })?;
        Ok(stop)
    }

    /// Bring the lab up on every machine ([`bringup`]); never half: after a failure,
    /// every share is told to go and the lab's directory here is removed.
    fn build(&self, plan: Plan, clock_epoch_ns: u64) -> WorkerReply {
        // A key of the lab's own for its tunnel datagrams (never the agents' token).
        let mut key = [0u8; 32];
        if let Err(e) = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut key) {
            return WorkerReply::error(format!("making the lab's tunnel key: {e}"));
        }
        let up = bringup::BringUp {
            lab: &self.lab,
            machines: &self.agents,
            tunnel_at: &self.tunnel_at,
            lease_s: self.lease_s,
            vxlan_port: vemu_host::vxlan_port(&self.lab),
            tunnel_key: key.iter().map(|b| format!("{b:02x}")).collect(),
            lab_now_ns: vemu_engine::monotonic_ns().saturating_sub(clock_epoch_ns),
        };
        let mut failed = up.run(&plan, clock_epoch_ns, &self.all());
        if failed.is_empty() {
            return WorkerReply::Done;
        }
        if let Err(e) = vemu_host::remove_lab(&self.lab) {
            failed.push(format!("and removing it here: {e:#}"));
        }
        WorkerReply::error(failed.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::{probe_rounds, state_gap};
    use std::time::Duration;

    /// Audit (issue 39): the agent took a world-readable token file.
    #[test]
    fn a_token_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let path = std::env::temp_dir().join(format!("vemu-token-test-{}", std::process::id()));
        std::fs::write(&path, "a-token-0123456789abcdef\n").unwrap();
        for (mode, ok) in
            [(0o644, false), (0o640, false), (0o604, false), (0o600, true), (0o400, true)]
        {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            match super::read_token(&path) {
                Ok(t) => assert!(ok && t == "a-token-0123456789abcdef", "mode {mode:o}"),
                Err(e) => assert!(
                    !ok && format!("{e:#}").contains(&format!("mode {mode:04o}"))
                        && format!("{e:#}").contains("chmod 600"),
                    "mode {mode:o}: {e:#}"
                ),
            }
        }
        std::fs::write(&path, "short\n").unwrap();
        assert!(format!("{:#}", super::read_token(&path).unwrap_err())
            .contains("at least 16 characters"));
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_big_state_goes_to_the_agents_less_often() {
        // Small states at most every 0.1 s; 8 MB (a lab of ~15,000 links) every 2 s:
        // 4 MB/s to each agent at most.
        assert_eq!(state_gap(0), Duration::from_millis(100));
        assert_eq!(state_gap(300_000), Duration::from_millis(100));
        assert_eq!(state_gap(8_000_000), Duration::from_secs(2));
    }

    #[test]
    fn underlay_probes_go_at_once_when_they_share_no_machine() {
        // Two machines: both directions share both, one after the other.
        assert_eq!(probe_rounds(&[(0, 1), (1, 0)]), vec![vec![(0, 1)], vec![(1, 0)]]);
        // A ring of four: (0,1) with (2,3), (1,2) with (3,0), and their reverses.
        let ring = [(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2), (3, 0), (0, 3)];
        let rounds = probe_rounds(&ring);
        assert_eq!(rounds.len(), 4, "{rounds:?}");
        let mut all: Vec<_> = rounds.concat();
        all.sort();
        let mut want = ring.to_vec();
        want.sort();
        assert_eq!(all, want, "every direction measured once");
        for r in &rounds {
            let mut m: Vec<usize> = r.iter().flat_map(|&(a, b)| [a, b]).collect();
            m.sort();
            m.dedup();
            assert_eq!(m.len(), 2 * r.len(), "a machine twice in {r:?}");
        }
    }
}
