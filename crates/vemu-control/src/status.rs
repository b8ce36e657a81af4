//! What a lab reports of itself: the status document of `GET /v1/lab` and `vemu status`.

use serde::{Deserialize, Serialize};
use vemu_link::Impairments;

use crate::fidelity;
use vemu_machine::supervise::ProcStatus;

pub use vemu_engine::{DirStats, SegStats};
pub use vemu_scenario::Direction;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabStatus {
    pub name: String,
    pub pid: u32,
    /// Lab-clock time, ns.
    pub uptime_ns: u64,
    pub nodes: Vec<NodeStatus>,
    pub links: Vec<LinkStatus>,
    #[serde(default)]
    pub segments: Vec<SegmentStatus>,
    /// The fidelity monitor's verdict on the whole run so far, and on its last window.
    #[serde(default)]
    pub fidelity: Option<fidelity::Fidelity>,
    #[serde(default)]
    pub fidelity_now: Option<fidelity::Fidelity>,
    /// Whether link directions that need no emulation go by the kernel: "on", "off:
    /// why", or "unused: why" (no link or LAN it could carry).
    #[serde(default)]
    pub fast_path: String,
    /// The lab's machines (none: the lab is on the controller's machine).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machines: Vec<MachineStatus>,
    /// The machine's traffic through emulated paths.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diverts: Vec<DivertStatus>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SegmentStatus {
    pub name: String,
    /// `lan` or `wireless`.
    #[serde(default)]
    pub kind: String,
    /// A wireless segment's range (where the mean received power meets the receive
    /// threshold) and carrier-sense distance, m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range_m: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carrier_sense_m: Option<f64>,
    /// A wireless segment with a city (`GET /v1/segments/{segment}/city`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub city: bool,
    /// Aggregate capacity, bits/s.
    pub capacity_bps: Option<u64>,
    pub stats: SegStats,
    pub members: Vec<MemberStatus>,
    /// Where the web page draws it (`canvas: [x, y]`), when the scenario says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canvas: Option<[f64; 2]>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemberStatus {
    /// `node:iface`.
    pub port: String,
    pub vlan: u16,
    /// On a wireless segment: where the member is and whom it reaches.
    #[serde(default)]
    pub radio: Option<RadioStatus>,
    pub up: bool,
    /// Frames the member sends, toward the switch.
    pub egress: DirStatus,
    /// Frames the switch delivers to the member.
    pub ingress: DirStatus,
}

/// A member of a wireless segment: its position, the members its frames may reach now,
/// and how its transmissions fared so far at each receiver.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RadioStatus {
    pub x_m: f64,
    pub y_m: f64,
    pub neighbours: Vec<NeighbourStatus>,
    pub sent_to: Vec<PairStatus>,
    /// On an 802.11 channel (`csma: true`): what its MAC did — data frames sent and
    /// retried, RTS sent, frames acknowledged and dropped at the retry limit, frames
    /// received intact and in error, its contention window and the rate (index in the
    /// standard's list) of its last data frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<vemu_radio::wifi::dcf::StationStats>,
    /// In infrastructure mode: its role (`ap`, `station`, `adhoc`) and SSID; a
    /// station's access point (node) and the signal it hears it at; an access point's
    /// stations (nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wifi: Option<WifiStatus>,
    /// On a hub: frames its port sent, its collisions, frames it gave up after 16
    /// attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub: Option<vemu_radio::hub::HubStats>,
}

/// A member's part in infrastructure mode, by node names.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WifiStatus {
    pub role: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ap: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal_dbm: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stations: Vec<String>,
    /// The channel its radio is on (a station's follows its access point, and its scans).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<u16>,
    /// A station: its handovers so far (from one access point to another, data frames
    /// through both), and the last one's time, ms — from the last data frame through the
    /// old access point to the first through the new.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub handovers: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handover_ms: Option<f64>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NeighbourStatus {
    pub node: String,
    pub distance_m: f64,
    /// Chance that a frame reaches it (propagation model, before collisions).
    pub delivery_probability: f64,
    /// The mean power the member hears it with, dBm (where the model gives one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal_dbm: Option<f64>,
}

/// Frames one member transmitted that were meant for (or in range of) another member.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PairStatus {
    pub node: String,
    #[serde(flatten)]
    pub counters: vemu_radio::medium::PairCounters,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeStatus {
    pub name: String,
    /// False after `stop` (its processes ended), until `start`.
    #[serde(default = "yes")]
    pub up: bool,
    pub netns: String,
    pub ifaces: Vec<IfaceStatus>,
    pub processes: Vec<ProcStatus>,
    /// CPU, memory and process limits in force.
    #[serde(default)]
    pub limits: vemu_scenario::Limits,
    /// What the node's processes use together.
    #[serde(default)]
    pub usage: vemu_host::cgroup::Usage,
    /// How long its processes waited for a CPU, ns (counted while the machine was under
    /// CPU pressure: `vemu_host::cpu_wait`).
    #[serde(default)]
    pub cpu_wait_ns: u64,
    /// The machine it runs on (labs across machines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// `host` (the machine vemu runs on) or `external` (what is on a NIC's wire) for
    /// nodes vemu does not make (their `netns` is empty); absent for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Where the web page draws it (`canvas: [x, y]`), when the scenario says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canvas: Option<[f64; 2]>,
}

/// A machine of a lab across machines.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MachineStatus {
    pub name: String,
    /// Its agent's address.
    pub address: String,
    /// How many of the lab's nodes it runs.
    pub nodes: usize,
    /// `up`, or `lost` once its agent stopped answering (its nodes count as down).
    #[serde(default)]
    pub state: String,
    /// How far its lab clock is ahead of the controller's (negative: behind), ns, and
    /// the round trip of the heartbeat that measured it (the error is at most half of
    /// it); absent until the first heartbeat answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_offset_ns: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_rtt_ns: Option<u64>,
    /// How far `clock_offset_ns` may be off: half that round trip, or less where both
    /// machines' wall clocks are disciplined (NTP/PTP) and their kernels say so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_error_ns: Option<u64>,
    /// Where that bound comes from: `round trip` or `disciplined clocks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_source: Option<String>,
    /// The links from it to each other machine, against the underlay's capacity.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub underlay: Vec<UnderlayStatus>,
}

/// The links from one machine to another: the rates set on them in that direction, and
/// what the underlay carried that way when the lab came up.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UnderlayStatus {
    /// The other machine.
    pub to: String,
    pub links: usize,
    /// The sum of the rates set now in this direction, bits/s, and how many of the
    /// links have none (unlimited: not in the sum).
    pub set_bps: u64,
    pub unlimited_links: usize,
    /// Bits/s, measured as the lab came up (absent if the measure failed, or for more
    /// machine pairs than are measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_bps: Option<u64>,
}

impl UnderlayStatus {
    /// Why the links may deliver less than their set rates, if so.
    pub fn warning(&self, from: &str) -> Option<String> {
        let measured = self.measured_bps?;
        (self.set_bps > measured).then(|| {
            format!(
                "the links from machine '{from}' to '{}' are set to {:.1} Mbit/s in all, more than the {:.1} Mbit/s the underlay carried that way: they may deliver less than set",
                self.to,
                self.set_bps as f64 / 1e6,
                measured as f64 / 1e6
            )
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IfaceStatus {
    pub name: String,
    pub mac: String,
    pub addrs: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinkStatus {
    pub name: String,
    /// `node:iface` of each end.
    pub a: String,
    pub b: String,
    pub up: bool,
    pub forward: DirStatus,
    pub reverse: DirStatus,
}

/// A path the machine's own traffic takes through the lab's emulation (`divert:`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DivertStatus {
    pub name: String,
    /// The nftables expression selecting the connections.
    #[serde(rename = "match")]
    pub matches: String,
    /// The machine's outgoing packets, and the replies.
    pub forward: DirStatus,
    pub reverse: DirStatus,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DirStatus {
    pub impairments: Impairments,
    pub stats: DirStats,
}

fn yes() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::UnderlayStatus;

    #[test]
    fn a_warning_only_when_the_rates_set_exceed_what_the_underlay_carried() {
        let u = |set_bps, measured_bps| UnderlayStatus {
            to: "b".into(),
            links: 2,
            set_bps,
            unlimited_links: 1,
            measured_bps,
        };
        assert_eq!(u(40_000_000, Some(48_000_000)).warning("a"), None);
        assert_eq!(u(40_000_000, None).warning("a"), None);
        let w = u(100_000_000, Some(48_200_000)).warning("a").unwrap();
        assert!(w.starts_with("the links from machine 'a' to 'b' are set to 100.0 Mbit/s in all, more than the 48.2 Mbit/s"), "{w}");
    }
}
