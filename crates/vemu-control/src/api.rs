//! The lab controller's HTTP/JSON API (version 1), described by `api/openapi.json`.
//!
//! Served on the lab's Unix socket (`/run/vemu/LAB/api.sock`, root only) and, when
//! asked, on a TCP address where every request needs `Authorization: Bearer TOKEN` (the
//! token is in `/run/vemu/LAB/api-token`). Errors are JSON `{"error": "..."}` with a
//! 4xx status for what the caller got wrong and 5xx for what went wrong here.

use std::convert::Infallible;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use futures_util::stream::{self, Stream};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::{broadcast, oneshot};
use vemu_host::LabPaths;

use crate::error::LabError;
use crate::lab::{Controller, StopRequest};
use crate::LockExt;
use admission::Admission;
use vemu_machine::door::Door;

pub(crate) mod admission;
pub(crate) mod exec;
pub(crate) mod log;
pub mod requests;
mod scenario;
mod server;
pub(crate) mod shell;
mod ui;

pub use requests::DEFAULT_EXEC_OUTPUT_BYTES;
use server::ensure_tcp;
pub use server::{limits, serve, Servers};
pub(crate) use server::{serve_connections, Proof, ProveByFirstMessage};

/// The OpenAPI document of this API.
pub const OPENAPI: &str = include_str!("../../../api/openapi.json");

/// An error answer: a status and a message for people.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl From<vemu_machine::route::RelayError> for ApiError {
    fn from(e: vemu_machine::route::RelayError) -> ApiError {
        ApiError { status: e.status, message: e.message }
    }
}

impl ApiError {
    pub fn bad_request(m: impl Into<String>) -> ApiError {
        ApiError { status: StatusCode::BAD_REQUEST, message: m.into() }
    }
    pub fn not_found(m: impl Into<String>) -> ApiError {
        ApiError { status: StatusCode::NOT_FOUND, message: m.into() }
    }
    pub fn internal(m: impl Into<String>) -> ApiError {
        ApiError { status: StatusCode::INTERNAL_SERVER_ERROR, message: m.into() }
    }
}

/// A failed operation on the lab: its kind decides the status.
impl From<LabError> for ApiError {
    fn from(e: LabError) -> ApiError {
        match e {
            LabError::Invalid(m) => ApiError::bad_request(m),
            LabError::NotFound(m) => ApiError::not_found(m),
            LabError::Unavailable(m) => {
                ApiError { status: StatusCode::SERVICE_UNAVAILABLE, message: m }
            }
            LabError::Internal(m) => ApiError::internal(m),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(json!({ "error": self.message }))).into_response()
    }
}

type ApiResult = Result<Json<Value>, ApiError>;

struct App {
    ctl: Arc<Mutex<Controller>>,
    stop: Mutex<Sender<StopRequest>>,
    paths: LabPaths,
    /// Who may use the API over TCP (once it listens there), and where it listens.
    access: Mutex<Option<ui::Access>>,
    tcp: Mutex<Option<std::net::SocketAddr>>,
    /// TCP servers started after the others (for the web interface), one at a time.
    later: Mutex<Vec<(oneshot::Sender<()>, tokio::task::JoinHandle<()>)>>,
    starting: tokio::sync::Mutex<()>,
}

type AppState = State<Arc<App>>;

/// A response body of the chunks a channel gives, until its senders are gone.
pub(crate) fn body_of(
    rx: tokio::sync::mpsc::Receiver<Result<Bytes, Infallible>>,
) -> axum::body::Body {
    axum::body::Body::from_stream(stream::unfold(rx, |mut r| async move {
        r.recv().await.map(|x| (x, r))
    }))
}

/// Accept a TCP connection, with Nagle off (answers are small and awaited).
pub(crate) async fn accept_nodelay(
    l: &tokio::net::TcpListener,
) -> std::io::Result<(tokio::net::TcpStream, Option<std::net::IpAddr>)> {
    let (s, from) = l.accept().await?;
    let _ = s.set_nodelay(true);
    Ok((s, Some(from.ip().to_canonical())))
}

/// Run blocking controller work off the async threads.
pub(crate) async fn blocking<T: Send + 'static, E: Into<ApiError> + Send + 'static>(
    f: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::internal(format!("the request failed: {e}")))?
        .map_err(Into::into)
}

fn to_value<T: serde::Serialize>(v: T) -> ApiResult {
    serde_json::to_value(v).map(Json).map_err(|e| ApiError::internal(e.to_string()))
}

async fn lab(State(app): AppState) -> ApiResult {
    let ctl = app.ctl.clone();
    to_value(blocking(move || ctl.locked().status()).await?)
}

/// One part of the lab's status (`nodes`, `links`, `segments`), optionally one item by name.
async fn part(app: &App, key: &'static str, name: Option<String>) -> ApiResult {
    let ctl = app.ctl.clone();
    let status = serde_json::to_value(blocking(move || ctl.locked().status()).await?)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let items = status[key].clone();
    let Some(name) = name else { return Ok(Json(items)) };
    items
        .as_array()
        .and_then(|a| a.iter().find(|i| i["name"] == name.as_str()).cloned())
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("no {} named '{name}'", &key[..key.len() - 1])))
}

async fn nodes(State(app): AppState) -> ApiResult {
    part(&app, "nodes", None).await
}
async fn node(State(app): AppState, Path(n): Path<String>) -> ApiResult {
    part(&app, "nodes", Some(n)).await
}
async fn links(State(app): AppState) -> ApiResult {
    part(&app, "links", None).await
}
async fn segments(State(app): AppState) -> ApiResult {
    part(&app, "segments", None).await
}
async fn segment(State(app): AppState, Path(n): Path<String>) -> ApiResult {
    part(&app, "segments", Some(n)).await
}

/// `GET /v1/segments/{segment}/city`: the buildings and streets of a wireless segment.
async fn segment_city(State(app): AppState, Path(seg): Path<String>) -> ApiResult {
    let ctl = app.ctl.clone();
    Ok(Json(json!(blocking(move || ctl.locked().city(&seg)).await?)))
}

#[derive(serde::Deserialize)]
struct PowerQuery {
    node: String,
    cell: Option<f64>,
}

/// `GET /v1/segments/{segment}/power?node=NODE`: a received-power map of a member.
async fn segment_power(
    State(app): AppState,
    Path(seg): Path<String>,
    Query(q): Query<PowerQuery>,
) -> ApiResult {
    let ctl = app.ctl.clone();
    Ok(Json(json!(blocking(move || ctl.locked().power_map(&seg, &q.node, q.cell)).await?)))
}

async fn stats(State(app): AppState) -> ApiResult {
    let ctl = app.ctl.clone();
    Ok(Json(blocking(move || ctl.locked().stats()).await?))
}

/// `PATCH /v1/links/{link}`: impairments and state (see [`requests::link_change`]).
async fn link_patch(State(app): AppState, Path(spec): Path<String>, body: Bytes) -> ApiResult {
    let change = requests::link_change(&body)?;
    let ctl = app.ctl.clone();
    blocking(move || {
        let mut c = ctl.locked();
        // Check the name first so that a bad one changes nothing.
        if let Some(patch) = change.patch {
            c.link_set(&spec, change.direction, patch)?;
        }
        if let Some(up) = change.up {
            c.link_state(&spec, up)?;
        }
        Ok::<(), LabError>(())
    })
    .await?;
    Ok(Json(json!({"ok": true})))
}

async fn link_updown(app: Arc<App>, spec: String, up: bool) -> ApiResult {
    let ctl = app.ctl.clone();
    blocking(move || ctl.locked().link_state(&spec, up)).await?;
    Ok(Json(json!({"ok": true})))
}
async fn link_down(State(app): AppState, Path(spec): Path<String>) -> ApiResult {
    link_updown(app, spec, false).await
}
async fn link_up(State(app): AppState, Path(spec): Path<String>) -> ApiResult {
    link_updown(app, spec, true).await
}

async fn node_updown(app: Arc<App>, node: String, up: bool) -> ApiResult {
    let ctl = app.ctl.clone();
    blocking(move || ctl.locked().node_state(&node, up)).await?;
    Ok(Json(json!({"ok": true})))
}
async fn node_stop(State(app): AppState, Path(node): Path<String>) -> ApiResult {
    node_updown(app, node, false).await
}
async fn node_start(State(app): AppState, Path(node): Path<String>) -> ApiResult {
    node_updown(app, node, true).await
}

/// `PATCH /v1/nodes/{node}`: CPU, memory and process limits (see [`requests::node_limits`]).
async fn node_patch(State(app): AppState, Path(node): Path<String>, body: Bytes) -> ApiResult {
    let patch = requests::node_limits(&body)?;
    let ctl = app.ctl.clone();
    let limits = blocking(move || ctl.locked().node_limits(&node, patch)).await?;
    Ok(Json(json!({"ok": true, "limits": limits})))
}

async fn node_move(State(app): AppState, Path(node): Path<String>, body: Bytes) -> ApiResult {
    let m = requests::node_move(&body)?;
    let ctl = app.ctl.clone();
    blocking(move || ctl.locked().node_move(&node, vemu_radio::Pos::new(m.x, m.y), m.speed))
        .await?;
    Ok(Json(json!({"ok": true})))
}

/// `GET /v1/timeline`: the scenario's events (as planned, each with its `index` in
/// `events:`) and the lab clock; firings go to the event stream as `timeline` events.
/// `GET /v1/convergence`: whether every node has a route to every prefix of the lab
/// (see [`crate::converge`]).
async fn convergence(State(app): AppState) -> ApiResult {
    let plan = {
        let ctl = app.ctl.locked();
        if !ctl.plan().machines.is_empty() {
            return Err(ApiError::bad_request(
                "convergence is not looked at in labs across machines yet",
            ));
        }
        ctl.plan().clone()
    };
    let paths = app.paths.clone();
    let c = blocking(move || {
        crate::converge::check(&paths, &plan).map_err(|e| ApiError::internal(format!("{e:#}")))
    })
    .await?;
    Ok(Json(serde_json::to_value(c).map_err(|e| ApiError::internal(e.to_string()))?))
}

/// `GET /v1/expect`: the lab's checks as judged so far (see [`crate::expect`]).
async fn expectations(State(app): AppState) -> ApiResult {
    let ctl = app.ctl.locked();
    let results = ctl.judge.results();
    Ok(Json(json!({
        "checks": results,
        "done": ctl.judge.done(),
        "exit": crate::expect::exit_status(results),
    })))
}

async fn timeline(State(app): AppState) -> ApiResult {
    let ctl = app.ctl.locked();
    let events = ctl
        .plan()
        .events
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let mut v = serde_json::to_value(e).map_err(|e| ApiError::internal(e.to_string()))?;
            v["index"] = json!(i);
            Ok(v)
        })
        .collect::<Result<Vec<Value>, ApiError>>()?;
    Ok(Json(json!({"now_ns": ctl.now_ns(), "events": events})))
}

async fn traffic(State(app): AppState, body: Bytes) -> ApiResult {
    let req = requests::traffic(&body)?;
    let ctl = app.ctl.clone();
    Ok(Json(blocking(move || ctl.locked().traffic_cbr(req)).await?))
}

/// `POST /v1/traffic/collect`: copy the records of flow ends on other machines into
/// the lab's log directory here (for `vemu report`); says how many bytes.
async fn traffic_collect(State(app): AppState) -> ApiResult {
    let ctl = app.ctl.clone();
    let bytes = blocking(move || ctl.locked().collect_traffic()).await?;
    Ok(Json(json!({"bytes": bytes})))
}

/// `GET /v1/nodes/{node}/shell`: a terminal in the node over a WebSocket (see
/// [`shell`]); for a node on another machine, its agent's, relayed.
async fn node_shell(
    State(app): AppState,
    Path(node): Path<String>,
    Query(q): Query<shell::ShellQuery>,
    first: Option<axum::Extension<ProveByFirstMessage>>,
    ws: axum::extract::WebSocketUpgrade,
) -> Result<Response, ApiError> {
    let size = q.size();
    let Some(axum::Extension(ProveByFirstMessage(proof))) = first else {
        return Ok(match start_shell(&app, node, size).await? {
            StartedShell::Relay(agent) => ws.on_upgrade(move |socket| shell::relay(socket, *agent)),
            StartedShell::Here(sh) => ws.on_upgrade(move |socket| shell::session(socket, sh)),
        });
    };
    // Nothing starts before the first message proved the web interface's session, and a
    // stranger's first message is no buffer of tungstenite's default 64 MiB: messages on
    // such a socket are held to FIRST_MESSAGE_BYTES (a terminal's keystrokes, pastes and
    // resizes fit; a session is 64 hex digits).
    let ws = ws.max_message_size(ui::FIRST_MESSAGE_BYTES).max_frame_size(ui::FIRST_MESSAGE_BYTES);
    Ok(ws.on_upgrade(move |mut socket| async move {
        let valid = |s: &str| app.access.locked().as_ref().is_some_and(|a| a.is_session(s));
        if !shell::first_message_proves(&mut socket, valid).await {
            return;
        }
        proof.done();
        match start_shell(&app, node, size).await {
            Ok(StartedShell::Relay(agent)) => shell::relay(socket, *agent).await,
            Ok(StartedShell::Here(sh)) => shell::session(socket, sh).await,
            Err(e) => shell::refuse(socket, &e.message).await,
        }
    }))
}

enum StartedShell {
    Relay(
        Box<
            tokio_tungstenite::WebSocketStream<
                tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
            >,
        >,
    ),
    Here(shell::Shell),
}

/// A shell in `node`: here, or its agent's WebSocket for a node on another machine.
async fn start_shell(
    app: &Arc<App>,
    node: String,
    size: shell::Size,
) -> Result<StartedShell, ApiError> {
    let door = app.ctl.locked().door(&node)?;
    Ok(match door {
        Door::Agent { route, lab } => {
            let path = format!(
                "/v1/agent/labs/{lab}/nodes/{}/shell?rows={}&cols={}",
                crate::percent_encode(&node),
                size.rows,
                size.cols
            );
            StartedShell::Relay(Box::new(route.websocket(&path).await?))
        }
        Door::Here(door) => StartedShell::Here(blocking(move || shell::start(&door, size)).await?),
    })
}

/// `POST /v1/nodes/{node}/exec`: run a command in a node (see [`exec`]); a node on
/// another machine runs it there, through that machine's agent.
async fn node_exec(
    State(app): AppState,
    Path(node): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let door = app.ctl.locked().door(&node)?;
    match door {
        Door::Agent { route, lab } => route
            .forward(
                "POST",
                &format!("/v1/agent/labs/{lab}/nodes/{}/exec", crate::percent_encode(&node)),
                body,
            )
            .await
            .map_err(ApiError::from),
        Door::Here(door) => exec::run(door, body).await,
    }
}

/// `GET /v1/nodes/{node}/log?bytes=N`: the end of the node's log (see [`log`]); a node
/// on another machine's, from its agent.
async fn node_log(
    State(app): AppState,
    Path(node): Path<String>,
    Query(q): Query<log::LogQuery>,
) -> Result<Response, ApiError> {
    let bytes = q.bytes()?;
    let door = app.ctl.locked().door(&node)?;
    match door {
        Door::Agent { route, lab } => route
            .forward(
                "GET",
                &format!(
                    "/v1/agent/labs/{lab}/nodes/{}/log?bytes={bytes}",
                    crate::percent_encode(&node)
                ),
                Bytes::new(),
            )
            .await
            .map_err(ApiError::from),
        Door::Here(door) => {
            Ok(Json(blocking(move || log::tail(door.paths(), &node, bytes)).await?).into_response())
        }
    }
}

/// `POST /v1/down`: take the lab down; answers when everything is removed.
async fn down(State(app): AppState) -> ApiResult {
    let (tx, rx) = std::sync::mpsc::channel();
    let _ = app.stop.locked().send(Some(tx));
    let r = blocking(move || rx.recv().map_err(|_| ApiError::internal("the controller stopped")))
        .await?;
    r.map_err(ApiError::internal)?;
    Ok(Json(json!({"ok": true})))
}

#[derive(Debug, Deserialize)]
struct EventsQuery {
    /// Period of counter snapshots, e.g. `500ms` (default 1s; `0` for none).
    stats: Option<String>,
}

/// `GET /v1/events`: server-sent events, one JSON object each: link and node changes as
/// they happen, and counter snapshots (`"type": "stats"`) every period.
async fn events(
    State(app): AppState,
    Query(q): Query<EventsQuery>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let period_ns = match q.stats.as_deref() {
        None => 1_000_000_000,
        Some("0") => 0,
        Some(s) => vemu_scenario::units::duration_ns(s).map_err(ApiError::bad_request)?,
    };
    if period_ns != 0 && period_ns < 10_000_000 {
        return Err(ApiError::bad_request("the stats period must be at least 10ms"));
    }
    let rx = app.ctl.locked().events().subscribe();
    let tick = (period_ns > 0).then(|| {
        let mut i = tokio::time::interval(Duration::from_nanos(period_ns));
        i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        i
    });
    let ctl = app.ctl.clone();
    let s = stream::unfold((rx, tick, ctl, false), |(mut rx, mut tick, ctl, done)| async move {
        if done {
            return None;
        }
        let stats_due = async {
            match tick.as_mut() {
                Some(t) => {
                    t.tick().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        let ev: Value = tokio::select! {
            r = rx.recv() => match r {
                Ok(v) => v,
                Err(broadcast::error::RecvError::Lagged(n)) => json!({"type": "warning", "message": format!("{n} events were dropped: the reader is too slow")}),
                Err(broadcast::error::RecvError::Closed) => return None,
            },
            _ = stats_due => {
                let c = ctl.clone();
                match tokio::task::spawn_blocking(move || c.locked().stats()).await {
                    Ok(Ok(mut v)) => {
                        v["type"] = json!("stats");
                        v
                    }
                    _ => return None,
                }
            }
        };
        // The last event of a lab: the stream ends after it.
        let last = ev["type"] == "lab-down";
        Some((Ok(SseEvent::default().data(ev.to_string())), (rx, tick, ctl, last)))
    });
    Ok(Sse::new(s).keep_alive(KeepAlive::default()))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaptureQuery {
    /// `NODE` (all its interfaces) or `NODE:IFACE`.
    iface: String,
    /// `after` (default), `before`, `drops`, or several comma-separated: a pcapng
    /// interface for each.
    #[serde(default)]
    point: Option<String>,
    /// A pcap filter expression (tcpdump syntax).
    filter: Option<String>,
    /// Stop after this many frames.
    count: Option<u64>,
}

/// A filter for frames of `linktype` (Ethernet, or a radio's 802.11 behind radiotap).
fn compile_filter(expr: &str, linktype: pcap::Linktype) -> Result<pcap::BpfProgram, ApiError> {
    let dead = pcap::Capture::dead(linktype).map_err(|e| ApiError::internal(e.to_string()))?;
    dead.compile(expr, true).map_err(|e| ApiError::bad_request(format!("bad filter '{expr}': {e}")))
}

const RADIOTAP: pcap::Linktype =
    pcap::Linktype(vemu_radio::wifi::monitor::LINKTYPE_IEEE802_11_RADIOTAP as i32);

/// `GET /v1/capture`: a pcapng stream of the frames an interface sends and receives,
/// timestamped on the lab clock (as wall-clock time), until the client goes away or
/// `count` frames matched.
async fn capture(
    State(app): AppState,
    Query(q): Query<CaptureQuery>,
) -> Result<Response, ApiError> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<vemu_engine::Captured>(16384);
    // (Off the async threads: a lab across machines asks its agents first.)
    let points = vemu_engine::CapturePoint::parse_list(q.point.as_deref().unwrap_or("after"))
        .map_err(ApiError::bad_request)?;
    if let Some(f) = &q.filter {
        for &p in &points {
            let radio = p == vemu_engine::CapturePoint::Radio;
            compile_filter(f, if radio { RADIOTAP } else { pcap::Linktype::ETHERNET })?;
        }
    }
    let (ctl, iface) = (app.ctl.clone(), q.iface.clone());
    let (id, names, epoch) = blocking(move || {
        let mut c = ctl.locked();
        let (id, names) = c.capture_start(&iface, &points, tx)?;
        Ok::<_, LabError>((id, names, c.realtime_epoch_ns))
    })
    .await?;
    let (btx, brx) = tokio::sync::mpsc::channel::<Result<Bytes, Infallible>>(256);
    let ctl = app.ctl.clone();
    std::thread::Builder::new()
        .name("vemu-capture".into())
        .spawn(move || {
            // (A radio's frames are matched by the filter compiled for radiotap.)
            let compiled = |lt| q.filter.as_deref().and_then(|f| compile_filter(f, lt).ok());
            let (eth_filter, radio_filter) =
                (compiled(pcap::Linktype::ETHERNET), compiled(RADIOTAP));
            let mut head = crate::pcapng::section_header();
            for n in &names {
                let linktype = match n.radio {
                    true => vemu_radio::wifi::monitor::LINKTYPE_IEEE802_11_RADIOTAP,
                    false => crate::pcapng::LINKTYPE_ETHERNET,
                };
                head.extend(crate::pcapng::interface(&n.name, n.description.as_deref(), linktype));
            }
            let mut matched = 0u64;
            if btx.blocking_send(Ok(Bytes::from(head))).is_ok() {
                loop {
                    match rx.recv_timeout(Duration::from_millis(300)) {
                        Ok(c) => {
                            let radio = names.get(c.iface as usize).is_some_and(|n| n.radio);
                            let filter = if radio { &radio_filter } else { &eth_filter };
                            if filter.as_ref().is_some_and(|f| !f.filter(&c.frame)) {
                                continue;
                            }
                            let why = c.drop.map(|d| drop_comment(d, c.t_ns));
                            let block = crate::pcapng::packet(
                                c.iface,
                                epoch + c.t_ns,
                                &c.frame,
                                c.outgoing,
                                why.as_deref(),
                            );
                            if btx.blocking_send(Ok(Bytes::from(block))).is_err() {
                                break;
                            }
                            matched += 1;
                            if q.count.is_some_and(|n| matched >= n) {
                                break;
                            }
                        }
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) if !btx.is_closed() => {}
                        Err(_) => break,
                    }
                }
            }
            ctl.locked().capture_stop(id);
        })
        .map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(([(header::CONTENT_TYPE, "application/x-pcapng")], body_of(brx)).into_response())
}

/// What a capture of drops says of a frame: `vemu drop: queue — queue full (…); lab time
/// 1.234567 s`.
pub fn drop_comment(why: vemu_engine::DropReason, t_ns: u64) -> String {
    format!("vemu drop: {} — {}; lab time {:.6} s", why.name(), why.describe(), t_ns as f64 / 1e9)
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

async fn not_found(req: Request) -> ApiError {
    ApiError::not_found(format!(
        "no such endpoint: {} {} (see GET /v1/openapi.json)",
        req.method(),
        req.uri().path()
    ))
}

/// The API's routes as (path, method, handler): one table that the router is built from
/// and that the test below holds against the OpenAPI document.
macro_rules! routes {
    ($($method:ident $path:literal => $handler:expr),* $(,)?) => {
        vec![$(($path, stringify!($method), axum::routing::$method($handler))),*]
    };
}

type Route = (&'static str, &'static str, axum::routing::MethodRouter<Arc<App>>);

fn routes() -> Vec<Route> {
    routes![
        get "/v1/openapi.json" => openapi,
        get "/v1/lab" => lab,
        get "/v1/nodes" => nodes,
        get "/v1/nodes/{node}" => node,
        patch "/v1/nodes/{node}" => node_patch,
        post "/v1/nodes/{node}/exec" => node_exec,
        get "/v1/nodes/{node}/shell" => node_shell,
        get "/v1/nodes/{node}/log" => node_log,
        post "/v1/nodes/{node}/stop" => node_stop,
        post "/v1/nodes/{node}/start" => node_start,
        post "/v1/nodes/{node}/move" => node_move,
        get "/v1/links" => links,
        patch "/v1/links/{link}" => link_patch,
        post "/v1/links/{link}/down" => link_down,
        post "/v1/links/{link}/up" => link_up,
        get "/v1/segments" => segments,
        get "/v1/segments/{segment}" => segment,
        get "/v1/segments/{segment}/city" => segment_city,
        get "/v1/segments/{segment}/power" => segment_power,
        get "/v1/stats" => stats,
        post "/v1/traffic" => traffic,
        post "/v1/traffic/collect" => traffic_collect,
        get "/v1/capture" => capture,
        get "/v1/events" => events,
        get "/v1/timeline" => timeline,
        get "/v1/convergence" => convergence,
        get "/v1/expect" => expectations,
        post "/v1/scenario/check" => scenario::check,
        post "/v1/scenario/import" => scenario::import,
        post "/v1/scenario/up" => scenario::up,
        post "/v1/down" => down,
        post "/v1/ui" => ui::link,
        get "/ui/" => ui::index,
        get "/ui/app.js" => ui::app_js,
        get "/ui/app.css" => ui::app_css,
        get "/ui/login" => ui::login,
        post "/ui/session" => ui::session,
    ]
}

fn router(app: Arc<App>) -> Router {
    routes()
        .into_iter()
        .fold(Router::new(), |r, (path, _, handler)| r.route(path, handler))
        .fallback(not_found)
        .with_state(app)
        .layer(middleware::from_fn(json_errors))
}

/// Every error answer is `{"error": "..."}`: those that axum's extractors make (a query
/// that does not parse, a WebSocket route asked without the upgrade, ...) are plain
/// text, and are wrapped.
async fn json_errors(req: Request, next: Next) -> Response {
    let r = next.run(req).await;
    let json = r
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !r.status().is_client_error() || json {
        return r;
    }
    let (parts, body) = r.into_parts();
    let text = axum::body::to_bytes(body, 64 << 10).await.unwrap_or_default();
    let message = String::from_utf8_lossy(&text).trim().to_string();
    let mut out = ApiError { status: parts.status, message }.into_response();
    for h in [header::WWW_AUTHENTICATE, header::ALLOW] {
        if let Some(v) = parts.headers.get(&h) {
            out.headers_mut().insert(h, v.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    /// Every route the router serves is in the OpenAPI document with its method, and
    /// the document lists nothing else.
    #[test]
    fn openapi_lists_every_route() {
        let doc: serde_json::Value = serde_json::from_str(super::OPENAPI).unwrap();
        let mut served: Vec<(String, String)> =
            super::routes().into_iter().map(|(p, m, _)| (p.to_string(), m.to_string())).collect();
        served.sort();
        let mut documented: Vec<(String, String)> = doc["paths"]
            .as_object()
            .unwrap()
            .iter()
            .flat_map(|(p, ops)| {
                ops.as_object()
                    .unwrap()
                    .keys()
                    .filter(|k| *k != "parameters")
                    .map(move |m| (p.clone(), m.clone()))
            })
            .collect();
        documented.sort();
        assert_eq!(served, documented);
    }

    /// A machine that did not answer is 503, so that clients can tell it from a bug.
    #[test]
    fn each_lab_error_has_its_status() {
        use crate::error::LabError;
        let status = |e: LabError| super::ApiError::from(e).status.as_u16();
        assert_eq!(status(LabError::invalid("x")), 400);
        assert_eq!(status(LabError::not_found("x")), 404);
        assert_eq!(status(LabError::Unavailable("x".into())), 503);
        assert_eq!(status(LabError::internal("x")), 500);
    }

    /// A link change in the OpenAPI document takes every impairment a running link
    /// takes, besides its direction and state, and the web page's form edits every one
    /// but the qos classes (a list: edited in the scenario, or with `vemu link set
    /// --qos`).
    #[test]
    fn the_link_change_document_and_form_have_every_runtime_impairment() {
        let doc: serde_json::Value = serde_json::from_str(super::OPENAPI).unwrap();
        let mut documented: Vec<&str> = doc["components"]["schemas"]["LinkChange"]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .filter(|k| !["direction", "up"].contains(k))
            .collect();
        let mut keys = vemu_scenario::RUNTIME_IMPAIRMENT_KEYS.to_vec();
        documented.sort();
        keys.sort();
        assert_eq!(documented, keys);
        let js = include_str!("../../../web/src/main.js");
        let list = js.split("const fields = [").nth(1).and_then(|r| r.split(']').next()).unwrap();
        let mut form: Vec<&str> = list
            .split(',')
            .map(|f| f.trim().trim_matches('\''))
            .filter(|f| !f.is_empty())
            .collect();
        form.sort();
        // (Lists of classes and flows: the form takes the one-line values.)
        keys.retain(|&k| k != "qos" && k != "flows");
        assert_eq!(form, keys);
    }
}
