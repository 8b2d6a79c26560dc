import { PassThrough } from "node:stream";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startTerminalChat } from "../../../../src/adapters/terminal.js";
import { createOpenAIModel } from "../../../../src/agent/llm/index.js";
import { startScriptedModelServer, type ScriptedModelServer } from "../../../../src/testing/scripted-model-server.js";
import { createToolRegistry } from "../../../../src/tools/registry.js";

// The terminal chat that `npm start` opens, fed through streams, on the real loop and SDK.
let server: ScriptedModelServer;
beforeAll(async () => {
  server = await startScriptedModelServer();
});
afterAll(async () => {
  await server.close();
});

async function chat(lines: string[], tools = createToolRegistry([])): Promise<string> {
  const input = new PassThrough();
  const output = new PassThrough();
  let printed = "";
  output.on("data", (chunk: Buffer) => (printed += chunk.toString()));
  const model = createOpenAIModel({ baseURL: server.url, model: "scripted-model", maxRetries: 0 });
  input.end(lines.map((line) => `${line}\n`).join(""));
  await startTerminalChat({ model, tools }, { input, output, sessionId: "cli:test" });
  return printed;
}

it("keeps the conversation across turns until /reset", async () => {
  server.setScript((request) => ({
    content: `seen ${request.messages.filter((message) => message.role === "user").length}`,
  }));
  const printed = await chat(["hello", "again", "/reset", "fresh", "/exit", "never read"]);
  expect(printed).toContain("seen 1");
  expect(printed).toContain("seen 2");
  expect(printed).toContain("(new conversation)");
  expect(server.requests).toHaveLength(3);
  expect(server.requests.at(-1)?.body.messages.filter((message) => message.role === "user")).toHaveLength(1);
});

it("asks before a dangerous tool and reads the answer from the next line", async () => {
  let ran = 0;
  const tools = createToolRegistry([
    {
      name: "delete_file",
      description: "Deletes a file.",
      dangerous: true,
      parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
      handler: () => ({ deleted: ++ran }),
    },
  ]);
  server.setScript([
    { toolCalls: [{ name: "delete_file", arguments: '{"path":"a.txt"}' }] },
    { content: "deleted a.txt" },
    { toolCalls: [{ name: "delete_file", arguments: '{"path":"b.txt"}' }] },
    { content: "kept b.txt" },
  ]);
  const printed = await chat(["delete a", "y", "delete b", "n"], tools);
  expect(printed).toContain("Allow delete_file(path: a.txt)? [y/N]");
  expect(printed).toContain("Allow delete_file(path: b.txt)? [y/N]");
  expect(ran).toBe(1);
  const lastTool = server.requests.at(-1)?.body.messages.findLast((message) => message.role === "tool");
  expect(JSON.parse(String(lastTool?.content))).toMatchObject({ status: "error", error: { type: "denied" } });
});
