//! `vemu agent`: a machine's share of labs that span machines. It listens on one
//! address, takes the controller's orders (a [`WorkerRequest`] per HTTP request over
//! TLS, both sides proving they hold the token: see [`vemu_machine::channel`]) and carries them out with a [`LocalWorker`] per lab —
//! a whole share per request, then local netlink calls. The address it listens on is
//! also the one its tunnels use.
//!
//! A machine's share of lab LAB is kept under the name `LAB@MACHINE`
//! ([`vemu_host::share_name`]: `/run/vemu/LAB@MACHINE`, namespaces
//! `vemu-LAB@MACHINE.NODE`, its cgroups and logs), never the lab's own, so the lab's
//! controller may run on a machine that holds a share too; the agent holds the share's
//! lock ([`vemu_host::LabLock`]) while it holds the share. Shares are marked
//! (`/run/vemu/LAB@MACHINE/agent`): when an agent starts, it removes what such shares
//! left behind (an agent that died, a machine that rebooted keeps nothing in /run), and
//! only those.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use axum::extract::{Path, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde::Deserialize;
use tokio::sync::oneshot;
use vemu_host::LabPaths;

use crate::api::ApiError;
use crate::wire::{AgentHello, CaptureRecord};
use crate::LockExt;
use vemu_machine::channel::{Binding, Role, PROOF_HEADER};
use vemu_machine::door::HereDoor;
use vemu_machine::worker::{LocalWorker, Worker, WorkerError, WorkerReply, WorkerRequest};

/// The marker of a lab share an agent built (`share`: its name on this machine).
fn marker(share: &str) -> std::path::PathBuf {
    LabPaths::new(share).dir.join("agent")
}

/// A share this agent holds: its name on this machine ([`vemu_host::share_name`]) and
/// the lock of that name.
struct Held {
    name: String,
    lock: vemu_host::LabLock,
}

struct Agent {
    listen: SocketAddr,
    token: String,
    underlay_mtu: u32,
    labs: Mutex<HashMap<String, Arc<Mutex<LocalWorker>>>>,
    /// Each built share's name here and lock, by lab.
    held: Mutex<HashMap<String, Held>>,
    /// Each lab's lease (its length, and when the controller was last heard).
    leases: Mutex<HashMap<String, (std::time::Duration, std::time::Instant)>>,
    /// Each lab's clock (its epoch on this machine's monotonic clock), read out with
    /// every heartbeat for the controller's [`crate::clock_sync`].
    epochs: Mutex<HashMap<String, u64>>,
    /// Each lab's machines (their agents' addresses), from its plan: the only addresses
    /// an underlay probe may go to.
    machines: Mutex<HashMap<String, Vec<SocketAddr>>>,
}

impl Agent {
    /// The paths of this machine's share of `lab` (a lab it does not hold: its own name,
    /// which holds nothing of the agent's).
    fn paths(&self, lab: &str) -> LabPaths {
        LabPaths::new(self.held.locked().get(lab).map_or(lab, |h| h.name.as_str()))
    }

    /// Forget `lab`: its worker, lease, clock and (after the worker took the share down)
    /// the share's name.
    fn forget(&self, lab: &str) {
        self.labs.locked().remove(lab);
        self.leases.locked().remove(lab);
        self.epochs.locked().remove(lab);
        self.machines.locked().remove(lab);
        if let Some(h) = self.held.locked().remove(lab) {
            h.lock.release();
        }
    }

    /// The controller of `lab` was heard from: its lease starts again.
    fn renew(&self, lab: &str) {
        if let Some(l) = self.leases.locked().get_mut(lab) {
            l.1 = std::time::Instant::now();
        }
    }

    /// Take down the shares whose controller was silent for longer than their lease.
    fn end_leases(&self) {
        let expired: Vec<(String, std::time::Duration)> = self
            .leases
            .locked()
            .iter()
            .filter(|(_, (len, at))| at.elapsed() > *len)
            .map(|(l, (len, _))| (l.clone(), *len))
            .collect();
        for (lab, len) in expired {
            // A share busy with an order (a long build) is not left: the order ends.
            if self.labs.locked().get(&lab).is_some_and(|w| w.try_lock().is_err()) {
                continue;
            }
            self.leases.locked().remove(&lab);
            let Some(w) = self.labs.locked().get(&lab).cloned() else { continue };
            eprintln!("vemu agent: no word from the controller of lab '{lab}' for {} s (its lease): taking the lab's share down", len.as_secs());
            if let Err(e) = w.locked().teardown() {
                eprintln!("vemu agent: lab '{lab}': {e}");
            }
            self.forget(&lab);
        }
    }
}

/// The MTU of the interface that has `addr` in this network namespace (1500 if none
/// is found). (Asked of the kernel, not read from /sys, which shows the namespace it
/// was mounted in.)
pub fn mtu_of(addr: std::net::IpAddr) -> u32 {
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else { return 1500 };
    for a in addrs {
        let ip = a.address.as_ref().and_then(|s| {
            s.as_sockaddr_in()
                .map(|v| std::net::IpAddr::V4(v.ip()))
                .or_else(|| s.as_sockaddr_in6().map(|v| std::net::IpAddr::V6(v.ip())))
        });
        if ip != Some(addr) {
            continue;
        }
        let Ok(sock) = std::net::UdpSocket::bind("127.0.0.1:0")
            .or_else(|_| std::net::UdpSocket::bind("[::1]:0"))
        else {
            return 1500;
        };
        // SAFETY: ifreq is plain data; SIOCGIFMTU reads its name and writes its MTU.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (d, c) in req.ifr_name.iter_mut().zip(a.interface_name.bytes().take(libc::IFNAMSIZ - 1))
        {
            *d = c as libc::c_char;
        }
        use std::os::fd::AsRawFd;
        // SAFETY: as above, on a socket we own.
        if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFMTU, &mut req) } == 0 {
            // SAFETY: the union's MTU member, as the ioctl filled it.
            return unsafe { req.ifr_ifru.ifru_mtu } as u32;
        }
    }
    1500
}

/// Run an agent until SIGTERM or SIGINT; then take down every share it holds.
pub fn run(listen: SocketAddr, token: String) -> Result<()> {
    use nix::sys::signal::{SigSet, Signal};
    // Leftovers of shares of earlier runs.
    // (Not a share another agent on this machine still holds: its lock says so.)
    for name in vemu_host::labs_present() {
        if marker(&name).exists() && !vemu_host::LabLock::held(&name) {
            eprintln!("vemu agent: removing what share '{name}' left behind");
            vemu_host::remove_lab(&name).with_context(|| format!("removing share '{name}'"))?;
            if let Ok(Some(l)) = vemu_host::LabLock::try_acquire(&name) {
                l.release();
            }
        }
    }
    let mut signals = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        signals.add(s);
    }
    signals.thread_block().context("blocking signals")?;
    // Processes of nodes whose parents end become ours, for the supervisors to reap.
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let agent = Arc::new(Agent {
        listen,
        token,
        underlay_mtu: mtu_of(listen.ip()),
        labs: Mutex::new(HashMap::new()),
        held: Mutex::new(HashMap::new()),
        leases: Mutex::new(HashMap::new()),
        epochs: Mutex::new(HashMap::new()),
        machines: Mutex::new(HashMap::new()),
    });
    {
        let agent = agent.clone();
        std::thread::Builder::new().name("vemu-leases".into()).spawn(move || loop {
            std::thread::sleep(std::time::Duration::from_secs(1));
            agent.end_leases();
            // (Also once no share is left, whose supervisor would do it.)
            vemu_machine::supervise::reap_orphans();
        })?;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("vemu-agent")
        .build()?;
    let listener = rt
        .block_on(async {
            let sock = if listen.is_ipv4() {
                tokio::net::TcpSocket::new_v4()?
            } else {
                tokio::net::TcpSocket::new_v6()?
            };
            sock.set_reuseaddr(true)?;
            vemu_machine::route::clamp_mss(&sock);
            sock.bind(listen)?;
            sock.listen(1024)
        })
        .with_context(|| format!("listening on {listen}"))?;
    eprintln!(
        "vemu agent: listening on {} (underlay MTU {})",
        listener.local_addr()?,
        agent.underlay_mtu
    );
    let router = Router::new()
        .route("/v1/agent", axum::routing::get(hello))
        .route("/v1/agent/labs/{lab}", axum::routing::post(call))
        .route("/v1/agent/labs/{lab}/nodes/{node}/exec", axum::routing::post(exec))
        .route("/v1/agent/labs/{lab}/nodes/{node}/shell", axum::routing::get(shell))
        .route("/v1/agent/labs/{lab}/nodes/{node}/log", axum::routing::get(log))
        .route("/v1/agent/labs/{lab}/capture", axum::routing::post(capture))
        .route("/v1/agent/labs/{lab}/lease", axum::routing::post(lease))
        .route("/v1/agent/underlay/probe", axum::routing::post(underlay_probe))
        .route("/v1/agent/underlay/sink", axum::routing::post(underlay_sink))
        .with_state(agent.clone())
        .layer(axum::extract::DefaultBodyLimit::max(MAX_ORDER_BYTES))
        .layer(middleware::from_fn_with_state(agent.clone(), require_token));
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let tls = tokio_rustls::TlsAcceptor::from(vemu_machine::channel::server_config()?);
    let server = rt.spawn(serve_tls(listener, tls, router, stop_rx));
    let _ = signals.wait();
    let _ = stop_tx.send(());
    let _ = rt.block_on(server);
    let labs: Vec<(String, Arc<Mutex<LocalWorker>>)> =
        agent.labs.locked().iter().map(|(l, w)| (l.clone(), w.clone())).collect();
    for (lab, w) in labs {
        eprintln!("vemu agent: taking down lab '{lab}'");
        if let Err(e) = w.locked().teardown() {
            eprintln!("vemu agent: lab '{lab}': {e}");
        }
        agent.forget(&lab);
    }
    Ok(())
}

/// Serve `router` over TLS on `listener` until `stop`: each connection's requests carry
/// its session's [`Binding`] (for the token proofs); as many connections as the API's
/// TCP listener takes, each with its TLS handshake and headers within the API's time.
async fn serve_tls(
    listener: tokio::net::TcpListener,
    tls: tokio_rustls::TlsAcceptor,
    router: Router,
    stop: oneshot::Receiver<()>,
) {
    use crate::api::limits::{HEADER_TIMEOUT, MAX_TCP_CONNECTIONS};
    let listener = Arc::new(listener);
    let accept = move || {
        let l = listener.clone();
        async move { crate::api::accept_nodelay(&l).await }
    };
    let prepare = move |tcp| {
        let (tls, router) = (tls.clone(), router.clone());
        async move {
            let Ok(Ok(stream)) = tokio::time::timeout(HEADER_TIMEOUT, tls.accept(tcp)).await else {
                return None;
            };
            let binding = Binding::of(stream.get_ref().1).ok()?;
            Some((stream, router.layer(axum::Extension(binding))))
        }
    };
    crate::api::serve_connections(accept, prepare, MAX_TCP_CONNECTIONS, stop).await
}

/// Largest order (a whole lab's plan travels with `Build`).
const MAX_ORDER_BYTES: usize = 256 << 20;

/// Refuse requests without the controller's proof of the token for this session; sign
/// every answer with the agent's.
async fn require_token(State(agent): State<Arc<Agent>>, req: Request, next: Next) -> Response {
    let binding = req.extensions().get::<Binding>().copied();
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if let (Some(b), Some(given)) = (binding, given) {
        if b.check(&agent.token, Role::Controller, given) {
            crate::api::Proof::proven(&req);
            let mut r = next.run(req).await;
            if let Ok(v) = b.proof(&agent.token, Role::Agent).parse() {
                r.headers_mut().insert(PROOF_HEADER, v);
            }
            return r;
        }
    }
    let mut r = (StatusCode::UNAUTHORIZED, Json(serde_json::json!({"error": "a valid 'Authorization: Bearer PROOF' header is needed (made from the agents' token: see docs/machines.md)"}))).into_response();
    r.headers_mut().insert(header::WWW_AUTHENTICATE, "Bearer".parse().expect("a header value"));
    r
}

async fn hello(State(agent): State<Arc<Agent>>) -> Json<AgentHello> {
    let mut labs: Vec<String> = agent.labs.locked().keys().cloned().collect();
    labs.sort();
    Json(AgentHello {
        version: env!("CARGO_PKG_VERSION").into(),
        underlay_mtu: agent.underlay_mtu,
        labs,
    })
}

async fn call(
    State(agent): State<Arc<Agent>>,
    Path(lab): Path<String>,
    Json(req): Json<WorkerRequest>,
) -> Response {
    if let Err(m) = vemu_scenario::valid_lab_name(&lab) {
        return ApiError::bad_request(m).into_response();
    }
    let reply = tokio::task::spawn_blocking(move || order(&agent, &lab, req))
        .await
        .unwrap_or_else(|e| WorkerReply::error(format!("the order failed: {e}")));
    Json(reply).into_response()
}

/// The controller's heartbeat: renews the lab's lease, keeps the controller's state it
/// may carry, and says what the lab clock reads here (`lab_now_ns`: a sample for
/// [`crate::clock_sync`]), and where a daemon disciplines this machine's wall clock,
/// that read with the lab clock (`wall`).
async fn lease(
    State(agent): State<Arc<Agent>>,
    Path(lab): Path<String>,
    state: axum::body::Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    let clock = agent.epochs.locked().get(&lab).map(|&epoch_ns| vemu_engine::LabClock { epoch_ns });
    let lab_now_ns = clock.map(|c| c.now_ns());
    // Where a daemon disciplines this machine's wall clock: it, read with the lab clock.
    let wall = clock.and_then(crate::clock_sync::Wall::read);
    share(&agent, &lab)?;
    agent.renew(&lab);
    // The controller's state, kept for a controller that takes the lab over from
    // another machine (`vemu attach --from`).
    if !state.is_empty() {
        let path = vemu_machine::worker::saved_copy(&agent.paths(&lab));
        crate::api::blocking(move || {
            crate::lab::saved::write_whole(&path, &state)
                .map_err(|e| ApiError::internal(format!("keeping the controller's state: {e:#}")))
        })
        .await?;
    }
    Ok(Json(serde_json::json!({"ok": true, "lab_now_ns": lab_now_ns, "wall": wall})))
}

/// Body of `POST /v1/agent/underlay/probe`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProbeOrder {
    /// The lab whose machines are measured.
    lab: String,
    /// The other machine's agent.
    to: SocketAddr,
    duration_ms: u64,
}

/// How long a probe waits for its lab's plan (the controller measures while the shares
/// are built: its probe may come before the order to build).
const PROBE_WAITS_FOR_PLAN: std::time::Duration = std::time::Duration::from_secs(10);

/// Measure the underlay from this machine to another machine's agent (the controller
/// asks, as a lab across machines comes up): `{"bps": ...}`. Only toward a machine of
/// the lab (once this agent has its plan): the token does not make the agent connect
/// to any address its holder names.
async fn underlay_probe(
    State(agent): State<Arc<Agent>>,
    Json(o): Json<ProbeOrder>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let started = tokio::time::Instant::now();
    loop {
        let known = agent.machines.locked().get(&o.lab).map(|m| m.contains(&o.to));
        match known {
            Some(true) => break,
            Some(false) => return Err(ApiError { status: StatusCode::FORBIDDEN, message: format!("{} is not a machine of lab '{}': the underlay is measured toward the lab's machines only", o.to, o.lab) }),
            None if started.elapsed() >= PROBE_WAITS_FOR_PLAN => return Err(ApiError { status: StatusCode::FORBIDDEN, message: format!("this machine has no share of lab '{}' to measure the underlay for", o.lab) }),
            None => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    }
    let duration = std::time::Duration::from_millis(o.duration_ms)
        .min(vemu_machine::route::MAX_UNDERLAY_PROBE);
    let tls =
        vemu_machine::channel::client_config().map_err(|e| ApiError::internal(format!("{e:#}")))?;
    let route = vemu_machine::route::AgentRoute::to_peer(o.to, &agent.token, &tls);
    let gateway = |m: String| ApiError {
        status: StatusCode::BAD_GATEWAY,
        message: format!("measuring the underlay to {}: {m}", o.to),
    };
    let bps = tokio::time::timeout(
        duration + vemu_machine::route::MAX_UNDERLAY_PROBE,
        route.measure_to(duration),
    )
    .await
    .map_err(|_| gateway("no answer in time".into()))?
    .map_err(|e| gateway(format!("{e:#}")))?;
    Ok(Json(serde_json::json!({"bps": bps})))
}

/// The other end of [`underlay_probe`]: counts what arrives after the first piece and
/// the time from the first piece to the last (`{"bytes": ..., "ns": ...}`), for at most
/// [`vemu_machine::route::MAX_UNDERLAY_PROBE`].
async fn underlay_sink(body: axum::body::Body) -> Result<Json<serde_json::Value>, ApiError> {
    use http_body_util::BodyExt;
    let mut body = body;
    let limit = vemu_machine::route::MAX_UNDERLAY_PROBE;
    let (mut first, mut last, mut bytes) =
        (None::<std::time::Instant>, std::time::Instant::now(), 0u64);
    loop {
        match tokio::time::timeout(limit, body.frame()).await {
            Ok(Some(Ok(f))) => {
                let Some(d) = f.data_ref() else { continue };
                last = std::time::Instant::now();
                match first {
                    None => first = Some(last),
                    Some(t) if last - t > limit => {
                        return Err(ApiError::bad_request(format!(
                            "a probe may last {} s at most",
                            limit.as_secs()
                        )))
                    }
                    Some(_) => bytes += d.len() as u64,
                }
            }
            Ok(None) => break,
            // (A size limit met on a very fast underlay ends the measure too: what came
            // until then is counted.)
            Ok(Some(Err(_))) if bytes > 0 => break,
            Ok(Some(Err(e))) => {
                return Err(ApiError::bad_request(format!("the probe broke off: {e}")))
            }
            Err(_) => return Err(ApiError::bad_request("the probe stalled")),
        }
    }
    let ns = first.map_or(0, |t| (last - t).as_nanos() as u64);
    Ok(Json(serde_json::json!({"bytes": bytes, "ns": ns})))
}

/// Run a command in a node of this machine (the controller passes its API's exec on).
async fn exec(
    State(agent): State<Arc<Agent>>,
    Path((lab, node)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    hosted(&agent, &lab, &node)?;
    crate::api::exec::run(HereDoor::new(agent.paths(&lab), &node), body).await
}

/// A terminal in a node of this machine (the controller relays its API's shell).
async fn shell(
    State(agent): State<Arc<Agent>>,
    Path((lab, node)): Path<(String, String)>,
    axum::extract::Query(q): axum::extract::Query<crate::api::shell::ShellQuery>,
    ws: axum::extract::WebSocketUpgrade,
) -> Result<Response, ApiError> {
    hosted(&agent, &lab, &node)?;
    let (size, door) = (q.size(), HereDoor::new(agent.paths(&lab), &node));
    let sh = crate::api::blocking(move || crate::api::shell::start(&door, size)).await?;
    Ok(ws.on_upgrade(move |socket| crate::api::shell::session(socket, sh)))
}

/// The end of the log of a node of this machine.
async fn log(
    State(agent): State<Arc<Agent>>,
    Path((lab, node)): Path<(String, String)>,
    axum::extract::Query(q): axum::extract::Query<crate::api::log::LogQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    hosted(&agent, &lab, &node)?;
    let (bytes, paths) = (q.bytes()?, agent.paths(&lab));
    Ok(Json(crate::api::blocking(move || crate::api::log::tail(&paths, &node, bytes)).await?))
}

/// Copies of the frames this machine's engine sees on some interfaces, as a stream of
/// [`CaptureRecord`]s, until the controller goes away.
async fn capture(
    State(agent): State<Arc<Agent>>,
    Path(lab): Path<String>,
    Json(on): Json<Vec<vemu_engine::CaptureSpec>>,
) -> Result<Response, ApiError> {
    let w = share(&agent, &lab)?;
    let (tx, rx) = std::sync::mpsc::sync_channel::<vemu_engine::Captured>(16384);
    let id = {
        let w = w.clone();
        crate::api::blocking(move || {
            w.locked().capture(&on, tx).map_err(|e| ApiError::bad_request(format!("{e:#}")))
        })
        .await?
    };
    let (btx, brx) =
        tokio::sync::mpsc::channel::<Result<axum::body::Bytes, std::convert::Infallible>>(256);
    std::thread::spawn(move || {
        use std::sync::mpsc::RecvTimeoutError;
        loop {
            match rx.recv_timeout(std::time::Duration::from_secs(1)) {
                Ok(c) => {
                    if btx.blocking_send(Ok(CaptureRecord::encode(&c).into())).is_err() {
                        break;
                    }
                }
                Err(RecvTimeoutError::Timeout) if !btx.is_closed() => {}
                Err(_) => break,
            }
        }
        w.locked().stop_capture(id);
    });
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], crate::api::body_of(brx))
        .into_response())
}

/// Why this machine holds no share of lab `lab`.
fn no_share(lab: &str) -> String {
    format!("this machine holds no share of lab '{lab}'")
}

/// The worker of this machine's share of `lab`.
fn share(agent: &Agent, lab: &str) -> Result<Arc<Mutex<LocalWorker>>, ApiError> {
    agent.labs.locked().get(lab).cloned().ok_or_else(|| ApiError::not_found(no_share(lab)))
}

/// Whether node `node` of lab `lab` is on this machine (or why not).
fn hosted(agent: &Agent, lab: &str, node: &str) -> Result<(), ApiError> {
    if vemu_scenario::valid_node_name(node).is_err() {
        return Err(ApiError::not_found(format!("no node '{node}'")));
    }
    // (A worker busy with an order is not waited for; the name is checked anyway.)
    match share(agent, lab)?.try_lock() {
        Ok(w) if !w.hosts(node) => {
            Err(ApiError::not_found(format!("node '{node}' of lab '{lab}' is not on this machine")))
        }
        _ => Ok(()),
    }
}

/// Carry out one order for `lab`.
fn order(agent: &Agent, lab: &str, req: WorkerRequest) -> WorkerReply {
    let (build, teardown) =
        (matches!(req, WorkerRequest::Build { .. }), matches!(req, WorkerRequest::Teardown));
    let worker = {
        let mut labs = agent.labs.locked();
        match (labs.get(lab), build) {
            (Some(_), true) => {
                return WorkerReply::Error(WorkerError::caller(format!(
                    "lab '{lab}' is already built on this machine"
                )))
            }
            (Some(w), false) => w.clone(),
            (None, true) => labs.entry(lab.to_string()).or_default().clone(),
            (None, false) if teardown => return WorkerReply::Done,
            // (It restarted, or its lease ended: the controller has lost it.)
            (None, false) => return WorkerReply::Error(WorkerError::lost(no_share(lab))),
        }
    };
    let mut w = worker.locked();
    let req = match req {
        WorkerRequest::Build { mut plan, clock_epoch_ns, share } => {
            if plan.name != lab {
                return WorkerReply::Error(WorkerError::caller(format!(
                    "the plan is of lab '{}', not '{lab}'",
                    plan.name
                )));
            }
            // Tunnels use the agent's own address, whatever the order says; the lab
            // clock is this machine's monotonic clock shifted to read what the
            // controller's read when it sent the order.
            let mut epoch = clock_epoch_ns;
            if let Some(s) = share.as_ref().filter(|s| s.lease_s > 0) {
                agent.leases.locked().insert(
                    lab.to_string(),
                    (std::time::Duration::from_secs(s.lease_s), std::time::Instant::now()),
                );
            }
            let share = share.map(|mut s| {
                s.underlay = agent.listen.ip();
                s.underlay_mtu = agent.underlay_mtu;
                epoch = vemu_engine::monotonic_ns().saturating_sub(s.lab_now_ns);
                s
            });
            agent
                .machines
                .locked()
                .insert(lab.to_string(), plan.machines.iter().map(|m| m.address).collect());
            // The share's objects carry its own name, not the lab's (see the module's doc).
            let written = plan.clone();
            let name = share
                .as_ref()
                .and_then(|s| plan.machines.get(s.machine))
                .map_or_else(|| lab.to_string(), |m| vemu_host::share_name(lab, &m.name));
            match vemu_host::LabLock::try_acquire(&name) {
                Ok(Some(lock)) => {
                    agent.held.locked().insert(lab.to_string(), Held { name: name.clone(), lock });
                }
                other => {
                    agent.forget(lab);
                    return WorkerReply::error(match other {
                        Err(e) => format!("{e:#}"),
                        _ => format!(
                            "another process holds '{name}' (this machine's share of lab '{lab}')"
                        ),
                    });
                }
            }
            plan.name = name.clone();
            let paths = LabPaths::new(&name);
            let reply =
                dispatch(&mut w, WorkerRequest::Build { plan, clock_epoch_ns: epoch, share });
            agent.renew(lab);
            if !matches!(reply, WorkerReply::Error(_)) {
                agent.epochs.locked().insert(lab.to_string(), epoch);
                // For `vemu exec` on this machine.
                let _ = crate::files::write_private(
                    &paths.plan(),
                    &serde_json::to_vec(&written).unwrap_or_default(),
                );
                let _ = std::fs::write(marker(&name), b"");
            } else {
                agent.forget(lab);
            }
            return reply;
        }
        r => r,
    };
    agent.renew(lab);
    let reply = dispatch(&mut w, req);
    agent.renew(lab);
    if teardown {
        agent.forget(lab);
    }
    reply
}

/// Carry out an order from the wire on this machine's share: the agents' side of
/// [`WorkerRequest`] and [`WorkerReply`], each order to its [`Worker`] method (or, for
/// what only an agent asks — a share's build, its connection, its state — to
/// [`LocalWorker`]'s own).
fn dispatch(w: &mut LocalWorker, req: WorkerRequest) -> WorkerReply {
    fn reply<T>(r: Result<T, WorkerError>, f: impl FnOnce(T) -> WorkerReply) -> WorkerReply {
        r.map_or_else(WorkerReply::Error, f)
    }
    let done = |()| WorkerReply::Done;
    match req {
        WorkerRequest::Build { plan, clock_epoch_ns, share } => {
            let is_share = share.is_some();
            let built = w.build_or_undo(plan, clock_epoch_ns, share, &mut |_, _| {});
            reply(built, |(endpoints, vxlan)| match is_share {
                true => WorkerReply::Endpoints(endpoints, vxlan),
                false => WorkerReply::Done,
            })
        }
        WorkerRequest::Connect { peers, vxlan } => {
            reply(w.connect(&peers, &vxlan).map_err(vemu_machine::worker::internal), done)
        }
        WorkerRequest::Patch { target, dir, patch } => reply(w.patch(target, dir, patch), |i| {
            i.map_or(WorkerReply::Done, WorkerReply::Impairments)
        }),
        WorkerRequest::SetUp { target, up } => reply(w.set_up(target, up), done),
        WorkerRequest::NodeState { node, up } => reply(w.node_state(&node, up), done),
        WorkerRequest::Stats => reply(w.stats(), WorkerReply::Stats),
        WorkerRequest::Processes => reply(w.processes(), WorkerReply::Processes),
        WorkerRequest::Positions { seg, positions } => reply(w.positions(seg, positions), done),
        WorkerRequest::Radio { seg, bss_after } => {
            reply(w.radio(seg, bss_after), WorkerReply::Radio)
        }
        WorkerRequest::TapQueues => reply(w.tap_queues(), WorkerReply::TapQueues),
        WorkerRequest::Backlog => reply(w.backlog(), WorkerReply::Backlog),
        WorkerRequest::SetLimits { node, limits } => reply(w.set_limits(&node, limits), done),
        WorkerRequest::Usage => reply(w.usage(), WorkerReply::Usage),
        WorkerRequest::TrafficEnd { node, end } => reply(w.traffic_end(&node, end), done),
        WorkerRequest::TrafficRecords { node, file, offset } => {
            reply(w.traffic_records(&node, &file, offset), WorkerReply::Text)
        }
        WorkerRequest::State => reply(w.state(), WorkerReply::Text),
        WorkerRequest::Teardown => reply(w.teardown(), done),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent() -> Arc<Agent> {
        let listen: SocketAddr = "127.0.0.1:14790".parse().unwrap();
        Arc::new(Agent {
            listen,
            token: "0123456789abcdef0123".into(),
            underlay_mtu: 1500,
            labs: Mutex::new(HashMap::new()),
            held: Mutex::new(HashMap::new()),
            leases: Mutex::new(HashMap::new()),
            epochs: Mutex::new(HashMap::new()),
            machines: Mutex::new(HashMap::new()),
        })
    }

    /// Issue 39: a token holder could make an agent connect to any address (a port scan
    /// from the machine's own network). Probes go to the lab's machines only.
    #[tokio::test(start_paused = true)]
    async fn the_underlay_is_probed_toward_the_labs_machines_only() {
        let a = agent();
        let order = |lab: &str, to: &str| {
            Json(ProbeOrder { lab: lab.into(), to: to.parse().unwrap(), duration_ms: 100 })
        };
        // A lab this machine has no plan of: refused once the wait for its plan is over.
        let e = underlay_probe(State(a.clone()), order("x", "10.9.9.9:22")).await.unwrap_err();
        assert_eq!(e.status, StatusCode::FORBIDDEN, "{}", e.message);
        assert!(e.message.contains("no share of lab 'x'"), "{}", e.message);
        a.machines.locked().insert("x".into(), vec!["127.0.0.1:1".parse().unwrap()]);
        // Not one of its machines: refused at once.
        let e = underlay_probe(State(a.clone()), order("x", "10.9.9.9:22")).await.unwrap_err();
        assert_eq!(e.status, StatusCode::FORBIDDEN, "{}", e.message);
        assert!(e.message.contains("10.9.9.9:22 is not a machine of lab 'x'"), "{}", e.message);
        // One of them: measured (nothing listens there: the measure fails, not the check).
        let e = underlay_probe(State(a.clone()), order("x", "127.0.0.1:1")).await.unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_GATEWAY, "{}", e.message);
    }
}
