//! Nodes from OCI images (issue 41): images made here from Debian's packages
//! (`scripts/test-images.sh`), given as an OCI layout and as a docker-archive, in a
//! store of the test's own.

mod common;

use common::*;
use std::path::PathBuf;
use std::process::Command;

/// The test images (made once, kept in target/test-images) and a fresh store.
fn images() -> (PathBuf, PathBuf) {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let o = Command::new("bash").arg(root.join("scripts/test-images.sh")).output().unwrap();
    assert!(o.status.success(), "making the test images: {}", text(&o));
    let store = std::env::temp_dir().join("vemu-tests/image-store");
    let _ = std::fs::remove_dir_all(&store);
    (root.join("target/test-images").canonicalize().unwrap(), store)
}

#[test]
fn image_nodes_run_their_image_with_its_process_over_emulated_links() {
    let _g = serial();
    let (dir, store) = images();
    let store_env = store.to_str().unwrap();
    let yaml = format!(
        "nodes:
  a: {{image: {d}/alpha}}
  a2: {{image: {d}/alpha}}
  b:
    image: docker-archive:{d}/alpha.tar
    files: {{/etc/motd: {{content: \"b's own\\n\"}}}}
  c: {{}}
links:
  - {{endpoints: [a, c], delay: 5ms}}
  - {{endpoints: [c, b], delay: 5ms}}
  - {{endpoints: [a2, c]}}
",
        d = dir.display()
    );
    let lab = Lab::up_env("img1", &yaml, &[("VEMU_IMAGES_DIR", store_env)]);
    // Each image node runs its image's files; the plain node the machine's.
    for n in ["a", "a2", "b"] {
        assert_eq!(lab.sh(n, "cat /etc/vemu-image"), (0, "alpha\n".into()), "node {n}");
    }
    assert_ne!(lab.sh("c", "cat /etc/vemu-image").0, 0, "the plain node sees an image's file");
    // The image's main process ran, with its environment and working directory; so do
    // commands run in the node.
    let main_ran = (0..50).find_map(|_| {
        let (code, out) = lab.sh("a", "cat /tmp/main-ran");
        std::thread::sleep(std::time::Duration::from_millis(100));
        (code == 0).then_some(out)
    });
    assert_eq!(main_ran.as_deref(), Some("hello from /srv\n"));
    assert_eq!(lab.sh("a", "echo $GREETING in $(pwd)"), (0, "hello in /srv\n".into()));
    // `vemu shell` starts the user's shell where the node has it, else the node's sh.
    for (shell, want) in [("/bin/bash", "/bin/bash"), ("/no/such/zsh", "/bin/sh")] {
        use std::io::Write;
        let mut child = Command::new(env!("CARGO_BIN_EXE_vemu"))
            .args(["shell", "--lab", "img1", "a"])
            .env("SHELL", shell)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(b"echo \"shell=$0 in $(pwd)\"; exit\n").unwrap();
        let o = child.wait_with_output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            format!("shell={want} in /srv\n"),
            "{}",
            text(&o)
        );
    }
    // `files:` land in the image's root, of that node only.
    assert_eq!(lab.sh("b", "cat /etc/motd"), (0, "b's own\n".into()));
    assert_ne!(lab.sh("a", "cat /etc/motd").1, "b's own\n");
    // What a node writes stays its own, even beside a node of the same image.
    assert_eq!(lab.sh("a", "echo mine > /root/mine && cat /root/mine"), (0, "mine\n".into()));
    assert_ne!(lab.sh("a2", "cat /root/mine").0, 0, "a2 sees a's file");
    // The lab's names, and its links: 2 x (5 + 5) ms from a to b.
    let status = lab.status();
    let b_ip = lab.addrs(&status, "b", false)[0].clone();
    let (code, out) = lab.sh("a", "getent ahostsv4 b");
    assert!(code == 0 && out.contains(&b_ip), "{out}");
    let (sent, got, rtt) = lab.ping_median("a", &b_ip, 10, 0.05);
    assert_eq!(got, sent, "a cannot reach b");
    assert!((20.0..25.0).contains(&rtt), "RTT {rtt} ms, 20 ms set");
    // One copy per image on disk, however many nodes use it: the layout's (a, a2) and
    // the archive's (b).
    let roots = std::fs::read_dir(store.join("roots"))
        .unwrap()
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .count();
    assert_eq!(roots, 2);
    // `vemu images`: both in use, so neither can go; once the lab is down, both can.
    let ls = images_cmd(&store, &["ls"]);
    let t = text(&ls);
    assert!(ls.status.success(), "{t}");
    let rows: Vec<&str> = t.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{t}");
    assert!(rows.iter().all(|r| r.contains(" yes ")), "{t}");
    assert!(t.contains(&format!("{}/alpha", dir.display())), "{t}");
    assert!(t.contains(&format!("docker-archive:{}/alpha.tar", dir.display())), "{t}");
    let rm = images_cmd(&store, &["rm", &format!("{}/alpha", dir.display())]);
    assert_eq!(rm.status.code(), Some(2), "{}", text(&rm));
    assert!(text(&rm).contains("is used by a running lab's nodes"), "{}", text(&rm));
    drop(lab);
    let prune = images_cmd(&store, &["prune"]);
    assert_eq!(text(&prune).lines().filter(|l| l.starts_with("removed sha256:")).count(), 2);
    assert_eq!(text(&images_cmd(&store, &["ls"])).lines().count(), 1);
}

fn images_cmd(store: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_vemu"))
        .arg("images")
        .args(args)
        .env("VEMU_IMAGES_DIR", store)
        .output()
        .unwrap()
}

#[test]
fn an_image_that_cannot_be_read_is_refused_before_anything_is_built() {
    let _g = serial();
    let (dir, store) = images();
    let yaml = format!(
        "nodes:\n  ok: {{image: {d}/alpha}}\n  gone: {{image: {d}/no-such-image}}\n  junk: {{image: oci-archive:{d}/stamp}}\nlinks:\n  - endpoints: [ok, gone]\n",
        d = dir.display()
    );
    let path = write_scenario("img2", &yaml);
    for verb in ["check", "up"] {
        let o = Command::new(env!("CARGO_BIN_EXE_vemu"))
            .args([verb, path.to_str().unwrap()])
            .env("VEMU_IMAGES_DIR", &store)
            .output()
            .unwrap();
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{verb}: {t}");
        assert!(t.contains(&format!("node gone: image {}/no-such-image", dir.display())), "{t}");
        assert!(
            t.contains(&format!("node junk: image oci-archive:{}/stamp", dir.display())),
            "{t}"
        );
        assert!(!t.contains("node ok:"), "{t}");
    }
    assert!(lab_netns("img2").is_empty());
    assert!(!std::path::Path::new("/run/vemu/img2").exists());
}

/// A containerlab topology (issue 41), brought up directly: its kinds' and defaults'
/// keys merged into each node, a bind, `exec` with `env`, links in the brief and the
/// extended form with their interface names; the nodes configure their own addresses.
#[test]
fn a_containerlab_topology_comes_up_and_pings_end_to_end() {
    let _g = serial();
    let (dir, store) = images();
    let clab = std::env::temp_dir().join("vemu-tests/clab");
    std::fs::create_dir_all(&clab).unwrap();
    std::fs::write(clab.join("h2.conf"), "bound\n").unwrap();
    let topo = format!(
        "name: clab1
mgmt: {{ipv4-subnet: 172.20.20.0/24}}
topology:
  defaults:
    env: {{WHO: h}}
  kinds:
    linux:
      image: {d}/alpha
  nodes:
    h1:
      exec: ['ip addr add 192.168.1.1/24 dev eth1', 'ip route add 192.168.2.0/24 via 192.168.1.2']
    h2:
      binds: ['h2.conf:/etc/h2.conf:ro']
      labels: {{role: router}}
      exec: ['ip addr add 192.168.1.2/24 dev eth1', 'ip addr add 192.168.2.1/24 dev eth2', 'echo $WHO > /tmp/who']
    h3:
      mgmt-ipv4: 172.20.20.9
      exec: ['ip addr add 192.168.2.2/24 dev eth1', 'ip route add 192.168.1.0/24 via 192.168.2.1']
    br1: {{kind: bridge}}
  links:
    - endpoints: ['h1:eth1', 'h2:eth1']
    - type: veth
      endpoints: [{{node: h2, interface: eth2}}, {{node: br1, interface: br1-h2}}]
    - endpoints: ['h3:eth1', 'br1:br1-h3']
",
        d = dir.display()
    );
    let file = clab.join("lab.clab.yml");
    std::fs::write(&file, topo).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_vemu"))
        .args(["up", file.to_str().unwrap()])
        .env("VEMU_IMAGES_DIR", &store)
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    // What did not map is said.
    assert!(t.contains("node 'h2': labels left out"), "{t}");
    let lab = Lab { name: "clab1".into() };
    // containerlab's management network is vemu's.
    let (_, mgmt) = lab.sh("h1", "ip -4 -o addr show dev mgmt0");
    assert!(mgmt.contains("172.20.20.2/24"), "{mgmt}");
    let (_, mgmt) = lab.sh("h3", "ip -4 -o addr show dev mgmt0");
    assert!(mgmt.contains("172.20.20.9/24"), "its mgmt-ipv4: {mgmt}");
    assert_eq!(lab.sh("h2", "cat /etc/h2.conf /etc/vemu-image"), (0, "bound\nalpha\n".into()));
    // The nodes configure themselves (`exec`, started with the lab, as containerlab
    // does): wait until their last commands have run.
    let configured = |node: &str, check: &str| {
        (0..100).any(|_| {
            let done = lab.sh(node, check).0 == 0;
            if !done {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            done
        })
    };
    assert!(configured("h1", "ip route show 192.168.2.0/24 | grep -q via"), "h1 has no route");
    assert!(configured("h3", "ip route show 192.168.1.0/24 | grep -q via"), "h3 has no route");
    assert!(configured("h2", "test -s /tmp/who"), "h2's last exec did not run");
    let (sent, got, _) = lab.ping("h1", "192.168.2.2", 5, 0.1);
    assert_eq!(got, sent, "h1 cannot reach h3 through h2 and the bridge");
    // The bridge is a vemu LAN.
    let status = vemu(&["status", "clab1", "--json"]);
    assert!(text(&status).contains("\"br1\""), "{}", text(&status));
    assert_eq!(lab.sh("h2", "cat /tmp/who"), (0, "h\n".into()));
    // A vendor's system is refused, naming the node and its kind; nothing is built.
    let bad = clab.join("bad.clab.yml");
    std::fs::write(&bad, "name: clab2\ntopology:\n  nodes:\n    srl: {kind: nokia_srlinux, image: ghcr.io/nokia/srlinux}\n    h: {kind: linux}\n").unwrap();
    let o = vemu(&["up", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("node 'srl': kind 'nokia_srlinux' is a vendor's system vemu cannot run"),
        "{}",
        text(&o)
    );
    assert!(lab_netns("clab2").is_empty());
}

/// Two router images and a plain node (issue 41): FRR from one image, BIRD from
/// another, FRR of the machine — OSPF from their startup configurations over impaired
/// links, `vemu up` returning once all three answer; `vemu save` after a change made by
/// hand in the FRR image node, and the lab up again from what was saved.
#[test]
fn router_images_and_a_plain_router_converge_and_come_back_from_saved_configs() {
    let _g = serial();
    let (dir, store) = images();
    let store_env = store.to_str().unwrap();
    let ex = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    let lab_yaml = |r1: &str, r2: &str, r3: &str| {
        format!(
            "routing: none
addressing: {{loopback_ipv4: 10.255.0.0/24, ipv6: none}}
defaults:
  link: {{delay: 2ms, loss: 1%}}
nodes:
  r1: {{image: {d}/frr, kind: frr, startup-config: {r1}}}
  r2: {{image: {d}/bird, kind: bird, startup-config: {r2}}}
  r3: {{kind: frr, startup-config: {r3}}}
links:
  - endpoints: [r1, r2]
  - endpoints: [r2, r3]
",
            d = dir.display()
        )
    };
    let (frr, bird) = (format!("{ex}/frr/frr.conf.j2"), format!("{ex}/bird/bird.conf.j2"));
    let lab =
        Lab::up_env("img-rt", &lab_yaml(&frr, &bird, &frr), &[("VEMU_IMAGES_DIR", store_env)]);
    // `up` returned with every router answering.
    let (code, daemons) = lab.sh("r1", "vtysh -c 'show daemons'");
    assert!(code == 0 && daemons.contains("ospfd") && daemons.contains("watchfrr"), "{daemons}");
    assert_eq!(lab.sh("r2", "birdc show status | grep -c 'up and running'").1, "1\n");
    // Each runs its own image's files.
    assert_eq!(lab.sh("r1", "cat /etc/vemu-image"), (0, "frr\n".into()));
    assert_eq!(lab.sh("r2", "cat /etc/vemu-image"), (0, "bird\n".into()));
    assert_ne!(lab.sh("r3", "cat /etc/vemu-image").0, 0);
    let loopbacks: Vec<String> = (1..=3).map(|i| format!("10.255.0.{i}")).collect();
    let reached = |lab: &Lab| {
        (0..600).find(|_| {
            let all = loopbacks.iter().all(|a| lab.sh("r1", &format!("ping -c 1 -W 1 {a}")).0 == 0);
            if !all {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            all
        })
    };
    assert!(reached(&lab).is_some(), "r1 does not reach every loopback through BIRD");
    // A change by hand, saved, and the lab again from the saved files.
    let (code, _) = lab.sh("r1", "vtysh -c 'conf t' -c 'ip route 192.0.2.0/24 Null0'");
    assert_eq!(code, 0);
    let saved = std::env::temp_dir().join("vemu-tests/img-rt-saved");
    let _ = std::fs::remove_dir_all(&saved);
    // Issue 61: a link planted where save writes (a shared /tmp) had its target
    // overwritten; it is refused, naming it, the target untouched.
    let victim = std::env::temp_dir().join("vemu-tests/img-rt-victim");
    std::fs::write(&victim, "mine").unwrap();
    std::fs::create_dir_all(saved.join("r2")).unwrap();
    std::os::unix::fs::symlink(&victim, saved.join("r2/bird.conf")).unwrap();
    let o = lab.vemu(&["save", "-o", saved.to_str().unwrap()]);
    assert!(!o.status.success() && text(&o).contains("is a symbolic link"), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "mine");
    std::fs::remove_file(saved.join("r2/bird.conf")).unwrap();
    let o = lab.vemu(&["save", "-o", saved.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    drop(lab);
    let s = |n: &str, f: &str| saved.join(n).join(f).display().to_string();
    let again = lab_yaml(&s("r1", "frr.conf"), &s("r2", "bird.conf"), &s("r3", "frr.conf"));
    let lab = Lab::up_env("img-rt", &again, &[("VEMU_IMAGES_DIR", store_env)]);
    assert!(reached(&lab).is_some(), "the saved lab does not converge");
    let (_, route) = lab.sh("r1", "ip route show 192.0.2.0/24");
    assert!(route.contains("blackhole 192.0.2.0/24"), "{route}");
    let (_, r2) = lab.sh("r2", "ip route show 10.255.0.3");
    assert!(r2.contains("proto bird"), "r2's route to r3 is not BIRD's: {r2}");
}

/// A real OCI registry on loopback (Debian's docker-registry), as a lab pulls from one:
/// stopped when dropped.
struct Registry {
    child: std::process::Child,
    port: u16,
}

impl Registry {
    fn start() -> Registry {
        let dir = std::env::temp_dir().join("vemu-tests/registry");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let config = format!(
            "version: 0.1\nlog: {{level: error}}\nstorage:\n  filesystem: {{rootdirectory: {}}}\nhttp: {{addr: '127.0.0.1:{port}'}}\n",
            dir.join("data").display()
        );
        std::fs::write(dir.join("config.yml"), config).unwrap();
        let child = Command::new("docker-registry")
            .args(["serve", dir.join("config.yml").to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("docker-registry (scripts/setup.sh installs it)");
        let up = (0..100).any(|_| {
            let ok = std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
            if !ok {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            ok
        });
        assert!(up, "docker-registry does not listen on 127.0.0.1:{port}");
        Registry { child, port }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The pull path: an image pushed to a registry on loopback (plain HTTP, as Docker
/// allows there) runs as a node; a tag the registry lacks is refused at `check`,
/// naming the node and the reference, nothing built.
#[test]
fn an_image_is_pulled_from_a_registry() {
    let _g = serial();
    let (dir, store) = images();
    let reg = Registry::start();
    let reference = format!("127.0.0.1:{}/vemu-test/alpha:1", reg.port);
    let push = Command::new("skopeo")
        .args(["copy", "--quiet", "--dest-tls-verify=false"])
        .arg(format!("oci:{}/alpha:alpha", dir.display()))
        .arg(format!("docker://{reference}"))
        .output()
        .unwrap();
    assert!(push.status.success(), "pushing: {}", text(&push));
    let yaml =
        format!("nodes:\n  a: {{image: {reference}}}\n  b: {{}}\nlinks: [{{endpoints: [a, b]}}]\n");
    let lab = Lab::up_env("img-reg", &yaml, &[("VEMU_IMAGES_DIR", store.to_str().unwrap())]);
    assert_eq!(lab.sh("a", "cat /etc/vemu-image"), (0, "alpha\n".into()));
    let ls = text(&images_cmd(&store, &["ls"]));
    assert!(ls.contains(&reference), "{ls}");
    drop(lab);
    // A tenant's lab may name registry images: its image nodes are confined as its
    // other nodes are (a /dev of their own, /sys and /proc read-only but for net.*),
    // and write only their own root.
    let store_env = [("VEMU_IMAGES_DIR", store.to_str().unwrap())];
    let listed = format!("--registries=127.0.0.1:{}", reg.port);
    let lab = Lab::up_with("img-ten", &yaml, &store_env, &["--tenant", "none", &listed]);
    assert_eq!(lab.sh("a", "cat /etc/vemu-image"), (0, "alpha\n".into()));
    assert_eq!(lab.sh("a", "ls /dev | grep -c '^sd\\|^vd\\|^mem$\\|^kmsg$'").1, "0\n");
    assert_ne!(lab.sh("a", "touch /sys/x").0, 0, "a tenant's image node writes /sys");
    assert_ne!(lab.sh("a", "echo 1 > /proc/sys/kernel/sysrq").0, 0);
    assert_eq!(lab.sh("a", "echo 1 > /proc/sys/net/ipv4/ip_forward").0, 0);
    assert_eq!(lab.sh("a", "touch /root/mine && echo ok"), (0, "ok\n".into()));
    let (code, caps) = lab.sh("a", "grep CapEff /proc/self/status");
    assert!(code == 0 && !caps.contains("ffffffff"), "all capabilities kept: {caps}");
    let (sent, got, _) = lab.ping("a", &lab.addrs(&lab.status(), "b", false)[0], 3, 0.1);
    assert_eq!(got, sent);
    drop(lab);
    // …but not a path of the machine's (it reads the machine's files).
    let local = format!("nodes:\n  a: {{image: {}/alpha}}\n", dir.display());
    let path = write_scenario("img-ten2", &local);
    let o = vemu(&["check", path.to_str().unwrap(), "--tenant", "none"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // Audit (issue 61): a tenant's reference made the machine call its own loopback
    // services. A registry the administrator did not list is refused at the field, and
    // one listed by a name that resolves to this machine is refused before anything is
    // sent (a listener there sees no connection).
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let probe_port = probe.local_addr().unwrap().port();
    probe.set_nonblocking(true).unwrap();
    let check_as_tenant = |yaml: &str, extra: &[&str]| {
        let path = write_scenario("img-probe", yaml);
        let o = check_in(&store, &path, &[&["--tenant", "none"], extra].concat());
        (o.status.code(), text(&o))
    };
    let (code, t) = check_as_tenant(
        &format!("nodes:\n  a: {{image: '127.0.0.1:{probe_port}/probe:1'}}\n"),
        &[&listed],
    );
    assert_eq!(code, Some(2), "{t}");
    assert!(
        t.contains("nodes.a.image")
            && t.contains("refused in a tenant's lab")
            && t.contains(&listed[13..]),
        "{t}"
    );
    let by_name = format!("--registries=localhost:{probe_port}");
    let (code, t) = check_as_tenant(
        &format!("nodes:\n  a: {{image: 'localhost:{probe_port}/probe:1'}}\n"),
        &[&by_name],
    );
    assert_eq!(code, Some(2), "{t}");
    assert!(t.contains("an address of this machine"), "{t}");
    let (code, t) = check_as_tenant("nodes:\n  a: {image: 'containers-storage:x'}\n", &[]);
    assert!(
        code == Some(2) && t.contains("transport 'containers-storage:' is not supported"),
        "{t}"
    );
    assert!(probe.accept().is_err(), "the machine called its own loopback for a tenant");
    let missing = format!("127.0.0.1:{}/vemu-test/nope:1", reg.port);
    let path = write_scenario("img-reg2", &format!("nodes:\n  gone: {{image: {missing}}}\n"));
    let o = check_in(&store, &path, &[]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(
        t.contains(&format!("node gone: image docker://{missing}"))
            && t.contains("manifest unknown"),
        "{t}"
    );
    assert!(!t.contains("level=fatal"), "skopeo's log format reaches the user: {t}");
}

/// Runs a tool of the test's own image making; its output.
fn tool(program: &str, args: &[&str]) -> String {
    let o = Command::new(program).args(args).output().unwrap();
    assert!(o.status.success(), "{program} {args:?}: {}", text(&o));
    text(&o)
}

/// `vemu check PATH ARGS` with the image store `store`.
fn check_in(
    store: &std::path::Path,
    path: &std::path::Path,
    args: &[&str],
) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_vemu"))
        .arg("check")
        .arg(path)
        .args(args)
        .env("VEMU_IMAGES_DIR", store)
        .output()
        .unwrap()
}

/// Push the OCI layout image `image` (`DIR:TAG`) to `reference` on a loopback registry.
fn push(image: &str, reference: &str) {
    let (from, to) = (format!("oci:{image}"), format!("docker://{reference}"));
    tool("skopeo", &["copy", "--quiet", "--dest-tls-verify=false", &from, &to]);
}

/// Audit (issue 61): a tenant's image holding a block device node (loop0's, 7:0) and
/// running as `User: 65534:65534`, pulled from a registry. Before: the confined node read
/// and wrote the machine's loop0, and could start no process at all (EPERM). Now the
/// device node is dropped as the image is unpacked (the store's log says so), every
/// mount the node sees but its own /dev is without devices, its cgroup allows only its
/// /dev's devices — and its processes run as the image's user.
#[test]
fn a_tenants_image_reaches_no_device_and_runs_as_its_user() {
    let _g = serial();
    let (dir, store) = images();
    let reg = Registry::start();
    let work = std::env::temp_dir().join("vemu-tests/hostile-image");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let (layout, bundle) = (work.join("layout"), work.join("bundle"));
    tool("cp", &["-a", dir.join("alpha").to_str().unwrap(), layout.to_str().unwrap()]);
    let image = format!("{}:alpha", layout.display());
    tool("umoci", &["unpack", "--image", &image, bundle.to_str().unwrap()]);
    tool("mknod", &[bundle.join("rootfs/loopdev").to_str().unwrap(), "b", "7", "0"]);
    tool("umoci", &["repack", "--image", &image, bundle.to_str().unwrap()]);
    tool("umoci", &["config", "--image", &image, "--config.user=65534:65534"]);
    let reference = format!("127.0.0.1:{}/vemu-test/hostile:1", reg.port);
    push(&image, &reference);
    let yaml = format!("nodes:\n  a: {{image: {reference}}}\n");
    let store_env = [("VEMU_IMAGES_DIR", store.to_str().unwrap())];
    let registries = format!("--registries=127.0.0.1:{}", reg.port);
    let lab = Lab::up_with("img-hostile", &yaml, &store_env, &["--tenant", "none", &registries]);
    assert_eq!(lab.sh("a", "id -u; id -g"), (0, "65534\n65534\n".into()), "the image's user");
    assert_eq!(lab.sh("a", "cat /tmp/main-ran"), (0, "hello from /srv\n".into()));
    let (code, out) = lab.sh("a", "ls -l /loopdev 2>&1");
    assert_ne!(code, 0, "the device node is in the node's root: {out}");
    assert_eq!(lab.sh("a", "head -c 1 /dev/zero | wc -c"), (0, "1\n".into()), "/dev/zero");
    let log = std::fs::read_to_string(store.join("log")).unwrap_or_default();
    // (Debian's root holds /dev/null and the like too: a node's devices are its /dev's.)
    let line = log.lines().find(|l| l.contains("device node(s) from its root:")).unwrap_or("");
    assert!(line.split_whitespace().any(|w| w == "/loopdev"), "store log: {log}");
    // The node's processes are in a devices cgroup of their own that allows its /dev's
    // devices only (where the machine mounts v1's controller; v2's program is tested in
    // vemu-host's devices module).
    let list = std::path::Path::new("/sys/fs/cgroup/devices/vemu/img-hostile/a/devices.list");
    if std::path::Path::new("/sys/fs/cgroup/devices/devices.list").exists() {
        let allowed = std::fs::read_to_string(list).unwrap();
        assert!(allowed.contains("c 1:3 rwm") && !allowed.contains("a *:* rwm"), "{allowed}");
        assert!(!allowed.contains("b "), "a block device is allowed: {allowed}");
        let procs = std::fs::read_to_string(list.with_file_name("cgroup.procs")).unwrap();
        assert!(procs.lines().count() >= 2, "the node's init and main process: {procs}");
    }
    drop(lab);
    // Bounded pulls (audit: a 3.1 MB layer unpacked to 1.08 GB; 1000 layers took over
    // 3 minutes): a layer of 300 MB of zeros (a few hundred KB compressed) is refused
    // to a tenant allowed 100 MiB before it is unpacked, naming the limit; an image of
    // 130 layers is refused to anyone before it is copied.
    tool("umoci", &["unpack", "--image", &image, work.join("bomb").to_str().unwrap()]);
    tool(
        "dd",
        &[
            "if=/dev/zero",
            &format!("of={}", work.join("bomb/rootfs/zeros").display()),
            "bs=1M",
            "count=300",
        ],
    );
    tool("umoci", &["repack", "--image", &image, work.join("bomb").to_str().unwrap()]);
    let bomb = format!("127.0.0.1:{}/vemu-test/bomb:1", reg.port);
    push(&image, &bomb);
    let path = write_scenario("img-bomb", &format!("nodes:\n  a: {{image: {bomb}}}\n"));
    let o = check_in(&store, &path, &["--tenant", "none", &registries, "--image-max", "100MiB"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("unpacks to more than 100.0 MiB"), "{t}");
    let roots = std::fs::read_dir(store.join("roots")).unwrap().count();
    assert_eq!(roots, 1, "the bomb was unpacked (only the first image should be)");
    // 130 layers: the manifest's one layer, 130 times over, in a layout of its own.
    let many = work.join("many");
    tool("cp", &["-a", dir.join("alpha").to_str().unwrap(), many.to_str().unwrap()]);
    let script = r#"set -e; cd "$1"
        m=$(python3 -c 'import json; print(json.load(open("index.json"))["manifests"][0]["digest"][7:])')
        python3 - "$m" <<'PY'
import hashlib, json, sys
m = json.load(open("blobs/sha256/" + sys.argv[1]))
m["layers"] = m["layers"][:1] * 130
b = json.dumps(m).encode()
d = hashlib.sha256(b).hexdigest()
open("blobs/sha256/" + d, "wb").write(b)
i = json.load(open("index.json"))
i["manifests"][0]["digest"] = "sha256:" + d
i["manifests"][0]["size"] = len(b)
json.dump(i, open("index.json", "w"))
PY"#;
    tool("bash", &["-c", script, "-", many.to_str().unwrap()]);
    let path = write_scenario("img-many", &format!("nodes:\n  a: {{image: {}}}\n", many.display()));
    let o = check_in(&store, &path, &[]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("it has 130 layers: an image may have at most 127"), "{t}");
    let _ = std::fs::remove_dir_all(&work);
}

/// An image that breaks on the way in (issue 41): a layer whose bytes do not match its
/// digest, and a store too small to unpack into (a 60 MiB tmpfs: room for the copy, not
/// the root). Each is a clear error, nothing of the lab is left, and the store stays
/// usable: no half-unpacked root.
#[test]
fn a_corrupt_layer_and_a_full_disk_are_clear_errors_that_leave_the_store_whole() {
    let _g = serial();
    let (dir, _) = images();
    let tmp = std::env::temp_dir().join("vemu-tests/bad-images");
    let _ = Command::new("umount").arg(tmp.join("small")).output();
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(tmp.join("small")).unwrap();
    // A copy of the layout whose largest blob (its layer) has a byte changed.
    let corrupt = tmp.join("corrupt");
    let o = Command::new("cp").arg("-a").arg(dir.join("alpha")).arg(&corrupt).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let blob = std::fs::read_dir(corrupt.join("blobs/sha256"))
        .unwrap()
        .flatten()
        .max_by_key(|e| e.metadata().unwrap().len())
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&blob).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&blob, bytes).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=60m", "tmpfs"])
        .arg(tmp.join("small"))
        .output()
        .unwrap();
    assert!(mounted.status.success(), "{}", text(&mounted));
    let store = tmp.join("small/store");
    let up = |name: &str, image: &std::path::Path| {
        let path = write_scenario(name, &format!("nodes:\n  a: {{image: {}}}\n", image.display()));
        let o = Command::new(env!("CARGO_BIN_EXE_vemu"))
            .args(["up", path.to_str().unwrap()])
            .env("VEMU_IMAGES_DIR", &store)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{name} came up");
        assert!(
            lab_netns(name).is_empty() && !std::path::Path::new("/run/vemu").join(name).exists()
        );
        text(&o)
    };
    let t = up("img-corrupt", &corrupt);
    assert!(t.contains("node a: image") && t.contains("copying the image"), "{t}");
    // `check` looks at the layers too (it said "valid" before: issue 61), and both call
    // it a mistake in the input (exit 2).
    let path =
        write_scenario("img-corrupt", &format!("nodes:\n  a: {{image: {}}}\n", corrupt.display()));
    let o = check_in(&store, &path, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("Digest did not match"), "{}", text(&o));
    assert!(
        t.contains("Digest did not match"),
        "the error does not say the layer is not what it claims: {t}"
    );
    let t = up("img-full", &dir.join("alpha"));
    assert!(t.contains("unpacking the image") && t.contains("no space left on device"), "{t}");
    let roots: Vec<_> = std::fs::read_dir(store.join("roots")).unwrap().flatten().collect();
    let ls = images_cmd(&store, &["ls"]);
    let _ = Command::new("umount").arg(tmp.join("small")).output();
    assert!(roots.is_empty(), "a half-unpacked root stays: {:?}", roots[0].path());
    assert!(ls.status.success() && text(&ls).lines().count() == 1, "{}", text(&ls));
    let _ = std::fs::remove_dir_all(&tmp);
}

/// vemu's own image (`scripts/image.sh`: what the Kubernetes agents and the operator
/// run, made from Debian's packages and the binaries built here, no Dockerfile): its
/// digest is printed, its config names vemu, and runc — a kubelet's container runtime —
/// starts it: vemu, its libraries and the lab tools it calls are all in it.
#[test]
fn vemus_own_image_runs_under_an_oci_runtime() {
    let _g = serial();
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let o = Command::new("bash").arg(root.join("scripts/image.sh")).output().unwrap();
    let digest = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert!(o.status.success() && digest.starts_with("sha256:"), "image.sh: {}", text(&o));
    let layout = root.join("target/image/vemu");
    let config = Command::new("skopeo")
        .args(["inspect", "--config"])
        .arg(format!("oci:{}:latest", layout.display()))
        .output()
        .unwrap();
    let config: serde_json::Value = serde_json::from_slice(&config.stdout).unwrap();
    assert_eq!(config["config"]["Entrypoint"], serde_json::json!(["vemu"]), "{config}");
    assert!(config["config"]["Labels"]["org.opencontainers.image.revision"].is_string());
    // A bundle of it, as containerd hands runc one.
    let bundle = std::env::temp_dir().join("vemu-tests/own-image");
    let _ = std::fs::remove_dir_all(&bundle);
    std::fs::create_dir_all(bundle.parent().unwrap()).unwrap();
    let o = Command::new("umoci")
        .args(["unpack", "--image"])
        .arg(format!("{}:latest", layout.display()))
        .arg(&bundle)
        .output()
        .unwrap();
    assert!(o.status.success(), "umoci unpack: {}", text(&o));
    let spec_path = bundle.join("config.json");
    let mut spec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&spec_path).unwrap()).unwrap();
    spec["process"]["terminal"] = false.into();
    spec["process"]["args"] = serde_json::json!([
        "sh",
        "-c",
        "vemu --version && ip -V && iperf3 --version | head -1 && ! ldd /usr/local/bin/vemu /usr/local/bin/vemu-operator | grep 'not found'"
    ]);
    std::fs::write(&spec_path, spec.to_string()).unwrap();
    let id = format!("vemu-test-{}", std::process::id());
    let run = Command::new("runc").args(["run", "--bundle"]).arg(&bundle).arg(&id).output();
    let _ = Command::new("runc").args(["delete", "--force", &id]).output();
    let run = run.expect("runc (scripts/setup.sh installs it)");
    let out = text(&run);
    assert!(run.status.success(), "the image does not run: {out}");
    assert!(
        out.contains("vemu 0.") && out.contains("ip utility") && out.contains("iperf 3"),
        "{out}"
    );
    // Nothing of the container is left.
    let listed = Command::new("runc").arg("list").output().unwrap();
    assert!(!text(&listed).contains(&id), "{}", text(&listed));
    let _ = std::fs::remove_dir_all(&bundle);
}
