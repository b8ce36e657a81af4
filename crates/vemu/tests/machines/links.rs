//! Links and LANs across machines: delays and rates kept, path MTU, the underlay
//! measured, path probes shared.

use super::*;

#[test]
fn a_chain_across_two_machines_keeps_its_delays_and_rate() {
    let _g = serial();
    let m = Machines::start("vx", 78, &["a", "b"]);
    let yaml = "name: xm\naddressing: {ipv6: none}\nmachines: {a: 10.78.0.1, b: 10.78.0.2}\nnodes:\n  n1: {machine: a}\n  n2: {}\n  n3: {}\n  n4: {machine: b, run: ['iperf3 -s -D']}\nlinks:\n  - endpoints: [n1, n2]\n    delay: 1ms\n  - endpoints: [n2, n3]\n    delay: 2ms\n    bandwidth: 20Mbit\n  - endpoints: [n3, n4]\n    delay: 1ms\n";
    // The control channel as someone on the underlay sees it (the controller's port),
    // printed as text.
    let dump = Command::new("ip")
        .args(["netns", "exec", "vx-ul", "tcpdump", "-i", "vxu2", "-l", "-nn", "-A", "tcp"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The underlay towards machine b carries 50 Mbit/s (the rest of the bridge as much
    // as the CPU moves): `up` measures both ways between the machines.
    ok("ip netns exec vx-ul tc qdisc add dev vxu1 root tbf rate 50mbit burst 64kb latency 50ms");
    std::thread::sleep(Duration::from_millis(500));
    let up = m.up("xm", yaml);
    assert!(up.status.success(), "{}", text(&up));
    std::thread::sleep(Duration::from_millis(300));
    let _ = Command::new("kill").arg(dump.id().to_string()).status();
    let wire = dump.wait_with_output().unwrap().stdout;
    let has = |needle: &[u8]| wire.windows(needle.len()).any(|w| w == needle);
    assert!(has(b".14790:"), "nothing captured: {}", String::from_utf8_lossy(&wire));
    // Encrypted: neither the token nor the plan (node names, commands) is readable.
    assert!(
        !has(b"test-token-0123456789abcdef") && !has(b"iperf3 -s -D") && !has(b"\"nodes\""),
        "the control channel is readable on the underlay"
    );
    let n4_ip = machines_and_underlay_in_status(&m);
    exec_and_shell_reach_the_far_machine(&m);
    delays_and_rate_hold_across_machines(&m, &n4_ip);
    changes_reach_the_carrying_machine(&m, &n4_ip);
    flows_cross_machines_on_their_clocks(&m, &n4_ip);
    captures_take_each_frame_once(&m, &n4_ip);
    counters_count_each_direction_once(&m);
    forged_datagrams_are_dropped_unread(&m, &n4_ip);

    m.down_leaving_nothing("xm");
    assert!(!std::path::Path::new("/run/vemu/xm").exists());
    let r = report(&m);
    let sent_delivered: Vec<(Option<u64>, Option<u64>)> = r["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["sent"].as_u64(), f["delivered"].as_u64()))
        .collect();
    assert_eq!(
        sent_delivered,
        [(Some(100), Some(100)), (Some(60), Some(60))],
        "report after down: {r}"
    );
    assert!(!text(&up).contains("warning:"), "{}", text(&up));

    a_link_faster_than_the_underlay_is_warned(&m);
}

// The parts of `a_chain_across_two_machines_keeps_its_delays_and_rate`, in its order,
// on its lab "xm" (n1 on machine a, n4 on b, n2:n3 the 20 Mbit/s link between them).

/// Each node's machine and the underlay measured between the machines, in the status;
/// n4's address.
fn machines_and_underlay_in_status(m: &Machines) -> String {
    let st = m.vemu(&["status", "--lab", "xm", "--json"]);
    let status: serde_json::Value =
        serde_json::from_slice(&st.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&st)));
    let n4_ip = status["nodes"].as_array().unwrap().iter().find(|n| n["name"] == "n4").unwrap()
        ["ifaces"][0]["addrs"][0]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();

    // Each node says where it runs; the status lists the machines.
    let on: Vec<(String, String)> = status["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["name"].as_str().unwrap().into(), n["machine"].as_str().unwrap_or("").into()))
        .collect();
    assert!(
        on.iter().any(|(n, mc)| n == "n1" && mc == "a")
            && on.iter().any(|(n, mc)| n == "n4" && mc == "b"),
        "{on:?}"
    );
    let machines: Vec<&str> = status["machines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    assert_eq!(machines, ["a", "b"]);
    // The cut against the underlay: n2:n3 (20 Mbit/s) each way, about 50 Mbit/s measured
    // towards b, more the other way.
    let underlay = |from: &str| {
        status["machines"].as_array().unwrap().iter().find(|x| x["name"] == from).unwrap()
            ["underlay"][0]
            .clone()
    };
    let (ab, ba) = (underlay("a"), underlay("b"));
    for (u, to) in [(&ab, "b"), (&ba, "a")] {
        assert_eq!(
            (u["to"].as_str(), u["links"].as_u64(), u["set_bps"].as_u64()),
            (Some(to), Some(1), Some(20_000_000)),
            "{u}"
        );
    }
    let (ab_bps, ba_bps) =
        (ab["measured_bps"].as_f64().unwrap(), ba["measured_bps"].as_f64().unwrap());
    eprintln!("across 2 machines: underlay measured a -> b {:.1} Mbit/s (50 Mbit/s tbf), b -> a {:.1} Mbit/s", ab_bps / 1e6, ba_bps / 1e6);
    assert!(
        (30e6..55e6).contains(&ab_bps) && ba_bps > 100e6,
        "a -> b {ab_bps}, b -> a {ba_bps} bit/s"
    );

    n4_ip
}

fn exec_and_shell_reach_the_far_machine(m: &Machines) {
    // `vemu exec` from the controller's machine runs the command on the node's
    // machine: its output, standard input and exit status come back.
    let o = m.vemu(&[
        "exec",
        "--lab",
        "xm",
        "n4",
        "--",
        "sh",
        "-c",
        "hostname; echo to-stderr >&2; exit 7",
    ]);
    assert_eq!(o.status.code(), Some(7), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "n4\n");
    assert!(String::from_utf8_lossy(&o.stderr).contains("to-stderr"), "{}", text(&o));
    let mut c = Command::new("ip")
        .args(["netns", "exec", "vx-ctl", VEMU, "exec", "--lab", "xm", "n1", "--", "wc", "-c"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(c.stdin.as_mut().unwrap(), &[b'x'; 100_000]).unwrap();
    drop(c.stdin.take());
    let o = c.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "100000");
    let o = m.vemu(&["exec", "--lab", "xm", "n1", "--", "no-such-command"]);
    assert_eq!(o.status.code(), Some(127), "{}", text(&o));

    // `vemu shell` from the controller's machine: a terminal on the node's machine,
    // of this terminal's size, that ends with the shell's exit status.
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!("(sleep 1; printf 'hostname; stty size\\r'; sleep 1; printf 'exit 3\\r'; sleep 3) | script -qefc 'stty rows 33 cols 101; ip netns exec vx-ctl {VEMU} shell --lab xm n4' /dev/null"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("n4\r\n33 101\r\n"), "{out}");
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
}

fn delays_and_rate_hold_across_machines(m: &Machines, n4_ip: &str) {
    // Round trip: 2 x (1 + 2 + 1) ms, whichever machine each hop is on (run from
    // the controller's machine, and on the node's machine).
    m.exec(0, "xm", "n1", &["ping", "-c", "3", "-i", "0.2", n4_ip]);
    let p =
        m.vemu(&["exec", "--lab", "xm", "n1", "--", "ping", "-q", "-c", "20", "-i", "0.05", n4_ip]);
    let rtt = min_rtt_ms(&p);
    eprintln!("across 2 machines: n1 -> n4 min RTT {rtt:.3} ms (set 8 ms)");
    // Above the set delays: 2 x 39 us of serialization at 20 Mbit/s, six passes
    // through an engine (tens of us each, as on one machine) and two crossings of the
    // underlay (not yet subtracted from the set delay): 0.4-0.5 ms idle, up to 0.9 ms
    // with both cores busy.
    assert!((8.0..9.5).contains(&rtt), "min RTT {rtt} ms, set 8 ms");

    // TCP at the 20 Mbit/s set on the link between the machines.
    let o = m.exec(
        0,
        "xm",
        "n1",
        &["iperf3", "-c", n4_ip, "-t", "4", "-O", "1", "-J", "--connect-timeout", "3000"],
    );
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("iperf3: {}", text(&o)));
    let bps = v["end"]["sum_received"]["bits_per_second"].as_f64().unwrap();
    eprintln!("across 2 machines: TCP {:.2} Mbit/s over a 20 Mbit/s link", bps / 1e6);
    assert!((0.88 * 20e6..=1.0 * 20e6).contains(&bps), "{bps} bit/s");
    // The machine that receives a direction judges its own wait for what the other sent
    // (from each datagram's arrival to the write to the node): both ways have frames.
    let status: serde_json::Value =
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xm", "--json"]).stdout).unwrap();
    let link =
        status["links"].as_array().unwrap().iter().find(|l| l["name"] == "n2:n3").unwrap().clone();
    for d in ["forward", "reverse"] {
        let judged: u64 = link[d]["stats"]["arrival_wait_hist"]
            .as_array()
            .map_or(0, |h| h.iter().filter_map(|x| x.as_u64()).sum());
        assert!(judged >= 20, "{d}: {judged} frames judged on arrival: {}", link[d]["stats"]);
    }
}

fn changes_reach_the_carrying_machine(m: &Machines, n4_ip: &str) {
    // Run-time changes reach the machine that carries each direction.
    let o = m.vemu(&["link", "set", "n2:n3", "--delay", "10ms", "--lab", "xm"]);
    assert!(o.status.success(), "{}", text(&o));
    let rtt = min_rtt_ms(&m.exec(0, "xm", "n1", &["ping", "-q", "-c", "20", "-i", "0.05", n4_ip]));
    assert!((24.0..25.5).contains(&rtt), "min RTT {rtt} ms after link set, set 24 ms");
    // More than the underlay carries towards b: status says so (that way only).
    let warnings = || -> Vec<String> {
        let o = m.vemu(&["status", "--lab", "xm"]);
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.starts_with("warning: the links from machine"))
            .map(String::from)
            .collect()
    };
    assert!(warnings().is_empty(), "{:?}", warnings());
    let o = m.vemu(&["link", "set", "n2:n3", "--bandwidth", "100Mbit", "--lab", "xm"]);
    assert!(o.status.success(), "{}", text(&o));
    let w = warnings();
    assert!(
        w.len() == 1 && w[0].contains("from machine 'a' to 'b' are set to 100.0 Mbit/s in all"),
        "{w:?}"
    );
    // And it is so: 80 Mbit/s of UDP fit the link but not the underlay. The far engine
    // counts the frames that never came (tunnel sequence gaps): not the model's loss,
    // so the fidelity monitor holds them against the direction.
    let o = m.exec(0, "xm", "n1", &["iperf3", "-u", "-b", "80M", "-t", "2", "-c", n4_ip]);
    assert!(o.status.success(), "{}", text(&o));
    let status: serde_json::Value =
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xm", "--json"]).stdout).unwrap();
    let link =
        status["links"].as_array().unwrap().iter().find(|l| l["name"] == "n2:n3").unwrap().clone();
    let lost = |d: &str| link[d]["stats"]["underlay_lost"].as_u64().unwrap_or(0);
    let (fwd, rev) = (lost("forward"), lost("reverse"));
    eprintln!("across 2 machines: 80 Mbit/s over a 50 Mbit/s underlay: {fwd} + {rev} frames lost by the underlay");
    assert!(fwd.max(rev) > 1000, "underlay losses forward {fwd}, reverse {rev}: {link}");
    let affected = status["fidelity"]["affected"].as_array().unwrap();
    assert!(
        affected.iter().any(|a| a["name"].as_str().unwrap_or("").contains("n2:n3")
            && a["underlay_lost"].as_u64().unwrap_or(0) > 1000),
        "{}",
        status["fidelity"]
    );
}

fn flows_cross_machines_on_their_clocks(m: &Machines, n4_ip: &str) {
    // A traffic flow from a node of one machine to a node of the other: each end runs on
    // its node's machine and keeps its records there; `vemu report` on the controller's
    // machine gathers them (and `down` does, for a report afterwards). The one-way delay
    // compares two machines' lab clocks: 1 + 10 + 1 ms set.
    let flow = |count: &str| {
        let o = m.vemu(&[
            "traffic",
            "cbr",
            "--lab",
            "xm",
            "--from",
            "n1",
            "--to",
            "n4",
            "--to-addr",
            n4_ip,
            "--rate",
            "200",
            "--count",
            count,
        ]);
        assert!(o.status.success(), "{}", text(&o));
    };
    flow("100");
    let t0 = Instant::now();
    let mut r = report(m);
    while r["flows"][0]["delivered"] != 100 && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(300));
        r = report(m);
    }
    let f = &r["flows"][0];
    assert_eq!((f["sent"].as_u64(), f["delivered"].as_u64()), (Some(100), Some(100)), "{r}");
    // The machines' lab clocks, measured against the controller's by the heartbeats.
    let status: serde_json::Value =
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xm", "--json"]).stdout).unwrap();
    for mc in status["machines"].as_array().unwrap() {
        let (offset, rtt) = (mc["clock_offset_ns"].as_i64(), mc["clock_rtt_ns"].as_u64());
        eprintln!("across 2 machines: machine {}: lab clock {offset:?} ns ahead, measured with a {rtt:?} ns round trip", mc["name"]);
        assert!(offset.is_some() && rtt.is_some_and(|r| r < 50_000_000), "{mc}");
    }
    let o = m.vemu(&["status", "--lab", "xm"]);
    let table = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        table
            .lines()
            .filter(|l| (l.starts_with("a ") || l.starts_with("b ")) && l.contains(" ms (+/- "))
            .count(),
        2,
        "{table}"
    );
    let p50 = f["delay_ms"]["p50"].as_f64().unwrap();
    eprintln!("across 2 machines: CBR flow n1 -> n4 one-way delay p50 {p50:.3} ms (set 12 ms)");
    assert!((12.0..13.5).contains(&p50), "one-way delay p50 {p50} ms, set 12 ms: {r}");
    // This one's records reach the controller's machine with `down`.
    flow("60");
}

fn captures_take_each_frame_once(m: &Machines, n4_ip: &str) {
    // Captures of a node whose link crosses to the other machine: each frame once, as
    // delivered (after) or as it entered the link (before; the far machine's part).
    for point in ["after", "before"] {
        let file = format!("/tmp/vemu-tests/xm-{point}.pcapng");
        let _ = std::fs::create_dir_all("/tmp/vemu-tests");
        let cap = Command::new("ip")
            .args([
                "netns", "exec", "vx-ctl", VEMU, "capture", "--lab", "xm", "n2", "--point", point,
                "-c", "12", "-w", &file, "icmp",
            ])
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(1000));
        m.vemu(&["exec", "--lab", "xm", "n1", "--", "ping", "-c", "3", "-i", "0.2", n4_ip]);
        let t0 = Instant::now();
        let mut cap = cap;
        while cap.try_wait().unwrap().is_none() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "the capture ({point}) did not get its 12 frames"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let o = Command::new("tshark")
            .args(["-r", &file, "-T", "fields", "-e", "icmp.type", "-e", "icmp.seq"])
            .output()
            .unwrap();
        let mut seen: Vec<String> = String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        seen.sort();
        // Requests (8) and replies (0) of 3 pings, each in on one interface and out on the other.
        let want: Vec<String> =
            ["0 1", "0 1", "0 2", "0 2", "0 3", "0 3", "8 1", "8 1", "8 2", "8 2", "8 3", "8 3"]
                .iter()
                .map(|x| x.to_string())
                .collect();
        assert_eq!(seen, want, "capture {point}: {}", text(&o));
        // The file says where the times come from, and how far off they can be.
        let o = Command::new("tshark")
            .args(["-r", &file, "-c", "1", "-T", "fields", "-e", "frame.interface_description"])
            .output()
            .unwrap();
        let d = String::from_utf8_lossy(&o.stdout);
        assert!(
            d.contains("on machine ")
                && d.contains(": times moved to the controller's lab clock by")
                && d.contains(" ns, within ±"),
            "capture {point}: {d}"
        );
    }
}

fn counters_count_each_direction_once(m: &Machines) {
    // Counters of the link between the machines: each direction counted once.
    let status: serde_json::Value =
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xm", "--json"]).stdout).unwrap();
    let link = status["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "n2:n3")
        .unwrap_or_else(|| panic!("{status}"));
    let fwd = &link["forward"]["stats"];
    let (rx, tx) = (fwd["rx_frames"].as_u64().unwrap(), fwd["tx_frames"].as_u64().unwrap());
    assert!(tx > 1000 && tx <= rx, "n2:n3 forward: rx {rx}, tx {tx}");
    // The underlay was probed both ways: a few tens of microseconds on a bridge.
    for dir in ["forward", "reverse"] {
        let t = link[dir]["stats"]["transit_ns"].as_u64().unwrap_or(0);
        eprintln!("across 2 machines: n2:n3 {dir}: underlay one-way {t} ns (measured)");
        assert!((1..1_000_000).contains(&t), "n2:n3 {dir}: transit {t} ns");
    }
}

/// Issue 61: datagrams forged as machine a's (its address and tunnel port, by a raw
/// socket on its underlay), with n2:n3's VNIs and consecutive sequence numbers far ahead:
/// 8 of them made the far side resynchronise and lose the next frames. Sealed datagrams
/// (`tunnel::auth`): each forged one is dropped unread and counted, and pings across
/// lose nothing while 50 a second arrive.
fn forged_datagrams_are_dropped_unread(m: &Machines, n4_ip: &str) {
    let ports = |ns: &str, ip: &str| -> Vec<String> {
        let o = sh(&format!("ip netns exec {ns} ss -Huan src {ip}"));
        text(&o)
            .lines()
            .filter_map(|l| {
                l.split_whitespace().nth(3)?.rsplit_once(':').map(|(_, p)| p.to_string())
            })
            .collect()
    };
    let (from, to) = (ports("vx-a", "10.78.0.1"), ports("vx-b", "10.78.0.2"));
    assert!(!from.is_empty() && !to.is_empty(), "tunnel sockets: {from:?} {to:?}");
    let forge = r#"
import socket, struct, sys, time
src, dst, sports, dports = sys.argv[1], sys.argv[2], sys.argv[3].split(","), sys.argv[4].split(",")
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
def dgram(sport, dport, vni, seq):
    vx = bytes([8, 0, 0, 0]) + vni.to_bytes(3, "big") + b"\0"
    trailer = b"vm" + bytes([0, 1]) + struct.pack(">IQ", seq, 0) + bytes(12)
    payload = vx + bytes(range(60)) + trailer
    udp = struct.pack(">HHHH", int(sport), int(dport), 8 + len(payload), 0) + payload
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0, socket.inet_aton(src), socket.inet_aton(dst))
    return ip + udp
for round in range(20):
    for sp in sports:
        for dp in dports:
            for vni in (2, 3):
                for k in range(8):
                    s.sendto(dgram(sp, dp, vni, 100000 + round * 8 + k), (dst, 0))
    time.sleep(0.05)
"#;
    let script = std::env::temp_dir().join("vemu-forge.py");
    std::fs::write(&script, forge).unwrap();
    let mut forger = Command::new("ip")
        .args([
            "netns",
            "exec",
            "vx-a",
            "python3",
            script.to_str().unwrap(),
            "10.78.0.1",
            "10.78.0.2",
        ])
        .args([from.join(","), to.join(",")])
        .spawn()
        .unwrap();
    let o = m.exec(0, "xm", "n1", &["ping", "-c", "40", "-i", "0.025", "-W", "1", n4_ip]);
    assert!(forger.wait().unwrap().success());
    let (sent, got, _) = parse_ping(&String::from_utf8_lossy(&o.stdout));
    assert_eq!((sent, got), (40, 40), "pings lost while forged datagrams came: {}", text(&o));
    let status: serde_json::Value =
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xm", "--json"]).stdout).unwrap();
    let link = status["links"].as_array().unwrap().iter().find(|l| l["name"] == "n2:n3").unwrap();
    let forged = link["forward"]["stats"]["underlay_forged"].as_u64().unwrap_or(0);
    assert!(forged >= 160, "forged datagrams counted toward b: {forged}: {link}");
}

fn a_link_faster_than_the_underlay_is_warned(m: &Machines) {
    // A lab whose link between the machines is set faster than the underlay towards b:
    // `up` says so at once.
    let yaml = "name: xw\naddressing: {ipv6: none}\nmachines: {a: 10.78.0.1, b: 10.78.0.2}\nnodes:\n  w1: {machine: a}\n  w2: {machine: b}\nlinks:\n  - {endpoints: [w1, w2], bandwidth: 100Mbit}\n";
    let up = m.up("xw", yaml);
    assert!(up.status.success(), "{}", text(&up));
    assert!(
        text(&up)
            .contains("warning: the links from machine 'a' to 'b' are set to 100.0 Mbit/s in all"),
        "{}",
        text(&up)
    );
    let o = m.vemu(&["down", "--lab", "xw"]);
    assert!(o.status.success(), "{}", text(&o));
}

/// The traffic report of lab "xm", as JSON.
fn report(m: &Machines) -> serde_json::Value {
    let o = m.vemu(&["report", "--lab", "xm", "--json"]);
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)))
}

/// An underlay whose path carries less than its machines' interfaces do (a 1400-byte
/// hop between 1500-byte interfaces, frames over it dropped without a word: the MTU
/// black hole of Mininet's and MaxiNet's tunnels): the engines find the path's size by
/// probing, and full-size frames of the lab still cross, in pieces.
#[test]
fn a_path_mtu_below_the_interfaces_mtu_still_carries_full_size_frames() {
    let _g = serial();
    let m = Machines::start("vm", 80, &["a", "b"]);
    for i in 0..3 {
        ok(&format!("ip -n vm-ul link set vmu{i} mtu 1400"));
    }
    let yaml = "name: xp\naddressing: {ipv6: none}\nmachines: {a: 10.80.0.1, b: 10.80.0.2}\nnodes:\n  n1: {machine: a}\n  n2: {machine: b, run: ['iperf3 -s -D']}\nlinks:\n  - endpoints: [n1, n2]\n    bandwidth: 20Mbit\n";
    let up = m.up("xp", yaml);
    assert!(up.status.success(), "{}", text(&up));
    let st: serde_json::Value =
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xp", "--json"]).stdout).unwrap();
    let n2 = st["nodes"].as_array().unwrap().iter().find(|n| n["name"] == "n2").unwrap()["ifaces"]
        [0]["addrs"][0]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    // Full-size ICMP (1472 bytes of data: a 1514-byte frame) and TCP at the set rate.
    let o = m.exec(
        0,
        "xp",
        "n1",
        &["ping", "-c", "5", "-i", "0.2", "-W", "2", "-s", "1472", "-M", "do", &n2],
    );
    let (sent, got, _) = parse_ping(&text(&o));
    assert_eq!((sent, got), (5, 5), "{}", text(&o));
    let o = m.exec(
        0,
        "xp",
        "n1",
        &["iperf3", "-c", &n2, "-t", "3", "-O", "1", "-J", "--connect-timeout", "3000"],
    );
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("iperf3: {}", text(&o)));
    let bps = v["end"]["sum_received"]["bits_per_second"].as_f64().unwrap_or(0.0);
    assert!(
        (0.85 * 20e6..=1.0 * 20e6).contains(&bps),
        "{bps} bit/s across a 1400-byte underlay hop: {}",
        text(&o)
    );
    // The status says what the path carries (datagrams found to cross the 1400-byte hop,
    // more than the 1232 bytes any path does) and that this link's set delay (none) is
    // below the underlay's.
    let st: serde_json::Value =
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xp", "--json"]).stdout).unwrap();
    let payload = st["links"][0]["forward"]["stats"]["path_payload_bytes"].as_u64().unwrap_or(0);
    assert!(
        (1233..=1372).contains(&payload),
        "datagrams of {payload} bytes over a 1400-byte hop: {}",
        st["links"][0]
    );
    let text_status = text(&m.vemu(&["status", "--lab", "xp"]));
    assert!(text_status.contains(&format!("datagrams of {payload} B")), "{text_status}");
    assert!(
        text_status.contains(
            "warning: n1:n2 fwd: the set delay (0 us) is below the underlay's one-way delay"
        ),
        "{text_status}"
    );
    // The underlay's hop shrinks to 1300 bytes while the lab runs (its bridge ports drop
    // larger frames without a word): the engines fall back and find
    // the new size within a few probe rounds (a second apart); full-size frames cross
    // again; the control channel (segments kept to 1200 bytes) never notices.
    for i in 0..3 {
        ok(&format!("ip -n vm-ul link set vmu{i} mtu 1300"));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let payload = loop {
        let st: serde_json::Value =
            serde_json::from_slice(&m.vemu(&["status", "--lab", "xp", "--json"]).stdout).unwrap();
        let p = ["forward", "reverse"]
            .map(|d| st["links"][0][d]["stats"]["path_payload_bytes"].as_u64().unwrap_or(0));
        if p.iter().all(|&x| x <= 1272) || Instant::now() > deadline {
            break p;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(
        payload.iter().all(|&x| (1232..=1272).contains(&x)),
        "datagrams of {payload:?} bytes after the hop shrank to 1300"
    );
    let o = m.exec(
        0,
        "xp",
        "n1",
        &["ping", "-c", "5", "-i", "0.2", "-W", "2", "-s", "1472", "-M", "do", &n2],
    );
    let (sent, got, _) = parse_ping(&text(&o));
    assert_eq!((sent, got), (5, 5), "full-size pings after the path shrank: {}", text(&o));
    let o = m.vemu(&["down", "--lab", "xp"]);
    assert!(o.status.success(), "{}", text(&o));
}

/// Four machines in a ring, one node each: every link crosses, so the underlay is
/// measured both ways between neighbours — at once where no machine takes part in two
/// probes (four rounds for the ring) — every direction gets a figure, the kernel's
/// tunnel carries none of the shaped links, pings go round, and `down` leaves nothing
/// anywhere.
#[test]
fn a_ring_on_four_machines_measures_every_direction_of_its_underlay() {
    let _g = serial();
    let m = Machines::start("vq", 82, &["a", "b", "c", "d"]);
    let yaml = "name: xq
routing: static
addressing: {ipv6: none}
machines: {a: 10.82.0.1, b: 10.82.0.2, c: 10.82.0.3, d: 10.82.0.4}
nodes: {n1: {machine: a}, n2: {machine: b}, n3: {machine: c}, n4: {machine: d}}
links:
  - {endpoints: [n1, n2], bandwidth: 10Mbit}
  - {endpoints: [n2, n3], bandwidth: 10Mbit}
  - {endpoints: [n3, n4], bandwidth: 10Mbit}
  - {endpoints: [n4, n1], bandwidth: 10Mbit}
  - {endpoints: [n1, n3]}
";
    let o = m.up("xq", yaml);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        !text(&o).contains("fast path off"),
        "nothing here the fast path could carry is not a warning: {}",
        text(&o)
    );
    let st: serde_json::Value =
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xq", "--json"]).stdout).unwrap();
    // (Every end is in the plane, for the kernel's tunnel between machines — which
    // carries no direction with a rate: the engines shape those. The one without may go
    // through it, in IP fragments, once its probe found them to cross.)
    assert_eq!(st["fast_path"].as_str(), Some("on"), "{}", st["fast_path"]);
    assert!(
        st["links"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["name"] != "n1:n3")
            .all(|l| l["forward"]["stats"]["kernel_path"] != true
                && l["reverse"]["stats"]["kernel_path"] != true),
        "{}",
        st["links"]
    );
    let machines = st["machines"].as_array().unwrap();
    assert_eq!(machines.len(), 4);
    // Every direction a link with a rate crosses is measured; a and c, joined by a link
    // without one, are not (nothing to weigh) until a rate is set a -> c.
    let row = |st: &serde_json::Value, from: &str, to: &str| {
        st["machines"].as_array().unwrap().iter().find(|x| x["name"] == from).unwrap()["underlay"]
            .as_array()
            .unwrap()
            .iter()
            .find(|u| u["to"] == to)
            .cloned()
            .unwrap()
    };
    for mm in machines {
        let rows = mm["underlay"].as_array().unwrap();
        let diagonal = ["a", "c"].contains(&mm["name"].as_str().unwrap());
        assert_eq!(
            rows.len(),
            2 + diagonal as usize,
            "{} reaches its two neighbours (and a or c the other): {rows:?}",
            mm["name"]
        );
        for u in rows.iter().filter(|u| u["unlimited_links"] == 0) {
            let bps = u["measured_bps"]
                .as_u64()
                .unwrap_or_else(|| panic!("{} -> {} not measured: {u}", mm["name"], u["to"]));
            assert!(
                bps > 10_000_000,
                "{} -> {}: {bps} bit/s measured, the links want 10 Mbit/s",
                mm["name"],
                u["to"]
            );
            assert_eq!(u["set_bps"].as_u64(), Some(10_000_000));
        }
    }
    for (from, to) in [("a", "c"), ("c", "a")] {
        assert!(
            row(&st, from, to)["measured_bps"].is_null(),
            "{from} -> {to} measured for a link without a rate"
        );
    }
    // Machine a's three links to other machines share its engine's tunnel sockets: one
    // per shard (at most one per core), not one per link.
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let agent = m.agent_pid(0).to_string();
    let o = sh("ip netns exec vq-a ss -uanpH src 10.82.0.1");
    let sockets = text(&o).lines().filter(|l| l.contains(&format!("pid={agent},"))).count();
    assert!(
        (1..=cores.min(3)).contains(&sockets),
        "{sockets} tunnel sockets for 3 links on {cores} cores: {}",
        text(&o)
    );
    // Ten directions between machines without a set delay, each below the underlay's:
    // eight warnings, then how many more (not a line each in a lab of hundreds).
    let text_status = text(&m.vemu(&["status", "--lab", "xq"]));
    let lines: Vec<&str> = text_status.lines().filter(|l| l.starts_with("warning: ")).collect();
    assert_eq!(lines.len(), 9, "{text_status}");
    assert!(
        lines[..8].iter().all(|l| l.contains("is below the underlay's one-way delay")),
        "{text_status}"
    );
    assert_eq!(
        lines[8], "warning: ... and 2 more like these (vemu status --json has every direction)",
        "{text_status}"
    );
    let o = m.vemu(&[
        "link",
        "set",
        "--lab",
        "xq",
        "n1:n3",
        "--direction",
        "forward",
        "--bandwidth",
        "5Mbit",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let st2: serde_json::Value =
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xq", "--json"]).stdout).unwrap();
    assert!(
        row(&st2, "a", "c")["measured_bps"].as_u64().is_some_and(|b| b > 5_000_000),
        "{}",
        row(&st2, "a", "c")
    );
    assert!(
        row(&st2, "c", "a")["measured_bps"].is_null(),
        "only the direction given a rate is measured"
    );
    // n1 reaches n3, on another machine (by their own link).
    let n3 = st["nodes"].as_array().unwrap().iter().find(|n| n["name"] == "n3").unwrap()["ifaces"]
        [0]["addrs"][0]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let o = m.exec(0, "xq", "n1", &["ping", "-c", "3", "-i", "0.2", "-W", "2", &n3]);
    assert!(o.status.success(), "n1 -> n3 across machines: {}", text(&o));
    m.down_leaving_nothing("xq");
}

/// A LAN across two machines: h1, h2 on a (with the switch), h3 on b with 2 ms egress and
/// 1 ms ingress, h4 on b too. Ping RTTs are the set delays (the underlay's taken off both
/// ways), ARP and broadcasts cross (once per machine, through the trunk), h3 and h4 reach
/// each other through the switch on a, `link set` on h3's port takes effect where each
/// direction is carried out, and a capture of h3 sees each frame once.
#[test]
fn a_lan_across_two_machines_keeps_each_ports_delays() {
    let _g = serial();
    let m = Machines::start("vl", 84, &["a", "b"]);
    let yaml = "name: xl\naddressing: {ipv6: none}\nmachines: {a: 10.84.0.1, b: 10.84.0.2}\nnodes:\n  h1: {machine: a}\n  h2: {machine: a}\n  h3: {machine: b}\n  h4: {machine: b}\nsegments:\n  lan:\n    members:\n      - {node: h1}\n      - {node: h2}\n      - {node: h3, egress: {delay: 2ms}, ingress: {delay: 1ms}}\n      - {node: h4}\n";
    let o = m.up("xl", yaml);
    assert!(o.status.success(), "{}", text(&o));
    let o = m.vemu(&[
        "check",
        &write_scenario("xl", yaml).to_string_lossy(),
        "--machines",
        "a=10.84.0.1,b=10.84.0.2",
    ]);
    assert!(
        text(&o).contains(
            "segment lan spans machines: its switch on machine a, 2 of 4 members elsewhere"
        ),
        "{}",
        text(&o)
    );
    let ping = |from: &str, to: &str| {
        m.vemu(&["exec", "--lab", "xl", from, "--", "ping", "-c", "5", "-i", "0.2", "-W", "2", to])
    };
    // Let the underlay's delay be measured (probes in the first second), then: h1 -> h3
    // is 1 ms there and 2 ms back; h3 -> h2 the same; h1 -> h2 stays local (no delay).
    std::thread::sleep(Duration::from_millis(1500));
    for (from, to, want) in [
        ("h1", "10.0.0.3", 3.0),
        ("h3", "10.0.0.2", 3.0),
        ("h1", "10.0.0.2", 0.0),
        ("h3", "10.0.0.4", 3.0),
    ] {
        let rtt = min_rtt_ms(&ping(from, to));
        eprintln!("LAN across 2 machines: {from} -> {to} min RTT {rtt:.3} ms (set {want} ms)");
        assert!(rtt >= want && rtt < want + 1.0, "{from} -> {to}: {rtt} ms, set {want} ms");
    }
    // Unicast between h3 and h4 (both on b) is switched on b: none of it crosses the
    // underlay (pings with a payload of their own, looked for in the datagrams), where
    // h1's to h3 do.
    let dump = Command::new("ip")
        .args(["netns", "exec", "vl-ul", "tcpdump", "-i", "br0", "-l", "-nn", "-A", "udp"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    let mark = |from: &str, to: &str, pattern: &str| {
        m.vemu(&[
            "exec", "--lab", "xl", from, "--", "ping", "-c", "5", "-i", "0.2", "-W", "2", "-p",
            pattern, to,
        ])
    };
    let rtt = min_rtt_ms(&mark("h4", "10.0.0.3", "766d756c"));
    assert!((3.0..4.0).contains(&rtt), "h4 -> h3 switched on b: {rtt} ms, 3 ms set");
    assert!(mark("h1", "10.0.0.3", "6c6f6f6b").status.success());
    // A broadcast from h3 (no node answers broadcast pings): to the switch on a, and not
    // back to b for h4, which had it on b.
    m.vemu(&[
        "exec",
        "--lab",
        "xl",
        "h3",
        "--",
        "ping",
        "-b",
        "-c",
        "3",
        "-i",
        "0.2",
        "-W",
        "1",
        "-p",
        "62636173",
        "10.0.0.255",
    ]);
    std::thread::sleep(Duration::from_millis(300));
    let _ = Command::new("kill").arg(dump.id().to_string()).status();
    let seen = String::from_utf8_lossy(&dump.wait_with_output().unwrap().stdout).to_string();
    // (Datagrams whose payload shows the pattern: one line each in tcpdump's ASCII.)
    let count = |p: &str| seen.lines().filter(|l| l.contains(&p.repeat(3))).count();
    let (local, across, broadcast) = (count("vmul"), count("look"), count("bcas"));
    assert!(local == 0 && across == 10 && broadcast == 3, "datagrams on the underlay with pings between h4 and h3 (both on b): {local}; between h1 and h3: {across} (10); broadcasts from h3: {broadcast} (3)");
    // h3's egress (h3 -> lan forward; carried out on b) to 5 ms: 6 ms round trips.
    let o = m.vemu(&[
        "link",
        "set",
        "h3:lan",
        "--lab",
        "xl",
        "--direction",
        "forward",
        "--delay",
        "5ms",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let rtt = min_rtt_ms(&ping("h1", "10.0.0.3"));
    assert!((6.0..7.0).contains(&rtt), "after link set: {rtt} ms");
    // And its ingress (lan -> h3; carried out on b, after the trunk) to 4 ms: 9 ms.
    let o = m.vemu(&[
        "link",
        "set",
        "lan:h3",
        "--lab",
        "xl",
        "--direction",
        "forward",
        "--delay",
        "4ms",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let rtt = min_rtt_ms(&ping("h1", "10.0.0.3"));
    assert!((9.0..10.0).contains(&rtt), "after link set: {rtt} ms");
    // A capture of h3 (on b): 3 requests in, 3 replies out, each once.
    let file = "/tmp/vemu-tests/xl-h3.pcapng";
    let _ = std::fs::create_dir_all("/tmp/vemu-tests");
    let mut cap = Command::new("ip")
        .args([
            "netns", "exec", "vl-ctl", VEMU, "capture", "--lab", "xl", "h3", "-c", "6", "-w", file,
            "icmp",
        ])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    m.vemu(&["exec", "--lab", "xl", "h1", "--", "ping", "-c", "3", "-i", "0.2", "10.0.0.3"]);
    let t0 = Instant::now();
    while cap.try_wait().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(20), "the capture did not get its 6 frames");
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = Command::new("tshark")
        .args(["-r", file, "-T", "fields", "-e", "icmp.type", "-e", "icmp.seq"])
        .output()
        .unwrap();
    let mut seen: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    seen.sort();
    assert_eq!(seen, ["0 1", "0 2", "0 3", "8 1", "8 2", "8 3"], "{}", text(&o));
    m.down_leaving_nothing("xl");
}

/// The tunnels of a shard to one far socket share its path: one of them probes it (round
/// trip, path MTU) and the others take its findings. Four links between two machines on
/// this computer's shards: the probes on the underlay carry one VNI per pair of shard
/// sockets (2 here), not one per link, and every direction still knows the underlay's
/// delay and datagram size.
#[test]
fn links_to_one_machine_share_their_path_probes() {
    let _g = serial();
    let m = Machines::start("vs", 93, &["a", "b"]);
    let yaml = "name: xs\naddressing: {ipv6: none}\nmachines: {a: 10.93.0.1, b: 10.93.0.2}\nnodes: {n1: {machine: a}, n2: {machine: b}}\nlinks:\n  - {endpoints: [n1, n2]}\n  - {endpoints: [n1, n2]}\n  - {endpoints: [n1, n2]}\n  - {endpoints: [n1, n2]}\n";
    let o = m.up("xs", yaml);
    assert!(o.status.success(), "{}", text(&o));
    // Probes (VXLAN flags byte 8, then 1) machine a sends, for 2 s: their VNIs.
    let dump = Command::new("ip")
        .args([
            "netns",
            "exec",
            "vs-ul",
            "timeout",
            "2",
            "tcpdump",
            "-i",
            "vsu0",
            "-l",
            "-nn",
            "-x",
            "udp and src host 10.93.0.1 and udp[8] = 8 and udp[9] = 1",
        ])
        .output()
        .unwrap();
    let mut vnis = std::collections::BTreeSet::new();
    let mut bytes: Vec<u8> = Vec::new();
    let mut flush = |bytes: &mut Vec<u8>| {
        // IPv4 header (20), UDP (8), then VXLAN: the VNI in its bytes 4-6.
        if bytes.len() >= 35 {
            vnis.insert(u32::from_be_bytes([0, bytes[32], bytes[33], bytes[34]]));
        }
        bytes.clear();
    };
    for line in String::from_utf8_lossy(&dump.stdout).lines() {
        match line.trim_start().strip_prefix("0x") {
            Some(rest) => bytes.extend(rest.split_whitespace().skip(1).flat_map(|w| {
                (0..w.len() / 2).map(move |i| u8::from_str_radix(&w[2 * i..2 * i + 2], 16).unwrap())
            })),
            None => flush(&mut bytes),
        }
    }
    flush(&mut bytes);
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    assert_eq!(
        vnis.len(),
        cores.min(4),
        "probe VNIs from machine a: {vnis:?} ({cores} cores): {}",
        String::from_utf8_lossy(&dump.stdout).lines().take(20).collect::<Vec<_>>().join("\n")
    );
    let st = m.status("xs");
    for l in st["links"].as_array().unwrap() {
        for dir in ["forward", "reverse"] {
            let s = &l[dir]["stats"];
            assert!(
                s["transit_ns"].as_u64().unwrap_or(0) > 0
                    && s["path_payload_bytes"].as_u64().unwrap_or(0) >= 1472,
                "{} {dir}: {s}",
                l["name"]
            );
        }
    }
    // And the links carry traffic, each its own.
    for k in 0..4 {
        let ip = st["nodes"].as_array().unwrap().iter().find(|n| n["name"] == "n2").unwrap()
            ["ifaces"][k]["addrs"][0]
            .as_str()
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .to_string();
        let o =
            m.exec(0, "xs", "n1", &["ping", "-c", "2", "-i", "0.2", "-W", "2", "-s", "1472", &ip]);
        assert_eq!(parse_ping(&text(&o)).1, 2, "link {k}: {}", text(&o));
    }
    m.down_leaving_nothing("xs");
}
