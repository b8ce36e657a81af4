//! From a validated [`Scenario`] to a [`Plan`]: interface names, MAC addresses,
//! automatic addresses, `/etc/hosts` and shortest-path static routes.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use crate::parse::{LinkDef, Scenario};
use crate::{EndpointRef, Error, IfacePlan, LinkPlan, NodePlan, Plan, RoutePlan};

/// Interface MTU when the link sets none, bytes.
pub const DEFAULT_MTU: u32 = 1500;

fn err(errors: &mut Vec<Error>, mark: crate::yaml::Mark, field: &str, message: String) {
    errors.push(Error { line: mark.line, col: mark.col, field: field.to_string(), message });
}

/// Hands out the subnets of a pool in order, skipping ones that overlap explicit addresses.
struct Pool<N> {
    subnets: Option<Box<dyn Iterator<Item = N>>>,
    taken: Vec<IpNet>,
}

impl<N: Into<IpNet> + Copy> Pool<N> {
    fn next(&mut self) -> Option<IpNet> {
        let it = self.subnets.as_mut()?;
        it.map(Into::into).find(|n: &IpNet| !self.taken.iter().any(|t| t.contains(&n.network()) || n.contains(&t.network())))
    }
}

/// Two host addresses in `net` for the two ends of a link.
fn two_hosts(net: IpNet) -> (IpNet, IpNet) {
    let p = net.prefix_len();
    match net {
        IpNet::V4(n) => {
            let base = u32::from(n.network());
            let first = if p == 31 { base } else { base + 1 };
            let mk = |a: u32| IpNet::V4(Ipv4Net::new(Ipv4Addr::from(a), p).unwrap());
            (mk(first), mk(first + 1))
        }
        IpNet::V6(n) => {
            let base = u128::from(n.network());
            let mk = |a: u128| IpNet::V6(Ipv6Net::new(Ipv6Addr::from(a), p).unwrap());
            (mk(base + 1), mk(base + 2))
        }
    }
}

pub fn build_plan(s: &Scenario) -> Result<Plan, Vec<Error>> {
    let mut errors = Vec::new();
    let mut nodes: Vec<NodePlan> = s
        .nodes
        .iter()
        .map(|n| NodePlan { name: n.name.clone(), ifaces: Vec::new(), routes: Vec::new(), run: n.run.clone() })
        .collect();

    // Interface names: explicit names first, then eth0, eth1, ... skipping taken ones.
    let mut used: Vec<HashSet<String>> = vec![HashSet::new(); nodes.len()];
    for l in &s.links {
        for e in &l.ends {
            if let Some(name) = &e.iface {
                if !used[e.node].insert(name.clone()) {
                    err(&mut errors, e.mark, &e.field, format!("node '{}' already has an interface '{name}'", s.nodes[e.node].name));
                }
            }
        }
    }
    let explicit: Vec<IpNet> = s.links.iter().flat_map(|l| l.ends.iter().flat_map(|e| e.ips.iter().map(|n| n.trunc()))).collect();
    let mut v4 = Pool {
        subnets: s.addressing.ipv4.and_then(|p| p.subnets(s.addressing.ipv4_prefix).ok()).map(|i| Box::new(i) as Box<dyn Iterator<Item = Ipv4Net>>),
        taken: explicit.clone(),
    };
    let mut v6 = Pool {
        subnets: s.addressing.ipv6.and_then(|p| p.subnets(s.addressing.ipv6_prefix).ok()).map(|i| Box::new(i) as Box<dyn Iterator<Item = Ipv6Net>>),
        taken: explicit,
    };
    if s.addressing.ipv4.is_some_and(|p| p.prefix_len() > s.addressing.ipv4_prefix)
        || s.addressing.ipv6.is_some_and(|p| p.prefix_len() > s.addressing.ipv6_prefix)
    {
        err(&mut errors, s.addressing_mark, "addressing", "the per-link prefix must be longer than the pool's prefix".into());
    }

    let mut next_auto = vec![0usize; nodes.len()];
    let mut links = Vec::new();
    for (li, l) in s.links.iter().enumerate() {
        let addrs = link_addresses(l, &mut v4, &mut v6, s, &mut errors);
        let mtu = [l.forward.mtu, l.reverse.mtu].into_iter().flatten().min().unwrap_or(DEFAULT_MTU);
        if mtu < 1280 && addrs.iter().flatten().any(|a| a.addr().is_ipv6()) {
            err(
                &mut errors,
                l.mark,
                &format!("{}.mtu", l.field),
                format!("IPv6 needs an MTU of at least 1280 bytes, got {mtu} (raise it, or set addressing: {{ipv6: none}})"),
            );
        }
        let mut refs = [EndpointRef { node: 0, iface: 0 }; 2];
        for (k, e) in l.ends.iter().enumerate() {
            let name = match &e.iface {
                Some(n) => n.clone(),
                None => loop {
                    let cand = format!("eth{}", next_auto[e.node]);
                    next_auto[e.node] += 1;
                    if used[e.node].insert(cand.clone()) {
                        break cand;
                    }
                },
            };
            let node = &mut nodes[e.node];
            let idx = node.ifaces.len();
            let mac = e.mac.unwrap_or_else(|| {
                let n = e.node as u32;
                [0x02, (n >> 16) as u8, (n >> 8) as u8, n as u8, (idx >> 8) as u8, idx as u8]
            });
            node.ifaces.push(IfacePlan { name, mac, mtu, addrs: addrs[k].clone(), link: li });
            refs[k] = EndpointRef { node: e.node, iface: idx };
        }
        let name = l.name.clone().unwrap_or_else(|| format!("{}:{}", s.nodes[l.ends[0].node].name, s.nodes[l.ends[1].node].name));
        links.push(LinkPlan { name, a: refs[0], b: refs[1], forward: l.forward.clone(), reverse: l.reverse.clone(), weight: l.weight });
    }
    let mut seen_macs = HashSet::new();
    for n in &nodes {
        for i in &n.ifaces {
            if !seen_macs.insert(i.mac) {
                errors.push(Error { line: 0, col: 0, field: String::new(), message: format!("MAC address of {}:{} is used twice", n.name, i.name) });
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }

    // Explicit routes: the gateway must be on a connected subnet, the device must exist.
    for (ni, def) in s.nodes.iter().enumerate() {
        for r in &def.routes {
            if let Some(dev) = &r.dev {
                if !nodes[ni].ifaces.iter().any(|i| &i.name == dev) {
                    err(&mut errors, r.mark, &r.field, format!("node '{}' has no interface '{dev}'", def.name));
                }
            }
            if let Some(via) = r.via {
                if !nodes[ni].ifaces.iter().any(|i| i.addrs.iter().any(|a| a.contains(&via))) {
                    err(&mut errors, r.mark, &r.field, format!("gateway {via} is not on any subnet of node '{}'", def.name));
                }
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    if s.static_routing {
        static_routes(&mut nodes, &links);
    }
    for (ni, def) in s.nodes.iter().enumerate() {
        for r in &def.routes {
            nodes[ni].routes.retain(|x| x.dst != r.dst);
            nodes[ni].routes.push(RoutePlan { dst: r.dst, via: r.via, dev: r.dev.clone() });
        }
    }

    let mut hosts = Vec::new();
    for n in &nodes {
        let mut addrs: Vec<IpAddr> = n.ifaces.iter().flat_map(|i| i.addrs.iter().map(|a| a.addr())).collect();
        addrs.sort_by_key(|a| a.is_ipv6());
        hosts.extend(addrs.into_iter().map(|a| (a, n.name.clone())));
    }
    Ok(Plan { name: s.name.clone(), seed: s.seed, nodes, links, hosts })
}

/// Addresses for the two ends of a link: explicit ones, or a fresh subnet per family.
fn link_addresses(
    l: &LinkDef,
    v4: &mut Pool<Ipv4Net>,
    v6: &mut Pool<Ipv6Net>,
    s: &Scenario,
    errors: &mut Vec<Error>,
) -> [Vec<IpNet>; 2] {
    let mut out = [l.ends[0].ips.clone(), l.ends[1].ips.clone()];
    for v6fam in [false, true] {
        let has = |k: usize| out[k].iter().any(|a| a.addr().is_ipv6() == v6fam);
        let fam = if v6fam { "IPv6" } else { "IPv4" };
        match (has(0), has(1)) {
            (false, false) => {
                let net = if v6fam { v6.next() } else { v4.next() };
                let enabled = if v6fam { s.addressing.ipv6.is_some() } else { s.addressing.ipv4.is_some() };
                match net {
                    Some(net) => {
                        let (a, b) = two_hosts(net);
                        out[0].push(a);
                        out[1].push(b);
                    }
                    None if enabled => err(errors, s.addressing_mark, "addressing", format!("the {fam} pool has no subnet left for {}", l.field)),
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
                let (with, without) = if x { (&l.ends[0], &l.ends[1]) } else { (&l.ends[1], &l.ends[0]) };
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

/// Shortest paths (sum of link weights) from every node; each node gets a route to every
/// subnet it is not attached to, via the neighbour on the first hop. Ties go to the
/// lower-numbered link, so routes are deterministic.
fn static_routes(nodes: &mut [NodePlan], links: &[LinkPlan]) {
    let n = nodes.len();
    let mut adj: Vec<Vec<(usize, usize, u64)>> = vec![Vec::new(); n];
    for (li, l) in links.iter().enumerate() {
        adj[l.a.node].push((l.b.node, li, l.weight as u64));
        adj[l.b.node].push((l.a.node, li, l.weight as u64));
    }
    // Subnets of every link, and the address each end has in each.
    let subnets: Vec<Vec<IpNet>> = links
        .iter()
        .map(|l| {
            let mut v: Vec<IpNet> = nodes[l.a.node].ifaces[l.a.iface].addrs.iter().map(|a| a.trunc()).collect();
            v.dedup();
            v
        })
        .collect();
    for src in 0..n {
        // first[v] = (link of the first hop, neighbour reached by it)
        let mut dist = vec![u64::MAX; n];
        let mut first: Vec<Option<(usize, usize)>> = vec![None; n];
        let mut heap = BinaryHeap::new();
        dist[src] = 0;
        heap.push(Reverse((0u64, src)));
        while let Some(Reverse((d, u))) = heap.pop() {
            if d > dist[u] {
                continue;
            }
            for &(v, li, w) in &adj[u] {
                let nd = d + w;
                if nd < dist[v] {
                    dist[v] = nd;
                    first[v] = if u == src { Some((li, v)) } else { first[u] };
                    heap.push(Reverse((nd, v)));
                }
            }
        }
        let attached: HashSet<usize> = nodes[src].ifaces.iter().map(|i| i.link).collect();
        let mut routes = Vec::new();
        for (li, l) in links.iter().enumerate() {
            if attached.contains(&li) {
                continue;
            }
            // Reach the link through whichever of its ends is nearer.
            let end = if dist[l.a.node] <= dist[l.b.node] { l.a.node } else { l.b.node };
            let Some((hop_link, nb)) = first[end] else { continue };
            let hl = &links[hop_link];
            let nb_iface = if hl.a.node == nb { &nodes[nb].ifaces[hl.a.iface] } else { &nodes[nb].ifaces[hl.b.iface] };
            for net in &subnets[li] {
                if let Some(gw) = nb_iface.addrs.iter().find(|a| a.addr().is_ipv6() == net.addr().is_ipv6()) {
                    routes.push(RoutePlan { dst: *net, via: Some(gw.addr()), dev: None });
                }
            }
        }
        nodes[src].routes = routes;
    }
}
