// The memory page's script, part 2 of 4: drawing on canvases - the shared
// step axis, the memory curve, the timeline lanes and the overlay of every
// mode. (Joined with the other parts by the genrule in BUILD.)

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
