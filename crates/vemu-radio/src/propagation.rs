//! Propagation models: the mean received power at a distance, and the probability that
//! a frame is received (its power above the receive threshold). Textbook forms, with the
//! conventions of ns-2's `Propagation/*` models so that published MANET setups carry over.

use serde::{Deserialize, Serialize};

/// Speed of light, m/s.
pub const C: f64 = 299_792_458.0;

/// What a transmitter and its receivers are like.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Radio {
    /// Transmit power, W.
    pub tx_power_w: f64,
    /// Carrier frequency, Hz.
    pub frequency_hz: f64,
    /// Antenna gains (linear) and heights (m) of sender and receiver.
    pub gain_tx: f64,
    pub gain_rx: f64,
    pub height_tx_m: f64,
    pub height_rx_m: f64,
    /// System loss (linear, ≥ 1).
    pub system_loss: f64,
    /// Receive threshold, W: weaker frames are not received.
    pub rx_threshold_w: f64,
}

impl Default for Radio {
    /// ns-2's defaults (914 MHz Lucent WaveLAN, 1.5 m antennas), whose receive threshold
    /// gives a 250 m range under two-ray ground.
    fn default() -> Radio {
        Radio {
            tx_power_w: 0.281_838_15,
            frequency_hz: 914e6,
            gain_tx: 1.0,
            gain_rx: 1.0,
            height_tx_m: 1.5,
            height_rx_m: 1.5,
            system_loss: 1.0,
            rx_threshold_w: 3.652e-10,
        }
    }
}

impl Radio {
    pub fn wavelength_m(&self) -> f64 {
        C / self.frequency_hz
    }
}

/// A propagation model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "kebab-case")]
pub enum Model {
    /// Received within `range_m`, never beyond.
    UnitDisk { range_m: f64 },
    /// Friis: Pr = Pt Gt Gr λ² / ((4π d)² L).
    FreeSpace,
    /// Friis up to the crossover distance 4π ht hr / λ, then Pr = Pt Gt Gr ht² hr² / (d⁴ L).
    TwoRayGround,
    /// Path loss growing with `exponent` beyond `d0_m` (Friis up to there), plus
    /// log-normal shadowing of `sigma_db`: each frame's power is the mean plus a normal
    /// draw in dB.
    LogDistance { exponent: f64, d0_m: f64, sigma_db: f64 },
}

impl Model {
    /// Mean received power at distance `d_m`, W.
    pub fn mean_rx_power_w(&self, r: &Radio, d_m: f64) -> f64 {
        let d = d_m.max(1e-3);
        let friis = |d: f64| {
            r.tx_power_w * r.gain_tx * r.gain_rx * r.wavelength_m().powi(2)
                / ((4.0 * std::f64::consts::PI * d).powi(2) * r.system_loss)
        };
        match *self {
            Model::UnitDisk { range_m } => {
                if d_m <= range_m {
                    f64::INFINITY
                } else {
                    0.0
                }
            }
            Model::FreeSpace => friis(d),
            Model::TwoRayGround => {
                let crossover =
                    4.0 * std::f64::consts::PI * r.height_tx_m * r.height_rx_m / r.wavelength_m();
                if d <= crossover {
                    friis(d)
                } else {
                    r.tx_power_w
                        * r.gain_tx
                        * r.gain_rx
                        * r.height_tx_m.powi(2)
                        * r.height_rx_m.powi(2)
                        / (d.powi(4) * r.system_loss)
                }
            }
            Model::LogDistance { exponent, d0_m, .. } => {
                if d <= d0_m {
                    friis(d)
                } else {
                    friis(d0_m) * (d0_m / d).powf(exponent)
                }
            }
        }
    }

    /// Probability that a frame sent over `d_m` arrives above the receive threshold.
    pub fn delivery_probability(&self, r: &Radio, d_m: f64) -> f64 {
        self.probability_at(r, self.mean_rx_power_w(r, d_m))
    }

    /// The mean received power over `d_m` with `loss_db` more in the way (walls: see
    /// [`crate::city`]), W. Under the unit disk only an infinite loss (an opaque
    /// obstacle) matters: in range is in range.
    pub fn mean_rx_power_lossy_w(&self, r: &Radio, d_m: f64, loss_db: f64) -> f64 {
        let mean = self.mean_rx_power_w(r, d_m);
        if loss_db == f64::INFINITY {
            0.0
        } else if loss_db > 0.0 && mean.is_finite() {
            mean * 10f64.powf(-loss_db / 10.0)
        } else {
            mean
        }
    }

    /// Probability that a frame received with mean power `mean_w` is above the receive
    /// threshold.
    pub fn probability_at(&self, r: &Radio, mean_w: f64) -> f64 {
        match *self {
            Model::LogDistance { sigma_db, .. } if sigma_db > 0.0 => {
                if mean_w <= 0.0 {
                    return 0.0;
                }
                // P(mean_dB + X > thr_dB), X ~ N(0, σ²)
                let z = (crate::dbm(r.rx_threshold_w) - crate::dbm(mean_w)) / sigma_db;
                0.5 * erfc(z / std::f64::consts::SQRT_2)
            }
            _ => {
                if mean_w >= r.rx_threshold_w {
                    1.0
                } else {
                    0.0
                }
            }
        }
    }

    /// The distance at which the mean received power falls to the threshold, m.
    pub fn range_m(&self, r: &Radio) -> f64 {
        let (mut lo, mut hi) = (0.0f64, 1e7f64);
        for _ in 0..200 {
            let mid = (lo + hi) / 2.0;
            if self.mean_rx_power_w(r, mid) >= r.rx_threshold_w {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

/// Complementary error function: Numerical Recipes' `erfcc` (a Chebyshev fit, fractional
/// error below 1.2e-7 everywhere), enough for delivery probabilities.
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let ans = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 {
        ans
    } else {
        2.0 - ans
    }
}
