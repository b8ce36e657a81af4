//! One controller per lab name: the lab's lock file; and the locks of files that one
//! process of several makes while the others wait.

use super::*;

/// An exclusive hold on a lab's name (`flock` on `/run/vemu/LAB.lock`), taken by `vemu up`
/// before anything is built and held by the lab's controller for its whole life: a
/// second `up` of the same name fails at once, and `clean` can tell a lab being built
/// (lock held by a live process) from one a crash left behind. The lock goes with the
/// last descriptor of it, so it cannot outlive a killed controller. Its owner removes the
/// file when done ([`LabLock::release`]); whoever locks it checks that the path still
/// names the file it locked, so two processes never hold two files of one name.
#[derive(Debug)]
pub struct LabLock {
    file: fs::File,
    path: PathBuf,
}

impl LabLock {
    pub fn path(lab: &str) -> PathBuf {
        Path::new(STATE_DIR).join(format!("{lab}.lock"))
    }

    /// The lock, or `None` when another process holds it.
    pub fn try_acquire(lab: &str) -> Result<Option<LabLock>> {
        fs::create_dir_all(STATE_DIR).with_context(|| format!("creating {STATE_DIR}"))?;
        let path = LabLock::path(lab);
        loop {
            let f = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(&path)
                .with_context(|| format!("opening {}", path.display()))?;
            // SAFETY: flock on a descriptor we own.
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::WouldBlock {
                    return Ok(None);
                }
                return Err(e).with_context(|| format!("locking {}", path.display()));
            }
            // The owner before us may have removed the file between our open and our
            // lock: then we hold a file nobody else can find, so try again.
            let l = LabLock { file: f, path: path.clone() };
            if l.is_at_its_path() {
                return Ok(Some(l));
            }
        }
    }

    /// The lock, waiting up to `wait` for a holder that only looks (see [`LabLock::held`]);
    /// `None` when another process still holds it.
    pub fn acquire_within(lab: &str, wait: Duration) -> Result<Option<LabLock>> {
        let until = Instant::now() + wait;
        loop {
            match LabLock::try_acquire(lab)? {
                None if Instant::now() < until => std::thread::sleep(Duration::from_millis(10)),
                r => return Ok(r),
            }
        }
    }

    /// Whether the lock file's path still names the file this lock holds.
    pub(crate) fn is_at_its_path(&self) -> bool {
        let ours = self.file.metadata().map(|m| m.ino()).ok();
        fs::metadata(&self.path).map(|m| m.ino()).ok() == ours
    }

    /// Whether a live process holds lab `lab`'s name. Looking takes the lock for an
    /// instant (and leaves the file): an `up` at that instant waits ([`LabLock::acquire_within`]).
    pub fn held(lab: &str) -> bool {
        LabLock::path(lab).exists() && matches!(LabLock::try_acquire(lab), Ok(None))
    }

    /// Give the name up for good: remove the file, then the lock.
    pub fn release(self) {
        // Only the file we hold (never one a later owner created).
        if self.is_at_its_path() {
            let _ = fs::remove_file(&self.path);
        }
    }

    /// The descriptor number to hand to a child process, which inherits the lock.
    pub fn inheritable_fd(&self) -> Result<i32> {
        let fd = self.file.as_raw_fd();
        // SAFETY: fcntl on a descriptor we own; clearing FD_CLOEXEC.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } != 0 {
            return Err(std::io::Error::last_os_error()).context("handing the lab lock on");
        }
        Ok(fd)
    }

    /// Adopt lab `lab`'s lock, inherited from the parent process as descriptor `fd`.
    ///
    /// # Safety
    /// `fd` must be an open descriptor of the lab's lock file that nothing else owns.
    pub unsafe fn from_fd(fd: i32, lab: &str) -> LabLock {
        // SAFETY: the caller promises an owned, open descriptor.
        let f = unsafe { <fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        // SAFETY: fcntl on that descriptor; it is closed again on exec.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        LabLock { file: f, path: LabLock::path(lab) }
    }
}

/// Open (making it) and lock `path` exclusively, waiting for another holder: the lock
/// goes with the file returned.
pub(crate) fn lock_file(path: &Path) -> Result<fs::File> {
    let f = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    wait_for_lock(&f).with_context(|| format!("locking {}", path.display()))?;
    Ok(f)
}

/// Lock an open file exclusively, waiting for another holder.
pub(crate) fn wait_for_lock(f: &fs::File) -> std::io::Result<()> {
    // SAFETY: flock on a descriptor the caller owns; released when it is closed.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// A hash of a name that is the same in every build (FNV-1a, 64 bits): for the names of
/// things that outlive the process that made them (devices, store tags).
pub(crate) fn stable_hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}
