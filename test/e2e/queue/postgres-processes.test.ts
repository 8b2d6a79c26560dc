// The PostgreSQL run queue across real worker processes (test/e2e/fixtures/queue-worker.ts) on real
// PostgreSQL: conversations spread over processes keep one turn at a time and their order; a worker
// killed with SIGKILL loses nothing and its conversations are taken over; a paused turn holds
// nothing, so the click's resume runs on another worker even while the dead one is not yet swept.
// Each test has a database of its own; they run only when GLASSBOX_TEST_DATABASE_URL is set.
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { openPostgresRunQueue, type PostgresRunQueue } from "../../../src/queue/postgres.js";
import type { Turn } from "../../../src/queue/types.js";
import {
  createTestDatabase,
  effectsOf,
  NEEDS_DATABASE,
  openGate,
  TEST_DATABASE_URL,
  type Effect,
  type TestDatabase,
} from "../fixtures/queue-database.js";
import type { TurnScript } from "../fixtures/queue-handler.js";
import { startWorkerProcess, type WorkerProcess } from "../fixtures/queue-processes.js";

/** Liveness in milliseconds instead of seconds, so that a takeover happens within a test. */
const FAST = { heartbeatMs: 100, deadAfterMs: 800, sweepMs: 100, pollIntervalMs: 200 };
/** A dead worker that nobody will declare dead during the test. */
const SLOW = { heartbeatMs: 1_000, deadAfterMs: 120_000, sweepMs: 1_000, pollIntervalMs: 200 };

describe.runIf(Boolean(TEST_DATABASE_URL))(`PostgreSQL run queue with worker processes (${NEEDS_DATABASE})`, () => {
  let database: TestDatabase | undefined;
  let queue: PostgresRunQueue | undefined;
  const workers: WorkerProcess[] = [];
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((worker) => worker.kill()));
    await queue?.close();
    await database?.drop();
    queue = undefined;
    database = undefined;
  }, 60_000);

  async function setUp(timings: typeof FAST) {
    database = await createTestDatabase(TEST_DATABASE_URL as string);
    queue = await openPostgresRunQueue({ connectionString: database.url, timings });
    return { database, queue };
  }
  async function worker(url: string, concurrency: number, timings: typeof FAST) {
    const started = await startWorkerProcess(url, concurrency, timings);
    workers.push(started);
    return started;
  }
  const turn = (conversation: string, key: string, script: TurnScript = {}): Turn => ({
    conversation,
    key,
    payload: { ...script },
  });
  async function until(database: TestDatabase, check: (effects: Effect[]) => boolean): Promise<Effect[]> {
    for (;;) {
      const effects = await effectsOf(database.pool);
      if (check(effects)) return effects;
      await sleep(25);
    }
  }
  const finished = (effects: Effect[], key: string) =>
    effects.some((effect) => effect.key === key && (effect.kind === "end" || effect.kind === "paused"));
  const story = (effects: Effect[], conversation: string, workerNames: Map<string, string>) =>
    effects
      .filter((effect) => effect.conversation === conversation)
      .map(
        (effect) =>
          `${effect.key}:${effect.kind}@${workerNames.get(effect.worker) ?? effect.worker}#${effect.delivery}`,
      );

  it("spreads conversations over three worker processes, each conversation one turn at a time and in order", async () => {
    const { database, queue } = await setUp(FAST);
    await Promise.all([1, 2, 3].map(() => worker(database.url, 2, FAST)));
    const conversations = Array.from({ length: 8 }, (_, index) => `thread-${index}`);
    const keys = (conversation: string) => [1, 2, 3, 4].map((index) => `${conversation}/${index}`);
    for (const index of [0, 1, 2, 3])
      for (const conversation of conversations)
        await queue.enqueue(turn(conversation, keys(conversation)[index] as string, { sleepMs: 40 }));
    const effects = await until(database, (seen) => seen.filter((effect) => effect.kind === "end").length === 32);
    for (const conversation of conversations) {
      const own = effects.filter((effect) => effect.conversation === conversation);
      expect(own.map((effect) => `${effect.key}:${effect.kind}`)).toEqual(
        keys(conversation).flatMap((key) => [`${key}:start`, `${key}:end`]),
      );
    }
    expect(new Set(effects.map((effect) => effect.worker)).size).toBe(3);
  });

  it("a worker killed with SIGKILL loses nothing: another worker takes its conversations over, in order", async () => {
    const { database, queue } = await setUp(FAST);
    const doomed = await worker(database.url, 2, FAST);
    await queue.enqueue(turn("a", "a-1", { gate: "after-kill" }));
    await queue.enqueue(turn("b", "b-1", { gate: "after-kill" }));
    await queue.enqueue(turn("a", "a-2"));
    await queue.enqueue(turn("b", "b-2"));
    await until(database, (seen) =>
      ["a-1", "b-1"].every((key) => seen.some((effect) => effect.key === key && effect.worker === doomed.id)),
    );
    const survivor = await worker(database.url, 2, FAST);
    await queue.enqueue(turn("c", "c-1"));
    await until(database, (seen) => finished(seen, "c-1"));

    await doomed.kill();
    await database.pool.query(
      "insert into effects (worker, conversation, key, kind, delivery) values ($1, 'a', 'a-1', 'killed', 0), ($1, 'b', 'b-1', 'killed', 0)",
      [doomed.id],
    );
    await openGate(database.pool, "after-kill");
    const effects = await until(database, (seen) => ["a-2", "b-2"].every((key) => finished(seen, key)));

    const names = new Map([
      [doomed.id, "doomed"],
      [survivor.id, "survivor"],
    ]);
    for (const conversation of ["a", "b"]) {
      expect(story(effects, conversation, names)).toEqual([
        `${conversation}-1:start@doomed#1`,
        `${conversation}-1:killed@doomed#0`,
        `${conversation}-1:start@survivor#2`,
        `${conversation}-1:end@survivor#2`,
        `${conversation}-2:start@survivor#1`,
        `${conversation}-2:end@survivor#1`,
      ]);
    }
    const rows = await database.pool.query("select worker_id from glassbox_queue.workers order by worker_id");
    expect(rows.rows.map((row: { worker_id: string }) => row.worker_id)).toEqual([survivor.id]);
  });

  it("a paused turn holds nothing: the click's resume runs on another worker while the killed one is not yet declared dead", async () => {
    const { database, queue } = await setUp(SLOW);
    const first = await worker(database.url, 1, SLOW);
    await queue.enqueue(turn("approval", "message-1", { pause: true }));
    await until(database, (seen) => finished(seen, "message-1"));
    // The turn records "paused" just before it completes: killed in between, the worker would
    // still hold the conversation (until declared dead), which is not what this test is about.
    while ((await database.pool.query("select 1 from glassbox_queue.turns where locked_by = $1", [first.id])).rowCount)
      await sleep(25);
    await first.kill();
    const second = await worker(database.url, 1, SLOW);
    await queue.enqueue(turn("approval", "resume:run-1"));
    const effects = await until(database, (seen) => finished(seen, "resume:run-1"));
    const names = new Map([
      [first.id, "first"],
      [second.id, "second"],
    ]);
    expect(story(effects, "approval", names)).toEqual([
      "message-1:start@first#1",
      "message-1:paused@first#1",
      "resume:run-1:start@second#1",
      "resume:run-1:end@second#1",
    ]);
    // The killed worker still counts as alive: the resume did not wait for a takeover.
    const alive = await database.pool.query("select worker_id from glassbox_queue.workers where worker_id = $1", [
      first.id,
    ]);
    expect(alive.rowCount).toBe(1);
  });

  it("a worker stopped gracefully finishes its turn and leaves no heartbeat behind", async () => {
    const { database, queue } = await setUp(FAST);
    const leaving = await worker(database.url, 1, FAST);
    await queue.enqueue(turn("d", "d-1", { sleepMs: 300 }));
    await leaving.line((line) => line.type === "start" && line.key === "d-1");
    expect(await leaving.stop()).toBe(0);
    const effects = await effectsOf(database.pool);
    expect(effects.map((effect) => `${effect.key}:${effect.kind}`)).toEqual(["d-1:start", "d-1:end"]);
    expect((await database.pool.query("select 1 from glassbox_queue.workers")).rowCount).toBe(0);
  });
});
