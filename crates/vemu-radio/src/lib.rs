//! Sans-IO radio models for wireless segments: how strongly a frame sent at one position
//! is received at another ([`propagation`]), how nodes move ([`mobility`], [`ns2`]
//! traces), and the shared channel that decides who receives which frame when
//! ([`medium`]; [`wifi`]: the 802.11 DCF decided slot by slot; [`air`]: either, as a
//! segment drives it). No clock and no I/O: time comes in as nanoseconds on the lab
//! clock, randomness from seeded generators, so that the same seed gives the same
//! positions and the same decisions.

pub mod air;
pub mod city;
pub mod hub;
pub mod medium;
pub mod mobility;
pub mod ns2;
pub mod propagation;
pub mod wifi;

use serde::{Deserialize, Serialize};

/// Delivery counters of one ordered pair of members (sender → receiver), in frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairCounters {
    /// Transmissions the receiver was in reception range of (or addressed by).
    pub sent: u64,
    pub delivered: u64,
    /// Lost to the propagation model (too weak).
    pub lost_channel: u64,
    /// Lost to another transmission overlapping it, or to the receiver transmitting.
    pub lost_collision: u64,
}

/// A member in reception range, with the chance that a frame reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Neighbour {
    pub member: u32,
    pub distance_m: f64,
    pub delivery_probability: f64,
    /// The mean power the member receives that neighbour's frames with, dBm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal_dbm: Option<f64>,
}

/// A position in metres.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Pos {
    pub x: f64,
    pub y: f64,
}

impl Pos {
    pub fn new(x: f64, y: f64) -> Pos {
        Pos { x, y }
    }
    pub fn distance(self, o: Pos) -> f64 {
        ((self.x - o.x).powi(2) + (self.y - o.y).powi(2)).sqrt()
    }
}

/// Watts to dBm.
pub fn dbm(watts: f64) -> f64 {
    10.0 * watts.log10() + 30.0
}

/// dBm to watts.
pub fn watts(dbm: f64) -> f64 {
    10f64.powf((dbm - 30.0) / 10.0)
}

/// The splitmix64 finalizer: a well-mixed 64-bit hash of a 64-bit value, for seeds and
/// counter-based random draws.
pub fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
