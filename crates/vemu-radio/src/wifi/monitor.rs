//! A radio's frames as a capture shows them: 802.11 frames behind a radiotap header
//! (pcap's link type 127, `LINKTYPE_IEEE802_11_RADIOTAP`), as Wireshark reads a monitor
//! interface — the rate, the channel, the signal and noise, and the frame's own fields
//! (Duration, addresses, sequence number, retry bit). Data frames carry what the
//! Ethernet frame carried, behind an LLC/SNAP header, between stations of one BSS
//! (neither To DS nor From DS).

use super::dcf::{Heard, Kind};
use super::phy::{Modulation, Standard};

/// pcap's link type of these frames.
pub const LINKTYPE_IEEE802_11_RADIOTAP: u16 = 127;

/// A channel's centre frequency, MHz.
pub fn frequency_mhz(standard: Standard, channel: u16) -> u16 {
    match (standard, channel) {
        (Standard::A, c) => 5000 + 5 * c,
        (_, 14) => 2484,
        (_, c) => 2407 + 5 * c,
    }
}

/// The radiotap header (flags, rate, channel, and for a received frame its signal and
/// the noise, dBm) and the 802.11 frame `h` describes. `macs` gives each station's
/// address, `bssid` the segment's; `ethernet` is a data frame's Ethernet frame, if still
/// known (its addresses, type and payload become the 802.11 frame's).
pub fn frame(
    h: &Heard,
    standard: Standard,
    macs: &dyn Fn(u32) -> [u8; 6],
    bssid: [u8; 6],
    ethernet: Option<&[u8]>,
) -> Vec<u8> {
    let mut out = radiotap(h, standard);
    let duration_us = h.duration_ns.div_ceil(1000).min(32_767) as u16;
    let ra = |d: Option<u32>| d.map_or([0xff; 6], macs);
    let fc = |kind: u8, subtype: u8, retry: bool| {
        [(subtype << 4) | (kind << 2), if retry { 0x08 } else { 0 }]
    };
    match h.kind {
        Kind::Data => {
            out.extend(fc(2, 0, h.retry));
            out.extend(duration_us.to_le_bytes());
            let eth = ethernet.filter(|e| e.len() >= 14);
            let (da, sa) = match eth {
                Some(e) => (e[0..6].try_into().expect("6"), e[6..12].try_into().expect("6")),
                None => (ra(h.dst), macs(h.sender)),
            };
            out.extend::<[u8; 6]>(da);
            out.extend::<[u8; 6]>(sa);
            out.extend(bssid);
            out.extend(((h.seq & 0x0fff) << 4).to_le_bytes());
            if let Some(e) = eth {
                out.extend([0xaa, 0xaa, 0x03, 0, 0, 0]);
                out.extend(&e[12..]);
            }
        }
        Kind::Rts => {
            out.extend(fc(1, 11, false));
            out.extend(duration_us.to_le_bytes());
            out.extend(ra(h.dst));
            out.extend(macs(h.sender));
        }
        Kind::Cts | Kind::Ack => {
            out.extend(fc(1, if h.kind == Kind::Cts { 12 } else { 13 }, false));
            out.extend(duration_us.to_le_bytes());
            out.extend(ra(h.dst));
        }
    }
    out
}

/// Radiotap: version 0, its length, the present fields' bitmap, then each field at its
/// alignment: Flags (bit 1), Rate (2, 500 kbit/s units), Channel (3: MHz and flags),
/// antenna signal (5) and noise (6), dBm, for frames it received.
fn radiotap(h: &Heard, standard: Standard) -> Vec<u8> {
    let received = h.signal_dbm.is_some();
    let mut present: u32 = (1 << 1) | (1 << 2) | (1 << 3);
    if received {
        present |= (1 << 5) | (1 << 6);
    }
    let len: u16 = if received { 16 } else { 14 };
    let mut b = vec![0u8, 0];
    b.extend(len.to_le_bytes());
    b.extend(present.to_le_bytes());
    b.push(0); // flags: no FCS at the end, long preamble
    b.push((h.mode.rate_bps / 500_000).min(255) as u8);
    let band: u16 = if standard == Standard::A { 0x0100 } else { 0x0080 };
    let modulation: u16 = match h.mode.modulation {
        Modulation::Gfsk => 0x0800,
        Modulation::Dbpsk | Modulation::Dqpsk | Modulation::Cck => 0x0020,
        Modulation::Ofdm { .. } => 0x0040,
    };
    b.extend(frequency_mhz(standard, h.channel).to_le_bytes());
    b.extend((band | modulation).to_le_bytes());
    if let Some(s) = h.signal_dbm {
        b.push(s.round().clamp(-128.0, 127.0) as i8 as u8);
        b.push(h.noise_dbm.round().clamp(-128.0, 127.0) as i8 as u8);
    }
    debug_assert_eq!(b.len(), usize::from(len));
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wifi::phy::Timing;

    fn heard(kind: Kind, signal: Option<f64>) -> Heard {
        Heard {
            station: 1,
            at_ns: 5,
            kind,
            sender: 0,
            dst: Some(1),
            id: Some(9),
            seq: 0x1234,
            retry: true,
            duration_ns: 44_001,
            mode: Timing::preset(Standard::B).modes[2],
            channel: 6,
            signal_dbm: signal,
            noise_dbm: -101.6,
        }
    }

    fn mac(s: u32) -> [u8; 6] {
        [2, 0, 0, 0, 0, s as u8]
    }

    #[test]
    fn a_data_frame_carries_the_ethernet_payload_behind_llc_snap() {
        let mut eth = vec![0x0a; 6];
        eth.extend([0x0b; 6]);
        eth.extend([0x08, 0x00, 0x45, 0x00]);
        let f = frame(
            &heard(Kind::Data, Some(-40.4)),
            Standard::B,
            &mac,
            [2, 0xb5, 0, 0, 0, 0],
            Some(&eth),
        );
        // Radiotap: 16 bytes, 5.5 Mbit/s (11 × 500 kbit/s), 2437 MHz, CCK in 2 GHz.
        assert_eq!(&f[..8], &[0, 0, 16, 0, 0x6e, 0, 0, 0]);
        assert_eq!(f[9], 11);
        assert_eq!(u16::from_le_bytes([f[10], f[11]]), 2437);
        assert_eq!(u16::from_le_bytes([f[12], f[13]]), 0x00a0);
        assert_eq!((f[14] as i8, f[15] as i8), (-40, -102));
        let w = &f[16..];
        assert_eq!(&w[..2], &[0x08, 0x08], "data, retry");
        assert_eq!(u16::from_le_bytes([w[2], w[3]]), 45, "Duration rounded up to µs");
        assert_eq!((&w[4..10], &w[10..16]), (&[0x0a; 6][..], &[0x0b; 6][..]));
        assert_eq!(u16::from_le_bytes([w[22], w[23]]), 0x0234 << 4);
        assert_eq!(&w[24..], &[0xaa, 0xaa, 3, 0, 0, 0, 0x08, 0x00, 0x45, 0x00]);
    }

    #[test]
    fn control_frames_have_their_own_layout_and_sent_ones_no_signal() {
        let f = frame(&heard(Kind::Ack, None), Standard::B, &mac, [0; 6], None);
        assert_eq!(&f[..4], &[0, 0, 14, 0]);
        assert_eq!(&f[14..16], &[0xd4, 0x00], "ACK, never a retry");
        assert_eq!(f.len(), 14 + 10);
        assert_eq!(&f[18..24], &mac(1));
        let f = frame(&heard(Kind::Rts, Some(-50.0)), Standard::A, &mac, [0; 6], None);
        assert_eq!(&f[16..18], &[0xb4, 0x00]);
        assert_eq!((&f[20..26], &f[26..32]), (&mac(1)[..], &mac(0)[..]));
        assert_eq!(u16::from_le_bytes([f[10], f[11]]), 5030);
        let f = frame(&heard(Kind::Cts, Some(-50.0)), Standard::G, &mac, [0; 6], None);
        assert_eq!(&f[16..18], &[0xc4, 0x00]);
    }
}
