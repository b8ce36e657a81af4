//! `vemu link`: a link's impairments and state, through the lab's API.

use super::*;

pub(crate) fn link(cmd: LinkCmd) -> Result<()> {
    let (lab, link, verb, body) = match cmd {
        LinkCmd::Set {
            link,
            direction,
            bandwidth,
            delay,
            jitter,
            loss,
            duplicate,
            corrupt,
            reorder,
            queue,
            qos,
            shaper,
            lab,
        } => {
            let given = [
                ("bandwidth", bandwidth),
                ("delay", delay),
                ("jitter", jitter),
                ("loss", loss),
                ("duplicate", duplicate),
                ("corrupt", corrupt),
                ("reorder", reorder),
                ("queue", queue),
                ("qos", qos),
                ("shaper", shaper),
            ];
            let mut body = serde_json::Map::new();
            for (k, v) in given {
                if let Some(v) = v {
                    body.insert(k.into(), json!(v));
                }
            }
            if body.is_empty() {
                return Err(user("nothing to change: give at least one of --bandwidth, --delay, --jitter, --loss, --duplicate, --corrupt, --reorder, --queue, --qos, --shaper"));
            }
            let direction = match direction {
                DirArg::Both => "both",
                DirArg::Forward => "forward",
                DirArg::Reverse => "reverse",
            };
            body.insert("direction".into(), json!(direction));
            (lab.lab, link, None, serde_json::Value::Object(body))
        }
        LinkCmd::Down { link, lab } => (lab.lab, link, Some("down"), json!({})),
        LinkCmd::Up { link, lab } => (lab.lab, link, Some("up"), json!({})),
    };
    let lab = resolve_lab(lab)?;
    let c = connect(&lab)?;
    let path = format!("/v1/links/{}", percent_encode(&link));
    match verb {
        Some(v) => c.post(&format!("{path}/{v}"), &body)?,
        None => c.patch(&path, &body)?,
    };
    Ok(())
}
