//! QoS classes, meters and their changes at run time.

use super::*;

#[test]
fn qos_ef_overtakes_a_best_effort_backlog_and_classes_are_counted() {
    let fwd = Impairments {
        rate_bps: Some(10_000_000),
        delay_ns: MS,
        qos: Some(vemu_link::QosConfig::Diffserv),
        ..imp()
    };
    let (mut s, a, b) = link(fwd, imp());
    for i in 0..20 {
        s.send(0, a, ipv4_dscp(0, 1250, i));
    }
    // EF in the middle of frame 0's serialization (1 ms a frame at 10 Mbit/s).
    s.send(MS / 2, a, ipv4_dscp(46, 125, 100));
    s.finish();
    let got: Vec<(u64, u32)> =
        s.out.iter().filter(|o| o.1 == b).map(|o| (o.0, qos_seq(&o.2))).collect();
    assert_eq!(got[0], (2 * MS, 0));
    // EF right after frame 0 (ends 1 ms), 0.1 ms on the wire, then 1 ms of delay.
    assert_eq!(got[1], (2 * MS + 100 * US, 100));
    assert_eq!(got[2], (3 * MS + 100 * US, 1));
    assert_eq!(got.len(), 21);
    let st = s.stats(Target::Link(0), 0);
    let names: Vec<&str> = st.classes.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["ef", "nc", "af1", "af2", "af3", "af4", "be"]);
    let (ef, be) = (&st.classes[0], &st.classes[6]);
    assert_eq!((ef.rx_frames, ef.tx_frames, be.rx_frames, be.tx_frames), (1, 1, 20, 20));
    // EF waited 0.5 ms (bucket ≤ 500 µs); best effort up to 19 ms.
    assert_eq!(vemu_core::counters::bucket_quantile_ns(&ef.wait_hist, 1.0), Some(500 * US));
    assert_eq!(vemu_core::counters::bucket_quantile_ns(&be.wait_hist, 1.0), Some(20 * MS));
    assert_eq!((st.tx_frames, st.queue_frames), (21, 0));
    // The reverse direction has no classes.
    assert!(s.stats(Target::Link(0), 1).classes.is_empty());
}

#[test]
fn qos_meter_remarks_and_polices_on_a_lan_port() {
    use vemu_qos::stage::{ClassConfig, ColorAction, MeterConfig, MeterKind, QosConfig};
    // Member 1's ingress: 16 kbit/s committed (2000 B/s), 1000-byte buckets; the excess re-marked AF12, then dropped.
    let meter = MeterConfig {
        kind: MeterKind::Srtcm { cir_bps: 16_000, cbs_bytes: 1000, ebs_bytes: 1000 },
        color_aware: false,
        green: ColorAction::Pass,
        yellow: ColorAction::Mark(12),
        red: ColorAction::Drop,
    };
    let class = ClassConfig {
        name: "all".into(),
        rules: vec![],
        priority: 0,
        weight: 1,
        meter: Some(meter),
        set_dscp: None,
        red: None,
        limit: None,
    };
    let ingress = Impairments {
        qos: Some(QosConfig::Classes { classes: vec![class], scheduler: Default::default() }),
        ..imp()
    };
    let (mut s, p) = lan(vec![(1, imp(), imp()), (1, imp(), ingress)], None, 300_000 * MS);
    for i in 0..3 {
        s.send(i * US, p[0], ipv4_dscp(10, 1000, i as u32));
    }
    s.finish();
    let got: Vec<(u32, u8)> =
        s.out.iter().filter(|o| o.1 == p[1]).map(|o| (qos_seq(&o.2), dscp_of(&o.2))).collect();
    assert_eq!(got, [(0, 10), (1, 12)]);
    // The re-marked header's checksum is right.
    let f = &s.out.iter().find(|o| o.1 == p[1] && qos_seq(&o.2) == 1).unwrap().2;
    assert_eq!(ones_complement(&f[VNET_HDR_LEN + 14..VNET_HDR_LEN + 34]), 0);
    let st = s.stats(Target::Member(0, 1), 1);
    assert_eq!((st.drop_police, st.classes[0].remarked, st.classes[0].drop_police), (1, 1, 1));
}

#[test]
fn qos_set_and_removed_at_run_time_keeps_every_waiting_frame_in_order() {
    let (mut s, a, b) = link(rate(1_000_000), imp());
    let diffserv =
        ImpairmentsPatch { qos: Some(Some(vemu_link::QosConfig::Diffserv)), ..Default::default() };
    s.apply(Command::Patch { target: Target::Link(0), dir: 0, patch: diffserv });
    // 8 ms a frame: 0 on the wire, then EF (9) overtakes 1..=5.
    for i in 0..6 {
        s.send(0, a, ipv4_dscp(0, 1000, i));
    }
    s.send(MS, a, ipv4_dscp(46, 1000, 9));
    s.run_until(10 * MS);
    assert_eq!(s.stats(Target::Link(0), 0).queue_frames, 5);
    // Back to a FIFO while 1..=5 wait: they follow EF in the order they came.
    s.apply(Command::Patch {
        target: Target::Link(0),
        dir: 0,
        patch: ImpairmentsPatch { qos: Some(None), ..Default::default() },
    });
    s.finish();
    let got: Vec<(u64, u32)> =
        s.out.iter().filter(|o| o.1 == b).map(|o| (o.0, qos_seq(&o.2))).collect();
    assert_eq!(
        got,
        [
            (8 * MS, 0),
            (16 * MS, 9),
            (24 * MS, 1),
            (32 * MS, 2),
            (40 * MS, 3),
            (48 * MS, 4),
            (56 * MS, 5)
        ]
    );
    let st = s.stats(Target::Link(0), 0);
    assert!(st.classes.is_empty());
    assert_eq!((st.tx_frames, st.drop_queue), (7, 0));
}
