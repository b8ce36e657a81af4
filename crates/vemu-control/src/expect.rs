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
    /// How long after its start it held (passed), ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_ns: Option<u64>,
    /// The result in words: `1.37 s ≤ 5.0 s`, `not within 2.0 s (last: …)`.
    pub detail: String,
    /// Probes made.
    pub probes: u64,
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

/// The judge of a lab's checks.
#[derive(Debug, Clone)]
pub struct Judge {
    checks: Vec<Expectation>,
    results: Vec<CheckResult>,
    /// Stretches of the lab clock the fidelity monitor judged not `ok`: (from, to, verdict).
    bad: Vec<(u64, u64, Verdict)>,
}

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
            })
            .collect();
        Judge { checks, results, bad: Vec::new() }
    }

    pub fn results(&self) -> &[CheckResult] {
        &self.results
    }

    /// Whether every check is resolved.
    pub fn done(&self) -> bool {
        self.results.iter().all(|r| r.outcome != Outcome::Pending)
    }

    /// The checks to probe at `now_ns` (started, pending, probed by running something:
    /// all but the fidelity verdict), with what to probe.
    pub fn due(&self, now_ns: u64) -> Vec<(usize, &Check)> {
        self.checks
            .iter()
            .enumerate()
            .filter(|(i, e)| {
                self.results[*i].outcome == Outcome::Pending
                    && now_ns >= e.start_ns
                    && !matches!(e.check, Check::Fidelity { .. })
            })
            .map(|(i, e)| (i, &e.check))
            .collect()
    }

    /// Check `i`'s probe at `now_ns`: whether it held, and why not (`why`).
    pub fn probed(&mut self, i: usize, now_ns: u64, holds: bool, why: &str) {
        let r = &mut self.results[i];
        if r.outcome != Outcome::Pending || now_ns < r.start_ns {
            return;
        }
        r.probes += 1;
        if holds && now_ns <= r.deadline_ns {
            let took = now_ns - r.start_ns;
            r.measured_ns = Some(took);
            r.detail = format!("{} ≤ {}", fmt_ns(took), fmt_ns(r.deadline_ns - r.start_ns));
            r.outcome = Outcome::Passed;
            self.distrust(i, now_ns);
        } else if !holds {
            r.detail = format!("not yet (last: {})", why.trim());
        }
    }

    /// A window of the fidelity monitor, `[from_ns, to_ns]`, judged `verdict`.
    pub fn window(&mut self, from_ns: u64, to_ns: u64, verdict: Verdict) {
        if verdict != Verdict::Ok {
            self.bad.push((from_ns, to_ns, verdict));
        }
    }

    /// The lab clock reads `now_ns`, the run's verdict so far is `run`: checks past their
    /// deadline fail (the fidelity check is judged then).
    pub fn tick(&mut self, now_ns: u64, run: Verdict) {
        for i in 0..self.results.len() {
            let r = &mut self.results[i];
            if r.outcome != Outcome::Pending || now_ns < r.deadline_ns {
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
            self.distrust(i, deadline);
        }
    }

    /// A check resolved at `until_ns` whose measurement overlapped a window the monitor
    /// judged not `ok` is untrustworthy.
    fn distrust(&mut self, i: usize, until_ns: u64) {
        let r = &mut self.results[i];
        let Some(&(from, to, verdict)) =
            self.bad.iter().find(|(from, to, _)| *from <= until_ns && *to >= r.start_ns)
        else {
            return;
        };
        let was = if r.outcome == Outcome::Passed { "passed" } else { "failed" };
        r.detail = format!(
            "{was} ({}), but the fidelity monitor judged the lab {} from {} to {} (lab clock): the network measured was not the one configured",
            r.detail,
            format!("{verdict:?}").to_lowercase(),
            fmt_ns(from),
            fmt_ns(to)
        );
        r.outcome = Outcome::Untrustworthy;
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
        assert!(j.done());
        assert_eq!(exit_status(j.results()), 1);
        // A probe that comes back after the deadline does not pass it.
        let mut late = Judge::new(vec![reach("c", 0, 1)]);
        late.probed(0, 2 * S, true, "");
        assert_eq!(late.results()[0].outcome, Outcome::Pending);
    }

    #[test]
    fn a_check_measured_while_the_monitor_judged_the_lab_not_ok_is_untrustworthy() {
        let mut j = Judge::new(vec![reach("a", 0, 5), reach("b", 10, 5)]);
        j.window(2 * S, 3 * S, Verdict::Invalid);
        j.probed(0, 4 * S, true, "");
        assert_eq!(j.results()[0].outcome, Outcome::Untrustworthy);
        assert!(j.results()[0].detail.starts_with("passed (4.0 s ≤ 5.0 s), but the fidelity monitor judged the lab invalid from 2.0 s to 3.0 s"), "{}", j.results()[0].detail);
        // A check measured after the bad window is judged as usual.
        j.probed(1, 11 * S, true, "");
        assert_eq!(j.results()[1].outcome, Outcome::Passed);
        assert_eq!(exit_status(j.results()), 3);
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
}
