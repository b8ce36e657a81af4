//! Ends on other machines: trunks (a segment's members elsewhere), the underlay's
//! transit time, loss and datagram size of a link's tunnel.

use super::*;

impl Core {
    /// On a segment's machine: a trunk toward another machine serving `members` of
    /// segment `seg` (on another machine, each added with `remote`): the switch or
    /// channel sends each frame one copy through it, naming its receivers there, whose
    /// ingress is carried out on their machine ([`Core::add_trunk_in`]). Returns its port.
    pub fn add_trunk(&mut self, seg: usize, members: &[usize]) -> PortId {
        let trunk = self.trunks.len() as u32;
        let port = self.port(Owner::Trunk { trunk });
        for &m in members {
            if let Some(ms) = self.segments.get_mut(seg).and_then(|g| g.members.get_mut(m)) {
                ms.trunk = Some(trunk);
            }
        }
        self.trunks.push(TrunkState {
            port,
            transit_ns: 0,
            pending: Vec::new(),
            links: FxHashMap::default(),
        });
        port
    }

    /// On the members' machine: the far end of a trunk, handing each copy to the ingress
    /// of the members it names — (member, link), the link's reverse direction being the
    /// member's ingress and its side a the member's interface. Returns its port.
    pub fn add_trunk_in(&mut self, members: &[(u32, usize)]) -> PortId {
        let trunk = self.trunks.len() as u32;
        let port = self.port(Owner::Trunk { trunk });
        let links = members.iter().map(|&(m, l)| (m, l as u32)).collect();
        self.trunks.push(TrunkState { port, transit_ns: 0, pending: Vec::new(), links });
        port
    }

    /// Send one copy of `frame` (due at `at_ns`) through every trunk with receivers
    /// pending, early by its transit.
    pub(super) fn flush_trunks(&mut self, at_ns: u64, wire: (u32, u64), frame: &Frame) {
        for k in std::mem::take(&mut self.trunks_pending) {
            let t = &mut self.trunks[k as usize];
            let pending = std::mem::take(&mut t.pending);
            let (port, at) =
                (t.port, at_ns.saturating_sub(t.transit_ns).max(self.now_ns.min(at_ns)));
            let behind = (at + t.transit_ns).saturating_sub(at_ns).min(u32::MAX as u64) as u32;
            for chunk in pending.chunks(TRUNK_MAX_RECEIVERS) {
                let mut f = Vec::with_capacity(frame.len() + chunk.len() * 8 + 6);
                f.extend_from_slice(frame);
                for &(m, off) in chunk {
                    f.extend_from_slice(&m.to_be_bytes());
                    f.extend_from_slice(&off.to_be_bytes());
                }
                f.extend_from_slice(&behind.to_be_bytes());
                f.extend_from_slice(&(chunk.len() as u16).to_be_bytes());
                self.push(
                    Accepted { at_ns: at, wire, frame: Arc::new(f) },
                    Action::Deliver { port },
                );
            }
        }
    }

    /// A member's copy to the trunk toward its machine, if it has one (true).
    pub(super) fn send_to_trunk(&mut self, seg: u32, member: u32, offset_ns: u32) -> bool {
        let Some(k) = self.segments[seg as usize].members[member as usize].trunk else {
            return false;
        };
        let t = &mut self.trunks[k as usize];
        if t.pending.is_empty() {
            self.trunks_pending.push(k);
        }
        t.pending.push((member, offset_ns));
        true
    }

    /// A copy through trunk `k` at `now`: each member it names gets it in its ingress.
    pub(super) fn receive_from_trunk(&mut self, now: u64, k: u32, mut frame: Vec<u8>) {
        let n = frame.len();
        let Some(count) = frame
            .get(n.saturating_sub(2)..)
            .and_then(|b| b.try_into().ok())
            .map(u16::from_be_bytes)
        else {
            return;
        };
        let list = count as usize * 8 + 6;
        if count == 0 || n < MIN_FRAME + list {
            return;
        }
        let be32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as u64;
        let entries: Vec<(u32, u64)> = frame[n - list..n - 6]
            .chunks_exact(8)
            .map(|e| (be32(e) as u32, be32(&e[4..])))
            .collect();
        let at = now.saturating_sub(be32(&frame[n - 6..]));
        frame.truncate(n - list);
        let frame = Arc::new(frame);
        let wire = gso::wire_size(gso::frame_gso(&frame).as_ref(), frame.len() - VNET_HDR_LEN);
        let src = frame.get(VNET_HDR_LEN + 6..VNET_HDR_LEN + 12).map(mac);
        for (m, off) in entries {
            let Some(&link) = self.trunks[k as usize].links.get(&m) else { continue };
            // The switch hands it to this member: its source is not behind it, and is
            // elsewhere unless a member here sent from it lately (its own multicast).
            if let (Some((g, port)), Some(src)) =
                (self.links.get(link as usize).and_then(|l| l.spur), src)
            {
                let (sw, ports) = self.spurs[g as usize].parts();
                let here = sw
                    .lookup(now, port, src)
                    .is_some_and(|p| p != port && ports[p as usize].1.is_some());
                if !here {
                    let uplink = ports
                        .iter()
                        .position(|(c, l)| l.is_none() && c.vlan == ports[port as usize].0.vlan)
                        .expect("every VLAN has its uplink");
                    sw.learn(now, uplink as u32, src);
                }
            }
            self.push(
                Accepted { at_ns: at + off, wire, frame: frame.clone() },
                Action::Ingress { link },
            );
        }
    }

    /// The underlay's one-way delay toward `port`, the side of a link on another
    /// machine, is now `transit_ns` (as measured): frames toward it leave that much
    /// before their delivery time from now on.
    pub fn set_transit(&mut self, port: PortId, transit_ns: u64) {
        match self.ports.get(port as usize).map(|p| p.owner) {
            Some(Owner::Link { link, side }) => {
                let l = &mut self.links[link as usize];
                l.transit_ns[side as usize] = transit_ns;
                // Frames toward side b go forward (direction 0), toward a in reverse.
                self.counters[l.counters[1 - side as usize] as usize]
                    .transit_ns
                    .store(transit_ns, Relaxed);
            }
            Some(Owner::Member { seg, member }) => {
                let m = &mut self.segments[seg as usize].members[member as usize];
                if m.remote.is_some() {
                    m.remote = Some(transit_ns);
                    self.counters[m.counters[1] as usize].transit_ns.store(transit_ns, Relaxed);
                }
            }
            Some(Owner::Trunk { trunk }) => self.trunks[trunk as usize].transit_ns = transit_ns,
            None => {}
        }
    }

    /// The counter of the direction that carries frames toward (`toward`) or from a
    /// port whose far side is on another machine.
    pub(super) fn remote_counter(&self, port: PortId, toward: bool) -> Option<&DirCounters> {
        let c = match self.ports.get(port as usize)?.owner {
            Owner::Link { link, side } => {
                self.links[link as usize].counters[side as usize ^ toward as usize]
            }
            Owner::Member { seg, member } => {
                self.segments[seg as usize].members[member as usize].counters[toward as usize]
            }
            Owner::Trunk { .. } => return None,
        };
        Some(&self.counters[c as usize])
    }

    /// The underlay lost `lost` frames in all (so far) of those that came to `port` —
    /// the far side of a link, on another machine — from there: counted for the
    /// direction from that side.
    pub fn set_underlay_lost(&mut self, port: PortId, lost: u64) {
        self.set_from_remote(port, lost, |c| &c.underlay_lost);
    }

    /// Datagrams that came to `port` from its far side's address were forged, damaged or
    /// replayed, `forged` in all: counted as [`Core::set_underlay_lost`] counts.
    pub fn set_underlay_forged(&mut self, port: PortId, forged: u64) {
        self.set_from_remote(port, forged, |c| &c.underlay_forged);
    }

    /// Set counter `field` of the directions from the far side of `port` to `v`.
    fn set_from_remote(
        &mut self,
        port: PortId,
        v: u64,
        field: impl Fn(&DirCounters) -> &std::sync::atomic::AtomicU64,
    ) {
        // Frames from side a go forward (direction 0), from b in reverse; from a member,
        // by its egress; through a trunk, toward each member it serves (its ingress).
        if let Some(Owner::Trunk { trunk }) = self.ports.get(port as usize).map(|p| p.owner) {
            for &l in self.trunks[trunk as usize].links.values() {
                field(&self.counters[self.links[l as usize].counters[1] as usize])
                    .store(v, Relaxed);
            }
        } else if let Some(c) = self.remote_counter(port, false) {
            field(c).store(v, Relaxed);
        }
    }

    /// The tunnel toward `port` (a link side on another machine) carries datagrams of up
    /// to `bytes` of payload (probed): shown in the stats of the direction toward it.
    pub fn set_path_payload(&mut self, port: PortId, bytes: u64) {
        if let Some(c) = self.remote_counter(port, true) {
            c.path_payload.store(bytes, Relaxed);
        }
    }
}
