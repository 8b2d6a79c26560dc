// Daily caps per user, through the pipeline (the in-process queue, the worker) over the real loop,
// SQLite memory, traces and the scripted model: a user over a cap gets one sentence and no model call; others are unaffected.
// A call counts what it spent however it ends: cut off mid-reply, or answered without usage.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { AgentConfig } from "../../../src/agent/loop.js";
import { createMemory } from "../../../src/agent/memory.js";
import { createOpenAIModel } from "../../../src/agent/llm/index.js";
import { createSpendingGuard, quotaProblem, withSpendingGuard } from "../../../src/agent/quota.js";
import { createTokenCounter } from "../../../src/agent/tokens.js";
import { createTraceRecorder } from "../../../src/agent/trace.js";
import { loadConfig } from "../../../src/config.js";
import { createLogger } from "../../../src/logger.js";
import { sqliteAgentConfig } from "../../helpers/sqlite-agent.js";
import { createToolRegistry } from "../../../src/tools/registry.js";
import type { Script } from "../../../src/testing/scripted-model-server.js";
import { startServer } from "../../helpers/agent.js";
import { cleanUpAfterEach, openTestStore, requestTokens, testModel } from "../../helpers/memory.js";
import { sqlitePortOf } from "../../../src/store/sqlite.js";
import { type Pipeline, startPipeline } from "../../helpers/pipeline.js";

const counter = await createTokenCounter("o200k_base");

const pipelines: Pipeline[] = [];
afterEach(async () => {
  for (const pipeline of pipelines.splice(0)) await pipeline.close();
});

/** The agent as `npm start` builds it from `env`, over a SQLite file, behind the pipeline; every model call spends `usage` (or answers by `script`). */
async function cappedPipeline(
  usage: { promptTokens: number; completionTokens: number } | Exclude<Script, unknown[]>,
  env: Record<string, string>,
) {
  const directory = mkdtempSync(join(tmpdir(), "glassbox-quota-"));
  const script: Script = typeof usage === "function" ? usage : () => ({ content: "ok", usage });
  const server = await startServer({ script, latencyMs: 30 });
  const config = loadConfig({ OPENAI_BASE_URL: server.url, GLASSBOX_DB: join(directory, "glassbox.db"), ...env });
  const agent = await sqliteAgentConfig(config, createLogger({ level: "silent" }));
  const conversations = await startPipeline({
    agent,
    store: agent.port,
    settings: { dailyLimits: config.dailyLimits },
  });
  pipelines.push(conversations);
  const close = async () => {
    await pipelines.pop()?.close();
    await agent.close();
    rmSync(directory, { recursive: true, force: true });
  };
  return { server, agent, conversations, close };
}

describe("daily caps per user", () => {
  cleanUpAfterEach();

  async function setUp(dailyLimits: { tokens?: number; cost?: number }) {
    const server = await startServer({
      script: () => ({ content: "ok", usage: { promptTokens: 400_000, completionTokens: 100_000 } }),
    });
    const store = openTestStore();
    const model = testModel(server);
    const agent: AgentConfig = {
      model,
      tools: createToolRegistry([]),
      memory: createMemory({ store: sqlitePortOf(store), model, counter, budgetTokens: 12_000 }),
      trace: createTraceRecorder(sqlitePortOf(store)),
    };
    const conversations = await startPipeline({ agent, store: sqlitePortOf(store), settings: { dailyLimits } });
    pipelines.push(conversations);
    return { server, store, conversations };
  }

  it("refuses a user over the token cap with one sentence, before any model call", async () => {
    const { server, conversations } = await setUp({ tokens: 300_000 });
    expect((await conversations.send({ input: "first", sessionId: "web:a", userId: "U1" })).stopReason).toBe("final");
    const refused = await conversations.send({ input: "second", sessionId: "web:a", userId: "U1" });
    expect(refused).toMatchObject({ stopReason: "error", steps: 0, error: { code: "quota" } });
    expect(refused.output).toMatch(
      /^You have used your daily allowance of 300,000 tokens; it resets at 00:00 UTC, in \d+ h \d+ min\.$/,
    );
    expect(server.requests).toHaveLength(1);
    // Another user is not affected.
    expect((await conversations.send({ input: "hello", sessionId: "web:b", userId: "U2" })).stopReason).toBe("final");
    expect(server.requests).toHaveLength(2);
  });

  it("refuses a user over the cost cap (gpt-4o-mini: $0.06 + $0.06 for this run)", async () => {
    const { server, conversations } = await setUp({ cost: 0.1 });
    await conversations.send({ input: "first", sessionId: "web:a", userId: "U1" });
    const refused = await conversations.send({ input: "second", sessionId: "web:a", userId: "U1" });
    expect(refused.output).toContain("daily allowance of $0.10");
    expect(server.requests).toHaveLength(1);
  });

  it("counts only today's usage: yesterday's runs do not count", async () => {
    const { store, conversations } = await setUp({ tokens: 300_000 });
    await conversations.send({ input: "first", sessionId: "web:a", userId: "U1" });
    store.db.prepare("UPDATE runs SET started_at = '2000-01-01T12:00:00.000Z'").run();
    expect(await quotaProblem(sqlitePortOf(store), "U1", { tokens: 300_000 })).toBeUndefined();
    const tomorrow = new Date(Date.now() + 86_400_000);
    expect(await quotaProblem(sqlitePortOf(store), "U1", { tokens: 1 }, tomorrow)).toBeUndefined();
  });
});

describe("quotas hold under concurrency", () => {
  cleanUpAfterEach();

  it("40 runs started together by one user spend at most one model call past a 2,000-token cap; the rest are refused in one sentence", async () => {
    const call = { promptTokens: 150, completionTokens: 10 };
    const { server, agent, conversations, close } = await cappedPipeline(call, { GLASSBOX_USER_DAILY_TOKENS: "2000" });
    try {
      const results = await Promise.all(
        Array.from({ length: 40 }, (_, index) =>
          conversations.send({ input: `question ${index}`, sessionId: `web:q${index}`, userId: "U1" }),
        ),
      );
      const spent = agent.store.db
        .prepare("SELECT coalesce(sum(prompt_tokens + completion_tokens), 0) FROM runs WHERE user_id = 'U1'")
        .pluck()
        .get() as number;
      expect(spent).toBeGreaterThan(2_000 - 160); // the cap is used, not refused early
      expect(spent).toBeLessThanOrEqual(2_000 + call.promptTokens + call.completionTokens);
      expect(server.requests.length).toBe(spent / 160);
      const refused = results.filter((result) => result.stopReason !== "final");
      expect(refused.length).toBe(40 - server.requests.length);
      for (const result of refused) {
        expect(result).toMatchObject({ stopReason: "error", error: { code: "quota" } });
        expect(result.output).toMatch(
          /^You have used your daily allowance of 2,000 tokens; it resets at 00:00 UTC, in \d+ h \d+ min\.$/,
        );
      }
      // Another user still has their own allowance.
      expect((await conversations.send({ input: "hello", sessionId: "web:other", userId: "U2" })).stopReason).toBe(
        "final",
      );
    } finally {
      await close();
    }
  });

  it("regression: with GLASSBOX_MAX_OUTPUT_TOKENS a call holds room for its whole answer, so long answers started together pass a cap by at most one call (finding 1)", async () => {
    const call = { promptTokens: 150, completionTokens: 3_000 };
    const { agent, conversations, close } = await cappedPipeline(call, {
      GLASSBOX_USER_DAILY_TOKENS: "10000",
      GLASSBOX_MAX_OUTPUT_TOKENS: "3000",
    });
    try {
      await Promise.all(
        Array.from({ length: 20 }, (_, index) =>
          conversations.send({ input: `long question ${index}`, sessionId: `web:long${index}`, userId: "U1" }),
        ),
      );
      const spent = agent.store.db
        .prepare("SELECT coalesce(sum(prompt_tokens + completion_tokens), 0) FROM runs WHERE user_id = 'U1'")
        .pluck()
        .get() as number;
      expect(spent).toBeGreaterThan(10_000 - 3_150); // the cap is used
      expect(spent).toBeLessThanOrEqual(10_000 + call.promptTokens + call.completionTokens);
    } finally {
      await close();
    }
  });
});

/** One SSE chunk of answer text, as OpenAI streams it. */
const chunk = (content: string) => `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content } }] })}\n\n`;

describe("a call's spending counts however it ends", () => {
  cleanUpAfterEach();

  const QUOTA_SENTENCE =
    /^You have used your daily allowance of 10 tokens; it resets at 00:00 UTC, in \d+ h \d+ min\.$/;

  it("regression: a model that streams forever, stopped at the body's deadline, counts its prompt and what it streamed, so the next request is refused with the quota sentence (finding 1)", async () => {
    // 50 tokens at once, then one every 20 ms, without end.
    const forever = {
      raw: { body: [chunk("a").repeat(50), ...Array.from({ length: 3_000 }, () => chunk("a"))], partGapMs: 20 },
    };
    const { server, agent, conversations, close } = await cappedPipeline(
      (_request, index) => (index === 0 ? forever : { content: "ok" }),
      { GLASSBOX_USER_DAILY_TOKENS: "10", GLASSBOX_MODEL_TIMEOUT_MS: "400" },
    );
    try {
      const cut = await conversations.send({ input: "Tell me everything.", sessionId: "web:f", userId: "U1" });
      expect(cut).toMatchObject({ stopReason: "error", error: { code: "model_timeout" } });
      // The prompt as the guard counted it (without the reply priming requestTokens adds), and at least the first 50 tokens.
      const prompt = requestTokens(counter, server.requests[0]!) - 3;
      const ledger = agent.store.db.prepare("SELECT tokens FROM quota_days WHERE user_id = 'U1'").pluck().get();
      expect(ledger).toBeGreaterThanOrEqual(prompt + 50);
      const refused = await conversations.send({ input: "And now?", sessionId: "web:f", userId: "U1" });
      expect(refused).toMatchObject({ stopReason: "error", error: { code: "quota" } });
      expect(refused.output).toMatch(QUOTA_SENTENCE);
      expect(server.requests).toHaveLength(1);
    } finally {
      await close();
    }
  });

  it("regression: a reply whose server reports no usage counts by estimate, so the next request is refused with the quota sentence (finding 1)", async () => {
    const noUsage = {
      raw: {
        body: JSON.stringify({
          choices: [{ index: 0, message: { role: "assistant", content: "A full answer." }, finish_reason: "stop" }],
        }),
      },
    };
    const { server, agent, conversations, close } = await cappedPipeline(() => noUsage, {
      GLASSBOX_USER_DAILY_TOKENS: "10",
    });
    try {
      expect((await conversations.send({ input: "Hello", sessionId: "web:n", userId: "U1" })).stopReason).toBe("final");
      const prompt = requestTokens(counter, server.requests[0]!) - 3;
      const ledger = agent.store.db.prepare("SELECT tokens FROM quota_days WHERE user_id = 'U1'").pluck().get();
      expect(ledger).toBe(prompt + counter.text("A full answer."));
      const refused = await conversations.send({ input: "Again", sessionId: "web:n", userId: "U1" });
      expect(refused).toMatchObject({ stopReason: "error", error: { code: "quota" } });
      expect(refused.output).toMatch(QUOTA_SENTENCE);
      expect(server.requests).toHaveLength(1);
    } finally {
      await close();
    }
  });

  it("a streaming call that cannot grow its reservation beside the user's other call in flight is stopped with the quota sentence; the other answers", async () => {
    // The first request streams 40 chunks of 250 tokens; the second answers after a pause, holding its room meanwhile.
    const server = await startServer({
      script: (request) =>
        request.messages.some((message) => message.content === "long")
          ? { raw: { body: Array.from({ length: 40 }, () => chunk("x".repeat(2_000))), partGapMs: 20 } }
          : { content: "short answer", usage: { promptTokens: 20, completionTokens: 5 }, delayMs: 1_500 },
    });
    const store = sqlitePortOf(openTestStore());
    const guard = createSpendingGuard(store, { tokens: 4_000 });
    const model = withSpendingGuard(
      createOpenAIModel({ baseURL: server.url, model: "gpt-4o-mini", maxRetries: 0, warn: () => {} }),
      guard,
      counter,
    );
    const ask = (content: string) =>
      model.chat({ messages: [{ role: "user", content }], userId: "U1", onDelta: () => {} });
    const short = ask("short");
    await new Promise((resolve) => setTimeout(resolve, 100)); // the short call holds its room first
    const long = ask("long").then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(await long).toMatchObject({ code: "quota" });
    expect(((await long) as Error).message).toMatch(
      /^You have used your daily allowance of 4,000 tokens; it resets at 00:00 UTC, in \d+ h \d+ min\.$/,
    );
    expect((await short).content).toBe("short answer");
  });
});
