// The Slack adapter with its conversations in worker threads (GLASSBOX_WORKERS above 1), end to end:
// the real Bolt app on this thread receives the fake Slack's signed events; each worker builds the
// agent from the configuration alone (no agent exists on this thread) and runs its share of the
// sessions over the real openai SDK, the scripted model server and the shared SQLite file.
import { spawn } from "node:child_process";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { shardOf } from "../src/adapters/conversation-workers.js";
import { startSlackAdapter } from "../src/adapters/slack/slack-adapter.js";
import { openSqliteStore } from "../src/store/sqlite-store.js";
import { sqlitePortOf } from "../src/store/sqlite.js";
import { loadConfig } from "../src/config.js";
import type { FakeSlack } from "../src/testing/fake-slack.js";
import type { ChatCompletionRequestBody, ScriptedModelServer } from "../src/testing/scripted-model-server.js";
import {
  APPROVE,
  BOT,
  BOT_TOKEN,
  botTexts,
  CANCELLABLE_ORDER,
  cancelScript,
  CHANNEL,
  cleanUp,
  DENY,
  memoryLogger,
  messageAt,
  orderStatus,
  SIGNING_SECRET,
  slackConfigFor,
  startModel,
  startSlack,
  TEAM,
  tempDir,
  tempPaths,
  textOf,
  visibleText,
  waitForApproval,
  waitForBotMessage,
  WAIT,
  type Paths,
} from "./slack-helpers.js";

afterEach(cleanUp);
// Registered after cleanUp, so it runs first: the adapters stop before the fakes close.
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of cleanups.splice(0).reverse()) await stop();
});

const sessionOf = (ts: string) => `slack:${TEAM}:${CHANNEL}:${ts}`;
const lastUserText = (body: ChatCompletionRequestBody) => textOf(body.messages.findLast((m) => m.role === "user"));

/** startSlackAdapter as main.ts calls it with GLASSBOX_WORKERS=2: a store here for claims, the agents in the workers. */
async function startWithWorkers(
  fake: FakeSlack,
  model: ScriptedModelServer,
  paths: Paths,
  env: Record<string, string> = {},
) {
  const config = loadConfig({
    OPENAI_BASE_URL: model.url,
    LLM_MODEL: "gpt-4o-mini",
    GLASSBOX_DB: paths.db,
    GLASSBOX_SHOP_DB: paths.shopDb,
    GLASSBOX_DEMO: "true",
    ...env,
  });
  const store = openSqliteStore(config.databasePath);
  const { log, lines } = memoryLogger();
  const exits: number[] = [];
  const slack = await startSlackAdapter({
    slack: slackConfigFor(fake),
    store: sqlitePortOf(store),
    log,
    approvalTtlSeconds: 3_600,
    workers: { count: 2, config, onExit: (worker) => exits.push(worker) },
  }).catch((error: unknown) => {
    store.close();
    throw error;
  });
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await slack.stop();
    store.close();
    expect(exits).toEqual([]); // no worker ended on its own
  };
  cleanups.push(stop);
  return { slack, store, lines, stop, eventsUrl: slack.eventsUrl as string };
}

describe("Slack with worker threads", () => {
  it("GLASSBOX_WORKERS takes a thread count or auto (the cores less one, 1 to 4); anything else is one sentence", () => {
    const cores = availableParallelism();
    expect(loadConfig({}).workers).toBe(Math.max(1, Math.min(cores - 1, 4)));
    expect(loadConfig({ GLASSBOX_WORKERS: "auto" }).workers).toBe(loadConfig({}).workers);
    expect(loadConfig({ GLASSBOX_WORKERS: "3" }).workers).toBe(3);
    for (const wrong of ["0", "2.5", "many", "65"]) {
      expect(() => loadConfig({ GLASSBOX_WORKERS: wrong })).toThrow(
        `GLASSBOX_WORKERS is '${wrong}'; set it to a number of threads from 1 to 64, or auto.`,
      );
    }
  });

  it("sends each session to one worker, the same every time, and spreads sessions over all of them", () => {
    const sessions = Array.from({ length: 400 }, (_, n) => sessionOf(`17000000${n}.000100`));
    const counts = [0, 0, 0];
    for (const session of sessions) {
      expect(shardOf(session, 3)).toBe(shardOf(session, 3));
      counts[shardOf(session, 3)] = (counts[shardOf(session, 3)] ?? 0) + 1;
    }
    for (const count of counts) expect(count).toBeGreaterThan(90); // about 133 each
  });

  it("answers threads whose sessions two workers share, each in its own thread, with a thread's messages in turn", async () => {
    const fake = await startSlack();
    const model = await startModel();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    model.setScript(async (body) => {
      const question = lastUserText(body);
      if (question === "first") await gate;
      return { content: `You said: ${question}.` };
    });
    const { slack, eventsUrl } = await startWithWorkers(fake, model, tempPaths());

    // Eight threads; their sessions fall to both workers.
    const threads = Array.from({ length: 8 }, () => fake.nextTs());
    expect(new Set(threads.map((ts) => shardOf(sessionOf(ts), 2)))).toEqual(new Set([0, 1]));
    for (const [n, ts] of threads.entries()) {
      await fake.sendEvent(eventsUrl, {
        type: "app_mention",
        user: "U1",
        channel: CHANNEL,
        text: `<@${BOT}> question ${n}`,
        ts,
      });
    }
    for (const [n, ts] of threads.entries()) await waitForBotMessage(fake, CHANNEL, ts, `You said: question ${n}.`);
    for (const ts of threads) expect(botTexts(fake, CHANNEL, ts)).toHaveLength(1);

    // In one thread, a second message waits until the first is answered, then sees that exchange.
    const ts = fake.nextTs();
    await fake.sendEvent(eventsUrl, { type: "app_mention", user: "U1", channel: CHANNEL, text: `<@${BOT}> first`, ts });
    await expect
      .poll(() => model.requests.filter((request) => lastUserText(request.body) === "first").length, WAIT)
      .toBe(1);
    await fake.sendEvent(eventsUrl, {
      type: "app_mention",
      user: "U1",
      channel: CHANNEL,
      text: `<@${BOT}> second`,
      ts: fake.nextTs(),
      thread_ts: ts,
    });
    await expect.poll(() => slack.conversations.busy(sessionOf(ts)), WAIT).toBe(true);
    expect(model.requests.some((request) => lastUserText(request.body) === "second")).toBe(false);
    release();
    await waitForBotMessage(fake, CHANNEL, ts, "You said: second.");
    await slack.conversations.idle();
    expect(botTexts(fake, CHANNEL, ts)).toEqual(["You said: first.", "You said: second."]);
    const second = model.requests.find((request) => lastUserText(request.body) === "second");
    expect(second?.body.messages.filter((m) => m.role !== "system").map(textOf)).toEqual([
      "first",
      "You said: first.",
      "second",
    ]);
    expect(await slack.conversations.busy(sessionOf(ts))).toBe(false);
  });

  it("'stop' reaches the worker running the thread and cancels its run", async () => {
    const fake = await startSlack();
    const model = await startModel([{ hang: true }]);
    const { slack, eventsUrl } = await startWithWorkers(fake, model, tempPaths());
    const ts = fake.nextTs();
    await fake.sendEvent(eventsUrl, {
      type: "app_mention",
      user: "U1",
      channel: CHANNEL,
      text: `<@${BOT}> take forever`,
      ts,
    });
    await expect.poll(() => model.requests.length, WAIT).toBe(1);

    await fake.sendEvent(eventsUrl, {
      type: "app_mention",
      user: "U1",
      channel: CHANNEL,
      text: `<@${BOT}> stop`,
      ts: fake.nextTs(),
      thread_ts: ts,
    });
    await waitForBotMessage(fake, CHANNEL, ts, "Stopped.");
    await slack.conversations.idle();
    expect(botTexts(fake, CHANNEL, ts)).toContain("Stopping.");
    expect(model.requests).toHaveLength(1);
  });

  it("routes clicks to the worker of the approval's thread, also after a restart: someone else is refused, the requester's Approve runs the call", async () => {
    const fake = await startSlack();
    const model = await startModel(cancelScript());
    const paths = tempPaths();
    const first = await startWithWorkers(fake, model, paths);
    const ts = fake.nextTs();
    await fake.sendEvent(first.eventsUrl, {
      type: "app_mention",
      user: "U1",
      channel: CHANNEL,
      text: `<@${BOT}> cancel order ${CANCELLABLE_ORDER}, I ordered it twice`,
      ts,
    });
    const approval = await waitForApproval(fake, CHANNEL, ts);
    await first.slack.conversations.idle();
    await first.stop();

    const second = await startWithWorkers(fake, model, paths);
    const click = (userId: string, actionId = APPROVE) =>
      fake.sendBlockAction(second.eventsUrl, {
        userId,
        channel: CHANNEL,
        messageTs: approval.ts,
        actionId,
        value: approval.id,
      });
    expect((await click("U2")).status).toBe(200);
    await expect
      .poll(() => fake.callsTo("chat.postEphemeral").map((call) => [call.args.user, call.args.text]), WAIT)
      .toEqual([["U2", "Only <@U1> can approve this."]]);
    expect(orderStatus(paths.shopDb, CANCELLABLE_ORDER)).toBe("paid");

    expect((await click("U1")).status).toBe(200);
    await waitForBotMessage(fake, CHANNEL, ts, "order 20240410003 is cancelled");
    await second.slack.conversations.idle();
    expect(orderStatus(paths.shopDb, CANCELLABLE_ORDER)).toBe("cancelled");
    expect(visibleText(messageAt(fake, CHANNEL, approval.ts))).toContain("Approved by <@U1>");
    // A second click changes nothing.
    expect((await click("U1", DENY)).status).toBe(200);
    await second.slack.conversations.idle();
    expect(model.requests).toHaveLength(2);
  });

  it("expires an approval in the worker that runs its thread: the message says so and the model gets the denial", async () => {
    const fake = await startSlack();
    const model = await startModel(cancelScript("I could not cancel it: nobody approved in time."));
    const paths = tempPaths();
    const { slack, eventsUrl } = await startWithWorkers(fake, model, paths);
    const ts = fake.nextTs();
    await fake.sendEvent(eventsUrl, {
      type: "app_mention",
      user: "U1",
      channel: CHANNEL,
      text: `<@${BOT}> cancel order ${CANCELLABLE_ORDER}`,
      ts,
    });
    const approval = await waitForApproval(fake, CHANNEL, ts);
    await slack.conversations.idle();

    expect(await slack.conversations.expireApprovals(new Date(Date.now() + 2 * 3_600_000))).toBe(1);
    await waitForBotMessage(fake, CHANNEL, ts, "nobody approved in time");
    await slack.conversations.idle();
    expect(visibleText(messageAt(fake, CHANNEL, approval.ts))).toMatch(/expired/i);
    expect(orderStatus(paths.shopDb, CANCELLABLE_ORDER)).toBe("paid");
    const denied = model.requests[1]?.body.messages.find((m) => m.role === "tool");
    expect(JSON.parse(textOf(denied)) as { status: string }).toMatchObject({
      status: "error",
      error: { type: "denied" },
    });
  });

  it("a worker that cannot build the agent stops startup with the sentence that says what to set", async () => {
    const fake = await startSlack();
    const model = await startModel();
    const missing = join(tempDir(), "no-such-agents.json");
    await expect(startWithWorkers(fake, model, tempPaths(), { GLASSBOX_AGENTS: missing })).rejects.toThrow(
      `GLASSBOX_AGENTS names ${missing}, which cannot be read`,
    );
  });

  it("npm start with Slack tokens runs the conversations in GLASSBOX_WORKERS threads, answers, and stops cleanly on SIGTERM", async () => {
    const fake = await startSlack();
    const model = await startModel([{ content: "Hello from a worker." }]);
    const paths = tempPaths();
    const env = {
      ...process.env,
      SLACK_BOT_TOKEN: BOT_TOKEN,
      SLACK_SIGNING_SECRET: SIGNING_SECRET,
      SLACK_API_URL: fake.apiUrl,
      PORT: "0",
      GLASSBOX_HOST: "127.0.0.1",
      GLASSBOX_WORKERS: "2",
      OPENAI_BASE_URL: model.url,
      LLM_MODEL: "gpt-4o-mini",
      GLASSBOX_DB: paths.db,
      GLASSBOX_SHOP_DB: paths.shopDb,
      GLASSBOX_DEMO: "true",
    };
    const bot = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], { env, stdio: ["ignore", "pipe", "pipe"] });
    let exitCode: number | null | undefined;
    const exited = new Promise<number | null>((resolve) => bot.on("exit", (code) => resolve((exitCode = code))));
    let stderr = "";
    bot.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    try {
      await expect
        .poll(
          () => {
            if (exitCode !== undefined) throw new Error(`the bot exited (${exitCode}): ${stderr}`);
            return /"msg":"Slack connected"/.test(stderr);
          },
          { timeout: 20_000, interval: 50 },
        )
        .toBe(true);
      const connected = JSON.parse(stderr.split("\n").find((line) => line.includes('"Slack connected"')) ?? "{}") as {
        eventsUrl: string;
        workers: number;
      };
      expect(connected.workers).toBe(2);
      const ts = fake.nextTs();
      const sent = await fake.sendEvent(connected.eventsUrl, {
        type: "app_mention",
        user: "U1",
        channel: CHANNEL,
        text: `<@${BOT}> hello`,
        ts,
      });
      expect(sent.status).toBe(200);
      await waitForBotMessage(fake, CHANNEL, ts, "Hello from a worker.");
    } finally {
      bot.kill("SIGTERM");
    }
    expect(await exited).toBe(0);
    expect(stderr).not.toContain(BOT_TOKEN);
  });
});
