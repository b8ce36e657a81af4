//! From a validated [`Scenario`] to a [`Plan`]: interface names, MAC addresses,
//! automatic addresses, `/etc/hosts` and shortest-path static routes.

mod bridge;
mod rules;

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

/// Hands out subnets of a pool in address order, each aligned to its size, skipping
/// ones that overlap explicit addresses.
struct Pool {
    pool: Option<IpNet>,
    /// Offset of the next free address from the pool's start.
    cursor: u128,
    taken: Vec<IpNet>,
}

fn bits(n: &IpNet) -> u8 {
    if n.addr().is_ipv4() {
        32
    } else {
        128
    }
}

fn addr_u128(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(a) => u32::from(a) as u128,
        IpAddr::V6(a) => u128::from(a),
    }
}

fn net_at(v6: bool, base: u128, prefix: u8) -> IpNet {
    if v6 {
        IpNet::V6(Ipv6Net::new(Ipv6Addr::from(base), prefix).unwrap())
    } else {
        IpNet::V4(Ipv4Net::new(Ipv4Addr::from(base as u32), prefix).unwrap())
    }
}

impl Pool {
    fn new(pool: Option<IpNet>, taken: Vec<IpNet>) -> Pool {
        Pool { pool, cursor: 0, taken }
    }

    /// The next free subnet with this prefix length.
    fn next(&mut self, prefix: u8) -> Option<IpNet> {
        let pool = self.pool?;
        let b = bits(&pool);
        if prefix < pool.prefix_len() || prefix > b {
            return None;
        }
        let size = 1u128.checked_shl((b - prefix) as u32)?;
        let pool_size = 1u128.checked_shl((b - pool.prefix_len()) as u32).unwrap_or(u128::MAX);
        let base = addr_u128(pool.network());
        loop {
            self.cursor = self.cursor.checked_add(size - 1)? / size * size;
            if self.cursor.checked_add(size)? > pool_size {
                return None;
            }
            let net = net_at(b == 128, base + self.cursor, prefix);
            self.cursor += size;
            if !self.taken.iter().any(|t| t.contains(&net.network()) || net.contains(&t.network()))
            {
                return Some(net);
            }
        }
    }
}

/// Two host addresses in `net` for the two ends of a link.
fn two_hosts(net: IpNet) -> (IpNet, IpNet) {
    let p = net.prefix_len();
    let base = addr_u128(net.network());
    let first = if p == 31 { base } else { base + 1 };
    let v6 = net.addr().is_ipv6();
    let mk = |a: u128| net_at(v6, a, p);
    (mk(first), mk(first + 1))
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
            if used[e.node].insert(cand.clone()) {
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

fn check_ipv6_mtu(errors: &mut Vec<Error>, mtu: u32, addrs: &[IpNet], mark: Mark, field: &str) {
    if mtu < 1280 && addrs.iter().any(|a| a.addr().is_ipv6()) {
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
    let links = link_plans(s, &mut nodes, &mut wiring, &link_addrs, &mut errors);
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
    if s.static_routing {
        // Checked before any search: n nodes on a graph of l links hold up to n*l routes.
        let lans = segments.iter().filter(|g| g.wireless.is_none()).count();
        let loopbacks = nodes.iter().filter(|n| !n.loopback.is_empty()).count();
        let most = nodes.len() as u64 * (links.len() + lans + loopbacks) as u64;
        if most > crate::MAX_STATIC_ROUTES {
            let m = format!(
                "static routing would give the {} nodes up to {most} routes in all (more than {}): write 'routing: none' and run a routing daemon in the nodes, or join nodes in LAN segments",
                nodes.len(),
                crate::MAX_STATIC_ROUTES
            );
            return Err(vec![Error {
                line: s.routing_mark.line,
                col: s.routing_mark.col,
                field: "routing".into(),
                message: m,
            }]);
        }
        static_routes(&mut nodes, &links, &segments);
    }
    for (ni, def) in s.nodes.iter().enumerate() {
        for r in &def.routes {
            nodes[ni].routes.retain(|x| (x.dst, x.table) != (r.dst, r.table));
            let (dst, via, dev, table) = (r.dst, r.via, r.dev.clone(), r.table);
            nodes[ni].routes.push(RoutePlan { dst, via, dev, table });
        }
        nodes[ni].rules = def.rules.iter().map(|r| r.rule.clone()).collect();
    }

    let hosts = hosts_entries(&nodes);
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
        hosts,
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
    link_addrs: &[[Vec<IpNet>; 2]],
    errors: &mut Vec<Error>,
) -> Vec<LinkPlan> {
    let mut links = Vec::new();
    for (li, l) in s.links.iter().enumerate() {
        let addrs = &link_addrs[li];
        let mtu = port_mtu([&l.forward, &l.reverse]);
        check_ipv6_mtu(errors, mtu, &addrs.concat(), l.mark, &l.field);
        let mut refs = [EndpointRef { node: 0, iface: 0 }; 2];
        for (k, e) in l.ends.iter().enumerate() {
            refs[k] = wiring.add(s, nodes, e, mtu, addrs[k].clone(), Attach::Link(li));
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

/// Loopbacks: explicit ones, else the next address of the loopback pools (not among
/// `explicit`, the addresses the scenario gives).
fn loopbacks(s: &Scenario, nodes: &mut [NodePlan], explicit: Vec<IpNet>, errors: &mut Vec<Error>) {
    // Loopbacks: explicit ones, else the next address of the loopback pools.
    // They start at the pool's first host address (10.255.0.1, not 10.255.0.0).
    let mut lo4 = Pool {
        cursor: 1,
        ..Pool::new(s.addressing.loopback_ipv4.map(IpNet::V4), explicit.clone())
    };
    let mut lo6 =
        Pool { cursor: 1, ..Pool::new(s.addressing.loopback_ipv6.map(IpNet::V6), explicit) };
    // (Not on the host: vemu does not change the machine's own loopback.)
    for n in nodes.iter_mut().filter(|n| n.kind.is_made()) {
        for (pool, v6fam, len) in [(&mut lo4, false, 32), (&mut lo6, true, 128)] {
            if pool.pool.is_some() && !n.loopback.iter().any(|l| l.addr().is_ipv6() == v6fam) {
                match pool.next(len) {
                    Some(net) => n.loopback.push(net),
                    None => err(
                        errors,
                        s.addressing_mark,
                        "addressing",
                        format!("the loopback pool has no address left for node '{}'", n.name),
                    ),
                }
            }
        }
    }
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

/// The lab's `/etc/hosts` entries: each node's loopback and interface addresses
/// (IPv4 first) with its name.
fn hosts_entries(nodes: &[NodePlan]) -> Vec<(IpAddr, String)> {
    let mut hosts = Vec::new();
    for n in nodes {
        let mut addrs: Vec<IpAddr> = n
            .loopback
            .iter()
            .chain(n.ifaces.iter().flat_map(|i| i.addrs.iter()))
            .map(|a| a.addr())
            .collect();
        addrs.sort_by_key(|a| a.is_ipv6());
        hosts.extend(addrs.into_iter().map(|a| (a, n.name.clone())));
    }
    hosts
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

/// Addresses for the two ends of a link: explicit ones, or a fresh subnet per family.
fn link_addresses(
    l: &LinkDef,
    v4: &mut Pool,
    v6: &mut Pool,
    s: &Scenario,
    errors: &mut Vec<Error>,
) -> [Vec<IpNet>; 2] {
    let mut out = [l.ends[0].ips.clone(), l.ends[1].ips.clone()];
    for v6fam in [false, true] {
        let has = |k: usize| out[k].iter().any(|a| a.addr().is_ipv6() == v6fam);
        let fam = if v6fam { "IPv6" } else { "IPv4" };
        if l.ends.iter().any(|e| e.unaddressed) {
            // A bridge's port: the other end keeps what it was given, nothing is handed out.
            continue;
        }
        match (has(0), has(1)) {
            (false, false) => {
                let net = if v6fam {
                    v6.next(s.addressing.ipv6_prefix)
                } else {
                    v4.next(s.addressing.ipv4_prefix)
                };
                let enabled =
                    if v6fam { s.addressing.ipv6.is_some() } else { s.addressing.ipv4.is_some() };
                match net {
                    Some(net) => {
                        let (a, b) = two_hosts(net);
                        out[0].push(a);
                        out[1].push(b);
                    }
                    None if enabled => err(
                        errors,
                        s.addressing_mark,
                        "addressing",
                        format!("the {fam} pool has no subnet left for {}", l.field),
                    ),
                    None => {}
                }
            }
            (true, true) => {
                let a = out[0].iter().find(|a| a.addr().is_ipv6() == v6fam).unwrap();
                let b = out[1].iter().find(|a| a.addr().is_ipv6() == v6fam).unwrap();
                if !a.contains(&b.addr()) || !b.contains(&a.addr()) || a.addr() == b.addr() {
                    err(errors, l.mark, &l.field, format!("the ends' {fam} addresses {a} and {b} must be different addresses in one subnet"));
                }
            }
            (x, _) => {
                let (with, without) =
                    if x { (&l.ends[0], &l.ends[1]) } else { (&l.ends[1], &l.ends[0]) };
                err(
                    errors,
                    without.mark,
                    &without.field,
                    format!(
                        "{} has an {fam} address but {} has none: give both ends an address, or neither",
                        s.nodes[with.node].name, s.nodes[without.node].name
                    ),
                );
            }
        }
    }
    out
}

/// Addresses of every member of a segment: one subnet per family (given, taken from the
/// members' explicit addresses, or from the pool), explicit addresses kept, the others
/// handed out in member order.
fn segment_addresses(
    g: &SegmentDef,
    v4: &mut Pool,
    v6: &mut Pool,
    s: &Scenario,
    errors: &mut Vec<Error>,
) -> Vec<Vec<IpNet>> {
    let mut out: Vec<Vec<IpNet>> = g.members.iter().map(|m| m.end.ips.clone()).collect();
    for (fi, v6fam) in [false, true].into_iter().enumerate() {
        let fam = if v6fam { "IPv6" } else { "IPv4" };
        let key = if v6fam { "ipv6" } else { "ipv4" };
        let first_explicit = g
            .members
            .iter()
            .flat_map(|m| m.end.ips.iter())
            .find(|a| a.addr().is_ipv6() == v6fam)
            .map(|a| a.trunc());
        let net = match g.subnets[fi] {
            SubnetChoice::Off => {
                if let Some(m) =
                    g.members.iter().find(|m| m.end.ips.iter().any(|a| a.addr().is_ipv6() == v6fam))
                {
                    err(
                        errors,
                        m.end.mark,
                        &m.end.field,
                        format!("has an {fam} address but the segment has '{key}: none'"),
                    );
                }
                continue;
            }
            SubnetChoice::Given(n) => n,
            SubnetChoice::Auto => match first_explicit {
                Some(n) => n,
                None => {
                    // Room for every member plus the network and broadcast addresses;
                    // at least a /24 (IPv4) or the pool's per-link prefix (IPv6).
                    let need =
                        (g.members.len() as u128 + 2).next_power_of_two().trailing_zeros() as u8;
                    let (pool, enabled, prefix) = if v6fam {
                        (
                            &mut *v6,
                            s.addressing.ipv6.is_some(),
                            s.addressing.ipv6_prefix.min(128 - need),
                        )
                    } else {
                        (&mut *v4, s.addressing.ipv4.is_some(), 24u8.min(32 - need))
                    };
                    match pool.next(prefix) {
                        Some(n) => n,
                        None if enabled => {
                            err(
                                errors,
                                s.addressing_mark,
                                "addressing",
                                format!("the {fam} pool has no /{prefix} left for {}", g.field),
                            );
                            continue;
                        }
                        None => continue,
                    }
                }
            },
        };
        let mut taken: HashSet<u128> = HashSet::new();
        for (m, addrs) in g.members.iter().zip(&out) {
            for a in addrs.iter().filter(|a| a.addr().is_ipv6() == v6fam) {
                if a.trunc() != net {
                    err(
                        errors,
                        m.end.mark,
                        &m.end.field,
                        format!("address {a} is not in the segment's subnet {net}"),
                    );
                } else if !taken.insert(addr_u128(a.addr())) {
                    err(
                        errors,
                        m.end.mark,
                        &m.end.field,
                        format!("address {} is used twice on the segment", a.addr()),
                    );
                }
            }
        }
        let base = addr_u128(net.network());
        let size = 1u128.checked_shl((bits(&net) - net.prefix_len()) as u32).unwrap_or(u128::MAX);
        let mut next = 1u128;
        for (m, addrs) in g.members.iter().zip(out.iter_mut()) {
            if m.end.unaddressed || addrs.iter().any(|a| a.addr().is_ipv6() == v6fam) {
                continue;
            }
            while taken.contains(&(base + next)) {
                next += 1;
            }
            // IPv4 keeps the last address for broadcast.
            if next >= size - if v6fam { 0 } else { 1 } {
                err(
                    errors,
                    m.end.mark,
                    &m.end.field,
                    format!("the segment's subnet {net} has no {fam} address left"),
                );
                break;
            }
            addrs.push(net_at(v6fam, base + next, net.prefix_len()));
            next += 1;
        }
    }
    out
}

/// Shortest paths (sum of link and segment weights) from every node; each node gets a
/// route to every subnet it is not attached to and to every other node's loopback
/// addresses, via the neighbour on the first hop. A segment is a vertex of its own:
/// entering it costs its weight, leaving it nothing. Ties go to the lower-numbered link
/// or segment, so routes are deterministic.
fn static_routes(nodes: &mut [NodePlan], links: &[LinkPlan], segments: &[SegmentPlan]) {
    let n = nodes.len();
    let v = n + segments.len();
    let mut adj: Vec<Vec<(usize, Attach, u64)>> = vec![Vec::new(); v];
    for (li, l) in links.iter().enumerate() {
        adj[l.a.node].push((l.b.node, Attach::Link(li), l.weight as u64));
        adj[l.b.node].push((l.a.node, Attach::Link(li), l.weight as u64));
    }
    // Ad hoc radio channels are left to routing daemons: who hears whom changes as nodes
    // move. An infrastructure channel is routed as a LAN: its stations reach their
    // access point, and each other through it, wherever they are.
    for (gi, g) in segments.iter().enumerate().filter(|(_, g)| g.routed()) {
        for (mi, m) in g.members.iter().enumerate() {
            adj[m.end.node].push((n + gi, Attach::Segment(gi, mi), g.weight as u64));
            adj[n + gi].push((m.end.node, Attach::Segment(gi, mi), 0));
        }
    }
    let subnets_of = |e: EndpointRef| -> Vec<IpNet> {
        let mut v: Vec<IpNet> =
            nodes[e.node].ifaces[e.iface].addrs.iter().map(|a| a.trunc()).collect();
        v.dedup();
        v
    };
    let link_nets: Vec<Vec<IpNet>> = links.iter().map(|l| subnets_of(l.a)).collect();
    let seg_nets: Vec<Vec<IpNet>> = segments
        .iter()
        .map(|g| {
            let mut all: Vec<IpNet> = g.members.iter().flat_map(|m| subnets_of(m.end)).collect();
            all.sort();
            all.dedup();
            all
        })
        .collect();
    let loopbacks: Vec<Vec<IpNet>> = nodes.iter().map(|x| x.loopback.clone()).collect();
    let with_loopback: Vec<usize> = (0..n).filter(|&i| !loopbacks[i].is_empty()).collect();
    let lans = segments.iter().filter(|g| g.routed()).count();
    for src in 0..n {
        let mut attached: HashSet<Attach> = HashSet::new();
        for i in &nodes[src].ifaces {
            attached.insert(match i.attach {
                Attach::Segment(g, _) => Attach::Segment(g, 0),
                a => a,
            });
        }
        // Nothing to route to (e.g. every member of one big LAN): no search, so that a
        // LAN of N hosts costs N, not N squared.
        let own_links = attached.iter().filter(|a| matches!(a, Attach::Link(_))).count();
        let own_lans = attached
            .iter()
            .filter(|a| matches!(a, Attach::Segment(g, _) if segments[*g].routed()))
            .count();
        let other_loopbacks = with_loopback.iter().any(|&d| d != src);
        if own_links == links.len() && own_lans == lans && !other_loopbacks {
            nodes[src].routes = Vec::new();
            continue;
        }
        // first[v] = (how the first hop is reached, the neighbour it leads to)
        let mut dist = vec![u64::MAX; v];
        let mut first: Vec<Option<(Attach, usize)>> = vec![None; v];
        let mut heap = BinaryHeap::new();
        dist[src] = 0;
        heap.push(Reverse((0u64, src)));
        while let Some(Reverse((d, u))) = heap.pop() {
            if d > dist[u] {
                continue;
            }
            for &(w, att, cost) in &adj[u] {
                let nd = d + cost;
                if nd < dist[w] {
                    dist[w] = nd;
                    let direct_seg = u >= n && first[u].is_none();
                    first[w] =
                        if (u == src && w < n) || direct_seg { Some((att, w)) } else { first[u] };
                    heap.push(Reverse((nd, w)));
                }
            }
        }
        type Target<'a> = (Option<(Attach, usize)>, &'a [IpNet]);
        let mut targets: Vec<Target> = Vec::new();
        for (li, l) in links.iter().enumerate() {
            if !attached.contains(&Attach::Link(li)) {
                let end = if dist[l.a.node] <= dist[l.b.node] { l.a.node } else { l.b.node };
                targets.push((first[end], &link_nets[li]));
            }
        }
        for gi in 0..segments.len() {
            if !attached.contains(&Attach::Segment(gi, 0)) && segments[gi].routed() {
                targets.push((first[n + gi], &seg_nets[gi]));
            }
        }
        for &dst in &with_loopback {
            if dst != src {
                targets.push((first[dst], &loopbacks[dst]));
            }
        }
        // (destination, next hop's number in `gateways`)
        let mut routes: Vec<(IpNet, usize)> = Vec::new();
        let mut gateways: Vec<IpAddr> = Vec::new();
        for (hop, nets) in targets {
            let Some((att, nb)) = hop else { continue };
            let nb_iface = nodes[nb].ifaces.iter().find(|i| match (i.attach, att) {
                (Attach::Segment(g1, _), Attach::Segment(g2, _)) => g1 == g2,
                (a, b) => a == b,
            });
            let Some(nb_iface) = nb_iface else { continue };
            for net in nets {
                if let Some(gw) =
                    nb_iface.addrs.iter().find(|a| a.addr().is_ipv6() == net.addr().is_ipv6())
                {
                    let k = gateways.iter().position(|g| *g == gw.addr()).unwrap_or_else(|| {
                        gateways.push(gw.addr());
                        gateways.len() - 1
                    });
                    routes.push((*net, k));
                }
            }
        }
        // Fewer, wider routes where that changes no forwarding decision (a 1000-node
        // tree: ~20 routes a node instead of 999).
        let own: Vec<IpNet> = nodes[src]
            .ifaces
            .iter()
            .flat_map(|i| i.addrs.iter().map(|a| a.trunc()))
            .chain(nodes[src].loopback.iter().copied())
            .collect();
        // (A subnet the node is on is reached there: two segments may share one, as
        // a LAN and the BSS an access point bridges to it do.)
        routes.retain(|(net, _)| !own.contains(net));
        nodes[src].routes = crate::aggregate::aggregate(&routes, &own)
            .into_iter()
            .map(|(dst, k)| RoutePlan {
                dst,
                via: Some(gateways[k]),
                dev: None,
                table: crate::policy::MAIN_TABLE,
            })
            .collect();
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
