//! GSO super-frames: split at the link as the receiving kernel would.

use super::*;

#[test]
fn super_frame_crosses_an_unimpaired_link_whole() {
    let (mut s, a, b) = link(imp(), imp());
    s.send(0, a, tcp_super(14_480, 1448));
    s.finish();
    assert_eq!(s.out.len(), 1);
    let st = s.stats(Target::Link(0), 0);
    assert_eq!((st.rx_frames, st.tx_frames), (10, 10));
    assert_eq!(st.rx_bytes, 14_480 + 10 * 54);
    assert_eq!(s.out[0].1, b);
}

#[test]
fn super_frame_is_split_where_loss_applies() {
    let (mut s, a, b) =
        link(Impairments { loss: Loss::Bernoulli { rate: 0.5, correlation: 0.0 }, ..imp() }, imp());
    s.send(0, a, tcp_super(14_480, 1448));
    s.finish();
    let st = s.stats(Target::Link(0), 0);
    assert_eq!(st.rx_frames, 10);
    assert_eq!(st.tx_frames + st.drop_loss, 10);
    assert_eq!(s.arrivals(b).len() as u64, st.tx_frames);
    // Every piece is one wire frame: no GSO left.
    assert!(s
        .out
        .iter()
        .all(|o| VnetHdr::parse(&o.2).gso_type == 0 && o.2.len() <= VNET_HDR_LEN + 54 + 1448));
}

#[test]
fn super_frame_on_a_rate_limit_leaves_in_short_bursts() {
    // At 100 Mbit/s, 1 ms of wire is 12500 bytes: 8 segments of 1502 bytes a piece.
    let (mut s, a, b) = link(rate(100_000_000), imp());
    s.send(0, a, tcp_super(62_264, 1448)); // 43 segments
    s.finish();
    let times = s.times(b);
    assert_eq!(times.len(), 6, "43 segments in pieces of 8");
    let bytes = 62_264 + 43 * 54;
    assert_eq!(
        *times.last().unwrap(),
        (bytes as u64 * 80),
        "the last piece ends when the whole has been serialized"
    );
    assert!(times.windows(2).all(|w| w[1] - w[0] <= 1000 * US));
    // At 1 Gbit/s the whole super-frame is 0.5 ms of wire: it crosses whole.
    let (mut s, a, b) = link(rate(1_000_000_000), imp());
    s.send(0, a, tcp_super(62_264, 1448));
    s.finish();
    assert_eq!(s.times(b), vec![bytes as u64 * 8]);
}

#[test]
fn corrupting_a_super_frame_hits_single_wire_frames() {
    let (mut s, a, b) = link(
        Impairments { corrupt: Chance { probability: 1.0, correlation: 0.0 }, ..imp() },
        imp(),
    );
    s.send(0, a, tcp_super(4344, 1448));
    s.finish();
    assert_eq!(s.arrivals(b).len(), 3);
    assert_eq!(s.stats(Target::Link(0), 0).corrupted, 3);
}
