//! Helpers for integration tests: real labs (root, namespaces), real ping and iperf3.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};

static SERIAL: Mutex<()> = Mutex::new(());

/// Labs share two cores; timing tests must not run side by side.
pub fn serial() -> MutexGuard<'static, ()> {
    assert!(
        unsafe { libc_geteuid() } == 0,
        "integration tests create namespaces and must run as root"
    );
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

pub fn vemu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vemu")).args(args).output().expect("running vemu")
}

pub fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

pub fn write_scenario(name: &str, yaml: &str) -> PathBuf {
    let dir = std::env::temp_dir().join("vemu-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("{name}.yaml"));
    std::fs::write(&p, yaml).unwrap();
    p
}

/// Network namespaces of a lab, as `ip netns` sees them.
pub fn lab_netns(lab: &str) -> Vec<String> {
    let prefix = format!("vemu-{lab}.");
    std::fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// A running lab, taken down (and checked to be gone) when dropped.
pub struct Lab {
    pub name: String,
}

impl Lab {
    pub fn up(name: &str, yaml: &str) -> Lab {
        Lab::up_env(name, yaml, &[])
    }

    /// Bring a lab up with these variables in `vemu up`'s environment.
    pub fn up_env(name: &str, yaml: &str, env: &[(&str, &str)]) -> Lab {
        Lab::up_with(name, yaml, env, &[])
    }

    /// [`Lab::up_env`], with more arguments for `vemu up`.
    pub fn up_with(name: &str, yaml: &str, env: &[(&str, &str)], args: &[&str]) -> Lab {
        let path = write_scenario(name, yaml);
        let o = Command::new(env!("CARGO_BIN_EXE_vemu"))
            .args(["up", path.to_str().unwrap(), "--name", name])
            .args(args)
            .envs(env.iter().copied())
            .output()
            .expect("running vemu");
        assert!(o.status.success(), "vemu up failed: {}", text(&o));
        Lab { name: name.to_string() }
    }

    /// Bring up a scenario file of the repository (e.g. `examples/x.yaml`) as lab `name`.
    pub fn up_file(name: &str, path: &str) -> Lab {
        let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path);
        let o = vemu(&["up", full.to_str().unwrap(), "--name", name]);
        assert!(o.status.success(), "vemu up failed: {}", text(&o));
        Lab { name: name.to_string() }
    }

    /// Run a shell command line in a node; (exit code, stdout).
    pub fn sh(&self, node: &str, script: &str) -> (i32, String) {
        let o = self.exec(node, &["sh", "-c", script]);
        (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into_owned())
    }

    /// Wait until every address answers one ping from `node` (or `timeout_s` passes);
    /// returns the addresses that still do not answer.
    pub fn wait_reachable(&self, node: &str, addrs: &[String], timeout_s: f64) -> Vec<String> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs_f64(timeout_s);
        loop {
            let script: String = addrs
                .iter()
                .map(|a| format!("(ping -c1 -W1 -q {a} >/dev/null 2>&1 || echo {a}) & "))
                .collect::<String>()
                + "wait";
            let (_, out) = self.sh(node, &script);
            let missing: Vec<String> = out.split_whitespace().map(String::from).collect();
            if missing.is_empty() || std::time::Instant::now() > deadline {
                return missing;
            }
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
    }

    /// Addresses of a node's interfaces and loopback from the status, of one family.
    pub fn addrs(&self, status: &serde_json::Value, node: &str, v6: bool) -> Vec<String> {
        let n = status["nodes"].as_array().unwrap().iter().find(|n| n["name"] == node).unwrap();
        n["ifaces"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|i| {
                i["addrs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap().split('/').next().unwrap().to_string())
            })
            .filter(|a| a.contains(':') == v6)
            .collect()
    }

    pub fn exec(&self, node: &str, cmd: &[&str]) -> Output {
        let mut args = vec!["exec", "--lab", &self.name, node, "--"];
        args.extend_from_slice(cmd);
        vemu(&args)
    }

    pub fn vemu(&self, args: &[&str]) -> Output {
        let mut a: Vec<&str> = args.to_vec();
        a.extend_from_slice(&["--lab", &self.name]);
        vemu(&a)
    }

    pub fn status(&self) -> serde_json::Value {
        let o = self.vemu(&["status", "--json"]);
        assert!(o.status.success(), "{}", text(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    }

    /// (sent, received, average RTT in ms) of `count` pings at `interval_s`, after a
    /// warm-up that resolves neighbours along the path.
    pub fn ping(&self, node: &str, target: &str, count: u32, interval_s: f64) -> (u32, u32, f64) {
        parse_ping(&self.ping_output(node, target, count, interval_s, true))
    }

    /// What `ping` printed, after three pings to warm the path up (`quiet`: the summary
    /// only).
    fn ping_output(
        &self,
        node: &str,
        target: &str,
        count: u32,
        interval_s: f64,
        quiet: bool,
    ) -> String {
        self.exec(node, &["ping", "-c", "3", "-i", "0.2", "-W", "2", target]);
        let (c, i) = (count.to_string(), interval_s.to_string());
        let mut args = vec!["ping", "-c", &c, "-i", &i, "-W", "3", target];
        if quiet {
            args.insert(1, "-q");
        }
        String::from_utf8_lossy(&self.exec(node, &args).stdout).into_owned()
    }

    /// Like [`Lab::ping`], with the median round trip (ms) instead of the mean: what a
    /// link's configured delay is compared with, untouched by a few frames a stalled
    /// virtual machine made late (the fidelity monitor judges those).
    pub fn ping_median(
        &self,
        node: &str,
        target: &str,
        count: u32,
        interval_s: f64,
    ) -> (u32, u32, f64) {
        let out = self.ping_output(node, target, count, interval_s, false);
        let mut rtts: Vec<f64> = out
            .lines()
            .filter_map(|l| l.split("time=").nth(1)?.split_whitespace().next()?.parse().ok())
            .collect();
        rtts.sort_by(f64::total_cmp);
        let (sent, recv, _) = parse_ping(&out);
        (sent, recv, rtts.get(rtts.len() / 2).copied().unwrap_or(f64::NAN))
    }

    /// TCP goodput in bits/s from `client` to the iperf3 server at `server_ip`.
    pub fn iperf3(&self, client: &str, server_ip: &str, seconds: u32) -> f64 {
        let t = seconds.to_string();
        let o = self.exec(client, &["iperf3", "-c", server_ip, "-t", &t, "-O", "1", "-J"]);
        let v: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("iperf3: {}", text(&o)));
        v["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap_or_else(|| panic!("iperf3: {}", text(&o)))
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let o = vemu(&["down", "--lab", &self.name]);
        if !std::thread::panicking() {
            assert!(o.status.success(), "vemu down failed: {}", text(&o));
            assert!(lab_netns(&self.name).is_empty(), "namespaces left after down");
            assert!(
                !std::path::Path::new("/run/vemu").join(&self.name).exists(),
                "state left after down"
            );
        }
    }
}

pub fn parse_ping(out: &str) -> (u32, u32, f64) {
    let stats = out
        .lines()
        .find(|l| l.contains("packets transmitted"))
        .unwrap_or_else(|| panic!("ping: {out}"));
    let nums: Vec<u32> =
        stats.split(|c: char| !c.is_ascii_digit()).filter_map(|s| s.parse().ok()).collect();
    let avg = out
        .lines()
        .find(|l| l.starts_with("rtt"))
        .and_then(|l| l.split('=').nth(1))
        .and_then(|v| v.trim().split('/').nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN);
    (nums[0], nums[1], avg)
}

/// A chain n1 - n2 - ... of `delays_ms.len()` links, each with `extra` impairments.
pub fn chain(name: &str, delays_ms: &[f64], extra: &str) -> String {
    let mut y = format!("name: {name}\naddressing: {{ipv6: none}}\nnodes:\n");
    for i in 1..=delays_ms.len() + 1 {
        y += &format!("  n{i}: {{}}\n");
    }
    y += "links:\n";
    for (i, d) in delays_ms.iter().enumerate() {
        y += &format!("  - endpoints: [n{}, n{}]\n    delay: {d}ms\n{extra}", i + 1, i + 2);
    }
    y
}

/// A namespace standing in for "the outside" (what lies beyond the machine): joined to
/// the machine by a veth pair (`nic` on the machine, 198.51.100.1/24; 198.51.100.2/24
/// beyond), with no route to any lab — only masquerading can answer a lab's node.
/// `on_machine` runs a command on the machine (the test's own network namespace, or a
/// stand-in machine's). Removed when dropped.
pub struct Outside {
    pub ns: &'static str,
    nic: &'static str,
    on_machine: fn(&[&str]) -> Output,
}

impl Outside {
    pub fn make(ns: &'static str, nic: &'static str, on_machine: fn(&[&str]) -> Output) -> Outside {
        let o = Outside { ns, nic, on_machine };
        o.remove();
        let far = format!("{nic}-far");
        let run = |args: &[&str]| {
            let out = on_machine(args);
            assert!(out.status.success(), "{args:?}: {}", text(&out));
        };
        let out = Command::new("ip").args(["netns", "add", ns]).output().unwrap();
        assert!(out.status.success(), "ip netns add {ns}: {}", text(&out));
        run(&["ip", "link", "add", nic, "type", "veth", "peer", "name", &far, "netns", ns]);
        run(&["ip", "addr", "add", "198.51.100.1/24", "dev", nic]);
        run(&["ip", "link", "set", nic, "up"]);
        run(&["ip", "-n", ns, "addr", "add", "198.51.100.2/24", "dev", &far]);
        run(&["ip", "-n", ns, "link", "set", &far, "up"]);
        o
    }

    /// Whether the outside has a route to `addr` (it must not, to a lab's node).
    pub fn routes_to(&self, addr: &str) -> bool {
        Command::new("ip")
            .args(["-n", self.ns, "route", "get", addr])
            .output()
            .unwrap()
            .status
            .success()
    }

    fn remove(&self) {
        let _ = (self.on_machine)(&["ip", "link", "del", self.nic]);
        let _ = Command::new("ip").args(["netns", "del", self.ns]).output();
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        self.remove();
    }
}

/// A command run in the test's own network namespace (the machine, for [`Outside`]).
pub fn here(args: &[&str]) -> Output {
    Command::new(args[0]).args(&args[1..]).output().unwrap()
}
