// A tool's huge result, end to end: the model reads its cut view, and what the store keeps and a
// page hears (the tool_end record) is bounded too, with the original size in a marker. Real runAgent
// with memory and the trace on the store port (SQLite always, PostgreSQL when
// GLASSBOX_TEST_DATABASE_URL is set), the real openai SDK against the scripted model server.
import { afterEach, describe, expect, it } from "vitest";
import type { AgentEvent } from "../../../src/agent/events.js";
import { runAgent } from "../../../src/agent/loop.js";
import { createMemory } from "../../../src/agent/memory.js";
import { createTokenCounter } from "../../../src/agent/tokens.js";
import { createTraceRecorder } from "../../../src/agent/trace.js";
import { openStorePort } from "../../../src/store/index.js";
import { STORED_RESULT_CHARS } from "../../../src/tools/call-outcome.js";
import { createToolRegistry } from "../../../src/tools/registry.js";
import type { ToolCallRecord } from "../../../src/tools/types.js";
import { call, closeServers, startServer, textOf } from "../../helpers/agent.js";
import { testModel } from "../../helpers/memory.js";
import { TARGETS } from "../helpers/store-targets.js";

const counter = await createTokenCounter("o200k_base");
const HUGE = 5_000_000;

afterEach(closeServers);

for (const target of TARGETS) {
  describe(`tool results kept bounded: ${target.name}`, () => {
    it("stored and streamed tool results are unbounded: a 5,000,000-character result is kept as 64 KB with its size", async () => {
      const server = await startServer({
        script: (body) => {
          const last = body.messages.at(-1);
          if (last?.role === "tool") return { content: `read ${textOf(last).length} characters` };
          return { toolCalls: [call("dump", {}, "call_dump"), call("rows", {}, "call_rows")] };
        },
      });
      const database = await target.fresh();
      const port = await openStorePort(database.options);
      try {
        const model = testModel(server);
        const memory = createMemory({ store: port, model, counter, budgetTokens: 4_000 });
        const tools = createToolRegistry([
          {
            name: "dump",
            description: "Returns a huge text.",
            parameters: { type: "object", properties: {} },
            handler: () => "x".repeat(HUGE),
          },
          {
            name: "rows",
            description: "Returns many rows.",
            parameters: { type: "object", properties: {} },
            handler: () => Array.from({ length: 100_000 }, (_, index) => ({ id: index, name: `row ${index}` })),
          },
        ]);
        const heard: ToolCallRecord[] = [];
        const onEvent = (event: AgentEvent) => {
          if (event.type === "tool_end") heard.push(event.record);
        };
        const trace = createTraceRecorder(port, { estimateTokens: memory.estimate });
        const result = await runAgent(
          { model, tools, memory, trace },
          { input: "dump it", runId: "run_huge", sessionId: "web:huge", userId: "U1", onEvent },
        );
        expect(result.stopReason).toBe("final");

        const [step] = await port.steps("run_huge");
        const stored = step?.toolCalls ?? [];
        expect(stored.map((record) => record.id).sort()).toEqual(["call_dump", "call_rows"]);
        for (const record of [...stored, ...heard]) {
          expect(JSON.stringify(record.envelope).length).toBeLessThanOrEqual(STORED_RESULT_CHARS);
          expect(record.storedCutChars).toBeGreaterThan(0);
          expect(record.content.length).toBeLessThanOrEqual(4_000); // the model's view
        }
        const dump = stored.find((record) => record.id === "call_dump");
        expect(dump?.envelope).toMatchObject({
          status: "success",
          data: expect.stringMatching(new RegExp(`…\\[cut \\d+ of ${HUGE} characters\\]$`)),
        });
        expect(dump?.storedCutChars).toBeGreaterThan(HUGE - STORED_RESULT_CHARS);
        // The tool message in the history is the model's view, not the result.
        const history = await port.sessionHistory("web:huge");
        const longest = Math.max(...history.messages.map((stored) => JSON.stringify(stored.message).length));
        expect(longest).toBeLessThan(10_000);
      } finally {
        await port.close();
        await database.drop();
      }
    });
  });
}
