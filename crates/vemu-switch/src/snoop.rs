//! IGMP and MLD snooping (RFC 4541), with an optional snooping querier.
//!
//! The switch reads the membership reports and queries crossing it. While a querier is
//! active on the LAN for a family (one was heard within [`OTHER_QUERIER_NS`], or the
//! switch is the querier itself) it forwards:
//! - multicast data to the ports whose hosts reported the group and to router ports
//!   (where queries come from); a group nobody reported goes to router ports only;
//! - membership reports and leaves to router ports only (hosts need not hear them);
//! - what must reach every host still to every port: 224.0.0.x (IPv4 link-local
//!   control: OSPF, RIP, VRRP…), ff02::1 (all nodes), queries, broadcast.
//!
//! Without an active querier it floods all multicast, as the Linux bridge does (its
//! default), while still learning the groups. Groups are kept by MAC address (IPv4
//! 01:00:5e + 23 bits, IPv6 33:33 + 32 bits), as on most hardware switches.
//!
//! Each port is one node's interface, so a leave removes the port at once (the Linux
//! bridge's "fast leave") instead of asking with group-specific queries.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::addr::Mac;

/// How a LAN segment treats multicast (scenario key `snooping`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Snooping {
    /// Every multicast frame is flooded.
    Off,
    /// Snooping, active while a querier (a multicast router on the LAN) is heard.
    #[default]
    On,
    /// Snooping, and the switch is the LAN's querier: it sends general queries (IGMPv3
    /// and MLDv2) at start, 31 s later, then every 125 s.
    Querier,
}

/// A membership lasts this long without a report (RFC 3376's membership interval:
/// robustness 2 × query interval 125 s + response time 10 s).
pub const MEMBERSHIP_NS: u64 = 260_000_000_000;
/// A querier (and its port, a router port) counts as present this long after its last
/// query (RFC 3376's other querier present interval).
pub const OTHER_QUERIER_NS: u64 = 255_000_000_000;
/// The switch's own queries: the first two this far apart, then [`QUERY_INTERVAL_NS`].
pub const STARTUP_QUERY_INTERVAL_NS: u64 = 31_250_000_000;
pub const QUERY_INTERVAL_NS: u64 = 125_000_000_000;
/// How long hosts take at most to answer a general query (the Max Resp Code of the
/// switch's queries, 10 s; RFC 3376's default): a switch that starts over floods group
/// data this long after the first query it sends or hears (see `Switch::restart`).
pub const QUERY_RESPONSE_NS: u64 = 10_000_000_000;

/// What a frame is, as far as snooping goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Class {
    /// Not IP multicast (or not readable as such): switched as usual.
    Other,
    /// Multicast that every host must get (224.0.0.x, ff02::1, or a frame whose group is
    /// unreadable).
    Flood,
    /// A general or group-specific query: a querier (and a multicast router) is there.
    Query { v6: bool },
    /// A PIM hello: a multicast router is there (not necessarily the querier).
    Router { v6: bool },
    /// Membership reports and leaves, as group MAC addresses.
    Report { v6: bool, joins: Vec<Mac>, leaves: Vec<Mac> },
    /// Multicast data for a group.
    Data { v6: bool, group: Mac },
}

/// IPv4 group address → its MAC address.
fn mac4(g: [u8; 4]) -> Mac {
    0x01_00_5e_00_00_00 | (u32::from_be_bytes(g) & 0x7f_ffff) as u64
}

/// IPv6 group address → its MAC address.
fn mac6(g: &[u8]) -> Mac {
    0x33_33_00_00_00_00 | u32::from_be_bytes([g[12], g[13], g[14], g[15]]) as u64
}

const ALL_NODES_V6: Mac = 0x33_33_00_00_00_01;

/// Read what snooping needs from an Ethernet frame whose destination is a group address.
pub fn classify(eth: &[u8]) -> Class {
    let get = |at: usize, n: usize| eth.get(at..at + n);
    let Some(ty) = get(12, 2) else { return Class::Other };
    match [ty[0], ty[1]] {
        [0x08, 0x00] => classify4(&eth[14..]),
        [0x86, 0xdd] => classify6(&eth[14..]),
        _ => Class::Other,
    }
}

fn classify4(ip: &[u8]) -> Class {
    if ip.len() < 20 || ip[0] >> 4 != 4 {
        return Class::Other;
    }
    let ihl = (ip[0] & 0xf) as usize * 4;
    let dst = [ip[16], ip[17], ip[18], ip[19]];
    if dst[0] >> 4 != 14 {
        return Class::Other;
    }
    if ip[9] == 2 {
        let Some(igmp) = ip.get(ihl..) else { return Class::Flood };
        return igmp_class(igmp).unwrap_or(Class::Flood);
    }
    // PIM (hellos to 224.0.0.13): a multicast router, whether or not it is the querier.
    if ip[9] == 103 {
        return Class::Router { v6: false };
    }
    // 224.0.0.0/24: link-local control traffic that hosts never report.
    if dst[..3] == [224, 0, 0] {
        return Class::Flood;
    }
    Class::Data { v6: false, group: mac4(dst) }
}

fn igmp_class(m: &[u8]) -> Option<Class> {
    let group =
        |at: usize| -> Option<[u8; 4]> { m.get(at..at + 4).map(|g| [g[0], g[1], g[2], g[3]]) };
    Some(match *m.first()? {
        0x11 => Class::Query { v6: false },
        0x12 | 0x16 => Class::Report { v6: false, joins: vec![mac4(group(4)?)], leaves: vec![] },
        0x17 => Class::Report { v6: false, joins: vec![], leaves: vec![mac4(group(4)?)] },
        0x22 => v3_report(m, false)?,
        _ => Class::Flood,
    })
}

/// An IGMPv3 (`v6` false) or MLDv2 report: its records, each a group address with a
/// source list. A record asking for no source at all (INCLUDE {}) is a leave, the other
/// record types a join (source lists are not tracked); BLOCK_OLD changes nothing.
fn v3_report(m: &[u8], v6: bool) -> Option<Class> {
    let (addr_len, to_mac): (usize, fn(&[u8]) -> Mac) =
        if v6 { (16, mac6) } else { (4, |g| mac4([g[0], g[1], g[2], g[3]])) };
    let n = u16::from_be_bytes([*m.get(6)?, *m.get(7)?]) as usize;
    let (mut joins, mut leaves) = (Vec::new(), Vec::new());
    let mut at = 8;
    for _ in 0..n {
        let (rtype, aux, nsrc) = (
            *m.get(at)?,
            *m.get(at + 1)? as usize,
            u16::from_be_bytes([*m.get(at + 2)?, *m.get(at + 3)?]) as usize,
        );
        let g = to_mac(m.get(at + 4..at + 4 + addr_len)?);
        match rtype {
            1 | 3 if nsrc == 0 => leaves.push(g),
            1..=5 => joins.push(g),
            _ => {}
        }
        at += 4 + addr_len * (1 + nsrc) + 4 * aux;
    }
    Some(Class::Report { v6, joins, leaves })
}

fn classify6(ip: &[u8]) -> Class {
    if ip.len() < 40 || ip[0] >> 4 != 6 || ip[24] != 0xff {
        return Class::Other;
    }
    let dst = &ip[24..40];
    let mut next = ip[6];
    let mut at = 40;
    // Hop-by-hop and destination options come before MLD (with its router alert).
    while next == 0 || next == 60 {
        let (Some(&nh), Some(&len)) = (ip.get(at), ip.get(at + 1)) else { return Class::Flood };
        next = nh;
        at += (len as usize + 1) * 8;
    }
    if next == 58 {
        if let Some(c) = ip.get(at..).and_then(mld_class) {
            return c;
        }
    }
    if next == 103 {
        return Class::Router { v6: true };
    }
    let group = mac6(dst);
    if group == ALL_NODES_V6 {
        return Class::Flood;
    }
    Class::Data { v6: true, group }
}

/// MLD messages (other ICMPv6 to a group, such as neighbour solicitations, is data).
fn mld_class(m: &[u8]) -> Option<Class> {
    let group = |at: usize| m.get(at..at + 16).map(mac6);
    Some(match *m.first()? {
        130 => Class::Query { v6: true },
        131 => Class::Report { v6: true, joins: vec![group(8)?], leaves: vec![] },
        132 => Class::Report { v6: true, joins: vec![], leaves: vec![group(8)?] },
        143 => v3_report(m, true)?,
        _ => return None,
    })
}

/// Snooping state of one VLAN of a switch.
#[derive(Debug, Clone, Default)]
pub(crate) struct VlanSnoop {
    /// Until when a querier of each family (IPv4, IPv6) counts as present.
    querier_until: [u64; 2],
    /// Router ports (where queries arrive) and until when, per family.
    routers: FxHashMap<u32, [u64; 2]>,
    /// Group → member port → membership expiry.
    groups: FxHashMap<Mac, FxHashMap<u32, u64>>,
    /// (port, group) memberships in `groups`, and the most it may hold: a node joining
    /// group after group must not grow the table (and the controller) without end.
    memberships: usize,
    max_memberships: usize,
    /// Joins not recorded because the table was full, since the start. While a join has
    /// been missed (until a sweep finds room again) group data floods: a member may be
    /// missing from the table.
    refused: u64,
    overflow: bool,
    /// Started over (the memberships are not known): group data floods until
    /// [`QUERY_RESPONSE_NS`] after the next query sent or heard, and until `relearn_until`.
    relearn: bool,
    relearn_until: u64,
}

/// What snooping decided for a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Flood as any group frame (the list is left as it was).
    Flood,
    /// Only the ports now in the list (maybe none).
    Ports,
}

impl VlanSnoop {
    pub(crate) fn new(max_memberships: usize) -> VlanSnoop {
        VlanSnoop { max_memberships, ..Default::default() }
    }

    fn join(&mut self, group: Mac, port: u32, until: u64) {
        let full = self.memberships >= self.max_memberships;
        let members = self.groups.entry(group).or_default();
        if let Some(u) = members.get_mut(&port) {
            *u = until;
        } else if full {
            if members.is_empty() {
                self.groups.remove(&group);
            }
            self.refused += 1;
            self.overflow = true;
        } else {
            members.insert(port, until);
            self.memberships += 1;
        }
    }

    fn active(&self, own_querier: bool, v6: bool, now: u64) -> bool {
        (own_querier || self.other_querier(v6, now)) && !self.relearn && now >= self.relearn_until
    }

    /// Forget the memberships, which may be stale (see `Switch::restart`): flood group
    /// data until the hosts have answered a query.
    pub(crate) fn restart(&mut self) {
        self.groups.clear();
        self.recount();
        self.relearn = true;
    }

    /// A general query goes out or is heard at `now`: a switch that started over
    /// knows the memberships once the hosts have had time to answer it.
    pub(crate) fn queried(&mut self, now: u64) {
        if std::mem::take(&mut self.relearn) {
            self.relearn_until = now + QUERY_RESPONSE_NS;
        }
    }

    /// Take in a group frame from `in_port`. `out` holds the ports a flood would reach;
    /// when the decision is [`Decision::Ports`] it holds the ports the frame goes to
    /// instead. `up(p)` says whether port `p` is up.
    pub(crate) fn handle(
        &mut self,
        now: u64,
        own_querier: bool,
        in_port: u32,
        class: &Class,
        up: impl Fn(u32) -> bool,
        out: &mut Vec<u32>,
    ) -> Decision {
        match class {
            Class::Other | Class::Flood => Decision::Flood,
            Class::Query { v6 } | Class::Router { v6 } => {
                if matches!(class, Class::Query { .. }) {
                    self.querier_until[*v6 as usize] = now + OTHER_QUERIER_NS;
                    self.queried(now);
                }
                self.routers.entry(in_port).or_default()[*v6 as usize] = now + OTHER_QUERIER_NS;
                Decision::Flood
            }
            Class::Report { v6, joins, leaves } => {
                for g in joins {
                    self.join(*g, in_port, now + MEMBERSHIP_NS);
                }
                for g in leaves {
                    if let Some(m) = self.groups.get_mut(g) {
                        self.memberships -= m.remove(&in_port).is_some() as usize;
                        if m.is_empty() {
                            self.groups.remove(g);
                        }
                    }
                }
                if !self.active(own_querier, *v6, now) {
                    return Decision::Flood;
                }
                out.clear();
                self.push_routers(now, *v6, in_port, &up, out);
                Decision::Ports
            }
            Class::Data { v6, group } => {
                if !self.active(own_querier, *v6, now) || self.overflow {
                    return Decision::Flood;
                }
                out.clear();
                if let Some(m) = self.groups.get(group) {
                    out.extend(
                        m.iter()
                            .filter(|&(&p, &until)| until > now && p != in_port && up(p))
                            .map(|(&p, _)| p),
                    );
                }
                self.push_routers(now, *v6, in_port, &up, out);
                // In port order (a member may also be a router port).
                out.sort_unstable();
                out.dedup();
                Decision::Ports
            }
        }
    }

    fn push_routers(
        &self,
        now: u64,
        v6: bool,
        in_port: u32,
        up: &impl Fn(u32) -> bool,
        out: &mut Vec<u32>,
    ) {
        out.extend(
            self.routers
                .iter()
                .filter(|&(&p, until)| until[v6 as usize] > now && p != in_port && up(p))
                .map(|(&p, _)| p),
        );
    }

    /// A port went down: it is no longer a member or a router port.
    pub(crate) fn forget_port(&mut self, port: u32) {
        self.routers.remove(&port);
        self.groups.retain(|_, m| {
            m.remove(&port);
            !m.is_empty()
        });
        self.recount();
    }

    /// Drop expired memberships and router ports.
    pub(crate) fn sweep(&mut self, now: u64) {
        self.groups.retain(|_, m| {
            m.retain(|_, until| *until > now);
            !m.is_empty()
        });
        self.routers.retain(|_, until| until.iter().any(|&u| u > now));
        self.recount();
    }

    /// Count the memberships again after a bulk removal; room again ends an overflow.
    fn recount(&mut self) {
        self.memberships = self.groups.values().map(FxHashMap::len).sum();
        self.overflow &= self.memberships >= self.max_memberships;
    }

    /// Joins not recorded because the table was full.
    pub(crate) fn refused(&self) -> u64 {
        self.refused
    }

    /// Whether another querier of the family was heard lately (the switch's own then
    /// stands down, as a querier that loses the election does).
    pub(crate) fn other_querier(&self, v6: bool, now: u64) -> bool {
        self.querier_until[v6 as usize] > now
    }

    /// Groups with at least one member.
    pub(crate) fn group_count(&self) -> usize {
        self.groups.len()
    }
}

/// The switch's own MAC address as a querier (locally administered, "vemu").
pub const QUERIER_MAC: [u8; 6] = [0x02, 0x76, 0x65, 0x6d, 0x75, 0x00];
/// Its IPv6 link-local address (MLD queries must come from one), from that MAC.
pub const QUERIER_LINK_LOCAL: [u8; 16] =
    [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x76, 0x65, 0xff, 0xfe, 0x6d, 0x75, 0x00];

fn checksum(chunks: &[&[u8]]) -> u16 {
    let mut sum: u32 = 0;
    for c in chunks {
        for pair in c.chunks(2) {
            sum += u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]) as u32;
        }
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An IGMPv3 general query (to 224.0.0.1, from 0.0.0.0 as snooping queriers do), as an
/// Ethernet frame.
pub fn igmp_general_query() -> Vec<u8> {
    let mut f = vec![0x01, 0x00, 0x5e, 0x00, 0x00, 0x01];
    f.extend_from_slice(&QUERIER_MAC);
    f.extend_from_slice(&[0x08, 0x00]);
    // IPv4 with the router alert option: 24 bytes of header, 12 of IGMP.
    let mut ip =
        vec![0x46, 0xc0, 0, 36, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 224, 0, 0, 1, 0x94, 0x04, 0, 0];
    let c = checksum(&[&ip]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    // Query, 10 s to answer, group 0, QRV 2, QQIC 125 s, no sources.
    let mut igmp = vec![0x11, 100, 0, 0, 0, 0, 0, 0, 0x02, 125, 0, 0];
    let c = checksum(&[&igmp]);
    igmp[2..4].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&igmp);
    f
}

/// An MLDv2 general query (to ff02::1, from the querier's link-local address), as an
/// Ethernet frame.
pub fn mld_general_query() -> Vec<u8> {
    let mut f = vec![0x33, 0x33, 0x00, 0x00, 0x00, 0x01];
    f.extend_from_slice(&QUERIER_MAC);
    f.extend_from_slice(&[0x86, 0xdd]);
    let dst: [u8; 16] = [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    // 8 bytes of hop-by-hop options (router alert, padding), 28 of MLD.
    let mut ip = vec![0x60, 0, 0, 0, 0, 36, 0, 1];
    ip.extend_from_slice(&QUERIER_LINK_LOCAL);
    ip.extend_from_slice(&dst);
    let hbh = [58, 0, 0x05, 0x02, 0, 0, 0x01, 0x00];
    // Query, 10,000 ms to answer, group ::, QRV 2, QQIC 125 s, no sources.
    let mut mld = vec![130, 0, 0, 0, 0x27, 0x10, 0, 0];
    mld.extend_from_slice(&[0; 16]);
    mld.extend_from_slice(&[0x02, 125, 0, 0]);
    let pseudo_len = (mld.len() as u32).to_be_bytes();
    let c = checksum(&[&QUERIER_LINK_LOCAL, &dst, &pseudo_len, &[0, 0, 0, 58], &mld]);
    mld[2..4].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&hbh);
    f.extend_from_slice(&mld);
    f
}
