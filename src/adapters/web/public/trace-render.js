// How the trace viewer shows what went in and out of a span: Markdown as elements (never parsed as
// HTML), JSON folded to its first level, long text collapsed, and the raw text one click away.
import { el, formatNumber, markdown, pretty } from "./common.js";

/** Text longer than this many characters (or lines) is shown cut, with a button for the rest. */
const LONG_CHARS = 1_200;
const LONG_LINES = 16;

/** A model's or a person's text: Markdown (fenced code kept as code), collapsed when long. */
export function richText(text) {
  const body = el("div", { class: "rich-text" }, markdownWithCode(text));
  return collapsible(body, String(text));
}

function markdownWithCode(text) {
  const parts = String(text).split(/^```[^\n]*\n([\s\S]*?)^```\s*$/m);
  // split with one capture group: even indexes are prose, odd ones the fenced code.
  return parts.map((part, index) => (index % 2 ? el("pre", {}, el("code", {}, part)) : markdown(part)));
}

/** Plain text that keeps its lines (a message sent to the model), collapsed when long. */
export function plainText(text) {
  return collapsible(el("pre", { class: "plain" }, String(text)), String(text));
}

function collapsible(body, text) {
  const lines = text.split("\n").length;
  if (text.length <= LONG_CHARS && lines <= LONG_LINES) return body;
  body.classList.add("collapsed");
  const toggle = el(
    "button",
    { type: "button", class: "link-button expand", "aria-expanded": "false" },
    `Show all ${formatNumber(text.length)} characters`,
  );
  toggle.addEventListener("click", () => {
    const open = body.classList.toggle("collapsed") === false;
    toggle.setAttribute("aria-expanded", String(open));
    toggle.textContent = open ? "Show less" : `Show all ${formatNumber(text.length)} characters`;
  });
  return el("div", { class: "long-text" }, body, toggle);
}

/** A JSON value as a tree: objects and arrays folded below the first level, scalars inline. */
export function jsonView(value) {
  return el("div", { class: "json-view" }, jsonNode(value, null, 0));
}

function jsonNode(value, key, depth) {
  const label = key === null ? null : el("span", { class: "json-key" }, `${key}: `);
  if (value === null || typeof value !== "object") {
    const text = typeof value === "string" ? JSON.stringify(value) : String(value);
    const shown = typeof value === "string" && value.length > 300 ? plainText(value) : el("span", {}, text);
    return el("div", { class: `json-leaf json-${value === null ? "null" : typeof value}` }, label, shown);
  }
  const entries = Array.isArray(value) ? value.map((item, index) => [index, item]) : Object.entries(value);
  const size = Array.isArray(value)
    ? `[${entries.length} item${entries.length === 1 ? "" : "s"}]`
    : `{${entries.length} key${entries.length === 1 ? "" : "s"}}`;
  if (entries.length === 0) return el("div", { class: "json-leaf" }, label, Array.isArray(value) ? "[]" : "{}");
  return el(
    "details",
    { class: "json-node", open: depth < 1 },
    el("summary", {}, label, el("span", { class: "json-size" }, size)),
    el(
      "div",
      { class: "json-children" },
      entries.map(([name, item]) => jsonNode(item, name, depth + 1)),
    ),
  );
}

/** The raw form of a value, on demand. */
export function rawDetails(value, title = "Raw") {
  return el(
    "details",
    { class: "raw" },
    el("summary", {}, title),
    el("pre", {}, typeof value === "string" ? value : pretty(value)),
  );
}

/** A value as read (JSON folded, or text), with its raw form under it. */
export function valueView(value) {
  return [typeof value === "string" ? plainText(value) : jsonView(value), rawDetails(value)];
}
