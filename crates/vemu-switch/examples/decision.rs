//! Switching decision time per frame for switches of 2 to 4096 ports (benchmark; run by
//! `bench/bench.py switch`). Every port has one learned station; frames go between
//! random stations, so the MAC table is probed at random as on a busy LAN.
//! Prints CSV: ports, unicast ns/frame, flood ns/frame, flood ns per recipient.

use std::time::Instant;

use vemu_switch::{Forward, PortConfig, Switch, DEFAULT_AGING_NS};

const BCAST: u64 = 0xffff_ffff_ffff;

fn main() {
    println!("ports,unicast_ns_per_frame,flood_ns_per_frame,flood_ns_per_recipient");
    let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for shift in 1..=12 {
        let ports = 1usize << shift;
        let mut s = Switch::new(&vec![PortConfig::default(); ports], DEFAULT_AGING_NS);
        let mac = |p: u64| 0x0200_0000_0000 | (p * 0x1_0001);
        for p in 0..ports as u64 {
            s.forward(0, p as u32, BCAST, mac(p));
        }
        let frames = 4_000_000u64;
        let pairs: Vec<(u32, u64, u64)> = (0..4096)
            .map(|_| {
                let (a, b) = (next() % ports as u64, next() % ports as u64);
                (a as u32, mac(b), mac(a))
            })
            .collect();
        let mut sink = 0u64;
        let t0 = Instant::now();
        for i in 0..frames {
            let (inp, dst, src) = pairs[(i & 4095) as usize];
            if let Forward::Unicast(p) = s.forward(i, inp, dst, src) {
                sink = sink.wrapping_add(p as u64);
            }
        }
        let unicast = t0.elapsed().as_nanos() as f64 / frames as f64;
        let floods = (400_000 / ports as u64).max(1000);
        let t0 = Instant::now();
        for i in 0..floods {
            let (inp, _, src) = pairs[(i & 4095) as usize];
            if let Forward::Flood(it) = s.forward(i, inp, BCAST, src) {
                sink = sink.wrapping_add(it.fold(0u64, |a, p| a + p as u64));
            }
        }
        let flood = t0.elapsed().as_nanos() as f64 / floods as f64;
        std::hint::black_box(sink);
        println!("{ports},{unicast:.1},{flood:.1},{:.2}", flood / (ports - 1) as f64);
    }
}
