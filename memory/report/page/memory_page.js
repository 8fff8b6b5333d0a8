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
(function () {
  'use strict';

  const CATEGORY_COLORS = ['#4e79a7', '#f28e2b', '#b07aa1', '#59a14f', '#e15759', '#9c755f'];
  const SLICE_COLORS = {
    forward: '#4e79a7', backward: '#f28e2b', recompute: '#e15759', update: '#76b7b2',
    offload: '#59a14f', prefetch: '#d4a22a', compact: '#b07aa1', wait: '#cfc9c3', map: '#9c755f',
  };
  const MODE_COLORS = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948',
    '#b07aa1', '#ff9da7', '#9c755f', '#7f7f7f', '#17becf', '#bcbd22'];
  const KIB = 1024;
  const LEFT = 70;             // px left of every plot: the y labels; plots align on it
  const RIGHT = 12;
  const CURVE_HEIGHT = 230;
  const MAP_HEIGHT = 380;
  const LANE_HEIGHT = 22;
  const LOD_MIN_SEGMENTS = 20000;  // below this every block is drawn as it is
  const LIVE_SHOWN = 60;           // live tensors listed before "show all"
  const STAGING = 5;               // PlacedBy::kStaging (address_map.h)
  const started = performance.now();
  const phases = [];  // [name, ms] as the page builds (written with #bench)
  function phase(name) { phases.push(name + ' ' + (performance.now() - started).toFixed(0)); }

  // ---------------------------------------------------------------- helpers

  function formatBytes(bytes) {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    let v = bytes;
    let i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) {
      v /= 1024;
      i++;
    }
    return i === 0 ? v + ' B' : v.toFixed(2) + ' ' + units[i];
  }

  function formatSeconds(s) {
    if (s >= 1) return s.toFixed(3) + ' s';
    if (s >= 1e-3) return (s * 1e3).toFixed(3) + ' ms';
    return (s * 1e6).toFixed(1) + ' µs';
  }

  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    if (attrs) {
      for (const key of Object.keys(attrs)) {
        if (key === 'text') node.textContent = attrs[key];
        else if (key === 'className') node.className = attrs[key];
        else node.setAttribute(key, attrs[key]);
      }
    }
    for (const child of children || []) {
      node.appendChild(typeof child === 'string' ? document.createTextNode(child) : child);
    }
    return node;
  }

  // A tick step of 1, 2 or 5 times a power of `base` giving about `count` ticks.
  function niceStep(range, count, base) {
    const raw = range / Math.max(count, 1);
    let p = 1;
    while (p * base <= raw) p *= base;
    while (p > raw && p > 1) p /= base;
    for (const m of [1, 2, 5, 10, 20, 50, 100, 200, 500]) {
      if (p * m >= raw) return p * m;
    }
    return p * base;
  }

  // Largest index i with values[i] <= x (-1 when none).
  function lastAtMost(values, x) {
    let lo = 0;
    let hi = values.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (values[mid] <= x) lo = mid + 1;
      else hi = mid;
    }
    return lo - 1;
  }

  // ---------------------------------------------------------------- decoding

  // page_encoding.h's integer columns.
  function decodeColumn(spec, n) {
    const out = new Float64Array(n);
    if (!spec) return out;
    const unit = spec.u || 1;
    if (spec.c !== undefined) {
      out.fill(spec.c * unit);
    } else if (spec.v) {
      for (let i = 0; i < n; i++) out[i] = spec.v[i] * unit;
    } else if (spec.d) {
      let acc = 0;
      for (let i = 0; i < n; i++) {
        acc += spec.d[i];
        out[i] = acc * unit;
      }
    }
    return out;
  }

  function decodeNames(spec) {
    const names = new Array(spec.s.length);
    let previous = '';
    for (let i = 0; i < names.length; i++) {
      previous = previous.slice(0, spec.p[i]) + spec.s[i];
      names[i] = previous;
    }
    return names;
  }

  function prefixSums(counts) {
    const start = new Float64Array(counts.length + 1);
    for (let i = 0; i < counts.length; i++) start[i + 1] = start[i] + counts[i];
    return start;
  }

  // What every mode shares: layers, tensors, which steps read and write them.
  class PageModel {
    constructor(data) {
      this.data = data;
      this.categories = data.categories;
      this.layers = decodeNames(data.layers);
      const t = data.tensors;
      this.tensorCount = t.count;
      this.tensorLayer = decodeColumn(t.layer, t.count);
      this.tensorTemplate = decodeColumn(t.template, t.count);
      const k = t.suffix.length;
      this.suffix = t.suffix;
      this.templateKind = decodeColumn(t.kind, k);
      this.templateBytes = decodeColumn(t.bytes, k);
      this.templateWhole = decodeColumn(t.whole, k);
      this.transient = new Set(data.transient_kinds);
      const s = data.steps;
      const reads = decodeColumn(s.reads, s.count);
      const writes = decodeColumn(s.writes, s.count);
      this.readStart = prefixSums(reads);
      this.writeStart = prefixSums(writes);
      this.readIds = decodeColumn(s.read, this.readStart[s.count]);
      this.writeIds = decodeColumn(s.written, this.writeStart[s.count]);
      this.scheduleSteps = s.count;
      this.readersOf = null;
    }
    tensorName(id) {
      const tp = this.tensorTemplate[id];
      return this.templateWhole[tp] ? this.suffix[tp] : this.layers[this.tensorLayer[id]] + this.suffix[tp];
    }
    tensorBytes(id) { return this.templateBytes[this.tensorTemplate[id]]; }
    tensorKind(id) { return this.templateKind[this.tensorTemplate[id]]; }
    tensorCategory(id) { return this.data.kind_category[this.tensorKind(id)]; }
    isTransient(id) { return this.transient.has(this.tensorKind(id)); }
    blockBytes(id) { return Math.ceil(Math.max(this.tensorBytes(id), 1) / KIB) * KIB; }
    // Steps that read (`reads`) or write a tensor, from the per-step lists.
    stepsOf(id, reads) {
      if (!this.readersOf) {
        this.readersOf = this.invert(this.readStart, this.readIds);
        this.writersOf = this.invert(this.writeStart, this.writeIds);
      }
      const index = reads ? this.readersOf : this.writersOf;
      return Array.from(index.ids.subarray(index.start[id], index.start[id + 1]));
    }
    invert(start, ids) {
      const counts = new Float64Array(this.tensorCount);
      for (let i = 0; i < ids.length; i++) counts[ids[i]]++;
      const first = prefixSums(counts);
      const fill = Float64Array.from(first);
      const steps = new Int32Array(ids.length);
      for (let s = 0; s + 1 < start.length; s++) {
        for (let i = start[s]; i < start[s + 1]; i++) steps[fill[ids[i]]++] = s;
      }
      return {start: first, ids: steps};
    }
  }

  // One mode: step records, blocks, moves, actions and timeline, decoded.
  class ModeModel {
    constructor(page, raw, index) {
      this.page = page;
      this.raw = raw;
      this.index = index;
      this.name = raw.mode;
      this.fits = raw.fits;
      this.budget = raw.budget || 0;
      if (!this.fits) return;
      this.summary = raw.summary;
      this.decodeSteps(raw.steps);
      this.blockCount = 0;
      if (raw.events) this.decodeBlocks(raw);
      phase("blocks");
      this.timeline = raw.timeline ? new TimelineModel(raw.timeline, this) : null;
      this.xMax = this.n + (this.timeline && this.timeline.tail ? 1 : 0);
    }

    decodeSteps(st) {
      const n = st.count;
      this.n = n;
      this.forward = st.forward;
      this.layer = decodeColumn(st.layer, n);
      this.pass = st.pass ? decodeColumn(st.pass, n) : null;
      this.inUse = st.in_use.map((c) => decodeColumn(c, n));
      this.total = new Float64Array(n);
      for (const column of this.inUse) {
        for (let s = 0; s < n; s++) this.total[s] += column[s];
      }
      const extra = decodeColumn(st.peak, n);
      this.peak = new Float64Array(n);
      for (let s = 0; s < n; s++) this.peak[s] = this.total[s] + extra[s];
      for (const key of ['live', 'to_host', 'to_device', 'recomputed', 'compacted', 'workspace',
        'host', 'slice', 'algorithm']) {
        this[key] = decodeColumn(st[key], n);
      }
      this.algorithms = st.algorithms;
      // The curve's peak: the first step with the highest peak.
      this.curvePeak = 0;
      this.curvePeakStep = -1;
      for (let s = 0; s < n; s++) {
        if (this.curvePeakStep < 0 || this.peak[s] > this.curvePeak) {
          this.curvePeak = this.peak[s];
          this.curvePeakStep = s;
        }
      }
    }

    isForward(s) { return this.pass ? this.pass[s] === 0 : s < this.forward; }
    stepName(s) {
      if (s < 0 || s >= this.n) return s < 0 ? 'before the iteration' : 'after the iteration';
      return 'step ' + (s + 1) + ' (' + this.page.layers[this.layer[s]] +
        (this.isForward(s) ? ' forward)' : ' backward)');
    }

    decodeBlocks(raw) {
      const n = this.n;
      const ev = raw.events;
      this.eventCount = ev.count;
      this.first = decodeColumn(ev.first, n + 1);
      const record = decodeColumn(ev.record, n);
      this.record = new Float64Array(n);
      for (let s = 0; s < n; s++) this.record[s] = this.first[s] + record[s];
      const b = raw.blocks;
      const count = b.count;
      this.blockCount = count;
      this.begin = decodeColumn(b.begin, count);
      const life = decodeColumn(b.life, count);
      const gap = decodeColumn(b.gap, count);
      const bytes = decodeColumn(b.bytes, count);
      const tensor = decodeColumn(b.tensor, count);
      const cause = decodeColumn(b.cause, count);
      const category = b.category ? decodeColumn(b.category, count) : null;
      const end = new Float64Array(count);
      const offset = new Float64Array(count);
      const size = new Float64Array(count);
      const ids = new Int32Array(count);
      const categories = new Uint8Array(count);
      this.placed = new Uint8Array(count);
      this.evicted = new Uint8Array(count);
      const workspace = this.page.categories.length - 1;
      const page = this.page;
      const templates = page.tensorTemplate;
      const templateCategory = page.templateKind.map((k) => page.data.kind_category[k]);
      const templateBlock = page.templateBytes.map((v) => Math.ceil(Math.max(v, 1) / KIB) * KIB);
      const begin = this.begin;
      let previousEnd = 0;
      let top = 0;
      for (let i = 0; i < count; i++) {
        const id = tensor[i] - 1;
        ids[i] = id;
        end[i] = life[i] ? begin[i] + life[i] : -1;
        size[i] = bytes[i] || templateBlock[templates[id]];
        offset[i] = previousEnd + gap[i];
        previousEnd = offset[i] + size[i];
        if (previousEnd > top) top = previousEnd;
        categories[i] = category ? category[i] : id < 0 ? workspace : templateCategory[templates[id]];
        this.placed[i] = cause[i] >> 3;
        this.evicted[i] = cause[i] & 7;
      }
      Object.assign(this, {end, offset, size, tensor: ids, category: categories});
      this.decodeMoves(b.moves, count);
      for (let m = 0; m < this.moveCount; m++) {
        top = Math.max(top, this.moveOffset[m] + this.size[this.moveBlock[m]]);
      }
      this.top = top;
      this.decodeActions(raw.actions);
      this.buildSegments();
    }

    decodeMoves(moves, count) {
      this.moveCount = moves ? moves.block.d ? moves.block.d.length : moves.block.v.length : 0;
      const m = this.moveCount;
      this.moveBlock = decodeColumn(moves && moves.block, m);
      this.moveEvent = decodeColumn(moves && moves.event, m);
      this.moveOffset = decodeColumn(moves && moves.offset, m);
      this.moveFirst = new Int32Array(count + 1);  // moves of block b: [moveFirst[b], moveFirst[b+1])
      for (let i = 0; i < m; i++) this.moveFirst[this.moveBlock[i] + 1]++;
      for (let b = 0; b < count; b++) this.moveFirst[b + 1] += this.moveFirst[b];
    }

    decodeActions(a) {
      const n = a.count;
      this.actionCount = n;
      this.actionType = decodeColumn(a.type, n);
      this.actionEvent = decodeColumn(a.event, n);
      this.actionRef = decodeColumn(a.ref, n);
      this.actionBytes = decodeColumn(a.bytes, n);
    }

    // The x position (in steps) of event `i`: a step's events before its
    // record fill the first half of the step, the rest the second half.
    xOfEvent(i) {
      const n = this.n;
      if (i < this.first[0]) return 0;
      if (i >= this.first[n]) return n;
      const s = Math.min(lastAtMost(this.first, i), n - 1);
      const f = this.first[s];
      const g = this.first[s + 1];
      const r = this.record[s];
      if (i < r) return s + 0.5 * (i - f + 1) / (r - f + 1);
      return s + 0.5 + 0.5 * (i - r + 1) / (g - r + 1);
    }

    stepOfEvent(i) {
      if (i < this.first[0]) return -1;
      if (i >= this.first[this.n]) return this.n;
      return Math.min(lastAtMost(this.first, i), this.n - 1);
    }

    // Rectangles: a block, split where compaction moved it.
    buildSegments() {
      const count = this.blockCount + this.moveCount;
      const x0 = new Float64Array(count);
      const x1 = new Float64Array(count);
      const y0 = new Float64Array(count);
      const y1 = new Float64Array(count);
      const block = new Int32Array(count);
      const {begin, end, offset, size, moveFirst, moveEvent, moveOffset, n} = this;
      let k = 0;
      for (let b = 0; b < this.blockCount; b++) {
        let x = this.xOfEvent(begin[b]);
        let at = offset[b];
        const last = end[b] < 0 ? n : this.xOfEvent(end[b]);
        for (let m = moveFirst[b]; m <= moveFirst[b + 1]; m++) {
          const moved = m < moveFirst[b + 1];
          const to = moved ? this.xOfEvent(moveEvent[m]) : last;
          x0[k] = x;
          x1[k] = to;
          y0[k] = at / KIB;
          y1[k] = (at + size[b]) / KIB;
          block[k] = b;
          k++;
          if (moved) {
            x = to;
            at = moveOffset[m];
          }
        }
      }
      Object.assign(this, {segX0: x0, segX1: x1, segY0: y0, segY1: y1, segBlock: block, segCount: count});
    }

    // Blocks of transient tensors (staging excluded) on the device at the
    // record of step `s`.
    liveAt(s) {
      const r = this.record[s];
      const out = [];
      for (let b = 0; b < this.blockCount; b++) {
        const id = this.tensor[b];
        if (this.begin[b] < r && (this.end[b] < 0 || this.end[b] >= r) && id >= 0 &&
            this.placed[b] !== STAGING && this.page.isTransient(id)) {
          out.push(b);
        }
      }
      return out;
    }

    actionsOf(s) {
      const out = [];
      if (!this.actionCount) return out;
      const lo = s < 0 ? 0 : this.first[s];
      const hi = s >= this.n - 1 ? Infinity : this.first[s + 1];
      for (let a = lastAtMost(this.actionEvent, lo - 1) + 1; a < this.actionCount; a++) {
        if (this.actionEvent[a] >= hi) break;
        out.push(a);
      }
      return out;
    }
  }

  // A timeline's slices, placed on the step axis: step s spans the time from
  // the end of step s-1's computation to the end of its own.
  class TimelineModel {
    constructor(t, mode) {
      const n = t.count;
      this.title = t.title;
      this.seconds = t.seconds;
      this.count = n;
      this.laneNames = t.lanes;
      this.categories = t.categories;
      this.names = t.names;
      this.lane = decodeColumn(t.lane, n);
      this.category = decodeColumn(t.category, n);
      this.start = decodeColumn(t.start, n);
      this.duration = decodeColumn(t.duration, n);
      this.step = decodeColumn(t.step, n);
      this.bytes = decodeColumn(t.bytes, n);
      this.name = decodeColumn(t.name, n);
      const steps = mode.n;
      const computeEnd = new Float64Array(steps).fill(-1);
      for (let i = 0; i < n; i++) {
        const cat = this.categories[this.category[i]];
        const s = this.step[i];
        if (this.lane[i] === 0 && (cat === 'forward' || cat === 'backward') && s >= 0 && s < steps) {
          computeEnd[s] = Math.max(computeEnd[s], this.start[i] + this.duration[i]);
        }
      }
      for (let s = 0; s < steps; s++) {
        computeEnd[s] = Math.max(computeEnd[s], s > 0 ? computeEnd[s - 1] : 0);
      }
      this.computeEnd = computeEnd;
      this.steps = steps;
      const last = steps ? computeEnd[steps - 1] : 0;
      this.tail = this.seconds * 1e9 > last;
      this.x0 = new Float64Array(n);
      this.x1 = new Float64Array(n);
      for (let i = 0; i < n; i++) {
        this.x0[i] = this.xOfTime(this.start[i]);
        this.x1[i] = this.xOfTime(this.start[i] + this.duration[i]);
      }
      this.mode = mode;
    }
    // Nanoseconds -> steps (the time after the last step fills one more).
    xOfTime(t) {
      const end = this.computeEnd;
      const n = this.steps;
      const last = n ? end[n - 1] : 0;
      if (t > last) {
        const rest = this.seconds * 1e9 - last;
        return n + (rest > 0 ? Math.min(1, (t - last) / rest) : 0);
      }
      let lo = 0;
      let hi = n - 1;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (end[mid] >= t) hi = mid;
        else lo = mid + 1;
      }
      const previous = lo > 0 ? end[lo - 1] : 0;
      const span = end[lo] - previous;
      return lo + (span > 0 ? (t - previous) / span : 1);
    }
    sliceName(i) {
      const k = this.name[i];
      if (k >= 0) return this.names[k];
      const s = this.step[i];
      const mode = this.mode;
      return mode.page.layers[mode.layer[s]] + (mode.isForward(s) ? ' forward' : ' backward');
    }
  }

  // ---------------------------------------------------------------- drawing

  // A canvas spanning the page's width, in CSS pixels.
  class Canvas {
    constructor(height) {
      this.height = height;
      this.node = el('canvas');
      this.ctx = this.node.getContext('2d');
    }
    resize(width) {
      const ratio = window.devicePixelRatio || 1;
      this.width = Math.max(width, LEFT + RIGHT + 100);
      this.node.width = Math.round(this.width * ratio);
      this.node.height = Math.round(this.height * ratio);
      this.node.style.height = this.height + 'px';
      this.ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    }
    clear() { this.ctx.clearRect(0, 0, this.width, this.height); }
  }

  // The x axis a mode's views share: visible steps [x0, x1).
  class XAxis {
    constructor(max) {
      this.max = max;
      this.reset();
    }
    reset() {
      this.x0 = 0;
      this.x1 = Math.max(this.max, 1);
    }
    plotWidth(canvas) { return canvas.width - LEFT - RIGHT; }
    px(x, canvas) { return LEFT + (x - this.x0) / (this.x1 - this.x0) * this.plotWidth(canvas); }
    x(px, canvas) { return this.x0 + (px - LEFT) / this.plotWidth(canvas) * (this.x1 - this.x0); }
    zoom(at, factor) {
      const range = Math.min(Math.max((this.x1 - this.x0) * factor, 2), Math.max(this.max, 1));
      const t = (at - this.x0) / (this.x1 - this.x0);
      this.x0 = at - t * range;
      this.x1 = this.x0 + range;
      this.clamp();
    }
    pan(dx) {
      this.x0 += dx;
      this.x1 += dx;
      this.clamp();
    }
    clamp() {
      const range = this.x1 - this.x0;
      if (this.x0 < 0) this.x0 = 0;
      if (this.x0 + range > this.max) this.x0 = Math.max(0, this.max - range);
      this.x1 = this.x0 + range;
    }
  }

  function drawStepAxis(ctx, axis, canvas, y, mode) {
    ctx.fillStyle = '#5b6570';
    ctx.strokeStyle = '#d5dae0';
    ctx.font = '11px system-ui, sans-serif';
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    const step = Math.max(1, niceStep(axis.x1 - axis.x0, canvas.width / 110, 10));
    for (let s = Math.ceil(axis.x0 / step) * step; s <= axis.x1; s += step) {
      const px = axis.px(s + 0.5, canvas);
      const half = ctx.measureText(String(s + 1)).width / 2;
      if (px < LEFT || px + half > canvas.width) continue;
      ctx.fillText(String(s + 1), px, y + 3);
    }
    if (mode && mode.forward > 0 && mode.forward < mode.n) {
      const px = axis.px(mode.forward, canvas);
      if (px >= LEFT && px <= canvas.width - RIGHT) {
        ctx.strokeStyle = '#8a939c';
        ctx.setLineDash([2, 3]);
        ctx.beginPath();
        ctx.moveTo(px + 0.5, 4);
        ctx.lineTo(px + 0.5, y);
        ctx.stroke();
        ctx.setLineDash([]);
        ctx.textAlign = 'left';
        ctx.fillText('backward', px + 4, 2);
        ctx.textAlign = 'right';
        ctx.fillText('forward', px - 4, 2);
      }
    }
  }

  function drawByteAxis(ctx, canvas, top, bottom, maxBytes, toPx) {
    ctx.font = '11px system-ui, sans-serif';
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    const step = niceStep(maxBytes, (bottom - top) / 45, 2);
    for (let b = 0; b <= maxBytes * 1.0001; b += step) {
      const y = toPx(b);
      if (y < top - 1 || y > bottom + 1) continue;
      ctx.strokeStyle = '#eceef1';
      ctx.beginPath();
      ctx.moveTo(LEFT, Math.round(y) + 0.5);
      ctx.lineTo(canvas.width - RIGHT, Math.round(y) + 0.5);
      ctx.stroke();
      ctx.fillStyle = '#5b6570';
      ctx.fillText(formatBytes(b), LEFT - 6, y);
    }
  }

  // A dashed level across the plot, labelled at the right (or the left).
  function drawHorizontal(ctx, canvas, y, color, label, dash, left) {
    ctx.strokeStyle = color;
    ctx.setLineDash(dash);
    ctx.beginPath();
    ctx.moveTo(LEFT, Math.round(y) + 0.5);
    ctx.lineTo(canvas.width - RIGHT, Math.round(y) + 0.5);
    ctx.stroke();
    ctx.setLineDash([]);
    ctx.fillStyle = color;
    ctx.textAlign = left ? 'left' : 'right';
    ctx.textBaseline = left ? 'top' : 'bottom';
    ctx.font = '11px system-ui, sans-serif';
    ctx.fillText(label, left ? LEFT + 4 : canvas.width - RIGHT - 4, left ? y + 2 : y - 2);
  }

  function drawSelection(ctx, axis, canvas, step, top, bottom) {
    if (step < 0) return;
    const a = axis.px(step, canvas);
    const b = axis.px(step + 1, canvas);
    ctx.fillStyle = 'rgba(42, 111, 219, 0.18)';
    ctx.fillRect(a, top, Math.max(b - a, 2), bottom - top);
    ctx.strokeStyle = 'rgba(42, 111, 219, 0.8)';
    ctx.beginPath();
    ctx.moveTo(Math.round((a + b) / 2) + 0.5, top);
    ctx.lineTo(Math.round((a + b) / 2) + 0.5, bottom);
    ctx.stroke();
  }

  // For each pixel column of the visible steps, the step with the highest
  // `values` (level of detail for curves); one entry per step when zoomed in.
  function columnSteps(axis, canvas, n, values) {
    const s0 = Math.max(0, Math.floor(axis.x0));
    const s1 = Math.min(n, Math.ceil(axis.x1));
    const out = [];
    let column = -Infinity;
    for (let s = s0; s < s1; s++) {
      const c = Math.floor(axis.px(s, canvas));
      if (c !== column) {
        out.push(s);
        column = c;
      } else if (values[s] > values[out[out.length - 1]]) {
        out[out.length - 1] = s;
      }
    }
    return out;
  }

  // The memory curve: bytes in use per step, stacked by category, with the
  // step's peak (its highest moment) as a line, the budget and the selection.
  class CurveView {
    constructor(modeView) {
      this.view = modeView;
      this.mode = modeView.mode;
      this.canvas = new Canvas(CURVE_HEIGHT);
      this.top = 30;  // room for the peak's label under the forward/backward one
      this.bottom = CURVE_HEIGHT - 18;
    }
    yMax() {
      const mode = this.mode;
      let max = mode.curvePeak * 1.06;
      if (mode.budget && mode.budget <= 2 * mode.curvePeak) max = Math.max(max, mode.budget * 1.04);
      return Math.max(max, 1);
    }
    yPx(bytes) { return this.bottom - bytes / this.yMax() * (this.bottom - this.top); }
    draw() {
      const c = this.canvas;
      const ctx = c.ctx;
      const mode = this.mode;
      const axis = this.view.axis;
      c.clear();
      drawByteAxis(ctx, c, this.top, this.bottom, this.yMax(), (b) => this.yPx(b));
      const steps = columnSteps(axis, c, mode.n, mode.peak);
      const paths = mode.inUse.map(() => new Path2D());
      const peakLine = new Path2D();
      for (const s of steps) {
        let xa = axis.px(s, c);
        let xb = axis.px(s + 1, c);
        if (xb - xa < 1) {
          xa = Math.floor(xa);
          xb = xa + 1;
        }
        xa = Math.max(xa, LEFT);
        xb = Math.min(xb, c.width - RIGHT);
        if (xb <= xa) continue;
        let below = 0;
        for (let k = 0; k < mode.inUse.length; k++) {
          const v = mode.inUse[k][s];
          if (v > 0) {
            const y0 = this.yPx(below);
            const y1 = this.yPx(below + v);
            paths[k].rect(xa, y1, xb - xa, y0 - y1);
          }
          below += v;
        }
        const yp = this.yPx(mode.peak[s]);
        peakLine.moveTo(xa, yp);
        peakLine.lineTo(xb, yp);
      }
      for (let k = 0; k < paths.length; k++) {
        ctx.fillStyle = CATEGORY_COLORS[k];
        ctx.fill(paths[k]);
      }
      ctx.strokeStyle = '#1d232a';
      ctx.lineWidth = 1;
      ctx.stroke(peakLine);
      if (mode.budget) {
        const y = this.yPx(mode.budget);
        if (y >= this.top) {
          drawHorizontal(ctx, c, y, '#c0392b', 'budget ' + formatBytes(mode.budget), [6, 4]);
        }
      }
      const peakX = axis.px(mode.curvePeakStep + 0.5, c);
      if (peakX >= LEFT && peakX <= c.width - RIGHT) {
        ctx.fillStyle = '#1d232a';
        ctx.textAlign = peakX > c.width / 2 ? 'right' : 'left';
        ctx.textBaseline = 'top';
        ctx.font = '600 11px system-ui, sans-serif';
        ctx.fillText('peak ' + formatBytes(mode.curvePeak) + ' at step ' + (mode.curvePeakStep + 1),
          peakX + (peakX > c.width / 2 ? -6 : 6), 15);
      }
      drawSelection(ctx, axis, c, this.view.selected, this.top, this.bottom);
      drawStepAxis(ctx, axis, c, this.bottom, mode);
    }
    hover(px) {
      const mode = this.mode;
      const s = Math.floor(this.view.axis.x(px, this.canvas));
      if (s < 0 || s >= mode.n) return null;
      const rows = [];
      for (let k = mode.inUse.length - 1; k >= 0; k--) {
        if (mode.inUse[k][s] > 0) {
          rows.push(mode.page.categories[k] + ' ' + formatBytes(mode.inUse[k][s]));
        }
      }
      return '<b>' + escapeHtml(mode.stepName(s)) + '</b><br>in use ' + formatBytes(mode.total[s]) +
        ', peak in the step ' + formatBytes(mode.peak[s]) + '<br><span class="muted">' +
        rows.map(escapeHtml).join('<br>') + '</span>';
    }
    stepAt(px) { return Math.floor(this.view.axis.x(px, this.canvas)); }
  }

  function escapeHtml(text) {
    return String(text).replace(/[&<>"]/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'})[c]);
  }

  // Merged rectangles of one zoom level: segments snapped to whole pixel
  // cells, and those that share their columns and touch joined into one
  // run, drawn as a band per category in proportion to its bytes (exact
  // where a run holds one category), so that drawing costs what the screen
  // shows, not what the iteration placed. Null where cells are too fine to
  // need it.
  function buildLevel(mode, sx, sy) {
    const n = mode.segCount;
    const columns = Math.ceil(mode.xMax * sx) + 2;
    const rows = Math.ceil(mode.top / KIB * sy) + 2;
    // (first column, last column, first row, segment) in one exact double;
    // finer levels draw every segment.
    const INDEX_BITS = 2 ** Math.ceil(Math.log2(n + 1));
    if (columns * columns * rows * INDEX_BITS >= Number.MAX_SAFE_INTEGER) return null;
    const categories = CATEGORY_COLORS.length;
    const keys = new Float64Array(n);
    const cy1 = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const x0 = Math.floor(mode.segX0[i] * sx);
      const x1 = Math.max(x0 + 1, Math.ceil(mode.segX1[i] * sx));
      const y0 = Math.floor(mode.segY0[i] * sy);
      cy1[i] = Math.max(y0 + 1, Math.ceil(mode.segY1[i] * sy));
      keys[i] = ((x0 * columns + x1) * rows + y0) * INDEX_BITS + i;
    }
    keys.sort();
    const out = {x0: [], x1: [], y0: [], y1: [], category: []};
    const bytes = new Float64Array(categories);
    const emit = (x0, x1, y0, y1) => {
      let total = 0;
      for (let k = 0; k < categories; k++) total += bytes[k];
      let y = y0;
      for (let k = 0; k < categories; k++) {
        if (!bytes[k]) continue;
        const h = (y1 - y0) * bytes[k] / total;
        out.x0.push(x0 / sx);
        out.x1.push(x1 / sx);
        out.y0.push(y / sy);
        out.y1.push((y + h) / sy);
        out.category.push(k);
        y += h;
      }
      bytes.fill(0);
    };
    let group = -1;
    let runStart = -1;
    let runEnd = -1;
    let gx0 = 0;
    let gx1 = 0;
    for (let j = 0; j < n; j++) {
      const i = keys[j] % INDEX_BITS;
      const cell = (keys[j] - i) / INDEX_BITS;
      const y0 = cell % rows;
      const columnsKey = (cell - y0) / rows;
      if (columnsKey !== group || y0 > runEnd) {
        if (runStart >= 0) emit(gx0, gx1, runStart, runEnd);
        group = columnsKey;
        gx1 = columnsKey % columns;
        gx0 = (columnsKey - gx1) / columns;
        runStart = y0;
        runEnd = cy1[i];
      }
      runEnd = Math.max(runEnd, cy1[i]);
      bytes[mode.category[mode.segBlock[i]]] += mode.segY1[i] - mode.segY0[i];
    }
    if (runStart >= 0) emit(gx0, gx1, runStart, runEnd);
    return {count: out.x0.length, x0: Float64Array.from(out.x0), x1: Float64Array.from(out.x1),
      y0: Float64Array.from(out.y0), y1: Float64Array.from(out.y1),
      category: Uint8Array.from(out.category)};
  }

  // The address space: offsets upward, steps across; free memory shows as
  // the pale background between blocks.
  class MapView {
    constructor(modeView) {
      this.view = modeView;
      this.mode = modeView.mode;
      this.canvas = new Canvas(MAP_HEIGHT);
      this.top = 6;
      this.bottom = MAP_HEIGHT - 18;
      this.levels = new Map();
      this.pending = null;
      this.resetY();
    }
    resetY() {
      const mode = this.mode;
      let top = mode.top / KIB;
      if (mode.budget && mode.budget <= 1.5 * mode.top) top = Math.max(top, mode.budget / KIB);
      if (mode.summary.footprint) top = Math.max(top, mode.summary.footprint / KIB);
      this.y0 = 0;
      this.y1 = Math.max(top * 1.02, 1);
      this.yMax = this.y1;
    }
    yPx(kib) { return this.bottom - (kib - this.y0) / (this.y1 - this.y0) * (this.bottom - this.top); }
    kibAt(py) { return this.y0 + (this.bottom - py) / (this.bottom - this.top) * (this.y1 - this.y0); }
    zoomY(py, factor) {
      const at = this.kibAt(py);
      const range = Math.min(Math.max((this.y1 - this.y0) * factor, 1), this.yMax);
      const t = (at - this.y0) / (this.y1 - this.y0);
      this.y0 = Math.max(0, at - t * range);
      this.y1 = this.y0 + range;
      if (this.y1 > this.yMax) {
        this.y1 = this.yMax;
        this.y0 = Math.max(0, this.y1 - range);
      }
    }
    panY(dy) {
      const dk = dy / (this.bottom - this.top) * (this.y1 - this.y0);
      const range = this.y1 - this.y0;
      this.y0 = Math.min(Math.max(0, this.y0 + dk), Math.max(0, this.yMax - range));
      this.y1 = this.y0 + range;
    }
    scales() {
      const axis = this.view.axis;
      return {sx: axis.plotWidth(this.canvas) / (axis.x1 - axis.x0),
        sy: (this.bottom - this.top) / (this.y1 - this.y0)};
    }
    // The merged rectangles for the current zoom (null: draw every segment).
    // A level not built yet is built at once when none is, and otherwise
    // shortly after the zoom settles, the nearest one drawn meanwhile.
    level(sync) {
      if (this.mode.segCount < LOD_MIN_SEGMENTS) return null;
      const {sx, sy} = this.scales();
      const lx = Math.floor(Math.log2(sx));
      const ly = Math.floor(Math.log2(sy));
      const key = lx + ',' + ly;
      if (this.levels.has(key)) return this.levels.get(key);
      const build = () => {
        const built = buildLevel(this.mode, Math.pow(2, lx), Math.pow(2, ly));
        if (this.levels.size >= 8) this.levels.delete(this.levels.keys().next().value);
        this.levels.set(key, built);
        if (built) built.key = [lx, ly];
        return built;
      };
      if (sync || this.levels.size === 0) return build();
      clearTimeout(this.pending);
      this.pending = setTimeout(() => {
        build();
        this.view.requestDraw();
      }, 80);
      let best = null;
      let distance = Infinity;
      for (const level of this.levels.values()) {
        if (!level) continue;
        const d = Math.abs(level.key[0] - lx) + Math.abs(level.key[1] - ly);
        if (d < distance) {
          distance = d;
          best = level;
        }
      }
      return best;
    }
    draw(sync) {
      const c = this.canvas;
      const ctx = c.ctx;
      const mode = this.mode;
      const axis = this.view.axis;
      c.clear();
      ctx.save();
      ctx.beginPath();
      ctx.rect(LEFT, this.top, c.width - LEFT - RIGHT, this.bottom - this.top);
      ctx.clip();
      ctx.fillStyle = '#eef0f3';
      const spaceTop = this.yPx(mode.top / KIB);
      ctx.fillRect(LEFT, spaceTop, c.width, this.bottom - spaceTop);
      const level = this.level(sync);
      const rects = level || {count: mode.segCount, x0: mode.segX0, x1: mode.segX1,
        y0: mode.segY0, y1: mode.segY1, category: null};
      const paths = CATEGORY_COLORS.map(() => new Path2D());
      const outlines = new Path2D();
      const right = c.width - RIGHT;
      for (let i = 0; i < rects.count; i++) {
        let xa = axis.px(rects.x0[i], c);
        let xb = axis.px(rects.x1[i], c);
        if (xb < LEFT || xa > right) continue;
        let ya = this.yPx(rects.y1[i]);
        let yb = this.yPx(rects.y0[i]);
        if (yb < this.top || ya > this.bottom) continue;
        if (xb - xa < 1) xb = xa + 1;
        if (yb - ya < 1) ya = yb - 1;
        xa = Math.max(xa, LEFT - 1);
        xb = Math.min(xb, right + 1);
        const k = rects.category ? rects.category[i] : mode.category[mode.segBlock[i]];
        paths[k].rect(xa, ya, xb - xa, yb - ya);
        if (!level && xb - xa >= 6 && yb - ya >= 4) outlines.rect(xa + 0.5, ya + 0.5, xb - xa - 1, yb - ya - 1);
      }
      for (let k = 0; k < paths.length; k++) {
        ctx.fillStyle = CATEGORY_COLORS[k];
        ctx.fill(paths[k]);
      }
      ctx.strokeStyle = 'rgba(255, 255, 255, 0.75)';
      ctx.stroke(outlines);
      this.drawMoves(ctx);
      ctx.restore();
      if (mode.summary.footprint) {
        const y = this.yPx(mode.summary.footprint / KIB);
        if (y >= this.top && y <= this.bottom) {
          drawHorizontal(ctx, c, y, '#5b6570', 'footprint ' + formatBytes(mode.summary.footprint), [3, 3], true);
        }
      }
      if (mode.budget) {
        const y = this.yPx(mode.budget / KIB);
        if (y >= this.top && y <= this.bottom) {
          drawHorizontal(ctx, c, y, '#c0392b', 'budget ' + formatBytes(mode.budget), [6, 4]);
        }
      }
      drawByteAxis(ctx, c, this.top, this.bottom, this.y1 * KIB,
        (b) => this.yPx(b / KIB));
      drawSelection(ctx, axis, c, this.view.selected, this.top, this.bottom);
      drawStepAxis(ctx, axis, c, this.bottom, null);
      return level ? level.count : rects.count;
    }
    // Compaction: a line from where a block was to where it slid.
    drawMoves(ctx) {
      const mode = this.mode;
      if (!mode.moveCount) return;
      const c = this.canvas;
      const axis = this.view.axis;
      const lines = new Path2D();
      for (let m = 0; m < mode.moveCount; m++) {
        const x = axis.px(mode.xOfEvent(mode.moveEvent[m]), c);
        if (x < LEFT || x > c.width - RIGHT) continue;
        const b = mode.moveBlock[m];
        const before = m > mode.moveFirst[b] ? mode.moveOffset[m - 1] : mode.offset[b];
        const half = mode.size[b] / 2;
        const ya = this.yPx((before + half) / KIB);
        const yb = this.yPx((mode.moveOffset[m] + half) / KIB);
        lines.moveTo(x, ya);
        lines.lineTo(x, yb);
        lines.moveTo(x - 3, yb - 3);
        lines.lineTo(x, yb);
        lines.lineTo(x + 3, yb - 3);
      }
      ctx.strokeStyle = '#1d232a';
      ctx.lineWidth = 1.2;
      ctx.stroke(lines);
      ctx.lineWidth = 1;
    }
    // The block under the pointer (a few pixels of slack for thin ones).
    blockAt(px, py) {
      const mode = this.mode;
      const axis = this.view.axis;
      const x = axis.x(px, this.canvas);
      const y = this.kibAt(py);
      const {sx, sy} = this.scales();
      const tx = 3 / sx;
      const ty = 3 / sy;
      let best = -1;
      let bestScore = Infinity;
      for (let i = 0; i < mode.segCount; i++) {
        if (x < mode.segX0[i] - tx || x > mode.segX1[i] + tx) continue;
        if (y < mode.segY0[i] - ty || y > mode.segY1[i] + ty) continue;
        const dx = Math.max(0, mode.segX0[i] - x, x - mode.segX1[i]) * sx;
        const dy = Math.max(0, mode.segY0[i] - y, y - mode.segY1[i]) * sy;
        const score = (dx + dy) * 1e12 + (mode.segX1[i] - mode.segX0[i]) * (mode.segY1[i] - mode.segY0[i]);
        if (score < bestScore) {
          bestScore = score;
          best = i;
        }
      }
      return best < 0 ? -1 : mode.segBlock[best];
    }
    hover(px, py) {
      const b = this.blockAt(px, py);
      return b < 0 ? null : describeBlock(this.mode, b);
    }
    stepAt(px) { return Math.floor(this.view.axis.x(px, this.canvas)); }
  }

  function listSteps(mode, steps) {
    const shown = steps.filter((s) => s < mode.n).slice(0, 6).map((s) => mode.stepName(s));
    const more = steps.length - shown.length;
    return shown.join(', ') + (more > 0 ? ' and ' + more + ' more' : '');
  }

  const PLACED_TEXT = {
    resident: 'already on the device when the iteration began',
    write: 'written by',
    prefetch: 'prefetched from host memory at',
    rebuild: 'rebuilt by recomputation at',
    workspace: 'workspace of',
    staging: 'staging buffer of the streamed',
  };
  const EVICTED_TEXT = {
    kept: 'kept past the iteration',
    release: 'released after its last use at',
    offload: 'offloaded to host memory at',
    drop: 'dropped, to be rebuilt, at',
  };

  function describeBlock(mode, b) {
    const page = mode.page;
    const id = mode.tensor[b];
    const category = page.categories[mode.category[b]];
    const lines = [];
    lines.push('<b>' + escapeHtml(id < 0 ? 'workspace' : page.tensorName(id)) + '</b> ' +
      '<span class="muted">' + escapeHtml(category) + ', ' + formatBytes(mode.size[b]) + '</span>');
    lines.push('offset ' + formatBytes(mode.offset[b]) + ' to ' + formatBytes(mode.offset[b] + mode.size[b]));
    for (let m = mode.moveFirst[b]; m < mode.moveFirst[b + 1]; m++) {
      lines.push('moved to ' + formatBytes(mode.moveOffset[m]) + ' by compaction at ' +
        escapeHtml(mode.stepName(mode.stepOfEvent(mode.moveEvent[m]))));
    }
    const placed = page.data.placed_by[mode.placed[b]];
    const evicted = page.data.evicted_by[mode.evicted[b]];
    const at = mode.stepOfEvent(mode.begin[b]);
    lines.push('placed: ' + PLACED_TEXT[placed] + (placed === 'resident' ? '' : ' ' +
      escapeHtml(mode.stepName(at))) + ' <span class="muted">(' +
      (placed === 'resident' ? 'resident' : 'alloc') + ' event ' + (mode.begin[b] + 1) + ')</span>');
    if (mode.end[b] < 0) {
      lines.push('evicted: ' + EVICTED_TEXT.kept);
    } else {
      lines.push('evicted: ' + EVICTED_TEXT[evicted] + ' ' +
        escapeHtml(mode.stepName(mode.stepOfEvent(mode.end[b]))) +
        ' <span class="muted">(free event ' + (mode.end[b] + 1) + ')</span>');
    }
    if (id >= 0) {
      const writers = page.stepsOf(id, false);
      const readers = page.stepsOf(id, true);
      lines.push('produced by: ' + escapeHtml(writers.length ? listSteps(mode, writers) :
        'none in the iteration (' + page.data.kinds[page.tensorKind(id)] + ')'));
      lines.push('read by: ' + escapeHtml(readers.length ? listSteps(mode, readers) : 'no step'));
    }
    return lines.join('<br>');
  }

  // A timeline's compute, copy and host lanes on the step axis.
  class LanesView {
    constructor(modeView) {
      this.view = modeView;
      this.mode = modeView.mode;
      this.timeline = this.mode.timeline;
      this.lanes = this.timeline.laneNames.length;
      this.top = 4;
      this.canvas = new Canvas(this.top + this.lanes * (LANE_HEIGHT + 4) + 18);
      this.bottom = this.top + this.lanes * (LANE_HEIGHT + 4);
    }
    laneTop(lane) { return this.top + lane * (LANE_HEIGHT + 4); }
    draw() {
      const c = this.canvas;
      const ctx = c.ctx;
      const t = this.timeline;
      const axis = this.view.axis;
      c.clear();
      ctx.font = '11px system-ui, sans-serif';
      ctx.textAlign = 'right';
      ctx.textBaseline = 'middle';
      for (let lane = 0; lane < this.lanes; lane++) {
        ctx.fillStyle = '#f6f7f9';
        ctx.fillRect(LEFT, this.laneTop(lane), c.width - LEFT - RIGHT, LANE_HEIGHT);
        ctx.fillStyle = '#5b6570';
        ctx.fillText(t.laneNames[lane].replace(/ queue$/, ''), LEFT - 6, this.laneTop(lane) + LANE_HEIGHT / 2);
      }
      // Slices thinner than a pixel colour their pixel column (waits last).
      const width = Math.ceil(c.width);
      const pixels = [];
      for (let lane = 0; lane < this.lanes; lane++) pixels.push(new Array(width).fill(null));
      const right = c.width - RIGHT;
      for (let i = 0; i < t.count; i++) {
        const xa = axis.px(t.x0[i], c);
        const xb = axis.px(t.x1[i], c);
        if (xb < LEFT || xa > right) continue;
        const color = SLICE_COLORS[t.categories[t.category[i]]] || '#888';
        const lane = t.lane[i];
        if (xb - xa < 1) {
          const col = Math.floor(xa);
          if (col >= 0 && col < width && (!pixels[lane][col] || pixels[lane][col] === SLICE_COLORS.wait)) {
            pixels[lane][col] = color;
          }
          continue;
        }
        ctx.fillStyle = color;
        const a = Math.max(xa, LEFT);
        ctx.fillRect(a, this.laneTop(lane) + 2, Math.min(xb, right) - a, LANE_HEIGHT - 4);
      }
      for (let lane = 0; lane < this.lanes; lane++) {
        const row = pixels[lane];
        for (let col = 0; col < width;) {
          if (!row[col]) {
            col++;
            continue;
          }
          let end = col + 1;
          while (end < width && row[end] === row[col]) end++;
          ctx.fillStyle = row[col];
          ctx.fillRect(col, this.laneTop(lane) + 2, end - col, LANE_HEIGHT - 4);
          col = end;
        }
      }
      drawSelection(ctx, axis, c, this.view.selected, this.top, this.bottom);
      drawStepAxis(ctx, axis, c, this.bottom, null);
    }
    hover(px, py) {
      const t = this.timeline;
      const lane = Math.floor((py - this.top) / (LANE_HEIGHT + 4));
      if (lane < 0 || lane >= this.lanes) return null;
      const x = this.view.axis.x(px, this.canvas);
      const slack = 2 * (this.view.axis.x1 - this.view.axis.x0) / this.view.axis.plotWidth(this.canvas);
      let best = -1;
      for (let i = 0; i < t.count; i++) {
        if (t.lane[i] !== lane || x < t.x0[i] - slack || x > t.x1[i] + slack) continue;
        if (best < 0 || t.duration[i] > t.duration[best]) best = i;
      }
      if (best < 0) return null;
      const i = best;
      return '<b>' + escapeHtml(t.sliceName(i)) + '</b> <span class="muted">' +
        escapeHtml(t.categories[t.category[i]] + ', ' + t.laneNames[lane]) + '</span><br>' +
        'from ' + formatSeconds(t.start[i] / 1e9) + ' for ' + formatSeconds(t.duration[i] / 1e9) +
        (t.bytes[i] ? ', ' + formatBytes(t.bytes[i]) : '') + '<br>' +
        escapeHtml(this.mode.stepName(t.step[i]));
    }
    stepAt(px) { return Math.floor(this.view.axis.x(px, this.canvas)); }
  }

  // Every mode's bytes in use on one chart.
  class OverlayView {
    constructor(app, modes) {
      this.app = app;
      this.modes = modes;
      this.n = modes[0].n;
      this.axis = new XAxis(this.n);
      this.canvas = new Canvas(CURVE_HEIGHT + 60);
      this.top = 10;
      this.bottom = this.canvas.height - 18;
      this.selected = -1;
      let max = 0;
      for (const m of modes) max = Math.max(max, m.curvePeak);
      const budget = modes[0].budget;
      if (budget && budget <= 2 * max) max = Math.max(max, budget);
      this.max = Math.max(max * 1.06, 1);
    }
    yPx(bytes) { return this.bottom - bytes / this.max * (this.bottom - this.top); }
    draw() {
      const c = this.canvas;
      const ctx = c.ctx;
      c.clear();
      drawByteAxis(ctx, c, this.top, this.bottom, this.max, (b) => this.yPx(b));
      this.modes.forEach((mode, k) => {
        const steps = columnSteps(this.axis, c, mode.n, mode.peak);
        ctx.strokeStyle = MODE_COLORS[mode.index % MODE_COLORS.length];
        ctx.lineWidth = 1.5;
        ctx.beginPath();
        steps.forEach((s, j) => {
          const x = Math.max(LEFT, this.axis.px(s + 0.5, c));
          const y = this.yPx(mode.peak[s]);
          if (j === 0) ctx.moveTo(x, y);
          else ctx.lineTo(x, y);
        });
        ctx.stroke();
        ctx.lineWidth = 1;
        ctx.fillStyle = ctx.strokeStyle;
        ctx.font = '11px system-ui, sans-serif';
        ctx.textAlign = 'left';
        ctx.textBaseline = 'top';
        ctx.fillText(mode.name, LEFT + 8 + (k % 5) * 130, this.top + Math.floor(k / 5) * 14);
      });
      const budget = this.modes[0].budget;
      if (budget && this.yPx(budget) >= this.top) {
        drawHorizontal(ctx, c, this.yPx(budget), '#c0392b', 'budget ' + formatBytes(budget), [6, 4]);
      }
      drawSelection(ctx, this.axis, c, this.selected, this.top, this.bottom);
      drawStepAxis(ctx, this.axis, c, this.bottom, this.modes[0]);
    }
    hover(px) {
      const s = Math.floor(this.axis.x(px, this.canvas));
      if (s < 0 || s >= this.n) return null;
      return '<b>' + escapeHtml(this.modes[0].stepName(s)) + '</b><br>' + this.modes.map((m) =>
        escapeHtml(m.name) + ': peak ' + formatBytes(m.peak[s]) + ', in use ' + formatBytes(m.total[s]))
        .join('<br>');
    }
    stepAt(px) { return Math.floor(this.axis.x(px, this.canvas)); }
    requestDraw() { this.app.requestDraw(this); }
    drawAll() { this.draw(); }
  }

  // The details of the selected step: in use, moves, algorithms, live tensors.
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

  main();
})();
