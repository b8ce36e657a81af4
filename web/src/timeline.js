// The scenario's timeline (`events:`) under the graph: a mark per firing at its lab-clock
// time, the lab clock as a moving cursor, fired marks filled in; and the lab's checks
// (`expect:`), each a bar from its start to its deadline on a row of their own, coloured
// by its state (pending, passed, failed, untrustworthy) as the judge resolves it.
import { describeEvent, fmtNs } from './fmt.js';

/// At most this many marks per event (an `every` without `until` repeats for ever).
const MAX_MARKS = 200;

/// Firing times of an event up to `horizonNs`.
export function firings(e, horizonNs) {
  const out = [e.at_ns];
  if (e.every_ns) {
    const end = Math.min(e.until_ns ?? Infinity, horizonNs);
    for (let t = e.at_ns + e.every_ns; t <= end && out.length < MAX_MARKS; t += e.every_ns) out.push(t);
  }
  return out;
}

function kind(e) {
  const a = e.action;
  if (a.state !== undefined) return a.state ? 'up' : 'down';
  if (a.run !== undefined) return 'run';
  if (a.move) return 'move';
  return 'set';
}

export class Timeline {
  constructor(el) {
    this.el = el;
    this.events = [];
    this.checks = [];
    /// Infrastructure mode's events as the event stream reports them (`wifi`).
    this.wifiEvents = [];
    this.horizonNs = 60e9;
    this.nowNs = 0;
  }

  /// The events as `GET /v1/timeline` gives them.
  /// And the checks as `GET /v1/expect` gives them.
  set(events, nowNs, checks = []) {
    this.events = events;
    this.checks = checks;
    this.nowNs = nowNs;
    this.el.hidden = events.length === 0 && checks.length === 0 && this.wifiEvents.length === 0;
    this.horizonNs = this.pickHorizon();
    this.render();
  }

  /// A station associated, roamed, lost its access point or finished a handover (the
  /// event stream's `wifi`): a mark at its time, flashing.
  wifi(v) {
    this.wifiEvents.push(v);
    this.el.hidden = false;
    this.render();
    const m = this.marks[this.marks.length - 1];
    if (m) m.classList.add('flash');
  }

  /// A check resolved (the event stream's `expect`): its bar takes its state.
  checked(result) {
    const i = this.checks.findIndex((c) => c.name === result.name);
    if (i < 0) return;
    this.checks[i] = result;
    this.render();
  }

  pickHorizon() {
    const last = Math.max(0, ...this.events.map((e) => (e.every_ns ? (e.until_ns ?? e.at_ns + 10 * e.every_ns) : e.at_ns)), ...this.checks.map((c) => c.deadline_ns), ...this.wifiEvents.map((v) => v.t_ns));
    return Math.max(60e9, last * 1.05, this.nowNs * 1.25);
  }

  render() {
    const el = this.el;
    el.replaceChildren();
    const strip = document.createElement('div');
    strip.className = 'strip';
    const pct = (t) => (100 * t / this.horizonNs).toFixed(3) + '%';
    this.marks = [];
    for (const e of this.events) {
      const text = describeEvent(e);
      for (const t of firings(e, this.horizonNs)) {
        const m = document.createElement('span');
        m.className = 'mark ' + kind(e);
        m.style.left = pct(t);
        m.title = `t = ${fmtNs(t)} — events[${e.index}] ${text}`;
        m.dataset.event = e.index;
        m.dataset.t = t;
        strip.append(m);
        this.marks.push(m);
      }
    }
    for (const v of this.wifiEvents) {
      const m = document.createElement('span');
      m.className = 'mark wifi ' + v.event;
      m.style.left = pct(v.t_ns);
      m.title = `t = ${fmtNs(v.t_ns)} — ${v.station} ${v.event} ${v.event === 'lost' ? v.ap : (v.from ? v.from + ' → ' : '') + v.ap}${v.handover_ms !== undefined ? ` (${v.handover_ms.toFixed(1)} ms)` : ''}`;
      m.dataset.t = v.t_ns;
      strip.append(m);
      this.marks.push(m);
    }
    this.cursor = document.createElement('span');
    this.cursor.className = 'cursor';
    strip.append(this.cursor);
    const checks = document.createElement('div');
    checks.className = 'checks';
    checks.hidden = this.checks.length === 0;
    this.checks.forEach((c, k) => {
      const bar = document.createElement('span');
      bar.className = 'check ' + c.outcome;
      bar.style.left = pct(c.start_ns);
      bar.style.width = pct(Math.max(c.deadline_ns - c.start_ns, this.horizonNs / 500));
      bar.style.top = (3 + (k % 3) * 5) + 'px';
      bar.title = `${c.name}: ${c.outcome}, ${c.detail}`;
      bar.dataset.check = c.name;
      checks.append(bar);
    });
    const scale = document.createElement('div');
    scale.className = 'scale';
    for (let i = 0; i <= 4; i++) {
      const s = document.createElement('span');
      s.style.left = (i * 25) + '%';
      s.textContent = fmtNs(Math.round(this.horizonNs * i / 4));
      scale.append(s);
    }
    const list = document.createElement('details');
    list.append(Object.assign(document.createElement('summary'), { textContent: `timeline: ${this.events.length} events` + (this.wifiEvents.length ? `, ${this.wifiEvents.length} of the radios (associations, handovers)` : '') }));
    const ol = document.createElement('ol');
    ol.start = 0;
    for (const e of this.events) ol.append(Object.assign(document.createElement('li'), { textContent: describeEvent(e) }));
    list.append(ol);
    const count = (o) => this.checks.filter((c) => c.outcome === o).length;
    const judged = document.createElement('details');
    judged.className = 'checklist';
    judged.hidden = this.checks.length === 0;
    judged.append(Object.assign(document.createElement('summary'), { textContent: `checks: ${this.checks.length} — ${count('passed')} passed, ${count('failed')} failed, ${count('untrustworthy')} untrustworthy, ${count('pending')} pending` }));
    const ul = document.createElement('ul');
    for (const c of this.checks) ul.append(Object.assign(document.createElement('li'), { className: c.outcome, textContent: `${c.name}: ${c.outcome}, ${c.detail}` }));
    judged.append(ul);
    el.append(list, judged, strip, checks, scale);
    this.tick(this.nowNs);
  }

  /// Move the cursor to the lab clock; marks at or before it count as fired.
  tick(nowNs) {
    this.nowNs = nowNs;
    if (this.el.hidden || !this.cursor) return;
    if (nowNs > this.horizonNs) {
      this.horizonNs = this.pickHorizon();
      return this.render();
    }
    this.cursor.style.left = (100 * nowNs / this.horizonNs).toFixed(3) + '%';
    for (const m of this.marks) m.classList.toggle('fired', +m.dataset.t <= nowNs);
  }

  /// A firing reported by the event stream: its mark flashes.
  fired(index) {
    for (const m of this.marks || []) {
      if (+m.dataset.event !== index) continue;
      m.classList.remove('flash');
      void m.offsetWidth;
      m.classList.add('flash');
    }
  }
}
