// What the side panel shows of a span: a model call's tokens, thinking, model-layer lines, answer,
// calls, guards' notes and what it saw; a tool call's arguments, repairs, result and approval; an
// approval's state; a fold's summary and the messages it replaced; a run's input, totals and answer.
import { el, formatCost, formatMs, formatNumber, formatTime, thinkingDetails } from "./common.js";
import { richText, valueView } from "./trace-render.js";
import { replacedSection, sentSection } from "./trace-sent.js";

/** `context.previousCall(runId, step)`: the model call before that one in the session ({runId, step}), or null. */
export function spanDetails(span, context) {
  if (span.kind === "model") return span.step ? modelDetails(span) : liveModelDetails(span);
  if (span.kind === "tool") return toolDetails(span);
  if (span.kind === "approval") return approvalDetails(span.approval);
  if (span.kind === "fold") return foldDetails(span, context);
  return runDetails(span);
}

function modelDetails({ run, step }) {
  return [
    el(
      "p",
      { class: "meta" },
      [
        `${formatNumber(step.promptTokens)} prompt + ${formatNumber(step.completionTokens)} completion tokens`,
        formatMs(step.latencyMs),
        `cost ${formatCost(step.cost)}`,
        `ended ${formatTime(step.at)}`,
      ].join(" · "),
    ),
    el(
      "p",
      { class: "context" },
      `Sent ${step.contextMessages} message${step.contextMessages === 1 ? "" : "s"}${step.contextTokens === null ? "" : ` (about ${formatNumber(step.contextTokens)} tokens by glassbox's count)`}${step.model ? ` to ${step.model}` : ""}`,
    ),
    step.reasoning ? thinkingDetails(step.reasoning, step.reasoningCutChars, "were not kept") : null,
    step.modelNotes.map((note) => [
      el("p", { class: "model-note" }, "Model layer: ", note),
      exchangeOf(step.modelExchanges?.find((exchange) => exchange.note === note)),
    ]),
    step.content ? [el("h3", {}, "It answered"), el("div", { class: "content" }, richText(step.content))] : null,
    step.requestedCalls?.length || step.toolCalls.length
      ? [
          el("h3", {}, "It called"),
          el(
            "ul",
            { class: "called" },
            (step.requestedCalls?.length ? step.requestedCalls : step.toolCalls).map((call) => {
              const ended = step.toolCalls.find((one) => one.id === call.id);
              const mark = !ended ? "…" : ended.envelope.status === "success" ? "✓" : "⚠";
              return el(
                "li",
                {},
                `${mark} `,
                el("code", {}, call.name),
                ended ? ` · ${formatMs(ended.durationMs)}` : "",
              );
            }),
          ),
        ]
      : null,
    step.notes.map((note) => el("p", { class: "note" }, "Note to the model: ", note)),
    sentSection(run.runId, step.step, step.step > 1 ? step.step - 1 : null),
  ];
}

function liveModelDetails({ start }) {
  return el("p", { class: "hint" }, `The model has been answering since ${formatTime(new Date(start).toISOString())}.`);
}

/** What a model-layer repair or refusal sent and what came back, under its note. */
function exchangeOf(exchange) {
  if (!exchange) return null;
  const part = (label, text) => (text ? [el("dt", {}, label), el("dd", {}, el("pre", {}, text))] : null);
  return el(
    "dl",
    { class: "model-exchange" },
    part("Sent", exchange.sent),
    part("Came back", exchange.received),
    part("Read as", exchange.readAs),
  );
}

function toolDetails({ call, requested, children }) {
  if (!call)
    return [el("p", { class: "hint" }, "Still running."), el("h3", {}, "Arguments"), valueView(requested.arguments)];
  const ok = call.envelope.status === "success";
  return [
    el(
      "p",
      { class: `meta tool-call ${ok ? "ok" : "failed"}` },
      el("span", { class: "mark", "aria-hidden": "true" }, ok ? "✓ " : "⚠ "),
      `${ok ? "succeeded" : `failed: ${call.envelope.error.type}`} · ${formatMs(call.durationMs)}${call.dangerous ? " · dangerous" : ""}`,
    ),
    el("h3", {}, "Arguments"),
    call.arguments ? valueView(call.arguments) : valueView(call.rawArguments),
    call.repairs.length
      ? [
          el("h3", {}, "Repairs"),
          el("p", {}, "The model sent ", el("code", {}, call.rawArguments)),
          el(
            "ul",
            {},
            call.repairs.map((repair) => el("li", {}, repair)),
          ),
        ]
      : null,
    el("h3", {}, "Result"),
    valueView(call.envelope),
    call.errorStack
      ? el(
          "details",
          { class: "error-stack", open: true },
          el("summary", {}, "Where it threw (for people; the model read the result above)"),
          el("pre", {}, call.errorStack),
        )
      : null,
    call.truncatedChars
      ? el("p", { class: "hint" }, `The model saw it cut by ${formatNumber(call.truncatedChars)} characters.`)
      : null,
    call.storedCutChars
      ? el("p", { class: "hint" }, `The trace kept it cut by ${formatNumber(call.storedCutChars)} characters.`)
      : null,
    call.approval
      ? el(
          "p",
          { class: "approval-decision" },
          `Approval: ${call.approval.approved ? "approved" : "denied"} by ${call.approval.by}${call.approval.reason ? ` (${call.approval.reason})` : ""}.`,
        )
      : null,
    children.length ? el("p", { class: "hint" }, "Its specialist's run is nested under it in the waterfall.") : null,
  ];
}

/** The call, for whom, and whether it waits (until when), was approved or denied (by whom, when), expired, or was superseded. */
export function approvalOutcome(approval) {
  if (approval.status === "pending") return `waiting (expires ${formatTime(approval.expiresAt)})`;
  if (approval.decidedBy === "superseded") return "no longer needed (the conversation moved on)";
  if (approval.status === "expired") return "expired: nobody decided in time";
  return `${approval.status} by ${approval.decidedBy} at ${formatTime(approval.decidedAt)}`;
}

function approvalDetails(approval) {
  return [
    el("p", {}, el("code", {}, approval.tool), ` for ${approval.requester}: ${approvalOutcome(approval)}`),
    approval.whoDecides ? el("p", { class: "hint" }, approval.whoDecides) : null,
    approval.approvedBy?.length
      ? el("p", {}, `Approved so far by ${approval.approvedBy.join(", ")} (${approval.approvalsNeeded} needed).`)
      : null,
    el("h3", {}, "Arguments"),
    valueView(approval.arguments),
  ];
}

/** The summarising call's own cost, counted in the run's totals; older summaries did not keep it. */
function summaryCallText(call) {
  if (!call) return "That call's own tokens and cost were not kept (a summary written by an older glassbox).";
  return `That call (${call.model}) took ${formatNumber(call.promptTokens)} prompt and ${formatNumber(call.completionTokens)} completion tokens (${call.cost === null ? "no known price for this model" : formatCost(call.cost)}), counted in this run's totals.`;
}

function foldDetails({ fold, run, step }, context) {
  const folded = `${formatNumber(fold.foldedMessages)} older message${fold.foldedMessages === 1 ? "" : "s"}`;
  return [
    el(
      "p",
      { class: "fold-title" },
      el("span", { class: "fold-key", "aria-hidden": "true" }, "▼"),
      fold.summaryFailed
        ? `Memory dropped ${folded} before model call ${step.step}: the summary could not be written`
        : `Memory folded ${folded} into a summary before model call ${step.step}`,
    ),
    el(
      "p",
      { class: "hint" },
      fold.summaryFailed
        ? "The summarising call failed (the server log says why), so the summary stayed as it was."
        : `At ${formatTime(fold.at)} a separate call to the model summarised them: the summary is about ${formatNumber(fold.summaryTokens)} tokens (glassbox's count) and rides in the system message from here on. ${summaryCallText(fold.call)}`,
    ),
    fold.summary ? el("div", { class: "fold-summary" }, el("h3", {}, "Summary"), richText(fold.summary)) : null,
    replacedSection(fold, { runId: run.runId, step: step.step }, context.previousCall(run.runId, step.step)),
  ];
}

function runDetails(span) {
  const { run } = span;
  const last = span.runs?.at(-1) ?? run;
  const label = span.kind === "specialist" ? "Task" : span.kind === "stage" ? "Input" : "Request";
  const duration = span.end === null ? "still going" : formatMs(span.end - span.start);
  const steps = (span.runs ?? [run]).reduce((sum, one) => sum + one.steps, 0);
  return [
    el(
      "p",
      { class: "meta" },
      [
        last.status.replaceAll("_", " "),
        `${steps} step${steps === 1 ? "" : "s"}`,
        `by ${run.userId}`,
        formatTime(run.startedAt),
        duration,
        `${formatNumber(span.promptTokens)} prompt + ${formatNumber(span.completionTokens)} completion tokens`,
        `cost ${formatCost(span.cost)}`,
        last.model,
      ]
        .filter(Boolean)
        .join(" · "),
    ),
    el("p", { class: "run-input" }, `${label}: `, el("q", {}, run.input)),
    last.output ? [el("h3", {}, "Answer"), el("div", { class: "run-answer" }, richText(last.output))] : null,
  ];
}
