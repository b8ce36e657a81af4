//! `vemu traffic` and `vemu report`: flows between nodes and what they measured.

use anyhow::Result;
use serde_json::json;
use vemu_control::labs::LabPaths;
use vemu_control::Client;

use crate::cli::TrafficCmd;
use crate::lab::{connect, resolve_lab, user};
use crate::traffic;

/// `vemu traffic cbr`: a constant-bit-rate flow between two nodes.
pub(crate) fn traffic_flow(cmd: TrafficCmd) -> Result<()> {
    let TrafficCmd::Cbr { from, to, size, rate, start, duration, count, to_addr, lab } = cmd;
    let lab = resolve_lab(lab.lab)?;
    let body = json!({"from": from, "to": to, "size_bytes": size, "rate_pps": rate, "start_ns": start, "duration_ns": duration, "count": count, "to_addr": to_addr});
    let v = connect(&lab)?.post("/v1/traffic", &body)?;
    println!(
        "flow {}: {} -> {} ({}:{}), {} bytes at {} packets/s from lab time {:.1} s; records in {}",
        v["id"],
        v["from"].as_str().unwrap_or(""),
        v["to"].as_str().unwrap_or(""),
        v["addr"].as_str().unwrap_or(""),
        v["port"],
        v["size_bytes"],
        v["rate_pps"],
        v["start_ns"].as_f64().unwrap_or(0.0) / 1e9,
        LabPaths::new(&lab).log_dir().join("traffic").display()
    );
    Ok(())
}

/// `vemu report`: the flows' delivery, delay and goodput from their records.
pub(crate) fn report(lab: Option<String>, as_json: bool) -> Result<()> {
    let lab = resolve_lab(lab)?;
    let paths = LabPaths::new(&lab);
    let stats = run_stats(&lab, &paths)?;
    let r = vemu_control::report::report(&paths.log_dir(), stats.as_ref())?;
    if as_json {
        println!("{r}");
    } else {
        traffic::print_report(&lab, &r);
    }
    Ok(())
}

/// `vemu report drops`: the engine's drops per direction and reason (while the lab runs,
/// or as its run ended).
pub(crate) fn report_drops(lab: Option<String>, as_json: bool) -> Result<()> {
    let lab = resolve_lab(lab)?;
    let paths = LabPaths::new(&lab);
    let Some(stats) = run_stats(&lab, &paths)? else {
        return Err(user(format!(
            "lab '{lab}' left no counters ({} has no stats-final.json)",
            paths.log_dir().display()
        )));
    };
    let r = vemu_control::report::drops(&stats);
    if as_json {
        println!("{r}");
        return Ok(());
    }
    let reasons = vemu_control::report::DROP_COUNTERS;
    let rows = r["directions"].as_array().cloned().unwrap_or_default();
    println!("lab {lab}: {} directions dropped frames", rows.len());
    if rows.is_empty() {
        return Ok(());
    }
    print!("{:<6} {:<32} {:<8} {:>10} {:>9}", "KIND", "NAME", "DIR", "OFFERED", "DROPPED");
    for (name, _) in reasons {
        print!(" {:>8}", name.to_uppercase());
    }
    println!();
    let line = |kind: &str, name: &str, dir: &str, offered: String, v: &serde_json::Value| {
        print!(
            "{kind:<6} {name:<32} {dir:<8} {offered:>10} {:>9}",
            v["dropped"].as_u64().unwrap_or(0)
        );
        for (name, _) in reasons {
            print!(" {:>8}", v["reasons"][name].as_u64().unwrap_or(0));
        }
        println!();
    };
    for d in &rows {
        let s = |k: &str| d[k].as_str().unwrap_or("").to_string();
        line(&s("kind"), &s("name"), &s("direction"), d["offered"].to_string(), d);
    }
    let total: u64 =
        r["totals"].as_object().map_or(0, |t| t.values().filter_map(|v| v.as_u64()).sum());
    line(
        "",
        "all",
        "",
        String::new(),
        &serde_json::json!({"dropped": total, "reasons": r["totals"]}),
    );
    for g in r["segments"].as_array().into_iter().flatten() {
        println!(
            "segment {}: {} frames beyond its capacity (or its radio senders' queues)",
            g["name"].as_str().unwrap_or(""),
            g["capacity"]
        );
    }
    Ok(())
}

/// The lab's counters: now (asking its agents for their records first), or as its run
/// ended (`None` if neither).
fn run_stats(lab: &str, paths: &LabPaths) -> Result<Option<serde_json::Value>> {
    let stats = match Client::connect(lab) {
        Ok(c) => {
            // Records kept on other machines (a lab across machines) come here first.
            c.post("/v1/traffic/collect", &json!({}))?;
            Some(c.get("/v1/stats")?)
        }
        Err(_) => std::fs::read(paths.log_dir().join("stats-final.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok()),
    };
    if stats.is_none() && !paths.log_dir().exists() {
        return Err(user(format!(
            "no lab '{lab}' has run here (no {})",
            paths.log_dir().display()
        )));
    }
    Ok(stats)
}
