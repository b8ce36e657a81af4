//! Which machine hosts each node of a lab that spans machines: pinned nodes
//! (`machine:`) where they are pinned, the others spread so that the machines hold
//! about as many nodes each and few links cross between machines. The members of a
//! segment (a LAN or wireless medium) stay on one machine.
//!
//! The method is greedy graph growing: groups (a node, or a segment's members) are
//! taken in depth-first order over the links (so that a machine fills with one region
//! of the graph rather than one layer of it), and each goes to the machine with room
//! that already holds most of its neighbours (then the least loaded, then the first).
//! It is deterministic: the same scenario gives the same placement.

/// A node's wishes and ties, as placement sees them.
pub struct Graph {
    /// Per node: the machine it is pinned to.
    pub pins: Vec<Option<usize>>,
    /// Point-to-point links, as node pairs.
    pub links: Vec<(usize, usize)>,
    /// Segments, as their member nodes.
    pub segments: Vec<Vec<usize>>,
}

/// Why nodes cannot be placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlaceError {
    /// A segment has members pinned to two machines: (segment, node a, machine a, node b, machine b).
    SegmentSplit { segment: usize, nodes: [usize; 2], machines: [usize; 2] },
}

/// The machine of each node, for `machines` machines (at least one).
pub fn place(g: &Graph, machines: usize) -> Result<Vec<usize>, PlaceError> {
    let n = g.pins.len();
    let k = machines.max(1);
    // Groups: a segment's members together (union-find).
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(p: &mut [usize], x: usize) -> usize {
        let mut r = x;
        while p[r] != r {
            r = p[r];
        }
        let mut y = x;
        while p[y] != r {
            let next = p[y];
            p[y] = r;
            y = next;
        }
        r
    }
    for seg in &g.segments {
        for w in seg.windows(2) {
            let (a, b) = (find(&mut parent, w[0]), find(&mut parent, w[1]));
            if a != b {
                parent[a.max(b)] = a.min(b);
            }
        }
    }
    let group: Vec<usize> = (0..n).map(|i| find(&mut parent, i)).collect();
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, &r) in group.iter().enumerate() {
        members[r].push(i);
    }
    // A group's pin: its members' (which must agree).
    let mut pin: Vec<Option<(usize, usize)>> = vec![None; n];
    for (i, p) in g.pins.iter().enumerate() {
        let Some(m) = *p else { continue };
        let r = group[i];
        match pin[r] {
            Some((m0, i0)) if m0 != m => {
                let segment = g.segments.iter().position(|s| s.contains(&i) && s.contains(&i0)).unwrap_or(0);
                return Err(PlaceError::SegmentSplit { segment, nodes: [i0, i], machines: [m0, m] });
            }
            _ => pin[r] = Some((m.min(k - 1), i)),
        }
    }
    let mut adj: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(a, b) in &g.links {
        let (ga, gb) = (group[a], group[b]);
        if ga != gb {
            adj[ga].push(gb);
            adj[gb].push(ga);
        }
    }
    let mut at: Vec<Option<usize>> = vec![None; n];
    let mut load = vec![0usize; k];
    for r in (0..n).filter(|&r| group[r] == r) {
        if let Some((m, _)) = pin[r] {
            at[r] = Some(m);
            load[m] += members[r].len();
        }
    }
    let room = n.div_ceil(k);
    // Depth-first over groups, from pinned groups first, then each unreached one.
    let mut queue: Vec<usize> = (0..n).rev().filter(|&r| group[r] == r && at[r].is_some()).collect();
    let mut seen: Vec<bool> = (0..n).map(|r| at[r].is_some()).collect();
    let mut next_start = 0;
    loop {
        let r = match queue.pop() {
            Some(r) => r,
            None => {
                while next_start < n && (group[next_start] != next_start || seen[next_start]) {
                    next_start += 1;
                }
                if next_start == n {
                    break;
                }
                seen[next_start] = true;
                next_start
            }
        };
        if at[r].is_none() {
            let size = members[r].len();
            let mut ties = vec![0usize; k];
            for &nb in &adj[r] {
                if let Some(m) = at[nb] {
                    ties[m] += 1;
                }
            }
            let fits = |m: usize| load[m] + size <= room.max(size);
            let best = (0..k).filter(|&m| fits(m)).max_by_key(|&m| (ties[m], std::cmp::Reverse(load[m]), std::cmp::Reverse(m)));
            let m = best.unwrap_or_else(|| (0..k).min_by_key(|&m| (load[m], m)).unwrap_or(0));
            at[r] = Some(m);
            load[m] += size;
        }
        for &nb in adj[r].iter().rev() {
            if !seen[nb] {
                seen[nb] = true;
                queue.push(nb);
            }
        }
    }
    Ok((0..n).map(|i| at[group[i]].unwrap_or(0)).collect())
}

/// Links whose ends are on different machines.
pub fn cut(links: &[(usize, usize)], at: &[usize]) -> usize {
    links.iter().filter(|&&(a, b)| at[a] != at[b]).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(n: usize) -> Vec<(usize, usize)> {
        (1..n).map(|i| (i - 1, i)).collect()
    }

    #[test]
    fn a_chain_is_cut_once_per_machine_boundary_and_balanced() {
        let g = Graph { pins: vec![None; 12], links: chain(12), segments: vec![] };
        let at = place(&g, 3).unwrap();
        assert_eq!(at, vec![0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
        assert_eq!(cut(&g.links, &at), 2);
    }

    #[test]
    fn pins_hold_and_neighbours_follow_them() {
        let mut pins = vec![None; 6];
        pins[5] = Some(0);
        pins[0] = Some(1);
        let g = Graph { pins, links: chain(6), segments: vec![] };
        let at = place(&g, 2).unwrap();
        assert_eq!((at[5], at[0]), (0, 1));
        assert_eq!(cut(&g.links, &at), 1, "{at:?}");
    }

    #[test]
    fn a_segment_stays_on_one_machine_and_split_pins_are_refused() {
        let g = Graph { pins: vec![None; 5], links: vec![(0, 1)], segments: vec![vec![1, 2, 3, 4]] };
        let at = place(&g, 2).unwrap();
        assert!(at[1..].iter().all(|&m| m == at[1]), "{at:?}");
        let mut pins = vec![None; 5];
        pins[1] = Some(0);
        pins[3] = Some(1);
        let g = Graph { pins, links: vec![], segments: vec![vec![1, 2, 3, 4]] };
        assert_eq!(place(&g, 2), Err(PlaceError::SegmentSplit { segment: 0, nodes: [1, 3], machines: [0, 1] }));
    }

    #[test]
    fn one_machine_takes_everything_and_placement_is_deterministic() {
        let links: Vec<(usize, usize)> = (1..100).map(|i| (i / 2, i)).collect();
        let g = Graph { pins: vec![None; 100], links, segments: vec![] };
        assert!(place(&g, 1).unwrap().iter().all(|&m| m == 0));
        let a = place(&g, 4).unwrap();
        assert_eq!(a, place(&g, 4).unwrap());
        for m in 0..4 {
            assert_eq!(a.iter().filter(|&&x| x == m).count(), 25);
        }
        // A tree cut by growing regions: far fewer crossing links than a random deal.
        assert!(cut(&g.links, &a) < 20, "{}", cut(&g.links, &a));
    }
}
