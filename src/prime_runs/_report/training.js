// A training run's sections: each log_metrics metric by step (several runs overlaid), the
// episodes and their mean reward by dispatch step, and what the sample table's Parquet
// objects hold per step. `report.runs[i].training` is built by _training.py.

// Every line chart of the page: the smoothing control redraws them all.
const LINE_CHARTS = [];

const SPEC_FIELDS = ["max_steps", "batch_size", "rollouts_per_example", "seq_len", "wandb_project", "wandb_entity", "wandb_run_name"];

function trainingOf(report) {
  return report.runs.map((run, index) => ({run: run, index: index, t: run.training})).filter((r) => r.t);
}

function specText(spec) {
  return SPEC_FIELDS.filter((k) => spec[k] !== null && spec[k] !== undefined)
    .map((k) => k + "=" + (k === "max_steps" && spec[k] === 0 ? "unknown" : spec[k]))
    .join(" · ") || "–";
}

// A number with 4 significant digits, for a chart's last, min and max.
function fmtSig(value) {
  if (!isNumber(value)) return "–";
  const abs = Math.abs(value);
  if (abs !== 0 && (abs < 1e-3 || abs >= 1e6)) return value.toExponential(2);
  return String(Number(value.toPrecision(4)));
}

// The run card's facts for a training run (after the common ones).
function trainingFacts(run) {
  const t = run.training;
  if (!t) return [];
  const steps = quantity(t.steps, "step") + ", " + quantity(t.rows, "metrics row") + (t.unstepped ? " (" + fmtInt(t.unstepped) + " without a step, not charted)" : "");
  const by = t.by_step;
  return [["training", specText(t.spec)], ["metrics", steps], ["episodes", by.steps ? fmtInt(by.episodes) + " at " + quantity(by.steps, "dispatch step") : null]];
}

function metricLines(entries, name) {
  return entries.filter((e) => e.t.metrics[name]).map((e) => Object.assign({run: e.index}, e.t.metrics[name]));
}

function metricNote(entries, name) {
  return entries.filter((e) => e.t.metrics[name]).map((e) => {
    const m = e.t.metrics[name];
    return h("div", null, entries.length > 1 ? [swatch(e.index), " "] : null,
      "last " + fmtSig(m.last) + " (step " + fmtInt(m.last_step) + ") · min " + fmtSig(m.min) + " · max " + fmtSig(m.max));
  });
}

function smoothingControl(onChange) {
  const box = h("input", {type: "checkbox", class: "smooth-toggle"});
  const slider = h("input", {type: "range", min: 0, max: 0.99, step: 0.01, value: 0.6, class: "smooth-weight", "aria-label": "smoothing weight"});
  const shown = h("span", {class: "muted"}, "0.60");
  const update = () => {
    shown.textContent = Number(slider.value).toFixed(2);
    onChange(box.checked ? Number(slider.value) : 0);
  };
  box.addEventListener("change", update);
  slider.addEventListener("input", () => { if (!box.checked) box.checked = true; update(); });
  return h("div", {class: "filters"}, h("label", {class: "check"}, box, " smooth (exponential moving average, weight ", slider, " ", shown, ")"));
}

function metricsSection(report, names) {
  const entries = trainingOf(report);
  const metricNames = [...new Set(entries.flatMap((e) => Object.keys(e.t.metrics)))];
  if (!metricNames.length) {
    return section("metrics", "Metrics by step", note("No log_metrics rows with a step were recorded."));
  }
  const charts = metricNames.map((name) => lineChart(metricLines(entries, name), {title: name, xLabel: "step", names: names, note: metricNote(entries, name)}));
  LINE_CHARTS.push(...charts);
  const bucketed = entries.some((e) => Object.values(e.t.metrics).some((m) => m.lo));
  const parts = [
    note("One chart per metric logged with run.log_metrics(), by step; a step logged twice shows its last value." + (bucketed ? " Long series are drawn in 1,000 buckets of consecutive steps: the line is each bucket's mean, the band its min to max." : "") + " Point at a chart to read the values; tick log for a log scale."),
    smoothingControl((weight) => LINE_CHARTS.forEach((c) => c.draw({smooth: weight}))),
    legend(entries.length > 1 ? entries.map((e) => runLabel(e.run, 40)) : []),
    h("div", {class: "charts line-charts"}, charts.map((c) => c.element)),
  ];
  return section("metrics", "Metrics by step", parts);
}

function stepLines(entries, key, options) {
  return entries.filter((e) => e.t.by_step[key].x.length).map((e) => Object.assign({run: e.index, label: options.label, dashed: options.dashed}, e.t.by_step[key]));
}

function stepsSection(report, names, browser) {
  const entries = trainingOf(report).filter((e) => e.t.by_step.steps);
  if (!entries.length) {
    return section("steps", "Episodes by step", note("No episode carries a training step (run.work = {\"type\": \"train\", \"step\": ...})."));
  }
  const pick = (step) => browser.showStep(step);
  const reward = lineChart(stepLines(entries, "reward", {}), {title: "Mean episode reward by dispatch step", xLabel: "dispatch step (run.work.step)", names: names, onPick: pick});
  const counts = [...stepLines(entries, "count", {label: "all"}), ...stepLines(entries, "off", {label: "off-policy", dashed: true})];
  const episodes = lineChart(counts, {title: "Episodes by dispatch step", xLabel: "dispatch step — solid: all, dashed: off-policy", names: names, onPick: pick, zero: true});
  LINE_CHARTS.push(reward, episodes);
  const totals = entries.map((e) => {
    const by = e.t.by_step;
    const other = by.episodes - by.on_policy - by.off_policy;
    const split = ": " + fmtInt(by.on_policy) + " on-policy, " + fmtInt(by.off_policy) + " off-policy" + (other ? ", " + fmtInt(other) + " other (policy not recorded, or eval work)" : "");
    return h("li", null, entries.length > 1 ? [swatch(e.index), " ", runLabel(e.run), ": "] : null, quantity(by.episodes, "episode") + " at " + quantity(by.steps, "step") + split);
  });
  return section("steps", "Episodes by step",
    note("Each episode counts at the step it was dispatched at (run.work.step). Off-policy: generated from a policy older than that step (run.work.policy.start < step). Click a chart to list that step's episodes in the browser below."),
    h("ul", {class: "plain"}, totals),
    h("div", {class: "charts line-charts"}, reward.element, episodes.element));
}

function tableColumns() {
  return [
    {key: "step", label: "Step", numeric: true, format: fmtInt},
    {key: "episodes", label: "Episodes", numeric: true, format: fmtInt, title: "Training episodes dispatched at this step"},
    {key: "rows", label: "With a conversation", numeric: true, format: fmtInt, title: "Episodes whose summary trace holds messages: each gets a row"},
    {key: "stored", label: "Stored", numeric: true, format: fmtInt, title: "Rows the platform acknowledged (presign, PUT, confirm)"},
    {key: "pending", label: "Pending", numeric: true, format: (v) => v ? badge(fmtInt(v), "info") : "0", title: "Rows prime-runs sync will send"},
    {key: "none", label: "No row", numeric: true, format: fmtInt, title: "Settled without a row: no conversation, or refused"},
  ];
}

function samplesSection(report, browser) {
  const entries = trainingOf(report);
  const blocks = entries.map((e) => {
    const rows = e.t.table.map(([step, episodes, rows_, stored, pending, none]) => ({step: step, episodes: episodes, rows: rows_, stored: stored, pending: pending, none: none}));
    const sum = (k) => rows.reduce((n, r) => n + r[k], 0);
    const table = sortableTable(tableColumns(), {empty: "No episode at a step on the cadence.", onRowClick: (row) => browser.showStep(row.step)});
    table.setRows(rows);
    return h("div", null,
      entries.length > 1 ? h("h3", null, swatch(e.index), " ", runLabel(e.run)) : null,
      note(quantity(rows.length, "step") + ": " + quantity(sum("stored"), "row") + " stored, " + fmtInt(sum("pending")) + " pending, " + quantity(sum("none"), "episode") + " without a row."),
      table.element);
  });
  const interval = entries.length ? entries[0].t.interval : 10;
  return section("samples", "Sample table",
    note("Every " + interval + "th dispatch step, each batch of that step's episodes becomes one Parquet object of the training sample table (presign, PUT, confirm): one row per episode with a conversation. Episodes of other steps, and episodes that never produced a message, have no row. Click a step to list its episodes."),
    h("div", {class: "side-by-side"}, blocks));
}

function trainingSections(report, names, browser) {
  if (!trainingOf(report).length) return [];
  return [metricsSection(report, names), stepsSection(report, names, browser), samplesSection(report, browser)];
}
