// Bounded load: GLASSBOX_MAX_CONCURRENT_RUNS bounds the runs in progress across the conversation
// services of a process (the same agent); the rest wait in arrival order, each session in its own
// order, and a chat hears that its request is queued once it has waited a while.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { Approval } from "../../../src/agent/approvals.js";
import { QUEUED_TEXT as DISCORD_QUEUED_TEXT } from "../../../src/adapters/discord/discord-surface.js";
import { QUEUED_TEXT as SLACK_QUEUED_TEXT } from "../../../src/adapters/slack/slack-surface.js";
import { createConversations, QUEUED_NOTICE_MS, type ChatSurface } from "../../../src/conversations/conversations.js";
import type { AgentEvent } from "../../../src/agent/events.js";
import type { RunResult } from "../../../src/agent/run.js";
import { loadConfig } from "../../../src/config.js";
import { createLogger } from "../../../src/logger.js";
import { createAgentConfig, type GlassboxAgent } from "../../../src/setup.js";
import { startScriptedModelServer, type ScriptedModelServer } from "../../../src/testing/scripted-model-server.js";
import * as discord from "../../helpers/discord.js";
import * as slack from "../../helpers/slack.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setUp(env: Record<string, string>): Promise<{ agent: GlassboxAgent; model: ScriptedModelServer }> {
  const directory = mkdtempSync(join(tmpdir(), "glassbox-load-"));
  const model = await startScriptedModelServer({
    script: (request) => ({ content: `answer to ${String(request.messages.at(-1)?.content).slice(-12)}` }),
    latencyMs: 120,
  });
  const agent = await createAgentConfig(
    loadConfig({ OPENAI_BASE_URL: model.url, GLASSBOX_DB: join(directory, "glassbox.db"), ...env }),
    createLogger({ level: "silent" }),
  );
  cleanups.push(
    () => rmSync(directory, { recursive: true, force: true }),
    () => model.close(),
    () => agent.close(),
  );
  return { agent, model };
}

/** A chat surface that writes down what a person would see: queued notices and answers. */
function recordingSurface(log: string[], sessionId: string): ChatSurface {
  return {
    onEvent: (event: AgentEvent) => void (event.type === "run_start" && log.push(`start ${sessionId} ${event.input}`)),
    finish: async (result: RunResult) => void log.push(`end ${sessionId} ${result.stopReason}`),
    askApproval: async (_approval: Approval) => undefined,
    queued: () => void log.push(`queued ${sessionId}`),
  };
}

describe("bounded load", () => {
  it("runs at most GLASSBOX_MAX_CONCURRENT_RUNS at once across two adapters' conversations; the rest start in arrival order, each session in its order", async () => {
    const { agent } = await setUp({ GLASSBOX_MAX_CONCURRENT_RUNS: "2" });
    const log: string[] = [];
    // Two conversation services over one agent, as Slack and Discord share it in one process.
    const slackLike = createConversations(agent, agent.port, {
      openSurface: (sessionId) => recordingSurface(log, sessionId),
      queuedNoticeMs: 60,
    });
    const discordLike = createConversations(agent, agent.port, {
      openSurface: (sessionId) => recordingSurface(log, sessionId),
      queuedNoticeMs: 60,
    });
    let inProgress = 0;
    let most = 0;
    const track = (event: AgentEvent) => {
      if (event.type === "run_start") most = Math.max(most, ++inProgress);
      if (event.type === "run_end") inProgress--;
    };
    const sends = [
      slackLike.send({ sessionId: "slack:T:C:1", userId: "U1", input: "one", onEvent: track }),
      discordLike.send({ sessionId: "discord:dm:1", userId: "U2", input: "two", onEvent: track }),
      slackLike.send({ sessionId: "slack:T:C:2", userId: "U3", input: "three", onEvent: track }),
      discordLike.send({ sessionId: "discord:dm:1", userId: "U2", input: "four", onEvent: track }),
      slackLike.send({ sessionId: "slack:T:C:3", userId: "U4", input: "five", onEvent: track }),
    ];
    const results = await Promise.all(sends);
    expect(results.map((result) => result.stopReason)).toEqual(["final", "final", "final", "final", "final"]);
    expect(most).toBe(2);
    const starts = log.filter((line) => line.startsWith("start")).map((line) => line.split(" ").at(-1));
    expect(starts.slice(0, 2).sort()).toEqual(["one", "two"]);
    expect(starts.indexOf("three")).toBeLessThan(starts.indexOf("five"));
    expect(starts.indexOf("two")).toBeLessThan(starts.indexOf("four"));
    // Those that waited past the notice were told; the first two never waited.
    expect(log).toContain("queued slack:T:C:3");
    expect(log).not.toContain("queued slack:T:C:1");
    expect(log.indexOf("queued slack:T:C:3")).toBeLessThan(log.indexOf("start slack:T:C:3 five"));
    expect(agent.runSlots?.counts()).toEqual({ running: 0, waiting: 0 });
  });

  it("a request stopped while it waits for a slot never starts and makes no model call", async () => {
    const { agent, model } = await setUp({ GLASSBOX_MAX_CONCURRENT_RUNS: "1" });
    const conversations = createConversations(agent, agent.port);
    const first = conversations.send({ sessionId: "web:a", userId: "U1", input: "first" });
    const waiting = conversations.send({ sessionId: "web:b", userId: "U2", input: "second" });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(conversations.stop("web:b")).toBe(true);
    expect(await waiting).toMatchObject({ stopReason: "cancelled", steps: 0 });
    expect((await first).stopReason).toBe("final");
    expect(model.requests).toHaveLength(1);
  });

  it("the default bound is 100 and GLASSBOX_MAX_CONCURRENT_RUNS must be a whole number above 0", () => {
    expect(loadConfig({}).maxConcurrentRuns).toBe(100);
    expect(() => loadConfig({ GLASSBOX_MAX_CONCURRENT_RUNS: "2.5" })).toThrow(
      "GLASSBOX_MAX_CONCURRENT_RUNS is '2.5'; set it to a whole number above 0.",
    );
  });
});

describe("bounded load in the chats", () => {
  afterEach(async () => {
    await slack.cleanUp();
    await discord.cleanUp();
  });

  // The first answer takes longer than QUEUED_NOTICE_MS, so the second request waits past it.
  const slowThenFast = (request: { messages: Array<{ role: string; content?: unknown }> }) =>
    String(request.messages.at(-1)?.content).includes("first")
      ? { content: "first answer", delayMs: QUEUED_NOTICE_MS + 500 }
      : { content: "second answer" };

  it("on Slack, a mention that waits for a slot says it is queued, and the note goes once it starts", async () => {
    const h = await slack.startHarness({ script: slowThenFast, env: { GLASSBOX_MAX_CONCURRENT_RUNS: "1" } });
    await h.mention(`<@${slack.BOT}> first`);
    const { ts } = await h.mention(`<@${slack.BOT}> second`);
    await slack.waitForBotMessage(h.fake, slack.CHANNEL, ts, "second answer");
    const queuedNote = h.fake.callsTo("chat.postMessage").find((call) => call.args.text === SLACK_QUEUED_TEXT);
    expect(queuedNote?.args.thread_ts).toBe(ts);
    expect(slack.botTexts(h.fake, slack.CHANNEL, ts)).not.toContain(SLACK_QUEUED_TEXT);
    expect(h.fake.callsTo("chat.delete")).toHaveLength(1);
  });

  it("on Discord, a DM that waits for a slot says it is queued, and the note goes once it starts", async () => {
    const h = await discord.startHarness({ script: slowThenFast, env: { GLASSBOX_MAX_CONCURRENT_RUNS: "1" } });
    await h.mention("first");
    await h.dm("second");
    await discord.waitForBotMessage(h.fake, discord.DM, "second answer");
    expect(
      h.fake.messageWrites.filter((write) => write.content === DISCORD_QUEUED_TEXT).map((write) => write.channelId),
    ).toEqual([discord.DM]);
    expect(discord.botTexts(h.fake, discord.DM)).not.toContain(DISCORD_QUEUED_TEXT);
  });
});
