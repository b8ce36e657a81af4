//! Delay-jitter distributions and netem's correlated random numbers.
//!
//! netem draws jitter from tables (`/usr/lib/tc/*.dist`) holding the inverse CDF of a
//! zero-mean, unit-scale distribution in units of 1/8192, clipped to the `i16` range
//! (±4). We compute the same inverse CDFs analytically from the generators in iproute2
//! (`netem/normal.c`, `pareto.c`, `paretonormal.c`), so a sample is `mean + σ·Q(u)` with
//! `u` uniform on [0, 1) — possibly correlated with the previous `u` as netem does.

use serde::{Deserialize, Serialize};

/// Shape of the jitter added to the delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    /// Uniform on [delay − jitter, delay + jitter) (netem's default without a table).
    #[default]
    Uniform,
    /// Normal with σ = jitter.
    Normal,
    /// Pareto (shape 3), shifted to zero mean and scaled by 4/3, as iproute2's `pareto.dist`.
    Pareto,
    /// (normal + 3 · pareto) / 4 at the same quantile, as iproute2's `paretonormal.dist`.
    Paretonormal,
}

/// Largest magnitude of a netem table entry (32767 / 8192).
const TABLE_LIMIT: f64 = 32767.0 / 8192.0;

impl Distribution {
    /// The value of the unit-scale distribution at quantile `u` ∈ [0, 1).
    pub fn quantile(self, u: f64) -> f64 {
        let v = match self {
            Distribution::Uniform => 2.0 * u - 1.0,
            Distribution::Normal => normal_quantile(u),
            Distribution::Pareto => pareto_quantile(u),
            Distribution::Paretonormal => (normal_quantile(u) + 3.0 * pareto_quantile(u)) / 4.0,
        };
        v.clamp(-TABLE_LIMIT, TABLE_LIMIT)
    }
}

/// iproute2 `pareto.c`: shape a = 3, `(1/(1-u)^(1/a) - 1.5) · 4/3`.
fn pareto_quantile(u: f64) -> f64 {
    let tail = (1.0 - u).max(1e-12);
    (tail.powf(-1.0 / 3.0) - 1.5) * (4.0 / 3.0)
}

/// Inverse of the standard normal CDF (Acklam's rational approximation, |rel. error| <
/// 1.2e-9, which is far below the 1/8192 resolution of netem's tables).
fn normal_quantile(u: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969683028665376e+01,
        2.209460984245205e+02,
        -2.759285104469687e+02,
        1.383_577_518_672_69e2,
        -3.066479806614716e+01,
        2.506628277459239e+00,
    ];
    const B: [f64; 5] = [
        -5.447609879822406e+01,
        1.615858368580409e+02,
        -1.556989798598866e+02,
        6.680131188771972e+01,
        -1.328068155288572e+01,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-03,
        -3.223964580411365e-01,
        -2.400758277161838e+00,
        -2.549732539343734e+00,
        4.374664141464968e+00,
        2.938163982698783e+00,
    ];
    const D: [f64; 4] = [
        7.784695709041462e-03,
        3.224671290700398e-01,
        2.445134137142996e+00,
        3.754408661907416e+00,
    ];
    let p = u.clamp(1e-300, 1.0 - 1e-16);
    let p_low = 0.02425;
    if p < p_low {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - p_low {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        let q = (-2.0 * (1.0 - p).ln()).sqrt();
        -(((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    }
}

/// netem's `get_crandom`: a uniform draw blended with the previous result,
/// `u' = u·(1−ρ) + last·ρ`. ρ = 0 gives independent draws.
#[derive(Debug, Clone, Copy, Default)]
pub struct Correlated {
    last: f64,
}

impl Correlated {
    pub fn next(&mut self, fresh_u: f64, rho: f64) -> f64 {
        if rho <= 0.0 {
            return fresh_u;
        }
        let v = fresh_u * (1.0 - rho) + self.last * rho;
        self.last = v;
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_quantile_known_points() {
        assert!((normal_quantile(0.5)).abs() < 1e-9);
        assert!((normal_quantile(0.975) - 1.959963985).abs() < 1e-6);
        assert!((normal_quantile(0.025) + 1.959963985).abs() < 1e-6);
        assert!((normal_quantile(0.8413447461) - 1.0).abs() < 1e-6);
    }

    #[test]
    fn pareto_matches_iproute2_table_ends() {
        // First entry of pareto.dist (i = 65536): (1 - 1.5) * 4/3 * 8192 = -5461.
        assert_eq!((Distribution::Pareto.quantile(0.0) * 8192.0).round(), -5461.0);
        // The table saturates at 32767 in the far tail.
        assert_eq!(Distribution::Pareto.quantile(0.999999), TABLE_LIMIT);
    }

    #[test]
    fn uniform_spans_minus_one_to_one() {
        assert_eq!(Distribution::Uniform.quantile(0.0), -1.0);
        assert!((Distribution::Uniform.quantile(0.75) - 0.5).abs() < 1e-12);
    }
}
