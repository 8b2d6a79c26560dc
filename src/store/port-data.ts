/**
 * The plain data that goes in and out of the store port: what a run writes in one transaction,
 * what accepting an event does, quota reservations, cancel requests, and the trace viewer's
 * listings. Rows and SQL stay inside the implementations.
 */
import type { ClickOrigin } from "../agent/approvals.js";
import type { MessageEntry, RunRecord } from "../agent/contracts.js";

export type { Approval, ApprovalStatus, ClickOrigin, DecisionOutcome } from "../agent/approvals.js";
export type { ApprovalDecision, ApprovalRequest, ToolCallRecord } from "../tools/types.js";
export type {
  Fact,
  FactOrigin,
  MessageEntry,
  QuotaGrowth,
  QuotaGrowthOutcome,
  QuotaLimits,
  QuotaRequest,
  QuotaReservation,
  QuotaSpent,
  RecordedRequest,
  RecordOutcome,
  RunOutcome,
  RunRecord,
  RunWrite,
  SessionHistory,
  SessionInfo,
  StepRecord,
  StoredMessage,
  Summary,
  SummaryCall,
} from "../agent/contracts.js";
export type { RequestedCall, RunTrace, StepTrace, UsageTotal } from "../agent/trace.js";

/**
 * Whose spending is counted: a place's (the session key `place` and every key under it, `place:...`:
 * a channel's threads, a workspace's channels), a person's, or both.
 */
export interface SpendScope {
  place?: string;
  userId?: string;
}

/**
 * A run on a schedule: `prompt` asked as `userId` in session `sessionId` at each tick of `cron` in
 * `timezone`. `lastTick` is the latest tick fired or passed over (a new schedule starts at its
 * creation), so a tick is fired at most once whichever process sees it first.
 */
export interface Schedule {
  id: string;
  sessionId: string;
  userId: string;
  cron: string;
  timezone: string;
  prompt: string;
  /** A tick missed while nothing ran: fired once when the schedule is next seen, or passed over. */
  missed: "once" | "skip";
  paused: boolean;
  /** Who made it: a person in chat, or the channel settings (by their file). */
  source: string;
  createdAt: string;
  lastTick: string;
  /** What the settings file calls it (a schedule made in chat has none). */
  name?: string;
}

/** A person who spent in a session (spendersSince). */
export interface Spender {
  sessionId: string;
  userId: string;
}

/** Tokens and dollars spent; `cost` sums the steps with a known price (a step without one adds nothing). */
export interface Spent {
  tokens: number;
  cost: number;
}
export type { UsageExample } from "../tools/usage-learning.js";

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
  /** The platform's approvers: who may decide a call whose tool names none (user ids, `group:...`, `role:...`). */
  approvers: string[];
  /**
   * The groups and roles named as approvers (`group:S...`, `role:...`) that the person clicking is in,
   * as the platform established them from its own credentials (never from the click's body); none when absent.
   */
  memberOf?: string[];
  /** Whether a requester may decide their own call when its tool does not say (GLASSBOX_REQUESTER_MAY_APPROVE; true when absent). */
  requesterMayApprove?: boolean;
  origin?: ClickOrigin;
  now?: Date;
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
  /** The run waits for a run slot (GLASSBOX_MAX_CONCURRENT_RUNS), which the store does not say: pages show it queued. */
  queued?: true;
  /** Said to the person after the run's answer (a budget past 80 %), which no stored row keeps. */
  note?: string;
}

export type SessionStatusFilter = "error" | "awaiting_approval";

/** The trace viewer's session filters (the web API parses them from a query). */
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

/** Where memory folded older turns into the summary (see sqlite-folds.ts). */
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

/**
 * What to erase: one conversation (`session`), every conversation of a channel (`segment`: a part
 * of the session key, such as a Slack channel id) or of a workspace (`workspace`: a Slack team or
 * Discord guild id, the same way; its Slack installation goes too), or a person (`user`: their runs and what came of them,
 * their notes, their quota records, their ratings; their id where they decided someone else's call
 * becomes "erased"), or the conversations nobody has touched since a moment (`idle`:
 * GLASSBOX_RETENTION_DAYS).
 */
export type EraseTarget =
  | { kind: "session"; id: string }
  | { kind: "segment"; id: string }
  | { kind: "workspace"; id: string }
  | { kind: "user"; id: string }
  /** Retention: every conversation last active before `id` (an ISO moment) with no run in progress. */
  | { kind: "idle"; id: string };

/** What an erasure took from the conversations, for whoever keeps work for them (the run queue's turns). */
export interface ErasedWork {
  /** The conversations removed whole. */
  conversations: string[];
  /** The runs removed (in conversations removed whole, and a person's elsewhere). */
  runs: string[];
}

/** What an erasure did, table by table; the audit row keeps these counts and a hash of the target. */
export interface ErasureReceipt {
  kind: EraseTarget["kind"];
  at: string;
  /** Rows removed, per table (`queued_turns`: the run queue's turns of what went). */
  removed: Record<string, number>;
  /** Rows of other people's runs in which the erased person's id was replaced by "erased", per table. */
  anonymised: Record<string, number>;
}
