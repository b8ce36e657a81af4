//! What a frame is, which class a list of rules puts it in, and DSCP re-marking.
//!
//! Frames are Ethernet frames as on the wire (an 802.1Q tag allowed). Anything that does
//! not parse is simply "not IP": it matches rules that ask nothing of IP.

use std::net::IpAddr;

use ipnet::IpNet;

const ETH_P_8021Q: u16 = 0x8100;
const ETH_P_IP: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86dd;

/// The fields a classifier looks at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Packet {
    /// 802.1Q priority code point, when tagged.
    pub pcp: Option<u8>,
    /// Where the IP header starts, when the frame is IPv4 or IPv6.
    pub ip_offset: Option<usize>,
    pub dscp: Option<u8>,
    /// IP protocol / IPv6 next header (of the fixed header).
    pub proto: Option<u8>,
    pub src: Option<IpAddr>,
    pub dst: Option<IpAddr>,
    /// TCP, UDP or SCTP ports (first fragment only).
    pub sport: Option<u16>,
    pub dport: Option<u16>,
    /// ICMP or ICMPv6 type (first fragment only).
    pub icmp_type: Option<u8>,
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// Read what a classifier needs from an Ethernet frame; never fails (fields it cannot
/// read stay `None`).
pub fn parse(frame: &[u8]) -> Packet {
    let mut p = Packet::default();
    let Some(mut ethertype) = be16(frame, 12) else { return p };
    let mut off = 14;
    if ethertype == ETH_P_8021Q {
        let Some(tci) = be16(frame, 14) else { return p };
        p.pcp = Some((tci >> 13) as u8);
        let Some(t) = be16(frame, 16) else { return p };
        ethertype = t;
        off = 18;
    }
    let ip = &frame[off.min(frame.len())..];
    let (l4, first_fragment) = match ethertype {
        ETH_P_IP if ip.len() >= 20 && ip[0] >> 4 == 4 => {
            let ihl = (ip[0] & 0x0f) as usize * 4;
            p.dscp = Some(ip[1] >> 2);
            p.proto = Some(ip[9]);
            p.src = Some(IpAddr::from([ip[12], ip[13], ip[14], ip[15]]));
            p.dst = Some(IpAddr::from([ip[16], ip[17], ip[18], ip[19]]));
            let frag_offset = be16(ip, 6).unwrap_or(0) & 0x1fff;
            (ihl, frag_offset == 0 && ihl >= 20)
        }
        ETH_P_IPV6 if ip.len() >= 40 && ip[0] >> 4 == 6 => {
            p.dscp = Some(((ip[0] & 0x0f) << 2) | (ip[1] >> 6));
            p.proto = Some(ip[6]);
            let a: [u8; 16] = ip[8..24].try_into().expect("16 bytes");
            let b: [u8; 16] = ip[24..40].try_into().expect("16 bytes");
            p.src = Some(IpAddr::from(a));
            p.dst = Some(IpAddr::from(b));
            (40, true)
        }
        _ => return p,
    };
    p.ip_offset = Some(off);
    if first_fragment && matches!(p.proto, Some(6 | 17 | 132)) {
        p.sport = be16(ip, l4);
        p.dport = be16(ip, l4 + 2);
    }
    if first_fragment && matches!(p.proto, Some(1 | 58)) {
        p.icmp_type = ip.get(l4).copied();
    }
    p
}

/// One rule: every field given must match (an empty rule matches everything).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Match {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dscp: Vec<u8>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pcp: Vec<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proto: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<IpNet>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<IpNet>,
    /// Inclusive port ranges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sport: Option<(u16, u16)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dport: Option<(u16, u16)>,
    /// ICMP (or ICMPv6) type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icmp_type: Option<u8>,
}

impl Match {
    pub fn matches(&self, p: &Packet) -> bool {
        let in_list =
            |list: &[u8], v: Option<u8>| list.is_empty() || v.is_some_and(|v| list.contains(&v));
        let in_net = |net: &Option<IpNet>, a: Option<IpAddr>| {
            net.as_ref().is_none_or(|n| a.is_some_and(|a| n.contains(&a)))
        };
        let in_range = |r: &Option<(u16, u16)>, v: Option<u16>| {
            r.is_none_or(|(lo, hi)| v.is_some_and(|v| (lo..=hi).contains(&v)))
        };
        in_list(&self.dscp, p.dscp)
            && in_list(&self.pcp, p.pcp)
            && self.proto.is_none_or(|x| p.proto == Some(x))
            && in_net(&self.src, p.src)
            && in_net(&self.dst, p.dst)
            && in_range(&self.sport, p.sport)
            && in_range(&self.dport, p.dport)
            && self.icmp_type.is_none_or(|t| p.icmp_type == Some(t))
    }
}

/// Rules in order; the first that matches names the class, else `default`.
#[derive(Debug, Clone, Default)]
pub struct Classifier {
    pub rules: Vec<(Match, usize)>,
    pub default: usize,
}

impl Classifier {
    pub fn class_of(&self, p: &Packet) -> usize {
        self.rules.iter().find(|(m, _)| m.matches(p)).map_or(self.default, |(_, c)| *c)
    }
}

/// Set the DSCP of an IP frame parsed as `p` (the ECN bits stay; an IPv4 header
/// checksum is updated incrementally, RFC 1624). Returns false for frames that are not IP.
pub fn set_dscp(frame: &mut [u8], p: &Packet, dscp: u8) -> bool {
    let (Some(off), Some(_)) = (p.ip_offset, p.dscp) else { return false };
    let dscp = dscp & 0x3f;
    let ip = &mut frame[off..];
    if ip[0] >> 4 == 4 {
        let old = u16::from_be_bytes([ip[0], ip[1]]);
        ip[1] = (dscp << 2) | (ip[1] & 0x03);
        let new = u16::from_be_bytes([ip[0], ip[1]]);
        // HC' = ~(~HC + ~m + m')
        let hc = u16::from_be_bytes([ip[10], ip[11]]);
        let mut sum = (!hc as u32) + (!old as u32) + new as u32;
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    } else {
        ip[0] = (ip[0] & 0xf0) | (dscp >> 2);
        ip[1] = ((dscp & 0x03) << 6) | (ip[1] & 0x3f);
    }
    true
}

/// DiffServ code points by name: EF, AF11…AF43, CS0…CS7, BE (RFC 2474, 2597, 3246).
pub fn dscp_named(name: &str) -> Option<u8> {
    let n = name.to_ascii_uppercase();
    match n.as_str() {
        "EF" => Some(46),
        "BE" | "DF" => Some(0),
        _ if n.len() == 4 && n.starts_with("AF") => {
            let (c, d) = (n.as_bytes()[2].wrapping_sub(b'0'), n.as_bytes()[3].wrapping_sub(b'0'));
            ((1..=4).contains(&c) && (1..=3).contains(&d)).then(|| 8 * c + 2 * d)
        }
        _ if n.len() == 3 && n.starts_with("CS") => {
            n.as_bytes()[2].wrapping_sub(b'0').checked_mul(8).filter(|v| *v <= 56)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 UDP frame with a valid header checksum.
    fn ipv4_udp(
        dscp: u8,
        src: [u8; 4],
        dst: [u8; 4],
        sport: u16,
        dport: u16,
        vlan: Option<(u8, u16)>,
    ) -> Vec<u8> {
        let mut f = vec![0xaa; 12];
        if let Some((pcp, vid)) = vlan {
            f.extend_from_slice(&ETH_P_8021Q.to_be_bytes());
            f.extend_from_slice(&(((pcp as u16) << 13) | vid).to_be_bytes());
        }
        f.extend_from_slice(&ETH_P_IP.to_be_bytes());
        let mut ip = vec![0x45, (dscp << 2) | 1, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0];
        ip.extend_from_slice(&src);
        ip.extend_from_slice(&dst);
        let ck = checksum(&ip);
        ip[10..12].copy_from_slice(&ck.to_be_bytes());
        ip.extend_from_slice(&sport.to_be_bytes());
        ip.extend_from_slice(&dport.to_be_bytes());
        ip.extend_from_slice(&[0, 8, 0, 0]);
        f.extend_from_slice(&ip);
        f
    }

    /// The Internet checksum of a header (its checksum field zero), computed afresh.
    fn checksum(h: &[u8]) -> u16 {
        let mut s: u32 =
            h.chunks(2).map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32).sum();
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }

    #[test]
    fn parses_ipv4_ipv6_and_vlan_tags() {
        let p = parse(&ipv4_udp(46, [10, 0, 0, 1], [10, 0, 0, 2], 5000, 53, Some((5, 7))));
        assert_eq!(
            (p.pcp, p.dscp, p.proto, p.sport, p.dport),
            (Some(5), Some(46), Some(17), Some(5000), Some(53))
        );
        assert_eq!(p.dst, Some("10.0.0.2".parse().unwrap()));
        let mut v6 = vec![0u8; 12];
        v6.extend_from_slice(&ETH_P_IPV6.to_be_bytes());
        let mut ip = vec![0x6b, 0x80, 0, 0, 0, 8, 6, 64]; // traffic class 0xb8: DSCP 46
        ip.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        ip.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        ip.extend_from_slice(&[0x1f, 0x90, 0x00, 0x50, 0, 0, 0, 0]);
        v6.extend_from_slice(&ip);
        let p = parse(&v6);
        assert_eq!((p.dscp, p.proto, p.sport, p.dport), (Some(46), Some(6), Some(8080), Some(80)));
        // Anything short or strange is just "not IP".
        for n in 0..40 {
            let p = parse(&v6[..n]);
            assert!(p.dscp.is_none() || n >= 54, "{n}: {p:?}");
        }
        assert_eq!(parse(&[0u8; 60]).dscp, None);
    }

    #[test]
    fn first_matching_rule_names_the_class() {
        let ef = Match { dscp: vec![46], ..Default::default() };
        let dns = Match { proto: Some(17), dport: Some((53, 53)), ..Default::default() };
        let net = Match { src: Some("10.0.0.0/30".parse().unwrap()), ..Default::default() };
        let c = Classifier { rules: vec![(ef, 0), (dns, 1), (net, 2)], default: 3 };
        assert_eq!(c.class_of(&parse(&ipv4_udp(46, [10, 0, 0, 1], [10, 0, 0, 2], 1, 53, None))), 0);
        assert_eq!(c.class_of(&parse(&ipv4_udp(0, [10, 0, 0, 1], [10, 0, 0, 2], 1, 53, None))), 1);
        assert_eq!(c.class_of(&parse(&ipv4_udp(0, [10, 0, 0, 1], [10, 0, 0, 2], 1, 54, None))), 2);
        assert_eq!(c.class_of(&parse(&ipv4_udp(0, [10, 0, 0, 9], [10, 0, 0, 2], 1, 54, None))), 3);
        assert_eq!(c.class_of(&parse(&[0u8; 64])), 3, "not IP: only rules that ask nothing of IP");
    }

    #[test]
    fn remarking_keeps_ecn_and_a_valid_checksum() {
        let mut f = ipv4_udp(0, [192, 168, 1, 1], [192, 168, 1, 2], 9, 9, Some((0, 1)));
        for dscp in [46, 10, 63, 0, 26] {
            let p = parse(&f);
            assert!(set_dscp(&mut f, &p, dscp));
            let p = parse(&f);
            assert_eq!(p.dscp, Some(dscp));
            let ip = &f[18..38];
            assert_eq!(ip[1] & 3, 1, "ECN kept");
            let mut zeroed = ip.to_vec();
            zeroed[10] = 0;
            zeroed[11] = 0;
            assert_eq!(
                u16::from_be_bytes([ip[10], ip[11]]),
                checksum(&zeroed),
                "checksum after {dscp}"
            );
        }
        assert!(!set_dscp(&mut [0u8; 64], &parse(&[0u8; 64]), 46));
    }

    #[test]
    fn code_points_by_name() {
        assert_eq!(dscp_named("ef"), Some(46));
        assert_eq!(dscp_named("AF11"), Some(10));
        assert_eq!(dscp_named("AF43"), Some(38));
        assert_eq!(dscp_named("CS7"), Some(56));
        assert_eq!(dscp_named("be"), Some(0));
        // (Found by fuzzing: "AF4." once overflowed computing a value it then threw away.)
        for bad in ["AF44", "AF50", "CS8", "XX", "", "AF4.", "AF\u{ff}1", "CS\u{7f}", "AF4\u{0}"] {
            assert_eq!(dscp_named(bad), None, "{bad}");
        }
    }
}
