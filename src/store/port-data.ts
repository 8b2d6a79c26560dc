/**
 * The plain data that goes in and out of the store port: what a run writes in one transaction,
 * what accepting an event does, quota reservations, cancel requests, and the trace viewer's
 * listings. Rows and SQL stay inside the implementations.
 */
import type { Approval, ClickOrigin } from "../agent/approvals.js";
import type { RunOutcome, RunRecord } from "../agent/store.js";
import type { StepTrace } from "../agent/trace.js";
import type { Message, ToolSpec } from "../agent/types.js";
import type { ApprovalRequest, ToolCallRecord } from "../tools/types.js";

export type { Approval, ApprovalStatus, ClickOrigin, DecisionOutcome } from "../agent/approvals.js";
export type { ApprovalDecision, ApprovalRequest, ToolCallRecord } from "../tools/types.js";
export type { Fact, RunOutcome, RunRecord, SessionInfo, StoredMessage, Summary, SummaryCall } from "../agent/store.js";
export type { RequestedCall, RunTrace, StepTrace, UsageTotal } from "../agent/trace.js";
export type { UsageExample } from "../tools/usage-learning.js";

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

/**
 * An incoming event accepted in one transaction: its platform ids claimed, its run recorded as
 * `accepted` (owned by this process until a worker starts it), its message stored.
 */
export interface EventAcceptance {
  /** Platform event ids; the event is a duplicate when any of them was claimed before (all are claimed). */
  eventIds: string[];
  run?: RunRecord;
  /** The event's message, stored in the run's session under the run. Needs `run`. */
  message?: MessageEntry;
  /** Refuse (writing nothing) when the session's first run belongs to another user than this one. */
  sessionOwner?: string;
}

export type AcceptOutcome =
  | { kind: "accepted"; messageId: number | null }
  /** Some id was claimed before: the new ids are claimed too, nothing else is written. */
  | { kind: "duplicate" }
  | { kind: "not_owner"; owner: string };

/** A person's click on Approve or Deny, with who may decide besides the requester. */
export interface DecisionRequest {
  approvalId: string;
  userId: string;
  approved: boolean;
  approvers: string[];
  origin?: ClickOrigin;
  now?: Date;
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

/** What a settled call spent; its cost is null when its model has no known price. */
export interface QuotaSpent {
  tokens: number;
  cost: number | null;
}

/** A stop asked for: the session's running (or accepted) runs, or one run of it. */
export interface CancelTarget {
  sessionId: string;
  runId?: string;
}

/** Heard when a cancel request is made (through any handle on the same database). */
export interface CancelNotice {
  sessionId: string;
  runIds: string[];
}

/** What a worker can do: its tools' names, and requests they can carry out (to suggest asking). */
export interface WorkerOffer {
  tools: string[];
  hints: string[];
}

/**
 * A piece of a run's answer as the model streams it, for pages that follow the session (in this
 * process or another). Never stored: one missed is simply missed (the whole answer comes with the
 * run's end). An empty `text` says the run stored something a page shows (a step, a call, its end):
 * the session is worth reading now.
 */
export interface TextNotice {
  sessionId: string;
  runId: string;
  step: number;
  text: string;
  /** With a run's end: the error it ended with (its code and sentence), which the run's row does not carry. */
  error?: { code: string; message: string };
}

export type SessionStatusFilter = "error" | "awaiting_approval";

/** The trace viewer's session filters (see adapters/web/session-search.ts, which parses them from a query). */
export interface SessionFilters {
  /** Text any of the session's messages (or a run's input or output, or its id) contains; case-insensitive for ASCII. */
  text?: string;
  adapter?: string;
  status?: SessionStatusFilter;
  /** A tool some step of the session called. */
  tool?: string;
  /** Activity (a run or a message) at or after this moment (ISO 8601). */
  from?: string;
  /** Activity before this moment (ISO 8601). */
  to?: string;
  /** Only sessions this user started. */
  startedBy?: string;
  /** Only sessions with a run someone rated so (👍 up, 👎 down). */
  rated?: "up" | "down";
  limit: number;
}

export interface SessionListing {
  id: string;
  adapter: string;
  /** The first run's input (or the first user message), cut to 200 characters. */
  firstMessage: string | null;
  startedBy: string | null;
  runCount: number;
  messageCount: number;
  lastActivity: string;
  promptTokens: number;
  completionTokens: number;
  /** null when a run's model has no known price. */
  cost: number | null;
  hasErrors: boolean;
  awaitingApproval: boolean;
}

/** Where memory folded older turns into the summary (see adapters/web/session-folds.ts). */
export interface Fold {
  runId: string | null;
  step: number | null;
  at: string;
  summary: string;
  summaryTokens: number;
  foldedMessages: number;
  summaryFailed: boolean;
  /** The summarising call (null for a failed one, or a summary written before calls were kept). */
  call: { model: string; promptTokens: number; completionTokens: number; cost: number | null } | null;
}
