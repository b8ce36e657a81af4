//! Experiment traffic: constant-bit-rate UDP flows between nodes. The controller starts a
//! sink in the receiving node and a source in the sending node (both `vemu
//! traffic-agent`, run inside the nodes), whose per-packet records (lab-clock times) go
//! to files of the lab's log directory, `traffic/`, for `vemu report`.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use vemu_host::LabPaths;

use crate::clock_sync::Offset;
use crate::error::LabError;
use crate::lab::Controller;
use crate::worker::{WorkerReply, WorkerRequest};

/// Body of `POST /v1/traffic`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CbrRequest {
    pub from: String,
    pub to: String,
    /// UDP payload bytes (at least 24: the header with flow, sequence number and send time).
    pub size_bytes: usize,
    /// Packets per second.
    pub rate_pps: f64,
    /// Lab time of the first packet, ns; now if absent or already past.
    pub start_ns: Option<u64>,
    /// How long to send, ns; until the lab goes down if absent (and no `count`).
    pub duration_ns: Option<u64>,
    /// How many packets to send.
    pub count: Option<u64>,
    /// The receiver's address; its first IPv4 loopback (else interface) address if absent.
    pub to_addr: Option<IpAddr>,
}

impl CbrRequest {
    /// The flow's numbers, checked without the lab.
    pub fn check(&self) -> Result<(), String> {
        if self.size_bytes < HEADER_BYTES || self.size_bytes > 65_000 {
            return Err(format!("size must be between {HEADER_BYTES} and 65000 bytes, got {}", self.size_bytes));
        }
        if !(self.rate_pps.is_finite() && self.rate_pps > 0.0 && self.rate_pps <= 1e6) {
            return Err(format!("rate must be between 0 and 1000000 packets/s, got {}", self.rate_pps));
        }
        Ok(())
    }
}

/// A flow as recorded in `traffic/flows.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Flow {
    pub id: u32,
    pub from: String,
    pub to: String,
    pub addr: IpAddr,
    pub port: u16,
    pub size_bytes: usize,
    pub rate_pps: f64,
    pub start_ns: u64,
    pub count: Option<u64>,
    /// Source records (`seq,t_ns`) and sink records (`flow,seq,sent_ns,received_ns`), in
    /// the lab's log directory.
    pub sent_file: String,
    pub received_file: String,
}

/// First UDP port of the flows (flow n uses this + n).
pub const FIRST_PORT: u16 = 40000;
/// Bytes of the header every CBR packet starts with: "VEMU", flow, sequence, send time.
pub const HEADER_BYTES: usize = 24;

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// When a flow's sink stops listening: a few seconds after the last packet, or never
/// (the lab's end) for a flow without a count; never before the sender stops, however
/// large the count.
fn sink_until_ns(start_ns: u64, count: Option<u64>, interval_ns: u64) -> u64 {
    count.map_or(u64::MAX, |c| start_ns.saturating_add(c.saturating_mul(interval_ns)).saturating_add(5_000_000_000))
}

impl Controller {
    /// Start a CBR flow; returns its description.
    pub fn traffic_cbr(&mut self, r: CbrRequest) -> Result<Value, LabError> {
        let (fi, ti) = (self.made_node(&r.from)?, self.made_node(&r.to)?);
        if fi == ti {
            return Err(LabError::invalid("a flow needs two different nodes"));
        }
        r.check().map_err(LabError::invalid)?;
        if self.flows.len() >= (u16::MAX - FIRST_PORT) as usize {
            return Err(LabError::invalid(format!("a lab runs at most {} traffic flows (one UDP port each from {FIRST_PORT})", u16::MAX - FIRST_PORT)));
        }
        let to = &self.plan.nodes[ti];
        let addr = match r.to_addr {
            Some(a) => a,
            None => to
                .loopback
                .iter()
                .chain(to.ifaces.iter().flat_map(|i| i.addrs.iter()))
                .map(|n| n.addr())
                .min_by_key(|a| a.is_ipv6())
                .ok_or_else(|| LabError::invalid(format!("node '{}' has no address to send to", r.to)))?,
        };
        // Time for both ends to start: one order to each end's machine across machines.
        let lead_ns = if self.plan.machines.is_empty() { 100_000_000 } else { 500_000_000 };
        let start_ns = r.start_ns.unwrap_or(0).max(self.clock.now_ns() + lead_ns);
        let interval_ns = (1e9 / r.rate_pps).round().max(1.0) as u64;
        let count = r.count.or(r.duration_ns.map(|d| d.div_ceil(interval_ns).max(1)));
        let id = self.flows.len() as u32;
        let port = FIRST_PORT + id as u16;
        let dir = LabPaths::new(&self.plan.name).log_dir().join("traffic");
        let (recv, send) = (
            End::Recv { flow: id, port, until_ns: sink_until_ns(start_ns, count, interval_ns) },
            End::Send { flow: id, to: std::net::SocketAddr::new(addr, port), size_bytes: r.size_bytes, interval_ns, start_ns, count },
        );
        let (received_file, sent_file) = (recv.file(), send.file());
        // The sink listens first; each end starts on its node's machine, which keeps its
        // records (gathered here by [`Controller::collect_traffic`]).
        crate::lab::call(self.worker.as_mut(), WorkerRequest::TrafficEnd { node: r.to.clone(), end: recv })?;
        crate::lab::call(self.worker.as_mut(), WorkerRequest::TrafficEnd { node: r.from.clone(), end: send })?;
        let flow = Flow {
            id,
            from: r.from.clone(),
            to: r.to.clone(),
            addr,
            port,
            size_bytes: r.size_bytes,
            rate_pps: r.rate_pps,
            start_ns,
            count,
            sent_file,
            received_file,
        };
        self.flows.push(flow.clone());
        std::fs::create_dir_all(&dir).map_err(|e| LabError::internal(format!("creating {}: {e}", dir.display())))?;
        let list = serde_json::to_vec_pretty(&self.flows).unwrap_or_default();
        std::fs::write(dir.join("flows.json"), list).map_err(|e| LabError::internal(format!("writing flows.json: {e}")))?;
        let v = json!(flow);
        self.emit(json!({"type": "traffic", "flow": v}));
        Ok(v)
    }

    /// Copy here what the flows' ends on other machines recorded since the last time
    /// (whole lines: an end may be writing one), their times put on this machine's lab
    /// clock ([`crate::clock_sync`]), so that `vemu report` reads every flow's records in
    /// this machine's log directory; returns the bytes copied. A lab on one machine has
    /// them here already.
    pub fn collect_traffic(&mut self) -> Result<u64, LabError> {
        if self.plan.machines.is_empty() {
            return Ok(0);
        }
        let log = LabPaths::new(&self.plan.name).log_dir();
        let offsets = self.worker.clock_offsets();
        let offset_of = |node: &str| -> Option<Offset> {
            let m = self.plan.nodes.iter().find(|n| n.name == node)?.machine;
            Some(offsets.get(m).copied().flatten().unwrap_or_default())
        };
        // (node whose machine has the file, file, the machine clock of each column)
        let files: Vec<(String, String, Vec<Option<Offset>>)> = self
            .flows
            .iter()
            .flat_map(|f| {
                let (from, to) = (offset_of(&f.from), offset_of(&f.to));
                // seq,t_ns,ok and seq,sent_ns,received_ns
                [(f.from.clone(), f.sent_file.clone(), vec![None, from]), (f.to.clone(), f.received_file.clone(), vec![None, from, to])]
            })
            .collect();
        let mut copied = 0;
        for (node, file, clocks) in files {
            let path = log.join(&file);
            let mut out = std::fs::OpenOptions::new().create(true).append(true).open(&path).map_err(|e| LabError::internal(format!("opening {}: {e}", path.display())))?;
            loop {
                // Where the machine's file goes on: the copy here is no guide, its
                // numbers changed length when they moved to this clock.
                let offset = self.records_copied.get(&file).copied().unwrap_or(0);
                let chunk = match crate::lab::call(self.worker.as_mut(), WorkerRequest::TrafficRecords { node: node.clone(), file: file.clone(), offset })? {
                    WorkerReply::Text(t) => t,
                    r => return Err(LabError::internal(format!("gathering {file} from node {node}'s machine: unexpected answer {r:?}"))),
                };
                if chunk.is_empty() {
                    break;
                }
                *self.records_copied.entry(file.clone()).or_default() += chunk.len() as u64;
                let chunk = on_controller_clock(&chunk, &clocks);
                std::io::Write::write_all(&mut out, chunk.as_bytes()).map_err(|e| LabError::internal(format!("writing {}: {e}", path.display())))?;
                copied += chunk.len() as u64;
            }
        }
        Ok(copied)
    }
}

/// Lines of records with the times in the columns that have a clock offset moved to
/// the controller's lab clock (lines that are not numbers, the header, stay as they are).
fn on_controller_clock(records: &str, clocks: &[Option<Offset>]) -> String {
    let mut out = String::with_capacity(records.len());
    for line in records.lines() {
        for (i, field) in line.split(',').enumerate() {
            if i > 0 {
                out.push(',');
            }
            match (clocks.get(i).copied().flatten(), field.parse::<u64>()) {
                (Some(o), Ok(t)) => out.push_str(&o.to_controller(t).to_string()),
                _ => out.push_str(field),
            }
        }
        out.push('\n');
    }
    out
}

/// One end of a flow, as the machine of its node starts it ([`start_end`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum End {
    /// The sink: listens on `port` until lab time `until_ns`.
    Recv { flow: u32, port: u16, until_ns: u64 },
    /// The source: `count` packets (or until the lab ends) of `size_bytes` to `to`, one
    /// each `interval_ns` from lab time `start_ns`.
    Send { flow: u32, to: std::net::SocketAddr, size_bytes: usize, interval_ns: u64, start_ns: u64, count: Option<u64> },
}

impl End {
    /// Its records' file, in the lab's log directory.
    pub fn file(&self) -> String {
        match self {
            End::Recv { flow, .. } => format!("traffic/flow{flow}-received.csv"),
            End::Send { flow, .. } => format!("traffic/flow{flow}-sent.csv"),
        }
    }

    /// The shell command running it, with `exe` (this vemu) on a lab clock that started
    /// at `epoch_ns` of this machine's monotonic clock.
    fn command(&self, exe: &str, epoch_ns: u64) -> String {
        let exe = quote(exe);
        match self {
            End::Recv { flow, port, until_ns } => format!("exec {exe} traffic-agent recv --flow {flow} --port {port} --epoch-ns {epoch_ns} --until-ns {until_ns}"),
            End::Send { flow, to, size_bytes, interval_ns, start_ns, count } => {
                let count = count.map(|c| format!(" --count {c}")).unwrap_or_default();
                let to = quote(&to.to_string());
                format!("exec {exe} traffic-agent send --flow {flow} --to {to} --size {size_bytes} --interval-ns {interval_ns} --start-ns {start_ns} --epoch-ns {epoch_ns}{count}")
            }
        }
    }
}

/// Start `end` in `node` (of this machine) of the lab at `paths`, whose lab clock is
/// `clock`, its records going to [`End::file`].
pub fn start_end(paths: &LabPaths, node: &str, end: &End, clock: vemu_engine::LabClock) -> anyhow::Result<()> {
    use anyhow::Context;
    let file = paths.log_dir().join(end.file());
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let out = std::fs::File::create(&file).with_context(|| format!("creating {}", file.display()))?;
    let exe = std::env::current_exe().context("finding the vemu program")?;
    crate::supervise::spawn_to(paths, node, &end.command(&exe.to_string_lossy(), clock.epoch_ns), out).with_context(|| format!("starting the traffic agent in {node}"))?;
    Ok(())
}

/// Most bytes of records handed over at once.
pub const RECORDS_CHUNK_BYTES: u64 = 4 << 20;

/// The whole lines of a flow's records file `file` (as [`End::file`] names it) of the
/// lab at `paths` from byte `offset`, at most [`RECORDS_CHUNK_BYTES`] of them; empty
/// at the end. Any other file name is refused (it comes from another machine).
pub fn records_chunk(paths: &LabPaths, file: &str, offset: u64) -> anyhow::Result<String> {
    use std::io::{Read, Seek};
    let valid = file
        .strip_prefix("traffic/flow")
        .and_then(|r| r.strip_suffix("-sent.csv").or_else(|| r.strip_suffix("-received.csv")))
        .is_some_and(|n| !n.is_empty() && n.len() <= 5 && n.bytes().all(|b| b.is_ascii_digit()));
    if !valid {
        anyhow::bail!("'{file}' is not a traffic records file");
    }
    let path = paths.log_dir().join(file);
    let mut f = std::fs::File::open(&path).map_err(|e| anyhow::anyhow!("opening {}: {e}", path.display()))?;
    f.seek(std::io::SeekFrom::Start(offset))?;
    let mut buf = Vec::new();
    f.take(RECORDS_CHUNK_BYTES).read_to_end(&mut buf)?;
    // Whole lines only: the rest is taken next time.
    buf.truncate(buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1));
    String::from_utf8(buf).map_err(|_| anyhow::anyhow!("{} holds what is not text", path.display()))
}

#[cfg(test)]
mod tests {
    /// Audit: `count: 18446744073709551615` wrapped the sink's end time, so the sink
    /// stopped after 4 s while the sender went on.
    #[test]
    fn records_of_other_machines_move_to_the_controllers_clock() {
        use crate::clock_sync::Offset;
        let (a, b) = (Offset { offset_ns: 2_000, rtt_ns: 10 }, Offset { offset_ns: -500, rtt_ns: 10 });
        let got = super::on_controller_clock("seq,sent_ns,received_ns\n0,10000,13000\n1,1000,x\n", &[None, Some(a), Some(b)]);
        assert_eq!(got, "seq,sent_ns,received_ns\n0,8000,13500\n1,0,x\n");
        assert_eq!(super::on_controller_clock("7,5,1\n", &[None, None]), "7,5,1\n");
    }

    #[test]
    fn only_record_files_are_handed_out() {
        let paths = vemu_host::LabPaths::new("no-such-lab-here");
        for bad in ["../plan.json", "traffic/flow-sent.csv", "traffic/flow1-sent.csv/..", "traffic/flow123456-sent.csv", "traffic/flows.json", "/etc/shadow"] {
            assert!(super::records_chunk(&paths, bad, 0).unwrap_err().to_string().contains("is not a traffic records file"), "{bad}");
        }
        assert!(super::records_chunk(&paths, "traffic/flow3-received.csv", 0).unwrap_err().to_string().contains("opening"));
    }

    #[test]
    fn the_sink_outlasts_any_count() {
        assert_eq!(super::sink_until_ns(1_000, Some(u64::MAX), 10_000_000), u64::MAX);
        assert_eq!(super::sink_until_ns(u64::MAX - 5, Some(1), 1), u64::MAX);
        assert_eq!(super::sink_until_ns(1_000_000_000, Some(10), 100_000_000), 7_000_000_000);
        assert_eq!(super::sink_until_ns(0, None, 1), u64::MAX);
    }
}
