//! Whether a lab's routing has converged: every node vemu made has a route to every
//! prefix of the lab (the subnets of its links and LANs, and the loopbacks) of each
//! family it has addresses of — a default route covers all. What `vemu up
//! --wait-converged` waits for: routing daemons (OSPF, BGP, Babel) need seconds after
//! the lab is up before a node reaches every other.

use ipnet::IpNet;
use serde::Serialize;
use vemu_host::netlink::Netlink;
use vemu_host::LabPaths;
use vemu_scenario::Plan;

/// How many nodes, and prefixes each, an answer lists at most.
const LISTED: usize = 10;

/// Every prefix of the lab: the networks of the nodes' addresses and loopbacks.
pub fn lab_prefixes(plan: &Plan) -> Vec<IpNet> {
    let mut v: Vec<IpNet> = plan
        .nodes
        .iter()
        .flat_map(|n| n.ifaces.iter().flat_map(|i| i.addrs.iter()).chain(&n.loopback))
        .map(|a| a.trunc())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The prefixes of `needed` no route of `have` covers, in the families `v4`/`v6`.
pub fn uncovered(needed: &[IpNet], have: &[IpNet], v4: bool, v6: bool) -> Vec<IpNet> {
    needed
        .iter()
        .filter(|n| if n.addr().is_ipv4() { v4 } else { v6 })
        .filter(|n| {
            !have.iter().any(|h| h.prefix_len() <= n.prefix_len() && h.contains(&n.network()))
        })
        .copied()
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

    #[test]
    fn a_prefix_is_covered_by_a_route_to_it_or_to_a_wider_one() {
        let needed =
            nets(&["10.0.0.0/30", "10.0.0.4/30", "10.255.0.2/32", "fd00::/64", "fd00:ff::2/128"]);
        // Connected routes and one learnt route: the rest is lacking.
        let have = nets(&["10.0.0.0/30", "10.255.0.0/24", "fd00::/64"]);
        assert_eq!(uncovered(&needed, &have, true, true), nets(&["10.0.0.4/30", "fd00:ff::2/128"]));
        // A narrower route does not cover a wider prefix.
        assert_eq!(
            uncovered(&nets(&["10.0.0.0/24"]), &nets(&["10.0.0.0/25"]), true, true),
            nets(&["10.0.0.0/24"])
        );
        // Default routes cover their family.
        assert!(uncovered(&needed, &nets(&["0.0.0.0/0", "::/0"]), true, true).is_empty());
        // A family the node has no address of is not asked for.
        assert!(uncovered(&needed, &nets(&["0.0.0.0/0"]), true, false).is_empty());
    }
}
