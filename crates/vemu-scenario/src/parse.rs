//! From the marked YAML tree to a validated [`Scenario`], collecting every error.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use vemu_link::{Chance, Distribution, Impairments, ImpairmentsPatch, Jitter, Loss, QueueLimit, Reorder, Shaper};

use crate::units;

mod divert;
mod qos;
mod wireless;
pub use wireless::WirelessDef;
use crate::yaml::{self, Mark, Node, Value};
use crate::names::{valid_lab_name, valid_machine_name, valid_medium_name, valid_node_name};
use crate::Error;

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
}

#[derive(Debug, Clone)]
pub struct NodeDef {
    pub name: String,
    pub mark: Mark,
    pub run: Vec<String>,
    pub routes: Vec<RouteDef>,
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
    pub mark: Mark,
    pub field: String,
}

#[derive(Debug, Clone)]
pub struct LinkDef {
    pub name: Option<String>,
    pub mark: Mark,
    pub field: String,
    pub ends: [EndDef; 2],
    pub forward: Impairments,
    pub reverse: Impairments,
    pub weight: u32,
}

#[derive(Debug, Clone)]
pub struct EndDef {
    pub node: usize,
    pub iface: Option<String>,
    pub ips: Vec<IpNet>,
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

const IMPAIRMENT_KEYS: &[&str] =
    &["bandwidth", "delay", "jitter", "loss", "duplicate", "corrupt", "reorder", "queue", "mtu", "qos", "shaper"];

fn valid_iface_name(name: &str) -> Result<(), String> {
    // The kernel refuses these as device names ('all' and 'default' are the names of
    // its per-namespace settings directories).
    let reserved = ["lo", ".", "..", "all", "default"];
    let ok = !name.is_empty()
        && name.len() <= 15
        && !reserved.contains(&name)
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
    if ok {
        Ok(())
    } else {
        Err(format!("interface name '{name}' must be 1-15 letters, digits, '-', '_' or '.' (and not lo, ., .., all or default)"))
    }
}

struct P {
    errors: Vec<Error>,
    /// Whose scenario it is: what reaches beyond its nodes is refused to a tenant.
    trust: crate::Trust,
}

type Entries<'n> = Vec<(&'n str, Mark, &'n Node)>;

impl P {
    fn err(&mut self, mark: Mark, field: &str, message: impl Into<String>) {
        self.errors.push(Error { line: mark.line, col: mark.col, field: field.to_string(), message: message.into() });
    }

    /// Whether the scenario may use `r` (at `field`); when it may not, says so there.
    fn reach(&mut self, r: crate::Reach, mark: Mark, field: &str) -> bool {
        match self.trust.refusal(r) {
            None => true,
            Some(why) => {
                self.err(mark, field, why);
                false
            }
        }
    }

    /// The entries of a mapping (null counts as empty), reporting unknown and repeated keys.
    fn map<'n>(&mut self, node: &'n Node, field: &str, allowed: &[&str]) -> Entries<'n> {
        if node.is_null() {
            return Vec::new();
        }
        let Value::Map(items) = &node.value else {
            self.err(node.mark, field, format!("expected a mapping, found {}", node.kind()));
            return Vec::new();
        };
        let mut seen: HashMap<&str, Mark> = HashMap::new();
        let mut out = Vec::new();
        for (k, kmark, v) in items {
            let sub = join(field, k);
            if !allowed.is_empty() && !allowed.contains(&k.as_str()) {
                self.err(*kmark, &sub, format!("unknown field '{k}', expected one of: {}", allowed.join(", ")));
                continue;
            }
            if let Some(first) = seen.insert(k, *kmark) {
                self.err(*kmark, &sub, format!("'{k}' is given twice (first on line {})", first.line));
                continue;
            }
            out.push((k.as_str(), *kmark, v));
        }
        out
    }

    fn seq<'n>(&mut self, node: &'n Node, field: &str) -> &'n [Node] {
        match &node.value {
            _ if node.is_null() => &[],
            Value::Seq(items) => items,
            _ => {
                self.err(node.mark, field, format!("expected a list, found {}", node.kind()));
                &[]
            }
        }
    }

    fn string(&mut self, node: &Node, field: &str) -> Option<String> {
        match &node.value {
            Value::Scalar(s, _) if !node.is_null() => Some(s.clone()),
            _ => {
                self.err(node.mark, field, format!("expected a text value, found {}", node.kind()));
                None
            }
        }
    }

    /// Parse a scalar with `f`, reporting its message at the node.
    fn scalar<T>(&mut self, node: &Node, field: &str, f: impl FnOnce(&str) -> Result<T, String>) -> Option<T> {
        let s = self.string(node, field)?;
        match f(&s) {
            Ok(v) => Some(v),
            Err(m) => {
                self.err(node.mark, field, m);
                None
            }
        }
    }

    /// One string or a list of strings.
    fn strings(&mut self, node: &Node, field: &str) -> Vec<String> {
        match &node.value {
            Value::Seq(items) => items
                .iter()
                .enumerate()
                .filter_map(|(i, n)| self.string(n, &format!("{field}[{i}]")))
                .collect(),
            _ if node.is_null() => Vec::new(),
            _ => self.string(node, field).into_iter().collect(),
        }
    }
}

fn join(field: &str, key: &str) -> String {
    if field.is_empty() {
        key.to_string()
    } else {
        format!("{field}.{key}")
    }
}

fn integer<T: std::str::FromStr>(what: &'static str) -> impl Fn(&str) -> Result<T, String> {
    move |s: &str| s.trim().parse::<T>().map_err(|_| format!("expected {what}, got '{s}'"))
}

/// A fraction written as a percentage, or an integer correlation like netem's.
fn chance(p: &mut P, node: &Node, field: &str, gap_ok: bool) -> Option<(Chance, Option<u32>)> {
    if let Value::Map(_) = node.value {
        let allowed: &[&str] = if gap_ok { &["probability", "correlation", "gap"] } else { &["probability", "correlation"] };
        let mut c = Chance::default();
        let mut gap = None;
        let mut have_prob = false;
        for (k, _, v) in p.map(node, field, allowed) {
            let f = join(field, k);
            match k {
                "probability" => {
                    have_prob = true;
                    c.probability = p.scalar(v, &f, units::percent)?;
                }
                "correlation" => c.correlation = p.scalar(v, &f, units::percent)?,
                "gap" => gap = Some(p.scalar(v, &f, integer::<u32>("a whole number of frames"))?),
                _ => unreachable!(),
            }
        }
        if !have_prob {
            p.err(node.mark, field, "missing 'probability'");
            return None;
        }
        Some((c, gap))
    } else {
        let prob = p.scalar(node, field, units::percent)?;
        Some((Chance { probability: prob, correlation: 0.0 }, None))
    }
}

fn loss(p: &mut P, node: &Node, field: &str) -> Option<Loss> {
    if !matches!(node.value, Value::Map(_)) {
        let rate = p.scalar(node, field, units::percent)?;
        return Some(if rate == 0.0 { Loss::None } else { Loss::Bernoulli { rate, correlation: 0.0 } });
    }
    let entries = p.map(node, field, &["model", "rate", "correlation", "p", "r", "h", "k"]);
    let mut vals: HashMap<&str, f64> = HashMap::new();
    let mut model = None;
    let mut ok = true;
    for (k, kmark, v) in &entries {
        let f = join(field, k);
        if *k == "model" {
            model = p.string(v, &f).map(|m| (m, v.mark));
        } else if let Some(x) = p.scalar(v, &f, units::percent) {
            vals.insert(k, x);
        } else {
            ok = false;
        }
        let _ = kmark;
    }
    let (model, mmark) = match model {
        Some(m) => m,
        None => {
            p.err(node.mark, field, "missing 'model' (bernoulli or gilbert-elliott)");
            return None;
        }
    };
    let keys: &[&str] = match model.as_str() {
        "bernoulli" => &["rate", "correlation"],
        "gilbert-elliott" => &["p", "r", "h", "k"],
        other => {
            p.err(mmark, &join(field, "model"), format!("unknown loss model '{other}', expected bernoulli or gilbert-elliott"));
            return None;
        }
    };
    for (k, kmark, _) in &entries {
        if *k != "model" && !keys.contains(k) {
            p.err(*kmark, &join(field, k), format!("'{k}' does not belong to the {model} model (it takes {})", keys.join(", ")));
            ok = false;
        }
    }
    if !ok {
        return None;
    }
    if model == "bernoulli" {
        let Some(&rate) = vals.get("rate") else {
            p.err(node.mark, field, "the bernoulli model needs 'rate'");
            return None;
        };
        return Some(Loss::Bernoulli { rate, correlation: vals.get("correlation").copied().unwrap_or(0.0) });
    }
    let Some(&gp) = vals.get("p") else {
        p.err(node.mark, field, "the gilbert-elliott model needs 'p' (probability of going from Good to Bad)");
        return None;
    };
    // netem's defaults: r = 1 - p, 1-h = 100% (h = 0), 1-k = 0% (k = 1).
    Some(Loss::GilbertElliott {
        p: gp,
        r: vals.get("r").copied().unwrap_or(1.0 - gp),
        h: vals.get("h").copied().unwrap_or(0.0),
        k: vals.get("k").copied().unwrap_or(1.0),
    })
}

fn jitter(p: &mut P, node: &Node, field: &str) -> Option<Jitter> {
    if !matches!(node.value, Value::Map(_)) {
        let amount_ns = p.scalar(node, field, units::duration_ns)?;
        return Some(Jitter { amount_ns, ..Default::default() });
    }
    let mut j = Jitter::default();
    let mut have_amount = false;
    for (k, _, v) in p.map(node, field, &["amount", "distribution", "correlation"]) {
        let f = join(field, k);
        match k {
            "amount" => {
                have_amount = true;
                j.amount_ns = p.scalar(v, &f, units::duration_ns)?;
            }
            "distribution" => {
                j.distribution = p.scalar(v, &f, |s| match s {
                    "uniform" => Ok(Distribution::Uniform),
                    "normal" => Ok(Distribution::Normal),
                    "pareto" => Ok(Distribution::Pareto),
                    "paretonormal" => Ok(Distribution::Paretonormal),
                    _ => Err(format!("unknown distribution '{s}', expected uniform, normal, pareto or paretonormal")),
                })?
            }
            "correlation" => j.correlation = p.scalar(v, &f, units::percent)?,
            _ => unreachable!(),
        }
    }
    if !have_amount {
        p.err(node.mark, field, "missing 'amount'");
        return None;
    }
    Some(j)
}

fn queue(s: &str) -> Result<QueueLimit, String> {
    let t = s.trim();
    let count = t.strip_suffix("packets").or_else(|| t.strip_suffix("frames")).unwrap_or(t).trim();
    if let Ok(n) = count.parse::<u64>() {
        return Ok(QueueLimit::Packets(n));
    }
    units::size_bytes(t)
        .map(QueueLimit::Bytes)
        .map_err(|m| format!("{m} (or a number of packets, e.g. 100)"))
}

fn shaper(s: &str) -> Result<Shaper, String> {
    match s.trim() {
        "engine" => Ok(Shaper::Engine),
        "kernel" => Ok(Shaper::Kernel),
        other => Err(format!("'{other}' is not a shaper: engine (exact serialization, the default) or kernel (the kernel's token bucket)")),
    }
}

/// The impairment keys among `entries`, as a patch.
fn impairments(p: &mut P, entries: &Entries, field: &str) -> ImpairmentsPatch {
    let mut patch = ImpairmentsPatch::default();
    for (k, _, v) in entries {
        let f = join(field, k);
        match *k {
            "bandwidth" => patch.rate_bps = p.scalar(v, &f, units::rate_bps).map(Some),
            "delay" => patch.delay_ns = p.scalar(v, &f, units::duration_ns),
            "jitter" => patch.jitter = jitter(p, v, &f),
            "loss" => patch.loss = loss(p, v, &f),
            "duplicate" => patch.duplicate = chance(p, v, &f, false).map(|c| c.0),
            "corrupt" => patch.corrupt = chance(p, v, &f, false).map(|c| c.0),
            "reorder" => {
                patch.reorder = chance(p, v, &f, true).map(|(c, gap)| Reorder {
                    probability: c.probability,
                    correlation: c.correlation,
                    gap: gap.unwrap_or(1),
                })
            }
            "queue" => patch.queue = p.scalar(v, &f, queue).map(Some),
            "mtu" => patch.mtu = p.scalar(v, &f, integer::<u32>("an MTU in bytes, e.g. 1500")).map(Some),
            "qos" => patch.qos = qos::qos(p, v, &f),
            "shaper" => patch.shaper = p.scalar(v, &f, shaper),
            _ => {}
        }
    }
    patch
}

fn ip_list(p: &mut P, node: &Node, field: &str) -> Vec<IpNet> {
    p.strings(node, field)
        .into_iter()
        .filter_map(|s| match s.parse::<IpNet>() {
            Ok(n) => Some(n),
            Err(_) => {
                p.err(node.mark, field, format!("'{s}' is not an address with a prefix length, e.g. 10.0.0.1/30"));
                None
            }
        })
        .collect()
}

fn mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split(':').collect();
    let bad = || format!("'{s}' is not a MAC address like 02:00:00:00:00:01");
    if parts.len() != 6 {
        return Err(bad());
    }
    let mut m = [0u8; 6];
    for (i, part) in parts.iter().enumerate() {
        m[i] = u8::from_str_radix(part, 16).map_err(|_| bad())?;
    }
    if m[0] & 1 == 1 {
        return Err(format!("'{s}' is a multicast MAC address"));
    }
    Ok(m)
}

/// One end of a link or a member of a segment: `node`, `node:iface`, or a mapping with
/// `node`, `iface`, `ip`, `mac` and the `extra` keys, whose entries are returned.
fn endpoint<'n>(
    p: &mut P,
    node: &'n Node,
    field: &str,
    names: &HashMap<String, usize>,
    extra: &[&str],
) -> Option<(EndDef, Entries<'n>)> {
    let mut rest = Vec::new();
    let (node_name, iface, ips, mac_addr) = if let Value::Map(_) = node.value {
        let mut n = None;
        let (mut iface, mut ips, mut m) = (None, Vec::new(), None);
        let mut allowed = vec!["node", "iface", "ip", "mac"];
        allowed.extend_from_slice(extra);
        for (k, kmark, v) in p.map(node, field, &allowed) {
            let f = join(field, k);
            match k {
                "node" => n = p.string(v, &f),
                "iface" => iface = p.scalar(v, &f, |s| valid_iface_name(s).map(|_| s.to_string())),
                "ip" => ips = ip_list(p, v, &f),
                "mac" => m = p.scalar(v, &f, mac),
                _ => rest.push((k, kmark, v)),
            }
        }
        let Some(n) = n else {
            p.err(node.mark, field, "missing 'node'");
            return None;
        };
        (n, iface, ips, m)
    } else {
        let s = p.string(node, field)?;
        match s.split_once(':') {
            Some((n, i)) => match valid_iface_name(i) {
                Ok(()) => (n.to_string(), Some(i.to_string()), Vec::new(), None),
                Err(m) => {
                    p.err(node.mark, field, m);
                    return None;
                }
            },
            None => (s, None, Vec::new(), None),
        }
    };
    let Some(&idx) = names.get(&node_name) else {
        let mut known: Vec<&str> = names.keys().map(|s| s.as_str()).collect();
        known.sort();
        p.err(node.mark, field, format!("unknown node '{node_name}' (nodes are: {})", known.join(", ")));
        return None;
    };
    Some((EndDef { node: idx, iface, ips, mac: mac_addr, mark: node.mark, field: field.to_string() }, rest))
}

/// Impairments from a patch over the neutral defaults, reporting impossible values.
fn finish_impairments(p: &mut P, patch: &ImpairmentsPatch, mark: Mark, field: &str) -> Impairments {
    let mut imp = Impairments::default();
    patch.apply_to(&mut imp);
    if let Err(m) = imp.validate() {
        p.err(mark, field, m);
    }
    imp
}

/// The two directions of a port from its impairment keys plus direction-specific
/// sub-mappings (`forward`/`reverse` on links, `egress`/`ingress` on segment members),
/// over `base`.
fn directions(p: &mut P, entries: &Entries, field: &str, base: [&ImpairmentsPatch; 2], keys: [&str; 2]) -> [ImpairmentsPatch; 2] {
    let both = impairments(p, entries, field);
    let mut dirs = [base[0].merged(&both), base[1].merged(&both)];
    for (k, _, v) in entries {
        if let Some(d) = keys.iter().position(|x| x == k) {
            let f = join(field, k);
            let sub = p.map(v, &f, IMPAIRMENT_KEYS);
            dirs[d] = dirs[d].merged(&impairments(p, &sub, &f));
        }
    }
    dirs
}

/// `0640`-style permission bits.
fn file_mode(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s.trim_start_matches("0o"), 8)
        .ok()
        .filter(|m| *m <= 0o7777)
        .ok_or_else(|| format!("'{s}' is not a file mode like 0644"))
}

/// Directories of a node that are private to it (and writable), where `files:` may go.
pub const PRIVATE_DIRS: &[&str] = &["/etc", "/var/lib", "/var/log", "/run"];

fn file_path(s: &str) -> Result<String, String> {
    let s = s.strip_prefix("/var/run/").map(|r| format!("/run/{r}")).unwrap_or_else(|| s.to_string());
    if !s.starts_with('/') || s.ends_with('/') || s.split('/').any(|c| c == ".." || c == ".") || s.contains("//") {
        return Err(format!("'{s}' is not an absolute path to a file"));
    }
    if s == "/etc/hosts" {
        return Err("/etc/hosts is written by vemu (every node's name and addresses)".into());
    }
    if !PRIVATE_DIRS.iter().any(|d| s.starts_with(&format!("{d}/"))) {
        return Err(format!("'{s}' is not in a node's private directories ({})", PRIVATE_DIRS.join(", ")));
    }
    Ok(s)
}

fn files(p: &mut P, node: &Node, field: &str, base: Option<&Path>) -> Vec<FileDef> {
    let mut out = Vec::new();
    for (path, kmark, v) in p.map(node, field, &[]) {
        let f = format!("{field}.{path}");
        let Some(path) = p.scalar(&Node { value: Value::Scalar(path.to_string(), false), mark: kmark }, &f, file_path) else {
            continue;
        };
        let mut def = FileDef { path, text: String::new(), verbatim: false, mode: 0o644, mark: kmark, field: f.clone() };
        if let Value::Map(_) = v.value {
            let mut have = false;
            for (k, _, x) in p.map(v, &f, &["content", "from", "template", "mode"]) {
                let kf = join(&f, k);
                match k {
                    "mode" => def.mode = p.scalar(x, &kf, file_mode).unwrap_or(0o644),
                    "content" => {
                        have = true;
                        def.text = p.string(x, &kf).unwrap_or_default();
                    }
                    _ => {
                        have = true;
                        def.verbatim = k == "from";
                        let Some(src) = p.string(x, &kf) else { continue };
                        if !p.reach(crate::Reach::From, x.mark, &kf) {
                            continue;
                        }
                        let full = base.map(|b| b.join(&src)).unwrap_or_else(|| src.clone().into());
                        match crate::read_limited(&full, crate::MAX_NODE_FILE_BYTES) {
                            Ok(t) => def.text = t,
                            Err(e) => p.err(x.mark, &kf, format!("cannot read {}: {e}", full.display())),
                        }
                    }
                }
            }
            if !have {
                p.err(v.mark, &f, "a file needs 'content', 'from' (copied as is) or 'template'");
            }
        } else {
            def.text = p.string(v, &f).unwrap_or_default();
        }
        out.push(def);
    }
    out
}

fn subnet_choice(p: &mut P, node: &Node, field: &str, v6: bool) -> SubnetChoice {
    let fam = if v6 { "IPv6" } else { "IPv4" };
    p.scalar(node, field, |s| match s {
        "none" | "off" | "false" => Ok(SubnetChoice::Off),
        "auto" => Ok(SubnetChoice::Auto),
        _ => match s.parse::<IpNet>() {
            Ok(n) if n.addr().is_ipv6() == v6 => Ok(SubnetChoice::Given(n.trunc())),
            _ => Err(format!("'{s}' is not an {fam} prefix (or 'none')")),
        },
    })
    .unwrap_or(SubnetChoice::Auto)
}

const SEGMENT_KEYS: &[&str] = &["kind", "members", "capacity", "weight", "aging", "snooping", "ipv4", "ipv6", "egress", "ingress"];

fn segment(p: &mut P, name: &str, mark: Mark, node: &Node, names: &HashMap<String, usize>, base: Option<&Path>) -> SegmentDef {
    let field = format!("segments.{name}");
    if let Err(m) = valid_medium_name("segment", name) {
        p.err(mark, &field, m);
    }
    let mut allowed = SEGMENT_KEYS.to_vec();
    allowed.extend_from_slice(IMPAIRMENT_KEYS);
    allowed.extend_from_slice(wireless::WIRELESS_KEYS);
    let entries = p.map(node, &field, &allowed);
    let kind = entries.iter().find(|e| e.0 == "kind").and_then(|(_, _, v)| {
        p.scalar(v, &join(&field, "kind"), |s| match s {
            "lan" | "wireless" => Ok(s.to_string()),
            _ => Err(format!("unknown segment kind '{s}', expected 'lan' or 'wireless'")),
        })
    });
    let is_wireless = kind.as_deref() == Some("wireless");
    for (k, kmark, _) in &entries {
        let (lan_only, radio_only) = (["capacity", "aging"].contains(k), wireless::WIRELESS_KEYS.contains(k));
        if (is_wireless && lan_only) || (!is_wireless && radio_only) {
            let other = if is_wireless { "lan" } else { "wireless" };
            p.err(*kmark, &join(&field, k), format!("'{k}' applies to 'kind: {other}' segments only"));
        }
    }
    let none = ImpairmentsPatch::default();
    let base_dirs = directions(p, &entries, &field, [&none, &none], ["egress", "ingress"]);
    let mut seg = SegmentDef {
        wireless: None,
        name: name.to_string(),
        mark,
        field: field.clone(),
        members: Vec::new(),
        capacity_bps: None,
        aging_ns: vemu_switch::DEFAULT_AGING_NS,
        // The switch is the LAN's snooping querier unless told otherwise: the nodes'
        // IPv6 start-up chatter (MLD reports) and neighbour discovery then reach only
        // the nodes concerned, not every port of a big LAN.
        snooping: vemu_switch::Snooping::Querier,
        weight: 1,
        subnets: [SubnetChoice::Auto, SubnetChoice::Auto],
    };
    let mut saw_members = false;
    let mut radio_entries = Vec::new();
    for (k, _, v) in &entries {
        let f = join(&field, k);
        match *k {
            "capacity" => seg.capacity_bps = p.scalar(v, &f, units::rate_bps),
            "aging" => seg.aging_ns = p.scalar(v, &f, units::duration_ns).unwrap_or(seg.aging_ns),
            "snooping" if is_wireless => {
                // A radio's group filter at each receiver: on, or off (every receiver in
                // range takes every frame). There is no switch to be a querier.
                seg.snooping = p
                    .scalar(v, &f, |s| match s {
                        "off" | "false" => Ok(vemu_switch::Snooping::Off),
                        "on" | "true" => Ok(vemu_switch::Snooping::On),
                        _ => Err(format!("expected 'on' (a receiver takes a group's frames only if it joined the group) or 'off' (every receiver in range takes every frame) on a wireless segment, got '{s}'")),
                    })
                    .unwrap_or(seg.snooping)
            }
            "snooping" => {
                seg.snooping = p
                    .scalar(v, &f, |s| match s {
                        "off" | "false" => Ok(vemu_switch::Snooping::Off),
                        "on" | "true" => Ok(vemu_switch::Snooping::On),
                        "querier" => Ok(vemu_switch::Snooping::Querier),
                        _ => Err(format!("expected 'on' (snoop while a querier is heard), 'querier' (the switch is one) or 'off' (flood all multicast), got '{s}'")),
                    })
                    .unwrap_or(seg.snooping)
            }
            "weight" => seg.weight = p.scalar(v, &f, positive).unwrap_or(1),
            "ipv4" => seg.subnets[0] = subnet_choice(p, v, &f, false),
            "ipv6" => seg.subnets[1] = subnet_choice(p, v, &f, true),
            "members" => {
                saw_members = true;
                let items = p.seq(v, &f);
                if items.len() < 2 {
                    p.err(v.mark, &f, format!("a segment needs at least 2 members, found {}", items.len()));
                }
                let mut member_keys = vec!["vlan", "egress", "ingress"];
                member_keys.extend_from_slice(IMPAIRMENT_KEYS);
                member_keys.extend_from_slice(wireless::MEMBER_KEYS);
                for (j, m) in items.iter().enumerate() {
                    let mf = format!("{f}[{j}]");
                    let Some((end, rest)) = endpoint(p, m, &mf, names, &member_keys) else { continue };
                    let mut vlan = vemu_switch::DEFAULT_VLAN;
                    for (k, kmark, x) in &rest {
                        let wrong_kind = if is_wireless { *k == "vlan" } else { wireless::MEMBER_KEYS.contains(k) };
                        if wrong_kind {
                            let other = if is_wireless { "lan" } else { "wireless" };
                            p.err(*kmark, &join(&mf, k), format!("'{k}' applies to members of 'kind: {other}' segments only"));
                        } else if *k == "vlan" {
                            vlan = p
                                .scalar(x, &join(&mf, k), |s| match s.parse::<u16>() {
                                    Ok(v @ 1..=4094) => Ok(v),
                                    _ => Err(format!("expected a VLAN number from 1 to 4094, got '{s}'")),
                                })
                                .unwrap_or(vlan);
                        }
                    }
                    let [eg, ing] = directions(p, &rest, &mf, [&base_dirs[0], &base_dirs[1]], ["egress", "ingress"]);
                    let egress = finish_impairments(p, &eg, m.mark, &format!("{mf} (egress)"));
                    let ingress = finish_impairments(p, &ing, m.mark, &format!("{mf} (ingress)"));
                    if let Some(prev) = seg.members.iter().find(|x| x.end.node == end.node) {
                        p.err(end.mark, &mf, format!("node is already a member of this segment (line {})", prev.end.mark.line));
                        continue;
                    }
                    let node_name = names.iter().find(|(_, &i)| i == end.node).map(|(n, _)| n.as_str()).unwrap_or("");
                    radio_entries.push((end.node, node_name, m.mark, rest.into_iter().filter(|e| wireless::MEMBER_KEYS.contains(&e.0)).collect::<Entries>()));
                    seg.members.push(MemberDef { end, vlan, egress, ingress });
                }
            }
            _ => {}
        }
    }
    if !saw_members {
        p.err(mark, &field, "a segment needs 'members: [node, node, ...]'");
    }
    if is_wireless {
        seg.wireless = Some(wireless::wireless(p, &entries, &field, base, &radio_entries));
    }
    seg
}

fn patch_of(p: &mut P, node: &Node, field: &str) -> ImpairmentsPatch {
    let entries = p.map(node, field, IMPAIRMENT_KEYS);
    let patch = impairments(p, &entries, field);
    let mut imp = Impairments::default();
    patch.apply_to(&mut imp);
    if let Err(m) = imp.validate() {
        p.err(node.mark, field, m);
    }
    patch
}

/// One entry of `events:`.
fn event(p: &mut P, node: &Node, field: &str) -> Option<EventDef> {
    use crate::{EventAction, EventTarget, TimedEvent};
    let entries = p.map(node, field, &["at", "every", "until", "link", "node", "direction", "set", "state", "ramp", "cycle", "run", "move"]);
    let (mut at, mut every, mut until) = (None, None, None);
    let (mut link, mut target_node, mut direction) = (None, None, crate::Direction::Both);
    let mut actions: Vec<(&str, EventAction)> = Vec::new();
    let mut state = None;
    for (k, _, v) in &entries {
        let f = join(field, k);
        match *k {
            "at" => at = p.scalar(v, &f, units::duration_ns),
            "every" => {
                // A shorter period would keep a core busy for the lab's life.
                every = p.scalar(v, &f, |s| match units::duration_ns(s) {
                    Ok(n) if n < 10_000_000 => Err(format!("'every' must be at least 10ms, got '{s}'")),
                    r => r,
                })
            }
            "until" => until = p.scalar(v, &f, units::duration_ns),
            "link" => link = p.string(v, &f),
            "node" => target_node = p.string(v, &f),
            "direction" => {
                direction = p
                    .scalar(v, &f, |s| match s {
                        "both" => Ok(crate::Direction::Both),
                        "forward" => Ok(crate::Direction::Forward),
                        "reverse" => Ok(crate::Direction::Reverse),
                        _ => Err(format!("expected both, forward or reverse, got '{s}'")),
                    })
                    .unwrap_or_default()
            }
            "set" => actions.push(("set", EventAction::Set(patch_of(p, v, &f)))),
            "state" => state = p.string(v, &f).map(|s| (s, v.mark)),
            "run" => {
                if let Some(c) = p.string(v, &f) {
                    actions.push(("run", EventAction::Run(c)));
                }
            }
            "move" => {
                // `[x, y]`, or `{to: [x, y], speed: 5}` (m/s) to go there at that speed.
                let (mut to, mut speed) = (None, None);
                if let Value::Map(_) = v.value {
                    for (mk, _, mv) in p.map(v, &f, &["to", "speed"]) {
                        let mf = join(&f, mk);
                        match mk {
                            "to" => to = wireless::position(p, mv, &mf),
                            _ => {
                                speed = p.scalar(mv, &mf, wireless::speed_mps)
                            }
                        }
                    }
                } else {
                    to = wireless::position(p, v, &f);
                }
                match to {
                    Some(at) => actions.push(("move", EventAction::Move { x_m: at.x, y_m: at.y, speed_mps: speed })),
                    None if p.errors.is_empty() => p.err(v.mark, &f, "a move needs 'to', e.g. move: {to: [500, 100], speed: 5}"),
                    None => {}
                }
            }
            "cycle" => {
                let items = p.seq(v, &f);
                if items.len() < 2 {
                    p.err(v.mark, &f, "a cycle needs at least 2 entries");
                }
                let patches = items.iter().enumerate().map(|(j, x)| patch_of(p, x, &format!("{f}[{j}]"))).collect();
                actions.push(("cycle", EventAction::Cycle(patches)));
            }
            "ramp" => {
                let mut from = None;
                let mut to = None;
                let (mut over, mut step) = (None, 1_000_000_000);
                for (rk, _, rv) in p.map(v, &f, &["from", "to", "over", "step"]) {
                    let rf = join(&f, rk);
                    match rk {
                        "from" => from = Some(patch_of(p, rv, &rf)),
                        "to" => to = Some(patch_of(p, rv, &rf)),
                        "over" => over = p.scalar(rv, &rf, units::duration_ns),
                        "step" => {
                            step = p
                                .scalar(rv, &rf, |s| match units::duration_ns(s) {
                                    Ok(n) if n >= 10_000_000 => Ok(n),
                                    Ok(_) => Err("a ramp step must be at least 10ms".into()),
                                    Err(e) => Err(e),
                                })
                                .unwrap_or(step)
                        }
                        _ => unreachable!(),
                    }
                }
                match (from, to, over) {
                    (Some(from), Some(to), Some(over_ns)) => {
                        if let Err(m) = ImpairmentsPatch::interpolate(&from, &to, 0.0) {
                            p.err(v.mark, &f, m);
                        }
                        actions.push(("ramp", EventAction::Ramp { from, to, over_ns, step_ns: step }));
                    }
                    _ => p.err(v.mark, &f, "a ramp needs 'from', 'to' and 'over' (e.g. {from: {delay: 10ms}, to: {delay: 200ms}, over: 60s})"),
                }
            }
            _ => unreachable!(),
        }
    }
    let target = match (link, target_node) {
        (Some(l), None) => EventTarget::Link { spec: l, direction },
        (None, Some(n)) => EventTarget::Node(n),
        _ => {
            p.err(node.mark, field, "an event needs either 'link' (a link or LAN port) or 'node'");
            return None;
        }
    };
    if let Some((st, mark)) = state {
        let up = match (&target, st.as_str()) {
            (EventTarget::Link { .. }, "up") | (EventTarget::Node(_), "start") => true,
            (EventTarget::Link { .. }, "down") | (EventTarget::Node(_), "stop") => false,
            (EventTarget::Link { .. }, _) => {
                p.err(mark, &join(field, "state"), format!("a link's state is 'up' or 'down', got '{st}'"));
                return None;
            }
            (EventTarget::Node(_), _) => {
                p.err(mark, &join(field, "state"), format!("a node's state is 'start' or 'stop', got '{st}'"));
                return None;
            }
        };
        actions.push(("state", EventAction::State(up)));
    }
    let action = match actions.len() {
        1 => actions.pop().unwrap(),
        0 => {
            p.err(node.mark, field, "an event needs one action: set, state, ramp, cycle, run or move");
            return None;
        }
        _ => {
            let names: Vec<&str> = actions.iter().map(|a| a.0).collect();
            p.err(node.mark, field, format!("an event has one action, found {}", names.join(", ")));
            return None;
        }
    };
    let ok_for = match (&target, action.0) {
        (EventTarget::Node(_), "run" | "state" | "move") => true,
        (EventTarget::Link { .. }, "set" | "state" | "ramp" | "cycle") => true,
        _ => false,
    };
    if !ok_for {
        p.err(node.mark, field, format!("'{}' does not apply to a {}", action.0, if matches!(target, EventTarget::Node(_)) { "node" } else { "link" }));
        return None;
    }
    if matches!(action.1, EventAction::Cycle(_)) && every.is_none() {
        p.err(node.mark, field, "a cycle needs 'every' (each firing applies the next entry)");
    }
    let Some(at_ns) = at.or(every.map(|_| 0)) else {
        p.err(node.mark, field, "an event needs 'at' (or 'every')");
        return None;
    };
    if until.is_some() && every.is_none() {
        p.err(node.mark, field, "'until' goes with 'every'");
    }
    Some(EventDef { mark: node.mark, field: field.to_string(), event: TimedEvent { at_ns, every_ns: every, until_ns: until, target, action: action.1 } })
}

fn positive(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(w) if w > 0 => Ok(w),
        _ => Err(format!("expected a whole number above 0, got '{s}'")),
    }
}

fn route(p: &mut P, node: &Node, field: &str) -> Option<RouteDef> {
    let mut dst = None;
    let (mut via, mut dev) = (None, None);
    for (k, _, v) in p.map(node, field, &["dst", "via", "dev"]) {
        let f = join(field, k);
        match k {
            "dst" => {
                dst = p.scalar(v, &f, |s| match s {
                    "default" => Ok("0.0.0.0/0".parse().unwrap()),
                    "default6" => Ok("::/0".parse().unwrap()),
                    _ => s.parse::<IpNet>().map(|n| n.trunc()).map_err(|_| format!("'{s}' is not a prefix like 10.1.0.0/16 or 'default'")),
                })
            }
            "via" => via = p.scalar(v, &f, |s| s.parse::<IpAddr>().map_err(|_| format!("'{s}' is not an IP address"))),
            "dev" => dev = p.scalar(v, &f, |s| valid_iface_name(s).map(|_| s.to_string())),
            _ => unreachable!(),
        }
    }
    let Some(dst) = dst else {
        p.err(node.mark, field, "a route needs 'dst'");
        return None;
    };
    if via.is_none() && dev.is_none() {
        p.err(node.mark, field, "a route needs 'via' or 'dev'");
        return None;
    }
    if let Some(v) = via {
        if v.is_ipv4() != dst.addr().is_ipv4() {
            p.err(node.mark, field, format!("'via {v}' is not of the same IP family as 'dst {dst}'"));
            return None;
        }
    }
    Some(RouteDef { dst, via, dev, mark: node.mark, field: field.to_string() })
}

fn addressing(p: &mut P, node: &Node, field: &str) -> Addressing {
    let mut a = Addressing::default();
    for (k, _, v) in p.map(node, field, &["ipv4", "ipv4_prefix", "ipv6", "ipv6_prefix", "loopback_ipv4", "loopback_ipv6"]) {
        let f = join(field, k);
        let off = matches!(v.as_str(), Some("none") | Some("false") | Some("off"));
        match k {
            "ipv4" if off => a.ipv4 = None,
            "ipv6" if off => {
                a.ipv6 = None;
                a.ipv6_link_local = false;
            }
            "ipv6" if v.as_str() == Some("link-local") => a.ipv6 = None,
            "ipv4" => {
                a.ipv4 = p.scalar(v, &f, |s| s.parse::<Ipv4Net>().map(|n| n.trunc()).map_err(|_| format!("'{s}' is not an IPv4 prefix like 10.0.0.0/16 (or 'none')")))
            }
            "ipv6" => {
                a.ipv6 = p.scalar(v, &f, |s| s.parse::<Ipv6Net>().map(|n| n.trunc()).map_err(|_| format!("'{s}' is not an IPv6 prefix like fd00::/48 (or 'link-local', or 'none')")))
            }
            "loopback_ipv4" if off => a.loopback_ipv4 = None,
            "loopback_ipv6" if off => a.loopback_ipv6 = None,
            "loopback_ipv4" => {
                a.loopback_ipv4 = p.scalar(v, &f, |s| s.parse::<Ipv4Net>().map(|n| n.trunc()).map_err(|_| format!("'{s}' is not an IPv4 prefix like 10.255.0.0/16 (or 'none')")))
            }
            "loopback_ipv6" => {
                a.loopback_ipv6 = p.scalar(v, &f, |s| s.parse::<Ipv6Net>().map(|n| n.trunc()).map_err(|_| format!("'{s}' is not an IPv6 prefix like fd00:ff::/64 (or 'none')")))
            }
            "ipv4_prefix" => {
                if let Some(n) = p.scalar(v, &f, |s| match s.trim_start_matches('/').parse::<u8>() {
                    Ok(n @ 8..=30) => Ok(n),
                    _ => Err(format!("expected a prefix length from 8 to 30, got '{s}'")),
                }) {
                    a.ipv4_prefix = n;
                }
            }
            "ipv6_prefix" => {
                if let Some(n) = p.scalar(v, &f, |s| match s.trim_start_matches('/').parse::<u8>() {
                    Ok(n @ 16..=126) => Ok(n),
                    _ => Err(format!("expected a prefix length from 16 to 126, got '{s}'")),
                }) {
                    a.ipv6_prefix = n;
                }
            }
            _ => unreachable!(),
        }
    }
    a
}

const NODE_KEYS: &[&str] = &["kind", "iface", "run", "routes", "files", "loopback", "vars", "sysctl", "isolation", "cpu", "memory", "pids", "machine"];
/// What a node of `kind: host` may not have: it is the machine itself, not a node vemu
/// makes.
const NOT_ON_HOST: &[&str] = &["iface", "run", "files", "loopback", "sysctl", "isolation", "cpu", "memory", "pids", "machine"];
/// What a node of kind `external` may have: it is what is on a NIC's wire.
const ON_EXTERNAL: &[&str] = &["kind", "iface"];

/// What a node definition (or `defaults.node`) gives.
#[derive(Default)]
struct NodeParts {
    run: Vec<String>,
    routes: Vec<RouteDef>,
    files: Vec<FileDef>,
    loopback: Vec<IpNet>,
    vars: Vec<(String, String)>,
    sysctls: Vec<(String, String)>,
    /// `isolation`, when given: whether the node's processes have PIDs of their own.
    own_pids: Option<bool>,
    /// `cpu`, `memory`, `pids`, when given.
    limits: crate::Limits,
    /// `machine`, when given: its name and where.
    machine: Option<(String, Mark)>,
    /// `kind`, when given, and where.
    kind: Option<(crate::NodeKind, Mark)>,
    /// `iface` (the NIC of a node of kind `external`), and where.
    iface: Option<(String, Mark)>,
    /// The keys given, and where (to refuse those a node vemu does not make cannot have).
    given: Vec<(String, Mark)>,
}

fn node_parts(p: &mut P, def: &Node, field: &str, base: Option<&Path>, allowed: &[&str]) -> NodeParts {
    let mut d = NodeParts::default();
    for (k, kmark, v) in p.map(def, field, allowed) {
        let f = join(field, k);
        d.given.push((k.to_string(), kmark));
        match k {
            "kind" => {
                d.kind = p
                    .scalar(v, &f, |s| match s {
                        "namespace" => Ok(crate::NodeKind::Namespace),
                        "host" => Ok(crate::NodeKind::Host),
                        "external" => Ok(crate::NodeKind::External),
                        _ => Err(format!("expected 'namespace' (a node of its own, the default), 'host' (the machine vemu runs on) or 'external' (what is on the wire of a NIC of the machine), got '{s}'")),
                    })
                    .map(|k| (k, v.mark));
                // Refused to a tenant, it is kept for the checks that follow (one error).
                match d.kind {
                    Some((crate::NodeKind::Host, _)) => p.reach(crate::Reach::Host, v.mark, &f),
                    Some((crate::NodeKind::External, _)) => p.reach(crate::Reach::External, v.mark, &f),
                    _ => true,
                };
            }
            "iface" => d.iface = p.scalar(v, &f, |s| valid_iface_name(s).map(|()| s.to_string())).map(|n| (n, v.mark)),
            "run" => d.run = p.strings(v, &f),
            "isolation" => {
                d.own_pids = p.scalar(v, &f, |s| match s {
                    "pid" => Ok(true),
                    "none" => Ok(false),
                    _ => Err(format!("expected 'pid' (a PID namespace and /proc of the node's own) or 'none' (the machine's PIDs), got '{s}'")),
                })
                .inspect(|own| _ = *own || p.reach(crate::Reach::SharedPids, v.mark, &f))
            }
            "cpu" => {
                d.limits.cpu_cores = p.scalar(v, &f, |s| match s.parse::<f64>() {
                    Ok(c) if crate::Limits { cpu_cores: Some(c), ..Default::default() }.check().is_ok() => Ok(c),
                    _ => Err(format!("expected the cores the node may use, {} to {} (e.g. 0.5), got '{s}'", crate::MIN_CPU_CORES, crate::MAX_CPU_CORES)),
                })
            }
            "memory" => {
                d.limits.memory_bytes = p.scalar(v, &f, |s| match units::size_bytes(s) {
                    Ok(b) if crate::Limits { memory_bytes: Some(b), ..Default::default() }.check().is_ok() => Ok(b),
                    Ok(_) => Err(format!("memory must be at least 4MiB, got '{s}'")),
                    Err(e) => Err(e),
                })
            }
            "pids" => {
                d.limits.pids = p.scalar(v, &f, |s| match s.parse::<u64>() {
                    Ok(n) if crate::Limits { pids: Some(n), ..Default::default() }.check().is_ok() => Ok(n),
                    _ => Err(format!("expected the most processes the node may have, 1 to {}, got '{s}'", crate::MAX_PIDS)),
                })
            }
            "files" => d.files = files(p, v, &f, base),
            "machine" => d.machine = p.string(v, &f).map(|m| (m, v.mark)),
            "vars" => {
                for (name, _, x) in p.map(v, &f, &[]) {
                    if let Some(val) = p.string(x, &join(&f, name)) {
                        d.vars.push((name.to_string(), val));
                    }
                }
            }
            "sysctl" => {
                for (name, kmark, x) in p.map(v, &f, &[]) {
                    let kf = join(&f, name);
                    // Only the network sysctls are the node's own (per network namespace).
                    let ok = name.starts_with("net.") && name.split('.').all(|w| !w.is_empty() && w != ".." && !w.contains('/'));
                    if !ok {
                        p.err(kmark, &kf, format!("'{name}' is not a network sysctl of the node (write net.…, e.g. net.ipv4.conf.all.rp_filter)"));
                        continue;
                    }
                    if let Some(val) = p.string(x, &kf) {
                        d.sysctls.push((name.to_string(), val));
                    }
                }
            }
            "loopback" => {
                d.loopback = ip_list(p, v, &f)
                    .into_iter()
                    .map(|a| match a {
                        IpNet::V4(n) => IpNet::V4(Ipv4Net::new(n.addr(), 32).unwrap()),
                        IpNet::V6(n) => IpNet::V6(Ipv6Net::new(n.addr(), 128).unwrap()),
                    })
                    .collect()
            }
            "routes" => {
                for (i, r) in p.seq(v, &f).iter().enumerate() {
                    if let Some(r) = route(p, r, &format!("{f}[{i}]")) {
                        d.routes.push(r);
                    }
                }
            }
            _ => unreachable!(),
        }
    }
    d
}

/// Parse a scenario; `base` is the directory that file references are relative to.
pub fn parse(text: &str, stem: &str, name_override: Option<&str>, machines_override: Option<Vec<crate::Machine>>, base: Option<&Path>, trust: &crate::Trust) -> Result<Scenario, Vec<Error>> {
    let root = match yaml::parse(text) {
        Ok(Some(root)) => root,
        Ok(None) => {
            return Err(vec![Error { line: 1, col: 1, field: String::new(), message: "the scenario is empty".into() }])
        }
        Err(e) => {
            return Err(vec![Error {
                line: e.mark.line,
                col: e.mark.col,
                field: String::new(),
                message: format!("YAML syntax error: {}", e.message),
            }])
        }
    };
    let mut p = P { errors: Vec::new(), trust: trust.clone() };
    let top = p.map(&root, "", &["name", "seed", "defaults", "nodes", "links", "segments", "events", "addressing", "routing", "fidelity", "storage", "logs", "machines", "divert"]);
    let get = |k: &str| top.iter().find(|(key, ..)| *key == k).map(|(_, m, n)| (*m, *n));

    let name = match (name_override, get("name")) {
        (Some(n), _) => {
            if let Err(m) = valid_lab_name(n) {
                p.err(Mark::default(), "--name", m);
            }
            n.to_string()
        }
        (None, Some((_, n))) => p.scalar(n, "name", |s| valid_lab_name(s).map(|_| s.to_string())).unwrap_or_default(),
        (None, None) => {
            let n: String = stem.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' }).take(32).collect();
            if valid_lab_name(&n).is_err() {
                p.err(root.mark, "name", format!("no 'name' given and the file name '{stem}' does not make a lab name"));
            }
            n
        }
    };
    let seed = get("seed").and_then(|(_, n)| p.scalar(n, "seed", integer::<u64>("a whole number"))).unwrap_or(1);
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

    let mut machines: Vec<crate::Machine> = Vec::new();
    match (machines_override, get("machines")) {
        // The command line's replace the scenario's.
        (Some(given), _) => machines = given,
        (None, Some((mark, n))) => {
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
                p.err(mark, "machines", format!("a lab spans at most {} machines, this one names {}", crate::MAX_MACHINES, machines.len()));
            }
        }
        (None, None) => {}
    }

    let mut default_link = ImpairmentsPatch::default();
    let mut default_node = NodeParts::default();
    if let Some((_, d)) = get("defaults") {
        for (k, _, v) in p.map(d, "defaults", &["link", "node"]) {
            if k == "link" {
                let entries = p.map(v, "defaults.link", IMPAIRMENT_KEYS);
                default_link = impairments(&mut p, &entries, "defaults.link");
            } else {
                default_node = node_parts(&mut p, v, "defaults.node", base, &["run", "files", "vars", "sysctl", "isolation", "cpu", "memory", "pids"]);
            }
        }
    }

    // Nodes.
    let no_defaults = NodeParts::default();
    let mut nodes = Vec::new();
    let mut names: HashMap<String, usize> = HashMap::new();
    match get("nodes") {
        None => p.err(root.mark, "nodes", "a scenario needs 'nodes'"),
        Some((m, n)) => {
            let entries = p.map(n, "nodes", &[]);
            if entries.is_empty() && p.errors.is_empty() {
                p.err(m, "nodes", "no nodes are defined");
            }
            for (nname, nmark, def) in entries {
                let field = format!("nodes.{nname}");
                if let Err(msg) = valid_node_name(nname) {
                    p.err(nmark, &field, msg);
                    continue;
                }
                let mut d = node_parts(&mut p, def, &field, base, NODE_KEYS);
                let kind = d.kind.map_or(crate::NodeKind::Namespace, |(k, _)| k);
                match d.kind {
                    Some((crate::NodeKind::Host, mark)) => {
                        for (k, kmark) in d.given.iter().filter(|(k, _)| NOT_ON_HOST.contains(&k.as_str())) {
                            p.err(*kmark, &join(&field, k), format!("a node of kind 'host' is the machine vemu runs on, not a node vemu makes: it has no '{k}'"));
                        }
                        if let Some(other) = nodes.iter().find(|n: &&NodeDef| n.kind == crate::NodeKind::Host) {
                            p.err(mark, &join(&field, "kind"), format!("only one node can be the host, and '{}' is", other.name));
                        }
                    }
                    Some((crate::NodeKind::External, mark)) => {
                        for (k, kmark) in d.given.iter().filter(|(k, _)| !ON_EXTERNAL.contains(&k.as_str())) {
                            p.err(*kmark, &join(&field, k), format!("a node of kind 'external' is what is on the wire of a NIC, not a node vemu makes: it has no '{k}'"));
                        }
                        match &d.iface {
                            None => p.err(mark, &join(&field, "kind"), "a node of kind 'external' needs 'iface': the machine's interface (NIC) whose wire it stands for"),
                            Some((nic, imark)) => {
                                if let Some(other) = nodes.iter().find(|n: &&NodeDef| n.nic.as_ref() == Some(nic)) {
                                    p.err(*imark, &join(&field, "iface"), format!("interface '{nic}' is node '{}' already", other.name));
                                }
                            }
                        }
                    }
                    _ => {
                        if let Some((_, imark)) = d.iface {
                            p.err(imark, &join(&field, "iface"), "'iface' names the NIC of a node of kind 'external' (name a link's interface in its endpoint: {node: n1, iface: eth5})");
                        }
                    }
                }
                if let Some((k, mark)) = d.kind.filter(|(k, _)| !k.is_made()) {
                    if !machines.is_empty() {
                        p.err(mark, &join(&field, "kind"), format!("a node of kind '{}' in a lab across machines is not supported yet", k.name()));
                    }
                    // Nothing of defaults.node applies to what vemu does not make.
                    d.own_pids = Some(false);
                }
                let nic = d.iface.take().filter(|_| kind == crate::NodeKind::External).map(|(n, _)| n);
                let default_node = match kind.is_made() {
                    false => &no_defaults,
                    true => &default_node,
                };
                // Defaults first: the node's own files replace default files at the same path.
                let mut files = default_node.files.clone();
                files.retain(|f| !d.files.iter().any(|g| g.path == f.path));
                files.append(&mut d.files);
                // A file cannot also be a directory of another one.
                for f in &files {
                    if let Some(g) = files.iter().find(|g| g.path.starts_with(&format!("{}/", f.path.trim_end_matches('/')))) {
                        p.err(g.mark, &format!("{field}.files.{}", g.path), format!("'{}' is also a file of this node, so it cannot be a directory", f.path));
                    }
                }
                let mut run = default_node.run.clone();
                run.append(&mut d.run);
                let mut vars = default_node.vars.clone();
                vars.extend(d.vars);
                let mut sysctls = default_node.sysctls.clone();
                sysctls.retain(|(k, _)| !d.sysctls.iter().any(|(k2, _)| k2 == k));
                sysctls.extend(d.sysctls);
                let (routes, loopback) = (d.routes, d.loopback);
                let own_pids = d.own_pids.or(default_node.own_pids).unwrap_or(true);
                let limits = d.limits.or(default_node.limits);
                let machine = d.machine.and_then(|(m, mark)| match machines.iter().position(|x| x.name == m) {
                    Some(i) => Some(i),
                    None => {
                        let known: Vec<&str> = machines.iter().map(|x| x.name.as_str()).collect();
                        let why = match known.is_empty() {
                            true => "the scenario names no 'machines'".to_string(),
                            false => format!("the machines are {}", known.join(", ")),
                        };
                        p.err(mark, &join(&field, "machine"), format!("unknown machine '{m}' ({why})"));
                        None
                    }
                });
                names.insert(nname.to_string(), nodes.len());
                nodes.push(NodeDef { name: nname.to_string(), mark: nmark, run, routes, files, loopback, vars, sysctls, own_pids, limits, machine, kind, nic });
            }
        }
    }

    // Links.
    let mut links = Vec::new();
    if let Some((_, n)) = get("links") {
        let mut link_keys: Vec<&str> = vec!["endpoints", "name", "weight", "forward", "reverse"];
        link_keys.extend_from_slice(IMPAIRMENT_KEYS);
        for (i, l) in p.seq(n, "links").iter().enumerate() {
            let field = format!("links[{i}]");
            let entries = p.map(l, &field, &link_keys);
            let dirs = directions(&mut p, &entries, &field, [&default_link, &default_link], ["forward", "reverse"]);
            let mut ends = Vec::new();
            let mut saw_endpoints = false;
            let mut name = None;
            let mut weight = 1;
            for (k, _, v) in &entries {
                let f = join(&field, k);
                match *k {
                    "endpoints" => {
                        saw_endpoints = true;
                        let items = p.seq(v, &f);
                        if items.len() != 2 {
                            p.err(v.mark, &f, format!("a link has exactly 2 endpoints, found {}", items.len()));
                        }
                        for (j, e) in items.iter().enumerate().take(2) {
                            if let Some((e, _)) = endpoint(&mut p, e, &format!("{f}[{j}]"), &names, &[]) {
                                ends.push(e);
                            }
                        }
                    }
                    "name" => {
                        name = p.scalar(v, &f, |s| {
                            valid_medium_name("link", s).map(|()| s.to_string())
                        })
                    }
                    "weight" => weight = p.scalar(v, &f, positive).unwrap_or(1),
                    _ => {}
                }
            }
            if !saw_endpoints {
                p.err(l.mark, &field, "a link needs 'endpoints: [node, node]'");
            }
            let fwd = finish_impairments(&mut p, &dirs[0], l.mark, &format!("{field} (forward)"));
            let rev = finish_impairments(&mut p, &dirs[1], l.mark, &format!("{field} (reverse)"));
            if let [a, b] = ends.as_slice() {
                if a.node == b.node {
                    p.err(a.mark, &join(&field, "endpoints"), format!("a link cannot join node '{}' to itself", nodes[a.node].name));
                    continue;
                }
                links.push(LinkDef {
                    name,
                    mark: l.mark,
                    field,
                    ends: [a.clone(), b.clone()],
                    forward: fwd,
                    reverse: rev,
                    weight,
                });
            }
        }
    }
    let mut link_names: HashMap<&str, Mark> = HashMap::new();
    for l in &links {
        if let Some(n) = &l.name {
            if let Some(first) = link_names.insert(n, l.mark) {
                p.errors.push(Error {
                    line: l.mark.line,
                    col: l.mark.col,
                    field: format!("{}.name", l.field),
                    message: format!("link name '{n}' is used twice (first on line {})", first.line),
                });
            }
        }
    }
    let mut segments = Vec::new();
    if let Some((_, n)) = get("segments") {
        for (sname, smark, def) in p.map(n, "segments", &[]) {
            segments.push(segment(&mut p, sname, smark, def, &names, base));
        }
    }
    let mut events = Vec::new();
    if let Some((_, n)) = get("events") {
        for (i, e) in p.seq(n, "events").iter().enumerate() {
            if let Some(ev) = event(&mut p, e, &format!("events[{i}]")) {
                events.push(ev);
            }
        }
    }
    let diverts = get("divert").filter(|(m, _)| p.reach(crate::Reach::Divert, *m, "divert")).map(|(_, n)| divert::diverts(&mut p, n)).unwrap_or_default();
    let mut fidelity = crate::FidelityThresholds::default();
    if let Some((_, n)) = get("fidelity") {
        for (k, _, v) in p.map(n, "fidelity", &["late", "degraded", "invalid", "min_frames", "busy"]) {
            let f = join("fidelity", k);
            match k {
                "late" => fidelity.late_ns = p.scalar(v, &f, units::duration_ns).unwrap_or(fidelity.late_ns),
                "degraded" => fidelity.degraded_fraction = p.scalar(v, &f, units::percent).unwrap_or(fidelity.degraded_fraction),
                "invalid" => fidelity.invalid_fraction = p.scalar(v, &f, units::percent).unwrap_or(fidelity.invalid_fraction),
                "busy" => fidelity.busy_fraction = p.scalar(v, &f, units::percent).unwrap_or(fidelity.busy_fraction),
                _ => fidelity.min_frames = p.scalar(v, &f, integer::<u64>("a number of frames")).unwrap_or(fidelity.min_frames),
            }
        }
        if fidelity.invalid_fraction < fidelity.degraded_fraction {
            p.err(n.mark, "fidelity", "'invalid' must be at least 'degraded'");
        }
    }
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
    let storage_bytes = size("storage", crate::MIN_STORAGE_BYTES, "16MiB", crate::DEFAULT_STORAGE_BYTES);
    let log_bytes = size("logs", crate::MIN_LOG_BYTES, "64KiB", crate::DEFAULT_LOG_BYTES);
    if let (false, false, Some((mark, _))) = (diverts.is_empty(), machines.is_empty(), get("divert")) {
        p.err(mark, "divert", "diverted paths take the controller's machine's traffic: not in labs across machines yet");
    }
    if p.errors.is_empty() {
        Ok(Scenario { name, seed, nodes, links, segments, events, addressing, addressing_mark, static_routing, routing_mark, fidelity, storage_bytes, log_bytes, machines, diverts, confined: matches!(p.trust, crate::Trust::Tenant(_)) })
    } else {
        Err(p.errors)
    }
}

/// Parse impairments given as `(key, value)` pairs, e.g. from command-line flags
/// (`("delay", "20ms")`, `("loss", "{model: gilbert-elliott, p: 1%}")`), with the same
/// rules and messages as in a scenario file. `bandwidth: unlimited` lifts a rate limit.
pub fn impairment_patch(pairs: &[(&str, &str)]) -> Result<ImpairmentsPatch, String> {
    let mut p = P { errors: Vec::new(), trust: crate::Trust::Owner };
    let mut patch = ImpairmentsPatch::default();
    for (key, value) in pairs {
        if !IMPAIRMENT_KEYS.contains(key) {
            return Err(format!("unknown impairment '{key}', expected one of: {}", IMPAIRMENT_KEYS.join(", ")));
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
