//! What the command line does with router kinds (`vemu_scenario::kinds`): wait for
//! their software after `up`, `vemu save` every router's running configuration to
//! DIR/NODE/FILE, `vemu inventory`.

use anyhow::{bail, Context, Result};
use vemu_scenario::Plan;

use crate::lab::{ask_nodes, connect, exec_in, load_plan, resolve_lab, user};

/// A node of a router kind.
pub(crate) type Router = (String, &'static dyn vemu_scenario::kinds::Kind);

/// The lab's routers.
pub(crate) fn routers(plan: &Plan) -> Vec<Router> {
    let kind = |n: &vemu_scenario::NodePlan| vemu_scenario::kinds::kind(n.router.as_deref()?);
    plan.nodes.iter().filter_map(|n| Some((n.name.clone(), kind(n)?))).collect()
}

/// How long `vemu up` waits for a lab's routers to answer: a minute, and 0.1 s more per
/// router past 600 (a thousand BIRDs converging BGP on two cores answered after 45 s).
fn routers_ready_s(routers: usize) -> u64 {
    60 + routers.saturating_sub(600) as u64 / 10
}

/// After `vemu up`: wait until every router of the lab answers its kind's readiness
/// command (`vtysh`, `birdc`) — so that what the user types next finds them — for up
/// to [`routers_ready_s`]; name those that never did.
pub(crate) fn wait_routers_ready(lab: &str, mut waiting: Vec<Router>) -> Result<()> {
    if waiting.is_empty() {
        return Ok(());
    }
    let total = waiting.len();
    let limit_s = routers_ready_s(total);
    let t0 = std::time::Instant::now();
    while !waiting.is_empty() {
        let answers = ask_nodes(lab, &waiting, |c, (node, kind)| {
            exec_in(c, node, &["sh", "-c", kind.ready()], 5)
                .with_context(|| format!("asking node {node}"))
        })?;
        let mut still = Vec::new();
        for (router, out) in waiting.into_iter().zip(answers) {
            if out?["exit"].as_i64() != Some(0) {
                still.push(router);
            }
        }
        waiting = still;
        if !waiting.is_empty() && t0.elapsed().as_secs() >= limit_s {
            let names: Vec<String> =
                waiting.iter().map(|(n, k)| format!("{n} ({}: {})", k.name(), k.ready())).collect();
            bail!(
                "lab '{lab}' is up, but {} of its {total} routers did not answer within {limit_s} s: {} — their logs are in /var/log/vemu/{lab}; the lab keeps running",
                waiting.len(),
                names.join(", ")
            );
        }
        if !waiting.is_empty() {
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
    eprintln!(
        "lab '{lab}': its {total} routers answer ({:.1} s after up)",
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

pub(crate) fn save(lab: Option<String>, output: Option<std::path::PathBuf>) -> Result<()> {
    let lab = resolve_lab(lab)?;
    let plan = load_plan(&lab)?;
    let c = connect(&lab)?;
    let dir = output.unwrap_or_else(|| format!("saved-{lab}").into());
    let mut saved = 0;
    for n in &plan.nodes {
        let Some(kind) = n.router.as_deref().and_then(vemu_scenario::kinds::kind) else {
            continue;
        };
        let (make, file) = kind.save();
        let out = exec_in(&c, &n.name, &["sh", "-c", &format!("{make} && cat {file}")], 30)
            .with_context(|| format!("saving node {}", n.name))?;
        if out["exit"].as_i64() != Some(0) || out["truncated"].as_bool() == Some(true) {
            bail!(
                "node {} ({}): could not save its configuration: {}",
                n.name,
                kind.name(),
                out["stderr"].as_str().unwrap_or_default().trim()
            );
        }
        let name = std::path::Path::new(file).file_name().unwrap_or_default();
        let rel = std::path::Path::new(&n.name).join(name);
        let to = dir.join(&rel);
        crate::output::write_under(
            &dir,
            &rel,
            out["stdout"].as_str().unwrap_or_default().as_bytes(),
        )?;
        println!("{}: {}", n.name, to.display());
        saved += 1;
    }
    if saved == 0 {
        return Err(user(format!(
            "lab '{lab}' has no node of a kind whose configuration vemu saves ({})",
            vemu_scenario::kinds::KINDS.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
        )));
    }
    Ok(())
}

/// `vemu inventory`: an Ansible inventory (YAML) of the lab's nodes on the management
/// network, grouped by kind (`linux`, `frr`, `bird`).
pub(crate) fn inventory(lab: Option<String>) -> Result<()> {
    let lab = resolve_lab(lab)?;
    let plan = load_plan(&lab)?;
    if plan.mgmt.is_none() {
        return Err(user(format!("lab '{lab}' has no management network (mgmt: in the scenario)")));
    }
    let mut groups: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
    for n in plan.nodes.iter().filter(|n| !n.mgmt.is_empty()) {
        let addr = n.mgmt[0].addr();
        let kind = n.router.as_deref().unwrap_or("linux");
        groups.entry(kind).or_default().push(format!(
            "        {}:\n          ansible_host: {addr}\n          vemu_kind: {kind}\n",
            n.name
        ));
    }
    let mut out = format!("# The nodes of lab '{lab}' on its management network (vemu inventory).\nall:\n  vars:\n    ansible_connection: ssh\n  children:\n");
    for (kind, hosts) in groups {
        out += &format!("    {kind}:\n      hosts:\n");
        out += &hosts.concat();
    }
    print!("{out}");
    Ok(())
}
