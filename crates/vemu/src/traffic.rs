//! `vemu traffic-agent` (the CBR source and sink the controller starts inside nodes)
//! and `vemu report` (packet delivery ratio, delay and routing overhead of a run, from
//! the agents' records and the engine's counters).

use std::io::Write;
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::{json, Value};
use vemu_control::traffic::{Flow, HEADER_BYTES};
use vemu_engine::monotonic_ns;

const MAGIC: &[u8; 4] = b"VEMU";

/// Send `count` packets (or until killed) of `size` bytes to `to`, one every
/// `interval_ns` from lab time `start_ns`; one `seq,t_ns,ok` line per packet on stdout.
pub fn send(flow: u32, to: SocketAddr, size: usize, interval_ns: u64, start_ns: u64, count: Option<u64>, epoch_ns: u64) -> Result<()> {
    let sock = UdpSocket::bind(if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }).context("opening a UDP socket")?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "seq,t_ns,ok")?;
    let mut buf = vec![0u8; size.max(HEADER_BYTES)];
    buf[..4].copy_from_slice(MAGIC);
    buf[4..8].copy_from_slice(&flow.to_be_bytes());
    let mut seq = 0u64;
    while count.is_none_or(|c| seq < c) {
        // An absolute schedule: no drift however late one packet is.
        let due = start_ns + seq * interval_ns;
        let now = monotonic_ns().saturating_sub(epoch_ns);
        if due > now {
            std::thread::sleep(Duration::from_nanos(due - now));
        }
        let t = monotonic_ns().saturating_sub(epoch_ns);
        buf[8..16].copy_from_slice(&seq.to_be_bytes());
        buf[16..24].copy_from_slice(&t.to_be_bytes());
        // No route yet (routing still converging) counts as sent and not delivered.
        let ok = sock.send_to(&buf, to).is_ok();
        writeln!(out, "{seq},{t},{}", u8::from(ok))?;
        seq += 1;
    }
    Ok(())
}

/// Receive packets of `flow` on `port` until lab time `until_ns`; one
/// `seq,sent_ns,received_ns` line per packet on stdout.
pub fn recv(flow: u32, port: u16, until_ns: u64, epoch_ns: u64) -> Result<()> {
    // Both families where the node has IPv6; IPv4 alone where it is switched off.
    let sock = UdpSocket::bind(("::", port)).or_else(|_| UdpSocket::bind(("0.0.0.0", port))).with_context(|| format!("listening on UDP port {port}"))?;
    sock.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "seq,sent_ns,received_ns")?;
    let mut buf = vec![0u8; 65536];
    while monotonic_ns().saturating_sub(epoch_ns) < until_ns {
        let Ok(n) = sock.recv(&mut buf) else { continue };
        let t = monotonic_ns().saturating_sub(epoch_ns);
        if n < HEADER_BYTES || &buf[..4] != MAGIC || buf[4..8] != flow.to_be_bytes() {
            continue;
        }
        let seq = u64::from_be_bytes(buf[8..16].try_into().unwrap());
        let sent = u64::from_be_bytes(buf[16..24].try_into().unwrap());
        writeln!(out, "{seq},{sent},{t}")?;
    }
    Ok(())
}

/// Rows of a CSV file of numbers, without its header line.
fn rows(path: &Path) -> Result<Vec<Vec<u64>>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text.lines().skip(1).map(|l| l.split(',').filter_map(|x| x.trim().parse().ok()).collect::<Vec<u64>>()).filter(|r| !r.is_empty()).collect())
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Delivery, delay and overhead of every flow of a lab's run; `stats` are the engine's
/// counters (`GET /v1/stats`) at the end of the run or now.
pub fn report(log_dir: &Path, stats: Option<&Value>) -> Result<Value> {
    let flows_file = log_dir.join("traffic/flows.json");
    let flows: Vec<Flow> = match std::fs::read(&flows_file) {
        Ok(b) => serde_json::from_slice(&b).with_context(|| format!("reading {}", flows_file.display()))?,
        Err(_) => Vec::new(),
    };
    let mut out = Vec::new();
    let (mut all_sent, mut all_got, mut all_delays) = (0u64, 0u64, Vec::new());
    for f in &flows {
        let sent = rows(&log_dir.join(&f.sent_file))?.len() as u64;
        let mut got = rows(&log_dir.join(&f.received_file))?;
        got.sort_by_key(|r| r[0]);
        got.dedup_by_key(|r| r[0]);
        let mut delays: Vec<f64> = got.iter().filter(|r| r.len() >= 3).map(|r| r[2].saturating_sub(r[1]) as f64 / 1e6).collect();
        delays.sort_by(f64::total_cmp);
        let n = got.len() as u64;
        out.push(json!({
            "flow": f.id, "from": f.from, "to": f.to, "sent": sent, "delivered": n,
            "pdr": if sent > 0 { n as f64 / sent as f64 } else { f64::NAN },
            "delay_ms": {"mean": delays.iter().sum::<f64>() / delays.len().max(1) as f64, "p50": percentile(&delays, 0.5), "p95": percentile(&delays, 0.95)},
        }));
        all_sent += sent;
        all_got += n;
        all_delays.extend(delays);
    }
    all_delays.sort_by(f64::total_cmp);
    let seg_sum = |key: &str| -> Option<u64> {
        stats.map(|s| s["segments"].as_array().map_or(0, |a| a.iter().map(|g| g["switch"][key].as_u64().unwrap_or(0)).sum()))
    };
    let routing = seg_sum("routing_frames");
    Ok(json!({
        "flows": out,
        "sent": all_sent,
        "delivered": all_got,
        "pdr": if all_sent > 0 { all_got as f64 / all_sent as f64 } else { f64::NAN },
        "delay_ms": {"mean": all_delays.iter().sum::<f64>() / all_delays.len().max(1) as f64, "p50": percentile(&all_delays, 0.5), "p95": percentile(&all_delays, 0.95)},
        "air_frames": seg_sum("air_frames"),
        "routing_frames": routing,
        "routing_per_delivered": routing.map(|r| if all_got > 0 { r as f64 / all_got as f64 } else { f64::NAN }),
        "fidelity": stats.map(|s| s["fidelity"].clone()),
    }))
}

/// The report as a table.
pub fn print_report(lab: &str, r: &Value) {
    let flows = r["flows"].as_array().cloned().unwrap_or_default();
    println!("lab {lab}: {} traffic flows", flows.len());
    if !flows.is_empty() {
        println!("{:<5} {:<12} {:<12} {:>8} {:>9} {:>7}  {:>9} {:>9} {:>9}", "FLOW", "FROM", "TO", "SENT", "DELIVERED", "PDR", "MEAN ms", "P50 ms", "P95 ms");
        let row = |name: &str, from: &str, to: &str, v: &Value| {
            let f = |x: &Value| x.as_f64().map_or("-".to_string(), |x| format!("{x:.2}"));
            println!(
                "{:<5} {:<12} {:<12} {:>8} {:>9} {:>7}  {:>9} {:>9} {:>9}",
                name, from, to, v["sent"].to_string(), v["delivered"].to_string(), f(&v["pdr"]), f(&v["delay_ms"]["mean"]), f(&v["delay_ms"]["p50"]), f(&v["delay_ms"]["p95"])
            );
        };
        for f in &flows {
            row(&f["flow"].to_string(), f["from"].as_str().unwrap_or(""), f["to"].as_str().unwrap_or(""), f);
        }
        row("all", "", "", r);
    }
    match (r["routing_frames"].as_u64(), r["air_frames"].as_u64()) {
        (Some(rf), Some(af)) => println!(
            "routing overhead: {rf} routing frames on the air (babel, OLSR, AODV, RIP, OSPF) of {af} frames; {} per data packet delivered",
            r["routing_per_delivered"].as_f64().map_or("-".into(), |x| format!("{x:.2}"))
        ),
        _ => println!("routing overhead: unknown (no counters from the lab)"),
    }
    match serde_json::from_value::<vemu_control::fidelity::Fidelity>(r["fidelity"].clone()) {
        Ok(f) => println!("{}", vemu_control::fidelity::describe(&f)),
        Err(_) => println!("fidelity: unknown (no counters from the lab)"),
    }
}
