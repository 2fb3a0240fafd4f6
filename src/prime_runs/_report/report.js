// The report page: reads the embedded JSON (see _build.py for its shape) and builds every
// section. Runs in a page whose Content-Security-Policy forbids any network access.

function episodeRows(run) {
  const fields = run.episodes.fields;
  return run.episodes.rows.map((values, position) => {
    const row = {position: position};
    fields.forEach((name, i) => { row[name] = values[i]; });
    return row;
  });
}

function statusKind(status) {
  if (status === "completed") return "ok";
  if (status === "running") return "info";
  return "bad";
}

function summaryText(summary) {
  if (!summary) return null;
  const parts = [];
  for (const [key, value] of Object.entries(summary)) {
    if (value && typeof value === "object") {
      const inner = Object.entries(value).map(([k, v]) => k + " " + fmtNum(v)).join(", ");
      parts.push(key + ": " + (inner || "–"));
    } else {
      parts.push(key + " " + (key === "avg_error" ? fmtPct(value) : fmtNum(value)));
    }
  }
  return parts.join(" · ");
}

function syncText(run) {
  if (run.platform) {
    const where = "synced: platform id " + run.platform.id + (run.platform.url ? " (" + run.platform.url + ")" : "");
    return run.pending === "-" ? where : where + "; still pending: " + run.pending;
  }
  return run.mode === "online" ? "online, pending: " + run.pending : "not synced (run `prime-runs sync` to upload)";
}

function runCard(run, index, multiple) {
  const c = run.counts;
  const lost = [];
  if (c.torn_lines) lost.push(quantity(c.torn_lines, "torn last line") + " skipped");
  if (c.bad_lines) lost.push(quantity(c.bad_lines, "unreadable line") + " skipped");
  if (c.links) lost.push(quantity(c.links, "symbolic link") + " in the run folder not read");
  const passing = run.passing;
  return h(
    "div",
    {class: "run-card"},
    h("h3", null, multiple ? swatch(index) : null, " ", runLabel(run), " ", badge(run.status, statusKind(run.status))),
    facts([
      ["run id", run.id],
      ["model", run.model],
      ["environments", run.environments.join(", ") || "–"],
      ["framework", run.framework],
      ["kind", run.kind === "train" ? "training" : "evaluation"],
      ["mode", run.mode],
      ["platform", syncText(run)],
      ["created", fmtTime(run.created_at)],
      ["finished", run.finished_at ? fmtTime(run.finished_at) : "–"],
      ["error", run.error],
      ["records", fmtInt(c.records) + " (" + quantity(c.traces, "trace") + ")"],
      ...trainingFacts(run),
      ["failed", fmtInt(c.failed) + " of " + fmtInt(c.records) + (c.records ? " (" + fmtPct(c.failed / c.records) + ")" : "")],
      ["truncated", c.truncated ? fmtInt(c.truncated) : null],
      ["unscored", c.unscored ? fmtInt(c.unscored) : null],
      ["skipped lines", lost.length ? lost.join(", ") : null],
      ["mean reward", run.reward && isNumber(run.reward.mean) ? withError(run.reward.mean, run.reward.se) + " (± standard error, over " + quantity(run.reward.n, "scored episode") + ")" : null],
      ["summary", run.summary ? summaryText(run.summary) : summaryText(run.computed_summary) + " (computed from the records: the run recorded none)"],
      ["pass@1", passing ? fmtPct(passing.pass1) + " (" + passing.label + " = 1, over " + quantity(passing.examples, "example") + ")" : null],
      // A training run's examples recur at every step: pass@k over them says nothing.
      ["pass@" + (passing ? passing.k : "k"), passing && isNumber(passing.passk) && !run.training ? fmtPct(passing.passk) + " (over the " + quantity(passing.examples_k, "example") + " with " + passing.k + "+ rollouts)" : null],
      ["tokens", fmtInt(run.tokens.total) + " (" + fmtInt(run.tokens.in) + " in, " + fmtInt(run.tokens.out) + " out)"],
      ["config", configNode(run.config)],
      ["tags", run.tags.join(", ")],
      ["description", run.description],
    ])
  );
}

function configNode(config) {
  if (!config || (!config.values.length && !config.file)) return null;
  const parts = [];
  if (config.file) {
    const f = config.file;
    const size = isNumber(f.bytes) ? ", " + fmtInt(f.bytes) + " bytes" : "";
    const more = f.more_lines ? ["\n… " + fmtInt(f.more_lines) + " more lines (the whole file is in run.json)"] : [];
    parts.push(h("details", {class: "config-file"},
      h("summary", null, "launch file " + f.name + " (" + f.format + size + ")"),
      h("pre", null, f.lines.join("\n"), ...more)));
  }
  if (config.values.length) {
    parts.push(h("ul", {class: "config-values"}, config.values.map(([key, value]) => h("li", null, h("code", null, key + " = " + value)))));
  }
  if (config.more_keys) parts.push(h("span", {class: "muted"}, "… " + fmtInt(config.more_keys) + " more keys (all of them are in run.json)"));
  return h("div", {class: "config"}, parts);
}

function overviewSection(report, names) {
  const functions = {};
  report.runs.forEach((run, r) => run.functions.forEach((f) => {
    functions[f.name] = functions[f.name] || {weight: f.weight, values: report.runs.map(() => null), scored: report.runs.map(() => null)};
    functions[f.name].values[r] = f.mean;
    functions[f.name].errors = functions[f.name].errors || report.runs.map(() => null);
    functions[f.name].errors[r] = f.se;
    functions[f.name].scored[r] = f.scored;
  }));
  const rows = Object.entries(functions).map(([name, f]) => ({label: name + (isNumber(f.weight) ? " ×" + fmtNum(f.weight, 2) : ""), values: f.values}));
  const metricNames = [...new Set(report.runs.flatMap((run) => Object.keys(run.metrics)))];
  const table = h(
    "table",
    {class: "data compact"},
    h("thead", null, h("tr", null, h("th", null, "reward function / metric (mean ± SE)"), report.runs.map((run) => h("th", {class: "num"}, runLabel(run, 24))))),
    h("tbody", null,
      Object.entries(functions).map(([name, f]) => h("tr", null, h("td", null, name, h("span", {class: "muted"}, " weight " + fmtNum(f.weight, 2))), f.values.map((v, r) => h("td", {class: "num"}, withError(v, f.errors[r]) + " ", h("span", {class: "muted"}, "n=" + fmtInt(f.scored[r])))))),
      metricNames.map((name) => h("tr", null, h("td", null, name, h("span", {class: "muted"}, " metric")), report.runs.map((run) => h("td", {class: "num"}, withError(run.metrics[name], (run.metrics_se || {})[name])))))
    )
  );
  return section(
    "overview",
    "Rewards",
    note("Per episode, the reward of its summary trace (the first trainable trace): the sum of score × weight over its reward functions. Function and metric means are raw values over those summary traces; the run summary above averages every trainable trace, so best-of-n runs can differ."),
    h("div", {class: "charts"},
      histogramChart(report.charts.reward, names, {title: "Reward distribution (episodes)", xLabel: "reward"}),
      h("div", null, barChart(rows, names, {title: "Mean score per reward function", max: 1}), table)
    )
  );
}

function exampleRows(report) {
  const rows = report.examples.map((example, i) => ({index: i, example: example.name, key: example.key, idx: example.idx, env: example.env, input: example.input, target: example.target, output: example.output}));
  report.runs.forEach((run, r) => {
    for (const [index, rollouts, mean, pass1, passk, errors, se] of run.examples) {
      Object.assign(rows[index], {["rollouts" + r]: rollouts, ["mean" + r]: mean, ["se" + r]: se, ["pass1_" + r]: pass1, ["passk" + r]: passk, ["errors" + r]: errors});
    }
  });
  if (report.comparison) {
    for (const [index, ...verdicts] of report.comparison.rows) {
      verdicts.forEach((v, i) => {
        const row = rows[index];
        row["verdict" + (i + 1)] = v;
        const base = row.mean0;
        const other = row["mean" + (i + 1)];
        row["delta" + (i + 1)] = isNumber(base) && isNumber(other) ? other - base : null;
      });
    }
  }
  return rows;
}

const IO_COLUMNS = [["input", "Input", "The first user message of the example's first episode"], ["target", "Target", "task.data.answer"], ["output", "Output", "The final assistant message of the example's first episode"]];

function withError(mean, se) {
  return isNumber(se) ? fmtNum(mean) + " ± " + fmtNum(se) : fmtNum(mean);
}

function exampleColumns(report) {
  const columns = [
    {key: "example", label: "Example", format: (v, row) => h("span", {title: row.key}, v)},
    {key: "idx", label: "#", numeric: true},
    {key: "env", label: "Environment"},
  ];
  for (const [key, label, title] of IO_COLUMNS) {
    if (report.examples.some((example) => example[key])) {
      columns.push({key: key, label: label, title: title, format: (v) => v ? h("span", {class: "io", title: v}, shorten(v, 80)) : "–"});
    }
  }
  const multiple = report.runs.length > 1;
  report.runs.forEach((run, r) => {
    const suffix = multiple ? " (" + runLabel(run, 16) + ")" : "";
    const k = run.passing ? run.passing.k : 0;
    columns.push({key: "rollouts" + r, label: "Rollouts" + suffix, numeric: true, format: fmtInt});
    columns.push({key: "mean" + r, label: "Mean reward ± SE" + suffix, numeric: true, title: "Mean reward over the example's rollouts, ± its standard error (with 2+ scored rollouts)", format: (v, row) => withError(v, row["se" + r])});
    if (run.passing) {
      columns.push({key: "pass1_" + r, label: "pass@1" + suffix, numeric: true, format: fmtPct, title: "Share of rollouts passing (" + run.passing.label + " = 1)"});
      if (k > 1) columns.push({key: "passk" + r, label: "pass@" + k + suffix, numeric: true, format: fmtPct, title: "Unbiased pass@" + k + " estimate"});
    }
    columns.push({key: "errors" + r, label: "Failed" + suffix, numeric: true, format: fmtInt});
  });
  report.runs.slice(1).forEach((run, i) => {
    columns.push({key: "delta" + (i + 1), label: "Δ mean (" + runLabel(run, 16) + ")", numeric: true, format: (v) => isNumber(v) ? (v > 0 ? "+" : "") + fmtNum(v) : "–"});
    columns.push({key: "verdict" + (i + 1), label: "vs first run", format: (v) => badge(v, v === "better" ? "ok" : v === "worse" ? "bad" : "muted")});
  });
  return columns;
}

// The per-example table's columns as an exported file names them.
function exportFields(report) {
  const fields = [["key", "key"], ["example", "example"], ["idx", "idx"], ["env", "environment"], ["input", "input"], ["target", "target"], ["output", "output"]];
  const multiple = report.runs.length > 1;
  report.runs.forEach((run, r) => {
    const tag = multiple ? "[" + run.id + "]" : "";
    fields.push(["rollouts" + r, "rollouts" + tag], ["mean" + r, "mean_reward" + tag], ["se" + r, "mean_reward_se" + tag], ["pass1_" + r, "pass_at_1" + tag]);
    if (run.passing && run.passing.k > 1) fields.push(["passk" + r, "pass_at_" + run.passing.k + tag]);
    fields.push(["errors" + r, "failed" + tag]);
  });
  report.runs.slice(1).forEach((run, i) => fields.push(["delta" + (i + 1), "delta_mean[" + run.id + "]"], ["verdict" + (i + 1), "vs_first_run[" + run.id + "]"]));
  return fields.map(([key, name]) => ({key: key, name: name}));
}

function examplesSection(report, browser) {
  const rows = exampleRows(report);
  const verdicts = report.comparison ? [["verdict", "change", [["all", "all"], ["better", "better"], ["worse", "worse"], ["same", "same"]]]] : [];
  const controls = {placeholder: "Filter examples by name, key, environment, input, target or output", checks: [["failed", "with failed rollouts only"]], selects: verdicts};
  const match = (row, filter) => {
    if (filter.checks.failed && !report.runs.some((_, r) => row["errors" + r] > 0)) return false;
    const wanted = filter.selects.verdict;
    if (wanted && wanted !== "all" && !report.runs.slice(1).some((_, i) => row["verdict" + (i + 1)] === wanted)) return false;
    return !filter.query || [row.example, row.key, row.env, row.input, row.target, row.output].some((v) => v && String(v).toLowerCase().includes(filter.query));
  };
  const exporter = {fileName: "examples-" + report.runs[0].id, fields: exportFields(report)};
  const table = filteredTable(exampleColumns(report), rows, controls, match, {onRowClick: (row) => browser.filter(row.key), empty: "No examples match.", exporter: exporter});
  return section("examples", "Examples", note("One row per example (task.key). Click a header to sort, a row to list its episodes in the browser below. Input, target and output come from the example's first episode. Export saves the rows shown, as filtered and sorted, with every run's figures."), table);
}

function comparisonSection(report) {
  if (!report.comparison) return null;
  const base = report.runs[0];
  const lines = report.comparison.counts.map((counts, i) =>
    h("li", null, h("strong", null, runLabel(report.runs[i + 1])), " against ", runLabel(base), ": ",
      ["better", "worse", "same", "new", "missing", "unscored"].filter((k) => counts[k]).map((k) => fmtInt(counts[k]) + " " + k).join(", ") || "no examples")
  );
  return section("comparison", "Comparison", note("Mean reward per example, each run against the first. Use the change filter in the examples table to list them."), h("ul", {class: "plain"}, lines));
}

function errorsSection(report, browser) {
  const blocks = report.runs.map((run, r) => {
    const rows = run.errors.map((group) => h(
      "tr", null,
      h("td", null, h("code", null, group.type)),
      h("td", {class: "wrap"}, group.message || "–"),
      h("td", {class: "num"}, fmtInt(group.episodes)),
      h("td", null, group.samples.map((position) => h("button", {type: "button", class: "link", onclick: () => browser.open(r, position)}, shorten(run.episodes.rows[position][0], 10))))
    ));
    const stops = run.stops.map(([name, count]) => h("tr", null, h("td", null, name), h("td", {class: "num"}, fmtInt(count))));
    return h("div", {class: "run-errors"},
      report.runs.length > 1 ? h("h3", null, swatch(r), " ", runLabel(run)) : null,
      rows.length
        ? h("table", {class: "data"}, h("thead", null, h("tr", null, h("th", null, "Error"), h("th", null, "Message"), h("th", {class: "num"}, "Episodes"), h("th", null, "Open"))), h("tbody", null, rows))
        : note("No errors recorded."),
      h("table", {class: "data compact"}, h("thead", null, h("tr", null, h("th", null, "Stop condition"), h("th", {class: "num"}, "Episodes"))), h("tbody", null, stops))
    );
  });
  return section("errors", "Errors and stop conditions", note("Episode and trace errors grouped by type and first message line; the stop condition is the summary trace's."), h("div", {class: "side-by-side"}, blocks));
}

function usageSection(report, names) {
  const charts = report.charts;
  return section(
    "usage",
    "Tokens and latency",
    h("div", {class: "charts"},
      histogramChart(charts.tokens, names, {title: "Tokens per episode", xLabel: "tokens (context counted once)", format: fmtInt}),
      histogramChart(charts.duration, names, {title: "Episode duration", xLabel: "first start to last phase end", format: fmtSeconds}),
      histogramChart(charts.latency, names, {title: "Model call latency", xLabel: "per call", format: fmtSeconds}),
      histogramChart(charts.turns, names, {title: "Turns per episode", xLabel: "sampled messages of the summary trace", format: fmtInt})
    )
  );
}

function hasUsage(report) {
  return ["tokens", "duration", "latency", "turns"].some((k) => report.charts[k].labels.length || report.charts[k].edges.length);
}

// Which sections the report has: a training-only report has no per-example table (its
// examples recur at every step) and no empty token charts.
function layout(report) {
  const training = report.runs.some((run) => run.training);
  const evaluation = !report.runs.length || report.runs.some((run) => !run.training);
  return {training: training, examples: evaluation, comparison: evaluation && Boolean(report.comparison), usage: evaluation || hasUsage(report)};
}

function navigation(report) {
  const parts = layout(report);
  const links = [["runs", "Runs"]];
  if (parts.training) links.push(["metrics", "Metrics"], ["steps", "By step"], ["samples", "Sample table"]);
  links.push(["overview", "Rewards"]);
  if (parts.examples) links.push(["examples", "Examples"]);
  if (parts.comparison) links.push(["comparison", "Comparison"]);
  links.push(["errors", "Errors"]);
  if (parts.usage) links.push(["usage", "Tokens & latency"]);
  links.push(["browser", "Episodes"]);
  return h("nav", null, links.map(([id, label]) => h("a", {href: "#" + id}, label)));
}

function main() {
  const report = JSON.parse(document.getElementById("report-data").textContent);
  const names = report.runs.map((run) => runLabel(run, 40));
  const episodesByRun = report.runs.map(episodeRows);
  const browser = episodeBrowser(report, episodesByRun);
  const embedded = report.runs.reduce((n, run) => n + run.counts.embedded, 0);
  const total = report.runs.reduce((n, run) => n + run.counts.records, 0);
  const app = document.getElementById("app");
  const parts = layout(report);
  append(app, [
    h("header", null, h("h1", null, "prime-runs report"), h("p", {class: "subtitle"}, report.runs.map((run) => runLabel(run)).join(" vs ") || "no runs"), navigation(report)),
    section("runs", report.runs.length > 1 ? "Runs" : "Run", h("div", {class: "cards"}, report.runs.map((run, i) => runCard(run, i, report.runs.length > 1)))),
    trainingSections(report, names, browser),
    overviewSection(report, names),
    parts.examples ? examplesSection(report, browser) : null,
    parts.comparison ? comparisonSection(report) : null,
    errorsSection(report, browser),
    parts.usage ? usageSection(report, names) : null,
    section("browser", "Episodes", note("Messages are embedded for " + fmtInt(embedded) + " of " + quantity(total, "episode") + " (every example first, failed episodes first within it)."), browser.element),
    h("footer", null, "Written by " + report.generator + " at " + fmtTime(report.generated_at) + ". Self-contained: this file loads nothing from the network."),
  ]);
}

main();
