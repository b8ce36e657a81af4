//! `vemu traffic-agent` (the CBR source and sink the controller starts inside nodes)
//! and the table of `vemu report` (whose analysis is [`vemu_control::report`]).

use std::io::Write;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::Value;
use vemu_control::LabClock;
use vemu_machine::traffic::HEADER_BYTES;

const MAGIC: &[u8; 4] = b"VEMU";

/// Send `count` packets (or until killed) of `size` bytes to `to`, one every
/// `interval_ns` from lab time `start_ns`; one `seq,t_ns,ok` line per packet on stdout.
pub fn send(
    flow: u32,
    to: SocketAddr,
    size: usize,
    interval_ns: u64,
    start_ns: u64,
    count: Option<u64>,
    clock: LabClock,
) -> Result<()> {
    let sock = UdpSocket::bind(if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" })
        .context("opening a UDP socket")?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "seq,t_ns,ok")?;
    let mut buf = vec![0u8; size.max(HEADER_BYTES)];
    buf[..4].copy_from_slice(MAGIC);
    buf[4..8].copy_from_slice(&flow.to_be_bytes());
    let mut seq = 0u64;
    while count.is_none_or(|c| seq < c) {
        // An absolute schedule: no drift however late one packet is.
        let due = start_ns.saturating_add(seq.saturating_mul(interval_ns));
        let now = clock.now_ns();
        if due > now {
            std::thread::sleep(Duration::from_nanos(due - now));
        }
        let t = clock.now_ns();
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
pub fn recv(flow: u32, port: u16, until_ns: u64, clock: LabClock) -> Result<()> {
    // Both families where the node has IPv6; IPv4 alone where it is switched off.
    let sock = UdpSocket::bind(("::", port))
        .or_else(|_| UdpSocket::bind(("0.0.0.0", port)))
        .with_context(|| format!("listening on UDP port {port}"))?;
    sock.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "seq,sent_ns,received_ns")?;
    let mut buf = vec![0u8; 65536];
    while clock.now_ns() < until_ns {
        let Ok(n) = sock.recv(&mut buf) else { continue };
        let t = clock.now_ns();
        if n < HEADER_BYTES || &buf[..4] != MAGIC || buf[4..8] != flow.to_be_bytes() {
            continue;
        }
        let seq = u64::from_be_bytes(buf[8..16].try_into().unwrap());
        let sent = u64::from_be_bytes(buf[16..24].try_into().unwrap());
        writeln!(out, "{seq},{sent},{t}")?;
    }
    Ok(())
}

/// The report as a table.
pub fn print_report(lab: &str, r: &Value) {
    let flows = r["flows"].as_array().cloned().unwrap_or_default();
    println!("lab {lab}: {} traffic flows", flows.len());
    if !flows.is_empty() {
        println!(
            "{:<5} {:<12} {:<12} {:>8} {:>9} {:>7}  {:>9} {:>9} {:>9}",
            "FLOW", "FROM", "TO", "SENT", "DELIVERED", "PDR", "MEAN ms", "P50 ms", "P95 ms"
        );
        let row = |name: &str, from: &str, to: &str, v: &Value| {
            let f = |x: &Value| x.as_f64().map_or("-".to_string(), |x| format!("{x:.2}"));
            println!(
                "{:<5} {:<12} {:<12} {:>8} {:>9} {:>7}  {:>9} {:>9} {:>9}",
                name,
                from,
                to,
                v["sent"].to_string(),
                v["delivered"].to_string(),
                f(&v["pdr"]),
                f(&v["delay_ms"]["mean"]),
                f(&v["delay_ms"]["p50"]),
                f(&v["delay_ms"]["p95"])
            );
        };
        for f in &flows {
            row(
                &f["flow"].to_string(),
                f["from"].as_str().unwrap_or(""),
                f["to"].as_str().unwrap_or(""),
                f,
            );
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
