//! Bianchi's experiment on the DCF, on the virtual clock: `n` saturated stations (a frame
//! always waiting) sending to one receiver beside them, no retry limit, an ideal
//! channel (every station hears every other; frames that overlap are lost), with
//! Bianchi's FHSS parameters. Bianchi's model assumes that after a collision every
//! station — those that collided too — waits DIFS before counting slots again: here the
//! senders' ACK (CTS) timeout is DIFS and EIFS is DIFS, as in his model. What
//! `bench/run.sh wifi-bianchi` compares with [`super::bianchi::throughput`].

use super::bianchi::Access;
use super::dcf::{Dcf, DcfConfig, Outcome, StationConfig};
use super::phy::{Standard, Timing};
use super::rate::RateControl;
use crate::propagation::Model;
use crate::Pos;

/// Payload of every frame: Bianchi's 8184 bits.
pub const PAYLOAD_BYTES: u64 = 1023;

/// What a run measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    /// Payload bits delivered ÷ time ÷ the channel's rate.
    pub throughput: f64,
    /// Frames delivered; data frames sent (attempts).
    pub delivered: u64,
    pub attempts: u64,
}

/// The DCF configured as Bianchi's experiment: W = `w`, `m` stages.
pub fn config(w: u32, m: u32, access: Access, seed: u64) -> DcfConfig {
    let mut timing = Timing::preset(Standard::Fhss);
    timing.cw_min = w - 1;
    timing.cw_max = (w << m) - 1;
    timing.eifs_ns = timing.difs_ns;
    let mut c = DcfConfig::preset(timing, Model::UnitDisk { range_m: 100.0 }, seed);
    c.ack_timeout_ns = Some(c.timing.difs_ns);
    c.short_retry_limit = None;
    c.long_retry_limit = None;
    c.rts_threshold_bytes = match access {
        Access::Basic => None,
        Access::Rts => Some(0),
    };
    c.rate = RateControl::Constant { mode: 0 };
    c.queue_frames = 2;
    c
}

/// Run `n` saturated stations for `duration_ns` of lab time (the first tenth not
/// counted: a warm-up).
pub fn run(n: u32, w: u32, m: u32, access: Access, duration_ns: u64, seed: u64) -> Measured {
    let cfg = config(w, m, access, seed);
    let rate_bps = cfg.timing.basic_mode().rate_bps;
    // Within a metre or two of each other: the receiver is station n.
    let positions: Vec<Pos> =
        (0..=n).map(|i| Pos::new(f64::from(i % 8) * 0.2, f64::from(i / 8) * 0.2)).collect();
    let mut dcf = Dcf::new(cfg, &positions, &vec![StationConfig::default(); n as usize + 1]);
    let mut next_id = 0u64;
    let mut offer = |dcf: &mut Dcf, s: u32, t: u64| {
        next_id += 1;
        dcf.offer(t, s, (u64::from(s) << 40) | next_id, PAYLOAD_BYTES, Some(n));
    };
    for s in 0..n {
        offer(&mut dcf, s, 0);
    }
    let warm = duration_ns / 10;
    let (mut delivered, mut out) = (0u64, Vec::new());
    while let Some(t) = dcf.next_event_ns() {
        if t > duration_ns {
            break;
        }
        dcf.advance(t, &mut out);
        for o in out.drain(..) {
            match o {
                Outcome::Deliver { at_ns, .. } if at_ns >= warm => delivered += 1,
                Outcome::Done { id } => offer(&mut dcf, (id >> 40) as u32, t),
                _ => {}
            }
        }
    }
    let attempts = (0..n).map(|s| dcf.stats(s).tx_data).sum();
    let seconds = (duration_ns - warm) as f64 / 1e9;
    let throughput = delivered as f64 * PAYLOAD_BYTES as f64 * 8.0 / seconds / rate_bps as f64;
    Measured { throughput, delivered, attempts }
}
