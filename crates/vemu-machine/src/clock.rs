//! A machine's clock against the controller's (measured by the controller's heartbeats:
//! see vemu-control's `clock_sync`).

use serde::{Deserialize, Serialize};

/// A machine's lab clock against the controller's: `offset_ns` ahead (negative:
/// behind), measured with a heartbeat of round trip `rtt_ns` — known within half of
/// it, or within `wall_bound_ns` when both wall clocks are disciplined and that is less
/// (see [`Offset::bound_ns`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offset {
    pub offset_ns: i64,
    pub rtt_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_bound_ns: Option<u64>,
}

impl Offset {
    /// How far the offset may be off, ns.
    pub fn bound_ns(&self) -> u64 {
        self.wall_bound_ns.unwrap_or(self.rtt_ns / 2)
    }

    /// A time of the machine's lab clock on the controller's.
    pub fn to_controller(&self, t_ns: u64) -> u64 {
        (t_ns as i128 - self.offset_ns as i128).clamp(0, u64::MAX as i128) as u64
    }
}
