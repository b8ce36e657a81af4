//! `vemu test`: a lab as a test — brought up, its checks (`expect:`) judged by its
//! controller as they resolve, taken down, and an exit status for CI: 0 every check
//! passed, 1 one failed, 2 bad input, 3 none failed but one is untrustworthy (measured
//! while the fidelity monitor judged the lab not ok).

use super::*;

/// How often the command asks the lab how its checks stand.
const POLL: std::time::Duration = std::time::Duration::from_millis(250);
/// How long after the last deadline the command waits for the judge.
const GRACE_NS: u64 = 30_000_000_000;

pub(crate) fn test(file: &std::path::Path, name: Option<&str>, json_out: bool) -> Result<ExitCode> {
    let plan = load_scenario(file, name, None, None)?;
    if plan.expect.is_empty() {
        return Err(user(format!(
            "{}: no checks to judge ('expect:' in the scenario; docs/testing.md)",
            file.display()
        )));
    }
    if !plan.machines.is_empty() {
        return Err(user("vemu test: not yet for labs across machines"));
    }
    need_root()?;
    images_readable(&plan)?;
    let lab = plan.name.clone();
    let last_deadline =
        plan.expect.iter().map(|e| e.start_ns.saturating_add(e.within_ns)).max().unwrap_or(0);
    crate::up::UP_LINE_ON_STDERR.store(json_out, std::sync::atomic::Ordering::Relaxed);
    let routers = crate::save::routers(&plan);
    up_background(plan, ApiOptions { tcp: None })?;
    let judged = crate::save::wait_routers_ready(&lab, routers)
        .and_then(|()| judge(&lab, last_deadline, json_out));
    // Down whatever happened (the lab is the test's, not the user's).
    let down = connect(&lab).and_then(|c| c.post("/v1/down", &json!({})));
    let code = judged?;
    down?;
    Ok(ExitCode::from(code as u8))
}

/// Follow the lab's checks until all are resolved, saying each as it does; the exit
/// status.
fn judge(lab: &str, last_deadline_ns: u64, json_out: bool) -> Result<i32> {
    let c = connect(lab)?;
    let started = std::time::Instant::now();
    let mut said = std::collections::HashSet::new();
    loop {
        let v = c.get("/v1/expect")?;
        let checks = v["checks"].as_array().cloned().unwrap_or_default();
        for r in &checks {
            let name = r["name"].as_str().unwrap_or_default().to_string();
            if r["outcome"] != "pending" && said.insert(name.clone()) && !json_out {
                println!("{}", result_line(r));
            }
        }
        if v["done"] == true {
            if json_out {
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                let count = |o: &str| checks.iter().filter(|r| r["outcome"] == o).count();
                println!(
                    "{} checks: {} passed, {} failed, {} untrustworthy",
                    checks.len(),
                    count("passed"),
                    count("failed"),
                    count("untrustworthy")
                );
            }
            return Ok(v["exit"].as_i64().unwrap_or(1) as i32);
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
