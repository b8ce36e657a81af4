//! `vemu-init NODE [--confined] [--mnt PATH]`: the first process of a node's PID
//! namespace, started by the lab's controller (never by users). A node of an image has
//! it started from the machine's files and enter the node's mounts (`--mnt`, the
//! pinned namespace) itself, so that it does not depend on the image's C library. It
//! mounts the node's own `/proc`, so that the node sees
//! its own processes only and none of the machine's, prints "ready" on its standard
//! output and closes it, then reaps the node's orphans for ever. It installs no signal
//! handler, so, as the first process of its namespace, only SIGKILL from outside ends it
//! (and with it every process of the node).
//!
//! A program of its own rather than a subcommand of `vemu`: it runs once per node, so
//! it links nothing but the C library (a few tens of kilobytes of memory per node
//! instead of half a megabyte, and a quarter of the start-up time).

use std::io::Write;

fn main() {
    let mut out = std::io::stdout();
    let args: Vec<String> = std::env::args().collect();
    let confined = args.iter().any(|a| a == "--confined");
    let mnt = args.iter().position(|a| a == "--mnt").and_then(|i| args.get(i + 1));
    if let Some(Err(e)) = mnt.map(|m| enter_mounts(m)) {
        let _ = writeln!(out, "{e}");
        std::process::exit(1);
    }
    if let Err(e) = mount_proc(confined) {
        let _ = writeln!(out, "{e}");
        std::process::exit(1);
    }
    let _ = writeln!(out, "ready");
    let _ = out.flush();
    // SAFETY: plain system calls on constants and descriptors of this process.
    unsafe {
        // Standard streams to /dev/null: the controller reads the closed pipe as "ready".
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
            if null > 2 {
                libc::close(null);
            }
        }
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::sigprocmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
        let mut chld: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut chld);
        libc::sigaddset(&mut chld, libc::SIGCHLD);
        loop {
            // Reap every child that ended, then sleep until the next SIGCHLD (pending
            // while blocked, so none is missed between the two).
            while libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) > 0 {}
            libc::sigwaitinfo(&chld, std::ptr::null_mut());
        }
    }
}

/// Enter the mount namespace pinned at `path` (the node's), at its root.
fn enter_mounts(path: &str) -> Result<(), String> {
    let c = std::ffi::CString::new(path).map_err(|_| "a bad --mnt path".to_string())?;
    // SAFETY: open, setns, chdir and close on a C string and the descriptor opened.
    unsafe {
        let fd = libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 || libc::setns(fd, libc::CLONE_NEWNS) != 0 || libc::chdir(c"/".as_ptr()) != 0 {
            return Err(format!("entering the node's mounts: {}", std::io::Error::last_os_error()));
        }
        libc::close(fd);
    }
    Ok(())
}

/// Mount the node's `/proc`; a confined node's (a tenant's lab) with `/proc/sys` and
/// `/proc/sysrq-trigger` read-only, but `/proc/sys/net` (the node's own settings).
fn mount_proc(confined: bool) -> Result<(), String> {
    if std::process::id() != 1 {
        return Err(
            "vemu-init runs as the first process of a node's PID namespace, started by vemu".into(),
        );
    }
    // SAFETY: umount2 and mount with constant C strings.
    unsafe {
        libc::umount2(c"/proc".as_ptr(), libc::MNT_DETACH);
        let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        if libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            flags,
            std::ptr::null(),
        ) != 0
        {
            return Err(format!("mounting the node's /proc: {}", std::io::Error::last_os_error()));
        }
        if confined {
            for (path, read_only) in
                [(c"/proc/sys", true), (c"/proc/sys/net", false), (c"/proc/sysrq-trigger", true)]
            {
                // (A kernel without magic SysRq has no trigger.)
                if libc::access(path.as_ptr(), libc::F_OK) != 0 {
                    continue;
                }
                let ro = if read_only { libc::MS_RDONLY } else { 0 };
                if libc::mount(
                    path.as_ptr(),
                    path.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                ) != 0
                    || libc::mount(
                        std::ptr::null(),
                        path.as_ptr(),
                        std::ptr::null(),
                        libc::MS_REMOUNT | libc::MS_BIND | ro | flags,
                        std::ptr::null(),
                    ) != 0
                {
                    return Err(format!(
                        "confining the node's {}: {}",
                        path.to_string_lossy(),
                        std::io::Error::last_os_error()
                    ));
                }
            }
        }
    }
    Ok(())
}
