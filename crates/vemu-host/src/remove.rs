//! The labs present on this machine, and removing one (also after a crash).

use super::*;

/// Names of the labs (and the shares of labs, see [`share_name`]) that have anything in
/// the kernel or in the state directory.
pub fn labs_present() -> Vec<String> {
    let mut labs: Vec<String> = Vec::new();
    if let Ok(d) = fs::read_dir(NETNS_DIR) {
        for e in d.flatten() {
            if let Some(rest) = e.file_name().to_str().and_then(|n| n.strip_prefix(NETNS_PREFIX)) {
                if let Some((lab, _)) = rest.split_once('.') {
                    labs.push(lab.to_string());
                }
            }
        }
    }
    if let Ok(d) = fs::read_dir(STATE_DIR) {
        labs.extend(
            d.flatten()
                .filter(|e| e.path().is_dir())
                .filter_map(|e| e.file_name().to_str().map(String::from)),
        );
    }
    labs.sort();
    labs.dedup();
    labs
}

/// Network namespaces of a lab, by what is in /run/netns.
pub fn lab_netns(lab: &str) -> Vec<PathBuf> {
    let prefix = LabPaths::new(lab).netns_name("");
    let Ok(d) = fs::read_dir(NETNS_DIR) else { return Vec::new() };
    d.flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with(&prefix)))
        .map(|e| e.path())
        .collect()
}

/// Remove everything a lab left: its processes, namespaces and state directory. The
/// TAP devices go with the namespaces (and with the engine that holds them).
pub fn remove_lab(lab: &str) -> Result<()> {
    let paths = LabPaths::new(lab);
    let links = lab_netns(lab);
    let mut pins: Vec<PathBuf> = links.clone();
    if let Ok(d) = fs::read_dir(paths.dir.join("netns")) {
        pins.extend(d.flatten().map(|e| e.path()));
    }
    kill_processes(&pins, Duration::from_millis(500), false);
    let mut errors = Vec::new();
    if let Err(e) = remove_host_ifaces(&paths) {
        errors.push(format!("{e:#}"));
    }
    if let Err(e) = divert::remove(&paths, &host_netns_pin(&paths)) {
        errors.push(format!("{e:#}"));
    }
    if let Err(e) = mgmt_nat::remove(&paths, &host_netns_pin(&paths)) {
        errors.push(format!("{e:#}"));
    }
    if let Err(e) = cgroup::remove_lab(lab) {
        errors.push(format!("{e:#}"));
    }
    for l in &links {
        if let Err(e) = fs::remove_file(l) {
            if e.kind() != std::io::ErrorKind::NotFound {
                errors.push(format!("removing {}: {e}", l.display()));
            }
        }
    }
    forget_template(&paths);
    if paths.dir.exists() {
        // One lazy unmount takes the lab's tmpfs and every namespace pinned on it.
        let _ = umount2(&paths.dir, MntFlags::MNT_DETACH);
        if let Err(e) = fs::remove_dir_all(&paths.dir) {
            errors.push(format!("removing {}: {e}", paths.dir.display()));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        bail!(errors.join("; "))
    }
}
