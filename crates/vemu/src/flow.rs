//! `vemu traffic` and `vemu report`: flows between nodes and what they measured.

use super::*;

/// `vemu traffic cbr`: a constant-bit-rate flow between two nodes.
pub(crate) fn traffic_flow(cmd: TrafficCmd) -> Result<()> {
    let TrafficCmd::Cbr { from, to, size, rate, start, duration, count, to_addr, lab } = cmd;
    let lab = resolve_lab(lab.lab)?;
    let body = json!({"from": from, "to": to, "size_bytes": size, "rate_pps": rate, "start_ns": start, "duration_ns": duration, "count": count, "to_addr": to_addr});
    let v = connect(&lab)?.post("/v1/traffic", &body)?;
    println!(
        "flow {}: {} -> {} ({}:{}), {} bytes at {} packets/s from lab time {:.1} s; records in {}",
        v["id"],
        v["from"].as_str().unwrap_or(""),
        v["to"].as_str().unwrap_or(""),
        v["addr"].as_str().unwrap_or(""),
        v["port"],
        v["size_bytes"],
        v["rate_pps"],
        v["start_ns"].as_f64().unwrap_or(0.0) / 1e9,
        LabPaths::new(&lab).log_dir().join("traffic").display()
    );
    Ok(())
}

/// `vemu report`: the flows' delivery, delay and goodput from their records.
pub(crate) fn report(lab: Option<String>, as_json: bool) -> Result<()> {
    let lab = resolve_lab(lab)?;
    let paths = LabPaths::new(&lab);
    let stats = match Client::connect(&lab) {
        Ok(c) => {
            // Records kept on other machines (a lab across machines) come here first.
            c.post("/v1/traffic/collect", &json!({}))?;
            Some(c.get("/v1/stats")?)
        }
        Err(_) => std::fs::read(paths.log_dir().join("stats-final.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok()),
    };
    if stats.is_none() && !paths.log_dir().exists() {
        return Err(user(format!(
            "no lab '{lab}' has run here (no {})",
            paths.log_dir().display()
        )));
    }
    let r = vemu_control::report::report(&paths.log_dir(), stats.as_ref())?;
    if as_json {
        println!("{r}");
    } else {
        traffic::print_report(&lab, &r);
    }
    Ok(())
}
