//! The lab's edge: the machine vemu runs on as a node of the lab (`kind: host`). "The
//! machine" is a stand-in network namespace here: vemu runs inside it (`nsenter --net`,
//! the mounts stay the machine's), so these tests never touch the real machine's
//! interfaces or routes, and all traffic stays between namespaces they made.

mod common;

use std::process::{Command, Output};

use common::*;

const HOST_NS: &str = "t-edge-host";

/// The stand-in for the machine: a network namespace with only `lo`, removed at the end.
struct StandIn;

impl StandIn {
    fn new() -> StandIn {
        let _ = Command::new("ip").args(["netns", "del", HOST_NS]).output();
        let o = Command::new("ip").args(["netns", "add", HOST_NS]).output().unwrap();
        assert!(o.status.success(), "ip netns add: {}", text(&o));
        in_host(&["ip", "link", "set", "lo", "up"]);
        StandIn
    }

    /// The interfaces and routes the machine has (names, and routes as `ip` prints them).
    fn devices(&self) -> (Vec<String>, String) {
        let links = text(&in_host(&["ip", "-o", "link", "show"]));
        let names = links
            .lines()
            .filter_map(|l| l.split(": ").nth(1))
            .map(|n| n.split('@').next().unwrap().to_string())
            .collect();
        let routes = text(&in_host(&["ip", "route", "show"]))
            + &text(&in_host(&["ip", "-6", "route", "show"]));
        (names, routes)
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", HOST_NS]).output();
    }
}

/// Run a program on the (stand-in) machine.
fn in_host(args: &[&str]) -> Output {
    Command::new("nsenter")
        .arg(format!("--net=/run/netns/{HOST_NS}"))
        .args(args)
        .output()
        .expect("running nsenter")
}

fn vemu_on_host(args: &[&str]) -> Output {
    let mut all = vec![env!("CARGO_BIN_EXE_vemu")];
    all.extend_from_slice(args);
    in_host(&all)
}

fn scenario(name: &str) -> String {
    format!(
        "name: {name}
addressing: {{ipv6: none}}
nodes:
  me: {{kind: host}}
  r1: {{}}
  srv: {{run: ['iperf3 -s -D']}}
links:
  - {{endpoints: [me, r1], delay: 5ms}}
  - {{endpoints: [r1, srv], bandwidth: 50Mbit}}
"
    )
}

fn up_on_host(name: &str) -> Lab {
    let path = write_scenario(name, &scenario(name));
    let o = vemu_on_host(&["up", path.to_str().unwrap(), "--name", name]);
    assert!(o.status.success(), "vemu up: {}", text(&o));
    Lab { name: name.to_string() }
}

#[test]
fn the_machine_reaches_the_lab_through_its_emulated_links() {
    let _g = serial();
    let host = StandIn::new();
    let lab = up_on_host("t-edge");
    let st = lab.status();
    let srv = lab.addrs(&st, "srv", false)[0].clone();
    let (names, routes) = host.devices();
    assert!(
        names.contains(&"vh-t-edge0".to_string()),
        "the machine's interface to the lab: {names:?}"
    );
    // Routes to the lab's prefixes, through the lab (the link to r1), none by default.
    let to_srv = text(&in_host(&["ip", "route", "get", &srv]));
    assert!(
        to_srv.contains("dev vh-t-edge0") && to_srv.contains(" via "),
        "a route to {srv} on the machine, through the lab: {to_srv} ({routes})"
    );
    assert!(!routes.contains("default"), "no default route changed: {routes}");
    // Programs of the machine cross the emulated links: 5 ms each way to r1.
    let ping = text(&in_host(&["ping", "-c", "5", "-i", "0.2", "-W", "2", &srv]));
    let (sent, got, avg_ms) = parse_ping(&ping);
    assert_eq!((sent, got), (5, 5), "{ping}");
    assert!((10.0..40.0).contains(&avg_ms), "RTT {avg_ms} ms through a 5 ms link each way: {ping}");
    // TCP from the machine to a server in the lab, at the rate of the 50 Mbit/s link.
    let mut bps = 0.0;
    for _ in 0..20 {
        let o = in_host(&["iperf3", "-c", &srv, "-t", "3", "-J"]);
        if o.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            bps = v["end"]["sum_received"]["bits_per_second"].as_f64().unwrap();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    assert!(
        (0.80 * 50e6..1.02 * 50e6).contains(&bps),
        "TCP from the machine: {bps} bit/s on a 50 Mbit/s link"
    );
    // vemu does not enter, stop or limit the machine.
    let o = lab.vemu(&["exec", "me", "--", "true"]);
    assert!(!o.status.success() && text(&o).contains("kind: host"), "{}", text(&o));
    let o = lab.vemu(&["node", "stop", "me"]);
    assert!(!o.status.success() && text(&o).contains("kind: host"), "{}", text(&o));
    drop(lab);
    let (names, routes) = host.devices();
    assert_eq!(names, ["lo"], "nothing left on the machine after down");
    assert!(routes.trim().is_empty(), "no route left: {routes}");
}

#[test]
fn a_crashed_lab_leaves_nothing_on_the_machine_after_clean() {
    let _g = serial();
    let host = StandIn::new();
    let lab = up_on_host("t-edge-crash");
    let pid = lab.status()["pid"].as_u64().unwrap();
    assert!(host.devices().0.len() > 1);
    // SAFETY: plain kill(2) of the lab's controller.
    let o = Command::new("kill").args(["-9", &pid.to_string()]).output().unwrap();
    assert!(o.status.success());
    std::thread::sleep(std::time::Duration::from_millis(300));
    let o = vemu(&["clean"]);
    assert!(o.status.success(), "clean: {}", text(&o));
    std::mem::forget(lab);
    let (names, routes) = host.devices();
    assert_eq!(names, ["lo"], "nothing left on the machine after clean");
    assert!(routes.trim().is_empty(), "no route left: {routes}");
    assert!(lab_netns("t-edge-crash").is_empty());
}

#[test]
fn host_nodes_that_cannot_be_are_refused() {
    let _g = serial();
    // In the file: said where.
    let bad = "nodes:\n  a: {kind: host}\n  b: {kind: host}\n  c: {kind: host, run: [x]}\n  d: {kind: box}\n  e: {nat: true}\nlinks: [{endpoints: [a, b]}]\n";
    let path = write_scenario("t-edge-bad", bad);
    let o = vemu(&["check", path.to_str().unwrap()]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains(":3:") && t.contains("only one node can be the host, and 'a' is"), "{t}");
    assert!(t.contains(":4:") && t.contains("it has no 'run'"), "{t}");
    assert!(t.contains(":5:") && t.contains("unknown kind 'box'"), "{t}");
    assert!(
        t.contains(":6:") && t.contains("only a node of kind 'host' (the machine) has it"),
        "{t}"
    );
    // An interface name the machine has already: refused before anything is made, and
    // nothing of the lab is left.
    let host = StandIn::new();
    let o =
        in_host(&["ip", "link", "add", "vh-t-edge-n0", "type", "veth", "peer", "name", "other0"]);
    assert!(o.status.success(), "{}", text(&o));
    let path = write_scenario("t-edge-n", &scenario("t-edge-n"));
    let o = vemu_on_host(&["up", path.to_str().unwrap(), "--name", "t-edge-n"]);
    let t = text(&o);
    assert!(
        !o.status.success()
            && t.contains("the machine has an interface named vh-t-edge-n0 already"),
        "{t}"
    );
    assert!(lab_netns("t-edge-n").is_empty(), "no namespace left");
    assert!(!std::path::Path::new("/run/vemu/t-edge-n").exists(), "no state left");
    let mut names = host.devices().0;
    names.sort();
    assert_eq!(names, ["lo", "other0", "vh-t-edge-n0"], "the machine's own interfaces untouched");
}

/// `kind: host` with `nat: true` (Mininet's NAT): a node behind a router reaches a
/// network beyond the (stand-in) machine — a namespace on a "NIC" of it with no route
/// back to the lab, so only masquerading can answer — across the emulated link; `down`
/// takes the rules away and puts the machine's IPv4 forwarding back.
#[test]
fn the_lab_reaches_beyond_the_machine_through_a_host_node_with_nat() {
    let _g = serial();
    let _host = StandIn::new();
    let outside = Outside::make("t-edge-out", "vt-nic0", in_host);
    let forward = || text(&in_host(&["cat", "/proc/sys/net/ipv4/ip_forward"])).trim().to_string();
    let forward_before = forward();
    let yaml = "name: t-edge-nat
addressing: {ipv6: none}
nodes:
  me: {kind: host, nat: true}
  r1: {routes: [{dst: default, via: 10.77.0.1}]}
  h1: {routes: [{dst: default, via: 10.77.1.1}]}
links:
  - {endpoints: [{node: me, ip: 10.77.0.1/24}, {node: r1, ip: 10.77.0.2/24}], delay: 5ms}
  - {endpoints: [{node: r1, ip: 10.77.1.1/24}, {node: h1, ip: 10.77.1.2/24}]}
";
    let path = write_scenario("t-edge-nat", yaml);
    let o = vemu_on_host(&["up", path.to_str().unwrap(), "--name", "t-edge-nat"]);
    assert!(o.status.success(), "vemu up: {}", text(&o));
    let lab = Lab { name: "t-edge-nat".to_string() };
    let (code, out) = lab.sh("h1", "ping -c 3 -i 0.2 -W 2 198.51.100.2");
    assert_eq!(code, 0, "h1 cannot reach beyond the machine: {out}");
    let (_, got, avg_ms) = parse_ping(&out);
    assert_eq!(got, 3, "{out}");
    assert!((10.0..40.0).contains(&avg_ms), "RTT {avg_ms} ms across a 5 ms link each way: {out}");
    assert!(!outside.routes_to("10.77.1.2"), "the outside has a route to the lab");
    assert!(text(&in_host(&["nft", "list", "tables"])).contains("vemu_mgmt_"), "no NAT table");
    assert_eq!(forward(), "1");
    drop(lab);
    assert!(!text(&in_host(&["nft", "list", "tables"])).contains("vemu_mgmt_"), "NAT left");
    assert_eq!(forward(), forward_before, "IPv4 forwarding not put back");
}

/// What is on the wire of a NIC joins the lab (`kind: external`). The stand-in machine
/// has two "NICs" (veths) whose other ends are in a namespace playing the devices on
/// their wires; the devices take the addresses the lab planned for them.
#[test]
fn devices_on_a_nics_wire_cross_the_emulated_lan_and_link() {
    let _g = serial();
    let host = StandIn::new();
    const DEV: &str = "t-edge-dev";
    let _ = Command::new("ip").args(["netns", "del", DEV]).output();
    let sh = |cmd: &str| {
        let o = Command::new("sh").args(["-c", cmd]).output().unwrap();
        assert!(o.status.success(), "{cmd}: {}", text(&o));
    };
    sh(&format!("ip netns add {DEV} && ip -n {DEV} link set lo up"));
    struct Gone;
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", DEV]).output();
        }
    }
    let _gone = Gone;
    for k in 0..2 {
        sh(&format!("ip -n {HOST_NS} link add t-nic{k} type veth peer name wire{k} netns {DEV} && ip -n {HOST_NS} link set t-nic{k} up && ip -n {DEV} link set wire{k} up"));
    }
    let name = "t-edge-nic";
    let yaml = format!(
        "name: {name}
addressing: {{ipv6: none}}
nodes:
  n1: {{}}
  n2: {{}}
  dev: {{kind: external, iface: t-nic0}}
  dev2: {{kind: external, iface: t-nic1}}
segments:
  lan: {{kind: lan, ipv4: 192.168.77.0/24, delay: 5ms, members: [n1, n2, dev]}}
links:
  - {{endpoints: [n1, dev2], delay: 3ms}}
"
    );
    let path = write_scenario(name, &yaml);
    let o = vemu_on_host(&["up", path.to_str().unwrap(), "--name", name]);
    assert!(o.status.success(), "vemu up: {}", text(&o));
    let lab = Lab { name: name.to_string() };
    let st = lab.status();
    // The devices take the addresses the lab planned for them.
    let planned = |node: &str| -> String {
        let n = st["nodes"].as_array().unwrap().iter().find(|n| n["name"] == node).unwrap();
        assert_eq!(n["kind"], "external");
        n["ifaces"][0]["addrs"][0].as_str().unwrap().to_string()
    };
    let (dev, dev2) = (planned("dev"), planned("dev2"));
    sh(&format!("ip -n {DEV} addr add {dev} dev wire0 && ip -n {DEV} addr add {dev2} dev wire1"));
    let dev_ip = dev.split('/').next().unwrap();
    let dev2_ip = dev2.split('/').next().unwrap();
    // Through the LAN: 5 ms on each port each way, 20 ms a round trip.
    let (sent, got, avg) = lab.ping("n1", dev_ip, 5, 0.2);
    assert_eq!((sent, got), (5, 5));
    assert!((20.0..50.0).contains(&avg), "RTT {avg} ms to the device on the LAN");
    // The device reaches the nodes too (its frames enter through the NIC).
    let n2 =
        lab.addrs(&st, "n2", false).into_iter().find(|a| a.starts_with("192.168.77.")).unwrap();
    let o = Command::new("ip")
        .args(["netns", "exec", DEV, "ping", "-c", "3", "-i", "0.2", "-W", "2", &n2])
        .output()
        .unwrap();
    let (sent, got, avg) = parse_ping(&text(&o));
    assert_eq!((sent, got), (3, 3), "{}", text(&o));
    assert!((20.0..50.0).contains(&avg), "RTT {avg} ms from the device");
    // Through the link: 3 ms each way.
    let (sent, got, avg) = lab.ping("n1", dev2_ip, 5, 0.2);
    assert_eq!((sent, got), (5, 5));
    assert!((6.0..30.0).contains(&avg), "RTT {avg} ms to the device on the link");
    // vemu does not enter it.
    let o = lab.vemu(&["exec", "dev", "--", "true"]);
    assert!(!o.status.success() && text(&o).contains("kind: external"), "{}", text(&o));
    drop(lab);
    // The NICs are the machine's: still there, no longer promiscuous, unchanged.
    let (names, _) = host.devices();
    assert_eq!(names, ["lo", "t-nic0", "t-nic1"]);
    let d = text(&in_host(&["ip", "-d", "link", "show", "t-nic0"]));
    assert!(d.contains("promiscuity 0") && d.contains("state UP"), "{d}");
    // A NIC that is down is refused, and nothing is built.
    sh(&format!("ip -n {HOST_NS} link set t-nic1 down"));
    let o = vemu_on_host(&["up", path.to_str().unwrap(), "--name", name]);
    let t = text(&o);
    assert!(!o.status.success() && t.contains("interface t-nic1 is down"), "{t}");
    assert!(
        lab_netns(name).is_empty() && !std::path::Path::new("/run/vemu").join(name).exists(),
        "nothing left"
    );
}

/// A stand-in for the network beyond the machine: a namespace with 10.88.0.2 and
/// 10.88.0.3 (an iperf3 server), wired to the stand-in machine (10.88.0.1); removed at the end.
struct Beyond;

const BEYOND_NS: &str = "t-edge-beyond";

impl Beyond {
    fn new() -> Beyond {
        let _ = Command::new("ip").args(["netns", "del", BEYOND_NS]).output();
        let sh = |cmd: &str| {
            let o = Command::new("sh").args(["-c", cmd]).output().unwrap();
            assert!(o.status.success(), "{cmd}: {}", text(&o));
        };
        sh(&format!("ip netns add {BEYOND_NS} && ip -n {BEYOND_NS} link set lo up"));
        sh(&format!("ip -n {HOST_NS} link add t-wan type veth peer name wan netns {BEYOND_NS}"));
        sh(&format!(
            "ip -n {HOST_NS} addr add 10.88.0.1/24 dev t-wan && ip -n {HOST_NS} link set t-wan up"
        ));
        sh(&format!("ip -n {BEYOND_NS} addr add 10.88.0.2/24 dev wan && ip -n {BEYOND_NS} addr add 10.88.0.3/24 dev wan && ip -n {BEYOND_NS} link set wan up"));
        // (nsenter, not `ip netns exec`: a daemon in a mount namespace of its own would
        // hold on to the labs' state mounts.)
        sh(&format!("nsenter --net=/run/netns/{BEYOND_NS} iperf3 -s -D"));
        Beyond
    }
}

impl Drop for Beyond {
    fn drop(&mut self) {
        let _ = Command::new("sh")
            .args([
                "-c",
                &format!("ip netns pids {BEYOND_NS} | xargs -r kill -9; ip netns del {BEYOND_NS}"),
            ])
            .output();
    }
}

/// Average RTT of `ping -U` (user-to-user: what an application sees) from the machine.
fn ping_u(addr: &str) -> (u32, f64) {
    let o = in_host(&["ping", "-U", "-c", "5", "-i", "0.2", "-W", "2", addr]);
    let (_, got, avg) = parse_ping(&text(&o));
    (got, avg)
}

fn divert_rules_left() -> String {
    let tables = text(&in_host(&["nft", "list", "tables"]));
    let chains = text(&in_host(&["iptables", "-t", "mangle", "-S"]))
        + &text(&in_host(&["ip6tables", "-t", "mangle", "-S"]));
    tables
        .lines()
        .filter(|l| l.contains("vemu"))
        .chain(chains.lines().filter(|l| l.contains("VEMU")))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_machines_own_traffic_takes_a_diverted_path() {
    let _g = serial();
    let _host = StandIn::new();
    let _beyond = Beyond::new();
    assert!(ping_u("10.88.0.2").1 < 5.0);
    let name = "t-edge-divert";
    let yaml = format!(
        "name: {name}
nodes: {{n1: {{}}}}
divert:
  - name: wan
    match: ip daddr 10.88.0.2
    forward: {{delay: 20ms, bandwidth: 20Mbit}}
    reverse: {{delay: 30ms}}
"
    );
    let path = write_scenario(name, &yaml);
    let o = vemu_on_host(&["up", path.to_str().unwrap(), "--name", name]);
    assert!(o.status.success(), "vemu up: {}", text(&o));
    let lab = Lab { name: name.to_string() };
    // 20 ms out, 30 ms back, as an application sees it; other traffic is untouched.
    let (got, rtt) = ping_u("10.88.0.2");
    assert!(got == 5 && (50.0..65.0).contains(&rtt), "diverted RTT {rtt} ms ({got} of 5)");
    let (got, rtt) = ping_u("10.88.0.3");
    assert!(got == 5 && rtt < 5.0, "not diverted: RTT {rtt} ms");
    // TCP out of the machine at the path's 20 Mbit/s.
    let o = in_host(&["iperf3", "-c", "10.88.0.2", "-t", "4", "-O", "1", "-J"]);
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("iperf3: {}", text(&o)));
    let bps = v["end"]["sum_received"]["bits_per_second"].as_f64().unwrap();
    assert!(
        (0.85 * 20e6..1.02 * 20e6).contains(&bps),
        "TCP out through the diverted path: {bps} bit/s at 20 Mbit/s"
    );
    let st = lab.status();
    let d = &st["diverts"][0];
    assert_eq!(
        (d["name"].as_str(), d["match"].as_str()),
        (Some("wan"), Some("ip daddr 10.88.0.2"))
    );
    assert!(
        d["forward"]["stats"]["tx_frames"].as_u64().unwrap() > 1000
            && d["reverse"]["stats"]["tx_frames"].as_u64().unwrap() > 100,
        "{d}"
    );
    assert!(text(&lab.vemu(&["status"])).contains("divert 'ip daddr 10.88.0.2'"));
    drop(lab);
    assert_eq!(divert_rules_left(), "", "rules left after down");
    assert!(ping_u("10.88.0.2").1 < 5.0, "the path is gone after down");

    // A crashed controller: the rules let packets pass (bypass), and clean removes them.
    let o = vemu_on_host(&["up", path.to_str().unwrap(), "--name", name]);
    assert!(o.status.success(), "vemu up: {}", text(&o));
    let lab = Lab { name: name.to_string() };
    let pid = lab.status()["pid"].as_u64().unwrap();
    assert!(!divert_rules_left().is_empty());
    assert!(Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap().success());
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (got, rtt) = ping_u("10.88.0.2");
    assert!(
        got == 5 && rtt < 5.0,
        "after a crash the machine's traffic passes: {got} of 5, {rtt} ms"
    );
    let o = vemu(&["clean"]);
    assert!(o.status.success(), "clean: {}", text(&o));
    std::mem::forget(lab);
    assert_eq!(divert_rules_left(), "", "rules left after clean");

    // A match nftables refuses fails `up` with its message, and leaves nothing.
    let bad = write_scenario("t-edge-divert-bad", &format!("name: {name}\nnodes: {{n1: {{}}}}\ndivert:\n  - {{match: ip daddrr 10.88.0.2, delay: 1ms}}\n"));
    let o = vemu_on_host(&["up", bad.to_str().unwrap(), "--name", name]);
    assert!(
        !o.status.success() && text(&o).contains("nftables refuses a divert match"),
        "{}",
        text(&o)
    );
    assert_eq!(divert_rules_left(), "");
    assert!(lab_netns(name).is_empty());
    // What could act rather than select is refused when the file is read.
    let bad = write_scenario("t-edge-divert-bad2", &format!("name: {name}\nnodes: {{n1: {{}}}}\ndivert:\n  - {{match: 'tcp dport 80 drop', delay: 1ms}}\n"));
    let o = vemu_on_host(&["check", bad.to_str().unwrap()]);
    assert!(
        !o.status.success()
            && text(&o).contains("divert[0].match: 'drop' is an nftables statement"),
        "{}",
        text(&o)
    );
}
