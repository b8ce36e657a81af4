//! `vemu attach`: a new controller for a lab across machines whose controller died, from
//! this machine's copy of its state or another machine's agent's.

use anyhow::{Context, Result};
use vemu_control::daemon::ApiOptions;
use vemu_control::labs::LabPaths;

use crate::lab::{load_plan, need_root, user};
use crate::up::start_controller;

/// `vemu attach`: take over a lab whose controller died, from this machine's copy of its
/// state or (`from`) another machine's agent.
pub(crate) fn attach(
    api: Option<std::net::SocketAddr>,
    from: Option<String>,
    lab: Option<String>,
) -> Result<()> {
    need_root()?;
    if let Some(from) = from {
        let lab = lab.ok_or_else(|| user("--from needs --lab: the lab to take over"))?;
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
        return r;
    }
    let lab = match lab {
        Some(l) => {
            vemu_scenario::valid_lab_name(&l).map_err(user)?;
            l
        }
        None => match vemu_control::list_labs().1.as_slice() {
            [one] => one.clone(),
            [] => return Err(user("no lab has lost its controller ('vemu ls' lists the labs)")),
            many => {
                return Err(user(format!(
                    "{} labs have no controller ({}); say which with --lab",
                    many.len(),
                    many.join(", ")
                )))
            }
        },
    };
    let plan = load_plan(&lab).map_err(|_| {
        user(format!(
            "lab '{lab}' has no plan on this machine (it was started elsewhere, or cleaned)"
        ))
    })?;
    if plan.machines.is_empty() {
        return Err(user(format!("lab '{lab}' runs on this machine alone: its controller was also its data plane, so there is nothing left to take over ('vemu clean' removes it)")));
    }
    start_controller(plan, ApiOptions { tcp: api }, true)?;
    Ok(())
}

/// Make lab `lab`'s directory here from what its agent at `from` (ADDRESS[:PORT]) holds:
/// the plan and the state its dead controller handed on (for `vemu attach --from`).
pub(crate) fn fetch_lab(lab: &str, from: &str) -> Result<()> {
    let address =
        vemu_scenario::Machine::parse_address(from).map_err(|e| user(format!("--from: {e}")))?;
    let paths = LabPaths::new(lab);
    if paths.socket().exists() && std::os::unix::net::UnixStream::connect(paths.socket()).is_ok() {
        return Err(user(format!("lab '{lab}' is already served here")));
    }
    let (plan, saved) = vemu_control::cluster::fetch_state(address, lab)
        .map_err(|e| user(format!("taking lab '{lab}' from {from}: {e:#}")))?;
    let saved = saved.ok_or_else(|| user(format!("the agent at {from} has no state of lab '{lab}' from its controller (the controller died before it handed one on)")))?;
    if plan["name"].as_str() != Some(lab) {
        return Err(user(format!("the agent at {from} answered with a plan of another lab")));
    }
    std::fs::create_dir_all(&paths.dir)
        .with_context(|| format!("creating {}", paths.dir.display()))?;
    vemu_control::write_private(&paths.plan(), &serde_json::to_vec(&plan)?)?;
    vemu_control::write_private(
        &vemu_control::lab::saved::Saved::path_in(&paths),
        &serde_json::to_vec(&saved)?,
    )?;
    Ok(())
}
