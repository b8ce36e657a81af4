//! One hop of a frame: a link direction or a segment member's direction — entering it,
//! its qos stage, leaving it at its delivery time.

use super::*;

impl Core {
    /// A frame from a trunk reaches link `l`'s reverse direction (a member's ingress) at `t`.
    pub(super) fn link_ingress(&mut self, t: u64, l: u32, frame: Frame) {
        let port = self.links[l as usize].ports[0];
        if self.ports[port as usize].watched {
            self.capture(port, t, false, CapturePoint::Before, &frame);
        }
        let mut acc = std::mem::take(&mut self.accepted);
        let link = &mut self.links[l as usize];
        impair(
            &mut link.dirs[1],
            &self.counters[link.counters[1] as usize],
            &mut self.held,
            link.mtu,
            t,
            frame,
            &mut acc,
        );
        self.finish(Hop::Link(l, 1), t, &mut acc);
        self.accepted = acc;
    }

    pub(super) fn dir(&self, hop: Hop) -> (&LinkDir, u32) {
        match hop {
            Hop::Link(l, d) => {
                let l = &self.links[l as usize];
                (&l.dirs[d as usize], l.counters[d as usize])
            }
            Hop::Member(g, m, d) => {
                let m = &self.segments[g as usize].members[m as usize];
                (&m.dirs[d as usize], m.counters[d as usize])
            }
        }
    }

    /// Keep the list of directions with a qos stage, and their class counters, as the
    /// direction's impairments say.
    pub(super) fn track_qos(&mut self, hop: Hop) {
        let (d, ci) = self.dir(hop);
        let names = d.stage().map(|s| s.class_names());
        let c = &self.counters[ci as usize];
        let same =
            c.classes.read().is_ok_and(|k| k.iter().map(|k| &k.name).eq(names.iter().flatten()));
        if !same {
            if let Ok(mut k) = c.classes.write() {
                *k = names
                    .iter()
                    .flatten()
                    .map(|name| ClassCounters { name: name.clone(), ..Default::default() })
                    .collect();
            }
        }
        let listed = self.qos_hops.contains(&hop);
        if names.is_some() && !listed {
            self.qos_hops.push(hop);
        } else if names.is_none() && listed {
            self.qos_hops.retain(|h| *h != hop);
        }
    }

    /// Hand what a direction's qos stage let go by `now` to the wire after it.
    pub(super) fn step_hop(&mut self, hop: Hop, now: u64) {
        let mut acc = std::mem::take(&mut self.accepted);
        let (d, ci) = match hop {
            Hop::Link(l, dir) => {
                let l = &mut self.links[l as usize];
                (&mut l.dirs[dir as usize], l.counters[dir as usize])
            }
            Hop::Member(g, m, dir) => {
                let m = &mut self.segments[g as usize].members[m as usize];
                (&mut m.dirs[dir as usize], m.counters[dir as usize])
            }
        };
        let c = &self.counters[ci as usize];
        let classes = c.classes.read().map(|k| k.clone()).unwrap_or_default();
        drain_stage(d, c, &classes, &mut self.held, now, &mut acc);
        impair::note_serializer(c, d, now);
        self.finish(hop, now, &mut acc);
        self.accepted = acc;
    }

    /// Schedule the copies a direction accepted toward where it leads: a link's far
    /// side (early by the underlay's delay when that is on another machine), a
    /// segment's switch, or a member's interface.
    pub(super) fn finish(&mut self, hop: Hop, now: u64, acc: &mut Vec<Accepted>) {
        if !self.held.drops.frames.is_empty() {
            self.capture_drops(hop, now);
        }
        let (action, early) = match hop {
            Hop::Link(l, dir) => {
                let (l, dir) = (&self.links[l as usize], dir as usize);
                (
                    Action::Write { port: l.ports[1 - dir], counter: l.counters[dir] },
                    Some(l.transit_ns[1 - dir]),
                )
            }
            Hop::Member(seg, member, 0) => (Action::Switch { seg, member }, None),
            Hop::Member(seg, member, _) => {
                let m = &self.segments[seg as usize].members[member as usize];
                (Action::Write { port: m.port, counter: m.counters[1] }, m.remote)
            }
        };
        let spur = match hop {
            Hop::Link(l, 0) => self.links[l as usize].spur.map(|s| (l, s)),
            _ => None,
        };
        for mut a in acc.drain(..) {
            if let Some((from, (g, port))) = spur {
                match self.spur_switch(g, port, now, &a.frame) {
                    SpurWay::Here(to) => {
                        self.push(a, Action::Local { from: Some(from), to });
                        continue;
                    }
                    SpurWay::Flood => {
                        // (Counted as sent once: by the copy to the switch.)
                        let targets = std::mem::take(&mut self.spur_flood);
                        for &to in &targets {
                            self.push(
                                Accepted { at_ns: a.at_ns, wire: a.wire, frame: a.frame.clone() },
                                Action::Local { from: None, to },
                            );
                        }
                        self.spur_flood = targets;
                    }
                    SpurWay::Switch => {}
                }
            }
            if let Some(early) = early {
                a.at_ns = a.at_ns.saturating_sub(early).max(now);
            }
            self.push(a, action);
        }
    }

    /// Copy the frames `hop` dropped to the captures of drops on its interfaces: the one
    /// it leaves from (outgoing) and the one it leads to.
    fn capture_drops(&mut self, hop: Hop, now: u64) {
        let (from, to) = match hop {
            Hop::Link(l, dir) => {
                let p = self.links[l as usize].ports;
                (Some(p[dir as usize]), Some(p[1 - dir as usize]))
            }
            Hop::Member(g, m, dir) => {
                let port = self.segments[g as usize].members[m as usize].port;
                if dir == 0 {
                    (Some(port), None)
                } else {
                    (None, Some(port))
                }
            }
        };
        let mut dropped = std::mem::take(&mut self.held.drops.frames);
        for (frame, why) in &dropped {
            for (port, outgoing) in [(from, true), (to, false)] {
                if let Some(port) = port {
                    self.capture_drop(port, now, outgoing, frame, *why);
                }
            }
        }
        dropped.clear();
        self.held.drops.frames = dropped;
    }

    /// Copy a frame dropped on its way from (`outgoing`) or to `port` at `t` to the
    /// captures of drops there.
    pub(super) fn capture_drop(
        &mut self,
        port: PortId,
        t: u64,
        outgoing: bool,
        frame: &Frame,
        why: DropReason,
    ) {
        for w in self.watches.iter().filter(|w| w.port == port && w.point == CapturePoint::Drops) {
            self.events.push_back(Event::Capture {
                capture: w.id,
                iface: w.iface,
                t_ns: t,
                outgoing,
                frame: frame.clone(),
                drop: Some(why),
            });
        }
    }

    /// Capture what a segment dropped: a radio channel (noted by `send_on_air` and
    /// `radio_outcomes`) or a LAN's capacity or switch (by `switch`).
    pub(super) fn capture_segment_drops(&mut self) {
        let mut dropped = std::mem::take(&mut self.segment_drops);
        for (port, t, outgoing, frame, why) in dropped.drain(..) {
            self.capture_drop(port, t, outgoing, &frame, why);
        }
        self.segment_drops = dropped;
    }
}
