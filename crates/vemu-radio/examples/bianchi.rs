//! Bianchi's validation on the virtual clock, as CSV: for each (W, m), access mode and
//! number of stations, the DCF's saturation throughput beside the model's
//! (`bench/run.sh wifi-bianchi` runs it; `SECONDS` of lab time each, default 100).
//! `--model W M ACCESS N...` prints only the model's throughput for those cases (`n,model`
//! lines): what the bench's real-lab rows are compared with.

use vemu_radio::wifi::bianchi::{table_one, throughput, Access};
use vemu_radio::wifi::saturation;

fn main() {
    let secs: u64 = std::env::var("SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(100);
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--model") {
        let num = |i: usize| -> u32 {
            args.get(i).and_then(|s| s.parse().ok()).unwrap_or_else(|| {
                eprintln!("usage: bianchi --model W M basic|rts N...");
                std::process::exit(2)
            })
        };
        let (w, m) = (num(1), num(2));
        let access = if args.get(3).map(String::as_str) == Some("rts") {
            Access::Rts
        } else {
            Access::Basic
        };
        for i in 4..args.len() {
            println!("{},{:.4}", num(i), throughput(&table_one(num(i), w, m), access));
        }
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
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
