// A run as a tree of spans for the waterfall: the run (or a pipeline and its stages), its model
// calls, memory's folds, tool calls, approvals waiting and the specialists' runs under the calls
// that started them. Times are what the trace keeps: a step's end (`at`) and latency, a call's
// duration (it starts when its model call ended, or when its approval was decided), a run's start
// and end, an approval's decision.
import { describeCall, formatNumber } from "./common.js";
import { pipelineNameOf } from "./pipelines.js";

/**
 * `context`: `stepsOf(runId)`, `childrenOf(toolCallId)` (the specialists' runs a call started) and
 * `foldsAt(runId, step)`; `now` is used for what is still going.
 */
export function groupSpan(group, number, context, now = Date.now()) {
  if (group.length === 1) return runSpan(group[0], `Run ${number}`, "run", context, now);
  const [first] = group;
  const name = pipelineNameOf(first);
  const stages = group.map((stage, index) => runSpan(stage, `Stage ${index + 1}`, "stage", context, now));
  return summed({
    key: `pipeline:${first.runId}`,
    kind: "pipeline",
    label: `Run ${number}: pipeline${name ? ` ${name}` : ""}`,
    start: stages[0].start,
    end: stages.some((stage) => stage.end === null) ? null : Math.max(...stages.map((stage) => stage.end)),
    status: group.at(-1).status,
    run: first,
    runs: group,
    children: stages,
  });
}

function runSpan(run, label, kind, context, now) {
  const children = [];
  const steps = context.stepsOf(run.runId);
  const approvals = new Map((run.approvals ?? []).map((approval) => [approval.toolCallId, approval]));
  for (const step of steps) {
    const modelEnd = Date.parse(step.at);
    const modelStart = modelEnd - (step.latencyMs ?? 0);
    const folds = context.foldsAt(run.runId, step.step);
    folds.forEach((fold, index) => {
      children.push(foldSpan(run, step, fold, index, modelStart));
    });
    children.push({
      key: `model:${run.runId}:${step.step}`,
      kind: "model",
      label: `Model call ${step.step}`,
      start: modelStart,
      end: modelEnd,
      status: step.toolCalls.some((call) => call.envelope.status !== "success") ? "warned" : "ok",
      folded: folds.length > 0,
      promptTokens: step.promptTokens,
      completionTokens: step.completionTokens,
      cost: step.cost,
      run,
      step,
      children: [],
    });
    children.push(...callSpans(run, step, modelEnd, approvals, context, now));
  }
  const live = run.endedAt === null && run.status === "running" && nothingRunning(steps);
  if (live) {
    // The model is answering: its step is written when it ends.
    const last = steps.at(-1);
    const from = last ? Math.max(...children.map((child) => child.end ?? now)) : Date.parse(run.startedAt);
    children.push({
      key: `model:${run.runId}:${(last?.step ?? 0) + 1}`,
      kind: "model",
      label: `Model call ${(last?.step ?? 0) + 1}`,
      start: Math.min(from, now),
      end: null,
      status: "running",
      run,
      children: [],
    });
  }
  return {
    key: `run:${run.runId}`,
    kind,
    label,
    start: Date.parse(run.startedAt),
    end: run.endedAt ? Date.parse(run.endedAt) : null,
    status: run.status,
    // A run's own totals already count its specialists' tokens and the summaries memory wrote.
    promptTokens: run.promptTokens,
    completionTokens: run.completionTokens,
    cost: run.cost,
    run,
    children,
  };
}

/** Whether every call the last step asked for has ended (then the next model call is under way). */
function nothingRunning(steps) {
  const last = steps.at(-1);
  if (!last) return true;
  const ended = new Set(last.toolCalls.map((call) => call.id));
  return (last.requestedCalls ?? []).every((call) => ended.has(call.id));
}

function foldSpan(run, step, fold, index, modelStart) {
  const at = Math.min(Date.parse(fold.at), modelStart);
  const folded = `${formatNumber(fold.foldedMessages)} message${fold.foldedMessages === 1 ? "" : "s"}`;
  return {
    key: `fold:${run.runId}:${step.step}:${index}`,
    kind: "fold",
    label: fold.summaryFailed ? `Memory dropped ${folded}` : `Memory folded ${folded}`,
    start: at,
    end: modelStart,
    status: fold.summaryFailed ? "warned" : "ok",
    promptTokens: fold.call?.promptTokens,
    completionTokens: fold.call?.completionTokens,
    cost: fold.call ? fold.call.cost : undefined,
    run,
    step,
    fold,
    children: [],
  };
}

/** The calls of a step: each ended call, an approval before it where one was asked, and calls still going. */
function callSpans(run, step, modelEnd, approvals, context, now) {
  const spans = [];
  const ended = new Map(step.toolCalls.map((call) => [call.id, call]));
  const requested = step.requestedCalls?.length ? step.requestedCalls : step.toolCalls;
  for (const asked of requested) {
    const call = ended.get(asked.id);
    const approval = approvals.get(asked.id);
    let start = modelEnd;
    if (approval) {
      const decided = approval.decidedAt ? Date.parse(approval.decidedAt) : null;
      spans.push(approvalSpan(run, approval, modelEnd, decided));
      if (decided) start = Math.max(start, decided);
    }
    const children = context
      .childrenOf(asked.id)
      .map((child) => runSpan(child, `${asked.name.replace(/^agent_/, "")}'s run`, "specialist", context, now));
    if (children[0]) start = Math.min(start, children[0].start);
    if (!call && approval?.status === "pending") continue; // it runs once decided
    const args = call?.arguments ?? parsed(asked.arguments);
    spans.push({
      key: `tool:${asked.id}`,
      kind: "tool",
      label: describeCall(asked.name, args),
      start,
      end: call ? start + call.durationMs : null,
      status: call ? (call.envelope.status === "success" ? "ok" : "failed") : "running",
      run,
      step,
      call,
      requested: asked,
      children,
    });
  }
  return spans;
}

function approvalSpan(run, approval, requestedAt, decidedAt) {
  const outcome = approval.status === "pending" ? "waiting" : approval.status;
  const end = decidedAt ?? (approval.status === "pending" ? null : Date.parse(approval.expiresAt));
  return {
    key: `approval:${approval.id}`,
    kind: "approval",
    label: `Approval of ${approval.tool}: ${outcome}`,
    start: requestedAt,
    end: end === null ? null : Math.max(end, requestedAt),
    status: approval.status === "pending" ? "waiting" : approval.status === "approved" ? "ok" : "failed",
    run,
    approval,
    children: [],
  };
}

function parsed(text) {
  try {
    const value = JSON.parse(text);
    return value && typeof value === "object" && !Array.isArray(value) ? value : {};
  } catch {
    return {};
  }
}

/** A pipeline's tokens and cost: its stages' sum (a cost unknown when any stage's is). */
function summed(span) {
  const parts = span.children;
  const add = (field) => parts.reduce((total, part) => total + (part[field] ?? 0), 0);
  return {
    ...span,
    promptTokens: add("promptTokens"),
    completionTokens: add("completionTokens"),
    cost: parts.some((part) => part.cost === null) ? null : add("cost"),
  };
}

/** Every span of a tree, depth first, with its depth and parent key. */
export function flatten(root) {
  const all = [];
  const walk = (span, depth, parent) => {
    all.push({ span, depth, parent });
    for (const child of span.children) walk(child, depth + 1, span.key);
  };
  walk(root, 0, null);
  return all;
}
