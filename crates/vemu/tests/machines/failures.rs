//! What goes wrong: a share that cannot be built, a lost machine or controller, a
//! stranger flooding an agent.

use super::*;

#[test]
fn a_machine_that_cannot_build_its_share_fails_the_lab_everywhere_with_a_clear_error() {
    let _g = serial();
    let m = Machines::start("vy", 79, &["a", "b"]);
    // Machine c has no agent; machine b's share cannot be built (a file that cannot be read).
    let yaml = "name: xf\nmachines: {a: 10.79.0.1, b: 10.79.0.2}\nnodes:\n  n1: {machine: a}\n  n2: {machine: b, sysctl: {net.nonexistent.key: '1'}}\nlinks:\n  - endpoints: [n1, n2]\n";
    let o = m.up("xf", yaml);
    assert!(!o.status.success());
    let msg = text(&o);
    assert!(
        msg.contains("machine 'b' (10.79.0.2:14790)") && msg.contains("net.nonexistent.key"),
        "{msg}"
    );
    m.nothing_left("a failed up");
    assert!(
        !std::path::Path::new("/run/vemu/xf").exists(),
        "the controller keeps the lab's directory"
    );
    // An agent that is not there: said at once, nothing built.
    let yaml = "name: xg\nmachines: {a: 10.79.0.1, c: 10.79.0.9}\nnodes:\n  n1: {machine: a}\n  n2: {machine: c}\nlinks:\n  - endpoints: [n1, n2]\n";
    let t0 = Instant::now();
    let o = m.up("xg", yaml);
    assert!(!o.status.success());
    assert!(text(&o).contains("machine 'c' (10.79.0.9:14790)"), "{}", text(&o));
    assert!(t0.elapsed() < Duration::from_secs(15));
    assert_eq!(m.leftovers(0), "");
    // A wrong token is refused by the agent.
    write_token(&m.token_file, "another-token-000000000000\n");
    let o = m.up("xh", "name: xh\nmachines: {a: 10.79.0.1}\nnodes: {n1: {}}\n");
    assert!(!o.status.success() && text(&o).contains("Bearer"), "{}", text(&o));
}

#[test]
fn a_lost_machine_or_a_lost_controller_leaves_the_rest_running_and_nothing_behind() {
    let _g = serial();
    let m = Machines::start("vz", 80, &["a", "b"]);
    // The machines given on the command line (the scenario names none).
    let yaml = "name: xl\naddressing: {ipv6: none}\nnodes:\n  n1: {machine: a}\n  n2: {machine: a}\n  n3: {machine: b}\nlinks:\n  - endpoints: [n1, n2]\n  - endpoints: [n2, n3]\n    delay: 1ms\n";
    let up = m.up_with("xl", yaml, &["--machines", "a=10.80.0.1,b=10.80.0.2"]);
    assert!(up.status.success(), "{}", text(&up));
    let ping = |from: &str, to: &str| {
        let o = m.vemu(&[
            "exec", "--lab", "xl", from, "--", "ping", "-c", "3", "-i", "0.2", "-W", "2", to,
        ]);
        assert!(o.status.success(), "ping {from} -> {to}: {}", text(&o));
    };
    ping("n1", "n3");
    let status = || -> serde_json::Value {
        serde_json::from_slice(&m.vemu(&["status", "--lab", "xl", "--json"]).stdout)
            .unwrap_or_default()
    };

    // Machine b falls off the underlay (its port on the bridge goes down).
    ok("ip -n vz-ul link set vzu1 down");
    let t0 = Instant::now();
    eventually(20, "machine b marked lost", || status()["machines"][1]["state"] == "lost");
    eprintln!("lost machine noticed after {:.1} s", t0.elapsed().as_secs_f64());
    let st = status();
    assert_eq!(st["machines"][0]["state"], "up");
    let link =
        st["links"].as_array().unwrap().iter().find(|l| l["name"] == "n2:n3").unwrap().clone();
    assert_eq!(link["up"], false, "{link}");
    let n3 = st["nodes"].as_array().unwrap().iter().find(|n| n["name"] == "n3").unwrap().clone();
    assert_eq!(n3["up"], false, "{n3}");
    // The surviving end lost carrier, as if its cable were pulled; the rest runs.
    let o = m.vemu(&["exec", "--lab", "xl", "n2", "--", "cat", "/sys/class/net/eth1/carrier"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "0", "{}", text(&o));
    ping("n1", "n2");
    let o = m.vemu(&["exec", "--lab", "xl", "n3", "--", "true"]);
    assert!(!o.status.success() && text(&o).contains("lost"), "{}", text(&o));
    // Machine b no longer hears its controller: its agent takes its share down when
    // the lease (5 s here) ends.
    eventually(20, "machine b removes its share", || m.leftovers(1).is_empty());
    // Every machine lost (a falls off too): the controller still answers, with no
    // engine's counters (it panicked on them before).
    ok("ip -n vz-ul link set vzu0 down");
    eventually(20, "machine a lost too", || status()["machines"][0]["state"] == "lost");
    let o = m.vemu(&["status", "--lab", "xl"]);
    assert!(o.status.success() && text(&o).contains("n2:n3"), "{}", text(&o));
    ok("ip -n vz-ul link set vzu0 up");
    // Back on the underlay: `down` ends the lab everywhere.
    ok("ip -n vz-ul link set vzu1 up");
    let o = m.vemu(&["down", "--lab", "xl"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(m.leftovers(0), "");

    // The controller dies (SIGKILL): `vemu clean` on its machine tells the agents.
    let up = m.up_with(
        "xk",
        &yaml.replace("name: xl", "name: xk"),
        &["--machines", "a=10.80.0.1,b=10.80.0.2"],
    );
    assert!(up.status.success(), "{}", text(&up));
    assert!(!m.leftovers(0).is_empty() && !m.leftovers(1).is_empty());
    let pid = std::fs::read_to_string("/run/vemu/xk/daemon.pid").unwrap();
    ok(&format!("kill -9 {}", pid.trim()));
    let t0 = Instant::now();
    let o = m.vemu(&["clean"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(t0.elapsed() < Duration::from_secs(4), "clean waited for the leases");
    // (What clean said goes with a failure: it failed once in a fresh-clone CI run on a
    // loaded machine, and never since, alone or in the suite.)
    let left = (m.leftovers(0), m.leftovers(1));
    assert_eq!(left, (String::new(), String::new()), "clean said: {}", text(&o));
    assert!(!std::path::Path::new("/run/vemu/xk").exists());
}

/// A stranger on the underlay (no token) holds ~270 plain TCP connections to an agent's
/// port, reopened as they close, for 12 s (issue 39): the agent keeps serving the
/// controller — the machine stays up and the link across carries pings. Then the
/// machine really is cut off and marked lost, and rejoins when it is back (its agent
/// still holds its share): the link across comes up again with the delay set meanwhile.
#[test]
fn a_stranger_cannot_knock_an_agent_off_and_a_lost_machine_that_answers_again_rejoins() {
    let _g = serial();
    let m = Machines::start("vk", 77, &["a", "b"]);
    // The stranger: a namespace on the underlay, with its own address.
    ok("ip netns add vk-x && ip link add vku9 netns vk-ul type veth peer name eth0 netns vk-x && ip -n vk-ul link set vku9 master br0 up && ip -n vk-x link set lo up && ip -n vk-x link set eth0 up && ip -n vk-x addr add 10.77.0.200/24 dev eth0");
    let yaml = "name: xf\naddressing: {ipv6: none}\nnodes:\n  n1: {machine: a}\n  n2: {machine: b}\nlinks:\n  - endpoints: [n1, n2]\n    delay: 1ms\n";
    m.labs.lock().unwrap().push("xf".into());
    let path = write_scenario("xf", yaml);
    let up =
        m.vemu_leased(&["up", path.to_str().unwrap(), "--machines", "a=10.77.0.1,b=10.77.0.2"], 30);
    assert!(up.status.success(), "{}", text(&up));
    let ping = || {
        m.vemu(&[
            "exec", "--lab", "xf", "n1", "--", "ping", "-c", "3", "-i", "0.2", "-W", "2", "n2",
        ])
    };
    let o = ping();
    assert!(o.status.success(), "{}", text(&o));
    let flood = r#"
import socket, time
socks, end, opened = [], time.time() + 12, 0
def open_one():
    s = socket.socket(); s.setblocking(False)
    try: s.connect(("10.77.0.2", 14790))
    except BlockingIOError: pass
    return s
socks = [open_one() for _ in range(270)]
opened = 270
while time.time() < end:
    alive = []
    for s in socks:
        try:
            if s.recv(1) == b"": s.close(); continue
        except BlockingIOError: pass
        except OSError: s.close(); continue
        alive.append(s)
    socks = alive
    if len(socks) < 270:
        socks.append(open_one()); opened += 1
    time.sleep(1 / 70)
print(opened)
"#;
    let stranger = Command::new("ip")
        .args(["netns", "exec", "vk-x", "python3", "-c", flood])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Through the flood: the machine stays up, the link carries pings.
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(1));
    while t0.elapsed() < Duration::from_secs(11) {
        let st = m.status("xf");
        assert_eq!(st["machines"][1]["state"], "up", "machine b under the stranger's flood: {st}");
        let o = ping();
        assert!(o.status.success(), "ping under the flood: {}", text(&o));
    }
    let o = stranger.wait_with_output().unwrap();
    let opened: u64 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap_or(0);
    eprintln!("the stranger opened {opened} connections");
    assert!(opened > 300, "the stranger's connections were closed and reopened: {opened}");
    ok("ip netns del vk-x");

    // Machine b falls off the underlay: lost, the link down.
    ok("ip -n vk-ul link set vku1 down");
    eventually(20, "machine b marked lost", || m.status("xf")["machines"][1]["state"] == "lost");
    let link = |st: &serde_json::Value| {
        st["links"].as_array().and_then(|l| l.first()).cloned().unwrap_or_default()
    };
    assert_eq!(link(&m.status("xf"))["up"], false);
    // A change meanwhile (b does not hear of it).
    let o = m.vemu(&["link", "set", "--lab", "xf", "n1:n2", "--delay", "20ms"]);
    assert!(o.status.success(), "{}", text(&o));
    // Back within its lease: b rejoins, the link is up with the new delay both ways.
    ok("ip -n vk-ul link set vku1 up");
    eventually(20, "machine b rejoins", || m.status("xf")["machines"][1]["state"] == "up");
    let st = m.status("xf");
    assert_eq!(link(&st)["up"], true, "{st}");
    eventually(20, "pings cross the link again", || ping().status.success());
    let rtt = min_rtt_ms(&ping());
    assert!((40.0..60.0).contains(&rtt), "RTT {rtt} ms for 2 x 20 ms");
    m.down_leaving_nothing("xf");
}
