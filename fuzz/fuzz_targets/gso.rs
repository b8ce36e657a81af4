//! A frame as a TAP device hands it over: virtio-net header (GSO type, sizes, checksum
//! offsets — all the sender's word) + Ethernet frame. What the engine does with it:
//! recognise a TCP super-frame, size it on the wire, split it, complete checksums.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vemu_engine::gso;

fuzz_target!(|data: &[u8]| {
    if data.len() < gso::VNET_HDR_LEN {
        return;
    }
    let g = gso::frame_gso(data);
    let (segs, bytes) = gso::wire_size(g.as_ref(), data.len() - gso::VNET_HDR_LEN);
    assert!(segs >= 1 && bytes >= (data.len() - gso::VNET_HDR_LEN) as u64);
    if let Some(g) = g {
        for per in [1, 3, 64] {
            let pieces = gso::split(data, &g, per);
            assert!(!pieces.is_empty());
            for mut p in pieces {
                gso::finish_checksum(&mut p);
            }
        }
    }
    let frames = gso::wire_frames(data);
    assert!(!frames.is_empty());
    let mut copy = data.to_vec();
    gso::finish_checksum(&mut copy);
});
