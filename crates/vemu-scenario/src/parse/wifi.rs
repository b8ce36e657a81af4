//! A wireless segment's 802.11 MAC (`csma: true`): the standard, the rate and how it
//! adapts, the RTS threshold and retry limits, and each member's transmit power,
//! antenna gain and channel — made into the DCF's setup ([`vemu_radio::wifi::dcf`]).

use vemu_radio::medium::MediumConfig;
use vemu_radio::wifi::bss::{ApConfig, Role, Scan, StaConfig, TU_NS};
use vemu_radio::wifi::dcf::{DcfConfig, DcfSetup, StationConfig};
use vemu_radio::wifi::phy::{Standard, Timing};
use vemu_radio::wifi::rate::RateControl;

use super::{integer, join, Entries, P};
use crate::yaml::Mark;

/// Keys of a wireless segment that configure its 802.11 MAC (with `csma: true`).
pub const DCF_KEYS: &[&str] = &[
    "standard",
    "rate_control",
    "rts_threshold",
    "short_retry",
    "long_retry",
    "slot",
    "sifs",
    "difs",
    "eifs",
    "cw_min",
    "cw_max",
    "ack_timeout",
    "basic_rate",
];

/// Keys of a member's own radio and its part in infrastructure mode (with `csma: true`).
pub const DCF_MEMBER_KEYS: &[&str] = &[
    "tx_power",
    "antenna_gain",
    "channel",
    "role",
    "ssid",
    "beacon_interval",
    "isolation",
    "bridge",
    "scan",
    "roam_threshold",
    "hysteresis",
    "scan_interval",
];

/// A station's default `roam_threshold`: this far over the power its channel's frames
/// are received at (the preamble threshold): it scans for a better access point while
/// its own is heard within 6 dB of the edge of reception.
pub const ROAM_MARGIN_DB: f64 = 6.0;

/// Keys of an access point, and of a station (with `role:`).
const AP_KEYS: &[&str] = &["beacon_interval", "isolation", "bridge"];
const STATION_KEYS: &[&str] = &["scan", "roam_threshold", "hysteresis", "scan_interval"];

fn standard(s: &str) -> Result<Standard, String> {
    match s {
        "fhss" => Ok(Standard::Fhss),
        "802.11b" | "b" => Ok(Standard::B),
        "802.11a" | "a" => Ok(Standard::A),
        "802.11g" | "g" => Ok(Standard::G),
        _ => Err(format!(
            "expected a standard: 802.11b, 802.11a, 802.11g or fhss (Bianchi's), got '{s}'"
        )),
    }
}

/// A member's own radio: its transmit power, antenna gain and channel (`field` names the
/// member).
fn station(p: &mut P, field: &str, rest: &Entries) -> StationConfig {
    let mut s = StationConfig::default();
    for (k, _, v) in rest {
        match *k {
            "tx_power" => {
                s.tx_power_dbm =
                    p.scalar(v, &join(field, k), super::wireless::power_w).map(vemu_radio::dbm)
            }
            "antenna_gain" => {
                s.gain_dbi =
                    p.scalar(v, &join(field, k), super::wireless::decibels_signed).unwrap_or(0.0)
            }
            "channel" => {
                s.channel =
                    p.scalar(v, &join(field, k), integer::<u16>("a channel number")).unwrap_or(1)
            }
            _ => {}
        }
    }
    s
}

/// A member's part in infrastructure mode: `role: ap` with its `ssid` (and
/// `beacon_interval`, `isolation`), `role: station` joining an `ssid` (and `scan`,
/// `roam_threshold`, `hysteresis`, `scan_interval`), or ad hoc (no `role`, or `role:
/// adhoc`). Keys of another role are refused at the key.
fn role(p: &mut P, field: &str, rest: &Entries, reception_dbm: f64) -> Role {
    let get = |k: &str| rest.iter().find(|e| e.0 == k).map(|e| (e.1, e.2));
    let f = |k: &str| join(field, k);
    let kind = match get("role") {
        None => "adhoc".to_string(),
        Some((m, v)) => match p.string(v, &f("role")).as_deref() {
            Some(r @ ("ap" | "station" | "adhoc")) => r.to_string(),
            Some(other) => {
                p.err(m, &f("role"), format!("expected ap, station or adhoc, got '{other}'"));
                return Role::AdHoc;
            }
            None => return Role::AdHoc,
        },
    };
    let ssid = get("ssid").and_then(|(m, v)| {
        let s = p.string(v, &f("ssid"))?;
        if s.is_empty() || s.len() > 32 {
            p.err(m, &f("ssid"), format!("an SSID is 1 to 32 bytes, got {} ('{s}')", s.len()));
            return None;
        }
        Some(s)
    });
    let others: Vec<&str> = match kind.as_str() {
        "ap" => STATION_KEYS.to_vec(),
        "station" => AP_KEYS.to_vec(),
        _ => ["ssid"].iter().chain(AP_KEYS).chain(STATION_KEYS).copied().collect(),
    };
    for k in &others {
        if let Some((m, _)) = get(k) {
            let which = if AP_KEYS.contains(k) {
                "an access point's ('role: ap')"
            } else if STATION_KEYS.contains(k) {
                "a station's ('role: station')"
            } else {
                "an access point's or a station's"
            };
            p.err(m, &f(k), format!("'{k}' is {which}, and this member's role is {kind}"));
        }
    }
    // (A station without one joins any access point.)
    if kind == "ap" && ssid.is_none() && get("ssid").is_none() {
        let m = get("role").expect("given").0;
        p.err(m, &f("ssid"), format!("a member with 'role: {kind}' needs an 'ssid'"));
    }
    let ssid = ssid.unwrap_or_default();
    match kind.as_str() {
        "ap" => {
            let mut a = ApConfig::new(&ssid);
            if let Some((m, v)) = get("beacon_interval") {
                if let Some(ns) = p.scalar(v, &f("beacon_interval"), crate::units::duration_ns) {
                    if (TU_NS..=10_000_000_000).contains(&ns) {
                        a.beacon_interval_ns = ns;
                    } else {
                        p.err(
                            m,
                            &f("beacon_interval"),
                            "a beacon interval is 1 TU (1.024 ms) to 10 s".to_string(),
                        );
                    }
                }
            }
            if let Some((_, v)) = get("isolation") {
                a.isolation = p.boolean(v, &f("isolation")).unwrap_or(false);
            }
            Role::Ap(a)
        }
        "station" => {
            let mut c = StaConfig::new(&ssid);
            // (Relative to the channel's reception: −70 dBm, real hardware's usual, is
            // some 12 dB over its receivers' edge, and beyond the edge of a channel whose
            // receivers need more.)
            c.roam_threshold_dbm = reception_dbm + ROAM_MARGIN_DB;
            if let Some((m, v)) = get("scan") {
                match p.string(v, &f("scan")).as_deref() {
                    Some("active") => c.scan = Scan::Active,
                    Some("passive") => c.scan = Scan::Passive,
                    Some(other) => {
                        p.err(m, &f("scan"), format!("expected active or passive, got '{other}'"))
                    }
                    None => {}
                }
            }
            if let Some((_, v)) = get("roam_threshold") {
                if let Some(w) = p.scalar(v, &f("roam_threshold"), super::wireless::power_w) {
                    c.roam_threshold_dbm = vemu_radio::dbm(w);
                }
            }
            if let Some((_, v)) = get("hysteresis") {
                c.hysteresis_db = p
                    .scalar(v, &f("hysteresis"), super::wireless::decibels)
                    .unwrap_or(c.hysteresis_db);
            }
            if let Some((_, v)) = get("scan_interval") {
                c.scan_interval_ns = p
                    .scalar(v, &f("scan_interval"), mac_time_ns_long)
                    .unwrap_or(c.scan_interval_ns);
            }
            Role::Station(c)
        }
        _ => Role::AdHoc,
    }
}

/// A station's SSID must be one of the segment's access points'.
fn served(p: &mut P, field: &str, members: &[(usize, &str, Mark, Entries)], roles: &[Role]) {
    for (i, r) in roles.iter().enumerate() {
        let Role::Station(c) = r else { continue };
        let served = roles.iter().any(|a| matches!(a, Role::Ap(a) if a.ssid == c.ssid));
        let (_, _, m, rest) = &members[i];
        let mark = rest.iter().find(|e| e.0 == "ssid").map_or(*m, |e| e.1);
        let any_ap = roles.iter().any(|a| matches!(a, Role::Ap(_)));
        if !served && !c.ssid.is_empty() {
            p.err(
                mark,
                &join(&format!("{field}.members[{i}]"), "ssid"),
                format!("no access point of this segment has SSID '{}'", c.ssid),
            );
        } else if !any_ap {
            p.err(
                mark,
                &join(&format!("{field}.members[{i}]"), "role"),
                "a station needs an access point ('role: ap') on its segment".to_string(),
            );
        }
    }
}

/// A background scan's interval: 10 ms to an hour.
fn mac_time_ns_long(text: &str) -> Result<u64, String> {
    let ns = crate::units::duration_ns(text)?;
    if !(10_000_000..=3_600_000_000_000).contains(&ns) {
        return Err(format!("expected 10ms to 1h, got '{text}'"));
    }
    Ok(ns)
}

/// One of the MAC's times: a duration of at most a second (802.11's are microseconds;
/// a longer one is a typo, and would overflow the lab clock's sums).
fn mac_time_ns(text: &str) -> Result<u64, String> {
    let ns = crate::units::duration_ns(text)?;
    if ns > 1_000_000_000 {
        return Err(format!("'{text}' is longer than a second: 802.11's times are microseconds"));
    }
    Ok(ns)
}

/// The standard's `timing` with what the segment overrides: `slot`, `sifs`, `difs`,
/// `eifs` (durations; DIFS and EIFS follow a new slot or SIFS unless given) and `cw_min`,
/// `cw_max` (slots).
fn overridden<'a>(
    p: &mut P,
    get: &dyn Fn(&str) -> Option<(Mark, &'a crate::yaml::Node)>,
    field: &str,
    mut t: Timing,
) -> Timing {
    let time = |p: &mut P, k: &str, into: &mut u64| {
        if let Some((_, v)) = get(k) {
            if let Some(ns) = p.scalar(v, &join(field, k), mac_time_ns) {
                *into = ns;
                return true;
            }
        }
        false
    };
    if time(p, "slot", &mut t.slot_ns) | time(p, "sifs", &mut t.sifs_ns) {
        (t.difs_ns, t.eifs_ns) = (0, 0);
    }
    if time(p, "difs", &mut t.difs_ns) {
        t.eifs_ns = 0;
    }
    time(p, "eifs", &mut t.eifs_ns);
    for (k, into) in [("cw_min", &mut t.cw_min), ("cw_max", &mut t.cw_max)] {
        if let Some((_, v)) = get(k) {
            if let Some(n) = p.scalar(v, &join(field, k), integer::<u32>("a number of slots")) {
                *into = n;
            }
        }
    }
    if t.slot_ns == 0 {
        let m = get("slot").expect("only a given slot is 0").0;
        p.err(m, &join(field, "slot"), "a slot of 0 would never end a backoff");
        t.slot_ns = 1;
    }
    if t.cw_min > t.cw_max || t.cw_max > 65_535 {
        let m = get("cw_min").or_else(|| get("cw_max")).expect("a preset's window is valid").0;
        p.err(
            m,
            &join(field, "cw_min"),
            format!(
                "cw_min {} and cw_max {}: expected cw_min <= cw_max <= 65535",
                t.cw_min, t.cw_max
            ),
        );
        t.cw_min = t.cw_min.min(t.cw_max);
    }
    t.settled()
}

/// The DCF of a segment whose `csma` is true, from the channel `medium` already read
/// (its propagation, power and frequency; its reception `range` becomes the preamble
/// threshold, its `carrier_sense` distance the energy threshold: frames between the
/// two keep the medium busy undecoded, as ns-2's carrier-sense range does), or errors at
/// the keys that need `csma: true`.
pub(super) fn dcf(
    p: &mut P,
    entries: &Entries,
    field: &str,
    medium: &MediumConfig,
    rate_given: bool,
    members: &[(usize, &str, Mark, Entries)],
) -> Option<Box<DcfSetup>> {
    let get = |k: &str| entries.iter().find(|e| e.0 == k).map(|e| (e.1, e.2));
    let f = |k: &str| join(field, k);
    if !medium.csma {
        for k in DCF_KEYS {
            if let Some((m, _)) = get(k) {
                p.err(m, &f(k), format!("'{k}' configures the 802.11 MAC: it needs 'csma: true'"));
            }
        }
        for (i, (_, _, _, rest)) in members.iter().enumerate() {
            for (k, m, _) in rest.iter().filter(|e| DCF_MEMBER_KEYS.contains(&e.0)) {
                let mf = join(&format!("{field}.members[{i}]"), k);
                p.err(
                    *m,
                    &mf,
                    format!(
                        "'{k}' is a member's 802.11 radio: it needs 'csma: true' on the segment"
                    ),
                );
            }
        }
        return None;
    }
    let std = get("standard")
        .and_then(|(_, v)| p.scalar(v, &f("standard"), standard))
        .unwrap_or(Standard::B);
    let mut timing = overridden(p, &get, field, Timing::preset(std));
    // The basic rate: control frames and broadcasts (the standard's lowest unless given).
    if let Some((m, v)) = get("basic_rate") {
        if let Some(bps) = p.scalar(v, &f("basic_rate"), crate::units::rate_bps) {
            match timing.modes.iter().position(|x| x.rate_bps == bps) {
                Some(i) => timing.basic = i,
                None => p.err(
                    m,
                    &f("basic_rate"),
                    format!("{} Mbit/s is not a rate of {std:?}", bps as f64 / 1e6),
                ),
            }
        }
    }
    // The rate: one of the standard's (the top one unless given).
    let top = timing.modes.len() - 1;
    let mode = match rate_given {
        false => top,
        true => match timing.modes.iter().position(|m| m.rate_bps == medium.rate_bps) {
            Some(i) => i,
            None => {
                let (m, _) = get("rate").expect("given");
                let rates: Vec<String> = timing
                    .modes
                    .iter()
                    .map(|m| format!("{}Mbit", m.rate_bps as f64 / 1e6))
                    .collect();
                p.err(
                    m,
                    &f("rate"),
                    format!(
                        "{} Mbit/s is not a rate of {std:?}: one of {}",
                        medium.rate_bps as f64 / 1e6,
                        rates.join(", ")
                    ),
                );
                top
            }
        },
    };
    let rate = match get("rate_control").and_then(|(_, v)| p.string(v, &f("rate_control"))) {
        None => RateControl::Constant { mode },
        Some(s) => match s.as_str() {
            "constant" => RateControl::Constant { mode },
            "arf" => RateControl::Arf,
            "aarf" => RateControl::Aarf,
            "minstrel" => RateControl::Minstrel,
            other => {
                let m = get("rate_control").expect("given").0;
                p.err(
                    m,
                    &f("rate_control"),
                    format!("expected constant, arf, aarf or minstrel, got '{other}'"),
                );
                RateControl::Constant { mode }
            }
        },
    };
    let limit = |p: &mut P, k: &str, d: u32| -> Option<u32> {
        match get(k) {
            None => Some(d),
            Some((_, v)) if v.as_str() == Some("none") => None,
            Some((_, v)) => {
                p.scalar(v, &join(field, k), integer::<u32>("a number of attempts, or none"))
            }
        }
    };
    let short_retry_limit = limit(p, "short_retry", 7);
    let long_retry_limit = limit(p, "long_retry", 4);
    let rts_threshold_bytes = get("rts_threshold")
        .and_then(|(_, v)| p.scalar(v, &f("rts_threshold"), integer::<u64>("a number of bytes")));
    // (A unit disk's powers are infinite within its range and nothing beyond: its
    // carrier sense is its range, and the preamble threshold the preset's.)
    let pd = Some(vemu_radio::dbm(medium.radio.rx_threshold_w)).filter(|x| x.is_finite());
    let ed = vemu_radio::dbm(medium.model.mean_rx_power_w(&medium.radio, medium.carrier_sense_m));
    let mut config = DcfConfig::preset(timing, medium.model, medium.seed);
    config.radio = medium.radio;
    let pd = pd.unwrap_or(config.cca_pd_dbm);
    config.cca_pd_dbm = pd;
    config.cca_ed_dbm = if ed.is_finite() { ed.min(pd) } else { pd };
    // The noise 20 dB under the reception threshold: at the range's edge the basic
    // rate is received, the fastest ones not always.
    config.noise_dbm = pd - 20.0;
    config.rate = rate;
    config.short_retry_limit = short_retry_limit;
    config.long_retry_limit = long_retry_limit;
    config.rts_threshold_bytes = rts_threshold_bytes;
    config.queue_frames = medium.queue_frames;
    config.ack_timeout_ns =
        get("ack_timeout").and_then(|(_, v)| p.scalar(v, &f("ack_timeout"), mac_time_ns));
    let stations = members
        .iter()
        .enumerate()
        .map(|(i, (_, _, _, rest))| station(p, &format!("{field}.members[{i}]"), rest))
        .collect();
    let roles: Vec<Role> = members
        .iter()
        .enumerate()
        .map(|(i, (_, _, _, rest))| role(p, &format!("{field}.members[{i}]"), rest, pd))
        .collect();
    served(p, field, members, &roles);
    let roles = if vemu_radio::wifi::bss::Infra::wanted(&roles) { roles } else { Vec::new() };
    Some(Box::new(DcfSetup { config, stations, roles }))
}

/// Each member's `bridge` (an access point's): `true` — its node bridges the radio
/// interface with all its other interfaces — or the list of those to bridge it with
/// (`false` or none: the node routes). With the key's place, for errors the plan finds.
pub(super) fn bridges(
    p: &mut P,
    field: &str,
    members: &[(usize, &str, Mark, Entries)],
) -> Vec<Option<(Mark, Vec<String>)>> {
    members
        .iter()
        .enumerate()
        .map(|(i, (_, _, _, rest))| {
            let (_, m, v) = rest.iter().find(|e| e.0 == "bridge")?;
            let f = join(&format!("{field}.members[{i}]"), "bridge");
            match &v.value {
                crate::yaml::Value::Seq(_) => {
                    let list = p.strings(v, &f);
                    if list.is_empty() {
                        p.err(*m, &f, "an empty list bridges nothing: say 'false'".to_string());
                    }
                    Some((*m, list))
                }
                _ => p.boolean(v, &f).filter(|b| *b).map(|_| (*m, Vec::new())),
            }
        })
        .collect()
}
