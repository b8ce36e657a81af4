//! The labs of this machine as the command line sees them: their files, their lock,
//! the shares of labs across machines, what a dead one left behind, and the doors into
//! their nodes ([`vemu_machine::door`]). With the API ([`crate::client`]) this is the command
//! line's only road to a lab: it does not use `vemu-host` itself.

use anyhow::Result;

pub use vemu_host::images::{
    in_use as images_in_use, prune_unused as prune_images, remove_image, stored as stored_images,
    Image,
};
pub use vemu_host::{LabLock, LabPaths};
pub use vemu_machine::door::HereDoor;

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

/// Whether every image the nodes of `plan` name can be had here, as the plan's policy
/// allows: each copied, its layers checked against their digests and unpacked into the
/// machine's store (once: the lab's `up` finds them there). One message per image that
/// cannot, naming its first node and the reference as written.
pub fn check_images(plan: &vemu_scenario::Plan) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    plan.nodes
        .iter()
        .filter_map(|n| n.image.as_deref().map(|r| (n, r)))
        .filter(|(_, r)| seen.insert(*r))
        .filter_map(|(n, r)| {
            vemu_host::images::prepare_image(r, &plan.images)
                .err()
                .map(|e| format!("node {}: image {}: {e:#}", n.name, display_reference(r)))
        })
        .collect()
}

pub use vemu_host::images::display_reference;

/// The process a lab belongs to (`vemu up --owner PID`), told apart from a later process
/// that reuses its PID by its start time (clock ticks after boot, `/proc/PID/stat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub pid: u32,
    pub started_ticks: u64,
}

impl Owner {
    const FILE: &'static str = "owner";

    /// Process `pid` as it is now; `None` if there is none (or only its zombie: it
    /// has ended, its parent has not yet collected its status).
    pub fn of(pid: u32) -> Option<Owner> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (state, started_ticks) = state_and_start(&stat)?;
        (state != "Z" && state != "X").then_some(Owner { pid, started_ticks })
    }

    /// Whether the process still runs (the same one: not a new one with its PID).
    pub fn alive(&self) -> bool {
        Owner::of(self.pid) == Some(*self)
    }

    /// Record it in a lab's directory.
    pub fn write(&self, lab_dir: &std::path::Path) -> Result<()> {
        use anyhow::Context;
        let path = lab_dir.join(Self::FILE);
        std::fs::write(&path, format!("{} {}\n", self.pid, self.started_ticks))
            .with_context(|| format!("writing {}", path.display()))
    }

    /// The owner recorded in a lab's directory, if any.
    pub fn read(lab_dir: &std::path::Path) -> Option<Owner> {
        let text = std::fs::read_to_string(lab_dir.join(Self::FILE)).ok()?;
        let mut words = text.split_whitespace();
        Some(Owner { pid: words.next()?.parse().ok()?, started_ticks: words.next()?.parse().ok()? })
    }
}

/// Fields 3 and 22 of a `/proc/PID/stat` line (the process's state and start time):
/// counted after the command name's closing parenthesis, as the name may hold spaces and
/// parentheses.
fn state_and_start(stat: &str) -> Option<(&str, u64)> {
    let mut after = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = after.next()?;
    Some((state, after.nth(18)?.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owners_start_time_is_read_past_a_name_with_spaces_and_parentheses() {
        let stat = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 12345 67 18446744073709551615";
        assert_eq!(state_and_start(stat), Some(("S", 987654)));
        assert_eq!(state_and_start("garbage"), None);
        let me = Owner::of(std::process::id()).unwrap();
        assert!(me.alive());
        assert!(!Owner { started_ticks: me.started_ticks + 1, ..me }.alive());
        let dir = std::env::temp_dir().join(format!("vemu-owner-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        me.write(&dir).unwrap();
        assert_eq!(Owner::read(&dir), Some(me));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
