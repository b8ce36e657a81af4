//! What the controller of a lab across machines keeps on disk, so that a new controller
//! can take the lab over when the first one died (`vemu attach`): the agents hold the
//! nodes and the data plane, but what was set at run time, the lab clock's zero, the
//! flows and the timeline's progress lived only in the dead controller's memory.
//!
//! The file (`controller.json` in the lab's directory, root only) is written whole
//! after every change, to a temporary name and then renamed: a controller killed while
//! writing it leaves the one before. A lab on one machine has no such file: its
//! controller is also its engine, and a lab whose engine died is cleaned, not attached.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use vemu_host::LabPaths;
use vemu_scenario::Limits;

use super::{Controller, PortState};
use vemu_machine::traffic::Flow;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Saved {
    /// CLOCK_MONOTONIC at the lab clock's zero, ns (the agents' clocks started from it).
    pub clock_epoch_ns: u64,
    pub realtime_epoch_ns: u64,
    /// The links whose state is not the plan's: (link, state). Only those, so that the
    /// state of a lab of 10,000 links that changed three is small.
    #[serde(default)]
    pub changed_links: Vec<(usize, PortState)>,
    /// The same of segment ports: (segment, member, state).
    #[serde(default)]
    pub changed_members: Vec<(usize, usize, PortState)>,
    /// (Earlier versions wrote every link's and port's state; still read.)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<PortState>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<Vec<PortState>>,
    pub stopped: Vec<bool>,
    /// Each node's limits now (`vemu node set` changes them).
    pub limits: Vec<Limits>,
    pub flows: Vec<Flow>,
    pub flows_asked: u32,
    pub records_copied: HashMap<String, u64>,
    /// Machines found lost (their links were taken down then).
    pub lost: Vec<bool>,
    /// The underlay as measured when the lab came up (not measured again on attach: the
    /// probes would take the lab's network while it runs).
    pub underlay: Vec<(usize, usize, Option<u64>)>,
    /// Timeline firings carried out so far, in the timeline's (deterministic) order.
    pub timeline_fired: u64,
    /// Where the API was served on TCP, served there again.
    pub api_tcp: Option<SocketAddr>,
}

impl Saved {
    pub fn path(lab: &str) -> PathBuf {
        Saved::path_in(&LabPaths::new(lab))
    }

    /// Where a lab's directory (the controller's, or a machine's share of it) keeps it.
    pub fn path_in(paths: &LabPaths) -> PathBuf {
        vemu_machine::worker::saved_copy(paths)
    }

    /// The state the controller of `lab` saved last.
    pub fn load(lab: &str) -> Result<Saved> {
        Saved::read(&Saved::path(lab))
    }

    /// The state saved in `path`; what is not such a state is an error naming the file
    /// and, for bad contents, the line and column.
    pub fn read(path: &std::path::Path) -> Result<Saved> {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_slice(&bytes)
            .with_context(|| format!("reading {} (not a controller's saved state)", path.display()))
    }
}

impl Saved {
    /// Whether every value fits `plan` and this machine's clocks; else an error naming
    /// the field and the value (a damaged or forged file must not make a controller
    /// that reports nonsense, or reads files outside the lab's directory).
    pub fn check(&self, plan: &vemu_scenario::Plan) -> Result<()> {
        let bad = |field: &str, why: String| anyhow::anyhow!("{field}: {why}");
        let mono = vemu_engine::monotonic_ns();
        if self.clock_epoch_ns > mono {
            return Err(bad("clock_epoch_ns", format!("{} is after this machine's monotonic clock now ({mono}): the lab clock cannot have started in the future", self.clock_epoch_ns)));
        }
        let real = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(u64::MAX, |d| d.as_nanos() as u64);
        if self.realtime_epoch_ns > real.saturating_add(86_400_000_000_000) {
            return Err(bad(
                "realtime_epoch_ns",
                format!("{} is more than a day after now ({real})", self.realtime_epoch_ns),
            ));
        }
        let imps = |field: String, st: &PortState| {
            st.imps.iter().try_for_each(|i| i.validate().map_err(|e| bad(&field, e)))
        };
        for (i, st) in &self.changed_links {
            imps(format!("changed_links[{i}]"), st)?;
        }
        for (g, k, st) in &self.changed_members {
            imps(format!("changed_members[{g}][{k}]"), st)?;
        }
        for (i, st) in self.links.iter().enumerate() {
            imps(format!("links[{i}]"), st)?;
        }
        for (i, l) in self.limits.iter().enumerate() {
            let cpu_ok = l.cpu_cores.is_none_or(|c| c.is_finite() && c > 0.0 && c <= 4096.0);
            if !cpu_ok || l.memory_bytes == Some(0) || l.pids == Some(0) {
                return Err(bad(
                    &format!("limits[{i}]"),
                    format!("{l:?} is not a limit a node can have"),
                ));
            }
        }
        let machines = plan.machines.len();
        for (i, &(a, b, _)) in self.underlay.iter().enumerate() {
            if a >= machines || b >= machines || a == b {
                return Err(bad(&format!("underlay[{i}]"), format!("({a}, {b}) is not a direction between two of the lab's {machines} machines")));
            }
        }
        for (i, f) in self.flows.iter().enumerate() {
            let node = |n: &str| plan.nodes.iter().any(|x| x.name == n);
            let file = |n: &str| in_log_dir(n);
            let ok = node(&f.from)
                && node(&f.to)
                && file(&f.sent_file)
                && file(&f.received_file)
                && f.rate_pps.is_finite()
                && f.rate_pps > 0.0
                && f.size_bytes <= 65_535;
            if !ok {
                return Err(bad(&format!("flows[{i}]"), "not a flow of this lab (unknown node, a records file outside the lab's directory, or a rate or size out of range)".into()));
            }
        }
        if let Some(f) = self.records_copied.keys().find(|f| !in_log_dir(f)) {
            return Err(bad(
                "records_copied",
                format!("'{f}' is not a file of the lab's log directory"),
            ));
        }
        let elapsed = mono.saturating_sub(self.clock_epoch_ns);
        let most = vemu_scenario::firings_by(&plan.events, elapsed);
        if self.timeline_fired > most {
            return Err(bad("timeline_fired", format!("{} firings, but the lab's timeline has at most {most} by now ({} s of lab time)", self.timeline_fired, elapsed / 1_000_000_000)));
        }
        if let Some(a) = self.api_tcp {
            if a.port() == 0 || a.ip().is_unspecified() || a.ip().is_multicast() {
                return Err(bad("api_tcp", format!("{a} is not an address the API was served on (a port, on one address: to serve it on all of them, say so with 'vemu attach --api')")));
            }
        }
        Ok(())
    }
}

/// Whether `name` is a file name under the lab's log directory (relative, no `..`).
fn in_log_dir(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 4096
        && std::path::Path::new(name)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}

/// Write `bytes` to `path` (root only) by way of a new file renamed over it: a reader
/// (or a crash) sees the old contents or the new, never part of them.
pub(crate) fn write_whole(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("json.new");
    crate::files::write_private(&tmp, bytes)?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming {}", tmp.display()))
}

impl Controller {
    /// The state a new controller needs to take this lab over.
    pub(crate) fn saved(&self) -> Saved {
        Saved {
            clock_epoch_ns: self.clock.epoch_ns,
            realtime_epoch_ns: self.realtime_epoch_ns,
            changed_links: self
                .links
                .iter()
                .zip(&self.plan.links)
                .enumerate()
                .filter(|(_, (now, l))| !now.is(&l.forward, &l.reverse))
                .map(|(i, (now, _))| (i, now.clone()))
                .collect(),
            changed_members: self
                .members
                .iter()
                .zip(&self.plan.segments)
                .enumerate()
                .flat_map(|(g, (now, seg))| {
                    now.iter()
                        .zip(&seg.members)
                        .enumerate()
                        .filter(|(_, (n, m))| !n.is(&m.egress, &m.ingress))
                        .map(move |(k, (n, _))| (g, k, n.clone()))
                })
                .collect(),
            links: Vec::new(),
            members: Vec::new(),
            stopped: self.stopped.clone(),
            limits: self.plan.nodes.iter().map(|n| n.limits).collect(),
            flows: self.flows.clone(),
            flows_asked: self.flows_asked,
            records_copied: self.records_copied.clone(),
            lost: self.lost.clone(),
            underlay: self.worker.underlay(),
            timeline_fired: self.timeline_fired,
            api_tcp: self.api_tcp,
        }
    }

    /// Write [`Saved`] (labs across machines only). A failure is said, not returned: the
    /// change it follows was made.
    pub(crate) fn save(&self) {
        if self.plan.machines.is_empty() {
            return;
        }
        let path = Saved::path(&self.plan.name);
        let bytes = match serde_json::to_vec(&self.saved()) {
            Ok(b) => b,
            Err(e) => {
                return eprintln!(
                    "vemu: saving the controller's state of lab '{}': {e}",
                    self.plan.name
                )
            }
        };
        if let Err(e) = write_whole(&path, &bytes) {
            eprintln!("vemu: saving the controller's state of lab '{}' (a controller that takes it over after a crash would not have it): {e:#}", self.plan.name);
        }
        // The agents keep a copy, for a controller on another machine.
        self.worker.keep_saved(std::sync::Arc::new(bytes));
    }

    /// Take over `saved`, what an earlier controller of this lab set (refused when it
    /// does not fit the plan: the two files are of different runs). Where the API is
    /// served is the caller's choice ([`crate::daemon::attach`] defaults to the saved one).
    pub(crate) fn restore(&mut self, saved: Saved) -> Result<()> {
        let members: Vec<usize> = self.members.iter().map(Vec::len).collect();
        let legacy = !saved.links.is_empty() || !saved.members.is_empty();
        let fits = (!legacy
            || (saved.links.len() == self.links.len()
                && saved.members.iter().map(Vec::len).collect::<Vec<_>>() == members))
            && saved.changed_links.iter().all(|(i, _)| *i < self.links.len())
            && saved.changed_members.iter().all(|(g, k, _)| members.get(*g).is_some_and(|n| k < n));
        if !fits
            || saved.stopped.len() != self.stopped.len()
            || saved.limits.len() != self.plan.nodes.len()
            || saved.lost.len() != self.lost.len()
        {
            anyhow::bail!(
                "{} does not fit the lab's plan (of another run of lab '{}'?)",
                Saved::path(&self.plan.name).display(),
                self.plan.name
            );
        }
        if legacy {
            self.links = saved.links;
            self.members = saved.members;
        }
        for (i, st) in saved.changed_links {
            self.links[i] = st;
        }
        for (g, k, st) in saved.changed_members {
            self.members[g][k] = st;
        }
        self.stopped = saved.stopped;
        for (n, l) in self.plan.nodes.iter_mut().zip(saved.limits) {
            n.limits = l;
        }
        self.flows = saved.flows;
        self.flows_asked = saved.flows_asked;
        self.records_copied = saved.records_copied;
        self.lost = saved.lost;
        self.timeline_fired = saved.timeline_fired;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Saved {
        Saved {
            clock_epoch_ns: 5,
            realtime_epoch_ns: 6,
            changed_links: Vec::new(),
            changed_members: Vec::new(),
            links: Vec::new(),
            members: vec![Vec::new()],
            stopped: vec![false, true],
            limits: vec![Limits::default(); 2],
            flows: Vec::new(),
            flows_asked: 3,
            records_copied: HashMap::from([("a.csv".to_string(), 10)]),
            lost: vec![false],
            underlay: vec![(0, 1, Some(1_000_000))],
            timeline_fired: 4,
            api_tcp: Some("127.0.0.1:9000".parse().unwrap()),
        }
    }

    /// Only the ports changed at run time are written; a file of an earlier version
    /// (every port's state) still reads.
    #[test]
    fn only_changed_ports_are_written_and_the_old_form_still_reads() {
        let mut s = sample();
        s.members = Vec::new();
        let state = PortState { up: false, imps: Default::default() };
        s.changed_links = vec![(7, state.clone())];
        let json = serde_json::to_string(&s).unwrap();
        assert!(
            json.contains("\"changed_links\":[[7,{\"up\":false")
                && !json.contains("\"links\"")
                && !json.contains("\"members\""),
            "{json}"
        );
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v.as_object_mut().unwrap().remove("changed_links");
        v.as_object_mut().unwrap().remove("changed_members");
        v["links"] = serde_json::to_value(vec![state.clone(), state]).unwrap();
        let old: Saved = serde_json::from_value(v).unwrap();
        assert_eq!((old.links.len(), old.changed_links.len()), (2, 0));
    }

    /// Values a damaged or forged file may hold are refused, naming the field (the
    /// audit of issue 39 attached with these, and status said "engine shards busy
    /// 266090500%").
    #[test]
    fn values_out_of_range_are_refused_naming_the_field() {
        let mut plan =
            vemu_scenario::load_str("nodes: {a: {}, b: {}}\n", "t.yaml", "t", None).unwrap();
        for (name, ip) in [("m1", "10.0.0.1:1"), ("m2", "10.0.0.2:1")] {
            plan.machines
                .push(vemu_scenario::Machine { name: name.into(), address: ip.parse().unwrap() });
        }
        // A node started every second since the lab clock's zero.
        plan.events.push(vemu_scenario::TimedEvent {
            at_ns: 0,
            every_ns: Some(1_000_000_000),
            until_ns: None,
            target: vemu_scenario::EventTarget::Node("a".into()),
            action: vemu_scenario::EventAction::State(true),
        });
        let good = sample();
        good.check(&plan).unwrap();
        let field = |s: Saved| format!("{:#}", s.check(&plan).unwrap_err());
        let e = field(Saved { clock_epoch_ns: u64::MAX, ..sample() });
        assert!(e.starts_with("clock_epoch_ns: 18446744073709551615 is after"), "{e}");
        let e = field(Saved { underlay: vec![(99, 100, Some(1))], ..sample() });
        assert!(e.starts_with("underlay[0]: (99, 100) is not a direction"), "{e}");
        let e = field(Saved {
            records_copied: HashMap::from([("../../etc/shadow".to_string(), 0)]),
            ..sample()
        });
        assert!(e.starts_with("records_copied: '../../etc/shadow'"), "{e}");
        let mut bad_link = PortState { up: true, imps: Default::default() };
        bad_link.imps[1].delay_ns = u64::MAX;
        let e = field(Saved { changed_links: vec![(0, bad_link)], ..sample() });
        assert!(e.starts_with("changed_links[0]: "), "{e}");
        let e = field(Saved {
            limits: vec![Limits { cpu_cores: Some(f64::NAN), ..Limits::default() }; 2],
            ..sample()
        });
        assert!(e.starts_with("limits[0]: "), "{e}");
        // Issue 61: a count of firings the timeline cannot have had, and an API address
        // that is every address (vemu attach served it there and said another).
        let e = field(Saved { timeline_fired: 1_000_000_000_000_000_000, ..sample() });
        assert!(e.starts_with("timeline_fired: 1000000000000000000 firings"), "{e}");
        let e = field(Saved { api_tcp: Some("0.0.0.0:1".parse().unwrap()), ..sample() });
        assert!(e.starts_with("api_tcp: 0.0.0.0:1 is not an address"), "{e}");
        let no_timeline = vemu_scenario::Plan { events: Vec::new(), ..plan.clone() };
        let e = format!(
            "{:#}",
            Saved { timeline_fired: 1, ..sample() }.check(&no_timeline).unwrap_err()
        );
        assert!(e.contains("at most 0 by now"), "{e}");
    }

    /// What a controller writes, a new one reads back whole; a damaged or missing file
    /// is an error naming it (and where the damage is), never a panic.
    #[test]
    fn the_saved_state_reads_back_and_damage_is_named() {
        let dir = std::env::temp_dir().join(format!("vemu-saved-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("controller.json");
        std::fs::write(&path, serde_json::to_vec(&sample()).unwrap()).unwrap();
        let back = Saved::read(&path).unwrap();
        // A key no controller writes is refused, naming it.
        let mut v = serde_json::to_value(sample()).unwrap();
        v["surprise"] = serde_json::json!(1);
        let forged = dir.join("forged.json");
        std::fs::write(&forged, serde_json::to_vec(&v).unwrap()).unwrap();
        let e = format!("{:#}", Saved::read(&forged).unwrap_err());
        assert!(e.contains("unknown field `surprise`"), "{e}");
        assert_eq!(
            (back.stopped, back.timeline_fired, back.flows_asked, back.api_tcp),
            (vec![false, true], 4, 3, sample().api_tcp)
        );
        for (bytes, want) in [
            (&b"{\"clock_epoch_ns\": 5,"[..], "line 1"),
            (b"[1, 2]", "line 1"),
            (b"", "line 1"),
            (b"{\"clock_epoch_ns\": -1}", "line 1"),
        ] {
            std::fs::write(&path, bytes).unwrap();
            let e = format!("{:#}", Saved::read(&path).unwrap_err());
            assert!(
                e.contains(&path.display().to_string())
                    && e.contains("not a controller's saved state")
                    && e.contains(want),
                "{e}"
            );
        }
        std::fs::remove_file(&path).unwrap();
        let e = format!("{:#}", Saved::read(&path).unwrap_err());
        assert!(e.contains("reading") && e.contains("No such file"), "{e}");
        let _ = std::fs::remove_dir(&dir);
    }
}
