/**
 * Turns the run queue hands this process (ingress accepted them: src/conversations/turns.ts). A turn is
 * delivered at least once, so each is idempotent, judged by what the store says of its run:
 *
 * - a message whose run is `accepted` runs, on the message ingress stored (not stored again);
 *   `running` on a redelivery (its worker died) or `interrupted`, it is taken over and goes on from
 *   its stored steps; ended, it is not run again: its stored answer is shown if nobody showed it.
 * - a resume continues the paused run once none of its approvals waits; a run that no longer waits
 *   is left alone (or taken over, or its answer shown, as above).
 * - a reset supersedes what waited, then resets the session.
 *
 * An answer counts as shown once `answered:<runId>` (a resume's: `answered:<runId>:<approvalId>`)
 * is claimed: the moment the surface says the outcome's message is posted (before anything after
 * it), or else once the surface has finished; a redelivery that finds the run ended and the claim
 * free claims it and posts the stored result, unless the surface finds that answer in the
 * conversation already (a worker killed between posting it and claiming it; shownAlready). A run cut off because this worker lost its lease is
 * not shown as stopped: it is marked interrupted, and the worker that gets the turn next takes it over.
 *
 * A message's files came as references (ingress never downloads): the run that starts (or takes
 * over) the message fetches them through `receiveFiles`, again on every delivery; what could not be
 * read is told to the person on the first delivery only, and to the model as a line. A mention in a
 * thread reads the thread here too (thread-context.ts), once the run has its slot; a run taken over
 * keeps what its record says it read.
 */
import type { TurnFile } from "./turn-files.js";
import type { TurnWork } from "./turns.js";
import { newToolRunState } from "../tools/executor.js";
import type { RunTrace, StorePort } from "../store/port.js";
import { userMessageOf, type Attachment } from "../agent/attachments.js";
import type { TurnBodies } from "./turn-bodies.js";
import type { ChatSurface } from "./conversations.js";
import { resumeAgent, type PausedRun, type RunResult, type StopReason, type ToolCallSummary } from "../agent/loop.js";
import { answeredBy } from "../agent/run.js";
import { runOutcomeOf } from "../agent/contracts.js";
import { addUsage, emptyUsage, type Message } from "../agent/types.js";
import { withThreadContext } from "../agent/thread-context.js";
import type { TokenCounter } from "../agent/tokens.js";
import type { ThreadContextSettings } from "./channel-settings.js";
import { readThreadContext, type ReadThread } from "./thread-context.js";

/** Statuses a run ends with, as the surface is told them again from the store. */
const ENDED: Record<string, StopReason> = {
  final: "final",
  max_steps: "max_steps",
  awaiting_approval: "awaiting_approval",
  cancelled: "cancelled",
  error: "error",
};

export interface QueuedContext {
  signal: AbortSignal;
  delivery: number;
  /** Registers a run this turn runs, so that stopRun(runId) reaches it. */
  track(runId: string): void;
  /** Whether the run queue took the turn back (this worker lost its lease): another worker runs it next. */
  leaseLost(): boolean;
}

/**
 * Fetches a queued message's files with the credentials of the workspace it came from; says in the
 * conversation, in one sentence, which could not be read when `tell`. Never throws for a file: one
 * that cannot be read comes back as an UnreadFile.
 */
export type ReceiveFiles = (
  files: readonly TurnFile[],
  where: { sessionId: string; userId: string; tell: boolean },
  signal: AbortSignal,
) => Promise<Attachment[]>;

/** A run stopped because the turn was taken back, not because someone asked. */
const cutOff = (result: RunResult, context: QueuedContext) => result.stopReason === "cancelled" && context.leaseLost();

/** A turn's claim that its answer was shown: made once, however many times it is asked for (a failed claim may be asked again). */
type AnswerClaim = () => Promise<boolean>;

/** The surface of a queued turn: a run that was cut off is not shown as stopped; the answer is claimed the moment it is posted. */
function surfaceOf(surface: ChatSurface, context: QueuedContext, claim: AnswerClaim): ChatSurface {
  return {
    onEvent: (event) => surface.onEvent(event),
    finish: async (result) => (cutOff(result, context) ? undefined : surface.finish(result, claim)),
    askApproval: (approval) => surface.askApproval(approval),
    ...(surface.queued ? { queued: (runId?: string) => surface.queued?.(runId) } : {}),
    ...(surface.note ? { note: surface.note.bind(surface) } : {}),
    ...(surface.shownAlready ? { shownAlready: surface.shownAlready.bind(surface) } : {}),
  };
}

export function createQueuedTurns(
  store: StorePort,
  bodies: TurnBodies,
  receiveFiles?: ReceiveFiles,
  /** Reads a thread before a mention in it (thread-context.ts); without it nothing is read. */
  threads?: { read: ReadThread; counter: TokenCounter },
) {
  const claimOf = (answerKey: string): AnswerClaim => {
    let claimed: Promise<boolean> | undefined;
    return () =>
      (claimed ??= store.claim(answerKey).catch((error: unknown) => {
        claimed = undefined;
        throw error;
      }));
  };

  /** The message's files, fetched on this delivery; undefined without any. */
  async function filesOf(
    files: readonly TurnFile[] | undefined,
    trace: RunTrace,
    context: QueuedContext,
  ): Promise<Attachment[] | undefined> {
    if (!files?.length) return undefined;
    const unread = (problem: string) =>
      files.map((file) => ({ name: file.name, mimeType: file.mimeType, size: file.size, problem }));
    if (!receiveFiles) return unread("this process cannot fetch files");
    try {
      return await receiveFiles(
        files,
        { sessionId: trace.sessionId, userId: trace.userId, tell: context.delivery === 1 },
        context.signal,
      );
    } catch (error) {
      bodies.onError(error, "fetching a message's files");
      return unread("the download failed");
    }
  }

  /** After a turn's run: its answer is claimed as posted (if the surface did not say so already); a cut-off run is handed back instead. */
  async function answered(
    result: RunResult | undefined,
    runId: string,
    claim: AnswerClaim,
    context: QueuedContext,
  ): Promise<RunResult | undefined> {
    if (!result) return undefined;
    if (cutOff(result, context) && result.runId === runId) {
      // A store out of reach leaves the run running, which the next worker takes over all the same.
      await store
        .record([{ kind: "end_run", outcome: { ...runOutcomeOf(result), status: "interrupted" } }])
        .catch(() => undefined);
      return undefined;
    }
    await claim();
    return result;
  }

  /**
   * Whether a rated answer is in the conversation already: its worker died after posting it, before
   * claiming it. A conversation that cannot be read is said once here, and the answer posted again.
   */
  async function postedBefore(trace: RunTrace, stopReason: StopReason, surface: ChatSurface): Promise<boolean> {
    if (!answeredBy(stopReason) || !surface.shownAlready) return false; // Stopped., errors: posting again is harmless
    try {
      return await surface.shownAlready(trace.runId, new Date(trace.startedAt));
    } catch (error) {
      bodies.onError(error, "looking for an answer already posted (it is posted, perhaps again)");
      return false;
    }
  }

  /**
   * Posts the answer of a run that ended without it being shown (its worker died after the end), unless
   * the conversation shows it already (its worker died between posting it and claiming it).
   */
  async function showStored(trace: RunTrace, surface: ChatSurface, claim: AnswerClaim): Promise<RunResult | undefined> {
    const stopReason = ENDED[trace.status];
    if (!stopReason || !(await claim())) return undefined; // superseded, or shown already
    if (await postedBefore(trace, stopReason, surface)) return undefined;
    const stored = stopReason === "awaiting_approval" ? await store.pausedRun(trace.runId) : undefined;
    const output = trace.output ?? "";
    const result: RunResult = {
      runId: trace.runId,
      sessionId: trace.sessionId,
      output,
      stopReason,
      steps: trace.steps,
      usage: {
        promptTokens: trace.promptTokens,
        completionTokens: trace.completionTokens,
        totalTokens: trace.promptTokens + trace.completionTokens,
      },
      toolCalls: await toolCallsOf(trace.runId),
      ...(stopReason === "error" ? { error: { code: "internal" as const, message: output } } : {}),
      ...(stored ? { paused: JSON.parse(stored) as PausedRun } : {}),
    };
    return bodies.settle(result, surface);
  }

  async function toolCallsOf(runId: string): Promise<ToolCallSummary[]> {
    return (await store.steps(runId)).flatMap((step) =>
      step.toolCalls.map((record) => ({
        name: record.name,
        arguments: record.arguments ?? record.rawArguments,
        status: record.envelope.status,
        ...(record.envelope.status === "error" ? { error: record.envelope.error } : {}),
      })),
    );
  }

  /**
   * A run whose process is gone goes on here from what the store has: its steps so far (their
   * tokens and tool calls) and its messages, which memory reads from the session. A step that was
   * cut off mid-way is not replayed: calls without results are shown to the model as interrupted.
   */
  async function takeOver(
    trace: RunTrace,
    context: QueuedContext,
    surface: ChatSurface,
    files?: readonly TurnFile[],
  ): Promise<RunResult | undefined> {
    const { startedRuns } = await store.record([{ kind: "take_over_run", runId: trace.runId }]);
    if (!startedRuns.includes(trace.runId)) return undefined; // it ended, or another process took it first
    const steps = await store.steps(trace.runId);
    const history = await store.sessionHistory(trace.sessionId);
    const ours = history.messages
      .filter((stored) => stored.runId === trace.runId && stored.message.role !== "user")
      .map((stored) => stored.message);
    const toolCalls = await toolCallsOf(trace.runId);
    // The session's channel settings as they are now: its prompt, model, tools, budget and notes.
    const channel = bodies.channelRunOf(trace.sessionId);
    return bodies.inSlot(context.signal, surface, trace, async () => {
      // Fetched again (nothing of the dead worker's is here), and only once the run has its slot.
      const attachments = await filesOf(files, trace, context);
      const state: PausedRun = {
        runId: trace.runId,
        sessionId: trace.sessionId,
        userId: trace.userId,
        history: [],
        messages: [
          // What the dead worker's run read of its thread is in its record: not read again.
          withThreadContext(
            userMessageOf({ input: trace.input, ...(attachments ? { attachments } : {}) }),
            trace.threadContext ?? undefined,
          ) satisfies Message,
          ...ours,
        ],
        steps: steps.reduce((most, step) => Math.max(most, step.step), 0),
        usage: steps.reduce(
          (sum, step) =>
            addUsage(sum, {
              promptTokens: step.promptTokens,
              completionTokens: step.completionTokens,
              totalTokens: step.promptTokens + step.completionTokens,
            }),
          emptyUsage(),
        ),
        toolCalls,
        toolState: newToolRunState(),
        lastResults: {},
        finished: [],
        pending: [],
        ...(channel.notes && channel.notes !== "channel" ? { notes: channel.notes } : {}),
        ...(attachments?.length ? { readFiles: true } : {}),
      };
      return bodies.settle(
        await resumeAgent(
          channel.agent,
          state,
          {},
          {
            signal: context.signal,
            onEvent: (event) => surface.onEvent(event),
          },
        ),
        surface,
      );
    });
  }

  /** What a run not accepted any more comes to: taken over when its process is gone, else its stored answer, once. */
  async function goneOn(
    trace: RunTrace,
    context: QueuedContext,
    surface: ChatSurface,
    claim: AnswerClaim,
    files?: readonly TurnFile[],
  ): Promise<RunResult | undefined> {
    // `running` on a first delivery: another turn runs it (the queue keeps one at a time), so leave it.
    if (trace.status === "interrupted" || (trace.status === "running" && context.delivery > 1)) {
      if (trace.parentRunId) return undefined; // a specialist's run goes on with the run it works for
      context.track(trace.runId);
      return answered(await takeOver(trace, context, surface, files), trace.runId, claim, context);
    }
    return trace.status === "running" ? undefined : showStored(trace, surface, claim);
  }

  async function message(
    work: Extract<TurnWork, { kind: "message" }>,
    context: QueuedContext,
  ): Promise<RunResult | undefined> {
    const trace = await store.run(work.runId);
    if (!trace || trace.sessionId !== work.sessionId) {
      // Erased (glassbox erase, retention) while its turn waited: the turn is dropped.
      bodies.onError(new Error(`the queued run ${work.runId} is not in the store (erased?)`), "dropping a queued turn");
      return undefined;
    }
    context.track(work.runId);
    const claim = claimOf(`answered:${work.runId}`);
    const surface = surfaceOf(bodies.openSurface(trace.sessionId, trace.userId), context, claim);
    if (trace.status !== "accepted") return goneOn(trace, context, surface, claim, work.files);
    const files = work.files;
    const task = {
      runId: work.runId,
      sessionId: trace.sessionId,
      userId: trace.userId,
      input: trace.input,
      inputStored: true,
      ...(trace.scheduleId ? { scheduleId: trace.scheduleId } : {}),
      ...(files?.length ? { fetchAttachments: () => filesOf(files, trace, context) } : {}),
      ...(threads
        ? {
            fetchThreadContext: (settings: Required<ThreadContextSettings>) =>
              readThreadContext(
                { store, ...threads },
                { sessionId: trace.sessionId, eventIds: work.eventIds },
                settings,
                context.signal,
              ),
          }
        : {}),
    };
    return answered(await bodies.message(task, context.signal, surface), work.runId, claim, context);
  }

  async function resume(
    work: Extract<TurnWork, { kind: "resume" }>,
    context: QueuedContext,
  ): Promise<RunResult | undefined> {
    const approval = await store.approval(work.approvalId);
    if (approval) await bodies.showDecision(approval);
    const claim = claimOf(`answered:${work.runId}:${work.approvalId}`);
    context.track(work.runId);
    if ((await store.approvalsOfRun(work.runId)).some((other) => other.status === "pending")) return undefined; // paused again, for newer calls
    const chain = await bodies.pausedChain(work.runId);
    if (chain) {
      context.track(chain.root);
      const surface = surfaceOf(bodies.openSurface(work.sessionId, chain.paused.userId), context, claim);
      return answered(await bodies.resume(chain, work.sessionId, context.signal, surface), chain.root, claim, context);
    }
    // No longer waiting: resumed (perhaps by a worker that died since), or superseded.
    let trace = await store.run(work.runId);
    while (trace?.parentRunId) trace = await store.run(trace.parentRunId);
    if (!trace) return undefined;
    return goneOn(trace, context, surfaceOf(bodies.openSurface(trace.sessionId, trace.userId), context, claim), claim);
  }

  return {
    run(work: TurnWork, context: QueuedContext): Promise<RunResult | undefined> {
      if (work.kind === "message") return message(work, context);
      if (work.kind === "resume") return resume(work, context);
      return (async () => {
        await bodies.supersede(work.sessionId);
        await store.resetSession(work.sessionId);
        return undefined;
      })();
    },
  };
}
