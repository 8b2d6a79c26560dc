// Set-up for the ingress tests: a store and a run queue as a deployment pairs them (SQLite with the
// in-process queue; PostgreSQL, in a database of its own per test), and a worker
// on the queue that only records the turns it is given (no engine, no model).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { vi } from "vitest";
import { createTokenCounter, type TokenCounter } from "../../../src/agent/tokens.js";
import type { Logger } from "../../../src/logger.js";
import { createInProcessRunQueue } from "../../../src/queue/in-process.js";
import { openPostgresRunQueue } from "../../../src/queue/postgres.js";
import type { QueueWorker, RunQueue, Turn } from "../../../src/queue/types.js";
import { openStorePort, type AnyStorePort, type StorePortOptions } from "../../../src/store/index.js";
import type { IngressQueue, TurnWork } from "../../../src/conversations/turns.js";
import type { StorePort } from "../../../src/store/port.js";
import { approvalRequest, outcomeOf, pausedWaitingFor, runRecord } from "./store-targets.js";
import { createTestDatabase, NEEDS_DATABASE, TEST_DATABASE_URL } from "../fixtures/queue-database.js";

export interface IngressHarness {
  store: AnyStorePort;
  /** The store and queue as ingress takes them (one transaction type, whichever store this is). */
  ingress: { store: StorePort<unknown>; queue: IngressQueue<unknown> };
  queue: IngressQueue<unknown>;
  /** Every turn the recording worker was given, in the order it started them. */
  turns: Turn[];
  counter: TokenCounter;
  log: Logger;
  /** Another handle on the same database, as another ingress process has (closed with the harness). */
  another(): Promise<AnyStorePort>;
  /** Waits until `count` turns have been given to the worker. */
  waitForTurns(count: number): Promise<Turn[]>;
  close(): Promise<void>;
}

const FAST = { heartbeatMs: 100, deadAfterMs: 1_000, sweepMs: 100, pollIntervalMs: 200 };
export const WAIT = { timeout: 20_000, interval: 20 };

async function withRecorder(
  options: StorePortOptions,
  queue: RunQueue<never>,
  close: () => Promise<void>,
): Promise<IngressHarness> {
  const store = await openStorePort(options);
  const others: AnyStorePort[] = [];
  const turns: Turn[] = [];
  const worker: QueueWorker = await queue.work(async (turn) => void turns.push(turn), { concurrency: 4 });
  return {
    store,
    ingress: { store: store as StorePort<unknown>, queue: queue as IngressQueue<unknown> },
    queue: queue as IngressQueue<unknown>,
    turns,
    counter: await createTokenCounter("o200k_base"),
    async another() {
      const other = await openStorePort(options);
      others.push(other);
      return other;
    },
    log: pino({ level: "silent" }),
    async waitForTurns(count) {
      await vi.waitFor(() => {
        if (turns.length < count) throw new Error(`${turns.length} of ${count} turns so far`);
      }, WAIT);
      return turns;
    },
    async close() {
      await worker.stop();
      for (const handle of [store, ...others]) await handle.close().catch(() => {}); // a test may have closed one already
      await close();
    },
  };
}

async function sqliteHarness(): Promise<IngressHarness> {
  const directory = mkdtempSync(join(tmpdir(), "glassbox-ingress-"));
  const queue = createInProcessRunQueue();
  return withRecorder({ databasePath: join(directory, "glassbox.db") }, queue as RunQueue<never>, async () => {
    await queue.close();
    rmSync(directory, { recursive: true, force: true });
  });
}

async function postgresHarness(): Promise<IngressHarness> {
  const database = await createTestDatabase(TEST_DATABASE_URL as string);
  const queue = await openPostgresRunQueue({ connectionString: database.url, timings: FAST });
  return withRecorder(
    { databaseUrl: database.url, databasePath: "unused.db", poolSize: 4 },
    queue as RunQueue<never>,
    async () => {
      await queue.close();
      await database.drop();
    },
  );
}

export const TARGETS: Array<{ name: string; available: boolean; open: () => Promise<IngressHarness> }> = [
  { name: "SQLite and the in-process queue", available: true, open: sqliteHarness },
  {
    name: `PostgreSQL (${NEEDS_DATABASE})`,
    available: Boolean(TEST_DATABASE_URL),
    open: postgresHarness,
  },
];

/** The keys of the turns of one conversation, in the order the worker started them. */
export const keysOf = (turns: Turn[], conversation: string): string[] =>
  turns.filter((turn) => turn.conversation === conversation).map((turn) => turn.key);

/** The run a message's or a resume's turn is for. */
export function runOf(work: TurnWork): string {
  if (work.kind === "reset") throw new Error("a reset turn has no run");
  return work.runId;
}

/** A run of `userId` paused for approval of `calls`, with its approvals open (one transaction). */
export async function pausedRunOf(
  store: AnyStorePort,
  runId: string,
  sessionId: string,
  userId: string,
  calls: string[] = ["call_a"],
) {
  const { approvals } = await store.record([
    { kind: "start_run", run: runRecord(runId, sessionId, userId) },
    {
      kind: "end_run",
      outcome: outcomeOf(runId, {
        status: "awaiting_approval",
        output: "Waiting",
        paused: pausedWaitingFor(...calls.map((id) => ({ id, hash: `hash-${id}` }))),
      }),
    },
    {
      kind: "open_approvals",
      requests: calls.map((id) => approvalRequest(runId, sessionId, id, userId)),
      ttlSeconds: 3_600,
    },
  ]);
  return approvals;
}
