use std::collections::VecDeque;

use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use vemu_qos::classify::Packet;
use vemu_qos::stage::{Arrival, ClassLimit, Stage};

use crate::dist::Correlated;
use crate::{Impairments, Loss, QueueLimit};

/// Mixed into a direction's seed for its qos stage (RED's randomness).
const STAGE_SEED: u64 = 0x5145_4f53_5f53_4545;

/// A frame offered to a link direction. A GSO super-frame that the caller does not
/// split counts as `wire_frames` frames of `wire_bytes` in total; the caller must split
/// it into single frames when [`Impairments::needs_per_frame`] is true.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer {
    pub wire_frames: u32,
    /// On-wire bytes: Ethernet header + IP packet, summed over the wire frames.
    pub wire_bytes: u64,
}

impl Offer {
    pub fn single(wire_bytes: u64) -> Offer {
        Offer { wire_frames: 1, wire_bytes }
    }
}

/// Bytes of each frame of a phantom load (a full-size Ethernet frame).
pub const PHANTOM_FRAME_BYTES: u64 = 1514;

/// Why a frame was not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DropCause {
    /// The link was administratively down.
    Down,
    /// The loss model dropped it.
    Loss,
    /// The queue in front of the serializer was full.
    Queue,
}

/// A copy of a frame to deliver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery {
    /// Lab-clock time at which the frame reaches the far end, ns.
    pub at_ns: u64,
    /// Flip one bit before delivering: the bit at `value % frame_bits`, so that the
    /// choice too comes from the seeded generator.
    pub corrupt: Option<u32>,
}

/// What happened to one offered frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub first: Result<Delivery, DropCause>,
    /// Present when the duplication model sent a second copy.
    pub duplicate: Option<Result<Delivery, DropCause>>,
}

/// A frame that left a direction's qos stage ([`LinkDir::poll_left`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Left {
    /// The handle it was offered with.
    pub id: u64,
    /// When it was offered, ns.
    pub arrival_ns: u64,
    /// Its class; `None` when the qos setting was removed while it waited (it then went
    /// through the FIFO).
    pub class: Option<usize>,
    /// Time it waited for the serializer, ns.
    pub waited_ns: u64,
    /// What the wire after the stage did with it (a frame the new classes of a
    /// reconfiguration had no room for: `Err(Queue)`).
    pub outcome: Outcome,
}

/// The longest idle spell of a serializer counted as its sender falling behind: longer
/// ones are pauses of the traffic (a flow ended, another began), not a slow sender.
pub const PACE_GAP_NS: u64 = 100_000_000;

/// How busy a direction's serializer kept, ns (cumulative): `busy_ns` sending frames,
/// `gap_ns` idle between two frames no more than [`PACE_GAP_NS`] apart. A sender that
/// keeps its link full leaves no gaps; one that waits for a CPU (or for its receiver's
/// acknowledgements) leaves them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pace {
    pub busy_ns: u64,
    pub gap_ns: u64,
}

/// One direction of a link: its impairments and the state they need.
#[derive(Debug, Clone)]
pub struct LinkDir {
    imp: Impairments,
    limit: QueueLimit,
    rng: ChaCha8Rng,
    up: bool,
    /// When the serializer is next free, ns.
    tx_free_ns: u64,
    /// The serializer's pace: time it spent sending, and time it stood idle between
    /// frames for at most [`PACE_GAP_NS`] (a sender that fell behind), ns.
    pace: Pace,
    /// Frames admitted and not yet fully serialized: (end of serialization, frames, bytes).
    queue: VecDeque<(u64, u32, u64)>,
    /// When the next frame of the phantom load arrives (see [`Impairments::phantom_bps`]).
    phantom_next_ns: u64,
    queue_frames: u64,
    queue_bytes: u64,
    /// Latest delivery time handed out for an in-order frame (jitter never reorders).
    last_delivery_ns: u64,
    reorder_count: u32,
    ge_bad: bool,
    /// The Gilbert-Elliott state in which the last frame was judged (bad: true).
    lost_in_bad: bool,
    loss_c: Correlated,
    dup_c: Correlated,
    corrupt_c: Correlated,
    reorder_c: Correlated,
    jitter_c: Correlated,
    seed: u64,
    /// The qos stage, when `imp.qos` is set.
    stage: Option<Stage>,
    /// Frames that left the stage outside [`LinkDir::poll_left`]'s own stepping (when the
    /// qos setting changed), to hand out first.
    released: VecDeque<Left>,
    /// One direction per flow of `imp.flows`, in order.
    flows: Vec<LinkDir>,
}

/// The seed of flow `i`'s direction.
fn flow_seed(seed: u64, i: usize) -> u64 {
    let mut z = seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn class_limit(q: QueueLimit) -> ClassLimit {
    match q {
        QueueLimit::Packets(n) => ClassLimit::Packets(n),
        QueueLimit::Bytes(b) => ClassLimit::Bytes(b),
    }
}

impl LinkDir {
    /// A link direction with the given impairments, drawing randomness from `seed`.
    pub fn new(imp: Impairments, seed: u64) -> LinkDir {
        let stage = imp.qos.as_ref().map(|q| {
            Stage::new(q, imp.rate_bps, class_limit(imp.queue_limit()), seed ^ STAGE_SEED)
        });
        let flows = imp
            .flows
            .iter()
            .enumerate()
            .map(|(i, f)| LinkDir::new(f.impairments.clone(), flow_seed(seed, i)))
            .collect();
        LinkDir {
            flows,
            limit: imp.queue_limit(),
            imp,
            rng: ChaCha8Rng::seed_from_u64(seed),
            up: true,
            tx_free_ns: 0,
            pace: Pace::default(),
            queue: VecDeque::new(),
            phantom_next_ns: 0,
            queue_frames: 0,
            queue_bytes: 0,
            last_delivery_ns: 0,
            reorder_count: 0,
            ge_bad: false,
            lost_in_bad: false,
            loss_c: Correlated::default(),
            dup_c: Correlated::default(),
            corrupt_c: Correlated::default(),
            reorder_c: Correlated::default(),
            jitter_c: Correlated::default(),
            stage,
            seed,
            released: VecDeque::new(),
        }
    }

    pub fn impairments(&self) -> &Impairments {
        &self.imp
    }

    /// Replace the impairments at `now_ns`. Frames already scheduled keep their delivery
    /// times; the serializer, queue and loss-model state carry over. Frames waiting in a
    /// qos stage move to the new classes (or, when `qos` is removed, through the FIFO in
    /// the order they came), keeping their place on the serializer's timeline; they are
    /// handed out by [`LinkDir::poll_left`].
    pub fn set_impairments(&mut self, now_ns: u64, imp: Impairments) {
        // A flow whose match stays keeps its direction's state; others start afresh.
        let mut old: Vec<Option<LinkDir>> =
            std::mem::take(&mut self.flows).into_iter().map(Some).collect();
        for (i, f) in imp.flows.iter().enumerate() {
            let kept = self
                .imp
                .flows
                .get(i)
                .filter(|o| o.matches == f.matches)
                .and_then(|_| old[i].take());
            self.flows.push(match kept {
                Some(mut d) => {
                    d.set_impairments(now_ns, f.impairments.clone());
                    d
                }
                None => {
                    let mut d = LinkDir::new(f.impairments.clone(), flow_seed(self.seed, i));
                    d.up = self.up;
                    d
                }
            });
        }
        self.set_own_impairments(now_ns, imp);
    }

    /// The flow (its index among [`Impairments::flows`]) an Ethernet frame belongs to:
    /// the first whose match it fits; `None` for the direction's own frames.
    pub fn flow_of(&self, eth: &[u8]) -> Option<usize> {
        if self.imp.flows.is_empty() {
            return None;
        }
        let p = vemu_qos::classify::parse(eth);
        self.imp.flows.iter().position(|f| f.matches.matches(&p))
    }

    /// Flow `i`'s own direction ([`LinkDir::flow_of`]).
    pub fn flow_mut(&mut self, i: usize) -> &mut LinkDir {
        &mut self.flows[i]
    }

    fn set_own_impairments(&mut self, now_ns: u64, imp: Impairments) {
        self.limit = imp.queue_limit();
        if (imp.phantom_bps, imp.rate_bps, &imp.phantom_trace)
            != (self.imp.phantom_bps, self.imp.rate_bps, &self.imp.phantom_trace)
        {
            // A phantom load (at its new rate) starts now.
            self.phantom_next_ns = now_ns;
        }
        let seed = self.seed ^ STAGE_SEED;
        match (&mut self.stage, &imp.qos) {
            (Some(stage), Some(q)) => {
                let limit = class_limit(self.limit);
                // Same classes at the new rate: only the serializer's speed changes.
                let same = imp.qos == self.imp.qos
                    && imp.queue_limit() == self.imp.queue_limit()
                    && stage.set_rate(q, imp.rate_bps, limit);
                if !same {
                    for id in stage.reconfigure(now_ns, q, imp.rate_bps, limit, seed) {
                        self.released.push_back(Left {
                            id,
                            arrival_ns: now_ns,
                            class: None,
                            waited_ns: 0,
                            outcome: Outcome { first: Err(DropCause::Queue), duplicate: None },
                        });
                    }
                }
            }
            (None, Some(q)) => {
                self.stage = Some(Stage::new(q, imp.rate_bps, class_limit(self.limit), seed))
            }
            (Some(_), None) => {
                let mut stage = self.stage.take().expect("matched");
                // What has started serializing leaves as the stage decided…
                stage.advance(now_ns);
                while let Some(d) = stage.poll_departure() {
                    let left = self.leave(d);
                    self.released.push_back(left);
                }
                // …and what still waits goes through the FIFO as if it arrived now, in
                // the order it came, after the frame on the wire.
                self.imp = imp;
                self.tx_free_ns = self.tx_free_ns.max(stage.tx_free_ns());
                for w in stage.take_waiting() {
                    let outcome = self.offer(
                        now_ns,
                        Offer { wire_frames: w.wire_frames, wire_bytes: w.wire_bytes },
                    );
                    self.released.push_back(Left {
                        id: w.id,
                        arrival_ns: w.arrival_ns,
                        class: None,
                        waited_ns: now_ns.saturating_sub(w.arrival_ns),
                        outcome,
                    });
                }
                return;
            }
            (None, None) => {}
        }
        self.imp = imp;
    }

    pub fn is_up(&self) -> bool {
        self.up
    }

    pub fn set_up(&mut self, up: bool) {
        self.up = up;
        for f in &mut self.flows {
            f.set_up(up);
        }
    }

    /// Frames and bytes admitted and not yet serialized at `now_ns` (waiting in a qos
    /// stage's classes, with `qos`).
    pub fn queue_depth(&mut self, now_ns: u64) -> (u64, u64) {
        if let Some(s) = &self.stage {
            return s.backlog_all();
        }
        self.expire(now_ns);
        (self.queue_frames, self.queue_bytes)
    }

    /// The serializer's pace so far (a direction with a rate and without `qos`).
    pub fn pace(&self) -> Pace {
        self.pace
    }

    /// The qos stage, when `qos` is set: frames go through [`LinkDir::offer_classed`]
    /// and [`LinkDir::poll_left`] instead of [`LinkDir::offer`].
    pub fn stage(&self) -> Option<&Stage> {
        self.stage.as_ref()
    }

    /// With `qos`: a frame (handle `id`, header fields `packet`) arrives at `now_ns`.
    /// `Err(Down)` when the direction is down; otherwise what the stage did (a refused
    /// frame is gone; an accepted one leaves later by [`LinkDir::poll_left`], maybe at
    /// once). Without `qos`, every frame is accepted at once into the FIFO's place.
    pub fn offer_classed(
        &mut self,
        now_ns: u64,
        id: u64,
        packet: &Packet,
        offer: Offer,
    ) -> Result<Arrival, DropCause> {
        if !self.up {
            return Err(DropCause::Down);
        }
        let stage = self.stage.as_mut().ok_or(DropCause::Queue)?;
        Ok(stage.offer(now_ns, id, packet, offer.wire_frames, offer.wire_bytes))
    }

    /// With `qos`: when [`LinkDir::poll_left`] next has something to hand out.
    pub fn next_event_ns(&self) -> Option<u64> {
        if !self.released.is_empty() {
            return Some(0);
        }
        self.stage.as_ref().and_then(|s| s.next_event_ns())
    }

    /// With `qos`: the next frame whose serialization started by `now_ns`, and what the
    /// wire after the stage does with it (loss, duplication, corruption, delay — at the
    /// end of its serialization).
    pub fn poll_left(&mut self, now_ns: u64) -> Option<Left> {
        if let Some(l) = self.released.pop_front() {
            return Some(l);
        }
        let stage = self.stage.as_mut()?;
        stage.advance(now_ns);
        let d = stage.poll_departure()?;
        Some(self.leave(d))
    }

    /// The wire after the stage, for a frame that left it.
    fn leave(&mut self, d: vemu_qos::stage::Departure) -> Left {
        let offer = Offer { wire_frames: d.wire_frames, wire_bytes: d.wire_bytes };
        let outcome = self.impair(d.end_ns, offer, false);
        Left {
            id: d.id,
            arrival_ns: d.arrival_ns,
            class: Some(d.class),
            waited_ns: d.start_ns - d.arrival_ns,
            outcome,
        }
    }

    /// For a Gilbert-Elliott loss model, the state in which the last frame offered was
    /// judged (`Some(true)`: bad): why a frame lost just now was lost.
    pub fn last_loss_state_bad(&self) -> Option<bool> {
        matches!(self.imp.loss, Loss::GilbertElliott { .. }).then_some(self.lost_in_bad)
    }

    /// Decide the fate of a frame offered at `now_ns` (a direction without `qos`).
    pub fn offer(&mut self, now_ns: u64, offer: Offer) -> Outcome {
        self.impair(now_ns, offer, true)
    }

    /// Loss, duplication and each copy's way (through the queue and serializer when
    /// `serialize`).
    fn impair(&mut self, now_ns: u64, offer: Offer, serialize: bool) -> Outcome {
        if serialize && !self.up {
            return Outcome { first: Err(DropCause::Down), duplicate: None };
        }
        if self.lose() || self.bit_error(offer) {
            return Outcome { first: Err(DropCause::Loss), duplicate: None };
        }
        let dup = self.imp.duplicate.probability > 0.0 && {
            let u = self.uniform();
            self.dup_c.next(u, self.imp.duplicate.correlation) < self.imp.duplicate.probability
        };
        let first = self.send(now_ns, offer, serialize);
        let duplicate = dup.then(|| self.send(now_ns, offer, serialize));
        Outcome { first, duplicate }
    }

    /// Uniform on [0, 1).
    fn uniform(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    fn lose(&mut self) -> bool {
        match self.imp.loss {
            Loss::None => false,
            Loss::Bernoulli { rate, correlation } => {
                let u = self.uniform();
                rate > 0.0 && self.loss_c.next(u, correlation) < rate
            }
            Loss::GilbertElliott { p, r, h, k } => {
                let lost = if self.ge_bad { self.uniform() >= h } else { self.uniform() >= k };
                self.lost_in_bad = self.ge_bad;
                let u = self.uniform();
                self.ge_bad = if self.ge_bad { u >= r } else { u < p };
                lost
            }
        }
    }

    /// A bit of the frame is wrong (its bit error rate): 1 − (1 − ber)^(8L) for a wire
    /// frame of L bytes (a super-frame reaches here cut into wire frames).
    fn bit_error(&mut self, offer: Offer) -> bool {
        if self.imp.ber <= 0.0 {
            return false;
        }
        let bits = 8.0 * offer.wire_bytes as f64 / f64::from(offer.wire_frames.max(1));
        let p = -(bits * (-self.imp.ber).ln_1p()).exp_m1();
        self.uniform() < p
    }

    fn expire(&mut self, now_ns: u64) {
        while let Some(&(end, frames, bytes)) = self.queue.front() {
            if end > now_ns {
                break;
            }
            self.queue.pop_front();
            self.queue_frames -= frames as u64;
            self.queue_bytes -= bytes;
        }
    }

    /// Queue, serialize (when `serialize`) and delay one copy.
    fn send(&mut self, now_ns: u64, offer: Offer, serialize: bool) -> Result<Delivery, DropCause> {
        let corrupt = (self.imp.corrupt.probability > 0.0 && {
            let u = self.uniform();
            self.corrupt_c.next(u, self.imp.corrupt.correlation) < self.imp.corrupt.probability
        })
        .then(|| self.rng.next_u32());
        let mut tx_end = now_ns;
        if let Some(rate) = self.imp.rate_bps.filter(|_| serialize) {
            self.phantom_until(now_ns, rate);
            self.expire(now_ns);
            let full = match self.limit {
                QueueLimit::Packets(n) => self.queue_frames + offer.wire_frames as u64 > n,
                QueueLimit::Bytes(n) => self.queue_bytes + offer.wire_bytes > n,
            };
            // An empty queue always takes a frame, so a byte limit smaller than a
            // super-frame cannot starve the link.
            if full && self.queue_frames > 0 {
                return Err(DropCause::Queue);
            }
            let tx_ns = (offer.wire_bytes as u128 * 8 * 1_000_000_000 / rate as u128) as u64;
            let idle_ns = now_ns.saturating_sub(self.tx_free_ns);
            if self.tx_free_ns > 0 && idle_ns <= PACE_GAP_NS {
                self.pace.gap_ns += idle_ns;
            }
            self.pace.busy_ns += tx_ns;
            tx_end = self.tx_free_ns.max(now_ns).saturating_add(tx_ns);
            self.tx_free_ns = tx_end;
            self.queue.push_back((tx_end, offer.wire_frames, offer.wire_bytes));
            self.queue_frames += offer.wire_frames as u64;
            self.queue_bytes += offer.wire_bytes;
        }
        if self.reorder_now() {
            // Skips the delay line and overtakes the frames delayed before it.
            return Ok(Delivery { at_ns: tx_end, corrupt });
        }
        let at_ns = tx_end.saturating_add(self.delay_sample()).max(self.last_delivery_ns);
        self.last_delivery_ns = at_ns;
        Ok(Delivery { at_ns, corrupt })
    }

    /// The phantom load's frames that arrived by `now_ns`, each queued and serialized as
    /// a real one would be — but never dropped: the load takes its share of the rate
    /// whatever the real traffic does, and its frames count in the queue the real ones
    /// find (a full queue drops real frames sooner). Those that met an idle
    /// serializer are passed over but the last (below the rate, each is sent before the
    /// next comes): the work stays proportional to the real frames.
    fn phantom_until(&mut self, now_ns: u64, rate: u64) {
        // A trace's rates, one stretch at a time (a constant load: one stretch).
        while self.phantom_next_ns <= now_ns {
            let t = self.phantom_next_ns;
            let (p, change_ns) = match &self.imp.phantom_trace {
                Some(tr) => tr.at(t),
                None => (self.imp.phantom_bps, u64::MAX),
            };
            if p > 0 && p < rate {
                self.phantom_stretch(now_ns.min(change_ns - 1), rate, p);
            }
            if change_ns > now_ns {
                if p == 0 || p >= rate {
                    // None until the next change (after `now_ns`).
                    self.phantom_next_ns = change_ns;
                }
                break;
            }
            // The next rate's first frame comes when it starts.
            self.phantom_next_ns = change_ns;
        }
    }

    /// [`LinkDir::phantom_until`] over a stretch of one rate `p`, up to `until_ns`.
    fn phantom_stretch(&mut self, now_ns: u64, rate: u64, p: u64) {
        let interval = (PHANTOM_FRAME_BYTES as u128 * 8 * 1_000_000_000 / p as u128) as u64;
        let tx_ns = (PHANTOM_FRAME_BYTES as u128 * 8 * 1_000_000_000 / rate as u128) as u64;
        while self.phantom_next_ns <= now_ns {
            let t = self.phantom_next_ns;
            if t >= self.tx_free_ns {
                // Idle from here on: only the last arrival by now may still be sent.
                let last = t + (now_ns - t) / interval.max(1) * interval;
                self.phantom_next_ns = last + interval;
                let end = last + tx_ns;
                self.tx_free_ns = self.tx_free_ns.max(end);
                if end > now_ns {
                    self.expire(last);
                    self.queue.push_back((end, 1, PHANTOM_FRAME_BYTES));
                    self.queue_frames += 1;
                    self.queue_bytes += PHANTOM_FRAME_BYTES;
                }
                break;
            }
            self.phantom_next_ns = t + interval;
            self.expire(t);
            let end = self.tx_free_ns.max(t) + tx_ns;
            self.tx_free_ns = end;
            self.queue.push_back((end, 1, PHANTOM_FRAME_BYTES));
            self.queue_frames += 1;
            self.queue_bytes += PHANTOM_FRAME_BYTES;
        }
    }

    fn reorder_now(&mut self) -> bool {
        let r = self.imp.reorder;
        if r.probability <= 0.0 {
            return false;
        }
        if self.reorder_count + 1 < r.gap {
            self.reorder_count += 1;
            return false;
        }
        let u = self.uniform();
        if self.reorder_c.next(u, r.correlation) < r.probability {
            self.reorder_count = 0;
            true
        } else {
            self.reorder_count += 1;
            false
        }
    }

    /// Propagation delay plus jitter, ns, never negative.
    fn delay_sample(&mut self) -> u64 {
        if self.imp.jitter.amount_ns == 0 {
            return self.imp.delay_ns;
        }
        let u = self.uniform();
        let j = &self.imp.jitter;
        let u = self.jitter_c.next(u, j.correlation);
        let d = self.imp.delay_ns as f64 + j.amount_ns as f64 * j.distribution.quantile(u);
        d.max(0.0).round() as u64
    }
}
