//! Probing checks in the lab's nodes: the judge's driver.

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
        Check::Route { node, .. } | Check::Run { node, .. } | Check::ValleyFree { node, .. } => {
            node.as_str()
        }
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
        Check::ValleyFree { asn, software, graph, routes, .. } => {
            let argv = software.routes_command();
            let (code, out, err) = run(&door, argv, PROBE_S);
            if code != 0 {
                return (false, format!("{}: exit status {code}: {}", argv[0], err.trim()));
            }
            match software
                .as_paths(&out)
                .and_then(|p| vemu_scenario::import::routes_valley_free(*asn, &p, graph, *routes))
            {
                Ok(n) => (true, format!("{n} routes")),
                Err(e) => (false, e),
            }
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
        let ecmp =
            r#"[{"dst":"10.9.0.0/24","nexthops":[{"gateway":"10.0.0.2"},{"gateway":"10.0.0.6"}]}]"#;
        assert!(super::route_holds(ecmp, &other).0);
        assert_eq!(super::route_holds("[]", &[]), (false, "no such route".into()));
        // The most specific route covering the prefix decides (an aggregate here).
        let covering = r#"[{"dst":"default","gateway":"10.0.0.6"},{"dst":"10.0.0.0/29","gateway":"10.0.0.2"}]"#;
        assert!(super::route_holds(covering, &via).0);
        assert!(!super::route_holds(covering, &other).0);
    }
}
