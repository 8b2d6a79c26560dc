// The store contract's set-up: each implementation as a target that makes a fresh, empty database
// for each test (SQLite: a file in a temp dir; PostgreSQL: a schema of its own in the database
// GLASSBOX_TEST_DATABASE_URL names, dropped afterwards), handles on it, processes of their own on
// it, and builders for the plain data the port takes.
import type { ApprovalPolicy } from "../../../src/tools/types.js";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterEach, beforeEach } from "vitest";
import { createInProcessRunQueue } from "../../../src/queue/in-process.js";
import { openPostgresRunQueue } from "../../../src/queue/postgres.js";
import type { RunQueue } from "../../../src/queue/types.js";
import { openStorePort, type AnyStorePort, type StorePortOptions } from "../../../src/store/index.js";
import type { ApprovalRequest, RunOutcome, RunRecord, StepRecord } from "../../../src/store/index.js";

export const TEST_DATABASE_URL = process.env.GLASSBOX_TEST_DATABASE_URL?.trim() || undefined;

/** A fresh database for one test. */
export interface TestDatabase {
  /** The options a handle (or a process of its own) opens it with. */
  options: StorePortOptions;
  drop(): Promise<void>;
}

export interface StoreTarget {
  name: string;
  kind: AnyStorePort["kind"];
  fresh(): Promise<TestDatabase>;
}

const sqlite: StoreTarget = {
  name: "SQLite",
  kind: "sqlite",
  async fresh() {
    const directory = mkdtempSync(join(tmpdir(), "glassbox-contract-"));
    return {
      options: { databasePath: join(directory, "glassbox.db") },
      drop: async () => rmSync(directory, { recursive: true, force: true }),
    };
  },
};

function postgres(url: string): StoreTarget {
  return {
    name: "PostgreSQL",
    kind: "postgres",
    async fresh() {
      const schema = `contract_${randomBytes(6).toString("hex")}`;
      return {
        options: { databaseUrl: url, databaseSchema: schema, databasePath: "unused.db", poolSize: 4 },
        async drop() {
          const admin = new pg.Client({ connectionString: url });
          await admin.connect();
          try {
            await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
          } finally {
            await admin.end();
          }
        },
      };
    },
  };
}

/** SQLite always; PostgreSQL when GLASSBOX_TEST_DATABASE_URL names a database. */
export const TARGETS: StoreTarget[] = [sqlite, ...(TEST_DATABASE_URL ? [postgres(TEST_DATABASE_URL)] : [])];

/** Within a describe: a fresh database before each test, its handles closed and it dropped after. */
export interface Contract {
  target: StoreTarget;
  /** A new handle on this test's database (a second one is another connection, as another process has). */
  open(options?: Partial<StorePortOptions>): Promise<AnyStorePort>;
  database(): TestDatabase;
}

export function useContract(target: StoreTarget): Contract {
  let database: TestDatabase | undefined;
  const handles: AnyStorePort[] = [];
  beforeEach(async () => {
    database = await target.fresh();
  });
  afterEach(async () => {
    for (const handle of handles.splice(0)) await handle.close();
    await database?.drop();
    database = undefined;
  });
  const current = () => {
    if (!database) throw new Error("the contract's database exists only inside a test");
    return database;
  };
  return {
    target,
    database: current,
    async open(options = {}) {
      const handle = await openStorePort({ ...current().options, ...options });
      handles.push(handle);
      return handle;
    },
  };
}

const CHILD = fileURLToPath(new URL("../fixtures/store-child.ts", import.meta.url));

/**
 * Runs `count` processes of their own on the store at one moment: each opens it when all are
 * ready, does `action`, and prints what came of it; resolves with their last lines.
 */
export async function inProcesses(
  options: StorePortOptions,
  count: number,
  action: string[] = ["open"],
): Promise<string[]> {
  const children = Array.from({ length: count }, () =>
    spawn(process.execPath, ["--import", "tsx", CHILD, JSON.stringify(options), ...action], {
      stdio: ["pipe", "pipe", "inherit"],
    }),
  );
  const outputs = children.map((child) => {
    let text = "";
    const ready = new Promise<void>((resolve) =>
      child.stdout.on("data", (chunk: Buffer) => {
        text += chunk.toString();
        if (text.includes("ready\n")) resolve();
      }),
    );
    const exited = new Promise<string>((resolve) =>
      child.on("close", () => resolve(text.replace("ready\n", "").trim())),
    );
    return { child, ready, exited };
  });
  await Promise.all(outputs.map((output) => output.ready));
  for (const { child } of outputs) child.stdin.write("go\n");
  return Promise.all(outputs.map((output) => output.exited));
}

export const runRecord = (runId: string, sessionId: string, userId = "U1", input = "hi"): RunRecord => ({
  runId,
  sessionId,
  userId,
  input,
});

export const outcomeOf = (runId: string, overrides: Partial<RunOutcome> = {}): RunOutcome => ({
  runId,
  status: "final",
  output: "done",
  steps: 1,
  promptTokens: 0,
  completionTokens: 0,
  paused: null,
  error: null,
  ...overrides,
});

export const stepOf = (runId: string, step: number, overrides: Partial<StepRecord> = {}): StepRecord => ({
  runId,
  step,
  model: "gpt-4o-mini",
  contextMessages: 1,
  contextTokens: 10,
  content: `answer ${step}`,
  reasoning: null,
  reasoningCutChars: 0,
  modelNotes: [],
  requestedCalls: [],
  promptTokens: 100,
  completionTokens: 10,
  latencyMs: 12.5,
  cost: 0.001,
  request: [{ role: "user", content: "hi" }],
  at: new Date().toISOString(),
  ...overrides,
});

/** A paused run's JSON as the approvals read it: the calls it waits for, with their argument hashes. */
export const pausedWaitingFor = (...calls: Array<{ id: string; hash: string }>): string =>
  JSON.stringify({
    pending: calls.map((call) => ({
      call: { id: call.id, name: "post_notice", arguments: "{}" },
      approval: { argumentsHash: call.hash },
    })),
  });

export const approvalRequest = (
  runId: string,
  sessionId: string,
  toolCallId: string,
  userId = "U1",
  hash = `hash-${toolCallId}`,
): ApprovalRequest => ({
  runId,
  sessionId,
  userId,
  toolCallId,
  toolName: "post_notice",
  arguments: { text: "lunch is here" },
  argumentsHash: hash,
});

/** A run of `sessionId` paused for approval of `calls`, with its approvals open (one transaction). */
export async function pausedRun(
  store: AnyStorePort,
  runId: string,
  sessionId: string,
  callIds: string[],
  ttlSeconds = 3600,
  policy: ApprovalPolicy = {},
) {
  const { approvals } = await store.record([
    { kind: "start_run", run: runRecord(runId, sessionId) },
    {
      kind: "end_run",
      outcome: outcomeOf(runId, {
        status: "awaiting_approval",
        output: "Waiting",
        paused: pausedWaitingFor(...callIds.map((id) => ({ id, hash: `hash-${id}` }))),
      }),
    },
    {
      kind: "open_approvals",
      requests: callIds.map((id) => ({ ...approvalRequest(runId, sessionId, id), ...policy })),
      ttlSeconds,
    },
  ]);
  return approvals;
}

export const pause = (milliseconds: number) => new Promise((resolve) => setTimeout(resolve, milliseconds));

/** The run queue that goes with the store: in this process beside SQLite; beside PostgreSQL, its table in a schema of this test's own. */
export async function queueBeside(contract: Contract) {
  const { options } = contract.database();
  if (contract.target.kind === "sqlite") {
    const queue = createInProcessRunQueue({ retryDelaysMs: [] });
    return { queue: queue as RunQueue<unknown>, schemas: [] as string[], close: () => queue.close() };
  }
  const schema = `${options.databaseSchema}_queue`;
  const connectionString = options.databaseUrl as string;
  const queue = await openPostgresRunQueue({ connectionString, schema, timings: { pollIntervalMs: 50 } });
  return {
    queue: queue as RunQueue<unknown>,
    schemas: [schema],
    async close() {
      await queue.close();
      const admin = new pg.Client({ connectionString });
      await admin.connect();
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).finally(() => admin.end());
    },
  };
}
