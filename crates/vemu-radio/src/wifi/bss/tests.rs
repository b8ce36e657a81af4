//! The infrastructure on a virtual clock: management frames cross a made-up channel
//! that delivers each 1 ms after it is sent, at the signal a test's function gives.

use super::*;

const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;

/// A channel: `signal(from, to, t)` in dBm, or below −90 dBm (not received).
struct Air<F: Fn(u32, u32, u64) -> f64> {
    infra: Infra,
    signal: F,
    now: u64,
    pending: Vec<(u64, Mgmt)>,
    events: Vec<BssEvent>,
    sent: Vec<(u64, Mgmt)>,
}

impl<F: Fn(u32, u32, u64) -> f64> Air<F> {
    fn new(roles: Vec<Role>, signal: F) -> Air<F> {
        let mut a = Air {
            infra: Infra::new(roles),
            signal,
            now: 0,
            pending: Vec::new(),
            events: Vec::new(),
            sent: Vec::new(),
        };
        a.collect();
        a
    }

    fn collect(&mut self) {
        while let Some(m) = self.infra.poll_transmit() {
            self.sent.push((self.now, m.clone()));
            self.pending.push((self.now + MS, m));
        }
        while let Some(e) = self.infra.poll_event() {
            self.events.push(e);
        }
    }

    fn run_until(&mut self, end: u64) {
        loop {
            let air = self.pending.iter().map(|p| p.0).min();
            let Some(next) = air.into_iter().chain(self.infra.next_event_ns()).min() else {
                break;
            };
            if next > end {
                break;
            }
            self.now = next;
            let (due, later): (Vec<_>, Vec<_>) =
                self.pending.drain(..).partition(|p| p.0 <= self.now);
            self.pending = later;
            for (_, m) in due {
                for r in 0..self.infra.roles.len() as u32 {
                    let sig = (self.signal)(m.from, r, self.now);
                    if r != m.from && sig >= -90.0 {
                        self.infra.received(&m, r, sig, self.now);
                    }
                }
            }
            self.infra.advance(self.now);
            self.collect();
        }
        self.now = end;
    }

    fn associated(&self) -> Vec<(u32, u32, Option<u32>)> {
        self.events
            .iter()
            .filter_map(|e| match *e {
                BssEvent::Associated { sta, ap, from, .. } => Some((sta, ap, from)),
                _ => None,
            })
            .collect()
    }
}

fn ap(ssid: &str) -> Role {
    Role::Ap(ApConfig::new(ssid))
}

fn sta(ssid: &str) -> Role {
    Role::Station(StaConfig::new(ssid))
}

/// A fixed signal per pair (both ways), −100 (nothing) for pairs not listed.
fn table(pairs: &[(u32, u32, f64)]) -> impl Fn(u32, u32, u64) -> f64 + '_ {
    move |a, b, _| {
        pairs.iter().find(|p| (p.0, p.1) == (a, b) || (p.0, p.1) == (b, a)).map_or(-100.0, |p| p.2)
    }
}

#[test]
fn a_station_joins_the_strongest_access_point_of_its_ssid() {
    // 0, 1: "lab" at −60 and −50 dBm; 2: "other" at −30; 3: the station.
    let sig = [(0, 3, -60.0), (1, 3, -50.0), (2, 3, -30.0)];
    let mut air = Air::new(vec![ap("lab"), ap("lab"), ap("other"), sta("lab")], table(&sig));
    air.run_until(200 * MS);
    assert_eq!(air.associated(), [(3, 1, None)]);
    assert_eq!(air.infra.ap_of(3), Some(1));
    assert_eq!(air.infra.stations_of(1), [3]);
    // Switched on (member 3 starts 3.9 ms in: stations do not all probe in one slot),
    // an active scan (probe, 30 ms of answers), then auth and association (1 ms each way).
    let BssEvent::Associated { at_ns, .. } = air.events[0] else { panic!() };
    assert_eq!(at_ns, 3_900_000 + 30 * MS + 4 * MS, "{:?}", air.sent);
    let kinds: Vec<MgmtKind> = air
        .sent
        .iter()
        .filter(|(_, m)| m.from == 3 || m.to == Some(3))
        .map(|(_, m)| m.kind)
        .collect();
    assert_eq!(
        kinds,
        [
            MgmtKind::ProbeRequest,
            MgmtKind::ProbeResponse,
            MgmtKind::ProbeResponse,
            MgmtKind::AuthRequest,
            MgmtKind::AuthResponse,
            MgmtKind::AssocRequest { reassoc: false },
            MgmtKind::AssocResponse,
        ]
    );
}

/// A station that found no access point joins the first of its SSID it hears after.
#[test]
fn a_station_that_found_none_joins_the_first_it_hears() {
    // The access point is off the air until 100 ms: the station's scan finds nothing.
    let signal = |_, _, t: u64| if t < 100 * MS { -100.0 } else { -50.0 };
    let mut air = Air::new(vec![ap("lab"), sta("lab")], signal);
    air.run_until(400 * MS);
    assert_eq!(air.associated(), [(1, 0, None)]);
    let BssEvent::Associated { at_ns, .. } = air.events[0] else { panic!() };
    // The first beacon heard (sent at 102.4 ms), not the scan a second later.
    assert!(at_ns > 103 * MS && at_ns < 115 * MS, "{at_ns}");
}

#[test]
fn a_passive_station_joins_after_hearing_beacons() {
    let sig = [(0, 1, -55.0)];
    let mut cfg = StaConfig::new("lab");
    cfg.scan = Scan::Passive;
    let mut air = Air::new(vec![ap("lab"), Role::Station(cfg)], table(&sig));
    air.run_until(400 * MS);
    assert_eq!(air.associated(), [(1, 0, None)]);
    assert!(!air.sent.iter().any(|(_, m)| m.kind == MgmtKind::ProbeRequest));
    let BssEvent::Associated { at_ns, .. } = air.events[0] else { panic!() };
    assert!(at_ns > 150 * TU_NS && at_ns < 160 * TU_NS, "{at_ns}");
}

#[test]
fn beacons_keep_their_interval_and_sizes_are_802_11s() {
    let mut air = Air::new(vec![ap("lab")], |_, _, _| -100.0);
    air.run_until(S);
    let beacons: Vec<u64> = air.sent.iter().map(|(t, _)| *t).collect();
    assert_eq!(beacons.len(), 10, "{beacons:?}");
    assert!(beacons.windows(2).all(|w| w[1] - w[0] == 100 * TU_NS));
    let m = |kind| Mgmt { from: 0, to: None, kind, ssid: "lab1".into() };
    // Header 24 + timestamp, interval, capability 12 + SSID 6 + rates 10 + DS 3 + TIM 6 + FCS 4.
    assert_eq!(m(MgmtKind::Beacon).bytes(), 65);
    assert_eq!(m(MgmtKind::AuthRequest).bytes(), 34);
    assert_eq!(m(MgmtKind::AssocRequest { reassoc: true }).bytes(), 54);
}

/// A station walks from access point 0 toward 1 (5 dB/s weaker and stronger): under −70 dBm it
/// scans every second, and roams once 1 is 5 dB stronger — a reassociation, the old
/// access point forgetting it, in a few milliseconds of management frames.
#[test]
fn a_walking_station_roams_with_threshold_and_hysteresis() {
    let signal = |a: u32, b: u32, t: u64| {
        let s = t as f64 / S as f64;
        match (a.min(b), a.max(b)) {
            (0, 2) => -50.0 - 5.0 * s,
            (1, 2) => -85.0 + 5.0 * s,
            _ => -100.0,
        }
    };
    let mut air = Air::new(vec![ap("lab"), ap("lab"), sta("lab")], signal);
    air.run_until(8 * S);
    let assoc = air.associated();
    assert_eq!(assoc, [(2, 0, None), (2, 1, Some(0))]);
    let BssEvent::Associated { at_ns: roamed, .. } = air.events[1] else { panic!() };
    // Crossing: 0 under −70 from 4 s; 1 above 0 + 5 dB from 4 s too (−70 vs −65): the
    // first background scan after that (scans every second while weak) moves it.
    assert!(roamed > 4 * S && roamed < 5 * S + 100 * MS, "{roamed}");
    assert_eq!(air.infra.stations_of(0), [] as [u32; 0]);
    assert_eq!(air.infra.stations_of(1), [2]);
    // The move itself: probe, answers, auth and reassociation.
    assert!(air.sent.iter().any(|(_, m)| m.kind == MgmtKind::AssocRequest { reassoc: true }));
    // Never two access points at once, and no loss on the way.
    assert!(!air.events.iter().any(|e| matches!(e, BssEvent::Lost { .. })));
}

#[test]
fn hysteresis_keeps_a_station_where_it_is() {
    // Both weak and 3 dB apart: it scans, but stays.
    let sig = [(0, 2, -75.0), (1, 2, -72.0)];
    let mut air = Air::new(vec![ap("lab"), ap("lab"), sta("lab")], table(&sig));
    air.run_until(30 * MS);
    // (It joined 1, the stronger, at first.)
    air.run_until(5 * S);
    assert_eq!(air.associated(), [(2, 1, None)]);
    let probes = air.sent.iter().filter(|(_, m)| m.kind == MgmtKind::ProbeRequest).count();
    assert!(probes >= 4, "{probes} scans in 5 s under the threshold");
}

#[test]
fn a_silent_access_point_is_lost_after_its_missed_beacons_and_another_is_joined() {
    // 0 goes off the air at 1 s; 1 is weaker but there.
    let signal = |a: u32, b: u32, t: u64| match (a.min(b), a.max(b)) {
        (0, 2) if t < S => -50.0,
        (1, 2) => -65.0,
        _ => -100.0,
    };
    let mut air = Air::new(vec![ap("lab"), ap("lab"), sta("lab")], signal);
    air.run_until(3 * S);
    let lost: Vec<u64> = air
        .events
        .iter()
        .filter_map(|e| match e {
            BssEvent::Lost { sta: 2, ap: 0, at_ns } => Some(*at_ns),
            _ => None,
        })
        .collect();
    // Seven beacons missed (and half an interval) after the last heard, before 1 s.
    assert_eq!(lost.len(), 1);
    assert!(lost[0] > S + 600 * MS && lost[0] < S + 900 * MS, "{lost:?}");
    assert_eq!(air.associated(), [(2, 0, None), (2, 1, None)]);
}

#[test]
fn an_access_point_that_does_not_answer_is_given_up_after_three_tries() {
    // 0 is heard (its beacons and probe answers) but hears nothing the station sends.
    let signal = |a: u32, b: u32, _| match (a, b) {
        (0, 2) => -40.0,
        (2, 0) => -100.0,
        (1, 2) | (2, 1) => -60.0,
        _ => -100.0,
    };
    let mut air = Air::new(vec![ap("lab"), ap("lab"), sta("lab")], signal);
    air.run_until(2 * S);
    let asked_0 = air.sent.iter().filter(|(_, m)| m.to == Some(0) && m.from == 2).count();
    assert_eq!(asked_0, 3);
    assert_eq!(air.associated(), [(2, 1, None)]);
}

#[test]
fn data_goes_through_the_access_point_and_isolation_keeps_stations_apart() {
    let all = |_, _, _| -50.0;
    let mut iso = ApConfig::new("lab");
    iso.isolation = true;
    let mut air = Air::new(
        vec![ap("lab"), sta("lab"), sta("lab"), Role::AdHoc, Role::Ap(iso), sta("guest")],
        all,
    );
    air.run_until(200 * MS);
    assert_eq!(air.infra.ap_of(1), Some(0));
    assert_eq!(air.infra.ap_of(5), None, "no access point of its SSID");
    // A station's frames go to its access point, which relays to its other station or
    // takes the frame up (to its node, which bridges it on).
    assert_eq!(air.infra.route(1, Some(2)), Route::ToAp(0));
    assert_eq!(air.infra.relay(0, 1, Some(2)), Some(Route::Air { to: Some(2) }));
    assert_eq!(air.infra.relay(0, 1, None), None);
    assert!(air.infra.relays_broadcast(0));
    // The access point's own frames go to its stations only.
    assert_eq!(air.infra.route(0, Some(1)), Route::Air { to: Some(1) });
    assert_eq!(air.infra.route(0, Some(3)), Route::Drop);
    // Without an access point, nowhere; ad hoc, straight.
    assert_eq!(air.infra.route(5, Some(1)), Route::Drop);
    assert_eq!(air.infra.route(3, Some(1)), Route::Air { to: Some(1) });
    // Client isolation: two stations of the isolating access point.
    let mut air = Air::new(
        vec![
            Role::Ap(ApConfig { isolation: true, ..ApConfig::new("lab") }),
            sta("lab"),
            sta("lab"),
        ],
        all,
    );
    air.run_until(200 * MS);
    assert_eq!(air.infra.relay(0, 1, Some(2)), Some(Route::Drop));
    assert!(!air.infra.relays_broadcast(0));
    assert_eq!(air.infra.relay(0, 1, None), None, "still taken up to the wired side");
}

/// A station without an SSID joins the strongest access point it hears, whatever its
/// SSID, and asks it for its own.
#[test]
fn a_station_of_any_ssid_joins_the_strongest() {
    let sig = [(0, 2, -60.0), (1, 2, -50.0)];
    let mut air = Air::new(vec![ap("one"), ap("two"), sta("")], table(&sig));
    air.run_until(S);
    assert_eq!(air.associated(), [(2, 1, None)]);
    let ask = air.sent.iter().find(|(_, m)| matches!(m.kind, MgmtKind::AssocRequest { .. }));
    assert_eq!(ask.map(|(_, m)| m.ssid.as_str()), Some("two"));
    assert_eq!(air.infra.member(2).ssid, None);
}
