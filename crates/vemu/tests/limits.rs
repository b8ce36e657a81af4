//! Per-node CPU, memory and process limits (cgroups) in real labs. Run as root.

mod common;
use common::*;

const LAB: &str = "name: t-limits\naddressing: {ipv6: none}\nnodes:\n  a: {cpu: 0.25, memory: 64MiB, pids: 40}\n  b: {}\nlinks:\n  - {endpoints: [a, b]}\n";

/// CPU time node `n` used (its cgroup's), s.
fn cpu_s(lab: &Lab, n: &str) -> f64 {
    let st = lab.status();
    let node = st["nodes"].as_array().unwrap().iter().find(|x| x["name"] == n).unwrap().clone();
    node["usage"]["cpu_ns"].as_u64().unwrap() as f64 / 1e9
}

/// Cores a busy loop in node `n` gets over `secs` of wall time.
fn busy_cores(lab: &Lab, n: &str, secs: f64) -> f64 {
    let before = cpu_s(lab, n);
    let t0 = std::time::Instant::now();
    lab.sh(n, &format!("timeout {secs} sh -c 'while :; do :; done'; true"));
    let wall = t0.elapsed().as_secs_f64();
    (cpu_s(lab, n) - before) / wall
}

#[test]
fn a_node_gets_the_cpu_memory_and_processes_it_is_given() {
    let _g = serial();
    let lab = Lab::up("t-limits", LAB);
    let st = lab.status();
    assert_eq!(
        st["nodes"][0]["limits"],
        serde_json::json!({"cpu_cores": 0.25, "memory_bytes": 64 << 20, "pids": 40})
    );

    // A busy loop limited to a quarter of a core uses no more than a quarter of a core
    // (and, on an idle machine, all of it: 0.247 here; a loaded machine may give it
    // less, 0.22 during a parallel build, so only that it ran is asserted below).
    let cores = busy_cores(&lab, "a", 3.0);
    eprintln!("busy loop at cpu 0.25: {cores:.3} cores");
    assert!((0.12..=0.28).contains(&cores), "{cores:.3} cores at a limit of 0.25");

    // A memory hog is killed inside its node; the lab runs on.
    let o = lab.exec("a", &["python3", "-c", "a = bytearray(300 << 20); print('survived')"]);
    assert_eq!(o.status.code(), Some(137), "a 300 MB allocation under 64 MiB: {}", text(&o));
    let (_, recv, _) = lab.ping("a", "b", 3, 0.1);
    assert_eq!(recv, 3, "the lab runs on after the node's OOM kill");

    // No more processes than allowed: a fork bomb stops at the limit.
    let (_, out) = lab.sh("a", "n=0; for i in $(seq 60); do sleep 3 2>/dev/null & n=$((n+1)); done 2>/dev/null; sleep 0.2; ps -e | wc -l");
    let procs: u64 = out.trim().parse().unwrap_or(0);
    assert!(procs <= 40, "{procs} processes under a limit of 40");

    // Changed at run time, both ways; `none` lifts a limit.
    let o = lab.vemu(&["node", "set", "a", "--cpu", "0.5", "--memory", "none"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("cpu 0.5 cores, pids 40"), "{}", text(&o));
    let cores = busy_cores(&lab, "a", 3.0);
    eprintln!("busy loop at cpu 0.5: {cores:.3} cores");
    // (More than the old limit allowed: the change took; no more than the new one.)
    assert!((0.3..=0.55).contains(&cores), "{cores:.3} cores at a limit of 0.5");
    let o = lab.exec("a", &["python3", "-c", "a = bytearray(300 << 20); print('survived')"]);
    assert!(text(&o).contains("survived"), "no memory limit any more: {}", text(&o));
    // Bad values are refused with the reason, and change nothing.
    let o = lab.vemu(&["node", "set", "a", "--cpu", "0"]);
    assert!(
        !o.status.success() && text(&o).contains("cpu must be 0.01 to 1024 cores"),
        "{}",
        text(&o)
    );
    let o = lab.vemu(&["node", "set", "nobody", "--pids", "3"]);
    assert!(!o.status.success() && text(&o).contains("no node named 'nobody'"), "{}", text(&o));
    assert_eq!(
        lab.status()["nodes"][0]["limits"],
        serde_json::json!({"cpu_cores": 0.5, "pids": 40})
    );
    // A node without limits is accounted too.
    lab.sh("b", "timeout 0.5 sh -c 'while :; do :; done'; true");
    assert!(cpu_s(&lab, "b") > 0.1);
    // A CPU limit given at run time holds for the processes already running too.
    lab.sh("b", "(timeout 8 sh -c 'while :; do :; done' >/dev/null 2>&1 &) ; true");
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(lab.vemu(&["node", "set", "b", "--cpu", "0.25"]).status.success());
    let before = cpu_s(&lab, "b");
    std::thread::sleep(std::time::Duration::from_secs(3));
    let cores = (cpu_s(&lab, "b") - before) / 3.0;
    eprintln!("a loop already running when b got cpu 0.25: {cores:.3} cores");
    assert!((cores - 0.25).abs() <= 0.04, "{cores:.3} cores after a run-time limit of 0.25");
    drop(lab);
    for h in ["cpu", "cpuacct", "memory", "pids"] {
        let d = std::path::Path::new("/sys/fs/cgroup").join(h).join("vemu/t-limits");
        assert!(!d.exists(), "{} left after down", d.display());
        assert!(
            !d.parent().unwrap().exists(),
            "vemu/ left in the {h} hierarchy with no lab running"
        );
    }
}

/// Audit (issue 39): a node without `pids:` started 3000 `sleep`s, with no cap at the
/// `vemu/` and `vemu/LAB` levels either (this machine's pid_max is 32,768). Now a node
/// is capped at 1024 by default and all labs together at 3/4 of what the machine
/// allows; a real fork bomb in a node stops at its cap, and the lab, its controller
/// and the machine keep answering.
#[test]
fn a_node_without_a_pids_limit_is_capped_and_a_fork_bomb_stays_in_it() {
    let _g = serial();
    let lab = Lab::up("t-bomb", "name: t-bomb\naddressing: {ipv6: none}\nnodes:\n  a: {}\n  b: {}\nlinks:\n  - {endpoints: [a, b]}\n");
    let pids = std::path::Path::new("/sys/fs/cgroup/pids/vemu");
    let read = |p: std::path::PathBuf| {
        std::fs::read_to_string(&p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .trim()
            .to_string()
    };
    let max = |s: String| s.parse::<u64>().unwrap_or(u64::MAX);
    let machine = max(read("/proc/sys/kernel/pid_max".into()))
        .min(max(read("/proc/sys/kernel/threads-max".into())));
    // (A node's cgroups are made with its first process.) 3000 sleeps, for a while.
    lab.sh("a", "(timeout -s KILL 8 sh -c 'for i in $(seq 3000); do sleep 20 2>/dev/null & done' >/dev/null 2>&1 &); true");
    for level in [pids.to_path_buf(), pids.join("t-bomb")] {
        let cap = max(read(level.join("pids.max")));
        assert!(cap < machine, "{}: {cap} of the machine's {machine}", level.display());
    }
    assert_eq!(read(pids.join("t-bomb/a/pids.max")), "1024");
    let peak = |secs: u64| {
        let (mut most, t0) = (0, std::time::Instant::now());
        while t0.elapsed() < std::time::Duration::from_secs(secs) {
            most = most.max(max(read(pids.join("t-bomb/a/pids.current"))));
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        most
    };
    let most = peak(5);
    assert!(
        (900..=1024).contains(&most),
        "{most} processes in a node without pids: (default cap 1024)"
    );
    let stop = |what: &str| {
        for verb in ["stop", "start"] {
            let o = lab.vemu(&["node", verb, "a"]);
            assert!(o.status.success(), "{what}: node {verb}: {}", text(&o));
        }
    };
    stop("after the sleeps");
    // A real fork bomb, for a few seconds.
    lab.sh("a", "(timeout -s KILL 8 bash -c 'f() { f | f & }; f' >/dev/null 2>&1 &); true");
    let most = peak(3);
    assert!(most <= 1024, "{most} processes in the bombed node");
    // The controller, the machine and the other node keep answering meanwhile.
    let st = lab.status();
    assert!(
        st["nodes"].as_array().unwrap().iter().any(
            |n| n["name"] == "a" && n["usage"]["processes"].as_u64().is_some_and(|p| p <= 1024)
        ),
        "{st}"
    );
    assert!(std::process::Command::new("true").status().unwrap().success());
    let o = lab.exec("b", &["true"]);
    assert!(o.status.success(), "{}", text(&o));
    stop("after the bomb");
    // `down` takes the bomb with the node, and leaves nothing.
    drop(lab);
    assert!(!pids.join("t-bomb").exists());
}

/// Audit (issue 39): a node printing 200 MB made a 200 MB log, mode 0644, kept after
/// down. A node's log is kept under the scenario's `logs:` (64 MiB by default; 1 MiB
/// here): its end moves to NODE.log.1 and it starts again; both root-and-group only.
#[test]
fn a_nodes_log_is_capped_and_private() {
    use std::os::unix::fs::PermissionsExt;
    let _g = serial();
    let lab = Lab::up("t-logs", "name: t-logs\nlogs: 1MiB\naddressing: {ipv6: none}\nnodes:\n  a: {run: [\"head -c 20000000 /dev/zero | tr '\\\\0' x; echo the-end\"]}\n");
    let (log, old) = (
        std::path::Path::new("/var/log/vemu/t-logs/a.log"),
        std::path::Path::new("/var/log/vemu/t-logs/a.log.1"),
    );
    let size = |p: &std::path::Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let t0 = std::time::Instant::now();
    while !(size(old) > 0 && size(log) <= 1 << 20)
        && t0.elapsed() < std::time::Duration::from_secs(20)
    {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(size(old), 1 << 20, "the log's last MiB kept beside it");
    assert!(size(log) <= 1 << 20, "{} bytes in the log", size(log));
    let kept = std::fs::read(old).unwrap();
    assert!(
        kept.iter().filter(|&&b| b != b'x').count() <= 256,
        "the end of what the node printed (x..., the-end, its exit)"
    );
    for p in [log, old] {
        let mode = std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & 0o007, 0, "{} is mode {mode:o}", p.display());
    }
    let said = std::fs::read_to_string(log).unwrap_or_default();
    assert!(said.contains("the log passed 1048576 bytes"), "{said}");
    drop(lab);
    let o = vemu(&[
        "check",
        write_scenario("t-logs2", "logs: 10KiB\nnodes: {a: {}}\n").to_str().unwrap(),
    ]);
    assert!(
        !o.status.success() && text(&o).contains("logs must be at least 64KiB"),
        "{}",
        text(&o)
    );
}

/// Audit (issue 39): a process of a node with `pids: 30` mounted the pids hierarchy and
/// moved itself to its root, out of the limit. Each node process has a cgroup namespace
/// rooted at the node's cgroups: what it mounts is its own subtree.
#[test]
fn a_node_cannot_move_out_of_its_cgroups() {
    let _g = serial();
    let lab =
        Lab::up("t-cgns", "name: t-cgns\naddressing: {ipv6: none}\nnodes:\n  a: {pids: 30}\n");
    // The audit's escape, then as many processes as it can make (python: a shell
    // exits when a fork fails).
    let fork = "import os, time\nn = 0\nfor i in range(60):\n    try:\n        if os.fork() == 0:\n            time.sleep(3); os._exit(0)\n        n += 1\n    except OSError:\n        pass\nprint('forked', n)";
    let (code, out) = lab.sh("a", &format!("mkdir -p /tmp/cg && mount -t cgroup -o pids none /tmp/cg && echo $$ > /tmp/cg/cgroup.procs; echo max=$(cat /tmp/cg/pids.max); exec python3 -c \"{fork}\""));
    eprintln!("{out}");
    // What it mounted is its own subtree: the node's limit at its root, and it stays under it.
    assert!(out.contains("max=30"), "pids.max at the mount's root: {out} (exit {code})");
    let procs: u64 =
        out.split("forked ").nth(1).and_then(|v| v.trim().parse().ok()).unwrap_or(u64::MAX);
    assert!(procs <= 30, "{procs} processes under pids: 30 after the escape attempt");
    // The node's PID 1 (vemu-init) is in its cgroups too (issue 61: it sat in the
    // machine's root cgroups, so what it was made to start ran outside the limits): in
    // the node's cgroup namespace its cgroups are the root, "/", not a path above it.
    let (_, cg) =
        lab.sh("a", "grep -E ':(pids|memory):' /proc/1/cgroup || grep '^0::' /proc/1/cgroup");
    assert!(
        cg.lines().count() >= 1 && cg.lines().all(|l| l.ends_with(":/")),
        "the node's init is outside its cgroups: {cg}"
    );
}

/// Issue 61: a vemu installed under /tmp (a checkout there, or /var/tmp, /run) could
/// start no process in a tenant's node: the node's init was started by its path, which
/// a confined node's own /tmp hides. It is started from a handle opened before.
#[test]
fn a_vemu_under_tmp_starts_a_tenants_nodes() {
    let _g = serial();
    let bin = std::env::temp_dir().join("vemu-tests/under-tmp");
    let _ = std::fs::remove_dir_all(&bin);
    std::fs::create_dir_all(&bin).unwrap();
    for b in [env!("CARGO_BIN_EXE_vemu"), env!("CARGO_BIN_EXE_vemu-init")] {
        let p = std::path::Path::new(b);
        std::fs::copy(p, bin.join(p.file_name().unwrap())).unwrap();
    }
    let vemu = bin.join("vemu");
    let run = |args: &[&str]| std::process::Command::new(&vemu).args(args).output().unwrap();
    let path = write_scenario("t-undertmp", "name: t-undertmp\nnodes: {a: {run: ['sleep 600']}}\n");
    let o = run(&["up", path.to_str().unwrap(), "--tenant", "none"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = run(&[
        "exec",
        "a",
        "--lab",
        "t-undertmp",
        "--",
        "sh",
        "-c",
        "echo in $(hostname); ls /tmp | wc -l",
    ]);
    let down = run(&["down", "t-undertmp"]);
    let _ = std::fs::remove_dir_all(&bin);
    assert!(o.status.success() && text(&o).starts_with("in a\n"), "{}", text(&o));
    assert!(down.status.success(), "{}", text(&down));
}

/// Issue 39: a tenant's nodes (`vemu up --tenant`, every Kubernetes VemuLab) run routing
/// software as usual — FRR's OSPF here, whose daemons want CAP_SYS_ADMIN — but cannot
/// reach the machine: its files read-only, vemu's logs unseen, no mount or unmount (so
/// nothing can be uncovered), no new namespaces, a /dev of a few devices, kernel
/// settings read-only but the node's own net.*, /sys read-only, and no capability to
/// load modules, do raw I/O, trace, make devices, set the clock or open files by handle.
/// Issue 61: a root of its own, the machine's programs in it — no shadow file, nothing of
/// /root or the machine's other directories, no password hash.
/// Each check fails for an owner's lab (checked: the same script there).
#[test]
fn a_tenants_nodes_run_routing_daemons_but_cannot_reach_the_machine() {
    let _g = serial();
    let yaml = r#"name: t-tenant
routing: none
addressing: {ipv6: none, loopback_ipv4: 10.255.0.0/24}
defaults:
  link: {delay: 1ms}
  node:
    files:
      /etc/frr/daemons: {content: "zebra=yes\nospfd=yes\nvtysh_enable=yes\nzebra_options=\"-A 127.0.0.1\"\nospfd_options=\"-A 127.0.0.1\"\n"}
      /etc/frr/frr.conf:
        content: |
          frr defaults traditional
          hostname {{ name }}
          interface lo
           ip ospf area 0
          {% for i in ifaces %}interface {{ i.name }}
           ip ospf area 0
           ip ospf hello-interval 1
           ip ospf dead-interval 4
           ip ospf network point-to-point
          {% endfor %}router ospf
           ospf router-id {{ router_id }}
    run: [/usr/lib/frr/frrinit.sh start]
nodes: {a: {}, b: {}}
links:
  - endpoints: [a, b]
"#;
    let lab = Lab::up_with("t-tenant", yaml, &[], &["--tenant", "none"]);
    assert!(
        lab.wait_reachable("a", &["10.255.0.2".to_string()], 60.0).is_empty(),
        "OSPF in confined nodes: b's loopback unreachable from a"
    );
    let _ = std::fs::remove_file("/tmp/vemu-tenant-tmp");
    let script = r#"
        fail() { echo "ESCAPED: $1"; }
        touch /usr/vemu-tenant-x 2>/dev/null && fail "wrote the machine's /usr"
        [ -e /etc/shadow ] && fail "sees the machine's shadow file"
        [ -e /root/.vemu-tenant-probe ] && fail "sees the machine's /root"
        [ -e "$VEMU_CHECKOUT" ] && fail "sees the machine's other directories"
        grep -q '^[^:]*:[$]' /etc/passwd && fail "sees password hashes"
        [ -n "$(ls -A /var/log/vemu 2>/dev/null)" ] && fail "sees vemu's logs"
        unshare -m true 2>/dev/null && fail "made a mount namespace"
        unshare -U true 2>/dev/null && fail "made a user namespace"
        mount -t tmpfs x /mnt 2>/dev/null && fail "mounted"
        [ -e /dev/mem ] || [ -e /dev/kmsg ] || [ "$(ls /dev | wc -l)" -gt 20 ] && fail "has the machine's /dev"
        mknod /tmp/vemu-tenant-m c 1 3 2>/dev/null && fail "made a device"; rm -f /tmp/vemu-tenant-m
        v=$(cat /proc/sys/kernel/core_pattern); (echo "$v" > /proc/sys/kernel/core_pattern) 2>/dev/null && fail "wrote a kernel setting"
        (echo 1400 > /sys/class/net/lo/mtu) 2>/dev/null && fail "wrote /sys"
        (echo 1 > /etc/hosts) 2>/dev/null && fail "wrote the lab's /etc/hosts"
        bnd=$(awk '/CapBnd/ {print $2}' /proc/self/status)
        for c in 2 16 17 19 25 27 39; do [ $(( 0x$bnd >> c & 1 )) = 1 ] && fail "has capability $c"; done
        echo 1 > /proc/sys/net/ipv4/ip_forward || echo "BROKEN: cannot set its own net.*"
        touch /tmp/vemu-tenant-tmp /etc/x /var/lib/x || echo "BROKEN: cannot write its own /tmp, /etc, /var/lib"
        # Last: in an owner's lab this succeeds, and what is written after would reach
        # the machine's own /etc.
        umount -l /etc 2>/dev/null && fail "unmounted its /etc overlay"
        echo done
    "#;
    // (The checkout this test runs from: a directory of the machine's a tenant's node
    // does not see.)
    let script = &script.replace("$VEMU_CHECKOUT", env!("CARGO_MANIFEST_DIR"));
    std::fs::write("/root/.vemu-tenant-probe", "").unwrap();
    let (code, out) = lab.sh("a", script);
    assert_eq!((code, out.trim()), (0, "done"), "{out}");
    // Its own root holds the machine's programs: they run (FRR did, above), ping too.
    let (code, out) = lab.sh("a", "ping -c 1 -W 2 10.255.0.2 >/dev/null && echo ok");
    assert_eq!((code, out.trim()), (0, "ok"), "{out}");
    assert!(
        !std::path::Path::new("/usr/vemu-tenant-x").exists()
            && !std::path::Path::new("/tmp/vemu-tenant-tmp").exists()
    );
    let o = lab.exec("a", &["vtysh", "-c", "show ip ospf neighbor"]);
    assert!(text(&o).contains("Full"), "{}", text(&o));
    drop(lab);
    // The same script in an owner's lab: every check tells (what a node may do there;
    // the kernel setting is written with the value it has; nothing is written after
    // the unmount, which would reach the machine's /etc — an earlier order of this
    // script overwrote the machine's /etc/hosts).
    let owner = Lab::up("t-tenant", "nodes: {a: {}}\n");
    let (_, out) = owner.sh("a", script);
    for what in [
        "unmounted",
        "made a mount namespace",
        "mounted",
        "made a device",
        "wrote a kernel setting",
        "wrote /sys",
        "has capability 16",
        "sees the machine's shadow file",
        "sees the machine's /root",
        "sees the machine's other directories",
    ] {
        assert!(
            out.contains(&format!("ESCAPED: {what}")),
            "the check of '{what}' cannot fail: {out}"
        );
    }
    let _ = std::fs::remove_file("/usr/vemu-tenant-x");
    let _ = std::fs::remove_file("/tmp/vemu-tenant-tmp");
    let _ = std::fs::remove_file("/root/.vemu-tenant-probe");
}
