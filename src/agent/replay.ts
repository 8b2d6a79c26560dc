/**
 * Every run is a test case: a recorded run re-run from its exact recorded context (the messages and
 * tools its first step sent) against another model or system prompt. Tools never run in a replay:
 * a call is answered with the recorded result when the run made the same call (name and
 * arguments), and refused as "not recorded" otherwise; a dangerous tool is answered the same way,
 * never run, and never waits for a person. The two runs come back side by side (run-compare.ts).
 */
import type { ToolDefinition, ToolEnvelope } from "../tools/types.js";
import { createToolRegistry } from "../tools/registry.js";
import { GlassboxError } from "./errors.js";
import type { AgentEvent } from "./events.js";
import { DEFAULT_SYSTEM_PROMPT, runAgent } from "./loop.js";
import type { RunResult } from "./run.js";
import type { RecordedRequest } from "./contracts.js";
import {
  argumentsOf,
  canonical,
  compareSummaries,
  summaryOfRecorded,
  type Divergence,
  type RunSummary,
  type StepSummary,
} from "./run-compare.js";
import type { RunTrace, StepTrace, TraceRecorder } from "./trace.js";
import { textOf, type ChatModel, type Message, type ToolSpec } from "./types.js";

export type { RunSummary, StepSummary } from "./run-compare.js";

/** What a replay reads of a recorded run (the trace reader has these). */
export interface RecordedRuns {
  run(runId: string): RunTrace | undefined;
  steps(runId: string): StepTrace[];
  payload(runId: string, step: number): RecordedRequest | Message[] | undefined;
}

/**
 * All a replay needs of a recorded run, and all an eval case file keeps: its first request, every
 * tool call with the result the model read, and the run as compared.
 */
export interface Recording {
  runId: string;
  userId: string;
  request: RecordedRequest;
  calls: RecordedCall[];
  original: RunSummary;
}

export interface RecordedCall {
  name: string;
  arguments: unknown;
  envelope: ToolEnvelope;
}

export interface ReplayOptions {
  model: ChatModel;
  /** Replaces the recorded system prompt. */
  systemPrompt?: string;
  /** Tool definitions to offer instead of the recorded ones (their schemas and descriptions; handlers are never called). */
  tools?: ToolSpec[];
  maxSteps?: number;
  /** Where the replay is recorded as a run of its own (eval keeps its replays); unrecorded without it. */
  trace?: TraceRecorder;
  /** The replay's session (default `replay:<run>`). */
  sessionId?: string;
}

export interface ReplayComparison extends Divergence {
  runId: string;
  replayRunId: string;
  original: RunSummary;
  replay: RunSummary;
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
  return replayRecording(recordingOf(recorded, runId), options);
}

/** A recorded run as a replay reads it; a caller's mistake (no such run, no model call) is one sentence. */
export function recordingOf(recorded: RecordedRuns, runId: string): Recording {
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
  return {
    runId,
    userId: run.userId,
    request: Array.isArray(first) ? { messages: first } : first,
    calls: steps.flatMap((step) =>
      step.toolCalls.map((call) => ({ name: call.name, arguments: argumentsOf(call), envelope: call.envelope })),
    ),
    original: summaryOfRecorded(run, steps),
  };
}

export async function replayRecording(recording: Recording, options: ReplayOptions): Promise<ReplayComparison> {
  const { runId, request, calls, original } = recording;
  const { systemPrompt, history, input } = contextOf(request.messages, options.systemPrompt);
  const specs = options.tools ?? request.tools ?? [];

  let notRecorded = 0;
  const answered = new Set<number>();
  const tools = createToolRegistry(specs.map((spec) => recordedTool(spec, calls, answered, () => notRecorded++)));
  const steps = stepsOf();
  const result = await runAgent(
    {
      model: options.model,
      tools,
      systemPrompt,
      maxSteps: options.maxSteps ?? Math.max(8, original.steps + 2),
      ...(options.trace ? { trace: options.trace } : {}),
    },
    {
      input,
      history,
      sessionId: options.sessionId ?? `replay:${runId}`,
      userId: recording.userId,
      onEvent: steps.listen,
    },
  );
  const replay = summaryOfReplay(result, steps.list);
  return { runId, replayRunId: result.runId, original, replay, ...compareSummaries(original, replay), notRecorded };
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
  calls: RecordedCall[],
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
        (call, at) => !answered.has(at) && call.name === name && canonical(call.arguments) === wanted,
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

/** The replay's steps as its events tell them: each model call's tokens, time and words, then its calls. */
function stepsOf() {
  const list: StepSummary[] = [];
  const listen = (event: AgentEvent) => {
    if (event.type === "model_end") {
      const { usage, content } = event.response;
      list.push({
        step: event.step,
        promptTokens: usage.promptTokens,
        completionTokens: usage.completionTokens,
        latencyMs: event.latencyMs,
        cost: null,
        said: content ?? "",
        toolCalls: [],
      });
    } else if (event.type === "tool_end") {
      const { record } = event;
      const refused = record.envelope.status === "error" && record.envelope.error.message === NOT_RECORDED;
      list
        .findLast((step) => step.step === event.step)
        ?.toolCalls.push({ name: record.name, arguments: argumentsOf(record), recorded: !refused });
    }
  };
  return { list, listen };
}

function summaryOfReplay(result: RunResult, perStep: StepSummary[]): RunSummary {
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
    latencyMs: perStep.reduce((sum, step) => sum + step.latencyMs, 0),
    perStep,
  };
}
