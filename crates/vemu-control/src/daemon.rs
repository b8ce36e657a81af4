//! The controller process of one lab: builds it, serves its HTTP API (see [`crate::api`])
//! until asked to stop (or sent SIGTERM/SIGINT/SIGHUP), then removes every trace of it.

use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use nix::sys::signal::{SigSet, Signal};
use serde::{Deserialize, Serialize};
use serde_json::json;
use vemu_engine::LabClock;
use vemu_host::LabPaths;
use vemu_scenario::Plan;

use crate::api;
use crate::lab::saved::Saved;
use crate::lab::{Controller, StopRequest};
use crate::LockExt;
use vemu_machine::worker::{LocalWorker, Worker};

/// What the lab is doing while it comes up.
#[derive(Debug, Clone)]
pub enum Event {
    /// Nodes created so far, of the total.
    Progress(usize, usize),
    /// The lab serves its API and its data plane has caught up with what the nodes sent
    /// as they came up ([`Settled`]).
    Ready(Settled),
}

/// `vemu daemon`'s standard input: what `vemu up` (or `vemu attach`) asks of the
/// controller process it starts — one JSON document, written and read with this type by
/// both ends.
#[derive(Debug, Serialize, Deserialize)]
pub struct DaemonOrder {
    pub start: Start,
    /// Where the API listens besides the lab's socket ([`ApiOptions::tcp`]).
    pub api_tcp: Option<SocketAddr>,
    /// The descriptor of the lab's lock the starting command holds and hands on (`None`:
    /// the daemon takes the lock itself).
    pub lock_fd: Option<i32>,
}

/// What the controller starts with.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Start {
    /// Build the lab of this plan.
    Up(Box<Plan>),
    /// Take over the running lab of this name (its plan is in its directory).
    Attach(String),
}

impl Start {
    pub fn lab(&self) -> &str {
        match self {
            Start::Up(plan) => &plan.name,
            Start::Attach(name) => name,
        }
    }
}

/// `vemu daemon`'s standard output: one JSON line each, until the lab is ready or the
/// start failed (the starting command follows them, then returns).
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DaemonReport {
    /// Nodes created so far, of the total.
    Progress {
        done: usize,
        total: usize,
    },
    Ready(Settled),
    Failed(String),
}

impl From<Event> for DaemonReport {
    fn from(e: Event) -> DaemonReport {
        match e {
            Event::Progress(done, total) => DaemonReport::Progress { done, total },
            Event::Ready(s) => DaemonReport::Ready(s),
        }
    }
}

/// How long the data plane took to catch up after the nodes were built.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settled {
    pub waited_ms: u64,
    /// Still this far behind when `up` stopped waiting (0: caught up), ms.
    pub behind_ms: u64,
    /// Why a lab with links has no kernel fast path (every direction in the engine).
    pub fast_path_off: Option<String>,
    /// What the user should know before relying on the lab (links between machines set
    /// faster than the underlay carries).
    pub warnings: Vec<String>,
}

/// A frame this late (or later) means the data plane is behind.
const BEHIND_NS: u64 = 1_000_000;
/// Consecutive looks without a late frame that make the data plane caught up.
const CAUGHT_UP_LOOKS: u32 = 3;
/// `up` waits this long at most for the data plane.
const SETTLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Wait until the data plane has written every frame that is due, seen a few times in a
/// row (the nodes' start-up chatter — ARP, router solicitations, MLD reports — can be
/// millions of frame copies on a big LAN, and a ping sent behind them is late).
fn settle(ctl: &Arc<Mutex<Controller>>) -> Settled {
    let fast_path_off = match ctl.locked().counters() {
        Ok(c) if c.fast_path.starts_with("off") && !c.links.is_empty() => {
            Some(c.fast_path.trim_start_matches("off: ").to_string())
        }
        _ => None,
    };
    let warnings = ctl.locked().underlay_warnings();
    let start = std::time::Instant::now();
    let mut good = 0;
    loop {
        let behind = ctl.locked().worker.backlog().unwrap_or(0);
        good = if behind < BEHIND_NS { good + 1 } else { 0 };
        let waited_ms = start.elapsed().as_millis() as u64;
        if good >= CAUGHT_UP_LOOKS {
            return Settled { waited_ms, behind_ms: 0, fast_path_off, warnings };
        }
        if start.elapsed() >= SETTLE_LIMIT {
            return Settled { waited_ms, behind_ms: behind / 1_000_000, fast_path_off, warnings };
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Where the API listens besides the lab's Unix socket.
#[derive(Debug, Clone, Default)]
pub struct ApiOptions {
    /// A TCP address; requests there need the bearer token written to the lab directory.
    pub tcp: Option<SocketAddr>,
}

/// A random bearer token: 32 bytes from the kernel, in hex.
fn new_token() -> Result<String> {
    let mut b = [0u8; 32];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Build the lab described by `plan`, report progress through `report`, then serve it
/// until it is taken down. Returns once everything is removed.
pub fn run(
    plan: Plan,
    options: ApiOptions,
    lock: vemu_host::LabLock,
    mut report: impl FnMut(Event),
) -> Result<()> {
    // Held until every trace of the lab is gone, then given up (on every path out).
    let mut name = NameGuard(Some(lock));
    serve_lab(plan, options, None, &mut name, &mut report)
}

/// Take over lab `lab`, across machines, whose controller died (`vemu attach`): its plan
/// and what was set at run time are read from its directory ([`Saved`]), its agents are
/// asked whether they still hold their shares, and the lab is served as before — nothing
/// is built, and the nodes and the data plane never stopped. `options.tcp` (or, if
/// `None`, where the dead controller served it) is where the API is served on TCP.
pub fn attach(
    lab: &str,
    options: ApiOptions,
    lock: vemu_host::LabLock,
    mut report: impl FnMut(Event),
) -> Result<()> {
    let mut name = NameGuard(Some(lock));
    let paths = LabPaths::new(lab);
    let plan: Plan = std::fs::read(paths.plan())
        .map_err(anyhow::Error::from)
        .and_then(|b| Ok(serde_json::from_slice(&b)?))
        .with_context(|| {
            format!(
                "reading the plan of lab '{lab}' from {} (was it started on this machine?)",
                paths.plan().display()
            )
        })?;
    if plan.machines.is_empty() {
        bail!("lab '{lab}' runs on this machine alone: its controller was its data plane, and a lab whose controller died cannot be taken over (take it down with 'vemu clean', then up again)");
    }
    let saved = Saved::load(lab).context("the state its controller saved")?;
    saved
        .check(&plan)
        .with_context(|| format!("{} holds a value out of range", Saved::path(lab).display()))?;
    let options = ApiOptions { tcp: options.tcp.or(saved.api_tcp) };
    serve_lab(plan, options, Some(saved), &mut name, &mut report)
}

/// The lab's name, given up when dropped or when the lab is gone.
struct NameGuard(Option<vemu_host::LabLock>);

impl NameGuard {
    fn release(&mut self) {
        if let Some(l) = self.0.take() {
            l.release();
        }
    }
}

impl Drop for NameGuard {
    fn drop(&mut self) {
        self.release();
    }
}

/// Build (or with `resume`, take over) the lab and serve it until it is taken down.
fn serve_lab(
    plan: Plan,
    options: ApiOptions,
    resume: Option<Saved>,
    name: &mut NameGuard,
    report: &mut impl FnMut(Event),
) -> Result<()> {
    let paths = LabPaths::new(&plan.name);
    if std::os::unix::net::UnixStream::connect(paths.socket()).is_ok() {
        bail!(
            "lab '{}' is already running (take it down with 'vemu down --lab {}')",
            plan.name,
            plan.name
        );
    }
    let resuming = resume.is_some();
    if resuming {
        // The dead controller's socket.
        let _ = std::fs::remove_file(paths.socket());
    }
    // Descriptors first: a lab too big for the limit fails now, having built nothing.
    if plan.machines.is_empty() {
        vemu_host::ensure_open_files(vemu_host::files_needed(
            &plan,
            vemu_machine::fast_path_wanted(),
        ))?;
    }
    // Movement files are read here, before anything is built, and only for the movers:
    // the plan the controller keeps (and writes to plan.json) names them.
    let mut moving = plan.clone();
    moving.load_traces().map_err(|e| anyhow::anyhow!(e))?;
    if resume.is_none() && (paths.dir.exists() || !vemu_host::lab_netns(&plan.name).is_empty()) {
        eprintln!("removing what an earlier run of lab '{}' left behind", plan.name);
        vemu_host::remove_lab(&plan.name)?;
    }
    // Signals are taken by one thread; every thread started from here inherits the mask.
    let mut signals = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        signals.add(s);
    }
    signals.thread_block().context("blocking signals")?;
    // Processes of nodes whose parents end become ours (not the machine's init's), so
    // that the supervisor reaps them.
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };

    let clock = match &resume {
        Some(s) => LabClock { epoch_ns: s.clock_epoch_ns },
        None => LabClock::start(),
    };
    let epoch_ns = clock.epoch_ns;
    let mut worker = worker_for(&plan, &resume, clock, &paths)?;
    if resume.is_none() {
        worker.build(plan.clone(), epoch_ns, &mut |done, total| {
            report(Event::Progress(done, total))
        })?;
    }
    let realtime_epoch_ns = realtime_epoch_ns(&resume, clock);
    if resume.is_none() {
        // Records of an earlier run of the same lab would mix with this one's.
        let _ = std::fs::remove_dir_all(paths.log_dir().join("traffic"));
        let _ = std::fs::remove_file(paths.log_dir().join("stats-final.json"));
    }
    let mut movers = crate::radio::movers(&moving);
    drop(moving);
    if resume.is_some() {
        // Movement goes on where the models are now (each a function of the seed and
        // the ticks), told to the engines at the next tick.
        let now = clock.now_ns();
        for m in &mut movers {
            while let Some(t) = m.next_due(now) {
                m.last = m.advance(t).0;
            }
        }
    }
    let positions_log = positions_log(&plan, &paths, &movers, resume.is_some())?;
    let mut controller = Controller::new(plan.clone(), worker, clock, realtime_epoch_ns);
    (controller.movers, controller.positions_log) = (movers, positions_log);
    controller.wifi_log =
        crate::lab::wifi::wifi_log(&plan, &paths, resume.is_some()).context("writing wifi.csv")?;
    if resume.is_some() {
        controller.wifi_skip_past();
    }
    controller.api_tcp = options.tcp;
    let ctl = Arc::new(Mutex::new(controller));
    let timeline_skip = match resume {
        Some(saved) => {
            let mut c = ctl.locked();
            c.restore(saved)?;
            c.timeline_fired
        }
        None => 0,
    };
    let (shutdown, stop) = channel::<StopRequest>();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("vemu-api")
        .build()?;
    let started = open_api(&rt, &ctl, &shutdown, &paths, &plan, options.tcp);
    let servers = match started {
        Ok(s) => s,
        Err(e) => {
            // A lab being taken over keeps running (its agents hold it until their
            // leases end; 'vemu clean' ends it).
            if !resuming {
                let _ = ctl.locked().worker.teardown();
            }
            return Err(e);
        }
    };
    {
        let shutdown = shutdown.clone();
        std::thread::spawn(move || {
            let _ = signals.wait();
            let _ = shutdown.send(None);
        });
    }
    let timeline = crate::timeline::start(ctl.clone(), plan.events.clone(), clock, timeline_skip);
    let ticker = crate::tasks::mobility(ctl.clone(), clock);
    let wifi = crate::tasks::wifi(ctl.clone());
    let monitor = crate::tasks::fidelity_monitor(ctl.clone());
    let judge = crate::tasks::expectations(ctl.clone(), clock);
    let health = crate::lab::watch_machines(ctl.clone(), !plan.machines.is_empty());
    let settled = settle(&ctl);
    report(Event::Ready(settled));

    let reply_to = stop.recv().ok().flatten();
    timeline.stop();
    ticker.stop();
    wifi.stop();
    monitor.stop();
    judge.stop();
    health.stop();
    let result = wind_down(&mut ctl.locked(), &paths);
    // The lab is gone: its name is free before `down` hears so (an `up` right after works).
    name.release();
    if let Some(tx) = reply_to {
        let _ = tx.send(result.clone());
    }
    // The servers finish the requests in flight (the `down` that asked for this).
    servers.shutdown(&rt);
    result.map_err(anyhow::Error::msg)
}

/// The worker of `plan`'s lab: this machine's, or (a lab across machines) the agents',
/// connected anew or (`resume`) taken over.
fn worker_for(
    plan: &Plan,
    resume: &Option<Saved>,
    clock: LabClock,
    paths: &LabPaths,
) -> Result<Box<dyn Worker>> {
    // A lab across machines: the agents build it; this machine hosts none of its
    // nodes, only the lab's directory (API socket, plan) and logs.
    let worker: Box<dyn Worker> = match (plan.machines.is_empty(), resume) {
        (true, _) => Box::new(LocalWorker::default()),
        (false, Some(s)) => Box::new(crate::cluster::Cluster::attach(
            plan,
            &crate::cluster::agent_token()?,
            clock,
            s.underlay.clone(),
        )?),
        (false, None) => {
            let cluster = crate::cluster::Cluster::connect(plan, &crate::cluster::agent_token()?)?;
            std::fs::create_dir_all(&paths.dir)
                .with_context(|| format!("creating {}", paths.dir.display()))?;
            std::fs::create_dir_all(paths.log_dir())
                .with_context(|| format!("creating {}", paths.log_dir().display()))?;
            Box::new(cluster)
        }
    };
    Ok(worker)
}

/// CLOCK_REALTIME at the lab clock's zero, ns since 1970: now's, or the lab's that is
/// taken over.
fn realtime_epoch_ns(resume: &Option<Saved>, clock: LabClock) -> u64 {
    match resume {
        Some(s) => s.realtime_epoch_ns,
        None => {
            let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: clock_gettime writes the timespec.
            unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
            (ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64).saturating_sub(clock.now_ns())
        }
    }
}

/// `positions.csv` in the lab's log directory, with the wireless members' first
/// positions (appended to, for a lab taken over); none without movers.
fn positions_log(
    plan: &Plan,
    paths: &LabPaths,
    movers: &[crate::radio::Movers],
    resuming: bool,
) -> Result<Option<std::io::BufWriter<std::fs::File>>> {
    (!movers.is_empty())
        .then(|| -> Result<_> {
            let file = paths.log_dir().join("positions.csv");
            if resuming {
                return Ok(std::io::BufWriter::new(
                    std::fs::OpenOptions::new().append(true).create(true).open(file)?,
                ));
            }
            let mut f = std::io::BufWriter::new(std::fs::File::create(file)?);
            writeln!(f, "t_s,segment,node,x_m,y_m")?;
            for m in movers {
                let g = &plan.segments[m.seg];
                for (mp, p) in g.members.iter().zip(&m.last) {
                    writeln!(
                        f,
                        "0.000,{},{},{:.3},{:.3}",
                        g.name, plan.nodes[mp.end.node].name, p.x, p.y
                    )?;
                }
            }
            f.flush()?;
            Ok(f)
        })
        .transpose()
        .context("writing positions.csv")
}

/// The lab is stopping: its socket goes, the event stream hears so, what `vemu report`
/// reads afterwards is kept (the flows' records from other machines, the final
/// counters), and the worker takes everything down.
fn wind_down(ctl: &mut Controller, paths: &LabPaths) -> Result<(), String> {
    let _ = std::fs::remove_file(paths.socket());
    ctl.emit(json!({"type": "lab-down"}));
    if let Err(e) = ctl.collect_traffic() {
        eprintln!("vemu: gathering the traffic records of lab '{}': {e}", ctl.plan.name);
    }
    if let Ok(v) = ctl.stats() {
        let _ = std::fs::write(
            paths.log_dir().join("stats-final.json"),
            serde_json::to_vec_pretty(&v).unwrap_or_default(),
        );
    }
    ctl.worker.teardown().map_err(|e| e.to_string())
}

/// Serve the lab's API: its pid and plan written down, its socket (and, asked for,
/// TCP with a new token), the state a controller taking over would need saved.
fn open_api(
    rt: &tokio::runtime::Runtime,
    ctl: &Arc<Mutex<Controller>>,
    shutdown: &std::sync::mpsc::Sender<StopRequest>,
    paths: &LabPaths,
    plan: &Plan,
    tcp_at: Option<std::net::SocketAddr>,
) -> Result<api::Servers> {
    std::fs::write(paths.pid_file(), format!("{}\n", std::process::id()))?;
    // The plan holds the nodes' files, which may be secrets (keys, passwords).
    crate::files::write_private(&paths.plan(), &serde_json::to_vec_pretty(plan)?)?;
    let unix = rt
        .block_on(async { tokio::net::UnixListener::bind(paths.socket()) })
        .context("creating the API socket")?;
    std::fs::set_permissions(paths.socket(), std::fs::Permissions::from_mode(0o600))?;
    let tcp = match tcp_at {
        Some(addr) => {
            let token = new_token()?;
            let tf = paths.api_token();
            crate::files::write_private(&tf, format!("{token}\n").as_bytes())?;
            let l = rt
                .block_on(tokio::net::TcpListener::bind(addr))
                .with_context(|| format!("listening on {addr}"))?;
            std::fs::write(paths.api_address(), format!("{}\n", l.local_addr()?))?;
            ctl.locked().api_tcp = Some(l.local_addr()?);
            Some((l, token))
        }
        None => None,
    };
    // What a controller taking over after a crash of this one needs.
    ctl.locked().save();
    Ok(api::serve(rt, ctl.clone(), shutdown.clone(), paths.clone(), unix, tcp))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ends of `vemu up` → `vemu daemon` read and write these types: what one writes,
    /// the other reads back whole.
    #[test]
    fn the_daemon_handshake_reads_back_what_was_written() {
        let order = DaemonOrder {
            start: Start::Attach("lab1".into()),
            api_tcp: Some("127.0.0.1:8080".parse().unwrap()),
            lock_fd: Some(7),
        };
        let back: DaemonOrder =
            serde_json::from_slice(&serde_json::to_vec(&order).unwrap()).unwrap();
        assert_eq!(
            (back.start.lab(), back.api_tcp, back.lock_fd),
            ("lab1", order.api_tcp, Some(7))
        );
        let settled = Settled {
            waited_ms: 5,
            behind_ms: 0,
            fast_path_off: Some("no BPF".into()),
            warnings: vec!["slow underlay".into()],
        };
        for r in [
            DaemonReport::from(Event::Progress(3, 10)),
            DaemonReport::from(Event::Ready(settled.clone())),
            DaemonReport::Failed("no room".into()),
        ] {
            let line = serde_json::to_string(&r).unwrap();
            assert!(!line.contains('\n'), "one line each: {line}");
            let back: DaemonReport = serde_json::from_str(&line).unwrap();
            assert_eq!(back, r);
        }
        // A line that is not a report (a stray print) is refused, not taken for one.
        assert!(serde_json::from_str::<DaemonReport>("{\"ready\": true}").is_err());
    }
}
