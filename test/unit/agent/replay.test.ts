// Replay: a run recorded by the real engine (demo shop, SQLite trace, scripted model) re-run from its
// recorded context against another "model" (another script): tools answered from the recording,
// never run; calls the recording does not have refused as not recorded; the two runs compared.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { runAgent } from "../../../src/agent/loop.js";
import { NOT_RECORDED, replayRun } from "../../../src/agent/replay.js";
import { createTraceReader } from "../../../src/store/sqlite-traces.js";
import { loadConfig } from "../../../src/config.js";
import { createLogger } from "../../../src/logger.js";
import { sqliteAgentConfig, type SqliteAgent } from "../../helpers/sqlite-agent.js";
import type { ChatCompletionRequestBody, ScriptedReply } from "../../../src/testing/scripted-model-server.js";
import { closeServers, modelFor, startServer } from "../../helpers/agent.js";
import { orderStatus } from "../../helpers/slack.js";

let agent: SqliteAgent | undefined;
afterEach(async () => {
  await agent?.close();
  agent = undefined;
  await closeServers();
});

const sawTool = (body: ChatCompletionRequestBody) => body.messages.some((message) => message.role === "tool");
const lastTool = (body: ChatCompletionRequestBody) =>
  String(body.messages.findLast((message) => message.role === "tool")?.content ?? "");

/** The recorded run: a lookup, then (denied by the gate) a cancellation, then an answer. */
async function record() {
  const directory = mkdtempSync(join(tmpdir(), "glassbox-replay-"));
  const shopDb = join(directory, "shop.db");
  const server = await startServer({
    script: (body) => {
      const tools = body.messages.filter((message) => message.role === "tool").length;
      if (tools === 0)
        return { toolCalls: [{ name: "get_order_status", arguments: '{"order_id":"20240410003"}', id: "call_a" }] };
      if (tools === 1)
        return {
          toolCalls: [
            { name: "cancel_order", arguments: '{"order_id":"20240410003","reason":"changed my mind"}', id: "call_b" },
          ],
        };
      return { content: "I could not cancel it: nobody approved." };
    },
  });
  const config = loadConfig({
    OPENAI_BASE_URL: server.url,
    LLM_MODEL: "gpt-4o-mini",
    GLASSBOX_DB: join(directory, "glassbox.db"),
    GLASSBOX_SHOP_DB: shopDb,
    GLASSBOX_DEMO: "true",
  });
  agent = await sqliteAgentConfig(config, createLogger({ level: "silent" }), {
    approve: async (request) => ({ approved: false, by: "U_BOSS", argumentsHash: request.argumentsHash }),
  });
  const result = await runAgent(agent, {
    input: "Cancel order 20240410003, I changed my mind.",
    sessionId: "cli:replay",
    userId: "U1",
  });
  expect(result.output).toBe("I could not cancel it: nobody approved.");
  return { agent, result, shopDb, recordedRequests: server.requests.map((request) => request.body) };
}

/** Another model: a scripted server of its own. */
async function otherModel(script: (body: ChatCompletionRequestBody) => ScriptedReply) {
  const server = await startServer({ script });
  return { server, model: modelFor(server, { model: "gpt-4o" }) };
}

describe("replay", () => {
  it("re-runs a recorded run from its exact context; each call is answered from the recording and no tool runs", async () => {
    const { agent, result, shopDb, recordedRequests } = await record();
    const other = await otherModel((body) => {
      const tools = body.messages.filter((message) => message.role === "tool").length;
      if (tools === 0) return { toolCalls: [{ name: "get_order_status", arguments: '{"order_id":"20240410003"}' }] };
      if (tools === 1)
        return {
          toolCalls: [{ name: "cancel_order", arguments: '{"reason":"changed my mind","order_id":"20240410003"}' }],
        };
      return { content: `Replayed: ${JSON.parse(lastTool(body)).error.message}` };
    });
    const comparison = await replayRun(createTraceReader(agent.store), result.runId, { model: other.model });

    // The first request is the recorded one: the same messages and tools.
    const sent = other.server.requests[0]?.body;
    expect(sent?.messages).toEqual(recordedRequests[0]?.messages);
    expect(sent?.tools).toEqual(recordedRequests[0]?.tools);
    // The lookup's result is the recorded one, exactly as the model first read it.
    expect(other.server.requests[1]?.body.messages.at(-1)?.content).toBe(recordedRequests[1]?.messages.at(-1)?.content);
    // The dangerous call was answered from the recording (denied), asked nobody, and changed nothing.
    expect(comparison.replay.output).toMatch(/^Replayed: .*denied|Replayed: /);
    expect(orderStatus(shopDb, "20240410003")).toBe("paid");
    expect(comparison).toMatchObject({ sameToolCalls: true, divergesAtCall: null, notRecorded: 0, sameAnswer: false });
    expect(comparison.original.toolCalls.map((call) => call.name)).toEqual(["get_order_status", "cancel_order"]);
    expect(comparison.replay.toolCalls.map((call) => call.name)).toEqual(["get_order_status", "cancel_order"]);
    expect(comparison.replay.steps).toBe(3);
  });

  it("refuses a call the recording does not have as not recorded, says where the runs diverge, and takes another system prompt", async () => {
    const { agent, result, shopDb } = await record();
    const other = await otherModel((body) =>
      sawTool(body)
        ? { content: "Stopped." }
        : { toolCalls: [{ name: "cancel_order", arguments: '{"order_id":"20240315001","reason":"test"}' }] },
    );
    const comparison = await replayRun(createTraceReader(agent.store), result.runId, {
      model: other.model,
      systemPrompt: "You are a careful clerk.",
    });

    expect(other.server.requests[0]?.body.messages[0]).toEqual({ role: "system", content: "You are a careful clerk." });
    const refused = JSON.parse(lastTool(other.server.requests[1]!.body)) as {
      status: string;
      error: { message: string };
    };
    expect(refused.status).toBe("error");
    expect(refused.error.message).toContain(NOT_RECORDED);
    expect(orderStatus(shopDb, "20240315001")).not.toBe("cancelled");
    expect(comparison).toMatchObject({ sameToolCalls: false, divergesAtCall: 1, notRecorded: 1 });
    expect(comparison.replay.toolCalls).toEqual([
      { name: "cancel_order", arguments: { order_id: "20240315001", reason: "test" }, recorded: false },
    ]);
  });

  it("says in one sentence when there is no such run", async () => {
    const { agent } = await record();
    const other = await otherModel(() => ({ content: "unused" }));
    await expect(replayRun(createTraceReader(agent.store), "run_nope", { model: other.model })).rejects.toThrow(
      "There is no run run_nope in the trace",
    );
  });
});
