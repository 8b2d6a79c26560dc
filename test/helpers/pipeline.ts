// The one pipeline on SQLite, driven the way its inbound handlers drive it, for tests of what a
// conversation does: the deployment (the store with the in-process queue), the worker role on the
// test's agent, and surfaces that record what a person would see. A message is stored and its turn
// enqueued in one transaction (acceptMessage, as every inbound handler does), a click is decided as
// a button's (decideClick), expiry is the worker's approval sweep, stop is a cancel request (as
// "stop", /stop and the page's stop button ask) and a reset is a turn of its own (Discord's /reset).
import type { Approval } from "../../src/agent/approvals.js";
import type { Attachment } from "../../src/agent/attachments.js";
import type { AgentEvent } from "../../src/agent/events.js";
import type { RunResult } from "../../src/agent/run.js";
import { createTokenCounter } from "../../src/agent/tokens.js";
import { openWorkerSurfaces, type WorkerSurfaces } from "../../src/adapters/surfaces.js";
import { createUploadShelf } from "../../src/adapters/web/web-uploads.js";
import { type GlassboxConfig, loadConfig } from "../../src/config.js";
import type { ChatSurface } from "../../src/conversations/conversations.js";
import { storedTextOf } from "../../src/conversations/turn-files.js";
import { acceptMessage, acceptReset, decideClick, newRunId } from "../../src/conversations/turns.js";
import { createLogger } from "../../src/logger.js";
import type { InProcessRunQueue } from "../../src/queue/in-process.js";
import { type Deployment, openDeployment } from "../../src/roles/deployment.js";
import { startWorkerRole, type WorkerAgent, type WorkerRole } from "../../src/roles/worker.js";
import type { AcceptOutcome, DecisionOutcome, StorePort } from "../../src/store/port.js";

const counter = await createTokenCounter("o200k_base");

/** A message as a platform's inbound handler stores it. */
export interface InboundMessage {
  sessionId: string;
  userId: string;
  input: string;
  /** Files uploaded with it (web sessions: the worker reads them from this process's shelf). */
  attachments?: Attachment[];
  /** The platform's event ids (none, as for the HTTP API: the run's id keys the turn). */
  eventIds?: string[];
}

/** What the recording surfaces were asked to show, in order, over every session. */
export interface Shown {
  /** Each run's events with the session it ran in. */
  events: Array<{ sessionId: string; event: AgentEvent }>;
  finished: RunResult[];
  /** Approvals whose buttons were posted. */
  asked: Approval[];
  /** Approvals whose buttons' message was updated (decided, expired, superseded). */
  decisions: Approval[];
  /** Sessions told their request waits for a run slot, with the run it was. */
  queued: Array<{ sessionId: string; runId?: string }>;
}

export interface PipelineOptions {
  /** The agent turns run with; the test closes it. */
  agent: WorkerAgent;
  /** A SQLite store port (the agent's); left open. */
  store: StorePort;
  /** Settings the worker reads (approval time, daily caps, turns at once); loadConfig's defaults otherwise. */
  settings?: Partial<Pick<GlassboxConfig, "approvalTtlSeconds" | "dailyLimits" | "workerConcurrency">>;
  /** Where each posted approval is said to be (the message the buttons are in). */
  approvalRef?: (approval: Approval) => string | undefined;
  /** Called with every event of every run, as the surface hears it. */
  onEvent?: (event: AgentEvent, sessionId: string) => void;
  /** Called when a surface is told its request waits for a run slot. */
  onQueued?: (sessionId: string, runId?: string) => void;
  /** How long a turn waits for a run slot before its surface is told (default QUEUED_NOTICE_MS). */
  queuedNoticeMs?: number;
}

export interface Pipeline {
  store: StorePort;
  deployment: Deployment;
  worker: WorkerRole;
  shown: Shown;
  /** Accepts the message and resolves with its run's result, as the surface was told it. */
  send(message: InboundMessage): Promise<RunResult>;
  /** Accepts the message; `result` settles as send's does. */
  accept(message: InboundMessage): Promise<{ runId: string; outcome: AcceptOutcome; result: Promise<RunResult> }>;
  /** A click on Approve or Deny; `resumed` settles with the resumed run's result when the click made it ready. */
  click(request: {
    approvalId: string;
    userId: string;
    approved: boolean;
    approvers?: string[];
  }): Promise<DecisionOutcome & { resumed?: Promise<RunResult> }>;
  /** Asks to stop the session's runs (or one run of it); true when one was accepted or running. */
  stop(sessionId: string, runId?: string): Promise<boolean>;
  /** A new start for the session, in its place among the session's turns. */
  reset(sessionId: string): Promise<boolean>;
  /** Resolves once the queue has no turn waiting or running (a result is told before its turn ends). */
  idle(): Promise<void>;
  close(): Promise<void>;
}

export async function startPipeline(options: PipelineOptions): Promise<Pipeline> {
  const { store, agent } = options;
  const log = createLogger({ level: "silent" });
  const config: GlassboxConfig = { ...loadConfig({}), ...options.settings };
  const shown: Shown = { events: [], finished: [], asked: [], decisions: [], queued: [] };
  const waiters: Array<{ runId: string; resolve: (result: RunResult) => void }> = [];

  /** The run a result answers: a pipeline's last stage answers for its first, the run ingress accepted. */
  async function acceptedRunOf(result: RunResult): Promise<string> {
    return (await store.run(result.runId))?.pipelineRunId ?? result.runId;
  }
  const nextResultOf = (runId: string) => new Promise<RunResult>((resolve) => waiters.push({ runId, resolve }));

  const recording = (sessionId: string): ChatSurface => ({
    onEvent(event) {
      shown.events.push({ sessionId, event });
      options.onEvent?.(event, sessionId);
    },
    async finish(result) {
      shown.finished.push(result);
      const runId = await acceptedRunOf(result);
      for (const waiter of waiters.filter((waiting) => waiting.runId === runId)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(result);
      }
    },
    async askApproval(approval) {
      shown.asked.push(approval);
      return options.approvalRef?.(approval);
    },
    queued(runId) {
      shown.queued.push({ sessionId, ...(runId ? { runId } : {}) });
      options.onQueued?.(sessionId, runId);
    },
  });

  const uploads = createUploadShelf();
  const platforms = await openWorkerSurfaces({}, log, undefined, uploads);
  const surfaces: WorkerSurfaces = {
    ...platforms,
    openSurface: recording,
    showDecision: async (approval) => void shown.decisions.push(approval),
  };
  if (store.kind !== "sqlite") throw new Error("the pipeline helper runs on SQLite, with the in-process queue");
  const deployment = await openDeployment({ store: { databasePath: "" }, role: "all", log, given: store });
  const worker = await startWorkerRole({
    config,
    deployment,
    log,
    agent,
    surfaces,
    uploads,
    concurrency: config.workerConcurrency,
    queuedNoticeMs: options.queuedNoticeMs,
  });
  const { queue } = deployment;

  async function accept(message: InboundMessage) {
    const run = { runId: newRunId(), sessionId: message.sessionId, userId: message.userId, input: message.input };
    const files = uploads.keep(message.attachments ?? []);
    const entry = { role: "user" as const, content: storedTextOf(message.input, files) };
    const result = nextResultOf(run.runId);
    const outcome = await acceptMessage(store, queue, {
      eventIds: message.eventIds ?? [],
      run,
      message: { message: entry, tokens: counter.message(entry) },
      files,
    });
    return { runId: run.runId, outcome, result };
  }

  /** The run an approval's run works for at the top (a specialist's approval: the main run), which a resume answers for. */
  async function rootOf(runId: string): Promise<string> {
    let root = runId;
    for (let parent = (await store.run(root))?.parentRunId; parent; parent = (await store.run(root))?.parentRunId)
      root = parent;
    return root;
  }

  return {
    store,
    deployment,
    worker,
    shown,
    accept,
    async send(message) {
      const accepted = await accept(message);
      if (accepted.outcome.kind !== "accepted")
        throw new Error(`the message was not accepted: ${accepted.outcome.kind}`);
      return accepted.result;
    },
    async click(request) {
      const approval = await store.approval(request.approvalId);
      const resumed = approval ? nextResultOf(await rootOf(approval.runId)) : undefined;
      const outcome = await decideClick(store, queue, { approvers: [], ...request });
      return outcome.kind === "decided" && outcome.runReady && resumed ? { ...outcome, resumed } : outcome;
    },
    async stop(sessionId, runId) {
      return (await store.requestCancel({ sessionId, ...(runId ? { runId } : {}) })).length > 0;
    },
    reset: (sessionId) => acceptReset(store, queue, sessionId, `reset:${newRunId()}`),
    idle: () => (queue as InProcessRunQueue).idle(),
    async close() {
      await worker.stop();
      await deployment.close();
      await platforms.close();
    },
  };
}
