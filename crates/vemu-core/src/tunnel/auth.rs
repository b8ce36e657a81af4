//! Authenticated tunnel datagrams: every datagram between two machines' engines (a
//! frame's piece, a probe, an answer) ends with a nonce and a tag, AES-256-GCM's over
//! the whole datagram (as additional data: nothing is encrypted, tcpdump still decodes
//! it) under the lab's key, which the controller makes and hands to each machine over
//! its TLS connection. A datagram whose tag does not verify — forged, or damaged — is
//! dropped and counted before anything reads it; so is one whose nonce was seen
//! already (a replay). The nonce is the sender's number (machine, shard) and a counter
//! of its own: no two datagrams under one key share one.
//!
//! ```text
//! | datagram ... | sender u32 | counter u64 | tag (16) |
//! ```

use std::collections::HashMap;

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};

/// Bytes a sealed datagram carries beyond its own: the nonce (12) and the tag (16).
pub const AUTH_LEN: usize = NONCE_LEN + TAG_LEN;
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;

/// A lab's tunnel key.
pub struct Key(LessSafeKey);

impl Key {
    pub fn new(bytes: &[u8; 32]) -> Key {
        Key(LessSafeKey::new(UnboundKey::new(&AES_256_GCM, bytes).expect("a 256-bit key")))
    }
}

/// The number a sender puts in its nonces: its machine's and its shard's.
pub fn sender(machine: usize, shard: usize) -> u32 {
    ((machine as u32 & 0xffff) << 16) | (shard as u32 & 0xffff)
}

/// Seals what one sender sends.
pub struct Sealer {
    sender: u32,
    next: u64,
}

impl Sealer {
    pub fn new(sender: u32) -> Sealer {
        Sealer { sender, next: 0 }
    }

    /// Append the nonce and the tag of `d` under `key`.
    pub fn seal(&mut self, key: &Key, d: &mut Vec<u8>) {
        let mut n = [0u8; NONCE_LEN];
        n[..4].copy_from_slice(&self.sender.to_be_bytes());
        n[4..].copy_from_slice(&self.next.to_be_bytes());
        self.next += 1;
        let tag = key
            .0
            .seal_in_place_separate_tag(Nonce::assume_unique_for_key(n), Aad::from(&d[..]), &mut [])
            .expect("sealing nothing under a valid key");
        d.extend_from_slice(&n);
        d.extend_from_slice(tag.as_ref());
    }
}

/// Why a datagram was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthError {
    /// Too short to hold a nonce and a tag.
    Short,
    /// Its tag does not verify: forged or damaged.
    Forged,
    /// Its nonce was seen already (or is too old to tell).
    Replayed,
}

/// How far behind a sender's newest counter a datagram is still taken (a datagram
/// reordered by the underlay), each counter once.
const WINDOW: u64 = 1024;

/// The counters seen of one sender: the newest, and which of the [`WINDOW`] before it.
struct Seen {
    top: u64,
    bits: [u64; (WINDOW / 64) as usize],
}

impl Seen {
    fn bit(&mut self, c: u64) -> (&mut u64, u64) {
        let i = (c % WINDOW) as usize;
        (&mut self.bits[i / 64], 1 << (i % 64))
    }

    /// Take counter `c` if it is new (marking it seen); `false` for a repeat or one too old.
    fn take(&mut self, c: u64) -> bool {
        if c > self.top {
            // Counters skipped between the old top and `c` become unseen slots.
            for skipped in (self.top + 1..c).rev().take(WINDOW as usize) {
                let (w, b) = self.bit(skipped);
                *w &= !b;
            }
            self.top = c;
            let (w, b) = self.bit(c);
            *w |= b;
            return true;
        }
        if self.top - c >= WINDOW {
            return false;
        }
        let (w, b) = self.bit(c);
        let new = *w & b == 0;
        *w |= b;
        new
    }
}

/// Opens what a machine receives: tags verified, replays refused.
#[derive(Default)]
pub struct Opener {
    seen: HashMap<u32, Seen>,
}

impl Opener {
    /// The datagram `d` without its nonce and tag, if its tag verifies under `key` and
    /// its nonce is new.
    pub fn open<'a>(&mut self, key: &Key, d: &'a [u8]) -> Result<&'a [u8], AuthError> {
        if d.len() < AUTH_LEN {
            return Err(AuthError::Short);
        }
        let (body, rest) = d.split_at(d.len() - AUTH_LEN);
        let (n, tag) = rest.split_at(NONCE_LEN);
        let nonce: [u8; NONCE_LEN] = n.try_into().expect("12 bytes");
        let mut tag_buf: [u8; TAG_LEN] = tag.try_into().expect("16 bytes");
        key.0
            .open_in_place(Nonce::assume_unique_for_key(nonce), Aad::from(body), &mut tag_buf)
            .map_err(|_| AuthError::Forged)?;
        let sender = u32::from_be_bytes(nonce[..4].try_into().expect("4 bytes"));
        let counter = u64::from_be_bytes(nonce[4..].try_into().expect("8 bytes"));
        use std::collections::hash_map::Entry;
        let new = match self.seen.entry(sender) {
            // A sender's first datagram.
            Entry::Vacant(v) => {
                let mut seen = Seen { top: counter, bits: [0; (WINDOW / 64) as usize] };
                let (w, b) = seen.bit(counter);
                *w |= b;
                v.insert(seen);
                true
            }
            Entry::Occupied(mut o) => o.get_mut().take(counter),
        };
        match new {
            true => Ok(body),
            false => Err(AuthError::Replayed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> Key {
        Key::new(&[b; 32])
    }

    #[test]
    fn a_sealed_datagram_opens_and_a_forged_or_damaged_one_does_not() {
        let (k, mut s, mut o) = (key(7), Sealer::new(sender(1, 2)), Opener::default());
        let mut d = b"\x08\0\0\0\0\0\x05\0a frame's piece".to_vec();
        let plain = d.clone();
        s.seal(&k, &mut d);
        assert_eq!(d.len(), plain.len() + AUTH_LEN);
        assert_eq!(o.open(&k, &d), Ok(&plain[..]));
        // A byte changed anywhere: header, payload, nonce or tag.
        for i in [0, 6, 10, plain.len() + 2, d.len() - 1] {
            let mut bad = d.clone();
            bad[i] ^= 1;
            assert_eq!(Opener::default().open(&k, &bad), Err(AuthError::Forged), "byte {i}");
        }
        // Another lab's key; too short.
        assert_eq!(Opener::default().open(&key(8), &d), Err(AuthError::Forged));
        assert_eq!(o.open(&k, &d[..10]), Err(AuthError::Short));
        // Forged datagrams in numbers lose nothing that follows.
        for _ in 0..100 {
            assert!(o.open(&k, b"forged forged forged forged forged forged").is_err());
        }
        let mut next = plain.clone();
        s.seal(&k, &mut next);
        assert_eq!(o.open(&k, &next), Ok(&plain[..]));
    }

    #[test]
    fn each_datagram_is_taken_once_and_reordered_ones_within_the_window() {
        let (k, mut s, mut o) = (key(1), Sealer::new(sender(0, 0)), Opener::default());
        let sealed: Vec<Vec<u8>> = (0..2000u32)
            .map(|i| {
                let mut d = i.to_be_bytes().to_vec();
                s.seal(&k, &mut d);
                d
            })
            .collect();
        assert!(o.open(&k, &sealed[0]).is_ok());
        assert_eq!(o.open(&k, &sealed[0]), Err(AuthError::Replayed));
        // 5 before 3 and 4: all taken, once.
        for i in [5, 3, 4] {
            assert!(o.open(&k, &sealed[i]).is_ok(), "{i}");
        }
        assert_eq!(o.open(&k, &sealed[4]), Err(AuthError::Replayed));
        // Far ahead, then one within the window and one beyond it.
        assert!(o.open(&k, &sealed[1500]).is_ok());
        assert!(o.open(&k, &sealed[1000]).is_ok());
        assert_eq!(o.open(&k, &sealed[100]), Err(AuthError::Replayed));
        // Another sender counts apart.
        let mut other = Sealer::new(sender(1, 0));
        let mut d = b"x".to_vec();
        other.seal(&k, &mut d);
        assert!(o.open(&k, &d).is_ok());
    }
}
