//! Serving the API: on the lab's socket (callers of the machine's PID namespace only) and
//! on TCP (a token, or the web interface's session), with bounded bodies, header
//! timeouts and a cap on connections and on those not yet proven.

use super::*;

/// What needs no proof over TCP: the web interface's page, script and style (they hold
/// no secret), its login (the link's secret is the proof).
const PUBLIC: &[&str] = &["/ui/", "/ui/app.js", "/ui/app.css", "/ui/login", "/ui/session"];

/// In the extensions of a shell WebSocket's upgrade that carried no proof: its first
/// message must be the web interface's session (a browser's WebSocket carries no
/// header), within [`ui::FIRST_MESSAGE_WITHIN`], before anything starts.
#[derive(Clone)]
pub(crate) struct ProveByFirstMessage(pub(super) Proof);

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
pub(super) async fn ensure_tcp(app: &Arc<App>) -> Result<std::net::SocketAddr, ApiError> {
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
