//! Hostile input: frames no sender makes.

use super::*;

#[test]
fn short_frames_are_ignored() {
    let (mut s, a, b) = link(imp(), imp());
    for len in 0..vemu_core::MIN_FRAME {
        s.send(0, a, vec![0xff; len]);
    }
    s.send(0, 99, udp(64, 0)); // a port that does not exist
    s.finish();
    assert!(s.arrivals(b).is_empty());
    assert_eq!(s.stats(Target::Link(0), 0).rx_frames, 0);
}

#[test]
fn random_bytes_never_break_the_core() {
    // Links with every kind of impairment, a LAN and a radio channel, fed random bytes
    // with plausible and implausible virtio-net headers.
    let hard = Impairments {
        rate_bps: Some(100_000_000),
        delay_ns: MS,
        loss: Loss::Bernoulli { rate: 0.1, correlation: 0.0 },
        corrupt: Chance { probability: 0.2, correlation: 0.0 },
        duplicate: Chance { probability: 0.1, correlation: 0.0 },
        mtu: Some(1400),
        ..imp()
    };
    let mut core = Core::new();
    core.add_link(LinkConfig {
        forward: imp(),
        reverse: hard.clone(),
        seeds: [1, 2],
        mtu: 1500,
        kernel_path: false,
        kernel_shaper: false,
        remote: None,
        spur: None,
    });
    core.add_link(LinkConfig {
        forward: hard.clone(),
        reverse: rate(1_000_000),
        seeds: [3, 4],
        mtu: 0,
        kernel_path: false,
        kernel_shaper: false,
        remote: None,
        spur: None,
    });
    core.add_segment(SegmentConfig {
        members: (0..4)
            .map(|_| MemberConfig { vlan: 1, egress: hard.clone(), ..Default::default() })
            .collect(),
        capacity_bps: Some(1_000_000_000),
        aging_ns: MS,
        radio: None,
        ..Default::default()
    });
    let cfg = MediumConfig {
        model: Model::UnitDisk { range_m: 250.0 },
        radio: Radio::default(),
        rate_bps: 11_000_000,
        preamble_ns: 192 * US,
        carrier_sense_m: 550.0,
        csma: true,
        queue_frames: 50,
        seed: 1,
        dcf: None,
        city: None,
        hub: None,
    };
    core.add_segment(SegmentConfig {
        members: (0..3).map(|_| MemberConfig { vlan: 1, ..Default::default() }).collect(),
        capacity_bps: None,
        aging_ns: MS,
        radio: Some((cfg, vec![Pos::new(0.0, 0.0), Pos::new(100.0, 0.0), Pos::new(200.0, 0.0)])),
        ..Default::default()
    });
    let ports = core.port_count() as u32;
    let mut s = Sim::new(core);
    let mut st = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..20_000u64 {
        let len = (xorshift(&mut st) % 9000) as usize;
        let mut f: Vec<u8> = (0..len).map(|_| xorshift(&mut st) as u8).collect();
        if f.len() > VNET_HDR_LEN + 60 && i % 2 == 0 {
            // A GSO header over random bytes, sometimes with an IPv4/TCP look.
            let gso_size = (xorshift(&mut st) % 2000) as u16;
            VnetHdr {
                flags: 1,
                gso_type: [1, 4, 0x81][i as usize % 3],
                hdr_len: 54,
                gso_size,
                csum_start: 34,
                csum_offset: 16,
            }
            .write(&mut f);
            f[VNET_HDR_LEN + 12] = 0x08;
            f[VNET_HDR_LEN + 13] = 0x00;
            f[VNET_HDR_LEN + 14] = 0x45;
            f[VNET_HDR_LEN + 23] = 6;
        }
        s.send(i * 10 * US, (xorshift(&mut st) % ports as u64) as u32, f);
        if i % 1000 == 0 {
            s.out.clear();
        }
    }
    s.finish();
}
