//! The partitioner against simpler placements: for graphs of 1000 nodes on 2, 4 and 8
//! machines, the links cut (and their weight) by a random deal, by greedy graph growing
//! alone, by METIS alone, and by what labs use (the lighter of the two), with the
//! heaviest machine's load over the balanced load and the time taken.
//! `cargo run --release -p vemu-scenario --example placement` (bench/run.sh placement).

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
            for (label, method) in
                [("greedy", Method::Greedy), ("metis", Method::Metis), ("vemu", Method::Best)]
            {
                let t = Instant::now();
                let at = place_by(&g, k, method).expect("no pins: always placeable");
                row(label, &at, t.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
}
