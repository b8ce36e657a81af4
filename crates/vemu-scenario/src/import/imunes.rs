//! IMUNES topology files (`.imn`, the vimage/IMUNES lineage) as vemu scenarios, in the
//! JSON form IMUNES writes today: `nodes` (routers, PCs, hosts, LAN switches and hubs,
//! with their interfaces' names, MACs and IPv4/IPv6 addresses and their static routes),
//! `links` (peers and their interfaces; bandwidth, delay, duplicates, BER) and the
//! canvas positions (`canvas:`, where the web page draws the nodes and LANs).
//!
//! Routers become `kind: frr` nodes whose startup configuration runs the protocols their
//! `router_config` names (`rip`, `ripng`, `ospf`, `ospf6`), redistributing their
//! connected networks as IMUNES' default configuration does; PCs and hosts plain nodes
//! with their `croutes4`/`croutes6`; a LAN switch or hub a LAN segment whose members are
//! the interfaces linked to it. Addresses are the file's (`addressing` and `routing` are
//! left to it).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use serde_json::Value;

use super::{clean_name, q, Imported};

mod tcl;

/// Largest topology file read.
pub const MAX_IMN_BYTES: u64 = 4 << 20;

/// Whether `path` is named as an IMUNES topology (`NAME.imn`).
pub fn is_imunes(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "imn")
}

/// Read `path` (an IMUNES topology) and make a scenario of it (lab `name`, default the
/// file's name).
pub fn imunes_file(path: &Path, name: Option<&str>) -> Result<Imported, String> {
    let text =
        crate::read_limited(path, MAX_IMN_BYTES).map_err(|e| format!("{}: {e}", path.display()))?;
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    imunes(&text, &path.display().to_string(), name.unwrap_or(&stem))
}

/// Where IMUNES drew node `id` (`gui.nodes.ID.iconcoords`, "X Y"), as `[X, Y]`.
fn canvas(doc: &Value, id: &str) -> Option<String> {
    let pos = doc["gui"]["nodes"][id]["iconcoords"].as_str()?;
    let xy: Vec<f64> = pos.split_whitespace().filter_map(|v| v.parse().ok()).collect();
    match xy[..] {
        [x, y] if x.is_finite() && y.is_finite() && x.abs() <= 1e6 && y.abs() <= 1e6 => {
            Some(format!("[{x}, {y}]"))
        }
        _ => None,
    }
}

/// An interface of a node that is linked.
struct Iface {
    name: String,
    addrs: Vec<String>,
}

/// The scenario made from an IMUNES topology's text (`file` for messages).
pub fn imunes(text: &str, file: &str, stem: &str) -> Result<Imported, String> {
    let doc: Value = match text.trim_start().starts_with('{') {
        true => serde_json::from_str(text)
            .map_err(|e| format!("{file}: not an IMUNES topology (JSON: {e})"))?,
        // The older form: read into the JSON form.
        false => tcl::to_json(text, file)?,
    };
    let nodes = doc["nodes"].as_object().ok_or_else(|| format!("{file}: no 'nodes'"))?;
    let links = doc["links"].as_object().cloned().unwrap_or_default();
    let lab = clean_name(stem, "imported");
    let mut warnings = Vec::new();
    // Each IMUNES node's vemu name (its `name`, made unique) and what it is.
    let names = unique_names(nodes);
    let kind = |id: &str| nodes.get(id).and_then(|n| n["type"].as_str()).unwrap_or("");
    let is_lan = |id: &str| matches!(kind(id), "lanswitch" | "hub");
    let iface = |id: &str, ifc: &str| -> Option<Iface> {
        let i = &nodes.get(id)?["ifaces"][ifc];
        let addrs = ["ipv4_addrs", "ipv6_addrs"]
            .iter()
            .flat_map(|k| i[*k].as_array().cloned().unwrap_or_default())
            .filter_map(|a| a.as_str().map(str::to_string))
            .collect();
        Some(Iface { name: i["name"].as_str()?.to_string(), addrs })
    };
    let mut out = String::new();
    let _ = writeln!(out, "# Made by `vemu import` from the IMUNES topology {file}.");
    let _ = writeln!(out, "name: {}", q(&lab));
    let _ = writeln!(out, "addressing: {{ipv4: none, ipv6: none}}\nrouting: none\nnodes:");
    for (id, n) in nodes {
        let name = &names[id.as_str()];
        match kind(id) {
            "lanswitch" | "hub" => continue,
            "router" | "pc" | "host" => {}
            other => {
                return Err(format!("{file}: node {id} ({name}): type '{other}' is not one vemu makes (router, pc, host, lanswitch, hub)"));
            }
        }
        let _ = writeln!(out, "  {}:", q(name));
        if kind(id) == "router" {
            out.push_str(&router_yaml(name, n, &mut warnings));
        }
        let mut routes = Vec::new();
        // The node's own addresses: a route through one of them goes nowhere.
        let own: Vec<String> = n["ifaces"]
            .as_object()
            .into_iter()
            .flatten()
            .flat_map(|(ifc, _)| iface(id, ifc).map(|i| i.addrs).unwrap_or_default())
            .filter_map(|a| a.split('/').next().map(str::to_string))
            .collect();
        routes.extend(static_routes(n, &own, name, &mut warnings));
        if !routes.is_empty() {
            let _ = writeln!(out, "    routes: [{}]", routes.join(", "));
        }
        if let Some(xy) = canvas(&doc, id) {
            let _ = writeln!(out, "    canvas: {xy}");
        }
    }
    // Links between two nodes; those to a LAN switch or hub make its members.
    let mut link_lines = Vec::new();
    let mut members: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut count = 0;
    for (lid, l) in &links {
        let peers: Vec<&str> = l["peers"].as_str().unwrap_or("").split_whitespace().collect();
        let ifcs: Vec<&str> = l["peers_ifaces"].as_str().unwrap_or("").split_whitespace().collect();
        let ([a, b], [ia, ib]) = (peers.as_slice(), ifcs.as_slice()) else {
            return Err(format!("{file}: link {lid}: needs two peers and their interfaces"));
        };
        for p in [a, b] {
            if !names.contains_key(p) {
                return Err(format!("{file}: link {lid}: no node '{p}'"));
            }
        }
        let end = |id: &str, ifc: &str| -> Result<String, String> {
            let i = iface(id, ifc)
                .ok_or_else(|| format!("{file}: link {lid}: node {id} has no interface {ifc}"))?;
            let ip = match i.addrs.is_empty() {
                true => String::new(),
                false => format!(
                    ", ip: [{}]",
                    i.addrs.iter().map(|a| q(a)).collect::<Vec<_>>().join(", ")
                ),
            };
            Ok(format!("{{node: {}, iface: {}{ip}}}", q(&names[id]), q(&i.name)))
        };
        let imp = link_settings(l);
        match (is_lan(a), is_lan(b)) {
            (false, false) => {
                let extra = imp.iter().map(|i| format!(", {i}")).collect::<String>();
                link_lines.push(format!(
                    "  - {{endpoints: [{}, {}]{extra}}}",
                    end(a, ia)?,
                    end(b, ib)?
                ));
                count += 1;
            }
            (true, false) | (false, true) => {
                let (lan, (node, ifc)) = if is_lan(a) { (*a, (*b, *ib)) } else { (*b, (*a, *ia)) };
                if !imp.is_empty() {
                    warnings.push(format!(
                        "link {lid}: its settings ({}) left out (a LAN port's)",
                        imp.join(", ")
                    ));
                }
                members.entry(lan).or_default().push(end(node, ifc)?);
            }
            (true, true) => warnings.push(format!("link {lid} between two LAN switches left out")),
        }
    }
    if !link_lines.is_empty() {
        let _ = writeln!(out, "links:");
        for l in &link_lines {
            let _ = writeln!(out, "{l}");
        }
    }
    let lans: Vec<_> = members.iter().filter(|(_, m)| m.len() >= 2).collect();
    if !lans.is_empty() {
        let _ = writeln!(out, "segments:");
        for (lan, m) in lans {
            // A hub is a repeater (every frame to every port, CSMA/CD); a switch learns.
            let k = if kind(lan) == "hub" { "hub" } else { "lan" };
            let _ = writeln!(out, "  {}:\n    kind: {k}", q(&names[*lan]));
            if let Some(xy) = canvas(&doc, lan) {
                let _ = writeln!(out, "    canvas: {xy}");
            }
            let _ = writeln!(out, "    members:");
            for member in m {
                let _ = writeln!(out, "      - {member}");
            }
        }
    }
    crate::load_str_in(&out, &format!("{lab}.yaml"), &lab, None, None)
        .map_err(|e| format!("{file}: the scenario made from it is not valid: {e}"))?;
    let made = nodes.keys().filter(|id| !is_lan(id)).count();
    Ok(Imported { yaml: out, nodes: made, links: count, warnings })
}

/// A router's lines: FRR, with its own configuration (the older form's, which FRR reads)
/// or one for the protocols it runs.
fn router_yaml(name: &str, n: &Value, warnings: &mut Vec<String>) -> String {
    let model = n["model"].as_str().unwrap_or("frr");
    if !["frr", "quagga"].contains(&model) {
        warnings.push(format!("node {name}: router model '{model}' run as FRR"));
    }
    let ifaces: Vec<String> = n["ifaces"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, i)| i["type"] != "lo")
        .filter_map(|(_, i)| i["name"].as_str().map(str::to_string))
        .collect();
    let protocols = n["router_config"].as_str().unwrap_or("rip 1 ripng 1");
    // The older form's own configuration (Quagga's, which FRR reads), else — as
    // IMUNES writes for a router that has none — one for the protocols it runs.
    let conf = match n["network_config"].as_str().filter(|c| !c.trim().is_empty()) {
        Some(c) => c.to_string(),
        None => frr_config(name, protocols, &ifaces),
    };
    format!("    kind: frr\n    startup-config: {}\n", q(&conf))
}

/// Each IMUNES node's vemu name: its `name` (or id), made valid and unique.
fn unique_names(nodes: &serde_json::Map<String, Value>) -> BTreeMap<&str, String> {
    let mut names: BTreeMap<&str, String> = BTreeMap::new();
    let mut taken: std::collections::HashSet<String> = std::collections::HashSet::new();
    for (id, n) in nodes {
        let base = clean_name(n["name"].as_str().unwrap_or(id), id);
        let mut name = base.clone();
        let mut k = 1;
        while taken.contains(&name) {
            k += 1;
            name = format!("{base}-{k}");
        }
        taken.insert(name.clone());
        names.insert(id, name);
    }
    names
}

/// A link's settings as vemu's keys (`bandwidth: 10000000bit`, ...).
fn link_settings(l: &Value) -> Vec<String> {
    let mut imp = Vec::new();
    if let Some(bw) = l["bandwidth"].as_str().and_then(|b| b.parse::<u64>().ok()).filter(|b| *b > 0)
    {
        imp.push(format!("bandwidth: {bw}bit"));
    }
    if let Some(d) = l["delay"].as_str().and_then(|d| d.parse::<u64>().ok()).filter(|d| *d > 0) {
        imp.push(format!("delay: {d}us"));
    }
    if let Some(p) =
        l["duplicate"].as_str().and_then(|d| d.parse::<f64>().ok()).filter(|p| *p > 0.0)
    {
        imp.push(format!("duplicate: {p}%"));
    }
    // (IMUNES writes one bit in N.)
    if let Some(n) = l["ber"].as_str().and_then(|b| b.parse::<u64>().ok()).filter(|b| *b > 1) {
        imp.push(format!("ber: 1/{n}"));
    }
    imp
}

/// Node `n`'s static routes (`croutes4`, `croutes6`) as vemu's, but those through one of
/// its own addresses (`own`), which go nowhere.
fn static_routes(n: &Value, own: &[String], name: &str, warnings: &mut Vec<String>) -> Vec<String> {
    let mut routes = Vec::new();
    for key in ["croutes4", "croutes6"] {
        for r in n[key].as_array().into_iter().flatten().filter_map(Value::as_str) {
            match r.split_whitespace().collect::<Vec<_>>().as_slice() {
                [_, via] if own.iter().any(|a| a == via) => warnings
                    .push(format!("node {name}: route '{r}' left out (through its own address)")),
                [dst, via] => routes.push(format!("{{dst: {}, via: {}}}", q(dst), q(via))),
                _ => warnings.push(format!("node {name}: route '{r}' left out")),
            }
        }
    }
    routes
}

/// FRR's configuration for a router running `protocols` (IMUNES' `router_config`, e.g.
/// "rip 1 ripng 1 ospf 0"), on every interface, redistributing connected networks.
fn frr_config(name: &str, protocols: &str, ifaces: &[String]) -> String {
    let words: Vec<&str> = protocols.split_whitespace().collect();
    let on = |p: &str| words.windows(2).any(|w| w[0] == p && w[1] == "1");
    let mut c = format!("hostname {name}\n!\n");
    if on("ospf6") {
        for i in ifaces {
            c += &format!("interface {i}\n ipv6 ospf6 area 0\n!\n");
        }
    }
    if on("rip") {
        c += "router rip\n redistribute connected\n network 0.0.0.0/0\n!\n";
    }
    if on("ripng") {
        c += "router ripng\n redistribute connected\n network ::/0\n!\n";
    }
    if on("ospf") {
        c += "router ospf\n redistribute connected\n network 0.0.0.0/0 area 0\n!\n";
    }
    if on("ospf6") {
        c += "router ospf6\n redistribute connected\n!\n";
    }
    c
}
