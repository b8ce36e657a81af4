use super::*;

/// BIRD 2.0.12's `show protocols all` of an AS's router (two BGP sessions, one down),
/// trimmed of the capability lines.
const BIRD_PROTOCOLS: &str = "BIRD 2.0.12 ready.
Name       Proto      Table      State  Since         Info
device1    Device     ---        up     20:24:49.721  

kernel1    Kernel     master4    up     20:24:49.721  
  Channel ipv4
    Routes:         0 imported, 5 exported, 0 preferred
    Route change stats:     received   rejected   filtered    ignored   accepted
      Import updates:              0          0          0          0          0
      Import withdraws:            0          0        ---          0          0
      Export updates:              7          0          2        ---          5
      Export withdraws:            0        ---        ---        ---          0

peer0      BGP        ---        up     20:24:54.054  Established   
  Description:    AS64512, a peer
  BGP state:          Established
    Neighbor address: 172.16.0.0
    Neighbor AS:      64512
    Local AS:         64513
  Channel ipv4
    Routes:         2 imported, 5 exported, 1 preferred
    Route change stats:     received   rejected   filtered    ignored   accepted
      Import updates:              2          0          0          0          2
      Import withdraws:            1          0        ---          0          1
      Export updates:              6          1          0        ---          5
      Export withdraws:            2        ---        ---        ---          1

customer1  BGP        ---        start  20:24:50.000  Active        Socket: Connection refused
  BGP state:          Active
    Neighbor address: 172.16.0.3
    Neighbor AS:      64514
    Local AS:         64513
";

const BIRD_ROUTES: &str = "BIRD 2.0.12 ready.
Table master4:
10.0.3.0/24          unicast [customer2 20:24:53.598] * (100) [AS64515i]
\tvia 172.16.0.7 on eth2
                     unicast [peer0 20:24:54.121] (100) [AS64515i]
\tvia 172.16.0.0 on eth0
10.0.4.0/24          unicast [customer3 20:24:55.933] * (100) [AS64516i]
\tvia 172.16.0.9 on eth3
10.0.1.0/24          unreachable [own 20:24:59.721] * (200)
";

const BIRD_ROUTE_FOR: &str = "BIRD 2.0.12 ready.
Table master4:
10.0.1.0/24          unicast [provider0 20:24:54.165] * (100) [AS64513i]
\tvia 172.16.0.8 on eth0
\tType: BGP univ
\tBGP.origin: IGP
\tBGP.as_path: 64513
\tBGP.next_hop: 172.16.0.8
                     unicast [provider1 20:24:55.933] (100) [AS64513i]
\tvia 172.16.0.10 on eth1
\tType: BGP univ
\tBGP.as_path: 64514 64513
";

const BIRD_OWN: &str = "BIRD 2.0.12 ready.
Table master4:
10.0.1.0/24          unreachable [own 20:24:49.721] * (200)
\tType: static univ
";

fn day_ms(t: &str) -> u64 {
    parse_day_ms(t).unwrap()
}

#[test]
fn birds_sessions_updates_last_route_and_path_are_read() {
    // Answered at 20:25:00.000, lab clock 10 s.
    let at = AnsweredAt { lab_ns: 10_000_000_000, local_day_ms: day_ms("20:25:00") };
    let answers = [BIRD_PROTOCOLS.to_string(), BIRD_ROUTES.to_string(), BIRD_ROUTE_FOR.to_string()];
    let r = router("as64513", Software::Bird, &answers, at).unwrap();
    assert_eq!((r.sessions, r.established, r.asn), (2, 1, Some(64513)));
    // Exported and accepted: 5 updates + 1 withdraw; received 2 + 1 (the kernel's
    // protocol is not BGP and does not count).
    assert_eq!((r.updates_sent, r.updates_received), (6, 3));
    // The latest BGP route, 20:24:55.933, 4.067 s before the answer (the static at
    // 20:24:59 is not BGP's).
    assert_eq!(r.last_change_ns, Some(10_000_000_000 - 4_067_000_000));
    assert_eq!(r.path, Some(vec![64513]));
    // Its own prefix: an empty path; none asked: no path.
    let own = router("o", Software::Bird, &[BIRD_PROTOCOLS.into(), "".into(), BIRD_OWN.into()], at);
    assert_eq!(own.unwrap().path, Some(vec![]));
    let none = router("n", Software::Bird, &[BIRD_PROTOCOLS.into(), "".into()], at).unwrap();
    assert_eq!((none.path, none.last_change_ns), (None, None));
    // Across midnight: a route at 23:59:59.500 is 1.5 s old at 00:00:01.
    let midnight = AnsweredAt { lab_ns: 5_000_000_000, local_day_ms: 1_000 };
    let late = "10.0.3.0/24          unicast [c 23:59:59.500] * (100) [AS1i]\n";
    let r = router("m", Software::Bird, &["".into(), late.into()], midnight).unwrap();
    assert_eq!(r.last_change_ns, Some(3_500_000_000));
    // A route older than the lab is at its start; a date (a route older than 20 h) and
    // garbage are left out.
    let at1 = AnsweredAt { lab_ns: 1_000_000_000, local_day_ms: day_ms("20:25:00") };
    let r = router("x", Software::Bird, &["".into(), BIRD_ROUTES.into()], at1).unwrap();
    assert_eq!(r.last_change_ns, Some(0));
    let odd = "a [p 2026-12-01] [AS1i]\nb [p 25:00:00] [AS1i]\nc [p 1:2] [AS1i]\n[ [AS\nd [p 23:59:60.999] [AS1i]\n";
    let r = router("y", Software::Bird, &["".into(), odd.into()], at1).unwrap();
    assert_eq!(r.last_change_ns, None);
}

const FRR_NEIGHBOURS: &str = r#"{
  "172.16.0.0": {"remoteAs": 64512, "localAs": 64513, "bgpState": "Established",
    "bgpInUpdateElapsedTimeMsecs": 6000,
    "messageStats": {"updatesSent": 17, "updatesRecv": 7}},
  "172.16.0.3": {"remoteAs": 64514, "localAs": 64513, "bgpState": "Established",
    "bgpInUpdateElapsedTimeMsecs": 4000,
    "messageStats": {"updatesSent": 3, "updatesRecv": 2}},
  "172.16.0.5": {"remoteAs": 64515, "localAs": 64513, "bgpState": "Active",
    "messageStats": {"updatesSent": 0, "updatesRecv": 0}}
}"#;

const FRR_ROUTE: &str = r#"{"prefix": "10.0.2.0/24", "paths": [
  {"aspath": {"string": "64513 64514"}, "valid": true},
  {"aspath": {"string": "64514"}, "valid": true, "bestpath": {"overall": true}}]}"#;

#[test]
fn frrs_sessions_updates_last_update_and_path_are_read() {
    let at = AnsweredAt { lab_ns: 10_000_000_000, local_day_ms: 0 };
    let answers = [FRR_NEIGHBOURS.to_string(), FRR_ROUTE.to_string()];
    let r = router("as64513", Software::Frr, &answers, at).unwrap();
    assert_eq!((r.sessions, r.established, r.asn), (3, 2, Some(64513)));
    assert_eq!((r.updates_sent, r.updates_received), (20, 9));
    // The latest UPDATE received: 4 s before the answer.
    assert_eq!(r.last_change_ns, Some(6_000_000_000));
    assert_eq!(r.path, Some(vec![64514]));
    // Its own prefix ("Local"), and no route at all ("{}").
    let local = r#"{"paths": [{"aspath": {"string": "Local"}, "bestpath": {"overall": true}}]}"#;
    let own = router("o", Software::Frr, &[FRR_NEIGHBOURS.into(), local.into()], at).unwrap();
    assert_eq!(own.path, Some(vec![]));
    let none = router("n", Software::Frr, &[FRR_NEIGHBOURS.into(), "{\n}\n".into()], at).unwrap();
    assert_eq!(none.path, None);
    // Not JSON: said, with the node.
    let e = router("bad", Software::Frr, &["% BGP instance not found".into()], at).unwrap_err();
    assert!(e.starts_with("node 'bad': FRR's neighbours are not JSON"), "{e}");
    let e = router("bad", Software::Frr, &["{}".into(), "<".into()], at).unwrap_err();
    assert!(e.starts_with("node 'bad': its route to the prefix: not JSON"), "{e}");
}

#[test]
fn the_report_adds_up_and_names_the_last_change() {
    let r = |node: &str, asn: u32, last: Option<u64>, path: Option<Vec<u32>>| RouterBgp {
        node: node.into(),
        software: Software::Bird,
        asn: Some(asn),
        sessions: 2,
        established: 1,
        updates_sent: 5,
        updates_received: 4,
        last_change_ns: last,
        path,
        error: None,
    };
    let prefix: IpNet = "10.0.1.0/24".parse().unwrap();
    let rep = report(
        Some(prefix),
        vec![
            r("b", 2, Some(7), Some(vec![1])),
            r("a", 1, Some(9), Some(vec![])),
            r("c", 3, None, None),
        ],
        10,
    );
    assert_eq!(rep.routers.iter().map(|r| r.asn.unwrap()).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(
        (rep.sessions, rep.established, rep.updates_sent, rep.updates_received),
        (6, 3, 15, 12)
    );
    assert_eq!((rep.last_change_ns, rep.last_change_node.as_deref()), (Some(9), Some("a")));
    assert_eq!(rep.reaching, 2);
    // The commands: BIRD's three, FRR's two, an IPv6 prefix asked of FRR as IPv6.
    assert_eq!(commands(Software::Bird, Some(prefix)).len(), 3);
    assert_eq!(commands(Software::Bird, None).len(), 2);
    let v6 = commands(Software::Frr, Some("2001:db8::/48".parse().unwrap()));
    assert_eq!(v6[1], ["vtysh", "-c", "show bgp ipv6 unicast 2001:db8::/48 json"]);
}
