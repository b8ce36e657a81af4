//! What the controller asks of a machine that hosts a lab (or its share of one), as
//! serializable messages, and the in-process worker for labs on this machine.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use vemu_engine::{CaptureSpec, Captured, DirStats, RadioSnapshot, SegStats, Target};
use vemu_host::LabPaths;
use vemu_link::{Impairments, ImpairmentsPatch};
use vemu_scenario::Plan;

use crate::supervise::ProcStatus;

mod layout;
mod local;
pub use local::LocalWorker;

/// An order on the wire between a controller and an agent (the agents' format: the
/// controller's code calls [`Worker`]'s methods; the controller's cluster sends these, and
/// its agents carry them out on its machine's [`LocalWorker`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum WorkerRequest {
    /// Build the nodes and links of the plan and start their commands; with `share`,
    /// only those of one machine (see [`Share`]), answering with its tunnel endpoints.
    Build {
        plan: Plan,
        clock_epoch_ns: u64,
        #[serde(default)]
        share: Option<Share>,
    },
    /// Join a share's tunnels to the other machines' (link, address there) and start it;
    /// `vxlan`: for each link to another machine that has the lab's VXLAN device too
    /// (when this one has), that machine's underlay address (see [`Share::vxlan_port`]).
    Connect {
        peers: Vec<(usize, SocketAddr)>,
        #[serde(default)]
        vxlan: Vec<(usize, std::net::IpAddr)>,
    },
    /// Change one direction of a link (0 = forward, 1 = reverse) or of a segment port
    /// (0 = egress, 1 = ingress).
    Patch {
        target: Target,
        dir: usize,
        patch: ImpairmentsPatch,
    },
    SetUp {
        target: Target,
        up: bool,
    },
    /// Stop every process in a node (`up: false`) or start its commands again.
    NodeState {
        node: String,
        up: bool,
    },
    Stats,
    Processes,
    /// New positions of a wireless segment's members (one per member, m).
    Positions {
        seg: usize,
        positions: Vec<vemu_radio::Pos>,
    },
    /// Positions, neighbours and per-pair counters of a wireless segment, and its
    /// infrastructure mode's events numbered after `bss_after`.
    Radio {
        seg: usize,
        #[serde(default)]
        bss_after: u64,
    },
    /// The nodes' kernel counters of their TAP interfaces.
    TapQueues,
    /// How far behind its schedule the data plane is, ns.
    Backlog,
    /// Set (or lift) a node's CPU, memory and process limits.
    SetLimits {
        node: String,
        limits: vemu_scenario::Limits,
    },
    /// What each node's processes use, in the plan's order of nodes.
    Usage,
    /// Start one end of a traffic flow in a node (on the node's machine).
    TrafficEnd {
        node: String,
        end: crate::traffic::End,
    },
    /// The whole lines of a traffic records file of the node's machine from byte
    /// `offset` ([`crate::traffic::records_chunk`]): [`WorkerReply::Text`].
    TrafficRecords {
        node: String,
        file: String,
        offset: u64,
    },
    /// What this machine holds of the lab for a controller that takes it over from
    /// another machine: [`WorkerReply::Text`], a JSON object with the lab's `plan`, the
    /// `saved` state its controller last handed on (null if none) and what the lab clock
    /// reads here (`lab_now_ns`).
    State,
    Teardown,
}

/// An agent's answer to a [`WorkerRequest`], on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum WorkerReply {
    Done,
    /// The tunnel sockets of a share: (link, address); and whether it made the lab's
    /// VXLAN device (see [`Share::vxlan_port`]).
    Endpoints(Vec<(usize, SocketAddr)>, bool),
    Impairments(Impairments),
    Stats(Counters),
    Processes(Vec<ProcStatus>),
    Radio(RadioSnapshot),
    TapQueues(Vec<TapQueue>),
    Backlog(u64),
    Usage(Vec<vemu_host::cgroup::Usage>),
    Text(String),
    Error(WorkerError),
}

/// Why a worker did not carry out an order, and whose the fault is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "ErrorWire")]
pub struct WorkerError {
    pub fault: Fault,
    pub message: String,
}

/// Whose fault a refused order is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fault {
    /// The order was wrong (what it names is not there, or not allowed now): the lab is
    /// unchanged.
    Caller,
    /// The machine that was to carry it out did not answer (lost, or its agent gone).
    Lost,
    /// The machine could not carry it out.
    Internal,
}

/// A worker's error as the wire has it: `{"fault": …, "message": …}`, or (an agent of an
/// earlier version) the message alone, an internal one.
#[derive(Deserialize)]
#[serde(untagged)]
enum ErrorWire {
    Full { fault: Fault, message: String },
    Message(String),
}

impl From<ErrorWire> for WorkerError {
    fn from(w: ErrorWire) -> WorkerError {
        match w {
            ErrorWire::Full { fault, message } => WorkerError { fault, message },
            ErrorWire::Message(message) => WorkerError { fault: Fault::Internal, message },
        }
    }
}

impl WorkerError {
    pub fn caller(m: impl Into<String>) -> WorkerError {
        WorkerError { fault: Fault::Caller, message: m.into() }
    }
    pub fn lost(m: impl Into<String>) -> WorkerError {
        WorkerError { fault: Fault::Lost, message: m.into() }
    }
    pub fn internal(m: impl Into<String>) -> WorkerError {
        WorkerError { fault: Fault::Internal, message: m.into() }
    }
    /// The same fault, its message after `what: `.
    pub fn within(self, what: &str) -> WorkerError {
        WorkerError { fault: self.fault, message: format!("{what}: {}", self.message) }
    }
}

impl std::error::Error for WorkerError {}

impl std::fmt::Display for WorkerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl WorkerReply {
    /// An internal error answer.
    pub fn error(m: impl Into<String>) -> WorkerReply {
        WorkerReply::Error(WorkerError::internal(m))
    }
}

/// A node's TAP interface as the node's kernel counts it. What the node sends waits in
/// the TAP's queue until the engine reads it; when the engine falls behind the queue
/// fills and the kernel drops frames (before any emulation: not emulated loss).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TapQueue {
    /// `NODE:IFACE`.
    pub port: String,
    /// Frames the engine read.
    pub read: u64,
    /// Frames dropped on the full queue.
    pub dropped: u64,
}

/// Counters of everything a worker emulates.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Counters {
    /// Per link, forward and reverse.
    pub links: Vec<[DirStats; 2]>,
    /// Per segment, per member: egress and ingress.
    pub members: Vec<Vec<[DirStats; 2]>>,
    pub segments: Vec<SegStats>,
    /// Per engine shard, nanoseconds spent working since the start ([`Engine::work_ns`]).
    pub shard_work_ns: Vec<u64>,
    /// Whether unimpaired link directions go by the kernel: "on", "off: why", or
    /// "unused: why" (nothing on this machine it could carry).
    #[serde(default)]
    pub fast_path: String,
    /// Engine shards that died, and why ([`Engine::faults`]).
    #[serde(default)]
    pub engine_faults: Vec<String>,
    /// Per diverted path, forward and reverse (the controller's machine only).
    #[serde(default)]
    pub diverts: Vec<[DirStats; 2]>,
    /// Per machine of the lab, how long its software waited for a CPU so far.
    #[serde(default)]
    pub cpu: Vec<MachineCpu>,
}

/// What one machine's software waited for a CPU so far ([`vemu_host::cpu_wait`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MachineCpu {
    /// The machine's name in the plan (empty: the controller's, in a lab of one).
    pub machine: String,
    /// µs during which some task of the machine waited for a CPU (`None`: no PSI), and
    /// when that was read (the machine's monotonic clock, ns).
    pub pressure_us: Option<u64>,
    #[serde(default)]
    pub read_at_ns: u64,
    /// µs the hypervisor took from the machine's CPUs so far, and how many CPUs (`None`:
    /// not counted).
    #[serde(default)]
    pub steal_us: Option<(u64, u32)>,
    /// The nodes it hosts: their processes' time on a CPU and waiting for one.
    pub nodes: Vec<vemu_host::cpu_wait::NodeWait>,
    /// Whether `nodes` counted their waits since the machine's previous reading (false:
    /// the machine's pressure alone judges the window).
    #[serde(default)]
    pub nodes_counted: bool,
}

/// A machine's part of a lab that spans machines.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Share {
    /// Its number in [`Plan::machines`].
    pub machine: usize,
    /// The address its tunnel sockets use, and the underlay's MTU there.
    pub underlay: IpAddr,
    pub underlay_mtu: u32,
    /// The lab clock's reading when the controller sent the order, ns (the machine's
    /// lab clock starts from it: monotonic clocks differ between machines).
    pub lab_now_ns: u64,
    /// Seconds the agent keeps the share without hearing from the controller (orders or
    /// heartbeats); 0: for ever.
    #[serde(default)]
    pub lease_s: u64,
    /// UDP port of the lab's VXLAN devices, the same on every machine (0: none): the
    /// kernel's way between machines for the directions of links that need no
    /// emulation, where the underlay carries whole frames.
    #[serde(default)]
    pub vxlan_port: u16,
    /// The lab's key for the datagrams between machines' engines (64 hex digits, made
    /// by the controller for each lab and sent over its TLS connection): every tunnel
    /// datagram is sealed with it (`vemu_engine::tunnel::auth`).
    #[serde(default)]
    pub tunnel_key: Option<String>,
}

impl Share {
    /// The engine's [`vemu_engine::TunnelKey`] of this share, if the order gave a key
    /// (an error for one that is not 32 bytes in hex).
    pub fn engine_key(&self) -> Result<Option<vemu_engine::TunnelKey>> {
        let Some(hex) = &self.tunnel_key else { return Ok(None) };
        let mut key = [0u8; 32];
        let bytes: Option<Vec<u8>> = (0..hex.len())
            .step_by(2)
            .map(|i| hex.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
            .collect();
        match bytes {
            Some(b) if b.len() == 32 && hex.len() == 64 => key.copy_from_slice(&b),
            _ => anyhow::bail!("the order's tunnel key is not 32 bytes in hex"),
        }
        Ok(Some(vemu_engine::TunnelKey { key, machine: self.machine }))
    }
}

/// Environment variable of `vemu up`: `VEMU_FAST_PATH=off` runs every link direction
/// through the engine (to compare, or to test the engine's path).
pub const FAST_PATH_ENV: &str = "VEMU_FAST_PATH";

/// Whether this process's labs try the kernel fast path ([`FAST_PATH_ENV`]).
pub fn fast_path_wanted() -> bool {
    !std::env::var(FAST_PATH_ENV).is_ok_and(|v| v == "off")
}

/// What carries a lab's orders out: this machine's share ([`LocalWorker`]) or the
/// machines of a lab across them (the controller's cluster, through their agents).
/// One method per order, each with its own answer and a typed refusal
/// ([`WorkerError`], whose fault says what the lab makes of it). [`WorkerRequest`] and
/// [`WorkerReply`] are the agents' wire format only: the controller never matches them.
pub trait Worker: Send {
    /// Build the whole plan, telling `progress` (done, total) as nodes come up; a
    /// failed build leaves nothing behind.
    fn build(
        &mut self,
        plan: Plan,
        clock_epoch_ns: u64,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<(), WorkerError>;

    /// Change one direction of a link (0 = forward, 1 = reverse) or of a segment port
    /// (0 = egress, 1 = ingress): its impairments now (`None`: the machine that carries
    /// that direction out did not answer — it was lost).
    fn patch(
        &mut self,
        target: Target,
        dir: usize,
        patch: ImpairmentsPatch,
    ) -> Result<Option<Impairments>, WorkerError>;

    fn set_up(&mut self, target: Target, up: bool) -> Result<(), WorkerError>;

    /// Stop every process of a node (`up: false`) or start its commands again.
    fn node_state(&mut self, node: &str, up: bool) -> Result<(), WorkerError>;

    /// Counters of everything emulated, in the lab's numbering.
    fn stats(&mut self) -> Result<Counters, WorkerError>;

    fn processes(&mut self) -> Result<Vec<ProcStatus>, WorkerError>;

    /// New positions of a wireless segment's members (one per member).
    fn positions(&mut self, seg: usize, positions: Vec<vemu_radio::Pos>)
        -> Result<(), WorkerError>;

    /// Positions, neighbours and per-pair counters of a wireless segment, and its
    /// infrastructure mode's events numbered after `bss_after` (`u64::MAX`: none).
    fn radio(&mut self, seg: usize, bss_after: u64) -> Result<RadioSnapshot, WorkerError>;

    /// The nodes' kernel counters of their TAP interfaces.
    fn tap_queues(&mut self) -> Result<Vec<TapQueue>, WorkerError>;

    /// How far behind its schedule the data plane is, ns.
    fn backlog(&mut self) -> Result<u64, WorkerError>;

    /// Set (or lift) a node's CPU, memory and process limits.
    fn set_limits(&mut self, node: &str, limits: vemu_scenario::Limits) -> Result<(), WorkerError>;

    /// What each node's processes use, in the plan's order of nodes.
    fn usage(&mut self) -> Result<Vec<vemu_host::cgroup::Usage>, WorkerError>;

    /// Start one end of a traffic flow in a node (on the node's machine).
    fn traffic_end(&mut self, node: &str, end: crate::traffic::End) -> Result<(), WorkerError>;

    /// The whole lines of a traffic records file of the node's machine from byte
    /// `offset` ([`crate::traffic::records_chunk`]).
    fn traffic_records(
        &mut self,
        node: &str,
        file: &str,
        offset: u64,
    ) -> Result<String, WorkerError>;

    /// Take everything of the lab down.
    fn teardown(&mut self) -> Result<(), WorkerError>;

    /// Start capturing on interfaces (see [`Engine::capture`]); returns its id.
    fn capture(
        &mut self,
        on: &[CaptureSpec],
        tx: std::sync::mpsc::SyncSender<Captured>,
    ) -> Result<u64>;

    fn stop_capture(&mut self, id: u64);

    /// The way into node number `node` (a node vemu made): entered on this machine, or
    /// through the agent of the machine that hosts it.
    fn door(&self, node: usize) -> Result<crate::door::Door, WorkerError>;

    /// Machines (numbers in the plan) found lost: their agents stopped answering.
    /// Orders leave them out.
    fn lost_machines(&self) -> Vec<usize> {
        Vec::new()
    }

    /// Each machine's lab clock against this one's, as measured so far (in the plan's
    /// order of machines; empty for a lab on one machine).
    fn clock_offsets(&self) -> Vec<Option<crate::clock::Offset>> {
        Vec::new()
    }

    /// The underlay's capacity between machines as measured when the lab came up:
    /// (from, to, bits/s if the measure worked), machines numbered as in the plan.
    fn underlay(&self) -> Vec<(usize, usize, Option<u64>)> {
        Vec::new()
    }

    /// The controller's state as just saved (`lab::saved`): a lab across machines hands
    /// it to its agents, so that a controller on another machine can take the lab over.
    fn keep_saved(&self, _state: Arc<Vec<u8>>) {}

    /// A reader of what the lab's software on this machine waited for a CPU, to be read
    /// without the controller (its walk of /proc takes milliseconds, more under load):
    /// from then on `Stats` leaves this machine's reading out. `None` where the reading
    /// comes from elsewhere (the agents of a lab across machines read their own).
    fn cpu_reader(&mut self) -> Option<CpuReader> {
        None
    }
}

/// Reads what a machine's software waited for a CPU ([`Worker::cpu_reader`]).
pub struct CpuReader {
    watch: Arc<std::sync::Mutex<vemu_host::cpu_wait::CpuWatch>>,
    paths: LabPaths,
    nodes: Vec<String>,
    machine: String,
}

impl CpuReader {
    pub fn read(&self) -> MachineCpu {
        let look =
            self.watch.lock().unwrap_or_else(|e| e.into_inner()).look(&self.paths, &self.nodes);
        MachineCpu {
            machine: self.machine.clone(),
            pressure_us: look.pressure_us,
            steal_us: look.steal_us,
            read_at_ns: look.at_ns,
            nodes: look.nodes,
            nodes_counted: look.nodes_counted,
        }
    }
}

/// Where a machine's share keeps the state its lab's controller last handed on.
pub fn saved_copy(paths: &LabPaths) -> std::path::PathBuf {
    paths.dir.join("controller.json")
}

/// A machine's fault, with its causes.
pub fn internal(e: anyhow::Error) -> WorkerError {
    WorkerError::internal(format!("{e:#}"))
}

/// A worker's answer of the wrong kind for `order` (a bug, or a mismatched agent).
pub fn unexpected(order: &str, r: &WorkerReply) -> WorkerError {
    let kind = format!("{r:?}");
    let kind = kind.split(['(', ' ', '{']).next().unwrap_or("?");
    WorkerError::internal(format!("the worker answered {kind} to {order}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refusal crosses the wire with its fault; an agent of an earlier version sends
    /// the message alone, read as an internal error.
    #[test]
    fn a_refusal_keeps_its_fault_on_the_wire_and_old_answers_still_read() {
        let r = WorkerReply::Error(WorkerError::lost("m2: no answer"));
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(text, r#"{"Error":{"fault":"lost","message":"m2: no answer"}}"#);
        let back: WorkerReply = serde_json::from_str(&text).unwrap();
        assert!(matches!(back, WorkerReply::Error(e) if e == WorkerError::lost("m2: no answer")));
        let old: WorkerReply = serde_json::from_str(r#"{"Error":"boom"}"#).unwrap();
        assert!(matches!(old, WorkerReply::Error(e) if e == WorkerError::internal("boom")));
        assert!(
            serde_json::from_str::<WorkerReply>(r#"{"Error":{"fault":"x","message":""}}"#).is_err()
        );
        assert_eq!(WorkerError::caller("no node").within("m1").to_string(), "m1: no node");
    }
}
