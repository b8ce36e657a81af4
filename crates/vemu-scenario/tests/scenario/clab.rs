//! containerlab topologies made scenarios (`vemu import`, `vemu up lab.clab.yml`).

use vemu_scenario::import::clab;

const TOPO: &str = "name: t1
mgmt: {network: m, ipv4-subnet: 172.30.0.0/24, mtu: 1400}
topology:
  defaults: {env: {A: '1', 'B;x': y}}
  kinds:
    linux: {image: 'frrouting/frr:v8.4.1', exec: ['echo kind']}
  groups:
    g: {exec: ['echo group']}
  nodes:
    r1: {group: g, mgmt-ipv4: 172.30.0.5, labels: {x: y}}
    r2: {kind: linux, image: alpine, binds: ['/etc/hostname:/etc/x', '/usr:/etc/usr', '/etc/hostname:/opt/y', 'DIR:/etc/d']}
  links:
    - endpoints: ['r1:eth1', 'r2:e1-1']
    - type: veth
      endpoints: [{node: r1, interface: eth2}, {node: r2, interface: eth2}]
    - endpoints: ['r1:eth3', 'host:r1-eth3']
    - endpoints: ['r2:eth9', 'mgmt-net:r2-eth9']
";

#[test]
fn a_topology_maps_its_layers_links_and_says_what_it_leaves_out() {
    // A directory bound: copied file by file, its subdirectories too.
    let dir = std::env::temp_dir().join(format!("vemu-clab-bind-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("a.conf"), "a").unwrap();
    std::fs::write(dir.join("sub/b.conf"), "b").unwrap();
    let topo = TOPO.replace("DIR", dir.to_str().unwrap());
    let i = clab(&topo, "t.clab.yml", Some(std::path::Path::new("/")), None).unwrap();
    let plan = vemu_scenario::load_str(&i.yaml, "t.yaml", "t", None).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let node = |n: &str| plan.nodes.iter().find(|x| x.name == n).unwrap();
    // defaults < kind < group < node.
    assert_eq!(node("r1").image.as_deref(), Some("docker://frrouting/frr:v8.4.1"));
    assert_eq!(node("r1").run, ["export A='1'; echo group"]);
    assert_eq!(node("r2").image.as_deref(), Some("docker://alpine"));
    assert_eq!(node("r2").run, ["export A='1'; echo kind"]);
    let files: Vec<&str> = node("r2").files.iter().map(|f| f.path.as_str()).collect();
    assert!(files.contains(&"/etc/x"), "{files:?}");
    assert!(files.contains(&"/etc/d/a.conf") && files.contains(&"/etc/d/sub/b.conf"), "{files:?}");
    // containerlab's management network: vemu's, with the subnet given.
    let mgmt = plan.mgmt.expect("a management network");
    assert_eq!(mgmt.ipv4, Some("172.30.0.0/24".parse().unwrap()));
    // Its own address where mgmt-ipv4 gives one, the next free one otherwise.
    assert_eq!(node("r1").mgmt[0].to_string(), "172.30.0.5/24");
    assert_eq!(node("r2").mgmt[0].to_string(), "172.30.0.2/24");
    // Interfaces as written; the machine for host:IFACE; the management network's link
    // left out.
    let ifaces: Vec<&str> = node("r2").ifaces.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(ifaces, ["e1-1", "eth2"]);
    assert_eq!(node("host").kind, vemu_scenario::NodeKind::Host);
    assert_eq!((i.nodes, i.links), (2, 3));
    let w = i.warnings.join("\n");
    for said in [
        "mgmt.mtu left out",
        "env 'B;x' left out",
        "node 'r1': labels left out",
        "bind of directory /usr left out: more than 1000 files",
        "bind to /opt/y left out",
        "a link to the management network or a macvlan left out",
    ] {
        assert!(w.contains(said), "{said}: {w}");
    }
}

#[test]
fn what_vemu_cannot_run_is_refused_naming_each_node() {
    let e = clab(
        "name: t2\ntopology:\n  nodes:\n    a: {kind: nokia_srlinux}\n    b: {kind: ceos}\n    c: {}\n",
        "t.clab.yml",
        None,
        None,
    )
    .unwrap_err();
    assert!(e.contains("node 'a': kind 'nokia_srlinux' is a vendor's system"), "{e}");
    assert!(e.contains("node 'b': kind 'ceos'"), "{e}");
    let e = clab(
        "name: t3\ntopology:\n  nodes: {a: {}}\n  links:\n    - endpoints: ['a:eth1', 'z:eth1']\n",
        "t.clab.yml",
        None,
        None,
    )
    .unwrap_err();
    assert!(e.contains("t.clab.yml:5:") && e.contains("no node 'z'"), "{e}");
    let e = clab("name: t4\ntopology: [x]\n", "t.clab.yml", None, None).unwrap_err();
    assert!(e.contains("t.clab.yml:2:11: topology should be a mapping"), "{e}");
}

#[test]
fn a_bridge_is_a_lan_of_the_nodes_linked_to_it() {
    let topo = "name: t5
topology:
  nodes:
    a: {}
    b: {}
    c: {}
    br1: {kind: bridge}
    br2: {kind: ovs-bridge}
    lone: {kind: bridge}
  links:
    - endpoints: ['a:eth1', 'br1:a-eth1']
    - endpoints: [{node: br1, interface: b-eth1}, {node: b, interface: eth1}]
    - endpoints: ['c:lan', 'br1:c-lan']
    - endpoints: ['a:eth2', 'br2:p1']
    - endpoints: ['c:eth2', 'br2:p2']
    - endpoints: ['c:eth4', 'lone:p1']
    - endpoints: ['a:eth3', 'b:eth3']
    - endpoints: ['br1:x', 'br2:y']
";
    let i = clab(topo, "t.clab.yml", None, None).unwrap();
    let plan = vemu_scenario::load_str(&i.yaml, "t.yaml", "t", None).unwrap();
    assert_eq!((i.nodes, i.links), (3, 1), "{}", i.yaml);
    let seg = |n: &str| plan.segments.iter().find(|s| s.name == n).expect(n);
    let members = |n: &str| {
        let s = seg(n);
        let name = |m: &vemu_scenario::MemberPlan| {
            let n = &plan.nodes[m.end.node];
            format!("{}:{}", n.name, n.ifaces[m.end.iface].name)
        };
        s.members.iter().map(name).collect::<Vec<_>>()
    };
    assert_eq!(members("br1"), ["a:eth1", "b:eth1", "c:lan"]);
    assert_eq!(members("br2"), ["a:eth2", "c:eth2"]);
    assert!(plan.segments.iter().all(|s| s.name != "lone"));
    // No addresses: containerlab's nodes configure their own.
    let a = plan.nodes.iter().find(|n| n.name == "a").unwrap();
    assert!(a.ifaces.iter().all(|i| i.addrs.is_empty()), "{:?}", a.ifaces);
    let w = i.warnings.join("\n");
    for said in [
        "bridge 'lone' left out: 1 linked to it",
        "a link between two bridges left out",
        "'br2': an ovs-bridge is a learning switch",
    ] {
        assert!(w.contains(said), "{said}: {w}");
    }
}

/// Issue 61: a tenant's topology had its binds read as it was made a scenario, so that
/// the errors named the machine's files ("/etc/x2/ssh_config", "more than 1000 files in
/// /root"). Read for a tenant, its binds are not looked at: each is refused at its field
/// when the scenario is loaded, naming only what the tenant wrote.
#[test]
fn a_tenants_binds_are_refused_unread() {
    let dir = std::env::temp_dir().join(format!("vemu-clab-tenant-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("t.clab.yml");
    std::fs::write(
        &file,
        "name: t\ntopology:\n  nodes:\n    a: {kind: linux, binds: ['/etc/x2/ssh_config:/etc/ssh/ssh_config', '/usr:/etc/usr']}\n",
    )
    .unwrap();
    let i = vemu_scenario::import::clab_file(&file, None, false).unwrap();
    let tenant = vemu_scenario::Trust::tenant("none").unwrap();
    let e = vemu_scenario::load_str_as(&i.yaml, "t", "t", None, None, Some(&dir), &tenant)
        .unwrap_err()
        .to_string();
    assert!(e.contains("nodes.a.files./etc/ssh/ssh_config.from") && e.contains("refused"), "{e}");
    assert!(!e.contains("cannot read") && !e.contains("more than"), "{e}");
    assert!(i.warnings.iter().all(|w| !w.contains("/usr")), "{:?}", i.warnings);
    // The owner's: read (a file that is not there is said so).
    let e = vemu_scenario::import::clab_file(&file, None, true).unwrap_err();
    assert!(e.contains("cannot read"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
