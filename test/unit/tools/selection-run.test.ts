// Dynamic tool selection wired into the loop: with many tools, each request carries only the
// relevant ones plus list_tools, a tool once used stays, and list_tools brings in the ones asked for.
import { afterEach, expect, it } from "vitest";
import { runAgent } from "../../../src/agent/loop.js";
import { createToolRegistry } from "../../../src/tools/registry.js";
import { createToolSelector } from "../../../src/tools/selection.js";
import type { AnyTool } from "../../../src/tools/types.js";
import { closeServers, modelFor, startServer } from "../../helpers/agent.js";

afterEach(closeServers);

const topics = [
  "invoice",
  "shipment",
  "calendar",
  "email",
  "ticket",
  "weather",
  "deploy",
  "database",
  "payroll",
  "inventory",
  "translation",
  "dashboard",
];
const tools: AnyTool[] = topics.flatMap((topic) => [
  {
    name: `get_${topic}`,
    description: `Reads one ${topic} by its id.`,
    parameters: { type: "object", properties: { id: { type: "string" } } },
    handler: ({ id }: { id: string }) => ({ topic, id }),
  },
  {
    name: `list_${topic}s`,
    description: `Lists recent ${topic}s.`,
    parameters: { type: "object", properties: {} },
    handler: () => [],
  },
]);

it("sends only the relevant tools on each call, keeps the ones used, and adds the ones list_tools found", async () => {
  const selector = createToolSelector(createToolRegistry(tools), { threshold: 20, limit: 4 });
  expect(selector.active).toBe(true);
  const server = await startServer({
    script: [
      { toolCalls: [{ name: "get_weather", arguments: '{"id":"paris"}' }] },
      { toolCalls: [{ name: "list_tools", arguments: '{"query":"payroll"}' }] },
      { content: "done" },
    ],
  });
  const result = await runAgent(
    { model: modelFor(server, { maxRetries: 0 }), tools: selector.tools, selectTools: selector.selectForRun },
    { input: "What is the weather in Paris?" },
  );
  expect(result.stopReason).toBe("final");
  const sent = server.requests.map((request) =>
    (request.body.tools ?? []).map((tool) => (tool as { function: { name: string } }).function.name),
  );
  expect(sent[0]).toContain("get_weather");
  expect(sent[0]).toContain("list_tools");
  expect(sent[0]!.length).toBeLessThan(tools.length / 2);
  expect(sent[0]).not.toContain("get_payroll");
  expect(sent[1]).toContain("get_weather"); // used, so it stays
  expect(sent[2]).toEqual(expect.arrayContaining(["get_weather", "get_payroll"])); // found through list_tools
});
