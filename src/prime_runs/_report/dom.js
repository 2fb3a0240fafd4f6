// DOM and formatting helpers.
//
// Everything that comes from a record is untrusted text. It only ever reaches the page
// through text nodes (append/textContent) or through attributes this code names itself
// (class, title, aria-*); never through innerHTML, and never as a URL or an event handler.

const SVG_NS = "http://www.w3.org/2000/svg";
const RUN_COLORS = ["#2563eb", "#ea580c", "#16a34a", "#9333ea", "#dc2626", "#0891b2"];

function runColor(index) {
  return RUN_COLORS[index % RUN_COLORS.length];
}

function append(parent, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) {
      append(parent, child);
    } else if (child instanceof Node) {
      parent.appendChild(child);
    } else {
      parent.appendChild(document.createTextNode(String(child)));
    }
  }
  return parent;
}

function setAttributes(el, attrs) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) {
      el.addEventListener(name.slice(2), value);
    } else if (name === "class") {
      el.setAttribute("class", value);
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  return el;
}

// h("div", {class: "x"}, "text", child, [more]): an HTML element.
function h(tag, attrs, ...children) {
  return append(setAttributes(document.createElement(tag), attrs), children);
}

// s("rect", {x: 1}): an SVG element.
function s(tag, attrs, ...children) {
  return append(setAttributes(document.createElementNS(SVG_NS, tag), attrs), children);
}

function isNumber(value) {
  return typeof value === "number" && Number.isFinite(value);
}

function fmtNum(value, digits) {
  if (!isNumber(value)) return "–";
  if (Number.isInteger(value)) return value.toLocaleString("en-US");
  const d = digits === undefined ? 3 : digits;
  const abs = Math.abs(value);
  if (abs !== 0 && (abs < 0.001 || abs >= 1e6)) return value.toExponential(2);
  return value.toFixed(d);
}

function fmtInt(value) {
  return isNumber(value) ? Math.round(value).toLocaleString("en-US") : "–";
}

function fmtPct(value) {
  return isNumber(value) ? (value * 100).toFixed(1) + "%" : "–";
}

function fmtSeconds(value) {
  if (!isNumber(value)) return "–";
  if (value < 1) return (value * 1000).toFixed(0) + " ms";
  if (value < 120) return value.toFixed(2) + " s";
  return (value / 60).toFixed(1) + " min";
}

function fmtTime(epochSeconds) {
  if (!isNumber(epochSeconds)) return "–";
  return new Date(epochSeconds * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC";
}

function shorten(text, limit) {
  const value = String(text === null || text === undefined ? "" : text);
  return value.length > limit ? value.slice(0, limit - 1) + "…" : value;
}

// How the page names a run: its name (cut to `limit` when given) and, when another run of
// the report has the same name, the tag that tells them apart (never cut).
function runLabel(run, limit) {
  const name = limit ? shorten(run.name, limit) : String(run.name);
  return run.tag ? name + " (" + run.tag + ")" : name;
}

// A count with its noun: "1 line", "2 lines" (`plural` when it is not noun + "s").
function quantity(n, noun, plural) {
  return fmtInt(n) + " " + (n === 1 ? noun : plural || noun + "s");
}

function badge(text, kind) {
  return h("span", {class: "badge" + (kind ? " badge-" + kind : "")}, text);
}

function section(id, title, ...children) {
  return h("section", {id: id, class: "section"}, h("h2", null, title), children);
}

function note(text) {
  return h("p", {class: "note"}, text);
}

// A key/value grid: [["label", value-or-node], ...]
function facts(rows) {
  const list = h("dl", {class: "facts"});
  for (const [label, value] of rows) {
    if (value === null || value === undefined || value === "") continue;
    append(list, [h("dt", null, label), h("dd", null, value)]);
  }
  return list;
}
