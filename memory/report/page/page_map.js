// The memory page's script, part 3 of 4: the address space - every block
// over the steps it lived and the offsets it held, merged per zoom level
// where blocks are smaller than a pixel - and what hovering a block says.
// (Joined with the other parts by the genrule in BUILD.)

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
    '<span class="muted">' + escapeHtml(category) + ', ' + formatBytes(mode.size[b]) +
    (id < 0 ? '' : ', ' + escapeHtml(page.tensorDtype(id))) + '</span>');
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
