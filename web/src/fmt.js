// Numbers and settings as vemu's command line writes them.

export function fmtRate(bps) {
  if (bps >= 1e9) return (bps / 1e9).toFixed(2) + ' Gbit/s';
  if (bps >= 1e6) return (bps / 1e6).toFixed(2) + ' Mbit/s';
  if (bps >= 1e3) return (bps / 1e3).toFixed(1) + ' kbit/s';
  return Math.round(bps) + ' bit/s';
}

export function fmtNs(ns) {
  if (ns >= 1e9) return +(ns / 1e9).toFixed(3) + 's';
  if (ns >= 1e6) return +(ns / 1e6).toFixed(3) + 'ms';
  if (ns >= 1e3) return +(ns / 1e3).toFixed(3) + 'us';
  return ns ? ns + 'ns' : '0';
}

const pct = (p) => +(p * 100).toFixed(4) + '%';

/// The settings an impairments object (or a patch of one: only what it sets) names.
function parts(imp, always) {
  const out = [];
  if (imp.rate_bps) out.push('bandwidth ' + fmtRate(imp.rate_bps));
  if (always || imp.delay_ns !== undefined && imp.delay_ns !== null) out.push('delay ' + fmtNs(imp.delay_ns || 0));
  if (imp.jitter && (always ? imp.jitter.amount_ns : true)) out.push('jitter ' + fmtNs(imp.jitter.amount_ns));
  if (imp.loss && imp.loss.model === 'bernoulli') out.push('loss ' + pct(imp.loss.rate));
  if (imp.loss && imp.loss.model === 'gilbert-elliott') out.push('loss gilbert-elliott');
  if (imp.loss && imp.loss.model === 'none' && !always) out.push('no loss');
  if (imp.ber) out.push('ber ' + imp.ber.toExponential());
  if (imp.phantom_bps) out.push('phantom load ' + fmtRate(imp.phantom_bps));
  for (const k of ['duplicate', 'corrupt', 'reorder']) if (imp[k] && (always ? imp[k].probability : true)) out.push(`${k} ${pct(imp[k].probability)}`);
  if (imp.queue) out.push('queue ' + (imp.queue.packets !== undefined ? imp.queue.packets + ' frames' : imp.queue.bytes + ' bytes'));
  if (imp.shaper && imp.shaper !== 'engine') out.push(imp.shaper + ' shaper');
  return out;
}

/// One line for a direction's impairments, as `vemu status` says it.
export const describe = (imp) => parts(imp, true).join(', ');

/// One line for what a change (a timeline event's patch) sets.
export const describePatch = (p) => parts(p || {}, false).join(', ') || 'nothing';

/// One line for an event of the scenario's timeline (its JSON in `GET /v1/timeline`).
export function describeEvent(e) {
  const t = e.target.link ? `link ${e.target.link.spec}` + (e.target.link.direction !== 'both' ? ` (${e.target.link.direction})` : '') : `node ${e.target.node}`;
  const a = e.action;
  let what;
  if (a.set) what = 'set ' + describePatch(a.set);
  else if (a.state !== undefined) what = e.target.link ? (a.state ? 'up' : 'down') : (a.state ? 'start' : 'stop');
  else if (a.ramp) what = `ramp ${describePatch(a.ramp.from)} → ${describePatch(a.ramp.to)} over ${fmtNs(a.ramp.over_ns)}, step ${fmtNs(a.ramp.step_ns)}`;
  else if (a.cycle) what = 'cycle ' + a.cycle.map(describePatch).join(' / ');
  else if (a.run !== undefined) what = `run "${a.run}"`;
  else if (a.move) what = `move to (${a.move.x_m}, ${a.move.y_m})` + (a.move.speed_mps ? ` at ${a.move.speed_mps} m/s` : '');
  else what = JSON.stringify(a);
  const when = 'at ' + fmtNs(e.at_ns) + (e.every_ns ? `, every ${fmtNs(e.every_ns)}` + (e.until_ns ? ` until ${fmtNs(e.until_ns)}` : '') : '');
  return `${when}: ${t}: ${what}`;
}
