/**
 * The ReAct loop: show the model the conversation, run the tools it asks for, show it the results,
 * and again — until it answers, a guard stops it, a person must approve a call, or the run is
 * cancelled. Nothing a model or a tool does makes it throw: every way a run ends is a RunResult.
 */
import { approvalsAwaited, executeToolCalls, resumeToolCalls, type PendingToolCall } from "../tools/executor.js";
import type { ApprovalDecision, ToolCallRecord } from "../tools/types.js";
import { inputWithAttachments, userMessageOf } from "./attachments.js";
import { GlassboxError } from "./errors.js";
import { liveOf, type Live } from "./live.js";
import { withThreadContext } from "./thread-context.js";
import { executorOptions, scopeOf } from "./run-scope.js";
import {
  newRunState,
  readsContent,
  type AgentConfig,
  type PausedRun,
  type RunResult,
  type RunState,
  type StopReason,
  type Task,
} from "./run.js";
import { addUsage, type Message, type ModelResponse, type ToolSpec } from "./types.js";

export type { AgentConfig, PausedRun, RunResult, RunState, StopReason, Task, ToolCallSummary } from "./run.js";

export const DEFAULT_MAX_STEPS = 8;
const CANCELLED = "The run was cancelled.";
export const DEFAULT_SYSTEM_PROMPT =
  "You are glassbox, a helpful assistant in a team chat. Use the tools when they help, never invent tool results, and answer concisely.";

export async function runAgent(config: AgentConfig, task: Task): Promise<RunResult> {
  const run = newRunState(task);
  const live = liveOf(task, config);
  return survive(run, live, async () => {
    live.emit({
      type: "run_start",
      runId: run.runId,
      sessionId: run.sessionId,
      userId: run.userId,
      input: inputWithAttachments(task),
      ...(task.parent ? { parent: task.parent } : {}),
      ...(task.pipeline ? { pipeline: task.pipeline } : {}),
      ...(config.configuration ? { configuration: config.configuration } : {}),
      ...(task.threadContext ? { threadContext: task.threadContext } : {}),
    });
    addMessages(run, live, [withThreadContext(userMessageOf(task), task.threadContext)]);
    await live.commit("start");
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
    const { runId, sessionId, parent } = run;
    live.emit({ type: "run_resumed", runId, sessionId, decisions, ...(parent ? { parent } : {}) });
    await live.commit("start");
    const outcome = await resumeToolCalls(pending, decisions, executorOptions(config), scopeOf(run, live));
    const records = [...finished, ...outcome.records];
    if (outcome.pending.length > 0) return pause(run, live, records, outcome.pending);
    recordToolResults(run, live, records);
    await live.commit("results");
    return loop(config, run, live);
  });
}

/**
 * Each step: the model's reply, committed before any of its tool calls starts; then the tools'
 * results, committed before the next step. Every way out goes through `finish`, the last commit.
 */
async function loop(config: AgentConfig, run: RunState, live: Live): Promise<RunResult> {
  const maxSteps = config.maxSteps ?? DEFAULT_MAX_STEPS;
  while (true) {
    if (live.signal?.aborted) return failed(run, live, stopOf(config, live));
    if (run.steps >= maxSteps) return concludeAtStepLimit(config, run, live, maxSteps);

    const reply = await callModel(config, run, live, "auto");
    if (reply instanceof GlassboxError) return failed(run, live, reply);
    const { content, toolCalls } = reply;
    addMessages(run, live, [{ role: "assistant", content, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) }]);
    if (toolCalls.length === 0) return finish(run, live, "final", content ?? "");
    await live.commit("reply");

    const outcome = await executeToolCalls(toolCalls, executorOptions(config), scopeOf(run, live));
    if (outcome.pending.length > 0) return pause(run, live, outcome.records, outcome.pending);
    recordToolResults(run, live, outcome.records);
    await live.commit("results");
  }
}

/** The step limit ends a run with one last call without tools: a stage conclusion, never a throw. */
async function concludeAtStepLimit(
  config: AgentConfig,
  run: RunState,
  live: Live,
  maxSteps: number,
): Promise<RunResult> {
  addNotes(run, live, [], [STEP_LIMIT_NOTE(maxSteps)]);
  await live.commit("results");
  const reply = await callModel(config, run, live, "none");
  if (reply instanceof GlassboxError) return failed(run, live, reply);
  const output = reply.content?.trim() || `I stopped after ${maxSteps} steps without finishing.`;
  addMessages(run, live, [{ role: "assistant", content: output }]);
  return finish(run, live, "max_steps", output);
}

const STEP_LIMIT_NOTE = (maxSteps: number) =>
  `You have used all ${maxSteps} steps of this run. Do not call any more tools. Write a stage conclusion for the user: what was done, what was found, and what remains to do.`;

/** Everything the model sees passes through here: memory's budgeted context, or the plain history. */
async function buildContext(config: AgentConfig, run: RunState, tools: ToolSpec[]): Promise<Message[]> {
  const systemPrompt = config.systemPrompt ?? DEFAULT_SYSTEM_PROMPT;
  if (config.memory) return config.memory.context(run, { systemPrompt, tools });
  return [{ role: "system", content: systemPrompt }, ...run.history, ...run.messages];
}

async function callModel(
  config: AgentConfig,
  run: RunState,
  live: Live,
  toolChoice: "auto" | "none",
): Promise<ModelResponse | GlassboxError> {
  const step = ++run.steps;
  const tools = config.selectTools?.(run) ?? config.tools.specs();
  const messages = await buildContext(config, run, tools);
  // What the calls this step makes may have been planted by: whatever the model reads now, history included.
  if (readsContent(messages)) run.readContent = true;
  live.emit({ type: "model_start", runId: run.runId, step, messages, toolCount: tools.length, tools, toolChoice });
  const started = performance.now();
  let response: ModelResponse;
  try {
    response = await config.model.chat({
      messages,
      tools,
      toolChoice,
      signal: live.signal,
      runId: run.runId,
      userId: run.userId,
      onDelta: (text) => live.emit({ type: "model_delta", runId: run.runId, step, text }),
    });
  } catch (error) {
    if (live.signal?.aborted || (error instanceof GlassboxError && error.code === "cancelled")) {
      run.steps = step - 1; // stopped before the model answered: no step
      return stopOf(config, live);
    }
    if (error instanceof GlassboxError) return error;
    const reason = error instanceof Error ? error.message : String(error);
    return new GlassboxError("model_unavailable", `The model request failed (${reason}).`);
  }
  run.usage = addUsage(run.usage, response.usage);
  live.emit({ type: "model_end", runId: run.runId, step, response, latencyMs: performance.now() - started });
  // A reply that lands after the run was cancelled is traced but dropped, so none of its calls start.
  return live.signal?.aborted ? stopOf(config, live) : response;
}

/** Why an aborted run stops: its time limit ran out, or someone asked. */
function stopOf(config: AgentConfig, live: Live): GlassboxError {
  const reason: unknown = live.signal?.reason;
  if (reason instanceof DOMException && reason.name === "TimeoutError" && config.runTimeoutMs !== undefined)
    return new GlassboxError(
      "run_timeout",
      `I stopped: this request ran past its time limit of ${formatLimit(config.runTimeoutMs)} (GLASSBOX_RUN_TIMEOUT_MS). Ask again with a narrower question, or ask an admin to raise the limit.`,
    );
  return new GlassboxError("cancelled", CANCELLED);
}

const formatLimit = (ms: number) =>
  ms % 60_000 === 0 ? `${ms / 60_000} min` : ms % 1_000 === 0 ? `${ms / 1_000} s` : `${ms} ms`;

/** One tool message per call, in the order of the assistant's tool_calls; then the guards' notes. Committed at the next commit point. */
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
  const results = sorted.map((record): Message => ({ role: "tool", content: record.content, tool_call_id: record.id }));
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

function pause(run: RunState, live: Live, finished: ToolCallRecord[], pending: PendingToolCall[]): Promise<RunResult> {
  const waitingFor = approvalsAwaited(pending).map((request) => request.toolName);
  const paused: PausedRun = { ...structuredClone(run), finished, pending };
  const output = `Waiting for a person to approve: ${waitingFor.join(", ")}.`;
  return finish(run, live, "awaiting_approval", output, { paused });
}

function failed(run: RunState, live: Live, error: GlassboxError): Promise<RunResult> {
  if (error.code === "cancelled") return finish(run, live, "cancelled", CANCELLED);
  return finish(run, live, "error", error.message, { error: { code: error.code, message: error.message } });
}

/** The run's end, its last commit point. */
async function finish(
  run: RunState,
  live: Live,
  stopReason: StopReason,
  output: string,
  extra: Partial<RunResult> = {},
): Promise<RunResult> {
  const { runId, sessionId, steps, usage, toolCalls } = run;
  const result: RunResult = { runId, sessionId, output, stopReason, steps, usage, toolCalls, ...extra };
  live.emit({ type: "run_end", runId, result });
  await live.commit("end");
  return result;
}

/** Every message the run adds is announced as an event; persistence stores it at the next commit point. */
function addMessages(run: RunState, live: Live, messages: Message[]): void {
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
    const failure: RunResult["error"] = { code: "internal", message };
    try {
      return await finish(run, live, "error", message, { error: failure });
    } catch {
      // the store is what failed; the caller still gets the result
      const { runId, sessionId, steps, usage, toolCalls } = run;
      return { runId, sessionId, output: message, stopReason: "error", steps, usage, toolCalls, error: failure };
    }
  }
}
