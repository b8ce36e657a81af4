//! Meters: a token bucket, and the three colour markers of RFC 2697 (srTCM) and
//! RFC 2698 (trTCM).
//!
//! Buckets are kept exactly, in byte·nanoseconds: a bucket filling at `rate` bytes/s
//! gains `rate × elapsed_ns` of them per update and holds at most `size × 10⁹`, so long
//! runs do not drift with rounding. Both RFCs say the buckets start full.

use crate::Color;

const NS_PER_S: u128 = 1_000_000_000;

/// One bucket: `rate_bytes_per_s` in, at most `size_bytes` held.
#[derive(Debug, Clone)]
struct Bucket {
    rate: u128,
    /// Capacity, byte·ns.
    cap: u128,
    /// Tokens, byte·ns.
    tokens: u128,
}

impl Bucket {
    fn new(rate_bytes_per_s: u64, size_bytes: u64) -> Bucket {
        let cap = size_bytes as u128 * NS_PER_S;
        Bucket { rate: rate_bytes_per_s as u128, cap, tokens: cap }
    }

    /// Add what `elapsed_ns` brings; returns what spilled over the top (byte·ns).
    fn fill(&mut self, elapsed_ns: u64) -> u128 {
        let t = self.tokens + self.rate * elapsed_ns as u128;
        self.tokens = t.min(self.cap);
        t - self.tokens
    }

    fn has(&self, bytes: u64) -> bool {
        self.tokens >= bytes as u128 * NS_PER_S
    }

    fn take(&mut self, bytes: u64) {
        self.tokens -= bytes as u128 * NS_PER_S;
    }
}

/// Time keeping shared by the meters: the last update (ns), never going back.
#[derive(Debug, Clone, Default)]
struct Clock {
    last_ns: Option<u64>,
}

impl Clock {
    fn elapsed(&mut self, now_ns: u64) -> u64 {
        let e = self.last_ns.map_or(0, |l| now_ns.saturating_sub(l));
        self.last_ns = Some(self.last_ns.map_or(now_ns, |l| l.max(now_ns)));
        e
    }
}

/// A token bucket policer: a packet conforms when the bucket holds its size.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    bucket: Bucket,
    clock: Clock,
}

impl TokenBucket {
    pub fn new(rate_bytes_per_s: u64, burst_bytes: u64) -> TokenBucket {
        TokenBucket { bucket: Bucket::new(rate_bytes_per_s, burst_bytes), clock: Clock::default() }
    }

    /// Whether a packet of `bytes` arriving at `now_ns` conforms (and is then charged).
    pub fn conforms(&mut self, now_ns: u64, bytes: u64) -> bool {
        let e = self.clock.elapsed(now_ns);
        self.bucket.fill(e);
        if self.bucket.has(bytes) {
            self.bucket.take(bytes);
            true
        } else {
            false
        }
    }
}

/// The single rate three colour marker (RFC 2697): a committed rate CIR with two
/// bursts, CBS (bucket C) and EBS (bucket E, filled by what overflows C).
#[derive(Debug, Clone)]
pub struct SrTcm {
    c: Bucket,
    e: Bucket,
    clock: Clock,
}

impl SrTcm {
    /// `cir` in bytes/s (the RFC's unit: IP packet bytes), `cbs`, `ebs` in bytes.
    pub fn new(cir_bytes_per_s: u64, cbs_bytes: u64, ebs_bytes: u64) -> SrTcm {
        SrTcm {
            c: Bucket::new(cir_bytes_per_s, cbs_bytes),
            e: Bucket::new(0, ebs_bytes),
            clock: Clock::default(),
        }
    }

    /// The colour of a packet of `bytes` arriving at `now_ns`; `pre` is its colour so
    /// far in colour-aware mode (`None`: colour-blind).
    pub fn mark(&mut self, now_ns: u64, bytes: u64, pre: Option<Color>) -> Color {
        // "Tc is incremented by one … if Tc is less than CBS, else if Te is less than EBS,
        // Te is incremented by one, else neither is incremented" (RFC 2697 sec. 3).
        let e = self.clock.elapsed(now_ns);
        let spill = self.c.fill(e);
        self.e.tokens = (self.e.tokens + spill).min(self.e.cap);
        let pre = pre.unwrap_or(Color::Green);
        if pre == Color::Green && self.c.has(bytes) {
            self.c.take(bytes);
            Color::Green
        } else if pre != Color::Red && self.e.has(bytes) {
            self.e.take(bytes);
            Color::Yellow
        } else {
            Color::Red
        }
    }
}

/// The two rate three colour marker (RFC 2698): a peak rate PIR with burst PBS (bucket
/// P) and a committed rate CIR with burst CBS (bucket C), filled independently.
#[derive(Debug, Clone)]
pub struct TrTcm {
    p: Bucket,
    c: Bucket,
    clock: Clock,
}

impl TrTcm {
    /// Rates in bytes/s, bursts in bytes.
    pub fn new(
        pir_bytes_per_s: u64,
        pbs_bytes: u64,
        cir_bytes_per_s: u64,
        cbs_bytes: u64,
    ) -> TrTcm {
        TrTcm {
            p: Bucket::new(pir_bytes_per_s, pbs_bytes),
            c: Bucket::new(cir_bytes_per_s, cbs_bytes),
            clock: Clock::default(),
        }
    }

    /// The colour of a packet of `bytes` arriving at `now_ns` (`pre`: colour-aware).
    pub fn mark(&mut self, now_ns: u64, bytes: u64, pre: Option<Color>) -> Color {
        let e = self.clock.elapsed(now_ns);
        self.p.fill(e);
        self.c.fill(e);
        let pre = pre.unwrap_or(Color::Green);
        if pre == Color::Red || !self.p.has(bytes) {
            Color::Red
        } else if pre == Color::Yellow || !self.c.has(bytes) {
            self.p.take(bytes);
            Color::Yellow
        } else {
            self.p.take(bytes);
            self.c.take(bytes);
            Color::Green
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Color::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn token_bucket_passes_its_burst_then_its_rate() {
        // 1000 B/s, burst 3000 B: three 1000-byte packets at once, then one per second.
        let mut tb = TokenBucket::new(1000, 3000);
        let at_once: Vec<bool> = (0..4).map(|_| tb.conforms(0, 1000)).collect();
        assert_eq!(at_once, [true, true, true, false]);
        assert!(!tb.conforms(S / 2, 1000), "half a second brings 500 B");
        assert!(tb.conforms(S, 1000), "a second brings 1000 B");
        // Over 100 s of packets every 10 ms, exactly the rate passes (plus the burst).
        let mut tb = TokenBucket::new(1000, 3000);
        let passed = (0..10_000u64).filter(|i| tb.conforms(i * S / 100, 100)).count();
        // By the last packet (99.99 s) the bucket has had 3000 + 99,990 bytes: 1029 packets.
        assert_eq!(passed, (3000 + 1000 * 9999 / 100) / 100, "burst + rate × time, to the packet");
    }

    #[test]
    fn srtcm_colour_blind_follows_rfc_2697() {
        // CIR 1000 B/s, CBS 1500, EBS 1500; both buckets start full.
        let mut m = SrTcm::new(1000, 1500, 1500);
        assert_eq!(
            [m.mark(0, 1000, None), m.mark(0, 1000, None), m.mark(0, 1000, None)],
            [Green, Yellow, Red]
        );
        // After 1 s: Tc gained 1000 (500 → 1500, at CBS), Te nothing (C did not overflow).
        assert_eq!(m.mark(S, 1500, None), Green);
        assert_eq!(m.mark(S, 500, None), Yellow, "Te still holds 500");
        assert_eq!(m.mark(S, 1, None), Red);
        // 3 s later: C fills to 1500 in 1.5 s, the next 1.5 s overflow into E (1500).
        assert_eq!(m.mark(4 * S, 1500, None), Green);
        assert_eq!(m.mark(4 * S, 1500, None), Yellow);
        assert_eq!(m.mark(4 * S, 1, None), Red);
    }

    #[test]
    fn srtcm_colour_aware_never_improves_a_colour() {
        let mut m = SrTcm::new(1000, 1500, 1500);
        assert_eq!(m.mark(0, 1000, Some(Yellow)), Yellow, "yellow uses E even while C is full");
        assert_eq!(m.mark(0, 1000, Some(Red)), Red);
        assert_eq!(m.mark(0, 1000, Some(Green)), Green, "C untouched by the yellow one");
        assert_eq!(m.mark(0, 1000, Some(Yellow)), Red, "E has 500 left");
    }

    #[test]
    fn trtcm_follows_rfc_2698() {
        // PIR 2000 B/s, PBS 2000; CIR 1000 B/s, CBS 1000.
        let mut m = TrTcm::new(2000, 2000, 1000, 1000);
        assert_eq!(m.mark(0, 1000, None), Green);
        assert_eq!(m.mark(0, 1000, None), Yellow, "over CIR, within PIR");
        assert_eq!(m.mark(0, 1, None), Red, "over PIR");
        // 0.5 s: P gains 1000, C gains 500.
        assert_eq!(m.mark(S / 2, 600, None), Yellow);
        assert_eq!(m.mark(S / 2, 400, None), Green);
        // Colour-aware: a red packet stays red; a yellow one does not take C.
        let mut m = TrTcm::new(2000, 2000, 1000, 1000);
        assert_eq!(m.mark(0, 1000, Some(Red)), Red);
        assert_eq!(m.mark(0, 1000, Some(Yellow)), Yellow);
        assert_eq!(m.mark(0, 1000, Some(Green)), Green, "C was left for it");
        assert_eq!(m.mark(0, 1, Some(Green)), Red, "P is empty");
    }

    #[test]
    fn long_runs_do_not_drift() {
        // A packet stream at exactly CIR for an hour stays green throughout.
        let mut m = SrTcm::new(125_000, 1500, 1500);
        let gap_ns = 1500 * S / 125_000;
        assert!((0..2_400_000u64).all(|i| m.mark(i * gap_ns, 1500, None) == Green));
        // Time never goes back: an older timestamp adds nothing.
        let mut tb = TokenBucket::new(1000, 1000);
        assert!(tb.conforms(10 * S, 1000));
        assert!(!tb.conforms(5 * S, 1000));
    }
}
