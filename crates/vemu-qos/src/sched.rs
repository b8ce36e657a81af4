//! Strict priority between levels, and between the classes of a level deficit round
//! robin (Shreedhar and Varghese, "Efficient Fair Queueing using Deficit Round Robin",
//! 1995), weighted fair queueing, or WF²Q+ (Bennett and Zhang, "Hierarchical Packet Fair
//! Queueing Algorithms", 1997) — [`Discipline`]. Packets are handles (`id`) with a
//! length; the caller keeps the bytes.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// How the classes of one priority level share it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Discipline {
    /// Deficit round robin: each backlogged class sends up to its quantum a round (O(1)
    /// per packet; a class may wait a whole round of the others).
    #[default]
    Drr,
    /// Weighted fair queueing: the packet that would finish first under fluid fair
    /// sharing (smallest virtual finish time), on WF²Q+'s virtual clock. A class's delay
    /// is bounded by its packet at its share plus one largest packet; a heavy class may
    /// send a burst ahead of its share.
    Wfq,
    /// WF²Q+: the same, among the packets that would already have started under fluid
    /// sharing (virtual start time not after the virtual clock): the same delay bound,
    /// and no class ever ahead of its fluid share by more than one largest packet.
    #[serde(rename = "wf2q+")]
    Wf2qPlus,
}

#[derive(Debug, Clone)]
struct Class {
    /// 0 is served first.
    priority: u8,
    /// Bytes a class may send per round (its weight).
    quantum: u64,
    deficit: u64,
    queue: VecDeque<(u64, u32)>,
    bytes: u64,
    /// Fair queueing: the head packet's virtual start and finish times (bytes of
    /// service of the whole level, scaled by [`SCALE`]).
    start: u128,
    finish: u128,
}

/// Virtual times are in bytes of the level's service times this, so that a packet's
/// length over its class's share is exact enough in integers.
const SCALE: u128 = 1 << 20;

/// Per-class FIFO queues and the order they are served in.
#[derive(Debug, Clone, Default)]
pub struct Scheduler {
    classes: Vec<Class>,
    /// Per priority level (ascending), its backlogged classes in round-robin order; the
    /// front one is being served.
    active: Vec<(u8, VecDeque<usize>)>,
    /// The front class of a level got its quantum for this turn.
    granted: Vec<bool>,
    discipline: Discipline,
    /// Fair queueing, per level: its virtual clock and its classes' weights summed.
    virtual_now: Vec<u128>,
    weight_sum: Vec<u64>,
}

impl Scheduler {
    /// Classes as (priority, quantum in bytes); a quantum of at least the largest packet
    /// keeps DRR's cost O(1) per packet.
    pub fn new(classes: &[(u8, u64)]) -> Scheduler {
        Scheduler::with(classes, Discipline::Drr)
    }

    /// The same, the classes of a level sharing it by `discipline` (their quanta are
    /// their weights).
    pub fn with(classes: &[(u8, u64)], discipline: Discipline) -> Scheduler {
        let mut levels: Vec<u8> = classes.iter().map(|c| c.0).collect();
        levels.sort_unstable();
        levels.dedup();
        let weight_sum = levels
            .iter()
            .map(|&l| classes.iter().filter(|c| c.0 == l).map(|c| c.1.max(1)).sum())
            .collect();
        Scheduler {
            classes: classes
                .iter()
                .map(|&(priority, quantum)| Class {
                    priority,
                    quantum: quantum.max(1),
                    deficit: 0,
                    queue: VecDeque::new(),
                    bytes: 0,
                    start: 0,
                    finish: 0,
                })
                .collect(),
            granted: vec![false; levels.len()],
            virtual_now: vec![0; levels.len()],
            weight_sum,
            discipline,
            active: levels.into_iter().map(|l| (l, VecDeque::new())).collect(),
        }
    }

    pub fn discipline(&self) -> Discipline {
        self.discipline
    }

    /// Class `class`'s head packet of `len` bytes: its virtual finish time, at its share.
    fn tag(&mut self, class: usize, l: usize, len: u32) {
        let c = &mut self.classes[class];
        c.finish = c.start
            + u128::from(len) * SCALE * u128::from(self.weight_sum[l]) / u128::from(c.quantum);
    }

    fn level(&self, priority: u8) -> usize {
        self.active.iter().position(|(l, _)| *l == priority).expect("every class's level exists")
    }

    pub fn enqueue(&mut self, class: usize, id: u64, len: u32) {
        let c = &mut self.classes[class];
        c.queue.push_back((id, len));
        c.bytes += len as u64;
        if c.queue.len() == 1 {
            let l = self.level(self.classes[class].priority);
            self.active[l].1.push_back(class);
            if self.discipline != Discipline::Drr {
                // Backlogged anew: it starts no earlier than the level's virtual clock.
                let c = &mut self.classes[class];
                c.start = c.finish.max(self.virtual_now[l]);
                self.tag(class, l, len);
            }
        }
    }

    /// Bytes waiting in a class.
    pub fn backlog_bytes(&self, class: usize) -> u64 {
        self.classes[class].bytes
    }

    pub fn is_empty(&self) -> bool {
        self.active.iter().all(|(_, q)| q.is_empty())
    }

    /// The next packet to send: (class, id, len).
    pub fn dequeue(&mut self) -> Option<(usize, u64, u32)> {
        let l = self.active.iter().position(|(_, q)| !q.is_empty())?;
        if self.discipline != Discipline::Drr {
            return Some(self.dequeue_fair(l));
        }
        loop {
            let class = *self.active[l].1.front().expect("a backlogged level");
            let c = &mut self.classes[class];
            if !self.granted[l] {
                c.deficit += c.quantum;
                self.granted[l] = true;
            }
            let &(id, len) = c.queue.front().expect("an active class has packets");
            if len as u64 <= c.deficit {
                c.deficit -= len as u64;
                c.queue.pop_front();
                c.bytes -= len as u64;
                if c.queue.is_empty() {
                    // An idle class keeps no credit (DRR).
                    c.deficit = 0;
                    self.active[l].1.pop_front();
                    self.granted[l] = false;
                }
                return Some((class, id, len));
            }
            // Its turn is over: to the back of the round with what it has left.
            self.active[l].1.rotate_left(1);
            self.granted[l] = false;
        }
    }
}

impl Scheduler {
    /// Fair queueing at level `l` (backlogged): the smallest virtual finish time among
    /// its classes (WF²Q+: among those whose virtual start has come), then the virtual
    /// clock advances by the packet's length and to the earliest start still waiting
    /// (WF²Q+'s system virtual time, V = max(V + L, min S)).
    fn dequeue_fair(&mut self, l: usize) -> (usize, u64, u32) {
        let v = self.virtual_now[l];
        let wf2q = self.discipline == Discipline::Wf2qPlus;
        let classes = &self.classes;
        let pick = |eligible_only: bool| {
            self.active[l]
                .1
                .iter()
                .copied()
                .filter(|&k| !eligible_only || classes[k].start <= v)
                .min_by_key(|&k| (classes[k].finish, k))
        };
        // (WF²Q+'s clock keeps some start at or before it: never none eligible.)
        let class = if wf2q { pick(true).or_else(|| pick(false)) } else { pick(false) }
            .expect("a backlogged level");
        let c = &mut self.classes[class];
        let (id, len) = c.queue.pop_front().expect("an active class has packets");
        c.bytes -= u64::from(len);
        let next = c.queue.front().map(|&(_, n)| n);
        c.start = c.finish;
        if let Some(n) = next {
            self.tag(class, l, n);
        } else {
            let q = &mut self.active[l].1;
            q.retain(|&k| k != class);
        }
        let min_start = self.active[l].1.iter().map(|&k| self.classes[k].start).min();
        let advanced = v + u128::from(len) * SCALE;
        self.virtual_now[l] = min_start.map_or(advanced, |s| advanced.max(s));
        (class, id, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain_bytes(s: &mut Scheduler, n: usize, classes: usize) -> Vec<u64> {
        let mut bytes = vec![0u64; classes];
        for _ in 0..n {
            let (c, _, len) = s.dequeue().expect("backlogged");
            bytes[c] += len as u64;
        }
        bytes
    }

    #[test]
    fn drr_shares_bytes_by_quantum_whatever_the_packet_sizes() {
        // Weights 1:2:3; class 0 sends 1500-byte packets, class 1 64-byte ones, class 2 a mix.
        let mut s = Scheduler::new(&[(0, 1500), (0, 3000), (0, 4500)]);
        let sizes = [vec![1500u32], vec![64; 50], vec![40, 1500, 576, 9000]];
        let mut id = 0;
        for _ in 0..20_000 {
            for (c, sz) in sizes.iter().enumerate() {
                for &len in sz {
                    s.enqueue(c, id, len);
                    id += 1;
                }
            }
        }
        // 20 MB sent: no class runs dry (they hold 30, 64 and 222 MB).
        let mut b = vec![0u64; 3];
        while b.iter().sum::<u64>() < 20_000_000 {
            let x = drain_bytes(&mut s, 1000, 3);
            b.iter_mut().zip(x).for_each(|(a, x)| *a += x);
        }
        let total: u64 = b.iter().sum();
        for (c, want) in [(0, 1.0 / 6.0), (1, 2.0 / 6.0), (2, 3.0 / 6.0)] {
            let share = b[c] as f64 / total as f64;
            assert!(
                (share - want).abs() < 0.01,
                "class {c}: {share:.4} of the bytes, want {want:.4} ({b:?})"
            );
        }
    }

    #[test]
    fn strict_priority_first_and_fifo_within_a_class() {
        let mut s = Scheduler::new(&[(1, 1500), (0, 1500)]);
        for i in 0..5 {
            s.enqueue(0, i, 100);
        }
        s.enqueue(1, 100, 100);
        s.enqueue(1, 101, 100);
        let order: Vec<u64> = std::iter::from_fn(|| s.dequeue()).map(|(_, id, _)| id).collect();
        assert_eq!(order, [100, 101, 0, 1, 2, 3, 4]);
        assert!(s.is_empty());
        assert_eq!(s.dequeue(), None);
    }

    #[test]
    fn an_idle_class_keeps_no_credit_and_a_big_packet_waits_for_its_deficit() {
        let mut s = Scheduler::new(&[(0, 500), (0, 500)]);
        s.enqueue(0, 1, 1200); // needs three rounds of 500
        s.enqueue(1, 2, 100);
        s.enqueue(1, 3, 100);
        s.enqueue(1, 4, 100);
        let order: Vec<u64> = std::iter::from_fn(|| s.dequeue()).map(|(_, id, _)| id).collect();
        assert_eq!(order, [2, 3, 4, 1]);
        assert_eq!(s.backlog_bytes(0), 0);
        // Class 1 went idle with 200 left; coming back it starts from its quantum again.
        s.enqueue(1, 5, 600);
        s.enqueue(0, 6, 500);
        let order: Vec<u64> = std::iter::from_fn(|| s.dequeue()).map(|(_, id, _)| id).collect();
        assert_eq!(order, [6, 5]);
    }
}

#[cfg(test)]
mod fair_tests {
    use super::*;

    /// Weights 1:2:3 with packets of every size: WFQ and WF²Q+ give each class its
    /// weight's share of the bytes within 2 %.
    #[test]
    fn fair_queueing_shares_bytes_by_weight() {
        for d in [Discipline::Wfq, Discipline::Wf2qPlus] {
            let mut s = Scheduler::with(&[(0, 1), (0, 2), (0, 3)], d);
            let sizes = [vec![1500u32], vec![64; 50], vec![40, 1500, 576, 9000]];
            let mut id = 0;
            for _ in 0..5_000 {
                for (c, sz) in sizes.iter().enumerate() {
                    for &len in sz {
                        s.enqueue(c, id, len);
                        id += 1;
                    }
                }
            }
            let mut b = [0u64; 3];
            while b.iter().sum::<u64>() < 5_000_000 {
                let (c, _, len) = s.dequeue().expect("backlogged");
                b[c] += u64::from(len);
            }
            let total: u64 = b.iter().sum();
            for (c, want) in [(0, 1.0 / 6.0), (1, 2.0 / 6.0), (2, 3.0 / 6.0)] {
                let share = b[c] as f64 / total as f64;
                assert!(
                    (share - want).abs() < 0.02 * want,
                    "{d:?} class {c}: {share:.4}, want {want:.4}"
                );
            }
        }
    }

    /// The delay bound: a class's packet arriving while ten others are backlogged with
    /// full-size frames leaves before the level has served more than its length at its
    /// share plus one largest packet (64 × 11 + 1500 bytes) — where DRR makes it wait
    /// for a round of the others.
    #[test]
    fn a_newly_backlogged_class_waits_no_more_than_its_bound() {
        let served_before = |d: Discipline| {
            let mut s = Scheduler::with(&[(0, FULL); 11], d);
            let mut id = 0;
            for _ in 0..100 {
                for c in 1..11 {
                    s.enqueue(c, id, 1500);
                    id += 1;
                }
            }
            for _ in 0..37 {
                s.dequeue();
            }
            s.enqueue(0, u64::MAX, 64);
            let mut bytes = 0u64;
            loop {
                let (c, _, len) = s.dequeue().unwrap();
                if c == 0 {
                    return bytes;
                }
                bytes += u64::from(len);
            }
        };
        const FULL: u64 = 1514;
        for d in [Discipline::Wfq, Discipline::Wf2qPlus] {
            let b = served_before(d);
            assert!(b <= 64 * 11 + 1500, "{d:?}: {b} bytes before the 64-byte packet");
        }
        assert!(served_before(Discipline::Drr) >= 9 * 1500, "DRR: a round of the others first");
    }

    /// WF²Q+ keeps every class within one largest packet of its fluid share at every
    /// point of the output; WFQ lets a heavy class (half the weight) run ahead.
    #[test]
    fn wf2q_plus_never_runs_a_class_ahead_of_its_share() {
        let lead = |d: Discipline| {
            let mut w = vec![(0u8, 10u64)];
            w.extend(std::iter::repeat_n((0u8, 1u64), 10));
            let mut s = Scheduler::with(&w, d);
            for i in 0..200 {
                for c in 0..11 {
                    s.enqueue(c, i, 1500);
                }
            }
            let (mut heavy, mut total, mut most) = (0f64, 0f64, 0f64);
            for _ in 0..1000 {
                let (c, _, len) = s.dequeue().unwrap();
                total += f64::from(len);
                if c == 0 {
                    heavy += f64::from(len);
                }
                most = f64::max(most, heavy - total / 2.0);
            }
            most
        };
        assert!(lead(Discipline::Wf2qPlus) <= 1500.0, "WF²Q+ {}", lead(Discipline::Wf2qPlus));
        assert!(lead(Discipline::Wfq) >= 3.0 * 1500.0, "WFQ {}", lead(Discipline::Wfq));
    }
}
