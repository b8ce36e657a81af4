// The scenario editor (GINE's): draw a lab — nodes, links, LANs, their impairments and
// run commands — with its YAML beside it (either side may be edited), check it with the
// scenario loader `vemu check` uses (each problem shown at its element), download it,
// open a file (a scenario, or a GraphML, containerlab or IMUNES topology imported as
// `vemu import` does) and start it as a lab of its own.
//
// The model is the YAML document itself (the `yaml` package's Document): drawing edits
// it in place, so an opened file keeps its comments and everything the editor does not
// draw.
import cytoscape from 'cytoscape';
import YAML from 'yaml';

const $ = (s) => document.querySelector(s);

const TEMPLATE = `# Drawn in vemu's editor. Reference: docs/scenario.md
name: drawn
nodes:
  n1: {}
  n2: {}
links:
  - endpoints: [n1, n2]
    delay: 5ms
routing: static
`;

/// Fields of a link (both directions) and of a LAN the panel edits, with examples.
const LINK_FIELDS = { delay: '10ms', jitter: '1ms', loss: '1%', bandwidth: '10Mbit', queue: '100' };
const LAN_FIELDS = { delay: '100us', capacity: '1Gbit' };

/// The node an endpoint or member names (`n1`, `n1:eth0`, `{node: n1, ...}`).
const nodeName = (ep) => (typeof ep === 'string' ? ep.split(':')[0] : ep && typeof ep === 'object' ? String(ep.node ?? '') : String(ep ?? ''));

/// Where a problem reported by the checker is: the graph id of its element, from its
/// field (`links[2].delay`, `nodes.r1.run[0]`, `segments.lan1.members[3]`).
export function elementOfField(field) {
  let m = /^links\[(\d+)\]/.exec(field);
  if (m) return 'l:' + m[1];
  m = /^segments\.([^.[]+)\.members\[(\d+)\]/.exec(field);
  if (m) return `m:${m[1]}:${m[2]}`;
  m = /^segments\.([^.[]+)/.exec(field);
  if (m) return 's:' + m[1];
  m = /^nodes\.([^.[]+)/.exec(field);
  if (m) return 'n:' + m[1];
  return null;
}

const mapOf = (v) => (v && typeof v === 'object' && !Array.isArray(v) ? v : {});
const listOf = (v) => (Array.isArray(v) ? v : []);

/// The graph's elements of a scenario (its plain-JS form).
export function editorElements(js) {
  const els = [];
  const seen = new Set();
  const node = (name) => {
    if (!name || seen.has(name)) return;
    seen.add(name);
    els.push({ group: 'nodes', data: { id: 'n:' + name, label: name, kind: 'node' } });
  };
  Object.keys(mapOf(js.nodes)).forEach(node);
  listOf(js.links).forEach((l, i) => {
    const eps = listOf(l && l.endpoints);
    if (eps.length !== 2) return;
    const [a, b] = eps.map(nodeName);
    node(a); node(b);
    els.push({ group: 'edges', data: { id: 'l:' + i, source: 'n:' + a, target: 'n:' + b, kind: 'link', index: i } });
  });
  for (const [name, s] of Object.entries(mapOf(js.segments))) {
    const wireless = mapOf(s).kind === 'wireless';
    els.push({ group: 'nodes', data: { id: 's:' + name, label: name + (wireless ? ' (radio)' : ''), kind: wireless ? 'wireless' : 'lan', name } });
    listOf(mapOf(s).members).forEach((mem, j) => {
      const n = nodeName(mem);
      node(n);
      els.push({ group: 'edges', data: { id: `m:${name}:${j}`, source: 'n:' + n, target: 's:' + name, kind: 'member', seg: name, index: j } });
    });
  }
  return els;
}

export class Editor {
  constructor(api) {
    this.api = api; // (method, path, body) -> the answer's JSON, or throws with .body
    this.tool = 'select';
    this.pos = {}; // graph id -> {x, y}, kept across redraws
    this.pending = null; // the first end of a link being drawn
    this.selected = null; // graph id
    this.errors = []; // the last check's problems
    this.file = 'drawn.yaml';
    this.cy = null;
    for (const b of document.querySelectorAll('#editor [data-tool]')) b.addEventListener('click', () => this.setTool(b.dataset.tool));
    $('#ed-delete').addEventListener('click', () => this.deleteSelected());
    $('#ed-new').addEventListener('click', () => this.load(TEMPLATE, 'drawn.yaml'));
    $('#ed-check').addEventListener('click', () => this.check());
    $('#ed-download').addEventListener('click', () => this.download());
    $('#ed-up').addEventListener('click', () => this.start());
    $('#ed-open').addEventListener('change', (e) => this.open(e.target.files[0]).finally(() => { e.target.value = ''; }));
    let typing = null;
    $('#edyaml').addEventListener('input', () => {
      clearTimeout(typing);
      typing = setTimeout(() => this.fromText($('#edyaml').value), 300);
    });
    document.addEventListener('keydown', (e) => {
      if (!$('#editor').hidden && (e.key === 'Delete' || e.key === 'Backspace') && !/INPUT|TEXTAREA|SELECT/.test(document.activeElement.tagName)) this.deleteSelected();
    });
  }

  /// Show the editor (drawn at its first showing: cytoscape needs a visible box).
  show() {
    if (!this.doc) this.load(TEMPLATE, 'drawn.yaml');
    else if (this.cy) this.cy.resize();
  }

  status(text, cls = '') {
    const el = $('#ed-status');
    el.replaceChildren(text);
    el.className = cls;
  }

  load(text, file) {
    this.file = file || this.file;
    this.pos = {};
    this.selected = null;
    this.errors = [];
    $('#edyaml').value = text;
    if (!this.fromText(text)) this.status('the file is not YAML: fix it in the text', 'bad');
  }

  /// Take the text as the model; false (and the graph left as it was) if it is not YAML.
  fromText(text) {
    const doc = YAML.parseDocument(text);
    if (doc.errors.length) {
      const e = doc.errors[0];
      this.status(`YAML: ${e.linePos ? `line ${e.linePos[0].line}: ` : ''}${e.message.split('\n')[0]}`, 'bad');
      return false;
    }
    this.doc = doc;
    this.text = text;
    this.status('');
    this.redraw();
    return true;
  }

  js() {
    const v = this.doc.toJS({ maxAliasCount: 100 });
    return v && typeof v === 'object' ? v : {};
  }

  /// After a change made by drawing: the text follows.
  changed() {
    this.text = this.doc.toString({ flowCollectionPadding: false });
    $('#edyaml').value = this.text;
    this.errors = [];
    this.redraw();
  }

  redraw() {
    const els = editorElements(this.js());
    if (!this.cy) {
      this.cy = cytoscape({
        container: $('#edgraph'),
        minZoom: 0.05,
        maxZoom: 2,
        style: [
          { selector: 'node', style: { label: 'data(label)', 'font-size': 11, 'text-valign': 'bottom', 'text-margin-y': 3, width: 22, height: 22, 'background-color': '#3b6fb6' } },
          { selector: 'node[kind = "lan"], node[kind = "wireless"]', style: { shape: 'round-rectangle', width: 34, height: 16, 'background-color': '#6b7a8f' } },
          { selector: 'node[kind = "wireless"]', style: { 'background-color': '#7c4dff' } },
          { selector: 'edge', style: { width: 2, 'line-color': '#9aa6b6', 'curve-style': 'bezier' } },
          { selector: '.pending', style: { 'border-width': 3, 'border-color': '#ffb300' } },
          { selector: '.error', style: { 'line-color': '#c62828', 'background-color': '#c62828', 'border-width': 2, 'border-color': '#c62828' } },
          { selector: ':selected', style: { 'overlay-color': '#ffb300', 'overlay-opacity': 0.35, 'overlay-padding': 4 } },
        ],
      });
      this.cy.on('tap', (e) => this.tap(e));
      this.cy.on('free', 'node', (e) => { this.pos[e.target.id()] = { ...e.target.position() }; });
    }
    const cy = this.cy;
    cy.batch(() => {
      cy.elements().remove();
      cy.add(els);
    });
    // Where the scenario draws a node or LAN (`canvas: [x, y]`), unless moved here.
    const js = this.js();
    const at = (c) => (Array.isArray(c) && c.length === 2 && c.every(Number.isFinite) ? { x: c[0], y: c[1] } : null);
    for (const [kind, items] of [['n:', js.nodes], ['s:', js.segments]]) {
      for (const [name, v] of Object.entries(mapOf(items))) {
        const p = at(mapOf(v).canvas);
        if (p && !this.pos[kind + name]) this.pos[kind + name] = p;
      }
    }
    const known = cy.nodes().filter((n) => this.pos[n.id()]);
    known.forEach((n) => n.position(this.pos[n.id()]));
    const unknown = cy.nodes().filter((n) => !this.pos[n.id()]);
    if (unknown.nonempty()) {
      if (known.empty()) {
        cy.layout({ name: 'fcose', quality: cy.nodes().length > 400 ? 'draft' : 'default', animate: false, randomize: true, fit: true, padding: 30, idealEdgeLength: () => 60, nodeRepulsion: () => 8000, nodeSeparation: 60 }).run();
      } else {
        const bb = known.boundingBox();
        unknown.forEach((n, k) => n.position({ x: bb.x1 + ((k * 97) % Math.max(60, bb.w)), y: bb.y2 + 50 + 30 * Math.floor(k / 8) }));
      }
      cy.nodes().forEach((n) => { this.pos[n.id()] = { ...n.position() }; });
    }
    for (const e of this.errors) if (e.element) cy.$id(e.element).addClass('error');
    if (this.selected && cy.$id(this.selected).nonempty()) cy.$id(this.selected).select();
    else this.selected = null;
    this.panel();
  }

  setTool(t) {
    this.tool = t;
    this.pending = null;
    if (this.cy) this.cy.elements().removeClass('pending');
    for (const b of document.querySelectorAll('#editor [data-tool]')) b.classList.toggle('on', b.dataset.tool === t);
    this.status({ select: 'click an element to edit it', node: 'click on the canvas to add a node', link: 'click two nodes (or a node and a LAN or radio channel) to join them', lan: 'click on the canvas to add a LAN', radio: 'click on the canvas to add a radio channel (a wireless segment)' }[t]);
  }

  freeName(prefix, taken) {
    for (let k = 1; ; k++) if (!taken.has(prefix + k)) return prefix + k;
  }

  tap(e) {
    const cy = this.cy;
    const onCanvas = e.target === cy;
    const js = this.js();
    if (this.tool === 'node' && onCanvas) {
      const names = new Set([...Object.keys(mapOf(js.nodes)), ...cy.nodes('[kind = "node"]').map((n) => n.data('label'))]);
      const name = this.freeName('n', names);
      if (!this.doc.has('nodes') || !YAML.isMap(this.doc.get('nodes', true))) this.doc.set('nodes', this.doc.createNode({}));
      this.doc.setIn(['nodes', name], this.doc.createNode({}));
      this.pos['n:' + name] = { ...e.position };
      this.selected = 'n:' + name;
      return this.changed();
    }
    if ((this.tool === 'lan' || this.tool === 'radio') && onCanvas) {
      const name = this.freeName(this.tool, new Set(Object.keys(mapOf(js.segments))));
      if (!this.doc.has('segments') || !YAML.isMap(this.doc.get('segments', true))) this.doc.set('segments', this.doc.createNode({}));
      // A radio channel: ns-2's radio (250 m range), members at random places of its area.
      const seg = this.doc.createNode(this.tool === 'lan' ? { kind: 'lan', members: [] } : { kind: 'wireless', area: '1000x1000', range: '250m', members: [] });
      seg.get('members', true).flow = true;
      this.doc.setIn(['segments', name], seg);
      this.pos['s:' + name] = { ...e.position };
      this.selected = 's:' + name;
      return this.changed();
    }
    if (this.tool === 'link' && !onCanvas && e.target.isNode()) {
      const n = e.target;
      if (!this.pending) {
        this.pending = n.id();
        n.addClass('pending');
        return;
      }
      const first = this.pending;
      this.pending = null;
      cy.elements().removeClass('pending');
      if (first === n.id()) return;
      const [a, b] = [first, n.id()];
      const hubA = !a.startsWith('n:'), hubB = !b.startsWith('n:');
      if (hubA && hubB) return this.status('two segments cannot be joined: join a node to a segment', 'bad');
      if (hubA || hubB) {
        const seg = cy.$id(hubA ? a : b).data('name');
        const node = (hubA ? b : a).slice(2);
        this.doc.addIn(['segments', seg, 'members'], node);
        return this.changed();
      }
      if (!this.doc.has('links') || !YAML.isSeq(this.doc.get('links', true))) this.doc.set('links', this.doc.createNode([]));
      const link = this.doc.createNode({ endpoints: [a.slice(2), b.slice(2)] });
      link.get('endpoints', true).flow = true;
      this.doc.addIn(['links'], link);
      this.selected = 'l:' + (listOf(this.js().links).length - 1);
      return this.changed();
    }
    this.selected = onCanvas ? null : e.target.id();
    this.panel();
  }

  deleteSelected() {
    const id = this.selected;
    if (!id) return;
    const js = this.js();
    if (id.startsWith('l:')) {
      this.doc.deleteIn(['links', +id.slice(2)]);
    } else if (id.startsWith('m:')) {
      const [, seg, j] = id.split(':');
      this.doc.deleteIn(['segments', seg, 'members', +j]);
    } else if (id.startsWith('s:')) {
      this.doc.deleteIn(['segments', id.slice(2)]);
    } else if (id.startsWith('n:')) {
      const name = id.slice(2);
      // Its links and memberships go with it (from the last, so indices hold).
      listOf(js.links).map((l, i) => [l, i]).reverse().forEach(([l, i]) => {
        if (listOf(l && l.endpoints).some((ep) => nodeName(ep) === name)) this.doc.deleteIn(['links', i]);
      });
      for (const [seg, s] of Object.entries(mapOf(js.segments))) {
        listOf(mapOf(s).members).map((m, j) => [m, j]).reverse().forEach(([m, j]) => {
          if (nodeName(m) === name) this.doc.deleteIn(['segments', seg, 'members', j]);
        });
      }
      this.doc.deleteIn(['nodes', name]);
    }
    delete this.pos[id];
    this.selected = null;
    this.changed();
  }

  /// The panel beside the canvas: the selected element's settings, or the lab's.
  panel() {
    const panel = $('#edpanel');
    panel.replaceChildren();
    const js = this.js();
    const id = this.selected;
    const h = (tag, attrs = {}, ...kids) => {
      const el = document.createElement(tag);
      for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
      el.append(...kids);
      return el;
    };
    const form = (title, fields, values, apply) => {
      const table = h('table');
      const inputs = {};
      for (const [f, example] of Object.entries(fields)) {
        const v = values[f];
        inputs[f] = h('input', { name: f, placeholder: example });
        inputs[f].value = v === undefined || v === null ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v);
        table.append(h('tr', {}, h('th', {}, f), h('td', {}, inputs[f])));
      }
      const f = h('form', { class: 'edform' }, h('h3', {}, title), table, h('div', { class: 'buttons' }, h('button', { type: 'submit' }, 'apply')));
      f.addEventListener('submit', (e) => {
        e.preventDefault();
        apply(Object.fromEntries(Object.entries(inputs).map(([k, i]) => [k, i.value.trim()])));
        this.changed();
      });
      return f;
    };
    /// Set (or, when empty, remove) plain fields under `path`.
    const setFields = (path, values) => {
      for (const [k, v] of Object.entries(values)) {
        if (v === '') this.doc.deleteIn([...path, k]);
        else this.doc.setIn([...path, k], /^\d+$/.test(v) ? Number(v) : v);
      }
    };
    if (!id) {
      panel.append(h('h2', {}, 'lab'));
      panel.append(form('scenario', { name: 'mylab', routing: 'static' }, { name: js.name, routing: js.routing }, (v) => setFields([], v)));
      panel.append(h('p', { class: 'hint' }, 'Tools: + node, + LAN and + radio (a wireless channel) add at the click; + link joins two nodes, or a node and a LAN or radio channel (a channel needs two members or more). Select an element to change or delete it. The YAML on the right is the scenario: edit either side.'));
    } else if (id.startsWith('n:')) {
      const name = id.slice(2);
      const n = mapOf(mapOf(js.nodes)[name]);
      panel.append(h('h2', {}, 'node ' + name));
      if (!(name in mapOf(js.nodes))) panel.append(h('p', { class: 'error' }, 'not declared under nodes:'));
      const run = h('textarea', { rows: 4, placeholder: 'iperf3 -s -D' });
      run.value = listOf(n.run).join('\n');
      const f = h('form', { class: 'edform' }, h('h3', {}, 'run (one command a line)'), run, h('div', { class: 'buttons' }, h('button', { type: 'submit' }, 'apply')));
      f.addEventListener('submit', (e) => {
        e.preventDefault();
        const cmds = run.value.split('\n').map((s) => s.trim()).filter(Boolean);
        if (!YAML.isMap(this.doc.getIn(['nodes', name], true))) this.doc.setIn(['nodes', name], this.doc.createNode({}));
        if (cmds.length) this.doc.setIn(['nodes', name, 'run'], this.doc.createNode(cmds));
        else this.doc.deleteIn(['nodes', name, 'run']);
        this.changed();
      });
      panel.append(f);
    } else if (id.startsWith('l:')) {
      const i = +id.slice(2);
      const l = mapOf(listOf(js.links)[i]);
      panel.append(h('h2', {}, `link ${listOf(l.endpoints).map(nodeName).join(' – ')}`));
      panel.append(form('both directions', LINK_FIELDS, l, (v) => setFields(['links', i], v)));
      panel.append(h('p', { class: 'hint' }, 'Per direction: forward: {…} and reverse: {…} in the YAML.'));
    } else if (id.startsWith('s:')) {
      const name = id.slice(2);
      const s = mapOf(mapOf(js.segments)[name]);
      panel.append(h('h2', {}, `${s.kind === 'wireless' ? 'wireless segment' : 'LAN'} ${name}`));
      if (s.kind !== 'wireless') panel.append(form('every port', LAN_FIELDS, s, (v) => setFields(['segments', name], v)));
      panel.append(h('p', {}, `${listOf(s.members).length} members`));
    } else if (id.startsWith('m:')) {
      const [, seg, j] = id.split(':');
      panel.append(h('h2', {}, `member ${nodeName(listOf(mapOf(mapOf(js.segments)[seg]).members)[+j])} of ${seg}`));
    }
    const mine = this.errors.filter((e) => !id || e.element === id);
    if (mine.length) {
      const ul = h('ul', { class: 'errors' });
      for (const e of mine) {
        const li = h('li', { class: 'error' }, (e.line ? `line ${e.line}: ` : '') + (e.field ? e.field + ': ' : '') + e.message);
        li.addEventListener('click', () => this.showError(e));
        ul.append(li);
      }
      panel.append(h('h3', {}, 'problems'), ul);
    }
  }

  /// Select a problem's element and its line in the text.
  showError(e) {
    if (e.element && this.cy.$id(e.element).nonempty()) {
      this.selected = e.element;
      this.cy.elements().unselect();
      this.cy.$id(e.element).select();
    }
    if (e.line) {
      const ta = $('#edyaml');
      const lines = ta.value.split('\n');
      const start = lines.slice(0, e.line - 1).reduce((a, l) => a + l.length + 1, 0);
      ta.focus();
      ta.setSelectionRange(start, start + (lines[e.line - 1] || '').length);
    }
  }

  /// The element whose YAML holds `line` (1-based), for problems without a field.
  elementAtLine(line) {
    const starts = [0];
    for (let i = 0; i < this.text.length; i++) if (this.text[i] === '\n') starts.push(i + 1);
    const off = starts[Math.max(0, line - 1)] ?? 0;
    const inside = (n) => n && n.range && n.range[0] <= off && off <= n.range[2];
    const links = this.doc.get('links', true);
    if (YAML.isSeq(links)) {
      const i = links.items.findIndex(inside);
      if (i >= 0) return 'l:' + i;
    }
    for (const [key, prefix] of [['nodes', 'n:'], ['segments', 's:']]) {
      const m = this.doc.get(key, true);
      if (!YAML.isMap(m)) continue;
      for (const p of m.items) if (inside(p.value) || inside(p.key)) return prefix + String(p.key && p.key.value !== undefined ? p.key.value : p.key);
    }
    return null;
  }

  async post(path, body) {
    try {
      return { ok: await this.api('POST', path, body) };
    } catch (err) {
      return { err };
    }
  }

  /// The checker's problems on the graph and in the panel.
  problems(list) {
    this.errors = list.map((e) => ({ ...e, element: elementOfField(e.field || '') || (e.line ? this.elementAtLine(e.line) : null) }));
    this.cy.elements().removeClass('error');
    for (const e of this.errors) if (e.element) this.cy.$id(e.element).addClass('error');
    this.selected = null;
    this.cy.elements().unselect();
    this.panel();
  }

  async check() {
    this.status('checking…');
    const r = await this.post('/v1/scenario/check', { yaml: $('#edyaml').value, file: this.file });
    if (r.ok) {
      this.problems([]);
      this.status(`valid: lab ${r.ok.name}, ${r.ok.nodes} nodes, ${r.ok.links} links, ${r.ok.segments} segments`, 'ok');
      return true;
    }
    const errs = (r.err.body && r.err.body.errors) || [];
    this.problems(errs);
    this.status(errs.length ? `${errs.length} problem${errs.length > 1 ? 's' : ''}: see the panel` : String(r.err.message), 'bad');
    return false;
  }

  download() {
    const name = (this.js().name || this.file.replace(/\.ya?ml$/, '') || 'lab') + '.yaml';
    const a = document.createElement('a');
    a.download = name;
    a.href = URL.createObjectURL(new Blob([$('#edyaml').value], { type: 'application/yaml' }));
    document.body.append(a);
    a.click();
    a.remove();
    this.status(`downloaded ${name}`);
  }

  async start() {
    if (!(await this.check())) return;
    this.status('starting the lab… (vemu up)');
    const r = await this.post('/v1/scenario/up', { yaml: $('#edyaml').value, file: this.file });
    if (!r.ok) {
      const errs = (r.err.body && r.err.body.errors) || [];
      if (errs.length) this.problems(errs);
      return this.status(String(r.err.message), 'bad');
    }
    const link = Object.assign(document.createElement('a'), { href: r.ok.ui, target: '_blank', id: 'ed-uilink', textContent: `open lab ${r.ok.lab}'s page` });
    const el = $('#ed-status');
    el.className = 'ok';
    el.replaceChildren(`lab ${r.ok.lab} is up (${r.ok.file}) — `, link);
  }

  /// Open a file from this computer: a scenario, or a topology to import (a GraphML
  /// map, a containerlab or an IMUNES topology), told apart by its name.
  async open(file) {
    if (!file) return;
    const text = await file.text();
    const format = [[/\.clab\.ya?ml$/i, 'clab'], [/\.imn$/i, 'imunes'], [/\.(graphml|xml)$/i, 'graphml']].find(([re]) => re.test(file.name));
    if (format) {
      const [re, key] = format;
      const r = await this.post('/v1/scenario/import', { [key]: text, file: file.name });
      if (!r.ok) return this.status(String(r.err.message), 'bad');
      this.load(r.ok.yaml, file.name.replace(re, '.yaml'));
      this.status(`imported ${file.name}: ${r.ok.nodes} nodes, ${r.ok.links} links` + (r.ok.warnings.length ? ` (${r.ok.warnings.length} warnings: ${r.ok.warnings.slice(0, 2).join('; ')})` : ''));
    } else {
      this.load(text, file.name);
      this.status(`opened ${file.name}`);
    }
  }
}
