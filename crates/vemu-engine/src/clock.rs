//! The one lab clock: every timestamp of a lab (deliveries, captures, statistics,
//! events) is nanoseconds on it. Only drivers read it; the sans-IO core is handed the time.

/// The one lab clock: nanoseconds of CLOCK_MONOTONIC since the lab's epoch.
#[derive(Debug, Clone, Copy)]
pub struct LabClock {
    pub epoch_ns: u64,
}

pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl LabClock {
    pub fn start() -> LabClock {
        LabClock { epoch_ns: monotonic_ns() }
    }
    pub fn now_ns(&self) -> u64 {
        monotonic_ns().saturating_sub(self.epoch_ns)
    }
}
