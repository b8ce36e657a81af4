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

pub(crate) mod admission;
pub(crate) mod exec;
pub(crate) mod log;
pub mod requests;
mod scenario;
pub(crate) mod shell;
mod ui;
pub use requests::DEFAULT_EXEC_OUTPUT_BYTES;

/// The OpenAPI document of this API.
pub const OPENAPI: &str = include_str!("../../../api/openapi.json");

/// An error answer: a status and a message for people.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl From<crate::route::RelayError> for ApiError {
    fn from(e: crate::route::RelayError) -> ApiError {
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
    let route = app.ctl.locked().agent_of(&node)?;
    Ok(match route {
        Some((route, lab)) => {
            let path = format!(
                "/v1/agent/labs/{lab}/nodes/{}/shell?rows={}&cols={}",
                crate::percent_encode(&node),
                size.rows,
                size.cols
            );
            StartedShell::Relay(Box::new(route.websocket(&path).await?))
        }
        None => {
            let paths = app.paths.clone();
            StartedShell::Here(blocking(move || shell::start(&paths, &node, size)).await?)
        }
    })
}

/// `POST /v1/nodes/{node}/exec`: run a command in a node (see [`exec`]); a node on
/// another machine runs it there, through that machine's agent.
async fn node_exec(
    State(app): AppState,
    Path(node): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let route = app.ctl.locked().agent_of(&node)?;
    match route {
        Some((route, lab)) => route
            .forward(
                "POST",
                &format!("/v1/agent/labs/{lab}/nodes/{}/exec", crate::percent_encode(&node)),
                body,
            )
            .await
            .map_err(ApiError::from),
        None => exec::run(app.paths.clone(), node, body).await,
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
    let route = app.ctl.locked().agent_of(&node)?;
    match route {
        Some((route, lab)) => route
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
        None => {
            let paths = app.paths.clone();
            Ok(Json(blocking(move || log::tail(&paths, &node, bytes)).await?).into_response())
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
    #[serde(default)]
    point: vemu_engine::CapturePoint,
    /// A pcap filter expression (tcpdump syntax).
    filter: Option<String>,
    /// Stop after this many frames.
    count: Option<u64>,
}

fn compile_filter(expr: &str) -> Result<pcap::BpfProgram, ApiError> {
    let dead = pcap::Capture::dead(pcap::Linktype::ETHERNET)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    dead.compile(expr, true).map_err(|e| ApiError::bad_request(format!("bad filter '{expr}': {e}")))
}

/// `GET /v1/capture`: a pcapng stream of the frames an interface sends and receives,
/// timestamped on the lab clock (as wall-clock time), until the client goes away or
/// `count` frames matched.
async fn capture(
    State(app): AppState,
    Query(q): Query<CaptureQuery>,
) -> Result<Response, ApiError> {
    if let Some(f) = &q.filter {
        compile_filter(f)?;
    }
    let (tx, rx) = std::sync::mpsc::sync_channel::<vemu_engine::Captured>(16384);
    // (Off the async threads: a lab across machines asks its agents first.)
    let (ctl, iface, point) = (app.ctl.clone(), q.iface.clone(), q.point);
    let (id, names, epoch) = blocking(move || {
        let mut c = ctl.locked();
        let (id, names) = c.capture_start(&iface, point, tx)?;
        Ok::<_, LabError>((id, names, c.realtime_epoch_ns))
    })
    .await?;
    let (btx, brx) = tokio::sync::mpsc::channel::<Result<Bytes, Infallible>>(256);
    let ctl = app.ctl.clone();
    std::thread::Builder::new()
        .name("vemu-capture".into())
        .spawn(move || {
            let filter = q.filter.as_deref().and_then(|f| compile_filter(f).ok());
            let mut head = crate::pcapng::section_header();
            for (n, description) in &names {
                head.extend(crate::pcapng::interface(n, description.as_deref()));
            }
            let mut matched = 0u64;
            if btx.blocking_send(Ok(Bytes::from(head))).is_ok() {
                loop {
                    match rx.recv_timeout(Duration::from_millis(300)) {
                        Ok(c) => {
                            if filter.as_ref().is_some_and(|f| !f.filter(&c.frame)) {
                                continue;
                            }
                            let block = crate::pcapng::packet(
                                c.iface,
                                epoch + c.t_ns,
                                &c.frame,
                                c.outgoing,
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
        get "/v1/stats" => stats,
        post "/v1/traffic" => traffic,
        post "/v1/traffic/collect" => traffic_collect,
        get "/v1/capture" => capture,
        get "/v1/events" => events,
        get "/v1/timeline" => timeline,
        get "/v1/convergence" => convergence,
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
}

/// What needs no proof over TCP: the web interface's page, script and style (they hold
/// no secret), its login (the link's secret is the proof).
const PUBLIC: &[&str] = &["/ui/", "/ui/app.js", "/ui/app.css", "/ui/login", "/ui/session"];

/// In the extensions of a shell WebSocket's upgrade that carried no proof: its first
/// message must be the web interface's session (a browser's WebSocket carries no
/// header), within [`ui::FIRST_MESSAGE_WITHIN`], before anything starts.
#[derive(Clone)]
pub(crate) struct ProveByFirstMessage(Proof);

/// Refuse requests over TCP without `Authorization: Bearer TOKEN` or a session of the
/// web interface (whose changes must come from the page: see [`ui::same_origin`]).
/// The page and the login are the ways in without either; a shell WebSocket without
/// either proves itself with its first message ([`ProveByFirstMessage`]).
async fn require_access(State(app): State<Arc<App>>, mut req: Request, next: Next) -> Response {
    let how = app.access.locked().as_ref().and_then(|a| a.check(req.headers()));
    let path = req.uri().path();
    let shell = path.starts_with("/v1/nodes/")
        && path.ends_with("/shell")
        && req.headers().contains_key(header::UPGRADE);
    let allowed = match how {
        Some(true) => true,
        Some(false) => ui::same_origin(req.method(), req.headers()),
        None if shell && ui::same_origin(req.method(), req.headers()) => {
            let proof = req.extensions().get::<Proof>().cloned().unwrap_or(Proof(None));
            req.extensions_mut().insert(ProveByFirstMessage(proof));
            return next.run(req).await;
        }
        None => PUBLIC.contains(&path),
    };
    if allowed {
        if how.is_some() {
            Proof::proven(&req);
        }
        return next.run(req).await;
    }
    if how == Some(false) {
        return ApiError {
            status: StatusCode::FORBIDDEN,
            message: "a change with the web interface's session must come from its page".into(),
        }
        .into_response();
    }
    let mut r = ApiError { status: StatusCode::UNAUTHORIZED, message: "a valid 'Authorization: Bearer TOKEN' header is needed (the token is in /run/vemu/LAB/api-token), or the web interface's session header (log in with a link from 'vemu ui'; a cookie is not enough)".into() }.into_response();
    r.headers_mut().insert(header::WWW_AUTHENTICATE, "Bearer".parse().unwrap());
    r
}

/// The running API servers.
pub struct Servers {
    stop: Vec<oneshot::Sender<()>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Listeners started later (`ensure_tcp`) are the app's.
    app: Arc<App>,
}

impl Servers {
    /// Stop accepting, finish the requests in flight, and return.
    pub fn shutdown(mut self, rt: &tokio::runtime::Runtime) {
        for (stop, task) in self.app.later.locked().drain(..) {
            self.stop.push(stop);
            self.tasks.push(task);
        }
        for s in self.stop {
            let _ = s.send(());
        }
        rt.block_on(async {
            for t in self.tasks {
                let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
            }
        });
    }
}

/// Limits that keep the API answering whatever its clients do.
pub mod limits {
    use std::time::Duration;
    /// A connection that has not sent a whole request head by then is closed (also an
    /// idle keep-alive connection).
    pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
    /// A request body that has not arrived whole by then is refused (408).
    pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);
    /// Largest request body, bytes (413 beyond).
    pub const MAX_BODY_BYTES: usize = 1 << 20;
    /// TCP connections served at once; more are closed as they come. Well under the
    /// descriptor limit, so that the Unix socket (with its own allowance) and the lab
    /// always have descriptors left.
    pub const MAX_TCP_CONNECTIONS: usize = 256;
    pub const MAX_UNIX_CONNECTIONS: usize = 256;
}

/// Read the whole request body within [`limits::BODY_TIMEOUT`] and [`limits::MAX_BODY_BYTES`]
/// before any handler sees the request: a client that trickles or floods a body gets a
/// 408 or 413, and no handler waits on it.
async fn bounded_body(req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let too_big = || {
        ApiError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            message: format!("the request body is larger than {} bytes", limits::MAX_BODY_BYTES),
        }
        .into_response()
    };
    if declared.is_some_and(|n| n > limits::MAX_BODY_BYTES as u64) {
        return too_big();
    }
    match tokio::time::timeout(
        limits::BODY_TIMEOUT,
        axum::body::to_bytes(body, limits::MAX_BODY_BYTES),
    )
    .await
    {
        Err(_) => ApiError {
            status: StatusCode::REQUEST_TIMEOUT,
            message: format!(
                "the request body did not arrive within {} s",
                limits::BODY_TIMEOUT.as_secs()
            ),
        }
        .into_response(),
        Ok(Err(_)) => too_big(),
        Ok(Ok(b)) => next.run(Request::from_parts(parts, axum::body::Body::from(b))).await,
    }
}

/// Accept connections from `accept` and serve on each (HTTP/1.1, upgrades to WebSockets
/// allowed) the router that `prepare` gives for it (`None`: close it; e.g. a failed TLS
/// handshake), at most `max` at once (more are closed as they come), each closed if it
/// sends no request head within [`limits::HEADER_TIMEOUT`]. Returns when `stop` fires,
/// after the requests in flight are answered (at most 5 s).
///
/// `accept` gives each connection's source address where it has one (TCP): such a
/// connection is unproven until a request's [`Proof`] says it carried a valid proof,
/// and held to [`admission`]'s rules meanwhile; one without (the root-only Unix socket)
/// counts as proven.
pub(crate) async fn serve_connections<S, F, I, P>(
    mut accept: impl FnMut() -> F,
    prepare: impl Fn(S) -> P + Clone + Send + 'static,
    max: usize,
    stop: oneshot::Receiver<()>,
) where
    S: Send + 'static,
    F: std::future::Future<Output = std::io::Result<(S, Option<std::net::IpAddr>)>>,
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    P: std::future::Future<Output = Option<(I, Router)>> + Send + 'static,
{
    let slots = Arc::new(tokio::sync::Semaphore::new(max));
    let unproven: Arc<Mutex<Admission<Arc<tokio::sync::Notify>>>> = Arc::default();
    // Connections watch this: `true` asks them to finish; it is closed once they all have.
    let (closing, watch) = tokio::sync::watch::channel(false);
    tokio::pin!(stop);
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => break,
            s = accept() => s,
        };
        let (stream, source) = match accepted {
            Ok(s) => s,
            Err(_) => {
                // Out of descriptors (EMFILE) or a connection reset before accept: wait a
                // little rather than spin.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            drop(stream);
            continue;
        };
        // An unproven connection: its number, what pushes it out, what says it proved itself.
        let ticket = match source {
            None => None,
            Some(ip) => {
                let out = Arc::new(tokio::sync::Notify::new());
                let kept = unproven.locked().admit(Some(ip), out.clone());
                if let Some(e) = kept.evicted {
                    e.notify_one();
                }
                Some((kept.id, out, Arc::new(tokio::sync::Notify::new())))
            }
        };
        let proof =
            Proof(ticket.as_ref().map(|(id, _, proven)| (*id, unproven.clone(), proven.clone())));
        let (prepare, mut watch, unproven) = (prepare.clone(), watch.clone(), unproven.clone());
        tokio::spawn(async move {
            let _slot = slot;
            let serve = async move {
                let Some((io, router)) = prepare(stream).await else { return };
                let service = hyper_util::service::TowerToHyperService::new(
                    router.layer(axum::Extension(proof)),
                );
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(limits::HEADER_TIMEOUT)
                    .serve_connection(hyper_util::rt::TokioIo::new(io), service)
                    .with_upgrades();
                tokio::pin!(conn);
                tokio::select! {
                    _ = conn.as_mut() => return,
                    _ = watch.wait_for(|c| *c) => conn.as_mut().graceful_shutdown(),
                }
                let _ = conn.await;
            };
            let Some((id, out, proven)) = ticket else { return serve.await };
            // Until it proves itself: closed when pushed out or too late.
            tokio::pin!(serve);
            tokio::select! {
                _ = &mut serve => {}
                _ = proven.notified() => serve.await,
                _ = out.notified() => {}
                _ = tokio::time::sleep(admission::PROOF_TIMEOUT) => {}
            }
            unproven.locked().remove(id);
        });
    }
    drop(watch);
    let _ = closing.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(5), closing.closed()).await;
}

/// In each request's extensions: what the access check calls once the request carried
/// a valid proof (token, web session), so that its connection no longer counts as
/// unproven ([`admission`]). Nothing for connections that need none.
#[derive(Clone)]
pub(crate) struct Proof(Option<(u64, Arc<Mutex<Unproven>>, Arc<tokio::sync::Notify>)>);

/// The unproven connections of a listener (each with what wakes it when proven).
type Unproven = Admission<Arc<tokio::sync::Notify>>;

impl Proof {
    /// The request that carries this proved itself.
    pub(crate) fn proven(req: &Request) {
        if let Some(p) = req.extensions().get::<Proof>() {
            p.done();
        }
    }

    /// Its connection proved itself.
    pub(crate) fn done(&self) {
        if let Proof(Some((id, unproven, proven))) = self {
            if unproven.locked().remove(*id).is_some() {
                proven.notify_one();
            }
        }
    }
}

/// Serve the API on the Unix socket and, if given, the TCP listener with its token.
pub fn serve(
    rt: &tokio::runtime::Runtime,
    ctl: Arc<Mutex<Controller>>,
    stop: Sender<StopRequest>,
    paths: LabPaths,
    unix: tokio::net::UnixListener,
    tcp: Option<(tokio::net::TcpListener, String)>,
) -> Servers {
    let app = Arc::new(App {
        ctl,
        stop: Mutex::new(stop),
        paths,
        access: Mutex::new(None),
        tcp: Mutex::new(None),
        later: Mutex::new(Vec::new()),
        starting: tokio::sync::Mutex::new(()),
    });
    let mut servers = Servers { stop: Vec::new(), tasks: Vec::new(), app: app.clone() };
    let (tx, rx) = oneshot::channel::<()>();
    let r = router(app.clone()).layer(middleware::from_fn(bounded_body));
    let unix = Arc::new(unix);
    let here = pidns_of("self");
    servers.tasks.push(rt.spawn(serve_connections(
        move || {
            let l = unix.clone();
            async move { l.accept().await.map(|(s, _)| (s, None)) }
        },
        move |s: tokio::net::UnixStream| {
            let r = r.clone();
            async move {
                // Only processes of this process's PID namespace: not the lab's nodes (each
                // has its own, which its processes cannot leave), even one that unmounted
                // its own /run to find the socket.
                let peer = s
                    .peer_cred()
                    .ok()
                    .and_then(|c| c.pid())
                    .and_then(|pid| pidns_of(&pid.to_string()));
                if peer.is_none() || peer != here {
                    refuse_other_namespace(s).await;
                    return None;
                }
                Some((s, r))
            }
        },
        limits::MAX_UNIX_CONNECTIONS,
        rx,
    )));
    servers.stop.push(tx);
    if let Some((listener, token)) = tcp {
        let _in_runtime = rt.enter();
        let (tx, task) = serve_tcp(&app, listener, token);
        servers.stop.push(tx);
        servers.tasks.push(task);
    }
    servers
}

/// The PID namespace of process `pid` (or "self"): its inode.
fn pidns_of(pid: &str) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}/ns/pid")).ok().map(|m| m.ino())
}

/// Answer a connection to the lab's socket from another PID namespace with a 403 that
/// says why, and close it.
async fn refuse_other_namespace(mut s: tokio::net::UnixStream) {
    use tokio::io::AsyncWriteExt;
    let body = r#"{"error": "the lab's socket serves processes in its controller's PID namespace only (not the lab's nodes): run vemu on the machine itself, or use the API over TCP with its token"}"#;
    let answer = format!("HTTP/1.1 403 Forbidden\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
    // The answer, then what the client sends is read (for at most 1 s) until it closes:
    // closed at once, a client still sending its request would get a broken pipe before
    // it reads the answer.
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        use tokio::io::AsyncReadExt;
        s.write_all(answer.as_bytes()).await?;
        s.shutdown().await?;
        let mut sink = [0u8; 4096];
        while s.read(&mut sink).await? > 0 {}
        std::io::Result::Ok(())
    })
    .await;
}

/// Serve the API on a TCP listener, where requests need `token` (or a session of the
/// web interface).
fn serve_tcp(
    app: &Arc<App>,
    listener: tokio::net::TcpListener,
    token: String,
) -> (oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    *app.tcp.locked() = listener.local_addr().ok();
    *app.access.locked() = Some(ui::Access::new(token));
    let (tx, rx) = oneshot::channel::<()>();
    // Access is checked before the body is read.
    let r = router(app.clone())
        .layer(middleware::from_fn(bounded_body))
        .layer(middleware::from_fn_with_state(app.clone(), require_access));
    let listener = Arc::new(listener);
    let task = tokio::spawn(serve_connections(
        move || {
            let l = listener.clone();
            async move { accept_nodelay(&l).await }
        },
        move |s| std::future::ready(Some((s, r.clone()))),
        limits::MAX_TCP_CONNECTIONS,
        rx,
    ));
    (tx, task)
}

/// The API's TCP address, listening first (on 127.0.0.1, a free port, with a new token
/// written beside the socket) if it does not yet.
async fn ensure_tcp(app: &Arc<App>) -> Result<std::net::SocketAddr, ApiError> {
    let _one_at_a_time = app.starting.lock().await;
    if let Some(a) = *app.tcp.locked() {
        return Ok(a);
    }
    let internal = |e: String| ApiError::internal(e);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| internal(format!("listening on 127.0.0.1: {e}")))?;
    let addr = listener.local_addr().map_err(|e| internal(e.to_string()))?;
    let token = ui::random_hex();
    crate::files::write_private(&app.paths.api_token(), format!("{token}\n").as_bytes())
        .map_err(|e| internal(format!("{e:#}")))?;
    std::fs::write(app.paths.api_address(), format!("{addr}\n"))
        .map_err(|e| internal(e.to_string()))?;
    let started = serve_tcp(app, listener, token);
    app.later.locked().push(started);
    Ok(addr)
}
