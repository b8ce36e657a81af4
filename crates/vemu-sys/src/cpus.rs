//! The CPUs a thread may run on, and moving it to one of them: what the engine's shards
//! (following their senders) and the making of mount namespaces (trying each CPU's
//! namespace ids) both do.

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
}
