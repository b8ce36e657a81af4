//! LAN and wireless segments: adding one, choosing its path, and a frame's way through
//! the switch (or the radio channel) to each member's ingress direction; spurs (VLAN
//! access links of a switch).

use super::*;

impl Core {
    /// Add a segment; returns the port of each member.
    pub fn add_segment(&mut self, cfg: SegmentConfig) -> Vec<PortId> {
        let seg = self.segments.len() as u32;
        let ports_cfg: Vec<PortConfig> =
            cfg.members.iter().map(|m| PortConfig { vlan: m.vlan }).collect();
        let mut members = Vec::with_capacity(cfg.members.len());
        for (i, m) in cfg.members.into_iter().enumerate() {
            let port = self.port(Owner::Member { seg, member: i as u32 });
            let counters = [self.counter(), self.counter()];
            members.push(MemberState {
                port,
                dirs: [LinkDir::new(m.egress, m.seeds[0]), LinkDir::new(m.ingress, m.seeds[1])],
                counters,
                mtu: m.mtu,
                mac: m.mac,
                remote: m.remote,
                trunk: None,
                bucket_in: None,
                egress_path: Path::Engine,
            });
        }
        let capacity = cfg.capacity_bps.map(|rate| {
            LinkDir::new(Impairments { rate_bps: Some(rate), ..Default::default() }, 0)
        });
        let radio = cfg.radio.map(|(mc, pos)| {
            let groups =
                (cfg.snooping != Snooping::Off).then(|| vec![FxHashSet::default(); pos.len()]);
            Box::new(Channel {
                medium: Air::new(mc, &pos),
                frames: FxHashMap::default(),
                next_id: 0,
                macs: FxHashMap::default(),
                bss_seen: 0,
                outcomes: Vec::new(),
                groups,
            })
        });
        if radio.is_some() {
            self.radios.push(seg);
        }
        let mut switch = Switch::new(&ports_cfg, cfg.aging_ns);
        if radio.is_none() {
            switch.set_snooping(cfg.snooping);
            switch.set_query_families(true, !cfg.ipv6_off);
            if cfg.snooping == Snooping::Querier {
                self.queriers.push(seg);
            }
        }
        let ports = members.iter().map(|m| m.port).collect();
        let member_count = members.len() as u32;
        let spans = members.iter().any(|m| m.remote.is_some());
        let kernel = (cfg.kernel_path && radio.is_none() && !spans).then_some(false);
        self.segments.push(SegState {
            switch,
            members,
            capacity,
            counters: Arc::new(SegCounters::default()),
            targets: Vec::new(),
            radio,
            kernel,
            kernel_shaper: cfg.kernel_shaper,
            far_switching: cfg.far_switching,
        });
        for m in 0..member_count {
            self.track_qos(Hop::Member(seg, m, 0));
            self.track_qos(Hop::Member(seg, m, 1));
        }
        self.choose_segment_path(seg as usize);
        ports
    }

    /// A frame a member sends toward its segment's switch elsewhere (from `port` of spur
    /// group `g`), at `now`: its source learnt, where it goes ([`Spur`]). Multicast goes
    /// to the segment's switch alone, whose snooping decides.
    pub(super) fn spur_switch(&mut self, g: u32, port: u32, now: u64, frame: &[u8]) -> SpurWay {
        let Some(eth) = frame.get(VNET_HDR_LEN..VNET_HDR_LEN + 12) else { return SpurWay::Switch };
        let (dst, src) = (mac(eth), mac(&eth[6..]));
        let (sw, ports) = self.spurs[g as usize].parts();
        match sw.forward(now, port, dst, src) {
            _ if is_group(dst) && dst != BROADCAST => SpurWay::Switch,
            Forward::Unicast(p) => ports[p as usize].1.map_or(SpurWay::Switch, SpurWay::Here),
            // (Behind the sender's own port: the segment's switch drops it.)
            Forward::Filter => SpurWay::Switch,
            Forward::Flood(to) => {
                self.spur_flood.clear();
                self.spur_flood.extend(to.filter_map(|p| ports[p as usize].1));
                SpurWay::Flood
            }
        }
    }

    /// Whether LAN segment `g` needs the engine, told to the driver (for every member
    /// port) when that changes: the kernel switches it while no port of it has an
    /// impairment in either direction (but a rate given to the kernel's shaper, where
    /// the driver can shape), every port is up, none is captured and the LAN has no
    /// capacity limit. It is all or nothing: one switch decides for every frame of a
    /// LAN, so that its learning and snooping see all of it. While the kernel switches
    /// it, each port's directions are told apart: straight or through a bucket.
    pub(super) fn choose_segment_path(&mut self, g: usize) {
        let seg = &self.segments[g];
        let Some(now) = seg.kernel else { return };
        // Per member, its egress and ingress paths on the kernel's bridge, if it can be there.
        let on_bridge = |m: &MemberState| -> Option<[Path; 2]> {
            if self.ports[m.port as usize].watched {
                return None;
            }
            let mut paths = [Path::Kernel; 2];
            for (d, path) in paths.iter_mut().enumerate() {
                if !unemulated(&m.dirs[d], m.mtu) {
                    *path = Path::Shaped(
                        kernel_shape(&m.dirs[d], m.mtu).filter(|_| seg.kernel_shaper)?,
                    );
                }
            }
            Some(paths)
        };
        let want: Option<Vec<[Path; 2]>> =
            if seg.capacity.is_none() { seg.members.iter().map(on_bridge).collect() } else { None };
        let Some(paths) = want else {
            if now {
                // What the engine writes for a port goes out through the port's plane
                // device too, which must not shape it: the buckets toward the nodes go.
                for m in seg.members.iter().filter(|m| m.bucket_in.is_some()) {
                    self.events.push_back(Event::Ingress { port: m.port, shape: None });
                }
                for m in &seg.members {
                    self.events.push_back(Event::Path { port: m.port, path: Path::Engine });
                    for c in m.counters {
                        self.counters[c as usize].kernel_path.store(false, Relaxed);
                        self.counters[c as usize].kernel_shaper.store(false, Relaxed);
                    }
                }
                let seg = &mut self.segments[g];
                for m in &mut seg.members {
                    m.egress_path = Path::Engine;
                    m.bucket_in = None;
                }
                // Back from the kernel's bridge: what the switch knew may be stale.
                seg.switch.restart();
                seg.kernel = Some(false);
            }
            return;
        };
        // Buckets toward the nodes first, then what the nodes send.
        let seg = &mut self.segments[g];
        for (m, p) in seg.members.iter_mut().zip(&paths) {
            let shape = match p[1] {
                Path::Shaped(s) => Some(s),
                _ => None,
            };
            if shape != m.bucket_in {
                self.events.push_back(Event::Ingress { port: m.port, shape });
                m.bucket_in = shape;
            }
        }
        for (m, p) in seg.members.iter_mut().zip(&paths) {
            if !now || m.egress_path != p[0] {
                self.events.push_back(Event::Path { port: m.port, path: p[0] });
                m.egress_path = p[0];
            }
            for (d, c) in m.counters.into_iter().enumerate() {
                self.counters[c as usize].kernel_path.store(true, Relaxed);
                self.counters[c as usize]
                    .kernel_shaper
                    .store(matches!(p[d], Path::Shaped(_)), Relaxed);
            }
        }
        seg.kernel = Some(true);
    }

    /// Positions, neighbours and per-pair counters of wireless segment `seg`.
    pub fn radio(&self, seg: usize, bss_after: u64) -> Option<RadioSnapshot> {
        let m = &self.segments.get(seg)?.radio.as_ref()?.medium;
        let n = m.positions().len() as u32;
        let mut pairs: Vec<(u32, u32, PairCounters)> =
            m.pairs().into_iter().map(|((a, b), c)| (a, b, c)).collect();
        pairs.sort_by_key(|p| (p.0, p.1));
        Some(RadioSnapshot {
            positions: m.positions().to_vec(),
            neighbours: (0..n).map(|i| m.neighbours(i)).collect(),
            pairs,
            stations: m.stations(),
            bss: m.infra().map(|i| (0..n).map(|k| i.member(k)).collect()),
            bss_log: m.bss_log(bss_after),
            hub: m.hub_stats(),
        })
    }

    /// Offer a copy to a member's ingress direction at `t` and schedule what survives.
    pub(super) fn offer_to_member(
        &mut self,
        seg: u32,
        member: u32,
        t: u64,
        frame: Frame,
        acc: &mut Vec<Accepted>,
    ) {
        let port = self.segments[seg as usize].members[member as usize].port;
        if self.ports[port as usize].watched {
            self.capture(port, t, false, CapturePoint::Before, &frame);
        }
        let m = &mut self.segments[seg as usize].members[member as usize];
        impair(
            &mut m.dirs[1],
            &self.counters[m.counters[1] as usize],
            &mut self.held,
            m.mtu,
            t,
            frame,
            acc,
        );
        self.finish(Hop::Member(seg, member, 1), t, acc);
    }

    /// A frame reaches a segment's switch at `t`: it crosses the aggregate capacity, the
    /// switch decides its ports, and each of their ingress directions takes a copy that
    /// shares the frame's bytes.
    pub(super) fn switch(&mut self, t: u64, seg: u32, member: u32, wire: (u32, u64), frame: Frame) {
        let g = &mut self.segments[seg as usize];
        // (A member on another machine: its machine counted its egress.)
        if g.members[member as usize].remote.is_none() {
            let sent = &self.counters[g.members[member as usize].counters[0] as usize];
            sent.tx_frames.fetch_add(wire.0 as u64, Relaxed);
            sent.tx_bytes.fetch_add(wire.1, Relaxed);
        }
        if g.radio.is_some() {
            self.send_on_air(t, seg, member, wire, frame);
            return;
        }
        let mut t_out = t;
        if let Some(cap) = &mut g.capacity {
            match cap.offer(t, Offer { wire_frames: wire.0, wire_bytes: wire.1 }).first {
                Ok(dl) => t_out = dl.at_ns,
                Err(_) => {
                    g.counters.drop_capacity.fetch_add(wire.0 as u64, Relaxed);
                    if self.held.drops.keep {
                        let port = g.members[member as usize].port;
                        self.segment_drops.push((port, t, true, frame, DropReason::Capacity));
                        self.capture_segment_drops();
                    }
                    return;
                }
            }
        }
        let mut targets = std::mem::take(&mut g.targets);
        let ctr = match g.switch.forward_frame(t, member, &frame[VNET_HDR_LEN..], &mut targets) {
            Delivery::Unicast => &g.counters.unicast,
            Delivery::Flood => &g.counters.flooded,
            Delivery::Multicast => &g.counters.multicast,
            Delivery::Filter => &g.counters.filtered,
        };
        ctr.fetch_add(wire.0 as u64, Relaxed);
        let filtered = targets.is_empty() && self.held.drops.keep;
        g.counters.learned.store(g.switch.learned() as u64, Relaxed);
        g.counters.learn_refused.store(g.switch.refused(), Relaxed);
        g.counters.groups.store(g.switch.group_count() as u64, Relaxed);
        g.counters.groups_refused.store(g.switch.groups_refused(), Relaxed);
        // Members on the sender's own machine had a broadcast or unicast frame there.
        let dst = frame.get(VNET_HDR_LEN..VNET_HDR_LEN + 6).map_or(0, mac);
        let had_it = g.members[member as usize]
            .trunk
            .filter(|_| g.far_switching && (!is_group(dst) || dst == BROADCAST));
        if let Some(k) = had_it {
            let members = &g.members;
            targets.retain(|&p| members[p as usize].trunk != Some(k));
        }
        let mut acc = std::mem::take(&mut self.accepted);
        for &p in &targets {
            if !self.send_to_trunk(seg, p, 0) {
                self.offer_to_member(seg, p, t_out, frame.clone(), &mut acc);
            }
        }
        self.accepted = acc;
        self.flush_trunks(t_out, wire, &frame);
        self.segments[seg as usize].targets = targets;
        if filtered {
            let port = self.segments[seg as usize].members[member as usize].port;
            self.segment_drops.push((port, t, true, frame, DropReason::Switch));
            self.capture_segment_drops();
        }
    }

    /// A frame reaches a wireless segment's channel: on the air every wire frame is its
    /// own transmission, queued at the sender's radio.
    pub(super) fn send_on_air(
        &mut self,
        t: u64,
        seg: u32,
        member: u32,
        wire: (u32, u64),
        frame: Frame,
    ) {
        let g = &mut self.segments[seg as usize];
        let r = g.radio.as_mut().expect("radio segment");
        let gs = gso::frame_gso(&frame);
        let pieces: Vec<Frame> = match &gs {
            Some(gs) if wire.0 > 1 => gso::split(&frame, gs, 1).into_iter().map(Arc::new).collect(),
            _ => vec![frame],
        };
        for piece in pieces {
            let eth = &piece[VNET_HDR_LEN..];
            let (dst, src) = (vemu_switch::mac(&eth[0..6]), vemu_switch::mac(&eth[6..12]));
            if !r.relayed(member, src) {
                r.macs.insert(src, member);
            }
            r.note_reports(member, eth);
            let to = if eth[0] & 1 == 0 { r.macs.get(&dst).copied() } else { None };
            let pw = gso::wire_size(gs.as_ref(), piece.len() - VNET_HDR_LEN);
            let id = r.next_id;
            r.next_id += 1;
            if r.medium.offer(t, member, id, pw, to) {
                g.counters.air_frames.fetch_add(1, Relaxed);
                if is_routing(eth) {
                    g.counters.routing_frames.fetch_add(1, Relaxed);
                }
                r.frames.insert(id, piece);
            } else {
                g.counters.drop_capacity.fetch_add(pw.0 as u64, Relaxed);
                if self.held.drops.keep {
                    let port = g.members[member as usize].port;
                    self.segment_drops.push((port, t, true, piece, DropReason::RadioQueue));
                }
            }
        }
        g.counters.groups.store(r.group_count(), Relaxed);
        if !self.segment_drops.is_empty() {
            self.capture_segment_drops();
        }
    }

    /// A frame a watched radio decoded or sent, to the captures of its radio: an 802.11
    /// frame behind a radiotap header (a data frame carries its Ethernet frame's
    /// payload), after an empty virtio-net header as every captured frame.
    fn capture_radio(
        &mut self,
        seg: u32,
        h: &vemu_radio::wifi::dcf::Heard,
        mgmt: Option<&vemu_radio::wifi::monitor::MgmtHeard>,
    ) {
        let g = &self.segments[seg as usize];
        let Some(r) = &g.radio else { return };
        let Some(standard) = r.medium.standard() else { return };
        let Some(member) = g.members.get(h.station as usize) else { return };
        let port = member.port;
        let mac_of = |s: u32| -> [u8; 6] {
            if let Some(mac) = g.members.get(s as usize).and_then(|m| m.mac) {
                return mac;
            }
            match r.macs.iter().find(|&(_, &m)| m == s) {
                Some((&mac, _)) => mac.to_be_bytes()[2..].try_into().expect("6 bytes"),
                None => [0x02, 0, 0, 0, (s >> 8) as u8, s as u8],
            }
        };
        let bssid = [0x02, 0xb5, 0x5e, 0x1d, (seg >> 8) as u8, seg as u8];
        let eth = h.id.and_then(|id| r.frames.get(&id)).map(|f| &f[VNET_HDR_LEN..]);
        let mut bytes = vec![0u8; VNET_HDR_LEN];
        match mgmt {
            Some(m) => bytes.extend(vemu_radio::wifi::monitor::mgmt_frame(m, standard, &mac_of)),
            None => {
                bytes.extend(vemu_radio::wifi::monitor::frame(h, standard, &mac_of, bssid, eth))
            }
        }
        let frame: Frame = Arc::new(bytes);
        for w in self.watches.iter().filter(|w| w.port == port && w.point == CapturePoint::Radio) {
            self.events.push_back(Event::Capture {
                capture: w.id,
                iface: w.iface,
                t_ns: h.at_ns,
                outgoing: h.signal_dbm.is_none(),
                frame: frame.clone(),
                drop: None,
            });
        }
    }

    /// Hand the frames a wireless channel delivered to their receivers' ingress
    /// directions, and forget those it is done with.
    pub(super) fn radio_outcomes(&mut self, seg: u32) {
        let Some(r) = &mut self.segments[seg as usize].radio else { return };
        let mut outcomes = std::mem::take(&mut r.outcomes);
        let mut acc = std::mem::take(&mut self.accepted);
        for o in outcomes.drain(..) {
            let r = self.segments[seg as usize].radio.as_mut().expect("radio segment");
            match o {
                Outcome::Done { id } => {
                    r.frames.remove(&id);
                }
                Outcome::Dropped { id, receiver, at_ns } => {
                    let Some(frame) = r.frames.get(&id).filter(|_| self.held.drops.keep).cloned()
                    else {
                        continue;
                    };
                    // (At the sender's interface: it gave the frame up.)
                    let sender =
                        r.macs.get(&vemu_switch::mac(&frame[VNET_HDR_LEN + 6..VNET_HDR_LEN + 12]));
                    let member = sender.copied().unwrap_or(receiver);
                    let port = self.segments[seg as usize].members[member as usize].port;
                    self.segment_drops.push((port, at_ns, true, frame, DropReason::RetryLimit));
                }
                Outcome::Lost { id, receiver, at_ns, collision } => {
                    let Some(frame) = r.frames.get(&id).filter(|_| self.held.drops.keep).cloned()
                    else {
                        continue;
                    };
                    let why = if collision { DropReason::Collision } else { DropReason::Weak };
                    let port = self.segments[seg as usize].members[receiver as usize].port;
                    self.segment_drops.push((port, at_ns, false, frame, why));
                }
                Outcome::Heard(h) => self.capture_radio(seg, &h, None),
                Outcome::HeardMgmt(m) => self.capture_radio(seg, &m.heard, Some(&m)),
                Outcome::Deliver { id, receiver, at_ns } => {
                    let Some(frame) = r.frames.get(&id).cloned() else { continue };
                    if !r.takes(receiver, &frame[VNET_HDR_LEN..]) {
                        self.segments[seg as usize].counters.filtered.fetch_add(1, Relaxed);
                        continue;
                    }
                    match self.segments[seg as usize].members[receiver as usize].trunk {
                        Some(k) => self.radio_remote.push((k, id, receiver, at_ns, frame)),
                        None => self.offer_to_member(seg, receiver, at_ns, frame, &mut acc),
                    }
                }
            }
        }
        self.l2_updates(seg, &mut acc);
        self.accepted = acc;
        // Receivers on other machines: one copy per machine and transmission, each
        // receiver at its own offset after the earliest.
        let mut remote = std::mem::take(&mut self.radio_remote);
        remote.sort_unstable_by_key(|&(k, id, m, at, _)| (id, k, at, m));
        for group in remote.chunk_by(|a, b| (a.0, a.1) == (b.0, b.1)) {
            let (first, frame) = (group[0].3, &group[0].4);
            for &(_, _, m, at, _) in group {
                self.send_to_trunk(seg, m, (at - first).min(u32::MAX as u64) as u32);
            }
            let wire = gso::wire_size(gso::frame_gso(frame).as_ref(), frame.len() - VNET_HDR_LEN);
            self.flush_trunks(first, wire, frame);
        }
        remote.clear();
        self.radio_remote = remote;
        if let Some(r) = &mut self.segments[seg as usize].radio {
            r.outcomes = outcomes;
        }
        if !self.segment_drops.is_empty() {
            self.capture_segment_drops();
        }
    }
}

/// The frame an access point hears from a station that (re)associated, as 802.11f's
/// Layer 2 Update (IEEE 802.11F-2003, 4.2.4.1, the frame hostapd sends up its bridge): a
/// broadcast from the station's address, an LLC XID frame, so that the bridges and
/// switches beyond the access point learn where the station is now. Padded to the
/// Ethernet minimum, behind an empty virtio-net header.
fn l2_update(station: u64) -> Frame {
    let mut f = vec![0u8; VNET_HDR_LEN];
    f.extend([0xff; 6]);
    f.extend(&station.to_be_bytes()[2..]);
    // Length 6; DSAP null, SSAP null (response), XID; XID format 0x81, type 1 class 1,
    // window 0.
    f.extend([0x00, 0x06, 0x00, 0x01, 0xaf, 0x81, 0x01, 0x00]);
    f.resize(VNET_HDR_LEN + 60, 0);
    Arc::new(f)
}

impl Core {
    /// For each station that (re)associated since last looked at, an 802.11f update up
    /// its new access point's port ([`l2_update`]), as hostapd sends one on every
    /// association.
    fn l2_updates(&mut self, seg: u32, acc: &mut Vec<Accepted>) {
        let Some(r) = &mut self.segments[seg as usize].radio else { return };
        if r.medium.bss_logged() == r.bss_seen {
            return;
        }
        let events = r.medium.bss_log(r.bss_seen);
        r.bss_seen = r.medium.bss_logged();
        for (n, e) in events.into_iter().map(|e| e.1).enumerate() {
            let vemu_radio::wifi::bss::BssEvent::Associated { sta, ap, at_ns, .. } = e else {
                continue;
            };
            // Its interface's address (or, where the core was not told it, the one it
            // was seen sending from).
            let g = &self.segments[seg as usize];
            let r = g.radio.as_ref().expect("radio segment");
            let own = g.members.get(sta as usize).and_then(|m| m.mac).map(|m| vemu_switch::mac(&m));
            let seen = || r.macs.iter().find(|&(_, &m)| m == sta).map(|(&mac, _)| mac);
            let Some(mac) = own.or_else(seen) else { continue };
            match self.segments[seg as usize].members[ap as usize].trunk {
                // (An access point on another machine: to it over the trunk, as the
                // channel's frames to it go; numbered apart from the channel's frames,
                // which the copies for the trunks are grouped by.)
                Some(k) => {
                    let id = u64::MAX - n as u64;
                    self.radio_remote.push((k, id, ap, at_ns, l2_update(mac)));
                }
                None => self.offer_to_member(seg, ap, at_ns, l2_update(mac), acc),
            }
        }
    }
}
