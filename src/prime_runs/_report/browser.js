// The episode browser: a filterable list of every episode on the left; the chosen episode's
// traces, read as conversations, on the right. Long content is folded behind a button.

const FOLD_CHARS = 1200;
const FOLD_LINES = 24;

function foldedText(text, className) {
  const value = String(text);
  const lines = value.split("\n");
  const pre = h("pre", {class: className || "content"});
  if (value.length <= FOLD_CHARS && lines.length <= FOLD_LINES) {
    pre.textContent = value;
    return pre;
  }
  const short = lines.slice(0, FOLD_LINES).join("\n").slice(0, FOLD_CHARS);
  pre.textContent = short + " …";
  const button = h("button", {type: "button", class: "unfold"}, "Show all (" + fmtInt(value.length) + " characters)");
  let open = false;
  button.addEventListener("click", () => {
    open = !open;
    pre.textContent = open ? value : short + " …";
    button.textContent = open ? "Fold" : "Show all (" + fmtInt(value.length) + " characters)";
  });
  return h("div", {class: "folded"}, pre, button);
}

function errorBlock(error, label) {
  return h(
    "div",
    {class: "error-box"},
    h("strong", null, (label ? label + ": " : "") + error.type),
    error.message ? foldedText(error.message, "content error-text") : null,
    error.traceback ? h("details", null, h("summary", null, "Traceback"), foldedText(error.traceback, "content traceback")) : null
  );
}

function messageBlock(message) {
  const role = ["system", "user", "assistant", "tool"].includes(message.role) ? message.role : "other";
  const header = h("div", {class: "message-head"}, badge(message.role, role));
  if (message.name) append(header, [" ", h("span", {class: "muted"}, message.name)]);
  if (message.tool_call_id) append(header, [" ", h("span", {class: "muted"}, "result of " + message.tool_call_id)]);
  const block = h("div", {class: "message message-" + role}, header);
  if (message.reasoning) {
    block.appendChild(h("details", {class: "reasoning"}, h("summary", null, "Reasoning"), foldedText(message.reasoning)));
  }
  if (message.content) block.appendChild(foldedText(message.content));
  for (const call of message.tool_calls || []) {
    block.appendChild(
      h("div", {class: "tool-call"}, h("span", {class: "muted"}, "tool call " + (call.id || "")), " ", h("code", null, call.name), foldedText(call.arguments, "content args"))
    );
  }
  if (!message.content && !(message.tool_calls || []).length && !message.reasoning) {
    block.appendChild(h("p", {class: "muted"}, "(empty)"));
  }
  return block;
}

function scoreTable(trace) {
  const rows = Object.entries(trace.rewards).map(([name, [score, weight]]) =>
    h("tr", null, h("td", null, name), h("td", {class: "num"}, fmtNum(score)), h("td", {class: "num"}, "× " + fmtNum(weight)))
  );
  const metrics = Object.entries(trace.metrics).map(([name, value]) =>
    h("tr", null, h("td", null, name), h("td", {class: "num"}, fmtNum(value)), h("td", {class: "muted"}, "metric"))
  );
  if (!rows.length && !metrics.length) return null;
  return h("table", {class: "scores"}, h("tbody", null, rows, metrics));
}

function traceBlock(trace, index) {
  const head = h(
    "div",
    {class: "trace-head"},
    h("strong", null, "Trace " + (index + 1) + ": " + trace.agent),
    " ",
    trace.summary ? badge("summary trace", "info") : null,
    trace.trainable ? null : badge("not trainable", "muted"),
    badge(trace.ok ? "ok" : "failed", trace.ok ? "ok" : "bad"),
    trace.stop ? badge(trace.stop, "muted") : null,
    h("span", {class: "muted"}, " reward " + fmtNum(trace.reward)),
    trace.model ? h("span", {class: "muted"}, " · " + trace.model) : null,
    isNumber(trace.usage.prompt_tokens) ? h("span", {class: "muted"}, " · " + fmtInt(trace.usage.prompt_tokens) + " prompt + " + fmtInt(trace.usage.completion_tokens) + " completion tokens") : null
  );
  const block = h("div", {class: "trace"}, head, scoreTable(trace));
  trace.errors.forEach((error) => block.appendChild(errorBlock(error, "error")));
  trace.call_errors.forEach((error) => block.appendChild(errorBlock(error, "failed model call")));
  trace.branches.forEach((messages, b) => {
    if (trace.branches.length > 1) block.appendChild(h("h4", null, "Branch " + (b + 1) + " of " + trace.branches.length));
    messages.forEach((message) => block.appendChild(messageBlock(message)));
  });
  if (!trace.branches.length) block.appendChild(h("p", {class: "muted"}, "No messages: the rollout never produced one."));
  return block;
}

function episodeDetail(report, runIndex, row) {
  const run = report.runs[runIndex];
  const example = report.examples[row.example] || {};
  const doc = row.browse >= 0 ? run.browse[row.browse] : null;
  const detail = h(
    "div",
    {class: "episode", "data-episode": row.id},
    h("h3", null, "Episode " + row.id),
    facts([
      ["run", run.name + " (" + run.id + ")"],
      ["example", example.name + (example.idx !== null && example.idx !== undefined ? " (#" + example.idx + ")" : "")],
      ["environment", example.env],
      ["reward", fmtNum(row.reward)],
      ["verdict", row.ok ? "ok" : "failed"],
      ["stop", row.stop],
      ["tokens", fmtInt(row.tokens)],
      ["duration", fmtSeconds(row.duration)],
      ["started", fmtTime(row.started)],
      ["step", isNumber(row.step) ? fmtInt(row.step) + " (dispatch step, run.work.step)" : null],
      ["policy", row.policy ? policyText(row) : null],
      ["expected answer", doc && doc.answer !== null && doc.answer !== undefined ? String(doc.answer) : null],
    ])
  );
  if (!doc) {
    detail.appendChild(note("This episode's messages are not embedded: the report keeps full content for " + fmtInt(run.counts.embedded) + " of " + quantity(run.counts.records, "episode") + " to stay small (raise --embed-mb to include more)."));
    return detail;
  }
  doc.errors.forEach((error) => detail.appendChild(errorBlock(error, "episode error")));
  if (!doc.traces.length) detail.appendChild(note("This episode has no traces: it failed before any rollout began."));
  doc.traces.forEach((trace, i) => detail.appendChild(traceBlock(trace, i)));
  return detail;
}

function policyText(row) {
  return row.policy + (row.policy === "off-policy" && isNumber(row.lag) ? " (lag " + fmtInt(row.lag) + ")" : "");
}

// "41" or "40-50" (either end may be left out): the steps a filter keeps; null keeps all.
function stepRange(text) {
  const found = /^(\d*)\s*(?:[-–]\s*(\d*))?$/.exec(text || "");
  if (!text) return null;
  if (!found) return [Infinity, -Infinity];  // not a step: nothing matches
  const from = found[1] === "" ? -Infinity : Number(found[1]);
  const to = found[2] === undefined ? from : found[2] === "" ? Infinity : Number(found[2]);
  return [from, to];
}

function episodeMatches(report, item, filter) {
  const row = item.row;
  if (filter.selects.run && filter.selects.run !== "all" && String(item.runIndex) !== filter.selects.run) return false;
  const steps = stepRange(filter.inputs.step);
  if (steps && !(isNumber(row.step) && row.step >= steps[0] && row.step <= steps[1])) return false;
  if (filter.selects.policy && filter.selects.policy !== "all" && row.policy !== filter.selects.policy) return false;
  if (filter.checks.failed && row.ok) return false;
  if (filter.checks.embedded && row.browse < 0) return false;
  if (!filter.query) return true;
  const example = report.examples[row.example] || {};
  if ([row.id, example.name, example.key, row.stop, row.error].some((v) => v && String(v).toLowerCase().includes(filter.query))) return true;
  return embeddedText(report, item).includes(filter.query);
}

// The searchable text of an embedded episode: every message, reasoning, tool call, error and
// the expected answer, lower-cased once and kept on the list item.
function embeddedText(report, item) {
  if (item.text !== undefined) return item.text;
  const doc = item.row.browse >= 0 ? report.runs[item.runIndex].browse[item.row.browse] : null;
  const parts = [];
  if (doc) {
    if (doc.answer !== null && doc.answer !== undefined) parts.push(String(doc.answer));
    doc.errors.forEach((e) => parts.push(e.type, e.message));
    for (const trace of doc.traces) {
      trace.errors.forEach((e) => parts.push(e.type, e.message));
      for (const messages of trace.branches) {
        for (const m of messages) {
          parts.push(m.content || "", m.reasoning || "");
          (m.tool_calls || []).forEach((call) => parts.push(call.name, call.arguments));
        }
      }
    }
  }
  item.text = parts.join("\n").toLowerCase();
  return item.text;
}

function episodeListItem(report, item, selected, onOpen) {
  const row = item.row;
  const example = report.examples[row.example] || {};
  const entry = h(
    "li",
    {class: "episode-item" + (selected ? " selected" : ""), tabindex: 0, "data-episode": row.id},
    report.runs.length > 1 ? swatch(item.runIndex) : null,
    h("span", {class: "episode-name"}, shorten(example.name || row.id, 28)),
    isNumber(row.step) ? h("span", {class: "muted step"}, "step " + fmtInt(row.step)) : null,
    h("span", {class: "num"}, fmtNum(row.reward, 2)),
    row.policy === "off-policy" ? badge("off-policy" + (isNumber(row.lag) ? " +" + fmtInt(row.lag) : ""), "warn") : row.policy === "on-policy" ? badge("on-policy", "ok") : null,
    row.ok ? null : badge("failed", "bad"),
    row.browse < 0 ? badge("no messages", "muted") : null
  );
  entry.addEventListener("click", () => onOpen(item));
  entry.addEventListener("keydown", (event) => { if (event.key === "Enter") onOpen(item); });
  return entry;
}

// The list's filters: text, failed, embedded; the run (several runs); a training run's
// step (one, or a range) and policy.
function browserControls(report) {
  const runChoices = [["all", "all runs"], ...report.runs.map((run, i) => [String(i), runLabel(run)])];
  const selects = report.runs.length > 1 ? [["run", "run", runChoices]] : [];
  const training = report.runs.some((run) => run.training);
  const policies = [["all", "all"], ["on-policy", "on-policy"], ["off-policy", "off-policy"], ["policy not recorded", "not recorded"], ["eval work", "eval work"]];
  if (training) selects.push(["policy", "policy", policies]);
  return {
    placeholder: "Search episodes: id, example, stop, error, message content",
    checks: [["failed", "failed only"], ["embedded", "with messages only"]],
    selects: selects,
    inputs: training ? [["step", "step", "e.g. 40 or 40-50"]] : [],
  };
}

// Returns {element, filter(text), showStep(step), open(runIndex, position)}.
function episodeBrowser(report, episodesByRun) {
  const pane = h("div", {class: "browser-detail", id: "episode-detail"}, note("Pick an episode from the list."));
  const list = h("ul", {class: "episode-list"});
  const more = h("button", {type: "button", class: "more"});
  const all = episodesByRun.flatMap((rows, runIndex) => rows.map((row) => ({runIndex: runIndex, row: row})));
  let matching = all;
  let shown = PAGE_SIZE;
  let selected = null;

  const bar = filterBar(browserControls(report), refresh);

  function refresh() {
    const filter = bar.value();
    matching = all.filter((item) => episodeMatches(report, item, filter));
    shown = PAGE_SIZE;
    renderList();
  }

  function renderList() {
    list.replaceChildren();
    for (const item of matching.slice(0, shown)) {
      list.appendChild(episodeListItem(report, item, item === selected, open));
    }
    const left = matching.length - Math.min(shown, matching.length);
    more.hidden = left <= 0;
    more.textContent = "Show " + fmtInt(Math.min(left, PAGE_SIZE * 5)) + " more (" + fmtInt(matching.length) + " match)";
  }
  more.addEventListener("click", () => { shown += PAGE_SIZE * 5; renderList(); });

  function open(item) {
    selected = item;
    pane.replaceChildren(episodeDetail(report, item.runIndex, item.row));
    renderList();
  }

  refresh();
  const element = h("div", {class: "browser"}, h("div", {class: "browser-list"}, bar.element, list, more), pane);
  return {
    element: element,
    filter: (text) => {
      bar.setQuery(text);
      element.scrollIntoView({behavior: "smooth", block: "start"});
    },
    showStep: (step) => {
      bar.set({inputs: {step: String(step)}});
      element.scrollIntoView({behavior: "smooth", block: "start"});
    },
    open: (runIndex, position) => {
      const item = all.find((entry) => entry.runIndex === runIndex && entry.row.position === position);
      if (item) {
        open(item);
        pane.scrollIntoView({behavior: "smooth", block: "start"});
      }
    },
  };
}
