// One run at a time per session, sessions side by side: a conversation on the pipeline (the
// in-process queue, the worker, runQueued) over the real loop, SQLite memory and the scripted model
// server, driven as the inbound handlers drive it. Ordering is proved by what each request contains
// and by promises the script waits on — never by timing.
import { afterEach, describe, expect, it } from "vitest";
import type { AgentConfig } from "../../../src/agent/loop.js";
import { createMemory } from "../../../src/agent/memory.js";
import { createTokenCounter } from "../../../src/agent/tokens.js";
import type { Script } from "../../../src/testing/scripted-model-server.js";
import { createToolRegistry } from "../../../src/tools/registry.js";
import { deferred, startServer, textOf } from "../../helpers/agent.js";
import { cleanUpAfterEach, expectValidProtocol, openTestStore, testModel } from "../../helpers/memory.js";
import { sqlitePortOf } from "../../../src/store/sqlite.js";
import type { SqliteStore } from "../../../src/store/sqlite-store.js";
import type { StorePort } from "../../../src/store/port.js";
import type { ToolDefinition } from "../../../src/tools/types.js";
import { startPipeline, type Pipeline, type PipelineOptions } from "../../helpers/pipeline.js";

const counter = await createTokenCounter("o200k_base");

describe("a conversation on the pipeline", () => {
  cleanUpAfterEach();
  const pipelines: Pipeline[] = [];
  afterEach(async () => {
    for (const pipeline of pipelines.splice(0)) await pipeline.close();
  });

  async function setUp(script: Script, tools: ToolDefinition[] = [], options: Partial<PipelineOptions> = {}) {
    const server = await startServer({ script });
    const store = openTestStore();
    const port = sqlitePortOf(store);
    const model = testModel(server);
    const agent: AgentConfig = {
      model,
      tools: createToolRegistry(tools),
      memory: createMemory({ store: port, model, counter, budgetTokens: 12_000 }),
    };
    const pipeline = await startPipeline({ agent, store: port, ...options });
    pipelines.push(pipeline);
    return { server, store, port, pipeline };
  }

  const rolesAndTexts = (messages: Array<{ role: string; content?: unknown }>) =>
    messages.map((message) => `${message.role}: ${textOf(message as never)}`);
  const statusOf = (store: SqliteStore, runId: string) =>
    store.db.prepare("SELECT status FROM runs WHERE id = ?").pluck().get(runId);

  it("answers two messages sent at once to one session one after the other, never interleaved", async () => {
    const { server, store, pipeline } = await setUp((_, index) => ({ content: `answer ${index + 1}` }));
    const [first, second] = await Promise.all([
      pipeline.send({ input: "question 1", sessionId: "slack:T1:C1:1.1", userId: "U1" }),
      pipeline.send({ input: "question 2", sessionId: "slack:T1:C1:1.1", userId: "U2" }),
    ]);
    expect([first.output, second.output]).toEqual(["answer 1", "answer 2"]);
    // The second run started after the first had answered: its first request holds that answer.
    expect(rolesAndTexts(server.requests[1]?.body.messages.slice(1) ?? [])).toEqual([
      "user: question 1",
      "assistant: answer 1",
      "user: question 2",
    ]);
    // The first run never saw the question that came after it.
    expect(rolesAndTexts(server.requests[0]?.body.messages.slice(1) ?? [])).toEqual(["user: question 1"]);
    // Each message stored once, the questions as they arrived (accepted means stored), the answers as written.
    const rows = store.db.prepare("SELECT role, content FROM messages ORDER BY id").all() as Array<{
      role: string;
      content: string;
    }>;
    expect(rows.map((row) => `${row.role}: ${row.content}`)).toEqual([
      "user: question 1",
      "user: question 2",
      "assistant: answer 1",
      "assistant: answer 2",
    ]);
    // A later run sees the conversation as it went: each question with its answer.
    await pipeline.send({ input: "question 3", sessionId: "slack:T1:C1:1.1", userId: "U1" });
    expect(rolesAndTexts(server.requests[2]?.body.messages.slice(1) ?? [])).toEqual([
      "user: question 1",
      "assistant: answer 1",
      "user: question 2",
      "assistant: answer 2",
      "user: question 3",
    ]);
  });

  it("runs different sessions concurrently", { timeout: 10_000 }, async () => {
    // The model answers nobody until two requests are in: with sessions run one at a time, it never would.
    const bothArrived = deferred();
    const { server, pipeline } = await setUp(async () => {
      if (server.requests.length >= 2) bothArrived.resolve();
      await bothArrived.promise;
      return { content: "together" };
    });
    const results = await Promise.all([
      pipeline.send({ input: "in channel one", sessionId: "slack:T1:C1:1.1", userId: "U1" }),
      pipeline.send({ input: "in channel two", sessionId: "slack:T1:C2:2.2", userId: "U1" }),
    ]);
    expect(results.map((result) => result.output)).toEqual(["together", "together"]);
    expect(server.requests.map((request) => textOf(request.body.messages.at(-1)))).toEqual(
      expect.arrayContaining(["in channel one", "in channel two"]),
    );
  });

  it("a stop cancels the running run; the message queued behind it still runs", async () => {
    const arrived = deferred();
    const { server, store, pipeline } = await setUp((_, index) => {
      if (index === 0) {
        arrived.resolve();
        return { hang: true };
      }
      return { content: "second answered" };
    });
    expect(await pipeline.stop("web:s")).toBe(false);
    const first = await pipeline.accept({ input: "a long question", sessionId: "web:s", userId: "U1" });
    const second = await pipeline.accept({ input: "another question", sessionId: "web:s", userId: "U1" });
    await arrived.promise;
    expect(statusOf(store, first.runId)).toBe("running");
    expect(statusOf(store, second.runId)).toBe("accepted");
    // The page's stop button: the run it shows.
    expect(await pipeline.stop("web:s", first.runId)).toBe(true);

    const cancelled = await first.result;
    expect(cancelled.stopReason).toBe("cancelled");
    expect(await second.result).toMatchObject({ stopReason: "final", output: "second answered" });
    expect(statusOf(store, cancelled.runId)).toBe("cancelled");
    const sent = server.requests[1]?.body.messages ?? [];
    expectValidProtocol(sent);
    expect(textOf(sent.at(-1))).toBe("another question");
    expect(await pipeline.stop("web:s")).toBe(false);
  });

  it("a stop and a reset: the running run stops and the next message starts afresh (the old messages kept)", async () => {
    const arrived = deferred();
    const { server, store, pipeline } = await setUp((_, index) => {
      if (index === 1) {
        arrived.resolve();
        return { hang: true };
      }
      return { content: `answer ${index + 1}` };
    });
    await pipeline.send({ input: "the code word is PELICAN", sessionId: "web:s", userId: "U1" });
    const running = await pipeline.accept({ input: "still there?", sessionId: "web:s", userId: "U1" });
    await arrived.promise;
    expect(await pipeline.stop("web:s")).toBe(true);
    expect(await pipeline.reset("web:s")).toBe(true);
    const fresh = await pipeline.send({ input: "what is the code word?", sessionId: "web:s", userId: "U1" });
    expect((await running.result).stopReason).toBe("cancelled");
    expect(fresh.stopReason).toBe("final");
    expect(server.requests.at(-1)?.body.messages.map((message) => message.role)).toEqual(["system", "user"]);
    expect(JSON.stringify(server.requests.at(-1)?.body.messages)).not.toContain("PELICAN");
    expect(store.db.prepare("SELECT count(*) FROM messages WHERE content LIKE '%PELICAN%'").pluck().get()).toBe(1);
  });

  it("a reset the store cannot write reaches its caller instead of an unhandled rejection", async () => {
    const { store, pipeline } = await setUp([]);
    store.close();
    await expect(pipeline.reset("web:s")).rejects.toThrow(/not open/);
  });

  it("a run that pauses opens its approval in the pause's own commit, before the surface is asked to show it", async () => {
    const wipe: ToolDefinition = {
      name: "wipe_cache",
      description: "Wipes the cache.",
      dangerous: true,
      parameters: { type: "object", properties: {} },
      handler: () => "wiped",
    };
    // What the store holds the moment the run's end is announced: its unit has committed, and nothing after it has run.
    let atEnd: Promise<unknown[]> | undefined;
    let port: StorePort | undefined;
    const { pipeline } = await setUp(
      () => ({ toolCalls: [{ id: "call_wipe", name: "wipe_cache", arguments: "{}" }] }),
      [wipe],
      {
        settings: { approvalTtlSeconds: 600 },
        approvalRef: () => "C1:9.9",
        onEvent: (event) => {
          if (event.type === "run_end") atEnd = port?.approvalsOfRun(event.runId);
        },
      },
    );
    port = pipeline.store;
    const result = await pipeline.send({ input: "clean the cache", sessionId: "slack:T1:C1:5.5", userId: "U1" });
    expect(result.stopReason).toBe("awaiting_approval");
    // A crash right after the pause's commit would leave an approval someone can still click (it was none).
    expect(await atEnd).toEqual([
      expect.objectContaining({ runId: result.runId, toolCallId: "call_wipe", status: "pending", messageRef: null }),
    ]);
    const [approval] = await port.approvalsOfRun(result.runId);
    expect(approval).toMatchObject({ messageRef: "C1:9.9", status: "pending" });
    // Pending for the conversation's approval time (600 s here, not the default 3,600 s).
    const left = Date.parse(approval?.expiresAt ?? "") - Date.now();
    expect(left).toBeGreaterThan(500_000);
    expect(left).toBeLessThanOrEqual(600_000);
  });

  it("a run that fails does not block the session", async () => {
    const { pipeline } = await setUp((_, index) =>
      index === 0 ? { error: { status: 500, message: "model is down" } } : { content: "back again" },
    );
    const [failed, next] = await Promise.all([
      pipeline.send({ input: "first", sessionId: "web:s", userId: "U1" }),
      pipeline.send({ input: "second", sessionId: "web:s", userId: "U1" }),
    ]);
    expect(failed.stopReason).toBe("error");
    expect(next).toMatchObject({ stopReason: "final", output: "back again" });
  });
});
