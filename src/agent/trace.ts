/**
 * Traces: every step of every run, written through the store port — what the model was sent
 * (count, tokens, and the full request on demand), what it thought and said, what the model layer
 * did to make its reply usable, the tool calls with their results, tokens, latency and cost — and
 * the shapes in which the store gives them back (a run's timeline, totals per run, session, user and day).
 */
import type { ThreadReading } from "./thread-context.js";
import type { ModelExchange } from "./types.js";
import { redactUrlsIn } from "../redact.js";
import type { ToolCallRecord } from "../tools/types.js";
import { costOf, priceOf, type Price } from "./cost.js";
import type { AgentEvent } from "./events.js";
import type { RunUnit, RunWriter } from "./run-unit.js";
import { runOutcomeOf, runRecordOf, type StepRecord } from "./contracts.js";

export interface TraceRecorder {
  /** Sees every event of a run, adding what it keeps to the unit being built. */
  record(event: AgentEvent, unit: RunUnit): void;
  /** Where the run's units are committed. */
  readonly store: RunWriter;
}

export interface TraceLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

/** A tool call as the model asked for it: its id, the tool's name, the arguments text. */
export interface RequestedCall {
  id: string;
  name: string;
  arguments: string;
}

export interface StepTrace {
  step: number;
  model: string | null;
  contextMessages: number;
  contextTokens: number | null;
  content: string | null;
  /** The model's reasoning ("thinking"), never part of `content`; null when it sent none. Kept up to MAX_REASONING_CHARS. */
  reasoning: string | null;
  /** How many characters of the reasoning were cut off (0: it is whole). */
  reasoningCutChars: number;
  /** What the model layer did to make the reply usable (a tool call recovered from text, a refused option dropped). */
  modelNotes: string[];
  /** For its repairs and refusals: what was sent and what came back (absent when there were none). */
  modelExchanges?: ModelExchange[];
  /** The calls the model asked for, as it sent them, stored with its reply (before any of them ran). */
  requestedCalls: RequestedCall[];
  /** The calls that ended, as they ended. */
  toolCalls: ToolCallRecord[];
  /** The guards' notes to the model (repeats, unchanged results, the step limit). */
  notes: string[];
  promptTokens: number;
  completionTokens: number;
  latencyMs: number;
  cost: number | null;
  at: string;
}

export interface RunTrace {
  runId: string;
  sessionId: string;
  userId: string;
  input: string;
  status: string;
  output: string | null;
  model: string | null;
  steps: number;
  promptTokens: number;
  completionTokens: number;
  cost: number | null;
  startedAt: string;
  endedAt: string | null;
  /** For a sub-agent's run: the run and tool call it worked for. */
  parentRunId: string | null;
  parentToolCallId: string | null;
  /** For a pipeline's stage: the first stage's run, this stage's place from 1, how many stages, the pipeline's name. */
  pipelineRunId: string | null;
  pipelineStage: number | null;
  pipelineStages: number | null;
  pipelineName: string | null;
  /** The channel settings the run used (GLASSBOX_CHANNELS): their file and version, as `channels.yaml@1a2b3c4d5e6f`. */
  configuration: string | null;
  /** What the run read of its thread before the mention (Slack, Discord); null when it read nothing. */
  threadContext: ThreadReading | null;
  /** The schedule whose tick made the run; null for a person's message. */
  scheduleId: string | null;
}

export interface UsageTotal {
  key: string;
  runs: number;
  promptTokens: number;
  completionTokens: number;
  /** null when a run's model has no known price. */
  cost: number | null;
}

export function createTraceRecorder(
  store: RunWriter,
  options: {
    prices?: Record<string, Price>;
    /** The estimated prompt tokens of a run's current step (memory knows them). */
    estimateTokens?: (runId: string) => number | undefined;
    /** Also logs each run's start and end, and tool failures, with run and session ids. */
    log?: TraceLog;
  } = {},
): TraceRecorder {
  const logEvent = (event: AgentEvent) => {
    const { log } = options;
    if (!log) return;
    if (event.type === "run_start" || event.type === "run_resumed") {
      sessions.set(event.runId, event.sessionId);
      log.info(
        { runId: event.runId, sessionId: event.sessionId },
        event.type === "run_start" ? "run started" : "run resumed",
      );
    } else if (event.type === "tool_end" && event.record.envelope.status === "error") {
      const { error } = event.record.envelope;
      log.warn(
        {
          runId: event.runId,
          sessionId: sessions.get(event.runId),
          tool: event.record.name,
          type: error.type,
          error: error.message,
        },
        "tool call failed",
      );
    } else if (event.type === "run_end") {
      const { result } = event;
      const fields = {
        runId: result.runId,
        sessionId: result.sessionId,
        stopReason: result.stopReason,
        steps: result.steps,
        ...result.usage,
      };
      if (result.error) log.warn({ ...fields, error: result.error }, "run failed");
      else log.info(fields, "run ended");
      sessions.delete(result.runId);
    }
  };
  // What each run's current step was sent, kept from model_start until model_end writes the step.
  const sent = new Map<string, Extract<AgentEvent, { type: "model_start" }>>();

  const sessions = new Map<string, string>();
  const ownRuns = new Set<string>();
  // A step's finished tool calls wait for the run's next event (its results, or its end), which the
  // loop records in one unit with them: one commit a step instead of one more per call.
  const finishedCalls = new Map<string, Array<{ step: number; record: ToolCallRecord }>>();
  const writeFinishedCalls = (runId: string, unit: RunUnit) => {
    const calls = finishedCalls.get(runId);
    if (!calls) return;
    finishedCalls.delete(runId);
    let from = 0;
    // One write per step, in order (a resumed step's calls and the next step's never mix).
    for (let index = 1; index <= calls.length; index++) {
      if (index < calls.length && calls[index]?.step === calls[from]?.step) continue;
      unit.add({
        kind: "tool_calls",
        runId,
        step: calls[from]?.step as number,
        records: calls.slice(from, index).map((call) => call.record),
      });
      from = index;
    }
  };
  return {
    store,
    record(event, unit) {
      logEvent(event);
      if (event.type === "tool_end") {
        finishedCalls.set(event.runId, [
          ...(finishedCalls.get(event.runId) ?? []),
          { step: event.step, record: event.record },
        ]);
        return;
      }
      writeFinishedCalls(event.runId, unit);
      // A run without memory (a sub-agent's) gets its row here, and its end below; memory
      // records the runs it started itself.
      if (event.type === "run_start") {
        if (!unit.starts(event.runId)) {
          unit.add({ kind: "start_run", run: runRecordOf(event) });
          ownRuns.add(event.runId);
        }
      } else if (event.type === "run_resumed" && event.parent) {
        // a sub-agent's run, perhaps after a restart: this recorder ends it, as memory ends the others
        ownRuns.add(event.runId);
        unit.add({ kind: "resume_run", runId: event.runId });
      } else if (event.type === "model_start") sent.set(event.runId, event);
      else if (event.type === "model_end") {
        const request = sent.get(event.runId);
        sent.delete(event.runId);
        unit.add({ kind: "step", step: stepRecordOf(event, request, options) });
      } else if (event.type === "note")
        unit.add({ kind: "note", runId: event.runId, step: event.step, text: event.text });
      else if (event.type === "run_end") {
        if (ownRuns.delete(event.runId)) unit.add({ kind: "end_run", outcome: runOutcomeOf(event.result) });
        sent.delete(event.runId);
        unit.add({ kind: "price_run", runId: event.runId });
      }
    },
  };
}

/** A step as the store keeps it: what it was sent (by reference, in the store), what came back, its cost. */
function stepRecordOf(
  event: Extract<AgentEvent, { type: "model_end" }>,
  request: Extract<AgentEvent, { type: "model_start" }> | undefined,
  options: { prices?: Record<string, Price>; estimateTokens?: (runId: string) => number | undefined },
): StepRecord {
  const messages = request?.messages ?? [];
  const { usage, model, content } = event.response;
  const reasoning = cutReasoning(event.response.reasoning, MAX_REASONING_CHARS);
  return {
    runId: event.runId,
    step: event.step,
    model,
    contextMessages: messages.length,
    contextTokens: options.estimateTokens?.(event.runId) ?? null,
    content: content ?? (event.response.toolCalls.length ? null : ""),
    reasoning: reasoning?.text ?? null,
    reasoningCutChars: reasoning?.cutChars ?? 0,
    modelNotes: boundedNotes(event.response.notes),
    ...(event.response.exchanges?.length ? { modelExchanges: boundedExchanges(event.response.exchanges) } : {}),
    requestedCalls: event.response.toolCalls.map((call) => ({
      id: call.id,
      name: call.function.name,
      arguments: call.function.arguments,
    })),
    promptTokens: usage.promptTokens,
    completionTokens: usage.completionTokens,
    latencyMs: event.latencyMs,
    cost: costOf(priceOf(model, options.prices), usage),
    request: messages,
    ...(request?.tools ? { tools: request.tools } : {}),
    ...(request?.toolChoice ? { toolChoice: request.toolChoice } : {}),
    ...(event.response.streamed !== undefined ? { streamed: event.response.streamed } : {}),
    at: new Date().toISOString(),
  };
}

/** A step's reasoning is kept whole up to this many characters; a model can think for far longer. */
export const MAX_REASONING_CHARS = 64 * 1024;
/** The model layer's notes are short sentences; these bounds only stop a runaway one. */
const MAX_MODEL_NOTES = 20;
const MAX_MODEL_NOTE_CHARS = 1_000;

/** What was sent and what came back is kept up to this many characters each, for so many exchanges. */
const MAX_EXCHANGES = 10;
const MAX_EXCHANGE_CHARS = 4_000;

function boundedExchanges(exchanges: ModelExchange[]): ModelExchange[] {
  const bounded = (text: string | undefined) => {
    if (text === undefined) return undefined;
    const cut = cutText(text, MAX_EXCHANGE_CHARS);
    return cut.cutChars ? `${cut.text}… (${cut.cutChars} more characters)` : cut.text;
  };
  // A server's words may quote an address it was given: no URL's credentials go in the trace.
  return exchanges.slice(0, MAX_EXCHANGES).map((exchange) => {
    const kept: ModelExchange = { note: bounded(exchange.note) ?? "" };
    for (const field of ["sent", "received", "readAs"] as const) {
      const text = bounded(exchange[field] === undefined ? undefined : redactUrlsIn(exchange[field]));
      if (text !== undefined) kept[field] = text;
    }
    return kept;
  });
}

/** Reasoning as kept: none when empty, else cut to `max` characters (never inside a surrogate pair), with how many were cut. */
export function cutReasoning(
  reasoning: string | undefined,
  max: number,
): { text: string; cutChars: number } | undefined {
  if (!reasoning?.trim()) return undefined;
  return cutText(reasoning, max);
}

function cutText(text: string, max: number): { text: string; cutChars: number } {
  if (text.length <= max) return { text, cutChars: 0 };
  const code = text.charCodeAt(max - 1);
  const end = code >= 0xd800 && code <= 0xdbff ? max - 1 : max;
  return { text: text.slice(0, end), cutChars: text.length - end };
}

function boundedNotes(notes: string[] = []): string[] {
  const kept = notes.slice(0, MAX_MODEL_NOTES).map((note) => {
    const cut = cutText(note, MAX_MODEL_NOTE_CHARS);
    return cut.cutChars ? `${cut.text}… (${cut.cutChars} more characters)` : cut.text;
  });
  if (notes.length > MAX_MODEL_NOTES) kept.push(`… and ${notes.length - MAX_MODEL_NOTES} more notes`);
  return kept;
}
