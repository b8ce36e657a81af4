//! One entry of `expect:` — a check the lab judges (`crate::expect`):
//!
//! ```yaml
//! expect:
//!   - {name: h1 reaches h9, reach: {from: h1, to: h9}, within: 5s}
//!   - {after: cut-r1-r2, reach: {from: h1, to: h9, port: 80}, within: 2s}
//!   - {at: 10s, route: {node: r1, prefix: 10.9.0.0/24, via: r2}, within: 30s}
//!   - {run: {node: h1, cmd: 'curl -s http://h9/', exit: 0, output: hello}, within: 10s}
//!   - {fidelity: ok, within: 60s}
//!   - {drops: {link: r1:r2, at_most: 10}, within: 30s}
//!   - {after: cut, flow: {from: h1, to: h9, rate: 100, size: 1200, duration: 10s, delivery: 99%, delay_p95: 30ms}}
//!   - {valley_free: {node: as64512, relationships: as50.txt, routes: 49}, within: 60s}
//! ```

use super::*;
use crate::expect::{CheckDef, ExpectDef, MAX_WITHIN_NS};

/// The kinds of check, one per entry.
const CHECKS: &[&str] = &["reach", "route", "run", "fidelity", "drops", "flow", "valley_free"];

pub(crate) fn expectation(p: &mut P, node: &Node, field: &str) -> Option<ExpectDef> {
    let entries = p.map(
        node,
        field,
        &[
            "name",
            "at",
            "after",
            "within",
            "reach",
            "route",
            "run",
            "fidelity",
            "drops",
            "flow",
            "valley_free",
        ],
    );
    let (mut name, mut at_ns, mut after, mut within_ns) = (None, None, None, None);
    let mut checks: Vec<(&str, Option<CheckDef>)> = Vec::new();
    for (k, _, v) in &entries {
        let f = join(field, k);
        match *k {
            "name" => name = p.string(v, &f),
            "at" => at_ns = p.scalar(v, &f, units::duration_ns),
            "after" => after = p.string(v, &f).map(|s| (s, v.mark)),
            "within" => {
                within_ns = p.scalar(v, &f, |s| match units::duration_ns(s) {
                    Ok(0) => Err(format!("'within' must be more than 0, got '{s}'")),
                    Ok(n) if n > MAX_WITHIN_NS => {
                        Err(format!("'within' is at most a day (86400s), got '{s}'"))
                    }
                    r => r,
                })
            }
            "reach" => checks.push(("reach", reach(p, v, &f))),
            "route" => checks.push(("route", route(p, v, &f))),
            "run" => checks.push(("run", run(p, v, &f))),
            "drops" => checks.push(("drops", drops(p, v, &f))),
            "flow" => checks.push(("flow", flow(p, v, &f))),
            "valley_free" => checks.push(("valley_free", valley_free(p, v, &f))),
            _ => checks.push(("fidelity", fidelity(p, v, &f))),
        }
    }
    if at_ns.is_some() && after.is_some() {
        p.err(node.mark, field, "a check starts 'at' a time or 'after' an event, not both");
    }
    let flow_lasts = match checks.as_slice() {
        [(_, Some(CheckDef::Flow(f)))] => Some(f.duration_ns),
        _ => None,
    };
    // A flow is judged once it has run (and what it sent has arrived).
    let within_ns = match (within_ns, flow_lasts) {
        (Some(w), Some(d)) if w < d => {
            p.err(node.mark, field, "'within' leaves the flow no time to run (it is judged once its duration has passed)");
            return None;
        }
        (Some(w), _) => w,
        (None, Some(d)) => d.saturating_add(crate::expect::FLOW_SETTLE_NS),
        (None, None) => {
            p.err(
                node.mark,
                field,
                "a check needs 'within' (how long it may take to hold, e.g. 5s)",
            );
            return None;
        }
    };
    let check = match checks.len() {
        1 => checks.pop()?.1?,
        0 => {
            p.err(node.mark, field, format!("a check needs one of {}", CHECKS.join(", ")));
            return None;
        }
        _ => {
            let names: Vec<&str> = checks.iter().map(|c| c.0).collect();
            p.err(node.mark, field, format!("a check has one kind, found {}", names.join(", ")));
            return None;
        }
    };
    Some(ExpectDef {
        mark: node.mark,
        field: field.to_string(),
        name,
        at_ns,
        after,
        within_ns,
        check,
    })
}

/// `valley_free: {node, relationships: FILE, asn, routes}`: the AS-relationship file
/// (relative to the scenario) is read and checked here.
fn valley_free(p: &mut P, v: &Node, f: &str) -> Option<CheckDef> {
    let (mut node, mut asn, mut graph, mut routes, mut named) = (None, None, None, 1, false);
    for (k, _, x) in p.map(v, f, &["node", "asn", "relationships", "routes"]) {
        let kf = join(f, k);
        match k {
            "node" => node = p.string(x, &kf),
            "asn" => asn = p.scalar(x, &kf, integer::<u32>("an AS number")),
            "routes" => {
                routes = p.scalar(x, &kf, integer::<usize>("a number of routes")).unwrap_or(1)
            }
            _ => {
                named = true;
                let (bytes, path) = super::delay::read_file(p, x, &kf, "AS-relationship")?;
                let text = String::from_utf8_lossy(&bytes);
                match crate::asgraph::parse_as_rel(&text, &path.display().to_string()) {
                    Ok(g) => graph = Some(g),
                    Err(e) => p.err(x.mark, &kf, e),
                }
            }
        }
    }
    match (node, graph) {
        (Some(node), Some(graph)) => Some(CheckDef::ValleyFree { node, asn, graph, routes }),
        (Some(_), None) if named => None,
        _ => {
            p.err(v.mark, f, "valley_free needs 'node' (a BGP router) and 'relationships' (an AS-relationship file)");
            None
        }
    }
}

fn reach(p: &mut P, v: &Node, f: &str) -> Option<CheckDef> {
    let (mut from, mut to, mut port) = (None, None, None);
    for (k, _, x) in p.map(v, f, &["from", "to", "port"]) {
        let kf = join(f, k);
        match k {
            "from" => from = p.string(x, &kf),
            "to" => to = p.string(x, &kf),
            _ => port = p.scalar(x, &kf, integer::<u16>("a TCP port (1-65535)")),
        }
    }
    if port == Some(0) {
        p.err(v.mark, f, "port 0 cannot be connected to");
    }
    match (from, to) {
        (Some(from), Some(to)) => Some(CheckDef::Reach { from, to, port }),
        _ => {
            p.err(v.mark, f, "reach needs 'from' (a node) and 'to' (a node or an address)");
            None
        }
    }
}

fn route(p: &mut P, v: &Node, f: &str) -> Option<CheckDef> {
    let (mut node, mut prefix, mut via) = (None, None, None);
    for (k, _, x) in p.map(v, f, &["node", "prefix", "via"]) {
        let kf = join(f, k);
        match k {
            "node" => node = p.string(x, &kf),
            "prefix" => {
                prefix = p.scalar(x, &kf, |s| {
                    s.parse::<IpNet>().map(|n| n.trunc()).map_err(|_| {
                        format!("'{s}' is not a prefix like 10.9.0.0/24 or fd00:9::/64")
                    })
                })
            }
            _ => via = p.string(x, &kf),
        }
    }
    match (node, prefix) {
        (Some(node), Some(prefix)) => Some(CheckDef::Route { node, prefix, via }),
        _ => {
            p.err(v.mark, f, "route needs 'node' and 'prefix'");
            None
        }
    }
}

fn run(p: &mut P, v: &Node, f: &str) -> Option<CheckDef> {
    let (mut node, mut cmd, mut exit, mut output) = (None, None, 0, None);
    for (k, _, x) in p.map(v, f, &["node", "cmd", "exit", "output"]) {
        let kf = join(f, k);
        match k {
            "node" => node = p.string(x, &kf),
            "cmd" => cmd = p.string(x, &kf),
            "exit" => exit = p.scalar(x, &kf, integer::<i32>("an exit status")).unwrap_or(0),
            _ => output = p.string(x, &kf),
        }
    }
    match (node, cmd) {
        (Some(node), Some(cmd)) if !cmd.trim().is_empty() => {
            Some(CheckDef::Run { node, cmd, exit, output })
        }
        _ => {
            p.err(v.mark, f, "run needs 'node' and 'cmd' (a command line)");
            None
        }
    }
}

fn drops(p: &mut P, v: &Node, f: &str) -> Option<CheckDef> {
    let (mut link, mut at_most) = (None, None);
    for (k, _, x) in p.map(v, f, &["link", "at_most"]) {
        let kf = join(f, k);
        match k {
            "link" => link = p.string(x, &kf),
            _ => at_most = p.scalar(x, &kf, integer::<u64>("a number of frames")),
        }
    }
    match (link, at_most) {
        (Some(link), Some(at_most)) => Some(CheckDef::Drops { link, at_most }),
        _ => {
            p.err(v.mark, f, "drops needs 'link' (NODE:NODE or its name) and 'at_most' (frames)");
            None
        }
    }
}

/// Most packets a flow check may send (its rate × duration).
const MAX_FLOW_PACKETS: f64 = 1_000_000.0;

fn flow(p: &mut P, v: &Node, f: &str) -> Option<CheckDef> {
    let keys = [
        "from",
        "to",
        "size",
        "rate",
        "duration",
        "delivery",
        "delay_p50",
        "delay_p95",
        "delay_p99",
        "delay_max",
        "goodput",
    ];
    let (mut from, mut to, mut duration_ns) = (None, None, None);
    let (mut size_bytes, mut rate_pps) = (1000usize, None);
    let mut bounds = crate::expect::FlowBounds::default();
    for (k, _, x) in p.map(v, f, &keys) {
        let kf = join(f, k);
        match k {
            "from" => from = p.string(x, &kf),
            "to" => to = p.string(x, &kf),
            "size" => {
                size_bytes = p
                    .scalar(x, &kf, |s| match s.trim_end_matches('B').trim().parse::<usize>() {
                        Ok(n @ 24..=65000) => Ok(n),
                        _ => Err(format!("expected a UDP payload of 24 to 65000 bytes, got '{s}'")),
                    })
                    .unwrap_or(size_bytes)
            }
            "rate" => {
                rate_pps =
                    p.scalar(x, &kf, |s| match s.trim_end_matches("pps").trim().parse::<f64>() {
                        Ok(r) if r > 0.0 && r <= 1e6 => Ok(r),
                        _ => Err(format!(
                        "expected packets per second, more than 0 and at most 1000000, got '{s}'"
                    )),
                    })
            }
            "duration" => {
                duration_ns = p.scalar(x, &kf, |s| match units::duration_ns(s) {
                    Ok(0) => Err(format!("a flow runs for more than 0 s, got '{s}'")),
                    Ok(n) if n > MAX_WITHIN_NS => {
                        Err(format!("a flow runs at most a day, got '{s}'"))
                    }
                    r => r,
                })
            }
            "delivery" => bounds.delivery = p.scalar(x, &kf, units::percent),
            "goodput" => bounds.goodput_bps = p.scalar(x, &kf, units::rate_bps),
            _ => {
                let pct = match k {
                    "delay_p50" => 50,
                    "delay_p95" => 95,
                    "delay_p99" => 99,
                    _ => 100,
                };
                if let Some(ns) = p.scalar(x, &kf, units::duration_ns) {
                    bounds.delay_ns.push((pct, ns));
                }
            }
        }
    }
    bounds.delay_ns.sort_unstable();
    if bounds.delivery.is_none() && bounds.delay_ns.is_empty() && bounds.goodput_bps.is_none() {
        p.err(v.mark, f, "a flow check needs a bound: delivery (e.g. 99%), delay_p50/p95/p99/max (e.g. 30ms) or goodput (e.g. 1Mbit)");
        return None;
    }
    match (from, to, rate_pps, duration_ns) {
        (Some(from), Some(to), Some(rate_pps), Some(duration_ns)) => {
            if rate_pps * duration_ns as f64 / 1e9 > MAX_FLOW_PACKETS {
                p.err(
                    v.mark,
                    f,
                    format!(
                        "a flow check sends at most {MAX_FLOW_PACKETS} packets (rate × duration)"
                    ),
                );
                return None;
            }
            Some(CheckDef::Flow(crate::expect::FlowCheck {
                from,
                to,
                size_bytes,
                rate_pps,
                duration_ns,
                bounds,
            }))
        }
        _ => {
            p.err(
                v.mark,
                f,
                "flow needs 'from' and 'to' (nodes), 'rate' (packets/s) and 'duration'",
            );
            None
        }
    }
}

fn fidelity(p: &mut P, v: &Node, f: &str) -> Option<CheckDef> {
    p.scalar(v, f, |s| match s {
        "ok" | "degraded" => Ok(CheckDef::Fidelity { worst: s.to_string() }),
        _ => Err(format!("expected ok or degraded (the worst verdict that passes), got '{s}'")),
    })
}
