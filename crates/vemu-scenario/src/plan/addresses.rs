//! Automatic addresses: each link's and segment's subnet from the scenario's pools, and
//! each interface's address in it.

use super::*;

/// Hands out subnets of a pool in address order, each aligned to its size, skipping
/// ones that overlap explicit addresses.
pub(super) struct Pool {
    pub(super) pool: Option<IpNet>,
    /// Offset of the next free address from the pool's start.
    pub(super) cursor: u128,
    taken: Vec<IpNet>,
}

pub(super) fn bits(n: &IpNet) -> u8 {
    if n.addr().is_ipv4() {
        32
    } else {
        128
    }
}

pub(super) fn addr_u128(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(a) => u32::from(a) as u128,
        IpAddr::V6(a) => u128::from(a),
    }
}

pub(super) fn net_at(v6: bool, base: u128, prefix: u8) -> IpNet {
    if v6 {
        IpNet::V6(Ipv6Net::new(Ipv6Addr::from(base), prefix).unwrap())
    } else {
        IpNet::V4(Ipv4Net::new(Ipv4Addr::from(base as u32), prefix).unwrap())
    }
}

impl Pool {
    pub(super) fn new(pool: Option<IpNet>, taken: Vec<IpNet>) -> Pool {
        Pool { pool, cursor: 0, taken }
    }

    /// The next free subnet with this prefix length.
    pub(super) fn next(&mut self, prefix: u8) -> Option<IpNet> {
        let pool = self.pool?;
        let b = bits(&pool);
        if prefix < pool.prefix_len() || prefix > b {
            return None;
        }
        let size = 1u128.checked_shl((b - prefix) as u32)?;
        let pool_size = 1u128.checked_shl((b - pool.prefix_len()) as u32).unwrap_or(u128::MAX);
        let base = addr_u128(pool.network());
        loop {
            self.cursor = self.cursor.checked_add(size - 1)? / size * size;
            if self.cursor.checked_add(size)? > pool_size {
                return None;
            }
            let net = net_at(b == 128, base + self.cursor, prefix);
            self.cursor += size;
            if !self.taken.iter().any(|t| t.contains(&net.network()) || net.contains(&t.network()))
            {
                return Some(net);
            }
        }
    }
}

/// Two host addresses in `net` for the two ends of a link.
pub(super) fn two_hosts(net: IpNet) -> (IpNet, IpNet) {
    let p = net.prefix_len();
    let base = addr_u128(net.network());
    // A /31 or /127 is a link's pair of addresses, both used (RFC 3021, RFC 6164).
    let first = if p == 31 || p == 127 { base } else { base + 1 };
    let v6 = net.addr().is_ipv6();
    let mk = |a: u128| net_at(v6, a, p);
    (mk(first), mk(first + 1))
}

/// Addresses for the two ends of a link: explicit ones, or a fresh subnet per family.
pub(super) fn link_addresses(
    l: &LinkDef,
    v4: &mut Pool,
    v6: &mut Pool,
    s: &Scenario,
    errors: &mut Vec<Error>,
) -> [Vec<IpNet>; 2] {
    let mut out = [l.ends[0].ips.clone(), l.ends[1].ips.clone()];
    for v6fam in [false, true] {
        let has = |k: usize| out[k].iter().any(|a| a.addr().is_ipv6() == v6fam);
        let fam = if v6fam { "IPv6" } else { "IPv4" };
        if l.ends.iter().any(|e| e.unaddressed) {
            // A bridge's port: the other end keeps what it was given, nothing is handed out.
            continue;
        }
        match (has(0), has(1)) {
            (false, false) => {
                let net = if v6fam {
                    v6.next(s.addressing.ipv6_prefix)
                } else {
                    v4.next(s.addressing.ipv4_prefix)
                };
                let enabled =
                    if v6fam { s.addressing.ipv6.is_some() } else { s.addressing.ipv4.is_some() };
                match net {
                    Some(net) => {
                        let (a, b) = two_hosts(net);
                        out[0].push(a);
                        out[1].push(b);
                    }
                    None if enabled => err(
                        errors,
                        s.addressing_mark,
                        "addressing",
                        format!("the {fam} pool has no subnet left for {}", l.field),
                    ),
                    None => {}
                }
            }
            (true, true) => {
                let a = out[0].iter().find(|a| a.addr().is_ipv6() == v6fam).unwrap();
                let b = out[1].iter().find(|a| a.addr().is_ipv6() == v6fam).unwrap();
                if !a.contains(&b.addr()) || !b.contains(&a.addr()) || a.addr() == b.addr() {
                    err(errors, l.mark, &l.field, format!("the ends' {fam} addresses {a} and {b} must be different addresses in one subnet"));
                }
            }
            (x, _) => {
                let (with, without) =
                    if x { (&l.ends[0], &l.ends[1]) } else { (&l.ends[1], &l.ends[0]) };
                err(
                    errors,
                    without.mark,
                    &without.field,
                    format!(
                        "{} has an {fam} address but {} has none: give both ends an address, or neither",
                        s.nodes[with.node].name, s.nodes[without.node].name
                    ),
                );
            }
        }
    }
    out
}

/// Addresses of every member of a segment: one subnet per family (given, taken from the
/// members' explicit addresses, or from the pool), explicit addresses kept, the others
/// handed out in member order.
pub(super) fn segment_addresses(
    g: &SegmentDef,
    v4: &mut Pool,
    v6: &mut Pool,
    s: &Scenario,
    errors: &mut Vec<Error>,
) -> Vec<Vec<IpNet>> {
    let mut out: Vec<Vec<IpNet>> = g.members.iter().map(|m| m.end.ips.clone()).collect();
    for (fi, v6fam) in [false, true].into_iter().enumerate() {
        let fam = if v6fam { "IPv6" } else { "IPv4" };
        let key = if v6fam { "ipv6" } else { "ipv4" };
        let first_explicit = g
            .members
            .iter()
            .flat_map(|m| m.end.ips.iter())
            .find(|a| a.addr().is_ipv6() == v6fam)
            .map(|a| a.trunc());
        let net = match g.subnets[fi] {
            SubnetChoice::Off => {
                if let Some(m) =
                    g.members.iter().find(|m| m.end.ips.iter().any(|a| a.addr().is_ipv6() == v6fam))
                {
                    err(
                        errors,
                        m.end.mark,
                        &m.end.field,
                        format!("has an {fam} address but the segment has '{key}: none'"),
                    );
                }
                continue;
            }
            SubnetChoice::Given(n) => n,
            SubnetChoice::Auto => match first_explicit {
                Some(n) => n,
                None => {
                    // Room for every member plus the network and broadcast addresses;
                    // at least a /24 (IPv4) or the pool's per-link prefix (IPv6).
                    let need =
                        (g.members.len() as u128 + 2).next_power_of_two().trailing_zeros() as u8;
                    let (pool, enabled, prefix) = if v6fam {
                        (
                            &mut *v6,
                            s.addressing.ipv6.is_some(),
                            s.addressing.ipv6_prefix.min(128 - need),
                        )
                    } else {
                        (&mut *v4, s.addressing.ipv4.is_some(), 24u8.min(32 - need))
                    };
                    match pool.next(prefix) {
                        Some(n) => n,
                        None if enabled => {
                            err(
                                errors,
                                s.addressing_mark,
                                "addressing",
                                format!("the {fam} pool has no /{prefix} left for {}", g.field),
                            );
                            continue;
                        }
                        None => continue,
                    }
                }
            },
        };
        let mut taken: HashSet<u128> = HashSet::new();
        for (m, addrs) in g.members.iter().zip(&out) {
            for a in addrs.iter().filter(|a| a.addr().is_ipv6() == v6fam) {
                if a.trunc() != net {
                    err(
                        errors,
                        m.end.mark,
                        &m.end.field,
                        format!("address {a} is not in the segment's subnet {net}"),
                    );
                } else if !taken.insert(addr_u128(a.addr())) {
                    err(
                        errors,
                        m.end.mark,
                        &m.end.field,
                        format!("address {} is used twice on the segment", a.addr()),
                    );
                }
            }
        }
        let base = addr_u128(net.network());
        let size = 1u128.checked_shl((bits(&net) - net.prefix_len()) as u32).unwrap_or(u128::MAX);
        let mut next = 1u128;
        for (m, addrs) in g.members.iter().zip(out.iter_mut()) {
            if m.end.unaddressed || addrs.iter().any(|a| a.addr().is_ipv6() == v6fam) {
                continue;
            }
            while taken.contains(&(base + next)) {
                next += 1;
            }
            // IPv4 keeps the last address for broadcast.
            if next >= size - if v6fam { 0 } else { 1 } {
                err(
                    errors,
                    m.end.mark,
                    &m.end.field,
                    format!("the segment's subnet {net} has no {fam} address left"),
                );
                break;
            }
            addrs.push(net_at(v6fam, base + next, net.prefix_len()));
            next += 1;
        }
    }
    out
}

/// Loopbacks: explicit ones, else the next address of the loopback pools (not among
/// `explicit`, the addresses the scenario gives).
pub(super) fn loopbacks(
    s: &Scenario,
    nodes: &mut [NodePlan],
    explicit: Vec<IpNet>,
    errors: &mut Vec<Error>,
) {
    // Loopbacks: explicit ones, else the next address of the loopback pools.
    // They start at the pool's first host address (10.255.0.1, not 10.255.0.0).
    let mut lo4 = Pool {
        cursor: 1,
        ..Pool::new(s.addressing.loopback_ipv4.map(IpNet::V4), explicit.clone())
    };
    let mut lo6 =
        Pool { cursor: 1, ..Pool::new(s.addressing.loopback_ipv6.map(IpNet::V6), explicit) };
    // (Not on the host: vemu does not change the machine's own loopback.)
    for n in nodes.iter_mut().filter(|n| n.kind.is_made()) {
        for (pool, v6fam, len) in [(&mut lo4, false, 32), (&mut lo6, true, 128)] {
            if pool.pool.is_some() && !n.loopback.iter().any(|l| l.addr().is_ipv6() == v6fam) {
                match pool.next(len) {
                    Some(net) => n.loopback.push(net),
                    None => err(
                        errors,
                        s.addressing_mark,
                        "addressing",
                        format!("the loopback pool has no address left for node '{}'", n.name),
                    ),
                }
            }
        }
    }
}
