//! Per-flow impairments (GINE's first case): frames of one flow on a direction —
//! matched by protocol, addresses or prefixes, ports, DSCP, ICMP type — take a pipe of
//! their own (its own delay, jitter, loss, rate and queue); the other frames take the
//! direction's, untouched.

use serde::{Deserialize, Serialize};
use vemu_qos::classify::Match;

use crate::Impairments;

/// Most flows a direction may have.
pub const MAX_FLOWS: usize = 16;

/// One flow of a direction: which frames, and what happens to them instead of the
/// direction's impairments (the first flow that matches a frame takes it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Flow {
    #[serde(rename = "match")]
    pub matches: Match,
    /// Its own impairments, from an ideal wire (not the direction's): no flows, qos or
    /// MTU of their own.
    pub impairments: Impairments,
}

impl Flow {
    pub fn validate(&self) -> Result<(), String> {
        let i = &self.impairments;
        if !i.flows.is_empty() || i.qos.is_some() || i.mtu.is_some() {
            return Err("a flow has delay, jitter, loss, rate and the like of its own, not flows, qos or an MTU".into());
        }
        if self.matches == Match::default() {
            return Err("a flow needs a match (proto, src, dst, sport, dport, dscp, icmp-type): it would take every frame".into());
        }
        i.validate()
    }
}
