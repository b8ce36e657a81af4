//! The CPUs a thread may run on, and moving it to one of them: what the engine's shards
//! (following their senders) and the making of mount namespaces (trying each CPU's
//! namespace ids) both do; and the machine's CPU pressure and steal, which the engine
//! and the fidelity monitor read.

use std::fs;

/// A set of CPUs (the kernel's `cpu_set_t`).
#[derive(Clone, Copy)]
pub struct CpuSet(libc::cpu_set_t);

impl CpuSet {
    /// The CPUs the calling thread may run on (none if they cannot be read).
    pub fn allowed() -> Option<CpuSet> {
        // SAFETY: a zeroed cpu_set_t (plain data) filled by sched_getaffinity for the
        // calling thread.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            (libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0)
                .then_some(CpuSet(set))
        }
    }

    /// Whether `cpu` is in the set.
    pub fn has(&self, cpu: usize) -> bool {
        // SAFETY: CPU_ISSET reads the set, with an index checked against its size.
        cpu < libc::CPU_SETSIZE as usize && unsafe { libc::CPU_ISSET(cpu, &self.0) }
    }

    /// The set's CPUs, in order.
    pub fn cpus(&self) -> Vec<usize> {
        (0..libc::CPU_SETSIZE as usize).filter(|&c| self.has(c)).collect()
    }

    /// Let the calling thread run on these CPUs only; false if the kernel refused.
    pub fn apply(&self) -> bool {
        // SAFETY: sched_setaffinity on the calling thread with a set of its size.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.0) == 0 }
    }
}

/// Let the calling thread run on `cpu` only (it moves there now); false if the kernel
/// refused or there is no such CPU.
pub fn pin_to(cpu: usize) -> bool {
    if cpu >= libc::CPU_SETSIZE as usize {
        return false;
    }
    // SAFETY: a zeroed cpu_set_t (plain data) with one CPU set, its index checked above.
    let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu, &mut one) };
    CpuSet(one).apply()
}

/// The CPU the calling thread runs on.
pub fn current() -> Option<u32> {
    // SAFETY: sched_getcpu takes no arguments.
    u32::try_from(unsafe { libc::sched_getcpu() }).ok()
}

/// The machine's CPU pressure so far: µs during which some task waited for a CPU
/// (`None` where the kernel has no PSI).
pub fn machine_pressure_us() -> Option<u64> {
    parse_pressure(&fs::read_to_string("/proc/pressure/cpu").ok()?)
}

/// The `some … total=N` of a pressure file.
fn parse_pressure(text: &str) -> Option<u64> {
    let some = text.lines().find(|l| l.starts_with("some "))?;
    some.split_whitespace().find_map(|f| f.strip_prefix("total="))?.parse().ok()
}

/// CPU time the hypervisor took from this machine so far, µs summed over its CPUs (the
/// `steal` of `/proc/stat`: a virtual CPU ready to run but not run by its host), and
/// how many CPUs that is over (`None` where the kernel counts none).
pub fn machine_steal_us() -> Option<(u64, u32)> {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    parse_steal(&fs::read_to_string("/proc/stat").ok()?, u64::try_from(hz).ok()?)
}

/// The steal time (µs) and the number of CPUs of a `/proc/stat` counting `hz` ticks a
/// second.
fn parse_steal(text: &str, hz: u64) -> Option<(u64, u32)> {
    let total = text.lines().next()?.strip_prefix("cpu ")?;
    let steal: u64 = total.split_whitespace().nth(7)?.parse().ok()?;
    let cpus = text.lines().filter(|l| l.starts_with("cpu") && !l.starts_with("cpu ")).count();
    Some((steal * 1_000_000 / hz.max(1), cpus as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread pinned to one of its CPUs runs there, and runs anywhere it could again
    /// once its set is put back.
    #[test]
    fn a_thread_moves_to_a_cpu_and_back() {
        std::thread::spawn(|| {
            let allowed = CpuSet::allowed().unwrap();
            let cpus = allowed.cpus();
            assert!(!cpus.is_empty());
            let last = *cpus.last().unwrap();
            assert!(pin_to(last));
            assert_eq!(current(), Some(last as u32));
            assert_eq!(CpuSet::allowed().unwrap().cpus(), vec![last]);
            assert!(allowed.apply());
            assert_eq!(CpuSet::allowed().unwrap().cpus(), cpus);
            assert!(!pin_to(libc::CPU_SETSIZE as usize));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn pressure_and_steal_are_read() {
        let psi = "some avg10=1.69 avg60=2.93 avg300=2.99 total=5331161377\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(parse_pressure(psi), Some(5_331_161_377));
        assert_eq!(parse_pressure("full total=3\n"), None);
        let stat = "cpu  1874502 13591 201994 1600023 6571 0 13801 5871 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\ncpu1 1 2 3 4 5 6 7 8 0 0\nintr 5\n";
        assert_eq!(parse_steal(stat, 100), Some((58_710_000, 2)));
        assert_eq!(parse_steal("cpu  1 2 3\n", 100), None, "an old kernel: no steal");
    }
}
