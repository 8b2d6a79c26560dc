/**
 * Conversations: what adapters talk to. Each message becomes a run of the shared agent, one run at
 * a time per session (a message that arrives while its session is busy waits its turn), with
 * memory in the store. A dangerous call pauses its run: the approval is written to the store and
 * shown by the adapter; a person's click (after a restart too) resumes the run from the store.
 * Everything goes through the store port (SQLite or PostgreSQL). This file schedules (the session
 * queue, what runs, run slots through the bodies); the turns themselves are in conversation-turns.ts,
 * and the turns a run queue hands a worker (runQueued) in conversation-queued.ts.
 */
import type { TurnWork } from "./turns.js";
import type { StorePort } from "../store/port.js";
import type { Approval, ClickOrigin, DecisionOutcome } from "../agent/approvals.js";
import { createQueuedTurns, type ReceiveFiles } from "./queued-turns.js";
import { createTurnBodies } from "./turn-bodies.js";
import type { AgentEvent } from "../agent/events.js";
import type { AgentConfig, RunResult, Task } from "../agent/loop.js";
import type { DailyLimits } from "../agent/quota.js";
import { stoppedFromStore } from "./cancel-from-store.js";
import { createSessionQueue } from "./session-queue.js";
import type { Pipelines } from "../agent/sub-agents.js";

export { QUEUED_NOTICE_MS } from "./turn-bodies.js";

export interface MessageTask extends Omit<Task, "history"> {
  sessionId: string;
  userId: string;
}

/** How one run shows in a chat (a port: each adapter implements it for its platform). */
export interface ChatSurface {
  /** Every event of the run, in order: progress and the streamed answer. */
  onEvent(event: AgentEvent): void;
  /**
   * Shows how the run ended (the answer, an error, "stopped"); resolves once it is posted. A surface
   * that can tells `posted` the moment the outcome's message is posted, before anything after it
   * (a queued turn records then that the answer was shown; see conversation-queued.ts).
   */
  finish(result: RunResult, posted?: () => Promise<unknown>): Promise<void>;
  /** Posts Approve / Deny buttons for a waiting call; returns where, so the message can be updated. */
  askApproval(approval: Approval): Promise<string | undefined>;
  /** Says the request waits for a free slot (GLASSBOX_MAX_CONCURRENT_RUNS), once it has waited QUEUED_NOTICE_MS. */
  queued?(runId?: string): void;
  /**
   * Whether the conversation already shows run `runId`'s rated answer (the message carrying its
   * feedback buttons), looking at what was posted since `since` (the run's start). Asked only before a
   * redelivered turn posts a stored answer, which a worker that died may have posted already; rejects
   * when the conversation cannot be read (the caller then posts).
   */
  shownAlready?(runId: string, since: Date): Promise<boolean>;
}

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
  /** A worker: fetches the files of a queued message (ingress passed only their references). */
  receiveFiles?: ReceiveFiles;
  /** Whether each model call first asks the store if its run was stopped from elsewhere (default: on PostgreSQL). */
  cancelFromStore?: boolean;
}

/** A person's click on Approve or Deny; `origin` is where the platform says it came from (omitted only by trusted callers). */
export interface Decision {
  approvalId: string;
  userId: string;
  approved: boolean;
  origin?: ClickOrigin;
}

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
  /**
   * Runs one turn the run queue handed this process (ingress accepted it, see src/conversations/turns.ts):
   * no session queue of its own, the run queue keeps the conversation's order. Idempotent, as a turn
   * is delivered at least once (see conversation-queued.ts).
   */
  runQueued(work: TurnWork, context: { signal: AbortSignal; delivery: number }): Promise<RunResult | undefined>;
  /** Aborts run `runId` if it runs in this process (a cancel heard from another process); false otherwise. */
  stopRun(runId: string): boolean;
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

/** Everything here goes through the store port. */
export function createConversations(
  agent: AgentConfig,
  store: StorePort,
  options: ConversationOptions = {},
): Conversations {
  const queue = createSessionQueue();
  const bySession = new Map<string, AbortController>();
  const byRun = new Map<string, AbortController>();
  const queuedTurns = new Set<Promise<unknown>>();
  const onError = options.onError ?? (() => {});
  // Chat approvals wait for a person: the run pauses (durably: a click resumes it, after a restart
  // too). A specialist's dangerous call pauses the specialist's run, and with it the run it works for.
  // On PostgreSQL a stop may be asked from another process: each model call asks the store first.
  const stopRun = (runId: string) => {
    const controller = byRun.get(runId);
    controller?.abort();
    return controller !== undefined;
  };
  const chatAgent: AgentConfig = {
    ...agent,
    approve: agent.approve ?? (async () => "pending"),
    approvalTtlSeconds: options.approvalTtlSeconds ?? 3_600,
    ...((options.cancelFromStore ?? store.kind === "postgres")
      ? { model: stoppedFromStore(agent.model, (runId) => store.cancelRequested(runId), stopRun) }
      : {}),
  };
  const bodies = createTurnBodies(chatAgent, store, options);
  const queued = createQueuedTurns(chatAgent, store, bodies, options.receiveFiles);

  /** Runs `body` cancellable by stop(sessionId), and by stopRun(runId) for the runs it tracks. */
  async function tracked<T>(
    sessionId: string,
    outer: AbortSignal | undefined,
    body: (signal: AbortSignal, track: (runId: string) => void) => Promise<T>,
  ): Promise<T> {
    const controller = new AbortController();
    const runs: string[] = [];
    bySession.set(sessionId, controller);
    try {
      return await body(outer ? AbortSignal.any([outer, controller.signal]) : controller.signal, (runId) => {
        byRun.set(runId, controller);
        runs.push(runId);
      });
    } finally {
      if (bySession.get(sessionId) === controller) bySession.delete(sessionId);
      for (const runId of runs) if (byRun.get(runId) === controller) byRun.delete(runId);
    }
  }

  /** Runs `body` as the session's turn in this process's session queue. */
  const inTurn = <T>(sessionId: string, body: (signal: AbortSignal) => Promise<T>, outer?: AbortSignal) =>
    queue.run(sessionId, () => tracked(sessionId, outer, body));

  /** Continues the paused run an approval belongs to (a specialist's approval: the run it works for). */
  function resume(runId: string, sessionId: string): Promise<RunResult | undefined> {
    return inTurn(sessionId, async (signal) => {
      const chain = await bodies.pausedChain(runId);
      return chain && bodies.resume(chain, sessionId, signal);
    });
  }

  return {
    send(task) {
      return inTurn(task.sessionId, (signal) => bodies.message(task, signal), task.signal);
    },

    async decide({ approvalId, userId, approved, origin }) {
      const outcome = await store.decideApproval({
        approvalId,
        userId,
        approved,
        approvers: options.approvers ?? [],
        origin,
      });
      if (outcome.kind !== "decided") return outcome;
      await bodies.showDecision(outcome.approval);
      if (!outcome.runReady) return outcome;
      const resumed = resume(outcome.approval.runId, outcome.approval.sessionId).catch((error: unknown) => {
        onError(error, "resuming a run");
        return undefined;
      });
      return { ...outcome, resumed };
    },

    async expireApprovals(now = new Date()) {
      const expired = await store.expireApprovals(options.sessionPrefix ?? "", now, options.owns);
      const runs = new Map<string, string>();
      for (const approval of expired) {
        await bodies.showDecision(approval);
        runs.set(approval.runId, approval.sessionId);
      }
      for (const [runId, sessionId] of runs) {
        if ((await store.approvalsOfRun(runId)).every((approval) => approval.status !== "pending"))
          void resume(runId, sessionId).catch((error: unknown) => onError(error, "resuming a run"));
      }
      return expired.length;
    },

    stop(sessionId) {
      const controller = bySession.get(sessionId);
      controller?.abort();
      return controller !== undefined;
    },

    reset(sessionId) {
      bySession.get(sessionId)?.abort();
      // Returned, not dropped: a store that cannot write must reach the caller, not crash the
      // process as an unhandled rejection.
      return queue.run(sessionId, async () => {
        await bodies.supersede(sessionId);
        return store.resetSession(sessionId);
      });
    },

    busy: (sessionId) => queue.busy(sessionId) || bySession.has(sessionId),
    async idle() {
      await queue.idle();
      while (queuedTurns.size > 0) await Promise.allSettled([...queuedTurns]);
    },

    runQueued(work, context) {
      const turn = tracked(work.sessionId, context.signal, (signal, track) =>
        queued.run(work, { signal, delivery: context.delivery, track, leaseLost: () => context.signal.aborted }),
      );
      queuedTurns.add(turn);
      void turn.finally(() => queuedTurns.delete(turn)).catch(() => undefined);
      return turn;
    },

    stopRun,
  };
}
