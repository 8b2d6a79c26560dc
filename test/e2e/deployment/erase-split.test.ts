// Erasure with ingress and a worker in processes of their own on PostgreSQL (the real src/main.ts,
// the fake Slack, the scripted model, daily caps on, a small memory budget). Ann leaves everything
// the pipeline keeps (test/helpers/slack-erasure.ts), then a run the model holds when the worker is
// killed (its quota reservation pending, its turn still held by the dead worker) and two turns
// nobody runs, one in Bob's conversation. `glassbox erase --user` removes her from the store and the
// run queue in one transaction; afterwards no row of any table of either schema, read as text,
// holds her words, her id or her conversations' keys, and Bob's conversation stays.
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import type { ErasureReceipt } from "../../../src/store/port-data.js";
import { startFakeSlack } from "../../../src/testing/fake-slack.js";
import { startScriptedModelServer } from "../../../src/testing/scripted-model-server.js";
import {
  ANN,
  ANN_CHANNEL,
  ANN_WORD,
  annLeavesEverything,
  BOB,
  BOB_CHANNEL,
  BOB_WORD,
  erasureScript,
  FILE_WORD,
  HOLD,
  modelAsked,
  sessionKey,
  slackPeople,
} from "../../helpers/slack-erasure.js";
import { BOT } from "../../helpers/slack.js";
import {
  createTestDatabase,
  NEEDS_DATABASE,
  TEST_DATABASE_URL,
  type TestDatabase,
} from "../fixtures/queue-database.js";
import { fakeSlackEnvironment, startRoleProcess, type RoleProcess } from "../fixtures/role-processes.js";

const SECRET = "erase-split-signing-secret";
const WAIT = { timeout: 30_000, interval: 50 };
const CLI = fileURLToPath(new URL("../../../src/cli.ts", import.meta.url));
const TSX = import.meta.resolve("tsx");
/** The store's tables are in the database's default schema; the run queue's in its own. */
const SCHEMAS = ["public", "glassbox_queue"];

/** `glassbox erase ...args --json` in a process of its own, on the database. */
function eraseCommand(url: string, args: string[]): Promise<ErasureReceipt> {
  return new Promise((resolve, reject) =>
    execFile(
      process.execPath,
      ["--import", TSX, CLI, "erase", ...args, "--json"],
      { env: { PATH: process.env.PATH ?? "", GLASSBOX_DATABASE_URL: url } },
      (error, stdout, stderr) =>
        error ? reject(new Error(`glassbox erase failed: ${stderr}`)) : resolve(JSON.parse(stdout) as ErasureReceipt),
    ),
  );
}

/** Every row of every table of the store's and the queue's schemas, as text (what a dump holds). */
async function everyRow(database: TestDatabase): Promise<string> {
  const tables = await database.pool.query<{ schema: string; name: string }>(
    "SELECT table_schema AS schema, table_name AS name FROM information_schema.tables WHERE table_schema = ANY($1) AND table_type = 'BASE TABLE'",
    [SCHEMAS],
  );
  const rows: string[] = [];
  for (const { schema, name } of tables.rows)
    rows.push(
      ...(await database.pool.query<{ row: string }>(`SELECT t::text AS row FROM "${schema}"."${name}" t`)).rows.map(
        (r) => r.row,
      ),
    );
  return rows.join("\n");
}

describe.runIf(Boolean(TEST_DATABASE_URL))(`erasure across ingress and a worker (${NEEDS_DATABASE})`, () => {
  const processes: RoleProcess[] = [];
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const running of processes.splice(0)) await running.kill();
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  }, 30_000);

  it("removes a person from every table of the store and the run queue: their queued and held turns, pending reservation, summaries, stops and files", async () => {
    const directory = mkdtempSync(join(tmpdir(), "glassbox-erase-split-"));
    cleanups.push(() => rmSync(directory, { recursive: true, force: true }));
    const database = await createTestDatabase(TEST_DATABASE_URL as string);
    cleanups.push(() => database.drop());
    const fake = await startFakeSlack({ signingSecret: SECRET, botUserId: BOT });
    cleanups.push(() => fake.close());
    const model = await startScriptedModelServer({ script: erasureScript });
    cleanups.push(() => model.close());
    const shared = {
      GLASSBOX_DATABASE_URL: database.url,
      ...fakeSlackEnvironment(fake.apiUrl, SECRET),
      SLACK_APPROVERS: ANN,
      GLASSBOX_USER_DAILY_TOKENS: "1000000",
    };
    const ingress = await startRoleProcess("ingress", shared);
    processes.push(ingress);
    const worker = await startRoleProcess("worker", {
      ...shared,
      OPENAI_BASE_URL: model.url,
      OPENAI_API_KEY: "sk-test-erase-split",
      GLASSBOX_DEMO: "true",
      GLASSBOX_SHOP_DB: join(directory, "shop.db"),
      GLASSBOX_CONTEXT_TOKENS: "2000",
    });
    processes.push(worker);
    const eventsUrl = ingress.lines.find((line) => /^ingress: receiving/.test(line.msg))?.slack as string;
    const place = { fake, eventsUrl, model };
    const count = async (sql: string, values: unknown[] = []) =>
      Number((await database.pool.query<{ count: string }>(sql, values)).rows[0]?.count);

    const { ann, bob, bobTs } = await annLeavesEverything(place);
    await expect.poll(() => count("SELECT count(*) FROM feedback WHERE user_id = $1", [ANN]), WAIT).toBe(1);

    // A run of Ann's in flight when its worker is killed: its reservation and its held turn stay behind.
    const people = slackPeople(place);
    const heldTs = await people.mention(ANN, ANN_CHANNEL, `${HOLD} ${ANN_WORD} as the worker dies`);
    await modelAsked(model, `${HOLD} ${ANN_WORD} as the worker dies`);
    await worker.kill();
    // With no worker, two more messages of hers wait: a new conversation, and a reply in Bob's.
    const waitingTs = await people.mention(ANN, ANN_CHANNEL, `${ANN_WORD} while nobody works`);
    await people.mention(ANN, BOB_CHANNEL, `${ANN_WORD} in Bob's thread`, { threadTs: bobTs });
    await expect.poll(() => count("SELECT count(*) FROM glassbox_queue.turns"), WAIT).toBe(3);
    expect(await count("SELECT count(*) FROM glassbox_queue.turns WHERE locked_by IS NOT NULL")).toBe(1);

    // Everything the pipeline keeps is there before the erasure.
    for (const table of [
      "sessions",
      "runs",
      "messages",
      "summaries",
      "steps",
      "step_messages",
      "approvals",
      "facts",
      "feedback",
      "cancel_requests",
      "quota_days",
    ])
      expect(await count(`SELECT count(*) FROM ${table}`), table).toBeGreaterThan(0);
    expect(await count("SELECT count(*) FROM summaries WHERE session_id = $1", [ann[0]])).toBeGreaterThan(0);
    expect(await count("SELECT count(*) FROM quota_reservations WHERE user_id = $1", [ANN])).toBe(1);
    const before = await everyRow(database);
    for (const kept of [ANN_WORD, FILE_WORD, ANN]) expect(before).toContain(kept);

    const receipt = await eraseCommand(database.url, ["--user", ANN]);
    expect(receipt.removed).toMatchObject({
      queued_turns: 3,
      quota_reservations: 1,
      cancel_requests: 1,
      feedback: 1,
      quota_days: 1,
    });
    for (const table of ["sessions", "runs", "messages", "summaries", "steps", "step_messages", "approvals", "facts"])
      expect(receipt.removed[table], table).toBeGreaterThan(0);
    expect(receipt.anonymised).toEqual({ steps: 1, approvals: 1 });

    const left = await everyRow(database);
    const gone = [
      ANN_WORD,
      FILE_WORD,
      ANN,
      ...ann,
      sessionKey(ANN_CHANNEL, heldTs),
      sessionKey(ANN_CHANNEL, waitingTs),
    ];
    for (const word of gone) expect(left, word).not.toContain(word);
    for (const kept of [BOB_WORD, BOB, bob]) expect(left, kept).toContain(kept);
    expect(await count("SELECT count(*) FROM glassbox_queue.turns")).toBe(0);
    expect((await database.pool.query("SELECT decided_by FROM approvals")).rows).toEqual([{ decided_by: "erased" }]);
  }, 180_000);
});
