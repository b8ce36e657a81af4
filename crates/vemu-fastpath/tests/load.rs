//! The program loads, and routes and counters read back as written.

use vemu_fastpath::{Bucket, BucketStats, Counted, FastPath, Route};

#[test]
fn routes_and_counters_of_a_loaded_program() {
    let ctl = vemu_sys::netlink::Netlink::open().unwrap();
    let fp = FastPath::load(ctl, 4).expect("the TC program loads (clang and BPF are needed)");
    fp.route(7, Route::Engine { tap: 8 }).unwrap();
    assert_eq!(fp.counted(7), Counted::default(), "no counter before a kernel route");
    fp.route(7, Route::Kernel { peer_of: 9, mtu: 1500 }).unwrap();
    assert_eq!(fp.counted(7), Counted::default());
    // Back to the engine and to the kernel again: the counter stays.
    fp.route(7, Route::Engine { tap: 8 }).unwrap();
    fp.route(7, Route::Kernel { peer_of: 9, mtu: 1500 }).unwrap();
    fp.route(8, Route::Deliver { peer_of: 7 }).unwrap();
    // The far ends of nodes' interfaces (from DENSE_BASE on) have theirs in arrays.
    let dense = vemu_fastpath::DENSE_BASE + 3;
    fp.route(dense, Route::Engine { tap: 8 }).unwrap();
    assert_eq!(fp.counted(dense), Counted::default());
    fp.route(dense, Route::Kernel { peer_of: 9, mtu: 1500 }).unwrap();
    fp.route(dense, Route::Bridge).unwrap();
    assert_eq!(
        (fp.counted(dense), fp.counted_out(dense), fp.counted_shaped(dense)),
        (Counted::default(), Counted::default(), Counted::default())
    );
    // Beyond the devices the program was loaded for: a clear error, not a crash.
    let e = fp
        .route(vemu_fastpath::DENSE_BASE + 4, Route::Kernel { peer_of: 9, mtu: 1500 })
        .unwrap_err();
    assert!(
        format!("{e:#}").contains(&format!("plane device {}", vemu_fastpath::DENSE_BASE + 4)),
        "{e:#}"
    );
    assert!(FastPath::load(vemu_sys::netlink::Netlink::open().unwrap(), u32::MAX).is_err());
}

#[test]
fn a_token_bucket_is_set_changed_and_read_back() {
    // In a network namespace of this thread's own: its loopback device (index 1) takes
    // the bucket.
    std::thread::spawn(|| {
        // SAFETY: unshare(2) of this thread's network namespace only.
        assert_eq!(
            unsafe { libc::unshare(libc::CLONE_NEWNET) },
            0,
            "{}",
            std::io::Error::last_os_error()
        );
        let fp = FastPath::load(vemu_sys::netlink::Netlink::open().unwrap(), 0)
            .expect("the TC program loads");
        assert_eq!(
            fp.shaped(1).unwrap(),
            BucketStats::default(),
            "a device without a bucket counts nothing"
        );
        fp.shape(1, Bucket { rate_bps: 100_000_000, burst_bytes: 12_500, limit_bytes: 1_514_000 })
            .unwrap();
        assert_eq!(fp.shaped(1).unwrap(), BucketStats::default());
        // Changed in place (counters kept), and above 32 bits of bytes per second.
        fp.shape(
            1,
            Bucket { rate_bps: 40_000_000_000, burst_bytes: 5_000_000, limit_bytes: 10_000_000 },
        )
        .unwrap();
        assert_eq!(fp.shaped(1).unwrap(), BucketStats::default());
        let e = fp
            .shape(99, Bucket { rate_bps: 1_000_000, burst_bytes: 3036, limit_bytes: 3036 })
            .unwrap_err();
        assert!(format!("{e:#}").contains("plane device 99"), "{e:#}");
        // What crosses the bucket is counted, and still counted once it is taken away.
        fp.set_device_up(1, true).unwrap();
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for _ in 0..10 {
            sock.send_to(&[0u8; 100], "127.0.0.1:9").unwrap();
        }
        let sent = fp.shaped(1).unwrap();
        assert!(sent.frames >= 10 && sent.bytes >= 10 * 128, "{sent:?}");
        fp.unshape(1).unwrap();
        assert_eq!(fp.shaped(1).unwrap(), BucketStats { queue_frames: 0, queue_bytes: 0, ..sent });
        fp.unshape(1).unwrap();
        fp.shape(1, Bucket { rate_bps: 100_000_000, burst_bytes: 12_500, limit_bytes: 1_514_000 })
            .unwrap();
        assert_eq!(
            fp.shaped(1).unwrap().frames,
            sent.frames,
            "a new bucket adds to what the old one did"
        );
        // IFB devices for LAN ports: made once each.
        fp.bridge_shaper().expect("the kernel makes IFB devices");
        let ifb = fp.ifb(5).unwrap();
        assert!(ifb > 1);
        assert_eq!((fp.ifb(5).unwrap(), fp.ifb_of(5), fp.ifb_of(6)), (ifb, Some(ifb), None));
    })
    .join()
    .unwrap();
}
