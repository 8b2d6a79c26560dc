/**
 * The ReAct loop: show the model the conversation, run the tools it asks for, show it the results,
 * and again — until it answers, a guard stops it, a person must approve a call, or the run is
 * cancelled. Nothing a model or a tool does makes it throw: every way a run ends is a RunResult.
 */
import { randomUUID } from "node:crypto";
import {
  approvalsAwaited,
  executeToolCalls,
  newToolRunState,
  resumeToolCalls,
  type PendingToolCall,
} from "../tools/executor.js";
import type { ApprovalDecision, ToolCallRecord } from "../tools/types.js";
import { inputWithAttachments, userMessageOf } from "./attachments.js";
import { GlassboxError } from "./errors.js";
import { liveOf, type Live } from "./live.js";
import { executorOptions, scopeOf } from "./run-scope.js";
import type { AgentConfig, PausedRun, RunResult, RunState, StopReason, Task } from "./run.js";
import { addUsage, emptyUsage, type Message, type ModelResponse, type ToolSpec } from "./types.js";

export type { AgentConfig, PausedRun, RunResult, RunState, StopReason, Task, ToolCallSummary } from "./run.js";

export const DEFAULT_MAX_STEPS = 8;
export const DEFAULT_SYSTEM_PROMPT =
  "You are glassbox, a helpful assistant in a team chat. Use the tools when they help, never invent tool results, and answer concisely.";

export async function runAgent(config: AgentConfig, task: Task): Promise<RunResult> {
  const run: RunState = {
    runId: task.runId ?? `run_${randomUUID()}`,
    sessionId: task.sessionId ?? "local",
    userId: task.userId ?? "local",
    history: task.history ?? [],
    messages: [],
    steps: 0,
    usage: emptyUsage(),
    toolCalls: [],
    toolState: newToolRunState(),
    lastResults: {},
    ...(task.parent ? { parent: task.parent } : {}),
  };
  const live = liveOf(task, config);
  return survive(run, live, async () => {
    const request = userMessageOf(task);
    await live.atomically(() => {
      live.emit({
        type: "run_start",
        runId: run.runId,
        sessionId: run.sessionId,
        userId: run.userId,
        input: inputWithAttachments(task),
        ...(task.parent ? { parent: task.parent } : {}),
        ...(task.pipeline ? { pipeline: task.pipeline } : {}),
      });
      if (task.inputStored)
        run.messages.push(request); // stored with the run when it was accepted
      else addMessages(run, live, [request]);
    });
    return loop(config, run, live);
  });
}

/** Continues a paused run with the decisions people made (by tool_call_id). */
export async function resumeAgent(
  config: AgentConfig,
  paused: PausedRun,
  decisions: Record<string, ApprovalDecision>,
  options: Pick<Task, "signal" | "onEvent"> = {},
): Promise<RunResult> {
  const { finished, pending, ...state } = structuredClone(paused);
  const run: RunState = state;
  const live = liveOf(options, config);
  return survive(run, live, async () => {
    await live.atomically(() =>
      live.emit({
        type: "run_resumed",
        runId: run.runId,
        sessionId: run.sessionId,
        decisions,
        ...(run.parent ? { parent: run.parent } : {}),
      }),
    );
    const outcome = await resumeToolCalls(pending, decisions, executorOptions(config), scopeOf(run, live));
    const records = [...finished, ...outcome.records];
    if (outcome.pending.length > 0) return await live.atomically(() => pause(run, live, records, outcome.pending));
    await live.atomically(() => recordToolResults(run, live, records));
    return loop(config, run, live);
  });
}

async function loop(config: AgentConfig, run: RunState, live: Live): Promise<RunResult> {
  const maxSteps = config.maxSteps ?? DEFAULT_MAX_STEPS;
  while (true) {
    // A cancel asked for through the store (another process) is seen between steps, even if its notice was missed.
    if (live.signal?.aborted || (await config.cancelRequested?.(run.runId)))
      return await live.atomically(() => finish(run, live, "cancelled", "The run was cancelled."));
    if (run.steps >= maxSteps) return concludeAtStepLimit(config, run, live, maxSteps);

    const reply = await callModel(config, run, live, "auto");
    if (reply instanceof GlassboxError) return await live.atomically(() => failed(run, live, reply));
    const { content, toolCalls } = reply.response;
    const answered = await live.atomically(
      () =>
        endStep(run, live, reply, {
          role: "assistant",
          content,
          ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
        }) ?? (toolCalls.length === 0 ? finish(run, live, "final", content ?? "") : undefined),
    );
    if (answered) return answered;

    const outcome = await executeToolCalls(toolCalls, executorOptions(config), scopeOf(run, live));
    if (outcome.pending.length > 0)
      return await live.atomically(() => pause(run, live, outcome.records, outcome.pending));
    await live.atomically(() => recordToolResults(run, live, outcome.records));
  }
}

/** The step limit ends a run with one last call without tools: a stage conclusion, never a throw. */
async function concludeAtStepLimit(
  config: AgentConfig,
  run: RunState,
  live: Live,
  maxSteps: number,
): Promise<RunResult> {
  await live.atomically(() =>
    addNotes(
      run,
      live,
      [],
      [
        `You have used all ${maxSteps} steps of this run. Do not call any more tools. Write a stage conclusion for the user: what was done, what was found, and what remains to do.`,
      ],
    ),
  );
  const reply = await callModel(config, run, live, "none");
  if (reply instanceof GlassboxError) return await live.atomically(() => failed(run, live, reply));
  const output = reply.response.content?.trim() || `I stopped after ${maxSteps} steps without finishing.`;
  return await live.atomically(
    () => endStep(run, live, reply, { role: "assistant", content: output }) ?? finish(run, live, "max_steps", output),
  );
}

/** Everything the model sees passes through here: memory's budgeted context, or the plain history. */
async function buildContext(config: AgentConfig, run: RunState, tools: ToolSpec[]): Promise<Message[]> {
  const systemPrompt = config.systemPrompt ?? DEFAULT_SYSTEM_PROMPT;
  if (config.memory) return config.memory.context(run, { systemPrompt, tools });
  return [{ role: "system", content: systemPrompt }, ...run.history, ...run.messages];
}

interface ModelReply {
  step: number;
  response: ModelResponse;
  latencyMs: number;
}

async function callModel(
  config: AgentConfig,
  run: RunState,
  live: Live,
  toolChoice: "auto" | "none",
): Promise<ModelReply | GlassboxError> {
  const step = ++run.steps;
  const tools = config.selectTools?.(run) ?? config.tools.specs();
  const messages = await buildContext(config, run, tools);
  live.emit({ type: "model_start", runId: run.runId, step, messages, toolCount: tools.length, tools, toolChoice });
  const started = performance.now();
  try {
    const response = await config.model.chat({
      messages,
      tools,
      toolChoice,
      signal: live.signal,
      userId: run.userId,
      onDelta: (text) => live.emit({ type: "model_delta", runId: run.runId, step, text }),
    });
    run.usage = addUsage(run.usage, response.usage);
    return { step, response, latencyMs: performance.now() - started };
  } catch (error) {
    if (live.signal?.aborted) return new GlassboxError("cancelled", "The run was cancelled.");
    if (error instanceof GlassboxError) return error;
    return new GlassboxError(
      "model_unavailable",
      `The model request failed (${error instanceof Error ? error.message : String(error)}).`,
    );
  }
}

/**
 * The step ends: its trace, then the reply's message. Called within one unit with what follows, so
 * a step's records commit together. A reply that lands after the run was cancelled is traced but
 * dropped, so none of its tool calls start.
 */
function endStep(run: RunState, live: Live, reply: ModelReply, message: Message): RunResult | undefined {
  live.emit({
    type: "model_end",
    runId: run.runId,
    step: reply.step,
    response: reply.response,
    latencyMs: reply.latencyMs,
  });
  if (live.signal?.aborted) return finish(run, live, "cancelled", "The run was cancelled.");
  addMessages(run, live, [message]);
  return undefined;
}

/** One tool message per call, in the order of the assistant's tool_calls; then the guards' notes. Called within a unit. */
function recordToolResults(run: RunState, live: Live, records: ToolCallRecord[]): void {
  const assistant = run.messages.findLast((message) => message.role === "assistant");
  const order = assistant?.role === "assistant" ? (assistant.tool_calls ?? []).map((call) => call.id) : [];
  const sorted = [...records].sort((a, b) => order.indexOf(a.id) - order.indexOf(b.id));
  for (const record of sorted) {
    if (record.usage) run.usage = addUsage(run.usage, record.usage); // a sub-agent's tokens count toward this run
    run.toolCalls.push({
      name: record.name,
      arguments: record.arguments ?? record.rawArguments,
      status: record.envelope.status,
      ...(record.envelope.status === "error" ? { error: record.envelope.error } : {}),
    });
  }
  const results: Message[] = sorted.map((record) => ({
    role: "tool",
    content: record.content,
    tool_call_id: record.id,
  }));
  addNotes(run, live, results, guardNotes(run, sorted));
}

function guardNotes(run: RunState, records: ToolCallRecord[]): string[] {
  const notes = new Set<string>();
  const previous = { ...run.lastResults };
  for (const record of records) {
    if (record.envelope.status === "error" && record.envelope.error.type === "repeated_call") {
      notes.add(
        `You made the same '${record.name}' call three times. Change strategy (other arguments or another tool) or answer with what you have.`,
      );
    }
    if (record.envelope.status === "success") {
      if (previous[record.name] === record.content) {
        notes.add(
          `'${record.name}' returned exactly the same result as its previous call: there is no new information. Answer with what you have.`,
        );
      }
      run.lastResults[record.name] = record.content;
    }
  }
  return [...notes];
}

function pause(run: RunState, live: Live, finished: ToolCallRecord[], pending: PendingToolCall[]): RunResult {
  const waitingFor = approvalsAwaited(pending).map((request) => request.toolName);
  const paused: PausedRun = { ...structuredClone(run), finished, pending };
  return finish(run, live, "awaiting_approval", `Waiting for a person to approve: ${waitingFor.join(", ")}.`, {
    paused,
  });
}

function failed(run: RunState, live: Live, error: GlassboxError): RunResult {
  if (error.code === "cancelled") return finish(run, live, "cancelled", "The run was cancelled.");
  return finish(run, live, "error", error.message, { error: { code: error.code, message: error.message } });
}

function finish(
  run: RunState,
  live: Live,
  stopReason: StopReason,
  output: string,
  extra: Partial<RunResult> = {},
): RunResult {
  const result: RunResult = {
    runId: run.runId,
    sessionId: run.sessionId,
    output,
    stopReason,
    steps: run.steps,
    usage: run.usage,
    toolCalls: run.toolCalls,
    ...extra,
  };
  live.emit({ type: "run_end", runId: run.runId, result });
  return result;
}

/** Messages are committed (one transaction, or with their unit) before the run goes on, and announced after. */
function addMessages(run: RunState, live: Live, messages: Message[]): void {
  live.commit(run, messages);
  run.messages.push(...messages);
  for (const message of messages) live.emit({ type: "message", runId: run.runId, message });
}

/** Guards speak to the model in system notes, committed with the step's tool results. */
function addNotes(run: RunState, live: Live, results: Message[], notes: string[]): void {
  addMessages(run, live, [...results, ...notes.map((text): Message => ({ role: "system", content: text }))]);
  for (const text of notes) live.emit({ type: "note", runId: run.runId, step: run.steps, text });
}

/** The one place a run can fail for a reason outside the model and the tools (a store that cannot write). */
async function survive(run: RunState, live: Live, body: () => Promise<RunResult>): Promise<RunResult> {
  try {
    return await body();
  } catch (error) {
    const message = `The run stopped because of an internal error (${error instanceof Error ? error.message : String(error)}); please try again.`;
    const result: RunResult = {
      runId: run.runId,
      sessionId: run.sessionId,
      output: message,
      stopReason: "error",
      steps: run.steps,
      usage: run.usage,
      toolCalls: run.toolCalls,
      error: { code: "internal", message },
    };
    try {
      await live.atomically(() => live.emit({ type: "run_end", runId: run.runId, result }));
    } catch {
      // the store is what failed; the caller still gets the result
    }
    return result;
  }
}
