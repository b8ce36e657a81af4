//! The API against hostile clients (the audit of issue 19): output, connections and
//! requests are bounded, and the lab's own socket always answers. Run as root.

mod common;
use common::*;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

const YAML: &str = "name: t-api\nnodes:\n  a: {}\n  b: {}\nlinks:\n  - endpoints: [a, b]\n";

/// One request over the lab's Unix socket; the whole answer (status line, headers, body).
fn unix_request(lab: &str, method: &str, path: &str, body: &str) -> String {
    let mut s = UnixStream::connect(format!("/run/vemu/{lab}/api.sock")).unwrap();
    write!(s, "{method} {path} HTTP/1.1\r\nHost: vemu\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn json_body(answer: &str) -> serde_json::Value {
    serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap())
        .unwrap_or_else(|e| panic!("{e}: {answer}"))
}

fn processes_matching(pattern: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit())))
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).replace('\0', " ").trim() == pattern)
        })
        .count()
}

#[test]
fn exec_output_is_capped_and_ends_with_its_client() {
    let _g = serial();
    let lab = Lab::up("t-api", YAML);
    // 3 MB of output, 1000 bytes kept: the answer says so, the rest was drained.
    let a = unix_request(
        "t-api",
        "POST",
        "/v1/nodes/a/exec",
        r#"{"cmd": "head -c 3000000 /dev/zero | tr '\\0' x", "max_output_bytes": 1000}"#,
    );
    let v = json_body(&a);
    assert_eq!(v["truncated"], true, "{v}");
    assert_eq!(v["exit"], 0, "{v}");
    let out = v["stdout"].as_str().unwrap();
    assert!(
        out.starts_with(&"x".repeat(1000))
            && out.contains("output cut at 1000 bytes; 2999000 more bytes dropped"),
        "{}",
        &out[..out.len().min(1200)]
    );
    // Without a cap asked for, small output is whole.
    let v =
        json_body(&unix_request("t-api", "POST", "/v1/nodes/a/exec", r#"{"cmd": ["echo", "hi"]}"#));
    assert_eq!((v["stdout"].as_str(), v["truncated"].as_bool()), (Some("hi\n"), Some(false)));
    let v = json_body(&unix_request(
        "t-api",
        "POST",
        "/v1/nodes/a/exec",
        r#"{"cmd": ["true"], "max_output_bytes": 1000000000000}"#,
    ));
    assert!(v["error"].as_str().unwrap().contains("max_output_bytes must be at most"), "{v}");

    // A client that goes away takes its command (and what it started) with it.
    let mut s = UnixStream::connect("/run/vemu/t-api/api.sock").unwrap();
    let body = r#"{"cmd": "sleep 4747 & sleep 4748", "timeout_s": 86400}"#;
    write!(
        s,
        "POST /v1/nodes/a/exec HTTP/1.1\r\nHost: vemu\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let t = Instant::now();
    while processes_matching("sleep 4748") == 0 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(processes_matching("sleep 4748"), 1, "the command started");
    drop(s);
    let t = Instant::now();
    while processes_matching("sleep 4748") + processes_matching("sleep 4747") > 0
        && t.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        processes_matching("sleep 4748") + processes_matching("sleep 4747"),
        0,
        "the command and its background child ended with the client"
    );
    drop(lab);
}

#[test]
fn half_sent_requests_cannot_lock_the_api_out() {
    let _g = serial();
    let path = write_scenario("t-api", YAML);
    let o = vemu(&["up", path.to_str().unwrap(), "--api", "127.0.0.1:0"]);
    assert!(o.status.success(), "{}", text(&o));
    let lab = Lab { name: "t-api".into() };
    let addr = std::fs::read_to_string("/run/vemu/t-api/api-address").unwrap().trim().to_string();
    // 400 connections each sending half a request head: more than the TCP allowance.
    let mut conns: Vec<TcpStream> = (0..400)
        .map(|_| {
            let mut c = TcpStream::connect(&addr).unwrap();
            c.write_all(b"GET /v1/lab HTTP/1.1\r\nHost: x\r\n").unwrap();
            c
        })
        .collect();
    // The lab's own socket answers meanwhile.
    let o = lab.vemu(&["status", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    // Those over the allowance were closed at once; the rest when their head did not
    // come within the timeout.
    std::thread::sleep(Duration::from_secs(12));
    let mut closed = 0;
    for c in &mut conns {
        c.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        let mut b = [0u8; 64];
        // A closed connection reads end-of-file (or a reset).
        if matches!(c.read(&mut b), Ok(0) | Err(_)) || b.starts_with(b"HTTP/1.1 408") {
            closed += 1;
        }
    }
    assert_eq!(closed, 400, "every half-sent connection was closed");
    drop(conns);

    // A body that does not come whole in time, and one that is too large.
    let token = std::fs::read_to_string("/run/vemu/t-api/api-token").unwrap().trim().to_string();
    let mut c = TcpStream::connect(&addr).unwrap();
    write!(c, "POST /v1/nodes/a/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{{\"cmd\"").unwrap();
    let mut a = String::new();
    c.read_to_string(&mut a).unwrap();
    assert!(a.starts_with("HTTP/1.1 408"), "{a}");
    let big = format!("{{\"cmd\": \"{}\"}}", "x".repeat(2 << 20));
    let mut c = TcpStream::connect(&addr).unwrap();
    write!(c, "POST /v1/nodes/a/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", big.len()).unwrap();
    let _ = c.write_all(big.as_bytes());
    let mut a = String::new();
    let _ = c.read_to_string(&mut a);
    assert!(a.starts_with("HTTP/1.1 413"), "{}", &a[..a.len().min(200)]);
    // And the API still works over TCP.
    let mut c = TcpStream::connect(&addr).unwrap();
    write!(c, "GET /v1/lab HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n").unwrap();
    let mut a = String::new();
    c.read_to_string(&mut a).unwrap();
    assert!(a.starts_with("HTTP/1.1 200"), "{a}");
}

/// Idle connections (a local user's, no request) beyond the TCP allowance cannot keep
/// the web interface's or the API's own clients out (issue 39): a new connection that
/// proves itself is answered while they are held.
#[test]
fn idle_connections_cannot_lock_the_tcp_api_out() {
    let _g = serial();
    let path = write_scenario("t-idle", &YAML.replace("t-api", "t-idle"));
    let o = vemu(&["up", path.to_str().unwrap(), "--api", "127.0.0.1:0"]);
    assert!(o.status.success(), "{}", text(&o));
    let _lab = Lab { name: "t-idle".into() };
    let addr = std::fs::read_to_string("/run/vemu/t-idle/api-address").unwrap().trim().to_string();
    let token = std::fs::read_to_string("/run/vemu/t-idle/api-token").unwrap().trim().to_string();
    let idle: Vec<TcpStream> = (0..260).map(|_| TcpStream::connect(&addr).unwrap()).collect();
    for _ in 0..3 {
        let mut c = TcpStream::connect(&addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(4))).unwrap();
        write!(c, "GET /v1/lab HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n").unwrap();
        let mut a = String::new();
        let _ = c.read_to_string(&mut a);
        assert!(a.starts_with("HTTP/1.1 200"), "with 260 idle connections held: {a:?}");
    }
    drop(idle);
}

/// Audit (issue 39): a node that unmounted its own /run found the lab's socket and
/// could exec in its sibling nodes. The socket serves its controller's PID namespace
/// only (each node has its own): the node gets a 403 that says why.
#[test]
fn a_node_cannot_use_its_labs_socket() {
    let _g = serial();
    let lab = Lab::up("t-nosock", &YAML.replace("t-api", "t-nosock"));
    let ask = "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect('/run/vemu/t-nosock/api.sock')\ns.sendall(b'GET /v1/lab HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n')\nprint(s.recv(4096).decode())";
    let (code, out) = lab.sh("a", &format!("umount -l /run && python3 -c \"{ask}\""));
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("HTTP/1.1 403") && out.contains("PID namespace only"), "{out}");
    // The machine's own clients are served as before.
    let o = lab.vemu(&["status"]);
    assert!(o.status.success(), "{}", text(&o));
}
