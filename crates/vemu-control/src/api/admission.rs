//! Which connections a listener keeps while they have not yet proved who they are.
//!
//! A connection to the agents' port or the API's TCP port is *unproven* from its accept
//! until its first request carries a valid proof (the agents' token, the API's token or
//! a web session). Anyone who reaches the port can open unproven connections, so they
//! are held on a short leash, apart from the proven ones:
//!
//! * at most [`PER_SOURCE_UNPROVEN`] at once from one address: a new one pushes that
//!   address's oldest unproven one out, so a stranger on the underlay only ever churns
//!   his own connections and never takes the controller's slots (it comes from
//!   another address);
//! * at most [`MAX_UNPROVEN`] at once in all: a new one pushes the oldest unproven one
//!   out, so many strangers, or one sharing a client's address (a local user beside the
//!   browser on 127.0.0.1), cannot keep a new connection from being heard: it needs
//!   only milliseconds to prove itself;
//! * each must prove itself within [`PROOF_TIMEOUT`] of its accept (TLS handshake and
//!   first request), or it is closed.
//!
//! [`Admission`] is the bookkeeping alone (no socket, no clock); the listener's loop
//! ([`super::serve_connections`]) acts on what it says.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::Duration;

/// Unproven connections from one source address at once.
pub const PER_SOURCE_UNPROVEN: usize = 16;
/// Unproven connections at once, all sources together.
pub const MAX_UNPROVEN: usize = 64;
/// Time from accept to a request with a valid proof.
pub const PROOF_TIMEOUT: Duration = Duration::from_secs(5);

/// A new connection kept by [`Admission::admit`]: its number, and the unproven one
/// it pushed out to make room (to be closed now).
#[derive(Debug, PartialEq)]
pub struct Admit<T> {
    pub id: u64,
    pub evicted: Option<T>,
}

/// The unproven connections of one listener, oldest first, each with its source and
/// `T` (what closes it).
#[derive(Debug)]
pub struct Admission<T> {
    max_unproven: usize,
    per_source: usize,
    next_id: u64,
    unproven: VecDeque<(u64, Option<IpAddr>, T)>,
    by_source: HashMap<IpAddr, usize>,
}

impl<T> Default for Admission<T> {
    fn default() -> Self {
        Admission::new(MAX_UNPROVEN, PER_SOURCE_UNPROVEN)
    }
}

impl<T> Admission<T> {
    pub fn new(max_unproven: usize, per_source: usize) -> Self {
        Admission {
            max_unproven: max_unproven.max(1),
            per_source: per_source.max(1),
            next_id: 0,
            unproven: VecDeque::new(),
            by_source: HashMap::new(),
        }
    }

    /// A connection from `source` (None: a source that is not counted apart) was
    /// accepted; `close` is what closes it if it must make room later.
    pub fn admit(&mut self, source: Option<IpAddr>, close: T) -> Admit<T> {
        let crowded =
            source.filter(|s| self.by_source.get(s).copied().unwrap_or(0) >= self.per_source);
        let oldest = match crowded {
            Some(s) => {
                self.unproven.iter().find(|(_, from, _)| *from == Some(s)).map(|&(id, ..)| id)
            }
            None if self.unproven.len() >= self.max_unproven => {
                self.unproven.front().map(|&(id, ..)| id)
            }
            None => None,
        };
        let evicted = oldest.and_then(|id| self.remove(id));
        let id = self.next_id;
        self.next_id += 1;
        if let Some(s) = source {
            *self.by_source.entry(s).or_default() += 1;
        }
        self.unproven.push_back((id, source, close));
        Admit { id, evicted }
    }

    /// Connection `id` proved itself (or closed): it no longer counts. Returns what
    /// would have closed it, if it was still unproven.
    pub fn remove(&mut self, id: u64) -> Option<T> {
        let at = self.unproven.iter().position(|&(i, ..)| i == id)?;
        let (_, source, close) = self.unproven.remove(at)?;
        if let Some(s) = source {
            if let Some(n) = self.by_source.get_mut(&s) {
                *n -= 1;
                if *n == 0 {
                    self.by_source.remove(&s);
                }
            }
        }
        Some(close)
    }

    /// Unproven connections now.
    #[cfg(test)]
    pub fn unproven(&self) -> usize {
        self.unproven.len()
    }

    /// Unproven connections from `source` now.
    #[cfg(test)]
    pub fn unproven_from(&self, source: IpAddr) -> usize {
        self.by_source.get(&source).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn one_source_churns_only_its_own_connections() {
        let mut a = Admission::new(64, 3);
        for i in 0..3 {
            assert_eq!(a.admit(ip("10.0.0.9"), i), Admit { id: i, evicted: None });
        }
        let Admit { id: other, .. } = a.admit(ip("10.0.0.1"), 100);
        // The fourth from 10.0.0.9 pushes out 10.0.0.9's oldest, not 10.0.0.1's.
        assert_eq!(a.admit(ip("10.0.0.9"), 3), Admit { id: 4, evicted: Some(0) });
        assert_eq!(a.admit(ip("10.0.0.9"), 4), Admit { id: 5, evicted: Some(1) });
        assert_eq!((a.unproven(), a.unproven_from("10.0.0.9".parse().unwrap())), (4, 3));
        assert_eq!(a.remove(other), Some(100), "the other source's connection is still there");
    }

    #[test]
    fn a_proven_connection_leaves_room_for_its_source() {
        let mut a = Admission::new(64, 2);
        let Admit { id, .. } = a.admit(ip("::1"), "first");
        a.admit(ip("::1"), "second");
        assert_eq!(a.remove(id), Some("first"));
        assert_eq!(a.remove(id), None, "only once");
        assert_eq!(a.admit(ip("::1"), "third").evicted, None);
        assert_eq!(a.unproven_from("::1".parse().unwrap()), 2);
    }

    #[test]
    fn when_full_the_oldest_unproven_makes_room() {
        let mut a = Admission::new(3, 16);
        let ids: Vec<u64> = (0..3).map(|i| a.admit(ip("10.0.0.9"), i).id).collect();
        // The second proves itself: the oldest still unproven is the first, then the third.
        a.remove(ids[1]);
        assert_eq!(a.admit(None, 10).evicted, None);
        assert_eq!(a.admit(ip("10.0.0.1"), 11), Admit { id: 4, evicted: Some(0) });
        assert_eq!(a.admit(ip("10.0.0.1"), 12), Admit { id: 5, evicted: Some(2) });
        assert_eq!(
            a.unproven_from("10.0.0.9".parse().unwrap()),
            0,
            "pushed out ones no longer count"
        );
        assert_eq!(a.unproven(), 3);
    }
}
