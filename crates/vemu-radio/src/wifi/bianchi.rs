//! Bianchi's model of the 802.11 DCF's saturation throughput (G. Bianchi, "Performance
//! Analysis of the IEEE 802.11 Distributed Coordination Function", IEEE JSAC 18(3),
//! 2000): n stations that always have a frame to send, binary exponential backoff from
//! W = CWmin + 1 over m stages, no retry limit, an ideal channel. What vemu's DCF is
//! validated against (`bench/run.sh wifi-bianchi`), as ns-3 validates its own.

/// Basic access (data, ACK) or RTS/CTS before every data frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Basic,
    Rts,
}

/// The model's inputs: times in ns; `payload_ns` is `E[P]`, the payload's airtime.
#[derive(Debug, Clone, Copy)]
pub struct Params {
    pub stations: u32,
    /// W (CWmin + 1) and m (stages: CWmax = 2^m W - 1).
    pub w: u32,
    pub m: u32,
    pub slot_ns: f64,
    pub sifs_ns: f64,
    pub difs_ns: f64,
    pub prop_ns: f64,
    /// H: PHY and MAC headers' airtime.
    pub header_ns: f64,
    pub payload_ns: f64,
    pub ack_ns: f64,
    pub rts_ns: f64,
    pub cts_ns: f64,
}

/// τ (a station's chance to transmit in a slot) and p (its frames' chance to collide).
pub fn tau_p(n: u32, w: u32, m: u32) -> (f64, f64) {
    let (w, m) = (f64::from(w), m as i32);
    let tau_of = |p: f64| {
        2.0 * (1.0 - 2.0 * p) / ((1.0 - 2.0 * p) * (w + 1.0) + p * w * (1.0 - (2.0 * p).powi(m)))
    };
    // p = 1 - (1 - τ(p))^(n-1): a fixed point, found by bisection on p.
    let f = |p: f64| 1.0 - (1.0 - tau_of(p)).powi(n as i32 - 1) - p;
    let (mut lo, mut hi) = (0.0f64, 1.0f64 - 1e-12);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        // (f is positive at 0 and negative near 1; τ is continuous through p = 1/2.)
        let v = if (mid - 0.5).abs() < 1e-12 { f(0.5 + 1e-9) } else { f(mid) };
        if v > 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let p = (lo + hi) / 2.0;
    (tau_of(p), p)
}

/// The saturation throughput: payload bits carried ÷ time ÷ the channel's bit rate (a
/// fraction of 1).
pub fn throughput(x: &Params, access: Access) -> f64 {
    let n = x.stations as i32;
    let (tau, _) = tau_p(x.stations, x.w, x.m);
    let p_tr = 1.0 - (1.0 - tau).powi(n);
    let p_s = f64::from(n as u32) * tau * (1.0 - tau).powi(n - 1) / p_tr;
    let (ts, tc) = match access {
        Access::Basic => (
            x.header_ns + x.payload_ns + x.sifs_ns + x.prop_ns + x.ack_ns + x.difs_ns + x.prop_ns,
            x.header_ns + x.payload_ns + x.difs_ns + x.prop_ns,
        ),
        Access::Rts => (
            x.rts_ns
                + x.sifs_ns
                + x.prop_ns
                + x.cts_ns
                + x.sifs_ns
                + x.prop_ns
                + x.header_ns
                + x.payload_ns
                + x.sifs_ns
                + x.prop_ns
                + x.ack_ns
                + x.difs_ns
                + x.prop_ns,
            x.rts_ns + x.difs_ns + x.prop_ns,
        ),
    };
    p_s * p_tr * x.payload_ns
        / ((1.0 - p_tr) * x.slot_ns + p_tr * p_s * ts + p_tr * (1.0 - p_s) * tc)
}

/// Bianchi's parameters (Table I) for `n` stations and (W, m).
pub fn table_one(stations: u32, w: u32, m: u32) -> Params {
    Params {
        stations,
        w,
        m,
        slot_ns: 50_000.0,
        sifs_ns: 28_000.0,
        difs_ns: 128_000.0,
        prop_ns: 1_000.0,
        header_ns: 400_000.0,
        payload_ns: 8_184_000.0,
        ack_ns: 240_000.0,
        rts_ns: 288_000.0,
        cts_ns: 240_000.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixed point solves Bianchi's two equations, and the throughput has the
    /// curves' shape: basic access falls with the number of stations (a small window
    /// the most), RTS/CTS stays nearly flat; one station alone is the closed form.
    #[test]
    fn the_model_solves_its_equations_and_has_bianchis_shape() {
        for (n, w, m) in [(5, 32, 3), (20, 32, 5), (50, 128, 3)] {
            let (tau, p) = tau_p(n, w, m);
            let (wf, m) = (f64::from(w), m as i32);
            let tau2 = 2.0 * (1.0 - 2.0 * p)
                / ((1.0 - 2.0 * p) * (wf + 1.0) + p * wf * (1.0 - (2.0 * p).powi(m)));
            assert!(
                (tau - tau2).abs() < 1e-9
                    && (p - (1.0 - (1.0 - tau).powi(n as i32 - 1))).abs() < 1e-9
            );
        }
        let s = |n, w, a| throughput(&table_one(n, w, 3), a);
        assert!(s(5, 32, Access::Basic) > s(20, 32, Access::Basic));
        assert!(s(20, 32, Access::Basic) > s(50, 32, Access::Basic));
        assert!(
            s(50, 128, Access::Basic) > s(50, 32, Access::Basic),
            "a bigger window collides less"
        );
        for n in [5, 10, 20, 50] {
            assert!(
                (0.80..0.86).contains(&s(n, 32, Access::Rts)),
                "{n}: {}",
                s(n, 32, Access::Rts)
            );
        }
        // One station: τ = 2/(W+1), no collision: S = τP / ((1-τ)σ + τTs).
        let x = table_one(1, 32, 3);
        let tau = 2.0 / 33.0;
        let ts = 400e3 + 8184e3 + 28e3 + 1e3 + 240e3 + 128e3 + 1e3;
        let closed = tau * 8184e3 / ((1.0 - tau) * 50e3 + tau * ts);
        assert!((throughput(&x, Access::Basic) - closed).abs() < 1e-9);
    }
}
