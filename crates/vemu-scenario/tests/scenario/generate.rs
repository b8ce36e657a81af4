//! Generated topologies (`generate:`): their nodes and links beside the written ones,
//! tier settings, routing, a geometric graph on a radio plane, and refusals.

use super::*;

#[test]
fn a_fat_tree_is_generated_beside_written_nodes_with_settings_by_tier() {
    let p = ok("
nodes:
  server: {}
generate:
  ft:
    fat-tree: {k: 4}
    link: {delay: 1ms}
    tiers: {core: {bandwidth: 10Gbit, delay: 2ms}}
    host: {run: ['sleep 1d']}
links:
  - endpoints: [server, ftc0]
addressing: {ipv4: 10.0.0.0/8, ipv4_prefix: 31, ipv6: none}
");
    assert_eq!(p.nodes.len(), 1 + 36);
    assert_eq!(p.links.len(), 1 + 48);
    let node = |n: &str| p.nodes.iter().position(|x| x.name == n).unwrap();
    // The written link comes first, then the generator's in its order.
    assert_eq!((p.links[0].a.node, p.links[0].b.node), (node("server"), node("ftc0")));
    let core = &p.links[1];
    assert_eq!((core.a.node, core.b.node), (node("ftc0"), node("ftp0a0")));
    assert_eq!(core.forward.delay_ns, 2_000_000);
    assert_eq!(core.forward.rate_bps, Some(10_000_000_000));
    let host_link = p.links.iter().find(|l| p.nodes[l.b.node].name == "ftp0e0h0").unwrap();
    assert_eq!(host_link.forward.delay_ns, 1_000_000);
    assert_eq!(host_link.forward.rate_bps, None);
    // A tier's links hold one copy of their settings, both directions (a million-node
    // lab's links would otherwise hold millions).
    let cores: Vec<_> = p.links[1..].iter().filter(|l| l.forward.delay_ns == 2_000_000).collect();
    assert_eq!(cores.len(), 16);
    assert!(cores.iter().all(|l| std::sync::Arc::ptr_eq(&l.forward, &core.forward)
        && std::sync::Arc::ptr_eq(&l.reverse, &core.forward)));
    assert!(!std::sync::Arc::ptr_eq(&host_link.forward, &core.forward));
    assert_eq!(p.nodes[node("ftp3e1h1")].run, ["sleep 1d"]);
    assert!(p.nodes[node("ftc1")].run.is_empty());
    // /31 per link; static routes reach across the tree from every host.
    let h = &p.nodes[node("ftp0e0h0")];
    assert_eq!(h.ifaces[0].addrs[0].prefix_len(), 31);
    assert!(!h.routes.is_empty());
    // Generated nodes are drawn in layers.
    assert!(p.nodes[node("ftc0")].canvas.is_some());
}

#[test]
fn ospf_generators_run_frr_on_their_routers_and_route_their_hosts_statically() {
    let p = ok("
generate:
  ls:
    leaf-spine: {spines: 2, leaves: 3, hosts: 2}
    routing: ospf
");
    let spine = p.nodes.iter().find(|n| n.name == "lss0").unwrap();
    assert_eq!(spine.router.as_deref(), Some("frr"));
    assert!(spine.routes.is_empty(), "a router routes with OSPF, not static routes");
    let conf = &spine.files.iter().find(|f| f.path == "/etc/frr/frr.conf").unwrap().content;
    assert!(conf.contains("router ospf\n ospf router-id 10."), "{conf}");
    assert!(conf.contains("interface eth0\n ip ospf network point-to-point"), "{conf}");
    assert!(conf.contains(" ip ospf area 0"), "{conf}");
    // One family only: the configuration still renders (IPv4 only, and IPv6 only).
    for a in ["{ipv6: none}", "{ipv4: none}"] {
        let p = ok(&format!("addressing: {a}\ngenerate:\n  ls: {{leaf-spine: {{spines: 1, leaves: 2}}, routing: ospf}}\n"));
        assert_eq!(p.nodes[0].router.as_deref(), Some("frr"));
    }
    let host = p.nodes.iter().find(|n| n.name == "lsl0h0").unwrap();
    assert!(host.router.is_none());
    assert!(!host.routes.is_empty(), "a host's routes are static");
    // A node's own `routing:` and `routing: none` for the lab.
    let p = ok("routing: none\nnodes:\n  a: {routing: static}\n  b: {}\n  c: {}\nlinks:\n  - endpoints: [a, b]\n  - endpoints: [b, c]\n");
    assert!(!p.nodes[0].routes.is_empty());
    assert!(p.nodes[2].routes.is_empty());
}

#[test]
fn random_generators_follow_their_seed() {
    let text = |seed: u64| {
        format!(
            "generate:\n  ba: {{barabasi-albert: {{n: 50, m: 2}}, seed: {seed}}}\nrouting: none\n"
        )
    };
    let ends = |p: &Plan| p.links.iter().map(|l| (l.a.node, l.b.node)).collect::<Vec<_>>();
    assert_eq!(ends(&ok(&text(1))), ends(&ok(&text(1))));
    assert_ne!(ends(&ok(&text(1))), ends(&ok(&text(2))));
    assert_eq!(ok(&text(1)).links.len(), 2 + 2 * 47);
    for g in [
        "grid: {rows: 3, cols: 3}",
        "torus: {rows: 3, cols: 4}",
        "waxman: {n: 30}",
        "geometric: {n: 30, radius: 400}",
        "transit-stub: {transits: 2, transit-size: 3, stubs: 1, stub-size: 2}",
        "fat-tree: 2",
    ] {
        let p = ok(&format!("generate:\n  g: {{{g}}}\nrouting: none\n"));
        assert!(!p.nodes.is_empty() && !p.links.is_empty(), "{g}");
    }
}

#[test]
fn a_geometric_graph_can_stand_on_a_radio_plane() {
    let p = ok("
generate:
  m:
    geometric: {n: 20, radius: 250, side: 800}
    radio: {range: 250m}
routing: none
");
    assert!(p.links.is_empty());
    assert_eq!(p.segments.len(), 1);
    let w = p.segments[0].wireless.as_ref().expect("a wireless segment");
    assert_eq!(p.segments[0].members.len(), 20);
    assert_eq!(p.segments[0].name, "m");
    let _ = w;
}

#[test]
fn bad_generators_are_refused_at_their_line() {
    let m = one_error("generate:\n  ft: {fat-tree: {k: 3}}\n");
    assert!(m.contains("t.yaml:2:") && m.contains("k must be even, got 3"), "{m}");
    let m = one_error("generate:\n  x: {grid: {rows: 2}}\n");
    assert!(m.contains("'grid' needs 'cols'"), "{m}");
    let m = one_error("generate:\n  x: {grid: {rows: 2, cols: 2}, torus: {rows: 2, cols: 2}}\n");
    assert!(m.contains("exactly one of"), "{m}");
    let m = one_error("generate:\n  x: {fat-tree: 200}\n");
    assert!(m.contains("more than 1000000 nodes"), "{m}");
    // Sizes that would make the generator itself work for long are refused first.
    let m =
        one_error("generate:\n  x: {transit-stub: {transits: 1, transit-size: 1000000, p: 1}}\n");
    assert!(m.contains("more than 4000000 links"), "{m}");
    let m = one_error("generate:\n  x: {barabasi-albert: {n: 100000, m: 1000}}\n");
    assert!(m.contains("at most 100, got 1000"), "{m}");
    let m = one_error("generate:\n  x: {barabasi-albert: {n: 1000000, m: 5}}\n");
    assert!(m.contains("more than 4000000 links"), "{m}");
    let m = one_error("generate:\n  x: {waxman: {n: 20000}}\n");
    assert!(m.contains("at most 10000"), "{m}");
    let m = one_error("generate:\n  x: {fat-tree: 4, tiers: {spine: {delay: 1ms}}}\n");
    assert!(m.contains("spine"), "{m}");
    let m = one_error("generate:\n  x: {fat-tree: 4, link: {delay: soon}}\n");
    assert!(m.contains("t.yaml:2:") && m.contains("delay"), "{m}");
    let m = one_error("nodes:\n  xc0: {}\ngenerate:\n  x: {fat-tree: 4}\n");
    assert!(m.contains("makes node 'xc0', which the scenario has already"), "{m}");
    let m = one_error("generate:\n  x: {grid: {rows: 2, cols: 2}, radio: {}}\n");
    assert!(m.contains("only 'geometric' has it"), "{m}");
    let m = one_error("generate:\n  x: {grid: {rows: 2, cols: 2}, routing: bgp}\n");
    assert!(m.contains("expected 'static', 'none' or 'ospf'"), "{m}");
}

#[test]
fn links_can_be_31s_and_127s_both_addresses_used() {
    let p = ok("nodes: {a: {}, b: {}}\nlinks:\n  - endpoints: [a, b]\naddressing: {ipv4: 10.0.0.0/8, ipv4_prefix: 31, ipv6: 'fd00::/48', ipv6_prefix: 127}\n");
    let addrs =
        |n: usize| p.nodes[n].ifaces[0].addrs.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    assert_eq!(addrs(0), ["10.0.0.0/31", "fd00::/127"]);
    assert_eq!(addrs(1), ["10.0.0.1/31", "fd00::1/127"]);
    let m = one_error("nodes: {a: {}}\naddressing: {ipv4_prefix: 32}\n");
    assert!(m.contains("from 8 to 31"), "{m}");
}
