//! Strict priority between levels, deficit round robin (Shreedhar and Varghese,
//! "Efficient Fair Queueing using Deficit Round Robin", 1995) between the classes of a
//! level. Packets are handles (`id`) with a length; the caller keeps the bytes.

use std::collections::VecDeque;

#[derive(Debug, Clone)]
struct Class {
    /// 0 is served first.
    priority: u8,
    /// Bytes a class may send per round (its weight).
    quantum: u64,
    deficit: u64,
    queue: VecDeque<(u64, u32)>,
    bytes: u64,
}

/// Per-class FIFO queues and the order they are served in.
#[derive(Debug, Clone, Default)]
pub struct Scheduler {
    classes: Vec<Class>,
    /// Per priority level (ascending), its backlogged classes in round-robin order; the
    /// front one is being served.
    active: Vec<(u8, VecDeque<usize>)>,
    /// The front class of a level got its quantum for this turn.
    granted: Vec<bool>,
}

impl Scheduler {
    /// Classes as (priority, quantum in bytes); a quantum of at least the largest packet
    /// keeps DRR's cost O(1) per packet.
    pub fn new(classes: &[(u8, u64)]) -> Scheduler {
        let mut levels: Vec<u8> = classes.iter().map(|c| c.0).collect();
        levels.sort_unstable();
        levels.dedup();
        Scheduler {
            classes: classes
                .iter()
                .map(|&(priority, quantum)| Class {
                    priority,
                    quantum: quantum.max(1),
                    deficit: 0,
                    queue: VecDeque::new(),
                    bytes: 0,
                })
                .collect(),
            granted: vec![false; levels.len()],
            active: levels.into_iter().map(|l| (l, VecDeque::new())).collect(),
        }
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
