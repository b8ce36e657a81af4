//! DiffServ classes, diverted paths, templates' budget, a tenant's scenario.

use super::*;

#[test]
fn qos_classes_parse_per_direction() {
    use vemu_qos::stage::{ClassLimit, ColorAction, MeterKind, QosConfig};
    let p = ok(QOS);
    assert_eq!(p.links[0].forward.qos, Some(QosConfig::Diffserv));
    assert_eq!(p.links[0].reverse.qos, None);
    let Some(QosConfig::Classes { classes, .. }) = &p.links[1].reverse.qos else {
        panic!("{:?}", p.links[1].reverse.qos)
    };
    assert_eq!(classes.len(), 3);
    assert_eq!(
        classes[0].meter.unwrap().kind,
        MeterKind::TokenBucket { rate_bps: 2_000_000, burst_bytes: 10_000 }
    );
    let video = &classes[1];
    assert_eq!(video.rules.len(), 2);
    assert_eq!(video.rules[0].dscp, [34, 36, 38]);
    assert_eq!((video.rules[1].proto, video.rules[1].dport), (Some(17), Some((5000, 5010))));
    let m = video.meter.unwrap();
    assert!(m.color_aware);
    assert_eq!((m.yellow, m.red), (ColorAction::Mark(36), ColorAction::Drop));
    let w = video.red.unwrap();
    assert_eq!((w.green.unwrap().max_p, w.yellow, w.red.unwrap().max_p), (0.1, None, 0.2));
    assert_eq!((classes[2].set_dscp, classes[2].limit), (Some(8), Some(ClassLimit::Packets(100))));
    // From the command line and the API: the same rules.
    let patch = vemu_scenario::impairment_patch(&[("qos", "none")]).unwrap();
    assert_eq!(patch.qos, Some(None));
    let patch = vemu_scenario::impairment_patch(&[(
        "qos",
        r#"[{"name": "ef", "match": {"dscp": 46}, "priority": 0}, {"name": "be", "weight": 2}]"#,
    )])
    .unwrap();
    assert!(
        matches!(patch.qos, Some(Some(QosConfig::Classes { ref classes, .. })) if classes[1].weight == 2)
    );
    // Issue 65: how the classes of a level share it — WFQ or WF²Q+ beside DRR.
    use vemu_qos::stage::Discipline;
    let patch = vemu_scenario::impairment_patch(&[(
        "qos",
        r#"{"scheduler": "wf2q+", "classes": [{"name": "a", "match": {"dscp": 10}, "weight": 3}, {"name": "b"}]}"#,
    )])
    .unwrap();
    assert!(
        matches!(patch.qos, Some(Some(QosConfig::Classes { ref classes, scheduler: Discipline::Wf2qPlus })) if classes[0].weight == 3),
        "{:?}",
        patch.qos
    );
    let e = vemu_scenario::impairment_patch(&[(
        "qos",
        r#"{"scheduler": "sfq", "classes": [{"name": "b"}]}"#,
    )])
    .unwrap_err();
    assert!(e.contains("expected drr, wfq or wf2q+, got 'sfq'"), "{e}");
    let e = vemu_scenario::impairment_patch(&[("qos", r#"{"scheduler": "wfq"}"#)]).unwrap_err();
    assert!(e.contains("a scheduler goes with its 'classes'"), "{e}");
}

#[test]
fn qos_errors_name_the_field() {
    let link = |qos: &str| {
        one_error(&format!(
            "nodes: {{a: {{}}, b: {{}}}}\nlinks:\n  - endpoints: [a, b]\n    qos: {qos}\n"
        ))
    };
    each_error_says(
        link,
        &[
            ("fast", "t.yaml:4:10: links[0].qos: expected diffserv, none or a list of classes, got 'fast'"),
            ("[{name: a, match: {dscp: XX}}, {name: b}]", "links[0].qos[0].match.dscp: 'XX' is not a DSCP"),
            ("[{name: a, match: {dscp: EF}}]", "links[0].qos: exactly one class must have no 'match'"),
            ("[{name: a, meter: {type: srtcm, cir: 1Mbit, cbs: 1KB}}]", "links[0].qos[0].meter: the srtcm meter needs ebs"),
            ("[{name: a, red: {min: 50KB, max: 10KB}}]", "links[0].qos[0].red: RED needs min < max"),
            ("[{name: a, weight: 0}]", "class 'a': weight must be 1 to 1000, got 0"),
            ("[{match: {dport: 9-3}}]", "links[0].qos[0].match.dport: '9-3' is not a port or a range"),
        ],
    );
}

#[test]
fn diverted_paths_parse_and_refuse_what_they_cannot_do() {
    let p = ok("nodes: {a: {}}\ndivert:\n  - {name: web, match: 'tcp dport {80, 443}', delay: 5ms, reverse: {loss: 1%}}\n  - {match: ip6 daddr 2001:db8::/32, forward: {bandwidth: 1Mbit}}\n");
    assert_eq!(p.diverts.len(), 2);
    let (w, d) = (&p.diverts[0], &p.diverts[1]);
    assert_eq!(
        (w.name.as_str(), w.matches.as_str(), w.forward.delay_ns, w.reverse.delay_ns),
        ("web", "tcp dport {80, 443}", 5_000_000, 5_000_000)
    );
    assert_eq!(w.reverse.loss, Loss::Bernoulli { rate: 0.01, correlation: 0.0 });
    assert_eq!(
        (d.name.as_str(), d.forward.rate_bps, d.reverse.rate_bps),
        ("divert1", Some(1_000_000), None)
    );
    let one = |d: &str| one_error(&format!("nodes: {{a: {{}}}}\ndivert:\n  - {d}\n"));
    let m = one("{match: 'tcp dport 80; flush ruleset'}");
    assert!(m.contains("divert[0].match: ';' may not appear in a match"), "{m}");
    let m = one("{match: tcp dport 80 accept}");
    assert!(m.contains("'accept' is an nftables statement"), "{m}");
    let m = one("{match: tcp dport 80, duplicate: 1%}");
    assert!(m.contains("divert[0].forward: a diverted path cannot duplicate"), "{m}");
    let m = one("{delay: 1ms}");
    assert!(m.contains("divert[0]: missing 'match'"), "{m}");
    let m = one_error("machines: {m1: 10.0.0.1, m2: 10.0.0.2}\nnodes: {a: {machine: m1}, b: {machine: m2}}\ndivert:\n  - {match: tcp dport 80}\n");
    assert!(m.contains("divert: diverted paths take the controller's machine's traffic"), "{m}");
}

/// Audit (issue 39): a 200-byte template of nested loops took `check` 7.3 s and 790 MB,
/// and the controller's API as much for a body that size. Templates now run within a
/// budget of instructions and of output, and say which field went over.
#[test]
fn templates_run_within_a_bound() {
    let bomb = "nodes:\n  a:\n    files:\n      /etc/x: '{% for i in range(10000) %}{% for j in range(10000) %}x{% endfor %}{% endfor %}'\n";
    let m = one_error(bomb);
    assert!(m.contains("t.yaml:4:7: nodes.a.files./etc/x: template error: the scenario's templates run more than 20000000 instructions in all"), "{m}");
    // Output without much work: one file's cap.
    let wide = "nodes:\n  a:\n    files:\n      /etc/x: '{% for i in range(20000) %}{{ \"x\" * 1000 }}{% endfor %}'\n";
    let m = one_error(wide);
    assert!(
        m.contains("nodes.a.files./etc/x: template error: the output is larger than 16 MiB"),
        "{m}"
    );
    // Work without output: the instructions run out.
    let busy = "nodes:\n  a:\n    files:\n      /etc/x: '{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}'\n";
    let m = one_error(busy);
    assert!(m.contains("nodes.a.files./etc/x: template error: the scenario's templates run more than 20000000 instructions in all"), "{m}");
    // The budget is the scenario's, not each file's: many files that each stay under
    // the per-file cap still add up (5 x 15 MB > 64 MiB).
    let mut y = String::from("nodes:\n");
    for i in 0..5 {
        y.push_str(&format!("  n{i}:\n    files:\n      /etc/x: '{{% for i in range(15000) %}}{{{{ \"{}\" }}}}{{% endfor %}}'\n", "y".repeat(1000)));
    }
    let e = bad(&y).to_string();
    assert!(e.contains("the scenario's templates write more than 64 MiB in all"), "{e}");
    // What a real lab does stays well inside: every node's file names every node.
    let mut y = String::from("nodes:\n");
    for i in 0..300 {
        y.push_str(&format!("  n{i}: {{files: {{/etc/peers: '{{% for n in nodes %}}{{{{ n }}}} {{{{ name }}}};{{% endfor %}}'}}}}\n"));
    }
    let p = ok(&y);
    assert_eq!(p.nodes[7].files[0].content.matches(" n7;").count(), 300);
}

/// Issue 39: a tenant's scenario (a Kubernetes VemuLab) may not use what reaches beyond
/// its nodes unless allowed: each is refused at its field, before anything it names is
/// read (a file that cannot be read would say "cannot read"; a refused one does not).
#[test]
fn a_tenants_scenario_gets_only_what_it_is_allowed() {
    use vemu_scenario::{load_str_as, Reach, Tenant, Trust};
    let dir = std::env::temp_dir().join(format!("vemu-tenant-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("secret"), "the agent's token\n").unwrap();
    std::fs::write(
        dir.join("t.ns2"),
        "$node_(0) set X_ 1.0\n$node_(0) set Y_ 1.0\n$node_(1) set X_ 2.0\n$node_(1) set Y_ 2.0\n",
    )
    .unwrap();
    // A netem table, and (its integers read as milliseconds) a measured series.
    std::fs::write(dir.join("t.dist"), "8192\n0\n8192\n").unwrap();
    let cases = [
        ("nodes:\n  a:\n    files: {/etc/x: {from: secret}}\n", "nodes.a.files./etc/x.from", Reach::From),
        ("nodes:\n  a:\n    files: {/etc/x: {template: secret}}\n", "nodes.a.files./etc/x.template", Reach::From),
        ("nodes: {a: {}, b: {}}\nsegments:\n  r: {kind: wireless, members: [a, b], trace: t.ns2}\n", "segments.r.trace", Reach::Trace),
        ("nodes: {a: {}, b: {}}\nlinks: [{endpoints: [a, b], delay: {measured: t.dist}}]\n", "links[0].delay.measured", Reach::Trace),
        ("nodes: {a: {}, b: {}}\nlinks: [{endpoints: [a, b], jitter: {amount: 1ms, distribution: {table: t.dist}}}]\n", "links[0].jitter.distribution.table", Reach::Trace),
        ("nodes:\n  h: {kind: host}\n  a: {}\nlinks: [{endpoints: [h, a]}]\n", "nodes.h.kind", Reach::Host),
        ("nodes:\n  dev: {kind: external, iface: enp3s0}\n  a: {}\nlinks: [{endpoints: [dev, a]}]\n", "nodes.dev.kind", Reach::External),
        ("nodes: {a: {}}\ndivert:\n  - {match: tcp dport 80, delay: 5ms}\n", "divert", Reach::Divert),
        ("nodes:\n  a: {isolation: none}\n", "nodes.a.isolation", Reach::SharedPids),
        ("defaults:\n  node: {isolation: none}\nnodes: {a: {}}\n", "defaults.node.isolation", Reach::SharedPids),
        // An image read from the machine's files (a registry's is anyone's).
        ("nodes:\n  a: {image: ./frr-oci}\n", "nodes.a.image", Reach::From),
        // The machine in reach of every node.
        ("mgmt: on\nnodes: {a: {}}\n", "mgmt", Reach::Host),
        ("nodes:\n  a: {image: 'docker-archive:frr.tar'}\n", "nodes.a.image", Reach::From),
    ];
    let load =
        |y: &str, trust: &Trust| load_str_as(y, "t.yaml", "t", None, None, Some(&dir), trust);
    let tenant = |allow: Vec<Reach>| Trust::Tenant(Tenant { allow, ..Tenant::default() });
    for (yaml, field, reach) in cases {
        // The machine's owner may.
        load(yaml, &Trust::Owner).unwrap_or_else(|e| panic!("{yaml}: {e}"));
        // A tenant may not, unless allowed that very feature.
        let others: Vec<Reach> = Reach::ALL.into_iter().filter(|r| *r != reach).collect();
        let e = load(yaml, &tenant(others)).expect_err(yaml);
        assert_eq!(e.errors.len(), 1, "{e}");
        let (err, name) = (&e.errors[0], reach.name());
        assert_eq!(err.field, field, "{e}");
        assert!(
            err.line > 0
                && err.message.contains("refused in a tenant's lab")
                && err.message.contains(&format!("'{name}'")),
            "{e}"
        );
        load(yaml, &tenant(vec![reach]))
            .unwrap_or_else(|e| panic!("{yaml} with {name} allowed: {e}"));
    }
    // Nothing named is read: a tenant's from: of a file that does not exist is refused,
    // not "cannot read" (which would tell the tenant what exists on the machine).
    let e =
        load("nodes:\n  a:\n    files: {/etc/x: {from: /nonexistent/token}}\n", &tenant(vec![]))
            .unwrap_err()
            .to_string();
    assert!(e.contains("refused") && !e.contains("cannot read"), "{e}");
    // A registry's image: from the registries the administrator lists only, refused at
    // its field otherwise (issue 61: a reference made the machine call its loopback);
    // another transport of skopeo's is no image source.
    let listed = tenant(vec![]).with_registries("reg.example:5000").unwrap();
    let yaml =
        "nodes:\n  a: {image: 'reg.example:5000/frr:9'}\n  b: {image: '127.0.0.1:5078/probe:1'}\n";
    let e = load(yaml, &listed).unwrap_err();
    assert_eq!(e.errors.len(), 1, "{e}");
    assert_eq!(e.errors[0].field, "nodes.b.image");
    assert!(e.errors[0].message.contains("'127.0.0.1:5078'"), "{e}");
    load(yaml, &Trust::Owner).unwrap();
    let e = load("nodes:\n  a: {image: 'frr:9'}\n", &tenant(vec![])).unwrap_err().to_string();
    assert!(e.contains("no registry") && e.contains("'docker.io'"), "{e}");
    for bad in ["containers-storage:frr", "docker-daemon:frr:9", "[::1]:5078/y:1", "Frr:9"] {
        let e = load(&format!("nodes:\n  a: {{image: '{bad}'}}\n"), &Trust::Owner).unwrap_err();
        assert_eq!(e.errors[0].field, "nodes.a.image", "{bad}: {e}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
