//! The conditioning stage of a link direction: what a `qos:` setting builds. Frames
//! (handles, the caller keeps the bytes) are classified, metered and marked, pass RED /
//! WRED and the class's queue limit, wait in per-class queues, and leave one at a time
//! in the order the scheduler picks, serialized at the direction's rate.
//!
//! Unlike a FIFO, whose departure times are known when a frame arrives, a frame's
//! departure here depends on what arrives after it (a higher-priority frame overtakes
//! it). So the stage is driven like the core it sits in: [`Stage::offer`] at each
//! arrival, [`Stage::advance`] when [`Stage::next_event_ns`] is due, and
//! [`Stage::poll_departure`] hands out the frames whose serialization has started, each
//! with the time it ends. A pick happens at the instant the serializer frees up, among
//! the frames that had arrived by then, whatever time the caller calls at: the outcome
//! is the same for a late caller.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::classify::{Classifier, Match, Packet};
use crate::meter::{SrTcm, TokenBucket, TrTcm};
use crate::red::{Red, RedParams, Verdict};
pub use crate::sched::Discipline;
use crate::sched::Scheduler;
use crate::Color;

/// Bytes of a full-size Ethernet frame: the unit of DRR quanta (a weight of 1 is one
/// full frame per round) and of packet limits.
pub const FULL_FRAME_BYTES: u64 = 1514;

/// What a direction's `qos` says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind", deny_unknown_fields)]
pub enum QosConfig {
    /// The DiffServ per-hop behaviours of [`QosConfig::diffserv_classes`].
    Diffserv,
    /// Classes as given, in order, and how those of one priority level share it.
    Classes {
        classes: Vec<ClassConfig>,
        #[serde(default)]
        scheduler: Discipline,
    },
}

/// One traffic class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassConfig {
    pub name: String,
    /// A frame goes to the first class one of whose rules it matches. The class with no
    /// rules (there is exactly one) takes everything else.
    #[serde(default)]
    pub rules: Vec<Match>,
    /// Strict priority level, 0 first.
    #[serde(default)]
    pub priority: u8,
    /// Share among the classes of its priority level (deficit round robin; a weight of 1
    /// is one full-size frame per round).
    pub weight: u32,
    /// Meter, and what becomes of each colour it gives.
    #[serde(default)]
    pub meter: Option<MeterConfig>,
    /// DSCP every frame of the class is marked with (after the meter's action).
    #[serde(default)]
    pub set_dscp: Option<u8>,
    /// RED profile per colour (WRED); a colour without one is only tail-dropped. Frames
    /// not metered take their colour from the AF drop precedence of their DSCP (AFx1
    /// green, AFx2 yellow, AFx3 red; anything else green).
    #[serde(default)]
    pub red: Option<WredConfig>,
    /// The class's queue limit; `None`: the direction's queue limit.
    #[serde(default)]
    pub limit: Option<ClassLimit>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClassLimit {
    Packets(u64),
    Bytes(u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeterConfig {
    pub kind: MeterKind,
    /// The colour a frame brings (its DSCP's drop precedence) is kept or worsened, never
    /// improved (RFC 2697/2698 colour-aware mode).
    #[serde(default)]
    pub color_aware: bool,
    pub green: ColorAction,
    pub yellow: ColorAction,
    pub red: ColorAction,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "type", deny_unknown_fields)]
pub enum MeterKind {
    /// Green while the bucket holds the frame, red otherwise.
    TokenBucket { rate_bps: u64, burst_bytes: u64 },
    /// RFC 2697.
    Srtcm { cir_bps: u64, cbs_bytes: u64, ebs_bytes: u64 },
    /// RFC 2698.
    Trtcm { cir_bps: u64, cbs_bytes: u64, pir_bps: u64, pbs_bytes: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ColorAction {
    Pass,
    Drop,
    /// Re-mark with this DSCP and pass.
    Mark(u8),
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct WredConfig {
    #[serde(default)]
    pub green: Option<RedParams>,
    #[serde(default)]
    pub yellow: Option<RedParams>,
    #[serde(default)]
    pub red: Option<RedParams>,
}

impl WredConfig {
    fn profile(&self, c: Color) -> Option<&RedParams> {
        match c {
            Color::Green => self.green.as_ref(),
            Color::Yellow => self.yellow.as_ref(),
            Color::Red => self.red.as_ref(),
        }
    }
}

/// Weight of the current queue in RED's average (Floyd and Jacobson's suggested w_q).
pub const RED_WEIGHT: f64 = 0.002;
/// Share of the direction's rate the DiffServ preset polices EF to.
pub const EF_SHARE: f64 = 0.3;

impl QosConfig {
    /// How the classes of a priority level share it (the DiffServ preset: DRR).
    pub fn scheduler(&self) -> Discipline {
        match self {
            QosConfig::Diffserv => Discipline::Drr,
            QosConfig::Classes { scheduler, .. } => *scheduler,
        }
    }

    /// The classes in force for a direction of rate `rate_bps` whose queue holds
    /// `limit_bytes`.
    pub fn classes(&self, rate_bps: Option<u64>, limit_bytes: u64) -> Vec<ClassConfig> {
        match self {
            QosConfig::Diffserv => QosConfig::diffserv_classes(rate_bps, limit_bytes),
            QosConfig::Classes { classes, .. } => classes.clone(),
        }
    }

    /// The DiffServ preset (RFC 4594's treatment, simplified):
    /// - `ef` (DSCP EF, 46): strict priority, policed to [`EF_SHARE`] of the rate (a
    ///   token bucket with a burst of 2 ms at that rate, at least two full frames); the
    ///   excess is dropped (RFC 3246: EF must not starve the others);
    /// - `nc` (CS6, CS7: routing protocols): weight 1;
    /// - `af1` … `af4` (AFx1–AFx3): weights 1, 2, 3, 4, WRED by drop precedence — AFx3
    ///   from 10 % to 40 % of the queue, AFx2 from 25 % to 60 %, AFx1 from 40 % to 80 %,
    ///   each dropping at most 10 % at its maximum (RFC 2597);
    /// - `be`: everything else, weight 1, tail drop.
    pub fn diffserv_classes(rate_bps: Option<u64>, limit_bytes: u64) -> Vec<ClassConfig> {
        let class = |name: &str, dscp: Vec<u8>, priority: u8, weight: u32| ClassConfig {
            name: name.to_string(),
            rules: if dscp.is_empty() {
                Vec::new()
            } else {
                vec![Match { dscp, ..Default::default() }]
            },
            priority,
            weight,
            meter: None,
            set_dscp: None,
            red: None,
            limit: None,
        };
        let mut ef = class("ef", vec![46], 0, 1);
        ef.meter = rate_bps.map(|r| {
            let rate_bps = (r as f64 * EF_SHARE).round().max(8.0) as u64;
            let burst_bytes = (rate_bps / 8 / 500).max(2 * FULL_FRAME_BYTES);
            MeterConfig {
                kind: MeterKind::TokenBucket { rate_bps, burst_bytes },
                color_aware: false,
                green: ColorAction::Pass,
                yellow: ColorAction::Pass,
                red: ColorAction::Drop,
            }
        });
        let mut out = vec![ef, class("nc", vec![48, 56], 1, 1)];
        let l = limit_bytes.max(4 * FULL_FRAME_BYTES) as f64;
        let profile = |lo: f64, hi: f64| {
            Some(RedParams { min_bytes: (l * lo) as u64, max_bytes: (l * hi) as u64, max_p: 0.1 })
        };
        for x in 1..=4u8 {
            let mut af =
                class(&format!("af{x}"), vec![8 * x + 2, 8 * x + 4, 8 * x + 6], 1, x as u32);
            af.red = Some(WredConfig {
                green: profile(0.4, 0.8),
                yellow: profile(0.25, 0.6),
                red: profile(0.1, 0.4),
            });
            out.push(af);
        }
        out.push(class("be", Vec::new(), 1, 1));
        out
    }

    /// Check a configuration; the message names the class and field at fault.
    pub fn validate(&self) -> Result<(), String> {
        let classes = self.classes(Some(1_000_000), 1_000_000);
        if classes.is_empty() {
            return Err("at least one class is needed".into());
        }
        if classes.len() > 64 {
            return Err(format!("qos takes at most 64 classes, got {}", classes.len()));
        }
        let defaults: Vec<&str> =
            classes.iter().filter(|c| c.rules.is_empty()).map(|c| c.name.as_str()).collect();
        if defaults.len() != 1 {
            return Err(format!(
                "exactly one class must have no 'match' (it takes the frames no other class takes); {}",
                if defaults.is_empty() { "none has".to_string() } else { format!("{} have", defaults.join(", ")) }
            ));
        }
        for (i, c) in classes.iter().enumerate() {
            if classes[..i].iter().any(|o| o.name == c.name) {
                return Err(format!("two classes are named '{}'", c.name));
            }
            let at = |m: String| format!("class '{}': {m}", c.name);
            if c.weight == 0 || c.weight > 1000 {
                return Err(at(format!("weight must be 1 to 1000, got {}", c.weight)));
            }
            if c.set_dscp.is_some_and(|d| d > 63)
                || c.rules.iter().any(|r| r.dscp.iter().any(|&d| d > 63))
            {
                return Err(at("a DSCP is 0 to 63".into()));
            }
            if c.rules.iter().any(|r| r.pcp.iter().any(|&p| p > 7)) {
                return Err(at("a PCP is 0 to 7".into()));
            }
            if let Some(m) = &c.meter {
                let positive = |name: &str, v: u64| {
                    if v == 0 {
                        Err(at(format!("meter {name} must be greater than 0")))
                    } else {
                        Ok(())
                    }
                };
                match m.kind {
                    MeterKind::TokenBucket { rate_bps, burst_bytes } => {
                        positive("rate", rate_bps)?;
                        positive("burst", burst_bytes)?;
                    }
                    MeterKind::Srtcm { cir_bps, cbs_bytes, ebs_bytes } => {
                        positive("cir", cir_bps)?;
                        if cbs_bytes == 0 && ebs_bytes == 0 {
                            return Err(at(
                                "srtcm needs cbs or ebs greater than 0 (RFC 2697)".into()
                            ));
                        }
                    }
                    MeterKind::Trtcm { cir_bps, cbs_bytes, pir_bps, pbs_bytes } => {
                        positive("cir", cir_bps)?;
                        positive("cbs", cbs_bytes)?;
                        positive("pbs", pbs_bytes)?;
                        if pir_bps < cir_bps {
                            return Err(at(format!("trtcm needs pir ≥ cir (RFC 2698), got pir {pir_bps} and cir {cir_bps} bit/s")));
                        }
                    }
                }
                for a in [m.green, m.yellow, m.red] {
                    if matches!(a, ColorAction::Mark(d) if d > 63) {
                        return Err(at("a DSCP is 0 to 63".into()));
                    }
                }
            }
            if let Some(w) = &c.red {
                for p in [w.green, w.yellow, w.red].into_iter().flatten() {
                    p.validate().map_err(at)?;
                }
            }
            if matches!(c.limit, Some(ClassLimit::Packets(0)) | Some(ClassLimit::Bytes(0))) {
                return Err(at("limit must be greater than 0".into()));
            }
        }
        Ok(())
    }
}

/// Why the stage refused a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The meter coloured it and its colour's action is to drop.
    Police,
    /// RED / WRED dropped it early.
    Red,
    /// Its class's queue was full.
    Queue,
}

/// What became of an arriving frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    pub class: usize,
    pub color: Color,
    /// The DSCP the frame must now carry, when it changes.
    pub remark: Option<u8>,
    pub verdict: Result<(), Refusal>,
}

/// A frame whose serialization has started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Departure {
    pub id: u64,
    pub class: usize,
    /// When it reached the stage, started and ended serialization, ns.
    pub arrival_ns: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub wire_frames: u32,
    pub wire_bytes: u64,
}

/// A frame waiting in a class queue.
#[derive(Debug, Clone, Copy)]
pub struct Waiting {
    pub id: u64,
    pub arrival_ns: u64,
    pub wire_frames: u32,
    pub wire_bytes: u64,
    pub packet: Packet,
}

#[derive(Debug, Clone)]
enum Meter {
    Bucket(TokenBucket),
    Sr(SrTcm),
    Tr(TrTcm),
}

#[derive(Debug, Clone)]
struct Class {
    cfg: ClassConfig,
    meter: Option<Meter>,
    red: Option<Red>,
    limit: ClassLimit,
    waiting: VecDeque<Waiting>,
    bytes: u64,
}

impl Class {
    /// The class cannot take a frame of this size. An empty class always takes one, so
    /// that a small limit cannot starve it.
    fn full(&self, wire_frames: u32, wire_bytes: u64) -> bool {
        let over = match self.limit {
            ClassLimit::Packets(n) => self.waiting.len() as u64 + wire_frames as u64 > n,
            ClassLimit::Bytes(n) => self.bytes + wire_bytes > n,
        };
        over && !self.waiting.is_empty()
    }
}

/// The conditioning stage of one direction (see the module documentation).
#[derive(Debug, Clone)]
pub struct Stage {
    classes: Vec<Class>,
    classifier: Classifier,
    sched: Scheduler,
    rate_bps: Option<u64>,
    /// When the serializer is next free, ns.
    tx_free_ns: u64,
    departures: VecDeque<Departure>,
}

/// The classes a stage for `cfg` has on a direction of `rate_bps` whose queue limit is `limit`.
fn classes_for(cfg: &QosConfig, rate_bps: Option<u64>, limit: ClassLimit) -> Vec<ClassConfig> {
    let limit_bytes = match limit {
        ClassLimit::Packets(n) => n.saturating_mul(FULL_FRAME_BYTES),
        ClassLimit::Bytes(b) => b,
    };
    cfg.classes(rate_bps, limit_bytes)
}

/// The colour a DSCP's AF drop precedence gives (RFC 2597); green for anything else.
pub fn precedence_color(dscp: Option<u8>) -> Color {
    match dscp {
        Some(d) if (1..=4).contains(&(d / 8)) && matches!(d % 8, 2 | 4 | 6) => match d % 8 {
            2 => Color::Green,
            4 => Color::Yellow,
            _ => Color::Red,
        },
        _ => Color::Green,
    }
}

impl Stage {
    /// A stage for `cfg` (validated) on a direction of rate `rate_bps` whose queue
    /// limit is `limit` (the direction's, for classes without their own), with RED's
    /// randomness from `seed`.
    pub fn new(cfg: &QosConfig, rate_bps: Option<u64>, limit: ClassLimit, seed: u64) -> Stage {
        let classes = classes_for(cfg, rate_bps, limit);
        let sched = Scheduler::with(
            &classes
                .iter()
                .map(|c| (c.priority, c.weight as u64 * FULL_FRAME_BYTES))
                .collect::<Vec<_>>(),
            cfg.scheduler(),
        );
        let mut classifier = Classifier::default();
        for (i, c) in classes.iter().enumerate() {
            if c.rules.is_empty() {
                classifier.default = i;
            }
            classifier.rules.extend(c.rules.iter().map(|r| (r.clone(), i)));
        }
        // Time a full frame takes on the wire: how an idle spell ages RED's average.
        let typical_ns = rate_bps
            .map_or(1_000, |r| (FULL_FRAME_BYTES as u128 * 8_000_000_000 / r as u128) as u64);
        let classes = classes
            .into_iter()
            .enumerate()
            .map(|(i, cfg)| Class {
                meter: cfg.meter.map(|m| match m.kind {
                    MeterKind::TokenBucket { rate_bps, burst_bytes } => {
                        Meter::Bucket(TokenBucket::new(rate_bps / 8, burst_bytes))
                    }
                    MeterKind::Srtcm { cir_bps, cbs_bytes, ebs_bytes } => {
                        Meter::Sr(SrTcm::new(cir_bps / 8, cbs_bytes, ebs_bytes))
                    }
                    MeterKind::Trtcm { cir_bps, cbs_bytes, pir_bps, pbs_bytes } => {
                        Meter::Tr(TrTcm::new(pir_bps / 8, pbs_bytes, cir_bps / 8, cbs_bytes))
                    }
                }),
                red: cfg.red.map(|_| {
                    Red::new(
                        RED_WEIGHT,
                        typical_ns,
                        seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
                    )
                }),
                limit: cfg.limit.unwrap_or(limit),
                cfg,
                waiting: VecDeque::new(),
                bytes: 0,
            })
            .collect();
        Stage { classes, classifier, sched, rate_bps, tx_free_ns: 0, departures: VecDeque::new() }
    }

    pub fn class_names(&self) -> Vec<String> {
        self.classes.iter().map(|c| c.cfg.name.clone()).collect()
    }

    /// Frames and bytes waiting in class `class`.
    pub fn backlog(&self, class: usize) -> (u64, u64) {
        let c = &self.classes[class];
        (c.waiting.len() as u64, c.bytes)
    }

    /// Frames and bytes waiting in all classes.
    pub fn backlog_all(&self) -> (u64, u64) {
        self.classes.iter().fold((0, 0), |(f, b), c| (f + c.waiting.len() as u64, b + c.bytes))
    }

    /// A new serialization rate (frames being serialized finish at the old one), when
    /// `cfg`'s classes do not depend on it (true); false when they do (the DiffServ
    /// preset polices EF to a share of the rate): then [`Stage::reconfigure`].
    pub fn set_rate(&mut self, cfg: &QosConfig, rate_bps: Option<u64>, limit: ClassLimit) -> bool {
        if classes_for(cfg, rate_bps, limit).iter().ne(self.classes.iter().map(|c| &c.cfg)) {
            return false;
        }
        self.rate_bps = rate_bps;
        true
    }

    /// When the serializer frees up with frames waiting: call [`Stage::advance`] then.
    pub fn next_event_ns(&self) -> Option<u64> {
        (!self.sched.is_empty()).then_some(self.tx_free_ns)
    }

    /// A frame (handle `id`) with the header fields `packet` arrives at `now_ns`.
    /// Frames whose serialization starts by `now_ns` (this one, on an idle direction)
    /// are then ready at [`Stage::poll_departure`].
    pub fn offer(
        &mut self,
        now_ns: u64,
        id: u64,
        packet: &Packet,
        wire_frames: u32,
        wire_bytes: u64,
    ) -> Arrival {
        self.advance(now_ns);
        let class = self.classifier.class_of(packet);
        let c = &mut self.classes[class];
        let pre = precedence_color(packet.dscp);
        let mut remark = None;
        let mut color = pre;
        if let (Some(m), Some(cfg)) = (&mut c.meter, &c.cfg.meter) {
            let pre = cfg.color_aware.then_some(pre);
            color = match m {
                Meter::Bucket(b) => {
                    let ok = b.conforms(now_ns, wire_bytes);
                    // Colour-aware, a bucket only keeps or worsens the colour brought.
                    match (ok, pre) {
                        (false, _) => Color::Red,
                        (true, Some(p)) => p,
                        (true, None) => Color::Green,
                    }
                }
                Meter::Sr(m) => m.mark(now_ns, wire_bytes, pre),
                Meter::Tr(m) => m.mark(now_ns, wire_bytes, pre),
            };
            let action = match color {
                Color::Green => cfg.green,
                Color::Yellow => cfg.yellow,
                Color::Red => cfg.red,
            };
            match action {
                ColorAction::Pass => {}
                ColorAction::Drop => {
                    return Arrival { class, color, remark: None, verdict: Err(Refusal::Police) }
                }
                ColorAction::Mark(d) => remark = Some(d),
            }
        }
        if let Some(d) = c.cfg.set_dscp {
            remark = Some(d);
        }
        let remark = remark.filter(|&d| packet.dscp.is_some_and(|old| old != d));
        let refuse = |verdict| Arrival { class, color, remark: None, verdict: Err(verdict) };
        if let (Some(red), Some(w)) = (&mut c.red, &c.cfg.red) {
            if let Some(p) = w.profile(color) {
                if red.arrival(now_ns, c.bytes, color, p) != Verdict::Enqueue {
                    return refuse(Refusal::Red);
                }
            }
        }
        if c.full(wire_frames, wire_bytes) {
            return refuse(Refusal::Queue);
        }
        let mut packet = *packet;
        if remark.is_some() {
            packet.dscp = remark;
        }
        self.enqueue(
            now_ns,
            class,
            Waiting { id, arrival_ns: now_ns, wire_frames, wire_bytes, packet },
        );
        self.advance(now_ns);
        Arrival { class, color, remark, verdict: Ok(()) }
    }

    fn enqueue(&mut self, now_ns: u64, class: usize, w: Waiting) {
        if self.sched.is_empty() && self.tx_free_ns < now_ns {
            // An idle serializer starts on an arrival at once.
            self.tx_free_ns = now_ns;
        }
        let c = &mut self.classes[class];
        c.bytes += w.wire_bytes;
        self.sched.enqueue(class, w.id, w.wire_bytes.min(u32::MAX as u64) as u32);
        c.waiting.push_back(w);
    }

    /// Start serializing, at each instant the serializer frees up until `now_ns`, the
    /// frame the scheduler picks.
    pub fn advance(&mut self, now_ns: u64) {
        while self.tx_free_ns <= now_ns {
            let Some((class, id, _)) = self.sched.dequeue() else { break };
            let c = &mut self.classes[class];
            let w = c.waiting.pop_front().expect("the scheduler and the class queue agree");
            debug_assert_eq!(w.id, id);
            c.bytes -= w.wire_bytes;
            let start_ns = self.tx_free_ns;
            if c.waiting.is_empty() {
                if let Some(red) = &mut c.red {
                    red.emptied(start_ns);
                }
            }
            let tx_ns = self
                .rate_bps
                .map_or(0, |r| (w.wire_bytes as u128 * 8_000_000_000 / r as u128) as u64);
            let end_ns = start_ns.saturating_add(tx_ns);
            self.tx_free_ns = end_ns;
            self.departures.push_back(Departure {
                id,
                class,
                arrival_ns: w.arrival_ns,
                start_ns,
                end_ns,
                wire_frames: w.wire_frames,
                wire_bytes: w.wire_bytes,
            });
        }
    }

    /// The next frame whose serialization has started.
    pub fn poll_departure(&mut self) -> Option<Departure> {
        self.departures.pop_front()
    }

    /// Empty the class queues: the frames waiting, in the order they arrived. (Frames
    /// whose serialization started stay departures.)
    pub fn take_waiting(&mut self) -> Vec<Waiting> {
        let mut waiting: Vec<Waiting> = self
            .classes
            .iter_mut()
            .flat_map(|c| {
                c.bytes = 0;
                std::mem::take(&mut c.waiting)
            })
            .collect();
        waiting.sort_by_key(|w| (w.arrival_ns, w.id));
        let classes: Vec<(u8, u64)> = self
            .classes
            .iter()
            .map(|c| (c.cfg.priority, c.cfg.weight as u64 * FULL_FRAME_BYTES))
            .collect();
        self.sched = Scheduler::with(&classes, self.sched.discipline());
        waiting
    }

    /// When the serializer is free of what it has started, ns.
    pub fn tx_free_ns(&self) -> u64 {
        self.tx_free_ns
    }

    /// Take a new configuration (or rate, or limit): frames being serialized finish as
    /// they were; the frames still waiting are classified again, in the order they
    /// arrived, keeping their arrival times and marks (no meter or RED sees them twice).
    /// Returns the ids of those their new class's limit refuses.
    pub fn reconfigure(
        &mut self,
        now_ns: u64,
        cfg: &QosConfig,
        rate_bps: Option<u64>,
        limit: ClassLimit,
        seed: u64,
    ) -> Vec<u64> {
        self.advance(now_ns);
        let waiting = self.take_waiting();
        let mut next = Stage::new(cfg, rate_bps, limit, seed);
        next.tx_free_ns = self.tx_free_ns;
        next.departures = std::mem::take(&mut self.departures);
        *self = next;
        let mut refused = Vec::new();
        for w in waiting {
            let class = self.classifier.class_of(&w.packet);
            // Straight into the queue (no meter: it was metered once), as if it had
            // arrived in this class; the serializer is not idle, so none starts yet.
            if self.classes[class].full(w.wire_frames, w.wire_bytes) {
                refused.push(w.id);
                continue;
            }
            self.enqueue(w.arrival_ns, class, w);
        }
        self.advance(now_ns);
        refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MBIT: u64 = 1_000_000;

    fn pkt(dscp: u8) -> Packet {
        Packet { dscp: Some(dscp), ip_offset: Some(14), ..Default::default() }
    }

    fn classes(cs: Vec<ClassConfig>) -> QosConfig {
        QosConfig::Classes { classes: cs, scheduler: Discipline::Drr }
    }

    fn class(name: &str, dscp: &[u8], priority: u8, weight: u32) -> ClassConfig {
        ClassConfig {
            name: name.into(),
            rules: if dscp.is_empty() {
                vec![]
            } else {
                vec![Match { dscp: dscp.to_vec(), ..Default::default() }]
            },
            priority,
            weight,
            meter: None,
            set_dscp: None,
            red: None,
            limit: None,
        }
    }

    fn drain(s: &mut Stage) -> Vec<Departure> {
        std::iter::from_fn(|| s.poll_departure()).collect()
    }

    /// Run the stage to `until_ns`, stepping through its own events.
    fn run(s: &mut Stage, until_ns: u64, out: &mut Vec<Departure>) {
        while let Some(t) = s.next_event_ns().filter(|&t| t <= until_ns) {
            s.advance(t);
            out.extend(drain(s));
        }
    }

    #[test]
    fn an_idle_stage_sends_at_once_and_serializes_at_the_rate() {
        let mut s = Stage::new(
            &classes(vec![class("be", &[], 0, 1)]),
            Some(10 * MBIT),
            ClassLimit::Packets(100),
            1,
        );
        let a = s.offer(5_000, 7, &pkt(0), 1, 1250);
        assert_eq!(a.verdict, Ok(()));
        let d = drain(&mut s);
        // 1250 bytes at 10 Mbit/s: 1 ms.
        assert_eq!((d[0].id, d[0].start_ns, d[0].end_ns), (7, 5_000, 1_005_000));
        // The next one waits for the serializer.
        s.offer(6_000, 8, &pkt(0), 1, 1250);
        assert!(drain(&mut s).is_empty());
        assert_eq!(s.next_event_ns(), Some(1_005_000));
        s.advance(1_005_000);
        assert_eq!(drain(&mut s)[0].end_ns, 2_005_000);
    }

    #[test]
    fn strict_priority_overtakes_a_backlog_and_waits_one_frame_at_most() {
        let cfg = classes(vec![class("ef", &[46], 0, 1), class("be", &[], 1, 1)]);
        let mut s = Stage::new(&cfg, Some(10 * MBIT), ClassLimit::Packets(1000), 1);
        for i in 0..100 {
            s.offer(0, i, &pkt(0), 1, 1250);
        }
        // EF arrives in the middle of frame 0's serialization.
        s.offer(400_000, 1000, &pkt(46), 1, 200);
        let mut out = drain(&mut s);
        run(&mut s, 1_000_000_000, &mut out);
        let ef = out.iter().find(|d| d.id == 1000).unwrap();
        assert_eq!(out[1].id, 1000, "EF goes right after the frame on the wire");
        assert_eq!(ef.start_ns, 1_000_000);
        assert_eq!(ef.start_ns - ef.arrival_ns, 600_000);
        assert_eq!(out.len(), 101);
    }

    #[test]
    fn drr_shares_the_rate_by_weight() {
        for scheduler in [Discipline::Drr, Discipline::Wfq, Discipline::Wf2qPlus] {
            shares_the_rate_by_weight(scheduler);
        }
    }

    /// The same shares on a link's serializer whichever discipline shares the level
    /// (WFQ and WF²Q+ within 2 %, as issue 65 asks; DRR within 1 %).
    fn shares_the_rate_by_weight(scheduler: Discipline) {
        let cfg = QosConfig::Classes {
            classes: vec![
                class("af4", &[34], 1, 4),
                class("af1", &[10], 1, 1),
                class("be", &[], 1, 1),
            ],
            scheduler,
        };
        let mut s = Stage::new(&cfg, Some(100 * MBIT), ClassLimit::Packets(100_000), 1);
        assert_eq!(s.sched.discipline(), scheduler);
        let mut id = 0;
        // All three backlogged with different frame sizes.
        for _ in 0..20_000 {
            for (d, len) in [(34, 1514), (10, 200), (0, 900)] {
                s.offer(0, id, &pkt(d), 1, len);
                id += 1;
            }
        }
        let mut out = drain(&mut s);
        // 0.5 s at 100 Mbit/s: 6.25 MB, none of the classes runs dry.
        run(&mut s, 500_000_000, &mut out);
        let mut bytes = [0u64; 3];
        for d in &out {
            bytes[d.class] += d.wire_bytes;
        }
        let total: u64 = bytes.iter().sum();
        assert!((total as f64 - 6.25e6).abs() < 2000.0, "{total}");
        for (c, want) in [(0, 4.0 / 6.0), (1, 1.0 / 6.0), (2, 1.0 / 6.0)] {
            let share = bytes[c] as f64 / total as f64;
            assert!(
                (share - want).abs() < 0.01,
                "{scheduler:?} class {c}: {share:.3}, want {want:.3}"
            );
        }
        // Emptied (a run-time change), it keeps its discipline.
        s.take_waiting();
        assert_eq!(s.sched.discipline(), scheduler);
    }

    #[test]
    fn a_late_caller_gets_the_same_schedule() {
        let cfg = classes(vec![class("ef", &[46], 0, 1), class("be", &[], 1, 1)]);
        let arrivals: Vec<(u64, u8, u64)> = (0..200)
            .map(|i| (i * 37_000, if i % 7 == 0 { 46 } else { 0 }, 200 + (i * 97) % 1300))
            .collect();
        let schedule = |late_ns: u64| {
            let mut s = Stage::new(&cfg, Some(10 * MBIT), ClassLimit::Packets(1000), 1);
            let mut out = Vec::new();
            for (i, &(t, d, len)) in arrivals.iter().enumerate() {
                // Catch up on what fell due before this arrival, `late_ns` late.
                if let Some(due) = s.next_event_ns().filter(|&e| e + late_ns <= t) {
                    s.advance(due + late_ns);
                }
                s.offer(t, i as u64, &pkt(d), 1, len);
                out.extend(drain(&mut s));
            }
            run(&mut s, u64::MAX / 2, &mut out);
            out.iter().map(|d| (d.id, d.start_ns, d.end_ns)).collect::<Vec<_>>()
        };
        assert_eq!(schedule(0), schedule(25_000));
    }

    #[test]
    fn the_diffserv_preset_polices_ef_and_prefers_it() {
        let cfg = QosConfig::Diffserv;
        cfg.validate().unwrap();
        let mut s = Stage::new(&cfg, Some(10 * MBIT), ClassLimit::Packets(1000), 1);
        let names = s.class_names();
        assert_eq!(names, ["ef", "nc", "af1", "af2", "af3", "af4", "be"]);
        // 1 s of EF at 5 Mbit/s (its policer allows 3 Mbit/s): the excess is dropped.
        let mut policed = 0;
        let mut passed = 0u64;
        for i in 0..5000u64 {
            let a = s.offer(i * 200_000, i, &pkt(46), 1, 125);
            match a.verdict {
                Ok(()) => passed += 125,
                Err(Refusal::Police) => policed += 1,
                Err(e) => panic!("{e:?}"),
            }
            assert_eq!(a.class, 0);
            drain(&mut s);
        }
        assert!(policed > 1500, "{policed}");
        let rate = passed as f64 * 8.0;
        assert!((rate - 3e6).abs() < 0.05e6, "{rate}");
        assert_eq!(s.offer(2_000_000_000, 1, &pkt(48), 1, 100).class, 1);
        assert_eq!(s.offer(2_000_000_000, 2, &pkt(28), 1, 100).class, 4); // AF32
        assert_eq!(s.offer(2_000_000_000, 3, &pkt(8), 1, 100).class, 6); // CS1: best effort
    }

    #[test]
    fn wred_drops_high_drop_precedence_first() {
        let cfg = QosConfig::Diffserv;
        // A 1 Mbit/s link offered 0.5 Mbit/s each of AF11, AF12 and AF13: a third must go.
        let mut s = Stage::new(&cfg, Some(MBIT), ClassLimit::Packets(200), 1);
        let mut dropped = [0u32; 3];
        let mut id = 0;
        for i in 0..30_000u64 {
            for (k, d) in [10u8, 12, 14].into_iter().enumerate() {
                let a = s.offer(i * 16_000_000 + k as u64 * 5_000_000, id, &pkt(d), 1, 1000);
                id += 1;
                assert_eq!(a.color, [Color::Green, Color::Yellow, Color::Red][k]);
                if a.verdict == Err(Refusal::Red) {
                    dropped[k] += 1;
                }
                drain(&mut s);
            }
        }
        assert!(dropped[2] > dropped[1] && dropped[1] >= dropped[0], "{dropped:?}");
        // AF13 pays for nearly all of it, AF11 for none.
        assert!(dropped[2] > 25_000 && dropped[0] < 300, "{dropped:?}");
    }

    #[test]
    fn a_meter_remarks_and_colour_aware_never_improves() {
        let mut c = class("af1", &[], 0, 1);
        c.meter = Some(MeterConfig {
            kind: MeterKind::Srtcm { cir_bps: 8_000, cbs_bytes: 1000, ebs_bytes: 1000 },
            color_aware: true,
            green: ColorAction::Pass,
            yellow: ColorAction::Mark(12),
            red: ColorAction::Drop,
        });
        let mut s = Stage::new(&classes(vec![c]), None, ClassLimit::Packets(100), 1);
        // Green (AF11) takes the committed bucket, then the excess one (re-marked AF12), then is dropped.
        let a = s.offer(0, 1, &pkt(10), 1, 1000);
        assert_eq!((a.color, a.remark, a.verdict), (Color::Green, None, Ok(())));
        let a = s.offer(0, 2, &pkt(10), 1, 1000);
        assert_eq!((a.color, a.remark, a.verdict), (Color::Yellow, Some(12), Ok(())));
        let a = s.offer(0, 3, &pkt(10), 1, 1000);
        assert_eq!((a.color, a.verdict), (Color::Red, Err(Refusal::Police)));
        // One second later both buckets hold 1000 bytes again; AF13 stays red.
        let a = s.offer(1_000_000_000, 4, &pkt(14), 1, 500);
        assert_eq!((a.color, a.verdict), (Color::Red, Err(Refusal::Police)));
        // Without a rate nothing waits.
        assert_eq!(
            drain(&mut s).iter().map(|d| (d.id, d.start_ns == d.end_ns)).collect::<Vec<_>>(),
            [(1, true), (2, true)]
        );
    }

    #[test]
    fn class_limits_and_reconfiguration_keep_what_waits() {
        let mut be = class("be", &[], 1, 1);
        be.limit = Some(ClassLimit::Packets(3));
        let cfg = classes(vec![class("ef", &[46], 0, 1), be]);
        let mut s = Stage::new(&cfg, Some(MBIT), ClassLimit::Packets(100), 1);
        let v: Vec<_> = (0..6).map(|i| s.offer(0, i, &pkt(0), 1, 1000).verdict).collect();
        // One on the wire, three waiting, two refused.
        assert_eq!(v, [Ok(()), Ok(()), Ok(()), Ok(()), Err(Refusal::Queue), Err(Refusal::Queue)]);
        assert_eq!(s.backlog(1), (3, 3000));
        assert_eq!(drain(&mut s).len(), 1);
        // To a FIFO of one class, limit 2: the oldest two stay, in order.
        let refused = s.reconfigure(
            1_000,
            &classes(vec![{
                let mut c = class("all", &[], 0, 1);
                c.limit = Some(ClassLimit::Packets(2));
                c
            }]),
            Some(MBIT),
            ClassLimit::Packets(100),
            1,
        );
        assert_eq!(refused, [3]);
        let mut out = Vec::new();
        run(&mut s, u64::MAX / 2, &mut out);
        assert_eq!(
            out.iter().map(|d| (d.id, d.arrival_ns, d.start_ns)).collect::<Vec<_>>(),
            [(1, 0, 8_000_000), (2, 0, 16_000_000)]
        );
    }

    #[test]
    fn validation_names_the_class_and_field() {
        let bad = |cs: Vec<ClassConfig>| classes(cs).validate().unwrap_err();
        assert!(
            bad(vec![class("a", &[1], 0, 1)]).contains("exactly one class must have no 'match'")
        );
        assert!(bad(vec![class("a", &[], 0, 1), class("b", &[], 0, 1)]).contains("a, b have"));
        assert!(bad(vec![class("a", &[], 0, 0)]).contains("class 'a': weight must be 1 to 1000"));
        assert!(bad(vec![class("a", &[], 0, 1), class("a", &[3], 0, 1)])
            .contains("two classes are named 'a'"));
        let mut c = class("x", &[], 0, 1);
        c.meter = Some(MeterConfig {
            kind: MeterKind::Trtcm { cir_bps: 10, cbs_bytes: 1, pir_bps: 5, pbs_bytes: 1 },
            color_aware: false,
            green: ColorAction::Pass,
            yellow: ColorAction::Pass,
            red: ColorAction::Drop,
        });
        assert!(bad(vec![c]).contains("class 'x': trtcm needs pir ≥ cir"));
    }

    #[test]
    fn af_precedence_colours() {
        assert_eq!(precedence_color(Some(10)), Color::Green);
        assert_eq!(precedence_color(Some(20)), Color::Yellow);
        assert_eq!(precedence_color(Some(38)), Color::Red);
        for d in [0, 8, 16, 46, 48, 40, 42] {
            assert_eq!(precedence_color(Some(d)), Color::Green, "{d}");
        }
        assert_eq!(precedence_color(None), Color::Green);
    }
}
