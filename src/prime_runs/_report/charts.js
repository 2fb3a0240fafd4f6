// Charts drawn as inline SVG: histograms (one colour per run, bars side by side within a
// bin so several runs overlay on the same bins) and grouped horizontal bars.

const CHART = {width: 460, height: 200, left: 44, right: 12, top: 12, bottom: 34};

// runNames: as the page names the runs (runLabel), already cut to fit.
function legend(runNames) {
  if (runNames.length < 2) return null;
  return h(
    "div",
    {class: "legend"},
    runNames.map((name, i) =>
      h("span", {class: "legend-item"}, swatch(i), name)
    )
  );
}

function swatch(index) {
  const box = s("svg", {width: 12, height: 12, class: "swatch", "aria-hidden": "true"});
  box.appendChild(s("rect", {width: 12, height: 12, rx: 2, fill: runColor(index)}));
  return box;
}

function binLabels(hist, format) {
  if (hist.labels.length) return hist.labels.map((v) => format(v));
  const labels = [];
  for (let i = 0; i + 1 < hist.edges.length; i++) {
    labels.push(format(hist.edges[i]) + " – " + format(hist.edges[i + 1]));
  }
  return labels;
}

// Four gridlines at round counts; returns the count at the top of the plot.
function yAxis(svg, maxCount, plotHeight) {
  const ticks = 4;
  const step = Math.max(1, Math.ceil(maxCount / ticks));
  const top = step * ticks;
  for (let t = 0; t <= ticks; t++) {
    const y = CHART.top + plotHeight - (plotHeight * t) / ticks;
    svg.appendChild(
      s("line", {x1: CHART.left, x2: CHART.width - CHART.right, y1: y, y2: y, class: "grid"})
    );
    svg.appendChild(
      s("text", {x: CHART.left - 6, y: y + 4, class: "tick", "text-anchor": "end"}, fmtInt(step * t))
    );
  }
  return top;
}

function xTicks(svg, labels, hist, format, binWidth, plotHeight) {
  const baseline = CHART.top + plotHeight;
  if (hist.labels.length) {
    const step = Math.max(1, Math.ceil(labels.length / 8));
    labels.forEach((label, i) => {
      if (i % step) return;
      const x = CHART.left + binWidth * (i + 0.5);
      svg.appendChild(s("text", {x: x, y: baseline + 14, class: "tick", "text-anchor": "middle"}, label));
    });
    return;
  }
  const count = hist.edges.length - 1;
  for (const i of new Set([0, Math.round(count / 2), count])) {
    const x = CHART.left + binWidth * i;
    const anchor = i === 0 ? "start" : i === count ? "end" : "middle";
    svg.appendChild(
      s("text", {x: x, y: baseline + 14, class: "tick", "text-anchor": anchor}, format(hist.edges[i]))
    );
  }
}

// hist: {labels: [...] | edges: [...], counts: [[per bin] per run]}
function histogramChart(hist, runNames, options) {
  const format = options.format || ((v) => fmtNum(v));
  const labels = binLabels(hist, format);
  if (!labels.length) return note("No values to plot.");
  const plotWidth = CHART.width - CHART.left - CHART.right;
  const plotHeight = CHART.height - CHART.top - CHART.bottom;
  const binWidth = plotWidth / labels.length;
  const counted = Math.max(1, ...hist.counts.map((row) => Math.max(0, ...row)));
  const svg = s("svg", {
    viewBox: "0 0 " + CHART.width + " " + CHART.height,
    class: "chart",
    role: "img",
    "aria-label": options.title,
  });
  const maxCount = yAxis(svg, counted, plotHeight);
  const barWidth = Math.max(1, (binWidth - 2) / hist.counts.length);
  hist.counts.forEach((row, run) => {
    row.forEach((count, bin) => {
      if (!count) return;
      const height = (plotHeight * count) / maxCount;
      const bar = s("rect", {
        x: CHART.left + binWidth * bin + 1 + barWidth * run,
        y: CHART.top + plotHeight - height,
        width: barWidth,
        height: height,
        fill: runColor(run),
        class: "bar",
      });
      bar.appendChild(s("title", null, runNames[run] + ": " + labels[bin] + " → " + fmtInt(count)));
      svg.appendChild(bar);
    });
  });
  xTicks(svg, labels, hist, format, binWidth, plotHeight);
  svg.appendChild(
    s("text", {x: CHART.left + plotWidth / 2, y: CHART.height - 4, class: "axis-label", "text-anchor": "middle"}, options.xLabel)
  );
  return h("figure", {class: "chart-box"}, h("figcaption", null, options.title), svg, legend(runNames));
}

// rows: [{label, values: [per run, null when absent]}], values within [0, max]
function barChart(rows, runNames, options) {
  if (!rows.length) return note("No values to plot.");
  const rowHeight = 10 + 12 * runNames.length;
  const left = 120;
  const width = CHART.width;
  const height = CHART.top + rows.length * rowHeight + 8;
  const max = Math.max(options.max || 0, ...rows.flatMap((r) => r.values.filter(isNumber)), 1e-9);
  const plotWidth = width - left - 60;
  const svg = s("svg", {viewBox: "0 0 " + width + " " + height, class: "chart", role: "img", "aria-label": options.title});
  rows.forEach((row, i) => {
    const y0 = CHART.top + i * rowHeight;
    svg.appendChild(s("text", {x: left - 8, y: y0 + rowHeight / 2 + 2, class: "tick", "text-anchor": "end"}, shorten(row.label, 20)));
    row.values.forEach((value, run) => {
      if (!isNumber(value)) return;
      const y = y0 + 4 + run * 12;
      const bar = s("rect", {x: left, y: y, width: Math.max(1, (plotWidth * value) / max), height: 10, fill: runColor(run), class: "bar"});
      bar.appendChild(s("title", null, runNames[run] + ": " + row.label + " = " + fmtNum(value)));
      svg.appendChild(bar);
      svg.appendChild(s("text", {x: left + (plotWidth * value) / max + 4, y: y + 9, class: "tick"}, fmtNum(value)));
    });
  });
  return h("figure", {class: "chart-box"}, h("figcaption", null, options.title), svg, legend(runNames));
}
