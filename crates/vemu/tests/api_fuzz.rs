//! Mutation fuzzing of the API's request bodies, paths and queries against a real lab
//! (issue 19): every answer must be a success or a client error with a JSON message —
//! never a 5xx, never a dropped connection — and the lab must still work afterwards.
//! Bounded so that it runs in CI in seconds; `VEMU_FUZZ_ROUNDS` runs it longer. Run as
//! root.
//!
//! Commands given to `exec` are always made harmless (`true` or a missing program)
//! after mutation: a fuzzer must not run random shell text as root.

mod common;
use common::*;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serde_json::{json, Value};

const LAB: &str = "t-fuzz";
const YAML: &str = "name: t-fuzz\nnodes:\n  a: {}\n  b: {}\n  w1: {}\n  w2: {}\nlinks:\n  - {endpoints: [a, b], name: ab}\nsegments:\n  air:\n    kind: wireless\n    members: [{node: w1, position: [0, 0]}, {node: w2, position: [100, 0]}]\n";

/// Seeded choices of requests: splitmix64 (vemu's seed mixer) over a counter.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(1);
        (vemu_radio::splitmix64(self.0) % n.max(1) as u64) as usize
    }
}

/// Values that probe the corners of every field's type and range.
fn nasty(rng: &mut Rng) -> Value {
    let deep = |open: &str, close: &str, n: usize| -> Value {
        serde_json::from_str(&format!("{}{}", open.repeat(n), close.repeat(n)))
            .unwrap_or(Value::Null)
    };
    match rng.below(24) {
        0 => Value::Null,
        1 => json!(true),
        2 => json!(-1),
        3 => json!(0),
        4 => json!(1e308),
        5 => json!(-1e308),
        6 => json!(u64::MAX),
        7 => json!(i64::MIN),
        8 => json!(0.5),
        9 => json!(""),
        10 => json!("x".repeat(100_000)),
        11 => json!("\u{0}"),
        12 => json!("99999999999999999999s"),
        13 => json!("-5ms"),
        14 => json!("1e308Tbit"),
        15 => json!("NaN%"),
        16 => json!("both"),
        17 => json!([]),
        18 => json!({}),
        19 => deep("[", "]", 64),
        20 => json!("é✓\u{feff}"),
        21 => json!("100%"),
        22 => json!(1e-300),
        _ => json!(4_294_967_296u64),
    }
}

/// A random change to a JSON value: replace, remove or add a field (or an element).
fn mutate_value(rng: &mut Rng, v: &mut Value) {
    match v {
        Value::Object(m) if !m.is_empty() && rng.below(4) != 0 => {
            let keys: Vec<String> = m.keys().cloned().collect();
            let k = keys[rng.below(keys.len())].clone();
            match rng.below(4) {
                0 => {
                    m.remove(&k);
                }
                1 => mutate_value(rng, m.get_mut(&k).unwrap()),
                _ => {
                    m.insert(k, nasty(rng));
                }
            }
        }
        Value::Object(m) => {
            let k = ["extra", "direction", "up", "speed", "stream", "", "x"][rng.below(7)];
            m.insert(k.to_string(), nasty(rng));
        }
        Value::Array(a) if !a.is_empty() => {
            let i = rng.below(a.len());
            a[i] = nasty(rng);
        }
        other => *other = nasty(rng),
    }
}

/// Byte-level damage to a request body.
fn mutate_bytes(rng: &mut Rng, s: &mut Vec<u8>) {
    const TOKENS: &[&str] = &[
        "{", "}", "[", "]", ",", ":", "\"", "\\", "\\u0000", "null", "1e999", "-", "\u{feff}", "é",
        "\u{0}",
    ];
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(s.len() + 1);
        match rng.below(4) {
            0 if !s.is_empty() => {
                let i = rng.below(s.len());
                s[i] ^= 1 << rng.below(8);
            }
            1 => {
                let t = TOKENS[rng.below(TOKENS.len())].as_bytes();
                s.splice(at..at, t.iter().copied());
            }
            2 => s.truncate(at),
            _ => {
                let end = (at + rng.below(8)).min(s.len());
                s.drain(at..end);
            }
        }
    }
}

/// `exec` runs only `true` or a program that does not exist, whatever the mutation did.
fn harmless_exec(body: &[u8]) -> Option<Vec<u8>> {
    let mut v: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        // Not JSON: refused before anything runs.
        Err(_) => return Some(body.to_vec()),
    };
    if let Some(cmd) = v.get_mut("cmd") {
        let safe = |s: &str| s == "true" || s == "/nonexistent/vemu-fuzz";
        match cmd {
            Value::String(s) if !safe(s) => *cmd = json!("true"),
            Value::Array(a) if a.iter().any(|x| !x.as_str().is_some_and(safe)) => {
                *cmd = json!(["/nonexistent/vemu-fuzz", "x"])
            }
            _ => {}
        }
    }
    // A shell cannot come back through `stdin` of `true` either; keep runs short.
    if v.get("timeout_s").and_then(Value::as_f64).is_some_and(|t| t > 5.0) {
        v["timeout_s"] = json!(5);
    }
    serde_json::to_vec(&v).ok()
}

/// Send one request over the lab's socket; the status code, or `None` if the connection
/// ended without an answer. Streaming answers are cut after their head.
fn request(method: &str, path: &str, body: &[u8]) -> (Option<u16>, String) {
    let mut s = UnixStream::connect(format!("/run/vemu/{LAB}/api.sock")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let head = format!("{method} {path} HTTP/1.1\r\nHost: vemu\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
    let _ = s.write_all(head.as_bytes()).and_then(|_| s.write_all(body));
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
        let text = String::from_utf8_lossy(&got);
        // Event and capture streams do not end: the head (and an error body) is enough.
        if text.contains("\r\n\r\n")
            && (text.contains("text/event-stream") || text.contains("application/x-pcapng"))
        {
            break;
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    let code = text.strip_prefix("HTTP/1.1 ").and_then(|r| r.get(..3)).and_then(|c| c.parse().ok());
    (code, text)
}

/// Path segments: real names, and names that are not.
fn name(rng: &mut Rng, real: &[&str]) -> String {
    match rng.below(8) {
        0 => "..".into(),
        1 => "%00".into(),
        2 => "x".repeat(5000),
        3 => "a%2Fb".into(),
        4 => "%C3%A9%E2%9C%93".into(),
        _ => real[rng.below(real.len())].to_string(),
    }
}

fn rounds(default: usize) -> usize {
    std::env::var("VEMU_FUZZ_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn api_survives_mutated_requests() {
    let _g = serial();
    let lab = Lab::up(LAB, YAML);
    let daemon = lab.status()["pid"].as_u64().unwrap();
    let seeds: Vec<(&str, &str, Value)> = vec![
        (
            "PATCH",
            "/v1/links/{link}",
            json!({"delay": "5ms", "jitter": "1ms", "loss": "1%", "bandwidth": "10Mbit", "direction": "forward", "queue": "100", "up": true}),
        ),
        ("POST", "/v1/links/{link}/down", json!({})),
        ("POST", "/v1/links/{link}/up", json!({})),
        ("POST", "/v1/nodes/{wnode}/move", json!({"x": 50.0, "y": 10.0, "speed": 5.0})),
        ("POST", "/v1/nodes/{node}/stop", json!({})),
        ("POST", "/v1/nodes/{node}/start", json!({})),
        (
            "POST",
            "/v1/nodes/{node}/exec",
            json!({"cmd": ["true"], "timeout_s": 2, "stdin": "x", "stream": false, "max_output_bytes": 100}),
        ),
        (
            "POST",
            "/v1/traffic",
            json!({"from": "a", "to": "b", "size_bytes": 100, "rate_pps": 10.0, "count": 3}),
        ),
        ("GET", "/v1/nodes/{node}", json!(null)),
        ("GET", "/v1/segments/{segment}", json!(null)),
        ("GET", "/v1/stats", json!(null)),
        ("GET", "/v1/events?stats={query}", json!(null)),
        ("GET", "/v1/capture?iface={node}&count=1&filter={query}", json!(null)),
        // The web interface: login links, the terminal's WebSocket asked without the
        // upgrade and with wild sizes, the login with forged secrets.
        ("POST", "/v1/ui", json!({})),
        ("GET", "/v1/nodes/{node}/shell?rows={query}&cols={query}", json!(null)),
        ("GET", "/ui/login?once={query}", json!(null)),
        ("GET", "/ui/", json!(null)),
        ("POST", "/ui/session", json!({"once": "00ff00ff"})),
        // The node panel's log, the timeline, the editor's checker and importer (not
        // its "up": the fuzzer would start labs).
        ("GET", "/v1/nodes/{node}/log?bytes={query}", json!(null)),
        ("GET", "/v1/timeline", json!(null)),
        ("GET", "/v1/convergence", json!(null)),
        (
            "POST",
            "/v1/scenario/check",
            json!({"yaml": "name: x\nnodes: {a: {}, b: {}}\nlinks: [{endpoints: [a, b], delay: 5ms}]\n", "file": "x.yaml"}),
        ),
        (
            "POST",
            "/v1/scenario/import",
            json!({"graphml": "<graphml><graph edgedefault='undirected'><node id='0'/><node id='1'/><edge source='0' target='1'/></graph></graphml>", "file": "t.graphml"}),
        ),
    ];
    let queries = [
        "1s",
        "0",
        "100",
        "1ns",
        "99999999999999999999s",
        "icmp",
        "tcp%20port%2080",
        "%28%28%28",
        "x",
        "",
    ];
    let mut rng = Rng(0x5eed_ab1e);
    let mut seen = std::collections::BTreeMap::<u16, usize>::new();
    for round in 0..rounds(600) {
        let (method, template, seed) = &seeds[rng.below(seeds.len())];
        let path = template
            .replace("{link}", &name(&mut rng, &["ab", "a:eth0", "air:w1"]))
            .replace("{wnode}", &name(&mut rng, &["w1", "w2", "a"]))
            .replace("{node}", &name(&mut rng, &["a", "b", "w1"]))
            .replace("{segment}", &name(&mut rng, &["air"]))
            .replace("{query}", queries[rng.below(queries.len())]);
        let body: Vec<u8> = if seed.is_null() {
            Vec::new()
        } else {
            let mut v = seed.clone();
            for _ in 0..rng.below(3) {
                mutate_value(&mut rng, &mut v);
            }
            let mut b = serde_json::to_vec(&v).unwrap();
            if rng.below(3) == 0 {
                mutate_bytes(&mut rng, &mut b);
            }
            if template.ends_with("/exec") {
                match harmless_exec(&b) {
                    Some(b) => b,
                    None => continue,
                }
            } else {
                b
            }
        };
        let (code, answer) = request(method, &path, &body);
        let Some(code) = code else {
            panic!(
                "round {round}: {method} {path} with {:?}: no answer",
                String::from_utf8_lossy(&body[..body.len().min(300)])
            );
        };
        assert!(
            code < 500,
            "round {round}: {method} {path} with {:?}: {}",
            String::from_utf8_lossy(&body[..body.len().min(300)]),
            &answer[..answer.len().min(600)]
        );
        if code >= 400 && code != 405 {
            assert!(
                answer.contains("\"error\""),
                "round {round}: an error without a message: {}",
                &answer[..answer.len().min(600)]
            );
        }
        *seen.entry(code).or_default() += 1;
    }
    eprintln!("answers by status: {seen:?}");
    assert!(
        seen.get(&200).is_some_and(|&n| n > 0) && seen.get(&400).is_some_and(|&n| n > 0),
        "the fuzzer reached both valid and invalid requests: {seen:?}"
    );
    // Still the same controller, and the lab still carries traffic once put right.
    assert_eq!(lab.status()["pid"].as_u64(), Some(daemon));
    for node in ["a", "b"] {
        let (code, _) = request("POST", &format!("/v1/nodes/{node}/start"), b"{}");
        assert_eq!(code, Some(200));
    }
    let reset = br#"{"delay": "0ms", "jitter": "0ms", "loss": "0%", "bandwidth": "unlimited", "queue": "1000", "duplicate": "0%", "corrupt": "0%", "reorder": "0%", "up": true}"#;
    let (code, answer) = request("PATCH", "/v1/links/ab", reset);
    assert_eq!(code, Some(200), "{answer}");
    let o = lab.exec("a", &["ping", "-c", "3", "-i", "0.2", "-W", "2", "b"]);
    assert!(o.status.success(), "{}", text(&o));
}
