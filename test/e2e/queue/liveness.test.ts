// Worker liveness of the PostgreSQL run queue: the 30 s takeover bound of the default settings (by
// construction; bench/queue-takeover.ts measures it), the sentence for a database it cannot use, and
// on real PostgreSQL (GLASSBOX_TEST_DATABASE_URL) the fence of a worker declared dead, the sweep of
// an unregistered lock holder, and the cleanup of empty conversation queues.
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { openPostgresRunQueue, type PostgresRunQueue } from "../../../src/queue/postgres.js";
import type { Turn } from "../../../src/queue/types.js";
import {
  checkTimings,
  DEFAULT_LIVENESS,
  deleteEmptyQueues,
  sweepDeadWorkers,
  takeoverBoundMs,
} from "../../../src/queue/worker-liveness.js";
import {
  createTestDatabase,
  NEEDS_DATABASE,
  TEST_DATABASE_URL,
  type Effect,
  type TestDatabase,
} from "../fixtures/queue-database.js";
import { createTurnHandler, memoryRecorder, type TurnScript } from "../fixtures/queue-handler.js";

const turn = (conversation: string, key: string, script: TurnScript = {}): Turn => ({
  conversation,
  key,
  payload: { ...script },
});
async function until(check: () => boolean | Promise<boolean>) {
  while (!(await check())) await sleep(10);
}

describe("run queue liveness settings", () => {
  it("the defaults take a killed worker's conversations over within 30 s, by construction", () => {
    // dead after 15 s without a heartbeat, found by a sweep within 5 s, picked up within a 1 s poll.
    expect(takeoverBoundMs(DEFAULT_LIVENESS)).toBe(21_000);
    expect(takeoverBoundMs(DEFAULT_LIVENESS)).toBeLessThanOrEqual(30_000);
    expect(() => checkTimings(DEFAULT_LIVENESS)).not.toThrow();
  });

  it("refuses settings that would declare a worker dead for one late heartbeat", () => {
    expect(() => checkTimings({ ...DEFAULT_LIVENESS, deadAfterMs: 8_000 })).toThrow(
      "the queue's deadAfterMs must be at least twice its heartbeatMs, so that one late heartbeat does not declare a live worker dead",
    );
    expect(() => checkTimings({ ...DEFAULT_LIVENESS, sweepMs: 0 })).toThrow(
      "the queue's sweepMs must be a positive number of milliseconds",
    );
  });

  it("a database it cannot reach is named in one sentence, without its password", async () => {
    const opening = openPostgresRunQueue({
      connectionString: "postgres://glassbox:s3cret-password@127.0.0.1:1/glassbox",
    });
    await expect(opening).rejects.toThrow(
      "The run queue cannot use PostgreSQL at 127.0.0.1:1/glassbox (ECONNREFUSED); check GLASSBOX_DATABASE_URL and that the server is running.",
    );
    await expect(opening).rejects.not.toThrow(/s3cret/);
  });

  it("refuses a schema name that is not a plain identifier", async () => {
    await expect(
      openPostgresRunQueue({ connectionString: "postgres://127.0.0.1:1/x", schema: 'x"; drop table y; --' }),
    ).rejects.toThrow(/must be lower-case letters, digits and underscores/);
  });
});

describe.runIf(Boolean(TEST_DATABASE_URL))(`run queue liveness on PostgreSQL (${NEEDS_DATABASE})`, () => {
  let database: TestDatabase | undefined;
  const queues: PostgresRunQueue[] = [];
  afterEach(async () => {
    await Promise.all(queues.splice(0).map((queue) => queue.close()));
    await database?.drop();
    database = undefined;
  });
  async function open(timings: Partial<typeof DEFAULT_LIVENESS>) {
    database ??= await createTestDatabase(TEST_DATABASE_URL as string);
    const queue = await openPostgresRunQueue({ connectionString: database.url, timings });
    queues.push(queue);
    return { database, queue };
  }
  const story = (effects: Effect[], names: Map<string, string>) =>
    effects.map((effect) => `${effect.key}:${effect.kind}@${names.get(effect.worker)}#${effect.delivery}`);

  it("a worker that finds itself declared dead stops its turn and gives it back in its place, ahead of the conversation's next turn", async () => {
    // Nobody sweeps during the test (dead after 2 minutes): the turn can only come back by the fence.
    const { database, queue } = await open({ heartbeatMs: 100, deadAfterMs: 120_000, sweepMs: 1_000 });
    const recorder = memoryRecorder();
    const fenced = await queue.work(createTurnHandler(recorder), { concurrency: 1 });
    await queue.enqueue(turn("x", "x-1", { gate: "x" }));
    await queue.enqueue(turn("x", "x-2"));
    await until(() => recorder.effects.some((effect) => effect.key === "x-1"));
    const other = await queue.work(createTurnHandler(recorder), { concurrency: 1 });
    await database.pool.query("delete from graphile_worker.glassbox_workers where worker_id = $1", [fenced.id]);
    expect(await fenced.stopped).toBe("lease_lost");
    recorder.open("x");
    await until(() => recorder.effects.some((effect) => effect.key === "x-2" && effect.kind === "end"));
    const names = new Map([
      [fenced.id, "fenced"],
      [other.id, "other"],
    ]);
    expect(story(recorder.effects, names)).toEqual([
      "x-1:start@fenced#1",
      "x-1:start@other#2",
      "x-1:end@other#2",
      "x-2:start@other#1",
      "x-2:end@other#1",
    ]);
  });

  it("a lock held by a worker that never registered (or whose row is gone) is freed once it is older than deadAfterMs", async () => {
    const { database, queue } = await open({ heartbeatMs: 1_000, deadAfterMs: 120_000, sweepMs: 60_000 });
    await queue.enqueue(turn("ghosted", "g-1"));
    // As graphile-worker takes a job: the job and its queue locked by a worker id, an hour ago.
    await database.pool.query(
      "update graphile_worker._private_jobs set locked_by = 'ghost', locked_at = now() - interval '1 hour', attempts = 1",
    );
    await database.pool.query(
      "update graphile_worker._private_job_queues set locked_by = 'ghost', locked_at = now() - interval '1 hour'",
    );
    expect(await sweepDeadWorkers(database.pool, "graphile_worker", 60_000)).toEqual(["ghost"]);
    const recorder = memoryRecorder();
    await queue.work(createTurnHandler(recorder), { concurrency: 1 });
    await until(() => recorder.effects.some((effect) => effect.key === "g-1" && effect.kind === "end"));
    expect(recorder.effects.map((effect) => `${effect.key}:${effect.kind}#${effect.delivery}`)).toEqual([
      "g-1:start#2",
      "g-1:end#2",
    ]);
  });

  it("deletes the queues of conversations with no turn left, but never while an enqueue's transaction is open", async () => {
    const { database, queue } = await open({ heartbeatMs: 1_000, deadAfterMs: 120_000, sweepMs: 60_000 });
    const queueRows = async () =>
      Number(
        (await database.pool.query<{ count: string }>("select count(*) from graphile_worker._private_job_queues"))
          .rows[0]?.count,
      );
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      await client.query("begin");
      await queue.enqueueIn(client, turn("tidy", "t-1"));
      expect(await deleteEmptyQueues(database.pool, "graphile_worker")).toBe(false);
      await client.query("commit");
    } finally {
      await client.end();
    }
    const recorder = memoryRecorder();
    await queue.work(createTurnHandler(recorder), { concurrency: 1 });
    await until(() => recorder.effects.some((effect) => effect.key === "t-1" && effect.kind === "end"));
    await until(async () => (await database.pool.query("select 1 from graphile_worker.jobs")).rowCount === 0);
    expect(await queueRows()).toBe(1);
    expect(await deleteEmptyQueues(database.pool, "graphile_worker")).toBe(true);
    expect(await queueRows()).toBe(0);
  });
});
