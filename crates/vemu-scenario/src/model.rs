//! The plan of a lab: every node, link, segment, route and event a scenario describes,
//! checked and numbered ([`Plan`]), the limits it is held to, and its errors.

use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;

use crate::{read_stamped, FileStamp};

use crate::node_kind::NodeKind;
use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use vemu_link::Impairments;

/// Everything needed to build a lab.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub name: String,
    pub seed: u64,
    pub nodes: Vec<NodePlan>,
    pub links: Vec<LinkPlan>,
    #[serde(default)]
    pub segments: Vec<SegmentPlan>,
    /// What happens while the lab runs, on the lab clock.
    #[serde(default)]
    pub events: Vec<TimedEvent>,
    /// When the data plane's measured lateness makes results doubtful.
    #[serde(default)]
    pub fidelity: FidelityThresholds,
    /// Size of the lab's tmpfs: what all its nodes may write under /etc, /var/lib,
    /// /var/log and /run together, bytes (scenario key `storage`).
    #[serde(default = "default_storage")]
    pub storage_bytes: u64,
    /// Largest size of a node's log (`/var/log/vemu/LAB/NODE.log`, what its commands
    /// print), bytes (scenario key `logs`): beyond it the log moves to `NODE.log.1`
    /// (replacing the one there) and starts again.
    #[serde(default = "default_log")]
    pub log_bytes: u64,
    /// Machines hosting the nodes (empty: this machine alone); each node's is
    /// [`NodePlan::machine`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machines: Vec<Machine>,
    /// The machine's own traffic sent through emulated paths (`divert:`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diverts: Vec<Divert>,
    /// A tenant's lab (`vemu up --tenant`): its nodes' processes are confined (a
    /// read-only view of the machine's files, a /dev and /sys of their own, fewer
    /// capabilities; docs/security.md).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub confined: bool,
    /// How its nodes' images are pulled (a tenant's: from the registries its
    /// administrator lists, bounded in size).
    #[serde(default)]
    pub images: crate::ImagePolicy,
    /// The management network (`mgmt:`): a bridge on the machine with the first
    /// address of each subnet, and `mgmt0` in every node vemu makes, with the node's
    /// address ([`NodePlan::mgmt`]); `None`: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mgmt: Option<Mgmt>,
    /// The checks the lab judges while it runs (`expect:`; `crate::expect`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expect: Vec<crate::expect::Expectation>,
}

/// The management network's subnets (at least one of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mgmt {
    pub ipv4: Option<ipnet::Ipv4Net>,
    pub ipv6: Option<ipnet::Ipv6Net>,
    /// The nodes reach beyond the machine through it (`nat: true`): a default route on
    /// `mgmt0` that any route of the lab's own outranks, and their addresses masqueraded
    /// as the machine's where they leave it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nat: bool,
}

impl Mgmt {
    /// The machine's IPv4 address on the management network.
    pub fn gateway_v4(&self) -> Option<std::net::Ipv4Addr> {
        self.addresses(0)?.iter().find_map(|a| match a {
            IpNet::V4(v4) => Some(v4.addr()),
            IpNet::V6(_) => None,
        })
    }

    /// The addresses `k` after each subnet's first (0: the machine's, on the bridge;
    /// node number `i` of those with one gets `i + 1`), or `None` past the end of one.
    pub fn addresses(&self, k: u32) -> Option<Vec<IpNet>> {
        let v4 = self
            .ipv4
            .map(|_| self.address(true, k.into()))
            .map_or(Ok(None), |a| a.map(Some).ok_or(()));
        let v6 = self
            .ipv6
            .map(|_| self.address(false, k.into()))
            .map_or(Ok(None), |a| a.map(Some).ok_or(()));
        Some(v4.ok()?.into_iter().chain(v6.ok()?).collect())
    }

    /// The address `k` after the first of the family's subnet (`v4`: IPv4), or `None`
    /// past its end (IPv4: its broadcast address) or without a subnet of that family.
    pub fn address(&self, v4: bool, k: u128) -> Option<IpNet> {
        if v4 {
            let n = self.ipv4?;
            let a = u32::from(n.network()).checked_add(u32::try_from(k).ok()?.checked_add(1)?)?;
            // (Not the broadcast address.)
            (a < u32::from(n.broadcast()))
                .then(|| IpNet::V4(ipnet::Ipv4Net::new(a.into(), n.prefix_len()).unwrap()))
        } else {
            let n = self.ipv6?;
            let a = u128::from(n.network()).checked_add(k.checked_add(1)?)?;
            (a <= u128::from(n.broadcast()))
                .then(|| IpNet::V6(ipnet::Ipv6Net::new(a.into(), n.prefix_len()).unwrap()))
        }
    }

    /// Which `k` of [`Mgmt::address`] `a` is, if it is one of a node's (not the
    /// machine's, the network's or the broadcast address).
    pub fn number(&self, a: std::net::IpAddr) -> Option<u128> {
        let (base, k) = match a {
            std::net::IpAddr::V4(a) => {
                let n = self.ipv4?;
                (u128::from(u32::from(n.network())), u128::from(u32::from(a)))
            }
            std::net::IpAddr::V6(a) => (u128::from(self.ipv6?.network()), u128::from(a)),
        };
        let k = k.checked_sub(base)?.checked_sub(1).filter(|k| *k >= 1)?;
        (self.address(a.is_ipv4(), k)?.addr() == a).then_some(k)
    }
}

/// Traffic of the machine itself (the controller's network namespace) that crosses an
/// emulated path: connections whose first outgoing packet matches `matches` (an
/// nftables expression) take `forward` on the way out and `reverse` on the way back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Divert {
    pub name: String,
    pub matches: String,
    pub forward: Impairments,
    pub reverse: Impairments,
}

/// A machine that hosts nodes of a lab: where its `vemu agent` listens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    pub name: String,
    pub address: std::net::SocketAddr,
}

/// TCP port of `vemu agent` unless one is given.
pub const AGENT_PORT: u16 = 14790;
/// Most machines a lab may span.
pub const MAX_MACHINES: usize = 1024;

impl Machine {
    /// Machines as the command line names them: `NAME=ADDRESS[:PORT],...`.
    pub fn parse_list(s: &str) -> Result<Vec<Machine>, String> {
        let mut v: Vec<Machine> = Vec::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let Some((name, addr)) = item.split_once('=') else {
                return Err(format!("expected NAME=ADDRESS for each machine, got '{item}'"));
            };
            let name = name.trim();
            crate::names::valid_machine_name(name)?;
            if v.iter().any(|m| m.name == name) {
                return Err(format!("machine '{name}' is named twice"));
            }
            v.push(Machine {
                name: name.to_string(),
                address: Machine::parse_address(addr.trim())?,
            });
            if v.len() > MAX_MACHINES {
                return Err(format!("a lab spans at most {MAX_MACHINES} machines"));
            }
        }
        if v.is_empty() {
            return Err("no machines named (expected NAME=ADDRESS,...)".into());
        }
        Ok(v)
    }

    /// A cluster file: one machine a line, `NAME=ADDRESS[:PORT]` (or `NAME ADDRESS`),
    /// `#` comments and blank lines ignored; problems name `file:line`.
    pub fn parse_cluster(text: &str, file: &str) -> Result<Vec<Machine>, String> {
        let mut v: Vec<Machine> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let at = |m: String| format!("{file}:{}: {m}", i + 1);
            let item = match line.split_once(char::is_whitespace) {
                Some((n, a)) if !line.contains('=') => format!("{n}={}", a.trim()),
                _ => line.to_string(),
            };
            let mut one = Machine::parse_list(&item).map_err(at)?;
            if one.len() != 1 {
                return Err(at("one machine a line (NAME=ADDRESS[:PORT])".into()));
            }
            let m = one.remove(0);
            if v.iter().any(|x| x.name == m.name) {
                return Err(at(format!("machine '{}' is named twice", m.name)));
            }
            v.push(m);
            if v.len() > MAX_MACHINES {
                return Err(at(format!("a lab spans at most {MAX_MACHINES} machines")));
            }
        }
        if v.is_empty() {
            return Err(format!("{file}: no machines (one a line: NAME=ADDRESS[:PORT])"));
        }
        Ok(v)
    }

    /// `ADDRESS` or `ADDRESS:PORT` (IPv6: `[ADDRESS]:PORT`), port [`AGENT_PORT`] by default.
    pub fn parse_address(s: &str) -> Result<std::net::SocketAddr, String> {
        if let Ok(a) = s.parse::<std::net::SocketAddr>() {
            return Ok(a);
        }
        match s.parse::<IpAddr>() {
            Ok(ip) => Ok(std::net::SocketAddr::new(ip, AGENT_PORT)),
            Err(_) => Err(format!("expected the address of the machine's agent (an IP address, with ':PORT' if not {AGENT_PORT}), got '{s}'")),
        }
    }
}

/// Default size of a lab's tmpfs (nodes' private files), bytes.
pub const DEFAULT_STORAGE_BYTES: u64 = 1 << 30;
/// Default and least cap of a node's log (scenario key `logs`).
pub const DEFAULT_LOG_BYTES: u64 = 64 << 20;
pub const MIN_LOG_BYTES: u64 = 64 << 10;

fn default_log() -> u64 {
    DEFAULT_LOG_BYTES
}
/// Smallest one a scenario may ask for.
pub const MIN_STORAGE_BYTES: u64 = 16 << 20;

fn default_storage() -> u64 {
    DEFAULT_STORAGE_BYTES
}

/// Thresholds of the fidelity monitor: a frame written more than `late_ns` after its
/// scheduled time is late; a direction (and the lab) is `degraded` when more than
/// `degraded_fraction` of its frames are late, `invalid` above `invalid_fraction`.
/// Directions with fewer than `min_frames` frames are not judged alone. The same
/// fractions judge the frames the nodes' kernels dropped on their TAP queues because the
/// engine did not read them in time. An engine shard working more than `busy_fraction`
/// of a second has no headroom left: that second is `degraded` at least. A second in
/// which the machine's tasks waited for a CPU more than `cpu_pressure` of the time is
/// `starved`: the software under test could not keep up with the network it was
/// given, and the fraction of starved seconds is judged as late frames are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FidelityThresholds {
    pub late_ns: u64,
    pub degraded_fraction: f64,
    pub invalid_fraction: f64,
    pub min_frames: u64,
    pub busy_fraction: f64,
    #[serde(default = "default_cpu_pressure")]
    pub cpu_pressure: f64,
}

/// Calibrated on the density experiment (bench/README, "CPU pressure").
pub const DEFAULT_CPU_PRESSURE: f64 = 0.9;

fn default_cpu_pressure() -> f64 {
    DEFAULT_CPU_PRESSURE
}

impl Default for FidelityThresholds {
    fn default() -> Self {
        FidelityThresholds {
            late_ns: 1_000_000,
            degraded_fraction: 0.01,
            invalid_fraction: 0.10,
            min_frames: 100,
            busy_fraction: 0.9,
            cpu_pressure: DEFAULT_CPU_PRESSURE,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodePlan {
    pub name: String,
    pub ifaces: Vec<IfacePlan>,
    /// An access point's bridge (`br0`, [`crate::AP_BRIDGE`]): its ports, the radio
    /// interface first; the ports' addresses are the bridge's (none: no bridge).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bridge: Vec<String>,
    pub routes: Vec<RoutePlan>,
    /// Policy routing rules (the routes of their tables are among `routes`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<crate::policy::RulePlan>,
    /// Shell commands started when the lab comes up, supervised by the controller.
    pub run: Vec<String>,
    /// Addresses on `lo`.
    #[serde(default)]
    pub loopback: Vec<IpNet>,
    /// Files in the node's private directories.
    #[serde(default)]
    pub files: Vec<FilePlan>,
    /// Network sysctls (`net.ipv4.…`), set before its interfaces exist (so that
    /// `…conf.default.…` values apply to them).
    #[serde(default)]
    pub sysctls: Vec<(String, String)>,
    /// Whether the node's processes run in a PID namespace of the node's own, with its
    /// own `/proc` (scenario key `isolation: pid`, the default), or see the machine's
    /// processes (`isolation: none`).
    #[serde(default = "yes")]
    pub own_pids: bool,
    /// CPU, memory and process limits of the node's processes together.
    #[serde(default)]
    pub limits: Limits,
    /// Which of [`Plan::machines`] hosts the node (0 when the lab has none).
    #[serde(default)]
    pub machine: usize,
    /// What the node is (scenario key `kind`).
    #[serde(default)]
    pub kind: NodeKind,
    /// Where its root filesystem comes from (scenario key `image`), as skopeo names it
    /// (`oci:DIR`, `oci-archive:FILE`, `docker-archive:FILE`, `docker://REF`, or
    /// `path:P` for a path whose kind is told when it is read); `None`: the machine's.
    #[serde(default)]
    pub image: Option<String>,
    /// The router software of its `kind` (`frr`, `bird`: `vemu_scenario::kinds`), which
    /// `vemu save` asks for its running configuration.
    #[serde(default)]
    pub router: Option<String>,
    /// Its addresses on the management network (`mgmt0`), when the lab has one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mgmt: Vec<IpNet>,
    /// Its way beyond the machine (`mgmt: {nat: true}`): the machine's management
    /// address, its default route's gateway on `mgmt0` (metric [`MGMT_DEFAULT_METRIC`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mgmt_gateway: Option<std::net::Ipv4Addr>,
    /// A host node's `nat: true`: IPv4 that arrives from the lab on its interfaces and
    /// leaves the machine by another is masqueraded as the machine's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nat: bool,
    /// Where it is drawn (`canvas: [x, y]`, pixels), as its topology placed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canvas: Option<[f64; 2]>,
}

/// The metric of a node's default route through the management network: any default
/// route of the lab's own (a routing daemon's, a `run:` command's) comes first.
pub const MGMT_DEFAULT_METRIC: u32 = 10_000;

/// Limits on what a node's processes may use together (scenario keys `cpu`, `memory`,
/// `pids`); `None`: no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// Cores' worth of CPU time, e.g. 0.5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_cores: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// Most processes (and threads) at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<u64>,
}

impl Limits {
    /// These limits, with `defaults`' where these have none.
    pub fn or(self, defaults: Limits) -> Limits {
        Limits {
            cpu_cores: self.cpu_cores.or(defaults.cpu_cores),
            memory_bytes: self.memory_bytes.or(defaults.memory_bytes),
            pids: self.pids.or(defaults.pids),
        }
    }

    pub fn is_none(&self) -> bool {
        *self == Limits::default()
    }

    /// Whether every limit given is within its bounds ([`MIN_CPU_CORES`] …); the first
    /// that is not, said.
    pub fn check(&self) -> Result<(), String> {
        if let Some(c) = self
            .cpu_cores
            .filter(|c| !(c.is_finite() && (MIN_CPU_CORES..=MAX_CPU_CORES).contains(c)))
        {
            return Err(format!("cpu must be {MIN_CPU_CORES} to {MAX_CPU_CORES} cores, got {c}"));
        }
        if let Some(m) = self.memory_bytes.filter(|&m| m < MIN_MEMORY_BYTES) {
            return Err(format!("memory must be at least 4MiB, got {m} bytes"));
        }
        if let Some(p) = self.pids.filter(|p| !(1..=MAX_PIDS).contains(p)) {
            return Err(format!("pids must be 1 to {MAX_PIDS}, got {p}"));
        }
        Ok(())
    }
}

/// Bounds of the `cpu`, `memory` and `pids` keys.
pub const MIN_CPU_CORES: f64 = 0.01;
pub const MAX_CPU_CORES: f64 = 1024.0;
pub const MIN_MEMORY_BYTES: u64 = 4 << 20;
pub const MAX_PIDS: u64 = 4_194_304;

fn yes() -> bool {
    true
}

/// A file in a node's private view of the filesystem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilePlan {
    /// Absolute path inside the node, under one of [`PRIVATE_DIRS`].
    pub path: String,
    pub content: String,
    /// Permission bits.
    pub mode: u32,
}

/// What an interface is attached to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attach {
    /// A point-to-point link (index into `Plan::links`).
    Link(usize),
    /// A port of a segment (index into `Plan::segments`, index of the member there).
    Segment(usize, usize),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IfacePlan {
    /// Name inside the node, e.g. `eth0`.
    pub name: String,
    pub mac: [u8; 6],
    /// IP MTU, bytes.
    pub mtu: u32,
    pub addrs: Vec<IpNet>,
    pub attach: Attach,
}

/// One end of a link: a node and one of its interfaces (indices into the plan).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointRef {
    pub node: usize,
    pub iface: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkPlan {
    /// Name to refer to the link at run time (the scenario's `name`, or `a:b`).
    pub name: String,
    pub a: EndpointRef,
    pub b: EndpointRef,
    /// a → b (shared: a generated lab's links of one tier hold one copy)
    pub forward: std::sync::Arc<Impairments>,
    /// b → a
    pub reverse: std::sync::Arc<Impairments>,
    /// Cost for static route computation.
    pub weight: u32,
}

/// A shared medium joining many interfaces: a switched Ethernet LAN, or a radio
/// channel when `wireless` is set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentPlan {
    pub name: String,
    #[serde(default)]
    pub wireless: Option<WirelessPlan>,
    pub members: Vec<MemberPlan>,
    /// Aggregate capacity of the whole segment, bits/s; `None`: unlimited.
    pub capacity_bps: Option<u64>,
    /// Learned MAC addresses are forgotten after this long without traffic, ns.
    pub aging_ns: u64,
    /// IGMP/MLD snooping of a LAN; on a wireless segment, whether receivers filter groups.
    #[serde(default)]
    pub snooping: vemu_switch::Snooping,
    /// Cost of crossing the segment, for static route computation.
    pub weight: u32,
    /// Where it is drawn (`canvas: [x, y]`, pixels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canvas: Option<[f64; 2]>,
}

/// A radio channel: how it carries frames, and where its members are and go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WirelessPlan {
    pub medium: vemu_radio::medium::MediumConfig,
    /// Positions advance every this many ns of lab time.
    pub tick_ns: u64,
    /// One per member, in member order.
    pub radios: Vec<MemberRadio>,
    /// The movement file, if the segment replays one (its members' traces have no moves
    /// until [`Plan::load_traces`]).
    #[serde(default)]
    pub trace: Option<TraceFile>,
}

/// Where a member of a wireless segment starts and how it moves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberRadio {
    pub start: vemu_radio::Pos,
    pub mobility: vemu_radio::mobility::Mobility,
    /// Seed of its mobility model's generator.
    pub seed: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberPlan {
    pub end: EndpointRef,
    /// Access VLAN on the segment's switch.
    pub vlan: u16,
    /// Frames the member sends, on their way to the switch.
    pub egress: Impairments,
    /// Frames the switch delivers to the member.
    pub ingress: Impairments,
}

/// Which directions of a link a change applies to, relative to how the link was named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    #[default]
    Both,
    Forward,
    Reverse,
}

/// A link or a segment port, as the plan numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PortRef {
    Link(usize),
    /// Segment, member.
    Member(usize, usize),
}

/// An entry of the scenario's timeline: an action at a lab-clock time, possibly
/// repeated every `every_ns` until `until_ns`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimedEvent {
    pub at_ns: u64,
    pub every_ns: Option<u64>,
    pub until_ns: Option<u64>,
    pub target: EventTarget,
    pub action: EventAction,
}

/// At most how many firings `events` have had `t_ns` into the lab clock (counting every
/// step of a ramp at its start): what a saved count of firings cannot exceed.
pub fn firings_by(events: &[TimedEvent], t_ns: u64) -> u64 {
    events
        .iter()
        .filter(|e| e.at_ns <= t_ns)
        .map(|e| {
            let end = e.until_ns.map_or(t_ns, |u| u.min(t_ns));
            let reps = match e.every_ns {
                Some(every) if every > 0 => end.saturating_sub(e.at_ns) / every + 1,
                _ => 1,
            };
            let per_rep = match &e.action {
                EventAction::Ramp { over_ns, step_ns, .. } => {
                    over_ns.div_ceil((*step_ns).max(1)).max(1) + 1
                }
                _ => 1,
            };
            reps.saturating_mul(per_rep)
        })
        .fold(0u64, u64::saturating_add)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventTarget {
    /// A link or segment port as `vemu link` names it, and the directions concerned.
    Link {
        spec: String,
        direction: Direction,
    },
    Node(String),
}

// (A timeline holds a few of these, serialized as they are.)
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventAction {
    /// Change impairments.
    Set(vemu_link::ImpairmentsPatch),
    /// Link: up/down (carrier). Node: start/stop.
    State(bool),
    /// Change impairments step by step from `from` to `to` over `over_ns`.
    Ramp {
        from: vemu_link::ImpairmentsPatch,
        to: vemu_link::ImpairmentsPatch,
        over_ns: u64,
        step_ns: u64,
    },
    /// Each firing applies the next patch of the list (with `every`: e.g. a square wave).
    Cycle(Vec<vemu_link::ImpairmentsPatch>),
    /// Run a shell command in the node (output in the node's log).
    Run(String),
    /// Move the node on its wireless segments: at once, or at `speed_mps`.
    Move { x_m: f64, y_m: f64, speed_mps: Option<f64> },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutePlan {
    pub dst: IpNet,
    pub via: Option<IpAddr>,
    /// Interface name, when the route is bound to one.
    pub dev: Option<String>,
    /// Its routing table ([`crate::policy::MAIN_TABLE`] unless a rule's).
    #[serde(default = "crate::policy::main_table", skip_serializing_if = "crate::policy::is_main")]
    pub table: u32,
}

impl SegmentPlan {
    /// Static routing crosses it: a LAN, or a radio channel in infrastructure mode (its
    /// stations always reach their access point); an ad hoc channel is a routing
    /// daemon's to route.
    pub fn routed(&self) -> bool {
        self.wireless.as_ref().is_none_or(|w| {
            w.medium.hub.is_some() || w.medium.dcf.as_ref().is_some_and(|d| !d.roles.is_empty())
        })
    }

    /// Its kind as the scenario names it: `lan`, `wireless` or `hub`.
    pub fn kind(&self) -> &'static str {
        match &self.wireless {
            None => "lan",
            Some(w) if w.medium.hub.is_some() => "hub",
            Some(_) => "wireless",
        }
    }
}

impl Plan {
    /// The lab's `/etc/hosts` entries: each node's loopback and interface addresses
    /// (IPv4 before IPv6) with its name (made when asked: a million-node plan does not
    /// hold a second copy of every name).
    pub fn hosts(&self) -> impl Iterator<Item = (IpAddr, &str)> {
        self.nodes.iter().flat_map(|n| {
            let mut addrs: Vec<IpAddr> = n
                .loopback
                .iter()
                .chain(n.ifaces.iter().flat_map(|i| i.addrs.iter()))
                .map(|a| a.addr())
                .collect();
            addrs.sort_by_key(|a| a.is_ipv6());
            addrs.into_iter().map(move |a| (a, n.name.as_str()))
        })
    }

    /// Neither direction of link `l` needs the engine ([`Impairments::needs_engine`],
    /// at its first end's interface MTU, as the core judges it): the kernel fast path
    /// can carry the link from the start, with no TAP device of the engine's.
    pub fn link_unimpaired(&self, l: usize) -> bool {
        let link = &self.links[l];
        let mtu = self.nodes[link.a.node].ifaces[link.a.iface].mtu;
        !link.forward.needs_engine(mtu) && !link.reverse.needs_engine(mtu)
    }

    /// No port of segment `g` needs the engine in either direction and there is no
    /// capacity: a plain LAN ([`Plan::kernel_lan`]) the kernel can switch from the start.
    pub fn segment_unimpaired(&self, g: usize) -> bool {
        let seg = &self.segments[g];
        seg.capacity_bps.is_none()
            && seg.members.iter().all(|m| {
                let mtu = self.nodes[m.end.node].ifaces[m.end.iface].mtu;
                !m.egress.needs_engine(mtu) && !m.ingress.needs_engine(mtu)
            })
    }

    /// Whether the kernel fast path can switch segment `g` (a Linux bridge): a plain LAN —
    /// no radio, every port in one VLAN — none of whose members is a NIC's wire (whose
    /// frames come through a packet socket, never a veth).
    pub fn kernel_lan(&self, g: usize) -> bool {
        let seg = &self.segments[g];
        seg.wireless.is_none()
            && !self.spans(g)
            && seg.members.iter().all(|m| {
                m.vlan == seg.members[0].vlan && self.nodes[m.end.node].kind != NodeKind::External
            })
    }

    /// The machine of segment `g`'s switch or radio channel: its first member's. Members
    /// on other machines reach it through tunnels ([`Plan::member_tunnel`]).
    pub fn segment_machine(&self, g: usize) -> usize {
        self.segments[g].members.first().map_or(0, |m| self.nodes[m.end.node].machine)
    }

    /// Whether any member of segment `g` has IPv6 on (a node whose interfaces have it
    /// off, as `ipv6: none` sets, sends and takes no IPv6 frame: the LAN's querier then
    /// sends no MLD query either).
    pub fn segment_carries_ipv6(&self, g: usize) -> bool {
        self.segments[g].members.iter().any(|m| {
            let off = self.nodes[m.end.node]
                .sysctls
                .iter()
                .rev()
                .find(|(k, _)| k == "net.ipv6.conf.default.disable_ipv6")
                .is_some_and(|(_, v)| v.trim() == "1");
            !off
        })
    }

    /// Whether segment `g` has members on more than one machine.
    pub fn spans(&self, g: usize) -> bool {
        let at = self.segment_machine(g);
        self.segments[g].members.iter().any(|m| self.nodes[m.end.node].machine != at)
    }

    /// The number of the tunnel between member `k` of segment `g` and the segment's
    /// machine, when they differ (its VNIs; direction 0 = the member's egress, toward the
    /// segment's machine, 1 = its ingress): after the links' numbers, the same on every
    /// machine.
    pub fn member_tunnel(&self, g: usize, k: usize) -> usize {
        self.links.len() + self.segments[..g].iter().map(|s| s.members.len()).sum::<usize>() + k
    }

    /// The trunks of the segments that span machines, in tunnel order: (segment, a
    /// machine other than the segment's with members of it). Through its trunk the
    /// segment's switch or channel sends each frame once toward that machine, naming
    /// the members there that receive it; its number as a tunnel is
    /// [`Plan::trunk_tunnel`].
    pub fn trunks(&self) -> Vec<(usize, usize)> {
        let mut t = Vec::new();
        for g in (0..self.segments.len()).filter(|&g| self.spans(g)) {
            let at = self.segment_machine(g);
            let mut ms: Vec<usize> = self.segments[g]
                .members
                .iter()
                .map(|m| self.nodes[m.end.node].machine)
                .filter(|&m| m != at)
                .collect();
            ms.sort_unstable();
            ms.dedup();
            t.extend(ms.into_iter().map(|m| (g, m)));
        }
        t
    }

    /// The tunnel number of trunk `k` of [`Plan::trunks`]: after every link and member.
    pub fn trunk_tunnel(&self, k: usize) -> usize {
        self.links.len() + self.segments.iter().map(|s| s.members.len()).sum::<usize>() + k
    }

    /// The machines of every tunnel's two sides (links: ends a and b; then every segment
    /// member: its node's machine, the segment's; then every trunk: the members'
    /// machine, the segment's), by tunnel number; both the same where nothing crosses
    /// machines.
    pub fn tunnel_machines(&self) -> Vec<[usize; 2]> {
        let at = |e: EndpointRef| self.nodes[e.node].machine;
        let links = self.links.iter().map(|l| [at(l.a), at(l.b)]);
        let members =
            self.segments.iter().enumerate().flat_map(|(g, s)| {
                s.members.iter().map(move |m| [at(m.end), self.segment_machine(g)])
            });
        let trunks = self.trunks().into_iter().map(|(g, m)| [m, self.segment_machine(g)]);
        links.chain(members).chain(trunks).collect()
    }

    pub fn segment_index(&self, name: &str) -> Option<usize> {
        self.segments.iter().position(|s| s.name == name)
    }

    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// Find a link by its name or by `a:b` node names (either order). Returns the link
    /// index and whether `a:b` was written in the link's b → a order.
    pub fn find_link(&self, spec: &str) -> Result<(usize, bool), String> {
        if let Some(i) = self.links.iter().position(|l| l.name == spec) {
            return Ok((i, false));
        }
        let Some((x, y)) = spec.split_once(':') else {
            return Err(format!(
                "no link named '{spec}' (write a link as NODE:NODE or by its name)"
            ));
        };
        for name in [x, y] {
            if self.node_index(name).is_none() {
                return Err(format!("no node named '{name}' in lab '{}'", self.name));
            }
        }
        let matches: Vec<(usize, bool)> = self
            .links
            .iter()
            .enumerate()
            .filter_map(|(i, l)| {
                let (a, b) = (&self.nodes[l.a.node].name, &self.nodes[l.b.node].name);
                if a == x && b == y {
                    Some((i, false))
                } else if a == y && b == x {
                    Some((i, true))
                } else {
                    None
                }
            })
            .collect();
        match matches.as_slice() {
            [one] => Ok(*one),
            [] => Err(format!("no link between '{x}' and '{y}'")),
            many => Err(format!(
                "{} links join '{x}' and '{y}'; name one of: {}",
                many.len(),
                many.iter()
                    .map(|(i, _)| self.links[*i].name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    /// The links or segment ports a name given by the user means, each with the
    /// direction that its "forward" is (0 or 1): a link as in [`Plan::find_link`], a
    /// segment port as `SEG:NODE` (forward: toward the node) or `NODE:SEG`, or `SEG` for
    /// every port of a segment (forward: toward the members).
    pub fn ports(&self, spec: &str) -> Result<Vec<(PortRef, usize)>, String> {
        let link_err = match self.find_link(spec) {
            Ok((i, reversed)) => return Ok(vec![(PortRef::Link(i), reversed as usize)]),
            Err(e) => e,
        };
        if let Some(g) = self.segment_index(spec) {
            return Ok((0..self.segments[g].members.len())
                .map(|m| (PortRef::Member(g, m), 1))
                .collect());
        }
        if let Some((x, y)) = spec.split_once(':') {
            for (seg, node, forward) in [(x, y, 1), (y, x, 0)] {
                if let Some(g) = self.segment_index(seg) {
                    let Some(ni) = self.node_index(node) else {
                        return Err(format!("no node named '{node}' in lab '{}'", self.name));
                    };
                    return match self.segments[g].members.iter().position(|m| m.end.node == ni) {
                        Some(m) => Ok(vec![(PortRef::Member(g, m), forward)]),
                        None => Err(format!("node '{node}' is not a member of segment '{seg}'")),
                    };
                }
            }
        }
        Err(if self.segments.is_empty() {
            link_err
        } else {
            format!("{link_err}, and no segment port '{spec}' (write SEGMENT:NODE)")
        })
    }

    /// `node:iface` of an endpoint, for messages and status.
    pub fn endpoint_name(&self, e: EndpointRef) -> String {
        let n = &self.nodes[e.node];
        format!("{}:{}", n.name, n.ifaces[e.iface].name)
    }
}

/// One problem in a scenario, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub line: usize,
    pub col: usize,
    /// Dotted path of the field, e.g. `links[1].forward.loss`.
    pub field: String,
    pub message: String,
}

/// Every problem found in a scenario file.
#[derive(Debug, Clone)]
pub struct Errors {
    pub file: String,
    pub errors: Vec<Error>,
}

impl fmt::Display for Errors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            match (e.line, e.field.is_empty()) {
                (0, _) => write!(f, "{}: {}", self.file, e.message)?,
                (_, true) => write!(f, "{}:{}:{}: {}", self.file, e.line, e.col, e.message)?,
                (_, false) => {
                    write!(f, "{}:{}:{}: {}: {}", self.file, e.line, e.col, e.field, e.message)?
                }
            }
        }
        Ok(())
    }
}

impl std::error::Error for Errors {}

/// Most routes static routing may give a lab's nodes in all (each costs the kernel a few
/// hundred bytes and the lab's start a netlink message; beyond this, routing daemons).
pub const MAX_STATIC_ROUTES: u64 = 5_000_000;
/// Largest scenario file, bytes.
pub const MAX_SCENARIO_BYTES: u64 = 64 << 20;
/// Largest file a node's `files:` entry copies or renders (`from:`, `template:`), bytes.
pub const MAX_NODE_FILE_BYTES: u64 = 16 << 20;
/// Largest ns-2 movement file (`trace:`), bytes.
pub const MAX_TRACE_BYTES: u64 = 256 << 20;

/// An ns-2 movement file a wireless segment replays. Not copied into the plan (a trace
/// may have millions of lines): the lab's controller reads it when it starts
/// ([`Plan::load_traces`]), and refuses it if it changed since the scenario was checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceFile {
    /// Absolute.
    pub path: PathBuf,
    pub stamp: FileStamp,
    /// (member of the segment, `$node_(i)` of the file) for every member it moves.
    pub members: Vec<(usize, usize)>,
}

impl Plan {
    /// Read the movement files of the wireless segments into their members' mobility
    /// (the plan carries only their names: [`TraceFile`]).
    pub fn load_traces(&mut self) -> Result<(), String> {
        for g in &mut self.segments {
            let Some(w) = g.wireless.as_mut() else { continue };
            let Some(t) = &w.trace else { continue };
            let (text, stamp) = read_stamped(&t.path, MAX_TRACE_BYTES)
                .map_err(|e| format!("cannot read ns-2 trace '{}': {e}", t.path.display()))?;
            if stamp != t.stamp {
                return Err(format!(
                    "the ns-2 trace '{}' of segment '{}' changed since the scenario was checked",
                    t.path.display(),
                    g.name
                ));
            }
            let all = vemu_radio::ns2::parse(&text, w.radios.len().max(vemu_radio::ns2::MAX_NODES))
                .map_err(|e| format!("{}:{}: {}", t.path.display(), e.line, e.message))?;
            for &(m, i) in &t.members {
                let moves = all.get(i).cloned().ok_or_else(|| {
                    format!("the ns-2 trace '{}' has no $node_({i})", t.path.display())
                })?;
                w.radios[m].mobility = vemu_radio::mobility::Mobility::Trace(moves);
            }
        }
        Ok(())
    }
}
