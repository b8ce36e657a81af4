//! Channel update cost per tick: move every member (random waypoint) and recompute who
//! reaches whom, for 100 … 5000 members, with the medium's grid index and, for
//! comparison, by checking every pair. Prints CSV:
//! `members,layout,grid_us_per_tick,all_pairs_us_per_tick,mean_neighbours`.
//!
//! Layouts: `density` keeps NET's density (50 members in 1500 m × 300 m) by growing the
//! area with the members; `fixed` crowds them all into 1500 m × 300 m, where everyone
//! is everyone's neighbour and no index can beat N².

use std::time::Instant;

use vemu_radio::medium::{Medium, MediumConfig};
use vemu_radio::mobility::{Area, Mobility, RandomWaypoint, Walker};
use vemu_radio::propagation::{Model, Radio};
use vemu_radio::Pos;

fn main() {
    println!("members,layout,grid_us_per_tick,all_pairs_us_per_tick,mean_neighbours");
    for n in [100usize, 1000, 5000] {
        for layout in ["density", "fixed"] {
            let scale = if layout == "density" { (n as f64 / 50.0).sqrt() } else { 1.0 };
            let area = Area { width_m: 1500.0 * scale, height_m: 300.0 * scale };
            let model = Mobility::RandomWaypoint(RandomWaypoint {
                area,
                min_speed_mps: 0.0,
                max_speed_mps: 20.0,
                pause_ns: 0,
            });
            let mut walkers: Vec<Walker> = (0..n)
                .map(|i| {
                    let s = vemu_radio::splitmix64(i as u64);
                    let start = Pos::new(
                        (s >> 11) as f64 / (1u64 << 53) as f64 * area.width_m,
                        (s & 0xffff) as f64 / 65536.0 * area.height_m,
                    );
                    Walker::new(model.clone(), start, i as u64)
                })
                .collect();
            let pos: Vec<Pos> = walkers.iter().map(|w| w.position()).collect();
            let radio = Radio::default();
            let cfg = MediumConfig {
                model: Model::TwoRayGround,
                radio,
                rate_bps: 11_000_000,
                preamble_ns: 192_000,
                carrier_sense_m: 550.0,
                csma: false,
                queue_frames: 50,
                seed: 1,
                dcf: None,
                city: None,
                hub: None,
            };
            let mut medium = Medium::new(cfg, &pos);
            let ticks = if n >= 5000 && layout == "fixed" { 3 } else { 20 };
            let t0 = Instant::now();
            for k in 1..=ticks {
                let pos: Vec<Pos> =
                    walkers.iter_mut().map(|w| w.advance(k * 100_000_000)).collect();
                medium.set_positions(&pos);
            }
            let grid_us = t0.elapsed().as_secs_f64() * 1e6 / ticks as f64;
            let neighbours =
                (0..n as u32).map(|i| medium.neighbours(i).len()).sum::<usize>() as f64 / n as f64;
            // Every pair, as an emulator without an index does.
            let pos: Vec<Pos> = walkers.iter().map(|w| w.position()).collect();
            let t0 = Instant::now();
            let mut found = 0usize;
            for _ in 0..ticks.min(3) {
                for i in 0..n {
                    for j in 0..n {
                        if i != j
                            && Model::TwoRayGround
                                .delivery_probability(&radio, pos[i].distance(pos[j]))
                                > 0.0
                        {
                            found += 1;
                        }
                    }
                }
            }
            let all_us = t0.elapsed().as_secs_f64() * 1e6 / ticks.min(3) as f64;
            assert!(found > 0 || n < 2);
            println!("{n},{layout},{grid_us:.1},{all_us:.1},{neighbours:.1}");
        }
    }
}
