//! Infrastructure mode on the 802.11 DCF, on the virtual clock: stations associate with
//! real management frames on the air, and data frames go through their access point —
//! relayed in its BSS (two transmissions), taken up to its node, or stopped by client
//! isolation.

use vemu_radio::air::{Air, MGMT_IDS};
use vemu_radio::medium::{MediumConfig, Outcome};
use vemu_radio::propagation::Model;
use vemu_radio::wifi::bss::{ApConfig, BssEvent, Role, StaConfig};
use vemu_radio::wifi::phy::Standard;
use vemu_radio::Pos;

const MS: u64 = 1_000_000;

/// An 802.11g channel, free space, members at `xs` (m) with `roles`.
fn channel(xs: &[f64], roles: Vec<Role>) -> Air {
    let cfg = MediumConfig::dcf_channel(Standard::G, Model::FreeSpace, roles, xs.len(), 3);
    let pos: Vec<Pos> = xs.iter().map(|&x| Pos::new(x, 0.0)).collect();
    Air::new(cfg, &pos)
}

fn run(a: &mut Air, until_ns: u64) -> Vec<Outcome> {
    let mut out = Vec::new();
    while let Some(t) = a.next_event_ns().filter(|&t| t <= until_ns) {
        a.advance(t, &mut out);
    }
    out
}

fn receivers(out: &[Outcome], id: u64) -> Vec<u32> {
    out.iter()
        .filter_map(|o| match *o {
            Outcome::Deliver { id: i, receiver, .. } if i == id => Some(receiver),
            _ => None,
        })
        .collect()
}

fn lab(isolation: bool) -> Air {
    // 0: the access point; 1, 2: its stations; 3: an ad hoc member.
    let ap = Role::Ap(ApConfig { isolation, ..ApConfig::new("lab") });
    let sta = || Role::Station(StaConfig::new("lab"));
    channel(&[0.0, 10.0, 20.0, 30.0], vec![ap, sta(), sta(), Role::AdHoc])
}

#[test]
fn stations_associate_with_frames_on_the_air_and_none_reach_the_data_path() {
    let mut a = lab(false);
    let out = run(&mut a, 300 * MS);
    let infra = a.infra().unwrap();
    assert_eq!((infra.ap_of(1), infra.ap_of(2)), (Some(0), Some(0)));
    // The stations heard the access point (a signal average per station).
    assert!(infra.signal_dbm(1, 0).is_some_and(|s| s > -60.0));
    let events: Vec<BssEvent> = a.bss_log(0).into_iter().map(|(_, e)| e).collect();
    assert_eq!(events.len(), 2, "{events:?}");
    for e in &events {
        let BssEvent::Associated { ap: 0, from: None, at_ns, .. } = *e else { panic!("{e:?}") };
        // Active scan (30 ms) and four frames with their contention: well under 50 ms.
        assert!(at_ns > 30 * MS && at_ns < 50 * MS, "{events:?}");
    }
    // Management frames never reach the data path, nor do their ends.
    assert!(out.iter().all(|o| match o {
        Outcome::Deliver { id, .. } | Outcome::Done { id } => *id < MGMT_IDS,
        _ => true,
    }));
}

#[test]
fn a_station_reaches_another_through_its_access_point_in_two_transmissions() {
    let mut a = lab(false);
    run(&mut a, 300 * MS);
    assert!(a.offer(300 * MS, 1, 7, (1, 1000), Some(2)));
    let out = run(&mut a, 400 * MS);
    // Relayed: the access point does not take it up, the ad hoc member never has it.
    assert_eq!(receivers(&out, 7), [2]);
    assert_eq!(out.iter().filter(|o| **o == Outcome::Done { id: 7 }).count(), 1);
    let sent = |m: u32| a.stations().unwrap()[m as usize].tx_data;
    assert!(sent(0) >= 1, "the access point sent it on");
    // A frame for the access point's node, or beyond it: taken up there.
    assert!(a.offer(400 * MS, 1, 8, (1, 1000), Some(0)));
    let out = run(&mut a, 500 * MS);
    assert_eq!(receivers(&out, 8), [0]);
    // A station's broadcast: up at the access point, and repeated to its other station.
    assert!(a.offer(500 * MS, 1, 9, (1, 100), None));
    let out = run(&mut a, 600 * MS);
    let mut r = receivers(&out, 9);
    r.sort();
    assert_eq!(r, [0, 2]);
    // The access point's own frames: to its stations, not to the ad hoc member.
    assert!(a.offer(600 * MS, 0, 10, (1, 100), None));
    let out = run(&mut a, 700 * MS);
    let mut r = receivers(&out, 10);
    r.sort();
    assert_eq!(r, [1, 2]);
    assert!(!a.offer(700 * MS, 0, 11, (1, 100), Some(3)), "not a station of its BSS");
}

#[test]
fn client_isolation_stops_station_to_station_frames_at_the_access_point() {
    let mut a = lab(true);
    run(&mut a, 300 * MS);
    assert!(a.offer(300 * MS, 1, 7, (1, 1000), Some(2)));
    let out = run(&mut a, 400 * MS);
    assert!(receivers(&out, 7).is_empty());
    // (The data path still hears the frame is done with.)
    assert!(out.contains(&Outcome::Done { id: 7 }));
    assert!(a.offer(400 * MS, 1, 8, (1, 100), None));
    let out = run(&mut a, 500 * MS);
    assert_eq!(receivers(&out, 8), [0], "a broadcast goes up, not to the other station");
}

#[test]
fn a_station_without_an_access_point_sends_nothing() {
    let sta = Role::Station(StaConfig::new("nowhere"));
    let mut a = channel(&[0.0, 10.0], vec![Role::Ap(ApConfig::new("lab")), sta]);
    run(&mut a, 300 * MS);
    assert_eq!(a.infra().unwrap().ap_of(1), None);
    assert!(!a.offer(300 * MS, 1, 7, (1, 100), Some(0)));
}

/// A station walking from one access point to the next, sending a frame every 10 ms:
/// it roams, and the channel measures the handover from the last data frame through
/// the old access point to the first through the new one — and logs it after the
/// reassociation.
#[test]
fn a_walking_station_hands_over_and_the_channel_measures_the_gap() {
    let ap = || Role::Ap(ApConfig::new("lab"));
    let mut a =
        channel(&[0.0, 800.0, 50.0], vec![ap(), ap(), Role::Station(StaConfig::new("lab"))]);
    let mut id = 0;
    let mut out = Vec::new();
    // 100 m/s from 50 m to 750 m: 0 under −70 dBm from 320 m, 1 five dB stronger from
    // 512 m (4.6 s).
    for step in 1..=700u64 {
        let t = step * 10 * MS;
        a.set_positions(&[
            Pos::new(0.0, 0.0),
            Pos::new(800.0, 0.0),
            Pos::new(50.0 + step as f64, 0.0),
        ]);
        id += 1;
        a.offer(t, 2, id, (1, 200), None);
        while let Some(at) = a.next_event_ns().filter(|&at| at <= t + 10 * MS) {
            a.advance(at, &mut out);
        }
    }
    let log: Vec<BssEvent> = a.bss_log(0).into_iter().map(|(_, e)| e).collect();
    let handovers: Vec<_> = log.iter().filter(|e| matches!(e, BssEvent::Handover { .. })).collect();
    assert_eq!(handovers.len(), 1, "{log:?}");
    let BssEvent::Handover { sta: 2, from: 0, to: 1, last_ns, first_ns } = *handovers[0] else {
        panic!("{log:?}")
    };
    let roamed = log
        .iter()
        .find_map(|e| match *e {
            BssEvent::Associated { from: Some(0), at_ns, .. } => Some(at_ns),
            _ => None,
        })
        .expect("a reassociation");
    assert!(roamed > 4600 * MS && roamed < 5700 * MS, "{log:?}");
    // The gap spans the reassociation, about the frames' own spacing (10 ms): the reassociation takes a few ms.
    assert!(last_ns < roamed && first_ns > roamed, "{log:?}");
    assert!(first_ns - last_ns < 30 * MS, "{log:?}");
    // Numbered in order, the handover last.
    assert_eq!(a.bss_log(a.bss_log(0).len() as u64 - 1).len(), 1);
}

/// `channel`, with each member's radio on the channel given.
fn on_channels(xs: &[f64], roles: Vec<Role>, channels: &[u16]) -> Air {
    let mut cfg = MediumConfig::dcf_channel(Standard::G, Model::FreeSpace, roles, xs.len(), 3);
    let setup = cfg.dcf.as_mut().expect("a DCF");
    for (s, &c) in setup.stations.iter_mut().zip(channels) {
        s.channel = c;
    }
    let pos: Vec<Pos> = xs.iter().map(|&x| Pos::new(x, 0.0)).collect();
    Air::new(cfg, &pos)
}

/// Access points on channels 1 and 6: a station switched on on channel 1 scans both
/// (a probe request on each, 30 ms apart) and joins the stronger, on channel 6, where
/// its radio stays; the frames of the other BSS are not on its channel.
#[test]
fn a_station_scans_every_access_points_channel_and_joins_on_the_strongest_ones() {
    let ap = || Role::Ap(ApConfig::new("lab"));
    let sta = Role::Station(StaConfig::new("lab"));
    let mut a = on_channels(&[0.0, 100.0, 90.0], vec![ap(), ap(), sta], &[1, 6, 1]);
    run(&mut a, 300 * MS);
    let infra = a.infra().unwrap();
    assert_eq!(infra.ap_of(2), Some(1));
    assert_eq!((infra.channel(2), infra.away(2)), (6, false));
    assert_eq!(infra.member(2).channel, Some(6));
    assert_eq!(infra.member(0).channel, Some(1));
    let events: Vec<BssEvent> = a.bss_log(0).into_iter().map(|(_, e)| e).collect();
    let [BssEvent::Associated { sta: 2, ap: 1, from: None, at_ns }] = events[..] else {
        panic!("{events:?}")
    };
    // Two channels of 30 ms, then four frames: later than on one channel (30–50 ms).
    assert!(at_ns > 60 * MS && at_ns < 80 * MS, "{events:?}");
    // Access point 0 (channel 1) does not hear the station's data on channel 6.
    let mut out = Vec::new();
    assert!(a.offer(300 * MS, 2, 7, (1, 200), None));
    while let Some(t) = a.next_event_ns().filter(|&t| t <= 320 * MS) {
        a.advance(t, &mut out);
    }
    assert_eq!(receivers(&out, 7), vec![1]);
}

/// The walk of `a_walking_station_hands_over_and_the_channel_measures_the_gap` between
/// access points on channels 1 and 11: the station's background scans take it off
/// channel 1 for 30 ms at a time and it roams to channel 11 — and every frame it sends
/// meanwhile waits for it to be back on its access point's channel, none lost to a
/// channel nobody is listening on.
#[test]
fn a_station_roams_to_another_channel_and_its_frames_wait_while_it_scans() {
    let ap = || Role::Ap(ApConfig::new("lab"));
    let sta = Role::Station(StaConfig::new("lab"));
    let mut a = on_channels(&[0.0, 800.0, 50.0], vec![ap(), ap(), sta], &[1, 11, 1]);
    let mut out = Vec::new();
    let (mut away, mut accepted) = (0, Vec::new());
    for step in 1..=700u64 {
        let t = step * 10 * MS;
        let x = 50.0 + step as f64;
        a.set_positions(&[Pos::new(0.0, 0.0), Pos::new(800.0, 0.0), Pos::new(x, 0.0)]);
        let is_away = a.infra().unwrap().away(2);
        away += u32::from(is_away);
        // (Refused before its first association.)
        if a.offer(t, 2, step, (1, 200), None) {
            accepted.push(step);
        }
        while let Some(at) = a.next_event_ns().filter(|&at| at <= t + 10 * MS) {
            a.advance(at, &mut out);
        }
    }
    let infra = a.infra().unwrap();
    assert_eq!((infra.ap_of(2), infra.channel(2)), (Some(1), 11));
    let log: Vec<BssEvent> = a.bss_log(0).into_iter().map(|(_, e)| e).collect();
    let roamed = log
        .iter()
        .find_map(|e| match *e {
            BssEvent::Associated { ap: 1, from: Some(0), at_ns, .. } => Some(at_ns),
            _ => None,
        })
        .expect("a reassociation");
    // As on one channel: the scans hear channel 11's access point as they go.
    assert!(roamed > 4600 * MS && roamed < 5700 * MS, "{log:?}");
    assert!(log.iter().any(|e| matches!(e, BssEvent::Handover { from: 0, to: 1, .. })), "{log:?}");
    // It was off channel (background scans of channel 11, and the reassociation) while
    // frames were offered, and all but the first few were taken.
    assert!(away >= 3, "away {away}");
    assert!(accepted.len() >= 690, "{} accepted", accepted.len());
    // Every frame taken reached an access point: none lost to a channel nobody was
    // listening on (the walk stays in reach of one or the other).
    let lost: Vec<u64> =
        accepted.iter().copied().filter(|&id| receivers(&out, id).is_empty()).collect();
    assert!(lost.is_empty(), "lost {lost:?} {log:?}");
}
