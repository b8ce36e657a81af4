//! `expect:`: checks the lab judges (issue 43), resolved in the plan; their errors.

use super::*;
use vemu_scenario::expect::Check;

const RING: &str = "
addressing: {loopback_ipv4: 10.255.0.0/24}
nodes: {r1: {}, r2: {}, r3: {}, h: {kind: host}}
links:
  - endpoints: [r1, r2]
  - endpoints: [r2, r3]
  - endpoints: [r3, r1]
  - endpoints: [h, r1]
events:
  - {name: cut-r1-r2, at: 3s, link: r1:r2, state: down}
";

#[test]
fn checks_are_resolved_to_nodes_addresses_and_the_lab_clock() {
    let text = format!(
        "{RING}expect:
  - {{reach: {{from: r1, to: r3}}, within: 5s}}
  - {{name: back after the cut, after: cut-r1-r2, reach: {{from: r1, to: r2, port: 179}}, within: 2s}}
  - {{at: 1s, route: {{node: r1, prefix: 10.255.0.3/32, via: r3}}, within: 30s}}
  - {{run: {{node: r2, cmd: 'test -e /etc/hosts', exit: 0, output: ''}}, within: 1s}}
  - {{fidelity: ok, within: 10s}}
  - {{drops: {{link: r2:r1, at_most: 10}}, within: 10s}}
  - {{after: cut-r1-r2, flow: {{from: r1, to: r2, rate: 50, size: 200, duration: 10s, delivery: 99%, delay_p95: 30ms, delay_max: 1s, goodput: 70kbit}}}}
"
    );
    let plan = ok(&text);
    let e = &plan.expect;
    assert_eq!(e.len(), 7);
    match &e[6].check {
        Check::Flow(f) => {
            assert_eq!((f.from.as_str(), f.rate_pps, f.size_bytes), ("r1", 50.0, 200));
            assert_eq!(f.duration_ns, 10_000_000_000);
            assert_eq!(f.bounds.delivery, Some(0.99));
            assert_eq!(f.bounds.delay_ns, [(95, 30_000_000), (100, 1_000_000_000)]);
            assert_eq!(f.bounds.goodput_bps, Some(70_000));
        }
        c => panic!("{c:?}"),
    }
    // Judged once it has run, and 2 s more for what is on its way; from the cut.
    assert_eq!((e[6].start_ns, e[6].within_ns), (3_000_000_000, 12_000_000_000));
    assert_eq!(e[6].name, "flow r1 → r2 (50 packets/s of 200 B for 10 s)");
    assert!(matches!(&e[5].check, Check::Drops { link: 0, at_most: 10, .. }), "{:?}", e[5].check);
    assert_eq!(e[5].name, "drops on r2:r1 at most 10");
    assert_eq!(e[0].name, "reach r1 → r3");
    assert_eq!((e[0].start_ns, e[0].within_ns), (0, 5_000_000_000));
    assert!(
        matches!(&e[0].check, Check::Reach { to, port: None, .. } if to.to_string() == "10.255.0.3"),
        "{:?}",
        e[0].check
    );
    assert_eq!((e[1].name.as_str(), e[1].start_ns), ("back after the cut", 3_000_000_000));
    assert_eq!(e[1].after.as_deref(), Some("cut-r1-r2"));
    match &e[2].check {
        Check::Route { via_addrs, .. } => {
            assert!(via_addrs.iter().any(|a| a.to_string() == "10.255.0.3"), "{via_addrs:?}")
        }
        c => panic!("{c:?}"),
    }
    assert_eq!(e[2].start_ns, 1_000_000_000);
    assert!(matches!(&e[3].check, Check::Run { exit: 0, .. }));
    assert_eq!(e[4].name, "fidelity at most ok");
    // Addresses are taken as they are.
    let plan = ok(&format!("{RING}expect: [{{reach: {{from: r1, to: 192.0.2.1}}, within: 1s}}]\n"));
    assert!(
        matches!(&plan.expect[0].check, Check::Reach { to_name, .. } if to_name == "192.0.2.1")
    );
    // No `expect:`, no checks.
    assert!(ok(RING).expect.is_empty());
}

#[test]
fn bad_checks_are_named_by_line_and_field() {
    let cases = [
        ("{reach: {from: r9, to: r1}, within: 1s}", "expect[0]: unknown node 'r9'"),
        ("{reach: {from: h, to: r1}, within: 1s}", "node 'h' is of kind 'host'"),
        (
            "{reach: {from: r1, to: nowhere}, within: 1s}",
            "'nowhere' is neither a node of the lab nor an address",
        ),
        (
            "{after: cut-r9, reach: {from: r1, to: r2}, within: 1s}",
            "expect[0].after: no event is named 'cut-r9' (named events: cut-r1-r2)",
        ),
        ("{reach: {from: r1, to: r2}}", "a check needs 'within'"),
        ("{reach: {from: r1, to: r2}, within: 0s}", "'within' must be more than 0"),
        ("{within: 1s}", "a check needs one of reach, route, run, fidelity, drops, flow"),
        ("{flow: {from: r1, to: r2, rate: 10, duration: 5s}}", "a flow check needs a bound"),
        ("{flow: {from: r1, rate: 10, duration: 5s, delivery: 99%}}", "flow needs 'from' and 'to'"),
        (
            "{flow: {from: r1, to: r1, rate: 10, duration: 5s, delivery: 99%}}",
            "two different nodes",
        ),
        (
            "{flow: {from: r1, to: h, rate: 10, duration: 5s, delivery: 99%}}",
            "node 'h' is of kind 'host'",
        ),
        (
            "{flow: {from: r1, to: r2, rate: 0, duration: 5s, delivery: 99%}}",
            "expected packets per second",
        ),
        (
            "{flow: {from: r1, to: r2, rate: 10, size: 10, duration: 5s, delivery: 99%}}",
            "24 to 65000 bytes",
        ),
        ("{flow: {from: r1, to: r2, rate: 10, duration: 5s, delivery: 99}}", "needs a % sign"),
        (
            "{flow: {from: r1, to: r2, rate: 100000, duration: 100s, delivery: 9%}}",
            "at most 1000000 packets",
        ),
        (
            "{flow: {from: r1, to: r2, rate: 10, duration: 5s, delivery: 9%}, within: 2s}",
            "leaves the flow no time",
        ),
        ("{drops: {link: r1:r9, at_most: 1}, within: 1s}", "no node named 'r9'"),
        ("{drops: {link: r1:r2}, within: 1s}", "drops needs 'link'"),
        ("{drops: {link: r1:r2, at_most: -1}, within: 1s}", "at_most"),
        (
            "{reach: {from: r1, to: r2}, fidelity: ok, within: 1s}",
            "a check has one kind, found reach, fidelity",
        ),
        ("{at: 1s, after: cut-r1-r2, reach: {from: r1, to: r2}, within: 1s}", "not both"),
        ("{route: {node: r1, prefix: ten}, within: 1s}", "'ten' is not a prefix"),
        ("{run: {node: r1}, within: 1s}", "run needs 'node' and 'cmd'"),
        ("{fidelity: great, within: 1s}", "expected ok or degraded"),
        ("{reach: {from: r1, to: r2, port: 0}, within: 1s}", "port 0 cannot be connected to"),
        ("{reach: {from: r1, to: r2}, within: 1s, when: now}", "when"),
    ];
    for (entry, said) in cases {
        let e = bad(&format!("{RING}expect:\n  - {entry}\n")).to_string();
        assert!(e.contains(said), "{entry}: {e}");
        assert!(e.contains("t.yaml:12:"), "{entry}: not at its line: {e}");
    }
    let twice = bad(&format!(
        "{RING}expect:\n  - {{reach: {{from: r1, to: r2}}, within: 1s}}\n  - {{reach: {{from: r1, to: r2}}, within: 2s}}\n"
    ))
    .to_string();
    assert!(twice.contains("expect[1]: two checks are named 'reach r1 → r2'"), "{twice}");
}

/// `valley_free`: the relationship file is read with the scenario (relative to it), the
/// node must run BIRD or FRR, its AS comes from its name or `asn`; every mistake is
/// named by line and field.
#[test]
fn valley_free_checks_read_their_relationships_and_know_their_router() {
    let dir = std::env::temp_dir().join(format!("vemu-valley-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("rel.txt"), "1|2|0\n1|3|-1\n").unwrap();
    std::fs::write(dir.join("bad.txt"), "1|2|7\n").unwrap();
    let lab = |entry: &str| {
        format!(
            "nodes:\n  as1: {{kind: bird}}\n  r9: {{kind: frr}}\n  h: {{}}\nlinks:\n  - endpoints: [as1, r9]\n  - endpoints: [r9, h]\nexpect:\n  - {entry}\n"
        )
    };
    let load = |entry: &str| load_str_in(&lab(entry), "t.yaml", "t", None, Some(&dir));
    let plan = load("{valley_free: {node: as1, relationships: rel.txt, routes: 2}, within: 9s}")
        .unwrap_or_else(|e| panic!("{e}"));
    match &plan.expect[0].check {
        Check::ValleyFree { node, asn, software, graph, routes } => {
            assert_eq!((node.as_str(), *asn, software.name(), *routes), ("as1", 1, "bird", 2));
            assert_eq!(graph.ases.len(), 3);
        }
        c => panic!("{c:?}"),
    }
    assert_eq!(plan.expect[0].name, "valley-free routes at as1 (AS 1)");
    let frr =
        load("{valley_free: {node: r9, asn: 3, relationships: rel.txt}, within: 9s}").unwrap();
    assert!(matches!(&plan.expect[0].check, Check::ValleyFree { .. }));
    assert!(
        matches!(&frr.expect[0].check, Check::ValleyFree { asn: 3, software, routes: 1, .. } if software.name() == "frr")
    );
    for (entry, said) in [
        (
            "{valley_free: {node: as1, relationships: none.txt}, within: 1s}",
            "cannot read AS-relationship",
        ),
        ("{valley_free: {node: as1, relationships: bad.txt}, within: 1s}", "bad.txt:1"),
        ("{valley_free: {node: as1}, within: 1s}", "valley_free needs 'node'"),
        ("{valley_free: {node: h, relationships: rel.txt}, within: 1s}", "runs no BGP router"),
        ("{valley_free: {node: r9, relationships: rel.txt}, within: 1s}", "give its 'asn'"),
        ("{valley_free: {node: r9, asn: 7, relationships: rel.txt}, within: 1s}", "AS 7 is not in"),
        ("{valley_free: {node: as1, relationships: rel.txt, routes: many}, within: 1s}", "routes"),
    ] {
        let e = load(entry).expect_err(entry).to_string();
        assert!(e.contains(said), "{entry}: {e}");
        assert!(e.contains("t.yaml:"), "{entry}: {e}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
