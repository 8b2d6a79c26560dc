/**
 * The bodies of a conversation's turns, on the store port: a message's run (superseding what
 * waited, the quota check, a run slot, then a pipeline or the agent), a paused run's continuation,
 * and what a run's end shows (its approvals' buttons, then the outcome). queued-turns.ts decides
 * which of them a turn the run queue hands a worker runs.
 */
import { approvalsAwaited } from "../tools/executor.js";
import type { ApprovalDecision } from "../tools/types.js";
import type { Approval, StorePort } from "../store/port.js";
import type { ChatSurface, ConversationOptions, MessageTask } from "./conversations.js";
import type { ErrorCode } from "../agent/errors.js";
import type { AgentEvent } from "../agent/events.js";
import { resumeAgent, runAgent, type AgentConfig, type PausedRun, type RunResult } from "../agent/loop.js";
import type { NotesScope } from "../agent/run.js";
import { dayStartOf, quotaProblem } from "../agent/quota.js";
import { runOutcomeOf } from "../agent/contracts.js";
import type { Pipelines } from "../agent/sub-agents.js";
import { addUsage, emptyUsage } from "../agent/types.js";
import { agentIn, refusalHere } from "./channel-agent.js";
import { settingsFor, type ChannelLevel, type ChannelSettings } from "./channel-settings.js";
import { CAPABILITIES_QUESTION, describeCapabilities } from "./capabilities.js";
import { threadSettingsOf } from "./thread-context.js";
import {
  budgetNote,
  budgetSentence,
  nearing,
  readBudgets,
  usedUp,
  withBudget,
  type BudgetReading,
} from "./channel-budget.js";

/** Where a message is, as the channel settings see it: the file's version and the level that applies. */
interface Here {
  source: ChannelSettings["source"];
  level: ChannelLevel;
}

/** How long a request waits for a slot before the chat says it is queued. */
export const QUEUED_NOTICE_MS = 3_000;

const PIPELINE_COMMAND = /^\/pipeline\s+(\S+)\s+([\s\S]+)$/i;

const noSurface: ChatSurface = { onEvent: () => {}, finish: async () => {}, askApproval: async () => undefined };

/** A run that never started: the reason is its output, and nothing was spent. */
export function refusal(
  task: Pick<MessageTask, "runId" | "sessionId">,
  message: string,
  code: ErrorCode = "quota",
): RunResult {
  return {
    runId: task.runId ?? "",
    sessionId: task.sessionId,
    output: message,
    stopReason: "error",
    steps: 0,
    usage: emptyUsage(),
    toolCalls: [],
    error: { code, message },
  };
}

/** A pipeline run from a chat message, shown as one run: the last stage's answer, every stage's tokens. */
async function pipelineTurn(pipelines: Pipelines, name: string, input: string, task: MessageTask): Promise<RunResult> {
  const ran = await pipelines.run(name, input.trim(), task);
  if (!ran)
    return refusal(
      task,
      `There is no pipeline '${name}'; the pipelines are: ${pipelines.names().join(", ") || "none"}.`,
      "configuration",
    );
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

/** A paused run found from one of its approvals' runs: the root of its parent chain, and the chain's decisions. */
export interface PausedChain {
  root: string;
  paused: PausedRun;
  decisions: Record<string, ApprovalDecision>;
}

export type TurnBodies = ReturnType<typeof createTurnBodies>;

/** `agent` is the chat agent (approvals pause); `store` the port every body reads and writes through. */
export function createTurnBodies(agent: AgentConfig, store: StorePort, options: ConversationOptions) {
  const openSurface = options.openSurface ?? (() => noSurface);
  const channels = options.channels;
  /** The channel settings that apply in a session, as the file says now; none without one. */
  const hereOf = (sessionId: string): Here | undefined => {
    if (!channels) return undefined;
    const settings = channels.current();
    return { source: settings.source, level: settingsFor(settings, sessionId) };
  };
  /** The agent a session's runs take: its channel's prompt, model, tools and budget. */
  const agentFor = (sessionId: string, here = hereOf(sessionId)) => {
    if (!here) return agent;
    const made = agentIn(agent, here.level, {
      source: here.source,
      ...(options.modelNamed ? { modelNamed: options.modelNamed } : {}),
    });
    const { budget } = here.level;
    return budget
      ? { ...made, model: withBudget(made.model, (userId) => readBudgets(store, budget, sessionId, userId)) }
      : made;
  };
  /** The budgets that apply to a person in a session, as they stand now. */
  const budgetsOf = async (here: Here | undefined, task: MessageTask): Promise<BudgetReading[]> =>
    here?.level.budget ? readBudgets(store, here.level.budget, task.sessionId, task.userId) : [];
  /** After an answer, the note of each budget that passed 80 %, said once per budget and period. */
  async function budgetNotes(here: Here | undefined, task: MessageTask): Promise<string[]> {
    const due: string[] = [];
    for (const reading of nearing(await budgetsOf(here, task)))
      if (await store.claim(reading.key)) due.push(budgetNote(reading));
    return due;
  }
  /** Shows a run's end, then its notes: in a message of their own where the surface can, else with the answer. */
  async function settleNoted(result: RunResult, notes: string[], surface: ChatSurface): Promise<RunResult> {
    if (notes.length === 0) return settle(result, surface);
    if (!surface.note) return settle({ ...result, output: `${result.output}\n\n${notes.join("\n")}` }, surface);
    const settled = await settle(result, surface);
    await surface.note(notes.join("\n")).catch((error: unknown) => onError(error, "posting a budget note"));
    return settled;
  }
  const showDecision = options.showDecision ?? (async () => {});
  const onError = options.onError ?? (() => {});
  const shown = (approval: Approval) =>
    showDecision(approval).catch((error: unknown) => onError(error, "updating an approval"));

  /** The approvals a paused run waits for, as its last commit opened them (chatAgent's approvalTtlSeconds). */
  async function awaited(paused: PausedRun): Promise<Approval[]> {
    const requests = approvalsAwaited(paused.pending);
    const runs = await Promise.all(
      [...new Set(requests.map((request) => request.runId))].map((runId) => store.approvalsOfRun(runId)),
    );
    const opened = new Map(runs.flat().map((approval) => [`${approval.runId}/${approval.toolCallId}`, approval]));
    return requests.flatMap((request) => opened.get(`${request.runId}/${request.toolCallId}`) ?? []);
  }

  /** After a run: a pause shows its approvals (buttons), then the surface shows the outcome. */
  async function settle(result: RunResult, surface: ChatSurface): Promise<RunResult> {
    if (result.paused) {
      for (const approval of await awaited(result.paused)) {
        if (approval.messageRef) continue; // already shown (a resumed run asks only for new calls)
        const messageRef = await surface
          .askApproval(approval)
          .catch((error: unknown) => onError(error, "showing an approval"));
        if (messageRef)
          await store
            .attachApprovalMessage(approval.id, messageRef)
            .catch((error: unknown) => onError(error, "storing where an approval is shown"));
      }
    }
    await surface.finish(result).catch((error: unknown) => onError(error, "showing a run's end"));
    return result;
  }

  /** A run that never started: an accepted row (ingress's, the HTTP API's) ends with the reason; nothing was spent. */
  async function neverStarted(
    task: Pick<MessageTask, "runId" | "sessionId">,
    message: string,
    code: ErrorCode,
  ): Promise<RunResult> {
    const { error, ...rest } = refusal(task, message, code);
    // A request cancelled while it waited ends as a cancelled run does: no error to report.
    const result: RunResult = code === "cancelled" ? { ...rest, stopReason: "cancelled" } : { ...rest, error };
    if (task.runId) await store.endUnstartedRun(runOutcomeOf(result));
    return result;
  }

  /** A run answered by glassbox itself (what it can do here): its accepted row ends with the answer; nothing was spent. */
  async function answeredWithoutModel(
    task: Pick<MessageTask, "runId" | "sessionId">,
    text: string,
  ): Promise<RunResult> {
    const result: RunResult = {
      runId: task.runId ?? "",
      sessionId: task.sessionId,
      output: text,
      stopReason: "final",
      steps: 0,
      usage: emptyUsage(),
      toolCalls: [],
    };
    if (task.runId) await store.endUnstartedRun(runOutcomeOf(result));
    return result;
  }

  /**
   * Runs `work` once one of the process's run slots is free (agent.runSlots), in arrival order; the
   * surface hears that the request is queued if that takes a while. Cancelled while waiting, it never starts.
   */
  async function inSlot(
    signal: AbortSignal,
    surface: ChatSurface,
    task: Pick<MessageTask, "runId" | "sessionId">,
    work: () => Promise<RunResult>,
  ): Promise<RunResult> {
    const slots = agent.runSlots;
    if (!slots) return work();
    const notice = setTimeout(() => surface.queued?.(task.runId), options.queuedNoticeMs ?? QUEUED_NOTICE_MS);
    let release: () => void;
    try {
      release = await slots.acquire(signal);
    } catch {
      return settle(await neverStarted(task, "The request was cancelled before it started.", "cancelled"), surface);
    } finally {
      clearTimeout(notice);
    }
    try {
      return await work();
    } finally {
      release();
    }
  }

  /**
   * A message refused before it starts, the reason said. A schedule's tick would say it at every tick:
   * its refusal is said once per `period` (the budget's and its period, the settings' version).
   */
  async function refuse(
    task: MessageTask,
    reason: string,
    code: ErrorCode,
    period: string,
    surface: ChatSurface,
  ): Promise<RunResult> {
    if (!task.scheduleId) return settle(await neverStarted(task, reason, code), surface);
    const said = `A scheduled run did not run. ${reason} Its later runs are skipped without a message until that changes.`;
    const refused = await neverStarted(task, said, code);
    return (await store.claim(`schedule:${task.scheduleId}:${period}`)) ? settle(refused, surface) : refused;
  }

  /** A new message makes the session's waiting approvals moot: they expire and their run ends there. */
  async function supersede(sessionId: string): Promise<void> {
    for (const approval of await store.supersedeApprovals(sessionId)) await shown(approval);
  }

  /** The paused run an approval's run belongs to (a specialist's approval: the run it works for); undefined once it no longer waits. */
  async function pausedChain(runId: string): Promise<PausedChain | undefined> {
    const chain = [runId];
    for (
      let parent = (await store.run(runId))?.parentRunId;
      parent && (await store.pausedRun(parent));
      parent = (await store.run(parent))?.parentRunId
    )
      chain.push(parent);
    const root = chain.at(-1) as string;
    const stored = await store.pausedRun(root);
    if (!stored) return undefined; // resumed already, or superseded by a newer message
    const decisions = Object.assign({}, ...(await Promise.all(chain.map((id) => store.decisionsOf(id))))) as Record<
      string,
      ApprovalDecision
    >;
    return { root, paused: JSON.parse(stored) as PausedRun, decisions };
  }

  /** What a session's runs take from its channel settings: the agent, and which remembered notes they see. */
  const channelRunOf = (sessionId: string): { agent: AgentConfig; notes?: NotesScope } => {
    const here = hereOf(sessionId);
    const notes = here?.level.notes;
    return { agent: agentFor(sessionId, here), ...(notes ? { notes } : {}) };
  };

  return {
    settle,
    neverStarted,
    inSlot,
    supersede,
    pausedChain,
    openSurface,
    channelRunOf,
    /** Updates an approval's message; a failure is reported, never thrown. */
    showDecision: shown,
    onError,

    /** A message's run: what waited is superseded, a user over a cap is refused, then the pipeline or the agent runs. */
    async message(
      task: MessageTask,
      signal: AbortSignal,
      surface = openSurface(task.sessionId, task.userId),
    ): Promise<RunResult> {
      // One reading of the settings for the whole message: its refusal, its budgets, its agent.
      const here = hereOf(task.sessionId);
      // Someone the channel does not serve changes nothing there, not even what waits for approval.
      const refused = here && refusalHere(here.level, task.userId);
      if (refused) return refuse(task, refused, "not_allowed", `users:${here.source.version}`, surface);
      const budgets = await budgetsOf(here, task);
      if (CAPABILITIES_QUESTION.test(task.input)) {
        const agentHere = agentFor(task.sessionId, here);
        const text = await describeCapabilities(
          agentHere,
          store,
          { userId: task.userId, sessionId: task.sessionId },
          options.dailyLimits,
          budgets,
          {
            ...(options.retentionDays !== undefined ? { retentionDays: options.retentionDays } : {}),
            ...(here?.level.notes ? { notes: here.level.notes } : {}),
          },
        );
        return settle(await answeredWithoutModel(task, text), surface);
      }
      await supersede(task.sessionId);
      const spent = usedUp(budgets);
      const overQuota =
        (spent && budgetSentence(spent)) ||
        (options.dailyLimits && (await quotaProblem(store, task.userId, options.dailyLimits)));
      if (overQuota)
        return refuse(
          task,
          overQuota,
          "quota",
          spent ? spent.key : `quota:${dayStartOf(new Date()).toISOString()}`,
          surface,
        );
      const onEvent = (event: AgentEvent) => {
        surface.onEvent(event);
        task.onEvent?.(event);
      };
      return inSlot(signal, surface, task, async () => {
        const { fetchAttachments, fetchThreadContext, ...given } = task;
        const attachments = fetchAttachments && (await fetchAttachments());
        const threadContext =
          fetchThreadContext && (await fetchThreadContext(threadSettingsOf(here?.level.threadContext)));
        const ready = {
          ...given,
          ...(attachments ? { attachments } : {}),
          ...(threadContext ? { threadContext } : {}),
        };
        const command = options.pipelines && ready.input.trim().match(PIPELINE_COMMAND);
        // A pipeline's first stage takes the accepted run over with the stage's own input, which it stores.
        const { inputStored: _stored, ...staged } = ready;
        if (command && options.pipelines)
          return settle(
            await pipelineTurn(options.pipelines, command[1] ?? "", command[2] ?? "", { ...staged, signal, onEvent }),
            surface,
          );
        const notes = here?.level.notes;
        const result = await runAgent(agentFor(task.sessionId, here), {
          ...ready,
          signal,
          onEvent,
          ...(notes ? { notes } : {}),
        });
        return settleNoted(result, budgets.length > 0 ? await budgetNotes(here, task) : [], surface);
      });
    },

    /** Continues a paused chain with its decisions. Cancelled while waiting for a slot, the run stays paused with its decisions stored. */
    resume(
      { paused, decisions }: PausedChain,
      sessionId: string,
      signal: AbortSignal,
      surface = openSurface(sessionId, paused.userId),
    ): Promise<RunResult> {
      return inSlot(signal, surface, { sessionId }, async () =>
        settle(
          await resumeAgent(agentFor(sessionId), paused, decisions, {
            signal,
            onEvent: (event) => surface.onEvent(event),
          }),
          surface,
        ),
      );
    },
  };
}
