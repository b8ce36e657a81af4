//! `divert:` — traffic of the machine itself sent through an emulated path (GINE's
//! diversion): connections whose first outgoing packet matches an nftables expression
//! cross the path's forward impairments on the way out and its reverse ones on the way
//! back.

use vemu_link::ImpairmentsPatch;

use super::{directions, finish_impairments, join, valid_medium_name, Node, IMPAIRMENT_KEYS, P};
use crate::Divert;

/// Most diverted paths a lab may have (each takes two netfilter queues).
pub const MAX_DIVERTS: usize = 16;

/// nftables statements: a match may not act, only select.
const STATEMENTS: &[&str] = &[
    "accept",
    "drop",
    "reject",
    "queue",
    "jump",
    "goto",
    "return",
    "continue",
    "set",
    "log",
    "counter",
    "notrack",
    "dup",
    "fwd",
    "masquerade",
    "snat",
    "dnat",
    "redirect",
    "tproxy",
    "synproxy",
    "flow",
    "meter",
    "quota",
    "limit",
    "add",
    "update",
    "delete",
];

/// A match as nftables reads it, restricted to what selects packets: no statement, no
/// way to end the rule or start another.
pub fn valid_match(s: &str) -> Result<(), String> {
    let t = s.trim();
    if t.is_empty() || t.len() > 200 {
        return Err("a match is 1-200 characters of nftables expression, e.g. 'tcp dport 443' or 'ip daddr 192.0.2.0/24'".into());
    }
    if let Some(c) =
        t.chars().find(|c| !(c.is_ascii_alphanumeric() || " ._:/,{}<>=!-*".contains(*c)))
    {
        return Err(format!("'{c}' may not appear in a match (it selects packets with nftables expressions such as 'tcp dport {{80, 443}}')"));
    }
    if let Some(w) =
        t.split(|c: char| !c.is_ascii_alphanumeric() && c != '_').find(|w| STATEMENTS.contains(w))
    {
        return Err(format!("'{w}' is an nftables statement; a match only selects packets (vemu adds what diverts them)"));
    }
    Ok(())
}

pub(super) fn diverts(p: &mut P, node: &Node) -> Vec<Divert> {
    let items = p.seq(node, "divert");
    if items.len() > MAX_DIVERTS {
        p.err(
            node.mark,
            "divert",
            format!("at most {MAX_DIVERTS} diverted paths, got {}", items.len()),
        );
        return Vec::new();
    }
    let mut keys = vec!["name", "match", "forward", "reverse"];
    keys.extend_from_slice(IMPAIRMENT_KEYS);
    let mut out: Vec<Divert> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let field = format!("divert[{i}]");
        let entries = p.map(item, &field, &keys);
        let mut name = format!("divert{i}");
        let mut matches = None;
        for (k, _, v) in &entries {
            let f = join(&field, k);
            match *k {
                "name" => {
                    if let Some(n) =
                        p.scalar(v, &f, |s| valid_medium_name("divert", s).map(|_| s.to_string()))
                    {
                        name = n;
                    }
                }
                "match" => {
                    matches = p.scalar(v, &f, |s| valid_match(s).map(|_| s.trim().to_string()))
                }
                _ => {}
            }
        }
        let none = ImpairmentsPatch::default();
        let [fwd, rev] = directions(p, &entries, &field, [&none, &none], ["forward", "reverse"]);
        let [forward, reverse] = [(fwd, "forward"), (rev, "reverse")].map(|(patch, dir)| {
            let imp = finish_impairments(p, &patch, item.mark, &field);
            for (set, what) in [(imp.duplicate.probability > 0.0, "duplicate"), (imp.corrupt.probability > 0.0, "corrupt"), (imp.qos.is_some(), "qos"), (imp.mtu.is_some(), "mtu")] {
                if set {
                    p.err(item.mark, &format!("{field}.{dir}"), format!("a diverted path cannot {what} (the machine's packets are held, passed or dropped)"));
                }
            }
            imp
        });
        let Some(matches) = matches else {
            p.err(item.mark, &field, "missing 'match' (an nftables expression for the machine's outgoing packets, e.g. 'tcp dport 443')");
            continue;
        };
        if out.iter().any(|d| d.name == name) {
            p.err(
                item.mark,
                &join(&field, "name"),
                format!("two diverted paths are named '{name}'"),
            );
            continue;
        }
        out.push(Divert { name, matches, forward, reverse });
    }
    out
}
