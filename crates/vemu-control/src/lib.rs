//! The controller of a lab: builds it through a [`worker::Worker`], keeps it running,
//! serves its HTTP/JSON API ([`api`]), and tears it down. [`Client`] talks to that API.
//!
//! The boundary between the controller and the machine that hosts nodes and links is a
//! set of serializable messages ([`worker::WorkerRequest`] / [`worker::WorkerReply`]),
//! so that the same controller can drive a local worker (in-process) or, later, an
//! agent on another machine.

pub mod agent;
pub mod api;
pub mod channel;
pub mod clock_sync;
pub mod cluster;
mod background;
pub mod converge;
pub mod daemon;
pub mod error;
mod files;
pub mod lab;
pub mod fidelity;
pub mod pcapng;
pub mod report;
mod supervise;
mod radio;
mod timeline;
pub mod traffic;
pub mod worker;

use std::os::unix::net::UnixStream;

use anyhow::{anyhow, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use vemu_host::LabPaths;
use vemu_link::Impairments;

pub use supervise::{forget_waited, spawn_waited, ProcStatus};

/// Locking that survives a panic: the controller's state is whole between the steps of
/// every operation, so a panic in one request (a bug) must not poison the lock for
/// every later request and for the lab's teardown, as `lock().unwrap()` would.
pub(crate) trait LockExt<T> {
    fn locked(&self) -> std::sync::MutexGuard<'_, T>;
}

impl<T> LockExt<T> for std::sync::Mutex<T> {
    fn locked(&self) -> std::sync::MutexGuard<'_, T> {
        self.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub use vemu_scenario::Direction;
/// What clients of the controller see of the engine: the lab clock and its counters.
pub use vemu_engine::{bucket_quantile_ns, DirStats, LabClock, SegStats, DELAY_BUCKETS_NS};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabStatus {
    pub name: String,
    pub pid: u32,
    /// Lab-clock time, ns.
    pub uptime_ns: u64,
    pub nodes: Vec<NodeStatus>,
    pub links: Vec<LinkStatus>,
    #[serde(default)]
    pub segments: Vec<SegmentStatus>,
    /// The fidelity monitor's verdict on the whole run so far, and on its last window.
    #[serde(default)]
    pub fidelity: Option<fidelity::Fidelity>,
    #[serde(default)]
    pub fidelity_now: Option<fidelity::Fidelity>,
    /// Whether link directions that need no emulation go by the kernel: "on", or
    /// "off: why".
    #[serde(default)]
    pub fast_path: String,
    /// The lab's machines (none: the lab is on the controller's machine).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machines: Vec<MachineStatus>,
    /// The machine's traffic through emulated paths.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diverts: Vec<DivertStatus>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SegmentStatus {
    pub name: String,
    /// `lan` or `wireless`.
    #[serde(default)]
    pub kind: String,
    /// A wireless segment's range (where the mean received power meets the receive
    /// threshold) and carrier-sense distance, m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range_m: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carrier_sense_m: Option<f64>,
    /// Aggregate capacity, bits/s.
    pub capacity_bps: Option<u64>,
    pub stats: SegStats,
    pub members: Vec<MemberStatus>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemberStatus {
    /// `node:iface`.
    pub port: String,
    pub vlan: u16,
    /// On a wireless segment: where the member is and whom it reaches.
    #[serde(default)]
    pub radio: Option<RadioStatus>,
    pub up: bool,
    /// Frames the member sends, toward the switch.
    pub egress: DirStatus,
    /// Frames the switch delivers to the member.
    pub ingress: DirStatus,
}

/// A member of a wireless segment: its position, the members its frames may reach now,
/// and how its transmissions fared so far at each receiver.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RadioStatus {
    pub x_m: f64,
    pub y_m: f64,
    pub neighbours: Vec<NeighbourStatus>,
    pub sent_to: Vec<PairStatus>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NeighbourStatus {
    pub node: String,
    pub distance_m: f64,
    /// Chance that a frame reaches it (propagation model, before collisions).
    pub delivery_probability: f64,
}

/// Frames one member transmitted that were meant for (or in range of) another member.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PairStatus {
    pub node: String,
    #[serde(flatten)]
    pub counters: vemu_radio::medium::PairCounters,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeStatus {
    pub name: String,
    /// False after `stop` (its processes ended), until `start`.
    #[serde(default = "yes")]
    pub up: bool,
    pub netns: String,
    pub ifaces: Vec<IfaceStatus>,
    pub processes: Vec<ProcStatus>,
    /// CPU, memory and process limits in force.
    #[serde(default)]
    pub limits: vemu_scenario::Limits,
    /// What the node's processes use together.
    #[serde(default)]
    pub usage: vemu_host::cgroup::Usage,
    /// The machine it runs on (labs across machines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// `host` (the machine vemu runs on) or `external` (what is on a NIC's wire) for
    /// nodes vemu does not make (their `netns` is empty); absent for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// A machine of a lab across machines.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MachineStatus {
    pub name: String,
    /// Its agent's address.
    pub address: String,
    /// How many of the lab's nodes it runs.
    pub nodes: usize,
    /// `up`, or `lost` once its agent stopped answering (its nodes count as down).
    #[serde(default)]
    pub state: String,
    /// How far its lab clock is ahead of the controller's (negative: behind), ns, and
    /// the round trip of the heartbeat that measured it (the error is at most half of
    /// it); absent until the first heartbeat answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_offset_ns: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_rtt_ns: Option<u64>,
    /// The links from it to each other machine, against the underlay's capacity.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub underlay: Vec<UnderlayStatus>,
}

/// The links from one machine to another: the rates set on them in that direction, and
/// what the underlay carried that way when the lab came up.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UnderlayStatus {
    /// The other machine.
    pub to: String,
    pub links: usize,
    /// The sum of the rates set now in this direction, bits/s, and how many of the
    /// links have none (unlimited: not in the sum).
    pub set_bps: u64,
    pub unlimited_links: usize,
    /// Bits/s, measured as the lab came up (absent if the measure failed, or for more
    /// machine pairs than are measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_bps: Option<u64>,
}

impl UnderlayStatus {
    /// Why the links may deliver less than their set rates, if so.
    pub fn warning(&self, from: &str) -> Option<String> {
        let measured = self.measured_bps?;
        (self.set_bps > measured).then(|| {
            format!(
                "the links from machine '{from}' to '{}' are set to {:.1} Mbit/s in all, more than the {:.1} Mbit/s the underlay carried that way: they may deliver less than set",
                self.to,
                self.set_bps as f64 / 1e6,
                measured as f64 / 1e6
            )
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IfaceStatus {
    pub name: String,
    pub mac: String,
    pub addrs: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinkStatus {
    pub name: String,
    /// `node:iface` of each end.
    pub a: String,
    pub b: String,
    pub up: bool,
    pub forward: DirStatus,
    pub reverse: DirStatus,
}

/// A path the machine's own traffic takes through the lab's emulation (`divert:`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DivertStatus {
    pub name: String,
    /// The nftables expression selecting the connections.
    #[serde(rename = "match")]
    pub matches: String,
    /// The machine's outgoing packets, and the replies.
    pub forward: DirStatus,
    pub reverse: DirStatus,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DirStatus {
    pub impairments: Impairments,
    pub stats: DirStats,
}

/// A process's exit status as a shell reports it: its code, or 128 + the signal that
/// ended it.
pub fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

fn yes() -> bool {
    true
}

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
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => anyhow!("lab '{lab}' is not running (see 'vemu ls')"),
                _ => anyhow!("connecting to lab '{lab}' at {}: {e}", socket.display()),
            });
        }
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        Ok(Client { lab: lab.to_string(), socket, rt })
    }

    /// Send one request and return the answer's body once its status says success;
    /// an error answer becomes an [`ApiFailure`] with the controller's message.
    async fn send(&self, method: &str, path: &str, body: Option<&Value>) -> Result<hyper::body::Incoming> {
        use http_body_util::{BodyExt, Full};
        use hyper::body::Bytes;
        let lab = &self.lab;
        let stream = tokio::net::UnixStream::connect(&self.socket).await.with_context(|| format!("connecting to lab '{lab}'"))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let data = body.map(|b| b.to_string()).unwrap_or_default();
        let req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "vemu")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(data)))?;
        let res = sender.send_request(req).await.with_context(|| format!("talking to lab '{lab}'"))?;
        let status = res.status().as_u16();
        if status >= 400 {
            let bytes = res.into_body().collect().await.with_context(|| format!("reading from lab '{lab}'"))?.to_bytes();
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
            let bytes = self.send(method, path, body).await?.collect().await.with_context(|| format!("reading from lab '{lab}'"))?.to_bytes();
            serde_json::from_slice(&bytes).with_context(|| format!("lab '{lab}' answered with something that is not JSON"))
        })
    }

    /// A GET whose body is copied to `out` as it arrives (e.g. a capture), until it ends
    /// or `stop` resolves (e.g. Ctrl-C).
    pub fn stream_to(&self, path: &str, out: &mut dyn std::io::Write, stop: impl std::future::Future<Output = ()>) -> Result<()> {
        self.stream("GET", path, None, stop, |d| {
            out.write_all(d)?;
            Ok(out.flush()?)
        })
    }

    /// One request whose answer's body is handed to `chunk` piece by piece as it
    /// arrives, until it ends or `stop` resolves.
    pub fn stream(&self, method: &str, path: &str, body: Option<&Value>, stop: impl std::future::Future<Output = ()>, mut chunk: impl FnMut(&[u8]) -> Result<()>) -> Result<()> {
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

/// The message of an error answer (`{"error": "..."}`), if the body is one.
pub(crate) fn error_message(body: &[u8]) -> Option<String> {
    serde_json::from_slice::<Value>(body).ok().and_then(|v| v["error"].as_str().map(String::from))
}

/// The size of the terminal on standard input, (rows, columns).
pub fn terminal_size() -> Option<(u16, u16)> {
    // SAFETY: winsize is plain data; TIOCGWINSZ fills it.
    let mut w: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: as above, on descriptor 0.
    (unsafe { libc::ioctl(0, libc::TIOCGWINSZ, &mut w) } == 0 && w.ws_row > 0).then_some((w.ws_row, w.ws_col))
}

/// A name for use in a URL path or query value: letters, digits and `-_.:~` stay, the
/// rest is percent-encoded.
pub fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-_.:~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

/// Labs whose controller answers, and labs that only left traces behind.
pub fn list_labs() -> (Vec<String>, Vec<String>) {
    let mut running = Vec::new();
    let mut stale = Vec::new();
    for lab in vemu_host::labs_present() {
        // Serving its API, or being built (its controller holds the lab's name).
        if UnixStream::connect(LabPaths::new(&lab).socket()).is_ok() || vemu_host::LabLock::held(&lab) {
            running.push(lab);
        } else {
            stale.push(lab);
        }
    }
    (running, stale)
}

pub use vemu_scenario::derive_seed;
pub use worker::fast_path_wanted;

#[cfg(test)]
mod lock_tests {
    use super::LockExt;

    #[test]
    fn a_panic_while_locked_does_not_poison_later_requests() {
        let m = std::sync::Arc::new(std::sync::Mutex::new(1));
        let m2 = m.clone();
        let _ = std::thread::spawn(move || {
            let _g = m2.locked();
            panic!("a bug in one request");
        })
        .join();
        assert!(m.is_poisoned());
        *m.locked() += 1;
        assert_eq!(*m.locked(), 2);
    }
}


#[cfg(test)]
mod underlay_tests {
    use super::UnderlayStatus;

    #[test]
    fn a_warning_only_when_the_rates_set_exceed_what_the_underlay_carried() {
        let u = |set_bps, measured_bps| UnderlayStatus { to: "b".into(), links: 2, set_bps, unlimited_links: 1, measured_bps };
        assert_eq!(u(40_000_000, Some(48_000_000)).warning("a"), None);
        assert_eq!(u(40_000_000, None).warning("a"), None);
        let w = u(100_000_000, Some(48_200_000)).warning("a").unwrap();
        assert!(w.starts_with("the links from machine 'a' to 'b' are set to 100.0 Mbit/s in all, more than the 48.2 Mbit/s"), "{w}");
    }
}
