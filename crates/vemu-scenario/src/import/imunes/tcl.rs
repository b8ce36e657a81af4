//! IMUNES' older Tcl-like form (`node n0 { type router … network-config { … } }`),
//! read into the JSON form (`super::imunes` reads that): each node's type, its
//! network-config (a router's becomes its FRR startup configuration; addresses and
//! `ip route` lines are taken from it), its interfaces' peers, its canvas position;
//! each link's ends, bandwidth (bit/s), delay (µs) and duplicates (%).

use serde_json::{json, Map, Value};

/// The Tcl form's commands: each a list of words, a braced word's text kept as written
/// (without its braces). `Err` names the line of a brace never closed.
pub(super) fn commands(text: &str) -> Result<Vec<Vec<String>>, String> {
    let mut out = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut chars = text.char_indices().peekable();
    let mut line = 1;
    while let Some((i, c)) = chars.next() {
        match c {
            '\n' | ';' => {
                line += usize::from(c == '\n');
                if !words.is_empty() {
                    out.push(std::mem::take(&mut words));
                }
            }
            c if c.is_whitespace() => {}
            '#' if words.is_empty() => {
                for (_, c) in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            '{' => {
                let (start, opened) = (i + 1, line);
                let mut depth = 1;
                let mut end = None;
                for (j, c) in chars.by_ref() {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        '\n' => line += 1,
                        _ => {}
                    }
                    if depth == 0 {
                        end = Some(j);
                        break;
                    }
                }
                let end =
                    end.ok_or_else(|| format!("line {opened}: a brace that is never closed"))?;
                words.push(text[start..end].to_string());
            }
            _ => {
                let mut end = text.len();
                while let Some(&(j, c)) = chars.peek() {
                    if c.is_whitespace() || c == ';' || c == '{' {
                        end = j;
                        break;
                    }
                    chars.next();
                }
                words.push(text[i..end].to_string());
            }
        }
    }
    if !words.is_empty() {
        out.push(words);
    }
    Ok(out)
}

/// What a network-config says.
#[derive(Default)]
struct Config {
    /// (interface, its addresses) in order.
    ifaces: Vec<(String, Vec<String>)>,
    /// `ip route` and `ipv6 route` lines as "DST VIA".
    routes4: Vec<String>,
    routes6: Vec<String>,
    hostname: Option<String>,
}

fn network_config(text: &str) -> Config {
    let mut c = Config::default();
    let mut current: Option<usize> = None;
    for l in text.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        match w.as_slice() {
            ["hostname", h] => c.hostname = Some(h.to_string()),
            ["interface", name] => {
                c.ifaces.push((name.to_string(), Vec::new()));
                current = Some(c.ifaces.len() - 1);
            }
            ["ip" | "ipv6", "address", a] => {
                if let Some(k) = current {
                    c.ifaces[k].1.push(a.to_string());
                }
            }
            ["ip", "route", dst, via] => c.routes4.push(format!("{dst} {via}")),
            ["ipv6", "route", dst, via] => c.routes6.push(format!("{dst} {via}")),
            ["!"] => current = None,
            _ => {}
        }
    }
    c
}

/// The value of the first `key VALUE` command of a body.
fn value(body: &[Vec<String>], key: &str) -> Option<String> {
    body.iter().find(|w| w.first().map(String::as_str) == Some(key)).and_then(|w| w.get(1)).cloned()
}

/// The topology in IMUNES' JSON form.
pub(super) fn to_json(text: &str, file: &str) -> Result<Value, String> {
    let cmds = commands(text).map_err(|e| format!("{file}: {e}"))?;
    let (mut nodes, mut gui, mut links) = (Map::new(), Map::new(), Map::new());
    // (node, peer) → the node's interface key towards it: a link's interfaces (the
    // first one named, as IMUNES reads them).
    let mut towards: std::collections::HashMap<(String, String), String> =
        std::collections::HashMap::new();
    for c in cmds.iter().filter(|c| c.len() == 3 && c[0] == "node") {
        let (id, body) =
            (&c[1], commands(&c[2]).map_err(|e| format!("{file}: node {}: {e}", c[1]))?);
        let kind = value(&body, "type").unwrap_or_default();
        let conf_text = value(&body, "network-config").unwrap_or_default();
        let conf = network_config(&conf_text);
        let mut ifaces = Map::new();
        for w in body.iter().filter(|w| w.first().map(String::as_str) == Some("interface-peer")) {
            let pair: Vec<&str> =
                w.get(1).map(|s| s.split_whitespace().collect()).unwrap_or_default();
            let [ifname, peer] = pair.as_slice() else { continue };
            let addrs = conf.ifaces.iter().find(|(n, _)| n == ifname).map(|(_, a)| a.clone());
            let (v6, v4): (Vec<String>, Vec<String>) =
                addrs.unwrap_or_default().into_iter().partition(|a| a.contains(':'));
            let key = format!("ifc{}", ifaces.len());
            ifaces.insert(
                key.clone(),
                json!({"name": ifname, "type": "phys", "ipv4_addrs": v4, "ipv6_addrs": v6}),
            );
            towards.entry((id.clone(), peer.to_string())).or_insert(key);
        }
        let name = conf.hostname.clone().unwrap_or_else(|| id.clone());
        let mut n = json!({"type": kind, "name": name, "ifaces": ifaces, "croutes4": conf.routes4, "croutes6": conf.routes6});
        if kind == "router" {
            n["network_config"] = Value::String(conf_text.replace('\t', ""));
            n["model"] = json!(value(&body, "model").unwrap_or_else(|| "frr".into()));
        }
        nodes.insert(id.clone(), n);
        if let Some(pos) = value(&body, "iconcoords") {
            gui.insert(id.clone(), json!({"iconcoords": pos}));
        }
    }
    for c in cmds.iter().filter(|c| c.len() == 3 && c[0] == "link") {
        let (id, body) =
            (&c[1], commands(&c[2]).map_err(|e| format!("{file}: link {}: {e}", c[1]))?);
        let ends = value(&body, "nodes").unwrap_or_default();
        let ends: Vec<&str> = ends.split_whitespace().collect();
        let [a, b] = ends.as_slice() else {
            return Err(format!("{file}: link {id}: needs two nodes"));
        };
        let ifc = |x: &str, y: &str| towards.get(&(x.to_string(), y.to_string())).cloned();
        let (Some(ia), Some(ib)) = (ifc(a, b), ifc(b, a)) else {
            return Err(format!(
                "{file}: link {id}: its nodes name no interface towards each other"
            ));
        };
        let mut l = json!({"peers": format!("{a} {b}"), "peers_ifaces": format!("{ia} {ib}")});
        for (k, v) in
            [("bandwidth", "bandwidth"), ("delay", "delay"), ("duplicate", "dup"), ("ber", "ber")]
        {
            if let Some(x) = value(&body, v) {
                l[k] = Value::String(x);
            }
        }
        links.insert(id.clone(), l);
    }
    Ok(json!({"nodes": nodes, "links": links, "gui": {"nodes": gui}}))
}
