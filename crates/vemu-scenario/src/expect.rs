//! Checks a lab judges while it runs (`expect:`; issue 43): each with a name, a start
//! (when the lab is up, a time on the lab clock, or a named event of the timeline), a
//! deadline, and what must hold by then — a node reaching another, a route, a command's
//! result, the fidelity verdict, a link's drops, a traffic flow's delivery, delay and
//! goodput, a BGP router's routes valley-free. The scenario parser reads them ([`ExpectDef`]); the plan
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Link `link` (index in the plan; `link_name` as written) drops at most `at_most`
    /// frames (both directions, every reason) from the check's start to its deadline.
    Drops { link: usize, link_name: String, at_most: u64 },
    /// A UDP flow the check sends, judged by what it delivered ([`FlowCheck`]).
    Flow(FlowCheck),
    /// Every BGP route `node` (AS `asn`, its router `software`: `bird` or `frr`) holds,
    /// best or not, is valley-free in `graph` (`relationships:` as read by the parser),
    /// and it holds at least `routes` of them.
    ValleyFree {
        node: String,
        asn: u32,
        software: crate::asgraph::BgpSoftware,
        graph: crate::asgraph::AsGraph,
        routes: usize,
    },
}

/// A UDP flow of `rate_pps` packets of `size_bytes` from `from` to `to` (its first
/// address) sent for `duration_ns` from the check's start, judged once it has ended
/// (and [`FLOW_SETTLE_NS`] more for what is still on its way) by `bounds`. As written
/// and as resolved alike (the plan checks its nodes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowCheck {
    pub from: String,
    pub to: String,
    pub size_bytes: usize,
    pub rate_pps: f64,
    pub duration_ns: u64,
    pub bounds: FlowBounds,
}

/// What a flow must show to pass: each bound given.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowBounds {
    /// The fraction of its packets delivered, at least (`delivery: 99%`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<f64>,
    /// Percentiles of the one-way delay of the delivered packets, at most: (percent,
    /// ns) — `delay_p50`, `delay_p95`, `delay_p99`, `delay_max` (100).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delay_ns: Vec<(u8, u64)>,
    /// What it delivered, payload bits over its duration, at least (`goodput: 900kbit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_bps: Option<u64>,
}

/// How long after a flow's last packet its check waits for what is still on its way.
pub const FLOW_SETTLE_NS: u64 = 2_000_000_000;

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
            Check::Drops { link_name, at_most, .. } => {
                format!("drops on {link_name} at most {at_most}")
            }
            Check::ValleyFree { node, asn, .. } => {
                format!("valley-free routes at {node} (AS {asn})")
            }
            Check::Flow(f) => format!(
                "flow {} → {} ({} packets/s of {} B for {} s)",
                f.from,
                f.to,
                f.rate_pps,
                f.size_bytes,
                f.duration_ns as f64 / 1e9
            ),
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
    Drops { link: String, at_most: u64 },
    Flow(FlowCheck),
    ValleyFree { node: String, asn: Option<u32>, graph: crate::asgraph::AsGraph, routes: usize },
}

/// Longest deadline of a check (a day: longer is a mistake, not a test).
pub const MAX_WITHIN_NS: u64 = 86_400 * 1_000_000_000;
