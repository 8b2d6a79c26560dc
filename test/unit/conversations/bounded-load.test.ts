// Bounded load: GLASSBOX_MAX_CONCURRENT_RUNS bounds the runs in progress in a process (the same
// agent, whatever platform a conversation is on); the rest wait in arrival order, each session in
// its own order, and a chat hears that its request is queued once it has waited a while.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { QUEUED_TEXT as DISCORD_QUEUED_TEXT } from "../../../src/adapters/discord/discord-surface.js";
import { QUEUED_TEXT as SLACK_QUEUED_TEXT } from "../../../src/adapters/slack/slack-surface.js";
import { QUEUED_NOTICE_MS } from "../../../src/conversations/conversations.js";
import type { AgentEvent } from "../../../src/agent/events.js";
import { loadConfig } from "../../../src/config.js";
import { createLogger } from "../../../src/logger.js";
import { createAgentConfig, type GlassboxAgent } from "../../../src/setup.js";
import { startScriptedModelServer, type ScriptedModelServer } from "../../../src/testing/scripted-model-server.js";
import * as discord from "../../helpers/discord.js";
import * as slack from "../../helpers/slack.js";
import { startPipeline } from "../../helpers/pipeline.js";

const WAIT = { timeout: 15_000, interval: 10 };

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

/** The pipeline over the agent, writing down what a person would see: queued notices, starts and ends. */
async function pipelineOver(agent: GlassboxAgent, log: string[] = [], onEvent?: (event: AgentEvent) => void) {
  const pipeline = await startPipeline({
    agent,
    store: agent.port,
    queuedNoticeMs: 60,
    onEvent(event, sessionId) {
      if (event.type === "run_start") log.push(`start ${sessionId} ${event.input}`);
      onEvent?.(event);
    },
    onQueued: (sessionId) => void log.push(`queued ${sessionId}`),
  });
  cleanups.push(() => pipeline.close());
  return pipeline;
}

describe("bounded load", () => {
  it("runs at most GLASSBOX_MAX_CONCURRENT_RUNS at once across Slack's and Discord's conversations; the rest start in arrival order, each session in its order", async () => {
    const { agent } = await setUp({ GLASSBOX_MAX_CONCURRENT_RUNS: "2" });
    const log: string[] = [];
    let inProgress = 0;
    let most = 0;
    // One worker runs every platform's turns over one agent, as in one process.
    const pipeline = await pipelineOver(agent, log, (event) => {
      if (event.type === "run_start") most = Math.max(most, ++inProgress);
      if (event.type === "run_end") inProgress--;
    });
    const accepted = [];
    for (const message of [
      { sessionId: "slack:T:C:1", userId: "U1", input: "one" },
      { sessionId: "discord:dm:1", userId: "U2", input: "two" },
      { sessionId: "slack:T:C:2", userId: "U3", input: "three" },
      { sessionId: "discord:dm:1", userId: "U2", input: "four" },
      { sessionId: "slack:T:C:3", userId: "U4", input: "five" },
    ])
      accepted.push(await pipeline.accept(message));
    const results = await Promise.all(accepted.map((message) => message.result));
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
    await pipeline.idle();
    expect(agent.runSlots?.counts()).toEqual({ running: 0, waiting: 0 });
  });

  it("a request stopped while it waits for a slot never starts and makes no model call", async () => {
    const { agent, model } = await setUp({ GLASSBOX_MAX_CONCURRENT_RUNS: "1" });
    const pipeline = await pipelineOver(agent);
    const first = await pipeline.accept({ sessionId: "web:a", userId: "U1", input: "first" });
    const waiting = await pipeline.accept({ sessionId: "web:b", userId: "U2", input: "second" });
    await vi.waitFor(() => expect(agent.runSlots?.counts()).toEqual({ running: 1, waiting: 1 }), WAIT);
    expect(await pipeline.stop("web:b")).toBe(true);
    expect(await waiting.result).toMatchObject({ stopReason: "cancelled", steps: 0 });
    expect((await first.result).stopReason).toBe("final");
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
