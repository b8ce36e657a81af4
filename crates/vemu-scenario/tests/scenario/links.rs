//! Plans of links: the examples, names of parallel links, static routes, explicit endpoints.

use super::*;

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
