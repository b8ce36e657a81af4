//! Judging the lab's checks (`expect:`, `vemu_scenario::expect`): a sans-IO core on the
//! lab clock. The driver probes what [`Judge::due`] names (a ping, a route lookup, a
//! command in a node) and reports with [`Judge::probed`]; it passes on the fidelity
//! monitor's windows ([`Judge::window`]) and calls [`Judge::tick`]. A check passes the
//! first time its probe holds, fails when its deadline passes first, and is
//! *untrustworthy* — neither — when the fidelity monitor judged any second of its
//! measurement not `ok`: the network it measured was not the one configured.

use serde::{Deserialize, Serialize};
use vemu_scenario::expect::{Check, Expectation};

use crate::fidelity::{fmt_ns, Verdict};

/// Where a check stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Its start has not come, or it has not held yet and its deadline is ahead.
    Pending,
    Passed,
    Failed,
    Untrustworthy,
}

/// A check's result so far.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckResult {
    pub name: String,
    /// What it checks, for people (`reach h1 → h9`).
    pub check: String,
    pub outcome: Outcome,
    /// Its start and deadline on the lab clock, ns.
    pub start_ns: u64,
    pub deadline_ns: u64,
    /// How long after its start it held, ns: within its bound (passed), or later (a
    /// failed check is probed [`LATE_NS`] more to say when it did hold).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_ns: Option<u64>,
    /// The result in words: `1.37 s ≤ 5.0 s`, `not within 2.0 s (last: …)`.
    pub detail: String,
    /// Probes made.
    pub probes: u64,
    /// A flow check's flow, as measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<FlowResult>,
}

/// What a flow check's flow delivered (`vemu test --repeat` gives their spread).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowResult {
    pub sent: u64,
    pub delivered: u64,
    /// `delivered / sent` (0 when nothing was sent).
    pub delivery: f64,
    /// One-way delay of the delivered packets, ns: median, 95th percentile, longest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_p50_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_p95_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_max_ns: Option<u64>,
    /// Payload delivered over the flow's duration, bits/s.
    pub goodput_bps: u64,
}

impl CheckResult {
    /// One line: `reach h1 → h9: passed, 1.37 s ≤ 5.0 s`.
    pub fn line(&self) -> String {
        let state = match self.outcome {
            Outcome::Pending => "pending",
            Outcome::Passed => "passed",
            Outcome::Failed => "FAILED",
            Outcome::Untrustworthy => "UNTRUSTWORTHY",
        };
        format!("{}: {state}, {}", self.name, self.detail)
    }
}

/// How long a check that failed its deadline is still probed, to say when it did hold
/// (`did not hold within 1.0 ms (held after 412.0 ms)`).
pub const LATE_NS: u64 = 10_000_000_000;

/// The judge of a lab's checks.
#[derive(Debug, Clone)]
pub struct Judge {
    checks: Vec<Expectation>,
    results: Vec<CheckResult>,
    /// Stretches of the lab clock the fidelity monitor judged not `ok`, or in which the
    /// lab's software waited for CPU while its bulk links kept their rates (verdict
    /// `None`).
    bad: Vec<BadWindow>,
    /// Per check (beside its result), where its measurement stands.
    progress: Vec<Progress>,
    /// The end of the last window the monitor judged, and the lab clock at the last tick.
    judged_until_ns: u64,
    now_ns: u64,
}

/// A window of the monitor that distrusts the checks measured in it.
#[derive(Debug, Clone, Copy)]
struct BadWindow {
    from_ns: u64,
    to_ns: u64,
    verdict: Option<Verdict>,
    /// From where on it distrusts checks: `from_ns`, but 0 for the monitor's first window
    /// (which starts once the monitor can first read the lab, up: a check made before it
    /// — the lab was slow to come up — is judged by what the lab was then, not trusted
    /// unjudged, as CI saw a check in a lab starved by spinning nodes).
    reach_from_ns: u64,
}

/// Where a check's measurement stands, beyond its result.
#[derive(Debug, Clone, Default)]
struct Progress {
    /// A `drops` check: the link's drops when it started counting.
    drops_from: Option<u64>,
    /// A check that failed its deadline: until when it is still probed.
    late_until: Option<u64>,
    /// A `flow` check: the traffic flow started for it (its id), once started.
    flow: Option<u32>,
    /// An untrustworthy check: what it was (`passed`, `failed`), its result in words,
    /// and why it cannot be trusted — its detail is made of the three, so that a later
    /// word on its result (when it did hold) keeps the why.
    untrusted: Option<(&'static str, String, String)>,
    /// A check resolved by a measurement (passed or failed): when. A window of the
    /// monitor that covers it and comes later still makes it untrustworthy.
    resolved_at: Option<u64>,
}

/// How long the judge waits, after a check's measurement, for the monitor's judgement
/// of that second before it gives up waiting (a monitor that could not read the
/// engine's counters).
pub const JUDGED_WAIT_NS: u64 = 3_000_000_000;

impl Judge {
    pub fn new(checks: Vec<Expectation>) -> Judge {
        let results = checks
            .iter()
            .map(|e| CheckResult {
                name: e.name.clone(),
                check: e.check.describe(),
                outcome: Outcome::Pending,
                start_ns: e.start_ns,
                deadline_ns: e.start_ns.saturating_add(e.within_ns),
                measured_ns: None,
                detail: match &e.after {
                    Some(ev) => format!("waiting for event '{ev}'"),
                    None => "waiting".to_string(),
                },
                probes: 0,
                flow: None,
            })
            .collect();
        let n = checks.len();
        Judge {
            checks,
            results,
            bad: Vec::new(),
            progress: vec![Progress::default(); n],
            judged_until_ns: 0,
            now_ns: 0,
        }
    }

    pub fn results(&self) -> &[CheckResult] {
        &self.results
    }

    /// Whether every check is resolved (no failed one still probed to say when it held)
    /// and the monitor has judged the seconds of their measurements.
    pub fn done(&self) -> bool {
        let judged = |at: &Option<u64>| {
            at.is_none_or(|at| {
                self.judged_until_ns >= at || self.now_ns >= at.saturating_add(JUDGED_WAIT_NS)
            })
        };
        self.results.iter().all(|r| r.outcome != Outcome::Pending)
            && self.progress.iter().all(|p| p.late_until.is_none() && judged(&p.resolved_at))
    }

    /// The checks to probe at `now_ns` (started, pending, probed by running something:
    /// all but the fidelity verdict), with what to probe.
    pub fn due(&self, now_ns: u64) -> Vec<(usize, &Check)> {
        self.checks
            .iter()
            .enumerate()
            .filter(|(i, e)| {
                (self.results[*i].outcome == Outcome::Pending
                    || self.progress[*i].late_until.is_some())
                    && now_ns >= e.start_ns
                    && !matches!(
                        e.check,
                        Check::Fidelity { .. } | Check::Drops { .. } | Check::Flow(_)
                    )
            })
            .map(|(i, e)| (i, &e.check))
            .collect()
    }

    /// Check `i`'s probe at `now_ns`: whether it held, and why not (`why`).
    pub fn probed(&mut self, i: usize, now_ns: u64, holds: bool, why: &str) {
        let r = &mut self.results[i];
        if let (Some(_), true) = (self.progress[i].late_until, holds) {
            // Failed, and held later: when.
            let took = now_ns.saturating_sub(r.start_ns);
            r.measured_ns = Some(took);
            self.progress[i].late_until = None;
            self.reword(i, |said| match said.find(" (last: ") {
                Some(k) => format!("{} (held after {})", &said[..k], fmt_ns(took)),
                None => format!("{said} (held after {})", fmt_ns(took)),
            });
            return;
        }
        if r.outcome != Outcome::Pending || now_ns < r.start_ns {
            return;
        }
        r.probes += 1;
        if holds && now_ns > r.deadline_ns {
            // Held, but only after its deadline: failed, and when it held.
            let took = now_ns - r.start_ns;
            r.measured_ns = Some(took);
            r.detail = format!(
                "did not hold within {} (held after {})",
                fmt_ns(r.deadline_ns - r.start_ns),
                fmt_ns(took)
            );
            r.outcome = Outcome::Failed;
            let deadline = r.deadline_ns;
            self.distrust(i, deadline);
        } else if holds {
            let took = now_ns - r.start_ns;
            r.measured_ns = Some(took);
            r.detail = format!("{} ≤ {}", fmt_ns(took), fmt_ns(r.deadline_ns - r.start_ns));
            r.outcome = Outcome::Passed;
            self.distrust(i, now_ns);
        } else {
            r.detail = format!("not yet (last: {})", why.trim());
        }
    }

    /// The probe of check `i` given to [`Judge::probed`] (which began at the `now_ns`
    /// given there: when the check held) ended at `end_ns`: if it resolved the check,
    /// the check's measurement runs to then, and a window of the monitor over any of it
    /// distrusts it. (Resolved at the probe's start only, a check whose probe began
    /// just before a starved window and ran into it was trusted, here and in CI.)
    pub fn probe_ended(&mut self, i: usize, end_ns: u64) {
        if self.progress[i].resolved_at.is_some_and(|at| end_ns > at) {
            self.distrust(i, end_ns);
        }
    }

    /// Whether [`Judge::tick`] at `now_ns` needs the run's verdict (a fidelity check is
    /// due): reading it costs the engine's counters.
    pub fn needs_run_verdict(&self, now_ns: u64) -> bool {
        self.checks.iter().zip(&self.results).any(|(e, r)| {
            matches!(e.check, Check::Fidelity { .. })
                && r.outcome == Outcome::Pending
                && now_ns >= r.deadline_ns
        })
    }

    /// Whether [`Judge::link_drops`] is wanted at `now_ns` (a `drops` check is counting).
    pub fn needs_link_drops(&self, now_ns: u64) -> bool {
        (0..self.checks.len()).any(|i| self.counts_drops(i, now_ns))
    }

    /// Whether a `drops` check starts counting at `now_ns` (it has no count to start from
    /// yet): [`Judge::link_drops`] is wanted before the round's probes send anything.
    pub fn starts_counting_drops(&self, now_ns: u64) -> bool {
        (0..self.checks.len())
            .any(|i| self.counts_drops(i, now_ns) && self.progress[i].drops_from.is_none())
    }

    /// Whether check `i` is a `drops` check counting at `now_ns`.
    fn counts_drops(&self, i: usize, now_ns: u64) -> bool {
        let r = &self.results[i];
        matches!(self.checks[i].check, Check::Drops { .. })
            && r.outcome == Outcome::Pending
            && now_ns >= r.start_ns
    }

    /// The frames each link has dropped so far (`drops[l]`, both directions) at
    /// `now_ns`: a `drops` check counts from its start, fails once its link dropped more
    /// than allowed, passes at its deadline otherwise.
    pub fn link_drops(&mut self, now_ns: u64, drops: &[u64]) {
        for i in 0..self.checks.len() {
            if !self.counts_drops(i, now_ns) {
                continue;
            }
            let Check::Drops { link, at_most, .. } = self.checks[i].check else { continue };
            let r = &mut self.results[i];
            let Some(&now) = drops.get(link) else { continue };
            let from = *self.progress[i].drops_from.get_or_insert(now);
            let counted = now.saturating_sub(from);
            r.probes += 1;
            if counted > at_most {
                let t = fmt_ns(now_ns - r.start_ns);
                r.detail = format!("{counted} drops > {at_most} (by {t})");
                r.outcome = Outcome::Failed;
            } else if now_ns >= r.deadline_ns {
                r.detail = format!("{counted} drops ≤ {at_most}");
                r.outcome = Outcome::Passed;
            } else {
                r.detail = format!("not yet (last: {counted} drops so far)");
                continue;
            }
            self.distrust(i, now_ns);
        }
    }

    /// The `flow` checks whose flow is to start at `now_ns` (started, pending, no flow
    /// yet), with the check.
    pub fn flows_to_start(&self, now_ns: u64) -> Vec<(usize, &Expectation)> {
        (0..self.checks.len())
            .filter(|&i| {
                matches!(self.checks[i].check, Check::Flow(_))
                    && self.results[i].outcome == Outcome::Pending
                    && now_ns >= self.results[i].start_ns
                    && self.progress[i].flow.is_none()
            })
            .map(|i| (i, &self.checks[i]))
            .collect()
    }

    /// Check `i`'s flow started as traffic flow `id` — or could not start (`Err`: why),
    /// which fails the check.
    pub fn flow_started(&mut self, i: usize, now_ns: u64, id: Result<u32, String>) {
        match id {
            Ok(id) => {
                self.progress[i].flow = Some(id);
                self.results[i].detail = "its flow is running".into();
            }
            Err(why) => {
                let r = &mut self.results[i];
                r.outcome = Outcome::Failed;
                r.detail = format!("its flow could not start: {why}");
                self.distrust(i, now_ns);
            }
        }
    }

    /// The `flow` checks to judge at `now_ns` (their flow has run and settled): the
    /// check and its flow's id.
    pub fn flows_to_judge(&self, now_ns: u64) -> Vec<(usize, u32)> {
        (0..self.checks.len())
            .filter(|&i| {
                self.results[i].outcome == Outcome::Pending && now_ns >= self.results[i].deadline_ns
            })
            .filter_map(|i| Some((i, self.progress[i].flow?)))
            .collect()
    }

    /// Check `i`'s flow as measured at `now_ns` (or why it could not be): passed when it
    /// meets every bound, each measured value beside its bound.
    pub fn flow_measured(&mut self, i: usize, now_ns: u64, m: Result<FlowMeasure, String>) {
        let Check::Flow(f) = &self.checks[i].check else { return };
        let (bounds, duration_ns) = (&f.bounds, &f.duration_ns);
        let r = &mut self.results[i];
        let m = match m {
            Ok(m) => m,
            Err(why) => {
                (r.outcome, r.detail) = (Outcome::Failed, format!("its flow's records: {why}"));
                self.distrust(i, now_ns);
                return;
            }
        };
        r.flow = Some(m.result(*duration_ns));
        let (said, ok) = m.against(bounds, *duration_ns);
        r.outcome = if ok { Outcome::Passed } else { Outcome::Failed };
        r.detail = said;
        self.distrust(i, now_ns);
    }

    /// A check's deadline.
    pub fn deadline_ns(&self, i: usize) -> u64 {
        self.results[i].deadline_ns
    }

    /// A window of the fidelity monitor, `[from_ns, to_ns]`, judged `verdict`; `paced`:
    /// the lab's software waited for CPU in it while its bulk links kept their rates (an
    /// `ok` verdict for throughput, but not for the timing of the light traffic a check
    /// probes: such a window distrusts checks as a bad one does).
    /// Checks already resolved whose measurement it covers become untrustworthy.
    pub fn window(&mut self, from_ns: u64, to_ns: u64, verdict: Verdict, paced: bool) {
        // (The monitor's windows end on the lab clock after its start: none judged yet is
        // a judged end of 0.)
        let first = self.judged_until_ns == 0;
        self.judged_until_ns = self.judged_until_ns.max(to_ns);
        if verdict != Verdict::Ok || paced {
            self.bad.push(BadWindow {
                from_ns,
                to_ns,
                verdict: (verdict != Verdict::Ok).then_some(verdict),
                reach_from_ns: if first { 0 } else { from_ns },
            });
            for i in 0..self.results.len() {
                if let Some(at) = self.progress[i].resolved_at {
                    self.distrust(i, at);
                }
            }
        }
    }

    /// The lab clock reads `now_ns`, the run's verdict so far is `run`: checks past their
    /// deadline fail (the fidelity check is judged then).
    pub fn tick(&mut self, now_ns: u64, run: Verdict) {
        self.now_ns = self.now_ns.max(now_ns);
        for i in 0..self.results.len() {
            if self.progress[i].late_until.is_some_and(|until| now_ns >= until) {
                self.progress[i].late_until = None;
                self.reword(i, |said| {
                    format!("{said} (not held {} later either)", fmt_ns(LATE_NS))
                });
            }
            let r = &mut self.results[i];
            if r.outcome != Outcome::Pending
                || now_ns < r.deadline_ns
                || matches!(self.checks[i].check, Check::Drops { .. } | Check::Flow(_))
            {
                continue;
            }
            if let Check::Fidelity { worst } = &self.checks[i].check {
                let allowed = if worst == "degraded" { Verdict::Degraded } else { Verdict::Ok };
                let said = format!("{run:?}").to_lowercase();
                (r.outcome, r.detail) = if run <= allowed {
                    (Outcome::Passed, format!("{said} (at most {worst})"))
                } else {
                    (Outcome::Failed, format!("{said}, worse than {worst}"))
                };
                continue;
            }
            let within = fmt_ns(r.deadline_ns - r.start_ns);
            let last = r.detail.strip_prefix("not yet (last: ").map(|s| s.trim_end_matches(')'));
            r.detail = match last {
                Some(l) => format!("did not hold within {within} (last: {l})"),
                None => format!("did not hold within {within}"),
            };
            r.outcome = Outcome::Failed;
            let deadline = r.deadline_ns;
            self.progress[i].late_until = Some(deadline.saturating_add(LATE_NS));
            self.distrust(i, deadline);
        }
    }

    /// A check resolved at `until_ns` whose measurement overlapped a window the monitor
    /// judged not `ok` is untrustworthy.
    fn distrust(&mut self, i: usize, until_ns: u64) {
        self.progress[i].resolved_at = Some(until_ns);
        let r = &mut self.results[i];
        if r.outcome == Outcome::Untrustworthy {
            return;
        }
        let Some(&BadWindow { from_ns: from, to_ns: to, verdict, .. }) =
            self.bad.iter().find(|w| w.reach_from_ns <= until_ns && w.to_ns >= r.start_ns)
        else {
            return;
        };
        let was = if r.outcome == Outcome::Passed { "passed" } else { "failed" };
        let why = match verdict {
            Some(verdict) => format!(
                "but the fidelity monitor judged the lab {} from {} to {} (lab clock): the network measured was not the one configured",
                format!("{verdict:?}").to_lowercase(),
                fmt_ns(from),
                fmt_ns(to)
            ),
            None => format!(
                "but the lab's software waited for CPU from {} to {} (lab clock; its bulk links kept their rates): what the check timed may reflect this machine's CPU, not the network",
                fmt_ns(from),
                fmt_ns(to)
            ),
        };
        let said = std::mem::take(&mut r.detail);
        r.detail = format!("{was} ({said}), {why}");
        r.outcome = Outcome::Untrustworthy;
        self.progress[i].untrusted = Some((was, said, why));
    }

    /// Check `i`'s result in words, changed by `change` (an untrustworthy check's keeps
    /// what it was and why it cannot be trusted around it).
    fn reword(&mut self, i: usize, change: impl FnOnce(&str) -> String) {
        let r = &mut self.results[i];
        match &mut self.progress[i].untrusted {
            Some((was, said, why)) => {
                *said = change(said);
                r.detail = format!("{was} ({said}), {why}");
            }
            None => r.detail = change(&r.detail),
        }
    }
}

/// What a flow delivered, from its records: packets sent and delivered (once each), the
/// delivered packets' one-way delays, ns, in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlowMeasure {
    pub sent: u64,
    pub delivered: u64,
    pub delays_ns: Vec<u64>,
    pub size_bytes: usize,
}

/// The `pct` percentile of `sorted` by nearest rank: the smallest value at or below which
/// `pct` % of them are (100: the largest; `None` when empty). The one definition of
/// checks and `vemu report` alike.
pub fn nearest_rank<T: Copy>(sorted: &[T], pct: f64) -> Option<T> {
    let n = sorted.len();
    let k = (n as f64 * pct / 100.0).ceil() as usize;
    sorted.get(k.clamp(1, n.max(1)) - 1).copied()
}

impl FlowMeasure {
    /// The delay below which `pct` % of the delivered packets were (100: the longest).
    pub fn delay_ns(&self, pct: u8) -> Option<u64> {
        nearest_rank(&self.delays_ns, f64::from(pct))
    }

    /// The numbers of the flow, over its duration.
    pub fn result(&self, duration_ns: u64) -> FlowResult {
        FlowResult {
            sent: self.sent,
            delivered: self.delivered,
            delivery: if self.sent > 0 { self.delivered as f64 / self.sent as f64 } else { 0.0 },
            delay_p50_ns: self.delay_ns(50),
            delay_p95_ns: self.delay_ns(95),
            delay_max_ns: self.delay_ns(100),
            goodput_bps: self.goodput_bps(duration_ns),
        }
    }

    fn goodput_bps(&self, duration_ns: u64) -> u64 {
        let bits = self.delivered as f64 * self.size_bytes as f64 * 8.0;
        (bits / (duration_ns.max(1) as f64 / 1e9)).round() as u64
    }

    /// Each bound with what was measured (`delivery 99.4% ≥ 99.0%, delay p95 12.1 ms ≤
    /// 30.0 ms`), and whether all hold. A flow that delivered nothing meets no delay
    /// bound.
    pub fn against(
        &self,
        b: &vemu_scenario::expect::FlowBounds,
        duration_ns: u64,
    ) -> (String, bool) {
        let mut parts = Vec::new();
        let mut ok = true;
        let mut say = |holds: bool, text: String| {
            ok &= holds;
            parts.push(text);
        };
        if let Some(want) = b.delivery {
            let got = if self.sent > 0 { self.delivered as f64 / self.sent as f64 } else { 0.0 };
            let op = if got >= want { "≥" } else { "<" };
            let text = format!(
                "delivery {:.1}% {op} {:.1}% ({} of {})",
                got * 100.0,
                want * 100.0,
                self.delivered,
                self.sent
            );
            say(got >= want, text);
        }
        for &(pct, want) in &b.delay_ns {
            let name = if pct == 100 { "max".to_string() } else { format!("p{pct}") };
            match self.delay_ns(pct) {
                Some(got) => {
                    let op = if got <= want { "≤" } else { ">" };
                    say(got <= want, format!("delay {name} {} {op} {}", fmt_ns(got), fmt_ns(want)));
                }
                None => say(false, format!("delay {name}: nothing delivered")),
            }
        }
        if let Some(want) = b.goodput_bps {
            let got = self.goodput_bps(duration_ns);
            let op = if got >= want { "≥" } else { "<" };
            say(got >= want, format!("goodput {} {op} {}", fmt_bps(got), fmt_bps(want)));
        }
        (parts.join(", "), ok)
    }
}

fn fmt_bps(bps: u64) -> String {
    match bps {
        b if b >= 1_000_000_000 => format!("{:.2} Gbit/s", b as f64 / 1e9),
        b if b >= 1_000_000 => format!("{:.2} Mbit/s", b as f64 / 1e6),
        b => format!("{:.1} kbit/s", b as f64 / 1e3),
    }
}

/// The exit status of `vemu test` for these results: 0 every check passed, 1 one
/// failed, 3 none failed but one is untrustworthy (2 is bad input, said earlier).
pub fn exit_status(results: &[CheckResult]) -> i32 {
    if results.iter().any(|r| r.outcome == Outcome::Failed) {
        1
    } else if results.iter().any(|r| r.outcome == Outcome::Untrustworthy) {
        3
    } else {
        0
    }
}

pub(crate) mod probe;

#[cfg(test)]
mod tests;
