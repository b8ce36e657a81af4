//! The data-path core on a virtual clock (the way quinn-proto's `Pair` tests its
//! protocol): frames are handed in at chosen nanoseconds, time jumps straight to each
//! deadline the core names, and every delivery is asserted to the nanosecond. Nothing
//! here reads a clock or touches a device, so these tests run in milliseconds and
//! cannot flake.

use std::sync::Arc;

use vemu_core::gso::{VnetHdr, VNET_HDR_LEN};
use vemu_core::{
    Applied, CapturePoint, Command, Core, DropReason, Event, Frame, LinkConfig, MemberConfig, Path,
    PortId, SegmentConfig, Shape, Spur, Target,
};
use vemu_link::{
    Chance, Distribution, Impairments, ImpairmentsPatch, Jitter, Loss, QueueLimit, Reorder, Shaper,
};
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

    fn stats(&self, target: Target, dir: usize) -> vemu_core::counters::DirStats {
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
    VnetHdr { flags: 1, gso_type: 1, hdr_len: 54, gso_size: mss, csum_start: 34, csum_offset: 16 }
        .write(&mut p);
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

fn link_seeded(
    forward: Impairments,
    reverse: Impairments,
    seeds: [u64; 2],
) -> (Sim, PortId, PortId) {
    let mut core = Core::new();
    let [a, b] = core.add_link(LinkConfig {
        forward,
        reverse,
        seeds,
        mtu: 0,
        kernel_path: false,
        kernel_shaper: false,
        remote: None,
        spur: None,
    });
    (Sim::new(core), a, b)
}

/// A LAN of `n` members with the given per-member (egress, ingress) impairments.
fn lan(
    members: Vec<(u16, Impairments, Impairments)>,
    capacity_bps: Option<u64>,
    aging_ns: u64,
) -> (Sim, Vec<PortId>) {
    let mut core = Core::new();
    let members = members
        .into_iter()
        .enumerate()
        .map(|(i, (vlan, egress, ingress))| MemberConfig {
            vlan,
            egress,
            ingress,
            seeds: [2 * i as u64, 2 * i as u64 + 1],
            mtu: 0,
            mac: None,
            remote: None,
        })
        .collect();
    let ports = core.add_segment(SegmentConfig {
        members,
        capacity_bps,
        aging_ns,
        radio: None,
        ..Default::default()
    });
    (Sim::new(core), ports)
}

fn plain_lan(n: usize) -> (Sim, Vec<PortId>) {
    lan((0..n).map(|_| (1, imp(), imp())).collect(), None, 300_000 * MS)
}

/// A wireless segment with a unit-disk radio of 250 m at the given positions.
fn radio(positions: &[(f64, f64)], csma: bool, rate_bps: u64) -> (Sim, Vec<PortId>) {
    radio_with(positions, Model::UnitDisk { range_m: 250.0 }, csma, rate_bps, 7, 250.0)
}

/// Three members in a row: 0 and 2 cannot sense each other (400 m, carrier sense
/// 250 m); 1 hears both (CSMA, 1 Mbit/s).
fn hidden_terminals() -> (Sim, Vec<PortId>) {
    radio_with(
        &[(0.0, 0.0), (200.0, 0.0), (400.0, 0.0)],
        Model::UnitDisk { range_m: 250.0 },
        true,
        1_000_000,
        3,
        250.0,
    )
}

fn radio_with(
    positions: &[(f64, f64)],
    model: Model,
    csma: bool,
    rate_bps: u64,
    seed: u64,
    carrier_sense_m: f64,
) -> (Sim, Vec<PortId>) {
    let mut core = Core::new();
    let cfg = MediumConfig {
        model,
        radio: Radio::default(),
        rate_bps,
        preamble_ns: 0,
        carrier_sense_m,
        csma,
        queue_frames: 1000,
        seed,
        dcf: None,
        city: None,
        hub: None,
    };
    let pos: Vec<Pos> = positions.iter().map(|&(x, y)| Pos::new(x, y)).collect();
    let members = (0..positions.len())
        .map(|i| MemberConfig { vlan: 1, seeds: [i as u64, 100 + i as u64], ..Default::default() })
        .collect();
    let ports = core.add_segment(SegmentConfig {
        members,
        capacity_bps: None,
        aging_ns: 300_000 * MS,
        radio: Some((cfg, pos)),
        ..Default::default()
    });
    (Sim::new(core), ports)
}

fn captures(s: &Sim) -> Vec<(u64, u32, u64, bool, u32)> {
    s.events
        .iter()
        .filter_map(|e| match e {
            Event::Capture { capture, iface, t_ns, outgoing, frame, drop: None } => {
                Some((*capture, *iface, *t_ns, *outgoing, seq_of(frame)))
            }
            _ => None,
        })
        .collect()
}

/// The drops captured: (capture, iface, outgoing, frame's sequence number, reason).
fn dropped(s: &Sim) -> Vec<(u64, u32, bool, u32, DropReason)> {
    s.events
        .iter()
        .filter_map(|e| match e {
            Event::Capture { capture, iface, outgoing, frame, drop: Some(why), .. } => {
                Some((*capture, *iface, *outgoing, seq_of(frame), *why))
            }
            _ => None,
        })
        .collect()
}

/// An IPv4 frame from host `src` to group address `dst` (IP protocol `proto`).
fn ip4_group(src: u8, dst: [u8; 4], proto: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; VNET_HDR_LEN];
    f.extend_from_slice(&[0x01, 0x00, 0x5e, dst[1] & 0x7f, dst[2], dst[3]]);
    f.extend_from_slice(&mac(src));
    f.extend_from_slice(&[
        0x08,
        0x00,
        0x45,
        0,
        0,
        (20 + payload.len()) as u8,
        0,
        0,
        0,
        0,
        1,
        proto,
        0,
        0,
        10,
        0,
        0,
        src,
    ]);
    f.extend_from_slice(&dst);
    f.extend_from_slice(payload);
    f
}

/// The paths the core asked for so far, as (port, in the kernel) in order.
fn paths(s: &Sim) -> Vec<(PortId, bool)> {
    full_paths(s).into_iter().map(|(p, path)| (p, path.in_kernel())).collect()
}

fn full_paths(s: &Sim) -> Vec<(PortId, Path)> {
    s.events
        .iter()
        .filter_map(
            |e| if let Event::Path { port, path } = e { Some((*port, *path)) } else { None },
        )
        .collect()
}

fn kernel_link(forward: Impairments, reverse: Impairments) -> (Sim, PortId, PortId) {
    let mut core = Core::new();
    let [a, b] = core.add_link(LinkConfig {
        forward,
        reverse,
        seeds: [1, 2],
        mtu: 1500,
        kernel_path: true,
        kernel_shaper: true,
        remote: None,
        spur: None,
    });
    let mut s = Sim::new(core);
    s.drain_events();
    (s, a, b)
}

/// A small deterministic generator for hostile frames.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// A LAN whose ports the kernel can switch (a bridge in the plane), with `impaired`
/// given to member 0's ingress; the paths asked for at the start drained.
fn kernel_lan(
    n: usize,
    capacity_bps: Option<u64>,
    snooping: vemu_switch::Snooping,
    impaired: Impairments,
) -> (Sim, Vec<PortId>, Vec<(PortId, bool)>) {
    let mut core = Core::new();
    let members = (0..n)
        .map(|i| MemberConfig {
            vlan: 1,
            ingress: if i == 0 { impaired.clone() } else { imp() },
            seeds: [2 * i as u64, 2 * i as u64 + 1],
            ..Default::default()
        })
        .collect();
    let ports = core.add_segment(SegmentConfig {
        members,
        capacity_bps,
        aging_ns: 300_000 * MS,
        snooping,
        kernel_path: true,
        ..Default::default()
    });
    let mut s = Sim::new(core);
    s.drain_events();
    let first = paths(&s);
    s.events.clear();
    (s, ports, first)
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

/// A link whose sides are on two machines, each with its own core, joined by an
/// underlay of one-way delay `transit_ns` that carries the tunnel's datagrams (over an
/// MTU of 1500). Frames at `machines[0]`'s side a go forward; `machines[1]` has side b.
struct Split {
    machines: [Sim; 2],
    /// (ports a and b) on each machine: a is local on machine 0, b on machine 1.
    ports: [[PortId; 2]; 2],
    transit_ns: u64,
    reasm: [vemu_core::tunnel::Reassembler; 2],
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
            let ports = core.add_link(LinkConfig {
                forward: forward.clone(),
                reverse: reverse.clone(),
                seeds: [1, 2],
                mtu: 1500,
                kernel_path: true,
                kernel_shaper: true,
                remote: Some((remote_side, transit_ns)),
                spur: None,
            });
            (Sim::new(core), ports)
        };
        let ((m0, p0), (m1, p1)) = (mk(1), mk(0));
        Split {
            machines: [m0, m1],
            ports: [p0, p1],
            transit_ns,
            reasm: Default::default(),
            seq: 0,
            delivered: [Vec::new(), Vec::new()],
            underlay_drops: Vec::new(),
        }
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
                    let vni = vemu_core::tunnel::vni(0, m as u8);
                    vemu_core::tunnel::encode(
                        &frame,
                        vemu_core::tunnel::Meta { vni, seq: self.seq, departure_ns: at },
                        vemu_core::tunnel::payload_for_mtu(1500, false),
                        &mut dgrams,
                    );
                    self.seq += 1;
                    if self.underlay_drops.contains(&(self.seq - 1)) {
                        continue;
                    }
                    let other = 1 - m;
                    for d in &dgrams {
                        let piece = vemu_core::tunnel::decode(d).unwrap();
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
    fn new(
        ingress: [Impairments; 2],
        radio: Option<(MediumConfig, Vec<Pos>)>,
        transit: u64,
    ) -> Trunked {
        Trunked::with(ingress, imp(), radio, transit, None)
    }

    /// ... with `egress` on the far members and, with `spur`, unicast between them
    /// switched on their machine.
    fn with(
        ingress: [Impairments; 2],
        egress: Impairments,
        radio: Option<(MediumConfig, Vec<Pos>)>,
        transit: u64,
        spur: Option<Spur>,
    ) -> Trunked {
        let mut owner = Core::new();
        let members = (0..4)
            .map(|i| MemberConfig {
                vlan: 1,
                seeds: [2 * i, 2 * i + 1],
                remote: (i >= 2).then_some(transit),
                mac: Some(mac(40 + i as u8)),
                ..Default::default()
            })
            .collect();
        let ports = owner.add_segment(SegmentConfig {
            members,
            aging_ns: 300_000 * MS,
            radio,
            far_switching: spur.is_some(),
            ..Default::default()
        });
        let trunk = owner.add_trunk(0, &[2, 3]);
        owner.set_transit(trunk, transit);
        let mut far = Core::new();
        let [i2, i3] = ingress;
        let n2 = far.add_link(LinkConfig {
            forward: egress.clone(),
            reverse: i2,
            seeds: [5, 6],
            mtu: 1500,
            kernel_path: false,
            kernel_shaper: false,
            remote: Some((1, transit)),
            spur,
        });
        let n3 = far.add_link(LinkConfig {
            forward: egress,
            reverse: i3,
            seeds: [7, 8],
            mtu: 1500,
            kernel_path: false,
            kernel_shaper: false,
            remote: Some((1, transit)),
            spur,
        });
        let trunk_in = far.add_trunk_in(&[(2, 0), (3, 1)]);
        Trunked {
            owner: Sim::new(owner),
            far: Sim::new(far),
            ports,
            trunk,
            trunk_in,
            nodes: [n2, n3],
        }
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

/// A UDP/IPv4 frame from host 1 to host 2 with `dscp`, `len` Ethernet bytes, carrying
/// `seq` in its payload (read by [`qos_seq`]).
fn ipv4_dscp(dscp: u8, len: usize, seq: u32) -> Vec<u8> {
    let mut f = vec![0u8; VNET_HDR_LEN];
    f.extend_from_slice(&mac(2));
    f.extend_from_slice(&mac(1));
    f.extend_from_slice(&[0x08, 0x00]);
    let ip_len = (len - 14) as u16;
    let mut ip = vec![
        0x45,
        dscp << 2,
        (ip_len >> 8) as u8,
        ip_len as u8,
        0,
        0,
        0x40,
        0,
        64,
        17,
        0,
        0,
        10,
        0,
        0,
        1,
        10,
        0,
        0,
        2,
    ];
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

mod captures;
mod groups;
mod gso;
mod hostile;
mod kernel_path;
mod lans;
mod links;
mod machines;
mod qos;
mod radio;
mod tunnels;
