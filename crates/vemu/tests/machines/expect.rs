//! A lab's checks (`expect:`) judged across machines by `vemu test --machines`: probes
//! run in nodes of the other machine through its agent; a flow's records gathered from
//! both; a link's drops counted by both engines.

use super::*;

/// Two machines, a node on each: a check probed in b's node (through b's agent), a
/// command's output there, a flow from a to b judged by its records, the link's drops —
/// all passed, and nothing left on either machine.
#[test]
fn a_labs_checks_are_judged_across_machines() {
    let _g = serial();
    let m = Machines::start("ve", 94, &["a", "b"]);
    let yaml = "name: xe
routing: static
addressing: {ipv6: none}
nodes: {h1: {machine: a}, h2: {machine: b}}
links:
  - {endpoints: [h1, h2], delay: 5ms}
expect:
  - {name: b reaches a, reach: {from: h2, to: h1}, within: 20s}
  - {name: b's name, run: {node: h2, cmd: 'hostname', output: h2}, within: 20s}
  - {name: flow a to b, at: 2s, flow: {from: h1, to: h2, rate: 50, size: 500, duration: 3s, delivery: 95%, delay_p95: 50ms}}
  - {name: no drops, drops: {link: h1:h2, at_most: 0}, within: 6s}
";
    let file = std::env::temp_dir().join("vemu-tests").join("xe.yaml");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, yaml).unwrap();
    m.labs.lock().unwrap().push("xe".into());
    let o = m.vemu(&["test", file.to_str().unwrap(), "--machines", "a=10.94.0.1,b=10.94.0.2"]);
    let t = text(&o);
    eprintln!("{t}");
    for said in [
        "b reaches a: passed, ",
        "b's name: passed, ",
        "flow a to b: passed, delivery ",
        "no drops: passed, 0 drops ≤ 0",
        "4 checks: 4 passed, 0 failed",
    ] {
        assert!(t.contains(said), "{said}: {t}");
    }
    assert_eq!(o.status.code(), Some(0), "{t}");
    m.nothing_left("vemu test");
}
