//! Datagrams from another machine's engine (VXLAN + vemu's trailer): decoded, made whole
//! by the reassembler (bounded: one frame in the making per VNI), probes answered.
//! The input is a run of datagrams, each a 2-byte length and its bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vemu_engine::tunnel;

fuzz_target!(|data: &[u8]| {
    let mut r = tunnel::Reassembler::new();
    let mut rest = data;
    while rest.len() >= 2 {
        let len = (u16::from_le_bytes([rest[0], rest[1]]) as usize).min(rest.len() - 2);
        let d = &rest[2..2 + len];
        rest = &rest[2 + len..];
        if let Some(p) = tunnel::parse_probe(d) {
            // A probe is as long as it says (an answer is short).
            assert!(if p.answer { d.len() == tunnel::PROBE_LEN } else { p.size == d.len() });
        }
        if let Ok(piece) = tunnel::decode(d) {
            if let Some(whole) = r.push(&piece) {
                assert!(whole.frame.len() <= tunnel::MAX_FRAME + vemu_engine::gso::VNET_HDR_LEN);
                let _ = r.counts(whole.meta.vni);
            }
        }
    }
});
