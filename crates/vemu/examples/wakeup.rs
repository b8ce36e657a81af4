//! What waking a sleeping thread costs on this machine, without vemu (`bench/run.sh
//! engine`): two threads hand a token back and forth through eventfds, COUNT round trips
//! GAP_US apart (each side sleeps in between, as an idle shard and an idle ping do), with
//! both threads on one CPU, on two CPUs, and where the scheduler puts them. Prints
//! `placement,median_us,p99_us,max_us` per placement. On a virtual machine a thread on
//! another, idle CPU is woken through the hypervisor: that is the figure to read beside
//! an emulator's idle round trip, which wakes its engine and the receiving program.
//!
//! Usage: `wakeup [GAP_US] [COUNT]` (defaults 10000 and 300).

use std::time::{Duration, Instant};

fn eventfd() -> i32 {
    // SAFETY: eventfd with valid flags; the descriptor is checked.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    assert!(fd >= 0, "eventfd: {}", std::io::Error::last_os_error());
    fd
}

fn pin(cpu: Option<usize>) {
    if let Some(cpu) = cpu {
        vemu_host::cpus::pin_to(cpu);
    }
}

/// The token read (0 on an error).
fn token_read(fd: i32) -> u64 {
    let mut v = 0u64;
    // SAFETY: reading 8 bytes from an eventfd into a u64.
    unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
    v
}

fn token_write(fd: i32, v: u64) {
    // SAFETY: writing 8 bytes to an eventfd from a u64.
    unsafe { libc::write(fd, (&v as *const u64).cast(), 8) };
}

/// Round-trip times (µs, sorted) with the two threads on these CPUs.
fn round_trips(a: Option<usize>, b: Option<usize>, gap: Duration, count: usize) -> Vec<f64> {
    let (to_b, to_a) = (eventfd(), eventfd());
    let echo = std::thread::spawn(move || {
        pin(b);
        // A token of 2 ends it.
        while token_read(to_b) == 1 {
            token_write(to_a, 1);
        }
    });
    let sender = std::thread::spawn(move || {
        pin(a);
        std::thread::sleep(Duration::from_millis(50));
        let mut rtts = Vec::with_capacity(count);
        for _ in 0..count {
            std::thread::sleep(gap);
            let t0 = Instant::now();
            token_write(to_b, 1);
            token_read(to_a);
            rtts.push(t0.elapsed().as_secs_f64() * 1e6);
        }
        rtts
    });
    let mut rtts = sender.join().expect("sender");
    token_write(to_b, 2);
    echo.join().expect("echo");
    // SAFETY: closing the two eventfds made above, once, after both threads ended.
    unsafe {
        libc::close(to_b);
        libc::close(to_a);
    }
    rtts.sort_by(f64::total_cmp);
    rtts
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let gap_us: u64 = args.get(1).map_or(10_000, |s| s.parse().expect("GAP_US"));
    let count: usize = args.get(2).map_or(300, |s| s.parse().expect("COUNT"));
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut placements = vec![("one cpu", Some(0), Some(0)), ("unpinned", None, None)];
    if cpus > 1 {
        placements.insert(1, ("two cpus", Some(0), Some(1)));
    }
    println!("placement,median_us,p99_us,max_us");
    for (name, a, b) in placements {
        let r = round_trips(a, b, Duration::from_micros(gap_us), count);
        let at = |q: f64| r[((r.len() as f64 * q) as usize).min(r.len() - 1)];
        println!("{name},{:.1},{:.1},{:.1}", at(0.5), at(0.99), r[r.len() - 1]);
    }
}
