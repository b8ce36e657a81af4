//! A client of a running lab's API over its Unix socket, and what the CLI needs around it.

use std::os::unix::net::UnixStream;

use anyhow::{anyhow, Context, Result};
use serde_json::{json, Value};
use vemu_host::LabPaths;

use crate::error::error_message;
use crate::status::LabStatus;

/// An error answer of the API: the HTTP status (4xx: the request was wrong) and message.
#[derive(Debug, Clone)]
pub struct ApiFailure {
    pub status: u16,
    pub message: String,
}

impl std::fmt::Display for ApiFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ApiFailure {}

/// A client of a running lab's API, over its Unix socket.
pub struct Client {
    lab: String,
    socket: std::path::PathBuf,
    rt: tokio::runtime::Runtime,
}

impl Client {
    pub fn connect(lab: &str) -> Result<Client> {
        let socket = LabPaths::new(lab).socket();
        if let Err(e) = UnixStream::connect(&socket) {
            return Err(match e.kind() {
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                    anyhow!("lab '{lab}' is not running (see 'vemu ls')")
                }
                _ => anyhow!("connecting to lab '{lab}' at {}: {e}", socket.display()),
            });
        }
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        Ok(Client { lab: lab.to_string(), socket, rt })
    }

    /// Send one request and return the answer's body once its status says success;
    /// an error answer becomes an [`ApiFailure`] with the controller's message.
    async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<hyper::body::Incoming> {
        use http_body_util::{BodyExt, Full};
        use hyper::body::Bytes;
        let lab = &self.lab;
        let stream = tokio::net::UnixStream::connect(&self.socket)
            .await
            .with_context(|| format!("connecting to lab '{lab}'"))?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let data = body.map(|b| b.to_string()).unwrap_or_default();
        let req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "vemu")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(data)))?;
        let res =
            sender.send_request(req).await.with_context(|| format!("talking to lab '{lab}'"))?;
        let status = res.status().as_u16();
        if status >= 400 {
            let bytes = res
                .into_body()
                .collect()
                .await
                .with_context(|| format!("reading from lab '{lab}'"))?
                .to_bytes();
            let message = match serde_json::from_slice::<Value>(&bytes) {
                Ok(v) => v["error"].as_str().unwrap_or("request failed").to_string(),
                Err(_) => String::from_utf8_lossy(&bytes).into_owned(),
            };
            return Err(ApiFailure { status, message }.into());
        }
        Ok(res.into_body())
    }

    /// One request with a JSON answer.
    pub fn request(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value> {
        use http_body_util::BodyExt;
        let lab = &self.lab;
        self.rt.block_on(async {
            let bytes = self
                .send(method, path, body)
                .await?
                .collect()
                .await
                .with_context(|| format!("reading from lab '{lab}'"))?
                .to_bytes();
            serde_json::from_slice(&bytes)
                .with_context(|| format!("lab '{lab}' answered with something that is not JSON"))
        })
    }

    /// A GET whose body is copied to `out` as it arrives (e.g. a capture), until it ends
    /// or `stop` resolves (e.g. Ctrl-C).
    pub fn stream_to(
        &self,
        path: &str,
        out: &mut dyn std::io::Write,
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<()> {
        self.stream("GET", path, None, stop, |d| {
            out.write_all(d)?;
            Ok(out.flush()?)
        })
    }

    /// One request whose answer's body is handed to `chunk` piece by piece as it
    /// arrives, until it ends or `stop` resolves.
    pub fn stream(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        stop: impl std::future::Future<Output = ()>,
        mut chunk: impl FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        use http_body_util::BodyExt;
        self.rt.block_on(async {
            let mut body = self.send(method, path, body).await?;
            tokio::pin!(stop);
            loop {
                tokio::select! {
                    f = body.frame() => match f {
                        Some(Ok(f)) => {
                            if let Some(d) = f.data_ref() {
                                chunk(d)?;
                            }
                        }
                        Some(Err(e)) => return Err(e.into()),
                        None => return Ok(()),
                    },
                    _ = &mut stop => return Ok(()),
                }
            }
        })
    }

    /// An interactive session on the API's terminal WebSocket at `path` (`GET
    /// /v1/nodes/{node}/shell?rows=R&cols=C`): what this process reads on standard input
    /// goes to the shell, the shell's output to standard output, and changes of this
    /// terminal's size (SIGWINCH) follow. Returns the shell's exit status (`None`: the
    /// connection ended without one). The caller puts the terminal in raw mode.
    pub fn terminal(&self, path: &str) -> Result<Option<i32>> {
        use futures_util::{SinkExt, StreamExt};
        use std::io::{Read, Write};
        use tokio_tungstenite::tungstenite::Message;
        let lab = &self.lab;
        self.rt.block_on(async {
            let stream = tokio::net::UnixStream::connect(&self.socket).await.with_context(|| format!("connecting to lab '{lab}'"))?;
            let (mut ws, _) = tokio_tungstenite::client_async(format!("ws://vemu{path}"), stream).await.map_err(|e| match e {
                tokio_tungstenite::tungstenite::Error::Http(r) => {
                    let m = r.body().as_deref().and_then(error_message);
                    anyhow::Error::new(ApiFailure { status: r.status().as_u16(), message: m.unwrap_or_else(|| format!("HTTP {}", r.status())) })
                }
                e => anyhow!("opening a terminal in lab '{lab}': {e}"),
            })?;
            let (keys_tx, mut keys) = tokio::sync::mpsc::channel::<Vec<u8>>(64);
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut stdin = std::io::stdin().lock();
                while let Ok(n) = stdin.read(&mut buf) {
                    if n == 0 || keys_tx.blocking_send(buf[..n].to_vec()).is_err() {
                        break;
                    }
                }
            });
            let mut winch = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())?;
            let mut stdout = std::io::stdout();
            let mut stdin_open = true;
            loop {
                tokio::select! {
                    k = keys.recv(), if stdin_open => match k {
                        Some(k) => ws.send(Message::Binary(k.into())).await?,
                        None => stdin_open = false,
                    },
                    _ = winch.recv() => {
                        if let Some((rows, cols)) = terminal_size() {
                            ws.send(Message::Text(json!({"resize": {"rows": rows, "cols": cols}}).to_string().into())).await?;
                        }
                    }
                    m = ws.next() => match m {
                        Some(Ok(Message::Binary(b))) => {
                            stdout.write_all(&b)?;
                            stdout.flush()?;
                        }
                        Some(Ok(Message::Text(t))) => {
                            if let Some(code) = serde_json::from_str::<Value>(&t).ok().and_then(|v| v["exit"].as_i64()) {
                                return Ok(Some(code as i32));
                            }
                        }
                        Some(Ok(_)) => {}
                        Some(Err(_)) | None => return Ok(None),
                    },
                }
            }
        })
    }

    pub fn get(&self, path: &str) -> Result<Value> {
        self.request("GET", path, None)
    }

    pub fn post(&self, path: &str, body: &Value) -> Result<Value> {
        self.request("POST", path, Some(body))
    }

    pub fn patch(&self, path: &str, body: &Value) -> Result<Value> {
        self.request("PATCH", path, Some(body))
    }

    pub fn status(&self) -> Result<LabStatus> {
        Ok(serde_json::from_value(self.get("/v1/lab")?)?)
    }
}

/// The size of the terminal on standard input, (rows, columns).
pub fn terminal_size() -> Option<(u16, u16)> {
    // SAFETY: winsize is plain data; TIOCGWINSZ fills it.
    let mut w: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: as above, on descriptor 0.
    (unsafe { libc::ioctl(0, libc::TIOCGWINSZ, &mut w) } == 0 && w.ws_row > 0)
        .then_some((w.ws_row, w.ws_col))
}

/// A name for use in a URL path or query value: letters, digits and `-_.:~` stay, the
/// rest is percent-encoded.
pub fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.:~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Labs whose controller answers, and labs that only left traces behind (the shares
/// agents keep here of labs across machines are apart: [`list_shares`]).
pub fn list_labs() -> (Vec<String>, Vec<String>) {
    let mut running = Vec::new();
    let mut stale = Vec::new();
    for lab in vemu_host::labs_present() {
        if vemu_host::share_of(&lab).is_some() {
            continue;
        }
        // Serving its API, or being built (its controller holds the lab's name).
        if UnixStream::connect(LabPaths::new(&lab).socket()).is_ok()
            || vemu_host::LabLock::held(&lab)
        {
            running.push(lab);
        } else {
            stale.push(lab);
        }
    }
    (running, stale)
}

/// The shares of labs across machines on this machine (their names here:
/// [`vemu_host::share_name`]), each with whether an agent holds it (else an agent that
/// died left it).
pub fn list_shares() -> Vec<(String, bool)> {
    vemu_host::labs_present()
        .into_iter()
        .filter(|n| vemu_host::share_of(n).is_some())
        .map(|n| {
            let held = vemu_host::LabLock::held(&n);
            (n, held)
        })
        .collect()
}
