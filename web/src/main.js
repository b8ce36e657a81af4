// vemu's web interface: the lab's topology, live, from the controller's own HTTP API
// (GET /v1/lab, the /v1/events stream, PATCH /v1/links/..., the shell WebSocket).
import cytoscape from 'cytoscape';
import fcose from 'cytoscape-fcose';
import { Terminal } from '@xterm/xterm';
import { FitAddon } from '@xterm/addon-fit';
import '@xterm/xterm/css/xterm.css';
import './style.css';
import { fmtRate, fmtNs, describe } from './fmt.js';
import { History, rows, plotsIn, download } from './plots.js';
import { Timeline } from './timeline.js';
import { Editor } from './editor.js';

cytoscape.use(fcose);

const $ = (s) => document.querySelector(s);
const enc = encodeURIComponent;

const state = {
  lab: null, // the last GET /v1/lab
  cy: null,
  selected: null, // { kind: 'node' | 'link' | 'port', name }
  rates: {}, // edge id -> bits/s, both directions together
  prev: null, // the previous stats event
  clock: { labNs: 0, at: 0 },
  term: null,
  history: new History(), // per link and port: throughput, queue, time held
  plots: null, // the selected link's or port's plots
  evidence: {}, // graph id -> the fidelity monitor's evidence against it
  timeline: null,
  editor: null,
};
window.vemu = state; // for tests and for the curious (the browser's console)

/// The session this page holds (in its origin's sessionStorage: this address and
/// port only, never sent by the browser on its own), traded for the login link's
/// one-time secret (the link's #once=...) the first time.
const SESSION_KEY = 'vemu-session';
async function login() {
  const once = /[#&]once=([0-9a-f]+)/.exec(location.hash);
  if (once) {
    history.replaceState(null, '', location.pathname + location.search);
    const r = await fetch('/ui/session', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ once: once[1] }) });
    const v = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(v.error || `HTTP ${r.status}`);
    sessionStorage.setItem(SESSION_KEY, v.session);
  }
  const s = sessionStorage.getItem(SESSION_KEY);
  if (!s) throw new Error("not logged in: open a login link from 'vemu ui --lab LAB'");
  state.session = s;
}

const authed = (headers = {}) => ({ ...headers, 'x-vemu-session': state.session });

async function api(method, path, body) {
  const r = await fetch(path, {
    method,
    headers: authed(body === undefined ? {} : { 'content-type': 'application/json' }),
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'omit',
  });
  const text = await r.text();
  let v;
  try { v = text ? JSON.parse(text) : {}; } catch { v = { error: text }; }
  if (!r.ok) {
    const e = new Error(v.error || `HTTP ${r.status}`);
    e.body = v;
    throw e;
  }
  return v;
}

const nodeOf = (port) => port.split(':')[0];

/// The graph's elements: nodes, LAN hubs, links, LAN ports, and on wireless segments
/// the members' neighbour relations (no hub: the medium is the air) and, in
/// infrastructure mode, each station joined to its access point.
function elements(lab) {
  const els = [];
  const aps = new Set();
  for (const g of lab.segments) for (const m of g.members) if (m.radio && m.radio.wifi && m.radio.wifi.role === 'ap') aps.add(nodeOf(m.port));
  for (const n of lab.nodes) {
    els.push({ group: 'nodes', data: { id: 'n:' + n.name, label: n.kind === 'host' ? n.name + ' (this machine)' : n.name, kind: 'node', up: n.up ? 1 : 0, host: n.kind ? 1 : 0, ap: aps.has(n.name) ? 1 : 0 } });
  }
  for (const g of lab.segments) {
    if (g.kind === 'wireless') {
      for (const m of g.members) {
        const w = m.radio && m.radio.wifi;
        if (w && w.role === 'station' && w.ap) {
          const sta = nodeOf(m.port);
          els.push({ group: 'edges', data: { id: `w:${g.name}:${sta}`, source: 'n:' + sta, target: 'n:' + w.ap, kind: 'assoc', label: w.signal_dbm != null ? `${Math.round(w.signal_dbm)} dBm` : '' } });
        }
      }
      for (const m of g.members) {
        for (const nb of (m.radio && m.radio.neighbours) || []) {
          const a = nodeOf(m.port), b = nb.node;
          if (a < b) {
            els.push({ group: 'edges', data: { id: `r:${g.name}:${a}:${b}`, source: 'n:' + a, target: 'n:' + b, kind: 'radio', p: nb.delivery_probability } });
          }
        }
      }
      continue;
    }
    els.push({ group: 'nodes', data: { id: 's:' + g.name, label: g.kind === 'hub' ? g.name + ' (hub)' : g.name, kind: 'lan' } });
    for (const m of g.members) {
      els.push({ group: 'edges', data: { id: 'p:' + m.port, source: 'n:' + nodeOf(m.port), target: 's:' + g.name, kind: 'port', name: m.port, up: m.up ? 1 : 0 } });
    }
  }
  for (const l of lab.links) {
    els.push({ group: 'edges', data: { id: 'l:' + l.name, source: 'n:' + nodeOf(l.a), target: 'n:' + nodeOf(l.b), kind: 'link', name: l.name, up: l.up ? 1 : 0 } });
  }
  return els;
}

/// Where wireless members are, in metres, by node name.
function positions(lab) {
  const pos = {};
  for (const g of lab.segments) {
    if (g.kind !== 'wireless') continue;
    for (const m of g.members) if (m.radio) pos[nodeOf(m.port)] = { x: m.radio.x_m, y: m.radio.y_m };
  }
  return pos;
}

/// Where the scenario draws nodes and LANs (`canvas: [x, y]`), by graph id.
function canvasPositions(lab) {
  const pos = {};
  for (const n of lab.nodes) if (n.canvas) pos['n:' + n.name] = { x: n.canvas[0], y: n.canvas[1] };
  for (const g of lab.segments) if (g.canvas && g.kind !== 'wireless') pos['s:' + g.name] = { x: g.canvas[0], y: g.canvas[1] };
  return pos;
}

// Wireless segments are drawn to scale: about 600 px across, whatever their size.
let PX_PER_M = 2;

/// fCoSE for a graph of `n` nodes: its draft (spectral) quality alone on big labs.
function layoutOptions(n) {
  return { name: 'fcose', quality: n > 400 ? 'draft' : 'default', animate: false, randomize: true, fit: false, idealEdgeLength: () => 60, nodeRepulsion: () => 8000, nodeSeparation: 60 };
}

/// The elements of wireless segments' cities (`cities`: segment name → city): buildings
/// (grey, lighter when walls only weaken) and streets, drawn to scale under the nodes.
function cityElements(cities) {
  const els = [];
  for (const [seg, c] of Object.entries(cities)) {
    c.obstacles.forEach((o, i) => {
      const xs = o.polygon.map((p) => p.x), ys = o.polygon.map((p) => p.y);
      const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
      const w = Math.max(x1 - x0, 1e-6), hgt = Math.max(y1 - y0, 1e-6);
      // Corners relative to the box, from -1 to 1 (cytoscape's polygon shape).
      const pts = o.polygon.map((p) => `${(2 * (p.x - x0) / w - 1).toFixed(4)} ${(2 * (p.y - y0) / hgt - 1).toFixed(4)}`).join(' ');
      els.push({ group: 'nodes', data: { id: `b:${seg}:${i}`, kind: 'building', pts, w: w * PX_PER_M, h: hgt * PX_PER_M, o: o.wall_db == null ? 0.55 : 0.25, wall: o.wall_db }, position: { x: (x0 + x1) / 2 * PX_PER_M, y: (y0 + y1) / 2 * PX_PER_M }, selectable: false, grabbable: false, locked: true });
    });
    c.roads.crossings.forEach((p, i) => els.push({ group: 'nodes', data: { id: `x:${seg}:${i}`, kind: 'crossing' }, position: { x: p.x * PX_PER_M, y: p.y * PX_PER_M }, selectable: false, grabbable: false, locked: true }));
    c.roads.streets.forEach(([a, b], i) => els.push({ group: 'edges', data: { id: `st:${seg}:${i}`, source: `x:${seg}:${a}`, target: `x:${seg}:${b}`, kind: 'street', w: Math.max(2, 8 * PX_PER_M) } }));
  }
  return els;
}

/// The cities of a lab's wireless segments that have one, by segment name.
async function citiesOf(lab) {
  const out = {};
  for (const g of lab.segments) {
    if (g.kind === 'wireless' && g.city) {
      try {
        const c = await api('GET', `/v1/segments/${enc(g.name)}/city`);
        if (c) out[g.name] = c;
      } catch (err) {
        showError(err);
      }
    }
  }
  return out;
}

function draw(lab, cities = {}) {
  const cy = cytoscape({
    container: $('#graph'),
    elements: elements(lab),
    minZoom: 0.05,
    maxZoom: 1.6, // small labs are not blown up to fill the window
    style: [
      { selector: 'node', style: { label: 'data(label)', 'font-size': 11, 'text-valign': 'bottom', 'text-margin-y': 3, width: 22, height: 22, 'background-color': '#3b6fb6' } },
      { selector: 'node[host = 1]', style: { shape: 'diamond', width: 28, height: 28, 'background-color': '#2e7d32' } },
      { selector: 'node[up = 0]', style: { 'background-color': '#aaa', 'border-width': 2, 'border-color': '#c62828' } },
      { selector: 'node[kind = "lan"]', style: { shape: 'round-rectangle', width: 34, height: 16, 'background-color': '#6b7a8f' } },
      { selector: 'edge', style: { width: 2, 'line-color': '#9aa6b6', 'curve-style': 'bezier' } },
      { selector: 'edge[up = 0]', style: { 'line-color': '#c62828', 'line-style': 'dashed' } },
      { selector: 'edge[kind = "radio"]', style: { 'line-color': '#7c4dff', opacity: 'mapData(p, 0, 1, 0.15, 0.9)', width: 1.5 } },
      { selector: 'node[ap = 1]', style: { shape: 'triangle', width: 26, height: 26, 'background-color': '#00897b' } },
      { selector: 'edge[kind = "assoc"]', style: { 'line-color': '#00897b', width: 3, label: 'data(label)', 'font-size': 9, color: '#00695c', 'text-background-color': '#fff', 'text-background-opacity': 0.8, 'curve-style': 'straight' } },
      { selector: 'node[kind = "building"]', style: { label: '', shape: 'polygon', 'shape-polygon-points': 'data(pts)', width: 'data(w)', height: 'data(h)', 'background-color': '#5d5d5d', 'background-opacity': 'data(o)', 'border-width': 1, 'border-color': '#444', events: 'no', 'z-index': 0, 'z-compound-depth': 'bottom' } },
      { selector: 'node[kind = "crossing"]', style: { label: '', width: 1, height: 1, 'background-opacity': 0, events: 'no' } },
      { selector: 'edge[kind = "street"]', style: { 'line-color': '#e8d9a8', width: 'data(w)', opacity: 0.8, 'curve-style': 'straight', events: 'no', 'z-index': 0, 'z-compound-depth': 'bottom' } },
      { selector: 'node[kind = "power"]', style: { label: '', shape: 'rectangle', width: 'data(s)', height: 'data(s)', 'background-color': 'data(c)', 'background-opacity': 0.55, events: 'no', 'z-index': 0, 'z-compound-depth': 'bottom' } },
      { selector: 'node[kind = "ring"]', style: { label: '', width: 'data(d)', height: 'data(d)', 'background-opacity': 0, 'border-width': 1.5, 'border-color': '#7c4dff', 'border-style': 'dashed', events: 'no', 'z-index': 0 } },
      { selector: 'node[what = "cs"]', style: { 'border-color': '#b0a3d9', 'border-style': 'dotted' } },
      { selector: '.degraded', style: { 'line-color': '#e0a000' } },
      { selector: '.invalid', style: { 'line-color': '#c62828' } },
      { selector: ':selected', style: { 'overlay-color': '#ffb300', 'overlay-opacity': 0.35, 'overlay-padding': 4 } },
    ],
  });
  const pos = positions(lab);
  const xs = Object.values(pos).map((p) => p.x), ys = Object.values(pos).map((p) => p.y);
  for (const c of Object.values(cities)) {
    for (const p of c.obstacles.flatMap((o) => o.polygon).concat(c.roads.crossings)) {
      xs.push(p.x);
      ys.push(p.y);
    }
  }
  if (xs.length) {
    const extent = Math.max(Math.max(...xs) - Math.min(...xs), Math.max(...ys) - Math.min(...ys), 1);
    PX_PER_M = Math.min(10, Math.max(0.01, 600 / extent));
  }
  for (const [name, p] of Object.entries(pos)) {
    const n = cy.$id('n:' + name);
    n.position({ x: p.x * PX_PER_M, y: p.y * PX_PER_M });
    n.lock();
  }
  cy.add(cityElements(cities));
  // Nodes the scenario places (an IMUNES file's canvas) are held there while the
  // layout places the others, then let go (they may be dragged).
  const placed = cy.collection();
  for (const [id, p] of Object.entries(canvasPositions(lab))) {
    const n = cy.$id(id);
    if (n.empty() || n.locked()) continue;
    n.position(p);
    n.lock();
    placed.merge(n);
  }
  // Locked (wireless) nodes stay at their positions; the layout places the others:
  // CoSE around them, fCoSE (spectral, then force-directed; far faster on big labs)
  // when nothing is locked.
  if (cy.nodes().some((n) => n.locked())) {
    if (cy.nodes().some((n) => !n.locked())) {
      cy.layout({ name: 'cose', animate: false, randomize: true, idealEdgeLength: () => 60, nodeRepulsion: () => 40000, numIter: 2500, fit: false }).run();
    }
  } else {
    cy.layout(layoutOptions(cy.nodes().length)).run();
  }
  placed.unlock();
  cy.fit(undefined, 30);
  cy.on('tap', 'node', (e) => select(e.target.data('kind') === 'lan' ? null : { kind: 'node', name: e.target.data('label') }));
  cy.on('tap', 'edge[kind = "link"]', (e) => select({ kind: 'link', name: e.target.data('name') }));
  cy.on('tap', 'edge[kind = "port"]', (e) => select({ kind: 'port', name: e.target.data('name') }));
  cy.on('tap', (e) => { if (e.target === cy) select(null); });
  // Drag a wireless node to move it (the API's move; the medium follows).
  cy.on('free', 'node', async (e) => {
    const n = e.target;
    if (!(n.data('label') in positions(state.lab))) return;
    const p = n.position();
    try {
      await api('POST', `/v1/nodes/${enc(n.data('label'))}/move`, { x: p.x / PX_PER_M, y: p.y / PX_PER_M });
    } catch (err) {
      showError(err);
    }
  });
  cy.nodes().forEach((n) => { if (n.locked()) { n.unlock(); n.grabify(); } });
  // The range circles follow the selected node, dragged or moved by the lab.
  cy.on('position', 'node[kind = "node"]', (e) => {
    if (state.selected && state.selected.kind === 'node' && e.target.data('label') === state.selected.name) {
      cy.nodes('[kind = "ring"]').position({ ...e.target.position() });
    }
  });
  // The fidelity monitor's evidence against a link or port, on hover.
  cy.on('mouseover', 'edge', (e) => {
    const ev = state.evidence[e.target.id()];
    if (!ev) return;
    const tip = $('#tip');
    tip.textContent = ev.map(evidenceText).join('\n');
    const r = $('#graph').getBoundingClientRect();
    tip.style.left = (r.left + e.renderedPosition.x + 12) + 'px';
    tip.style.top = (r.top + e.renderedPosition.y + 12) + 'px';
    tip.hidden = false;
  });
  cy.on('mouseout', 'edge', () => { $('#tip').hidden = true; });
  return cy;
}

/// Around the selected wireless node: its segment's range and carrier-sense circles.
function rings() {
  const cy = state.cy;
  if (!cy) return;
  cy.remove('node[kind = "ring"]');
  const sel = state.selected;
  if (!sel || sel.kind !== 'node' || !state.lab) return;
  const g = state.lab.segments.find((s) => s.kind === 'wireless' && s.members.some((m) => nodeOf(m.port) === sel.name));
  const n = cy.$id('n:' + sel.name);
  if (!g || n.empty()) return;
  for (const [what, r] of [['range', g.range_m], ['cs', g.carrier_sense_m]]) {
    if (r > 0 && Number.isFinite(r)) cy.add({ group: 'nodes', data: { id: 'ring:' + what, kind: 'ring', what, d: 2 * r * PX_PER_M }, position: { ...n.position() }, selectable: false, grabbable: false });
  }
}

/// One line of the fidelity monitor's evidence against a direction.
function evidenceText(d) {
  return `${d.verdict}: ${d.name}: ${d.late_frames} of ${d.frames} frames late (${(d.late_fraction * 100).toFixed(2)}%), p99 ${fmtNs(d.p99_late_ns)}, max ${fmtNs(d.max_late_ns)}` + (d.write_errors ? `, ${d.write_errors} refused by the TAP` : '');
}

/// The graph id of a direction the monitor names: `LINK forward`, `SEGMENT PORT egress`.
function evidenceId(name) {
  const parts = name.split(' ');
  return parts.length === 3 ? 'p:' + parts[1] : 'l:' + parts[0];
}

function setHeader(lab) {
  $('#lab').textContent = 'lab ' + lab.name;
  state.clock = { labNs: lab.uptime_ns, at: performance.now() };
  const lost = (lab.machines || []).filter((m) => m.state === 'lost').map((m) => m.name);
  $('#summary').textContent = `${lab.nodes.length} nodes, ${lab.links.length} links, ${lab.segments.length} segments` +
    (lab.machines && lab.machines.length ? `, ${lab.machines.length} machines` : '') + (lost.length ? ` (lost: ${lost.join(', ')})` : '');
  const f = lab.fidelity_now || lab.fidelity;
  if (f) setFidelity(f);
}

function setFidelity(f) {
  const el = $('#fidelity');
  el.textContent = 'fidelity ' + f.verdict;
  el.className = f.verdict;
  const cpu = f.cpu || {};
  el.title = `${f.late_frames} of ${f.frames} frames late` + (f.affected && f.affected.length ? '; worst: ' + f.affected.slice(0, 3).map((d) => d.direction || d.name || '').join(', ') : '') +
    (cpu.starved_windows ? `; the lab's software waited for CPU in ${cpu.starved_windows} of ${cpu.windows} s` +
      ((cpu.waiting_nodes || []).length ? ' (most: ' + cpu.waiting_nodes.slice(0, 3).map(([n, w]) => `${n} ${Math.round(w * 100)}%`).join(', ') + ')' : '') : '') +
    (cpu.paced_windows ? `; it also waited in ${cpu.paced_windows} s while the bulk links kept their rates (not counted)` : '');
}

async function refresh() {
  const lab = await api('GET', '/v1/lab');
  const first = !state.lab;
  const shape = (l) => JSON.stringify([l.nodes.map((n) => n.name), l.links.map((x) => x.name), l.segments.map((g) => g.name)]);
  state.lab = lab;
  state.refreshedAt = performance.now();
  setHeader(lab);
  if (first || shape(lab) !== shape(state.drawn)) {
    const cities = await citiesOf(lab);
    if (state.cy) state.cy.destroy();
    state.cy = draw(lab, cities);
    state.power = null;
    state.drawn = lab;
    rings();
  } else {
    for (const n of lab.nodes) state.cy.$id('n:' + n.name).data('up', n.up ? 1 : 0);
    for (const l of lab.links) state.cy.$id('l:' + l.name).data('up', l.up ? 1 : 0);
    for (const g of lab.segments) for (const m of g.members) state.cy.$id('p:' + m.port).data('up', m.up ? 1 : 0);
    // Whom each wireless member reaches, and which access point each station is
    // joined to, change as they move.
    state.cy.batch(() => {
      state.cy.edges('[kind = "radio"], [kind = "assoc"]').remove();
      state.cy.add(elements(lab).filter((e) => e.data.kind === 'radio' || e.data.kind === 'assoc'));
    });
  }
  if (state.selected) renderPanel();
}

let refreshing = null;
function refreshSoon(afterMs = 150) {
  if (refreshing) return;
  refreshing = setTimeout(() => { refreshing = null; refresh().catch(showError); }, afterMs);
}

/// Throughput of each link and port from two stats snapshots; edge widths follow.
function onStats(v) {
  if (state.prev && state.cy) {
    const dt = (v.t_ns - state.prev.t_ns) / 1e9;
    if (dt > 0) {
      const before = {};
      for (const l of state.prev.links) before['l:' + l.name] = l.forward.tx_bytes + l.reverse.tx_bytes;
      for (const g of state.prev.segments) for (const m of g.members) before['p:' + m.port] = m.egress.tx_bytes + m.ingress.tx_bytes;
      const now = {};
      for (const l of v.links) now['l:' + l.name] = l.forward.tx_bytes + l.reverse.tx_bytes;
      for (const g of v.segments) for (const m of g.members) now['p:' + m.port] = m.egress.tx_bytes + m.ingress.tx_bytes;
      for (const [id, b] of Object.entries(now)) {
        const bps = Math.max(0, (b - (before[id] || 0)) * 8 / dt);
        state.rates[id] = bps;
        const e = state.cy.$id(id);
        if (e.nonempty()) e.style('width', 2 + Math.min(10, Math.max(0, Math.log10(bps + 1) - 3) * 2));
      }
    }
  }
  // Directions the monitor found degraded or invalid are marked; the evidence is in
  // the edge's tooltip (the panel).
  if (state.cy) {
    state.cy.edges().removeClass('degraded invalid');
    const f = v.fidelity_now || v.fidelity;
    state.evidence = {};
    for (const d of (f && f.affected) || []) {
      const id = evidenceId(d.name || '');
      (state.evidence[id] = state.evidence[id] || []).push(d);
      const e = state.cy.$id(id);
      if (e.nonempty() && !e.hasClass('invalid')) e.removeClass('degraded').addClass(d.verdict);
    }
    if (f) setFidelity(f);
  }
  if (state.prev) {
    state.history.add(rows(state.prev, v));
    if (state.plots) state.plots.update();
  }
  state.prev = v;
  state.clock = { labNs: v.t_ns, at: performance.now() };
  fillLive();
}

/// The live counters of the selected link or port (the rest of the panel, and what the
/// user is typing there, stays).
function fillLive() {
  const sel = state.selected;
  if (!sel || sel.kind === 'node' || !state.prev) return;
  let dirs = null;
  if (sel.kind === 'link') {
    const l = state.prev.links.find((x) => x.name === sel.name);
    if (l) dirs = [l.forward, l.reverse];
  } else {
    for (const g of state.prev.segments) {
      const m = g.members.find((x) => x.port === sel.name);
      if (m) dirs = [m.egress, m.ingress];
    }
  }
  if (!dirs) return;
  dirs.forEach((st, k) => {
    const set = (what, text) => { const el = document.getElementById(`live-${k}-${what}`); if (el) el.textContent = text; };
    set('path', st.kernel_shaper ? 'kernel (token bucket)' : st.kernel_path ? 'kernel' : st.tunnel_lent ? 'tunnel (bulk TCP: lent to the engines)' : st.transit_ns ? `tunnel (underlay ${fmtNs(st.transit_ns)})` : 'engine');
    set('frames', `${st.tx_frames} of ${st.rx_frames} delivered`);
    set('dropped', `loss ${st.drop_loss}, queue ${st.drop_queue}, down ${st.drop_down}`);
    set('queue', `${st.queue_frames} frames (max ${st.queue_frames_max})`);
  });
  const id = (sel.kind === 'link' ? 'l:' : 'p:') + sel.name;
  const rate = document.getElementById('live-rate');
  if (rate && state.rates[id] !== undefined) rate.textContent = ` · ${fmtRate(state.rates[id])} now`;
}

/// The lab's event stream (server-sent events, read with fetch: EventSource cannot send
/// the session header), read until the lab is down; reconnects a second after a break.
async function listen() {
  let down = false;
  const onEvent = (data) => {
    const v = JSON.parse(data);
    switch (v.type) {
      case 'stats': onStats(v); break;
      case 'positions':
        state.moves = (state.moves || 0) + v.moved.length;
        for (const p of v.moved) {
          const n = state.cy && state.cy.$id('n:' + p.node);
          if (n && n.nonempty() && !n.grabbed()) n.position({ x: p.x_m * PX_PER_M, y: p.y_m * PX_PER_M });
        }
        // Neighbours from the lab's status, at most once a second.
        refreshSoon(Math.max(150, 1000 - (performance.now() - (state.refreshedAt || 0))));
        break;
      case 'lab-down':
        down = true;
        $('#conn').textContent = 'the lab is down';
        $('#conn').className = 'bad';
        break;
      case 'warning': break;
      case 'timeline':
        if (state.timeline) state.timeline.fired(v.event);
        refreshSoon();
        break;
      case 'expect':
        if (state.timeline) state.timeline.checked(v.check);
        break;
      case 'wifi':
        // A station joined, lost or changed its access point: drawn at once, and
        // marked on the timeline.
        if (state.timeline) state.timeline.wifi(v);
        refreshSoon(50);
        break;
      default: refreshSoon(); // link, node, machine-lost, timeline...
    }
  };
  while (!down) {
    try {
      const r = await fetch('/v1/events?stats=1s', { headers: authed({ accept: 'text/event-stream' }), credentials: 'omit' });
      if (!r.ok) throw new Error(`HTTP ${r.status}`);
      $('#conn').textContent = 'live';
      $('#conn').className = 'ok';
      const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      while (!down) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value.replace(/\r\n/g, '\n');
        let end;
        while ((end = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, end);
          buf = buf.slice(end + 2);
          const data = block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, '')).join('\n');
          if (data) onEvent(data);
        }
      }
      if (down) reader.cancel().catch(() => {});
    } catch (e) {
      // The stream broke (the controller restarted, the network): tried again.
    }
    if (!down) {
      $('#conn').textContent = 'reconnecting…';
      $('#conn').className = 'bad';
      await new Promise((ok) => setTimeout(ok, 1000));
    }
  }
}

function select(sel) {
  state.selected = sel;
  if (state.cy) {
    state.cy.elements().unselect();
    if (sel) state.cy.$id((sel.kind === 'node' ? 'n:' : sel.kind === 'link' ? 'l:' : 'p:') + sel.name).select();
  }
  rings();
  renderPanel();
}

function showError(err) {
  const el = $('#panel .error') || $('#panel').appendChild(document.createElement('p'));
  el.className = 'error';
  el.textContent = String(err.message || err);
}

const h = (tag, attrs = {}, ...kids) => {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v);
  }
  for (const k of kids) el.append(k);
  return el;
};

function renderPanel() {
  const panel = $('#panel');
  // Keep what the user is typing: the panel of a link being edited is not redrawn.
  if (panel.contains(document.activeElement) && document.activeElement.tagName === 'INPUT') return;
  const sel = state.selected, lab = state.lab;
  // Unchanged: the panel (and the buttons the user may be about to click) stays.
  const shown = sel && lab && (sel.kind === 'node' ? lab.nodes.find((n) => n.name === sel.name)
    : sel.kind === 'link' ? lab.links.find((l) => l.name === sel.name)
    : lab.segments.flatMap((g) => g.members).find((m) => m.port === sel.name));
  const key = JSON.stringify([sel, shown && sel.kind === 'node' ? shown : shown && [shown.up, shown.forward || shown.egress, shown.reverse || shown.ingress].map((d) => d && d.impairments !== undefined ? d.impairments : d)]);
  if (key === state.panelKey && panel.firstChild) return;
  state.panelKey = key;
  if (state.plots) { state.plots.destroy(); state.plots = null; }
  clearInterval(state.logTimer);
  panel.replaceChildren();
  if (!sel || !lab) {
    panel.append(h('p', { class: 'hint' }, 'Click a node, a link or a LAN port to see and change it.'));
    return;
  }
  if (sel.kind === 'node') return renderNode(panel, lab.nodes.find((n) => n.name === sel.name));
  const dirs = [];
  let up, title;
  if (sel.kind === 'link') {
    const l = lab.links.find((x) => x.name === sel.name);
    if (!l) return;
    dirs.push(['forward', `${l.a} → ${l.b}`, l.forward.impairments]);
    dirs.push(['reverse', `${l.b} → ${l.a}`, l.reverse.impairments]);
    up = l.up; title = 'link ' + l.name;
  } else {
    const g = lab.segments.find((x) => x.members.some((m) => m.port === sel.name));
    const m = g && g.members.find((x) => x.port === sel.name);
    if (!m) return;
    dirs.push(['forward', `${m.port} → ${g.name} (egress)`, m.egress.impairments]);
    dirs.push(['reverse', `${g.name} → ${m.port} (ingress)`, m.ingress.impairments]);
    up = m.up; title = `port ${m.port} of LAN ${g.name}`;
  }
  panel.append(h('h2', {}, title));
  panel.append(h('p', {}, up ? 'up' : 'DOWN', h('span', { id: 'live-rate' })));
  dirs.forEach(([, what, imp], k) => {
    panel.append(h('h3', {}, what));
    panel.append(h('table', {},
      h('tr', {}, h('th', {}, 'set'), h('td', { class: 'imp' }, describe(imp))),
      ...['path', 'frames', 'dropped', 'queue'].map((w) => h('tr', {}, h('th', {}, w), h('td', { id: `live-${k}-${w}` })))));
  });
  // Change: the same values and messages as `vemu link set`.
  const fields = ['delay', 'jitter', 'loss', 'ber', 'phantom', 'bandwidth', 'queue', 'duplicate', 'corrupt', 'reorder', 'shaper'];
  const inputs = {};
  const form = h('form', { id: 'impform' });
  const table = h('table', {});
  for (const f of fields) {
    inputs[f] = h('input', { name: f, placeholder: { delay: '10ms', jitter: '2ms', loss: '1%', ber: '1e-6', phantom: '4Mbit', bandwidth: '10Mbit', queue: '100', duplicate: '0.1%', corrupt: '0.1%', reorder: '1%', shaper: 'engine or kernel' }[f] });
    table.append(h('tr', {}, h('th', {}, f), h('td', {}, inputs[f])));
  }
  const direction = h('select', { name: 'direction' }, h('option', { value: 'both' }, 'both directions'), h('option', { value: 'forward' }, 'forward'), h('option', { value: 'reverse' }, 'reverse'));
  form.append(h('h3', {}, 'change'), table, h('p', {}, direction));
  form.append(h('div', { class: 'buttons' },
    h('button', { type: 'submit', id: 'apply' }, 'apply'),
    h('button', { type: 'button', id: 'toggle', onclick: () => act(`/v1/links/${enc(sel.name)}/${up ? 'down' : 'up'}`) }, up ? 'take down' : 'bring up')));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = { direction: direction.value };
    for (const f of fields) if (inputs[f].value.trim()) body[f] = inputs[f].value.trim();
    if (Object.keys(body).length === 1) return showError('nothing to change: fill in at least one value');
    try {
      await api('PATCH', `/v1/links/${enc(sel.name)}`, body);
      document.activeElement.blur();
      await refresh();
    } catch (err) {
      showError(err);
    }
  });
  panel.append(form);
  // Over time: throughput, queue, time held; exportable.
  const id = (sel.kind === 'link' ? 'l:' : 'p:') + sel.name;
  const ev = state.evidence[id];
  if (ev) panel.append(h('h3', {}, 'fidelity'), h('p', { class: 'evidence' }, ev.map(evidenceText).join('\n')));
  const plots = h('div', { id: 'plots' });
  panel.append(h('h3', {}, 'over time'), plots, h('div', { class: 'buttons' },
    h('button', { type: 'button', id: 'export-csv', onclick: () => download(`${sel.name.replace(/:/g, '-')}.csv`, state.history.csv(id), 'text/csv') }, 'export CSV'),
    h('button', { type: 'button', id: 'export-png', onclick: () => state.plots && download(`${sel.name.replace(/:/g, '-')}.png`, state.plots.png()) }, 'export PNG')));
  state.plots = plotsIn(plots, state.history, id, sel.kind === 'link' ? ['forward', 'reverse'] : ['egress', 'ingress']);
  fillLive();
}

async function act(path) {
  try {
    await api('POST', path, {});
    await refresh();
  } catch (err) {
    showError(err);
  }
}

function renderNode(panel, n) {
  if (!n) return;
  panel.append(h('h2', {}, 'node ' + n.name));
  panel.append(h('p', {}, (n.up ? 'up' : 'DOWN') + (n.machine ? ` · on machine ${n.machine}` : '')));
  const ifs = h('table', {});
  for (const i of n.ifaces) ifs.append(h('tr', {}, h('th', {}, i.name), h('td', {}, i.addrs.join(' '))));
  panel.append(h('h3', {}, 'interfaces'), ifs);
  if (n.processes.length) {
    const ps = h('table', {});
    for (const p of n.processes) ps.append(h('tr', {}, h('td', {}, p.command), h('td', {}, typeof p.state === 'string' ? p.state : JSON.stringify(p.state))));
    panel.append(h('h3', {}, 'run'), ps);
  }
  if (n.kind) {
    // The machine itself, or a NIC's wire: vemu runs nothing there and keeps no log of it.
    panel.append(h('p', { class: 'hint' }, n.kind === 'host'
      ? 'This node is the machine the lab runs on (kind: host): its programs reach the lab through these interfaces.'
      : 'This node is what is on the wire of a network interface of the machine (kind: external): its frames cross the lab.'));
    return;
  }
  if (n.usage) {
    panel.append(h('h3', {}, 'use'), h('p', {}, `cpu ${(n.usage.cpu_ns / 1e9).toFixed(2)} s, memory ${(n.usage.memory_bytes / 1048576).toFixed(1)} MiB, ${n.usage.processes} processes`));
  }
  // Its radios, kept current while the panel shows it.
  const radio = h('div', { id: 'radio' });
  panel.append(radio);
  fillRadio(radio, n.name);
  const air = state.lab.segments.find((g) => g.kind === 'wireless' && g.members.some((m) => nodeOf(m.port) === n.name));
  panel.append(h('div', { class: 'buttons' },
    ...(air ? [h('button', { type: 'button', id: 'power', onclick: () => togglePower(air.name, n.name) }, 'received power')] : []),
    h('button', { type: 'button', id: 'terminal', onclick: () => openTerminal(n.name) }, 'terminal'),
    h('button', { type: 'button', id: 'toggle', onclick: () => act(`/v1/nodes/${enc(n.name)}/${n.up ? 'stop' : 'start'}`) }, n.up ? 'stop' : 'start')));
  // The end of its log, followed while the panel shows it.
  const log = h('pre', { id: 'nodelog' });
  panel.append(h('h3', {}, 'log'), log);
  const follow = async () => {
    try {
      const v = await api('GET', `/v1/nodes/${enc(n.name)}/log?bytes=8192`);
      const atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
      if (log.textContent !== v.text) {
        log.textContent = v.text || '(nothing yet)';
        if (atEnd) log.scrollTop = log.scrollHeight;
      }
    } catch (err) {
      log.textContent = String(err.message || err);
    }
  };
  follow();
  // (Radio counters come with the lab's document: asked for again while they show.)
  state.logTimer = setInterval(() => { follow(); if (radio.firstChild) refreshSoon(); fillRadio(radio, n.name); }, 2000);
}

/// Show (or take away) the received-power map of node `name` on wireless segment `seg`:
/// what a receiver would hear of it at each point, its propagation model and the city's
/// walls — red strong, blue at the threshold, grey below it, nothing where nothing gets
/// through.
async function togglePower(seg, name) {
  const cy = state.cy;
  if (!cy) return;
  const shown = state.power;
  cy.remove('node[kind = "power"]');
  state.power = null;
  if (shown && shown.seg === seg && shown.name === name) return;
  let m;
  try {
    m = await api('GET', `/v1/segments/${enc(seg)}/power?node=${enc(name)}`);
  } catch (err) {
    showError(err);
    return;
  }
  const els = [];
  const span = 40; // dB above the threshold that is "strong"
  m.dbm.forEach((v, i) => {
    if (v == null) return;
    const c = i % m.cols, r = Math.floor(i / m.cols);
    const f = Math.max(0, Math.min(1, (v - m.threshold_dbm) / span));
    const color = v < m.threshold_dbm ? '#c8c8c8' : `hsl(${Math.round(240 * (1 - f))}, 85%, 50%)`;
    els.push({ group: 'nodes', data: { id: `pw:${i}`, kind: 'power', s: m.cell_m * PX_PER_M, c: color, dbm: v }, position: { x: (m.x0_m + (c + 0.5) * m.cell_m) * PX_PER_M, y: (m.y0_m + (r + 0.5) * m.cell_m) * PX_PER_M }, selectable: false, grabbable: false, locked: true });
  });
  cy.add(els);
  state.power = { seg, name, cells: els.length, dark: m.dbm.filter((v) => v == null).length };
}

/// What node `name`'s radios do (its members of wireless segments): on an 802.11 channel
/// its MAC — rate, contention window, data frames sent, retried, acknowledged and
/// dropped at the retry limit, frames received intact and in error — and per neighbour
/// the signal it hears it with, the chance a frame reaches it, and what its frames to it
/// became: delivered, lost to collisions, lost to a weak signal.
function fillRadio(el, name) {
  const out = [];
  for (const g of (state.lab && state.lab.segments) || []) {
    if (g.kind !== 'wireless') continue;
    for (const m of g.members) {
      if (nodeOf(m.port) !== name || !m.radio) continue;
      const r = m.radio, mac = r.mac;
      out.push(h('h3', {}, `radio ${m.port.split(':')[1]} on ${g.name}`));
      const w = r.wifi;
      if (w && w.role === 'ap') {
        out.push(h('p', { class: 'wifi' }, `access point of '${w.ssid}'${w.channel != null ? ` on channel ${w.channel}` : ''}: ${w.stations && w.stations.length ? w.stations.join(', ') : 'no stations'}`));
      } else if (w && w.role === 'station') {
        out.push(h('p', { class: 'wifi' }, (w.ap ? `station of '${w.ssid || 'any SSID'}' on ${w.ap} (${w.channel != null ? `channel ${w.channel}, ` : ''}${(w.signal_dbm || 0).toFixed(1)} dBm)` : `station of '${w.ssid || 'any SSID'}', not associated`)
          + (w.handovers ? `, ${w.handovers} handover${w.handovers === 1 ? '' : 's'}, last ${w.last_handover_ms.toFixed(1)} ms` : '')));
      }
      if (mac) {
        out.push(h('p', { class: 'mac' }, `rate ${fmtRate(mac.rate_bps || 0)}, CW ${mac.cw}: ${mac.tx_data} data frames sent, ${mac.tx_retries} of them retries, ${mac.tx_rts} RTS; `
          + `${mac.acked} acknowledged, ${mac.dropped_retry_limit} dropped at the retry limit; ${mac.rx_ok} frames received intact, ${mac.rx_error} in error`));
      }
      const peers = new Map();
      for (const nb of r.neighbours || []) peers.set(nb.node, { nb });
      for (const p of r.sent_to || []) peers.set(p.node, { ...(peers.get(p.node) || {}), p });
      const t = h('table', { class: 'radio' }, h('tr', {}, ...['to', 'signal', 'reach', 'sent', 'delivered', 'collided', 'too weak'].map((x) => h('th', {}, x))));
      for (const [node, { nb, p }] of [...peers].sort()) {
        const cell = (v) => h('td', {}, v === undefined || v === null ? '–' : String(v));
        t.append(h('tr', { 'data-node': node }, h('th', {}, node),
          cell(nb && nb.signal_dbm != null ? nb.signal_dbm.toFixed(1) + ' dBm' : null),
          cell(nb ? (nb.delivery_probability * 100).toFixed(1) + ' %' : 'out of range'),
          cell(p && p.sent), cell(p && p.delivered), cell(p && p.lost_collision), cell(p && p.lost_channel)));
      }
      out.push(t);
    }
  }
  el.replaceChildren(...out);
}

/// A terminal in the node: xterm.js over the API's shell WebSocket (a real PTY there).
function openTerminal(node) {
  closeTerminal();
  $('#termbox').hidden = false;
  $('#termtitle').textContent = 'shell in ' + node;
  const term = new Terminal({ fontSize: 13, cursorBlink: true });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open($('#term'));
  fit.fit();
  const proto = location.protocol === 'https:' ? 'wss' : 'ws';
  const ws = new WebSocket(`${proto}://${location.host}/v1/nodes/${enc(node)}/shell?rows=${term.rows}&cols=${term.cols}`);
  ws.binaryType = 'arraybuffer';
  const encoder = new TextEncoder();
  // A browser's WebSocket carries no header: its first message is the session.
  ws.onopen = () => ws.send(JSON.stringify({ session: state.session }));
  ws.onmessage = (m) => {
    if (typeof m.data === 'string') {
      const v = JSON.parse(m.data);
      if (v.exit !== undefined) term.write(`\r\n[the shell ended: exit status ${v.exit}]\r\n`);
      if (v.error !== undefined) term.write(`\r\n[${v.error}]\r\n`);
      return;
    }
    term.write(new Uint8Array(m.data));
  };
  ws.onclose = () => term.write('\r\n[connection closed]\r\n');
  term.onData((d) => { if (ws.readyState === 1) ws.send(encoder.encode(d)); });
  term.onResize(({ rows, cols }) => { if (ws.readyState === 1) ws.send(JSON.stringify({ resize: { rows, cols } })); });
  const onWindow = () => fit.fit();
  window.addEventListener('resize', onWindow);
  state.term = { term, ws, onWindow, node };
  term.focus();
}

function closeTerminal() {
  if (!state.term) return;
  state.term.ws.close();
  state.term.term.dispose();
  window.removeEventListener('resize', state.term.onWindow);
  state.term = null;
  $('#termbox').hidden = true;
}

$('#termclose').addEventListener('click', closeTerminal);
setInterval(() => {
  const ns = state.clock.labNs + (performance.now() - state.clock.at) * 1e6;
  $('#clock').textContent = 't = ' + (ns / 1e9).toFixed(1) + ' s';
  if (state.timeline) state.timeline.tick(ns);
}, 200);

// The lab's view and the editor, one at a time.
function view(which) {
  $('main').hidden = which !== 'lab';
  $('#timeline').classList.toggle('away', which !== 'lab');
  $('#editor').hidden = which !== 'editor';
  for (const b of document.querySelectorAll('header [data-view]')) b.classList.toggle('on', b.dataset.view === which);
  if (which === 'editor') {
    if (!state.editor) state.editor = new Editor(api);
    state.editor.show();
  } else if (state.cy) {
    state.cy.resize();
  }
}
for (const b of document.querySelectorAll('header [data-view]')) b.addEventListener('click', () => view(b.dataset.view));

async function loadTimeline() {
  const [t, e] = await Promise.all([api('GET', '/v1/timeline'), api('GET', '/v1/expect')]);
  state.timeline = new Timeline($('#timeline'));
  state.timeline.set(t.events, t.now_ns, e.checks);
}

login().then(refresh).then(() => { listen(); state.readyMs = performance.now(); state.ready = true; return loadTimeline(); }).catch((err) => {
  $('#conn').textContent = String(err.message || err);
  $('#conn').className = 'bad';
});
