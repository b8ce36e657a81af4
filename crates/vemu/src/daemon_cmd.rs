//! `vemu daemon`: the controller process `vemu up` and `vemu attach` start — its
//! order in, its reports out (`vemu_control::daemon::{DaemonOrder, DaemonReport}`).

use std::io::Write;
use std::os::fd::AsRawFd;

use anyhow::{anyhow, Context, Result};
use vemu_control::daemon::{self, ApiOptions, DaemonOrder, DaemonReport, Event, Start};
use vemu_control::labs::LabLock;

/// Keep the controller's memory (the engine's code and data among it) in RAM. Machines
/// that reclaim cold pages on their own (DAMON's pageout, as on the machine vemu is
/// developed on) drop rarely run code of the binary, and the engine then stalls for
/// milliseconds reading it back, making frames late (bench/README.md, "The
/// controller"). What the binary maps now is read in and locked; later mappings (thread stacks,
/// the heap's growth) are locked as they are touched. Children do not inherit it.
pub(crate) fn lock_memory() {
    vemu_control::labs::avoid_oom_killer();
    // SAFETY: mlockall with flag arguments only.
    unsafe {
        if libc::mlockall(libc::MCL_CURRENT) != 0
            || libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE | libc::MCL_ONFAULT) != 0
        {
            eprintln!("vemu: cannot lock the controller's memory ({}); the engine may stall when pages are reclaimed", std::io::Error::last_os_error());
        }
    }
}

/// `vemu daemon`: read its order on stdin ([`DaemonOrder`]), report on stdout (a
/// [`DaemonReport`] a line) until the lab is ready or failed, then serve it.
pub(crate) fn run_daemon() -> Result<()> {
    lock_memory();
    let mut text = Vec::new();
    std::io::Read::read_to_end(&mut std::io::stdin(), &mut text)?;
    let order: DaemonOrder = serde_json::from_slice(&text).context("reading the daemon's order")?;
    let name = order.start.lab().to_string();
    let lock = match order.lock_fd {
        // SAFETY: `vemu up` handed us this descriptor of the lab's lock file.
        Some(fd) => unsafe { LabLock::from_fd(fd, &name) },
        None => LabLock::try_acquire(&name)?
            .ok_or_else(|| anyhow!("lab '{name}' is already running or being started"))?,
    };
    let emit = |r: DaemonReport| {
        let mut out = std::io::stdout().lock();
        if let Ok(line) = serde_json::to_string(&r) {
            let _ = writeln!(out, "{line}");
        }
        let _ = out.flush();
    };
    let report = |ev: Event| {
        let ready = matches!(ev, Event::Ready(_));
        emit(ev.into());
        if ready {
            // Let `vemu up` see the end of our output and return.
            if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
                // SAFETY: dup2 onto stdout.
                unsafe { libc::dup2(null.as_raw_fd(), 1) };
            }
        }
    };
    let options = ApiOptions { tcp: order.api_tcp };
    let result = match order.start {
        Start::Up(plan) => daemon::run(*plan, options, lock, report),
        Start::Attach(name) => daemon::attach(&name, options, lock, report),
    };
    if let Err(e) = &result {
        emit(DaemonReport::Failed(format!("{e:#}")));
        eprintln!("vemu daemon: {e:#}");
    }
    result
}
