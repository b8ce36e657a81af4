//! `vemu stats`: reads the lab's event stream (server-sent events) and turns counter
//! snapshots into rates: a live table, JSON lines, and/or CSV rows.

use std::io::{IsTerminal, Write};
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::Value;
use vemu_control::bucket_quantile_ns;

/// One direction's previous counters, to turn totals into rates.
#[derive(Default, Clone)]
struct Prev {
    t_ns: u64,
    tx_bytes: u64,
    tx_frames: u64,
    drops: u64,
    hist: Vec<u64>,
}

/// One direction in one sample: totals, and rates since the previous sample.
struct Row {
    kind: &'static str,
    name: String,
    direction: &'static str,
    bps: f64,
    fps: f64,
    new_drops: u64,
    /// Median of the delay held since the previous sample (bucket upper bound), s.
    median_s: Option<f64>,
    tx_frames: u64,
    tx_bytes: u64,
    drop_loss: u64,
    drop_queue: u64,
    drop_down: u64,
    drop_police: u64,
    queue: u64,
    queue_max: u64,
}

/// A node's use in one sample: CPU cores over the last reading, memory.
struct NodeRow {
    name: String,
    cores: f64,
    memory_bytes: u64,
    processes: u64,
}

pub struct Sink {
    /// Each node's last CPU time reading (lab ns, cpu ns) and the rate it gave (cores).
    cpu: std::collections::HashMap<String, (u64, u64, f64)>,
    json: bool,
    csv: Option<std::fs::File>,
    left: Option<u64>,
    buf: Vec<u8>,
    prev: std::collections::HashMap<String, Prev>,
}

/// The error that ends the stream once `--count` samples are written.
#[derive(Debug)]
struct Done;
impl std::fmt::Display for Done {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("done")
    }
}
impl std::error::Error for Done {}

pub fn is_done(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.get_ref().is_some_and(|i| i.is::<Done>()))
    })
}

const CSV_HEADER: &str = "t_s,kind,name,direction,tx_frames,tx_bytes,throughput_bps,frames_per_s,drop_loss,drop_queue,drop_down,queue_frames,queue_frames_max,delay_median_le_s,drop_police,cpu_cores,memory_bytes\n";

/// The median of the frames counted between two histograms, as the upper bound of its
/// bucket (1-2-5 steps), in seconds.
fn median_s(now: &[u64], before: &[u64]) -> Option<f64> {
    let d: Vec<u64> = now
        .iter()
        .enumerate()
        .map(|(i, v)| v - before.get(i).copied().unwrap_or(0).min(*v))
        .collect();
    bucket_quantile_ns(&d, 0.5)
        .map(|ns| if ns == u64::MAX { f64::INFINITY } else { ns as f64 / 1e9 })
}

impl Sink {
    pub fn new(json: bool, csv: Option<&Path>, count: Option<u64>) -> Result<Sink> {
        let csv = match csv {
            Some(p) => {
                let fresh = !p.exists();
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .with_context(|| format!("opening {}", p.display()))?;
                if fresh {
                    f.write_all(CSV_HEADER.as_bytes())?;
                }
                Some(f)
            }
            None => None,
        };
        Ok(Sink {
            json,
            csv,
            left: count,
            buf: Vec::new(),
            prev: Default::default(),
            cpu: Default::default(),
        })
    }

    fn sample(&mut self, v: &Value) -> std::io::Result<()> {
        let t_ns = v["t_ns"].as_u64().unwrap_or(0);
        let rows = self.rows(v, t_ns);
        let nodes = self.node_rows(v);
        let t_s = t_ns as f64 / 1e9;
        self.write_csv(t_s, &rows, &nodes)?;
        self.print(v, t_s, &rows, &nodes)?;
        if let Some(n) = &mut self.left {
            *n = n.saturating_sub(1);
            if *n == 0 {
                return Err(std::io::Error::other(Done));
            }
        }
        Ok(())
    }

    /// A row for each direction of each link, segment port and diverted path, and for
    /// each of their qos classes, with its rates since the last sample.
    fn rows(&mut self, v: &Value, t_ns: u64) -> Vec<Row> {
        let mut rows = Vec::new();
        let mut dir = |kind: &'static str, name: String, direction: &'static str, s: &Value| {
            let get = |k: &str| s[k].as_u64().unwrap_or(0);
            let hist: Vec<u64> = s["delay_hist"]
                .as_array()
                .map(|a| a.iter().filter_map(|x| x.as_u64()).collect())
                .unwrap_or_default();
            let drops = vemu_control::report::DROP_COUNTERS.iter().map(|(_, k)| get(k)).sum();
            let now =
                Prev { t_ns, tx_bytes: get("tx_bytes"), tx_frames: get("tx_frames"), drops, hist };
            let prev = self
                .prev
                .insert(format!("{kind} {name} {direction}"), now.clone())
                .unwrap_or(Prev { t_ns, ..Default::default() });
            let dt = (now.t_ns.saturating_sub(prev.t_ns)) as f64 / 1e9;
            let per_s =
                |a: u64, b: u64| if dt > 0.0 { a.saturating_sub(b) as f64 / dt } else { 0.0 };
            rows.push(Row {
                kind,
                name,
                direction,
                bps: per_s(now.tx_bytes, prev.tx_bytes) * 8.0,
                fps: per_s(now.tx_frames, prev.tx_frames),
                new_drops: now.drops.saturating_sub(prev.drops),
                median_s: median_s(&now.hist, &prev.hist),
                tx_frames: now.tx_frames,
                tx_bytes: now.tx_bytes,
                drop_loss: get("drop_loss"),
                drop_queue: get("drop_queue"),
                drop_down: get("drop_down"),
                drop_police: get("drop_police"),
                queue: get("queue_frames"),
                queue_max: get("queue_frames_max"),
            });
        };
        // A direction, then each of its qos classes: what left the class's queue, its
        // drops (RED and queue limit as queue drops) and the time frames waited in it.
        let mut both = |kind: &'static str, name: String, direction: &'static str, s: &Value| {
            dir(kind, name.clone(), direction, s);
            for c in s["classes"].as_array().into_iter().flatten() {
                let get = |k: &str| c[k].as_u64().unwrap_or(0);
                let row = serde_json::json!({
                    "tx_frames": get("tx_frames"), "tx_bytes": get("tx_bytes"),
                    "drop_queue": get("drop_red") + get("drop_queue"), "drop_police": get("drop_police"),
                    "delay_hist": c["wait_hist"], "queue_frames": get("queue_frames"),
                });
                dir(
                    "class",
                    format!("{name}/{}", c["name"].as_str().unwrap_or("")),
                    direction,
                    &row,
                );
            }
        };
        for (kind, name, direction, s) in vemu_control::report::directions(v) {
            both(kind, name, direction, s);
        }
        rows
    }

    /// A row for each node: its CPU (cores, since the last reading), memory, processes.
    fn node_rows(&mut self, v: &Value) -> Vec<NodeRow> {
        let mut nodes = Vec::new();
        for n in v["nodes"].as_array().into_iter().flatten() {
            let get = |k: &str| n[k].as_u64().unwrap_or(0);
            let name = n["name"].as_str().unwrap_or("").to_string();
            let (t, cpu) = (get("t_ns"), get("cpu_ns"));
            let (t0, cpu0, last) = self.cpu.get(&name).copied().unwrap_or((t, cpu, f64::NAN));
            // Readings come once a second: keep the last rate until a new one comes.
            let cores =
                if t > t0 { cpu.saturating_sub(cpu0) as f64 / (t - t0) as f64 } else { last };
            self.cpu.insert(name.clone(), if t > t0 { (t, cpu, cores) } else { (t0, cpu0, last) });
            nodes.push(NodeRow {
                name,
                cores,
                memory_bytes: get("memory_bytes"),
                processes: get("processes"),
            });
        }
        nodes
    }

    /// The rows as CSV lines, when writing CSV.
    fn write_csv(&mut self, t_s: f64, rows: &[Row], nodes: &[NodeRow]) -> std::io::Result<()> {
        if let Some(f) = &mut self.csv {
            for r in rows {
                let med = r.median_s.map(|m| format!("{m}")).unwrap_or_default();
                writeln!(
                    f,
                    "{t_s:.3},{},{},{},{},{},{:.0},{:.1},{},{},{},{},{},{med},{},,",
                    r.kind,
                    r.name,
                    r.direction,
                    r.tx_frames,
                    r.tx_bytes,
                    r.bps,
                    r.fps,
                    r.drop_loss,
                    r.drop_queue,
                    r.drop_down,
                    r.queue,
                    r.queue_max,
                    r.drop_police
                )?;
            }
            for n in nodes.iter().filter(|n| n.cores.is_finite()) {
                writeln!(
                    f,
                    "{t_s:.3},node,{},,,,,,,,,,,,,{:.4},{}",
                    n.name, n.cores, n.memory_bytes
                )?;
            }
        }
        Ok(())
    }

    /// The sample on stdout: the event itself (JSON) or the tables, redrawn in place on
    /// a terminal.
    fn print(&self, v: &Value, t_s: f64, rows: &[Row], nodes: &[NodeRow]) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        if self.json {
            writeln!(out, "{v}")?;
        } else {
            if out.is_terminal() {
                write!(out, "\x1b[H\x1b[2J")?;
            }
            writeln!(out, "lab time {t_s:.1} s")?;
            writeln!(
                out,
                "{:<6} {:<32} {:<8} {:>12} {:>10} {:>8} {:>7} {:>10}",
                "KIND", "NAME", "DIR", "Mbit/s", "frames/s", "drops", "queue", "delay~p50"
            )?;
            for r in rows {
                let med =
                    r.median_s.map(|m| format!("<={} ms", m * 1e3)).unwrap_or_else(|| "-".into());
                writeln!(
                    out,
                    "{:<6} {:<32} {:<8} {:>12.3} {:>10.0} {:>8} {:>7} {:>10}",
                    r.kind,
                    r.name,
                    r.direction,
                    r.bps / 1e6,
                    r.fps,
                    r.new_drops,
                    r.queue,
                    med
                )?;
            }
            if !nodes.is_empty() {
                writeln!(
                    out,
                    "\n{:<32} {:>10} {:>12} {:>6}",
                    "NODE", "CPU cores", "memory MiB", "procs"
                )?;
                for n in nodes {
                    let cores =
                        if n.cores.is_finite() { format!("{:.3}", n.cores) } else { "-".into() };
                    writeln!(
                        out,
                        "{:<32} {:>10} {:>12.1} {:>6}",
                        n.name,
                        cores,
                        n.memory_bytes as f64 / 1048576.0,
                        n.processes
                    )?;
                }
            }
        }
        out.flush()?;
        out.flush()
    }
}

impl Write for Sink {
    /// Bytes of the event stream: complete `data:` lines carry one JSON event each.
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(b);
        while let Some(i) = self.buf.iter().position(|&c| c == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=i).collect();
            if let Some(data) = line.strip_prefix(b"data:") {
                if let Ok(v) = serde_json::from_slice::<Value>(data) {
                    if v["type"] == "stats" {
                        self.sample(&v)?;
                    }
                }
            }
        }
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
