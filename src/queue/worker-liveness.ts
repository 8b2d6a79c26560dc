/**
 * Worker liveness for the PostgreSQL queue. A worker holds a turn (its row's locked_by) from its
 * claim until it completes or gives it back; a worker that dies (SIGKILL, a lost machine) does
 * neither. So each worker writes a heartbeat row every `heartbeatMs`, and every worker sweeps every
 * `sweepMs`: a worker whose heartbeat is older than `deadAfterMs` is dead, and so is one that holds
 * turns claimed longer ago than that without any heartbeat row; the sweep frees their turns (a turn
 * delivered MAX_DELIVERIES times is given up instead) and wakes the idle workers, one of which takes
 * the conversation over.
 *
 * The bound, by construction: a worker killed at time t wrote its last heartbeat, and made its last
 * claim, at or before t, so both are older than `deadAfterMs` by t + deadAfterMs; some live worker
 * sweeps within `sweepMs` after that; an idle worker is woken by the sweep's notice (or polls
 * within `pollIntervalMs`). So takeover <= deadAfterMs + sweepMs + pollIntervalMs, 15 + 5 + 1 = 21 s
 * with the defaults, plus a few queries' time, inside the 30 s promised.
 *
 * The other side: a worker cut off from the database (or frozen) for longer than `deadAfterMs` will
 * be declared dead while it may still be running a turn. It stops itself first: once it has had no
 * successful heartbeat for `deadAfterMs - heartbeatMs`, or finds its row gone, it aborts its turns'
 * signals and takes no more (`onLeaseLost`), giving its turns back for the worker that takes over.
 * A step already in flight can still finish on the old worker: execution is at least once.
 */
import { hostname } from "node:os";
import type pg from "pg";
import { MAX_DELIVERIES, wakeChannel } from "./postgres-turns.js";

export interface LivenessTimings {
  /** How often a worker writes its heartbeat (default 5 s). */
  heartbeatMs: number;
  /** A worker silent for this long is dead, and its turns are taken over (default 15 s). */
  deadAfterMs: number;
  /** How often every worker looks for dead ones (default 5 s). */
  sweepMs: number;
  /** How often a worker with a free turn looks for work when no notice woke it (default 1 s). */
  pollIntervalMs: number;
}

export const DEFAULT_LIVENESS: LivenessTimings = {
  heartbeatMs: 5_000,
  deadAfterMs: 15_000,
  sweepMs: 5_000,
  pollIntervalMs: 1_000,
};

/** The longest a killed worker's conversation waits to be taken over (see the bound above), before query time. */
export function takeoverBoundMs(timings: LivenessTimings): number {
  return timings.deadAfterMs + timings.sweepMs + timings.pollIntervalMs;
}

/** A caller's mistake, in one sentence: a worker must miss at least one heartbeat before it counts as dead. */
export function checkTimings(timings: LivenessTimings): void {
  for (const [name, value] of Object.entries(timings)) {
    if (!Number.isFinite(value) || value <= 0)
      throw new Error(`the queue's ${name} must be a positive number of milliseconds`);
  }
  if (timings.deadAfterMs < 2 * timings.heartbeatMs)
    throw new Error(
      "the queue's deadAfterMs must be at least twice its heartbeatMs, so that one late heartbeat does not declare a live worker dead",
    );
}

/** The heartbeat table (created with the turns, postgres-turns.ts). */
const workersTable = (schema: string) => `"${schema}".workers`;

/**
 * One sweep, in one statement (one snapshot): drops the rows of workers silent for `deadAfterMs`,
 * frees the turns they and any unregistered holder of an old claim held (giving up a turn delivered
 * MAX_DELIVERIES times), and wakes idle workers. Returns the ids of the workers found dead.
 */
export async function sweepDeadWorkers(pool: pg.Pool, schema: string, deadAfterMs: number): Promise<string[]> {
  const result = await pool.query<{ dead: string[] }>(
    `with gone as (
       delete from ${workersTable(schema)} where heartbeat_at < now() - $1 * interval '1 millisecond' returning worker_id
     ), orphaned as (
       select distinct locked_by as worker_id from "${schema}".turns
       where locked_by is not null and locked_at < now() - $1 * interval '1 millisecond'
         and locked_by not in (select worker_id from ${workersTable(schema)} where heartbeat_at >= now() - $1 * interval '1 millisecond')
     ), dead as (
       select worker_id from gone union select worker_id from orphaned
     ), freed as (
       update "${schema}".turns
       set locked_by = null, locked_at = null, given_up_at = case when deliveries >= $2 then now() end
       where locked_by in (select worker_id from dead)
       returning given_up_at
     )
     select array(select worker_id from dead) as dead,
            (select pg_notify($3, '') where exists (select 1 from freed where given_up_at is null)) as woken`,
    [deadAfterMs, MAX_DELIVERIES, wakeChannel(schema)],
  );
  return result.rows[0]?.dead ?? [];
}

export interface Liveness {
  /** Stops the timers and removes the worker's row (after a graceful stop: it holds no locks). */
  stop(options: { removeRow: boolean }): Promise<void>;
}

/**
 * Registers `workerId` and keeps it alive; sweeps for dead workers at once and then every `sweepMs`.
 * `onLeaseLost` is called once, when the worker must assume the others have declared it dead.
 */
export async function startLiveness(options: {
  pool: pg.Pool;
  schema: string;
  workerId: string;
  timings: LivenessTimings;
  onLeaseLost: () => void;
  onError: (error: unknown, context: string) => void;
}): Promise<Liveness> {
  const { pool, schema, workerId, timings, onError } = options;
  // Times are taken before each write: the row's heartbeat_at is never earlier than what this side counts from.
  let lastBeatStarted = performance.now();
  await pool.query(`insert into ${workersTable(schema)} (worker_id, host, pid) values ($1, $2, $3)`, [
    workerId,
    hostname(),
    process.pid,
  ]);
  let lost = false;
  const loseLease = () => {
    if (lost) return;
    lost = true;
    clearInterval(watchdog);
    options.onLeaseLost();
  };

  async function beat(): Promise<void> {
    const started = performance.now();
    try {
      const result = await pool.query(`update ${workersTable(schema)} set heartbeat_at = now() where worker_id = $1`, [
        workerId,
      ]);
      if (result.rowCount === 0) return loseLease(); // swept: the others have taken this worker's turns over
      lastBeatStarted = started;
    } catch (error) {
      onError(error, "writing the worker's heartbeat");
    }
  }
  // Stop before the others can declare this worker dead (they may from the last heartbeat +
  // deadAfterMs on); a watchdog of its own, so that a heartbeat that hangs cannot delay it.
  const watchdog = setInterval(() => {
    if (performance.now() - lastBeatStarted > timings.deadAfterMs - timings.heartbeatMs) loseLease();
  }, timings.heartbeatMs / 2);

  const sweep = () =>
    sweepDeadWorkers(pool, schema, timings.deadAfterMs).catch((error: unknown) =>
      onError(error, "sweeping for dead workers"),
    );
  await sweep();
  // Chained timeouts, not intervals: a slow query never overlaps the next one of its kind.
  const timers = new Set<NodeJS.Timeout>();
  let running = true;
  const pending = new Set<Promise<unknown>>();
  const every = (ms: number, task: () => Promise<unknown>) => {
    const schedule = () => {
      const timer = setTimeout(() => {
        timers.delete(timer);
        if (!running) return;
        const work = task().finally(() => pending.delete(work));
        pending.add(work);
        void work.then(() => running && !lost && schedule());
      }, ms);
      timers.add(timer);
    };
    schedule();
  };
  every(timings.heartbeatMs, beat);
  every(timings.sweepMs, sweep);

  return {
    async stop({ removeRow }) {
      running = false;
      clearInterval(watchdog);
      for (const timer of timers) clearTimeout(timer);
      await Promise.all(pending);
      if (removeRow)
        await pool
          .query(`delete from ${workersTable(schema)} where worker_id = $1`, [workerId])
          .catch((error: unknown) => onError(error, "removing the worker's heartbeat"));
    },
  };
}
