// The memory page's script: decodes the data memory/report/memory_page.cc
// embeds (#spill-data, columns as page_encoding.h describes them) and draws,
// per mode, the memory curve, the address space, the timeline lanes and the
// details of a step; with several modes, a comparison table and an overlay.
// Plain JavaScript, no library, no network.
//
// Large iterations stay usable: everything is drawn on canvases, curves keep
// the highest step of each pixel column, and blocks smaller than a pixel are
// merged per zoom level (level of detail), so a 2,500-unit ResNet's
// hundreds of thousands of blocks pan smoothly.
//
// The page leaves what it computed in the DOM, for tests: each mode's
// section carries the curve's peak (output.curve-peak), the number of
// blocks it decoded (output.block-count) and the tensors live at the
// selected step (ol.live; the peak step at first); the body says when the
// first view was drawn (data-render-ms). With #bench in the address it pans
// and zooms the first mode's views and writes the frame times
// (data-pan-ms, data-pan-max-ms, data-zoom-ms); #mode=NAME opens that mode.
//
// This part, 4 of 4: the step details, pointer handling, the sections of
// the modes, the comparison table and main(). page_model.js, page_views.js
// and page_map.js come before it (BUILD joins them into one function).

function renderDetails(mode, s, box) {
  const page = mode.page;
  box.textContent = '';
  box.dataset.step = String(s + 1);
  box.appendChild(el('h3', {text: mode.stepName(s).replace(/^step/, 'Step')}));
  const algorithm = mode.algorithms[mode.algorithm[s]];
  box.appendChild(el('div', {className: 'muted', text:
    (algorithm ? 'algorithms: ' + algorithm + '; ' : 'no algorithm to choose; ') +
    'workspace ' + formatBytes(mode.workspace[s]) +
    (mode.slice[s] ? '; streamed through host memory, ' + mode.slice[s] + ' images per slice' : '')}));
  const columns = el('div', {className: 'columns'});
  box.appendChild(columns);
  const use = el('table');
  for (let k = 0; k < mode.inUse.length; k++) {
    if (!mode.inUse[k][s]) continue;
    use.appendChild(el('tr', null, [el('td', {text: page.categories[k]}),
      el('td', {text: formatBytes(mode.inUse[k][s])})]));
  }
  use.appendChild(el('tr', null, [el('td', {text: 'in use'}), el('td', {text: formatBytes(mode.total[s])})]));
  use.appendChild(el('tr', null, [el('td', {text: 'peak in the step'}), el('td', {text: formatBytes(mode.peak[s])})]));
  if (mode.host[s]) {
    use.appendChild(el('tr', null, [el('td', {text: 'host memory'}), el('td', {text: formatBytes(mode.host[s])})]));
  }
  columns.appendChild(el('div', null, [el('h3', {text: 'Device memory'}), use]));
  columns.appendChild(el('div', null, [el('h3', {text: 'What moves'}), renderMoves(mode, s)]));
  if (mode.blockCount) columns.appendChild(renderLive(mode, s));
}

const ACTION_TEXT = {
  begin_offload: 'offload begins', finish_offload: 'offload done, device copy freed',
  cancel_offload: 'offload cancelled (kept)', begin_prefetch: 'prefetch begins',
  finish_prefetch: 'prefetch awaited', drop: 'dropped for recomputation',
  recompute: 'rebuilt: forward reruns', compact: 'compaction', stream_in: 'streamed in',
  stream_out: 'streamed out', update: 'solver update',
};

function renderMoves(mode, s) {
  const page = mode.page;
  const list = el('ul', {className: 'moves'});
  for (const a of mode.actionsOf(s)) {
    const type = page.data.event_names[mode.actionType[a]];
    const ref = mode.actionRef[a];
    let what = '';
    let bytes = mode.actionBytes[a];
    if (type === 'recompute') {
      what = page.layers[ref];
    } else if (ref > 0) {
      what = page.tensorName(ref - 1);
      if (bytes === 0) bytes = page.tensorBytes(ref - 1);
    }
    if (bytes < 0) bytes = 0;
    list.appendChild(el('li', {'data-action': type}, [(ACTION_TEXT[type] || type) + (what ? ': ' + what : '') +
      (bytes ? ' (' + formatBytes(bytes) + ')' : '')]));
  }
  if (mode.moveCount) {
    const lo = mode.first[s];
    const hi = s + 1 < mode.n ? mode.first[s + 1] : Infinity;
    let moved = 0;
    for (let m = 0; m < mode.moveCount; m++) moved += mode.moveEvent[m] >= lo && mode.moveEvent[m] < hi;
    if (moved) list.appendChild(el('li', null, [moved + ' blocks slid down']));
  }
  if (!list.childNodes.length) list.appendChild(el('li', {className: 'muted', text: 'nothing moves'}));
  return list;
}

// The tensors live at step s, largest first: the first LIVE_SHOWN listed,
// the rest on demand; data-tensors names them all (one per line).
function renderLive(mode, s) {
  const page = mode.page;
  const blocks = mode.liveAt(s);
  blocks.sort((a, b) => mode.size[b] - mode.size[a] || mode.tensor[a] - mode.tensor[b]);
  let bytes = 0;
  const names = blocks.map((b) => {
    bytes += mode.size[b];
    return page.tensorName(mode.tensor[b]);
  });
  const list = el('ol', {className: 'live', 'data-step': String(s + 1), 'data-count': String(blocks.length),
    'data-tensors': names.join('\n')});
  const fill = (count) => {
    const items = [];
    for (let i = list.childElementCount; i < count; i++) {
      const b = blocks[i];
      items.push('<li>' + escapeHtml(names[i]) + ' <span class="muted">' + formatBytes(mode.size[b]) + ', ' +
        escapeHtml(page.categories[mode.category[b]]) + '</span></li>');
    }
    list.insertAdjacentHTML('beforeend', items.join(''));
  };
  fill(Math.min(LIVE_SHOWN, blocks.length));
  const box = el('div', null, [el('h3', {text: 'Live tensors: ' + blocks.length + ', ' + formatBytes(bytes)}), list]);
  if (blocks.length > LIVE_SHOWN) {
    const more = el('button', {text: 'show all ' + blocks.length});
    more.addEventListener('click', () => {
      fill(blocks.length);
      more.remove();
    });
    box.appendChild(el('div', {className: 'controls'}, [more]));
  }
  return box;
}

// Pointer and wheel handling shared by every view: wheel zooms the step
// axis (shift+wheel: the map's offsets), dragging pans, a click selects a
// step, double-click resets the zoom.
function attach(view, owner, canvasOf) {
  const node = canvasOf.node;
  const tooltip = owner.app.tooltip;
  let drag = null;
  const local = (e) => {
    const r = node.getBoundingClientRect();
    return [e.clientX - r.left, e.clientY - r.top];
  };
  node.addEventListener('wheel', (e) => {
    e.preventDefault();
    const [px, py] = local(e);
    const factor = Math.exp(Math.sign(e.deltaY) * Math.min(Math.abs(e.deltaY), 200) * 0.003);
    if (e.shiftKey && view.zoomY) view.zoomY(py, factor);
    else owner.axis.zoom(owner.axis.x(px, canvasOf), factor);
    owner.requestDraw();
  }, {passive: false});
  node.addEventListener('mousedown', (e) => {
    const [px, py] = local(e);
    drag = {px, py, x0: owner.axis.x0, moved: false};
  });
  window.addEventListener('mouseup', (e) => {
    if (!drag) return;
    const wasDrag = drag.moved;
    drag = null;
    if (wasDrag || e.target !== node) return;
    const [px] = local(e);
    owner.select(view.stepAt(px));
  });
  node.addEventListener('mousemove', (e) => {
    const [px, py] = local(e);
    if (drag && (drag.moved || Math.abs(px - drag.px) + Math.abs(py - drag.py) > 3)) {
      drag.moved = true;
      const axis = owner.axis;
      const dx = (drag.px - px) / axis.plotWidth(canvasOf) * (axis.x1 - axis.x0);
      axis.pan(drag.x0 + dx - axis.x0);
      if (view.panY) {
        view.panY(py - drag.py);
        drag.py = py;
      }
      owner.requestDraw();
      tooltip.style.display = 'none';
      return;
    }
    const html = px >= LEFT ? view.hover(px, py) : null;
    if (!html) {
      tooltip.style.display = 'none';
      return;
    }
    tooltip.innerHTML = html;
    tooltip.style.display = 'block';
    const width = tooltip.offsetWidth;
    tooltip.style.left = Math.min(e.clientX + 14, window.innerWidth - width - 8) + 'px';
    tooltip.style.top = (e.clientY + 14) + 'px';
  });
  node.addEventListener('mouseleave', () => { tooltip.style.display = 'none'; });
  node.addEventListener('dblclick', () => {
    owner.axis.reset();
    if (view.resetY) view.resetY();
    owner.requestDraw();
  });
}

// One mode's section: facts, curve, map, lanes and step details.
class ModeView {
  constructor(app, mode) {
    this.app = app;
    this.mode = mode;
    this.section = el('section', {className: 'mode', 'data-mode': mode.name});
    this.selected = -1;
    this.drawn = false;
    if (!mode.fits) {
      this.section.appendChild(el('p', {className: 'failure-note',
        text: mode.name + ' does not fit: ' + (mode.raw.failure || 'no plan')}));
      return;
    }
    this.axis = new XAxis(mode.xMax);
    this.section.appendChild(this.facts());
    this.curve = new CurveView(this);
    this.views = [this.curve];
    this.section.appendChild(el('div', {className: 'view-title'}, ['Device memory per step, stacked by category ' +
      '(line: the highest moment of each step)', el('span', {className: 'hint',
      text: 'wheel: zoom, drag: pan, click: step details, double-click: reset'})]));
    this.section.appendChild(this.curve.canvas.node);
    if (mode.blockCount) {
      this.map = new MapView(this);
      this.views.push(this.map);
      this.section.appendChild(el('div', {className: 'view-title'}, ['Address space: every block over the steps it ' +
        'lives, by offset (pale: free memory; lines: compaction moves)', el('span', {className: 'hint',
        text: 'shift+wheel: zoom offsets, hover: a block'})]));
      this.section.appendChild(this.map.canvas.node);
    }
    if (mode.timeline) {
      this.lanes = new LanesView(this);
      this.views.push(this.lanes);
      const t = mode.timeline;
      this.section.appendChild(el('div', {className: 'view-title lanes-title'}, [t.title + ': queues on the step axis (' +
        formatSeconds(t.seconds) + ' per iteration)']));
      this.section.appendChild(this.lanes.canvas.node);
      this.section.appendChild(legend(Object.keys(SLICE_COLORS).map((k) => [k, SLICE_COLORS[k]])));
    }
    for (const view of this.views) attach(view, this, view.canvas);
    this.details = el('div', {className: 'details'});
    this.section.appendChild(this.details);
    phase('built');
    this.select(mode.curvePeakStep);
    phase('details');
  }
  facts() {
    const mode = this.mode;
    const s = mode.summary;
    const fact = (label, node) => el('span', null, [label + ' ', node]);
    const box = el('div', {className: 'facts'});
    box.appendChild(fact('peak', el('output', {className: 'curve-peak', 'data-bytes': String(mode.curvePeak),
      'data-step': String(mode.curvePeakStep + 1), text: formatBytes(mode.curvePeak) + ' at step ' +
      (mode.curvePeakStep + 1)})));
    box.appendChild(fact('footprint', el('output', {text: formatBytes(s.footprint)})));
    box.appendChild(fact('allocator', el('output', {text: mode.raw.allocator})));
    if (mode.budget) box.appendChild(fact('budget', el('output', {text: formatBytes(mode.budget)})));
    box.appendChild(fact('blocks', el('output', {className: 'block-count', 'data-count': String(mode.blockCount),
      text: mode.blockCount.toLocaleString('en-US')})));
    box.appendChild(fact('steps', el('output', {className: 'step-count', 'data-count': String(mode.n),
      text: String(mode.n)})));
    if (s.seconds !== undefined) {
      box.appendChild(fact('iteration', el('output', {text: formatSeconds(s.seconds)})));
    }
    return box;
  }
  resize(width) {
    if (!this.views) return;
    for (const view of this.views) view.canvas.resize(width);
  }
  select(s) {
    const mode = this.mode;
    if (s < 0 || s >= mode.n) return;
    this.selected = s;
    renderDetails(mode, s, this.details);
    this.requestDraw();
  }
  requestDraw() { if (this.drawn) this.app.requestDraw(this); }
  drawAll(sync) {
    if (!this.views) return 0;
    this.drawn = true;
    let rects = 0;
    for (const view of this.views) {
      const drawn = view.draw(sync);
      if (view === this.map) rects = drawn;
      phase('draw ' + view.constructor.name);
    }
    return rects;
  }
}

function legend(entries) {
  return el('div', {className: 'legend'}, entries.map(([name, color]) => {
    const item = el('span', {text: name});
    item.style.setProperty('--swatch', color);
    return item;
  }));
}

function modesTable(app, modes) {
  const timed = modes.some((m) => m.fits && m.summary.seconds !== undefined);
  const head = ['mode', 'allocator', 'peak (max load)', 'footprint', 'fragmentation', 'to host',
    'to device', 'recomputations', 'compaction', 'host memory'];
  if (timed) head.push('iteration', 'relative time');
  const table = el('table', {className: 'modes'});
  table.appendChild(el('tr', null, head.map((h) => el('th', {text: h}))));
  const fitting = modes.filter((m) => m.fits);
  const fastest = timed ? Math.min(...fitting.filter((m) => m.summary.seconds !== undefined)
    .map((m) => m.summary.seconds)) : 0;
  const least = fitting.length ? Math.min(...fitting.map((m) => m.summary.peak)) : 0;
  for (const m of modes) {
    const row = el('tr', {className: 'mode-row', 'data-mode': m.name});
    row.appendChild(el('td', {text: m.name}));
    row.appendChild(el('td', {text: m.raw.allocator}));
    if (!m.fits) {
      // The failure's first clause; all of it on hover.
      const failure = m.raw.failure || '';
      const cut = failure.search(/ \(no room|; /);
      row.appendChild(el('td', {className: 'failure', colspan: String(head.length - 2),
        title: failure, text: 'does not fit: ' + (cut > 0 ? failure.slice(0, cut) + ' ...' : failure)}));
    } else {
      const s = m.summary;
      const cells = [formatBytes(s.peak), formatBytes(s.footprint),
        formatBytes(Math.max(0, s.footprint - s.peak)), formatBytes(s.to_host), formatBytes(s.to_device),
        String(s.recomputations), formatBytes(s.compacted), formatBytes(s.host_peak)];
      if (timed) {
        cells.push(s.seconds !== undefined ? formatSeconds(s.seconds) : '',
          s.seconds !== undefined ? (s.seconds / fastest).toFixed(2) + 'x' : '');
      }
      cells.forEach((text, i) => {
        const cell = el('td', {text});
        if (i === 0 && s.peak === least) cell.className = 'best';
        row.appendChild(cell);
      });
    }
    row.addEventListener('click', () => app.show(m.index));
    table.appendChild(row);
  }
  return table;
}

class App {
  constructor(data) {
    this.page = new PageModel(data);
    phase('page');
    this.modes = data.modes.map((raw, i) => new ModeModel(this.page, raw, i));
    phase('modes');
    this.tooltip = el('div', {className: 'tooltip'});
    this.queue = new Set();
    this.frame = 0;
    const root = document.getElementById('app');
    root.textContent = '';
    root.appendChild(el('h1', {text: data.title}));
    root.appendChild(el('div', {className: 'origin', text: data.origin}));
    root.appendChild(legend(this.page.categories.map((c, k) => [c, CATEGORY_COLORS[k]])));
    if (this.modes.length > 1) {
      root.appendChild(el('h2', {text: 'Modes compared'}));
      this.table = modesTable(this, this.modes);
      root.appendChild(this.table);
    }
    this.tabs = el('div', {className: 'tabs'});
    root.appendChild(this.tabs);
    this.views = this.modes.map((m) => new ModeView(this, m));
    phase('views');
    const fitting = this.modes.filter((m) => m.fits);
    this.sections = this.views.map((v) => v.section);
    this.buttons = this.modes.map((m) => el('button', {className: m.fits ? '' : 'unfit', text: m.name}));
    if (fitting.length > 1) {
      this.overlay = new OverlayView(this, fitting);
      const section = el('section', {className: 'overlay', 'data-mode': 'overlay'},
        [el('div', {className: 'view-title', text: 'Every mode: the highest moment of each step'}),
          this.overlay.canvas.node]);
      attach(this.overlay, this.overlay, this.overlay.canvas);
      this.overlay.select = (s) => {
        this.overlay.selected = s;
        this.requestDraw(this.overlay);
      };
      this.views.push({section, overlay: true, drawAll: () => this.overlay.draw(),
        resize: (w) => this.overlay.canvas.resize(w), requestDraw: () => this.requestDraw(this.overlay)});
      this.sections.push(section);
      this.buttons.push(el('button', {text: 'all modes'}));
    }
    this.buttons.forEach((b, i) => {
      b.addEventListener('click', () => this.show(i));
      this.tabs.appendChild(b);
    });
    for (const s of this.sections) root.appendChild(s);
    document.body.appendChild(this.tooltip);
    window.addEventListener('resize', () => this.resize());
    window.addEventListener('keydown', (e) => this.key(e));
    // The first mode that fits, or the one the address names (#mode=NAME,
    // #mode=all for the overlay).
    let named = this.modes.findIndex((m) => hashOption('mode') === m.name);
    if (hashOption('mode') === 'all' && this.overlay) named = this.sections.length - 1;
    this.show(named >= 0 ? named : Math.max(0, this.modes.findIndex((m) => m.fits)));
  }
  width() { return document.getElementById('app').clientWidth || window.innerWidth - 40; }
  show(i) {
    this.active = i;
    this.sections.forEach((s, k) => s.classList.toggle('active', k === i));
    this.buttons.forEach((b, k) => b.classList.toggle('active', k === i));
    if (this.table) {
      for (const row of this.table.querySelectorAll('tr.mode-row')) {
        row.classList.toggle('active', i < this.modes.length && row.dataset.mode === this.modes[i].name);
      }
    }
    const view = this.views[i];
    view.resize(this.width());
    view.drawAll(true);
    phase('drawn');
  }
  resize() {
    const view = this.views[this.active];
    view.resize(this.width());
    view.drawAll(true);
  }
  key(e) {
    const view = this.views[this.active];
    if (!view || view.overlay || view.selected < 0) return;
    const step = e.shiftKey ? 10 : 1;
    if (e.key === 'ArrowRight') view.select(Math.min(view.mode.n - 1, view.selected + step));
    else if (e.key === 'ArrowLeft') view.select(Math.max(0, view.selected - step));
  }
  requestDraw(view) {
    this.queue.add(view);
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      const views = Array.from(this.queue);
      this.queue.clear();
      for (const v of views) (v.drawAll ? v.drawAll() : v.draw());
    });
  }
}

// An option of the address's fragment: #mode=superneurons&bench.
function hashOption(name) {
  for (const part of location.hash.replace(/^#/, '').split('&')) {
    const [key, value] = part.split('=');
    if (key === name) return value === undefined ? true : decodeURIComponent(value);
  }
  return undefined;
}

// Pans and zooms the first mode's views, timing each redraw.
function bench(app) {
  const view = app.views[app.active];
  if (!view || !view.axis) return;
  const times = [];
  view.axis.reset();
  view.axis.zoom(view.axis.max * 0.3, 0.25);  // a quarter of the iteration
  view.drawAll(true);
  for (let i = 0; i < 60; i++) {
    const t0 = performance.now();
    view.axis.pan((view.axis.x1 - view.axis.x0) * 0.01 * (i < 30 ? 1 : -1));
    view.drawAll(false);
    times.push(performance.now() - t0);
  }
  view.axis.reset();
  const t0 = performance.now();
  view.drawAll(true);
  const zoomOut = performance.now() - t0;
  for (let i = 0; i < 20; i++) {
    const t1 = performance.now();
    view.axis.pan(0);
    view.drawAll(false);
    times.push(performance.now() - t1);
  }
  const mean = times.reduce((a, b) => a + b, 0) / times.length;
  document.body.dataset.panMs = mean.toFixed(1);
  document.body.dataset.panMaxMs = Math.max(...times).toFixed(1);
  document.body.dataset.zoomMs = zoomOut.toFixed(1);
}

function main() {
  const data = JSON.parse(document.getElementById('spill-data').textContent);
  phase('parsed');
  const app = new App(data);
  document.body.dataset.renderMs = (performance.now()).toFixed(0);
  document.body.dataset.scriptMs = (performance.now() - started).toFixed(0);
  document.body.dataset.rendered = '1';
  if (hashOption('bench')) {
    document.body.dataset.phases = phases.join(', ');
    bench(app);
  }
  window.spillMemoryPage = app;
}
