//! Finding a lab and talking to it: its name when left out, its API client, its plan;
//! the user's mistakes (exit status 2) and the need for root.

use anyhow::{bail, Context, Result};
use serde_json::json;
use vemu_control::labs::LabPaths;
use vemu_control::Client;
use vemu_scenario::Plan;

/// A mistake of the user's: reported plainly, exit status 2.
#[derive(Debug)]
pub(crate) struct UserError(String);

impl std::fmt::Display for UserError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UserError {}

pub(crate) fn user(msg: impl Into<String>) -> anyhow::Error {
    UserError(msg.into()).into()
}

pub(crate) fn need_root() -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("vemu creates namespaces and devices and must run as root");
    }
    Ok(())
}

/// The lab a command acts on: the one named, or the only one running.
pub(crate) fn resolve_lab(explicit: Option<String>) -> Result<String> {
    if let Some(l) = explicit {
        vemu_scenario::valid_lab_name(&l).map_err(user)?;
        return Ok(l);
    }
    let (mut running, _) = vemu_control::list_labs();
    // A machine of labs across machines: the labs of the shares its agent holds.
    for (name, held) in vemu_control::list_shares() {
        if let (Some((lab, _)), true) = (vemu_control::labs::share_of(&name), held) {
            running.push(lab.to_string());
        }
    }
    running.sort();
    running.dedup();
    match running.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(user("no lab is running")),
        many => Err(user(format!(
            "{} labs are running ({}); say which with --lab",
            many.len(),
            many.join(", ")
        ))),
    }
}

/// Connect to a running lab; a lab that is not running is the user's mistake.
pub(crate) fn connect(lab: &str) -> Result<Client> {
    Client::connect(lab).map_err(|e| user(e.to_string()))
}

/// `argv` run in `node` through the lab's API (`POST /v1/nodes/{node}/exec`), for up to
/// `timeout_s`: its answer (`exit`, `stdout`, `stderr`, `truncated`, `timed_out`).
pub(crate) fn exec_in<S: AsRef<str>>(
    c: &Client,
    node: &str,
    argv: &[S],
    timeout_s: u64,
) -> Result<serde_json::Value> {
    let argv: Vec<&str> = argv.iter().map(AsRef::as_ref).collect();
    let body = json!({"cmd": argv, "timeout_s": timeout_s});
    c.post(&format!("/v1/nodes/{}/exec", vemu_control::percent_encode(node)), &body)
}

/// How many nodes [`ask_nodes`] asks at once: most of a command run in a node through
/// the API is waiting (for the node's program, its namespace, the controller), and a
/// thousand routers asked one after another took tens of seconds.
const NODES_AT_ONCE: usize = 8;

/// `ask(client, item)` for each of `items`, [`NODES_AT_ONCE`] at a time, each worker
/// on its own connection to lab `lab`; the answers in the items' order.
pub(crate) fn ask_nodes<I: Sync, T: Send>(
    lab: &str,
    items: &[I],
    ask: impl Fn(&Client, &I) -> T + Sync,
) -> Result<Vec<T>> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let ask = &ask;
    let next = &next;
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..NODES_AT_ONCE.min(items.len()))
            .map(|_| {
                s.spawn(move || -> Result<Vec<(usize, T)>> {
                    let c = connect(lab)?;
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(i) else { return Ok(out) };
                        out.push((i, ask(&c, item)));
                    }
                })
            })
            .collect();
        let mut all = Vec::with_capacity(items.len());
        for w in workers {
            all.extend(w.join().map_err(|_| anyhow::anyhow!("a worker asking the nodes failed"))??);
        }
        all.sort_by_key(|(i, _)| *i);
        Ok(all.into_iter().map(|(_, t)| t).collect())
    })
}

pub(crate) fn load_plan(lab: &str) -> Result<Plan> {
    let path = LabPaths::new(lab).plan();
    let text = std::fs::read(&path)
        .map_err(|_| user(format!("lab '{lab}' is not running (see 'vemu ls')")))?;
    serde_json::from_slice(&text).context("reading the lab's plan")
}

/// Take a lab down through its controller, and wait until the controller has given the
/// lab's name up (it answers once the lab is down, then exits): an `up` of the same
/// name right after must not find it still taken (the operator's "bring it up anew" did).
pub(crate) fn take_down(lab: &str) -> Result<()> {
    connect(lab)?.post("/v1/down", &json!({}))?;
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while vemu_control::labs::LabLock::held(lab) && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Ok(())
}
