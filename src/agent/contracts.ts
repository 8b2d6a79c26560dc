/**
 * The engine's contracts with whatever keeps its records: the narrow interfaces memory, the trace,
 * quotas, memory's tools and tool selection need, in the engine's own words, and the plain data they
 * take and give (messages, summaries, facts, runs, steps, quota reservations). The store port
 * (src/store/port.ts) satisfies them; the engine never imports a store.
 */
import type { ApprovalRequest, ToolCallRecord } from "../tools/types.js";
import type { UsageExample } from "../tools/usage-learning.js";
import type { Approval } from "./approvals.js";
import type { AgentEvent } from "./events.js";
import type { PipelineStage, RunResult } from "./run.js";
import type { ThreadReading } from "./thread-context.js";
import type { StepTrace, UsageTotal } from "./trace.js";
import type { Message, ToolSpec } from "./types.js";

export interface StoredMessage {
  id: number;
  runId: string | null;
  message: Message;
  tokens: number;
}

export interface Summary {
  content: string;
  tokens: number;
  /** The summary covers every message of its session epoch up to and including this id. */
  lastMessageId: number;
}

/** The summarising call behind a summary: the run and step it made room for, and what it cost. */
export interface SummaryCall {
  runId: string;
  step: number;
  model: string;
  promptTokens: number;
  completionTokens: number;
  cost: number | null;
}

export interface SessionInfo {
  id: string;
  messageCount: number;
  tokens: number;
  runCount: number;
  lastActivity: string;
  /** Who started the session's first run; null for a session without runs. */
  startedBy: string | null;
}

export interface Fact {
  id: number;
  userId: string;
  scope: string;
  content: string;
  createdAt: string;
  /** Where a note shared with a channel came from (absent for notes kept before it was recorded). */
  origin?: FactOrigin;
}

/** The run that wrote a note, and whether that run had read files or tool results (text a stranger may have written). */
export interface FactOrigin {
  runId: string;
  readContent: boolean;
}

export interface RunRecord {
  runId: string;
  sessionId: string;
  userId: string;
  input: string;
  /** For a sub-agent's run: the run and tool call it works for. */
  parent?: { runId: string; toolCallId: string };
  pipeline?: PipelineStage;
  /** The channel settings the run used: their file and version. */
  configuration?: string;
  /** What the run read of its thread before the mention (kept for the trace and the next mention). */
  threadContext?: ThreadReading;
  /** The schedule whose tick made the run (recorded when the run is accepted). */
  scheduleId?: string;
}

export interface RunOutcome {
  runId: string;
  status: string;
  output: string;
  steps: number;
  promptTokens: number;
  completionTokens: number;
  /** JSON of a paused run while it waits for approval; null otherwise. */
  paused: string | null;
  error: string | null;
}

/** The run a run_start event starts, as the store keeps it. */
export function runRecordOf(event: Extract<AgentEvent, { type: "run_start" }>): RunRecord {
  const { runId, sessionId, userId, input, parent, pipeline, configuration, threadContext } = event;
  return {
    runId,
    sessionId,
    userId,
    input,
    ...(parent ? { parent } : {}),
    ...(pipeline ? { pipeline } : {}),
    ...(configuration ? { configuration } : {}),
    ...(threadContext ? { threadContext } : {}),
  };
}

/** How a run ended, as its row stores it. */
export function runOutcomeOf(result: RunResult): RunOutcome {
  return {
    runId: result.runId,
    status: result.stopReason,
    output: result.output,
    steps: result.steps,
    promptTokens: result.usage.promptTokens,
    completionTokens: result.usage.completionTokens,
    paused: result.paused ? JSON.stringify(result.paused) : null,
    error: result.error ? JSON.stringify(result.error) : null,
  };
}

/** A message to store, with its token count (computed once, by the caller's counter). */
export interface MessageEntry {
  message: Message;
  tokens: number;
}

/**
 * One step of a run's trace, as the trace recorder has shaped it (reasoning cut, notes bounded, cost
 * priced): what the trace reads back, less its tool calls and notes (written after the step, as
 * their own writes), plus the run and the request it sent.
 */
export type StepRecord = Omit<StepTrace, "toolCalls" | "notes"> & {
  runId: string;
  /** The exact messages the step sent to the model (the store keeps each distinct one once per run). */
  request: Message[];
  /** The tools it was offered, and its tool_choice, where known. */
  tools?: ToolSpec[];
  toolChoice?: "auto" | "none";
  /** Whether the request asked for a streamed reply (absent: the model did not say). */
  streamed?: boolean;
};

/** A step's request as it was sent (steps recorded before requests were kept by reference: its messages alone). */
export interface RecordedRequest {
  messages: Message[];
  tools?: ToolSpec[];
  tool_choice?: "auto" | "none";
  stream?: boolean;
}

/**
 * One write of a run. `record` applies a list of them in order, in one transaction: a unit of the
 * loop (a step's trace, its messages, the run's end) takes effect whole or not at all.
 */
export type RunWrite =
  /** Starts a run (creating its session on first use), or takes over an accepted one; idempotent. */
  | { kind: "start_run"; run: RunRecord }
  /** A paused run goes on in this process: running again, owned by this process. */
  | { kind: "resume_run"; runId: string }
  /**
   * A run whose process is gone (the run queue handed its turn to this one; or it was marked
   * interrupted) goes on in this process: running, owned by this process. In `startedRuns` when
   * taken; an ended or accepted run, or one this process already runs, is not taken.
   */
  | { kind: "take_over_run"; runId: string }
  | { kind: "messages"; sessionId: string; runId: string | null; entries: MessageEntry[] }
  /** A step's trace; a second write of the same step is ignored. */
  | { kind: "step"; step: StepRecord }
  /** Tool calls finished in a step, appended to the step's list in order. */
  | { kind: "tool_calls"; runId: string; step: number; records: ToolCallRecord[] }
  /** A guard's note to the model, appended to the step's notes. */
  | { kind: "note"; runId: string; step: number; text: string }
  | { kind: "end_run"; outcome: RunOutcome }
  /** The run's model (its last step's) and cost (its steps' and its sub-agents' runs'; null if any is unknown). */
  | { kind: "price_run"; runId: string }
  /** Pending approvals for the requests, one per call (idempotent: a call is asked once). */
  | { kind: "open_approvals"; requests: ApprovalRequest[]; ttlSeconds: number; now?: Date };

/** What a `record` produced, for the writes that produce something. */
export interface RecordOutcome {
  /** The ids of each `messages` write's messages, one list per write, in order. */
  messageIds: number[][];
  /** The runs a `start_run` write started now (not those started before), and those a `take_over_run` took. */
  startedRuns: string[];
  /** The approvals of every `open_approvals` write, in order (new or already open). */
  approvals: Approval[];
}

/** Daily caps of one user; undefined: no cap of that kind. */
export interface QuotaLimits {
  tokens?: number;
  /** US dollars. */
  cost?: number;
}

/** A model call of a user asking for room under the caps before it is made. */
export interface QuotaRequest {
  userId: string;
  /** What the call may spend: its prompt estimate plus the completion allowance. */
  tokens: number;
  cost: number;
  limits: QuotaLimits;
  /** How long the reservation holds if it is never settled (a process killed mid-call); default 600 s. */
  holdSeconds?: number;
  now?: Date;
}

/**
 * The answer to a reservation: room reserved (settle it once the call answers); no room while other
 * calls of the user are in flight (try again when one settles); or the user's spending has reached a cap.
 */
export type QuotaReservation =
  | { kind: "reserved"; reservationId: string }
  | { kind: "wait" }
  | { kind: "at_cap"; cap: "tokens" | "cost"; spentTokens: number; spentCost: number | null };

/**
 * A call in flight that has streamed past what it reserved asks for its reservation to be `tokens` (and
 * `cost`) in all. It grows when that fits under the caps beside the user's other calls in flight, or
 * when there are none; otherwise the call must stop, so that at most one call goes past a cap.
 */
export interface QuotaGrowth {
  reservationId: string;
  tokens: number;
  cost: number;
  limits: QuotaLimits;
  now?: Date;
}

/** The answer to a growth: grown (or the reservation was already settled), or no room beside the user's other calls. */
export type QuotaGrowthOutcome = { kind: "grown" } | { kind: "at_cap"; cap: "tokens" | "cost" };

/** What a settled call spent; its cost is null when its model has no known price. */
export interface QuotaSpent {
  tokens: number;
  cost: number | null;
}

/** A session's history as memory reads it: the current epoch, its latest summary, the messages after it. */
export interface SessionHistory {
  epoch: number;
  summary: Summary | undefined;
  /** The current epoch's messages after the summary (all of them without one), oldest first. */
  messages: StoredMessage[];
  /** The history version these were read at (see HistoryStore.historyVersion). */
  version: string;
}

/** Where a run's units are committed (memory's and the trace's records), one transaction each. */
export type { RunWriter } from "./run-unit.js";

/** What memory reads of a session's history and writes beside it. */
export interface HistoryStore {
  sessionHistory(sessionId: string): Promise<SessionHistory>;
  /**
   * A token that stays the same while only this handle writes the session's messages and summaries,
   * and changes when another handle (process, connection) writes them or the session is reset; so a
   * cached history is reloaded exactly when someone else may have changed it.
   */
  historyVersion(sessionId: string): Promise<string>;
  /** A fold's summary, with the summarising call (its run and step, model, tokens, cost) when it made one. */
  saveSummary(
    sessionId: string,
    epoch: number,
    summary: Summary & { firstMessageId: number; call?: SummaryCall },
  ): Promise<void>;
}

/** Long-term facts, per user or shared in a channel. */
export interface FactStore {
  addFact(userId: string, scope: string, content: string, origin?: FactOrigin): Promise<number>;
  /**
   * Forgets a fact: its owner may, anyone in `channel` may for a note shared with it, and an approver
   * may for any note shared with a channel whose scope starts with `approverOf` (their platform,
   * "slack:"); false otherwise or when there is no such fact.
   */
  forgetFact(userId: string, factId: number, channel?: string, approverOf?: string): Promise<boolean>;
  /** The user's own facts and those shared in `channel` that best match the words of `query`, best first. */
  searchFacts(userId: string, channel: string, query: string, limit: number): Promise<Fact[]>;
}

/** The daily caps' ledger, atomic across processes. */
export interface QuotaStore {
  /**
   * Reserves room for a model call under the user's daily caps: the day's spending so far plus what
   * calls in flight reserved must fit; the user's only call in flight is admitted while the caps are not reached.
   */
  reserveQuota(request: QuotaRequest): Promise<QuotaReservation>;
  /** Enlarges a reservation whose call streams past it, by the rule of QuotaGrowth. */
  growQuota(growth: QuotaGrowth): Promise<QuotaGrowthOutcome>;
  /** Ends a reservation; what the call spent (nothing when it never reached the server) joins the day's spending. */
  settleQuota(reservationId: string, spent?: QuotaSpent): Promise<void>;
  /** One user's usage since a moment (top-level runs). */
  userUsageSince(userId: string, since: Date): Promise<UsageTotal>;
}

/** Past runs as examples for tool selection. */
export interface UsageHistory {
  /** The latest `runs` top-level runs as tool-selection examples, oldest first. */
  usageHistory(runs?: number): Promise<UsageExample[]>;
  /** One run as an example; undefined for a sub-agent's, an unknown one, or one that teaches nothing. */
  runUsage(runId: string): Promise<UsageExample | undefined>;
}
