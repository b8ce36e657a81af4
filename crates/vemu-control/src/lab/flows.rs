//! The controller's side of experiment traffic ([`vemu_machine::traffic`]): flows started on
//! their nodes' machines, and their records gathered here.

use serde_json::{json, Value};
use vemu_host::LabPaths;

use super::Controller;
use crate::clock_sync::Offset;
use crate::error::LabError;
use vemu_machine::traffic::{
    on_controller_clock, sink_until_ns, CbrRequest, End, Flow, FIRST_PORT,
};

impl Controller {
    /// Start a CBR flow; returns its description.
    pub fn traffic_cbr(&mut self, r: CbrRequest) -> Result<Value, LabError> {
        let (fi, ti) = (self.made_node(&r.from)?, self.made_node(&r.to)?);
        if fi == ti {
            return Err(LabError::invalid("a flow needs two different nodes"));
        }
        r.check().map_err(LabError::invalid)?;
        if self.flows_asked >= u32::from(u16::MAX - FIRST_PORT) {
            return Err(LabError::invalid(format!(
                "a lab runs at most {} traffic flows (one UDP port each from {FIRST_PORT})",
                u16::MAX - FIRST_PORT
            )));
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
                .ok_or_else(|| {
                    LabError::invalid(format!("node '{}' has no address to send to", r.to))
                })?,
        };
        // Time for both ends to start: one order to each end's machine across machines.
        let lead_ns = if self.plan.machines.is_empty() { 100_000_000 } else { 500_000_000 };
        let start_ns = r.start_ns.unwrap_or(0).max(self.clock.now_ns() + lead_ns);
        let interval_ns = (1e9 / r.rate_pps).round().max(1.0) as u64;
        let count = r.count.or(r.duration_ns.map(|d| d.div_ceil(interval_ns).max(1)));
        let id = self.flows_asked;
        self.flows_asked += 1;
        let port = FIRST_PORT + id as u16;
        let dir = LabPaths::new(&self.plan.name).log_dir().join("traffic");
        let (recv, send) = (
            End::Recv { flow: id, port, until_ns: sink_until_ns(start_ns, count, interval_ns) },
            End::Send {
                flow: id,
                to: std::net::SocketAddr::new(addr, port),
                size_bytes: r.size_bytes,
                interval_ns,
                start_ns,
                count,
            },
        );
        let (received_file, sent_file) = (recv.file(), send.file());
        // The sink listens first; each end starts on its node's machine, which keeps its
        // records (gathered here by [`Controller::collect_traffic`]).
        self.worker.traffic_end(&r.to, recv)?;
        self.worker.traffic_end(&r.from, send)?;
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
        self.save();
        std::fs::create_dir_all(&dir)
            .map_err(|e| LabError::internal(format!("creating {}: {e}", dir.display())))?;
        let list = serde_json::to_vec_pretty(&self.flows).unwrap_or_default();
        std::fs::write(dir.join("flows.json"), list)
            .map_err(|e| LabError::internal(format!("writing flows.json: {e}")))?;
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
                [
                    (f.from.clone(), f.sent_file.clone(), vec![None, from]),
                    (f.to.clone(), f.received_file.clone(), vec![None, from, to]),
                ]
            })
            .collect();
        let mut copied = 0;
        for (node, file, clocks) in files {
            let path = log.join(&file);
            let mut out = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| LabError::internal(format!("opening {}: {e}", path.display())))?;
            loop {
                // Where the machine's file goes on: the copy here is no guide, its
                // numbers changed length when they moved to this clock.
                let offset = self.records_copied.get(&file).copied().unwrap_or(0);
                let chunk = self.worker.traffic_records(&node, &file, offset).map_err(|e| {
                    LabError::internal(format!("gathering {file} from node {node}'s machine: {e}"))
                })?;
                if chunk.is_empty() {
                    break;
                }
                *self.records_copied.entry(file.clone()).or_default() += chunk.len() as u64;
                let chunk = on_controller_clock(&chunk, &clocks);
                std::io::Write::write_all(&mut out, chunk.as_bytes())
                    .map_err(|e| LabError::internal(format!("writing {}: {e}", path.display())))?;
                copied += chunk.len() as u64;
                // A controller that takes over after a crash goes on from here.
                self.save();
            }
        }
        Ok(copied)
    }
}
