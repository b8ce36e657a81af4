//! `vemu clean`: what labs left behind (also after a crash): on this machine, and on
//! the agents of a dead lab across machines (they take their shares down).

use anyhow::{bail, Result};
use serde_json::json;
use vemu_control::labs::LabPaths;
use vemu_control::Client;

use crate::lab::{load_plan, need_root};

pub(crate) fn clean(all: bool) -> Result<()> {
    need_root()?;
    let (running, stale) = vemu_control::list_labs();
    for lab in &running {
        // A lab whose owner (`vemu up --owner`) has ended is left behind too.
        let orphan = vemu_control::labs::Owner::read(&LabPaths::new(lab).dir)
            .filter(|o| !o.alive())
            .map(|o| o.pid);
        if all || orphan.is_some() {
            if let Some(pid) = orphan {
                eprintln!("lab '{lab}' belonged to process {pid}, which has ended");
            }
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
        if let Some(pid) = std::fs::read_to_string(paths.pid_file())
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
        {
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
        let lab = vemu_control::labs::share_of(&name).map_or(name.as_str(), |(l, _)| l);
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

/// Remove what lab (or share) `name` left behind and free its name (never one a live
/// process holds); `what` names it for people. False if something stayed.
pub(crate) fn remove_left_behind(name: &str, what: &str) -> bool {
    match vemu_control::labs::remove_left_behind(name) {
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
