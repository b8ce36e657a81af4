//! The command line: its commands, flags and their help (clap).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(
    name = "vemu",
    version,
    about = "A scalable network emulator: real software in virtual nodes, emulated links"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) cmd: Cmd,
}

#[derive(Args, Clone)]
pub(crate) struct LabArg {
    /// The lab to act on; may be left out while only one lab runs.
    #[arg(long, global = true)]
    pub(crate) lab: Option<String>,
}

/// Whose scenario it is, and what its administrator allows it.
#[derive(Args, Clone, Default)]
pub(crate) struct TenantArgs {
    /// The scenario is a tenant's (someone not trusted with this machine, e.g. a
    /// Kubernetes VemuLab): only its own nodes, plus the features ALLOWED lists
    /// ('none', or some of from, trace, host, external, divert, shared-pids);
    /// anything else is refused at its field before it is read.
    #[arg(long, value_name = "ALLOWED")]
    pub(crate) tenant: Option<String>,
    /// With --tenant: the registries its images may come from (HOST[:PORT],...; none
    /// unless listed). A registry on this machine's loopback, link-local or own
    /// addresses must be listed by that address itself.
    #[arg(long, value_name = "LIST", requires = "tenant")]
    pub(crate) registries: Option<String>,
    /// With --tenant: the largest image it may use, downloaded and unpacked, each
    /// (e.g. 2GiB; default 4GiB). Images also count against the lab's storage.
    #[arg(long, value_name = "SIZE", requires = "tenant")]
    pub(crate) image_max: Option<String>,
}

#[derive(Subcommand)]
pub(crate) enum Cmd {
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
        #[command(flatten)]
        tenant: TenantArgs,
        /// The lab belongs to process PID (a script that built it, as `vemu mininet`'s):
        /// `vemu clean` takes it down once that process has ended.
        #[arg(long, value_name = "PID")]
        owner: Option<u32>,
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
        #[command(flatten)]
        tenant: TenantArgs,
    },
    /// Make a scenario of another tool's topology and print its YAML: a containerlab
    /// topology (NAME.clab.yml: nodes, images, binds, exec, links; what does not map is
    /// said), an IMUNES topology (.imn), an AS-relationship file (CAIDA's serial-1/2:
    /// one BIRD or FRR router per AS, eBGP with Gao-Rexford policies; docs/internet.md), or a
    /// GraphML topology (e.g. an Internet Topology Zoo map: links from its edges with
    /// delays from the nodes' coordinates, bandwidths from LinkSpeedRaw).
    Import {
        /// The topology file (not with --as-graph).
        #[arg(required_unless_present = "as_graph")]
        file: Option<PathBuf>,
        /// Lab name (default: from the file's name).
        #[arg(long)]
        name: Option<String>,
        /// An AS-relationship file: the N ASes with the largest customer cones.
        #[arg(long, value_name = "N")]
        top: Option<usize>,
        /// An AS-relationship file: these ASes and every provider above them.
        #[arg(long, value_name = "ASN,ASN,...", value_delimiter = ',')]
        ases: Vec<u32>,
        /// An AS-relationship file: ASes that get a host (h<ASN>) in their prefix, or all.
        #[arg(long, value_name = "ASN,...|all")]
        hosts: Option<String>,
        /// An AS-relationship file: the routing software of every AS's router.
        #[arg(long, value_name = "bird|frr")]
        router: Option<String>,
        /// An AS-relationship file: an IXP whose members peer through its route server
        /// (a LAN and a BIRD route server); once per IXP.
        #[arg(long, value_name = "ASN,ASN,...")]
        ixp: Vec<String>,
        /// Print a made-up AS-relationship file of N ASes (CAIDA's form) instead.
        #[arg(long, value_name = "N", conflicts_with = "file")]
        as_graph: Option<usize>,
        /// The made-up AS graph's seed.
        #[arg(long, default_value_t = 1, requires = "as_graph")]
        seed: u64,
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
        /// Arriving frames as delivered (after the impairments), as they entered the
        /// link (before; frames the link drops are included), or only the frames the
        /// emulation dropped on their way from or to the interface (drops; each with its
        /// reason as the packet's comment), or what a wireless member's radio decoded or
        /// sent (radio: 802.11 data, ACK, RTS and CTS frames with radiotap headers; a
        /// segment with csma: true). Several, comma-separated (after,drops), make a
        /// pcapng interface each.
        #[arg(long, value_enum, value_delimiter = ',', default_value = "after")]
        point: Vec<PointArg>,
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
    /// (while it runs, or after `down` with --lab NAME); `vemu report drops`: what the
    /// emulation dropped, per link and port direction and reason; `vemu report bgp`: the
    /// BGP routers' sessions, updates, last route change (convergence) and each one's
    /// path to --prefix (BIRD and FRR routers, while the lab runs).
    Report {
        /// What to report: the traffic flows (default), `drops` or `bgp`.
        #[arg(value_enum)]
        what: Option<ReportArg>,
        /// `bgp`: each router's AS path to this prefix (e.g. an AS's announced /24).
        #[arg(long, value_name = "PREFIX")]
        prefix: Option<ipnet::IpNet>,
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
    /// Run an unmodified Mininet script (`import mininet...` served by vemu.mininet): its
    /// network is a vemu lab, taken down when the script ends (docs/mininet.md).
    Mininet {
        /// Print the directory to put first on PYTHONPATH (for test runners) instead.
        #[arg(long, conflicts_with = "script")]
        path: bool,
        /// The script, then its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "SCRIPT")]
        script: Vec<String>,
    },
    /// Mininet's `mn` on vemu: `--topo`, `--link tc,...`, `--test`, `-c`, then the
    /// `mininet>` prompt (`vemu mn -h` lists mn's options).
    Mn {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "MN_OPTIONS")]
        args: Vec<String>,
    },
    /// Bring the lab up, judge its checks (`expect:` in the scenario) as they resolve,
    /// take it down. Exit status: 0 every check passed, 1 one failed, 2 bad input, 3
    /// none failed but one was measured while the fidelity monitor judged the lab not
    /// ok (untrustworthy).
    Test {
        file: PathBuf,
        /// Lab name (default: the scenario's `name`).
        #[arg(long)]
        name: Option<String>,
        /// The results as JSON at the end (instead of a line per check).
        #[arg(long)]
        json: bool,
        /// Run the lab N times, with seeds one apart: each check's pass rate and the
        /// spread of what it measured (a flaky network test becomes a number).
        #[arg(long, value_name = "N", default_value_t = 1)]
        repeat: u32,
        /// The seed of the (first) run, instead of the scenario's `seed`.
        #[arg(long, value_name = "S")]
        seed: Option<u64>,
        /// Also write the results as JUnit XML (a test suite per run, a test case per
        /// check) for CI systems.
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
        /// Machines to spread the lab over (NAME=ADDRESS[:PORT],… or @CLUSTER-FILE), as
        /// `vemu up --machines`.
        #[arg(long)]
        machines: Option<String>,
    },
    /// Write every router's running configuration (nodes of kind frr, bird) to
    /// DIR/NODE/FILE, so that a lab changed by hand can come up again as it was
    /// (`startup-config: DIR/NODE/FILE`).
    Save {
        /// Where (default: saved-LAB in the current directory).
        #[arg(short = 'o', long, value_name = "DIR")]
        output: Option<PathBuf>,
        #[command(flatten)]
        lab: LabArg,
    },
    /// Print an Ansible inventory of the lab: every node with its management address
    /// (`mgmt:` in the scenario), grouped by kind.
    Inventory {
        #[command(flatten)]
        lab: LabArg,
    },
    /// The images of image nodes in this machine's store (docs/images.md).
    Images {
        #[command(subcommand)]
        cmd: ImagesCmd,
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
pub(crate) enum ImagesCmd {
    /// Every image unpacked in the store: its digest, size on disk and references.
    Ls,
    /// Remove an image (by reference, or by the start of its digest) that no running
    /// lab's node uses.
    Rm { image: String },
    /// Remove every image no running lab's node uses.
    Prune,
}

#[derive(Subcommand)]
pub(crate) enum NodeCmd {
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
pub(crate) enum TrafficCmd {
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
pub(crate) enum AgentCmd {
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
pub(crate) const STATUS_LINES_MAX: usize = 8;

/// `4`, `4/s` or `240/min` packets per second.
pub(crate) fn parse_rate_pps(s: &str) -> Result<f64, String> {
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
pub(crate) fn parse_xy(s: &str) -> Result<(f64, f64), String> {
    let bad = || format!("expected X,Y in metres (e.g. 500,1000), got '{s}'");
    let (x, y) = s.split_once(',').ok_or_else(bad)?;
    let (x, y) =
        (x.trim().parse::<f64>().map_err(|_| bad())?, y.trim().parse::<f64>().map_err(|_| bad())?);
    if !(x.is_finite() && y.is_finite()) {
        return Err(bad());
    }
    Ok((x, y))
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum ReportArg {
    /// Drops per direction and reason.
    Drops,
    /// The BGP routers' sessions, updates, convergence and paths.
    Bgp,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum PointArg {
    After,
    Before,
    Drops,
    Radio,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum DirArg {
    Both,
    /// From the first-named node to the second.
    Forward,
    /// From the second-named node to the first.
    Reverse,
}

#[allow(clippy::large_enum_variant)] // (parsed once)
#[derive(Subcommand)]
pub(crate) enum LinkCmd {
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
        /// bit error rate: e.g. 1e-6 (a probability per bit), or 1/1000000; a frame of L
        /// bytes is lost with 1 - (1 - ber)^(8L)
        #[arg(long)]
        ber: Option<String>,
        /// phantom load: background traffic without frames taking this much of the
        /// bandwidth, e.g. 4Mbit (0 for none)
        #[arg(long)]
        phantom: Option<String>,
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
        /// flows with impairments of their own, as in a scenario file, e.g.
        /// '[{match: {proto: udp, dport: 5000}, delay: 100ms, loss: 5%}]' ('[]': none)
        #[arg(long)]
        flows: Option<String>,
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
