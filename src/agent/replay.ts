/**
 * Every run is a test case: a recorded run re-run from its exact recorded context (the messages and
 * tools its first step sent) against another model or system prompt. Tools never run in a replay:
 * a call is answered with the recorded result when the run made the same call (name and
 * arguments), and refused as "not recorded" otherwise; a dangerous tool is answered the same way,
 * never run, and never waits for a person. The two runs come back side by side.
 */
import type { ToolCallRecord, ToolDefinition } from "../tools/types.js";
import { createToolRegistry } from "../tools/registry.js";
import { GlassboxError } from "./errors.js";
import type { AgentEvent } from "./events.js";
import { DEFAULT_SYSTEM_PROMPT, runAgent } from "./loop.js";
import type { RunResult } from "./run.js";
import type { RecordedRequest } from "./contracts.js";
import type { RunTrace, StepTrace } from "./trace.js";
import { textOf, type ChatModel, type Message, type ToolSpec } from "./types.js";

/** What a replay reads of a recorded run (the trace reader has these). */
export interface RecordedRuns {
  run(runId: string): RunTrace | undefined;
  steps(runId: string): StepTrace[];
  payload(runId: string, step: number): RecordedRequest | Message[] | undefined;
}

export interface ReplayOptions {
  model: ChatModel;
  /** Replaces the recorded system prompt. */
  systemPrompt?: string;
  /** Tool definitions to offer instead of the recorded ones (their schemas and descriptions; handlers are never called). */
  tools?: ToolSpec[];
  maxSteps?: number;
}

/** One side of the comparison. */
export interface RunSummary {
  output: string;
  stopReason: string;
  toolCalls: Array<{ name: string; arguments: unknown; recorded?: boolean }>;
  steps: number;
  promptTokens: number;
  completionTokens: number;
  cost: number | null;
  /** Time spent in model calls. */
  latencyMs: number;
}

export interface ReplayComparison {
  runId: string;
  replayRunId: string;
  original: RunSummary;
  replay: RunSummary;
  /** The same tools called with the same arguments, in the same order. */
  sameToolCalls: boolean;
  sameAnswer: boolean;
  /** The first tool call (from 1) where the two differ; null when they do not. */
  divergesAtCall: number | null;
  /** Calls the replay made that the recorded run did not (answered "not recorded"). */
  notRecorded: number;
}

export const NOT_RECORDED =
  "not recorded: the recorded run made no such call (same tool, same arguments), and a replay runs no tools";

export async function replayRun(
  recorded: RecordedRuns,
  runId: string,
  options: ReplayOptions,
): Promise<ReplayComparison> {
  const run = recorded.run(runId);
  if (!run)
    throw new GlassboxError(
      "configuration",
      `There is no run ${runId} in the trace; glassbox sessions and glassbox trace list what is recorded.`,
    );
  const steps = recorded.steps(runId);
  const first = recorded.payload(runId, 1);
  if (!first)
    throw new GlassboxError("configuration", `Run ${runId} has no recorded request to replay (it made no model call).`);
  const request: RecordedRequest = Array.isArray(first) ? { messages: first } : first;
  const { systemPrompt, history, input } = contextOf(request.messages, options.systemPrompt);
  const calls = steps.flatMap((step) => step.toolCalls);
  const specs = options.tools ?? request.tools ?? [];

  let notRecorded = 0;
  const answered = new Set<number>();
  const tools = createToolRegistry(specs.map((spec) => recordedTool(spec, calls, answered, () => notRecorded++)));
  let latencyMs = 0;
  const onEvent = (event: AgentEvent) => {
    if (event.type === "model_end") latencyMs += event.latencyMs;
  };
  const result = await runAgent(
    { model: options.model, tools, systemPrompt, maxSteps: options.maxSteps ?? Math.max(8, steps.length + 2) },
    { input, history, sessionId: `replay:${runId}`, userId: run.userId, onEvent },
  );

  const original = summaryOfRecorded(run, steps);
  const replay = summaryOfReplay(result, calls, latencyMs);
  const key = (call: { name: string; arguments: unknown }) => `${call.name}\n${canonical(call.arguments)}`;
  const length = Math.max(original.toolCalls.length, replay.toolCalls.length);
  let divergesAtCall: number | null = null;
  for (let index = 0; index < length; index++) {
    const a = original.toolCalls[index];
    const b = replay.toolCalls[index];
    if (!a || !b || key(a) !== key(b)) {
      divergesAtCall = index + 1;
      break;
    }
  }
  return {
    runId,
    replayRunId: result.runId,
    original,
    replay,
    sameToolCalls: divergesAtCall === null,
    sameAnswer: original.output.trim() === replay.output.trim(),
    divergesAtCall,
    notRecorded,
  };
}

/** The recorded first request as a run's parts: its system prompt, the turns before, the request. */
function contextOf(messages: Message[], systemPrompt: string | undefined) {
  const [system, ...rest] = messages;
  const lastUser = rest.findLastIndex((message) => message.role === "user");
  if (lastUser < 0) throw new GlassboxError("configuration", "The recorded request has no user message to replay.");
  const recordedPrompt =
    system?.role === "system" && typeof system.content === "string" ? system.content : DEFAULT_SYSTEM_PROMPT;
  return {
    systemPrompt: systemPrompt ?? recordedPrompt,
    history: rest.slice(0, lastUser),
    input: textOf(rest[lastUser]?.content),
  };
}

/** A tool with the recorded schema whose handler answers from the recording, each recorded call once. */
function recordedTool(
  spec: ToolSpec,
  calls: ToolCallRecord[],
  answered: Set<number>,
  missed: () => void,
): ToolDefinition {
  const { name, description, parameters } = spec.function;
  return {
    name,
    description: description ?? "",
    parameters: (parameters ?? { type: "object", properties: {} }) as ToolDefinition["parameters"],
    handler: async (args: Record<string, unknown>) => {
      const wanted = canonical(args);
      const index = calls.findIndex(
        (call, at) =>
          !answered.has(at) && call.name === name && canonical(call.arguments ?? parseOr(call.rawArguments)) === wanted,
      );
      const call = calls[index];
      if (!call) {
        missed();
        throw new Error(NOT_RECORDED);
      }
      answered.add(index);
      if (call.envelope.status === "error") throw new Error(call.envelope.error.message);
      return call.envelope.data;
    },
  };
}

function summaryOfRecorded(run: RunTrace, steps: StepTrace[]): RunSummary {
  return {
    output: run.output ?? "",
    stopReason: run.status,
    toolCalls: steps.flatMap((step) =>
      step.toolCalls.map((call) => ({ name: call.name, arguments: call.arguments ?? parseOr(call.rawArguments) })),
    ),
    steps: steps.length,
    promptTokens: run.promptTokens,
    completionTokens: run.completionTokens,
    cost: run.cost,
    latencyMs: steps.reduce((sum, step) => sum + step.latencyMs, 0),
  };
}

function summaryOfReplay(result: RunResult, _recordedCalls: ToolCallRecord[], latencyMs: number): RunSummary {
  return {
    output: result.output,
    stopReason: result.stopReason,
    toolCalls: result.toolCalls.map((call) => ({
      name: call.name,
      arguments: call.arguments,
      recorded: !(call.status === "error" && call.error?.message === NOT_RECORDED),
    })),
    steps: result.steps,
    promptTokens: result.usage.promptTokens,
    completionTokens: result.usage.completionTokens,
    cost: null,
    latencyMs,
  };
}

/** JSON with object keys sorted, so {"a":1,"b":2} and {"b":2,"a":1} are the same call. */
function canonical(value: unknown): string {
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
