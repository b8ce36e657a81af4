//! Files the command line writes where a user said (`vemu save -o DIR`, `vemu test
//! --junit FILE`), never through a symbolic link: in a shared directory (`/tmp`) another
//! user could have planted one to make vemu, running as root, overwrite a file of their
//! choosing. Each file is written beside its final name (a new file, made exclusively)
//! and renamed over it within a directory opened without following links; a link where
//! the file or one of the directories vemu makes would be is refused, naming it.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path};

use anyhow::{anyhow, bail, Context, Result};

/// Open directory `dir` (made, with any missing parent, if it does not exist) without
/// following a link at its own name.
fn open_dir(dir: &Path) -> Result<OwnedFd> {
    if let Ok(m) = std::fs::symlink_metadata(dir) {
        if m.file_type().is_symlink() {
            bail!("{} is a symbolic link: vemu writes into no link (name the directory it points to, if that is what you mean)", dir.display());
        }
    } else {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let fd = libc_open(dir)?;
    Ok(fd)
}

fn libc_open(dir: &Path) -> Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir)
        .with_context(|| format!("opening {}", dir.display()))?;
    Ok(f.into())
}

/// In directory `at`, the subdirectory `name` (made if missing), opened without
/// following a link.
fn sub_dir(at: &OwnedFd, name: &std::ffi::OsStr, shown: &Path) -> Result<OwnedFd> {
    use nix::fcntl::{openat, OFlag};
    use nix::sys::stat::{mkdirat, Mode};
    match mkdirat(at.as_fd(), name, Mode::from_bits_truncate(0o755)) {
        Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
        Err(e) => return Err(e).with_context(|| format!("creating {}", shown.display())),
    }
    let flags = OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_RDONLY;
    openat(at.as_fd(), name, flags, Mode::empty()).map_err(|e| match e {
        nix::errno::Errno::ELOOP | nix::errno::Errno::ENOTDIR => {
            anyhow!(
                "{} is a symbolic link or not a directory: vemu writes into no link",
                shown.display()
            )
        }
        e => anyhow!("opening {}: {e}", shown.display()),
    })
}

/// Write `bytes` to `base/rel` (`rel`: relative, plain names): `base` and every directory
/// under it made if missing, none of them (nor the file) a link.
pub(crate) fn write_under(base: &Path, rel: &Path, bytes: &[u8]) -> Result<()> {
    let mut dir = open_dir(base)?;
    let mut shown = base.to_path_buf();
    let parts: Vec<&std::ffi::OsStr> = rel
        .components()
        .map(|c| match c {
            Component::Normal(n) => Ok(n),
            _ => Err(anyhow!("{}: not a plain relative path", rel.display())),
        })
        .collect::<Result<_>>()?;
    let Some((file, dirs)) = parts.split_last() else { bail!("no file name in {}", rel.display()) };
    for d in dirs {
        shown.push(d);
        dir = sub_dir(&dir, d, &shown)?;
    }
    shown.push(file);
    write_in(&dir, file, bytes, &shown)
}

/// Write `bytes` to file `path` (its directory must exist; it may be a link a user made
/// — the file itself may not be one).
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path.file_name().ok_or_else(|| anyhow!("{}: no file name", path.display()))?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = libc_open_following(parent)?;
    write_in(&dir, name, bytes, path)
}

fn libc_open_following(dir: &Path) -> Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)
        .with_context(|| format!("opening {}", dir.display()))?;
    Ok(f.into())
}

/// In directory `dir`: refuse a link at `name`, write a new file beside it, rename it
/// over `name`.
fn write_in(dir: &OwnedFd, name: &std::ffi::OsStr, bytes: &[u8], shown: &Path) -> Result<()> {
    use nix::fcntl::{openat, renameat, AtFlags, OFlag};
    use nix::sys::stat::{fstatat, Mode, SFlag};
    match fstatat(dir.as_fd(), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK => {
            bail!(
                "{} is a symbolic link: vemu does not write through it (remove it first)",
                shown.display()
            )
        }
        _ => {}
    }
    let mut tmp = name.to_os_string();
    tmp.push(format!(".vemu-{}.tmp", std::process::id()));
    let flags =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = openat(dir.as_fd(), tmp.as_os_str(), flags, Mode::from_bits_truncate(0o644))
        .with_context(|| format!("creating a file beside {}", shown.display()))?;
    let mut f = File::from(fd);
    let written = f.write_all(bytes).and_then(|()| f.sync_all());
    let renamed = written
        .map_err(anyhow::Error::from)
        .and_then(|()| Ok(renameat(dir.as_fd(), tmp.as_os_str(), dir.as_fd(), name)?));
    if let Err(e) = renamed {
        let _ = nix::unistd::unlinkat(
            dir.as_fd(),
            tmp.as_os_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
        return Err(e).with_context(|| format!("writing {}", shown.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("vemu-output-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_planted_link_is_refused_and_its_target_untouched() {
        let d = scratch("link");
        let target = d.join("victim");
        std::fs::write(&target, "mine").unwrap();
        let out = d.join("saved");
        std::fs::create_dir_all(out.join("r1")).unwrap();
        std::os::unix::fs::symlink(&target, out.join("r1/bird.conf")).unwrap();
        let e = write_under(&out, Path::new("r1/bird.conf"), b"evil").unwrap_err();
        assert!(format!("{e:#}").contains("is a symbolic link"), "{e:#}");
        // A linked directory on the way.
        std::os::unix::fs::symlink(&d, out.join("r2")).unwrap();
        let e = write_under(&out, Path::new("r2/victim"), b"evil").unwrap_err();
        assert!(format!("{e:#}").contains("symbolic link"), "{e:#}");
        // The output directory itself a link.
        std::os::unix::fs::symlink(&d, d.join("out-link")).unwrap();
        assert!(write_under(&d.join("out-link"), Path::new("victim"), b"evil").is_err());
        // A JUnit file that is a link.
        std::os::unix::fs::symlink(&target, d.join("junit.xml")).unwrap();
        assert!(write_file(&d.join("junit.xml"), b"evil").is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "mine");
        // Plain files are written, and written again.
        write_under(&out, Path::new("r3/frr.conf"), b"one").unwrap();
        write_under(&out, Path::new("r3/frr.conf"), b"two").unwrap();
        assert_eq!(std::fs::read_to_string(out.join("r3/frr.conf")).unwrap(), "two");
        write_file(&d.join("report.xml"), b"<x/>").unwrap();
        assert_eq!(std::fs::read_dir(out.join("r3")).unwrap().count(), 1, "a temporary file stays");
        let _ = std::fs::remove_dir_all(&d);
    }
}
