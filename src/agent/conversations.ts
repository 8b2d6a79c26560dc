/**
 * Conversations: what adapters talk to. Each message becomes a run of the shared agent, one run at
 * a time per session (a message that arrives while its session is busy waits its turn), with
 * memory in the store. A dangerous call pauses its run: the approval is written to SQLite and shown
 * by the adapter; a person's click (after a restart too) resumes the run from the store.
 */
import { approvalsAwaited } from "../tools/executor.js";
import type { ApprovalDecision } from "../tools/types.js";
import type { Approval, ClickOrigin, DecisionOutcome } from "./approvals.js";
import { createApprovalBook } from "./approvals.js";
import type { AgentEvent } from "./events.js";
import { resumeAgent, runAgent, type AgentConfig, type PausedRun, type RunResult, type Task } from "./loop.js";
import { quotaProblem, type DailyLimits } from "./quota.js";
import { createSessionQueue } from "./session-queue.js";
import { runOutcomeOf, type Store } from "./store.js";
import { createTraceReader } from "./trace.js";
import type { ErrorCode } from "./errors.js";
import type { Pipelines } from "./sub-agents.js";
import { addUsage, emptyUsage } from "./types.js";

export interface MessageTask extends Omit<Task, "history"> {
  sessionId: string;
  userId: string;
}

/** How one run shows in a chat (a port: each adapter implements it for its platform). */
export interface ChatSurface {
  /** Every event of the run, in order: progress and the streamed answer. */
  onEvent(event: AgentEvent): void;
  /** Shows how the run ended (the answer, an error, "stopped"); resolves once it is posted. */
  finish(result: RunResult): Promise<void>;
  /** Posts Approve / Deny buttons for a waiting call; returns where, so the message can be updated. */
  askApproval(approval: Approval): Promise<string | undefined>;
  /** Says the request waits for a free slot (GLASSBOX_MAX_CONCURRENT_RUNS), once it has waited QUEUED_NOTICE_MS. */
  queued?(runId?: string): void;
}

/** How long a request waits for a slot before the chat says it is queued. */
export const QUEUED_NOTICE_MS = 3_000;

export interface ConversationOptions {
  /** The surface a run of this session shows on (a thread, a DM, a page). */
  openSurface?: (sessionId: string, userId: string) => ChatSurface;
  /** Updates an approval's message once it is decided, expired or no longer needed. */
  showDecision?: (approval: Approval) => Promise<void>;
  /** Users who may decide any approval (besides the person who asked). */
  approvers?: string[];
  /** How long an approval waits for a decision (default 3,600 s). */
  approvalTtlSeconds?: number;
  /** The sessions whose approvals this instance expires, by key prefix ("slack:"). */
  sessionPrefix?: string;
  onError?: (error: unknown, context: string) => void;
  /** Daily caps per user; a user over one gets one sentence and no model call. */
  dailyLimits?: DailyLimits;
  /** Named pipelines a message can run: "/pipeline <name> <input>". */
  pipelines?: Pipelines;
  /**
   * The sessions this instance runs, when several share the store (one per worker thread): it
   * expires only their approvals, so a run is only ever resumed where its session's turns are kept.
   */
  owns?: (sessionId: string) => boolean;
  /** How long a request waits for a run slot before its surface says it is queued (default QUEUED_NOTICE_MS). */
  queuedNoticeMs?: number;
}

/** A person's click on Approve or Deny; `origin` is where the platform says it came from (omitted only by trusted callers). */
export interface Decision {
  approvalId: string;
  userId: string;
  approved: boolean;
  origin?: ClickOrigin;
}

const PIPELINE_COMMAND = /^\/pipeline\s+(\S+)\s+([\s\S]+)$/i;

export interface Conversations {
  send(task: MessageTask): Promise<RunResult>;
  /** A person's click on Approve or Deny. When it settles the last open approval of its run, the run resumes. */
  decide(decision: Decision): Promise<DecisionOutcome & { resumed?: Promise<RunResult | undefined> }>;
  /** Expires approvals past their time (their runs resume with `denied`); returns how many expired. */
  expireApprovals(now?: Date): Promise<number>;
  /** Cancels the session's running run; false when nothing was running. */
  stop(sessionId: string): boolean;
  /**
   * A new start: later runs see none of the session's earlier messages (which are kept). Stops the
   * running run; resolves once the reset is written (false when there was no such session).
   */
  reset(sessionId: string): Promise<boolean>;
  busy(sessionId: string): boolean;
  /** Resolves when every queued run has finished (for shutdown and tests). */
  idle(): Promise<void>;
}

/**
 * What a chat adapter asks of the conversations, whether they run in its own thread (Conversations)
 * or spread over worker threads, where each answer comes back later.
 */
export interface ConversationService {
  send(task: Pick<MessageTask, "sessionId" | "userId" | "input">): Promise<RunResult>;
  decide(decision: Decision): Promise<DecisionOutcome>;
  expireApprovals(now?: Date): Promise<number>;
  stop(sessionId: string): boolean | Promise<boolean>;
  busy(sessionId: string): boolean | Promise<boolean>;
  idle(): Promise<void>;
}

/** A pipeline run from a chat message, shown as one run: the last stage's answer, every stage's tokens. */
async function pipelineTurn(pipelines: Pipelines, name: string, input: string, task: MessageTask): Promise<RunResult> {
  const ran = await pipelines.run(name, input.trim(), task);
  if (!ran) return refusal(task, `There is no pipeline '${name}'; the pipelines are: ${pipelines.names().join(", ") || "none"}.`, "configuration");
  const results = ran.stages.map((stage) => stage.result);
  const last = results.at(-1);
  return {
    runId: last?.runId ?? "",
    sessionId: task.sessionId,
    output: ran.output,
    stopReason: last?.stopReason ?? "error",
    steps: results.reduce((sum, result) => sum + result.steps, 0),
    usage: results.reduce((sum, result) => addUsage(sum, result.usage), emptyUsage()),
    toolCalls: results.flatMap((result) => result.toolCalls),
  };
}

/** A run that never started: the reason is its output, and nothing was spent. */
function refusal(task: MessageTask, message: string, code: ErrorCode = "quota"): RunResult {
  return { runId: task.runId ?? "", sessionId: task.sessionId, output: message, stopReason: "error", steps: 0, usage: emptyUsage(), toolCalls: [], error: { code, message } };
}

const noSurface: ChatSurface = { onEvent: () => {}, finish: async () => {}, askApproval: async () => undefined };

export function createConversations(agent: AgentConfig, store: Store, options: ConversationOptions = {}): Conversations {
  const queue = createSessionQueue();
  const running = new Map<string, AbortController>();
  const book = createApprovalBook(store);
  const traces = createTraceReader(store);
  const openSurface = options.openSurface ?? (() => noSurface);
  const showDecision = options.showDecision ?? (async () => {});
  const onError = options.onError ?? (() => {});
  const ttlSeconds = options.approvalTtlSeconds ?? 3_600;
  // Chat approvals wait for a person: the run pauses (durably: a click resumes it, after a restart
  // too). A specialist's dangerous call pauses the specialist's run, and with it the run it works for.
  const chatAgent: AgentConfig = { ...agent, approve: agent.approve ?? (async () => "pending") };

  /** Runs `body` as the session's turn, cancellable by stop(). */
  function inTurn(sessionId: string, body: (signal: AbortSignal) => Promise<RunResult | undefined>, outer?: AbortSignal) {
    return queue.run(sessionId, async () => {
      const controller = new AbortController();
      running.set(sessionId, controller);
      try {
        return await body(outer ? AbortSignal.any([outer, controller.signal]) : controller.signal);
      } finally {
        running.delete(sessionId);
      }
    });
  }

  /** After a run: a pause opens its approvals (buttons), then the surface shows the outcome. */
  async function settle(result: RunResult, surface: ChatSurface): Promise<RunResult> {
    if (result.paused) {
      for (const approval of book.open(approvalsAwaited(result.paused.pending), ttlSeconds)) {
        if (approval.messageRef) continue; // already shown (a resumed run asks only for new calls)
        const messageRef = await surface.askApproval(approval).catch((error: unknown) => onError(error, "showing an approval"));
        if (messageRef) book.attachMessage(approval.id, messageRef);
      }
    }
    await surface.finish(result).catch((error: unknown) => onError(error, "showing a run's end"));
    return result;
  }

  /**
   * Runs `work` once one of the process's run slots is free (agent.runSlots), in arrival order; the
   * surface hears that the request is queued if that takes a while. Cancelled while waiting, it never starts.
   */
  async function inSlot(signal: AbortSignal, surface: ChatSurface, task: MessageTask, work: () => Promise<RunResult>): Promise<RunResult> {
    const slots = agent.runSlots;
    if (!slots) return work();
    const notice = setTimeout(() => surface.queued?.(task.runId), options.queuedNoticeMs ?? QUEUED_NOTICE_MS);
    let release: () => void;
    try {
      release = await slots.acquire(signal);
    } catch {
      return settle(neverStarted(task, "The request was cancelled before it started.", "cancelled"), surface);
    } finally {
      clearTimeout(notice);
    }
    try {
      return await work();
    } finally {
      release();
    }
  }

  /** A run that never started: an accepted row (the HTTP API's) ends with the reason; nothing was spent. */
  function neverStarted(task: MessageTask, message: string, code: ErrorCode): RunResult {
    const { error, ...rest } = refusal(task, message, code);
    // A request cancelled while it waited ends as a cancelled run does: no error to report.
    const result: RunResult = code === "cancelled" ? { ...rest, stopReason: "cancelled" } : { ...rest, error };
    if (task.runId) store.endUnstartedRun(runOutcomeOf(result));
    return result;
  }

  /** A new message makes the session's waiting approvals moot: they expire and their run ends there. */
  async function supersede(sessionId: string): Promise<void> {
    for (const approval of book.supersede(sessionId)) await showDecision(approval).catch((error: unknown) => onError(error, "updating an approval"));
  }

  /** Continues the paused run an approval belongs to: a specialist's approval, the run it works for. */
  function resume(runId: string, sessionId: string): Promise<RunResult | undefined> {
    return inTurn(sessionId, async (signal) => {
      const chain = [runId];
      for (let parent = traces.run(runId)?.parentRunId; parent && store.pausedRun(parent); parent = traces.run(parent)?.parentRunId) chain.push(parent);
      const root = chain.at(-1) as string;
      const stored = store.pausedRun(root);
      if (!stored) return undefined; // resumed already, or superseded by a newer message
      const paused = JSON.parse(stored) as PausedRun;
      const surface = openSurface(sessionId, paused.userId);
      const decisions = Object.assign({}, ...chain.map((id) => book.decisionsOf(id))) as Record<string, ApprovalDecision>;
      // Cancelled while waiting for a slot, the run stays paused with its decisions stored.
      return inSlot(signal, surface, { sessionId, userId: paused.userId, input: "" }, async () =>
        settle(await resumeAgent(chatAgent, paused, decisions, { signal, onEvent: (event) => surface.onEvent(event) }), surface),
      );
    });
  }

  return {
    send(task) {
      return inTurn(
        task.sessionId,
        async (signal) => {
          await supersede(task.sessionId);
          const surface = openSurface(task.sessionId, task.userId);
          const overQuota = options.dailyLimits && quotaProblem(traces, task.userId, options.dailyLimits);
          if (overQuota) return settle(neverStarted(task, overQuota, "quota"), surface);
          const onEvent = (event: AgentEvent) => {
            surface.onEvent(event);
            task.onEvent?.(event);
          };
          return inSlot(signal, surface, task, async () => {
            const command = options.pipelines && task.input.trim().match(PIPELINE_COMMAND);
            if (command && options.pipelines) return settle(await pipelineTurn(options.pipelines, command[1] ?? "", command[2] ?? "", { ...task, signal, onEvent }), surface);
            return settle(await runAgent(chatAgent, { ...task, signal, onEvent }), surface);
          });
        },
        task.signal,
      ) as Promise<RunResult>;
    },

    async decide({ approvalId, userId, approved, origin }) {
      const outcome = book.decide(approvalId, userId, approved, options.approvers ?? [], origin);
      if (outcome.kind !== "decided") return outcome;
      await showDecision(outcome.approval).catch((error: unknown) => onError(error, "updating an approval"));
      if (!outcome.runReady) return outcome;
      const resumed = resume(outcome.approval.runId, outcome.approval.sessionId).catch((error: unknown) => {
        onError(error, "resuming a run");
        return undefined;
      });
      return { ...outcome, resumed };
    },

    async expireApprovals(now = new Date()) {
      const expired = book.expire(options.sessionPrefix ?? "", now, options.owns);
      const runs = new Map<string, string>();
      for (const approval of expired) {
        await showDecision(approval).catch((error: unknown) => onError(error, "updating an approval"));
        runs.set(approval.runId, approval.sessionId);
      }
      for (const [runId, sessionId] of runs) {
        if (book.ofRun(runId).every((approval) => approval.status !== "pending")) void resume(runId, sessionId).catch((error: unknown) => onError(error, "resuming a run"));
      }
      return expired.length;
    },

    stop(sessionId) {
      const controller = running.get(sessionId);
      controller?.abort();
      return controller !== undefined;
    },

    reset(sessionId) {
      running.get(sessionId)?.abort();
      // Returned, not dropped: a store that cannot write must reach the caller, not crash the
      // process as an unhandled rejection.
      return queue.run(sessionId, async () => {
        await supersede(sessionId);
        return store.resetSession(sessionId);
      });
    },

    busy: (sessionId) => queue.busy(sessionId),
    idle: () => queue.idle(),
  };
}
