//! `addressing:`: the pools subnets and loopbacks come from.

use super::*;

pub(crate) fn addressing(p: &mut P, node: &Node, field: &str) -> Addressing {
    let mut a = Addressing::default();
    for (k, _, v) in p.map(
        node,
        field,
        &["ipv4", "ipv4_prefix", "ipv6", "ipv6_prefix", "loopback_ipv4", "loopback_ipv6"],
    ) {
        let f = join(field, k);
        let off = matches!(v.as_str(), Some("none") | Some("false") | Some("off"));
        match k {
            "ipv4" if off => a.ipv4 = None,
            "ipv6" if off => {
                a.ipv6 = None;
                a.ipv6_link_local = false;
            }
            "ipv6" if v.as_str() == Some("link-local") => a.ipv6 = None,
            "ipv4" => {
                a.ipv4 = p.scalar(v, &f, |s| {
                    s.parse::<Ipv4Net>().map(|n| n.trunc()).map_err(|_| {
                        format!("'{s}' is not an IPv4 prefix like 10.0.0.0/16 (or 'none')")
                    })
                })
            }
            "ipv6" => {
                a.ipv6 = p.scalar(v, &f, |s| {
                    s.parse::<Ipv6Net>().map(|n| n.trunc()).map_err(|_| {
                        format!(
                        "'{s}' is not an IPv6 prefix like fd00::/48 (or 'link-local', or 'none')"
                    )
                    })
                })
            }
            "loopback_ipv4" if off => a.loopback_ipv4 = None,
            "loopback_ipv6" if off => a.loopback_ipv6 = None,
            "loopback_ipv4" => {
                a.loopback_ipv4 = p.scalar(v, &f, |s| {
                    s.parse::<Ipv4Net>().map(|n| n.trunc()).map_err(|_| {
                        format!("'{s}' is not an IPv4 prefix like 10.255.0.0/16 (or 'none')")
                    })
                })
            }
            "loopback_ipv6" => {
                a.loopback_ipv6 = p.scalar(v, &f, |s| {
                    s.parse::<Ipv6Net>().map(|n| n.trunc()).map_err(|_| {
                        format!("'{s}' is not an IPv6 prefix like fd00:ff::/64 (or 'none')")
                    })
                })
            }
            "ipv4_prefix" => {
                if let Some(n) =
                    p.scalar(v, &f, |s| match s.trim_start_matches('/').parse::<u8>() {
                        Ok(n @ 8..=31) => Ok(n),
                        _ => Err(format!("expected a prefix length from 8 to 31 (31: both addresses of a link's pair, RFC 3021), got '{s}'")),
                    })
                {
                    a.ipv4_prefix = n;
                }
            }
            "ipv6_prefix" => {
                if let Some(n) =
                    p.scalar(v, &f, |s| match s.trim_start_matches('/').parse::<u8>() {
                        Ok(n @ 16..=127) => Ok(n),
                        _ => Err(format!("expected a prefix length from 16 to 127 (127: both addresses of a link's pair, RFC 6164), got '{s}'")),
                    })
                {
                    a.ipv6_prefix = n;
                }
            }
            _ => unreachable!(),
        }
    }
    a
}

/// `mgmt:` — `on` (172.20.20.0/24, containerlab's), `off`, or `{ipv4: PREFIX|none, ipv6:
/// PREFIX|none}`: the management network's subnets, each with room for every node.
pub(crate) fn mgmt(p: &mut P, node: &Node) -> Option<crate::Mgmt> {
    let default_v4: Ipv4Net = "172.20.20.0/24".parse().unwrap();
    match node.as_str() {
        Some("on") | Some("true") => {
            return Some(crate::Mgmt { ipv4: Some(default_v4), ipv6: None, nat: false });
        }
        Some("off") | Some("false") | Some("none") => return None,
        Some(s) => {
            p.err(
                node.mark,
                "mgmt",
                format!("expected on, off or {{ipv4: PREFIX, ipv6: PREFIX}}, got '{s}'"),
            );
            return None;
        }
        None => {}
    }
    let mut m = crate::Mgmt { ipv4: Some(default_v4), ipv6: None, nat: false };
    for (k, _, v) in p.map(node, "mgmt", &["ipv4", "ipv6", "nat"]) {
        let f = join("mgmt", k);
        let off = matches!(v.as_str(), Some("none") | Some("off"));
        match k {
            "nat" => m.nat = p.boolean(v, &f).unwrap_or(false),
            "ipv4" if off => m.ipv4 = None,
            "ipv6" if off => m.ipv6 = None,
            "ipv4" => {
                m.ipv4 = p.scalar(v, &f, |s| {
                    s.parse::<Ipv4Net>().map(|n| n.trunc()).map_err(|_| {
                        format!("'{s}' is not an IPv4 prefix like 172.20.20.0/24 (or 'none')")
                    })
                })
            }
            "ipv6" => {
                m.ipv6 = p.scalar(v, &f, |s| {
                    s.parse::<Ipv6Net>().map(|n| n.trunc()).map_err(|_| {
                        format!("'{s}' is not an IPv6 prefix like fd00:20::/64 (or 'none')")
                    })
                })
            }
            _ => unreachable!(),
        }
    }
    if m.ipv4.is_none() && m.ipv6.is_none() {
        p.err(
            node.mark,
            "mgmt",
            "a management network needs an IPv4 or an IPv6 subnet (or mgmt: off)",
        );
        return None;
    }
    Some(m)
}
