//! `vemu up` and `ui`: loading a scenario, starting the lab's controller (in the
//! foreground, or as `vemu daemon` in the background, told what to do and followed through
//! `vemu_control::daemon::{DaemonOrder, DaemonReport}`) and waiting for it.

use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use serde_json::json;
use vemu_control::daemon::{self, ApiOptions, DaemonOrder, DaemonReport, Event, Start};
use vemu_control::labs::LabPaths;
use vemu_scenario::Plan;

use crate::lab::{connect, need_root, take_down, user};

/// What placement weighed a machine's nodes by, in words: a node weighs its `cpu:`
/// limit in cores, one without a limit weighs 1 — a unit of balance, not a core it is
/// expected to use (an idle node uses none).
fn placement_weight(limits: impl Iterator<Item = Option<f64>>) -> String {
    let (mut limited, mut cores, mut unlimited) = (0usize, 0.0f64, 0usize);
    for l in limits {
        match l {
            Some(c) => (limited, cores) = (limited + 1, cores + c),
            None => unlimited += 1,
        }
    }
    let weight = cores + unlimited as f64;
    match (limited, unlimited) {
        (0, _) => format!("placement weight {weight:.0} (nodes without `cpu:` weigh 1 each)"),
        (_, 0) => format!("placement weight {weight:.1} (their `cpu:` limits, in cores)"),
        _ => format!(
            "placement weight {weight:.1} ({limited} with a `cpu:` limit, {cores:.1} cores; \
             {unlimited} without, 1 each)"
        ),
    }
}

/// Where the nodes of a lab across machines go: nodes per machine, and the links
/// between machines (the cut) with the rate they may carry.
pub(crate) fn print_placement(plan: &Plan) {
    if plan.machines.is_empty() {
        return;
    }
    for (i, m) in plan.machines.iter().enumerate() {
        let here: Vec<&vemu_scenario::NodePlan> =
            plan.nodes.iter().filter(|n| n.machine == i).collect();
        let nodes: Vec<&str> = here.iter().map(|n| n.name.as_str()).collect();
        let shown =
            if nodes.len() > 8 { format!("{} ...", nodes[..8].join(" ")) } else { nodes.join(" ") };
        println!(
            "machine {} ({}): {} node{}, {}: {shown}",
            m.name,
            m.address,
            nodes.len(),
            if nodes.len() == 1 { "" } else { "s" },
            placement_weight(here.iter().map(|n| n.limits.cpu_cores))
        );
    }
    let cut: Vec<&vemu_scenario::LinkPlan> = plan
        .links
        .iter()
        .filter(|l| plan.nodes[l.a.node].machine != plan.nodes[l.b.node].machine)
        .collect();
    let unlimited =
        cut.iter().filter(|l| l.forward.rate_bps.is_none() || l.reverse.rate_bps.is_none()).count();
    // (+ 0.0: an empty sum of floats is -0.)
    let rate_mbit: f64 = cut
        .iter()
        .map(|l| l.forward.rate_bps.unwrap_or(0).max(l.reverse.rate_bps.unwrap_or(0)) as f64 / 1e6)
        .sum::<f64>()
        + 0.0;
    let more =
        if unlimited > 0 { format!(" (+{unlimited} without a rate)") } else { String::new() };
    println!("cut: {} links, {rate_mbit:.0} Mbit/s{more}", cut.len());
    // Segments whose members are on several machines: each such member reaches the
    // segment's machine through a tunnel of its own.
    for (g, seg) in plan.segments.iter().enumerate().filter(|&(g, _)| plan.spans(g)) {
        let at = plan.segment_machine(g);
        let away = seg.members.iter().filter(|m| plan.nodes[m.end.node].machine != at).count();
        println!(
            "segment {} spans machines: its {} on machine {}, {away} of {} members elsewhere",
            seg.name,
            match seg.kind() {
                "hub" => "hub",
                "wireless" => "radio channel",
                _ => "switch",
            },
            plan.machines[at].name,
            seg.members.len()
        );
    }
}

/// Tell the user where the TCP API is and its token, once.
pub(crate) fn print_api(lab: &str) {
    let paths = LabPaths::new(lab);
    if let (Ok(addr), Ok(token)) =
        (std::fs::read_to_string(paths.api_address()), std::fs::read_to_string(paths.api_token()))
    {
        println!(
            "API on http://{}/v1/ — send 'Authorization: Bearer {}'",
            addr.trim(),
            token.trim()
        );
    }
}

/// A cluster file's text (at most 1 MiB).
pub(crate) fn read_cluster_file(path: &str) -> Result<String> {
    use std::io::Read;
    let f = std::fs::File::open(path)
        .map_err(|e| user(format!("--machines: cannot read the cluster file {path}: {e}")))?;
    let mut text = String::new();
    f.take(1 << 20)
        .read_to_string(&mut text)
        .map_err(|e| user(format!("--machines: cannot read the cluster file {path}: {e}")))?;
    Ok(text)
}

/// The machines `--machines` gives: `NAME=ADDRESS[:PORT],…`, or `@FILE` (a cluster
/// file).
pub(crate) fn machines_arg(list: Option<&str>) -> Result<Option<Vec<vemu_scenario::Machine>>> {
    let Some(list) = list else { return Ok(None) };
    Ok(Some(match list.strip_prefix('@') {
        Some(path) => {
            let text = read_cluster_file(path)?;
            vemu_scenario::Machine::parse_cluster(&text, path)
                .map_err(|m| user(format!("--machines: {m}")))?
        }
        None => vemu_scenario::Machine::parse_list(list)
            .map_err(|m| user(format!("--machines: {m}")))?,
    }))
}

/// A scenario file's plan, on the machines given with `--machines` if any, a tenant's
/// if `--tenant` says what it is allowed.
pub(crate) fn load_scenario(
    file: &std::path::Path,
    name: Option<&str>,
    machines: Option<&str>,
    tenant: &crate::cli::TenantArgs,
) -> Result<Plan> {
    let trust = trust_of(tenant)?;
    let machines = machines_arg(machines)?;
    // Another tool's topology (containerlab, IMUNES): made a scenario first (what is
    // left out is said).
    let (clab, imn) =
        (vemu_scenario::import::is_clab(file), vemu_scenario::import::is_imunes(file));
    if clab || imn {
        let i = match clab {
            true => vemu_scenario::import::clab_file(
                file,
                None,
                trust.allows(vemu_scenario::Reach::From),
            ),
            false => vemu_scenario::import::imunes_file(file, None),
        }
        .map_err(user)?;
        for w in &i.warnings {
            eprintln!("vemu: {}: {w}", file.display());
        }
        let stem = file.file_name().and_then(|s| s.to_str()).unwrap_or("lab");
        let base = file.parent().map(std::path::Path::to_path_buf);
        let shown = format!("{} (as a scenario)", file.display());
        return Ok(vemu_scenario::load_str_as(
            &i.yaml,
            &shown,
            stem.trim_end_matches(".clab.yml")
                .trim_end_matches(".clab.yaml")
                .trim_end_matches(".imn"),
            name,
            machines,
            base.as_deref(),
            &trust,
        )?);
    }
    Ok(vemu_scenario::load_as(file, name, machines, &trust)?)
}

/// Whose scenario it is (`--tenant`, `--registries`, `--image-max`).
fn trust_of(t: &crate::cli::TenantArgs) -> Result<vemu_scenario::Trust> {
    let Some(list) = &t.tenant else { return Ok(vemu_scenario::Trust::Owner) };
    let mut trust =
        vemu_scenario::Trust::tenant(list).map_err(|m| user(format!("--tenant: {m}")))?;
    if let Some(r) = &t.registries {
        trust = trust.with_registries(r).map_err(|m| user(format!("--registries: {m}")))?;
    }
    if let Some(size) = &t.image_max {
        let bytes = vemu_scenario::units::size_bytes(size)
            .map_err(|m| user(format!("--image-max: {m}")))?;
        trust = trust.with_image_max(bytes).map_err(|m| user(format!("--image-max: {m}")))?;
    }
    Ok(trust)
}

/// Ask the lab's controller for a login link of its web interface and print it.
pub(crate) fn print_ui(lab: &str) -> Result<()> {
    let v = connect(lab)?.post("/v1/ui", &json!({}))?;
    let url = v["url"].as_str().unwrap_or("");
    println!("web interface: {url}");
    eprintln!(
        "(the link works once, for {} s; 'vemu ui --lab {lab}' makes another)",
        v["expires_s"].as_u64().unwrap_or(0)
    );
    Ok(())
}

pub(crate) fn up_foreground(plan: Plan, options: ApiOptions, ui: bool) -> Result<()> {
    let name = plan.name.clone();
    let (nodes, links) = (plan.nodes.len(), plan.links.len());
    let bar = progress_bar(nodes);
    let lock = lock_name(&name)?;
    daemon::run(plan, options, lock, |ev| match ev {
        Event::Progress(d, _) => bar.set_position(d as u64),
        Event::Ready(settled) => {
            bar.finish_and_clear();
            if let Some(why) = &settled.fast_path_off {
                eprintln!(
                    "kernel fast path off ({why}): every link direction goes through the engine"
                );
            }
            for w in &settled.warnings {
                eprintln!("warning: {w}");
            }
            eprintln!(
                "lab '{name}' is up: {nodes} nodes, {links} links{}. Ctrl-C takes it down.",
                settle_note(settled.waited_ms, settled.behind_ms)
            );
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

pub(crate) fn progress_bar(total: usize) -> indicatif::ProgressBar {
    if total < 20 || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total as u64);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("creating nodes {bar:40} {pos}/{len} {elapsed}")
    {
        bar.set_style(style);
    }
    bar
}

/// Start the lab's controller as a background process and follow it until ready.
/// The lab's name for this process, or a clear refusal (exit 2) when another `vemu up`
/// or a running lab holds it (a `vemu ls` or `clean` looking at it holds it for an
/// instant only: wait that out).
pub(crate) fn lock_name(lab: &str) -> Result<vemu_control::labs::LabLock> {
    vemu_control::labs::LabLock::acquire_within(lab, std::time::Duration::from_millis(200))?.ok_or_else(|| {
        user(format!("lab '{lab}' is already running or being started (take it down with 'vemu down --lab {lab}', or use --name)"))
    })
}

/// `vemu up --wait-converged`: ask the lab every 250 ms whether every node has a route
/// to every prefix (twice in a row), for up to `secs`; name the nodes lacking routes if
/// not.
pub(crate) fn wait_converged_for(lab: &str, secs: u64) -> Result<()> {
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
            let lacking: Vec<String> = c["lacking"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|l| {
                    format!(
                        "{} lacks {}",
                        l["node"].as_str().unwrap_or("?"),
                        l["prefixes"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|p| p.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })
                .collect();
            bail!("lab '{lab}' is up, but its routes did not converge within {secs} s: {} nodes lack routes ({}); the lab keeps running", c["nodes_lacking"], lacking.join("; "));
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

pub(crate) fn up_background(plan: Plan, options: ApiOptions) -> Result<()> {
    start_controller(plan, options, false)
}

/// Start a lab's controller in the background and follow it until it serves the lab:
/// one that builds `plan`, or with `attach` one that takes the running lab over (it
/// reads the plan the dead controller left).
pub(crate) fn start_controller(plan: Plan, options: ApiOptions, attach: bool) -> Result<()> {
    let paths = LabPaths::new(&plan.name);
    let lock = lock_name(&plan.name)?;
    // Before the log is opened (and emptied): it may be a running controller's.
    if std::os::unix::net::UnixStream::connect(paths.socket()).is_ok() {
        bail!(
            "lab '{}' is already running (take it down with 'vemu down --lab {}')",
            plan.name,
            plan.name
        );
    }
    std::fs::create_dir_all(paths.log_dir())
        .with_context(|| format!("creating {}", paths.log_dir().display()))?;
    let log_path = paths.log_dir().join("vemu.log");
    // A controller taking over goes on with the dead one's log.
    let log = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(attach)
        .truncate(!attach)
        .open(&log_path)
        .with_context(|| format!("creating {}", log_path.display()))?;
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
    let start = match attach {
        true => Start::Attach(plan.name.clone()),
        false => Start::Up(Box::new(plan.clone())),
    };
    let order = DaemonOrder { start, api_tcp: options.tcp, lock_fd: Some(lock_fd) };
    stdin.write_all(&serde_json::to_vec(&order)?)?;
    drop(stdin);
    let bar = progress_bar(plan.nodes.len());
    let mut settled = None;
    let mut error = None;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let Ok(line) = line else { break };
        match serde_json::from_str(&line) {
            Ok(DaemonReport::Progress { done, .. }) => bar.set_position(done as u64),
            Ok(DaemonReport::Ready(s)) => {
                if let Some(why) = &s.fast_path_off {
                    eprintln!(
                        "kernel fast path off ({why}): every link direction goes through the engine"
                    );
                }
                for w in &s.warnings {
                    eprintln!("warning: {w}");
                }
                settled = Some(s);
            }
            Ok(DaemonReport::Failed(e)) => error = Some(e),
            Err(e) => eprintln!("vemu: an unreadable line from the lab controller ({e}): {line}"),
        }
    }
    bar.finish_and_clear();
    let Some(settled) = settled else {
        let _ = child.wait();
        let msg = error
            .unwrap_or_else(|| format!("the lab controller stopped; see {}", log_path.display()));
        if attach {
            bail!("lab '{}' could not be taken over: {msg}", plan.name);
        }
        bail!("lab '{}' did not come up: {msg}", plan.name);
    };
    if attach {
        println!("lab '{}' is served again: {} nodes, {} links on {} machines (logs in {}). 'vemu status' shows what it has.", plan.name, plan.nodes.len(), plan.links.len(), plan.machines.len(), paths.log_dir().display());
        print_api(&plan.name);
        return Ok(());
    }
    // (On stderr when stdout is for something else: `vemu test --json`.)
    let up = format!(
        "lab '{}' is up: {} nodes, {} links, {} segments{} (logs in {}). Try 'vemu status', 'vemu exec NODE -- CMD', 'vemu down'.",
        plan.name,
        plan.nodes.len(),
        plan.links.len(),
        plan.segments.len(),
        settle_note(settled.waited_ms, settled.behind_ms),
        paths.log_dir().display()
    );
    if UP_LINE_ON_STDERR.load(std::sync::atomic::Ordering::Relaxed) {
        eprintln!("{up}");
    } else {
        println!("{up}");
    }
    print_api(&plan.name);
    Ok(())
}

/// Whether `up` says "lab is up" on stderr (stdout being a command's result).
pub(crate) static UP_LINE_ON_STDERR: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// What `up` says of the data plane's catching up with the nodes' start-up chatter:
/// nothing when it took no time worth telling.
pub(crate) fn settle_note(waited_ms: u64, behind_ms: u64) -> String {
    if behind_ms > 0 {
        format!("; the data plane is still {:.1} s behind after waiting {:.1} s (the nodes' start-up traffic: see docs/scenario.md)", behind_ms as f64 / 1e3, waited_ms as f64 / 1e3)
    } else if waited_ms >= 200 {
        format!(
            "; data plane caught up with the nodes' start-up traffic in {:.1} s",
            waited_ms as f64 / 1e3
        )
    } else {
        String::new()
    }
}

/// The images of `plan`'s nodes can be had here, or an error naming each that cannot
/// (with its node): nothing is built. A mistake in the input (exit 2) unless it is the
/// machine's (a full disk, a missing tool).
pub(crate) fn images_readable(plan: &Plan) -> Result<()> {
    let bad = vemu_control::labs::check_images(plan);
    if bad.is_empty() {
        return Ok(());
    }
    let machines = ["no space left on device", "is not installed", "Permission denied"];
    match bad.iter().any(|m| machines.iter().any(|w| m.contains(w))) {
        true => Err(anyhow::anyhow!("{}", bad.join("\n"))),
        false => Err(user(bad.join("\n"))),
    }
}

/// `vemu up`.
#[allow(clippy::too_many_arguments)] // (clap's fields, one each)
pub(crate) fn up(
    file: &std::path::Path,
    name: Option<&str>,
    foreground: bool,
    api: Option<std::net::SocketAddr>,
    ui: bool,
    machines: Option<&str>,
    wait_converged: Option<u64>,
    tenant: &crate::cli::TenantArgs,
    owner: Option<u32>,
) -> Result<()> {
    let plan = load_scenario(file, name, machines, tenant)?;
    let owner = match owner {
        Some(pid) => Some(
            vemu_control::labs::Owner::of(pid)
                .ok_or_else(|| user(format!("--owner {pid}: no such process")))?,
        ),
        None => None,
    };
    if owner.is_some() && foreground {
        return Err(user("--owner: not with --foreground (the lab ends with 'vemu up' then)"));
    }
    need_root()?;
    if plan.machines.is_empty() {
        images_readable(&plan)?;
    }
    // The controller checks too, but only after the plan has reached it (a second
    // for 10,000 nodes): a lab too big for the limits fails here at once. The
    // controller inherits the raised soft limit.
    if plan.machines.is_empty() {
        vemu_control::labs::ensure_open_files(&plan, vemu_machine::fast_path_wanted())
            .with_context(|| format!("lab '{}' cannot come up", plan.name))?;
    }
    if wait_converged.is_some() && (foreground || !plan.machines.is_empty()) {
        return Err(user(
            "--wait-converged: not with --foreground, nor yet for labs across machines",
        ));
    }
    let options = ApiOptions { tcp: api };
    if foreground {
        up_foreground(plan, options, ui)?;
    } else {
        let name = plan.name.clone();
        let routers = crate::save::routers(&plan);
        up_background(plan, options)?;
        if let Some(owner) = owner {
            // A lab whose owner is not recorded would outlive it: none is left up.
            if let Err(e) = owner.write(&LabPaths::new(&name).dir) {
                return Err(match take_down(&name) {
                    Ok(()) => e.context(format!("lab '{name}' was taken down again")),
                    Err(d) => e.context(format!("lab '{name}' is still up: {d:#}")),
                });
            }
        }
        crate::save::wait_routers_ready(&name, routers)?;
        if let Some(secs) = wait_converged {
            wait_converged_for(&name, secs)?;
        }
        if ui {
            print_ui(&name)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::placement_weight;

    #[test]
    fn placement_weight_does_not_call_unlimited_nodes_cores() {
        let w = placement_weight([None, None, None].into_iter());
        assert_eq!(w, "placement weight 3 (nodes without `cpu:` weigh 1 each)");
        let w = placement_weight([Some(0.5), Some(0.25)].into_iter());
        assert_eq!(w, "placement weight 0.8 (their `cpu:` limits, in cores)");
        let w = placement_weight([Some(0.5), None, None].into_iter());
        assert_eq!(w, "placement weight 2.5 (1 with a `cpu:` limit, 0.5 cores; 2 without, 1 each)");
    }
}
