//! LAN segments in real labs: a software switch between TAP devices. Run as root.

mod common;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

#[test]
fn lan_of_50_hosts_everyone_reaches_everyone() {
    let _g = serial();
    let n = 50;
    let mut y = String::from("name: t-lan50\nnodes:\n");
    for i in 1..=n {
        y += &format!("  h{i}: {{}}\n");
    }
    y += "segments:\n  lan:\n    members: [";
    y += &(1..=n).map(|i| format!("h{i}")).collect::<Vec<_>>().join(", ");
    y += "]\n";
    let lab = Lab::up("t-lan50", &y);
    let s = lab.status();
    let all: Vec<(String, Vec<String>)> =
        (1..=n).map(|i| format!("h{i}")).map(|h| (h.clone(), [lab.addrs(&s, &h, false), lab.addrs(&s, &h, true)].concat())).collect();
    let mut pairs = 0;
    for (h, _) in &all {
        let targets: Vec<String> = all.iter().filter(|(o, _)| o != h).flat_map(|(_, a)| a.clone()).collect();
        let missing = lab.wait_reachable(h, &targets, 20.0);
        assert!(missing.is_empty(), "{h} cannot reach {missing:?}");
        pairs += targets.len();
    }
    eprintln!("LAN of {n} hosts: {pairs} (host, address) pairs answered, IPv4 and IPv6");
    let seg = &lab.status()["segments"][0];
    assert!(seg["stats"]["unicast"].as_u64().unwrap() > 0);
    assert!(seg["stats"]["flooded"].as_u64().unwrap() > 0);
}

/// Start `tcpdump` in a node for `seconds`; its output tells how many packets matched.
fn capture(lab: &str, node: &str, filter: &str, seconds: u32) -> std::process::Child {
    let t = seconds.to_string();
    Command::new(env!("CARGO_BIN_EXE_vemu"))
        .args(["exec", "--lab", lab, node, "--", "timeout", "-s", "INT", &t, "tcpdump", "-n", "-i", "any", "-c", "1", filter])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn captured(c: std::process::Child) -> bool {
    let o = c.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(" captured"), "tcpdump: {err}");
    !err.contains("0 packets captured")
}

#[test]
fn broadcast_reaches_every_member_of_its_vlan_and_nothing_else() {
    let _g = serial();
    let y = "
name: t-bcast
nodes: {a: {}, b: {}, c: {}, d: {}, r: {}, o: {}}
links:
  - endpoints: [r, o]
segments:
  lan:
    ipv4: 10.1.0.0/24
    ipv6: 'fd01::/64'
    members: [a, b, c, {node: d, vlan: 2}, r]
";
    let lab = Lab::up("t-bcast", y);
    // Who-has for an address nobody has (ARP broadcast), and neighbour solicitation
    // for one (IPv6 multicast).
    for (filter, probe) in [("arp host 10.1.0.200", "ping -c 2 -W 1 10.1.0.200"), ("icmp6 and ip6[40] == 135 and ip6[48:4] == 0xfd010000 and ip6[60:4] == 0xc8", "ping -c 2 -W 1 fd01::c8")] {
        let caps: Vec<(&str, std::process::Child)> = ["b", "c", "r", "d", "o"].iter().map(|n| (*n, capture("t-bcast", n, filter, 4))).collect();
        std::thread::sleep(Duration::from_millis(1500));
        lab.sh("a", probe);
        for (node, c) in caps {
            let seen = captured(c);
            let expect = ["b", "c", "r"].contains(&node);
            assert_eq!(seen, expect, "{filter}: node {node} {} it", if seen { "saw" } else { "did not see" });
        }
    }
    // d, alone in VLAN 2, never received a frame; the link beyond r carried no broadcast.
    let s = lab.status();
    let d = &s["segments"][0]["members"][3];
    assert_eq!(d["ingress"]["stats"]["rx_frames"], 0, "{d}");
    assert!(s["segments"][0]["stats"]["flooded"].as_u64().unwrap() >= 4);
}

fn frames_through_switch(lab: &Lab) -> u64 {
    let st = &lab.status()["segments"][0]["stats"];
    st["unicast"].as_u64().unwrap() + st["flooded"].as_u64().unwrap() + st["filtered"].as_u64().unwrap()
}

/// `addressing: {ipv6: none}` means no IPv6 on the nodes' interfaces: a quiet LAN stays
/// quiet (no router solicitations, no MLD reports), and IPv4 works. `ipv6: link-local`
/// keeps link-local IPv6 (for babeld, OSPFv3), whose start-up chatter crosses the switch.
#[test]
fn ipv6_none_sends_no_ipv6() {
    let _g = serial();
    let y = |name: &str, v6: &str| format!("name: {name}\naddressing: {{ipv6: {v6}}}\nnodes: {{a: {{}}, b: {{}}, c: {{}}}}\nsegments:\n  s: {{members: [a, b, c]}}\n");
    let lab = Lab::up("t-nov6", &y("t-nov6", "none"));
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(frames_through_switch(&lab), 0, "frames crossed the switch of a quiet IPv4-only LAN: {}", lab.status()["segments"][0]["stats"]);
    let (code, addrs) = lab.sh("a", "ip -6 addr show dev eth0");
    assert_eq!((code, addrs.trim()), (0, ""), "eth0 has IPv6");
    let (_, lo) = lab.sh("a", "ip -6 addr show dev lo");
    assert!(lo.contains("::1/128"), "lo keeps ::1: {lo}");
    let o = lab.exec("a", &["ping", "-c", "2", "-i", "0.2", "c"]);
    assert!(o.status.success(), "{}", text(&o));
    drop(lab);
    let lab = Lab::up("t-llv6", &y("t-llv6", "link-local"));
    let (_, addrs) = lab.sh("a", "ip -6 addr show dev eth0");
    assert!(addrs.contains("fe80::"), "link-local IPv6 stays: {addrs}");
    let t = std::time::Instant::now();
    while frames_through_switch(&lab) == 0 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(frames_through_switch(&lab) > 0, "link-local IPv6 nodes announce themselves");
}

/// A 1000-member LAN with IPv6 on floods about 4 million frame copies in its first
/// seconds (router solicitations and MLD reports to every port). `down` stops the
/// forwarding first and drops that backlog: it took 24-28 s when it waited behind it,
/// about 3 s now; the bound leaves room for a loaded machine.
#[test]
fn down_in_the_middle_of_a_start_up_flood_does_not_wait_for_it() {
    let _g = serial();
    let n = 1000;
    let mut y = String::from("name: t-lan1000\nnodes:\n");
    for i in 0..n {
        y += &format!("  h{i}: {{}}\n");
    }
    y += "segments:\n  lan:\n    members: [";
    y += &(0..n).map(|i| format!("h{i}")).collect::<Vec<_>>().join(", ");
    y += "]\n";
    let path = write_scenario("t-lan1000", &y);
    let o = vemu(&["up", path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    std::thread::sleep(Duration::from_millis(500));
    let t = std::time::Instant::now();
    let o = vemu(&["down", "--lab", "t-lan1000"]);
    let took = t.elapsed();
    assert!(o.status.success(), "{}", text(&o));
    eprintln!("down of a 1000-member LAN during its start-up flood: {took:?}");
    assert!(took < Duration::from_secs(12), "down waited {took:?}");
    assert!(lab_netns("t-lan1000").is_empty());
}

/// A 300-member LAN with IPv6 on: `up` returns once the data plane has delivered the
/// nodes' start-up chatter (~360,000 frame copies), so the very first ping from the
/// first to the last host is answered at once — before, it waited behind the chatter
/// for about 1.2 s (and a 1000-member LAN lost every ping for 15 s).
#[test]
fn the_first_ping_after_up_is_answered_at_once() {
    let _g = serial();
    let n = 300;
    let mut y = String::from("name: t-lan300\nnodes:\n");
    for i in 0..n {
        y += &format!("  h{i}: {{}}\n");
    }
    y += "segments:\n  lan:\n    members: [";
    y += &(0..n).map(|i| format!("h{i}")).collect::<Vec<_>>().join(", ");
    y += "]\n";
    let lab = Lab::up("t-lan300", &y);
    let o = lab.exec("h0", &["ping", "-c", "1", "-W", "1", &format!("h{}", n - 1)]);
    assert!(o.status.success(), "the first ping was not answered within 1 s: {}", text(&o));
    let (_, _, rtt) = parse_ping(&String::from_utf8_lossy(&o.stdout));
    eprintln!("first ping h0 -> h{}: {rtt:.3} ms", n - 1);
    assert!(rtt < 100.0, "the first ping took {rtt} ms");
}
