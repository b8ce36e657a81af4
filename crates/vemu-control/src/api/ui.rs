//! The web interface: its page, served by the lab's controller from the same HTTP API
//! (built from `web/` by this crate's build script and kept in the binary), and the
//! access to it over TCP: a one-time login link (`POST /v1/ui`, made for `vemu up
//! --ui` and `vemu ui`: `http://ADDR/ui/#once=SECRET`) whose secret the page trades
//! (`POST /ui/session`) for a session secret.
//!
//! The page keeps the session in its origin's storage (`sessionStorage`: this scheme,
//! address *and port* only) and sends it in a header, `X-Vemu-Session`, on every
//! request; its shell WebSocket, which cannot carry headers, proves it with its first
//! message. No cookie is used: a browser sends cookies to every port of an address, so a
//! page another local user serves on another port of 127.0.0.1 could have had the
//! browser use it (and two labs' pages logged each other out). The page and its script
//! and style are public (they hold no secret); everything else needs the bearer token
//! or a session.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use super::{ApiError, AppState};
use crate::LockExt;

const INDEX_HTML: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/web/index.html"));
const APP_JS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/web/app.js"));
const APP_CSS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/web/app.css"));

/// The header that carries a session of the web interface.
pub(crate) const SESSION_HEADER: &str = "x-vemu-session";
/// How long a WebSocket made with a session has to prove it with its first message.
pub(crate) const FIRST_MESSAGE_WITHIN: Duration = Duration::from_secs(5);
/// The largest message a WebSocket made with a session (not the token) may send, bytes.
pub(crate) const FIRST_MESSAGE_BYTES: usize = 1 << 20;
/// How long a login link works (once), how many may wait, how many sessions are kept
/// (the oldest goes first).
const LINK_LIFETIME: Duration = Duration::from_secs(120);
const MAX_LINKS: usize = 16;
const MAX_SESSIONS: usize = 64;

/// Who may use the API over TCP.
pub(crate) struct Access {
    token: String,
    links: VecDeque<(String, Instant)>,
    sessions: VecDeque<String>,
}

/// Constant-time equality of two secrets.
pub(crate) fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub(crate) fn random_hex() -> String {
    let mut b = [0u8; 32];
    // /dev/urandom does not fail on a running system; a failure leaves zeros, which
    // would be guessable: refuse to go on rather than hand out such a secret.
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .expect("reading /dev/urandom");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Access {
    pub(crate) fn new(token: String) -> Access {
        Access { token, links: VecDeque::new(), sessions: VecDeque::new() }
    }

    /// A new one-time login secret.
    pub(crate) fn new_link(&mut self) -> String {
        self.links.retain(|(_, at)| at.elapsed() < LINK_LIFETIME);
        while self.links.len() >= MAX_LINKS {
            self.links.pop_front();
        }
        let s = random_hex();
        self.links.push_back((s.clone(), Instant::now()));
        s
    }

    /// Trade a login secret (once, while fresh) for a new session.
    fn login(&mut self, once: &str) -> Option<String> {
        let i = self
            .links
            .iter()
            .position(|(s, at)| same_secret(s, once) && at.elapsed() < LINK_LIFETIME)?;
        self.links.remove(i);
        while self.sessions.len() >= MAX_SESSIONS {
            self.sessions.pop_front();
        }
        let s = random_hex();
        self.sessions.push_back(s.clone());
        Some(s)
    }

    /// How a request proves access: `Some(true)` the token, `Some(false)` a session of
    /// the web interface (in [`SESSION_HEADER`]), `None` neither (cookies count for
    /// nothing).
    pub(crate) fn check(&self, headers: &HeaderMap) -> Option<bool> {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if bearer.is_some_and(|g| same_secret(g, &self.token)) {
            return Some(true);
        }
        let session = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok());
        session.is_some_and(|s| self.is_session(s)).then_some(false)
    }

    /// Whether `given` is a session of the web interface.
    pub(crate) fn is_session(&self, given: &str) -> bool {
        self.sessions.iter().fold(false, |found, s| found | same_secret(s, given))
    }
}

/// Whether a request made with a session may go on: reading is fine; changes must come
/// from this server's page when the browser says where from (a page of another origin
/// cannot send the session header without a CORS preflight, which is never granted:
/// this is a second fence).
pub(crate) fn same_origin(method: &Method, headers: &HeaderMap) -> bool {
    let upgrade = headers.contains_key(header::UPGRADE);
    if (*method == Method::GET || *method == Method::HEAD) && !upgrade {
        return true;
    }
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
    origin == format!("http://{host}") || origin == format!("https://{host}")
}

fn asset(kind: &'static str, body: &'static [u8]) -> Response {
    ([(header::CONTENT_TYPE, kind), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}

/// `GET /ui/`
pub(crate) async fn index() -> Response {
    let mut r = asset("text/html; charset=utf-8", INDEX_HTML);
    // The page loads only its own script and style, and talks only to this server.
    let csp = "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'";
    r.headers_mut().insert(header::CONTENT_SECURITY_POLICY, csp.parse().expect("a header value"));
    r
}

pub(crate) async fn app_js() -> Response {
    asset("text/javascript; charset=utf-8", APP_JS)
}

pub(crate) async fn app_css() -> Response {
    asset("text/css; charset=utf-8", APP_CSS)
}

#[derive(Deserialize)]
pub(crate) struct LoginBody {
    once: String,
}

/// `POST /ui/session` `{"once": SECRET}`: the page trades its login link's secret (once,
/// while fresh) for a session.
pub(crate) async fn session(
    State(app): AppState,
    Json(b): Json<LoginBody>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let session = app.access.locked().as_mut().and_then(|a| a.login(&b.once));
    match session {
        Some(s) => Ok(Json(json!({"session": s, "header": SESSION_HEADER}))),
        None => Err(ApiError { status: StatusCode::UNAUTHORIZED, message: "this login link was used already or is too old (links work once, for 2 minutes): ask for a new one with 'vemu ui --lab LAB'".into() }),
    }
}

/// `GET /ui/login?once=SECRET` (links printed before the page kept its session): to
/// the page, which trades the secret.
pub(crate) async fn login(Query(q): Query<std::collections::HashMap<String, String>>) -> Response {
    let once: String = q
        .get("once")
        .map(|o| o.chars().filter(|c| c.is_ascii_hexdigit()).collect())
        .unwrap_or_default();
    (StatusCode::SEE_OTHER, [(header::LOCATION, format!("/ui/#once={once}"))]).into_response()
}

/// `POST /v1/ui`: a new login link for the web interface. The API starts listening on
/// TCP (127.0.0.1, a free port) first if it does not yet.
pub(crate) async fn link(State(app): AppState) -> Result<Json<serde_json::Value>, ApiError> {
    let addr = super::ensure_tcp(&app).await?;
    let once = app
        .access
        .locked()
        .as_mut()
        .map(Access::new_link)
        .ok_or_else(|| ApiError::internal("the API has no TCP listener"))?;
    Ok(Json(json!({
        "url": format!("http://{addr}/ui/#once={once}"),
        "expires_s": LINK_LIFETIME.as_secs(),
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(k: header::HeaderName, v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(k, v.parse().unwrap());
        h
    }

    #[test]
    fn a_login_link_works_once_and_gives_a_session_the_api_accepts() {
        let mut a = Access::new("tok".into());
        let once = a.new_link();
        assert_eq!(a.check(&with(header::AUTHORIZATION, "Bearer tok")), Some(true));
        assert_eq!(a.check(&with(header::AUTHORIZATION, "Bearer tok2")), None);
        assert_eq!(a.check(&HeaderMap::new()), None);
        let s = a.login(&once).unwrap();
        assert!(a.login(&once).is_none(), "a link works once");
        assert!(a.login("not-a-link").is_none());
        let session = header::HeaderName::from_static(SESSION_HEADER);
        assert_eq!(a.check(&with(session.clone(), &s)), Some(false));
        assert_eq!(a.check(&with(session.clone(), &format!("{s}x"))), None);
        // A cookie holding it counts for nothing.
        assert_eq!(a.check(&with(header::COOKIE, &format!("vemu_session={s}"))), None);
        // Old links expire; sessions are bounded.
        a.links.push_back(("old".into(), Instant::now() - LINK_LIFETIME));
        assert!(a.login("old").is_none());
        for _ in 0..MAX_SESSIONS + 5 {
            let l = a.new_link();
            a.login(&l).unwrap();
        }
        assert_eq!(a.sessions.len(), MAX_SESSIONS);
        assert_eq!(a.check(&with(session, &s)), None, "the oldest session went first");
        for _ in 0..MAX_LINKS + 5 {
            a.new_link();
        }
        assert_eq!(a.links.len(), MAX_LINKS);
    }

    #[test]
    fn changes_with_the_cookie_must_come_from_the_page() {
        let mut h = with(header::HOST, "127.0.0.1:4000");
        assert!(same_origin(&Method::GET, &h));
        assert!(same_origin(&Method::PATCH, &h), "no Origin: not a browser's cross-site request");
        h.insert(header::ORIGIN, "http://127.0.0.1:4000".parse().unwrap());
        assert!(same_origin(&Method::PATCH, &h));
        h.insert(header::ORIGIN, "http://evil.example".parse().unwrap());
        assert!(!same_origin(&Method::PATCH, &h));
        assert!(same_origin(&Method::GET, &h));
        h.insert(header::UPGRADE, "websocket".parse().unwrap());
        assert!(!same_origin(&Method::GET, &h), "a WebSocket from another site");
    }
}
