//! Entering a network namespace, for a thread of its own.

use std::fs;
use std::path::Path;

use anyhow::{anyhow, Context, Result};
use nix::sched::CloneFlags;

/// Run `f` on a thread of its own inside the network namespace pinned at `netns`
/// (entering a namespace is per thread; the caller's thread does not move). What `f`
/// opens there (sockets, TAP devices) stays there.
pub fn in_netns<T: Send>(netns: &Path, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    let ns = fs::File::open(netns).with_context(|| format!("opening {}", netns.display()))?;
    std::thread::scope(|s| {
        s.spawn(|| {
            nix::sched::setns(&ns, CloneFlags::CLONE_NEWNET)
                .with_context(|| format!("entering {}", netns.display()))?;
            f()
        })
        .join()
        .map_err(|_| anyhow!("the thread entering {} panicked", netns.display()))?
    })
}
