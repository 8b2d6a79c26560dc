// One session in the trace viewer: its totals, the prompt-token chart with memory's folds marked,
// and its runs — each with its approvals, steps and output; a pipeline as one run whose stages
// open one by one; a specialist's run inside the step that called it.
import { api, describeCall, el, formatCost, formatMs, formatNumber, formatTime, shorten } from "./common.js";
import { groupStages, pipelineNameOf } from "./pipelines.js";
import { promptChart } from "./trace-chart.js";
import { runActions } from "./trace-run-actions.js";
import { nestedRun, stepsTable } from "./trace-steps.js";

/** Everything the page shows of a session: its runs (sub-agents' too), their steps, and the folds. */
export async function loadSession(sessionId) {
  const { runs, folds } = await api(`/api/sessions/${encodeURIComponent(sessionId)}/runs`);
  const steps = await Promise.all(
    runs.map((run) => api(`/api/runs/${encodeURIComponent(run.runId)}/steps`).then((answer) => answer.steps)),
  );
  return { runs, folds: folds ?? [], stepsOf: new Map(runs.map((run, index) => [run.runId, steps[index] ?? []])) };
}

export function renderSession(sessionId, { runs, folds, stepsOf }, { priced }) {
  const childrenOf = new Map();
  for (const run of runs)
    if (run.parentToolCallId)
      childrenOf.set(run.parentToolCallId, [...(childrenOf.get(run.parentToolCallId) ?? []), run]);
  const foldsAt = new Map();
  for (const fold of folds)
    if (fold.runId)
      foldsAt.set(`${fold.runId}:${fold.step}`, [...(foldsAt.get(`${fold.runId}:${fold.step}`) ?? []), fold]);
  const context = {
    childrenOf: (toolCallId) => childrenOf.get(toolCallId) ?? [],
    stepsOf: (runId) => stepsOf.get(runId) ?? [],
    foldsAt: (runId, step) => foldsAt.get(`${runId}:${step}`) ?? [],
  };
  // Sub-agents' tokens and cost are already counted in the runs they worked for.
  const groups = groupStages(runs);
  const own = groups.flat();
  const totals = own.reduce(
    (sum, run) => ({
      prompt: sum.prompt + run.promptTokens,
      completion: sum.completion + run.completionTokens,
      cost: sum.cost === null || run.cost === null ? null : sum.cost + run.cost,
    }),
    { prompt: 0, completion: 0, cost: 0 },
  );
  const chartGroups = groups.map((group, index) => ({
    label: `run ${index + 1}`,
    steps: group.flatMap((run) => context.stepsOf(run.runId).map((step) => ({ ...step, runId: run.runId }))),
  }));
  const foldCount = folds.length;
  return [
    el("h2", { tabindex: "-1" }, sessionId),
    el(
      "p",
      { class: "meta" },
      `${groups.length} run${groups.length === 1 ? "" : "s"} · ${formatNumber(totals.prompt)} prompt + ${formatNumber(totals.completion)} completion tokens · cost ${formatCost(totals.cost)}${foldCount ? ` · memory folded ${foldCount} time${foldCount === 1 ? "" : "s"}` : ""}`,
    ),
    priced
      ? null
      : el(
          "p",
          { class: "hint" },
          "Cost shows “—” where the model has no known price; GLASSBOX_PRICES can give it one.",
        ),
    promptChart(chartGroups, context.foldsAt),
    groups.map((group, index) =>
      group.length > 1 ? pipelineSection(group, index + 1, context) : runSection(group[0], index + 1, context),
    ),
  ];
}

function runSection(run, number, context) {
  const headingId = `run-heading-${run.runId}`;
  return el(
    "section",
    { class: "run", id: `run-${run.runId}`, "aria-labelledby": headingId },
    el(
      "h3",
      { id: headingId, tabindex: "-1" },
      `Run ${number}: `,
      el("q", {}, shorten(run.input.split("\nAttached: ")[0], 120)),
    ),
    attachmentList(run),
    runMeta(run, [run]),
    run.approvals.length
      ? el("ul", { class: "run-approvals", "aria-label": "Approvals" }, run.approvals.map(approvalLine))
      : null,
    feedbackList(run),
    stepsTable(run, `Steps of run ${number}`, context.stepsOf(run.runId), context),
    run.output ? el("div", { class: "run-output" }, el("h4", {}, "Output"), el("p", {}, run.output)) : null,
    run.done && context.stepsOf(run.runId).length > 0 ? runActions(run) : null,
  );
}

/** A pipeline: one run of the conversation, its stages nested in order, each openable. */
function pipelineSection(stages, number, context) {
  const [first] = stages;
  const last = stages.at(-1);
  const name = pipelineNameOf(first);
  const headingId = `run-heading-${first.runId}`;
  return el(
    "section",
    { class: "run pipeline", id: `run-${first.runId}`, "aria-labelledby": headingId },
    el(
      "h3",
      { id: headingId, tabindex: "-1" },
      `Run ${number}: pipeline${name ? ` ${name}` : ""} · `,
      el("q", {}, shorten(first.input, 100)),
    ),
    runMeta({ ...last, startedAt: first.startedAt, userId: first.userId }, stages),
    el("p", { class: "hint" }, `${stages.length} stages, each working on the answer of the one before.`),
    feedbackList(last),
    el(
      "ol",
      { class: "stages" },
      stages.map((stage, index) =>
        el("li", {}, nestedRun(stage, `Stage ${index + 1}`, context.stepsOf(stage.runId), context, "Input")),
      ),
    ),
    last.output ? el("div", { class: "run-output" }, el("h4", {}, "Output"), el("p", {}, last.output)) : null,
  );
}

/** Status, who, when, how long, steps, tokens and cost: of one run, or summed over a pipeline's stages. */
function runMeta(run, parts) {
  const duration = run.endedAt ? formatMs(Date.parse(run.endedAt) - Date.parse(run.startedAt)) : "still going";
  const sum = (field) => parts.reduce((total, part) => total + part[field], 0);
  const cost = parts.some((part) => part.cost === null) ? null : sum("cost");
  const steps = sum("steps");
  return el(
    "p",
    { class: "meta" },
    el("span", { class: `run-status status-${run.status}` }, run.status.replaceAll("_", " ")),
    ` · by ${run.userId} · ${formatTime(run.startedAt)} · ${duration} · ${steps} step${steps === 1 ? "" : "s"} · ${formatNumber(sum("promptTokens"))} prompt + ${formatNumber(sum("completionTokens"))} completion tokens · cost ${formatCost(cost)}${run.model ? ` · ${run.model}` : ""}${run.configuration ? ` · settings ${run.configuration}` : ""}${scheduleLabel(run.schedule)}`,
  );
}

/** What people said about the run's answer: each person's latest 👍 or 👎, who, when, and why if they said. */
function feedbackList(run) {
  const given = run.feedback ?? [];
  if (given.length === 0) return null;
  const up = given.filter((one) => one.rating === "up").length;
  return el(
    "div",
    { class: "run-feedback-block" },
    el("h4", {}, `Feedback: ${up} 👍 up · ${given.length - up} 👎 down`),
    el(
      "ul",
      { class: "run-feedback", "aria-label": "Feedback" },
      given.map((one) =>
        el(
          "li",
          { class: `feedback-${one.rating}` },
          `${one.rating === "up" ? "👍 up" : "👎 down"} by ${one.userId} · ${formatTime(one.at)} · ${one.source}`,
          one.reason ? [": ", el("q", {}, one.reason)] : null,
        ),
      ),
    ),
  );
}

function approvalLine(approval) {
  const outcome =
    approval.status === "pending"
      ? `waiting (expires ${formatTime(approval.expiresAt)})`
      : approval.decidedBy === "superseded"
        ? "no longer needed (the conversation moved on)"
        : approval.status === "expired"
          ? "expired: nobody decided in time"
          : `${approval.status} by ${approval.decidedBy} at ${formatTime(approval.decidedAt)}`;
  return el(
    "li",
    {},
    el("code", {}, describeCall(approval.tool, approval.arguments)),
    ` for ${approval.requester}: ${outcome}`,
  );
}

/** What was attached to the run's message and how the model was given each file: the input's "Attached:" lines (src/agent/attachments.ts). */
function attachmentList(run) {
  const lines = (run.input ?? "").split("\n").filter((line) => line.startsWith("Attached: "));
  return lines.length
    ? el(
        "ul",
        { class: "run-attachments", "aria-label": "Attachments" },
        lines.map((line) => el("li", {}, line)),
      )
    : null;
}

/** Which schedule made a run: its name (or id), when it runs, or that it was deleted since. */
function scheduleLabel(schedule) {
  if (!schedule) return "";
  const when = schedule.deleted ? "deleted since" : `${schedule.cron} ${schedule.timezone}`;
  return ` · on schedule ${schedule.name ?? schedule.id} (${when})`;
}
