// "Replay" on a finished run: re-run it from its exact recorded context, optionally with another
// system prompt (or model, where the server can name one); tools are answered from the recording
// and never run. The two runs are shown side by side, with where they diverge.
import { api, el, formatCost, formatMs, formatNumber } from "./common.js";
import { compareView } from "./trace-compare.js";

export function replayDetails(run) {
  const result = el("div", { class: "replay-result", "aria-live": "polite" });
  const model = el("input", {
    type: "text",
    name: "model",
    maxlength: "200",
    placeholder: "the configured model",
    "aria-label": "Model to replay on",
  });
  const prompt = el("textarea", {
    name: "systemPrompt",
    rows: "3",
    maxlength: "20000",
    placeholder: "the recorded system prompt",
    "aria-label": "System prompt for the replay",
  });
  const button = el("button", { type: "submit" }, "Replay");
  const form = el(
    "form",
    { class: "replay-form" },
    el("label", {}, "Model ", model),
    el("label", {}, "System prompt ", prompt),
    button,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    button.disabled = true;
    result.replaceChildren(
      el("p", { class: "hint" }, "Replaying… (the model answers again; tools are answered from the recording)"),
    );
    try {
      const body = {
        ...(model.value.trim() ? { model: model.value.trim() } : {}),
        ...(prompt.value.trim() ? { systemPrompt: prompt.value } : {}),
      };
      const comparison = await api(`/api/runs/${encodeURIComponent(run.runId)}/replay`, { method: "POST", body });
      result.replaceChildren(comparisonView(comparison), compareButton(run, comparison, model.value.trim()));
    } catch (error) {
      result.replaceChildren(el("p", { class: "error", role: "alert" }, `The replay failed: ${error.message}`));
    } finally {
      button.disabled = false;
    }
  });
  return el(
    "details",
    { class: "replay" },
    el("summary", {}, "Replay this run"),
    el(
      "p",
      { class: "hint" },
      "Re-runs it from exactly what its first step sent. No tool runs: each call is answered from the recording, or refused as not recorded.",
    ),
    form,
    result,
  );
}

function comparisonView(comparison) {
  const { original, replay } = comparison;
  const calls = (summary) =>
    summary.toolCalls
      .map(
        (call) => `${call.name}(${JSON.stringify(call.arguments)})${call.recorded === false ? " — not recorded" : ""}`,
      )
      .join("\n") || "none";
  const rows = [
    ["Answer", original.output, replay.output],
    ["Stop", original.stopReason, replay.stopReason],
    ["Tool calls", calls(original), calls(replay)],
    ["Steps", String(original.steps), String(replay.steps)],
    [
      "Tokens",
      `${formatNumber(original.promptTokens)} + ${formatNumber(original.completionTokens)}`,
      `${formatNumber(replay.promptTokens)} + ${formatNumber(replay.completionTokens)}`,
    ],
    ["Cost", formatCost(original.cost), formatCost(replay.cost)],
    ["Model time", formatMs(original.latencyMs), formatMs(replay.latencyMs)],
  ];
  const verdict = comparison.sameToolCalls
    ? "Same tool calls, same arguments."
    : `The runs diverge at tool call ${comparison.divergesAtCall}.`;
  return el(
    "div",
    {},
    el(
      "p",
      { class: "replay-verdict" },
      `${verdict} ${comparison.sameAnswer ? "Same answer." : "The answer changed."}`,
    ),
    el(
      "div",
      { class: "table-scroll" },
      el(
        "table",
        { class: "replay-table" },
        el("thead", {}, el("tr", {}, el("th", {}, ""), el("th", {}, "Recorded"), el("th", {}, "Replay"))),
        el(
          "tbody",
          {},
          rows.map(([label, a, b]) =>
            el(
              "tr",
              {},
              el("th", { scope: "row" }, label),
              el("td", {}, el("pre", {}, a)),
              el("td", {}, el("pre", {}, b)),
            ),
          ),
        ),
      ),
    ),
  );
}

/** "Compare step by step": the replay beside its recorded run in the main pane (a replay is not stored, so no address). */
function compareButton(run, comparison, model) {
  const button = el("button", { type: "button", class: "compare-replay" }, "Compare step by step");
  button.addEventListener("click", () => {
    const pane = document.getElementById("session-detail");
    const back = el(
      "a",
      { href: `#session=${encodeURIComponent(run.sessionId)}&run=${encodeURIComponent(run.runId)}` },
      "Back to the run",
    );
    const sides = [
      {
        label: "Recorded",
        runId: run.runId,
        sessionId: run.sessionId,
        model: run.model,
        input: run.input,
        summary: comparison.original,
      },
      { label: "Replay", model: model || "the configured model", summary: comparison.replay },
    ];
    // Where the address already names the run, the link changes nothing: the session is read again anyway.
    back.addEventListener("click", () => {
      if (location.hash === back.getAttribute("href")) dispatchEvent(new HashChangeEvent("hashchange"));
    });
    pane.replaceChildren(el("p", {}, back), compareView(sides, comparison));
    pane.querySelector("h2")?.focus();
  });
  return button;
}
