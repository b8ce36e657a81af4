//! A timeline event: when, what it changes, how it repeats or ramps.

use super::*;

/// One entry of `events:`.
pub(crate) fn event(p: &mut P, node: &Node, field: &str) -> Option<EventDef> {
    use crate::{EventAction, EventTarget, TimedEvent};
    let entries = p.map(
        node,
        field,
        &[
            "name",
            "at",
            "every",
            "until",
            "link",
            "node",
            "direction",
            "set",
            "state",
            "ramp",
            "cycle",
            "run",
            "move",
        ],
    );
    let (mut at, mut every, mut until, mut name) = (None, None, None, None);
    let (mut link, mut target_node, mut direction) = (None, None, crate::Direction::Both);
    let mut actions: Vec<(&str, EventAction)> = Vec::new();
    let mut state = None;
    for (k, _, v) in &entries {
        let f = join(field, k);
        match *k {
            "name" => name = p.string(v, &f),
            "at" => at = p.scalar(v, &f, units::duration_ns),
            "every" => {
                // A shorter period would keep a core busy for the lab's life.
                every = p.scalar(v, &f, |s| match units::duration_ns(s) {
                    Ok(n) if n < 10_000_000 => {
                        Err(format!("'every' must be at least 10ms, got '{s}'"))
                    }
                    r => r,
                })
            }
            "until" => until = p.scalar(v, &f, units::duration_ns),
            "link" => link = p.string(v, &f),
            "node" => target_node = p.string(v, &f),
            "direction" => {
                direction = p
                    .scalar(v, &f, |s| match s {
                        "both" => Ok(crate::Direction::Both),
                        "forward" => Ok(crate::Direction::Forward),
                        "reverse" => Ok(crate::Direction::Reverse),
                        _ => Err(format!("expected both, forward or reverse, got '{s}'")),
                    })
                    .unwrap_or_default()
            }
            "set" => actions.push(("set", EventAction::Set(patch_of(p, v, &f)))),
            "state" => state = p.string(v, &f).map(|s| (s, v.mark)),
            "run" => {
                if let Some(c) = p.string(v, &f) {
                    actions.push(("run", EventAction::Run(c)));
                }
            }
            "move" => {
                if let Some(m) = move_action(p, v, &f) {
                    actions.push(("move", m));
                }
            }
            "cycle" => {
                let items = p.seq(v, &f);
                if items.len() < 2 {
                    p.err(v.mark, &f, "a cycle needs at least 2 entries");
                }
                let patches = items
                    .iter()
                    .enumerate()
                    .map(|(j, x)| patch_of(p, x, &format!("{f}[{j}]")))
                    .collect();
                actions.push(("cycle", EventAction::Cycle(patches)));
            }
            "ramp" => {
                if let Some(r) = ramp_action(p, v, &f) {
                    actions.push(("ramp", r));
                }
            }
            _ => unreachable!(),
        }
    }
    let target = match (link, target_node) {
        (Some(l), None) => EventTarget::Link { spec: l, direction },
        (None, Some(n)) => EventTarget::Node(n),
        _ => {
            p.err(node.mark, field, "an event needs either 'link' (a link or LAN port) or 'node'");
            return None;
        }
    };
    if let Some((st, mark)) = state {
        actions.push(("state", EventAction::State(state_up(p, &target, &st, mark, field)?)));
    }
    let action = match actions.len() {
        1 => actions.pop().unwrap(),
        0 => {
            p.err(
                node.mark,
                field,
                "an event needs one action: set, state, ramp, cycle, run or move",
            );
            return None;
        }
        _ => {
            let names: Vec<&str> = actions.iter().map(|a| a.0).collect();
            p.err(node.mark, field, format!("an event has one action, found {}", names.join(", ")));
            return None;
        }
    };
    let ok_for = matches!(
        (&target, action.0),
        (EventTarget::Node(_), "run" | "state" | "move")
            | (EventTarget::Link { .. }, "set" | "state" | "ramp" | "cycle")
    );
    if !ok_for {
        p.err(
            node.mark,
            field,
            format!(
                "'{}' does not apply to a {}",
                action.0,
                if matches!(target, EventTarget::Node(_)) { "node" } else { "link" }
            ),
        );
        return None;
    }
    if matches!(action.1, EventAction::Cycle(_)) && every.is_none() {
        p.err(node.mark, field, "a cycle needs 'every' (each firing applies the next entry)");
    }
    let Some(at_ns) = at.or(every.map(|_| 0)) else {
        p.err(node.mark, field, "an event needs 'at' (or 'every')");
        return None;
    };
    if until.is_some() && every.is_none() {
        p.err(node.mark, field, "'until' goes with 'every'");
    }
    Some(EventDef {
        mark: node.mark,
        field: field.to_string(),
        name,
        event: TimedEvent { at_ns, every_ns: every, until_ns: until, target, action: action.1 },
    })
}

/// `move:` — `[x, y]`, or `{to: [x, y], speed: 5}` (m/s) to go there at that speed.
fn move_action(p: &mut P, v: &Node, f: &str) -> Option<crate::EventAction> {
    use crate::EventAction;
    let (mut to, mut speed) = (None, None);
    if let Value::Map(_) = v.value {
        for (mk, _, mv) in p.map(v, f, &["to", "speed"]) {
            let mf = join(f, mk);
            match mk {
                "to" => to = wireless::position(p, mv, &mf),
                _ => speed = p.scalar(mv, &mf, wireless::speed_mps),
            }
        }
    } else {
        to = wireless::position(p, v, f);
    }
    match to {
        Some(at) => Some(EventAction::Move { x_m: at.x, y_m: at.y, speed_mps: speed }),
        None => {
            if p.errors.is_empty() {
                p.err(v.mark, f, "a move needs 'to', e.g. move: {to: [500, 100], speed: 5}");
            }
            None
        }
    }
}

/// `ramp:` — from one set of impairments to another over a time, in steps.
fn ramp_action(p: &mut P, v: &Node, f: &str) -> Option<crate::EventAction> {
    use crate::EventAction;
    let mut from = None;
    let mut to = None;
    let (mut over, mut step) = (None, 1_000_000_000);
    for (rk, _, rv) in p.map(v, f, &["from", "to", "over", "step"]) {
        let rf = join(f, rk);
        match rk {
            "from" => from = Some(patch_of(p, rv, &rf)),
            "to" => to = Some(patch_of(p, rv, &rf)),
            "over" => over = p.scalar(rv, &rf, units::duration_ns),
            "step" => {
                step = p
                    .scalar(rv, &rf, |s| match units::duration_ns(s) {
                        Ok(n) if n >= 10_000_000 => Ok(n),
                        Ok(_) => Err("a ramp step must be at least 10ms".into()),
                        Err(e) => Err(e),
                    })
                    .unwrap_or(step)
            }
            _ => unreachable!(),
        }
    }
    match (from, to, over) {
        (Some(from), Some(to), Some(over_ns)) => {
            if let Err(m) = ImpairmentsPatch::interpolate(&from, &to, 0.0) {
                p.err(v.mark, f, m);
            }
            Some(EventAction::Ramp { from, to, over_ns, step_ns: step })
        }
        _ => {
            p.err(v.mark, f, "a ramp needs 'from', 'to' and 'over' (e.g. {from: {delay: 10ms}, to: {delay: 200ms}, over: 60s})");
            None
        }
    }
}

/// `state:` of an event's target: a link's `up`/`down`, a node's `start`/`stop`.
fn state_up(
    p: &mut P,
    target: &crate::EventTarget,
    st: &str,
    mark: Mark,
    field: &str,
) -> Option<bool> {
    use crate::EventTarget;
    let up = match (target, st) {
        (EventTarget::Link { .. }, "up") | (EventTarget::Node(_), "start") => true,
        (EventTarget::Link { .. }, "down") | (EventTarget::Node(_), "stop") => false,
        (EventTarget::Link { .. }, _) => {
            p.err(
                mark,
                &join(field, "state"),
                format!("a link's state is 'up' or 'down', got '{st}'"),
            );
            return None;
        }
        (EventTarget::Node(_), _) => {
            p.err(
                mark,
                &join(field, "state"),
                format!("a node's state is 'start' or 'stop', got '{st}'"),
            );
            return None;
        }
    };
    Some(up)
}

pub(crate) fn positive(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(w) if w > 0 => Ok(w),
        _ => Err(format!("expected a whole number above 0, got '{s}'")),
    }
}
