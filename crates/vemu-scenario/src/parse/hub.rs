//! A `kind: hub` segment (IMUNES' hub, an 802.3 repeater): every member hears every
//! frame, on one half-duplex medium with CSMA/CD ([`vemu_radio::hub`]). It is carried
//! as a shared medium (a radio channel's machinery, its members standing still).

use vemu_radio::hub::HubConfig;
use vemu_radio::medium::MediumConfig;
use vemu_radio::mobility::Mobility;
use vemu_radio::propagation::{Model, Radio};

use super::wireless::WirelessDef;
use super::*;

/// Keys of a hub segment.
const HUB_KEYS: &[&str] =
    &["kind", "members", "rate", "span", "queue_frames", "weight", "ipv4", "ipv6", "canvas"];

/// Most members a hub may have (it keeps counters per pair of them; a real repeater
/// has tens of ports).
pub const MAX_HUB_MEMBERS: usize = 1024;

/// Signals in copper travel at about two thirds of light's speed, m/ns.
const CABLE_M_PER_NS: f64 = 0.2;

pub(crate) fn hub(
    p: &mut P,
    name: &str,
    mark: Mark,
    entries: &Entries,
    names: &HashMap<String, usize>,
) -> SegmentDef {
    let field = format!("segments.{name}");
    let mut cfg = HubConfig::default();
    // A repeater filters nothing: every port gets every frame.
    let mut seg = SegmentDef::new(name, mark, vemu_switch::Snooping::Off);
    let mut saw_members = false;
    for (k, kmark, v) in entries {
        let f = join(&field, k);
        match *k {
            "kind" => {}
            "rate" => cfg.rate_bps = p.scalar(v, &f, units::rate_bps).unwrap_or(cfg.rate_bps),
            "span" => {
                // The longest way between two ports (cables and the hub): the window in
                // which two starts collide.
                if let Some(m) = p.scalar(v, &f, wireless::distance_m) {
                    cfg.prop_ns = ((m / CABLE_M_PER_NS).round() as u64).max(1);
                }
            }
            "queue_frames" => {
                cfg.queue_frames = p
                    .scalar(v, &f, integer::<usize>("a number of frames"))
                    .unwrap_or(cfg.queue_frames)
                    .max(1)
            }
            "weight" | "canvas" | "ipv4" | "ipv6" => seg.common_key(p, k, v, &f),
            "members" => {
                saw_members = true;
                let items = p.seq(v, &f);
                if items.len() < 2 {
                    p.err(
                        v.mark,
                        &f,
                        format!("a segment needs at least 2 members, found {}", items.len()),
                    );
                }
                if items.len() > MAX_HUB_MEMBERS {
                    let n = items.len();
                    p.err(v.mark, &f, format!("a hub has at most {MAX_HUB_MEMBERS} members (a LAN segment switches any number), found {n}"));
                    return seg;
                }
                let mut member_keys = vec!["egress", "ingress"];
                member_keys.extend_from_slice(IMPAIRMENT_KEYS);
                let none = ImpairmentsPatch::default();
                for (j, m) in items.iter().enumerate() {
                    let mf = format!("{f}[{j}]");
                    let Some((end, rest)) = endpoint(p, m, &mf, names, &member_keys) else {
                        continue;
                    };
                    if let Some(prev) = seg.members.iter().find(|x| x.end.node == end.node) {
                        p.err(
                            end.mark,
                            &mf,
                            format!(
                                "node is already a member of this segment (line {})",
                                prev.end.mark.line
                            ),
                        );
                        continue;
                    }
                    // A port's own impairments (its cable), as a LAN member's.
                    let [eg, ing] =
                        directions(p, &rest, &mf, [&none, &none], ["egress", "ingress"]);
                    let egress = finish_impairments(p, &eg, m.mark, &format!("{mf} (egress)"));
                    let ingress = finish_impairments(p, &ing, m.mark, &format!("{mf} (ingress)"));
                    seg.members.push(MemberDef {
                        end,
                        vlan: vemu_switch::DEFAULT_VLAN,
                        egress,
                        ingress,
                    });
                }
            }
            _ => p.err(
                *kmark,
                &f,
                format!("'{k}' does not apply to a hub (it takes: {})", HUB_KEYS[1..].join(", ")),
            ),
        }
    }
    if !saw_members {
        p.err(mark, &field, "a segment needs 'members: [node, node, ...]'");
    }
    // (The radio fields are unused by a hub; finite, as the plan travels as JSON.)
    let medium = MediumConfig {
        model: Model::UnitDisk { range_m: 1.0 },
        radio: Radio::default(),
        rate_bps: cfg.rate_bps,
        preamble_ns: 0,
        carrier_sense_m: 1.0,
        csma: true,
        queue_frames: cfg.queue_frames,
        seed: 0,
        dcf: None,
        city: None,
        hub: Some(cfg),
    };
    let members =
        seg.members.iter().map(|_| (Some(vemu_radio::Pos::default()), Mobility::Static)).collect();
    seg.wireless = Some(WirelessDef {
        medium,
        tick_ns: wireless::DEFAULT_TICK_NS,
        area: None,
        members,
        trace: None,
        bridges: vec![None; seg.members.len()],
    });
    seg
}
