//! A link's (or a port's, or a diverted path's) impairments: delay, jitter, loss,
//! reordering, duplication, corruption, rate and queue, per direction.

use super::*;

/// The impairment keys a running lab's link takes: all but the MTU, which interfaces
/// were made with.
pub const RUNTIME_IMPAIRMENT_KEYS: &[&str] = &[
    "bandwidth",
    "delay",
    "jitter",
    "loss",
    "ber",
    "phantom",
    "duplicate",
    "corrupt",
    "reorder",
    "queue",
    "qos",
    "shaper",
    "flows",
];

/// The keys of a direction's impairments, as a scenario writes them: the one list that
/// the command line's `vemu link set` flags, the API's link change and the web page's
/// form are checked against (their tests).
pub const IMPAIRMENT_KEYS: &[&str] = &ALL_KEYS;

/// [`RUNTIME_IMPAIRMENT_KEYS`] and the MTU.
const ALL_KEYS: [&str; RUNTIME_IMPAIRMENT_KEYS.len() + 1] = {
    let mut all = ["mtu"; RUNTIME_IMPAIRMENT_KEYS.len() + 1];
    let mut i = 0;
    while i < RUNTIME_IMPAIRMENT_KEYS.len() {
        all[i] = RUNTIME_IMPAIRMENT_KEYS[i];
        i += 1;
    }
    all
};

/// A fraction written as a percentage, or an integer correlation like netem's.
pub(crate) fn chance(
    p: &mut P,
    node: &Node,
    field: &str,
    gap_ok: bool,
) -> Option<(Chance, Option<u32>)> {
    if let Value::Map(_) = node.value {
        let allowed: &[&str] = if gap_ok {
            &["probability", "correlation", "gap"]
        } else {
            &["probability", "correlation"]
        };
        let mut c = Chance::default();
        let mut gap = None;
        let mut have_prob = false;
        for (k, _, v) in p.map(node, field, allowed) {
            let f = join(field, k);
            match k {
                "probability" => {
                    have_prob = true;
                    c.probability = p.scalar(v, &f, units::percent)?;
                }
                "correlation" => c.correlation = p.scalar(v, &f, units::percent)?,
                "gap" => gap = Some(p.scalar(v, &f, integer::<u32>("a whole number of frames"))?),
                _ => unreachable!(),
            }
        }
        if !have_prob {
            p.err(node.mark, field, "missing 'probability'");
            return None;
        }
        Some((c, gap))
    } else {
        let prob = p.scalar(node, field, units::percent)?;
        Some((Chance { probability: prob, correlation: 0.0 }, None))
    }
}

pub(crate) fn loss(p: &mut P, node: &Node, field: &str) -> Option<Loss> {
    if !matches!(node.value, Value::Map(_)) {
        let rate = p.scalar(node, field, units::percent)?;
        return Some(if rate == 0.0 {
            Loss::None
        } else {
            Loss::Bernoulli { rate, correlation: 0.0 }
        });
    }
    let entries = p.map(node, field, &["model", "rate", "correlation", "p", "r", "h", "k"]);
    let mut vals: HashMap<&str, f64> = HashMap::new();
    let mut model = None;
    let mut ok = true;
    for (k, kmark, v) in &entries {
        let f = join(field, k);
        if *k == "model" {
            model = p.string(v, &f).map(|m| (m, v.mark));
        } else if let Some(x) = p.scalar(v, &f, units::percent) {
            vals.insert(k, x);
        } else {
            ok = false;
        }
        let _ = kmark;
    }
    let (model, mmark) = match model {
        Some(m) => m,
        None => {
            p.err(node.mark, field, "missing 'model' (bernoulli or gilbert-elliott)");
            return None;
        }
    };
    let keys: &[&str] = match model.as_str() {
        "bernoulli" => &["rate", "correlation"],
        "gilbert-elliott" => &["p", "r", "h", "k"],
        other => {
            p.err(
                mmark,
                &join(field, "model"),
                format!("unknown loss model '{other}', expected bernoulli or gilbert-elliott"),
            );
            return None;
        }
    };
    for (k, kmark, _) in &entries {
        if *k != "model" && !keys.contains(k) {
            p.err(
                *kmark,
                &join(field, k),
                format!(
                    "'{k}' does not belong to the {model} model (it takes {})",
                    keys.join(", ")
                ),
            );
            ok = false;
        }
    }
    if !ok {
        return None;
    }
    if model == "bernoulli" {
        let Some(&rate) = vals.get("rate") else {
            p.err(node.mark, field, "the bernoulli model needs 'rate'");
            return None;
        };
        return Some(Loss::Bernoulli {
            rate,
            correlation: vals.get("correlation").copied().unwrap_or(0.0),
        });
    }
    let Some(&gp) = vals.get("p") else {
        p.err(
            node.mark,
            field,
            "the gilbert-elliott model needs 'p' (probability of going from Good to Bad)",
        );
        return None;
    };
    // netem's defaults: r = 1 - p, 1-h = 100% (h = 0), 1-k = 0% (k = 1).
    Some(Loss::GilbertElliott {
        p: gp,
        r: vals.get("r").copied().unwrap_or(1.0 - gp),
        h: vals.get("h").copied().unwrap_or(0.0),
        k: vals.get("k").copied().unwrap_or(1.0),
    })
}

pub(crate) fn jitter(p: &mut P, node: &Node, field: &str) -> Option<Jitter> {
    if !matches!(node.value, Value::Map(_)) {
        let amount_ns = p.scalar(node, field, units::duration_ns)?;
        return Some(Jitter { amount_ns, ..Default::default() });
    }
    let mut j = Jitter::default();
    let mut have_amount = false;
    for (k, _, v) in p.map(node, field, &["amount", "distribution", "correlation"]) {
        let f = join(field, k);
        match k {
            "amount" => {
                have_amount = true;
                j.amount_ns = p.scalar(v, &f, units::duration_ns)?;
            }
            "distribution" if matches!(v.value, Value::Map(_)) => {
                j.distribution = delay::table(p, v, &f)?
            }
            "distribution" => {
                j.distribution = p.scalar(v, &f, |s| match s {
                    "uniform" => Ok(Distribution::Uniform),
                    "normal" => Ok(Distribution::Normal),
                    "pareto" => Ok(Distribution::Pareto),
                    "paretonormal" => Ok(Distribution::Paretonormal),
                    "exponential" => Ok(Distribution::Exponential),
                    _ => Err(format!(
                    "unknown distribution '{s}', expected uniform, normal, pareto, paretonormal, exponential or {{table: FILE}}"
                )),
                })?
            }
            "correlation" => j.correlation = p.scalar(v, &f, units::percent)?,
            _ => unreachable!(),
        }
    }
    if !have_amount {
        p.err(node.mark, field, "missing 'amount'");
        return None;
    }
    Some(j)
}

pub(crate) fn queue(s: &str) -> Result<QueueLimit, String> {
    let t = s.trim();
    let count = t.strip_suffix("packets").or_else(|| t.strip_suffix("frames")).unwrap_or(t).trim();
    if let Ok(n) = count.parse::<u64>() {
        return Ok(QueueLimit::Packets(n));
    }
    units::size_bytes(t)
        .map(QueueLimit::Bytes)
        .map_err(|m| format!("{m} (or a number of packets, e.g. 100)"))
}

/// A bit error rate: a probability per bit (`1e-6`), or IMUNES' way, one bit in N
/// (`1/1000000`).
pub(crate) fn bit_error_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = match t.split_once('/') {
        Some(("1", n)) => n.trim().parse::<f64>().ok().filter(|n| *n >= 1.0).map(|n| 1.0 / n),
        Some(_) => None,
        None => t.parse::<f64>().ok(),
    };
    match v {
        Some(b) if (0.0..1.0).contains(&b) => Ok(b),
        _ => Err(format!("'{t}' is not a bit error rate: a probability per bit below 1 (e.g. 1e-6), or one bit in N (1/1000000)")),
    }
}

pub(crate) fn shaper(s: &str) -> Result<Shaper, String> {
    match s.trim() {
        "engine" => Ok(Shaper::Engine),
        "kernel" => Ok(Shaper::Kernel),
        other => Err(format!("'{other}' is not a shaper: engine (exact serialization, the default) or kernel (the kernel's token bucket)")),
    }
}

/// The impairment keys among `entries`, as a patch.
pub(crate) fn impairments(p: &mut P, entries: &Entries, field: &str) -> ImpairmentsPatch {
    let mut patch = ImpairmentsPatch::default();
    for (k, _, v) in entries {
        let f = join(field, k);
        match *k {
            "bandwidth" => patch.rate_bps = p.scalar(v, &f, units::rate_bps).map(Some),
            "delay" if matches!(v.value, Value::Map(_)) => {
                if let Some((_, mark, _)) = entries.iter().find(|e| e.0 == "jitter") {
                    p.err(
                        *mark,
                        &join(field, "jitter"),
                        "a measured delay sets the jitter too (its spread): give one or the other",
                    );
                }
                if let Some((delay_ns, j)) = delay::measured(p, v, &f) {
                    patch.delay_ns = Some(delay_ns);
                    patch.jitter = Some(j);
                }
            }
            "delay" => patch.delay_ns = p.scalar(v, &f, units::duration_ns),
            "jitter" if patch.jitter.is_some() => {}
            "jitter" => patch.jitter = jitter(p, v, &f),
            "loss" => patch.loss = loss(p, v, &f),
            "ber" => patch.ber = p.scalar(v, &f, bit_error_rate),
            "phantom" if matches!(v.value, Value::Map(_)) => {
                if let Some(t) = delay::phantom_trace(p, v, &f) {
                    (patch.phantom_bps, patch.phantom_trace) = (Some(0), Some(Some(t)));
                }
            }
            "phantom" => {
                patch.phantom_bps = p.scalar(v, &f, |s| match s.trim() {
                    "0" | "none" | "off" => Ok(0),
                    r => units::rate_bps(r),
                });
                patch.phantom_trace = Some(None);
            }
            "duplicate" => patch.duplicate = chance(p, v, &f, false).map(|c| c.0),
            "corrupt" => patch.corrupt = chance(p, v, &f, false).map(|c| c.0),
            "reorder" => {
                patch.reorder = chance(p, v, &f, true).map(|(c, gap)| Reorder {
                    probability: c.probability,
                    correlation: c.correlation,
                    gap: gap.unwrap_or(1),
                })
            }
            "queue" => patch.queue = p.scalar(v, &f, queue).map(Some),
            "mtu" => {
                patch.mtu = p.scalar(v, &f, integer::<u32>("an MTU in bytes, e.g. 1500")).map(Some)
            }
            "qos" => patch.qos = qos::qos(p, v, &f),
            "flows" => patch.flows = flows(p, v, &f),
            "shaper" => patch.shaper = p.scalar(v, &f, shaper),
            _ => {}
        }
    }
    patch
}

/// `flows: [{match: {...}, delay: ..., loss: ...}, ...]`: each flow's match and its own
/// impairments (from an ideal wire).
fn flows(p: &mut P, node: &Node, field: &str) -> Option<Vec<vemu_link::Flow>> {
    let keys: Vec<&str> = std::iter::once("match")
        .chain(RUNTIME_IMPAIRMENT_KEYS.iter().copied().filter(|k| !matches!(*k, "flows" | "qos")))
        .collect();
    let items = p.seq(node, field);
    if items.len() > vemu_link::MAX_FLOWS {
        p.err(
            node.mark,
            field,
            format!("at most {} flows a direction, got {}", vemu_link::MAX_FLOWS, items.len()),
        );
        return None;
    }
    let mut out = Vec::new();
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        let f = format!("{field}[{i}]");
        let entries = p.map(item, &f, &keys);
        let Some((_, _, m)) = entries.iter().find(|e| e.0 == "match") else {
            p.err(item.mark, &f, "a flow needs 'match' (which frames: proto, src, dst, sport, dport, dscp, icmp-type)");
            ok = false;
            continue;
        };
        let Some(matches) = qos::rule(p, m, &join(&f, "match")) else {
            ok = false;
            continue;
        };
        let rest: Entries = entries.iter().filter(|e| e.0 != "match").cloned().collect();
        let patch = impairments(p, &rest, &f);
        let before = p.errors.len();
        let impairments = finish_impairments(p, &patch, item.mark, &f);
        ok &= p.errors.len() == before;
        out.push(vemu_link::Flow { matches, impairments });
    }
    ok.then_some(out)
}

/// Impairments from a patch over the neutral defaults, reporting impossible values.
pub(crate) fn finish_impairments(
    p: &mut P,
    patch: &ImpairmentsPatch,
    mark: Mark,
    field: &str,
) -> Impairments {
    let mut imp = Impairments::default();
    patch.apply_to(&mut imp);
    if let Err(m) = imp.validate() {
        p.err(mark, field, m);
    }
    imp
}

/// The two directions of a port from its impairment keys plus direction-specific
/// sub-mappings (`forward`/`reverse` on links, `egress`/`ingress` on segment members),
/// over `base`.
pub(crate) fn directions(
    p: &mut P,
    entries: &Entries,
    field: &str,
    base: [&ImpairmentsPatch; 2],
    keys: [&str; 2],
) -> [ImpairmentsPatch; 2] {
    let both = impairments(p, entries, field);
    let mut dirs = [base[0].merged(&both), base[1].merged(&both)];
    for (k, _, v) in entries {
        if let Some(d) = keys.iter().position(|x| x == k) {
            let f = join(field, k);
            let sub = p.map(v, &f, IMPAIRMENT_KEYS);
            dirs[d] = dirs[d].merged(&impairments(p, &sub, &f));
        }
    }
    dirs
}

pub(crate) fn patch_of(p: &mut P, node: &Node, field: &str) -> ImpairmentsPatch {
    let entries = p.map(node, field, IMPAIRMENT_KEYS);
    let patch = impairments(p, &entries, field);
    let mut imp = Impairments::default();
    patch.apply_to(&mut imp);
    if let Err(m) = imp.validate() {
        p.err(node.mark, field, m);
    }
    patch
}

#[cfg(test)]
mod keys {
    use super::*;

    /// A running link takes every key but the MTU, and every key the patch reader takes
    /// (`impairment_patch`, what the API and `vemu link set` use) is one of them.
    #[test]
    fn the_runtime_keys_are_the_scenarios_but_the_mtu() {
        let mut want: Vec<&str> = IMPAIRMENT_KEYS.iter().copied().filter(|&k| k != "mtu").collect();
        let mut got = RUNTIME_IMPAIRMENT_KEYS.to_vec();
        want.sort();
        got.sort();
        assert_eq!(got, want);
        for k in IMPAIRMENT_KEYS {
            assert!(!crate::impairment_patch(&[(k, "x")]).unwrap_err().starts_with("unknown"));
        }
    }
}
