use super::*;

fn degree(g: &Graph, i: usize) -> usize {
    g.links.iter().filter(|l| l.a == i || l.b == i).count()
}

fn connected(g: &Graph) -> bool {
    let n = g.nodes.len();
    let mut adj = vec![Vec::new(); n];
    for l in &g.links {
        adj[l.a].push(l.b);
        adj[l.b].push(l.a);
    }
    let mut seen = vec![false; n];
    let mut stack = vec![0];
    while let Some(x) = stack.pop() {
        if !std::mem::replace(&mut seen[x], true) {
            stack.extend(adj[x].iter().copied());
        }
    }
    seen.iter().all(|&s| s)
}

fn simple(g: &Graph) -> bool {
    let mut pairs: Vec<(usize, usize)> =
        g.links.iter().map(|l| (l.a.min(l.b), l.a.max(l.b))).collect();
    let n = pairs.len();
    pairs.sort_unstable();
    pairs.dedup();
    pairs.len() == n && g.links.iter().all(|l| l.a != l.b)
}

fn check(gen: &Generator, seed: u64) -> Graph {
    let g = gen.generate("x", seed);
    assert_eq!(g.nodes.len() as u64, gen.node_count().unwrap(), "{gen:?}");
    assert!(g.links.len() as u64 <= gen.link_bound().unwrap(), "{gen:?}: {} links", g.links.len());
    assert!(simple(&g), "{gen:?}: a repeated link or a loop");
    assert!(connected(&g), "{gen:?}: not connected");
    let mut names: Vec<&str> = g.nodes.iter().map(|n| n.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), g.nodes.len(), "{gen:?}: names repeat");
    assert!(g.links.iter().all(|l| gen.tiers().contains(&l.tier)));
    assert_eq!(g, gen.generate("x", seed), "the same seed, the same graph");
    g
}

#[test]
fn a_fat_tree_has_its_textbook_shape() {
    let g = check(&Generator::FatTree { k: 4, hosts: true }, 1);
    // k = 4: 4 core, 8 aggregation, 8 edge switches, 16 hosts; 48 links.
    assert_eq!(g.nodes.len(), 36);
    assert_eq!(g.links.len(), 48);
    assert_eq!(g.nodes.iter().filter(|n| n.role == Role::Host).count(), 16);
    // Every switch has k ports.
    for (i, n) in g.nodes.iter().enumerate() {
        let want = match (n.role, n.name.contains('a') || n.name.contains('e')) {
            (Role::Host, _) => 1,
            (Role::Router, true) => 4,
            (Role::Router, false) => 4, // core: one per pod
        };
        assert_eq!(degree(&g, i), want, "{}", n.name);
    }
    let g = check(&Generator::FatTree { k: 8, hosts: false }, 1);
    assert_eq!(g.nodes.len(), 16 + 64);
    assert_eq!(g.links.len(), 2 * 8 * 16);
    assert_eq!(Generator::FatTree { k: 16, hosts: true }.node_count(), Some(64 + 256 + 1024));
}

#[test]
fn leaf_spine_grid_and_torus() {
    let g = check(&Generator::LeafSpine { spines: 2, leaves: 4, hosts: 3 }, 1);
    assert_eq!((g.nodes.len(), g.links.len()), (2 + 4 + 12, 8 + 12));
    let g = check(&Generator::Grid { rows: 3, cols: 4, torus: false }, 1);
    assert_eq!(g.links.len(), 3 * 3 + 2 * 4);
    let g = check(&Generator::Grid { rows: 3, cols: 4, torus: true }, 1);
    assert_eq!(g.links.len(), 24);
    assert!((0..12).all(|i| degree(&g, i) == 4));
    // Two rows do not wrap onto the same neighbour twice.
    check(&Generator::Grid { rows: 2, cols: 5, torus: true }, 1);
    check(&Generator::Grid { rows: 1, cols: 1, torus: true }, 1);
}

#[test]
fn preferential_attachment_makes_hubs() {
    let g = check(&Generator::BarabasiAlbert { n: 2000, m: 2 }, 7);
    assert_eq!(g.links.len(), 2 + (2000 - 3) * 2);
    let mut degrees: Vec<usize> = (0..g.nodes.len()).map(|i| degree(&g, i)).collect();
    degrees.sort_unstable();
    // A heavy tail: the largest hub has far more than the mean (4) — a random graph of
    // the same density would not reach 20.
    assert!(*degrees.last().unwrap() > 40, "{:?}", &degrees[degrees.len() - 5..]);
    assert!(degrees[0] >= 2);
    assert_ne!(g, Generator::BarabasiAlbert { n: 2000, m: 2 }.generate("x", 8), "another seed");
    check(&Generator::BarabasiAlbert { n: 2, m: 3 }, 1);
}

#[test]
fn waxman_links_near_nodes_more_and_is_made_connected() {
    let gen = Generator::Waxman { n: 300, alpha: 0.4, beta: 0.1, side_m: 1000.0 };
    let g = check(&gen, 3);
    let len = |l: &GenLink| distance(g.nodes[l.a].pos.unwrap(), g.nodes[l.b].pos.unwrap());
    let mean = g.links.iter().map(len).sum::<f64>() / g.links.len() as f64;
    // Uniform pairs on a 1 km square are 521 m apart on average; Waxman's are shorter.
    assert!(mean < 300.0, "mean link {mean} m");
    // Sparse parameters leave components, which are joined.
    check(&Generator::Waxman { n: 200, alpha: 0.05, beta: 0.05, side_m: 1000.0 }, 3);
}

#[test]
fn a_geometric_graph_links_exactly_the_pairs_within_its_radius() {
    let gen = Generator::Geometric { n: 400, radius_m: 120.0, side_m: 1000.0 };
    let g = gen.generate("x", 5);
    let pos: Vec<[f64; 2]> = g.nodes.iter().map(|n| n.pos.unwrap()).collect();
    let mut want = 0;
    for a in 0..400 {
        for b in a + 1..400 {
            want += (distance(pos[a], pos[b]) <= 120.0) as usize;
        }
    }
    assert_eq!(g.links.len(), want);
    assert!(g.links.iter().all(|l| distance(pos[l.a], pos[l.b]) <= 120.0));
    assert!(simple(&g));
}

#[test]
fn transit_stub_domains_hang_off_their_transit_routers() {
    let gen =
        Generator::TransitStub { transits: 3, transit_size: 4, stubs: 2, stub_size: 5, p: 0.3 };
    let g = check(&gen, 9);
    assert_eq!(g.nodes.len(), 12 + 12 * 2 * 5);
    assert_eq!(g.links.iter().filter(|l| l.tier == "access").count(), 24);
    // A stub router's links stay in its domain but for its one access link.
    for l in g.links.iter().filter(|l| l.tier == "stub") {
        let dom = |i: usize| g.nodes[i].name.rsplit_once('n').unwrap().0.to_string();
        assert_eq!(dom(l.a), dom(l.b));
    }
    check(
        &Generator::TransitStub { transits: 1, transit_size: 1, stubs: 1, stub_size: 1, p: 0.0 },
        1,
    );
    check(
        &Generator::TransitStub { transits: 2, transit_size: 2, stubs: 0, stub_size: 3, p: 1.0 },
        1,
    );
}
