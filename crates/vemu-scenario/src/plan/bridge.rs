//! Access points that bridge their BSS to their wired interfaces (a member's `bridge`):
//! the node's bridge and its ports.

use super::err;
use crate::parse::Scenario;
use crate::{Error, NodePlan, SegmentPlan};

/// The bridge an access point's node makes of its radio interface and the others.
pub const AP_BRIDGE: &str = "br0";

/// Give each bridging access point's node its bridge's ports: its radio interface
/// first, then the interfaces named (all the node's others for `true`).
pub(super) fn ap_bridges(
    s: &Scenario,
    nodes: &mut [NodePlan],
    segments: &[SegmentPlan],
    errors: &mut Vec<Error>,
) {
    for (g, def) in s.segments.iter().enumerate() {
        let Some(w) = &def.wireless else { continue };
        for (m, b) in w.bridges.iter().enumerate() {
            let Some((mark, wanted)) = b else { continue };
            let field = format!("segments.{}.members[{m}].bridge", def.name);
            let end = segments[g].members[m].end;
            let node = &mut nodes[end.node];
            let radio = node.ifaces[end.iface].name.clone();
            let problem = if !node.kind.is_made() {
                Some(format!(
                    "node '{}' is of kind '{}': its interfaces are not vemu's to bridge",
                    node.name,
                    node.kind.name()
                ))
            } else if !node.bridge.is_empty() {
                Some(format!("node '{}' bridges another radio already", node.name))
            } else if node.ifaces.iter().any(|i| i.name == AP_BRIDGE) {
                Some(format!(
                    "node '{}' has an interface '{AP_BRIDGE}': that is the bridge's name",
                    node.name
                ))
            } else {
                wanted.iter().find_map(|w| match node.ifaces.iter().any(|i| &i.name == w) {
                    _ if *w == radio => Some(format!("'{w}' is the radio interface itself")),
                    true => None,
                    false => Some(format!(
                        "node '{}' has no interface '{w}' (it has {})",
                        node.name,
                        node.ifaces.iter().map(|i| i.name.as_str()).collect::<Vec<_>>().join(", ")
                    )),
                })
            };
            if let Some(message) = problem {
                err(errors, *mark, &field, message);
                continue;
            }
            let others = node.ifaces.iter().map(|i| i.name.clone()).filter(|n| *n != radio);
            let ports: Vec<String> = match wanted.is_empty() {
                true => others.collect(),
                false => others.filter(|n| wanted.contains(n)).collect(),
            };
            if ports.is_empty() {
                let m =
                    format!("node '{}' has no other interface to bridge its radio with", node.name);
                err(errors, *mark, &field, m);
                continue;
            }
            node.bridge = std::iter::once(radio).chain(ports).collect();
        }
    }
}
