// A schedule with ingress and two workers in processes of their own on PostgreSQL (the real
// src/main.ts, the fake Slack, the scripted model): a schedule that ticks every 3 seconds fires exactly
// once per tick over several ticks whichever worker sees it first, goes on when one worker is killed
// between ticks, and fires no more once its maker deletes it in chat.
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { startFakeSlack, type FakeSlack } from "../../../src/testing/fake-slack.js";
import {
  startScriptedModelServer,
  type ChatCompletionRequestBody,
  type ScriptedModelServer,
} from "../../../src/testing/scripted-model-server.js";
import {
  createTestDatabase,
  NEEDS_DATABASE,
  TEST_DATABASE_URL,
  type TestDatabase,
} from "../fixtures/queue-database.js";
import { fakeSlackEnvironment, startRoleProcess, type RoleProcess } from "../fixtures/role-processes.js";

const BOT = "U0FAKEBOT1";
const SECRET = "schedules-split-signing-secret";
const CHANNEL = "C0OPS";
const SESSION = `slack:T0FAKE0001:${CHANNEL}:main`;
const PROMPT = "Check the deploy queue.";
const WAIT = { timeout: 60_000, interval: 100 };

function script(body: ChatCompletionRequestBody) {
  const last = body.messages.at(-1);
  if (last?.role === "tool") return { content: `Result: ${String(last.content).slice(0, 200)}` };
  const asked = String(last?.content ?? "");
  if (asked.includes(PROMPT)) return { content: "The deploy queue is empty." };
  const deleting = /delete (sch_\w+)/.exec(asked);
  if (deleting)
    return { toolCalls: [{ name: "delete_schedule", arguments: JSON.stringify({ schedule_id: deleting[1] }) }] };
  return { content: "Hello." };
}

describe.runIf(Boolean(TEST_DATABASE_URL))(`a schedule across two workers (${NEEDS_DATABASE})`, () => {
  const processes: RoleProcess[] = [];
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const running of processes.splice(0)) await running.kill();
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  }, 30_000);

  it("fires once per tick, survives a worker killed between ticks, and stops once deleted in chat", async () => {
    const database: TestDatabase = await createTestDatabase(TEST_DATABASE_URL as string);
    cleanups.push(() => database.drop());
    const fake: FakeSlack = await startFakeSlack({ signingSecret: SECRET, botUserId: BOT });
    cleanups.push(() => fake.close());
    const model: ScriptedModelServer = await startScriptedModelServer({ script });
    cleanups.push(() => model.close());
    const slack = fakeSlackEnvironment(fake.apiUrl, SECRET);
    const ingress = await startRoleProcess("ingress", { GLASSBOX_DATABASE_URL: database.url, ...slack });
    processes.push(ingress);
    const eventsUrl = ingress.lines.find((line) => /^ingress: receiving/.test(line.msg))?.slack as string;
    const worker = async () => {
      const started = await startRoleProcess("worker", {
        GLASSBOX_DATABASE_URL: database.url,
        ...slack,
        OPENAI_BASE_URL: model.url,
        OPENAI_API_KEY: "sk-test-schedules-split",
        GLASSBOX_SCHEDULE_LOOK_MS: "100",
      });
      processes.push(started);
      return started;
    };
    const [first] = [await worker(), await worker()];

    // Every 3 seconds (six cron fields; chat refuses anything under 5 minutes, the store takes it as given).
    const now = new Date().toISOString();
    await database.pool.query(
      `INSERT INTO schedules (id, session_id, user_id, cron, timezone, prompt, missed, paused, source, created_at, last_tick)
       VALUES ('sch_ops', $1, 'U1', '*/3 * * * * *', 'UTC', $2, 'once', false, 'chat', $3, $3)`,
      [SESSION, PROMPT, now],
    );
    const answers = () =>
      fake.messages(CHANNEL).filter((message) => !message.thread_ts && message.text === "The deploy queue is empty.");
    const fired = async () => {
      const { rows } = await database.pool.query<{ runs: number; ticks: number; distinct_ticks: number }>(
        `SELECT (SELECT count(*)::int FROM runs WHERE schedule_id = 'sch_ops') AS runs,
                (SELECT count(*)::int FROM claims WHERE id LIKE 'schedule:sch_ops:%') AS ticks,
                (SELECT count(DISTINCT id)::int FROM claims WHERE id LIKE 'schedule:sch_ops:%') AS distinct_ticks`,
      );
      return rows[0] as { runs: number; ticks: number; distinct_ticks: number };
    };
    const settled = async () => {
      const counts = await fired();
      // Each tick claimed once, one run for it, one answer posted for each run.
      expect(counts.ticks).toBe(counts.distinct_ticks);
      expect(counts.runs).toBe(counts.ticks);
      await expect.poll(() => answers().length, WAIT).toBe(counts.runs);
      return counts.runs;
    };

    await expect.poll(async () => (await fired()).runs, WAIT).toBeGreaterThanOrEqual(3);
    const before = await settled();

    // One worker is killed between ticks: the other fires the ticks after it, still once each.
    await first.kill();
    await expect.poll(async () => (await fired()).runs, WAIT).toBeGreaterThanOrEqual(before + 3);
    await settled();

    // Its maker deletes it in chat: no tick fires after that.
    const ts = fake.nextTs();
    const event = { type: "app_mention", user: "U1", channel: CHANNEL, text: `<@${BOT}> delete sch_ops`, ts };
    expect((await fake.sendEvent(eventsUrl, event, { signingSecret: SECRET })).status).toBe(200);
    await expect
      .poll(() => fake.messages(CHANNEL, ts).find((message) => message.text?.startsWith("Result:"))?.text, WAIT)
      .toContain('"deleted":true');
    expect((await database.pool.query("SELECT id FROM schedules")).rows).toEqual([]);
    const last = await settled();
    // Three ticks' time passes (each would have been in the store by then): none fires.
    await sleep(9_000);
    expect(await settled()).toBe(last);
  }, 180_000);
});
