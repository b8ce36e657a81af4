//! containerlab topology files (`*.clab.yml`) as vemu scenarios: `name`,
//! `topology.defaults` / `kinds` / `groups` / `nodes` (merged in that order: a node's
//! own keys win) and `links` in the brief (`endpoints: ["r1:eth1", "r2:eth1"]`) and
//! extended (`endpoints: [{node: r1, interface: eth1}, …]`) forms.
//!
//! What maps: `kind: linux` (and no kind) → a node of its own; `image` → `image:`;
//! `binds` of files into the node's private directories → `files: {from:}` (relative to
//! the topology file); `exec` → `run:` (with the node's `env` set for each); links with
//! their interface names kept; `host:IFACE` endpoints → the machine (`kind: host`);
//! `mgmt-ipv4`/`mgmt-ipv6` → the node's own management addresses; `kind: bridge` (and
//! `ovs-bridge`) → a LAN segment whose members are the nodes linked to it.
//! containerlab nodes configure their own addresses and routes (`exec`, their images'
//! configuration), so the scenario asks vemu for neither (`addressing: {ipv4: none,
//! ipv6: none}`, `routing: none`). What does not map is refused (vendors' systems:
//! `nokia_srlinux`, `ceos`, VM images…) naming each node and kind, or left out with a
//! warning (labels, the management network's settings, binds outside the private
//! directories, bridges fewer than two nodes are linked to).

use std::fmt::Write;
use std::path::Path;

use super::{q, Imported};
use crate::yaml::{Node, Value};

/// Largest topology file read.
pub const MAX_CLAB_BYTES: u64 = 4 << 20;

/// The node keys of containerlab that this reads.
const NODE_KEYS: &[&str] = &[
    "kind",
    "image",
    "group",
    "startup-config",
    "binds",
    "env",
    "exec",
    "labels",
    "mgmt-ipv4",
    "mgmt-ipv6",
    "cmd",
    "entrypoint",
];

/// Read `path` (a containerlab topology) and make a scenario of it (lab `name`, default
/// the topology's). `read_binds`: its binds' sources are looked at (a directory's files
/// listed); when not — a tenant's topology, which may not read the machine's files —
/// each bind is written as the `from:` it asks for, unread, for the scenario's checks to
/// refuse at its field (nothing of the machine's files shows in a message).
pub fn clab_file(path: &Path, name: Option<&str>, read_binds: bool) -> Result<Imported, String> {
    let text = crate::read_limited(path, MAX_CLAB_BYTES)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let base = path.parent().map(|p| if p.as_os_str().is_empty() { Path::new(".") } else { p });
    let base = match read_binds {
        true => base.and_then(|b| b.canonicalize().ok()),
        false => base.map(Path::to_path_buf),
    };
    let binds = match (&base, read_binds) {
        (Some(b), true) => Binds::Read(b),
        (Some(b), false) => Binds::Unread(b),
        (None, _) => Binds::Absent,
    };
    clab_with(&text, &path.display().to_string(), binds, name)
}

/// Where a topology's binds are read from.
#[derive(Clone, Copy)]
enum Binds<'a> {
    /// Against its directory, their sources looked at.
    Read(&'a Path),
    /// Against its directory, unread (see [`clab_file`]).
    Unread(&'a Path),
    /// Left out, with a warning (a topology sent to the API).
    Absent,
}

/// Whether `path` is named as a containerlab topology (`NAME.clab.yml` or `.yaml`).
pub fn is_clab(path: &Path) -> bool {
    let n = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    n.ends_with(".clab.yml") || n.ends_with(".clab.yaml")
}

/// A node as containerlab's layers give it.
#[derive(Default, Clone)]
struct ClabNode {
    kind: Option<String>,
    image: Option<String>,
    startup: Option<String>,
    binds: Vec<String>,
    env: Vec<(String, String)>,
    exec: Vec<String>,
    cmd: Option<String>,
    /// `mgmt-ipv4`, `mgmt-ipv6`: the node's own management addresses.
    mgmt: Vec<(&'static str, String)>,
    /// Keys left out (labels, mgmt-ipv4…), for the warnings.
    ignored: Vec<String>,
}

impl ClabNode {
    /// `over`'s keys over this one's.
    fn with(mut self, over: &ClabNode) -> ClabNode {
        if over.kind.is_some() {
            self.kind = over.kind.clone();
        }
        if over.image.is_some() {
            self.image = over.image.clone();
        }
        if over.startup.is_some() {
            self.startup = over.startup.clone();
        }
        if over.cmd.is_some() {
            self.cmd = over.cmd.clone();
        }
        self.binds.extend(over.binds.iter().cloned());
        for (k, v) in &over.env {
            self.env.retain(|(k2, _)| k2 != k);
            self.env.push((k.clone(), v.clone()));
        }
        if !over.exec.is_empty() {
            self.exec = over.exec.clone();
        }
        for (k, v) in &over.mgmt {
            self.mgmt.retain(|(k2, _)| k2 != k);
            self.mgmt.push((k, v.clone()));
        }
        self.ignored.extend(over.ignored.iter().cloned());
        self
    }
}

fn at(file: &str, n: &Node) -> String {
    format!("{file}:{}:{}", n.mark.line, n.mark.col)
}

fn map<'a>(
    file: &str,
    n: &'a Node,
    what: &str,
) -> Result<&'a [(String, crate::yaml::Mark, Node)], String> {
    match &n.value {
        Value::Map(m) => Ok(m),
        _ if n.is_null() => Ok(&[]),
        _ => Err(format!("{}: {what} should be a mapping, not {}", at(file, n), n.kind())),
    }
}

fn get<'a>(m: &'a [(String, crate::yaml::Mark, Node)], key: &str) -> Option<&'a Node> {
    m.iter().find(|(k, _, _)| k == key).map(|(_, _, v)| v)
}

fn scalar(file: &str, n: &Node, what: &str) -> Result<String, String> {
    n.as_str().map(str::to_string).ok_or_else(|| format!("{}: {what} should be text", at(file, n)))
}

fn strings(file: &str, n: &Node, what: &str) -> Result<Vec<String>, String> {
    match &n.value {
        Value::Seq(items) => items.iter().map(|i| scalar(file, i, what)).collect(),
        _ if n.is_null() => Ok(Vec::new()),
        _ => Ok(vec![scalar(file, n, what)?]),
    }
}

/// One layer of a node's keys (defaults, a kind's, a group's, its own).
fn layer(file: &str, n: &Node, what: &str) -> Result<ClabNode, String> {
    let mut c = ClabNode::default();
    for (k, _, v) in map(file, n, what)? {
        let field = format!("{what}.{k}");
        match k.as_str() {
            "kind" => c.kind = Some(scalar(file, v, &field)?),
            "image" => c.image = Some(scalar(file, v, &field)?),
            "startup-config" => c.startup = Some(scalar(file, v, &field)?),
            "binds" => c.binds = strings(file, v, &field)?,
            "exec" => c.exec = strings(file, v, &field)?,
            "cmd" => c.cmd = Some(scalar(file, v, &field)?),
            "mgmt-ipv4" => c.mgmt.push(("ipv4", scalar(file, v, &field)?)),
            "mgmt-ipv6" => c.mgmt.push(("ipv6", scalar(file, v, &field)?)),
            "env" => {
                for (ek, _, ev) in map(file, v, &field)? {
                    c.env.push((ek.clone(), scalar(file, ev, &format!("{field}.{ek}"))?));
                }
            }
            "group" => {}
            _ if NODE_KEYS.contains(&k.as_str()) => c.ignored.push(k.clone()),
            _ => c.ignored.push(k.clone()),
        }
    }
    Ok(c)
}

/// The vendors' systems containerlab runs and vemu cannot (their images are VMs or
/// need their own runtime): everything but `linux`, the bridges (LAN segments) and the
/// machine.
fn refusal(kind: &str) -> String {
    match kind {
        "ext-container" => "kind 'ext-container' (a container vemu did not make) cannot be a node of a vemu lab".to_string(),
        _ => format!("kind '{kind}' is a vendor's system vemu cannot run (vemu runs Linux images: kind linux)"),
    }
}

/// containerlab's management network (every node has one: 172.20.20.0/24 unless
/// `mgmt.ipv4-subnet` says otherwise) as the scenario's `mgmt:` line. The docker
/// network's name, MTU and bridge are containerlab's own: left out with a warning.
fn mgmt(file: &str, m: Option<&Node>, warnings: &mut Vec<String>) -> Result<String, String> {
    let (mut v4, mut v6) = ("172.20.20.0/24".to_string(), "none".to_string());
    for (k, _, v) in m.map(|m| map(file, m, "mgmt")).transpose()?.unwrap_or_default() {
        let value = scalar(file, v, &format!("mgmt.{k}"))?;
        match k.as_str() {
            "ipv4-subnet" | "ipv4_subnet" if value != "auto" => v4 = value,
            "ipv6-subnet" | "ipv6_subnet" if value != "auto" => v6 = value,
            "ipv4-subnet" | "ipv4_subnet" | "ipv6-subnet" | "ipv6_subnet" | "network" => {}
            _ => warnings.push(format!("mgmt.{k} left out")),
        }
    }
    Ok(format!("mgmt: {{ipv4: {}, ipv6: {}}}", q(&v4), q(&v6)))
}

/// The scenario made from a containerlab topology (`file` for messages; `base`: its
/// directory, against which binds are read — `None`: binds left out, with a warning).
pub fn clab(
    text: &str,
    file: &str,
    base: Option<&Path>,
    name: Option<&str>,
) -> Result<Imported, String> {
    clab_with(text, file, base.map_or(Binds::Absent, Binds::Read), name)
}

fn clab_with(text: &str, file: &str, binds: Binds, name: Option<&str>) -> Result<Imported, String> {
    let doc = crate::yaml::parse(text)
        .map_err(|e| format!("{file}:{}:{}: {}", e.mark.line, e.mark.col, e.message))?
        .ok_or_else(|| format!("{file}: empty"))?;
    let top = map(file, &doc, "the topology")?;
    let lab = match (name, get(top, "name")) {
        (Some(n), _) => n.to_string(),
        (None, Some(n)) => scalar(file, n, "name")?,
        (None, None) => return Err(format!("{file}: no 'name'")),
    };
    crate::valid_lab_name(&lab).map_err(|e| format!("{file}: name: {e}"))?;
    let mut warnings = Vec::new();
    for (k, _, _) in top {
        if !["name", "prefix", "mgmt", "topology"].contains(&k.as_str()) {
            warnings.push(format!("'{k}' left out"));
        }
    }
    let mgmt = mgmt(file, get(top, "mgmt"), &mut warnings)?;
    let topo = get(top, "topology").ok_or_else(|| format!("{file}: no 'topology'"))?;
    let topo = map(file, topo, "topology")?;
    let defaults = match get(topo, "defaults") {
        Some(d) => layer(file, d, "topology.defaults")?,
        None => ClabNode::default(),
    };
    let section = |key: &str| -> Result<Vec<(String, ClabNode)>, String> {
        let Some(n) = get(topo, key) else { return Ok(Vec::new()) };
        map(file, n, &format!("topology.{key}"))?
            .iter()
            .map(|(k, _, v)| Ok((k.clone(), layer(file, v, &format!("topology.{key}.{k}"))?)))
            .collect()
    };
    let (kinds, groups) = (section("kinds")?, section("groups")?);
    let nodes_node = get(topo, "nodes").ok_or_else(|| format!("{file}: no 'topology.nodes'"))?;
    let mut out = String::new();
    let _ = writeln!(out, "# Made by `vemu import` from the containerlab topology {file}.");
    let _ = writeln!(out, "name: {}", q(&lab));
    let _ = writeln!(out, "addressing: {{ipv4: none, ipv6: none}}\nrouting: none\n{mgmt}\nnodes:");
    let mut refused = Vec::new();
    let (mut names, mut bridges) = (Vec::new(), Vec::new());
    for (n, _, def) in map(file, nodes_node, "topology.nodes")? {
        crate::valid_node_name(n).map_err(|e| format!("{}: node '{n}': {e}", at(file, def)))?;
        let own = layer(file, def, &format!("topology.nodes.{n}"))?;
        let group = match get(map(file, def, "node")?, "group") {
            Some(g) => Some(scalar(file, g, "group")?),
            None => None,
        };
        let kind = own.kind.clone().or(defaults.kind.clone()).unwrap_or_else(|| "linux".into());
        let mut c = defaults.clone();
        if let Some((_, k)) = kinds.iter().find(|(k, _)| *k == kind) {
            c = c.with(k);
        }
        if let Some((_, g)) = group.as_ref().and_then(|g| groups.iter().find(|(k, _)| k == g)) {
            c = c.with(g);
        }
        let c = c.with(&own);
        if kind == "bridge" || kind == "ovs-bridge" {
            // A switch between the nodes linked to it: a LAN segment of vemu's.
            if kind == "ovs-bridge" {
                warnings.push(format!("node '{n}': an ovs-bridge is a learning switch here (a vemu LAN segment; no OpenFlow)"));
            }
            bridges.push(n.clone());
            continue;
        }
        if kind != "linux" {
            refused.push(format!("node '{n}': {}", refusal(&kind)));
            continue;
        }
        names.push(n.clone());
        write_node(&mut out, &mut warnings, n, &c, binds, file)?;
    }
    if !refused.is_empty() {
        return Err(format!("{file}: {}", refused.join("; ")));
    }
    if names.is_empty() {
        return Err(format!("{file}: no nodes"));
    }
    let links = write_links(&mut out, &mut warnings, get(topo, "links"), &names, &bridges, file)?;
    // Checked as it will be loaded; a tenant's not here: as the owner's, this would read
    // the files its binds name (its own load refuses them, reading nothing).
    let base = match binds {
        Binds::Read(b) => Some(Some(b)),
        Binds::Absent => Some(None),
        Binds::Unread(_) => None,
    };
    if let Some(base) = base {
        crate::load_str_in(&out, &format!("{lab}.yaml"), &lab, None, base)
            .map_err(|e| format!("{file}: the scenario made from it is not valid: {e}"))?;
    }
    Ok(Imported { yaml: out, nodes: names.len(), links, warnings })
}

/// Most files a bound directory may hold (vemu copies each into the node).
const MAX_BOUND_FILES: usize = 1000;

/// The files under `dir` (its subdirectories too), each with its path under `dst`: a
/// bound directory is copied file by file. Symbolic links are followed.
fn dir_files(dir: &Path, dst: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut todo = vec![(dir.to_path_buf(), dst.trim_end_matches('/').to_string())];
    while let Some((d, to)) = todo.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&d)
            .map_err(|e| format!("reading {}: {e}", d.display()))?
            .flatten()
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let (path, name) = (e.path(), e.file_name().to_string_lossy().into_owned());
            if path.is_dir() {
                todo.push((path, format!("{to}/{name}")));
            } else {
                out.push((format!("{to}/{name}"), path.display().to_string()));
            }
            if out.len() + todo.len() > MAX_BOUND_FILES {
                return Err(format!("more than {MAX_BOUND_FILES} files"));
            }
        }
    }
    Ok(out)
}

/// One node's lines.
fn write_node(
    out: &mut String,
    warnings: &mut Vec<String>,
    n: &str,
    c: &ClabNode,
    binds: Binds,
    file: &str,
) -> Result<(), String> {
    let _ = writeln!(out, "  {}:", q(n));
    if let Some(i) = &c.image {
        let _ = writeln!(out, "    image: {}", q(i));
    }
    if !c.mgmt.is_empty() {
        let own: Vec<String> = c.mgmt.iter().map(|(k, v)| format!("{k}: {}", q(v))).collect();
        let _ = writeln!(out, "    mgmt: {{{}}}", own.join(", "));
    }
    if c.startup.is_some() {
        warnings.push(format!("node '{n}': startup-config left out (containerlab gives it to vendors' systems only; bind the file instead)"));
    }
    let mut files = Vec::new();
    for b in &c.binds {
        let parts: Vec<&str> = b.split(':').collect();
        let (src, dst) = match parts.as_slice() {
            [s, d] | [s, d, _] => (*s, *d),
            _ => {
                warnings
                    .push(format!("node '{n}': bind '{b}' left out (not SOURCE:TARGET[:MODE])"));
                continue;
            }
        };
        let (base, read) = match binds {
            Binds::Read(b) => (b, true),
            Binds::Unread(b) => (b, false),
            Binds::Absent => {
                // (A topology sent to the API: its files are on its sender's machine.)
                warnings.push(format!("node '{n}': bind '{b}' left out (its file is not here: import the topology on the machine that has it)"));
                continue;
            }
        };
        let full = base.join(src);
        if crate::parse::file_path(dst).is_err() {
            warnings.push(format!("node '{n}': bind to {dst} left out (vemu writes a node's files in /etc, /var/lib, /var/log and /run)"));
        } else if read && full.is_dir() {
            match dir_files(&full, dst) {
                Ok(inside) => files.extend(inside),
                Err(e) => {
                    warnings.push(format!("node '{n}': bind of directory {src} left out: {e}"))
                }
            }
        } else {
            files.push((dst.to_string(), full.display().to_string()));
        }
    }
    if !files.is_empty() {
        let _ = writeln!(out, "    files:");
        for (dst, src) in files {
            let _ = writeln!(out, "      {}: {{from: {}}}", q(&dst), q(&src));
        }
    }
    let shell_name = |k: &str| {
        k.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    for (k, _) in c.env.iter().filter(|(k, _)| !shell_name(k)) {
        warnings.push(format!("node '{n}': env '{k}' left out (not a variable's name)"));
    }
    let env: String = c
        .env
        .iter()
        .filter(|(k, _)| shell_name(k))
        .map(|(k, v)| format!("export {k}={}; ", shell_quote(v)))
        .collect();
    let mut run: Vec<String> = c.exec.iter().map(|e| format!("{env}{e}")).collect();
    if let Some(cmd) = &c.cmd {
        run.insert(0, format!("{env}{cmd}"));
    }
    if !run.is_empty() {
        let _ = writeln!(out, "    run:");
        for r in run {
            let _ = writeln!(out, "      - {}", q(&r));
        }
    }
    let ignored: Vec<&str> =
        c.ignored.iter().map(String::as_str).filter(|k| *k != "group").collect();
    if !ignored.is_empty() {
        warnings.push(format!("node '{n}': {} left out", ignored.join(", ")));
    }
    let _ = file;
    Ok(())
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The links' lines, and the bridges' segments with the nodes linked to them as members;
/// how many links.
fn write_links(
    out: &mut String,
    warnings: &mut Vec<String>,
    links: Option<&Node>,
    names: &[String],
    bridges: &[String],
    file: &str,
) -> Result<usize, String> {
    let mut members: Vec<Vec<String>> = vec![Vec::new(); bridges.len()];
    let written = write_link_lines(out, warnings, links, names, bridges, &mut members, file)?;
    let segments: Vec<(&String, &Vec<String>)> = bridges.iter().zip(&members).collect();
    // (A bridge's port to the machine itself is containerlab's, not a node's.)
    for (b, m) in segments.iter().filter(|(_, m)| m.len() < 2) {
        let why = format!("{} linked to it (a LAN joins two or more)", m.len());
        warnings.push(format!("bridge '{b}' left out: {why}"));
    }
    if segments.iter().any(|(_, m)| m.len() >= 2) {
        let _ = writeln!(out, "segments:");
        for (b, m) in segments.iter().filter(|(_, m)| m.len() >= 2) {
            let _ = writeln!(
                out,
                "  {}: {{kind: lan, ipv4: none, ipv6: none, members: [{}]}}",
                q(b),
                m.join(", ")
            );
        }
    }
    Ok(written)
}

/// The links' lines (`links:`, and the machine as a node when a link ends there); a
/// link to a bridge makes its other end one of `members` of that bridge. How many links.
fn write_link_lines(
    out: &mut String,
    warnings: &mut Vec<String>,
    links: Option<&Node>,
    names: &[String],
    bridges: &[String],
    members: &mut [Vec<String>],
    file: &str,
) -> Result<usize, String> {
    let Some(links) = links else { return Ok(0) };
    let Value::Seq(items) = &links.value else {
        return Err(format!("{}: links should be a list", at(file, links)));
    };
    let mut host_used = false;
    let mut lines = Vec::new();
    for l in items {
        let m = map(file, l, "a link")?;
        if let Some(t) = get(m, "type") {
            let t = scalar(file, t, "type")?;
            if t != "veth" {
                warnings.push(format!("{}: a link of type '{t}' left out", at(file, l)));
                continue;
            }
        }
        let eps = get(m, "endpoints")
            .ok_or_else(|| format!("{}: a link without endpoints", at(file, l)))?;
        let Value::Seq(eps) = &eps.value else {
            return Err(format!("{}: endpoints should be a list of two", at(file, eps)));
        };
        let mut ends = Vec::new();
        for e in eps {
            let (node, iface) = match &e.value {
                Value::Scalar(s, _) => {
                    s.split_once(':').map(|(a, b)| (a.to_string(), b.to_string())).ok_or_else(
                        || format!("{}: endpoint '{s}' is not NODE:INTERFACE", at(file, e)),
                    )?
                }
                Value::Map(em) => {
                    let node = get(em, "node")
                        .ok_or_else(|| format!("{}: an endpoint without 'node'", at(file, e)))?;
                    let iface = get(em, "interface").ok_or_else(|| {
                        format!("{}: an endpoint without 'interface'", at(file, e))
                    })?;
                    (scalar(file, node, "node")?, scalar(file, iface, "interface")?)
                }
                _ => return Err(format!("{}: an endpoint should be NODE:INTERFACE", at(file, e))),
            };
            ends.push((node, iface, e));
        }
        if ends.len() != 2 {
            return Err(format!("{}: a link has two endpoints, not {}", at(file, l), ends.len()));
        }
        if ends.iter().any(|(n, _, _)| n == "mgmt-net" || n.starts_with("macvlan")) {
            warnings.push(format!(
                "{}: a link to the management network or a macvlan left out",
                at(file, l)
            ));
            continue;
        }
        let bridge = |n: &str| bridges.iter().position(|b| b == n);
        match (bridge(&ends[0].0), bridge(&ends[1].0)) {
            (Some(_), Some(_)) => {
                warnings.push(format!("{}: a link between two bridges left out", at(file, l)));
                continue;
            }
            (Some(b), None) | (None, Some(b)) => {
                let (node, iface, e) = &ends[usize::from(bridge(&ends[0].0).is_some())];
                if !names.contains(node) {
                    return Err(format!("{}: no node '{node}'", at(file, e)));
                }
                members[b].push(format!("{{node: {}, iface: {}}}", q(node), q(iface)));
                continue;
            }
            (None, None) => {}
        }
        let mut written = Vec::new();
        for (node, iface, e) in &ends {
            if node == "host" {
                host_used = true;
            } else if !names.contains(node) {
                return Err(format!("{}: no node '{node}'", at(file, e)));
            }
            written.push(format!("{{node: {}, iface: {}}}", q(node), q(iface)));
        }
        lines.push(format!("  - endpoints: [{}]", written.join(", ")));
    }
    if host_used {
        // The machine, for links to `host:IFACE`.
        let _ = writeln!(out, "  host: {{kind: host}}");
    }
    if !lines.is_empty() {
        let _ = writeln!(out, "links:");
        for l in &lines {
            let _ = writeln!(out, "{l}");
        }
    }
    Ok(lines.len())
}
