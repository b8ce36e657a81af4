//! Start-up commands of nodes: started when the lab comes up, their output appended to
//! the node's log, restarted (a few times, with a pause) when they fail. One thread
//! watches them all.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::LockExt;
use serde::{Deserialize, Serialize};
use vemu_host::{LabPaths, NodeEntry};

/// Times a failing command is started again before giving up.
const MAX_RESTARTS: u32 = 3;
const RESTART_PAUSE: Duration = Duration::from_secs(1);
const POLL: Duration = Duration::from_millis(100);
/// How often each node's log size is looked at.
const LOG_LOOK: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum ProcState {
    Running {
        pid: u32,
    },
    /// Ended with status 0 (or was stopped by the lab).
    Done,
    /// Failed and will be started again.
    Restarting {
        code: i32,
    },
    /// Failed too often, or could not be started.
    Failed {
        code: i32,
        reason: String,
    },
    /// Its node was stopped.
    Stopped,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcStatus {
    pub node: String,
    pub command: String,
    pub restarts: u32,
    #[serde(flatten)]
    pub state: ProcState,
}

struct Proc {
    status: ProcStatus,
    child: Option<Child>,
    restart_at: Option<Instant>,
}

pub struct Supervisor {
    procs: Arc<Mutex<Vec<Proc>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// A node's log, to append to: made readable by root and its group only (commands may
/// print secrets the scenario's files hold).
fn open_log(paths: &LabPaths, node: &str) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new().create(true).append(true).mode(0o640).open(paths.node_log(node))
}

/// Keep `node`'s log under `max_bytes`: once over, its last `max_bytes` go to
/// `NODE.log.1` (replacing what was there) and the log starts again (its writers
/// append, so they go on at its new end). Between two looks a node can write more:
/// the supervisor looks every second.
fn cap_log(paths: &LabPaths, node: &str, max_bytes: u64) {
    use std::io::{Seek, SeekFrom};
    let path = paths.node_log(node);
    let Ok(mut f) = OpenOptions::new().read(true).write(true).open(&path) else { return };
    let Ok(len) = f.metadata().map(|m| m.len()) else { return };
    if len <= max_bytes {
        return;
    }
    let old = path.with_extension("log.1");
    let kept = f.seek(SeekFrom::Start(len - max_bytes)).and_then(|_| {
        use std::os::unix::fs::OpenOptionsExt;
        let mut out =
            OpenOptions::new().create(true).write(true).truncate(true).mode(0o640).open(&old)?;
        std::io::copy(&mut (&mut f).take(max_bytes), &mut out)
    });
    let _ = f.set_len(0);
    drop(f);
    let said = match kept {
        Ok(n) => format!("the log passed {max_bytes} bytes: its last {n} are in {}", old.display()),
        Err(e) => format!(
            "the log passed {max_bytes} bytes and was cut (keeping its end in {} failed: {e})",
            old.display()
        ),
    };
    log_line(paths, node, &said);
}

fn log_line(paths: &LabPaths, node: &str, msg: &str) {
    if let Ok(mut f) = open_log(paths, node) {
        let _ = writeln!(f, "[vemu] {msg}");
    }
}

/// Start a shell command in a node with its output appended to the node's log.
pub fn spawn(paths: &LabPaths, node: &str, command: &str) -> std::io::Result<Child> {
    let log = open_log(paths, node)?;
    spawn_to(paths, node, command, log.try_clone()?)
}

/// Start a shell command in a node with its standard output going to `out` (a file of
/// the host's) and its errors to the node's log.
pub fn spawn_to(
    paths: &LabPaths,
    node: &str,
    command: &str,
    out: std::fs::File,
) -> std::io::Result<Child> {
    spawn_with(paths, node, command, out, Command::spawn)
}

/// [`spawn`] for a supervisor, which waits for the command: the orphan reapers of
/// every lab this process holds leave it be ([`spawn_waited`]).
fn spawn_supervised(paths: &LabPaths, node: &str, command: &str) -> std::io::Result<Child> {
    spawn_with(paths, node, command, open_log(paths, node)?, spawn_waited)
}

fn spawn_with(
    paths: &LabPaths,
    node: &str,
    command: &str,
    out: std::fs::File,
    spawner: fn(&mut Command) -> std::io::Result<Child>,
) -> std::io::Result<Child> {
    let log = open_log(paths, node)?;
    let entry = NodeEntry::open(paths, node).map_err(std::io::Error::other)?;
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(paths.node_dir(node))
        .env("VEMU_LAB", paths.lab_name())
        .env("VEMU_NODE", node)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(log);
    own_session(&mut cmd);
    entry.spawn(&mut cmd, spawner)
}

/// Threads making the nodes' PID namespaces when a lab starts.
const PREPARE_THREADS: usize = 4;

impl Supervisor {
    /// Start every `(node, command)` and watch them, and keep each node's log under
    /// `log_bytes`.
    pub fn start(paths: LabPaths, commands: Vec<(String, String)>, log_bytes: u64) -> Supervisor {
        let procs: Vec<Proc> = commands
            .into_iter()
            .map(|(node, command)| Proc {
                status: ProcStatus { node, command, restarts: 0, state: ProcState::Done },
                child: None,
                restart_at: Some(Instant::now()),
            })
            .collect();
        let mut procs = procs;
        // Each node's PID namespace is made with its first process (a few ms each):
        // made here side by side, so that the launch below does not pay them in turn.
        let mut nodes: Vec<&str> = procs.iter().map(|p| p.status.node.as_str()).collect();
        nodes.dedup();
        let next = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..PREPARE_THREADS.min(nodes.len()) {
                s.spawn(|| {
                    while let Some(n) = nodes.get(next.fetch_add(1, Ordering::Relaxed)) {
                        // Errors show again, and are logged, when the command starts.
                        let _ = NodeEntry::open(&paths, n);
                    }
                });
            }
        });
        // Launch everything now rather than at the first tick, so that `up` returns with
        // the commands started.
        tick(&paths, &mut procs);
        let procs = Arc::new(Mutex::new(procs));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (procs.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("vemu-supervise".into())
            .spawn(move || {
                let mut last_look = Instant::now();
                while !s.load(Ordering::Relaxed) {
                    tick(&paths, &mut p.locked());
                    if last_look.elapsed() >= LOG_LOOK {
                        last_look = Instant::now();
                        let mut nodes: Vec<String> =
                            p.locked().iter().map(|x| x.status.node.clone()).collect();
                        nodes.dedup();
                        for n in nodes {
                            cap_log(&paths, &n, log_bytes);
                        }
                    }
                    std::thread::sleep(POLL);
                }
            })
            .expect("spawning the supervisor thread");
        Supervisor { procs, stop, thread: Some(thread) }
    }

    /// Stop supervising the commands of `node` and end every process in it (SIGTERM,
    /// then SIGKILL after `grace`).
    pub fn stop_node(&self, paths: &LabPaths, node: &str, grace: Duration) {
        {
            let mut procs = self.procs.locked();
            for p in procs.iter_mut().filter(|p| p.status.node == node) {
                p.restart_at = None;
                p.status.state = ProcState::Stopped;
            }
        }
        // The node's init stays, so that its commands can start again in its PID namespace.
        vemu_host::kill_processes(&[paths.netns(node)], grace, true);
        let mut procs = self.procs.locked();
        for p in procs.iter_mut().filter(|p| p.status.node == node) {
            if let Some(mut c) = p.child.take() {
                let _ = c.kill();
                let _ = c.wait();
                forget_waited(c.id());
            }
            p.restart_at = None;
            p.status.state = ProcState::Stopped;
        }
        log_line(paths, node, "node stopped");
    }

    /// Start the commands of a stopped node again (with a fresh restart budget).
    pub fn start_node(&self, paths: &LabPaths, node: &str) {
        let mut procs = self.procs.locked();
        for p in procs.iter_mut().filter(|p| p.status.node == node && p.child.is_none()) {
            p.status.restarts = 0;
            p.status.state = ProcState::Done;
            p.restart_at = Some(Instant::now());
        }
        log_line(paths, node, "node started");
        tick(paths, &mut procs);
    }

    pub fn status(&self) -> Vec<ProcStatus> {
        self.procs.locked().iter().map(|p| p.status.clone()).collect()
    }

    /// Stop watching; the processes themselves are ended with their namespaces.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        for p in self.procs.locked().iter_mut() {
            if let Some(mut c) = p.child.take() {
                let _ = c.kill();
                let _ = c.wait();
                forget_waited(c.id());
            }
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Start `cmd` in a session of its own (and so a process group of its own, which a
/// timeout can end whole). A node's programs are then not in the controller's session:
/// where the kernel groups tasks by session for scheduling (autogroup, on by default on
/// a machine without per-service cgroups), each program started by the lab weighs as a
/// session of its own, as on a machine of its own, and the engine's shards — whose
/// engine raises the controller's group to `vemu_engine::NORMAL_NICE` when it starts
/// (bench/README.md, "One session among dozens") — do not share that group with them.
pub fn own_session(cmd: &mut Command) {
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(cmd, || {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Children of the controller that some thread waits for (besides supervised commands).
static WAITED: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Spawn a child that the caller will wait for, so that the orphan reaper leaves it be;
/// call [`forget_waited`] once it is waited for.
pub fn spawn_waited(cmd: &mut Command) -> std::io::Result<Child> {
    let mut w = WAITED.locked();
    let c = cmd.spawn()?;
    w.push(c.id());
    Ok(c)
}

pub fn forget_waited(pid: u32) {
    WAITED.locked().retain(|&p| p != pid);
}

/// Reap this process's children that nobody waits for: processes of nodes orphaned
/// when their parent ended (the controller, or an agent, is their subreaper), and nodes'
/// inits once their node is gone, which would otherwise stay zombies. Children that
/// some thread waits for — supervised commands of any lab here, [`spawn_waited`]
/// children — are left alone.
pub fn reap_orphans() {
    // Cheap check first: is any child of ours a zombie at all? (WNOWAIT: reap nothing.)
    // SAFETY: siginfo_t is plain data; waitid fills it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid with a valid siginfo pointer.
    let r = unsafe {
        libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT)
    };
    // SAFETY: si_pid is set (or left 0) by a successful waitid.
    if r != 0 || unsafe { info.si_pid() } == 0 {
        return;
    }
    let me = std::process::id();
    let known = WAITED.locked();
    let Ok(dir) = std::fs::read_dir("/proc") else { return };
    for pid in dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()) {
        if known.contains(&pid) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
        let mut rest =
            stat.rsplit_once(')').map(|(_, r)| r.split_whitespace()).into_iter().flatten();
        let (state, ppid) = (rest.next(), rest.next().and_then(|p| p.parse::<u32>().ok()));
        if state == Some("Z") && ppid == Some(me) {
            // SAFETY: waiting for a zombie child of ours.
            unsafe { libc::waitpid(pid as i32, std::ptr::null_mut(), libc::WNOHANG) };
        }
    }
}

fn tick(paths: &LabPaths, procs: &mut [Proc]) {
    reap_orphans();
    let now = Instant::now();
    for p in procs.iter_mut() {
        if let Some(child) = &mut p.child {
            match child.try_wait() {
                Ok(Some(st)) => {
                    forget_waited(child.id());
                    p.child = None;
                    let code = exit_code(st);
                    log_line(
                        paths,
                        &p.status.node,
                        &format!("'{}' exited with status {code}", p.status.command),
                    );
                    if p.status.state == ProcState::Stopped {
                        // Ended by a node stop: not restarted.
                    } else if code == 0 {
                        p.status.state = ProcState::Done;
                    } else if p.status.restarts < MAX_RESTARTS {
                        p.status.state = ProcState::Restarting { code };
                        p.restart_at = Some(now + RESTART_PAUSE);
                    } else {
                        p.status.state = ProcState::Failed {
                            code,
                            reason: format!("failed {} times", MAX_RESTARTS + 1),
                        };
                    }
                }
                Ok(None) => {}
                Err(_) => {
                    forget_waited(child.id());
                    p.child = None;
                }
            }
        }
        if p.restart_at.is_some_and(|t| t <= now) {
            if matches!(p.status.state, ProcState::Restarting { .. }) {
                p.status.restarts += 1;
            }
            p.restart_at = None;
            match spawn_supervised(paths, &p.status.node, &p.status.command) {
                Ok(c) => {
                    log_line(
                        paths,
                        &p.status.node,
                        &format!("started '{}' (pid {})", p.status.command, c.id()),
                    );
                    p.status.state = ProcState::Running { pid: c.id() };
                    p.child = Some(c);
                }
                Err(e) => {
                    log_line(
                        paths,
                        &p.status.node,
                        &format!("cannot start '{}': {e}", p.status.command),
                    );
                    p.status.state = ProcState::Failed { code: -1, reason: e.to_string() };
                }
            }
        }
    }
}

/// A process's exit status as a shell reports it: its code, or 128 + the signal that
/// ended it.
pub fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}
