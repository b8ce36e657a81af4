//! The data path of one shard as a state machine: no file descriptors, no clock, no
//! threads (the style of quinn-proto and smoltcp). A driver feeds it frames read from
//! devices ([`Core::handle_frame`]), wakes it when [`Core::poll_timeout`] says, writes
//! what [`Core::poll_transmit`] hands out and carries out what [`Core::poll_event`]
//! asks (carrier changes, capture copies). Every time comes in as an argument, in
//! nanoseconds on the lab clock, and every random decision comes from the seeds in the
//! configuration, so the same inputs at the same times give the same outputs — which is
//! what the virtual-clock tests (`tests/core/`) rely on.
//!
//! What it owns: the ports (a node's interface, numbered in the order links and
//! segments are added), each link's two directions ([`vemu_link::LinkDir`]), each
//! segment's member directions, aggregate capacity and learning switch
//! ([`vemu_switch::Switch`]) or radio channel ([`vemu_radio::medium::Medium`]), the
//! frames in flight, the counters and the capture subscriptions.
//!
//! One frame on a link: read at port a → counted, MTU-checked, split where per-frame
//! impairments or the rate need it → each piece offered to the forward direction →
//! scheduled at its delivery time → handed out by `poll_transmit` for port b. On a LAN
//! segment the frame crosses the sender's egress direction, then (at its delivery time)
//! the aggregate capacity and the switch, then each recipient's ingress direction. On a
//! wireless segment the radio channel takes the switch's place.

pub mod counters;
pub mod gso;
pub mod input;
pub mod schedule;
pub mod tunnel;

mod api;
mod shard;

pub use api::*;
pub use shard::{is_routing, Core, LEND_IDLE_NS, PROBES_EARLY, PROBE_EARLY_NS, PROBE_LATER_NS};
