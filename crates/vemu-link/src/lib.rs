//! Sans-IO model of one direction of an emulated link.
//!
//! A [`LinkDir`] decides, for every frame offered to it at a time `now_ns` on the lab
//! clock, whether the frame is dropped (and why) or when it is to be delivered at the
//! far end, and whether it is corrupted or duplicated. It never reads a clock or
//! touches a socket: time comes in as a parameter, randomness from a generator seeded
//! by the caller. The same seed and the same sequence of offers give the same
//! decisions, to the nanosecond.
//!
//! The order of operations, as [`LinkDir::offer`] applies them:
//! link state → loss → duplication → per copy: corruption → queue limit → serialization
//! at the link rate → reordering (the copy skips the delay line) or propagation delay +
//! jitter. With `qos` set, a conditioning stage ([`vemu_qos::stage`]: classes, meters,
//! WRED, strict priority and DRR) takes the place of the single queue and serializer,
//! and the wire after it does the rest: link state → qos stage (classify, meter, queue,
//! serialize in the scheduler's order) → loss → duplication → per copy: corruption →
//! reordering or delay + jitter; see [`LinkDir::offer_classed`]. Unlike Linux netem, which draws duplication first and lets a loss remove one
//! of the copies, a lost frame here is never duplicated: with loss p and duplication d
//! a frame is lost with probability p and arrives twice with probability (1 − p)·d.

pub mod dist;
mod model;

pub use dist::{Distribution, Table};
pub use model::{Delivery, DropCause, Left, LinkDir, Offer, Outcome, Pace, PACE_GAP_NS};
pub use vemu_qos::stage::{Discipline, QosConfig};

use serde::{Deserialize, Serialize};

/// Everything that shapes one direction of a link. All fields have a neutral default
/// (an ideal wire: no rate limit, no delay, no loss).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Impairments {
    /// Serialization rate in bits/s; `None` means unlimited.
    pub rate_bps: Option<u64>,
    /// Constant one-way propagation delay, ns.
    pub delay_ns: u64,
    pub jitter: Jitter,
    pub loss: Loss,
    /// Bit error rate (IMUNES' `ber`, as a probability per bit): a frame of L bytes on
    /// the wire is lost with 1 − (1 − ber)^(8L), so big frames more than small ones;
    /// beside the loss model (a frame either loses is lost).
    #[serde(default)]
    pub ber: f64,
    /// Phantom load: bits/s of background traffic that has no frames, taking its share
    /// of the rate — full-size frames at that constant rate occupy the serializer and the
    /// queue (never dropped themselves), delaying and crowding out the real ones; 0: none.
    #[serde(default)]
    pub phantom_bps: u64,
    /// A phantom load whose rate follows a trace instead (`phantom_bps` is then 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phantom_trace: Option<PhantomTrace>,
    /// Probability that a frame is sent twice.
    pub duplicate: Chance,
    /// Probability that one random bit of a frame is flipped.
    pub corrupt: Chance,
    pub reorder: Reorder,
    /// Queue limit; `None` means the default (see [`Impairments::queue_limit`]).
    pub queue: Option<QueueLimit>,
    /// Largest frame (IP packet, bytes) this direction carries; `None`: interface default.
    pub mtu: Option<u32>,
    /// Traffic conditioning and per-class queues in front of the serializer (DiffServ);
    /// `None`: one FIFO queue.
    #[serde(default)]
    pub qos: Option<QosConfig>,
    /// What carries out the rate when it is the only impairment (see [`Shaper`]).
    #[serde(default)]
    pub shaper: Shaper,
    /// Flows with impairments of their own instead of these ([`Flow`]); the first that
    /// matches a frame takes it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<Flow>,
}

/// What carries out a direction's rate when the rate (with its queue limit) is the only
/// impairment, the direction is up and not captured. With anything else set, or
/// captured, the engine's exact serializer does, whatever this says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Shaper {
    /// The engine's serializer: every frame waits its transmission time at the set rate
    /// (an idle link delays a 1500-byte frame by 120 µs at 100 Mbit/s), exactly.
    #[default]
    Engine,
    /// The kernel's token bucket (`tbf`) on the kernel fast path, as Mininet's and
    /// containerlab's links shape: the rate holds on average and bursts last at most
    /// 4 ms (two full frames at least), but a frame on an idle link leaves at once, not
    /// after its transmission time. No frame leaves the kernel, so many shaped links cost
    /// no more than the kernel's own forwarding.
    Kernel,
}

impl Shaper {
    pub fn name(self) -> &'static str {
        match self {
            Shaper::Engine => "engine",
            Shaper::Kernel => "kernel",
        }
    }
}

/// Per-flow impairments (GINE's first case): frames of one flow on a direction —
/// matched by protocol, addresses or prefixes, ports, DSCP, ICMP type — take a pipe of
/// their own (its own delay, jitter, loss, rate and queue); the other frames take the
/// direction's, untouched.
/// Most flows a direction may have.
pub const MAX_FLOWS: usize = 16;

/// One flow of a direction: which frames, and what happens to them instead of the
/// direction's impairments (the first flow that matches a frame takes it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Flow {
    #[serde(rename = "match")]
    pub matches: vemu_qos::classify::Match,
    /// Its own impairments, from an ideal wire (not the direction's): no flows, qos or
    /// MTU of their own.
    pub impairments: Impairments,
}

impl Flow {
    pub fn validate(&self) -> Result<(), String> {
        let i = &self.impairments;
        if !i.flows.is_empty() || i.qos.is_some() || i.mtu.is_some() {
            return Err("a flow has delay, jitter, loss, rate and the like of its own, not flows, qos or an MTU".into());
        }
        if self.matches == vemu_qos::classify::Match::default() {
            return Err("a flow needs a match (proto, src, dst, sport, dport, dscp, icmp-type): it would take every frame".into());
        }
        i.validate()
    }
}

/// A phantom load that follows a trace of rates (IMUNES' background traffic from a
/// trace): from each step's lab time on, its rate, until the next step; after the last
/// step, that rate — or, with a period, the trace again from the start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhantomTrace {
    /// Where it came from (a file name), to show.
    pub name: String,
    /// (lab time, ns; rate, bits/s), times increasing, the first at 0.
    pub steps: Vec<(u64, u64)>,
    /// The trace repeats every this many ns (`None`: the last rate holds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_ns: Option<u64>,
}

/// Most steps a phantom trace may have.
pub const MAX_PHANTOM_STEPS: usize = 1_000_000;

impl PhantomTrace {
    pub fn validate(&self) -> Result<(), String> {
        if self.steps.is_empty() || self.steps.len() > MAX_PHANTOM_STEPS {
            return Err(format!(
                "a phantom trace has 1 to {MAX_PHANTOM_STEPS} steps, got {}",
                self.steps.len()
            ));
        }
        if self.steps[0].0 != 0 {
            return Err("a phantom trace starts at time 0".into());
        }
        if self.steps.windows(2).any(|w| w[1].0 <= w[0].0) {
            return Err("a phantom trace's times must increase".into());
        }
        if let Some(p) = self.period_ns {
            if p <= self.steps.last().expect("a step").0 {
                return Err(
                    "a phantom trace's period must be longer than its last step's time".into()
                );
            }
        }
        Ok(())
    }

    /// The rate at lab time `t_ns`, and when it next changes (`u64::MAX`: never).
    pub fn at(&self, t_ns: u64) -> (u64, u64) {
        let (base, t) = match self.period_ns {
            Some(p) if p > 0 => (t_ns - t_ns % p, t_ns % p),
            _ => (0, t_ns),
        };
        let i = self.steps.partition_point(|s| s.0 <= t) - 1;
        let next = match (self.steps.get(i + 1), self.period_ns) {
            (Some(s), _) => base + s.0,
            (None, Some(p)) if p > 0 => base + p,
            (None, _) => u64::MAX,
        };
        (self.steps[i].1, next)
    }
}

/// A probability with netem-style correlation to the previous draw.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Chance {
    /// 0.0 ..= 1.0
    pub probability: f64,
    /// 0.0 ..= 1.0; netem's `get_crandom` weighting of the previous random value.
    pub correlation: f64,
}

/// Random variation added to the delay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Jitter {
    /// Scale of the variation, ns (netem's `jitter`): half-width for uniform, σ for the others.
    pub amount_ns: u64,
    pub distribution: Distribution,
    /// 0.0 ..= 1.0, as netem.
    pub correlation: f64,
}

/// Loss model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "model", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Loss {
    #[default]
    None,
    /// Independent (or netem-correlated) loss with probability `rate`.
    Bernoulli { rate: f64, correlation: f64 },
    /// Two-state Markov chain. `p`: P(Good→Bad) per frame, `r`: P(Bad→Good) per frame,
    /// `h`: probability a frame *gets through* in Bad, `k`: probability it gets through in
    /// Good. Loss in Bad is `1-h`, in Good `1-k` (netem's `loss gemodel p r 1-h 1-k`).
    GilbertElliott { p: f64, r: f64, h: f64, k: f64 },
}

/// netem-style reordering: with `probability` (after at least `gap - 1` frames in order),
/// a frame skips the delay line and overtakes the frames delayed before it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reorder {
    pub probability: f64,
    pub correlation: f64,
    /// At least 1.
    pub gap: u32,
}

impl Default for Reorder {
    fn default() -> Self {
        Reorder { probability: 0.0, correlation: 0.0, gap: 1 }
    }
}

/// Limit of the queue in front of the serializer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueueLimit {
    /// Wire frames waiting for (or in) serialization.
    Packets(u64),
    /// Wire bytes waiting for (or in) serialization.
    Bytes(u64),
}

/// Longest delay (and jitter) a direction may have, ns: one hour. Longer ones are
/// surely mistakes, and they keep lab-clock arithmetic far from overflowing.
pub const MAX_DELAY_NS: u64 = 3_600_000_000_000;
/// Highest rate a direction may have, bits/s: 1 Tbit/s.
pub const MAX_RATE_BPS: u64 = 1_000_000_000_000;

/// Bytes of a full-size Ethernet frame (1500-byte IP packet + 14-byte header), used to
/// convert between packet and byte limits.
pub const FULL_FRAME_BYTES: u64 = 1514;
/// Default queue limit in frames when the bandwidth-delay product is smaller (the same
/// as Linux's default `txqueuelen` and netem's default `limit`).
pub const DEFAULT_QUEUE_PACKETS: u64 = 1000;

/// A partial set of impairments: the fields that are `Some` replace the ones of an
/// [`Impairments`]. Used for scenario defaults and for run-time changes, where
/// unspecified values keep their current settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ImpairmentsPatch {
    /// `Some(None)` removes the rate limit.
    pub rate_bps: Option<Option<u64>>,
    pub delay_ns: Option<u64>,
    pub jitter: Option<Jitter>,
    pub loss: Option<Loss>,
    #[serde(default)]
    pub ber: Option<f64>,
    #[serde(default)]
    pub phantom_bps: Option<u64>,
    /// `Some(None)` ends a trace-driven phantom load.
    #[serde(default)]
    pub phantom_trace: Option<Option<PhantomTrace>>,
    pub duplicate: Option<Chance>,
    pub corrupt: Option<Chance>,
    pub reorder: Option<Reorder>,
    pub queue: Option<Option<QueueLimit>>,
    pub mtu: Option<Option<u32>>,
    /// `Some(None)` goes back to one FIFO queue.
    #[serde(default)]
    pub qos: Option<Option<QosConfig>>,
    #[serde(default)]
    pub shaper: Option<Shaper>,
    #[serde(default)]
    pub flows: Option<Vec<Flow>>,
}

/// Calls macro `$m` with every field of [`ImpairmentsPatch`] but the MTU (which does not
/// change at run time), then `$extra`: one list for the patch's field-wise methods.
macro_rules! runtime_fields {
    ($m:ident $(, $extra:ident)*) => {
        $m!(
            rate_bps, delay_ns, jitter, loss, ber, phantom_bps, phantom_trace, duplicate, corrupt, reorder,
            queue, qos, shaper, flows $(, $extra)*
        )
    };
}

impl ImpairmentsPatch {
    /// The patch that sets every field to `imp`'s, but the MTU (which does not change
    /// at run time).
    pub fn whole(imp: &Impairments) -> ImpairmentsPatch {
        macro_rules! all {
            ($($f:ident),*) => { ImpairmentsPatch { $( $f: Some(imp.$f.clone()), )* mtu: None } };
        }
        runtime_fields!(all)
    }

    /// Overwrite the fields this patch sets.
    pub fn apply_to(&self, imp: &mut Impairments) {
        macro_rules! set {
            ($($f:ident),*) => { $( if let Some(v) = &self.$f { imp.$f = v.clone(); } )* };
        }
        runtime_fields!(set, mtu);
    }

    /// Fields of `later` win over fields of `self`.
    pub fn merged(&self, later: &ImpairmentsPatch) -> ImpairmentsPatch {
        macro_rules! pick {
            ($($f:ident),*) => { ImpairmentsPatch { $( $f: later.$f.clone().or_else(|| self.$f.clone()), )* } };
        }
        runtime_fields!(pick, mtu)
    }

    /// The patch a fraction `f` (0 … 1) of the way from `from` to `to`, for ramps. Both
    /// must set the same fields, and only fields with a magnitude: bandwidth, delay,
    /// jitter (amount), Bernoulli loss (rate), duplication and corruption (probability).
    pub fn interpolate(
        from: &ImpairmentsPatch,
        to: &ImpairmentsPatch,
        f: f64,
    ) -> Result<ImpairmentsPatch, String> {
        let f = f.clamp(0.0, 1.0);
        let lerp = |a: f64, b: f64| a + (b - a) * f;
        let mut out = ImpairmentsPatch::default();
        let both = |name: &str, a: bool, b: bool| -> Result<bool, String> {
            match (a, b) {
                (true, true) => Ok(true),
                (false, false) => Ok(false),
                _ => Err(format!("a ramp needs '{name}' in both 'from' and 'to'")),
            }
        };
        if both("bandwidth", from.rate_bps.is_some(), to.rate_bps.is_some())? {
            match (from.rate_bps.unwrap(), to.rate_bps.unwrap()) {
                (Some(a), Some(b)) => {
                    out.rate_bps = Some(Some(lerp(a as f64, b as f64).round() as u64))
                }
                _ => {
                    return Err("a bandwidth ramp needs a rate at both ends, not 'unlimited'".into())
                }
            }
        }
        if both("delay", from.delay_ns.is_some(), to.delay_ns.is_some())? {
            out.delay_ns = Some(
                lerp(from.delay_ns.unwrap() as f64, to.delay_ns.unwrap() as f64).round() as u64,
            );
        }
        if both("jitter", from.jitter.is_some(), to.jitter.is_some())? {
            let (a, b) = (from.jitter.as_ref().unwrap(), to.jitter.as_ref().unwrap());
            out.jitter = Some(Jitter {
                amount_ns: lerp(a.amount_ns as f64, b.amount_ns as f64).round() as u64,
                ..b.clone()
            });
        }
        if both("loss", from.loss.is_some(), to.loss.is_some())? {
            let rate = |l: Loss| match l {
                Loss::None => Ok((0.0, 0.0)),
                Loss::Bernoulli { rate, correlation } => Ok((rate, correlation)),
                Loss::GilbertElliott { .. } => {
                    Err("a loss ramp works on a plain loss rate, not a Gilbert-Elliott model"
                        .to_string())
                }
            };
            let ((a, _), (b, c)) = (rate(from.loss.unwrap())?, rate(to.loss.unwrap())?);
            let r = lerp(a, b);
            out.loss = Some(if r == 0.0 {
                Loss::None
            } else {
                Loss::Bernoulli { rate: r, correlation: c }
            });
        }
        if both("phantom", from.phantom_bps.is_some(), to.phantom_bps.is_some())? {
            let (a, b) = (from.phantom_bps.unwrap_or(0), to.phantom_bps.unwrap_or(0));
            out.phantom_bps = Some(lerp(a as f64, b as f64).round() as u64);
        }
        if both("ber", from.ber.is_some(), to.ber.is_some())? {
            out.ber = Some(lerp(from.ber.unwrap_or(0.0), to.ber.unwrap_or(0.0)));
        }
        for (name, a, b, slot) in [
            ("duplicate", from.duplicate, to.duplicate, &mut out.duplicate),
            ("corrupt", from.corrupt, to.corrupt, &mut out.corrupt),
        ] {
            if both(name, a.is_some(), b.is_some())? {
                let (a, b) = (a.unwrap(), b.unwrap());
                *slot = Some(Chance {
                    probability: lerp(a.probability, b.probability),
                    correlation: b.correlation,
                });
            }
        }
        for (name, set) in [
            ("reorder", from.reorder.is_some() || to.reorder.is_some()),
            ("queue", from.queue.is_some() || to.queue.is_some()),
            ("mtu", from.mtu.is_some() || to.mtu.is_some()),
            ("qos", from.qos.is_some() || to.qos.is_some()),
        ] {
            if set {
                return Err(format!("'{name}' cannot be ramped"));
            }
        }
        if out.is_empty() {
            return Err("a ramp needs at least one impairment in 'from' and 'to'".into());
        }
        Ok(out)
    }

    pub fn is_empty(&self) -> bool {
        *self == ImpairmentsPatch::default()
    }
}

impl Impairments {
    /// These impairments less an `mtu` that the interfaces have anyway (`iface_mtu`, 0:
    /// none): the engine drops frames above the interface's MTU with or without it, and
    /// so does the kernel path.
    pub fn beyond_interface(&self, iface_mtu: u32) -> Impairments {
        let mut imp = self.clone();
        if self.mtu_at_interface(iface_mtu) {
            imp.mtu = None;
        }
        imp
    }

    fn mtu_at_interface(&self, iface_mtu: u32) -> bool {
        self.mtu.is_some_and(|m| iface_mtu > 0 && m >= iface_mtu)
    }

    /// Whether a direction with these impairments needs the engine — the one rule for it:
    /// any impairment but the shaper's choice and an MTU its interfaces have anyway
    /// (`iface_mtu`, 0: none). The core keeps a direction that does not on the kernel
    /// path (unless it is down or captured); the plan makes no TAP device for a link
    /// none of whose directions does until it first needs one.
    pub fn needs_engine(&self, iface_mtu: u32) -> bool {
        let mtu = self.mtu.filter(|_| self.mtu_at_interface(iface_mtu));
        *self != Impairments { shaper: self.shaper, mtu, ..Default::default() }
    }

    /// True when the model must see every wire frame on its own: the decisions it makes
    /// (loss, duplication, corruption, reordering) are per frame.
    pub fn needs_per_frame(&self) -> bool {
        !matches!(self.loss, Loss::None)
            || self.ber > 0.0
            || self.duplicate.probability > 0.0
            || self.corrupt.probability > 0.0
            || self.reorder.probability > 0.0
    }

    /// The queue limit in force: the configured one, or the larger of
    /// [`DEFAULT_QUEUE_PACKETS`] frames and one bandwidth × round-trip-delay product
    /// (round trip taken as twice this direction's delay), so that the default never
    /// starves a long fat link.
    pub fn queue_limit(&self) -> QueueLimit {
        if let Some(q) = self.queue {
            return q;
        }
        let bdp_bytes = match self.rate_bps {
            Some(rate) => (rate as u128 * 2 * self.delay_ns as u128 / 8 / 1_000_000_000) as u64,
            None => 0,
        };
        let bdp_frames = bdp_bytes.div_ceil(FULL_FRAME_BYTES);
        QueueLimit::Packets(bdp_frames.max(DEFAULT_QUEUE_PACKETS))
    }

    /// Check ranges; returns a message naming the offending field.
    pub fn validate(&self) -> Result<(), String> {
        if self.delay_ns > MAX_DELAY_NS {
            return Err(format!(
                "delay must be at most 1 hour, got {} s",
                self.delay_ns as f64 / 1e9
            ));
        }
        if self.jitter.amount_ns > MAX_DELAY_NS {
            return Err(format!(
                "jitter must be at most 1 hour, got {} s",
                self.jitter.amount_ns as f64 / 1e9
            ));
        }
        if self.rate_bps.is_some_and(|r| r > MAX_RATE_BPS) {
            return Err(format!(
                "bandwidth must be at most 1Tbit, got {} bit/s",
                self.rate_bps.unwrap_or(0)
            ));
        }
        fn prob(name: &str, v: f64) -> Result<(), String> {
            if !(0.0..=1.0).contains(&v) || v.is_nan() {
                return Err(format!("{name} must be between 0% and 100%, got {}%", v * 100.0));
            }
            Ok(())
        }
        if self.rate_bps == Some(0) {
            return Err("bandwidth must be greater than 0".into());
        }
        prob("jitter correlation", self.jitter.correlation)?;
        if self.flows.len() > MAX_FLOWS {
            return Err(format!(
                "at most {} flows a direction, got {}",
                MAX_FLOWS,
                self.flows.len()
            ));
        }
        for (i, f) in self.flows.iter().enumerate() {
            f.validate().map_err(|m| format!("flows[{i}]: {m}"))?;
        }
        if let Some(t) = &self.phantom_trace {
            t.validate()?;
            let most = t.steps.iter().map(|s| s.1).max().unwrap_or(0);
            if self.phantom_bps > 0 {
                return Err("a phantom load is a rate or a trace, not both".into());
            }
            if self.qos.is_some() {
                return Err("a phantom load shares one FIFO queue: not with qos classes".into());
            }
            if self.rate_bps.is_none_or(|r| most >= r) {
                return Err(format!(
                    "the phantom load's trace reaches {most} bit/s: give a bandwidth above it"
                ));
            }
        }
        if self.phantom_bps > 0 && self.qos.is_some() {
            return Err("a phantom load shares one FIFO queue: not with qos classes".into());
        }
        if self.phantom_bps > 0 && self.rate_bps.is_none_or(|r| self.phantom_bps >= r) {
            return Err(format!(
                "phantom load ({} bit/s) takes a share of the bandwidth: give a bandwidth above it",
                self.phantom_bps
            ));
        }
        if !(0.0..1.0).contains(&self.ber) || self.ber.is_nan() {
            return Err(format!(
                "ber is a probability per bit, from 0 to below 1, got {}",
                self.ber
            ));
        }
        match self.loss {
            Loss::None => {}
            Loss::Bernoulli { rate, correlation } => {
                prob("loss", rate)?;
                prob("loss correlation", correlation)?;
            }
            Loss::GilbertElliott { p, r, h, k } => {
                prob("loss p", p)?;
                prob("loss r", r)?;
                prob("loss h", h)?;
                prob("loss k", k)?;
            }
        }
        prob("duplicate", self.duplicate.probability)?;
        prob("duplicate correlation", self.duplicate.correlation)?;
        prob("corrupt", self.corrupt.probability)?;
        prob("corrupt correlation", self.corrupt.correlation)?;
        prob("reorder", self.reorder.probability)?;
        prob("reorder correlation", self.reorder.correlation)?;
        if self.reorder.gap == 0 {
            return Err("reorder gap must be at least 1".into());
        }
        match self.queue {
            Some(QueueLimit::Packets(0)) | Some(QueueLimit::Bytes(0)) => {
                return Err("queue limit must be greater than 0".into())
            }
            Some(QueueLimit::Bytes(b)) if b < FULL_FRAME_BYTES => {
                return Err(format!(
                    "queue limit of {b} bytes cannot hold one full-size frame ({FULL_FRAME_BYTES} bytes)"
                ))
            }
            _ => {}
        }
        if let Some(mtu) = self.mtu {
            if !(68..=65535).contains(&mtu) {
                return Err(format!("mtu must be between 68 and 65535 bytes, got {mtu}"));
            }
        }
        if let Some(q) = &self.qos {
            q.validate().map_err(|m| format!("qos: {m}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_impairment_beyond_the_shaper_and_the_interfaces_mtu_needs_the_engine() {
        let none = Impairments::default();
        assert!(!none.needs_engine(1500));
        let kernel = Impairments { shaper: Shaper::Kernel, ..Default::default() };
        assert!(!kernel.needs_engine(1500), "the shaper's choice alone");
        let at_iface = Impairments { mtu: Some(1500), ..Default::default() };
        assert!(!at_iface.needs_engine(1500), "the interface's MTU");
        assert!(!Impairments { mtu: Some(9000), ..Default::default() }.needs_engine(1500));
        assert!(at_iface.needs_engine(9000), "below the interface's MTU");
        assert!(at_iface.needs_engine(0), "no interface MTU known");
        assert_eq!(at_iface.beyond_interface(1500), none);
        assert_eq!(at_iface.beyond_interface(9000), at_iface);
        let delayed = Impairments { delay_ns: 1, ..Default::default() };
        assert!(delayed.needs_engine(1500));
        let rated = Impairments { rate_bps: Some(1), ..kernel };
        assert!(rated.needs_engine(1500), "a rate (the kernel's shaper is decided apart)");
    }
}
