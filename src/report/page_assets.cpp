// The page's style sheet and script, inlined into every report (a report is one file that opens
// anywhere, offline). The script zooms and pans the graph by its SVG viewBox, switches between the
// main graph and If/Loop bodies, shows a clicked node's details and finds nodes by name (also from
// the address: page.html#node=g0n12, #graph=g1, #search=conv). Errors it
// hits are recorded on <body data-js-errors> so a headless browser test can see them.
#include "report/page_assets.h"

namespace t2o {

const char* const kReportCss = R"CSS(
:root { --fg:#1f2328; --muted:#59636e; --line:#d1d9e0; --bg:#fff; --panel:#f6f8fa; --accent:#0969da; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: var(--fg);
       background: var(--bg); margin: 0; padding: 0 24px 48px; }
header { border-bottom: 1px solid var(--line); padding: 16px 0 8px; }
h1 { font-size: 20px; margin: 0 0 8px; font-family: ui-monospace, monospace; word-break: break-all; }
h2 { font-size: 16px; margin: 28px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 14px; margin: 16px 0 6px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 0; }
dl.facts dt { color: var(--muted); } dl.facts dd { margin: 0; font-family: ui-monospace, monospace; }
nav a { margin-right: 14px; color: var(--accent); text-decoration: none; }
table { border-collapse: collapse; margin: 6px 0; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: var(--panel); }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.bar { display: inline-block; height: 10px; background: #8fb3e6; vertical-align: middle; }
.caption { color: var(--muted); font-size: 13px; margin: 2px 0 10px; }
ul.notes { padding-left: 0; list-style: none; }
ul.notes li { margin: 4px 0; padding: 4px 8px; border-left: 4px solid var(--line); background: var(--panel); }
ul.notes li.warning { border-color: #d4a72c; } ul.notes li.repair { border-color: #1a7f37; }
ul.notes li.note { border-color: #8c959f; } ul.notes li.error { border-color: #cf222e; background: #ffebe9; }
.kind { font-weight: 600; margin-right: 6px; text-transform: uppercase; font-size: 11px; color: var(--muted); }
.toolbar { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; margin: 6px 0; }
.toolbar input { width: 260px; padding: 3px 6px; }
#search-results { font-size: 13px; max-height: 140px; overflow: auto; }
#search-results button, .link { background: none; border: none; color: var(--accent); cursor: pointer; padding: 0 6px 0 0;
  font: inherit; text-decoration: underline; }
.graph-wrap { display: flex; gap: 12px; align-items: flex-start; }
.graph-area { flex: 1; min-width: 0; border: 1px solid var(--line); background: #fff; }
.graph-view { display: none; } .graph-view.shown { display: block; }
svg.graph-svg { width: 100%; height: 72vh; display: block; cursor: grab; user-select: none; }
svg.graph-svg.dragging { cursor: grabbing; }
svg.graph-svg g.node { cursor: pointer; }
svg.graph-svg g.node.hit path, svg.graph-svg g.node.hit polygon, svg.graph-svg g.node.hit ellipse {
  stroke: #0969da; stroke-width: 4px; }
svg.graph-svg g.node.selected path, svg.graph-svg g.node.selected polygon { stroke: #8250df; stroke-width: 4px; }
aside#details { width: 340px; flex: none; border: 1px solid var(--line); background: var(--panel); padding: 8px 10px;
  font-size: 13px; max-height: 72vh; overflow: auto; word-break: break-word; }
aside#details .mono, td.mono { font-family: ui-monospace, monospace; }
.missing { padding: 12px; color: #9a6700; background: #fff8c5; border: 1px solid #d4a72c; }
.legend span { display: inline-block; padding: 0 8px; margin-right: 6px; border: 1px solid #999; border-radius: 4px; }
.lv-agrees { background: #c8e6c9; } .lv-slight { background: #fff59d; } .lv-differs { background: #ef9a9a; }
.lv-uncompared { background: #eeeeee; } .lv-first { border: 3px solid #b71c1c !important; }
.figure { display: inline-block; margin: 0 24px 12px 0; vertical-align: top; }
.figure svg text { font: 11px system-ui, sans-serif; fill: #333; }
)CSS";

const char* const kReportJs = R"JS(
(function () {
  'use strict';
  const body = document.body;
  window.addEventListener('error', function (e) {
    body.dataset.jsErrors = (body.dataset.jsErrors || '') + (e.message || 'error') + '; ';
  });
  const data = JSON.parse(document.getElementById('report-data').textContent);
  const nodes = data.nodes;
  const views = {};
  document.querySelectorAll('.graph-view').forEach(function (v) { views[v.dataset.graph] = v; });
  const select = document.getElementById('graph-select');

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }

  // Zoom and pan change the SVG viewBox; nothing is re-laid out.
  function setupSvg(svg) {
    const vb = svg.viewBox.baseVal;
    const full = { x: vb.x, y: vb.y, w: vb.width, h: vb.height };
    svg.fullBox = full;
    function scale() {
      const r = svg.getBoundingClientRect();
      return Math.max(vb.width / Math.max(r.width, 1), vb.height / Math.max(r.height, 1));
    }
    function toSvg(cx, cy) {
      const r = svg.getBoundingClientRect(), s = scale();
      return { x: vb.x + (cx - r.left - (r.width - vb.width / s) / 2) * s,
               y: vb.y + (cy - r.top - (r.height - vb.height / s) / 2) * s };
    }
    // Never magnify past 1.5 px per point: a small graph stays small rather than filling the screen.
    function box(w, h) {
      const r = svg.getBoundingClientRect();
      const cw = r.width > 0 ? r.width : 1000, ch = r.height > 0 ? r.height : 700;
      const s = Math.max(w / cw, h / ch, 1 / 1.5);
      return { w: cw * s, h: ch * s };
    }
    svg.fitWidth = function () {
      const r = svg.getBoundingClientRect();
      const aspect = r.height > 0 && r.width > 0 ? r.height / r.width : 0.7;
      const b = box(full.w, Math.min(full.h, full.w * aspect));
      svg.setAttribute('viewBox', [full.x - (b.w - full.w) / 2, full.y, b.w, b.h].join(' '));
    };
    svg.fitAll = function () {
      const b = box(full.w, full.h);
      svg.setAttribute('viewBox', [full.x - (b.w - full.w) / 2, full.y - (b.h - full.h) / 2, b.w, b.h].join(' '));
    };
    svg.centerOn = function (g) {
      const b = g.getBoundingClientRect();
      const c = toSvg(b.left + b.width / 2, b.top + b.height / 2);
      const w = Math.min(vb.width, 700), h = w * (vb.height / vb.width);
      svg.setAttribute('viewBox', [c.x - w / 2, c.y - h / 2, w, h].join(' '));
    };
    svg.addEventListener('wheel', function (e) {
      e.preventDefault();
      const p = toSvg(e.clientX, e.clientY);
      const f = Math.exp(Math.max(-1, Math.min(1, e.deltaY * 0.002)));
      svg.setAttribute('viewBox', [p.x - (p.x - vb.x) * f, p.y - (p.y - vb.y) * f, vb.width * f, vb.height * f].join(' '));
    }, { passive: false });
    let drag = null;
    svg.addEventListener('mousedown', function (e) {
      drag = { x: e.clientX, y: e.clientY, vx: vb.x, vy: vb.y, s: scale(), moved: false };
      svg.classList.add('dragging');
    });
    window.addEventListener('mousemove', function (e) {
      if (!drag) return;
      const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
      svg.setAttribute('viewBox', [drag.vx - dx * drag.s, drag.vy - dy * drag.s, vb.width, vb.height].join(' '));
    });
    window.addEventListener('mouseup', function () {
      if (drag) svg.wasDragged = drag.moved;
      drag = null;
      svg.classList.remove('dragging');
    });
    svg.addEventListener('click', function (e) {
      if (svg.wasDragged) { svg.wasDragged = false; return; }
      const g = e.target.closest('g.node');
      if (g && nodes[g.id]) showNode(g.id, false);
    });
  }

  // A drawing is fitted when first shown: a hidden one has no size to fit to.
  function showGraph(id) {
    Object.keys(views).forEach(function (k) { views[k].classList.toggle('shown', k === id); });
    if (select) select.value = id;
    const svg = views[id] ? views[id].querySelector('svg.graph-svg') : null;
    if (svg && svg.fitWidth && !svg.fitted) { svg.fitted = true; svg.fitWidth(); }
  }

  function showNode(id, center) {
    const n = nodes[id];
    if (!n) return;
    showGraph(n.graph);
    document.querySelectorAll('g.node.selected').forEach(function (g) { g.classList.remove('selected'); });
    const g = document.getElementById(id);
    const svg = g ? g.closest('svg') : null;
    if (g) g.classList.add('selected');
    if (center && svg) svg.centerOn(g);
    const d = document.getElementById('details');
    d.textContent = '';
    d.appendChild(el('h3', n.op + (n.domain ? ' (' + n.domain + ')' : '')));
    d.appendChild(el('div', n.name || '(unnamed node)', 'mono'));
    if (n.mark) {
      const m = el('p');
      m.appendChild(el('span', n.mark.first ? 'first diverging node' : n.mark.level, 'lv-' + n.mark.level + (n.mark.first ? ' lv-first' : '')));
      m.appendChild(el('span', ' ' + n.mark.detail));
      d.appendChild(m);
      if (n.mark.aten) d.appendChild(el('div', 'from ' + n.mark.aten, 'mono'));
      if (n.mark.module) d.appendChild(el('div', 'in ' + n.mark.module, 'mono'));
      if (n.mark.source) d.appendChild(el('div', 'at ' + n.mark.source, 'mono'));
    } else if (n.doc) {
      d.appendChild(el('div', n.doc, 'mono'));
    }
    function list(title, items) {
      if (!items.length) return;
      d.appendChild(el('h3', title));
      items.forEach(function (it) { d.appendChild(el('div', it[0] + (it[1] ? '  ' + it[1] : ''), 'mono')); });
    }
    list('inputs', n.inputs.filter(function (i) { return i[0]; }));
    list('outputs', n.outputs.filter(function (i) { return i[0]; }));
    const attrs = Object.keys(n.attrs || {});
    list('attributes', attrs.map(function (k) { return [k + ' = ' + n.attrs[k], '']; }));
    (n.subgraphs || []).forEach(function (s) {
      const b = el('button', 'open ' + s.attr + ' (' + s.graph + ')', 'link');
      b.addEventListener('click', function () { showGraph(s.graph); });
      d.appendChild(b);
    });
  }

  function search(q) {
    const out = document.getElementById('search-results');
    out.textContent = '';
    document.querySelectorAll('g.node.hit').forEach(function (g) { g.classList.remove('hit'); });
    q = q.trim().toLowerCase();
    if (!q) return [];
    const hits = Object.keys(nodes).filter(function (id) {
      return (nodes[id].name || '').toLowerCase().indexOf(q) >= 0;
    });
    document.getElementById('search-count').textContent = hits.length + ' match' + (hits.length === 1 ? '' : 'es');
    hits.forEach(function (id) { const g = document.getElementById(id); if (g) g.classList.add('hit'); });
    hits.slice(0, 50).forEach(function (id) {
      const b = el('button', nodes[id].name + ' (' + nodes[id].op + ')');
      b.addEventListener('click', function () { showNode(id, true); });
      out.appendChild(b);
    });
    return hits;
  }

  document.querySelectorAll('svg.graph-svg').forEach(setupSvg);
  if (select) select.addEventListener('change', function () { showGraph(select.value); });
  const box = document.getElementById('search');
  if (box) {
    box.addEventListener('input', function () { search(box.value); });
    box.addEventListener('keydown', function (e) {
      if (e.key === 'Enter') { const h = search(box.value); if (h.length) showNode(h[0], true); }
    });
  }
  const fit = document.getElementById('fit');
  if (fit) fit.addEventListener('click', function () {
    document.querySelectorAll('.graph-view.shown svg.graph-svg').forEach(function (s) { s.fitAll(); });
  });
  const first = document.getElementById('goto-first');
  if (first) first.addEventListener('click', function () { showNode(first.dataset.node, true); });
  showGraph('g0');
  // Links into the page: #node=g0n12 opens a node, #graph=g1 shows a body, #search=conv finds nodes.
  function follow() {
    const h = decodeURIComponent(location.hash.slice(1));
    if (h.indexOf('graph=') === 0 && views[h.slice(6)]) {
      document.getElementById('graph').scrollIntoView();
      showGraph(h.slice(6));
    } else if (h.indexOf('node=') === 0 && nodes[h.slice(5)]) {
      document.getElementById('graph').scrollIntoView();
      showNode(h.slice(5), true);
    } else if (h.indexOf('search=') === 0 && box) {
      box.value = h.slice(7);
      document.getElementById('graph').scrollIntoView();
      search(box.value);
    }
  }
  window.addEventListener('hashchange', follow);
  follow();
  body.dataset.ready = '1';
})();
)JS";

}  // namespace t2o
