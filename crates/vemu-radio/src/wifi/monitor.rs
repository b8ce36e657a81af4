//! A radio's frames as a capture shows them: 802.11 frames behind a radiotap header
//! (pcap's link type 127, `LINKTYPE_IEEE802_11_RADIOTAP`), as Wireshark reads a monitor
//! interface — the rate, the channel, the signal and noise, and the frame's own fields
//! (Duration, addresses, sequence number, retry bit). Data frames carry what the
//! Ethernet frame carried, behind an LLC/SNAP header, between stations of one BSS
//! (neither To DS nor From DS).

use super::bss::{Mgmt, MgmtKind};
use super::dcf::{Heard, Kind};
use super::phy::{Modulation, Standard, Timing};

/// A management frame a monitored radio decoded or sent: what the DCF saw of it, what
/// it says, its BSS (the access point's member) and that access point's beacon interval
/// (TU).
#[derive(Debug, Clone, PartialEq)]
pub struct MgmtHeard {
    pub heard: Heard,
    pub mgmt: Mgmt,
    pub bssid_member: Option<u32>,
    pub beacon_interval_tu: u16,
}

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

/// The radiotap header and the 802.11 management frame `m` describes, as Wireshark
/// reads it: its subtype, addresses (the access point's address as BSSID), sequence
/// number, and its body — fixed fields (timestamp, beacon interval, capabilities, the
/// open-system authentication's fields, status, association ID) and the information
/// elements vemu's access points and stations send (SSID, supported and extended rates
/// of the standard, DS parameter set, TIM).
pub fn mgmt_frame(m: &MgmtHeard, standard: Standard, macs: &dyn Fn(u32) -> [u8; 6]) -> Vec<u8> {
    let h = &m.heard;
    let mut out = radiotap(h, standard);
    let subtype: u8 = match m.mgmt.kind {
        MgmtKind::AssocRequest { reassoc: false } => 0,
        MgmtKind::AssocResponse => 1,
        MgmtKind::AssocRequest { reassoc: true } => 2,
        MgmtKind::ProbeRequest => 4,
        MgmtKind::ProbeResponse => 5,
        MgmtKind::Beacon => 8,
        MgmtKind::Disassoc => 10,
        MgmtKind::AuthRequest | MgmtKind::AuthResponse => 11,
    };
    out.extend([subtype << 4, if h.retry { 0x08 } else { 0 }]);
    let duration_us = h.duration_ns.div_ceil(1000).min(32_767) as u16;
    out.extend(duration_us.to_le_bytes());
    out.extend(m.mgmt.to.map_or([0xff; 6], macs));
    out.extend(macs(m.mgmt.from));
    out.extend(m.bssid_member.map_or([0xff; 6], macs));
    out.extend(((h.seq & 0x0fff) << 4).to_le_bytes());
    let ess: u16 = 0x0001;
    let ssid = |out: &mut Vec<u8>| {
        let s = &m.mgmt.ssid.as_bytes()[..m.mgmt.ssid.len().min(32)];
        out.extend([0, s.len() as u8]);
        out.extend(s);
    };
    let rates = |out: &mut Vec<u8>| {
        let all: Vec<u8> = Timing::preset(standard)
            .modes
            .iter()
            .enumerate()
            .map(|(i, md)| ((md.rate_bps / 500_000) as u8) | if i == 0 { 0x80 } else { 0 })
            .collect();
        let (first, rest) = all.split_at(all.len().min(8));
        out.extend([1, first.len() as u8]);
        out.extend(first);
        if !rest.is_empty() {
            out.extend([50, rest.len() as u8]);
            out.extend(rest);
        }
    };
    match m.mgmt.kind {
        MgmtKind::Beacon | MgmtKind::ProbeResponse => {
            out.extend((h.at_ns / 1000).to_le_bytes());
            out.extend(m.beacon_interval_tu.to_le_bytes());
            out.extend(ess.to_le_bytes());
            ssid(&mut out);
            rates(&mut out);
            out.extend([3, 1, h.channel.min(255) as u8]);
            if m.mgmt.kind == MgmtKind::Beacon {
                out.extend([5, 4, 0, 1, 0, 0]);
            }
        }
        MgmtKind::ProbeRequest => {
            ssid(&mut out);
            rates(&mut out);
        }
        MgmtKind::AuthRequest | MgmtKind::AuthResponse => {
            let seq: u16 = if m.mgmt.kind == MgmtKind::AuthRequest { 1 } else { 2 };
            out.extend([0u8, 0]);
            out.extend(seq.to_le_bytes());
            out.extend([0u8, 0]);
        }
        MgmtKind::AssocRequest { reassoc } => {
            out.extend(ess.to_le_bytes());
            out.extend(10u16.to_le_bytes());
            if reassoc {
                out.extend(m.bssid_member.map_or([0; 6], macs));
            }
            ssid(&mut out);
            rates(&mut out);
        }
        MgmtKind::AssocResponse => {
            out.extend(ess.to_le_bytes());
            out.extend([0u8, 0]);
            let aid = 0xc000 | ((m.mgmt.to.unwrap_or(0) + 1) as u16 & 0x3fff);
            out.extend(aid.to_le_bytes());
            rates(&mut out);
        }
        MgmtKind::Disassoc => out.extend(8u16.to_le_bytes()),
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

    /// A beacon as Wireshark reads it: subtype 8 from the access point to everyone, its
    /// BSSID the access point's, the timestamp, 100 TU, ESS, the SSID, the 802.11g
    /// rates (its eight OFDM ones), the channel and the TIM.
    #[test]
    fn a_beacon_carries_its_fixed_fields_and_elements() {
        let mut h = heard(Kind::Data, Some(-40.0));
        h.at_ns = 1_000_000;
        h.retry = false;
        let m = MgmtHeard {
            heard: h,
            mgmt: Mgmt { from: 0, to: None, kind: MgmtKind::Beacon, ssid: "lab".into() },
            bssid_member: Some(0),
            beacon_interval_tu: 100,
        };
        let f = mgmt_frame(&m, Standard::G, &mac);
        let w = &f[16..];
        assert_eq!(&w[..2], &[0x80, 0]);
        assert_eq!((&w[4..10], &w[10..16], &w[16..22]), (&[0xff; 6][..], &mac(0)[..], &mac(0)[..]));
        let b = &w[24..];
        assert_eq!(u64::from_le_bytes(b[..8].try_into().unwrap()), 1000);
        assert_eq!(
            (u16::from_le_bytes([b[8], b[9]]), u16::from_le_bytes([b[10], b[11]])),
            (100, 1)
        );
        assert_eq!(&b[12..17], &[0, 3, b'l', b'a', b'b']);
        assert_eq!(&b[17..19], &[1, 8]);
        assert_eq!(b[19], 0x80 | 12, "6 Mbit/s, basic");
        assert_eq!(b[26], 108, "54 Mbit/s");
        assert_eq!(&b[27..], &[3, 1, 6, 5, 4, 0, 1, 0, 0]);
        // A reassociation request names the access point it asks.
        let m = MgmtHeard {
            mgmt: Mgmt {
                from: 1,
                to: Some(0),
                kind: MgmtKind::AssocRequest { reassoc: true },
                ssid: "lab".into(),
            },
            ..m
        };
        let f = mgmt_frame(&m, Standard::G, &mac);
        assert_eq!(f[16], 0x20);
        assert_eq!(&f[16 + 24 + 4..16 + 24 + 10], &mac(0));
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
