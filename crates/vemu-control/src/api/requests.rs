//! The API's request bodies, read and checked without a lab: each function takes the
//! body's bytes as they came off the wire and gives what the handler carries out, or the
//! 400 answer. Nothing here touches the lab, so the coverage-guided fuzzer
//! (`fuzz/fuzz_targets/api_bodies.rs`) runs these exactly as the handlers do.

use serde::Deserialize;
use serde_json::Value;
use vemu_link::ImpairmentsPatch;
use vemu_scenario::Direction;

use super::ApiError;
use crate::lab::LimitsPatch;
use vemu_machine::traffic::CbrRequest;

/// A JSON request body, whatever its Content-Type says; an empty body is `{}`.
pub(crate) fn parse_body<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) { b"{}" } else { bytes };
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("bad request body: {e}")))
}

/// `PATCH /v1/links/{link}`, read.
#[derive(Debug)]
pub struct LinkChange {
    pub direction: Direction,
    /// Bring the link up or down.
    pub up: Option<bool>,
    /// New impairments, if the body names any.
    pub patch: Option<ImpairmentsPatch>,
}

/// `{"direction": "both|forward|reverse", "up": bool, "delay": "20ms", "loss": "1%", ...}`
/// — impairments written as in a scenario file, checked as `vemu link set` checks them.
pub fn link_change(body: &[u8]) -> Result<LinkChange, ApiError> {
    let Value::Object(fields) = parse_body(body)? else {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    };
    let mut direction = Direction::Both;
    let mut up = None;
    let mut pairs: Vec<(String, String)> = Vec::new();
    for (k, v) in fields {
        match k.as_str() {
            "direction" => {
                direction = serde_json::from_value(v.clone()).map_err(|_| {
                    ApiError::bad_request(format!(
                        "direction must be \"both\", \"forward\" or \"reverse\", got {v}"
                    ))
                })?
            }
            "up" => {
                up = Some(v.as_bool().ok_or_else(|| {
                    ApiError::bad_request(format!("up must be true or false, got {v}"))
                })?)
            }
            _ => {
                let text = match v {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                pairs.push((k, text));
            }
        }
    }
    let refs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let patch = vemu_scenario::impairment_patch(&refs)
        .map_err(|m| ApiError::bad_request(m.replace("--", "")))?;
    if refs.is_empty() && up.is_none() {
        return Err(ApiError::bad_request(
            "nothing to change: give 'up' or impairments such as \"delay\": \"20ms\"",
        ));
    }
    Ok(LinkChange { direction, up, patch: (!refs.is_empty()).then_some(patch) })
}

/// `PATCH /v1/nodes/{node}`: `{"cpu": 0.5, "memory": "256MiB", "pids": 200}`, any of
/// them; `null` lifts that limit.
pub fn node_limits(body: &[u8]) -> Result<LimitsPatch, ApiError> {
    let v: Value = parse_body(body)?;
    let obj = v
        .as_object()
        .ok_or_else(|| ApiError::bad_request("expected a JSON object with cpu, memory or pids"))?;
    let mut patch = LimitsPatch::default();
    for (k, x) in obj {
        let bad =
            |what: &str| ApiError::bad_request(format!("'{k}': expected {what} or null, got {x}"));
        match k.as_str() {
            "cpu" => {
                patch.cpu_cores = Some(if x.is_null() {
                    None
                } else {
                    Some(x.as_f64().ok_or_else(|| bad("cores (a number)"))?)
                })
            }
            "memory" => {
                patch.memory_bytes =
                    Some(match x {
                        Value::Null => None,
                        Value::String(s) => Some(
                            vemu_scenario::units::size_bytes(s)
                                .map_err(|e| ApiError::bad_request(format!("'memory': {e}")))?,
                        ),
                        _ => Some(x.as_u64().ok_or_else(|| {
                            bad("bytes (an integer, or a size such as \"256MiB\")")
                        })?),
                    })
            }
            "pids" => {
                patch.pids = Some(if x.is_null() {
                    None
                } else {
                    Some(x.as_u64().ok_or_else(|| bad("an integer"))?)
                })
            }
            _ => {
                return Err(ApiError::bad_request(format!(
                    "unknown field '{k}': expected cpu, memory or pids"
                )))
            }
        }
    }
    Ok(patch)
}

/// Body of `POST /v1/nodes/{node}/move`: where to (m) and, optionally, how fast (m/s).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Move {
    pub x: f64,
    pub y: f64,
    pub speed: Option<f64>,
}

/// (The lab checks the numbers: the time line moves nodes too.)
pub fn node_move(body: &[u8]) -> Result<Move, ApiError> {
    parse_body(body)
}

/// Body of `POST /v1/traffic`: a constant-bit-rate flow, its numbers checked.
pub fn traffic(body: &[u8]) -> Result<CbrRequest, ApiError> {
    let r: CbrRequest = parse_body(body)?;
    r.check().map_err(ApiError::bad_request)?;
    Ok(r)
}

/// Body of `POST /v1/nodes/{node}/exec`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExecBody {
    /// A program and its arguments, or one string run by `/bin/sh -c`.
    cmd: ExecCmd,
    /// Seconds before the command is killed (default 60).
    #[serde(default)]
    timeout_s: Option<f64>,
    /// Text for its standard input.
    #[serde(default)]
    stdin: Option<String>,
    /// Answer with a stream of JSON lines as the command runs (`{"stdout": "..."}`,
    /// `{"stderr": "..."}`, and last `{"exit": N, "timed_out": bool}`) instead of one
    /// object at the end.
    #[serde(default)]
    stream: bool,
    /// Bytes of stdout and of stderr kept in a (non-streamed) answer; the rest is read
    /// and dropped, the answer says `truncated`. Default 16 MiB, at most 256 MiB.
    #[serde(default)]
    max_output_bytes: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ExecCmd {
    Argv(Vec<String>),
    Shell(String),
}

/// Output kept per stream in an exec answer unless the request says otherwise.
pub const DEFAULT_EXEC_OUTPUT_BYTES: u64 = 16 << 20;
const MAX_EXEC_OUTPUT_BYTES: u64 = 256 << 20;

/// A command to run in a node, checked.
#[derive(Debug)]
pub struct Exec {
    /// Program and arguments (a shell string becomes `/bin/sh -c STRING`); never empty.
    pub argv: Vec<String>,
    pub timeout_s: f64,
    pub stdin: String,
    pub stream: bool,
    pub max_output_bytes: u64,
}

pub fn exec(body: &[u8]) -> Result<Exec, ApiError> {
    let req: ExecBody = parse_body(body)?;
    let argv = match req.cmd {
        ExecCmd::Argv(v) if v.is_empty() => return Err(ApiError::bad_request("cmd is empty")),
        ExecCmd::Argv(v) => v,
        ExecCmd::Shell(s) => vec!["/bin/sh".into(), "-c".into(), s],
    };
    let timeout_s = req.timeout_s.unwrap_or(60.0);
    if !(timeout_s > 0.0 && timeout_s <= 86_400.0) {
        return Err(ApiError::bad_request(format!(
            "timeout_s must be between 0 and 86400, got {timeout_s}"
        )));
    }
    let max_output_bytes = req.max_output_bytes.unwrap_or(DEFAULT_EXEC_OUTPUT_BYTES);
    if max_output_bytes > MAX_EXEC_OUTPUT_BYTES {
        return Err(ApiError::bad_request(format!(
            "max_output_bytes must be at most {MAX_EXEC_OUTPUT_BYTES}, got {max_output_bytes}"
        )));
    }
    Ok(Exec {
        argv,
        timeout_s,
        stdin: req.stdin.unwrap_or_default(),
        stream: req.stream,
        max_output_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_change_reads_impairments_and_state() {
        let c = link_change(br#"{"direction": "forward", "delay": "20ms", "loss": "1%"}"#).unwrap();
        assert_eq!(c.direction, Direction::Forward);
        assert_eq!(c.up, None);
        let p = c.patch.unwrap();
        assert_eq!(p.delay_ns, Some(20_000_000));
        assert!(p.loss.is_some());
        let c = link_change(br#"{"up": false}"#).unwrap();
        assert!(c.patch.is_none() && c.up == Some(false));
        let c = link_change(br#"{"bandwidth": "50Mbit", "shaper": "kernel"}"#).unwrap();
        let p = c.patch.unwrap();
        assert_eq!(
            (p.rate_bps, p.shaper),
            (Some(Some(50_000_000)), Some(vemu_link::Shaper::Kernel))
        );
        for (body, says) in [
            (&b"[]"[..], "JSON object"),
            (b"", "nothing to change"),
            (b"{\"direction\": \"up\"}", "direction must be"),
            (b"{\"up\": 1}", "up must be"),
            (b"{\"delay\": \"-1ms\"}", "delay"),
            (b"{\"loss\": 1}", "needs a % sign"),
            (b"{\"colour\": \"red\"}", "colour"),
            (b"{\"shaper\": \"htb\"}", "not a shaper"),
            (b"{\"shaper\": 1}", "shaper"),
            (b"{\"delay\": ", "bad request body"),
        ] {
            let e = link_change(body).unwrap_err();
            assert_eq!(e.status, axum::http::StatusCode::BAD_REQUEST);
            assert!(e.message.contains(says), "{}: {}", String::from_utf8_lossy(body), e.message);
        }
    }

    #[test]
    fn exec_bodies_are_checked() {
        let e = exec(br#"{"cmd": "echo hi", "stdin": "x"}"#).unwrap();
        assert_eq!(e.argv, ["/bin/sh", "-c", "echo hi"]);
        assert_eq!(
            (e.timeout_s, e.stdin.as_str(), e.max_output_bytes),
            (60.0, "x", DEFAULT_EXEC_OUTPUT_BYTES)
        );
        for (body, says) in [
            (&br#"{"cmd": []}"#[..], "cmd is empty"),
            (br#"{"cmd": ["x"], "timeout_s": 0}"#, "timeout_s"),
            (br#"{"cmd": ["x"], "timeout_s": 1e300}"#, "timeout_s"),
            (br#"{"cmd": ["x"], "max_output_bytes": 1000000000000}"#, "max_output_bytes"),
            (br#"{"cmd": ["x"], "shell": true}"#, "unknown field"),
        ] {
            assert!(
                exec(body).unwrap_err().message.contains(says),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn moves_limits_and_flows_are_checked() {
        assert!(node_move(br#"{"x": 1, "z": 2}"#).unwrap_err().message.contains("unknown field"));
        assert_eq!(node_move(br#"{"x": 1, "y": 2}"#).unwrap().y, 2.0);
        let l = node_limits(br#"{"cpu": null, "memory": "256MiB"}"#).unwrap();
        assert_eq!(
            (l.cpu_cores, l.memory_bytes, l.pids),
            (Some(None), Some(Some(256 << 20)), None)
        );
        assert!(node_limits(br#"{"gpu": 1}"#).unwrap_err().message.contains("unknown field 'gpu'"));
        let flow = br#"{"from": "a", "to": "b", "size_bytes": 10, "rate_pps": 5}"#;
        assert!(traffic(flow).unwrap_err().message.contains("size must be"));
    }
}
