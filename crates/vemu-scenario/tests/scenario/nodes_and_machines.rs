//! Nodes (PID namespaces, limits, the machine as a host node, a NIC's wire), machines and placement, routes' bounds, IPv6, snooping.

use super::*;

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

#[test]
fn images_are_named_as_skopeo_reads_them() {
    use vemu_scenario::load_str_as;
    let dir = std::path::Path::new("/labs/x");
    let load = |y: &str| {
        load_str_as(y, "t.yaml", "t", None, None, Some(dir), &vemu_scenario::Trust::Owner)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let p = load("defaults: {node: {image: 'debian:12'}}\nnodes:\n  a: {}\n  b: {image: ./frr}\n  c: {image: /srv/bird.tar}\n  d: {image: 'oci:img:v1'}\n  e: {image: 'docker-archive:../x.tar'}\n  f: {image: 'docker://reg.example:5000/frr:9.1'}\n  h: {kind: host}\n");
    let images: Vec<Option<&str>> = p.nodes.iter().map(|n| n.image.as_deref()).collect();
    assert_eq!(
        images,
        [
            Some("docker://debian:12"),
            Some("path:/labs/x/./frr"),
            Some("path:/srv/bird.tar"),
            Some("oci:/labs/x/img:v1"),
            Some("docker-archive:/labs/x/../x.tar"),
            Some("docker://reg.example:5000/frr:9.1"),
            None,
        ]
    );
    let m = one_error("nodes:\n  a: {image: 'http://x/y'}\n");
    assert!(
        m.contains("t.yaml:2:14: nodes.a.image: 'http://x/y': images come from a registry"),
        "{m}"
    );
    let m = one_error("nodes:\n  a: {image: 'oci:'}\n");
    assert!(m.contains("nodes.a.image: 'oci:' names no file or directory after 'oci:'"), "{m}");
    let m = one_error("nodes:\n  h: {kind: host, image: x}\n");
    assert!(m.contains("nodes.h.image: a node of kind 'host'"), "{m}");
}

#[test]
fn router_kinds_start_their_software_from_a_startup_config() {
    let p = ok("nodes:\n  r1:\n    kind: frr\n    startup-config: \"router ospf\\n ospf router-id {{ router_id }}\\n\"\n    run: ['echo after']\n  r2: {kind: bird, files: {/etc/bird/bird.conf: {content: mine}}}\n  h: {kind: linux}\n");
    let r1 = &p.nodes[0];
    assert_eq!(r1.router.as_deref(), Some("frr"));
    assert_eq!(r1.run, ["/usr/lib/frr/frrinit.sh start", "echo after"]);
    let conf = r1.files.iter().find(|f| f.path == "/etc/frr/frr.conf").unwrap();
    assert!(conf.content.starts_with("router ospf\n ospf router-id "), "{}", conf.content);
    assert!(!conf.content.contains("{{"), "a startup configuration is a template");
    assert!(r1.files.iter().any(|f| f.path == "/etc/frr/daemons"));
    // The node's own file wins over its kind's.
    let r2 = &p.nodes[1];
    let conf = r2.files.iter().find(|f| f.path == "/etc/bird/bird.conf").unwrap();
    assert_eq!(conf.content, "mine");
    assert_eq!((p.nodes[2].router.as_deref(), p.nodes[2].run.len()), (None, 0));
    let m = one_error("nodes:\n  a: {kind: ceos}\n");
    assert!(
        m.contains(
            "nodes.a.kind: unknown kind 'ceos': the kinds are linux, frr, bird, host, external"
        ),
        "{m}"
    );
    let m = one_error("nodes:\n  a: {startup-config: \"x\\ny\\n\"}\n");
    assert!(m.contains("nodes.a.startup-config: a startup configuration needs a kind whose software reads it: frr, bird"), "{m}");
    let m = one_error("nodes:\n  a: {kind: frr, startup-config: no-such.conf}\n");
    assert!(m.contains("nodes.a.startup-config: cannot read no-such.conf"), "{m}");
}

#[test]
fn a_management_network_gives_each_made_node_the_next_addresses() {
    let p = ok("mgmt: {ipv6: 'fd00:20::/64'}\nnodes: {a: {}, h: {kind: host}, b: {}}\nlinks:\n  - endpoints: [a, h]\n  - endpoints: [h, b]\n");
    let m = p.mgmt.unwrap();
    assert_eq!(
        m.addresses(0).unwrap().iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        ["172.20.20.1/24", "fd00:20::1/64"]
    );
    let of = |n: &str| {
        p.nodes
            .iter()
            .find(|x| x.name == n)
            .unwrap()
            .mgmt
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(of("a"), ["172.20.20.2/24", "fd00:20::2/64"]);
    assert_eq!(of("b"), ["172.20.20.3/24", "fd00:20::3/64"]);
    assert!(of("h").is_empty(), "the machine has no mgmt0");
    assert!(ok("nodes: {a: {}}\n").mgmt.is_none());
    assert!(ok("mgmt: off\nnodes: {a: {}}\n").mgmt.is_none());
    let m = one_error("mgmt: maybe\nnodes: {a: {}}\n");
    assert!(
        m.contains(
            "t.yaml:1:7: mgmt: expected on, off or {ipv4: PREFIX, ipv6: PREFIX}, got 'maybe'"
        ),
        "{m}"
    );
    let m = one_error("mgmt: {ipv4: 10.0.0.300/24}\nnodes: {a: {}}\n");
    assert!(m.contains("mgmt.ipv4: '10.0.0.300/24' is not an IPv4 prefix"), "{m}");
    let m = one_error("mgmt: {ipv4: none}\nnodes: {a: {}}\n");
    assert!(m.contains("mgmt: a management network needs an IPv4 or an IPv6 subnet"), "{m}");
}

#[test]
fn a_node_may_have_its_own_management_addresses() {
    let p = ok("mgmt: {ipv4: 10.9.0.0/29, ipv6: 'fd00:20::/64'}\nnodes:\n  a: {}\n  b: {mgmt: {ipv4: 10.9.0.2, ipv6: 'fd00:20::99'}}\n  c: {mgmt: {ipv4: 10.9.0.6}}\n  d: {}\n");
    let of = |n: &str| {
        let node = p.nodes.iter().find(|x| x.name == n).unwrap();
        node.mgmt.iter().map(|a| a.to_string()).collect::<Vec<_>>()
    };
    // The others take the next free ones, around what b and c hold.
    assert_eq!(of("a"), ["10.9.0.3/29", "fd00:20::2/64"]);
    assert_eq!(of("b"), ["10.9.0.2/29", "fd00:20::99/64"]);
    assert_eq!(of("c"), ["10.9.0.6/29", "fd00:20::3/64"]);
    assert_eq!(of("d"), ["10.9.0.4/29", "fd00:20::4/64"]);
    let bad = |node: &str| {
        one_error(&format!("mgmt: {{ipv4: 10.9.0.0/29}}\nnodes:\n  a: {{}}\n  b: {node}\n"))
    };
    let m = bad("{mgmt: {ipv4: 10.9.0.1}}");
    assert!(m.contains("t.yaml:4:20: nodes.b.mgmt.ipv4: 10.9.0.1 is not a node's address of the management network 10.9.0.0/29 (its first address is the machine's)"), "{m}");
    let m = bad("{mgmt: {ipv4: 10.9.0.7}}");
    assert!(m.contains("10.9.0.7 is not a node's address"), "broadcast: {m}");
    let m = bad("{mgmt: {ipv4: 10.8.0.2}}");
    assert!(m.contains("10.8.0.2 is not a node's address"), "{m}");
    let m = bad("{mgmt: {ipv6: 'fd00::2'}}");
    assert!(m.contains("nodes.b.mgmt.ipv6: the management network has no IPv6 subnet"), "{m}");
    let m = bad("{mgmt: {ipv4: 'fd00::2'}}");
    assert!(
        m.contains("nodes.b.mgmt.ipv4: 'fd00::2' is not an IPv4 address like 172.20.20.11"),
        "{m}"
    );
    let m = one_error(
        "mgmt: on\nnodes:\n  a: {mgmt: {ipv4: 172.20.20.9}}\n  b: {mgmt: {ipv4: 172.20.20.9}}\n",
    );
    assert!(m.contains("t.yaml:4:20: nodes.b.mgmt.ipv4: 172.20.20.9 is also node 'a's"), "{m}");
    let m = one_error("nodes:\n  a: {mgmt: {ipv4: 172.20.20.9}}\n");
    assert!(
        m.contains("nodes.a.mgmt: the lab has no management network: give it one (mgmt: on)"),
        "{m}"
    );
    let m = one_error("mgmt: on\ndefaults: {node: {mgmt: {ipv4: 172.20.20.9}}}\nnodes: {a: {}}\n");
    assert!(m.contains("defaults.node"), "{m}");
    // Four nodes' addresses fill a /29 with the machine's (.1): a fifth has no room.
    let m = one_error("mgmt: {ipv4: 10.9.0.0/29}\nnodes:\n  a: {mgmt: {ipv4: 10.9.0.6}}\n  b: {}\n  c: {}\n  d: {}\n  e: {}\n  f: {}\n");
    assert!(m.contains("no room for node 'f'"), "{m}");
}

#[test]
fn nodes_and_segments_may_say_where_they_are_drawn() {
    let p = ok("nodes: {a: {canvas: [10, 20.5]}, b: {}, c: {}}\nsegments:\n  lan: {kind: lan, canvas: [-3, 4], members: [a, b, c]}\n");
    assert_eq!(p.nodes[0].canvas, Some([10.0, 20.5]));
    assert_eq!(p.nodes[1].canvas, None);
    assert_eq!(p.segments[0].canvas, Some([-3.0, 4.0]));
    for bad in ["[1]", "[1, 2, 3]", "here", "[1, x]", "[1e9, 0]"] {
        let m = one_error(&format!("nodes: {{a: {{canvas: {bad}}}, b: {{}}}}\nlinks: [[a, b]]\n"));
        assert!(m.contains("nodes.a.canvas: expected where it is drawn, [x, y]"), "{bad}: {m}");
    }
}
