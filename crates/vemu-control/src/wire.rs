//! What the controller and the agents send each other besides the worker's orders
//! ([`vemu_machine::worker::WorkerRequest`]): an agent's hello, and captured frames.

use serde::{Deserialize, Serialize};

/// What an agent says about itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentHello {
    pub version: String,
    /// The MTU of the interface its address is on (the underlay's, for its tunnels).
    pub underlay_mtu: u32,
    /// Labs it holds a share of.
    pub labs: Vec<String>,
}

/// A captured frame on the agent channel: lab-clock time (ns, u64), interface (u32),
/// outgoing (u8), why it was dropped (u8: 0 not dropped, else
/// [`vemu_engine::DropReason::code`]), length (u32), then the frame; integers
/// little-endian.
pub struct CaptureRecord;

impl CaptureRecord {
    pub const HEAD: usize = 18;
    /// Longest frame accepted (a GSO super-frame is at most 64 KiB and its header).
    pub const MAX_FRAME: usize = 1 << 17;

    pub fn encode(c: &vemu_engine::Captured) -> Vec<u8> {
        let mut v = Vec::with_capacity(Self::HEAD + c.frame.len());
        v.extend_from_slice(&c.t_ns.to_le_bytes());
        v.extend_from_slice(&c.iface.to_le_bytes());
        v.push(u8::from(c.outgoing));
        v.push(c.drop.map_or(0, |d| d.code()));
        v.extend_from_slice(&(c.frame.len() as u32).to_le_bytes());
        v.extend_from_slice(&c.frame);
        v
    }

    /// Take the whole records at the front of `buf` (the rest stays for more bytes).
    pub fn decode(buf: &mut Vec<u8>, out: &mut Vec<vemu_engine::Captured>) -> Result<(), String> {
        let mut at = 0;
        while buf.len() - at >= Self::HEAD {
            let h = &buf[at..at + Self::HEAD];
            let len = u32::from_le_bytes(h[14..18].try_into().expect("4 bytes")) as usize;
            if len > Self::MAX_FRAME {
                return Err(format!("a captured frame of {len} bytes"));
            }
            if buf.len() - at < Self::HEAD + len {
                break;
            }
            out.push(vemu_engine::Captured {
                t_ns: u64::from_le_bytes(h[0..8].try_into().expect("8 bytes")),
                iface: u32::from_le_bytes(h[8..12].try_into().expect("4 bytes")),
                outgoing: h[12] != 0,
                drop: match h[13] {
                    0 => None,
                    c => Some(
                        vemu_engine::DropReason::from_code(c)
                            .ok_or_else(|| format!("a captured frame dropped for reason {c}"))?,
                    ),
                },
                frame: buf[at + Self::HEAD..at + Self::HEAD + len].to_vec(),
            });
            at += Self::HEAD + len;
        }
        buf.drain(..at);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::CaptureRecord;
    use vemu_engine::Captured;

    #[test]
    fn capture_records_survive_any_split_and_refuse_huge_frames() {
        let frames: Vec<Captured> = (0..5u32)
            .map(|i| Captured {
                t_ns: 1_000 + u64::from(i),
                iface: i,
                outgoing: i % 2 == 0,
                frame: vec![i as u8; 60 + i as usize * 700],
                drop: vemu_engine::DropReason::from_code(i as u8),
            })
            .collect();
        let wire: Vec<u8> = frames.iter().flat_map(CaptureRecord::encode).collect();
        for piece in [1, 7, 17, 100, wire.len()] {
            let (mut buf, mut out) = (Vec::new(), Vec::new());
            for chunk in wire.chunks(piece) {
                buf.extend_from_slice(chunk);
                CaptureRecord::decode(&mut buf, &mut out).unwrap();
            }
            assert!(buf.is_empty());
            assert_eq!(out.len(), 5);
            for (a, b) in out.iter().zip(&frames) {
                assert_eq!(
                    (a.t_ns, a.iface, a.outgoing, &a.frame, a.drop),
                    (b.t_ns, b.iface, b.outgoing, &b.frame, b.drop)
                );
            }
        }
        let mut bad = CaptureRecord::encode(&frames[0]);
        bad[14..18].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(CaptureRecord::decode(&mut bad, &mut Vec::new())
            .unwrap_err()
            .contains("4294967295"));
    }
}
