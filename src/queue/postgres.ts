/**
 * The run queue on PostgreSQL, for several processes sharing one database: graphile-worker 0.17 (the
 * last line that runs on Node 20) with one named queue per conversation, so a conversation's turns run
 * one at a time, in order, on whichever worker process is free, while other conversations go on.
 * graphile-worker leaves a dead worker's jobs and queues locked for 4 hours; worker-liveness.ts
 * (heartbeats and a sweeper) takes a killed worker's conversations over within 30 s.
 *
 * Execution is at least once: a turn running when its worker died runs again on another worker
 * (context.delivery > 1), so handlers must be idempotent.
 */
import { EventEmitter } from "node:events";
import {
  Logger as GraphileLogger,
  makeWorkerUtils,
  runTaskList,
  type LogLevel,
  type Task,
  type WorkerEvents,
  type WorkerPool,
} from "graphile-worker";
import pg from "pg";
import type { Logger } from "../logger.js";
import { addTurn, checkSchemaName, turnOf, TURN_TASK } from "./postgres-enqueue.js";
import { DEFAULT_RETRY_DELAYS_MS, runTurn } from "./run-turn.js";
import type { QueueWorker, RunQueue, StopCause, WorkOptions } from "./types.js";
import { finishJob, releaseJob } from "./postgres-jobs.js";
import {
  checkTimings,
  DEFAULT_LIVENESS,
  installLiveness,
  startLiveness,
  type LivenessTimings,
} from "./worker-liveness.js";

export interface PostgresQueueOptions {
  /** postgres://... (GLASSBOX_DATABASE_URL). */
  connectionString: string;
  /** graphile-worker's schema, which also holds the heartbeat table (default graphile_worker). */
  schema?: string;
  timings?: Partial<LivenessTimings>;
  /** Waits between attempts of a handler that throws (default DEFAULT_RETRY_DELAYS_MS). */
  retryDelaysMs?: readonly number[];
  /** Where graphile-worker's lines and the queue's warnings go (nowhere without one). */
  logger?: Logger;
}

/** Connections a worker's jobs share at most, whatever its concurrency. */
const MAX_JOB_CONNECTIONS = 10;

/** The caller's transaction: a `pg` client inside BEGIN. */
export type PostgresTransaction = Pick<pg.ClientBase, "query">;

export interface PostgresRunQueue extends RunQueue<PostgresTransaction> {
  readonly schema: string;
  readonly timings: LivenessTimings;
}

/** Opens the queue: installs or upgrades graphile-worker's schema and the heartbeat table (safe when several processes start at once). */
export async function openPostgresRunQueue(options: PostgresQueueOptions): Promise<PostgresRunQueue> {
  const schema = options.schema ?? "graphile_worker";
  checkSchemaName(schema);
  const timings = { ...DEFAULT_LIVENESS, ...options.timings };
  checkTimings(timings);
  const retryDelaysMs = options.retryDelaysMs ?? DEFAULT_RETRY_DELAYS_MS;
  const logger = graphileLogger(options.logger);
  const pool = newPool({ connectionString: options.connectionString, max: 4 }, options.logger);
  try {
    const utils = await makeWorkerUtils({ pgPool: pool, schema, logger });
    try {
      await utils.migrate();
    } finally {
      await utils.release();
    }
    await installLiveness(pool, schema);
  } catch (error) {
    await pool.end().catch(() => {});
    throw unreachable(error, options.connectionString);
  }
  const workers = new Set<QueueWorker>();

  return {
    schema,
    timings,
    async enqueue(turn) {
      return { enqueued: await addTurn(pool, schema, turn) };
    },
    async enqueueIn(transaction, turn) {
      await addTurn(transaction, schema, turn);
    },
    async work(handler, workOptions) {
      const worker = await startWorker(
        { connectionString: options.connectionString, schema, timings, retryDelaysMs, logger, log: options.logger },
        handler,
        workOptions,
      );
      workers.add(worker);
      void worker.stopped.then(() => workers.delete(worker));
      return worker;
    },
    async close() {
      await Promise.all([...workers].map((worker) => worker.stop()));
      await pool.end();
    },
  };
}

interface WorkerSettings {
  connectionString: string;
  schema: string;
  timings: LivenessTimings;
  retryDelaysMs: readonly number[];
  logger: GraphileLogger;
  log?: Logger;
}

async function startWorker(
  settings: WorkerSettings,
  handler: Parameters<PostgresRunQueue["work"]>[0],
  options: WorkOptions,
): Promise<QueueWorker> {
  const { schema, timings, retryDelaysMs } = settings;
  if (!Number.isInteger(options.concurrency) || options.concurrency < 1)
    throw new Error("a worker's concurrency must be a whole number of at least 1");
  const onError =
    options.onError ??
    ((error: unknown) =>
      settings.log?.error({ error: (error as Error)?.message }, "a turn failed on every attempt and was given up"));
  const reportError = (error: unknown, context: string) =>
    settings.log?.warn({ error: (error as Error)?.message }, context);
  // Jobs and the heartbeat use separate connections, so that busy turns never delay a heartbeat. A
  // turn holds no connection while it runs (only to fetch and finish its job), so a few serve many
  // turns, and a worker of high concurrency stays within the server's max_connections.
  const jobsPool = newPool(
    { connectionString: settings.connectionString, max: Math.min(options.concurrency + 2, MAX_JOB_CONNECTIONS) },
    settings.log,
  );
  const livenessPool = newPool(
    { connectionString: settings.connectionString, max: 2, query_timeout: timings.deadAfterMs },
    settings.log,
  );
  const lease = new AbortController();
  let workerId = "";

  const task: Task = async (payload, helpers) => {
    const turn = turnOf(payload);
    const outcome = await runTurn(
      handler,
      turn,
      { signal: lease.signal, delivery: helpers.job.attempts, workerId },
      retryDelaysMs,
      onError,
    );
    const query = (text: string, values: unknown[]) => helpers.query(text, values);
    if (outcome !== "abandoned") {
      await finishJob(query, schema, helpers.job.id, workerId).catch((error: unknown) =>
        reportError(error, "finishing a turn"),
      );
      return;
    }
    // Not completed (that would delete the job) but given back as it was, for the worker that takes over.
    await releaseJob(query, schema, helpers.job.id, workerId).catch((error: unknown) =>
      reportError(error, "giving back a turn"),
    );
    throw new Error("this worker lost its lease; the turn is left to the worker that takes over");
  };

  // Taking a job locks every free conversation queue for a moment, so a worker of this pool looking
  // at the same moment finds none and would sleep until its next poll: each job taken wakes another.
  const events: WorkerEvents = new EventEmitter();
  events.on("job:start", () => {
    try {
      workerPool.nudge(1);
    } catch {
      // the pool is stopping: nobody is left to wake
    }
  });
  // No local queue (graphile-worker's batch fetching): a batch could hold two turns of one conversation.
  const workerPool: WorkerPool = runTaskList(
    {
      concurrency: options.concurrency,
      schema,
      pollInterval: timings.pollIntervalMs,
      noHandleSignals: true,
      logger: settings.logger,
      events,
    },
    { [TURN_TASK]: task },
    jobsPool,
  );
  workerId = workerPool.id;

  let finish: (cause: StopCause) => void = () => {};
  const stopped = new Promise<StopCause>((resolve) => (finish = resolve));
  let stopping: Promise<void> | undefined;
  let liveness: Awaited<ReturnType<typeof startLiveness>> | undefined;
  const shutDown = (cause: StopCause): Promise<void> =>
    (stopping ??= (async () => {
      if (cause !== "stopped") lease.abort(new Error("this worker lost its lease"));
      // Graceful: running turns finish (or, after a lost lease, settle on their aborted signal).
      await Promise.resolve(workerPool.gracefulShutdown()).catch((error: unknown) =>
        reportError(error, "stopping the queue's workers"),
      );
      // After a graceful stop the worker holds no locks and its row can go; after a lost lease it is gone already.
      await liveness?.stop({ removeRow: cause === "stopped" });
      await Promise.all([jobsPool.end(), livenessPool.end()]).catch(() => {});
      finish(cause);
    })());
  void workerPool.promise.then(
    () => shutDown("ended"),
    () => shutDown("ended"),
  );

  try {
    liveness = await startLiveness({
      pool: livenessPool,
      schema,
      workerId,
      timings,
      onLeaseLost: () => void shutDown("lease_lost"),
      onError: reportError,
    });
  } catch (error) {
    await shutDown("ended");
    throw unreachable(error, settings.connectionString);
  }
  return { id: workerId, stopped, stop: () => shutDown("stopped") };
}

/** A pool whose broken connections are logged, not thrown at the process (an idle one's or a busy one's). */
function newPool(config: pg.PoolConfig, log: Logger | undefined): pg.Pool {
  const pool = new pg.Pool(config);
  const report = (error: Error) => log?.warn({ error: error.message }, "a queue database connection failed");
  pool.on("error", report);
  pool.on("connect", (client) => client.on("error", report));
  return pool;
}

/** graphile-worker's log lines through glassbox's logger; its chatty "info" lines are debug here. */
function graphileLogger(log: Logger | undefined): GraphileLogger {
  return new GraphileLogger(() => (level: LogLevel, message: string) => {
    if (!log) return;
    const label = String(level);
    if (label === "error") log.error({ source: "graphile-worker" }, message);
    else if (label === "warning") log.warn({ source: "graphile-worker" }, message);
    else log.debug({ source: "graphile-worker" }, message);
  });
}

/** A database that cannot be reached or used, in one sentence that names it without its password. */
function unreachable(error: unknown, connectionString: string): Error {
  let where = "the configured database";
  try {
    const url = new URL(connectionString);
    where = `${url.hostname}:${url.port || "5432"}${url.pathname}`;
  } catch {
    // not a URL: keep the general words rather than echo a string that may hold a password
  }
  const reason = (error as { code?: string })?.code ?? (error as Error)?.message ?? String(error);
  return new Error(
    `The run queue cannot use PostgreSQL at ${where} (${reason}); check GLASSBOX_DATABASE_URL and that the server is running.`,
    { cause: error },
  );
}
