// GLASSBOX_RETENTION_DAYS in the processes people run (the real src/main.ts, the fake Slack, the
// scripted model): a conversation is held through the real pipeline, the process stopped, the
// conversation aged with SQL, and a process started afterwards removes it at start, logging the
// receipt (rows per table, never its words, ids or people) and keeping the conversation that is
// recent. On SQLite that is the one process; on PostgreSQL every role sweeps, and an ingress and two
// workers sweeping at the same moment remove it once, without an error. A value that is not whole
// days stops the start with one sentence.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import pg from "pg";
import { afterEach, describe, expect, it, vi } from "vitest";
import { openSqlitePort } from "../../../src/store/sqlite.js";
import { startFakeSlack, type FakeSlack } from "../../../src/testing/fake-slack.js";
import { startScriptedModelServer, type ScriptedModelServer } from "../../../src/testing/scripted-model-server.js";
import {
  createTestDatabase,
  NEEDS_DATABASE,
  TEST_DATABASE_URL,
  type TestDatabase,
} from "../fixtures/queue-database.js";
import { fakeSlackEnvironment, type LogLine, type RoleProcess, startRoleProcess } from "../fixtures/role-processes.js";

const MAIN = fileURLToPath(new URL("../../../src/main.ts", import.meta.url));
const BOT = "U0FAKEBOT1";
const TEAM = "T0FAKE0001";
const CHANNEL = "C0RETAIN";
const SECRET = "retention-signing-secret";
const OLD_USER = "U0ANNAGED";
const NEW_USER = "U0BOBFRESH";
const OLD_WORDS = "ZEBRAAGED";
const NEW_WORDS = "OTTERFRESH";
const WAIT = { timeout: 30_000, interval: 50 };
const LONG_AGO = "2020-01-01T00:00:00.000Z";
const REMOVED = /^retention: removed conversations idle for more than 30 days$/;
const RETENTION_LINE = /^retention: /;

const processes: RoleProcess[] = [];
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const running of processes.splice(0)) await running.kill();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
}, 30_000);

/** The fake Slack and a model that answers by repeating the question; closed after the test. */
async function platform(): Promise<{ fake: FakeSlack; model: ScriptedModelServer; slack: Record<string, string> }> {
  const fake = await startFakeSlack({ signingSecret: SECRET, botUserId: BOT, teamId: TEAM });
  cleanups.push(() => fake.close());
  const model = await startScriptedModelServer({
    script: (body) => ({ content: `answer to ${String(body.messages.at(-1)?.content).slice(0, 200)}` }),
  });
  cleanups.push(() => model.close());
  // What glassbox keeps is the subject here: threads are not read again from Slack, which keeps its
  // own history (a mention in a removed thread would otherwise bring its messages back; thread-context.md).
  const channels = join(mkdtempSync(join(tmpdir(), "glassbox-retention-channels-")), "channels.yaml");
  writeFileSync(channels, "defaults:\n  threadContext: { threads: false }\n");
  cleanups.push(() => rmSync(dirname(channels), { recursive: true, force: true }));
  return { fake, model, slack: { ...fakeSlackEnvironment(fake.apiUrl, SECRET), GLASSBOX_CHANNELS: channels } };
}

async function started(role: Parameters<typeof startRoleProcess>[0], env: Record<string, string>) {
  const running = await startRoleProcess(role, env);
  processes.push(running);
  return running;
}

/** Mentions the bot in a new thread and waits for the answer; the thread's root ts. */
async function converse(fake: FakeSlack, eventsUrl: string, user: string, words: string): Promise<string> {
  const ts = fake.nextTs();
  const text = `<@${BOT}> please keep ${words} in mind`;
  const sent = await fake.sendEvent(eventsUrl, { type: "app_mention", user, channel: CHANNEL, text, ts });
  expect(sent.status).toBe(200);
  await vi.waitFor(() => {
    const answer = fake.messages(CHANNEL, ts).find((message) => message.bot_id && message.text?.includes(words));
    if (!answer) throw new Error(`no answer in thread ${ts} yet`);
  }, WAIT);
  return ts;
}

const eventsUrlOf = (running: RoleProcess) =>
  running.lines.find((line) => /^ingress: receiving/.test(line.msg))?.slack as string;

/** The first of `lines` that `pattern` matches, waited for at most WAIT. */
const lineOf = (lines: () => LogLine[], pattern: RegExp) =>
  vi.waitFor(() => {
    const found = lines().find((line) => pattern.test(line.msg));
    if (!found) throw new Error(`no log line matching ${pattern} yet`);
    return found;
  }, WAIT);

/** `node src/main.ts` in `directory` with only `env` (and PATH): its exit, what it printed, its log lines. */
function startMain(directory: string, env: Record<string, string>) {
  const bot = spawn(process.execPath, ["--import", import.meta.resolve("tsx"), MAIN], {
    cwd: directory,
    env: { PATH: process.env.PATH ?? "", GLASSBOX_WEB_PORT: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<number | null>((resolve) => bot.on("exit", resolve));
  cleanups.push(async () => {
    if (bot.exitCode === null && bot.signalCode === null) bot.kill("SIGKILL");
    await exited;
  });
  const output = { stdout: "", stderr: "" };
  bot.stdout.on("data", (chunk: Buffer) => void (output.stdout += chunk.toString()));
  bot.stderr.on("data", (chunk: Buffer) => void (output.stderr += chunk.toString()));
  const lines = () =>
    output.stderr
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as LogLine);
  return { bot, exited, output, lines };
}

/** What the retention line may say: the receipt and the cut-off, nothing of the conversation it removed. */
function expectReceiptOnly(line: LogLine, sessionId: string, threadTs: string): void {
  const { level, time, pid, hostname, name, msg, ...fields } = line;
  expect(Object.keys(fields).sort()).toEqual(["at", "before", "kind", "removed"]);
  expect(fields.kind).toBe("idle");
  expect(Object.values(fields.removed as Record<string, number>).every((count) => count > 0)).toBe(true);
  const text = JSON.stringify(line);
  for (const secret of [OLD_WORDS, OLD_USER, CHANNEL, threadTs, sessionId, TEAM]) expect(text).not.toContain(secret);
}

describe("retention in a process that was started after a conversation aged", () => {
  it("one process on SQLite removes the aged conversation at start, logs only the receipt, and keeps the recent one", {
    timeout: 120_000,
  }, async () => {
    const directory = mkdtempSync(join(tmpdir(), "glassbox-retention-"));
    cleanups.push(() => rmSync(directory, { recursive: true, force: true }));
    const { fake, model, slack } = await platform();
    const env = {
      ...slack,
      GLASSBOX_DB: join(directory, "glassbox.db"),
      OPENAI_BASE_URL: model.url,
      OPENAI_API_KEY: "sk-test-retention",
    };

    const before = await started("none", env);
    const oldTs = await converse(fake, eventsUrlOf(before), OLD_USER, OLD_WORDS);
    const newTs = await converse(fake, eventsUrlOf(before), NEW_USER, NEW_WORDS);
    expect(await before.stop()).toBe(0);
    processes.splice(processes.indexOf(before), 1);

    // Nobody has touched the first conversation since 2020.
    const sessionId = `slack:${TEAM}:${CHANNEL}:${oldTs}`;
    const file = new Database(env.GLASSBOX_DB);
    expect(file.prepare("UPDATE sessions SET updated_at = ? WHERE id = ?").run(LONG_AGO, sessionId).changes).toBe(1);
    file.close();

    const after = await started("none", { ...env, GLASSBOX_RETENTION_DAYS: "30" });
    const line = await lineOf(() => after.lines, REMOVED);
    expect(line.removed).toMatchObject({ sessions: 1, runs: 1, messages: 2 });
    expectReceiptOnly(line, sessionId, oldTs);
    // The process goes on answering, and a new mention in the removed thread starts afresh.
    const requests = model.requests.length;
    await fake.sendEvent(eventsUrlOf(after), {
      type: "app_mention",
      user: OLD_USER,
      channel: CHANNEL,
      text: `<@${BOT}> anything new?`,
      ts: fake.nextTs(),
      thread_ts: oldTs,
    });
    await vi.waitFor(() => expect(model.requests.length).toBeGreaterThan(requests), WAIT);
    expect(JSON.stringify(model.requests.at(-1)?.body.messages)).not.toContain(OLD_WORDS);
    await vi.waitFor(
      () =>
        expect(
          fake.messages(CHANNEL, oldTs).some((message) => message.bot_id && message.text?.includes("anything new?")),
        ).toBe(true),
      WAIT,
    );
    expect(await after.stop()).toBe(0);
    expect(after.lines.filter((candidate) => RETENTION_LINE.test(candidate.msg))).toEqual([line]);

    const bytes = [env.GLASSBOX_DB, `${env.GLASSBOX_DB}-wal`]
      .filter((path) => existsSync(path))
      .map((path) => readFileSync(path).toString("latin1"))
      .join("\n");
    expect(bytes).not.toContain(OLD_WORDS);
    expect(bytes).toContain(NEW_WORDS);
    const left = new Database(env.GLASSBOX_DB, { readonly: true });
    try {
      expect(left.prepare("SELECT erased_by, kind FROM erasures").all()).toEqual([
        { erased_by: "retention", kind: "idle" },
      ]);
      expect(
        left.prepare("SELECT count(*) FROM runs WHERE session_id = ?").pluck().get(`slack:${TEAM}:${CHANNEL}:${newTs}`),
      ).toBe(1);
    } finally {
      left.close();
    }
  });

  it("the web pages alone (no platform, no model) sweep too: a deployment with nothing to run still keeps to the days set", {
    timeout: 60_000,
  }, async () => {
    const directory = mkdtempSync(join(tmpdir(), "glassbox-retention-"));
    cleanups.push(() => rmSync(directory, { recursive: true, force: true }));
    const path = join(directory, "glassbox.db");
    // Two conversations written through the store; one then aged, as if nobody had written in it since 2020.
    const store = openSqlitePort(path);
    for (const [sessionId, words] of [
      ["web:aged", OLD_WORDS],
      ["web:recent", NEW_WORDS],
    ] as const)
      await store.record([
        {
          kind: "messages",
          sessionId,
          runId: null,
          entries: [{ message: { role: "user", content: words }, tokens: 2 }],
        },
      ]);
    await store.close();
    const file = new Database(path);
    file.prepare("UPDATE sessions SET updated_at = ? WHERE id = 'web:aged'").run(LONG_AGO);
    file.close();

    const main = startMain(directory, { GLASSBOX_DB: path, GLASSBOX_RETENTION_DAYS: "30", LOG_LEVEL: "info" });
    const line = await lineOf(main.lines, REMOVED);
    expect(line.removed).toEqual({ messages: 1, sessions: 1 });
    expectReceiptOnly(line, "web:aged", "web:aged");
    await vi.waitFor(() => expect(main.output.stdout).toContain("glassbox playground"), WAIT);
    main.bot.kill("SIGTERM");
    expect(await main.exited).toBe(0);
    const left = new Database(path, { readonly: true });
    try {
      expect(left.prepare("SELECT id FROM sessions").pluck().all()).toEqual(["web:recent"]);
    } finally {
      left.close();
    }
  });

  it("stops the start with one sentence when GLASSBOX_RETENTION_DAYS is not whole days", {
    timeout: 60_000,
  }, async () => {
    const directory = mkdtempSync(join(tmpdir(), "glassbox-retention-"));
    cleanups.push(() => rmSync(directory, { recursive: true, force: true }));
    const main = startMain(directory, { GLASSBOX_DB: join(directory, "glassbox.db"), GLASSBOX_RETENTION_DAYS: "1.5" });
    // It stops at once, before the pages it would otherwise open.
    const opened = vi
      .waitFor(() => expect(main.output.stdout).toContain("glassbox playground"), { timeout: 45_000, interval: 50 })
      .then(() => "opened the pages");
    expect(await Promise.race([main.exited.then((code) => `exited with ${code}`), opened])).toBe("exited with 1");
    expect(main.output.stderr).toBe(
      "glassbox: GLASSBOX_RETENTION_DAYS is '1.5'; set it to a whole number of days above 0 (such as 90), " +
        "or leave it unset to keep every conversation.\n",
    );
    expect(existsSync(join(directory, "glassbox.db"))).toBe(false);
  });
});

describe.runIf(Boolean(TEST_DATABASE_URL))(
  `retention with ingress and workers on PostgreSQL (${NEEDS_DATABASE})`,
  () => {
    it("an ingress and two workers started after a conversation aged sweep at the same moment: one removal, no error, the receipt logged once", {
      timeout: 180_000,
    }, async () => {
      const database: TestDatabase = await createTestDatabase(TEST_DATABASE_URL as string);
      cleanups.push(() => database.drop());
      const { fake, model, slack } = await platform();
      const base = { GLASSBOX_DATABASE_URL: database.url, ...slack };
      const workerEnv = { ...base, OPENAI_BASE_URL: model.url, OPENAI_API_KEY: "sk-test-retention" };

      const worker = await started("worker", workerEnv);
      const ingress = await started("ingress", base);
      const oldTs = await converse(fake, eventsUrlOf(ingress), OLD_USER, OLD_WORDS);
      await converse(fake, eventsUrlOf(ingress), NEW_USER, NEW_WORDS);
      for (const running of [worker, ingress]) {
        await running.kill();
        processes.splice(processes.indexOf(running), 1);
      }

      const sessionId = `slack:${TEAM}:${CHANNEL}:${oldTs}`;
      const aged = await database.pool.query("UPDATE sessions SET updated_at = $1 WHERE id = $2", [
        LONG_AGO,
        sessionId,
      ]);
      expect(aged.rowCount).toBe(1);
      // The test holds the aged conversation's steps, so that every process's sweep reaches them and
      // waits; let go at once, the sweeps race for the same rows.
      const holder = new pg.Client({ connectionString: database.url });
      await holder.connect();
      cleanups.push(() => holder.end());
      await holder.query("BEGIN");
      const held = await holder.query(
        `SELECT 1 FROM steps WHERE run_id IN (SELECT id FROM runs WHERE session_id = $1) FOR UPDATE`,
        [sessionId],
      );
      expect(held.rowCount).toBeGreaterThan(0);
      await holder.query(
        `SELECT 1 FROM step_messages WHERE run_id IN (SELECT id FROM runs WHERE session_id = $1) FOR UPDATE`,
        [sessionId],
      );

      const retention = { GLASSBOX_RETENTION_DAYS: "30" };
      const sweepers = await Promise.all([
        started("ingress", { ...base, ...retention }),
        started("worker", { ...workerEnv, ...retention }),
        started("worker", { ...workerEnv, ...retention }),
      ]);
      const waiting = async () =>
        Number(
          (
            await database.pool.query(
              `SELECT count(*) AS n FROM pg_stat_activity
              WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'DELETE FROM step%'`,
            )
          ).rows[0].n,
        );
      await vi.waitFor(async () => expect(await waiting()).toBe(3), WAIT);
      await holder.query("ROLLBACK");

      const logged = () => sweepers.flatMap((running) => running.lines);
      const line = await lineOf(logged, REMOVED);
      // Each sweep leaves an audit row once it has committed (the others find nothing left to remove).
      const audits = async () =>
        (await database.pool.query("SELECT erased_by, kind, removed FROM erasures ORDER BY id")).rows as Array<{
          erased_by: string;
          kind: string;
          removed: string | Record<string, number>;
        }>;
      await vi.waitFor(async () => expect(await audits()).toHaveLength(3), WAIT);
      const receipts = (await audits()).map((row) => ({
        ...row,
        removed: typeof row.removed === "string" ? (JSON.parse(row.removed) as Record<string, number>) : row.removed,
      }));
      expect(receipts.every((row) => row.erased_by === "retention" && row.kind === "idle")).toBe(true);
      const sessionsRemoved = receipts.map((row) => row.removed.sessions ?? 0).sort();
      expect(sessionsRemoved).toEqual([0, 0, 1]);

      // One receipt in the log, and no failure from any of them.
      expect(logged().filter((candidate) => RETENTION_LINE.test(candidate.msg))).toEqual([line]);
      expect(line.removed).toMatchObject({ sessions: 1, runs: 1, messages: 2 });
      expectReceiptOnly(line, sessionId, oldTs);

      // Nor did the database break a deadlock between them (which inTransaction would have retried quietly).
      const deadlocks = await database.pool.query(
        "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()",
      );
      expect(Number(deadlocks.rows[0].deadlocks)).toBe(0);
      const rows = await everyRow(database.url);
      expect(rows).not.toContain(OLD_WORDS);
      expect(rows).toContain(NEW_WORDS);
      // The workers go on answering, and a new mention in the removed thread starts afresh.
      const requests = model.requests.length;
      const sent = await fake.sendEvent(eventsUrlOf(sweepers[0]), {
        type: "app_mention",
        user: OLD_USER,
        channel: CHANNEL,
        text: `<@${BOT}> anything new?`,
        ts: fake.nextTs(),
        thread_ts: oldTs,
      });
      expect(sent.status).toBe(200);
      await vi.waitFor(() => expect(model.requests.length).toBeGreaterThan(requests), WAIT);
      expect(JSON.stringify(model.requests.at(-1)?.body.messages)).not.toContain(OLD_WORDS);
    });
  },
);

/** Every row of every table of the database (each schema but PostgreSQL's own), as text, as a dump would have it. */
async function everyRow(url: string): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const tables = await client.query<{ schema: string; name: string }>(
      `SELECT table_schema AS schema, table_name AS name FROM information_schema.tables
        WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')`,
    );
    const rows: string[] = [];
    for (const { schema, name } of tables.rows)
      rows.push(
        ...(await client.query<{ row: string }>(`SELECT t::text AS row FROM "${schema}"."${name}" t`)).rows.map(
          (r) => r.row,
        ),
      );
    return rows.join("\n");
  } finally {
    await client.end();
  }
}
