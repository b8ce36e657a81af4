//! Whether a lab's routing has converged: every node vemu made has a route to every
//! prefix of the lab (the subnets of its links and LANs, and the loopbacks) of each
//! family it has addresses of — a default route covers all, and routes to each of the
//! lab's addresses in a prefix cover it too (Babel announces host routes, not subnets).
//! What `vemu up --wait-converged` waits for: routing daemons (OSPF, BGP, Babel) need
//! seconds after the lab is up before a node reaches every other.

use ipnet::IpNet;
use serde::Serialize;
use vemu_host::netlink::Netlink;
use vemu_host::LabPaths;
use vemu_scenario::Plan;

/// How many nodes, and prefixes each, an answer lists at most.
const LISTED: usize = 10;

/// A prefix of the lab, and the lab's addresses in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Needed {
    pub prefix: IpNet,
    pub addrs: Vec<std::net::IpAddr>,
}

/// Every prefix of the lab: the networks of the nodes' addresses and loopbacks, each
/// with the addresses the lab has in it.
pub fn lab_prefixes(plan: &Plan) -> Vec<Needed> {
    let mut all: Vec<(IpNet, std::net::IpAddr)> = plan
        .nodes
        .iter()
        .flat_map(|n| n.ifaces.iter().flat_map(|i| i.addrs.iter()).chain(&n.loopback))
        .map(|a| (a.trunc(), a.addr()))
        .collect();
    all.sort();
    all.dedup();
    let mut v: Vec<Needed> = Vec::new();
    for (prefix, addr) in all {
        match v.last_mut() {
            Some(last) if last.prefix == prefix => last.addrs.push(addr),
            _ => v.push(Needed { prefix, addrs: vec![addr] }),
        }
    }
    v
}

/// The prefixes of `needed` that `have` does not cover, in the families `v4`/`v6`: no
/// route to the prefix or a wider one, nor routes to each of its lab addresses.
pub fn uncovered(needed: &[Needed], have: &[IpNet], v4: bool, v6: bool) -> Vec<IpNet> {
    needed
        .iter()
        .filter(|n| if n.prefix.addr().is_ipv4() { v4 } else { v6 })
        .filter(|n| {
            let whole = |h: &IpNet| {
                h.prefix_len() <= n.prefix.prefix_len() && h.contains(&n.prefix.network())
            };
            let each = || n.addrs.iter().all(|a| have.iter().any(|h| h.contains(a)));
            !have.iter().any(whole) && !each()
        })
        .map(|n| n.prefix)
        .collect()
}

/// A node that lacks routes, and (some of) the prefixes it lacks.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Lacking {
    pub node: String,
    pub prefixes: Vec<String>,
}

/// `GET /v1/convergence`: whether every node vemu made has a route to every prefix of
/// the lab.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Convergence {
    pub converged: bool,
    /// Nodes still lacking a route.
    pub nodes_lacking: usize,
    /// The first of them.
    pub lacking: Vec<Lacking>,
}

/// Look at every node's routing table (one netlink dump each). Nodes vemu does not
/// make (the machine itself, a NIC's wire) are not looked at.
pub fn check(paths: &LabPaths, plan: &Plan) -> anyhow::Result<Convergence> {
    let needed = lab_prefixes(plan);
    let mut lacking = Vec::new();
    let mut nodes_lacking = 0;
    for n in plan.nodes.iter().filter(|n| n.kind.is_made()) {
        let addrs = || n.ifaces.iter().flat_map(|i| i.addrs.iter()).chain(&n.loopback);
        let (v4, v6) = (addrs().any(|a| a.addr().is_ipv4()), addrs().any(|a| a.addr().is_ipv6()));
        // Its own addresses' prefixes are its own (a loopback's is in the local table).
        let mut have: Vec<IpNet> = addrs().map(|a| a.trunc()).collect();
        have.extend(Netlink::open_in(&paths.netns_pin(&n.name))?.route_destinations()?);
        let missing = uncovered(&needed, &have, v4, v6);
        if !missing.is_empty() {
            nodes_lacking += 1;
            if lacking.len() < LISTED {
                lacking.push(Lacking {
                    node: n.name.clone(),
                    prefixes: missing.iter().take(LISTED).map(|p| p.to_string()).collect(),
                });
            }
        }
    }
    Ok(Convergence { converged: nodes_lacking == 0, nodes_lacking, lacking })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nets(v: &[&str]) -> Vec<IpNet> {
        v.iter().map(|s| s.parse().unwrap()).collect()
    }

    /// Each prefix with its network's first two addresses (a link's two ends).
    fn needs(v: &[&str]) -> Vec<Needed> {
        nets(v)
            .into_iter()
            .map(|p| Needed { prefix: p, addrs: p.hosts().take(2).collect() })
            .collect()
    }

    #[test]
    fn a_prefix_is_covered_by_a_route_to_it_or_to_a_wider_one() {
        let needed =
            needs(&["10.0.0.0/30", "10.0.0.4/30", "10.255.0.2/32", "fd00::/64", "fd00:ff::2/128"]);
        // Connected routes and one learnt route: the rest is lacking.
        let have = nets(&["10.0.0.0/30", "10.255.0.0/24", "fd00::/64"]);
        assert_eq!(uncovered(&needed, &have, true, true), nets(&["10.0.0.4/30", "fd00:ff::2/128"]));
        // A narrower route does not cover a wider prefix (one of whose addresses is
        // beyond it).
        let lan = [Needed {
            prefix: "10.0.0.0/24".parse().unwrap(),
            addrs: vec!["10.0.0.1".parse().unwrap(), "10.0.0.200".parse().unwrap()],
        }];
        assert_eq!(uncovered(&lan, &nets(&["10.0.0.0/25"]), true, true), nets(&["10.0.0.0/24"]));
        // Babel's host routes (issue 61: babel-mesh.yaml never converged): a route to
        // each of the lab's addresses in a prefix covers it; to some of them, not.
        let link = needs(&["10.0.0.4/30"]);
        assert_eq!(link[0].addrs.len(), 2);
        assert!(uncovered(&link, &nets(&["10.0.0.5/32", "10.0.0.6/32"]), true, true).is_empty());
        assert_eq!(uncovered(&link, &nets(&["10.0.0.5/32"]), true, true), nets(&["10.0.0.4/30"]));
        // Default routes cover their family.
        assert!(uncovered(&needed, &nets(&["0.0.0.0/0", "::/0"]), true, true).is_empty());
        // A family the node has no address of is not asked for.
        assert!(uncovered(&needed, &nets(&["0.0.0.0/0"]), true, false).is_empty());
    }
}
