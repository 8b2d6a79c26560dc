/**
 * Conversations: the turn runner a worker hands the run queue's turns to (runQueued). Each turn is
 * one of turns.ts's three kinds: a message's run, the resume of a paused run, a reset. A run that
 * pauses for a dangerous call writes its approval to the store and shows it on its surface; the
 * click that settles it enqueues the resume, which runs here like any turn, after a restart too.
 * Everything goes through the store port (SQLite or PostgreSQL). The turns' bodies are in
 * turn-bodies.ts, and what a queued turn does on each delivery in queued-turns.ts.
 */
import type { ChannelSettings, ThreadContextSettings } from "./channel-settings.js";
import type { ReadThread } from "./thread-context.js";
import type { ThreadReading } from "../agent/thread-context.js";
import type { TokenCounter } from "../agent/tokens.js";
import type { TurnWork } from "./turns.js";
import type { StorePort } from "../store/port.js";
import type { Approval } from "../agent/approvals.js";
import type { Attachment } from "../agent/attachments.js";
import { createQueuedTurns, type ReceiveFiles } from "./queued-turns.js";
import { createTurnBodies } from "./turn-bodies.js";
import type { AgentEvent } from "../agent/events.js";
import type { AgentConfig, RunResult, Task } from "../agent/loop.js";
import type { DailyLimits } from "../agent/quota.js";
import { stoppedFromStore } from "./cancel-from-store.js";
import type { Pipelines } from "../agent/sub-agents.js";
import type { ChatModel } from "../agent/types.js";

export { QUEUED_NOTICE_MS } from "./turn-bodies.js";

export interface MessageTask extends Omit<Task, "history"> {
  sessionId: string;
  userId: string;
  /** The message's files, fetched once the run has its slot, so that a waiting run holds none of their bytes. */
  fetchAttachments?: () => Promise<Attachment[] | undefined>;
  /** Reads the thread before the message, within the channel's settings, once the run has its slot. */
  fetchThreadContext?: (settings: Required<ThreadContextSettings>) => Promise<ThreadReading | undefined>;
  /** The schedule whose tick this is: a refusal for a used-up budget is said once per budget and period. */
  scheduleId?: string;
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
  /** Posts a note after the run's outcome (a budget past 80 %); without it the note joins the answer's text. */
  note?(text: string): Promise<void>;
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
  /** How long an approval waits for a decision (default 3,600 s). */
  approvalTtlSeconds?: number;
  onError?: (error: unknown, context: string) => void;
  /** Daily caps per user; a user over one gets one sentence and no model call. */
  dailyLimits?: DailyLimits;
  /** GLASSBOX_RETENTION_DAYS, which "what can you do here?" says. */
  retentionDays?: number;
  /** Named pipelines a message can run: "/pipeline <name> <input>". */
  pipelines?: Pipelines;
  /** How long a request waits for a run slot before its surface says it is queued (default QUEUED_NOTICE_MS). */
  queuedNoticeMs?: number;
  /** Fetches the files of a queued message (ingress passed only their references). */
  receiveFiles?: ReceiveFiles;
  /** Reads a thread's earlier messages before a mention in it, counted with `counter`; without it nothing is read. */
  readThread?: { read: ReadThread; counter: TokenCounter };
  /** Whether each model call first asks the store if its run was stopped from elsewhere (default: on PostgreSQL). */
  cancelFromStore?: boolean;
  /** Per-channel settings (GLASSBOX_CHANNELS): each run takes its session's prompt, model and tools. */
  channels?: { current(): ChannelSettings };
  /** A model of the same server by another name (a channel's `model`), with the main model's spending guard. */
  modelNamed?: (name: string) => ChatModel;
}

export interface Conversations {
  /**
   * Runs one turn the run queue handed this process (ingress accepted it, see turns.ts); the run
   * queue keeps each conversation's turns in order. Idempotent, as a turn is delivered at least
   * once (see queued-turns.ts).
   */
  runQueued(work: TurnWork, context: { signal: AbortSignal; delivery: number }): Promise<RunResult | undefined>;
  /** Aborts run `runId` if it runs in this process (a cancel request heard from the store); false otherwise. */
  stopRun(runId: string): boolean;
}

/** Everything here goes through the store port. */
export function createConversations(
  agent: AgentConfig,
  store: StorePort,
  options: ConversationOptions = {},
): Conversations {
  const byRun = new Map<string, AbortController>();
  // Chat approvals wait for a person: the run pauses (durably: a click resumes it, after a restart
  // too). A specialist's dangerous call pauses the specialist's run, and with it the run it works for.
  // On PostgreSQL a stop may be asked from another process: each model call asks the store first.
  const stopRun = (runId: string) => {
    const controller = byRun.get(runId);
    controller?.abort();
    return controller !== undefined;
  };
  const stoppable = (model: ChatModel) =>
    (options.cancelFromStore ?? store.kind === "postgres")
      ? stoppedFromStore(model, (runId) => store.cancelRequested(runId), stopRun)
      : model;
  const chatAgent: AgentConfig = {
    ...agent,
    approve: agent.approve ?? (async () => "pending"),
    approvalTtlSeconds: options.approvalTtlSeconds ?? 3_600,
    model: stoppable(agent.model),
  };
  // A channel's model, made once per name and stoppable as the main one is.
  const named = new Map<string, ChatModel>();
  const { modelNamed } = options;
  const channelModel =
    modelNamed &&
    ((name: string) => {
      const made = named.get(name) ?? stoppable(modelNamed(name));
      named.set(name, made);
      return made;
    });
  const bodies = createTurnBodies(chatAgent, store, {
    ...options,
    ...(channelModel ? { modelNamed: channelModel } : {}),
  });
  const queued = createQueuedTurns(store, bodies, options.receiveFiles, options.readThread);

  return {
    async runQueued(work, context) {
      // The turn is cancellable by stopRun for every run it registers, besides the queue's own signal.
      const controller = new AbortController();
      const runs: string[] = [];
      const track = (runId: string) => {
        byRun.set(runId, controller);
        runs.push(runId);
      };
      try {
        return await queued.run(work, {
          signal: AbortSignal.any([context.signal, controller.signal]),
          delivery: context.delivery,
          track,
          leaseLost: () => context.signal.aborted,
        });
      } finally {
        for (const runId of runs) if (byRun.get(runId) === controller) byRun.delete(runId);
      }
    },
    stopRun,
  };
}
