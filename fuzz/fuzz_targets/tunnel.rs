//! Datagrams from another machine's engine (VXLAN + vemu's trailer): decoded, made whole
//! by the reassembler (bounded: one frame in the making per VNI), probes answered; each
//! frame made whole then goes to a core as the driver hands it over: as a trunk's copy
//! (receivers named after the frame), and as a far segment member's frame for the switch;
//! and as a frame a member here of a segment switched elsewhere sends (switched here
//! between such members).
//! The input is a run of datagrams, each a 2-byte length and its bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vemu_engine::core::{Core, LinkConfig, MemberConfig, SegmentConfig, Spur};
use vemu_engine::tunnel;

fuzz_target!(|data: &[u8]| {
    let mut core = Core::new();
    let remote = Some((1, 20_000));
    let spur = Some(Spur { segment: 0, vlan: 1, aging_ns: 1_000_000_000 });
    core.add_link(LinkConfig { remote, spur, ..Default::default() });
    core.add_link(LinkConfig { remote, spur, ..Default::default() });
    let trunk_in = core.add_trunk_in(&[(0, 0), (7, 1)]);
    let members = (0..3)
        .map(|i| MemberConfig { vlan: 1, remote: (i > 0).then_some(20_000), ..Default::default() })
        .collect();
    let ports = core.add_segment(SegmentConfig {
        members,
        aging_ns: 1_000_000_000,
        far_switching: true,
        ..Default::default()
    });
    core.add_trunk(0, &[1, 2]);
    let mut now = 0u64;
    let mut r = tunnel::Reassembler::new();
    // What a machine opens first: never a panic, and a hostile datagram is never taken.
    let key = tunnel::auth::Key::new(&[7; 32]);
    let mut opener = tunnel::auth::Opener::default();
    let mut rest = data;
    while rest.len() >= 2 {
        let len = (u16::from_le_bytes([rest[0], rest[1]]) as usize).min(rest.len() - 2);
        let d = &rest[2..2 + len];
        rest = &rest[2 + len..];
        assert!(opener.open(&key, d).is_err(), "a datagram no one sealed was taken");
        if let Some(p) = tunnel::parse_probe(d) {
            // A probe is as long as it says (an answer is short).
            assert!(if p.answer { d.len() == tunnel::PROBE_LEN } else { p.size == d.len() });
        }
        if let Ok(piece) = tunnel::decode(d) {
            if let Some(whole) = r.push(&piece) {
                assert!(whole.frame.len() <= tunnel::MAX_FRAME + vemu_engine::gso::VNET_HDR_LEN);
                let _ = r.counts(whole.meta.vni);
                now += 1_000;
                core.handle_delivered(now, trunk_in, whole.frame.clone());
                core.handle_frame(now, 0, whole.frame.clone());
                core.handle_delivered(now, ports[1], whole.frame);
                core.handle_timeout(now + 5_000_000_000);
                while core.poll_transmit(now + 5_000_000_000).is_some() {}
                while core.poll_event().is_some() {}
            }
        }
    }
});
