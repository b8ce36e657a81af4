//! Commands that follow a running lab: `vemu stats` and `vemu capture`.

use std::io::Write;

use anyhow::{Context, Result};
use vemu_control::percent_encode;

use crate::cli::PointArg;
use crate::lab::{connect, resolve_lab, user};
use crate::stats;

/// `vemu stats`: the lab's counters every `interval`, as a table, JSON or CSV.
pub(crate) fn watch_stats(
    lab: Option<String>,
    interval: &str,
    json: bool,
    csv: Option<&std::path::Path>,
    count: Option<u64>,
) -> Result<()> {
    let lab = resolve_lab(lab)?;
    vemu_scenario::units::duration_ns(interval).map_err(|m| user(format!("--interval: {m}")))?;
    let client = connect(&lab)?;
    let mut sink = stats::Sink::new(json, csv, count)?;
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    match client.stream_to(
        &format!("/v1/events?stats={}", percent_encode(interval)),
        &mut sink,
        ctrl_c,
    ) {
        Err(e) if stats::is_done(&e) => {}
        r => r?,
    }
    Ok(())
}

/// `vemu capture`: frames of an interface (or a node's) as pcapng, to a file or stdout.
pub(crate) fn capture(
    lab: Option<String>,
    iface: &str,
    write: &str,
    points: &[PointArg],
    count: Option<u64>,
    filter: &[String],
) -> Result<()> {
    // (The filter takes the rest of the line: an option after it would be read as part
    // of it, and libpcap's "syntax error" would not say why.)
    // (A lone '-' or a negative number is the filter's own arithmetic.)
    let option = |w: &String| {
        w.starts_with('-') && !w[1..].starts_with(|c: char| c.is_ascii_digit()) && w.len() > 1
    };
    if let Some(opt) = filter.iter().find(|w| option(w)) {
        let words: Vec<&str> =
            filter.iter().take_while(|w| !option(w)).map(String::as_str).collect();
        return Err(user(format!(
            "'{opt}' comes after the filter: give options before it, e.g. vemu capture {iface} {opt} ... {}",
            words.join(" ")
        )));
    }
    let lab = resolve_lab(lab)?;
    let points: Vec<&str> = points
        .iter()
        .map(|p| match p {
            PointArg::After => "after",
            PointArg::Before => "before",
            PointArg::Drops => "drops",
            PointArg::Radio => "radio",
        })
        .collect();
    let mut q = format!("iface={}&point={}", percent_encode(iface), points.join(","));
    if !filter.is_empty() {
        q += &format!("&filter={}", percent_encode(&filter.join(" ")));
    }
    if let Some(c) = count {
        q += &format!("&count={c}");
    }
    let client = connect(&lab)?;
    let mut out: Box<dyn Write> = if write == "-" {
        Box::new(std::io::stdout())
    } else {
        Box::new(std::fs::File::create(write).with_context(|| format!("creating {write}"))?)
    };
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    // A full disk (or a closed reader) ends this capture only: the controller
    // drops its copies once we are gone, and the lab runs on.
    client
        .stream_to(&format!("/v1/capture?{q}"), &mut out, ctrl_c)
        .with_context(|| format!("the capture to {write} stopped (the lab runs on)"))?;
    Ok(())
}
