//! The scenario loader: plans from scenario text, and errors that name file, line and
//! field. Shared helpers and scenarios here; one module per topic.

use std::path::Path;

use vemu_link::{Distribution, Loss, QueueLimit};
use vemu_scenario::{load, load_str, load_str_in, Errors, Plan};

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

mod clab;
mod errors;
mod expect;
mod generate;
mod imunes;
mod lans_and_files;
mod links;
mod nodes_and_machines;
mod qos_and_trust;
mod timeline_and_radio;
