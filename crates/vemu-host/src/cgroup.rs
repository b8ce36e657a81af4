//! Per-node CPU, memory and process limits, and what each node uses, through cgroups:
//! a node's processes (run commands, `vemu exec`, `vemu shell`) all join the node's
//! cgroup before they run (see [`crate::NodeEntry`]), so their children do too.
//!
//! A node's cgroup is `vemu/LAB/NODE` under each hierarchy: the v1 hierarchies `cpu`,
//! `cpuacct`, `memory` and `pids` where the machine mounts them (as this one does), or
//! the unified (v2) hierarchy where its controllers are enabled. It is made when the
//! node's first process starts, or when the node has limits, and removed with the lab.
//!
//! Processes are always capped, so that no node and no lab can take every PID of the
//! machine (its `kernel.pid_max` is 32,768 on many machines): a node without `pids:`
//! may have [`DEFAULT_NODE_PIDS`] at once, and all the nodes of all labs together
//! ([`labs_pids_cap`], at `vemu/` and at each `vemu/LAB`) three quarters of what the
//! machine allows, leaving the rest to the machine's own programs and to the labs'
//! controllers and agents (which are in no lab's cgroup).

use std::fs;
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{bail, Context, Result};
use vemu_scenario::Limits;

const ROOT: &str = "/sys/fs/cgroup";
/// Processes (and threads) a node may have at once when its scenario sets no `pids:`.
pub const DEFAULT_NODE_PIDS: u64 = 1024;
/// Environment variable that sets [`labs_pids_cap`] (a number, or `max`).
pub const LABS_PIDS_ENV: &str = "VEMU_LABS_PIDS";

/// Processes all labs' nodes may have together on this machine: [`LABS_PIDS_ENV`], else
/// three quarters of the lower of `kernel.pid_max` and `kernel.threads-max` (found once
/// a process: every node process's start asks).
pub fn labs_pids_cap() -> &'static str {
    static CAP: OnceLock<String> = OnceLock::new();
    CAP.get_or_init(|| {
        if let Ok(v) = std::env::var(LABS_PIDS_ENV) {
            let v = v.trim();
            if v == "max" || v.parse::<u64>().is_ok_and(|n| n > 0) {
                return v.to_string();
            }
        }
        let read = |p: &str| fs::read_to_string(p).ok().and_then(|s| s.trim().parse::<u64>().ok());
        let machine = [read("/proc/sys/kernel/pid_max"), read("/proc/sys/kernel/threads-max")]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(32_768);
        (machine / 4 * 3).max(DEFAULT_NODE_PIDS).to_string()
    })
}

/// The pids controller's directory of `rel` (v1's pids hierarchy, or v2's unified one).
fn pids_dir(rel: &Path) -> Option<PathBuf> {
    match layout() {
        Layout::V1 { pids, .. } => pids.as_ref().map(|h| h.join(rel)),
        Layout::V2(root) => Some(root.join(rel)),
        Layout::None => None,
    }
}
/// CFS period of a CPU limit, µs.
const CPU_PERIOD_US: u64 = 100_000;

/// Where the machine's cgroup controllers are.
#[derive(Debug, Clone)]
enum Layout {
    /// v1: the hierarchy of each controller, where mounted.
    V1 {
        cpu: Option<PathBuf>,
        cpuacct: Option<PathBuf>,
        memory: Option<PathBuf>,
        pids: Option<PathBuf>,
        /// Joined by confined nodes only ([`confine_devices`]).
        devices: Option<PathBuf>,
    },
    /// v2: the unified hierarchy, with cpu, memory and pids enabled at its root.
    V2(PathBuf),
    None,
}

fn layout() -> &'static Layout {
    static L: OnceLock<Layout> = OnceLock::new();
    L.get_or_init(|| {
        let v1 = |c: &str| {
            Some(Path::new(ROOT).join(c))
                .filter(|p| p.join("cgroup.procs").exists() && p.join("tasks").exists())
        };
        let (cpu, cpuacct, memory, pids) = (v1("cpu"), v1("cpuacct"), v1("memory"), v1("pids"));
        if cpu.is_some() || memory.is_some() || pids.is_some() {
            return Layout::V1 { cpu, cpuacct, memory, pids, devices: v1("devices") };
        }
        for root in [Path::new(ROOT).to_path_buf(), Path::new(ROOT).join("unified")] {
            let controllers =
                fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
            if ["cpu", "memory", "pids"]
                .iter()
                .all(|c| controllers.split_whitespace().any(|x| x == *c))
            {
                return Layout::V2(root);
            }
        }
        Layout::None
    })
}

fn node_rel(lab: &str, node: &str) -> PathBuf {
    Path::new("vemu").join(lab).join(node)
}

/// The node's cgroup directories (one per v1 hierarchy, or the v2 one). In v1 the `cpu`
/// one only where it exists: a node joins the `cpu` hierarchy only when it has a CPU
/// limit, because group scheduling costs the engine its timing — with every node's
/// processes in groups of their own, a waking node process preempted the engine's
/// threads and 1–2% of frames at light load came over 1 ms late (0.02–0.4% without).
fn node_dirs(lab: &str, node: &str) -> Vec<PathBuf> {
    let rel = node_rel(lab, node);
    match layout() {
        Layout::V1 { cpu, cpuacct, memory, pids, devices } => {
            let only_made =
                [cpu, devices].into_iter().flatten().map(|h| h.join(&rel)).filter(|d| d.is_dir());
            [cpuacct, memory, pids]
                .into_iter()
                .flatten()
                .map(|h| h.join(&rel))
                .chain(only_made)
                .collect()
        }
        Layout::V2(root) => vec![root.join(rel)],
        Layout::None => Vec::new(),
    }
}

/// Make the node's cgroups (idempotent). In v2 the controllers are enabled on the way.
/// `vemu/` and `vemu/LAB` get the labs' process cap, a new node its default one.
pub fn ensure(lab: &str, node: &str) -> Result<()> {
    let node_cap = DEFAULT_NODE_PIDS.to_string();
    let caps: Vec<(PathBuf, &str)> = [
        (Path::new("vemu").to_path_buf(), labs_pids_cap()),
        (Path::new("vemu").join(lab), labs_pids_cap()),
        (node_rel(lab, node), node_cap.as_str()),
    ]
    .into_iter()
    .filter_map(|(rel, cap)| pids_dir(&rel).filter(|d| !d.is_dir()).map(|d| (d, cap)))
    .collect();
    if let Layout::V2(root) = layout() {
        let mut dir = root.clone();
        for part in ["vemu", lab] {
            let _ = fs::write(dir.join("cgroup.subtree_control"), "+cpu +memory +pids");
            dir = dir.join(part);
            fs::create_dir_all(&dir)
                .with_context(|| format!("creating cgroup {}", dir.display()))?;
        }
        let _ = fs::write(dir.join("cgroup.subtree_control"), "+cpu +memory +pids");
    }
    for d in node_dirs(lab, node) {
        fs::create_dir_all(&d).with_context(|| format!("creating cgroup {}", d.display()))?;
    }
    for (d, cap) in caps {
        write(&d, "pids.max", cap)?;
    }
    Ok(())
}

/// The node's `cgroup.procs` files, open for writing: a process that writes "0" to
/// each joins the node's cgroups (done between fork and exec).
pub fn procs_files(lab: &str, node: &str) -> Result<Vec<OwnedFd>> {
    ensure(lab, node)?;
    node_dirs(lab, node)
        .into_iter()
        .map(|d| {
            let p = d.join("cgroup.procs");
            let f = fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_CLOEXEC)
                .open(&p)
                .with_context(|| format!("opening {}", p.display()))?;
            Ok(f.into())
        })
        .collect()
}

/// Let the node's processes open only the devices a confined node has
/// ([`crate::devices::ALLOWED`]): its v1 `devices` cgroup (which its processes then
/// join), or a program on its v2 cgroup. Once a node, when it is made.
pub fn confine_devices(lab: &str, node: &str) -> Result<()> {
    match layout() {
        Layout::V1 { devices: Some(h), .. } => crate::devices::restrict_v1(&h.join(node_rel(lab, node))),
        Layout::V2(root) => {
            ensure(lab, node)?;
            crate::devices::restrict_v2(&root.join(node_rel(lab, node)))
        }
        Layout::V1 { devices: None, .. } | Layout::None => bail!(
            "this machine cannot limit the devices of a tenant's nodes: it mounts neither the cgroup v1 'devices' hierarchy nor a cgroup v2 hierarchy with cpu, memory and pids"
        ),
    }
}

fn write(dir: &Path, file: &str, value: &str) -> Result<()> {
    let p = dir.join(file);
    fs::write(&p, value).with_context(|| format!("writing '{value}' to {}", p.display()))
}

/// Set (or, with `None`, lift) the node's limits; a node's processes are never lifted
/// beyond [`DEFAULT_NODE_PIDS`] (`None` there is the default cap).
pub fn set_limits(lab: &str, node: &str, limits: &Limits) -> Result<()> {
    let rel = node_rel(lab, node);
    let quota_us = limits.cpu_cores.map(|c| ((c * CPU_PERIOD_US as f64).round() as u64).max(1000));
    if matches!(layout(), Layout::None) && !limits.is_none() {
        bail!("this machine has no cgroup controllers for cpu, memory and pids (neither v1 hierarchies nor v2 with them enabled)");
    }
    ensure(lab, node)?;
    match layout() {
        Layout::None => {}
        Layout::V1 { cpu, cpuacct, memory, pids, .. } => {
            let need = |h: &Option<PathBuf>, what: &str, set: bool| -> Result<Option<PathBuf>> {
                match h {
                    Some(h) => Ok(Some(h.join(&rel))),
                    None if set => bail!(
                        "this machine has no '{what}' cgroup hierarchy for the node's {what} limit"
                    ),
                    None => Ok(None),
                }
            };
            if let Some(d) = need(cpu, "cpu", limits.cpu_cores.is_some())? {
                match quota_us {
                    Some(q) => {
                        let new = !d.is_dir();
                        fs::create_dir_all(&d)
                            .with_context(|| format!("creating cgroup {}", d.display()))?;
                        write(&d, "cpu.cfs_period_us", &CPU_PERIOD_US.to_string())?;
                        write(&d, "cpu.cfs_quota_us", &q.to_string())?;
                        if new {
                            // The node's processes so far (all in its cpuacct cgroup) join it.
                            if let Some(acct) = cpuacct {
                                for pid in fs::read_to_string(acct.join(&rel).join("cgroup.procs"))
                                    .unwrap_or_default()
                                    .lines()
                                {
                                    let _ = fs::write(d.join("cgroup.procs"), pid);
                                }
                            }
                        }
                    }
                    None if d.is_dir() => write(&d, "cpu.cfs_quota_us", "-1")?,
                    None => {}
                }
            }
            if let Some(d) = need(memory, "memory", limits.memory_bytes.is_some())? {
                write(
                    &d,
                    "memory.limit_in_bytes",
                    &limits.memory_bytes.map_or("-1".to_string(), |b| b.to_string()),
                )?;
            }
            if let Some(d) = need(pids, "pids", limits.pids.is_some())? {
                write(&d, "pids.max", &limits.pids.unwrap_or(DEFAULT_NODE_PIDS).to_string())?;
            }
        }
        Layout::V2(root) => {
            let d = root.join(&rel);
            write(
                &d,
                "cpu.max",
                &format!(
                    "{} {CPU_PERIOD_US}",
                    quota_us.map_or("max".to_string(), |q| q.to_string())
                ),
            )?;
            write(
                &d,
                "memory.max",
                &limits.memory_bytes.map_or("max".to_string(), |b| b.to_string()),
            )?;
            write(&d, "pids.max", &limits.pids.unwrap_or(DEFAULT_NODE_PIDS).to_string())?;
        }
    }
    Ok(())
}

/// What a node's processes use together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    /// CPU time since the node's cgroup was made, ns.
    pub cpu_ns: u64,
    pub memory_bytes: u64,
    pub processes: u64,
}

fn read_u64(p: &Path) -> Option<u64> {
    fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// The node's use so far (zero for a node whose cgroup was never made).
pub fn usage(lab: &str, node: &str) -> Usage {
    let rel = node_rel(lab, node);
    match layout() {
        Layout::V1 { cpuacct, memory, pids, .. } => Usage {
            cpu_ns: cpuacct
                .as_ref()
                .and_then(|h| read_u64(&h.join(&rel).join("cpuacct.usage")))
                .unwrap_or(0),
            memory_bytes: memory
                .as_ref()
                .and_then(|h| read_u64(&h.join(&rel).join("memory.usage_in_bytes")))
                .unwrap_or(0),
            processes: pids
                .as_ref()
                .and_then(|h| read_u64(&h.join(&rel).join("pids.current")))
                .unwrap_or(0),
        },
        Layout::V2(root) => {
            let d = root.join(rel);
            let usec = fs::read_to_string(d.join("cpu.stat")).ok().and_then(|s| {
                s.lines().find_map(|l| {
                    l.strip_prefix("usage_usec ").and_then(|v| v.trim().parse::<u64>().ok())
                })
            });
            Usage {
                cpu_ns: usec.unwrap_or(0) * 1000,
                memory_bytes: read_u64(&d.join("memory.current")).unwrap_or(0),
                processes: read_u64(&d.join("pids.current")).unwrap_or(0),
            }
        }
        Layout::None => Usage::default(),
    }
}

/// Remove a lab's cgroups (its processes must be gone: a cgroup with processes cannot
/// be removed, and is left, with an error, for `vemu clean` to retry).
pub fn remove_lab(lab: &str) -> Result<()> {
    let tops: Vec<PathBuf> = match layout() {
        Layout::V1 { cpu, cpuacct, memory, pids, devices } => [cpu, cpuacct, memory, pids, devices]
            .into_iter()
            .flatten()
            .map(|h| h.join("vemu").join(lab))
            .collect(),
        Layout::V2(root) => vec![root.join("vemu").join(lab)],
        Layout::None => Vec::new(),
    };
    // Killed processes leave their cgroups as they exit: a busy one is retried a while.
    let rmdir = |d: &Path| -> std::io::Result<()> {
        for _ in 0..40 {
            match fs::remove_dir(d) {
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    std::thread::sleep(std::time::Duration::from_millis(50))
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                r => return r,
            }
        }
        fs::remove_dir(d)
    };
    let mut first_error = None;
    for top in tops.iter().filter(|t| t.is_dir()) {
        for e in fs::read_dir(top).into_iter().flatten().flatten() {
            if e.path().is_dir() {
                if let Err(err) = rmdir(&e.path()) {
                    first_error.get_or_insert(
                        anyhow::Error::from(err)
                            .context(format!("removing cgroup {}", e.path().display())),
                    );
                }
            }
        }
        if let Err(err) = rmdir(top) {
            first_error.get_or_insert(
                anyhow::Error::from(err).context(format!("removing cgroup {}", top.display())),
            );
        }
        // `vemu/` itself goes with the last lab (another lab's cgroups keep it).
        if let Some(vemu) = top.parent() {
            let _ = fs::remove_dir(vemu);
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
