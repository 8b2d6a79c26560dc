// One session in the trace viewer: its totals, the prompt-token chart with memory's folds marked,
// and its runs — each with its request, files, approvals, feedback, a waterfall of its spans
// (trace-waterfall), its output and Replay; a pipeline as one run whose stages are spans in it.
import { api, describeCall, el, formatCost, formatMs, formatNumber, formatTime, shorten } from "./common.js";
import { groupStages, pipelineNameOf } from "./pipelines.js";
import { promptChart } from "./trace-chart.js";
import { approvalOutcome } from "./trace-details.js";
import { richText } from "./trace-render.js";
import { runActions } from "./trace-run-actions.js";
import { flatten, groupSpan } from "./trace-spans.js";
import { waterfall } from "./trace-waterfall.js";

/** Everything the page shows of a session: its runs (sub-agents' too), their steps, and the folds. */
export async function loadSession(sessionId) {
  const { runs, folds, title, placeName, userName, startedBy } = await api(
    `/api/sessions/${encodeURIComponent(sessionId)}/runs`,
  );
  const steps = await Promise.all(
    runs.map((run) => api(`/api/runs/${encodeURIComponent(run.runId)}/steps`).then((answer) => answer.steps)),
  );
  return {
    runs,
    folds: folds ?? [],
    stepsOf: new Map(runs.map((run, index) => [run.runId, steps[index] ?? []])),
    names: { title, placeName, userName, startedBy },
  };
}

/**
 * The session's elements, and its spans by key. `view`: `{ priced, state, open(span, row) }` where
 * `state` keeps which spans are open and which is chosen across renders (a live run re-renders).
 */
export function renderSession(sessionId, { runs, folds, stepsOf, names = {} }, view) {
  const childrenOf = new Map();
  for (const run of runs)
    if (run.parentToolCallId)
      childrenOf.set(run.parentToolCallId, [...(childrenOf.get(run.parentToolCallId) ?? []), run]);
  const foldsAt = new Map();
  for (const fold of folds)
    if (fold.runId)
      foldsAt.set(`${fold.runId}:${fold.step}`, [...(foldsAt.get(`${fold.runId}:${fold.step}`) ?? []), fold]);
  // Sub-agents' tokens and cost are already counted in the runs they worked for.
  const groups = groupStages(runs);
  const context = {
    childrenOf: (toolCallId) => childrenOf.get(toolCallId) ?? [],
    stepsOf: (runId) => stepsOf.get(runId) ?? [],
    foldsAt: (runId, step) => foldsAt.get(`${runId}:${step}`) ?? [],
    previousCall: previousCallIn(groups.flat(), (runId) => stepsOf.get(runId) ?? []),
  };
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
  const spans = new Map();
  const now = Date.now();
  const sections = groups.map((group, index) => {
    const root = groupSpan(group, index + 1, context, now);
    for (const { span } of flatten(root)) spans.set(span.key, span);
    const tree = waterfall(root, `Spans of run ${index + 1}`, view.state, (span, row) => view.open(span, row), now);
    const section =
      group.length > 1 ? pipelineSection(group, index + 1, root, tree) : runSection(group[0], index + 1, root, tree);
    section.dataset.version = versionOf(root, context);
    return section;
  });
  const nodes = [
    el("h2", { tabindex: "-1", title: sessionId }, names.title ?? sessionId),
    names.placeName
      ? el(
          "p",
          { class: "session-place", title: [sessionId, names.startedBy].filter(Boolean).join(" · ") },
          `${names.placeName}${names.userName && !names.placeName.includes(names.userName) ? ` · started by ${names.userName}` : ""}`,
        )
      : null,
    el(
      "p",
      { class: "meta" },
      `${groups.length} run${groups.length === 1 ? "" : "s"} · ${formatNumber(totals.prompt)} prompt + ${formatNumber(totals.completion)} completion tokens · cost ${formatCost(totals.cost)}${foldCount ? ` · memory folded ${foldCount} time${foldCount === 1 ? "" : "s"}` : ""}`,
    ),
    view.priced
      ? null
      : el(
          "p",
          { class: "hint" },
          "Cost shows “—” where the model has no known price; GLASSBOX_PRICES can give it one.",
        ),
    promptChart(chartGroups, context.foldsAt),
    groups.length
      ? el(
          "p",
          { class: "hint keys" },
          "Each run is a waterfall of its spans, to scale in time. Choose a span to read it; with the keyboard, ",
          el("kbd", {}, "↑"),
          el("kbd", {}, "↓"),
          " (or ",
          el("kbd", {}, "k"),
          el("kbd", {}, "j"),
          ") move, ",
          el("kbd", {}, "→"),
          el("kbd", {}, "←"),
          " open and close, ",
          el("kbd", {}, "Enter"),
          " reads, ",
          el("kbd", {}, "Esc"),
          " closes.",
        )
      : null,
    sections,
  ];
  return { nodes, spans, context };
}

/** What a run's section is drawn from: a live update leaves a section alone while this stays the same. */
function versionOf(root, context) {
  const spans = flatten(root).map(({ span }) => span);
  const runs = spans.map((span) => span.run).filter((run, index, all) => all.indexOf(run) === index);
  return JSON.stringify([runs, runs.map((run) => context.stepsOf(run.runId)), spans.map((span) => span.key)]);
}

/** The model call before a step in the session: the run's step before, or the last of the run before it. */
function previousCallIn(ownRuns, stepsOf) {
  return (runId, step) => {
    if (step > 1) return { runId, step: step - 1 };
    const index = ownRuns.findIndex((run) => run.runId === runId);
    for (let at = index - 1; at >= 0; at--) {
      const last = stepsOf(ownRuns[at].runId).at(-1);
      if (last) return { runId: ownRuns[at].runId, step: last.step };
    }
    return null;
  };
}

function runSection(run, number, root, tree) {
  const headingId = `run-heading-${run.runId}`;
  return el(
    "section",
    { class: "run", id: `run-${run.runId}`, "aria-labelledby": headingId },
    el(
      "h3",
      { id: headingId, tabindex: "-1" },
      `Run ${number}: `,
      el("q", { title: run.input.slice(0, 2000) }, shorten(run.title ?? run.input.split("\nAttached: ")[0], 120)),
    ),
    attachmentList(run),
    runMeta(run, [run]),
    approvalList(root),
    feedbackList(run),
    tree,
    run.output ? el("div", { class: "run-output" }, el("h4", {}, "Output"), richText(run.output)) : null,
    run.done && root.children.some((span) => span.kind === "model" && span.step) ? runActions(run) : null,
  );
}

/** A pipeline: one run of the conversation, its stages in order, each openable in the waterfall. */
function pipelineSection(stages, number, root, tree) {
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
    approvalList(root),
    feedbackList(last),
    tree,
    last.output ? el("div", { class: "run-output" }, el("h4", {}, "Output"), richText(last.output)) : null,
  );
}

/** Every approval asked in the run, its specialists' and stages' too. */
function approvalList(root) {
  const approvals = flatten(root)
    .map(({ span }) => span.approval)
    .filter(Boolean);
  return approvals.length
    ? el("ul", { class: "run-approvals", "aria-label": "Approvals" }, approvals.map(approvalLine))
    : null;
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
    ` · by ${run.userName ?? run.userId}${run.userName ? ` (${run.userId})` : ""} · ${formatTime(run.startedAt)} · ${duration} · ${steps} step${steps === 1 ? "" : "s"} · ${formatNumber(sum("promptTokens"))} prompt + ${formatNumber(sum("completionTokens"))} completion tokens · cost ${formatCost(cost)}${run.model ? ` · ${run.model}` : ""}${run.configuration ? ` · settings ${run.configuration}` : ""}${scheduleLabel(run.schedule)}`,
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
  return el(
    "li",
    {},
    el("code", {}, describeCall(approval.tool, approval.arguments)),
    ` for ${approval.requester}: ${approvalOutcome(approval)}`,
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
