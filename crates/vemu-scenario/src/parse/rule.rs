//! A node's policy routing rules (`rules:`) and a route's `table:` ([`crate::policy`]).

use crate::policy::{RuleAction, RulePlan, FIRST_RULE_PRIORITY, MAIN_TABLE};

use super::qos::{dscp, port_range, protocol};
use super::*;

/// The keys of a rule.
const RULE_KEYS: &[&str] =
    &["from", "to", "iif", "oif", "proto", "sport", "dport", "dscp", "table", "action", "priority"];

/// A routing table: a number (1-4294967295, but not the kernel's local 255 nor the
/// unspecified 0) or `main`.
pub(crate) fn table(s: &str) -> Result<u32, String> {
    match s {
        "main" => Ok(MAIN_TABLE),
        _ => match s.parse::<u32>() {
            Ok(0 | 255) => Err(format!(
                "table {s} is the kernel's own (0: unspecified, 255: local): give another number"
            )),
            Ok(t) => Ok(t),
            Err(_) => Err(format!(
                "'{s}' is not a routing table: a number (1-4294967295, e.g. 100) or main"
            )),
        },
    }
}

/// An interface of the node, or its loopback (`iif: lo`: the node's own packets).
fn iface(s: &str) -> Result<String, String> {
    if s == "lo" {
        return Ok(s.to_string());
    }
    valid_iface_name(s).map(|_| s.to_string())
}

fn prefix(s: &str) -> Result<IpNet, String> {
    s.parse::<IpNet>()
        .map(|n| n.trunc())
        .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("'{s}' is not an address or prefix like 10.1.0.0/16"))
}

/// A rule as the scenario gives it, and where.
#[derive(Debug, Clone)]
pub struct RuleDef {
    pub rule: RulePlan,
    pub mark: Mark,
    pub field: String,
}

/// `rules: [...]`, numbered from [`FIRST_RULE_PRIORITY`] 10 apart unless given.
pub(crate) fn rules(p: &mut P, node: &Node, field: &str) -> Vec<RuleDef> {
    let mut out = Vec::new();
    for (i, r) in p.seq(node, field).iter().enumerate() {
        let f = format!("{field}[{i}]");
        if let Some(mut rule) = rule(p, r, &f) {
            if rule.priority == 0 {
                rule.priority = FIRST_RULE_PRIORITY + 10 * i as u32;
            }
            out.push(RuleDef { rule, mark: r.mark, field: f });
        }
    }
    out
}

fn rule(p: &mut P, node: &Node, field: &str) -> Option<RulePlan> {
    let entries = p.map(node, field, RULE_KEYS);
    let mut r = RulePlan {
        priority: 0,
        v6: None,
        from: None,
        to: None,
        iif: None,
        oif: None,
        proto: None,
        sport: None,
        dport: None,
        dscp: None,
        action: RuleAction::Table(MAIN_TABLE),
    };
    let mut has_action = false;
    let mut ok = true;
    for (k, kmark, v) in &entries {
        let f = join(field, k);
        let done = match *k {
            "from" => p.scalar(v, &f, prefix).map(|n| r.from = Some(n)),
            "to" => p.scalar(v, &f, prefix).map(|n| r.to = Some(n)),
            "iif" => p.scalar(v, &f, iface).map(|s| r.iif = Some(s)),
            "oif" => p.scalar(v, &f, iface).map(|s| r.oif = Some(s)),
            "proto" => p.scalar(v, &f, protocol).map(|n| r.proto = Some(n)),
            "sport" => p.scalar(v, &f, port_range).map(|n| r.sport = Some(n)),
            "dport" => p.scalar(v, &f, port_range).map(|n| r.dport = Some(n)),
            "dscp" => p.scalar(v, &f, dscp).map(|n| r.dscp = Some(n)),
            "priority" => p
                .scalar(v, &f, |s| match s.parse::<u32>() {
                    Ok(n @ 1..=32765) => Ok(n),
                    _ => Err(format!("'{s}' is not a rule priority: 1-32765 (0 is the local table's rule, 32766 and 32767 main's and default's)")),
                })
                .map(|n| r.priority = n),
            "table" | "action" if has_action => {
                p.err(*kmark, &f, "give 'table' or 'action', not both");
                None
            }
            "table" => {
                has_action = true;
                p.scalar(v, &f, table).map(|t| r.action = RuleAction::Table(t))
            }
            "action" => {
                has_action = true;
                p.scalar(v, &f, |s| match s {
                    "blackhole" => Ok(RuleAction::Blackhole),
                    "unreachable" => Ok(RuleAction::Unreachable),
                    "prohibit" => Ok(RuleAction::Prohibit),
                    _ => Err(format!("unknown action '{s}', expected blackhole, unreachable or prohibit (or give 'table')")),
                })
                .map(|a| r.action = a)
            }
            _ => unreachable!(),
        };
        ok &= done.is_some();
    }
    if !ok {
        return None;
    }
    if !has_action {
        p.err(node.mark, field, "a rule needs 'table' (where to look the route up) or 'action' (blackhole, unreachable, prohibit)");
        return None;
    }
    if entries.iter().all(|(k, _, _)| matches!(*k, "table" | "action" | "priority")) {
        p.err(node.mark, field, "a rule needs at least one of from, to, iif, oif, proto, sport, dport, dscp: it would take every packet");
        return None;
    }
    if (r.sport.is_some() || r.dport.is_some()) && !matches!(r.proto, Some(6 | 17 | 132)) {
        p.err(node.mark, field, "ports need 'proto: tcp', 'udp' or 'sctp'");
        return None;
    }
    // The family: the prefixes' (the same for both), or an ICMP's.
    let fams: Vec<bool> =
        [r.from, r.to].iter().flatten().map(|n| matches!(n, IpNet::V6(_))).collect();
    if fams.windows(2).any(|w| w[0] != w[1]) {
        p.err(node.mark, field, "'from' and 'to' are of different IP families");
        return None;
    }
    let by_proto = match r.proto {
        Some(1) => Some(false),
        Some(58) => Some(true),
        _ => None,
    };
    r.v6 = fams.first().copied().or(by_proto);
    if let (Some(a), Some(b)) = (fams.first(), by_proto) {
        if *a != b {
            p.err(node.mark, field, "the protocol is of the other IP family than 'from'/'to' (icmp: IPv4, icmpv6: IPv6)");
            return None;
        }
    }
    Some(r)
}
