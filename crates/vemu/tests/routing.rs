//! Real routing software in real labs: FRR, BIRD and babeld from Debian, in the
//! examples' scenarios. Run as root.

mod common;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use vemu_scenario::import::bird_as_paths;

use common::*;

fn loopbacks(n: usize, v6: bool) -> Vec<String> {
    (1..=n).map(|i| if v6 { format!("fd00:ff::{i:x}") } else { format!("10.255.0.{i}") }).collect()
}

fn assert_all_reachable(lab: &Lab, from: &str, addrs: &[String], timeout_s: f64) -> f64 {
    let t0 = Instant::now();
    let missing = lab.wait_reachable(from, addrs, timeout_s);
    assert!(missing.is_empty(), "{from} cannot reach {missing:?} after {timeout_s} s");
    t0.elapsed().as_secs_f64()
}

/// Timestamps (s) of the echo replies in `ping -D` output.
fn reply_times(out: &str) -> Vec<f64> {
    out.lines()
        .filter(|l| l.contains("bytes from"))
        .filter_map(|l| l.strip_prefix('[')?.split(']').next()?.parse().ok())
        .collect()
}

#[test]
fn frr_ospf_ring_converges_and_reroutes_around_a_failed_link() {
    let _g = serial();
    let lab = Lab::up_file("t-frr", "examples/frr-ospf-ring.yaml");
    let t4 = assert_all_reachable(&lab, "r1", &loopbacks(10, false), 90.0);
    let t6 = assert_all_reachable(&lab, "r1", &loopbacks(10, true), 60.0);
    eprintln!("FRR ring: every loopback reachable from r1 after {t4:.1} s (IPv4), then {t6:.1} s more (IPv6)");
    // r1 reaches r4 (10.255.0.4) over r2 and r3: 3 hops one way, 7 the other.
    // Every loopback answering does not mean every adjacency is up yet: the short way
    // may come a moment later.
    let deadline = Instant::now() + Duration::from_secs(30);
    let route = loop {
        let (_, route) = lab.sh("r1", "ip route get 10.255.0.4");
        if route.contains("dev eth0") || Instant::now() > deadline {
            break route;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(route.contains("dev eth0"), "{route}");

    // Ping r4 every 10 ms while the r2-r3 link fails under it.
    let ping = Command::new(env!("CARGO_BIN_EXE_vemu"))
        .args([
            "exec",
            "--lab",
            "t-frr",
            "r1",
            "--",
            "ping",
            "-D",
            "-n",
            "-i",
            "0.01",
            "-c",
            "800",
            "-W",
            "1",
            "10.255.0.4",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let o = lab.vemu(&["link", "down", "r2:r3"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = ping.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    let times = reply_times(&out);
    let errors: Vec<&str> = out.lines().filter(|l| !l.contains("bytes from")).take(12).collect();
    assert!(times.len() > 100, "too few replies: {}", times.len());
    let gap = times.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max);
    // Traffic flows again after the failure, the other way round the ring.
    let last = *times.last().unwrap();
    let first = times[0];
    assert!(last - first > 6.0, "replies stopped after {:.2} s: {errors:?}", last - first);
    let (_, route) = lab.sh("r1", "ip route get 10.255.0.4");
    assert!(route.contains("dev eth1"), "not rerouted: {route}");
    eprintln!("FRR ring: link r2:r3 down -> traffic r1->r4 rerouted; longest gap between replies (reconvergence) {:.0} ms", gap * 1000.0);
    // Under the 4 s dead interval: r2 and r3 saw their carrier go, not a silent neighbour.
    assert!(gap < 3.0, "reconvergence took {gap} s");

    // The link comes back and OSPF returns to the short way.
    assert!(lab.vemu(&["link", "up", "r2:r3"]).status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, route) = lab.sh("r1", "ip route get 10.255.0.4");
        if route.contains("dev eth0") {
            break;
        }
        assert!(Instant::now() < deadline, "did not return to the short path: {route}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn bird_ospf_ring_converges() {
    let _g = serial();
    let lab = Lab::up_file("t-bird", "examples/bird-ospf-ring.yaml");
    let t4 = assert_all_reachable(&lab, "r1", &loopbacks(10, false), 90.0);
    let t6 = assert_all_reachable(&lab, "r1", &loopbacks(10, true), 60.0);
    eprintln!(
        "BIRD ring: every loopback reachable from r1 after {t4:.1} s (IPv4) + {t6:.1} s (IPv6)"
    );
}

#[test]
fn babel_mesh_converges() {
    let _g = serial();
    // `--wait-converged` returns once every node has a route to every prefix: babeld's
    // host routes count (issue 61: the mesh never "converged", the check wanting routes
    // to the links' /30s).
    let file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/babel-mesh.yaml");
    let o = vemu(&["up", file.to_str().unwrap(), "--name", "t-babel", "--wait-converged", "90"]);
    let lab = Lab { name: "t-babel".into() };
    assert!(o.status.success() && text(&o).contains("converged"), "{}", text(&o));
    let t4 = assert_all_reachable(&lab, "n1", &loopbacks(9, false), 90.0);
    let t6 = assert_all_reachable(&lab, "n9", &loopbacks(9, true), 60.0);
    eprintln!("babel mesh: every loopback reachable after {t4:.1} s (IPv4, from n1) + {t6:.1} s (IPv6, from n9)");
}

#[test]
fn two_area_ospf_with_hosts_on_lans() {
    let _g = serial();
    let lab = Lab::up_file("t-areas", "examples/frr-ospf-areas.yaml");
    let s = lab.status();
    let mut far: Vec<String> =
        ["h4", "h5", "h6"].iter().flat_map(|h| lab.addrs(&s, h, false)).collect();
    far.extend(["h4", "h5", "h6"].iter().flat_map(|h| lab.addrs(&s, h, true)));
    let t = assert_all_reachable(&lab, "h1", &far, 90.0);
    eprintln!(
        "two OSPF areas: hosts of lan1 reach every host of lan2 (IPv4 and IPv6) after {t:.1} s"
    );
    let (_, out) = lab.sh("abr1", "vtysh -c 'show ip ospf border-routers'");
    assert!(out.contains("ABR"), "{out}");
}

/// `vemu up --wait-converged` returns once every node has a route to every prefix of the
/// lab: right after it, r1's first ping to every loopback (IPv4 and IPv6) is answered.
/// Routes that never come: said, exit 1, the lab kept.
#[test]
fn up_can_wait_for_routing_to_converge() {
    let _g = serial();
    let file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/frr-ospf-ring.yaml");
    let o = vemu(&["up", file.to_str().unwrap(), "--name", "t-conv", "--wait-converged", "90"]);
    let lab = Lab { name: "t-conv".into() };
    assert!(o.status.success() && text(&o).contains("routes converged"), "{}", text(&o));
    for a in loopbacks(10, false)
        .iter()
        .chain(&loopbacks(10, true))
        .filter(|a| *a != "10.255.0.1" && *a != "fd00:ff::1")
    {
        let (code, out) = lab.sh("r1", &format!("ping -c 1 -W 2 {a}"));
        assert_eq!(code, 0, "r1's first ping to {a} after up --wait-converged: {out}");
    }
    drop(lab);
    // No routing at all: a chain whose ends cannot reach each other.
    let yaml = "name: t-noconv\nrouting: none\naddressing: {ipv6: none}\nnodes: {a: {}, b: {}, c: {}}\nlinks: [{endpoints: [a, b]}, {endpoints: [b, c]}]\n";
    let path = write_scenario("t-noconv", yaml);
    let o = vemu(&["up", path.to_str().unwrap(), "--wait-converged", "2"]);
    let lab = Lab { name: "t-noconv".into() };
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("did not converge within 2 s")
            && t.contains("a lacks")
            && t.contains("the lab keeps running"),
        "{t}"
    );
    assert!(lab.status()["nodes"].as_array().is_some_and(|n| n.len() == 3), "the lab still runs");
}

/// Router kinds (issue 41): FRR and BIRD started by their kind from a startup
/// configuration (the examples' templates), OSPF between them; `vemu save` after a
/// change made by hand with vtysh, and the lab up again from what was saved.
#[test]
fn router_kinds_start_from_startup_configs_and_save_what_runs() {
    let _g = serial();
    let ex = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    let first = format!("routing: none\naddressing: {{loopback_ipv4: 10.255.0.0/24, ipv6: none}}\ndefaults:\n  link: {{delay: 1ms}}\nnodes:\n  r1: {{kind: frr, startup-config: {ex}/frr/frr.conf.j2}}\n  r2: {{kind: bird, startup-config: {ex}/bird/bird.conf.j2}}\n  r3: {{kind: frr, startup-config: {ex}/frr/frr.conf.j2}}\nlinks:\n  - endpoints: [r1, r2]\n  - endpoints: [r2, r3]\n");
    let lab = Lab::up("t-kinds", &first);
    let t = assert_all_reachable(&lab, "r1", &loopbacks(3, false), 60.0);
    eprintln!("kinds: FRR - BIRD - FRR converged in {t:.1} s");
    // A change by hand, then saved.
    let (code, _) = lab.sh("r1", "vtysh -c 'conf t' -c 'ip route 192.0.2.0/24 Null0'");
    assert_eq!(code, 0);
    let dir = std::env::temp_dir().join("vemu-tests/t-kinds-saved");
    let _ = std::fs::remove_dir_all(&dir);
    let o = lab.vemu(&["save", "-o", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let r1 = std::fs::read_to_string(dir.join("r1/frr.conf")).unwrap();
    assert!(r1.contains("ip route 192.0.2.0/24 Null0") && r1.contains("router ospf"), "{r1}");
    let r2 = std::fs::read_to_string(dir.join("r2/bird.conf")).unwrap();
    assert!(r2.contains("protocol ospf v2") && !r2.contains("{{"), "{r2}");
    assert!(dir.join("r3/frr.conf").is_file());
    drop(lab);
    // Up again from the saved configurations: the same routes, the one added by hand too.
    let d = dir.display();
    let again = format!("routing: none\naddressing: {{loopback_ipv4: 10.255.0.0/24, ipv6: none}}\ndefaults:\n  link: {{delay: 1ms}}\nnodes:\n  r1: {{kind: frr, startup-config: {d}/r1/frr.conf}}\n  r2: {{kind: bird, startup-config: {d}/r2/bird.conf}}\n  r3: {{kind: frr, startup-config: {d}/r3/frr.conf}}\nlinks:\n  - endpoints: [r1, r2]\n  - endpoints: [r2, r3]\n");
    let lab = Lab::up("t-kinds", &again);
    assert_all_reachable(&lab, "r1", &loopbacks(3, false), 60.0);
    let (_, route) = lab.sh("r1", "ip route show 192.0.2.0/24");
    assert!(route.contains("blackhole 192.0.2.0/24"), "{route}");
}

/// An IMUNES topology from IMUNES' own examples (issue 41), brought up directly: its
/// routers run RIP and RIPng (FRR), its PC reaches its server across four routers and
/// a LAN switch, on both families.
#[test]
fn an_imunes_rip_topology_converges_and_its_pc_reaches_its_server() {
    let _g = serial();
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../vemu-scenario/tests/imunes/RIP1.imn");
    let o = vemu(&["up", file, "--name", "t-imn"]);
    assert!(o.status.success(), "{}", text(&o));
    let lab = Lab { name: "t-imn".into() };
    let t = assert_all_reachable(&lab, "pc", &["10.0.4.10".into()], 90.0);
    let t6 = assert_all_reachable(&lab, "pc", &["fc00:1::10".into()], 60.0);
    eprintln!("IMUNES RIP1: the PC reaches the server after {t:.1} s (IPv4) + {t6:.1} s (IPv6)");
}

/// IMUNES' OSPF example (issue 41): seven routers running OSPF and OSPFv3 (FRR) from
/// its router_config, two LAN switches; the PC reaches the server once OSPF converged.
#[test]
fn an_imunes_ospf_topology_converges_and_its_pc_reaches_its_server() {
    let _g = serial();
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../vemu-scenario/tests/imunes/OSPF1.imn");
    let o = vemu(&["up", file, "--name", "t-imn-ospf"]);
    assert!(o.status.success() && text(&o).contains("its 7 routers answer"), "{}", text(&o));
    let lab = Lab { name: "t-imn-ospf".into() };
    let t = assert_all_reachable(&lab, "pc", &["10.0.4.10".into(), "10.0.5.2".into()], 90.0);
    eprintln!("IMUNES OSPF1: the PC reaches the server after {t:.1} s");
}

/// IMUNES' older Tcl form (issue 41): its RIP example (five routers, two hosts and a
/// PC, each with the addresses written in it) comes up, and the PC reaches a host
/// four routers away once RIP has converged.
#[test]
fn an_imunes_tcl_topology_comes_up_with_its_addresses_and_converges() {
    let _g = serial();
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../vemu-scenario/tests/imunes/RIP-tcl.imn");
    let o = vemu(&["up", file, "--name", "t-imn-tcl"]);
    assert!(o.status.success() && text(&o).contains("its 5 routers answer"), "{}", text(&o));
    let lab = Lab { name: "t-imn-tcl".into() };
    for (node, addr) in
        [("pc7", "10.0.9.1/24"), ("host5", "10.0.7.2/24"), ("router3", "10.0.6.2/24")]
    {
        let (_, out) = lab.sh(node, "ip -4 -o addr show");
        assert!(out.contains(addr), "{node} lacks {addr}: {out}");
    }
    let t = assert_all_reachable(&lab, "pc7", &["10.0.7.2".into(), "10.0.8.2".into()], 90.0);
    eprintln!("IMUNES RIP (Tcl form): pc7 reaches both hosts after {t:.1} s");
}

/// Generated topologies (issue 66): a k=4 fat-tree with static routes, every host
/// reaching a host of another pod across the core (5 hops of 1 ms each way); and a
/// leaf-spine whose routers run OSPF (FRR, generated configuration) while its hosts
/// route statically, one leaf's host reaching the other's once OSPF converged.
#[test]
fn generated_fat_tree_and_ospf_leaf_spine_reach_across() {
    let _g = serial();
    let yaml = "name: t-gen\naddressing: {ipv4: 10.0.0.0/8, ipv4_prefix: 31, ipv6: none}\ngenerate:\n  ft:\n    fat-tree: {k: 4}\n    link: {delay: 1ms}\n";
    let lab = Lab::up("t-gen", yaml);
    let st = lab.status();
    assert_eq!(st["nodes"].as_array().unwrap().len(), 36);
    let far = lab.addrs(&st, "ftp3e1h1", false)[0].clone();
    let (sent, got, rtt) = lab.ping("ftp0e0h0", &far, 5, 0.2);
    assert_eq!((sent, got), (5, 5), "pod 0's host to pod 3's");
    // Host, edge, aggregation, core, aggregation, edge, host: 6 links of 1 ms each way.
    assert!((12.0..40.0).contains(&rtt), "rtt {rtt} ms across the core");
    drop(lab);

    let yaml = "name: t-gen-ospf\naddressing: {ipv4: 10.0.0.0/8, ipv4_prefix: 31, ipv6: none}\ngenerate:\n  ls:\n    leaf-spine: {spines: 2, leaves: 2, hosts: 1}\n    routing: ospf\n";
    let lab = Lab::up("t-gen-ospf", yaml);
    let st = lab.status();
    let far = lab.addrs(&st, "lsl1h0", false)[0].clone();
    let t = assert_all_reachable(&lab, "lsl0h0", std::slice::from_ref(&far), 90.0);
    eprintln!("generated leaf-spine: OSPF converged for hosts after {t:.1} s");
    let (_, routes) = lab.sh("lss0", "ip route");
    assert!(routes.contains("proto ospf"), "a spine's routes come from OSPF: {routes}");
}

/// A made-up AS graph of `n` ASes (`seed`) written beside the tests, and the lab `lab`
/// `vemu import` makes of it with a host per AS (and `args`): the graph, its file, the
/// scenario.
fn imported_as_graph(
    lab: &str,
    n: usize,
    seed: u64,
    args: &[&str],
) -> (vemu_scenario::import::AsGraph, std::path::PathBuf, String) {
    let graph = vemu(&["import", "--as-graph", &n.to_string(), "--seed", &seed.to_string()]);
    assert!(graph.status.success(), "{}", text(&graph));
    let rel = String::from_utf8(graph.stdout).unwrap();
    let g = vemu_scenario::import::parse_as_rel(&rel, lab).unwrap();
    let rel_path = write_scenario(&format!("{lab}-rel"), &rel);
    let mut argv = vec!["import", rel_path.to_str().unwrap(), "--hosts", "all", "--name", lab];
    argv.extend_from_slice(args);
    let o = vemu(&argv);
    assert!(o.status.success(), "{}", text(&o));
    (g, rel_path, String::from_utf8(o.stdout).unwrap())
}

/// An AS-level Internet (issue 66): a made-up graph of 50 ASes in CAIDA's form, imported
/// as BIRD routers with Gao-Rexford policies and a host per AS. Every host reaches every
/// other; every route every router holds is valley-free; then a stub AS announces
/// another's prefix (a hijack): its provider, preferring its customer, takes the false
/// route, while the victim's own provider keeps the true one; and a multihomed AS leaks
/// its providers' routes to each other: they take them (valleys).
#[test]
fn an_as_level_internet_routes_valley_free_and_a_hijack_and_a_leak_are_seen() {
    let _g = serial();
    let (g, _, yaml) = imported_as_graph("t-as50", 50, 1, &[]);
    let lab = Lab::up("t-as50", &yaml);
    // AS k's host is 10.(k/256).(k%256).2; the last AS's host reaches every other.
    let hosts: Vec<String> = (0..49).map(|k| format!("10.0.{k}.2")).collect();
    let last = *g.ases.last().unwrap();
    let t = assert_all_reachable(&lab, &format!("h{last}"), &hosts, 120.0);
    eprintln!("50 ASes: every host reached after {t:.1} s");
    let neighbours = g.neighbours();
    for asn in &g.ases {
        let (code, out) = lab.sh(&format!("as{asn}"), "birdc show route primary all");
        assert_eq!(code, 0, "{out}");
        assert_eq!(bird_as_paths(&out).len(), 49, "AS {asn} has a route to every other AS: {out}");
        // Every route it accepted, its best and the others, is valley-free.
        let (_, out) = lab.sh(&format!("as{asn}"), "birdc show route all");
        for p in bird_as_paths(&out) {
            let full: Vec<u32> = std::iter::once(*asn).chain(p).collect();
            if let Err(e) = vemu_scenario::import::valley_free(&full, &neighbours) {
                panic!("AS {asn}'s route along {full:?}: {e}");
            }
        }
    }
    // The hijack: the last AS (a stub) announces the first stub's prefix.
    let (victim_k, victim) = (5, g.ases[5]);
    let net = format!("10.0.{victim_k}.0/24");
    // `vemu report bgp` before it: every session up, every router with a path to the
    // victim's prefix, which the victim originates.
    let bgp = |prefix: &str| -> serde_json::Value {
        let o = lab.vemu(&["report", "bgp", "--json", "--prefix", prefix]);
        assert!(o.status.success(), "{}", text(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let path_of = |r: &serde_json::Value, asn: u32| -> Vec<u64> {
        let router = r["routers"].as_array().unwrap().iter().find(|x| x["asn"] == asn).unwrap();
        router["path"].as_array().expect("a path").iter().map(|a| a.as_u64().unwrap()).collect()
    };
    let before = bgp(&net);
    assert_eq!(before["routers"].as_array().unwrap().len(), 50, "{before}");
    assert!(before["sessions"].as_u64().unwrap() >= 49, "{before}");
    assert_eq!(before["established"], before["sessions"], "{before}");
    assert_eq!(before["reaching"], 50, "{before}");
    assert_eq!(path_of(&before, victim), Vec::<u64>::new(), "the victim originates it");
    let last_change = before["last_change_ns"].as_u64().unwrap();
    assert!(last_change > 0 && last_change <= before["answered_ns"].as_u64().unwrap(), "{before}");
    eprintln!(
        "vemu report bgp: {} sessions, {} updates sent, last route change at {:.2} s",
        before["sessions"],
        before["updates_sent"],
        last_change as f64 / 1e9
    );
    let provider_of = |asn: u32| {
        g.rels
            .iter()
            .find(|r| r.2 == vemu_scenario::import::Rel::ProviderOf && g.ases[r.1] == asn)
            .map(|r| g.ases[r.0])
            .unwrap()
    };
    let (attacker_provider, victim_provider) = (provider_of(last), provider_of(victim));
    assert_ne!(attacker_provider, victim_provider, "the test wants them apart");
    let (code, out) = lab.sh(
        &format!("as{last}"),
        &format!("echo 'protocol static hijack {{ ipv4; route {net} unreachable; }}' >> /etc/bird/bird.conf && birdc configure"),
    );
    assert_eq!(code, 0, "{out}");
    let origin = |asn: u32| {
        let (_, out) =
            lab.sh(&format!("as{asn}"), &format!("birdc show route for {net} primary all"));
        bird_as_paths(&out).first().and_then(|p| p.last().copied())
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while origin(attacker_provider) != Some(last) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(
        origin(attacker_provider),
        Some(last),
        "the attacker's provider takes its customer's false route"
    );
    assert_eq!(
        origin(victim_provider),
        Some(victim),
        "the victim's provider keeps its customer's route"
    );
    // The report sees it too: the attacker's provider's path ends at the attacker, the
    // victim's provider's at the victim, and the routes changed after the report before.
    let after = bgp(&net);
    assert_eq!(path_of(&after, attacker_provider).last(), Some(&(last as u64)), "{after}");
    assert_eq!(path_of(&after, victim_provider).last(), Some(&(victim as u64)), "{after}");
    assert!(after["last_change_ns"].as_u64().unwrap() > before["answered_ns"].as_u64().unwrap());
    assert!(after["updates_sent"].as_u64().unwrap() > before["updates_sent"].as_u64().unwrap());

    // A route leak: a multihomed AS exports everything to its providers (as a customer
    // would to nobody): one provider now prefers routes through it — valleys.
    let providers = |asn: u32| -> Vec<u32> {
        g.rels
            .iter()
            .filter(|r| r.2 == vemu_scenario::import::Rel::ProviderOf && g.ases[r.1] == asn)
            .map(|r| g.ases[r.0])
            .collect()
    };
    let leaker = *g.ases.iter().find(|a| providers(**a).len() == 2 && **a != last).unwrap();
    let (code, out) = lab.sh(
        &format!("as{leaker}"),
        "sed -i 's/export filter to_peer;/export filter to_customer;/' /etc/bird/bird.conf && birdc configure",
    );
    assert_eq!(code, 0, "{out}");
    let valleys = |asn: u32| -> usize {
        let (_, out) = lab.sh(&format!("as{asn}"), "birdc show route primary all");
        bird_as_paths(&out)
            .into_iter()
            .filter(|p| {
                let full: Vec<u32> = std::iter::once(asn).chain(p.iter().copied()).collect();
                vemu_scenario::import::valley_free(&full, &neighbours).is_err()
            })
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let leaked = loop {
        let n: usize = providers(leaker).into_iter().map(valleys).sum();
        if n > 0 || Instant::now() > deadline {
            break n;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(leaked > 0, "AS {leaker}'s providers take leaked routes through it");
    eprintln!(
        "route leak by AS {leaker}: {leaked} of its providers' best routes now cross a valley"
    );
}

/// An IXP (`vemu import --ixp`): the stub ASes of a made-up graph of 6 peer through a
/// BIRD route server on a LAN. Each member's best route to another member's prefix is
/// the IXP's (a peer's route, preferred over its providers'), one AS long — the route
/// server is not in the path — with the other member's address on the LAN as next hop;
/// the hosts reach each other; and every route of every router is valley-free once the
/// IXP's peerings are added to the relationships, `vemu report bgp` reading the paths.
#[test]
fn ixp_members_peer_through_a_transparent_route_server() {
    let _g = serial();
    let g0 = vemu(&["import", "--as-graph", "6", "--seed", "3"]);
    let rel = String::from_utf8(g0.stdout).unwrap();
    let g = vemu_scenario::import::parse_as_rel(&rel, "t-ixp").unwrap();
    let is_provider =
        |k: usize| g.rels.iter().any(|r| r.0 == k && r.2 == vemu_scenario::import::Rel::ProviderOf);
    let stubs: Vec<u32> =
        (0..g.ases.len()).filter(|&k| !is_provider(k)).map(|k| g.ases[k]).collect();
    assert!(stubs.len() >= 3, "{rel}");
    let members: Vec<String> = stubs.iter().map(u32::to_string).collect();
    let (_, _, yaml) = imported_as_graph("t-ixp", 6, 3, &["--ixp", &members.join(",")]);
    assert!(yaml.contains("ixp0:") && yaml.contains("rs client"), "{yaml}");
    let lab = Lab::up("t-ixp", &yaml);
    let k_of = |asn: u32| g.ases.iter().position(|a| *a == asn).unwrap();
    let host = |asn: u32| format!("10.0.{}.2", k_of(asn));
    let others: Vec<String> = stubs[1..].iter().map(|a| host(*a)).collect();
    assert_all_reachable(&lab, &format!("h{}", stubs[0]), &others, 60.0);
    // The IXP's peerings, as a relationships file would have them.
    let mut with_ixp = rel.clone();
    for (i, a) in stubs.iter().enumerate() {
        for b in &stubs[i + 1..] {
            with_ixp.push_str(&format!("{a}|{b}|0\n"));
        }
    }
    let gi = vemu_scenario::import::parse_as_rel(&with_ixp, "t-ixp").unwrap();
    let neighbours = gi.neighbours();
    let rs_asn = vemu_scenario::import::ixp_rs_asn(0);
    for target in &stubs {
        let prefix = format!("10.0.{}.0/24", k_of(*target));
        // (The paths settle within seconds of the hosts reaching each other.)
        let deadline = Instant::now() + Duration::from_secs(30);
        let report = loop {
            let o = lab.vemu(&["report", "bgp", "--json", "--prefix", &prefix]);
            assert!(o.status.success(), "{}", text(&o));
            let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            let settled = stubs.iter().filter(|m| *m != target).all(|m| {
                let x = r["routers"].as_array().unwrap().iter().find(|x| x["asn"] == *m).unwrap();
                x["path"] == serde_json::json!([target])
            });
            if settled || Instant::now() > deadline {
                break r;
            }
            std::thread::sleep(Duration::from_millis(500));
        };
        for m in stubs.iter().filter(|m| *m != target) {
            let x = report["routers"].as_array().unwrap().iter().find(|x| x["asn"] == *m).unwrap();
            assert_eq!(x["path"], serde_json::json!([target]), "AS {m} to {prefix}: {report}");
            let (_, route) = lab.sh(&format!("as{m}"), &format!("ip route get {}", host(*target)));
            assert!(route.contains("via 100.64.0."), "AS {m} to {prefix} across the IXP: {route}");
        }
        assert_eq!(report["established"], report["sessions"], "{report}");
    }
    for asn in g.ases.iter().chain(std::iter::once(&rs_asn)) {
        let node = if *asn == rs_asn { "rs0".to_string() } else { format!("as{asn}") };
        let (code, out) = lab.sh(&node, "birdc show route all");
        assert_eq!(code, 0, "{out}");
        for p in bird_as_paths(&out) {
            assert!(!p.contains(&rs_asn), "the route server's AS in a path at {node}: {p:?}");
            if *asn != rs_asn {
                let full: Vec<u32> = std::iter::once(*asn).chain(p).collect();
                if let Err(e) = vemu_scenario::import::valley_free(&full, &neighbours) {
                    panic!("AS {asn}'s route along {full:?}: {e}");
                }
            }
        }
    }
}

/// The same Internet with FRR (`--router frr`), judged by the lab itself: 8 made-up
/// ASes with a host each under `vemu test`, whose checks are the last host reaching
/// every other and a `valley_free` check on every router (each of its routes, best or
/// not, valley-free, and one to every other AS) — FRR's route-maps keep Gao-Rexford's
/// rules as BIRD's filters do.
#[test]
fn an_as_level_internet_of_frr_routers_routes_valley_free() {
    let _g = serial();
    let (g, rel_path, mut yaml) = imported_as_graph("t-as8", 8, 3, &["--router", "frr"]);
    assert!(yaml.contains("kind: frr") && !yaml.contains("kind: bird"), "{yaml}");
    let last = *g.ases.last().unwrap();
    yaml.push_str("expect:\n");
    for k in 0..7 {
        yaml.push_str(&format!("  - {{reach: {{from: h{last}, to: 10.0.{k}.2}}, within: 90s}}\n"));
    }
    for asn in &g.ases {
        yaml.push_str(&format!(
            "  - {{valley_free: {{node: as{asn}, relationships: {}, routes: 7}}, within: 90s}}\n",
            rel_path.display()
        ));
    }
    let path = write_scenario("t-as8", &yaml);
    let o = vemu(&["test", path.to_str().unwrap()]);
    let t = text(&o);
    eprintln!("{t}");
    // Eight FRR routers (nine daemons each) starting on two cores may make the fidelity
    // monitor see the lab starved of CPU in its first second (issue 45): a check measured
    // then is untrustworthy (exit 3), which is right and not what this test is about.
    let said = |name: &str| t.lines().rfind(|l| l.starts_with(name)).unwrap_or_default();
    let mut untrustworthy = 0;
    let names = (0..7)
        .map(|k| format!("reach h{last} → 10.0.{k}.2: "))
        .chain(g.ases.iter().map(|a| format!("valley-free routes at as{a} (AS {a}): ")));
    for name in names {
        let l = said(&name);
        let passed = l.starts_with(&format!("{name}passed"));
        let doubted = l.starts_with(&format!("{name}UNTRUSTWORTHY, passed ("));
        assert!(passed || doubted, "{name}: {t}");
        untrustworthy += doubted as usize;
    }
    let summary = format!(
        "15 checks: {} passed, 0 failed, {untrustworthy} untrustworthy",
        15 - untrustworthy
    );
    assert!(t.contains(&summary), "{summary}: {t}");
    assert_eq!(o.status.code(), Some(if untrustworthy > 0 { 3 } else { 0 }), "{t}");
}
