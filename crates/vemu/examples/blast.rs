//! Raw Ethernet frame generator for benchmarks (`bench/bench.py switch`): sends frames
//! of SIZE bytes to DST_MAC (or `broadcast`) out of IFACE as fast as it can for SECONDS,
//! then prints the number of frames sent; with RATE, at most RATE frames a second, evenly
//! spread. Run inside a node: `vemu exec h1 -- blast ...`.

use std::time::{Duration, Instant};

fn mac(s: &str) -> [u8; 6] {
    if s == "broadcast" {
        return [0xff; 6];
    }
    let v: Vec<u8> =
        s.trim().split(':').map(|x| u8::from_str_radix(x, 16).expect("bad MAC")).collect();
    v.try_into().expect("bad MAC")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 && args.len() != 6 {
        eprintln!("usage: blast IFACE DST_MAC|broadcast SIZE SECONDS [RATE]");
        std::process::exit(2);
    }
    let iface = &args[1];
    let dst = mac(&args[2]);
    let size: usize = args[3].parse().expect("SIZE");
    let seconds: f64 = args[4].parse().expect("SECONDS");
    let rate: Option<f64> = args.get(5).map(|r| r.parse().expect("RATE"));
    let src = mac(&std::fs::read_to_string(format!("/sys/class/net/{iface}/address"))
        .expect("no such interface"));
    let mut frame = vec![0u8; size.max(60)];
    frame[..6].copy_from_slice(&dst);
    frame[6..12].copy_from_slice(&src);
    frame[12..14].copy_from_slice(&[0x88, 0xb5]); // IEEE local experimental EtherType
    let name = std::ffi::CString::new(iface.as_str()).unwrap();
    // SAFETY: plain socket calls with valid arguments.
    let (fd, ifindex) = unsafe {
        let fd =
            libc::socket(libc::AF_PACKET, libc::SOCK_RAW, (libc::ETH_P_ALL as u16).to_be() as i32);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        (fd, libc::if_nametoindex(name.as_ptr()))
    };
    // SAFETY: sockaddr_ll is plain data; zeroed is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_ifindex = ifindex as i32;
    sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: binding our socket to a sockaddr_ll of the right size.
    let r = unsafe {
        libc::bind(
            fd,
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    assert!(r == 0, "bind: {}", std::io::Error::last_os_error());
    const BATCH: usize = 64;
    let mut iov = libc::iovec { iov_base: frame.as_mut_ptr().cast(), iov_len: frame.len() };
    let mut msgs: Vec<libc::mmsghdr> = (0..BATCH)
        .map(|_| {
            // SAFETY: mmsghdr is plain data; every entry points at the same iovec.
            let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
            m.msg_hdr.msg_iov = &mut iov;
            m.msg_hdr.msg_iovlen = 1;
            m
        })
        .collect();
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(seconds);
    let mut sent: u64 = 0;
    while Instant::now() < end {
        let due = match rate {
            Some(r) => {
                ((start.elapsed().as_secs_f64() * r) as u64).saturating_sub(sent).min(BATCH as u64)
            }
            None => BATCH as u64,
        };
        if due == 0 {
            std::thread::sleep(Duration::from_micros(20));
            continue;
        }
        // SAFETY: msgs holds BATCH valid headers.
        let n = unsafe { libc::sendmmsg(fd, msgs.as_mut_ptr(), due as u32, 0) };
        if n > 0 {
            sent += n as u64;
        } else {
            // Queue full: let the engine drain it.
            std::thread::yield_now();
        }
    }
    println!("{sent}");
}
