//! Mutation fuzzing of the scenario and ns-2 parsers, bounded so that it runs in CI in
//! seconds: the example scenarios (and a few made here) are cut, spliced, duplicated and
//! bit-flipped with a seeded generator, and every result must be either a plan or a list
//! of errors — never a panic, never a hang. `VEMU_FUZZ_ROUNDS` runs it longer (bench/).

use std::path::Path;

use vemu_radio::ns2;
use vemu_scenario::load_str_in;

/// Seeded choices of mutations: splitmix64 (vemu's seed mixer) over a counter.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(1);
        (vemu_radio::splitmix64(self.0) % n.max(1) as u64) as usize
    }
}

fn rounds(default: usize) -> usize {
    std::env::var("VEMU_FUZZ_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Tokens that steer mutations towards the interesting corners of the schema.
const TOKENS: &[&str] = &[
    "&a ",
    "*a",
    "<<: *a",
    "{",
    "}",
    "[",
    "]",
    ": ",
    "- ",
    "\n",
    "  ",
    "'",
    "\"",
    "~",
    "null",
    "99999999999999999999s",
    "-1ms",
    "1e308",
    "NaN",
    "150%",
    "1Tbit",
    "0",
    "eth0",
    "lo",
    "..",
    "n1",
    "kind: wireless",
    "kind: lan",
    "members: [",
    "endpoints: [",
    "loss: {model: gilbert-elliott, p: 1%}",
    "ramp: {from: {delay: 1ms}, to: {delay: 2ms}, over: 1s}",
    "every: 10ms",
    "mtu: 68",
    "vlan: 4095",
    "ipv4: 10.0.0.0/31",
    "routing: static",
    "files: {/etc/x: y}",
    "trace: /dev/null",
    "\u{0}",
    "\u{feff}",
    "é",
];

fn mutate(rng: &mut Rng, corpus: &[String]) -> String {
    let mut s: Vec<u8> = corpus[rng.below(corpus.len())].clone().into_bytes();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(s.len() + 1);
        match rng.below(6) {
            0 if !s.is_empty() => {
                let i = rng.below(s.len());
                s[i] ^= 1 << rng.below(8);
            }
            1 => {
                let t = TOKENS[rng.below(TOKENS.len())].as_bytes();
                s.splice(at..at, t.iter().copied());
            }
            2 if at < s.len() => {
                let end = (at + rng.below(40)).min(s.len());
                s.drain(at..end);
            }
            3 => {
                // Splice in a line of another scenario.
                let other = &corpus[rng.below(corpus.len())];
                let lines: Vec<&str> = other.lines().collect();
                let line = format!("{}\n", lines[rng.below(lines.len())]);
                s.splice(at..at, line.bytes());
            }
            4 if !s.is_empty() => {
                let start = rng.below(s.len());
                let end = (start + rng.below(200)).min(s.len());
                let copy = s[start..end].to_vec();
                s.splice(at..at, copy);
            }
            _ => s.truncate(at),
        }
    }
    String::from_utf8_lossy(&s).into_owned()
}

#[test]
fn mutated_scenarios_never_panic() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut corpus: Vec<String> = std::fs::read_dir(&examples)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "yaml"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    corpus.push("name: t\nnodes: {a: {}, b: {}, c: {}}\nlinks:\n  - {endpoints: [a, b], delay: 5ms, loss: 1%, jitter: {amount: 1ms, distribution: pareto}}\nsegments:\n  s: {kind: lan, members: [a, {node: c, vlan: 10}], capacity: 1Gbit}\nevents:\n  - {at: 1s, link: a:b, set: {delay: 9ms}}\n  - {every: 1s, until: 5s, link: a:b, cycle: [{bandwidth: 1Mbit}, {bandwidth: 2Mbit}]}\n".into());
    assert!(corpus.len() >= 5);
    let mut rng = Rng(0x5e_ed0f_f022);
    let (mut ok, mut refused) = (0, 0);
    for _ in 0..rounds(3000) {
        let text = mutate(&mut rng, &corpus);
        match load_str_in(&text, "fuzz.yaml", "fuzz", None, Some(&examples)) {
            Ok(_) => ok += 1,
            Err(e) => {
                // Every error names where it is.
                assert!(e.to_string().starts_with("fuzz.yaml"), "{e}");
                refused += 1;
            }
        }
    }
    // Both outcomes happen: the mutations are neither all harmless nor all fatal.
    assert!(ok > 0 && refused > 0, "ok {ok}, refused {refused}");
}

#[test]
fn mutated_ns2_traces_never_panic() {
    let corpus = vec![
        "$node_(0) set X_ 10.0\n$node_(0) set Y_ 20.0\n$node_(1) set X_ 5\n$ns_ at 2.5 \"$node_(0) setdest 100.0 50.0 3.0\"\n$ns_ at 1 \"$node_(1) setdest 1 2 0.5\"\n".to_string(),
        "# BonnMotion\n$node_(2) set Z_ 0.0\n$ns_ at 0.0 \"$node_(2) setdest 1e3 1e3 20\"\n".to_string(),
    ];
    let mut rng = Rng(0xf_eed2);
    for _ in 0..rounds(3000) {
        let text = mutate(&mut rng, &corpus);
        if let Ok(traces) = ns2::parse(&text, 64) {
            assert!(traces.len() <= 64);
            for t in traces {
                let p = t.position_at(u64::MAX / 2);
                let _ = (p.x, p.y);
            }
        }
    }
}
