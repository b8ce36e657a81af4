//! 802.11 as it is on the air, sans-IO on the lab clock: the PHYs' timing, airtime and
//! error rates ([`phy`]), the DCF ([`dcf`]: contention slot by slot, ACKs, retries,
//! binary exponential backoff, RTS/CTS and NAV, SINR reception), rate adaptation
//! ([`rate`]), a radio's frames as captures show them ([`monitor`]: radiotap), and
//! Bianchi's model of its saturation throughput ([`bianchi`]) that it is validated
//! against ([`saturation`] runs the same experiment on the DCF); infrastructure mode
//! ([`bss`]: access points, stations, association and roaming; carried on the DCF by
//! [`crate::air`] — not yet reachable from scenarios).

pub mod bianchi;
pub mod bss;
pub mod dcf;
pub mod monitor;
pub mod phy;
pub mod rate;
pub mod saturation;
