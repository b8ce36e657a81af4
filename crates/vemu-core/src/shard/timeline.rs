//! Frames waiting for their time, handed out in the order (time, arrival) — the order a
//! single heap of every waiting frame gives, at a fraction of its cost.
//!
//! Nearly every frame waits behind the frames its own direction accepted before it: a
//! direction's delay is the same for each of them, or grows with its serializer, so its
//! frames fall due in the order they came. So each *lane* (what is done with a frame:
//! a direction's write, a switch's port) is a FIFO, and a heap holds only the first frame
//! of each lane: a flood of one frame to 31 ports waiting 1 ms kept some 1,300 frames in
//! one heap (12 % of the engine's time went to its pushes and pops), and now 31 lanes'
//! heads. A frame due before the last one of its lane (jitter that reorders) waits in a
//! heap of its own; the two heaps' first frames are compared. The order handed out is
//! exactly the single heap's (a test draws both).

use std::cmp::{Ordering, Reverse};
use std::collections::binary_heap::PeekMut;
use std::collections::{BinaryHeap, VecDeque};
use std::hash::Hash;

use rustc_hash::FxHashMap;

/// A lane that empties keeps room for this many (a lane that once held a burst of
/// 100,000 frames gives the rest of that memory back; one that fills and empties in
/// ordinary bursts keeps its room and reallocates nothing).
const LANE_KEEP: usize = 1024;

/// What is waiting, in the order it is due: earliest time first, the first pushed first
/// among equal times.
pub(crate) struct Timeline<K, T> {
    seq: u64,
    lanes: Vec<VecDeque<Waiting<T>>>,
    lane_of: FxHashMap<K, u32>,
    /// The first of each lane that has any: (time, seq, lane).
    heads: BinaryHeap<Reverse<(u64, u64, u32)>>,
    /// What fell due before the last of its lane.
    strays: BinaryHeap<Reverse<Waiting<T>>>,
}

struct Waiting<T> {
    at_ns: u64,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Waiting<T> {
    fn eq(&self, o: &Self) -> bool {
        (self.at_ns, self.seq) == (o.at_ns, o.seq)
    }
}
impl<T> Eq for Waiting<T> {}
impl<T> PartialOrd for Waiting<T> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<T> Ord for Waiting<T> {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.at_ns, self.seq).cmp(&(o.at_ns, o.seq))
    }
}

impl<K, T> Default for Timeline<K, T> {
    fn default() -> Self {
        Timeline {
            seq: 0,
            lanes: Vec::new(),
            lane_of: FxHashMap::default(),
            heads: BinaryHeap::new(),
            strays: BinaryHeap::new(),
        }
    }
}

impl<K: Hash + Eq, T> Timeline<K, T> {
    /// `item` falls due at `at_ns`, in lane `lane`.
    pub fn push(&mut self, at_ns: u64, lane: K, item: T) {
        self.seq += 1;
        let w = Waiting { at_ns, seq: self.seq, item };
        let next = self.lanes.len() as u32;
        let l = *self.lane_of.entry(lane).or_insert(next);
        if l == next {
            self.lanes.push(VecDeque::new());
        }
        let q = &mut self.lanes[l as usize];
        match q.back() {
            None => {
                self.heads.push(Reverse((at_ns, w.seq, l)));
                q.push_back(w);
            }
            Some(last) if last.at_ns <= at_ns => q.push_back(w),
            Some(_) => self.strays.push(Reverse(w)),
        }
    }

    /// When the first of what waits falls due.
    pub fn next_ns(&self) -> Option<u64> {
        let head = self.heads.peek().map(|Reverse((t, ..))| *t);
        let stray = self.strays.peek().map(|Reverse(w)| w.at_ns);
        head.into_iter().chain(stray).min()
    }

    /// The first of what is due by `now` (its time and the item), taken out.
    pub fn pop_due(&mut self, now: u64) -> Option<(u64, T)> {
        let head = self.heads.peek().map(|Reverse((t, s, _))| (*t, *s));
        let stray = self.strays.peek().map(|Reverse(w)| (w.at_ns, w.seq));
        match (head, stray) {
            (Some(h), s) if h.0 <= now && s.is_none_or(|s| h < s) => {
                let mut top = self.heads.peek_mut().expect("peeked");
                let l = top.0 .2;
                let q = &mut self.lanes[l as usize];
                let w = q.pop_front().expect("a lane with a head has a first");
                // The lane's next first takes its place (one sift, not a pop and a push).
                match q.front() {
                    Some(n) => *top = Reverse((n.at_ns, n.seq, l)),
                    None => {
                        PeekMut::pop(top);
                        if q.capacity() > LANE_KEEP {
                            q.shrink_to(LANE_KEEP);
                        }
                    }
                }
                Some((w.at_ns, w.item))
            }
            (_, Some(s)) if s.0 <= now => {
                let Reverse(w) = self.strays.pop().expect("peeked");
                Some((w.at_ns, w.item))
            }
            _ => None,
        }
    }

    /// How many wait.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lanes.iter().map(VecDeque::len).sum::<usize>() + self.strays.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift), for drawing pushes.
    struct Draw(u64);
    impl Draw {
        fn next(&mut self, below: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % below
        }
    }

    /// Pushes and pops drawn at random — lanes mostly in order, some frames earlier than
    /// their lane's last, many equal times — come out exactly as one heap of (time,
    /// seq) hands them out.
    #[test]
    fn hands_out_what_one_heap_would() {
        for seed in 1..40u64 {
            let mut d = Draw(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut t: Timeline<u32, u64> = Timeline::default();
            let mut reference: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
            let mut last_in_lane = [0u64; 8];
            let (mut now, mut seq) = (0u64, 0u64);
            for _ in 0..3000 {
                if d.next(3) > 0 {
                    let lane = d.next(8) as u32;
                    // A lane's next time: its last or later, now and then earlier.
                    let at = match d.next(10) {
                        0 => now + d.next(50),
                        _ => last_in_lane[lane as usize].max(now) + d.next(20),
                    };
                    last_in_lane[lane as usize] = last_in_lane[lane as usize].max(at);
                    seq += 1;
                    t.push(at, lane, seq);
                    reference.push(Reverse((at, seq)));
                } else {
                    now += d.next(30);
                    loop {
                        let want = reference
                            .peek()
                            .filter(|Reverse((at, _))| *at <= now)
                            .map(|Reverse(x)| *x);
                        assert_eq!(t.next_ns(), reference.peek().map(|Reverse((a, _))| *a));
                        let got = t.pop_due(now);
                        assert_eq!(got, want, "seed {seed} at {now}");
                        if want.is_none() {
                            break;
                        }
                        reference.pop();
                    }
                }
            }
            assert_eq!(t.len(), reference.len());
        }
    }

    /// Lanes kept in order never touch the strays' heap; the heads' heap holds one entry
    /// per lane that waits.
    #[test]
    fn lanes_in_order_keep_one_head_each() {
        let mut t: Timeline<u32, u32> = Timeline::default();
        for i in 0..100u32 {
            for lane in 0..31 {
                t.push(1_000_000 + u64::from(i) * 10, lane, i);
            }
        }
        assert_eq!((t.heads.len(), t.strays.len(), t.len()), (31, 0, 3100));
        assert_eq!(t.pop_due(999_999), None);
        assert_eq!(t.pop_due(1_000_000), Some((1_000_000, 0)));
        assert_eq!(t.heads.len(), 31);
        // An earlier frame in a lane waits apart and still comes first.
        t.push(5, 3, 77);
        assert_eq!(t.strays.len(), 1);
        assert_eq!(t.next_ns(), Some(5));
        assert_eq!(t.pop_due(5), Some((5, 77)));
    }

    #[test]
    fn a_lane_that_empties_after_a_burst_gives_its_room_back() {
        let mut t: Timeline<u32, u64> = Timeline::default();
        for i in 0..100_000 {
            t.push(i, 7, i);
        }
        assert!(t.lanes[0].capacity() >= 100_000);
        while t.pop_due(u64::MAX).is_some() {}
        assert!(t.lanes[0].capacity() <= LANE_KEEP, "{}", t.lanes[0].capacity());
        // Ordinary bursts keep their room.
        for i in 0..500 {
            t.push(i, 7, i);
        }
        let room = t.lanes[0].capacity();
        while t.pop_due(u64::MAX).is_some() {}
        assert_eq!(t.lanes[0].capacity(), room);
    }
}
