//! Traffic conditioning on real links (issue 17 part 2): DiffServ classes in the engine,
//! measured with ping and iperf3 between namespaces. Run as root.

mod common;

use common::*;

const LAB: &str = "name: t-qos
addressing: {ipv6: none}
nodes:
  a: {}
  b: {run: ['iperf3 -s -D']}
links:
  - endpoints: [a, b]
    bandwidth: 10Mbit
    delay: 5ms
    qos: diffserv
";

fn rtts(out: &str) -> Vec<f64> {
    out.lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split_whitespace().next()?.parse().ok())
        .collect()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

#[test]
fn ef_keeps_its_delay_while_best_effort_tcp_fills_the_link() {
    let _g = serial();
    let lab = Lab::up("t-qos", LAB);
    assert_eq!(lab.ping("a", "10.0.0.2", 3, 0.2).1, 3);
    // Best-effort TCP saturates the 10 Mbit/s link for 8 s; meanwhile EF pings (TOS 184 =
    // DSCP 46) and best-effort pings, side by side.
    let (_, out) = lab.sh(
        "a",
        "iperf3 -c 10.0.0.2 -t 8 -P 4 -J > /tmp/qos-iperf.json & sleep 2; \
         ping -n -Q 184 -i 0.1 -c 50 10.0.0.2 > /tmp/qos-ef.txt & ping -n -i 0.1 -c 50 10.0.0.2 > /tmp/qos-be.txt; wait; \
         cat /tmp/qos-ef.txt; echo ====; cat /tmp/qos-be.txt; echo ====; cat /tmp/qos-iperf.json",
    );
    let parts: Vec<&str> = out.split("====").collect();
    assert_eq!(parts.len(), 3, "{out}");
    let (mut ef, mut be) = (rtts(parts[0]), rtts(parts[1]));
    assert!(
        ef.len() >= 45 && be.len() >= 30,
        "pings answered: EF {} BE {}\n{out}",
        ef.len(),
        be.len()
    );
    let (ef_med, be_med) = (median(&mut ef), median(&mut be));
    let iperf: serde_json::Value =
        serde_json::from_str(parts[2].trim()).unwrap_or_else(|_| panic!("iperf3: {}", parts[2]));
    let goodput = iperf["end"]["sum_received"]["bits_per_second"].as_f64().unwrap();
    eprintln!(
        "EF median {ef_med} ms (max {:.2}), BE median {be_med} ms, TCP {:.2} Mbit/s",
        ef.last().unwrap(),
        goodput / 1e6
    );
    // The round trip is 10 ms of delay plus, per direction, at most one full frame ahead
    // on the wire (1.2 ms at 10 Mbit/s); the rest is the machine's scheduling slack.
    assert!(ef_med < 16.0, "EF median {ef_med} ms");
    // Best effort waits behind the TCP flows' queue: the link really was full.
    assert!(be_med > ef_med + 5.0, "BE median {be_med} ms vs EF {ef_med} ms");
    assert!(goodput > 7e6, "TCP got {goodput} bit/s");
    // Per-class counters in the status.
    let st = lab.status();
    let classes = st["links"][0]["forward"]["stats"]["classes"].as_array().unwrap().clone();
    let class = |n: &str| classes.iter().find(|c| c["name"] == n).unwrap().clone();
    assert!(class("ef")["tx_frames"].as_u64().unwrap() >= 50, "{classes:?}");
    assert!(class("be")["tx_bytes"].as_u64().unwrap() > 8_000_000, "{classes:?}");
    assert_eq!(class("ef")["drop_police"], 0);
    // The described link says what it does; switching qos off and on at run time works.
    let o = lab.vemu(&["status"]);
    assert!(text(&o).contains("qos diffserv"), "{}", text(&o));
    let o = lab.vemu(&["link", "set", "a:b", "--qos", "none"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(lab.status()["links"][0]["forward"]["stats"]["classes"].as_array().is_none());
    let o = lab.vemu(&[
        "link",
        "set",
        "a:b",
        "--direction",
        "forward",
        "--qos",
        "[{name: ef, match: {dscp: EF}, priority: 0}, {name: rest}]",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(lab.ping("a", "10.0.0.2", 5, 0.1).1, 5);
    let st = lab.status();
    assert_eq!(st["links"][0]["forward"]["stats"]["classes"][1]["name"], "rest");
    // Bad classes are refused with the field named, and nothing changes.
    let o = lab.vemu(&["link", "set", "a:b", "--qos", "[{name: x, match: {dscp: 99}}]"]);
    assert!(!o.status.success() && text(&o).contains("'99' is not a DSCP"), "{}", text(&o));
}
