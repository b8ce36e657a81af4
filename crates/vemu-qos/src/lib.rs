//! Traffic conditioning and queueing for vemu's links (Virtual Routers' DiffServ), as
//! sans-IO state machines: time comes in as an argument (ns), randomness from seeds.
//!
//! - [`classify`]: what a frame is (VLAN PCP, DSCP, protocol, addresses, ports) and which
//!   class a list of rules puts it in; re-marking of the DSCP.
//! - [`meter`]: a token bucket, the single rate three colour marker (RFC 2697) and the
//!   two rate three colour marker (RFC 2698), colour-blind and colour-aware.
//! - [`red`]: random early detection (Floyd and Jacobson 1993), and WRED — one RED
//!   profile per drop precedence over the same average queue.
//! - [`sched`]: strict priority and deficit round robin (Shreedhar and Varghese 1995)
//!   over per-class queues.
//!
//! None of it touches a frame's timing: a link direction (`vemu-link`) asks these models
//! what to do, and serializes what the scheduler hands it.

pub mod classify;
pub mod meter;
pub mod red;
pub mod sched;
pub mod stage;

/// The colour a meter gives a packet (RFC 2697/2698), which is also its drop precedence
/// (AFx1 = green, AFx2 = yellow, AFx3 = red).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Color {
    Green,
    Yellow,
    Red,
}
