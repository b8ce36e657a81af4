//! Labs across machines, with machines made of namespaces: each "machine" is a network
//! namespace running a real `vemu agent` in a mount namespace of its own (its own
//! /run/vemu, /run/netns and /var/log/vemu, as on a separate computer), joined to the others by veth
//! pairs on a Linux bridge that plays the underlay; the controller runs in a namespace
//! of its own on the same bridge. Run as root.

#[path = "../common/mod.rs"]
mod common;
mod expect;
mod failures;
mod kernel_tunnel;
mod kubelet;
mod kubernetes;
mod links;
mod routing;
mod takeover;

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
        let child = self.spawn_in(i, &[], &script);
        self.agents.push(child);
    }

    /// Shell script `script` in machine `i`'s network namespace and new namespaces of
    /// its own: a mount namespace with private propagation and what `unshare` adds
    /// (`unshare_args`).
    fn spawn_in(&self, i: usize, unshare_args: &[&str], script: &str) -> Child {
        Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}-{}", self.tag, self.names[i]))
            .args(["unshare", "-m"])
            .args(unshare_args)
            .args(["--propagation", "private", "sh", "-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap()
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
        self.exec_command(i, lab, node, cmd).output().unwrap()
    }

    /// [`Machines::exec`], started (its output piped).
    fn spawn_exec(&self, i: usize, lab: &str, node: &str, cmd: &[&str]) -> std::process::Child {
        let mut c = self.exec_command(i, lab, node, cmd);
        c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
    }

    fn exec_command(&self, i: usize, lab: &str, node: &str, cmd: &[&str]) -> Command {
        // The agent's mount namespace is its shell's (the agent is exec'd by it).
        let mut c = Command::new("nsenter");
        c.args([
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
        .args(cmd);
        c
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
        self.nothing_left("down");
        // Nor a zombie child (issue 39: each agent kept a node's vemu-init).
        for i in 0..self.names.len() {
            let pid = self.agent_pid(i);
            eventually(5, &format!("machine {i}'s agent reaps its children"), || {
                zombies_of(pid).is_empty()
            });
        }
    }

    /// No machine holds anything of a lab (after `what`).
    fn nothing_left(&self, what: &str) {
        for i in 0..self.names.len() {
            assert_eq!(self.leftovers(i), "", "machine {i} keeps something after {what}");
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

/// Waits up to `secs` for `cond`.
fn eventually(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < Duration::from_secs(secs), "{what}: not within {secs} s");
        std::thread::sleep(Duration::from_millis(200));
    }
}
