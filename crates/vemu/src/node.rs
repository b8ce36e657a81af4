//! `vemu node`: a node's limits, stopping, starting and moving it.

use anyhow::{bail, Result};
use serde_json::json;
use vemu_control::percent_encode;

use crate::cli::NodeCmd;
use crate::lab::{connect, resolve_lab};
use crate::show::describe_limits;

/// `vemu node set`: a node's CPU, memory and process limits.
pub(crate) fn node_set(
    lab: Option<String>,
    node: &str,
    cpu: Option<String>,
    memory: Option<String>,
    pids: Option<String>,
) -> Result<()> {
    let mut body = serde_json::Map::new();
    let value = |v: &str,
                 number: fn(&str) -> Option<serde_json::Value>,
                 what: &str|
     -> Result<serde_json::Value> {
        match v {
            "none" => Ok(serde_json::Value::Null),
            _ => number(v)
                .ok_or_else(|| anyhow::anyhow!("{what}: expected a value or 'none', got '{v}'")),
        }
    };
    if let Some(c) = cpu {
        body.insert("cpu".into(), value(&c, |v| v.parse::<f64>().ok().map(|f| json!(f)), "--cpu")?);
    }
    if let Some(m) = memory {
        body.insert("memory".into(), value(&m, |v| Some(json!(v)), "--memory")?);
    }
    if let Some(p) = pids {
        body.insert(
            "pids".into(),
            value(&p, |v| v.parse::<u64>().ok().map(|n| json!(n)), "--pids")?,
        );
    }
    if body.is_empty() {
        bail!("nothing to change: give --cpu, --memory or --pids");
    }
    let lab = resolve_lab(lab)?;
    let v = connect(&lab)?
        .patch(&format!("/v1/nodes/{}", percent_encode(node)), &serde_json::Value::Object(body))?;
    println!(
        "node {node}: {}",
        describe_limits(&serde_json::from_value(v["limits"].clone()).unwrap_or_default())
    );
    Ok(())
}

/// `vemu node stop|start|move`.
pub(crate) fn node(cmd: NodeCmd) -> Result<()> {
    let (node, lab, verb, body) = match cmd {
        NodeCmd::Set { .. } => unreachable!("handled above"),
        NodeCmd::Stop { node, lab } => (node, lab, "stop", json!({})),
        NodeCmd::Start { node, lab } => (node, lab, "start", json!({})),
        NodeCmd::Move { node, to, speed, lab } => {
            (node, lab, "move", json!({"x": to.0, "y": to.1, "speed": speed}))
        }
    };
    let lab = resolve_lab(lab.lab)?;
    connect(&lab)?.post(&format!("/v1/nodes/{}/{verb}", percent_encode(&node)), &body)?;
    Ok(())
}
