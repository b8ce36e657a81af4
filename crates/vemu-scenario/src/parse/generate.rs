//! `generate:`: topologies made by a generator ([`crate::generate`]) instead of written
//! out — their nodes and links become the scenario's, beside the written ones, read by
//! the same code (defaults, kinds, templates, impairments). A generator's nodes are
//! named after it (`ft` makes `ftc0`, `ftp0a1`, ...), so written links and segments can
//! name them too.

use std::collections::HashMap;
use std::path::Path;

use crate::generate::{
    GenNode, Generator, Graph, Role, MAX_BA_M, MAX_GENERATED_LINKS, MAX_GENERATED_NODES,
    MAX_WAXMAN_NODES,
};
use crate::yaml::{Mark, Node, Value};

use super::node::{node_def, NodeParts};
use super::reader::{integer, join, P};
use super::{link::link_def, LinkDef, NodeDef, IMPAIRMENT_KEYS};

/// The generators' names in `generate:` entries.
const GENERATORS: &[&str] = &[
    "fat-tree",
    "leaf-spine",
    "grid",
    "torus",
    "barabasi-albert",
    "waxman",
    "geometric",
    "transit-stub",
];

/// The keys of a `generate:` entry beside its generator.
const ENTRY_KEYS: &[&str] = &["seed", "link", "tiers", "routing", "node", "host", "radio"];

/// The OSPF configuration of a generated router with `routing: ospf` (FRR; a template
/// of the node's own values): OSPFv2 and OSPFv3 on every interface, point-to-point on
/// links, hellos every second, connected networks redistributed.
const OSPF_CONFIG: &str = "frr defaults traditional
hostname {{ name }}
log syslog informational
{% set rid %}{% if router_id is defined and router_id %}{{ router_id }}{% else %}10.{{ (index // 65536) % 256 }}.{{ (index // 256) % 256 }}.{{ index % 256 }}{% endif %}{% endset %}
{% for i in ifaces %}interface {{ i.name }}
{% if i.kind == 'link' %} ip ospf network point-to-point
 ipv6 ospf6 network point-to-point
{% endif %} ip ospf hello-interval 1
 ip ospf dead-interval 4
 ipv6 ospf6 hello-interval 1
 ipv6 ospf6 dead-interval 4
{% if i.ipv4 is defined and i.ipv4 %} ip ospf area 0
{% endif %}{% if i.ipv6 is defined and i.ipv6 %} ipv6 ospf6 area 0
{% endif %}!
{% endfor %}router ospf
 ospf router-id {{ rid }}
 redistribute connected
!
router ospf6
 ospf6 router-id {{ rid }}
 redistribute connected
!
";

/// What the generators of a scenario made: their nodes are already among the
/// scenario's; links and the segments of radio planes (as YAML trees, read with the
/// written segments) follow.
#[derive(Default)]
pub(crate) struct Generated {
    pub(crate) links: Vec<LinkDef>,
    pub(crate) segments: Vec<(String, Mark, Node)>,
}

/// How a generator's nodes route: as the lab says, statically, not at all (a daemon of
/// the user's), or with OSPF (FRR) on its routers and static routes on its hosts.
#[derive(Clone, Copy, PartialEq)]
enum Routing {
    Lab,
    Static,
    None,
    Ospf,
}

/// One `generate:` entry, read.
struct Entry<'n> {
    name: &'n str,
    mark: Mark,
    gen: Generator,
    seed: u64,
    link: Vec<(&'n str, Mark, &'n Node)>,
    tiers: HashMap<&'n str, Vec<(&'n str, Mark, &'n Node)>>,
    routing: Routing,
    node: Vec<(&'n str, Mark, &'n Node)>,
    host: Vec<(&'n str, Mark, &'n Node)>,
    radio: Option<(Mark, &'n Node)>,
}

/// Read `generate:` and make its nodes (appended to `nodes`, named in `names`) and links.
#[allow(clippy::too_many_arguments)]
pub(crate) fn generate(
    p: &mut P,
    given: &Node,
    lab_seed: u64,
    base: Option<&Path>,
    default_node: &NodeParts,
    default_link: &vemu_link::ImpairmentsPatch,
    machines: &[crate::Machine],
    nodes: &mut Vec<NodeDef>,
    names: &mut HashMap<String, usize>,
) -> Generated {
    let mut out = Generated::default();
    let mut made_nodes = 0u64;
    let mut made_links = 0u64;
    for (i, (name, mark, def)) in p.map(given, "generate", &[]).into_iter().enumerate() {
        let field = join("generate", name);
        let Some(e) = entry(p, name, mark, def, &field, crate::generate::entry_seed(lab_seed, i))
        else {
            continue;
        };
        let count = e.gen.node_count().unwrap_or(u64::MAX);
        made_nodes = made_nodes.saturating_add(count);
        if made_nodes > MAX_GENERATED_NODES {
            p.err(mark, &field, format!("the generators would make {made_nodes} nodes or more (at most {MAX_GENERATED_NODES})"));
            return out;
        }
        let graph = e.gen.generate(name, e.seed);
        made_links = made_links.saturating_add(graph.links.len() as u64);
        if made_links > MAX_GENERATED_LINKS {
            p.err(mark, &field, format!("the generators would make {made_links} links or more (at most {MAX_GENERATED_LINKS})"));
            return out;
        }
        let first = nodes.len();
        nodes.reserve(graph.nodes.len());
        if e.radio.is_none() {
            out.links.reserve(graph.links.len());
        }
        if !make_nodes(p, &e, &graph, &field, base, default_node, machines, nodes, names) {
            continue;
        }
        match e.radio {
            Some((rmark, radio)) => out.segments.push(radio_segment(&e, &graph, rmark, radio)),
            None => make_links(p, &e, &graph, first, default_link, nodes, names, &mut out.links),
        }
    }
    out
}

/// Read one entry: its generator (exactly one) and settings.
fn entry<'n>(
    p: &mut P,
    name: &'n str,
    mark: Mark,
    def: &'n Node,
    field: &str,
    default_seed: u64,
) -> Option<Entry<'n>> {
    if let Err(m) = crate::valid_node_name(name) {
        p.err(mark, field, format!("{m} (a generator's name starts its nodes' names)"));
        return None;
    }
    let allowed: Vec<&str> = GENERATORS.iter().chain(ENTRY_KEYS).copied().collect();
    let entries = p.map(def, field, &allowed);
    let gens: Vec<_> = entries.iter().filter(|(k, ..)| GENERATORS.contains(k)).collect();
    let [(gname, gmark, gdef)] = gens.as_slice() else {
        p.err(
            mark,
            field,
            format!("a generator entry names exactly one of {}", GENERATORS.join(", ")),
        );
        return None;
    };
    let gen = generator(p, gname, *gmark, gdef, &join(field, gname))?;
    let get = |k: &str| entries.iter().find(|e| e.0 == k).map(|e| (e.1, e.2));
    let seed = get("seed")
        .and_then(|(_, v)| p.scalar(v, &join(field, "seed"), integer::<u64>("a whole number")))
        .unwrap_or(default_seed);
    let settings = |p: &mut P, k: &str| {
        get(k).map(|(_, v)| p.map(v, &join(field, k), &[])).unwrap_or_default()
    };
    let link = settings(p, "link");
    let node = settings(p, "node");
    let host = settings(p, "host");
    let mut tiers = HashMap::new();
    if let Some((_, v)) = get("tiers") {
        for (tier, _, tdef) in p.map(v, &join(field, "tiers"), gen.tiers()) {
            tiers.insert(tier, p.map(tdef, &join(&join(field, "tiers"), tier), &[]));
        }
    }
    for (k, kmark, _) in link.iter().chain(tiers.values().flatten()) {
        if *k == "endpoints"
            || *k == "name"
            || !(IMPAIRMENT_KEYS.contains(k) || ["weight", "forward", "reverse"].contains(k))
        {
            p.err(*kmark, &join(field, k), format!("'{k}' is not a link setting a generator can give (impairments, weight, forward, reverse)"));
        }
    }
    let routing = get("routing")
        .and_then(|(_, v)| {
            p.scalar(v, &join(field, "routing"), |s| match s {
                "static" => Ok(Routing::Static),
                "none" => Ok(Routing::None),
                "ospf" => Ok(Routing::Ospf),
                _ => Err(format!("expected 'static', 'none' or 'ospf' (FRR on the routers, static routes on the hosts), got '{s}'")),
            })
        })
        .unwrap_or(Routing::Lab);
    let radio = get("radio");
    if let (Some((rmark, _)), false) = (radio, matches!(gen, Generator::Geometric { .. })) {
        p.err(
            rmark,
            &join(field, "radio"),
            "'radio' puts a geometric graph's nodes on a wireless segment: only 'geometric' has it",
        );
        return None;
    }
    Some(Entry { name, mark, gen, seed, link, tiers, routing, node, host, radio })
}

/// A generator's parameters: a map (`fat-tree: {k: 4}`), or its one size (`fat-tree: 4`).
fn generator(p: &mut P, name: &str, mark: Mark, def: &Node, field: &str) -> Option<Generator> {
    let keys: &[&str] = match name {
        "fat-tree" => &["k", "hosts"],
        "leaf-spine" => &["spines", "leaves", "hosts"],
        "grid" | "torus" => &["rows", "cols"],
        "barabasi-albert" => &["n", "m"],
        "waxman" => &["n", "alpha", "beta", "side"],
        "geometric" => &["n", "radius", "side"],
        _ => &["transits", "transit-size", "stubs", "stub-size", "p"],
    };
    let given: Vec<(&str, Mark, &Node)> = match &def.value {
        Value::Map(_) => p.map(def, field, keys),
        Value::Scalar(..) => vec![(keys[0], def.mark, def)],
        _ => {
            p.err(def.mark, field, format!("expected a map of {}", keys.join(", ")));
            return None;
        }
    };
    let errors = p.errors.len();
    let get = |k: &str| given.iter().find(|e| e.0 == k).map(|e| e.2);
    let count = |p: &mut P, k: &str, least: u64, default: Option<u64>| -> u64 {
        let v = match get(k) {
            Some(v) => p.scalar(v, &join(field, k), integer::<u64>("a whole number")),
            None if default.is_some() => default,
            None => {
                p.err(mark, field, format!("'{name}' needs '{k}'"));
                None
            }
        };
        match v {
            Some(x) if x < least => {
                p.err(
                    get(k).map_or(mark, |v| v.mark),
                    &join(field, k),
                    format!("{k} must be at least {least}, got {x}"),
                );
                least
            }
            Some(x) => x,
            None => least,
        }
    };
    let real = |p: &mut P, k: &str, range: (f64, f64), default: Option<f64>| -> f64 {
        let v = match get(k) {
            Some(v) => p.scalar(v, &join(field, k), |s| {
                let x = super::wireless::distance_m(s)
                    .map_err(|_| format!("expected a number, got '{s}'"))?;
                match (range.0..=range.1).contains(&x) {
                    true => Ok(x),
                    false => {
                        Err(format!("{k} must be between {} and {}, got {s}", range.0, range.1))
                    }
                }
            }),
            None if default.is_some() => default,
            None => {
                p.err(mark, field, format!("'{name}' needs '{k}'"));
                None
            }
        };
        v.unwrap_or(range.1)
    };
    let gen = match name {
        "fat-tree" => {
            let k = count(p, "k", 2, None);
            if k % 2 == 1 {
                p.err(
                    get("k").map_or(mark, |v| v.mark),
                    &join(field, "k"),
                    format!("a fat-tree's k must be even, got {k}"),
                );
            }
            let hosts = get("hosts")
                .map(|v| p.boolean(v, &join(field, "hosts")).unwrap_or(true))
                .unwrap_or(true);
            Generator::FatTree { k, hosts }
        }
        "leaf-spine" => Generator::LeafSpine {
            spines: count(p, "spines", 1, None),
            leaves: count(p, "leaves", 1, None),
            hosts: count(p, "hosts", 0, Some(0)),
        },
        "grid" | "torus" => Generator::Grid {
            rows: count(p, "rows", 1, None),
            cols: count(p, "cols", 1, None),
            torus: name == "torus",
        },
        "barabasi-albert" => {
            let (n, m) = (count(p, "n", 1, None), count(p, "m", 1, Some(2)));
            if m > MAX_BA_M {
                p.err(
                    get("m").map_or(mark, |v| v.mark),
                    &join(field, "m"),
                    format!("m is the links each new node makes: at most {MAX_BA_M}, got {m}"),
                );
            }
            Generator::BarabasiAlbert { n, m }
        }
        "waxman" => {
            let n = count(p, "n", 1, None);
            if n > MAX_WAXMAN_NODES {
                p.err(get("n").map_or(mark, |v| v.mark), &join(field, "n"), format!("a Waxman graph weighs every pair of its nodes: at most {MAX_WAXMAN_NODES}, got {n}"));
            }
            let alpha = real(p, "alpha", (0.0, 1.0), Some(0.4));
            let beta = real(p, "beta", (1e-6, 1e6), Some(0.1));
            Generator::Waxman { n, alpha, beta, side_m: real(p, "side", (1.0, 1e7), Some(1000.0)) }
        }
        "geometric" => {
            let n = count(p, "n", 1, None);
            let radius_m = real(p, "radius", (0.001, 1e7), None);
            let side_m = real(p, "side", (1.0, 1e7), Some(1000.0));
            // Expected links: n²/2 · πr²/side² (a bound on the work too).
            let frac = (std::f64::consts::PI * radius_m * radius_m / (side_m * side_m)).min(1.0);
            if (n as f64).powi(2) / 2.0 * frac > MAX_GENERATED_LINKS as f64 {
                p.err(mark, field, format!("{n} nodes within {radius_m} m of each other on a {side_m} m square make more than {MAX_GENERATED_LINKS} links"));
            }
            Generator::Geometric { n, radius_m, side_m }
        }
        _ => Generator::TransitStub {
            transits: count(p, "transits", 1, None),
            transit_size: count(p, "transit-size", 1, None),
            stubs: count(p, "stubs", 0, Some(0)),
            stub_size: count(p, "stub-size", 1, Some(1)),
            p: real(p, "p", (0.0, 1.0), Some(0.5)),
        },
    };
    if gen.node_count().is_none_or(|n| n > MAX_GENERATED_NODES) {
        p.err(
            mark,
            field,
            format!("'{name}' with these parameters makes more than {MAX_GENERATED_NODES} nodes"),
        );
    }
    // Links known (or bounded) before generating: checked first, so that no size makes
    // the generator itself work for long (a transit-stub domain weighs each of its
    // pairs). Waxman and geometric graphs have their own bounds above.
    let bounded = !matches!(gen, Generator::Waxman { .. } | Generator::Geometric { .. });
    if bounded && gen.link_bound().is_none_or(|l| l > MAX_GENERATED_LINKS) {
        p.err(mark, field, format!("'{name}' with these parameters makes (or weighs) more than {MAX_GENERATED_LINKS} links"));
    }
    (p.errors.len() == errors).then_some(gen)
}

/// A node definition for one generated node: the entry's `node:` (or `host:`) settings,
/// its canvas place, and how it routes. Its own marks are the entry's.
fn node_tree(e: &Entry, n: &GenNode, radio: bool) -> Node {
    let mark = e.mark;
    let scalar = |s: String| Node { value: Value::Scalar(s, false), mark };
    let given = match n.role {
        Role::Router => &e.node,
        Role::Host => &e.host,
    };
    let mut map: Vec<(String, Mark, Node)> =
        given.iter().map(|(k, m, v)| (k.to_string(), *m, (*v).clone())).collect();
    let has = |map: &Vec<(String, Mark, Node)>, k: &str| map.iter().any(|e| e.0 == k);
    if let (Some([x, y]), false, false) = (n.pos, has(&map, "canvas"), radio) {
        let seq = vec![scalar(format!("{x:.1}")), scalar(format!("{y:.1}"))];
        map.push(("canvas".into(), mark, Node { value: Value::Seq(seq), mark }));
    }
    let routing = match (e.routing, n.role) {
        (Routing::Lab, _) => None,
        (Routing::Static, _) | (Routing::Ospf, Role::Host) => Some("static"),
        (Routing::None, _) => Some("none"),
        (Routing::Ospf, Role::Router) => {
            if !has(&map, "kind") {
                map.push(("kind".into(), mark, scalar("frr".into())));
                if !has(&map, "startup-config") {
                    map.push(("startup-config".into(), mark, scalar(OSPF_CONFIG.into())));
                }
            }
            Some("none")
        }
    };
    if let (Some(r), false) = (routing, has(&map, "routing")) {
        map.push(("routing".into(), mark, scalar(r.into())));
    }
    Node { value: Value::Map(map), mark }
}

/// Make the graph's nodes; false when one could not be (its error said why: the rest
/// of this generator is not made, so that one mistake gives one error).
#[allow(clippy::too_many_arguments)]
fn make_nodes(
    p: &mut P,
    e: &Entry,
    graph: &Graph,
    field: &str,
    base: Option<&Path>,
    default_node: &NodeParts,
    machines: &[crate::Machine],
    nodes: &mut Vec<NodeDef>,
    names: &mut HashMap<String, usize>,
) -> bool {
    for n in &graph.nodes {
        if names.contains_key(&n.name) {
            p.err(
                e.mark,
                field,
                format!(
                    "generator '{}' makes node '{}', which the scenario has already",
                    e.name, n.name
                ),
            );
            return false;
        }
        let tree = node_tree(e, n, e.radio.is_some());
        let errors = p.errors.len();
        match node_def(p, &n.name, e.mark, &tree, base, default_node, machines, nodes) {
            Some(def) if p.errors.len() == errors => {
                names.insert(n.name.clone(), nodes.len());
                nodes.push(def);
            }
            _ => return false,
        }
    }
    true
}

/// Make the graph's links, each with the entry's `link:` settings and its tier's over
/// them; the first link whose settings are wrong ends them (one error).
#[allow(clippy::too_many_arguments)]
fn make_links(
    p: &mut P,
    e: &Entry,
    graph: &Graph,
    first: usize,
    default_link: &vemu_link::ImpairmentsPatch,
    nodes: &[NodeDef],
    names: &HashMap<String, usize>,
    links: &mut Vec<LinkDef>,
) {
    let mut keys: Vec<&str> = vec!["endpoints", "weight", "forward", "reverse"];
    keys.extend_from_slice(IMPAIRMENT_KEYS);
    let mark = e.mark;
    for l in &graph.links {
        let end =
            |i: usize| Node { value: Value::Scalar(nodes[first + i].name.clone(), false), mark };
        let mut map: Vec<(String, Mark, Node)> = vec![(
            "endpoints".into(),
            mark,
            Node { value: Value::Seq(vec![end(l.a), end(l.b)]), mark },
        )];
        let tier = e.tiers.get(l.tier).map(Vec::as_slice).unwrap_or_default();
        for (k, m, v) in e.link.iter().filter(|(k, ..)| !tier.iter().any(|t| t.0 == *k)).chain(tier)
        {
            map.push((k.to_string(), *m, (*v).clone()));
        }
        let tree = Node { value: Value::Map(map), mark };
        let errors = p.errors.len();
        match link_def(p, links.len(), &tree, &keys, default_link, names, nodes) {
            Some(link) if p.errors.len() == errors => links.push(link),
            _ => return,
        }
    }
}

/// A geometric graph on the radio plane: a wireless segment named after the entry, with
/// the entry's `radio:` settings and its nodes where the generator placed them (the
/// radio's range decides who hears whom, not the graph's radius).
fn radio_segment(e: &Entry, graph: &Graph, mark: Mark, radio: &Node) -> (String, Mark, Node) {
    let scalar = |s: String| Node { value: Value::Scalar(s, false), mark };
    let mut map: Vec<(String, Mark, Node)> = match &radio.value {
        Value::Map(m) => m.clone(),
        _ => Vec::new(),
    };
    if !map.iter().any(|x| x.0 == "kind") {
        map.push(("kind".into(), mark, scalar("wireless".into())));
    }
    if let (false, Generator::Geometric { side_m, .. }) =
        (map.iter().any(|x| x.0 == "area"), &e.gen)
    {
        map.push(("area".into(), mark, scalar(format!("{side_m}x{side_m}"))));
    }
    let members = graph
        .nodes
        .iter()
        .map(|n| {
            let [x, y] = n.pos.unwrap_or_default();
            let pos = Node {
                value: Value::Seq(vec![scalar(format!("{x:.2}")), scalar(format!("{y:.2}"))]),
                mark,
            };
            let entries = vec![
                ("node".to_string(), mark, scalar(n.name.clone())),
                ("position".to_string(), mark, pos),
            ];
            Node { value: Value::Map(entries), mark }
        })
        .collect();
    map.push(("members".into(), mark, Node { value: Value::Seq(members), mark }));
    (e.name.to_string(), mark, Node { value: Value::Map(map), mark })
}
