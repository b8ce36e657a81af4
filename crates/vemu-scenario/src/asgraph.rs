//! AS graphs (CAIDA's AS-relationship form) and valley-free paths: what `vemu import`
//! makes labs of (`import::asrel`) and what an `expect:` valley_free check judges
//! routes by. No dependency on the rest of the crate.

use std::collections::HashMap;

/// A relationship: `a` is `b`'s provider, or they are peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Rel {
    ProviderOf,
    Peer,
}

/// The BGP router software vemu reads (a node's `router`, its kind's): what a
/// `valley_free` check asks and `vemu report bgp` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BgpSoftware {
    Bird,
    Frr,
}

impl BgpSoftware {
    /// The software of a node's `router`, if it is one vemu reads.
    pub fn of(router: Option<&str>) -> Option<BgpSoftware> {
        match router {
            Some("bird") => Some(BgpSoftware::Bird),
            Some("frr") => Some(BgpSoftware::Frr),
            _ => None,
        }
    }

    /// Its name (its router kind's).
    pub fn name(self) -> &'static str {
        match self {
            BgpSoftware::Bird => "bird",
            BgpSoftware::Frr => "frr",
        }
    }

    /// The command that lists a router's routes with their AS paths (what a
    /// `valley_free` check reads).
    pub fn routes_command(self) -> &'static [&'static str] {
        match self {
            BgpSoftware::Bird => &["birdc", "show", "route", "all"],
            BgpSoftware::Frr => &["vtysh", "-c", "show bgp ipv4 unicast json"],
        }
    }

    /// The AS paths in the answer to [`BgpSoftware::routes_command`], the neighbour first.
    pub fn as_paths(self, out: &str) -> Result<Vec<Vec<u32>>, String> {
        match self {
            BgpSoftware::Bird => Ok(bird_as_paths(out)),
            BgpSoftware::Frr => frr_as_paths(out),
        }
    }
}

/// An AS graph: AS numbers and relationships between them (indices into `ases`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AsGraph {
    pub ases: Vec<u32>,
    pub rels: Vec<(usize, usize, Rel)>,
}

pub(crate) fn parse_line(l: &str) -> Result<(u32, u32, Rel), String> {
    let f: Vec<&str> = l.split('|').collect();
    if !(3..=4).contains(&f.len()) {
        return Err(format!("expected A|B|REL or A|B|REL|SOURCE, got '{l}'"));
    }
    let asn = |s: &str| s.trim().parse::<u32>().map_err(|_| format!("'{s}' is not an AS number"));
    let rel = match f[2].trim() {
        "-1" => Rel::ProviderOf,
        "0" => Rel::Peer,
        r => {
            return Err(format!(
                "relationship '{r}' is neither -1 (provider to customer) nor 0 (peers)"
            ))
        }
    };
    Ok((asn(f[0])?, asn(f[1])?, rel))
}

/// Read an AS-relationship text (`file` names it in errors, with the line).
pub fn parse_as_rel(text: &str, file: &str) -> Result<AsGraph, String> {
    let mut g = AsGraph::default();
    let mut index: HashMap<u32, usize> = HashMap::new();
    let mut seen: HashMap<(usize, usize), usize> = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let (a, b, rel) = parse_line(l).map_err(|e| format!("{file}:{}: {e}", i + 1))?;
        if a == b {
            return Err(format!("{file}:{}: AS {a} related to itself", i + 1));
        }
        let mut at = |asn: u32| {
            *index.entry(asn).or_insert_with(|| {
                g.ases.push(asn);
                g.ases.len() - 1
            })
        };
        let (x, y) = (at(a), at(b));
        if let Some(first) = seen.insert((x.min(y), x.max(y)), i + 1) {
            return Err(format!(
                "{file}:{}: AS {a} and AS {b} are related twice (line {first} too)",
                i + 1
            ));
        }
        g.rels.push((x, y, rel));
    }
    if g.rels.is_empty() {
        return Err(format!("{file}: no relationships (lines A|B|REL)"));
    }
    Ok(g)
}

/// What one AS is to another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Neighbour {
    Customer,
    Peer,
    Provider,
}

impl AsGraph {
    /// What AS `b` is to AS `a`, for every related pair (by AS number).
    pub fn neighbours(&self) -> HashMap<(u32, u32), Neighbour> {
        let mut m = HashMap::with_capacity(2 * self.rels.len());
        for &(a, b, r) in &self.rels {
            let (a, b) = (self.ases[a], self.ases[b]);
            let (to_a, to_b) = match r {
                Rel::ProviderOf => (Neighbour::Customer, Neighbour::Provider),
                Rel::Peer => (Neighbour::Peer, Neighbour::Peer),
            };
            m.insert((a, b), to_a);
            m.insert((b, a), to_b);
        }
        m
    }
}

/// Whether an AS path (the AS holding the route first, its origin last; prepending
/// allowed) is valley-free: read from the origin, the announcement went up from
/// customer to provider, crossed at most one peering, then only down to customers.
/// Why not, if it is not.
pub fn valley_free(
    path: &[u32],
    neighbours: &HashMap<(u32, u32), Neighbour>,
) -> Result<(), String> {
    let mut hops: Vec<u32> = path.to_vec();
    hops.dedup();
    let mut down = false;
    for w in hops.windows(2).rev() {
        // The announcement went from w[1] to w[0]: what w[0] is to w[1].
        let (from, to) = (w[1], w[0]);
        match (neighbours.get(&(from, to)), down) {
            (None, _) => return Err(format!("AS {from} and AS {to} have no relationship")),
            (Some(Neighbour::Provider), false) => {}
            (Some(Neighbour::Peer), false) | (Some(Neighbour::Customer), _) => down = true,
            (Some(n), true) => {
                let what = if *n == Neighbour::Peer { "peer" } else { "provider" };
                return Err(format!(
                    "a valley: AS {from} passed a route on to AS {to}, its {what}, after it came down"
                ));
            }
        }
    }
    Ok(())
}

/// The AS paths of the BGP routes in BIRD's `birdc show route all` (its
/// `BGP.as_path: 1 2 3` lines), the neighbour first.
pub fn bird_as_paths(out: &str) -> Vec<Vec<u32>> {
    out.lines()
        .filter_map(|l| l.trim().strip_prefix("BGP.as_path:"))
        .map(|p| p.split_whitespace().filter_map(|a| a.parse().ok()).collect())
        .collect()
}

/// The AS paths of every route (best or not) in FRR's `show bgp ipv4 unicast json`,
/// the neighbour first; routes the router originates (an empty path) are left out.
pub fn frr_as_paths(json: &str) -> Result<Vec<Vec<u32>>, String> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("FRR's answer is not JSON: {e}"))?;
    let mut out = Vec::new();
    for paths in v["routes"].as_object().into_iter().flat_map(|r| r.values()) {
        for p in paths.as_array().into_iter().flatten() {
            let path: Vec<u32> = p["path"]
                .as_str()
                .unwrap_or("")
                .split_whitespace()
                .filter_map(|a| a.parse().ok())
                .collect();
            if !path.is_empty() {
                out.push(path);
            }
        }
    }
    Ok(out)
}

/// Whether AS `asn`'s BGP routes (their AS paths, the neighbour first) are all
/// valley-free in `graph` and at least `at_least` of them: why not, if not.
pub fn routes_valley_free(
    asn: u32,
    paths: &[Vec<u32>],
    graph: &AsGraph,
    at_least: usize,
) -> Result<usize, String> {
    let neighbours = graph.neighbours();
    for p in paths {
        let full: Vec<u32> = std::iter::once(asn).chain(p.iter().copied()).collect();
        valley_free(&full, &neighbours).map_err(|e| format!("the route along {full:?}: {e}"))?;
    }
    if paths.len() < at_least {
        return Err(format!("{} BGP routes, not yet {at_least}", paths.len()));
    }
    Ok(paths.len())
}
