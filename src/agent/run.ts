/** The data of a run: how an agent is configured, what it is asked, its state between steps, its result. */
import { randomUUID } from "node:crypto";
import { newToolRunState, type PendingToolCall, type ToolRunState } from "../tools/executor.js";
import type { ToolRegistry } from "../tools/registry.js";
import type { ApprovalGate, ToolCallRecord, ToolErrorType } from "../tools/types.js";
import { carriesFiles, type Attachment } from "./attachments.js";
import type { ErrorCode } from "./errors.js";
import type { AgentEventListener } from "./events.js";
import type { Memory } from "./memory.js";
import type { RunSlots } from "./run-slots.js";
import type { ThreadReading } from "./thread-context.js";
import type { TraceRecorder } from "./trace.js";
import { emptyUsage, type ChatModel, type Message, type ToolSpec, type Usage } from "./types.js";

export interface AgentConfig {
  model: ChatModel;
  tools: ToolRegistry;
  systemPrompt?: string;
  /** Which configuration made this agent (a channel's settings: their file and version); recorded with each run it starts. */
  configuration?: string;
  /** Model calls with tools before the run must conclude (default 8). */
  maxSteps?: number;
  /** Decides dangerous calls; without one they are all denied. */
  approve?: ApprovalGate;
  /**
   * With a store: a run that pauses opens the approvals it waits for in the pause's own commit,
   * pending this many seconds (chat conversations set it), so no crash leaves a paused run that
   * nobody can approve.
   */
  approvalTtlSeconds?: number;
  /**
   * The longest a run may work, in ms, counted from its start and again from each resume after an
   * approval (the wait for a person does not count); past it, what is in flight is stopped and the
   * run ends with a sentence saying so. Unset: no limit beyond the model's and the tools' own.
   */
  runTimeoutMs?: number;
  toolTimeoutMs?: number;
  maxResultChars?: number;
  toolConcurrency?: number;
  /** Where messages are committed and the context is built; without it a run sees only `history`. */
  memory?: Memory;
  /** Records every step (tokens, latency, cost, tool results) for the trace viewer. */
  trace?: TraceRecorder;
  /**
   * Chooses the tools sent on each model call (createToolSelector(registry).selectForRun); without
   * it every call is sent `tools.specs()`. `tools` must hold every tool it may choose.
   */
  selectTools?: (run: RunState) => ToolSpec[];
  /**
   * The process's run slots (GLASSBOX_MAX_CONCURRENT_RUNS), shared by every conversation service
   * given this agent; the loop itself does not use them, and a sub-agent's run takes none.
   */
  runSlots?: RunSlots;
}

/**
 * Which remembered notes a run is shown: the person's and those shared with its channel (default),
 * the person's own alone, or none.
 */
export type NotesScope = "channel" | "mine" | "none";

export interface Task {
  input: string;
  /** Which remembered notes the run is shown (default "channel"). */
  notes?: NotesScope;
  /** Files that came with the message (images, text, anything else), read within the adapter's limits. */
  attachments?: Attachment[];
  /** What was read of the thread before the message: shown to the model before the request, kept with the run. */
  threadContext?: ThreadReading;
  /** The run's id, when the caller needs it before the run starts (an HTTP API answering at once). */
  runId?: string;
  /** For a sub-agent's run: the run and the tool call it works for (its trace nests there). */
  parent?: { runId: string; toolCallId: string };
  /** For a stage of a pipeline: where it stands in the pipeline. */
  pipeline?: PipelineStage;
  sessionId?: string;
  userId?: string;
  /**
   * For persistence: the user's message is already stored in the session under `runId` (ingress
   * accepted it with the run), so memory does not store the request again. The loop ignores it.
   */
  inputStored?: boolean;
  /** Earlier turns of the conversation, oldest first (when the agent has no memory). */
  history?: Message[];
  signal?: AbortSignal;
  onEvent?: AgentEventListener;
}

/** A pipeline's stage: the pipeline's name, the first stage's run (which names the pipeline), the stage's place from 1, of how many. */
export interface PipelineStage {
  name: string;
  runId: string;
  stage: number;
  stages: number;
}

export type StopReason = "final" | "max_steps" | "awaiting_approval" | "cancelled" | "error";

/** Whether a run ended with an answer for the person (a final one, or a stage conclusion at the step limit): what can be rated. */
export function answeredBy(stopReason: string): boolean {
  return stopReason === "final" || stopReason === "max_steps";
}

export interface ToolCallSummary {
  name: string;
  arguments: unknown;
  status: "success" | "error";
  error?: { type: ToolErrorType; message: string };
}

export interface RunResult {
  runId: string;
  sessionId: string;
  output: string;
  stopReason: StopReason;
  /** Model calls made. */
  steps: number;
  usage: Usage;
  toolCalls: ToolCallSummary[];
  /** Why the run failed, for stopReason "error". */
  error?: { code: ErrorCode; message: string };
  /** For stopReason "awaiting_approval": everything needed to resume, as plain data. */
  paused?: PausedRun;
}

/** The state of a run between steps. Plain data: it can be stored and a run resumed from it. */
export interface RunState {
  runId: string;
  sessionId: string;
  userId: string;
  /** Which remembered notes the run is shown (default "channel"). */
  notes?: NotesScope;
  history: Message[];
  /** The messages this run added, starting with the user's input. */
  messages: Message[];
  steps: number;
  usage: Usage;
  toolCalls: ToolCallSummary[];
  toolState: ToolRunState;
  /** The last result text of each tool, to notice a result that brings nothing new. */
  lastResults: Record<string, string>;
  /** For a sub-agent's run: the run and tool call it works for. */
  parent?: { runId: string; toolCallId: string };
  /** The request came with files: text the person did not write is in the model's context. */
  readFiles?: boolean;
  /**
   * A model call of this run had files or tool results in its context: this run's, or the
   * conversation's earlier turns (see readsContent).
   */
  readContent?: boolean;
}

/** Whether the run's model has read text that neither the person nor glassbox wrote (files, tool results). */
export const hasReadContent = (run: Pick<RunState, "readFiles" | "readContent" | "messages">): boolean =>
  run.readFiles === true || run.readContent === true || run.messages.some((message) => message.role === "tool");

/**
 * Whether a model call's messages hold text that neither the person nor glassbox wrote: a tool's
 * result, or a message that carried files, whether this run's or one the history brought along.
 */
export const readsContent = (messages: readonly Message[]): boolean =>
  messages.some((message) => message.role === "tool" || carriesFiles(message));

/** A new run's state, before its first step. */
export function newRunState(task: Task): RunState {
  return {
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
    ...(task.notes && task.notes !== "channel" ? { notes: task.notes } : {}),
    ...(task.attachments?.length ? { readFiles: true } : {}),
    // Other people's messages are text the person did not write, as files are.
    ...(task.threadContext?.messages.length ? { readContent: true } : {}),
  };
}

export interface PausedRun extends RunState {
  /** Calls of the paused step that already finished. */
  finished: ToolCallRecord[];
  /** Calls of the paused step that wait for a decision. */
  pending: PendingToolCall[];
}
