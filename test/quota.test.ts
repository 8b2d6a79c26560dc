// Daily caps per user, through Conversations over the real loop, SQLite memory, traces and the
// scripted model: a user over a cap gets one sentence and no model call; others are unaffected.
import { describe, expect, it } from "vitest";
import { createConversations } from "../src/agent/conversations.js";
import type { AgentConfig } from "../src/agent/loop.js";
import { createSqliteMemory } from "../src/agent/memory.js";
import { quotaProblem } from "../src/agent/quota.js";
import { createTokenCounter } from "../src/agent/tokens.js";
import { createTraceReader, createTraceRecorder } from "../src/agent/trace.js";
import { createToolRegistry } from "../src/tools/registry.js";
import { startServer } from "./agent-helpers.js";
import { cleanUpAfterEach, openTestStore, testModel } from "./memory-helpers.js";

const counter = await createTokenCounter("o200k_base");

describe("daily caps per user", () => {
  cleanUpAfterEach();

  async function setUp(dailyLimits: { tokens?: number; cost?: number }) {
    const server = await startServer({ script: () => ({ content: "ok", usage: { promptTokens: 400_000, completionTokens: 100_000 } }) });
    const store = openTestStore();
    const model = testModel(server);
    const agent: AgentConfig = {
      model,
      tools: createToolRegistry([]),
      memory: createSqliteMemory({ store, model, counter, budgetTokens: 12_000 }),
      trace: createTraceRecorder(store),
    };
    return { server, store, conversations: createConversations(agent, store, { dailyLimits }) };
  }

  it("refuses a user over the token cap with one sentence, before any model call", async () => {
    const { server, conversations } = await setUp({ tokens: 300_000 });
    expect((await conversations.send({ input: "first", sessionId: "web:a", userId: "U1" })).stopReason).toBe("final");
    const refused = await conversations.send({ input: "second", sessionId: "web:a", userId: "U1" });
    expect(refused).toMatchObject({ stopReason: "error", steps: 0, error: { code: "quota" } });
    expect(refused.output).toMatch(/^You have used your daily allowance of 300,000 tokens; it resets at 00:00 UTC, in \d+ h \d+ min\.$/);
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
    expect(quotaProblem(createTraceReader(store), "U1", { tokens: 300_000 })).toBeUndefined();
    const tomorrow = new Date(Date.now() + 86_400_000);
    expect(quotaProblem(createTraceReader(store), "U1", { tokens: 1 }, tomorrow)).toBeUndefined();
  });
});
