//! Experiment traffic: constant-bit-rate UDP flows between nodes. The controller starts a
//! sink in the receiving node and a source in the sending node (both `vemu
//! traffic-agent`, run inside the nodes), whose per-packet records (lab-clock times) go
//! to files of the lab's log directory, `traffic/`, for `vemu report`.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};
use vemu_host::LabPaths;

use crate::clock::Offset;

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
            return Err(format!(
                "size must be between {HEADER_BYTES} and 65000 bytes, got {}",
                self.size_bytes
            ));
        }
        if !(self.rate_pps.is_finite() && self.rate_pps > 0.0 && self.rate_pps <= 1e6) {
            return Err(format!(
                "rate must be between 0 and 1000000 packets/s, got {}",
                self.rate_pps
            ));
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
pub fn sink_until_ns(start_ns: u64, count: Option<u64>, interval_ns: u64) -> u64 {
    count.map_or(u64::MAX, |c| {
        start_ns.saturating_add(c.saturating_mul(interval_ns)).saturating_add(5_000_000_000)
    })
}

/// Lines of records with the times in the columns that have a clock offset moved to
/// the controller's lab clock (lines that are not numbers, the header, stay as they are).
pub fn on_controller_clock(records: &str, clocks: &[Option<Offset>]) -> String {
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
    Send {
        flow: u32,
        to: std::net::SocketAddr,
        size_bytes: usize,
        interval_ns: u64,
        start_ns: u64,
        count: Option<u64>,
    },
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
pub fn start_end(
    paths: &LabPaths,
    node: &str,
    end: &End,
    clock: vemu_engine::LabClock,
) -> anyhow::Result<()> {
    use anyhow::Context;
    let file = paths.log_dir().join(end.file());
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let out =
        std::fs::File::create(&file).with_context(|| format!("creating {}", file.display()))?;
    let exe = std::env::current_exe().context("finding the vemu program")?;
    crate::supervise::spawn_to(
        paths,
        node,
        &end.command(&exe.to_string_lossy(), clock.epoch_ns),
        out,
    )
    .with_context(|| format!("starting the traffic agent in {node}"))?;
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
    let mut f = std::fs::File::open(&path)
        .map_err(|e| anyhow::anyhow!("opening {}: {e}", path.display()))?;
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
        use crate::clock::Offset;
        let (a, b) = (
            Offset { offset_ns: 2_000, rtt_ns: 10, wall_bound_ns: None },
            Offset { offset_ns: -500, rtt_ns: 10, wall_bound_ns: None },
        );
        let got = super::on_controller_clock(
            "seq,sent_ns,received_ns\n0,10000,13000\n1,1000,x\n",
            &[None, Some(a), Some(b)],
        );
        assert_eq!(got, "seq,sent_ns,received_ns\n0,8000,13500\n1,0,x\n");
        assert_eq!(super::on_controller_clock("7,5,1\n", &[None, None]), "7,5,1\n");
    }

    #[test]
    fn only_record_files_are_handed_out() {
        let paths = vemu_host::LabPaths::new("no-such-lab-here");
        for bad in [
            "../plan.json",
            "traffic/flow-sent.csv",
            "traffic/flow1-sent.csv/..",
            "traffic/flow123456-sent.csv",
            "traffic/flows.json",
            "/etc/shadow",
        ] {
            assert!(
                super::records_chunk(&paths, bad, 0)
                    .unwrap_err()
                    .to_string()
                    .contains("is not a traffic records file"),
                "{bad}"
            );
        }
        assert!(super::records_chunk(&paths, "traffic/flow3-received.csv", 0)
            .unwrap_err()
            .to_string()
            .contains("opening"));
    }

    #[test]
    fn the_sink_outlasts_any_count() {
        assert_eq!(super::sink_until_ns(1_000, Some(u64::MAX), 10_000_000), u64::MAX);
        assert_eq!(super::sink_until_ns(u64::MAX - 5, Some(1), 1), u64::MAX);
        assert_eq!(super::sink_until_ns(1_000_000_000, Some(10), 100_000_000), 7_000_000_000);
        assert_eq!(super::sink_until_ns(0, None, 1), u64::MAX);
    }
}
