//! A node's policy routing rules against what the node has: the interfaces they name,
//! the tables they send packets to.

use super::err;
use crate::parse::Scenario;
use crate::policy::{RuleAction, MAIN_TABLE};
use crate::{Error, NodePlan};

/// Each rule's `iif`/`oif` must be an interface of the node (or `lo`, or an access
/// point's bridge), and its table must hold routes.
pub(super) fn check(s: &Scenario, nodes: &[NodePlan], errors: &mut Vec<Error>) {
    for (ni, def) in s.nodes.iter().enumerate() {
        let node = &nodes[ni];
        let has = |name: &str| {
            name == "lo"
                || node.ifaces.iter().any(|i| i.name == name)
                || (!node.bridge.is_empty() && name == crate::AP_BRIDGE)
        };
        for r in &def.rules {
            for (key, name) in [("iif", &r.rule.iif), ("oif", &r.rule.oif)] {
                if let Some(name) = name.as_deref().filter(|n| !has(n)) {
                    let known: Vec<&str> = node.ifaces.iter().map(|i| i.name.as_str()).collect();
                    err(
                        errors,
                        r.mark,
                        &format!("{}.{key}", r.field),
                        format!(
                            "node '{}' has no interface '{name}' (it has lo, {})",
                            def.name,
                            known.join(", ")
                        ),
                    );
                }
            }
            if let RuleAction::Table(t) = r.rule.action {
                if t != MAIN_TABLE && !def.routes.iter().any(|x| x.table == t) {
                    err(
                        errors,
                        r.mark,
                        &format!("{}.table", r.field),
                        format!("node '{}' has no route in table {t}: give one in its routes with 'table: {t}'", def.name),
                    );
                }
            }
        }
    }
}
