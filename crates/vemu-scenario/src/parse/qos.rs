//! The `qos` key of a link direction or LAN port: `diffserv` (the preset), `none` (one
//! FIFO queue), a list of classes, or `{scheduler: drr \

use ipnet::IpNet;
use vemu_link::QosConfig;
use vemu_qos::classify::{dscp_named, Match};
use vemu_qos::red::RedParams;
use vemu_qos::stage::{
    ClassConfig, ClassLimit, ColorAction, Discipline, MeterConfig, MeterKind, WredConfig,
};

use super::{integer, join, queue, Entries, Node, Value, P};
use crate::units;
use vemu_link::QueueLimit;

/// `Some(None)`: `none`, back to one FIFO.
pub(super) fn qos(p: &mut P, node: &Node, field: &str) -> Option<Option<QosConfig>> {
    let cfg = match &node.value {
        Value::Seq(_) => {
            QosConfig::Classes { classes: classes(p, node, field)?, scheduler: Discipline::Drr }
        }
        // `{scheduler: wf2q+, classes: [...]}`: how the classes of a level share it.
        Value::Map(_) => {
            let entries = p.map(node, field, &["scheduler", "classes"]);
            let get = |k: &str| entries.iter().find(|e| e.0 == k).map(|e| e.2);
            let f = |k: &str| join(field, k);
            let scheduler = match get("scheduler") {
                Some(v) => p.scalar(v, &f("scheduler"), |s| match s {
                    "drr" => Ok(Discipline::Drr),
                    "wfq" => Ok(Discipline::Wfq),
                    "wf2q+" | "wf2q" => Ok(Discipline::Wf2qPlus),
                    _ => Err(format!("expected drr, wfq or wf2q+, got '{s}'")),
                })?,
                None => Discipline::Drr,
            };
            let Some(list) = get("classes") else {
                p.err(node.mark, field, "a scheduler goes with its 'classes' (a list)");
                return None;
            };
            QosConfig::Classes { classes: classes(p, list, &f("classes"))?, scheduler }
        }
        _ => {
            return p.scalar(node, field, |s| match s {
                "diffserv" => Ok(Some(QosConfig::Diffserv)),
                "none" | "fifo" => Ok(None),
                _ => Err(format!("expected diffserv, none or a list of classes, got '{s}'")),
            })
        }
    };
    match cfg.validate() {
        Ok(()) => Some(Some(cfg)),
        Err(m) => {
            p.err(node.mark, field, m);
            None
        }
    }
}

/// A list of classes (`None` where one is wrong: its errors are told).
fn classes(p: &mut P, node: &Node, field: &str) -> Option<Vec<ClassConfig>> {
    let items = p.seq(node, field);
    let classes: Vec<ClassConfig> = items
        .iter()
        .enumerate()
        .filter_map(|(i, n)| class(p, n, &format!("{field}[{i}]")))
        .collect();
    (classes.len() == items.len()).then_some(classes)
}

const CLASS_KEYS: &[&str] =
    &["name", "match", "priority", "weight", "police", "meter", "mark", "red", "wred", "limit"];

fn class(p: &mut P, node: &Node, field: &str) -> Option<ClassConfig> {
    let entries = p.map(node, field, CLASS_KEYS);
    let errors = p.errors.len();
    let mut c = ClassConfig {
        name: String::new(),
        rules: Vec::new(),
        priority: 0,
        weight: 1,
        meter: None,
        set_dscp: None,
        red: None,
        limit: None,
    };
    let mut named = false;
    for (k, _, v) in &entries {
        let f = join(field, k);
        match *k {
            "name" => {
                if let Some(n) = p.string(v, &f) {
                    c.name = n;
                    named = true;
                }
            }
            "match" => {
                c.rules = match &v.value {
                    Value::Seq(items) => items
                        .iter()
                        .enumerate()
                        .filter_map(|(i, n)| rule(p, n, &format!("{f}[{i}]")))
                        .collect(),
                    _ => rule(p, v, &f).into_iter().collect(),
                }
            }
            "priority" => {
                c.priority =
                    p.scalar(v, &f, integer::<u8>("a priority level, 0 first")).unwrap_or(0)
            }
            "weight" => c.weight = p.scalar(v, &f, integer::<u32>("a weight, e.g. 2")).unwrap_or(1),
            "police" => c.meter = police(p, v, &f),
            "meter" => c.meter = meter(p, v, &f),
            "mark" => c.set_dscp = p.scalar(v, &f, dscp),
            "red" => {
                let r = red_params(p, v, &f);
                c.red = r.map(|r| WredConfig { green: Some(r), yellow: Some(r), red: Some(r) });
            }
            "wred" => {
                let mut w = WredConfig::default();
                for (colour, _, n) in p.map(v, &f, &["green", "yellow", "red"]) {
                    let r = red_params(p, n, &join(&f, colour));
                    match colour {
                        "green" => w.green = r,
                        "yellow" => w.yellow = r,
                        _ => w.red = r,
                    }
                }
                c.red = Some(w);
            }
            "limit" => {
                c.limit = p.scalar(v, &f, queue).map(|q| match q {
                    QueueLimit::Packets(n) => ClassLimit::Packets(n),
                    QueueLimit::Bytes(b) => ClassLimit::Bytes(b),
                })
            }
            _ => unreachable!(),
        }
    }
    if entries.iter().any(|e| e.0 == "police") && entries.iter().any(|e| e.0 == "meter") {
        p.err(
            node.mark,
            field,
            "give 'police' (a token bucket that drops the excess) or 'meter', not both",
        );
    }
    if !named && !node.is_null() && matches!(node.value, Value::Map(_)) {
        p.err(node.mark, field, "missing 'name'");
    }
    (p.errors.len() == errors && named).then_some(c)
}

/// A DSCP by number (0-63) or name (EF, AF11-AF43, CS0-CS7, BE).
pub(crate) fn dscp(s: &str) -> Result<u8, String> {
    dscp_named(s)
        .or_else(|| s.parse::<u8>().ok().filter(|d| *d <= 63))
        .ok_or_else(|| format!("'{s}' is not a DSCP (0-63, or a name: EF, AF11-AF43, CS0-CS7, BE)"))
}

/// An IP protocol by name (tcp, udp, icmp, icmpv6, sctp) or number.
pub(crate) fn protocol(s: &str) -> Result<u8, String> {
    match s {
        "tcp" => Ok(6),
        "udp" => Ok(17),
        "icmp" => Ok(1),
        "icmpv6" => Ok(58),
        "sctp" => Ok(132),
        _ => s.parse::<u8>().map_err(|_| {
            format!("'{s}' is not a protocol (tcp, udp, icmp, icmpv6, sctp or a number)")
        }),
    }
}

pub(crate) fn port_range(s: &str) -> Result<(u16, u16), String> {
    let bad = || format!("'{s}' is not a port or a range like 5000-5010");
    let (a, b) = s.split_once('-').unwrap_or((s, s));
    let (a, b): (u16, u16) =
        (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?);
    if a > b {
        return Err(bad());
    }
    Ok((a, b))
}

/// An ICMP type by number or name; names are ICMPv6's with `proto: icmpv6`.
fn icmp_type(s: &str, v6: bool) -> Result<u8, String> {
    let named = match (s, v6) {
        ("echo-request", false) => Some(8),
        ("echo-reply", false) => Some(0),
        ("destination-unreachable", false) => Some(3),
        ("time-exceeded", false) => Some(11),
        ("echo-request", true) => Some(128),
        ("echo-reply", true) => Some(129),
        ("destination-unreachable", true) => Some(1),
        ("time-exceeded", true) => Some(3),
        ("neighbour-solicitation" | "neighbor-solicitation", true) => Some(135),
        ("neighbour-advertisement" | "neighbor-advertisement", true) => Some(136),
        _ => None,
    };
    named.or_else(|| s.parse::<u8>().ok()).ok_or_else(|| {
        format!("'{s}' is not an ICMP type: a number, or echo-request, echo-reply, destination-unreachable, time-exceeded (and neighbour-solicitation/-advertisement with icmpv6)")
    })
}

pub(crate) fn rule(p: &mut P, node: &Node, field: &str) -> Option<Match> {
    let mut m = Match::default();
    let entries: Entries =
        p.map(node, field, &["dscp", "pcp", "proto", "src", "dst", "sport", "dport", "icmp-type"]);
    if entries.is_empty() {
        p.err(
            node.mark,
            field,
            "a match needs at least one of dscp, pcp, proto, src, dst, sport, dport, icmp-type",
        );
        return None;
    }
    // (The protocol first: an ICMP type's name depends on it.)
    let v6 = entries.iter().any(|(k, _, v)| {
        *k == "proto" && matches!(&v.value, Value::Scalar(s, _) if s == "icmpv6" || s == "58")
    });
    for (k, _, v) in entries {
        let f = join(field, k);
        match k {
            "dscp" => {
                m.dscp = p
                    .strings(v, &f)
                    .iter()
                    .filter_map(|s| dscp(s).map_err(|e| p.err(v.mark, &f, e)).ok())
                    .collect()
            }
            "pcp" => {
                m.pcp = p
                    .strings(v, &f)
                    .iter()
                    .filter_map(|s| {
                        s.parse::<u8>().ok().filter(|x| *x <= 7).or_else(|| {
                            p.err(v.mark, &f, format!("'{s}' is not a PCP (0-7)"));
                            None
                        })
                    })
                    .collect()
            }
            "proto" => m.proto = p.scalar(v, &f, protocol),
            "icmp-type" => m.icmp_type = p.scalar(v, &f, |s| icmp_type(s, v6)),
            "src" | "dst" => {
                let net = p.scalar(v, &f, |s| {
                    s.parse::<IpNet>()
                        .or_else(|_| s.parse::<std::net::IpAddr>().map(IpNet::from))
                        .map_err(|_| format!("'{s}' is not an address or prefix"))
                });
                if k == "src" {
                    m.src = net;
                } else {
                    m.dst = net;
                }
            }
            "sport" | "dport" => {
                let r = p.scalar(v, &f, port_range);
                if k == "sport" {
                    m.sport = r;
                } else {
                    m.dport = r;
                }
            }
            _ => unreachable!(),
        }
    }
    if m.icmp_type.is_some() && !matches!(m.proto, Some(1 | 58)) {
        p.err(node.mark, field, "an ICMP type needs 'proto: icmp' or 'icmpv6'");
        return None;
    }
    Some(m)
}

fn action(s: &str) -> Result<ColorAction, String> {
    match s {
        "pass" => Ok(ColorAction::Pass),
        "drop" => Ok(ColorAction::Drop),
        _ => dscp(s)
            .map(ColorAction::Mark)
            .map_err(|_| format!("expected pass, drop or a DSCP to re-mark with, got '{s}'")),
    }
}

/// `police: {rate: 2Mbit, burst: 10KB}`: a token bucket, the excess dropped.
fn police(p: &mut P, node: &Node, field: &str) -> Option<MeterConfig> {
    let (mut rate, mut burst) = (None, None);
    for (k, _, v) in p.map(node, field, &["rate", "burst"]) {
        let f = join(field, k);
        match k {
            "rate" => rate = p.scalar(v, &f, units::rate_bps),
            _ => burst = p.scalar(v, &f, units::size_bytes),
        }
    }
    let (Some(rate_bps), Some(burst_bytes)) = (rate, burst) else {
        p.err(node.mark, field, "police needs 'rate' and 'burst'");
        return None;
    };
    Some(MeterConfig {
        kind: MeterKind::TokenBucket { rate_bps, burst_bytes },
        color_aware: false,
        green: ColorAction::Pass,
        yellow: ColorAction::Pass,
        red: ColorAction::Drop,
    })
}

/// `meter: {type: srtcm|trtcm, cir, cbs, ebs | pir, pbs, color-aware, green, yellow, red}`.
fn meter(p: &mut P, node: &Node, field: &str) -> Option<MeterConfig> {
    let entries = p.map(
        node,
        field,
        &["type", "cir", "cbs", "ebs", "pir", "pbs", "color-aware", "green", "yellow", "red"],
    );
    let mut kind = None;
    let (mut rates, mut sizes) =
        (std::collections::HashMap::new(), std::collections::HashMap::new());
    let mut m = MeterConfig {
        kind: MeterKind::TokenBucket { rate_bps: 0, burst_bytes: 0 },
        color_aware: false,
        green: ColorAction::Pass,
        yellow: ColorAction::Pass,
        red: ColorAction::Drop,
    };
    let errors = p.errors.len();
    for (k, _, v) in &entries {
        let f = join(field, k);
        match *k {
            "type" => kind = p.string(v, &f),
            "cir" | "pir" => {
                if let Some(r) = p.scalar(v, &f, units::rate_bps) {
                    rates.insert(*k, r);
                }
            }
            "cbs" | "ebs" | "pbs" => {
                if let Some(b) = p.scalar(v, &f, units::size_bytes) {
                    sizes.insert(*k, b);
                }
            }
            "color-aware" => {
                m.color_aware = p
                    .scalar(v, &f, |s| {
                        s.parse::<bool>().map_err(|_| format!("expected true or false, got '{s}'"))
                    })
                    .unwrap_or(false)
            }
            "green" => m.green = p.scalar(v, &f, action).unwrap_or(ColorAction::Pass),
            "yellow" => m.yellow = p.scalar(v, &f, action).unwrap_or(ColorAction::Pass),
            _ => m.red = p.scalar(v, &f, action).unwrap_or(ColorAction::Drop),
        }
    }
    if p.errors.len() != errors {
        return None;
    }
    let want: &[&str] = match kind.as_deref() {
        Some("srtcm") => &["cir", "cbs", "ebs"],
        Some("trtcm") => &["cir", "cbs", "pir", "pbs"],
        Some(other) => {
            p.err(
                node.mark,
                &join(field, "type"),
                format!(
                    "unknown meter type '{other}', expected srtcm (RFC 2697) or trtcm (RFC 2698)"
                ),
            );
            return None;
        }
        None => {
            p.err(node.mark, field, "missing 'type' (srtcm or trtcm)");
            return None;
        }
    };
    for (k, _, _) in &entries {
        if ["cir", "cbs", "ebs", "pir", "pbs"].contains(k) && !want.contains(k) {
            p.err(
                node.mark,
                &join(field, k),
                format!(
                    "'{k}' does not belong to a {} meter (it takes {})",
                    kind.as_deref().unwrap_or(""),
                    want.join(", ")
                ),
            );
        }
    }
    let missing: Vec<&str> =
        want.iter().copied().filter(|k| !rates.contains_key(k) && !sizes.contains_key(k)).collect();
    if !missing.is_empty() {
        p.err(
            node.mark,
            field,
            format!("the {} meter needs {}", kind.as_deref().unwrap_or(""), missing.join(", ")),
        );
    }
    if p.errors.len() != errors {
        return None;
    }
    m.kind = if want.len() == 3 {
        MeterKind::Srtcm { cir_bps: rates["cir"], cbs_bytes: sizes["cbs"], ebs_bytes: sizes["ebs"] }
    } else {
        MeterKind::Trtcm {
            cir_bps: rates["cir"],
            cbs_bytes: sizes["cbs"],
            pir_bps: rates["pir"],
            pbs_bytes: sizes["pbs"],
        }
    };
    Some(m)
}

/// `{min: 30KB, max: 90KB, probability: 10%}`.
fn red_params(p: &mut P, node: &Node, field: &str) -> Option<RedParams> {
    let (mut min, mut max, mut prob) = (None, None, None);
    for (k, _, v) in p.map(node, field, &["min", "max", "probability"]) {
        let f = join(field, k);
        match k {
            "min" => min = p.scalar(v, &f, units::size_bytes),
            "max" => max = p.scalar(v, &f, units::size_bytes),
            _ => prob = p.scalar(v, &f, units::percent),
        }
    }
    let (Some(min_bytes), Some(max_bytes)) = (min, max) else {
        p.err(
            node.mark,
            field,
            "RED needs 'min' and 'max' (average queue sizes, e.g. 30KB and 90KB)",
        );
        return None;
    };
    let r = RedParams { min_bytes, max_bytes, max_p: prob.unwrap_or(0.1) };
    if let Err(m) = r.validate() {
        p.err(node.mark, field, m);
        return None;
    }
    Some(r)
}
