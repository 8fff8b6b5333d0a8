// The memory page's script, part 1 of 4: constants, helpers, and the
// decoding of the embedded data (#spill-data, columns as page_encoding.h
// describes them) into a page (layers, tensors, steps) and its modes
// (step records, blocks, moves, actions, timeline). The genrule in BUILD
// joins the parts, in the order page_model, page_views, page_map,
// memory_page, into one strict-mode function; memory_page.js says what the
// page does.

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
    this.templateDtype = decodeColumn(t.dtype, k);
    this.transient = new Set(data.transient_kinds);
    this.readersOf = null;  // decoded on first use (hovering a block)
  }
  tensorName(id) {
    const tp = this.tensorTemplate[id];
    return this.templateWhole[tp] ? this.suffix[tp] : this.layers[this.tensorLayer[id]] + this.suffix[tp];
  }
  tensorBytes(id) { return this.templateBytes[this.tensorTemplate[id]]; }
  tensorKind(id) { return this.templateKind[this.tensorTemplate[id]]; }
  // The storage type's name: fp32, bf16, fp16.
  tensorDtype(id) { return this.data.dtypes[this.templateDtype[this.tensorTemplate[id]]]; }
  tensorCategory(id) { return this.data.kind_category[this.tensorKind(id)]; }
  isTransient(id) { return this.transient.has(this.tensorKind(id)); }
  blockBytes(id) { return Math.ceil(Math.max(this.tensorBytes(id), 1) / KIB) * KIB; }
  // Steps that read (`reads`) or write a tensor, from the per-step lists.
  stepsOf(id, reads) {
    if (!this.readersOf) {
      const s = this.data.steps;
      const readStart = prefixSums(decodeColumn(s.reads, s.count));
      const writeStart = prefixSums(decodeColumn(s.writes, s.count));
      this.readersOf = this.invert(readStart, decodeColumn(s.read, readStart[s.count]));
      this.writersOf = this.invert(writeStart, decodeColumn(s.written, writeStart[s.count]));
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
