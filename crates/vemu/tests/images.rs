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
    let (sent, got, rtt) = lab.ping("a", &b_ip, 10, 0.05);
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
