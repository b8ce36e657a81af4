//! `vemu test`: a lab as a test — brought up, its checks (`expect:`) judged by its
//! controller as they resolve, taken down, and an exit status for CI: 0 every check
//! passed, 1 one failed, 2 bad input, 3 none failed but one is untrustworthy (measured
//! while the fidelity monitor judged the lab not ok), 130 interrupted (Ctrl-C; the lab is
//! taken down all the same). `--repeat N` runs it N times with seeds one apart and says
//! each check's pass rate and the spread of what it measured; `--junit` writes JUnit
//! XML for CI systems.

use std::sync::atomic::{AtomicBool, Ordering};

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::{bail, Result};
use serde_json::json;
use vemu_control::daemon::ApiOptions;
use vemu_scenario::Plan;

use crate::lab::{connect, need_root, user};
use crate::up::{images_readable, up_background};

/// How often the command asks the lab how its checks stand.
const POLL: std::time::Duration = std::time::Duration::from_millis(250);
/// How long after the last deadline the command waits for the judge.
const GRACE_NS: u64 = 30_000_000_000;
/// Exit status of a run interrupted by Ctrl-C (or SIGTERM).
const INTERRUPTED: i32 = 130;

/// Set by SIGINT and SIGTERM while `vemu test` runs.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn stop(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// What `vemu test` was asked.
pub(crate) struct TestArgs<'a> {
    pub file: &'a std::path::Path,
    pub name: Option<&'a str>,
    pub json: bool,
    pub repeat: u32,
    pub seed: Option<u64>,
    pub junit: Option<&'a std::path::Path>,
    /// `--machines`, as `vemu up`'s.
    pub machines: Option<&'a str>,
}

/// One run: its seed and the lab's `/v1/expect` answer at its end.
struct Run {
    seed: u64,
    result: serde_json::Value,
    seconds: f64,
}

pub(crate) fn test(a: &TestArgs) -> Result<ExitCode> {
    let machines = crate::up::machines_arg(a.machines)?;
    let plan = vemu_scenario::load_seeded(a.file, a.name, machines.clone(), a.seed)?;
    if plan.expect.is_empty() {
        return Err(user(format!(
            "{}: no checks to judge ('expect:' in the scenario; docs/testing.md)",
            a.file.display()
        )));
    }
    if a.repeat == 0 {
        return Err(user("--repeat: at least 1"));
    }
    need_root()?;
    images_readable(&plan)?;
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic.
        unsafe { libc::signal(sig, stop as *const () as libc::sighandler_t) };
    }
    crate::up::UP_LINE_ON_STDERR.store(a.json, Ordering::Relaxed);
    let lab = plan.name.clone();
    let first_seed = plan.seed;
    let mut runs = Vec::new();
    let mut plan = Some(plan);
    for i in 0..a.repeat {
        let seed = first_seed.wrapping_add(i as u64);
        let plan = match plan.take() {
            Some(p) => p,
            None => vemu_scenario::load_seeded(a.file, a.name, machines.clone(), Some(seed))?,
        };
        if a.repeat > 1 && !a.json {
            println!("run {} of {} (seed {seed})", i + 1, a.repeat);
        }
        let started = std::time::Instant::now();
        let result = run_once(plan, a.json && a.repeat == 1)?;
        runs.push(Run { seed, result, seconds: started.elapsed().as_secs_f64() });
        if STOP.load(Ordering::Relaxed) {
            break;
        }
    }
    let code = if STOP.load(Ordering::Relaxed) {
        INTERRUPTED
    } else {
        runs.iter().map(|r| r.result["exit"].as_i64().unwrap_or(1) as i32).fold(0, worst)
    };
    let summary = summarize(&runs);
    if a.repeat > 1 {
        if a.json {
            let runs: Vec<_> = runs
                .iter()
                .map(|r| json!({"seed": r.seed, "seconds": r.seconds, "result": r.result}))
                .collect();
            let out = json!({"lab": lab, "runs": runs, "checks": summary, "exit": code});
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            print_summary(&summary, runs.len());
        }
    }
    if let Some(path) = a.junit {
        crate::output::write_file(path, &junit(&lab, &runs)?)?;
    }
    if code == INTERRUPTED {
        eprintln!("vemu test: interrupted; lab '{lab}' taken down");
    }
    Ok(ExitCode::from(code as u8))
}

/// The worse of two exit statuses: failed (1) over untrustworthy (3) over passed (0).
fn worst(a: i32, b: i32) -> i32 {
    let rank = |c: i32| match c {
        0 => 0,
        3 => 1,
        _ => 2,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

/// Up, judged, down (also when judging failed or was interrupted).
fn run_once(plan: Plan, json_out: bool) -> Result<serde_json::Value> {
    let lab = plan.name.clone();
    let last_deadline =
        plan.expect.iter().map(|e| e.start_ns.saturating_add(e.within_ns)).max().unwrap_or(0);
    let routers = crate::save::routers(&plan);
    up_background(plan, ApiOptions { tcp: None })?;
    let judged = crate::save::wait_routers_ready(&lab, routers)
        .and_then(|()| judge(&lab, last_deadline, json_out));
    // Down whatever happened (the lab is the test's, not the user's).
    let down = connect(&lab).and_then(|c| c.post("/v1/down", &json!({})));
    let result = judged?;
    down?;
    Ok(result)
}

/// Follow the lab's checks until all are resolved (or Ctrl-C), saying each as it does;
/// the lab's last answer.
fn judge(lab: &str, last_deadline_ns: u64, json_out: bool) -> Result<serde_json::Value> {
    let c = connect(lab)?;
    let started = std::time::Instant::now();
    // (What was said of each check: a failed one is said again when it is known when
    // it did hold.)
    let mut said = std::collections::HashMap::new();
    // Progress on a terminal: what is still waited for, on one line rewritten.
    let progress = !json_out && std::io::stderr().is_terminal();
    loop {
        let v = c.get("/v1/expect")?;
        let checks = v["checks"].as_array().cloned().unwrap_or_default();
        if progress {
            eprint!("\r\x1b[K");
        }
        for r in &checks {
            let name = r["name"].as_str().unwrap_or_default().to_string();
            let line = result_line(r);
            if r["outcome"] != "pending" && !json_out && said.get(&name) != Some(&line) {
                println!("{line}");
                said.insert(name, line);
            }
        }
        if progress && v["done"] != true {
            eprint!("{}", waiting_line(&checks, started.elapsed()));
        }
        if v["done"] == true || STOP.load(Ordering::Relaxed) {
            if json_out {
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                let count = |o: &str| checks.iter().filter(|r| r["outcome"] == o).count();
                println!(
                    "{} checks: {} passed, {} failed, {} untrustworthy{}",
                    checks.len(),
                    count("passed"),
                    count("failed"),
                    count("untrustworthy"),
                    match count("pending") {
                        0 => String::new(),
                        n => format!(", {n} not judged (interrupted)"),
                    }
                );
            }
            return Ok(v);
        }
        if started.elapsed().as_nanos() as u64 > last_deadline_ns + GRACE_NS {
            bail!(
                "lab '{lab}': its checks were not all judged {} s after their last deadline",
                GRACE_NS / 1_000_000_000
            );
        }
        std::thread::sleep(POLL);
    }
}

/// What `vemu test` still waits for: `[12 s] waiting for 2 of 5 checks: rerouted (≤ 17
/// s), video (≤ 30 s)`.
fn waiting_line(checks: &[serde_json::Value], elapsed: std::time::Duration) -> String {
    let pending: Vec<String> = checks
        .iter()
        .filter(|r| r["outcome"] == "pending")
        .map(|r| {
            let by = r["deadline_ns"].as_u64().unwrap_or(0) as f64 / 1e9;
            format!("{} (≤ {by:.0} s)", r["name"].as_str().unwrap_or_default())
        })
        .collect();
    if pending.is_empty() {
        let t = elapsed.as_secs_f64();
        return format!(
            "[{t:.0} s] all judged; waiting for the fidelity monitor's view of their seconds"
        );
    }
    let mut line = format!(
        "[{:.0} s] waiting for {} of {} checks: {}",
        elapsed.as_secs_f64(),
        pending.len(),
        checks.len(),
        pending.join(", ")
    );
    if line.chars().count() > 100 {
        line = line.chars().take(99).collect::<String>() + "…";
    }
    line
}

/// A result for people: `reach h1 → h9: passed, 1.4 s ≤ 5.0 s`.
fn result_line(r: &serde_json::Value) -> String {
    let outcome = match r["outcome"].as_str().unwrap_or_default() {
        "passed" => "passed",
        "failed" => "FAILED",
        "untrustworthy" => "UNTRUSTWORTHY",
        o => o,
    };
    format!(
        "{}: {outcome}, {}",
        r["name"].as_str().unwrap_or_default(),
        r["detail"].as_str().unwrap_or_default()
    )
}

/// Per check, over the runs: how often each outcome, and the spread of the measured
/// times (s) of the runs that measured one.
fn summarize(runs: &[Run]) -> Vec<serde_json::Value> {
    let mut names: Vec<String> = Vec::new();
    for r in runs {
        for c in r.result["checks"].as_array().into_iter().flatten() {
            let n = c["name"].as_str().unwrap_or_default().to_string();
            if !names.contains(&n) {
                names.push(n);
            }
        }
    }
    names
        .into_iter()
        .map(|name| {
            let of: Vec<&serde_json::Value> = runs
                .iter()
                .flat_map(|r| r.result["checks"].as_array().into_iter().flatten())
                .filter(|c| c["name"] == name.as_str())
                .collect();
            let count = |o: &str| of.iter().filter(|c| c["outcome"] == o).count();
            let mut measured: Vec<f64> = of
                .iter()
                .filter_map(|c| c["measured_ns"].as_u64())
                .map(|n| n as f64 / 1e9)
                .collect();
            measured.sort_by(f64::total_cmp);
            let spread = (!measured.is_empty()).then(|| {
                json!({
                    "min_s": measured[0],
                    "median_s": measured[measured.len() / 2],
                    "max_s": measured[measured.len() - 1],
                })
            });
            // A flow check's delivery, run by run.
            let mut delivery: Vec<f64> =
                of.iter().filter_map(|c| c["flow"]["delivery"].as_f64()).collect();
            delivery.sort_by(f64::total_cmp);
            let delivery = (!delivery.is_empty()).then(|| {
                json!({
                    "min": delivery[0],
                    "median": delivery[delivery.len() / 2],
                    "max": delivery[delivery.len() - 1],
                })
            });
            json!({
                "name": name,
                "runs": of.len(),
                "delivery": delivery,
                "passed": count("passed"),
                "failed": count("failed"),
                "untrustworthy": count("untrustworthy"),
                "pass_rate": count("passed") as f64 / of.len().max(1) as f64,
                "measured": spread,
            })
        })
        .collect()
}

fn print_summary(summary: &[serde_json::Value], runs: usize) {
    println!("over {runs} runs:");
    for c in summary {
        let spread = match (&c["measured"], &c["delivery"]) {
            (serde_json::Value::Null, serde_json::Value::Null) => "nothing measured".to_string(),
            (serde_json::Value::Null, d) => format!(
                "delivered {:.1} / {:.1} / {:.1} % (min / median / max)",
                d["min"].as_f64().unwrap_or(0.0) * 100.0,
                d["median"].as_f64().unwrap_or(0.0) * 100.0,
                d["max"].as_f64().unwrap_or(0.0) * 100.0
            ),
            (m, _) => format!(
                "measured {:.3} / {:.3} / {:.3} s (min / median / max)",
                m["min_s"].as_f64().unwrap_or(0.0),
                m["median_s"].as_f64().unwrap_or(0.0),
                m["max_s"].as_f64().unwrap_or(0.0)
            ),
        };
        println!(
            "  {}: passed {}/{} ({:.0} %), failed {}, untrustworthy {}; {spread}",
            c["name"].as_str().unwrap_or_default(),
            c["passed"],
            c["runs"],
            c["pass_rate"].as_f64().unwrap_or(0.0) * 100.0,
            c["failed"],
            c["untrustworthy"]
        );
    }
}

/// JUnit XML: a test suite per run (the lab and its seed), a test case per check; a
/// failed check is a `failure`, an untrustworthy one an `error` (the answer could not be
/// trusted), one not judged (interrupted) `skipped` — valid against the JUnit schema
/// CI systems read (Jenkins' junit-10.xsd; the tests check it with xmllint).
fn junit(lab: &str, runs: &[Run]) -> Result<Vec<u8>> {
    use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, Event};
    let mut w = quick_xml::Writer::new_with_indent(Vec::new(), b' ', 2);
    let count = |r: &Run, o: &str| {
        r.result["checks"].as_array().into_iter().flatten().filter(|c| c["outcome"] == o).count()
    };
    let total = |o: &str| runs.iter().map(|r| count(r, o)).sum::<usize>().to_string();
    let all: usize = runs.iter().map(|r| r.result["checks"].as_array().map_or(0, Vec::len)).sum();
    w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    let mut suites = BytesStart::new("testsuites");
    suites.push_attribute(("name", format!("vemu test {lab}").as_str()));
    suites.push_attribute(("tests", all.to_string().as_str()));
    suites.push_attribute(("failures", total("failed").as_str()));
    suites.push_attribute(("errors", total("untrustworthy").as_str()));
    // (The JUnit schema has no `skipped` here: each suite says its own.)
    let seconds: f64 = runs.iter().map(|r| r.seconds).sum();
    suites.push_attribute(("time", format!("{seconds:.3}").as_str()));
    w.write_event(Event::Start(suites))?;
    for r in runs {
        let checks = r.result["checks"].as_array().cloned().unwrap_or_default();
        let mut suite = BytesStart::new("testsuite");
        suite.push_attribute(("name", format!("{lab} (seed {})", r.seed).as_str()));
        suite.push_attribute(("tests", checks.len().to_string().as_str()));
        suite.push_attribute(("failures", count(r, "failed").to_string().as_str()));
        suite.push_attribute(("errors", count(r, "untrustworthy").to_string().as_str()));
        suite.push_attribute(("skipped", count(r, "pending").to_string().as_str()));
        suite.push_attribute(("time", format!("{:.3}", r.seconds).as_str()));
        w.write_event(Event::Start(suite))?;
        w.write_event(Event::Start(BytesStart::new("properties")))?;
        let mut seed = BytesStart::new("property");
        seed.push_attribute(("name", "seed"));
        seed.push_attribute(("value", r.seed.to_string().as_str()));
        w.write_event(Event::Empty(seed))?;
        w.write_event(Event::End(BytesEnd::new("properties")))?;
        for c in &checks {
            let mut case = BytesStart::new("testcase");
            case.push_attribute(("name", c["name"].as_str().unwrap_or_default()));
            case.push_attribute(("classname", lab));
            let secs = c["measured_ns"].as_u64().unwrap_or(0) as f64 / 1e9;
            case.push_attribute(("time", format!("{secs:.3}").as_str()));
            let detail = c["detail"].as_str().unwrap_or_default();
            let inner = match c["outcome"].as_str().unwrap_or_default() {
                "failed" => Some(("failure", "failed")),
                "untrustworthy" => Some(("error", "untrustworthy")),
                "pending" => Some(("skipped", "not judged")),
                _ => None,
            };
            match inner {
                None => w.write_event(Event::Empty(case))?,
                Some((tag, kind)) => {
                    w.write_event(Event::Start(case))?;
                    let mut e = BytesStart::new(tag);
                    e.push_attribute(("message", format!("{kind}: {detail}").as_str()));
                    if tag != "skipped" {
                        e.push_attribute(("type", kind));
                    }
                    w.write_event(Event::Empty(e))?;
                    w.write_event(Event::End(BytesEnd::new("testcase")))?;
                }
            }
        }
        w.write_event(Event::End(BytesEnd::new("testsuite")))?;
    }
    w.write_event(Event::End(BytesEnd::new("testsuites")))?;
    let mut out = w.into_inner();
    out.push(b'\n');
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_progress_line_names_what_is_waited_for() {
        let checks = serde_json::json!([
            {"name": "a", "outcome": "passed", "deadline_ns": 5_000_000_000u64},
            {"name": "rerouted", "outcome": "pending", "deadline_ns": 17_000_000_000u64},
        ]);
        let line =
            super::waiting_line(checks.as_array().unwrap(), std::time::Duration::from_secs(12));
        assert_eq!(line, "[12 s] waiting for 1 of 2 checks: rerouted (≤ 17 s)");
    }
}
