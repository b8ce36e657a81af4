//! The wire format of links between machines (sans-IO): a frame that a link direction
//! has carried (its impairments applied by the sending machine's engine) travels to the
//! machine of the receiving node in UDP datagrams, each one a VXLAN header (RFC 7348;
//! VNI = link direction, see [`vni`]) so that tcpdump and tshark decode it, a piece of
//! the Ethernet frame, and a trailer of vemu's own:
//!
//! ```text
//! | VXLAN: 08 00 00 00 | VNI (24 bits) | 00 | piece of the frame | trailer (28 bytes) |
//! trailer: magic "vm" | piece index u8 | piece count u8 | sequence u32 |
//!          departure (lab ns) u64 | virtio-net header (10) | 00 00
//! ```
//!
//! Frames larger than what one datagram carries over the underlay's MTU (full-size
//! frames over a 1500-byte underlay, TCP super-frames of up to 64 KiB) are cut into up
//! to 255 pieces and made whole again at the far end, so the kernel never fragments IP
//! and nodes keep their MTU. A frame missing a piece is dropped whole; the sequence
//! numbers tell how many frames the underlay lost. Pieces of one frame leave together
//! on one socket: a piece of a newer frame abandons a frame still incomplete.

use crate::gso::VNET_HDR_LEN;

pub mod auth;
pub use auth::AUTH_LEN;

/// UDP port of cross-machine links unless configured (clabernetes' choice, not VXLAN's
/// 4789, so that a kernel VXLAN device on the machine is not disturbed).
pub const DEFAULT_PORT: u16 = 14789;
pub const VXLAN_LEN: usize = 8;
pub const TRAILER_LEN: usize = 28;
const MAGIC: [u8; 2] = *b"vm";
/// Largest frame carried (virtio-net header excluded): a 64 KiB super-frame and a VLAN tag.
pub const MAX_FRAME: usize = 65_535 + 18;
/// Smallest underlay datagram payload accepted: enough for a maximal frame in 255 pieces
/// (each sealed: [`auth`]).
pub const MIN_PAYLOAD: usize = VXLAN_LEN + TRAILER_LEN + AUTH_LEN + MAX_FRAME.div_ceil(255);

/// The VXLAN network identifier of a link direction (0 = forward, 1 = reverse).
pub fn vni(link: u32, dir: u8) -> u32 {
    link * 2 + dir as u32
}

/// The VNI of the other direction of the same link.
pub fn vni_reverse(vni: u32) -> u32 {
    vni ^ 1
}

/// The VNI a datagram (a frame's piece or a probe) carries in its VXLAN header.
pub fn vni_of(d: &[u8]) -> Option<u32> {
    (d.len() >= VXLAN_LEN).then(|| u32::from_be_bytes([0, d[4], d[5], d[6]]))
}

/// Link and direction of a VNI.
pub fn link_dir(vni: u32) -> (u32, u8) {
    (vni / 2, (vni % 2) as u8)
}

/// Largest VNI (24 bits): links beyond 2^23 cannot cross machines.
pub const MAX_VNI: u32 = (1 << 24) - 1;

/// UDP payload bytes available over an underlay with this MTU (IPv4 or IPv6 headers).
pub fn payload_for_mtu(mtu: u32, ipv6: bool) -> usize {
    (mtu as usize).saturating_sub(if ipv6 { 40 } else { 20 } + 8)
}

/// What a frame carries besides its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    pub vni: u32,
    /// Per VNI, one more for every frame sent.
    pub seq: u32,
    /// When the frame left the sending engine, lab ns of the sender's clock.
    pub departure_ns: u64,
}

/// Why a datagram was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// Shorter than a header and trailer.
    Short,
    /// Not VXLAN with vemu's trailer.
    NotVemu,
    /// Piece index or count out of range, or a frame too large.
    BadPiece,
}

/// Cut `frame` (virtio-net header + Ethernet frame, as the core hands it out) into
/// datagrams of at most `payload` bytes each once sealed ([`auth`]: [`AUTH_LEN`] bytes
/// are left for it), appended to `out`. `payload` below
/// [`MIN_PAYLOAD`] is raised to it; frames over [`MAX_FRAME`] or shorter than a
/// virtio-net header are not sent (returns 0). Returns the number of datagrams.
pub fn encode(frame: &[u8], meta: Meta, payload: usize, out: &mut Vec<Vec<u8>>) -> usize {
    if frame.len() < VNET_HDR_LEN || frame.len() - VNET_HDR_LEN > MAX_FRAME || meta.vni > MAX_VNI {
        return 0;
    }
    let (vnet, eth) = frame.split_at(VNET_HDR_LEN);
    let chunk = payload.max(MIN_PAYLOAD) - VXLAN_LEN - TRAILER_LEN - AUTH_LEN;
    let count = eth.len().div_ceil(chunk).max(1);
    for i in 0..count {
        let piece = &eth[(i * chunk).min(eth.len())..((i + 1) * chunk).min(eth.len())];
        let mut d = Vec::with_capacity(VXLAN_LEN + piece.len() + TRAILER_LEN);
        let v = meta.vni.to_be_bytes();
        d.extend_from_slice(&[0x08, 0, 0, 0, v[1], v[2], v[3], 0]);
        d.extend_from_slice(piece);
        d.extend_from_slice(&MAGIC);
        d.extend_from_slice(&[i as u8, count as u8]);
        d.extend_from_slice(&meta.seq.to_be_bytes());
        d.extend_from_slice(&meta.departure_ns.to_be_bytes());
        d.extend_from_slice(vnet);
        d.extend_from_slice(&[0, 0]);
        out.push(d);
    }
    count
}

/// Shortest probe: a VXLAN header whose second byte says probe (1) or answer (2), the
/// prober's clock reading (ns, big-endian) and a size (u16, big-endian): a probe's own
/// length (it is padded with zeros to it), or in an answer the length of the probe
/// answered. A probe of a given size that is answered tells that datagrams of that size
/// cross the underlay: the path's MTU, which may be below the interfaces' (a hop that
/// drops larger packets without a word is the MTU black hole of other tools' tunnels).
pub const PROBE_LEN: usize = VXLAN_LEN + 10;

/// Largest datagram payload assumed to cross any underlay until a probe shows more: an
/// IPv6 packet of the minimum MTU every IPv6 link carries (1280 bytes).
pub const SAFE_PAYLOAD: usize = 1280 - 40 - 8;

/// A probe of the underlay of `size` bytes (at least [`PROBE_LEN`]), or the answer to
/// one of that size (`answer`: the peer's echo, itself short).
pub fn probe(vni: u32, t_ns: u64, answer: bool, size: usize) -> Vec<u8> {
    let size = size.clamp(PROBE_LEN, u16::MAX as usize);
    let v = vni.to_be_bytes();
    let mut d = vec![0u8; if answer { PROBE_LEN } else { size }];
    d[..VXLAN_LEN].copy_from_slice(&[0x08, if answer { 2 } else { 1 }, 0, 0, v[1], v[2], v[3], 0]);
    d[VXLAN_LEN..VXLAN_LEN + 8].copy_from_slice(&t_ns.to_be_bytes());
    d[VXLAN_LEN + 8..PROBE_LEN].copy_from_slice(&(size as u16).to_be_bytes());
    d
}

/// A probe datagram, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    pub vni: u32,
    pub answer: bool,
    /// The prober's clock when it sent the probe, ns; in an answer, moved on by how long
    /// the probe waited at the answering machine before it was read (so that the round
    /// trip is the underlay's, not the engines' wake-ups).
    pub t_ns: u64,
    /// The probe's size (of the one answered, in an answer).
    pub size: usize,
}

/// A probe datagram, or `None` (a frame's piece, or damage: a probe must be as long as
/// it says).
pub fn parse_probe(d: &[u8]) -> Option<Probe> {
    if d.len() < PROBE_LEN || d[0] != 0x08 || !matches!(d[1], 1 | 2) {
        return None;
    }
    let answer = d[1] == 2;
    let size = u16::from_be_bytes([d[VXLAN_LEN + 8], d[VXLAN_LEN + 9]]) as usize;
    let fits = match answer {
        true => d.len() == PROBE_LEN && size >= PROBE_LEN,
        false => d.len() == size,
    };
    fits.then(|| Probe {
        vni: u32::from_be_bytes([0, d[4], d[5], d[6]]),
        answer,
        t_ns: u64::from_be_bytes(d[VXLAN_LEN..VXLAN_LEN + 8].try_into().expect("8 bytes")),
        size,
    })
}

/// Probe rounds in a row in which the datagram size in use went unanswered (while the
/// underlay answered smaller probes) before a tunnel falls back to [`SAFE_PAYLOAD`].
pub const MISSES_TO_SHRINK: u32 = 3;

/// The datagram size a tunnel uses, from its probes' answers: vemu's own path MTU
/// discovery. It starts at [`SAFE_PAYLOAD`] (or the interface's, if smaller) and grows
/// to the largest probe size answered. Each round also probes the size in use: when a
/// path shrinks (a hop's MTU lowered while the lab runs), that probe goes unanswered
/// while smaller ones come back, and after [`MISSES_TO_SHRINK`] such rounds the tunnel
/// falls back to the safe size and probes upward again. A send the local kernel refuses
/// as too long (the machine's own interface shrank) falls back at once.
#[derive(Debug, Clone)]
pub struct PathMtu {
    payload: usize,
    /// The sizes to probe, largest first.
    sizes: Vec<usize>,
    misses: u32,
    /// In the round under way: the size in use was answered; anything was.
    in_use_answered: bool,
    any_answered: bool,
    started: bool,
}

impl PathMtu {
    /// For an interface that carries `max_payload` bytes a datagram.
    pub fn new(max_payload: usize, ipv6: bool) -> PathMtu {
        PathMtu {
            payload: max_payload.min(SAFE_PAYLOAD),
            sizes: probe_sizes(max_payload, ipv6),
            misses: 0,
            in_use_answered: false,
            any_answered: false,
            started: false,
        }
    }

    /// Largest datagram payload in use, bytes.
    pub fn payload(&self) -> usize {
        self.payload
    }

    /// Close the round under way and start the next: the probe sizes to send (0 for the
    /// round-trip probe): the size in use when above the safe one, and every larger.
    pub fn round(&mut self) -> Vec<usize> {
        if self.started && self.payload > SAFE_PAYLOAD {
            if self.in_use_answered {
                self.misses = 0;
            } else if self.any_answered {
                self.misses += 1;
                if self.misses >= MISSES_TO_SHRINK {
                    self.payload = SAFE_PAYLOAD.min(self.payload);
                    self.misses = 0;
                }
            }
        }
        self.started = true;
        self.in_use_answered = false;
        self.any_answered = false;
        let safe = SAFE_PAYLOAD;
        std::iter::once(0)
            .chain(
                self.sizes
                    .iter()
                    .copied()
                    .filter(|&s| s > self.payload || (s == self.payload && s > safe)),
            )
            .collect()
    }

    /// A probe of `size` was answered; whether the size in use changed.
    pub fn answered(&mut self, size: usize) -> bool {
        self.any_answered = true;
        if size == self.payload {
            self.in_use_answered = true;
        }
        if size > self.payload && self.sizes.contains(&size) {
            self.payload = size;
            self.in_use_answered = true;
            self.misses = 0;
            return true;
        }
        false
    }

    /// The local kernel refused a datagram as too long; whether the size in use changed.
    pub fn too_big(&mut self) -> bool {
        let was = self.payload;
        self.payload = self.payload.min(SAFE_PAYLOAD);
        self.misses = 0;
        was != self.payload
    }
}

/// The sizes to probe an underlay with whose interface carries `max_payload` bytes a
/// datagram: those of common path MTUs (PPPoE, tunnels of every kind, IPv6's minimum)
/// below it, and the interface's own; largest first.
pub fn probe_sizes(max_payload: usize, ipv6: bool) -> Vec<usize> {
    let mut v: Vec<usize> =
        [1500u32, 1492, 1480, 1460, 1450, 1440, 1420, 1400, 1380, 1360, 1320, 1280]
            .iter()
            .map(|&mtu| payload_for_mtu(mtu, ipv6))
            .filter(|&p| p < max_payload)
            .chain([max_payload])
            .filter(|&p| p >= PROBE_LEN)
            .collect();
    v.sort_unstable_by(|a, b| b.cmp(a));
    v.dedup();
    v
}

/// One datagram, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece<'a> {
    pub meta: Meta,
    pub index: u8,
    pub count: u8,
    pub vnet: [u8; VNET_HDR_LEN],
    pub bytes: &'a [u8],
}

pub fn decode(d: &[u8]) -> Result<Piece<'_>, DecodeError> {
    if d.len() < VXLAN_LEN + TRAILER_LEN {
        return Err(DecodeError::Short);
    }
    let t = &d[d.len() - TRAILER_LEN..];
    if d[0] != 0x08 || t[..2] != MAGIC {
        return Err(DecodeError::NotVemu);
    }
    let (index, count) = (t[2], t[3]);
    if count == 0 || index >= count {
        return Err(DecodeError::BadPiece);
    }
    let mut vnet = [0u8; VNET_HDR_LEN];
    vnet.copy_from_slice(&t[16..16 + VNET_HDR_LEN]);
    Ok(Piece {
        meta: Meta {
            vni: u32::from_be_bytes([0, d[4], d[5], d[6]]),
            seq: u32::from_be_bytes(t[4..8].try_into().expect("4 bytes")),
            departure_ns: u64::from_be_bytes(t[8..16].try_into().expect("8 bytes")),
        },
        index,
        count,
        vnet,
        bytes: &d[VXLAN_LEN..d.len() - TRAILER_LEN],
    })
}

/// A frame made whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Whole {
    pub meta: Meta,
    /// Virtio-net header + Ethernet frame, as the core takes it.
    pub frame: Vec<u8>,
}

/// Counts of what the underlay did to one VNI's frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnderlayCounts {
    pub frames: u64,
    /// Frames that did not arrive whole (sequence gaps)...
    pub lost: u64,
    /// ...of which some pieces did arrive (dropped, being incomplete).
    pub incomplete: u64,
    /// Frames older than one already taken (reordered by the underlay), dropped.
    pub late: u64,
    /// Frames whose sequence number was out of the window around the last one taken
    /// ([`SEQ_WINDOW`]), dropped: forged, or the far side started over...
    pub out_of_window: u64,
    /// ... which it did when [`RESYNC_RUN`] such frames came in a row: the sequence was
    /// taken up from there.
    pub resyncs: u64,
}

/// Frames more than this far ahead of, or behind, the last one taken are out of the
/// sequence's window: one datagram with a forged number far ahead would otherwise make
/// every later real frame "late" for good.
pub const SEQ_WINDOW: u32 = 1 << 16;
/// Out-of-window frames with consecutive numbers, none taken in between, that make the
/// sequence start over from them (a far engine that started over; link down and up).
pub const RESYNC_RUN: u32 = 8;

#[derive(Default)]
struct Partial {
    seq: u32,
    count: u8,
    have: u32,
    pieces: Vec<Option<Vec<u8>>>,
    bytes: usize,
}

/// One VNI's state: the frame in the making, the last sequence number taken, the counts,
/// and the run of out-of-window frames (latest number, how many in a row).
#[derive(Default)]
struct Sequence {
    partial: Partial,
    last: Option<u32>,
    counts: UnderlayCounts,
    run: Option<(u32, u32)>,
}

/// Makes frames whole, per VNI: one frame in the making each, so its memory is bounded
/// by the number of VNIs the caller lets in times [`MAX_FRAME`].
#[derive(Default)]
pub struct Reassembler {
    vnis: rustc_hash::FxHashMap<u32, Sequence>,
}

impl Reassembler {
    pub fn new() -> Reassembler {
        Reassembler::default()
    }

    /// Take one piece; a frame when it completes one.
    pub fn push(&mut self, p: &Piece<'_>) -> Option<Whole> {
        let Sequence { partial, last, counts, run } = self.vnis.entry(p.meta.vni).or_default();
        let seq = p.meta.seq;
        if let Some(l) = *last {
            // Not the next ones (up to SEQ_WINDOW ahead): late (reordered, up to
            // SEQ_WINDOW behind) or out of the window; dropped, unless RESYNC_RUN of them
            // in a row, none taken in between, say the far side started over.
            let (ahead, behind) = (seq.wrapping_sub(l), l.wrapping_sub(seq));
            if ahead == 0 || ahead > SEQ_WINDOW {
                *run = match *run {
                    Some((s, n)) if s == seq => Some((s, n)),
                    Some((s, n)) if seq == s.wrapping_add(1) => Some((seq, n + 1)),
                    _ => Some((seq, 1)),
                };
                if run.is_some_and(|(_, n)| n < RESYNC_RUN) {
                    match behind <= SEQ_WINDOW {
                        true => counts.late += (p.index == 0) as u64,
                        false => counts.out_of_window += (p.index == 0) as u64,
                    }
                    return None;
                }
                // Started over: taken up from this frame (the gap is not counted lost).
                counts.resyncs += 1;
                *last = Some(seq.wrapping_sub(1));
                *run = None;
                *partial = Partial::default();
            }
        }
        // (From here `seq` is ahead of the last one taken.) Sequence numbers wrap: "newer"
        // is a forward distance under 2^31.
        let ahead = |a: u32, b: u32| a != b && a.wrapping_sub(b) < 1 << 31;
        if partial.count != 0 && partial.seq != seq {
            if ahead(seq, partial.seq) {
                counts.incomplete += 1;
                *partial = Partial::default();
            } else {
                counts.late += (p.index == 0) as u64;
                return None;
            }
        }
        if partial.count == 0 {
            *partial = Partial {
                seq,
                count: p.count,
                have: 0,
                pieces: vec![None; p.count as usize],
                bytes: 0,
            };
        }
        let slot = partial.pieces.get_mut(p.index as usize)?;
        if p.count != partial.count || slot.is_some() || partial.bytes + p.bytes.len() > MAX_FRAME {
            return None;
        }
        *slot = Some(p.bytes.to_vec());
        partial.have += 1;
        partial.bytes += p.bytes.len();
        if partial.have < partial.count as u32 {
            return None;
        }
        let done = std::mem::take(partial);
        if let Some(l) = *last {
            counts.lost += seq.wrapping_sub(l).saturating_sub(1) as u64;
        }
        *last = Some(seq);
        // (A frame taken in the window ends a run of out-of-window ones.)
        *run = None;
        counts.frames += 1;
        let mut frame = Vec::with_capacity(VNET_HDR_LEN + done.bytes);
        frame.extend_from_slice(&p.vnet);
        for piece in done.pieces.into_iter().flatten() {
            frame.extend_from_slice(&piece);
        }
        Some(Whole { meta: p.meta, frame })
    }

    /// What the underlay did to a VNI's frames so far.
    pub fn counts(&self, vni: u32) -> UnderlayCounts {
        self.vnis.get(&vni).map(|v| v.counts).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(len: usize, fill: u8) -> Vec<u8> {
        let mut f = vec![0u8; VNET_HDR_LEN];
        f[0] = 1; // a virtio-net flag, to see it carried
        f.extend((0..len).map(|i| (i as u8).wrapping_add(fill)));
        f
    }

    fn send(r: &mut Reassembler, f: &[u8], meta: Meta, payload: usize) -> (usize, Option<Whole>) {
        let mut out = Vec::new();
        let n = encode(f, meta, payload, &mut out);
        let mut whole = None;
        for d in &out {
            assert!(d.len() + AUTH_LEN <= payload.max(MIN_PAYLOAD), "{} > {payload}", d.len());
            if let Some(w) = r.push(&decode(d).unwrap()) {
                whole = Some(w);
            }
        }
        (n, whole)
    }

    #[test]
    fn a_full_size_frame_over_a_1500_byte_underlay_takes_two_datagrams_and_comes_back_whole() {
        let mut r = Reassembler::new();
        let f = frame(1514, 3);
        let meta = Meta { vni: vni(7, 1), seq: 9, departure_ns: 123_456_789 };
        let (n, w) = send(&mut r, &f, meta, payload_for_mtu(1500, false));
        assert_eq!(n, 2);
        assert_eq!(w, Some(Whole { meta, frame: f }));
        assert_eq!(link_dir(meta.vni), (7, 1));
    }

    #[test]
    fn small_frames_take_one_datagram_and_super_frames_at_most_255() {
        let mut r = Reassembler::new();
        let f = frame(100, 0);
        let (n, w) =
            send(&mut r, &f, Meta { vni: 1, seq: 0, departure_ns: 0 }, payload_for_mtu(1400, true));
        assert_eq!((n, w.unwrap().frame), (1, f));
        let big = frame(MAX_FRAME, 5);
        let (n, w) = send(&mut r, &big, Meta { vni: 1, seq: 1, departure_ns: 0 }, 0);
        assert!(n <= 255);
        assert_eq!(w.unwrap().frame, big);
        // Too large, or no virtio-net header: nothing sent.
        assert_eq!(
            encode(
                &frame(MAX_FRAME + 1, 0),
                Meta { vni: 1, seq: 2, departure_ns: 0 },
                1500,
                &mut Vec::new()
            ),
            0
        );
        assert_eq!(
            encode(&[0; 4], Meta { vni: 1, seq: 2, departure_ns: 0 }, 1500, &mut Vec::new()),
            0
        );
    }

    #[test]
    fn the_datagram_is_vxlan_that_decoders_understand() {
        let mut out = Vec::new();
        encode(&frame(60, 0), Meta { vni: 0x12_3456, seq: 0, departure_ns: 0 }, 1472, &mut out);
        assert_eq!(&out[0][..8], &[0x08, 0, 0, 0, 0x12, 0x34, 0x56, 0]);
        // The inner Ethernet frame follows at once.
        assert_eq!(out[0][8], frame(60, 0)[VNET_HDR_LEN]);
    }

    #[test]
    fn a_lost_piece_loses_its_frame_and_gaps_count_as_underlay_loss() {
        let mut r = Reassembler::new();
        let payload = payload_for_mtu(1500, false);
        let meta = |seq| Meta { vni: 4, seq, departure_ns: 0 };
        assert!(send(&mut r, &frame(1514, 0), meta(0), payload).1.is_some());
        // seq 1: only its first piece arrives.
        let mut out = Vec::new();
        encode(&frame(3000, 0), meta(1), payload, &mut out);
        assert!(r.push(&decode(&out[0]).unwrap()).is_none());
        // seq 2 never comes; seq 3 does.
        assert!(send(&mut r, &frame(500, 0), meta(3), payload).1.is_some());
        // seq 1's last piece, late: dropped.
        assert!(r.push(&decode(&out[2]).unwrap()).is_none());
        assert_eq!(
            r.counts(4),
            UnderlayCounts { frames: 2, lost: 2, incomplete: 1, late: 0, ..Default::default() }
        );
        // A duplicate of an old frame is late.
        assert!(send(&mut r, &frame(500, 0), meta(3), payload).1.is_none());
        assert_eq!(r.counts(4).late, 1);
        // Other VNIs are counted apart.
        assert_eq!(r.counts(5), UnderlayCounts::default());
    }

    #[test]
    fn the_size_in_use_grows_with_answers_and_falls_back_when_the_path_shrinks() {
        let (p1500, p1400) = (payload_for_mtu(1500, false), payload_for_mtu(1400, false));
        let mut m = PathMtu::new(p1500, false);
        assert_eq!(m.payload(), SAFE_PAYLOAD);
        let first = m.round();
        assert_eq!(first[0], 0);
        assert!(first.contains(&p1500) && first.contains(&p1400) && !first.contains(&SAFE_PAYLOAD));
        // Answers come back largest-first or not: the largest answered wins.
        for size in [PROBE_LEN, p1400, p1500] {
            m.answered(size);
        }
        assert_eq!(m.payload(), p1500);
        // Steady: the size in use is probed each round and answered.
        for _ in 0..10 {
            assert!(m.round().contains(&p1500));
            m.answered(PROBE_LEN);
            m.answered(p1500);
        }
        assert_eq!(m.payload(), p1500);
        // The path shrinks to 1400: only smaller probes come back.
        for k in 1..=MISSES_TO_SHRINK {
            m.round();
            m.answered(PROBE_LEN);
            m.answered(p1400);
            assert_eq!(m.payload(), p1500, "round {k}: still the old size (the round is not over)");
        }
        m.round();
        assert_eq!(m.payload(), SAFE_PAYLOAD);
        // …and it probes upward again, finding 1400.
        m.answered(PROBE_LEN);
        assert!(m.answered(p1400));
        assert_eq!(m.payload(), p1400);
        // A round with no answer at all (the underlay is down, not smaller) shrinks nothing.
        for _ in 0..5 {
            m.round();
        }
        assert_eq!(m.payload(), p1400);
        // The machine's own interface refused a datagram: at once.
        assert!(m.too_big());
        assert_eq!(m.payload(), SAFE_PAYLOAD);
        assert!(!m.too_big());
    }

    #[test]
    fn probes_are_not_frames_and_frames_are_not_probes() {
        let p = probe(0x01_0203, 77, false, 0);
        assert_eq!(
            parse_probe(&p),
            Some(Probe { vni: 0x01_0203, answer: false, t_ns: 77, size: PROBE_LEN })
        );
        assert_eq!(
            parse_probe(&probe(5, 9, true, 1400)),
            Some(Probe { vni: 5, answer: true, t_ns: 9, size: 1400 })
        );
        assert_eq!(decode(&p), Err(DecodeError::Short));
        let mut out = Vec::new();
        encode(&frame(8, 0), Meta { vni: 1, seq: 0, departure_ns: 0 }, 1472, &mut out);
        assert_eq!(parse_probe(&out[0]), None);
    }

    #[test]
    fn probes_have_the_size_they_test_and_answers_say_it() {
        let p = probe(3, 1, false, 1472);
        assert_eq!(p.len(), 1472);
        assert_eq!(parse_probe(&p).map(|x| x.size), Some(1472));
        // Cut short on the way (or forged): not a probe of that size.
        assert_eq!(parse_probe(&p[..1400]), None);
        // The answer is short whatever it answers.
        let a = probe(3, 1, true, 1472);
        assert_eq!((a.len(), parse_probe(&a).map(|x| x.size)), (PROBE_LEN, Some(1472)));
        // Sizes: common path MTUs below the interface's, largest first, the interface's too.
        let s = probe_sizes(payload_for_mtu(1500, false), false);
        assert_eq!((s[0], *s.last().unwrap()), (1472, 1252));
        assert!(s.contains(&payload_for_mtu(1400, false)) && s.windows(2).all(|w| w[0] > w[1]));
        assert_eq!(probe_sizes(payload_for_mtu(9000, true), true)[0], 8952);
        assert_eq!(probe_sizes(payload_for_mtu(1400, false), false)[0], 1372);
        assert!(SAFE_PAYLOAD <= payload_for_mtu(1280, false));
    }

    #[test]
    fn sequence_numbers_wrap() {
        let mut r = Reassembler::new();
        for seq in [u32::MAX - 1, u32::MAX, 0, 1] {
            assert!(
                send(&mut r, &frame(64, 0), Meta { vni: 2, seq, departure_ns: 0 }, 1472)
                    .1
                    .is_some(),
                "seq {seq}"
            );
        }
        assert_eq!(r.counts(2).lost, 0);
    }

    /// Audit (issue 39): one forged datagram up to 2^31 ahead made every later real frame
    /// "late", for good. Numbers out of the window are dropped; a run of them, none
    /// taken in between, is a far side that started over, and the sequence follows it.
    #[test]
    fn a_forged_number_far_ahead_blackholes_nothing_and_a_restart_resyncs() {
        let mut r = Reassembler::new();
        let meta = |seq| Meta { vni: 5, seq, departure_ns: 0 };
        let take =
            |r: &mut Reassembler, seq: u32| send(r, &frame(64, 0), meta(seq), 1472).1.is_some();
        for seq in 0..10 {
            assert!(take(&mut r, seq));
        }
        // The forger: one datagram far ahead, then even a few in a row.
        for (i, forged) in
            [(1u32 << 31) - 1, 5_000_000, 5_000_001, 5_000_002].into_iter().enumerate()
        {
            assert!(!take(&mut r, forged), "forged {forged} taken");
            assert!(take(&mut r, 10 + i as u32), "a real frame after forged {forged}");
        }
        let c = r.counts(5);
        assert_eq!((c.out_of_window, c.resyncs, c.late), (4, 0, 0), "{c:?}");
        // Real frames around the last one taken keep their meaning: reordered ones late.
        assert!(take(&mut r, 30));
        assert!(!take(&mut r, 29));
        assert_eq!(r.counts(5).late, 1);
        // The far side starts over from 0 (behind): after RESYNC_RUN frames in a row,
        // the sequence follows it; the gap is not counted lost.
        let lost = r.counts(5).lost;
        for seq in 0..RESYNC_RUN - 1 {
            assert!(!take(&mut r, seq), "seq {seq} before the resync");
        }
        assert!(take(&mut r, RESYNC_RUN - 1));
        assert!(take(&mut r, RESYNC_RUN));
        let c = r.counts(5);
        assert_eq!((c.resyncs, c.lost), (1, lost), "{c:?}");
        // The same from far behind (out of the window).
        for seq in 0..2 * RESYNC_RUN {
            assert!(
                take(&mut r, 3_000_000_000u32.wrapping_add(seq)) == (seq >= RESYNC_RUN - 1),
                "seq {seq}"
            );
        }
        assert_eq!(r.counts(5).resyncs, 2);
        // A frame of many pieces that ends a run is made whole too.
        let mut r = Reassembler::new();
        assert!(take(&mut r, 0));
        for i in 0..RESYNC_RUN - 1 {
            assert!(!take(&mut r, 1_000_000 + i));
        }
        let big = frame(3000, 1);
        let (n, whole) = send(&mut r, &big, meta(1_000_000 + RESYNC_RUN - 1), 1472);
        assert!(n > 1 && whole.is_some_and(|w| w.frame == big), "{n} pieces");
    }

    #[test]
    fn hostile_datagrams_are_refused_or_ignored_never_a_panic() {
        assert_eq!(decode(&[0u8; 10]), Err(DecodeError::Short));
        assert_eq!(decode(&[0u8; 64]), Err(DecodeError::NotVemu));
        let mut out = Vec::new();
        encode(&frame(2000, 0), Meta { vni: 3, seq: 0, departure_ns: 0 }, 1472, &mut out);
        let mut bad = out[0].clone();
        let n = bad.len();
        bad[n - TRAILER_LEN + 2] = 9; // index past count
        assert_eq!(decode(&bad), Err(DecodeError::BadPiece));
        // Random mutations of real datagrams: no panic, no frame over the limit.
        let mut r = Reassembler::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..20_000u32 {
            let mut d = out[(round % 2) as usize].clone();
            for _ in 0..(rnd() % 4) {
                let i = (rnd() as usize) % d.len();
                d[i] = rnd() as u8;
            }
            if rnd() % 8 == 0 {
                d.truncate((rnd() as usize) % (d.len() + 1));
            }
            if let Ok(p) = decode(&d) {
                if let Some(w) = r.push(&p) {
                    assert!(w.frame.len() <= VNET_HDR_LEN + MAX_FRAME);
                }
            }
        }
    }
}
