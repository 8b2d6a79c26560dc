/**
 * The store port: everything glassbox persists, as coarse async operations, each one transaction.
 * Two implementations pass one contract suite (test/e2e/store/contract.test.ts): SQLite (sqlite.ts, the
 * embedded default) and PostgreSQL (postgres.ts, for several processes on one database). Plain data
 * in and out; no SQL or driver type crosses it.
 */
import type { ApprovalDecision, ApprovalRequest } from "../tools/types.js";
import type {
  AcceptOutcome,
  Approval,
  CancelNotice,
  CancelTarget,
  DecisionOutcome,
  DecisionRequest,
  EventAcceptance,
  ErasedWork,
  EraseTarget,
  ErasureReceipt,
  Fold,
  QuotaGrowth,
  QuotaGrowthOutcome,
  QuotaRequest,
  QuotaReservation,
  QuotaSpent,
  RecordedRequest,
  RunOutcome,
  RunTrace,
  SessionFilters,
  SessionInfo,
  SessionListing,
  StepTrace,
  StoredMessage,
  TextNotice,
  UsageTotal,
  Schedule,
  SpendScope,
  Spender,
  Spent,
  WorkerOffer,
} from "./port-data.js";
import type { Message } from "../agent/types.js";
import type { ThreadReading } from "../agent/thread-context.js";
import type { FactStore, HistoryStore, RunWriter, UsageHistory } from "../agent/contracts.js";
import type { Feedback, FeedbackSource, Rating } from "../agent/feedback.js";

export type { Feedback, FeedbackSource, Rating } from "../agent/feedback.js";

export interface FeedbackInput {
  runId: string;
  userId: string;
  rating: Rating;
  reason?: unknown;
  source: FeedbackSource;
}

export type * from "./port-data.js";
export type { FactStore, HistoryStore, QuotaStore, RunWriter, UsageHistory } from "../agent/contracts.js";

/** Conversations: their messages, summaries and sessions (memory's HistoryStore, and what the turns need beside it). */
export interface ConversationStore extends HistoryStore {
  /** Appends messages in one transaction (creating the session on first use); returns their ids, ascending. */
  appendMessages(
    sessionId: string,
    runId: string | null,
    entries: Array<{ message: Message; tokens: number }>,
  ): Promise<number[]>;
  /** The epoch's messages with an id above `afterId`, oldest first. */
  messagesAfter(sessionId: string, epoch: number, afterId: number): Promise<StoredMessage[]>;
  /** A new start: later runs see none of the session's earlier messages (which are kept); false for an unknown session. */
  resetSession(sessionId: string): Promise<boolean>;
  /** Runs and tokens of one session, across resets (sub-agents' runs left out). */
  sessionUsage(sessionId: string): Promise<{ runs: number; promptTokens: number; completionTokens: number }>;
  listSessions(): Promise<SessionInfo[]>;
  /** The user who started the session's first run; undefined for a session without runs. */
  sessionOwner(sessionId: string): Promise<string | undefined>;
}

/**
 * The SQLite store's view of a transaction for whoever writes beside it (the in-process run queue):
 * work to do once it has committed.
 */
export interface AfterCommit {
  afterCommit(callback: () => void): void;
}

export interface RunStore<Transaction> extends RunWriter {
  /**
   * Claims an event, records its run and stores its message, in one transaction (see
   * EventAcceptance). For an accepted event, `alsoInTransaction` adds its own writes (the run
   * queue's job) to that transaction: PostgreSQL passes its client inside BEGIN; SQLite an
   * after-commit hook, called once the acceptance has committed.
   */
  acceptEvent(
    acceptance: EventAcceptance,
    alsoInTransaction?: (transaction: Transaction) => Promise<void>,
  ): Promise<AcceptOutcome>;
  /** Ends an accepted run that never started (refused, or failed before it began); false when it had started. */
  endUnstartedRun(outcome: RunOutcome): Promise<boolean>;
  /** The JSON of a run that waits for approval; undefined once it no longer waits. */
  pausedRun(runId: string): Promise<string | undefined>;
  /**
   * Marks `interrupted` the runs still running or accepted whose process is gone (its heartbeat is
   * stale, or its pid is gone from this host), and forgets gone processes; returns how many runs.
   */
  interruptOrphanedRuns(): Promise<number>;
  /** Records that this process is alive (a long-running handle beats by itself). */
  heartbeat(): Promise<void>;
}

export interface ApprovalStore<Transaction> {
  /** One pending approval per request (idempotent: a call is asked once). */
  openApprovals(requests: ApprovalRequest[], ttlSeconds: number, now?: Date): Promise<Approval[]>;
  approval(id: string): Promise<Approval | undefined>;
  approvalsOfRun(runId: string): Promise<Approval[]>;
  pendingApprovalsOfSession(sessionId: string): Promise<Approval[]>;
  /** Where the buttons were posted, to update them later and to check where a click comes from. */
  attachApprovalMessage(id: string, messageRef: string): Promise<void>;
  /**
   * A click, decided exactly once: only the first decision of a pending, unexpired approval whose
   * run still waits for exactly this call counts. `runReady` is true for exactly one decision: the
   * one that settles the run's last pending approval; for that one, `alsoInTransaction` adds its
   * own writes (the resume's job) to the decision's transaction, as acceptEvent does.
   */
  decideApproval(
    request: DecisionRequest,
    alsoInTransaction?: (transaction: Transaction, decided: Approval) => Promise<void>,
  ): Promise<DecisionOutcome>;
  /** Pending approvals of sessions under `sessionPrefix` past their time, that `owns` accepts, marked expired; returns them. */
  expireApprovals(sessionPrefix: string, now?: Date, owns?: (sessionId: string) => boolean): Promise<Approval[]>;
  /** The decisions of a run's settled approvals, keyed by tool_call_id, as the executor takes them. */
  decisionsOf(runId: string): Promise<Record<string, ApprovalDecision>>;
  /** A newer message makes the session's pending approvals moot: they expire, and their paused runs end (superseded). */
  supersedeApprovals(sessionId: string, now?: Date): Promise<Approval[]>;
}

export interface ErasureStore<Transaction> {
  /**
   * Removes the target's data from every table (see EraseTarget) in one transaction, and keeps an
   * audit row: who erased, when, the kind, a hash of the target and the counts. On SQLite the freed
   * pages are overwritten and the log is emptied where no other connection holds it.
   * `alsoInTransaction` removes what others keep of the erased work (the run queue's turns) and
   * answers its counts, which join the receipt and the audit row: PostgreSQL runs it inside the
   * erasure's transaction, SQLite once the erasure has committed (its queue is this process's memory).
   */
  erase(
    target: EraseTarget,
    by: string,
    alsoInTransaction?: (transaction: Transaction, erased: ErasedWork) => Promise<Record<string, number>>,
  ): Promise<ErasureReceipt>;
}

export interface GateStore {
  /** True for the first claim of the ids, false when any was claimed before; all are claimed, in one commit. */
  claim(...eventIds: string[]): Promise<boolean>;
  /** Forgets claims older than a moment; returns how many. */
  pruneClaims(olderThan: Date): Promise<number>;
  /**
   * Reserves room for a model call under the user's daily caps, atomically across processes: the
   * day's spending so far (the stored runs', when the user is first seen that day, plus every
   * settled call) plus what calls in flight reserved must fit; the user's only call in flight is
   * admitted while the caps are not reached.
   */
  reserveQuota(request: QuotaRequest): Promise<QuotaReservation>;
  /**
   * Enlarges the reservation of a call streaming past it: granted when it fits beside the user's other
   * calls in flight, or when there are none (that one call may pass a cap); otherwise refused, and the call stops.
   */
  growQuota(growth: QuotaGrowth): Promise<QuotaGrowthOutcome>;
  /** Ends a reservation; what the call spent (nothing when it never reached the server) joins the day's spending. */
  settleQuota(reservationId: string, spent?: QuotaSpent): Promise<void>;
  /** Asks the running (or accepted) runs of the target to stop; returns their ids (none: nothing was running). */
  requestCancel(target: CancelTarget): Promise<string[]>;
  /**
   * Whether a stop was asked for the run. While this handle's watchCancels listens, a run already asked
   * about and named in no notice since is not read again: a stop asked since would have come as one.
   */
  cancelRequested(runId: string): Promise<boolean>;
  /** Calls `listener` for every cancel request made on this database from now on; resolves with the way to stop. */
  watchCancels(listener: (notice: CancelNotice) => void): Promise<() => Promise<void>>;
  pruneCancelRequests(olderThan: Date): Promise<number>;
  /** Records what this process's worker can do, with its instance, for ingress processes to show while it lives. */
  offerTools(offer: WorkerOffer): Promise<void>;
  /** What the live workers on this database can do, all of them together (none: nothing). */
  toolsOffered(): Promise<WorkerOffer>;
  /**
   * Tells every process watching this database's text (watchText) a piece of a streaming answer,
   * or (empty text) that a run stored something new; nothing is stored.
   */
  publishText(notice: TextNotice): Promise<void>;
  /** Calls `listener` for every piece of answer text published on this database from now on; resolves with the way to stop. */
  watchText(listener: (notice: TextNotice) => void): Promise<() => Promise<void>>;
}

/** What the trace viewer, the HTTP API and the command line read. */
export interface TraceReadings extends UsageHistory {
  run(runId: string): Promise<RunTrace | undefined>;
  runsOfSession(sessionId: string): Promise<RunTrace[]>;
  /** The runs of sub-agents that worked for a run. */
  childrenOf(runId: string): Promise<RunTrace[]>;
  /** A pipeline's stages so far, in order, by its first stage's run. */
  stagesOf(pipelineRunId: string): Promise<RunTrace[]>;
  /**
   * The newest reading of a session's thread that got through (`through` set): the next mention reads
   * after it. Given `channel` (a place: `slack:T1:C1`, `discord:G1:C1`), the newest reading of that
   * channel's history (`channel` set) in its sessions (the place itself, and those under it) instead.
   */
  latestThreadReading(sessionId: string, channel?: string): Promise<ThreadReading | undefined>;
  /** A run's steps in order, from step `fromStep` on (default: all of them). */
  steps(runId: string, fromStep?: number): Promise<StepTrace[]>;
  /** The exact request a step sent to the model (older steps: its messages alone). */
  payload(runId: string, step: number): Promise<RecordedRequest | Message[] | undefined>;
  totalsByRun(): Promise<UsageTotal[]>;
  totalsBySession(): Promise<UsageTotal[]>;
  totalsByUser(userId?: string): Promise<UsageTotal[]>;
  totalsByDay(userId?: string): Promise<UsageTotal[]>;
  userUsageSince(userId: string, since: Date): Promise<UsageTotal>;
  /**
   * What the model calls of a place or a person cost since a moment, counted by their stored steps
   * (runs under way included). `cost` sums the steps with a known price: one without adds nothing.
   */
  spentSince(scope: SpendScope, since: Date): Promise<Spent>;
  /** Who spent where since a moment: each session and person with a model call since then (for budgets' standings). */
  spendersSince(since: Date): Promise<Spender[]>;
  searchSessions(filters: SessionFilters): Promise<{ sessions: SessionListing[]; more: boolean }>;
  foldsOf(sessionId: string): Promise<Fold[]>;
}

/** Runs on a schedule (conversations/schedules.ts fires them through the run queue). */
export interface ScheduleStore {
  /** Adds a schedule, or replaces the one with its id (its last tick kept when it had one). */
  saveSchedule(schedule: Schedule): Promise<void>;
  /** Every schedule, or those whose session starts with `sessionPrefix` (a channel's), oldest first. */
  schedules(sessionPrefix?: string): Promise<Schedule[]>;
  /** false when there is no such schedule. */
  pauseSchedule(id: string, paused: boolean): Promise<boolean>;
  deleteSchedule(id: string): Promise<boolean>;
  /** Moves the schedule's last tick to `tick` when it is later; false when another process got there first (or it is gone). */
  advanceSchedule(id: string, tick: string): Promise<boolean>;
}

/** What people said about answers: 👍 / 👎 per run and person, the latest click counting. */
export interface FeedbackStore {
  /** Records a person's rating (and reason), replacing theirs; "unknown_run" when there is no such run. */
  recordFeedback(input: FeedbackInput): Promise<"recorded" | "unknown_run">;
  /** Adds a reason to the person's 👎 of the run; false when they have none (it was changed to 👍 since). */
  explainFeedback(runId: string, userId: string, reason: unknown): Promise<boolean>;
  feedbackOf(runId: string): Promise<Feedback[]>;
  /** The runs rated down (anyone's 👎), up (only 👍) or at all, newest rating first. */
  ratedRuns(which: Rating | "all", limit: number): Promise<string[]>;
  /** How many 👍 and 👎 were given since a moment (ISO time; all by default). */
  feedbackCounts(since?: string): Promise<{ up: number; down: number }>;
}

/** `Transaction`: what acceptEvent and decideApproval hand to writes that join their transaction. */
export interface StorePort<Transaction = unknown>
  extends ConversationStore,
    FactStore,
    RunStore<Transaction>,
    ApprovalStore<Transaction>,
    ErasureStore<Transaction>,
    GateStore,
    TraceReadings,
    FeedbackStore,
    ScheduleStore {
  readonly kind: "sqlite" | "postgres";
  /** Where the data is, for messages to people: a file path, or a database URL without its password. */
  readonly location: string;
  /** Resolves once the database answers a statement (readiness); rejects when it does not. */
  ping(): Promise<void>;
  /** Ends the handle: waiting writes are committed first. */
  close(): Promise<void>;
}
