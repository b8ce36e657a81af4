//! Real labs: namespaces, TAP devices, the engine, ping and iperf3. Run as root.

mod common;
use common::*;

#[test]
fn chain_of_five_rtt_is_the_sum_of_delays() {
    let _g = serial();
    // The delays add to what the engine's path costs unimpaired (an unimpaired link
    // goes by the kernel, faster: bench/ measures both).
    let base = {
        let lab =
            Lab::up_env("t-base5", &chain("t-base5", &[0.0; 4], ""), &[("VEMU_FAST_PATH", "off")]);
        lab.ping_median("n1", "n5", 200, 0.01).2
    };
    let lab = Lab::up("t-chain5", &chain("t-chain5", &[5.0; 4], ""));
    let (sent, recv, rtt) = lab.ping_median("n1", "n5", 200, 0.01);
    assert_eq!(sent, recv);
    // The delays are at least what is set, and at most that plus the unimpaired path:
    // a link's delay absorbs the time a frame waited to be read (tests/fidelity.rs), so
    // the engine's own part of the unimpaired path may vanish under the delays (CI saw
    // 40.10 ms beside an unimpaired 0.70) — plus the wake-ups that delays cost and
    // back-to-back frames do not: each delayed frame is written after a sleep, to a node
    // whose CPU went idle meanwhile (with every direction on the engine's path, 40.4–40.5
    // ms here beside an unimpaired 0.17–0.33, and 41.0 in CI beside 0.26: up to 0.125 ms
    // a delayed hop, 8 of them; stop 75's note).
    let expect = 40.0 + base + 8.0 * 0.125;
    // (Medians: CI run 19 failed on means, 40.96 for 40.29 ms, while this VM's host took
    // its CPUs — a few frames late by milliseconds move a mean, not the delay set.)
    eprintln!(
        "unimpaired RTT {base:.3} ms, with 4 x 5 ms: {rtt:.3} ms (expect 40 to {expect:.3} + 0.5)"
    );
    assert!(
        (40.0..=expect + 0.5).contains(&rtt),
        "RTT {rtt} ms, expected 40 ms to {expect} + 0.5 ms"
    );
    // Names resolve through the lab's /etc/hosts.
    let (_, r, _) = lab.ping("n1", "n5", 1, 0.2);
    assert_eq!(r, 1);
}

#[test]
fn chain_with_unequal_delays() {
    let _g = serial();
    // One-way: the delays apply from n1 toward n5 only.
    let one_way = |name: &str, delays_ms: [u32; 4]| {
        let mut y = chain(name, &[0.0; 4], "");
        for (i, d) in delays_ms.iter().enumerate() {
            y = y.replacen(
                &format!("[n{}, n{}]\n    delay: 0ms\n", i + 1, i + 2),
                &format!("[n{}, n{}]\n    forward: {{delay: {d}ms}}\n", i + 1, i + 2),
                1,
            );
        }
        y
    };
    // The base takes the same paths (the forward direction through the engine, the
    // reverse one by the kernel when the fast path is on): 1 ms a hop, taken off.
    let base = {
        let lab = Lab::up("t-base4", &one_way("t-base4", [1; 4]));
        lab.ping_median("n1", "n5", 10, 0.2).2 - 4.0
    };
    let lab = Lab::up("t-chain650", &one_way("t-chain650", [50, 100, 200, 300]));
    let (sent, recv, rtt) = lab.ping_median("n1", "n5", 10, 0.2);
    assert_eq!(sent, recv);
    let expect = 650.0 + base;
    eprintln!(
        "RTT {rtt:.3} ms, the same paths without the delays {base:.3} ms: expected {expect:.3} ± 1"
    );
    assert!((rtt - expect).abs() <= 1.0, "RTT {rtt} ms, expected {expect} ± 1 ms");
}

#[test]
fn tcp_goodput_follows_bandwidth() {
    let _g = serial();
    // At 1 Gbit/s the two nodes' TCP and the engine share this machine's two cores:
    // without a model drop or a late frame, goodput was 0.91–0.955 of the rate (one run
    // in four under 0.93 unloaded, before and after the change that made this bound
    // looser): the rate is what is tested there, the CPU left to TCP is bench/'s.
    for (rate, bps, least) in
        [("10Mbit", 10e6, 0.93), ("100Mbit", 100e6, 0.93), ("1Gbit", 1e9, 0.8)]
    {
        let y = format!(
            "name: t-bw\naddressing: {{ipv6: none}}\nnodes: {{a: {{run: ['iperf3 -s -D']}}, b: {{}}}}\nlinks:\n  - endpoints: [a, b]\n    bandwidth: {rate}\n"
        );
        let lab = Lab::up("t-bw", &y);
        std::thread::sleep(std::time::Duration::from_millis(300));
        let got = lab.iperf3("b", "10.0.0.1", 5);
        let ratio = got / bps;
        eprintln!("{rate}: {:.2} Mbit/s goodput = {:.1}%", got / 1e6, ratio * 100.0);
        assert!(
            (least..=1.01).contains(&ratio),
            "{rate}: goodput {:.1}% of the set rate",
            ratio * 100.0
        );
    }
}

#[test]
fn loss_on_four_links_compounds() {
    let _g = serial();
    let lab = Lab::up("t-loss", &chain("t-loss", &[0.0; 4], "    forward: {loss: 10%}\n"));
    // Resolve neighbours (ARP crosses the lossy links too) before counting.
    lab.exec("n1", &["ping", "-c", "20", "-i", "0.1", "-W", "1", "10.0.0.14"]);
    let o = lab.exec("n1", &["ping", "-q", "-c", "3000", "-i", "0.002", "-W", "2", "10.0.0.14"]);
    let (sent, recv, _) = parse_ping(&String::from_utf8_lossy(&o.stdout));
    let n = sent as f64;
    let loss = 1.0 - recv as f64 / n;
    let p: f64 = 1.0 - 0.9f64.powi(4);
    let half = 2.576 * (p * (1.0 - p) / n).sqrt();
    eprintln!("{sent} probes, end-to-end loss {loss:.4}, expected {p:.4} ± {half:.4} (99%)");
    assert!(sent >= 2000);
    assert!((loss - p).abs() <= half, "loss {loss}");
    // The counters agree: forward directions dropped, reverse ones did not.
    let s = lab.status();
    for l in s["links"].as_array().unwrap() {
        assert!(l["forward"]["stats"]["drop_loss"].as_u64().unwrap() > 100);
        assert_eq!(l["reverse"]["stats"]["drop_loss"].as_u64().unwrap(), 0);
    }
}

#[test]
fn runtime_link_changes() {
    let _g = serial();
    let lab = Lab::up("t-runtime", &chain("t-runtime", &[10.0], ""));
    let (_, _, rtt) = lab.ping_median("n1", "n2", 20, 0.05);
    assert!((rtt - 20.0).abs() < 0.5, "{rtt}");
    // What the engine and the kernel add to the configured delays.
    let base = rtt - 20.0;
    // One direction only: n1 -> n2 gets 40 ms more.
    let o = lab.vemu(&["link", "set", "n1:n2", "--direction", "forward", "--delay", "50ms"]);
    assert!(o.status.success(), "{}", text(&o));
    let (_, _, rtt) = lab.ping_median("n1", "n2", 20, 0.05);
    eprintln!("RTT {rtt:.3} ms after the change, expected {:.3} ± 0.5", 60.0 + base);
    assert!((rtt - 60.0 - base).abs() < 0.5, "{rtt}");
    // Written the other way round, forward is n2 -> n1.
    let o = lab.vemu(&["link", "set", "n2:n1", "--direction", "forward", "--delay", "0ms"]);
    assert!(o.status.success(), "{}", text(&o));
    let (_, _, rtt) = lab.ping_median("n1", "n2", 20, 0.05);
    assert!((rtt - 50.0 - base).abs() < 0.5, "{rtt}");
    let s = lab.status();
    assert_eq!(s["links"][0]["forward"]["impairments"]["delay_ns"], 50_000_000);
    assert_eq!(s["links"][0]["reverse"]["impairments"]["delay_ns"], 0);

    // Down: nothing gets through, and both ends see their carrier go, as daemons on
    // real hardware would.
    assert!(lab.vemu(&["link", "down", "n1:n2"]).status.success());
    let (sent, recv, _) = lab.ping("n1", "n2", 5, 0.1);
    assert_eq!((sent, recv), (5, 0));
    for node in ["n1", "n2"] {
        let o = lab.exec(node, &["ip", "link", "show", "eth0"]);
        assert!(text(&o).contains("NO-CARRIER"), "{}", text(&o));
    }
    assert_eq!(lab.status()["links"][0]["up"], false);
    assert!(lab.vemu(&["link", "up", "n1:n2"]).status.success());
    let o = lab.exec("n2", &["ip", "link", "show", "eth0"]);
    assert!(text(&o).contains("LOWER_UP"), "{}", text(&o));
    let (sent, recv, _) = lab.ping("n1", "n2", 5, 0.1);
    assert_eq!(sent, recv);

    // A bad value changes nothing and says why.
    let o = lab.vemu(&["link", "set", "n1:n2", "--loss", "150%"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("between 0% and 100%"), "{}", text(&o));
    let o = lab.vemu(&["link", "set", "n1:n9", "--delay", "1ms"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("no node named 'n9'"), "{}", text(&o));
}

#[test]
fn exec_passes_status_and_runs_in_the_node() {
    let _g = serial();
    let lab = Lab::up("t-exec", &chain("t-exec", &[1.0], ""));
    assert_eq!(lab.exec("n1", &["sh", "-c", "exit 7"]).status.code(), Some(7));
    let o = lab.exec("n2", &["hostname"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "n2");
    let o = lab.exec("n1", &["cat", "/sys/class/net/eth0/address"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "02:00:00:00:00:00");
    let o = lab.exec("n9", &["true"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("no node 'n9'"));
    let o = lab.exec("n1", &["no-such-program-xyz"]);
    assert_eq!(o.status.code(), Some(127));
}

#[test]
fn bad_scenarios_are_rejected_and_build_nothing() {
    let _g = serial();
    let cases: &[(&str, &str, &str)] = &[
        ("t-bad1", "nodes: {a: {}, b: {}}\nlinks:\n  - endpoints: [a, c]\n", "unknown node 'c'"),
        ("t-bad2", "nodes:\n  a: {}\n  a: {}\n", "'a' is given twice"),
        (
            "t-bad3",
            "nodes: {a: {}, b: {}}\nlinks:\n  - {endpoints: [a, b], loss: 150%}\n",
            "between 0% and 100%",
        ),
        (
            "t-bad4",
            "nodes: {a: {}, b: {}}\nlinks:\n  - {endpoints: [a, b], delay: -5ms}\n",
            "must not be negative",
        ),
        (
            "t-bad5",
            "nodes: {a: {}, b: {}}\nlinks:\n  - {endpoints: [a, b], bandwidth: 5 furlongs}\n",
            "unknown unit 'furlongs'",
        ),
        ("t-bad6", "nodes: {a: {}, b: {}\nlinks: [\n", "YAML syntax error"),
    ];
    for (name, yaml, expect) in cases {
        let path = write_scenario(name, &format!("name: {name}\n{yaml}"));
        let o = vemu(&["up", path.to_str().unwrap()]);
        let msg = text(&o);
        assert_eq!(o.status.code(), Some(2), "{name}: {msg}");
        assert!(msg.contains(expect), "{name}: {msg}");
        assert!(msg.contains(&format!("{name}.yaml:")), "{name}: message names the file: {msg}");
        assert!(lab_netns(name).is_empty(), "{name}: a namespace was created");
        assert!(
            !std::path::Path::new("/run/vemu").join(name).exists(),
            "{name}: state was created"
        );
    }
    let o = vemu(&["up", "/nonexistent/lab.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("/nonexistent/lab.yaml: cannot read"), "{}", text(&o));
}

fn pids_of(pattern: &str) -> Vec<u32> {
    let o = std::process::Command::new("pgrep").args(["-f", pattern]).output().unwrap();
    String::from_utf8_lossy(&o.stdout).lines().filter_map(|l| l.trim().parse().ok()).collect()
}

#[test]
fn kill_9_then_clean_leaves_nothing() {
    let _g = serial();
    let name = "t-crash";
    // Traffic flows when the controller (and its engine threads) die: 500 pings/s.
    let yaml = "name: t-crash\nnodes:\n  a: {run: ['sleep 7777', 'iperf3 -s -D', 'ping -q -i 0.002 b']}\n  b: {}\nlinks:\n  - {endpoints: [a, b], delay: 1ms}\n";
    let path = write_scenario(name, yaml);
    let o = vemu(&["up", path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let status: serde_json::Value =
        serde_json::from_slice(&vemu(&["status", "--lab", name, "--json"]).stdout).unwrap();
    let pid = status["pid"].as_u64().unwrap() as i32;
    assert!(!pids_of("sleep 7777").is_empty());
    // The controller is a daemon: its own session, not a child of `vemu up`.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
    assert_eq!(fields[3], pid.to_string(), "the controller leads its own session: {stat}");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let before: serde_json::Value =
        serde_json::from_slice(&vemu(&["status", "--lab", name, "--json"]).stdout).unwrap();
    assert!(
        before["links"][0]["forward"]["stats"]["tx_frames"].as_u64().unwrap() > 50,
        "traffic flows: {}",
        before["links"][0]
    );
    assert!(std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    std::thread::sleep(std::time::Duration::from_millis(300));
    let o = vemu(&["ls"]);
    assert!(text(&o).contains("t-crash\tleft behind by a crash"), "{}", text(&o));
    let o = vemu(&["clean"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(lab_netns(name).is_empty(), "namespaces remain");
    assert!(pids_of("sleep 7777").is_empty(), "node processes remain");
    assert!(!std::path::Path::new("/run/vemu").join(name).exists());
    assert!(
        !std::path::Path::new("/run/vemu/t-crash.lock").exists(),
        "clean frees the crashed lab's name"
    );
    assert!(pids_of("ping -q -i 0.002 b").is_empty(), "the traffic's processes are gone");
    // Killed: gone, or a zombie waiting for init to reap it (it holds nothing).
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = state.rsplit(')').next().unwrap_or("").trim_start().chars().next();
    assert!(matches!(state, None | Some('Z')), "controller remains ({state:?})");
    // And the same scenario comes up again.
    let o = vemu(&["up", path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let o = vemu(&["down", "--lab", name]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(lab_netns(name).is_empty());
}

#[test]
fn labs_side_by_side() {
    let _g = serial();
    let a = Lab::up("t-side-a", &chain("t-side-a", &[1.0], ""));
    let b = Lab::up("t-side-b", &chain("t-side-b", &[3.0], ""));
    // Without --lab, a command that acts on one lab asks which.
    let o = vemu(&["status"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("say which with --lab"), "{}", text(&o));
    let (_, _, ra) = a.ping_median("n1", "n2", 10, 0.05);
    let (_, _, rb) = b.ping_median("n1", "n2", 10, 0.05);
    assert!((ra - 2.0).abs() < 0.5 && (rb - 6.0).abs() < 0.5, "{ra} {rb}");
    // The same name cannot run twice.
    let path = write_scenario("t-side-a", &chain("t-side-a", &[1.0], ""));
    let o = vemu(&["up", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "a lab name in use is a mistake in the input");
    assert!(text(&o).contains("already running"), "{}", text(&o));
}

/// A program started with `ip netns exec` lives in a mount namespace whose mounts are
/// slaves of the machine's: every pin made under the lab's (shared) state directory is
/// propagated into it, and the kernel refuses to copy a mount namespace file — `up`
/// failed with "pinning the mount namespace ... EINVAL" while such a program ran.
#[test]
fn a_program_started_with_ip_netns_exec_does_not_stop_labs() {
    let _g = serial();
    let mut slave = std::process::Command::new("unshare")
        .args(["-m", "--propagation", "slave", "sleep", "60"])
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let path = write_scenario("t-slave", &chain("t-slave", &[1.0], ""));
    let o = vemu(&["up", path.to_str().unwrap(), "--name", "t-slave"]);
    let up_ok = o.status.success();
    if up_ok {
        let lab = Lab { name: "t-slave".into() };
        let (sent, received, _) = lab.ping("n1", "n2", 3, 0.1);
        assert_eq!(received, sent);
    }
    let _ = slave.kill();
    let _ = slave.wait();
    assert!(up_ok, "{}", text(&o));
}

#[test]
fn run_commands_are_supervised_and_logged() {
    let _g = serial();
    let yaml = "name: t-run\nnodes:\n  a: {run: ['echo hello from $VEMU_NODE', 'exit 3']}\n  b: {}\nlinks:\n  - endpoints: [a, b]\n";
    let lab = Lab::up("t-run", yaml);
    std::thread::sleep(std::time::Duration::from_millis(4500));
    let log = std::fs::read_to_string("/var/log/vemu/t-run/a.log").unwrap();
    assert!(log.contains("hello from a"), "{log}");
    let s = lab.status();
    let procs = s["nodes"][0]["processes"].as_array().unwrap();
    assert_eq!(procs[0]["state"], "done");
    assert_eq!(procs[1]["state"], "failed", "{procs:?}");
    assert_eq!(procs[1]["restarts"], 3);
}

/// (time, ICMP type, sequence) of every frame of a capture file, read by tshark; its
/// stderr must carry no warning.
fn tshark_icmp(path: &std::path::Path) -> Vec<(f64, u32, u32)> {
    let o = std::process::Command::new("tshark")
        .args([
            "-r",
            path.to_str().unwrap(),
            "-T",
            "fields",
            "-e",
            "frame.time_epoch",
            "-e",
            "icmp.type",
            "-e",
            "icmp.seq",
        ])
        .output()
        .expect("running tshark");
    let err: Vec<String> = String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|l| !l.starts_with("Running as user"))
        .map(String::from)
        .collect();
    assert!(o.status.success() && err.is_empty(), "tshark: {err:?}");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f[0].parse().unwrap(), f[1].parse().unwrap(), f[2].parse().unwrap())
        })
        .collect()
}

/// Issue 43: `--point drops` records every frame the emulation dropped on its way to or
/// from the interface, its reason as the packet's comment (tshark reads it), as many of
/// each reason as the link's counters counted meanwhile; `vemu report drops` sums them.
#[test]
fn a_capture_of_drops_shows_each_drop_and_why() {
    let _g = serial();
    let yaml = "routing: none\naddressing: {ipv6: none}\nnodes: {n1: {}, n2: {}}\nlinks:\n  - {endpoints: [n1, n2], loss: 10%, bandwidth: 2Mbit, queue: 3}\n";
    let lab = Lab::up("t-drops", yaml);
    let st = lab.status();
    let n2 = lab.addrs(&st, "n2", false)[0].clone();
    let file = std::env::temp_dir().join("vemu-tests").join("drops.pcapng");
    let _ = std::fs::create_dir_all(file.parent().unwrap());
    let counted = |st: &serde_json::Value, key: &str| -> u64 {
        ["forward", "reverse"]
            .iter()
            .map(|d| st["links"][0][d]["stats"][key].as_u64().unwrap())
            .sum()
    };
    let mut cap = std::process::Command::new(env!("CARGO_BIN_EXE_vemu"))
        .args(["capture", "--lab", "t-drops", "n2:eth0", "--point", "after,drops"])
        .args(["-w", file.to_str().unwrap()])
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let before = lab.status();
    // 300 pings of 1000 bytes at 500/s (up to 30 unanswered: ping otherwise paces
    // itself to the replies): twice the link's 2 Mbit/s, so its queue of 3 overflows;
    // and 10% of what it sends lost each way.
    let ping = ["ping", "-q", "-c", "300", "-l", "30", "-i", "0.002", "-s", "1000", "-W", "1"];
    let o = lab.exec("n1", &[&ping[..], &[n2.as_str()]].concat());
    assert!(!text(&o).is_empty());
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let after = lab.status();
    // SAFETY: kill(2) to our own child.
    unsafe { libc::kill(cap.id() as i32, libc::SIGINT) };
    assert!(cap.wait().unwrap().success());
    // Two points, a pcapng interface each: 0 what n2's interface got, 1 what was dropped.
    let o = std::process::Command::new("tshark")
        .args(["-r", file.to_str().unwrap(), "-T", "fields", "-e", "frame.interface_id"])
        .args(["-e", "frame.interface_name", "-e", "frame.comment"])
        .args(["-e", "frame.p2p_dir", "-e", "icmp.type"])
        .output()
        .unwrap();
    assert!(o.status.success(), "tshark: {}", text(&o));
    let all: Vec<String> = String::from_utf8_lossy(&o.stdout).lines().map(String::from).collect();
    let on = |prefix: &str| -> Vec<String> {
        all.iter().filter_map(|l| l.strip_prefix(prefix)).map(String::from).collect()
    };
    let (got, lines) = (on("0\tn2:eth0 (after)\t"), on("1\tn2:eth0 (drops)\t"));
    assert_eq!(got.len() + lines.len(), all.len(), "{all:?}");
    assert!(
        got.len() > 100 && got.iter().all(|l| l.starts_with('\t')),
        "no comments there: {got:?}"
    );
    let of = |reason: &str| {
        lines.iter().filter(|l| l.starts_with(&format!("vemu drop: {reason} — "))).count() as u64
    };
    let (loss, queue) = (
        counted(&after, "drop_loss") - counted(&before, "drop_loss"),
        counted(&after, "drop_queue") - counted(&before, "drop_queue"),
    );
    eprintln!(
        "drops captured: {} lines, loss {} (counted {loss}), queue {} (counted {queue})",
        lines.len(),
        of("loss"),
        of("queue")
    );
    assert!(loss >= 5 && queue >= 30, "loss {loss}, queue {queue}");
    assert_eq!(of("loss"), loss, "{lines:?}");
    assert_eq!(of("queue"), queue);
    assert_eq!(lines.len() as u64, loss + queue, "{lines:?}");
    // Requests dropped on their way to n2 arrive (direction 1: inbound); replies n2
    // sent and the link lost leave it (0: outbound).
    assert!(lines.iter().any(|l| l.ends_with("\t1\t8")), "{lines:?}");
    // (ARP has no ICMP type.)
    let ok = |l: &&String| ["\t1\t8", "\t0\t0", "\t1\t", "\t0\t"].iter().any(|e| l.ends_with(e));
    assert!(lines.iter().all(|l| ok(&l)), "{lines:?}");
    assert!(lines[0].contains("; lab time "), "{}", lines[0]);
    // The report sums the counters by reason.
    let o = lab.vemu(&["report", "drops", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let now = lab.status();
    assert_eq!(r["totals"]["loss"].as_u64(), Some(counted(&now, "drop_loss")), "{r}");
    assert_eq!(r["totals"]["queue"].as_u64(), Some(counted(&now, "drop_queue")), "{r}");
    let o = lab.vemu(&["report", "drops"]);
    assert!(text(&o).contains("lab t-drops: 2 directions dropped frames"), "{}", text(&o));
}

#[test]
fn captures_at_both_ends_of_a_link_line_up_on_the_lab_clock() {
    let _g = serial();
    let lab = Lab::up("t-capture", &chain("t-capture", &[20.0], ""));
    lab.exec("n1", &["ping", "-c", "1", "n2"]);
    let dir = std::env::temp_dir().join("vemu-tests");
    let files = [dir.join("cap-n1.pcapng"), dir.join("cap-n2.pcapng")];
    let caps: Vec<std::process::Child> = [("n1:eth0", &files[0]), ("n2", &files[1])]
        .iter()
        .map(|(iface, f)| {
            std::process::Command::new(env!("CARGO_BIN_EXE_vemu"))
                .args([
                    "capture",
                    "--lab",
                    "t-capture",
                    iface,
                    "-w",
                    f.to_str().unwrap(),
                    "-c",
                    "10",
                    "icmp",
                ])
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let o = lab.exec("n1", &["ping", "-c", "5", "-i", "0.1", "n2"]);
    assert!(o.status.success(), "{}", text(&o));
    for mut c in caps {
        assert!(c.wait().unwrap().success());
    }
    let a = tshark_icmp(&files[0]);
    let b = tshark_icmp(&files[1]);
    assert_eq!(a.len(), 10, "{a:?}");
    assert_eq!(b.len(), 10, "{b:?}");
    let mut worst: f64 = 0.0;
    for (t, kind, seq) in &a {
        let (u, ..) = b
            .iter()
            .find(|(_, k, s)| k == kind && s == seq)
            .expect("the same frame at the other end");
        // Requests (type 8) go n1 -> n2, replies (0) n2 -> n1: 20 ms on the link either way.
        let d = if *kind == 8 { u - t } else { t - u };
        worst = worst.max((d - 0.020).abs());
    }
    // An arrival is stamped when the engine writes the frame: if the engine was late
    // (the machine took its core away), the capture says so truthfully. The bound is
    // 100 µs beyond the lateness the engine itself measured on this link.
    let st = lab.status();
    let late_ns = ["forward", "reverse"]
        .iter()
        .map(|d| st["links"][0][d]["stats"]["late_max_ns"].as_u64().unwrap())
        .max()
        .unwrap();
    eprintln!("captures at both ends of a 20 ms link: largest deviation from 20 ms {:.1} µs (engine lateness at most {:.1} µs)", worst * 1e6, late_ns as f64 / 1e3);
    assert!(worst <= 0.0001 + late_ns as f64 / 1e9, "{worst}");
    // Filters are checked; unknown interfaces are named.
    let o = vemu(&["capture", "--lab", "t-capture", "n1", "-c", "1", "no such ((filter"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("bad filter"), "{}", text(&o));
    // An option after the filter would be read as part of it: said so.
    let o = lab.vemu(&["capture", "n1", "-c", "1", "icmp", "-w", "/tmp/never.pcapng"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("'-w' comes after the filter"), "{}", text(&o));
    let o = lab.vemu(&["capture", "n1:eth7", "-c", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("has no interface 'eth7'"), "{}", text(&o));
}

#[test]
fn stats_give_rates_queues_and_delay_histograms() {
    let _g = serial();
    let lab = Lab::up("t-stats", &chain("t-stats", &[7.0], "    bandwidth: 10Mbit\n"));
    lab.exec("n1", &["ping", "-c", "5", "-i", "0.05", "n2"]);
    // Frames held 7 ms (+ serialization) fall in the (5 ms, 10 ms] bucket.
    let s = lab.status();
    let hist = s["links"][0]["forward"]["stats"]["delay_hist"].as_array().unwrap().clone();
    let total: u64 = hist.iter().map(|v| v.as_u64().unwrap()).sum();
    assert!(total >= 5);
    assert_eq!(hist[12].as_u64().unwrap(), total, "{hist:?}");
    let csv = std::env::temp_dir().join("vemu-tests").join("stats.csv");
    let _ = std::fs::remove_file(&csv);
    let o =
        lab.vemu(&["stats", "--interval", "100ms", "--count", "3", "--csv", csv.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("Mbit/s"), "{}", text(&o));
    let rows: Vec<String> =
        std::fs::read_to_string(&csv).unwrap().lines().map(String::from).collect();
    assert!(rows[0].starts_with("t_s,kind,name,direction"));
    assert_eq!(rows.iter().filter(|r| r.contains(",link,")).count(), 3 * 2, "{rows:?}");
    // (Node rows come once a node's CPU rate is known: readings are a second apart.)
    assert!(rows[1..].iter().all(|r| r.contains(",link,") || r.contains(",node,")), "{rows:?}");
    assert!(rows[1].contains(",link,n1:n2,forward,"), "{}", rows[1]);
    let o = lab.vemu(&["stats", "--json", "--count", "1"]);
    let v: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&o.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(v["type"], "stats");
    assert!(v["links"][0]["forward"]["tx_frames"].as_u64().unwrap() >= 5);
    // Each node's CPU time and memory in use.
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{v}");
    assert!(
        nodes[0]["cpu_ns"].as_u64().unwrap() > 0 && nodes[0]["memory_bytes"].as_u64().unwrap() > 0,
        "{v}"
    );
}

/// Audit: a node's secret file was in a world-readable plan.json; the API token file was
/// written before it was made private; impairments that overflow time arithmetic were
/// accepted at run time.
#[test]
fn state_files_are_private_and_wild_values_refused() {
    use std::os::unix::fs::PermissionsExt;
    let _g = serial();
    let yaml = "name: t-private\nnodes:\n  a:\n    files:\n      /etc/frr/secret.conf: {content: \"password hunter2\\n\", mode: '0600'}\n  b: {}\nlinks:\n  - endpoints: [a, b]\n";
    let path = write_scenario("t-private", yaml);
    let o = vemu(&["up", path.to_str().unwrap(), "--api", "127.0.0.1:0"]);
    assert!(o.status.success(), "{}", text(&o));
    let lab = Lab { name: "t-private".into() };
    for f in ["plan.json", "api-token"] {
        let p = format!("/run/vemu/t-private/{f}");
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{p} has mode {mode:o}");
    }
    assert!(std::fs::read_to_string("/run/vemu/t-private/plan.json").unwrap().contains("hunter2"));
    for (flag, value, message) in [
        ("--delay", "99999999999999999999s", "delay must be at most 1 hour"),
        ("--bandwidth", "2Tbit", "bandwidth must be at most 1Tbit"),
    ] {
        let o = lab.vemu(&["link", "set", "a:b", flag, value]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains(message), "{}", text(&o));
    }
    let s = lab.status();
    assert_eq!(
        s["links"][0]["forward"]["impairments"]["delay_ns"].as_u64(),
        Some(0),
        "unchanged: {}",
        s["links"][0]
    );
}

/// Audit: two `vemu up` of one lab at once sometimes both "succeeded" while one's
/// rollback removed the other's lab; `vemu clean` removed a lab still coming up.
#[test]
fn one_name_one_lab_and_clean_spares_a_lab_coming_up() {
    let _g = serial();
    let path = write_scenario("t-dup", &chain("t-dup", &[1.0; 40], ""));
    for _ in 0..4 {
        let spawn = || {
            std::process::Command::new(env!("CARGO_BIN_EXE_vemu"))
                .args(["up", path.to_str().unwrap()])
                .output()
        };
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(spawn);
            let b = s.spawn(spawn);
            (a.join().unwrap().unwrap(), b.join().unwrap().unwrap())
        });
        let mut codes = [a.status.code(), b.status.code()];
        codes.sort();
        assert_eq!(codes, [Some(0), Some(2)], "{}\n{}", text(&a), text(&b));
        let loser = if a.status.success() { &b } else { &a };
        assert!(text(loser).contains("already running or being started"), "{}", text(loser));
        let lab = Lab { name: "t-dup".into() };
        assert!(
            lab.exec("n1", &["ping", "-c", "1", "-W", "2", "n41"]).status.success(),
            "the winner's lab works"
        );
        drop(lab);
    }
    // `clean` while the lab is being built leaves it alone.
    let up = std::process::Command::new(env!("CARGO_BIN_EXE_vemu"))
        .args(["up", path.to_str().unwrap()])
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !std::path::Path::new("/run/vemu/t-dup").exists() && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let o = vemu(&["clean"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = up.wait_with_output().unwrap();
    assert!(out.status.success(), "up failed after clean: {}", text(&out));
    let lab = Lab { name: "t-dup".into() };
    assert!(lab.exec("n1", &["ping", "-c", "1", "-W", "2", "n41"]).status.success());
    drop(lab);
    assert!(!std::path::Path::new("/run/vemu/t-dup.lock").exists(), "down gave the name up");
}

/// A full disk stops a capture with a message, and the lab runs on (issue 13).
#[test]
fn a_full_disk_stops_the_capture_not_the_lab() {
    let _g = serial();
    let lab = Lab::up("t-full", &chain("t-full", &[1.0], ""));
    let dir = std::env::temp_dir().join("vemu-tests").join("small-disk");
    std::fs::create_dir_all(&dir).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "vemu-test", dir.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(mounted.success());
    let file = dir.join("cap.pcapng");
    let cap = std::process::Command::new(env!("CARGO_BIN_EXE_vemu"))
        .args(["capture", "--lab", "t-full", "n1:eth0", "-w", file.to_str().unwrap()])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    // 2000 pings of 1000 bytes: far more than 64 KiB of capture.
    lab.exec("n1", &["ping", "-q", "-c", "2000", "-i", "0.002", "-s", "1000", "n2"]);
    let out = cap.wait_with_output().unwrap();
    let _ = std::process::Command::new("umount").arg(&dir).status();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("stopped (the lab runs on)") && err.contains("No space left on device"),
        "{err}"
    );
    // The lab runs on.
    let o = lab.exec("n1", &["ping", "-c", "3", "-i", "0.2", "n2"]);
    assert!(o.status.success(), "{}", text(&o));
}

/// Audit: a node writing 300 MB into its /var/log grew the machine's memory without
/// bound. The lab's tmpfs has a size (`storage:`); the node's write fails, the lab runs on.
#[test]
fn a_node_cannot_fill_the_machines_memory() {
    let _g = serial();
    let lab = Lab::up("t-storage", &format!("{}storage: 32MiB\n", chain("t-storage", &[1.0], "")));
    let (code, _) = lab.sh("n1", "dd if=/dev/zero of=/var/log/big bs=1M count=300 2>/tmp/dd.err; echo $? > /var/log/dd.code; cat /tmp/dd.err >&2");
    let (_, size) = lab.sh("n1", "stat -c %s /var/log/big");
    let bytes: u64 = size.trim().parse().unwrap_or(u64::MAX);
    assert!(bytes < 32 << 20, "the node wrote {bytes} bytes (dd exit {code})");
    let o = lab.exec("n1", &["ping", "-c", "2", "-i", "0.2", "n2"]);
    assert!(o.status.success(), "{}", text(&o));
    let df = std::process::Command::new("df")
        .args(["--output=size", "-B1", "/run/vemu/t-storage"])
        .output()
        .unwrap();
    let total: u64 =
        String::from_utf8_lossy(&df.stdout).lines().nth(1).unwrap().trim().parse().unwrap();
    assert_eq!(total, 32 << 20);
}

/// Audit: processes in nodes were root in the machine's PID namespace, so a node of lab A
/// drove lab B through `/proc/<B's controller>/root/run/vemu/B/api.sock`. By default a
/// node has a PID namespace and `/proc` of its own; `isolation: none` is the old way.
#[test]
fn nodes_see_their_own_processes_only() {
    let _g = serial();
    let a = Lab::up(
        "t-iso-a",
        "name: t-iso-a\nnodes:\n  n1: {run: ['sleep 4242']}\n  n2: {isolation: none}\nlinks:\n  - endpoints: [n1, n2]\n",
    );
    let b = Lab::up("t-iso-b", &chain("t-iso-b", &[1.0], ""));
    let daemon_b = b.status()["pid"].as_u64().unwrap();
    let sock = format!("/proc/{daemon_b}/root/run/vemu/t-iso-b/api.sock");
    let attack = format!(
        "curl -sf -m 5 --unix-socket {sock} -X POST -H 'content-type: application/json' -d '{{\"cmd\":[\"touch\",\"/tmp/t-iso-pwned\"]}}' http://lab/v1/nodes/n1/exec"
    );
    let _ = std::fs::remove_file("/tmp/t-iso-pwned");
    let (code, out) = a.sh("n1", &attack);
    assert_ne!(code, 0, "a node reached another lab's API: {out}");
    assert!(
        !std::path::Path::new("/tmp/t-iso-pwned").exists(),
        "a node ran a command in another lab"
    );
    // It sees its own processes (its init, its command, the shell running this) and
    // nothing of the machine's: no controller, no other node's command.
    let (_, ps) = a.sh("n1", "ps -eo pid=,args=");
    let lines: Vec<&str> = ps.lines().collect();
    assert!(
        lines.iter().any(|l| l.trim_start().starts_with("1 ") && l.contains("vemu-init n1")),
        "{ps}"
    );
    assert!(lines.iter().any(|l| l.contains("sleep 4242")), "{ps}");
    assert!(lines.len() <= 6, "the node sees more than its own processes:\n{ps}");
    assert!(!ps.contains("vemu daemon") && !ps.contains("vemu up"), "{ps}");
    let (_, pid1) = a.sh("n2", "ps -o args= -p 1");
    assert!(!pid1.contains("vemu-init"), "isolation: none shares the machine's PIDs: {pid1}");
    let (code, _) = a.sh("n2", &format!("test -S {sock}"));
    assert_eq!(
        code, 0,
        "with isolation: none the node sees the machine's processes (the documented old way)"
    );
    // A stopped node keeps its PID namespace, and its commands start again in it.
    let o = a.vemu(&["node", "stop", "n1"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(pids_of("sleep 4242").is_empty());
    let o = a.vemu(&["node", "start", "n1"]);
    assert!(o.status.success(), "{}", text(&o));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (_, ps) = a.sh("n1", "ps -eo pid=,args=");
    assert!(ps.contains("sleep 4242") && ps.contains("vemu-init n1"), "{ps}");
    // `vemu exec` and the API's exec both enter the node's PID namespace.
    let (_, inner) = a.sh("n1", "echo $$");
    let pid: u32 = inner.trim().parse().unwrap();
    assert!(pid < 100, "a node's shell has a small PID of the node's own, got {pid}");
    let o = std::process::Command::new("curl")
        .args([
            "-sf",
            "-m",
            "10",
            "--unix-socket",
            "/run/vemu/t-iso-a/api.sock",
            "-X",
            "POST",
            "-H",
            "content-type: application/json",
        ])
        .args([
            "-d",
            r#"{"cmd":["sh","-c","ls /proc | grep -c '^[0-9]'"]}"#,
            "http://lab/v1/nodes/n1/exec",
        ])
        .output()
        .unwrap();
    let reply: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{}", text(&o)));
    let seen: u32 = reply["stdout"].as_str().unwrap().trim().parse().unwrap();
    assert!(seen <= 6, "the API's exec sees {seen} processes: {reply}");
    // An init per node that ran something (lab A's n1); lab B's nodes ran nothing and
    // have none (they get one with their first process), nor has A's n2 (isolation: none).
    assert_eq!(pids_of("vemu-init n1").len(), 1);
    assert!(pids_of("vemu-init n2").is_empty());
    drop(a);
    assert!(pids_of("vemu-init n1").is_empty(), "down ends the node's init");
    // Processes starting at once in a fresh node share one init.
    let racers: Vec<_> = (0..6)
        .map(|_| {
            std::process::Command::new(env!("CARGO_BIN_EXE_vemu"))
                .args(["exec", "--lab", "t-iso-b", "n2", "--", "true"])
                .spawn()
                .unwrap()
        })
        .collect();
    for mut r in racers {
        assert!(r.wait().unwrap().success());
    }
    assert_eq!(pids_of("vemu-init n2").len(), 1, "one init for the node");
    let (_, ps) = b.sh("n2", "ps -e -o args=");
    assert!(
        ps.contains("vemu-init n2"),
        "the first process in a node makes its PID namespace: {ps}"
    );
}

/// A lab needing more open files than the hard limit fails at once, naming the limit,
/// and builds nothing (a 10,000-node tree used to fail after 15 minutes and roll back).
/// The same lab with unimpaired links needs no TAP device for them (the kernel fast path
/// carries them), so it comes up under a limit the impaired one exceeds.
#[test]
fn a_lab_beyond_the_open_file_limit_fails_at_once() {
    use std::os::unix::process::CommandExt;
    let _g = serial();
    let up_with_limit = |name: &str, delay_ms: f64, limit: u64| {
        let path = write_scenario(name, &chain(name, &[delay_ms; 300], ""));
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_vemu"));
        cmd.args(["up", path.to_str().unwrap()]);
        // SAFETY: setrlimit with a valid struct, lowering the limit of the child only.
        unsafe {
            cmd.pre_exec(move || {
                let l = libc::rlimit { rlim_cur: limit, rlim_max: limit };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &l) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd.output().unwrap()
    };
    let o = up_with_limit("t-nofile", 1.0, 1100);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("needs about 1601 open files")
            && text(&o).contains("the hard limit on open files here is 1100 (RLIMIT_NOFILE)"),
        "{}",
        text(&o)
    );
    assert!(lab_netns("t-nofile").is_empty());
    assert!(!std::path::Path::new("/run/vemu/t-nofile").exists());
    if std::env::var("VEMU_FAST_PATH").map_or(true, |v| v != "off") {
        let o = up_with_limit("t-nofile0", 0.0, 1100);
        assert!(o.status.success(), "{}", text(&o));
        let lab = Lab { name: "t-nofile0".into() };
        let (sent, recv, _) = lab.ping("n1", "n60", 2, 0.2);
        assert_eq!((sent, recv), (2, 2), "59 unimpaired hops carry pings (within the TTL)");
    }
}
