//! `vemu report bgp`: the lab's BGP routers (BIRD and FRR), asked through the lab's API
//! in their nodes, and what they say ([`vemu_control::bgp`]).

use std::time::Instant;

use anyhow::Result;
use ipnet::IpNet;
use vemu_control::bgp::{self, AnsweredAt, RouterBgp, Software};
use vemu_control::client::Client;

use crate::lab::{ask_nodes, connect, exec_in, load_plan, resolve_lab, user};

/// The longest a command in a router may take, s.
const COMMAND_S: u64 = 20;

pub(crate) fn report_bgp(lab: Option<String>, prefix: Option<IpNet>, as_json: bool) -> Result<()> {
    let lab = resolve_lab(lab)?;
    let plan = load_plan(&lab)?;
    let routers: Vec<(String, Software)> = plan
        .nodes
        .iter()
        .filter(|n| n.kind.is_made())
        .filter_map(|n| Some((n.name.clone(), Software::of(n.router.as_deref())?)))
        .collect();
    if routers.is_empty() {
        return Err(user(format!(
            "lab '{lab}' has no BGP router vemu reads (nodes of kind bird or frr)"
        )));
    }
    let c = connect(&lab)?;
    let uptime_ns = c.get("/v1/lab")?["uptime_ns"].as_u64().unwrap_or(0);
    let since = Instant::now();
    let parts = ask_nodes(&lab, &routers, |c, (node, software)| {
        let answers = bgp::commands(*software, prefix)
            .iter()
            .map(|argv| run(c, node, argv))
            .collect::<Result<Vec<_>, String>>();
        let at = AnsweredAt {
            lab_ns: uptime_ns + since.elapsed().as_nanos() as u64,
            local_day_ms: local_day_ms(),
        };
        answers
            .and_then(|a| bgp::router(node, *software, &a, at))
            .unwrap_or_else(|e| RouterBgp { error: Some(e), ..RouterBgp::new(node, *software) })
    })?;
    let answered_ns = uptime_ns + since.elapsed().as_nanos() as u64;
    let r = bgp::report(prefix, parts, answered_ns);
    if as_json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print_report(&lab, &r);
    }
    Ok(())
}

/// `argv` in `node` through the lab's API: its output, or why not.
fn run(c: &Client, node: &str, argv: &[String]) -> Result<String, String> {
    let v = exec_in(c, node, argv, COMMAND_S).map_err(|e| format!("{}: {e:#}", argv[0]))?;
    match v["exit"].as_i64() {
        Some(0) => Ok(v["stdout"].as_str().unwrap_or_default().to_string()),
        code => Err(format!(
            "{} exited with {}: {}",
            argv.join(" "),
            code.map_or("no status".to_string(), |c| c.to_string()),
            v["stderr"].as_str().unwrap_or_default().trim()
        )),
    }
}

/// The local time of day now, ms since midnight (as BIRD prints its times).
fn local_day_ms() -> u64 {
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = now.as_secs() as libc::time_t;
    // SAFETY: tm is plain data, filled by localtime_r from a valid time_t.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    if unsafe { libc::localtime_r(&secs, &mut tm) }.is_null() {
        return (now.as_millis() % 86_400_000) as u64;
    }
    ((tm.tm_hour as u64 * 60 + tm.tm_min as u64) * 60 + tm.tm_sec as u64) * 1000
        + now.subsec_millis() as u64
}

fn secs(ns: u64) -> String {
    format!("{:.1} s", ns as f64 / 1e9)
}

fn print_report(lab: &str, r: &bgp::BgpReport) {
    println!(
        "lab {lab}: {} BGP routers, {} sessions ({} established); updates sent {}, received {}",
        r.routers.len(),
        r.sessions,
        r.established,
        r.updates_sent,
        r.updates_received
    );
    match (r.last_change_ns, &r.last_change_node) {
        (Some(t), Some(node)) => println!(
            "last route change at {} of the lab clock ({node}), {} before these answers{}",
            secs(t),
            secs(r.answered_ns.saturating_sub(t)),
            if r.established < r.sessions { "" } else { ": converged since, if nothing changes" }
        ),
        _ => println!("no router has a BGP route yet"),
    }
    let path_head = match r.prefix {
        Some(p) => format!("PATH TO {p}"),
        None => String::new(),
    };
    println!(
        "{:<10} {:<16} {:<8} {:>8} {:>5} {:>8} {:>8} {:>12}  {path_head}",
        "AS", "NODE", "SOFTWARE", "SESSIONS", "UP", "SENT", "RECEIVED", "LAST CHANGE"
    );
    for x in &r.routers {
        let software = x.software.name();
        if let Some(e) = &x.error {
            println!("{:<10} {:<16} {software:<8} {e}", "?", x.node);
            continue;
        }
        let path = match (&r.prefix, &x.path) {
            (None, _) => String::new(),
            (Some(_), None) => "no route".to_string(),
            (Some(_), Some(p)) if p.is_empty() => "(its own)".to_string(),
            (Some(_), Some(p)) => p.iter().map(u32::to_string).collect::<Vec<_>>().join(" "),
        };
        println!(
            "{:<10} {:<16} {software:<8} {:>8} {:>5} {:>8} {:>8} {:>12}  {path}",
            x.asn.map_or("?".to_string(), |a| a.to_string()),
            x.node,
            x.sessions,
            x.established,
            x.updates_sent,
            x.updates_received,
            x.last_change_ns.map_or("-".to_string(), secs),
        );
    }
    if let Some(p) = r.prefix {
        println!("{} of {} routers have a route to {p}", r.reaching, r.routers.len());
    }
    let uses = |s: Software| r.routers.iter().any(|x| x.software == s);
    if uses(Software::Bird) {
        println!("(BIRD counts routes announced and withdrawn; its last change is its newest route's, to the ms)");
    }
    if uses(Software::Frr) {
        println!("(FRR counts UPDATE messages; its last change is its last UPDATE received, to the second)");
    }
}
