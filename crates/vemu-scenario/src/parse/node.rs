//! A node (or `defaults.node`): kind, interfaces, commands, files, routes, sysctls,
//! isolation and limits.

use super::*;

pub(crate) fn valid_iface_name(name: &str) -> Result<(), String> {
    // The kernel refuses these as device names ('all' and 'default' are the names of
    // its per-namespace settings directories).
    let reserved = ["lo", ".", "..", "all", "default"];
    let ok = !name.is_empty()
        && name.len() <= 15
        && !reserved.contains(&name)
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
    if ok {
        Ok(())
    } else {
        Err(format!("interface name '{name}' must be 1-15 letters, digits, '-', '_' or '.' (and not lo, ., .., all or default)"))
    }
}

/// `0640`-style permission bits.
pub(crate) fn file_mode(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s.trim_start_matches("0o"), 8)
        .ok()
        .filter(|m| *m <= 0o7777)
        .ok_or_else(|| format!("'{s}' is not a file mode like 0644"))
}

/// Directories of a node that are private to it (and writable), where `files:` may go.
pub const PRIVATE_DIRS: &[&str] = &["/etc", "/var/lib", "/var/log", "/run"];

pub(crate) fn file_path(s: &str) -> Result<String, String> {
    let s =
        s.strip_prefix("/var/run/").map(|r| format!("/run/{r}")).unwrap_or_else(|| s.to_string());
    if !s.starts_with('/')
        || s.ends_with('/')
        || s.split('/').any(|c| c == ".." || c == ".")
        || s.contains("//")
    {
        return Err(format!("'{s}' is not an absolute path to a file"));
    }
    if s == "/etc/hosts" {
        return Err("/etc/hosts is written by vemu (every node's name and addresses)".into());
    }
    if !PRIVATE_DIRS.iter().any(|d| s.starts_with(&format!("{d}/"))) {
        return Err(format!(
            "'{s}' is not in a node's private directories ({})",
            PRIVATE_DIRS.join(", ")
        ));
    }
    Ok(s)
}

pub(crate) fn files(p: &mut P, node: &Node, field: &str, base: Option<&Path>) -> Vec<FileDef> {
    let mut out = Vec::new();
    for (path, kmark, v) in p.map(node, field, &[]) {
        let f = format!("{field}.{path}");
        let Some(path) = p.scalar(
            &Node { value: Value::Scalar(path.to_string(), false), mark: kmark },
            &f,
            file_path,
        ) else {
            continue;
        };
        let mut def = FileDef {
            path,
            text: String::new(),
            verbatim: false,
            mode: 0o644,
            mark: kmark,
            field: f.clone(),
        };
        if let Value::Map(_) = v.value {
            let mut have = false;
            for (k, _, x) in p.map(v, &f, &["content", "from", "template", "mode"]) {
                let kf = join(&f, k);
                match k {
                    "mode" => def.mode = p.scalar(x, &kf, file_mode).unwrap_or(0o644),
                    "content" => {
                        have = true;
                        def.text = p.string(x, &kf).unwrap_or_default();
                    }
                    _ => {
                        have = true;
                        def.verbatim = k == "from";
                        let Some(src) = p.string(x, &kf) else { continue };
                        if !p.reach(crate::Reach::From, x.mark, &kf) {
                            continue;
                        }
                        let full = base.map(|b| b.join(&src)).unwrap_or_else(|| src.clone().into());
                        match crate::read_limited(&full, crate::MAX_NODE_FILE_BYTES) {
                            Ok(t) => def.text = t,
                            Err(e) => {
                                p.err(x.mark, &kf, format!("cannot read {}: {e}", full.display()))
                            }
                        }
                    }
                }
            }
            if !have {
                p.err(v.mark, &f, "a file needs 'content', 'from' (copied as is) or 'template'");
            }
        } else {
            def.text = p.string(v, &f).unwrap_or_default();
        }
        out.push(def);
    }
    out
}

pub(crate) fn route(p: &mut P, node: &Node, field: &str) -> Option<RouteDef> {
    let mut dst = None;
    let (mut via, mut dev) = (None, None);
    let mut table = crate::policy::MAIN_TABLE;
    for (k, _, v) in p.map(node, field, &["dst", "via", "dev", "table"]) {
        let f = join(field, k);
        match k {
            "table" => table = p.scalar(v, &f, super::rule::table)?,
            "dst" => {
                dst = p.scalar(v, &f, |s| match s {
                    "default" => Ok("0.0.0.0/0".parse().unwrap()),
                    "default6" => Ok("::/0".parse().unwrap()),
                    _ => s.parse::<IpNet>().map(|n| n.trunc()).map_err(|_| {
                        format!("'{s}' is not a prefix like 10.1.0.0/16 or 'default'")
                    }),
                })
            }
            "via" => {
                via = p.scalar(v, &f, |s| {
                    s.parse::<IpAddr>().map_err(|_| format!("'{s}' is not an IP address"))
                })
            }
            "dev" => dev = p.scalar(v, &f, |s| valid_iface_name(s).map(|_| s.to_string())),
            _ => unreachable!(),
        }
    }
    let Some(dst) = dst else {
        p.err(node.mark, field, "a route needs 'dst'");
        return None;
    };
    if via.is_none() && dev.is_none() {
        p.err(node.mark, field, "a route needs 'via' or 'dev'");
        return None;
    }
    if let Some(v) = via {
        if v.is_ipv4() != dst.addr().is_ipv4() {
            p.err(
                node.mark,
                field,
                format!("'via {v}' is not of the same IP family as 'dst {dst}'"),
            );
            return None;
        }
    }
    Some(RouteDef { dst, via, dev, table, mark: node.mark, field: field.to_string() })
}

pub(crate) const NODE_KEYS: &[&str] = &[
    "kind",
    "startup-config",
    "image",
    "iface",
    "run",
    "routes",
    "rules",
    "files",
    "loopback",
    "vars",
    "sysctl",
    "isolation",
    "cpu",
    "memory",
    "pids",
    "machine",
    "nat",
    "mgmt",
    "canvas",
    "routing",
];

/// What `defaults.node` may not give: what names one node's own place in the lab.
pub(crate) const NOT_IN_DEFAULTS: &[&str] = &[
    "kind", "iface", "routes", "rules", "loopback", "machine", "nat", "mgmt", "canvas", "routing",
];

/// What a node definition (or `defaults.node`) gives.
#[derive(Default)]
pub(crate) struct NodeParts {
    pub(crate) run: Vec<String>,
    pub(crate) routes: Vec<RouteDef>,
    pub(crate) rules: Vec<super::rule::RuleDef>,
    pub(crate) files: Vec<FileDef>,
    pub(crate) loopback: Vec<IpNet>,
    pub(crate) vars: Vec<(String, String)>,
    pub(crate) sysctls: Vec<(String, String)>,
    /// `isolation`, when given: whether the node's processes have PIDs of their own.
    pub(crate) own_pids: Option<bool>,
    /// `cpu`, `memory`, `pids`, when given.
    pub(crate) limits: crate::Limits,
    /// `machine`, when given: its name and where.
    pub(crate) machine: Option<(String, Mark)>,
    /// `kind`, when given, and where.
    pub(crate) kind: Option<(crate::NodeKind, Mark)>,
    /// `iface` (the NIC of a node of kind `external`), and where.
    pub(crate) iface: Option<(String, Mark)>,
    /// `image`, when given: where the node's root filesystem comes from
    /// ([`image_reference`]).
    pub(crate) image: Option<String>,
    /// The router software `kind` names (`frr`, `bird`: [`crate::kinds`]), when it names
    /// one.
    pub(crate) router: Option<&'static dyn crate::kinds::Kind>,
    /// `startup-config`, when given: its text, and where.
    pub(crate) startup: Option<(String, Mark)>,
    /// `nat` (a host node: the lab's nodes reach beyond the machine through it).
    pub(crate) nat: bool,
    /// `mgmt: {ipv4: ADDRESS, ipv6: ADDRESS}`: the node's own addresses on the
    /// management network (containerlab's `mgmt-ipv4`), and where.
    pub(crate) mgmt: Vec<(IpAddr, Mark)>,
    /// `canvas: [x, y]`: where the node is drawn.
    pub(crate) canvas: Option<[f64; 2]>,
    pub(crate) routing: Option<bool>,
    /// The keys given, and where (to refuse those a node vemu does not make cannot have).
    pub(crate) given: Vec<(String, Mark)>,
}

pub(crate) fn node_parts(
    p: &mut P,
    def: &Node,
    field: &str,
    base: Option<&Path>,
    allowed: &[&str],
) -> NodeParts {
    let mut d = NodeParts::default();
    for (k, kmark, v) in p.map(def, field, allowed) {
        let f = join(field, k);
        d.given.push((k.to_string(), kmark));
        match k {
            "kind" => {
                d.kind = p.scalar(v, &f, crate::NodeKind::parse).map(|k| (k, v.mark));
                d.router = p.scalar(v, &f, |s| Ok::<_, String>(crate::kinds::kind(s))).flatten();
                // Refused to a tenant, it is kept for the checks that follow (one error).
                if let Some(reach) = d.kind.and_then(|(k, _)| k.reach()) {
                    p.reach(reach, v.mark, &f);
                }
            }
            "iface" => d.iface = p.scalar(v, &f, |s| valid_iface_name(s).map(|()| s.to_string())).map(|n| (n, v.mark)),
            "startup-config" => d.startup = startup_config(p, v, &f, base).map(|t| (t, v.mark)),
            "image" => {
                d.image = p.scalar(v, &f, |s| image_reference(s, base));
                // A file or directory of the controller's machine: refused to a tenant;
                // a registry's: from the registries its administrator lists only.
                match d.image.as_deref() {
                    Some(r) if !r.starts_with("docker://") => {
                        p.reach(crate::Reach::From, v.mark, &f);
                    }
                    Some(r) => {
                        if let Some(why) = p.trust.image_policy().refusal(r) {
                            p.err(v.mark, &f, why);
                        }
                    }
                    None => {}
                }
            }
            "run" => d.run = p.strings(v, &f),
            "nat" => d.nat = p.boolean(v, &f).unwrap_or(false),
            "mgmt" => d.mgmt = mgmt_addresses(p, v, &f),
            "canvas" => d.canvas = canvas(p, v, &f),
            "routing" => {
                d.routing = p.scalar(v, &f, |s| match s {
                    "static" => Ok(true),
                    "none" => Ok(false),
                    _ => Err(format!("expected 'static' (shortest-path routes from vemu) or 'none' (the node's own: a routing daemon's, its 'routes'), got '{s}'")),
                })
            }
            "isolation" => {
                d.own_pids = p.scalar(v, &f, |s| match s {
                    "pid" => Ok(true),
                    "none" => Ok(false),
                    _ => Err(format!("expected 'pid' (a PID namespace and /proc of the node's own) or 'none' (the machine's PIDs), got '{s}'")),
                })
                .inspect(|own| _ = *own || p.reach(crate::Reach::SharedPids, v.mark, &f))
            }
            "cpu" => {
                d.limits.cpu_cores = p.scalar(v, &f, |s| match s.parse::<f64>() {
                    Ok(c) if crate::Limits { cpu_cores: Some(c), ..Default::default() }.check().is_ok() => Ok(c),
                    _ => Err(format!("expected the cores the node may use, {} to {} (e.g. 0.5), got '{s}'", crate::MIN_CPU_CORES, crate::MAX_CPU_CORES)),
                })
            }
            "memory" => {
                d.limits.memory_bytes = p.scalar(v, &f, |s| match units::size_bytes(s) {
                    Ok(b) if crate::Limits { memory_bytes: Some(b), ..Default::default() }.check().is_ok() => Ok(b),
                    Ok(_) => Err(format!("memory must be at least 4MiB, got '{s}'")),
                    Err(e) => Err(e),
                })
            }
            "pids" => {
                d.limits.pids = p.scalar(v, &f, |s| match s.parse::<u64>() {
                    Ok(n) if crate::Limits { pids: Some(n), ..Default::default() }.check().is_ok() => Ok(n),
                    _ => Err(format!("expected the most processes the node may have, 1 to {}, got '{s}'", crate::MAX_PIDS)),
                })
            }
            "files" => d.files = files(p, v, &f, base),
            "machine" => d.machine = p.string(v, &f).map(|m| (m, v.mark)),
            "vars" => {
                for (name, _, x) in p.map(v, &f, &[]) {
                    if let Some(val) = p.string(x, &join(&f, name)) {
                        d.vars.push((name.to_string(), val));
                    }
                }
            }
            "sysctl" => {
                for (name, kmark, x) in p.map(v, &f, &[]) {
                    let kf = join(&f, name);
                    // Only the network sysctls are the node's own (per network namespace).
                    let ok = name.starts_with("net.") && name.split('.').all(|w| !w.is_empty() && w != ".." && !w.contains('/'));
                    if !ok {
                        p.err(kmark, &kf, format!("'{name}' is not a network sysctl of the node (write net.…, e.g. net.ipv4.conf.all.rp_filter)"));
                        continue;
                    }
                    if let Some(val) = p.string(x, &kf) {
                        d.sysctls.push((name.to_string(), val));
                    }
                }
            }
            "loopback" => {
                d.loopback = ip_list(p, v, &f)
                    .into_iter()
                    .map(|a| match a {
                        IpNet::V4(n) => IpNet::V4(Ipv4Net::new(n.addr(), 32).unwrap()),
                        IpNet::V6(n) => IpNet::V6(Ipv6Net::new(n.addr(), 128).unwrap()),
                    })
                    .collect()
            }
            "rules" => d.rules = super::rule::rules(p, v, &f),
            "routes" => {
                for (i, r) in p.seq(v, &f).iter().enumerate() {
                    if let Some(r) = route(p, r, &format!("{f}[{i}]")) {
                        d.routes.push(r);
                    }
                }
            }
            _ => unreachable!(),
        }
    }
    d
}

/// Node `nname` of `nodes:` (`def`), with `defaults.node` (`default_node`) applied to a
/// node vemu makes; `before`: the nodes defined above it. `None` when its name is not
/// one (the errors say what else is wrong).
#[allow(clippy::too_many_arguments)]
pub(crate) fn node_def(
    p: &mut P,
    nname: &str,
    nmark: Mark,
    def: &Node,
    base: Option<&Path>,
    default_node: &NodeParts,
    machines: &[crate::Machine],
    before: &[NodeDef],
) -> Option<NodeDef> {
    let field = format!("nodes.{nname}");
    if let Err(msg) = valid_node_name(nname) {
        p.err(nmark, &field, msg);
        return None;
    }
    let mut d = node_parts(p, def, &field, base, NODE_KEYS);
    let kind = kind_checks(p, &mut d, &field, machines, before);
    let nic = d.iface.take().filter(|_| kind == crate::NodeKind::External).map(|(n, _)| n);
    let no_defaults = NodeParts::default();
    let default_node = match kind.is_made() {
        false => &no_defaults,
        true => default_node,
    };
    // Defaults first: the node's own files replace default files at the same path.
    let mut files = default_node.files.clone();
    files.retain(|f| !d.files.iter().any(|g| g.path == f.path));
    files.append(&mut d.files);
    // A file cannot also be a directory of another one.
    for f in &files {
        if let Some(g) =
            files.iter().find(|g| g.path.starts_with(&format!("{}/", f.path.trim_end_matches('/'))))
        {
            p.err(
                g.mark,
                &format!("{field}.files.{}", g.path),
                format!("'{}' is also a file of this node, so it cannot be a directory", f.path),
            );
        }
    }
    let mut run = default_node.run.clone();
    run.append(&mut d.run);
    let mut vars = default_node.vars.clone();
    vars.extend(d.vars);
    let mut sysctls = default_node.sysctls.clone();
    sysctls.retain(|(k, _)| !d.sysctls.iter().any(|(k2, _)| k2 == k));
    sysctls.extend(d.sysctls);
    let (routes, rules, loopback) = (d.routes, d.rules, d.loopback);
    let own_pids = d.own_pids.or(default_node.own_pids).unwrap_or(true);
    let image = d.image.or_else(|| default_node.image.clone());
    // A router kind: its files (the startup configuration in them) unless the node
    // gives the same paths itself, and its start command first.
    let startup = d.startup.or_else(|| default_node.startup.clone());
    router_kind(p, d.router, startup.as_ref(), &field, nmark, &mut files, &mut run);
    let router = d.router.map(|k| k.name().to_string());
    let limits = d.limits.or(default_node.limits);
    let machine = d.machine.and_then(|(m, mark)| match machines.iter().position(|x| x.name == m) {
        Some(i) => Some(i),
        None => {
            let known: Vec<&str> = machines.iter().map(|x| x.name.as_str()).collect();
            let why = match known.is_empty() {
                true => "the scenario names no 'machines'".to_string(),
                false => format!("the machines are {}", known.join(", ")),
            };
            p.err(mark, &join(&field, "machine"), format!("unknown machine '{m}' ({why})"));
            None
        }
    });
    Some(NodeDef {
        name: nname.to_string(),
        mark: nmark,
        run,
        routes,
        rules,
        files,
        loopback,
        vars,
        sysctls,
        own_pids,
        limits,
        machine,
        kind,
        nic,
        image,
        router,
        nat: d.nat && kind == crate::NodeKind::Host,
        mgmt: d.mgmt,
        canvas: d.canvas,
        static_routing: d.routing,
    })
}

/// Largest canvas coordinate, either way.
const MAX_CANVAS: f64 = 1e6;

/// `canvas: [x, y]`: where a node or segment is drawn (the web page's pixels, y down;
/// nothing of the emulation), as a topology drawn elsewhere (IMUNES) placed it.
pub(crate) fn canvas(p: &mut P, v: &Node, field: &str) -> Option<[f64; 2]> {
    let xy: Vec<f64> = match &v.value {
        Value::Seq(items) => items
            .iter()
            .filter_map(|n| n.as_str()?.trim().parse::<f64>().ok())
            .filter(|x| x.is_finite() && x.abs() <= MAX_CANVAS)
            .collect(),
        _ => Vec::new(),
    };
    match xy[..] {
        [x, y] if matches!(&v.value, Value::Seq(items) if items.len() == 2) => Some([x, y]),
        _ => {
            p.err(
                v.mark,
                field,
                format!("expected where it is drawn, [x, y] (pixels, each within ±{MAX_CANVAS})"),
            );
            None
        }
    }
}

/// A node's `mgmt: {ipv4: ADDRESS, ipv6: ADDRESS}`: its addresses on the management
/// network, each of its family (the prefix length is the network's).
fn mgmt_addresses(p: &mut P, v: &Node, field: &str) -> Vec<(IpAddr, Mark)> {
    let mut out = Vec::new();
    for (k, _, x) in p.map(v, field, &["ipv4", "ipv6"]) {
        let f = join(field, k);
        let v4 = k == "ipv4";
        let a = p.scalar(x, &f, |s| match s.parse::<IpAddr>() {
            Ok(a) if a.is_ipv4() == v4 => Ok(a),
            _ => Err(format!(
                "'{s}' is not an {} address like {} (the prefix length is the management network's)",
                if v4 { "IPv4" } else { "IPv6" },
                if v4 { "172.20.20.11" } else { "fd00:20::11" }
            )),
        });
        out.extend(a.map(|a| (a, x.mark)));
    }
    out
}

/// `startup-config`: inline text (a value of several lines), or a file of the
/// controller's machine (relative to the scenario), read now.
fn startup_config(p: &mut P, v: &Node, field: &str, base: Option<&Path>) -> Option<String> {
    let s = p.string(v, field)?;
    if s.contains('\n') {
        return Some(s);
    }
    if !p.reach(crate::Reach::From, v.mark, field) {
        return None;
    }
    let full = base.map(|b| b.join(&s)).unwrap_or_else(|| s.clone().into());
    match crate::read_limited(&full, crate::MAX_NODE_FILE_BYTES) {
        Ok(t) => Some(t),
        Err(e) => {
            p.err(v.mark, field, format!("cannot read {}: {e}", full.display()));
            None
        }
    }
}

/// Where an image comes from, as skopeo names it (`transport:where`): `oci:DIR[:TAG]`,
/// `oci-archive:FILE`, `docker-archive:FILE` and `docker://REF` as written, their paths
/// made absolute against `base` (the scenario's directory); a path (`/…`, `./…`,
/// `../…`) is an OCI layout directory or an archive, told apart when it is read; any
/// other text is a registry reference (`registry.example/frr:9.1`, `debian:12`).
pub fn image_reference(s: &str, base: Option<&Path>) -> Result<String, String> {
    let s = s.trim();
    let absolute = |p: &str| -> String {
        match (Path::new(p).is_absolute(), base) {
            (false, Some(b)) => b.join(p).display().to_string(),
            _ => p.to_string(),
        }
    };
    if s.is_empty() || s.chars().any(|c| c.is_control() || c == ' ') {
        return Err(format!("expected an image: a registry reference (e.g. debian:12), a path to an OCI layout or archive, or TRANSPORT:WHERE; got '{s}'"));
    }
    for t in ["oci:", "oci-archive:", "docker-archive:"] {
        if let Some(rest) = s.strip_prefix(t) {
            if rest.is_empty() {
                return Err(format!("'{s}' names no file or directory after '{t}'"));
            }
            return Ok(format!("{t}{}", absolute(rest)));
        }
    }
    if s.starts_with('/') || s.starts_with("./") || s.starts_with("../") {
        return Ok(format!("path:{}", absolute(s)));
    }
    let other = "images come from a registry (docker://…), an OCI layout (oci:…) or an archive (oci-archive:…, docker-archive:…)";
    // skopeo's other transports (the machine's container storage, its Docker daemon,
    // a directory, …) are not image sources of vemu's.
    let transports =
        ["containers-storage:", "docker-daemon:", "dir:", "ostree:", "sif:", "tarball:"];
    if let Some(t) = transports.iter().find(|t| s.starts_with(**t)) {
        return Err(format!("'{s}': the transport '{t}' is not supported: {other}"));
    }
    if s.contains("://") && !s.starts_with("docker://") {
        return Err(format!("'{s}': {other}"));
    }
    let bare = s.strip_prefix("docker://").unwrap_or(s);
    crate::images::check_registry_reference(bare)?;
    Ok(format!("docker://{bare}"))
}

/// The checks of node `d`'s kind (the keys it refuses, one host, one node per NIC, no
/// node vemu does not make in a lab across machines); its kind.
fn kind_checks(
    p: &mut P,
    d: &mut NodeParts,
    field: &str,
    machines: &[crate::Machine],
    before: &[NodeDef],
) -> crate::NodeKind {
    let kind = d.kind.map_or(crate::NodeKind::Namespace, |(k, _)| k);
    for (k, kmark) in &d.given {
        if let Some(why) = kind.refuses_key(k) {
            p.err(*kmark, &join(field, k), why);
        }
    }
    match d.kind {
        Some((crate::NodeKind::Host, mark)) => {
            if let Some(other) = before.iter().find(|n: &&NodeDef| n.kind == crate::NodeKind::Host)
            {
                p.err(
                    mark,
                    &join(field, "kind"),
                    format!("only one node can be the host, and '{}' is", other.name),
                );
            }
        }
        Some((crate::NodeKind::External, mark)) => match &d.iface {
            None => p.err(mark, &join(field, "kind"), "a node of kind 'external' needs 'iface': the machine's interface (NIC) whose wire it stands for"),
            Some((nic, imark)) => {
                if let Some(other) = before.iter().find(|n: &&NodeDef| n.nic.as_ref() == Some(nic)) {
                    p.err(*imark, &join(field, "iface"), format!("interface '{nic}' is node '{}' already", other.name));
                }
            }
        },
        _ => {}
    }
    if let Some((k, mark)) = d.kind.filter(|(k, _)| !k.is_made()) {
        if !machines.is_empty() {
            p.err(
                mark,
                &join(field, "kind"),
                format!(
                    "a node of kind '{}' in a lab across machines is not supported yet",
                    k.name()
                ),
            );
        }
        // Nothing of defaults.node applies to what vemu does not make.
        d.own_pids = Some(false);
    }
    kind
}

/// A router kind's files (the startup configuration in them) unless the node gives the
/// same paths itself, and its start command first; a startup configuration without a
/// router kind is an error.
fn router_kind(
    p: &mut P,
    router: Option<&'static dyn crate::kinds::Kind>,
    startup: Option<&(String, Mark)>,
    field: &str,
    nmark: Mark,
    files: &mut Vec<FileDef>,
    run: &mut Vec<String>,
) {
    match router {
        Some(k) => {
            for (path, text, mode) in k.files(startup.map(|(t, _)| t.as_str())) {
                if !files.iter().any(|f| f.path == path) {
                    let mark = startup.map_or(nmark, |(_, m)| *m);
                    let field = join(field, "startup-config");
                    // (A template, as `files: {template:}`: a configuration without
                    // `{{`/`{%` is written as it is.)
                    let (path, verbatim) = (path.to_string(), false);
                    files.push(FileDef { path, text, verbatim, mode, mark, field });
                }
            }
            run.insert(0, k.start().to_string());
        }
        None => {
            if let Some((_, mark)) = startup {
                p.err(
                    *mark,
                    &join(field, "startup-config"),
                    format!(
                        "a startup configuration needs a kind whose software reads it: {}",
                        crate::kinds::KINDS.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
                    ),
                );
            }
        }
    }
}
