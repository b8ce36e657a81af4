//! Frames as TAP hands them over: a virtio-net header followed by an Ethernet frame,
//! which may be a TCP super-frame (GSO) that stands for many wire frames. Pure
//! functions: wire-size accounting, splitting a super-frame into smaller ones or into
//! single wire frames, and completing a checksum left to the receiver.

/// Length of the virtio-net header in front of every frame.
pub const VNET_HDR_LEN: usize = 10;
const F_NEEDS_CSUM: u8 = 1;
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_TCPV6: u8 = 4;
const GSO_ECN: u8 = 0x80;
const ETH_HLEN: usize = 14;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VnetHdr {
    pub flags: u8,
    pub gso_type: u8,
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

impl VnetHdr {
    pub fn parse(b: &[u8]) -> VnetHdr {
        let u = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        }
    }
    pub fn write(&self, b: &mut [u8]) {
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
    }
}

/// Where the headers of a TCP super-frame are, offsets into the Ethernet frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpGso {
    pub l3: usize,
    pub l4: usize,
    /// Ethernet + IP + TCP headers, bytes.
    pub hdr_len: usize,
    pub mss: usize,
    pub v6: bool,
}

/// The TCP super-frame `pkt` (virtio-net header + Ethernet frame) is, if its header says
/// it is one and [`tcp_gso`] recognizes it.
pub fn frame_gso(pkt: &[u8]) -> Option<TcpGso> {
    let hdr = VnetHdr::parse(pkt);
    if hdr.gso_type == 0 {
        return None;
    }
    tcp_gso(&hdr, pkt.get(VNET_HDR_LEN..)?)
}

/// Recognize a TCP super-frame we can split (IPv4 or IPv6 without extension headers).
pub fn tcp_gso(hdr: &VnetHdr, frame: &[u8]) -> Option<TcpGso> {
    let kind = hdr.gso_type & !GSO_ECN;
    if kind != GSO_TCPV4 && kind != GSO_TCPV6 || hdr.gso_size == 0 || hdr.flags & F_NEEDS_CSUM == 0
    {
        return None;
    }
    let mut l3 = ETH_HLEN;
    let mut ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    if ethertype == 0x8100 {
        l3 += 4;
        ethertype = u16::from_be_bytes([*frame.get(16)?, *frame.get(17)?]);
    }
    let (v6, l4) = match ethertype {
        0x0800 if frame.get(l3 + 9) == Some(&6) => (false, l3 + ((frame[l3] & 0x0f) as usize) * 4),
        0x86dd if frame.get(l3 + 6) == Some(&6) => (true, l3 + 40),
        _ => return None,
    };
    // A hostile or broken sender may lie in any field: the IPv4 header must be at
    // least 20 bytes, the TCP header at least 20, and both inside the frame, or the
    // split below would write past the headers.
    if l4 != hdr.csum_start as usize || l4 < l3 + 20 {
        return None;
    }
    let tcp_len = ((*frame.get(l4 + 12)? >> 4) as usize) * 4;
    let hdr_len = l4 + tcp_len;
    if tcp_len < 20 || hdr_len > frame.len() {
        return None;
    }
    Some(TcpGso { l3, l4, hdr_len, mss: hdr.gso_size as usize, v6 })
}

/// Wire frames and wire bytes (Ethernet header + IP packet, summed) that `frame` stands for.
pub fn wire_size(gso: Option<&TcpGso>, frame_len: usize) -> (u32, u64) {
    match gso {
        Some(g) if frame_len > g.hdr_len => {
            let payload = frame_len - g.hdr_len;
            let segs = payload.div_ceil(g.mss);
            (segs as u32, (frame_len + (segs - 1) * g.hdr_len) as u64)
        }
        _ => (1, frame_len as u64),
    }
}

/// One's-complement sum of `data` added to `sum` (not folded).
fn sum16(data: &[u8], mut sum: u32) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    if let [last] = chunks.remainder() {
        sum += (*last as u32) << 8;
    }
    sum
}

fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Split a TCP super-frame (virtio-net header included in `pkt`) into pieces of at most
/// `segs_per_piece` wire frames. Each piece is a valid frame with its own headers: IP
/// lengths and IDs, TCP sequence numbers and flags fixed up, and the checksum left to the
/// receiver as in the original. A piece of one segment is an ordinary (non-GSO) frame.
pub fn split(pkt: &[u8], g: &TcpGso, segs_per_piece: usize) -> Vec<Vec<u8>> {
    let hdr = VnetHdr::parse(pkt);
    let frame = &pkt[VNET_HDR_LEN..];
    let headers = &frame[..g.hdr_len];
    let payload = &frame[g.hdr_len..];
    let piece_bytes = g.mss * segs_per_piece.max(1);
    let seq0 = u32::from_be_bytes(headers[g.l4 + 4..g.l4 + 8].try_into().unwrap());
    let id0 = u16::from_be_bytes([headers[g.l3 + 4], headers[g.l3 + 5]]);
    let tcp_flags = headers[g.l4 + 13];
    let n = payload.len().div_ceil(piece_bytes).max(1);
    let mut out = Vec::with_capacity(n);
    // A super-frame of headers only (a sender's lie: the kernel makes none) is one frame.
    let chunks: Vec<&[u8]> =
        if payload.is_empty() { vec![payload] } else { payload.chunks(piece_bytes).collect() };
    for (i, chunk) in chunks.into_iter().enumerate() {
        let segs = chunk.len().div_ceil(g.mss);
        let mut p = Vec::with_capacity(VNET_HDR_LEN + g.hdr_len + chunk.len());
        // The header length the kernel gave is that of the super-frame's linear part,
        // which for a forwarded (GRO) frame holds payload too: longer than a piece
        // (TAP refuses such a frame). A piece's is its headers'.
        let h = VnetHdr {
            gso_type: if segs > 1 { hdr.gso_type } else { GSO_NONE },
            gso_size: if segs > 1 { hdr.gso_size } else { 0 },
            hdr_len: g.hdr_len as u16,
            ..hdr
        };
        p.resize(VNET_HDR_LEN, 0);
        h.write(&mut p);
        p.extend_from_slice(headers);
        p.extend_from_slice(chunk);
        let f = &mut p[VNET_HDR_LEN..];
        let total = f.len();
        if g.v6 {
            let plen = (total - g.l3 - 40) as u16;
            f[g.l3 + 4..g.l3 + 6].copy_from_slice(&plen.to_be_bytes());
        } else {
            let tlen = (total - g.l3) as u16;
            f[g.l3 + 2..g.l3 + 4].copy_from_slice(&tlen.to_be_bytes());
            let first_seg = (i * segs_per_piece.max(1)) as u16;
            f[g.l3 + 4..g.l3 + 6].copy_from_slice(&id0.wrapping_add(first_seg).to_be_bytes());
            f[g.l3 + 10..g.l3 + 12].copy_from_slice(&[0, 0]);
            let ihl = g.l4 - g.l3;
            let c = !fold(sum16(&f[g.l3..g.l3 + ihl], 0));
            f[g.l3 + 10..g.l3 + 12].copy_from_slice(&c.to_be_bytes());
        }
        let seq = seq0.wrapping_add((i * piece_bytes) as u32);
        f[g.l4 + 4..g.l4 + 8].copy_from_slice(&seq.to_be_bytes());
        let mut fl = tcp_flags;
        if i + 1 < n {
            fl &= !(0x01 | 0x08); // FIN, PSH only on the last piece
        }
        if i > 0 {
            fl &= !0x80; // CWR only on the first
        }
        f[g.l4 + 13] = fl;
        // Pseudo-header sum for the piece's TCP length, as the stack leaves it for offload.
        let l4_len = (total - g.l4) as u32;
        let mut s = if g.v6 {
            sum16(&f[g.l3 + 8..g.l3 + 40], 0)
        } else {
            sum16(&f[g.l3 + 12..g.l3 + 20], 0)
        };
        s += 6 + l4_len;
        let ps = fold(s);
        f[g.l4 + 16..g.l4 + 18].copy_from_slice(&ps.to_be_bytes());
        out.push(p);
    }
    out
}

/// Complete a checksum the sender left to the receiver, so that later changes to the
/// frame (corruption) are detectable. `pkt` includes the virtio-net header.
pub fn finish_checksum(pkt: &mut [u8]) {
    let mut hdr = VnetHdr::parse(pkt);
    if hdr.flags & F_NEEDS_CSUM == 0 || hdr.gso_type != GSO_NONE {
        return;
    }
    let start = VNET_HDR_LEN + hdr.csum_start as usize;
    let at = start + hdr.csum_offset as usize;
    if at + 2 > pkt.len() {
        return;
    }
    let c = !fold(sum16(&pkt[start..], 0));
    pkt[at..at + 2].copy_from_slice(&c.to_be_bytes());
    hdr.flags &= !F_NEEDS_CSUM;
    hdr.write(pkt);
}

/// The Ethernet frames `pkt` (virtio-net header + frame) stands for on the wire: a
/// super-frame split into its segments, checksums completed, headers removed. For
/// captures.
pub fn wire_frames(pkt: &[u8]) -> Vec<Vec<u8>> {
    let hdr = VnetHdr::parse(pkt);
    let g = if hdr.gso_type != GSO_NONE { tcp_gso(&hdr, &pkt[VNET_HDR_LEN..]) } else { None };
    let pieces = match &g {
        Some(g) => split(pkt, g, 1),
        None => vec![pkt.to_vec()],
    };
    pieces
        .into_iter()
        .map(|mut p| {
            finish_checksum(&mut p);
            p.split_off(VNET_HDR_LEN)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TCP/IPv4 super-frame with `payload` bytes and the given MSS, as TAP hands it over.
    fn super_frame(payload: usize, mss: u16, flags: u8) -> Vec<u8> {
        let mut p = vec![0u8; VNET_HDR_LEN];
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: 66,
            gso_size: mss,
            csum_start: 34,
            csum_offset: 16,
        };
        h.write(&mut p);
        let mut eth = vec![0u8; 14];
        eth[12] = 0x08;
        let mut ip =
            vec![0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        let tot = (20 + 32 + payload) as u16;
        ip[2..4].copy_from_slice(&tot.to_be_bytes());
        let mut tcp = vec![0u8; 32];
        tcp[4..8].copy_from_slice(&1000u32.to_be_bytes());
        tcp[12] = 8 << 4;
        tcp[13] = flags;
        p.extend(eth);
        p.extend(ip);
        p.extend(tcp);
        p.extend((0..payload).map(|i| i as u8));
        p
    }

    #[test]
    fn wire_size_counts_every_segment() {
        let p = super_frame(10_000, 1448, 0x18);
        let h = VnetHdr::parse(&p);
        let g = tcp_gso(&h, &p[VNET_HDR_LEN..]).unwrap();
        assert_eq!(g.hdr_len, 66);
        // 7 segments (6 × 1448 + 1312), each with 66 bytes of headers.
        assert_eq!(wire_size(Some(&g), p.len() - VNET_HDR_LEN), (7, 10_000 + 7 * 66));
    }

    #[test]
    fn split_into_single_frames_fixes_headers() {
        let p = super_frame(3000, 1448, 0x19); // ACK|PSH|FIN
        let h = VnetHdr::parse(&p);
        let g = tcp_gso(&h, &p[VNET_HDR_LEN..]).unwrap();
        let parts = split(&p, &g, 1);
        assert_eq!(parts.len(), 3);
        let mut seq = 1000u32;
        for (i, part) in parts.iter().enumerate() {
            let ph = VnetHdr::parse(part);
            assert_eq!(ph.gso_type, GSO_NONE);
            let f = &part[VNET_HDR_LEN..];
            let plen = f.len() - 66;
            assert_eq!(u16::from_be_bytes([f[16], f[17]]) as usize, 20 + 32 + plen);
            assert_eq!(fold(sum16(&f[14..34], 0)), 0xffff, "IPv4 header checksum");
            assert_eq!(u32::from_be_bytes(f[38..42].try_into().unwrap()), seq);
            seq += plen as u32;
            let last = i == 2;
            assert_eq!(f[47] & 0x09 != 0, last, "PSH/FIN only on the last");
            assert_eq!(u16::from_be_bytes([f[18], f[19]]), 0x1234 + i as u16);
        }
        assert_eq!(seq, 4000);
        // Payload bytes come through in order.
        let joined: Vec<u8> = parts.iter().flat_map(|p| p[VNET_HDR_LEN + 66..].to_vec()).collect();
        assert_eq!(joined, p[VNET_HDR_LEN + 66..]);
    }

    #[test]
    fn split_into_smaller_super_frames() {
        let p = super_frame(14_480, 1448, 0x10);
        let h = VnetHdr::parse(&p);
        let g = tcp_gso(&h, &p[VNET_HDR_LEN..]).unwrap();
        let parts = split(&p, &g, 4);
        assert_eq!(parts.len(), 3);
        assert_eq!(VnetHdr::parse(&parts[0]).gso_type, GSO_TCPV4);
        let total: u32 = parts
            .iter()
            .map(|p| {
                let ph = VnetHdr::parse(p);
                let pg = tcp_gso(&ph, &p[VNET_HDR_LEN..]);
                wire_size(pg.as_ref(), p.len() - VNET_HDR_LEN).0
            })
            .sum();
        assert_eq!(total, 10);
    }

    /// A forwarded super-frame (GRO) comes with its linear length as hdr_len (header and
    /// payload); TAP refuses a frame shorter than its hdr_len (EINVAL), as every piece
    /// of a split was until pieces got their own (seen as half of a routed TCP flow lost).
    #[test]
    fn pieces_carry_their_own_header_length() {
        let mut p = super_frame(2896, 1448, 0x18);
        let mut h = VnetHdr::parse(&p);
        h.hdr_len = (14 + 20 + 32 + 2896) as u16;
        h.write(&mut p);
        let g = tcp_gso(&VnetHdr::parse(&p), &p[VNET_HDR_LEN..]).unwrap();
        for piece in split(&p, &g, 1) {
            let hl = VnetHdr::parse(&piece).hdr_len as usize;
            assert_eq!(hl, 66);
            assert!(hl <= piece.len() - VNET_HDR_LEN);
        }
    }

    #[test]
    fn a_super_frame_of_headers_only_is_one_frame() {
        // Found by the fuzzer: captures (wire_frames) showed nothing for it, while the
        // link counted and delivered one frame.
        let p = super_frame(0, 1448, 0x18);
        let g = frame_gso(&p).expect("a TCP super-frame");
        assert_eq!(wire_size(Some(&g), p.len() - VNET_HDR_LEN).0, 1);
        let pieces = split(&p, &g, 1);
        assert_eq!(pieces.len(), 1);
        assert_eq!(VnetHdr::parse(&pieces[0]).gso_type, GSO_NONE);
        let frames = wire_frames(&p);
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].len(), p.len() - VNET_HDR_LEN);
    }

    #[test]
    fn lying_header_lengths_are_not_split() {
        let mut p = super_frame(3000, 1448, 0x18);
        p[VNET_HDR_LEN + 34 + 12] = 2 << 4; // TCP data offset 8 bytes
        assert!(tcp_gso(&VnetHdr::parse(&p), &p[VNET_HDR_LEN..]).is_none());
        let mut p = super_frame(3000, 1448, 0x18);
        p[VNET_HDR_LEN + 14] = 0x43; // IPv4 header of 12 bytes
        let mut h = VnetHdr::parse(&p);
        h.csum_start = 26;
        h.write(&mut p);
        assert!(tcp_gso(&VnetHdr::parse(&p), &p[VNET_HDR_LEN..]).is_none());
        let mut p = super_frame(0, 1448, 0x18);
        p.truncate(VNET_HDR_LEN + 60); // headers cut short
        assert!(tcp_gso(&VnetHdr::parse(&p), &p[VNET_HDR_LEN..]).is_none());
    }

    #[test]
    fn finished_checksum_verifies() {
        let p = super_frame(1000, 1448, 0x18);
        let h = VnetHdr::parse(&p);
        let g = tcp_gso(&h, &p[VNET_HDR_LEN..]).unwrap();
        let mut single = split(&p, &g, 1).remove(0);
        finish_checksum(&mut single);
        let f = &single[VNET_HDR_LEN..];
        // Verify: pseudo header + TCP segment sums to 0xffff.
        let l4_len = (f.len() - 34) as u32;
        let s = sum16(&f[26..34], 0) + 6 + l4_len;
        assert_eq!(fold(sum16(&f[34..], s)), 0xffff);
        assert_eq!(VnetHdr::parse(&single).flags & F_NEEDS_CSUM, 0);
    }
}
