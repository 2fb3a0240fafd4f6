// Sortable, filterable tables that render only a page of rows at a time, so a run with
// thousands of examples or episodes stays quick to open and to sort.

const PAGE_SIZE = 100;

function compareValues(a, b) {
  const missingA = a === null || a === undefined;
  const missingB = b === null || b === undefined;
  if (missingA || missingB) return missingA === missingB ? 0 : missingA ? 1 : -1;
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b), "en", {numeric: true});
}

function tableRow(columns, row, onClick) {
  const tr = h("tr", onClick ? {class: "clickable", onclick: () => onClick(row)} : null);
  for (const column of columns) {
    const value = row[column.key];
    const shown = column.format ? column.format(value, row) : value === null || value === undefined ? "–" : value;
    tr.appendChild(h("td", {class: column.numeric ? "num" : null}, shown));
  }
  return tr;
}

// columns: [{key, label, format?(value, row), numeric?, title?}]
// options: {onRowClick?(row), empty?, caption?}
// Returns {element, setRows(rows)}; clicking a header sorts by it (again: reversed).
function sortableTable(columns, options) {
  const state = {rows: [], sortKey: null, descending: false, shown: PAGE_SIZE};
  const head = h("tr");
  const headers = columns.map((column) => {
    const th = h(
      "th",
      {
        scope: "col",
        class: column.numeric ? "num sortable" : "sortable",
        title: column.title || "Sort by " + column.label,
        tabindex: 0,
        onclick: () => sortBy(column.key),
        onkeydown: (event) => { if (event.key === "Enter" || event.key === " ") { event.preventDefault(); sortBy(column.key); } },
      },
      column.label
    );
    head.appendChild(th);
    return th;
  });
  const body = h("tbody");
  const more = h("button", {type: "button", class: "more", onclick: () => { state.shown += PAGE_SIZE * 5; render(); }});
  const count = h("p", {class: "count"});
  const table = h("table", {class: "data"}, h("thead", null, head), body);
  const element = h("div", {class: "table-box"}, count, h("div", {class: "scroll"}, table), more);

  function sortBy(key) {
    state.descending = state.sortKey === key ? !state.descending : false;
    state.sortKey = key;
    state.rows.sort((a, b) => {
      const order = compareValues(a[key], b[key]);
      const missing = a[key] === null || a[key] === undefined || b[key] === null || b[key] === undefined;
      return state.descending && !missing ? -order : order;
    });
    headers.forEach((th, i) => {
      const active = columns[i].key === key;
      th.setAttribute("aria-sort", active ? (state.descending ? "descending" : "ascending") : "none");
    });
    render();
  }

  function render() {
    body.replaceChildren();
    const visible = state.rows.slice(0, state.shown);
    for (const row of visible) body.appendChild(tableRow(columns, row, options.onRowClick));
    if (!state.rows.length) {
      body.appendChild(h("tr", null, h("td", {colspan: columns.length, class: "empty"}, options.empty || "Nothing to show.")));
    }
    count.textContent = visible.length < state.rows.length
      ? "Showing " + fmtInt(visible.length) + " of " + quantity(state.rows.length, "row")
      : quantity(state.rows.length, "row");
    const left = state.rows.length - visible.length;
    more.hidden = left <= 0;
    more.textContent = "Show " + fmtInt(Math.min(left, PAGE_SIZE * 5)) + " more";
  }

  function setRows(rows) {
    state.rows = rows.slice();
    state.shown = PAGE_SIZE;
    if (state.sortKey !== null) {
      const key = state.sortKey;
      state.sortKey = null;
      state.descending = !state.descending;
      sortBy(key);
    } else {
      render();
    }
  }

  return {element: element, setRows: setRows, rows: () => state.rows};
}

// A text cell a spreadsheet would run as a formula (=, +, -, @ first) gets a leading ', so
// opening the exported file never evaluates record content.
function csvCell(value) {
  if (value === null || value === undefined) return "";
  let text = String(value);
  if (typeof value === "string" && /^[=+\-@\t\r]/.test(text)) text = "'" + text;
  return /[",\n\r]/.test(text) ? '"' + text.replace(/"/g, '""') + '"' : text;
}

function toCsv(fields, rows) {
  const lines = [fields.map((f) => csvCell(f.name)).join(",")];
  for (const row of rows) lines.push(fields.map((f) => csvCell(row[f.key])).join(","));
  return lines.join("\r\n") + "\r\n";
}

function toJsonl(fields, rows) {
  const value = (v) => (v === undefined || (typeof v === "number" && !Number.isFinite(v)) ? null : v);
  return rows.map((row) => JSON.stringify(Object.fromEntries(fields.map((f) => [f.name, value(row[f.key])])))).join("\n") + "\n";
}

// Saves `text` as a file: a blob made here, never a URL taken from record content.
function download(fileName, type, text) {
  const url = URL.createObjectURL(new Blob([text], {type: type}));
  const link = h("a", {href: url, download: fileName, hidden: true});
  document.body.appendChild(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

// exporter: {fileName, fields: [{key, name}]}; exports the rows shown (filtered, in order).
function exportButtons(exporter, rows) {
  const save = (kind) => {
    const text = kind === "csv" ? toCsv(exporter.fields, rows()) : toJsonl(exporter.fields, rows());
    download(exporter.fileName + "." + kind, kind === "csv" ? "text/csv" : "application/x-ndjson", text);
  };
  return h("span", {class: "export"},
    h("button", {type: "button", class: "export-csv", onclick: () => save("csv")}, "Export CSV"),
    " ",
    h("button", {type: "button", class: "export-jsonl", onclick: () => save("jsonl")}, "Export JSONL"));
}

// A text box and checkboxes in front of a table; `match(row, query, checks)` decides.
function filterBar(controls, onChange) {
  const query = h("input", {type: "search", placeholder: controls.placeholder, class: "filter", "aria-label": controls.placeholder});
  query.addEventListener("input", onChange);
  const checks = {};
  const boxes = (controls.checks || []).map(([key, label]) => {
    const box = h("input", {type: "checkbox", onchange: onChange});
    checks[key] = box;
    return h("label", {class: "check"}, box, " ", label);
  });
  const selects = {};
  const menus = (controls.selects || []).map(([key, label, choices]) => {
    const menu = h("select", {onchange: onChange, "aria-label": label}, choices.map(([value, text]) => h("option", {value: value}, text)));
    selects[key] = menu;
    return h("label", {class: "check"}, label + " ", menu);
  });
  const fields = {};
  const inputs = (controls.inputs || []).map(([key, label, placeholder]) => {
    const input = h("input", {type: "text", class: "filter small-filter", placeholder: placeholder, "aria-label": label});
    input.addEventListener("input", onChange);
    fields[key] = input;
    return h("label", {class: "check"}, label + " ", input);
  });
  const element = h("div", {class: "filters"}, query, boxes, menus, inputs);
  return {
    element: element,
    setQuery: (text) => {
      query.value = text;
      onChange();
    },
    // Set named controls ({inputs: {key: text}, selects: {key: value}}) and filter once.
    set: (values) => {
      for (const [k, v] of Object.entries(values.inputs || {})) if (fields[k]) fields[k].value = v;
      for (const [k, v] of Object.entries(values.selects || {})) if (selects[k]) selects[k].value = v;
      onChange();
    },
    value: () => ({
      query: query.value.trim().toLowerCase(),
      checks: Object.fromEntries(Object.entries(checks).map(([k, box]) => [k, box.checked])),
      selects: Object.fromEntries(Object.entries(selects).map(([k, menu]) => [k, menu.value])),
      inputs: Object.fromEntries(Object.entries(fields).map(([k, input]) => [k, input.value.trim()])),
    }),
  };
}

function filteredTable(columns, rows, controls, match, options) {
  const table = sortableTable(columns, options);
  const bar = filterBar(controls, () => table.setRows(rows.filter((row) => match(row, bar.value()))));
  table.setRows(rows);
  if (options.exporter) bar.element.appendChild(exportButtons(options.exporter, table.rows));
  return h("div", null, bar.element, table.element);
}
