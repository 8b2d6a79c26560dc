// The side panel where a chosen span is read (a full-width sheet on a phone). Escape or Close
// shuts it and gives the focus back to the span's row, so the keyboard goes on where it was.
import { el } from "./common.js";
import { spanDetails } from "./trace-details.js";

const KIND_NAMES = {
  run: "Run",
  pipeline: "Pipeline",
  stage: "Pipeline stage",
  specialist: "Specialist's run",
  model: "Model call",
  tool: "Tool call",
  approval: "Approval",
  fold: "Memory fold",
};

export function createPanel() {
  const title = el("h2", { id: "span-panel-title", tabindex: "-1" });
  const kind = el("p", { class: "span-kind" });
  const close = el("button", { type: "button", class: "close", "aria-label": "Close the span" }, "✕ Close");
  const body = el("div", { class: "span-panel-body" });
  const panel = el(
    "aside",
    { id: "span-panel", class: "span-panel", role: "region", "aria-labelledby": "span-panel-title", hidden: true },
    el("header", { class: "span-panel-head" }, el("div", {}, kind, title), close),
    body,
  );
  document.body.append(panel);
  let shown = null;
  let onClose = () => {};

  function hide() {
    if (panel.hidden) return;
    panel.hidden = true;
    document.body.classList.remove("span-panel-open");
    const row = shown && document.querySelector(`.waterfall [data-key="${CSS.escape(shown.key)}"]`);
    shown = null;
    onClose();
    row?.focus();
  }
  close.addEventListener("click", hide);
  addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !panel.hidden) {
      event.preventDefault();
      hide();
    }
  });

  return {
    /** Shows a span; `focus`: move the focus into the panel (a person chose it, not a live update). */
    show(span, context, { focus = true, closed = () => {} } = {}) {
      shown = span;
      onClose = closed;
      kind.textContent = KIND_NAMES[span.kind] ?? span.kind;
      title.textContent = span.label;
      body.replaceChildren(...[spanDetails(span, context)].flat(Infinity).filter(Boolean));
      panel.hidden = false;
      panel.dataset.kind = span.kind;
      panel.scrollTop = 0;
      document.body.classList.add("span-panel-open");
      if (focus) title.focus();
    },
    /** The span shown, if any. */
    shown: () => (panel.hidden ? null : shown),
    hide,
  };
}
