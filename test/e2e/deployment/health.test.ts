// /healthz and /readyz of the real src/main.ts: on the web server and on GLASSBOX_HEALTH_PORT,
// without a token where the API needs one, ready once every part is, and not ready (503, naming the
// part) while the database is still being migrated or a platform's connection is down.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterEach, describe, expect, it, vi } from "vitest";
import { startFakeDiscord, type FakeDiscord } from "../../../src/testing/fake-discord.js";
import { startScriptedModelServer, type ScriptedModelServer } from "../../../src/testing/scripted-model-server.js";
import {
  createTestDatabase,
  NEEDS_DATABASE,
  TEST_DATABASE_URL,
  type TestDatabase,
} from "../fixtures/queue-database.js";
import { startRoleProcess, type RoleProcess } from "../fixtures/role-processes.js";
import { fetchJson as get, freePort } from "../../helpers/http.js";

const WAIT = { timeout: 30_000, interval: 100 };
const TOKEN = "health-test-service-token";

const processes: RoleProcess[] = [];
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const running of processes.splice(0)) await running.kill();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
}, 30_000);

describe("health routes of one process on SQLite, with Discord", () => {
  it("answer without the API's token, report each part ready, and name Discord once its gateway is gone", async () => {
    const directory = mkdtempSync(join(tmpdir(), "glassbox-health-"));
    cleanups.push(() => rmSync(directory, { recursive: true, force: true }));
    const model: ScriptedModelServer = await startScriptedModelServer();
    cleanups.push(() => model.close());
    const discord: FakeDiscord = await startFakeDiscord();
    let discordClosed = false;
    cleanups.push(() => (discordClosed ? undefined : discord.close()));
    const healthPort = await freePort();
    const bot = await startRoleProcess("all", {
      GLASSBOX_DB: join(directory, "glassbox.db"),
      DISCORD_TOKEN: discord.token,
      DISCORD_API_URL: discord.apiUrl,
      OPENAI_BASE_URL: model.url,
      OPENAI_API_KEY: "sk-test-health",
      LLM_MODEL: "gpt-4o-mini",
      GLASSBOX_WEB_PORT: "0",
      GLASSBOX_API_TOKEN: TOKEN,
      GLASSBOX_HEALTH_PORT: String(healthPort),
    });
    processes.push(bot);
    const web = bot.lines.find((line) => /^ingress: receiving/.test(line.msg))?.api as string;
    const health = `http://127.0.0.1:${healthPort}`;

    // The API needs the token; the health routes do not, on either port.
    expect((await get(`${web}/api/sessions`)).status).toBe(401);
    const ready = { ready: true, role: "all", checks: { store: "ok", worker: "ok", ingress: "ok", discord: "ok" } };
    await vi.waitFor(async () => expect(await get(`${health}/readyz`)).toEqual({ status: 200, body: ready }), WAIT);
    for (const base of [web, health]) {
      expect(await get(`${base}/healthz`)).toEqual({ status: 200, body: { live: true } });
      expect(await get(`${base}/readyz`)).toEqual({ status: 200, body: ready });
    }
    expect((await get(`${health}/readyz`, { method: "POST" })).status).toBe(405);
    expect((await get(`${health}/api/sessions`)).status).toBe(404); // the health port serves nothing else

    // Discord goes away: the process lives, and is not ready, saying why.
    await discord.close();
    discordClosed = true;
    const report = await vi.waitFor(async () => {
      const answer = await get(`${health}/readyz`);
      if (answer.status !== 503) throw new Error(`still ${answer.status}`);
      return answer.body;
    }, WAIT);
    expect(report).toEqual({
      ready: false,
      role: "all",
      checks: { store: "ok", worker: "ok", ingress: "ok", discord: "the gateway connection is down" },
    });
    expect((await get(`${web}/healthz`)).status).toBe(200);
    expect(await bot.stop()).toBe(0);
  });
});

describe.runIf(Boolean(TEST_DATABASE_URL))(`health of a worker on PostgreSQL (${NEEDS_DATABASE})`, () => {
  it("answers /healthz while its database is migrated elsewhere, /readyz 503 until the migration is done, then 200", async () => {
    const database: TestDatabase = await createTestDatabase(TEST_DATABASE_URL as string);
    cleanups.push(() => database.drop());
    const model = await startScriptedModelServer();
    cleanups.push(() => model.close());
    // Another process migrates: the worker waits for the migration lock.
    const migrating = new pg.Client({ connectionString: database.url });
    await migrating.connect();
    cleanups.push(() => migrating.end());
    await migrating.query("SELECT pg_advisory_lock(hashtext('glassbox.migrate'), hashtext('public'))");
    const healthPort = await freePort();
    const health = `http://127.0.0.1:${healthPort}`;
    const starting = startRoleProcess("worker", {
      GLASSBOX_DATABASE_URL: database.url,
      OPENAI_BASE_URL: model.url,
      OPENAI_API_KEY: "sk-test-health",
      LLM_MODEL: "gpt-4o-mini",
      GLASSBOX_HEALTH_PORT: String(healthPort),
    });
    starting.then((worker) => processes.push(worker)).catch(() => {});
    await vi.waitFor(async () => expect((await get(`${health}/healthz`)).status).toBe(200), WAIT);
    expect(await get(`${health}/readyz`)).toEqual({
      status: 503,
      body: { ready: false, role: "worker", checks: { store: "opening the database" } },
    });

    await migrating.query("SELECT pg_advisory_unlock(hashtext('glassbox.migrate'), hashtext('public'))");
    const worker = await starting;
    await vi.waitFor(
      async () =>
        expect(await get(`${health}/readyz`)).toEqual({
          status: 200,
          body: { ready: true, role: "worker", checks: { store: "ok", queue: "ok", worker: "ok" } },
        }),
      WAIT,
    );
    expect(await worker.stop()).toBe(0);
  });
});
