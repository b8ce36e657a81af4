//! Mount namespaces: the template the nodes' are copied from, a node's own (overlays,
//! `/etc/hosts`, `/run`; confined for a tenant's lab), its `/sys`, pins.

use super::*;

/// Pin the calling thread's namespace `kind` ("net", "uts") at `target`.
pub(crate) fn pin_ns(kind: &str, target: &Path) -> Result<()> {
    pin(&format!("/proc/thread-self/ns/{kind}"), target)
        .with_context(|| format!("pinning the {kind} namespace"))
}

/// Keep the namespace file `src` alive by bind-mounting it on a new file `target`.
pub(crate) fn pin(src: &str, target: &Path) -> Result<()> {
    fs::File::options()
        .write(true)
        .create_new(true)
        .open(target)
        .with_context(|| format!("creating {}", target.display()))?;
    if let Err(e) = mount(Some(src), target, None::<&str>, MsFlags::MS_BIND, None::<&str>) {
        let _ = fs::remove_file(target);
        return Err(e).with_context(|| format!("bind-mounting {src} on {}", target.display()));
    }
    Ok(())
}

/// A mount namespace to copy the nodes' from: the machine's mounts, made private (so
/// that what is mounted later, such as pinned namespaces, does not propagate into
/// nodes), without `/run/netns` and without other labs' state, which would otherwise
/// keep their namespaces alive; the lab's own directory is its tmpfs alone, without the
/// namespaces pinned under it. Made once in a process ([`node_template`]).
fn mount_template(paths: &LabPaths) -> Result<OwnedFd> {
    let paths = paths.clone();
    std::thread::Builder::new()
        .name("mk-mnt".into())
        .spawn(move || -> Result<OwnedFd> {
            unshare(CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_FS)
                .context("creating a mount namespace")?;
            mount(
                None::<&str>,
                "/",
                None::<&str>,
                MsFlags::MS_REC | MsFlags::MS_PRIVATE,
                None::<&str>,
            )
            .context("making the nodes' mounts private")?;
            // (All of its mounts: a tmpfs may be on the directory's own; see
            // `prepare_netns_dir`.)
            while umount2(NETNS_DIR, MntFlags::MNT_DETACH).is_ok() {}
            if let Ok(d) = fs::read_dir(STATE_DIR) {
                for e in d.flatten().filter(|e| e.path() != paths.dir) {
                    let _ = umount2(&e.path(), MntFlags::MNT_DETACH);
                }
            }
            alone(&paths.dir).context("keeping the lab's directory without its pins")?;
            Ok(fs::File::open("/proc/thread-self/ns/mnt")
                .context("opening the template mount namespace")?
                .into())
        })?
        .join()
        .map_err(|_| anyhow!("the thread creating the nodes' mount namespace panicked"))?
}

/// Replace the mount at `dir` (in the calling thread's mount namespace) by a copy of it
/// without the mounts under it (`open_tree` without `AT_RECURSIVE`, `move_mount`).
fn alone(dir: &Path) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 4;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())?;
    let flags = OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint;
    // SAFETY: open_tree with a NUL-terminated path.
    let tree =
        new_fd(unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, path.as_ptr(), flags) })
            .with_context(|| format!("copying the mount at {}", dir.display()))?;
    umount2(dir, MntFlags::MNT_DETACH).with_context(|| format!("unmounting {}", dir.display()))?;
    // SAFETY: move_mount of our descriptor, empty path, onto a NUL-terminated path.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            path.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("mounting the copy at {}", dir.display()));
    }
    Ok(())
}

/// What the thread making a node's mounts hears about its mount namespace.
enum Pinned {
    Done,
    /// Make another: the kernel refused to pin this one.
    Again,
    Failed,
}

/// How often a node's mount namespace is made again when the kernel refuses to pin it
/// (EINVAL), waiting 50 ms, 100 ms, ... in between (6.4 s in all). Seen for some seconds
/// after a machine's other mount namespaces went away in numbers (an agent's share of
/// a lab ending; the ids vemu compares were in order, so not the loop check): the labs
/// started then failed, one started 10 s later did not.
const PIN_RETRIES: u32 = 7;

/// The templates of this process's labs' nodes' mount namespaces, by lab directory.
static TEMPLATES: std::sync::Mutex<Vec<(PathBuf, std::sync::Arc<OwnedFd>)>> =
    std::sync::Mutex::new(Vec::new());

/// The template of the lab's nodes' mount namespaces ([`mount_template`]), made the
/// first time this process asks.
pub fn node_template(paths: &LabPaths) -> Result<std::sync::Arc<OwnedFd>> {
    let mut all = TEMPLATES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, t)) = all.iter().find(|(d, _)| *d == paths.dir) {
        return Ok(t.clone());
    }
    let t = std::sync::Arc::new(mount_template(paths)?);
    all.push((paths.dir.clone(), t.clone()));
    Ok(t)
}

/// Let go of the lab's template (it holds a copy of the lab's directory).
pub(crate) fn forget_template(paths: &LabPaths) {
    TEMPLATES.lock().unwrap_or_else(|e| e.into_inner()).retain(|(d, _)| *d != paths.dir);
}

/// The node's mount namespace ([`enter_node_mounts`]), made and pinned the first time
/// one of its processes starts ([`NodeEntry::open`], which has found the node): a node
/// that runs nothing has none (making them, three overlays each, was a tenth of a
/// 10,000-node `up`).
pub(crate) fn node_mounts(paths: &LabPaths, node: &str) -> Result<OwnedFd> {
    let pinned = paths.mnt(node);
    let open = || fs::File::open(&pinned).map(OwnedFd::from);
    if let Ok(fd) = open() {
        return Ok(fd);
    }
    let _lock = lock::lock_file(&pinned.with_extension("lock"))?;
    if let Ok(fd) = open() {
        return Ok(fd);
    }
    let template = node_template(paths)?;
    setup::node_fs_dirs(&paths.node_fs(node))?;
    let (tid_tx, tid_rx) = std::sync::mpsc::channel::<i32>();
    let (pinned_tx, pinned_rx) = std::sync::mpsc::channel::<Pinned>();
    let worker = {
        let (paths, node) = (paths.clone(), node.to_string());
        std::thread::Builder::new().name(format!("mnt-{node}")).spawn(move || -> Result<()> {
            // A mount namespace cannot be pinned from inside itself: this thread's maker
            // does it, and may ask for another one (see [`PIN_RETRIES`]).
            loop {
                enter_node_mounts(&paths, &node, &template)?;
                let _ = tid_tx.send(nix::unistd::gettid().as_raw());
                match pinned_rx.recv() {
                    Ok(Pinned::Done) => return Ok(()),
                    Ok(Pinned::Again) => continue,
                    _ => bail!("the node's mount namespace could not be pinned"),
                }
            }
        })?
    };
    let mut attempt = 0;
    let mut result = Err(anyhow!("the thread making node {node}'s mounts ended"));
    while let Ok(tid) = tid_rx.recv() {
        let r = pin(&format!("/proc/self/task/{tid}/ns/mnt"), &pinned);
        let einval =
            r.as_ref().err().and_then(|e| e.root_cause().downcast_ref::<nix::errno::Errno>())
                == Some(&nix::errno::Errno::EINVAL);
        match r {
            Ok(()) => {
                let _ = pinned_tx.send(Pinned::Done);
                result = Ok(());
                break;
            }
            Err(_) if einval && attempt < PIN_RETRIES => {
                attempt += 1;
                eprintln!("vemu: node {node}: the kernel refused to pin its mount namespace (EINVAL); making another (attempt {attempt})");
                std::thread::sleep(Duration::from_millis(25 << attempt));
                let _ = pinned_tx.send(Pinned::Again);
            }
            Err(e) => {
                let _ = pinned_tx.send(Pinned::Failed);
                result = Err(e).with_context(|| {
                    format!(
                        "pinning the mount namespace of node {node} (tried {} times)",
                        attempt + 1
                    )
                });
                break;
            }
        }
    }
    drop(pinned_tx);
    let made =
        worker.join().map_err(|_| anyhow!("the thread making node {node}'s mounts panicked"))?;
    made.and(result).with_context(|| format!("making node {node}'s mounts"))?;
    open().with_context(|| format!("opening {}", pinned.display()))
}

/// The kernel's id of the mount namespace at `path` (`NS_GET_MNTNS_ID`, Linux 6.8), if
/// it tells.
pub(crate) fn mnt_ns_id(path: &str) -> Option<u64> {
    const NS_GET_MNTNS_ID: libc::c_ulong = 0x8008_b705;
    let f = fs::File::open(path).ok()?;
    let mut id: u64 = 0;
    // SAFETY: the ioctl writes one u64 through the pointer.
    (unsafe { libc::ioctl(f.as_raw_fd(), NS_GET_MNTNS_ID, &mut id) } == 0).then_some(id)
}

/// Move the calling thread (with a filesystem context of its own) into a new mount
/// namespace copied from `template`, whose id is above `above` (the namespace of the
/// process that will pin it). The kernel refuses to pin a mount namespace from one
/// that is not older ("a loop"), and it hands out ids in per-CPU batches
/// ([`MNT_NS_ID_BATCH`] at a time), so a new namespace can be "older" than its maker's:
/// seen whenever vemu itself runs in a mount namespace of its own (a container, an
/// agent), never from the machine's first one (id 1). The first tries make the namespace
/// on each CPU the thread may run on, one of which may be handing out the newest ids;
/// where none is (one CPU allowed, say a container's or `taskset`'s), the CPU's batch
/// is used up until the next one it takes is newer.
pub(crate) fn new_mount_ns_after(template: &OwnedFd, above: Option<u64>) -> Result<()> {
    let allowed = cpus::CpuSet::allowed();
    let cpus = allowed.map_or_else(Vec::new, |a| a.cpus());
    let tries = cpus.len().max(1) + 2 * MNT_NS_ID_BATCH;
    let mut result = Ok(());
    for attempt in 0..tries {
        nix::sched::setns(template, CloneFlags::CLONE_NEWNS)
            .context("entering the template mount namespace")?;
        unshare(CloneFlags::CLONE_NEWNS).context("creating the node's mount namespace")?;
        let (Some(above), Some(id)) = (above, mnt_ns_id("/proc/thread-self/ns/mnt")) else { break };
        if id > above {
            break;
        }
        if attempt + 1 == tries {
            result = Err(anyhow!("could not make a mount namespace newer than vemu's own (id {above}; got {id} after {tries} tries)"));
            break;
        }
        if cpus.len() > 1 {
            cpus::pin_to(cpus[attempt % cpus.len()]);
        }
    }
    if let (Some(allowed), true) = (allowed, cpus.len() > 1) {
        allowed.apply();
    }
    result
}

/// How many namespace ids a CPU takes at a time (the kernel's `COOKIE_LOCAL_BATCH`).
pub(crate) const MNT_NS_ID_BATCH: usize = 4096;

/// Give the calling thread (already in the node's network namespace) the node's own
/// mount namespace: a copy of `template` with copy-on-write overlays on
/// [`PRIVATE_OVERLAYS`], the lab's `/etc/hosts` and its own `/run` (its `/sys` comes
/// with its first process: [`node_sysfs`]) — or, for a node of an image or a tenant's,
/// a root of its own.
pub(crate) fn enter_node_mounts(paths: &LabPaths, node: &str, template: &OwnedFd) -> Result<()> {
    unshare(CloneFlags::CLONE_FS).context("unsharing the filesystem context")?;
    new_mount_ns_after(template, mnt_ns_id("/proc/self/ns/mnt"))?;
    let root = paths.node_fs(node);
    let confined = paths.confined().exists();
    if let Some(image) = images::of_node(paths, node)? {
        return enter_image_root(&root, &paths.hosts(), &image, confined)
            .with_context(|| format!("making node {node}'s root from its image"));
    }
    // A tenant's node without an image: a root of its own, from the machine's programs.
    if confined {
        return tenant_root::enter(paths, &root)
            .with_context(|| format!("making node {node}'s root"));
    }
    for d in PRIVATE_OVERLAYS {
        if !Path::new(d).is_dir() {
            continue;
        }
        let opts = format!(
            "lowerdir={d},upperdir={},workdir={}",
            root.join("upper").join(&d[1..]).display(),
            root.join("work").join(&d[1..]).display()
        );
        mount(Some("vemu"), *d, Some("overlay"), MsFlags::empty(), Some(opts.as_str()))
            .with_context(|| format!("mounting the node's overlay on {d}"))?;
    }
    mount(Some(&paths.hosts()), "/etc/hosts", None::<&str>, MsFlags::MS_BIND, None::<&str>)
        .context("binding /etc/hosts")?;
    mount(Some(&root.join("run")), "/run", None::<&str>, MsFlags::MS_BIND, None::<&str>)
        .context("binding the node's /run")?;
    Ok(())
}

/// Make the calling thread's (new) mount namespace a node of `image`: its root an
/// overlay of the image's root filesystem and the node's own directory (`root/image`),
/// with the machine's `/proc`, `/sys` and `/dev` (replaced by the node's own `/proc`
/// and `/sys` when its first process starts, as for other nodes), the lab's
/// `/etc/hosts` and the node's `/run`; then that root becomes the namespace's root.
/// The image's root is mounted without devices (a device node in an image opens nothing).
/// A `confined` node (a tenant's) then gets the confined view of what the machine lends
/// it (`confine::confine_image_mounts`), before the machine's root is let go.
pub(crate) fn enter_image_root(
    root: &Path,
    hosts: &Path,
    image: &images::Image,
    confined: bool,
) -> Result<()> {
    let merged = root.join("root");
    let opts = format!(
        "lowerdir={},upperdir={},workdir={}",
        image.rootfs.display(),
        root.join("image/upper").display(),
        root.join("image/work").display()
    );
    // Without devices, in every lab: a device node in an image (an owner's or a tenant's)
    // opens nothing; the node's devices are in its /dev, mounted apart.
    mount(Some("vemu"), &merged, Some("overlay"), MsFlags::MS_NODEV, Some(opts.as_str()))
        .context("mounting the image's overlay")?;
    lend_proc_sys_dev(&merged)?;
    hosts_and_run(&merged, hosts, root)?;
    if confined {
        confine::confine_image_root(&merged, root).context("confining the node's mounts")?;
    }
    pivot_into(&merged)
}

/// The machine's `/proc`, `/sys` and `/dev` in the root-to-be at `merged` (made the
/// node's own, or confined, afterwards).
pub(crate) fn lend_proc_sys_dev(merged: &Path) -> Result<()> {
    for d in ["proc", "sys", "dev"] {
        let at = merged.join(d);
        fs::create_dir_all(&at).with_context(|| format!("making /{d} in the node's root"))?;
        mount(
            Some(&Path::new("/").join(d)),
            &at,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None::<&str>,
        )
        .with_context(|| format!("binding /{d}"))?;
    }
    Ok(())
}

/// The lab's `/etc/hosts` (`hosts`) and the node's `/run` (in `root`, its directory in
/// the lab's storage) in the root-to-be at `merged`.
pub(crate) fn hosts_and_run(merged: &Path, hosts: &Path, root: &Path) -> Result<()> {
    let etc_hosts = merged.join("etc/hosts");
    if fs::symlink_metadata(&etc_hosts).is_err() {
        fs::create_dir_all(merged.join("etc"))?;
        fs::write(&etc_hosts, "").context("making /etc/hosts in the node's root")?;
    }
    mount(Some(hosts), &etc_hosts, None::<&str>, MsFlags::MS_BIND, None::<&str>)
        .context("binding /etc/hosts")?;
    fs::create_dir_all(merged.join("run"))?;
    let flags = MsFlags::MS_BIND;
    mount(Some(&root.join("run")), &merged.join("run"), None::<&str>, flags, None::<&str>)
        .context("binding the node's /run")
}

/// Make `merged` (a mount) the calling thread's mount namespace's root: stacked over
/// the old one, which is then let go.
pub(crate) fn pivot_into(merged: &Path) -> Result<()> {
    nix::unistd::chdir(merged).context("entering the node's root")?;
    // SAFETY: pivot_root with two constant C strings.
    if unsafe { libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error()).context("making the node's root its own");
    }
    umount2(".", MntFlags::MNT_DETACH).context("letting the machine's root go")?;
    nix::unistd::chdir("/").context("entering the node's root")?;
    Ok(())
}

/// Mount the node's own `/sys` (its network namespace's interfaces) in its mount
/// namespace, the first time one of its processes starts: a node that runs nothing
/// costs no sysfs. (Each sysfs mount is looked up among all the machine's — one per
/// network namespace that has one — so mounting one for every node of a 10,000-node lab
/// cost a sixth of its `up`.) The marker's lock makes one process mount it while others
/// wait.
pub(crate) fn node_sysfs(paths: &LabPaths, node: &str, net: &OwnedFd, mnt: &OwnedFd) -> Result<()> {
    let marker = paths.sys_mounted(node);
    if marker.exists() {
        return Ok(());
    }
    let _lock = lock::lock_file(&marker.with_extension("lock"))?;
    if marker.exists() {
        return Ok(());
    }
    // (Looked at here: the node's mounts show its own /run, not the lab's state.)
    let confined = paths.confined().exists();
    std::thread::scope(|s| {
        s.spawn(|| -> Result<()> {
            unshare(CloneFlags::CLONE_FS).context("unsharing the filesystem context")?;
            nix::sched::setns(net, CloneFlags::CLONE_NEWNET).context("entering the node")?;
            nix::sched::setns(mnt, CloneFlags::CLONE_NEWNS)
                .context("entering the node's mounts")?;
            if umount2("/sys", MntFlags::MNT_DETACH).is_ok() {
                // A confined node's read-only.
                let ro = if confined {
                    MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC | MsFlags::MS_NODEV
                } else {
                    MsFlags::empty()
                };
                mount(Some("sysfs"), "/sys", Some("sysfs"), ro, None::<&str>)
                    .context("mounting the node's /sys")?;
            }
            Ok(())
        })
        .join()
        .map_err(|_| anyhow!("the thread mounting node {node}'s /sys panicked"))?
    })?;
    fs::write(&marker, "").with_context(|| format!("writing {}", marker.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread that may run on one CPU only still gets a mount namespace newer than a
    /// given id: it uses its CPU's ids up until they pass it (run as root; Linux 6.8+).
    #[test]
    fn a_newer_mount_namespace_is_made_on_one_cpu() {
        std::thread::spawn(|| {
            unshare(CloneFlags::CLONE_FS).unwrap();
            assert!(cpus::pin_to(cpus::current().unwrap() as usize));
            let template: OwnedFd = fs::File::open("/proc/self/ns/mnt").unwrap().into();
            unshare(CloneFlags::CLONE_NEWNS).unwrap();
            let Some(now) = mnt_ns_id("/proc/thread-self/ns/mnt") else { return }; // (an older kernel)
                                                                                   // Ten ids ahead: ten namespaces or more on this CPU.
            new_mount_ns_after(&template, Some(now + 10)).unwrap();
            assert!(mnt_ns_id("/proc/thread-self/ns/mnt").unwrap() > now + 10);
        })
        .join()
        .unwrap();
    }
}
