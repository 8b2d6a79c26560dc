// Worker liveness of the PostgreSQL run queue: the 30 s takeover bound of the default settings (by
// construction; bench/queue-takeover.ts measures it), the sentence for a database it cannot use, and
// on real PostgreSQL (GLASSBOX_TEST_DATABASE_URL) the fence of a worker declared dead, the sweep of
// an unregistered holder of a turn, and the turn given up after its last delivery.
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { openPostgresRunQueue, type PostgresRunQueue } from "../../../src/queue/postgres.js";
import { MAX_DELIVERIES } from "../../../src/queue/postgres-turns.js";
import type { Turn } from "../../../src/queue/types.js";
import {
  checkTimings,
  DEFAULT_LIVENESS,
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
    await database.pool.query("delete from glassbox_queue.workers where worker_id = $1", [fenced.id]);
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
    // As a worker claims a turn: the row held by a worker id, an hour ago, its first delivery.
    await database.pool.query(
      "update glassbox_queue.turns set locked_by = 'ghost', locked_at = now() - interval '1 hour', deliveries = 1",
    );
    expect(await sweepDeadWorkers(database.pool, "glassbox_queue", 60_000)).toEqual(["ghost"]);
    const recorder = memoryRecorder();
    await queue.work(createTurnHandler(recorder), { concurrency: 1 });
    await until(() => recorder.effects.some((effect) => effect.key === "g-1" && effect.kind === "end"));
    expect(recorder.effects.map((effect) => `${effect.key}:${effect.kind}#${effect.delivery}`)).toEqual([
      "g-1:start#2",
      "g-1:end#2",
    ]);
  });

  it("a turn delivered to dying workers MAX_DELIVERIES times is given up, kept for an operator, and no longer holds its conversation back", async () => {
    const { database, queue } = await open({ heartbeatMs: 1_000, deadAfterMs: 120_000, sweepMs: 60_000 });
    await queue.enqueue(turn("doomed", "d-1"));
    await queue.enqueue(turn("doomed", "d-2"));
    const first = await database.pool.query<{ id: string }>("select min(id) as id from glassbox_queue.turns");
    await database.pool.query(
      "update glassbox_queue.turns set locked_by = 'ghost', locked_at = now() - interval '1 hour', deliveries = $2 where id = $1",
      [first.rows[0]?.id, MAX_DELIVERIES],
    );
    expect(await sweepDeadWorkers(database.pool, "glassbox_queue", 60_000)).toEqual(["ghost"]);
    const recorder = memoryRecorder();
    await queue.work(createTurnHandler(recorder), { concurrency: 1 });
    await until(() => recorder.effects.some((effect) => effect.key === "d-2" && effect.kind === "end"));
    expect(recorder.effects.map((effect) => `${effect.key}:${effect.kind}#${effect.delivery}`)).toEqual([
      "d-2:start#1",
      "d-2:end#1",
    ]);
    const kept = await database.pool.query(
      "select turn->>'key' as key, deliveries from glassbox_queue.turns where given_up_at is not null",
    );
    expect(kept.rows).toEqual([{ key: "d-1", deliveries: MAX_DELIVERIES }]);
    // Its key is free again: the same turn can be enqueued anew.
    expect(await queue.enqueue(turn("doomed", "d-1"))).toEqual({ enqueued: true });
  });
});
