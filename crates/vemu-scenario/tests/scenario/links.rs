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
    assert!(p.hosts().any(|(a, n)| n == "n3" && a.to_string() == "10.0.0.6"));
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

/// A scratch directory with `files` in it, and a scenario whose one link has `keys`.
fn with_files(
    tag: &str,
    files: &[(&str, &[u8])],
    keys: &str,
) -> (Result<vemu_scenario::Plan, vemu_scenario::Errors>, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("vemu-delay-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    let y = format!("nodes: {{a: {{}}, b: {{}}}}\nlinks:\n  - endpoints: [a, b]\n    {keys}\n");
    std::fs::write(dir.join("lab.yaml"), y).unwrap();
    let r = load(&dir.join("lab.yaml"), None);
    let _ = std::fs::remove_dir_all(&dir);
    (r, dir)
}

/// Issue 65 #2: a measured series sets the delay (its mean) and the jitter (its σ, as a
/// table of its own quantiles); a netem table file shapes a jitter; bad files are named.
#[test]
fn measured_delays_and_netem_tables_come_from_files() {
    let (p, _) = with_files(
        "text",
        &[("rtt.txt", b"# ping\n10\n10\n10\n30ms\n")],
        "delay: {measured: rtt.txt, correlation: 25%}",
    );
    let f = &p.unwrap().links[0].forward;
    assert_eq!(f.delay_ns, 15_000_000);
    assert_eq!(f.jitter.amount_ns, 8_660_254); // σ of 10,10,10,30 = 5·√3
    assert_eq!(f.jitter.correlation, 0.25);
    let Distribution::Table(t) = &f.jitter.distribution else { panic!("{:?}", f.jitter) };
    assert_eq!(t.name, "rtt.txt");
    assert_eq!(t.values.len(), 4);

    let (p, _) = with_files(
        "netem",
        &[("my.dist", b"-8192 0 8192\n")],
        "jitter: {amount: 2ms, distribution: {table: my.dist}}",
    );
    let f = &p.unwrap().links[0].forward;
    assert_eq!(f.jitter.distribution.name(), "table my.dist");

    let (e, dir) = with_files("bad", &[("rtt.txt", b"10\nslow\n")], "delay: {measured: rtt.txt}");
    let m = e.unwrap_err().to_string();
    assert!(m.contains(&format!("{}: line 2:", dir.join("rtt.txt").display())), "{m}");
    let (e, _) = with_files(
        "both",
        &[("rtt.txt", b"1\n2\n")],
        "delay: {measured: rtt.txt}\n    jitter: 1ms",
    );
    assert!(e.unwrap_err().to_string().contains("a measured delay sets the jitter too"));
    let (e, _) =
        with_files("series", &[("rtt.txt", b"1\n2\n")], "delay: {measured: rtt.txt, series: rtt}");
    assert!(e.unwrap_err().to_string().contains("'series' is for captures"));
    let (e, _) = with_files("none", &[], "delay: {measured: nope.txt}");
    assert!(e.unwrap_err().to_string().contains("cannot read measured delays"));
    let (e, _) = with_files("name", &[], "jitter: {amount: 1ms, distribution: lognormal}");
    assert!(e.unwrap_err().to_string().contains("exponential or {table: FILE}"));
}

/// Ping round trips and inter-arrival times of a capture (pcap and pcapng), as delays.
#[test]
fn a_capture_gives_its_pings_half_round_trips_or_its_inter_arrival_times() {
    use pcap_file::pcap::{PcapPacket, PcapWriter};
    use std::time::Duration;
    let frame = |req: bool, seq: u16| {
        let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        let (src, dst) =
            if req { ([10, 0, 0, 1], [10, 0, 0, 2]) } else { ([10, 0, 0, 2], [10, 0, 0, 1]) };
        let b = b.ipv4(src, dst, 64);
        let b = if req { b.icmpv4_echo_request(7, seq) } else { b.icmpv4_echo_reply(7, seq) };
        let mut out = Vec::new();
        b.write(&mut out, &[0u8; 56]).unwrap();
        out
    };
    // Pings 100 ms apart with round trips of 20, 40, 20, 60 ms, and a reply to nothing.
    let mut pcap = Vec::new();
    {
        let mut w = PcapWriter::new(&mut pcap).unwrap();
        let mut put = |ms: u64, data: Vec<u8>| {
            w.write_packet(&PcapPacket::new(Duration::from_millis(ms), data.len() as u32, &data))
                .unwrap();
        };
        for (i, rtt) in [20u64, 40, 20, 60].iter().enumerate() {
            put(i as u64 * 100, frame(true, i as u16));
            put(i as u64 * 100 + rtt, frame(false, i as u16));
        }
        put(1000, frame(false, 99));
    }
    let (p, _) =
        with_files("pcap", &[("ping.pcap", &pcap)], "delay: {measured: ping.pcap, series: rtt}");
    let f = &p.unwrap().links[0].forward;
    assert_eq!(f.delay_ns, 17_500_000); // half of the mean round trip, 35 ms
    let (p, _) = with_files(
        "ia",
        &[("ping.pcap", &pcap)],
        "delay: {measured: ping.pcap, series: inter-arrival}",
    );
    // 9 frames over 1000 ms: 8 gaps, 125 ms on average.
    assert_eq!(p.unwrap().links[0].forward.delay_ns, 125_000_000);
    let (e, _) = with_files("noseries", &[("ping.pcap", &pcap)], "delay: {measured: ping.pcap}");
    assert!(e.unwrap_err().to_string().contains("a capture needs 'series'"));

    // The same as pcapng with nanosecond ticks (as vemu's own captures are written).
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
    use pcap_file::pcapng::blocks::interface_description::{
        InterfaceDescriptionBlock, InterfaceDescriptionOption,
    };
    let mut ng = Vec::new();
    {
        let mut w = pcap_file::pcapng::PcapNgWriter::new(&mut ng).unwrap();
        w.write_pcapng_block(InterfaceDescriptionBlock {
            linktype: pcap_file::DataLink::ETHERNET,
            snaplen: 0,
            options: vec![InterfaceDescriptionOption::IfTsResol(9)],
        })
        .unwrap();
        for (i, rtt) in [20u64, 40].iter().enumerate() {
            for (req, at_ms) in [(true, i as u64 * 100), (false, i as u64 * 100 + rtt)] {
                let data = frame(req, i as u16);
                w.write_pcapng_block(EnhancedPacketBlock {
                    interface_id: 0,
                    timestamp: Duration::from_millis(at_ms),
                    original_len: data.len() as u32,
                    data: data.into(),
                    options: vec![],
                })
                .unwrap();
            }
        }
    }
    let (p, _) =
        with_files("ng", &[("ping.pcapng", &ng)], "delay: {measured: ping.pcapng, series: rtt}");
    assert_eq!(p.unwrap().links[0].forward.delay_ns, 15_000_000);
}

/// Policy routing (issue 65 #4): rules with their selectors, priorities and families;
/// routes in tables; every mistake named at its field.
#[test]
fn policy_rules_and_tables_are_planned_and_checked() {
    use vemu_scenario::policy::{RuleAction, MAIN_TABLE};
    let p = ok("
nodes:
  r:
    routes:
      - {dst: 10.9.0.0/24, via: 10.0.0.2, table: 100}
      - {dst: 'fd09::/64', via: 'fd00::2', table: 7}
    rules:
      - {from: 10.1.0.0/16, to: 10.9.0.0/24, iif: eth0, proto: tcp, dport: 5000-5010, sport: 80, dscp: AF41, table: 100}
      - {to: 'fd09::/64', table: 7, priority: 50}
      - {proto: icmp, action: prohibit}
      - {oif: lo, table: main}
  b: {}
links:
  - endpoints: [r, b]
");
    let r = &p.nodes[0];
    let rules = &r.rules;
    assert_eq!(rules.len(), 4);
    assert_eq!((rules[0].priority, rules[1].priority, rules[2].priority), (1000, 50, 1020));
    assert_eq!(rules[0].v6, Some(false));
    assert_eq!(
        (rules[0].sport, rules[0].dport, rules[0].dscp, rules[0].proto),
        (Some((80, 80)), Some((5000, 5010)), Some(34), Some(6))
    );
    assert_eq!(rules[0].iif.as_deref(), Some("eth0"));
    assert_eq!(rules[1].v6, Some(true));
    assert_eq!((rules[2].v6, rules[2].action), (Some(false), RuleAction::Prohibit));
    assert_eq!((rules[3].v6, rules[3].action), (None, RuleAction::Table(MAIN_TABLE)));
    assert!(r.routes.iter().any(|x| x.table == 100 && x.dst.to_string() == "10.9.0.0/24"));
    assert!(r.routes.iter().any(|x| x.table == 7));
    // A static route to the same prefix stays in main beside a table's.
    let errs = [
        ("rules: [{table: 100}]", "a rule needs at least one of from"),
        ("rules: [{to: 10.0.0.0/8}]", "a rule needs 'table'"),
        ("rules: [{to: 10.0.0.0/8, table: 100, action: blackhole}]", "not both"),
        ("rules: [{dport: 80, table: main}]", "ports need 'proto: tcp'"),
        ("rules: [{from: 10.0.0.0/8, to: 'fd00::/8', table: main}]", "different IP families"),
        ("rules: [{to: 'fd00::/8', proto: icmp, table: main}]", "other IP family"),
        ("rules: [{to: 10.0.0.0/8, table: 255}]", "the kernel's own"),
        ("rules: [{to: 10.0.0.0/8, table: video}]", "not a routing table"),
        ("rules: [{to: 10.0.0.0/8, table: main, priority: 32766}]", "1-32765"),
        ("rules: [{dscp: XX, table: main}]", "not a DSCP"),
        ("rules: [{iif: eth7, table: main}]", "node 'r' has no interface 'eth7' (it has lo, eth0)"),
        ("rules: [{to: 10.0.0.0/8, table: 100}]", "node 'r' has no route in table 100"),
        ("rules: [{to: 10.0.0.0/8, action: drop}]", "unknown action 'drop'"),
    ];
    for (rules, want) in errs {
        let m = one_error(&format!(
            "nodes:\n  r:\n    {rules}\n  b: {{}}\nlinks:\n  - endpoints: [r, b]\n"
        ));
        assert!(m.contains(want) && m.contains("nodes.r.rules[0]"), "{rules}: {m}");
    }
    let m =
        one_error("defaults:\n  node: {rules: [{to: 10.0.0.0/8, table: main}]}\nnodes: {a: {}}\n");
    assert!(m.contains("defaults.node.rules"), "{m}");
    let m = one_error("nodes:\n  h: {kind: host, rules: [{to: 10.0.0.0/8, table: main}]}\n  a: {}\nlinks: [{endpoints: [h, a]}]\n");
    assert!(m.contains("nodes.h.rules"), "{m}");
}

/// Per-flow impairments (issue 65 #3): flows on a link (both directions) or one
/// direction, each a match and impairments of its own; mistakes named at the field.
#[test]
fn flows_are_parsed_per_direction_and_checked() {
    let p = ok("
nodes: {a: {}, b: {}}
links:
  - endpoints: [a, b]
    delay: 5ms
    flows:
      - {match: {proto: udp, dport: 5000-5010, dst: 10.0.0.0/8}, delay: 100ms, loss: 5%, bandwidth: 1Mbit, queue: 10}
    reverse:
      flows: [{match: {proto: icmpv6, icmp-type: echo-reply}, jitter: 2ms}]
");
    let (f, r) = (&p.links[0].forward, &p.links[0].reverse);
    assert_eq!(f.delay_ns, 5_000_000);
    assert_eq!(f.flows.len(), 1);
    let fl = &f.flows[0];
    assert_eq!((fl.matches.proto, fl.matches.dport), (Some(17), Some((5000, 5010))));
    assert_eq!((fl.impairments.delay_ns, fl.impairments.rate_bps), (100_000_000, Some(1_000_000)));
    assert_eq!(fl.impairments.queue, Some(QueueLimit::Packets(10)));
    // The flow starts from an ideal wire, not the link's 5 ms.
    assert_eq!(r.flows[0].impairments.delay_ns, 0);
    assert_eq!(r.flows[0].matches.icmp_type, Some(129));
    let errs = [
        ("flows: [{delay: 1ms}]", "a flow needs 'match'"),
        ("flows: [{match: {}, delay: 1ms}]", "a match needs at least one of"),
        ("flows: [{match: {icmp-type: 8}, delay: 1ms}]", "an ICMP type needs 'proto: icmp'"),
        ("flows: [{match: {proto: icmp, icmp-type: ping}}]", "not an ICMP type"),
        ("flows: [{match: {proto: tcp}, qos: diffserv}]", "unknown field 'qos'"),
        ("flows: [{match: {proto: tcp}, mtu: 1400}]", "unknown field 'mtu'"),
        ("flows: [{match: {proto: tcp}, loss: 300%}]", "must be between 0% and 100%"),
    ];
    for (flows, want) in errs {
        let m = one_error(&format!(
            "nodes: {{a: {{}}, b: {{}}}}\nlinks:\n  - endpoints: [a, b]\n    {flows}\n"
        ));
        assert!(m.contains(want) && m.contains("links[0].flows[0]"), "{flows}: {m}");
    }
}

/// A phantom load from a trace of rates (issue 65 #6), with a period; errors named.
#[test]
fn a_phantom_load_follows_a_trace_file() {
    let trace: &[u8] = b"# background load\n0 0\n10s 2Mbit\n20.5 none\n";
    let (p, _) = with_files(
        "ph",
        &[("bg.txt", trace)],
        "bandwidth: 10Mbit\n    forward: {phantom: {trace: bg.txt, period: 30s}}",
    );
    let f = &p.unwrap().links[0].forward;
    let t = f.phantom_trace.as_ref().unwrap();
    assert_eq!(t.steps, vec![(0, 0), (10_000_000_000, 2_000_000), (20_500_000_000, 0)]);
    assert_eq!((t.period_ns, f.phantom_bps), (Some(30_000_000_000), 0));
    let (e, _) = with_files("ph2", &[("bg.txt", trace)], "forward: {phantom: {trace: bg.txt}}");
    assert!(e
        .unwrap_err()
        .to_string()
        .contains("reaches 2000000 bit/s: give a bandwidth above it"));
    let (e, _) = with_files(
        "ph3",
        &[("bg.txt", b"0 1Mbit\n5s lots\n")],
        "bandwidth: 10Mbit\n    phantom: {trace: bg.txt}",
    );
    let m = e.unwrap_err().to_string();
    assert!(m.contains("bg.txt: line 2:"), "{m}");
    let (e, _) = with_files(
        "ph4",
        &[("bg.txt", b"0 1Mbit\n5s 2Mbit\n")],
        "bandwidth: 10Mbit\n    phantom: {trace: bg.txt, period: 5s}",
    );
    assert!(e.unwrap_err().to_string().contains("period must be longer"));
}
