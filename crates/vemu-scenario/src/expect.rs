//! Checks a lab judges while it runs (`expect:`; issue 43): each with a name, a start
//! (when the lab is up, a time on the lab clock, or a named event of the timeline), a
//! deadline, and what must hold by then — a node reaching another, a route, a command's
//! result, the fidelity verdict. The scenario parser reads them ([`ExpectDef`]); the plan
//! resolves their names to nodes and addresses ([`Expectation`]) so that whoever judges
//! them needs nothing but the plan.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::yaml::Mark;

/// A check of the plan: names resolved, start on the lab clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expectation {
    pub name: String,
    /// When its clock starts, lab-clock ns: `at:` (0: when the lab is up), or the time
    /// of the event `after:` names (its first firing).
    pub start_ns: u64,
    /// That event's name, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// How long after its start it may take to hold (`within:`), ns.
    pub within_ns: u64,
    pub check: Check,
}

/// What must hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    /// `from` reaches `to` (`to_name` as written: a node, whose first address it is, or
    /// an address): an ICMP echo answered, or a TCP connection to `port` accepted.
    Reach { from: String, to: IpAddr, to_name: String, port: Option<u16> },
    /// `node` has a route to `prefix`, through one of `via`'s addresses when given.
    Route { node: String, prefix: IpNet, via: Option<String>, via_addrs: Vec<IpAddr> },
    /// `cmd` run in `node` (`sh -c`) exits with `exit`, its output containing `output`
    /// when given.
    Run { node: String, cmd: String, exit: i32, output: Option<String> },
    /// The lab's fidelity verdict over the run is at most `worst` (`ok` or `degraded`)
    /// at the deadline.
    Fidelity { worst: String },
}

impl Check {
    /// How it reads in a result line: `reach h1 → h9`, `route r1 10.9.0.0/24 via r2`.
    pub fn describe(&self) -> String {
        match self {
            Check::Reach { from, to_name, port: None, .. } => format!("reach {from} → {to_name}"),
            Check::Reach { from, to_name, port: Some(p), .. } => {
                format!("reach {from} → {to_name}:{p} (TCP)")
            }
            Check::Route { node, prefix, via: None, .. } => format!("route {node} {prefix}"),
            Check::Route { node, prefix, via: Some(v), .. } => {
                format!("route {node} {prefix} via {v}")
            }
            Check::Run { node, cmd, .. } => format!("run {node}: {cmd}"),
            Check::Fidelity { worst } => format!("fidelity at most {worst}"),
        }
    }
}

/// An `expect:` entry as written, names not yet resolved.
#[derive(Debug, Clone)]
pub struct ExpectDef {
    pub mark: Mark,
    pub field: String,
    pub name: Option<String>,
    pub at_ns: Option<u64>,
    pub after: Option<(String, Mark)>,
    pub within_ns: u64,
    pub check: CheckDef,
}

/// A check as written: nodes by name, `to` a node or an address.
#[derive(Debug, Clone)]
pub enum CheckDef {
    Reach { from: String, to: String, port: Option<u16> },
    Route { node: String, prefix: IpNet, via: Option<String> },
    Run { node: String, cmd: String, exit: i32, output: Option<String> },
    Fidelity { worst: String },
}

/// Longest deadline of a check (a day: longer is a mistake, not a test).
pub const MAX_WITHIN_NS: u64 = 86_400 * 1_000_000_000;

/// The plan's checks from the scenario's: names resolved to nodes (ones vemu makes) and
/// addresses, starts to the lab clock; what cannot be is an error at its entry.
pub(crate) fn resolve(
    s: &crate::parse::Scenario,
    plan: &mut crate::Plan,
    errors: &mut Vec<crate::Error>,
) {
    let mut err = |mark: Mark, field: &str, message: String| {
        errors.push(crate::Error { line: mark.line, col: mark.col, field: field.into(), message })
    };
    // The timeline's names.
    let mut events: std::collections::HashMap<&str, u64> = Default::default();
    for e in &s.events {
        let Some(name) = &e.name else { continue };
        if events.insert(name, e.event.at_ns).is_some() {
            err(e.mark, &format!("{}.name", e.field), format!("two events are named '{name}'"));
        }
    }
    let made = |name: &str| -> Result<usize, String> {
        match plan.node_index(name) {
            None => Err(format!("unknown node '{name}'")),
            Some(i) if !plan.nodes[i].kind.is_made() => Err(format!(
                "node '{name}' is of kind '{}': vemu runs nothing there",
                plan.nodes[i].kind.name()
            )),
            Some(i) => Ok(i),
        }
    };
    let addrs = |i: usize| -> Vec<IpAddr> {
        let n = &plan.nodes[i];
        n.loopback.iter().chain(n.ifaces.iter().flat_map(|f| &f.addrs)).map(|a| a.addr()).collect()
    };
    let mut out = Vec::new();
    let mut names = std::collections::HashSet::new();
    for d in &s.expects {
        let check = match &d.check {
            CheckDef::Reach { from, to, port } => made(from).and_then(|_| {
                let to_addr = match to.parse::<IpAddr>() {
                    Ok(a) => a,
                    Err(_) => {
                        let i = plan.node_index(to).ok_or_else(|| {
                            format!("'{to}' is neither a node of the lab nor an address")
                        })?;
                        // Its first IPv4 address (a loopback's first), else its first.
                        let all = addrs(i);
                        *all.iter()
                            .find(|a| a.is_ipv4())
                            .or(all.first())
                            .ok_or_else(|| format!("node '{to}' has no address to reach"))?
                    }
                };
                Ok(Check::Reach {
                    from: from.clone(),
                    to: to_addr,
                    to_name: to.clone(),
                    port: *port,
                })
            }),
            CheckDef::Route { node, prefix, via } => made(node).and_then(|_| {
                let via_addrs = match via {
                    None => Vec::new(),
                    Some(v) => addrs(plan.node_index(v).ok_or(format!("unknown node '{v}'"))?),
                };
                Ok(Check::Route {
                    node: node.clone(),
                    prefix: *prefix,
                    via: via.clone(),
                    via_addrs,
                })
            }),
            CheckDef::Run { node, cmd, exit, output } => made(node).map(|_| Check::Run {
                node: node.clone(),
                cmd: cmd.clone(),
                exit: *exit,
                output: output.clone(),
            }),
            CheckDef::Fidelity { worst } => Ok(Check::Fidelity { worst: worst.clone() }),
        };
        let check = match check {
            Ok(c) => c,
            Err(m) => {
                err(d.mark, &d.field, m);
                continue;
            }
        };
        let start_ns = match &d.after {
            None => d.at_ns.unwrap_or(0),
            Some((name, mark)) => match events.get(name.as_str()) {
                Some(&at) => at,
                None => {
                    let mut known: Vec<&str> = events.keys().copied().collect();
                    known.sort_unstable();
                    let said = if known.is_empty() {
                        "the timeline names none (give an event a 'name')".to_string()
                    } else {
                        format!("named events: {}", known.join(", "))
                    };
                    err(
                        *mark,
                        &format!("{}.after", d.field),
                        format!("no event is named '{name}' ({said})"),
                    );
                    continue;
                }
            },
        };
        let name = d.name.clone().unwrap_or_else(|| check.describe());
        if !names.insert(name.clone()) {
            err(d.mark, &d.field, format!("two checks are named '{name}' (give one a 'name')"));
            continue;
        }
        out.push(Expectation {
            name,
            start_ns,
            after: d.after.as_ref().map(|(n, _)| n.clone()),
            within_ns: d.within_ns,
            check,
        });
    }
    plan.expect = out;
}
