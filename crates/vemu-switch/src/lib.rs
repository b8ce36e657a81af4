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

pub mod addr;
pub mod snoop;
pub use addr::{is_group, mac, Mac, BROADCAST};
pub use snoop::Snooping;
use snoop::{Class, Decision, VlanSnoop};

/// Default time a learned address stays without traffic from it, ns (IEEE 802.1D: 300 s).
pub const DEFAULT_AGING_NS: u64 = 300_000_000_000;

/// Addresses a switch learns at most, whatever its senders do: a node sending from
/// random source addresses must not grow the table (and the controller) without end. A
/// segment of many ports gets at least [`LEARNED_PER_PORT`] per port.
pub const DEFAULT_MAX_LEARNED: usize = 8192;
pub const LEARNED_PER_PORT: usize = 16;

/// VLAN of ports that set none (IEEE 802.1Q's default VLAN).
pub const DEFAULT_VLAN: u16 = 1;

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

/// Where [`Switch::forward_frame`] sent a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    Unicast,
    Flood,
    /// To the members of its multicast group and the router ports only (snooping).
    Multicast,
    Filter,
}

/// A learning switch (see the crate documentation).
#[derive(Debug, Clone)]
pub struct Switch {
    snooping: Snooping,
    /// Snooping state per VLAN (as `groups`).
    snoop: Vec<VlanSnoop>,
    /// When the switch, as querier, sends its next general queries, and how many it sent.
    next_query_ns: Option<u64>,
    queries_sent: u32,
    /// The families it queries: IPv4 (IGMP), IPv6 (MLD).
    query_families: [bool; 2],
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
        // Group memberships have the same bound as learned addresses.
        let snoop = vec![VlanSnoop::new(max_learned); groups.len()];
        Switch {
            snooping: Snooping::Off,
            snoop,
            next_query_ns: None,
            queries_sent: 0,
            query_families: [true, true],
            ports: out,
            groups,
            table: FxHashMap::default(),
            aging_ns,
            next_sweep_ns: aging_ns,
            max_learned,
            refused: 0,
            next_full_sweep_ns: 0,
        }
    }

    /// How the switch treats multicast (a new switch floods it: [`Snooping::Off`]).
    pub fn set_snooping(&mut self, s: Snooping) {
        self.snooping = s;
        self.next_query_ns = (s == Snooping::Querier).then_some(0);
        self.queries_sent = 0;
    }

    /// Which families the switch, as querier, queries (IPv4: IGMP, IPv6: MLD); both at
    /// first.
    pub fn set_query_families(&mut self, ipv4: bool, ipv6: bool) {
        self.query_families = [ipv4, ipv6];
    }

    /// Group joins not recorded because a VLAN's membership table was full (that VLAN's
    /// group data then floods until there is room again), since the start.
    pub fn groups_refused(&self) -> u64 {
        self.snoop.iter().map(VlanSnoop::refused).sum()
    }

    /// Multicast groups with members, over all VLANs.
    pub fn group_count(&self) -> usize {
        self.snoop.iter().map(VlanSnoop::group_count).sum()
    }

    /// Start over, as a switch just switched on: the LAN comes back to the engine from
    /// the kernel's bridge, which switched it meanwhile, so what this switch learned
    /// before may be stale. It forgets the addresses it learned and the group
    /// memberships, floods group data until the hosts have answered a general query
    /// (sent at once when it is the querier, else the next one heard) — a host that
    /// joined while the bridge switched must not miss its groups' frames — and, as
    /// querier, starts its query schedule again (at once, 31.25 s later, then every
    /// 125 s). Router ports and other queriers heard are kept.
    pub fn restart(&mut self) {
        self.table.clear();
        for s in &mut self.snoop {
            s.restart();
        }
        if self.snooping == Snooping::Querier {
            self.next_query_ns = Some(0);
            self.queries_sent = 0;
        }
    }

    /// When the switch's next general queries are due (it is the querier).
    pub fn next_query_ns(&self) -> Option<u64> {
        self.next_query_ns
    }

    /// The general queries due at `now`, each with the ports it goes to (the VLAN's
    /// ports that are up): an IGMPv3 and an MLDv2 query per VLAN.
    pub fn poll_queries(&mut self, now_ns: u64) -> Vec<(Vec<u32>, Vec<u8>)> {
        let Some(at) = self.next_query_ns.filter(|&t| t <= now_ns) else { return Vec::new() };
        self.queries_sent += 1;
        let every = if self.queries_sent < 2 {
            snoop::STARTUP_QUERY_INTERVAL_NS
        } else {
            snoop::QUERY_INTERVAL_NS
        };
        self.next_query_ns = Some(at.max(now_ns) + every);
        let mut out = Vec::new();
        for (g, s) in self.groups.iter().zip(&mut self.snoop) {
            s.queried(now_ns);
            let ports: Vec<u32> =
                g.iter().copied().filter(|&p| self.ports[p as usize].up).collect();
            if self.query_families[0] && !s.other_querier(false, now_ns) {
                out.push((ports.clone(), snoop::igmp_general_query()));
            }
            if self.query_families[1] && !s.other_querier(true, now_ns) {
                out.push((ports, snoop::mld_general_query()));
            }
        }
        out
    }

    /// Decide where an Ethernet frame from `in_port` goes, at `now_ns`: learn its source,
    /// and push the ports it goes to onto `out` (cleared first). Multicast goes through
    /// snooping (see [`snoop`]) unless it is off.
    pub fn forward_frame(
        &mut self,
        now_ns: u64,
        in_port: u32,
        eth: &[u8],
        out: &mut Vec<u32>,
    ) -> Delivery {
        out.clear();
        if eth.len() < 14 {
            return Delivery::Filter;
        }
        let (dst, src) = (mac(&eth[0..6]), mac(&eth[6..12]));
        let d = match self.forward(now_ns, in_port, dst, src) {
            Forward::Unicast(p) => {
                out.push(p);
                return Delivery::Unicast;
            }
            Forward::Filter => return Delivery::Filter,
            Forward::Flood(ports) => {
                out.extend(ports);
                Delivery::Flood
            }
        };
        if self.snooping == Snooping::Off || dst == BROADCAST {
            return d;
        }
        let class = snoop::classify(eth);
        if matches!(class, Class::Other | Class::Flood) {
            return d;
        }
        let group = self.ports[in_port as usize].group as usize;
        let ports = &self.ports;
        match self.snoop[group].handle(
            now_ns,
            self.snooping == Snooping::Querier,
            in_port,
            &class,
            |p| ports[p as usize].up,
            out,
        ) {
            Decision::Flood => d,
            Decision::Ports => Delivery::Multicast,
        }
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
            let g = self.ports[port as usize].group as usize;
            self.snoop[g].forget_port(port);
        }
    }

    /// Decide where a frame from `in_port` with these addresses goes, at `now_ns`.
    pub fn forward(&mut self, now_ns: u64, in_port: u32, dst: Mac, src: Mac) -> Forward<'_> {
        let port = &self.ports[in_port as usize];
        if !port.up {
            return Forward::Filter;
        }
        let group = port.group as usize;
        self.learn(now_ns, in_port, src);
        if let Some(p) = self.lookup(now_ns, in_port, dst) {
            return if p == in_port { Forward::Filter } else { Forward::Unicast(p) };
        }
        Forward::Flood(Flood {
            members: self.groups[group].iter(),
            ports: &self.ports,
            except: in_port,
        })
    }

    /// Learn that `src` (unless a group address) is behind `in_port`, at `now_ns`: aged
    /// entries are swept out when due; a new address beyond the table's bound is refused
    /// (counted in [`Switch::refused`]).
    pub fn learn(&mut self, now_ns: u64, in_port: u32, src: Mac) {
        let group = self.ports[in_port as usize].group as usize;
        if now_ns >= self.next_sweep_ns {
            let aging = self.aging_ns;
            self.table.retain(|_, e| now_ns.saturating_sub(e.seen_ns) <= aging);
            self.next_sweep_ns = now_ns + aging;
            for s in &mut self.snoop {
                s.sweep(now_ns);
            }
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
    }

    /// The port unicast address `dst` was last seen behind in `in_port`'s VLAN, if that
    /// was within the aging time of `now_ns`.
    pub fn lookup(&self, now_ns: u64, in_port: u32, dst: Mac) -> Option<u32> {
        let group = self.ports[in_port as usize].group as usize;
        let e = self.table.get(&key(group, dst)).filter(|_| !is_group(dst))?;
        (now_ns.saturating_sub(e.seen_ns) <= self.aging_ns).then_some(e.port)
    }
}
