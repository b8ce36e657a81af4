//! How the controller (and an agent, for another agent) reaches a machine's agent: a
//! TLS connection on the agents' channel whose every request is signed with the
//! session's binding, and the relay of API requests for nodes of other machines.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use axum::http::StatusCode;
use vemu_engine::LabClock;

use crate::channel::{Binding, Role, PROOF_HEADER};

/// A relayed request that failed: the status the API answers with, and why (naming
/// the machine).
#[derive(Debug)]
pub struct RelayError {
    pub status: StatusCode,
    pub message: String,
}

/// How long an agent may take to answer an order (building a share of thousands of
/// nodes takes minutes), and to accept a connection.
pub const ORDER_TIMEOUT: Duration = Duration::from_secs(1800);
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// ... but only this long once a heartbeat to the machine went unanswered: orders are
/// made with the controller's lock held, and each order to a machine that is dying
/// (not yet lost) would stall the API for the whole connect timeout.
pub const SUSPECT_CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// How to reach one machine's agent. Cheap to clone: the API forwards requests for
/// nodes of other machines (e.g. exec) with it, on its own runtime.
#[derive(Clone)]
pub struct AgentRoute {
    pub name: String,
    pub address: SocketAddr,
    token: String,
    tls: tokio_rustls::TlsConnector,
    /// The last heartbeat went unanswered (shared by the route's clones).
    pub suspect: Arc<AtomicBool>,
}

/// Largest TCP segment of the control channel, bytes: what any IPv6 path carries (1280
/// bytes) less the headers. The underlay may drop larger packets without a word (a hop
/// with a smaller MTU that sends no ICMP: the black hole the tunnels probe around); the
/// control channel does not need the speed and must never stall on it (it did: a status
/// answer that grew past 1400 bytes hung on the test underlay's 1400-byte hop).
pub const CONTROL_MSS: libc::c_int = 1200;

/// Keep a control-channel socket's segments to [`CONTROL_MSS`] (before it connects or
/// listens: what it sends, and what it asks the peer to send).
pub fn clamp_mss(sock: &impl std::os::fd::AsRawFd) {
    // SAFETY: an int option on a socket we own.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_MAXSEG,
            (&CONTROL_MSS as *const libc::c_int).cast(),
            4,
        )
    };
}

impl AgentRoute {
    pub fn new(
        m: &vemu_scenario::Machine,
        token: &str,
        tls: &Arc<rustls::ClientConfig>,
    ) -> AgentRoute {
        AgentRoute {
            name: m.name.clone(),
            address: m.address,
            token: token.to_string(),
            tls: tokio_rustls::TlsConnector::from(tls.clone()),
            suspect: Arc::default(),
        }
    }

    /// How long to wait for a connection (and its TLS handshake).
    pub fn connect_timeout(&self) -> Duration {
        match self.suspect.load(Ordering::Relaxed) {
            true => SUSPECT_CONNECT_TIMEOUT,
            false => CONNECT_TIMEOUT,
        }
    }

    /// A TLS connection to the agent and its session's binding.
    pub async fn connect(
        &self,
    ) -> Result<(tokio_rustls::client::TlsStream<tokio::net::TcpStream>, Binding)> {
        let wait = self.connect_timeout();
        let sock = if self.address.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        clamp_mss(&sock);
        let stream = tokio::time::timeout(wait, sock.connect(self.address))
            .await
            .map_err(|_| anyhow!("no answer within {:.1} s", wait.as_secs_f64()))??;
        let _ = stream.set_nodelay(true);
        let name = rustls::pki_types::ServerName::try_from("vemu-agent").expect("a valid name");
        let stream = tokio::time::timeout(wait, self.tls.connect(name, stream))
            .await
            .map_err(|_| anyhow!("no TLS handshake within {:.1} s", wait.as_secs_f64()))?
            .context("TLS handshake")?;
        let binding = Binding::of(stream.get_ref().1)?;
        Ok((stream, binding))
    }

    /// A WebSocket to the agent at `path` (e.g. a node's terminal), once the agent
    /// signed its acceptance.
    pub async fn websocket(
        &self,
        path: &str,
    ) -> Result<
        tokio_tungstenite::WebSocketStream<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>,
        RelayError,
    > {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let gateway = |m: String| RelayError {
            status: StatusCode::BAD_GATEWAY,
            message: format!("{}: {m}", self.what()),
        };
        let (stream, binding) = self.connect().await.map_err(|e| gateway(format!("{e:#}")))?;
        let mut req = format!("ws://vemu-agent{path}")
            .into_client_request()
            .map_err(|e| gateway(e.to_string()))?;
        let bearer = format!("Bearer {}", binding.proof(&self.token, Role::Controller))
            .parse()
            .map_err(|_| gateway("a header value".into()))?;
        req.headers_mut().insert("authorization", bearer);
        let (ws, res) =
            tokio::time::timeout(CONNECT_TIMEOUT, tokio_tungstenite::client_async(req, stream))
                .await
                .map_err(|_| gateway(format!("no answer within {} s", CONNECT_TIMEOUT.as_secs())))?
                .map_err(|e| match e {
                    tokio_tungstenite::tungstenite::Error::Http(r) => {
                        let body = r.body().as_deref().unwrap_or_default();
                        let m = error_message(body);
                        let status = if r.status() == axum::http::StatusCode::NOT_FOUND {
                            r.status()
                        } else {
                            axum::http::StatusCode::BAD_GATEWAY
                        };
                        RelayError {
                            status,
                            message: format!(
                                "{}: {}",
                                self.what(),
                                m.unwrap_or_else(|| format!("HTTP {}", r.status()))
                            ),
                        }
                    }
                    e => gateway(e.to_string()),
                })?;
        let proof = res.headers().get(PROOF_HEADER).and_then(|v| v.to_str().ok()).unwrap_or("");
        if !binding.check(&self.token, Role::Agent, proof) {
            return Err(gateway("the answer is not signed with the agents' token".into()));
        }
        Ok(ws)
    }

    pub async fn request(
        &self,
        method: &str,
        path: &str,
        body: hyper::body::Bytes,
    ) -> Result<hyper::Response<hyper::body::Incoming>> {
        Ok(self.request_timed(method, path, http_body_util::Full::new(body), None).await?.0)
    }

    /// [`AgentRoute::request`] with any body, and the readings of `clock` as the
    /// request leaves (the connection made) and as the answer's head arrives (0 without
    /// a clock).
    pub async fn request_timed<B>(
        &self,
        method: &str,
        path: &str,
        body: B,
        clock: Option<LabClock>,
    ) -> Result<(hyper::Response<hyper::body::Incoming>, u64, u64)>
    where
        B: hyper::body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (stream, binding) = self.connect().await?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "vemu-agent")
            .header("content-type", "application/json")
            .header(
                "authorization",
                format!("Bearer {}", binding.proof(&self.token, Role::Controller)),
            )
            .body(body)?;
        let sent_ns = clock.map_or(0, |c| c.now_ns());
        let res = tokio::time::timeout(ORDER_TIMEOUT, sender.send_request(req))
            .await
            .map_err(|_| anyhow!("no answer within {} s", ORDER_TIMEOUT.as_secs()))??;
        let received_ns = clock.map_or(0, |c| c.now_ns());
        // Only an agent that holds the token can sign this session; it signs every
        // answer to a request it accepted, errors too (a 404 "holds no share" makes the
        // machine lost: someone on the underlay must not be able to fake one). A 401
        // comes from an agent that refused our proof, unsigned, and says so itself.
        let proof = res.headers().get(PROOF_HEADER).and_then(|v| v.to_str().ok()).unwrap_or("");
        if res.status() != hyper::StatusCode::UNAUTHORIZED
            && !binding.check(&self.token, Role::Agent, proof)
        {
            return Err(anyhow!("the answer is not signed with the agents' token (not a vemu agent of this cluster, or someone in between)"));
        }
        Ok((res, sent_ns, received_ns))
    }

    /// The error message of an answer that is not a success.
    pub async fn failure(res: hyper::Response<hyper::body::Incoming>) -> String {
        use http_body_util::BodyExt;
        let status = res.status();
        let bytes = res.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        error_message(&bytes).unwrap_or_else(|| format!("HTTP {status}"))
    }

    pub async fn send(&self, method: &str, path: &str, body: String) -> Result<Vec<u8>> {
        use http_body_util::BodyExt;
        let res = self.request(method, path, body.into()).await?;
        if !res.status().is_success() {
            return Err(anyhow!("{}", Self::failure(res).await));
        }
        Ok(res.into_body().collect().await?.to_bytes().to_vec())
    }

    /// Pass a request of the API on to the agent and its answer back as it comes (a
    /// stream stays a stream). Its errors name the machine.
    pub async fn forward(
        &self,
        method: &str,
        path: &str,
        body: hyper::body::Bytes,
    ) -> Result<axum::response::Response, RelayError> {
        let res = self.request(method, path, body).await.map_err(|e| RelayError {
            status: StatusCode::BAD_GATEWAY,
            message: format!("{}: {e:#}", self.what()),
        })?;
        let status = res.status();
        if !status.is_success() {
            let m = Self::failure(res).await;
            let status =
                if status.is_client_error() && status != axum::http::StatusCode::UNAUTHORIZED {
                    status
                } else {
                    axum::http::StatusCode::BAD_GATEWAY
                };
            return Err(RelayError { status, message: format!("{}: {m}", self.what()) });
        }
        let content_type = res.headers().get(axum::http::header::CONTENT_TYPE).cloned();
        let mut out = axum::response::Response::new(axum::body::Body::new(res.into_body()));
        *out.status_mut() = status;
        if let Some(ct) = content_type {
            out.headers_mut().insert(axum::http::header::CONTENT_TYPE, ct);
        }
        Ok(out)
    }

    pub fn what(&self) -> String {
        format!("machine '{}' ({})", self.name, self.address)
    }

    /// The way to the agent at `address`, for another agent (which holds the token too).
    pub fn to_peer(
        address: SocketAddr,
        token: &str,
        tls: &Arc<rustls::ClientConfig>,
    ) -> AgentRoute {
        AgentRoute::new(&vemu_scenario::Machine { name: "peer".into(), address }, token, tls)
    }

    /// The underlay's capacity from this process's machine to the agent, bits/s: zeros
    /// streamed for `duration` over the agents' channel (TLS over TCP, whose segments
    /// are those of the tunnels) to its sink, which counts what arrives after the first
    /// piece over the time from the first piece to the last.
    pub async fn measure_to(&self, duration: Duration) -> Result<u64> {
        use http_body_util::{BodyExt, StreamBody};
        let end = tokio::time::Instant::now() + duration;
        let zeros = futures_util::stream::unfold((), move |()| async move {
            (tokio::time::Instant::now() < end).then(|| {
                (
                    Ok::<_, std::convert::Infallible>(hyper::body::Frame::data(
                        hyper::body::Bytes::from_static(&PROBE_CHUNK),
                    )),
                    (),
                )
            })
        });
        let (res, ..) = self
            .request_timed("POST", "/v1/agent/underlay/sink", StreamBody::new(zeros), None)
            .await?;
        if !res.status().is_success() {
            return Err(anyhow!("{}", Self::failure(res).await));
        }
        let v: serde_json::Value =
            serde_json::from_slice(&res.into_body().collect().await?.to_bytes())?;
        match (v["bytes"].as_u64(), v["ns"].as_u64()) {
            (Some(bytes), Some(ns)) if ns > 0 => Ok((u128::from(bytes) * 8 * 1_000_000_000
                / u128::from(ns))
            .min(u128::from(u64::MAX)) as u64),
            _ => Err(anyhow!("the sink's answer says no time passed: {v}")),
        }
    }
}

/// What the underlay probe sends at a time: zeros.
pub static PROBE_CHUNK: [u8; 64 * 1024] = [0; 64 * 1024];

/// How long the probe of each direction between two machines streams, at `up`.
pub const UNDERLAY_PROBE: Duration = Duration::from_millis(300);

/// Most directions measured as a lab comes up (each takes [`UNDERLAY_PROBE`]).
pub const MAX_UNDERLAY_PROBES: usize = 32;

/// Longest probe an agent sends or takes.
pub const MAX_UNDERLAY_PROBE: Duration = Duration::from_secs(2);

/// The message of an error answer (`{"error": "..."}`), if the body is one.
pub fn error_message(body: &[u8]) -> Option<String> {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["error"].as_str().map(String::from))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_machine_whose_heartbeat_went_unanswered_gets_a_short_connect_timeout() {
        let m =
            vemu_scenario::Machine { name: "b".into(), address: "127.0.0.1:9".parse().unwrap() };
        let route = AgentRoute::new(&m, "t", &crate::channel::client_config().unwrap());
        let clone = route.clone();
        assert_eq!(route.connect_timeout(), CONNECT_TIMEOUT);
        // What the heartbeat does on a miss, seen by every clone (the API's too).
        route.suspect.store(true, Ordering::Relaxed);
        assert_eq!(clone.connect_timeout(), SUSPECT_CONNECT_TIMEOUT);
        route.suspect.store(false, Ordering::Relaxed);
        assert_eq!(clone.connect_timeout(), CONNECT_TIMEOUT);
    }
}
