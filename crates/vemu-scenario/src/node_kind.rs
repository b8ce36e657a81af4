//! The kinds of node vemu knows, each answering every question about itself that the
//! scenario and the lab ask: the words that name it, whether a tenant may have it,
//! which keys it may have, whether vemu makes it (and so can enter, stop and limit it).
//! Making and removing one is vemu-host's (`create_node`, `create_host_node`,
//! `create_external_node`); the web page draws each. A new kind is a variant here, its
//! answers below, and its making there.

use serde::{Deserialize, Serialize};

use crate::Reach;

/// What a node is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    /// A network namespace (and the rest of a node) that vemu makes.
    #[default]
    Namespace,
    /// The machine vemu runs on: its interfaces, addresses and routes go into the
    /// controller's own network namespace, and vemu makes no namespace, runs nothing
    /// and sets no sysctl there.
    Host,
    /// What is on the wire of one of the machine's network interfaces (a NIC): the
    /// node's one interface is that NIC, whose frames enter and leave the lab through
    /// the engine (an `AF_PACKET` socket); vemu gives it no address and runs nothing.
    External,
}

/// What a node of `kind: host` may not have: it is the machine itself, not a node vemu
/// makes.
const NOT_ON_HOST: &[&str] = &[
    "startup-config",
    "rules",
    "image",
    "iface",
    "run",
    "files",
    "loopback",
    "sysctl",
    "isolation",
    "cpu",
    "memory",
    "pids",
    "machine",
    "mgmt",
];

/// What only a node of kind `host` may have.
const ONLY_ON_HOST: &[&str] = &["nat"];

/// What a node of kind `external` may have: it is what is on a NIC's wire.
const ON_EXTERNAL: &[&str] = &["kind", "iface", "canvas"];

impl NodeKind {
    /// The kind a scenario's `kind:` names: `namespace` (or `linux`), `host`,
    /// `external`, or a router kind (`crate::kinds`: a namespace with its daemon).
    pub fn parse(word: &str) -> Result<NodeKind, String> {
        match word {
            "namespace" | "linux" => Ok(NodeKind::Namespace),
            "host" => Ok(NodeKind::Host),
            "external" => Ok(NodeKind::External),
            _ if crate::kinds::kind(word).is_some() => Ok(NodeKind::Namespace),
            _ => Err(format!("unknown kind '{word}': the kinds are {} ('linux', a node of its own, is the default; 'host' is the machine vemu runs on, 'external' what is on the wire of a NIC of the machine)", crate::kinds::kind_names().join(", "))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            NodeKind::Namespace => "namespace",
            NodeKind::Host => "host",
            NodeKind::External => "external",
        }
    }

    /// A node vemu makes (a namespace it can run programs in, stop and limit).
    pub fn is_made(self) -> bool {
        self == NodeKind::Namespace
    }

    /// What a scenario reaches beyond its lab with a node of this kind (refused to a
    /// tenant), if anything.
    pub fn reach(self) -> Option<Reach> {
        match self {
            NodeKind::Namespace => None,
            NodeKind::Host => Some(Reach::Host),
            NodeKind::External => Some(Reach::External),
        }
    }

    /// Why a node of this kind may not have key `key` of a node definition, if it may
    /// not.
    pub fn refuses_key(self, key: &str) -> Option<String> {
        match self {
            NodeKind::Host => NOT_ON_HOST.contains(&key).then(|| format!("a node of kind 'host' is the machine vemu runs on, not a node vemu makes: it has no '{key}'")),
            NodeKind::External => (!ON_EXTERNAL.contains(&key)).then(|| format!("a node of kind 'external' is what is on the wire of a NIC, not a node vemu makes: it has no '{key}'")),
            NodeKind::Namespace => match key {
                _ if ONLY_ON_HOST.contains(&key) => Some(format!("'{key}' is the machine's way out for the lab's nodes: only a node of kind 'host' (the machine) has it")),
                "iface" => Some("'iface' names the NIC of a node of kind 'external' (name a link's interface in its endpoint: {node: n1, iface: eth5})".to_string()),
                _ => None,
            },
        }
    }

    /// Why vemu does not enter, stop or limit node `node` of this kind (`iface`: its
    /// first interface), if it does not.
    pub fn not_entered(self, node: &str, iface: &str) -> Option<String> {
        match self {
            NodeKind::Namespace => None,
            NodeKind::Host => Some(format!("node '{node}' is the machine vemu runs on (kind: host): run its programs as usual; vemu does not enter, stop or limit it")),
            NodeKind::External => Some(format!("node '{node}' is what is on the wire of interface {iface} (kind: external): vemu does not enter, stop or limit it")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_answers_for_itself() {
        assert_eq!(NodeKind::parse("linux"), Ok(NodeKind::Namespace));
        assert_eq!(NodeKind::parse("frr"), Ok(NodeKind::Namespace));
        assert_eq!(NodeKind::parse("host"), Ok(NodeKind::Host));
        assert!(NodeKind::parse("vm").unwrap_err().contains("unknown kind 'vm'"));
        for k in [NodeKind::Namespace, NodeKind::Host, NodeKind::External] {
            assert_eq!(NodeKind::parse(k.name()), Ok(k));
            assert_eq!(k.is_made(), k.not_entered("n", "eth0").is_none());
            assert_eq!(k.is_made(), k.reach().is_none());
        }
        assert!(NodeKind::Host.refuses_key("run").is_some());
        assert!(NodeKind::Host.refuses_key("nat").is_none());
        assert!(NodeKind::External.refuses_key("iface").is_none());
        assert!(NodeKind::External.refuses_key("run").is_some());
        assert!(NodeKind::Namespace.refuses_key("nat").is_some());
        assert!(NodeKind::Namespace.refuses_key("iface").is_some());
        assert!(NodeKind::Namespace.refuses_key("run").is_none());
    }
}
