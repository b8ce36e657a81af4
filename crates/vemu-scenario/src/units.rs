//! Quantities as people write them: `100Mbit`, `2.5ms`, `250us`, `1%`, `64KiB`.
//! Every parser returns a message that quotes the offending text.

/// Split `"2.5 ms"` into (2.5, "ms"). The number may be negative.
fn split(text: &str) -> Result<(f64, &str), String> {
    let t = text.trim();
    let end = t
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || c == '.' || ((c == '-' || c == '+') && i == 0)))
        .map(|(i, _)| i)
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(end);
    let value: f64 = num.parse().map_err(|_| format!("'{text}' is not a number with a unit"))?;
    if !value.is_finite() {
        return Err(format!("'{text}' is not a finite number"));
    }
    Ok((value, unit.trim()))
}

/// A rate in bits/s: `bit`, `kbit`, `Mbit`, `Gbit`, `Tbit` or `bps`, `kbps`, `Mbps`,
/// `Gbps`, `Tbps` (decimal prefixes, as tc).
pub fn rate_bps(text: &str) -> Result<u64, String> {
    let (v, unit) = split(text)?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "bit" | "bps" => 1e0,
        "kbit" | "kbps" => 1e3,
        "mbit" | "mbps" => 1e6,
        "gbit" | "gbps" => 1e9,
        "tbit" | "tbps" => 1e12,
        "" => return Err(format!("bandwidth '{text}' needs a unit, e.g. 100Mbit")),
        _ => {
            return Err(format!(
                "unknown unit '{unit}' in bandwidth '{text}': expected bit, kbit, Mbit, Gbit, Tbit (or bps, kbps, Mbps, Gbps)"
            ))
        }
    };
    if v <= 0.0 {
        return Err(format!("bandwidth must be greater than 0, got '{text}'"));
    }
    Ok((v * mult).round() as u64)
}

/// A duration in ns: `ns`, `us` (or `µs`), `ms`, `s`, `min`. A bare `0` is allowed.
pub fn duration_ns(text: &str) -> Result<u64, String> {
    let (v, unit) = split(text)?;
    let mult = match unit {
        "ns" => 1e0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "min" => 60e9,
        "h" => 3600e9,
        "" if v == 0.0 => 1.0,
        "" => return Err(format!("duration '{text}' needs a unit, e.g. 5ms")),
        _ => {
            return Err(format!(
                "unknown unit '{unit}' in duration '{text}': expected ns, us, ms, s, min or h"
            ))
        }
    };
    if v < 0.0 {
        return Err(format!("must not be negative, got '{text}'"));
    }
    Ok((v * mult).round() as u64)
}

/// A percentage, returned as a probability in 0.0 ..= 1.0.
pub fn percent(text: &str) -> Result<f64, String> {
    let (v, unit) = split(text)?;
    match unit {
        "%" => {}
        "" => return Err(format!("'{text}' needs a % sign, e.g. 1%")),
        _ => {
            return Err(format!("unknown unit '{unit}' in '{text}': expected a percentage like 1%"))
        }
    }
    if !(0.0..=100.0).contains(&v) {
        return Err(format!("must be between 0% and 100%, got {text}"));
    }
    Ok(v / 100.0)
}

/// A size in bytes: `B`, `KB`/`MB`/`GB` (decimal) or `KiB`/`MiB`/`GiB` (binary).
pub fn size_bytes(text: &str) -> Result<u64, String> {
    let (v, unit) = split(text)?;
    let mult = match unit {
        "B" => 1.0,
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        _ => {
            return Err(format!(
                "unknown unit '{unit}' in size '{text}': expected B, KB, MB, GB, KiB, MiB or GiB"
            ))
        }
    };
    if v < 0.0 {
        return Err(format!("must not be negative, got '{text}'"));
    }
    Ok((v * mult).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(rate_bps("100Mbit").unwrap(), 100_000_000);
        assert_eq!(rate_bps("1Gbit").unwrap(), 1_000_000_000);
        assert_eq!(rate_bps("2.5 Mbps").unwrap(), 2_500_000);
        assert!(rate_bps("100").unwrap_err().contains("needs a unit"));
        assert!(rate_bps("100MB/s").unwrap_err().contains("unknown unit 'MB/s'"));
        assert!(rate_bps("0Mbit").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(duration_ns("2.5ms").unwrap(), 2_500_000);
        assert_eq!(duration_ns("250us").unwrap(), 250_000);
        assert_eq!(duration_ns("1s").unwrap(), 1_000_000_000);
        assert_eq!(duration_ns("0").unwrap(), 0);
        assert!(duration_ns("-5ms").unwrap_err().contains("negative"));
        assert!(duration_ns("5 parsecs").unwrap_err().contains("unknown unit"));
        assert!(duration_ns("5").unwrap_err().contains("needs a unit"));
    }

    #[test]
    fn percents_and_sizes() {
        assert_eq!(percent("1%").unwrap(), 0.01);
        assert!(percent("150%").unwrap_err().contains("between 0% and 100%"));
        assert!(percent("0.5").is_err());
        assert_eq!(size_bytes("64KiB").unwrap(), 65536);
        assert_eq!(size_bytes("1MB").unwrap(), 1_000_000);
    }
}
