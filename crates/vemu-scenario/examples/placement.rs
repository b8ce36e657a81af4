//! The partitioner against simpler placements: for graphs of 1000 nodes on 2, 4 and 8
//! machines, the links cut (and their weight) by a random deal, by greedy graph growing
//! alone, by METIS alone, by the link-class candidates alone and by what labs use (the
//! lightest of them), with the heaviest machine's load over the balanced load and the
//! time taken; then 100,000 nodes in 10 natural clusters on 10 machines, beside the best
//! that METIS itself finds on the same graph (several seeds, k-way and recursive, 10 cuts
//! each). `cargo run --release -p vemu-scenario --example placement` (bench/run.sh
//! placement).

use std::time::Instant;

use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
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
    let best = [1, 2, 3]
        .into_iter()
        .flat_map(|seed| [false, true].map(|recursive| metis_alone(&g, k, seed, recursive)))
        .min_by_key(|at| cut_weight(&g, at))
        .expect("six runs");
    row("metis-best", &best, t.elapsed().as_secs_f64() * 1e3);
}

const METHODS: [(&str, Method); 4] = [
    ("greedy", Method::Greedy),
    ("metis", Method::Metis),
    ("classes", Method::Classes),
    ("vemu", Method::Best),
];
