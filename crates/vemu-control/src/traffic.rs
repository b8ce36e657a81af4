//! Experiment traffic: constant-bit-rate UDP flows between nodes. The controller starts a
//! sink in the receiving node and a source in the sending node (both `vemu
//! traffic-agent`, run inside the nodes), whose per-packet records (lab-clock times) go
//! to files of the lab's log directory, `traffic/`, for `vemu report`.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use vemu_host::LabPaths;

use crate::error::LabError;
use crate::lab::Controller;

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
        if !self.plan.machines.is_empty() {
            // The agents' lab clocks and the flows' CSV files would have to meet here.
            return Err(LabError::invalid("traffic flows are not available yet in labs across machines: run iperf3 or another program with 'vemu exec'"));
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
        let now = self.clock.now_ns();
        let start_ns = r.start_ns.unwrap_or(0).max(now + 100_000_000);
        let interval_ns = (1e9 / r.rate_pps).round().max(1.0) as u64;
        let count = r.count.or(r.duration_ns.map(|d| d.div_ceil(interval_ns).max(1)));
        let id = self.flows.len() as u32;
        let port = FIRST_PORT + id as u16;
        let paths = LabPaths::new(&self.plan.name);
        let dir = paths.log_dir().join("traffic");
        std::fs::create_dir_all(&dir).map_err(|e| LabError::internal(format!("creating {}: {e}", dir.display())))?;
        let (sent_file, received_file) = (format!("traffic/flow{id}-sent.csv"), format!("traffic/flow{id}-received.csv"));
        let create = |f: &str| std::fs::File::create(paths.log_dir().join(f)).map_err(|e| LabError::internal(format!("creating {f}: {e}")));
        let exe = std::env::current_exe().map_err(|e| LabError::internal(format!("finding the vemu program: {e}")))?;
        let exe = quote(&exe.to_string_lossy());
        let epoch = self.clock.epoch_ns;
        // The sink listens until a few seconds after the last packet (or until the lab ends).
        let until = sink_until_ns(start_ns, count, interval_ns);
        let recv = format!("exec {exe} traffic-agent recv --flow {id} --port {port} --epoch-ns {epoch} --until-ns {until}");
        let count_arg = count.map(|c| format!(" --count {c}")).unwrap_or_default();
        let dst = std::net::SocketAddr::new(addr, port);
        let send = format!(
            "exec {exe} traffic-agent send --flow {id} --to {} --size {} --interval-ns {interval_ns} --start-ns {start_ns} --epoch-ns {epoch}{count_arg}",
            quote(&dst.to_string()),
            r.size_bytes
        );
        let spawn = |node: &str, cmd: &str, file: std::fs::File| {
            crate::supervise::spawn_to(&paths, node, cmd, file).map_err(|e| LabError::internal(format!("starting the traffic agent in {node}: {e}")))
        };
        let _sink = spawn(&r.to, &recv, create(&received_file)?)?;
        let _source = spawn(&r.from, &send, create(&sent_file)?)?;
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
        let list = serde_json::to_vec_pretty(&self.flows).unwrap_or_default();
        std::fs::write(dir.join("flows.json"), list).map_err(|e| LabError::internal(format!("writing flows.json: {e}")))?;
        let v = json!(flow);
        self.emit(json!({"type": "traffic", "flow": v}));
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    /// Audit: `count: 18446744073709551615` wrapped the sink's end time, so the sink
    /// stopped after 4 s while the sender went on.
    #[test]
    fn the_sink_outlasts_any_count() {
        assert_eq!(super::sink_until_ns(1_000, Some(u64::MAX), 10_000_000), u64::MAX);
        assert_eq!(super::sink_until_ns(u64::MAX - 5, Some(1), 1), u64::MAX);
        assert_eq!(super::sink_until_ns(1_000_000_000, Some(10), 100_000_000), 7_000_000_000);
        assert_eq!(super::sink_until_ns(0, None, 1), u64::MAX);
    }
}
