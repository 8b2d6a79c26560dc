/**
 * Starts a process's roles on one deployment: the worker first (a missing model is said before any
 * event is accepted), then ingress, which borrows the worker's model for replays and its tools'
 * names when both run here. One process on SQLite is `all` with the queue in this process. With no
 * model configured and no chat platform, `all` runs the web server alone, whose pages say what to set.
 * Whatever the role, the process sweeps conversations older than GLASSBOX_RETENTION_DAYS.
 */
import { type GlassboxConfig, modelProblem } from "../config.js";
import type { Logger } from "../logger.js";
import { startRetention } from "../conversations/retention.js";
import { createUploadShelf } from "../adapters/web/web-uploads.js";
import { createHealth, type Health, startHealthServer } from "../adapters/web/health.js";
import type { GlassboxAgent } from "../setup.js";
import type { StorePortOptions } from "../store/index.js";
import type { StorePort } from "../store/port.js";
import { type Deployment, openDeployment, type Role } from "./deployment.js";
import { type IngressRole, startIngressRole } from "./ingress.js";
import { queueOptionsFromEnv } from "./queue-settings.js";
import { startWorkerRole, type WorkerRole } from "./worker.js";

export interface StartedRoles {
  deployment: Deployment;
  /** What /readyz reports. */
  health: Health;
  /** The health port's address (GLASSBOX_HEALTH_PORT), when it has one. */
  healthUrl?: string;
  worker?: WorkerRole;
  ingress?: IngressRole;
  /** Stops receiving, then the worker (its turns settle), then closes the queue and the store. */
  stop(): Promise<void>;
}

export interface StartRolesOptions {
  config: GlassboxConfig;
  role: Role;
  log: Logger;
  /** The worker's agent; by default built from `config`. */
  agent?: GlassboxAgent;
  /** Where the store is (storePortOptionsFromEnv); by default SQLite at `config.databasePath`. */
  where?: StorePortOptions;
  /** A store already open instead (left open by stop). */
  store?: StorePort;
  /** Which model answers, as the pages show it (the demo's "scripted model (demo)"); by default the configured one. */
  modelLabel?: string;
  /** Called when the worker stops taking turns by itself (its lease lost). */
  onWorkerLost?: (cause: string) => void;
}

export async function startRoles(options: StartRolesOptions): Promise<StartedRoles> {
  const { config, role, log } = options;
  // The health port answers from the start: live while the database opens (and migrates), ready once all is.
  const health = createHealth(role);
  health.set("store", () => "opening the database");
  const healthServer =
    config.web.healthPort === undefined
      ? undefined
      : await startHealthServer(health, config.web.host, config.web.healthPort);
  const deployment = await openDeployment({
    store: options.where ?? { databasePath: config.databasePath },
    queue: queueOptionsFromEnv(),
    role,
    log,
    given: options.store,
  }).catch(async (error: unknown) => {
    await healthServer?.stop();
    throw error;
  });
  const answering = (ping: () => Promise<void>) => () =>
    ping().then(
      () => undefined,
      () => "not answering",
    );
  health.set(
    "store",
    answering(() => deployment.store.ping()),
  );
  // On PostgreSQL the run queue is tables of their own; in one process on SQLite it is this process.
  if (deployment.store.kind === "postgres")
    health.set(
      "queue",
      answering(() => deployment.queue.ping()),
    );
  const stops: Array<() => Promise<void>> = [...(healthServer ? [healthServer.stop] : []), deployment.close];
  const stop = async () => {
    health.set("process", () => "stopping");
    for (const part of stops.splice(0).reverse())
      await part().catch((error: unknown) => log.warn({ error: (error as Error).message }, "stopping failed"));
  };
  try {
    // Nothing to run turns for but the pages: they serve the trace and say what to set.
    const problem =
      role === "all" && !options.agent && !config.slack && !config.discord ? modelProblem(config) : undefined;
    // Files uploaded to the web server reach a worker only in this process.
    const uploads = role === "all" && !problem ? createUploadShelf() : undefined;
    let worker: WorkerRole | undefined;
    if ((role === "worker" || role === "all") && !problem) {
      health.set("worker", () => "starting");
      worker = await startWorkerRole({
        config,
        uploads,
        deployment,
        log,
        concurrency: config.workerConcurrency,
        agent: options.agent,
      });
      stops.push(worker.stop);
      let stoppedBy: string | undefined;
      void worker.stopped.then((cause) => {
        stoppedBy = cause;
        if (cause !== "stopped") options.onWorkerLost?.(cause);
      });
      health.set("worker", () => (stoppedBy ? `stopped taking turns (${stoppedBy})` : undefined));
    }
    if (problem) health.set("model", () => "not configured: the page says what to set");
    await startupChores(deployment.store, log);
    // Every role sweeps, so retention holds whichever processes run (an ingress alone, the pages alone).
    if (config.retentionDays !== undefined) {
      const retention = startRetention({
        store: deployment.store,
        queue: deployment.queue,
        days: config.retentionDays,
        log,
      });
      stops.push(async () => retention.stop());
    }
    let ingress: IngressRole | undefined;
    if (role === "ingress" || role === "all") {
      health.set("ingress", () => "starting");
      ingress = await startIngressRole({
        config,
        deployment,
        log,
        ...(worker
          ? {
              replay: worker.replay,
              hints: worker.hints,
              toolNames: worker.toolNames,
              prompts: worker.prompts,
              channels: worker.channels,
            }
          : {}),
        ...(problem ? { problem, hints: [], toolNames: [] } : {}),
        modelLabel: options.modelLabel,
        uploads,
        health,
      });
      stops.push(ingress.stop);
      health.set("ingress", () => undefined);
    }
    return { deployment, health, healthUrl: healthServer?.url, worker, ingress, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** What a process tidies when it starts, on the shared store. */
async function startupChores(store: StorePort, log: Logger): Promise<void> {
  // Event claims only need to outlive the platforms' redeliveries (minutes); a week is plenty.
  await store.pruneClaims(new Date(Date.now() - 7 * 86_400_000));
  await store.pruneCancelRequests(new Date(Date.now() - 86_400_000));
  // Runs of a process that is gone are marked interrupted; the worker their turn goes to next takes them over.
  const interrupted = await store.interruptOrphanedRuns();
  if (interrupted > 0) log.info({ runs: interrupted }, "marked the runs of a stopped process interrupted");
}
