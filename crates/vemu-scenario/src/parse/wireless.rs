//! The radio settings of a `kind: wireless` segment: propagation, channel, area,
//! mobility, ns-2 traces, and each member's position.

use std::path::Path;

use vemu_radio::city::Roads;
use vemu_radio::medium::MediumConfig;
use vemu_radio::mobility::{Area, Mobility, RandomWaypoint, Streets};
use vemu_radio::propagation::{Model, Radio};
use vemu_radio::{ns2, Pos};

use super::{integer, join, Entries, P};
use crate::units;
use crate::yaml::{Mark, Node, Value};

/// Keys a wireless segment takes beyond those of every segment (and its 802.11 MAC's:
/// [`super::wifi::DCF_KEYS`]).
pub const WIRELESS_KEYS: &[&str] = &[
    "propagation",
    "range",
    "exponent",
    "sigma",
    "reference_distance",
    "tx_power",
    "rx_threshold",
    "frequency",
    "antenna_height",
    "rate",
    "preamble",
    "carrier_sense",
    "csma",
    "queue_frames",
    "area",
    "tick",
    "mobility",
    "trace",
    "city",
];

/// Keys a member of a wireless segment takes, beside its 802.11 radio's and role's
/// ([`is_member_key`]).
const OWN_MEMBER_KEYS: &[&str] = &["position", "mobility"];

/// Whether `k` is a key of a wireless segment's member: its own, or its 802.11 radio's
/// and role's (super::wifi::DCF_MEMBER_KEYS).
pub fn is_member_key(k: &str) -> bool {
    OWN_MEMBER_KEYS.contains(&k) || super::wifi::DCF_MEMBER_KEYS.contains(&k)
}

/// Every key of a wireless segment's member.
pub fn member_keys() -> impl Iterator<Item = &'static str> {
    OWN_MEMBER_KEYS.iter().chain(super::wifi::DCF_MEMBER_KEYS).copied()
}

/// Lab time between position updates unless `tick` says otherwise: 10 Hz.
pub const DEFAULT_TICK_NS: u64 = 100_000_000;

/// A wireless segment's radio, before seeds are derived from the lab's.
#[derive(Debug, Clone)]
pub struct WirelessDef {
    pub medium: MediumConfig,
    pub tick_ns: u64,
    pub area: Option<Area>,
    /// Per member: its position (`None`: a random place in the area) and movement (for
    /// members moved by `trace`, a trace without its moves: see [`crate::TraceFile`]).
    pub members: Vec<(Option<Pos>, Mobility)>,
    pub trace: Option<crate::TraceFile>,
    /// Per member: the interfaces its node bridges with its radio (an access point's
    /// `bridge`; an empty list: all the node's others), and where that was said.
    pub bridges: Vec<Option<(Mark, Vec<String>)>>,
}

/// `250m`, `1.5km` or a bare number of metres.
pub fn distance_m(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, mult) = if let Some(n) = t.strip_suffix("km") {
        (n, 1000.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 1.0)
    } else {
        (t, 1.0)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v * mult),
        _ => Err(format!("expected a distance like 250m or 1.5km, got '{s}'")),
    }
}

fn positive_distance_m(s: &str) -> Result<f64, String> {
    distance_m(s).and_then(|d| {
        if d > 0.0 {
            Ok(d)
        } else {
            Err(format!("must be greater than 0, got '{s}'"))
        }
    })
}

/// `24.5dBm`, `-64dBm`, `0.28W` or `280mW`, in watts.
pub(super) fn power_w(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let num = |n: &str| n.trim().parse::<f64>().ok().filter(|v| v.is_finite());
    let w = if let Some(n) = t.strip_suffix("dBm") {
        num(n).map(vemu_radio::watts)
    } else if let Some(n) = t.strip_suffix("mW") {
        num(n).map(|v| v / 1000.0)
    } else if let Some(n) = t.strip_suffix('W') {
        num(n)
    } else {
        None
    };
    match w {
        Some(w) if w > 0.0 => Ok(w),
        _ => Err(format!("expected a power like 20dBm, -64dBm, 0.28W or 100mW, got '{s}'")),
    }
}

fn frequency_hz(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (n, mult) = if let Some(n) = t.strip_suffix("GHz") {
        (n, 1e9)
    } else if let Some(n) = t.strip_suffix("MHz") {
        (n, 1e6)
    } else if let Some(n) = t.strip_suffix("kHz") {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix("Hz") {
        (n, 1.0)
    } else {
        return Err(format!("expected a frequency like 2.4GHz or 914MHz, got '{s}'"));
    };
    match n.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v * mult),
        _ => Err(format!("expected a frequency like 2.4GHz or 914MHz, got '{s}'")),
    }
}

fn number(s: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| format!("expected a number, got '{s}'"))
}

/// `3dBi`, `-2dB` or a bare number of dB (an antenna's gain).
pub(super) fn decibels_signed(s: &str) -> Result<f64, String> {
    number(s.trim().trim_end_matches("dBi").trim_end_matches("dB"))
}

/// `4dB` or a bare number of dB.
pub(super) fn decibels(s: &str) -> Result<f64, String> {
    let v = number(s.trim().trim_end_matches("dB"))?;
    if v < 0.0 {
        return Err(format!("must not be negative, got '{s}'"));
    }
    Ok(v)
}

/// `1500x300` (metres).
fn area(s: &str) -> Result<Area, String> {
    let bad = || format!("expected an area like 1500x300 (metres), got '{s}'");
    let (w, h) = s.split_once('x').ok_or_else(bad)?;
    let (w, h) =
        (positive_distance_m(w).map_err(|_| bad())?, positive_distance_m(h).map_err(|_| bad())?);
    Ok(Area { width_m: w, height_m: h })
}

/// A speed in m/s (optionally written with the unit), greater than 0.
pub(super) fn speed_mps(s: &str) -> Result<f64, String> {
    match number(without_mps(s)) {
        Ok(x) if x > 0.0 => Ok(x),
        _ => Err(format!("expected a speed in m/s greater than 0, got '{s}'")),
    }
}

fn without_mps(s: &str) -> &str {
    s.trim().trim_end_matches("m/s").trim()
}

/// `0-20` or `5` (m/s, optionally written with the unit).
fn speed_range(s: &str) -> Result<(f64, f64), String> {
    let t = without_mps(s);
    let bad = || format!("expected a speed like 5 or a range like 0-20 (m/s), got '{s}'");
    let (lo, hi) = match t.split_once('-') {
        Some((a, b)) => (number(a).map_err(|_| bad())?, number(b).map_err(|_| bad())?),
        None => {
            let v = number(t).map_err(|_| bad())?;
            (v, v)
        }
    };
    if lo < 0.0 || hi < lo {
        return Err(bad());
    }
    Ok((lo, hi))
}

/// `[x, y]` or `x,y` (metres).
pub(super) fn position(p: &mut P, node: &Node, field: &str) -> Option<Pos> {
    let parts: Vec<String> = match &node.value {
        Value::Seq(items) => items
            .iter()
            .enumerate()
            .filter_map(|(i, n)| p.string(n, &format!("{field}[{i}]")))
            .collect(),
        _ => p.string(node, field)?.split(',').map(|s| s.to_string()).collect(),
    };
    let xy: Vec<f64> = parts.iter().filter_map(|s| distance_m(s).ok()).collect();
    if parts.len() != 2 || xy.len() != 2 {
        p.err(
            node.mark,
            field,
            "expected a position like [100, 50] or '100,50' (metres, not negative)",
        );
        return None;
    }
    Some(Pos::new(xy[0], xy[1]))
}

/// `static`, or a mapping with `model` and that model's settings.
fn mobility(
    p: &mut P,
    node: &Node,
    field: &str,
    area: Option<Area>,
    roads: Option<&Roads>,
) -> Option<Mobility> {
    if let Value::Scalar(s, _) = &node.value {
        if s == "static" {
            return Some(Mobility::Static);
        }
    }
    let entries = p.map(
        node,
        field,
        &["model", "speed", "pause", "interval", "alpha", "speed_sigma", "heading_sigma", "stop"],
    );
    let get = |k: &str| entries.iter().find(|e| e.0 == k).map(|e| e.2);
    let Some(model) = get("model").and_then(|m| p.string(m, &join(field, "model"))) else {
        if p.errors.is_empty() || !entries.is_empty() {
            p.err(node.mark, field, "expected 'static' or a mapping with 'model'");
        }
        return None;
    };
    let models =
        ["static", "random-waypoint", "random-direction", "random-walk", "gauss-markov", "streets"];
    if !models.contains(&model.as_str()) {
        p.err(
            get("model").unwrap().mark,
            &join(field, "model"),
            format!("unknown mobility model '{model}', expected one of: {}", models.join(", ")),
        );
        return None;
    }
    if model == "static" {
        return Some(Mobility::Static);
    }
    if model == "streets" {
        return streets(p, node, field, &entries, roads);
    }
    let Some(area) = area else {
        p.err(
            node.mark,
            field,
            format!("'{model}' needs the segment's 'area', e.g. area: 1500x300"),
        );
        return None;
    };
    let allowed: &[&str] = match model.as_str() {
        "random-waypoint" | "random-direction" => &["model", "speed", "pause"],
        "random-walk" => &["model", "speed", "interval"],
        _ => &["model", "speed", "interval", "alpha", "speed_sigma", "heading_sigma"],
    };
    for (k, kmark, _) in &entries {
        if !allowed.contains(k) {
            p.err(
                *kmark,
                &join(field, k),
                format!(
                    "'{k}' does not apply to '{model}' (it takes: {})",
                    allowed[1..].join(", ")
                ),
            );
        }
    }
    let speed = match get("speed") {
        Some(v) => p.scalar(v, &join(field, "speed"), speed_range)?,
        None => {
            p.err(node.mark, field, format!("'{model}' needs 'speed', e.g. speed: 0-20 (m/s)"));
            return None;
        }
    };
    let dur = |p: &mut P, k: &str, default: u64| {
        get(k).map_or(Some(default), |v| p.scalar(v, &join(field, k), units::duration_ns))
    };
    Some(match model.as_str() {
        "random-waypoint" | "random-direction" => {
            let rw = RandomWaypoint {
                area,
                min_speed_mps: speed.0,
                max_speed_mps: speed.1,
                pause_ns: dur(p, "pause", 0)?,
            };
            if model == "random-waypoint" {
                Mobility::RandomWaypoint(rw)
            } else {
                Mobility::RandomDirection(rw)
            }
        }
        "random-walk" => {
            let interval_ns = dur(p, "interval", 1_000_000_000)?.max(1);
            Mobility::RandomWalk {
                area,
                min_speed_mps: speed.0,
                max_speed_mps: speed.1,
                interval_ns,
            }
        }
        _ => {
            let num = |p: &mut P, k: &str, default: f64| {
                get(k).map_or(Some(default), |v| p.scalar(v, &join(field, k), number))
            };
            let alpha = num(p, "alpha", 0.75)?;
            if !(0.0..=1.0).contains(&alpha) {
                p.err(
                    get("alpha").unwrap().mark,
                    &join(field, "alpha"),
                    format!("alpha must be between 0 and 1, got {alpha}"),
                );
            }
            Mobility::GaussMarkov {
                area,
                mean_speed_mps: (speed.0 + speed.1) / 2.0,
                alpha,
                speed_sigma_mps: num(p, "speed_sigma", 1.0)?.abs(),
                heading_sigma_rad: num(p, "heading_sigma", 0.5)?.abs(),
                interval_ns: dur(p, "interval", 1_000_000_000)?.max(1),
            }
        }
    })
}

/// `{model: streets, speed: 5-15, pause: 3s, stop: 50%}` along the segment's city's roads.
fn streets(
    p: &mut P,
    node: &Node,
    field: &str,
    entries: &Entries,
    roads: Option<&Roads>,
) -> Option<Mobility> {
    let Some(roads) = roads.filter(|r| !r.streets.is_empty()) else {
        p.err(
            node.mark,
            field,
            "'streets' needs the segment's 'city' with streets (manhattan, or roads)",
        );
        return None;
    };
    let mut st = Streets {
        roads: roads.clone(),
        min_speed_mps: 0.0,
        max_speed_mps: 0.0,
        stop_probability: 0.0,
        pause_ns: 0,
    };
    let mut have_speed = false;
    for (k, kmark, v) in entries {
        let f = join(field, k);
        match *k {
            "model" => {}
            "speed" => {
                have_speed = true;
                (st.min_speed_mps, st.max_speed_mps) = p.scalar(v, &f, speed_range)?;
            }
            "pause" => st.pause_ns = p.scalar(v, &f, units::duration_ns)?,
            "stop" => st.stop_probability = p.scalar(v, &f, units::percent)?,
            _ => {
                p.err(
                    *kmark,
                    &f,
                    format!("'{k}' does not apply to 'streets' (it takes: speed, pause, stop)"),
                );
                return None;
            }
        }
    }
    if !have_speed {
        p.err(node.mark, field, "'streets' needs 'speed', e.g. speed: 5-15 (m/s)");
        return None;
    }
    if entries.iter().any(|e| e.0 == "pause") && !entries.iter().any(|e| e.0 == "stop") {
        st.stop_probability = 1.0;
    }
    Some(Mobility::Streets(Box::new(st)))
}

/// The ns-2 traces of `trace: FILE` or `trace: {file: FILE, nodes: {NODE: INDEX}}`,
/// as (member node index → trace), and the file (member node indices → `$node_(i)`).
/// Without `nodes`, `$node_(i)` is the i-th member.
#[allow(clippy::type_complexity)] // (the two results are only ever destructured at once)
fn traces(
    p: &mut P,
    node: &Node,
    field: &str,
    base: Option<&Path>,
    members: &[usize],
    names: &[(&str, usize)],
) -> (Vec<(usize, usize, ns2::Trace)>, Option<(std::path::PathBuf, crate::FileStamp)>) {
    let (file, map_node) = match &node.value {
        Value::Map(_) => {
            let entries = p.map(node, field, &["file", "nodes"]);
            let file = entries
                .iter()
                .find(|e| e.0 == "file")
                .and_then(|e| p.string(e.2, &join(field, "file")));
            (file, entries.iter().find(|e| e.0 == "nodes").map(|e| e.2))
        }
        _ => (p.string(node, field), None),
    };
    let Some(file) = file else {
        p.err(node.mark, field, "expected a file name, or a mapping with 'file' (and 'nodes')");
        return (Vec::new(), None);
    };
    if !p.reach(crate::Reach::Trace, node.mark, field) {
        return (Vec::new(), None);
    }
    let path = base.map(|b| b.join(&file)).unwrap_or_else(|| file.clone().into());
    // The lab's controller reads it again: by a name that does not depend on its directory.
    let path = std::path::absolute(&path).unwrap_or(path);
    let (text, stamp) = match crate::read_stamped(&path, crate::MAX_TRACE_BYTES) {
        Ok(t) => t,
        Err(e) => {
            p.err(node.mark, field, format!("cannot read ns-2 trace '{}': {e}", path.display()));
            return (Vec::new(), None);
        }
    };
    // $node_(i) beyond the segment (and beyond any real movement file) is a mistake, not
    // a reason to allocate a trace for every index below it.
    let all = match ns2::parse(&text, members.len().max(ns2::MAX_NODES)) {
        Ok(t) => t,
        Err(e) => {
            p.err(node.mark, field, format!("{}:{}: {}", path.display(), e.line, e.message));
            return (Vec::new(), None);
        }
    };
    let mut out = Vec::new();
    match map_node {
        Some(m) => {
            let f = join(field, "nodes");
            for (name, kmark, v) in p.map(m, &f, &[]) {
                let k = join(&f, name);
                let Some(&(_, idx)) = names.iter().find(|(n, _)| *n == name) else {
                    p.err(kmark, &k, format!("'{name}' is not a member of this segment"));
                    continue;
                };
                let Some(i) = p.scalar(v, &k, integer::<usize>("a node number of the trace"))
                else {
                    continue;
                };
                match all.get(i) {
                    Some(t) => out.push((idx, i, t.clone())),
                    None => p.err(
                        v.mark,
                        &k,
                        format!("the trace has no $node_({i}) (it has {} nodes)", all.len()),
                    ),
                }
            }
        }
        None => {
            if all.len() < members.len() {
                p.err(node.mark, field, format!("the trace moves {} nodes but the segment has {} members; map them with 'nodes: {{NODE: INDEX}}'", all.len(), members.len()));
                return (Vec::new(), None);
            }
            out.extend(members.iter().zip(all).enumerate().map(|(i, (&m, t))| (m, i, t)));
        }
    }
    (out, Some((path, stamp)))
}

/// Read a wireless segment's settings from its entries; `members` are the members' node
/// indices, `member_entries` each member's own `position`/`mobility` entries.
pub fn wireless(
    p: &mut P,
    entries: &Entries,
    field: &str,
    base: Option<&Path>,
    member_entries: &[(usize, &str, Mark, Entries)],
) -> WirelessDef {
    let get = |k: &str| entries.iter().find(|e| e.0 == k).map(|e| (e.1, e.2));
    let f = |k: &str| join(field, k);
    let mut radio = Radio::default();
    let mut range_m = 250.0;
    if let Some((_, v)) = get("frequency") {
        radio.frequency_hz =
            p.scalar(v, &f("frequency"), frequency_hz).unwrap_or(radio.frequency_hz);
    }
    if let Some((_, v)) = get("tx_power") {
        radio.tx_power_w = p.scalar(v, &f("tx_power"), power_w).unwrap_or(radio.tx_power_w);
    }
    if let Some((_, v)) = get("antenna_height") {
        let h = p.scalar(v, &f("antenna_height"), positive_distance_m).unwrap_or(1.5);
        (radio.height_tx_m, radio.height_rx_m) = (h, h);
    }
    if let Some((_, v)) = get("range") {
        range_m = p.scalar(v, &f("range"), positive_distance_m).unwrap_or(range_m);
    }
    let name = get("propagation")
        .and_then(|(_, v)| p.string(v, &f("propagation")))
        .unwrap_or_else(|| "two-ray-ground".into());
    let num_or = |p: &mut P, k: &str, parse: fn(&str) -> Result<f64, String>, d: f64| {
        get(k).map_or(d, |(_, v)| p.scalar(v, &join(field, k), parse).unwrap_or(d))
    };
    let model = match name.as_str() {
        "unit-disk" => Model::UnitDisk { range_m },
        "free-space" => Model::FreeSpace,
        "two-ray-ground" => Model::TwoRayGround,
        "log-distance" => Model::LogDistance {
            exponent: num_or(p, "exponent", number, 3.0),
            d0_m: num_or(p, "reference_distance", positive_distance_m, 1.0),
            sigma_db: num_or(p, "sigma", decibels, 4.0),
        },
        other => {
            p.err(get("propagation").unwrap().1.mark, &f("propagation"), format!("unknown propagation model '{other}', expected one of: unit-disk, free-space, two-ray-ground, log-distance"));
            Model::UnitDisk { range_m }
        }
    };
    if name != "log-distance" {
        for k in ["exponent", "sigma", "reference_distance"] {
            if let Some((m, _)) = get(k) {
                p.err(m, &f(k), format!("'{k}' applies to propagation: log-distance only"));
            }
        }
    }
    // The receive threshold: given, or the mean power at `range` (default 250 m).
    match (get("rx_threshold"), get("range")) {
        (Some((m, _)), Some(_)) => {
            p.err(m, &f("rx_threshold"), "give 'range' or 'rx_threshold', not both")
        }
        (Some((_, v)), None) => {
            radio.rx_threshold_w =
                p.scalar(v, &f("rx_threshold"), power_w).unwrap_or(radio.rx_threshold_w)
        }
        _ if matches!(model, Model::UnitDisk { .. }) => {}
        _ => radio.rx_threshold_w = model.mean_rx_power_w(&radio, range_m),
    }
    let nominal_range_m = model.range_m(&radio);
    let csma = get("csma").and_then(|(_, v)| p.boolean(v, &f("csma")));
    let mut medium = MediumConfig {
        model,
        radio,
        rate_bps: get("rate")
            .and_then(|(_, v)| p.scalar(v, &f("rate"), units::rate_bps))
            .unwrap_or(11_000_000),
        preamble_ns: get("preamble")
            .and_then(|(_, v)| p.scalar(v, &f("preamble"), units::duration_ns))
            .unwrap_or(192_000),
        carrier_sense_m: get("carrier_sense")
            .and_then(|(_, v)| p.scalar(v, &f("carrier_sense"), distance_m))
            .unwrap_or(2.2 * nominal_range_m),
        csma: csma.unwrap_or(false),
        queue_frames: get("queue_frames")
            .and_then(|(_, v)| {
                p.scalar(v, &f("queue_frames"), integer::<usize>("a number of frames"))
            })
            .unwrap_or(50)
            .max(1),
        seed: 0,
        dcf: None,
        city: None,
        hub: None,
    };
    medium.dcf =
        super::wifi::dcf(p, entries, field, &medium, get("rate").is_some(), member_entries);
    let tick_ns = get("tick")
        .and_then(|(_, v)| p.scalar(v, &f("tick"), units::duration_ns))
        .unwrap_or(DEFAULT_TICK_NS);
    if let Some((m, _)) = get("tick") {
        if !(1_000_000..=1_000_000_000).contains(&tick_ns) {
            p.err(
                m,
                &f("tick"),
                format!(
                    "tick must be between 1ms and 1s (10 Hz is the default), got {} ms",
                    tick_ns as f64 / 1e6
                ),
            );
        }
    }
    let city = get("city").and_then(|(_, v)| super::city::city(p, v, &f("city")));
    let area = get("area").and_then(|(_, v)| p.scalar(v, &f("area"), area)).or_else(|| {
        // A city without an area: members placed (and moved) within it.
        let (w, h) = city.as_ref()?.extent();
        (w > 0.0 && h > 0.0).then_some(Area { width_m: w, height_m: h })
    });
    let roads = city.as_ref().map(|c| &c.roads);
    let default_mobility = get("mobility")
        .and_then(|(_, v)| mobility(p, v, &f("mobility"), area, roads))
        .unwrap_or(Mobility::Static);
    let names: Vec<(&str, usize)> =
        member_entries.iter().map(|(idx, name, _, _)| (*name, *idx)).collect();
    let traced = get("trace").is_some();
    let mut members =
        member_places(p, field, member_entries, &default_mobility, (area, roads), traced);
    let mut trace = None;
    if let Some((_, v)) = get("trace") {
        let idx: Vec<usize> = member_entries.iter().map(|m| m.0).collect();
        let (moved, file) = traces(p, v, &f("trace"), base, &idx, &names);
        let mut map = Vec::with_capacity(moved.len());
        for (node, ti, t) in moved {
            let i = member_entries.iter().position(|m| m.0 == node).unwrap();
            map.push((i, ti));
            // The moves stay in the file: the lab's controller reads them (Plan::load_traces).
            members[i] =
                (Some(t.start), Mobility::Trace(ns2::Trace { start: t.start, moves: Vec::new() }));
        }
        trace = file.map(|(path, stamp)| crate::TraceFile { path, stamp, members: map });
    }
    let bridges = super::wifi::bridges(p, field, member_entries);
    medium.city = city.map(Box::new);
    WirelessDef { medium, tick_ns, area, members, trace, bridges }
}

/// Each member's place and movement: its `position` (inside the segment's `area` if it
/// has one), its `mobility` or the segment's; a member needs a position unless the
/// segment has an area or a trace.
fn member_places(
    p: &mut P,
    field: &str,
    member_entries: &[(usize, &str, Mark, Entries)],
    default_mobility: &Mobility,
    (area, roads): (Option<Area>, Option<&Roads>),
    traced: bool,
) -> Vec<(Option<Pos>, Mobility)> {
    let mut members = Vec::new();
    for (i, (_, name, mmark, rest)) in member_entries.iter().enumerate() {
        let mf = format!("{field}.members[{i}]");
        let (mut pos, mut mob) = (None, default_mobility.clone());
        for (k, _, v) in rest {
            match *k {
                "position" => pos = position(p, v, &join(&mf, k)),
                "mobility" => {
                    mob = mobility(p, v, &join(&mf, k), area, roads).unwrap_or(Mobility::Static)
                }
                _ => {}
            }
        }
        if let (Some(a), Some(at)) = (area, pos) {
            if !a.contains(at) {
                p.err(
                    rest.iter().find(|e| e.0 == "position").unwrap().1,
                    &join(&mf, "position"),
                    format!(
                        "({}, {}) is outside the area {}x{}",
                        at.x, at.y, a.width_m, a.height_m
                    ),
                );
            }
        }
        // (A position given but wrong has its own error.)
        let given = rest.iter().any(|e| e.0 == "position");
        if pos.is_none() && !given && area.is_none() && !traced {
            p.err(*mmark, &mf, format!("member '{name}' needs a 'position' (or give the segment an 'area' to place members at random)"));
        }
        members.push((pos, mob));
    }
    members
}
