//! Frames from nodes into the data-path core, on a virtual clock: a shard with impaired
//! links, a link to another machine, a LAN with a snooping querier, a radio channel and
//! the same channel as the 802.11 DCF,
//! captures at both points. The input is a run of records — port, time step, length,
//! bytes — and a port byte of 0xff makes the next byte a change to the lab (impairments,
//! qos classes on and off, link down/up, positions). Every frame must be delivered, dropped or counted; the core
//! must never panic or loop, and what it hands out must stay within what went in.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vemu_engine::core::{
    CapturePoint, Command, Core, LinkConfig, MemberConfig, SegmentConfig, Target,
};
use vemu_link::{Chance, Impairments, ImpairmentsPatch, Loss, QosConfig, Shaper};
use vemu_radio::medium::MediumConfig;
use vemu_radio::propagation::{Model, Radio};
use vemu_radio::Pos;
use vemu_switch::Snooping;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

fn core() -> Core {
    let hard = Impairments {
        rate_bps: Some(100_000_000),
        delay_ns: MS,
        loss: Loss::Bernoulli { rate: 0.1, correlation: 0.0 },
        corrupt: Chance { probability: 0.2, correlation: 0.0 },
        duplicate: Chance { probability: 0.1, correlation: 0.0 },
        mtu: Some(1400),
        ..Impairments::default()
    };
    let mut c = Core::new();
    c.add_link(LinkConfig {
        forward: Impairments::default(),
        reverse: hard.clone(),
        seeds: [1, 2],
        mtu: 1500,
        kernel_path: true,
        kernel_shaper: true,
        remote: None,
        spur: None,
    });
    c.add_link(LinkConfig {
        forward: hard.clone(),
        reverse: Impairments {
            rate_bps: Some(1_000_000),
            qos: Some(QosConfig::Diffserv),
            ..Impairments::default()
        },
        seeds: [3, 4],
        mtu: 0,
        kernel_path: true,
        kernel_shaper: false,
        remote: Some((1, 20 * US)),
        spur: None,
    });
    c.add_segment(SegmentConfig {
        members: (0..4)
            .map(|i| MemberConfig {
                vlan: 1 + (i % 2),
                egress: hard.clone(),
                seeds: [i as u64, 9],
                mtu: 1500,
                ..Default::default()
            })
            .collect(),
        capacity_bps: Some(1_000_000_000),
        aging_ns: MS,
        snooping: Snooping::Querier,
        radio: None,
        kernel_path: true,
        kernel_shaper: true,
        far_switching: false,
        ipv6_off: false,
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
    // The same channel as the 802.11 DCF (802.11a, free space; the third member hidden
    // from the first), in infrastructure mode: the middle member the access point of
    // the two others (frames through it, relayed, management frames beside them).
    let timing = vemu_radio::wifi::phy::Timing::preset(vemu_radio::wifi::phy::Standard::A);
    let mut dcf = vemu_radio::wifi::dcf::DcfConfig::preset(timing, Model::FreeSpace, 5);
    dcf.rts_threshold_bytes = Some(600);
    use vemu_radio::wifi::bss::{ApConfig, Role, StaConfig};
    let sta = || Role::Station(StaConfig::new("fuzz"));
    let setup = vemu_radio::wifi::dcf::DcfSetup {
        config: dcf,
        stations: vec![Default::default(); 3],
        roles: vec![sta(), Role::Ap(ApConfig::new("fuzz")), sta()],
    };
    let dcf_cfg = MediumConfig { dcf: Some(Box::new(setup)), ..cfg.clone() };
    c.add_segment(SegmentConfig {
        members: (0..3).map(|_| MemberConfig { vlan: 1, ..Default::default() }).collect(),
        capacity_bps: None,
        aging_ns: MS,
        snooping: Snooping::On,
        radio: Some((cfg, vec![Pos::new(0.0, 0.0), Pos::new(100.0, 0.0), Pos::new(200.0, 0.0)])),
        kernel_path: false,
        kernel_shaper: false,
        far_switching: false,
        ipv6_off: false,
    });
    // A plain LAN the kernel may switch, its rates shaped by the kernel's buckets.
    c.add_segment(SegmentConfig {
        members: (0..3)
            .map(|i| MemberConfig { vlan: 1, seeds: [i, 7], mtu: 1500, ..Default::default() })
            .collect(),
        aging_ns: MS,
        kernel_path: true,
        kernel_shaper: true,
        ..Default::default()
    });
    // (Last: the segments before keep their numbers.)
    c.add_segment(SegmentConfig {
        members: (0..3).map(|_| MemberConfig { vlan: 1, ..Default::default() }).collect(),
        capacity_bps: None,
        aging_ns: MS,
        snooping: Snooping::On,
        radio: Some((
            dcf_cfg,
            vec![Pos::new(0.0, 0.0), Pos::new(300.0, 0.0), Pos::new(700.0, 0.0)],
        )),
        kernel_path: false,
        kernel_shaper: false,
        far_switching: false,
        ipv6_off: false,
    });
    c.apply(Command::Capture {
        id: 1,
        target: Target::Link(0),
        side: 1,
        iface: 0,
        point: CapturePoint::After,
    });
    c.apply(Command::Capture {
        id: 2,
        target: Target::Member(0, 2),
        side: 0,
        iface: 1,
        point: CapturePoint::Before,
    });
    c.apply(Command::Capture {
        id: 3,
        target: Target::Link(0),
        side: 0,
        iface: 2,
        point: CapturePoint::Drops,
    });
    c
}

fn change(c: &mut Core, b: u8) {
    let _ = match b % 6 {
        0 => c.apply(Command::Patch {
            target: Target::Link(0),
            dir: 0,
            patch: ImpairmentsPatch { delay_ns: Some(b as u64 * 10 * US), ..Default::default() },
        }),
        1 => c.apply(Command::Patch {
            target: if b & 0x20 != 0 {
                Target::Member(2, (b as usize / 6) % 3)
            } else {
                Target::Member(0, (b as usize / 6) % 4)
            },
            dir: 1,
            patch: ImpairmentsPatch {
                rate_bps: Some(Some(1_000_000)),
                qos: Some((b & 0x80 != 0).then_some(QosConfig::Diffserv)),
                shaper: Some(if b & 0x40 != 0 { Shaper::Kernel } else { Shaper::Engine }),
                ..Default::default()
            },
        }),
        2 => c.apply(Command::SetUp { target: Target::Link(1), up: b & 0x80 != 0 }),
        3 => c.apply(Command::SetUp { target: Target::Member(1, 1), up: b & 0x80 != 0 }),
        4 => c.apply(Command::Positions {
            seg: 1,
            positions: vec![
                Pos::new(0.0, 0.0),
                Pos::new(b as f64 * 3.0, 0.0),
                Pos::new(300.0, 0.0),
            ],
        }),
        _ => c.apply(Command::Uncapture(1)),
    };
}

fuzz_target!(|data: &[u8]| {
    let mut c = core();
    let ports = c.port_count();
    let mut now = 0u64;
    let mut rest = data;
    let (mut bytes_in, mut bytes_out) = (0u64, 0u64);
    let drain = |c: &mut Core, now: u64, bytes_out: &mut u64| {
        c.handle_timeout(now);
        while let Some(tx) = c.poll_transmit(now) {
            assert!(tx.port < ports as u32 && tx.at_ns <= now);
            *bytes_out += tx.frame.len() as u64;
            c.on_written(&tx, tx.port % 5 != 4);
        }
        while c.poll_event().is_some() {}
    };
    while rest.len() >= 4 {
        let (port, step) = (rest[0], rest[1]);
        if port == 0xff {
            change(&mut c, step);
            rest = &rest[2..];
            continue;
        }
        let len = (u16::from_le_bytes([rest[2], rest[3]]) as usize).min(rest.len() - 4);
        let frame = rest[4..4 + len].to_vec();
        rest = &rest[4 + len..];
        let t = now + step as u64 * 10 * US;
        while let Some(d) = c.poll_timeout().filter(|&d| d <= t) {
            now = now.max(d);
            drain(&mut c, now, &mut bytes_out);
        }
        now = t;
        bytes_in += frame.len() as u64;
        if port & 0x80 != 0 {
            // From the other machine of link 1 (its side b), already carried out there.
            c.handle_delivered(now, 3, frame);
        } else {
            c.handle_frame(now, (port as usize % ports) as u32, frame);
        }
        drain(&mut c, now, &mut bytes_out);
    }
    // Run on for a minute of lab time: whatever is queued is handed out by then (the
    // switch's querier keeps its own timer for ever, so the core never runs dry).
    let end = now + 60_000 * MS;
    while let Some(d) = c.poll_timeout().filter(|&d| d <= end) {
        now = now.max(d);
        drain(&mut c, now, &mut bytes_out);
    }
    // Duplication, flooding and radio broadcast multiply frames, the querier adds its
    // own; nothing else may (a bound, not an identity).
    assert!(bytes_out <= bytes_in * 8 + 1_000_000, "{bytes_out} bytes out for {bytes_in} in");
});
