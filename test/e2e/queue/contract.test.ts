// The run queue's contract, which every implementation passes: in process always, and on real
// PostgreSQL whenever GLASSBOX_TEST_DATABASE_URL is set, each test in a database
// of its own. Workers run in this process here; test/e2e/queue/postgres-processes.test.ts runs them as
// separate processes and kills them.
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { createInProcessRunQueue, type LocalTransaction } from "../../../src/queue/in-process.js";
import { openPostgresRunQueue } from "../../../src/queue/postgres.js";
import type { QueueWorker, RunQueue, Turn, TurnSelection } from "../../../src/queue/types.js";
import { createTestDatabase, NEEDS_DATABASE, TEST_DATABASE_URL, type Effect } from "../fixtures/queue-database.js";
import { createTurnHandler, memoryRecorder, type TurnScript } from "../fixtures/queue-handler.js";

interface Harness {
  queue: RunQueue<never>;
  /** Enqueues `turns` inside one transaction that then commits or rolls back. */
  enqueueInTransaction(turns: Turn[], outcome: "commit" | "rollback"): Promise<void>;
  /** Forgets the selected turns inside a transaction that commits; how many went. */
  forgetInTransaction(selection: TurnSelection): Promise<number>;
  close(): Promise<void>;
}

const FAST = { heartbeatMs: 100, deadAfterMs: 1_000, sweepMs: 100, pollIntervalMs: 200 };
const RETRIES = [10, 10];

async function inProcessHarness(): Promise<Harness> {
  const queue = createInProcessRunQueue({ retryDelaysMs: RETRIES });
  return {
    queue: queue as RunQueue<never>,
    async enqueueInTransaction(turns, outcome) {
      // What the SQLite store does: collect the work, and run it once its transaction has committed.
      const afterCommit: Array<() => void> = [];
      const transaction: LocalTransaction = { afterCommit: (callback) => void afterCommit.push(callback) };
      for (const turn of turns) await queue.enqueueIn(transaction, turn);
      if (outcome === "commit") for (const callback of afterCommit) callback();
    },
    // The SQLite store calls it once its erasure has committed.
    forgetInTransaction: (selection) => queue.forgetIn({ afterCommit: (callback) => callback() }, selection),
    close: () => queue.close(),
  };
}

async function postgresHarness(): Promise<Harness> {
  const database = await createTestDatabase(TEST_DATABASE_URL as string);
  const queue = await openPostgresRunQueue({ connectionString: database.url, timings: FAST, retryDelaysMs: RETRIES });
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  return {
    queue: queue as RunQueue<never>,
    async enqueueInTransaction(turns, outcome) {
      await client.query("begin");
      for (const turn of turns) await queue.enqueueIn(client, turn);
      await client.query(outcome);
    },
    async forgetInTransaction(selection) {
      await client.query("begin");
      const forgotten = await queue.forgetIn(client, selection);
      await client.query("commit");
      return forgotten;
    },
    async close() {
      await queue.close();
      await client.end();
      await database.drop();
    },
  };
}

const implementations: Array<[string, boolean, () => Promise<Harness>]> = [
  ["in process", true, inProcessHarness],
  [`PostgreSQL (${NEEDS_DATABASE})`, Boolean(TEST_DATABASE_URL), postgresHarness],
];

for (const [name, available, open] of implementations) {
  describe.runIf(available)(`run queue contract: ${name}`, () => {
    let harness: Harness | undefined;
    afterEach(async () => {
      await harness?.close();
      harness = undefined;
    });

    const turn = (conversation: string, key: string, script: TurnScript = {}): Turn => ({
      conversation,
      key,
      payload: { ...script },
    });
    async function start(concurrency: number) {
      harness ??= await open();
      const recorder = memoryRecorder();
      const errors: Array<{ error: unknown; turn: Turn }> = [];
      const worker: QueueWorker = await harness.queue.work(createTurnHandler(recorder), {
        concurrency,
        onError: (error, failed) => errors.push({ error, turn: failed }),
      });
      return { harness, recorder, worker, errors };
    }
    const ended = (effects: Effect[], key: string) =>
      effects.some((effect) => effect.key === key && (effect.kind === "end" || effect.kind === "paused"));
    async function until(check: () => boolean) {
      while (!check()) await sleep(10);
    }

    it("runs a conversation's turns one at a time, in the order they were enqueued, beside other conversations", async () => {
      // More slots than conversations: a second turn of a busy conversation would find a free one.
      const { harness, recorder } = await start(4);
      const keys = (conversation: string) => Array.from({ length: 5 }, (_, index) => `${conversation}-${index}`);
      for (let index = 0; index < 5; index++)
        for (const conversation of ["a", "b", "c"])
          await harness.queue.enqueue(turn(conversation, `${conversation}-${index}`, { sleepMs: 20 }));
      await until(() => recorder.effects.filter((effect) => effect.kind === "end").length === 15);
      for (const conversation of ["a", "b", "c"]) {
        const own = recorder.effects.filter((effect) => effect.conversation === conversation);
        // start, end, start, end...: never two turns of one conversation at once, and in order.
        expect(own.map((effect) => effect.kind)).toEqual(keys(conversation).flatMap(() => ["start", "end"]));
        expect(own.filter((effect) => effect.kind === "start").map((effect) => effect.key)).toEqual(keys(conversation));
      }
      // The conversations did run side by side: some turn started while another conversation's was running.
      const overlapped = recorder.effects.some(
        (effect, index) =>
          effect.kind === "start" &&
          recorder.effects
            .slice(0, index)
            .filter((before) => before.conversation !== effect.conversation && before.kind === "start").length >
            recorder.effects
              .slice(0, index)
              .filter((before) => before.conversation !== effect.conversation && before.kind === "end").length,
      );
      expect(overlapped).toBe(true);
    });

    it("a busy conversation does not hold up the others", async () => {
      const { harness, recorder } = await start(2);
      await harness.queue.enqueue(turn("slow", "slow-1", { gate: "slow" }));
      await harness.queue.enqueue(turn("slow", "slow-2"));
      for (const key of ["quick-1", "quick-2", "quick-3"]) await harness.queue.enqueue(turn("quick", key));
      await until(() => ended(recorder.effects, "quick-3"));
      expect(
        recorder.effects
          .filter((effect) => effect.conversation === "slow")
          .map((effect) => `${effect.key}:${effect.kind}`),
      ).toEqual(["slow-1:start"]);
      recorder.open("slow");
      await until(() => ended(recorder.effects, "slow-2"));
      expect(
        recorder.effects
          .filter((effect) => effect.conversation === "slow")
          .map((effect) => `${effect.key}:${effect.kind}`),
      ).toEqual(["slow-1:start", "slow-1:end", "slow-2:start", "slow-2:end"]);
    });

    it("a turn that ends at a pause holds no worker, and the click's resume runs later on any worker", async () => {
      const first = await start(1);
      await first.harness.queue.enqueue(turn("approval", "message-1", { pause: true }));
      await until(() => ended(first.recorder.effects, "message-1"));
      // The only slot of the only worker is free again: another conversation runs on it.
      await first.harness.queue.enqueue(turn("other", "other-1"));
      await until(() => ended(first.recorder.effects, "other-1"));
      await first.worker.stop();
      expect(await first.worker.stopped).toBe("stopped");
      const second = await start(1);
      await second.harness.queue.enqueue(turn("approval", "resume:run-1"));
      await until(() => ended(second.recorder.effects, "resume:run-1"));
      expect(second.recorder.effects.find((effect) => effect.key === "resume:run-1")?.worker).toBe(second.worker.id);
      expect(second.worker.id).not.toBe(first.worker.id);
    });

    it("enqueueing the key of a turn that is waiting or running again adds nothing", async () => {
      harness = await open();
      expect(await harness.queue.enqueue(turn("dup", "event-1", { gate: "dup" }))).toEqual({ enqueued: true });
      expect(await harness.queue.enqueue(turn("dup", "event-1", { gate: "dup" }))).toEqual({ enqueued: false });
      const { recorder } = await start(2);
      await until(() => recorder.effects.some((effect) => effect.key === "event-1"));
      expect(await harness.queue.enqueue(turn("dup", "event-1"))).toEqual({ enqueued: false });
      await harness.queue.enqueue(turn("dup", "event-2"));
      recorder.open("dup");
      await until(() => ended(recorder.effects, "event-2"));
      expect(
        recorder.effects
          .filter((effect) => effect.conversation === "dup")
          .map((effect) => `${effect.key}:${effect.kind}`),
      ).toEqual(["event-1:start", "event-1:end", "event-2:start", "event-2:end"]);
    });

    it("a turn enqueued in a transaction exists only if the transaction commits", async () => {
      const { harness, recorder } = await start(1);
      await harness.enqueueInTransaction([turn("tx", "rolled-back")], "rollback");
      await harness.enqueueInTransaction([turn("tx", "committed")], "commit");
      // A rolled-back turn would have run first (it was enqueued first, in the same conversation).
      await until(() => ended(recorder.effects, "committed"));
      expect(recorder.effects.filter((effect) => effect.conversation === "tx").map((effect) => effect.key)).toEqual([
        "committed",
        "committed",
      ]);
    });

    it("turns enqueued in one transaction run in the order they were enqueued", async () => {
      const { harness, recorder } = await start(2);
      const keys = ["t-1", "t-2", "t-3", "t-4", "t-5", "t-6"];
      await harness.enqueueInTransaction(
        keys.map((key) => turn("same-transaction", key)),
        "commit",
      );
      await until(
        () =>
          ended(recorder.effects, "t-6") &&
          recorder.effects.filter((effect) => effect.kind === "end").length === keys.length,
      );
      expect(recorder.effects.filter((effect) => effect.kind === "start").map((effect) => effect.key)).toEqual(keys);
    });

    it("a handler that throws is called again in place, holding its conversation's next turn back; after the last attempt the turn is given up", async () => {
      const { harness, recorder, errors } = await start(2);
      await harness.queue.enqueue(turn("flaky", "flaky-1", { failAttempts: 2 }));
      await harness.queue.enqueue(turn("flaky", "flaky-2", { failAttempts: 5 }));
      await harness.queue.enqueue(turn("flaky", "flaky-3"));
      await until(() => ended(recorder.effects, "flaky-3"));
      const starts = recorder.effects
        .filter((effect) => effect.conversation === "flaky" && effect.kind === "start")
        .map((effect) => effect.key);
      expect(starts).toEqual(["flaky-1", "flaky-1", "flaky-1", "flaky-2", "flaky-2", "flaky-2", "flaky-3"]);
      expect(errors.map(({ turn: failed, error }) => `${failed.key}: ${(error as Error).message}`)).toEqual([
        "flaky-2: attempt 3 of flaky-2 fails, as scripted",
      ]);
    });

    it("forgets the waiting turns an erasure names (by conversation, or by a field of their payload); a running one finishes, and its conversation's next turn still waits for it", async () => {
      const { harness, recorder } = await start(1);
      // A turn's payload names its run, as a glassbox turn's does.
      const ofRun = (key: string, runId: string, script: TurnScript = {}): Turn => ({
        conversation: "shared",
        key,
        payload: { ...script, runId },
      });
      await harness.queue.enqueue(ofRun("shared-1", "gone", { gate: "shared" }));
      await until(() => recorder.effects.some((effect) => effect.key === "shared-1"));
      await harness.queue.enqueue(ofRun("shared-2", "gone"));
      await harness.queue.enqueue(ofRun("shared-3", "kept"));
      await harness.queue.enqueue(turn("erased", "erased-1"));
      await harness.queue.enqueue(turn("erased", "erased-2"));
      const forgotten = await harness.forgetInTransaction({
        conversations: ["erased"],
        payload: { field: "runId", values: ["gone"] },
      });
      expect(forgotten).toBe(3);
      // The running turn is its worker's still: its key is taken.
      expect(await harness.queue.enqueue(turn("shared", "shared-1"))).toEqual({ enqueued: false });
      recorder.open("shared");
      await harness.queue.enqueue(turn("after", "after-1"));
      await until(() => ended(recorder.effects, "shared-3") && ended(recorder.effects, "after-1"));
      expect(
        recorder.effects.map((effect) => `${effect.key}:${effect.kind}`).filter((key) => !key.startsWith("after")),
      ).toEqual(["shared-1:start", "shared-1:end", "shared-3:start", "shared-3:end"]);
    });

    it("ping answers while the queue is open", async () => {
      harness = await open();
      await expect(harness.queue.ping()).resolves.toBeUndefined();
    });

    it("refuses a turn without a key or with a payload past the limit, in one sentence", async () => {
      harness = await open();
      await expect(harness.queue.enqueue(turn("c", ""))).rejects.toThrow(
        "a turn needs a key (its event id) of 1 to 1000 characters",
      );
      await expect(
        harness.queue.enqueue({ conversation: "c", key: "big", payload: { text: "x".repeat(20_000) } }),
      ).rejects.toThrow(/at most 16384 bytes of JSON; keep content in the store/);
    });
  });
}
