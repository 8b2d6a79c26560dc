// A run as a waterfall: one row per span (indented under its parent, openable where it has spans
// inside), its bar placed to scale on the run's time, its tokens, cost and duration beside it. The
// rows are a tree for keyboards: up/down (or k/j) move, right/left (or l/h) open and close, Enter
// opens the span in the side panel.
import { el, formatCost, formatMs, formatNumber } from "./common.js";
import { flatten } from "./trace-spans.js";

/** Runs inside others start closed (a pipeline's stages, a specialist's run); the rest open. */
const closedAtFirst = (span) => span.kind === "stage" || span.kind === "specialist";

/**
 * `state`: `{ expanded: Map<key, boolean>, selected: key|null }`, kept across renders (a live run
 * re-renders); `onOpen(span, row)`: a span was chosen.
 */
export function waterfall(root, label, state, onOpen, now = Date.now()) {
  const rows = flatten(root);
  const start = root.start;
  const end = Math.max(...rows.map(({ span }) => span.end ?? now), start + 1);
  const isOpen = (span) => state.expanded.get(span.key) ?? !closedAtFirst(span);
  const spans = new Map(rows.map(({ span }) => [span.key, span]));
  const tree = el(
    "div",
    { class: "waterfall", role: "tree", "aria-label": label },
    rows.map(({ span, depth, parent }) => row(span, depth, parent, { start, end, now, isOpen })),
  );
  showOpenRows(tree, isOpen, spans);
  tree.addEventListener("click", (event) => {
    const item = event.target.closest('[role="treeitem"]');
    if (!item) return;
    const span = spans.get(item.dataset.key);
    focusRow(item);
    if (event.target.closest(".toggle")) return toggle(item, span);
    // Choosing a closed run opens it too: what is inside is what a person wants next.
    if (span.children.length && !isOpen(span)) toggle(item, span, true);
    onOpen(span, item);
  });
  tree.addEventListener("keydown", (event) => {
    const item = event.target.closest('[role="treeitem"]');
    if (!item || event.altKey || event.ctrlKey || event.metaKey) return;
    const span = spans.get(item.dataset.key);
    const handled = onKey(event.key, item, span);
    if (handled === "open") onOpen(span, item);
    if (handled) event.preventDefault();
  });

  function toggle(item, span, open = !isOpen(span)) {
    if (span.children.length === 0) return;
    state.expanded.set(span.key, open);
    showOpenRows(tree, isOpen, spans);
    item.setAttribute("aria-expanded", String(open));
  }

  function onKey(key, item, span) {
    const visible = [...document.querySelectorAll('.waterfall [role="treeitem"]:not([hidden])')];
    const at = visible.indexOf(item);
    const move = (target) => target && focusRow(target);
    if (key === "ArrowDown" || key === "j") return move(visible[at + 1]) ?? true;
    if (key === "ArrowUp" || key === "k") return move(visible[at - 1]) ?? true;
    if (key === "Home") return move(tree.querySelector('[role="treeitem"]')) ?? true;
    if (key === "End") return move([...tree.querySelectorAll('[role="treeitem"]:not([hidden])')].at(-1)) ?? true;
    if (key === "ArrowRight" || key === "l") {
      if (span.children.length && !isOpen(span)) toggle(item, span, true);
      else if (span.children.length) move(visible[at + 1]);
      return true;
    }
    if (key === "ArrowLeft" || key === "h") {
      if (span.children.length && isOpen(span)) toggle(item, span, false);
      else move(tree.querySelector(`[data-key="${CSS.escape(item.dataset.parent ?? "")}"]`));
      return true;
    }
    if (key === "Enter" || key === " " || key === "o") return "open";
    return false;
  }

  tree.querySelector('[role="treeitem"]')?.setAttribute("tabindex", "0");
  if (state.selected && spans.has(state.selected)) markSelected(tree, state.selected);
  return tree;
}

function row(span, depth, parent, scale) {
  const total = scale.end - scale.start;
  const until = span.end ?? scale.now;
  const tokens = span.promptTokens === undefined ? null : [span.promptTokens, span.completionTokens];
  const item = el(
    "div",
    {
      class: [
        "span-row",
        `span-${span.kind}`,
        `status-${span.status}`,
        span.end === null && "running",
        span.folded && "folded",
      ]
        .filter(Boolean)
        .join(" "),
      role: "treeitem",
      tabindex: "-1",
      "aria-level": depth + 1,
      "aria-expanded": span.children.length ? "true" : false,
      "aria-selected": "false",
      "data-key": span.key,
      "data-kind": span.kind,
      "data-parent": parent ?? false,
      "data-step": span.kind === "model" ? (span.step?.step ?? false) : false,
    },
    el(
      "span",
      { class: "span-name" },
      el("span", { class: "toggle", "aria-hidden": "true" }, span.children.length ? "▸" : ""),
      el("span", { class: "mark", "aria-hidden": "true" }, markOf(span)),
      el("span", { class: "span-label" }, span.label),
    ),
    el(
      "span",
      { class: "span-metrics" },
      tokens
        ? el(
            "span",
            { class: "tokens" },
            el("span", { class: "prompt-tokens" }, formatNumber(tokens[0])),
            " + ",
            el("span", { class: "completion-tokens" }, formatNumber(tokens[1])),
            " tok",
          )
        : null,
      span.cost !== undefined ? el("span", { class: "cost" }, formatCost(span.cost)) : null,
      el("span", { class: "duration" }, span.end === null ? "going" : formatMs(until - span.start)),
    ),
    el("span", { class: "span-track", "aria-hidden": "true" }, el("span", { class: "span-bar" })),
  );
  item.style.setProperty("--depth", String(depth));
  // Set through the CSS object model: the page's policy allows no inline style attributes.
  const bar = item.querySelector(".span-bar");
  bar.style.setProperty("--left", `${(((span.start - scale.start) / total) * 100).toFixed(3)}%`);
  bar.style.setProperty("--width", `${Math.max(((until - span.start) / total) * 100, 0.4).toFixed(3)}%`);
  return item;
}

function markOf(span) {
  if (span.end === null) return "…";
  if (span.kind === "fold") return "▼";
  if (span.kind === "tool") return span.status === "ok" ? "✓" : "⚠";
  if (span.kind === "approval") return span.status === "ok" ? "✓" : span.status === "waiting" ? "⏸" : "✗";
  return "";
}

/** Rows under a closed span are hidden; their own state is kept for when it opens again. */
function showOpenRows(tree, isOpen, spans) {
  const closed = new Set();
  for (const item of tree.querySelectorAll('[role="treeitem"]')) {
    const parent = item.dataset.parent;
    const hidden = parent !== undefined && (closed.has(parent) || !isOpen(spans.get(parent)));
    item.hidden = hidden;
    if (hidden) closed.add(item.dataset.key);
    const span = spans.get(item.dataset.key);
    if (span.children.length) item.setAttribute("aria-expanded", String(isOpen(span)));
  }
}

/** The one row reachable with Tab (a roving tabindex), focused. */
export function focusRow(item) {
  for (const other of item.closest(".waterfall").querySelectorAll('[tabindex="0"]'))
    other.setAttribute("tabindex", "-1");
  item.setAttribute("tabindex", "0");
  item.focus();
  return true;
}

export function markSelected(scope, key) {
  for (const item of document.querySelectorAll('.waterfall [aria-selected="true"]'))
    item.setAttribute("aria-selected", "false");
  const chosen = key ? scope.querySelector(`[data-key="${CSS.escape(key)}"]`) : null;
  if (!chosen) return;
  chosen.setAttribute("aria-selected", "true");
  if (chosen.hidden) return;
  for (const other of chosen.closest(".waterfall").querySelectorAll('[tabindex="0"]'))
    other.setAttribute("tabindex", "-1");
  chosen.setAttribute("tabindex", "0");
}
