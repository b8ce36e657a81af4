//! What a direction does to a frame offered to it (counting, the MTU, splitting,
//! impairments, qos stages) and which directions need the engine at all.

use super::*;

/// Whether an Ethernet frame carries a routing protocol's message: OSPF (IP protocol 89)
/// or UDP to babel (6696), OLSR (698), AODV (654), RIP (520) or RIPng (521). Counted on
/// wireless segments for the routing overhead of MANET experiments.
pub fn is_routing(eth: &[u8]) -> bool {
    const PORTS: [u16; 5] = [6696, 698, 654, 520, 521];
    let at = |i: usize| eth.get(i).copied();
    let port = |i: usize| Some(u16::from_be_bytes([at(i)?, at(i + 1)?]));
    match (at(12), at(13)) {
        (Some(0x08), Some(0x00)) => {
            let ihl = (at(14).unwrap_or(0) & 0x0f) as usize * 4;
            match at(23) {
                Some(89) => true,
                Some(17) => port(14 + ihl + 2).is_some_and(|p| PORTS.contains(&p)),
                _ => false,
            }
        }
        (Some(0x86), Some(0xdd)) => match at(20) {
            Some(89) => true,
            Some(17) => port(54 + 2).is_some_and(|p| PORTS.contains(&p)),
            _ => false,
        },
        _ => false,
    }
}

/// Offer a frame to one direction at `now`: count it, check the MTU, split a
/// super-frame where per-frame impairments or the rate need it, and put every copy that
/// survives into `out`. The frame's bytes are shared, not copied, unless it is split or
/// corrupted.
pub(super) fn impair(
    d: &mut LinkDir,
    c: &DirCounters,
    held: &mut Held,
    iface_mtu: u32,
    now: u64,
    frame: Frame,
    out: &mut Vec<Accepted>,
) {
    // A frame of one of the direction's flows takes that flow's own direction (a
    // super-frame's pieces are all of its flow); the direction's queue and pace in its
    // counters stay its own.
    match d.flow_of(&frame[VNET_HDR_LEN..]) {
        Some(i) => offer_frame(d.flow_mut(i), c, held, iface_mtu, now, frame, out),
        None => {
            offer_frame(d, c, held, iface_mtu, now, frame, out);
            let qf = note_serializer(c, d, now);
            c.queue_frames_max.fetch_max(qf, Relaxed);
        }
    }
}

/// [`impair`] for one direction of its own (the direction's, or one of its flows').
fn offer_frame(
    d: &mut LinkDir,
    c: &DirCounters,
    held: &mut Held,
    iface_mtu: u32,
    now: u64,
    frame: Frame,
    out: &mut Vec<Accepted>,
) {
    let eth = &frame[VNET_HDR_LEN..];
    let g = gso::frame_gso(&frame);
    let (frames, bytes) = gso::wire_size(g.as_ref(), eth.len());
    c.rx_frames.fetch_add(frames as u64, Relaxed);
    c.rx_bytes.fetch_add(bytes, Relaxed);
    let imp = d.impairments();
    let mtu = imp.mtu.or((iface_mtu > 0).then_some(iface_mtu));
    if let (None, Some(mtu)) = (&g, mtu) {
        if eth.len() > mtu as usize + 14 + if eth.get(12..14) == Some(&[0x81, 0]) { 4 } else { 0 } {
            c.drop_mtu.fetch_add(1, Relaxed);
            held.drops.note(&frame, DropReason::Mtu);
            return;
        }
    }
    let pieces: Vec<Frame> = match &g {
        Some(g) if frames > 1 => {
            let per_piece = if imp.needs_per_frame() {
                1
            } else if let Some(rate) = imp.rate_bps {
                let burst_bytes =
                    (MAX_BURST_NS as u128 * rate as u128 / 8 / 1_000_000_000) as usize;
                (burst_bytes / (g.mss + g.hdr_len)).max(1)
            } else {
                frames as usize
            };
            if per_piece < frames as usize {
                gso::split(&frame, g, per_piece).into_iter().map(Arc::new).collect()
            } else {
                vec![frame]
            }
        }
        _ => vec![frame],
    };
    if d.stage().is_some() {
        let classes = c.classes.read().map(|c| c.clone()).unwrap_or_default();
        for mut piece in pieces {
            let wire = gso::wire_size(g.as_ref(), piece.len() - VNET_HDR_LEN);
            let id = held.next_id;
            held.next_id += 1;
            let packet = classify::parse(&piece[VNET_HDR_LEN..]);
            let a = match d.offer_classed(
                now,
                id,
                &packet,
                Offer { wire_frames: wire.0, wire_bytes: wire.1 },
            ) {
                Ok(a) => a,
                Err(cause) => {
                    drop_counter(c, cause).fetch_add(wire.0 as u64, Relaxed);
                    held.drops.note_cause(&piece, cause, d);
                    continue;
                }
            };
            let Some(k) = classes.get(a.class) else { continue };
            k.rx_frames.fetch_add(wire.0 as u64, Relaxed);
            k.rx_bytes.fetch_add(wire.1, Relaxed);
            let (kc, dc) = match a.verdict {
                Ok(()) => {
                    if let Some(dscp) = a.remark {
                        classify::set_dscp(
                            &mut Arc::make_mut(&mut piece)[VNET_HDR_LEN..],
                            &packet,
                            dscp,
                        );
                        k.remarked.fetch_add(wire.0 as u64, Relaxed);
                    }
                    held.frames.insert(id, (piece, wire));
                    continue;
                }
                Err(Refusal::Police) => {
                    held.drops.note(&piece, DropReason::Police);
                    (&k.drop_police, &c.drop_police)
                }
                Err(Refusal::Red) => {
                    held.drops.note(&piece, DropReason::Red);
                    (&k.drop_red, &c.drop_queue)
                }
                Err(Refusal::Queue) => {
                    held.drops.note(&piece, DropReason::Queue);
                    (&k.drop_queue, &c.drop_queue)
                }
            };
            kc.fetch_add(wire.0 as u64, Relaxed);
            dc.fetch_add(wire.0 as u64, Relaxed);
        }
        drain_stage(d, c, &classes, held, now, out);
    } else {
        for piece in pieces {
            // The super-frame's headers and MSS hold for each of its pieces.
            let (pf, pb) = gso::wire_size(g.as_ref(), piece.len() - VNET_HDR_LEN);
            let o = d.offer(now, Offer { wire_frames: pf, wire_bytes: pb });
            accept(c, d, now, o, (piece, (pf, pb)), out, &mut held.drops);
        }
    }
}

/// Store what a direction's queue and serializer stand at after frames were offered to
/// it or left its qos stage: its queue (frames and bytes) and its pace. Returns the
/// frames queued.
pub(super) fn note_serializer(c: &DirCounters, d: &mut LinkDir, now: u64) -> u64 {
    let (qf, qb) = d.queue_depth(now);
    c.queue_frames.store(qf, Relaxed);
    c.queue_bytes.store(qb, Relaxed);
    let pace = d.pace();
    c.serializer_busy_ns.store(pace.busy_ns, Relaxed);
    c.serializer_gap_ns.store(pace.gap_ns, Relaxed);
    qf
}

pub(super) fn drop_counter(c: &DirCounters, cause: DropCause) -> &std::sync::atomic::AtomicU64 {
    match cause {
        DropCause::Loss => &c.drop_loss,
        DropCause::Queue => &c.drop_queue,
        DropCause::Down => &c.drop_down,
    }
}

/// Count a direction's outcome for one piece (offered at `since`) and put the copies
/// that survive into `out`, corrupted where the model says (and those dropped into
/// `drops`).
pub(super) fn accept(
    c: &DirCounters,
    d: &LinkDir,
    since: u64,
    o: LinkOutcome,
    (piece, (pf, pb)): (Frame, (u32, u64)),
    out: &mut Vec<Accepted>,
    drops: &mut Drops,
) {
    if o.duplicate.is_some() {
        c.duplicated.fetch_add(pf as u64, Relaxed);
    }
    for copy in [Some(o.first), o.duplicate].into_iter().flatten() {
        match copy {
            Err(cause) => {
                drop_counter(c, cause).fetch_add(pf as u64, Relaxed);
                drops.note_cause(&piece, cause, d);
            }
            Ok(dl) => {
                c.delay_hist[delay_bucket(dl.at_ns.saturating_sub(since))]
                    .fetch_add(pf as u64, Relaxed);
                let mut f = piece.clone();
                if let Some(r) = dl.corrupt {
                    let bytes = Arc::make_mut(&mut f);
                    gso::finish_checksum(bytes);
                    let bits = ((bytes.len() - VNET_HDR_LEN) * 8) as u32;
                    let bit = (r % bits) as usize;
                    bytes[VNET_HDR_LEN + bit / 8] ^= 1 << (bit % 8);
                    c.corrupted.fetch_add(1, Relaxed);
                }
                out.push(Accepted { at_ns: dl.at_ns, wire: (pf, pb), frame: f });
            }
        }
    }
}

/// The frames whose serialization on a qos direction started by `now`: counted per
/// class, and on to the wire after the stage.
pub(super) fn drain_stage(
    d: &mut LinkDir,
    c: &DirCounters,
    classes: &[ClassCounters],
    held: &mut Held,
    now: u64,
    out: &mut Vec<Accepted>,
) {
    while let Some(Left { id, arrival_ns, class, waited_ns, outcome }) = d.poll_left(now) {
        let Some((piece, wire)) = held.frames.remove(&id) else { continue };
        if let Some(k) = class.and_then(|k| classes.get(k)) {
            k.tx_frames.fetch_add(wire.0 as u64, Relaxed);
            k.tx_bytes.fetch_add(wire.1, Relaxed);
            k.wait_hist[delay_bucket(waited_ns)].fetch_add(wire.0 as u64, Relaxed);
        }
        accept(c, d, arrival_ns, outcome, (piece, wire), out, &mut held.drops);
    }
    if let Some(s) = d.stage() {
        for (i, k) in classes.iter().enumerate() {
            k.queue_frames.store(s.backlog(i).0, Relaxed);
        }
    }
}

/// A direction's impairments less an `mtu` that its interfaces have anyway (see
/// [`Impairments::beyond_interface`]; the driver's kernel routes carry the MTU, see
/// [`Core::iface_mtu`]).
pub(super) fn beyond_interface(d: &LinkDir, iface_mtu: u32) -> Impairments {
    d.impairments().beyond_interface(iface_mtu)
}

/// A direction needs no emulation: up, and its impairments do not need the engine
/// ([`Impairments::needs_engine`]: what puts it on the kernel path, unless captured).
pub(super) fn unemulated(d: &LinkDir, iface_mtu: u32) -> bool {
    d.is_up() && !d.impairments().needs_engine(iface_mtu)
}

/// The kernel's token bucket for a direction that is up, whose one impairment is its
/// rate (with a queue limit) and that asks for the kernel's shaper; `mtu`: the link's
/// (0: 1500).
pub(super) fn kernel_shape(d: &LinkDir, mtu: u32) -> Option<Shape> {
    let imp = &beyond_interface(d, mtu);
    let rate_bps = imp.rate_bps?;
    let only_rate = Impairments {
        rate_bps: imp.rate_bps,
        queue: imp.queue,
        shaper: Shaper::Kernel,
        ..Default::default()
    };
    if !d.is_up() || *imp != only_rate || rate_bps == 0 {
        return None;
    }
    // A frame of the MTU with its Ethernet and VLAN headers.
    let frame_bytes = u64::from(if mtu == 0 { 1500 } else { mtu }) + 18;
    let at_rate = |ns: u64| (ns as u128 * rate_bps as u128 / 8 / 1_000_000_000) as u64;
    let mut burst_bytes = at_rate(KERNEL_BURST_NS).max(2 * frame_bytes);
    if at_rate(SUPER_FRAME_BURST_NS) >= SUPER_FRAME_BYTES {
        burst_bytes = burst_bytes.max(SUPER_FRAME_BYTES);
    }
    let limit_bytes = match imp.queue_limit() {
        QueueLimit::Packets(n) => n.saturating_mul(FULL_FRAME_BYTES),
        QueueLimit::Bytes(b) => b,
    };
    Some(Shape {
        rate_bps,
        burst_bytes,
        limit_bytes: limit_bytes.clamp(frame_bytes, u64::from(u32::MAX)),
    })
}
