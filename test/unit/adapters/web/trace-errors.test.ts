// Errors for people, in the trace API over the real server, agent, model layer and SQLite: a tool
// handler that throws keeps its stack (file and line) in the trace while the model reads only its
// error envelope; a repair of the model layer (a tool call written as text) and a refusal (a server
// that refuses stream_options) keep what was sent and what came back.
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { StepTrace } from "../../../../src/agent/trace.js";
import type { ChatCompletionRequestBody, ScriptedReply } from "../../../../src/testing/scripted-model-server.js";
import { cleanUp, getJson, postJson, startPlayground, WAIT, type Playground } from "../../../helpers/web.js";

const TOOLS = fileURLToPath(new URL("../../../../examples/tools.mjs", import.meta.url));
const TEXT_CALL = '<tool_call>\n{"name": "check_stock", "arguments": {"fruit": "plum"}}\n</tool_call>';
const REFUSAL = {
  error: {
    message: "Unknown parameter: 'stream_options'.",
    type: "invalid_request_error",
    param: "stream_options",
    code: "unknown_parameter",
  },
};

const lastUserText = (request: ChatCompletionRequestBody) =>
  String(request.messages.findLast((message) => message.role === "user")?.content ?? "");

function script(request: ChatCompletionRequestBody): ScriptedReply {
  const asked = lastUserText(request);
  const answered = request.messages.at(-1)?.role === "tool";
  if (asked.includes("kiwi"))
    return answered
      ? { content: "I could not check kiwis." }
      : { toolCalls: [{ name: "check_stock", arguments: '{"fruit":"kiwi"}' }] };
  if (asked.includes("plums")) return answered ? { content: "There are 7 plums." } : { content: TEXT_CALL };
  if (asked.includes("pears")) {
    if (request.stream_options) return { raw: { status: 400, body: JSON.stringify(REFUSAL) } };
    return { content: "No pears." };
  }
  return { content: "?" };
}

describe("errors for people in the trace API", () => {
  let playground: Playground;
  let api: string;
  let sessions = 0;
  const run = async (input: string) => {
    const session = `errors-${++sessions}`;
    const { status, body } = await postJson(`${api}/runs`, { session, input, userId: "alice" });
    expect(status, JSON.stringify(body)).toBe(202);
    const runId = body.runId as string;
    await expect
      .poll(async () => (await getJson<{ done: boolean }>(`${api}/runs/${runId}`)).body.done, WAIT)
      .toBe(true);
    return (await getJson<{ steps: StepTrace[] }>(`${api}/runs/${runId}/steps`)).body.steps;
  };

  beforeAll(async () => {
    playground = await startPlayground({ script, env: { GLASSBOX_TOOLS: TOOLS } });
    api = `${playground.url}api`;
  });
  afterAll(cleanUp);

  it("a tool that throws: the trace has its stack (file and line), the model its envelope alone", async () => {
    const steps = await run("how many kiwi do we have?");
    const call = steps[0]?.toolCalls[0];
    expect(call?.envelope).toEqual({
      status: "error",
      error: { type: "execution_error", message: "Unknown fruit 'kiwi'; known: apple, pear, plum" },
    });
    // The frame of the handler that threw, in examples/tools.mjs, with its line and column.
    expect(call?.errorStack?.split("\n")[0]).toMatch(/examples\/tools\.mjs:\d+:\d+\)?$/);
    const toolMessage = playground.model.requests.at(-1)?.body.messages.find((message) => message.role === "tool");
    expect(JSON.parse(String(toolMessage?.content))).toEqual(call?.envelope);
    expect(String(toolMessage?.content)).not.toMatch(/tools\.mjs|\bat /);
  });

  it("a tool call written as text: the trace shows the text that came back and the call it was read as", async () => {
    const steps = await run("how many plums are there?");
    const [first] = steps;
    expect(first?.toolCalls[0]?.envelope).toEqual({ status: "success", data: { fruit: "plum", units: 7 } });
    const note = first?.modelNotes.find((text) => text.startsWith("recovered 1 tool call (check_stock)"));
    expect(note).toBeDefined();
    expect(first?.modelExchanges).toEqual([
      { note, received: TEXT_CALL, readAs: '[{"name":"check_stock","arguments":"{\\"fruit\\":\\"plum\\"}"}]' },
    ]);
  });

  it("an option the server refused: the trace shows the option as sent and the server's refusal", async () => {
    const steps = await run("any pears?");
    const refused = playground.model.requests.filter((request) => lastUserText(request.body) === "any pears?");
    expect(refused.map((request) => request.body.stream_options ?? null)).toEqual([{ include_usage: true }, null]);
    const [step] = steps;
    expect(step?.content).toBe("No pears.");
    expect(step?.modelExchanges).toEqual([
      {
        note: expect.stringMatching(/^stream_options left out: the server refuses it/),
        sent: '{"stream_options":{"include_usage":true}}',
        received: expect.stringContaining("Unknown parameter: 'stream_options'."),
      },
    ]);
    expect(step?.modelNotes).toContain(step?.modelExchanges?.[0]?.note);
  });
});
