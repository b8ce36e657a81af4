//! Routing daemons across machines: FRR's OSPF, babeld over a radio channel.

use super::*;

/// A routing daemon's view across machines: the 10-router FRR OSPF ring of the examples
/// spread over three machines by the partitioner (several ring links cross machines),
/// converging, then rerouting when a link between two machines goes down.
#[test]
fn an_frr_ospf_ring_across_three_machines_converges_and_reroutes() {
    let _g = serial();
    let m = Machines::start("vr", 81, &["a", "b", "c"]);
    let file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/frr-ospf-ring.yaml");
    m.labs.lock().unwrap().push("xr".into());
    let o = m.vemu(&[
        "up",
        file.to_str().unwrap(),
        "--name",
        "xr",
        "--machines",
        "a=10.81.0.1,b=10.81.0.2,c=10.81.0.3",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let st: serde_json::Value =
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xr", "--json"]).stdout).unwrap();
    let machine_of = |n: &str| {
        st["nodes"].as_array().unwrap().iter().find(|x| x["name"] == n).unwrap()["machine"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // Links whose ends are on two machines.
    let across: Vec<String> = st["links"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| {
            machine_of(l["a"].as_str().unwrap().split(':').next().unwrap())
                != machine_of(l["b"].as_str().unwrap().split(':').next().unwrap())
        })
        .map(|l| l["name"].as_str().unwrap().to_string())
        .collect();
    let used: std::collections::BTreeSet<String> =
        (1..=10).map(|i| machine_of(&format!("r{i}"))).collect();
    assert_eq!(used.len(), 3, "every machine hosts routers");
    assert!(across.len() >= 3, "a ring over 3 machines crosses them at least 3 times: {across:?}");
    // Every loopback reachable from r1 (FRR learnt every route over the machines).
    let reach_all = |secs: u64| {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let missing: Vec<u32> = (2..=10)
                .filter(|i| {
                    !m.vemu(&[
                        "exec",
                        "--lab",
                        "xr",
                        "r1",
                        "--",
                        "ping",
                        "-c",
                        "1",
                        "-W",
                        "1",
                        &format!("10.255.0.{i}"),
                    ])
                    .status
                    .success()
                })
                .collect();
            if missing.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "loopbacks of r{missing:?} unreachable from r1 after {secs} s"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    reach_all(90);
    // A link between two machines fails: OSPF goes the other way round.
    let cut = &across[0];
    let o = m.vemu(&["link", "down", cut, "--lab", "xr"]);
    assert!(o.status.success(), "{}", text(&o));
    reach_all(30);
    m.down_leaving_nothing("xr");
}

/// A MANET on two machines: the five-node radio line with n1, n2 on machine a and n4,
/// n5 on b (examples/manet-two-machines.yaml), over the 802.11 DCF. The channel (its
/// whole DCF, ACKs included) runs on a; n4's and n5's
/// frames reach it, and its deliveries reach them, through tunnels. babeld routes n1 to
/// n5 over exactly 4 hops across the machines; the channel's view (who hears whom, who
/// sent to whom) includes the far members; each member's directions are counted once,
/// with the underlay's delay taken off both ways; moving n3 away (an order to a's
/// channel) cuts the line; `down` leaves nothing on either machine.
#[test]
fn a_manet_across_two_machines_routes_with_babeld_over_one_radio_channel() {
    let _g = serial();
    let m = Machines::start("vw", 83, &["a", "b"]);
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/manet-two-machines.yaml");
    m.labs.lock().unwrap().push("xw".into());
    let o = m.vemu(&[
        "up",
        file.to_str().unwrap(),
        "--name",
        "xw",
        "--machines",
        "a=10.83.0.1,b=10.83.0.2",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let st: serde_json::Value =
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xw", "--json"]).stdout).unwrap();
    let machine_of = |n: &str| {
        st["nodes"].as_array().unwrap().iter().find(|x| x["name"] == n).unwrap()["machine"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        (machine_of("n1"), machine_of("n2"), machine_of("n4"), machine_of("n5")),
        ("a".into(), "a".into(), "b".into(), "b".into())
    );
    let ping = |ttl: &str| {
        m.vemu(&[
            "exec",
            "--lab",
            "xw",
            "n1",
            "--",
            "ping",
            "-c",
            "1",
            "-W",
            "2",
            "-t",
            ttl,
            "10.255.0.5",
        ])
    };
    eventually(90, "n1 reaches n5's loopback across the machines", || ping("64").status.success());
    // Exactly 4 hops: a TTL of 3 dies at n4 (on machine b), a TTL of 4 arrives.
    let o = ping("3");
    assert!(!o.status.success() && text(&o).contains("Time to live exceeded"), "{}", text(&o));
    let o = ping("4");
    assert!(o.status.success(), "{}", text(&o));
    // The channel (on a) knows the far members: n5 hears n4 only, and sent to n4 only.
    let st: serde_json::Value =
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xw", "--json"]).stdout).unwrap();
    let n5 = &st["segments"][0]["members"][4]["radio"];
    let names = |v: &serde_json::Value| {
        v.as_array()
            .unwrap()
            .iter()
            .map(|n| n["node"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        (names(&n5["neighbours"]), names(&n5["sent_to"])),
        (vec!["n4".to_string()], vec!["n4".to_string()]),
        "{n5}"
    );
    // The channel is the 802.11 DCF (csma: true), decided on a for the far members too:
    // n5's unicast frames (pings toward n1, through n4) were acknowledged, and the
    // engine on a counted its decisions of the medium.
    assert!(n5["mac"]["acked"].as_u64().unwrap_or(0) > 0, "{n5}");
    let decided: u64 = st["segments"][0]["stats"]["decide_late_hist"]
        .as_array()
        .map_or(0, |h| h.iter().map(|n| n.as_u64().unwrap_or(0)).sum());
    assert!(decided > 0, "{}", st["segments"][0]["stats"]);
    // n5's egress is carried out (and counted) on b, its ingress on a; both lead by the
    // underlay's one-way delay, measured.
    let port = &st["segments"][0]["members"][4];
    for d in ["egress", "ingress"] {
        let s = &port[d]["stats"];
        let (tx, transit) = (s["tx_frames"].as_u64().unwrap(), s["transit_ns"].as_u64().unwrap());
        assert!(tx > 0 && transit > 0 && transit < 5_000_000, "n5's {d}: {port}");
        assert!(s["rx_frames"].as_u64().unwrap() >= tx, "n5's {d} counted twice: {port}");
    }
    // n3 walks away: a's channel hears of it, and the line is cut.
    let o = m.vemu(&["node", "move", "n3", "--to", "500,1000", "--lab", "xw"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = m.vemu(&[
        "exec",
        "--lab",
        "xw",
        "n1",
        "--",
        "ping",
        "-c",
        "3",
        "-i",
        "0.2",
        "-W",
        "1",
        "10.255.0.5",
    ]);
    assert!(!o.status.success(), "still reachable with n3 away: {}", text(&o));
    m.down_leaving_nothing("xw");
}
