// Upgrading from the previous release (0.2.0): a database at 0.2.0's schema, holding a conversation
// and a finished run as 0.2.0 wrote them, is opened by this release's real src/main.ts. It migrates
// (forward only), the old run reads as it did, and a new message continues the old conversation
// with its history. SQLite always; PostgreSQL when GLASSBOX_TEST_DATABASE_URL is set.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { afterEach, describe, expect, it, vi } from "vitest";
import { migratePostgres, POSTGRES_SCHEMA_VERSION } from "../../../src/store/postgres-schema.js";
import { migrate, SCHEMA_VERSION } from "../../../src/store/sqlite-schema.js";
import { startScriptedModelServer, type ScriptedModelServer } from "../../../src/testing/scripted-model-server.js";
import { createTestDatabase, TEST_DATABASE_URL, type TestDatabase } from "../fixtures/queue-database.js";
import { startRoleProcess, type RoleProcess } from "../fixtures/role-processes.js";
import { fetchJson as json } from "../../helpers/http.js";

/** The schema versions release 0.2.0 left its databases at. */
const RELEASE_0_2_0 = { sqlite: 16, postgres: 5 };
const WAIT = { timeout: 30_000, interval: 100 };
const AT = "2026-11-20T10:00:00.000Z";

/** What 0.2.0 stored of one answered web message, in its columns. */
const OLD_ROWS: Array<[string, unknown[]]> = [
  ["INSERT INTO sessions (id, epoch, created_at, updated_at) VALUES ('web:upgrade', 0, $1, $1)", [AT]],
  [
    `INSERT INTO runs (id, session_id, user_id, input, status, output, steps, prompt_tokens, completion_tokens, started_at, ended_at, model)
     VALUES ('run_from_0_2_0', 'web:upgrade', 'web:api', 'My order number is 4711.', 'final', 'Noted: 4711.', 1, 40, 5, $1, $1, 'gpt-4o-mini')`,
    [AT],
  ],
  [
    `INSERT INTO messages (session_id, epoch, run_id, role, content, tokens, created_at)
     VALUES ('web:upgrade', 0, 'run_from_0_2_0', 'user', 'My order number is 4711.', 9, $1),
            ('web:upgrade', 0, 'run_from_0_2_0', 'assistant', 'Noted: 4711.', 5, $1)`,
    [AT],
  ],
];

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
}, 30_000);

/** Starts this release on the database `env` names; checks the old run, then continues its conversation. */
async function upgradeAndContinue(env: Record<string, string>): Promise<void> {
  const model: ScriptedModelServer = await startScriptedModelServer({ script: () => ({ content: "It was 4711." }) });
  cleanups.push(() => model.close());
  const bot: RoleProcess = await startRoleProcess("all", {
    ...env,
    OPENAI_BASE_URL: model.url,
    OPENAI_API_KEY: "sk-test-upgrade",
    LLM_MODEL: "gpt-4o-mini",
    GLASSBOX_WEB_PORT: "0",
  });
  cleanups.push(() => bot.kill());
  const web = bot.lines.find((line) => /^ingress: receiving/.test(line.msg))?.api as string;

  expect((await json(`${web}/api/runs/run_from_0_2_0`)).body).toMatchObject({
    status: "final",
    output: "Noted: 4711.",
    done: true,
  });
  const sent = await json(`${web}/api/runs`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ session: "web:upgrade", input: "What was my order number?" }),
  });
  expect(sent.status).toBe(202);
  const answered = await vi.waitFor(async () => {
    const run = (await json(`${web}/api/runs/${sent.body.runId as string}`)).body;
    if (run.done !== true) throw new Error(`still ${String(run.status)}`);
    return run;
  }, WAIT);
  expect(answered).toMatchObject({ status: "final", output: "It was 4711." });
  // The model saw the conversation 0.2.0 stored, then the new message.
  const sentToModel = model.requests.at(-1)?.body.messages.map((message) => message.content) ?? [];
  expect(sentToModel.slice(-3)).toEqual(["My order number is 4711.", "Noted: 4711.", "What was my order number?"]);
  expect(await bot.stop()).toBe(0);
}

describe("upgrading from 0.2.0", () => {
  it("SQLite: a 0.2.0 database file migrates at start, keeps its runs, and its conversations go on", async () => {
    const directory = mkdtempSync(join(tmpdir(), "glassbox-upgrade-"));
    cleanups.push(() => rmSync(directory, { recursive: true, force: true }));
    const path = join(directory, "glassbox.db");
    const old = new Database(path);
    old.pragma("journal_mode = WAL");
    migrate(old, RELEASE_0_2_0.sqlite);
    for (const [text] of OLD_ROWS) old.prepare(text.replaceAll("$1", "@at")).run({ at: AT });
    old.close();

    await upgradeAndContinue({ GLASSBOX_DB: path });
    const upgraded = new Database(path, { readonly: true });
    expect(upgraded.pragma("user_version", { simple: true })).toBe(SCHEMA_VERSION);
    upgraded.close();
  });

  it.runIf(Boolean(TEST_DATABASE_URL))(
    "PostgreSQL: a 0.2.0 database migrates at start, keeps its runs, and its conversations go on",
    async () => {
      const database: TestDatabase = await createTestDatabase(TEST_DATABASE_URL as string);
      cleanups.push(() => database.drop());
      const pool = new pg.Pool({ connectionString: database.url, max: 2 });
      cleanups.push(() => pool.end());
      await migratePostgres(pool, undefined, RELEASE_0_2_0.postgres);
      for (const [text, values] of OLD_ROWS) await pool.query(text, values);

      await upgradeAndContinue({ GLASSBOX_DATABASE_URL: database.url });
      expect((await pool.query("SELECT version FROM schema_version")).rows[0]?.version).toBe(POSTGRES_SCHEMA_VERSION);
    },
  );
});
