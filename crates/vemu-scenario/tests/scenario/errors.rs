//! Mistakes: each names file, line and field; several at once; syntax and missing files.

use super::*;

#[test]
fn single_mistakes_name_file_line_and_field() {
    each_error_says(one_error, &[
        // unknown node
        ("nodes: {a: {}, b: {}}\nlinks:\n  - endpoints: [a, c]\n", "t.yaml:3:20: links[0].endpoints[1]: unknown node 'c'"),
        // duplicate node name
        ("nodes:\n  a: {}\n  a: {}\n", "t.yaml:3:3: nodes.a: 'a' is given twice (first on line 2)"),
        // loss out of range
        ("nodes: {a: {}, b: {}}\nlinks:\n  - {endpoints: [a, b], loss: 150%}\n", "t.yaml:3:31: links[0].loss: must be between 0% and 100%, got 150%"),
        // negative delay
        ("nodes: {a: {}, b: {}}\nlinks:\n  - endpoints: [a, b]\n    delay: -5ms\n", "t.yaml:4:12: links[0].delay: must not be negative, got '-5ms'"),
        // unknown unit
        ("nodes: {a: {}, b: {}}\nlinks:\n  - endpoints: [a, b]\n    bandwidth: 10MB/s\n", "t.yaml:4:16: links[0].bandwidth: unknown unit 'MB/s'"),
        // half addressed link is an error
        ("nodes: {a: {}, b: {}}\nlinks:\n  - endpoints: [{node: a, ip: 10.9.0.1/24}, b]\n", "a has an IPv4 address but b has none"),
        // gateway must be connected
        ("nodes:\n  a: {routes: [{dst: 1.2.3.0/24, via: 9.9.9.9}]}\n  b: {}\nlinks:\n  - endpoints: [a, b]\n", "gateway 9.9.9.9 is not on any subnet of node 'a'"),
        // unknown shaper
        ("nodes: {a: {}, b: {}}\nlinks:\n  - {endpoints: [a, b], bandwidth: 1Gbit, shaper: tc}\n", "t.yaml:3:51: links[0].shaper: 'tc' is not a shaper: engine (exact serialization, the default) or kernel"),
    ]);
    // Given, per link or direction and in the defaults.
    let plan = ok("nodes: {a: {}, b: {}}\ndefaults: {link: {shaper: kernel}}\nlinks:\n  - {endpoints: [a, b], bandwidth: 1Gbit, reverse: {shaper: engine}}\n");
    assert_eq!(plan.links[0].forward.shaper, vemu_link::Shaper::Kernel);
    assert_eq!(plan.links[0].reverse.shaper, vemu_link::Shaper::Engine);
}

#[test]
fn yaml_syntax_error() {
    let m = one_error("nodes: {a: {}, b: {}\nlinks: [\n");
    assert!(m.starts_with("t.yaml:") && m.contains("YAML syntax error"), "{m}");
}

#[test]
fn missing_file() {
    let e = load(Path::new("/nonexistent/lab.yaml"), None).unwrap_err();
    assert!(e.to_string().starts_with("/nonexistent/lab.yaml: cannot read"), "{e}");
}

#[test]
fn all_errors_are_reported_at_once() {
    let e = bad("
nodes: {a: {}, b: {}}
links:
  - {endpoints: [a, b], delay: 5 parsecs, loss: 101%}
  - {endpoints: [a, zz]}
  - {endpoints: [a, a]}
  - {endpoints: [a, b], lossy: 1%}
");
    assert_eq!(e.errors.len(), 5, "{e}");
    assert!(e.to_string().contains("unknown field 'lossy'"));
    assert!(e.to_string().contains("cannot join node 'a' to itself"));
}

#[test]
fn small_mtu_with_ipv6_is_an_error() {
    let m = one_error("nodes: {a: {}, b: {}}\nlinks:\n  - {endpoints: [a, b], mtu: 100}\n");
    assert!(
        m.contains("t.yaml:3:5: links[0].mtu: IPv6 needs an MTU of at least 1280 bytes, got 100"),
        "{m}"
    );
    ok("addressing: {ipv6: none}\nnodes: {a: {}, b: {}}\nlinks:\n  - {endpoints: [a, b], mtu: 100}\n");
}
