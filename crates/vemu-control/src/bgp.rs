//! `vemu report bgp`: what a lab's BGP routers say — their sessions, the updates they
//! sent and received, when their routes last changed (the lab's convergence) and each
//! one's path to a chosen prefix. Sans-IO: the answers of BIRD's `birdc` and FRR's
//! `vtysh` in, a report out; the CLI runs [`commands`] in the nodes.
//!
//! The two count and time differently, and the report says which: BIRD counts the
//! routes it exported (announced or withdrawn; `show protocols all`'s "Export updates"
//! and "Export withdraws", accepted) and received, FRR its UPDATE messages (each may
//! carry several prefixes); BIRD gives each route's last change to the millisecond
//! (`show route`), FRR the time since each session's last UPDATE received, in whole
//! seconds (`show bgp neighbors json`'s `bgpInUpdateElapsedTimeMsecs`).

use ipnet::IpNet;
use serde::Serialize;

/// The router software a report reads.
pub use vemu_scenario::asgraph::BgpSoftware as Software;

/// The commands to run in a router node, in the order [`router`] takes their answers:
/// its sessions, its routes' times (BIRD), and its route to `prefix` if one is asked.
pub fn commands(software: Software, prefix: Option<IpNet>) -> Vec<Vec<String>> {
    let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut out = match software {
        Software::Bird => {
            vec![argv(&["birdc", "show", "protocols", "all"]), argv(&["birdc", "show", "route"])]
        }
        Software::Frr => vec![argv(&["vtysh", "-c", "show bgp neighbors json"])],
    };
    if let Some(p) = prefix {
        out.push(match software {
            Software::Bird => argv(&["birdc", "show", "route", "for", &p.to_string(), "all"]),
            Software::Frr => {
                let family = if p.addr().is_ipv4() { "ipv4" } else { "ipv6" };
                argv(&["vtysh", "-c", &format!("show bgp {family} unicast {p} json")])
            }
        });
    }
    out
}

/// One router's part of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RouterBgp {
    pub node: String,
    pub software: Software,
    /// Its AS, as its sessions say (`None`: it has none).
    pub asn: Option<u32>,
    pub sessions: u32,
    pub established: u32,
    /// BIRD: routes exported (announced or withdrawn) and received; FRR: UPDATE messages.
    pub updates_sent: u64,
    pub updates_received: u64,
    /// When its routes last changed (BIRD) or it last received an UPDATE (FRR), ns on
    /// the lab clock; `None`: never.
    pub last_change_ns: Option<u64>,
    /// Its best route's AS path to the asked prefix, the neighbour first (empty: it
    /// originates the prefix); `None`: no route to it (or no prefix asked).
    pub path: Option<Vec<u32>>,
    /// What could not be read from its answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl RouterBgp {
    /// A router that has said nothing yet.
    pub fn new(node: &str, software: Software) -> RouterBgp {
        RouterBgp {
            node: node.to_string(),
            software,
            asn: None,
            sessions: 0,
            established: 0,
            updates_sent: 0,
            updates_received: 0,
            last_change_ns: None,
            path: None,
            error: None,
        }
    }
}

/// When the answers were given: the lab clock's reading then (ns) and the local time of
/// day then (ms since local midnight, as BIRD prints its times).
#[derive(Debug, Clone, Copy)]
pub struct AnsweredAt {
    pub lab_ns: u64,
    pub local_day_ms: u64,
}

const DAY_MS: u64 = 86_400_000;

/// A router's part from its answers to [`commands`] (in their order).
pub fn router(
    node: &str,
    software: Software,
    answers: &[String],
    at: AnsweredAt,
) -> Result<RouterBgp, String> {
    let mut r = RouterBgp::new(node, software);
    let answer = |i: usize| answers.get(i).map(String::as_str);
    match software {
        Software::Bird => {
            bird_protocols(answer(0).unwrap_or(""), &mut r);
            r.last_change_ns = bird_routes_least_age_ms(answer(1).unwrap_or(""), at.local_day_ms)
                .map(|ms| ago(at, ms));
            r.path = answer(2).and_then(bird_best_path);
        }
        Software::Frr => {
            let v: serde_json::Value = serde_json::from_str(answer(0).unwrap_or(""))
                .map_err(|e| format!("node '{node}': FRR's neighbours are not JSON: {e}"))?;
            frr_neighbours(&v, &mut r);
            let elapsed_ms = v
                .as_object()
                .into_iter()
                .flat_map(|m| m.values())
                .filter_map(|n| n["bgpInUpdateElapsedTimeMsecs"].as_u64())
                .min();
            r.last_change_ns = elapsed_ms.map(|ms| ago(at, ms));
            if let Some(a) = answer(1) {
                r.path = frr_best_path(a)
                    .map_err(|e| format!("node '{node}': its route to the prefix: {e}"))?;
            }
        }
    }
    Ok(r)
}

/// The lab clock `ms` before the answers (0 at the least: a change before the lab's
/// start, as a day-old BIRD time reads, is at its start).
fn ago(at: AnsweredAt, ms: u64) -> u64 {
    at.lab_ns.saturating_sub(ms.saturating_mul(1_000_000))
}

/// BIRD's `show protocols all`: its BGP protocols' sessions and update counts.
fn bird_protocols(text: &str, r: &mut RouterBgp) {
    let mut in_bgp = false;
    for line in text.lines() {
        if !line.starts_with(' ') && !line.starts_with('\t') {
            let f: Vec<&str> = line.split_whitespace().collect();
            in_bgp = f.get(1) == Some(&"BGP");
            if in_bgp {
                r.sessions += 1;
                r.established += (f.get(5) == Some(&"Established")) as u32;
            }
            continue;
        }
        if !in_bgp {
            continue;
        }
        let t = line.trim();
        if let Some(asn) = t.strip_prefix("Local AS:").and_then(|a| a.trim().parse().ok()) {
            r.asn = Some(asn);
        }
        // Columns: received rejected filtered ignored accepted.
        let cols = |rest: &str| -> Vec<u64> {
            rest.split_whitespace().map(|c| c.parse().unwrap_or(0)).collect()
        };
        for (key, sent) in [
            ("Import updates:", false),
            ("Import withdraws:", false),
            ("Export updates:", true),
            ("Export withdraws:", true),
        ] {
            if let Some(rest) = t.strip_prefix(key) {
                let c = cols(rest);
                if sent {
                    r.updates_sent += c.get(4).copied().unwrap_or(0);
                } else {
                    r.updates_received += c.first().copied().unwrap_or(0);
                }
            }
        }
    }
}

/// How long before the answer (given at `now_day_ms`, ms since local midnight) the
/// latest BGP route in BIRD's `show route` changed (`[proto HH:MM:SS.mmm]`: a time of
/// day, so a route is taken for less than a day old; one older than 20 hours shows a
/// date and is left out).
fn bird_routes_least_age_ms(text: &str, now_day_ms: u64) -> Option<u64> {
    text.lines()
        .filter_map(|l| {
            // Routes learned by BGP end with their AS marker ("[AS65001i]"); statics
            // and the kernel's do not.
            if !l.contains("[AS") {
                return None;
            }
            let rest = &l[l.find('[')? + 1..];
            let t = parse_day_ms(rest.split_whitespace().nth(1)?.trim_end_matches(']'))?;
            Some((now_day_ms % DAY_MS + DAY_MS - t) % DAY_MS)
        })
        .min()
}

/// `HH:MM:SS[.fff]` as ms since midnight.
fn parse_day_ms(t: &str) -> Option<u64> {
    let (hms, frac) = t.split_once('.').unwrap_or((t, ""));
    let mut p = hms.split(':').map(|x| x.parse::<u64>().ok());
    let (h, m, s) = (p.next()??, p.next()??, p.next()??);
    // (A leap second, 23:59:60, would pass midnight: it is left out like any odd time.)
    if p.next().is_some() || h > 23 || m > 59 || s > 59 || frac.len() > 9 {
        return None;
    }
    let ms = match frac {
        "" => 0,
        f => {
            let digits: String = f.chars().chain(std::iter::repeat('0')).take(3).collect();
            digits.parse::<u64>().ok()?
        }
    };
    Some(((h * 60 + m) * 60 + s) * 1000 + ms)
}

/// The AS path of the primary route (`*`) in BIRD's `show route for P all`: empty if it
/// is the router's own (no BGP.as_path); `None` without a route.
fn bird_best_path(text: &str) -> Option<Vec<u32>> {
    let mut primary = false;
    let mut found = None;
    for line in text.lines() {
        let header = !line.starts_with('\t') && line.contains('[');
        if header {
            if primary {
                break;
            }
            primary = line.contains("] * ");
            if primary {
                found = Some(Vec::new());
            }
            continue;
        }
        if primary {
            if let Some(p) = line.trim().strip_prefix("BGP.as_path:") {
                found = Some(p.split_whitespace().filter_map(|a| a.parse().ok()).collect());
            }
        }
    }
    found
}

/// FRR's `show bgp neighbors json`: its sessions, AS and UPDATE counts.
fn frr_neighbours(v: &serde_json::Value, r: &mut RouterBgp) {
    for n in v.as_object().into_iter().flat_map(|m| m.values()).filter(|n| n.is_object()) {
        r.sessions += 1;
        r.established += (n["bgpState"] == "Established") as u32;
        if let Some(a) = n["localAs"].as_u64().and_then(|a| u32::try_from(a).ok()) {
            r.asn = Some(a);
        }
        r.updates_sent += n["messageStats"]["updatesSent"].as_u64().unwrap_or(0);
        r.updates_received += n["messageStats"]["updatesRecv"].as_u64().unwrap_or(0);
    }
}

/// The best path's AS path in FRR's `show bgp ipv4 unicast P json` (empty: its own
/// prefix); `None` without a route (`{}`).
fn frr_best_path(json: &str) -> Result<Option<Vec<u32>>, String> {
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| format!("not JSON: {e}"))?;
    let best = v["paths"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["bestpath"]["overall"].as_bool() == Some(true));
    Ok(best.map(|p| {
        p["aspath"]["string"]
            .as_str()
            .unwrap_or("")
            .split_whitespace()
            .filter_map(|a| a.parse().ok())
            .collect()
    }))
}

/// The lab's report: its routers, and what they add up to.
#[derive(Debug, Clone, Serialize)]
pub struct BgpReport {
    pub prefix: Option<IpNet>,
    pub routers: Vec<RouterBgp>,
    pub sessions: u32,
    pub established: u32,
    pub updates_sent: u64,
    pub updates_received: u64,
    /// The last route change of any router (the lab's convergence, if it is quiet
    /// since), lab clock ns, and the router's node; `None`: no router saw a route.
    pub last_change_ns: Option<u64>,
    pub last_change_node: Option<String>,
    /// The lab clock when the routers answered.
    pub answered_ns: u64,
    /// Routers with a route to the prefix (when one is asked).
    pub reaching: usize,
}

/// The report of `routers` (each router's part), answered at lab time `answered_ns`.
pub fn report(prefix: Option<IpNet>, mut routers: Vec<RouterBgp>, answered_ns: u64) -> BgpReport {
    routers.sort_by(|a, b| a.asn.cmp(&b.asn).then_with(|| a.node.cmp(&b.node)));
    let last = routers.iter().filter_map(|r| Some((r.last_change_ns?, &r.node))).max();
    BgpReport {
        prefix,
        sessions: routers.iter().map(|r| r.sessions).sum(),
        established: routers.iter().map(|r| r.established).sum(),
        updates_sent: routers.iter().map(|r| r.updates_sent).sum(),
        updates_received: routers.iter().map(|r| r.updates_received).sum(),
        last_change_ns: last.map(|l| l.0),
        last_change_node: last.map(|l| l.1.clone()),
        answered_ns,
        reaching: routers.iter().filter(|r| r.path.is_some()).count(),
        routers,
    }
}

#[cfg(test)]
mod tests;
