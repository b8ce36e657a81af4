//! Infrastructure mode, sans-IO on the lab clock: access points that beacon and answer
//! probes, authentications (open system) and associations; stations that scan (active
//! or passive), join the strongest access point of their SSID, notice a lost one
//! (missed beacons), and roam to a better one by signal strength with a threshold and a
//! hysteresis, scanning in the background; and where a data frame goes — a station's
//! through its access point, relayed to another station of the same BSS unless the
//! access point isolates its clients.
//!
//! [`Infra`] holds the roles of one channel's members. Its management frames
//! ([`Mgmt`]) are real frames: whoever drives it offers them to the channel's MAC
//! ([`crate::wifi::dcf`]) and hands back what each member received, with the signal it
//! was received at ([`Infra::received`]); time moves with [`Infra::advance`]. What it
//! decides — a station associated, roamed, lost its access point — comes out as
//! [`BssEvent`]s.
//!
//! Access points keep their channels; a station's radio moves ([`Tune`]): a scan visits
//! each channel an access point of the segment is on in turn (a probe request and
//! `probe_wait_ns` on each, or 150 TU of listening), and the station joins its access
//! point on that one's channel. A background scan takes it away from its access
//! point's channel for as long as it listens on the others; whoever carries its frames
//! holds them meanwhile ([`Infra::away`]), as mac80211 stops a station's queues and its
//! access point buffers for it while it is off channel. Not modelled: WPA (keys, 4-way
//! handshake), power save beyond that, 802.11r/k/v (fast transition, neighbour
//! reports), channels overlapping (1 and 2 do not hear each other).

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

/// A time unit of 802.11: 1,024 µs.
pub const TU_NS: u64 = 1_024_000;

/// An access point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApConfig {
    pub ssid: String,
    /// Beacon interval (802.11's default: 100 TU).
    pub beacon_interval_ns: u64,
    /// Client isolation: stations of the BSS do not reach each other through it.
    pub isolation: bool,
}

impl ApConfig {
    pub fn new(ssid: &str) -> ApConfig {
        ApConfig { ssid: ssid.into(), beacon_interval_ns: 100 * TU_NS, isolation: false }
    }
}

/// How a station looks for access points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scan {
    /// It sends a probe request and listens for the answers.
    Active,
    /// It listens for beacons.
    Passive,
}

/// A station that joins an SSID.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StaConfig {
    /// The SSID it joins (empty: any — the strongest access point it hears, as
    /// Mininet-WiFi's stations without a link to one do).
    pub ssid: String,
    pub scan: Scan,
    /// Below this signal from its access point it looks for a better one, dBm.
    pub roam_threshold_dbm: f64,
    /// It moves only to an access point this much stronger than its own, dB.
    pub hysteresis_db: f64,
    /// How often it scans in the background while under the threshold.
    pub scan_interval_ns: u64,
    /// Beacons missed in a row that make its access point lost.
    pub beacon_loss: u32,
    /// How long an active scan waits for answers (a passive one: 1.5 beacon intervals).
    pub probe_wait_ns: u64,
    /// How long it waits for an authentication or association answer, and how often
    /// it asks before it gives that access point up.
    pub answer_timeout_ns: u64,
    pub tries: u32,
}

impl StaConfig {
    /// Defaults of the order of Linux's (mac80211 and wpa_supplicant): a −70 dBm
    /// threshold, 5 dB of hysteresis, a background scan every second under it, seven
    /// missed beacons, 30 ms of probe wait, 200 ms answer timeouts, three tries.
    /// Whether it joins an access point of SSID `ssid` (its own; any, when it has none).
    pub fn joins(&self, ssid: &str) -> bool {
        self.ssid.is_empty() || self.ssid == ssid
    }

    pub fn new(ssid: &str) -> StaConfig {
        StaConfig {
            ssid: ssid.into(),
            scan: Scan::Active,
            roam_threshold_dbm: -70.0,
            hysteresis_db: 5.0,
            scan_interval_ns: 1_000_000_000,
            beacon_loss: 7,
            probe_wait_ns: 30_000_000,
            answer_timeout_ns: 200_000_000,
            tries: 3,
        }
    }
}

/// A member's part in the channel.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Ad hoc: it talks to whoever it hears (as every member of a radio segment did).
    #[default]
    AdHoc,
    Ap(ApConfig),
    Station(StaConfig),
}

/// A management frame's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MgmtKind {
    Beacon,
    ProbeRequest,
    ProbeResponse,
    /// Open-system authentication: the station's request and the answer.
    AuthRequest,
    AuthResponse,
    /// (Re)association request and its answer.
    AssocRequest {
        reassoc: bool,
    },
    AssocResponse,
    Disassoc,
}

impl MgmtKind {
    /// Sent by an access point (beacons and answers), else by a station.
    pub fn from_ap(self) -> bool {
        matches!(
            self,
            MgmtKind::Beacon
                | MgmtKind::ProbeResponse
                | MgmtKind::AuthResponse
                | MgmtKind::AssocResponse
        )
    }
}

/// A management frame, from member `from` to member `to` (`None`: broadcast).
#[derive(Debug, Clone, PartialEq)]
pub struct Mgmt {
    pub from: u32,
    pub to: Option<u32>,
    pub kind: MgmtKind,
    pub ssid: String,
}

impl Mgmt {
    /// Its length on the air, bytes: the 24-byte MAC header, the body (fixed fields and
    /// the information elements vemu's access points and stations send: SSID, 8
    /// supported rates, DS parameter set, TIM in beacons) and the FCS.
    pub fn bytes(&self) -> u64 {
        let ssid = 2 + self.ssid.len() as u64;
        let rates = 10;
        let body = match self.kind {
            MgmtKind::Beacon => 12 + ssid + rates + 3 + 6,
            MgmtKind::ProbeResponse => 12 + ssid + rates + 3,
            MgmtKind::ProbeRequest => ssid + rates,
            MgmtKind::AuthRequest | MgmtKind::AuthResponse => 6,
            MgmtKind::AssocRequest { reassoc } => 4 + if reassoc { 6 } else { 0 } + ssid + rates,
            MgmtKind::AssocResponse => 6 + rates,
            MgmtKind::Disassoc => 2,
        };
        24 + body + 4
    }
}

/// Station `sta`'s radio is on `channel` from now; `away`: not its access point's (a
/// background scan, or joining another access point), so that its frames, and its
/// access point's to it, wait until it is back ([`Infra::poll_tune`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tune {
    pub sta: u32,
    pub channel: u16,
    pub away: bool,
}

/// What the infrastructure decided, or (a handover) what its data frames did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum BssEvent {
    /// Station `sta` is associated with access point `ap` (`from`: the access point it
    /// roamed from, `None` for a first association or one after a loss).
    Associated { sta: u32, ap: u32, from: Option<u32>, at_ns: u64 },
    /// Station `sta` lost access point `ap` (its beacons stopped).
    Lost { sta: u32, ap: u32, at_ns: u64 },
    /// Station `sta`'s data moved from access point `from` to `to`: its last data frame
    /// through `from` reached its end at `last_ns`, its first through `to` at `first_ns`
    /// (the handover's time is the difference; measured by the channel, which sees
    /// both, [`crate::air::DcfAir`]).
    Handover { sta: u32, from: u32, to: u32, last_ns: u64, first_ns: u64 },
}

impl BssEvent {
    /// When it happened, lab ns.
    pub fn at_ns(&self) -> u64 {
        match *self {
            BssEvent::Associated { at_ns, .. } | BssEvent::Lost { at_ns, .. } => at_ns,
            BssEvent::Handover { first_ns, .. } => first_ns,
        }
    }
}

/// A member as infrastructure mode sees it now ([`Infra::member`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberState {
    /// `ap`, `station` or `adhoc`.
    pub role: String,
    /// Its SSID (an access point's, or the one a station joins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssid: Option<String>,
    /// A station: its access point, and the signal it hears it at (average), dBm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ap: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal_dbm: Option<f64>,
    /// An access point: its stations, in member order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stations: Vec<u32>,
    /// The channel its radio is on now (an access point's, or where a station is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<u16>,
}

/// Where a data frame goes ([`Infra::route`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Over the air to these members (ad hoc: the destination, or every one for a
    /// broadcast — the channel decides who hears it).
    Air { to: Option<u32> },
    /// Over the air to the sender's access point, which then decides again.
    ToAp(u32),
    /// Nowhere: a station without an access point, or another station of an isolating
    /// BSS.
    Drop,
}

#[derive(Debug, Clone, PartialEq)]
enum StaState {
    /// Looking for access points on the channel it is on until `until_ns`, then on
    /// the scan's channel number `next` ([`Infra::visit`]).
    Scanning {
        until_ns: u64,
        next: usize,
    },
    /// Found none: scans again at `until_ns` (or joins the first it hears meanwhile).
    Waiting {
        until_ns: u64,
    },
    /// Switched on: scans first at `until_ns`.
    Starting {
        until_ns: u64,
    },
    /// Waiting for `ap`'s answer to what it last sent (`tries` so far, until `until_ns`).
    Authenticating {
        ap: u32,
        tries: u32,
        until_ns: u64,
    },
    Associating {
        ap: u32,
        tries: u32,
        until_ns: u64,
    },
    Associated {
        ap: u32,
    },
}

#[derive(Debug, Clone)]
struct Sta {
    cfg: StaConfig,
    state: StaState,
    /// The access point it is associated with while it joins another (a handover).
    current: Option<u32>,
    /// Access points heard: (signal, averaged, dBm; when last heard, ns).
    heard: BTreeMap<u32, (f64, u64)>,
    /// The background scan in progress leaves the channel it is on then (for the
    /// scan's channel number `scan_next`, or back home); the next one may start then.
    scan_until_ns: Option<u64>,
    scan_next: usize,
    next_scan_ns: u64,
    /// Its radio's channel, and whether that is not its access point's.
    channel: u16,
    away: bool,
    /// APs it gave up on (no answer), until it next scans.
    refused: Vec<u32>,
}

#[derive(Debug, Clone)]
struct Ap {
    cfg: ApConfig,
    next_beacon_ns: u64,
    /// Stations associated.
    stations: Vec<u32>,
}

/// The roles of one channel's members ([`Role`]), their state and what they send.
#[derive(Debug, Clone)]
pub struct Infra {
    roles: Vec<Role>,
    aps: BTreeMap<u32, Ap>,
    stas: BTreeMap<u32, Sta>,
    out: VecDeque<Mgmt>,
    events: VecDeque<BssEvent>,
    /// Each member's channel at the start (an access point's for good).
    channels: Vec<u16>,
    /// The channels a station scans: those of the access points, in order.
    scan_list: Vec<u16>,
    tunes: VecDeque<Tune>,
}

/// How much a new signal reading moves a station's average of an access point's.
const SIGNAL_WEIGHT: f64 = 0.25;

/// A reading of an access point's signal this much older than a new one is forgotten
/// (the new one is the average), ns: five beacons of the default interval.
const STALE_NS: u64 = 500 * TU_NS;

impl Infra {
    /// The members' roles, all on one channel.
    pub fn new(roles: Vec<Role>) -> Infra {
        Infra::on_channels(roles, Vec::new())
    }

    /// The members' roles and their radios' channels (in member order; channel 1 for
    /// those not given); access points' first beacons are spread over their interval
    /// (by member number), stations start scanning at once.
    pub fn on_channels(roles: Vec<Role>, mut channels: Vec<u16>) -> Infra {
        channels.resize(roles.len(), 1);
        let mut aps = BTreeMap::new();
        let mut stas = BTreeMap::new();
        for (i, r) in roles.iter().enumerate() {
            let i = i as u32;
            match r {
                Role::Ap(cfg) => {
                    let first = (u64::from(i) * 7_919_000) % cfg.beacon_interval_ns.max(1);
                    aps.insert(
                        i,
                        Ap { cfg: cfg.clone(), next_beacon_ns: first, stations: Vec::new() },
                    );
                }
                Role::Station(cfg) => {
                    stas.insert(
                        i,
                        Sta {
                            cfg: cfg.clone(),
                            state: StaState::Starting { until_ns: 0 },
                            current: None,
                            heard: BTreeMap::new(),
                            scan_until_ns: None,
                            scan_next: 0,
                            next_scan_ns: 0,
                            refused: Vec::new(),
                            channel: channels[i as usize],
                            away: false,
                        },
                    );
                }
                Role::AdHoc => {}
            }
        }
        let mut scan_list: Vec<u16> = aps.keys().map(|&a| channels[a as usize]).collect();
        scan_list.sort_unstable();
        scan_list.dedup();
        let mut infra = Infra {
            roles,
            aps,
            stas,
            out: VecDeque::new(),
            events: VecDeque::new(),
            channels,
            scan_list,
            tunes: VecDeque::new(),
        };
        // Stations start their first scan a few milliseconds apart (real ones are not
        // switched on in the same slot: their probe requests would collide).
        for (&s, st) in infra.stas.iter_mut() {
            st.state = StaState::Starting { until_ns: u64::from(s) * 1_300_000 % 10_000_000 };
        }
        infra
    }

    /// Whether any of `roles` is an access point or a station.
    pub fn wanted(roles: &[Role]) -> bool {
        roles.iter().any(|r| *r != Role::AdHoc)
    }

    pub fn role(&self, member: u32) -> Option<&Role> {
        self.roles.get(member as usize)
    }

    /// The access point station `sta` is associated with.
    pub fn ap_of(&self, sta: u32) -> Option<u32> {
        match self.stas.get(&sta)?.state {
            StaState::Associated { ap } => Some(ap),
            _ => self.stas[&sta].current,
        }
    }

    /// The stations associated with access point `ap`.
    pub fn stations_of(&self, ap: u32) -> &[u32] {
        self.aps.get(&ap).map_or(&[], |a| &a.stations)
    }

    /// The channel member `m`'s radio is on now.
    pub fn channel(&self, m: u32) -> u16 {
        match self.stas.get(&m) {
            Some(st) => st.channel,
            None => self.channels.get(m as usize).copied().unwrap_or(1),
        }
    }

    /// Whether station `sta` is off its access point's channel (scanning the others,
    /// or joining another access point): its frames, and its access point's to it,
    /// wait.
    pub fn away(&self, sta: u32) -> bool {
        self.stas.get(&sta).is_some_and(|s| s.away)
    }

    /// The next station whose radio moved to another channel (or came home).
    pub fn poll_tune(&mut self) -> Option<Tune> {
        self.tunes.pop_front()
    }

    /// The signal station `sta` hears access point `ap` at (its average), dBm.
    pub fn signal_dbm(&self, sta: u32, ap: u32) -> Option<f64> {
        self.stas.get(&sta)?.heard.get(&ap).map(|h| h.0)
    }

    /// Member `m` as infrastructure mode sees it now.
    pub fn member(&self, m: u32) -> MemberState {
        let none = MemberState {
            role: "adhoc".into(),
            ssid: None,
            ap: None,
            signal_dbm: None,
            stations: Vec::new(),
            channel: None,
        };
        let channel = Some(self.channel(m));
        match self.roles.get(m as usize) {
            Some(Role::Ap(a)) => {
                let mut stations = self.stations_of(m).to_vec();
                stations.sort_unstable();
                let ssid = Some(a.ssid.clone());
                MemberState { role: "ap".into(), ssid, stations, channel, ..none }
            }
            Some(Role::Station(c)) => {
                let ap = self.ap_of(m);
                MemberState {
                    role: "station".into(),
                    ssid: (!c.ssid.is_empty()).then(|| c.ssid.clone()),
                    ap,
                    signal_dbm: ap.and_then(|a| self.signal_dbm(m, a)),
                    channel,
                    ..none
                }
            }
            _ => none,
        }
    }

    /// When something is next due.
    pub fn next_event_ns(&self) -> Option<u64> {
        let beacons = self.aps.values().map(|a| a.next_beacon_ns);
        let stas = self.stas.values().filter_map(|s| match s.state {
            StaState::Scanning { until_ns, .. }
            | StaState::Waiting { until_ns }
            | StaState::Starting { until_ns }
            | StaState::Authenticating { until_ns, .. }
            | StaState::Associating { until_ns, .. } => Some(until_ns),
            StaState::Associated { .. } => s.scan_until_ns.or_else(|| {
                // (The next background scan, and the beacon-loss watch.)
                let lost = self.loss_due(s);
                Some(lost.min(self.scan_due(s).unwrap_or(u64::MAX)))
            }),
        });
        beacons.chain(stas).min()
    }

    /// The next management frame to put on the air.
    pub fn poll_transmit(&mut self) -> Option<Mgmt> {
        self.out.pop_front()
    }

    pub fn poll_event(&mut self) -> Option<BssEvent> {
        self.events.pop_front()
    }

    /// Carry out what is due by `now_ns`.
    pub fn advance(&mut self, now_ns: u64) {
        let ids: Vec<u32> = self.aps.keys().copied().collect();
        for a in ids {
            let ap = self.aps.get_mut(&a).expect("an access point");
            while ap.next_beacon_ns <= now_ns {
                ap.next_beacon_ns += ap.cfg.beacon_interval_ns.max(1);
                let ssid = ap.cfg.ssid.clone();
                self.out.push_back(Mgmt { from: a, to: None, kind: MgmtKind::Beacon, ssid });
            }
        }
        let ids: Vec<u32> = self.stas.keys().copied().collect();
        for s in ids {
            self.station_timers(s, now_ns);
        }
    }

    /// What station `s` does at `now_ns`: a scan ended, an answer that did not come, a
    /// lost access point, a background scan due.
    fn station_timers(&mut self, s: u32, now_ns: u64) {
        let st = &self.stas[&s];
        match st.state.clone() {
            StaState::Scanning { until_ns, next } if until_ns <= now_ns => {
                match self.visit(s, next, now_ns) {
                    Some(until_ns) => {
                        let st = self.stas.get_mut(&s).expect("a station");
                        st.state = StaState::Scanning { until_ns, next: next + 1 };
                    }
                    None => self.choose(s, now_ns),
                }
            }
            StaState::Waiting { until_ns } | StaState::Starting { until_ns }
                if until_ns <= now_ns =>
            {
                self.start_scan(s, now_ns)
            }
            StaState::Authenticating { ap, tries, until_ns } if until_ns <= now_ns => {
                if tries < st.cfg.tries {
                    self.ask(s, ap, MgmtKind::AuthRequest, tries + 1, now_ns);
                } else {
                    self.give_up(s, ap, now_ns);
                }
            }
            StaState::Associating { ap, tries, until_ns } if until_ns <= now_ns => {
                if tries < st.cfg.tries {
                    let reassoc = st.current.is_some();
                    self.ask(s, ap, MgmtKind::AssocRequest { reassoc }, tries + 1, now_ns);
                } else {
                    self.give_up(s, ap, now_ns);
                }
            }
            StaState::Associated { ap } => {
                if self.loss_due(st) <= now_ns {
                    self.lose(s, ap, now_ns);
                } else if st.scan_until_ns.is_some_and(|t| t <= now_ns) {
                    let next = st.scan_next;
                    match self.visit(s, next, now_ns) {
                        Some(until_ns) => {
                            let st = self.stas.get_mut(&s).expect("a station");
                            (st.scan_until_ns, st.scan_next) = (Some(until_ns), next + 1);
                        }
                        None => {
                            self.stas.get_mut(&s).unwrap().scan_until_ns = None;
                            self.tune(s, self.channels[ap as usize]);
                            self.maybe_roam(s, ap, now_ns);
                        }
                    }
                } else if self.scan_due(st).is_some_and(|t| t <= now_ns) {
                    self.background_scan(s, now_ns);
                }
            }
            _ => {}
        }
    }

    /// When station `st` calls its access point lost, if no beacon comes meanwhile.
    fn loss_due(&self, st: &Sta) -> u64 {
        let StaState::Associated { ap } = st.state else { return u64::MAX };
        let interval = self.aps.get(&ap).map_or(100 * TU_NS, |a| a.cfg.beacon_interval_ns);
        let last = st.heard.get(&ap).map_or(0, |h| h.1);
        last + u64::from(st.cfg.beacon_loss.max(1)) * interval + interval / 2
    }

    /// When station `st` scans in the background next (under its threshold only).
    fn scan_due(&self, st: &Sta) -> Option<u64> {
        let StaState::Associated { ap } = st.state else { return None };
        let weak = st.heard.get(&ap).is_some_and(|h| h.0 < st.cfg.roam_threshold_dbm);
        (weak && st.scan_until_ns.is_none()).then_some(st.next_scan_ns)
    }

    fn start_scan(&mut self, s: u32, now_ns: u64) {
        self.stas.get_mut(&s).expect("a station").refused.clear();
        let until_ns = self.visit(s, 0, now_ns).expect("a channel to scan");
        self.stas.get_mut(&s).expect("a station").state = StaState::Scanning { until_ns, next: 1 };
    }

    fn background_scan(&mut self, s: u32, now_ns: u64) {
        let until_ns = self.visit(s, 0, now_ns).expect("a channel to scan");
        let st = self.stas.get_mut(&s).expect("a station");
        (st.scan_until_ns, st.scan_next) = (Some(until_ns), 1);
        st.next_scan_ns = now_ns + st.cfg.scan_interval_ns;
    }

    /// A scan by station `s` visits the `n`th of the access points' channels (its own,
    /// when the segment has no access point), if there is one: there it listens until
    /// the time returned ([`Infra::listen`]).
    fn visit(&mut self, s: u32, n: usize, now_ns: u64) -> Option<u64> {
        let channel = match self.scan_list.is_empty() {
            true => (n == 0).then(|| self.channel(s)),
            false => self.scan_list.get(n).copied(),
        }?;
        Some(now_ns + self.listen(s, channel))
    }

    /// Station `s`'s radio moves to `channel` (if it is not there): away when that is
    /// not the channel of the access point it is associated with (or, while it joins
    /// another, was).
    fn tune(&mut self, s: u32, channel: u16) {
        let st = &self.stas[&s];
        let home = match st.state {
            StaState::Associated { ap } => Some(ap),
            _ => st.current,
        };
        let away = home.is_some_and(|a| self.channels[a as usize] != channel);
        let st = self.stas.get_mut(&s).expect("a station");
        if (st.channel, st.away) != (channel, away) {
            (st.channel, st.away) = (channel, away);
            self.tunes.push_back(Tune { sta: s, channel, away });
        }
    }

    /// A scan by station `s` visits `channel`: an active one sends its probe request
    /// there. How long it listens (a passive one: 1.5 beacon intervals of the default).
    fn listen(&mut self, s: u32, channel: u16) -> u64 {
        self.tune(s, channel);
        let st = &self.stas[&s];
        match st.cfg.scan {
            Scan::Active => {
                let (wait, ssid) = (st.cfg.probe_wait_ns, st.cfg.ssid.clone());
                self.out.push_back(Mgmt { from: s, to: None, kind: MgmtKind::ProbeRequest, ssid });
                wait
            }
            Scan::Passive => 150 * TU_NS,
        }
    }

    /// The strongest access point of the station's SSID it heard (lately), but those it
    /// gave up on.
    fn best(&self, s: u32, now_ns: u64) -> Option<(u32, f64)> {
        let st = &self.stas[&s];
        st.heard
            .iter()
            .filter(|(ap, h)| {
                !st.refused.contains(ap)
                    && now_ns.saturating_sub(h.1) <= 2_000_000_000
                    && self.aps.get(ap).is_some_and(|a| st.cfg.joins(&a.cfg.ssid))
            })
            .map(|(&ap, h)| (ap, h.0))
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
    }

    /// A scan is over: join the best access point heard, or scan again.
    fn choose(&mut self, s: u32, now_ns: u64) {
        match self.best(s, now_ns) {
            Some((ap, _)) => self.ask(s, ap, MgmtKind::AuthRequest, 1, now_ns),
            None => {
                // Nothing heard: look again after a pause (a second), as wpa_supplicant does.
                let st = self.stas.get_mut(&s).unwrap();
                st.current = None;
                st.state = StaState::Waiting { until_ns: now_ns + 1_000_000_000 };
            }
        }
    }

    /// A background scan is over: roam if another access point is enough stronger.
    fn maybe_roam(&mut self, s: u32, ap: u32, now_ns: u64) {
        let st = &self.stas[&s];
        let own = st.heard.get(&ap).map_or(f64::NEG_INFINITY, |h| h.0);
        let hysteresis = st.cfg.hysteresis_db;
        if let Some((better, signal)) = self.best(s, now_ns) {
            if better != ap && signal > own + hysteresis {
                let st = self.stas.get_mut(&s).unwrap();
                st.current = Some(ap);
                self.ask(s, better, MgmtKind::AuthRequest, 1, now_ns);
            }
        }
    }

    /// Send `kind` to `ap` (try number `tries`, on its channel) and wait for its answer.
    fn ask(&mut self, s: u32, ap: u32, kind: MgmtKind, tries: u32, now_ns: u64) {
        self.tune(s, self.channels[ap as usize]);
        let st = self.stas.get_mut(&s).expect("a station");
        let until_ns = now_ns + st.cfg.answer_timeout_ns;
        st.state = match kind {
            MgmtKind::AuthRequest => StaState::Authenticating { ap, tries, until_ns },
            _ => StaState::Associating { ap, tries, until_ns },
        };
        // (A station of any SSID asks for the access point's.)
        let ssid = match st.cfg.ssid.is_empty() {
            true => self.aps.get(&ap).map(|a| a.cfg.ssid.clone()).unwrap_or_default(),
            false => st.cfg.ssid.clone(),
        };
        self.out.push_back(Mgmt { from: s, to: Some(ap), kind, ssid });
    }

    /// `ap` did not answer: try the next best, or (roaming) stay where it was.
    fn give_up(&mut self, s: u32, ap: u32, now_ns: u64) {
        let st = self.stas.get_mut(&s).expect("a station");
        st.refused.push(ap);
        match st.current {
            Some(own) => {
                st.state = StaState::Associated { ap: own };
                self.tune(s, self.channels[own as usize]);
            }
            None => self.choose(s, now_ns),
        }
    }

    /// Station `s` stopped hearing its access point: it is lost, and it scans.
    fn lose(&mut self, s: u32, ap: u32, now_ns: u64) {
        if let Some(a) = self.aps.get_mut(&ap) {
            a.stations.retain(|&x| x != s);
        }
        let st = self.stas.get_mut(&s).expect("a station");
        st.current = None;
        // (Its radio is nobody's now: the scan takes it where it must.)
        st.state = StaState::Starting { until_ns: now_ns };
        st.heard.remove(&ap);
        self.events.push_back(BssEvent::Lost { sta: s, ap, at_ns: now_ns });
        self.start_scan(s, now_ns);
    }

    /// Member `to` received management frame `m` whole, at `signal_dbm`, at `now_ns`.
    pub fn received(&mut self, m: &Mgmt, to: u32, signal_dbm: f64, now_ns: u64) {
        if let Some(ap) = self.aps.get_mut(&to) {
            let ssid = ap.cfg.ssid.clone();
            let answer = match m.kind {
                MgmtKind::ProbeRequest if m.ssid.is_empty() || m.ssid == ssid => {
                    Some(MgmtKind::ProbeResponse)
                }
                MgmtKind::AuthRequest if m.to == Some(to) => Some(MgmtKind::AuthResponse),
                MgmtKind::AssocRequest { .. } if m.to == Some(to) && m.ssid == ssid => {
                    if !ap.stations.contains(&m.from) {
                        ap.stations.push(m.from);
                    }
                    Some(MgmtKind::AssocResponse)
                }
                MgmtKind::Disassoc if m.to == Some(to) => {
                    ap.stations.retain(|&x| x != m.from);
                    None
                }
                _ => None,
            };
            if let Some(kind) = answer {
                self.out.push_back(Mgmt { from: to, to: Some(m.from), kind, ssid });
            }
            return;
        }
        if !self.stas.contains_key(&to) {
            return;
        }
        if matches!(m.kind, MgmtKind::Beacon | MgmtKind::ProbeResponse) {
            let st = self.stas.get_mut(&to).unwrap();
            let h = st.heard.entry(m.from).or_insert((signal_dbm, now_ns));
            // (A reading after a long silence — an access point on another channel,
            // heard in the last scan a second ago — starts the average again.)
            match now_ns.saturating_sub(h.1) > STALE_NS {
                true => h.0 = signal_dbm,
                false => h.0 += SIGNAL_WEIGHT * (signal_dbm - h.0),
            }
            h.1 = now_ns;
            // A station that found no access point joins the first of its SSID it hears
            // (rather than wait for its next scan).
            let waiting = matches!(st.state, StaState::Waiting { .. });
            if waiting && st.cfg.joins(&m.ssid) && !st.refused.contains(&m.from) {
                self.ask(to, m.from, MgmtKind::AuthRequest, 1, now_ns);
            }
            return;
        }
        if m.to != Some(to) {
            return;
        }
        let st = self.stas.get_mut(&to).unwrap();
        match (m.kind, st.state.clone()) {
            (MgmtKind::AuthResponse, StaState::Authenticating { ap, .. }) if ap == m.from => {
                let reassoc = st.current.is_some();
                self.ask(to, ap, MgmtKind::AssocRequest { reassoc }, 1, now_ns);
            }
            (MgmtKind::AssocResponse, StaState::Associating { ap, .. }) if ap == m.from => {
                let from = st.current.take();
                st.state = StaState::Associated { ap };
                st.next_scan_ns = now_ns + st.cfg.scan_interval_ns;
                st.scan_until_ns = None;
                st.heard.entry(ap).or_insert((signal_dbm, now_ns)).1 = now_ns;
                self.tune(to, self.channels[ap as usize]);
                // The old access point forgets the station (its distribution system
                // learns of the move from the new one).
                if let Some(old) = from.and_then(|f| self.aps.get_mut(&f)) {
                    old.stations.retain(|&x| x != to);
                }
                self.events.push_back(BssEvent::Associated { sta: to, ap, from, at_ns: now_ns });
            }
            _ => {}
        }
    }

    /// Where a data frame from member `from` for member `dst` (`None`: broadcast or a
    /// destination not on the channel) goes next. At an access point, `from` is the
    /// station it came from (or the access point itself, for what its node sends).
    pub fn route(&self, from: u32, dst: Option<u32>) -> Route {
        match self.roles.get(from as usize) {
            None | Some(Role::AdHoc) => Route::Air { to: dst },
            Some(Role::Station(_)) => match self.stas[&from].state {
                StaState::Associated { ap } => Route::ToAp(ap),
                _ => Route::Drop,
            },
            Some(Role::Ap(_)) => match dst {
                Some(d) if self.stations_of(from).contains(&d) => Route::Air { to: Some(d) },
                Some(_) => Route::Drop,
                None => Route::Air { to: None },
            },
        }
    }

    /// At access point `ap`, a data frame from its station `sta` for `dst` (`None`:
    /// broadcast, or not a station of the BSS): relayed over the air to a station of
    /// its BSS (`Some(Route::Air)`), dropped (client isolation), or for the access
    /// point's own interface (`None`: its node bridges it on). A broadcast is both
    /// relayed (unless isolated) and taken up: [`Infra::relays_broadcast`].
    pub fn relay(&self, ap: u32, sta: u32, dst: Option<u32>) -> Option<Route> {
        let a = self.aps.get(&ap)?;
        if !a.stations.contains(&sta) {
            return Some(Route::Drop);
        }
        match dst {
            Some(d) if a.stations.contains(&d) => Some(match a.cfg.isolation {
                true => Route::Drop,
                false => Route::Air { to: Some(d) },
            }),
            _ => None,
        }
    }

    /// Whether access point `ap` repeats its stations' broadcasts to its BSS.
    pub fn relays_broadcast(&self, ap: u32) -> bool {
        self.aps.get(&ap).is_some_and(|a| !a.cfg.isolation)
    }
}

#[cfg(test)]
mod tests;
