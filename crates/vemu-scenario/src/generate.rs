//! Topology generators (`generate:` in a scenario): fat-tree, leaf-spine, grid and
//! torus, Barabási–Albert, Waxman, random geometric and transit-stub graphs, each a
//! [`Graph`] of named nodes and tiered links, decided by its parameters and a seed alone
//! (the same scenario gives the same lab). Pure: the parser turns a graph into the
//! scenario's nodes and links (`parse/generate.rs`).

use std::collections::HashMap;

/// Most nodes one scenario's generators may make together.
pub const MAX_GENERATED_NODES: u64 = 1_000_000;
/// Most links one scenario's generators may make together.
pub const MAX_GENERATED_LINKS: u64 = 4_000_000;
/// Most nodes of a Waxman graph (it weighs every pair).
pub const MAX_WAXMAN_NODES: u64 = 10_000;
/// Most links a Barabási–Albert graph's new node makes.
pub const MAX_BA_M: u64 = 100;

/// What a generated node is: a router (or switch) of the topology, or a host at its
/// edge (a fat-tree's or a leaf-spine's servers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Router,
    Host,
}

/// One generated node: its name (the generator's prefix, then its place), role and
/// where it is drawn or placed (metres on a plane, for geometric graphs and the canvas).
#[derive(Debug, Clone, PartialEq)]
pub struct GenNode {
    pub name: String,
    pub role: Role,
    pub pos: Option<[f64; 2]>,
}

/// One generated link between two nodes (indices into [`Graph::nodes`]) of a tier (the
/// key its settings are given under: `core`, `aggregation`, `edge`, `fabric`, `host`,
/// `transit`, `stub`, `access`, `link`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenLink {
    pub a: usize,
    pub b: usize,
    pub tier: &'static str,
}

/// A generated topology.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Graph {
    pub nodes: Vec<GenNode>,
    pub links: Vec<GenLink>,
}

/// A generator and its parameters, as a scenario gives them.
#[derive(Debug, Clone, PartialEq)]
pub enum Generator {
    /// A k-ary fat-tree (k even): (k/2)² core switches, k pods of k/2 aggregation and
    /// k/2 edge switches, k/2 hosts per edge switch (`hosts: false`: none).
    FatTree { k: u64, hosts: bool },
    /// Every leaf linked to every spine; `hosts` hosts per leaf.
    LeafSpine { spines: u64, leaves: u64, hosts: u64 },
    /// A rows × cols grid (a torus: its edges wrap around).
    Grid { rows: u64, cols: u64, torus: bool },
    /// Preferential attachment: each new node links to `m` existing ones, chosen in
    /// proportion to their degree (a star of m + 1 nodes to start).
    BarabasiAlbert { n: u64, m: u64 },
    /// n nodes placed uniformly on a side × side square; each pair linked with
    /// probability alpha·exp(−d / (beta·L)), L the largest distance; components joined
    /// to the first by their nearest pair so that the graph is connected.
    Waxman { n: u64, alpha: f64, beta: f64, side_m: f64 },
    /// n nodes placed uniformly on a side × side square, linked within `radius_m`
    /// (a radio plane when the scenario puts them on a wireless segment instead).
    Geometric { n: u64, radius_m: f64, side_m: f64 },
    /// GT-ITM's transit-stub: `transits` transit domains of `transit_size` routers, each
    /// router with `stubs` stub domains of `stub_size` routers; domains are connected
    /// random graphs (edge probability `p`, a ring first), transit domains joined in a
    /// ring, each stub domain to its transit router by one link.
    TransitStub { transits: u64, transit_size: u64, stubs: u64, stub_size: u64, p: f64 },
}

impl Generator {
    /// Its name in a scenario.
    pub fn name(&self) -> &'static str {
        match self {
            Generator::FatTree { .. } => "fat-tree",
            Generator::LeafSpine { .. } => "leaf-spine",
            Generator::Grid { torus: false, .. } => "grid",
            Generator::Grid { torus: true, .. } => "torus",
            Generator::BarabasiAlbert { .. } => "barabasi-albert",
            Generator::Waxman { .. } => "waxman",
            Generator::Geometric { .. } => "geometric",
            Generator::TransitStub { .. } => "transit-stub",
        }
    }

    /// The tiers its links come in (the keys of its `tiers:`).
    pub fn tiers(&self) -> &'static [&'static str] {
        match self {
            Generator::FatTree { .. } => &["core", "aggregation", "host"],
            Generator::LeafSpine { .. } => &["fabric", "host"],
            Generator::TransitStub { .. } => &["transit", "access", "stub"],
            _ => &["link"],
        }
    }

    /// How many nodes it makes (known before making them, so that a size too large is
    /// refused at once); `None` past `u64`.
    pub fn node_count(&self) -> Option<u64> {
        match *self {
            Generator::FatTree { k, hosts } => {
                let half = k / 2;
                let switches = half.checked_mul(half)?.checked_add(k.checked_mul(k)?)?;
                let h = if hosts { k.checked_mul(half)?.checked_mul(half)? } else { 0 };
                switches.checked_add(h)
            }
            Generator::LeafSpine { spines, leaves, hosts } => {
                spines.checked_add(leaves)?.checked_add(leaves.checked_mul(hosts)?)
            }
            Generator::Grid { rows, cols, .. } => rows.checked_mul(cols),
            Generator::BarabasiAlbert { n, .. }
            | Generator::Waxman { n, .. }
            | Generator::Geometric { n, .. } => Some(n),
            Generator::TransitStub { transits, transit_size, stubs, stub_size, .. } => {
                let t = transits.checked_mul(transit_size)?;
                t.checked_add(t.checked_mul(stubs)?.checked_mul(stub_size)?)
            }
        }
    }

    /// Most links it can make (exact where the topology fixes it).
    pub fn link_bound(&self) -> Option<u64> {
        match *self {
            Generator::FatTree { k, hosts } => {
                let half = k / 2;
                // core–aggregation and aggregation–edge: k·(k/2)² each; edge–host as many.
                let each = k.checked_mul(half)?.checked_mul(half)?;
                each.checked_mul(if hosts { 3 } else { 2 })
            }
            Generator::LeafSpine { spines, leaves, hosts } => {
                spines.checked_mul(leaves)?.checked_add(leaves.checked_mul(hosts)?)
            }
            Generator::Grid { rows, cols, .. } => rows.checked_mul(cols)?.checked_mul(2),
            Generator::BarabasiAlbert { n, m } => n.checked_mul(m),
            Generator::Waxman { n, .. } => n.checked_mul(n.saturating_sub(1))?.checked_div(2),
            // (At most every pair; the parser bounds n.)
            Generator::Geometric { n, .. } => n.checked_mul(n.saturating_sub(1))?.checked_div(2),
            Generator::TransitStub { transits, transit_size, stubs, stub_size, .. } => {
                let domains =
                    transits.checked_mul(transit_size.checked_mul(stubs)?.checked_add(1)?)?;
                let size = transit_size.max(stub_size);
                let within = size.checked_mul(size.saturating_sub(1))? / 2 + size;
                domains.checked_mul(within.checked_add(1)?)?.checked_add(transits)
            }
        }
    }

    /// Make the graph: node names start with `prefix`; `seed` decides the random ones.
    pub fn generate(&self, prefix: &str, seed: u64) -> Graph {
        let mut rng = Rng(vemu_radio::splitmix64(seed));
        match *self {
            Generator::FatTree { k, hosts } => fat_tree(prefix, k as usize, hosts),
            Generator::LeafSpine { spines, leaves, hosts } => {
                leaf_spine(prefix, spines as usize, leaves as usize, hosts as usize)
            }
            Generator::Grid { rows, cols, torus } => {
                grid(prefix, rows as usize, cols as usize, torus)
            }
            Generator::BarabasiAlbert { n, m } => {
                barabasi_albert(prefix, n as usize, m as usize, &mut rng)
            }
            Generator::Waxman { n, alpha, beta, side_m } => {
                waxman(prefix, n as usize, alpha, beta, side_m, &mut rng)
            }
            Generator::Geometric { n, radius_m, side_m } => {
                geometric(prefix, n as usize, radius_m, side_m, &mut rng)
            }
            Generator::TransitStub { transits, transit_size, stubs, stub_size, p } => {
                let sizes = [transits, transit_size, stubs, stub_size].map(|x| x as usize);
                transit_stub(prefix, sizes, p, &mut rng)
            }
        }
    }
}

/// The seed of the `i`th `generate:` entry that gives none: from the lab's seed.
pub fn entry_seed(lab_seed: u64, i: usize) -> u64 {
    vemu_radio::splitmix64(lab_seed ^ (0x6765_6e00 + i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// The generators' random numbers: splitmix64 on a counter started from the seed's own
/// mix (the same stream for the same seed on every machine).
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(1);
        vemu_radio::splitmix64(self.0)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in 0..n (n > 0).
    fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }
}

fn node(name: String, role: Role, pos: Option<[f64; 2]>) -> GenNode {
    GenNode { name, role, pos }
}

/// Canvas positions (pixels) of a layered drawing: `row` from the top, `i` of `of`.
fn layer(row: usize, i: usize, of: usize) -> Option<[f64; 2]> {
    let width = 1200.0;
    Some([(i as f64 + 0.5) * width / of.max(1) as f64, 80.0 + 140.0 * row as f64])
}

fn fat_tree(prefix: &str, k: usize, hosts: bool) -> Graph {
    let half = k / 2;
    let mut g = Graph::default();
    let cores = half * half;
    for c in 0..cores {
        g.nodes.push(node(format!("{prefix}c{c}"), Role::Router, layer(0, c, cores)));
    }
    for pod in 0..k {
        let first_agg = g.nodes.len();
        for a in 0..half {
            g.nodes.push(node(
                format!("{prefix}p{pod}a{a}"),
                Role::Router,
                layer(1, pod * half + a, k * half),
            ));
            // Aggregation switch a of every pod: core switches a·k/2 … a·k/2 + k/2 − 1.
            for c in 0..half {
                g.links.push(GenLink { a: a * half + c, b: first_agg + a, tier: "core" });
            }
        }
        for e in 0..half {
            let edge = g.nodes.len();
            g.nodes.push(node(
                format!("{prefix}p{pod}e{e}"),
                Role::Router,
                layer(2, pod * half + e, k * half),
            ));
            for a in 0..half {
                g.links.push(GenLink { a: first_agg + a, b: edge, tier: "aggregation" });
            }
            if hosts {
                for h in 0..half {
                    let i = (pod * half + e) * half + h;
                    g.nodes.push(node(
                        format!("{prefix}p{pod}e{e}h{h}"),
                        Role::Host,
                        layer(3, i, k * half * half),
                    ));
                    g.links.push(GenLink { a: edge, b: g.nodes.len() - 1, tier: "host" });
                }
            }
        }
    }
    g
}

fn leaf_spine(prefix: &str, spines: usize, leaves: usize, hosts: usize) -> Graph {
    let mut g = Graph::default();
    for s in 0..spines {
        g.nodes.push(node(format!("{prefix}s{s}"), Role::Router, layer(0, s, spines)));
    }
    for l in 0..leaves {
        let leaf = g.nodes.len();
        g.nodes.push(node(format!("{prefix}l{l}"), Role::Router, layer(1, l, leaves)));
        for s in 0..spines {
            g.links.push(GenLink { a: s, b: leaf, tier: "fabric" });
        }
        for h in 0..hosts {
            g.nodes.push(node(
                format!("{prefix}l{l}h{h}"),
                Role::Host,
                layer(2, l * hosts + h, leaves * hosts),
            ));
            g.links.push(GenLink { a: leaf, b: g.nodes.len() - 1, tier: "host" });
        }
    }
    g
}

fn grid(prefix: &str, rows: usize, cols: usize, torus: bool) -> Graph {
    let mut g = Graph::default();
    let at = |r: usize, c: usize| r * cols + c;
    for r in 0..rows {
        for c in 0..cols {
            let pos = Some([60.0 + 100.0 * c as f64, 60.0 + 100.0 * r as f64]);
            g.nodes.push(node(format!("{prefix}r{r}c{c}"), Role::Router, pos));
        }
    }
    for r in 0..rows {
        for c in 0..cols {
            // Right and down; a torus wraps (not where that would repeat a link or
            // make a loop: two rows or columns wrap onto the same neighbour).
            if c + 1 < cols || (torus && cols > 2) {
                g.links.push(GenLink { a: at(r, c), b: at(r, (c + 1) % cols), tier: "link" });
            }
            if r + 1 < rows || (torus && rows > 2) {
                g.links.push(GenLink { a: at(r, c), b: at((r + 1) % rows, c), tier: "link" });
            }
        }
    }
    g
}

fn random_nodes(prefix: &str, n: usize, side_m: f64, rng: &mut Rng) -> Vec<GenNode> {
    (0..n)
        .map(|i| {
            node(
                format!("{prefix}{i}"),
                Role::Router,
                Some([rng.unit() * side_m, rng.unit() * side_m]),
            )
        })
        .collect()
}

fn barabasi_albert(prefix: &str, n: usize, m: usize, rng: &mut Rng) -> Graph {
    let mut g = Graph::default();
    for i in 0..n {
        g.nodes.push(node(format!("{prefix}{i}"), Role::Router, None));
    }
    // Every link's two ends, once each: a node appears as often as its degree.
    let mut ends: Vec<usize> = Vec::with_capacity(2 * n * m);
    let start = (m + 1).min(n);
    for i in 1..start {
        g.links.push(GenLink { a: 0, b: i, tier: "link" });
        ends.extend([0, i]);
    }
    let mut chosen: Vec<usize> = Vec::with_capacity(m);
    for new in start..n {
        chosen.clear();
        while chosen.len() < m {
            let t = ends[rng.below(ends.len())];
            if !chosen.contains(&t) {
                chosen.push(t);
            }
        }
        for &t in &chosen {
            g.links.push(GenLink { a: t, b: new, tier: "link" });
            ends.extend([t, new]);
        }
    }
    g
}

fn distance(a: [f64; 2], b: [f64; 2]) -> f64 {
    (a[0] - b[0]).hypot(a[1] - b[1])
}

fn waxman(prefix: &str, n: usize, alpha: f64, beta: f64, side_m: f64, rng: &mut Rng) -> Graph {
    let nodes = random_nodes(prefix, n, side_m, rng);
    let pos: Vec<[f64; 2]> = nodes.iter().map(|x| x.pos.unwrap_or_default()).collect();
    let l = side_m * std::f64::consts::SQRT_2;
    let mut links = Vec::new();
    for a in 0..n {
        for b in a + 1..n {
            if rng.unit() < alpha * (-distance(pos[a], pos[b]) / (beta * l)).exp() {
                links.push(GenLink { a, b, tier: "link" });
            }
        }
    }
    let mut g = Graph { nodes, links };
    connect(&mut g, &pos);
    g
}

/// Join every component to the first node's by the nearest pair of nodes between them
/// (in order of each component's lowest node).
fn connect(g: &mut Graph, pos: &[[f64; 2]]) {
    let n = g.nodes.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    for l in &g.links {
        let (ra, rb) = (root(&mut parent, l.a), root(&mut parent, l.b));
        parent[ra.max(rb)] = ra.min(rb);
    }
    for x in 1..n {
        if root(&mut parent, x) != x {
            continue; // not the lowest node of its component
        }
        if root(&mut parent, 0) == x {
            continue;
        }
        let main: Vec<usize> =
            (0..n).filter(|&y| root(&mut parent, y) == root(&mut parent, 0)).collect();
        let comp: Vec<usize> = (0..n).filter(|&y| root(&mut parent, y) == x).collect();
        let mut best = (f64::INFINITY, 0, x);
        for &a in &main {
            for &b in &comp {
                let d = distance(pos[a], pos[b]);
                if d < best.0 {
                    best = (d, a, b);
                }
            }
        }
        g.links.push(GenLink { a: best.1, b: best.2, tier: "link" });
        let r0 = root(&mut parent, 0);
        parent[x] = r0;
    }
}

fn geometric(prefix: &str, n: usize, radius_m: f64, side_m: f64, rng: &mut Rng) -> Graph {
    let nodes = random_nodes(prefix, n, side_m, rng);
    let pos: Vec<[f64; 2]> = nodes.iter().map(|x| x.pos.unwrap_or_default()).collect();
    // Cells of the radius: a node's neighbours are in its cell and the eight around it.
    let cell = |p: [f64; 2]| ((p[0] / radius_m) as i64, (p[1] / radius_m) as i64);
    let mut cells: HashMap<(i64, i64), Vec<usize>> = HashMap::new();
    for (i, p) in pos.iter().enumerate() {
        cells.entry(cell(*p)).or_default().push(i);
    }
    let mut links = Vec::new();
    for a in 0..n {
        let (cx, cy) = cell(pos[a]);
        let mut near: Vec<usize> = Vec::new();
        for dx in -1..=1 {
            for dy in -1..=1 {
                if let Some(v) = cells.get(&(cx + dx, cy + dy)) {
                    near.extend(v.iter().copied().filter(|&b| b > a));
                }
            }
        }
        near.sort_unstable();
        for b in near {
            if distance(pos[a], pos[b]) <= radius_m {
                links.push(GenLink { a, b, tier: "link" });
            }
        }
    }
    Graph { nodes, links }
}

/// A connected random graph on `nodes` (a ring, then each other pair with probability
/// `p`), its links of `tier`.
fn domain(g: &mut Graph, nodes: &[usize], p: f64, tier: &'static str, rng: &mut Rng) {
    let k = nodes.len();
    for i in 0..k {
        for j in i + 1..k {
            let ring = j == i + 1 || (i == 0 && j == k - 1 && k > 2);
            if ring || rng.unit() < p {
                g.links.push(GenLink { a: nodes[i], b: nodes[j], tier });
            }
        }
    }
}

fn transit_stub(prefix: &str, sizes: [usize; 4], p: f64, rng: &mut Rng) -> Graph {
    let [transits, transit_size, stubs, stub_size] = sizes;
    let mut g = Graph::default();
    let mut first_of_transit = Vec::new();
    for t in 0..transits {
        let ids: Vec<usize> = (0..transit_size)
            .map(|r| {
                g.nodes.push(node(format!("{prefix}t{t}r{r}"), Role::Router, None));
                g.nodes.len() - 1
            })
            .collect();
        first_of_transit.push(ids[0]);
        domain(&mut g, &ids, p, "transit", rng);
        for (r, &tr) in ids.iter().enumerate() {
            for s in 0..stubs {
                let stub: Vec<usize> = (0..stub_size)
                    .map(|x| {
                        g.nodes.push(node(format!("{prefix}t{t}r{r}s{s}n{x}"), Role::Router, None));
                        g.nodes.len() - 1
                    })
                    .collect();
                domain(&mut g, &stub, p, "stub", rng);
                g.links.push(GenLink { a: tr, b: stub[0], tier: "access" });
            }
        }
    }
    // The transit domains in a ring (one link between two).
    for t in 0..transits {
        let next = (t + 1) % transits;
        if next != t && !(transits == 2 && t == 1) {
            g.links.push(GenLink {
                a: first_of_transit[t],
                b: first_of_transit[next],
                tier: "transit",
            });
        }
    }
    g
}

#[cfg(test)]
mod tests;
