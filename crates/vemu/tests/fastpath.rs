//! The kernel fast path in real labs: unimpaired link directions go from node to node
//! inside the kernel, and move to the engine and back at run time without the nodes
//! seeing any change. Run as root.

mod common;
use common::*;

const TWO: &str = "name: t-fast\naddressing: {ipv6: none}\nnodes: {a: {run: ['iperf3 -s -D']}, b: {run: ['iperf3 -s -D']}}\nlinks:\n  - {endpoints: [a, b]}\n";

/// What a node's interface looks like to the node: index, MAC, flags, carrier changes.
fn iface_view(lab: &Lab, node: &str) -> String {
    let (code, out) = lab.sh(node, "cat /sys/class/net/eth0/ifindex /sys/class/net/eth0/address /sys/class/net/eth0/carrier_changes; ip -br addr show eth0");
    assert_eq!(code, 0, "{out}");
    out
}

/// `kernel_path` of the link's forward and reverse directions, and their frame counts.
fn link_paths(lab: &Lab) -> ([bool; 2], [u64; 2]) {
    let st = lab.status();
    assert_eq!(st["fast_path"], "on", "{}", st["fast_path"]);
    let l = &st["links"][0];
    let dir = |d: &str| {
        (
            l[d]["stats"]["kernel_path"].as_bool().unwrap(),
            l[d]["stats"]["rx_frames"].as_u64().unwrap(),
        )
    };
    let (f, r) = (dir("forward"), dir("reverse"));
    ([f.0, r.0], [f.1, r.1])
}

#[test]
fn unimpaired_traffic_stays_in_the_kernel_and_switches_paths_unseen() {
    let _g = serial();
    let lab = Lab::up("t-fast", TWO);
    let (paths, _) = link_paths(&lab);
    assert_eq!(paths, [true, true], "an unimpaired link goes by the kernel");
    let before = [iface_view(&lab, "a"), iface_view(&lab, "b")];

    // The kernel carries and counts: pings and a TCP stream.
    let (sent, recv, rtt) = lab.ping("a", "b", 100, 0.01);
    assert_eq!((sent, recv), (100, 100));
    let bps = lab.iperf3("a", "b", 2);
    let (_, frames) = link_paths(&lab);
    eprintln!("kernel path: RTT {rtt:.3} ms, TCP {:.2} Gbit/s, frames {frames:?}", bps / 1e9);
    // ≥ 2 s of TCP at any speed a 2-core machine manages is far more than 10,000
    // segments each way (data forward, acknowledgements back).
    assert!(frames[0] > 10_000 && frames[1] > 1_000, "{frames:?}");

    // A delay on one direction takes it (only it) to the engine, at once.
    let o = lab.vemu(&["link", "set", "a:b", "--direction", "forward", "--delay", "20ms"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(link_paths(&lab).0, [false, true]);
    let (sent, recv, rtt) = lab.ping_median("a", "b", 20, 0.05);
    assert_eq!((sent, recv), (20, 20));
    assert!((20.0..22.0).contains(&rtt), "RTT {rtt} ms with 20 ms one way");
    // Back to unimpaired: back to the kernel.
    let o = lab.vemu(&["link", "set", "a:b", "--direction", "forward", "--delay", "0"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(link_paths(&lab).0, [true, true]);
    let (_, recv, rtt) = lab.ping_median("a", "b", 20, 0.05);
    assert_eq!(recv, 20);
    assert!(rtt < 2.0, "RTT {rtt} ms on an unimpaired link");
    // The nodes saw nothing change: same interface, MAC, addresses, no carrier flap.
    assert_eq!([iface_view(&lab, "a"), iface_view(&lab, "b")], before);

    // A capture takes both directions to the engine while it runs, and sees the frames.
    let file = std::env::temp_dir().join("vemu-tests/t-fast.pcapng");
    let cap = std::process::Command::new(env!("CARGO_BIN_EXE_vemu"))
        .args(["capture", "--lab", "t-fast", "b:eth0", "-c", "6", "-w", file.to_str().unwrap()])
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while link_paths(&lab).0 != [false, false] {
        assert!(
            std::time::Instant::now() < deadline,
            "the capture did not take the link to the engine"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    lab.ping("a", "b", 3, 0.1);
    let out = cap.wait_with_output().unwrap();
    assert!(out.status.success());
    let o = std::process::Command::new("tshark")
        .args(["-r", file.to_str().unwrap(), "-Y", "icmp"])
        .output()
        .unwrap();
    let icmp = String::from_utf8_lossy(&o.stdout).lines().count();
    assert!(icmp >= 5, "the capture of a kernel-path link saw {icmp} ICMP frames: {}", text(&o));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while link_paths(&lab).0 != [true, true] {
        assert!(
            std::time::Instant::now() < deadline,
            "the link did not return to the kernel after the capture"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }

    // Down: the nodes lose carrier and nothing passes; up: back, by the kernel.
    assert!(lab.vemu(&["link", "down", "a:b"]).status.success());
    let (_, carrier) = lab.sh("a", "cat /sys/class/net/eth0/carrier 2>&1");
    assert_ne!(carrier.trim(), "1", "carrier while the link is down");
    let (_, recv, _) = lab.ping("a", "b", 3, 0.1);
    assert_eq!(recv, 0);
    assert!(lab.vemu(&["link", "up", "a:b"]).status.success());
    assert_eq!(link_paths(&lab).0, [true, true]);
    let (_, recv, _) = lab.ping("a", "b", 3, 0.1);
    assert_eq!(recv, 3);
}

/// Each direction's (`kernel_shaper`, stats) of the lab's first link.
fn shaped(lab: &Lab) -> [(bool, serde_json::Value); 2] {
    let st = lab.status();
    assert_eq!(st["fast_path"], "on", "{}", st["fast_path"]);
    ["forward", "reverse"].map(|d| {
        let s = st["links"][0][d]["stats"].clone();
        (s["kernel_shaper"].as_bool().unwrap(), s)
    })
}

#[test]
fn a_rate_given_to_the_kernels_shaper_holds_in_the_kernel_until_more_is_set() {
    let _g = serial();
    let yaml = "name: t-tbf\naddressing: {ipv6: none}\nnodes: {a: {run: ['iperf3 -s -D']}, b: {run: ['iperf3 -s -D']}}\nlinks:\n  - {endpoints: [a, b], bandwidth: 50Mbit, shaper: kernel}\n";
    let lab = Lab::up("t-tbf", yaml);
    assert!(
        shaped(&lab).iter().all(|(k, _)| *k),
        "both directions go through the kernel's token bucket"
    );
    let before = [iface_view(&lab, "a"), iface_view(&lab, "b")];

    // TCP gets the rate; an idle link delays a ping by no transmission time.
    let bps = lab.iperf3("a", "b", 3);
    assert!(
        (0.80..1.02).contains(&(bps / 50e6)),
        "TCP {:.1} Mbit/s through a 50 Mbit/s token bucket",
        bps / 1e6
    );
    let (sent, recv, rtt) = lab.ping_median("a", "b", 20, 0.05);
    assert_eq!((sent, recv), (20, 20));
    assert!(rtt < 2.0, "RTT {rtt} ms on an idle shaped link");
    let [(_, fwd), _] = shaped(&lab);
    let n = |k: &str| fwd[k].as_u64().unwrap();
    // ≥ 3 s at 50 Mbit/s: more than 10,000 full frames, each counted in and out.
    assert!(n("tx_frames") > 10_000 && n("tx_bytes") > 15_000_000, "{fwd}");
    assert_eq!(n("rx_frames"), n("tx_frames") + n("drop_queue") + n("queue_frames"), "{fwd}");

    // Twice the rate in UDP: the bucket's queue fills and it drops, counted as queue
    // drops. (Its queue must be shorter than the sending socket's buffer: a frame waiting
    // in the bucket is still charged to its socket, as on a NIC of that rate, so one
    // UDP socket is slowed down, not dropped, by the default 1000 frames.)
    let o = lab.vemu(&["link", "set", "a:b", "--direction", "forward", "--queue", "20"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(shaped(&lab)[0].0, "a queue limit keeps the bucket");
    let o = lab.exec("a", &["iperf3", "-u", "-b", "100M", "-t", "2", "-c", "b", "-J"]);
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("iperf3: {}", text(&o)));
    let lost = v["end"]["sum"]["lost_percent"].as_f64().unwrap();
    assert!(lost > 25.0, "{lost}% of 100 Mbit/s lost through 50 Mbit/s");
    let [(_, fwd), _] = shaped(&lab);
    assert!(fwd["drop_queue"].as_u64().unwrap() > 1_000, "{fwd}");

    // A delay as well: the engine's serializer; taken away: the kernel's bucket again.
    let o = lab.vemu(&["link", "set", "a:b", "--direction", "forward", "--delay", "5ms"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(shaped(&lab).map(|(k, _)| k), [false, true]);
    assert_eq!(link_paths(&lab).0, [false, true]);
    let (_, recv, rtt) = lab.ping_median("a", "b", 10, 0.05);
    assert_eq!(recv, 10);
    assert!((5.0..7.0).contains(&rtt), "RTT {rtt} ms with 5 ms one way");
    let o = lab.vemu(&["link", "set", "a:b", "--direction", "forward", "--delay", "0"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(shaped(&lab).map(|(k, _)| k), [true, true]);
    // The engine's shaper asked for: the engine.
    let o = lab.vemu(&["link", "set", "a:b", "--shaper", "engine"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(link_paths(&lab).0, [false, false]);
    let bps = lab.iperf3("a", "b", 2);
    assert!(
        (0.80..1.02).contains(&(bps / 50e6)),
        "TCP {:.1} Mbit/s through the engine at 50 Mbit/s",
        bps / 1e6
    );
    // The nodes saw nothing change.
    assert_eq!([iface_view(&lab, "a"), iface_view(&lab, "b")], before);
}

/// `mtu` on a link is its interfaces' MTU: the link stays on the kernel path, which
/// holds a node that raises its own interface's MTU to the link's, as the engine does.
#[test]
fn a_links_mtu_keeps_it_in_the_kernel_which_holds_nodes_to_it() {
    let _g = serial();
    let lab =
        Lab::up("t-fast", &TWO.replace("{endpoints: [a, b]}", "{endpoints: [a, b], mtu: 1400}"));
    assert_eq!(
        link_paths(&lab).0,
        [true, true],
        "an MTU the interfaces have anyway is no reason for the engine"
    );
    assert_eq!(lab.sh("a", "cat /sys/class/net/eth0/mtu").1.trim(), "1400");
    let ping = |size: u32| lab.sh("a", &format!("ping -c 3 -i 0.2 -W 1 -M do -s {size} b"));
    let (code, out) = ping(1372);
    assert_eq!(code, 0, "whole 1400-byte packets: {out}");
    // Node a raises its interface's MTU: 1428-byte packets leave it, and go no further
    // (without the route's MTU the kernel path delivered them, and b answered).
    assert_eq!(lab.sh("a", "ip link set eth0 mtu 1500").0, 0);
    let (code, out) = ping(1400);
    assert_ne!(code, 0, "a 1428-byte packet crossed a link of 1400 in the kernel: {out}");
    assert!(out.contains("3 packets transmitted, 0 received"), "{out}");
    // The same through the engine, which counts them.
    let o = lab.vemu(&["link", "set", "a:b", "--direction", "forward", "--delay", "1ms"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(link_paths(&lab).0, [false, true]);
    let (code, out) = ping(1400);
    assert_ne!(code, 0, "{out}");
    assert_eq!(lab.status()["links"][0]["forward"]["stats"]["drop_mtu"], 3);
    assert_eq!(ping(1372).0, 0);
}

#[test]
fn the_fast_path_can_be_turned_off_and_leaves_nothing_behind() {
    let _g = serial();
    {
        let path = write_scenario("t-fast", TWO);
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_vemu"))
            .args(["up", path.to_str().unwrap()])
            .env("VEMU_FAST_PATH", "off")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        let lab = Lab { name: "t-fast".into() };
        // `up` says so in one line.
        assert_eq!(text(&o).matches("kernel fast path off (VEMU_FAST_PATH=off): every link direction goes through the engine").count(), 1, "{}", text(&o));
        let st = lab.status();
        assert_eq!(st["fast_path"], "off: VEMU_FAST_PATH=off");
        assert_eq!(st["links"][0]["forward"]["stats"]["kernel_path"], false);
        let (_, recv, _) = lab.ping("a", "b", 10, 0.01);
        assert_eq!(recv, 10);
        assert!(st["links"][0]["forward"]["stats"]["rx_frames"].as_u64().is_some());
    }
    let others = loaded_steer_programs();
    {
        let path = write_scenario("t-fast", TWO);
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_vemu"))
            .args(["up", path.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        let lab = Lab { name: "t-fast".into() };
        assert!(!text(&o).contains("fast path off"), "{}", text(&o));
        assert_eq!(lab.status()["fast_path"], "on");
        assert_eq!(loaded_steer_programs(), others + 1);
    }
    // The lab's plane namespace went with its state directory (Lab's drop checks that);
    // its TC program went with the last device and descriptor holding it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while loaded_steer_programs() > others {
        assert!(
            std::time::Instant::now() < deadline,
            "the fast path's TC program is still loaded after down"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// TC programs named like the fast path's, loaded in the kernel.
fn loaded_steer_programs() -> usize {
    aya::programs::loaded_programs().flatten().filter(|p| p.name_as_str() == Some("steer")).count()
}

/// `kernel_path` of every port of the lab's first LAN, and the frames its ports carried
/// (what the nodes sent into it, what it delivered to them).
fn lan_paths(lab: &Lab) -> (Vec<bool>, u64, u64) {
    let st = lab.status();
    let ms = st["segments"][0]["members"].as_array().unwrap().clone();
    let paths = ms
        .iter()
        .flat_map(|m| {
            [
                m["egress"]["stats"]["kernel_path"].as_bool().unwrap(),
                m["ingress"]["stats"]["kernel_path"].as_bool().unwrap(),
            ]
        })
        .collect();
    let sent = ms.iter().map(|m| m["egress"]["stats"]["rx_frames"].as_u64().unwrap()).sum();
    let got = ms.iter().map(|m| m["ingress"]["stats"]["tx_frames"].as_u64().unwrap()).sum();
    (paths, sent, got)
}

/// A plain LAN without impairments is switched by the kernel (a bridge in the plane);
/// an impairment on one port takes the whole LAN to the engine's switch at once, and
/// removing it brings it back — the nodes see no change of interface or carrier, and
/// the ports count on both paths.
#[test]
fn an_unimpaired_lan_is_switched_by_the_kernel_and_moves_unseen() {
    let _g = serial();
    let y = "name: t-klan\naddressing: {ipv6: none}\nnodes: {a: {}, b: {}, c: {}}\nsegments:\n  lan: {members: [a, b, c]}\n";
    let lab = Lab::up("t-klan", y);
    let (paths, _, _) = lan_paths(&lab);
    assert!(paths.iter().all(|&k| k), "{paths:?}");
    let before: Vec<String> = ["a", "b", "c"].iter().map(|n| iface_view(&lab, n)).collect();
    let (sent, recv, rtt) = lab.ping("a", "c", 50, 0.01);
    assert_eq!((sent, recv), (50, 50));
    let (_, s0, g0) = lan_paths(&lab);
    eprintln!("kernel: RTT {rtt:.3} ms; frames sent into the LAN {s0}, delivered {g0}");
    assert!(
        s0 >= 2 * 53 && g0 >= 2 * 53,
        "the bridge's traffic is counted: {s0} sent, {g0} delivered"
    );
    // 10 ms on b's port (both ways): the whole LAN to the engine.
    let o = lab.vemu(&["link", "set", "lan:b", "--delay", "10ms"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(lan_paths(&lab).0.iter().all(|&k| !k));
    let (sent, recv, rtt) = lab.ping_median("a", "b", 20, 0.05);
    assert_eq!((sent, recv), (20, 20));
    assert!((20.0..23.0).contains(&rtt), "RTT {rtt} ms through a port of 10 ms each way");
    let (_, recv, rtt) = lab.ping_median("a", "c", 20, 0.05);
    assert_eq!(recv, 20);
    assert!(rtt < 3.0, "RTT {rtt} ms between unimpaired ports of the engine's switch");
    let (_, s1, g1) = lan_paths(&lab);
    assert!(
        s1 >= s0 + 2 * 46 && g1 >= g0 + 2 * 46,
        "the engine's traffic is counted: {s1} sent, {g1} delivered"
    );
    let o = lab.vemu(&["link", "set", "lan:b", "--delay", "0"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(lan_paths(&lab).0.iter().all(|&k| k));
    let (_, recv, rtt) = lab.ping_median("a", "b", 20, 0.05);
    assert_eq!(recv, 20);
    assert!(rtt < 2.0, "RTT {rtt} ms on an unimpaired LAN");
    let after: Vec<String> = ["a", "b", "c"].iter().map(|n| iface_view(&lab, n)).collect();
    assert_eq!(after, before, "the nodes saw their interfaces change");
    // Taken down, a port loses its carrier (the engine drops its frames); back up, the
    // LAN returns to the kernel.
    let o = lab.vemu(&["link", "down", "lan:c"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(lab.sh("c", "cat /sys/class/net/eth0/carrier").1.trim(), "0");
    assert!(!lab.exec("a", &["ping", "-c", "1", "-W", "1", "c"]).status.success());
    let o = lab.vemu(&["link", "up", "lan:c"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(lan_paths(&lab).0.iter().all(|&k| k));
    assert_eq!(lab.ping("a", "c", 5, 0.05).1, 5);
}

/// `kernel_shaper` of each port's egress and ingress on the lab's first LAN, and the
/// stats of port `m`'s egress and ingress.
fn lan_shaped(lab: &Lab, m: usize) -> (Vec<bool>, [serde_json::Value; 2]) {
    let st = lab.status();
    let ms = st["segments"][0]["members"].as_array().unwrap().clone();
    let shaped = ms
        .iter()
        .flat_map(|m| {
            [
                m["egress"]["stats"]["kernel_shaper"].as_bool().unwrap(),
                m["ingress"]["stats"]["kernel_shaper"].as_bool().unwrap(),
            ]
        })
        .collect();
    (shaped, ["egress", "ingress"].map(|d| ms[m][d]["stats"].clone()))
}

/// A LAN whose ports' one impairment is a rate given to the kernel's shaper stays on the
/// kernel's bridge: each port's frames through a token bucket (an IFB device's) on their
/// way to the bridge, and what the bridge sends it through a bucket at its plane device.
/// TCP gets each port's rate, an idle ping is not held by the engine, the counters add
/// up, and a delay takes the LAN to the engine and back, unseen by the nodes.
#[test]
fn a_lan_with_rates_given_to_the_kernels_shaper_stays_on_the_bridge() {
    let _g = serial();
    let y = "name: t-slan\naddressing: {ipv6: none}\nnodes: {a: {}, b: {run: ['iperf3 -s -D']}, c: {run: ['iperf3 -s -D']}}\nsegments:\n  lan: {bandwidth: 50Mbit, shaper: kernel, members: [a, b, {node: c, ingress: {bandwidth: 20Mbit}}]}\n";
    let lab = Lab::up("t-slan", y);
    let (paths, _, _) = lan_paths(&lab);
    assert!(paths.iter().all(|&k| k), "{paths:?}");
    assert!(lan_shaped(&lab, 0).0.iter().all(|&k| k), "every port direction through a bucket");
    let before: Vec<String> = ["a", "b", "c"].iter().map(|n| iface_view(&lab, n)).collect();

    // TCP gets the rate of the slower bucket on its way: 50 Mbit/s to b, 20 to c.
    let bps = lab.iperf3("a", "b", 3);
    assert!(
        (0.80..1.02).contains(&(bps / 50e6)),
        "TCP {:.1} Mbit/s a -> b through 50 Mbit/s buckets",
        bps / 1e6
    );
    let bps = lab.iperf3("a", "c", 3);
    assert!(
        (0.80..1.02).contains(&(bps / 20e6)),
        "TCP {:.1} Mbit/s a -> c through a 20 Mbit/s bucket",
        bps / 1e6
    );
    let (sent, recv, rtt) = lab.ping_median("a", "b", 20, 0.05);
    assert_eq!((sent, recv), (20, 20));
    assert!(rtt < 2.0, "RTT {rtt} ms on an idle shaped LAN");
    // a's egress: what a sent came into its bucket, and left it or waits or was dropped;
    // c's ingress: what the bridge sent c, the same through c's bucket.
    let (_, [a_out, _]) = lan_shaped(&lab, 0);
    let (_, [_, c_in]) = lan_shaped(&lab, 2);
    for d in [&a_out, &c_in] {
        let n = |k: &str| d[k].as_u64().unwrap();
        assert!(n("tx_frames") > 4_000 && n("tx_bytes") > 6_000_000, "{d}");
        assert_eq!(n("rx_frames"), n("tx_frames") + n("drop_queue") + n("queue_frames"), "{d}");
    }

    // A delay on one port: the whole LAN to the engine's switch and serializers.
    let o = lab.vemu(&["link", "set", "lan:b", "--delay", "5ms"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(lan_paths(&lab).0.iter().all(|&k| !k));
    assert!(lan_shaped(&lab, 0).0.iter().all(|&k| !k));
    let (_, recv, rtt) = lab.ping_median("a", "b", 10, 0.05);
    assert_eq!(recv, 10);
    assert!((10.0..13.0).contains(&rtt), "RTT {rtt} ms through a port of 5 ms each way");
    let bps = lab.iperf3("a", "c", 2);
    assert!(
        (0.80..1.02).contains(&(bps / 20e6)),
        "TCP {:.1} Mbit/s a -> c through the engine at 20 Mbit/s",
        bps / 1e6
    );
    // Taken away: back on the bridge, through the buckets; c's ingress lifted: straight.
    let o = lab.vemu(&["link", "set", "lan:b", "--delay", "0"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = lab.vemu(&["link", "set", "lan:c", "--direction", "forward", "--bandwidth", "none"]);
    assert!(o.status.success(), "{}", text(&o));
    let (paths, _, _) = lan_paths(&lab);
    assert!(paths.iter().all(|&k| k), "{paths:?}");
    assert_eq!(lan_shaped(&lab, 0).0, [true, true, true, true, true, false]);
    let bps = lab.iperf3("a", "c", 2);
    assert!(
        (0.80..1.02).contains(&(bps / 50e6)),
        "TCP {:.1} Mbit/s a -> c through a's 50 Mbit/s bucket only",
        bps / 1e6
    );
    let (_, recv, rtt) = lab.ping_median("a", "b", 20, 0.05);
    assert_eq!(recv, 20);
    assert!(rtt < 2.0, "RTT {rtt} ms on an idle shaped LAN");
    let after: Vec<String> = ["a", "b", "c"].iter().map(|n| iface_view(&lab, n)).collect();
    assert_eq!(after, before, "the nodes saw their interfaces change");
}
