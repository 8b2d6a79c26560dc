/**
 * Two runs side by side: each summed up (answer, stop reason, tool calls, tokens, cost, model time) and
 * step by step, and where they part: the first tool call that differs (same tool, same arguments, in
 * order) and the step on each side that made it, and whether the answers differ. Replay, eval and the
 * trace viewer's compare all read runs through this one comparison.
 */
import type { RunTrace, StepTrace } from "./trace.js";

/** A tool call as compared; `recorded` is false for a replay's call the recording could not answer. */
export interface ComparedCall {
  name: string;
  arguments: unknown;
  recorded?: boolean;
}

/** One model call of a run, as compared: what it cost and took, what it said, and which tools it called. */
export interface StepSummary {
  step: number;
  promptTokens: number;
  completionTokens: number;
  latencyMs: number;
  cost: number | null;
  /** What the model said in this step (empty when it only called tools). */
  said: string;
  toolCalls: ComparedCall[];
}

/** One side of the comparison. */
export interface RunSummary {
  output: string;
  stopReason: string;
  toolCalls: ComparedCall[];
  steps: number;
  promptTokens: number;
  completionTokens: number;
  cost: number | null;
  /** Time spent in model calls. */
  latencyMs: number;
  /** The steps, in order (absent in summaries written before steps were compared). */
  perStep?: StepSummary[];
}

/** Where two runs part. */
export interface Divergence {
  /** The same tools called with the same arguments, in the same order. */
  sameToolCalls: boolean;
  sameAnswer: boolean;
  /** The first tool call (from 1) where the two differ; null when they do not. */
  divergesAtCall: number | null;
  /** The step of each side (a, b) that made that call; null on a side that made no such call. */
  divergesAtStep: [number | null, number | null] | null;
}

export function compareSummaries(a: RunSummary, b: RunSummary): Divergence {
  const key = (call: ComparedCall) => `${call.name}\n${canonical(call.arguments)}`;
  const length = Math.max(a.toolCalls.length, b.toolCalls.length);
  let divergesAtCall: number | null = null;
  for (let index = 0; index < length; index++) {
    const left = a.toolCalls[index];
    const right = b.toolCalls[index];
    if (!left || !right || key(left) !== key(right)) {
      divergesAtCall = index + 1;
      break;
    }
  }
  return {
    sameToolCalls: divergesAtCall === null,
    sameAnswer: a.output.trim() === b.output.trim(),
    divergesAtCall,
    divergesAtStep: divergesAtCall === null ? null : [stepOfCall(a, divergesAtCall), stepOfCall(b, divergesAtCall)],
  };
}

/** The step that made a run's n-th tool call (from 1); null when the run made fewer calls or kept no steps. */
function stepOfCall(summary: RunSummary, call: number): number | null {
  let seen = 0;
  for (const step of summary.perStep ?? []) {
    seen += step.toolCalls.length;
    if (seen >= call) return step.step;
  }
  return null;
}

/** A recorded run as compared, from the trace. */
export function summaryOfRecorded(run: RunTrace, steps: StepTrace[]): RunSummary {
  const perStep = steps.map((step) => ({
    step: step.step,
    promptTokens: step.promptTokens,
    completionTokens: step.completionTokens,
    latencyMs: step.latencyMs,
    cost: step.cost,
    said: step.content ?? "",
    toolCalls: step.toolCalls.map((call) => ({ name: call.name, arguments: argumentsOf(call) })),
  }));
  return {
    output: run.output ?? "",
    stopReason: run.status,
    toolCalls: perStep.flatMap((step) => step.toolCalls),
    steps: steps.length,
    promptTokens: run.promptTokens,
    completionTokens: run.completionTokens,
    cost: run.cost,
    latencyMs: steps.reduce((sum, step) => sum + step.latencyMs, 0),
    perStep,
  };
}

/** A recorded call's arguments: as the handler got them, else the text the model sent (parsed when it parses). */
export function argumentsOf(call: { arguments?: unknown; rawArguments: string }): unknown {
  return call.arguments ?? parseOr(call.rawArguments);
}

/** JSON with object keys sorted, so {"a":1,"b":2} and {"b":2,"a":1} are the same call. */
export function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object") {
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonical((value as Record<string, unknown>)[key])}`)
      .join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

function parseOr(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}
