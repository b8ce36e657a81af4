//! `vemu save`: every router's running configuration, as its kind saves it
//! (`vemu_scenario::kinds`), written to DIR/NODE/FILE.

use super::*;

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
        let body = json!({"cmd": ["sh", "-c", format!("{make} && cat {file}")], "timeout_s": 30});
        let path = format!("/v1/nodes/{}/exec", percent_encode(&n.name));
        let out = c.post(&path, &body).with_context(|| format!("saving node {}", n.name))?;
        if out["exit"].as_i64() != Some(0) || out["truncated"].as_bool() == Some(true) {
            bail!(
                "node {} ({}): could not save its configuration: {}",
                n.name,
                kind.name(),
                out["stderr"].as_str().unwrap_or_default().trim()
            );
        }
        let name = std::path::Path::new(file).file_name().unwrap_or_default();
        let to = dir.join(&n.name).join(name);
        std::fs::create_dir_all(to.parent().unwrap_or(&dir))
            .with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(&to, out["stdout"].as_str().unwrap_or_default())
            .with_context(|| format!("writing {}", to.display()))?;
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
