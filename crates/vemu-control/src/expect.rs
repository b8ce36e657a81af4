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
    /// Stretches of the lab clock the fidelity monitor judged not `ok` (from, to, verdict),
    /// or in which the lab's software waited for CPU while its bulk links kept their
    /// rates (verdict `None`).
    bad: Vec<(u64, u64, Option<Verdict>)>,
    /// Per check (beside its result), where its measurement stands.
    progress: Vec<Progress>,
    /// The end of the last window the monitor judged, and the lab clock at the last tick.
    judged_until_ns: u64,
    now_ns: u64,
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
        self.judged_until_ns = self.judged_until_ns.max(to_ns);
        if verdict != Verdict::Ok || paced {
            self.bad.push((from_ns, to_ns, (verdict != Verdict::Ok).then_some(verdict)));
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
        let Some(&(from, to, verdict)) =
            self.bad.iter().find(|(from, to, _)| *from <= until_ns && *to >= r.start_ns)
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

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn reach(name: &str, start_s: u64, within_s: u64) -> Expectation {
        Expectation {
            name: name.into(),
            start_ns: start_s * S,
            after: None,
            within_ns: within_s * S,
            check: Check::Reach {
                from: "h1".into(),
                to: "10.0.0.9".parse().unwrap(),
                to_name: "h9".into(),
                port: None,
            },
        }
    }

    #[test]
    fn a_check_passes_when_it_first_holds_and_fails_past_its_deadline() {
        let mut j = Judge::new(vec![reach("a", 0, 5), reach("b", 3, 2)]);
        // At 1 s only the first has started.
        assert_eq!(j.due(S).iter().map(|d| d.0).collect::<Vec<_>>(), [0]);
        j.probed(0, S, false, "100% packet loss\n");
        assert_eq!(j.results()[0].detail, "not yet (last: 100% packet loss)");
        j.probed(0, S + 370_000_000, true, "");
        assert_eq!(j.results()[0].outcome, Outcome::Passed);
        assert_eq!(j.results()[0].measured_ns, Some(1_370_000_000));
        assert_eq!(j.results()[0].line(), "a: passed, 1.4 s ≤ 5.0 s");
        // The second never holds: failed at 5 s, not before.
        j.probed(1, 4 * S, false, "no route to host");
        j.tick(4 * S, Verdict::Ok);
        assert_eq!(j.results()[1].outcome, Outcome::Pending);
        assert!(!j.done());
        j.tick(5 * S, Verdict::Ok);
        assert_eq!(j.results()[1].outcome, Outcome::Failed);
        assert_eq!(j.results()[1].detail, "did not hold within 2.0 s (last: no route to host)");
        assert!(!j.done(), "probed on to say when it held");
        assert_eq!(exit_status(j.results()), 1);
        // A probe that holds after the deadline does not pass it: failed, and when.
        let mut late = Judge::new(vec![reach("c", 0, 1)]);
        late.probed(0, 2 * S, true, "");
        assert_eq!(late.results()[0].outcome, Outcome::Failed);
        assert_eq!(late.results()[0].detail, "did not hold within 1.0 s (held after 2.0 s)");
        late.window(0, 3 * S, Verdict::Ok, false);
        assert!(late.done());
        // A failed check is probed on to say when it held (the exit stays a failure).
        assert_eq!(j.due(6 * S).iter().map(|d| d.0).collect::<Vec<_>>(), [1]);
        j.probed(1, 6 * S + 500_000_000, true, "");
        assert_eq!(j.results()[1].outcome, Outcome::Failed);
        assert_eq!(j.results()[1].detail, "did not hold within 2.0 s (held after 3.5 s)");
        assert_eq!(j.results()[1].measured_ns, Some(3_500_000_000));
        j.window(0, 7 * S, Verdict::Ok, false);
        assert!(j.done() && j.due(7 * S).is_empty());
        // One that never holds is said so, LATE_NS after its deadline.
        let mut never = Judge::new(vec![reach("d", 0, 1)]);
        never.tick(S, Verdict::Ok);
        assert!(!never.done());
        never.tick(S + LATE_NS, Verdict::Ok);
        assert!(never.done());
        assert_eq!(
            never.results()[0].detail,
            "did not hold within 1.0 s (not held 10.0 s later either)"
        );
    }

    #[test]
    fn a_check_measured_while_the_monitor_judged_the_lab_not_ok_is_untrustworthy() {
        let mut j = Judge::new(vec![reach("a", 0, 5), reach("b", 10, 5)]);
        j.window(2 * S, 3 * S, Verdict::Invalid, false);
        j.probed(0, 4 * S, true, "");
        assert_eq!(j.results()[0].outcome, Outcome::Untrustworthy);
        assert!(j.results()[0].detail.starts_with("passed (4.0 s ≤ 5.0 s), but the fidelity monitor judged the lab invalid from 2.0 s to 3.0 s"), "{}", j.results()[0].detail);
        // A check measured after the bad window is judged as usual…
        j.probed(1, 11 * S, true, "");
        assert_eq!(j.results()[1].outcome, Outcome::Passed);
        assert_eq!(exit_status(j.results()), 3);
        // …until the monitor has judged that second: not done before, and untrustworthy
        // if it says the second was not ok.
        j.tick(11 * S + 100, Verdict::Ok);
        assert!(!j.done(), "the second of the measurement not judged yet");
        j.window(10 * S, 11 * S + 500_000_000, Verdict::Degraded, false);
        assert_eq!(j.results()[1].outcome, Outcome::Untrustworthy);
        assert!(
            j.results()[1].detail.starts_with(
                "passed (1.0 s ≤ 5.0 s), but the fidelity monitor judged the lab degraded"
            ),
            "{}",
            j.results()[1].detail
        );
        assert!(j.done());
        // Failed under a bad window, then held later (what CI saw): when it held is
        // said, and why it cannot be trusted is kept.
        let mut late = Judge::new(vec![reach("c", 4, 3)]);
        late.window(4 * S, 6 * S, Verdict::Invalid, false);
        late.probed(0, 5 * S, false, "100% packet loss");
        late.tick(7 * S, Verdict::Invalid);
        assert_eq!(late.results()[0].outcome, Outcome::Untrustworthy);
        late.probed(0, 8 * S + 900_000_000, true, "");
        assert_eq!(
            late.results()[0].detail,
            "failed (did not hold within 3.0 s (held after 4.9 s)), but the fidelity monitor judged the lab invalid from 4.0 s to 6.0 s (lab clock): the network measured was not the one configured"
        );
        // A second the monitor judged ok because the bulk links kept their rates while
        // the lab's software waited for CPU: a check's timing is not to be trusted then.
        let mut paced = Judge::new(vec![reach("p", 0, 5)]);
        paced.window(0, 2 * S, Verdict::Ok, true);
        paced.probed(0, S, false, "100% packet loss");
        paced.tick(6 * S, Verdict::Ok);
        assert_eq!(paced.results()[0].outcome, Outcome::Untrustworthy);
        assert!(paced.results()[0].detail.ends_with("but the lab's software waited for CPU from 0 µs to 2.0 s (lab clock; its bulk links kept their rates): what the check timed may reflect this machine's CPU, not the network"), "{}", paced.results()[0].detail);
        // A monitor that says nothing: the judge waits JUDGED_WAIT_NS, no more.
        let mut quiet = Judge::new(vec![reach("q", 0, 5)]);
        quiet.probed(0, S, true, "");
        quiet.tick(2 * S, Verdict::Ok);
        assert!(!quiet.done());
        quiet.tick(S + JUDGED_WAIT_NS, Verdict::Ok);
        assert!(quiet.done());
    }

    #[test]
    fn the_fidelity_check_is_the_run_s_verdict_at_its_deadline() {
        let check = |worst: &str| Expectation {
            name: format!("fidelity {worst}"),
            start_ns: 0,
            after: None,
            within_ns: 10 * S,
            check: Check::Fidelity { worst: worst.into() },
        };
        let mut j = Judge::new(vec![check("ok"), check("degraded")]);
        assert!(j.due(20 * S).is_empty(), "nothing to probe");
        j.tick(10 * S, Verdict::Degraded);
        assert_eq!(j.results()[0].outcome, Outcome::Failed);
        assert_eq!(j.results()[0].detail, "degraded, worse than ok");
        assert_eq!(j.results()[1].outcome, Outcome::Passed);
    }

    #[test]
    fn a_drops_check_counts_from_its_start_fails_beyond_its_bound_passes_at_its_deadline() {
        let check = |link: usize, start_s: u64| Expectation {
            name: format!("drops {link}"),
            start_ns: start_s * S,
            after: None,
            within_ns: 10 * S,
            check: Check::Drops { link, link_name: format!("l{link}"), at_most: 5 },
        };
        let mut j = Judge::new(vec![check(0, 0), check(1, 2)]);
        assert!(j.due(S).is_empty(), "nothing to probe in a node");
        assert!(j.needs_link_drops(0) && j.needs_link_drops(S));
        assert!(j.starts_counting_drops(0));
        // Link 1 had dropped 100 before its check started: those do not count.
        j.link_drops(0, &[0, 100]);
        assert!(!j.starts_counting_drops(S), "the first counts from 0, the second not started");
        assert!(j.starts_counting_drops(3 * S), "the second starts");
        j.link_drops(3 * S, &[4, 103]);
        assert!(!j.starts_counting_drops(3 * S));
        assert_eq!(j.results()[0].detail, "not yet (last: 4 drops so far)");
        j.link_drops(4 * S, &[4, 109]);
        assert_eq!(j.results()[1].outcome, Outcome::Failed);
        assert_eq!(j.results()[1].detail, "6 drops > 5 (by 2.0 s)");
        // (Ticks do not judge them: past the deadline, the counters do.)
        j.tick(10 * S, Verdict::Ok);
        assert_eq!(j.results()[0].outcome, Outcome::Pending);
        j.link_drops(10 * S, &[5, 109]);
        assert_eq!(j.results()[0].line(), "drops 0: passed, 5 drops ≤ 5");
        j.window(0, 11 * S, Verdict::Ok, false);
        assert!(j.done() && !j.needs_link_drops(11 * S));
    }

    #[test]
    fn percentiles_are_by_nearest_rank() {
        let v: Vec<u64> = (1..=10).collect();
        assert_eq!(nearest_rank(&v, 50.0), Some(5), "5 of 10 are at or below 5");
        assert_eq!(nearest_rank(&v, 95.0), Some(10));
        assert_eq!(nearest_rank(&v, 100.0), Some(10));
        assert_eq!(nearest_rank(&v, 1.0), Some(1));
        assert_eq!(nearest_rank(&v, 0.0), Some(1), "the smallest, not nothing");
        assert_eq!(nearest_rank::<u64>(&[], 50.0), None);
        let m = FlowMeasure { sent: 10, delivered: 10, delays_ns: v, size_bytes: 100 };
        assert_eq!(m.delay_ns(50), Some(5));
    }

    #[test]
    fn a_flow_check_starts_its_flow_and_is_judged_by_its_bounds_once_it_has_run() {
        use vemu_scenario::expect::FlowBounds;
        let check = |name: &str, start_s: u64, bounds: FlowBounds| Expectation {
            name: name.into(),
            start_ns: start_s * S,
            after: None,
            within_ns: 12 * S,
            check: Check::Flow(vemu_scenario::expect::FlowCheck {
                from: "h1".into(),
                to: "h2".into(),
                size_bytes: 1000,
                rate_pps: 100.0,
                duration_ns: 10 * S,
                bounds,
            }),
        };
        let tight = FlowBounds {
            delivery: Some(0.99),
            delay_ns: vec![(95, 15_000_000)],
            goodput_bps: None,
        };
        let loose = FlowBounds {
            delivery: Some(0.8),
            delay_ns: vec![(50, 15_000_000), (100, 40_000_000)],
            goodput_bps: Some(700_000),
        };
        let mut j = Judge::new(vec![
            check("tight", 0, tight),
            check("loose", 0, loose),
            check("later", 5, FlowBounds { delivery: Some(0.5), ..Default::default() }),
        ]);
        assert!(j.due(0).is_empty(), "nothing to probe in a node");
        assert_eq!(j.flows_to_start(0).iter().map(|(i, _)| *i).collect::<Vec<_>>(), [0, 1]);
        j.flow_started(0, 0, Ok(7));
        j.flow_started(1, 0, Ok(8));
        assert!(j.flows_to_start(S).is_empty(), "started once");
        assert_eq!(j.flows_to_start(5 * S).len(), 1, "the third starts at 5 s");
        j.flow_started(2, 5 * S, Err("node 'h2' is stopped".into()));
        assert_eq!(
            j.results()[2].line(),
            "later: FAILED, its flow could not start: node 'h2' is stopped"
        );
        // Not judged before the flow has run and settled; ticks leave it to its records.
        assert!(j.flows_to_judge(11 * S).is_empty());
        j.tick(12 * S, Verdict::Ok);
        assert_eq!(j.results()[0].outcome, Outcome::Pending);
        assert_eq!(j.flows_to_judge(12 * S), [(0, 7), (1, 8)]);
        // 900 of 1000 delivered, delays 10 ms for most, 30 ms for the slowest 10.
        let delays: Vec<u64> =
            (0..900).map(|k| if k < 890 { 10_000_000 } else { 30_000_000 }).collect();
        let m = FlowMeasure { sent: 1000, delivered: 900, delays_ns: delays, size_bytes: 1000 };
        j.flow_measured(0, 12 * S, Ok(m.clone()));
        j.flow_measured(1, 12 * S, Ok(m));
        assert_eq!(j.results()[0].outcome, Outcome::Failed);
        assert_eq!(
            j.results()[0].detail,
            "delivery 90.0% < 99.0% (900 of 1000), delay p95 10.0 ms ≤ 15.0 ms"
        );
        assert_eq!(j.results()[1].outcome, Outcome::Passed);
        let flow = j.results()[1].flow.clone().unwrap();
        assert_eq!((flow.sent, flow.delivered, flow.delivery), (1000, 900, 0.9));
        assert_eq!((flow.delay_p50_ns, flow.delay_max_ns), (Some(10_000_000), Some(30_000_000)));
        assert_eq!(flow.goodput_bps, 720_000);
        assert_eq!(j.results()[1].detail, "delivery 90.0% ≥ 80.0% (900 of 1000), delay p50 10.0 ms ≤ 15.0 ms, delay max 30.0 ms ≤ 40.0 ms, goodput 720.0 kbit/s ≥ 700.0 kbit/s");
        // A window judged bad over the flow's run makes its result untrustworthy.
        j.window(3 * S, 4 * S, Verdict::Invalid, false);
        assert_eq!(j.results()[1].outcome, Outcome::Untrustworthy);
        j.window(4 * S, 13 * S, Verdict::Ok, false);
        assert!(j.done());
    }

    #[test]
    fn a_flow_that_delivered_nothing_meets_no_delay_bound() {
        let m = FlowMeasure { sent: 10, ..Default::default() };
        let b = vemu_scenario::expect::FlowBounds { delay_ns: vec![(99, S)], ..Default::default() };
        assert_eq!(m.against(&b, S), ("delay p99: nothing delivered".to_string(), false));
        let m = FlowMeasure { sent: 3, delivered: 3, delays_ns: vec![1, 2, 3], size_bytes: 24 };
        assert_eq!((m.delay_ns(50), m.delay_ns(95), m.delay_ns(100)), (Some(2), Some(3), Some(3)));
    }
}

/// Probing checks in the lab's nodes: the judge's driver.
pub(crate) mod probe {
    use std::process::{Command, Stdio};
    use std::time::Duration;

    use vemu_scenario::expect::Check;

    use vemu_machine::door::{Door, HereDoor};

    /// Longest a probe runs (a `run:` check's command may take until its deadline).
    const PROBE_S: f64 = 2.0;

    /// Whether `check` holds now in its node (through `door`), and why not; `left_s`:
    /// time to its deadline.
    pub(crate) fn holds(door: Door, check: &Check, left_s: f64) -> (bool, String) {
        let node = match check {
            Check::Reach { from, .. } => from.as_str(),
            Check::Route { node, .. } | Check::Run { node, .. } => node.as_str(),
            _ => "",
        };
        let door = InNode { door, node };
        match check {
            Check::Drops { .. } | Check::Flow(_) => {
                (false, "judged by the controller, not in a node".into())
            }
            Check::Reach { to, port: None, .. } => {
                let (code, out, err) =
                    run(&door, &["ping", "-c", "1", "-W", "1", &to.to_string()], PROBE_S);
                let last = out
                    .lines()
                    .chain(err.lines())
                    .rfind(|l| !l.trim().is_empty())
                    .unwrap_or("")
                    .to_string();
                (code == 0, last)
            }
            Check::Reach { to, port: Some(p), .. } => {
                let target = match to {
                    std::net::IpAddr::V4(a) => a.to_string(),
                    std::net::IpAddr::V6(a) => a.to_string(),
                };
                let script = format!("exec 3<>/dev/tcp/{target}/{p}");
                let (code, _, err) = run(&door, &["timeout", "1", "bash", "-c", &script], PROBE_S);
                (code == 0, err.lines().last().unwrap_or("connection not accepted").to_string())
            }
            Check::Route { prefix, via_addrs, .. } => {
                let family = if prefix.addr().is_ipv4() { "-4" } else { "-6" };
                let (code, out, err) = run(
                    &door,
                    &["ip", family, "-j", "route", "show", "match", &prefix.to_string()],
                    PROBE_S,
                );
                if code != 0 {
                    return (false, err.trim().to_string());
                }
                route_holds(&out, via_addrs)
            }
            Check::Run { cmd, exit, output, .. } => {
                let (code, out, _) = run(&door, &["sh", "-c", cmd], left_s.max(0.5));
                let matched = output.as_ref().is_none_or(|o| out.contains(o.as_str()));
                let why = match (code == *exit, matched) {
                    (false, _) => format!("exit status {code}, not {exit}"),
                    (true, false) => format!("output lacks '{}'", output.as_deref().unwrap_or("")),
                    _ => String::new(),
                };
                (code == *exit && matched, why)
            }
            Check::Fidelity { .. } => (false, String::new()),
        }
    }

    /// Whether `ip -j route show match P`'s answer (the routes covering P) routes P —
    /// by the most specific of them, as the kernel would — through one of `via` (any
    /// way, when empty).
    pub(crate) fn route_holds(json: &str, via: &[std::net::IpAddr]) -> (bool, String) {
        let routes: Vec<serde_json::Value> = serde_json::from_str(json).unwrap_or_default();
        let len = |r: &serde_json::Value| match r["dst"].as_str() {
            Some("default") | None => 0,
            Some(d) => d.split('/').nth(1).and_then(|l| l.parse().ok()).unwrap_or(128u8),
        };
        let Some(best) = routes.iter().map(len).max() else {
            return (false, "no such route".into());
        };
        let routes: Vec<&serde_json::Value> = routes.iter().filter(|r| len(r) == best).collect();
        if via.is_empty() {
            return (true, String::new());
        }
        let gateways: Vec<String> = routes
            .iter()
            .flat_map(|r| {
                let one = r["gateway"].as_str().map(str::to_string);
                let many = r["nexthops"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|h| h["gateway"].as_str().map(str::to_string));
                one.into_iter().chain(many).collect::<Vec<_>>()
            })
            .collect();
        let ok = gateways.iter().any(|g| via.iter().any(|v| v.to_string() == *g));
        (ok, if ok { String::new() } else { format!("through {}", gateways.join(", ")) })
    }

    /// A node, and the way into it.
    struct InNode<'a> {
        door: Door,
        node: &'a str,
    }

    /// Run `argv` in the node, up to `timeout_s`: (exit status, stdout, stderr); 124
    /// when it timed out, 127 when it could not start. A node on another machine runs
    /// it there, through its agent (the API's exec).
    fn run(door: &InNode, argv: &[&str], timeout_s: f64) -> (i32, String, String) {
        match &door.door {
            Door::Here(here) => run_here(here, argv, timeout_s),
            Door::Agent { route, lab } => run_there(route, lab, door.node, argv, timeout_s),
        }
    }

    fn run_there(
        route: &vemu_machine::route::AgentRoute,
        lab: &str,
        node: &str,
        argv: &[&str],
        timeout_s: f64,
    ) -> (i32, String, String) {
        let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(rt) => rt,
            Err(e) => return (127, String::new(), format!("a runtime for the agent: {e}")),
        };
        let path = format!("/v1/agent/labs/{lab}/nodes/{}/exec", crate::percent_encode(node));
        let body = serde_json::json!({"cmd": argv, "timeout_s": timeout_s}).to_string();
        match rt.block_on(route.send("POST", &path, body)) {
            Ok(answer) => {
                let v: serde_json::Value = serde_json::from_slice(&answer).unwrap_or_default();
                let text = |k: &str| v[k].as_str().unwrap_or_default().to_string();
                let code = match (v["timed_out"].as_bool(), v["exit"].as_i64()) {
                    (Some(true), _) => 124,
                    (_, Some(c)) => c as i32,
                    _ => 127,
                };
                (code, text("stdout"), text("stderr"))
            }
            Err(e) => (127, String::new(), format!("{}: {e:#}", route.what())),
        }
    }

    fn run_here(door: &HereDoor, argv: &[&str], timeout_s: f64) -> (i32, String, String) {
        let entry = match door.open() {
            Ok(e) => e,
            Err(e) => return (127, String::new(), format!("{e:#}")),
        };
        let mut cmd = Command::new(argv[0]);
        cmd.args(&argv[1..])
            .current_dir(door.node_dir())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        vemu_machine::supervise::own_session(&mut cmd);
        let child = match entry.spawn(&mut cmd, vemu_machine::spawn_waited) {
            Ok(c) => c,
            Err(e) => return (127, String::new(), format!("{}: {e}", argv[0])),
        };
        let pid = child.id();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        let out = match rx.recv_timeout(Duration::from_secs_f64(timeout_s)) {
            Ok(o) => o.ok(),
            Err(_) => {
                // SAFETY: kill with a negative pid signals the child's process group.
                unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
                let _ = rx.recv();
                vemu_machine::forget_waited(pid);
                return (124, String::new(), format!("timed out after {timeout_s:.1} s"));
            }
        };
        vemu_machine::forget_waited(pid);
        match out {
            Some(o) => (
                vemu_machine::exit_code(o.status),
                String::from_utf8_lossy(&o.stdout).into_owned(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            ),
            None => (127, String::new(), "could not wait for it".into()),
        }
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn routes_are_told_by_their_gateways() {
            let one = r#"[{"dst":"10.9.0.0/24","gateway":"10.0.0.2","dev":"eth0"}]"#;
            let via = ["10.0.0.2".parse().unwrap()];
            assert_eq!(super::route_holds(one, &via), (true, String::new()));
            assert_eq!(super::route_holds(one, &[]), (true, String::new()));
            let other = ["10.0.0.6".parse().unwrap()];
            assert_eq!(super::route_holds(one, &other), (false, "through 10.0.0.2".into()));
            let ecmp = r#"[{"dst":"10.9.0.0/24","nexthops":[{"gateway":"10.0.0.2"},{"gateway":"10.0.0.6"}]}]"#;
            assert!(super::route_holds(ecmp, &other).0);
            assert_eq!(super::route_holds("[]", &[]), (false, "no such route".into()));
            // The most specific route covering the prefix decides (an aggregate here).
            let covering = r#"[{"dst":"default","gateway":"10.0.0.6"},{"dst":"10.0.0.0/29","gateway":"10.0.0.2"}]"#;
            assert!(super::route_holds(covering, &via).0);
            assert!(!super::route_holds(covering, &other).0);
        }
    }
}
