//! Bianchi's validation on the virtual clock, as CSV: for each (W, m), access mode and
//! number of stations, the DCF's saturation throughput beside the model's
//! (`bench/run.sh wifi-bianchi` runs it; `SECONDS` of lab time each, default 100).

use vemu_radio::wifi::bianchi::{table_one, throughput, Access};
use vemu_radio::wifi::saturation;

fn main() {
    let secs: u64 = std::env::var("SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(100);
    let quick = std::env::args().any(|a| a == "--quick");
    println!("clock,cw_min,stages,access,stations,throughput,model,delivered,attempts");
    let cases: &[(u32, u32)] = if quick { &[(32, 3)] } else { &[(32, 3), (32, 5), (128, 3)] };
    for &(w, m) in cases {
        for access in [Access::Basic, Access::Rts] {
            for n in [5u32, 10, 20, 50] {
                let r = saturation::run(n, w, m, access, secs * 1_000_000_000, 42 + u64::from(n));
                let model = throughput(&table_one(n, w, m), access);
                let a = if access == Access::Basic { "basic" } else { "rts" };
                println!(
                    "virtual,{w},{m},{a},{n},{:.4},{model:.4},{},{}",
                    r.throughput, r.delivered, r.attempts
                );
            }
        }
    }
}
