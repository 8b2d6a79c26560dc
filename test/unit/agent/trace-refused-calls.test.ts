// Regression: calls refused before they ran (an unknown tool, invalid arguments, a person's denial)
// and calls sharing an identical call's result were missing from the trace, which recorded only
// calls that ran. Every call the model made is a row of its step, with its envelope.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { runAgent } from "../../../src/agent/loop.js";
import { createTraceReader } from "../../../src/store/sqlite-traces.js";
import { loadConfig } from "../../../src/config.js";
import { createLogger } from "../../../src/logger.js";
import { sqliteAgentConfig, type SqliteAgent } from "../../helpers/sqlite-agent.js";
import { closeServers, startServer } from "../../helpers/agent.js";

let agent: SqliteAgent | undefined;
afterEach(async () => {
  await agent?.close();
  agent = undefined;
  await closeServers();
});

it("records every call of a step, the refused and the shared ones too, in the order the model sent them", async () => {
  const directory = mkdtempSync(join(tmpdir(), "glassbox-refused-"));
  const server = await startServer({
    script: (body) =>
      body.messages.some((message) => message.role === "tool")
        ? { content: "Done." }
        : {
            toolCalls: [
              { name: "get_order_status", arguments: '{"order_id":"20240315001"}', id: "call_ok" },
              { name: "get_order_status", arguments: '{"order_id":"20240315001"}', id: "call_same" },
              { name: "refund_everything", arguments: "{}", id: "call_unknown" },
              { name: "get_order_status", arguments: '{"order":1}', id: "call_invalid" },
              { name: "cancel_order", arguments: '{"order_id":"20240410003","reason":"test"}', id: "call_denied" },
            ],
          },
  });
  const config = loadConfig({
    OPENAI_BASE_URL: server.url,
    LLM_MODEL: "gpt-4o-mini",
    GLASSBOX_DB: join(directory, "glassbox.db"),
    GLASSBOX_SHOP_DB: join(directory, "shop.db"),
    GLASSBOX_DEMO: "true",
  });
  agent = await sqliteAgentConfig(config, createLogger({ level: "silent" }), {
    approve: async (request) => ({ approved: false, by: "U_BOSS", argumentsHash: request.argumentsHash }),
  });
  const result = await runAgent(agent, {
    input: "Look it up and cancel the other.",
    sessionId: "cli:refused",
    userId: "U1",
  });
  expect(result.output).toBe("Done.");

  const [step] = createTraceReader(agent.store).steps(result.runId);
  const rows = step?.toolCalls.map((call) => [
    call.id,
    call.envelope.status === "error" ? call.envelope.error.type : "success",
  ]);
  expect(rows).toEqual([
    ["call_ok", "success"],
    ["call_same", "success"],
    ["call_unknown", "tool_not_found"],
    ["call_invalid", "invalid_arguments"],
    ["call_denied", "denied"],
  ]);
});
