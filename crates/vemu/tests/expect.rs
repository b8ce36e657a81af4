//! Labs as tests (issue 43): checks in the scenario (`expect:`) judged by the lab's
//! controller, `vemu test` for CI.

mod common;

use common::*;

/// A chain a – b – c, its b–c link cut at 2 s and back at 4 s (the timeline).
const CHAIN: &str = "routing: static
addressing: {ipv6: none}
nodes: {a: {}, b: {}, c: {}}
links:
  - {endpoints: [a, b], delay: 1ms}
  - {endpoints: [b, c], delay: 1ms}
events:
  - {name: cut, at: 2s, link: b:c, state: down}
  - {name: back, at: 4s, link: b:c, state: up}
";

#[test]
fn vemu_test_judges_reach_routes_commands_and_timeline_deadlines() {
    let _g = serial();
    let yaml = format!(
        "name: t-expect\n{CHAIN}expect:
  - {{name: a reaches c, reach: {{from: a, to: c}}, within: 5s}}
  - {{route: {{node: a, prefix: 10.0.0.4/30, via: b}}, within: 5s}}
  - {{run: {{node: c, cmd: 'hostname', output: c}}, within: 5s}}
  - {{name: back within 3 s, after: back, reach: {{from: a, to: c}}, within: 3s}}
  - {{name: during the cut, after: cut, reach: {{from: a, to: c}}, within: 1s}}
"
    );
    let path = write_scenario("t-expect", &yaml);
    let o = vemu(&["test", path.to_str().unwrap()]);
    let t = text(&o);
    eprintln!("{t}");
    // The cut fails its 1 s bound (the link is down for 2 s): exit 1.
    assert_eq!(o.status.code(), Some(1), "{t}");
    for said in [
        "a reaches c: passed, ",
        "route a 10.0.0.4/30 via b: passed, ",
        "run c: hostname: passed",
        "back within 3 s: passed, ",
        "during the cut: FAILED, did not hold within 1.0 s",
        "5 checks: 4 passed, 1 failed, 0 untrustworthy",
    ] {
        assert!(t.contains(said), "{said}: {t}");
    }
    // Measured beside the bound: the way back took less than the 3 s allowed.
    let back = t.lines().find(|l| l.starts_with("back within 3 s")).unwrap();
    assert!(back.ends_with("≤ 3.0 s"), "{back}");
    // The lab is gone.
    assert!(lab_netns("t-expect").is_empty());
    assert!(!std::path::Path::new("/run/vemu/t-expect").exists());
}

/// `drops:` checks: counted from their start on the engine's counters; a link whose
/// queue overflows (pings at 8 Mbit/s into 1 Mbit/s and a queue of 2) fails its bound
/// as soon as it is crossed, a clean one passes at its deadline.
#[test]
fn drops_checks_count_the_links_drops() {
    let _g = serial();
    let yaml = "name: t-expect6
routing: none
addressing: {ipv6: none}
nodes: {a: {}, b: {}, c: {}}
links:
  - {endpoints: [a, b], bandwidth: 1Mbit, queue: 2}
  - {endpoints: [b, c]}
expect:
  - {name: lossy, drops: {link: a:b, at_most: 3}, within: 20s}
  - {name: clean, drops: {link: b:c, at_most: 0}, within: 2s}
  - {name: traffic, run: {node: a, cmd: 'ping -q -c 40 -l 20 -i 0.005 -s 1000 -W 1 b; true'}, within: 10s}
";
    let path = write_scenario("t-expect6", yaml);
    let o = vemu(&["test", path.to_str().unwrap()]);
    let t = text(&o);
    eprintln!("{t}");
    assert_eq!(o.status.code(), Some(1), "{t}");
    let lossy = t.lines().find(|l| l.starts_with("lossy: ")).unwrap_or_default();
    assert!(lossy.starts_with("lossy: FAILED, ") && lossy.contains(" drops > 3 (by "), "{t}");
    assert!(t.contains("clean: passed, 0 drops ≤ 0"), "{t}");
    assert!(lab_netns("t-expect6").is_empty());
}

/// A flaky network test becomes a number (issue 43): a flow over a link that loses 10 %
/// of its frames, asked to deliver 90 %, over three runs with seeds one apart — its pass
/// rate, and what it delivered each run (min / median / max).
#[test]
fn a_flow_over_a_lossy_link_gets_a_pass_rate_and_a_spread_over_runs() {
    let _g = serial();
    let yaml = "name: t-expect7
routing: none
addressing: {ipv6: none}
nodes: {a: {}, b: {}}
links:
  - {endpoints: [a, b], loss: 10%}
expect:
  - {name: delivery, flow: {from: a, to: b, rate: 100, size: 200, duration: 2s, delivery: 90%}}
";
    let path = write_scenario("t-expect7", yaml);
    let o = vemu(&["test", path.to_str().unwrap(), "--repeat", "3", "--seed", "1"]);
    let t = text(&o);
    eprintln!("{t}");
    let line =
        t.lines().find(|l| l.trim_start().starts_with("delivery: passed ")).unwrap_or_default();
    let passed: usize =
        line.split_whitespace().nth(2).and_then(|p| p.split('/').next()?.parse().ok()).unwrap();
    assert!(line.contains("/3 ("), "{t}");
    assert_eq!(o.status.code(), Some(if passed == 3 { 0 } else { 1 }), "{t}");
    let spread = line.split("delivered ").nth(1).unwrap_or_default();
    let pct: Vec<f64> = spread
        .split(" / ")
        .filter_map(|x| x.trim_end_matches(|c: char| !c.is_ascii_digit()).parse().ok())
        .collect();
    assert_eq!(pct.len(), 3, "{line}");
    assert!(pct[0] <= pct[1] && pct[1] <= pct[2], "{line}");
    assert!(pct[0] >= 80.0 && pct[2] <= 98.0, "about 90 % each run: {line}");
    assert!(lab_netns("t-expect7").is_empty());
}

/// `file` is valid against the JUnit schema CI systems read (Jenkins xunit's
/// junit-10.xsd, MIT, in tests/data; checked by xmllint).
fn assert_valid_junit(file: &std::path::Path) {
    let xsd = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/junit-10.xsd");
    let o = std::process::Command::new("xmllint")
        .args(["--noout", "--schema", xsd])
        .arg(file)
        .output()
        .expect("xmllint (libxml2-utils, scripts/setup.sh)");
    assert!(o.status.success(), "not valid JUnit XML: {}", text(&o));
}

/// examples/manet-delivery-test.yaml (issue 43): babeld routes n1 to n3 over two radio
/// hops; two UDP flows started by their checks are judged from their records — one
/// delivers ≥ 95 % within 50 ms (passed), the other cannot have every packet within 1 ms
/// over two hops of airtime (failed, its longest delay beside the bound).
#[test]
fn manet_flows_are_judged_by_what_they_delivered() {
    let _g = serial();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/manet-delivery-test.yaml");
    let o = vemu(&["test", path.to_str().unwrap()]);
    let t = text(&o);
    eprintln!("{t}");
    assert_eq!(o.status.code(), Some(1), "{t}");
    let line = |name: &str| t.lines().find(|l| l.starts_with(name)).unwrap_or_default().to_string();
    let video = line("video delivered: ");
    assert!(video.starts_with("video delivered: passed, delivery "), "{t}");
    assert!(video.contains("% ≥ 95.0% (") && video.contains(" of 200), delay p95 "), "{t}");
    let tight = line("every packet within 1 ms: ");
    assert!(tight.starts_with("every packet within 1 ms: FAILED, delay max "), "{t}");
    assert!(tight.ends_with(" > 1.0 ms"), "{t}");
    assert!(lab_netns("manet-delivery").is_empty());
}

/// examples/frr-convergence-test.yaml (issue 43): an OSPF ring of FRR routers judged by
/// the lab — converged, the short way before the cut, rerouted the long way within 5 s
/// of it, and not within 1 ms (failed, with the time it did take beside the bound).
#[test]
fn frr_reconvergence_after_a_cut_is_measured_and_judged() {
    let _g = serial();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/frr-convergence-test.yaml");
    let junit = std::env::temp_dir().join("vemu-tests").join("frr-junit.xml");
    let _ = std::fs::create_dir_all(junit.parent().unwrap());
    let o = vemu(&["test", path.to_str().unwrap(), "--junit", junit.to_str().unwrap()]);
    let t = text(&o);
    eprintln!("{t}");
    assert_eq!(o.status.code(), Some(1), "{t}");
    // What each check came to (its last line: a line is said again when the monitor's
    // judgement of its seconds comes). Five FRR routers starting on two busy cores may
    // make the fidelity monitor see the lab starved of CPU then (issue 45): a check
    // measured in those seconds is untrustworthy, which is right and not what this test
    // is about — a passed one may be said so.
    let last = |name: &str| t.lines().rfind(|l| l.starts_with(name)).unwrap_or_default();
    let mut untrustworthy = 0;
    for name in
        ["converged", "short way before the cut", "rerouted within 5 s", "long way after the cut"]
    {
        let l = last(&format!("{name}: "));
        let passed = l.starts_with(&format!("{name}: passed, "));
        let doubted = l.starts_with(&format!("{name}: UNTRUSTWORTHY, passed ("));
        assert!(passed || doubted, "{name}: {t}");
        untrustworthy += doubted as usize;
    }
    assert!(
        last("rerouted within 1 ms: ")
            .starts_with("rerouted within 1 ms: FAILED, did not hold within 1.0 ms"),
        "{t}"
    );
    let summary =
        format!("5 checks: {} passed, 1 failed, {untrustworthy} untrustworthy", 4 - untrustworthy);
    assert!(t.contains(&summary), "{summary}: {t}");
    // Measured beside the bound, both ways: the reroute took less than 5 s, and more
    // than 1 ms.
    let took = |line: &str, from: &str, to: &str| -> f64 {
        let l = t.lines().rfind(|l| l.starts_with(line)).unwrap_or_default();
        let l = l.replace("passed (", "passed, ");
        let s = l.split(from).nth(1).and_then(|x| x.split(to).next()).unwrap_or_default();
        let (n, unit) = s.trim().split_once(' ').unwrap_or_default();
        n.parse::<f64>().unwrap_or(f64::NAN) * if unit.starts_with("ms") { 1e-3 } else { 1.0 }
    };
    let fast = took("rerouted within 5 s", "passed, ", "≤");
    let slow = took("rerouted within 1 ms", "held after ", ")");
    assert!((0.0..5.0).contains(&fast), "{t}");
    assert!(slow > 0.001 && slow < 5.0, "{t}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("held after"), "{xml}");
    assert_valid_junit(&junit);
    assert!(lab_netns("frr-convergence").is_empty());
}

#[test]
fn vemu_test_says_json_and_passes_with_exit_0() {
    let _g = serial();
    let yaml = format!(
        "name: t-expect2\n{CHAIN}expect:\n  - {{reach: {{from: a, to: c}}, within: 5s}}\n  - {{fidelity: ok, within: 2s}}\n"
    );
    let path = write_scenario("t-expect2", &yaml);
    let o = vemu(&["test", path.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["exit"], 0);
    assert_eq!(v["checks"][0]["outcome"], "passed");
    assert!(v["checks"][0]["measured_ns"].as_u64().unwrap() < 5_000_000_000);
    assert_eq!(v["checks"][1]["outcome"], "passed", "{v}");
    // Bad input: exit 2, nothing built.
    let bad = write_scenario(
        "t-expect3",
        "nodes: {a: {}}\nexpect: [{reach: {from: a, to: z}, within: 1s}]\n",
    );
    let o = vemu(&["test", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("'z' is neither a node of the lab nor an address"), "{}", text(&o));
    assert!(lab_netns("t-expect3").is_empty());
}

#[test]
fn vemu_test_repeats_with_seeds_writes_junit_and_goes_down_on_ctrl_c() {
    let _g = serial();
    let yaml = format!(
        "name: t-expect4\nseed: 42\n{CHAIN}expect:\n  - {{name: a reaches c, reach: {{from: a, to: c}}, within: 5s}}\n  - {{name: back within 3 s, after: back, reach: {{from: a, to: c}}, within: 3s}}\n"
    );
    let path = write_scenario("t-expect4", &yaml);
    let junit = std::env::temp_dir().join("t-expect4.junit.xml");
    let o = vemu(&[
        "test",
        path.to_str().unwrap(),
        "--repeat",
        "2",
        "--seed",
        "7",
        "--junit",
        junit.to_str().unwrap(),
    ]);
    let t = text(&o);
    eprintln!("{t}");
    assert_eq!(o.status.code(), Some(0), "{t}");
    for said in [
        "run 1 of 2 (seed 7)",
        "run 2 of 2 (seed 8)",
        "over 2 runs:",
        "a reaches c: passed 2/2 (100 %)",
        "back within 3 s: passed 2/2 (100 %), failed 0, untrustworthy 0; measured ",
    ] {
        assert!(t.contains(said), "{said}: {t}");
    }
    let xml = std::fs::read_to_string(&junit).unwrap();
    for has in [
        r#"<testsuites name="vemu test t-expect4" tests="4" failures="0" errors="0" time=""#,
        r#"<testsuite name="t-expect4 (seed 7)" tests="2""#,
        r#"<testsuite name="t-expect4 (seed 8)" tests="2""#,
        r#"<property name="seed" value="8"/>"#,
        r#"<testcase name="back within 3 s" classname="t-expect4" time=""#,
    ] {
        assert!(xml.contains(has), "{has}: {xml}");
    }
    assert_valid_junit(&junit);
    std::fs::remove_file(&junit).unwrap();
    // Ctrl-C while a check waits: the lab goes down, exit 130, the check not judged.
    let slow = write_scenario(
        "t-expect5",
        "name: t-expect5\nnodes: {a: {}}\nexpect: [{name: never, run: {node: a, cmd: 'false'}, within: 120s}]\n",
    );
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_vemu"))
        .args(["test", slow.to_str().unwrap(), "--junit", junit.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // (Up: its checks' first probes are made; then Ctrl-C.)
    let t0 = std::time::Instant::now();
    while lab_netns("t-expect5").is_empty() {
        assert!(t0.elapsed().as_secs() < 30, "the lab came up");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    std::thread::sleep(std::time::Duration::from_secs(2));
    // SAFETY: plain kill(2) of the child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(130), "{t}");
    assert!(
        t.contains("1 not judged (interrupted)")
            && t.contains("interrupted; lab 't-expect5' taken down"),
        "{t}"
    );
    assert!(lab_netns("t-expect5").is_empty());
    assert!(std::fs::read_to_string(&junit).unwrap().contains(r#"<skipped message="not judged: "#));
    assert_valid_junit(&junit);
    std::fs::remove_file(&junit).unwrap();
}
