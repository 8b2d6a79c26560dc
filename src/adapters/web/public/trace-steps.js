// A run's steps in the trace viewer: per step its tokens, latency and cost, what the model was sent
// (the whole request on demand), its thinking, what the model layer did, its answer and tool calls
// (a specialist's run nested, openable, under the call that asked for it), the guards' notes, and
// where memory folded older turns into a summary first.
import {
  api,
  describeCall,
  el,
  formatCost,
  formatMs,
  formatNumber,
  formatTime,
  pretty,
  shorten,
  thinkingDetails,
} from "./common.js";

/**
 * What the steps of a session need besides themselves: `childrenOf(toolCallId)` the specialists'
 * runs a call started, `stepsOf(runId)`, and `foldsAt(runId, step)` the folds made for a step.
 */
export function stepsTable(run, caption, steps, context) {
  if (steps.length === 0) return el("p", { class: "empty" }, "No model call recorded for this run.");
  const column = (text, numeric) => el("th", { scope: "col", class: numeric ? "num" : false }, text);
  // The box decides the layout (a table, or cards where it is narrow: a phone, a nested run).
  return el(
    "div",
    { class: "steps-box" },
    el(
      "table",
      { class: "steps" },
      el("caption", { class: "visually-hidden" }, caption),
      el(
        "thead",
        {},
        el(
          "tr",
          {},
          column("Step"),
          column("Prompt tokens", true),
          column("Completion tokens", true),
          column("Latency", true),
          column("Cost", true),
          column("What happened"),
        ),
      ),
      el(
        "tbody",
        {},
        steps.map((step) => stepRow(run, step, context)),
      ),
    ),
  );
}

function stepRow(run, step, context) {
  const folds = context.foldsAt(run.runId, step.step);
  // data-label: on a narrow screen each row is a card, and its cells say what they are.
  const number = (label, value, extra = "") => el("td", { class: `num ${extra}`.trim(), "data-label": label }, value);
  return el(
    "tr",
    {
      class: folds.length ? "step folded" : "step",
      "data-step": step.step,
      "data-prompt-tokens": step.promptTokens,
      "data-completion-tokens": step.completionTokens,
    },
    el("th", { scope: "row", "data-label": "Step" }, String(step.step)),
    number("Prompt", formatNumber(step.promptTokens), "prompt-tokens"),
    number("Completion", formatNumber(step.completionTokens), "completion-tokens"),
    number("Latency", formatMs(step.latencyMs)),
    number("Cost", formatCost(step.cost), "cost"),
    el(
      "td",
      { class: "what" },
      folds.map(foldDetails),
      el(
        "p",
        { class: "context" },
        `Sent ${step.contextMessages} message${step.contextMessages === 1 ? "" : "s"}${step.contextTokens === null ? "" : ` (about ${formatNumber(step.contextTokens)} tokens by glassbox's count)`}${step.model ? ` to ${step.model}` : ""}`,
      ),
      step.reasoning ? thinkingDetails(step.reasoning, step.reasoningCutChars, "were not kept") : null,
      step.modelNotes.map((note) => el("p", { class: "model-note" }, "Model layer: ", note)),
      step.content ? el("p", { class: "content" }, step.content) : null,
      step.toolCalls.map((call) => [
        toolDetails(call),
        (context.childrenOf(call.id) ?? []).map((child) => specialistRun(call, child, context)),
      ]),
      step.notes.map((note) => el("p", { class: "note" }, "Note to the model: ", note)),
      payloadDetails(run.runId, step.step),
    ),
  );
}

/** The summarising call's own cost, counted in the run's totals; older summaries did not keep it. */
function summaryCallText(call) {
  if (!call) return "That call's own tokens and cost were not kept (a summary written by an older glassbox).";
  return `That call (${call.model}) took ${formatNumber(call.promptTokens)} prompt and ${formatNumber(call.completionTokens)} completion tokens (${call.cost === null ? "no known price for this model" : formatCost(call.cost)}), counted in this run's totals.`;
}

/** Where memory made room before this step: what it folded, and the summary it wrote, openable. */
function foldDetails(fold) {
  const folded = `${formatNumber(fold.foldedMessages)} older message${fold.foldedMessages === 1 ? "" : "s"}`;
  return el(
    "details",
    { class: "fold" },
    el(
      "summary",
      {},
      el("span", { class: "fold-key", "aria-hidden": "true" }, "▼"),
      fold.summaryFailed
        ? `Memory dropped ${folded} before this step: the summary could not be written`
        : `Memory folded ${folded} into a summary before this step`,
    ),
    el(
      "p",
      { class: "hint" },
      fold.summaryFailed
        ? "The summarising call failed (the server log says why), so the summary stayed as it was."
        : `At ${formatTime(fold.at)} a separate call to the model summarised them: the summary is about ${formatNumber(fold.summaryTokens)} tokens (glassbox's count) and rides in the system message from here on. ${summaryCallText(fold.call)}`,
    ),
    fold.summary ? el("div", { class: "fold-summary" }, el("h4", {}, "Summary"), el("p", {}, fold.summary)) : null,
  );
}

function toolDetails(call) {
  const ok = call.envelope.status === "success";
  return el(
    "details",
    { class: `tool-call ${ok ? "ok" : "failed"}` },
    el(
      "summary",
      {},
      el("span", { class: "mark", "aria-hidden": "true" }, ok ? "✓" : "⚠"),
      `${describeCall(call.name, call.arguments ?? {})} · ${formatMs(call.durationMs)}${ok ? "" : ` · ${call.envelope.error.type}`}`,
    ),
    el("h4", {}, "Arguments"),
    el("pre", {}, call.arguments ? pretty(call.arguments) : call.rawArguments),
    call.repairs.length
      ? [
          el("h4", {}, "Repairs"),
          el("p", {}, "The model sent ", el("code", {}, call.rawArguments)),
          el(
            "ul",
            {},
            call.repairs.map((repair) => el("li", {}, repair)),
          ),
        ]
      : null,
    el("h4", {}, "Result"),
    el("pre", {}, pretty(call.envelope)),
    call.truncatedChars
      ? el("p", { class: "hint" }, `The model saw it cut by ${formatNumber(call.truncatedChars)} characters.`)
      : null,
    call.approval
      ? el(
          "p",
          {},
          `Approval: ${call.approval.approved ? "approved" : "denied"} by ${call.approval.by}${call.approval.reason ? ` (${call.approval.reason})` : ""}.`,
        )
      : null,
  );
}

/** A specialist's run, under the call that asked for it: openable, with its own steps. */
function specialistRun(call, run, context) {
  const name = call.name.replace(/^agent_/, "");
  return nestedRun(run, `${name}'s run`, context.stepsOf(run.runId), context, "Task");
}

/** A run inside another (a specialist's, a pipeline's stage), collapsed to one line until opened. */
export function nestedRun(run, title, steps, context, inputLabel) {
  const totals = `${run.status.replaceAll("_", " ")} · ${run.steps} step${run.steps === 1 ? "" : "s"} · ${formatNumber(run.promptTokens)} prompt + ${formatNumber(run.completionTokens)} completion tokens · cost ${formatCost(run.cost)}${run.model ? ` · ${run.model}` : ""}`;
  return el(
    "details",
    { class: "nested-run", id: `run-${run.runId}`, "data-run-id": run.runId },
    el("summary", {}, el("strong", {}, title), ` · ${totals}`),
    el(
      "div",
      { class: "nested-body" },
      el("p", {}, `${inputLabel}: `, el("q", {}, shorten(run.input, 300))),
      stepsTable(run, `Steps of ${title}`, steps, context),
      run.output ? el("p", { class: "nested-answer" }, "Answer: ", run.output) : null,
    ),
  );
}

function payloadDetails(runId, step) {
  const details = el("details", { class: "payload-details" }, el("summary", {}, "Exactly what was sent"));
  details.addEventListener("toggle", () => void loadPayload(details, runId, step), { once: true });
  return details;
}

async function loadPayload(details, runId, step) {
  const body = el("div", { class: "payload-body" }, el("p", {}, "Loading…"));
  details.append(body);
  try {
    const sent = await api(`/api/runs/${encodeURIComponent(runId)}/steps/${step}/payload`);
    body.replaceChildren(
      requestSettings(sent),
      el("h4", {}, `Messages (${sent.messages.length})`),
      el("ol", { class: "payload-messages" }, sent.messages.map(payloadMessage)),
    );
  } catch (error) {
    body.replaceChildren(
      el("p", { class: "error", role: "alert" }, `This step's request could not be loaded: ${error.message}`),
    );
  }
}

/** The request around the messages: what the trace kept of it. */
function requestSettings({ model, request }) {
  const rows = [["Model", model ?? "not recorded"]];
  if (request) {
    for (const [name, value] of Object.entries(request))
      if (name !== "tools" && name !== "model")
        rows.push([name, typeof value === "string" ? value : JSON.stringify(value)]);
  }
  const tools = request?.tools;
  return el(
    "div",
    { class: "request" },
    el(
      "dl",
      { class: "request-settings" },
      rows.map(([name, value]) => [el("dt", {}, name), el("dd", {}, value)]),
    ),
    Array.isArray(tools)
      ? [
          el("h4", {}, `Tools (${tools.length})`),
          el(
            "ul",
            { class: "payload-tools" },
            tools.map((tool) =>
              el(
                "li",
                {},
                el(
                  "details",
                  {},
                  el(
                    "summary",
                    {},
                    el("code", {}, tool.function?.name ?? "?"),
                    " — ",
                    shorten(tool.function?.description ?? "", 120),
                  ),
                  el("pre", {}, pretty(tool.function?.parameters ?? {})),
                ),
              ),
            ),
          ),
        ]
      : el(
          "p",
          { class: "hint" },
          "The trace keeps each step's messages and the model that answered; the tool schemas and settings it was sent with (tools, tool_choice, streaming) are not recorded.",
        ),
  );
}

function payloadMessage(message) {
  return el(
    "li",
    { class: `payload-message role-${message.role}` },
    el("span", { class: "role" }, message.role + (message.tool_call_id ? ` (${message.tool_call_id})` : "")),
    message.content
      ? Array.isArray(message.content)
        ? message.content.map(contentPart)
        : el("pre", {}, typeof message.content === "string" ? message.content : pretty(message.content))
      : null,
    message.tool_calls ? el("pre", {}, pretty(message.tool_calls)) : null,
  );
}

/** A part of a user message with attachments: its text, or the image as the model was sent it (small, with its type and size). */
function contentPart(part) {
  if (part.type === "text") return el("pre", {}, part.text);
  const url = part.image_url?.url ?? "";
  const [, type = "image", data = ""] = /^data:([^;,]+)(?:;[^,]*)?,(.*)$/.exec(url) ?? [];
  const about = url.startsWith("data:")
    ? `image part: ${type}, ${formatNumber(Math.floor((data.length * 3) / 4) - (data.match(/=*$/)?.[0].length ?? 0))} bytes`
    : `image part: ${shorten(url, 80)}`;
  return el(
    "figure",
    { class: "image-part" },
    url.startsWith("data:") ? el("img", { src: url, alt: about }) : null,
    el("figcaption", {}, about),
  );
}
