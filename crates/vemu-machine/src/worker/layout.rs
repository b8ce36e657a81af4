//! A machine's share of a lab, laid out from the plan alone (no system call): which
//! nodes, links, segments and spurs are here and in what order the engine numbers
//! them, which link ends and LAN ports have devices in the plane and in what order
//! (their indexes there), which of those need the engine's TAP devices from the start,
//! which shard carries each tunnel, and every random stream's seed. `LocalWorker::build_share`
//! computes it first and then carries it out; it is unit-tested without root.

use vemu_scenario::{NodeKind, Plan};

use vemu_scenario::derive_seed;

/// A device of the plane: a link's end (link, side 0 = a) or a LAN's port (segment,
/// member).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum PlaneEnd {
    Link(usize, usize),
    Member(usize, usize),
}

/// First random stream of the diverted paths (links and segments take theirs from 0).
const DIVERT_STREAMS: u64 = 1 << 40;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Layout {
    /// The machine whose share this is (`None`: the whole lab, on this machine).
    pub machine: Option<usize>,
    /// The nodes here, in the plan's order.
    pub nodes: Vec<usize>,
    /// Links with an end here, in the engine's order: both ends here, or one (a tunnel
    /// to the other machine).
    pub links: Vec<usize>,
    /// Segments whose switch or channel is here (each is on its first member's machine).
    pub segments: Vec<usize>,
    /// Members here (segment, member) of segments elsewhere: each a link of the
    /// engine's after `links` (forward = the member's egress, side b a tunnel to the
    /// segment's machine).
    pub spurs: Vec<(usize, usize)>,
    /// Links with both ends here that the fast path may carry (none to a NIC's wire,
    /// whose frames come through a packet socket).
    pub whole: Vec<usize>,
    /// Ends here (link, side) of links to other machines that the kernel's tunnel may
    /// carry (nodes that are namespaces; only where the lab has a VXLAN port).
    pub crossing: Vec<(usize, usize)>,
    /// Segments here the kernel's bridge can switch.
    pub lans: Vec<usize>,
    /// Engine shards: a link to another machine goes on shard (its number here) mod
    /// shards, everything of a segment on shard (its number in the lab) mod shards.
    pub shards: usize,
}

impl Layout {
    /// The share of `machine` (`None`: all of it) of `plan`, whose VXLAN port is
    /// `vxlan_port` (0: none), on a machine of `cores` cores.
    pub fn new(plan: &Plan, machine: Option<usize>, vxlan_port: u16, cores: usize) -> Layout {
        let here = |node: usize| machine.is_none_or(|m| plan.nodes[node].machine == m);
        let nodes: Vec<usize> = (0..plan.nodes.len()).filter(|&n| here(n)).collect();
        let links: Vec<usize> = (0..plan.links.len())
            .filter(|&l| here(plan.links[l].a.node) || here(plan.links[l].b.node))
            .collect();
        let segments: Vec<usize> = (0..plan.segments.len())
            .filter(|&g| plan.segments[g].members.first().is_some_and(|m| here(m.end.node)))
            .collect();
        let spurs: Vec<(usize, usize)> = (0..plan.segments.len())
            .filter(|g| !segments.contains(g))
            .flat_map(|g| {
                plan.segments[g]
                    .members
                    .iter()
                    .enumerate()
                    .filter(|(_, m)| here(m.end.node))
                    .map(move |(k, _)| (g, k))
            })
            .collect();
        let external = |n: usize| plan.nodes[n].kind == NodeKind::External;
        let whole = links
            .iter()
            .copied()
            .filter(|&l| {
                let (a, b) = (plan.links[l].a.node, plan.links[l].b.node);
                here(a) && here(b) && !external(a) && !external(b)
            })
            .collect();
        let crossing = match vxlan_port {
            0 => Vec::new(),
            _ => links
                .iter()
                .filter_map(|&l| {
                    let (a, b) = (plan.links[l].a.node, plan.links[l].b.node);
                    let (side, n) = match (here(a), here(b)) {
                        (true, false) => (0, a),
                        (false, true) => (1, b),
                        _ => return None,
                    };
                    (plan.nodes[n].kind == NodeKind::Namespace).then_some((l, side))
                })
                .collect(),
        };
        let lans = segments.iter().copied().filter(|&g| plan.kernel_lan(g)).collect();
        let shards = vemu_engine::shard_count(cores, links.len() + spurs.len(), segments.len());
        Layout { machine, nodes, links, segments, spurs, whole, crossing, lans, shards }
    }

    /// Whether node `node` is here.
    pub fn here(&self, plan: &Plan, node: usize) -> bool {
        self.machine.is_none_or(|m| plan.nodes[node].machine == m)
    }

    /// The devices in the plane when the fast path is on, in the order of their indexes
    /// there: both ends of each whole link, the crossing ends, each LAN's ports.
    pub fn plane_ends(&self, plan: &Plan) -> Vec<PlaneEnd> {
        let links = self.whole.iter().flat_map(|&l| [(l, 0), (l, 1)]).chain(self.crossing.clone());
        links
            .map(|(l, side)| PlaneEnd::Link(l, side))
            .chain(self.lans.iter().flat_map(|&g| {
                (0..plan.segments[g].members.len()).map(move |k| PlaneEnd::Member(g, k))
            }))
            .collect()
    }

    /// Whether a plane end needs the engine's TAP device from the start: an impaired
    /// link, a link to another machine (the engine carries it until the underlay is
    /// known to carry its frames whole), a LAN with an impaired port or a capacity. The
    /// others get theirs when they first need it.
    pub fn taps_at_start(&self, plan: &Plan, end: PlaneEnd) -> bool {
        match end {
            PlaneEnd::Link(l, _) => {
                let link = &plan.links[l];
                !plan.link_unimpaired(l)
                    || !self.here(plan, link.a.node)
                    || !self.here(plan, link.b.node)
            }
            PlaneEnd::Member(g, _) => !plan.segment_unimpaired(g),
        }
    }

    /// The shard of the `k`th link here (the tunnels of a link to another machine).
    pub fn link_shard(&self, k: usize) -> usize {
        k % self.shards
    }

    /// The shard of everything of segment `g` (its members' and trunks' tunnels).
    pub fn segment_shard(&self, g: usize) -> usize {
        g % self.shards
    }
}

/// The seeds of a link's two directions: random streams 2 × link and the next.
pub(super) fn link_seeds(plan: &Plan, link: usize) -> [u64; 2] {
    streams(plan, 2 * link as u64)
}

/// The seeds of a segment member's egress and ingress: those of its tunnel's number
/// (as a link's), wherever its segment is.
pub(super) fn member_seeds(plan: &Plan, g: usize, k: usize) -> [u64; 2] {
    streams(plan, 2 * plan.member_tunnel(g, k) as u64)
}

/// The seeds of diverted path `i`'s two directions.
pub(super) fn divert_seeds(plan: &Plan, i: usize) -> [u64; 2] {
    streams(plan, DIVERT_STREAMS + 2 * i as u64)
}

fn streams(plan: &Plan, first: u64) -> [u64; 2] {
    [derive_seed(plan.seed, first), derive_seed(plan.seed, first + 1)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(yaml: &str) -> Plan {
        vemu_scenario::load_str(yaml, "t.yaml", "t", None).unwrap()
    }

    const SPLIT: &str = "machines: {m1: 10.0.0.1, m2: 10.0.0.2}
nodes:
  a: {machine: m1}
  b: {machine: m1}
  c: {machine: m2}
  d: {machine: m2}
links:
  - endpoints: [a, b]
  - endpoints: [a, c]
    delay: 1ms
  - endpoints: [c, d]
    delay: 2ms
segments:
  lan1: {members: [a, b]}
  lan2: {members: [c, a, d]}
";

    #[test]
    fn a_machines_share_holds_what_has_an_end_there_in_the_engines_order() {
        let p = plan(SPLIT);
        let m1 = Layout::new(&p, Some(0), 4789, 2);
        assert_eq!(m1.nodes, [0, 1]);
        assert_eq!(m1.links, [0, 1]);
        // lan2's switch is with its first member (c, on m2): a is a spur of it here.
        assert_eq!((m1.segments.clone(), m1.spurs.clone()), (vec![0], vec![(1, 1)]));
        assert_eq!(m1.whole, [0]);
        // The end of a-c here (a, side 0) may take the kernel's tunnel.
        assert_eq!(m1.crossing, [(1, 0)]);
        assert_eq!(m1.lans, [0]);
        // Its plane: a-b's two ends, a-c's end here, lan1's two ports, in that order.
        assert_eq!(
            m1.plane_ends(&p),
            [
                PlaneEnd::Link(0, 0),
                PlaneEnd::Link(0, 1),
                PlaneEnd::Link(1, 0),
                PlaneEnd::Member(0, 0),
                PlaneEnd::Member(0, 1)
            ]
        );
        let m2 = Layout::new(&p, Some(1), 4789, 2);
        assert_eq!((m2.nodes.clone(), m2.links.clone()), (vec![2, 3], vec![1, 2]));
        assert_eq!((m2.segments.clone(), m2.spurs.clone()), (vec![1], vec![]));
        assert_eq!((m2.whole.clone(), m2.crossing.clone()), (vec![2], vec![(1, 1)]));
        // Without a VXLAN port, nothing crosses by the kernel.
        assert_eq!(Layout::new(&p, Some(0), 0, 2).crossing, []);
        // The whole lab on one machine: everything here, nothing crossing.
        let all = Layout::new(&p, None, 0, 2);
        assert_eq!((all.links.len(), all.segments.len(), all.spurs.len()), (3, 2, 0));
        assert_eq!(all.whole, [0, 1, 2]);
    }

    #[test]
    fn taps_at_start_only_where_the_engine_is_needed_from_the_start() {
        let p = plan(SPLIT);
        let m1 = Layout::new(&p, Some(0), 4789, 2);
        let at_start: Vec<PlaneEnd> =
            m1.plane_ends(&p).into_iter().filter(|&e| m1.taps_at_start(&p, e)).collect();
        // a-b is unimpaired, lan1 too; a-c crosses machines (and is impaired).
        assert_eq!(at_start, [PlaneEnd::Link(1, 0)]);
        let all = Layout::new(&p, None, 0, 2);
        assert!(!all.taps_at_start(&p, PlaneEnd::Link(0, 0)));
        assert!(all.taps_at_start(&p, PlaneEnd::Link(2, 1)));
    }

    #[test]
    fn shards_and_seeds_follow_the_numbering_every_machine_shares() {
        let p = plan(SPLIT);
        let m1 = Layout::new(&p, Some(0), 0, 2);
        // 2 links + 1 spur + 1 segment on 2 cores: 2 shards.
        assert_eq!(m1.shards, 2);
        assert_eq!((m1.link_shard(0), m1.link_shard(1), m1.segment_shard(1)), (0, 1, 1));
        assert_eq!(Layout::new(&p, Some(0), 0, 64).shards, 4);
        assert_eq!(Layout::new(&plan("nodes: {a: {}}\n"), None, 0, 8).shards, 1);
        // Seeds depend on the lab's numbering only: a member's are the same on the
        // segment's machine and on the member's, and differ from every link's.
        let m = member_seeds(&p, 1, 1);
        assert_eq!(m, member_seeds(&p, 1, 1));
        assert!((0..3).all(|l| link_seeds(&p, l) != m));
        assert_ne!(link_seeds(&p, 0)[0], link_seeds(&p, 0)[1]);
        assert_ne!(divert_seeds(&p, 0), link_seeds(&p, 0));
    }
}
