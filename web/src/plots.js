// Plots of a link's or LAN port's throughput, queue and time held over time, from the
// event stream's counter snapshots (uPlot), and their export as CSV and PNG.
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

/// How many snapshots each link and port keeps (at one a second: 10 minutes).
export const KEEP = 600;

/// Upper bound (ns) of the bucket of a delay histogram that holds its `q` quantile,
/// as the engine's `bucket_quantile_ns`; null when empty.
export function bucketQuantileNs(hist, bucketsNs, q) {
  const total = hist.reduce((a, b) => a + b, 0);
  if (!total) return null;
  const want = Math.max(1, Math.ceil(total * q));
  let seen = 0;
  for (let i = 0; i < hist.length; i++) {
    seen += hist[i];
    if (seen >= want) return i < bucketsNs.length ? bucketsNs[i] : bucketsNs[bucketsNs.length - 1] * 2;
  }
  return null;
}

const diffHist = (a, b) => (a || []).map((x, i) => Math.max(0, x - ((b || [])[i] || 0)));

/// The directions of each link and port in a stats snapshot, by graph id.
export function directions(v) {
  const out = {};
  for (const l of v.links) out['l:' + l.name] = [l.forward, l.reverse];
  for (const g of v.segments) for (const m of g.members) out['p:' + m.port] = [m.egress, m.ingress];
  return out;
}

/// One row per link and port from two snapshots: [t_s, bps fwd, bps rev, queue fwd,
/// queue rev, held p50 fwd ms, held p50 rev ms, held p99 fwd ms, held p99 rev ms].
export function rows(prev, cur) {
  const dt = (cur.t_ns - prev.t_ns) / 1e9;
  if (!(dt > 0)) return {};
  const buckets = cur.delay_buckets_ns || [];
  const before = directions(prev), now = directions(cur);
  const out = {};
  for (const [id, dirs] of Object.entries(now)) {
    const was = before[id];
    if (!was) continue;
    const bps = dirs.map((d, k) => Math.max(0, (d.tx_bytes - was[k].tx_bytes) * 8 / dt));
    const held = dirs.map((d, k) => diffHist(d.delay_hist, was[k].delay_hist));
    const ms = (h, q) => { const ns = bucketQuantileNs(h, buckets, q); return ns === null ? null : ns / 1e6; };
    out[id] = [cur.t_ns / 1e9, bps[0], bps[1], dirs[0].queue_frames, dirs[1].queue_frames,
      ms(held[0], 0.5), ms(held[1], 0.5), ms(held[0], 0.99), ms(held[1], 0.99)];
  }
  return out;
}

export const COLUMNS = ['t_s', 'forward_bps', 'reverse_bps', 'forward_queue_frames', 'reverse_queue_frames',
  'forward_held_p50_ms', 'reverse_held_p50_ms', 'forward_held_p99_ms', 'reverse_held_p99_ms'];

/// Each link's and port's last KEEP rows, as columns (what uPlot draws).
export class History {
  constructor(keep = KEEP) { this.keep = keep; this.cols = new Map(); }
  add(byId) {
    for (const [id, row] of Object.entries(byId)) {
      let c = this.cols.get(id);
      if (!c) { c = COLUMNS.map(() => []); this.cols.set(id, c); }
      row.forEach((x, i) => c[i].push(x));
      if (c[0].length > this.keep) c.forEach((col) => col.splice(0, col.length - this.keep));
    }
  }
  get(id) { return this.cols.get(id) || COLUMNS.map(() => []); }
  csv(id) {
    const c = this.get(id);
    const lines = [COLUMNS.join(',')];
    for (let i = 0; i < c[0].length; i++) lines.push(c.map((col) => (col[i] === null || col[i] === undefined ? '' : +col[i].toFixed(6))).join(','));
    return lines.join('\n') + '\n';
  }
}

const FWD = '#3b6fb6', REV = '#d9822b';

/// Three plots (throughput, queue, time held) of one link or port in `el`.
export function plotsIn(el, history, id, labels) {
  const width = Math.max(240, el.clientWidth || 300);
  const mk = (title, unit, pick, fmt) => {
    const series = [{ label: 't (s)', value: (u, v) => (v === null ? '' : v.toFixed(0)) }];
    for (const [k, name, color, dash] of pick) series.push({ label: name, stroke: color, dash, width: 1.5, value: (u, v) => (v === null || v === undefined ? '–' : fmt(v)), _k: k });
    const data = () => { const c = history.get(id); return [c[0], ...pick.map(([k]) => c[k])]; };
    const div = document.createElement('div');
    div.className = 'plot';
    el.append(div);
    const u = new uPlot({
      title, width, height: 130, series, legend: { live: true },
      scales: { x: { time: false } },
      axes: [{ size: 24 }, { size: 46, label: unit, labelSize: 14 }],
      cursor: { drag: { x: false, y: false } },
    }, data(), div);
    return { u, data };
  };
  const plots = [
    mk('throughput', 'Mbit/s', [[1, labels[0], FWD], [2, labels[1], REV]].map(([k, n, c]) => [k, n, c]), (v) => v.toFixed(2)),
    mk('queue', 'frames', [[3, labels[0], FWD], [4, labels[1], REV]], (v) => v.toFixed(0)),
    mk('time held (bucket bound)', 'ms', [[5, 'p50 ' + labels[0], FWD], [6, 'p50 ' + labels[1], REV], [7, 'p99 ' + labels[0], FWD, [4, 3]], [8, 'p99 ' + labels[1], REV, [4, 3]]], (v) => v.toFixed(3)),
  ];
  // Throughput in Mbit/s on the plot, bit/s in the history and the CSV.
  const mbit = plots[0].data;
  plots[0].data = () => { const d = mbit(); return [d[0], ...d.slice(1).map((col) => col.map((x) => (x === null ? null : x / 1e6)))]; };
  const update = () => plots.forEach((p) => p.u.setData(p.data()));
  update();
  return {
    update,
    destroy: () => plots.forEach((p) => p.u.destroy()),
    /// The three plots in one PNG (a data: URL).
    png: () => {
      const canvases = plots.map((p) => p.u.ctx.canvas);
      const out = document.createElement('canvas');
      out.width = Math.max(...canvases.map((c) => c.width));
      out.height = canvases.reduce((a, c) => a + c.height + 24, 0);
      const ctx = out.getContext('2d');
      ctx.fillStyle = '#fff';
      ctx.fillRect(0, 0, out.width, out.height);
      let y = 0;
      plots.forEach((p, i) => {
        ctx.fillStyle = '#1d2430';
        ctx.font = '16px sans-serif';
        ctx.fillText(`${id.slice(2)}: ${p.u.root.querySelector('.u-title').textContent}` + (i === 0 ? ' (Mbit/s)' : i === 1 ? ' (frames)' : ' (ms)'), 8, y + 18);
        ctx.drawImage(canvases[i], 0, y + 24);
        y += canvases[i].height + 24;
      });
      return out.toDataURL('image/png');
    },
  };
}

/// Offer `content` (a string or a data: URL) as a file download.
export function download(name, content, type = 'text/plain') {
  const a = document.createElement('a');
  a.download = name;
  a.href = content.startsWith('data:') ? content : URL.createObjectURL(new Blob([content], { type }));
  document.body.append(a);
  a.click();
  a.remove();
}
