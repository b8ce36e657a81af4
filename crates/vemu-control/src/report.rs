//! `vemu report`: packet delivery ratio, delay and routing overhead of a lab's run, from
//! the traffic agents' per-packet records (`LOG_DIR/traffic/`) and the engine's counters.

use std::path::Path;

use anyhow::{Context, Result};
use serde_json::{json, Value};

use vemu_machine::traffic::Flow;

/// Rows of a CSV file of numbers, without its header line.
fn rows(path: &Path) -> Result<Vec<Vec<u64>>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text
        .lines()
        .skip(1)
        .map(|l| l.split(',').filter_map(|x| x.trim().parse().ok()).collect::<Vec<u64>>())
        .filter(|r| !r.is_empty())
        .collect())
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    crate::expect::nearest_rank(sorted, q * 100.0).unwrap_or(f64::NAN)
}

/// What flow `f` delivered, from its records in `log_dir`: each packet counted once,
/// delays in order.
pub fn flow_measure(log_dir: &Path, f: &Flow) -> Result<crate::expect::FlowMeasure> {
    let sent = rows(&log_dir.join(&f.sent_file))?.len() as u64;
    let mut got = rows(&log_dir.join(&f.received_file))?;
    got.sort_by_key(|r| r[0]);
    got.dedup_by_key(|r| r[0]);
    let mut delays_ns: Vec<u64> =
        got.iter().filter(|r| r.len() >= 3).map(|r| r[2].saturating_sub(r[1])).collect();
    delays_ns.sort_unstable();
    Ok(crate::expect::FlowMeasure {
        sent,
        delivered: got.len() as u64,
        delays_ns,
        size_bytes: f.size_bytes,
    })
}

/// Delivery, delay and overhead of every flow of a lab's run; `stats` are the engine's
/// counters (`GET /v1/stats`) at the end of the run or now.
pub fn report(log_dir: &Path, stats: Option<&Value>) -> Result<Value> {
    let flows_file = log_dir.join("traffic/flows.json");
    let flows: Vec<Flow> = match std::fs::read(&flows_file) {
        Ok(b) => serde_json::from_slice(&b)
            .with_context(|| format!("reading {}", flows_file.display()))?,
        Err(_) => Vec::new(),
    };
    let mut out = Vec::new();
    let (mut all_sent, mut all_got, mut all_delays) = (0u64, 0u64, Vec::new());
    for f in &flows {
        let m = flow_measure(log_dir, f)?;
        let (sent, n) = (m.sent, m.delivered);
        let delays: Vec<f64> = m.delays_ns.iter().map(|&d| d as f64 / 1e6).collect();
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
        stats.map(|s| {
            s["segments"]
                .as_array()
                .map_or(0, |a| a.iter().map(|g| g["switch"][key].as_u64().unwrap_or(0)).sum())
        })
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

/// The reasons the engine counts drops by (`DirStats`' `drop_…` counters): RED's drops
/// are counted with the queue's, and a Gilbert-Elliott model's with the loss (a capture
/// of drops tells them apart).
pub const DROP_COUNTERS: [(&str, &str); 5] = [
    ("loss", "drop_loss"),
    ("queue", "drop_queue"),
    ("police", "drop_police"),
    ("down", "drop_down"),
    ("mtu", "drop_mtu"),
];

/// Every direction of `GET /v1/stats` (links, LAN ports, diverted paths): (kind, name,
/// direction, its counters), in the lab's order.
pub fn directions(stats: &Value) -> Vec<(&'static str, String, &'static str, &Value)> {
    let mut out = Vec::new();
    for l in stats["links"].as_array().into_iter().flatten() {
        let name = l["name"].as_str().unwrap_or("").to_string();
        out.push(("link", name.clone(), "forward", &l["forward"]));
        out.push(("link", name, "reverse", &l["reverse"]));
    }
    for g in stats["segments"].as_array().into_iter().flatten() {
        for m in g["members"].as_array().into_iter().flatten() {
            let name = format!(
                "{}/{}",
                g["name"].as_str().unwrap_or(""),
                m["port"].as_str().unwrap_or("")
            );
            out.push(("port", name.clone(), "egress", &m["egress"]));
            out.push(("port", name, "ingress", &m["ingress"]));
        }
    }
    for d in stats["diverts"].as_array().into_iter().flatten() {
        let name = d["name"].as_str().unwrap_or("").to_string();
        out.push(("divert", name.clone(), "forward", &d["forward"]));
        out.push(("divert", name, "reverse", &d["reverse"]));
    }
    out
}

/// `vemu report drops`: every direction that dropped frames (links, LAN ports, diverted
/// paths), its drops by reason, most first; and the lab's totals by reason. `stats`:
/// `GET /v1/stats`.
pub fn drops(stats: &Value) -> Value {
    let mut rows = Vec::new();
    let mut row = |kind: &str, name: String, direction: &str, s: &Value| {
        let by: serde_json::Map<String, Value> = DROP_COUNTERS
            .iter()
            .map(|(r, k)| (r.to_string(), json!(s[*k].as_u64().unwrap_or(0))))
            .collect();
        let total: u64 = by.values().filter_map(Value::as_u64).sum();
        if total > 0 {
            rows.push(json!({"kind": kind, "name": name, "direction": direction,
                "offered": s["rx_frames"], "dropped": total, "reasons": by}));
        }
    };
    for (kind, name, direction, s) in directions(stats) {
        row(kind, name, direction, s);
    }
    rows.sort_by_key(|r| std::cmp::Reverse(r["dropped"].as_u64().unwrap_or(0)));
    let totals: serde_json::Map<String, Value> = DROP_COUNTERS
        .iter()
        .map(|(r, _)| {
            let n: u64 = rows.iter().filter_map(|x| x["reasons"][*r].as_u64()).sum();
            (r.to_string(), json!(n))
        })
        .collect();
    // A segment's own drops: beyond its aggregate capacity, or (radio) the sender's
    // queue for the channel full. (A channel's losses per pair: `vemu radio`.)
    let segments: Vec<Value> = stats["segments"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|g| g["switch"]["drop_capacity"].as_u64().unwrap_or(0) > 0)
        .map(|g| json!({"name": g["name"], "capacity": g["switch"]["drop_capacity"]}))
        .collect();
    json!({"directions": rows, "totals": totals, "segments": segments})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_by_direction_and_reason_most_first() {
        let stats = json!({
            "links": [{"name": "a_b",
                "forward": {"rx_frames": 100, "drop_loss": 7, "drop_queue": 3},
                "reverse": {"rx_frames": 50}}],
            "segments": [{"name": "lan", "switch": {"drop_capacity": 4}, "members": [{"port": "c",
                "egress": {"rx_frames": 10, "drop_down": 10, "drop_mtu": 1},
                "ingress": {}}]}],
        });
        let r = drops(&stats);
        let d = r["directions"].as_array().unwrap();
        assert_eq!(d.len(), 2, "{r}");
        assert_eq!((d[0]["name"].as_str(), d[0]["dropped"].as_u64()), (Some("lan/c"), Some(11)));
        assert_eq!(d[1]["reasons"]["loss"], 7);
        assert_eq!(d[1]["reasons"]["queue"], 3);
        assert_eq!(r["totals"]["down"], 10);
        assert_eq!(r["totals"]["loss"], 7);
        assert_eq!(r["totals"]["police"], 0);
        assert_eq!(r["segments"][0]["capacity"], 4);
    }

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::write(dir.join(name), text).unwrap();
    }

    #[test]
    fn delivery_delay_and_overhead_from_the_records() {
        let dir = std::env::temp_dir().join(format!("vemu-report-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("traffic")).unwrap();
        let flow = |id: u32, from: &str, to: &str| json!({"id": id, "from": from, "to": to, "addr": "10.0.0.1", "port": 40000 + id, "size_bytes": 64, "rate_pps": 4.0, "start_ns": 0, "count": null, "sent_file": format!("traffic/{id}-sent.csv"), "received_file": format!("traffic/{id}-received.csv")});
        let flows = json!([flow(1, "n1", "n5"), flow(2, "n2", "n4")]);
        write(&dir, "traffic/flows.json", &flows.to_string());
        write(
            &dir,
            "traffic/1-sent.csv",
            "seq,t_ns,ok\n0,0,1\n1,250000000,1\n2,500000000,1\n3,750000000,1\n",
        );
        // Seq 1 lost, seq 2 received twice (duplicates count once); delays 10, 30, 20 ms.
        write(&dir, "traffic/1-received.csv", "seq,sent_ns,received_ns\n0,0,10000000\n2,500000000,530000000\n2,500000000,531000000\n3,750000000,770000000\n");
        write(&dir, "traffic/2-sent.csv", "seq,t_ns,ok\n0,0,1\n1,250000000,1\n");
        write(&dir, "traffic/2-received.csv", "seq,sent_ns,received_ns\n");
        let stats = json!({"segments": [{"switch": {"air_frames": 100, "routing_frames": 30}}], "fidelity": {"verdict": "ok"}});
        let r = report(&dir, Some(&stats)).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!((r["sent"].as_u64(), r["delivered"].as_u64()), (Some(6), Some(3)));
        assert_eq!(r["pdr"].as_f64(), Some(0.5));
        assert_eq!(r["flows"][0]["pdr"].as_f64(), Some(0.75));
        assert_eq!(r["flows"][1]["delivered"].as_u64(), Some(0));
        assert!((r["delay_ms"]["mean"].as_f64().unwrap() - 20.0).abs() < 1e-9);
        assert_eq!(r["delay_ms"]["p50"].as_f64(), Some(20.0));
        assert_eq!(r["delay_ms"]["p95"].as_f64(), Some(30.0));
        assert_eq!(r["routing_frames"].as_u64(), Some(30));
        assert_eq!(r["routing_per_delivered"].as_f64(), Some(10.0));
        // Without counters (the lab left no stats) overhead is unknown, not zero.
        let r = report(Path::new("/nonexistent"), None).unwrap();
        assert_eq!(r["sent"].as_u64(), Some(0));
        assert!(r["routing_frames"].is_null());
    }
}
