// GLASSBOX_ROLE=all: ingress and a worker in one process (the real src/main.ts) on PostgreSQL,
// with the fake Slack and the scripted model server: a mention is answered in its thread, a click
// on Approve resumes the paused run, and SIGTERM stops the process with exit code 0. And a worker
// that the others declared dead exits with code 1, for its supervisor to restart it. Runs only when
// GLASSBOX_TEST_DATABASE_URL is set.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { startFakeSlack, type FakeSlack } from "../../../src/testing/fake-slack.js";
import {
  startScriptedModelServer,
  type ChatCompletionRequestBody,
  type ScriptedModelServer,
  type ScriptedReply,
} from "../../../src/testing/scripted-model-server.js";
import {
  createTestDatabase,
  NEEDS_DATABASE,
  TEST_DATABASE_URL,
  type TestDatabase,
} from "../fixtures/queue-database.js";
import { fakeSlackEnvironment, startRoleProcess, type RoleProcess } from "../fixtures/role-processes.js";

const BOT = "U0FAKEBOT1";
const SECRET = "role-all-signing-secret";
const WAIT = { timeout: 30_000, interval: 50 };

function reply(body: ChatCompletionRequestBody): ScriptedReply {
  const last = body.messages.at(-1);
  if (last?.role === "user") return { toolCalls: [{ name: "wipe_cache", arguments: "{}" }] };
  return {
    content: `done: ${typeof last?.content === "string" && last.content.includes("wiped") ? "wiped" : "not wiped"}.`,
  };
}

describe.runIf(Boolean(TEST_DATABASE_URL))(`GLASSBOX_ROLE=all on PostgreSQL (${NEEDS_DATABASE})`, () => {
  let database: TestDatabase | undefined;
  let fake: FakeSlack | undefined;
  let model: ScriptedModelServer | undefined;
  let bot: RoleProcess | undefined;
  let directory: string | undefined;
  afterEach(async () => {
    await bot?.kill();
    await model?.close();
    await fake?.close();
    await database?.drop();
    if (directory) rmSync(directory, { recursive: true, force: true });
    database = fake = model = bot = directory = undefined;
  }, 30_000);

  it("receives, runs, pauses for approval, resumes on the click, and stops on SIGTERM", async () => {
    directory = mkdtempSync(join(tmpdir(), "glassbox-all-"));
    database = await createTestDatabase(TEST_DATABASE_URL as string);
    fake = await startFakeSlack({ signingSecret: SECRET, botUserId: BOT });
    model = await startScriptedModelServer({ script: (body) => reply(body) });
    bot = await startRoleProcess("all", {
      GLASSBOX_DATABASE_URL: database.url,
      GLASSBOX_DB: join(directory, "unused.db"),
      ...fakeSlackEnvironment(fake.apiUrl, SECRET),
      OPENAI_BASE_URL: model.url,
      OPENAI_API_KEY: "sk-test-role-all",
      LLM_MODEL: "gpt-4o-mini",
      GLASSBOX_TOOLS: new URL("../fixtures/worker-tools.ts", import.meta.url).pathname,
    });
    const eventsUrl = bot.lines.find((line) => /^ingress: receiving/.test(line.msg))?.slack as string;
    const ts = fake.nextTs();
    const sent = await fake.sendEvent(
      eventsUrl,
      { type: "app_mention", user: "U1", channel: "C1", text: `<@${BOT}> clean the cache`, ts },
      { signingSecret: SECRET },
    );
    expect(sent.status).toBe(200);

    const buttons = await vi.waitFor(() => {
      const posted = fake
        ?.messages("C1", ts)
        .find((message) => JSON.stringify(message.blocks ?? []).includes("glassbox_approve"));
      if (!posted) throw new Error("no approval buttons yet");
      return posted;
    }, WAIT);
    const approvalId = /"value":"([^"]+)"/.exec(JSON.stringify(buttons.blocks))?.[1] as string;
    const clicked = await fake.sendBlockAction(
      eventsUrl,
      { userId: "U1", channel: "C1", messageTs: buttons.ts, actionId: "glassbox_approve", value: approvalId },
      { signingSecret: SECRET },
    );
    expect(clicked.status).toBe(200);
    await vi.waitFor(
      () => expect(fake?.messages("C1", ts).map((message) => message.text)).toContain("done: wiped."),
      WAIT,
    );

    expect(await bot.stop()).toBe(0);
  }, 90_000);

  it("a worker that lost its lease exits with code 1", async () => {
    directory = mkdtempSync(join(tmpdir(), "glassbox-lease-"));
    database = await createTestDatabase(TEST_DATABASE_URL as string);
    model = await startScriptedModelServer({ script: [] });
    bot = await startRoleProcess("worker", {
      GLASSBOX_DATABASE_URL: database.url,
      GLASSBOX_DB: join(directory, "unused.db"),
      OPENAI_BASE_URL: model.url,
      OPENAI_API_KEY: "sk-test-role-all",
      GLASSBOX_QUEUE_TIMINGS: JSON.stringify({
        heartbeatMs: 100,
        deadAfterMs: 1_000,
        sweepMs: 100,
        pollIntervalMs: 200,
      }),
    });
    // What the other workers do to one whose heartbeats stopped reaching them.
    await database.pool.query("delete from glassbox_queue.workers");
    expect(await bot.exited).toBe(1);
    expect(bot.lines.some((line) => line.level === 60 && line.cause === "lease_lost")).toBe(true);
  }, 60_000);
});
