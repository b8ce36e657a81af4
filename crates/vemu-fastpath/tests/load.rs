//! The program loads, and routes and counters read back as written.

use vemu_fastpath::{Bucket, BucketStats, Counted, FastPath, Route};

#[test]
fn routes_and_counters_of_a_loaded_program() {
    let ctl = vemu_fastpath::netlink_socket().unwrap();
    let fp = FastPath::load(ctl).expect("the TC program loads (clang and BPF are needed)");
    fp.route(7, Route::Engine { tap: 8 }).unwrap();
    assert_eq!(fp.counted(7), Counted::default(), "no counter before a kernel route");
    fp.route(7, Route::Kernel { peer_of: 9 }).unwrap();
    assert_eq!(fp.counted(7), Counted::default());
    // Back to the engine and to the kernel again: the counter stays.
    fp.route(7, Route::Engine { tap: 8 }).unwrap();
    fp.route(7, Route::Kernel { peer_of: 9 }).unwrap();
    fp.route(8, Route::Deliver { peer_of: 7 }).unwrap();
}

#[test]
fn a_token_bucket_is_set_changed_and_read_back() {
    // In a network namespace of this thread's own: its loopback device (index 1) takes
    // the bucket.
    std::thread::spawn(|| {
        // SAFETY: unshare(2) of this thread's network namespace only.
        assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0, "{}", std::io::Error::last_os_error());
        let fp = FastPath::load(vemu_fastpath::netlink_socket().unwrap()).expect("the TC program loads");
        let e = fp.shaped(1).unwrap_err();
        assert!(format!("{e:#}").contains("token bucket of plane device 1"), "{e:#}");
        fp.shape(1, Bucket { rate_bps: 100_000_000, burst_bytes: 12_500, limit_bytes: 1_514_000 }).unwrap();
        assert_eq!(fp.shaped(1).unwrap(), BucketStats::default());
        // Changed in place (counters kept), and above 32 bits of bytes per second.
        fp.shape(1, Bucket { rate_bps: 40_000_000_000, burst_bytes: 5_000_000, limit_bytes: 10_000_000 }).unwrap();
        assert_eq!(fp.shaped(1).unwrap(), BucketStats::default());
        let e = fp.shape(99, Bucket { rate_bps: 1_000_000, burst_bytes: 3036, limit_bytes: 3036 }).unwrap_err();
        assert!(format!("{e:#}").contains("plane device 99"), "{e:#}");
    })
    .join()
    .unwrap();
}
