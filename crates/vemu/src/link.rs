//! `vemu link`: a link's impairments and state, through the lab's API.

use anyhow::Result;
use serde_json::json;
use vemu_control::percent_encode;

use crate::cli::{DirArg, LinkCmd};
use crate::lab::{connect, resolve_lab, user};

pub(crate) fn link(cmd: LinkCmd) -> Result<()> {
    let (lab, link, verb, body) = match cmd {
        LinkCmd::Set {
            link,
            direction,
            bandwidth,
            delay,
            jitter,
            loss,
            ber,
            phantom,
            duplicate,
            corrupt,
            reorder,
            queue,
            qos,
            shaper,
            flows,
            lab,
        } => {
            let given = [
                ("bandwidth", bandwidth),
                ("delay", delay),
                ("jitter", jitter),
                ("loss", loss),
                ("ber", ber),
                ("phantom", phantom),
                ("duplicate", duplicate),
                ("corrupt", corrupt),
                ("reorder", reorder),
                ("queue", queue),
                ("qos", qos),
                ("shaper", shaper),
                ("flows", flows),
            ];
            let mut body = serde_json::Map::new();
            for (k, v) in given {
                if let Some(v) = v {
                    body.insert(k.into(), json!(v));
                }
            }
            if body.is_empty() {
                let flags: Vec<String> = vemu_scenario::RUNTIME_IMPAIRMENT_KEYS
                    .iter()
                    .map(|k| format!("--{k}"))
                    .collect();
                return Err(user(format!(
                    "nothing to change: give at least one of {}",
                    flags.join(", ")
                )));
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

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// `vemu link set` has one flag per impairment a running link takes, and no other
    /// but the direction and the lab.
    #[test]
    fn link_set_has_a_flag_for_each_runtime_impairment() {
        let cli = crate::cli::Cli::command();
        let set = cli.find_subcommand("link").and_then(|l| l.find_subcommand("set")).unwrap();
        let mut flags: Vec<&str> = set
            .get_arguments()
            .filter_map(|a| a.get_long())
            .filter(|l| !["direction", "lab"].contains(l))
            .collect();
        let mut keys = vemu_scenario::RUNTIME_IMPAIRMENT_KEYS.to_vec();
        flags.sort();
        keys.sort();
        assert_eq!(flags, keys);
    }
}
