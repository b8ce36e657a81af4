//! Commands run in a node on the API's behalf (`POST /v1/nodes/{node}/exec`, and the
//! agent's route for nodes of its machine): one answer at the end, or a stream of JSON
//! lines as the command runs.

use std::convert::Infallible;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::{blocking, ApiError};
use crate::LockExt;
use vemu_machine::door::HereDoor;

/// Sets a flag when dropped: the handler's future is dropped when its client goes away.
struct Gone(Arc<std::sync::atomic::AtomicBool>);
impl Drop for Gone {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Run a command in a node of this machine, wait for it (up to the timeout) and return
/// its exit status and output.
pub(crate) async fn run(door: HereDoor, body: Bytes) -> Result<Response, ApiError> {
    let super::requests::Exec {
        argv,
        timeout_s: timeout,
        stdin: input,
        stream,
        max_output_bytes: cap,
    } = super::requests::exec(&body)?;
    let gone = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let _gone = Gone(gone.clone());
    let (stream_tx, stream_rx) = if stream {
        let (t, r) = tokio::sync::mpsc::channel::<Result<Bytes, Infallible>>(256);
        (Some(t), Some(r))
    } else {
        (None, None)
    };
    let out = blocking(move || {
        let entry = door.open().map_err(|e| ApiError::not_found(format!("{e:#}")))?;
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .current_dir(door.node_dir())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        // Its own process group, so that a timeout or a client that goes away ends
        // everything the command started.
        vemu_machine::supervise::own_session(&mut cmd);
        let child = match entry.spawn(&mut cmd, vemu_machine::spawn_waited) {
            Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(json!({"exit": 127, "stdout": "", "stderr": format!("{}: command not found\n", argv[0]), "timed_out": false}))
            }
            Err(e) => return Err(ApiError::internal(format!("running {}: {e}", argv[0]))),
        };
        if let Some(lines) = stream_tx {
            return Ok(stream_child(child, input, timeout, lines));
        }
        // (bytes kept, bytes seen) per stream: the command is never blocked on a full
        // pipe, and never costs more than `cap` of memory per stream.
        type Kept = Arc<Mutex<(Vec<u8>, u64)>>;
        let out: [Kept; 2] = Default::default();
        let bufs = out.clone();
        let (code, timed_out) = run_child(child, input, timeout, move |k, b| {
            let mut o = bufs[k].locked();
            let room = (cap as usize).saturating_sub(o.0.len());
            o.0.extend_from_slice(&b[..b.len().min(room)]);
            o.1 += b.len() as u64;
            true
        }, move || gone.load(std::sync::atomic::Ordering::Relaxed));
        let mut truncated = false;
        let mut text = |k: usize| {
            let o = out[k].locked();
            let mut t = String::from_utf8_lossy(&o.0).into_owned();
            if o.1 > o.0.len() as u64 {
                truncated = true;
                t += &format!("\n[vemu: output cut at {cap} bytes; {} more bytes dropped]\n", o.1 - o.0.len() as u64);
            }
            t
        };
        let (stdout, stderr) = (text(0), text(1));
        Ok(json!({"exit": code, "stdout": stdout, "stderr": stderr, "timed_out": timed_out, "truncated": truncated}))
    })
    .await?;
    let ndjson = |body: axum::body::Body| {
        ([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response()
    };
    Ok(match stream_rx {
        // Not started (e.g. command not found): its result as the stream's lines.
        Some(_) if out.get("streaming").is_none() => {
            let text = format!(
                "{}\n{}\n",
                json!({"stderr": out["stderr"]}),
                json!({"exit": out["exit"], "timed_out": false})
            );
            ndjson(axum::body::Body::from(text))
        }
        Some(rx) => ndjson(super::body_of(rx)),
        None => Json(out).into_response(),
    })
}

/// Names of a command's output streams, as `run_child` numbers them.
const OUTPUTS: [&str; 2] = ["stdout", "stderr"];

/// Feed `input` to a started command, hand each chunk of its stdout (0) and stderr (1)
/// to `sink` as it comes (from reader threads; `false` stops reading), and wait for it:
/// killed after `timeout` seconds or once `cancelled()` says so. Returns its exit status
/// (128 + signal when killed) and whether the timeout killed it.
fn run_child(
    mut child: std::process::Child,
    input: String,
    timeout: f64,
    sink: impl Fn(usize, &[u8]) -> bool + Send + Sync + 'static,
    cancelled: impl Fn() -> bool,
) -> (i32, bool) {
    use std::io::Read;
    let mut stdin = child.stdin.take();
    let writer = std::thread::spawn(move || {
        if let Some(s) = stdin.as_mut() {
            let _ = std::io::Write::write_all(s, input.as_bytes());
        }
    });
    let sink = Arc::new(sink);
    let outputs: [Option<Box<dyn Read + Send>>; 2] = [
        child.stdout.take().map(|o| Box::new(o) as Box<dyn Read + Send>),
        child.stderr.take().map(|e| Box::new(e) as Box<dyn Read + Send>),
    ];
    let readers: Vec<std::thread::JoinHandle<()>> = outputs
        .into_iter()
        .enumerate()
        .filter_map(|(k, r)| r.map(|r| (k, r)))
        .map(|(k, mut r)| {
            let sink = sink.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(n) = r.read(&mut buf) {
                    if n == 0 || !sink(k, &buf[..n]) {
                        break;
                    }
                }
            })
        })
        .collect();
    let pid = child.id();
    let deadline = std::time::Instant::now() + Duration::from_secs_f64(timeout);
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) if cancelled() || std::time::Instant::now() >= deadline => {
                timed_out = !cancelled();
                // SAFETY: kill with a negative pid signals the child's process group.
                unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
                let _ = child.kill();
                break child.wait().ok();
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(_) => break None,
        }
    };
    vemu_machine::forget_waited(pid);
    for r in readers {
        let _ = r.join();
    }
    let _ = writer.join();
    (status.map_or(-1, vemu_machine::exit_code), timed_out)
}

/// Run a started command to its end, sending its output as JSON lines as it comes and
/// its exit status last.
fn stream_child(
    child: std::process::Child,
    input: String,
    timeout: f64,
    lines: tokio::sync::mpsc::Sender<Result<Bytes, Infallible>>,
) -> Value {
    let send = |tx: &tokio::sync::mpsc::Sender<Result<Bytes, Infallible>>, v: Value| {
        tx.blocking_send(Ok(Bytes::from(format!("{v}\n")))).is_ok()
    };
    std::thread::spawn(move || {
        let tx = lines.clone();
        let (code, timed_out) = run_child(
            child,
            input,
            timeout,
            move |k, b| send(&tx, json!({ OUTPUTS[k]: String::from_utf8_lossy(b) })),
            || lines.is_closed(),
        );
        send(&lines, json!({"exit": code, "timed_out": timed_out}));
    });
    json!({"streaming": true})
}
