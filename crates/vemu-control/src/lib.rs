//! The controller of a lab: builds it through a [`worker::Worker`], keeps it running,
//! answers requests on the lab's control socket, and tears it down.
//!
//! The boundary between the controller and the machine that hosts nodes and links is a
//! set of serializable messages ([`worker::WorkerRequest`] / [`worker::WorkerReply`]),
//! so that the same controller can drive a local worker (in-process) or, later, an
//! agent on another machine.

pub mod daemon;
mod supervise;
pub mod worker;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use vemu_engine::{DirStats, SegStats};
use vemu_host::LabPaths;
use vemu_link::{Impairments, ImpairmentsPatch};

pub use supervise::ProcStatus;

/// Which directions of a link a change applies to, relative to how the link was named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Both,
    Forward,
    Reverse,
}

/// A request on a lab's control socket (one JSON object per line).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Request {
    Status,
    /// Change impairments of a link (`a:b` or its name) or of segment ports (`SEG:NODE`,
    /// `NODE:SEG`, or `SEG` for every member); unspecified values stay.
    LinkSet { link: String, direction: Direction, patch: ImpairmentsPatch },
    LinkState { link: String, up: bool },
    /// Tear the lab down.
    Down,
}

/// The reply to a [`Request`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Reply {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<LabStatus>,
}

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
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SegmentStatus {
    pub name: String,
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
    pub up: bool,
    /// Frames the member sends, toward the switch.
    pub egress: DirStatus,
    /// Frames the switch delivers to the member.
    pub ingress: DirStatus,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeStatus {
    pub name: String,
    pub netns: String,
    pub ifaces: Vec<IfaceStatus>,
    pub processes: Vec<ProcStatus>,
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

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DirStatus {
    pub impairments: Impairments,
    pub stats: DirStats,
}

/// A connection to a running lab's controller.
pub struct Client {
    lab: String,
    stream: BufReader<UnixStream>,
}

impl Client {
    pub fn connect(lab: &str) -> Result<Client> {
        let path = LabPaths::new(lab).socket();
        let s = UnixStream::connect(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                anyhow!("lab '{lab}' is not running (see 'vemu ls')")
            }
            _ => anyhow!("connecting to lab '{lab}' at {}: {e}", path.display()),
        })?;
        Ok(Client { lab: lab.to_string(), stream: BufReader::new(s) })
    }

    /// Send a request; an error reply becomes an `Err` with the controller's message.
    pub fn call(&mut self, req: &Request) -> Result<Reply> {
        let mut line = serde_json::to_string(req)?;
        line.push('\n');
        self.stream.get_mut().write_all(line.as_bytes()).with_context(|| format!("talking to lab '{}'", self.lab))?;
        let mut answer = String::new();
        self.stream.read_line(&mut answer).with_context(|| format!("reading from lab '{}'", self.lab))?;
        if answer.is_empty() {
            bail!("lab '{}' closed the connection", self.lab);
        }
        let reply: Reply = serde_json::from_str(&answer).context("decoding the controller's reply")?;
        if !reply.ok {
            bail!("{}", reply.error.unwrap_or_else(|| "request failed".into()));
        }
        Ok(reply)
    }
}

/// Labs whose controller answers, and labs that only left traces behind.
pub fn list_labs() -> (Vec<String>, Vec<String>) {
    let mut running = Vec::new();
    let mut stale = Vec::new();
    for lab in vemu_host::labs_present() {
        if UnixStream::connect(LabPaths::new(&lab).socket()).is_ok() {
            running.push(lab);
        } else {
            stale.push(lab);
        }
    }
    (running, stale)
}

/// Derive a well-mixed seed for one random stream of a lab (splitmix64).
pub fn derive_seed(lab_seed: u64, stream: u64) -> u64 {
    let mut z = lab_seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
