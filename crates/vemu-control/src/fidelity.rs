//! The fidelity monitor: whether the data plane kept the schedule it was asked to keep.
//! Every frame the engine writes carries its lateness (actual write time − scheduled
//! time, `DirStats::late_hist`); frames the far TAP refused are lost to the engine,
//! not to emulated loss. From these — measured, never inferred from the configuration —
//! each link direction and segment port gets a verdict, and the lab the worst of them.
//! Two more witnesses of an engine that cannot keep up: the frames the nodes' kernels
//! dropped on full TAP queues (the engine did not read them in time), and the engine
//! shards' load (time spent working per second of wall time).

use serde::{Deserialize, Serialize};
use vemu_engine::{bucket_quantile_ns, DirStats, DELAY_BUCKETS_NS};
pub use vemu_scenario::FidelityThresholds;

use vemu_machine::worker::TapQueue;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Ok,
    Degraded,
    Invalid,
}

/// One direction's evidence.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DirFidelity {
    /// `LINK a -> b` or `SEGMENT:NODE in|out`.
    pub name: String,
    pub verdict: Verdict,
    /// Frames written.
    pub frames: u64,
    /// Frames written later than the threshold, plus frames the TAP refused or the
    /// underlay between machines lost.
    pub late_frames: u64,
    pub late_fraction: f64,
    /// 99th percentile of lateness (upper bound of its bucket), ns.
    pub p99_late_ns: u64,
    pub max_late_ns: u64,
    pub write_errors: u64,
    /// Frames the underlay between machines lost on the way (counted as late: the
    /// model did not drop them).
    #[serde(default)]
    pub underlay_lost: u64,
    /// Probes of the direction's input queue, and those that waited there longer than
    /// the threshold before the engine read them (frames there wait as long: the late
    /// fraction counts the larger of the two witnesses), and their 99th percentile, ns.
    #[serde(default)]
    pub input_probes: u64,
    #[serde(default)]
    pub input_late_probes: u64,
    #[serde(default)]
    pub p99_input_wait_ns: u64,
    /// A direction from another machine: frames that waited longer than the threshold
    /// on the receiving machine, from their arrival until its engine wrote them (the
    /// sending machine's engine judged the rest of their way), and the 99th percentile
    /// of that wait, ns.
    #[serde(default)]
    pub arrival_late_frames: u64,
    #[serde(default)]
    pub p99_arrival_wait_ns: u64,
}

/// Fewest input probes a direction needs before they count (10 s of them when it is busy).
pub const MIN_INPUT_PROBES: u64 = 20;

/// One TAP interface whose kernel queue overflowed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TapFidelity {
    /// `NODE:IFACE`.
    pub port: String,
    pub verdict: Verdict,
    pub read: u64,
    pub dropped: u64,
    /// dropped / (read + dropped).
    pub dropped_fraction: f64,
}

/// What the engine's load and the nodes' kernels tell, over the stretch judged.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EngineEvidence {
    /// Per engine shard, the fraction of the stretch spent working.
    pub shard_busy: Vec<f64>,
    /// Monitor windows (seconds) judged, and those in which a shard was busier than
    /// the threshold.
    pub windows: u64,
    pub saturated_windows: u64,
    /// The TAP interfaces' counters over the stretch.
    pub taps: Vec<TapQueue>,
    /// Engine shards that died (their links stopped): nothing measured is trustworthy.
    #[serde(default)]
    pub faults: Vec<String>,
    /// What the machines' software waited for a CPU.
    #[serde(default)]
    pub cpu: CpuEvidence,
    /// The 802.11 channels' decisions (a slot decided late on the engine clock).
    #[serde(default)]
    pub channels: Vec<ChannelDecisions>,
}

/// How late the engine decided an 802.11 channel's medium: per decision, the time it
/// came to it after the earliest slot then due (`vemu_engine::SegStats::decide_late_hist`).
/// A decision later than the threshold is judged as a late frame is: the medium's
/// collisions, backoffs and deliveries were then decided after their time.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ChannelDecisions {
    /// The segment's name.
    pub name: String,
    /// Decisions by lateness, per bucket of [`DELAY_BUCKETS_NS`].
    pub late_hist: Vec<u64>,
    pub max_late_ns: u64,
}

impl ChannelDecisions {
    /// The decisions since `before` (the same channel, earlier; the latest lateness
    /// stays the run's: a maximum cannot be taken apart).
    pub fn since(&self, before: &ChannelDecisions) -> ChannelDecisions {
        ChannelDecisions {
            late_hist: hist_since(&self.late_hist, &before.late_hist),
            ..self.clone()
        }
    }
}

/// The CPU the lab's software waited for ([`vemu_host::cpu_wait`]): seconds in which a
/// machine's tasks waited for a CPU more than the threshold of the time are `starved`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CpuEvidence {
    /// Monitor windows with a pressure reading, and the starved ones among them.
    pub windows: u64,
    pub starved_windows: u64,
    /// The highest pressure of a window (the fraction of it during which some task of a
    /// machine waited), and the machine (empty: the controller's).
    pub worst_pressure: f64,
    #[serde(default)]
    pub worst_machine: String,
    /// The nodes whose processes waited most in the starved windows, with the seconds
    /// they waited per second of those windows, most first.
    pub waiting_nodes: Vec<(String, f64)>,
    /// Windows in which the hypervisor took more than [`STEAL_NOTED`] of a machine's CPU
    /// time (its virtual CPUs were ready but not run), and the most of a window it took.
    #[serde(default)]
    pub stolen_windows: u64,
    #[serde(default)]
    pub worst_steal: f64,
    /// Windows that would have been starved but in which every link direction carrying
    /// bulk traffic kept its serializer busy (see [`links_kept_pace`]): the lab's
    /// software waited for CPU, yet the links ran at their set rates. Not counted in
    /// `starved_windows`.
    #[serde(default)]
    pub paced_windows: u64,
    /// Starved windows (counted in `starved_windows`) with bulk traffic whose links did
    /// not all keep their pace that second: paced after all if, over the whole run, every
    /// bulk direction kept it ([`CpuEvidence::run_kept_pace`]).
    #[serde(default)]
    pub slowed_windows: u64,
    /// The nodes' waits in the slowed windows, kept apart until the run's pace says
    /// whether those windows count (summed like `waiting_nodes`).
    #[serde(skip)]
    slowed_waiting: Vec<(String, f64)>,
}

/// What the links did in a window (or a run) in which the lab's software waited for CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinksPace {
    /// No direction carried bulk traffic: nothing to witness.
    NoBulk,
    /// Every direction that carried bulk traffic kept its serializer busy.
    Kept,
    /// One did not, or cannot show its pace.
    Fell,
}

/// The least share of its time with traffic a bulk direction's serializer must have
/// been busy for the links to have kept their pace: the density experiment's "held"
/// (a link at 0.93 of its TCP ceiling or more).
pub const PACE_HELD: f64 = 0.93;

/// A direction carries bulk traffic in a window when it sent this many bytes or more and
/// [`BULK_RATIO`] times what its reverse sent (a TCP flow's data, not its acknowledgements).
pub const BULK_MIN_BYTES: u64 = 64 * 1024;
pub const BULK_RATIO: u64 = 8;

/// [`links_pace`] of directions as `Controller::named_directions` gives them: each
/// link's and segment port's two directions one after the other.
pub fn links_pace_of<D: std::borrow::Borrow<DirStats>>(named: &[(String, D)]) -> LinksPace {
    links_pace(named.chunks_exact(2).map(|p| (p[0].1.borrow(), p[1].1.borrow())))
}

/// Whether, over a window (or a run), the links kept their set rates: each direction that
/// carried bulk traffic kept its serializer busy at least [`PACE_HELD`] of the time it had
/// traffic (busy, plus idle spells between frames of at most `vemu_link::PACE_GAP_NS`: a
/// sender that fell behind — for want of CPU, or of its receiver's acknowledgements —
/// leaves such spells). A bulk direction without a serializer of the engine's (no rate,
/// the kernel's shaper or fast path, `qos`) cannot show its pace: [`LinksPace::Fell`].
/// `pairs`: each link's or segment port's two directions' counts.
pub fn links_pace<'a>(pairs: impl Iterator<Item = (&'a DirStats, &'a DirStats)>) -> LinksPace {
    let mut bulk = 0;
    for (a, b) in pairs {
        for (d, r) in [(a, b), (b, a)] {
            if d.tx_bytes < BULK_MIN_BYTES || d.tx_bytes < BULK_RATIO * r.tx_bytes {
                continue;
            }
            bulk += 1;
            let busy = d.serializer_busy_ns as f64;
            if busy == 0.0 || busy / (busy + d.serializer_gap_ns as f64) < PACE_HELD {
                return LinksPace::Fell;
            }
        }
    }
    if bulk > 0 {
        LinksPace::Kept
    } else {
        LinksPace::NoBulk
    }
}

/// The share of a window's CPU time the hypervisor may take from a machine before the
/// window is said to be stolen (one 10 ms tick of two CPUs is 0.5 %).
pub const STEAL_NOTED: f64 = 0.004;

/// The share of a window a node's processes must have waited (where counted) for a
/// window of machine-wide pressure to be the lab's software starved.
pub const NODE_WAIT_FRACTION: f64 = 0.1;

/// How many waiting nodes a verdict names.
const WAITING_NODES_NAMED: usize = 5;

impl CpuEvidence {
    /// One window: each machine's pressure and nodes' waits between the counters
    /// `before` and `now` (over the time between the machine's two readings).
    pub fn window(
        now: &[vemu_machine::worker::MachineCpu],
        before: &[vemu_machine::worker::MachineCpu],
        th: &FidelityThresholds,
    ) -> CpuEvidence {
        let mut e = CpuEvidence::default();
        for m in now {
            let Some(b) = before.iter().find(|b| b.machine == m.machine) else { continue };
            let (Some(p), Some(p0)) = (m.pressure_us, b.pressure_us) else { continue };
            let span = m.read_at_ns.saturating_sub(b.read_at_ns).max(1) as f64;
            // (PSI's per-CPU times are folded in when read: a reading can run a little
            // ahead of its timestamp.)
            let pressure = (p.saturating_sub(p0) as f64 * 1e3 / span).min(1.0);
            if pressure > e.worst_pressure || e.windows == 0 {
                (e.worst_pressure, e.worst_machine) = (pressure, m.machine.clone());
            }
            e.windows = 1;
            if let (Some((st, cpus)), Some((st0, _))) = (m.steal_us, b.steal_us) {
                let stolen = st.saturating_sub(st0) as f64 * 1e3 / (span * cpus.max(1) as f64);
                e.worst_steal = e.worst_steal.max(stolen.min(1.0));
                if stolen > STEAL_NOTED {
                    e.stolen_windows = 1;
                }
            }
            let mut most = 0.0f64;
            for n in &m.nodes {
                let w0 = b.nodes.iter().find(|x| x.node == n.node).map_or(0, |x| x.wait_ns);
                let waited = n.wait_ns.saturating_sub(w0) as f64 / span;
                most = most.max(waited);
                if waited > 0.0 {
                    e.waiting_nodes.push((n.node.clone(), waited));
                }
            }
            // The machine's pressure counts other software's waits too: where the
            // nodes' were counted, one of them must have waited for the window to be
            // the lab's software starved.
            if pressure > th.cpu_pressure && (!m.nodes_counted || most >= NODE_WAIT_FRACTION) {
                e.starved_windows = 1;
            }
        }
        e.waiting_nodes.sort_by(|a, b| b.1.total_cmp(&a.1));
        e
    }

    /// What the links did in this window ([`links_pace`]): a starved window in which
    /// they kept their pace is paced, not starved; one in which they fell is slowed.
    pub fn links(&mut self, pace: LinksPace) {
        if self.starved_windows == 0 {
            return;
        }
        match pace {
            LinksPace::Kept => (self.starved_windows, self.paced_windows) = (0, 1),
            LinksPace::Fell => self.slowed_windows = 1,
            LinksPace::NoBulk => {}
        }
    }

    /// The run's evidence when, over the whole run, every bulk direction kept its pace
    /// (`run`: [`links_pace`] over the run's counts): its slowed windows are paced after
    /// all — a second in which a link fell a little short while the run held is what the
    /// run's average (a user's result) absorbs, as the density experiment's "held" does.
    pub fn run_kept_pace(&self, run: LinksPace) -> CpuEvidence {
        let mut e = self.clone();
        if run == LinksPace::Kept {
            e.starved_windows -= e.slowed_windows.min(e.starved_windows);
            e.paced_windows += std::mem::take(&mut e.slowed_windows);
            e.slowed_waiting.clear();
        }
        e
    }

    /// Add a window's evidence (`w`, over `span_ns`) to the run's: nodes' waits count
    /// in starved windows only.
    pub fn add(&mut self, w: &CpuEvidence) {
        self.windows += w.windows;
        self.starved_windows += w.starved_windows;
        self.paced_windows += w.paced_windows;
        self.slowed_windows += w.slowed_windows;
        self.stolen_windows += w.stolen_windows;
        self.worst_steal = self.worst_steal.max(w.worst_steal);
        if w.worst_pressure > self.worst_pressure {
            (self.worst_pressure, self.worst_machine) = (w.worst_pressure, w.worst_machine.clone());
        }
        if w.starved_windows == 0 {
            return;
        }
        // Kept as seconds waited in all starved windows; averaged when judged.
        let into =
            if w.slowed_windows > 0 { &mut self.slowed_waiting } else { &mut self.waiting_nodes };
        add_waits(into, &w.waiting_nodes);
    }

    /// The run's evidence as judged: nodes' waits per starved second, the most first.
    pub fn summary(&self) -> CpuEvidence {
        let mut s = self.clone();
        add_waits(&mut s.waiting_nodes, &std::mem::take(&mut s.slowed_waiting));
        let starved = self.starved_windows.max(1) as f64;
        for (_, w) in s.waiting_nodes.iter_mut() {
            *w /= starved;
        }
        s.waiting_nodes.sort_by(|a, b| b.1.total_cmp(&a.1));
        s.waiting_nodes.truncate(WAITING_NODES_NAMED);
        s
    }
}

/// Add each node's seconds waited in `more` to its total in `to`.
fn add_waits(to: &mut Vec<(String, f64)>, more: &[(String, f64)]) {
    for (node, waited) in more {
        match to.iter_mut().find(|(n, _)| n == node) {
            Some((_, total)) => *total += waited,
            None => to.push((node.clone(), *waited)),
        }
    }
}

/// The verdict of a lab (or of a window of its run).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fidelity {
    pub verdict: Verdict,
    pub thresholds: FidelityThresholds,
    pub frames: u64,
    pub late_frames: u64,
    /// Directions whose verdict is not `ok`, worst first.
    pub affected: Vec<DirFidelity>,
    /// Per engine shard, the fraction of the stretch spent working.
    pub shard_busy: Vec<f64>,
    pub windows: u64,
    pub saturated_windows: u64,
    /// Frames the nodes' kernels dropped on full TAP queues, in all.
    pub tap_dropped: u64,
    /// TAP interfaces whose verdict is not `ok`, worst first.
    pub taps_affected: Vec<TapFidelity>,
    /// Engine shards that died: the verdict is `invalid`.
    #[serde(default)]
    pub engine_faults: Vec<String>,
    /// What the lab's software waited for a CPU.
    #[serde(default)]
    pub cpu: CpuEvidence,
    /// The latest any frame was written after its time, ns (whatever the verdict: a
    /// user's outlier is either here or happened outside the engine).
    #[serde(default)]
    pub max_late_ns: u64,
}

fn judge(fraction: f64, th: &FidelityThresholds) -> Verdict {
    if fraction > th.invalid_fraction {
        Verdict::Invalid
    } else if fraction > th.degraded_fraction {
        Verdict::Degraded
    } else {
        Verdict::Ok
    }
}

/// The verdict from per-direction counters (`(name, counters)`) and the engine's
/// evidence.
pub fn assess<'a>(
    dirs: impl IntoIterator<Item = (String, &'a DirStats)>,
    engine: &EngineEvidence,
    th: &FidelityThresholds,
) -> Fidelity {
    // Buckets wholly above the threshold count as late.
    let first_late = DELAY_BUCKETS_NS
        .iter()
        .position(|&b| b >= th.late_ns)
        .map_or(DELAY_BUCKETS_NS.len(), |i| i + 1);
    let (mut frames, mut late_frames, mut max_late_ns) = (0u64, 0u64, 0u64);
    let mut affected = Vec::new();
    for (name, d) in dirs {
        max_late_ns = max_late_ns.max(d.late_max_ns);
        let n: u64 = d.late_hist.iter().sum();
        let written_late =
            d.late_hist.iter().skip(first_late).sum::<u64>() + d.write_errors + d.underlay_lost;
        // Frames that waited too long in the input queue, estimated from the probes that did.
        let probes: u64 = d.input_wait_hist.iter().sum();
        let input_late: u64 = d.input_wait_hist.iter().skip(first_late).sum();
        let waited_late = if probes >= MIN_INPUT_PROBES {
            (n as f64 * input_late as f64 / probes as f64).round() as u64
        } else {
            0
        };
        // Frames from another machine are judged on both: late on either is late (a
        // frame late on both counts twice, so at most every frame).
        let arrival_late: u64 = d.arrival_wait_hist.iter().skip(first_late).sum();
        let late = (written_late.max(waited_late) + arrival_late)
            .min(n + d.write_errors + d.underlay_lost);
        frames += n;
        late_frames += late;
        let judged = n + d.write_errors + d.underlay_lost;
        if judged < th.min_frames {
            continue;
        }
        let fraction = late as f64 / judged as f64;
        let verdict = judge(fraction, th);
        if verdict != Verdict::Ok {
            affected.push(DirFidelity {
                name,
                verdict,
                frames: n,
                late_frames: late,
                late_fraction: fraction,
                p99_late_ns: bucket_quantile_ns(&d.late_hist, 0.99).unwrap_or(0),
                max_late_ns: d.late_max_ns,
                write_errors: d.write_errors,
                underlay_lost: d.underlay_lost,
                input_probes: probes,
                input_late_probes: input_late,
                p99_input_wait_ns: bucket_quantile_ns(&d.input_wait_hist, 0.99).unwrap_or(0),
                arrival_late_frames: arrival_late,
                p99_arrival_wait_ns: bucket_quantile_ns(&d.arrival_wait_hist, 0.99).unwrap_or(0),
            });
        }
    }
    for ch in &engine.channels {
        let n: u64 = ch.late_hist.iter().sum();
        if n < th.min_frames {
            continue;
        }
        let late: u64 = ch.late_hist.iter().skip(first_late).sum();
        let fraction = late as f64 / n as f64;
        let verdict = judge(fraction, th);
        if verdict != Verdict::Ok {
            affected.push(DirFidelity {
                name: format!("{} 802.11 decisions", ch.name),
                verdict,
                frames: n,
                late_frames: late,
                late_fraction: fraction,
                p99_late_ns: bucket_quantile_ns(&ch.late_hist, 0.99).unwrap_or(0),
                max_late_ns: ch.max_late_ns,
                write_errors: 0,
                underlay_lost: 0,
                input_probes: 0,
                input_late_probes: 0,
                p99_input_wait_ns: 0,
                arrival_late_frames: 0,
                p99_arrival_wait_ns: 0,
            });
        }
    }
    affected.sort_by(|a, b| {
        b.verdict.cmp(&a.verdict).then(b.late_fraction.total_cmp(&a.late_fraction))
    });
    let mut taps_affected: Vec<TapFidelity> = engine
        .taps
        .iter()
        .filter(|t| t.read + t.dropped >= th.min_frames)
        .map(|t| {
            let dropped_fraction = t.dropped as f64 / (t.read + t.dropped) as f64;
            TapFidelity {
                port: t.port.clone(),
                verdict: judge(dropped_fraction, th),
                read: t.read,
                dropped: t.dropped,
                dropped_fraction,
            }
        })
        .filter(|t| t.verdict != Verdict::Ok)
        .collect();
    taps_affected.sort_by(|a, b| b.dropped_fraction.total_cmp(&a.dropped_fraction));
    let overall = if frames >= th.min_frames {
        judge(late_frames as f64 / frames as f64, th)
    } else {
        Verdict::Ok
    };
    // A saturated engine has no headroom: degraded at least, whatever the frames say.
    let saturated = engine.windows > 0
        && engine.saturated_windows as f64 / engine.windows as f64 > th.degraded_fraction;
    // Seconds in which the software under test waited for a CPU, as late frames are.
    let cpu = engine.cpu.summary();
    let starved = (cpu.windows > 0)
        .then(|| judge(cpu.starved_windows as f64 / cpu.windows as f64, th))
        .filter(|v| *v != Verdict::Ok);
    let verdict = affected
        .iter()
        .map(|a| a.verdict)
        .chain(taps_affected.iter().map(|t| t.verdict))
        .chain(saturated.then_some(Verdict::Degraded))
        .chain(starved)
        .chain((!engine.faults.is_empty()).then_some(Verdict::Invalid))
        .max()
        .unwrap_or(Verdict::Ok)
        .max(overall);
    Fidelity {
        verdict,
        thresholds: th.clone(),
        frames,
        late_frames,
        affected,
        shard_busy: engine.shard_busy.clone(),
        windows: engine.windows,
        saturated_windows: engine.saturated_windows,
        tap_dropped: engine.taps.iter().map(|t| t.dropped).sum(),
        taps_affected,
        engine_faults: engine.faults.clone(),
        cpu,
        max_late_ns,
    }
}

/// A histogram's counts since an earlier reading of it (`before`).
fn hist_since(now: &[u64], before: &[u64]) -> Vec<u64> {
    now.iter()
        .enumerate()
        .map(|(i, x)| x.saturating_sub(before.get(i).copied().unwrap_or(0)))
        .collect()
}

/// The counters of one direction between two snapshots.
pub fn delta(now: &DirStats, before: &DirStats) -> DirStats {
    let sub = hist_since;
    let late_hist: Vec<u64> = sub(&now.late_hist, &before.late_hist);
    // (The counters keep the run's latest; a window's is at most that and its
    // histogram's highest bucket — exact when the run's latest came in it.)
    let late_max_ns = now.late_max_ns.min(bucket_quantile_ns(&late_hist, 1.0).unwrap_or(0));
    DirStats {
        tx_frames: now.tx_frames.saturating_sub(before.tx_frames),
        tx_bytes: now.tx_bytes.saturating_sub(before.tx_bytes),
        serializer_busy_ns: now.serializer_busy_ns.saturating_sub(before.serializer_busy_ns),
        serializer_gap_ns: now.serializer_gap_ns.saturating_sub(before.serializer_gap_ns),
        write_errors: now.write_errors.saturating_sub(before.write_errors),
        underlay_lost: now.underlay_lost.saturating_sub(before.underlay_lost),
        late_hist,
        late_max_ns,
        input_wait_hist: sub(&now.input_wait_hist, &before.input_wait_hist),
        input_wait_max_ns: now.input_wait_max_ns,
        arrival_wait_hist: sub(&now.arrival_wait_hist, &before.arrival_wait_hist),
        arrival_wait_max_ns: now.arrival_wait_max_ns,
        ..DirStats::default()
    }
}

/// A line for people: the verdict and the worst directions.
pub fn describe(f: &Fidelity) -> String {
    let th = &f.thresholds;
    let mut s = format!(
        "fidelity {}: {} of {} frames written more than {} late (degraded above {:.1}%, invalid above {:.1}%)",
        match f.verdict {
            Verdict::Ok => "ok",
            Verdict::Degraded => "DEGRADED",
            Verdict::Invalid => "INVALID",
        },
        f.late_frames,
        f.frames,
        fmt_ns(th.late_ns),
        th.degraded_fraction * 100.0,
        th.invalid_fraction * 100.0
    );
    if f.frames > 0 {
        s.push_str(&format!("; the latest {} late", fmt_ns(f.max_late_ns)));
    }
    for a in f.affected.iter().take(10) {
        s.push_str(&format!(
            "\n  {:?} {}: {:.1}% late ({} of {}), p99 {}, max {}, {} refused by the TAP",
            a.verdict,
            a.name,
            a.late_fraction * 100.0,
            a.late_frames,
            a.frames,
            fmt_ns(a.p99_late_ns),
            fmt_ns(a.max_late_ns),
            a.write_errors
        ));
        if a.underlay_lost > 0 {
            s.push_str(&format!(", {} lost by the underlay between machines", a.underlay_lost));
        }
        if a.input_probes > 0 {
            s.push_str(&format!(
                "; input queue: p99 {}, {} of {} probes waited longer",
                fmt_ns(a.p99_input_wait_ns),
                a.input_late_probes,
                a.input_probes
            ));
        }
        if a.arrival_late_frames > 0 {
            s.push_str(&format!(
                "; on the receiving machine: p99 {} from arrival to write, {} frames waited longer",
                fmt_ns(a.p99_arrival_wait_ns),
                a.arrival_late_frames
            ));
        }
    }
    if f.affected.len() > 10 {
        s.push_str(&format!("\n  ... and {} more", f.affected.len() - 10));
    }
    if !f.shard_busy.is_empty() {
        let busy: Vec<String> = f.shard_busy.iter().map(|b| format!("{:.0}%", b * 100.0)).collect();
        s.push_str(&format!(
            "\n  engine shards busy {} of the time; busier than {:.0}% in {} of {} seconds",
            busy.join(", "),
            th.busy_fraction * 100.0,
            f.saturated_windows,
            f.windows
        ));
    }
    let cpu = &f.cpu;
    if cpu.starved_windows > 0 {
        let machine = match cpu.worst_machine.as_str() {
            "" => String::new(),
            m => format!(" (worst: machine {m})"),
        };
        s.push_str(&format!(
            "\n  the lab's software waited for CPU: in {} of {} seconds the machine's tasks waited more than {:.0}% of the time (up to {:.0}%{machine}) — results may reflect this machine's CPU, not the network",
            cpu.starved_windows,
            cpu.windows,
            th.cpu_pressure * 100.0,
            cpu.worst_pressure * 100.0
        ));
        if !cpu.waiting_nodes.is_empty() {
            let nodes: Vec<String> =
                cpu.waiting_nodes.iter().map(|(n, w)| format!("{n} {:.0}%", w * 100.0)).collect();
            s.push_str(&format!(
                "; nodes that waited most (of those seconds): {}",
                nodes.join(", ")
            ));
        }
    }
    if cpu.paced_windows > 0 {
        s.push_str(&format!(
            "\n  the machine's tasks also waited for CPU in {} of {} seconds, but the links carrying bulk traffic kept their set rates (their serializers busy at least {:.0}% of the time they had traffic): not counted",
            cpu.paced_windows,
            cpu.windows,
            PACE_HELD * 100.0
        ));
    }
    if cpu.stolen_windows > 0 {
        s.push_str(&format!(
            "\n  the hypervisor took this machine's CPUs in {} of {} seconds (up to {:.1}% of a second's CPU time): frames late then waited for the virtual machine to run, not for vemu",
            cpu.stolen_windows,
            cpu.windows,
            cpu.worst_steal * 100.0
        ));
    }
    for fault in &f.engine_faults {
        s.push_str(&format!(
            "\n  {fault}: its links and segments no longer forward (restart the lab)"
        ));
    }
    if f.tap_dropped > 0 {
        s.push_str(&format!("\n  {} frames dropped by the nodes' kernels on full TAP queues (the engine did not read them in time)", f.tap_dropped));
    }
    for t in f.taps_affected.iter().take(10) {
        s.push_str(&format!(
            "\n  {:?} {} TAP queue: {:.1}% dropped ({} of {})",
            t.verdict,
            t.port,
            t.dropped_fraction * 100.0,
            t.dropped,
            t.read + t.dropped
        ));
    }
    s
}

/// A duration for people: `950 µs`, `2.5 ms`, `1.2 s`.
pub fn fmt_ns(ns: u64) -> String {
    match ns {
        u64::MAX => "more than 10 s".into(),
        n if n >= 1_000_000_000 => format!("{:.1} s", n as f64 / 1e9),
        n if n >= 1_000_000 => format!("{:.1} ms", n as f64 / 1e6),
        n => format!("{:.0} µs", n as f64 / 1e3),
    }
}

/// How often the monitor judges the last stretch of the run.
pub const WINDOW: std::time::Duration = std::time::Duration::from_secs(1);

/// What the monitor has seen so far.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    /// The verdict on the last window.
    pub now: Option<Fidelity>,
    pub windows: u64,
    pub saturated_windows: u64,
    /// The TAP counters at the last window (read by the monitor only: a netlink dump
    /// per node is too dear for every stats request).
    pub taps: Vec<TapQueue>,
    /// What the lab's software waited for a CPU, over the windows so far; each node's
    /// processes' wait so far, ns.
    pub cpu: CpuEvidence,
    pub cpu_waits: std::collections::HashMap<String, u64>,
}

pub(crate) fn tap_delta(now: &[TapQueue], before: &[TapQueue]) -> Vec<TapQueue> {
    now.iter()
        .enumerate()
        .map(|(i, t)| {
            let b = before.get(i).filter(|b| b.port == t.port).cloned().unwrap_or_default();
            TapQueue {
                port: t.port.clone(),
                read: t.read.saturating_sub(b.read),
                dropped: t.dropped.saturating_sub(b.dropped),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
