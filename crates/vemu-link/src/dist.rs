//! Delay-jitter distributions and netem's correlated random numbers.
//!
//! netem draws jitter from tables (`/usr/lib/tc/*.dist`) holding the inverse CDF of a
//! zero-mean, unit-scale distribution in units of 1/8192, clipped to the `i16` range
//! (±4). We compute the same inverse CDFs analytically from the generators in iproute2
//! (`netem/normal.c`, `pareto.c`, `paretonormal.c`), so a sample is `mean + σ·Q(u)` with
//! `u` uniform on [0, 1) — possibly correlated with the previous `u` as netem does.
//!
//! Beside these, an exponential shape and a [`Table`]: a netem-format distribution file,
//! or measured delays replayed as their empirical distribution.

use serde::{Deserialize, Serialize};

/// Shape of the jitter added to the delay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
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
    /// Exponential, shifted to zero mean: `−ln(1 − u) − 1`. With jitter = delay, the delay
    /// is exponential with that mean (an M/M/1 queue's sojourn, GINE's exponential delay).
    Exponential,
    /// A table of quantiles (see [`Table`]).
    Table(Table),
}

/// An empirical distribution: the inverse CDF of a zero-mean, unit-scale distribution at
/// evenly spaced quantiles (netem's `.dist` tables divided by 8192, or measured values
/// normalized by their mean and σ). A draw at quantile `u` is the entry at `⌊u·n⌋`, as
/// netem's `tabledist` picks one; measured values are kept whole (not clipped at ±4σ).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Table {
    /// Where it came from (a file name), to show.
    pub name: String,
    /// Sorted or not, as the file gave them (netem's tables are sorted).
    pub values: Vec<f32>,
}

/// Most entries a table keeps (as netem's `NETEM_DIST_MAX`; measured series are thinned
/// to this many evenly spaced quantiles).
pub const MAX_TABLE_ENTRIES: usize = 16384;

/// A measured series as a table, with its mean and σ in the series' own unit.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub table: Table,
    pub mean: f64,
    pub sigma: f64,
}

impl Table {
    /// A table in netem's format (iproute2's `maketable` output, `/usr/lib/tc/*.dist`):
    /// integers in units of 1/8192, separated by white space, `#` comments.
    pub fn from_netem(name: &str, text: &str) -> Result<Table, String> {
        let mut values = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("");
            for word in line.split_whitespace() {
                let v: i16 = word.parse().map_err(|_| {
                    format!("line {}: '{word}' is not a table entry (an integer from -32768 to 32767, in units of 1/8192)", i + 1)
                })?;
                if values.len() == MAX_TABLE_ENTRIES {
                    return Err(format!("line {}: more than {MAX_TABLE_ENTRIES} entries", i + 1));
                }
                values.push(v as f32 / 8192.0);
            }
        }
        if values.is_empty() {
            return Err("no entries (a netem table is integers in units of 1/8192)".into());
        }
        Ok(Table { name: name.to_string(), values })
    }

    /// Measured values (delays, in any one unit) as their empirical distribution: sorted,
    /// thinned to [`MAX_TABLE_ENTRIES`] quantiles when longer, normalized by their mean and
    /// σ — so that `delay = mean`, `jitter = σ` with this table replays the series.
    pub fn from_samples(name: &str, samples: &[f64]) -> Result<Measured, String> {
        if samples.len() < 2 {
            return Err(format!("{} values: at least 2 are needed", samples.len()));
        }
        if let Some(bad) = samples.iter().find(|v| !v.is_finite() || **v < 0.0) {
            return Err(format!("{bad} is not a delay (a finite value, not negative)"));
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len() as f64;
        let mean = sorted.iter().sum::<f64>() / n;
        let sigma = (sorted.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
        let keep = sorted.len().min(MAX_TABLE_ENTRIES);
        let values = (0..keep)
            .map(|i| {
                // The midpoint quantile of entry i among `keep`, read off the sorted series.
                let x = sorted[((i as f64 + 0.5) / keep as f64 * n) as usize];
                if sigma > 0.0 {
                    ((x - mean) / sigma) as f32
                } else {
                    0.0
                }
            })
            .collect();
        Ok(Measured { table: Table { name: name.to_string(), values }, mean, sigma })
    }

    fn at(&self, u: f64) -> f64 {
        let n = self.values.len();
        let i = ((u * n as f64) as usize).min(n - 1);
        self.values[i] as f64
    }
}

/// Largest magnitude of a netem table entry (32767 / 8192).
const TABLE_LIMIT: f64 = 32767.0 / 8192.0;

impl Distribution {
    /// The value of the unit-scale distribution at quantile `u` ∈ [0, 1).
    pub fn quantile(&self, u: f64) -> f64 {
        let v = match self {
            Distribution::Uniform => 2.0 * u - 1.0,
            Distribution::Normal => normal_quantile(u),
            Distribution::Pareto => pareto_quantile(u),
            Distribution::Paretonormal => (normal_quantile(u) + 3.0 * pareto_quantile(u)) / 4.0,
            // Not clipped at netem's ±4: the tail is the point of these.
            Distribution::Exponential => return -(1.0 - u).max(1e-12).ln() - 1.0,
            Distribution::Table(t) => return t.at(u),
        };
        v.clamp(-TABLE_LIMIT, TABLE_LIMIT)
    }

    /// Its name in status and scenarios (a table: `table FILE`).
    pub fn name(&self) -> String {
        match self {
            Distribution::Uniform => "uniform".into(),
            Distribution::Normal => "normal".into(),
            Distribution::Pareto => "pareto".into(),
            Distribution::Paretonormal => "paretonormal".into(),
            Distribution::Exponential => "exponential".into(),
            Distribution::Table(t) => format!("table {}", t.name),
        }
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
    fn exponential_has_zero_mean_and_unit_sigma() {
        let n = 1_000_000;
        let q: Vec<f64> = (0..n)
            .map(|i| Distribution::Exponential.quantile((i as f64 + 0.5) / n as f64))
            .collect();
        let mean = q.iter().sum::<f64>() / n as f64;
        let var = q.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 1e-3, "mean {mean}");
        assert!((var.sqrt() - 1.0).abs() < 1e-2, "sigma {}", var.sqrt());
        assert_eq!(Distribution::Exponential.quantile(0.0), -1.0);
    }

    #[test]
    fn netem_tables_are_read_in_units_of_1_8192() {
        let t = Table::from_netem("t.dist", "# a comment\n-8192 0 8192\n 16384 # two\n").unwrap();
        assert_eq!(t.values, vec![-1.0, 0.0, 1.0, 2.0]);
        let d = Distribution::Table(t);
        assert_eq!(d.quantile(0.0), -1.0);
        assert_eq!(d.quantile(0.3), 0.0);
        assert_eq!(d.quantile(0.999), 2.0);
        assert!(Table::from_netem("t", "1 2 x").unwrap_err().contains("'x'"));
        assert!(Table::from_netem("t", "40000").unwrap_err().contains("-32768"));
        assert!(Table::from_netem("t", "# nothing\n").is_err());
    }

    #[test]
    fn measured_samples_replay_their_own_quantiles() {
        let samples: Vec<f64> =
            (0..1000).map(|i| if i < 900 { 10.0 } else { 50.0 + i as f64 }).collect();
        let m = Table::from_samples("s", &samples).unwrap();
        let mean = samples.iter().sum::<f64>() / 1000.0;
        assert!((m.mean - mean).abs() < 1e-9);
        let d = Distribution::Table(m.table);
        let value = |u: f64| m.mean + m.sigma * d.quantile(u);
        assert!((value(0.5) - 10.0).abs() < 1e-3);
        assert!((value(0.95) - 1000.0 * 0.95 - 50.0).abs() < 1.5);
        // The tail is kept, far beyond 4 σ of netem's tables.
        assert!((value(0.9999) - 1049.0).abs() < 1e-2);
        assert!(Table::from_samples("s", &[1.0]).is_err());
        assert!(Table::from_samples("s", &[1.0, -2.0]).unwrap_err().contains("-2"));
    }

    #[test]
    fn uniform_spans_minus_one_to_one() {
        assert_eq!(Distribution::Uniform.quantile(0.0), -1.0);
        assert!((Distribution::Uniform.quantile(0.75) - 0.5).abs() < 1e-12);
    }
}
