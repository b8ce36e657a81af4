//! Controllers that take a lab over, or run on one of its machines.

use super::*;

/// The controller dies mid-lab (SIGKILL) and a new one takes the lab over (`vemu
/// attach`): the nodes and links never stopped, what was set at run time holds, and the
/// lab is served, changed and taken down as before.
#[test]
fn a_new_controller_takes_over_a_lab_whose_controller_died() {
    let _g = serial();
    let m = Machines::start("va", 81, &["a", "b"]);
    let yaml = "name: xa\naddressing: {ipv6: none}\nnodes:\n  n1: {machine: a}\n  n2: {machine: a}\n  n3: {machine: b}\nlinks:\n  - endpoints: [n1, n2]\n  - endpoints: [n2, n3]\n    delay: 1ms\n";
    m.labs.lock().unwrap().push("xa".into());
    let path = write_scenario("xa", yaml);
    // A lease that a loaded machine cannot outlast between the kill and the attach.
    let up =
        m.vemu_leased(&["up", path.to_str().unwrap(), "--machines", "a=10.81.0.1,b=10.81.0.2"], 30);
    assert!(up.status.success(), "{}", text(&up));
    // Servers outlive clients that hang up on them: the agents and the controller ignore
    // SIGPIPE (an agent once died of it when the controller gave up on a heartbeat).
    let ignores_sigpipe = |pid: &str| {
        let st = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let mask = st.lines().find_map(|l| l.strip_prefix("SigIgn:")).unwrap().trim().to_string();
        u64::from_str_radix(&mask, 16).unwrap() & (1 << (libc::SIGPIPE - 1)) != 0
    };
    for i in 0..2 {
        assert!(ignores_sigpipe(&m.agent_pid(i).to_string()), "agent {i} dies of SIGPIPE");
    }
    assert!(
        ignores_sigpipe(std::fs::read_to_string("/run/vemu/xa/daemon.pid").unwrap().trim()),
        "the controller dies of SIGPIPE"
    );
    let o = m.vemu(&["link", "set", "--lab", "xa", "n2:n3", "--delay", "20ms"]);
    assert!(o.status.success(), "{}", text(&o));
    let rtt = |from: &str, to: &str| {
        min_rtt_ms(&m.vemu(&[
            "exec", "--lab", "xa", from, "--", "ping", "-c", "5", "-i", "0.2", "-W", "2", to,
        ]))
    };
    let before = rtt("n1", "n3");
    assert!((40.0..42.0).contains(&before), "RTT {before} ms for 2 x 20 ms set");
    let status = || -> serde_json::Value {
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xa", "--json"]).stdout)
            .unwrap_or_default()
    };
    let delay_of = |st: &serde_json::Value, dir: &str| {
        st["links"].as_array().unwrap().iter().find(|l| l["name"] == "n2:n3").unwrap()[dir]
            ["impairments"]["delay_ns"]
            .clone()
    };

    let pid = std::fs::read_to_string("/run/vemu/xa/daemon.pid").unwrap();
    ok(&format!("kill -9 {}", pid.trim()));
    let o = m.vemu(&["status", "--lab", "xa"]);
    assert!(!o.status.success(), "a dead controller answered: {}", text(&o));
    let o = m.vemu(&["ls"]);
    assert!(text(&o).contains("xa\tleft behind"), "{}", text(&o));

    // The only lab without a controller is the one taken over.
    let o = m.vemu(&["attach"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("lab 'xa' is served again"), "{}", text(&o));
    let st = status();
    assert_eq!(
        (st["machines"][0]["state"].clone(), st["machines"][1]["state"].clone()),
        ("up".into(), "up".into()),
        "{st}"
    );
    assert_eq!(
        (delay_of(&st, "forward"), delay_of(&st, "reverse")),
        (20_000_000.into(), 20_000_000.into()),
        "what link set set before the crash"
    );
    let after = rtt("n1", "n3");
    assert!((40.0..42.0).contains(&after), "RTT {after} ms after the attach");
    let o = m.vemu(&["link", "set", "--lab", "xa", "n2:n3", "--delay", "5ms"]);
    assert!(o.status.success(), "{}", text(&o));
    let changed = rtt("n1", "n3");
    assert!((10.0..12.0).contains(&changed), "RTT {changed} ms for 2 x 5 ms set");
    // A second attach finds the lab served.
    let o = m.vemu(&["attach", "--lab", "xa"]);
    assert!(!o.status.success() && text(&o).contains("already running"), "{}", text(&o));

    m.down_leaving_nothing("xa");
    assert!(!std::path::Path::new("/run/vemu/xa").exists());
    let o = m.vemu(&["attach", "--lab", "xa"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("no plan on this machine"), "{}", text(&o));

    // Too late: the agents' leases (5 s) ran out and they took the lab down. The attach
    // says so; `vemu clean` removes what is left here.
    m.labs.lock().unwrap().push("xb".into());
    let up = m.vemu(&[
        "up",
        write_scenario("xb", &yaml.replace("name: xa", "name: xb")).to_str().unwrap(),
        "--machines",
        "a=10.81.0.1,b=10.81.0.2",
    ]);
    assert!(up.status.success(), "{}", text(&up));
    let pid = std::fs::read_to_string("/run/vemu/xb/daemon.pid").unwrap();
    ok(&format!("kill -9 {}", pid.trim()));
    eventually(30, "the agents end lab xb", || {
        m.leftovers(0).is_empty() && m.leftovers(1).is_empty()
    });
    let o = m.vemu(&["attach", "--lab", "xb"]);
    assert!(
        !o.status.success() && text(&o).contains("no machine holds lab 'xb' any more"),
        "{}",
        text(&o)
    );
    let o = m.vemu(&["clean"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!std::path::Path::new("/run/vemu/xb").exists());
}

/// The controller runs on a machine that also hosts nodes of its lab (its agent beside
/// it, on the same /run/vemu), as with two computers and no third: up, exec on both
/// machines, down, nothing left on either.
#[test]
fn a_controller_can_run_on_a_machine_of_its_own_lab() {
    let _g = serial();
    let m = Machines::start("vo", 86, &["a", "b"]);
    let yaml = "name: xo\naddressing: {ipv6: none}\nnodes:\n  n1: {machine: a}\n  n2: {machine: a}\n  n3: {machine: b}\nlinks:\n  - endpoints: [n1, n2]\n  - endpoints: [n2, n3]\n    delay: 1ms\n";
    let path = write_scenario("xo", yaml);
    // `vemu ARGS` on machine `i`, beside its agent (its network and /run).
    let on = |i: usize, args: &[&str]| -> Output {
        Command::new("nsenter")
            .args(["-t", &m.agent_pid(i).to_string(), "-n", "-m", VEMU])
            .args(args)
            .env("VEMU_AGENT_TOKEN_FILE", &m.token_file)
            .env("VEMU_AGENT_LEASE", "5")
            .output()
            .unwrap()
    };
    let up = on(0, &["up", path.to_str().unwrap(), "--machines", "a=10.86.0.1,b=10.86.0.2"]);
    assert!(up.status.success(), "{}", text(&up));
    // n1 and n2 are in machine a's share, n3 through the controller and b's agent.
    for (from, to) in [("n1", "n3"), ("n3", "n1"), ("n1", "n2")] {
        let o = on(
            0,
            &["exec", "--lab", "xo", from, "--", "ping", "-c", "2", "-i", "0.2", "-W", "2", to],
        );
        assert!(o.status.success(), "ping {from} -> {to}: {}", text(&o));
    }
    let o = on(0, &["exec", "n1", "--", "sh", "-c", "echo $VEMU_LAB"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "xo", "{}", text(&o));
    let ls = text(&on(0, &["ls"]));
    assert!(
        ls.contains("xo\trunning")
            && ls.contains("machine a's share, held by this machine's agent"),
        "{ls}"
    );
    assert!(on(0, &["status", "--lab", "xo"]).status.success());
    // On b, whose agent alone holds a share: `ls` says so, and `clean` leaves it (it
    // used to take it for a crash's leftover and the lab down everywhere).
    let ls = text(&on(1, &["ls"]));
    assert!(ls.contains("machine b's share, held by this machine's agent"), "{ls}");
    let o = on(1, &["clean"]);
    assert!(o.status.success() && text(&o).contains("holds a share of lab 'xo'"), "{}", text(&o));
    // n3 in b's share, entered on b; the lab still runs.
    let o = m.exec(1, "xo", "n3", &["sh", "-c", "hostname; echo $VEMU_LAB"]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).split_whitespace().collect::<Vec<_>>(),
        ["n3", "xo"],
        "{}",
        text(&o)
    );
    let o = on(0, &["exec", "n3", "--", "ping", "-c", "2", "-i", "0.2", "-W", "2", "n1"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = on(0, &["down", "--lab", "xo"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!((m.leftovers(0), m.leftovers(1)), (String::new(), String::new()));
}

/// The controller's machine is gone with its controller: a controller on another
/// machine takes the lab over from what its agents hold (`vemu attach --from`), the
/// plan and the state the dead controller handed on with its heartbeats — what was set
/// at run time holds, and the lab is served, changed and taken down as before.
#[test]
fn a_controller_on_another_machine_takes_over_a_lab_from_its_agents() {
    let _g = serial();
    let m = Machines::start("vf", 88, &["a", "b"]);
    let yaml = "name: xf\naddressing: {ipv6: none}\nnodes:\n  n1: {machine: a}\n  n2: {machine: a}\n  n3: {machine: b}\nlinks:\n  - endpoints: [n1, n2]\n  - endpoints: [n2, n3]\n    delay: 1ms\n";
    m.labs.lock().unwrap().push("xf".into());
    let up = m.vemu_leased(
        &[
            "up",
            write_scenario("xf", yaml).to_str().unwrap(),
            "--machines",
            "a=10.88.0.1,b=10.88.0.2",
        ],
        30,
    );
    assert!(up.status.success(), "{}", text(&up));
    // The agents get the controller's state as it changes (within 0.1 s of the last
    // time they got it), not with the next heartbeat (up to 1 s later): five changes in
    // a row, each held by both agents well within a heartbeat.
    let held = |i: usize, delay_ns: u64| {
        let o = Command::new("nsenter")
            .args([
                "-t",
                &m.agent_pid(i).to_string(),
                "-m",
                "cat",
                &format!("/run/vemu/xf@{}/controller.json", ["a", "b"][i]),
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).contains(&format!("\"delay_ns\":{delay_ns}"))
    };
    let mut took = Vec::new();
    for ms in [21u64, 22, 23, 24, 20] {
        let o = m.vemu(&["link", "set", "--lab", "xf", "n2:n3", "--delay", &format!("{ms}ms")]);
        assert!(o.status.success(), "{}", text(&o));
        let t0 = Instant::now();
        while !(held(0, ms * 1_000_000) && held(1, ms * 1_000_000)) {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the agents never got the state with {ms} ms"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        took.push(t0.elapsed().as_secs_f64());
    }
    eprintln!("the agents held each change after {took:.3?} s");
    assert!(
        took.iter().all(|&t| t < 0.7),
        "the state reached the agents after {took:.3?} s (heartbeats come every 1 s)"
    );
    let pid = std::fs::read_to_string("/run/vemu/xf/daemon.pid").unwrap();
    ok(&format!("kill -9 {}", pid.trim()));

    // Another machine (the controller's network namespace, with a /run and logs of its
    // own): `attach --from` one of the agents.
    let script = format!(
        "mount -t tmpfs tmpfs /run/vemu && mkdir -p /var/log/vemu && mount -t tmpfs tmpfs /var/log/vemu && {VEMU} attach --from 10.88.0.1 && cat /run/vemu/xf/daemon.pid"
    );
    let o = Command::new("ip")
        .args([
            "netns",
            "exec",
            "vf-ctl",
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            &script,
        ])
        .env("VEMU_AGENT_TOKEN_FILE", &m.token_file)
        .output()
        .unwrap();
    assert!(!o.status.success() && text(&o).contains("--from needs --lab"), "{}", text(&o));
    // A lab the agent does not hold: a clear error, and nothing made here.
    let o = Command::new("ip")
        .args(["netns", "exec", "vf-ctl", "unshare", "-m", "--propagation", "private", "sh", "-c", &format!("mount -t tmpfs tmpfs /run/vemu && {VEMU} attach --lab nosuch --from 10.88.0.1; echo \"left: $(ls -A /run/vemu)\"")])
        .env("VEMU_AGENT_TOKEN_FILE", &m.token_file)
        .output()
        .unwrap();
    assert!(
        text(&o).contains("holds no share of lab 'nosuch'") && text(&o).contains("left: \n"),
        "{}",
        text(&o)
    );
    let o = Command::new("ip")
        .args([
            "netns",
            "exec",
            "vf-ctl",
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            &script.replace("--from", "--lab xf --from"),
        ])
        .env("VEMU_AGENT_TOKEN_FILE", &m.token_file)
        .env("VEMU_AGENT_LEASE", "5")
        .output()
        .unwrap();
    assert!(o.status.success() && text(&o).contains("lab 'xf' is served again"), "{}", text(&o));
    let daemon =
        String::from_utf8_lossy(&o.stdout).lines().last().unwrap_or_default().trim().to_string();
    let there = |args: &[&str]| {
        Command::new("nsenter").args(["-t", &daemon, "-m", "-n", VEMU]).args(args).output().unwrap()
    };
    let st: serde_json::Value =
        serde_json::from_slice(&there(&["status", "--lab", "xf", "--json"]).stdout)
            .unwrap_or_default();
    assert_eq!(
        (st["machines"][0]["state"].clone(), st["machines"][1]["state"].clone()),
        ("up".into(), "up".into()),
        "{st}"
    );
    let delay = st["links"].as_array().unwrap().iter().find(|l| l["name"] == "n2:n3").unwrap()
        ["forward"]["impairments"]["delay_ns"]
        .clone();
    assert_eq!(delay, serde_json::Value::from(20_000_000), "what link set set before the crash");
    let rtt = || {
        min_rtt_ms(&there(&[
            "exec", "--lab", "xf", "n1", "--", "ping", "-c", "5", "-i", "0.2", "-W", "2", "n3",
        ]))
    };
    let after = rtt();
    assert!((40.0..42.0).contains(&after), "RTT {after} ms after the attach");
    let o = there(&["link", "set", "--lab", "xf", "n2:n3", "--delay", "5ms"]);
    assert!(o.status.success(), "{}", text(&o));
    let changed = rtt();
    assert!((10.0..12.0).contains(&changed), "RTT {changed} ms for 2 x 5 ms set");
    let o = there(&["down", "--lab", "xf"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!((m.leftovers(0), m.leftovers(1)), (String::new(), String::new()));
    // What the dead controller left on its own machine.
    let o = m.vemu(&["clean"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!std::path::Path::new("/run/vemu/xf").exists());
}
