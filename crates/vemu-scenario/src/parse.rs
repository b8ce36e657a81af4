//! From the marked YAML tree to a validated [`Scenario`], collecting every error.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use vemu_link::{
    Chance, Distribution, Impairments, ImpairmentsPatch, Jitter, Loss, QueueLimit, Reorder, Shaper,
};

use crate::units;

mod addressing;
mod city;
pub(crate) mod delay;
mod divert;
mod event;
mod expect;
mod generate;
mod hub;
mod impairment;
mod link;
mod node;
mod qos;
mod reader;
pub(crate) mod rule;
mod segment;
mod wifi;
mod wireless;

pub(crate) use node::file_path;

use crate::names::{valid_lab_name, valid_machine_name, valid_medium_name, valid_node_name};
use crate::yaml::{self, Mark, Node, Value};
use crate::Error;
use addressing::*;
use event::*;
use impairment::*;
pub use impairment::{IMPAIRMENT_KEYS, RUNTIME_IMPAIRMENT_KEYS};
use link::*;
pub use node::*;
use reader::*;
use segment::*;
pub use wireless::WirelessDef;

/// A validated scenario, before addresses and routes are worked out.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub seed: u64,
    pub nodes: Vec<NodeDef>,
    pub links: Vec<LinkDef>,
    pub segments: Vec<SegmentDef>,
    pub events: Vec<EventDef>,
    pub addressing: Addressing,
    pub addressing_mark: Mark,
    pub static_routing: bool,
    /// Where `routing` is (or the top of the file).
    pub routing_mark: Mark,
    pub fidelity: crate::FidelityThresholds,
    /// Size of the lab's tmpfs (what the nodes write under /etc, /var/lib, /var/log, /run), bytes.
    pub storage_bytes: u64,
    pub log_bytes: u64,
    /// Machines that host the lab's nodes (`machines:`), by name; none: this machine.
    pub machines: Vec<crate::Machine>,
    /// The machine's own traffic through emulated paths (`divert:`).
    pub diverts: Vec<crate::Divert>,
    /// A tenant's: its nodes are confined.
    pub confined: bool,
    pub images: crate::ImagePolicy,
    /// The management network (`mgmt:`), and where it is (or the top of the file).
    pub mgmt: Option<crate::Mgmt>,
    pub mgmt_mark: Mark,
    /// The checks the lab judges (`expect:`).
    pub expects: Vec<crate::expect::ExpectDef>,
}

#[derive(Debug, Clone)]
pub struct NodeDef {
    pub name: String,
    pub mark: Mark,
    pub run: Vec<String>,
    pub routes: Vec<RouteDef>,
    /// Policy routing rules (`rules:`).
    pub rules: Vec<rule::RuleDef>,
    pub files: Vec<FileDef>,
    /// Addresses on the node's `lo` (host routes: /32, /128).
    pub loopback: Vec<IpNet>,
    /// Values for templates (`{{ vars.NAME }}`), the node's over `defaults.node`'s.
    pub vars: Vec<(String, String)>,
    /// Network sysctls of the node (`net.…` keys), the node's over `defaults.node`'s.
    pub sysctls: Vec<(String, String)>,
    /// Whether the node's processes get a PID namespace (and `/proc`) of their own
    /// (`isolation: pid`, the default) or share the machine's (`isolation: none`).
    pub own_pids: bool,
    /// CPU, memory and process limits (`cpu`, `memory`, `pids`), the node's over
    /// `defaults.node`'s.
    pub limits: crate::Limits,
    /// The machine the node must run on (`machine:`, an index into `machines`).
    pub machine: Option<usize>,
    /// `kind`: a namespace vemu makes, the machine itself, or a NIC's wire.
    pub kind: crate::NodeKind,
    /// `iface` of a node of kind `external`: the machine's interface (NIC).
    pub nic: Option<String>,
    /// `image`: where the node's root filesystem comes from, as skopeo names it
    /// (`parse::node::image_reference`); `None`: the machine's own.
    pub image: Option<String>,
    /// The router software of its `kind` (`frr`, `bird`), if any.
    pub router: Option<String>,
    /// `nat: true` on the host node: what the lab's nodes send beyond the machine
    /// through its interfaces takes the machine's address.
    pub nat: bool,
    /// `mgmt`: the node's own addresses on the management network, and where (the
    /// others get the next free ones).
    pub mgmt: Vec<(IpAddr, Mark)>,
    /// `canvas`: where the node is drawn (pixels), as its topology placed it.
    pub canvas: Option<[f64; 2]>,
    /// `routing:` of the node: `static` (true) or `none`; `None`: the lab's `routing`.
    pub static_routing: Option<bool>,
}

/// A file placed in a node's private view of the filesystem.
#[derive(Debug, Clone)]
pub struct FileDef {
    /// Absolute path inside the node.
    pub path: String,
    /// Its text, a template unless `verbatim`.
    pub text: String,
    pub verbatim: bool,
    /// Permission bits.
    pub mode: u32,
    pub mark: Mark,
    pub field: String,
}

/// A timeline entry, before its link or node name is checked against the plan.
#[derive(Debug, Clone)]
pub struct EventDef {
    pub mark: Mark,
    pub field: String,
    /// Its name (`name:`), by which a check starts after it (`expect: [{after: NAME}]`).
    pub name: Option<String>,
    pub event: crate::TimedEvent,
}

/// Where a segment's subnet of one IP family comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubnetChoice {
    /// From the addressing pool (or from the members' explicit addresses).
    Auto,
    /// No addresses of this family.
    Off,
    Given(IpNet),
}

/// A shared medium: a switched LAN or a radio channel.
#[derive(Debug, Clone)]
pub struct SegmentDef {
    /// The radio of a `kind: wireless` segment; `None` for a LAN.
    pub wireless: Option<WirelessDef>,
    pub name: String,
    pub mark: Mark,
    pub field: String,
    pub members: Vec<MemberDef>,
    /// Aggregate capacity of the segment (all members together), bits/s.
    pub capacity_bps: Option<u64>,
    /// Learned MAC addresses are forgotten after this long without traffic, ns.
    pub aging_ns: u64,
    /// IGMP/MLD snooping of a LAN (`snooping: off | on | querier`), or a wireless
    /// segment's group filter at its receivers (`on | off`).
    pub snooping: vemu_switch::Snooping,
    pub weight: u32,
    /// IPv4, IPv6.
    pub subnets: [SubnetChoice; 2],
    /// `canvas`: where the segment is drawn (pixels).
    pub canvas: Option<[f64; 2]>,
}

#[derive(Debug, Clone)]
pub struct MemberDef {
    pub end: EndDef,
    /// Access VLAN on the segment's switch.
    pub vlan: u16,
    /// Frames the member sends, on their way to the switch.
    pub egress: Impairments,
    /// Frames the switch delivers to the member.
    pub ingress: Impairments,
}

#[derive(Debug, Clone)]
pub struct RouteDef {
    pub dst: IpNet,
    pub via: Option<IpAddr>,
    pub dev: Option<String>,
    /// The routing table (`table:`; the main one when not given).
    pub table: u32,
    pub mark: Mark,
    pub field: String,
}

#[derive(Debug, Clone)]
pub struct LinkDef {
    pub name: Option<String>,
    pub mark: Mark,
    pub field: String,
    pub ends: [EndDef; 2],
    pub forward: std::sync::Arc<Impairments>,
    pub reverse: std::sync::Arc<Impairments>,
    pub weight: u32,
}

#[derive(Debug, Clone)]
pub struct EndDef {
    pub node: usize,
    pub iface: Option<String>,
    pub ips: Vec<IpNet>,
    /// `ip: none`: this end has no address of either family (a bridge's port), whatever
    /// the other end or the segment has.
    pub unaddressed: bool,
    pub mac: Option<[u8; 6]>,
    pub mark: Mark,
    pub field: String,
}

/// Automatic addressing: one subnet per link from each enabled pool.
#[derive(Debug, Clone)]
pub struct Addressing {
    pub ipv4: Option<Ipv4Net>,
    pub ipv4_prefix: u8,
    pub ipv6: Option<Ipv6Net>,
    pub ipv6_prefix: u8,
    /// With no IPv6 pool: `ipv6: link-local` keeps IPv6 on the nodes' interfaces (their
    /// link-local addresses, for babeld or OSPFv3); `ipv6: none` turns it off, so that
    /// nodes send no IPv6 at all.
    pub ipv6_link_local: bool,
    /// Pools of loopback addresses: each node without one of that family gets the next.
    pub loopback_ipv4: Option<Ipv4Net>,
    pub loopback_ipv6: Option<Ipv6Net>,
}

impl Default for Addressing {
    fn default() -> Self {
        Addressing {
            ipv4: Some("10.0.0.0/8".parse().unwrap()),
            ipv4_prefix: 30,
            ipv6: Some("fd00::/48".parse().unwrap()),
            ipv6_prefix: 64,
            ipv6_link_local: true,
            loopback_ipv4: None,
            loopback_ipv6: None,
        }
    }
}

/// Parse a scenario; `base` is the directory that file references are relative to.
pub fn parse(
    text: &str,
    stem: &str,
    name_override: Option<&str>,
    machines_override: Option<Vec<crate::Machine>>,
    base: Option<&Path>,
    trust: &crate::Trust,
) -> Result<Scenario, Vec<Error>> {
    let root = document(text)?;
    let base_dir = base.map(Path::to_path_buf).unwrap_or_else(|| std::path::PathBuf::from("."));
    let mut p = P::new(trust.clone(), Some(base_dir));
    let top = p.map(&root, "", TOP_KEYS);
    let get = |k: &str| top.iter().find(|(key, ..)| *key == k).map(|(_, m, n)| (*m, *n));

    let name = lab_name(&mut p, name_override, get("name").map(|(_, n)| n), stem, root.mark);
    let seed = get("seed")
        .and_then(|(_, n)| p.scalar(n, "seed", integer::<u64>("a whole number")))
        .unwrap_or(1);
    let routing_mark = get("routing").map(|(m, _)| m).unwrap_or(root.mark);
    let static_routing = match get("routing") {
        None => true,
        Some((_, n)) => p
            .scalar(n, "routing", |s| match s {
                "static" => Ok(true),
                "none" => Ok(false),
                _ => Err(format!("expected 'static' or 'none', got '{s}'")),
            })
            .unwrap_or(true),
    };
    let (addressing, addressing_mark) = match get("addressing") {
        Some((m, n)) => (addressing(&mut p, n, "addressing"), m),
        None => (Addressing::default(), root.mark),
    };

    let machines = match machines_override {
        // The command line's replace the scenario's.
        Some(given) => given,
        None => get("machines").map(|(mark, n)| machines(&mut p, mark, n)).unwrap_or_default(),
    };

    let (default_link, default_node) = defaults(&mut p, get("defaults").map(|(_, n)| n), base);

    let (mut nodes, mut names) = match (get("nodes"), get("generate")) {
        (None, Some(_)) => (Vec::new(), HashMap::new()),
        (given, _) => node_defs(&mut p, given, root.mark, base, &default_node, &machines),
    };
    let generated = get("generate").map(|(_, n)| {
        generate::generate(
            &mut p,
            n,
            seed,
            base,
            &default_node,
            &default_link,
            &machines,
            &mut nodes,
            &mut names,
        )
    });
    let generated = generated.unwrap_or_default();

    let links = get("links").map(|(_, n)| link_defs(&mut p, n, &default_link, &names, &nodes));
    let mut links = links.unwrap_or_default();
    match links.is_empty() {
        true => links = generated.links, // (not copied: a generated lab's millions)
        false => links.extend(generated.links),
    }
    unique_link_names(&mut p, &links);
    let mut segments = Vec::new();
    if let Some((_, n)) = get("segments") {
        for (sname, smark, def) in p.map(n, "segments", &[]) {
            segments.push(segment(&mut p, sname, smark, def, &names, base));
        }
    }
    for (sname, smark, def) in &generated.segments {
        segments.push(segment(&mut p, sname, *smark, def, &names, base));
    }
    let events = get("events").map(|(_, n)| events(&mut p, n)).unwrap_or_default();
    let expects = get("expect").map(|(_, n)| expects(&mut p, n)).unwrap_or_default();
    let diverts = get("divert")
        .filter(|(m, _)| p.reach(crate::Reach::Divert, *m, "divert"))
        .map(|(_, n)| divert::diverts(&mut p, n))
        .unwrap_or_default();
    let fidelity = get("fidelity").map(|(_, n)| fidelity(&mut p, n)).unwrap_or_default();
    // The machine in reach of every node: refused to a tenant as `kind: host` is.
    let mgmt_mark = get("mgmt").map(|(m, _)| m).unwrap_or(root.mark);
    let mgmt = get("mgmt")
        .filter(|(m, _)| p.reach(crate::Reach::Host, *m, "mgmt"))
        .and_then(|(_, n)| addressing::mgmt(&mut p, n));
    // A size of at least `min` (said as `least`), or `default` when not given.
    let mut size = |key: &str, min: u64, least: &str, default: u64| {
        get(key)
            .and_then(|(_, n)| {
                p.scalar(n, key, |s| match units::size_bytes(s) {
                    Ok(b) if b < min => Err(format!("{key} must be at least {least}, got '{s}'")),
                    r => r,
                })
            })
            .unwrap_or(default)
    };
    let storage_bytes =
        size("storage", crate::MIN_STORAGE_BYTES, "16MiB", crate::DEFAULT_STORAGE_BYTES);
    let log_bytes = size("logs", crate::MIN_LOG_BYTES, "64KiB", crate::DEFAULT_LOG_BYTES);
    if let (false, false, Some((mark, _))) =
        (diverts.is_empty(), machines.is_empty(), get("divert"))
    {
        p.err(mark, "divert", "diverted paths take the controller's machine's traffic: not in labs across machines yet");
    }
    if p.errors.is_empty() {
        Ok(Scenario {
            name,
            seed,
            nodes,
            links,
            segments,
            events,
            addressing,
            addressing_mark,
            static_routing,
            routing_mark,
            fidelity,
            storage_bytes,
            log_bytes,
            machines,
            diverts,
            confined: matches!(p.trust, crate::Trust::Tenant(_)),
            images: p.trust.image_policy(),
            mgmt,
            mgmt_mark,
            expects,
        })
    } else {
        Err(p.errors)
    }
}

/// The scenario's top-level keys.
const TOP_KEYS: &[&str] = &[
    "name",
    "seed",
    "defaults",
    "nodes",
    "links",
    "segments",
    "events",
    "addressing",
    "routing",
    "fidelity",
    "storage",
    "logs",
    "machines",
    "divert",
    "mgmt",
    "expect",
    "generate",
];

/// The scenario's `links:`, with `defaults.link` (`default_link`) under each.
fn link_defs(
    p: &mut P,
    n: &Node,
    default_link: &ImpairmentsPatch,
    names: &HashMap<String, usize>,
    nodes: &[NodeDef],
) -> Vec<LinkDef> {
    let mut link_keys: Vec<&str> = vec!["endpoints", "name", "weight", "forward", "reverse"];
    link_keys.extend_from_slice(IMPAIRMENT_KEYS);
    let mut links = Vec::new();
    for (i, l) in p.seq(n, "links").iter().enumerate() {
        if let Some(link) = link_def(p, i, l, &link_keys, default_link, names, nodes) {
            links.push(link);
        }
    }
    links
}

/// The scenario's `events:`.
fn events(p: &mut P, n: &Node) -> Vec<EventDef> {
    let mut events = Vec::new();
    for (i, e) in p.seq(n, "events").iter().enumerate() {
        if let Some(ev) = event(p, e, &format!("events[{i}]")) {
            events.push(ev);
        }
    }
    events
}

/// The scenario's `expect:` (its checks).
fn expects(p: &mut P, n: &Node) -> Vec<crate::expect::ExpectDef> {
    let mut expects = Vec::new();
    for (i, e) in p.seq(n, "expect").iter().enumerate() {
        expects.extend(expect::expectation(p, e, &format!("expect[{i}]")));
    }
    expects
}

/// The scenario's YAML document (an empty one, or one that does not parse, is an error).
fn document(text: &str) -> Result<Node, Vec<Error>> {
    match yaml::parse(text) {
        Ok(Some(root)) => Ok(root),
        Ok(None) => Err(vec![Error {
            line: 1,
            col: 1,
            field: String::new(),
            message: "the scenario is empty".into(),
        }]),
        Err(e) => Err(vec![Error {
            line: e.mark.line,
            col: e.mark.col,
            field: String::new(),
            message: format!("YAML syntax error: {}", e.message),
        }]),
    }
}

/// The lab's name: the command line's, the scenario's `name:`, or made from the
/// file's name (`stem`).
fn lab_name(
    p: &mut P,
    given: Option<&str>,
    written: Option<&Node>,
    stem: &str,
    mark: Mark,
) -> String {
    match (given, written) {
        (Some(n), _) => {
            if let Err(m) = valid_lab_name(n) {
                p.err(Mark::default(), "--name", m);
            }
            n.to_string()
        }
        (None, Some(n)) => {
            p.scalar(n, "name", |s| valid_lab_name(s).map(|_| s.to_string())).unwrap_or_default()
        }
        (None, None) => {
            let n: String = stem
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' })
                .take(32)
                .collect();
            if valid_lab_name(&n).is_err() {
                p.err(
                    mark,
                    "name",
                    format!("no 'name' given and the file name '{stem}' does not make a lab name"),
                );
            }
            n
        }
    }
}

/// `defaults:` — of every link's impairments and every node's parts.
fn defaults(p: &mut P, given: Option<&Node>, base: Option<&Path>) -> (ImpairmentsPatch, NodeParts) {
    let mut default_link = ImpairmentsPatch::default();
    let mut default_node = NodeParts::default();
    if let Some(d) = given {
        for (k, _, v) in p.map(d, "defaults", &["link", "node"]) {
            if k == "link" {
                let entries = p.map(v, "defaults.link", IMPAIRMENT_KEYS);
                default_link = impairments(p, &entries, "defaults.link");
            } else {
                default_node = node_parts(
                    p,
                    v,
                    "defaults.node",
                    base,
                    &node::NODE_KEYS
                        .iter()
                        .copied()
                        .filter(|k| !node::NOT_IN_DEFAULTS.contains(k))
                        .collect::<Vec<_>>(),
                );
            }
        }
    }
    (default_link, default_node)
}

/// `nodes:` — each node, and each name's place.
fn node_defs(
    p: &mut P,
    given: Option<(Mark, &Node)>,
    mark: Mark,
    base: Option<&Path>,
    default_node: &NodeParts,
    machines: &[crate::Machine],
) -> (Vec<NodeDef>, HashMap<String, usize>) {
    let mut nodes = Vec::new();
    let mut names: HashMap<String, usize> = HashMap::new();
    match given {
        None => p.err(mark, "nodes", "a scenario needs 'nodes'"),
        Some((m, n)) => {
            let entries = p.map(n, "nodes", &[]);
            if entries.is_empty() && p.errors.is_empty() {
                p.err(m, "nodes", "no nodes are defined");
            }
            for (nname, nmark, def) in entries {
                if let Some(n) =
                    node_def(p, nname, nmark, def, base, default_node, machines, &nodes)
                {
                    names.insert(nname.to_string(), nodes.len());
                    nodes.push(n);
                }
            }
        }
    }
    (nodes, names)
}

/// Parse impairments given as `(key, value)` pairs, e.g. from command-line flags
/// (`("delay", "20ms")`, `("loss", "{model: gilbert-elliott, p: 1%}")`), with the same
/// rules and messages as in a scenario file. `bandwidth: unlimited` lifts a rate limit.
pub fn impairment_patch(pairs: &[(&str, &str)]) -> Result<ImpairmentsPatch, String> {
    let mut p = P::new(crate::Trust::Owner, None);
    let mut patch = ImpairmentsPatch::default();
    for (key, value) in pairs {
        if !IMPAIRMENT_KEYS.contains(key) {
            return Err(format!(
                "unknown impairment '{key}', expected one of: {}",
                IMPAIRMENT_KEYS.join(", ")
            ));
        }
        if *key == "bandwidth" && matches!(*value, "unlimited" | "none") {
            patch.rate_bps = Some(None);
            continue;
        }
        let node = match yaml::parse(value) {
            Ok(Some(n)) => n,
            Ok(None) => return Err(format!("--{key} needs a value")),
            Err(e) => return Err(format!("--{key} '{value}': {}", e.message)),
        };
        let entries: Entries = vec![(key, Mark::default(), &node)];
        let one = impairments(&mut p, &entries, key);
        if let Some(e) = p.errors.first() {
            return Err(format!("--{key}: {}", e.message));
        }
        patch = patch.merged(&one);
    }
    Ok(patch)
}

/// `machines:` (at `mark`): names and agents' addresses.
fn machines(p: &mut P, mark: Mark, n: &Node) -> Vec<crate::Machine> {
    let mut machines: Vec<crate::Machine> = Vec::new();
    for (mname, mmark, v) in p.map(n, "machines", &[]) {
        let f = join("machines", mname);
        if let Err(m) = valid_machine_name(mname) {
            p.err(mmark, &f, m);
            continue;
        }
        if let Some(address) = p.scalar(v, &f, crate::Machine::parse_address) {
            machines.push(crate::Machine { name: mname.to_string(), address });
        }
    }
    if machines.len() > crate::MAX_MACHINES {
        p.err(
            mark,
            "machines",
            format!(
                "a lab spans at most {} machines, this one names {}",
                crate::MAX_MACHINES,
                machines.len()
            ),
        );
    }
    machines
}

/// `fidelity:`: the monitor's thresholds.
fn fidelity(p: &mut P, n: &Node) -> crate::FidelityThresholds {
    let mut fidelity = crate::FidelityThresholds::default();
    for (k, _, v) in
        p.map(n, "fidelity", &["late", "degraded", "invalid", "min_frames", "busy", "cpu_pressure"])
    {
        let f = join("fidelity", k);
        match k {
            "late" => {
                fidelity.late_ns = p.scalar(v, &f, units::duration_ns).unwrap_or(fidelity.late_ns)
            }
            "degraded" => {
                fidelity.degraded_fraction =
                    p.scalar(v, &f, units::percent).unwrap_or(fidelity.degraded_fraction)
            }
            "invalid" => {
                fidelity.invalid_fraction =
                    p.scalar(v, &f, units::percent).unwrap_or(fidelity.invalid_fraction)
            }
            "busy" => {
                fidelity.busy_fraction =
                    p.scalar(v, &f, units::percent).unwrap_or(fidelity.busy_fraction)
            }
            "cpu_pressure" => {
                fidelity.cpu_pressure =
                    p.scalar(v, &f, units::percent).unwrap_or(fidelity.cpu_pressure)
            }
            _ => {
                fidelity.min_frames = p
                    .scalar(v, &f, integer::<u64>("a number of frames"))
                    .unwrap_or(fidelity.min_frames)
            }
        }
    }
    if fidelity.invalid_fraction < fidelity.degraded_fraction {
        p.err(n.mark, "fidelity", "'invalid' must be at least 'degraded'");
    }
    fidelity
}
