//! The status of a lab as the controller sees it (`GET /v1/lab`, `vemu status`): its
//! nodes, links, segments, machines and diverted paths, with their counters.

use vemu_engine::{DirStats, RadioSnapshot};
use vemu_host::LabPaths;

use super::{Controller, PortState};
use crate::{DirStatus, IfaceStatus, MemberStatus, NodeStatus, SegmentStatus};
use vemu_machine::supervise::ProcStatus;
use vemu_machine::worker::Counters;

/// One direction's impairments as set and its counters.
pub(super) fn dir_status(st: &PortState, c: &[DirStats; 2], d: usize) -> DirStatus {
    DirStatus { impairments: st.imps[d].clone(), stats: c[d].clone() }
}

impl Controller {
    /// Each node: up or not, its namespace, interfaces, processes, limits and use.
    pub(super) fn node_statuses(
        &self,
        procs: &[ProcStatus],
        usage: &[vemu_host::cgroup::Usage],
    ) -> Vec<NodeStatus> {
        let paths = LabPaths::new(&self.plan.name);
        self.plan
            .nodes
            .iter()
            .enumerate()
            .map(|(ni, n)| NodeStatus {
                name: n.name.clone(),
                up: !self.stopped[ni] && !self.machine_lost(n.machine),
                netns: if n.kind.is_made() { paths.netns_name(&n.name) } else { String::new() },
                ifaces: n
                    .ifaces
                    .iter()
                    .map(|i| IfaceStatus {
                        name: i.name.clone(),
                        mac: i.mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":"),
                        addrs: i.addrs.iter().map(|a| a.to_string()).collect(),
                    })
                    .collect(),
                processes: procs.iter().filter(|p| p.node == n.name).cloned().collect(),
                limits: n.limits,
                usage: usage.get(ni).copied().unwrap_or_default(),
                cpu_wait_ns: self.watch.cpu_waits.get(&n.name).copied().unwrap_or(0),
                machine: self.plan.machines.get(n.machine).map(|m| m.name.clone()),
                kind: (!n.kind.is_made()).then(|| n.kind.name().to_string()),
                canvas: n.canvas,
            })
            .collect()
    }

    /// Each segment with its members (and, wireless, where they are and whom they reach).
    pub(super) fn segment_statuses(
        &self,
        stats: &Counters,
        radios: &[Option<RadioSnapshot>],
    ) -> Vec<SegmentStatus> {
        self.plan
            .segments
            .iter()
            .enumerate()
            .map(|(g, seg)| (g, seg, seg.wireless.as_ref().filter(|w| w.medium.hub.is_none())))
            .map(|(g, seg, air)| SegmentStatus {
                name: seg.name.clone(),
                kind: seg.kind().to_string(),
                range_m: air.map(|w| w.medium.model.range_m(&w.medium.radio)),
                carrier_sense_m: air.map(|w| w.medium.carrier_sense_m),
                city: seg.wireless.as_ref().is_some_and(|w| w.medium.city.is_some()),
                capacity_bps: seg.capacity_bps,
                stats: stats.segments[g].clone(),
                members: seg
                    .members
                    .iter()
                    .enumerate()
                    .map(|(m, mp)| {
                        let st = &self.members[g][m];
                        let node_of =
                            |i: u32| self.plan.nodes[seg.members[i as usize].end.node].name.clone();
                        let handovers =
                            |m: usize| self.wifi.get(&g).and_then(|w| w.handovers(m as u32));
                        let radio = radios[g].as_ref().map(|r| crate::RadioStatus {
                            x_m: r.positions[m].x,
                            y_m: r.positions[m].y,
                            neighbours: r.neighbours[m]
                                .iter()
                                .map(|n| crate::NeighbourStatus {
                                    node: node_of(n.member),
                                    distance_m: n.distance_m,
                                    delivery_probability: n.delivery_probability,
                                    signal_dbm: n.signal_dbm,
                                })
                                .collect(),
                            sent_to: r
                                .pairs
                                .iter()
                                .filter(|p| p.0 as usize == m)
                                .map(|p| crate::PairStatus { node: node_of(p.1), counters: p.2 })
                                .collect(),
                            mac: r.stations.as_ref().and_then(|s| s.get(m).copied()),
                            hub: r.hub.as_ref().and_then(|h| h.get(m).copied()),
                            wifi: r.bss.as_ref().and_then(|b| b.get(m)).map(|b| {
                                crate::WifiStatus {
                                    role: b.role.clone(),
                                    ssid: b.ssid.clone(),
                                    ap: b.ap.map(node_of),
                                    signal_dbm: b.signal_dbm,
                                    stations: b.stations.iter().map(|&s| node_of(s)).collect(),
                                    channel: b.channel,
                                    handovers: handovers(m).map_or(0, |h| h.0),
                                    last_handover_ms: handovers(m).map(|h| h.1 as f64 / 1e6),
                                }
                            }),
                        });
                        MemberStatus {
                            port: self.plan.endpoint_name(mp.end),
                            vlan: mp.vlan,
                            radio,
                            up: st.up,
                            egress: dir_status(st, &stats.members[g][m], 0),
                            ingress: dir_status(st, &stats.members[g][m], 1),
                        }
                    })
                    .collect(),
                canvas: seg.canvas,
            })
            .collect()
    }

    /// Each machine of a lab across machines: its nodes, state, clock and underlay.
    pub(super) fn machine_statuses(&self) -> Vec<crate::MachineStatus> {
        let (offsets, underlay_rows) =
            (self.worker.clock_offsets(), self.underlay_by_machine(&self.worker.underlay()));
        let mut nodes_on = vec![0; self.plan.machines.len()];
        for n in &self.plan.nodes {
            if let Some(c) = nodes_on.get_mut(n.machine) {
                *c += 1;
            }
        }
        self.plan
            .machines
            .iter()
            .zip(underlay_rows)
            .enumerate()
            .map(|(i, (m, underlay))| crate::MachineStatus {
                name: m.name.clone(),
                address: m.address.to_string(),
                nodes: nodes_on[i],
                state: if self.machine_lost(i) { "lost" } else { "up" }.into(),
                clock_offset_ns: offsets.get(i).copied().flatten().map(|o| o.offset_ns),
                clock_rtt_ns: offsets.get(i).copied().flatten().map(|o| o.rtt_ns),
                clock_error_ns: offsets.get(i).copied().flatten().map(|o| o.bound_ns()),
                clock_source: offsets.get(i).copied().flatten().map(|o| {
                    if o.wall_bound_ns.is_some() { "disciplined clocks" } else { "round trip" }
                        .to_string()
                }),
                underlay,
            })
            .collect()
    }

    /// Each diverted path of the machine's own traffic.
    pub(super) fn divert_statuses(&self, stats: &Counters) -> Vec<crate::DivertStatus> {
        self.plan
            .diverts
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let st = |k: usize| stats.diverts.get(i).map(|s| s[k].clone()).unwrap_or_default();
                crate::DivertStatus {
                    name: d.name.clone(),
                    matches: d.matches.clone(),
                    forward: DirStatus { impairments: d.forward.clone(), stats: st(0) },
                    reverse: DirStatus { impairments: d.reverse.clone(), stats: st(1) },
                }
            })
            .collect()
    }
}
