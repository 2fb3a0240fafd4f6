// Line charts by step as inline SVG: one line per run (several runs overlay on shared
// axes), an optional band from min to max where steps were put in buckets, a linear or log
// y axis, exponential smoothing, and a readout of every line's value at the step under the
// pointer. Clicking a chart can pick that step (options.onPick).

const LINE = {width: 460, height: 210, left: 54, right: 14, top: 14, bottom: 30};

function niceStep(span, count) {
  const raw = span / Math.max(1, count);
  const power = Math.pow(10, Math.floor(Math.log10(raw)));
  const unit = [1, 2, 2.5, 5, 10].find((m) => m * power >= raw) || 10;
  return unit * power;
}

function linearTicks(lo, hi, count) {
  if (hi <= lo) return [lo];
  const step = niceStep(hi - lo, count);
  const ticks = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push(Math.abs(t) < step * 1e-9 ? 0 : t);
  return ticks;
}

function logTicks(lo, hi) {
  const ticks = [];
  for (let p = Math.floor(Math.log10(lo)); p <= Math.ceil(Math.log10(hi)); p++) {
    const t = Math.pow(10, p);
    if (t >= lo * 0.999 && t <= hi * 1.001) ticks.push(t);
  }
  return ticks.length >= 2 ? ticks : [lo, hi];
}

function fmtAxis(value) {
  if (value === 0) return "0";
  const abs = Math.abs(value);
  if (abs >= 1e5 || abs < 1e-3) return value.toExponential(0).replace("e+", "e");
  if (Number.isInteger(value)) return value.toLocaleString("en-US");
  return String(Number(value.toPrecision(3)));
}

// TensorBoard's debiased exponential moving average: weight 0 is the raw series.
function smoothed(values, weight) {
  if (!weight) return values;
  let last = 0;
  let count = 0;
  return values.map((v) => {
    last = last * weight + (1 - weight) * v;
    count += 1;
    return last / (1 - Math.pow(weight, count));
  });
}

// Whether a log axis can draw every value, and whether it helps (values over 3 decades).
function logFits(lines) {
  const values = lines.flatMap((l) => (l.lo || l.y));
  const high = Math.max(...lines.flatMap((l) => (l.hi || l.y)));
  return values.length > 0 && values.every((v) => v > 0) && high > 0 ? {ok: true, helps: high / Math.min(...values) >= 1000} : {ok: false, helps: false};
}

function extent(lines, key) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const line of lines) {
    for (const v of line[key] || []) { if (v < lo) lo = v; if (v > hi) hi = v; }
  }
  return [lo, hi];
}

function yScale(lines, log, plotHeight, zero) {
  let lo = Math.min(...lines.map((l) => Math.min(...(l.lo || l.y))));
  if (zero && !log) lo = Math.min(lo, 0);
  let hi = Math.max(...lines.map((l) => Math.max(...(l.hi || l.y))));
  if (log) {
    const a = Math.log10(lo);
    const b = Math.log10(hi) === a ? a + 1 : Math.log10(hi);
    return {ticks: logTicks(lo, hi), at: (v) => LINE.top + plotHeight * (1 - (Math.log10(v) - a) / (b - a))};
  }
  if (hi === lo) { lo -= Math.abs(lo) * 0.1 || 1; hi += Math.abs(hi) * 0.1 || 1; }
  const pad = (hi - lo) * 0.05;
  lo = lo >= 0 && lo - pad < 0 ? 0 : lo - pad;  // a positive series keeps 0 as its floor
  hi += pad;
  return {ticks: linearTicks(lo, hi, 4), at: (v) => LINE.top + plotHeight * (1 - (v - lo) / (hi - lo))};
}

function pathOf(xs, ys, x, y) {
  const parts = [];
  for (let i = 0; i < xs.length; i++) parts.push((i ? "L" : "M") + x(xs[i]).toFixed(1) + " " + y(ys[i]).toFixed(1));
  return parts.join("");
}

function bandOf(line, x, y) {
  const top = line.x.map((v, i) => x(v).toFixed(1) + " " + y(line.hi[i]).toFixed(1));
  const bottom = line.x.map((v, i) => x(v).toFixed(1) + " " + y(line.lo[i]).toFixed(1)).reverse();
  return "M" + top.join("L") + "L" + bottom.join("L") + "Z";
}

function axes(svg, xs, ys, ticksX, plotWidth, plotHeight, xLabel) {
  for (const t of ys.ticks) {
    const y = ys.at(t);
    svg.appendChild(s("line", {x1: LINE.left, x2: LINE.left + plotWidth, y1: y, y2: y, class: "grid"}));
    svg.appendChild(s("text", {x: LINE.left - 6, y: y + 3, class: "tick", "text-anchor": "end"}, fmtAxis(t)));
  }
  const base = LINE.top + plotHeight;
  svg.appendChild(s("line", {x1: LINE.left, x2: LINE.left + plotWidth, y1: base, y2: base, class: "axis"}));
  for (const t of ticksX) {
    svg.appendChild(s("text", {x: xs(t), y: base + 13, class: "tick", "text-anchor": "middle"}, fmtAxis(t)));
  }
  svg.appendChild(s("text", {x: LINE.left + plotWidth / 2, y: LINE.height - 3, class: "axis-label", "text-anchor": "middle"}, xLabel));
}

// The index in sorted `xs` nearest to `value`.
function nearest(xs, value) {
  let lo = 0;
  let hi = xs.length - 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (xs[mid] < value) lo = mid; else hi = mid;
  }
  return Math.abs(xs[hi] - value) < Math.abs(xs[lo] - value) ? hi : lo;
}

function readout(svg, tip, lines, xs, ys, state, plotWidth, plotHeight, options) {
  const cursor = s("line", {y1: LINE.top, y2: LINE.top + plotHeight, class: "cursor", visibility: "hidden"});
  const dots = lines.map((line) => s("circle", {r: 3, fill: runColor(line.run), visibility: "hidden"}));
  svg.appendChild(cursor);
  dots.forEach((dot) => svg.appendChild(dot));
  const stepAt = (event) => {
    const box = svg.getBoundingClientRect();
    const px = ((event.clientX - box.left) / box.width) * LINE.width;
    return state.x0 + ((px - LINE.left) / plotWidth) * (state.x1 - state.x0);
  };
  svg.addEventListener("mousemove", (event) => {
    const step = stepAt(event);
    const rows = [];
    lines.forEach((line, i) => {
      if (!line.x.length) return;
      const at = nearest(line.x, step);
      const value = state.shown[i][at];
      setAttributes(dots[i], {cx: xs(line.x[at]), cy: ys.at(value), visibility: "visible"});
      rows.push(h("div", null, lines.length > 1 || options.names.length > 1 ? swatch(line.run) : null, " ", (line.label ? line.label + " " : "") + "step " + fmtInt(line.x[at]) + ": " + fmtNum(value) + (line.lo ? " (" + fmtNum(line.lo[at]) + " to " + fmtNum(line.hi[at]) + ")" : "")));
    });
    setAttributes(cursor, {x1: xs(step), x2: xs(step), visibility: "visible"});
    tip.replaceChildren(...rows);
    tip.hidden = false;
  });
  svg.addEventListener("mouseleave", () => {
    cursor.setAttribute("visibility", "hidden");
    dots.forEach((dot) => dot.setAttribute("visibility", "hidden"));
    tip.hidden = true;
  });
  if (options.onPick) svg.addEventListener("click", (event) => options.onPick(Math.round(stepAt(event))));
}

// lines: [{run, x: [...], y: [...], lo?, hi?, label?, dashed?}] (x increasing);
// options: {title, xLabel, names, onPick?, note? (nodes), zero? (the y axis starts at 0)}; view: {smooth, log: {title: bool}}.
// Returns {element, draw(view)}.
function lineChart(lines, options) {
  const box = h("div", {class: "line-svg"});
  const tip = h("div", {class: "tip", hidden: true});
  const fits = logFits(lines);
  const logBox = fits.ok ? h("input", {type: "checkbox", class: "log-toggle"}) : null;
  if (logBox) logBox.checked = fits.helps;
  const head = h("figcaption", null, options.title, logBox ? h("label", {class: "check log"}, logBox, " log") : null);
  const element = h("figure", {class: "chart-box line-box", "data-metric": options.title}, head, options.note ? h("div", {class: "muted small"}, options.note) : null, box, tip);
  let smooth = 0;
  function draw(view) {
    smooth = view && view.smooth !== undefined ? view.smooth : smooth;
    const plotWidth = LINE.width - LINE.left - LINE.right;
    const plotHeight = LINE.height - LINE.top - LINE.bottom;
    const [x0, x1raw] = extent(lines, "x");
    const x1 = x1raw === x0 ? x0 + 1 : x1raw;
    const xs = (v) => LINE.left + ((v - x0) / (x1 - x0)) * plotWidth;
    const shown = lines.map((line) => smoothed(line.y, smooth));
    const ys = yScale(lines, logBox ? logBox.checked : false, plotHeight, options.zero);
    const svg = s("svg", {viewBox: "0 0 " + LINE.width + " " + LINE.height, class: "chart line", role: "img", "aria-label": options.title});
    axes(svg, xs, ys, linearTicks(x0, x1, 5).filter((t) => t >= x0 && t <= x1), plotWidth, plotHeight, options.xLabel);
    lines.forEach((line, i) => {
      const color = runColor(line.run);
      if (line.lo) svg.appendChild(s("path", {d: bandOf(line, xs, ys.at), fill: color, class: "band"}));
      if (smooth) svg.appendChild(s("path", {d: pathOf(line.x, line.y, xs, ys.at), stroke: color, class: "raw"}));
      svg.appendChild(s("path", {d: pathOf(line.x, shown[i], xs, ys.at), stroke: color, class: "series" + (line.dashed ? " dashed" : "")}));
      if (line.x.length === 1) svg.appendChild(s("circle", {cx: xs(line.x[0]), cy: ys.at(shown[i][0]), r: 3, fill: color}));
    });
    readout(svg, tip, lines, xs, ys, {x0: x0, x1: x1, shown: shown}, plotWidth, plotHeight, options);
    box.replaceChildren(svg);
  }
  if (logBox) logBox.addEventListener("change", () => draw());
  draw({smooth: 0});
  return {element: element, draw: draw};
}
