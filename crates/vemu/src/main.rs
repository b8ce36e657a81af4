//! The `vemu` command.

use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;
use vemu_control::{ApiFailure, LabClock};

mod attach;
mod bgp;
mod check;
mod clean;
mod cli;
mod daemon_cmd;
mod exec;
mod flow;
mod images;
mod import;
mod lab;
mod link;
mod mininet;
mod node;
mod output;
mod save;
mod show;
mod stats;
mod test_cmd;
mod traffic;
mod up;
mod watch;

use crate::attach::attach;
use crate::check::check;
use crate::cli::{AgentCmd, Cli, Cmd, NodeCmd};
use crate::daemon_cmd::{lock_memory, run_daemon};
use crate::exec::shell;
use crate::flow::{report, traffic_flow};
use crate::import::{as_options, import};
use crate::lab::{connect, need_root, resolve_lab, take_down, user, UserError};
use crate::node::node_set;
use crate::save::inventory;
use crate::show::{ls, print_status};
use crate::up::print_ui;
use crate::watch::{capture, watch_stats};

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
        Cmd::Check { file, machines, tenant } => check(&file, machines.as_deref(), &tenant)?,
        Cmd::Import { file, name, top, ases, hosts, router, ixp, as_graph, seed } => {
            if let Some(n) = as_graph {
                print!("{}", vemu_scenario::import::generate_as_rel(n, seed));
                return Ok(ExitCode::SUCCESS);
            }
            let file = file.expect("clap requires a file without --as-graph");
            let as_options = as_options(top, ases, hosts.as_deref(), router.as_deref(), &ixp)?;
            import(&file, name.as_deref(), as_options)?
        }
        Cmd::Up { file, name, foreground, api, ui, machines, wait_converged, tenant, owner } => {
            up::up(
                &file,
                name.as_deref(),
                foreground,
                api,
                ui,
                machines.as_deref(),
                wait_converged,
                &tenant,
                owner,
            )?
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
        Cmd::Attach { api, from, lab } => attach(api, from, lab.lab)?,
        Cmd::Down { name, lab } => {
            let lab = resolve_lab(name.or(lab.lab))?;
            take_down(&lab)?;
            eprintln!("lab '{lab}' is down");
        }
        Cmd::Ls => ls(),
        Cmd::Status { name, lab, json } => {
            let lab = resolve_lab(name.or(lab.lab))?;
            let status = connect(&lab)?.status()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            } else {
                print_status(&status);
            }
        }
        Cmd::Exec { node, command, lab } => return exec::exec(lab.lab, &node, &command),
        Cmd::Shell { node, lab } => return shell(lab.lab, &node),
        Cmd::Link { cmd } => link::link(cmd)?,
        Cmd::Stats { interval, json, csv, count, lab } => {
            watch_stats(lab.lab, &interval, json, csv.as_deref(), count)?
        }
        Cmd::Capture { iface, write, point, count, filter, lab } => {
            capture(lab.lab, &iface, &write, &point, count, &filter)?
        }
        Cmd::Node { cmd: NodeCmd::Set { node, cpu, memory, pids, lab } } => {
            node_set(lab.lab, &node, cpu, memory, pids)?
        }
        Cmd::Node { cmd } => node::node(cmd)?,
        Cmd::Traffic { cmd } => traffic_flow(cmd)?,
        Cmd::Report { what: Some(cli::ReportArg::Bgp), prefix, json: as_json, lab } => {
            bgp::report_bgp(lab.lab, prefix, as_json)?
        }
        Cmd::Report { prefix: Some(p), .. } => {
            return Err(user(format!("--prefix {p}: only 'vemu report bgp' takes a prefix")))
        }
        Cmd::Report { what: None, json: as_json, lab, .. } => report(lab.lab, as_json)?,
        Cmd::Report { what: Some(cli::ReportArg::Drops), json: as_json, lab, .. } => {
            flow::report_drops(lab.lab, as_json)?
        }
        Cmd::TrafficAgent { cmd } => match cmd {
            AgentCmd::Send { flow, to, size, interval_ns, start_ns, epoch_ns, count } => {
                traffic::send(flow, to, size, interval_ns, start_ns, count, LabClock { epoch_ns })?
            }
            AgentCmd::Recv { flow, port, until_ns, epoch_ns } => {
                traffic::recv(flow, port, until_ns, LabClock { epoch_ns })?
            }
        },
        Cmd::Images { cmd } => images::images(cmd)?,
        Cmd::Test { file, name, json, repeat, seed, junit, machines } => {
            return crate::test_cmd::test(&crate::test_cmd::TestArgs {
                file: &file,
                name: name.as_deref(),
                json,
                repeat,
                seed,
                junit: junit.as_deref(),
                machines: machines.as_deref(),
            });
        }
        Cmd::Mininet { path: true, .. } => println!("{}", mininet::python_path()?.display()),
        Cmd::Mininet { script, .. } => return mininet::run_script(&script),
        Cmd::Mn { args } => return mininet::run_mn(&args),
        Cmd::Save { output, lab } => save::save(lab.lab, output)?,
        Cmd::Inventory { lab } => inventory(lab.lab)?,
        Cmd::Clean { all } => clean::clean(all)?,
    }
    Ok(ExitCode::SUCCESS)
}
