//! `vemu exec` and `vemu shell`: a command or a terminal in a node — entered directly
//! when the node is on this machine, through the lab's API when it is on another.

use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

use anyhow::{Context, Result};
use serde_json::json;
use vemu_control::labs::{HereDoor, LabPaths};
use vemu_control::percent_encode;

use crate::lab::{connect, load_plan, need_root, resolve_lab, user};

pub(crate) fn exec(lab: Option<String>, node: &str, argv: &[String]) -> Result<ExitCode> {
    let paths = match node_lab(lab, node)? {
        (_, NodeAt::Here(paths)) => paths,
        // A node of a lab across machines that is not on this one: through the controller.
        (lab, NodeAt::Remote) => return exec_through_api(&lab, node, argv),
    };
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    // The signals to forward are held back from before the command starts until they
    // can be forwarded (one sent meanwhile is not lost, nor kills vemu exec alone); the
    // command starts with them unblocked, and with SIGINT and SIGQUIT at their default
    // (a shell without job control starts background commands ignoring both: a command
    // in a node is a fresh start, and reaches it).
    let held = hold_signals();
    // SAFETY: sigprocmask and signal are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            libc::sigprocmask(libc::SIG_UNBLOCK, &held, std::ptr::null_mut());
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGQUIT, libc::SIG_DFL);
            Ok(())
        });
    }
    let spawned =
        HereDoor::new(paths, node).open().map(|door| door.spawn(&mut cmd, Command::spawn));
    let spawned = match spawned {
        Ok(s) => s,
        Err(e) => {
            release_signals(&held);
            return Err(e);
        }
    };
    let status = match spawned.and_then(|mut c| {
        forward_signals(c.id());
        release_signals(&held);
        c.wait()
    }) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("vemu: cannot run '{}' in node '{node}': command not found", argv[0]);
            return Ok(ExitCode::from(127));
        }
        Err(e) => return Err(e).with_context(|| format!("running '{}' in node '{node}'", argv[0])),
    };
    let code = vemu_machine::exit_code(status);
    Ok(ExitCode::from(code as u8))
}

/// The signals [`forward_signals`] forwards.
const FORWARDED: [libc::c_int; 6] =
    [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGUSR1, libc::SIGUSR2];

/// Block the forwarded signals (in this thread and the threads it starts); returns the set.
fn hold_signals() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data, filled by sigemptyset/sigaddset.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in FORWARDED {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

fn release_signals(set: &libc::sigset_t) {
    // SAFETY: a set made by hold_signals.
    unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, set, std::ptr::null_mut()) };
}

/// The command `vemu exec` runs, for [`forward`].
static CHILD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Signals sent to `vemu exec` (by `kill`, or a program that started it, as a Mininet
/// script's `popen().send_signal()`) go on to the command it runs in the node, as
/// they would reach a command started directly. A terminal's own signals (Ctrl-C)
/// reach the command already, being in the terminal's foreground group: not sent twice.
fn forward_signals(child: u32) {
    CHILD.store(child as i32, std::sync::atomic::Ordering::Relaxed);
    for sig in FORWARDED {
        // SAFETY: `forward` only calls kill(2), which is async-signal-safe.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = forward as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

extern "C" fn forward(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let from_terminal = unsafe { (*info).si_code } == libc::SI_KERNEL;
    let child = CHILD.load(std::sync::atomic::Ordering::Relaxed);
    if child > 0 && !from_terminal {
        // SAFETY: kill(2) with a PID we started.
        unsafe { libc::kill(child, sig) };
    }
}

/// Where a node is, seen from this machine.
pub(crate) enum NodeAt {
    /// In a namespace here: of the lab's own, or of this machine's share of a lab
    /// across machines.
    Here(LabPaths),
    /// On another machine of a lab across machines: commands go through the controller.
    Remote,
}

/// This machine's share of lab `lab` (of a lab across machines), if it holds one.
pub(crate) fn share_here(lab: &str) -> Option<LabPaths> {
    vemu_control::list_shares()
        .into_iter()
        .find(|(n, _)| vemu_control::labs::share_of(n).is_some_and(|(l, _)| l == lab))
        .map(|(n, _)| LabPaths::new(&n))
}

/// The lab of `node`, and where the node is.
pub(crate) fn node_lab(lab: Option<String>, node: &str) -> Result<(String, NodeAt)> {
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
    let n = &plan.nodes[i];
    if let Some(why) = n.kind.not_entered(node, n.ifaces.first().map_or("?", |i| i.name.as_str())) {
        return Err(user(why));
    }
    let paths = LabPaths::new(&lab);
    if plan.machines.is_empty() || paths.netns(node).exists() {
        return Ok((lab, NodeAt::Here(paths)));
    }
    if let Some(s) = share.filter(|s| s.netns(node).exists()) {
        return Ok((lab, NodeAt::Here(s)));
    }
    if !paths.socket().exists() {
        let m =
            plan.machines.get(plan.nodes[i].machine).map_or("another machine", |m| m.name.as_str());
        return Err(user(format!("node '{node}' runs on machine '{m}' and lab '{lab}' has no controller here: use the controller's machine or '{m}'")));
    }
    Ok((lab, NodeAt::Remote))
}

/// `vemu shell` on a node of another machine: a terminal on that machine, through the
/// controller's WebSocket (this terminal in raw mode meanwhile).
pub(crate) fn shell_through_api(lab: &str, node: &str) -> Result<ExitCode> {
    use std::io::IsTerminal;
    let c = connect(lab)?;
    let (rows, cols) = vemu_control::terminal_size().unwrap_or((24, 80));
    // Raw mode while the session lasts (keys go to the node's terminal as typed).
    let saved = std::io::stdin()
        .is_terminal()
        .then(|| {
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
        })
        .flatten();
    let r =
        c.terminal(&format!("/v1/nodes/{}/shell?rows={rows}&cols={cols}", percent_encode(node)));
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
pub(crate) fn exec_through_api(lab: &str, node: &str, argv: &[String]) -> Result<ExitCode> {
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
    c.stream(
        "POST",
        &format!("/v1/nodes/{}/exec", percent_encode(node)),
        Some(&body),
        ctrl_c,
        |d| {
            line.extend_from_slice(d);
            while let Some(end) = line.iter().position(|&b| b == b'\n') {
                let l: Vec<u8> = line.drain(..=end).collect();
                let v: serde_json::Value = serde_json::from_slice(&l)
                    .context("the controller's answer is not JSON lines")?;
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
        },
    )?;
    // No exit status: interrupted, or the connection ended early.
    Ok(ExitCode::from(code.map_or(130, |c| c.clamp(0, 255)) as u8))
}

/// `vemu shell`: an interactive shell in a node (through the API for a node on another
/// machine).
pub(crate) fn shell(lab: Option<String>, node: &str) -> Result<ExitCode> {
    if let (lab, NodeAt::Remote) = node_lab(lab.clone(), node)? {
        return shell_through_api(&lab, node);
    }
    let shell =
        std::env::var("SHELL").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "/bin/bash".into());
    std::env::set_var("PS1", format!("[{node}] \\w# "));
    exec(lab, node, &vemu_machine::door::shell_argv(&shell))
}
