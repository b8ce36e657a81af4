//! The management network (issue 41): `mgmt0` in every node on a bridge of the machine,
//! reachable from the machine itself, outside the emulated data plane.

mod common;

use common::*;
use std::process::Command;

fn ping_from_machine(addr: &str) -> bool {
    (0..20).any(|_| {
        let ok = Command::new("ping")
            .args(["-c", "1", "-W", "1", addr])
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
        ok
    })
}

fn mgmt_bridges() -> Vec<String> {
    let o = Command::new("ip").args(["-o", "link", "show"]).output().unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split(": ").nth(1).map(|n| n.split('@').next().unwrap_or(n).to_string()))
        .filter(|n| n.starts_with("vmb"))
        .collect()
}

#[test]
fn every_node_is_reachable_from_the_machine_on_the_management_network() {
    let _g = serial();
    let yaml = "mgmt: {ipv4: 10.199.0.0/24, ipv6: 'fd00:199::/64'}\nnodes: {a: {}, b: {kind: frr}, c: {}}\nlinks:\n  - {endpoints: [a, b], delay: 20ms}\n  - endpoints: [b, c]\n";
    let lab = Lab::up("t-mgmt", yaml);
    assert_eq!(mgmt_bridges().len(), 1, "{:?}", mgmt_bridges());
    // From the machine (this test's namespace), every node, both families — and not
    // through the emulated links (a:b has 20 ms each way; the bridge has none).
    for (n, v4, v6) in [
        ("a", "10.199.0.2", "fd00:199::2"),
        ("b", "10.199.0.3", "fd00:199::3"),
        ("c", "10.199.0.4", "fd00:199::4"),
    ] {
        assert!(ping_from_machine(v4), "{n} ({v4}) does not answer on the management network");
        assert!(ping_from_machine(v6), "{n} ({v6}) does not answer on the management network");
        let (_, addrs) = lab.sh(n, "ip -o addr show dev mgmt0");
        assert!(
            addrs.contains(&format!("{v4}/24")) && addrs.contains(&format!("{v6}/64")),
            "{addrs}"
        );
    }
    let o = Command::new("ping").args(["-c", "3", "-i", "0.2", "10.199.0.2"]).output().unwrap();
    let (_, got, rtt) = parse_ping(&String::from_utf8_lossy(&o.stdout));
    assert!(got == 3 && rtt < 10.0, "RTT {rtt} ms to a over the management network");
    // The lab's routes stay the lab's: nothing but mgmt0's own subnets goes through it.
    let (_, routes) =
        lab.sh("a", "ip route show dev mgmt0; ip -6 route show dev mgmt0 | grep -v '^fe80'");
    assert!(
        routes.lines().all(|r| r.starts_with("10.199.0.0/24") || r.starts_with("fd00:199::/64")),
        "{routes}"
    );
    // An Ansible inventory, by kind.
    let inv = text(&lab.vemu(&["inventory"]));
    assert!(
        inv.contains("    frr:\n      hosts:\n        b:\n          ansible_host: 10.199.0.3\n"),
        "{inv}"
    );
    assert!(inv.contains("        a:\n          ansible_host: 10.199.0.2\n"), "{inv}");
    drop(lab);
    assert!(mgmt_bridges().is_empty(), "{:?} left after down", mgmt_bridges());
}

#[test]
fn a_management_network_too_small_for_the_lab_is_refused() {
    let o = vemu(&[
        "check",
        write_scenario("t-mgmt2", "nodes: {a: {}, b: {}}\nmgmt: {ipv4: 10.199.0.0/30}\n")
            .to_str()
            .unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains(
            ":2:1: mgmt: the management network has no room for node 'b': give it a larger subnet"
        ),
        "{}",
        text(&o)
    );
}

fn ip_forward() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward").unwrap().trim().to_string()
}

/// `mgmt: {nat: true}`: the nodes reach beyond the machine (a stand-in namespace with no
/// route back to the lab: only masquerading can answer them), by a default route that
/// any of the lab's own outranks; down takes the NAT away and puts IPv4 forwarding
/// back as it was.
#[test]
fn nat_takes_the_nodes_beyond_the_machine_and_goes_with_the_lab() {
    let _g = serial();
    let outside = Outside::make("vemu-t-outside", "vt-out0", here);
    let forward_before = ip_forward();
    let yaml = "mgmt: {ipv4: 10.198.0.0/24, nat: true}\nnodes: {a: {}, b: {}}\nlinks:\n  - endpoints: [a, b]\n";
    let lab = Lab::up("t-mgmt-nat", yaml);
    let (_, route) = lab.sh("a", "ip route show default");
    assert!(
        route.contains("via 10.198.0.1 dev mgmt0") && route.contains("metric 10000"),
        "{route}"
    );
    let (code, out) = lab.sh("a", "ping -c 2 -W 2 198.51.100.2");
    assert_eq!(code, 0, "a cannot reach the outside through the machine: {out}");
    // The outside could only have answered the machine: it has no way to the node.
    assert!(!outside.routes_to("10.198.0.2"), "the outside has a route to the lab");
    let tables = Command::new("nft").args(["list", "tables"]).output().unwrap();
    assert!(String::from_utf8_lossy(&tables.stdout).contains("vemu_mgmt_"), "no NAT table");
    assert_eq!(ip_forward(), "1");
    drop(lab);
    let tables = Command::new("nft").args(["list", "tables"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&tables.stdout).contains("vemu_mgmt_"), "NAT left after down");
    assert_eq!(ip_forward(), forward_before, "IPv4 forwarding not put back");
    assert!(!std::path::Path::new("/run/vemu/ip_forward.before").exists());
}
