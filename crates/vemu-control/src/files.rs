//! Files the controller and the agents write: what only root may read.

use std::io::Write;

use anyhow::{Context, Result};

/// Write a file only root may read, created so (never readable by others, not even for
/// an instant), replacing any earlier one.
pub fn write_private(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    f.write_all(bytes)?;
    Ok(())
}
