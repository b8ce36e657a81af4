//! `vemu report`: packet delivery ratio, delay and routing overhead of a lab's run, from
//! the traffic agents' per-packet records (`LOG_DIR/traffic/`) and the engine's counters.

use std::path::Path;

use anyhow::{Context, Result};
use serde_json::{json, Value};

use crate::traffic::Flow;

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
        Ok(b) => serde_json::from_slice(&b)
            .with_context(|| format!("reading {}", flows_file.display()))?,
        Err(_) => Vec::new(),
    };
    let mut out = Vec::new();
    let (mut all_sent, mut all_got, mut all_delays) = (0u64, 0u64, Vec::new());
    for f in &flows {
        let sent = rows(&log_dir.join(&f.sent_file))?.len() as u64;
        let mut got = rows(&log_dir.join(&f.received_file))?;
        got.sort_by_key(|r| r[0]);
        got.dedup_by_key(|r| r[0]);
        let mut delays: Vec<f64> = got
            .iter()
            .filter(|r| r.len() >= 3)
            .map(|r| r[2].saturating_sub(r[1]) as f64 / 1e6)
            .collect();
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

#[cfg(test)]
mod tests {
    use super::*;

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
