//! Shortest-path static routes over the plan's links and segments.

use super::*;

/// Shortest paths (sum of link and segment weights) from every node; each node gets a
/// route to every subnet it is not attached to and to every other node's loopback
/// addresses, via the neighbour on the first hop. A segment is a vertex of its own:
/// entering it costs its weight, leaving it nothing. Ties go to the lower-numbered link
/// or segment, so routes are deterministic. Only the nodes `routed` says get them (the
/// others route with a daemon, or by their own `routes`).
pub(super) fn static_routes(
    nodes: &mut [NodePlan],
    links: &[LinkPlan],
    segments: &[SegmentPlan],
    routed: &[bool],
) {
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
    for src in (0..n).filter(|&i| routed[i]) {
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
