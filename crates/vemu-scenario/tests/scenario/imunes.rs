//! IMUNES topology files made scenarios (`vemu import x.imn`, `vemu up x.imn`), from
//! IMUNES' own examples (tests/imunes/).

use vemu_scenario::import::imunes_file;

fn example(name: &str) -> std::path::PathBuf {
    std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/imunes")).join(name)
}

#[test]
fn the_rip_example_keeps_its_nodes_addresses_lans_and_routes() {
    let i = imunes_file(&example("RIP1.imn"), None).unwrap();
    let plan = vemu_scenario::load_str(&i.yaml, "t.yaml", "t", None)
        .unwrap_or_else(|e| panic!("{e}\n{}", i.yaml));
    assert_eq!(plan.name, "RIP1");
    let node = |n: &str| {
        plan.nodes.iter().find(|x| x.name == n).unwrap_or_else(|| panic!("{n}: {}", i.yaml))
    };
    // Routers run FRR's RIP and RIPng from their router_config.
    let r1 = node("router1");
    assert_eq!(r1.router.as_deref(), Some("frr"));
    let conf = &r1.files.iter().find(|f| f.path == "/etc/frr/frr.conf").unwrap().content;
    assert!(conf.contains("router rip\n") && conf.contains("router ripng\n"), "{conf}");
    // Interfaces and addresses as the file gives them.
    let eth0 = r1.ifaces.iter().find(|x| x.name == "eth0").unwrap();
    let addrs: Vec<String> = eth0.addrs.iter().map(|a| a.to_string()).collect();
    assert_eq!(addrs, ["10.0.0.1/24", "fc00:2::1/64"]);
    // The PC's static routes; the LAN switch a segment with the router and the PC.
    let pc = node("pc");
    assert!(pc.routes.iter().any(|r| r.dst.to_string() == "0.0.0.0/0"), "{:?}", pc.routes);
    let sw = plan.segments.iter().find(|g| g.name == "sw1").unwrap();
    assert_eq!(sw.members.len(), 2);
    // Drawn where IMUNES drew them (the LAN switch too).
    let at = |n: &str| plan.nodes.iter().find(|x| x.name == n).and_then(|x| x.canvas);
    assert!(plan.nodes.iter().all(|n| n.canvas.is_some()), "{}", i.yaml);
    assert!(sw.canvas.is_some() && at("pc") != sw.canvas, "{}", i.yaml);
    assert!(i.yaml.contains("canvas: [144, 48]"), "{}", i.yaml);
    assert_eq!(
        plan.links.iter().find(|l| l.name == "router1:router2").map(|l| l.forward.rate_bps),
        Some(Some(100_000_000))
    );
}

#[test]
fn the_ospf_example_runs_ospf_for_both_families() {
    let i = imunes_file(&example("OSPF1.imn"), None).unwrap();
    let plan = vemu_scenario::load_str(&i.yaml, "t.yaml", "t", None).unwrap();
    let routers: Vec<_> = plan.nodes.iter().filter(|n| n.router.is_some()).collect();
    assert!(routers.len() >= 3);
    for r in routers {
        let conf = &r.files.iter().find(|f| f.path == "/etc/frr/frr.conf").unwrap().content;
        assert!(conf.contains("router ospf\n") && conf.contains("ipv6 ospf6 area 0"), "{conf}");
    }
}

#[test]
fn the_ping_example_is_a_scenario() {
    let i = imunes_file(&example("ping.imn"), None).unwrap();
    vemu_scenario::load_str(&i.yaml, "t.yaml", "t", None).unwrap();
    assert!(i.nodes >= 2, "{}", i.yaml);
}

#[test]
fn the_older_tcl_form_is_read_too() {
    let i = imunes_file(&example("RIP-tcl.imn"), None).unwrap();
    let plan = vemu_scenario::load_str(&i.yaml, "t.yaml", "t", None)
        .unwrap_or_else(|e| panic!("{e}\n{}", i.yaml));
    let node = |n: &str| {
        plan.nodes.iter().find(|x| x.name == n).unwrap_or_else(|| panic!("{n}: {}", i.yaml))
    };
    // The router's own (Quagga) configuration is its startup configuration.
    let r0 = node("router0");
    let conf = &r0.files.iter().find(|f| f.path == "/etc/frr/frr.conf").unwrap().content;
    assert!(conf.contains("hostname router0") && conf.contains("router rip"), "{conf}");
    let eth0 = r0.ifaces.iter().find(|x| x.name == "eth0").unwrap();
    assert_eq!(eth0.addrs.iter().map(|a| a.to_string()).collect::<Vec<_>>(), ["10.0.0.1/24"]);
    // Hosts and PCs with their routes; links with their bandwidth and delay.
    assert!(node("pc7").routes.iter().any(|r| r.dst.to_string() == "0.0.0.0/0"));
    let l = plan.links.iter().find(|l| l.name == "router0:router1").unwrap();
    assert_eq!(l.forward.rate_bps, Some(2_048_000));
    assert_eq!(l.forward.delay_ns, 2_500_000);
    assert_eq!((i.nodes, plan.nodes.len()), (8, 8));
    assert!(plan.nodes.iter().all(|n| n.canvas.is_some()), "{}", i.yaml);
}

#[test]
fn what_cannot_be_read_says_so() {
    let e = vemu_scenario::import::imunes("node n0 {\n type router\n", "x.imn", "x").unwrap_err();
    assert!(e.contains("x.imn: line 1: a brace that is never closed"), "{e}");
    let e =
        vemu_scenario::import::imunes("{\"nodes\": {\"n0\": {\"type\": \"nat64\"}}}", "x.imn", "x")
            .unwrap_err();
    assert!(e.contains("x.imn: node n0 (n0): type 'nat64' is not one vemu makes"), "{e}");
    let e = vemu_scenario::import::imunes("{\"nodes\": 3", "x.imn", "x").unwrap_err();
    assert!(e.starts_with("x.imn: not an IMUNES topology (JSON:"), "{e}");
}

/// Issue 61: a router without `network-config` gets the configuration IMUNES writes for
/// one (its protocols, here RIP and RIPng by default), not "cannot read ''"; and a big
/// file is read in time linear in its size (a 4 MB file of 73k nodes took 85 s: the
/// links' interfaces and the nodes' names were looked up in lists).
#[test]
fn a_router_without_a_configuration_and_a_big_file_are_read() {
    let text = "node n0 {\n type router\n interface-peer {eth0 n1}\n}\nnode n1 {\n type pc\n interface-peer {eth0 n0}\n}\nlink l0 {\n nodes {n0 n1}\n}\n";
    let i = vemu_scenario::import::imunes(text, "x.imn", "x").unwrap();
    let plan = vemu_scenario::load_str(&i.yaml, "t.yaml", "t", None).unwrap();
    let r = plan.nodes.iter().find(|n| n.name == "n0").unwrap();
    let conf = &r.files.iter().find(|f| f.path == "/etc/frr/frr.conf").unwrap().content;
    assert!(conf.contains("router rip") && conf.contains("router ripng"), "{conf}");
    // A chain of 20,000 PCs (same names twice over, made unique).
    let n = 20_000;
    let mut big = String::new();
    for k in 0..n {
        let mut peers = String::new();
        if k > 0 {
            peers += &format!(" interface-peer {{eth0 n{}}}\n", k - 1);
        }
        if k + 1 < n {
            peers += &format!(" interface-peer {{eth1 n{}}}\n", k + 1);
        }
        big += &format!(
            "node n{k} {{\n type pc\n network-config {{\n  hostname pc{}\n }}\n{peers}}}\n",
            k % (n / 2)
        );
    }
    for k in 1..n {
        big += &format!("link l{k} {{\n nodes {{n{} n{k}}}\n}}\n", k - 1);
    }
    let i = vemu_scenario::import::imunes(&big, "big.imn", "big").unwrap();
    assert_eq!((i.nodes, i.links), (n, n - 1));
    assert!(i.yaml.contains("pc5-2"), "names made unique");
}

/// IMUNES' bit error rate (one bit in N) is kept as the link's `ber` in both directions
/// (issue 65), and a scenario's `ber` takes a probability or one bit in N.
#[test]
fn a_links_bit_error_rate_is_kept() {
    let text = "node n0 {\n type pc\n interface-peer {eth0 n1}\n}\nnode n1 {\n type pc\n interface-peer {eth0 n0}\n}\nlink l0 {\n nodes {n0 n1}\n ber 1000000\n}\n";
    let i = vemu_scenario::import::imunes(text, "x.imn", "x").unwrap();
    assert!(!i.warnings.iter().any(|w| w.contains("bit error")), "{:?}", i.warnings);
    let plan = vemu_scenario::load_str(&i.yaml, "t.yaml", "t", None).unwrap();
    assert_eq!((plan.links[0].forward.ber, plan.links[0].reverse.ber), (1e-6, 1e-6), "{}", i.yaml);
    let ber = |v: &str| {
        let y =
            format!("nodes: {{a: {{}}, b: {{}}}}\nlinks:\n  - {{endpoints: [a, b], ber: '{v}'}}\n");
        vemu_scenario::load_str(&y, "t.yaml", "t", None).map(|p| p.links[0].forward.ber)
    };
    assert_eq!(ber("2.5e-7").unwrap(), 2.5e-7);
    assert_eq!(ber("1/4000").unwrap(), 1.0 / 4000.0);
    for bad in ["1", "-1e-6", "1/0", "2/100", "lots"] {
        let e = ber(bad).unwrap_err().to_string();
        assert!(e.contains("links[0].ber") && e.contains("is not a bit error rate"), "{bad}: {e}");
    }
}

/// IMUNES' hub is imported as a hub (issue 65 #8): a repeater, not a learning switch.
#[test]
fn a_hub_is_imported_as_a_hub() {
    let text = "node n0 {\n type pc\n interface-peer {eth0 h}\n}\nnode n1 {\n type pc\n interface-peer {eth0 h}\n}\nnode n2 {\n type pc\n interface-peer {eth0 h}\n}\nnode h {\n type hub\n interface-peer {e0 n0}\n interface-peer {e1 n1}\n interface-peer {e2 n2}\n}\nlink l0 {\n nodes {n0 h}\n}\nlink l1 {\n nodes {n1 h}\n}\nlink l2 {\n nodes {n2 h}\n}\n";
    let i = vemu_scenario::import::imunes(text, "x.imn", "x").unwrap();
    assert!(i.yaml.contains("kind: hub"), "{}", i.yaml);
    let plan = vemu_scenario::load_str(&i.yaml, "t.yaml", "t", None).unwrap();
    assert_eq!(plan.segments[0].kind(), "hub");
    assert_eq!(plan.segments[0].members.len(), 3);
}
