//! A LAN or wireless segment and its members.

use super::*;

pub(crate) fn subnet_choice(p: &mut P, node: &Node, field: &str, v6: bool) -> SubnetChoice {
    let fam = if v6 { "IPv6" } else { "IPv4" };
    p.scalar(node, field, |s| match s {
        "none" | "off" | "false" => Ok(SubnetChoice::Off),
        "auto" => Ok(SubnetChoice::Auto),
        _ => match s.parse::<IpNet>() {
            Ok(n) if n.addr().is_ipv6() == v6 => Ok(SubnetChoice::Given(n.trunc())),
            _ => Err(format!("'{s}' is not an {fam} prefix (or 'none')")),
        },
    })
    .unwrap_or(SubnetChoice::Auto)
}

/// A key only a wireless segment takes (its radio's or its 802.11 MAC's).
fn radio_key(k: &str) -> bool {
    wireless::WIRELESS_KEYS.contains(&k) || super::wifi::DCF_KEYS.contains(&k)
}

pub(crate) const SEGMENT_KEYS: &[&str] = &[
    "kind", "members", "capacity", "weight", "aging", "snooping", "ipv4", "ipv6", "egress",
    "ingress", "canvas",
];

impl SegmentDef {
    /// A segment of no members yet, its settings the defaults.
    pub(crate) fn new(name: &str, mark: Mark, snooping: vemu_switch::Snooping) -> SegmentDef {
        SegmentDef {
            wireless: None,
            name: name.to_string(),
            mark,
            field: format!("segments.{name}"),
            members: Vec::new(),
            capacity_bps: None,
            aging_ns: vemu_switch::DEFAULT_AGING_NS,
            snooping,
            weight: 1,
            subnets: [SubnetChoice::Auto, SubnetChoice::Auto],
            canvas: None,
        }
    }

    /// A key every kind of segment takes: `weight`, `canvas`, `ipv4`, `ipv6`.
    pub(crate) fn common_key(&mut self, p: &mut P, k: &str, v: &Node, f: &str) {
        match k {
            "weight" => self.weight = p.scalar(v, f, positive).unwrap_or(1),
            "canvas" => self.canvas = node::canvas(p, v, f),
            "ipv4" => self.subnets[0] = subnet_choice(p, v, f, false),
            _ => self.subnets[1] = subnet_choice(p, v, f, true),
        }
    }
}

pub(crate) fn segment(
    p: &mut P,
    name: &str,
    mark: Mark,
    node: &Node,
    names: &HashMap<String, usize>,
    base: Option<&Path>,
) -> SegmentDef {
    let field = format!("segments.{name}");
    if let Err(m) = valid_medium_name("segment", name) {
        p.err(mark, &field, m);
    }
    let mut allowed = SEGMENT_KEYS.to_vec();
    allowed.extend_from_slice(IMPAIRMENT_KEYS);
    allowed.extend_from_slice(wireless::WIRELESS_KEYS);
    allowed.extend_from_slice(super::wifi::DCF_KEYS);
    allowed.push("span");
    let entries = p.map(node, &field, &allowed);
    let kind = entries.iter().find(|e| e.0 == "kind").and_then(|(_, _, v)| {
        p.scalar(v, &join(&field, "kind"), |s| match s {
            "lan" | "wireless" | "hub" => Ok(s.to_string()),
            _ => Err(format!("unknown segment kind '{s}', expected 'lan', 'wireless' or 'hub'")),
        })
    });
    if kind.as_deref() == Some("hub") {
        return hub::hub(p, name, mark, &entries, names);
    }
    let is_wireless = kind.as_deref() == Some("wireless");
    for (k, kmark, _) in &entries {
        if *k == "span" {
            p.err(*kmark, &join(&field, k), "'span' applies to 'kind: hub' segments only");
            continue;
        }
        let (lan_only, radio_only) = (["capacity", "aging"].contains(k), radio_key(k));
        if (is_wireless && lan_only) || (!is_wireless && radio_only) {
            let other = if is_wireless { "lan" } else { "wireless" };
            p.err(
                *kmark,
                &join(&field, k),
                format!("'{k}' applies to 'kind: {other}' segments only"),
            );
        }
    }
    let none = ImpairmentsPatch::default();
    let base_dirs = directions(p, &entries, &field, [&none, &none], ["egress", "ingress"]);
    // The switch is the LAN's snooping querier unless told otherwise: the nodes' IPv6
    // start-up chatter (MLD reports) and neighbour discovery then reach only the nodes
    // concerned, not every port of a big LAN.
    let mut seg = SegmentDef::new(name, mark, vemu_switch::Snooping::Querier);
    let mut saw_members = false;
    let mut radio_entries = Vec::new();
    for (k, _, v) in &entries {
        let f = join(&field, k);
        match *k {
            "capacity" => seg.capacity_bps = p.scalar(v, &f, units::rate_bps),
            "aging" => seg.aging_ns = p.scalar(v, &f, units::duration_ns).unwrap_or(seg.aging_ns),
            "snooping" if is_wireless => {
                // A radio's group filter at each receiver: on, or off (every receiver in
                // range takes every frame). There is no switch to be a querier.
                seg.snooping = p
                    .scalar(v, &f, |s| match s {
                        "off" | "false" => Ok(vemu_switch::Snooping::Off),
                        "on" | "true" => Ok(vemu_switch::Snooping::On),
                        _ => Err(format!("expected 'on' (a receiver takes a group's frames only if it joined the group) or 'off' (every receiver in range takes every frame) on a wireless segment, got '{s}'")),
                    })
                    .unwrap_or(seg.snooping)
            }
            "snooping" => {
                seg.snooping = p
                    .scalar(v, &f, |s| match s {
                        "off" | "false" => Ok(vemu_switch::Snooping::Off),
                        "on" | "true" => Ok(vemu_switch::Snooping::On),
                        "querier" => Ok(vemu_switch::Snooping::Querier),
                        _ => Err(format!("expected 'on' (snoop while a querier is heard), 'querier' (the switch is one) or 'off' (flood all multicast), got '{s}'")),
                    })
                    .unwrap_or(seg.snooping)
            }
            "weight" | "canvas" | "ipv4" | "ipv6" => seg.common_key(p, k, v, &f),
            "members" => {
                saw_members = true;
                let items = p.seq(v, &f);
                if items.len() < 2 {
                    p.err(v.mark, &f, format!("a segment needs at least 2 members, found {}", items.len()));
                }
                let mut member_keys = vec!["vlan", "egress", "ingress"];
                member_keys.extend_from_slice(IMPAIRMENT_KEYS);
                member_keys.extend(wireless::member_keys());
                for (j, m) in items.iter().enumerate() {
                    let mf = format!("{f}[{j}]");
                    let Some((end, rest)) = endpoint(p, m, &mf, names, &member_keys) else { continue };
                    let mut vlan = vemu_switch::DEFAULT_VLAN;
                    for (k, kmark, x) in &rest {
                        let wrong_kind = if is_wireless { *k == "vlan" } else { wireless::is_member_key(k) };
                        if wrong_kind {
                            let other = if is_wireless { "lan" } else { "wireless" };
                            p.err(*kmark, &join(&mf, k), format!("'{k}' applies to members of 'kind: {other}' segments only"));
                        } else if *k == "vlan" {
                            vlan = p
                                .scalar(x, &join(&mf, k), |s| match s.parse::<u16>() {
                                    Ok(v @ 1..=4094) => Ok(v),
                                    _ => Err(format!("expected a VLAN number from 1 to 4094, got '{s}'")),
                                })
                                .unwrap_or(vlan);
                        }
                    }
                    let [eg, ing] = directions(p, &rest, &mf, [&base_dirs[0], &base_dirs[1]], ["egress", "ingress"]);
                    let egress = finish_impairments(p, &eg, m.mark, &format!("{mf} (egress)"));
                    let ingress = finish_impairments(p, &ing, m.mark, &format!("{mf} (ingress)"));
                    if let Some(prev) = seg.members.iter().find(|x| x.end.node == end.node) {
                        p.err(end.mark, &mf, format!("node is already a member of this segment (line {})", prev.end.mark.line));
                        continue;
                    }
                    let node_name = names.iter().find(|(_, &i)| i == end.node).map(|(n, _)| n.as_str()).unwrap_or("");
                    radio_entries.push((end.node, node_name, m.mark, rest.into_iter().filter(|e| wireless::is_member_key(e.0)).collect::<Entries>()));
                    seg.members.push(MemberDef { end, vlan, egress, ingress });
                }
            }
            _ => {}
        }
    }
    if !saw_members {
        p.err(mark, &field, "a segment needs 'members: [node, node, ...]'");
    }
    if is_wireless {
        seg.wireless = Some(wireless::wireless(p, &entries, &field, base, &radio_entries));
    }
    seg
}
