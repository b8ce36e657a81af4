//! The data-path core on a virtual clock (the way quinn-proto's `Pair` tests its
//! protocol): frames are handed in at chosen nanoseconds, time jumps straight to each
//! deadline the core names, and every delivery is asserted to the nanosecond. Nothing
//! here reads a clock or touches a device, so these tests run in milliseconds and
//! cannot flake.

use std::sync::Arc;

use vemu_engine::core::{Spur, Applied, CapturePoint, Command, Core, Event, Frame, LinkConfig, MemberConfig, Path, PortId, SegmentConfig, Shape, Target};
use vemu_engine::gso::{VnetHdr, VNET_HDR_LEN};
use vemu_link::{Chance, Distribution, Impairments, ImpairmentsPatch, Jitter, Loss, QueueLimit, Reorder, Shaper};
use vemu_radio::medium::MediumConfig;
use vemu_radio::propagation::{Model, Radio};
use vemu_radio::Pos;

const MS: u64 = 1_000_000;
const US: u64 = 1_000;

/// A core driven on a virtual clock, recording what it hands out.
struct Sim {
    core: Core,
    now: u64,
    /// (time written, port, frame) of every transmit, in order.
    out: Vec<(u64, PortId, Frame)>,
    events: Vec<Event>,
    /// Treat writes to these ports as refused by the device.
    refuse: Vec<PortId>,
}

impl Sim {
    fn new(core: Core) -> Sim {
        Sim { core, now: 0, out: Vec::new(), events: Vec::new(), refuse: Vec::new() }
    }

    /// Let virtual time reach `t`, carrying out every deadline on the way at its own time.
    fn run_until(&mut self, t: u64) {
        while let Some(d) = self.core.poll_timeout() {
            if d > t {
                break;
            }
            self.now = self.now.max(d);
            self.step();
        }
        self.now = self.now.max(t);
        self.drain_events();
    }

    fn step(&mut self) {
        self.core.handle_timeout(self.now);
        while let Some(tx) = self.core.poll_transmit(self.now) {
            let ok = !self.refuse.contains(&tx.port);
            self.core.on_written(&tx, ok);
            if ok {
                self.out.push((self.now, tx.port, tx.frame));
            }
        }
        self.drain_events();
    }

    fn drain_events(&mut self) {
        while let Some(e) = self.core.poll_event() {
            self.events.push(e);
        }
    }

    /// Hand a frame in from `port` at `t` (after carrying out what was due before).
    fn send(&mut self, t: u64, port: PortId, frame: Vec<u8>) {
        self.run_until(t);
        self.core.handle_frame(t, port, frame);
    }

    /// Run until nothing is left to do; the clock stops at the last deadline.
    fn finish(&mut self) {
        while let Some(d) = self.core.poll_timeout() {
            self.now = self.now.max(d);
            self.step();
        }
        self.drain_events();
    }

    /// Arrival times at `port` of frames carrying sequence number `id` (see [`udp`]).
    fn arrivals(&self, port: PortId) -> Vec<(u64, u32)> {
        self.out.iter().filter(|o| o.1 == port).map(|o| (o.0, seq_of(&o.2))).collect()
    }

    fn times(&self, port: PortId) -> Vec<u64> {
        self.arrivals(port).into_iter().map(|a| a.0).collect()
    }

    fn apply(&mut self, cmd: Command) -> Applied {
        let r = self.core.apply(cmd);
        self.drain_events();
        r
    }

    fn stats(&self, target: Target, dir: usize) -> vemu_engine::DirStats {
        self.core.counters(target)[dir].snapshot()
    }
}

fn mac(n: u8) -> [u8; 6] {
    [0x02, 0, 0, 0, 0, n]
}

/// An Ethernet frame with a virtio-net header (no offloads), from `src` to `dst`, of
/// `len` Ethernet bytes, carrying `seq` in its first payload bytes.
fn eth(dst: [u8; 6], src: [u8; 6], len: usize, seq: u32) -> Vec<u8> {
    let mut f = vec![0u8; VNET_HDR_LEN];
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x88, 0xb5]); // local experimental ethertype
    f.extend_from_slice(&seq.to_be_bytes());
    f.resize(VNET_HDR_LEN + len.max(18), 0xab);
    f
}

/// A frame between two hosts of a link (addresses do not matter on a link).
fn udp(len: usize, seq: u32) -> Vec<u8> {
    eth(mac(2), mac(1), len, seq)
}

fn seq_of(f: &[u8]) -> u32 {
    u32::from_be_bytes(f[VNET_HDR_LEN + 14..VNET_HDR_LEN + 18].try_into().unwrap())
}

/// A UDP/IPv4 frame to `port`.
fn ipv4_udp(dport: u16) -> Vec<u8> {
    let mut f = vec![0u8; VNET_HDR_LEN];
    f.extend_from_slice(&[0xff; 6]);
    f.extend_from_slice(&mac(1));
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&[0x45, 0, 0, 36, 0, 0, 0, 0, 1, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 255]);
    f.extend_from_slice(&[0x19, 0x28]); // sport
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&[0, 16, 0, 0]);
    f.extend_from_slice(&[0; 8]);
    f
}

/// A TCP/IPv4 super-frame of `payload` bytes cut at `mss`, as TAP hands it over
/// (54 bytes of headers).
fn tcp_super(payload: usize, mss: u16) -> Vec<u8> {
    let mut p = vec![0u8; VNET_HDR_LEN];
    VnetHdr { flags: 1, gso_type: 1, hdr_len: 54, gso_size: mss, csum_start: 34, csum_offset: 16 }.write(&mut p);
    p.extend_from_slice(&mac(2));
    p.extend_from_slice(&mac(1));
    p.extend_from_slice(&[0x08, 0x00]);
    let tot = (20 + 20 + payload) as u16;
    let mut ip = vec![0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
    ip[2..4].copy_from_slice(&tot.to_be_bytes());
    p.extend(ip);
    let mut tcp = vec![0u8; 20];
    tcp[4..8].copy_from_slice(&1u32.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = 0x18;
    p.extend(tcp);
    p.extend((0..payload).map(|i| i as u8));
    p
}

fn imp() -> Impairments {
    Impairments::default()
}

fn delay(ns: u64) -> Impairments {
    Impairments { delay_ns: ns, ..imp() }
}

fn rate(bps: u64) -> Impairments {
    Impairments { rate_bps: Some(bps), ..imp() }
}

/// One link a — b; returns the sim and the ports of a and b.
fn link(forward: Impairments, reverse: Impairments) -> (Sim, PortId, PortId) {
    link_seeded(forward, reverse, [1, 2])
}

fn link_seeded(forward: Impairments, reverse: Impairments, seeds: [u64; 2]) -> (Sim, PortId, PortId) {
    let mut core = Core::new();
    let [a, b] = core.add_link(LinkConfig { forward, reverse, seeds, mtu: 0, kernel_path: false, kernel_shaper: false, remote: None , spur: None });
    (Sim::new(core), a, b)
}

/// A LAN of `n` members with the given per-member (egress, ingress) impairments.
fn lan(members: Vec<(u16, Impairments, Impairments)>, capacity_bps: Option<u64>, aging_ns: u64) -> (Sim, Vec<PortId>) {
    let mut core = Core::new();
    let members = members.into_iter().enumerate().map(|(i, (vlan, egress, ingress))| MemberConfig { vlan, egress, ingress, seeds: [2 * i as u64, 2 * i as u64 + 1], mtu: 0, remote: None }).collect();
    let ports = core.add_segment(SegmentConfig { members, capacity_bps, aging_ns, radio: None, ..Default::default() });
    (Sim::new(core), ports)
}

fn plain_lan(n: usize) -> (Sim, Vec<PortId>) {
    lan((0..n).map(|_| (1, imp(), imp())).collect(), None, 300_000 * MS)
}

/// A wireless segment with a unit-disk radio of 250 m at the given positions.
fn radio(positions: &[(f64, f64)], csma: bool, rate_bps: u64) -> (Sim, Vec<PortId>) {
    radio_with(positions, Model::UnitDisk { range_m: 250.0 }, csma, rate_bps, 7, 250.0)
}

fn radio_with(positions: &[(f64, f64)], model: Model, csma: bool, rate_bps: u64, seed: u64, carrier_sense_m: f64) -> (Sim, Vec<PortId>) {
    let mut core = Core::new();
    let cfg = MediumConfig { model, radio: Radio::default(), rate_bps, preamble_ns: 0, carrier_sense_m, csma, queue_frames: 1000, seed };
    let pos: Vec<Pos> = positions.iter().map(|&(x, y)| Pos::new(x, y)).collect();
    let members = (0..positions.len()).map(|i| MemberConfig { vlan: 1, seeds: [i as u64, 100 + i as u64], ..Default::default() }).collect();
    let ports = core.add_segment(SegmentConfig { members, capacity_bps: None, aging_ns: 300_000 * MS, radio: Some((cfg, pos)), ..Default::default() });
    (Sim::new(core), ports)
}

// ---------------------------------------------------------------- links

#[test]
fn unimpaired_link_delivers_at_once_and_in_order() {
    let (mut s, a, b) = link(imp(), imp());
    for i in 0..5 {
        s.send(10 * US * i as u64, a, udp(100, i));
    }
    s.finish();
    assert_eq!(s.arrivals(b), (0..5).map(|i| (10 * US * i as u64, i)).collect::<Vec<_>>());
    assert!(s.arrivals(a).is_empty());
}

#[test]
fn delay_is_exact_per_frame() {
    let (mut s, a, b) = link(delay(5 * MS), imp());
    for i in 0..10u32 {
        s.send(i as u64 * 333_333, a, udp(64, i));
    }
    s.finish();
    let want: Vec<(u64, u32)> = (0..10u32).map(|i| (i as u64 * 333_333 + 5 * MS, i)).collect();
    assert_eq!(s.arrivals(b), want);
}

#[test]
fn directions_are_independent() {
    let (mut s, a, b) = link(delay(2 * MS), delay(7 * MS));
    s.send(0, a, udp(64, 1));
    s.send(0, b, udp(64, 2));
    s.finish();
    assert_eq!(s.arrivals(b), vec![(2 * MS, 1)]);
    assert_eq!(s.arrivals(a), vec![(7 * MS, 2)]);
}

#[test]
fn serialization_at_the_set_rate() {
    // 1000 wire bytes at 8 Mbit/s take exactly 1 ms each.
    let (mut s, a, b) = link(rate(8_000_000), imp());
    for i in 0..4 {
        s.send(0, a, udp(1000, i));
    }
    s.finish();
    assert_eq!(s.times(b), vec![MS, 2 * MS, 3 * MS, 4 * MS]);
}

#[test]
fn serialization_then_delay() {
    let (mut s, a, b) = link(Impairments { rate_bps: Some(8_000_000), delay_ns: 10 * MS, ..imp() }, imp());
    s.send(0, a, udp(1000, 0));
    s.send(0, a, udp(500, 1));
    s.send(5 * MS, a, udp(1000, 2));
    s.finish();
    assert_eq!(s.times(b), vec![11 * MS, 11 * MS + 500 * US, 16 * MS]);
}

#[test]
fn idle_serializer_starts_fresh() {
    let (mut s, a, b) = link(rate(8_000_000), imp());
    s.send(0, a, udp(1000, 0));
    s.send(100 * MS, a, udp(1000, 1));
    s.finish();
    assert_eq!(s.times(b), vec![MS, 101 * MS]);
}

#[test]
fn queue_limit_in_packets_drops_the_excess() {
    let (mut s, a, b) = link(Impairments { rate_bps: Some(8_000_000), queue: Some(QueueLimit::Packets(3)), ..imp() }, imp());
    for i in 0..10 {
        s.send(0, a, udp(1000, i));
    }
    s.finish();
    assert_eq!(s.arrivals(b).iter().map(|x| x.1).collect::<Vec<_>>(), vec![0, 1, 2]);
    let st = s.stats(Target::Link(0), 0);
    assert_eq!((st.rx_frames, st.tx_frames, st.drop_queue), (10, 3, 7));
    assert_eq!(st.queue_frames_max, 3);
}

#[test]
fn queue_limit_in_bytes() {
    let (mut s, a, b) = link(Impairments { rate_bps: Some(8_000_000), queue: Some(QueueLimit::Bytes(2500)), ..imp() }, imp());
    for i in 0..5 {
        s.send(0, a, udp(1000, i));
    }
    // After the first leaves the queue (1 ms), there is room again.
    s.send(MS, a, udp(1000, 9));
    s.finish();
    assert_eq!(s.arrivals(b).iter().map(|x| x.1).collect::<Vec<_>>(), vec![0, 1, 9]);
    assert_eq!(s.stats(Target::Link(0), 0).drop_queue, 3);
}

#[test]
fn queue_drains_over_time() {
    let (mut s, a, _b) = link(rate(8_000_000), imp());
    for i in 0..5 {
        s.send(0, a, udp(1000, i));
    }
    assert_eq!(s.stats(Target::Link(0), 0).queue_frames, 5);
    s.send(3 * MS, a, udp(1000, 5));
    // Three left by 3 ms; two waiting plus the new one.
    assert_eq!(s.stats(Target::Link(0), 0).queue_frames, 3);
}

#[test]
fn uniform_jitter_stays_in_bounds_and_never_reorders() {
    let j = Jitter { amount_ns: 2 * MS, distribution: Distribution::Uniform, correlation: 0.0 };
    let (mut s, a, b) = link(Impairments { delay_ns: 10 * MS, jitter: j, ..imp() }, imp());
    for i in 0..1000u32 {
        s.send(i as u64 * 5 * MS, a, udp(64, i));
    }
    s.finish();
    let arr = s.arrivals(b);
    assert_eq!(arr.len(), 1000);
    let mut spread = Vec::new();
    for (k, &(t, i)) in arr.iter().enumerate() {
        assert_eq!(i, k as u32, "in order");
        let d = t - i as u64 * 5 * MS;
        assert!((8 * MS..=12 * MS).contains(&d), "delay {d}");
        spread.push(d);
    }
    let mean = spread.iter().sum::<u64>() as f64 / 1000.0;
    assert!((mean - 10e6).abs() < 0.1e6, "mean {mean}");
    assert!(spread.iter().any(|&d| d < 9 * MS) && spread.iter().any(|&d| d > 11 * MS));
}

#[test]
fn jitter_never_lets_a_frame_overtake() {
    // Frames closer together than the jitter: a later frame waits for the earlier one.
    let j = Jitter { amount_ns: 5 * MS, distribution: Distribution::Normal, correlation: 0.0 };
    let (mut s, a, b) = link(Impairments { delay_ns: 20 * MS, jitter: j, ..imp() }, imp());
    for i in 0..500u32 {
        s.send(i as u64 * 100 * US, a, udp(64, i));
    }
    s.finish();
    let arr = s.arrivals(b);
    assert!(arr.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1));
}

#[test]
fn same_seed_same_times_other_seed_other_times() {
    let j = Jitter { amount_ns: 3 * MS, distribution: Distribution::Pareto, correlation: 0.25 };
    let cfg = Impairments { delay_ns: 10 * MS, jitter: j, loss: Loss::Bernoulli { rate: 0.1, correlation: 0.0 }, ..imp() };
    let run = |seed: u64| {
        let (mut s, a, b) = link_seeded(cfg.clone(), imp(), [seed, 0]);
        for i in 0..300u32 {
            s.send(i as u64 * 4 * MS, a, udp(64, i));
        }
        s.finish();
        s.arrivals(b)
    };
    assert_eq!(run(11), run(11));
    assert_ne!(run(11), run(12));
}

#[test]
fn full_loss_drops_everything_and_counts_it() {
    let (mut s, a, b) = link(Impairments { loss: Loss::Bernoulli { rate: 1.0, correlation: 0.0 }, ..imp() }, imp());
    for i in 0..50 {
        s.send(i, a, udp(64, i as u32));
    }
    s.finish();
    assert!(s.arrivals(b).is_empty());
    let st = s.stats(Target::Link(0), 0);
    assert_eq!((st.rx_frames, st.drop_loss, st.tx_frames), (50, 50, 0));
}

#[test]
fn bernoulli_loss_rate_within_binomial_bounds() {
    let (mut s, a, b) = link(Impairments { loss: Loss::Bernoulli { rate: 0.3, correlation: 0.0 }, ..imp() }, imp());
    let n = 20_000u32;
    for i in 0..n {
        s.send(i as u64 * US, a, udp(64, i));
    }
    s.finish();
    let lost = n as f64 - s.arrivals(b).len() as f64;
    // 5 σ of a binomial(20000, 0.3): ±324 frames.
    let sigma = (n as f64 * 0.3 * 0.7).sqrt();
    assert!((lost - 0.3 * n as f64).abs() < 5.0 * sigma, "lost {lost}");
    assert_eq!(s.stats(Target::Link(0), 0).drop_loss as f64, lost);
}

#[test]
fn gilbert_elliott_loses_in_bursts() {
    // p = 1% Good→Bad, r = 25% Bad→Good, all lost in Bad, none in Good:
    // loss = p / (p + r) = 3.85%, mean burst = 1 / r = 4 frames.
    let ge = Loss::GilbertElliott { p: 0.01, r: 0.25, h: 0.0, k: 1.0 };
    let (mut s, a, b) = link(Impairments { loss: ge, ..imp() }, imp());
    let n = 100_000u32;
    for i in 0..n {
        s.send(i as u64 * US, a, udp(64, i));
    }
    s.finish();
    let mut got = vec![false; n as usize];
    for (_, i) in s.arrivals(b) {
        got[i as usize] = true;
    }
    let lost = got.iter().filter(|&&g| !g).count() as f64;
    let rate = lost / n as f64;
    assert!((rate - 0.0385).abs() < 0.008, "loss rate {rate}");
    let bursts = got.windows(2).filter(|w| w[0] && !w[1]).count() as f64;
    let mean_burst = lost / bursts;
    assert!((3.3..4.8).contains(&mean_burst), "mean burst {mean_burst}");
    // Bernoulli at the same rate has mean bursts near 1 / (1 - 0.0385) ≈ 1.04.
}

#[test]
fn duplication_sends_two_copies() {
    let (mut s, a, b) = link(Impairments { duplicate: Chance { probability: 1.0, correlation: 0.0 }, delay_ns: MS, ..imp() }, imp());
    for i in 0..3 {
        s.send(0, a, udp(64, i));
    }
    s.finish();
    assert_eq!(s.arrivals(b).iter().map(|x| x.1).collect::<Vec<_>>(), vec![0, 0, 1, 1, 2, 2]);
    let st = s.stats(Target::Link(0), 0);
    assert_eq!((st.duplicated, st.tx_frames), (3, 6));
}

#[test]
fn corruption_flips_exactly_one_bit() {
    let (mut s, a, b) = link(Impairments { corrupt: Chance { probability: 1.0, correlation: 0.0 }, ..imp() }, imp());
    let mut sent = Vec::new();
    for i in 0..100u32 {
        let f = udp(200, i);
        sent.push(f.clone());
        s.send(i as u64, a, f);
    }
    s.finish();
    let out: Vec<&Frame> = s.out.iter().filter(|o| o.1 == b).map(|o| &o.2).collect();
    assert_eq!(out.len(), 100);
    for (f, o) in sent.iter().zip(out) {
        let flipped: u32 = f.iter().zip(o.iter()).map(|(x, y)| (x ^ y).count_ones()).sum();
        assert_eq!(flipped, 1);
    }
    assert_eq!(s.stats(Target::Link(0), 0).corrupted, 100);
}

#[test]
fn reordered_frames_skip_the_delay() {
    let r = Reorder { probability: 1.0, correlation: 0.0, gap: 5 };
    let (mut s, a, b) = link(Impairments { delay_ns: 10 * MS, reorder: r, ..imp() }, imp());
    for i in 0..10u32 {
        s.send(i as u64 * MS, a, udp(64, i));
    }
    s.finish();
    // Every 5th frame (gap 5) goes at once and overtakes the frames delayed before it.
    let arr = s.arrivals(b);
    assert_eq!(arr.iter().map(|x| x.1).collect::<Vec<_>>(), vec![4, 9, 0, 1, 2, 3, 5, 6, 7, 8]);
    assert!(arr.contains(&(4 * MS, 4)) && arr.contains(&(9 * MS, 9)));
    assert!(arr.contains(&(10 * MS, 0)));
}

#[test]
fn mtu_drops_larger_frames_and_counts_them() {
    let (mut s, a, b) = link(Impairments { mtu: Some(1000), ..imp() }, imp());
    s.send(0, a, udp(1014, 1)); // 1000 bytes of IP: fits
    s.send(0, a, udp(1015, 2));
    let mut tagged = udp(1018, 3); // 802.1Q: 4 more bytes allowed
    tagged[VNET_HDR_LEN + 12..VNET_HDR_LEN + 14].copy_from_slice(&[0x81, 0x00]);
    s.send(0, a, tagged);
    s.finish();
    assert_eq!(s.arrivals(b).len(), 2);
    assert_eq!(s.stats(Target::Link(0), 0).drop_mtu, 1);
}

#[test]
fn the_interface_mtu_holds_without_an_mtu_impairment() {
    // A node raised its interface's MTU to 65521 and sent a 60 KB frame: a "1500" wire
    // must not carry it.
    let mut core = Core::new();
    let [a, b] = core.add_link(LinkConfig { mtu: 1500, ..Default::default() });
    let mut s = Sim::new(core);
    s.send(0, a, udp(1514, 1));
    s.send(0, a, udp(60_000, 2));
    s.finish();
    assert_eq!(s.arrivals(b), vec![(0, 1)]);
    assert_eq!(s.stats(Target::Link(0), 0).drop_mtu, 1);
    // A direction's own mtu wins over the interface's.
    let mut core = Core::new();
    let [a, b] = core.add_link(LinkConfig { mtu: 1500, forward: Impairments { mtu: Some(9000), ..imp() }, ..Default::default() });
    let mut s = Sim::new(core);
    s.send(0, a, udp(9014, 1));
    s.finish();
    assert_eq!(s.arrivals(b).len(), 1);
    // LAN ports too.
    let mut core = Core::new();
    let p = core.add_segment(SegmentConfig { members: (0..2).map(|_| MemberConfig { vlan: 1, mtu: 1500, ..Default::default() }).collect(), capacity_bps: None, aging_ns: MS, radio: None, ..Default::default() });
    let mut s = Sim::new(core);
    s.send(0, p[0], eth([0xff; 6], mac(10), 4000, 1));
    s.finish();
    assert!(s.out.is_empty());
    assert_eq!(s.stats(Target::Member(0, 0), 0).drop_mtu, 1);
}

#[test]
fn patch_mid_stream_keeps_scheduled_frames() {
    let (mut s, a, b) = link(delay(10 * MS), imp());
    s.send(0, a, udp(64, 0));
    s.send(MS, a, udp(64, 1));
    let r = s.apply(Command::Patch { target: Target::Link(0), dir: 0, patch: ImpairmentsPatch { delay_ns: Some(MS), ..Default::default() } });
    assert_eq!(r, Applied::Impairments(delay(MS)));
    s.send(2 * MS, a, udp(64, 2));
    s.finish();
    // The frame sent after the change may not overtake those already in flight.
    assert_eq!(s.arrivals(b), vec![(10 * MS, 0), (11 * MS, 1), (11 * MS, 2)]);
    s.send(20 * MS, a, udp(64, 3));
    s.finish();
    assert_eq!(s.arrivals(b).last(), Some(&(21 * MS, 3)));
    assert_eq!(s.core.impairments(Target::Link(0), 0).delay_ns, MS);
    assert_eq!(s.core.impairments(Target::Link(0), 1).delay_ns, 0);
}

#[test]
fn rate_change_takes_effect_for_the_next_frame() {
    let (mut s, a, b) = link(rate(8_000_000), imp());
    s.send(0, a, udp(1000, 0));
    s.apply(Command::Patch { target: Target::Link(0), dir: 0, patch: ImpairmentsPatch { rate_bps: Some(Some(80_000_000)), ..Default::default() } });
    s.send(0, a, udp(1000, 1));
    s.finish();
    assert_eq!(s.times(b), vec![MS, MS + 100 * US]);
}

#[test]
fn link_down_drops_and_drops_carrier_then_recovers() {
    let (mut s, a, b) = link(imp(), imp());
    s.apply(Command::SetUp { target: Target::Link(0), up: false });
    let carriers: Vec<(PortId, bool)> = s.events.iter().filter_map(|e| match e {
        Event::Carrier { port, up } => Some((*port, *up)),
        _ => None,
    }).collect();
    assert_eq!(carriers, vec![(a, false), (b, false)]);
    s.send(0, a, udp(64, 0));
    s.send(0, b, udp(64, 1));
    s.finish();
    assert!(s.out.is_empty());
    assert_eq!(s.stats(Target::Link(0), 0).drop_down, 1);
    assert_eq!(s.stats(Target::Link(0), 1).drop_down, 1);
    s.apply(Command::SetUp { target: Target::Link(0), up: true });
    assert!(matches!(s.events.last(), Some(Event::Carrier { up: true, .. })));
    s.send(MS, a, udp(64, 2));
    s.finish();
    assert_eq!(s.arrivals(b), vec![(MS, 2)]);
}

#[test]
fn counters_count_wire_frames_and_refused_writes() {
    let (mut s, a, b) = link(imp(), imp());
    s.send(0, a, udp(100, 0));
    s.send(0, a, udp(200, 1));
    s.finish();
    s.refuse.push(b);
    s.send(MS, a, udp(300, 2));
    s.finish();
    let st = s.stats(Target::Link(0), 0);
    assert_eq!((st.rx_frames, st.rx_bytes), (3, 600));
    assert_eq!((st.tx_frames, st.tx_bytes, st.write_errors), (2, 300, 1));
}

#[test]
fn delay_histogram_buckets_the_time_held() {
    let (mut s, a, _b) = link(delay(3 * MS), imp());
    for i in 0..7 {
        s.send(0, a, udp(64, i));
    }
    s.finish();
    let h = s.stats(Target::Link(0), 0).delay_hist;
    let i = vemu_engine::DELAY_BUCKETS_NS.iter().position(|&b| b == 5 * MS).unwrap();
    assert_eq!(h[i], 7);
    assert_eq!(h.iter().sum::<u64>(), 7);
}

#[test]
fn lateness_is_measured_against_the_schedule() {
    let (mut s, a, _b) = link(delay(MS), imp());
    s.core.handle_frame(0, a, udp(64, 0));
    s.core.handle_frame(0, a, udp(64, 1));
    // The driver comes 3 ms late for the first frame, on time for nothing.
    let tx = s.core.poll_transmit(4 * MS).unwrap();
    s.core.on_written(&tx, true);
    assert_eq!(tx.at_ns, MS);
    let tx = s.core.poll_transmit(4 * MS).unwrap();
    s.core.on_written(&tx, true);
    let st = s.stats(Target::Link(0), 0);
    assert_eq!(st.late_max_ns, 3 * MS);
    let i = vemu_engine::DELAY_BUCKETS_NS.iter().position(|&b| b == 5 * MS).unwrap();
    assert_eq!(st.late_hist[i], 2);
}

#[test]
fn nothing_is_handed_out_early() {
    let (mut s, a, _b) = link(delay(MS), imp());
    s.core.handle_frame(0, a, udp(64, 0));
    assert_eq!(s.core.poll_timeout(), Some(MS));
    assert!(s.core.poll_transmit(MS - 1).is_none());
    assert!(s.core.poll_transmit(MS).is_some());
    assert_eq!(s.core.poll_timeout(), None);
}

// ---------------------------------------------------------------- GSO super-frames

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
    let (mut s, a, b) = link(Impairments { loss: Loss::Bernoulli { rate: 0.5, correlation: 0.0 }, ..imp() }, imp());
    s.send(0, a, tcp_super(14_480, 1448));
    s.finish();
    let st = s.stats(Target::Link(0), 0);
    assert_eq!(st.rx_frames, 10);
    assert_eq!(st.tx_frames + st.drop_loss, 10);
    assert_eq!(s.arrivals(b).len() as u64, st.tx_frames);
    // Every piece is one wire frame: no GSO left.
    assert!(s.out.iter().all(|o| VnetHdr::parse(&o.2).gso_type == 0 && o.2.len() <= VNET_HDR_LEN + 54 + 1448));
}

#[test]
fn super_frame_on_a_rate_limit_leaves_in_short_bursts() {
    // At 1 Gbit/s, 100 µs of wire is 12500 bytes: 8 segments of 1502 bytes a piece.
    let (mut s, a, b) = link(rate(1_000_000_000), imp());
    s.send(0, a, tcp_super(62_264, 1448)); // 43 segments
    s.finish();
    let times = s.times(b);
    assert_eq!(times.len(), 6, "43 segments in pieces of 8");
    let bytes = 62_264 + 43 * 54;
    assert_eq!(*times.last().unwrap(), (bytes as u64 * 8) as u64, "the last piece ends when the whole has been serialized");
    assert!(times.windows(2).all(|w| w[1] - w[0] <= 100 * US));
}

#[test]
fn corrupting_a_super_frame_hits_single_wire_frames() {
    let (mut s, a, b) = link(Impairments { corrupt: Chance { probability: 1.0, correlation: 0.0 }, ..imp() }, imp());
    s.send(0, a, tcp_super(4344, 1448));
    s.finish();
    assert_eq!(s.arrivals(b).len(), 3);
    assert_eq!(s.stats(Target::Link(0), 0).corrupted, 3);
}

// ---------------------------------------------------------------- hostile input

/// A small deterministic generator for hostile frames.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn short_frames_are_ignored() {
    let (mut s, a, b) = link(imp(), imp());
    for len in 0..vemu_engine::core::MIN_FRAME {
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
    core.add_link(LinkConfig { forward: imp(), reverse: hard.clone(), seeds: [1, 2], mtu: 1500, kernel_path: false, kernel_shaper: false, remote: None , spur: None });
    core.add_link(LinkConfig { forward: hard.clone(), reverse: rate(1_000_000), seeds: [3, 4], mtu: 0, kernel_path: false, kernel_shaper: false, remote: None , spur: None });
    core.add_segment(SegmentConfig { members: (0..4).map(|_| MemberConfig { vlan: 1, egress: hard.clone(), ..Default::default() }).collect(), capacity_bps: Some(1_000_000_000), aging_ns: MS, radio: None, ..Default::default() });
    let cfg = MediumConfig { model: Model::UnitDisk { range_m: 250.0 }, radio: Radio::default(), rate_bps: 11_000_000, preamble_ns: 192 * US, carrier_sense_m: 550.0, csma: true, queue_frames: 50, seed: 1 };
    core.add_segment(SegmentConfig { members: (0..3).map(|_| MemberConfig { vlan: 1, ..Default::default() }).collect(), capacity_bps: None, aging_ns: MS, radio: Some((cfg, vec![Pos::new(0.0, 0.0), Pos::new(100.0, 0.0), Pos::new(200.0, 0.0)])), ..Default::default() });
    let ports = core.port_count() as u32;
    let mut s = Sim::new(core);
    let mut st = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..20_000u64 {
        let len = (xorshift(&mut st) % 9000) as usize;
        let mut f: Vec<u8> = (0..len).map(|_| xorshift(&mut st) as u8).collect();
        if f.len() > VNET_HDR_LEN + 60 && i % 2 == 0 {
            // A GSO header over random bytes, sometimes with an IPv4/TCP look.
            let gso_size = (xorshift(&mut st) % 2000) as u16;
            VnetHdr { flags: 1, gso_type: [1, 4, 0x81][i as usize % 3], hdr_len: 54, gso_size, csum_start: 34, csum_offset: 16 }.write(&mut f);
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

// ---------------------------------------------------------------- LAN segments

#[test]
fn unknown_unicast_floods_then_learning_narrows_it() {
    let (mut s, p) = plain_lan(4);
    s.send(0, p[0], eth(mac(12), mac(10), 64, 1));
    s.finish();
    let mut got: Vec<PortId> = s.out.iter().map(|o| o.1).collect();
    got.sort();
    assert_eq!(got, vec![p[1], p[2], p[3]]);
    // Member 2 answers: the switch knows where both live now.
    s.out.clear();
    s.send(MS, p[2], eth(mac(10), mac(12), 64, 2));
    s.send(2 * MS, p[0], eth(mac(12), mac(10), 64, 3));
    s.finish();
    assert_eq!(s.arrivals(p[0]), vec![(MS, 2)]);
    assert_eq!(s.arrivals(p[2]), vec![(2 * MS, 3)]);
    assert_eq!(s.out.len(), 2);
    let seg = s.core.segment_counters(0).snapshot();
    assert_eq!((seg.flooded, seg.unicast), (1, 2));
}

#[test]
fn broadcast_reaches_every_other_port_never_the_sender() {
    let (mut s, p) = plain_lan(5);
    s.send(0, p[3], eth([0xff; 6], mac(13), 64, 7));
    s.finish();
    let mut got: Vec<PortId> = s.out.iter().map(|o| o.1).collect();
    got.sort();
    assert_eq!(got, vec![p[0], p[1], p[2], p[4]]);
}

#[test]
fn flooded_copies_share_one_buffer() {
    let (mut s, p) = plain_lan(6);
    s.send(0, p[0], eth([0xff; 6], mac(10), 64, 7));
    s.finish();
    assert_eq!(s.out.len(), 5);
    assert!(s.out.windows(2).all(|w| Arc::ptr_eq(&w[0].2, &w[1].2)));
}

#[test]
fn vlans_are_separate_broadcast_domains() {
    let (mut s, p) = lan(vec![(10, imp(), imp()), (10, imp(), imp()), (20, imp(), imp()), (20, imp(), imp())], None, 300_000 * MS);
    s.send(0, p[0], eth([0xff; 6], mac(10), 64, 1));
    s.send(0, p[2], eth([0xff; 6], mac(12), 64, 2));
    s.finish();
    assert_eq!(s.arrivals(p[1]), vec![(0, 1)]);
    assert_eq!(s.arrivals(p[3]), vec![(0, 2)]);
    assert_eq!(s.out.len(), 2);
}

#[test]
fn destination_on_the_ingress_port_is_filtered() {
    let (mut s, p) = plain_lan(3);
    s.send(0, p[0], eth(mac(20), mac(10), 64, 1)); // learn 10 on port 0
    s.send(MS, p[0], eth(mac(10), mac(11), 64, 2)); // to 10, from port 0 again
    s.finish();
    assert_eq!(s.core.segment_counters(0).snapshot().filtered, 1);
    assert!(s.arrivals(p[0]).is_empty());
}

#[test]
fn learned_addresses_age_out() {
    let (mut s, p) = lan((0..3).map(|_| (1, imp(), imp())).collect(), None, 10 * MS);
    s.send(0, p[1], eth(mac(10), mac(11), 64, 1)); // 11 lives on port 1
    s.send(5 * MS, p[0], eth(mac(11), mac(10), 64, 2));
    s.finish();
    assert_eq!(s.arrivals(p[2]).len(), 1, "only the first (unknown) frame flooded");
    s.send(30 * MS, p[0], eth(mac(11), mac(10), 64, 3));
    s.finish();
    assert_eq!(s.arrivals(p[2]).len(), 2, "11 was forgotten: flooded again");
}

#[test]
fn port_down_forgets_its_addresses_and_drops_carrier() {
    let (mut s, p) = plain_lan(3);
    s.send(0, p[1], eth([0xff; 6], mac(11), 64, 1));
    s.apply(Command::SetUp { target: Target::Member(0, 1), up: false });
    assert!(matches!(s.events.last(), Some(Event::Carrier { port, up: false }) if *port == p[1]));
    s.out.clear();
    s.send(MS, p[0], eth(mac(11), mac(10), 64, 2));
    s.send(MS, p[1], eth(mac(10), mac(11), 64, 3));
    s.finish();
    // Unknown again: flooded, but not to the port that is down; the down port sends nothing.
    assert_eq!(s.out.iter().map(|o| o.1).collect::<Vec<_>>(), vec![p[2]]);
    assert_eq!(s.stats(Target::Member(0, 1), 0).drop_down, 1);
}

#[test]
fn segment_capacity_is_shared_by_all_senders() {
    // 1000-byte frames on an 8 Mbit/s switch: 1 ms each, whoever sends.
    let (mut s, p) = lan((0..3).map(|_| (1, imp(), imp())).collect(), Some(8_000_000), 300_000 * MS);
    s.send(0, p[0], eth(mac(12), mac(10), 1000, 1));
    s.send(0, p[1], eth(mac(12), mac(11), 1000, 2));
    s.send(0, p[0], eth(mac(12), mac(10), 1000, 3));
    s.finish();
    assert_eq!(s.arrivals(p[2]), vec![(MS, 1), (2 * MS, 2), (3 * MS, 3)]);
}

#[test]
fn each_port_has_its_own_ingress_impairments() {
    let (mut s, p) = lan(vec![(1, imp(), imp()), (1, imp(), delay(5 * MS)), (1, imp(), delay(MS))], None, 300_000 * MS);
    s.send(0, p[0], eth([0xff; 6], mac(10), 64, 1));
    s.finish();
    assert_eq!(s.arrivals(p[1]), vec![(5 * MS, 1)]);
    assert_eq!(s.arrivals(p[2]), vec![(MS, 1)]);
}

#[test]
fn egress_impairments_act_before_the_switch() {
    let (mut s, p) = lan(vec![(1, delay(2 * MS), imp()), (1, imp(), delay(3 * MS)), (1, imp(), imp())], None, 300_000 * MS);
    s.send(0, p[0], eth([0xff; 6], mac(10), 64, 1));
    s.finish();
    assert_eq!(s.arrivals(p[1]), vec![(5 * MS, 1)]);
    assert_eq!(s.arrivals(p[2]), vec![(2 * MS, 1)]);
    let eg = s.stats(Target::Member(0, 0), 0);
    assert_eq!((eg.rx_frames, eg.tx_frames), (1, 1));
    assert_eq!(s.stats(Target::Member(0, 1), 1).tx_frames, 1);
}

#[test]
fn a_corrupting_port_gets_its_own_copy() {
    let (mut s, p) = lan(vec![(1, imp(), imp()), (1, imp(), Impairments { corrupt: Chance { probability: 1.0, correlation: 0.0 }, ..imp() }), (1, imp(), imp()), (1, imp(), imp())], None, 300_000 * MS);
    let f = eth([0xff; 6], mac(10), 64, 1);
    s.send(0, p[0], f.clone());
    s.finish();
    let of = |port| s.out.iter().find(|o| o.1 == port).unwrap().2.clone();
    assert!(Arc::ptr_eq(&of(p[2]), &of(p[3])));
    assert_eq!(**of(p[2]), f);
    assert_ne!(**of(p[1]), f);
}

#[test]
fn lan_port_patch_changes_one_direction() {
    let (mut s, p) = plain_lan(2);
    s.apply(Command::Patch { target: Target::Member(0, 1), dir: 1, patch: ImpairmentsPatch { delay_ns: Some(4 * MS), ..Default::default() } });
    s.send(0, p[0], eth([0xff; 6], mac(10), 64, 1));
    s.send(0, p[1], eth([0xff; 6], mac(11), 64, 2));
    s.finish();
    assert_eq!(s.arrivals(p[1]), vec![(4 * MS, 1)]);
    assert_eq!(s.arrivals(p[0]), vec![(0, 2)]);
}

// ---------------------------------------------------------------- radio channel

#[test]
fn radio_reaches_members_in_range_only() {
    // 11 Mbit/s, 100-byte frame: 800 bits → 72727 ns of airtime.
    let (mut s, p) = radio(&[(0.0, 0.0), (200.0, 0.0), (400.0, 0.0)], false, 11_000_000);
    s.send(0, p[0], eth([0xff; 6], mac(10), 100, 1));
    s.finish();
    let airtime: u64 = 100 * 8 * 1_000_000_000 / 11_000_000;
    let d = s.arrivals(p[1]);
    assert_eq!(d.len(), 1);
    // Airtime, plus 200 m at the speed of light (667 ns).
    assert!((d[0].0 as i64 - airtime as i64 - 667).abs() <= 1, "{d:?}");
    assert!(s.arrivals(p[2]).is_empty(), "400 m is out of range");
    let seg = s.core.segment_counters(0).snapshot();
    assert_eq!(seg.air_frames, 1);
}

#[test]
fn radio_frames_of_one_sender_take_turns_on_the_air() {
    let (mut s, p) = radio(&[(0.0, 0.0), (0.0, 0.0)], false, 8_000_000);
    for i in 0..3 {
        s.send(0, p[0], eth([0xff; 6], mac(10), 1000, i)); // 1 ms of air each
    }
    s.finish();
    assert_eq!(s.times(p[1]), vec![MS, 2 * MS, 3 * MS]);
}

#[test]
fn radio_members_in_carrier_sense_range_share_the_air() {
    let (mut s, p) = radio(&[(0.0, 0.0), (10.0, 0.0), (5.0, 5.0)], false, 8_000_000);
    s.send(0, p[0], eth([0xff; 6], mac(10), 1000, 1));
    s.send(0, p[1], eth([0xff; 6], mac(11), 1000, 2));
    s.finish();
    let t = s.arrivals(p[2]);
    assert_eq!(t.len(), 2);
    assert!(t[1].0 >= t[0].0 + MS, "one after the other: {t:?}");
}

#[test]
fn moved_member_leaves_and_rejoins_range() {
    let (mut s, p) = radio(&[(0.0, 0.0), (100.0, 0.0)], false, 11_000_000);
    s.apply(Command::Positions { seg: 0, positions: vec![Pos::new(0.0, 0.0), Pos::new(1000.0, 0.0)] });
    s.send(0, p[0], eth([0xff; 6], mac(10), 100, 1));
    s.finish();
    assert!(s.arrivals(p[1]).is_empty());
    s.apply(Command::Positions { seg: 0, positions: vec![Pos::new(0.0, 0.0), Pos::new(50.0, 0.0)] });
    s.send(10 * MS, p[0], eth([0xff; 6], mac(10), 100, 2));
    s.finish();
    assert_eq!(s.arrivals(p[1]).len(), 1);
    let snap = s.core.radio(0).unwrap();
    assert_eq!(snap.positions[1], Pos::new(50.0, 0.0));
    assert_eq!(snap.neighbours[0].len(), 1);
}

#[test]
fn radio_unicast_goes_to_the_learned_member_only() {
    let (mut s, p) = radio(&[(0.0, 0.0), (10.0, 0.0), (20.0, 0.0)], false, 11_000_000);
    s.send(0, p[2], eth([0xff; 6], mac(12), 100, 1)); // the channel learns 12 is member 2
    s.send(MS, p[0], eth(mac(12), mac(10), 100, 2));
    s.finish();
    assert_eq!(s.arrivals(p[2]).len(), 1);
    assert_eq!(s.arrivals(p[1]).iter().filter(|a| a.1 == 2).count(), 0);
}

#[test]
fn hidden_terminals_collide_under_csma() {
    // 0 and 2 cannot sense each other (400 m, carrier sense 250 m); 1 hears both.
    let (mut s, p) = radio_with(&[(0.0, 0.0), (200.0, 0.0), (400.0, 0.0)], Model::UnitDisk { range_m: 250.0 }, true, 1_000_000, 3, 250.0);
    for i in 0..50 {
        s.send(0, p[0], eth(mac(11), mac(10), 250, i));
        s.send(0, p[2], eth(mac(11), mac(12), 250, 1000 + i));
    }
    s.finish();
    let snap = s.core.radio(0).unwrap();
    let collided: u64 = snap.pairs.iter().map(|p| p.2.lost_collision).sum();
    let delivered = s.arrivals(p[1]).len() as u64;
    assert!(collided > 20, "collided {collided}");
    assert!(delivered + collided <= 100);
}

#[test]
fn radio_member_down_neither_sends_nor_receives() {
    let (mut s, p) = radio(&[(0.0, 0.0), (10.0, 0.0), (20.0, 0.0)], false, 11_000_000);
    s.apply(Command::SetUp { target: Target::Member(0, 2), up: false });
    s.send(0, p[0], eth([0xff; 6], mac(10), 100, 1));
    s.send(0, p[2], eth([0xff; 6], mac(12), 100, 2));
    s.finish();
    assert_eq!(s.arrivals(p[1]).iter().map(|a| a.1).collect::<Vec<_>>(), vec![1]);
    assert!(s.arrivals(p[2]).is_empty());
}

#[test]
fn radio_decisions_repeat_with_the_seed() {
    let model = Model::LogDistance { exponent: 3.0, d0_m: 1.0, sigma_db: 6.0 };
    let run = |seed: u64| {
        let (mut s, p) = radio_with(&[(0.0, 0.0), (60.0, 0.0), (120.0, 0.0)], model, false, 11_000_000, seed, 550.0);
        for i in 0..300 {
            s.send(i as u64 * MS, p[0], eth([0xff; 6], mac(10), 100, i));
        }
        s.finish();
        (s.arrivals(p[1]), s.arrivals(p[2]))
    };
    let (a, b) = run(5);
    assert_eq!((a.clone(), b.clone()), run(5));
    assert_ne!((a.clone(), b.clone()), run(6));
    assert!(!a.is_empty() && a.len() < 300 || !b.is_empty() && b.len() < 300, "some but not all delivered");
}

#[test]
fn routing_frames_on_the_air_are_counted() {
    let (mut s, p) = radio(&[(0.0, 0.0), (10.0, 0.0)], false, 11_000_000);
    s.send(0, p[0], ipv4_udp(6696)); // babel
    s.send(0, p[0], ipv4_udp(5001)); // data
    s.finish();
    let seg = s.core.segment_counters(0).snapshot();
    assert_eq!((seg.air_frames, seg.routing_frames), (2, 1));
}

// ---------------------------------------------------------------- captures

fn captures(s: &Sim) -> Vec<(u64, u32, u64, bool, u32)> {
    s.events.iter().filter_map(|e| match e {
        Event::Capture { capture, iface, t_ns, outgoing, frame } => Some((*capture, *iface, *t_ns, *outgoing, seq_of(frame))),
        _ => None,
    }).collect()
}

#[test]
fn capture_after_sees_what_leaves_and_arrives() {
    let (mut s, a, b) = link(delay(2 * MS), imp());
    s.apply(Command::Capture { id: 1, target: Target::Link(0), side: 1, iface: 0, point: CapturePoint::After });
    s.apply(Command::Capture { id: 1, target: Target::Link(0), side: 0, iface: 1, point: CapturePoint::After });
    s.send(0, a, udp(64, 5));
    s.send(MS, b, udp(64, 6));
    s.finish();
    let c = captures(&s);
    // a sends 5 at 0 (iface 1, outgoing), b sends 6 at 1 ms (iface 0, outgoing) and 6
    // arrives at a at 1 ms, 5 arrives at b at 2 ms.
    assert!(c.contains(&(1, 1, 0, true, 5)));
    assert!(c.contains(&(1, 0, MS, true, 6)));
    assert!(c.contains(&(1, 1, MS, false, 6)));
    assert!(c.contains(&(1, 0, 2 * MS, false, 5)));
    assert_eq!(c.len(), 4);
}

#[test]
fn capture_before_sees_frames_the_link_drops() {
    let (mut s, a, _b) = link(Impairments { loss: Loss::Bernoulli { rate: 1.0, correlation: 0.0 }, ..imp() }, imp());
    s.apply(Command::Capture { id: 3, target: Target::Link(0), side: 1, iface: 0, point: CapturePoint::Before });
    s.send(0, a, udp(64, 1));
    s.finish();
    assert_eq!(captures(&s), vec![(3, 0, 0, false, 1)]);
    assert!(s.out.is_empty());
}

#[test]
fn capture_on_a_lan_port_and_its_end() {
    let (mut s, p) = lan(vec![(1, imp(), imp()), (1, imp(), delay(MS))], None, 300_000 * MS);
    s.apply(Command::Capture { id: 9, target: Target::Member(0, 1), side: 0, iface: 0, point: CapturePoint::Before });
    s.apply(Command::Capture { id: 10, target: Target::Member(0, 1), side: 0, iface: 0, point: CapturePoint::After });
    s.send(0, p[0], eth([0xff; 6], mac(10), 64, 4));
    s.finish();
    let c = captures(&s);
    assert!(c.contains(&(9, 0, 0, false, 4)), "before the port's ingress delay");
    assert!(c.contains(&(10, 0, MS, false, 4)), "as delivered");
    s.events.clear();
    s.apply(Command::Uncapture(9));
    s.apply(Command::Uncapture(10));
    s.send(2 * MS, p[0], eth([0xff; 6], mac(10), 64, 5));
    s.finish();
    assert!(captures(&s).is_empty());
    assert_eq!(s.arrivals(p[1]).len(), 2);
}

#[test]
fn random_source_addresses_fill_the_table_only_to_its_cap() {
    let (mut s, p) = plain_lan(3);
    let mut st = 7u64;
    for i in 0..10_000u64 {
        let src = (xorshift(&mut st) & 0xfeff_ffff_ffff).to_be_bytes();
        s.send(i * US, p[0], eth([0xff; 6], src[2..8].try_into().unwrap(), 64, i as u32));
    }
    s.finish();
    let seg = s.core.segment_counters(0).snapshot();
    assert_eq!(seg.learned, vemu_switch::DEFAULT_MAX_LEARNED as u64);
    assert_eq!(seg.learn_refused, 10_000 - vemu_switch::DEFAULT_MAX_LEARNED as u64);
}

/// Readiness (`vemu up` waits for it): the backlog is the age of the oldest frame due
/// and not yet handed out. A flood on a 1 ms LAN is due 1 ms later; a driver that does
/// not write for 5 ms is 4 ms behind; once it writes everything due it is caught up.
#[test]
fn backlog_is_the_age_of_the_oldest_due_frame() {
    let members = (0..50).map(|_| (1u16, delay(MS), imp())).collect();
    let (mut sim, ports) = lan(members, None, 300_000 * MS);
    assert_eq!(sim.core.backlog_ns(0), 0, "an idle core is never behind");
    sim.core.handle_frame(0, ports[0], eth([0xff; 6], mac(1), 100, 1));
    assert_eq!(sim.core.backlog_ns(MS / 2), 0, "nothing due before the port's delay");
    assert_eq!(sim.core.backlog_ns(5 * MS), 4 * MS);
    // Write only part of what is due: still behind by the oldest left.
    sim.now = 5 * MS;
    sim.core.handle_timeout(sim.now);
    for _ in 0..10 {
        let tx = sim.core.poll_transmit(sim.now).expect("frames due");
        sim.core.on_written(&tx, true);
    }
    assert_eq!(sim.core.backlog_ns(5 * MS), 4 * MS);
    sim.finish();
    assert_eq!(sim.out.len(), 49 - 10);
    assert_eq!(sim.core.backlog_ns(sim.now), 0, "caught up once everything due is written");
}

/// An IPv4 frame from host `src` to group address `dst` (IP protocol `proto`).
fn ip4_group(src: u8, dst: [u8; 4], proto: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; VNET_HDR_LEN];
    f.extend_from_slice(&[0x01, 0x00, 0x5e, dst[1] & 0x7f, dst[2], dst[3]]);
    f.extend_from_slice(&mac(src));
    f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, (20 + payload.len()) as u8, 0, 0, 0, 0, 1, proto, 0, 0, 10, 0, 0, src]);
    f.extend_from_slice(&dst);
    f.extend_from_slice(payload);
    f
}

/// On a wireless segment a receiver in range takes a group's data only once it reported
/// the group (its report read as it was sent) and no longer after its leave, as a
/// radio's multicast filter does; 224.0.0.x, the reports themselves and broadcast reach
/// everyone in range. With `snooping: off` every receiver takes everything.
#[test]
fn radio_receivers_take_the_groups_they_joined_only() {
    for (snooping, p1, p2, filtered) in [
        (vemu_switch::Snooping::On, vec![2, 3, 6], vec![1, 3, 4, 6], 5),
        (vemu_switch::Snooping::Off, vec![0, 2, 3, 5, 6], vec![0, 1, 2, 3, 4, 5, 6], 0),
    ] {
        let mut core = Core::new();
        let cfg = MediumConfig { model: Model::UnitDisk { range_m: 250.0 }, radio: Radio::default(), rate_bps: 11_000_000, preamble_ns: 0, carrier_sense_m: 250.0, csma: false, queue_frames: 1000, seed: 7 };
        let pos = vec![Pos::new(0.0, 0.0), Pos::new(10.0, 0.0), Pos::new(20.0, 0.0)];
        let members = (0..3).map(|i| MemberConfig { vlan: 1, seeds: [i, 100 + i], ..Default::default() }).collect();
        let p = core.add_segment(SegmentConfig { members, aging_ns: 300_000 * MS, snooping, radio: Some((cfg, pos)), ..Default::default() });
        let mut s = Sim::new(core);
        let g = [239, 1, 1, 1];
        s.send(0, p[0], ip4_group(1, g, 17, &[0; 12])); // nobody joined yet
        s.send(MS, p[1], ip4_group(2, g, 2, &[0x16, 0, 0, 0, 239, 1, 1, 1])); // 1 joins
        s.send(2 * MS, p[0], ip4_group(1, g, 17, &[0; 12]));
        s.send(3 * MS, p[0], ip4_group(1, [224, 0, 0, 5], 89, &[0; 12])); // OSPF: everyone
        s.send(4 * MS, p[1], ip4_group(2, [224, 0, 0, 2], 2, &[0x17, 0, 0, 0, 239, 1, 1, 1])); // 1 leaves
        s.send(5 * MS, p[0], ip4_group(1, g, 17, &[0; 12]));
        s.send(6 * MS, p[0], eth([0xff; 6], mac(1), 100, 7)); // broadcast: everyone
        s.finish();
        // Which of the sends (one a millisecond; each on the air well under 1 ms) each took.
        let slots = |port| s.times(port).iter().map(|t| t / MS).collect::<Vec<_>>();
        assert_eq!(slots(p[1]), p1, "{snooping:?}: member 1");
        assert_eq!(slots(p[2]), p2, "{snooping:?}: member 2 never joined");
        let seg = s.core.segment_counters(0).snapshot();
        assert_eq!((seg.filtered, seg.groups), (filtered, 0), "{snooping:?}: receptions held back; groups left");
    }
}

/// A LAN whose switch is the snooping querier: it sends its general queries through each
/// port's impairments at 0 s and 31.25 s; a host's report keeps a group's data to it
/// (and away from the others).
#[test]
fn a_querier_lan_queries_on_schedule_and_delivers_groups_to_members_only() {
    let mut core = Core::new();
    let members = (0..3).map(|i| MemberConfig { vlan: 1, ingress: delay(MS), seeds: [2 * i, 2 * i + 1], ..Default::default() }).collect();
    let ports = core.add_segment(SegmentConfig { members, aging_ns: 300_000 * MS, snooping: vemu_switch::Snooping::Querier, ..Default::default() });
    let mut sim = Sim::new(core);
    assert_eq!(sim.core.poll_timeout(), Some(0), "the first queries are due at once");
    sim.run_until(2 * MS);
    let queries: Vec<(u64, PortId)> = sim.out.iter().map(|(t, p, _)| (*t, *p)).collect();
    assert_eq!(queries.len(), 6, "an IGMP and an MLD query to each port");
    assert!(queries.iter().all(|&(t, _)| t == MS), "each after its port's 1 ms: {queries:?}");
    assert_eq!(sim.core.poll_timeout(), Some(31_250 * MS));
    // Port 1's host joins 239.1.1.1 (IGMPv2 report); port 0 sends to the group.
    let ip4 = ip4_group;
    let g = [239, 1, 1, 1];
    sim.out.clear();
    sim.send(10 * MS, ports[1], ip4(2, g, 2, &[0x16, 0, 0, 0, 239, 1, 1, 1]));
    sim.send(20 * MS, ports[0], ip4(1, g, 17, &[0; 12]));
    sim.run_until(100 * MS);
    let got: Vec<PortId> = sim.out.iter().map(|(_, p, _)| *p).collect();
    assert_eq!(got, [ports[1]], "the report reaches no host; the data reaches the member only");
    let seg = sim.core.segment_counters(0).snapshot();
    assert_eq!((seg.multicast, seg.groups), (2, 1));
    sim.run_until(31_251 * MS);
    assert_eq!(sim.out.len(), 1 + 6, "the second round of queries");
}

/// The paths the core asked for so far, as (port, in the kernel) in order.
fn paths(s: &Sim) -> Vec<(PortId, bool)> {
    full_paths(s).into_iter().map(|(p, path)| (p, path.in_kernel())).collect()
}

fn full_paths(s: &Sim) -> Vec<(PortId, Path)> {
    s.events.iter().filter_map(|e| if let Event::Path { port, path } = e { Some((*port, *path)) } else { None }).collect()
}

fn kernel_link(forward: Impairments, reverse: Impairments) -> (Sim, PortId, PortId) {
    let mut core = Core::new();
    let [a, b] = core.add_link(LinkConfig { forward, reverse, seeds: [1, 2], mtu: 1500, kernel_path: true, kernel_shaper: true, remote: None , spur: None });
    let mut s = Sim::new(core);
    s.drain_events();
    (s, a, b)
}

#[test]
fn unimpaired_directions_of_a_kernel_path_link_go_by_the_kernel() {
    let (s, a, _) = kernel_link(imp(), delay(MS));
    // Only the unimpaired direction (a → b, chosen at a) leaves the engine.
    assert_eq!(paths(&s), vec![(a, true)]);
    assert!(s.core.needs_engine(Target::Link(0)), "one direction is the engine's");
    assert!(s.stats(Target::Link(0), 0).kernel_path);
    assert!(!s.stats(Target::Link(0), 1).kernel_path);
    // A link without a kernel path never asks.
    let (s, _, _) = link(imp(), imp());
    assert_eq!(paths(&s), vec![]);
}

#[test]
fn a_direction_changes_path_when_its_impairments_come_and_go() {
    let (mut s, a, b) = kernel_link(imp(), imp());
    assert_eq!(paths(&s), vec![(a, true), (b, true)]);
    assert!(!s.core.needs_engine(Target::Link(0)));
    let set = |d| ImpairmentsPatch { delay_ns: Some(d), ..Default::default() };
    s.apply(Command::Patch { target: Target::Link(0), dir: 1, patch: set(MS) });
    assert_eq!(paths(&s)[2..], [(b, false)]);
    // The engine's path emulates it from then on.
    s.send(0, b, udp(100, 1));
    s.finish();
    assert_eq!(s.times(a), vec![MS]);
    // Any impairment at all keeps it in the engine: a rate, a loss, a queue limit.
    s.apply(Command::Patch { target: Target::Link(0), dir: 1, patch: ImpairmentsPatch { delay_ns: Some(0), rate_bps: Some(Some(1_000_000)), ..Default::default() } });
    assert_eq!(paths(&s).len(), 3, "still impaired: no change asked");
    s.apply(Command::Patch { target: Target::Link(0), dir: 1, patch: ImpairmentsPatch { rate_bps: Some(None), ..Default::default() } });
    assert_eq!(paths(&s)[3..], [(b, true)]);
    // The same patch again changes nothing.
    s.apply(Command::Patch { target: Target::Link(0), dir: 1, patch: set(0) });
    assert_eq!(paths(&s).len(), 4);
}

#[test]
fn an_mtu_the_interfaces_have_anyway_keeps_a_direction_on_the_kernel_path() {
    // `mtu: 1446` on a link makes both interfaces 1446 bytes: the direction's limit is
    // theirs, which the kernel path enforces too (its routes carry the MTU).
    let mtu = |m| Impairments { mtu: Some(m), ..Default::default() };
    let mut core = Core::new();
    let [a, b] = core.add_link(LinkConfig { forward: mtu(1446), reverse: imp(), seeds: [1, 2], mtu: 1446, kernel_path: true, kernel_shaper: true, remote: None , spur: None });
    let mut s = Sim::new(core);
    s.drain_events();
    assert_eq!(paths(&s), vec![(a, true), (b, true)]);
    assert_eq!((s.core.iface_mtu(a), s.core.iface_mtu(b)), (1446, 1446));
    // A limit below the interfaces' is the engine's to carry out, and back.
    let set = |m| ImpairmentsPatch { mtu: Some(Some(m)), ..Default::default() };
    s.apply(Command::Patch { target: Target::Link(0), dir: 0, patch: set(1300) });
    assert_eq!(paths(&s)[2..], [(a, false)]);
    s.send(0, a, udp(1400, 1));
    s.finish();
    assert_eq!(s.stats(Target::Link(0), 0).drop_mtu, 1, "1386 bytes beyond the Ethernet header over a 1300-byte limit");
    s.apply(Command::Patch { target: Target::Link(0), dir: 0, patch: set(1446) });
    assert_eq!(paths(&s)[3..], [(a, true)]);
    // With a rate for the kernel's shaper: its token bucket.
    s.apply(Command::Patch { target: Target::Link(0), dir: 0, patch: ImpairmentsPatch { rate_bps: Some(Some(10_000_000)), shaper: Some(Shaper::Kernel), ..Default::default() } });
    assert!(matches!(full_paths(&s)[4..], [(p, Path::Shaped(Shape { rate_bps: 10_000_000, .. }))] if p == a));
}

#[test]
fn a_rate_alone_given_to_the_kernels_shaper_goes_by_the_kernels_token_bucket() {
    let kernel = |rate| Impairments { rate_bps: Some(rate), shaper: Shaper::Kernel, ..Default::default() };
    let mut queued = kernel(1_000_000);
    queued.queue = Some(QueueLimit::Bytes(50_000));
    let (mut s, a, b) = kernel_link(kernel(100_000_000), queued);
    // 4 ms at the rate (at least two frames of the MTU with their headers, and a TCP
    // super-frame where that is at most 8 ms: 50 kB at 100 Mbit/s grows to 72 KiB); the
    // queue limit in bytes (the default 1000 packets as full-size frames).
    let fwd = Shape { rate_bps: 100_000_000, burst_bytes: 72 * 1024, limit_bytes: 1000 * 1514 };
    let rev = Shape { rate_bps: 1_000_000, burst_bytes: 2 * 1518, limit_bytes: 50_000 };
    assert_eq!(full_paths(&s), vec![(a, Path::Shaped(fwd)), (b, Path::Shaped(rev))]);
    assert!(!s.core.needs_engine(Target::Link(0)), "both directions are the kernel's");
    let st = s.stats(Target::Link(0), 0);
    assert!(st.kernel_path && st.kernel_shaper);
    // A new rate is a new bucket; anything else besides the rate takes the engine's
    // serializer, and back.
    s.apply(Command::Patch { target: Target::Link(0), dir: 0, patch: ImpairmentsPatch { rate_bps: Some(Some(1_000_000_000)), ..Default::default() } });
    assert_eq!(full_paths(&s)[2..], [(a, Path::Shaped(Shape { rate_bps: 1_000_000_000, burst_bytes: 500_000, limit_bytes: 1000 * 1514 }))]);
    s.apply(Command::Patch { target: Target::Link(0), dir: 0, patch: ImpairmentsPatch { delay_ns: Some(MS), ..Default::default() } });
    assert_eq!(full_paths(&s)[3..], [(a, Path::Engine)]);
    assert!(!s.stats(Target::Link(0), 0).kernel_shaper);
    s.send(0, a, udp(1250, 1));
    s.finish();
    assert_eq!(s.times(b), vec![10_000 + MS], "the engine serializes: 1250 bytes at 1 Gbit/s, then the delay");
    s.apply(Command::Patch { target: Target::Link(0), dir: 0, patch: ImpairmentsPatch { delay_ns: Some(0), ..Default::default() } });
    assert!(matches!(full_paths(&s)[4..], [(p, Path::Shaped(_))] if p == a));
    // The rate removed: nothing to shape, the plain kernel path; the engine's shaper
    // (the default): the engine.
    s.apply(Command::Patch { target: Target::Link(0), dir: 0, patch: ImpairmentsPatch { rate_bps: Some(None), ..Default::default() } });
    assert_eq!(full_paths(&s)[5..], [(a, Path::Kernel)]);
    s.apply(Command::Patch { target: Target::Link(0), dir: 1, patch: ImpairmentsPatch { shaper: Some(Shaper::Engine), ..Default::default() } });
    assert_eq!(full_paths(&s)[6..], [(b, Path::Engine)]);
    // Captured: the engine, whatever the shaper.
    s.apply(Command::Patch { target: Target::Link(0), dir: 0, patch: ImpairmentsPatch { rate_bps: Some(Some(1_000_000)), ..Default::default() } });
    s.apply(Command::Capture { id: 3, target: Target::Link(0), side: 0, iface: 0, point: CapturePoint::After });
    assert_eq!(full_paths(&s).last(), Some(&(a, Path::Engine)));
    s.apply(Command::Uncapture(3));
    assert!(matches!(full_paths(&s).last(), Some((p, Path::Shaped(_))) if *p == a));
    // A super-frame (72 KiB) is 8 ms at 73.7 Mbit/s: above that the bucket holds one.
    let burst = |s: &Sim| match full_paths(s).last() {
        Some((_, Path::Shaped(shape))) => shape.burst_bytes,
        other => panic!("{other:?}"),
    };
    s.apply(Command::Patch { target: Target::Link(0), dir: 0, patch: ImpairmentsPatch { rate_bps: Some(Some(73_000_000)), ..Default::default() } });
    assert_eq!(burst(&s), 36_500, "4 ms at 73 Mbit/s");
    s.apply(Command::Patch { target: Target::Link(0), dir: 0, patch: ImpairmentsPatch { rate_bps: Some(Some(74_000_000)), ..Default::default() } });
    assert_eq!(burst(&s), 72 * 1024, "a super-frame at 74 Mbit/s");
}

#[test]
fn a_link_down_or_captured_goes_through_the_engine() {
    let (mut s, a, b) = kernel_link(imp(), imp());
    s.apply(Command::SetUp { target: Target::Link(0), up: false });
    assert_eq!(paths(&s)[2..], [(a, false), (b, false)]);
    // The engine drops what the nodes send while the link is down.
    s.send(0, a, udp(100, 1));
    s.finish();
    assert_eq!(s.times(b), Vec::<u64>::new());
    assert_eq!(s.stats(Target::Link(0), 0).drop_down, 1);
    s.apply(Command::SetUp { target: Target::Link(0), up: true });
    assert_eq!(paths(&s)[4..], [(a, true), (b, true)]);
    // A capture on either end brings both directions to the engine, which copies them;
    // its end sends them back.
    s.apply(Command::Capture { id: 7, target: Target::Link(0), side: 1, iface: 0, point: CapturePoint::After });
    assert_eq!(paths(&s)[6..], [(a, false), (b, false)]);
    s.apply(Command::Uncapture(7));
    assert_eq!(paths(&s)[8..], [(a, true), (b, true)]);
}

/// A LAN whose ports the kernel can switch (a bridge in the plane), with `impaired`
/// given to member 0's ingress; the paths asked for at the start drained.
fn kernel_lan(n: usize, capacity_bps: Option<u64>, snooping: vemu_switch::Snooping, impaired: Impairments) -> (Sim, Vec<PortId>, Vec<(PortId, bool)>) {
    let mut core = Core::new();
    let members = (0..n).map(|i| MemberConfig { vlan: 1, ingress: if i == 0 { impaired.clone() } else { imp() }, seeds: [2 * i as u64, 2 * i as u64 + 1], ..Default::default() }).collect();
    let ports = core.add_segment(SegmentConfig { members, capacity_bps, aging_ns: 300_000 * MS, snooping, kernel_path: true, ..Default::default() });
    let mut s = Sim::new(core);
    s.drain_events();
    let first = paths(&s);
    s.events.clear();
    (s, ports, first)
}

/// A LAN is switched by the kernel while nothing of it needs emulating, all or nothing:
/// an impairment on one direction of one port, a port down, a capture or a capacity
/// bring every port to the engine; lifting it sends them back.
#[test]
fn a_lan_goes_by_the_kernel_while_nothing_of_it_needs_emulating() {
    let (mut s, p, first) = kernel_lan(3, None, vemu_switch::Snooping::On, imp());
    assert_eq!(first, p.iter().map(|&q| (q, true)).collect::<Vec<_>>(), "every port to the kernel at once");
    assert!(!s.core.needs_engine(Target::Member(0, 0)));
    assert!(s.stats(Target::Member(0, 2), 0).kernel_path && s.stats(Target::Member(0, 2), 1).kernel_path);
    let set = |d| ImpairmentsPatch { delay_ns: Some(d), ..Default::default() };
    s.apply(Command::Patch { target: Target::Member(0, 1), dir: 1, patch: set(MS) });
    assert_eq!(paths(&s), p.iter().map(|&q| (q, false)).collect::<Vec<_>>(), "one port's impairment takes the whole LAN to the engine");
    assert!(s.core.needs_engine(Target::Member(0, 2)));
    assert!(!s.stats(Target::Member(0, 0), 0).kernel_path);
    // The engine switches it from then on: a broadcast from 0 reaches 1 after its 1 ms.
    s.send(0, p[0], udp(60, 1));
    s.finish();
    assert_eq!(s.times(p[1]), vec![MS]);
    assert_eq!(s.times(p[2]), vec![0]);
    s.events.clear();
    s.apply(Command::Patch { target: Target::Member(0, 1), dir: 1, patch: set(0) });
    assert_eq!(paths(&s), p.iter().map(|&q| (q, true)).collect::<Vec<_>>());
    s.events.clear();
    s.apply(Command::SetUp { target: Target::Member(0, 2), up: false });
    assert_eq!(paths(&s).len(), 3);
    assert!(paths(&s).iter().all(|&(_, k)| !k), "a port down: the engine drops its frames");
    s.events.clear();
    s.apply(Command::SetUp { target: Target::Member(0, 2), up: true });
    assert!(paths(&s).iter().all(|&(_, k)| k));
    s.events.clear();
    s.apply(Command::Capture { id: 3, target: Target::Member(0, 0), side: 0, iface: 0, point: CapturePoint::After });
    assert!(paths(&s).len() == 3 && paths(&s).iter().all(|&(_, k)| !k), "a capture needs the engine's copies");
    s.events.clear();
    s.apply(Command::Uncapture(3));
    assert!(paths(&s).len() == 3 && paths(&s).iter().all(|&(_, k)| k));
    // Impaired from the start, or with a capacity: the engine from the start (no path
    // asked: the engine is where a LAN starts).
    let (_, _, first) = kernel_lan(3, None, vemu_switch::Snooping::On, delay(MS));
    assert_eq!(first, vec![]);
    let (_, _, first) = kernel_lan(3, Some(1_000_000_000), vemu_switch::Snooping::On, imp());
    assert_eq!(first, vec![]);
    // A LAN without a kernel path never asks; nor does a wireless one.
    let (s, _) = plain_lan(3);
    assert_eq!(paths(&s), vec![]);
}

/// Each path and bucket event of a LAN port: `(port, Some(egress path))` or
/// `(port, None, ingress bucket)`, in order.
fn lan_events(s: &Sim) -> Vec<(PortId, Option<Path>, Option<Shape>)> {
    s.events
        .iter()
        .filter_map(|e| match e {
            Event::Path { port, path } => Some((*port, Some(*path), None)),
            Event::Ingress { port, shape } => Some((*port, None, *shape)),
            _ => None,
        })
        .collect()
}

/// A LAN port direction whose one impairment is a rate given to the kernel's shaper
/// keeps the LAN on the kernel's bridge where the driver can shape there: its egress
/// through a bucket ([`Path::Shaped`]), its ingress through one ([`Event::Ingress`],
/// told before the paths); anything else still takes the whole LAN to the engine, and
/// only what changed is told again.
#[test]
fn a_lan_whose_rates_the_kernel_shapes_stays_on_the_bridge() {
    let kernel = |rate| Impairments { rate_bps: Some(rate), shaper: Shaper::Kernel, ..Default::default() };
    let lan = |shaper: bool| {
        let mut core = Core::new();
        let members = (0..3)
            .map(|i| MemberConfig {
                vlan: 1,
                egress: if i == 1 { kernel(50_000_000) } else { imp() },
                ingress: if i == 0 { kernel(10_000_000) } else { imp() },
                seeds: [2 * i, 2 * i + 1],
                mtu: 1500,
                ..Default::default()
            })
            .collect();
        let ports = core.add_segment(SegmentConfig { members, aging_ns: 300_000 * MS, kernel_path: true, kernel_shaper: shaper, ..Default::default() });
        let mut s = Sim::new(core);
        s.drain_events();
        (s, ports)
    };
    let (mut s, p) = lan(true);
    // 4 ms at the rate, at least two frames of 1518 bytes; the default queue of 1000 full frames.
    // 4 ms at the rate, at least two frames (and a super-frame from 74 Mbit/s on).
    let bucket = |rate: u64| Shape { rate_bps: rate, burst_bytes: (rate / 250 / 8).max(3036), limit_bytes: 1000 * 1514 };
    let (b0, b1) = (bucket(10_000_000), bucket(50_000_000));
    let first = vec![(p[0], None, Some(b0)), (p[0], Some(Path::Kernel), None), (p[1], Some(Path::Shaped(b1)), None), (p[2], Some(Path::Kernel), None)];
    assert_eq!(lan_events(&s), first, "the buckets toward the nodes first, then every port's path");
    assert!(!s.core.needs_engine(Target::Member(0, 0)));
    let (e0, e1) = (s.stats(Target::Member(0, 0), 0), s.stats(Target::Member(0, 0), 1));
    assert!(e0.kernel_path && !e0.kernel_shaper && e1.kernel_path && e1.kernel_shaper);
    // A delay anywhere: every port to the engine, the buckets toward the nodes first
    // taken away (the engine's frames for a port leave through the same device).
    s.events.clear();
    s.apply(Command::Patch { target: Target::Member(0, 2), dir: 0, patch: ImpairmentsPatch { delay_ns: Some(MS), ..Default::default() } });
    let to_engine: Vec<_> = [(p[0], None, None)].into_iter().chain(p.iter().map(|&q| (q, Some(Path::Engine), None))).collect();
    assert_eq!(lan_events(&s), to_engine);
    assert!(!s.stats(Target::Member(0, 0), 1).kernel_shaper);
    // The engine serializes port 0's ingress at 10 Mbit/s: a 1500-byte frame from 1
    // takes 1200 µs there (port 1's 50 Mbit/s egress first: 240 µs).
    s.send(0, p[1], udp(1500, 1));
    s.finish();
    assert_eq!(s.times(p[0]), vec![240_000 + 1_200_000]);
    // Taken away: back on the bridge, its bucket and paths told again.
    s.events.clear();
    s.apply(Command::Patch { target: Target::Member(0, 2), dir: 0, patch: ImpairmentsPatch { delay_ns: Some(0), ..Default::default() } });
    assert_eq!(lan_events(&s), first);
    // Port 0's ingress rate lifted: only its bucket goes; a new rate on port 2's: a bucket.
    s.events.clear();
    s.apply(Command::Patch { target: Target::Member(0, 0), dir: 1, patch: ImpairmentsPatch { rate_bps: Some(None), ..Default::default() } });
    assert_eq!(lan_events(&s), vec![(p[0], None, None)]);
    s.events.clear();
    s.apply(Command::Patch { target: Target::Member(0, 2), dir: 1, patch: ImpairmentsPatch { rate_bps: Some(Some(20_000_000)), shaper: Some(Shaper::Kernel), ..Default::default() } });
    assert_eq!(lan_events(&s), vec![(p[2], None, Some(bucket(20_000_000)))]);
    // The engine's shaper asked for on one port: the engine (port 2's bucket goes).
    s.events.clear();
    s.apply(Command::Patch { target: Target::Member(0, 1), dir: 0, patch: ImpairmentsPatch { shaper: Some(Shaper::Engine), ..Default::default() } });
    let to_engine: Vec<_> = [(p[2], None, None)].into_iter().chain(p.iter().map(|&q| (q, Some(Path::Engine), None))).collect();
    assert_eq!(lan_events(&s), to_engine);
    // A driver that cannot shape on the bridge: the engine from the start.
    let (s, _) = lan(false);
    assert_eq!(lan_events(&s), vec![]);
    assert!(s.core.needs_engine(Target::Member(0, 0)));
}

/// The switch of a LAN the kernel switches sends no queries of its own (the kernel's
/// bridge is the querier then); taken to the engine, it queries at once.
#[test]
fn a_kernel_switched_lan_leaves_the_queries_to_the_kernel() {
    let (mut s, p, _) = kernel_lan(2, None, vemu_switch::Snooping::Querier, imp());
    assert_eq!(s.core.poll_timeout(), None, "nothing to do while the kernel switches");
    s.run_until(40_000 * MS);
    assert!(s.out.is_empty());
    s.apply(Command::Patch { target: Target::Member(0, 0), dir: 0, patch: ImpairmentsPatch { delay_ns: Some(MS), ..Default::default() } });
    assert_eq!(s.core.poll_timeout(), Some(0), "queries due since the start go at once");
    s.run_until(40_001 * MS);
    let to: Vec<PortId> = s.out.iter().map(|(_, q, _)| *q).collect();
    assert_eq!(to, [p[0], p[1], p[0], p[1]], "an IGMP and an MLD query to each port");
}

/// A link whose sides are on two machines, each with its own core, joined by an
/// underlay of one-way delay `transit_ns` that carries the tunnel's datagrams (over an
/// MTU of 1500). Frames at `machines[0]`'s side a go forward; `machines[1]` has side b.
struct Split {
    machines: [Sim; 2],
    /// (ports a and b) on each machine: a is local on machine 0, b on machine 1.
    ports: [[PortId; 2]; 2],
    transit_ns: u64,
    reasm: [vemu_engine::tunnel::Reassembler; 2],
    seq: u32,
    /// Frames that reached their node, per machine: (time, seq).
    delivered: [Vec<(u64, u32)>; 2],
    /// Tunnel sequence numbers whose datagrams the underlay loses.
    underlay_drops: Vec<u32>,
}

impl Split {
    fn new(forward: Impairments, reverse: Impairments, transit_ns: u64) -> Split {
        let mk = |remote_side: usize| {
            let mut core = Core::new();
            let ports = core.add_link(LinkConfig { forward: forward.clone(), reverse: reverse.clone(), seeds: [1, 2], mtu: 1500, kernel_path: true, kernel_shaper: true, remote: Some((remote_side, transit_ns)) , spur: None });
            (Sim::new(core), ports)
        };
        let ((m0, p0), (m1, p1)) = (mk(1), mk(0));
        Split { machines: [m0, m1], ports: [p0, p1], transit_ns, reasm: Default::default(), seq: 0, delivered: [Vec::new(), Vec::new()], underlay_drops: Vec::new() }
    }

    /// Run both machines to `t`: what one hands out for the remote side crosses the
    /// underlay as datagrams and is handed to the other at arrival.
    fn run_until(&mut self, t: u64) {
        loop {
            let next = self.machines.iter().filter_map(|m| m.core.poll_timeout()).min();
            let Some(d) = next.filter(|&d| d <= t) else { break };
            for m in 0..2 {
                let sim = &mut self.machines[m];
                if sim.core.poll_timeout() != Some(d) {
                    continue;
                }
                sim.now = sim.now.max(d);
                sim.step();
                let local = self.ports[m][m];
                let mut crossing = Vec::new();
                for (at, port, frame) in sim.out.drain(..) {
                    if port == local {
                        self.delivered[m].push((at, seq_of(&frame)));
                    } else {
                        crossing.push((at, frame));
                    }
                }
                for (at, frame) in crossing {
                    let mut dgrams = Vec::new();
                    let vni = vemu_engine::tunnel::vni(0, m as u8);
                    vemu_engine::tunnel::encode(&frame, vemu_engine::tunnel::Meta { vni, seq: self.seq, departure_ns: at }, vemu_engine::tunnel::payload_for_mtu(1500, false), &mut dgrams);
                    self.seq += 1;
                    if self.underlay_drops.contains(&(self.seq - 1)) {
                        continue;
                    }
                    let other = 1 - m;
                    for d in &dgrams {
                        let piece = vemu_engine::tunnel::decode(d).unwrap();
                        let peer = &mut self.machines[other];
                        if let Some(w) = self.reasm[other].push(&piece) {
                            let arrive = at + self.transit_ns;
                            peer.now = peer.now.max(arrive);
                            peer.core.handle_delivered(arrive, self.ports[other][other], w.frame);
                        }
                        // As the driver does: the far side's port counts what never came.
                        let c = self.reasm[other].counts(vni);
                        peer.core.set_underlay_lost(self.ports[other][m], c.lost + c.late);
                    }
                }
            }
        }
        for m in &mut self.machines {
            m.now = m.now.max(t);
        }
    }
}

#[test]
fn a_link_across_machines_keeps_its_set_delay_the_underlay_transit_included() {
    let mut s = Split::new(delay(5 * MS), delay(2 * MS), 300 * US);
    s.machines[0].core.handle_frame(0, s.ports[0][0], udp(1514, 1));
    s.machines[1].core.handle_frame(10 * US, s.ports[1][1], udp(200, 2));
    s.run_until(20 * MS);
    // Full-size frames cross in two datagrams and are made whole.
    assert_eq!(s.delivered[1], vec![(5 * MS, 1)]);
    assert_eq!(s.delivered[0], vec![(10 * US + 2 * MS, 2)]);
    // Each direction is counted once, by the machine that carries it out: the sums of
    // both machines' counters are the link's.
    let fwd: Vec<_> = (0..2).map(|m| s.machines[m].stats(Target::Link(0), 0)).collect();
    assert_eq!((fwd[0].rx_frames, fwd[0].tx_frames, fwd[1].rx_frames, fwd[1].tx_frames), (1, 1, 0, 0));
    let rev: Vec<_> = (0..2).map(|m| s.machines[m].stats(Target::Link(0), 1)).collect();
    assert_eq!((rev[0].rx_frames, rev[0].tx_frames, rev[1].rx_frames, rev[1].tx_frames), (0, 0, 1, 1));
    // A cross-machine link never takes the kernel path.
    assert!(s.machines.iter().all(|m| m.events.iter().all(|e| !matches!(e, Event::Path { .. }))));
}

#[test]
fn frames_the_underlay_loses_are_counted_for_the_direction_they_were_going() {
    let mut s = Split::new(delay(MS), imp(), 100 * US);
    s.underlay_drops = vec![1, 2];
    for i in 0..5u32 {
        s.machines[0].core.handle_frame(u64::from(i) * 10 * US, s.ports[0][0], udp(300, i));
    }
    s.run_until(10 * MS);
    let got: Vec<u32> = s.delivered[1].iter().map(|d| d.1).collect();
    assert_eq!(got, [0, 3, 4]);
    // Counted by the receiving machine, for the direction from the far side (forward);
    // the model dropped nothing.
    assert_eq!(s.machines[1].stats(Target::Link(0), 0).underlay_lost, 2);
    assert_eq!(s.machines[1].stats(Target::Link(0), 1).underlay_lost, 0);
    assert_eq!(s.machines[0].stats(Target::Link(0), 0).drop_loss, 0);
}

#[test]
fn a_set_delay_below_the_underlay_transit_arrives_at_the_transit() {
    let mut s = Split::new(delay(100 * US), imp(), 300 * US);
    s.machines[0].core.handle_frame(MS, s.ports[0][0], udp(100, 7));
    s.run_until(5 * MS);
    assert_eq!(s.delivered[1], vec![(MS + 300 * US, 7)]);
}

#[test]
fn rate_and_loss_of_a_cross_machine_link_are_the_senders() {
    // 10 Mbit/s: a 1250-byte frame takes 1 ms on the wire; every other frame lost.
    let lossy = Impairments { rate_bps: Some(10_000_000), loss: Loss::Bernoulli { rate: 0.5, correlation: 0.0 }, ..imp() };
    let mut s = Split::new(lossy, imp(), 200 * US);
    for i in 0..200 {
        s.machines[0].core.handle_frame(0, s.ports[0][0], udp(1250, i));
    }
    s.run_until(1000 * MS);
    let got = &s.delivered[1];
    assert!((80..=120).contains(&got.len()), "{}", got.len());
    // Frames that survive keep the wire's spacing: at least 1 ms apart, in order.
    assert!(got.windows(2).all(|w| w[1].0 - w[0].0 >= MS && w[1].1 > w[0].1), "{got:?}");
    let st = s.machines[0].stats(Target::Link(0), 0);
    assert_eq!(st.drop_loss + st.tx_frames, 200);
    assert_eq!(st.tx_frames as usize, got.len());
}

#[test]
fn captures_on_the_receiving_machine_see_frames_from_the_other() {
    let mut s = Split::new(delay(MS), imp(), 100 * US);
    s.machines[1].apply(Command::Capture { id: 9, target: Target::Link(0), side: 1, iface: 0, point: CapturePoint::After });
    s.machines[0].core.handle_frame(0, s.ports[0][0], udp(300, 3));
    s.run_until(5 * MS);
    s.machines[1].drain_events();
    let caps: Vec<u64> = s.machines[1].events.iter().filter_map(|e| match e { Event::Capture { capture: 9, t_ns, outgoing: false, .. } => Some(*t_ns), _ => None }).collect();
    assert_eq!(caps, vec![MS]);
    assert_eq!(s.delivered[1].len(), 1);
}

#[test]
fn a_lan_member_on_another_machine_has_its_egress_there_and_its_ingress_at_the_switch() {
    // The LAN's machine (the switch) holds members 0 and 1; member 2 is on another
    // machine, reached over an underlay of 100 us one way. There, the member's port is a
    // link whose forward direction is its egress and whose far side is the switch.
    let t = 100 * US;
    let mut owner = Core::new();
    let members = vec![
        MemberConfig { vlan: 1, ingress: delay(MS), seeds: [1, 2], ..Default::default() },
        MemberConfig { vlan: 1, seeds: [3, 4], ..Default::default() },
        MemberConfig { vlan: 1, egress: delay(2 * MS), ingress: delay(MS), seeds: [5, 6], remote: Some(t), ..Default::default() },
    ];
    let p = owner.add_segment(SegmentConfig { members, aging_ns: 300_000 * MS, kernel_path: true, ..Default::default() });
    let mut owner = Sim::new(owner);
    let mut far = Core::new();
    let [node, tunnel] = far.add_link(LinkConfig { forward: delay(2 * MS), reverse: delay(MS), seeds: [5, 6], mtu: 1500, kernel_path: false, kernel_shaper: false, remote: Some((1, t)) , spur: None });
    let mut far = Sim::new(far);
    // Member 2's node broadcasts at 0: its egress (2 ms) runs on its machine, which sends
    // the frame early by the underlay's delay, so that it reaches the switch at 2 ms.
    far.send(0, node, eth([0xff; 6], mac(3), 100, 1));
    far.run_until(5 * MS);
    let (left, port, frame) = far.out.remove(0);
    assert_eq!((left, port), (2 * MS - t, tunnel));
    owner.core.handle_delivered(left + t, p[2], frame.to_vec());
    owner.now = left + t;
    owner.run_until(10 * MS);
    let got: Vec<(u64, PortId, u32)> = owner.out.drain(..).map(|(at, port, f)| (at, port, seq_of(&f))).collect();
    assert_eq!(got, vec![(2 * MS, p[1], 1), (3 * MS, p[0], 1)]);
    // Member 0 broadcasts at 10 ms: member 2's ingress (1 ms) runs at the switch, whose
    // machine sends early by the underlay's delay; the far machine delivers on arrival.
    owner.send(10 * MS, p[0], eth([0xff; 6], mac(1), 100, 2));
    owner.run_until(20 * MS);
    let got: Vec<(u64, PortId, u32)> = owner.out.drain(..).map(|(at, port, f)| (at, port, seq_of(&f))).collect();
    assert_eq!(got, vec![(10 * MS, p[1], 2), (11 * MS - t, p[2], 2)]);
    // Each direction counted once, where it is carried out; no kernel path for a LAN
    // that spans machines.
    assert_eq!((owner.stats(Target::Member(0, 2), 0).tx_frames, far.stats(Target::Link(0), 0).tx_frames), (0, 1));
    assert_eq!(owner.stats(Target::Member(0, 2), 1).tx_frames, 1);
    assert!(owner.events.iter().all(|e| !matches!(e, Event::Path { .. })));
    // The measured transit is the new lead.
    owner.core.set_transit(p[2], 40 * US);
    owner.send(30 * MS, p[1], eth([0xff; 6], mac(2), 100, 3));
    owner.run_until(40 * MS);
    assert_eq!(owner.out.iter().find(|o| o.1 == p[2]).map(|o| o.0), Some(31 * MS - 40 * US));
    assert_eq!(owner.stats(Target::Member(0, 2), 1).transit_ns, 40 * US);
}

/// A segment whose switch (or channel) is on one machine (`owner`, members 0 and 1) and
/// whose members 2 and 3 are on another (`far`), joined by a trunk: there, each of them is
/// a link (forward = egress toward the switch, reverse = ingress) and the trunk's far end
/// hands copies to the reverse directions it names.
struct Trunked {
    owner: Sim,
    far: Sim,
    ports: Vec<PortId>,
    trunk: PortId,
    trunk_in: PortId,
    /// On the far machine: each remote member's node port and tunnel port.
    nodes: [[PortId; 2]; 2],
}

impl Trunked {
    fn new(ingress: [Impairments; 2], radio: Option<(MediumConfig, Vec<Pos>)>, transit: u64) -> Trunked {
        Trunked::with(ingress, imp(), radio, transit, None)
    }

    /// ... with `egress` on the far members and, with `spur`, unicast between them
    /// switched on their machine.
    fn with(ingress: [Impairments; 2], egress: Impairments, radio: Option<(MediumConfig, Vec<Pos>)>, transit: u64, spur: Option<Spur>) -> Trunked {
        let mut owner = Core::new();
        let members = (0..4).map(|i| MemberConfig { vlan: 1, seeds: [2 * i, 2 * i + 1], remote: (i >= 2).then_some(transit), ..Default::default() }).collect();
        let ports = owner.add_segment(SegmentConfig { members, aging_ns: 300_000 * MS, radio, far_switching: spur.is_some(), ..Default::default() });
        let trunk = owner.add_trunk(0, &[2, 3]);
        owner.set_transit(trunk, transit);
        let mut far = Core::new();
        let [i2, i3] = ingress;
        let n2 = far.add_link(LinkConfig { forward: egress.clone(), reverse: i2, seeds: [5, 6], mtu: 1500, kernel_path: false, kernel_shaper: false, remote: Some((1, transit)), spur });
        let n3 = far.add_link(LinkConfig { forward: egress, reverse: i3, seeds: [7, 8], mtu: 1500, kernel_path: false, kernel_shaper: false, remote: Some((1, transit)), spur });
        let trunk_in = far.add_trunk_in(&[(2, 0), (3, 1)]);
        Trunked { owner: Sim::new(owner), far: Sim::new(far), ports, trunk, trunk_in, nodes: [n2, n3] }
    }

    /// Run the owner to `t`; what it hands out for the trunk crosses (arriving after the
    /// transit) and the far machine runs to `t` too. Returns the owner's other writes.
    fn run_until(&mut self, t: u64, transit: u64) -> (Vec<(u64, PortId, u32)>, usize) {
        self.owner.run_until(t);
        let mut local = Vec::new();
        let mut copies = 0;
        for (at, port, frame) in self.owner.out.drain(..) {
            if port == self.trunk {
                copies += 1;
                self.far.run_until(at + transit);
                self.far.core.handle_delivered(at + transit, self.trunk_in, frame.to_vec());
            } else {
                local.push((at, port, seq_of(&frame)));
            }
        }
        self.far.run_until(t);
        (local, copies)
    }

    fn far_out(&mut self) -> Vec<(u64, PortId, u32)> {
        self.far.out.drain(..).map(|(at, port, f)| (at, port, seq_of(&f))).collect()
    }
}

#[test]
fn a_flooded_frame_crosses_to_another_machine_once_and_each_member_there_has_its_own_ingress() {
    let t = 100 * US;
    let mut s = Trunked::new([delay(MS), delay(3 * MS)], None, t);
    s.owner.send(0, s.ports[0], eth([0xff; 6], mac(1), 100, 7));
    let (local, copies) = s.run_until(10 * MS, t);
    assert_eq!(local, vec![(0, s.ports[1], 7)]);
    // One copy for both members of the far machine, leaving early by the transit; each
    // member's ingress (1 ms, 3 ms) runs there, from the frame's time at the switch.
    assert_eq!(copies, 1);
    assert_eq!(s.far_out(), vec![(MS, s.nodes[0][0], 7), (3 * MS, s.nodes[1][0], 7)]);
    // Counted once: the far machine's reverse directions, not the owner's ingress.
    assert_eq!((s.far.stats(Target::Link(0), 1).tx_frames, s.owner.stats(Target::Member(0, 2), 1).tx_frames), (1, 0));
    // A unicast to member 3 (learnt) goes to it alone, still through the trunk.
    s.far.send(10 * MS, s.nodes[1][0], eth(mac(1), mac(4), 100, 8));
    s.far.run_until(11 * MS);
    let (at, _, f) = s.far.out.remove(0);
    s.owner.core.handle_delivered(at + t, s.ports[3], f.to_vec());
    s.owner.now = at + t;
    let (local, _) = s.run_until(12 * MS, t);
    // (No egress delay to hide the underlay's: it arrives after the transit.)
    assert_eq!(local, vec![(10 * MS + t, s.ports[0], 8)]);
    s.owner.send(20 * MS, s.ports[0], eth(mac(4), mac(1), 100, 9));
    let (local, copies) = s.run_until(30 * MS, t);
    assert!(local.is_empty() && copies == 1);
    assert_eq!(s.far_out(), vec![(23 * MS, s.nodes[1][0], 9)]);
    // A copy naming nobody, or cut short, is dropped whole.
    for bad in [eth([0xff; 6], mac(1), 100, 1), vec![0xff; 3]] {
        s.far.core.handle_delivered(40 * MS, s.trunk_in, bad);
    }
    s.far.run_until(50 * MS);
    assert!(s.far_out().is_empty());
}

#[test]
fn members_on_another_machine_are_switched_among_themselves_there() {
    let t = 100 * US;
    let spur = Spur { segment: 0, vlan: 1, aging_ns: 50 * MS };
    let mut s = Trunked::with([delay(MS), delay(MS)], delay(2 * MS), None, t, Some(spur));
    let to_owner = |s: &mut Trunked| -> Vec<(u64, PortId, Vec<u8>)> {
        let tunnels = [s.nodes[0][1], s.nodes[1][1]];
        let (sent, rest): (Vec<_>, Vec<_>) = s.far.out.drain(..).partition(|o| tunnels.contains(&o.1));
        s.far.out = rest;
        sent.into_iter().map(|(at, port, f)| (at, port, f.to_vec())).collect()
    };
    let seqs = |v: &[(u64, PortId, Vec<u8>)]| v.iter().map(|o| seq_of(&o.2)).collect::<Vec<_>>();
    // Member 2 (MAC 3) broadcasts: member 3, on the same machine, gets it there (2 ms of
    // egress to the switch's time, 1 ms of ingress); the switch gets it early by the
    // underlay's delay, hands it to members 0 and 1, and sends nothing back.
    s.far.send(0, s.nodes[0][0], eth([0xff; 6], mac(3), 100, 1));
    s.far.run_until(2 * MS - t);
    let sent = to_owner(&mut s);
    assert_eq!(sent.iter().map(|o| (o.0, o.1, seq_of(&o.2))).collect::<Vec<_>>(), vec![(2 * MS - t, s.nodes[0][1], 1)]);
    s.owner.core.handle_delivered(2 * MS, s.ports[2], sent[0].2.clone());
    s.owner.now = 2 * MS;
    let (local, copies) = s.run_until(10 * MS, t);
    assert_eq!((local, copies), (vec![(2 * MS, s.ports[0], 1), (2 * MS, s.ports[1], 1)], 0));
    assert_eq!(s.far_out(), vec![(3 * MS, s.nodes[1][0], 1)]);
    // Counted once each way: member 2's egress (its copy to the switch), member 3's ingress.
    assert_eq!((s.far.stats(Target::Link(0), 0).tx_frames, s.far.stats(Target::Link(1), 1).tx_frames), (1, 1));
    // Member 3 answers member 2: switched there; nothing to the switch.
    s.far.send(10 * MS, s.nodes[1][0], eth(mac(3), mac(4), 100, 2));
    s.far.run_until(20 * MS);
    assert!(to_owner(&mut s).is_empty());
    assert_eq!(s.far_out(), vec![(13 * MS, s.nodes[0][0], 2)]);
    assert_eq!((s.far.stats(Target::Link(1), 0).tx_frames, s.far.stats(Target::Link(0), 1).tx_frames), (1, 1));
    // And back, to MAC 4, learnt from the answer.
    s.far.send(20 * MS, s.nodes[0][0], eth(mac(4), mac(3), 100, 3));
    s.far.run_until(30 * MS);
    assert!(to_owner(&mut s).is_empty());
    assert_eq!(s.far_out(), vec![(23 * MS, s.nodes[1][0], 3)]);
    // To an unknown address (MAC 1, member 0's): member 3 and the switch, which floods
    // it to its own machine's members only (member 0 has not sent yet).
    s.far.send(30 * MS, s.nodes[0][0], eth(mac(1), mac(3), 100, 4));
    s.far.run_until(32 * MS - t);
    let sent = to_owner(&mut s);
    assert_eq!(seqs(&sent), vec![4]);
    s.owner.core.handle_delivered(32 * MS, s.ports[2], sent[0].2.clone());
    s.owner.now = 32 * MS;
    let (local, copies) = s.run_until(34 * MS, t);
    assert_eq!((local, copies), (vec![(32 * MS, s.ports[0], 4), (32 * MS, s.ports[1], 4)], 0));
    assert_eq!(s.far_out(), vec![(33 * MS, s.nodes[1][0], 4)]);
    // Member 0 answers: through the trunk to member 2; its machine learns MAC 1 is
    // elsewhere, and the next frame to it goes to the switch alone.
    s.owner.send(40 * MS, s.ports[0], eth(mac(3), mac(1), 100, 5));
    let (_, copies) = s.run_until(41 * MS, t);
    assert_eq!(copies, 1);
    assert_eq!(s.far_out(), vec![(41 * MS, s.nodes[0][0], 5)]);
    s.far.send(42 * MS, s.nodes[0][0], eth(mac(1), mac(3), 100, 6));
    s.far.run_until(45 * MS);
    assert_eq!(seqs(&to_owner(&mut s)), vec![6]);
    assert!(s.far_out().is_empty(), "not flooded to member 3");
    // Multicast goes to the switch alone (its snooping decides), which sends it back to
    // this machine's members too.
    s.far.send(50 * MS, s.nodes[0][0], eth([0x01, 0, 0x5e, 0, 0, 9], mac(3), 100, 7));
    s.far.run_until(52 * MS - t);
    let sent = to_owner(&mut s);
    assert_eq!(seqs(&sent), vec![7]);
    assert!(s.far_out().is_empty());
    s.owner.core.handle_delivered(52 * MS, s.ports[2], sent[0].2.clone());
    s.owner.now = 52 * MS;
    let (_, copies) = s.run_until(54 * MS, t);
    assert_eq!(copies, 1);
    assert_eq!(s.far_out(), vec![(53 * MS, s.nodes[1][0], 7)]);
    // ... and that copy (from MAC 3, which member 2 sent from lately) does not make MAC 3
    // "elsewhere": member 3 to MAC 3 stays on this machine.
    s.far.send(60 * MS, s.nodes[1][0], eth(mac(3), mac(4), 100, 8));
    s.far.run_until(70 * MS);
    assert!(to_owner(&mut s).is_empty());
    assert_eq!(s.far_out(), vec![(63 * MS, s.nodes[0][0], 8)]);
    // The switch hands member 2 a frame from MAC 4 (it moved to member 0): elsewhere now.
    s.owner.send(70 * MS, s.ports[0], eth([0xff; 6], mac(4), 100, 9));
    let (_, copies) = s.run_until(80 * MS, t);
    assert_eq!(copies, 1);
    s.far_out();
    s.far.send(80 * MS, s.nodes[0][0], eth(mac(4), mac(3), 100, 10));
    s.far.run_until(85 * MS);
    assert_eq!(seqs(&to_owner(&mut s)), vec![10]);
    assert!(s.far_out().is_empty());
    // An address not heard from for the aging time is unknown again: flooded.
    s.far.send(200 * MS, s.nodes[1][0], eth(mac(3), mac(4), 100, 11));
    s.far.run_until(210 * MS);
    assert_eq!(seqs(&to_owner(&mut s)), vec![11]);
    assert_eq!(s.far_out(), vec![(203 * MS, s.nodes[0][0], 11)]);
}

/// A member sending from ever new source addresses does not grow its machine's table
/// without end: past the bound new addresses are not learnt, and frames to them go
/// everywhere (the other members there and the segment's switch), as on a full switch.
#[test]
fn members_on_another_machine_learn_a_bounded_number_of_addresses() {
    let t = 100 * US;
    let spur = Spur { segment: 0, vlan: 1, aging_ns: 300_000 * MS };
    let mut s = Trunked::with([imp(), imp()], imp(), None, t, Some(spur));
    for i in 0..(vemu_switch::DEFAULT_MAX_LEARNED as u32 + 100) {
        let src = [0x02, 0x10, (i >> 16) as u8, (i >> 8) as u8, i as u8, 1];
        s.far.send(u64::from(i) * US, s.nodes[0][0], eth([0xff; 6], src, 64, i));
    }
    s.far.run_until(20 * MS);
    s.far.out.clear();
    // MAC 4 (member 3) comes too late to be learnt: a frame to it floods.
    s.far.send(30 * MS, s.nodes[1][0], eth([0xff; 6], mac(4), 64, 1));
    s.far.send(31 * MS, s.nodes[0][0], eth(mac(4), mac(3), 64, 2));
    s.far.run_until(40 * MS);
    let to_2: Vec<u32> = s.far.out.iter().filter(|o| o.1 == s.nodes[0][1] || o.1 == s.nodes[1][0]).map(|o| seq_of(&o.2)).collect();
    assert_eq!(to_2, vec![2, 2], "to the switch and to member 3 alike: {:?}", s.far.out.iter().map(|o| (o.1, seq_of(&o.2))).collect::<Vec<_>>());
}

#[test]
fn a_radio_transmission_reaches_the_far_machines_receivers_in_one_copy_at_their_own_times() {
    let t = 50 * US;
    let cfg = MediumConfig { model: Model::UnitDisk { range_m: 2000.0 }, radio: Radio::default(), rate_bps: 54_000_000, preamble_ns: 0, carrier_sense_m: 2000.0, csma: false, queue_frames: 100, seed: 3 };
    // Members 2 and 3 at 300 m and 1500 m from member 0: 1 us and 5 us of propagation.
    let pos = vec![Pos::new(0.0, 0.0), Pos::new(3000.0, 0.0), Pos::new(299.792458, 0.0), Pos::new(1498.96229, 0.0)];
    // (Ingress delays longer than the underlay's, which they hide.)
    let mut s = Trunked::new([delay(MS), delay(MS)], Some((cfg, pos)), t);
    s.owner.send(0, s.ports[0], eth([0xff; 6], mac(1), 100, 5));
    let (local, copies) = s.run_until(10 * MS, t);
    assert!(local.is_empty(), "member 1 is out of range: {local:?}");
    assert_eq!(copies, 1);
    let got = s.far_out();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!((got[0].1, got[1].1), (s.nodes[0][0], s.nodes[1][0]));
    assert_eq!(got[1].0 - got[0].0, 4 * US, "each receiver at its own propagation delay: {got:?}");
}

/// A UDP/IPv4 frame from host 1 to host 2 with `dscp`, `len` Ethernet bytes, carrying
/// `seq` in its payload (read by [`qos_seq`]).
fn ipv4_dscp(dscp: u8, len: usize, seq: u32) -> Vec<u8> {
    let mut f = vec![0u8; VNET_HDR_LEN];
    f.extend_from_slice(&mac(2));
    f.extend_from_slice(&mac(1));
    f.extend_from_slice(&[0x08, 0x00]);
    let ip_len = (len - 14) as u16;
    let mut ip = vec![0x45, dscp << 2, (ip_len >> 8) as u8, ip_len as u8, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
    let sum = ones_complement(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[0x13, 0x88, 0x13, 0x89, 0, 0, 0, 0]);
    f.extend_from_slice(&seq.to_be_bytes());
    f.resize(VNET_HDR_LEN + len, 0);
    f
}

fn ones_complement(h: &[u8]) -> u16 {
    let mut s: u32 = h.chunks(2).map(|c| u16::from_be_bytes([c[0], c[1]]) as u32).sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

fn qos_seq(f: &[u8]) -> u32 {
    u32::from_be_bytes(f[VNET_HDR_LEN + 42..VNET_HDR_LEN + 46].try_into().unwrap())
}

fn dscp_of(f: &[u8]) -> u8 {
    f[VNET_HDR_LEN + 15] >> 2
}

#[test]
fn qos_ef_overtakes_a_best_effort_backlog_and_classes_are_counted() {
    let fwd = Impairments { rate_bps: Some(10_000_000), delay_ns: MS, qos: Some(vemu_link::QosConfig::Diffserv), ..imp() };
    let (mut s, a, b) = link(fwd, imp());
    for i in 0..20 {
        s.send(0, a, ipv4_dscp(0, 1250, i));
    }
    // EF in the middle of frame 0's serialization (1 ms a frame at 10 Mbit/s).
    s.send(MS / 2, a, ipv4_dscp(46, 125, 100));
    s.finish();
    let got: Vec<(u64, u32)> = s.out.iter().filter(|o| o.1 == b).map(|o| (o.0, qos_seq(&o.2))).collect();
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
    assert_eq!(vemu_engine::bucket_quantile_ns(&ef.wait_hist, 1.0), Some(500 * US));
    assert_eq!(vemu_engine::bucket_quantile_ns(&be.wait_hist, 1.0), Some(20 * MS));
    assert_eq!((st.tx_frames, st.queue_frames), (21, 0));
    // The reverse direction has no classes.
    assert!(s.stats(Target::Link(0), 1).classes.is_empty());
}

#[test]
fn qos_meter_remarks_and_polices_on_a_lan_port() {
    use vemu_qos::stage::{ClassConfig, ColorAction, MeterConfig, MeterKind, QosConfig};
    // Member 1's ingress: 16 kbit/s committed (2000 B/s), 1000-byte buckets; the excess re-marked AF12, then dropped.
    let meter = MeterConfig { kind: MeterKind::Srtcm { cir_bps: 16_000, cbs_bytes: 1000, ebs_bytes: 1000 }, color_aware: false, green: ColorAction::Pass, yellow: ColorAction::Mark(12), red: ColorAction::Drop };
    let class = ClassConfig { name: "all".into(), rules: vec![], priority: 0, weight: 1, meter: Some(meter), set_dscp: None, red: None, limit: None };
    let ingress = Impairments { qos: Some(QosConfig::Classes { classes: vec![class] }), ..imp() };
    let (mut s, p) = lan(vec![(1, imp(), imp()), (1, imp(), ingress)], None, 300_000 * MS);
    for i in 0..3 {
        s.send(i * US, p[0], ipv4_dscp(10, 1000, i as u32));
    }
    s.finish();
    let got: Vec<(u32, u8)> = s.out.iter().filter(|o| o.1 == p[1]).map(|o| (qos_seq(&o.2), dscp_of(&o.2))).collect();
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
    let diffserv = ImpairmentsPatch { qos: Some(Some(vemu_link::QosConfig::Diffserv)), ..Default::default() };
    s.apply(Command::Patch { target: Target::Link(0), dir: 0, patch: diffserv });
    // 8 ms a frame: 0 on the wire, then EF (9) overtakes 1..=5.
    for i in 0..6 {
        s.send(0, a, ipv4_dscp(0, 1000, i));
    }
    s.send(MS, a, ipv4_dscp(46, 1000, 9));
    s.run_until(10 * MS);
    assert_eq!(s.stats(Target::Link(0), 0).queue_frames, 5);
    // Back to a FIFO while 1..=5 wait: they follow EF in the order they came.
    s.apply(Command::Patch { target: Target::Link(0), dir: 0, patch: ImpairmentsPatch { qos: Some(None), ..Default::default() } });
    s.finish();
    let got: Vec<(u64, u32)> = s.out.iter().filter(|o| o.1 == b).map(|o| (o.0, qos_seq(&o.2))).collect();
    assert_eq!(got, [(8 * MS, 0), (16 * MS, 9), (24 * MS, 1), (32 * MS, 2), (40 * MS, 3), (48 * MS, 4), (56 * MS, 5)]);
    let st = s.stats(Target::Link(0), 0);
    assert!(st.classes.is_empty());
    assert_eq!((st.tx_frames, st.drop_queue), (7, 0));
}

#[test]
fn a_frame_from_another_machine_counts_its_wait_between_arrival_and_write() {
    // The far machine carried out the direction; this one hands the frame to the node
    // on arrival. An engine that writes it 3 ms after it arrived shows that wait in the
    // direction's arrival histogram (which the far machine cannot see); one on time, 0.
    let mut c = Core::new();
    let [node, tunnel] = c.add_link(LinkConfig { forward: delay(MS), reverse: delay(MS), seeds: [1, 2], mtu: 1500, kernel_path: false, kernel_shaper: false, remote: Some((1, 50 * US)) , spur: None });
    c.handle_delivered(5 * MS, node, eth(mac(1), mac(2), 100, 1));
    assert!(c.poll_transmit(5 * MS - 1).is_none());
    let tx = c.poll_transmit(8 * MS).expect("due since its arrival");
    assert_eq!((tx.port, seq_of(&tx.frame)), (node, 1));
    c.handle_delivered(9 * MS, node, eth(mac(1), mac(2), 100, 2));
    assert_eq!(c.poll_transmit(9 * MS).map(|t| t.port), Some(node));
    let toward_node = c.counters(Target::Link(0))[1].snapshot();
    let bucket = |ns: u64| vemu_engine::DELAY_BUCKETS_NS.iter().position(|&b| ns <= b).unwrap();
    let mut want = vec![0; vemu_engine::DELAY_BUCKETS_NS.len() + 1];
    want[bucket(3 * MS)] = 1;
    want[bucket(0)] = 1;
    assert_eq!((toward_node.arrival_wait_hist, toward_node.arrival_wait_max_ns), (want, 3 * MS));
    // Nothing of it on the direction this machine carries out (toward the tunnel), and
    // the frames are not counted as this machine's.
    let toward_far = c.counters(Target::Link(0))[0].snapshot();
    assert!(toward_far.arrival_wait_hist.is_empty() && toward_node.tx_frames == 0 && toward_node.late_hist.iter().sum::<u64>() == 0);
    let _ = tunnel;
}

#[test]
fn a_link_to_another_machine_puts_only_its_direction_from_here_on_the_kernel_path() {
    // Side a here, side b on another machine (its port here is the tunnel's), with the
    // kernel's tunnel: the direction a -> b needs no emulation, so it goes by the kernel;
    // b -> a is the other machine's to decide and never gets a path here.
    let mut c = Core::new();
    let [node, tunnel] = c.add_link(LinkConfig { forward: imp(), reverse: delay(MS), seeds: [1, 2], mtu: 1500, kernel_path: true, kernel_shaper: true, remote: Some((1, 50 * US)) , spur: None });
    let mut s = Sim::new(c);
    s.drain_events();
    assert_eq!(full_paths(&s), vec![(node, Path::Kernel)]);
    // (Its counters say "kernel" once the driver sends it there: when the underlay's
    // path carries its frames whole.)
    assert!(!s.stats(Target::Link(0), 0).kernel_path && !s.stats(Target::Link(0), 1).kernel_path);
    s.core.set_kernel_carried(node, true);
    assert!(s.stats(Target::Link(0), 0).kernel_path && !s.stats(Target::Link(0), 1).kernel_path);
    // A rate: the engine's (the kernel's token bucket is not on the way to another
    // machine); taken off: the kernel's again.
    s.apply(Command::Patch { target: Target::Link(0), dir: 0, patch: ImpairmentsPatch { rate_bps: Some(Some(80_000_000)), ..Default::default() } });
    s.apply(Command::Patch { target: Target::Link(0), dir: 0, patch: ImpairmentsPatch { rate_bps: Some(None), ..Default::default() } });
    assert_eq!(full_paths(&s), vec![(node, Path::Kernel), (node, Path::Engine), (node, Path::Kernel)]);
    // A capture of the far end (what arrives at b is recorded on b's machine; here it
    // only keeps a -> b off the kernel path, and records nothing arriving there).
    s.apply(Command::Capture { id: 7, target: Target::Link(0), side: 1, iface: 0, point: CapturePoint::After });
    assert_eq!(full_paths(&s).last(), Some(&(node, Path::Engine)));
    s.send(MS, node, eth(mac(2), mac(1), 100, 1));
    s.run_until(3 * MS);
    assert_eq!(s.out.iter().map(|o| o.1).collect::<Vec<_>>(), vec![tunnel]);
    assert!(!s.events.iter().any(|e| matches!(e, Event::Capture { outgoing: false, .. })), "{:?}", s.events);
    s.apply(Command::Uncapture(7));
    assert_eq!(full_paths(&s).last(), Some(&(node, Path::Kernel)));
    assert!(full_paths(&s).iter().all(|&(p, _)| p == node));
}
