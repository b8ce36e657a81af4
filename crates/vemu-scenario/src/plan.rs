//! From a validated [`Scenario`] to a [`Plan`]: interface names, MAC addresses,
//! automatic addresses, `/etc/hosts` and shortest-path static routes.

mod addresses;
mod bridge;
mod routes;
mod rules;

use addresses::{link_addresses, loopbacks, segment_addresses, Pool};
use routes::static_routes;

pub use bridge::AP_BRIDGE;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use vemu_link::Impairments;

use crate::parse::{EndDef, LinkDef, Scenario, SegmentDef, SubnetChoice};
use crate::yaml::Mark;
use crate::{
    Attach, EndpointRef, Error, IfacePlan, LinkPlan, MemberPlan, NodeKind, NodePlan, Plan,
    RoutePlan, SegmentPlan,
};

/// Interface MTU when the link sets none, bytes.
pub const DEFAULT_MTU: u32 = 1500;

fn err(errors: &mut Vec<Error>, mark: Mark, field: &str, message: String) {
    errors.push(Error { line: mark.line, col: mark.col, field: field.to_string(), message });
}

/// The interface name for an endpoint: its explicit name or the next free `ethN` — on
/// the host node, `vh-LAB` and a number (the host has interfaces of its own); an
/// external node's is its NIC's.
fn iface_name(
    e: &EndDef,
    used: &mut [HashSet<String>],
    next_auto: &mut [usize],
    host_prefix: Option<&str>,
    nic: Option<&str>,
) -> String {
    if let Some(nic) = nic {
        used[e.node].insert(nic.to_string());
        return nic.to_string();
    }
    match &e.iface {
        Some(n) => n.clone(),
        None => loop {
            let cand = match host_prefix {
                Some(p) => format!("{p}{}", next_auto[e.node]),
                None => format!("eth{}", next_auto[e.node]),
            };
            next_auto[e.node] += 1;
            // (only written names are kept: the automatic ones count up past each other)
            if !used[e.node].contains(&cand) {
                break cand;
            }
        },
    }
}

fn auto_mac(node: usize, idx: usize) -> [u8; 6] {
    let n = node as u32;
    [0x02, (n >> 16) as u8, (n >> 8) as u8, n as u8, (idx >> 8) as u8, idx as u8]
}

/// The IP MTU of both interfaces of a link or segment port with these directions: the
/// smaller of their `mtu`s, or the default.
pub fn port_mtu(dirs: [&Impairments; 2]) -> u32 {
    dirs.iter().filter_map(|d| d.mtu).min().unwrap_or(DEFAULT_MTU)
}

fn check_ipv6_mtu<'a>(
    errors: &mut Vec<Error>,
    mtu: u32,
    addrs: impl IntoIterator<Item = &'a IpNet>,
    mark: Mark,
    field: &str,
) {
    if mtu < 1280 && addrs.into_iter().any(|a| a.addr().is_ipv6()) {
        err(
            errors,
            mark,
            &format!("{field}.mtu"),
            format!("IPv6 needs an MTU of at least 1280 bytes, got {mtu} (raise it, or set addressing: {{ipv6: none}})"),
        );
    }
}

pub fn build_plan(s: &Scenario) -> Result<Plan, Vec<Error>> {
    let mut errors = Vec::new();
    let mut nodes = node_plans(s);
    if !s.machines.is_empty() {
        place_nodes(s, &mut nodes, &mut errors);
    }

    // Interface names: explicit names first, then eth0, eth1, ... skipping taken ones.
    let ends: Vec<&EndDef> = s
        .links
        .iter()
        .flat_map(|l| l.ends.iter())
        .chain(s.segments.iter().flat_map(|g| g.members.iter().map(|m| &m.end)))
        .collect();
    let mut used: Vec<HashSet<String>> = vec![HashSet::new(); nodes.len()];
    reserve_interfaces(&mut nodes, &ends);
    for e in &ends {
        if let Some(name) = &e.iface {
            if !used[e.node].insert(name.clone()) {
                err(
                    &mut errors,
                    e.mark,
                    &e.field,
                    format!("node '{}' already has an interface '{name}'", s.nodes[e.node].name),
                );
            }
        }
    }
    let mut explicit: Vec<IpNet> =
        ends.iter().flat_map(|e| e.ips.iter().map(|n| n.trunc())).collect();
    explicit.extend(s.segments.iter().flat_map(|g| {
        g.subnets
            .iter()
            .filter_map(|c| if let SubnetChoice::Given(n) = c { Some(*n) } else { None })
    }));
    explicit.extend(s.nodes.iter().flat_map(|n| n.loopback.iter().copied()));
    let a = &s.addressing;
    let mut v4 = Pool::new(a.ipv4.map(IpNet::V4), explicit.clone());
    let mut v6 = Pool::new(a.ipv6.map(IpNet::V6), explicit.clone());
    if a.ipv4.is_some_and(|p| p.prefix_len() > a.ipv4_prefix)
        || a.ipv6.is_some_and(|p| p.prefix_len() > a.ipv6_prefix)
    {
        err(
            &mut errors,
            s.addressing_mark,
            "addressing",
            "the per-link prefix must be longer than the pool's prefix".into(),
        );
    }

    // Segments take their (larger) subnets first, then links take theirs.
    let seg_addrs: Vec<Vec<Vec<IpNet>>> =
        s.segments.iter().map(|g| segment_addresses(g, &mut v4, &mut v6, s, &mut errors)).collect();
    let link_addrs: Vec<[Vec<IpNet>; 2]> =
        s.links.iter().map(|l| link_addresses(l, &mut v4, &mut v6, s, &mut errors)).collect();

    let mut wiring = Wiring::new(s, nodes.len(), used);
    let links = link_plans(s, &mut nodes, &mut wiring, link_addrs, &mut errors);
    let segments = segment_plans(s, &mut nodes, &mut wiring, &seg_addrs, &mut errors);
    check_macs(&nodes, &mut errors);
    bridge::ap_bridges(s, &mut nodes, &segments, &mut errors);
    loopbacks(s, &mut nodes, explicit, &mut errors);
    if !errors.is_empty() {
        return Err(errors);
    }

    check_routes(s, &nodes, &mut errors);
    rules::check(s, &nodes, &mut errors);
    if !errors.is_empty() {
        return Err(errors);
    }
    // `ipv6: none`: interfaces of nodes without an IPv6 address have IPv6 off (set before
    // they exist, so that they never send a router solicitation or an MLD report); the
    // node's own sysctls come after and may say otherwise.
    if s.addressing.ipv6.is_none() && !s.addressing.ipv6_link_local {
        for n in nodes.iter_mut() {
            if !n.ifaces.iter().any(|i| i.addrs.iter().any(|a| a.addr().is_ipv6())) {
                n.sysctls.insert(0, ("net.ipv6.conf.default.disable_ipv6".into(), "1".into()));
            }
        }
    }
    // Each node's own `routing:` over the lab's: who gets shortest-path routes.
    let routed: Vec<bool> =
        s.nodes.iter().map(|d| d.static_routing.unwrap_or(s.static_routing)).collect();
    let n_routed = routed.iter().filter(|&&r| r).count();
    if n_routed > 0 {
        // Checked before any search: n nodes on a graph of l links hold up to n*l routes.
        let lans = segments.iter().filter(|g| g.wireless.is_none()).count();
        let loopbacks = nodes.iter().filter(|n| !n.loopback.is_empty()).count();
        let most = n_routed as u64 * (links.len() + lans + loopbacks) as u64;
        if most > crate::MAX_STATIC_ROUTES {
            let m = format!(
                "static routing would give the {} nodes up to {most} routes in all (more than {}): write 'routing: none' and run a routing daemon in the nodes, or join nodes in LAN segments",
                n_routed,
                crate::MAX_STATIC_ROUTES
            );
            return Err(vec![Error {
                line: s.routing_mark.line,
                col: s.routing_mark.col,
                field: "routing".into(),
                message: m,
            }]);
        }
        static_routes(&mut nodes, &links, &segments, &routed);
    }
    for (ni, def) in s.nodes.iter().enumerate() {
        for r in &def.routes {
            nodes[ni].routes.retain(|x| (x.dst, x.table) != (r.dst, r.table));
            let (dst, via, dev, table) = (r.dst, r.via, r.dev.clone(), r.table);
            nodes[ni].routes.push(RoutePlan { dst, via, dev, table });
        }
        nodes[ni].rules = def.rules.iter().map(|r| r.rule.clone()).collect();
    }

    // An external node is one NIC's wire: one port; its addresses are those the lab
    // expects the device there to have, and it has no routes vemu could install.
    for (n, d) in nodes.iter_mut().zip(&s.nodes).filter(|(n, _)| n.kind == NodeKind::External) {
        n.routes.clear();
        if n.ifaces.len() != 1 {
            err(&mut errors, d.mark, &format!("nodes.{}", n.name), format!("a node of kind 'external' is one NIC's wire: it is the end of exactly one link or a member of one segment, not {}", n.ifaces.len()));
        }
    }
    let mut plan = Plan {
        name: s.name.clone(),
        seed: s.seed,
        nodes,
        links,
        segments,
        events: Vec::new(),
        fidelity: s.fidelity.clone(),
        storage_bytes: s.storage_bytes,
        log_bytes: s.log_bytes,
        machines: s.machines.clone(),
        diverts: s.diverts.clone(),
        confined: s.confined,
        images: s.images.clone(),
        mgmt: s.mgmt,
        expect: Vec::new(),
    };
    mgmt_addresses(s, &mut plan, &mut errors);
    crate::template::render_node_files(s, &mut plan, &mut errors);
    check_events(s, &mut plan, &mut errors);
    resolve_expects(s, &mut plan, &mut errors);
    if errors.is_empty() {
        Ok(plan)
    } else {
        Err(errors)
    }
}

/// The management network's addresses: a node's own (`mgmt:` on it) where given, each
/// other node vemu makes the next free one of each family.
fn mgmt_addresses(s: &Scenario, plan: &mut Plan, errors: &mut Vec<Error>) {
    let Some(m) = s.mgmt else {
        for d in &s.nodes {
            for (_, mark) in d.mgmt.iter().take(1) {
                let why = "the lab has no management network: give it one (mgmt: on)".to_string();
                err(errors, *mark, &format!("nodes.{}.mgmt", d.name), why);
            }
        }
        return;
    };
    // The numbers taken, per family (IPv4, IPv6), by whom.
    let mut taken: [HashMap<u128, &str>; 2] = Default::default();
    for d in s.nodes.iter().filter(|d| d.kind == NodeKind::Namespace) {
        for (a, mark) in &d.mgmt {
            let field =
                format!("nodes.{}.mgmt.{}", d.name, if a.is_ipv4() { "ipv4" } else { "ipv6" });
            let net = if a.is_ipv4() { m.ipv4.map(IpNet::V4) } else { m.ipv6.map(IpNet::V6) };
            let why = match (net, m.number(*a)) {
                (None, _) => format!("the management network has no {} subnet", if a.is_ipv4() { "IPv4" } else { "IPv6" }),
                (Some(net), None) => format!("{a} is not a node's address of the management network {net} (its first address is the machine's)"),
                (Some(_), Some(k)) => match taken[usize::from(a.is_ipv6())].insert(k, &d.name) {
                    Some(other) if other != d.name => format!("{a} is also node '{other}'s"),
                    _ => continue,
                },
            };
            err(errors, *mark, &field, why);
        }
    }
    let made = plan.nodes.iter_mut().filter(|n| n.kind == NodeKind::Namespace);
    let mut next = [1u128; 2];
    for n in made {
        let own = s.nodes.iter().find(|d| d.name == n.name).map_or(&[][..], |d| &d.mgmt[..]);
        let mut addrs = Vec::new();
        for (f, v4) in [(0, true), (1, false)] {
            if m.address(v4, 0).is_none() {
                continue;
            }
            if let Some((a, _)) = own.iter().find(|(a, _)| a.is_ipv4() == v4) {
                addrs.extend(m.number(*a).and_then(|k| m.address(v4, k)));
                continue;
            }
            while taken[f].contains_key(&next[f]) {
                next[f] += 1;
            }
            match m.address(v4, next[f]) {
                Some(a) => addrs.push(a),
                None => {
                    let why = format!(
                        "the management network has no room for node '{}': give it a larger subnet",
                        n.name
                    );
                    err(errors, s.mgmt_mark, "mgmt", why);
                    return;
                }
            }
            next[f] += 1;
        }
        n.mgmt = addrs;
        n.mgmt_gateway = m.gateway_v4().filter(|_| m.nat);
    }
}

/// Room in each node for the interfaces its `ends` will give it (a fabric's switches:
/// their k ports at once, not doubled to them).
fn reserve_interfaces(nodes: &mut [NodePlan], ends: &[&EndDef]) {
    let mut degree = vec![0usize; nodes.len()];
    for e in ends {
        degree[e.node] += 1;
    }
    for (n, d) in nodes.iter_mut().zip(degree) {
        n.ifaces.reserve_exact(d);
    }
}

/// Each node as the scenario gives it, before it has interfaces or a machine.
fn node_plans(s: &Scenario) -> Vec<NodePlan> {
    s.nodes
        .iter()
        .map(|n| NodePlan {
            name: n.name.clone(),
            ifaces: Vec::new(),
            bridge: Vec::new(),
            routes: Vec::new(),
            rules: Vec::new(),
            run: n.run.clone(),
            loopback: n.loopback.clone(),
            files: Vec::new(),
            sysctls: n.sysctls.clone(),
            own_pids: n.own_pids,
            limits: n.limits,
            machine: 0,
            kind: n.kind,
            image: n.image.clone(),
            router: n.router.clone(),
            nat: n.nat,
            mgmt: Vec::new(),
            mgmt_gateway: None,
            canvas: n.canvas,
        })
        .collect()
}

/// Interfaces as they are added to nodes: the names taken on each node, the next
/// automatic `ethN` of each, and the prefix of the machine's (host node's) interfaces.
struct Wiring {
    used: Vec<HashSet<String>>,
    next_auto: Vec<usize>,
    /// "vh-" and the lab's name, cut so that a number still fits in an interface name.
    host_iface: String,
}

impl Wiring {
    fn new(s: &Scenario, nodes: usize, used: Vec<HashSet<String>>) -> Wiring {
        let host_iface = format!("vh-{}", s.name.chars().take(10).collect::<String>());
        Wiring { used, next_auto: vec![0; nodes], host_iface }
    }

    /// Give end `e`'s node its interface (named as written, or the next free one; its
    /// MAC as written, or made from its place): where it is.
    fn add(
        &mut self,
        s: &Scenario,
        nodes: &mut [NodePlan],
        e: &EndDef,
        mtu: u32,
        addrs: Vec<IpNet>,
        attach: Attach,
    ) -> EndpointRef {
        let host = (s.nodes[e.node].kind == NodeKind::Host).then_some(self.host_iface.as_str());
        let nic = s.nodes[e.node].nic.as_deref();
        let name = iface_name(e, &mut self.used, &mut self.next_auto, host, nic);
        let node = &mut nodes[e.node];
        let idx = node.ifaces.len();
        let mac = e.mac.unwrap_or_else(|| auto_mac(e.node, idx));
        node.ifaces.push(IfacePlan { name, mac, mtu, addrs, attach });
        EndpointRef { node: e.node, iface: idx }
    }
}

/// The links, their ends' interfaces added to `nodes`.
fn link_plans(
    s: &Scenario,
    nodes: &mut [NodePlan],
    wiring: &mut Wiring,
    mut link_addrs: Vec<[Vec<IpNet>; 2]>,
    errors: &mut Vec<Error>,
) -> Vec<LinkPlan> {
    let mut links = Vec::with_capacity(s.links.len());
    for (li, l) in s.links.iter().enumerate() {
        let addrs = &mut link_addrs[li];
        let mtu = port_mtu([&l.forward, &l.reverse]);
        check_ipv6_mtu(errors, mtu, addrs.iter().flatten(), l.mark, &l.field);
        let mut refs = [EndpointRef { node: 0, iface: 0 }; 2];
        for (k, e) in l.ends.iter().enumerate() {
            let mut mine = std::mem::take(&mut addrs[k]);
            mine.shrink_to_fit();
            refs[k] = wiring.add(s, nodes, e, mtu, mine, Attach::Link(li));
        }
        let name = l.name.clone().unwrap_or_default();
        links.push(LinkPlan {
            name,
            a: refs[0],
            b: refs[1],
            forward: l.forward.clone(),
            reverse: l.reverse.clone(),
            weight: l.weight,
        });
    }
    default_link_names(&mut links, &s.links, |n| s.nodes[n].name.as_str());
    links
}

/// The segments, their members' interfaces added to `nodes`.
fn segment_plans(
    s: &Scenario,
    nodes: &mut [NodePlan],
    wiring: &mut Wiring,
    seg_addrs: &[Vec<Vec<IpNet>>],
    errors: &mut Vec<Error>,
) -> Vec<SegmentPlan> {
    let mut segments = Vec::new();
    for (gi, g) in s.segments.iter().enumerate() {
        let mut members = Vec::new();
        for (mi, m) in g.members.iter().enumerate() {
            let e = &m.end;
            let mtu = port_mtu([&m.egress, &m.ingress]);
            check_ipv6_mtu(errors, mtu, &seg_addrs[gi][mi], e.mark, &e.field);
            let addrs = seg_addrs[gi][mi].clone();
            members.push(MemberPlan {
                end: wiring.add(s, nodes, e, mtu, addrs, Attach::Segment(gi, mi)),
                vlan: m.vlan,
                egress: m.egress.clone(),
                ingress: m.ingress.clone(),
            });
        }
        let wireless = g.wireless.as_ref().map(|w| wireless_plan(w, s.seed, gi));
        segments.push(SegmentPlan {
            name: g.name.clone(),
            wireless,
            members,
            capacity_bps: g.capacity_bps,
            aging_ns: g.aging_ns,
            snooping: g.snooping,
            weight: g.weight,
            canvas: g.canvas,
        });
    }
    segments
}

/// Each node's machine (`machines:`): pinned ones where pinned, the others placed
/// by the partitioner.
fn place_nodes(s: &Scenario, nodes: &mut [NodePlan], errors: &mut Vec<Error>) {
    let g = crate::placement::Graph {
        pins: s.nodes.iter().map(|n| n.machine).collect(),
        weights: s
            .nodes
            .iter()
            .map(|n| n.limits.cpu_cores.map_or(100, |c| (c * 100.0).round().clamp(1.0, 1e6) as u32))
            .collect(),
        links: s.links.iter().map(|l| (l.ends[0].node, l.ends[1].node)).collect(),
        link_weights: s
            .links
            .iter()
            .map(|l| crate::placement::link_weight_mbit(l.forward.rate_bps, l.reverse.rate_bps))
            .collect(),
        segments: s
            .segments
            .iter()
            .map(|g| g.members.iter().map(|m| m.end.node).collect())
            .collect(),
        seed: s.seed,
    };
    match crate::placement::place(&g, s.machines.len()) {
        Ok(at) => nodes.iter_mut().zip(at).for_each(|(n, m)| n.machine = m),
        Err(crate::placement::PlaceError::SegmentSplit {
            segment,
            nodes: [a, b],
            machines: [ma, mb],
        }) => {
            let g = &s.segments[segment];
            let m = format!(
                "segment '{}' shares nodes with another segment, which keeps them on one machine, but '{}' is pinned to '{}' and '{}' to '{}' (a segment spans machines only when its own members are pinned to several)",
                g.name, s.nodes[a].name, s.machines[ma].name, s.nodes[b].name, s.machines[mb].name
            );
            err(errors, g.mark, &g.field, m);
        }
    }
}

/// Every interface's MAC address is its own.
fn check_macs(nodes: &[NodePlan], errors: &mut Vec<Error>) {
    let mut seen_macs = HashSet::new();
    for n in nodes {
        for i in &n.ifaces {
            if !seen_macs.insert(i.mac) {
                errors.push(Error {
                    line: 0,
                    col: 0,
                    field: String::new(),
                    message: format!("MAC address of {}:{} is used twice", n.name, i.name),
                });
            }
        }
    }
}

/// Explicit routes: the gateway must be on a connected subnet, the device must exist.
fn check_routes(s: &Scenario, nodes: &[NodePlan], errors: &mut Vec<Error>) {
    // Explicit routes: the gateway must be on a connected subnet, the device must exist.
    for (ni, def) in s.nodes.iter().enumerate() {
        for r in &def.routes {
            if let Some(dev) = &r.dev {
                if !nodes[ni].ifaces.iter().any(|i| &i.name == dev) {
                    err(
                        errors,
                        r.mark,
                        &r.field,
                        format!("node '{}' has no interface '{dev}'", def.name),
                    );
                }
            }
            if let Some(via) = r.via {
                if !nodes[ni].ifaces.iter().any(|i| i.addrs.iter().any(|a| a.contains(&via))) {
                    err(
                        errors,
                        r.mark,
                        &r.field,
                        format!("gateway {via} is not on any subnet of node '{}'", def.name),
                    );
                }
            }
        }
    }
}

/// The timeline's events, each naming what exists in the plan (and what can be done
/// to it), into `plan.events`.
fn check_events(s: &Scenario, plan: &mut Plan, errors: &mut Vec<Error>) {
    // Timeline: names must exist in the plan.
    for e in &s.events {
        let problem = match &e.event.target {
            crate::EventTarget::Link { spec, .. } => plan.ports(spec).err(),
            crate::EventTarget::Node(n) => match plan.node_index(n) {
                None => Some(format!("unknown node '{n}'")),
                Some(ni) if matches!(e.event.action, crate::EventAction::Move { .. }) => {
                    let wireless = plan.segments.iter().any(|g| g.wireless.is_some() && g.members.iter().any(|m| m.end.node == ni));
                    (!wireless).then(|| format!("node '{n}' is not a member of a wireless segment, so it cannot move"))
                }
                Some(ni) if !plan.nodes[ni].kind.is_made() => Some(format!("node '{n}' is of kind '{}', not a node vemu makes: vemu does not run, stop or start anything there", plan.nodes[ni].kind.name())),
                Some(_) => None,
            },
        };
        match problem {
            Some(m) => err(errors, e.mark, &e.field, m),
            None => plan.events.push(e.event.clone()),
        }
    }
}

/// Derive a well-mixed seed for one random stream of a lab.
pub fn derive_seed(lab_seed: u64, stream: u64) -> u64 {
    vemu_radio::splitmix64(lab_seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// Seeds, and places in the area for members without a position.
fn wireless_plan(w: &crate::parse::WirelessDef, seed: u64, gi: usize) -> crate::WirelessPlan {
    // Streams of their own, apart from the links' and LAN members' (numbered from 0).
    let base = derive_seed(seed, 0x7261_6469_6f00_0000 + gi as u64);
    let mut medium = w.medium.clone();
    medium.seed = derive_seed(base, u64::MAX);
    if let Some(d) = &mut medium.dcf {
        d.config.seed = medium.seed;
    }
    let radios = w
        .members
        .iter()
        .enumerate()
        .map(|(mi, (pos, mobility))| {
            let unit =
                |k: u64| (derive_seed(base, 4 * mi as u64 + k) >> 11) as f64 / (1u64 << 53) as f64;
            let start = pos.unwrap_or_else(|| {
                let a =
                    w.area.expect("members without a position need an area (checked when parsing)");
                vemu_radio::Pos::new(unit(1) * a.width_m, unit(2) * a.height_m)
            });
            crate::MemberRadio {
                start,
                mobility: mobility.clone(),
                seed: derive_seed(base, 4 * mi as u64 + 3),
            }
        })
        .collect();
    crate::WirelessPlan { medium, tick_ns: w.tick_ns, radios, trace: w.trace.clone() }
}

/// Names for the links the scenario leaves unnamed: `A:B` (its nodes, in the order
/// written) — or, where several unnamed links join the same two nodes, `A:B#1`, `A:B#2`,
/// ... in the order written, so that each link has a name of its own and `A:B` alone
/// names none of them (`Plan::find_link` then says which to pick). (An explicit name
/// has neither ':' nor '#': it never takes a default one.)
fn default_link_names<'a>(
    links: &mut [LinkPlan],
    defs: &[LinkDef],
    node_name: impl Fn(usize) -> &'a str,
) {
    let pair = |d: &LinkDef| {
        let (a, b) = (d.ends[0].node, d.ends[1].node);
        (a.min(b), a.max(b))
    };
    let mut parallel: HashMap<(usize, usize), usize> = HashMap::new();
    for d in defs.iter().filter(|d| d.name.is_none()) {
        *parallel.entry(pair(d)).or_default() += 1;
    }
    let mut seen: HashMap<(usize, usize), usize> = HashMap::new();
    for (l, d) in links.iter_mut().zip(defs).filter(|(_, d)| d.name.is_none()) {
        let base = format!("{}:{}", node_name(d.ends[0].node), node_name(d.ends[1].node));
        let k = seen.entry(pair(d)).or_default();
        *k += 1;
        l.name = if parallel[&pair(d)] > 1 { format!("{base}#{k}") } else { base };
    }
}

/// The plan's checks from the scenario's: names resolved to nodes (ones vemu makes) and
/// addresses, starts to the lab clock; what cannot be is an error at its entry.
/// A `valley_free` check on `node`: its router software (BIRD or FRR) and its AS (`asn`,
/// or its name's `as<ASN>`), which must be in `graph`.
fn valley_free_check(
    node: &NodePlan,
    asn: Option<u32>,
    graph: &crate::asgraph::AsGraph,
    routes: usize,
) -> Result<crate::expect::Check, String> {
    let name = &node.name;
    let Some(software) = crate::asgraph::BgpSoftware::of(node.router.as_deref()) else {
        return Err(format!("node '{name}' runs no BGP router vemu reads (kind bird or frr)"));
    };
    let Some(asn) = asn.or_else(|| name.strip_prefix("as")?.parse().ok()) else {
        return Err(format!("node '{name}' is not named as<ASN>: give its 'asn'"));
    };
    if !graph.ases.contains(&asn) {
        return Err(format!("AS {asn} is not in the relationships"));
    }
    Ok(crate::expect::Check::ValleyFree {
        node: name.clone(),
        asn,
        software,
        graph: graph.clone(),
        routes,
    })
}

fn resolve_expects(s: &Scenario, plan: &mut Plan, errors: &mut Vec<Error>) {
    let mut err = |mark: crate::yaml::Mark, field: &str, message: String| {
        errors.push(Error { line: mark.line, col: mark.col, field: field.into(), message })
    };
    // The timeline's names.
    let mut events: std::collections::HashMap<&str, u64> = Default::default();
    for e in &s.events {
        let Some(name) = &e.name else { continue };
        if events.insert(name, e.event.at_ns).is_some() {
            err(e.mark, &format!("{}.name", e.field), format!("two events are named '{name}'"));
        }
    }
    let made = |name: &str| -> Result<usize, String> {
        match plan.node_index(name) {
            None => Err(format!("unknown node '{name}'")),
            Some(i) if !plan.nodes[i].kind.is_made() => Err(format!(
                "node '{name}' is of kind '{}': vemu runs nothing there",
                plan.nodes[i].kind.name()
            )),
            Some(i) => Ok(i),
        }
    };
    let addrs = |i: usize| -> Vec<IpAddr> {
        let n = &plan.nodes[i];
        n.loopback.iter().chain(n.ifaces.iter().flat_map(|f| &f.addrs)).map(|a| a.addr()).collect()
    };
    let mut out = Vec::new();
    let mut names = std::collections::HashSet::new();
    for d in &s.expects {
        let check = match &d.check {
            crate::expect::CheckDef::Reach { from, to, port } => made(from).and_then(|_| {
                let to_addr = match to.parse::<IpAddr>() {
                    Ok(a) => a,
                    Err(_) => {
                        let i = plan.node_index(to).ok_or_else(|| {
                            format!("'{to}' is neither a node of the lab nor an address")
                        })?;
                        // Its first IPv4 address (a loopback's first), else its first.
                        let all = addrs(i);
                        *all.iter()
                            .find(|a| a.is_ipv4())
                            .or(all.first())
                            .ok_or_else(|| format!("node '{to}' has no address to reach"))?
                    }
                };
                Ok(crate::expect::Check::Reach {
                    from: from.clone(),
                    to: to_addr,
                    to_name: to.clone(),
                    port: *port,
                })
            }),
            crate::expect::CheckDef::Route { node, prefix, via } => made(node).and_then(|_| {
                let via_addrs = match via {
                    None => Vec::new(),
                    Some(v) => addrs(plan.node_index(v).ok_or(format!("unknown node '{v}'"))?),
                };
                Ok(crate::expect::Check::Route {
                    node: node.clone(),
                    prefix: *prefix,
                    via: via.clone(),
                    via_addrs,
                })
            }),
            crate::expect::CheckDef::Run { node, cmd, exit, output } => {
                made(node).map(|_| crate::expect::Check::Run {
                    node: node.clone(),
                    cmd: cmd.clone(),
                    exit: *exit,
                    output: output.clone(),
                })
            }
            crate::expect::CheckDef::ValleyFree { node, asn, graph, routes } => {
                made(node).and_then(|i| valley_free_check(&plan.nodes[i], *asn, graph, *routes))
            }
            crate::expect::CheckDef::Fidelity { worst } => {
                Ok(crate::expect::Check::Fidelity { worst: worst.clone() })
            }
            crate::expect::CheckDef::Flow(f) => {
                made(&f.from).and_then(|a| made(&f.to).map(|b| (a, b))).and_then(|(a, b)| {
                    if a == b {
                        return Err(format!(
                            "a flow needs two different nodes, not '{}' twice",
                            f.from
                        ));
                    }
                    if addrs(b).is_empty() {
                        return Err(format!("node '{}' has no address to send to", f.to));
                    }
                    Ok(crate::expect::Check::Flow(f.clone()))
                })
            }
            crate::expect::CheckDef::Drops { link, at_most } => {
                plan.find_link(link).map(|(i, _)| crate::expect::Check::Drops {
                    link: i,
                    link_name: link.clone(),
                    at_most: *at_most,
                })
            }
        };
        let check = match check {
            Ok(c) => c,
            Err(m) => {
                err(d.mark, &d.field, m);
                continue;
            }
        };
        let start_ns = match &d.after {
            None => d.at_ns.unwrap_or(0),
            Some((name, mark)) => match events.get(name.as_str()) {
                Some(&at) => at,
                None => {
                    let mut known: Vec<&str> = events.keys().copied().collect();
                    known.sort_unstable();
                    let said = if known.is_empty() {
                        "the timeline names none (give an event a 'name')".to_string()
                    } else {
                        format!("named events: {}", known.join(", "))
                    };
                    err(
                        *mark,
                        &format!("{}.after", d.field),
                        format!("no event is named '{name}' ({said})"),
                    );
                    continue;
                }
            },
        };
        let name = d.name.clone().unwrap_or_else(|| check.describe());
        if !names.insert(name.clone()) {
            err(d.mark, &d.field, format!("two checks are named '{name}' (give one a 'name')"));
            continue;
        }
        out.push(crate::expect::Expectation {
            name,
            start_ns,
            after: d.after.as_ref().map(|(n, _)| n.clone()),
            within_ns: d.within_ns,
            check,
        });
    }
    plan.expect = out;
}
