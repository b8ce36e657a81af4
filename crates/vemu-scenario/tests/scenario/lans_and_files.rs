//! LAN segments and their subnets, files and templates, bounds on sizes and names, hostile input.

use super::*;

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
    assert!(p.hosts().any(|(a, n)| n == "r1" && a.to_string() == "10.255.0.1"));
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
fn ip_none_leaves_a_bridge_port_unaddressed() {
    // A node bridging its ports (as Mininet's switches are made): its ends have no
    // address while the hosts' ends have theirs, on links and on a LAN alike.
    let p = ok("addressing: {ipv4: 10.0.0.0/8, ipv6: none}\nnodes: {h1: {}, h2: {}, sw: {}}\nlinks:\n  - endpoints: [{node: h1, ip: [10.0.0.1/8]}, {node: sw, ip: none}]\n  - endpoints: [{node: h2, ip: none}, {node: sw, ip: none}]\nsegments:\n  lan:\n    members: [{node: h1, ip: [192.168.0.1/24]}, {node: h2, ip: none}, sw]\n");
    let addrs = |n: usize| -> Vec<Vec<String>> {
        p.nodes[n].ifaces.iter().map(|i| i.addrs.iter().map(|a| a.to_string()).collect()).collect()
    };
    assert_eq!(addrs(0), [vec!["10.0.0.1/8"], vec!["192.168.0.1/24"]]);
    assert_eq!(addrs(1), [Vec::<String>::new(), Vec::new()]);
    // (sw's LAN port, not marked, is given the segment's next address.)
    assert_eq!(addrs(2), [Vec::<String>::new(), Vec::new(), vec!["192.168.0.2/24".to_string()]]);
    // Without it, one addressed end is still a mistake.
    let m = one_error(
        "nodes: {a: {}, b: {}}\nlinks:\n  - endpoints: [{node: a, ip: [10.0.0.1/24]}, b]\n",
    );
    assert!(m.contains("give both ends an address, or neither"), "{m}");
}

/// A hub segment (issue 65 #8): its rate, span (the collision window) and queue; routed
/// through by static routing as a LAN; a repeater's keys only.
#[test]
fn a_hub_segment_is_planned_and_checked() {
    let p = ok("
nodes: {a: {}, b: {}, c: {routes: [{dst: 10.9.0.0/24, via: 10.0.0.1}]}}
segments:
  h: {kind: hub, rate: 100Mbit, span: 200m, queue_frames: 20, members: [a, b, {node: c, delay: 1ms}]}
");
    let g = &p.segments[0];
    assert_eq!(g.kind(), "hub");
    assert!(g.routed());
    let hub = g.wireless.as_ref().unwrap().medium.hub.unwrap();
    assert_eq!((hub.rate_bps, hub.prop_ns, hub.queue_frames), (100_000_000, 1_000, 20));
    assert_eq!(g.members[2].egress.delay_ns, 1_000_000);
    assert_eq!(g.snooping, vemu_switch::Snooping::Off);
    for (keys, want) in [
        ("{kind: hub, members: [a, b], capacity: 1Mbit}", "'capacity' does not apply to a hub"),
        ("{kind: hub, members: [a, b], range: 100m}", "'range' does not apply to a hub"),
        ("{kind: hub, members: [a, {node: b, vlan: 2}]}", "unknown field 'vlan'"),
        ("{kind: lan, members: [a, b], span: 100m}", "'span' applies to 'kind: hub' segments only"),
        ("{kind: switch, members: [a, b]}", "expected 'lan', 'wireless' or 'hub'"),
    ] {
        let m = one_error(&format!("nodes: {{a: {{}}, b: {{}}}}\nsegments:\n  h: {keys}\n"));
        assert!(m.contains(want), "{keys}: {m}");
    }
}

#[test]
fn a_hub_of_too_many_members_is_refused() {
    let names: Vec<String> = (0..1025).map(|i| format!("n{i}")).collect();
    let nodes: String = names.iter().map(|n| format!("{n}: {{}}, ")).collect();
    let y = format!(
        "nodes: {{{nodes}}}\nsegments:\n  h: {{kind: hub, members: [{}]}}\n",
        names.join(", ")
    );
    let m = one_error(&y);
    assert!(m.contains("a hub has at most 1024 members"), "{m}");
}
