//! The partitioner against simpler placements: for graphs of 1000 nodes on 2, 4 and 8
//! machines, the links cut (and their weight) by a random deal, by greedy graph growing
//! alone, by METIS alone, by the link-class candidates alone and by what labs use (the
//! lightest of them), with the heaviest machine's load over the balanced load and the
//! time taken; then 100,000 nodes in 10 natural clusters on 10 machines, beside the best
//! that METIS itself finds on the same graph (several seeds, k-way and recursive, 10 cuts
//! each); then generated graphs of 1,344–10,040 nodes on 10 machines (a fat-tree, a
//! transit-stub graph, a Barabási–Albert graph and a made-up AS graph, its customer cones
//! beside) against METIS' best. `cargo run --release -p vemu-scenario --example placement`
//! (bench/run.sh placement).

use std::time::Instant;

use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use vemu_scenario::generate::Generator;
use vemu_scenario::placement::{cut, cut_weight, place_by, Graph, Method};

/// Random points in a square joined to their neighbours within `radius` (a wireless
/// mesh or a city network): locality that a good partition finds.
fn geometric(n: usize, radius: f64, rng: &mut ChaCha8Rng) -> Vec<(usize, usize)> {
    let u = |rng: &mut ChaCha8Rng| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let pts: Vec<(f64, f64)> = (0..n).map(|_| (u(rng), u(rng))).collect();
    let mut links = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            let (dx, dy) = (pts[i].0 - pts[j].0, pts[i].1 - pts[j].1);
            if dx * dx + dy * dy <= radius * radius {
                links.push((i, j));
            }
        }
    }
    links
}

/// `clusters` random trees of `size` nodes (each node joins an earlier one of its tree,
/// links of 100 Mbit/s), joined by `bridges` links of 10 Mbit/s between random nodes of
/// neighbouring clusters (a campus of pods joined by slow WAN links): the natural cut is
/// the bridges, every machine one cluster.
fn clusters(clusters: usize, size: usize, bridges: usize, rng: &mut ChaCha8Rng) -> Graph {
    let mut links = Vec::new();
    let mut weights = Vec::new();
    for c in 0..clusters {
        for i in 1..size {
            let j = (rng.next_u64() % i as u64) as usize;
            links.push((c * size + j, c * size + i));
            weights.push(100);
        }
    }
    for j in 0..bridges {
        let a = j % clusters;
        let b = (a + 1 + j / clusters) % clusters;
        let x = a * size + (rng.next_u64() % size as u64) as usize;
        let y = b * size + (rng.next_u64() % size as u64) as usize;
        links.push((x, y));
        weights.push(10);
    }
    Graph {
        link_weights: weights,
        seed: 1,
        ..Graph::unweighted(vec![None; clusters * size], links, vec![])
    }
}

/// METIS on its own on the node graph (no groups, no refinement): the anchor.
fn metis_alone(g: &Graph, k: usize, seed: i32, recursive: bool) -> Vec<usize> {
    let n = g.pins.len();
    let mut adj: Vec<Vec<(usize, u32)>> = vec![Vec::new(); n];
    for (&(a, b), &w) in g.links.iter().zip(&g.link_weights) {
        adj[a].push((b, w));
        adj[b].push((a, w));
    }
    let mut xadj = vec![0];
    let (mut adjncy, mut adjwgt) = (Vec::new(), Vec::new());
    for nbs in &adj {
        for &(b, w) in nbs {
            adjncy.push(b as metis::Idx);
            adjwgt.push(w as metis::Idx);
        }
        xadj.push(adjncy.len() as metis::Idx);
    }
    let mut part = vec![0; n];
    let graph = metis::Graph::new(1, k as metis::Idx, &xadj, &adjncy)
        .expect("a valid graph")
        .set_adjwgt(&adjwgt)
        .set_option(metis::option::Seed(seed))
        .set_option(metis::option::NCuts(10))
        .set_option(metis::option::UFactor(30));
    if recursive {
        graph.part_recursive(&mut part).expect("METIS partitions");
    } else {
        graph.part_kway(&mut part).expect("METIS partitions");
    }
    part.into_iter().map(|p| p as usize).collect()
}

/// Preferential attachment (an Internet-like topology): each new node joins 2 others,
/// chosen in proportion to their degree.
fn scale_free(n: usize, rng: &mut ChaCha8Rng) -> Vec<(usize, usize)> {
    let mut links = vec![(0, 1)];
    let mut ends = vec![0, 1];
    for i in 2..n {
        let mut chosen = Vec::new();
        while chosen.len() < 2.min(i) {
            let t = ends[(rng.next_u64() % ends.len() as u64) as usize];
            if !chosen.contains(&t) {
                chosen.push(t);
            }
        }
        for t in chosen {
            links.push((t, i));
            ends.push(t);
            ends.push(i);
        }
    }
    links
}

fn main() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let n = 1000;
    let graphs =
        [("geometric", geometric(n, 0.05, &mut rng)), ("scale-free", scale_free(n, &mut rng))];
    println!("graph,nodes,links,machines,method,cut_links,cut_weight,max_load_over_balanced,ms");
    for (name, links) in graphs {
        // Link weights: a third of the links at 1 Gbit/s, the others at 100 or 10 Mbit/s.
        let weights: Vec<u32> = (0..links.len()).map(|i| [1000, 100, 10][i % 3]).collect();
        let g = Graph {
            link_weights: weights,
            seed: 1,
            ..Graph::unweighted(vec![None; n], links.clone(), vec![])
        };
        for k in [2usize, 4, 8] {
            let balanced = n as f64 / k as f64;
            let random: Vec<usize> = (0..n).map(|i| i % k).collect::<Vec<_>>();
            let mut shuffled = random.clone();
            for i in (1..n).rev() {
                shuffled.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
            }
            let row = |method: &str, at: &[usize], ms: f64| {
                let max = (0..k).map(|m| at.iter().filter(|&&x| x == m).count()).max().unwrap_or(0);
                println!(
                    "{name},{n},{},{k},{method},{},{},{:.3},{ms:.2}",
                    links.len(),
                    cut(&g.links, at),
                    cut_weight(&g, at),
                    max as f64 / balanced
                );
            };
            row("random", &shuffled, 0.0);
            for (label, method) in METHODS {
                let t = Instant::now();
                let at = place_by(&g, k, method).expect("no pins: always placeable");
                row(label, &at, t.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    let (k, size) = (10, 10_000);
    let g = clusters(k, size, 30, &mut rng);
    let row = |method: &str, at: &[usize], ms: f64| {
        let max = (0..k).map(|m| at.iter().filter(|&&x| x == m).count()).max().unwrap_or(0);
        println!(
            "clusters,{},{},{k},{method},{},{},{:.3},{ms:.2}",
            g.pins.len(),
            g.links.len(),
            cut(&g.links, at),
            cut_weight(&g, at),
            max as f64 / size as f64
        );
    };
    for (label, method) in METHODS {
        let t = Instant::now();
        let at = place_by(&g, k, method).expect("no pins: always placeable");
        row(label, &at, t.elapsed().as_secs_f64() * 1e3);
    }
    // METIS' best: the lightest cut of its runs (the time is the sum of them all).
    let t = Instant::now();
    let best = metis_best(&g, k);
    row("metis-best", &best, t.elapsed().as_secs_f64() * 1e3);
    generated();
}

/// METIS' best on `g` over `k` machines: the lightest cut of its six runs (the time is
/// the sum of them all).
fn metis_best(g: &Graph, k: usize) -> Vec<usize> {
    [1, 2, 3]
        .into_iter()
        .flat_map(|seed| [false, true].map(|recursive| metis_alone(g, k, seed, recursive)))
        .min_by_key(|at| cut_weight(g, at))
        .expect("six runs")
}

/// A generated topology as the placement sees it: its links weighed by tier (Mbit/s).
fn from_generated(gen: Generator, weight: impl Fn(&str) -> u32) -> Graph {
    let t = gen.generate("g", 1);
    let links: Vec<(usize, usize)> = t.links.iter().map(|l| (l.a, l.b)).collect();
    Graph {
        link_weights: t.links.iter().map(|l| weight(l.tier)).collect(),
        seed: 1,
        ..Graph::unweighted(vec![None; t.nodes.len()], links, vec![])
    }
}

/// The AS graph's own partition: each AS under its first provider (a forest rooted at
/// the tier-1 ASes); the largest subtrees that fit a machine are kept whole and dealt,
/// largest first, to the machine with the least; the ASes above them go each to the
/// machine holding most of its subtrees' ASes.
fn cones(g: &vemu_scenario::asgraph::AsGraph, k: usize) -> Vec<usize> {
    use vemu_scenario::asgraph::Rel;
    let n = g.ases.len();
    let mut parent: Vec<Option<usize>> = vec![None; n];
    for &(a, b, rel) in &g.rels {
        if rel == Rel::ProviderOf && parent[b].is_none() {
            parent[b] = Some(a);
        }
    }
    // Providers come before their customers in a made-up graph, not in a real one:
    // subtree sizes by repeated passes from the leaves (depth order).
    let depth = |mut i: usize| {
        let mut d = 0;
        while let Some(p) = parent[i] {
            i = p;
            d += 1;
            if d > n {
                break;
            }
        }
        d
    };
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(depth(i)));
    let mut size = vec![1usize; n];
    for &i in &order {
        if let Some(p) = parent[i] {
            size[p] += size[i];
        }
    }
    let fits = |i: usize| size[i] <= n.div_ceil(k);
    let units: Vec<usize> =
        (0..n).filter(|&i| fits(i) && parent[i].is_none_or(|p| !fits(p))).collect();
    let mut by_size = units.clone();
    by_size.sort_by_key(|&i| std::cmp::Reverse(size[i]));
    let mut load = vec![0usize; k];
    let mut unit_at = vec![usize::MAX; n];
    for u in by_size {
        let m = (0..k).min_by_key(|&m| load[m]).expect("k > 0");
        load[m] += size[u];
        unit_at[u] = m;
    }
    // Each AS on its unit's machine (the unit is itself or an ancestor), if it has one.
    let mut at: Vec<usize> = (0..n)
        .map(|i| {
            let (mut j, mut steps) = (i, 0);
            while unit_at[j] == usize::MAX {
                match parent[j] {
                    Some(p) if steps < n => (j, steps) = (p, steps + 1),
                    _ => return usize::MAX, // (a top AS, or a loop of providers)
                }
            }
            unit_at[j]
        })
        .collect();
    // The ASes above the units: where most of their subtree is.
    let mut count = vec![vec![0usize; k]; n];
    for (i, &m) in at.iter().enumerate().filter(|(_, &m)| m != usize::MAX) {
        let mut j = i;
        for _ in 0..n {
            let Some(p) = parent[j] else { break };
            count[p][m] += 1;
            j = p;
        }
    }
    for i in 0..n {
        if at[i] == usize::MAX {
            at[i] = (0..k).max_by_key(|&m| (count[i][m], std::cmp::Reverse(m))).expect("k > 0");
        }
    }
    at
}

/// Generated graphs on 10 machines: what labs use beside METIS' best (and, for the AS
/// graph, its customer cones).
fn generated() {
    let k = 10;
    let as_text = vemu_scenario::import::generate_as_rel(10_000, 1);
    let as_graph =
        vemu_scenario::asgraph::parse_as_rel(&as_text, "made-up").expect("a valid graph");
    let ases = Graph {
        link_weights: vec![1000; as_graph.rels.len()],
        seed: 1,
        ..Graph::unweighted(
            vec![None; as_graph.ases.len()],
            as_graph.rels.iter().map(|&(a, b, _)| (a, b)).collect(),
            vec![],
        )
    };
    let graphs = [
        (
            "fat-tree-16",
            from_generated(Generator::FatTree { k: 16, hosts: true }, |t| {
                if t == "host" {
                    1000
                } else {
                    10_000
                }
            }),
        ),
        (
            "transit-stub",
            from_generated(
                Generator::TransitStub {
                    transits: 4,
                    transit_size: 10,
                    stubs: 5,
                    stub_size: 50,
                    p: 0.1,
                },
                |t| match t {
                    "transit" => 10_000,
                    "access" => 1000,
                    _ => 100,
                },
            ),
        ),
        (
            "barabasi-albert",
            from_generated(Generator::BarabasiAlbert { n: 10_000, m: 2 }, |_| 1000),
        ),
        ("as-graph", ases),
    ];
    for (name, g) in graphs {
        let n = g.pins.len();
        let row = |method: &str, at: &[usize], ms: f64| {
            let max = (0..k).map(|m| at.iter().filter(|&&x| x == m).count()).max().unwrap_or(0);
            println!(
                "{name},{n},{},{k},{method},{},{},{:.3},{ms:.2}",
                g.links.len(),
                cut(&g.links, at),
                cut_weight(&g, at),
                max as f64 / (n as f64 / k as f64)
            );
        };
        let t = Instant::now();
        let at = place_by(&g, k, Method::Best).expect("no pins: always placeable");
        row("vemu", &at, t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        let best = metis_best(&g, k);
        row("metis-best", &best, t.elapsed().as_secs_f64() * 1e3);
        if name == "as-graph" {
            let t = Instant::now();
            let at = cones(&as_graph, k);
            row("cones", &at, t.elapsed().as_secs_f64() * 1e3);
        }
    }
}

const METHODS: [(&str, Method); 4] = [
    ("greedy", Method::Greedy),
    ("metis", Method::Metis),
    ("classes", Method::Classes),
    ("vemu", Method::Best),
];
