//! The kernel's VXLAN tunnel between machines: when links take it (IPv4 and IPv6
//! underlays).

use super::*;

/// Unimpaired directions of links between machines go through the kernel's VXLAN
/// devices where the underlay carries whole frames (9000-byte interfaces here): the
/// underlay sees VXLAN on the lab's port, not the engines' tunnels; a delay set takes
/// the direction back to the engine and lifting it returns it to the kernel; a capture
/// of the far end records the frames arriving there (they go through the engines while
/// it runs); `down` leaves nothing.
#[test]
fn unimpaired_links_between_machines_take_the_kernels_tunnel_where_the_underlay_carries_whole_frames(
) {
    let _g = serial();
    let m = Machines::start_mtu("vk", 87, &["a", "b"], 9000);
    let yaml = "name: xk9\naddressing: {ipv6: none}\nmachines: {a: 10.87.0.1, b: 10.87.0.2}\nnodes:\n  n1: {machine: a}\n  n2: {machine: b, run: ['iperf3 -s -D']}\nlinks:\n  - endpoints: [n1, n2]\n";
    // (Machine b is cut from its controller below: its share must outlast that.)
    m.labs.lock().unwrap().push("xk9".into());
    let up = m.vemu_leased(&["up", write_scenario("xk9", yaml).to_str().unwrap()], 30);
    assert!(up.status.success(), "{}", text(&up));
    let status = || m.status("xk9");
    let kernel = |st: &serde_json::Value| kernel_paths(st, "n1:n2");
    // Within a few probe rounds the tunnels find that 9000-byte datagrams cross.
    eventually(10, "both directions through the kernel", || kernel(&status()) == (true, true));
    let n2_ip = status()["nodes"].as_array().unwrap().iter().find(|n| n["name"] == "n2").unwrap()
        ["ifaces"][0]["addrs"][0]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    // On the underlay: datagrams to the lab's VXLAN port.
    let dump = Command::new("ip")
        .args(["netns", "exec", "vk-ul", "tcpdump", "-i", "br0", "-l", "-nn", "udp"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let o =
        m.exec(0, "xk9", "n1", &["ping", "-c", "5", "-i", "0.1", "-s", "1472", "-M", "do", &n2_ip]);
    assert!(o.status.success(), "{}", text(&o));
    let o = m.exec(
        0,
        "xk9",
        "n1",
        &["iperf3", "-c", &n2_ip, "-t", "2", "-J", "--connect-timeout", "3000"],
    );
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("iperf3: {}", text(&o)));
    let bps = v["end"]["sum_received"]["bits_per_second"].as_f64().unwrap();
    eprintln!("through the kernel's tunnel: TCP {:.2} Gbit/s", bps / 1e9);
    assert!(bps > 50e6, "{bps} bit/s");
    std::thread::sleep(Duration::from_millis(300));
    let _ = Command::new("kill").arg(dump.id().to_string()).status();
    let seen = String::from_utf8_lossy(&dump.wait_with_output().unwrap().stdout).to_string();
    let port = vemu_host::vxlan_port("xk9");
    let vxlan = seen.lines().filter(|l| l.contains(&format!(".{port}: "))).count();
    assert!(
        vxlan > 100,
        "{vxlan} VXLAN datagrams to port {port} on the underlay: {}",
        seen.lines().take(20).collect::<Vec<_>>().join("\n")
    );
    // A delay set one way: that way through the engine (which takes the underlay's
    // transit off it), the other still through the kernel.
    let o = m.vemu(&[
        "link",
        "set",
        "n1:n2",
        "--direction",
        "forward",
        "--delay",
        "5ms",
        "--lab",
        "xk9",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(kernel(&status()), (false, true));
    let rtt =
        min_rtt_ms(&m.exec(0, "xk9", "n1", &["ping", "-q", "-c", "10", "-i", "0.05", &n2_ip]));
    assert!((5.0..6.0).contains(&rtt), "min RTT {rtt} ms, 5 ms set one way");
    let o =
        m.vemu(&["link", "set", "n1:n2", "--direction", "forward", "--delay", "0", "--lab", "xk9"]);
    assert!(o.status.success(), "{}", text(&o));
    eventually(5, "the forward direction back in the kernel", || kernel(&status()) == (true, true));
    let rtt =
        min_rtt_ms(&m.exec(0, "xk9", "n1", &["ping", "-q", "-c", "10", "-i", "0.05", &n2_ip]));
    assert!(rtt < 2.0, "min RTT {rtt} ms unimpaired");
    a_capture_takes_both_directions_through_the_engines(&m, &n2_ip);
    a_lost_machines_kernel_takes_nothing_more(&m);
    m.down_leaving_nothing("xk9");
}

// The parts of the test above, on its lab "xk9" (n1 on machine a, n2 on b).

fn a_capture_takes_both_directions_through_the_engines(m: &Machines, n2_ip: &str) {
    let status = || m.status("xk9");
    let kernel = |st: &serde_json::Value| kernel_paths(st, "n1:n2");
    // A capture of n2 (what arrives there, recorded on its machine): both directions
    // through the engines meanwhile, each frame once.
    let file = "/tmp/vemu-tests/xk9.pcapng";
    let _ = std::fs::create_dir_all("/tmp/vemu-tests");
    let mut cap = Command::new("ip")
        .args([
            "netns", "exec", "vk-ctl", VEMU, "capture", "--lab", "xk9", "n2", "--point", "after",
            "-c", "10", "-w", file, "icmp",
        ])
        .spawn()
        .unwrap();
    eventually(5, "both directions through the engines while captured", || {
        kernel(&status()) == (false, false)
    });
    let o = m.exec(0, "xk9", "n1", &["ping", "-c", "5", "-i", "0.1", n2_ip]);
    assert!(o.status.success(), "{}", text(&o));
    let t0 = Instant::now();
    while cap.try_wait().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(20), "the capture did not get its 10 frames");
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = Command::new("tshark")
        .args(["-r", file, "-T", "fields", "-e", "icmp.type"])
        .output()
        .unwrap();
    let mut seen: Vec<String> =
        String::from_utf8_lossy(&o.stdout).lines().map(String::from).collect();
    seen.sort();
    assert_eq!(seen, ["0", "0", "0", "0", "0", "8", "8", "8", "8", "8"], "{}", text(&o));
    eventually(5, "back in the kernel after the capture", || kernel(&status()) == (true, true));
}

fn a_lost_machines_kernel_takes_nothing_more(m: &Machines) {
    let status = || m.status("xk9");
    // Machine b loses its controller (the agents' channel cut; the underlay still carries
    // UDP): found lost, its link is down on a, whose kernel then takes nothing more that
    // b's kernel sends — n1 sees none of n2's pings.
    ok("ip netns exec vk-b nft add table inet cut && ip netns exec vk-b nft add chain inet cut in '{ type filter hook input priority 0; }' && ip netns exec vk-b nft add rule inet cut in tcp dport 14790 drop");
    eventually(20, "machine b lost", || status()["machines"][1]["state"] == "lost");
    let n1_ip = status()["nodes"].as_array().unwrap().iter().find(|n| n["name"] == "n1").unwrap()
        ["ifaces"][0]["addrs"][0]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let dump = Command::new("nsenter")
        .args([
            "-t",
            &m.agent_pid(0).to_string(),
            "-m",
            VEMU,
            "exec",
            "--lab",
            "xk9",
            "n1",
            "--",
            "timeout",
            "4",
            "tcpdump",
            "-i",
            "eth0",
            "-c",
            "1",
            "-nn",
            "icmp",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    let o = m.exec(1, "xk9", "n2", &["ping", "-c", "3", "-i", "0.2", "-W", "1", &n1_ip]);
    assert!(
        !o.status.success(),
        "n2 reached n1 over a link that is down on n1's machine: {}",
        text(&o)
    );
    let heard = String::from_utf8_lossy(&dump.wait_with_output().unwrap().stdout).to_string();
    assert!(!heard.contains("ICMP"), "n1 heard n2 over a link down on its machine: {heard}");
    ok("ip netns exec vk-b nft delete table inet cut");
}

/// On an underlay of 1500-byte interfaces a frame of a 1500-byte interface does not fit
/// one VXLAN datagram: a link whose `mtu` leaves room for the headers (1446 here) takes
/// the kernel's tunnel whole; a 1500-byte one takes it too once a probe found that IP
/// fragments cross the underlay (the kernel sends its frames in two), and `vemu status`
/// says so. Bulk TCP on it (GSO super-frames) is lent to the engines' tunnels, which
/// carry super-frames whole, and the direction goes back to the kernel once idle.
#[test]
fn a_full_size_link_takes_the_kernels_tunnel_in_fragments_and_lends_bulk_tcp_to_the_engines() {
    let _g = serial();
    let m = Machines::start("vn", 89, &["a", "b"]);
    let yaml = "name: xn\naddressing: {ipv6: none}\nmachines: {a: 10.89.0.1, b: 10.89.0.2}\nnodes:\n  n1: {machine: a}\n  n2: {machine: b}\n  n3: {machine: b, run: ['iperf3 -s -D']}\nlinks:\n  - {endpoints: [n1, n2], mtu: 1446}\n  - {endpoints: [n1, n3]}\n";
    m.labs.lock().unwrap().push("xn".into());
    let up = m.vemu(&["up", write_scenario("xn", yaml).to_str().unwrap()]);
    assert!(up.status.success(), "{}", text(&up));
    let status = || m.status("xn");
    eventually(10, "n1:n2 through the kernel", || kernel_paths(&status(), "n1:n2") == (true, true));
    eventually(10, "n1:n3 through the kernel", || kernel_paths(&status(), "n1:n3") == (true, true));
    let ip = |n: &str| {
        status()["nodes"].as_array().unwrap().iter().find(|x| x["name"] == n).unwrap()["ifaces"][0]
            ["addrs"][0]
            .as_str()
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .to_string()
    };
    let (n2, n3) = (ip("n2"), ip("n3"));
    // Whole packets of each link's MTU cross, through the kernel's tunnel (n1:n3's in
    // fragments: the underlay sees them).
    let dump = Command::new("ip")
        .args(["netns", "exec", "vn-ul", "tcpdump", "-i", "br0", "-l", "-nn", "-v", "ip"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let o = m.exec(0, "xn", "n1", &["ping", "-c", "5", "-i", "0.1", "-s", "1418", "-M", "do", &n2]);
    assert!(o.status.success(), "{}", text(&o));
    let o = m.exec(0, "xn", "n1", &["ping", "-c", "5", "-i", "0.1", "-s", "1472", "-M", "do", &n3]);
    assert!(o.status.success(), "{}", text(&o));
    std::thread::sleep(Duration::from_millis(300));
    let _ = Command::new("kill").arg(dump.id().to_string()).status();
    let seen = String::from_utf8_lossy(&dump.wait_with_output().unwrap().stdout).to_string();
    let port = vemu_host::vxlan_port("xn");
    let fragments = seen.lines().filter(|l| l.contains("flags [+]")).count();
    assert!(fragments >= 10, "{fragments} first fragments on the underlay: {seen}");
    assert!(seen.contains(&format!(".{port}: ")), "no VXLAN on the underlay: {seen}");
    let st = status();
    let l = st["links"].as_array().unwrap().iter().find(|l| l["name"] == "n1:n3").unwrap();
    assert!(l["forward"]["stats"]["tx_frames"].as_u64().unwrap() >= 5, "{l}");
    // `vemu status` says how n1:n3 goes, and what would spare it the fragments.
    let o = m.vemu(&["status", "--lab", "xn"]);
    let notes: Vec<String> =
        text(&o).lines().filter(|l| l.starts_with("note: ")).map(String::from).collect();
    assert_eq!(notes.len(), 2, "{}", text(&o));
    assert!(
        notes.iter().all(|n| n.starts_with("note: n1:n3 ")
            && n.contains("kernel's tunnel in IP fragments")
            && n.contains("datagrams of 1472 B")
            && n.contains("needs 1526 B")
            && n.contains("mtu: 1446 or less")),
        "{notes:?}"
    );
    // Bulk TCP n1 -> n3: lent to the engines while it runs (the ACKs the other way stay
    // in the kernel's), back to the kernel after.
    let iperf = m.spawn_exec(
        0,
        "xn",
        "n1",
        &["iperf3", "-c", &n3, "-t", "3", "-J", "--connect-timeout", "3000"],
    );
    std::thread::sleep(Duration::from_millis(1500));
    let during = status();
    let l = during["links"].as_array().unwrap().iter().find(|l| l["name"] == "n1:n3").unwrap();
    assert_eq!(l["forward"]["stats"]["tunnel_lent"], true, "{l}");
    assert_eq!(l["forward"]["stats"]["kernel_path"], false, "{l}");
    assert_eq!(l["reverse"]["stats"]["kernel_path"], true, "{l}");
    let o = iperf.wait_with_output().unwrap();
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("iperf3: {}", text(&o)));
    let bps = v["end"]["sum_received"]["bits_per_second"].as_f64().unwrap();
    eprintln!("n1 -> n3 lent to the engines: TCP {:.2} Gbit/s", bps / 1e9);
    assert!(bps > 50e6, "{bps} bit/s");
    eventually(5, "n1:n3 back in the kernel", || kernel_paths(&status(), "n1:n3") == (true, true));
    assert_eq!(status()["links"][1]["forward"]["stats"]["tunnel_lent"], false);
    m.down_leaving_nothing("xn");
}

/// Machines joined by an IPv6 underlay: the engines' tunnels carry a link with a delay
/// (full-size frames in pieces: 1452 bytes of UDP payload a datagram there), and a link
/// whose `mtu` leaves room for the headers goes through the kernel's VXLAN over IPv6.
#[test]
fn machines_on_an_ipv6_underlay_carry_links_through_the_engines_and_the_kernel() {
    let _g = serial();
    let m = Machines::start_v6("v6", 90, &["a", "b"]);
    let yaml = "name: x6\naddressing: {ipv6: none}\nmachines: {a: 'fd90::1', b: 'fd90::2'}\nnodes:\n  n1: {machine: a}\n  n2: {machine: b, run: ['iperf3 -s -D']}\nlinks:\n  - {endpoints: [n1, n2], delay: 1ms}\n  - {endpoints: [n1, n2], mtu: 1426}\n";
    let up = m.up("x6", yaml);
    assert!(up.status.success(), "{}", text(&up));
    let status = || m.status("x6");
    // (The links are n1:n2#1 and n1:n2#2: the kernel carries the second.)
    let kernel = |st: &serde_json::Value, i: usize| {
        kernel_paths(&serde_json::json!({"links": [st["links"][i]]}), &format!("n1:n2#{}", i + 1))
    };
    eventually(10, "the second link through the kernel", || kernel(&status(), 1) == (true, true));
    let st = status();
    assert_eq!(kernel(&st, 0), (false, false));
    assert_eq!(
        st["links"][0]["forward"]["stats"]["path_payload_bytes"], 1452,
        "{}",
        st["links"][0]
    );
    let dump = Command::new("ip")
        .args(["netns", "exec", "v6-ul", "tcpdump", "-i", "br0", "-l", "-nn", "ip6 and udp"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // Through the engines: the set delay, and whole 1500-byte packets in pieces.
    let rtt = min_rtt_ms(&m.exec(
        0,
        "x6",
        "n1",
        &["ping", "-c", "5", "-i", "0.2", "-s", "1472", "-M", "do", "10.0.0.2"],
    ));
    eprintln!("across the IPv6 underlay through the engines: min RTT {rtt:.3} ms");
    assert!((2.0..3.0).contains(&rtt), "min RTT {rtt} ms, 1 ms set each way");
    // Through the kernel: whole 1426-byte packets, and TCP.
    let o = m.exec(
        0,
        "x6",
        "n1",
        &["ping", "-c", "5", "-i", "0.1", "-s", "1398", "-M", "do", "10.0.0.6"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = m.exec(
        0,
        "x6",
        "n1",
        &["iperf3", "-c", "10.0.0.6", "-t", "2", "-J", "--connect-timeout", "3000"],
    );
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("iperf3: {}", text(&o)));
    assert!(v["end"]["sum_received"]["bits_per_second"].as_f64().unwrap() > 50e6, "{}", v["end"]);
    std::thread::sleep(Duration::from_millis(300));
    let _ = Command::new("kill").arg(dump.id().to_string()).status();
    let seen = String::from_utf8_lossy(&dump.wait_with_output().unwrap().stdout).to_string();
    let port = vemu_host::vxlan_port("x6");
    let vxlan = seen.lines().filter(|l| l.contains(&format!(".{port}: "))).count();
    assert!(
        vxlan > 100,
        "{vxlan} VXLAN datagrams over IPv6 to port {port}: {}",
        seen.lines().take(10).collect::<Vec<_>>().join("\n")
    );
    let st = status();
    assert!(
        st["links"][1]["forward"]["stats"]["rx_frames"].as_u64().unwrap() > 100,
        "{}",
        st["links"][1]
    );
    m.down_leaving_nothing("x6");
}
