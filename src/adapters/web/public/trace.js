// The trace viewer: every session in the store (from every adapter), and for one session its runs
// as a timeline of steps — tokens, latency and cost per step, the model's messages (loaded on
// demand), its thinking (collapsed), what the model layer did to make its reply usable, tool calls
// with their arguments, repairs and results, the guards' notes — and a chart of prompt tokens per
// step, where memory's compression shows as a drop.
import { $, api, describeCall, el, formatCost, formatMs, formatNumber, formatTime, pretty, shorten, svg, thinkingDetails } from "./common.js";

const dom = {
  sessions: $("#sessions"),
  detail: $("#session-detail"),
  model: $("#model-label"),
  refresh: $("#refresh"),
};
let priced = true;

dom.refresh.addEventListener("click", () => void refresh());
addEventListener("hashchange", () => void showSelected());
void start();

async function start() {
  try {
    const info = await api("/api/info");
    dom.model.textContent = info.model;
    priced = info.priced;
  } catch (error) {
    dom.model.textContent = error.message;
  }
  await refresh();
}

async function refresh() {
  await loadSessions();
  await showSelected();
}

function selected() {
  const params = new URLSearchParams(location.hash.slice(1));
  return { session: params.get("session"), run: params.get("run") };
}

async function loadSessions() {
  const { sessions } = await api("/api/sessions");
  const current = selected().session;
  dom.sessions.replaceChildren(
    ...sessions.map((session) =>
      el(
        "li",
        {},
        el(
          "a",
          { href: `#session=${encodeURIComponent(session.id)}`, "aria-current": session.id === current ? "true" : false, "data-session-id": session.id },
          el("span", { class: `adapter adapter-${session.adapter}` }, session.adapter),
          el("span", { class: "session-id" }, session.id.slice(session.adapter.length + 1) || session.id),
          el("span", { class: "session-meta" }, `${session.runCount} run${session.runCount === 1 ? "" : "s"} · ${formatNumber(session.promptTokens + session.completionTokens)} tokens · ${formatCost(session.cost)}`),
        ),
      ),
    ),
  );
  if (sessions.length === 0) dom.sessions.append(el("li", { class: "empty" }, "No sessions yet: send a message on the chat page."));
}

async function showSelected() {
  const { session, run } = selected();
  for (const link of dom.sessions.querySelectorAll("a")) {
    if (link.dataset.sessionId === session) link.setAttribute("aria-current", "true");
    else link.removeAttribute("aria-current");
  }
  if (!session) return;
  dom.detail.replaceChildren(el("p", { class: "empty" }, "Loading…"));
  try {
    const { runs } = await api(`/api/sessions/${encodeURIComponent(session)}/runs`);
    const steps = await Promise.all(runs.map((one) => api(`/api/runs/${encodeURIComponent(one.runId)}/steps`).then((answer) => answer.steps)));
    renderSession(session, runs, steps);
  } catch (error) {
    dom.detail.replaceChildren(el("p", { class: "error", role: "alert" }, error.message));
    return;
  }
  // Focus follows the choice (for keyboards and screen readers); a chosen run is scrolled to.
  const target = run ? document.getElementById(`run-${run}`) : null;
  const heading = (target ?? dom.detail).querySelector("h2, h3");
  heading?.focus({ preventScroll: true });
  target?.scrollIntoView({ block: "start" });
}

// A sub-agent's run is drawn inside the tool call that started it, not as a run of its own.
let nested = { childrenOf: new Map(), stepsOf: new Map() };

function renderSession(sessionId, allRuns, allSteps) {
  const stepsOf = new Map(allRuns.map((run, index) => [run.runId, allSteps[index] ?? []]));
  const childrenOf = new Map();
  for (const run of allRuns) if (run.parentToolCallId) childrenOf.set(run.parentToolCallId, [...(childrenOf.get(run.parentToolCallId) ?? []), run]);
  nested = { childrenOf, stepsOf };
  // Sub-agents' tokens and cost are already counted in the runs they worked for.
  const runs = allRuns.filter((run) => !run.parentRunId);
  const stepsByRun = runs.map((run) => stepsOf.get(run.runId) ?? []);
  const totals = runs.reduce(
    (sum, run) => ({ prompt: sum.prompt + run.promptTokens, completion: sum.completion + run.completionTokens, cost: sum.cost === null || run.cost === null ? null : sum.cost + run.cost }),
    { prompt: 0, completion: 0, cost: 0 },
  );
  dom.detail.replaceChildren(
    el("h2", { tabindex: "-1" }, sessionId),
    el("p", { class: "meta" }, `${runs.length} run${runs.length === 1 ? "" : "s"} · ${formatNumber(totals.prompt)} prompt + ${formatNumber(totals.completion)} completion tokens · cost ${formatCost(totals.cost)}`),
    priced ? null : el("p", { class: "hint" }, "Cost shows “—” where the model has no known price; GLASSBOX_PRICES can give it one."),
    promptChart(runs, stepsByRun),
    ...runs.map((run, index) => runSection(run, index + 1, stepsByRun[index] ?? [])),
  );
}

/** Prompt tokens per step, run after run: steady growth is the whole conversation being re-sent; a drop is compression. */
function promptChart(runs, stepsByRun) {
  const points = runs.flatMap((run, index) => (stepsByRun[index] ?? []).map((step) => ({ run: index + 1, step: step.step, tokens: step.promptTokens })));
  if (points.length === 0) return el("p", { class: "empty" }, "No steps recorded yet.");
  const max = Math.max(...points.map((point) => point.tokens), 1);
  const bar = 22;
  const gap = 8;
  const runGap = 18;
  const left = 56;
  const top = 22;
  const plot = 160;
  const height = top + plot + 34;
  let x = left + gap;
  let previousRun = 0;
  const bars = [];
  const runLabels = [];
  for (const point of points) {
    if (point.run !== previousRun) {
      if (previousRun !== 0) {
        x += runGap;
        runLabels.push(svg("line", { class: "run-separator", x1: x - runGap / 2 - gap / 2, x2: x - runGap / 2 - gap / 2, y1: top - 12, y2: top + plot }));
      }
      runLabels.push(svg("text", { class: "run-label", x, y: top - 8 }, `run ${point.run}`));
      previousRun = point.run;
    }
    const barHeight = Math.max(1, Math.round((point.tokens / max) * plot));
    bars.push(
      svg(
        "rect",
        { class: "bar", x, y: top + plot - barHeight, width: bar, height: barHeight, rx: 2, "data-run": point.run, "data-step": point.step, "data-tokens": point.tokens },
        svg("title", {}, `Run ${point.run}, step ${point.step}: ${formatNumber(point.tokens)} prompt tokens`),
      ),
      svg("text", { class: "step-label", x: x + bar / 2, y: top + plot + 16, "text-anchor": "middle" }, String(point.step)),
    );
    x += bar + gap;
  }
  const width = Math.max(x + gap, 320);
  const grid = [0, 0.5, 1].map((fraction) => {
    const y = top + plot - fraction * plot;
    return [
      svg("line", { class: "grid", x1: left, x2: width, y1: y, y2: y }),
      svg("text", { class: "axis-label", x: left - 6, y: y + 4, "text-anchor": "end" }, formatNumber(Math.round(max * fraction))),
    ];
  });
  const description = points.map((point) => `run ${point.run} step ${point.step}: ${point.tokens}`).join("; ");
  const chart = svg(
    "svg",
    { class: "chart", viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-labelledby": "chart-title chart-desc" },
    svg("title", { id: "chart-title" }, "Prompt tokens per step"),
    svg("desc", { id: "chart-desc" }, description),
    grid,
    runLabels,
    bars,
    svg("text", { class: "axis-label", x: left, y: height - 4 }, "step"),
  );
  return el(
    "figure",
    { class: "chart-figure" },
    el("div", { class: "chart-scroll" }, chart),
    el("figcaption", {}, "Prompt tokens per step, run after run. Growth is the conversation being sent again each step; a drop is memory folding older turns into a summary."),
  );
}

function runSection(run, number, steps) {
  const duration = run.endedAt ? formatMs(Date.parse(run.endedAt) - Date.parse(run.startedAt)) : "still going";
  const headingId = `run-heading-${run.runId}`;
  return el(
    "section",
    { class: "run", id: `run-${run.runId}`, "aria-labelledby": headingId },
    el("h3", { id: headingId, tabindex: "-1" }, `Run ${number}: `, el("q", {}, shorten(run.input, 120))),
    el(
      "p",
      { class: "meta" },
      el("span", { class: `run-status status-${run.status}` }, run.status.replaceAll("_", " ")),
      ` · by ${run.userId} · ${formatTime(run.startedAt)} · ${duration} · ${run.steps} step${run.steps === 1 ? "" : "s"} · ${formatNumber(run.promptTokens)} prompt + ${formatNumber(run.completionTokens)} completion tokens · cost ${formatCost(run.cost)}${run.model ? ` · ${run.model}` : ""}`,
    ),
    run.approvals.length ? el("ul", { class: "run-approvals", "aria-label": "Approvals" }, run.approvals.map(approvalLine)) : null,
    steps.length ? stepsTable(run, number, steps) : el("p", { class: "empty" }, "No model call recorded for this run."),
    run.output ? el("div", { class: "run-output" }, el("h4", {}, "Output"), el("p", {}, run.output)) : null,
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
  return el("li", {}, el("code", {}, describeCall(approval.tool, approval.arguments)), ` for ${approval.requester}: ${outcome}`);
}

function stepsTable(run, number, steps) {
  return el(
    "table",
    { class: "steps" },
    el("caption", { class: "visually-hidden" }, `Steps of run ${number}`),
    el(
      "thead",
      {},
      el("tr", {}, el("th", { scope: "col" }, "Step"), el("th", { scope: "col", class: "num" }, "Prompt tokens"), el("th", { scope: "col", class: "num" }, "Completion tokens"), el("th", { scope: "col", class: "num" }, "Latency"), el("th", { scope: "col", class: "num" }, "Cost"), el("th", { scope: "col" }, "What happened")),
    ),
    el("tbody", {}, steps.map((step) => stepRow(run, step))),
  );
}

function stepRow(run, step) {
  const sent = `Sent ${step.contextMessages} message${step.contextMessages === 1 ? "" : "s"}${step.contextTokens === null ? "" : ` (about ${formatNumber(step.contextTokens)} tokens by glassbox's count)`}`;
  const payload = el("details", { class: "payload-details" }, el("summary", {}, `Model messages (${step.contextMessages}): exactly what was sent`));
  payload.addEventListener("toggle", () => void loadPayload(payload, run.runId, step.step), { once: true });
  return el(
    "tr",
    { class: "step", "data-step": step.step, "data-prompt-tokens": step.promptTokens, "data-completion-tokens": step.completionTokens },
    el("th", { scope: "row" }, String(step.step)),
    el("td", { class: "num prompt-tokens" }, formatNumber(step.promptTokens)),
    el("td", { class: "num completion-tokens" }, formatNumber(step.completionTokens)),
    el("td", { class: "num" }, formatMs(step.latencyMs)),
    el("td", { class: "num" }, formatCost(step.cost)),
    el(
      "td",
      { class: "what" },
      el("p", { class: "context" }, sent),
      step.reasoning ? thinkingDetails(step.reasoning, step.reasoningCutChars, "were not kept") : null,
      step.modelNotes.map((note) => el("p", { class: "model-note" }, "Model layer: ", note)),
      step.content ? el("p", { class: "content" }, step.content) : null,
      step.toolCalls.map(toolDetails),
      step.notes.map((note) => el("p", { class: "note" }, "Note to the model: ", note)),
      payload,
    ),
  );
}

function toolDetails(call) {
  const ok = call.envelope.status === "success";
  return el(
    "details",
    { class: `tool-call ${ok ? "ok" : "failed"}` },
    el("summary", {}, el("span", { class: "mark", "aria-hidden": "true" }, ok ? "✓" : "⚠"), `${describeCall(call.name, call.arguments ?? {})} · ${formatMs(call.durationMs)}${ok ? "" : ` · ${call.envelope.error.type}`}`),
    el("h4", {}, "Arguments"),
    el("pre", {}, call.arguments ? pretty(call.arguments) : call.rawArguments),
    call.repairs.length
      ? [el("h4", {}, "Repairs"), el("p", {}, "The model sent ", el("code", {}, call.rawArguments)), el("ul", {}, call.repairs.map((repair) => el("li", {}, repair)))]
      : null,
    el("h4", {}, "Result"),
    el("pre", {}, pretty(call.envelope)),
    call.truncatedChars ? el("p", { class: "hint" }, `The model saw it cut by ${formatNumber(call.truncatedChars)} characters.`) : null,
    call.approval ? el("p", {}, `Approval: ${call.approval.approved ? "approved" : "denied"} by ${call.approval.by}${call.approval.reason ? ` (${call.approval.reason})` : ""}.`) : null,
    (nested.childrenOf.get(call.id) ?? []).map(subRun),
  );
}

/** A sub-agent's run, inside the tool call that asked for it: its own steps, tokens and cost. */
function subRun(run) {
  return el(
    "section",
    { class: "sub-run", "aria-label": `Sub-agent run: ${shorten(run.input, 40)}` },
    el("h4", {}, `Sub-agent run · ${run.status.replaceAll("_", " ")} · ${run.steps} step${run.steps === 1 ? "" : "s"} · ${formatNumber(run.promptTokens)} prompt + ${formatNumber(run.completionTokens)} completion tokens · cost ${formatCost(run.cost)}${run.model ? ` · ${run.model}` : ""}`),
    el("p", {}, "Task: ", el("q", {}, shorten(run.input, 200))),
    stepsTable(run, "sub", nested.stepsOf.get(run.runId) ?? []),
    run.output ? el("p", {}, "Answer: ", run.output) : null,
  );
}



async function loadPayload(details, runId, step) {
  const body = el("div", { class: "payload-body" }, el("p", {}, "Loading…"));
  details.append(body);
  try {
    const { messages } = await api(`/api/runs/${encodeURIComponent(runId)}/steps/${step}/payload`);
    body.replaceChildren(
      el(
        "ol",
        { class: "payload-messages" },
        messages.map((message) =>
          el(
            "li",
            { class: `payload-message role-${message.role}` },
            el("span", { class: "role" }, message.role + (message.tool_call_id ? ` (${message.tool_call_id})` : "")),
            message.content ? el("pre", {}, message.content) : null,
            message.tool_calls ? el("pre", {}, pretty(message.tool_calls)) : null,
          ),
        ),
      ),
    );
  } catch (error) {
    body.replaceChildren(el("p", { class: "error", role: "alert" }, error.message));
  }
}
