//! A root of its own for a tenant's node that names no image (issue 61): the machine's
//! programs and libraries, read-only, and what an unprivileged user of the machine may
//! read of its `/etc` — nothing of `/root`, `/home`, the machine's other top-level
//! directories or what `/var` holds (its directories only, empty), no key, no shadow
//! file. Made once a lab ([`lab_lowers`]: `/etc` and `/var` copied into the lab's
//! storage), each node then writing its own overlay of them; the node's mount namespace
//! pivots into it ([`enter`]) as an image node's does.

use super::*;

/// Where a lab keeps the lower layers of its tenants' roots (in its storage).
fn lowers_dir(paths: &LabPaths) -> PathBuf {
    paths.dir.join("tenant-root")
}

/// Largest file of the machine's `/etc` copied (larger ones are left out).
const MAX_ETC_FILE_BYTES: u64 = 1 << 20;
/// How deep `/var`'s directories are copied.
const VAR_DEPTH: usize = 3;

/// The lab's lower layers (made by the first node that needs them, under a lock):
/// `etc/` and `var/`.
pub(crate) fn lab_lowers(paths: &LabPaths) -> Result<PathBuf> {
    let dir = lowers_dir(paths);
    let done = dir.join(".done");
    if done.exists() {
        return Ok(dir);
    }
    let _lock = lock::lock_file(&paths.dir.join("tenant-root.lock"))?;
    if done.exists() {
        return Ok(dir);
    }
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)?;
    let hidden = confine::hidden_paths();
    copy_etc(Path::new("/etc"), &dir.join("etc"), &hidden).context("copying the machine's /etc")?;
    copy_dirs(Path::new("/var"), &dir.join("var"), VAR_DEPTH, &hidden)
        .context("copying /var's directories")?;
    fs::write(&done, "")?;
    Ok(dir)
}

/// Whether any user of the machine may read a file of mode `mode` (its owner's and
/// group's rights aside).
fn world_readable(mode: u32) -> bool {
    mode & 0o004 != 0
}

fn same_owner(from: &fs::Metadata, to: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(to, fs::Permissions::from_mode(from.mode() & 0o7777))?;
    nix::unistd::fchownat(
        nix::fcntl::AT_FDCWD,
        to,
        Some(from.uid().into()),
        Some(from.gid().into()),
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    )?;
    Ok(())
}

/// Copy `/etc` (`from`) to `to`: directories (all, their contents only when anyone may
/// list them), links as they are, regular files anyone may read (up to
/// [`MAX_ETC_FILE_BYTES`]); `passwd` and `group` with any password hash replaced by
/// `x`; what `hidden` names left out.
fn copy_etc(from: &Path, to: &Path, hidden: &[PathBuf]) -> Result<()> {
    let meta = fs::symlink_metadata(from)?;
    fs::create_dir_all(to)?;
    same_owner(&meta, to)?;
    if !world_readable(meta.mode()) || meta.mode() & 0o001 == 0 {
        return Ok(());
    }
    for e in fs::read_dir(from)? {
        let e = e?;
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if hidden.iter().any(|h| h == &src) {
            continue;
        }
        let m = fs::symlink_metadata(&src)?;
        let t = m.file_type();
        if t.is_dir() {
            copy_etc(&src, &dst, hidden)?;
        } else if t.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&src)?, &dst)?;
            same_owner(&m, &dst).ok();
        } else if t.is_file() && world_readable(m.mode()) && m.len() <= MAX_ETC_FILE_BYTES {
            let name = e.file_name();
            let text = fs::read(&src)?;
            let text = match name.to_str() {
                Some("passwd" | "group") if from == Path::new("/etc") => no_hashes(&text),
                _ => text,
            };
            fs::write(&dst, text)?;
            same_owner(&m, &dst)?;
        }
    }
    Ok(())
}

/// `passwd` or `group` lines with their second field (a password or its hash) `x`
/// unless it says there is none.
fn no_hashes(text: &[u8]) -> Vec<u8> {
    let s = String::from_utf8_lossy(text);
    let mut out = String::new();
    for line in s.lines() {
        let mut f: Vec<&str> = line.split(':').collect();
        if f.len() > 2 && !matches!(f[1], "x" | "*" | "!" | "" | "!!" | "!*") {
            f[1] = "x";
        }
        out += &f.join(":");
        out.push('\n');
    }
    out.into_bytes()
}

/// Copy the directories under `from` (`depth` levels, links as they are), no file.
fn copy_dirs(from: &Path, to: &Path, depth: usize, hidden: &[PathBuf]) -> Result<()> {
    let meta = fs::symlink_metadata(from)?;
    fs::create_dir_all(to)?;
    same_owner(&meta, to)?;
    if depth == 0 {
        return Ok(());
    }
    let Ok(rd) = fs::read_dir(from) else { return Ok(()) };
    for e in rd.flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if hidden.iter().any(|h| h == &src) {
            continue;
        }
        let Ok(m) = fs::symlink_metadata(&src) else { continue };
        if m.file_type().is_dir() {
            copy_dirs(&src, &dst, depth - 1, hidden)?;
        } else if m.file_type().is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&src)?, &dst)?;
        }
    }
    Ok(())
}

/// Top-level directories a tenant's root has, empty.
const EMPTY_TOP: &[&str] = &["root", "home", "mnt", "opt", "srv", "media", "tmp"];
/// Top-level directories of the machine's a tenant's root shows, read-only (where they
/// are directories, not links into `/usr`).
const LENT_TOP: &[&str] = &["usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"];

/// Make the calling thread's (new) mount namespace a tenant's node root at
/// `root/root` (`root`: the node's directory in the lab's storage): the machine's
/// `/usr` (and `/bin`, `/lib`… or the links to them) read-only, overlays of the lab's
/// `etc` and `var` lowers with the node's upper layers, the node's `/run`, the lab's
/// `/etc/hosts`, the machine's `/proc` and `/sys` (made the node's own as for other
/// nodes), and the vemu program at its own path (what the node's traffic agent runs);
/// then what [`confine::confine_image_root`] does, and the pivot into it.
pub(crate) fn enter(paths: &LabPaths, root: &Path) -> Result<()> {
    let lowers = lab_lowers(paths)?;
    let merged = root.join("root");
    fs::create_dir_all(&merged)?;
    // A mount of its own, to pivot into.
    mount(Some(&merged), &merged, None::<&str>, MsFlags::MS_BIND, None::<&str>)
        .context("making the node's root a mount")?;
    for e in fs::read_dir("/")?.flatten() {
        let name = e.file_name();
        let Some(n) = name.to_str() else { continue };
        let Ok(m) = fs::symlink_metadata(e.path()) else { continue };
        let at = merged.join(n);
        if m.file_type().is_symlink() && LENT_TOP.contains(&n) {
            if fs::symlink_metadata(&at).is_err() {
                std::os::unix::fs::symlink(fs::read_link(e.path())?, &at)?;
            }
        } else if m.is_dir() && LENT_TOP.contains(&n) {
            fs::create_dir_all(&at)?;
            mount(
                Some(&e.path()),
                &at,
                None::<&str>,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                None::<&str>,
            )
            .with_context(|| format!("lending /{n}"))?;
            confine::read_only_tree(&at)?;
        }
    }
    for d in EMPTY_TOP.iter().chain(&["etc", "var", "dev", "proc", "sys", "run"]) {
        fs::create_dir_all(merged.join(d))?;
    }
    let overlay = |lower: &Path, upper: &Path, work: &Path, at: &Path| -> Result<()> {
        fs::create_dir_all(upper)?;
        fs::create_dir_all(work)?;
        let opts = format!(
            "lowerdir={},upperdir={},workdir={}",
            lower.display(),
            upper.display(),
            work.display()
        );
        let flags = MsFlags::MS_NODEV | MsFlags::MS_NOSUID;
        mount(Some("vemu"), at, Some("overlay"), flags, Some(opts.as_str()))
            .with_context(|| format!("mounting the node's overlay on {}", at.display()))
    };
    overlay(
        &lowers.join("etc"),
        &root.join("upper/etc"),
        &root.join("work/etc"),
        &merged.join("etc"),
    )?;
    overlay(
        &lowers.join("var"),
        &root.join("upper/var"),
        &root.join("work-var"),
        &merged.join("var"),
    )?;
    hosts_and_run(&merged, &paths.hosts(), root)?;
    lend_proc_sys_dev(&merged)?;
    lend_vemu(&merged)?;
    confine::confine_image_root(&merged, root).context("confining the node's mounts")?;
    pivot_into(&merged)
}

/// The running vemu program at its own path in the root at `merged`, read-only (unless
/// `/usr` shows it already): the node's traffic agent is vemu, started by that path.
fn lend_vemu(merged: &Path) -> Result<()> {
    let exe = std::env::current_exe().context("finding the running executable")?;
    if exe.starts_with("/usr") || !exe.is_absolute() {
        return Ok(());
    }
    let at = merged.join(exe.strip_prefix("/").unwrap_or(&exe));
    if let Some(p) = at.parent() {
        fs::create_dir_all(p)?;
    }
    fs::write(&at, "")?;
    mount(Some(&exe), &at, None::<&str>, MsFlags::MS_BIND, None::<&str>)
        .context("lending the vemu program")?;
    confine::read_only_tree(&at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_hashes_are_taken_out_of_passwd_and_group() {
        let text = b"root:$6$salt$hash:0:0:root:/root:/bin/bash\nfrr:x:100:101::/nonexistent:/usr/sbin/nologin\nnobody:*:65534:65534::/:/bin/false\n";
        assert_eq!(
            String::from_utf8(no_hashes(text)).unwrap(),
            "root:x:0:0:root:/root:/bin/bash\nfrr:x:100:101::/nonexistent:/usr/sbin/nologin\nnobody:*:65534:65534::/:/bin/false\n"
        );
    }

    /// The copy of an /etc-like tree: what anyone may read, not the rest.
    #[test]
    fn only_what_anyone_may_read_is_copied() {
        use std::os::unix::fs::PermissionsExt;
        let base = std::env::temp_dir().join(format!("vemu-tenant-etc-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        let (from, to) = (base.join("etc"), base.join("copy"));
        fs::create_dir_all(from.join("ssl/private")).unwrap();
        fs::write(from.join("services"), "x").unwrap();
        fs::write(from.join("shadow"), "root:$6$h").unwrap();
        fs::set_permissions(from.join("shadow"), fs::Permissions::from_mode(0o640)).unwrap();
        fs::write(from.join("ssl/private/key.pem"), "k").unwrap();
        fs::set_permissions(from.join("ssl/private"), fs::Permissions::from_mode(0o710)).unwrap();
        fs::write(from.join("secret"), "s").unwrap();
        std::os::unix::fs::symlink("services", from.join("link")).unwrap();
        copy_etc(&from, &to, &[from.join("secret")]).unwrap();
        assert!(to.join("services").is_file() && to.join("link").is_symlink());
        assert!(!to.join("shadow").exists() && !to.join("secret").exists());
        assert!(to.join("ssl/private").is_dir() && !to.join("ssl/private/key.pem").exists());
        let _ = fs::remove_dir_all(&base);
    }
}
