// Two runs side by side (#compare=<runA>,<runB>, or a replay beside its recorded run): their tokens,
// cost and model time, their steps aligned one model call to a row, the first tool call where they
// part marked on both sides, and whether the answers differ. The server compares (GET /api/compare);
// this page only draws what it says.
import { api, describeCall, el, formatCost, formatMs, formatNumber, shorten } from "./common.js";

/** Loads and draws the comparison of two recorded runs into `container`. */
export async function showCompare(container, runA, runB) {
  container.replaceChildren(el("p", { class: "empty" }, "Loading…"));
  try {
    const answer = await api(`/api/compare?a=${encodeURIComponent(runA)}&b=${encodeURIComponent(runB)}`);
    const side = (one) => ({ label: `Run ${one.runId}`, ...one });
    container.replaceChildren(compareView([side(answer.a), side(answer.b)], answer));
  } catch (error) {
    container.replaceChildren(
      el(
        "p",
        { class: "error", role: "alert" },
        `The runs ${runA} and ${runB} could not be compared: ${error.message}`,
      ),
    );
  }
  container.querySelector("h2")?.focus({ preventScroll: true });
}

/**
 * The comparison: `sides` are two `{label, summary, runId?, sessionId?, model?, input?}`; `divergence`
 * says `sameToolCalls`, `sameAnswer`, `divergesAtCall` and `divergesAtStep` ([a, b]).
 */
export function compareView(sides, divergence) {
  const [a, b] = sides;
  return el(
    "div",
    { class: "compare" },
    el("h2", { tabindex: "-1" }, "Compare runs"),
    el("p", { class: "compare-verdict", role: "status" }, verdictOf(divergence)),
    a.input ? el("p", { class: "meta" }, "Request: ", el("q", {}, shorten(a.input, 200))) : null,
    totalsTable(sides),
    el("h3", {}, "Step by step"),
    el(
      "ol",
      { class: "compare-steps" },
      alignedSteps(a.summary, b.summary).map(([left, right], index) =>
        stepRow(index + 1, [left, right], sides, divergence),
      ),
    ),
    el("h3", {}, "Answer"),
    el(
      "div",
      { class: `compare-answer${divergence.sameAnswer ? "" : " differs"}` },
      sides.map((side) =>
        el(
          "div",
          { class: "compare-side" },
          el("p", { class: "side-label" }, side.label),
          el("p", {}, side.summary.output || "—"),
        ),
      ),
    ),
  );
}

function verdictOf({ sameToolCalls, sameAnswer, divergesAtCall, divergesAtStep }) {
  const steps = divergesAtStep
    ? ` (step ${divergesAtStep[0] ?? "—"} on the left, step ${divergesAtStep[1] ?? "—"} on the right)`
    : "";
  const calls = sameToolCalls
    ? "Same tool calls, same arguments."
    : `The tool calls diverge at call ${divergesAtCall}${steps}.`;
  return `${calls} ${sameAnswer ? "Same answer." : "The answers differ."}`;
}

function totalsTable(sides) {
  const row = (label, value) =>
    el(
      "tr",
      {},
      el("th", { scope: "row" }, label),
      sides.map((side) => el("td", {}, value(side))),
    );
  return el(
    "table",
    { class: "compare-totals" },
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        el("th", {}, ""),
        sides.map((side) =>
          el(
            "th",
            { scope: "col" },
            side.sessionId
              ? el(
                  "a",
                  { href: `#session=${encodeURIComponent(side.sessionId)}&run=${encodeURIComponent(side.runId)}` },
                  side.label,
                )
              : side.label,
          ),
        ),
      ),
    ),
    el(
      "tbody",
      {},
      row("Model", (side) => side.model ?? "—"),
      row("Stop", (side) => side.summary.stopReason.replaceAll("_", " ")),
      row("Steps", (side) => String(side.summary.steps)),
      row(
        "Tokens",
        (side) => `${formatNumber(side.summary.promptTokens)} + ${formatNumber(side.summary.completionTokens)}`,
      ),
      row("Cost", (side) => formatCost(side.summary.cost)),
      row("Model time", (side) => formatMs(side.summary.latencyMs)),
    ),
  );
}

/** Step n beside step n; a side that made fewer steps shows nothing there. */
function alignedSteps(left, right) {
  const a = left.perStep ?? [];
  const b = right.perStep ?? [];
  return Array.from({ length: Math.max(a.length, b.length) }, (_, index) => [a[index], b[index]]);
}

function stepRow(number, steps, sides, divergence) {
  const marked = steps.map((step, index) => step && divergence.divergesAtStep?.[index] === step.step);
  return el(
    "li",
    { class: `compare-step${marked.some(Boolean) ? " diverges" : ""}`, "data-step": number },
    el("p", { class: "step-number" }, `Step ${number}`),
    steps.map((step, index) => sideOfStep(step, sides[index], index, divergence)),
  );
}

function sideOfStep(step, side, index, divergence) {
  if (!step) return el("div", { class: "compare-side none" }, el("p", { class: "side-label" }, side.label), "No step");
  // The n-th call of the run is the divergent one: count the calls of the steps before this one.
  const before = (side.summary.perStep ?? [])
    .filter((other) => other.step < step.step)
    .reduce((sum, other) => sum + other.toolCalls.length, 0);
  return el(
    "div",
    { class: "compare-side" },
    el("p", { class: "side-label" }, side.label),
    el(
      "p",
      { class: "meta" },
      `${formatNumber(step.promptTokens)} + ${formatNumber(step.completionTokens)} tokens · ${formatMs(step.latencyMs)} · ${formatCost(step.cost)}`,
    ),
    step.said ? el("p", { class: "said" }, shorten(step.said, 300)) : null,
    step.toolCalls.length
      ? el(
          "ul",
          { class: "compare-calls", "aria-label": `Tool calls, ${index === 0 ? "left" : "right"}` },
          step.toolCalls.map((call, at) => {
            const diverges = divergence.divergesAtCall === before + at + 1;
            return el(
              "li",
              { class: diverges ? "call diverges" : "call" },
              el("code", {}, describeCall(call.name, call.arguments)),
              call.recorded === false ? " — not recorded" : "",
              diverges ? el("strong", { class: "diverges-mark" }, " ⚠ diverges here") : null,
            );
          }),
        )
      : null,
  );
}
