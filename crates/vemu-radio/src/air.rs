//! A wireless segment's channel: the simple medium ([`crate::medium`]: airtime and an
//! optional simplified CSMA) or the 802.11 DCF ([`crate::wifi::dcf`]), behind one
//! interface, as the data path's core drives it: frames offered with their wire size,
//! time advanced, outcomes out.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use crate::medium::{Medium, MediumConfig, Neighbour, Outcome, PairCounters};
use crate::wifi::bss::{BssEvent, Infra, Mgmt, Role, Route, TU_NS};
use crate::wifi::dcf::{self, Dcf};
use crate::wifi::monitor::MgmtHeard;
use crate::Pos;

/// A segment's channel.
// One per wireless segment, held where it is made: the DCF (kilobytes) is boxed only
// so that the size is not doubled for the simple medium.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Air {
    Simple(Medium),
    Dcf(Box<DcfAir>),
    /// A wired hub ([`crate::hub`]): every member hears every frame, CSMA/CD.
    Hub(HubAir),
}

/// A hub, with the (unused) positions of its members.
#[derive(Debug, Clone)]
pub struct HubAir {
    pub hub: crate::hub::Hub,
    pos: Vec<Pos>,
}

/// The DCF with the medium's outcomes, and infrastructure mode when a member is an
/// access point or a station: management frames on the air, and data frames through
/// the access points.
#[derive(Debug, Clone)]
pub struct DcfAir {
    pub dcf: Dcf,
    out: Vec<dcf::Outcome>,
    infra: Option<Infra>,
    /// Management frames on the air, by id (from [`MGMT_IDS`] up).
    mgmt: FxHashMap<u64, Mgmt>,
    next_mgmt: u64,
    /// Data frames of an infrastructure channel, by id: where each is going.
    legs: FxHashMap<u64, Leg>,
    /// Per station, the access point its last data frame went through, and when that
    /// frame reached its end (for [`BssEvent::Handover`]).
    via: FxHashMap<u32, (u32, u64)>,
    /// The last [`BSS_LOG`] events, numbered from 1.
    log: VecDeque<(u64, BssEvent)>,
    logged: u64,
    /// Data frames waiting for a station off its access point's channel (its own, and
    /// its access point's to it), in the order they came.
    held: VecDeque<Held>,
}

/// A data frame offered while its station was away ([`Infra::away`]).
#[derive(Debug, Clone, Copy)]
struct Held {
    member: u32,
    id: u64,
    bytes: u64,
    dst: Option<u32>,
}

/// How many data frames a channel holds for its stations off channel (more are
/// refused, as a full queue refuses them).
pub const HELD_FRAMES: usize = 256;

/// How many of infrastructure mode's events a channel keeps for those who read them
/// ([`Air::bss_log`]).
pub const BSS_LOG: usize = 4096;

/// Ids of the channel's own management frames (the data path's are below).
pub const MGMT_IDS: u64 = 1 << 62;

/// A data frame on an infrastructure channel.
#[derive(Debug, Clone, Copy)]
struct Leg {
    /// The member that sent it, and the member it is for (`None`: broadcast, or beyond
    /// the channel).
    origin: u32,
    dst: Option<u32>,
    /// Its access point (the sender's, or the sender itself) and whether it is on its
    /// way from it now (else to it).
    ap: Option<u32>,
    from_ap: bool,
    /// Its size on the air (to send it again from the access point).
    bytes: u64,
    /// Transmissions of it the DCF has not finished.
    on_air: u32,
}

impl Air {
    /// The DCF when the configuration has one ([`MediumConfig::dcf`]), else the medium.
    pub fn new(cfg: MediumConfig, positions: &[Pos]) -> Air {
        if let Some(h) = cfg.hub {
            let hub = crate::hub::Hub::new(
                crate::hub::HubConfig { seed: cfg.seed, ..h },
                positions.len(),
            );
            return Air::Hub(HubAir { hub, pos: positions.to_vec() });
        }
        match cfg.dcf.clone() {
            Some(setup) => {
                let mut dcf = Dcf::new(setup.config, positions, &setup.stations);
                dcf.set_walls(cfg.city.as_deref().map(crate::city::Walls::new));
                let infra = Infra::wanted(&setup.roles).then(|| {
                    let mut roles = setup.roles.clone();
                    roles.resize(positions.len(), Role::AdHoc);
                    let channels = setup.stations.iter().map(|s| s.channel).collect();
                    Infra::on_channels(roles, channels)
                });
                Air::Dcf(Box::new(DcfAir {
                    dcf,
                    out: Vec::new(),
                    infra,
                    mgmt: FxHashMap::default(),
                    next_mgmt: MGMT_IDS,
                    legs: FxHashMap::default(),
                    via: FxHashMap::default(),
                    log: VecDeque::new(),
                    logged: 0,
                    held: VecDeque::new(),
                }))
            }
            None => Air::Simple(Medium::new(cfg, positions)),
        }
    }

    /// A frame of `wire_frames` frames and `wire_bytes` bytes (Ethernet headers
    /// included) from `member`, to `dst` when known. False when it is refused (the
    /// sender is down or its queue is full).
    pub fn offer(
        &mut self,
        now_ns: u64,
        member: u32,
        id: u64,
        wire: (u32, u64),
        dst: Option<u32>,
    ) -> bool {
        match self {
            Air::Simple(m) => {
                let airtime = m.airtime_ns(wire.0, wire.1);
                m.offer(now_ns, member, id, airtime, dst)
            }
            // (An Ethernet frame's payload as 802.11 carries it: the Ethernet header
            // becomes the MAC header's addresses and an 8-byte LLC/SNAP header.)
            Air::Dcf(d) => d.offer(now_ns, member, id, wire.1.saturating_sub(14) + 8, dst),
            // (A super-frame's frames back to back, as one transmission: each frame's
            // preamble, FCS and gap between them.)
            Air::Hub(h) => {
                let extra = wire.0.saturating_sub(1) as u64 * crate::hub::PER_FRAME_OVERHEAD_BYTES;
                h.hub.offer(now_ns, member, id, wire.1 + extra)
            }
        }
    }

    pub fn next_event_ns(&self) -> Option<u64> {
        match self {
            Air::Simple(m) => m.next_event_ns(),
            Air::Dcf(d) => {
                let bss = d.infra.as_ref().and_then(|i| i.next_event_ns());
                d.dcf.next_event_ns().into_iter().chain(bss).min()
            }
            Air::Hub(h) => h.hub.next_event_ns(),
        }
    }

    pub fn advance(&mut self, now_ns: u64, out: &mut Vec<Outcome>) {
        match self {
            Air::Simple(m) => m.advance(now_ns, out),
            Air::Dcf(d) => d.advance(now_ns, out),
            Air::Hub(h) => h.hub.advance(now_ns, out),
        }
    }

    /// Infrastructure mode's state (an 802.11 channel with access points or stations).
    pub fn infra(&self) -> Option<&Infra> {
        match self {
            Air::Dcf(d) => d.infra.as_ref(),
            Air::Simple(_) | Air::Hub(_) => None,
        }
    }

    /// What infrastructure mode decided (associations, losses) and measured (handovers),
    /// numbered from 1 in order: the last [`BSS_LOG`] of them, those after number
    /// `after`.
    pub fn bss_log(&self, after: u64) -> Vec<(u64, BssEvent)> {
        match self {
            Air::Dcf(d) => {
                // (Numbered without gaps: the first one after `after` is found by place.)
                let first = d.logged + 1 - d.log.len() as u64;
                let skip = after.saturating_add(1).saturating_sub(first);
                d.log.iter().skip(skip.min(d.log.len() as u64) as usize).cloned().collect()
            }
            Air::Simple(_) | Air::Hub(_) => Vec::new(),
        }
    }

    /// How many events infrastructure mode has logged so far ([`Air::bss_log`]).
    pub fn bss_logged(&self) -> u64 {
        match self {
            Air::Dcf(d) => d.logged,
            Air::Simple(_) | Air::Hub(_) => 0,
        }
    }

    pub fn set_up(&mut self, member: u32, up: bool, out: &mut Vec<Outcome>) {
        match self {
            Air::Simple(m) => m.set_up(member, up, out),
            Air::Dcf(d) => {
                d.dcf.set_up(member, up, &mut d.out);
                if !up {
                    let gone = d.take_held(member);
                    d.out.extend(gone.iter().map(|h| dcf::Outcome::Done { id: h.id }));
                }
                d.handle_outcomes(out);
            }
            Air::Hub(h) => h.hub.set_up(member, up, out),
        }
    }

    pub fn set_positions(&mut self, positions: &[Pos]) {
        match self {
            Air::Simple(m) => m.set_positions(positions),
            Air::Dcf(d) => d.dcf.set_positions(positions),
            Air::Hub(h) => h.pos.copy_from_slice(positions),
        }
    }

    pub fn positions(&self) -> &[Pos] {
        match self {
            Air::Simple(m) => m.positions(),
            Air::Dcf(d) => d.dcf.positions(),
            Air::Hub(h) => &h.pos,
        }
    }

    pub fn neighbours(&self, member: u32) -> Vec<Neighbour> {
        match self {
            Air::Simple(m) => m.neighbours(member).to_vec(),
            Air::Dcf(d) => d.dcf.neighbours(member),
            Air::Hub(h) => h.hub.neighbours(member),
        }
    }

    pub fn pairs(&self) -> Vec<((u32, u32), PairCounters)> {
        match self {
            Air::Simple(m) => m.pairs().collect(),
            Air::Dcf(d) => d.dcf.pairs().collect(),
            Air::Hub(h) => h.hub.pairs(),
        }
    }

    /// Capture member `member`'s radio (`on`) or stop (the simple medium has no frames of
    /// its own: nothing to capture).
    pub fn set_monitor(&mut self, member: u32, on: bool) {
        if let Air::Dcf(d) = self {
            d.dcf.set_monitor(member, on);
        }
    }

    /// The 802.11 standard of the DCF (none for the simple medium).
    pub fn standard(&self) -> Option<crate::wifi::phy::Standard> {
        match self {
            Air::Simple(_) | Air::Hub(_) => None,
            Air::Dcf(d) => Some(d.dcf.config().timing.standard),
        }
    }

    /// What each member's MAC did (the DCF's only).
    pub fn stations(&self) -> Option<Vec<dcf::StationStats>> {
        match self {
            Air::Simple(_) | Air::Hub(_) => None,
            Air::Dcf(d) => {
                Some((0..d.dcf.positions().len() as u32).map(|s| d.dcf.stats(s)).collect())
            }
        }
    }

    /// What each member's port did on a hub (frames sent, collisions, frames given up).
    pub fn hub_stats(&self) -> Option<Vec<crate::hub::HubStats>> {
        match self {
            Air::Hub(h) => Some((0..h.hub.members() as u32).map(|m| h.hub.stats(m)).collect()),
            _ => None,
        }
    }
}

/// The power map of `member` (at `from`) over `width_m × height_m` from (`x0_m`,
/// `y0_m`) in cells of `cell_m`: the channel's propagation model with the member's own
/// radio (an 802.11 member's transmit power and antenna gain), the city's walls.
#[allow(clippy::too_many_arguments)]
pub fn power_map(
    cfg: &MediumConfig,
    member: usize,
    from: Pos,
    (x0_m, y0_m): (f64, f64),
    (width_m, height_m): (f64, f64),
    cell_m: f64,
) -> crate::city::PowerMap {
    let (model, mut radio, threshold_dbm) = match &cfg.dcf {
        Some(d) => (d.config.model, d.config.radio, d.config.cca_pd_dbm),
        None => (cfg.model, cfg.radio, crate::dbm(cfg.radio.rx_threshold_w)),
    };
    if let Some(st) = cfg.dcf.as_ref().and_then(|d| d.stations.get(member)) {
        if let Some(p) = st.tx_power_dbm {
            radio.tx_power_w = crate::watts(p);
        }
        radio.gain_tx *= 10f64.powf(st.gain_dbi / 10.0);
    }
    let walls = cfg.city.as_deref().map(crate::city::Walls::new);
    let cell_m = cell_m.max(1e-3);
    let (cols, rows) =
        ((width_m / cell_m).ceil().max(1.0) as usize, (height_m / cell_m).ceil().max(1.0) as usize);
    let mut dbm = Vec::with_capacity(cols * rows);
    for r in 0..rows {
        for c in 0..cols {
            let at = Pos::new(x0_m + (c as f64 + 0.5) * cell_m, y0_m + (r as f64 + 0.5) * cell_m);
            let loss = walls.as_ref().map_or(0.0, |w| w.loss_db(from, at));
            let w = model.mean_rx_power_lossy_w(&radio, from.distance(at), loss);
            dbm.push(match w {
                w if w <= 0.0 => None,
                w if w.is_infinite() => Some(0.0), // (a unit disk: in range is strong)
                w => Some(crate::dbm(w)),
            });
        }
    }
    crate::city::PowerMap { x0_m, y0_m, cell_m, cols, rows, dbm, threshold_dbm }
}

impl DcfAir {
    /// A data frame from `member` for `dst`: straight on an ad hoc channel, else where
    /// infrastructure mode sends it (through the sender's access point, or nowhere).
    fn offer(&mut self, now_ns: u64, member: u32, id: u64, bytes: u64, dst: Option<u32>) -> bool {
        let Some(infra) = &self.infra else {
            return self.dcf.offer(now_ns, member, id, bytes, dst);
        };
        // A station off its access point's channel, or its access point's frame for it:
        // it waits for the station's return.
        let ap_to_away = dst.is_some_and(|d| infra.away(d) && infra.ap_of(d) == Some(member));
        if infra.away(member) || ap_to_away {
            if self.held.len() >= HELD_FRAMES {
                return false;
            }
            self.held.push_back(Held { member, id, bytes, dst });
            return true;
        }
        let (to, ap, from_ap) = match infra.route(member, dst) {
            Route::Drop => return false,
            Route::ToAp(ap) => (Some(ap), Some(ap), false),
            Route::Air { to } => match infra.role(member) {
                Some(Role::Ap(_)) => (to, Some(member), true),
                _ => (to, None, false),
            },
        };
        if !self.dcf.offer(now_ns, member, id, bytes, to) {
            return false;
        }
        self.legs.insert(id, Leg { origin: member, dst, ap, from_ap, bytes, on_air: 1 });
        true
    }

    fn advance(&mut self, now_ns: u64, out: &mut Vec<Outcome>) {
        if let Some(infra) = &mut self.infra {
            infra.advance(now_ns);
            self.carry_out_infra(now_ns, out);
        }
        self.dcf.advance(now_ns, &mut self.out);
        self.handle_outcomes(out);
    }

    /// What the DCF decided (in `self.out`): management frames to infrastructure mode,
    /// data frames' legs through the access points, the rest to the core.
    fn handle_outcomes(&mut self, out: &mut Vec<Outcome>) {
        let outcomes = std::mem::take(&mut self.out);
        for o in outcomes {
            match o {
                dcf::Outcome::Deliver { id, receiver, at_ns } if id >= MGMT_IDS => {
                    if let (Some(m), Some(infra)) = (self.mgmt.get(&id), &mut self.infra) {
                        let signal = self.dcf.rx_dbm(m.from, receiver);
                        infra.received(m, receiver, signal, at_ns);
                    }
                    self.carry_out_infra(at_ns, out);
                }
                dcf::Outcome::Done { id } if id >= MGMT_IDS => {
                    self.mgmt.remove(&id);
                }
                dcf::Outcome::Lost { id, .. } | dcf::Outcome::Dropped { id, .. }
                    if id >= MGMT_IDS => {}
                dcf::Outcome::Heard(h) if h.id.is_some_and(|id| id >= MGMT_IDS) => {
                    let id = h.id.expect("an id");
                    if let (Some(m), Some(infra)) = (self.mgmt.get(&id), &self.infra) {
                        let ap = if m.kind.from_ap() { Some(m.from) } else { m.to };
                        let beacon_interval_tu = match ap.and_then(|a| infra.role(a)) {
                            Some(Role::Ap(a)) => (a.beacon_interval_ns / TU_NS) as u16,
                            _ => 0,
                        };
                        out.push(Outcome::HeardMgmt(Box::new(MgmtHeard {
                            heard: *h,
                            mgmt: m.clone(),
                            bssid_member: ap,
                            beacon_interval_tu,
                        })));
                    }
                }
                dcf::Outcome::Deliver { id, receiver, at_ns } if self.legs.contains_key(&id) => {
                    self.deliver_leg(id, receiver, at_ns, out);
                }
                dcf::Outcome::Done { id } if self.legs.contains_key(&id) => {
                    let leg = self.legs.get_mut(&id).expect("a leg");
                    leg.on_air -= 1;
                    if leg.on_air == 0 {
                        self.legs.remove(&id);
                        out.push(Outcome::Done { id });
                    }
                }
                o => out.push(outcome(o)),
            }
        }
        while let Some(e) = self.infra.as_mut().and_then(|i| i.poll_event()) {
            self.record(e);
        }
    }

    fn record(&mut self, e: BssEvent) {
        if self.log.len() == BSS_LOG {
            self.log.pop_front();
        }
        self.logged += 1;
        self.log.push_back((self.logged, e));
    }

    /// A data frame of station `sta` went through access point `ap` (to it or from it),
    /// reaching its end at `at_ns`: the first through a new access point ends a handover.
    fn through(&mut self, sta: u32, ap: u32, at_ns: u64) {
        if let Some((from, last_ns)) = self.via.insert(sta, (ap, at_ns)) {
            if from != ap {
                self.record(BssEvent::Handover { sta, from, to: ap, last_ns, first_ns: at_ns });
            }
        }
    }

    /// Carry out what infrastructure mode decided: stations' radios retuned (those
    /// back home send what waited for them), management frames on the air.
    fn carry_out_infra(&mut self, now_ns: u64, out: &mut Vec<Outcome>) {
        let Some(infra) = &mut self.infra else { return };
        let mut back = Vec::new();
        while let Some(t) = infra.poll_tune() {
            self.dcf.set_channel(t.sta, t.channel);
            if !t.away {
                back.push(t.sta);
            }
        }
        for s in back {
            for h in self.take_held(s) {
                if !self.offer(now_ns, h.member, h.id, h.bytes, h.dst) {
                    out.push(Outcome::Done { id: h.id });
                }
            }
        }
        self.send_mgmt(now_ns);
    }

    /// The frames held for station `s` (its own, and its access point's to it), in
    /// order; the others stay.
    fn take_held(&mut self, s: u32) -> VecDeque<Held> {
        let (mine, others) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|h| h.member == s || h.dst == Some(s));
        self.held = others;
        mine
    }

    /// Put infrastructure mode's management frames on the air.
    fn send_mgmt(&mut self, now_ns: u64) {
        let Some(infra) = &mut self.infra else { return };
        while let Some(m) = infra.poll_transmit() {
            let id = self.next_mgmt;
            self.next_mgmt += 1;
            // (The DCF counts the body after its MAC header and FCS.)
            if self.dcf.offer(now_ns, m.from, id, m.bytes().saturating_sub(28), m.to) {
                self.mgmt.insert(id, m);
            }
        }
    }

    /// Data frame `id` reached `receiver`: at its access point, relayed or taken up;
    /// from an access point, taken by the stations of its BSS only; ad hoc, by ad hoc
    /// members only.
    fn deliver_leg(&mut self, id: u64, receiver: u32, at_ns: u64, out: &mut Vec<Outcome>) {
        let infra = self.infra.as_ref().expect("infrastructure mode");
        let leg = self.legs[&id];
        let deliver = Outcome::Deliver { id, receiver, at_ns };
        match (leg.ap, leg.from_ap) {
            (Some(ap), false) if receiver == ap => {
                let relay = infra.relay(ap, leg.origin, leg.dst);
                let relays_broadcast = infra.relays_broadcast(ap);
                if infra.stations_of(ap).contains(&leg.origin) {
                    self.through(leg.origin, ap, at_ns);
                }
                match relay {
                    Some(Route::Air { to }) => self.again(id, ap, to, at_ns),
                    Some(_) => {}
                    None => {
                        out.push(deliver);
                        if leg.dst.is_none() && relays_broadcast {
                            self.again(id, ap, None, at_ns);
                        }
                    }
                }
            }
            (Some(ap), true)
                if infra.stations_of(ap).contains(&receiver) && receiver != leg.origin =>
            {
                // (A broadcast reaches every station: only a frame for this one is its
                // data.)
                if leg.dst == Some(receiver) {
                    self.through(receiver, ap, at_ns);
                }
                out.push(deliver)
            }
            (None, _) if infra.role(receiver) == Some(&Role::AdHoc) => out.push(deliver),
            _ => {}
        }
    }

    /// Send data frame `id` again, from access point `ap` to `to` (`None`: its BSS).
    fn again(&mut self, id: u64, ap: u32, to: Option<u32>, at_ns: u64) {
        let bytes = self.legs[&id].bytes;
        if self.dcf.offer(at_ns, ap, id, bytes, to) {
            let leg = self.legs.get_mut(&id).expect("a leg");
            leg.from_ap = true;
            leg.on_air += 1;
        }
    }
}

/// The medium's form of a DCF outcome.
fn outcome(o: dcf::Outcome) -> Outcome {
    match o {
        dcf::Outcome::Deliver { id, receiver, at_ns } => Outcome::Deliver { id, receiver, at_ns },
        dcf::Outcome::Lost { id, receiver, at_ns, reason } => {
            Outcome::Lost { id, receiver, at_ns, collision: reason != dcf::LossReason::Sinr }
        }
        dcf::Outcome::Dropped { id, receiver, at_ns, .. } => {
            Outcome::Dropped { id, receiver, at_ns }
        }
        dcf::Outcome::Done { id } => Outcome::Done { id },
        dcf::Outcome::Heard(h) => Outcome::Heard(h),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::propagation::Model;
    use crate::wifi::bss::{ApConfig, StaConfig};
    use crate::wifi::phy::Standard;

    /// A member going down with frames queued: each reaches its end once, through the
    /// same bookkeeping as frames that went on the air (none left behind).
    #[test]
    fn a_member_going_down_ends_its_frames_and_their_legs() {
        let roles = vec![Role::Ap(ApConfig::new("lab")), Role::Station(StaConfig::new("lab"))];
        let cfg = MediumConfig::dcf_channel(Standard::G, Model::FreeSpace, roles, 2, 3);
        let mut a = Air::new(cfg, &[Pos::new(0.0, 0.0), Pos::new(10.0, 0.0)]);
        let mut out = Vec::new();
        while let Some(t) = a.next_event_ns().filter(|&t| t < 300_000_000) {
            a.advance(t, &mut out);
        }
        assert_eq!(a.infra().unwrap().ap_of(1), Some(0));
        for id in 1..=10 {
            assert!(a.offer(300_000_000, 1, id, (1, 1500), None));
        }
        out.clear();
        a.set_up(1, false, &mut out);
        let done = out.iter().filter(|o| matches!(o, Outcome::Done { .. })).count();
        assert_eq!(done, 10, "{out:?}");
        let Air::Dcf(d) = &a else { unreachable!() };
        assert!(d.legs.is_empty(), "{:?}", d.legs);
        assert!(out.iter().all(|o| !matches!(o, Outcome::Done { id } if *id >= MGMT_IDS)));
    }
}
