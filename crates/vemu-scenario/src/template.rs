//! Per-node files and `run` commands are Jinja templates (MiniJinja), rendered with the
//! node's facts: its name, interfaces, addresses and loopbacks.

use std::net::IpAddr;

use minijinja::{Environment, UndefinedBehavior};
use serde_json::{json, Map, Value};

use crate::parse::Scenario;
use crate::{Attach, Error, FilePlan, Plan};

fn family(addrs: &[ipnet::IpNet], v6: bool, out: &mut Map<String, Value>) {
    let key = if v6 { "ipv6" } else { "ipv4" };
    if let Some(a) = addrs.iter().find(|a| a.addr().is_ipv6() == v6) {
        out.insert(key.into(), json!(a.addr().to_string()));
        out.insert(format!("{key}_prefix"), json!(a.to_string()));
        out.insert(format!("{key}_net"), json!(a.trunc().to_string()));
        out.insert(format!("{key}_len"), json!(a.prefix_len()));
    }
}

/// What a template of node `ni` can use; `nodes` is the list of every node's name,
/// made once for all nodes (a copy per node would cost the square of the nodes).
pub fn context(plan: &Plan, ni: usize, vars: &[(String, String)], nodes: &minijinja::Value) -> minijinja::Value {
    let n = &plan.nodes[ni];
    let mut ifaces = Vec::new();
    let mut by_name = Map::new();
    for i in &n.ifaces {
        let mut m = Map::new();
        m.insert("name".into(), json!(i.name));
        m.insert("mac".into(), json!(i.mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")));
        m.insert("mtu".into(), json!(i.mtu));
        family(&i.addrs, false, &mut m);
        family(&i.addrs, true, &mut m);
        match i.attach {
            Attach::Link(l) => {
                let l = &plan.links[l];
                let peer = if l.a.node == ni { l.b } else { l.a };
                m.insert("kind".into(), json!("link"));
                m.insert("link".into(), json!(l.name));
                m.insert("peer".into(), json!(plan.nodes[peer.node].name));
            }
            Attach::Segment(g, _) => {
                m.insert("kind".into(), json!("lan"));
                m.insert("segment".into(), json!(plan.segments[g].name));
            }
        }
        by_name.insert(i.name.clone(), Value::Object(m.clone()));
        ifaces.push(Value::Object(m));
    }
    let mut lo = Map::new();
    family(&n.loopback, false, &mut lo);
    family(&n.loopback, true, &mut lo);
    let first_v4 = n.loopback.iter().chain(n.ifaces.iter().flat_map(|i| i.addrs.iter())).map(|a| a.addr()).find(IpAddr::is_ipv4);
    let router_id = first_v4.map(|a| a.to_string()).unwrap_or_else(|| std::net::Ipv4Addr::from(ni as u32 + 1).to_string());
    let facts = json!({
        "lab": plan.name,
        "name": n.name,
        "index": ni + 1,
        "router_id": router_id,
        "loopback": lo,
        "ifaces": ifaces,
        "iface": by_name,
        "vars": vars.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect::<Map<String, Value>>(),
    });
    minijinja::context! { nodes => nodes.clone(), ..minijinja::Value::from_serialize(&facts) }
}

/// Render every node's files and `run` commands; errors name the file's key in the
/// scenario and the line in the template.
pub fn render_node_files(s: &Scenario, plan: &mut Plan, errors: &mut Vec<Error>) {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_keep_trailing_newline(true);
    let nodes = minijinja::Value::from(plan.nodes.iter().map(|x| x.name.clone()).collect::<Vec<_>>());
    for (ni, def) in s.nodes.iter().enumerate() {
        // Made only for nodes that have a template.
        let ctx = std::cell::OnceCell::new();
        let render = |name: &str, text: &str| -> Result<String, String> {
            if !text.contains("{{") && !text.contains("{%") {
                return Ok(text.to_string());
            }
            let ctx = ctx.get_or_init(|| context(plan, ni, &def.vars, &nodes));
            env.render_named_str(name, text, ctx).map_err(|e| {
                let mut msg = format!("template error: {}", e.detail().unwrap_or(&e.kind().to_string()));
                if let Some(line) = e.line() {
                    msg.push_str(&format!(" (line {line} of the template)"));
                }
                msg
            })
        };
        let mut files = Vec::new();
        for f in &def.files {
            let content = if f.verbatim { Ok(f.text.clone()) } else { render(&f.path, &f.text) };
            match content {
                Ok(content) => files.push(FilePlan { path: f.path.clone(), content, mode: f.mode }),
                Err(m) => errors.push(Error { line: f.mark.line, col: f.mark.col, field: f.field.clone(), message: m }),
            }
        }
        let mut run = Vec::new();
        for (i, cmd) in def.run.iter().enumerate() {
            match render("run", cmd) {
                Ok(c) => run.push(c),
                Err(m) => errors.push(Error { line: def.mark.line, col: def.mark.col, field: format!("nodes.{}.run[{i}]", def.name), message: m }),
            }
        }
        plan.nodes[ni].files = files;
        plan.nodes[ni].run = run;
    }
}
