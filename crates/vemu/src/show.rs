//! `vemu status` as text: impairments, limits and counters in words.

use vemu_control::{DirStats, LabStatus, TUNNEL_FRAME_EXTRA};
use vemu_link::{Impairments, Loss, QueueLimit};

use crate::cli::STATUS_LINES_MAX;
use crate::lab::load_plan;

/// A duration in the scenario's unit syntax (`20ms`, `1s`, `250us`), as the user would write it.
pub(crate) fn unit_ns(ns: u64) -> String {
    match ns {
        0 => "0".into(),
        n if n % 1_000_000_000 == 0 => format!("{}s", n / 1_000_000_000),
        n if n >= 1_000_000 => format!("{}ms", n as f64 / 1e6),
        n => format!("{}us", n as f64 / 1e3),
    }
}

pub(crate) fn fmt_rate(bps: u64) -> String {
    match bps {
        b if b >= 1_000_000_000 => format!("{}Gbit", b as f64 / 1e9),
        b if b >= 1_000_000 => format!("{}Mbit", b as f64 / 1e6),
        b if b >= 1_000 => format!("{}kbit", b as f64 / 1e3),
        b => format!("{b}bit"),
    }
}

pub(crate) fn pct(p: f64) -> String {
    format!("{}%", (p * 1e6).round() / 1e4)
}

/// One line describing what a link direction does, for people.
/// Which way a direction goes now, as `vemu status` says it.
pub(crate) fn path_of(d: &DirStats) -> &'static str {
    if d.kernel_shaper {
        "kernel-tbf"
    } else if d.kernel_path {
        "kernel"
    } else if d.transit_ns > 0 {
        "tunnel"
    } else {
        "engine"
    }
}

pub(crate) fn describe(imp: &Impairments) -> String {
    let mut parts = Vec::new();
    if let Some(r) = imp.rate_bps {
        parts.push(fmt_rate(r));
    }
    parts.push(format!("delay {}", unit_ns(imp.delay_ns)));
    if imp.jitter.amount_ns > 0 {
        parts.push(format!(
            "jitter {} {}",
            unit_ns(imp.jitter.amount_ns),
            imp.jitter.distribution.name()
        ));
    }
    if !imp.flows.is_empty() {
        parts.push(format!(
            "{} flow{} of its own",
            imp.flows.len(),
            if imp.flows.len() == 1 { "" } else { "s" }
        ));
    }
    match imp.loss {
        Loss::None => {}
        Loss::Bernoulli { rate, .. } => parts.push(format!("loss {}", pct(rate))),
        Loss::GilbertElliott { p, r, h, k } => {
            parts.push(format!("loss GE p={} r={} h={} k={}", pct(p), pct(r), pct(h), pct(k)))
        }
    }
    if let Some(t) = &imp.phantom_trace {
        parts.push(format!("phantom from {} ({} steps)", t.name, t.steps.len()));
    }
    if imp.phantom_bps > 0 {
        parts.push(format!("phantom {}", fmt_rate(imp.phantom_bps)));
    }
    if imp.ber > 0.0 {
        parts.push(format!("ber {:e}", imp.ber));
    }
    if imp.duplicate.probability > 0.0 {
        parts.push(format!("dup {}", pct(imp.duplicate.probability)));
    }
    if imp.corrupt.probability > 0.0 {
        parts.push(format!("corrupt {}", pct(imp.corrupt.probability)));
    }
    if imp.reorder.probability > 0.0 {
        parts.push(format!("reorder {} gap {}", pct(imp.reorder.probability), imp.reorder.gap));
    }
    if let Some(q) = imp.queue {
        parts.push(match q {
            QueueLimit::Packets(n) => format!("queue {n}p"),
            QueueLimit::Bytes(n) => format!("queue {n}B"),
        });
    }
    match &imp.qos {
        None => {}
        Some(vemu_link::QosConfig::Diffserv) => parts.push("qos diffserv".into()),
        Some(vemu_link::QosConfig::Classes { classes, scheduler }) => parts.push(format!(
            "qos {}{}",
            classes.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join("/"),
            match scheduler {
                vemu_link::Discipline::Drr => "",
                vemu_link::Discipline::Wfq => " (WFQ)",
                vemu_link::Discipline::Wf2qPlus => " (WF2Q+)",
            }
        )),
    }
    if imp.shaper != vemu_link::Shaper::Engine {
        parts.push(format!("{} shaper", imp.shaper.name()));
    }
    parts.join(", ")
}

/// A node's limits for people: "cpu 0.5 cores, memory 256 MiB, pids 200", or "no limits".
pub(crate) fn describe_limits(l: &vemu_scenario::Limits) -> String {
    let mut parts = Vec::new();
    if let Some(c) = l.cpu_cores {
        parts.push(format!("cpu {c} cores"));
    }
    if let Some(m) = l.memory_bytes {
        parts.push(format!("memory {:.1} MiB", m as f64 / (1u64 << 20) as f64));
    }
    if let Some(p) = l.pids {
        parts.push(format!("pids {p}"));
    }
    if parts.is_empty() {
        "no limits".into()
    } else {
        parts.join(", ")
    }
}

pub(crate) fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// The counter columns of a direction in `vemu status`: RX FRAMES … DOWN.
pub(crate) fn counter_columns(st: &DirStats) -> String {
    format!(
        "{:>10} {:>10} {:>12} {:>8} {:>8} {:>8}",
        st.rx_frames, st.tx_frames, st.tx_bytes, st.drop_loss, st.drop_queue, st.drop_down
    )
}

pub(crate) fn print_status(s: &LabStatus) {
    print_header(s);
    print_nodes(s);
    print_links(s);
    print_radios(s);
    print_lans(s);
}

/// The lab's line, its fidelity verdict, and its machines.
fn print_header(s: &LabStatus) {
    println!("lab {} (controller pid {}, up {:.1} s)", s.name, s.pid, s.uptime_ns as f64 / 1e9);
    if let Some(f) = &s.fidelity {
        println!("whole run: {}", vemu_control::fidelity::describe(f));
    }
    if let Some(f) = &s.fidelity_now {
        println!(
            "last {} s: {}",
            vemu_control::fidelity::WINDOW.as_secs(),
            vemu_control::fidelity::describe(f)
        );
    }
    if !s.machines.is_empty() {
        println!("\n{:<15} {:<22} {:<6} {:<6} LAB CLOCK", "MACHINE", "AGENT", "STATE", "NODES");
        for m in &s.machines {
            // Against the controller's, within half the round trip that measured it (or
            // the disciplined wall clocks' errors).
            let clock =
                match (m.clock_offset_ns, m.clock_error_ns.or(m.clock_rtt_ns.map(|r| r / 2))) {
                    (Some(o), Some(e)) => format!(
                        "{:+.3} ms (+/- {:.3} ms{})",
                        o as f64 / 1e6,
                        e as f64 / 1e6,
                        if m.clock_source.as_deref() == Some("disciplined clocks") {
                            ", disciplined clocks"
                        } else {
                            ""
                        }
                    ),
                    _ => "not measured yet".to_string(),
                };
            println!("{:<15} {:<22} {:<6} {:<6} {clock}", m.name, m.address, m.state, m.nodes);
            for u in &m.underlay {
                let unlimited = if u.unlimited_links > 0 {
                    format!(" (and {} without a rate)", u.unlimited_links)
                } else {
                    String::new()
                };
                let measured = u.measured_bps.map_or("not measured".to_string(), |b| {
                    format!("{:.1} Mbit/s", b as f64 / 1e6)
                });
                println!("  to {}: {} links, {:.1} Mbit/s set{unlimited}; the underlay carried {measured}", u.to, u.links, u.set_bps as f64 / 1e6);
            }
        }
        for m in &s.machines {
            for w in m.underlay.iter().filter_map(|u| u.warning(&m.name)) {
                println!("warning: {w}");
            }
        }
    }
}

/// Each node's interfaces and addresses, processes and use.
fn print_nodes(s: &LabStatus) {
    println!("\nNODE            INTERFACES");
    for n in &s.nodes {
        let ifs: Vec<String> =
            n.ifaces.iter().map(|i| format!("{} {}", i.name, i.addrs.join(" "))).collect();
        let lost =
            s.machines.iter().any(|m| Some(&m.name) == n.machine.as_ref() && m.state == "lost");
        let on = n
            .machine
            .as_ref()
            .map(|m| format!(" (on {m}{})", if lost { ", lost" } else { "" }))
            .unwrap_or_default();
        let on = match n.kind.as_deref() {
            Some("host") => format!("{on} (this machine)"),
            Some("external") => format!("{on} (the wire of a NIC)"),
            _ => on,
        };
        println!("{:<15} {}{on}", n.name, ifs.join(" | "));
        if !n.limits.is_none() || n.usage.cpu_ns > 0 {
            let u = &n.usage;
            let waited = match n.cpu_wait_ns {
                0 => String::new(),
                w => format!(" (waited {:.2} s for a CPU)", w as f64 / 1e9),
            };
            println!(
                "{:<15}   used: cpu {:.2} s{waited}, memory {:.1} MiB, {} processes; {}",
                "",
                u.cpu_ns as f64 / 1e9,
                u.memory_bytes as f64 / (1u64 << 20) as f64,
                u.processes,
                describe_limits(&n.limits)
            );
        }
        for p in &n.processes {
            println!("{:<15}   run '{}': {:?} (restarts {})", "", p.command, p.state, p.restarts);
        }
    }
}

/// The links' table (and the kernel fast path's state), notes on links between
/// machines, and the diverted paths.
fn print_links(s: &LabStatus) {
    if !s.links.is_empty() || s.segments.iter().any(|g| g.kind != "wireless") {
        println!("\nkernel fast path: {}", s.fast_path);
    }
    println!(
        "\n{:<16} {:<4} {:<4} {:<10} {:>10} {:>10} {:>12} {:>8} {:>8} {:>8}  IMPAIRMENTS",
        "LINK", "UP", "DIR", "PATH", "RX FRAMES", "TX FRAMES", "TX BYTES", "LOSS", "QUEUE", "DOWN"
    );
    let (mut below_underlay, mut notes) = (Vec::new(), Vec::new());
    for l in &s.links {
        for (dir, arrow, d) in [
            ("fwd", format!("{} -> {}", l.a, l.b), &l.forward),
            ("rev", format!("{} -> {}", l.b, l.a), &l.reverse),
        ] {
            let path = path_of(&d.stats);
            // Across machines: the underlay's share of the set delay, as measured.
            let transit = if d.stats.transit_ns > 0 {
                let pieces = if d.stats.path_payload_bytes > 0 {
                    format!(", datagrams of {} B", d.stats.path_payload_bytes)
                } else {
                    String::new()
                };
                format!(", underlay {:.0} us{pieces}", d.stats.transit_ns as f64 / 1e3)
            } else {
                String::new()
            };
            // Unimpaired across machines but through the engines because whole frames do
            // not fit the underlay's datagrams: say what would let the kernel carry it.
            let iface_mtu =
                vemu_scenario::port_mtu([&l.forward.impairments, &l.reverse.impairments]) as usize;
            let bare = Impairments {
                shaper: d.impairments.shaper,
                mtu: d.impairments.mtu,
                ..Default::default()
            };
            // (Or the kernel carries it in pieces, and lends it to the engines for bulk
            // TCP: say that, and what would spare the pieces.)
            if d.stats.transit_ns > 0
                && d.impairments == bare
                && d.stats.path_payload_bytes > 0
                && (d.stats.path_payload_bytes as usize) < iface_mtu + TUNNEL_FRAME_EXTRA
            {
                let how = match (d.stats.kernel_path, d.stats.tunnel_lent) {
                    (true, _) => "goes through the kernel's tunnel in IP fragments (bulk TCP through the engines', which carry it whole)",
                    (false, true) => "goes through the engines now (bulk TCP; the kernel's tunnel, which sends its frames in IP fragments, takes it back when idle)",
                    (false, false) => "goes through the engines",
                };
                notes.push(format!(
                    "{} {dir} {how}: the underlay carries datagrams of {} B, a frame of its {iface_mtu}-byte interfaces needs {} B in the kernel's tunnel (mtu: {} or less on the link, or a larger MTU on the underlay, lets the kernel carry it whole)",
                    l.name,
                    d.stats.path_payload_bytes,
                    iface_mtu + TUNNEL_FRAME_EXTRA,
                    (d.stats.path_payload_bytes as usize).saturating_sub(TUNNEL_FRAME_EXTRA)
                ));
            }
            // A set delay shorter than the underlay's cannot be kept: say by how much.
            if d.stats.transit_ns > d.impairments.delay_ns {
                below_underlay.push(format!(
                    "{} {dir}: the set delay ({:.0} us) is below the underlay's one-way delay ({:.0} us): frames arrive {:.0} us late",
                    l.name,
                    d.impairments.delay_ns as f64 / 1e3,
                    d.stats.transit_ns as f64 / 1e3,
                    (d.stats.transit_ns - d.impairments.delay_ns) as f64 / 1e3
                ));
            }
            println!(
                "{:<16} {:<4} {:<4} {:<10} {}  {} ({arrow}{transit})",
                l.name,
                yes_no(l.up),
                dir,
                path,
                counter_columns(&d.stats),
                describe(&d.impairments)
            );
        }
    }
    // (A lab with hundreds of links between machines would print hundreds of lines.)
    for (kind, lines) in [("warning", &below_underlay), ("note", &notes)] {
        for l in lines.iter().take(STATUS_LINES_MAX) {
            println!("{kind}: {l}");
        }
        if lines.len() > STATUS_LINES_MAX {
            println!(
                "{kind}: ... and {} more like these (vemu status --json has every direction)",
                lines.len() - STATUS_LINES_MAX
            );
        }
    }
    for d in &s.diverts {
        for (dir, what, st) in
            [("fwd", "the machine's packets out", &d.forward), ("rev", "replies back", &d.reverse)]
        {
            println!(
                "{:<16} {:<4} {:<4} {:<10} {}  {} (divert '{}': {what})",
                d.name,
                "yes",
                dir,
                "nfq",
                counter_columns(&st.stats),
                describe(&st.impairments),
                d.matches
            );
        }
    }
}

/// Each wireless segment: positions, neighbours, what each member sent and heard.
fn print_radios(s: &LabStatus) {
    for g in s.segments.iter().filter(|g| g.kind == "wireless") {
        println!(
            "\nSEGMENT {} (wireless): {} frames refused by full radio queues; {} receptions of groups the receiver did not join held back, {} memberships",
            g.name, g.stats.drop_capacity, g.stats.filtered, g.stats.groups
        );
        println!("{:<22} {:>9} {:>9}  NEIGHBOURS (delivery probability)   SENT -> DELIVERED/LOST/COLLIDED", "MEMBER", "X (m)", "Y (m)");
        for m in &g.members {
            let Some(r) = &m.radio else { continue };
            let nb: Vec<String> = r
                .neighbours
                .iter()
                .map(|n| format!("{} ({:.2})", n.node, n.delivery_probability))
                .collect();
            let sent: Vec<String> = r
                .sent_to
                .iter()
                .map(|p| {
                    format!(
                        "{} {}/{}/{}",
                        p.node,
                        p.counters.delivered,
                        p.counters.lost_channel,
                        p.counters.lost_collision
                    )
                })
                .collect();
            let nb = if nb.is_empty() { "-".to_string() } else { nb.join(", ") };
            println!("{:<22} {:>9.1} {:>9.1}  {nb}   {}", m.port, r.x_m, r.y_m, sent.join(", "));
        }
        // Infrastructure mode: who is whose access point.
        for m in &g.members {
            let Some(w) = m.radio.as_ref().and_then(|r| r.wifi.as_ref()) else { continue };
            let ssid = w.ssid.as_deref().unwrap_or("");
            match (w.role.as_str(), &w.ap) {
                ("ap", _) => println!(
                    "  {}: access point of '{ssid}'{}, stations: {}",
                    m.port,
                    w.channel.map_or(String::new(), |c| format!(" on channel {c}")),
                    if w.stations.is_empty() { "none".to_string() } else { w.stations.join(", ") }
                ),
                ("station", Some(ap)) => println!(
                    "  {}: station of '{ssid}' on {ap}{}{}{}{}",
                    m.port,
                    w.channel.map_or(String::new(), |c| format!(" (channel {c})")),
                    w.signal_dbm.map_or(String::new(), |s| format!(" ({s:.0} dBm)")),
                    m.radio.as_ref().and_then(|r| r.mac).map_or(String::new(), |s| format!(
                        ", {:.1} Mbit/s",
                        s.rate_bps as f64 / 1e6
                    )),
                    w.last_handover_ms.map_or(String::new(), |h| format!(
                        ", {} handover{}, last {h:.1} ms",
                        w.handovers,
                        if w.handovers == 1 { "" } else { "s" }
                    ))
                ),
                ("station", None) => println!("  {}: station of '{ssid}', not associated", m.port),
                _ => {}
            }
        }
    }
}

/// Each LAN segment: its switch's counters and its ports'.
fn print_lans(s: &LabStatus) {
    for g in s.segments.iter().filter(|g| g.kind == "hub") {
        let (mut sent, mut collisions, mut dropped) = (0, 0, 0);
        for h in g.members.iter().filter_map(|m| m.radio.as_ref()?.hub.as_ref()) {
            (sent, collisions, dropped) =
                (sent + h.sent, collisions + h.collisions, dropped + h.dropped);
        }
        println!(
            "\nSEGMENT {} (hub): {sent} frames repeated, {collisions} collisions, {dropped} frames given up after 16 attempts",
            g.name
        );
    }
    for g in s.segments.iter().filter(|g| g.kind == "lan") {
        let st = &g.stats;
        let cap = g.capacity_bps.map(|c| format!(", capacity {}", fmt_rate(c))).unwrap_or_default();
        // Switched by the kernel's bridge now: the engine's switch sees none of it.
        let kernel = g.members.first().is_some_and(|m| m.egress.stats.kernel_path);
        let path = if kernel {
            "switched by the kernel (the engine's switch counts nothing meanwhile); "
        } else {
            ""
        };
        println!(
            "\nSEGMENT {} (lan{cap}): {path}{} unicast, {} flooded, {} filtered, {} over capacity",
            g.name, st.unicast, st.flooded, st.filtered, st.drop_capacity
        );
        println!(
            "{:<22} {:<4} {:<4} {:<4} {:<10} {:>10} {:>10} {:>12} {:>8} {:>8} {:>8}  IMPAIRMENTS",
            "PORT",
            "VLAN",
            "UP",
            "DIR",
            "PATH",
            "RX FRAMES",
            "TX FRAMES",
            "TX BYTES",
            "LOSS",
            "QUEUE",
            "DOWN"
        );
        for m in &g.members {
            for (dir, d) in [("out", &m.egress), ("in", &m.ingress)] {
                let path = path_of(&d.stats);
                println!(
                    "{:<22} {:<4} {:<4} {:<4} {:<10} {}  {}",
                    m.port,
                    m.vlan,
                    yes_no(m.up),
                    dir,
                    path,
                    counter_columns(&d.stats),
                    describe(&d.impairments)
                );
            }
        }
    }
}

/// `vemu ls`: the labs on this machine, running, left behind, or shares of labs across
/// machines.
pub(crate) fn ls() {
    let (running, stale) = vemu_control::list_labs();
    if running.is_empty() && stale.is_empty() {
        eprintln!("no labs");
    }
    for l in running {
        let n = load_plan(&l)
            .map(|p| format!("{} nodes, {} links", p.nodes.len(), p.links.len()))
            .unwrap_or_default();
        println!("{l}\trunning\t{n}");
    }
    for l in stale {
        match load_plan(&l) {
            Ok(p) if !p.machines.is_empty() => println!("{l}\tleft behind by a crash of its controller ('vemu attach' takes it over while its agents hold it; 'vemu clean' removes it)"),
            _ => println!("{l}\tleft behind by a crash (run 'vemu clean')"),
        }
    }
    for (name, held) in vemu_control::list_shares() {
        let Some((l, m)) = vemu_control::labs::share_of(&name) else { continue };
        match held {
            true => println!("{l}\tmachine {m}'s share, held by this machine's agent for the lab's controller"),
            false => println!("{l}\tmachine {m}'s share, left behind by an agent that died (its next start or 'vemu clean' removes it)"),
        }
    }
}
