//! A shard thread's scheduling, carried out: its priority (real time, or normal with a
//! short slice and a niceness), the controller's session group, and moving it to a CPU.
//! What to ask for is decided in [`crate::schedule`] (vemu-core).

use vemu_sys::cpus::{self, CpuSet};

use crate::schedule::Priority;

/// Environment variable of `vemu up` that chooses the shards' priority:
/// `VEMU_ENGINE_PRIORITY=normal` keeps them at niceness −10 (see [`crate::schedule`]).
pub const PRIORITY_ENV: &str = "VEMU_ENGINE_PRIORITY";
/// Environment variable of `vemu up`: `VEMU_ENGINE_FOLLOW=off` keeps idle shards where
/// they are and lingering after every burst, whoever sent its frames (see
/// [`crate::schedule::Writers`]; to compare).
pub const FOLLOW_ENV: &str = "VEMU_ENGINE_FOLLOW";
/// Real-time priority of the shards (SCHED_FIFO, 1..99): above ordinary programs, below
/// the kernel's own real-time threads.
const FIFO_PRIORITY: i32 = 10;

/// The machine's CPU pressure so far, ns (see [`Schedule::review`]).
pub(super) fn machine_pressure_ns() -> Option<u64> {
    vemu_sys::cpus::machine_pressure_us().map(|us| us.saturating_mul(1000))
}

/// Put the calling shard thread at `p`; the priority it has afterwards (real time can be
/// refused: no privilege, or a container's limits).
pub(super) fn set_priority(p: Priority) -> Priority {
    if p == Priority::Realtime {
        let param = libc::sched_param { sched_priority: FIFO_PRIORITY };
        // SAFETY: sched_setscheduler on the calling thread (0) with a valid sched_param.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0 {
            return Priority::Realtime;
        }
    }
    if !set_normal(NORMAL_SLICE_NS) {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: as above; then setpriority on this thread (its tid) with an integer
        // niceness.
        unsafe {
            libc::sched_setscheduler(0, libc::SCHED_OTHER, &param);
            libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, NORMAL_NICE);
        }
    }
    Priority::Normal
}

/// Give the calling process's scheduling group — its session's, where the kernel groups
/// tasks by session (autogroup) — the niceness of a shard at normal priority, once.
/// There a thread's niceness weighs only against the threads of its own session: every
/// program started in a session of its own (a daemon, or a node's program started by
/// the lab) weighs as much as the whole controller, and a shard at niceness -10 had a
/// share of one session among dozens (32 TCP flows of 100 Mbit/s: 19-34 % of the frames
/// over 1 ms late, against 1.9-10.5 % with the group raised, runs alternated;
/// bench/README.md, "One session among dozens"). Silent where the kernel has no
/// autogroup (the file is missing); where the process is in a cgroup of its own the
/// write changes nothing (niceness then weighs within the cgroup).
pub(crate) fn raise_session_group() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let file = "/proc/self/autogroup";
        match std::fs::write(file, NORMAL_NICE.to_string()) {
            Err(e) if std::path::Path::new(file).exists() => eprintln!("engine: cannot raise the controller's scheduling group ({e}): shards at normal priority weigh as one session among the nodes'"),
            _ => {}
        }
    });
}

/// Niceness of a shard at normal priority (and of the controller's session group, and of
/// the fidelity monitor's thread).
pub const NORMAL_NICE: i32 = -10;
/// The time slice a shard at normal priority asks for: a short one lets it preempt the
/// running program as soon as it wakes for a deadline, without a larger share of the CPU
/// (Linux's EEVDF scheduler takes `sched_runtime` as the slice asked for, from 6.12; an
/// older kernel keeps its default of a few ms). 32 TCP flows on two cores with the shards
/// given way to them (`Schedule::review`), 4 s of iperf3 as `bench/run.sh engine` runs
/// them: `degraded` (0.9–1.1 % of frames over 1 ms late) in 2 of 4 runs at the default
/// slice, `ok` in 5 of 5 by hand with 100 µs — but the bench's next run said `degraded`
/// again (0.7 %): the verdict sits near its 1 % boundary there (bench/README, "Giving
/// way under pressure").
const NORMAL_SLICE_NS: u64 = 100_000;

/// `struct sched_attr` of sched_setattr(2), its first version (48 bytes).
#[repr(C)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime_ns: u64,
    deadline_ns: u64,
    period_ns: u64,
}

/// Put the calling thread at SCHED_OTHER and [`NORMAL_NICE`], asking for time slices of
/// `slice_ns` (a kernel before 6.12 ignores the slice); false if the kernel refuses
/// sched_setattr.
fn set_normal(slice_ns: u64) -> bool {
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        flags: 0,
        nice: NORMAL_NICE,
        priority: 0,
        runtime_ns: slice_ns,
        deadline_ns: 0,
        period_ns: 0,
    };
    // SAFETY: sched_setattr on the calling thread (0) with a valid, fully initialised
    // attribute of the size it says.
    unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) == 0 }
}

/// Move the calling thread to `cpu`, if it may run there, and leave it free to run on
/// any CPU of `allowed` again afterwards: it stays where it is until the scheduler moves
/// it (a real-time thread wakes where it last ran).
pub(super) fn move_to(cpu: u32, allowed: Option<&CpuSet>) {
    let Some(allowed) = allowed else { return };
    if allowed.has(cpu as usize) && cpus::pin_to(cpu as usize) {
        allowed.apply();
    }
}
