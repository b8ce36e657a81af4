//! An AS-level Internet from an AS-relationship file (CAIDA's serial-1 `A|B|REL` and
//! serial-2 `A|B|REL|SOURCE`: REL −1 = A is B's provider, 0 = peers): one router per
//! AS (BIRD, or FRR with `--router frr`), an eBGP session per relationship with Gao–Rexford policies (customer routes
//! preferred over peers' over providers'; customer routes and the AS's own exported to
//! everyone, peer and provider routes to customers only), one announced /24 per AS,
//! hosts in chosen ASes. [`generate_as_rel`] makes a file of the same form for tests.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write;
use std::path::Path;

use super::Imported;
use crate::asgraph::parse_line;
pub use crate::asgraph::{
    bird_as_paths, frr_as_paths, parse_as_rel, routes_valley_free, valley_free, AsGraph, Neighbour,
    Rel,
};

/// Largest AS-relationship file read (CAIDA's full graph is ~10 MB).
pub const MAX_AS_REL_BYTES: u64 = 64 << 20;
/// Most ASes a lab is made of (one /24 of 10.0.0.0/8 each).
pub const MAX_ASES: usize = 65_536;
/// Most relationships a lab is made of (one /31 of 172.16.0.0/12 each).
pub const MAX_RELATIONSHIPS: usize = 1 << 19;

/// What to make of an AS graph.
#[derive(Debug, Clone, Default)]
pub struct AsOptions {
    /// The N ASes with the largest customer cones.
    pub top: Option<usize>,
    /// These ASes and every provider above them.
    pub ases: Vec<u32>,
    /// ASes that get a host (`h<ASN>`) in their prefix; `all_hosts`: every AS.
    pub hosts: Vec<u32>,
    pub all_hosts: bool,
    /// The routing software in every AS's router.
    pub router: AsRouter,
    /// IXPs: each the ASes that peer at it through its route server.
    pub ixps: Vec<Vec<u32>>,
}

/// Most IXPs a lab is made of (one /24 of 100.64.0.0/10 each), and most members of one
/// (the route server is .1 of it, the members .2 up).
pub const MAX_IXPS: usize = 16_384;
pub const MAX_IXP_MEMBERS: usize = 253;

/// The `i`th IXP's route server's AS (a private 4-byte AS: 4,200,000,000 + i).
pub fn ixp_rs_asn(i: usize) -> u32 {
    4_200_000_000 + i as u32
}

/// Address `host` of the `i`th IXP's peering LAN, 100.(64 + i/256).(i%256).0/24.
fn ixp_addr(i: usize, host: usize) -> String {
    format!("100.{}.{}.{host}", 64 + (i >> 8), i & 255)
}

/// The routing software of an AS's router: a node kind (docs/images.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AsRouter {
    #[default]
    Bird,
    Frr,
}

impl AsRouter {
    /// `bird` or `frr`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "bird" => Ok(Self::Bird),
            "frr" => Ok(Self::Frr),
            _ => Err(format!("--router: expected 'bird' or 'frr', got '{s}'")),
        }
    }

    /// The node kind (and the software's name in messages).
    pub fn kind(self) -> &'static str {
        match self {
            Self::Bird => "bird",
            Self::Frr => "frr",
        }
    }
}

/// Whether `path` looks like an AS-relationship file: its first line that is not a
/// comment is `A|B|REL[|SOURCE]`.
/// Only its first 64 KiB are read (CAIDA's files open with a few comment lines).
pub fn is_as_rel(path: &Path) -> bool {
    use std::io::Read;
    let mut head = Vec::new();
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let Ok(f) = std::fs::File::open(path) else { return false };
    if f.take(64 << 10).read_to_end(&mut head).is_err() {
        return false;
    }
    String::from_utf8_lossy(&head)
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .is_some_and(|l| parse_line(l).is_ok())
}

impl AsGraph {
    /// Each AS's customers.
    fn customers(&self) -> Vec<Vec<usize>> {
        let mut c = vec![Vec::new(); self.ases.len()];
        for &(a, b, r) in &self.rels {
            if r == Rel::ProviderOf {
                c[a].push(b);
            }
        }
        c
    }

    /// Each AS's customer cone: itself and every AS below it, following provider to
    /// customer.
    pub fn cone_sizes(&self) -> Vec<usize> {
        let customers = self.customers();
        let mut stamp = vec![usize::MAX; self.ases.len()];
        (0..self.ases.len())
            .map(|root| {
                let mut stack = vec![root];
                let mut size = 0;
                while let Some(x) = stack.pop() {
                    if stamp[x] != root {
                        stamp[x] = root;
                        size += 1;
                        stack.extend(customers[x].iter().copied().filter(|&y| stamp[y] != root));
                    }
                }
                size
            })
            .collect()
    }

    /// The ASes of a lab: the `top` largest cones (ties to the lower AS number), or the
    /// listed ASes with every provider above them, or all.
    pub fn select(&self, o: &AsOptions) -> Result<Vec<usize>, String> {
        if let Some(n) = o.top {
            let cones = self.cone_sizes();
            let mut order: Vec<usize> = (0..self.ases.len()).collect();
            order.sort_by_key(|&i| (std::cmp::Reverse(cones[i]), self.ases[i]));
            order.truncate(n);
            order.sort_unstable();
            return Ok(order);
        }
        if o.ases.is_empty() {
            return Ok((0..self.ases.len()).collect());
        }
        let index: HashMap<u32, usize> =
            self.ases.iter().enumerate().map(|(i, a)| (*a, i)).collect();
        let mut providers = vec![Vec::new(); self.ases.len()];
        for &(a, b, r) in &self.rels {
            if r == Rel::ProviderOf {
                providers[b].push(a);
            }
        }
        let mut chosen = BTreeSet::new();
        let mut stack = Vec::new();
        for asn in &o.ases {
            stack.push(*index.get(asn).ok_or_else(|| format!("AS {asn} is not in the file"))?);
        }
        while let Some(x) = stack.pop() {
            if chosen.insert(x) {
                stack.extend(providers[x].iter().copied());
            }
        }
        Ok(chosen.into_iter().collect())
    }
}

/// Read `path` (an AS-relationship file) and make a lab of it (`name`: default the
/// file's name).
pub fn as_rel_file(path: &Path, name: Option<&str>, o: &AsOptions) -> Result<Imported, String> {
    let text = crate::read_limited(path, MAX_AS_REL_BYTES)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let stem = path.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = stem.split('.').next().unwrap_or("internet").to_string();
    let g = parse_as_rel(&text, &path.display().to_string())?;
    as_rel(&g, &path.display().to_string(), name.unwrap_or(&stem), o)
}

/// The AS's prefix (10.X.Y.0/24 for the `i`th AS of the lab) and its first address.
fn prefix(i: usize) -> (String, String) {
    let (x, y) = (i >> 8, i & 255);
    (format!("10.{x}.{y}.0/24"), format!("10.{x}.{y}.1"))
}

/// The two ends' addresses of the `k`th relationship's link (a /31 of 172.16.0.0/12).
fn link_addrs(k: usize) -> [String; 2] {
    let base = (172u32 << 24) | (16 << 16) | (2 * k as u32);
    [base, base + 1].map(|a| std::net::Ipv4Addr::from(a).to_string())
}

/// A lab of the ASes `o` selects from `g`.
pub fn as_rel(g: &AsGraph, file: &str, stem: &str, o: &AsOptions) -> Result<Imported, String> {
    let chosen = g.select(o)?;
    if chosen.len() > MAX_ASES {
        return Err(format!(
            "{file}: {} ASes chosen, at most {MAX_ASES} (use --top N or --ases)",
            chosen.len()
        ));
    }
    let local: HashMap<usize, usize> = chosen.iter().enumerate().map(|(k, &i)| (i, k)).collect();
    let rels: Vec<(usize, usize, Rel)> = g
        .rels
        .iter()
        .filter_map(|&(a, b, r)| Some((*local.get(&a)?, *local.get(&b)?, r)))
        .collect();
    if rels.len() > MAX_RELATIONSHIPS {
        return Err(format!(
            "{file}: {} relationships among the chosen ASes, at most {MAX_RELATIONSHIPS}",
            rels.len()
        ));
    }
    let asn = |k: usize| g.ases[chosen[k]];
    let lab = super::clean_name(stem, "internet");
    let mut warnings = Vec::new();
    // Each AS's sessions: (its interface's address, the neighbour's, the neighbour's AS,
    // what the neighbour is to it).
    let mut sessions: Vec<Vec<Session>> = vec![Vec::new(); chosen.len()];
    for (k, &(a, b, r)) in rels.iter().enumerate() {
        let [x, y] = link_addrs(k);
        let (to_a, to_b) = match r {
            Rel::ProviderOf => (Party::Customer, Party::Provider),
            Rel::Peer => (Party::Peer, Party::Peer),
        };
        sessions[a].push((x.clone(), y.clone(), asn(b), to_a));
        sessions[b].push((y, x, asn(a), to_b));
    }
    let ixps = ixp_members(
        o,
        &chosen.iter().map(|&i| g.ases[i]).collect::<Vec<_>>(),
        &mut sessions,
        &mut warnings,
    )?;
    let hosts: BTreeSet<u32> = o.hosts.iter().copied().collect();
    for h in &hosts {
        if !chosen.iter().any(|&i| g.ases[i] == *h) {
            return Err(format!("--hosts: AS {h} is not among the lab's ASes"));
        }
    }
    let mut out = String::new();
    let kind = o.router.kind();
    let _ = writeln!(
        out,
        "# Made by `vemu import` from the AS relationships of {file}: one {} router per AS",
        if o.router == AsRouter::Bird { "BIRD" } else { "FRR" }
    );
    let _ = writeln!(
        out,
        "# (as<ASN>), eBGP with Gao-Rexford policies, AS k's prefix 10.(k/256).(k%256).0/24."
    );
    let _ =
        writeln!(out, "name: {lab}\naddressing: {{ipv4: none, ipv6: none}}\nrouting: none\nnodes:");
    let mut host_links = Vec::new();
    for (k, sessions) in sessions.iter().enumerate() {
        let (net, first) = prefix(k);
        let with_host = o.all_hosts || hosts.contains(&asn(k));
        if sessions.is_empty() {
            warnings.push(format!("AS {} has no relationship with another chosen AS", asn(k)));
        }
        let conf = match o.router {
            AsRouter::Bird => bird_config(asn(k), &first, &net, sessions),
            AsRouter::Frr => frr_config(asn(k), &first, &net, sessions),
        };
        let _ = writeln!(
            out,
            "  as{}:\n    kind: {kind}\n    vars: {{asn: '{}', prefix: '{net}'}}",
            asn(k),
            asn(k)
        );
        if !with_host {
            let _ = writeln!(out, "    loopback: [{first}/32]");
        }
        let _ = writeln!(out, "    startup-config: {}", super::q(&conf));
        if with_host {
            let host_ip = format!("10.{}.{}.2", k >> 8, k & 255);
            let _ = writeln!(out, "  h{}:\n    routes: [{{dst: 0.0.0.0/0, via: {first}}}]", asn(k));
            host_links.push(format!(
                "  - endpoints: [{{node: as{a}, ip: [{first}/24]}}, {{node: h{a}, ip: [{host_ip}/24]}}]",
                a = asn(k)
            ));
        }
    }
    for (i, members) in ixps.iter().enumerate() {
        let sessions: Vec<(String, u32)> =
            members.iter().enumerate().map(|(j, &k)| (ixp_addr(i, j + 2), asn(k))).collect();
        let conf = route_server_config(ixp_rs_asn(i), &ixp_addr(i, 1), &sessions);
        let _ = writeln!(out, "  rs{i}:\n    kind: bird\n    startup-config: {}", super::q(&conf));
    }
    if !ixps.is_empty() {
        let _ = writeln!(out, "segments:");
    }
    for (i, members) in ixps.iter().enumerate() {
        let _ = writeln!(
            out,
            "  ixp{i}:\n    kind: lan\n    ipv4: {}/24\n    members:\n      - {{node: rs{i}, ip: {}/24}}",
            ixp_addr(i, 0),
            ixp_addr(i, 1)
        );
        for (j, &k) in members.iter().enumerate() {
            let _ = writeln!(out, "      - {{node: as{}, ip: {}/24}}", asn(k), ixp_addr(i, j + 2));
        }
    }
    let _ = writeln!(out, "links:");
    for (k, &(a, b, _)) in rels.iter().enumerate() {
        let [x, y] = link_addrs(k);
        let _ = writeln!(
            out,
            "  - endpoints: [{{node: as{}, ip: [{x}/31]}}, {{node: as{}, ip: [{y}/31]}}]",
            asn(a),
            asn(b)
        );
    }
    for l in &host_links {
        let _ = writeln!(out, "{l}");
    }
    crate::load_str_in(&out, &format!("{lab}.yaml"), &lab, None, None)
        .map_err(|e| format!("{file}: the scenario made from it is not valid: {e}"))?;
    let nodes = chosen.len() + host_links.len() + ixps.len();
    Ok(Imported { yaml: out, nodes, links: rels.len() + host_links.len(), warnings })
}

/// Each IXP of `o` as its members' numbers in the lab (`asns`: the lab's ASes), checked;
/// each member gets a session to the IXP's route server, as to a peer.
fn ixp_members(
    o: &AsOptions,
    asns: &[u32],
    sessions: &mut [Vec<Session>],
    warnings: &mut Vec<String>,
) -> Result<Vec<Vec<usize>>, String> {
    if o.ixps.len() > MAX_IXPS {
        return Err(format!("--ixp: {} IXPs, at most {MAX_IXPS}", o.ixps.len()));
    }
    let mut ixps: Vec<Vec<usize>> = Vec::new();
    let k_of: HashMap<u32, usize> = asns.iter().enumerate().map(|(k, &a)| (a, k)).collect();
    for (i, members) in o.ixps.iter().enumerate() {
        let mut m: Vec<usize> = Vec::new();
        for a in members {
            let Some(&k) = k_of.get(a) else {
                return Err(format!("--ixp {}: AS {a} is not among the lab's ASes", i + 1));
            };
            if m.contains(&k) {
                return Err(format!("--ixp {}: AS {a} is named twice", i + 1));
            }
            m.push(k);
        }
        if !(2..=MAX_IXP_MEMBERS).contains(&m.len()) {
            return Err(format!(
                "--ixp {}: {} members, an IXP has 2 to {MAX_IXP_MEMBERS}",
                i + 1,
                m.len()
            ));
        }
        for (j, &k) in m.iter().enumerate() {
            sessions[k].push((
                ixp_addr(i, j + 2),
                ixp_addr(i, 1),
                ixp_rs_asn(i),
                Party::RouteServer,
            ));
        }
        warnings.push(format!(
            "IXP {} (ixp{i}, route server rs{i}): its members peer through it, which a valley_free check sees only if its relationships file has them as peers (A|B|0)",
            i + 1
        ));
        ixps.push(m);
    }
    Ok(ixps)
}

/// BIRD's configuration of AS `asn` (router id `rid`, its prefix `net`): its sessions
/// are (local address, neighbour's, neighbour's AS, `customer` | `peer` | `provider`).
/// A route learned from a neighbour is marked with the large community (ASN, 1, 1|2|3:
/// from a customer, peer, provider) and preferred in that order (local preference 300,
/// 200, 100); to customers go every route, to peers and providers the AS's own and its
/// customers' (the marks are taken off before a route leaves).
fn bird_config(asn: u32, rid: &str, net: &str, sessions: &[Session]) -> String {
    let mut c = format!(
        "log syslog all;
router id {rid};
define ASN = {asn};
protocol device {{ scan time 10; }}
protocol kernel {{ ipv4 {{ export where source = RTS_BGP; }}; }}
protocol static own {{ ipv4; route {net} unreachable; }}
function mark(int rel) {{ bgp_large_community.delete([(ASN, 1, *)]); bgp_large_community.add((ASN, 1, rel)); }}
filter from_customer {{ bgp_local_pref = 300; mark(1); accept; }}
filter from_peer {{ bgp_local_pref = 200; mark(2); accept; }}
filter from_provider {{ bgp_local_pref = 100; mark(3); accept; }}
filter to_customer {{
  if source = RTS_STATIC then accept;
  if source != RTS_BGP then reject;
  bgp_large_community.delete([(ASN, 1, *)]);
  accept;
}}
filter to_peer {{
  if source = RTS_STATIC then accept;
  if (ASN, 1, 1) ~ bgp_large_community then {{ bgp_large_community.delete([(ASN, 1, *)]); accept; }}
  reject;
}}
template bgp neighbour {{
  local as ASN;
  hold time 9; keepalive time 3; connect delay time 1; connect retry time 1; error wait time 1, 10;
}}
"
    );
    for (i, (local, remote, peer_as, what)) in sessions.iter().enumerate() {
        let (import, export) = what.filters();
        let _ = write!(
            c,
            "protocol bgp {}{i} from neighbour {{\n  description \"AS{peer_as}, {}\";\n  local {local};\n  neighbor {remote} as {peer_as};\n  ipv4 {{ import filter {import}; export filter {export}; }};\n}}\n",
            what.name(),
            what.described()
        );
    }
    c
}

/// One session of an AS's router: its interface's address, the neighbour's, the
/// neighbour's AS and what the neighbour is to it.
type Session = (String, String, u32, Party);

/// What a neighbour is to an AS: which Gao–Rexford policy its sessions get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Party {
    Customer,
    Peer,
    Provider,
    /// An IXP's route server: it passes its members' routes on as they are, so they
    /// are peers' routes (its AS is not in their paths: BIRD does not enforce the
    /// first AS by default, FRR is told not to).
    RouteServer,
}

impl Party {
    /// Its name in BIRD's protocol names.
    fn name(self) -> &'static str {
        match self {
            Party::Customer => "customer",
            Party::Peer => "peer",
            Party::Provider => "provider",
            Party::RouteServer => "ixp",
        }
    }

    /// What it is, in the sessions' descriptions.
    fn described(self) -> &'static str {
        match self {
            Party::Customer => "a customer",
            Party::Peer => "a peer",
            Party::Provider => "a provider",
            Party::RouteServer => "an IXP's route server",
        }
    }

    /// The import and export filters of its sessions (BIRD's names; FRR's route-maps
    /// are them in capitals): routes from customers are preferred over peers' over
    /// providers', and only customers get routes learned from peers and providers.
    fn filters(self) -> (&'static str, &'static str) {
        match self {
            Party::Customer => ("from_customer", "to_customer"),
            Party::Peer | Party::RouteServer => ("from_peer", "to_peer"),
            Party::Provider => ("from_provider", "to_peer"),
        }
    }
}

/// BIRD's configuration of an IXP's route server (AS `asn`, address `addr`): one
/// session per member (its address and AS), `rs client`: the members' routes passed on
/// to the other members as they are (no AS of its own in their paths, their next hops
/// kept), whatever the members export to it — their own routes and their customers',
/// as to any peer. It installs nothing in its kernel: traffic goes from member to member
/// across the LAN.
fn route_server_config(asn: u32, addr: &str, members: &[(String, u32)]) -> String {
    let mut c = format!(
        "log syslog all;
router id {addr};
protocol device {{ scan time 10; }}
template bgp rs_client {{
  local {addr} as {asn};
  rs client;
  hold time 9; keepalive time 3; connect delay time 1; connect retry time 1; error wait time 1, 10;
  ipv4 {{ import all; export all; }};
}}
"
    );
    for (i, (remote, member_as)) in members.iter().enumerate() {
        let _ = write!(
            c,
            "protocol bgp client{i} from rs_client {{\n  description \"AS{member_as}\";\n  neighbor {remote} as {member_as};\n}}\n"
        );
    }
    c
}

/// FRR's configuration of AS `asn`, the same policies as [`bird_config`]'s: routes
/// from a customer, peer, provider get the large community (ASN:1:1|2|3) and local
/// preference 300, 200, 100; customers get every route, peers and providers the AS's own
/// prefix and its customers' routes; the marks are taken off before a route leaves.
fn frr_config(asn: u32, rid: &str, net: &str, sessions: &[Session]) -> String {
    let mut c = format!(
        "frr defaults traditional
hostname as{asn}
log syslog informational
ip prefix-list OWN seq 5 permit {net}
bgp large-community-list standard FROM_CUSTOMER permit {asn}:1:1
bgp large-community-list standard MARKS permit {asn}:1:1
bgp large-community-list standard MARKS permit {asn}:1:2
bgp large-community-list standard MARKS permit {asn}:1:3
route-map FROM_CUSTOMER permit 10
 set large-community {asn}:1:1 additive
 set local-preference 300
route-map FROM_PEER permit 10
 set large-community {asn}:1:2 additive
 set local-preference 200
route-map FROM_PROVIDER permit 10
 set large-community {asn}:1:3 additive
 set local-preference 100
route-map TO_CUSTOMER permit 10
 set large-comm-list MARKS delete
route-map TO_PEER permit 10
 match ip address prefix-list OWN
route-map TO_PEER permit 20
 match large-community FROM_CUSTOMER
 set large-comm-list MARKS delete
route-map TO_PEER deny 30
router bgp {asn}
 bgp router-id {rid}
 no bgp ebgp-requires-policy
 no bgp network import-check
 timers bgp 3 9
"
    );
    for (_, remote, peer_as, what) in sessions {
        let _ = write!(
            c,
            " neighbor {remote} remote-as {peer_as}\n neighbor {remote} description AS{peer_as}, {}\n neighbor {remote} timers connect 1\n",
            what.described()
        );
    }
    let _ = write!(c, " address-family ipv4 unicast\n  network {net}\n");
    for (_, remote, _, what) in sessions {
        let (import, export) = what.filters();
        let (import, export) = (import.to_uppercase(), export.to_uppercase());
        let _ = write!(
            c,
            "  neighbor {remote} route-map {import} in\n  neighbor {remote} route-map {export} out\n"
        );
    }
    c.push_str(" exit-address-family\n");
    c
}

/// A made-up AS graph of `n` ASes in CAIDA's serial-1 form, decided by `seed`: a clique
/// of peering tier-1 ASes (2–5), then each AS with one or two providers among those
/// before it, chosen in proportion to their customers (a few large transit providers
/// emerge), and a peering with an AS of about its size now and then. AS numbers are
/// private: 64512 + i (4,200,000,000 + i past 1,022).
pub fn generate_as_rel(n: usize, seed: u64) -> String {
    let asn = |i: usize| if i < 1022 { 64512 + i as u64 } else { 4_200_000_000 + i as u64 };
    let mut state = vemu_radio::splitmix64(seed);
    let mut next = move || {
        state = state.wrapping_add(1);
        vemu_radio::splitmix64(state)
    };
    let mut below = |m: usize| ((next() as u128 * m as u128) >> 64) as usize;
    let tier1 = (n / 10).clamp(2, 5).min(n);
    let mut out = format!("# A made-up AS graph of {n} ASes (vemu import --as-graph {n} --seed {seed}): A|B|-1 A is B's provider, A|B|0 peers\n");
    // Each AS as often as it has customers, plus once: providers are drawn from it.
    let mut weight: Vec<usize> = Vec::new();
    let mut related: BTreeSet<(usize, usize)> = BTreeSet::new();
    for a in 0..tier1 {
        for b in a + 1..tier1 {
            let _ = writeln!(out, "{}|{}|0", asn(a), asn(b));
            related.insert((a, b));
        }
        weight.push(a);
    }
    for i in tier1..n {
        let providers = if i > tier1 && below(3) == 0 { 2 } else { 1 };
        let mut chosen: Vec<usize> = Vec::new();
        while chosen.len() < providers {
            let p = weight[below(weight.len())];
            if !chosen.contains(&p) {
                chosen.push(p);
            }
            if chosen.len() < providers && weight.iter().all(|w| chosen.contains(w)) {
                break;
            }
        }
        for &p in &chosen {
            let _ = writeln!(out, "{}|{}|-1", asn(p), asn(i));
            related.insert((p, i));
            weight.push(p);
        }
        weight.push(i);
        // Now and then a peer of about its age that is not already related to it.
        if i > tier1 + 2 && below(4) == 0 {
            let q = tier1 + below(i - tier1);
            if !related.contains(&(q.min(i), q.max(i))) {
                let _ = writeln!(out, "{}|{}|0", asn(q), asn(i));
                related.insert((q.min(i), q.max(i)));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serial_1_and_2_are_read_with_their_errors_at_their_line() {
        let g = parse_as_rel("# c\n1|2|-1\n2|3|0|bgp\n\n1|4|-1\n", "f").unwrap();
        assert_eq!(g.ases, [1, 2, 3, 4]);
        assert_eq!(g.rels, [(0, 1, Rel::ProviderOf), (1, 2, Rel::Peer), (0, 3, Rel::ProviderOf)]);
        assert_eq!(g.cone_sizes(), [3, 1, 1, 1]);
        for (text, msg) in [
            ("1|2|5\n", "f:1: relationship '5'"),
            ("1|2\n", "f:1: expected A|B|REL"),
            ("1|x|0\n", "f:1: 'x' is not an AS number"),
            ("1|2|0\n2|1|-1\n", "f:2: AS 2 and AS 1 are related twice (line 1 too)"),
            ("3|3|0\n", "itself"),
            ("# nothing\n", "no relationships"),
        ] {
            let e = parse_as_rel(text, "f").unwrap_err();
            assert!(e.contains(msg), "{e}");
        }
    }

    #[test]
    fn top_ases_by_cone_and_listed_ases_with_their_providers() {
        let g = parse_as_rel("1|2|0\n1|3|-1\n3|4|-1\n2|5|-1\n5|6|-1\n5|7|-1\n", "f").unwrap();
        let top = |n| g.select(&AsOptions { top: Some(n), ..Default::default() }).unwrap();
        let asns = |v: Vec<usize>| v.into_iter().map(|i| g.ases[i]).collect::<Vec<_>>();
        // Cones: 1: {1,3,4}, 2: {2,5,6,7}, 5: {5,6,7}.
        assert_eq!(asns(top(2)), [1, 2]);
        assert_eq!(asns(top(3)), [1, 2, 5]);
        let listed = g.select(&AsOptions { ases: vec![4, 6], ..Default::default() }).unwrap();
        assert_eq!(asns(listed), [1, 2, 3, 4, 5, 6]);
        assert!(g.select(&AsOptions { ases: vec![9], ..Default::default() }).is_err());
    }

    #[test]
    fn valley_free_paths_go_up_across_one_peering_and_down() {
        // 1 and 2 peer at the top; 3 under 1, 4 under 2, 5 under 3 and 4.
        let g = parse_as_rel("1|2|0\n1|3|-1\n2|4|-1\n3|5|-1\n4|5|-1\n3|4|0\n", "f").unwrap();
        let n = g.neighbours();
        for ok in
            [&[5, 3, 1, 2, 4][..], &[3, 1], &[1, 3, 5], &[3, 4], &[3, 3, 4, 4], &[5, 3, 4], &[5]]
        {
            assert_eq!(valley_free(ok, &n), Ok(()), "{ok:?}");
        }
        // (Held by 3, from 4 through 5: 5 passed its provider's route to another provider.)
        for (bad, why) in [
            (&[3, 5, 4][..], "AS 5 passed a route on to AS 3, its provider"),
            (&[1, 3, 4, 2][..], "AS 4 passed a route on to AS 3, its peer"),
            (&[2, 1, 3, 4][..], "AS 3 passed a route on to AS 1, its provider"),
            (&[1, 5][..], "no relationship"),
        ] {
            let e = valley_free(bad, &n).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }

    #[test]
    fn routes_are_read_from_bird_and_frr_and_judged_valley_free() {
        // 1 and 2 peer; 1 is 3's provider, 2 is 4's.
        let g = parse_as_rel("1|2|0\n1|3|-1\n2|4|-1\n", "f").unwrap();
        let bird = "10.0.3.0/24 unreachable [bgp1 12:00] * (100) [AS4i]\n\tBGP.as_path: 2 4\n\tBGP.local_pref: 200\n";
        use crate::asgraph::BgpSoftware::{Bird, Frr};
        assert_eq!(bird_as_paths(bird), vec![vec![2, 4]]);
        assert_eq!(Bird.as_paths(bird).unwrap(), vec![vec![2, 4]]);
        assert_eq!(Bird.routes_command(), ["birdc", "show", "route", "all"]);
        let frr = r#"{"routes": {"10.0.0.0/24": [{"path": ""}], "10.0.3.0/24": [{"path": "2 4", "bestpath": true}, {"path": "3 1 2 4"}]}}"#;
        assert_eq!(frr_as_paths(frr).unwrap(), vec![vec![2, 4], vec![3, 1, 2, 4]]);
        assert!(frr_as_paths("% Unknown command").unwrap_err().contains("not JSON"));
        assert_eq!(Frr.as_paths(frr), frr_as_paths(frr));
        assert_eq!(Frr.routes_command(), ["vtysh", "-c", "show bgp ipv4 unicast json"]);
        // At AS 1: up from 4 to 2, across to 1: valley-free, 1 route.
        assert_eq!(routes_valley_free(1, &[vec![2, 4]], &g, 1), Ok(1));
        assert!(routes_valley_free(1, &[vec![2, 4]], &g, 2).unwrap_err().contains("not yet 2"));
        // At AS 1, a route its customer 3 passed on from its provider 1 (a leak): a valley.
        let e = routes_valley_free(1, &[vec![3, 1, 2, 4]], &g, 0).unwrap_err();
        assert!(e.contains("[1, 3, 1, 2, 4]") && e.contains("a valley"), "{e}");
    }

    #[test]
    fn a_generated_graph_is_a_connected_hierarchy_of_the_same_form() {
        let text = generate_as_rel(60, 3);
        assert_eq!(text, generate_as_rel(60, 3));
        let g = parse_as_rel(&text, "gen").unwrap();
        assert_eq!(g.ases.len(), 60);
        // Every AS but the tier-1s has a provider; providers come before customers (no
        // provider loop).
        let mut has_provider = [false; 60];
        for &(a, b, r) in &g.rels {
            if r == Rel::ProviderOf {
                has_provider[b] = true;
                assert!(g.ases[a] < g.ases[b]);
            }
        }
        assert_eq!(has_provider.iter().filter(|h| !**h).count(), 5);
        assert!(g.rels.iter().any(|r| r.2 == Rel::Peer && r.0 >= 5), "some peering below tier 1");
        let cones = g.cone_sizes();
        assert!(cones.iter().take(5).sum::<usize>() >= 60, "tier 1 covers everyone");
    }

    #[test]
    fn a_lab_has_a_bird_router_per_as_with_its_policies() {
        let g = parse_as_rel("1|2|0\n1|3|-1\n2|4|-1\n", "f").unwrap();
        let o = AsOptions { hosts: vec![2, 3, 4], ..Default::default() };
        let i = as_rel(&g, "f", "net", &o).unwrap();
        assert_eq!((i.nodes, i.links), (7, 6));
        let plan = crate::load_str(&i.yaml, "net.yaml", "net", None).unwrap();
        let as1 = plan.nodes.iter().find(|n| n.name == "as1").unwrap();
        let conf = &as1.files.iter().find(|f| f.path == "/etc/bird/bird.conf").unwrap().content;
        assert!(conf.contains("neighbor 172.16.0.1 as 2;\n  ipv4 { import filter from_peer; export filter to_peer; }"), "{conf}");
        assert!(conf.contains("neighbor 172.16.0.3 as 3;\n  ipv4 { import filter from_customer; export filter to_customer; }"), "{conf}");
        assert!(conf.contains("route 10.0.0.0/24 unreachable"), "{conf}");
        assert_eq!(as1.loopback[0].to_string(), "10.0.0.1/32");
        let as3 = plan.nodes.iter().find(|n| n.name == "as3").unwrap();
        let conf3 = &as3.files.iter().find(|f| f.path == "/etc/bird/bird.conf").unwrap().content;
        assert!(conf3.contains("import filter from_provider; export filter to_peer;"), "{conf3}");
        assert!(as3.loopback.is_empty(), "its prefix's first address is on its host's link");
        // AS 2, the second, has 10.0.1.0/24: its router .1, its host .2.
        let h2 = plan.nodes.iter().find(|n| n.name == "h2").unwrap();
        assert_eq!(h2.ifaces[0].addrs[0].to_string(), "10.0.1.2/24");
        assert!(plan.nodes.iter().any(|n| n.name == "h4"));
        assert!(
            as_rel(&g, "f", "net", &AsOptions { hosts: vec![9], ..Default::default() }).is_err()
        );
    }

    #[test]
    fn an_ixp_is_a_lan_with_a_route_server_its_members_treat_as_a_peer() {
        let g = parse_as_rel("1|2|-1\n1|3|-1\n1|4|-1\n", "f").unwrap();
        let o = AsOptions { ixps: vec![vec![2, 3, 4]], ..Default::default() };
        let i = as_rel(&g, "f", "net", &o).unwrap();
        assert_eq!((i.nodes, i.links), (5, 3));
        let plan = crate::load_str(&i.yaml, "net.yaml", "net", None).unwrap();
        let lan = plan.segments.iter().find(|s| s.name == "ixp0").unwrap();
        assert_eq!(lan.members.len(), 4);
        let conf = |node: &str| {
            let n = plan.nodes.iter().find(|n| n.name == node).unwrap();
            n.files.iter().find(|f| f.path == "/etc/bird/bird.conf").unwrap().content.clone()
        };
        let rs = conf("rs0");
        assert!(rs.contains("local 100.64.0.1 as 4200000000;\n  rs client;"), "{rs}");
        assert!(rs.contains("neighbor 100.64.0.3 as 3;"), "{rs}");
        assert!(!rs.contains("protocol kernel"), "{rs}");
        let as3 = conf("as3");
        assert!(as3.contains("description \"AS4200000000, an IXP's route server\";\n  local 100.64.0.3;\n  neighbor 100.64.0.1 as 4200000000;\n  ipv4 { import filter from_peer; export filter to_peer; }"), "{as3}");
        // FRR members: the same, by route-maps.
        let frr = AsOptions { router: AsRouter::Frr, ..o.clone() };
        let i = as_rel(&g, "f", "net", &frr).unwrap();
        assert!(i.yaml.contains("neighbor 100.64.0.1 route-map FROM_PEER in"), "{}", i.yaml);
        // Mistakes: an AS not in the lab, one named twice, too few members.
        let bad = |ixp: Vec<u32>| {
            as_rel(&g, "f", "net", &AsOptions { ixps: vec![vec![2, 3], ixp], ..Default::default() })
                .unwrap_err()
        };
        assert_eq!(bad(vec![2, 9]), "--ixp 2: AS 9 is not among the lab's ASes");
        assert_eq!(bad(vec![3, 3]), "--ixp 2: AS 3 is named twice");
        assert_eq!(bad(vec![4]), "--ixp 2: 1 members, an IXP has 2 to 253");
    }

    #[test]
    fn with_frr_every_as_runs_frr_with_the_same_policies() {
        let g = parse_as_rel("1|2|0\n1|3|-1\n2|4|-1\n", "f").unwrap();
        let o = AsOptions { all_hosts: true, router: AsRouter::Frr, ..Default::default() };
        let i = as_rel(&g, "f", "net", &o).unwrap();
        let plan = crate::load_str(&i.yaml, "net.yaml", "net", None).unwrap();
        let as1 = plan.nodes.iter().find(|n| n.name == "as1").unwrap();
        let conf = &as1.files.iter().find(|f| f.path == "/etc/frr/frr.conf").unwrap().content;
        assert!(conf.contains("router bgp 1\n bgp router-id 10.0.0.1\n"), "{conf}");
        // AS 2 is AS 1's peer, AS 3 its customer: in and out by what they are.
        assert!(conf.contains("  neighbor 172.16.0.1 route-map FROM_PEER in\n  neighbor 172.16.0.1 route-map TO_PEER out"), "{conf}");
        assert!(conf.contains("  neighbor 172.16.0.3 route-map FROM_CUSTOMER in\n  neighbor 172.16.0.3 route-map TO_CUSTOMER out"), "{conf}");
        assert!(conf.contains("  network 10.0.0.0/24\n"), "{conf}");
        assert!(conf.contains("route-map FROM_CUSTOMER permit 10\n set large-community 1:1:1 additive\n set local-preference 300"), "{conf}");
        let as3 = plan.nodes.iter().find(|n| n.name == "as3").unwrap();
        let conf3 = &as3.files.iter().find(|f| f.path == "/etc/frr/frr.conf").unwrap().content;
        assert!(
            conf3.contains(
                "route-map FROM_PROVIDER in\n  neighbor 172.16.0.2 route-map TO_PEER out"
            ),
            "{conf3}"
        );
        assert_eq!(AsRouter::parse("frr"), Ok(AsRouter::Frr));
        assert!(AsRouter::parse("quagga").unwrap_err().contains("'bird' or 'frr'"));
    }
}
