//! A link's endpoints (node, interface, addresses, MAC).

use super::*;

/// One end of a link or a member of a segment: `node`, `node:iface`, or a mapping with
/// `node`, `iface`, `ip`, `mac` and the `extra` keys, whose entries are returned.
pub(crate) fn endpoint<'n>(
    p: &mut P,
    node: &'n Node,
    field: &str,
    names: &HashMap<String, usize>,
    extra: &[&str],
) -> Option<(EndDef, Entries<'n>)> {
    let mut rest = Vec::new();
    let (node_name, iface, ips, mac_addr, unaddressed) = if let Value::Map(_) = node.value {
        let mut n = None;
        let (mut iface, mut ips, mut m) = (None, Vec::new(), None);
        let mut unaddressed = false;
        let mut allowed = vec!["node", "iface", "ip", "mac"];
        allowed.extend_from_slice(extra);
        for (k, kmark, v) in p.map(node, field, &allowed) {
            let f = join(field, k);
            match k {
                "node" => n = p.string(v, &f),
                "iface" => iface = p.scalar(v, &f, |s| valid_iface_name(s).map(|_| s.to_string())),
                "ip" if v.as_str() == Some("none") => unaddressed = true,
                "ip" => ips = ip_list(p, v, &f),
                "mac" => m = p.scalar(v, &f, mac),
                _ => rest.push((k, kmark, v)),
            }
        }
        let Some(n) = n else {
            p.err(node.mark, field, "missing 'node'");
            return None;
        };
        (n, iface, ips, m, unaddressed)
    } else {
        let s = p.string(node, field)?;
        match s.split_once(':') {
            Some((n, i)) => match valid_iface_name(i) {
                Ok(()) => (n.to_string(), Some(i.to_string()), Vec::new(), None, false),
                Err(m) => {
                    p.err(node.mark, field, m);
                    return None;
                }
            },
            None => (s, None, Vec::new(), None, false),
        }
    };
    let Some(&idx) = names.get(&node_name) else {
        let mut known: Vec<&str> = names.keys().map(|s| s.as_str()).collect();
        known.sort();
        p.err(
            node.mark,
            field,
            format!("unknown node '{node_name}' (nodes are: {})", known.join(", ")),
        );
        return None;
    };
    Some((
        EndDef {
            node: idx,
            iface,
            ips,
            unaddressed,
            mac: mac_addr,
            mark: node.mark,
            field: field.to_string(),
        },
        rest,
    ))
}

pub(crate) fn mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split(':').collect();
    let bad = || format!("'{s}' is not a MAC address like 02:00:00:00:00:01");
    if parts.len() != 6 {
        return Err(bad());
    }
    let mut m = [0u8; 6];
    for (i, part) in parts.iter().enumerate() {
        m[i] = u8::from_str_radix(part, 16).map_err(|_| bad())?;
    }
    if m[0] & 1 == 1 {
        return Err(format!("'{s}' is a multicast MAC address"));
    }
    Ok(m)
}

pub(crate) fn ip_list(p: &mut P, node: &Node, field: &str) -> Vec<IpNet> {
    p.strings(node, field)
        .into_iter()
        .filter_map(|s| match s.parse::<IpNet>() {
            Ok(n) => Some(n),
            Err(_) => {
                p.err(
                    node.mark,
                    field,
                    format!("'{s}' is not an address with a prefix length, e.g. 10.0.0.1/30"),
                );
                None
            }
        })
        .collect()
}

/// Link `i` of `links:` (`l`), with `defaults.link` (`default_link`); `names`: the
/// nodes' numbers. `None` when it has no two valid ends.
#[allow(clippy::too_many_arguments)]
pub(crate) fn link_def(
    p: &mut P,
    i: usize,
    l: &Node,
    link_keys: &[&str],
    default_link: &ImpairmentsPatch,
    names: &HashMap<String, usize>,
    nodes: &[NodeDef],
) -> Option<LinkDef> {
    let field = format!("links[{i}]");
    let entries = p.map(l, &field, link_keys);
    let dirs =
        directions(p, &entries, &field, [default_link, default_link], ["forward", "reverse"]);
    let mut ends = Vec::new();
    let mut saw_endpoints = false;
    let mut name = None;
    let mut weight = 1;
    for (k, _, v) in &entries {
        let f = join(&field, k);
        match *k {
            "endpoints" => {
                saw_endpoints = true;
                let items = p.seq(v, &f);
                if items.len() != 2 {
                    p.err(
                        v.mark,
                        &f,
                        format!("a link has exactly 2 endpoints, found {}", items.len()),
                    );
                }
                for (j, e) in items.iter().enumerate().take(2) {
                    if let Some((e, _)) = endpoint(p, e, &format!("{f}[{j}]"), names, &[]) {
                        ends.push(e);
                    }
                }
            }
            "name" => {
                name = p.scalar(v, &f, |s| valid_medium_name("link", s).map(|()| s.to_string()))
            }
            "weight" => weight = p.scalar(v, &f, positive).unwrap_or(1),
            _ => {}
        }
    }
    if !saw_endpoints {
        p.err(l.mark, &field, "a link needs 'endpoints: [node, node]'");
    }
    let fwd = finish_impairments(p, &dirs[0], l.mark, &format!("{field} (forward)"));
    let rev = finish_impairments(p, &dirs[1], l.mark, &format!("{field} (reverse)"));
    if let [a, b] = ends.as_slice() {
        if a.node == b.node {
            p.err(
                a.mark,
                &join(&field, "endpoints"),
                format!("a link cannot join node '{}' to itself", nodes[a.node].name),
            );
            return None;
        }
        return Some(LinkDef {
            name,
            mark: l.mark,
            field,
            ends: [a.clone(), b.clone()],
            forward: p.share(fwd),
            reverse: p.share(rev),
            weight,
        });
    }
    None
}

/// Every link name once.
pub(crate) fn unique_link_names(p: &mut P, links: &[LinkDef]) {
    let mut link_names: HashMap<&str, Mark> = HashMap::new();
    for l in links {
        if let Some(n) = &l.name {
            if let Some(first) = link_names.insert(n, l.mark) {
                p.errors.push(Error {
                    line: l.mark.line,
                    col: l.mark.col,
                    field: format!("{}.name", l.field),
                    message: format!(
                        "link name '{n}' is used twice (first on line {})",
                        first.line
                    ),
                });
            }
        }
    }
}
