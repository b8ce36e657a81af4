//! The `vemu` command.

use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use serde_json::json;
use vemu_control::daemon::{self, Event};
mod clean;
mod cli;
mod exec;
mod lab;
mod link;
mod show;
mod stats;
mod traffic;
mod up;

use clean::*;
use cli::*;
use exec::*;
use lab::*;
use link::*;
use show::*;
use up::*;

use vemu_control::daemon::ApiOptions;
use vemu_control::{
    percent_encode, ApiFailure, Client, DirStats, LabClock, LabStatus, TUNNEL_FRAME_EXTRA,
};
use vemu_host::{LabPaths, NodeEntry};
use vemu_link::{Impairments, Loss, QueueLimit};
use vemu_scenario::Plan;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Commands that print end quietly when their reader goes away (`vemu status | head`);
    // the servers — the controller (`up`, `daemon`, `attach`'s daemon) and the agent —
    // keep ignoring SIGPIPE, as their clients come and go: a write to a connection the
    // other end closed (rustls writes with writev, which has no MSG_NOSIGNAL) must be an
    // error, not the end of the process. An agent killed so took its machine's share of
    // a lab with it (seen in CI: a heartbeat the controller gave up on).
    if !matches!(
        cli.cmd,
        Cmd::Up { .. } | Cmd::Daemon | Cmd::TrafficAgent { .. } | Cmd::Agent { .. }
    ) {
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
            let plan =
                load_scenario(&file, name.as_deref(), machines.as_deref(), tenant.as_deref())?;
            need_root()?;
            // The controller checks too, but only after the plan has reached it (a second
            // for 10,000 nodes): a lab too big for the limits fails here at once. The
            // controller inherits the raised soft limit.
            if plan.machines.is_empty() {
                vemu_host::ensure_open_files(vemu_host::files_needed(
                    &plan,
                    vemu_control::fast_path_wanted(),
                ))
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
            let token = vemu_control::cluster::read_token(&token_file)
                .map_err(|e| user(format!("the agent's token: {e:#}")))?;
            lock_memory();
            vemu_control::agent::run(listen, token)?;
        }
        Cmd::Attach { api, from, lab } => {
            need_root()?;
            if let Some(from) = from {
                let lab =
                    lab.lab.ok_or_else(|| user("--from needs --lab: the lab to take over"))?;
                vemu_scenario::valid_lab_name(&lab).map_err(user)?;
                let dir = LabPaths::new(&lab).dir;
                let made = !dir.exists();
                let r = fetch_lab(&lab, &from)
                    .and_then(|()| load_plan(&lab))
                    .and_then(|plan| start_controller(plan, ApiOptions { tcp: api }, true));
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
                    [] => {
                        return Err(user(
                            "no lab has lost its controller ('vemu ls' lists the labs)",
                        ))
                    }
                    many => {
                        return Err(user(format!(
                            "{} labs have no controller ({}); say which with --lab",
                            many.len(),
                            many.join(", ")
                        )))
                    }
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
                let n = load_plan(&l)
                    .map(|p| format!("{} nodes, {} links", p.nodes.len(), p.links.len()))
                    .unwrap_or_default();
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
            let shell = std::env::var("SHELL")
                .ok()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "/bin/bash".into());
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
            vemu_scenario::units::duration_ns(&interval)
                .map_err(|m| user(format!("--interval: {m}")))?;
            let client = connect(&lab)?;
            let mut sink = stats::Sink::new(json, csv.as_deref(), count)?;
            let ctrl_c = async {
                let _ = tokio::signal::ctrl_c().await;
            };
            match client.stream_to(
                &format!("/v1/events?stats={}", percent_encode(&interval)),
                &mut sink,
                ctrl_c,
            ) {
                Err(e) if stats::is_done(&e) => {}
                r => r?,
            }
        }
        Cmd::Capture { iface, write, point, count, filter, lab } => {
            let lab = resolve_lab(lab.lab)?;
            let mut q = format!(
                "iface={}&point={}",
                percent_encode(&iface),
                match point {
                    PointArg::After => "after",
                    PointArg::Before => "before",
                }
            );
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
                Box::new(
                    std::fs::File::create(&write).with_context(|| format!("creating {write}"))?,
                )
            };
            let ctrl_c = async {
                let _ = tokio::signal::ctrl_c().await;
            };
            // A full disk (or a closed reader) ends this capture only: the controller
            // drops its copies once we are gone, and the lab runs on.
            client
                .stream_to(&format!("/v1/capture?{q}"), &mut out, ctrl_c)
                .with_context(|| format!("the capture to {write} stopped (the lab runs on)"))?;
        }
        Cmd::Node { cmd: NodeCmd::Set { node, cpu, memory, pids, lab } } => {
            let mut body = serde_json::Map::new();
            let value = |v: &str,
                         number: fn(&str) -> Option<serde_json::Value>,
                         what: &str|
             -> Result<serde_json::Value> {
                match v {
                    "none" => Ok(serde_json::Value::Null),
                    _ => number(v).ok_or_else(|| {
                        anyhow::anyhow!("{what}: expected a value or 'none', got '{v}'")
                    }),
                }
            };
            if let Some(c) = cpu {
                body.insert(
                    "cpu".into(),
                    value(&c, |v| v.parse::<f64>().ok().map(|f| json!(f)), "--cpu")?,
                );
            }
            if let Some(m) = memory {
                body.insert("memory".into(), value(&m, |v| Some(json!(v)), "--memory")?);
            }
            if let Some(p) = pids {
                body.insert(
                    "pids".into(),
                    value(&p, |v| v.parse::<u64>().ok().map(|n| json!(n)), "--pids")?,
                );
            }
            if body.is_empty() {
                bail!("nothing to change: give --cpu, --memory or --pids");
            }
            let lab = resolve_lab(lab.lab)?;
            let v = connect(&lab)?.patch(
                &format!("/v1/nodes/{}", percent_encode(&node)),
                &serde_json::Value::Object(body),
            )?;
            println!(
                "node {node}: {}",
                describe_limits(&serde_json::from_value(v["limits"].clone()).unwrap_or_default())
            );
        }
        Cmd::Node { cmd } => {
            let (node, lab, verb, body) = match cmd {
                NodeCmd::Set { .. } => unreachable!("handled above"),
                NodeCmd::Stop { node, lab } => (node, lab, "stop", json!({})),
                NodeCmd::Start { node, lab } => (node, lab, "start", json!({})),
                NodeCmd::Move { node, to, speed, lab } => {
                    (node, lab, "move", json!({"x": to.0, "y": to.1, "speed": speed}))
                }
            };
            let lab = resolve_lab(lab.lab)?;
            connect(&lab)?.post(&format!("/v1/nodes/{}/{verb}", percent_encode(&node)), &body)?;
        }
        Cmd::Traffic {
            cmd: TrafficCmd::Cbr { from, to, size, rate, start, duration, count, to_addr, lab },
        } => {
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
                Err(_) => std::fs::read(paths.log_dir().join("stats-final.json"))
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok()),
            };
            if stats.is_none() && !paths.log_dir().exists() {
                return Err(user(format!(
                    "no lab '{lab}' has run here (no {})",
                    paths.log_dir().display()
                )));
            }
            let r = vemu_control::report::report(&paths.log_dir(), stats.as_ref())?;
            if as_json {
                println!("{r}");
            } else {
                traffic::print_report(&lab, &r);
            }
        }
        Cmd::TrafficAgent { cmd } => match cmd {
            AgentCmd::Send { flow, to, size, interval_ns, start_ns, epoch_ns, count } => {
                traffic::send(flow, to, size, interval_ns, start_ns, count, LabClock { epoch_ns })?
            }
            AgentCmd::Recv { flow, port, until_ns, epoch_ns } => {
                traffic::recv(flow, port, until_ns, LabClock { epoch_ns })?
            }
        },
        Cmd::Clean { all } => clean(all)?,
    }
    Ok(ExitCode::SUCCESS)
}
