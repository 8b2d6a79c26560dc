/**
 * The run queue on PostgreSQL, for several processes sharing one database: a table of turns of its
 * own (postgres-turns.ts), where a conversation's turns run one at a time, in order, on whichever
 * worker process is free, while other conversations go on. Idle workers sleep until a notice on the
 * queue's channel (after an enqueue's commit, a turn given back or freed) or their poll;
 * worker-liveness.ts (heartbeats and a sweeper) takes a killed worker's conversations over within 30 s.
 *
 * Execution is at least once: a turn running when its worker died runs again on another worker
 * (context.delivery > 1), so handlers must be idempotent.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import type { Logger } from "../logger.js";
import { preparingStatements, sharingQueries } from "../store/postgres-shared.js";
import {
  addTurn,
  checkSchemaName,
  claimTurns,
  completeTurn,
  installTurns,
  releaseTurn,
  turnDelete,
  turnInsert,
  turnOf,
  wakeChannel,
  wakeWorkers,
  type ClaimedTurn,
} from "./postgres-turns.js";
import { DEFAULT_RETRY_DELAYS_MS, runTurn } from "./run-turn.js";
import type { QueueWorker, RunQueue, StopCause, Turn, TurnHandler, WorkOptions } from "./types.js";
import { checkTimings, DEFAULT_LIVENESS, startLiveness, type LivenessTimings } from "./worker-liveness.js";

export interface PostgresQueueOptions {
  /** postgres://... (GLASSBOX_DATABASE_URL). */
  connectionString: string;
  /** The schema of the queue's tables (default glassbox_queue). */
  schema?: string;
  timings?: Partial<LivenessTimings>;
  /** Waits between attempts of a handler that throws (default DEFAULT_RETRY_DELAYS_MS). */
  retryDelaysMs?: readonly number[];
  /** Where the queue's warnings go (nowhere without one). */
  logger?: Logger;
}

/** The wait before a lost listening connection is opened again. */
const RELISTEN_MS = 1_000;

/**
 * The caller's transaction: a `pg` client inside BEGIN; `send`, where it has one, for a statement the
 * transaction waits for before it commits (the turn's insert then travels with the caller's COMMIT);
 * and where to leave work for after its commit (without one, as for a bare client, idle workers find
 * the turn at their next poll).
 */
export type PostgresTransaction = Pick<pg.ClientBase, "query"> & {
  send?(text: string, values: unknown[]): void;
  afterCommit?(callback: () => void): void;
};

export interface PostgresRunQueue extends RunQueue<PostgresTransaction> {
  readonly schema: string;
  readonly timings: LivenessTimings;
}

/** Opens the queue: creates its tables when missing (safe when several processes start at once). */
export async function openPostgresRunQueue(options: PostgresQueueOptions): Promise<PostgresRunQueue> {
  const schema = options.schema ?? "glassbox_queue";
  checkSchemaName(schema);
  const timings = { ...DEFAULT_LIVENESS, ...options.timings };
  checkTimings(timings);
  const retryDelaysMs = options.retryDelaysMs ?? DEFAULT_RETRY_DELAYS_MS;
  // Its own connection only to install the tables; enqueues and wake-ups go on the shared one.
  const pool = newPool({ connectionString: options.connectionString, max: 1 }, options.logger, 1);
  try {
    await installTurns(pool, schema);
  } catch (error) {
    await pool.end().catch(() => {});
    throw unreachable(error, options.connectionString);
  }
  const workers = new Set<QueueWorker>();
  const wake = wakeWorkers(pool, schema, (error) =>
    options.logger?.warn({ error: (error as Error)?.message }, "waking the queue's workers"),
  );

  return {
    schema,
    timings,
    async enqueue(turn) {
      const enqueued = await addTurn(pool, schema, turn);
      if (enqueued) wake();
      return { enqueued };
    },
    async enqueueIn(transaction, turn) {
      if (transaction.send) transaction.send(...turnInsert(schema, turn));
      else await addTurn(transaction, schema, turn);
      transaction.afterCommit?.(wake);
    },
    async forgetIn(transaction, selection) {
      return (await transaction.query(...turnDelete(schema, selection))).rowCount ?? 0;
    },
    async work(handler, workOptions) {
      const settings = {
        connectionString: options.connectionString,
        schema,
        timings,
        retryDelaysMs,
        log: options.logger,
      };
      const worker = await startWorker(settings, handler, workOptions);
      workers.add(worker);
      void worker.stopped.then(() => workers.delete(worker));
      return worker;
    },
    async ping() {
      await pool.query(`select 1 from "${schema}".turns limit 1`);
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
  log?: Logger;
}

/**
 * A worker: claims free turns while it has room for them, runs each with `handler`, and completes
 * it (or, after a lost lease, gives it back). It looks for work when a turn of its own settles, on
 * a notice, and every pollIntervalMs while it has room.
 */
async function startWorker(settings: WorkerSettings, handler: TurnHandler, options: WorkOptions): Promise<QueueWorker> {
  const { schema, timings, retryDelaysMs } = settings;
  if (!Number.isInteger(options.concurrency) || options.concurrency < 1)
    throw new Error("a worker's concurrency must be a whole number of at least 1");
  const onError =
    options.onError ??
    ((error: unknown) =>
      settings.log?.error({ error: (error as Error)?.message }, "a turn failed on every attempt and was given up"));
  const reportError = (error: unknown, context: string) =>
    settings.log?.warn({ error: (error as Error)?.message }, context);
  // Turns and the heartbeat use separate connections, so that busy turns never delay a heartbeat. A
  // turn holds no connection while it runs (only to be claimed and completed): the worker's claims and
  // completions share one connection, and what it sends at once leaves together.
  const turnsPool = newPool({ connectionString: settings.connectionString, max: 1 }, settings.log, 1);
  const livenessPool = newPool(
    { connectionString: settings.connectionString, max: 2, query_timeout: timings.deadAfterMs },
    settings.log,
  );
  const workerId = `worker-${randomBytes(9).toString("hex")}`;
  const lease = new AbortController();
  const running = new Set<Promise<void>>();
  let closing = false;

  async function run(claimed: ClaimedTurn): Promise<void> {
    let turn: Turn;
    try {
      turn = turnOf(claimed.turn);
    } catch (error) {
      reportError(error, "a queued turn was dropped");
      return completeTurn(turnsPool, schema, claimed.id, workerId);
    }
    const context = { signal: lease.signal, delivery: claimed.delivery, workerId };
    const outcome = await runTurn(handler, turn, context, retryDelaysMs, onError);
    if (outcome === "abandoned") await releaseTurn(turnsPool, schema, claimed.id, workerId);
    else await completeTurn(turnsPool, schema, claimed.id, workerId);
  }

  // One look for work at a time; a reason to look again that comes during one runs another after it.
  let looking: Promise<void> | undefined;
  let lookAgain = false;
  const room = () => (closing || lease.signal.aborted ? 0 : options.concurrency - running.size);
  function lookForWork(): void {
    if (looking) {
      lookAgain = true;
      return;
    }
    looking = (async () => {
      do {
        lookAgain = false;
        while (room() > 0) {
          const claimed = await claimTurns(turnsPool, schema, workerId, room());
          for (const turn of claimed) {
            const work: Promise<void> = run(turn)
              .catch((error: unknown) => reportError(error, "finishing a turn"))
              .finally(() => {
                running.delete(work);
                lookForWork();
              });
            running.add(work);
          }
          if (claimed.length === 0) break;
        }
      } while (lookAgain && room() > 0);
    })()
      .catch((error: unknown) => reportError(error, "looking for turns"))
      .finally(() => (looking = undefined));
  }

  let finish: (cause: StopCause) => void = () => {};
  const stopped = new Promise<StopCause>((resolve) => (finish = resolve));
  let stopping: Promise<void> | undefined;
  let liveness: Awaited<ReturnType<typeof startLiveness>> | undefined;
  let listener: Awaited<ReturnType<typeof listenForWork>> | undefined;
  let poll: NodeJS.Timeout | undefined;
  const shutDown = (cause: StopCause): Promise<void> =>
    (stopping ??= (async () => {
      closing = true;
      if (cause !== "stopped") lease.abort(new Error("this worker lost its lease"));
      clearInterval(poll);
      await listener?.close();
      // Graceful: running turns finish (or, after a lost lease, settle on their aborted signal).
      await looking;
      await Promise.all(running);
      // After a graceful stop the worker holds no turns and its row can go; after a lost lease it is gone already.
      await liveness?.stop({ removeRow: cause === "stopped" });
      await Promise.all([turnsPool.end(), livenessPool.end()]).catch(() => {});
      finish(cause);
    })());

  try {
    liveness = await startLiveness({
      pool: livenessPool,
      schema,
      workerId,
      timings,
      onLeaseLost: () => void shutDown("lease_lost"),
      onError: reportError,
    });
    listener = await listenForWork(settings, lookForWork, () => closing);
  } catch (error) {
    await shutDown("stopped");
    throw unreachable(error, settings.connectionString);
  }
  poll = setInterval(() => room() > 0 && lookForWork(), timings.pollIntervalMs);
  lookForWork();
  return { id: workerId, stopped, stop: () => shutDown("stopped") };
}

/**
 * LISTENs on the queue's channel on a connection of its own, calling `wake` on every notice; a lost
 * connection is opened again after a moment (and `wake` called, for any notice missed meanwhile).
 */
async function listenForWork(
  settings: WorkerSettings,
  wake: () => void,
  closed: () => boolean,
): Promise<{ close(): Promise<void> }> {
  let client: pg.Client | undefined;
  let retry: NodeJS.Timeout | undefined;
  const connect = async (): Promise<void> => {
    const next = new pg.Client({ connectionString: settings.connectionString });
    next.on("notification", wake);
    next.on("error", (error) => {
      settings.log?.warn({ error: error.message }, "the queue's listening connection failed");
      if (client !== next) return;
      client = undefined;
      void next.end().catch(() => {});
      if (!closed()) retry = setTimeout(reconnect, RELISTEN_MS);
    });
    await next.connect();
    await next.query(`listen ${wakeChannel(settings.schema)}`);
    client = next;
  };
  const reconnect = () =>
    void connect().then(wake, (error: unknown) => {
      settings.log?.warn({ error: (error as Error)?.message }, "the queue cannot listen for turns yet");
      if (!closed()) retry = setTimeout(reconnect, RELISTEN_MS);
    });
  await connect();
  return {
    async close() {
      clearTimeout(retry);
      const last = client;
      client = undefined;
      await last?.end().catch(() => {});
    },
  };
}

/**
 * A pool whose broken connections are logged, not thrown at the process (an idle one's or a busy one's).
 * With `shared`, its single statements go on that many connections shared by all callers (postgres-shared.ts).
 */
function newPool(config: pg.PoolConfig, log: Logger | undefined, shared?: number): pg.Pool {
  const pool = new pg.Pool(config);
  const report = (error: Error) => log?.warn({ error: error.message }, "a queue database connection failed");
  if (shared) sharingQueries(pool, { connectionString: config.connectionString }, shared, report);
  pool.on("error", report);
  pool.on("connect", (client) => {
    client.on("error", report);
    preparingStatements(client);
  });
  return pool;
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
