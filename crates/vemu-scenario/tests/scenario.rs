use std::path::Path;

use vemu_link::{Distribution, Loss, QueueLimit};
use vemu_scenario::{load, load_str, Errors, Plan};

fn ok(text: &str) -> Plan {
    load_str(text, "t.yaml", "t", None).unwrap_or_else(|e| panic!("{e}"))
}

fn bad(text: &str) -> Errors {
    load_str(text, "t.yaml", "t", None).expect_err("scenario should be rejected")
}

const CHAIN: &str = "
name: chain
seed: 42
defaults:
  link: {delay: 5ms}
nodes:
  n1: {run: [\"iperf3 -s -D\"]}
  n2: {}
  n3:
links:
  - endpoints: [n1, n2]
    bandwidth: 100Mbit
  - endpoints: [n2, n3]
    forward: {delay: 300ms, loss: 10%}
    reverse: {delay: 1ms}
routing: static
";

#[test]
fn the_issue_example_plans() {
    let p = ok(CHAIN);
    assert_eq!(p.name, "chain");
    assert_eq!(p.seed, 42);
    assert_eq!(p.nodes.len(), 3);
    let l0 = &p.links[0];
    assert_eq!(l0.forward.rate_bps, Some(100_000_000));
    assert_eq!(l0.forward.delay_ns, 5_000_000);
    assert_eq!(l0.reverse.rate_bps, Some(100_000_000));
    let l1 = &p.links[1];
    assert_eq!(l1.forward.delay_ns, 300_000_000);
    assert_eq!(l1.forward.loss, Loss::Bernoulli { rate: 0.1, correlation: 0.0 });
    assert_eq!(l1.reverse.delay_ns, 1_000_000);
    assert_eq!(l1.reverse.loss, Loss::None);
    assert_eq!(p.nodes[0].run, vec!["iperf3 -s -D"]);
    // n2 has eth0 toward n1 and eth1 toward n3.
    let names: Vec<&str> = p.nodes[1].ifaces.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["eth0", "eth1"]);
    assert_eq!(p.nodes[0].ifaces[0].addrs[0].to_string(), "10.0.0.1/30");
    assert_eq!(p.nodes[1].ifaces[0].addrs[0].to_string(), "10.0.0.2/30");
    assert_eq!(p.nodes[0].ifaces[0].addrs[1].to_string(), "fd00::1/64");
    // n1 reaches n2-n3's subnets via n2: 10.0.0.4/30 and fd00:0:0:1::/64, each merged
    // with its sibling, n1's own subnet (whose connected route stays the longer match).
    let r: Vec<String> =
        p.nodes[0].routes.iter().map(|r| format!("{} via {}", r.dst, r.via.unwrap())).collect();
    assert_eq!(r, ["10.0.0.0/29 via 10.0.0.2", "fd00::/63 via fd00::2"]);
    assert!(p.hosts.iter().any(|(a, n)| n == "n3" && a.to_string() == "10.0.0.6"));
    assert_eq!(p.find_link("n3:n2").unwrap(), (1, true));
}

/// Two unnamed links between the same nodes are `a:b#1` and `a:b#2`, not both `a:b`
/// (which made `vemu link set a:b` change the first without a word); `a:b` then asks
/// which.
#[test]
fn parallel_links_get_names_of_their_own() {
    let p = ok("
nodes: {a: {}, b: {}, c: {}}
links:
  - {endpoints: [a, b]}
  - {endpoints: [b, a], delay: 5ms}
  - {endpoints: [b, c]}
  - {endpoints: [a, b], name: uplink}
");
    let names: Vec<&str> = p.links.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["a:b#1", "b:a#2", "b:c", "uplink"]);
    assert_eq!(p.find_link("b:a#2").unwrap(), (1, false));
    assert_eq!(p.find_link("uplink").unwrap(), (3, false));
    assert_eq!(p.find_link("b:c").unwrap(), (2, false));
    assert_eq!(
        p.find_link("a:b").unwrap_err(),
        "3 links join 'a' and 'b'; name one of: a:b#1, b:a#2, uplink"
    );
}

#[test]
fn static_routes_honour_weights() {
    // Square a-b-c-d-a; the a-b link is expensive, so a reaches b's far subnet via d, c.
    let p = ok("
nodes: {a: {}, b: {}, c: {}, d: {}}
links:
  - {endpoints: [a, b], weight: 10}
  - {endpoints: [b, c]}
  - {endpoints: [c, d]}
  - {endpoints: [d, a]}
");
    let a = &p.nodes[0];
    // (The longest prefix that holds the b-c subnet: routes may be aggregated.)
    let bc: std::net::IpAddr = "10.0.0.5".parse().unwrap();
    let to_bc =
        a.routes.iter().filter(|r| r.dst.contains(&bc)).max_by_key(|r| r.dst.prefix_len()).unwrap();
    // d's address on the d-a link is 10.0.0.13.
    assert_eq!(to_bc.via.unwrap().to_string(), "10.0.0.13");
}

#[test]
fn explicit_endpoints_addresses_and_extras() {
    let p = ok("
name: x
addressing: {ipv6: none}
nodes:
  a: {routes: [{dst: default, via: 192.168.1.2}]}
  b: {}
links:
  - endpoints: [{node: a, iface: wan0, ip: [192.168.1.1/24]}, {node: b, ip: 192.168.1.2/24, mac: '02:aa:00:00:00:01'}]
    jitter: {amount: 1ms, distribution: pareto, correlation: 25%}
    loss: {model: gilbert-elliott, p: 1%, r: 20%}
    queue: 64KiB
    mtu: 9000
    reorder: {probability: 5%, gap: 3}
");
    let a = &p.nodes[0];
    assert_eq!(a.ifaces[0].name, "wan0");
    assert_eq!(a.ifaces[0].mtu, 9000);
    assert_eq!(a.ifaces[0].addrs.len(), 1);
    assert_eq!(p.nodes[1].ifaces[0].mac, [2, 0xaa, 0, 0, 0, 1]);
    assert!(a.routes.iter().any(|r| r.dst.to_string() == "0.0.0.0/0"));
    let f = &p.links[0].forward;
    assert_eq!(f.jitter.distribution, Distribution::Pareto);
    assert_eq!(f.queue, Some(QueueLimit::Bytes(65536)));
    assert_eq!(f.reorder.gap, 3);
    assert!(matches!(f.loss, Loss::GilbertElliott { h, k, .. } if h == 0.0 && k == 1.0));
}

fn one_error(text: &str) -> String {
    let e = bad(text);
    e.to_string()
}

/// Each case's scenario (made by `make`) fails with an error that says what it gives.
fn each_error_says(make: impl Fn(&str) -> String, cases: &[(&str, &str)]) {
    for (input, says) in cases {
        let m = make(input);
        assert!(m.contains(says), "{input}: {m}");
    }
}

#[test]
fn single_mistakes_name_file_line_and_field() {
    each_error_says(one_error, &[
        // unknown node
        ("nodes: {a: {}, b: {}}\nlinks:\n  - endpoints: [a, c]\n", "t.yaml:3:20: links[0].endpoints[1]: unknown node 'c'"),
        // duplicate node name
        ("nodes:\n  a: {}\n  a: {}\n", "t.yaml:3:3: nodes.a: 'a' is given twice (first on line 2)"),
        // loss out of range
        ("nodes: {a: {}, b: {}}\nlinks:\n  - {endpoints: [a, b], loss: 150%}\n", "t.yaml:3:31: links[0].loss: must be between 0% and 100%, got 150%"),
        // negative delay
        ("nodes: {a: {}, b: {}}\nlinks:\n  - endpoints: [a, b]\n    delay: -5ms\n", "t.yaml:4:12: links[0].delay: must not be negative, got '-5ms'"),
        // unknown unit
        ("nodes: {a: {}, b: {}}\nlinks:\n  - endpoints: [a, b]\n    bandwidth: 10MB/s\n", "t.yaml:4:16: links[0].bandwidth: unknown unit 'MB/s'"),
        // half addressed link is an error
        ("nodes: {a: {}, b: {}}\nlinks:\n  - endpoints: [{node: a, ip: 10.9.0.1/24}, b]\n", "a has an IPv4 address but b has none"),
        // gateway must be connected
        ("nodes:\n  a: {routes: [{dst: 1.2.3.0/24, via: 9.9.9.9}]}\n  b: {}\nlinks:\n  - endpoints: [a, b]\n", "gateway 9.9.9.9 is not on any subnet of node 'a'"),
        // unknown shaper
        ("nodes: {a: {}, b: {}}\nlinks:\n  - {endpoints: [a, b], bandwidth: 1Gbit, shaper: tc}\n", "t.yaml:3:51: links[0].shaper: 'tc' is not a shaper: engine (exact serialization, the default) or kernel"),
    ]);
    // Given, per link or direction and in the defaults.
    let plan = ok("nodes: {a: {}, b: {}}\ndefaults: {link: {shaper: kernel}}\nlinks:\n  - {endpoints: [a, b], bandwidth: 1Gbit, reverse: {shaper: engine}}\n");
    assert_eq!(plan.links[0].forward.shaper, vemu_link::Shaper::Kernel);
    assert_eq!(plan.links[0].reverse.shaper, vemu_link::Shaper::Engine);
}

#[test]
fn yaml_syntax_error() {
    let m = one_error("nodes: {a: {}, b: {}\nlinks: [\n");
    assert!(m.starts_with("t.yaml:") && m.contains("YAML syntax error"), "{m}");
}

#[test]
fn missing_file() {
    let e = load(Path::new("/nonexistent/lab.yaml"), None).unwrap_err();
    assert!(e.to_string().starts_with("/nonexistent/lab.yaml: cannot read"), "{e}");
}

#[test]
fn all_errors_are_reported_at_once() {
    let e = bad("
nodes: {a: {}, b: {}}
links:
  - {endpoints: [a, b], delay: 5 parsecs, loss: 101%}
  - {endpoints: [a, zz]}
  - {endpoints: [a, a]}
  - {endpoints: [a, b], lossy: 1%}
");
    assert_eq!(e.errors.len(), 5, "{e}");
    assert!(e.to_string().contains("unknown field 'lossy'"));
    assert!(e.to_string().contains("cannot join node 'a' to itself"));
}

#[test]
fn small_mtu_with_ipv6_is_an_error() {
    let m = one_error("nodes: {a: {}, b: {}}\nlinks:\n  - {endpoints: [a, b], mtu: 100}\n");
    assert!(
        m.contains("t.yaml:3:5: links[0].mtu: IPv6 needs an MTU of at least 1280 bytes, got 100"),
        "{m}"
    );
    ok("addressing: {ipv6: none}\nnodes: {a: {}, b: {}}\nlinks:\n  - {endpoints: [a, b], mtu: 100}\n");
}

const LAN: &str = "
nodes:
  r1: {loopback: [10.255.0.1/32]}
  r2: {}
  h1: {}
  h2:
    files:
      /etc/demo/info: |
        host {{ name }} id {{ router_id }}
        {% for i in ifaces %}{{ i.name }} {{ i.ipv4_prefix }} {{ i.kind }}
        {% endfor %}
    run: ['echo {{ iface.eth0.ipv6 }}']
links:
  - endpoints: [r1, r2]
segments:
  lan1:
    delay: 1ms
    members:
      - r2
      - h1
      - {node: h2, vlan: 7, ingress: {loss: 10%}}
";

#[test]
fn lan_segments_get_a_subnet_ports_and_routes() {
    let p = ok(LAN);
    assert_eq!(p.segments.len(), 1);
    let g = &p.segments[0];
    assert_eq!(g.members.len(), 3);
    assert_eq!(g.members[0].egress.delay_ns, 1_000_000);
    assert_eq!(g.members[2].ingress.loss, Loss::Bernoulli { rate: 0.1, correlation: 0.0 });
    assert_eq!(g.members[2].egress.loss, Loss::None);
    assert_eq!(g.members[2].vlan, 7);
    assert_eq!(g.members[0].vlan, 1);
    // The LAN takes a /24 from the pool first; the link takes the next /30.
    let h1 = &p.nodes[2];
    assert_eq!(h1.ifaces[0].addrs[0].to_string(), "10.0.0.2/24");
    assert_eq!(h1.ifaces[0].addrs[1].to_string(), "fd00::2/64");
    assert_eq!(p.nodes[0].ifaces[0].addrs[0].to_string(), "10.0.1.1/30");
    // h1 reaches the r1-r2 link and r1's loopback through r2 on the LAN (the IPv6 one
    // merged with the LAN's sibling /64).
    let r: Vec<String> =
        h1.routes.iter().map(|r| format!("{} via {}", r.dst, r.via.unwrap())).collect();
    assert_eq!(
        r,
        ["10.0.1.0/30 via 10.0.0.1", "10.255.0.1/32 via 10.0.0.1", "fd00::/63 via fd00::1"]
    );
    // r1 reaches the LAN through r2.
    let r: Vec<String> =
        p.nodes[0].routes.iter().map(|r| format!("{} via {}", r.dst, r.via.unwrap())).collect();
    assert_eq!(r, ["10.0.0.0/24 via 10.0.1.2", "fd00::/63 via fd00:0:0:1::2"]);
    assert!(p.hosts.iter().any(|(a, n)| n == "r1" && a.to_string() == "10.255.0.1"));
}

#[test]
fn files_and_run_commands_are_templates() {
    let p = ok(LAN);
    let h2 = &p.nodes[3];
    assert_eq!(h2.files[0].path, "/etc/demo/info");
    assert_eq!(h2.files[0].content, "host h2 id 10.0.0.3\neth0 10.0.0.3/24 lan\n\n");
    assert_eq!(h2.files[0].mode, 0o644);
    assert_eq!(h2.run, ["echo fd00::3"]);
}

#[test]
fn delays_and_rates_that_would_overflow_are_refused() {
    let m = one_error(
        "nodes: {a: {}, b: {}}\nlinks:\n  - endpoints: [a, b]\n    delay: 99999999999999999999s\n",
    );
    assert!(m.contains("links[0]") && m.contains("delay must be at most 1 hour"), "{m}");
    let m = one_error("nodes: {a: {}, b: {}}\nlinks:\n  - endpoints: [a, b]\n    bandwidth: 1000000000000000000000Tbit\n");
    assert!(m.contains("bandwidth must be at most 1Tbit"), "{m}");
    let m = one_error("nodes: {a: {}, b: {}}\nlinks:\n  - endpoints: [a, b]\n    jitter: 2h\n");
    assert!(m.contains("jitter must be at most 1 hour"), "{m}");
    ok("nodes: {a: {}, b: {}}\nlinks:\n  - endpoints: [a, b]\n    delay: 1h\n    bandwidth: 1Tbit\n");
}

#[test]
fn the_labs_storage_has_a_size() {
    assert_eq!(ok("nodes: {a: {}}\n").storage_bytes, vemu_scenario::DEFAULT_STORAGE_BYTES);
    assert_eq!(ok("nodes: {a: {}}\nstorage: 64MiB\n").storage_bytes, 64 << 20);
    let m = one_error("nodes: {a: {}}\nstorage: 1KiB\n");
    assert!(m.contains("t.yaml:2:10: storage: storage must be at least 16MiB"), "{m}");
}

#[test]
fn names_that_fail_at_up_are_caught_by_check() {
    let m = one_error("nodes:\n  a:\n    files:\n      /etc/t/x: a\n      /etc/t/x/y: b\n");
    assert!(
        m.contains("t.yaml:5:7: nodes.a.files./etc/t/x/y: '/etc/t/x' is also a file of this node"),
        "{m}"
    );
    for bad in ["..", "all", "default", "."] {
        let m = one_error(&format!("nodes: {{a: {{}}, b: {{}}}}\nlinks:\n  - endpoints: [{{node: a, iface: '{bad}'}}, b]\n"));
        assert!(m.contains(&format!("interface name '{bad}' must be")), "{m}");
    }
    let m = one_error("nodes: {a: {}, b: {}}\nsegments:\n  \"r,a\\nd/../i;o\":\n    kind: lan\n    members: [a, b]\n");
    assert!(m.contains("segment name") && m.contains("must be 1-32 characters"), "{m}");
    let m = one_error("nodes: {a: {}, b: {}}\nlinks:\n  - {endpoints: [a, b], name: 'x,y'}\n");
    assert!(m.contains("link name 'x,y' must be"), "{m}");
}

#[test]
fn endless_or_special_files_are_refused() {
    // Devices, FIFOs and directories are not read at all (a read of /dev/zero never ends).
    let m = one_error("nodes:\n  a:\n    files:\n      /etc/z: {from: /dev/zero}\n");
    assert!(
        m.contains(
            "t.yaml:4:22: nodes.a.files./etc/z.from: cannot read /dev/zero: not a regular file"
        ),
        "{m}"
    );
    let m = one_error("nodes:\n  a:\n    files:\n      /etc/z: {from: /tmp}\n");
    assert!(m.contains("not a regular file"), "{m}");
    let w = "nodes: {a: {}, b: {}}\nsegments:\n  r:\n    kind: wireless\n    members: [a, b]\n    trace: /dev/zero\n";
    let m = one_error(w);
    assert!(m.contains("cannot read ns-2 trace '/dev/zero': not a regular file"), "{m}");
    let e = load(Path::new("/dev/zero"), None).unwrap_err();
    assert!(e.to_string().contains("not a regular file"), "{e}");
    // Files over the limit are refused by their size, before reading.
    let big = std::env::temp_dir().join(format!("vemu-big-{}", std::process::id()));
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(vemu_scenario::MAX_NODE_FILE_BYTES + 1).unwrap();
    let m = one_error(&format!(
        "nodes:\n  a:\n    files:\n      /etc/z: {{from: {}}}\n",
        big.display()
    ));
    let _ = std::fs::remove_file(&big);
    assert!(m.contains("more than the 16777216 allowed"), "{m}");
}

#[test]
fn hostile_trace_indices_name_the_line() {
    let dir = std::env::temp_dir().join(format!("vemu-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("t.ns2"), "$node_(0) set X_ 1.0\n$node_(50000000) set X_ 1.0\n")
        .unwrap();
    let y = "nodes: {a: {}, b: {}}\nsegments:\n  r:\n    kind: wireless\n    members: [a, b]\n    trace: t.ns2\n";
    std::fs::write(dir.join("lab.yaml"), y).unwrap();
    let e = load(&dir.join("lab.yaml"), None).unwrap_err();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(e.to_string().contains("t.ns2:2: bad node reference"), "{e}");
}

#[test]
fn alias_bomb_is_refused() {
    let mut y = String::from("x0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        y += &format!("x{i}: &a{i} [{}]\n", vec![format!("*a{}", i - 1); 10].join(", "));
    }
    y += "nodes: {a: {}}\n";
    let m = one_error(&y);
    assert!(m.contains("alias bomb"), "{m}");
}

#[test]
fn bad_files_and_templates_are_reported() {
    let m = one_error("nodes:\n  a:\n    files:\n      etc/x: y\n");
    assert!(m.contains("t.yaml:4:7: nodes.a.files.etc/x: 'etc/x' is not an absolute path"), "{m}");
    let m = one_error("nodes:\n  a:\n    files:\n      /usr/x: y\n");
    assert!(m.contains("not in a node's private directories"), "{m}");
    let m = one_error("nodes:\n  a:\n    files:\n      /etc/x: '{{ nope }}'\n");
    assert!(m.contains("t.yaml:4:7: nodes.a.files./etc/x: template error"), "{m}");
    assert!(m.contains("line 1 of the template"), "{m}");
    let m = one_error("nodes:\n  a:\n    files:\n      /etc/x: {from: /nonexistent/file}\n");
    assert!(m.contains("cannot read /nonexistent/file"), "{m}");
}

#[test]
fn bad_segments_are_reported() {
    let m = one_error("nodes: {a: {}, b: {}}\nsegments:\n  s: {members: [a]}\n");
    assert!(m.contains("segments.s.members: a segment needs at least 2 members, found 1"), "{m}");
    let m = one_error("nodes: {a: {}, b: {}}\nsegments:\n  s: {members: [a, b, a]}\n");
    assert!(m.contains("already a member"), "{m}");
    let m =
        one_error("nodes: {a: {}, b: {}}\nsegments:\n  s: {members: [a, {node: b, vlan: 5000}]}\n");
    assert!(
        m.contains("segments.s.members[1].vlan: expected a VLAN number from 1 to 4094, got '5000'"),
        "{m}"
    );
    let m = one_error("nodes: {a: {}, b: {}}\nsegments:\n  s: {kind: bus, members: [a, b]}\n");
    assert!(m.contains("unknown segment kind 'bus'"), "{m}");
    let m = one_error("nodes: {a: {}, b: {}}\nsegments:\n  s: {ipv4: 192.168.1.0/24, members: [a, {node: b, ip: 10.1.1.1/24}]}\n");
    assert!(m.contains("address 10.1.1.1/24 is not in the segment's subnet 192.168.1.0/24"), "{m}");
}

#[test]
fn segment_subnets_are_sized_and_can_be_given() {
    let members: Vec<String> = (0..300).map(|i| format!("n{i}")).collect();
    let nodes: String = members.iter().map(|m| format!("  {m}: {{}}\n")).collect();
    let p =
        ok(&format!("nodes:\n{nodes}segments:\n  big: {{members: [{}]}}\n", members.join(", ")));
    assert_eq!(p.nodes[299].ifaces[0].addrs[0].to_string(), "10.0.1.44/23");
    let p = ok("nodes: {a: {}, b: {}}\nsegments:\n  s: {ipv4: 192.168.7.0/24, ipv6: none, members: [a, {node: b, ip: 192.168.7.1/24}]}\n");
    assert_eq!(p.nodes[0].ifaces[0].addrs, vec!["192.168.7.2/24".parse().unwrap()]);
    assert_eq!(p.nodes[1].ifaces[0].addrs, vec!["192.168.7.1/24".parse().unwrap()]);
}

#[test]
fn loopback_pools() {
    let p = ok("addressing: {loopback_ipv4: 10.255.0.0/24, loopback_ipv6: 'fd00:ff::/64'}\nnodes: {a: {}, b: {loopback: [10.9.9.9/32]}}\nlinks:\n  - endpoints: [a, b]\n");
    assert_eq!(
        p.nodes[0].loopback.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        ["10.255.0.1/32", "fd00:ff::1/128"]
    );
    assert_eq!(
        p.nodes[1].loopback.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        ["10.9.9.9/32", "fd00:ff::2/128"]
    );
    let r: Vec<String> =
        p.nodes[0].routes.iter().map(|r| format!("{} via {}", r.dst, r.via.unwrap())).collect();
    assert_eq!(r, ["10.9.9.9/32 via 10.0.0.2", "fd00:ff::2/128 via fd00::2"]);
}

#[test]
fn timeline_events_are_planned_and_checked() {
    use vemu_scenario::{Direction, EventAction, EventTarget};
    let base = "nodes: {a: {}, b: {}}\nlinks:\n  - endpoints: [a, b]\nevents:\n";
    let p = ok(&format!(
        "{base}  - {{at: 5s, link: a:b, set: {{delay: 100ms}}}}\n  - {{every: 10s, until: 60s, link: b:a, direction: forward, cycle: [{{bandwidth: 1Mbit}}, {{bandwidth: 10Mbit}}]}}\n  - {{at: 1s, link: a:b, ramp: {{from: {{delay: 10ms}}, to: {{delay: 200ms}}, over: 60s}}}}\n  - {{at: 2s, node: a, run: 'echo hi'}}\n  - {{at: 3s, node: b, state: stop}}\n  - {{at: 4s, link: a:b, state: down}}\n"
    ));
    assert_eq!(p.events.len(), 6);
    assert_eq!(p.events[0].at_ns, 5_000_000_000);
    assert_eq!(p.events[1].at_ns, 0);
    assert_eq!(p.events[1].every_ns, Some(10_000_000_000));
    assert_eq!(
        p.events[1].target,
        EventTarget::Link { spec: "b:a".into(), direction: Direction::Forward }
    );
    assert!(matches!(
        &p.events[2].action,
        EventAction::Ramp { over_ns: 60_000_000_000, step_ns: 1_000_000_000, .. }
    ));
    assert_eq!(p.events[4].action, EventAction::State(false));
    for (bad, want) in [
        ("  - {at: 1s, link: a:c, set: {delay: 1ms}}\n", "events[0]: no node named 'c'"),
        ("  - {at: 1s, node: z, run: x}\n", "unknown node 'z'"),
        ("  - {at: 1s, link: a:b}\n", "needs one action"),
        ("  - {at: 1s, link: a:b, set: {delay: 1ms}, state: up}\n", "one action, found"),
        ("  - {at: 1s, node: a, set: {delay: 1ms}}\n", "'set' does not apply to a node"),
        ("  - {at: 1s, link: a:b, state: stop}\n", "a link's state is 'up' or 'down'"),
        (
            "  - {at: 1s, link: a:b, ramp: {from: {delay: 1ms}, to: {loss: 1%}, over: 1s}}\n",
            "needs 'delay' in both",
        ),
        ("  - {at: 1s, link: a:b, cycle: [{loss: 1%}, {loss: 2%}]}\n", "a cycle needs 'every'"),
        ("  - {at: 1s, link: a:b, set: {loss: 150%}}\n", "between 0% and 100%"),
        ("  - {link: a:b, set: {loss: 1%}}\n", "needs 'at'"),
    ] {
        let m = one_error(&format!("{base}{bad}"));
        assert!(m.contains(want), "{bad}: {m}");
    }
}

const RADIO: &str = "
seed: 9
nodes: {a: {}, b: {}, c: {}}
segments:
  air:
    kind: wireless
    area: 1000x200
    mobility: {model: random-waypoint, speed: 0-20, pause: 2s}
    members:
      - {node: a, position: [10, 20]}
      - {node: b, mobility: static}
      - c
";

#[test]
fn wireless_segments_plan_radios_positions_and_mobility() {
    use vemu_radio::mobility::Mobility;
    use vemu_radio::propagation::Model;
    let p = ok(RADIO);
    let g = &p.segments[0];
    let w = g.wireless.as_ref().expect("a wireless segment");
    // ns-2's defaults: two-ray ground, 250 m, 11 Mbit/s, no CSMA, carrier sense 2.2 × range.
    assert_eq!(w.medium.model, Model::TwoRayGround);
    assert!((w.medium.model.range_m(&w.medium.radio) - 250.0).abs() < 0.01);
    assert_eq!((w.medium.rate_bps, w.medium.csma, w.tick_ns), (11_000_000, false, 100_000_000));
    assert!((w.medium.carrier_sense_m - 550.0).abs() < 0.01);
    assert_eq!(w.radios[0].start, vemu_radio::Pos::new(10.0, 20.0));
    assert!(
        matches!(w.radios[0].mobility, Mobility::RandomWaypoint(m) if m.max_speed_mps == 20.0 && m.pause_ns == 2_000_000_000)
    );
    assert_eq!(w.radios[1].mobility, Mobility::Static);
    // Members without a position get a seeded place in the area, the same every time.
    let c = w.radios[2].start;
    assert!(c.x <= 1000.0 && c.y <= 200.0 && c != w.radios[1].start);
    assert_eq!(ok(RADIO).segments[0].wireless.as_ref().unwrap().radios[2].start, c);
    // One subnet for the channel; no static routes through it (routing daemons' job).
    assert!(p.nodes.iter().all(|n| n.ifaces.len() == 1 && n.routes.is_empty()));
    // Log-distance with its settings, CSMA and a given threshold.
    let p = ok("nodes: {a: {}, b: {}}\nsegments:\n  air: {kind: wireless, propagation: log-distance, exponent: 2.5, sigma: 3dB, rx_threshold: -80dBm, csma: true, rate: 54Mbit, tick: 20ms, members: [{node: a, position: '0,0'}, {node: b, position: [1km, 0]}]}\n");
    let w = p.segments[0].wireless.as_ref().unwrap();
    assert_eq!(w.medium.model, Model::LogDistance { exponent: 2.5, d0_m: 1.0, sigma_db: 3.0 });
    assert!((vemu_radio::dbm(w.medium.radio.rx_threshold_w) + 80.0).abs() < 1e-9);
    assert!(w.medium.csma && w.medium.rate_bps == 54_000_000 && w.tick_ns == 20_000_000);
    assert_eq!(w.radios[1].start, vemu_radio::Pos::new(1000.0, 0.0));
}

#[test]
fn wireless_errors_name_the_field() {
    let seg = |body: &str| {
        one_error(&format!(
            "nodes: {{a: {{}}, b: {{}}}}\nsegments:\n  air:\n    kind: wireless\n{body}"
        ))
    };
    each_error_says(
        seg,
        &[
            ("    propagation: rayleigh\n    members: [{node: a, position: [0, 0]}, {node: b, position: [1, 0]}]\n", "t.yaml:5:18: segments.air.propagation: unknown propagation model 'rayleigh'"),
            ("    members: [a, {node: b, position: [1, 0]}]\n", "segments.air.members[0]: member 'a' needs a 'position'"),
            ("    mobility: {model: random-walk, speed: 1-5}\n    members: [{node: a, position: [0, 0]}, {node: b, position: [1, 0]}]\n", "segments.air.mobility: 'random-walk' needs the segment's 'area'"),
            ("    area: 100x100\n    mobility: {model: random-waypoint, speed: 20-5}\n    members: [a, b]\n", "segments.air.mobility.speed: expected a speed like 5 or a range like 0-20 (m/s), got '20-5'"),
            ("    area: 100x100\n    members: [a, {node: b, position: [150, 0]}]\n", "segments.air.members[1].position: (150, 0) is outside the area 100x100"),
            ("    capacity: 10Mbit\n    members: [{node: a, position: [0, 0]}, {node: b, position: [1, 0]}]\n", "segments.air.capacity: 'capacity' applies to 'kind: lan' segments only"),
            ("    tick: 5s\n    members: [{node: a, position: [0, 0]}, {node: b, position: [1, 0]}]\n", "segments.air.tick: tick must be between 1ms and 1s"),
            ("    trace: /nonexistent.tcl\n    members: [a, b]\n", "cannot read ns-2 trace '/nonexistent.tcl'"),
        ],
    );
    let m = one_error("nodes: {a: {}, b: {}}\nsegments:\n  lan: {members: [{node: a, position: [0, 0]}, b], range: 100m}\n");
    assert!(
        m.contains("segments.lan.range: 'range' applies to 'kind: wireless' segments only"),
        "{m}"
    );
    assert!(m.contains("segments.lan.members[0].position: 'position' applies to members of 'kind: wireless' segments only"), "{m}");
    let m = one_error("nodes:\n  a: {sysctl: {kernel.panic: 1}}\n");
    assert!(m.contains("t.yaml:2:16: nodes.a.sysctl.kernel.panic: 'kernel.panic' is not a network sysctl of the node"), "{m}");
}

#[test]
fn ns2_traces_move_members_by_order_or_by_map() {
    let dir = std::env::temp_dir().join("vemu-scenario-ns2");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("moves.tcl"), "$node_(0) set X_ 5.0\n$node_(0) set Y_ 6.0\n$node_(1) set X_ 7.0\n$node_(1) set Y_ 8.0\n$ns_ at 1.0 \"$node_(1) setdest 100.0 8.0 10.0\"\n").unwrap();
    let by_order = "nodes: {a: {}, b: {}}\nsegments:\n  air: {kind: wireless, trace: moves.tcl, members: [a, b]}\n";
    let mut p = vemu_scenario::load_str_in(by_order, "t.yaml", "t", None, Some(&dir))
        .unwrap_or_else(|e| panic!("{e}"));
    // The plan names the file; its moves are read when the lab starts.
    let json = serde_json::to_string(&p).unwrap();
    assert!(json.contains("moves.tcl") && !json.contains("100.0"), "{json}");
    p.load_traces().unwrap();
    let w = p.segments[0].wireless.as_ref().unwrap();
    assert_eq!(
        (w.radios[0].start, w.radios[1].start),
        (vemu_radio::Pos::new(5.0, 6.0), vemu_radio::Pos::new(7.0, 8.0))
    );
    let mut walker =
        vemu_radio::mobility::Walker::new(w.radios[1].mobility.clone(), w.radios[1].start, 0);
    assert_eq!(walker.advance(3_000_000_000), vemu_radio::Pos::new(27.0, 8.0));
    let by_map = "nodes: {a: {}, b: {}}\nsegments:\n  air: {kind: wireless, trace: {file: moves.tcl, nodes: {a: 1}}, members: [a, {node: b, position: [1, 1]}]}\n";
    let p = vemu_scenario::load_str_in(by_map, "t.yaml", "t", None, Some(&dir))
        .unwrap_or_else(|e| panic!("{e}"));
    let w = p.segments[0].wireless.as_ref().unwrap();
    assert_eq!(
        (w.radios[0].start, w.radios[1].start),
        (vemu_radio::Pos::new(7.0, 8.0), vemu_radio::Pos::new(1.0, 1.0))
    );
    let e = vemu_scenario::load_str_in(
        &by_map.replace("a: 1", "a: 7"),
        "t.yaml",
        "t",
        None,
        Some(&dir),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("segments.air.trace.nodes.a: the trace has no $node_(7) (it has 2 nodes)"),
        "{e}"
    );
    // A file that changed between the check and the lab's start is refused.
    let mut p = vemu_scenario::load_str_in(by_map, "t.yaml", "t", None, Some(&dir)).unwrap();
    std::fs::write(dir.join("moves.tcl"), "$node_(0) set X_ 5.0\n").unwrap();
    let e = p.load_traces().unwrap_err();
    assert!(
        e.contains("moves.tcl' of segment 'air' changed since the scenario was checked"),
        "{e}"
    );
}

#[test]
fn move_events_need_a_wireless_member() {
    use vemu_scenario::EventAction;
    let yaml = format!("{RADIO}events:\n  - {{at: 5s, node: a, move: [500, 100]}}\n  - {{at: 9s, node: b, move: {{to: '10,20', speed: 5}}}}\n");
    let p = ok(&yaml);
    assert_eq!(p.events[0].action, EventAction::Move { x_m: 500.0, y_m: 100.0, speed_mps: None });
    assert_eq!(
        p.events[1].action,
        EventAction::Move { x_m: 10.0, y_m: 20.0, speed_mps: Some(5.0) }
    );
    let m = one_error("nodes: {a: {}, b: {}}\nlinks: [{endpoints: [a, b]}]\nevents:\n  - {at: 1s, node: a, move: [1, 2]}\n");
    assert!(
        m.contains("events[0]: node 'a' is not a member of a wireless segment, so it cannot move"),
        "{m}"
    );
    let m = one_error(&format!("{RADIO}events:\n  - {{at: 1s, link: air:a, move: [1, 2]}}\n"));
    assert!(m.contains("'move' does not apply to a link"), "{m}");
    let m = one_error(&format!(
        "{RADIO}events:\n  - {{at: 1s, node: a, move: {{to: [1, 2], speed: -3}}}}\n"
    ));
    assert!(
        m.contains("events[0].move.speed: expected a speed in m/s greater than 0, got '-3'"),
        "{m}"
    );
}

#[test]
fn fidelity_thresholds() {
    let p = ok("nodes: {a: {}}\nfidelity: {late: 500us, degraded: 2%, invalid: 20%, min_frames: 10, busy: 80%}\n");
    let f = &p.fidelity;
    assert_eq!(
        (f.late_ns, f.degraded_fraction, f.invalid_fraction, f.min_frames, f.busy_fraction),
        (500_000, 0.02, 0.2, 10, 0.8)
    );
    assert_eq!(ok("nodes: {a: {}}\n").fidelity, vemu_scenario::FidelityThresholds::default());
    let m = one_error("nodes: {a: {}}\nfidelity: {busy: 0.8}\n");
    assert!(m.contains("t.yaml:2:18: fidelity.busy: '0.8' needs a % sign"), "{m}");
    let m = one_error("nodes: {a: {}}\nfidelity: {degraded: 20%, invalid: 10%}\n");
    assert!(m.contains("'invalid' must be at least 'degraded'"), "{m}");
}

#[test]
fn nodes_have_their_own_pids_unless_told_otherwise() {
    let p = ok("defaults: {node: {isolation: none}}\nnodes: {a: {}, b: {isolation: pid}, c: {}}\n");
    let own: Vec<bool> = p.nodes.iter().map(|n| n.own_pids).collect();
    assert_eq!(own, [false, true, false]);
    assert!(ok("nodes: {a: {}}\n").nodes[0].own_pids, "a node has its own PIDs by default");
    let m = one_error("nodes:\n  a: {isolation: lab}\n");
    assert!(m.contains("t.yaml:2:18: nodes.a.isolation: expected 'pid' (a PID namespace and /proc of the node's own) or 'none' (the machine's PIDs), got 'lab'"), "{m}");
}

#[test]
fn node_limits_from_defaults_and_nodes_with_bounds() {
    let p = ok("defaults: {node: {cpu: 0.5, pids: 100}}\nnodes: {a: {}, b: {cpu: 2, memory: 256MiB}, c: {pids: 7}}\n");
    let l: Vec<vemu_scenario::Limits> = p.nodes.iter().map(|n| n.limits).collect();
    assert_eq!(
        l[0],
        vemu_scenario::Limits { cpu_cores: Some(0.5), memory_bytes: None, pids: Some(100) }
    );
    assert_eq!(
        l[1],
        vemu_scenario::Limits {
            cpu_cores: Some(2.0),
            memory_bytes: Some(256 << 20),
            pids: Some(100)
        }
    );
    assert_eq!(
        l[2],
        vemu_scenario::Limits { cpu_cores: Some(0.5), memory_bytes: None, pids: Some(7) }
    );
    assert!(ok("nodes: {a: {}}\n").nodes[0].limits.is_none(), "no limits by default");
    for (yaml, want) in [
        ("nodes:\n  a: {cpu: 0}\n", "t.yaml:2:12: nodes.a.cpu: expected the cores the node may use, 0.01 to 1024 (e.g. 0.5), got '0'"),
        ("nodes:\n  a: {cpu: lots}\n", "nodes.a.cpu: expected the cores the node may use"),
        ("nodes:\n  a: {memory: 1KiB}\n", "t.yaml:2:15: nodes.a.memory: memory must be at least 4MiB, got '1KiB'"),
        ("nodes:\n  a: {memory: -5}\n", "nodes.a.memory:"),
        ("nodes:\n  a: {pids: 0}\n", "t.yaml:2:13: nodes.a.pids: expected the most processes the node may have, 1 to 4194304, got '0'"),
        ("defaults: {node: {pids: 1.5}}\nnodes: {a: {}}\n", "defaults.node.pids: expected the most processes"),
    ] {
        let m = one_error(yaml);
        assert!(m.contains(want), "{yaml}: {m}");
    }
}

#[test]
fn machines_pins_and_placement() {
    let p = ok("machines: {a: 10.77.0.1, b: '10.77.0.2:9000'}\nnodes: {n1: {machine: b}, n2: {}, n3: {}, n4: {machine: a}}\nlinks:\n  - endpoints: [n1, n2]\n  - endpoints: [n2, n3]\n  - endpoints: [n3, n4]\n");
    let m: Vec<String> = p.machines.iter().map(|m| format!("{}={}", m.name, m.address)).collect();
    assert_eq!(m, ["a=10.77.0.1:14790", "b=10.77.0.2:9000"]);
    let at: Vec<usize> = p.nodes.iter().map(|n| n.machine).collect();
    // Pins hold; the free nodes follow their pinned neighbours, two nodes a machine.
    assert_eq!(at, [1, 1, 0, 0]);
    assert!(ok("nodes: {a: {}}\n").machines.is_empty());
    for (yaml, want) in [
        ("nodes:\n  a: {machine: x}\n", "t.yaml:2:16: nodes.a.machine: unknown machine 'x' (the scenario names no 'machines')"),
        ("machines: {m1: 10.0.0.1}\nnodes:\n  a: {machine: x}\n", "unknown machine 'x' (the machines are m1)"),
        ("machines: {m1: somewhere}\nnodes: {a: {}}\n", "t.yaml:1:16: machines.m1: expected the address of the machine's agent (an IP address, with ':PORT' if not 14790), got 'somewhere'"),
        (
            "machines: {m1: 10.0.0.1, m2: 10.0.0.2}\nnodes: {a: {machine: m1}, b: {}, c: {machine: m2}}\nsegments:\n  l1: {members: [a, b]}\n  l2: {members: [b, c]}\n",
            "segment 'l2' shares nodes with another segment, which keeps them on one machine, but 'a' is pinned to 'm1' and 'c' to 'm2'",
        ),
    ] {
        let m = one_error(yaml);
        assert!(m.contains(want), "{yaml}: {m}");
    }
    // A segment whose members are pinned to two machines spans them: its switch is on its
    // first member's machine, and the kernel never switches it.
    let p = ok("machines: {m1: 10.0.0.1, m2: 10.0.0.2}\nnodes: {a: {machine: m1}, b: {machine: m2}, c: {}}\nsegments:\n  lan: {members: [a, b, c]}\n");
    assert_eq!((p.nodes[0].machine, p.nodes[1].machine), (0, 1));
    assert!(p.spans(0) && !p.kernel_lan(0));
    assert_eq!(p.segment_machine(0), 0);
    let c = p.nodes[2].machine;
    assert_eq!(p.trunks(), vec![(0, 1)]);
    assert_eq!(p.trunk_tunnel(0), 3);
    assert_eq!(p.tunnel_machines(), vec![[0, 0], [1, 0], [c, 0], [1, 0]]);
    assert_eq!(p.member_tunnel(0, 2), 2);
}

/// `vemu up --machines @FILE`: a cluster file, one machine a line, problems at file:line.
#[test]
fn machines_from_a_cluster_file() {
    use vemu_scenario::Machine;
    let text = "# the lab's machines\na=10.1.0.1\n\nb 10.1.0.2:9000   # spaces work too\n";
    let list = Machine::parse_cluster(text, "cluster").unwrap();
    let m: Vec<String> = list.iter().map(|m| format!("{}={}", m.name, m.address)).collect();
    assert_eq!(m, ["a=10.1.0.1:14790", "b=10.1.0.2:9000"]);
    for (bad, want) in [
        ("a=10.1.0.1\na=10.1.0.2\n", "cluster:2: machine 'a' is named twice"),
        ("a=10.1.0.1,b=10.1.0.2\n", "cluster:1: one machine a line"),
        ("\n\na=somewhere\n", "cluster:3: expected the address"),
        ("# nothing\n", "cluster: no machines"),
    ] {
        let e = Machine::parse_cluster(bad, "cluster").unwrap_err();
        assert!(e.starts_with(want), "{bad:?}: {e}");
    }
}

/// `vemu up --machines a=ADDR,...`: the command line's machines replace the scenario's,
/// pins refer to them; bad lists are refused with the item at fault; a scenario names
/// at most MAX_MACHINES.
#[test]
fn machines_from_the_command_line() {
    use vemu_scenario::Machine;
    let list = Machine::parse_list("x=10.1.0.1, y=[fd00::2]:9000").unwrap();
    let m: Vec<String> = list.iter().map(|m| format!("{}={}", m.name, m.address)).collect();
    assert_eq!(m, ["x=10.1.0.1:14790", "y=[fd00::2]:9000"]);
    for (bad, want) in [
        ("x", "expected NAME=ADDRESS for each machine, got 'x'"),
        ("x=10.1.0.1,x=10.1.0.2", "machine 'x' is named twice"),
        ("-x=10.1.0.1", "machine name '-x' must be"),
        ("x=nowhere", "got 'nowhere'"),
        (" , ", "no machines named"),
    ] {
        let e = Machine::parse_list(bad).unwrap_err();
        assert!(e.contains(want), "{bad}: {e}");
    }
    let many: String = (0..=vemu_scenario::MAX_MACHINES)
        .map(|i| format!("m{i}=10.0.{}.{},", i / 250, i % 250 + 1))
        .collect();
    assert!(Machine::parse_list(&many).unwrap_err().contains("at most 1024 machines"));

    let dir = std::env::temp_dir().join(format!("vemu-scenario-machines-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("t.yaml");
    std::fs::write(&file, "machines: {a: 10.9.0.1}\nnodes: {n1: {machine: y}, n2: {}}\nlinks:\n  - endpoints: [n1, n2]\n").unwrap();
    let p = vemu_scenario::load_on(&file, None, list).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.machines.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(), ["x", "y"]);
    assert_eq!(p.nodes[0].machine, 1);
    // Without the list, the pin names a machine the scenario does not have.
    assert!(vemu_scenario::load(&file, None)
        .unwrap_err()
        .to_string()
        .contains("unknown machine 'y' (the machines are a)"));
    // A scenario naming too many machines.
    let mut y = String::from("machines:\n");
    for i in 0..=vemu_scenario::MAX_MACHINES {
        y.push_str(&format!("  m{i}: 10.0.{}.{}\n", i / 250, i % 250 + 1));
    }
    y.push_str("nodes: {a: {}}\n");
    assert!(one_error(&y).contains("a lab spans at most 1024 machines, this one names 1025"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Audit: `check` took 10.7 s for 10,000 nodes (every node's template context copied
/// every node's name; every LAN member searched the whole graph for routes it did not
/// need). A LAN of 20,000 hosts needs no route at all.
#[test]
fn a_big_lan_needs_no_routes() {
    let n = 20_000;
    let mut y = String::from("addressing: {ipv4: 10.0.0.0/8, ipv6: none}\nnodes:\n");
    for i in 0..n {
        y.push_str(&format!("  h{i}: {{}}\n"));
    }
    y.push_str("segments:\n  s:\n    members: [");
    y.push_str(&(0..n).map(|i| format!("h{i}")).collect::<Vec<_>>().join(", "));
    y.push_str("]\n");
    let p = ok(&y);
    assert_eq!(p.nodes.len(), n);
    assert!(p.nodes.iter().all(|x| x.routes.is_empty()));
}

#[test]
fn static_routing_has_a_bound() {
    // A tree of 3,000 nodes would hold about 9 million static routes.
    let n = 3000;
    let mut y = String::from("addressing: {ipv4: 10.0.0.0/8, ipv6: none}\nnodes:\n");
    for i in 0..n {
        y.push_str(&format!("  n{i}: {{}}\n"));
    }
    y.push_str("links:\n");
    for i in 1..n {
        y.push_str(&format!("  - endpoints: [n{}, n{i}]\n", (i - 1) / 2));
    }
    let m = one_error(&y);
    assert!(m.contains("t.yaml:1:1: routing: static routing would give the 3000 nodes up to 8997000 routes in all (more than 5000000)"), "{m}");
    assert_eq!(ok(&format!("routing: none\n{y}")).nodes.len(), n);
}

#[test]
fn ipv6_none_turns_ipv6_off_and_link_local_keeps_it() {
    let base = "nodes: {a: {}, b: {sysctl: {net.ipv6.conf.default.disable_ipv6: '0'}}}\nlinks: [{endpoints: [a, b]}]\n";
    let p = ok(&format!("addressing: {{ipv6: none}}\n{base}"));
    let off = ("net.ipv6.conf.default.disable_ipv6".to_string(), "1".to_string());
    assert_eq!(p.nodes[0].sysctls, std::slice::from_ref(&off));
    // The node's own sysctl comes after, and wins.
    assert_eq!(p.nodes[1].sysctls.first(), Some(&off));
    assert_eq!(p.nodes[1].sysctls.last().unwrap().1, "0");
    let p = ok(&format!("addressing: {{ipv6: link-local}}\n{base}"));
    assert!(p.nodes[0].sysctls.is_empty());
    assert!(p.nodes[0].ifaces[0].addrs.iter().all(|a| a.addr().is_ipv4()));
    let m = one_error(&format!("addressing: {{ipv6: local}}\n{base}"));
    assert!(
        m.contains("'local' is not an IPv6 prefix like fd00::/48 (or 'link-local', or 'none')"),
        "{m}"
    );
}

#[test]
fn lan_snooping_defaults_to_querier() {
    use vemu_switch::Snooping;
    let p = ok("nodes: {a: {}, b: {}, c: {}}\nsegments:\n  l1: {members: [a, b]}\n  l2: {snooping: on, members: [b, c]}\n  l3: {snooping: off, members: [a, c]}\n");
    let s: Vec<Snooping> = p.segments.iter().map(|g| g.snooping).collect();
    assert_eq!(s, [Snooping::Querier, Snooping::On, Snooping::Off]);
    let m =
        one_error("nodes: {a: {}, b: {}}\nsegments:\n  l: {snooping: maybe, members: [a, b]}\n");
    assert!(m.contains("segments.l.snooping: expected 'on' (snoop while a querier is heard), 'querier' (the switch is one) or 'off' (flood all multicast), got 'maybe'"), "{m}");
    // A wireless segment's receivers filter groups (on, the default) or not (off); it
    // has no switch to be a querier.
    let air = |k: &str| {
        format!("nodes: {{a: {{}}, b: {{}}}}\nsegments:\n  air: {{kind: wireless, {k}members: [{{node: a, position: [0, 0]}}, {{node: b, position: [1, 0]}}]}}\n")
    };
    assert_ne!(ok(&air("")).segments[0].snooping, Snooping::Off);
    assert_eq!(ok(&air("snooping: on, ")).segments[0].snooping, Snooping::On);
    assert_eq!(ok(&air("snooping: off, ")).segments[0].snooping, Snooping::Off);
    let m = one_error(&air("snooping: querier, "));
    assert!(m.contains("segments.air.snooping: expected 'on' (a receiver takes a group's frames only if it joined the group) or 'off' (every receiver in range takes every frame) on a wireless segment, got 'querier'"), "{m}");
}

#[test]
fn the_machine_as_a_host_node() {
    let p = ok("name: edge
addressing: {ipv6: none}
defaults:
  node: {run: [x], sysctl: {net.ipv4.conf.all.rp_filter: '0'}, cpu: 0.5}
nodes:
  me: {kind: host}
  r1: {}
  r2: {kind: namespace}
links:
  - {endpoints: [me, r1]}
  - {endpoints: [r1, r2]}
  - {endpoints: [{node: me, iface: lab9}, r2]}
");
    let me = &p.nodes[0];
    use vemu_scenario::NodeKind;
    assert_eq!(
        [me.kind, p.nodes[1].kind, p.nodes[2].kind],
        [NodeKind::Host, NodeKind::Namespace, NodeKind::Namespace]
    );
    // Interfaces the machine does not have already: vh-LAB0, or as named.
    let names: Vec<&str> = me.ifaces.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["vh-edge0", "lab9"]);
    // Nothing of defaults.node, no loopback; IPv6 off only by the per-interface rule.
    assert!(me.run.is_empty() && me.limits.is_none() && me.loopback.is_empty() && !me.own_pids);
    assert_eq!(me.sysctls, [("net.ipv6.conf.default.disable_ipv6".to_string(), "1".to_string())]);
    assert_eq!(p.nodes[1].run, ["x"]);
    // Routes to the lab's prefixes (the r1-r2 link), never a default route.
    assert!(!me.routes.is_empty() && me.routes.iter().all(|r| r.dst.prefix_len() > 0));
    // A long lab name is cut so that a number fits in an interface name (15 bytes).
    let p = ok("name: a-very-long-lab-name\nnodes: {me: {kind: host}, r: {}}\nlinks: [{endpoints: [me, r]}]\n");
    assert_eq!(p.nodes[0].ifaces[0].name, "vh-a-very-lon0");
    // What the machine cannot be given, said where.
    let e = bad("nodes:\n  me: {kind: host, loopback: [10.9.9.9/32], isolation: pid}\n  r: {}\nlinks: [{endpoints: [me, r]}]\n").to_string();
    assert!(
        e.contains("t.yaml:2:")
            && e.contains("it has no 'loopback'")
            && e.contains("it has no 'isolation'"),
        "{e}"
    );
    let e = bad("nodes:\n  me: {kind: host}\n  r: {}\nlinks: [{endpoints: [me, r]}]\nevents: [{at: 1s, node: me, state: stop}]\n").to_string();
    assert!(
        e.contains("t.yaml:5:") && e.contains("node 'me' is of kind 'host', not a node vemu makes"),
        "{e}"
    );
    let e = bad("machines: {a: 10.0.0.1, b: 10.0.0.2}\nnodes: {me: {kind: host}, r: {}}\nlinks: [{endpoints: [me, r]}]\n").to_string();
    assert!(e.contains("lab across machines is not supported yet"), "{e}");
}

#[test]
fn a_nics_wire_as_an_external_node() {
    use vemu_scenario::NodeKind;
    let p = ok("nodes:\n  dev: {kind: external, iface: enp3s0}\n  r: {}\nsegments: {lan: {kind: lan, members: [r, dev]}}\n");
    let dev = &p.nodes[0];
    assert_eq!(dev.kind, NodeKind::External);
    // Its one interface is the NIC, with the address the lab expects the device to use.
    assert_eq!(dev.ifaces.len(), 1);
    assert_eq!(dev.ifaces[0].name, "enp3s0");
    assert_eq!(dev.ifaces[0].addrs.len(), 2, "{:?}", dev.ifaces[0].addrs);
    assert!(dev.routes.is_empty() && dev.loopback.is_empty() && dev.run.is_empty());
    // Said where: no iface, keys it cannot have, two ports, one NIC twice, iface elsewhere.
    let e = bad("nodes:\n  a: {kind: external}\n  b: {kind: external, iface: x0, run: [y]}\n  c: {kind: external, iface: x0}\n  d: {iface: x1}\nlinks: [{endpoints: [d, b]}]\n").to_string();
    assert!(e.contains("t.yaml:2:") && e.contains("needs 'iface'"), "{e}");
    assert!(e.contains("t.yaml:3:") && e.contains("it has no 'run'"), "{e}");
    assert!(e.contains("t.yaml:4:") && e.contains("interface 'x0' is node 'b' already"), "{e}");
    assert!(
        e.contains("t.yaml:5:") && e.contains("names the NIC of a node of kind 'external'"),
        "{e}"
    );
    let e = bad("nodes:\n  dev: {kind: external, iface: x0}\n  r: {}\n  s: {}\nlinks: [{endpoints: [dev, r]}, {endpoints: [dev, s]}]\n").to_string();
    assert!(
        e.contains("t.yaml:2:") && e.contains("exactly one link or a member of one segment, not 2"),
        "{e}"
    );
}

const QOS: &str = "
nodes: {a: {}, b: {}, c: {}}
links:
  - endpoints: [a, b]
    bandwidth: 10Mbit
    forward:
      qos: diffserv
  - endpoints: [b, c]
    bandwidth: 10Mbit
    qos:
      - name: voice
        match: {dscp: EF}
        priority: 0
        police: {rate: 2Mbit, burst: 10KB}
      - name: video
        match: [{dscp: [AF41, AF42, AF43]}, {proto: udp, dport: 5000-5010, dst: 10.0.0.0/8}]
        weight: 4
        meter: {type: trtcm, cir: 2Mbit, cbs: 10KB, pir: 4Mbit, pbs: 20KB, color-aware: true, yellow: AF42, red: drop}
        wred: {green: {min: 30KB, max: 60KB}, red: {min: 10KB, max: 30KB, probability: 20%}}
      - name: rest
        mark: CS1
        red: {min: 20KB, max: 60KB}
        limit: 100
";

#[test]
fn qos_classes_parse_per_direction() {
    use vemu_qos::stage::{ClassLimit, ColorAction, MeterKind, QosConfig};
    let p = ok(QOS);
    assert_eq!(p.links[0].forward.qos, Some(QosConfig::Diffserv));
    assert_eq!(p.links[0].reverse.qos, None);
    let Some(QosConfig::Classes { classes }) = &p.links[1].reverse.qos else {
        panic!("{:?}", p.links[1].reverse.qos)
    };
    assert_eq!(classes.len(), 3);
    assert_eq!(
        classes[0].meter.unwrap().kind,
        MeterKind::TokenBucket { rate_bps: 2_000_000, burst_bytes: 10_000 }
    );
    let video = &classes[1];
    assert_eq!(video.rules.len(), 2);
    assert_eq!(video.rules[0].dscp, [34, 36, 38]);
    assert_eq!((video.rules[1].proto, video.rules[1].dport), (Some(17), Some((5000, 5010))));
    let m = video.meter.unwrap();
    assert!(m.color_aware);
    assert_eq!((m.yellow, m.red), (ColorAction::Mark(36), ColorAction::Drop));
    let w = video.red.unwrap();
    assert_eq!((w.green.unwrap().max_p, w.yellow, w.red.unwrap().max_p), (0.1, None, 0.2));
    assert_eq!((classes[2].set_dscp, classes[2].limit), (Some(8), Some(ClassLimit::Packets(100))));
    // From the command line and the API: the same rules.
    let patch = vemu_scenario::impairment_patch(&[("qos", "none")]).unwrap();
    assert_eq!(patch.qos, Some(None));
    let patch = vemu_scenario::impairment_patch(&[(
        "qos",
        r#"[{"name": "ef", "match": {"dscp": 46}, "priority": 0}, {"name": "be", "weight": 2}]"#,
    )])
    .unwrap();
    assert!(
        matches!(patch.qos, Some(Some(QosConfig::Classes { ref classes })) if classes[1].weight == 2)
    );
}

#[test]
fn qos_errors_name_the_field() {
    let link = |qos: &str| {
        one_error(&format!(
            "nodes: {{a: {{}}, b: {{}}}}\nlinks:\n  - endpoints: [a, b]\n    qos: {qos}\n"
        ))
    };
    each_error_says(
        link,
        &[
            ("fast", "t.yaml:4:10: links[0].qos: expected diffserv, none or a list of classes, got 'fast'"),
            ("[{name: a, match: {dscp: XX}}, {name: b}]", "links[0].qos[0].match.dscp: 'XX' is not a DSCP"),
            ("[{name: a, match: {dscp: EF}}]", "links[0].qos: exactly one class must have no 'match'"),
            ("[{name: a, meter: {type: srtcm, cir: 1Mbit, cbs: 1KB}}]", "links[0].qos[0].meter: the srtcm meter needs ebs"),
            ("[{name: a, red: {min: 50KB, max: 10KB}}]", "links[0].qos[0].red: RED needs min < max"),
            ("[{name: a, weight: 0}]", "class 'a': weight must be 1 to 1000, got 0"),
            ("[{match: {dport: 9-3}}]", "links[0].qos[0].match.dport: '9-3' is not a port or a range"),
        ],
    );
}

#[test]
fn diverted_paths_parse_and_refuse_what_they_cannot_do() {
    let p = ok("nodes: {a: {}}\ndivert:\n  - {name: web, match: 'tcp dport {80, 443}', delay: 5ms, reverse: {loss: 1%}}\n  - {match: ip6 daddr 2001:db8::/32, forward: {bandwidth: 1Mbit}}\n");
    assert_eq!(p.diverts.len(), 2);
    let (w, d) = (&p.diverts[0], &p.diverts[1]);
    assert_eq!(
        (w.name.as_str(), w.matches.as_str(), w.forward.delay_ns, w.reverse.delay_ns),
        ("web", "tcp dport {80, 443}", 5_000_000, 5_000_000)
    );
    assert_eq!(w.reverse.loss, Loss::Bernoulli { rate: 0.01, correlation: 0.0 });
    assert_eq!(
        (d.name.as_str(), d.forward.rate_bps, d.reverse.rate_bps),
        ("divert1", Some(1_000_000), None)
    );
    let one = |d: &str| one_error(&format!("nodes: {{a: {{}}}}\ndivert:\n  - {d}\n"));
    let m = one("{match: 'tcp dport 80; flush ruleset'}");
    assert!(m.contains("divert[0].match: ';' may not appear in a match"), "{m}");
    let m = one("{match: tcp dport 80 accept}");
    assert!(m.contains("'accept' is an nftables statement"), "{m}");
    let m = one("{match: tcp dport 80, duplicate: 1%}");
    assert!(m.contains("divert[0].forward: a diverted path cannot duplicate"), "{m}");
    let m = one("{delay: 1ms}");
    assert!(m.contains("divert[0]: missing 'match'"), "{m}");
    let m = one_error("machines: {m1: 10.0.0.1, m2: 10.0.0.2}\nnodes: {a: {machine: m1}, b: {machine: m2}}\ndivert:\n  - {match: tcp dport 80}\n");
    assert!(m.contains("divert: diverted paths take the controller's machine's traffic"), "{m}");
}

/// Audit (issue 39): a 200-byte template of nested loops took `check` 7.3 s and 790 MB,
/// and the controller's API as much for a body that size. Templates now run within a
/// budget of instructions and of output, and say which field went over.
#[test]
fn templates_run_within_a_bound() {
    let bomb = "nodes:\n  a:\n    files:\n      /etc/x: '{% for i in range(10000) %}{% for j in range(10000) %}x{% endfor %}{% endfor %}'\n";
    let m = one_error(bomb);
    assert!(m.contains("t.yaml:4:7: nodes.a.files./etc/x: template error: the scenario's templates run more than 20000000 instructions in all"), "{m}");
    // Output without much work: one file's cap.
    let wide = "nodes:\n  a:\n    files:\n      /etc/x: '{% for i in range(20000) %}{{ \"x\" * 1000 }}{% endfor %}'\n";
    let m = one_error(wide);
    assert!(
        m.contains("nodes.a.files./etc/x: template error: the output is larger than 16 MiB"),
        "{m}"
    );
    // Work without output: the instructions run out.
    let busy = "nodes:\n  a:\n    files:\n      /etc/x: '{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}'\n";
    let m = one_error(busy);
    assert!(m.contains("nodes.a.files./etc/x: template error: the scenario's templates run more than 20000000 instructions in all"), "{m}");
    // The budget is the scenario's, not each file's: many files that each stay under
    // the per-file cap still add up (5 x 15 MB > 64 MiB).
    let mut y = String::from("nodes:\n");
    for i in 0..5 {
        y.push_str(&format!("  n{i}:\n    files:\n      /etc/x: '{{% for i in range(15000) %}}{{{{ \"{}\" }}}}{{% endfor %}}'\n", "y".repeat(1000)));
    }
    let e = bad(&y).to_string();
    assert!(e.contains("the scenario's templates write more than 64 MiB in all"), "{e}");
    // What a real lab does stays well inside: every node's file names every node.
    let mut y = String::from("nodes:\n");
    for i in 0..300 {
        y.push_str(&format!("  n{i}: {{files: {{/etc/peers: '{{% for n in nodes %}}{{{{ n }}}} {{{{ name }}}};{{% endfor %}}'}}}}\n"));
    }
    let p = ok(&y);
    assert_eq!(p.nodes[7].files[0].content.matches(" n7;").count(), 300);
}

/// Issue 39: a tenant's scenario (a Kubernetes VemuLab) may not use what reaches beyond
/// its nodes unless allowed: each is refused at its field, before anything it names is
/// read (a file that cannot be read would say "cannot read"; a refused one does not).
#[test]
fn a_tenants_scenario_gets_only_what_it_is_allowed() {
    use vemu_scenario::{load_str_as, Reach, Trust};
    let dir = std::env::temp_dir().join(format!("vemu-tenant-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("secret"), "the agent's token\n").unwrap();
    std::fs::write(
        dir.join("t.ns2"),
        "$node_(0) set X_ 1.0\n$node_(0) set Y_ 1.0\n$node_(1) set X_ 2.0\n$node_(1) set Y_ 2.0\n",
    )
    .unwrap();
    let cases = [
        ("nodes:\n  a:\n    files: {/etc/x: {from: secret}}\n", "nodes.a.files./etc/x.from", Reach::From),
        ("nodes:\n  a:\n    files: {/etc/x: {template: secret}}\n", "nodes.a.files./etc/x.template", Reach::From),
        ("nodes: {a: {}, b: {}}\nsegments:\n  r: {kind: wireless, members: [a, b], trace: t.ns2}\n", "segments.r.trace", Reach::Trace),
        ("nodes:\n  h: {kind: host}\n  a: {}\nlinks: [{endpoints: [h, a]}]\n", "nodes.h.kind", Reach::Host),
        ("nodes:\n  dev: {kind: external, iface: enp3s0}\n  a: {}\nlinks: [{endpoints: [dev, a]}]\n", "nodes.dev.kind", Reach::External),
        ("nodes: {a: {}}\ndivert:\n  - {match: tcp dport 80, delay: 5ms}\n", "divert", Reach::Divert),
        ("nodes:\n  a: {isolation: none}\n", "nodes.a.isolation", Reach::SharedPids),
        ("defaults:\n  node: {isolation: none}\nnodes: {a: {}}\n", "defaults.node.isolation", Reach::SharedPids),
    ];
    let load =
        |y: &str, trust: &Trust| load_str_as(y, "t.yaml", "t", None, None, Some(&dir), trust);
    for (yaml, field, reach) in cases {
        // The machine's owner may.
        load(yaml, &Trust::Owner).unwrap_or_else(|e| panic!("{yaml}: {e}"));
        // A tenant may not, unless allowed that very feature.
        let others: Vec<Reach> = Reach::ALL.into_iter().filter(|r| *r != reach).collect();
        let e = load(yaml, &Trust::Tenant(others)).expect_err(yaml);
        assert_eq!(e.errors.len(), 1, "{e}");
        let (err, name) = (&e.errors[0], reach.name());
        assert_eq!(err.field, field, "{e}");
        assert!(
            err.line > 0
                && err.message.contains("refused in a tenant's lab")
                && err.message.contains(&format!("'{name}'")),
            "{e}"
        );
        load(yaml, &Trust::Tenant(vec![reach]))
            .unwrap_or_else(|e| panic!("{yaml} with {name} allowed: {e}"));
    }
    // Nothing named is read: a tenant's from: of a file that does not exist is refused,
    // not "cannot read" (which would tell the tenant what exists on the machine).
    let e = load(
        "nodes:\n  a:\n    files: {/etc/x: {from: /nonexistent/token}}\n",
        &Trust::Tenant(vec![]),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("refused") && !e.contains("cannot read"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
