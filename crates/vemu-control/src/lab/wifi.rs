//! The controller's side of infrastructure mode on 802.11 channels: what the channels
//! decided (associations, losses) and measured (handovers), read from their machines
//! and told to the event stream, the log (`wifi.csv`) and `vemu status`.

use std::collections::HashMap;
use std::io::Write;

use serde_json::json;
use vemu_radio::wifi::bss::BssEvent;

use super::Controller;

/// What the controller has read of one channel's events.
#[derive(Debug, Default)]
pub(crate) struct WifiSeen {
    /// The number of the last event read.
    after: u64,
    /// Per station (member), its handovers so far and the last one's time, ns.
    handovers: HashMap<u32, (u32, u64)>,
}

impl WifiSeen {
    /// Station `m`'s handovers so far and the time of the last, ns.
    pub(crate) fn handovers(&self, m: u32) -> Option<(u32, u64)> {
        self.handovers.get(&m).copied()
    }
}

/// Segments of `plan` in infrastructure mode.
pub(crate) fn infra_segments(plan: &vemu_scenario::Plan) -> Vec<usize> {
    (0..plan.segments.len())
        .filter(|&g| {
            let w = plan.segments[g].wireless.as_ref();
            w.and_then(|w| w.medium.dcf.as_ref()).is_some_and(|d| !d.roles.is_empty())
        })
        .collect()
}

impl Controller {
    /// Read what the infrastructure channels did since last asked and tell the event
    /// stream and the log (a channel of a lost machine is skipped: it has no news).
    pub(crate) fn wifi_poll(&mut self) {
        for g in infra_segments(&self.plan) {
            let after = self.wifi.get(&g).map_or(0, |s| s.after);
            let Ok(snap) = self.worker.radio(g, after) else { continue };
            for (n, e) in snap.bss_log {
                self.wifi_event(g, &e);
                self.wifi.entry(g).or_default().after = n;
            }
        }
    }

    fn wifi_event(&mut self, g: usize, e: &BssEvent) {
        let seg = &self.plan.segments[g];
        let name = |m: u32| self.plan.nodes[seg.members[m as usize].end.node].name.clone();
        let mut ev = json!({"type": "wifi", "segment": seg.name, "t_ns": e.at_ns()});
        let (sta, ap, from, handover_ns) = match *e {
            BssEvent::Associated { sta, ap, from, .. } => {
                ev["event"] = json!(if from.is_some() { "roamed" } else { "associated" });
                (sta, ap, from, None)
            }
            BssEvent::Lost { sta, ap, .. } => {
                ev["event"] = json!("lost");
                (sta, ap, None, None)
            }
            BssEvent::Handover { sta, from, to, last_ns, first_ns } => {
                ev["event"] = json!("handover");
                (sta, to, Some(from), Some(first_ns - last_ns))
            }
        };
        ev["station"] = json!(name(sta));
        ev["ap"] = json!(name(ap));
        if let Some(f) = from {
            ev["from"] = json!(name(f));
        }
        if let Some(h) = handover_ns {
            ev["handover_ms"] = json!(h as f64 / 1e6);
            let seen = self.wifi.entry(g).or_default().handovers.entry(sta).or_default();
            *seen = (seen.0 + 1, h);
        }
        if let Some(log) = &mut self.wifi_log {
            let _ = writeln!(
                log,
                "{:.6},{},{},{},{},{},{}",
                e.at_ns() as f64 / 1e9,
                seg.name,
                ev["event"].as_str().unwrap_or_default(),
                ev["station"].as_str().unwrap_or_default(),
                ev["ap"].as_str().unwrap_or_default(),
                ev["from"].as_str().unwrap_or_default(),
                handover_ns.map(|h| format!("{:.3}", h as f64 / 1e6)).unwrap_or_default(),
            );
            let _ = log.flush();
        }
        self.emit(ev);
    }
}

impl Controller {
    /// Take over the channels' logs as they are (a lab taken over: what the previous
    /// controller read is in `wifi.csv` already).
    pub(crate) fn wifi_skip_past(&mut self) {
        for g in infra_segments(&self.plan) {
            if let Ok(snap) = self.worker.radio(g, 0) {
                let last = snap.bss_log.last().map_or(0, |(n, _)| *n);
                self.wifi.entry(g).or_default().after = last;
            }
        }
    }
}

/// `wifi.csv` in the lab's log directory (appended to, for a lab taken over); none
/// without an infrastructure channel.
pub(crate) fn wifi_log(
    plan: &vemu_scenario::Plan,
    paths: &vemu_host::LabPaths,
    resuming: bool,
) -> std::io::Result<Option<std::io::BufWriter<std::fs::File>>> {
    if infra_segments(plan).is_empty() {
        return Ok(None);
    }
    let file = paths.log_dir().join("wifi.csv");
    if resuming {
        let f = std::fs::OpenOptions::new().append(true).create(true).open(file)?;
        return Ok(Some(std::io::BufWriter::new(f)));
    }
    let mut f = std::io::BufWriter::new(std::fs::File::create(file)?);
    writeln!(f, "t_s,segment,event,station,ap,from,handover_ms")?;
    f.flush()?;
    Ok(Some(f))
}
