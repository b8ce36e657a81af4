//! Route aggregation for static routing: a node's routes to many subnets through the
//! same next hop become fewer routes to wider prefixes, where that changes no
//! forwarding decision. Full static routing gives every node a route to every subnet of
//! the lab — a million routes for a 1000-node tree, which the kernel takes minutes to
//! install — while the subnets behind one neighbour are mostly neighbours in the address
//! space (they are handed out in order).
//!
//! Two sibling prefixes (the halves of one prefix one bit shorter) merge into their
//! parent when both go the same way. The node's own (connected) subnets merge with
//! either way: the kernel's longest-prefix match keeps the connected route in force for
//! them. Nothing else is widened, so an address the lab does not use stays unrouted
//! (no loop where aggregates point at each other), and every address the lab uses is
//! forwarded exactly as by the full table.

use ipnet::IpNet;

/// Which way a prefix goes: a next hop (an index the caller gives meaning to), or the
/// node's own subnet (`Connected`: merges with any next hop).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    Hop(usize),
    Connected,
}

/// The fewest routes that forward like `routes` (disjoint prefixes, each with its
/// way), given the node's `connected` subnets: each output prefix with the next hop it
/// takes. Prefixes of both families may be mixed.
pub fn aggregate(routes: &[(IpNet, usize)], connected: &[IpNet]) -> Vec<(IpNet, usize)> {
    let mut all: Vec<(IpNet, Way)> =
        routes.iter().map(|&(n, h)| (n.trunc(), Way::Hop(h))).collect();
    all.extend(connected.iter().map(|n| (n.trunc(), Way::Connected)));
    // By family, then address; a prefix before the ones it contains.
    all.sort_by(|a, b| {
        (a.0.addr().is_ipv6(), a.0.network(), a.0.prefix_len()).cmp(&(
            b.0.addr().is_ipv6(),
            b.0.network(),
            b.0.prefix_len(),
        ))
    });
    all.dedup_by(|b, a| a.0 == b.0);
    let mut stack: Vec<(IpNet, Way)> = Vec::with_capacity(all.len());
    for item in all {
        // A prefix inside one already taken is left to the longest-prefix match (only
        // connected subnets overlap routes; the kernel prefers the longer).
        if stack.last().is_some_and(|top| top.0.contains(&item.0) && top.0 != item.0) {
            if let (Way::Connected, _) | (_, Way::Connected) = (stack.last().unwrap().1, item.1) {
                continue;
            }
        }
        stack.push(item);
        // Merge while the two last entries are siblings going the same way.
        while stack.len() >= 2 {
            let (b, wb) = stack[stack.len() - 1];
            let (a, wa) = stack[stack.len() - 2];
            let Some(way) = merged(wa, wb) else { break };
            if a.prefix_len() != b.prefix_len() || a.prefix_len() == 0 {
                break;
            }
            let Some(parent) = a.supernet() else { break };
            if parent.network() != a.network() || b.supernet() != Some(parent) {
                break;
            }
            stack.truncate(stack.len() - 2);
            stack.push((parent, way));
        }
    }
    stack
        .into_iter()
        .filter_map(|(n, w)| match w {
            Way::Hop(h) => Some((n, h)),
            Way::Connected => None,
        })
        .collect()
}

/// The way of two siblings merged, if they may be.
fn merged(a: Way, b: Way) -> Option<Way> {
    match (a, b) {
        (Way::Hop(x), Way::Hop(y)) if x == y => Some(Way::Hop(x)),
        (Way::Hop(x), Way::Connected) | (Way::Connected, Way::Hop(x)) => Some(Way::Hop(x)),
        (Way::Connected, Way::Connected) => Some(Way::Connected),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    /// Where the longest prefix of `table` that holds `addr` leads (None: connected
    /// or unrouted, told apart by `connected`).
    fn lookup(
        table: &[(IpNet, usize)],
        connected: &[IpNet],
        addr: std::net::IpAddr,
    ) -> Option<Option<usize>> {
        let best_route =
            table.iter().filter(|(n, _)| n.contains(&addr)).max_by_key(|(n, _)| n.prefix_len());
        let best_conn =
            connected.iter().filter(|n| n.contains(&addr)).max_by_key(|n| n.prefix_len());
        match (best_route, best_conn) {
            (Some((r, h)), Some(c)) if r.prefix_len() > c.prefix_len() => Some(Some(*h)),
            (_, Some(_)) => Some(None),
            (Some((_, h)), None) => Some(Some(*h)),
            (None, None) => None,
        }
    }

    #[test]
    fn siblings_going_the_same_way_merge_up_the_tree() {
        let r = [
            (net("10.0.0.0/30"), 1),
            (net("10.0.0.4/30"), 1),
            (net("10.0.0.8/30"), 1),
            (net("10.0.0.12/30"), 1),
        ];
        assert_eq!(aggregate(&r, &[]), vec![(net("10.0.0.0/28"), 1)]);
        // Different hops: nothing merges across them.
        let r = [
            (net("10.0.0.0/30"), 1),
            (net("10.0.0.4/30"), 2),
            (net("10.0.0.8/30"), 2),
            (net("10.0.0.12/30"), 2),
        ];
        assert_eq!(
            aggregate(&r, &[]),
            vec![(net("10.0.0.0/30"), 1), (net("10.0.0.4/30"), 2), (net("10.0.0.8/29"), 2)]
        );
    }

    #[test]
    fn unused_addresses_stay_unrouted() {
        // 10.0.0.4/30 is used by nobody: the two others must not become a /28.
        let r = [(net("10.0.0.0/30"), 1), (net("10.0.0.8/30"), 1), (net("10.0.0.12/30"), 1)];
        let a = aggregate(&r, &[]);
        assert_eq!(a, vec![(net("10.0.0.0/30"), 1), (net("10.0.0.8/29"), 1)]);
        assert_eq!(lookup(&a, &[], "10.0.0.5".parse().unwrap()), None);
    }

    #[test]
    fn the_nodes_own_subnets_merge_with_either_way_and_stay_connected() {
        let conn = [net("10.0.0.4/30")];
        let r = [(net("10.0.0.0/30"), 1), (net("10.0.0.8/29"), 1)];
        let a = aggregate(&r, &conn);
        assert_eq!(a, vec![(net("10.0.0.0/28"), 1)]);
        assert_eq!(
            lookup(&a, &conn, "10.0.0.5".parse().unwrap()),
            Some(None),
            "the connected /30 stays in force"
        );
        // A connected subnet alone makes no route.
        assert!(aggregate(&[], &conn).is_empty());
        // Loopbacks (/32, /128) and IPv6 merge likewise, each family apart.
        let r = [
            (net("10.255.0.1/32"), 3),
            (net("10.255.0.0/32"), 3),
            (net("fd00::/64"), 3),
            (net("fd00:0:0:1::/64"), 3),
        ];
        assert_eq!(aggregate(&r, &[]), vec![(net("10.255.0.0/31"), 3), (net("fd00::/63"), 3)]);
    }

    /// The aggregated table forwards every used address as the full one does, for
    /// random tables (hops 0-2 over 256 /30s, some unused, some connected).
    #[test]
    fn aggregation_changes_no_forwarding_decision() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..200 {
            let mut routes = Vec::new();
            let mut conn = Vec::new();
            for i in 0..256u32 {
                let n =
                    IpNet::new(std::net::Ipv4Addr::from(0x0a00_0000 + 4 * i).into(), 30).unwrap();
                match next() % 10 {
                    0 => {}
                    1 => conn.push(n),
                    k => routes.push((n, (k % 3) as usize)),
                }
            }
            let a = aggregate(&routes, &conn);
            assert!(a.len() <= routes.len());
            for i in 0..1024u32 {
                let addr = std::net::Ipv4Addr::from(0x0a00_0000 + i).into();
                let full = lookup(&routes, &conn, addr);
                let agg = lookup(&a, &conn, addr);
                assert_eq!(full, agg, "{addr}: full {full:?}, aggregated {agg:?}");
            }
        }
    }
}
