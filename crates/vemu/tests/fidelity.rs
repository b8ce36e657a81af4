//! The fidelity monitor in real labs: a verdict from what the data plane measured. Run
//! as root.

mod common;
use common::*;

/// Six client/server pairs, each on a 2 Gbit/s, 2 ms link: far more than two cores can
/// emulate when every pair runs TCP flat out, nothing when they only ping.
fn pairs_yaml() -> String {
    let nodes: Vec<String> =
        (0..6).map(|i| format!("s{i}: {{run: ['iperf3 -s -D']}}, c{i}: {{}}")).collect();
    let links: String = (0..6)
        .map(|i| format!("  - {{endpoints: [c{i}, s{i}], bandwidth: 2Gbit, delay: 2ms}}\n"))
        .collect();
    format!(
        "name: t-fidelity\naddressing: {{ipv6: none}}\nnodes: {{{}}}\nlinks:\n{links}",
        nodes.join(", ")
    )
}

/// A light load is judged `ok` — unless the hypervisor took this machine's CPUs while
/// it ran (this VM's host does at times: frames then wait for the machine to run, the
/// monitor counts them late and says why). Then the verdict may be worse, but only for
/// that: no starved second, no engine fault.
fn assert_ok_unless_stolen(f: &serde_json::Value, what: &str) {
    if f["verdict"] == "ok" {
        return;
    }
    let stolen = f["cpu"]["stolen_windows"].as_u64().unwrap_or(0);
    assert!(stolen > 0, "{what} judged {f}");
    assert_eq!(f["cpu"]["starved_windows"], 0, "{what}: {f}");
    assert!(f["engine_faults"].as_array().is_none_or(|a| a.is_empty()), "{what}: {f}");
    eprintln!(
        "{what}: {} with {} of {} seconds taken by the hypervisor (up to {:.1}%)",
        f["verdict"],
        stolen,
        f["cpu"]["windows"],
        f["cpu"]["worst_steal"].as_f64().unwrap_or(0.0) * 100.0
    );
}
#[test]
fn overload_is_judged_from_measured_lateness() {
    let _g = serial();
    let lab = Lab::up("t-fidelity", &pairs_yaml());
    // The first seconds after `up` (commands starting in the nodes, the monitor's first
    // reading of every node's TAP counters) sometimes delay a few frames by several ms
    // — the monitor is right to count them; this part is about steady light load.
    std::thread::sleep(std::time::Duration::from_secs(3));
    // Light load: 1000 pings on every link at once (500/s: ~2 s), enough frames per
    // direction that a few late ones are not 1% of them.
    std::thread::scope(|s| {
        for i in 0..6 {
            let lab = &lab;
            s.spawn(move || {
                lab.exec(
                    &format!("c{i}"),
                    &["ping", "-q", "-c", "1000", "-i", "0.002", &format!("s{i}")],
                )
            });
        }
    });
    let st = lab.status();
    let f = &st["fidelity"];
    eprintln!("light load: {} of {} frames late", f["late_frames"], f["frames"]);
    assert_ok_unless_stolen(f, "light load");
    assert!(f["frames"].as_u64().unwrap() >= 12000, "{f}");
    // The shards run at real-time priority (SCHED_FIFO, policy 1 in /proc's stat).
    let pid = st["pid"].as_i64().unwrap();
    let policies: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| {
            let dir = t.ok()?.path();
            let comm = std::fs::read_to_string(dir.join("comm")).ok()?;
            let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
            comm.starts_with("vemu-engine").then(|| {
                stat.rsplit(')').next().unwrap().split_whitespace().nth(38).unwrap().to_string()
            })
        })
        .collect();
    assert!(
        !policies.is_empty() && policies.iter().all(|p| p == "1"),
        "engine threads' policies: {policies:?}"
    );
    drop(lab);

    // Every pair at full speed: the engine competes with 24 TCP streams for two cores
    // and falls behind its schedule, which is what the monitor must see. At real-time
    // priority the engine keeps up with this (3.2 M frames, 453 late, verdict ok: the
    // nodes' programs get what is left), so the shards are kept at normal priority
    // (niceness −10), where they must wait behind the nodes' programs. How far behind
    // depends on the machine: a run of 2026-12-05 had 0.22 % of 5 M frames over 1 ms
    // (worst 3.1 ms), `ok` by the default threshold — so this lab counts a frame late
    // from 200 µs (`fidelity: {late: 200us}`), which the engine waiting behind 24 streams
    // is far beyond, while a light load (above, the default 1 ms) stays well within.
    let overload =
        pairs_yaml().replace("name: t-fidelity\n", "name: t-fidelity\nfidelity: {late: 200us}\n");
    assert!(overload.contains("late: 200us"));
    let lab = Lab::up_env("t-fidelity", &overload, &[("VEMU_ENGINE_PRIORITY", "normal")]);
    std::thread::scope(|s| {
        for i in 0..6 {
            let lab = &lab;
            s.spawn(move || {
                lab.exec(
                    &format!("c{i}"),
                    &["iperf3", "-c", &format!("s{i}"), "-t", "5", "-P", "4"],
                )
            });
        }
    });
    let st = lab.status();
    let f = &st["fidelity"];
    assert_ne!(f["verdict"], "ok", "overload judged {f}");
    let affected: Vec<&str> =
        f["affected"].as_array().unwrap().iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert!(
        affected.iter().any(|n| n.starts_with("c0:s0") || n.starts_with("c3:s3")),
        "{affected:?}"
    );
    assert!(f["affected"][0]["late_fraction"].as_f64().unwrap() > 0.01, "{f}");
    eprintln!(
        "overload: {} of {} frames late; worst {}",
        f["late_frames"], f["frames"], f["affected"][0]
    );
    // The controller's log has the live warnings, the report the verdict.
    let log = std::fs::read_to_string("/var/log/vemu/t-fidelity/vemu.log").unwrap();
    assert!(log.contains("fidelity INVALID") || log.contains("fidelity DEGRADED"), "{log}");
    let o = lab.vemu(&["report"]);
    eprintln!("{}", text(&o));
    assert!(
        text(&o).contains("fidelity INVALID") || text(&o).contains("fidelity DEGRADED"),
        "{}",
        text(&o)
    );
    assert!(text(&o).contains("engine shards busy"), "{}", text(&o));

    // Frames a node sends while the engine does not read them: the kernel drops them on
    // their way — c0's interface is a veth whose peer is in the lab's plane namespace,
    // where they wait in the backlog (the peer's rx_dropped when full), then in the
    // queue of the engine's TAP device (its tx_dropped). To be sure the engine falls
    // behind, the controller (the engine is its threads) is frozen for 0.3 s of a
    // 1 Gbit/s UDP stream. The monitor reads the same counters `ip -s link` shows.
    let pid = lab.status()["pid"].as_i64().unwrap() as i32;
    std::thread::scope(|s| {
        s.spawn(|| {
            lab.exec("c0", &["iperf3", "-u", "-b", "1G", "-l", "1400", "-t", "2", "-c", "s0"])
        });
        std::thread::sleep(std::time::Duration::from_millis(800));
        // SAFETY: signals to the lab's controller process.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        std::thread::sleep(std::time::Duration::from_millis(300));
        unsafe { libc::kill(pid, libc::SIGCONT) };
    });
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let ip = std::process::Command::new("nsenter")
        .args(["--net=/run/vemu/t-fidelity/plane", "ip", "-s", "-j", "link", "show"])
        .output()
        .unwrap();
    assert!(ip.status.success(), "{}", text(&ip));
    let ip: serde_json::Value = serde_json::from_slice(&ip.stdout).unwrap();
    let dev = |name: &str| {
        ip.as_array()
            .unwrap()
            .iter()
            .find(|d| d["ifname"] == name)
            .unwrap_or_else(|| panic!("no {name} in the plane"))["stats64"]
            .clone()
    };
    let kernel = dev("t0a")["tx"]["dropped"].as_u64().unwrap()
        + dev("v0a")["rx"]["dropped"].as_u64().unwrap();
    let f = lab.status()["fidelity"].clone();
    eprintln!(
        "flood: the kernel dropped {kernel} frames on their way from c0 to the engine; vemu: {}",
        f["taps_affected"]
    );
    assert!(
        kernel > 1000,
        "0.3 s of 1 Gbit/s without the engine reading: only {kernel} frames dropped"
    );
    assert_eq!(f["tap_dropped"].as_u64(), Some(kernel), "{f}");
    let c0 = f["taps_affected"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["port"] == "c0:eth0")
        .expect("c0:eth0 named");
    assert_eq!(c0["dropped"].as_u64(), Some(kernel), "{c0}");
}

/// An engine shard that dies (a bug: here an injected panic) does not pass unnoticed:
/// its links stop, status and the verdict say so, and the lab still comes down cleanly.
#[test]
fn a_dead_engine_shard_is_reported_and_the_lab_still_comes_down() {
    let _g = serial();
    let yaml = "name: t-fault\naddressing: {ipv6: none}\nnodes: {a: {}, b: {}}\nlinks:\n  - {endpoints: [a, b], delay: 1ms}\n";
    let lab = Lab::up_env("t-fault", yaml, &[("VEMU_ENGINE_FAULT", "panic-after:20")]);
    let (sent, recv, _) = lab.ping("a", "b", 40, 0.02);
    assert!(recv < sent, "the link kept forwarding after its shard died ({recv} of {sent})");
    // The shard's death is reported from the panic hook, before the default hook prints
    // (with RUST_BACKTRACE=1, CI's environment, it first symbolizes a backtrace: seconds on
    // a loaded machine, and reported after it `status` said `ok` meanwhile): by the time
    // the pings are over, status says so.
    let st = lab.status();
    let f = &st["fidelity"];
    assert_eq!(f["verdict"], "invalid", "{f}");
    let faults = f["engine_faults"].as_array().unwrap();
    assert!(
        faults.iter().any(|x| x.as_str().unwrap().contains("engine shard 0 died: injected fault")),
        "{faults:?}"
    );
    let o = lab.vemu(&["status"]);
    assert!(
        text(&o).contains("engine shard 0 died") && text(&o).contains("no longer forward"),
        "{}",
        text(&o)
    );
}

/// Issue 20: an engine slow to read its input queues writes every frame on time after
/// reading it, so the lateness of writes says all is well; the input probes see the wait.
#[test]
fn frames_kept_waiting_in_the_input_queues_are_seen() {
    let _g = serial();
    let yaml = "name: t-inwait\naddressing: {ipv6: none}\nnodes: {a: {}, b: {}}\nlinks:\n  - {endpoints: [a, b], delay: 1ms}\n";
    let probes = |lab: &Lab| -> (u64, String, serde_json::Value) {
        // 8 s of pings, 50 a second: every direction is probed 10 times a second.
        lab.exec("a", &["ping", "-q", "-c", "400", "-i", "0.02", "b"]);
        let st = lab.status();
        let hist = &st["links"][0]["forward"]["stats"]["input_wait_hist"];
        let n = hist.as_array().map_or(0, |h| h.iter().map(|v| v.as_u64().unwrap()).sum());
        (n, st["fidelity"]["verdict"].as_str().unwrap().to_string(), st["fidelity"].clone())
    };
    {
        let lab = Lab::up("t-inwait", yaml);
        let (n, verdict, f) = probes(&lab);
        assert!(n >= 40, "probes of an active input queue: {n}");
        assert_ok_unless_stolen(&f, &format!("a lab's input probes ({verdict})"));
    }
    // Each look at a device 3 ms late: frames wait there 3 ms, unseen by write lateness.
    let lab = Lab::up_env("t-inwait", yaml, &[("VEMU_ENGINE_FAULT", "stall-reads-us:3000")]);
    let (n, verdict, f) = probes(&lab);
    assert!(n >= 40, "{n}");
    assert_eq!(verdict, "invalid", "{f}");
    let a = &f["affected"][0];
    assert!(
        a["input_late_probes"].as_u64().unwrap() * 2 > a["input_probes"].as_u64().unwrap(),
        "{a}"
    );
    assert!(a["p99_input_wait_ns"].as_u64().unwrap() >= 2_000_000, "{a}");
    assert!(text(&lab.vemu(&["status"])).contains("input queue: p99"), "the status says why");
}

/// A frame is timed from its arrival in the plane (stamped there by the fast path's
/// program), not from when the engine got round to reading it: with every read 2 ms
/// late, a link of 5 ms each way still gives a round trip of 10 ms (it gave 14 ms when
/// frames were timed from their reading), never less, and the input probes' waits are
/// not held against the link: its delay absorbed them. (The injected stall holds the
/// shard's thread, so a write that falls due during another read's stall is late: the
/// verdict is not asserted.)
#[test]
fn a_links_delay_absorbs_the_time_frames_wait_to_be_read() {
    let _g = serial();
    let yaml = "name: t-absorb\naddressing: {ipv6: none}\nnodes: {a: {}, b: {}}\nlinks:\n  - {endpoints: [a, b], delay: 5ms}\n";
    let lab = Lab::up_env("t-absorb", yaml, &[("VEMU_ENGINE_FAULT", "stall-reads-us:2000")]);
    lab.exec("a", &["ping", "-c", "3", "-i", "0.2", "-W", "2", "b"]);
    let o = lab.exec("a", &["ping", "-q", "-c", "100", "-i", "0.05", "-W", "3", "b"]);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let rtt: Vec<f64> = out
        .lines()
        .find(|l| l.starts_with("rtt"))
        .and_then(|l| l.split('=').nth(1))
        .map(|v| {
            v.trim().split(' ').next().unwrap().split('/').map(|x| x.parse().unwrap()).collect()
        })
        .unwrap_or_else(|| panic!("{out}"));
    let (min, avg) = (rtt[0], rtt[1]);
    eprintln!("5 ms each way, every read 2 ms late: RTT min {min:.3} avg {avg:.3} ms");
    assert!(out.contains(" 0% packet loss"), "{out}");
    assert!(min >= 10.0, "a frame delivered before its time: min RTT {min} ms");
    assert!(min < 11.0 && avg < 12.5, "the wait for the read was added to the delay: RTT min {min}, avg {avg} ms (14 ms if it is)");
    let st = lab.status();
    for dir in ["forward", "reverse"] {
        let s = &st["links"][0][dir]["stats"];
        let hist: Vec<u64> =
            s["input_wait_hist"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        assert!(hist.iter().sum::<u64>() >= 20, "{dir}: the input queue was probed ({hist:?})");
        assert!(
            s["input_wait_max_ns"].as_u64().unwrap() >= 1_500_000,
            "{dir}: the probes waited for the stalled reads"
        );
        // Buckets of the delay histogram: ..., 9 = up to 1 ms, 10 = up to 2 ms, ...
        // Unabsorbed, nearly every probe would sit in bucket 10 (2 ms of wait); absorbed,
        // only one the scheduler held beyond the stall (the shard's thread preempted on
        // a loaded 2-core machine: 1 of 54 once in CI) may wait past the delay.
        let beyond: u64 = hist[10..].iter().sum();
        assert!(
            beyond * 10 <= hist.iter().sum::<u64>(),
            "{dir}: probes' waits beyond the 5 ms of delay ({hist:?})"
        );
    }
    let f = &st["fidelity"];
    assert!(
        f["affected"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["input_late_probes"].as_u64().unwrap() * 10
                <= a["input_probes"].as_u64().unwrap()),
        "{f}"
    );
}

/// n client/server pairs on 100 Mbit/s links (the engine's serializer), all running
/// TCP at once for 6 s, each client spinning beside its flow if `spin`; the lab's
/// verdict after, and the worst flow's goodput ÷ the TCP ceiling (0.956 of the rate:
/// 1448 bytes of data in a 1514-byte frame).
fn pairs_at_once(n: usize, spin: bool) -> serde_json::Value {
    let client = match spin {
        // (Four loops: a node's programs share its part of the CPUs, and beside one loop
        // the sender still kept 0.91–0.96 of its ceiling.)
        true => "{run: ['for i in 1 2 3 4; do timeout 12 sh -c \"while :; do :; done\" & done']}",
        false => "{}",
    };
    let nodes: Vec<String> =
        (0..n).map(|i| format!("s{i}: {{run: ['iperf3 -s -D']}}, c{i}: {client}")).collect();
    let links: String =
        (0..n).map(|i| format!("  - {{endpoints: [c{i}, s{i}], bandwidth: 100Mbit}}\n")).collect();
    let yaml = format!(
        "routing: none\naddressing: {{ipv6: none}}\nnodes: {{{}}}\nlinks:\n{links}",
        nodes.join(", ")
    );
    let lab = Lab::up("t-starved", &yaml);
    let status = lab.status();
    let addr = |node: &str| lab.addrs(&status, node, false)[0].clone();
    let servers: Vec<String> = (0..n).map(|i| addr(&format!("s{i}"))).collect();
    // (iperf3's server needs a moment after `up`.)
    std::thread::sleep(std::time::Duration::from_millis(500));
    let goodputs: Vec<f64> = std::thread::scope(|s| {
        let runs: Vec<_> = servers
            .iter()
            .enumerate()
            .map(|(i, server)| {
                let lab = &lab;
                s.spawn(move || {
                    let o = lab.exec(&format!("c{i}"), &["iperf3", "-c", server, "-t", "6", "-J"]);
                    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
                        .unwrap_or_else(|_| panic!("iperf3: {}", text(&o)));
                    v["end"]["sum_received"]["bits_per_second"].as_f64().expect("a goodput")
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let worst = goodputs.iter().copied().fold(f64::INFINITY, f64::min) / (100e6 * 1448.0 / 1514.0);
    let f = lab.status()["fidelity"].clone();
    let log = std::fs::read_to_string("/var/log/vemu/t-starved/vemu.log").unwrap_or_default();
    serde_json::json!({"fidelity": f, "log": log, "worst_of_ceiling": worst})
}

/// Issue 45: the software under test starved of CPU. Thirty-two TCP flows on 100 Mbit/s
/// links, two cores, each client spinning (four loops) beside its flow: the engine keeps its
/// schedule, but the senders cannot keep their links full — judged not ok, saying why
/// and naming nodes. (Until 2026-11-29 the 32 flows starved without the spinning, at
/// 0.46–0.69 of their ceiling; since the engine cuts super-frames at 1 ms and its shards
/// give way to the nodes under pressure they keep 0.98 of it, bench/README "density",
/// and spinning nodes beside them did not starve them: each node has its share of the
/// CPUs, so the spinning is in the senders' own nodes.) One flow on the same machine,
/// without spinning, is ok.
///
/// The starved half is judged only when the flows measured starvation (worst below 0.9
/// of the ceiling; the boundary, `PACE_HELD`, is 0.93): CI once saw the 32 flows reach
/// 0.903 with only two monitor windows, judged ok — the premise was not there to test.
#[test]
fn software_starved_of_cpu_is_judged_not_ok() {
    let _g = serial();
    let starved = pairs_at_once(32, true);
    let f = &starved["fidelity"];
    let worst = starved["worst_of_ceiling"].as_f64().unwrap();
    let log = starved["log"].as_str().unwrap();
    eprintln!("32 flows: worst {worst:.3}, verdict {}, cpu {}", f["verdict"], f["cpu"]);
    if worst < 0.9 {
        // The monitor judged every second of the flows (6 s): few windows are a monitor
        // kept from its work, which its log says ("fidelity monitor: a window of ...").
        assert!(f["cpu"]["windows"].as_u64().unwrap() >= 5, "windows of a 6 s run: {f}\n{log}");
        assert_ne!(f["verdict"], "ok", "32 flows, worst {worst:.3}, judged {f}\n{log}");
        // (One starved window at least: the first and last seconds of a run are its
        // ramps, and a 4-second run once showed a single window over the threshold in CI.)
        assert!(f["cpu"]["starved_windows"].as_u64().unwrap() >= 1, "{f}");
        assert!(!f["cpu"]["waiting_nodes"].as_array().unwrap().is_empty(), "{f}");
        assert!(log.contains("the lab's software waited for CPU"), "{log}");
    }
    // (At 0.9 or more the flows nearly kept their links full: either verdict can be
    // right near the boundary, bench/README "The links' pace".)
    for l in log.lines().filter(|l| l.starts_with("fidelity monitor")) {
        eprintln!("{l}");
    }
    let one = pairs_at_once(1, false);
    let f = &one["fidelity"];
    eprintln!("1 flow: verdict {}, cpu {}", f["verdict"], f["cpu"]);
    assert_ok_unless_stolen(f, "one flow");
    assert_eq!(f["cpu"]["starved_windows"], 0, "{f}");
    assert!(f["cpu"]["windows"].as_u64().unwrap() >= 3, "{f}");
}

/// Issue 43: a check measured while the monitor judged the lab not ok is reported
/// untrustworthy, and `vemu test` exits 3. The lab starves itself of CPU: sixteen TCP
/// flows on two cores beside four nodes that spin (sixteen flows alone no longer starve
/// it since the engine's shards give way to the nodes under pressure: 2026-11-29),
/// started by the nodes' own `run`; the check is made in the middle of them, and takes
/// two seconds at least (a ping after `sleep 2`): a check of 23 ms in a single window
/// judged ok, here and once in CI, was trusted although the windows around it were
/// starved.
#[test]
fn a_check_measured_while_the_lab_starved_is_untrustworthy() {
    let _g = serial();
    let n = 16;
    let nodes: Vec<String> = (0..n)
        .map(|i| {
            format!("s{i}: {{run: ['iperf3 -s -D']}}, c{i}: {{run: ['sleep 1; iperf3 -c s{i} -t 7 >/dev/null']}}")
        })
        .chain((0..4).map(|i| format!("hog{i}: {{run: ['timeout 9 sh -c \"while :; do :; done\"']}}")))
        .collect();
    let links: String =
        (0..n).map(|i| format!("  - {{endpoints: [c{i}, s{i}], bandwidth: 100Mbit}}\n")).collect();
    let yaml = format!(
        "name: t-untrusted\nrouting: none\naddressing: {{ipv6: none}}\nnodes: {{{}}}\nlinks:\n{links}expect:\n  - {{name: in the middle, at: 3s, run: {{node: c0, cmd: 'sleep 2; ping -c 1 -W 2 s0'}}, within: 5s}}\n",
        nodes.join(", ")
    );
    let path = write_scenario("t-untrusted", &yaml);
    let o = vemu(&["test", path.to_str().unwrap()]);
    // (The controller's log beside what `vemu test` said: the monitor's windows, should
    // it fail — CI's one failure left nothing else to read.)
    let log = std::fs::read_to_string("/var/log/vemu/t-untrusted/vemu.log").unwrap_or_default();
    let t = text(&o);
    let said = format!("{t}\n--- vemu.log:\n{log}");
    eprintln!("{said}");
    assert_eq!(o.status.code(), Some(3), "{said}");
    // (Passed or failed, whichever the starved lab showed: either way not to be trusted.
    // CI once saw its ping held only after 4.6 s.)
    assert!(
        t.contains("in the middle: UNTRUSTWORTHY, passed (")
            || t.contains("in the middle: UNTRUSTWORTHY, failed ("),
        "{said}"
    );
    // (Judged not ok, or ok for its bulk links that kept their rates while the software
    // waited for CPU: either way the check's timing is not to be trusted.)
    assert!(
        t.contains("but the fidelity monitor judged the lab")
            || t.contains("but the lab's software waited for CPU from"),
        "{said}"
    );
    assert!(t.contains("1 checks: 0 passed, 0 failed, 1 untrustworthy"), "{said}");
    assert!(lab_netns("t-untrusted").is_empty());
}

/// Issue 61: the fidelity monitor read what the lab's software waited for a CPU (a walk
/// of /proc, which takes seconds on a loaded machine) while holding the controller, so
/// the API waited behind it. With every reading made 3 s long (fault injection), the
/// API still answers at once: the reading is made without the controller.
#[test]
fn a_slow_cpu_reading_does_not_hold_the_api() {
    let _g = serial();
    let yaml = "name: t-slowcpu\naddressing: {ipv6: none}\nnodes: {a: {}, b: {}}\nlinks:\n  - {endpoints: [a, b], delay: 1ms}\n";
    let lab = Lab::up_env("t-slowcpu", yaml, &[("VEMU_HOST_FAULT", "cpu-look-ms:3000")]);
    // Over 8 s (two readings or more), the slowest of a status request every 0.25 s.
    let t0 = std::time::Instant::now();
    let mut slowest = 0.0f64;
    while t0.elapsed().as_secs_f64() < 8.0 {
        let t = std::time::Instant::now();
        let o = lab.vemu(&["status", "--json"]);
        assert!(o.status.success(), "{}", text(&o));
        slowest = slowest.max(t.elapsed().as_secs_f64());
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    assert!(slowest < 1.5, "a status request waited {slowest:.2} s behind a 3 s CPU reading");
}
