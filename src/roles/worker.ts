/**
 * GLASSBOX_ROLE=worker: this process runs conversations from the run queue, N turns at once (each
 * of a different conversation), on the PostgreSQL store that ingress processes wrote the turns'
 * content to. Each turn is one of turns.ts's three kinds (a message's run, a resume, a reset), run
 * by the conversations' runQueued, which is idempotent: a turn whose worker died runs again here.
 *
 * Beside the turns it listens for cancel requests ("stop" in a thread reaches the worker running
 * that run through the store's NOTIFY) and sweeps expired approvals. It takes no platform events:
 * answers go out through the platforms' web APIs (surfaces.ts).
 */
import { setTimeout as sleep } from "node:timers/promises";
import { createConversations } from "../conversations/conversations.js";
import { watchChannelSettings, type LiveChannelSettings } from "../conversations/channel-settings.js";
import { startScheduleTicker } from "../conversations/schedules.js";
import { assertModelConfigured, type GlassboxConfig } from "../config.js";
import type { Logger } from "../logger.js";
import { workOf, type TurnWork } from "../conversations/turns.js";
import type { QueueWorker, StopCause, Turn, TurnContext } from "../queue/types.js";
import { createAgentConfig, type GlassboxAgent } from "../setup.js";
import type { AgentConfig } from "../agent/loop.js";
import { createTokenCounter, encodingForModel } from "../agent/tokens.js";
import type { StorePort } from "../store/port.js";
import type { Deployment } from "./deployment.js";
import { startApprovalSweeper, type ApprovalSweeper } from "../conversations/approval-sweeper.js";
import { openWorkerSurfaces, type WorkerSurfaces } from "../adapters/surfaces.js";
import { replayOn, type ReplayOnModel } from "../adapters/web/web-replay.js";
import { examplePrompts, exampleRequests, type ExamplePrompt } from "../adapters/example-requests.js";
import type { UploadShelf } from "../adapters/web/web-uploads.js";

/** How long a stop waits for the running turns to settle; what is still running then is taken over by another worker. */
export const STOP_GRACE_MS = 25_000;

export interface WorkerRole {
  /** The store this worker runs on (the deployment's). */
  store: StorePort;
  worker: QueueWorker;
  sweeper: ApprovalSweeper;
  /**
   * Settles when the queue worker stops: "stopped" after stop(); "lease_lost" when it
   * stopped by itself, and then the process should exit non-zero so that a supervisor restarts it.
   */
  stopped: Promise<StopCause>;
  /** Replays a stored run on this worker's model (the trace viewer's, when ingress runs here too). */
  replay: ReplayOnModel;
  /** What to suggest asking, from this worker's tools, and their names (for ingress in the same process). */
  hints: string[];
  toolNames: string[];
  /** Slack's suggested prompts, from this worker's tools (for ingress in the same process). */
  prompts: ExamplePrompt[];
  /** The channel settings this worker follows (GLASSBOX_CHANNELS), for ingress in the same process. */
  channels?: LiveChannelSettings;
  /** Takes no more turns, lets the running ones settle (at most `stopGraceMs`), then closes. */
  stop(): Promise<void>;
}

/** What a worker runs turns with: the agent, with its pipelines and where its tools came from when it has them. */
export type WorkerAgent = AgentConfig & Partial<Pick<GlassboxAgent, "pipelines" | "toolSources" | "specialists">>;

export interface WorkerRoleOptions {
  config: GlassboxConfig;
  /** The store and the run queue (openDeployment); the role leaves them open when it stops. */
  deployment: Deployment;
  log: Logger;
  /** The agent to run turns with; by default built from `config` (and closed when the role stops). */
  agent?: WorkerAgent;
  /** Where runs show; by default the platforms' of `config` (left open when the role stops, when given). */
  surfaces?: WorkerSurfaces;
  /** Turns run at once (GLASSBOX_WORKER_CONCURRENCY). */
  concurrency: number;
  /** How often expired approvals are swept (default 30 s). */
  sweepMs?: number;
  stopGraceMs?: number;
  /** How long a turn waits for a run slot before its surface says it is queued (default QUEUED_NOTICE_MS). */
  queuedNoticeMs?: number;
  /** Files uploaded to the web server in this process (`all`), which its messages' runs read. */
  uploads?: UploadShelf;
}

export async function startWorkerRole(options: WorkerRoleOptions): Promise<WorkerRole> {
  const { config, log } = options;
  const { store, queue } = options.deployment;
  if (!options.agent) assertModelConfigured(config); // workers call the model; ingress never does
  const closing: Array<() => Promise<void>> = [];
  const closeAll = async () => {
    for (const close of closing.splice(0).reverse())
      await close().catch((error: unknown) => log.warn({ error: (error as Error).message }, "worker: closing failed"));
  };
  try {
    const built = async (): Promise<WorkerAgent> => {
      const made = await createAgentConfig(config, log, { port: store });
      closing.push(() => made.close());
      return made;
    };
    const agent = options.agent ?? (await built());
    const surfaces = options.surfaces ?? (await openWorkerSurfaces(config, log, store.publishText, options.uploads));
    if (!options.surfaces) closing.push(() => surfaces.close());
    const channels = config.channelsFile
      ? watchChannelSettings(config.channelsFile, log, agent.tools.names())
      : undefined;
    if (channels) closing.push(async () => channels.stop());
    // Threads read before a run and scheduled messages are counted in the model's encoding.
    const counter = await createTokenCounter(config.encoding ?? encodingForModel(config.model.model));
    const conversations = createConversations(agent, store, {
      channels,
      ...(agent.specialists ? { modelNamed: agent.specialists.modelNamed } : {}),
      openSurface: surfaces.openSurface,
      showDecision: surfaces.showDecision,
      receiveFiles: surfaces.receiveFiles,
      ...(surfaces.readThread
        ? {
            readThread: { read: surfaces.readThread, counter },
          }
        : {}),
      approvalTtlSeconds: config.approvalTtlSeconds,
      dailyLimits: config.dailyLimits,
      ...(config.retentionDays !== undefined ? { retentionDays: config.retentionDays } : {}),
      pipelines: agent.pipelines,
      queuedNoticeMs: options.queuedNoticeMs,
      onError: (error, context) => log.error({ error: (error as Error).message }, `worker: failed ${context}`),
    });
    // "stop" anywhere reaches the run here within a moment; between steps the run also asks the store.
    const unwatch = await store.watchCancels((notice) => {
      for (const runId of notice.runIds)
        if (conversations.stopRun(runId))
          log.info({ runId, sessionId: notice.sessionId }, "worker: stopping a run on request");
    });
    closing.push(unwatch);
    const sweeper = startApprovalSweeper({
      store,
      queue,
      showDecision: surfaces.showDecision,
      log,
      everyMs: options.sweepMs,
    });
    closing.push(() => sweeper.stop());
    // Every worker looks for scheduled runs; a tick fires once whichever looks first.
    const ticker = startScheduleTicker({
      store,
      queue,
      counter,
      log,
      ...(channels ? { channels } : {}),
      everyMs: config.scheduleLookMs,
    });
    closing.push(() => ticker.stop());

    const runTurn = async (turn: Turn, context: TurnContext): Promise<void> => {
      let work: TurnWork;
      try {
        work = workOf(turn);
      } catch (error) {
        log.error({ key: turn.key, error: (error as Error).message }, "worker: skipped a turn it cannot run");
        return; // a turn nobody can run would only be retried in place, holding up its conversation
      }
      await conversations.runQueued(work, { signal: context.signal, delivery: context.delivery });
    };
    const worker = await queue.work(runTurn, {
      concurrency: options.concurrency,
      onError: (error, turn) =>
        log.error(
          { key: turn.key, conversation: turn.conversation, error: (error as Error)?.message },
          "worker: a turn failed on every attempt and was given up",
        ),
    });
    log.info({ worker: worker.id, concurrency: options.concurrency }, "worker: running turns from the queue");
    // Approvals that ran out while no worker ran expire now, not a sweep interval later.
    void sweeper
      .sweep()
      .catch((error: unknown) =>
        log.warn({ error: (error as Error).message }, "worker: the first approval sweep failed; it runs again shortly"),
      );
    const toolSources = agent.toolSources ?? new Map();
    const hints = exampleRequests(toolSources);
    const toolNames = agent.tools.names();
    // What ingress processes (which load no tools) name and suggest while this worker lives.
    await store
      .offerTools({ tools: toolNames, hints })
      .catch((error: unknown) =>
        log.warn(
          { error: (error as Error).message },
          "worker: recording its tools for ingress failed; ingress pages name none",
        ),
      );

    let stopping: Promise<void> | undefined;
    const stop = () =>
      (stopping ??= (async () => {
        await sweeper.stop();
        const grace = options.stopGraceMs ?? STOP_GRACE_MS;
        const settled = await Promise.race([worker.stop().then(() => true), sleep(grace, false, { ref: false })]);
        if (!settled) {
          // The turns still running keep their place in the queue: another worker takes them over.
          log.warn(
            { graceMs: grace },
            "worker: turns were still running at the end of the grace period; another worker takes them over",
          );
          return;
        }
        await closeAll();
      })());
    // Stopped by itself (its lease lost): close what is left.
    const stopped = worker.stopped.then(async (cause) => {
      if (cause !== "stopped") await closeAll();
      return cause;
    });
    return {
      store,
      worker,
      sweeper,
      stopped,
      stop,
      replay: replayOn(agent.model, store, undefined, agent.runSlots),
      hints,
      toolNames,
      prompts: examplePrompts(toolSources, 4),
      ...(channels ? { channels } : {}),
    };
  } catch (error) {
    await closeAll();
    throw error;
  }
}
