//! Topologies drawn elsewhere, made scenarios (`vemu import`): GraphML files such as the
//! Internet Topology Zoo's maps of real ISP networks. Each GraphML node becomes a node
//! (named after its `label`), each edge a link whose delay is the great-circle distance
//! between its ends' `Latitude`/`Longitude` at the speed of light in fibre, and whose
//! bandwidth is the edge's `LinkSpeedRaw` (bits/s) where the file gives one. The output
//! is scenario YAML, checked by the same loader as any scenario before it is handed out.

mod asrel;
mod clab;
mod imunes;

pub use asrel::{
    as_rel, as_rel_file, bird_as_paths, frr_as_paths, generate_as_rel, is_as_rel, ixp_rs_asn,
    parse_as_rel, routes_valley_free, valley_free, AsGraph, AsOptions, AsRouter, Neighbour, Rel,
    MAX_AS_REL_BYTES,
};
pub use clab::{clab, clab_file, is_clab, MAX_CLAB_BYTES};
pub use imunes::{imunes, imunes_file, is_imunes, MAX_IMN_BYTES};

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::path::Path;

/// Speed of light in optical fibre (refractive index ~1.468), km/s: 4.9 µs per km.
pub const FIBRE_KM_PER_S: f64 = 299_792.458 / 1.468;
/// Mean radius of the Earth, km.
const EARTH_RADIUS_KM: f64 = 6_371.0;
/// Largest file read (the biggest Topology Zoo map is ~0.5 MB; reading one costs about
/// 50 times its size in memory, so this keeps `vemu import` under ~200 MB).
pub const MAX_GRAPHML_BYTES: u64 = 4 << 20;
/// Most nodes and edges taken.
pub const MAX_NODES: usize = 100_000;
pub const MAX_EDGES: usize = 1_000_000;

/// A scenario made from a GraphML file.
#[derive(Debug, Clone)]
pub struct Imported {
    pub yaml: String,
    pub nodes: usize,
    pub links: usize,
    /// What was left out or guessed, for people.
    pub warnings: Vec<String>,
}

/// Read `path` (a GraphML file) and make a scenario of it, for lab `name` (default: from
/// the file's name).
pub fn graphml_file(path: &Path, name: Option<&str>) -> Result<Imported, String> {
    if let Some(n) = name {
        crate::valid_lab_name(n)?;
    }
    let text = crate::read_limited(path, MAX_GRAPHML_BYTES)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    graphml(&text, &path.display().to_string(), name.unwrap_or(&stem))
}

/// JSON's quoting is YAML's double-quoted scalar.
pub(crate) fn q(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// A name vemu takes for node or lab `s` (letters, digits, `-`, `_`).
pub(crate) fn clean_name(s: &str, fallback: &str) -> String {
    let n: String = s
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' })
        .take(32)
        .collect();
    if n.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        n
    } else {
        fallback.to_string()
    }
}

/// Great-circle distance between two points given in degrees, km (haversine).
pub fn distance_km(lat1: f64, lon1: f64, lat2: f64, lon2: f64) -> f64 {
    let (p1, p2) = (lat1.to_radians(), lat2.to_radians());
    let (dp, dl) = ((lat2 - lat1).to_radians(), (lon2 - lon1).to_radians());
    let a = (dp / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
    2.0 * EARTH_RADIUS_KM * a.sqrt().min(1.0).asin()
}

/// `s` in the letters a node name may have (ASCII letters, digits, '-', '_'): accents
/// dropped, anything else a single '-', none at the ends.
fn ascii_name(s: &str) -> String {
    let mut base = String::new();
    for c in s.trim().chars() {
        match c {
            c if c.is_ascii_alphanumeric() || c == '-' || c == '_' => base.push(c),
            'ä' | 'à' | 'á' | 'â' | 'ã' | 'å' => base.push('a'),
            'Ä' | 'À' | 'Á' | 'Â' | 'Ã' | 'Å' => base.push('A'),
            'é' | 'è' | 'ê' | 'ë' => base.push('e'),
            'É' | 'È' | 'Ê' | 'Ë' => base.push('E'),
            'í' | 'ì' | 'î' | 'ï' => base.push('i'),
            'ó' | 'ò' | 'ô' | 'õ' | 'ö' | 'ø' => base.push('o'),
            'Ó' | 'Ò' | 'Ô' | 'Õ' | 'Ö' | 'Ø' => base.push('O'),
            'ú' | 'ù' | 'û' | 'ü' => base.push('u'),
            'Ú' | 'Ù' | 'Û' | 'Ü' => base.push('U'),
            'ç' => base.push('c'),
            'ñ' => base.push('n'),
            'ß' => base.push_str("ss"),
            _ => base.push('-'),
        }
    }
    while base.contains("--") {
        base = base.replace("--", "-");
    }
    base.trim_matches('-').to_string()
}

/// A name the scenario accepts (1–32 letters, digits, '-', '_', starting with a
/// letter), made from a label; `taken` makes it unique.
fn node_name(label: &str, fallback: &str, taken: &mut HashMap<String, usize>) -> String {
    let mut base = ascii_name(label);
    if base.is_empty() {
        // The fallback holds the file's node id, which may be anything too.
        base = ascii_name(fallback);
    }
    if base.is_empty() {
        base = "n".to_string();
    }
    if !base.starts_with(|c: char| c.is_ascii_alphabetic()) {
        base = format!("n-{base}");
    }
    base.truncate(28);
    let n = taken.entry(base.to_ascii_lowercase()).or_insert(0);
    *n += 1;
    if *n == 1 {
        base
    } else {
        let name = format!("{base}-{n}");
        // A label that itself ends in "-2" could meet the name made here: count on.
        if taken.contains_key(&name.to_ascii_lowercase()) {
            return node_name(&name, fallback, taken);
        }
        taken.insert(name.to_ascii_lowercase(), 1);
        name
    }
}

/// Text safe in a YAML comment (one line).
fn comment(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { ' ' } else { c }).take(80).collect()
}

/// Make a scenario of GraphML `text` (read from `file`, for messages; `stem` names the
/// lab, made a valid name).
pub fn graphml(text: &str, file: &str, stem: &str) -> Result<Imported, String> {
    let doc = roxmltree::Document::parse(text)
        .map_err(|e| format!("{file}: not GraphML (XML error: {e})"))?;
    let g = read_graph(&doc, file)?;
    let stem_name: String = stem
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' })
        .take(32)
        .collect();
    let lab = if stem_name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        stem_name
    } else {
        "imported".to_string()
    };

    let (y, warnings) = write_scenario(&g, file, &lab);
    // What is handed out must be a scenario vemu accepts.
    crate::load_str_in(&y, &format!("{lab}.yaml"), &lab, None, None).map_err(|e| {
        format!("{file}: the scenario made from it is not valid (a bug in vemu import): {e}")
    })?;
    Ok(Imported { yaml: y, nodes: g.nodes.len(), links: g.links.len(), warnings })
}

/// A node of a GraphML graph: its name in the scenario, its label, its coordinates.
struct GraphNode {
    name: String,
    label: String,
    pos: Option<(f64, f64)>,
}

/// A GraphML graph as read: its nodes, one link per pair of nodes (with the fastest
/// edge's speed), and how many self-loops and parallel edges were left out.
struct Graph {
    nodes: Vec<GraphNode>,
    links: BTreeMap<(usize, usize), Option<u64>>,
    loops: usize,
    parallel: usize,
}

/// The graph of a GraphML document (`file` for messages), bounded in nodes and edges.
fn read_graph(doc: &roxmltree::Document, file: &str) -> Result<Graph, String> {
    let at = |n: roxmltree::Node| {
        let p = doc.text_pos_at(n.range().start);
        format!("{file}:{}:{}", p.row, p.col)
    };
    // Key ids → attribute names, per kind of element.
    let mut keys: HashMap<(&str, &str), &str> = HashMap::new();
    for k in doc.descendants().filter(|n| n.has_tag_name("key")) {
        if let (Some(id), Some(name)) = (k.attribute("id"), k.attribute("attr.name")) {
            keys.insert((k.attribute("for").unwrap_or("all"), id), name);
        }
    }
    let data = |n: roxmltree::Node, kind: &str| -> BTreeMap<String, String> {
        n.children()
            .filter(|c| c.has_tag_name("data"))
            .filter_map(|d| {
                let key = d.attribute("key")?;
                let name = keys
                    .get(&(kind, key))
                    .or_else(|| keys.get(&("all", key)))
                    .copied()
                    .unwrap_or(key);
                Some((name.to_string(), d.text().unwrap_or("").trim().to_string()))
            })
            .collect()
    };
    let graph = doc
        .descendants()
        .find(|n| n.has_tag_name("graph"))
        .ok_or_else(|| format!("{file}: no <graph> element: not GraphML"))?;

    let mut nodes: Vec<GraphNode> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut taken = HashMap::new();
    for n in graph.children().filter(|n| n.has_tag_name("node")) {
        let id = n.attribute("id").ok_or_else(|| format!("{}: a node without an id", at(n)))?;
        if index.contains_key(id) {
            return Err(format!("{}: node id '{id}' appears twice", at(n)));
        }
        if nodes.len() == MAX_NODES {
            return Err(format!("{}: more than {MAX_NODES} nodes", at(n)));
        }
        let d = data(n, "node");
        let label = d.get("label").cloned().unwrap_or_default();
        let coord =
            |k: &str| d.get(k).and_then(|v| v.parse::<f64>().ok()).filter(|v| v.is_finite());
        let pos = match (coord("Latitude"), coord("Longitude")) {
            (Some(lat), Some(lon)) if lat.abs() <= 90.0 && lon.abs() <= 360.0 => Some((lat, lon)),
            _ => None,
        };
        let name = node_name(&label, &format!("n{id}"), &mut taken);
        index.insert(id, nodes.len());
        nodes.push(GraphNode { name, label, pos });
    }
    if nodes.is_empty() {
        return Err(format!("{}: the graph has no nodes", at(graph)));
    }
    // Links, one per pair of nodes (parallel edges merged: the fastest kept).
    let mut links: BTreeMap<(usize, usize), Option<u64>> = BTreeMap::new();
    let (mut loops, mut parallel, mut edges) = (0, 0, 0);
    for e in graph.children().filter(|n| n.has_tag_name("edge")) {
        edges += 1;
        if edges > MAX_EDGES {
            return Err(format!("{}: more than {MAX_EDGES} edges", at(e)));
        }
        let end = |k: &str| -> Result<usize, String> {
            let id = e.attribute(k).ok_or_else(|| format!("{}: an edge without a {k}", at(e)))?;
            index
                .get(id)
                .copied()
                .ok_or_else(|| format!("{}: edge {k} '{id}' is not a node of the graph", at(e)))
        };
        let (a, b) = (end("source")?, end("target")?);
        if a == b {
            loops += 1;
            continue;
        }
        let d = data(e, "edge");
        // Within what a scenario accepts (1 bit/s … 1 Tbit/s).
        let speed = d
            .get("LinkSpeedRaw")
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 1.0 && *v <= 1e12)
            .map(|v| v as u64);
        match links.entry((a.min(b), a.max(b))) {
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(speed);
            }
            std::collections::btree_map::Entry::Occupied(mut o) => {
                parallel += 1;
                let merged = match (*o.get(), speed) {
                    (Some(x), Some(y)) => Some(x.max(y)),
                    (x, y) => x.or(y),
                };
                o.insert(merged);
            }
        }
    }
    Ok(Graph { nodes, links, loops, parallel })
}

/// The scenario of graph `g` (read from `file`) as lab `lab`, and what to warn of.
fn write_scenario(g: &Graph, file: &str, lab: &str) -> (String, Vec<String>) {
    let (nodes, links) = (&g.nodes, &g.links);
    let mut warnings = Vec::new();
    let mut y = String::new();
    let _ = writeln!(
        y,
        "# Imported by `vemu import` from {} (GraphML): {} nodes, {} links.",
        comment(file),
        nodes.len(),
        links.len()
    );
    let _ = writeln!(
        y,
        "# Delays: great-circle distance between the nodes' coordinates at the speed of light"
    );
    let _ = writeln!(
        y,
        "# in fibre ({FIBRE_KM_PER_S:.0} km/s, 4.9 us/km); bandwidth from the edges' LinkSpeedRaw."
    );
    let _ = writeln!(y, "name: {lab}");
    // Static routes where they fit (n nodes on l links hold up to n*l); else none, said.
    let static_routes = nodes.len() as u64 * links.len() as u64 <= crate::MAX_STATIC_ROUTES;
    if !static_routes {
        warnings.push(format!("{} nodes on {} links are too many for static routes: the scenario says 'routing: none' (run a routing daemon in the nodes)", nodes.len(), links.len()));
    }
    let _ = writeln!(y, "routing: {}", if static_routes { "static" } else { "none" });
    let _ = writeln!(y, "nodes:");
    for n in nodes {
        let place = n
            .pos
            .map(|(lat, lon)| format!(" ({lat:.4}, {lon:.4})"))
            .unwrap_or_else(|| " (no coordinates)".into());
        let _ = writeln!(y, "  {}: {{}}  # {}{place}", n.name, comment(&n.label));
    }
    if !links.is_empty() {
        let _ = writeln!(y, "links:");
    }
    let mut no_delay = 0;
    for (&(a, b), speed) in links {
        let (na, nb) = (&nodes[a], &nodes[b]);
        let mut fields = format!("endpoints: [{}, {}]", na.name, nb.name);
        let mut note = String::new();
        match (na.pos, nb.pos) {
            (Some((la, oa)), Some((lb, ob))) => {
                let km = distance_km(la, oa, lb, ob);
                let us = (km / FIBRE_KM_PER_S * 1e6).round() as u64;
                if us > 0 {
                    let _ = write!(fields, ", delay: {us}us");
                }
                let _ = write!(note, "  # {km:.0} km");
            }
            _ => no_delay += 1,
        }
        if let Some(bps) = speed {
            let _ = write!(fields, ", bandwidth: {bps}bit");
        }
        let _ = writeln!(y, "  - {{{fields}}}{note}");
    }
    if no_delay > 0 {
        warnings.push(format!(
            "{no_delay} links have an end without coordinates: no delay set on them"
        ));
    }
    if g.parallel > 0 {
        warnings.push(format!(
            "{} parallel edges merged into the link between the same nodes (the fastest kept)",
            g.parallel
        ));
    }
    if g.loops > 0 {
        warnings.push(format!("{} edges from a node to itself left out", g.loops));
    }
    (y, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three cities of a Topology Zoo-like map, a node without coordinates, a parallel
    /// edge and a loop.
    const ZOO: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
  <key attr.name="Latitude" attr.type="double" for="node" id="d29" />
  <key attr.name="Longitude" attr.type="double" for="node" id="d32" />
  <key attr.name="label" attr.type="string" for="node" id="d33" />
  <key attr.name="LinkSpeedRaw" attr.type="double" for="edge" id="d38" />
  <graph edgedefault="undirected">
    <node id="0"><data key="d29">40.71427</data><data key="d32">-74.00597</data><data key="d33">New York</data></node>
    <node id="1"><data key="d29">41.85003</data><data key="d32">-87.65005</data><data key="d33">Chicago</data></node>
    <node id="2"><data key="d29">38.89511</data><data key="d32">-77.03637</data><data key="d33">Washington, DC</data></node>
    <node id="3"><data key="d33">New York</data></node>
    <edge source="0" target="1"><data key="d38">10000000000.0</data></edge>
    <edge source="1" target="0"><data key="d38">40000000000.0</data></edge>
    <edge source="0" target="2" />
    <edge source="2" target="3" />
    <edge source="3" target="3" />
  </graph>
</graphml>"#;

    /// A tree of `n` nodes as GraphML.
    fn tree(n: usize) -> String {
        let mut g = String::from("<graphml><graph edgedefault=\"undirected\">\n");
        for i in 0..n {
            g += &format!("<node id=\"{i}\"/>\n");
        }
        for i in 1..n {
            g += &format!("<edge source=\"{}\" target=\"{i}\"/>\n", (i - 1) / 2);
        }
        g + "</graph></graphml>\n"
    }

    /// Audit (issue 39): a 16 MB file cost `vemu import` 1.16 GB. Files are read up to
    /// 4 MiB (about 200 MB of memory); a graph too big for static routes (which made a
    /// scenario the loader refused, "a bug in vemu import") gets `routing: none`, said.
    #[test]
    fn big_files_are_refused_and_big_graphs_get_no_static_routes() {
        let dir = std::env::temp_dir().join(format!("vemu-import-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big.graphml");
        std::fs::write(&big, tree(100_000)).unwrap();
        assert!(std::fs::metadata(&big).unwrap().len() > MAX_GRAPHML_BYTES);
        let e = graphml_file(&big, None).map(|i| i.nodes).unwrap_err();
        assert!(e.contains("big.graphml") && e.contains("4194304"), "{e}");
        let i = graphml(&tree(5_000), "t.graphml", "t").unwrap();
        assert!(
            i.yaml.contains("\nrouting: none\n")
                && i.warnings.iter().any(|w| w.contains("too many for static routes")),
            "{:?}",
            i.warnings
        );
        crate::load_str_in(&i.yaml, "t.yaml", "t", None, None).unwrap();
        let i = graphml(&tree(100), "t.graphml", "t").unwrap();
        assert!(i.yaml.contains("\nrouting: static\n"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_topology_zoo_map_becomes_a_valid_scenario_with_fibre_delays() {
        let i = graphml(ZOO, "Zoo.graphml", "Zoo").unwrap();
        assert_eq!((i.nodes, i.links), (4, 3));
        let plan = crate::load_str_in(&i.yaml, "zoo.yaml", "zoo", None, None).unwrap();
        assert_eq!(plan.name, "Zoo");
        let names: Vec<&str> = plan.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["New-York", "Chicago", "Washington-DC", "New-York-2"]);
        // New York – Chicago: 1146 km, 5.61 ms in fibre; the faster parallel edge kept.
        let km = distance_km(40.71427, -74.00597, 41.85003, -87.65005);
        assert!((km - 1146.0).abs() < 1.0, "{km}");
        assert!(i.yaml.contains("- {endpoints: [New-York, Chicago], delay: 5611us, bandwidth: 40000000000bit}  # 1146 km"), "{}", i.yaml);
        // Washington has coordinates, its namesake-free neighbour none: no delay.
        assert!(i.yaml.contains("- {endpoints: [Washington-DC, New-York-2]}\n"), "{}", i.yaml);
        assert_eq!(i.warnings.len(), 3, "{:?}", i.warnings);
        assert!(i.warnings.iter().any(|w| w.contains("1 parallel edges")));
    }

    #[test]
    fn bad_files_are_refused_with_where() {
        for (text, says) in [
            ("<graphml><graph>", "Zoo.graphml: not GraphML"),
            ("<graphml/>", "no <graph> element"),
            ("<graphml><graph></graph></graphml>", "the graph has no nodes"),
            ("<graphml><graph>\n<node id=\"a\"/>\n<edge source=\"a\" target=\"b\"/></graph></graphml>", "Zoo.graphml:3:1: edge target 'b' is not a node"),
            ("<graphml><graph><node id=\"a\"/><node id=\"a\"/></graph></graphml>", "node id 'a' appears twice"),
            ("<!DOCTYPE x [<!ENTITY a \"aaaa\">]><graphml/>", "not GraphML"),
        ] {
            let e = graphml(text, "Zoo.graphml", "Zoo").unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn labels_become_unique_node_names() {
        let mut t = HashMap::new();
        assert_eq!(node_name("1st Street", "n1", &mut t), "n-1st-Street");
        assert_eq!(node_name("", "n7", &mut t), "n7");
        assert_eq!(node_name("A", "x", &mut t), "A");
        assert_eq!(node_name("a", "x", &mut t), "a-2");
        assert_eq!(node_name("A-2", "x", &mut t), "A-2-2");
        let long = node_name(&"x".repeat(100), "x", &mut t);
        assert!(long.len() <= 32);
        assert_eq!(node_name("Zürich Öst", "n", &mut t), "Zurich-Ost");
        assert!(crate::valid_node_name(&node_name("東京", "n9", &mut t)).is_ok());
        // Without a label the node's id names it: any text there, cut on a character
        // boundary (found by the graphml fuzz target: a multi-byte letter at byte 28).
        let from_id = node_name("", "n2meatvr\u{49b}amu________meatvr\u{49b}amuf", &mut t);
        assert_eq!(from_id, "n2meatvr-amu________meatvr-a");
        assert!(crate::valid_node_name(&node_name(" ", "n<a b>\u{49b}", &mut t)).is_ok());
    }
}
