//! Sans-IO learning Ethernet switch: the forwarding decisions of a vemu LAN segment.
//!
//! A [`Switch`] has numbered ports, each an access port of one VLAN. For every frame
//! it is told the ingress port, the destination and source MAC addresses and the time
//! on the lab clock; it learns where the source lives and answers where the frame
//! goes: one port, a flood to every other port of the VLAN that is up, or nowhere
//! (the destination lives on the ingress port). Lookups are one hash probe, whatever
//! the number of ports. Learned addresses age out after [`Switch::aging_ns`] without
//! traffic and are forgotten at once when their port goes down, as on a real switch.
//!
//! It never reads a clock or touches a socket; the engine feeds it.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// Default time a learned address stays without traffic from it, ns (IEEE 802.1D: 300 s).
pub const DEFAULT_AGING_NS: u64 = 300_000_000_000;

/// Addresses a switch learns at most, whatever its senders do: a node sending from
/// random source addresses must not grow the table (and the controller) without end. A
/// segment of many ports gets at least [`LEARNED_PER_PORT`] per port.
pub const DEFAULT_MAX_LEARNED: usize = 8192;
pub const LEARNED_PER_PORT: usize = 16;

/// VLAN of ports that set none (IEEE 802.1Q's default VLAN).
pub const DEFAULT_VLAN: u16 = 1;

/// A MAC address as the 48 low bits of a u64 (first byte on the wire = highest).
pub type Mac = u64;

pub fn mac(bytes: &[u8]) -> Mac {
    bytes[..6].iter().fold(0u64, |acc, &b| acc << 8 | b as u64)
}

/// Group (broadcast or multicast) addresses have the lowest bit of the first byte set.
pub fn is_group(m: Mac) -> bool {
    m >> 40 & 1 == 1
}

/// One port of a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortConfig {
    /// Access VLAN, 1..=4094: frames reach only ports of the same VLAN.
    pub vlan: u16,
}

impl Default for PortConfig {
    fn default() -> Self {
        PortConfig { vlan: DEFAULT_VLAN }
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    port: u32,
    seen_ns: u64,
}

#[derive(Debug, Clone)]
struct Port {
    /// Index into `Switch::groups`.
    group: u32,
    up: bool,
}

/// Where a frame goes.
#[derive(Debug)]
pub enum Forward<'a> {
    /// To this one port.
    Unicast(u32),
    /// To every port of the VLAN that is up, except the ingress port.
    Flood(Flood<'a>),
    /// Nowhere: the destination is on the ingress port, or the ingress port is down.
    Filter,
}

/// The ports a flooded frame goes to.
#[derive(Debug, Clone)]
pub struct Flood<'a> {
    members: std::slice::Iter<'a, u32>,
    ports: &'a [Port],
    except: u32,
}

impl Iterator for Flood<'_> {
    type Item = u32;
    fn next(&mut self) -> Option<u32> {
        self.members.by_ref().copied().find(|&p| p != self.except && self.ports[p as usize].up)
    }
}

/// A learning switch (see the crate documentation).
#[derive(Debug, Clone)]
pub struct Switch {
    ports: Vec<Port>,
    /// Ports of each VLAN, in port order.
    groups: Vec<Vec<u32>>,
    table: FxHashMap<u64, Entry>,
    pub aging_ns: u64,
    /// Next time expired entries are swept out of the table, ns.
    next_sweep_ns: u64,
    /// Most addresses the table holds; a new one beyond is not learned (its frames
    /// flood, as on a real switch whose table is full) and counted in `refused`.
    max_learned: usize,
    refused: u64,
    /// While the table is full, aged entries are swept out at most once a second (not
    /// once per refused frame: a flood of new addresses must not cost a scan each).
    next_full_sweep_ns: u64,
}

/// Table key: the VLAN's group index and the address (tables of VLANs are separate).
fn key(group: usize, m: Mac) -> u64 {
    (group as u64) << 48 | m
}

impl Switch {
    pub fn new(ports: &[PortConfig], aging_ns: u64) -> Switch {
        let mut vlans: Vec<u16> = Vec::new();
        let mut groups: Vec<Vec<u32>> = Vec::new();
        let mut out = Vec::with_capacity(ports.len());
        for (i, p) in ports.iter().enumerate() {
            let g = match vlans.iter().position(|&v| v == p.vlan) {
                Some(g) => g,
                None => {
                    vlans.push(p.vlan);
                    groups.push(Vec::new());
                    vlans.len() - 1
                }
            };
            groups[g].push(i as u32);
            out.push(Port { group: g as u32, up: true });
        }
        let max_learned = DEFAULT_MAX_LEARNED.max(LEARNED_PER_PORT * ports.len());
        Switch { ports: out, groups, table: FxHashMap::default(), aging_ns, next_sweep_ns: aging_ns, max_learned, refused: 0, next_full_sweep_ns: 0 }
    }

    pub fn port_count(&self) -> usize {
        self.ports.len()
    }

    /// Addresses currently learned (expired ones may linger until the next sweep).
    pub fn learned(&self) -> usize {
        self.table.len()
    }

    /// Most addresses the table holds.
    pub fn max_learned(&self) -> usize {
        self.max_learned
    }

    pub fn set_max_learned(&mut self, n: usize) {
        self.max_learned = n;
    }

    /// New addresses not learned because the table was full, since the start.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Take a port down (it neither sends nor receives, and what was learned on it is
    /// forgotten) or back up.
    pub fn set_port_up(&mut self, port: u32, up: bool) {
        self.ports[port as usize].up = up;
        if !up {
            self.table.retain(|_, e| e.port != port);
        }
    }

    /// Decide where a frame from `in_port` with these addresses goes, at `now_ns`.
    pub fn forward(&mut self, now_ns: u64, in_port: u32, dst: Mac, src: Mac) -> Forward<'_> {
        let port = &self.ports[in_port as usize];
        if !port.up {
            return Forward::Filter;
        }
        let group = port.group as usize;
        if now_ns >= self.next_sweep_ns {
            let aging = self.aging_ns;
            self.table.retain(|_, e| now_ns.saturating_sub(e.seen_ns) <= aging);
            self.next_sweep_ns = now_ns + aging;
        }
        if !is_group(src) {
            let k = key(group, src);
            if let Some(e) = self.table.get_mut(&k) {
                *e = Entry { port: in_port, seen_ns: now_ns };
            } else {
                if self.table.len() >= self.max_learned && now_ns >= self.next_full_sweep_ns {
                    // Make room from what has aged out before refusing.
                    let aging = self.aging_ns;
                    self.table.retain(|_, e| now_ns.saturating_sub(e.seen_ns) <= aging);
                    self.next_full_sweep_ns = now_ns + 1_000_000_000;
                }
                if self.table.len() < self.max_learned {
                    self.table.insert(k, Entry { port: in_port, seen_ns: now_ns });
                } else {
                    self.refused += 1;
                }
            }
        }
        if !is_group(dst) {
            if let Some(e) = self.table.get(&key(group, dst)) {
                if now_ns.saturating_sub(e.seen_ns) <= self.aging_ns {
                    return if e.port == in_port { Forward::Filter } else { Forward::Unicast(e.port) };
                }
            }
        }
        Forward::Flood(Flood { members: self.groups[group].iter(), ports: &self.ports, except: in_port })
    }
}
