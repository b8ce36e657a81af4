//! Policy routing (Virtual Routers' classifier in front of the routing tables): a node's
//! `rules:` choose the routing table a packet is looked up in — by its source and
//! destination prefixes, protocol, ports, DSCP, incoming and outgoing interface — and
//! `table:` puts a route in one of those tables. The node's kernel does the rest (its
//! `ip rule` and routing tables), for IPv4 and IPv6.

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

/// The main routing table's number (what a route without `table` is in).
pub const MAIN_TABLE: u32 = 254;
pub(crate) fn main_table() -> u32 {
    MAIN_TABLE
}

pub(crate) fn is_main(table: &u32) -> bool {
    *table == MAIN_TABLE
}

/// Priority of a node's first rule without one; the next ones follow 10 apart (the
/// kernel's own rules: local at 0, main at 32766, default at 32767).
pub const FIRST_RULE_PRIORITY: u32 = 1000;

/// What a rule does with the packets it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RuleAction {
    /// Look the route up in this table (falling through to the next rule when it has
    /// none for the destination).
    Table(u32),
    /// Drop silently.
    Blackhole,
    /// Refuse with "network unreachable".
    Unreachable,
    /// Refuse with "administratively prohibited".
    Prohibit,
}

/// One rule of a node: what it matches (each `None` matches anything) and what it does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RulePlan {
    /// Lower first, as `ip rule`'s preference.
    pub priority: u32,
    /// The family it applies to: `Some(true)` IPv6, `Some(false)` IPv4, `None` both (no
    /// prefix or family-bound protocol says which).
    pub v6: Option<bool>,
    pub from: Option<IpNet>,
    pub to: Option<IpNet>,
    /// Incoming interface (a packet the node forwards; `lo` for its own).
    pub iif: Option<String>,
    /// Outgoing interface (a socket bound to it).
    pub oif: Option<String>,
    /// IP protocol number.
    pub proto: Option<u8>,
    /// Inclusive port ranges (TCP, UDP, SCTP).
    pub sport: Option<(u16, u16)>,
    pub dport: Option<(u16, u16)>,
    /// The six DSCP bits.
    pub dscp: Option<u8>,
    pub action: RuleAction,
}
