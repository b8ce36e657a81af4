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
pub fn context(
    plan: &Plan,
    ni: usize,
    vars: &[(String, String)],
    nodes: &minijinja::Value,
) -> minijinja::Value {
    let n = &plan.nodes[ni];
    let mut ifaces = Vec::new();
    let mut by_name = Map::new();
    for i in &n.ifaces {
        let mut m = Map::new();
        m.insert("name".into(), json!(i.name));
        m.insert(
            "mac".into(),
            json!(i.mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")),
        );
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
    let first_v4 = n
        .loopback
        .iter()
        .chain(n.ifaces.iter().flat_map(|i| i.addrs.iter()))
        .map(|a| a.addr())
        .find(IpAddr::is_ipv4);
    let router_id = first_v4
        .map(|a| a.to_string())
        .unwrap_or_else(|| std::net::Ipv4Addr::from(ni as u32 + 1).to_string());
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

/// Instructions all of a scenario's templates may run together (MiniJinja's fuel: about
/// one per operation; a loop over 1,000 nodes in each of 1,000 nodes' files takes a few
/// million). Beyond it the scenario is refused: a template cannot hold `vemu check`, the
/// API or the operator for long.
pub const MAX_TEMPLATE_FUEL: u64 = 20_000_000;
/// Bytes all of a scenario's templates may write together (each file at most
/// [`crate::MAX_NODE_FILE_BYTES`]).
pub const MAX_TEMPLATE_OUTPUT_BYTES: u64 = 64 << 20;

/// What the templates of one scenario may still spend.
struct Budget {
    fuel: u64,
    output_bytes: u64,
}

/// A writer that takes at most `room` bytes and then fails (and says so).
struct Bounded {
    out: Vec<u8>,
    room: u64,
    full: bool,
}

impl std::io::Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.len() as u64 > self.room - self.out.len() as u64 {
            self.full = true;
            return Err(std::io::Error::other("too much output"));
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Render one template `text` (named `name`) with `ctx`, within what `budget` has left.
fn render_bounded(
    env: &mut Environment,
    budget: &mut Budget,
    name: &str,
    text: &str,
    ctx: &minijinja::Value,
) -> Result<String, String> {
    env.set_fuel(Some(budget.fuel.max(1)));
    let room = budget.output_bytes.min(crate::MAX_NODE_FILE_BYTES);
    let mut w = Bounded { out: Vec::new(), room, full: false };
    let result = env.template_from_named_str(name, text).and_then(|t| {
        t.render_captured_to(ctx, &mut w)
            .map(|c| c.state().fuel_levels().map_or(0, |(used, _)| used))
    });
    match result {
        Ok(used) => {
            budget.fuel = budget.fuel.saturating_sub(used);
            budget.output_bytes -= w.out.len() as u64;
            String::from_utf8(w.out)
                .map_err(|_| "template error: the output is not UTF-8".to_string())
        }
        Err(_) if w.full && room < crate::MAX_NODE_FILE_BYTES => {
            budget.output_bytes = 0;
            Err(format!(
                "template error: the scenario's templates write more than {} MiB in all",
                MAX_TEMPLATE_OUTPUT_BYTES >> 20
            ))
        }
        Err(_) if w.full => Err(format!(
            "template error: the output is larger than {} MiB",
            crate::MAX_NODE_FILE_BYTES >> 20
        )),
        Err(e) if e.kind() == minijinja::ErrorKind::OutOfFuel => {
            budget.fuel = 0;
            Err(format!("template error: the scenario's templates run more than {MAX_TEMPLATE_FUEL} instructions in all (a loop too long?)"))
        }
        Err(e) => {
            let mut msg =
                format!("template error: {}", e.detail().unwrap_or(&e.kind().to_string()));
            if let Some(line) = e.line() {
                msg.push_str(&format!(" (line {line} of the template)"));
            }
            Err(msg)
        }
    }
}

/// Render every node's files and `run` commands; errors name the file's key in the
/// scenario and the line in the template. Together they run at most
/// [`MAX_TEMPLATE_FUEL`] instructions and write at most [`MAX_TEMPLATE_OUTPUT_BYTES`].
pub fn render_node_files(s: &Scenario, plan: &mut Plan, errors: &mut Vec<Error>) {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_keep_trailing_newline(true);
    let mut budget = Budget { fuel: MAX_TEMPLATE_FUEL, output_bytes: MAX_TEMPLATE_OUTPUT_BYTES };
    let nodes =
        minijinja::Value::from(plan.nodes.iter().map(|x| x.name.clone()).collect::<Vec<_>>());
    for (ni, def) in s.nodes.iter().enumerate() {
        // Made only for nodes that have a template.
        let mut ctx = None;
        let mut render = |name: &str, text: &str| -> Result<String, String> {
            if !text.contains("{{") && !text.contains("{%") {
                return Ok(text.to_string());
            }
            if budget.fuel == 0 || budget.output_bytes == 0 {
                return Err("template error: not rendered: the scenario's templates used up what they may run or write (see the first error)".into());
            }
            let ctx = ctx.get_or_insert_with(|| context(plan, ni, &def.vars, &nodes));
            render_bounded(&mut env, &mut budget, name, text, ctx)
        };
        let mut files = Vec::new();
        for f in &def.files {
            let content = if f.verbatim { Ok(f.text.clone()) } else { render(&f.path, &f.text) };
            match content {
                Ok(content) => files.push(FilePlan { path: f.path.clone(), content, mode: f.mode }),
                Err(m) => errors.push(Error {
                    line: f.mark.line,
                    col: f.mark.col,
                    field: f.field.clone(),
                    message: m,
                }),
            }
        }
        let mut run = Vec::new();
        for (i, cmd) in def.run.iter().enumerate() {
            match render("run", cmd) {
                Ok(c) => run.push(c),
                Err(m) => errors.push(Error {
                    line: def.mark.line,
                    col: def.mark.col,
                    field: format!("nodes.{}.run[{i}]", def.name),
                    message: m,
                }),
            }
        }
        plan.nodes[ni].files = files;
        plan.nodes[ni].run = run;
    }
}
