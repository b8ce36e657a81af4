//! 802.11 PHYs as the MAC sees them: each standard's timing (slot, SIFS, DIFS, EIFS,
//! contention windows), its rates, how long a frame of some bytes takes on the air at a
//! rate (preamble, PLCP header, OFDM symbol rounding), and how likely it is received
//! intact at a signal-to-interference-plus-noise ratio.
//!
//! Presets: `Fhss` is the parameter set of Bianchi's validation (IEEE JSAC 18(3), 2000,
//! Table I), `B` 802.11b (DSSS/CCK, long preamble), `A` 802.11a (OFDM, 5 GHz), `G`
//! 802.11g (ERP-OFDM, 2.4 GHz: 9 µs slots with OFDM-only stations, a 6 µs signal
//! extension). Every value can be overridden ([`Timing`]).

use serde::{Deserialize, Serialize};

/// An 802.11 PHY standard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Standard {
    Fhss,
    B,
    A,
    G,
}

/// How bits are put on the air at a rate: what decides its airtime and its error rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Modulation {
    /// FHSS 2-GFSK, 1 Mbit/s (Bianchi's channel: no error model of its own beyond BPSK's).
    Gfsk,
    /// DSSS DBPSK (1 Mbit/s), DQPSK (2 Mbit/s).
    Dbpsk,
    Dqpsk,
    /// CCK, 5.5 and 11 Mbit/s.
    Cck,
    /// OFDM with this many bits per subcarrier symbol (1 BPSK, 2 QPSK, 4 16-QAM, 6
    /// 64-QAM) and code rate (numerator, denominator).
    Ofdm {
        bits: u8,
        code: (u8, u8),
    },
}

/// A rate of a standard.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Mode {
    pub rate_bps: u64,
    pub modulation: Modulation,
}

/// A standard's timing and sizes, every one overridable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    pub standard: Standard,
    pub slot_ns: u64,
    pub sifs_ns: u64,
    /// DIFS = SIFS + 2 slots unless set.
    pub difs_ns: u64,
    /// EIFS: after a frame received in error, instead of DIFS (SIFS + an ACK at the
    /// lowest rate + DIFS unless set).
    pub eifs_ns: u64,
    pub cw_min: u32,
    pub cw_max: u32,
    /// The PHY's preamble and header, ns (before the first bit at the frame's rate), and
    /// for OFDM the signal extension after the last symbol (802.11g).
    pub preamble_ns: u64,
    pub signal_extension_ns: u64,
    /// MAC header and FCS of a data frame, and the ACK, RTS and CTS frames, bits.
    pub data_header_bits: u64,
    pub ack_bits: u64,
    pub rts_bits: u64,
    pub cts_bits: u64,
    /// The rates (lowest first); the basic rate (control frames, broadcast) is one.
    pub modes: Vec<Mode>,
    /// Which of them is the basic rate (0: the lowest, as every preset).
    #[serde(default)]
    pub basic: usize,
}

const fn ofdm(mbps_x10: u64, bits: u8, code: (u8, u8)) -> Mode {
    Mode { rate_bps: mbps_x10 * 100_000, modulation: Modulation::Ofdm { bits, code } }
}

/// 802.11a/g's eight OFDM rates.
const OFDM_MODES: [Mode; 8] = [
    ofdm(60, 1, (1, 2)),
    ofdm(90, 1, (3, 4)),
    ofdm(120, 2, (1, 2)),
    ofdm(180, 2, (3, 4)),
    ofdm(240, 4, (1, 2)),
    ofdm(360, 4, (3, 4)),
    ofdm(480, 6, (2, 3)),
    ofdm(540, 6, (3, 4)),
];

impl Timing {
    /// A standard's values.
    pub fn preset(standard: Standard) -> Timing {
        // MAC header (24) and FCS (4), ACK and CTS (14), RTS (20) bytes.
        let real = |t: Timing| Timing {
            data_header_bits: 28 * 8,
            ack_bits: 14 * 8,
            rts_bits: 20 * 8,
            cts_bits: 14 * 8,
            ..t
        };
        let t = match standard {
            // Bianchi, Table I: FHSS, 1 Mbit/s; MAC header 272 bits, PHY header 128 bits,
            // ACK 112 bits + PHY header, RTS 160, CTS 112; slot 50 µs, SIFS 28, DIFS 128.
            Standard::Fhss => Timing {
                standard,
                slot_ns: 50_000,
                sifs_ns: 28_000,
                difs_ns: 128_000,
                eifs_ns: 0,
                cw_min: 31,
                cw_max: 1023,
                preamble_ns: 128_000,
                signal_extension_ns: 0,
                data_header_bits: 272,
                ack_bits: 112,
                rts_bits: 160,
                cts_bits: 112,
                modes: vec![Mode { rate_bps: 1_000_000, modulation: Modulation::Gfsk }],
                basic: 0,
            },
            Standard::B => real(Timing {
                standard,
                slot_ns: 20_000,
                sifs_ns: 10_000,
                difs_ns: 50_000,
                eifs_ns: 0,
                cw_min: 31,
                cw_max: 1023,
                preamble_ns: 192_000,
                signal_extension_ns: 0,
                data_header_bits: 0,
                ack_bits: 0,
                rts_bits: 0,
                cts_bits: 0,
                modes: vec![
                    Mode { rate_bps: 1_000_000, modulation: Modulation::Dbpsk },
                    Mode { rate_bps: 2_000_000, modulation: Modulation::Dqpsk },
                    Mode { rate_bps: 5_500_000, modulation: Modulation::Cck },
                    Mode { rate_bps: 11_000_000, modulation: Modulation::Cck },
                ],
                basic: 0,
            }),
            Standard::A | Standard::G => real(Timing {
                standard,
                slot_ns: 9_000,
                sifs_ns: if standard == Standard::A { 16_000 } else { 10_000 },
                difs_ns: 0,
                eifs_ns: 0,
                cw_min: 15,
                cw_max: 1023,
                preamble_ns: 20_000,
                signal_extension_ns: if standard == Standard::G { 6_000 } else { 0 },
                data_header_bits: 0,
                ack_bits: 0,
                rts_bits: 0,
                cts_bits: 0,
                modes: OFDM_MODES.to_vec(),
                basic: 0,
            }),
        };
        t.settled()
    }

    /// DIFS and EIFS filled in where left at 0.
    pub fn settled(mut self) -> Timing {
        if self.difs_ns == 0 {
            self.difs_ns = self.sifs_ns + 2 * self.slot_ns;
        }
        if self.eifs_ns == 0 {
            let lowest = self
                .modes
                .first()
                .copied()
                .unwrap_or(Mode { rate_bps: 1_000_000, modulation: Modulation::Dbpsk });
            self.eifs_ns =
                self.sifs_ns + self.airtime_bits_ns(lowest, self.ack_bits) + self.difs_ns;
        }
        self
    }

    /// The basic rate: control frames' and broadcasts' (the lowest unless `basic` says).
    pub fn basic_mode(&self) -> Mode {
        self.modes[self.basic.min(self.modes.len().saturating_sub(1))]
    }

    /// Airtime of a frame of `bits` (MAC header included) at `mode`, ns.
    pub fn airtime_bits_ns(&self, mode: Mode, bits: u64) -> u64 {
        match mode.modulation {
            Modulation::Ofdm { .. } => {
                // 16 service bits + the frame + 6 tail bits, in 4 µs symbols of N_DBPS
                // (data bits per symbol: rate × 4 µs).
                let n_dbps = mode.rate_bps * 4 / 1_000_000;
                let symbols = (16 + bits + 6).div_ceil(n_dbps.max(1));
                self.preamble_ns + symbols * 4_000 + self.signal_extension_ns
            }
            _ => self.preamble_ns + (bits * 1_000_000_000).div_ceil(mode.rate_bps.max(1)),
        }
    }

    /// Airtime of a data frame carrying `payload_bytes` at `mode`, ns.
    pub fn data_ns(&self, mode: Mode, payload_bytes: u64) -> u64 {
        self.airtime_bits_ns(mode, self.data_header_bits + payload_bytes * 8)
    }

    pub fn ack_ns(&self) -> u64 {
        self.airtime_bits_ns(self.basic_mode(), self.ack_bits)
    }

    pub fn rts_ns(&self) -> u64 {
        self.airtime_bits_ns(self.basic_mode(), self.rts_bits)
    }

    pub fn cts_ns(&self) -> u64 {
        self.airtime_bits_ns(self.basic_mode(), self.cts_bits)
    }
}

/// The bit error rate of `mode` at a signal-to-interference-plus-noise ratio `sinr`
/// (linear, over a 20 MHz channel, 22 MHz for DSSS): textbook uncoded forms (DBPSK,
/// DQPSK, BPSK/QPSK/M-QAM with Gray coding; CCK as DQPSK with its spreading gain) and,
/// for OFDM's convolutional code, its coding gain as a shift in SNR (5 dB at rate 1/2, 4
/// at 2/3, 3 at 3/4): the shape of ns-3's and the NIST model's curves, not their exact
/// values.
pub fn ber(mode: Mode, sinr: f64) -> f64 {
    use crate::propagation::erfc;
    let sinr = sinr.max(0.0);
    // Eb/N0 from the SNR: noise bandwidth over bit rate.
    let eb_n0 = |bandwidth_hz: f64| sinr * bandwidth_hz / mode.rate_bps.max(1) as f64;
    let q = |x: f64| 0.5 * erfc(x / std::f64::consts::SQRT_2);
    let b = match mode.modulation {
        // (FHSS: 1 MHz hops, no spreading gain.)
        Modulation::Gfsk => 0.5 * (-eb_n0(1e6)).exp(),
        Modulation::Dbpsk => 0.5 * (-eb_n0(22e6)).exp(),
        Modulation::Dqpsk => q((2.0 * eb_n0(22e6) * 0.586).sqrt()),
        Modulation::Cck => {
            // 8 chips a symbol of 4 (5.5) or 8 (11) bits: less spreading than DSSS.
            let gain = if mode.rate_bps > 6_000_000 { 1.0 } else { 2.0 };
            q((2.0 * eb_n0(22e6) * 0.586 * gain).sqrt())
        }
        Modulation::Ofdm { bits, code } => {
            let coding_db = match code {
                (1, 2) => 5.0,
                (2, 3) => 4.0,
                _ => 3.0,
            };
            let es_n0 = sinr * 10f64.powf(coding_db / 10.0) * 20e6 / (48.0 * 312_500.0);
            match bits {
                1 => q((2.0 * es_n0).sqrt()),
                2 => q(es_n0.sqrt()),
                m => {
                    let mm = f64::from(1u32 << m);
                    let k = f64::from(m);
                    (4.0 / k) * (1.0 - 1.0 / mm.sqrt()) * q((3.0 * es_n0 / (mm - 1.0)).sqrt())
                }
            }
        }
    };
    b.clamp(0.0, 0.5)
}

/// The probability that `bits` sent at `mode` all arrive intact at `sinr` (linear).
pub fn success_rate(mode: Mode, sinr: f64, bits: u64) -> f64 {
    let b = ber(mode, sinr);
    if b <= 0.0 {
        return 1.0;
    }
    (bits as f64 * (-b).ln_1p()).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bianchis_parameters_and_airtimes() {
        let t = Timing::preset(Standard::Fhss);
        // Bianchi: payload 8184 bits, H = PHY 128 + MAC 272: 8584 µs; ACK 240 µs.
        assert_eq!(t.data_ns(t.basic_mode(), 1023), 128_000 + 272_000 + 8_184_000);
        assert_eq!(t.ack_ns(), 240_000);
        assert_eq!((t.rts_ns(), t.cts_ns()), (288_000, 240_000));
        assert_eq!((t.slot_ns, t.sifs_ns, t.difs_ns), (50_000, 28_000, 128_000));
    }

    #[test]
    fn ofdm_rounds_to_symbols_and_dsss_has_its_long_preamble() {
        let a = Timing::preset(Standard::A);
        let m54 = *a.modes.last().unwrap();
        // 1500 bytes at 54 Mbit/s: 16 + 8 × 1528 + 6 = 12246 bits / 216 = 57 symbols.
        assert_eq!(a.data_ns(m54, 1500), 20_000 + 57 * 4_000);
        // ACK at 6 Mbit/s: (16 + 112 + 6) / 24 = 6 symbols: 44 µs.
        assert_eq!(a.ack_ns(), 44_000);
        assert_eq!((a.difs_ns, a.eifs_ns), (34_000, 16_000 + 44_000 + 34_000));
        let g = Timing::preset(Standard::G);
        assert_eq!(g.data_ns(m54, 1500), 20_000 + 57 * 4_000 + 6_000);
        let b = Timing::preset(Standard::B);
        let m11 = b.modes[3];
        // 1500 bytes at 11 Mbit/s: 192 µs + 12224 bits / 11 = 1111.3 → 1112 µs.
        assert_eq!(b.data_ns(m11, 1500), 192_000 + 1_111_273);
        assert_eq!(b.difs_ns, 50_000);
    }

    #[test]
    fn errors_fall_with_the_signal_and_rise_with_the_rate() {
        let a = Timing::preset(Standard::A);
        let db = |x: f64| 10f64.powf(x / 10.0);
        for m in &a.modes {
            assert!(ber(*m, db(0.0)) > ber(*m, db(10.0)) && ber(*m, db(10.0)) >= ber(*m, db(30.0)));
        }
        // At 10 dB, 6 Mbit/s carries a 1500-byte frame, 54 Mbit/s does not.
        assert!(success_rate(a.modes[0], db(10.0), 12_000) > 0.99);
        assert!(success_rate(a.modes[7], db(10.0), 12_000) < 0.01);
        assert!(success_rate(a.modes[7], db(30.0), 12_000) > 0.99);
    }
}
