//! The labs of this machine as the command line sees them: their files, their lock,
//! the shares of labs across machines, what a dead one left behind, and the doors into
//! their nodes ([`crate::door`]). With the API ([`crate::client`]) this is the command
//! line's only road to a lab: it does not use `vemu-host` itself.

use anyhow::Result;

pub use crate::door::HereDoor;
pub use vemu_host::images::{
    in_use as images_in_use, prune_unused as prune_images, remove_image, stored as stored_images,
    Image,
};
pub use vemu_host::{LabLock, LabPaths};

/// The lab and machine of a share's name (`lab@machine`), or `None` for a lab's own.
pub fn share_of(name: &str) -> Option<(&str, &str)> {
    vemu_host::share_of(name)
}

/// Remove what lab (or share) `name` left behind on this machine (namespaces, devices,
/// cgroups, mounts, files) and free its name — unless a live process holds it.
pub fn remove_left_behind(name: &str) -> Result<()> {
    let removed = vemu_host::remove_lab(name);
    if let Ok(Some(lock)) = LabLock::try_acquire(name) {
        lock.release();
    }
    removed
}

/// Make sure this process may open the descriptors a lab of `plan` needs here (raising
/// its soft limit when it can; children inherit it), or say why not.
pub fn ensure_open_files(plan: &vemu_scenario::Plan, fast_path: bool) -> Result<()> {
    vemu_host::ensure_open_files(vemu_host::files_needed(plan, fast_path))
}

/// Keep this process (a lab's controller) clear of the OOM killer: the nodes'
/// programs go first.
pub fn avoid_oom_killer() {
    vemu_host::avoid_oom_killer()
}

/// Whether every image the nodes of `plan` name can be read here (a registry's:
/// reached), without copying any: one message per image that cannot, naming its first
/// node and the reference as written.
pub fn check_images(plan: &vemu_scenario::Plan) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    plan.nodes
        .iter()
        .filter_map(|n| n.image.as_deref().map(|r| (n, r)))
        .filter(|(_, r)| seen.insert(*r))
        .filter_map(|(n, r)| {
            vemu_host::images::check_reference(r)
                .err()
                .map(|e| format!("node {}: image {}: {e:#}", n.name, display_reference(r)))
        })
        .collect()
}

/// An image reference as the user wrote it (without the `path:` vemu puts before a
/// path).
pub fn display_reference(reference: &str) -> &str {
    reference.strip_prefix("path:").unwrap_or(reference)
}
