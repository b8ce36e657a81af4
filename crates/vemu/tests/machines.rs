//! Labs across machines, with machines made of namespaces: each "machine" is a network
//! namespace running a real `vemu agent` in a mount namespace of its own (its own
//! /run/vemu, /run/netns and /var/log/vemu, as on a separate computer), joined to the others by veth
//! pairs on a Linux bridge that plays the underlay; the controller runs in a namespace
//! of its own on the same bridge. Run as root.

mod common;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;

const VEMU: &str = env!("CARGO_BIN_EXE_vemu");

/// Machines `names` (addresses 10.<net>.0.1, .2, ...) and a controller namespace
/// (10.<net>.0.254) on one underlay bridge; torn down when dropped.
struct Machines {
    tag: String,
    net: u8,
    v6: bool,
    names: Vec<String>,
    agents: Vec<Child>,
    token_file: std::path::PathBuf,
    /// Labs started, taken down first when dropped.
    labs: std::sync::Mutex<Vec<String>>,
}

/// A token file as the agents want it: readable by its owner alone.
fn write_token(path: &std::path::Path, token: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, token).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

fn sh(cmd: &str) -> Output {
    Command::new("sh").args(["-c", cmd]).output().expect("sh")
}

fn ok(cmd: &str) {
    let o = sh(cmd);
    assert!(o.status.success(), "{cmd}: {}", text(&o));
}

impl Machines {
    fn start(tag: &str, net: u8, names: &[&str]) -> Machines {
        Machines::start_mtu(tag, net, names, 1500)
    }

    /// ... on an underlay whose interfaces have MTU `mtu`.
    fn start_mtu(tag: &str, net: u8, names: &[&str], mtu: u32) -> Machines {
        Machines::start_with(tag, net, names, mtu, false, true)
    }

    /// ... on an IPv6 underlay (fdNET::1, fdNET::2, …; the controller fdNET::fe).
    fn start_v6(tag: &str, net: u8, names: &[&str]) -> Machines {
        Machines::start_with(tag, net, names, 1500, true, true)
    }

    fn start_with(
        tag: &str,
        net: u8,
        names: &[&str],
        mtu: u32,
        v6: bool,
        agents: bool,
    ) -> Machines {
        let addr = |i: usize, ctl: bool| match (v6, ctl) {
            (false, false) => format!("10.{net}.0.{}", i + 1),
            (false, true) => format!("10.{net}.0.254"),
            (true, false) => format!("fd{net}::{}", i + 1),
            (true, true) => format!("fd{net}::fe"),
        };
        let prefix = if v6 { "/64 nodad" } else { "/24" };
        let m = Machines {
            tag: tag.into(),
            net,
            v6,
            names: names.iter().map(|s| s.to_string()).collect(),
            agents: Vec::new(),
            token_file: std::env::temp_dir().join(format!("vemu-{tag}-token")),
            labs: Default::default(),
        };
        m.remove_namespaces();
        write_token(&m.token_file, "test-token-0123456789abcdef\n");
        let ul = format!("{tag}-ul");
        ok(&format!("ip netns add {ul} && ip -n {ul} link add br0 type bridge && ip -n {ul} link set br0 up"));
        let mut m = m;
        let hosts: Vec<String> = m.names.iter().cloned().chain(["ctl".to_string()]).collect();
        for (i, h) in hosts.iter().enumerate() {
            let ns = format!("{tag}-{h}");
            let ip = addr(i, h == "ctl");
            ok(&format!(
                "ip netns add {ns} && ip link add {tag}u{i} netns {ul} mtu {mtu} type veth peer name eth0 netns {ns} mtu {mtu} && ip -n {ul} link set {tag}u{i} master br0 up && ip -n {ns} link set lo up && ip -n {ns} link set eth0 up && ip -n {ns} addr add {ip}{prefix} dev eth0"
            ));
        }
        ok("mkdir -p /run/vemu /run/netns");
        if !agents {
            return m;
        }
        for i in 0..m.names.len() {
            let cmd = format!(
                "exec {VEMU} agent --listen {} --token-file {}",
                addr(i, false),
                m.token_file.display()
            );
            m.spawn_agent(i, &cmd);
        }
        m.wait_for_agents();
        m
    }

    /// The underlay and the machines' namespaces, no agent yet ([`Machines::spawn_agent`]).
    fn start_bare(tag: &str, net: u8, names: &[&str]) -> Machines {
        Machines::start_with(tag, net, names, 1500, false, false)
    }

    /// Starts machine `i`'s agent: shell command `cmd` (ending in `exec vemu agent ...`)
    /// in the machine's network namespace and a mount namespace of its own, with its own
    /// /run/vemu, /run/netns and /var/log/vemu, as on a separate computer.
    fn spawn_agent(&mut self, i: usize, cmd: &str) {
        let script = format!("mount -t tmpfs tmpfs /run/vemu && mount -t tmpfs tmpfs /run/netns && mkdir -p /var/log/vemu && mount -t tmpfs tmpfs /var/log/vemu && {cmd}");
        let child = Command::new("nsenter")
            .args([
                &format!("--net=/run/netns/{}-{}", self.tag, self.names[i]),
                "unshare",
                "-m",
                "--propagation",
                "private",
                "sh",
                "-c",
                &script,
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        self.agents.push(child);
    }

    /// Machine `i`'s address.
    fn address(&self, i: usize) -> String {
        match self.v6 {
            false => format!("10.{}.0.{}", self.net, i + 1),
            true => format!("fd{}::{}", self.net, i + 1),
        }
    }

    /// Until every machine's agent answers on its port.
    fn wait_for_agents(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        for i in 0..self.names.len() {
            let a = self.address(i);
            while sh(&format!(
                "ip netns exec {}-ctl bash -c 'exec 3<>/dev/tcp/{a}/14790' 2>/dev/null",
                self.tag
            ))
            .status
            .code()
                != Some(0)
            {
                assert!(Instant::now() < deadline, "agent at {a} port 14790 does not answer");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    /// `vemu up` of a scenario in the controller's namespace.
    fn up(&self, name: &str, yaml: &str) -> Output {
        self.up_with(name, yaml, &[])
    }

    /// `vemu up SCENARIO ARGS`.
    fn up_with(&self, name: &str, yaml: &str, args: &[&str]) -> Output {
        self.labs.lock().unwrap().push(name.to_string());
        let path = write_scenario(name, yaml);
        self.vemu(&[&["up", path.to_str().unwrap()], args].concat())
    }

    fn agent_pid(&self, i: usize) -> u32 {
        self.agents[i].id()
    }

    /// `vemu ARGS` in the controller's namespace.
    fn vemu(&self, args: &[&str]) -> Output {
        // Agents of a lab whose controller is silent for 5 s take their share down.
        self.vemu_leased(args, 5)
    }

    /// `vemu ARGS`, a lab it brings up held by its agents for `lease_s` without a word
    /// from its controller.
    fn vemu_leased(&self, args: &[&str], lease_s: u32) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &format!("{}-ctl", self.tag), VEMU])
            .args(args)
            .env("VEMU_AGENT_TOKEN_FILE", &self.token_file)
            .env("VEMU_AGENT_LEASE", lease_s.to_string())
            .output()
            .unwrap()
    }

    /// A command in a node of machine `i` (`vemu exec` on that machine).
    fn exec(&self, i: usize, lab: &str, node: &str, cmd: &[&str]) -> Output {
        // The agent's mount namespace is its shell's (the agent is exec'd by it).
        Command::new("nsenter")
            .args([
                "-t",
                &self.agent_pid(i).to_string(),
                "-m",
                VEMU,
                "exec",
                "--lab",
                lab,
                node,
                "--",
            ])
            .args(cmd)
            .output()
            .unwrap()
    }

    /// `vemu status --json` of lab `lab` (null if it does not answer).
    fn status(&self, lab: &str) -> serde_json::Value {
        serde_json::from_slice(&self.vemu(&["status", "--lab", lab, "--json"]).stdout)
            .unwrap_or_default()
    }

    /// `vemu down` of lab `lab`, which must leave nothing on any machine.
    fn down_leaving_nothing(&self, lab: &str) {
        let o = self.vemu(&["down", "--lab", lab]);
        assert!(o.status.success(), "{}", text(&o));
        for i in 0..self.names.len() {
            assert_eq!(self.leftovers(i), "", "machine {i} keeps something after down");
        }
        // Nor a zombie child (issue 39: each agent kept a node's vemu-init).
        for i in 0..self.names.len() {
            let pid = self.agent_pid(i);
            eventually(5, &format!("machine {i}'s agent reaps its children"), || {
                zombies_of(pid).is_empty()
            });
        }
    }

    /// What machine `i` holds under /run/vemu and /run/netns.
    fn leftovers(&self, i: usize) -> String {
        let o = Command::new("nsenter")
            .args([
                "-t",
                &self.agent_pid(i).to_string(),
                "-m",
                "sh",
                "-c",
                "ls -A /run/vemu /run/netns | grep -v :$ | grep -v '^$' || true",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    fn remove_namespaces(&self) {
        let _ = sh(&format!(
            "for n in $(ip netns list | cut -d' ' -f1 | grep '^{}-'); do ip netns del $n; done",
            self.tag
        ));
    }
}

impl Drop for Machines {
    fn drop(&mut self) {
        for lab in self.labs.lock().unwrap().iter() {
            let _ = vemu(&["down", "--lab", lab]);
        }
        for a in &mut self.agents {
            let _ = Command::new("kill").args(["-TERM", &a.id().to_string()]).status();
        }
        for a in &mut self.agents {
            let _ = a.wait();
        }
        self.remove_namespaces();
        let _ = std::fs::remove_file(&self.token_file);
    }
}

/// The zombie children of process `parent`.
fn zombies_of(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let mut rest =
            stat.rsplit_once(')').map(|(_, r)| r.split_whitespace()).into_iter().flatten();
        if rest.next() == Some("Z")
            && rest.next().and_then(|p| p.parse::<u32>().ok()) == Some(parent)
        {
            out.push(pid);
        }
    }
    out
}

/// Whether the kernel carries each direction (forward, reverse) of the link named `name`
/// in a status.
fn kernel_paths(st: &serde_json::Value, name: &str) -> (bool, bool) {
    let l = st["links"]
        .as_array()
        .and_then(|ls| ls.iter().find(|l| l["name"] == name))
        .cloned()
        .unwrap_or_default();
    (l["forward"]["stats"]["kernel_path"] == true, l["reverse"]["stats"]["kernel_path"] == true)
}

fn min_rtt_ms(o: &Output) -> f64 {
    let out = String::from_utf8_lossy(&o.stdout);
    out.lines()
        .find(|l| l.starts_with("rtt"))
        .and_then(|l| l.split('=').nth(1))
        .and_then(|v| v.trim().split('/').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("ping: {}", text(o)))
}

#[test]
fn a_chain_across_two_machines_keeps_its_delays_and_rate() {
    let _g = serial();
    let m = Machines::start("vx", 78, &["a", "b"]);
    let yaml = "name: xm\naddressing: {ipv6: none}\nmachines: {a: 10.78.0.1, b: 10.78.0.2}\nnodes:\n  n1: {machine: a}\n  n2: {}\n  n3: {}\n  n4: {machine: b, run: ['iperf3 -s -D']}\nlinks:\n  - endpoints: [n1, n2]\n    delay: 1ms\n  - endpoints: [n2, n3]\n    delay: 2ms\n    bandwidth: 20Mbit\n  - endpoints: [n3, n4]\n    delay: 1ms\n";
    // The control channel as someone on the underlay sees it (the controller's port),
    // printed as text.
    let dump = Command::new("ip")
        .args(["netns", "exec", "vx-ul", "tcpdump", "-i", "vxu2", "-l", "-nn", "-A", "tcp"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The underlay towards machine b carries 50 Mbit/s (the rest of the bridge as much
    // as the CPU moves): `up` measures both ways between the machines.
    ok("ip netns exec vx-ul tc qdisc add dev vxu1 root tbf rate 50mbit burst 64kb latency 50ms");
    std::thread::sleep(Duration::from_millis(500));
    let up = m.up("xm", yaml);
    assert!(up.status.success(), "{}", text(&up));
    std::thread::sleep(Duration::from_millis(300));
    let _ = Command::new("kill").arg(dump.id().to_string()).status();
    let wire = dump.wait_with_output().unwrap().stdout;
    let has = |needle: &[u8]| wire.windows(needle.len()).any(|w| w == needle);
    assert!(has(b".14790:"), "nothing captured: {}", String::from_utf8_lossy(&wire));
    // Encrypted: neither the token nor the plan (node names, commands) is readable.
    assert!(
        !has(b"test-token-0123456789abcdef") && !has(b"iperf3 -s -D") && !has(b"\"nodes\""),
        "the control channel is readable on the underlay"
    );
    let st = m.vemu(&["status", "--lab", "xm", "--json"]);
    let status: serde_json::Value =
        serde_json::from_slice(&st.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&st)));
    let n4_ip = status["nodes"].as_array().unwrap().iter().find(|n| n["name"] == "n4").unwrap()
        ["ifaces"][0]["addrs"][0]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();

    // Each node says where it runs; the status lists the machines.
    let on: Vec<(String, String)> = status["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["name"].as_str().unwrap().into(), n["machine"].as_str().unwrap_or("").into()))
        .collect();
    assert!(
        on.iter().any(|(n, mc)| n == "n1" && mc == "a")
            && on.iter().any(|(n, mc)| n == "n4" && mc == "b"),
        "{on:?}"
    );
    let machines: Vec<&str> = status["machines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    assert_eq!(machines, ["a", "b"]);
    // The cut against the underlay: n2:n3 (20 Mbit/s) each way, about 50 Mbit/s measured
    // towards b, more the other way.
    let underlay = |from: &str| {
        status["machines"].as_array().unwrap().iter().find(|x| x["name"] == from).unwrap()
            ["underlay"][0]
            .clone()
    };
    let (ab, ba) = (underlay("a"), underlay("b"));
    for (u, to) in [(&ab, "b"), (&ba, "a")] {
        assert_eq!(
            (u["to"].as_str(), u["links"].as_u64(), u["set_bps"].as_u64()),
            (Some(to), Some(1), Some(20_000_000)),
            "{u}"
        );
    }
    let (ab_bps, ba_bps) =
        (ab["measured_bps"].as_f64().unwrap(), ba["measured_bps"].as_f64().unwrap());
    eprintln!("across 2 machines: underlay measured a -> b {:.1} Mbit/s (50 Mbit/s tbf), b -> a {:.1} Mbit/s", ab_bps / 1e6, ba_bps / 1e6);
    assert!(
        (30e6..55e6).contains(&ab_bps) && ba_bps > 100e6,
        "a -> b {ab_bps}, b -> a {ba_bps} bit/s"
    );

    // `vemu exec` from the controller's machine runs the command on the node's
    // machine: its output, standard input and exit status come back.
    let o = m.vemu(&[
        "exec",
        "--lab",
        "xm",
        "n4",
        "--",
        "sh",
        "-c",
        "hostname; echo to-stderr >&2; exit 7",
    ]);
    assert_eq!(o.status.code(), Some(7), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "n4\n");
    assert!(String::from_utf8_lossy(&o.stderr).contains("to-stderr"), "{}", text(&o));
    let mut c = Command::new("ip")
        .args(["netns", "exec", "vx-ctl", VEMU, "exec", "--lab", "xm", "n1", "--", "wc", "-c"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(c.stdin.as_mut().unwrap(), &[b'x'; 100_000]).unwrap();
    drop(c.stdin.take());
    let o = c.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "100000");
    let o = m.vemu(&["exec", "--lab", "xm", "n1", "--", "no-such-command"]);
    assert_eq!(o.status.code(), Some(127), "{}", text(&o));

    // `vemu shell` from the controller's machine: a terminal on the node's machine,
    // of this terminal's size, that ends with the shell's exit status.
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!("(sleep 1; printf 'hostname; stty size\\r'; sleep 1; printf 'exit 3\\r'; sleep 3) | script -qefc 'stty rows 33 cols 101; ip netns exec vx-ctl {VEMU} shell --lab xm n4' /dev/null"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("n4\r\n33 101\r\n"), "{out}");
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));

    // Round trip: 2 x (1 + 2 + 1) ms, whichever machine each hop is on (run from
    // the controller's machine, and on the node's machine).
    m.exec(0, "xm", "n1", &["ping", "-c", "3", "-i", "0.2", &n4_ip]);
    let p = m
        .vemu(&["exec", "--lab", "xm", "n1", "--", "ping", "-q", "-c", "20", "-i", "0.05", &n4_ip]);
    let rtt = min_rtt_ms(&p);
    eprintln!("across 2 machines: n1 -> n4 min RTT {rtt:.3} ms (set 8 ms)");
    // Above the set delays: 2 x 39 us of serialization at 20 Mbit/s, six passes
    // through an engine (tens of us each, as on one machine) and two crossings of the
    // underlay (not yet subtracted from the set delay): 0.4-0.5 ms idle, up to 0.9 ms
    // with both cores busy.
    assert!((8.0..9.5).contains(&rtt), "min RTT {rtt} ms, set 8 ms");

    // TCP at the 20 Mbit/s set on the link between the machines.
    let o = m.exec(
        0,
        "xm",
        "n1",
        &["iperf3", "-c", &n4_ip, "-t", "4", "-O", "1", "-J", "--connect-timeout", "3000"],
    );
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("iperf3: {}", text(&o)));
    let bps = v["end"]["sum_received"]["bits_per_second"].as_f64().unwrap();
    eprintln!("across 2 machines: TCP {:.2} Mbit/s over a 20 Mbit/s link", bps / 1e6);
    assert!((0.88 * 20e6..=1.0 * 20e6).contains(&bps), "{bps} bit/s");
    // The machine that receives a direction judges its own wait for what the other sent
    // (from each datagram's arrival to the write to the node): both ways have frames.
    let status: serde_json::Value =
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xm", "--json"]).stdout).unwrap();
    let link =
        status["links"].as_array().unwrap().iter().find(|l| l["name"] == "n2:n3").unwrap().clone();
    for d in ["forward", "reverse"] {
        let judged: u64 = link[d]["stats"]["arrival_wait_hist"]
            .as_array()
            .map_or(0, |h| h.iter().filter_map(|x| x.as_u64()).sum());
        assert!(judged >= 20, "{d}: {judged} frames judged on arrival: {}", link[d]["stats"]);
    }

    // Run-time changes reach the machine that carries each direction.
    let o = m.vemu(&["link", "set", "n2:n3", "--delay", "10ms", "--lab", "xm"]);
    assert!(o.status.success(), "{}", text(&o));
    let rtt = min_rtt_ms(&m.exec(0, "xm", "n1", &["ping", "-q", "-c", "20", "-i", "0.05", &n4_ip]));
    assert!((24.0..25.5).contains(&rtt), "min RTT {rtt} ms after link set, set 24 ms");
    // More than the underlay carries towards b: status says so (that way only).
    let warnings = || -> Vec<String> {
        let o = m.vemu(&["status", "--lab", "xm"]);
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.starts_with("warning: the links from machine"))
            .map(String::from)
            .collect()
    };
    assert!(warnings().is_empty(), "{:?}", warnings());
    let o = m.vemu(&["link", "set", "n2:n3", "--bandwidth", "100Mbit", "--lab", "xm"]);
    assert!(o.status.success(), "{}", text(&o));
    let w = warnings();
    assert!(
        w.len() == 1 && w[0].contains("from machine 'a' to 'b' are set to 100.0 Mbit/s in all"),
        "{w:?}"
    );
    // And it is so: 80 Mbit/s of UDP fit the link but not the underlay. The far engine
    // counts the frames that never came (tunnel sequence gaps): not the model's loss,
    // so the fidelity monitor holds them against the direction.
    let o = m.exec(0, "xm", "n1", &["iperf3", "-u", "-b", "80M", "-t", "2", "-c", &n4_ip]);
    assert!(o.status.success(), "{}", text(&o));
    let status: serde_json::Value =
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xm", "--json"]).stdout).unwrap();
    let link =
        status["links"].as_array().unwrap().iter().find(|l| l["name"] == "n2:n3").unwrap().clone();
    let lost = |d: &str| link[d]["stats"]["underlay_lost"].as_u64().unwrap_or(0);
    let (fwd, rev) = (lost("forward"), lost("reverse"));
    eprintln!("across 2 machines: 80 Mbit/s over a 50 Mbit/s underlay: {fwd} + {rev} frames lost by the underlay");
    assert!(fwd.max(rev) > 1000, "underlay losses forward {fwd}, reverse {rev}: {link}");
    let affected = status["fidelity"]["affected"].as_array().unwrap();
    assert!(
        affected.iter().any(|a| a["name"].as_str().unwrap_or("").contains("n2:n3")
            && a["underlay_lost"].as_u64().unwrap_or(0) > 1000),
        "{}",
        status["fidelity"]
    );

    // A traffic flow from a node of one machine to a node of the other: each end runs on
    // its node's machine and keeps its records there; `vemu report` on the controller's
    // machine gathers them (and `down` does, for a report afterwards). The one-way delay
    // compares two machines' lab clocks: 1 + 10 + 1 ms set.
    let flow = |count: &str| {
        let o = m.vemu(&[
            "traffic",
            "cbr",
            "--lab",
            "xm",
            "--from",
            "n1",
            "--to",
            "n4",
            "--to-addr",
            &n4_ip,
            "--rate",
            "200",
            "--count",
            count,
        ]);
        assert!(o.status.success(), "{}", text(&o));
    };
    let report = || -> serde_json::Value {
        let o = m.vemu(&["report", "--lab", "xm", "--json"]);
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)))
    };
    flow("100");
    let t0 = Instant::now();
    let mut r = report();
    while r["flows"][0]["delivered"] != 100 && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(300));
        r = report();
    }
    let f = &r["flows"][0];
    assert_eq!((f["sent"].as_u64(), f["delivered"].as_u64()), (Some(100), Some(100)), "{r}");
    // The machines' lab clocks, measured against the controller's by the heartbeats.
    let status: serde_json::Value =
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xm", "--json"]).stdout).unwrap();
    for mc in status["machines"].as_array().unwrap() {
        let (offset, rtt) = (mc["clock_offset_ns"].as_i64(), mc["clock_rtt_ns"].as_u64());
        eprintln!("across 2 machines: machine {}: lab clock {offset:?} ns ahead, measured with a {rtt:?} ns round trip", mc["name"]);
        assert!(offset.is_some() && rtt.is_some_and(|r| r < 50_000_000), "{mc}");
    }
    let o = m.vemu(&["status", "--lab", "xm"]);
    let table = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        table
            .lines()
            .filter(|l| (l.starts_with("a ") || l.starts_with("b ")) && l.contains(" ms (+/- "))
            .count(),
        2,
        "{table}"
    );
    let p50 = f["delay_ms"]["p50"].as_f64().unwrap();
    eprintln!("across 2 machines: CBR flow n1 -> n4 one-way delay p50 {p50:.3} ms (set 12 ms)");
    assert!((12.0..13.5).contains(&p50), "one-way delay p50 {p50} ms, set 12 ms: {r}");
    // This one's records reach the controller's machine with `down`.
    flow("60");

    // Captures of a node whose link crosses to the other machine: each frame once, as
    // delivered (after) or as it entered the link (before; the far machine's part).
    for point in ["after", "before"] {
        let file = format!("/tmp/vemu-tests/xm-{point}.pcapng");
        let _ = std::fs::create_dir_all("/tmp/vemu-tests");
        let cap = Command::new("ip")
            .args([
                "netns", "exec", "vx-ctl", VEMU, "capture", "--lab", "xm", "n2", "--point", point,
                "-c", "12", "-w", &file, "icmp",
            ])
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(1000));
        m.vemu(&["exec", "--lab", "xm", "n1", "--", "ping", "-c", "3", "-i", "0.2", &n4_ip]);
        let t0 = Instant::now();
        let mut cap = cap;
        while cap.try_wait().unwrap().is_none() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "the capture ({point}) did not get its 12 frames"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let o = Command::new("tshark")
            .args(["-r", &file, "-T", "fields", "-e", "icmp.type", "-e", "icmp.seq"])
            .output()
            .unwrap();
        let mut seen: Vec<String> = String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        seen.sort();
        // Requests (8) and replies (0) of 3 pings, each in on one interface and out on the other.
        let want: Vec<String> =
            ["0 1", "0 1", "0 2", "0 2", "0 3", "0 3", "8 1", "8 1", "8 2", "8 2", "8 3", "8 3"]
                .iter()
                .map(|x| x.to_string())
                .collect();
        assert_eq!(seen, want, "capture {point}: {}", text(&o));
        // The file says where the times come from, and how far off they can be.
        let o = Command::new("tshark")
            .args(["-r", &file, "-c", "1", "-T", "fields", "-e", "frame.interface_description"])
            .output()
            .unwrap();
        let d = String::from_utf8_lossy(&o.stdout);
        assert!(
            d.contains("on machine ")
                && d.contains(": times moved to the controller's lab clock by")
                && d.contains(" ns, within ±"),
            "capture {point}: {d}"
        );
    }

    // Counters of the link between the machines: each direction counted once.
    let status: serde_json::Value =
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xm", "--json"]).stdout).unwrap();
    let link = status["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "n2:n3")
        .unwrap_or_else(|| panic!("{status}"));
    let fwd = &link["forward"]["stats"];
    let (rx, tx) = (fwd["rx_frames"].as_u64().unwrap(), fwd["tx_frames"].as_u64().unwrap());
    assert!(tx > 1000 && tx <= rx, "n2:n3 forward: rx {rx}, tx {tx}");
    // The underlay was probed both ways: a few tens of microseconds on a bridge.
    for dir in ["forward", "reverse"] {
        let t = link[dir]["stats"]["transit_ns"].as_u64().unwrap_or(0);
        eprintln!("across 2 machines: n2:n3 {dir}: underlay one-way {t} ns (measured)");
        assert!((1..1_000_000).contains(&t), "n2:n3 {dir}: transit {t} ns");
    }

    let o = m.vemu(&["down", "--lab", "xm"]);
    assert!(o.status.success(), "{}", text(&o));
    for i in 0..2 {
        assert_eq!(m.leftovers(i), "", "machine {i} keeps something after down");
    }
    assert!(!std::path::Path::new("/run/vemu/xm").exists());
    let r = report();
    let sent_delivered: Vec<(Option<u64>, Option<u64>)> = r["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["sent"].as_u64(), f["delivered"].as_u64()))
        .collect();
    assert_eq!(
        sent_delivered,
        [(Some(100), Some(100)), (Some(60), Some(60))],
        "report after down: {r}"
    );
    assert!(!text(&up).contains("warning:"), "{}", text(&up));

    // A lab whose link between the machines is set faster than the underlay towards b:
    // `up` says so at once.
    let yaml = "name: xw\naddressing: {ipv6: none}\nmachines: {a: 10.78.0.1, b: 10.78.0.2}\nnodes:\n  w1: {machine: a}\n  w2: {machine: b}\nlinks:\n  - {endpoints: [w1, w2], bandwidth: 100Mbit}\n";
    let up = m.up("xw", yaml);
    assert!(up.status.success(), "{}", text(&up));
    assert!(
        text(&up)
            .contains("warning: the links from machine 'a' to 'b' are set to 100.0 Mbit/s in all"),
        "{}",
        text(&up)
    );
    let o = m.vemu(&["down", "--lab", "xw"]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn a_machine_that_cannot_build_its_share_fails_the_lab_everywhere_with_a_clear_error() {
    let _g = serial();
    let m = Machines::start("vy", 79, &["a", "b"]);
    // Machine c has no agent; machine b's share cannot be built (a file that cannot be read).
    let yaml = "name: xf\nmachines: {a: 10.79.0.1, b: 10.79.0.2}\nnodes:\n  n1: {machine: a}\n  n2: {machine: b, sysctl: {net.nonexistent.key: '1'}}\nlinks:\n  - endpoints: [n1, n2]\n";
    let o = m.up("xf", yaml);
    assert!(!o.status.success());
    let msg = text(&o);
    assert!(
        msg.contains("machine 'b' (10.79.0.2:14790)") && msg.contains("net.nonexistent.key"),
        "{msg}"
    );
    for i in 0..2 {
        assert_eq!(m.leftovers(i), "", "machine {i} keeps something after a failed up");
    }
    assert!(
        !std::path::Path::new("/run/vemu/xf").exists(),
        "the controller keeps the lab's directory"
    );
    // An agent that is not there: said at once, nothing built.
    let yaml = "name: xg\nmachines: {a: 10.79.0.1, c: 10.79.0.9}\nnodes:\n  n1: {machine: a}\n  n2: {machine: c}\nlinks:\n  - endpoints: [n1, n2]\n";
    let t0 = Instant::now();
    let o = m.up("xg", yaml);
    assert!(!o.status.success());
    assert!(text(&o).contains("machine 'c' (10.79.0.9:14790)"), "{}", text(&o));
    assert!(t0.elapsed() < Duration::from_secs(15));
    assert_eq!(m.leftovers(0), "");
    // A wrong token is refused by the agent.
    write_token(&m.token_file, "another-token-000000000000\n");
    let o = m.up("xh", "name: xh\nmachines: {a: 10.79.0.1}\nnodes: {n1: {}}\n");
    assert!(!o.status.success() && text(&o).contains("Bearer"), "{}", text(&o));
}

/// Waits up to `secs` for `cond`.
fn eventually(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < Duration::from_secs(secs), "{what}: not within {secs} s");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_lost_machine_or_a_lost_controller_leaves_the_rest_running_and_nothing_behind() {
    let _g = serial();
    let m = Machines::start("vz", 80, &["a", "b"]);
    // The machines given on the command line (the scenario names none).
    let yaml = "name: xl\naddressing: {ipv6: none}\nnodes:\n  n1: {machine: a}\n  n2: {machine: a}\n  n3: {machine: b}\nlinks:\n  - endpoints: [n1, n2]\n  - endpoints: [n2, n3]\n    delay: 1ms\n";
    let up = m.up_with("xl", yaml, &["--machines", "a=10.80.0.1,b=10.80.0.2"]);
    assert!(up.status.success(), "{}", text(&up));
    let ping = |from: &str, to: &str| {
        let o = m.vemu(&[
            "exec", "--lab", "xl", from, "--", "ping", "-c", "3", "-i", "0.2", "-W", "2", to,
        ]);
        assert!(o.status.success(), "ping {from} -> {to}: {}", text(&o));
    };
    ping("n1", "n3");
    let status = || -> serde_json::Value {
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xl", "--json"]).stdout)
            .unwrap_or_default()
    };

    // Machine b falls off the underlay (its port on the bridge goes down).
    ok("ip -n vz-ul link set vzu1 down");
    let t0 = Instant::now();
    eventually(20, "machine b marked lost", || status()["machines"][1]["state"] == "lost");
    eprintln!("lost machine noticed after {:.1} s", t0.elapsed().as_secs_f64());
    let st = status();
    assert_eq!(st["machines"][0]["state"], "up");
    let link =
        st["links"].as_array().unwrap().iter().find(|l| l["name"] == "n2:n3").unwrap().clone();
    assert_eq!(link["up"], false, "{link}");
    let n3 = st["nodes"].as_array().unwrap().iter().find(|n| n["name"] == "n3").unwrap().clone();
    assert_eq!(n3["up"], false, "{n3}");
    // The surviving end lost carrier, as if its cable were pulled; the rest runs.
    let o = m.vemu(&["exec", "--lab", "xl", "n2", "--", "cat", "/sys/class/net/eth1/carrier"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "0", "{}", text(&o));
    ping("n1", "n2");
    let o = m.vemu(&["exec", "--lab", "xl", "n3", "--", "true"]);
    assert!(!o.status.success() && text(&o).contains("lost"), "{}", text(&o));
    // Machine b no longer hears its controller: its agent takes its share down when
    // the lease (5 s here) ends.
    eventually(20, "machine b removes its share", || m.leftovers(1).is_empty());
    // Every machine lost (a falls off too): the controller still answers, with no
    // engine's counters (it panicked on them before).
    ok("ip -n vz-ul link set vzu0 down");
    eventually(20, "machine a lost too", || status()["machines"][0]["state"] == "lost");
    let o = m.vemu(&["status", "--lab", "xl"]);
    assert!(o.status.success() && text(&o).contains("n2:n3"), "{}", text(&o));
    ok("ip -n vz-ul link set vzu0 up");
    // Back on the underlay: `down` ends the lab everywhere.
    ok("ip -n vz-ul link set vzu1 up");
    let o = m.vemu(&["down", "--lab", "xl"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(m.leftovers(0), "");

    // The controller dies (SIGKILL): `vemu clean` on its machine tells the agents.
    let up = m.up_with(
        "xk",
        &yaml.replace("name: xl", "name: xk"),
        &["--machines", "a=10.80.0.1,b=10.80.0.2"],
    );
    assert!(up.status.success(), "{}", text(&up));
    assert!(!m.leftovers(0).is_empty() && !m.leftovers(1).is_empty());
    let pid = std::fs::read_to_string("/run/vemu/xk/daemon.pid").unwrap();
    ok(&format!("kill -9 {}", pid.trim()));
    let t0 = Instant::now();
    let o = m.vemu(&["clean"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(t0.elapsed() < Duration::from_secs(4), "clean waited for the leases");
    assert_eq!((m.leftovers(0), m.leftovers(1)), (String::new(), String::new()));
    assert!(!std::path::Path::new("/run/vemu/xk").exists());
}

/// A stranger on the underlay (no token) holds ~270 plain TCP connections to an agent's
/// port, reopened as they close, for 12 s (issue 39): the agent keeps serving the
/// controller — the machine stays up and the link across carries pings. Then the
/// machine really is cut off and marked lost, and rejoins when it is back (its agent
/// still holds its share): the link across comes up again with the delay set meanwhile.
#[test]
fn a_stranger_cannot_knock_an_agent_off_and_a_lost_machine_that_answers_again_rejoins() {
    let _g = serial();
    let m = Machines::start("vk", 77, &["a", "b"]);
    // The stranger: a namespace on the underlay, with its own address.
    ok("ip netns add vk-x && ip link add vku9 netns vk-ul type veth peer name eth0 netns vk-x && ip -n vk-ul link set vku9 master br0 up && ip -n vk-x link set lo up && ip -n vk-x link set eth0 up && ip -n vk-x addr add 10.77.0.200/24 dev eth0");
    let yaml = "name: xf\naddressing: {ipv6: none}\nnodes:\n  n1: {machine: a}\n  n2: {machine: b}\nlinks:\n  - endpoints: [n1, n2]\n    delay: 1ms\n";
    m.labs.lock().unwrap().push("xf".into());
    let path = write_scenario("xf", yaml);
    let up =
        m.vemu_leased(&["up", path.to_str().unwrap(), "--machines", "a=10.77.0.1,b=10.77.0.2"], 30);
    assert!(up.status.success(), "{}", text(&up));
    let ping = || {
        m.vemu(&[
            "exec", "--lab", "xf", "n1", "--", "ping", "-c", "3", "-i", "0.2", "-W", "2", "n2",
        ])
    };
    let o = ping();
    assert!(o.status.success(), "{}", text(&o));
    let flood = r#"
import socket, time
socks, end, opened = [], time.time() + 12, 0
def open_one():
    s = socket.socket(); s.setblocking(False)
    try: s.connect(("10.77.0.2", 14790))
    except BlockingIOError: pass
    return s
socks = [open_one() for _ in range(270)]
opened = 270
while time.time() < end:
    alive = []
    for s in socks:
        try:
            if s.recv(1) == b"": s.close(); continue
        except BlockingIOError: pass
        except OSError: s.close(); continue
        alive.append(s)
    socks = alive
    if len(socks) < 270:
        socks.append(open_one()); opened += 1
    time.sleep(1 / 70)
print(opened)
"#;
    let stranger = Command::new("ip")
        .args(["netns", "exec", "vk-x", "python3", "-c", flood])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Through the flood: the machine stays up, the link carries pings.
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(1));
    while t0.elapsed() < Duration::from_secs(11) {
        let st = m.status("xf");
        assert_eq!(st["machines"][1]["state"], "up", "machine b under the stranger's flood: {st}");
        let o = ping();
        assert!(o.status.success(), "ping under the flood: {}", text(&o));
    }
    let o = stranger.wait_with_output().unwrap();
    let opened: u64 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap_or(0);
    eprintln!("the stranger opened {opened} connections");
    assert!(opened > 300, "the stranger's connections were closed and reopened: {opened}");
    ok("ip netns del vk-x");

    // Machine b falls off the underlay: lost, the link down.
    ok("ip -n vk-ul link set vku1 down");
    eventually(20, "machine b marked lost", || m.status("xf")["machines"][1]["state"] == "lost");
    let link = |st: &serde_json::Value| {
        st["links"].as_array().and_then(|l| l.first()).cloned().unwrap_or_default()
    };
    assert_eq!(link(&m.status("xf"))["up"], false);
    // A change meanwhile (b does not hear of it).
    let o = m.vemu(&["link", "set", "--lab", "xf", "n1:n2", "--delay", "20ms"]);
    assert!(o.status.success(), "{}", text(&o));
    // Back within its lease: b rejoins, the link is up with the new delay both ways.
    ok("ip -n vk-ul link set vku1 up");
    eventually(20, "machine b rejoins", || m.status("xf")["machines"][1]["state"] == "up");
    let st = m.status("xf");
    assert_eq!(link(&st)["up"], true, "{st}");
    eventually(20, "pings cross the link again", || ping().status.success());
    let rtt = min_rtt_ms(&ping());
    assert!((40.0..60.0).contains(&rtt), "RTT {rtt} ms for 2 x 20 ms");
    m.down_leaving_nothing("xf");
}

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

    let o = m.vemu(&["down", "--lab", "xa"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!((m.leftovers(0), m.leftovers(1)), (String::new(), String::new()));
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

/// An underlay whose path carries less than its machines' interfaces do (a 1400-byte
/// hop between 1500-byte interfaces, frames over it dropped without a word: the MTU
/// black hole of Mininet's and MaxiNet's tunnels): the engines find the path's size by
/// probing, and full-size frames of the lab still cross, in pieces.
#[test]
fn a_path_mtu_below_the_interfaces_mtu_still_carries_full_size_frames() {
    let _g = serial();
    let m = Machines::start("vm", 80, &["a", "b"]);
    for i in 0..3 {
        ok(&format!("ip -n vm-ul link set vmu{i} mtu 1400"));
    }
    let yaml = "name: xp\naddressing: {ipv6: none}\nmachines: {a: 10.80.0.1, b: 10.80.0.2}\nnodes:\n  n1: {machine: a}\n  n2: {machine: b, run: ['iperf3 -s -D']}\nlinks:\n  - endpoints: [n1, n2]\n    bandwidth: 20Mbit\n";
    let up = m.up("xp", yaml);
    assert!(up.status.success(), "{}", text(&up));
    let st: serde_json::Value =
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xp", "--json"]).stdout).unwrap();
    let n2 = st["nodes"].as_array().unwrap().iter().find(|n| n["name"] == "n2").unwrap()["ifaces"]
        [0]["addrs"][0]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    // Full-size ICMP (1472 bytes of data: a 1514-byte frame) and TCP at the set rate.
    let o = m.exec(
        0,
        "xp",
        "n1",
        &["ping", "-c", "5", "-i", "0.2", "-W", "2", "-s", "1472", "-M", "do", &n2],
    );
    let (sent, got, _) = parse_ping(&text(&o));
    assert_eq!((sent, got), (5, 5), "{}", text(&o));
    let o = m.exec(
        0,
        "xp",
        "n1",
        &["iperf3", "-c", &n2, "-t", "3", "-O", "1", "-J", "--connect-timeout", "3000"],
    );
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("iperf3: {}", text(&o)));
    let bps = v["end"]["sum_received"]["bits_per_second"].as_f64().unwrap_or(0.0);
    assert!(
        (0.85 * 20e6..=1.0 * 20e6).contains(&bps),
        "{bps} bit/s across a 1400-byte underlay hop: {}",
        text(&o)
    );
    // The status says what the path carries (datagrams found to cross the 1400-byte hop,
    // more than the 1232 bytes any path does) and that this link's set delay (none) is
    // below the underlay's.
    let st: serde_json::Value =
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xp", "--json"]).stdout).unwrap();
    let payload = st["links"][0]["forward"]["stats"]["path_payload_bytes"].as_u64().unwrap_or(0);
    assert!(
        (1233..=1372).contains(&payload),
        "datagrams of {payload} bytes over a 1400-byte hop: {}",
        st["links"][0]
    );
    let text_status = text(&m.vemu(&["status", "--lab", "xp"]));
    assert!(text_status.contains(&format!("datagrams of {payload} B")), "{text_status}");
    assert!(
        text_status.contains(
            "warning: n1:n2 fwd: the set delay (0 us) is below the underlay's one-way delay"
        ),
        "{text_status}"
    );
    // The underlay's hop shrinks to 1300 bytes while the lab runs (its bridge ports drop
    // larger frames without a word): the engines fall back and find
    // the new size within a few probe rounds (a second apart); full-size frames cross
    // again; the control channel (segments kept to 1200 bytes) never notices.
    for i in 0..3 {
        ok(&format!("ip -n vm-ul link set vmu{i} mtu 1300"));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let payload = loop {
        let st: serde_json::Value =
            serde_json::from_slice(&m.vemu(&["status", "--lab", "xp", "--json"]).stdout).unwrap();
        let p = ["forward", "reverse"]
            .map(|d| st["links"][0][d]["stats"]["path_payload_bytes"].as_u64().unwrap_or(0));
        if p.iter().all(|&x| x <= 1272) || Instant::now() > deadline {
            break p;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(
        payload.iter().all(|&x| (1232..=1272).contains(&x)),
        "datagrams of {payload:?} bytes after the hop shrank to 1300"
    );
    let o = m.exec(
        0,
        "xp",
        "n1",
        &["ping", "-c", "5", "-i", "0.2", "-W", "2", "-s", "1472", "-M", "do", &n2],
    );
    let (sent, got, _) = parse_ping(&text(&o));
    assert_eq!((sent, got), (5, 5), "full-size pings after the path shrank: {}", text(&o));
    let o = m.vemu(&["down", "--lab", "xp"]);
    assert!(o.status.success(), "{}", text(&o));
}

/// A routing daemon's view across machines: the 10-router FRR OSPF ring of the examples
/// spread over three machines by the partitioner (several ring links cross machines),
/// converging, then rerouting when a link between two machines goes down.
#[test]
fn an_frr_ospf_ring_across_three_machines_converges_and_reroutes() {
    let _g = serial();
    let m = Machines::start("vr", 81, &["a", "b", "c"]);
    let file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/frr-ospf-ring.yaml");
    m.labs.lock().unwrap().push("xr".into());
    let o = m.vemu(&[
        "up",
        file.to_str().unwrap(),
        "--name",
        "xr",
        "--machines",
        "a=10.81.0.1,b=10.81.0.2,c=10.81.0.3",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let st: serde_json::Value =
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xr", "--json"]).stdout).unwrap();
    let machine_of = |n: &str| {
        st["nodes"].as_array().unwrap().iter().find(|x| x["name"] == n).unwrap()["machine"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // Links whose ends are on two machines.
    let across: Vec<String> = st["links"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| {
            machine_of(l["a"].as_str().unwrap().split(':').next().unwrap())
                != machine_of(l["b"].as_str().unwrap().split(':').next().unwrap())
        })
        .map(|l| l["name"].as_str().unwrap().to_string())
        .collect();
    let used: std::collections::BTreeSet<String> =
        (1..=10).map(|i| machine_of(&format!("r{i}"))).collect();
    assert_eq!(used.len(), 3, "every machine hosts routers");
    assert!(across.len() >= 3, "a ring over 3 machines crosses them at least 3 times: {across:?}");
    // Every loopback reachable from r1 (FRR learnt every route over the machines).
    let reach_all = |secs: u64| {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let missing: Vec<u32> = (2..=10)
                .filter(|i| {
                    !m.vemu(&[
                        "exec",
                        "--lab",
                        "xr",
                        "r1",
                        "--",
                        "ping",
                        "-c",
                        "1",
                        "-W",
                        "1",
                        &format!("10.255.0.{i}"),
                    ])
                    .status
                    .success()
                })
                .collect();
            if missing.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "loopbacks of r{missing:?} unreachable from r1 after {secs} s"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    reach_all(90);
    // A link between two machines fails: OSPF goes the other way round.
    let cut = &across[0];
    let o = m.vemu(&["link", "down", cut, "--lab", "xr"]);
    assert!(o.status.success(), "{}", text(&o));
    reach_all(30);
    let o = m.vemu(&["down", "--lab", "xr"]);
    assert!(o.status.success(), "{}", text(&o));
    for i in 0..3 {
        assert_eq!(m.leftovers(i), "", "machine {i} keeps something after down");
    }
}

/// Four machines in a ring, one node each: every link crosses, so the underlay is
/// measured both ways between neighbours — at once where no machine takes part in two
/// probes (four rounds for the ring) — every direction gets a figure, the kernel's
/// tunnel stays unused (the underlay cannot carry whole frames in it), pings go round,
/// and `down` leaves nothing anywhere.
#[test]
fn a_ring_on_four_machines_measures_every_direction_of_its_underlay() {
    let _g = serial();
    let m = Machines::start("vq", 82, &["a", "b", "c", "d"]);
    let yaml = "name: xq
routing: static
addressing: {ipv6: none}
machines: {a: 10.82.0.1, b: 10.82.0.2, c: 10.82.0.3, d: 10.82.0.4}
nodes: {n1: {machine: a}, n2: {machine: b}, n3: {machine: c}, n4: {machine: d}}
links:
  - {endpoints: [n1, n2], bandwidth: 10Mbit}
  - {endpoints: [n2, n3], bandwidth: 10Mbit}
  - {endpoints: [n3, n4], bandwidth: 10Mbit}
  - {endpoints: [n4, n1], bandwidth: 10Mbit}
  - {endpoints: [n1, n3]}
";
    let o = m.up("xq", yaml);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        !text(&o).contains("fast path off"),
        "nothing here the fast path could carry is not a warning: {}",
        text(&o)
    );
    let st: serde_json::Value =
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xq", "--json"]).stdout).unwrap();
    // (Every end is in the plane, for the kernel's tunnel between machines — which a
    // 1500-byte underlay cannot carry whole frames of: the engine carries them.)
    assert_eq!(st["fast_path"].as_str(), Some("on"), "{}", st["fast_path"]);
    assert!(
        st["links"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["forward"]["stats"]["kernel_path"] != true
                && l["reverse"]["stats"]["kernel_path"] != true),
        "{}",
        st["links"]
    );
    let machines = st["machines"].as_array().unwrap();
    assert_eq!(machines.len(), 4);
    // Every direction a link with a rate crosses is measured; a and c, joined by a link
    // without one, are not (nothing to weigh) until a rate is set a -> c.
    let row = |st: &serde_json::Value, from: &str, to: &str| {
        st["machines"].as_array().unwrap().iter().find(|x| x["name"] == from).unwrap()["underlay"]
            .as_array()
            .unwrap()
            .iter()
            .find(|u| u["to"] == to)
            .cloned()
            .unwrap()
    };
    for mm in machines {
        let rows = mm["underlay"].as_array().unwrap();
        let diagonal = ["a", "c"].contains(&mm["name"].as_str().unwrap());
        assert_eq!(
            rows.len(),
            2 + diagonal as usize,
            "{} reaches its two neighbours (and a or c the other): {rows:?}",
            mm["name"]
        );
        for u in rows.iter().filter(|u| u["unlimited_links"] == 0) {
            let bps = u["measured_bps"]
                .as_u64()
                .unwrap_or_else(|| panic!("{} -> {} not measured: {u}", mm["name"], u["to"]));
            assert!(
                bps > 10_000_000,
                "{} -> {}: {bps} bit/s measured, the links want 10 Mbit/s",
                mm["name"],
                u["to"]
            );
            assert_eq!(u["set_bps"].as_u64(), Some(10_000_000));
        }
    }
    for (from, to) in [("a", "c"), ("c", "a")] {
        assert!(
            row(&st, from, to)["measured_bps"].is_null(),
            "{from} -> {to} measured for a link without a rate"
        );
    }
    // Machine a's three links to other machines share its engine's tunnel sockets: one
    // per shard (at most one per core), not one per link.
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let agent = m.agent_pid(0).to_string();
    let o = sh("ip netns exec vq-a ss -uanpH src 10.82.0.1");
    let sockets = text(&o).lines().filter(|l| l.contains(&format!("pid={agent},"))).count();
    assert!(
        (1..=cores.min(3)).contains(&sockets),
        "{sockets} tunnel sockets for 3 links on {cores} cores: {}",
        text(&o)
    );
    // Ten directions between machines without a set delay, each below the underlay's:
    // eight warnings, then how many more (not a line each in a lab of hundreds).
    let text_status = text(&m.vemu(&["status", "--lab", "xq"]));
    let lines: Vec<&str> = text_status.lines().filter(|l| l.starts_with("warning: ")).collect();
    assert_eq!(lines.len(), 9, "{text_status}");
    assert!(
        lines[..8].iter().all(|l| l.contains("is below the underlay's one-way delay")),
        "{text_status}"
    );
    assert_eq!(
        lines[8], "warning: ... and 2 more like these (vemu status --json has every direction)",
        "{text_status}"
    );
    let o = m.vemu(&[
        "link",
        "set",
        "--lab",
        "xq",
        "n1:n3",
        "--direction",
        "forward",
        "--bandwidth",
        "5Mbit",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let st2: serde_json::Value =
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xq", "--json"]).stdout).unwrap();
    assert!(
        row(&st2, "a", "c")["measured_bps"].as_u64().is_some_and(|b| b > 5_000_000),
        "{}",
        row(&st2, "a", "c")
    );
    assert!(
        row(&st2, "c", "a")["measured_bps"].is_null(),
        "only the direction given a rate is measured"
    );
    // n1 reaches n3, on another machine (by their own link).
    let n3 = st["nodes"].as_array().unwrap().iter().find(|n| n["name"] == "n3").unwrap()["ifaces"]
        [0]["addrs"][0]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let o = m.exec(0, "xq", "n1", &["ping", "-c", "3", "-i", "0.2", "-W", "2", &n3]);
    assert!(o.status.success(), "n1 -> n3 across machines: {}", text(&o));
    let o = m.vemu(&["down", "--lab", "xq"]);
    assert!(o.status.success(), "{}", text(&o));
    for i in 0..4 {
        assert_eq!(m.leftovers(i), "", "machine {i} keeps something after down");
    }
}

/// A MANET on two machines: the five-node radio line with n1, n2 on machine a and n4,
/// n5 on b (examples/manet-two-machines.yaml). The radio channel runs on a; n4's and n5's
/// frames reach it, and its deliveries reach them, through tunnels. babeld routes n1 to
/// n5 over exactly 4 hops across the machines; the channel's view (who hears whom, who
/// sent to whom) includes the far members; each member's directions are counted once,
/// with the underlay's delay taken off both ways; moving n3 away (an order to a's
/// channel) cuts the line; `down` leaves nothing on either machine.
#[test]
fn a_manet_across_two_machines_routes_with_babeld_over_one_radio_channel() {
    let _g = serial();
    let m = Machines::start("vw", 83, &["a", "b"]);
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/manet-two-machines.yaml");
    m.labs.lock().unwrap().push("xw".into());
    let o = m.vemu(&[
        "up",
        file.to_str().unwrap(),
        "--name",
        "xw",
        "--machines",
        "a=10.83.0.1,b=10.83.0.2",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let st: serde_json::Value =
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xw", "--json"]).stdout).unwrap();
    let machine_of = |n: &str| {
        st["nodes"].as_array().unwrap().iter().find(|x| x["name"] == n).unwrap()["machine"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        (machine_of("n1"), machine_of("n2"), machine_of("n4"), machine_of("n5")),
        ("a".into(), "a".into(), "b".into(), "b".into())
    );
    let ping = |ttl: &str| {
        m.vemu(&[
            "exec",
            "--lab",
            "xw",
            "n1",
            "--",
            "ping",
            "-c",
            "1",
            "-W",
            "2",
            "-t",
            ttl,
            "10.255.0.5",
        ])
    };
    eventually(90, "n1 reaches n5's loopback across the machines", || ping("64").status.success());
    // Exactly 4 hops: a TTL of 3 dies at n4 (on machine b), a TTL of 4 arrives.
    let o = ping("3");
    assert!(!o.status.success() && text(&o).contains("Time to live exceeded"), "{}", text(&o));
    let o = ping("4");
    assert!(o.status.success(), "{}", text(&o));
    // The channel (on a) knows the far members: n5 hears n4 only, and sent to n4 only.
    let st: serde_json::Value =
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xw", "--json"]).stdout).unwrap();
    let n5 = &st["segments"][0]["members"][4]["radio"];
    let names = |v: &serde_json::Value| {
        v.as_array()
            .unwrap()
            .iter()
            .map(|n| n["node"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        (names(&n5["neighbours"]), names(&n5["sent_to"])),
        (vec!["n4".to_string()], vec!["n4".to_string()]),
        "{n5}"
    );
    // n5's egress is carried out (and counted) on b, its ingress on a; both lead by the
    // underlay's one-way delay, measured.
    let port = &st["segments"][0]["members"][4];
    for d in ["egress", "ingress"] {
        let s = &port[d]["stats"];
        let (tx, transit) = (s["tx_frames"].as_u64().unwrap(), s["transit_ns"].as_u64().unwrap());
        assert!(tx > 0 && transit > 0 && transit < 5_000_000, "n5's {d}: {port}");
        assert!(s["rx_frames"].as_u64().unwrap() >= tx, "n5's {d} counted twice: {port}");
    }
    // n3 walks away: a's channel hears of it, and the line is cut.
    let o = m.vemu(&["node", "move", "n3", "--to", "500,1000", "--lab", "xw"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = m.vemu(&[
        "exec",
        "--lab",
        "xw",
        "n1",
        "--",
        "ping",
        "-c",
        "3",
        "-i",
        "0.2",
        "-W",
        "1",
        "10.255.0.5",
    ]);
    assert!(!o.status.success(), "still reachable with n3 away: {}", text(&o));
    let o = m.vemu(&["down", "--lab", "xw"]);
    assert!(o.status.success(), "{}", text(&o));
    for i in 0..2 {
        assert_eq!(m.leftovers(i), "", "machine {i} keeps something after down");
    }
}

/// A LAN across two machines: h1, h2 on a (with the switch), h3 on b with 2 ms egress and
/// 1 ms ingress, h4 on b too. Ping RTTs are the set delays (the underlay's taken off both
/// ways), ARP and broadcasts cross (once per machine, through the trunk), h3 and h4 reach
/// each other through the switch on a, `link set` on h3's port takes effect where each
/// direction is carried out, and a capture of h3 sees each frame once.
#[test]
fn a_lan_across_two_machines_keeps_each_ports_delays() {
    let _g = serial();
    let m = Machines::start("vl", 84, &["a", "b"]);
    let yaml = "name: xl\naddressing: {ipv6: none}\nmachines: {a: 10.84.0.1, b: 10.84.0.2}\nnodes:\n  h1: {machine: a}\n  h2: {machine: a}\n  h3: {machine: b}\n  h4: {machine: b}\nsegments:\n  lan:\n    members:\n      - {node: h1}\n      - {node: h2}\n      - {node: h3, egress: {delay: 2ms}, ingress: {delay: 1ms}}\n      - {node: h4}\n";
    let o = m.up("xl", yaml);
    assert!(o.status.success(), "{}", text(&o));
    let o = m.vemu(&[
        "check",
        &write_scenario("xl", yaml).to_string_lossy(),
        "--machines",
        "a=10.84.0.1,b=10.84.0.2",
    ]);
    assert!(
        text(&o).contains(
            "segment lan spans machines: its switch on machine a, 2 of 4 members elsewhere"
        ),
        "{}",
        text(&o)
    );
    let ping = |from: &str, to: &str| {
        m.vemu(&["exec", "--lab", "xl", from, "--", "ping", "-c", "5", "-i", "0.2", "-W", "2", to])
    };
    // Let the underlay's delay be measured (probes in the first second), then: h1 -> h3
    // is 1 ms there and 2 ms back; h3 -> h2 the same; h1 -> h2 stays local (no delay).
    std::thread::sleep(Duration::from_millis(1500));
    for (from, to, want) in [
        ("h1", "10.0.0.3", 3.0),
        ("h3", "10.0.0.2", 3.0),
        ("h1", "10.0.0.2", 0.0),
        ("h3", "10.0.0.4", 3.0),
    ] {
        let rtt = min_rtt_ms(&ping(from, to));
        eprintln!("LAN across 2 machines: {from} -> {to} min RTT {rtt:.3} ms (set {want} ms)");
        assert!(rtt >= want && rtt < want + 1.0, "{from} -> {to}: {rtt} ms, set {want} ms");
    }
    // Unicast between h3 and h4 (both on b) is switched on b: none of it crosses the
    // underlay (pings with a payload of their own, looked for in the datagrams), where
    // h1's to h3 do.
    let dump = Command::new("ip")
        .args(["netns", "exec", "vl-ul", "tcpdump", "-i", "br0", "-l", "-nn", "-A", "udp"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    let mark = |from: &str, to: &str, pattern: &str| {
        m.vemu(&[
            "exec", "--lab", "xl", from, "--", "ping", "-c", "5", "-i", "0.2", "-W", "2", "-p",
            pattern, to,
        ])
    };
    let rtt = min_rtt_ms(&mark("h4", "10.0.0.3", "766d756c"));
    assert!((3.0..4.0).contains(&rtt), "h4 -> h3 switched on b: {rtt} ms, 3 ms set");
    assert!(mark("h1", "10.0.0.3", "6c6f6f6b").status.success());
    // A broadcast from h3 (no node answers broadcast pings): to the switch on a, and not
    // back to b for h4, which had it on b.
    m.vemu(&[
        "exec",
        "--lab",
        "xl",
        "h3",
        "--",
        "ping",
        "-b",
        "-c",
        "3",
        "-i",
        "0.2",
        "-W",
        "1",
        "-p",
        "62636173",
        "10.0.0.255",
    ]);
    std::thread::sleep(Duration::from_millis(300));
    let _ = Command::new("kill").arg(dump.id().to_string()).status();
    let seen = String::from_utf8_lossy(&dump.wait_with_output().unwrap().stdout).to_string();
    // (Datagrams whose payload shows the pattern: one line each in tcpdump's ASCII.)
    let count = |p: &str| seen.lines().filter(|l| l.contains(&p.repeat(3))).count();
    let (local, across, broadcast) = (count("vmul"), count("look"), count("bcas"));
    assert!(local == 0 && across == 10 && broadcast == 3, "datagrams on the underlay with pings between h4 and h3 (both on b): {local}; between h1 and h3: {across} (10); broadcasts from h3: {broadcast} (3)");
    // h3's egress (h3 -> lan forward; carried out on b) to 5 ms: 6 ms round trips.
    let o = m.vemu(&[
        "link",
        "set",
        "h3:lan",
        "--lab",
        "xl",
        "--direction",
        "forward",
        "--delay",
        "5ms",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let rtt = min_rtt_ms(&ping("h1", "10.0.0.3"));
    assert!((6.0..7.0).contains(&rtt), "after link set: {rtt} ms");
    // And its ingress (lan -> h3; carried out on b, after the trunk) to 4 ms: 9 ms.
    let o = m.vemu(&[
        "link",
        "set",
        "lan:h3",
        "--lab",
        "xl",
        "--direction",
        "forward",
        "--delay",
        "4ms",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let rtt = min_rtt_ms(&ping("h1", "10.0.0.3"));
    assert!((9.0..10.0).contains(&rtt), "after link set: {rtt} ms");
    // A capture of h3 (on b): 3 requests in, 3 replies out, each once.
    let file = "/tmp/vemu-tests/xl-h3.pcapng";
    let _ = std::fs::create_dir_all("/tmp/vemu-tests");
    let mut cap = Command::new("ip")
        .args([
            "netns", "exec", "vl-ctl", VEMU, "capture", "--lab", "xl", "h3", "-c", "6", "-w", file,
            "icmp",
        ])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    m.vemu(&["exec", "--lab", "xl", "h1", "--", "ping", "-c", "3", "-i", "0.2", "10.0.0.3"]);
    let t0 = Instant::now();
    while cap.try_wait().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(20), "the capture did not get its 6 frames");
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = Command::new("tshark")
        .args(["-r", file, "-T", "fields", "-e", "icmp.type", "-e", "icmp.seq"])
        .output()
        .unwrap();
    let mut seen: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    seen.sort();
    assert_eq!(seen, ["0 1", "0 2", "0 3", "8 1", "8 2", "8 3"], "{}", text(&o));
    let o = m.vemu(&["down", "--lab", "xl"]);
    assert!(o.status.success(), "{}", text(&o));
    for i in 0..2 {
        assert_eq!(m.leftovers(i), "", "machine {i} keeps something after down");
    }
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

/// Unimpaired directions of links between machines go through the kernel's VXLAN
/// devices where the underlay carries whole frames (9000-byte interfaces here): the
/// underlay sees VXLAN on the lab's port, not the engines' tunnels; a delay set takes
/// the direction back to the engine and lifting it returns it to the kernel; a capture
/// of the far end records the frames arriving there (they go through the engines while
/// it runs); `down` leaves nothing.
#[test]
fn unimpaired_links_between_machines_take_the_kernels_tunnel_where_the_underlay_carries_whole_frames(
) {
    let _g = serial();
    let m = Machines::start_mtu("vk", 87, &["a", "b"], 9000);
    let yaml = "name: xk9\naddressing: {ipv6: none}\nmachines: {a: 10.87.0.1, b: 10.87.0.2}\nnodes:\n  n1: {machine: a}\n  n2: {machine: b, run: ['iperf3 -s -D']}\nlinks:\n  - endpoints: [n1, n2]\n";
    // (Machine b is cut from its controller below: its share must outlast that.)
    m.labs.lock().unwrap().push("xk9".into());
    let up = m.vemu_leased(&["up", write_scenario("xk9", yaml).to_str().unwrap()], 30);
    assert!(up.status.success(), "{}", text(&up));
    let status = || m.status("xk9");
    let kernel = |st: &serde_json::Value| kernel_paths(st, "n1:n2");
    // Within a few probe rounds the tunnels find that 9000-byte datagrams cross.
    eventually(10, "both directions through the kernel", || kernel(&status()) == (true, true));
    let n2_ip = status()["nodes"].as_array().unwrap().iter().find(|n| n["name"] == "n2").unwrap()
        ["ifaces"][0]["addrs"][0]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    // On the underlay: datagrams to the lab's VXLAN port.
    let dump = Command::new("ip")
        .args(["netns", "exec", "vk-ul", "tcpdump", "-i", "br0", "-l", "-nn", "udp"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let o =
        m.exec(0, "xk9", "n1", &["ping", "-c", "5", "-i", "0.1", "-s", "1472", "-M", "do", &n2_ip]);
    assert!(o.status.success(), "{}", text(&o));
    let o = m.exec(
        0,
        "xk9",
        "n1",
        &["iperf3", "-c", &n2_ip, "-t", "2", "-J", "--connect-timeout", "3000"],
    );
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("iperf3: {}", text(&o)));
    let bps = v["end"]["sum_received"]["bits_per_second"].as_f64().unwrap();
    eprintln!("through the kernel's tunnel: TCP {:.2} Gbit/s", bps / 1e9);
    assert!(bps > 50e6, "{bps} bit/s");
    std::thread::sleep(Duration::from_millis(300));
    let _ = Command::new("kill").arg(dump.id().to_string()).status();
    let seen = String::from_utf8_lossy(&dump.wait_with_output().unwrap().stdout).to_string();
    let port = vemu_host::vxlan_port("xk9");
    let vxlan = seen.lines().filter(|l| l.contains(&format!(".{port}: "))).count();
    assert!(
        vxlan > 100,
        "{vxlan} VXLAN datagrams to port {port} on the underlay: {}",
        seen.lines().take(20).collect::<Vec<_>>().join("\n")
    );
    // A delay set one way: that way through the engine (which takes the underlay's
    // transit off it), the other still through the kernel.
    let o = m.vemu(&[
        "link",
        "set",
        "n1:n2",
        "--direction",
        "forward",
        "--delay",
        "5ms",
        "--lab",
        "xk9",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(kernel(&status()), (false, true));
    let rtt =
        min_rtt_ms(&m.exec(0, "xk9", "n1", &["ping", "-q", "-c", "10", "-i", "0.05", &n2_ip]));
    assert!((5.0..6.0).contains(&rtt), "min RTT {rtt} ms, 5 ms set one way");
    let o =
        m.vemu(&["link", "set", "n1:n2", "--direction", "forward", "--delay", "0", "--lab", "xk9"]);
    assert!(o.status.success(), "{}", text(&o));
    eventually(5, "the forward direction back in the kernel", || kernel(&status()) == (true, true));
    let rtt =
        min_rtt_ms(&m.exec(0, "xk9", "n1", &["ping", "-q", "-c", "10", "-i", "0.05", &n2_ip]));
    assert!(rtt < 2.0, "min RTT {rtt} ms unimpaired");
    // A capture of n2 (what arrives there, recorded on its machine): both directions
    // through the engines meanwhile, each frame once.
    let file = "/tmp/vemu-tests/xk9.pcapng";
    let _ = std::fs::create_dir_all("/tmp/vemu-tests");
    let mut cap = Command::new("ip")
        .args([
            "netns", "exec", "vk-ctl", VEMU, "capture", "--lab", "xk9", "n2", "--point", "after",
            "-c", "10", "-w", file, "icmp",
        ])
        .spawn()
        .unwrap();
    eventually(5, "both directions through the engines while captured", || {
        kernel(&status()) == (false, false)
    });
    let o = m.exec(0, "xk9", "n1", &["ping", "-c", "5", "-i", "0.1", &n2_ip]);
    assert!(o.status.success(), "{}", text(&o));
    let t0 = Instant::now();
    while cap.try_wait().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(20), "the capture did not get its 10 frames");
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = Command::new("tshark")
        .args(["-r", file, "-T", "fields", "-e", "icmp.type"])
        .output()
        .unwrap();
    let mut seen: Vec<String> =
        String::from_utf8_lossy(&o.stdout).lines().map(String::from).collect();
    seen.sort();
    assert_eq!(seen, ["0", "0", "0", "0", "0", "8", "8", "8", "8", "8"], "{}", text(&o));
    eventually(5, "back in the kernel after the capture", || kernel(&status()) == (true, true));
    // Machine b loses its controller (the agents' channel cut; the underlay still carries
    // UDP): found lost, its link is down on a, whose kernel then takes nothing more that
    // b's kernel sends — n1 sees none of n2's pings.
    ok("ip netns exec vk-b nft add table inet cut && ip netns exec vk-b nft add chain inet cut in '{ type filter hook input priority 0; }' && ip netns exec vk-b nft add rule inet cut in tcp dport 14790 drop");
    eventually(20, "machine b lost", || status()["machines"][1]["state"] == "lost");
    let n1_ip = status()["nodes"].as_array().unwrap().iter().find(|n| n["name"] == "n1").unwrap()
        ["ifaces"][0]["addrs"][0]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let dump = Command::new("nsenter")
        .args([
            "-t",
            &m.agent_pid(0).to_string(),
            "-m",
            VEMU,
            "exec",
            "--lab",
            "xk9",
            "n1",
            "--",
            "timeout",
            "4",
            "tcpdump",
            "-i",
            "eth0",
            "-c",
            "1",
            "-nn",
            "icmp",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    let o = m.exec(1, "xk9", "n2", &["ping", "-c", "3", "-i", "0.2", "-W", "1", &n1_ip]);
    assert!(
        !o.status.success(),
        "n2 reached n1 over a link that is down on n1's machine: {}",
        text(&o)
    );
    let heard = String::from_utf8_lossy(&dump.wait_with_output().unwrap().stdout).to_string();
    assert!(!heard.contains("ICMP"), "n1 heard n2 over a link down on its machine: {heard}");
    ok("ip netns exec vk-b nft delete table inet cut");
    let o = m.vemu(&["down", "--lab", "xk9"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!((m.leftovers(0), m.leftovers(1)), (String::new(), String::new()));
}

/// On an underlay of 1500-byte interfaces a frame of a 1500-byte interface does not fit
/// one VXLAN datagram, so such links go through the engines (which split frames); a link
/// whose `mtu` leaves room for the headers (1446 here) takes the kernel's tunnel.
#[test]
fn a_link_whose_mtu_leaves_room_takes_the_kernels_tunnel_over_a_1500_byte_underlay() {
    let _g = serial();
    let m = Machines::start("vn", 89, &["a", "b"]);
    let yaml = "name: xn\naddressing: {ipv6: none}\nmachines: {a: 10.89.0.1, b: 10.89.0.2}\nnodes:\n  n1: {machine: a}\n  n2: {machine: b}\n  n3: {machine: b}\nlinks:\n  - {endpoints: [n1, n2], mtu: 1446}\n  - {endpoints: [n1, n3]}\n";
    m.labs.lock().unwrap().push("xn".into());
    let up = m.vemu(&["up", write_scenario("xn", yaml).to_str().unwrap()]);
    assert!(up.status.success(), "{}", text(&up));
    let status = || m.status("xn");
    eventually(10, "n1:n2 through the kernel", || kernel_paths(&status(), "n1:n2") == (true, true));
    assert_eq!(
        kernel_paths(&status(), "n1:n3"),
        (false, false),
        "1500-byte frames in 1472-byte datagrams"
    );
    let ip = |n: &str| {
        status()["nodes"].as_array().unwrap().iter().find(|x| x["name"] == n).unwrap()["ifaces"][0]
            ["addrs"][0]
            .as_str()
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .to_string()
    };
    let (n2, n3) = (ip("n2"), ip("n3"));
    // Whole packets of each link's MTU cross, through the kernel and through the engines.
    let o = m.exec(0, "xn", "n1", &["ping", "-c", "5", "-i", "0.1", "-s", "1418", "-M", "do", &n2]);
    assert!(o.status.success(), "{}", text(&o));
    let o = m.exec(0, "xn", "n1", &["ping", "-c", "5", "-i", "0.1", "-s", "1472", "-M", "do", &n3]);
    assert!(o.status.success(), "{}", text(&o));
    let st = status();
    let l = st["links"].as_array().unwrap().iter().find(|l| l["name"] == "n1:n2").unwrap();
    assert!(l["forward"]["stats"]["rx_frames"].as_u64().unwrap() >= 5, "{l}");
    // `vemu status` says why n1:n3 is not the kernel's, and what would make it so.
    let o = m.vemu(&["status", "--lab", "xn"]);
    let notes: Vec<String> =
        text(&o).lines().filter(|l| l.starts_with("note: ")).map(String::from).collect();
    assert_eq!(notes.len(), 2, "{}", text(&o));
    assert!(
        notes.iter().all(|n| n.starts_with("note: n1:n3 ")
            && n.contains("datagrams of 1472 B")
            && n.contains("needs 1526 B")
            && n.contains("mtu: 1446 or less")),
        "{notes:?}"
    );
    m.down_leaving_nothing("xn");
}

/// Machines joined by an IPv6 underlay: the engines' tunnels carry a link with a delay
/// (full-size frames in pieces: 1452 bytes of UDP payload a datagram there), and a link
/// whose `mtu` leaves room for the headers goes through the kernel's VXLAN over IPv6.
#[test]
fn machines_on_an_ipv6_underlay_carry_links_through_the_engines_and_the_kernel() {
    let _g = serial();
    let m = Machines::start_v6("v6", 90, &["a", "b"]);
    let yaml = "name: x6\naddressing: {ipv6: none}\nmachines: {a: 'fd90::1', b: 'fd90::2'}\nnodes:\n  n1: {machine: a}\n  n2: {machine: b, run: ['iperf3 -s -D']}\nlinks:\n  - {endpoints: [n1, n2], delay: 1ms}\n  - {endpoints: [n1, n2], mtu: 1426}\n";
    let up = m.up("x6", yaml);
    assert!(up.status.success(), "{}", text(&up));
    let status = || m.status("x6");
    // (The links are n1:n2#1 and n1:n2#2: the kernel carries the second.)
    let kernel = |st: &serde_json::Value, i: usize| {
        kernel_paths(&serde_json::json!({"links": [st["links"][i]]}), &format!("n1:n2#{}", i + 1))
    };
    eventually(10, "the second link through the kernel", || kernel(&status(), 1) == (true, true));
    let st = status();
    assert_eq!(kernel(&st, 0), (false, false));
    assert_eq!(
        st["links"][0]["forward"]["stats"]["path_payload_bytes"], 1452,
        "{}",
        st["links"][0]
    );
    let dump = Command::new("ip")
        .args(["netns", "exec", "v6-ul", "tcpdump", "-i", "br0", "-l", "-nn", "ip6 and udp"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // Through the engines: the set delay, and whole 1500-byte packets in pieces.
    let rtt = min_rtt_ms(&m.exec(
        0,
        "x6",
        "n1",
        &["ping", "-c", "5", "-i", "0.2", "-s", "1472", "-M", "do", "10.0.0.2"],
    ));
    eprintln!("across the IPv6 underlay through the engines: min RTT {rtt:.3} ms");
    assert!((2.0..3.0).contains(&rtt), "min RTT {rtt} ms, 1 ms set each way");
    // Through the kernel: whole 1426-byte packets, and TCP.
    let o = m.exec(
        0,
        "x6",
        "n1",
        &["ping", "-c", "5", "-i", "0.1", "-s", "1398", "-M", "do", "10.0.0.6"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = m.exec(
        0,
        "x6",
        "n1",
        &["iperf3", "-c", "10.0.0.6", "-t", "2", "-J", "--connect-timeout", "3000"],
    );
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("iperf3: {}", text(&o)));
    assert!(v["end"]["sum_received"]["bits_per_second"].as_f64().unwrap() > 50e6, "{}", v["end"]);
    std::thread::sleep(Duration::from_millis(300));
    let _ = Command::new("kill").arg(dump.id().to_string()).status();
    let seen = String::from_utf8_lossy(&dump.wait_with_output().unwrap().stdout).to_string();
    let port = vemu_host::vxlan_port("x6");
    let vxlan = seen.lines().filter(|l| l.contains(&format!(".{port}: "))).count();
    assert!(
        vxlan > 100,
        "{vxlan} VXLAN datagrams over IPv6 to port {port}: {}",
        seen.lines().take(10).collect::<Vec<_>>().join("\n")
    );
    let st = status();
    assert!(
        st["links"][1]["forward"]["stats"]["rx_frames"].as_u64().unwrap() > 100,
        "{}",
        st["links"][1]
    );
    m.down_leaving_nothing("x6");
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

/// A Kubernetes API server (with etcd) in the controller's namespace of machines `m`,
/// on its loopback: the real kube-apiserver and etcd, built from their Go modules
/// (deploy/kubernetes/test-apiserver, into target/ by scripts/test.sh), with RBAC and
/// its admission plugins but without kubelet, scheduler or controller manager.
struct Kube {
    dir: std::path::PathBuf,
    ctl: String,
    procs: Vec<Child>,
}

impl Kube {
    fn start(m: &Machines) -> Kube {
        let bin = std::env::var("VEMU_TEST_APISERVER").unwrap_or_else(|_| {
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/vemu-test-apiserver").to_string()
        });
        assert!(std::path::Path::new(&bin).exists(), "{bin} is missing: build it with `go build -C deploy/kubernetes/test-apiserver -o $PWD/target/vemu-test-apiserver .` (scripts/test.sh does)");
        let dir = std::env::temp_dir().join(format!("vemu-{}-kube", m.tag));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("certs")).unwrap();
        let d = dir.display();
        ok(&format!("openssl genrsa -out {d}/sa.key 2048 2>/dev/null && openssl rsa -in {d}/sa.key -pubout -out {d}/sa.pub 2>/dev/null"));
        std::fs::write(dir.join("tokens.csv"), "admin-token-0123456789abcdef,admin,admin,system:masters\ntenant-token-0123456789abcdef,tenant,tenant\n").unwrap();
        let ctl = format!("{}-ctl", m.tag);
        let spawn = |args: &[&str], log: &str| {
            let log = std::fs::File::create(dir.join(log)).unwrap();
            Command::new("ip")
                .args(["netns", "exec", &ctl, &bin])
                .args(args)
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap()
        };
        let etcd = spawn(
            &[
                "etcd",
                "--data-dir",
                &format!("{d}/etcd"),
                "--listen-client-urls",
                "http://127.0.0.1:2379",
                "--advertise-client-urls",
                "http://127.0.0.1:2379",
                "--listen-peer-urls",
                "http://127.0.0.1:2380",
            ],
            "etcd.log",
        );
        let api = spawn(
            &[
                "apiserver",
                "--etcd-servers=http://127.0.0.1:2379",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                "--secure-port=6443",
                &format!("--cert-dir={d}/certs"),
                &format!("--token-auth-file={d}/tokens.csv"),
                "--authorization-mode=RBAC",
                "--service-cluster-ip-range=10.255.0.0/24",
                "--service-account-issuer=https://kubernetes.default.svc",
                &format!("--service-account-key-file={d}/sa.pub"),
                &format!("--service-account-signing-key-file={d}/sa.key"),
                // Its controller (which makes the "default" service accounts) does not run.
                "--disable-admission-plugins=ServiceAccount",
                "--allow-privileged=true",
            ],
            "apiserver.log",
        );
        let k = Kube { dir, ctl, procs: vec![etcd, api] };
        k.write_config("admin", "admin-token-0123456789abcdef");
        eventually(60, "the API server is ready", || {
            k.kubectl(&["get", "--raw", "/readyz"], "").status.success()
        });
        k
    }

    /// A kubeconfig for this API server as `user`, who shows `token`.
    fn write_config(&self, user: &str, token: &str) -> std::path::PathBuf {
        let path = self.dir.join(format!("{user}.kubeconfig"));
        let ca = self.dir.join("certs/apiserver.crt");
        let cfg = format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: t, cluster: {{server: 'https://127.0.0.1:6443', certificate-authority: {}}}}}]\nusers: [{{name: {user}, user: {{token: '{token}'}}}}]\ncontexts: [{{name: t, context: {{cluster: t, user: {user}}}}}]\ncurrent-context: t\n",
            ca.display()
        );
        std::fs::write(&path, cfg).unwrap();
        path
    }

    /// `kubectl ARGS` as the cluster's administrator, `stdin` on its input.
    fn kubectl(&self, args: &[&str], stdin: &str) -> Output {
        self.kubectl_as("admin", args, stdin)
    }

    fn kubectl_as(&self, user: &str, args: &[&str], stdin: &str) -> Output {
        use std::io::Write;
        let mut c = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.ctl,
                "kubectl",
                "--kubeconfig",
                &self.dir.join(format!("{user}.kubeconfig")).to_string_lossy(),
            ])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        c.wait_with_output().unwrap()
    }

    fn must(&self, args: &[&str], stdin: &str) -> String {
        let o = self.kubectl(args, stdin);
        assert!(o.status.success(), "kubectl {args:?}: {}", text(&o));
        String::from_utf8_lossy(&o.stdout).to_string()
    }

    /// Pod `name` in namespace vemu from a workload's pod `template` (on Kubernetes node
    /// `node`, if given), as the API server made it.
    fn create_pod(
        &self,
        template: &serde_json::Value,
        name: &str,
        node: Option<&str>,
    ) -> serde_json::Value {
        let mut spec = template["spec"].clone();
        if let Some(node) = node {
            spec["nodeName"] = node.into();
        }
        let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "vemu", "labels": template["metadata"]["labels"]}, "spec": spec});
        serde_json::from_str(&self.must(&["create", "-f", "-", "-o", "json"], &pod.to_string()))
            .unwrap()
    }

    /// What a kubelet reports of pod `name` (namespace vemu) once its container runs and
    /// its readiness probe passes: running and ready, at `ip`.
    fn set_ready(&self, name: &str, ip: &str) {
        let status = serde_json::json!({"status": {"phase": "Running", "hostIP": ip, "podIP": ip, "conditions": [{"type": "Ready", "status": "True"}]}});
        self.must(
            &[
                "-n",
                "vemu",
                "patch",
                "pod",
                name,
                "--subresource=status",
                "--type=merge",
                "-p",
                &status.to_string(),
            ],
            "",
        );
    }

    /// What a kubelet would run for `pod`'s (first) container on the machine of address
    /// `host_ip`, as a shell command for a mount namespace of its own: its command and
    /// arguments with `$(VAR)` from its environment (values and the fields `status.hostIP`,
    /// `metadata.namespace`, `metadata.name`, `spec.nodeName`); its volumes: secrets (the
    /// keys as files, with the volume's mode), emptyDirs (a directory of the test's, kept
    /// while the pod lives: `fresh` starts them empty), hostPaths (the machine's own path,
    /// asserted to be the same in the container); the service account's token, CA and
    /// namespace in /run/secrets/kubernetes.io/serviceaccount with KUBERNETES_SERVICE_HOST
    /// and _PORT, as in-cluster clients read them (the API server's address, 127.0.0.1:
    /// no kube-proxy here). The image's programs are the binaries under test (on PATH). A
    /// container without the machine's /run gets its own; /etc and /var/log are overlaid,
    /// so that what the container writes there never reaches the real machine's.
    fn container_command(&self, pod: &serde_json::Value, host_ip: &str, fresh: bool) -> String {
        let c = &pod["spec"]["containers"][0];
        let (name, ns) = (
            pod["metadata"]["name"].as_str().unwrap(),
            pod["metadata"]["namespace"].as_str().unwrap(),
        );
        let mut env = vec![(
            "PATH".to_string(),
            format!(
                "{}:/usr/sbin:/usr/bin:/sbin:/bin",
                std::path::Path::new(VEMU).parent().unwrap().display()
            ),
        )];
        for e in c["env"].as_array().into_iter().flatten() {
            let v = match (&e["value"], e["valueFrom"]["fieldRef"]["fieldPath"].as_str()) {
                (serde_json::Value::String(v), _) => v.clone(),
                (_, Some("status.hostIP")) => host_ip.to_string(),
                (_, Some("metadata.namespace")) => ns.to_string(),
                (_, Some("metadata.name")) => name.to_string(),
                (_, Some("spec.nodeName")) => {
                    pod["spec"]["nodeName"].as_str().unwrap_or_default().to_string()
                }
                _ => panic!("the stand-in kubelet cannot fill {e}"),
            };
            env.push((e["name"].as_str().unwrap().to_string(), v));
        }
        let pod_dir = self.dir.join(name);
        if fresh {
            let _ = std::fs::remove_dir_all(&pod_dir);
        }
        for d in ["etc", "etc-work", "log", "log-work"] {
            let _ = std::fs::remove_dir_all(pod_dir.join(d));
            std::fs::create_dir_all(pod_dir.join(d)).unwrap();
        }
        let volumes = pod["spec"]["volumes"].as_array().cloned().unwrap_or_default();
        let mounts = c["volumeMounts"].as_array().cloned().unwrap_or_default();
        let machines = |base: &str| {
            mounts.iter().any(|vm| {
                vm["mountPath"].as_str().unwrap().starts_with(base)
                    && volumes.iter().any(|v| v["name"] == vm["name"] && v["hostPath"].is_object())
            })
        };
        let mut script = "true".to_string();
        for (base, upper) in [("/etc", "etc"), ("/var/log", "log")] {
            if !machines(base) {
                script += &format!(" && mount -t overlay overlay -o lowerdir={base},upperdir={0}/{upper},workdir={0}/{upper}-work {base}", pod_dir.display());
            }
        }
        if !machines("/run/") {
            script += " && mount -t tmpfs tmpfs /run";
        }
        let files = |mp: &str, data: &[(String, String)], mode: u64| {
            let mut s = format!(" && mkdir -p {mp} && mount -t tmpfs tmpfs {mp}");
            for (key, b64) in data {
                s += &format!(
                    " && echo {b64} | base64 -d > {mp}/{key} && chmod {mode:o} {mp}/{key}"
                );
            }
            s
        };
        for vm in &mounts {
            let mp = vm["mountPath"].as_str().unwrap();
            let vol = volumes.iter().find(|v| v["name"] == vm["name"]).unwrap();
            if let Some(path) = vol["hostPath"]["path"].as_str() {
                assert_eq!(path, mp, "a hostPath mounted elsewhere in the container: the stand-in kubelet does not do that");
            } else if let Some(secret) = vol["secret"]["secretName"].as_str() {
                let secret: serde_json::Value = serde_json::from_str(
                    &self.must(&["-n", ns, "get", "secret", secret, "-o", "json"], ""),
                )
                .unwrap();
                let data: Vec<(String, String)> = secret["data"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                    .collect();
                script += &files(mp, &data, vol["secret"]["defaultMode"].as_u64().unwrap_or(0o644));
            } else if vol["emptyDir"].is_object() {
                let dir = pod_dir.join(format!("volume-{}", vol["name"].as_str().unwrap()));
                std::fs::create_dir_all(&dir).unwrap();
                script += &format!(" && mkdir -p {mp} && mount --bind {} {mp}", dir.display());
            } else {
                panic!("the stand-in kubelet cannot mount {vol}");
            }
        }
        if let Some(sa) = pod["spec"]["serviceAccountName"]
            .as_str()
            .filter(|_| pod["spec"]["automountServiceAccountToken"] != false)
        {
            let uid = pod["metadata"]["uid"].as_str().unwrap();
            let token = self.must(
                &[
                    "-n",
                    ns,
                    "create",
                    "token",
                    sa,
                    "--duration=2h",
                    "--bound-object-kind=Pod",
                    &format!("--bound-object-name={name}"),
                    &format!("--bound-object-uid={uid}"),
                ],
                "",
            );
            let b64 = |t: &[u8]| {
                use std::io::Write;
                let mut c = Command::new("base64")
                    .args(["-w", "0"])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap();
                c.stdin.take().unwrap().write_all(t).unwrap();
                String::from_utf8(c.wait_with_output().unwrap().stdout).unwrap()
            };
            let ca = std::fs::read(self.dir.join("certs/apiserver.crt")).unwrap();
            let data = [
                ("token".to_string(), b64(token.trim().as_bytes())),
                ("ca.crt".to_string(), b64(&ca)),
                ("namespace".to_string(), b64(ns.as_bytes())),
            ];
            script += &files("/run/secrets/kubernetes.io/serviceaccount", &data, 0o644);
            env.push(("KUBERNETES_SERVICE_HOST".into(), "127.0.0.1".into()));
            env.push(("KUBERNETES_SERVICE_PORT".into(), "6443".into()));
        }
        let expand =
            |a: &str| env.iter().fold(a.to_string(), |a, (n, v)| a.replace(&format!("$({n})"), v));
        let argv: Vec<String> = c["command"]
            .as_array()
            .into_iter()
            .chain(c["args"].as_array())
            .flatten()
            .map(|a| format!("'{}'", expand(a.as_str().unwrap())))
            .collect();
        let env: Vec<String> = env.iter().map(|(n, v)| format!("{n}='{v}'")).collect();
        format!("{script} && exec env -i {} {}", env.join(" "), argv.join(" "))
    }
}

impl Drop for Kube {
    fn drop(&mut self) {
        for p in &mut self.procs {
            let _ = p.kill();
            let _ = p.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The operator of docs/kubernetes.md against a real Kubernetes API server: the
/// packaging (`kubectl kustomize deploy/kubernetes`) applied as is; the agents' pods made
/// from its DaemonSet's template on two machines and the operator's pod from its
/// Deployment's, each run as the pod says by the test, which plays their kubelet
/// ([`Kube::container_command`]: command, environment, secret and emptyDir volumes, the
/// service account's token for the operator's in-cluster configuration, so that RBAC
/// judges operator.yaml's roles; the operator's container in a PID namespace that dies
/// with it). A VemuLab waits for a node without an agent; the repository's example comes
/// up across both machines with its delays and is kept; its controller lost with the
/// operator's container is taken over, by the restarted container (its /run/vemu kept)
/// and by a new pod (from the agents); a changed spec brings it up anew; deleting it
/// takes it down everywhere, leaving nothing.
#[test]
fn the_operator_brings_a_vemulab_up_across_machines_and_down_when_it_is_deleted() {
    let _g = serial();
    let mut m = Machines::start_bare("vk", 91, &["w1", "w2"]);
    let k = Kube::start(&m);
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let rendered = Command::new("kubectl")
        .args(["kustomize", &format!("{root}/deploy/kubernetes")])
        .output()
        .unwrap();
    assert!(rendered.status.success(), "{}", text(&rendered));
    k.must(&["apply", "-f", "-"], &String::from_utf8_lossy(&rendered.stdout));
    k.must(
        &[
            "-n",
            "vemu",
            "create",
            "secret",
            "generic",
            "vemu-agent-token",
            &format!("--from-file=token={}", m.token_file.display()),
        ],
        "",
    );
    let template = |kind: &str, name: &str| {
        serde_json::from_str::<serde_json::Value>(
            &k.must(&["-n", "vemu", "get", kind, name, "-o", "json"], ""),
        )
        .unwrap()["spec"]["template"]
            .clone()
    };
    let agent = template("daemonset", "vemu-agent");
    for (i, node) in m.names.clone().iter().enumerate() {
        let pod = k.create_pod(&agent, &format!("vemu-agent-{node}"), Some(node));
        let cmd = k.container_command(&pod, &m.address(i), true);
        m.spawn_agent(i, &cmd);
    }
    // Their readiness probe (a TCP port), then what their kubelet would report.
    m.wait_for_agents();
    for (i, node) in m.names.iter().enumerate() {
        k.set_ready(&format!("vemu-agent-{node}"), &m.address(i));
    }

    // The operator's pod, from its Deployment's template, in the controller's namespace
    // (the pod network): a container of its own (its PID namespace dies with it, as the
    // labs' controllers it started do), in-cluster configuration from its service
    // account, whose roles RBAC applies.
    let operator = template("deployment", "vemu-operator");
    struct Container(Child);
    impl Drop for Container {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let log = k.dir.join("operator.log");
    let run_pod = |name: &str, fresh: bool| {
        let pod = match fresh {
            true => k.create_pod(&operator, name, None),
            false => {
                serde_json::from_str(&k.must(&["-n", "vemu", "get", "pod", name, "-o", "json"], ""))
                    .unwrap()
            }
        };
        let script = k.container_command(&pod, "10.91.0.254", fresh);
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&log).unwrap();
        let c = Command::new("ip")
            .args([
                "netns",
                "exec",
                &k.ctl,
                "unshare",
                "-m",
                "-p",
                "-f",
                "--kill-child",
                "--mount-proc",
                "--propagation",
                "private",
                "sh",
                "-c",
                &script,
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        k.set_ready(name, "10.91.0.254");
        Container(c)
    };
    // `kubectl exec POD -- vemu ARGS`: in the container's namespaces.
    let in_pod = |c: &Container, args: &[&str]| -> Output {
        let init = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", c.0.id()))
            .unwrap_or_default();
        let init = init.split_whitespace().next().unwrap_or("0").to_string();
        Command::new("nsenter")
            .args(["-t", &init, "-m", "-n", "-p", VEMU])
            .args(args)
            .output()
            .unwrap()
    };
    let mut pod = run_pod("vemu-operator-1", true);
    let mut pod_name = "vemu-operator-1";
    let lab_status = |name: &str| -> serde_json::Value {
        let o = k.kubectl(&["-n", "default", "get", "vemulab", name, "-o", "json"], "");
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap_or_default()["status"].clone()
    };
    let oplog = || std::fs::read_to_string(&log).unwrap_or_default();

    // A node without an agent: the lab waits, saying so.
    let waiting = "apiVersion: vemu.dev/v1alpha1\nkind: VemuLab\nmetadata: {name: waits, namespace: default}\nspec:\n  scenario: 'nodes: {a: {}}'\n  nodes: [w1, w3]\n";
    k.must(&["apply", "-f", "-"], waiting);
    eventually(30, "the VemuLab naming w3 is pending", || {
        lab_status("waits")["phase"] == "Pending"
    });
    assert_eq!(lab_status("waits")["message"], "node 'w3' has no ready vemu agent", "{}", oplog());
    k.must(&["-n", "default", "delete", "vemulab", "waits", "--timeout=30s"], "");

    // Issue 39: a tenant allowed to make VemuLabs in its namespace, and nothing else.
    k.must(&["create", "namespace", "team"], "");
    k.must(
        &[
            "-n",
            "team",
            "create",
            "role",
            "vemulabs",
            "--verb=get,list,watch,create,update,patch,delete",
            "--resource=vemulabs.vemu.dev",
        ],
        "",
    );
    k.must(
        &["-n", "team", "create", "rolebinding", "tenant", "--role=vemulabs", "--user=tenant"],
        "",
    );
    k.write_config("tenant", "tenant-token-0123456789abcdef");
    let policy = "apiVersion: vemu.dev/v1alpha1\nkind: VemuLabPolicy\nmetadata: {name: team-files}\nspec: {namespaces: [team], allow: [from]}\n";
    let o = k.kubectl_as("tenant", &["apply", "-f", "-"], policy);
    assert!(
        !o.status.success() && text(&o).contains("forbidden"),
        "a tenant cannot allow itself: {}",
        text(&o)
    );
    // Each feature that reads the machine's files or reaches beyond the lab's nodes: the
    // VemuLab is refused, the condition naming the field; nothing runs.
    let refused = [
        ("token", "nodes:\n  a:\n    files: {/etc/t: {from: /etc/vemu/agent-token/token}}\n", "nodes.a.files./etc/t.from"),
        ("host", "nodes:\n  h: {kind: host}\n  a: {}\nlinks: [{endpoints: [h, a]}]\n", "nodes.h.kind"),
        ("nic", "nodes:\n  x: {kind: external, iface: eth0}\n  a: {}\nlinks: [{endpoints: [x, a]}]\n", "nodes.x.kind"),
        ("divert", "nodes: {a: {}}\ndivert: [{match: tcp dport 80, delay: 5ms}]\n", "divert"),
        ("trace", "nodes: {a: {}, b: {}}\nsegments:\n  r: {kind: wireless, members: [a, b], trace: /etc/vemu/agent-token/token}\n", "segments.r.trace"),
        ("pids", "nodes:\n  a: {isolation: none, run: ['touch /tmp/vemu-tenant-ran']}\n", "nodes.a.isolation"),
    ];
    let vemulab = |name: &str, scenario: &str| {
        serde_json::json!({"apiVersion": "vemu.dev/v1alpha1", "kind": "VemuLab", "metadata": {"name": name, "namespace": "team"}, "spec": {"scenario": scenario}}).to_string()
    };
    let team_status = |name: &str| -> serde_json::Value {
        let o = k.kubectl_as("tenant", &["-n", "team", "get", "vemulab", name, "-o", "json"], "");
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap_or_default()["status"].clone()
    };
    for (name, scenario, _) in refused {
        let o = k.kubectl_as("tenant", &["apply", "-f", "-"], &vemulab(name, scenario));
        assert!(o.status.success(), "{}", text(&o));
    }
    for (name, _, field) in refused {
        eventually(60, &format!("VemuLab team/{name} is refused"), || {
            team_status(name)["phase"] == "Failed"
        });
        let st = team_status(name);
        let c = &st["conditions"][0];
        assert_eq!(
            (c["type"].as_str(), c["status"].as_str(), c["reason"].as_str()),
            (Some("Admitted"), Some("False"), Some("Refused")),
            "{st}"
        );
        let msg = c["message"].as_str().unwrap();
        assert!(
            msg.contains(&format!("{field} (line ")) && msg.contains("refused in a tenant's lab"),
            "{name}: {msg}"
        );
        assert_eq!(st["message"].as_str(), Some(msg), "{st}");
        assert!(!msg.contains("cannot read"), "nothing refused is read: {msg}");
    }
    let ls = in_pod(&pod, &["ls"]);
    assert!(!text(&ls).contains("team_"), "a refused VemuLab runs nothing: {}", text(&ls));
    for i in 0..2 {
        assert_eq!(m.leftovers(i), "", "machine {i} holds something of a refused VemuLab");
    }
    assert!(!std::path::Path::new("/tmp/vemu-tenant-ran").exists());
    // The administrator allows `from` for the team: that VemuLab (looked at again) comes
    // up, with the file where its operator reads it (its pod's own files).
    k.must(&["apply", "-f", "-"], policy);
    k.must(
        &[
            "-n",
            "team",
            "delete",
            "vemulab",
            "host",
            "nic",
            "divert",
            "trace",
            "pids",
            "--timeout=30s",
        ],
        "",
    );
    let os_release = "nodes:\n  a:\n    files: {/etc/os: {from: /etc/os-release}}\n";
    assert!(k
        .kubectl_as("tenant", &["apply", "-f", "-"], &vemulab("token", os_release))
        .status
        .success());
    eventually(90, "the allowed VemuLab is up", || {
        team_status("token")["phase"] == "Up"
            || team_status("token")["message"].as_str().is_some_and(|m| m.contains("vemu"))
    });
    let st = team_status("token");
    assert_eq!(st["phase"], "Up", "{st} {}", oplog());
    assert_eq!(
        (st["conditions"][0]["status"].as_str(), st["conditions"][0]["reason"].as_str()),
        (Some("True"), Some("Allowed")),
        "{st}"
    );
    let o =
        in_pod(&pod, &["exec", "--lab", "team_token", "a", "--", "grep", "-c", "^ID=", "/etc/os"]);
    assert_eq!(text(&o).trim(), "1", "the node holds the allowed file: {}", text(&o));
    // Its node runs on an agent's machine, confined: the agent's token (its pod's
    // /etc/vemu/agent-token) is not there, and nothing can be unmounted to find it.
    let o = in_pod(&pod, &["exec", "--lab", "team_token", "a", "--", "sh", "-c", "cat /etc/vemu/agent-token/token; umount -l /etc && echo UNMOUNTED; ls -A /etc/vemu | wc -l"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "0", "{}", text(&o));
    k.must(&["-n", "team", "delete", "vemulab", "token", "--timeout=60s"], "");
    k.must(&["delete", "vemulabpolicy", "team-files"], "");

    // The repository's example: a chain of three nodes, 10 ms a link, over both machines.
    let example =
        std::fs::read_to_string(format!("{root}/deploy/kubernetes/examples/vemulab-chain.yaml"))
            .unwrap();
    k.must(&["apply", "-f", "-"], &example);
    eventually(90, "the example VemuLab is up", || {
        lab_status("chain")["phase"] == "Up" || lab_status("chain")["phase"] == "Failed"
    });
    let st = lab_status("chain");
    assert_eq!(
        (st["phase"].as_str(), st["lab"].as_str(), st["machines"].as_str()),
        (Some("Up"), Some("default_chain"), Some("w1=10.91.0.1,w2=10.91.0.2")),
        "{st} {}",
        oplog()
    );
    let table = k.must(&["get", "vemulabs", "-A"], "");
    assert!(
        table.lines().any(|l| l.split_whitespace().collect::<Vec<_>>()
            == ["default", "chain", "Up", "default_chain", "w1=10.91.0.1,w2=10.91.0.2"]),
        "{table}"
    );
    let vs: serde_json::Value = serde_json::from_slice(
        &in_pod(&pod, &["status", "--lab", "default_chain", "--json"]).stdout,
    )
    .unwrap_or_default();
    let machines_used: std::collections::BTreeSet<String> = vs["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["machine"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(machines_used.len(), 2, "the lab spans both machines: {vs}");
    let rtt = |pod: &Container| {
        min_rtt_ms(&in_pod(
            pod,
            &[
                "exec",
                "--lab",
                "default_chain",
                "n1",
                "--",
                "ping",
                "-c",
                "5",
                "-i",
                "0.2",
                "-W",
                "2",
                "n3",
            ],
        ))
    };
    let r = rtt(&pod);
    assert!((40.0..42.0).contains(&r), "RTT {r} ms for 2 x 10 ms set");
    // Looked at again (its status written), the lab is kept.
    eventually(60, "the operator keeps the running lab", || {
        oplog().contains("default/chain: up as specified, kept")
    });
    let controller_pid = |pod: &str| {
        std::fs::read_to_string(k.dir.join(pod).join("volume-run-vemu/default_chain/daemon.pid"))
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    assert!(
        !controller_pid(pod_name).is_empty(),
        "the lab's controller keeps its state in the pod's /run/vemu"
    );

    // The operator's container restarts: the lab's controller dies with it; the pod's
    // /run/vemu (an emptyDir) is kept. The new container takes the lab over from it.
    drop(pod);
    pod = run_pod(pod_name, false);
    eventually(60, "the lab has a controller again", || {
        lab_status("chain")["message"].as_str().unwrap_or_default().contains("served again")
            && in_pod(&pod, &["status", "--lab", "default_chain"]).status.success()
    });
    assert_eq!(lab_status("chain")["phase"], "Up");
    let r = rtt(&pod);
    assert!((40.0..42.0).contains(&r), "RTT {r} ms after the takeover");

    // A new pod (the old one deleted): its /run is empty. It takes the lab over from the
    // state the controller handed to the agents.
    drop(pod);
    k.must(&["-n", "vemu", "delete", "pod", pod_name, "--wait=false"], "");
    pod_name = "vemu-operator-2";
    pod = run_pod(pod_name, true);
    eventually(60, "the lab has a controller in the new pod", || {
        lab_status("chain")["message"] == "taken over from its agents"
            && in_pod(&pod, &["status", "--lab", "default_chain"]).status.success()
    });
    assert_eq!(lab_status("chain")["phase"], "Up");
    let r = rtt(&pod);
    assert!((40.0..42.0).contains(&r), "RTT {r} ms after the takeover from the agents");

    // A changed spec: the lab comes up anew with it.
    let before = controller_pid(pod_name);
    k.must(&["apply", "-f", "-"], &example.replace("delay: 10ms", "delay: 5ms"));
    eventually(90, "the changed lab is up", || {
        let p = controller_pid(pod_name);
        !p.is_empty()
            && p != before
            && lab_status("chain")["phase"] == "Up"
            && in_pod(&pod, &["status", "--lab", "default_chain"]).status.success()
    });
    let r = rtt(&pod);
    assert!((20.0..22.0).contains(&r), "RTT {r} ms for 2 x 5 ms set");

    // Deleted: the finalizer holds the resource until the lab is down on every machine.
    k.must(&["-n", "default", "delete", "vemulab", "chain", "--timeout=60s"], "");
    let gone = k.kubectl(&["-n", "default", "get", "vemulab", "chain"], "");
    assert!(!gone.status.success() && text(&gone).contains("not found"), "{}", text(&gone));
    assert!(controller_pid(pod_name).is_empty(), "{}", oplog());
    for i in 0..2 {
        assert_eq!(m.leftovers(i), "", "machine {i} keeps something after the VemuLab went");
    }
    drop(pod);
    assert!(!oplog().contains("panicked"), "{}", oplog());
}

/// The Helm chart installed, upgraded and uninstalled by a real `helm` on a real API
/// server (see [`Kube`]): every object it renders is accepted (the API server's own
/// validation and admission, Pod Security among them), the operator's service account may
/// do what the operator does and no more, `operator.enabled=false` removes the operator,
/// and uninstalling removes everything but the resource definition (Helm's rule for CRDs).
#[test]
fn the_helm_chart_installs_upgrades_and_uninstalls_on_a_real_api_server() {
    let _g = serial();
    let m = Machines::start_bare("vh", 92, &[]);
    let k = Kube::start(&m);
    let helm_bin = ["helm", "/root/.local/bin/helm"]
        .into_iter()
        .find(|h| Command::new(h).arg("version").output().is_ok_and(|o| o.status.success()));
    let helm_bin = helm_bin
        .expect("helm is not installed (scripts/setup.sh builds it into ~/.local/bin with Go)");
    let chart = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/helm/vemu");
    let helm = |args: &[&str]| -> String {
        let o = Command::new("ip")
            .args([
                "netns",
                "exec",
                &k.ctl,
                helm_bin,
                "--kubeconfig",
                &k.dir.join("admin.kubeconfig").to_string_lossy(),
            ])
            .args(args)
            .env("HELM_CACHE_HOME", k.dir.join("helm/cache"))
            .env("HELM_CONFIG_HOME", k.dir.join("helm/config"))
            .env("HELM_DATA_HOME", k.dir.join("helm/data"))
            .output()
            .unwrap();
        assert!(o.status.success(), "helm {args:?}: {}", text(&o));
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    k.must(&["create", "namespace", "vemu"], "");
    k.must(&["label", "namespace", "vemu", "pod-security.kubernetes.io/enforce=privileged"], "");
    helm(&[
        "install",
        "vemu",
        chart,
        "-n",
        "vemu",
        "--set",
        "image.repository=registry.example.org/vemu",
    ]);
    let manifest = helm(&["get", "manifest", "vemu", "-n", "vemu"]);
    // Every object the release holds is there, and the CRD serves its resource.
    k.must(&["get", "-f", "-"], &manifest);
    k.must(&["wait", "--for=condition=Established", "crd/vemulabs.vemu.dev", "--timeout=30s"], "");
    let kinds = k.must(
        &["get", "-f", "-", "-o", "jsonpath={range .items[*]}{.kind}/{.metadata.name} {end}"],
        &manifest,
    );
    for want in [
        "ServiceAccount/vemu-operator",
        "DaemonSet/vemu-agent",
        "Deployment/vemu-operator",
        "ClusterRole/vemu-operator-vemu",
        "ClusterRoleBinding/vemu-operator-vemu",
    ] {
        assert!(kinds.split_whitespace().any(|x| x == want), "{want} not in the release: {kinds}");
    }
    // What the operator may do (main.rs): watch and patch VemuLabs and their status
    // everywhere, list the agents' pods in its own namespace; nothing else.
    let can = |verb: &str, what: &str, ns: &str| {
        let o = k.kubectl(
            &[
                "auth",
                "can-i",
                verb,
                what,
                "-n",
                ns,
                "--as=system:serviceaccount:vemu:vemu-operator",
            ],
            "",
        );
        String::from_utf8_lossy(&o.stdout).trim() == "yes"
    };
    for (verb, what, ns) in [
        ("watch", "vemulabs.vemu.dev", "default"),
        ("patch", "vemulabs.vemu.dev", "labs"),
        ("patch", "vemulabs.vemu.dev/status", "default"),
        ("list", "pods", "vemu"),
        ("watch", "vemulabpolicies.vemu.dev", ""),
    ] {
        assert!(can(verb, what, ns), "the operator may not {verb} {what} in {ns}");
    }
    for (verb, what, ns) in [
        ("list", "pods", "default"),
        ("delete", "pods", "vemu"),
        ("get", "secrets", "vemu"),
        ("delete", "vemulabs.vemu.dev", "default"),
        ("create", "vemulabpolicies.vemu.dev", ""),
    ] {
        assert!(!can(verb, what, ns), "the operator may {verb} {what} in {ns}");
    }
    // The example VemuLab is a valid resource of the installed CRD.
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/kubernetes/examples/vemulab-chain.yaml"
    ))
    .unwrap();
    k.must(&["apply", "--dry-run=server", "-f", "-"], &example);
    let bad = k.kubectl(
        &["apply", "--dry-run=server", "-f", "-"],
        &example.replace("scenario: |", "scenarios: |"),
    );
    assert!(
        !bad.status.success() && text(&bad).contains(r#"unknown field "spec.scenarios""#),
        "{}",
        text(&bad)
    );

    helm(&["upgrade", "vemu", chart, "-n", "vemu", "--set", "operator.enabled=false"]);
    let o = k.kubectl(&["-n", "vemu", "get", "deployment", "vemu-operator"], "");
    assert!(!o.status.success() && text(&o).contains("not found"), "{}", text(&o));
    k.must(&["-n", "vemu", "get", "daemonset", "vemu-agent"], "");

    helm(&["uninstall", "vemu", "-n", "vemu"]);
    let o = k.kubectl(&["-n", "vemu", "get", "daemonset", "vemu-agent"], "");
    assert!(!o.status.success() && text(&o).contains("not found"), "{}", text(&o));
    k.must(&["get", "crd", "vemulabs.vemu.dev"], "");
}

/// The tunnels of a shard to one far socket share its path: one of them probes it (round
/// trip, path MTU) and the others take its findings. Four links between two machines on
/// this computer's shards: the probes on the underlay carry one VNI per pair of shard
/// sockets (2 here), not one per link, and every direction still knows the underlay's
/// delay and datagram size.
#[test]
fn links_to_one_machine_share_their_path_probes() {
    let _g = serial();
    let m = Machines::start("vs", 93, &["a", "b"]);
    let yaml = "name: xs\naddressing: {ipv6: none}\nmachines: {a: 10.93.0.1, b: 10.93.0.2}\nnodes: {n1: {machine: a}, n2: {machine: b}}\nlinks:\n  - {endpoints: [n1, n2]}\n  - {endpoints: [n1, n2]}\n  - {endpoints: [n1, n2]}\n  - {endpoints: [n1, n2]}\n";
    let o = m.up("xs", yaml);
    assert!(o.status.success(), "{}", text(&o));
    // Probes (VXLAN flags byte 8, then 1) machine a sends, for 2 s: their VNIs.
    let dump = Command::new("ip")
        .args([
            "netns",
            "exec",
            "vs-ul",
            "timeout",
            "2",
            "tcpdump",
            "-i",
            "vsu0",
            "-l",
            "-nn",
            "-x",
            "udp and src host 10.93.0.1 and udp[8] = 8 and udp[9] = 1",
        ])
        .output()
        .unwrap();
    let mut vnis = std::collections::BTreeSet::new();
    let mut bytes: Vec<u8> = Vec::new();
    let mut flush = |bytes: &mut Vec<u8>| {
        // IPv4 header (20), UDP (8), then VXLAN: the VNI in its bytes 4-6.
        if bytes.len() >= 35 {
            vnis.insert(u32::from_be_bytes([0, bytes[32], bytes[33], bytes[34]]));
        }
        bytes.clear();
    };
    for line in String::from_utf8_lossy(&dump.stdout).lines() {
        match line.trim_start().strip_prefix("0x") {
            Some(rest) => bytes.extend(rest.split_whitespace().skip(1).flat_map(|w| {
                (0..w.len() / 2).map(move |i| u8::from_str_radix(&w[2 * i..2 * i + 2], 16).unwrap())
            })),
            None => flush(&mut bytes),
        }
    }
    flush(&mut bytes);
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    assert_eq!(
        vnis.len(),
        cores.min(4),
        "probe VNIs from machine a: {vnis:?} ({cores} cores): {}",
        String::from_utf8_lossy(&dump.stdout).lines().take(20).collect::<Vec<_>>().join("\n")
    );
    let st = m.status("xs");
    for l in st["links"].as_array().unwrap() {
        for dir in ["forward", "reverse"] {
            let s = &l[dir]["stats"];
            assert!(
                s["transit_ns"].as_u64().unwrap_or(0) > 0
                    && s["path_payload_bytes"].as_u64().unwrap_or(0) >= 1472,
                "{} {dir}: {s}",
                l["name"]
            );
        }
    }
    // And the links carry traffic, each its own.
    for k in 0..4 {
        let ip = st["nodes"].as_array().unwrap().iter().find(|n| n["name"] == "n2").unwrap()
            ["ifaces"][k]["addrs"][0]
            .as_str()
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .to_string();
        let o =
            m.exec(0, "xs", "n1", &["ping", "-c", "2", "-i", "0.2", "-W", "2", "-s", "1472", &ip]);
        assert_eq!(parse_ping(&text(&o)).1, 2, "link {k}: {}", text(&o));
    }
    m.down_leaving_nothing("xs");
}
