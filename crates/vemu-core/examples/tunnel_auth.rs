//! What sealing and opening a tunnel datagram costs (`tunnel::auth`, AES-256-GCM over
//! the whole datagram): time per datagram of each size, and the rate one core reaches.
//! `bench/run.sh machine-hop` runs it beside the machine hop's figures; prints CSV.

use std::time::Instant;
use vemu_core::tunnel::auth::{sender, Key, Opener, Sealer};

fn main() {
    let key = Key::new(&[7; 32]);
    println!("datagram_bytes,seal_ns,open_ns,gbit_per_s_sealed_and_opened");
    for size in [64usize, 512, 1444, 8944] {
        let n = 200_000;
        let mut s = Sealer::new(sender(0, 0));
        let mut o = Opener::default();
        let mut sealed = Vec::with_capacity(n.min(20_000));
        let body = vec![0x5au8; size];
        let t0 = Instant::now();
        for i in 0..n {
            let mut d = body.clone();
            s.seal(&key, &mut d);
            if i < 20_000 {
                sealed.push(d);
            }
        }
        let seal_ns = t0.elapsed().as_nanos() as f64 / n as f64;
        let t1 = Instant::now();
        let mut ok = 0;
        for d in &sealed {
            ok += o.open(&key, d).is_ok() as usize;
        }
        let open_ns = t1.elapsed().as_nanos() as f64 / sealed.len() as f64;
        assert_eq!(ok, sealed.len());
        let gbps = size as f64 * 8.0 / (seal_ns + open_ns);
        println!("{size},{seal_ns:.0},{open_ns:.0},{gbps:.2}");
    }
}
