//! The `vemu` command.

use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use serde_json::json;
use vemu_control::daemon::{self, Event};
mod stats;
mod traffic;

use vemu_control::daemon::ApiOptions;
use vemu_control::{percent_encode, ApiFailure, Client, DirStats, LabClock, LabStatus, TUNNEL_FRAME_EXTRA};
use vemu_host::{LabPaths, NodeEntry};
use vemu_link::{Impairments, Loss, QueueLimit};
use vemu_scenario::Plan;

#[derive(Parser)]
#[command(name = "vemu", version, about = "A scalable network emulator: real software in virtual nodes, emulated links")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Args, Clone)]
struct LabArg {
    /// The lab to act on; may be left out while only one lab runs.
    #[arg(long, global = true)]
    lab: Option<String>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Bring up a lab from a scenario file; returns when it is ready.
    Up {
        file: PathBuf,
        /// Lab name (default: the scenario's `name`).
        #[arg(long)]
        name: Option<String>,
        /// Stay attached; Ctrl-C takes the lab down.
        #[arg(long)]
        foreground: bool,
        /// Also serve the lab's API on this TCP address (e.g. 127.0.0.1:8080); requests
        /// there need the bearer token printed once (and kept in /run/vemu/LAB/api-token).
        #[arg(long, value_name = "ADDR")]
        api: Option<std::net::SocketAddr>,
        /// Print a link to the lab's web interface (served by its controller on the
        /// --api address, or on 127.0.0.1 at a free port).
        #[arg(long)]
        ui: bool,
        /// The machines the lab spans, instead of the scenario's `machines:`:
        /// NAME=ADDRESS[:PORT],... (each runs 'vemu agent'), or @FILE: a cluster file
        /// with one NAME=ADDRESS[:PORT] a line.
        #[arg(long, value_name = "LIST|@FILE")]
        machines: Option<String>,
        /// Then wait (up to SECONDS, default 300) until every node has a route to every
        /// prefix of the lab — routing daemons need seconds after 'up' — and say how long
        /// that took.
        #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "300")]
        wait_converged: Option<u64>,
        /// The scenario is a tenant's (someone not trusted with this machine, e.g. a
        /// Kubernetes VemuLab): only its own nodes, plus the features ALLOWED lists
        /// ('none', or some of from, trace, host, external, divert, shared-pids);
        /// anything else is refused at its field before it is read.
        #[arg(long, value_name = "ALLOWED")]
        tenant: Option<String>,
    },
    /// Print a new link to a running lab's web interface (it works once, for 2 minutes).
    Ui {
        #[command(flatten)]
        lab: LabArg,
    },
    /// Check a scenario file without building anything.
    Check {
        file: PathBuf,
        /// Machines instead of the scenario's (as for 'vemu up': LIST or @FILE):
        /// placement is printed.
        #[arg(long, value_name = "LIST|@FILE")]
        machines: Option<String>,
        /// The scenario is a tenant's (someone not trusted with this machine, e.g. a
        /// Kubernetes VemuLab): only its own nodes, plus the features ALLOWED lists
        /// ('none', or some of from, trace, host, external, divert, shared-pids);
        /// anything else is refused at its field before it is read.
        #[arg(long, value_name = "ALLOWED")]
        tenant: Option<String>,
    },
    /// Make a scenario of a GraphML topology (e.g. an Internet Topology Zoo map): nodes
    /// from its nodes, links from its edges with delays from the nodes' coordinates
    /// (speed of light in fibre) and bandwidths from LinkSpeedRaw. Prints the YAML.
    Import {
        file: PathBuf,
        /// Lab name (default: from the file's name).
        #[arg(long)]
        name: Option<String>,
    },
    /// Take a lab down and remove every trace of it.
    Down {
        /// The lab (or use --lab).
        name: Option<String>,
        #[command(flatten)]
        lab: LabArg,
    },
    /// List labs.
    Ls,
    /// Nodes, links, impairments and per-direction counters of a lab.
    Status {
        name: Option<String>,
        #[command(flatten)]
        lab: LabArg,
        #[arg(long)]
        json: bool,
    },
    /// Run a command in a node, with stdio attached; its exit status is passed through.
    Exec {
        node: String,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        command: Vec<String>,
        #[command(flatten)]
        lab: LabArg,
    },
    /// Open an interactive shell in a node.
    Shell {
        node: String,
        #[command(flatten)]
        lab: LabArg,
    },
    /// Change a link while the lab runs.
    Link {
        #[command(subcommand)]
        cmd: LinkCmd,
    },
    /// Live statistics of every link direction and LAN port: throughput, drops, queue,
    /// delay held (until Ctrl-C or --count).
    Stats {
        /// Period between samples, e.g. 1s or 200ms.
        #[arg(long, default_value = "1s")]
        interval: String,
        /// One JSON object per sample instead of a table.
        #[arg(long)]
        json: bool,
        /// Also append one CSV row per direction and sample to FILE.
        #[arg(long, value_name = "FILE")]
        csv: Option<PathBuf>,
        /// Stop after this many samples.
        #[arg(long)]
        count: Option<u64>,
        #[command(flatten)]
        lab: LabArg,
    },
    /// Capture the frames of a node's interface(s) as pcapng (until Ctrl-C or -c).
    Capture {
        /// NODE (every interface) or NODE:IFACE.
        iface: String,
        /// Output file; '-' for standard output (e.g. '| wireshark -k -i -').
        #[arg(short = 'w', default_value = "-")]
        write: String,
        /// Arriving frames as delivered (after the impairments) or as they entered the
        /// link (before; frames the link drops are included).
        #[arg(long, value_enum, default_value = "after")]
        point: PointArg,
        /// Stop after this many frames.
        #[arg(short = 'c')]
        count: Option<u64>,
        /// A pcap filter expression (tcpdump syntax), e.g. icmp or 'tcp port 5201'.
        #[arg(trailing_var_arg = true)]
        filter: Vec<String>,
        #[command(flatten)]
        lab: LabArg,
    },
    /// Stop a node (end every process in it), start its `run` commands again, or move
    /// it on its wireless segments.
    Node {
        #[command(subcommand)]
        cmd: NodeCmd,
    },
    /// Experiment traffic between nodes, logged per packet for `vemu report`.
    Traffic {
        #[command(subcommand)]
        cmd: TrafficCmd,
    },
    /// Packet delivery ratio, delay and routing overhead of the lab's traffic flows
    /// (while it runs, or after `down` with --lab NAME).
    Report {
        /// One JSON object instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        lab: LabArg,
    },
    /// The CBR source and sink the controller starts inside nodes.
    #[command(hide = true)]
    TrafficAgent {
        #[command(subcommand)]
        cmd: AgentCmd,
    },
    /// Host this machine's share of labs that span machines (a scenario's `machines:`),
    /// on the controller's orders; runs until SIGTERM, then takes its shares down.
    Agent {
        /// The address to listen on: the controller's orders come here, and the
        /// tunnels of links to other machines use it.
        #[arg(long, value_name = "ADDR[:PORT]", value_parser = vemu_scenario::Machine::parse_address)]
        listen: std::net::SocketAddr,
        /// A file holding the bearer token the controller must present (the
        /// controller reads it from VEMU_AGENT_TOKEN_FILE, default /etc/vemu/agent-token).
        #[arg(long, value_name = "FILE", default_value = vemu_control::cluster::DEFAULT_TOKEN_FILE)]
        token_file: PathBuf,
    },
    /// Take over a lab across machines whose controller died: its agents still hold the
    /// nodes and links (until their leases end); a new controller serves the lab again
    /// with what was set at run time.
    Attach {
        /// Also serve the API on this TCP address (default: where the dead controller
        /// served it, if it did).
        #[arg(long, value_name = "ADDR:PORT")]
        api: Option<std::net::SocketAddr>,
        /// Take the lab's plan and its dead controller's state from this agent of the
        /// lab (ADDRESS[:PORT]), on a machine other than the dead controller's (or whose
        /// state it lost); `--lab` names the lab.
        #[arg(long, value_name = "AGENT")]
        from: Option<String>,
        #[command(flatten)]
        lab: LabArg,
    },
    /// Remove what crashed labs left in the kernel (namespaces, devices, processes).
    Clean {
        /// Also take down labs that are still running.
        #[arg(long)]
        all: bool,
    },
    /// The controller process of a lab (started by `vemu up`).
    #[command(hide = true)]
    Daemon,
}

#[derive(Subcommand)]
enum NodeCmd {
    /// End every process in the node; its `run` commands are not restarted.
    Stop {
        node: String,
        #[command(flatten)]
        lab: LabArg,
    },
    /// Start the node's `run` commands again.
    Start {
        node: String,
        #[command(flatten)]
        lab: LabArg,
    },
    /// Change the node's CPU, memory and process limits (what is not given stays).
    Set {
        node: String,
        /// Cores' worth of CPU time its processes may use together, e.g. 0.5; `none`
        /// lifts the limit.
        #[arg(long)]
        cpu: Option<String>,
        /// Memory its processes may use together, e.g. 256MiB; `none` lifts the limit.
        #[arg(long)]
        memory: Option<String>,
        /// Most processes (and threads) at once; `none` lifts the limit.
        #[arg(long)]
        pids: Option<String>,
        #[command(flatten)]
        lab: LabArg,
    },
    /// Move the node on the wireless segments it is a member of (it stays there).
    Move {
        node: String,
        /// Where to, in metres: X,Y.
        #[arg(long, value_parser = parse_xy)]
        to: (f64, f64),
        /// Go there in a straight line at this speed (m/s) instead of at once.
        #[arg(long)]
        speed: Option<f64>,
        #[command(flatten)]
        lab: LabArg,
    },
}

#[derive(Subcommand)]
enum TrafficCmd {
    /// A constant-bit-rate UDP flow: a source in one node, a sink in another.
    Cbr {
        #[arg(long)]
        from: String,
        #[arg(long)]
        to: String,
        /// UDP payload, bytes (at least 24).
        #[arg(long, default_value_t = 64)]
        size: usize,
        /// Packets per second: 4, 4/s or 240/min.
        #[arg(long, value_parser = parse_rate_pps)]
        rate: f64,
        /// Lab time of the first packet (e.g. 10s); now if left out or past.
        #[arg(long, value_parser = vemu_scenario::units::duration_ns)]
        start: Option<u64>,
        /// How long to send (e.g. 60s); until the lab goes down if left out.
        #[arg(long, value_parser = vemu_scenario::units::duration_ns)]
        duration: Option<u64>,
        /// How many packets to send.
        #[arg(long)]
        count: Option<u64>,
        /// The address to send to (default: the receiver's first IPv4 loopback or interface address).
        #[arg(long)]
        to_addr: Option<std::net::IpAddr>,
        #[command(flatten)]
        lab: LabArg,
    },
}

#[derive(Subcommand)]
enum AgentCmd {
    Send {
        #[arg(long)]
        flow: u32,
        #[arg(long)]
        to: std::net::SocketAddr,
        #[arg(long)]
        size: usize,
        #[arg(long)]
        interval_ns: u64,
        #[arg(long)]
        start_ns: u64,
        #[arg(long)]
        epoch_ns: u64,
        #[arg(long)]
        count: Option<u64>,
    },
    Recv {
        #[arg(long)]
        flow: u32,
        #[arg(long)]
        port: u16,
        #[arg(long)]
        until_ns: u64,
        #[arg(long)]
        epoch_ns: u64,
    },
}

/// Warnings and notes of one kind `vemu status` prints at most, then how many more.
const STATUS_LINES_MAX: usize = 8;

/// `4`, `4/s` or `240/min` packets per second.
fn parse_rate_pps(s: &str) -> Result<f64, String> {
    let bad = || format!("expected packets per second like 4, 4/s or 240/min, got '{s}'");
    let (n, per) = match s.split_once('/') {
        Some((n, "s")) => (n, 1.0),
        Some((n, "min")) => (n, 60.0),
        Some(_) => return Err(bad()),
        None => (s, 1.0),
    };
    match n.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v / per),
        _ => Err(bad()),
    }
}

/// `X,Y` in metres.
fn parse_xy(s: &str) -> Result<(f64, f64), String> {
    let bad = || format!("expected X,Y in metres (e.g. 500,1000), got '{s}'");
    let (x, y) = s.split_once(',').ok_or_else(bad)?;
    let (x, y) = (x.trim().parse::<f64>().map_err(|_| bad())?, y.trim().parse::<f64>().map_err(|_| bad())?);
    if !(x.is_finite() && y.is_finite()) {
        return Err(bad());
    }
    Ok((x, y))
}

#[derive(Clone, Copy, ValueEnum)]
enum PointArg {
    After,
    Before,
}

#[derive(Clone, Copy, ValueEnum)]
enum DirArg {
    Both,
    /// From the first-named node to the second.
    Forward,
    /// From the second-named node to the first.
    Reverse,
}

#[derive(Subcommand)]
enum LinkCmd {
    /// Change impairments; values not given keep their current settings.
    Set {
        /// NODE:NODE or the link's name; for LAN segments SEGMENT:NODE (forward = toward
        /// the node), NODE:SEGMENT, or SEGMENT (every member).
        link: String,
        #[arg(long, value_enum, default_value = "both")]
        direction: DirArg,
        /// e.g. 100Mbit, or 'unlimited'
        #[arg(long)]
        bandwidth: Option<String>,
        /// e.g. 20ms
        #[arg(long)]
        delay: Option<String>,
        /// e.g. 2ms, or '{amount: 2ms, distribution: normal, correlation: 25%}'
        #[arg(long)]
        jitter: Option<String>,
        /// e.g. 2%, or '{model: gilbert-elliott, p: 1%, r: 20%, h: 0%, k: 100%}'
        #[arg(long)]
        loss: Option<String>,
        /// e.g. 1%
        #[arg(long)]
        duplicate: Option<String>,
        /// e.g. 0.1%
        #[arg(long)]
        corrupt: Option<String>,
        /// e.g. 5%, or '{probability: 25%, gap: 5}'
        #[arg(long)]
        reorder: Option<String>,
        /// packets (e.g. 100) or bytes (e.g. 256KiB)
        #[arg(long)]
        queue: Option<String>,
        /// 'diffserv', 'none' (one FIFO), or classes as in a scenario file, e.g.
        /// '[{name: ef, match: {dscp: EF}, priority: 0}, {name: be}]'
        #[arg(long)]
        qos: Option<String>,
        /// what carries out the bandwidth when it is the only impairment: 'engine'
        /// (exact serialization, the default) or 'kernel' (the kernel's token bucket)
        #[arg(long)]
        shaper: Option<String>,
        #[command(flatten)]
        lab: LabArg,
    },
    /// Take a link down: frames offered to it are dropped.
    Down {
        link: String,
        #[command(flatten)]
        lab: LabArg,
    },
    /// Bring a link back up.
    Up {
        link: String,
        #[command(flatten)]
        lab: LabArg,
    },
}

/// A mistake of the user's: reported plainly, exit status 2.
#[derive(Debug)]
struct UserError(String);
impl std::fmt::Display for UserError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for UserError {}

fn user(msg: impl Into<String>) -> anyhow::Error {
    UserError(msg.into()).into()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Commands that print end quietly when their reader goes away (`vemu status | head`);
    // the servers — the controller (`up`, `daemon`, `attach`'s daemon) and the agent —
    // keep ignoring SIGPIPE, as their clients come and go: a write to a connection the
    // other end closed (rustls writes with writev, which has no MSG_NOSIGNAL) must be an
    // error, not the end of the process. An agent killed so took its machine's share of
    // a lab with it (seen in CI: a heartbeat the controller gave up on).
    if !matches!(cli.cmd, Cmd::Up { .. } | Cmd::Daemon | Cmd::TrafficAgent { .. } | Cmd::Agent { .. }) {
        // SAFETY: restoring the default disposition of one signal.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            if let Some(u) = e.downcast_ref::<UserError>() {
                eprintln!("vemu: {u}");
                ExitCode::from(2)
            } else if let Some(f) = e.downcast_ref::<ApiFailure>().filter(|f| f.status < 500) {
                // The lab refused the request: the input was wrong.
                eprintln!("vemu: {f}");
                ExitCode::from(2)
            } else if let Some(s) = e.downcast_ref::<vemu_scenario::Errors>() {
                eprintln!("{s}");
                ExitCode::from(2)
            } else {
                eprintln!("vemu: {e:#}");
                ExitCode::from(1)
            }
        }
    }
}

fn need_root() -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("vemu creates namespaces and devices and must run as root");
    }
    Ok(())
}

/// The lab a command acts on: the one named, or the only one running.
fn resolve_lab(explicit: Option<String>) -> Result<String> {
    if let Some(l) = explicit {
        vemu_scenario::valid_lab_name(&l).map_err(user)?;
        return Ok(l);
    }
    let (mut running, _) = vemu_control::list_labs();
    // A machine of labs across machines: the labs of the shares its agent holds.
    for (name, held) in vemu_control::list_shares() {
        if let (Some((lab, _)), true) = (vemu_host::share_of(&name), held) {
            running.push(lab.to_string());
        }
    }
    running.sort();
    running.dedup();
    match running.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(user("no lab is running")),
        many => Err(user(format!("{} labs are running ({}); say which with --lab", many.len(), many.join(", ")))),
    }
}

/// Connect to a running lab; a lab that is not running is the user's mistake.
fn connect(lab: &str) -> Result<Client> {
    Client::connect(lab).map_err(|e| user(e.to_string()))
}

/// Where the nodes of a lab across machines go: nodes per machine, and the links
/// between machines (the cut) with the rate they may carry.
fn print_placement(plan: &Plan) {
    if plan.machines.is_empty() {
        return;
    }
    for (i, m) in plan.machines.iter().enumerate() {
        let here: Vec<&vemu_scenario::NodePlan> = plan.nodes.iter().filter(|n| n.machine == i).collect();
        let nodes: Vec<&str> = here.iter().map(|n| n.name.as_str()).collect();
        // A node's expected load: its CPU limit, else one core (what placement weighs).
        let cores: f64 = here.iter().map(|n| n.limits.cpu_cores.unwrap_or(1.0)).sum();
        let shown = if nodes.len() > 8 { format!("{} ...", nodes[..8].join(" ")) } else { nodes.join(" ") };
        println!("machine {} ({}): {} nodes, expected load {cores:.1} cores: {shown}", m.name, m.address, nodes.len());
    }
    let cut: Vec<&vemu_scenario::LinkPlan> = plan.links.iter().filter(|l| plan.nodes[l.a.node].machine != plan.nodes[l.b.node].machine).collect();
    let unlimited = cut.iter().filter(|l| l.forward.rate_bps.is_none() || l.reverse.rate_bps.is_none()).count();
    // (+ 0.0: an empty sum of floats is -0.)
    let rate_mbit: f64 = cut.iter().map(|l| l.forward.rate_bps.unwrap_or(0).max(l.reverse.rate_bps.unwrap_or(0)) as f64 / 1e6).sum::<f64>() + 0.0;
    let more = if unlimited > 0 { format!(" (+{unlimited} without a rate)") } else { String::new() };
    println!("cut: {} links, {rate_mbit:.0} Mbit/s{more}", cut.len());
    // Segments whose members are on several machines: each such member reaches the
    // segment's machine through a tunnel of its own.
    for (g, seg) in plan.segments.iter().enumerate().filter(|&(g, _)| plan.spans(g)) {
        let at = plan.segment_machine(g);
        let away = seg.members.iter().filter(|m| plan.nodes[m.end.node].machine != at).count();
        println!("segment {} spans machines: its {} on machine {}, {away} of {} members elsewhere", seg.name, if seg.wireless.is_some() { "radio channel" } else { "switch" }, plan.machines[at].name, seg.members.len());
    }
}

fn load_plan(lab: &str) -> Result<Plan> {
    let path = LabPaths::new(lab).plan();
    let text = std::fs::read(&path).map_err(|_| user(format!("lab '{lab}' is not running (see 'vemu ls')")))?;
    serde_json::from_slice(&text).context("reading the lab's plan")
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.cmd {
        Cmd::Check { file, machines, tenant } => {
            let plan = load_scenario(&file, None, machines.as_deref(), tenant.as_deref())?;
            println!(
                "{}: lab '{}' with {} nodes and {} links is valid",
                file.display(),
                plan.name,
                plan.nodes.len(),
                plan.links.len()
            );
            print_placement(&plan);
        }
        Cmd::Import { file, name } => {
            let i = vemu_scenario::import::graphml_file(&file, name.as_deref()).map_err(user)?;
            print!("{}", i.yaml);
            for w in &i.warnings {
                eprintln!("vemu import: {w}");
            }
            eprintln!("vemu import: {} nodes, {} links", i.nodes, i.links);
        }
        Cmd::Up { file, name, foreground, api, ui, machines, wait_converged, tenant } => {
            let plan = load_scenario(&file, name.as_deref(), machines.as_deref(), tenant.as_deref())?;
            need_root()?;
            // The controller checks too, but only after the plan has reached it (a second
            // for 10,000 nodes): a lab too big for the limits fails here at once. The
            // controller inherits the raised soft limit.
            if plan.machines.is_empty() {
                vemu_host::ensure_open_files(vemu_host::files_needed(&plan, vemu_control::fast_path_wanted())).with_context(|| format!("lab '{}' cannot come up", plan.name))?;
            }
            if wait_converged.is_some() && (foreground || !plan.machines.is_empty()) {
                return Err(user("--wait-converged: not with --foreground, nor yet for labs across machines"));
            }
            let options = ApiOptions { tcp: api };
            if foreground {
                up_foreground(plan, options, ui)?;
            } else {
                let name = plan.name.clone();
                up_background(plan, options)?;
                if let Some(secs) = wait_converged {
                    wait_converged_for(&name, secs)?;
                }
                if ui {
                    print_ui(&name)?;
                }
            }
        }
        Cmd::Ui { lab } => {
            need_root()?;
            print_ui(&resolve_lab(lab.lab)?)?;
        }
        Cmd::Daemon => run_daemon()?,
        Cmd::Agent { listen, token_file } => {
            need_root()?;
            let token = vemu_control::cluster::read_token(&token_file).map_err(|e| user(format!("the agent's token: {e:#}")))?;
            lock_memory();
            vemu_control::agent::run(listen, token)?;
        }
        Cmd::Attach { api, from, lab } => {
            need_root()?;
            if let Some(from) = from {
                let lab = lab.lab.ok_or_else(|| user("--from needs --lab: the lab to take over"))?;
                vemu_scenario::valid_lab_name(&lab).map_err(user)?;
                let dir = LabPaths::new(&lab).dir;
                let made = !dir.exists();
                let r = fetch_lab(&lab, &from).and_then(|()| load_plan(&lab)).and_then(|plan| start_controller(plan, ApiOptions { tcp: api }, true));
                // Nothing of a failed take-over stays here.
                if r.is_err() && made {
                    let _ = std::fs::remove_dir_all(&dir);
                }
                return r.map(|()| ExitCode::SUCCESS);
            }
            let lab = match lab.lab {
                Some(l) => {
                    vemu_scenario::valid_lab_name(&l).map_err(user)?;
                    l
                }
                None => match vemu_control::list_labs().1.as_slice() {
                    [one] => one.clone(),
                    [] => return Err(user("no lab has lost its controller ('vemu ls' lists the labs)")),
                    many => return Err(user(format!("{} labs have no controller ({}); say which with --lab", many.len(), many.join(", ")))),
                },
            };
            let plan = load_plan(&lab).map_err(|_| user(format!("lab '{lab}' has no plan on this machine (it was started elsewhere, or cleaned)")))?;
            if plan.machines.is_empty() {
                return Err(user(format!("lab '{lab}' runs on this machine alone: its controller was also its data plane, so there is nothing left to take over ('vemu clean' removes it)")));
            }
            start_controller(plan, ApiOptions { tcp: api }, true)?;
        }
        Cmd::Down { name, lab } => {
            let lab = resolve_lab(name.or(lab.lab))?;
            connect(&lab)?.post("/v1/down", &json!({}))?;
            eprintln!("lab '{lab}' is down");
        }
        Cmd::Ls => {
            let (running, stale) = vemu_control::list_labs();
            if running.is_empty() && stale.is_empty() {
                eprintln!("no labs");
            }
            for l in running {
                let n = load_plan(&l).map(|p| format!("{} nodes, {} links", p.nodes.len(), p.links.len())).unwrap_or_default();
                println!("{l}\trunning\t{n}");
            }
            for l in stale {
                match load_plan(&l) {
                    Ok(p) if !p.machines.is_empty() => println!("{l}\tleft behind by a crash of its controller ('vemu attach' takes it over while its agents hold it; 'vemu clean' removes it)"),
                    _ => println!("{l}\tleft behind by a crash (run 'vemu clean')"),
                }
            }
            for (name, held) in vemu_control::list_shares() {
                let Some((l, m)) = vemu_host::share_of(&name) else { continue };
                match held {
                    true => println!("{l}\tmachine {m}'s share, held by this machine's agent for the lab's controller"),
                    false => println!("{l}\tmachine {m}'s share, left behind by an agent that died (its next start or 'vemu clean' removes it)"),
                }
            }
        }
        Cmd::Status { name, lab, json } => {
            let lab = resolve_lab(name.or(lab.lab))?;
            let status = connect(&lab)?.status()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            } else {
                print_status(&status);
            }
        }
        Cmd::Exec { node, command, lab } => return exec(lab.lab, &node, &command),
        Cmd::Shell { node, lab } => {
            if let (lab, NodeAt::Remote) = node_lab(lab.lab.clone(), &node)? {
                return shell_through_api(&lab, &node);
            }
            let shell = std::env::var("SHELL").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "/bin/bash".into());
            let mut argv = vec![shell.clone()];
            if shell.ends_with("bash") {
                argv.extend(["--norc".into(), "-i".into()]);
            }
            std::env::set_var("PS1", format!("[{node}] \\w# "));
            return exec(lab.lab, &node, &argv);
        }
        Cmd::Link { cmd } => link(cmd)?,
        Cmd::Stats { interval, json, csv, count, lab } => {
            let lab = resolve_lab(lab.lab)?;
            vemu_scenario::units::duration_ns(&interval).map_err(|m| user(format!("--interval: {m}")))?;
            let client = connect(&lab)?;
            let mut sink = stats::Sink::new(json, csv.as_deref(), count)?;
            let ctrl_c = async {
                let _ = tokio::signal::ctrl_c().await;
            };
            match client.stream_to(&format!("/v1/events?stats={}", percent_encode(&interval)), &mut sink, ctrl_c) {
                Err(e) if stats::is_done(&e) => {}
                r => r?,
            }
        }
        Cmd::Capture { iface, write, point, count, filter, lab } => {
            let lab = resolve_lab(lab.lab)?;
            let mut q = format!("iface={}&point={}", percent_encode(&iface), match point { PointArg::After => "after", PointArg::Before => "before" });
            if !filter.is_empty() {
                q += &format!("&filter={}", percent_encode(&filter.join(" ")));
            }
            if let Some(c) = count {
                q += &format!("&count={c}");
            }
            let client = connect(&lab)?;
            let mut out: Box<dyn Write> = if write == "-" {
                Box::new(std::io::stdout())
            } else {
                Box::new(std::fs::File::create(&write).with_context(|| format!("creating {write}"))?)
            };
            let ctrl_c = async {
                let _ = tokio::signal::ctrl_c().await;
            };
            // A full disk (or a closed reader) ends this capture only: the controller
            // drops its copies once we are gone, and the lab runs on.
            client.stream_to(&format!("/v1/capture?{q}"), &mut out, ctrl_c).with_context(|| format!("the capture to {write} stopped (the lab runs on)"))?;
        }
        Cmd::Node { cmd: NodeCmd::Set { node, cpu, memory, pids, lab } } => {
            let mut body = serde_json::Map::new();
            let value = |v: &str, number: fn(&str) -> Option<serde_json::Value>, what: &str| -> Result<serde_json::Value> {
                match v {
                    "none" => Ok(serde_json::Value::Null),
                    _ => number(v).ok_or_else(|| anyhow::anyhow!("{what}: expected a value or 'none', got '{v}'")),
                }
            };
            if let Some(c) = cpu {
                body.insert("cpu".into(), value(&c, |v| v.parse::<f64>().ok().map(|f| json!(f)), "--cpu")?);
            }
            if let Some(m) = memory {
                body.insert("memory".into(), value(&m, |v| Some(json!(v)), "--memory")?);
            }
            if let Some(p) = pids {
                body.insert("pids".into(), value(&p, |v| v.parse::<u64>().ok().map(|n| json!(n)), "--pids")?);
            }
            if body.is_empty() {
                bail!("nothing to change: give --cpu, --memory or --pids");
            }
            let lab = resolve_lab(lab.lab)?;
            let v = connect(&lab)?.patch(&format!("/v1/nodes/{}", percent_encode(&node)), &serde_json::Value::Object(body))?;
            println!("node {node}: {}", describe_limits(&serde_json::from_value(v["limits"].clone()).unwrap_or_default()));
        }
        Cmd::Node { cmd } => {
            let (node, lab, verb, body) = match cmd {
                NodeCmd::Set { .. } => unreachable!("handled above"),
                NodeCmd::Stop { node, lab } => (node, lab, "stop", json!({})),
                NodeCmd::Start { node, lab } => (node, lab, "start", json!({})),
                NodeCmd::Move { node, to, speed, lab } => (node, lab, "move", json!({"x": to.0, "y": to.1, "speed": speed})),
            };
            let lab = resolve_lab(lab.lab)?;
            connect(&lab)?.post(&format!("/v1/nodes/{}/{verb}", percent_encode(&node)), &body)?;
        }
        Cmd::Traffic { cmd: TrafficCmd::Cbr { from, to, size, rate, start, duration, count, to_addr, lab } } => {
            let lab = resolve_lab(lab.lab)?;
            let body = json!({"from": from, "to": to, "size_bytes": size, "rate_pps": rate, "start_ns": start, "duration_ns": duration, "count": count, "to_addr": to_addr});
            let v = connect(&lab)?.post("/v1/traffic", &body)?;
            println!(
                "flow {}: {} -> {} ({}:{}), {} bytes at {} packets/s from lab time {:.1} s; records in {}",
                v["id"], v["from"].as_str().unwrap_or(""), v["to"].as_str().unwrap_or(""), v["addr"].as_str().unwrap_or(""), v["port"], v["size_bytes"], v["rate_pps"],
                v["start_ns"].as_f64().unwrap_or(0.0) / 1e9, LabPaths::new(&lab).log_dir().join("traffic").display()
            );
        }
        Cmd::Report { json: as_json, lab } => {
            let lab = resolve_lab(lab.lab)?;
            let paths = LabPaths::new(&lab);
            let stats = match Client::connect(&lab) {
                Ok(c) => {
                    // Records kept on other machines (a lab across machines) come here first.
                    c.post("/v1/traffic/collect", &json!({}))?;
                    Some(c.get("/v1/stats")?)
                }
                Err(_) => std::fs::read(paths.log_dir().join("stats-final.json")).ok().and_then(|b| serde_json::from_slice(&b).ok()),
            };
            if stats.is_none() && !paths.log_dir().exists() {
                return Err(user(format!("no lab '{lab}' has run here (no {})", paths.log_dir().display())));
            }
            let r = vemu_control::report::report(&paths.log_dir(), stats.as_ref())?;
            if as_json {
                println!("{r}");
            } else {
                traffic::print_report(&lab, &r);
            }
        }
        Cmd::TrafficAgent { cmd } => match cmd {
            AgentCmd::Send { flow, to, size, interval_ns, start_ns, epoch_ns, count } => traffic::send(flow, to, size, interval_ns, start_ns, count, LabClock { epoch_ns })?,
            AgentCmd::Recv { flow, port, until_ns, epoch_ns } => traffic::recv(flow, port, until_ns, LabClock { epoch_ns })?,
        },
        Cmd::Clean { all } => clean(all)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Tell the user where the TCP API is and its token, once.
fn print_api(lab: &str) {
    let paths = LabPaths::new(lab);
    if let (Ok(addr), Ok(token)) = (std::fs::read_to_string(paths.api_address()), std::fs::read_to_string(paths.api_token())) {
        println!("API on http://{}/v1/ — send 'Authorization: Bearer {}'", addr.trim(), token.trim());
    }
}

/// A cluster file's text (at most 1 MiB).
fn read_cluster_file(path: &str) -> Result<String> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(|e| user(format!("--machines: cannot read the cluster file {path}: {e}")))?;
    let mut text = String::new();
    f.take(1 << 20).read_to_string(&mut text).map_err(|e| user(format!("--machines: cannot read the cluster file {path}: {e}")))?;
    Ok(text)
}

/// A scenario file's plan, on the machines given with `--machines` if any, a tenant's
/// if `--tenant` says what it is allowed.
fn load_scenario(file: &std::path::Path, name: Option<&str>, machines: Option<&str>, tenant: Option<&str>) -> Result<Plan> {
    let trust = match tenant {
        None => vemu_scenario::Trust::Owner,
        Some(list) => vemu_scenario::Trust::tenant(list).map_err(|m| user(format!("--tenant: {m}")))?,
    };
    let machines = match machines {
        None => None,
        Some(list) => Some(match list.strip_prefix('@') {
            Some(path) => {
                let text = read_cluster_file(path)?;
                vemu_scenario::Machine::parse_cluster(&text, path).map_err(|m| user(format!("--machines: {m}")))?
            }
            None => vemu_scenario::Machine::parse_list(list).map_err(|m| user(format!("--machines: {m}")))?,
        }),
    };
    Ok(vemu_scenario::load_as(file, name, machines, &trust)?)
}

/// Ask the lab's controller for a login link of its web interface and print it.
fn print_ui(lab: &str) -> Result<()> {
    let v = connect(lab)?.post("/v1/ui", &json!({}))?;
    let url = v["url"].as_str().unwrap_or("");
    println!("web interface: {url}");
    eprintln!("(the link works once, for {} s; 'vemu ui --lab {lab}' makes another)", v["expires_s"].as_u64().unwrap_or(0));
    Ok(())
}

fn up_foreground(plan: Plan, options: ApiOptions, ui: bool) -> Result<()> {
    let name = plan.name.clone();
    let (nodes, links) = (plan.nodes.len(), plan.links.len());
    let bar = progress_bar(nodes);
    let lock = lock_name(&name)?;
    daemon::run(plan, options, lock, |ev| match ev {
        Event::Progress(d, _) => bar.set_position(d as u64),
        Event::Ready(settled) => {
            bar.finish_and_clear();
            if let Some(why) = &settled.fast_path_off {
                eprintln!("kernel fast path off ({why}): every link direction goes through the engine");
            }
            for w in &settled.warnings {
                eprintln!("warning: {w}");
            }
            eprintln!("lab '{name}' is up: {nodes} nodes, {links} links{}. Ctrl-C takes it down.", settle_note(settled.waited_ms, settled.behind_ms));
            print_api(&name);
            if ui {
                if let Err(e) = print_ui(&name) {
                    eprintln!("vemu: the web interface: {e:#}");
                }
            }
        }
    })?;
    eprintln!("lab '{name}' is down");
    Ok(())
}

fn progress_bar(total: usize) -> indicatif::ProgressBar {
    if total < 20 || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total as u64);
    if let Ok(style) = indicatif::ProgressStyle::with_template("creating nodes {bar:40} {pos}/{len} {elapsed}") {
        bar.set_style(style);
    }
    bar
}

/// Start the lab's controller as a background process and follow it until ready.
/// The lab's name for this process, or a clear refusal (exit 2) when another `vemu up`
/// or a running lab holds it (a `vemu ls` or `clean` looking at it holds it for an
/// instant only: wait that out).
fn lock_name(lab: &str) -> Result<vemu_host::LabLock> {
    vemu_host::LabLock::acquire_within(lab, std::time::Duration::from_millis(200))?.ok_or_else(|| {
        user(format!("lab '{lab}' is already running or being started (take it down with 'vemu down --lab {lab}', or use --name)"))
    })
}

/// `vemu up --wait-converged`: ask the lab every 250 ms whether every node has a route
/// to every prefix (twice in a row), for up to `secs`; name the nodes lacking routes if
/// not.
fn wait_converged_for(lab: &str, secs: u64) -> Result<()> {
    let client = connect(lab)?;
    let t0 = std::time::Instant::now();
    let mut in_a_row = 0;
    loop {
        let c = client.get("/v1/convergence")?;
        in_a_row = if c["converged"] == true { in_a_row + 1 } else { 0 };
        if in_a_row == 2 {
            eprintln!("lab '{lab}': routes converged {:.1} s after up (every node has a route to every prefix of the lab)", t0.elapsed().as_secs_f64());
            return Ok(());
        }
        if t0.elapsed().as_secs() >= secs {
            let lacking: Vec<String> = c["lacking"].as_array().into_iter().flatten().map(|l| format!("{} lacks {}", l["node"].as_str().unwrap_or("?"), l["prefixes"].as_array().into_iter().flatten().filter_map(|p| p.as_str()).collect::<Vec<_>>().join(", "))).collect();
            bail!("lab '{lab}' is up, but its routes did not converge within {secs} s: {} nodes lack routes ({}); the lab keeps running", c["nodes_lacking"], lacking.join("; "));
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

fn up_background(plan: Plan, options: ApiOptions) -> Result<()> {
    start_controller(plan, options, false)
}

/// Start a lab's controller in the background and follow it until it serves the lab:
/// one that builds `plan`, or with `attach` one that takes the running lab over (it
/// reads the plan the dead controller left).
fn start_controller(plan: Plan, options: ApiOptions, attach: bool) -> Result<()> {
    let paths = LabPaths::new(&plan.name);
    let lock = lock_name(&plan.name)?;
    // Before the log is opened (and emptied): it may be a running controller's.
    if std::os::unix::net::UnixStream::connect(paths.socket()).is_ok() {
        bail!("lab '{}' is already running (take it down with 'vemu down --lab {}')", plan.name, plan.name);
    }
    std::fs::create_dir_all(paths.log_dir()).with_context(|| format!("creating {}", paths.log_dir().display()))?;
    let log_path = paths.log_dir().join("vemu.log");
    // A controller taking over goes on with the dead one's log.
    let log = std::fs::OpenOptions::new().create(true).write(true).append(attach).truncate(!attach).open(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
    let exe = std::env::current_exe().context("finding the vemu executable")?;
    let mut cmd = Command::new(exe);
    cmd.arg("daemon").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(log);
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let lock_fd = lock.inheritable_fd()?;
    let mut child = cmd.spawn().context("starting the lab controller")?;
    // The controller has its own descriptor of the lock now.
    drop(lock);
    let mut stdin = child.stdin.take().unwrap();
    let order = match attach {
        true => json!({"attach": plan.name, "api_tcp": options.tcp, "lock_fd": lock_fd}),
        false => json!({"plan": plan, "api_tcp": options.tcp, "lock_fd": lock_fd}),
    };
    stdin.write_all(&serde_json::to_vec(&order)?)?;
    drop(stdin);
    let bar = progress_bar(plan.nodes.len());
    let mut ready = false;
    let mut settled = (0, 0);
    let mut error = None;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let Ok(line) = line else { break };
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        if let Some(d) = v.get("progress").and_then(|p| p.get(0)).and_then(|d| d.as_u64()) {
            bar.set_position(d);
        } else if v.get("ready").is_some() {
            ready = true;
            settled = (v["settle_ms"].as_u64().unwrap_or(0), v["behind_ms"].as_u64().unwrap_or(0));
            if let Some(why) = v["fast_path_off"].as_str() {
                eprintln!("kernel fast path off ({why}): every link direction goes through the engine");
            }
            for w in v["warnings"].as_array().into_iter().flatten().filter_map(|w| w.as_str()) {
                eprintln!("warning: {w}");
            }
        } else if let Some(e) = v.get("error").and_then(|e| e.as_str()) {
            error = Some(e.to_string());
        }
    }
    bar.finish_and_clear();
    if !ready {
        let _ = child.wait();
        let msg = error.unwrap_or_else(|| format!("the lab controller stopped; see {}", log_path.display()));
        if attach {
            bail!("lab '{}' could not be taken over: {msg}", plan.name);
        }
        bail!("lab '{}' did not come up: {msg}", plan.name);
    }
    if attach {
        println!("lab '{}' is served again: {} nodes, {} links on {} machines (logs in {}). 'vemu status' shows what it has.", plan.name, plan.nodes.len(), plan.links.len(), plan.machines.len(), paths.log_dir().display());
        print_api(&plan.name);
        return Ok(());
    }
    println!(
        "lab '{}' is up: {} nodes, {} links, {} segments{} (logs in {}). Try 'vemu status', 'vemu exec NODE -- CMD', 'vemu down'.",
        plan.name,
        plan.nodes.len(),
        plan.links.len(),
        plan.segments.len(),
        settle_note(settled.0, settled.1),
        paths.log_dir().display()
    );
    print_api(&plan.name);
    Ok(())
}

/// What `up` says of the data plane's catching up with the nodes' start-up chatter:
/// nothing when it took no time worth telling.
fn settle_note(waited_ms: u64, behind_ms: u64) -> String {
    if behind_ms > 0 {
        format!("; the data plane is still {:.1} s behind after waiting {:.1} s (the nodes' start-up traffic: see docs/scenario.md)", behind_ms as f64 / 1e3, waited_ms as f64 / 1e3)
    } else if waited_ms >= 200 {
        format!("; data plane caught up with the nodes' start-up traffic in {:.1} s", waited_ms as f64 / 1e3)
    } else {
        String::new()
    }
}

/// `vemu daemon`: read the plan on stdin, report on stdout (JSON lines) until ready.
/// Keep the controller's memory (the engine's code and data among it) in RAM. Machines
/// that reclaim cold pages on their own (DAMON's pageout, as on the machine vemu is
/// developed on) drop rarely run code of the binary, and the engine then stalls for
/// milliseconds reading it back (2-3 ms stalls made 1-2% of the frames of a light load
/// late). What the binary maps now is read in and locked; later mappings (thread stacks,
/// the heap's growth) are locked as they are touched. Children do not inherit it.
fn lock_memory() {
    vemu_host::avoid_oom_killer();
    // SAFETY: mlockall with flag arguments only.
    unsafe {
        if libc::mlockall(libc::MCL_CURRENT) != 0 || libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE | libc::MCL_ONFAULT) != 0 {
            eprintln!("vemu: cannot lock the controller's memory ({}); the engine may stall when pages are reclaimed", std::io::Error::last_os_error());
        }
    }
}

fn run_daemon() -> Result<()> {
    lock_memory();
    let mut text = Vec::new();
    std::io::Read::read_to_end(&mut std::io::stdin(), &mut text)?;
    let mut input: serde_json::Value = serde_json::from_slice(&text).context("reading the plan")?;
    let attach = input["attach"].as_str().map(str::to_string);
    let plan: Option<Plan> = match attach {
        Some(_) => None,
        None => Some(serde_json::from_value(input["plan"].take()).context("reading the plan")?),
    };
    let name = attach.clone().or(plan.as_ref().map(|p| p.name.clone())).unwrap_or_default();
    let tcp = serde_json::from_value(input["api_tcp"].take()).context("reading the API address")?;
    let lock = match input["lock_fd"].as_i64() {
        // SAFETY: `vemu up` handed us this descriptor of the lab's lock file.
        Some(fd) => unsafe { vemu_host::LabLock::from_fd(fd as i32, &name) },
        None => vemu_host::LabLock::try_acquire(&name)?.ok_or_else(|| anyhow::anyhow!("lab '{name}' is already running or being started"))?,
    };
    let emit = |v: serde_json::Value| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{v}");
        let _ = out.flush();
    };
    let report = |ev| match ev {
        Event::Progress(d, t) => emit(json!({"progress": [d, t]})),
        Event::Ready(settled) => {
            emit(json!({"ready": true, "settle_ms": settled.waited_ms, "behind_ms": settled.behind_ms, "fast_path_off": settled.fast_path_off, "warnings": settled.warnings}));
            // Let `vemu up` see the end of our output and return.
            if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
                // SAFETY: dup2 onto stdout.
                unsafe { libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&null), 1) };
            }
        }
    };
    let result = match plan {
        Some(plan) => daemon::run(plan, ApiOptions { tcp }, lock, report),
        None => daemon::attach(&name, ApiOptions { tcp }, lock, report),
    };
    if let Err(e) = &result {
        emit(json!({"error": format!("{e:#}")}));
        eprintln!("vemu daemon: {e:#}");
    }
    result
}

fn exec(lab: Option<String>, node: &str, argv: &[String]) -> Result<ExitCode> {
    let (lab, paths) = match node_lab(lab, node)? {
        (lab, NodeAt::Here(paths)) => (lab, paths),
        // A node of a lab across machines that is not on this one: through the controller.
        (lab, NodeAt::Remote) => return exec_through_api(&lab, node, argv),
    };
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).env("VEMU_LAB", &lab).env("VEMU_NODE", node);
    let status = match NodeEntry::open(&paths, node)?.spawn(&mut cmd, Command::spawn).and_then(|mut c| c.wait()) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("vemu: cannot run '{}' in node '{node}': command not found", argv[0]);
            return Ok(ExitCode::from(127));
        }
        Err(e) => return Err(e).with_context(|| format!("running '{}' in node '{node}'", argv[0])),
    };
    let code = vemu_control::exit_code(status);
    Ok(ExitCode::from(code as u8))
}

/// Where a node is, seen from this machine.
enum NodeAt {
    /// In a namespace here: of the lab's own, or of this machine's share of a lab
    /// across machines.
    Here(LabPaths),
    /// On another machine of a lab across machines: commands go through the controller.
    Remote,
}

/// This machine's share of lab `lab` (of a lab across machines), if it holds one.
fn share_here(lab: &str) -> Option<LabPaths> {
    vemu_control::list_shares().into_iter().find(|(n, _)| vemu_host::share_of(n).is_some_and(|(l, _)| l == lab)).map(|(n, _)| LabPaths::new(&n))
}

/// The lab of `node`, and where the node is.
fn node_lab(lab: Option<String>, node: &str) -> Result<(String, NodeAt)> {
    need_root()?;
    let lab = resolve_lab(lab)?;
    let share = share_here(&lab);
    let plan = match (load_plan(&lab), &share) {
        (Ok(p), _) => p,
        (Err(_), Some(s)) => load_plan(&s.lab)?,
        (Err(e), None) => return Err(e),
    };
    let Some(i) = plan.node_index(node) else {
        let names: Vec<&str> = plan.nodes.iter().map(|n| n.name.as_str()).collect();
        return Err(user(format!("no node '{node}' in lab '{lab}' (nodes: {})", names.join(", "))));
    };
    match plan.nodes[i].kind {
        vemu_scenario::NodeKind::Host => return Err(user(format!("node '{node}' is this machine (kind: host): run the command as usual, without vemu"))),
        vemu_scenario::NodeKind::External => return Err(user(format!("node '{node}' is what is on the wire of a NIC (kind: external): vemu cannot run commands there"))),
        vemu_scenario::NodeKind::Namespace => {}
    }
    let paths = LabPaths::new(&lab);
    if plan.machines.is_empty() || paths.netns(node).exists() {
        return Ok((lab, NodeAt::Here(paths)));
    }
    if let Some(s) = share.filter(|s| s.netns(node).exists()) {
        return Ok((lab, NodeAt::Here(s)));
    }
    if !paths.socket().exists() {
        let m = plan.machines.get(plan.nodes[i].machine).map_or("another machine", |m| m.name.as_str());
        return Err(user(format!("node '{node}' runs on machine '{m}' and lab '{lab}' has no controller here: use the controller's machine or '{m}'")));
    }
    Ok((lab, NodeAt::Remote))
}

/// `vemu shell` on a node of another machine: a terminal on that machine, through the
/// controller's WebSocket (this terminal in raw mode meanwhile).
fn shell_through_api(lab: &str, node: &str) -> Result<ExitCode> {
    use std::io::IsTerminal;
    let c = connect(lab)?;
    let (rows, cols) = vemu_control::terminal_size().unwrap_or((24, 80));
    // Raw mode while the session lasts (keys go to the node's terminal as typed).
    let saved = std::io::stdin().is_terminal().then(|| {
        // SAFETY: termios is plain data; tcgetattr fills it, cfmakeraw and tcsetattr use it.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(0, &mut t) != 0 {
                return None;
            }
            let saved = t;
            libc::cfmakeraw(&mut t);
            libc::tcsetattr(0, libc::TCSANOW, &t);
            Some(saved)
        }
    }).flatten();
    let r = c.terminal(&format!("/v1/nodes/{}/shell?rows={rows}&cols={cols}", percent_encode(node)));
    if let Some(t) = saved {
        // SAFETY: restores the settings read above.
        unsafe { libc::tcsetattr(0, libc::TCSANOW, &t) };
    }
    match r? {
        Some(code) => Ok(ExitCode::from(code.clamp(0, 255) as u8)),
        None => {
            eprintln!("vemu: the terminal's connection ended");
            Ok(ExitCode::from(1))
        }
    }
}

/// `vemu exec` on a node of a lab across machines: the controller runs it through the
/// node's agent, and its output comes back as it is written. Standard input, unless it
/// is a terminal, is read to its end first and given to the command. Ctrl-C (or the
/// connection dropping) kills the command.
fn exec_through_api(lab: &str, node: &str, argv: &[String]) -> Result<ExitCode> {
    use std::io::{IsTerminal, Read, Write};
    let mut input = String::new();
    if !std::io::stdin().is_terminal() {
        std::io::stdin().read_to_string(&mut input).context("reading standard input")?;
    }
    let c = connect(lab)?;
    let body = json!({"cmd": argv, "stream": true, "timeout_s": 86_400, "stdin": input});
    let mut line = Vec::new();
    let mut code = None;
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    c.stream("POST", &format!("/v1/nodes/{}/exec", percent_encode(node)), Some(&body), ctrl_c, |d| {
        line.extend_from_slice(d);
        while let Some(end) = line.iter().position(|&b| b == b'\n') {
            let l: Vec<u8> = line.drain(..=end).collect();
            let v: serde_json::Value = serde_json::from_slice(&l).context("the controller's answer is not JSON lines")?;
            if let Some(t) = v["stdout"].as_str() {
                std::io::stdout().write_all(t.as_bytes())?;
                std::io::stdout().flush()?;
            } else if let Some(t) = v["stderr"].as_str() {
                std::io::stderr().write_all(t.as_bytes())?;
            } else if let Some(e) = v["exit"].as_i64() {
                code = Some(e);
            }
        }
        Ok(())
    })?;
    // No exit status: interrupted, or the connection ended early.
    Ok(ExitCode::from(code.map_or(130, |c| c.clamp(0, 255)) as u8))
}

fn link(cmd: LinkCmd) -> Result<()> {
    let (lab, link, verb, body) = match cmd {
        LinkCmd::Set { link, direction, bandwidth, delay, jitter, loss, duplicate, corrupt, reorder, queue, qos, shaper, lab } => {
            let given = [
                ("bandwidth", bandwidth),
                ("delay", delay),
                ("jitter", jitter),
                ("loss", loss),
                ("duplicate", duplicate),
                ("corrupt", corrupt),
                ("reorder", reorder),
                ("queue", queue),
                ("qos", qos),
                ("shaper", shaper),
            ];
            let mut body = serde_json::Map::new();
            for (k, v) in given {
                if let Some(v) = v {
                    body.insert(k.into(), json!(v));
                }
            }
            if body.is_empty() {
                return Err(user("nothing to change: give at least one of --bandwidth, --delay, --jitter, --loss, --duplicate, --corrupt, --reorder, --queue, --qos, --shaper"));
            }
            let direction = match direction {
                DirArg::Both => "both",
                DirArg::Forward => "forward",
                DirArg::Reverse => "reverse",
            };
            body.insert("direction".into(), json!(direction));
            (lab.lab, link, None, serde_json::Value::Object(body))
        }
        LinkCmd::Down { link, lab } => (lab.lab, link, Some("down"), json!({})),
        LinkCmd::Up { link, lab } => (lab.lab, link, Some("up"), json!({})),
    };
    let lab = resolve_lab(lab)?;
    let c = connect(&lab)?;
    let path = format!("/v1/links/{}", percent_encode(&link));
    match verb {
        Some(v) => c.post(&format!("{path}/{v}"), &body)?,
        None => c.patch(&path, &body)?,
    };
    Ok(())
}

fn clean(all: bool) -> Result<()> {
    need_root()?;
    let (running, stale) = vemu_control::list_labs();
    for lab in &running {
        if all {
            match Client::connect(lab).and_then(|c| c.post("/v1/down", &json!({}))) {
                Ok(_) => eprintln!("took lab '{lab}' down"),
                Err(e) => eprintln!("lab '{lab}' did not go down cleanly ({e:#}); removing it"),
            }
        } else {
            eprintln!("lab '{lab}' is running; 'vemu down --lab {lab}' (or 'vemu clean --all') removes it");
        }
    }
    let mut targets = stale;
    if all {
        targets.extend(running);
    }
    let mut failed = false;
    for lab in targets {
        let paths = LabPaths::new(&lab);
        if let Some(pid) = std::fs::read_to_string(paths.pid_file()).ok().and_then(|s| s.trim().parse::<i32>().ok()) {
            // Only a vemu controller: argv is `.../vemu daemon`.
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let argv: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
            let is_vemu = argv.len() >= 2 && argv[0].ends_with(b"vemu") && argv[1] == b"daemon";
            if is_vemu {
                // SAFETY: plain kill(2).
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        // A lab across machines: its agents take their shares down now (they would
        // when their leases end).
        if let Ok(plan) = load_plan(&lab) {
            if !plan.machines.is_empty() {
                for e in vemu_control::cluster::teardown_everywhere(&plan) {
                    eprintln!("vemu: {e}");
                }
            }
        }
        failed |= !remove_left_behind(&lab, &format!("lab '{lab}'"));
    }
    // Shares of labs across machines: those an agent holds are its controller's to take
    // down; those of an agent that died are removed.
    for (name, held) in vemu_control::list_shares() {
        let lab = vemu_host::share_of(&name).map_or(name.as_str(), |(l, _)| l);
        if held {
            eprintln!("this machine's agent holds a share of lab '{lab}' ('{name}'); 'vemu down --lab {lab}' on the lab's controller removes it");
            continue;
        }
        failed |= !remove_left_behind(&name, &format!("share '{name}' of lab '{lab}'"));
    }
    if failed {
        bail!("some objects could not be removed");
    }
    Ok(())
}

/// Make lab `lab`'s directory here from what its agent at `from` (ADDRESS[:PORT]) holds:
/// the plan and the state its dead controller handed on (for `vemu attach --from`).
fn fetch_lab(lab: &str, from: &str) -> Result<()> {
    let address = vemu_scenario::Machine::parse_address(from).map_err(|e| user(format!("--from: {e}")))?;
    let paths = LabPaths::new(lab);
    if paths.socket().exists() && std::os::unix::net::UnixStream::connect(paths.socket()).is_ok() {
        return Err(user(format!("lab '{lab}' is already served here")));
    }
    let (plan, saved) = vemu_control::cluster::fetch_state(address, lab).map_err(|e| user(format!("taking lab '{lab}' from {from}: {e:#}")))?;
    let saved = saved.ok_or_else(|| user(format!("the agent at {from} has no state of lab '{lab}' from its controller (the controller died before it handed one on)")))?;
    if plan["name"].as_str() != Some(lab) {
        return Err(user(format!("the agent at {from} answered with a plan of another lab")));
    }
    std::fs::create_dir_all(&paths.dir).with_context(|| format!("creating {}", paths.dir.display()))?;
    vemu_control::write_private(&paths.plan(), &serde_json::to_vec(&plan)?)?;
    vemu_control::write_private(&vemu_control::lab::saved::Saved::path_in(&paths), &serde_json::to_vec(&saved)?)?;
    Ok(())
}

/// Remove what lab (or share) `name` left behind and free its name (never one a live
/// process holds); `what` names it for people. False if something stayed.
fn remove_left_behind(name: &str, what: &str) -> bool {
    let removed = vemu_host::remove_lab(name);
    if let Ok(Some(l)) = vemu_host::LabLock::try_acquire(name) {
        l.release();
    }
    match removed {
        Ok(()) => {
            eprintln!("removed what {what} left behind");
            true
        }
        Err(e) => {
            eprintln!("vemu: could not remove all of {what}: {e:#}");
            false
        }
    }
}

/// A duration in the scenario's unit syntax (`20ms`, `1s`, `250us`), as the user would write it.
fn unit_ns(ns: u64) -> String {
    match ns {
        0 => "0".into(),
        n if n % 1_000_000_000 == 0 => format!("{}s", n / 1_000_000_000),
        n if n >= 1_000_000 => format!("{}ms", n as f64 / 1e6),
        n => format!("{}us", n as f64 / 1e3),
    }
}

fn fmt_rate(bps: u64) -> String {
    match bps {
        b if b >= 1_000_000_000 => format!("{}Gbit", b as f64 / 1e9),
        b if b >= 1_000_000 => format!("{}Mbit", b as f64 / 1e6),
        b if b >= 1_000 => format!("{}kbit", b as f64 / 1e3),
        b => format!("{b}bit"),
    }
}

fn pct(p: f64) -> String {
    format!("{}%", (p * 1e6).round() / 1e4)
}

/// One line describing what a link direction does, for people.
/// Which way a direction goes now, as `vemu status` says it.
fn path_of(d: &DirStats) -> &'static str {
    if d.kernel_shaper {
        "kernel-tbf"
    } else if d.kernel_path {
        "kernel"
    } else if d.transit_ns > 0 {
        "tunnel"
    } else {
        "engine"
    }
}

fn describe(imp: &Impairments) -> String {
    let mut parts = Vec::new();
    if let Some(r) = imp.rate_bps {
        parts.push(fmt_rate(r));
    }
    parts.push(format!("delay {}", unit_ns(imp.delay_ns)));
    if imp.jitter.amount_ns > 0 {
        parts.push(format!("jitter {} {:?}", unit_ns(imp.jitter.amount_ns), imp.jitter.distribution).to_lowercase());
    }
    match imp.loss {
        Loss::None => {}
        Loss::Bernoulli { rate, .. } => parts.push(format!("loss {}", pct(rate))),
        Loss::GilbertElliott { p, r, h, k } => parts.push(format!("loss GE p={} r={} h={} k={}", pct(p), pct(r), pct(h), pct(k))),
    }
    if imp.duplicate.probability > 0.0 {
        parts.push(format!("dup {}", pct(imp.duplicate.probability)));
    }
    if imp.corrupt.probability > 0.0 {
        parts.push(format!("corrupt {}", pct(imp.corrupt.probability)));
    }
    if imp.reorder.probability > 0.0 {
        parts.push(format!("reorder {} gap {}", pct(imp.reorder.probability), imp.reorder.gap));
    }
    if let Some(q) = imp.queue {
        parts.push(match q {
            QueueLimit::Packets(n) => format!("queue {n}p"),
            QueueLimit::Bytes(n) => format!("queue {n}B"),
        });
    }
    match &imp.qos {
        None => {}
        Some(vemu_link::QosConfig::Diffserv) => parts.push("qos diffserv".into()),
        Some(vemu_link::QosConfig::Classes { classes }) => {
            parts.push(format!("qos {}", classes.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join("/")))
        }
    }
    if imp.shaper != vemu_link::Shaper::Engine {
        parts.push(format!("{} shaper", imp.shaper.name()));
    }
    parts.join(", ")
}

/// A node's limits for people: "cpu 0.5 cores, memory 256 MiB, pids 200", or "no limits".
fn describe_limits(l: &vemu_scenario::Limits) -> String {
    let mut parts = Vec::new();
    if let Some(c) = l.cpu_cores {
        parts.push(format!("cpu {c} cores"));
    }
    if let Some(m) = l.memory_bytes {
        parts.push(format!("memory {:.1} MiB", m as f64 / (1u64 << 20) as f64));
    }
    if let Some(p) = l.pids {
        parts.push(format!("pids {p}"));
    }
    if parts.is_empty() {
        "no limits".into()
    } else {
        parts.join(", ")
    }
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// The counter columns of a direction in `vemu status`: RX FRAMES … DOWN.
fn counter_columns(st: &DirStats) -> String {
    format!(
        "{:>10} {:>10} {:>12} {:>8} {:>8} {:>8}",
        st.rx_frames, st.tx_frames, st.tx_bytes, st.drop_loss, st.drop_queue, st.drop_down
    )
}

fn print_status(s: &LabStatus) {
    println!("lab {} (controller pid {}, up {:.1} s)", s.name, s.pid, s.uptime_ns as f64 / 1e9);
    if let Some(f) = &s.fidelity {
        println!("whole run: {}", vemu_control::fidelity::describe(f));
    }
    if let Some(f) = &s.fidelity_now {
        println!("last {} s: {}", vemu_control::fidelity::WINDOW.as_secs(), vemu_control::fidelity::describe(f));
    }
    if !s.machines.is_empty() {
        println!("\n{:<15} {:<22} {:<6} {:<6} LAB CLOCK", "MACHINE", "AGENT", "STATE", "NODES");
        for m in &s.machines {
            // Against the controller's, within half the round trip that measured it (or
            // the disciplined wall clocks' errors).
            let clock = match (m.clock_offset_ns, m.clock_error_ns.or(m.clock_rtt_ns.map(|r| r / 2))) {
                (Some(o), Some(e)) => format!("{:+.3} ms (+/- {:.3} ms{})", o as f64 / 1e6, e as f64 / 1e6, if m.clock_source.as_deref() == Some("disciplined clocks") { ", disciplined clocks" } else { "" }),
                _ => "not measured yet".to_string(),
            };
            println!("{:<15} {:<22} {:<6} {:<6} {clock}", m.name, m.address, m.state, m.nodes);
            for u in &m.underlay {
                let unlimited = if u.unlimited_links > 0 { format!(" (and {} without a rate)", u.unlimited_links) } else { String::new() };
                let measured = u.measured_bps.map_or("not measured".to_string(), |b| format!("{:.1} Mbit/s", b as f64 / 1e6));
                println!("  to {}: {} links, {:.1} Mbit/s set{unlimited}; the underlay carried {measured}", u.to, u.links, u.set_bps as f64 / 1e6);
            }
        }
        for m in &s.machines {
            for w in m.underlay.iter().filter_map(|u| u.warning(&m.name)) {
                println!("warning: {w}");
            }
        }
    }
    println!("\nNODE            INTERFACES");
    for n in &s.nodes {
        let ifs: Vec<String> = n.ifaces.iter().map(|i| format!("{} {}", i.name, i.addrs.join(" "))).collect();
        let lost = s.machines.iter().any(|m| Some(&m.name) == n.machine.as_ref() && m.state == "lost");
        let on = n.machine.as_ref().map(|m| format!(" (on {m}{})", if lost { ", lost" } else { "" })).unwrap_or_default();
        let on = match n.kind.as_deref() {
            Some("host") => format!("{on} (this machine)"),
            Some("external") => format!("{on} (the wire of a NIC)"),
            _ => on,
        };
        println!("{:<15} {}{on}", n.name, ifs.join(" | "));
        if !n.limits.is_none() || n.usage.cpu_ns > 0 {
            let u = &n.usage;
            println!(
                "{:<15}   used: cpu {:.2} s, memory {:.1} MiB, {} processes; {}",
                "",
                u.cpu_ns as f64 / 1e9,
                u.memory_bytes as f64 / (1u64 << 20) as f64,
                u.processes,
                describe_limits(&n.limits)
            );
        }
        for p in &n.processes {
            println!("{:<15}   run '{}': {:?} (restarts {})", "", p.command, p.state, p.restarts);
        }
    }
    if !s.links.is_empty() || s.segments.iter().any(|g| g.kind != "wireless") {
        println!("\nkernel fast path: {}", s.fast_path);
    }
    println!(
        "\n{:<16} {:<4} {:<4} {:<10} {:>10} {:>10} {:>12} {:>8} {:>8} {:>8}  IMPAIRMENTS",
        "LINK", "UP", "DIR", "PATH", "RX FRAMES", "TX FRAMES", "TX BYTES", "LOSS", "QUEUE", "DOWN"
    );
    let (mut below_underlay, mut notes) = (Vec::new(), Vec::new());
    for l in &s.links {
        for (dir, arrow, d) in [("fwd", format!("{} -> {}", l.a, l.b), &l.forward), ("rev", format!("{} -> {}", l.b, l.a), &l.reverse)] {
            let path = path_of(&d.stats);
            // Across machines: the underlay's share of the set delay, as measured.
            let transit = if d.stats.transit_ns > 0 {
                let pieces = if d.stats.path_payload_bytes > 0 { format!(", datagrams of {} B", d.stats.path_payload_bytes) } else { String::new() };
                format!(", underlay {:.0} us{pieces}", d.stats.transit_ns as f64 / 1e3)
            } else {
                String::new()
            };
            // Unimpaired across machines but through the engines because whole frames do
            // not fit the underlay's datagrams: say what would let the kernel carry it.
            let iface_mtu = vemu_scenario::port_mtu([&l.forward.impairments, &l.reverse.impairments]) as usize;
            let bare = Impairments { shaper: d.impairments.shaper, mtu: d.impairments.mtu, ..Default::default() };
            if d.stats.transit_ns > 0 && !d.stats.kernel_path && d.impairments == bare && d.stats.path_payload_bytes > 0 && (d.stats.path_payload_bytes as usize) < iface_mtu + TUNNEL_FRAME_EXTRA {
                notes.push(format!(
                    "{} {dir} goes through the engines: the underlay carries datagrams of {} B, a frame of its {iface_mtu}-byte interfaces needs {} B in the kernel's tunnel (mtu: {} or less on the link, or a larger MTU on the underlay, lets the kernel carry it)",
                    l.name,
                    d.stats.path_payload_bytes,
                    iface_mtu + TUNNEL_FRAME_EXTRA,
                    (d.stats.path_payload_bytes as usize).saturating_sub(TUNNEL_FRAME_EXTRA)
                ));
            }
            // A set delay shorter than the underlay's cannot be kept: say by how much.
            if d.stats.transit_ns > d.impairments.delay_ns {
                below_underlay.push(format!(
                    "{} {dir}: the set delay ({:.0} us) is below the underlay's one-way delay ({:.0} us): frames arrive {:.0} us late",
                    l.name,
                    d.impairments.delay_ns as f64 / 1e3,
                    d.stats.transit_ns as f64 / 1e3,
                    (d.stats.transit_ns - d.impairments.delay_ns) as f64 / 1e3
                ));
            }
            println!("{:<16} {:<4} {:<4} {:<10} {}  {} ({arrow}{transit})", l.name, yes_no(l.up), dir, path, counter_columns(&d.stats), describe(&d.impairments));
        }
    }
    // (A lab with hundreds of links between machines would print hundreds of lines.)
    for (kind, lines) in [("warning", &below_underlay), ("note", &notes)] {
        for l in lines.iter().take(STATUS_LINES_MAX) {
            println!("{kind}: {l}");
        }
        if lines.len() > STATUS_LINES_MAX {
            println!("{kind}: ... and {} more like these (vemu status --json has every direction)", lines.len() - STATUS_LINES_MAX);
        }
    }
    for d in &s.diverts {
        for (dir, what, st) in [("fwd", "the machine's packets out", &d.forward), ("rev", "replies back", &d.reverse)] {
            println!("{:<16} {:<4} {:<4} {:<10} {}  {} (divert '{}': {what})", d.name, "yes", dir, "nfq", counter_columns(&st.stats), describe(&st.impairments), d.matches);
        }
    }
    for g in s.segments.iter().filter(|g| g.kind == "wireless") {
        println!(
            "\nSEGMENT {} (wireless): {} frames refused by full radio queues; {} receptions of groups the receiver did not join held back, {} memberships",
            g.name, g.stats.drop_capacity, g.stats.filtered, g.stats.groups
        );
        println!("{:<22} {:>9} {:>9}  NEIGHBOURS (delivery probability)   SENT -> DELIVERED/LOST/COLLIDED", "MEMBER", "X (m)", "Y (m)");
        for m in &g.members {
            let Some(r) = &m.radio else { continue };
            let nb: Vec<String> = r.neighbours.iter().map(|n| format!("{} ({:.2})", n.node, n.delivery_probability)).collect();
            let sent: Vec<String> =
                r.sent_to.iter().map(|p| format!("{} {}/{}/{}", p.node, p.counters.delivered, p.counters.lost_channel, p.counters.lost_collision)).collect();
            let nb = if nb.is_empty() { "-".to_string() } else { nb.join(", ") };
            println!("{:<22} {:>9.1} {:>9.1}  {nb}   {}", m.port, r.x_m, r.y_m, sent.join(", "));
        }
    }
    for g in s.segments.iter().filter(|g| g.kind != "wireless") {
        let st = &g.stats;
        let cap = g.capacity_bps.map(|c| format!(", capacity {}", fmt_rate(c))).unwrap_or_default();
        // Switched by the kernel's bridge now: the engine's switch sees none of it.
        let kernel = g.members.first().is_some_and(|m| m.egress.stats.kernel_path);
        let path = if kernel { "switched by the kernel (the engine's switch counts nothing meanwhile); " } else { "" };
        println!(
            "\nSEGMENT {} (lan{cap}): {path}{} unicast, {} flooded, {} filtered, {} over capacity",
            g.name, st.unicast, st.flooded, st.filtered, st.drop_capacity
        );
        println!(
            "{:<22} {:<4} {:<4} {:<4} {:<10} {:>10} {:>10} {:>12} {:>8} {:>8} {:>8}  IMPAIRMENTS",
            "PORT", "VLAN", "UP", "DIR", "PATH", "RX FRAMES", "TX FRAMES", "TX BYTES", "LOSS", "QUEUE", "DOWN"
        );
        for m in &g.members {
            for (dir, d) in [("out", &m.egress), ("in", &m.ingress)] {
                let path = path_of(&d.stats);
                println!("{:<22} {:<4} {:<4} {:<4} {:<10} {}  {}", m.port, m.vlan, yes_no(m.up), dir, path, counter_columns(&d.stats), describe(&d.impairments));
            }
        }
    }
}
