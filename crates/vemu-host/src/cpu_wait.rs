//! How long the lab's software waited for a CPU: the machine's CPU pressure (the
//! kernel's PSI, `/proc/pressure/cpu`: the time some task was runnable but not running)
//! and, per node, the run delay of its processes' threads (`/proc/PID/task/TID/
//! schedstat`) — found by their network namespace, not their cgroup, so that programs
//! started with `ip netns exec` count too.
//!
//! Per-node run delay costs a walk of `/proc`; [`CpuWatch`] takes it only while the
//! machine is under pressure (and at the first look), and counts a thread's delay from
//! the first walk that saw it (a walk after a look that did not walk only sets where the
//! threads start from: what they waited in between would fall in one window). A window
//! of machine-wide pressure is the lab's software starved only if one of its nodes
//! waited too, where their waits were counted (the pressure counts any task's).

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::LabPaths;
pub use vemu_sys::cpus::{machine_pressure_us, machine_steal_us};

/// One node's processes so far: the time they ran and waited to run, ns.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeWait {
    pub node: String,
    pub wait_ns: u64,
    pub cpu_ns: u64,
}

/// What a look saw: the machine's pressure so far (µs), when (this machine's monotonic
/// clock, ns: windows are measured between two readings, however late the reader ran),
/// and each node's waits so far.
#[derive(Debug, Clone, Default)]
pub struct Look {
    pub pressure_us: Option<u64>,
    /// What the hypervisor took so far ([`machine_steal_us`]).
    pub steal_us: Option<(u64, u32)>,
    pub at_ns: u64,
    pub nodes: Vec<NodeWait>,
    /// Whether `nodes` counted their threads' waits since the previous look (a walk
    /// after a walk); else they say nothing of that span.
    pub nodes_counted: bool,
}

/// CLOCK_MONOTONIC, ns.
fn monotonic_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map_or(0, |t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
}

/// The longest a walk may take: under heavy load each of its reads waits for a CPU
/// (a monitor's reading took 0.06-0.3 s beside 32 TCP flows between 64 nodes on two
/// cores, and 5.9 s once in CI), and the monitor's windows wait for it.
const WALK_BUDGET: std::time::Duration = std::time::Duration::from_millis(250);

/// The pressure above which (over the time since the last look) the nodes' threads are
/// looked at.
const WALK_PRESSURE: f64 = 0.1;

/// The machine's and the nodes' waits, kept between looks.
#[derive(Debug, Default)]
pub struct CpuWatch {
    /// Each node's net namespace (device, inode), found once.
    namespaces: Option<HashMap<(u64, u64), usize>>,
    nodes: Vec<NodeWait>,
    /// Each thread's last schedstat (cpu, wait), by TID.
    threads: HashMap<u32, (u64, u64)>,
    /// Whether the last look walked (then the next walk's differences count, however
    /// late it comes: a starved machine delays the looks too).
    walked: bool,
    last_look: Option<(Instant, u64)>,
}

/// Fault injection for tests: `VEMU_HOST_FAULT=cpu-look-ms:N` makes every look take N ms
/// more (a walk of /proc on a machine under load), read once a process.
pub const FAULT_ENV: &str = "VEMU_HOST_FAULT";

fn look_stall_ms() -> Option<u64> {
    static STALL: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *STALL.get_or_init(|| {
        std::env::var(FAULT_ENV)
            .ok()
            .and_then(|v| v.strip_prefix("cpu-look-ms:").and_then(|n| n.parse().ok()))
    })
}

impl CpuWatch {
    /// The machine's pressure so far (µs) and each of `nodes`' waits so far, walking the
    /// nodes' threads when the machine was under pressure since the last look.
    pub fn look(&mut self, paths: &LabPaths, nodes: &[String]) -> Look {
        if let Some(ms) = look_stall_ms() {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
        let pressure = machine_pressure_us();
        let now = Instant::now();
        let at_ns = monotonic_ns();
        if self.nodes.len() != nodes.len() {
            self.nodes =
                nodes.iter().map(|n| NodeWait { node: n.clone(), ..NodeWait::default() }).collect();
            self.namespaces = None;
            self.walked = false;
        }
        let pressed = match (pressure, self.last_look) {
            (Some(p), Some((t, before))) => {
                let span_us = now.duration_since(t).as_micros().max(1) as f64;
                p.saturating_sub(before) as f64 / span_us > WALK_PRESSURE
            }
            // The first look walks: it sets where the threads start from, so that the
            // next look, if pressed, counts.
            (Some(_), None) => true,
            (None, _) => false,
        };
        if let Some(p) = pressure {
            self.last_look = Some((now, p));
        }
        let mut nodes_counted = pressed && self.walked;
        let mut walked = pressed;
        if pressed {
            if let Err(procs) = self.walk(paths, nodes, nodes_counted, now + WALK_BUDGET) {
                // Cut short: what it counted is right but not all of the window, which the
                // machine's pressure alone then judges; the next walk only notes.
                eprintln!(
                    "fidelity monitor: the walk of the nodes' threads stopped at its budget of \
                     {} ms ({procs} processes looked at): this window is judged by the \
                     machine's CPU pressure alone",
                    WALK_BUDGET.as_millis()
                );
                (nodes_counted, walked) = (false, false);
            }
        }
        self.walked = walked;
        Look {
            pressure_us: pressure,
            steal_us: machine_steal_us(),
            at_ns,
            nodes: self.nodes.clone(),
            nodes_counted,
        }
    }

    /// Add each thread's run and wait since the last walk to its node (`counts`: else
    /// only note them). If `deadline` passes first, the processes looked at so far: the
    /// threads not reached keep their last readings (their waits count at a later walk,
    /// none twice).
    fn walk(
        &mut self,
        paths: &LabPaths,
        nodes: &[String],
        counts: bool,
        deadline: Instant,
    ) -> Result<(), usize> {
        let namespaces = self.namespaces.get_or_insert_with(|| {
            let id = |n: &String| fs::metadata(paths.netns_pin(n)).ok().map(|m| (m.dev(), m.ino()));
            nodes.iter().enumerate().filter_map(|(i, n)| Some((id(n)?, i))).collect()
        });
        let mut seen = HashMap::with_capacity(self.threads.len());
        let Ok(procs) = fs::read_dir("/proc") else { return Ok(()) };
        for (looked, p) in procs.flatten().enumerate() {
            if Instant::now() > deadline {
                self.threads.extend(seen);
                return Err(looked);
            }
            let name = p.file_name();
            let Some(pid) = name.to_str().filter(|s| s.bytes().all(|b| b.is_ascii_digit())) else {
                continue;
            };
            let Ok(ns) = fs::metadata(format!("/proc/{pid}/ns/net")) else { continue };
            let Some(&node) = namespaces.get(&(ns.dev(), ns.ino())) else { continue };
            let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else { continue };
            for t in tasks.flatten() {
                let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                    continue;
                };
                let stat = fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
                let Some((cpu, wait)) = parse_schedstat(&stat) else { continue };
                let (cpu0, wait0) = self.threads.get(&tid).copied().unwrap_or((0, 0));
                if counts {
                    let w = &mut self.nodes[node];
                    w.cpu_ns += cpu.saturating_sub(cpu0);
                    w.wait_ns += wait.saturating_sub(wait0);
                }
                seen.insert(tid, (cpu, wait));
            }
        }
        self.threads = seen;
        Ok(())
    }
}

/// A thread's schedstat: (time on a CPU, time waiting for one), ns.
fn parse_schedstat(text: &str) -> Option<(u64, u64)> {
    let mut f = text.split_whitespace().map(|x| x.parse::<u64>().ok());
    Some((f.next()??, f.next()??))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A walk past its deadline stops, and the threads it did not reach keep their last
    /// readings (dropped, they would count all their waits so far at the next walk).
    #[test]
    fn a_walk_cut_short_keeps_the_threads_it_did_not_reach() {
        let paths = LabPaths::new("t-walk-cut");
        let nodes = vec!["n1".to_string()];
        let mut w = CpuWatch::default();
        w.threads.insert(u32::MAX, (7, 9));
        let past = Instant::now() - std::time::Duration::from_secs(1);
        assert_eq!(w.walk(&paths, &nodes, true, past), Err(0));
        assert_eq!(w.threads.get(&u32::MAX), Some(&(7, 9)));
        // In time, a walk ends and forgets threads that are gone.
        let later = Instant::now() + std::time::Duration::from_secs(60);
        assert_eq!(w.walk(&paths, &nodes, true, later), Ok(()));
        assert_eq!(w.threads.get(&u32::MAX), None);
    }

    #[test]
    fn schedstat_is_read() {
        assert_eq!(parse_schedstat("1200 340 7\n"), Some((1200, 340)));
        assert_eq!(parse_schedstat("junk"), None);
    }
}
