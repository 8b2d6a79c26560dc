// The model client end to end: the real openai SDK against the scripted server — streaming and
// tool-call assembly, retries, the one-sentence failures, and the text protocol with its fallback.
import { afterEach, describe, expect, it } from "vitest";
import { GlassboxError } from "../../../../src/agent/errors.js";
import { runAgent } from "../../../../src/agent/loop.js";
import { REEMIT_REQUEST } from "../../../../src/agent/llm/index.js";
import type { ScriptedReply } from "../../../../src/testing/scripted-model-server.js";
import { calculator } from "../../../../src/tools/builtin/calculator.js";
import { createToolRegistry } from "../../../../src/tools/registry.js";
import type { ToolSpec } from "../../../../src/tools/types.js";
import {
  call,
  closeServers,
  modelFor,
  recordEvents,
  recordingTool,
  sentMessages,
  startServer,
  textOf,
} from "../../../helpers/agent.js";

afterEach(closeServers);

const tools = () => createToolRegistry([calculator]);
const calculatorSpec: ToolSpec[] = tools().specs();
const question = [{ role: "user" as const, content: "What is 2+2?" }];
/** Retry-After in milliseconds keeps the SDK's waits short. */
const quickRetry = { "retry-after-ms": "10" };
// The process remembers a server and model that refused the tools parameter (llm/capabilities.ts);
// a model name of their own keeps that from reaching another test's server on a reused port.
const REFUSES_TOOLS = "refuses-tools";
const failure = (status: number, message = "failure"): ScriptedReply => ({
  error: { status, message },
  headers: quickRetry,
});

describe("model client: one request", () => {
  it("streams answer text as deltas and assembles streamed tool calls", async () => {
    const server = await startServer({
      script: [
        {
          content: "Let me compute both of those for you.",
          toolCalls: [
            call("calculator", { expression: "2+2" }, "call_a"),
            call("calculator", { expression: "(12.5 * 3) / 4" }, "call_b"),
          ],
          usage: { promptTokens: 21, completionTokens: 13 },
        },
      ],
    });
    const deltas: string[] = [];
    const response = await modelFor(server).chat({
      messages: question,
      tools: calculatorSpec,
      onDelta: (text) => deltas.push(text),
    });

    expect(server.requests[0]?.stream).toBe(true);
    expect(server.requests[0]?.body.stream_options).toEqual({ include_usage: true });
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join("")).toBe("Let me compute both of those for you.");
    expect(response).toEqual({
      content: "Let me compute both of those for you.",
      toolCalls: [
        { id: "call_a", type: "function", function: { name: "calculator", arguments: '{"expression":"2+2"}' } },
        {
          id: "call_b",
          type: "function",
          function: { name: "calculator", arguments: '{"expression":"(12.5 * 3) / 4"}' },
        },
      ],
      finishReason: "tool_calls",
      usage: { promptTokens: 21, completionTokens: 13, totalTokens: 34 },
      model: "scripted-model",
      streamed: true,
    });
  });

  it("returns the same shape without streaming", async () => {
    const server = await startServer({
      script: [
        {
          toolCalls: [call("calculator", { expression: "2+2" }, "call_a")],
          usage: { promptTokens: 5, completionTokens: 4 },
        },
      ],
    });
    const deltas: string[] = [];
    const response = await modelFor(server, { stream: false }).chat({
      messages: question,
      tools: calculatorSpec,
      onDelta: (text) => deltas.push(text),
    });

    expect(server.requests[0]?.stream).toBe(false);
    expect(server.requests[0]?.body.tool_choice).toBeUndefined(); // "auto" is the default wherever tools are given
    expect(deltas).toEqual([]);
    expect(response).toEqual({
      content: null,
      toolCalls: [
        { id: "call_a", type: "function", function: { name: "calculator", arguments: '{"expression":"2+2"}' } },
      ],
      finishReason: "tool_calls",
      usage: { promptTokens: 5, completionTokens: 4, totalTokens: 9 },
      model: "scripted-model",
      streamed: false,
    });
  });

  // Regression: the SDK ends an aborted stream without an error, so a cut-off answer came back as a reply.
  it("rejects as cancelled when the signal is aborted mid-stream, instead of returning a cut-off answer", async () => {
    const server = await startServer({ script: [{ content: "one two three four five six seven eight nine ten" }] });
    const controller = new AbortController();
    const outcome = await modelFor(server)
      .chat({ messages: question, signal: controller.signal, onDelta: () => controller.abort() })
      .catch((error: unknown) => error);
    expect(outcome).toBeInstanceOf(GlassboxError);
    expect((outcome as GlassboxError).code).toBe("cancelled");
  });
});

describe("model client: retries and failures people see", () => {
  it("retries a 429, honouring retry-after-ms, then answers", async () => {
    const server = await startServer({
      script: [{ error: { status: 429, message: "Rate limit reached" }, headers: quickRetry }, { content: "4" }],
    });
    const result = await runAgent({ model: modelFor(server), tools: tools() }, { input: "2+2?" });
    expect(result).toMatchObject({ stopReason: "final", output: "4", steps: 1 });
    expect(server.requests).toHaveLength(2);
  });

  it.each([
    { mode: "streaming", stream: true },
    { mode: "non-streaming", stream: false },
  ])("retries a 500 twice, then answers ($mode)", async ({ stream }) => {
    const server = await startServer({ script: [failure(500), failure(500), { content: "4" }] });
    const result = await runAgent({ model: modelFor(server, { stream }), tools: tools() }, { input: "2+2?" });
    expect(result).toMatchObject({ stopReason: "final", output: "4" });
    expect(server.requests).toHaveLength(3);
  });

  it("retries a dropped connection", async () => {
    const server = await startServer({ script: [{ dropConnection: true }, { content: "4" }] });
    const result = await runAgent({ model: modelFor(server, { maxRetries: 1 }), tools: tools() }, { input: "2+2?" });
    expect(result).toMatchObject({ stopReason: "final", output: "4" });
    expect(server.requests).toHaveLength(2);
  });

  it.each([
    { mode: "streaming", stream: true },
    { mode: "non-streaming", stream: false },
  ])("gives up on a 503 after a bounded number of tries with one friendly sentence ($mode)", async ({ stream }) => {
    const server = await startServer({ script: Array.from({ length: 8 }, () => failure(503, "overloaded")) });
    const { events, onEvent } = recordEvents();
    const result = await runAgent({ model: modelFor(server, { stream }), tools: tools() }, { input: "2+2?", onEvent });

    expect(server.requests).toHaveLength(4); // default maxRetries 3: four tries
    expect(result.stopReason).toBe("error");
    expect(result.output).toBe(
      "I can't reach the model right now (HTTP 503: overloaded); please try again in a minute.",
    ); // the server's own reason kept
    expect(result.error).toEqual({ code: "model_unavailable", message: result.output });
    expect(events.at(-1)?.type).toBe("run_end");
  });

  it("bounds the tries by maxRetries", async () => {
    const server = await startServer({ script: Array.from({ length: 8 }, () => failure(429, "slow down")) });
    const result = await runAgent({ model: modelFor(server, { maxRetries: 1 }), tools: tools() }, { input: "2+2?" });
    expect(server.requests).toHaveLength(2);
    expect(result.stopReason).toBe("error");
    expect(result.error?.code).toBe("model_rate_limited");
    expect(result.output).toContain("HTTP 429");
  });

  // Regression: the SDK sleeps through Retry-After without watching the signal, so a cancel waited it out.
  it("is cancelled during a long Retry-After wait without sitting it out", async () => {
    // 59 s is under the SDK's one-minute cap, so it would wait that long; the test timeout is 30 s.
    const server = await startServer({
      script: [
        { error: { status: 429, message: "slow down" }, headers: { "retry-after-ms": "59000" } },
        { content: "late" },
      ],
    });
    const controller = new AbortController();
    const running = runAgent({ model: modelFor(server), tools: tools() }, { input: "hi", signal: controller.signal });
    await expect.poll(() => server.requests.length).toBe(1);
    controller.abort();
    const result = await running;
    expect(result.stopReason).toBe("cancelled");
    expect(server.requests).toHaveLength(1);
  });

  it("names OPENAI_BASE_URL when nothing listens at the base URL", async () => {
    const closed = await startServer();
    const baseURL = closed.url;
    await closeServers(); // the port is free now: connections are refused
    const model = modelFor(closed, { baseURL, maxRetries: 0 });
    const result = await runAgent({ model, tools: tools() }, { input: "hi" });
    expect(result.stopReason).toBe("error");
    expect(result.error?.code).toBe("model_unreachable");
    expect(result.output).toContain("OPENAI_BASE_URL");
    expect(result.output).toContain(baseURL);
  });

  it("names OPENAI_API_KEY on a 401, without retrying", async () => {
    const server = await startServer({ apiKey: "the-right-key", script: [{ content: "never" }] });
    const result = await runAgent(
      { model: modelFor(server, { apiKey: "a-wrong-key" }), tools: tools() },
      { input: "hi" },
    );
    expect(server.requests).toHaveLength(1);
    expect(result.stopReason).toBe("error");
    expect(result.error?.code).toBe("model_auth");
    expect(result.output).toContain("OPENAI_API_KEY");
    expect(result.output).not.toContain("a-wrong-key");
  });

  it("names LLM_MODEL for a model the server does not offer, without retrying", async () => {
    const server = await startServer({ models: ["llama-3.1-8b"], script: [{ content: "never" }] });
    const result = await runAgent({ model: modelFor(server), tools: tools() }, { input: "hi" });
    expect(server.requests).toHaveLength(1);
    expect(result.stopReason).toBe("error");
    expect(result.error?.code).toBe("model_not_found");
    expect(result.output).toContain("LLM_MODEL");
    expect(result.output).toContain("scripted-model");
  });

  it("names OPENAI_BASE_URL, not LLM_MODEL, for a 404 from a wrong address", async () => {
    const server = await startServer({ script: [{ content: "never" }] });
    const baseURL = server.url.replace(/\/v1$/, ""); // the classic mistake: the /v1 left off
    const result = await runAgent({ model: modelFor(server, { baseURL }), tools: tools() }, { input: "hi" });
    expect(result.stopReason).toBe("error");
    expect(result.output).toContain("OPENAI_BASE_URL");
    expect(result.output).not.toContain("LLM_MODEL");
  });

  it("ends a request that takes too long with a timeout sentence", async () => {
    const server = await startServer({ script: [{ hang: true }] });
    const result = await runAgent(
      { model: modelFor(server, { timeoutMs: 100, maxRetries: 0 }), tools: tools() },
      { input: "hi" },
    );
    expect(result.stopReason).toBe("error");
    expect(result.error?.code).toBe("model_timeout");
  });
});

describe("model client: text protocol", () => {
  const toolCallText = 'Sure! ```json\n{"tool_calls":[{"name":"calculator","arguments":{"expression":"2+2"}}]}\n```';

  it("describes the tools in the prompt, runs the tool from the model's text and reads the answer", async () => {
    const server = await startServer({ script: [{ content: toolCallText }, { content: '{"answer":"4"}' }] });
    const { events, onEvent } = recordEvents();
    const result = await runAgent(
      { model: modelFor(server, { toolMode: "text" }), tools: tools() },
      { input: "What is 2+2?", onEvent },
    );

    expect(result).toMatchObject({ stopReason: "final", output: "4", steps: 2 });
    expect(result.toolCalls).toEqual([{ name: "calculator", arguments: { expression: "2+2" }, status: "success" }]);
    for (const request of server.requests) {
      expect(request.body.tools).toBeUndefined();
      expect(request.body.tool_choice).toBeUndefined();
    }
    const system = textOf(sentMessages(server, 0)[0]);
    expect(system).toContain("- calculator: Evaluates an arithmetic expression");
    expect(system).toContain('{"tool_calls"');

    const second = sentMessages(server, 1);
    expect(second.map((message) => message.role)).toEqual(["system", "user", "assistant", "user"]);
    expect(JSON.parse(textOf(second[2]))).toEqual({
      tool_calls: [{ name: "calculator", arguments: { expression: "2+2" } }],
    });
    expect(textOf(second[3])).toMatch(/^Result of tool call \S+: /);
    expect(textOf(second[3])).toContain('{"status":"success","data":{"expression":"2+2","result":4}}');
    // The answer reaches listeners as text, not as the JSON the model wrapped it in.
    const deltas = events.flatMap((event) => (event.type === "model_delta" ? [event.text] : []));
    expect(deltas.join("")).toBe("4");
  });

  it("repairs a decision with chatter, single quotes and a missing bracket", async () => {
    const server = await startServer({
      script: [
        {
          content:
            "I'll use the calculator.\n{'tool_calls': [{'name': 'calculator', 'arguments': {'expression': '3*3'}}",
        },
        { content: 'Nine. {"answer": "9"}' },
      ],
    });
    const result = await runAgent({ model: modelFor(server, { toolMode: "text" }), tools: tools() }, { input: "3*3?" });
    expect(server.requests).toHaveLength(2); // no re-emit was needed
    expect(result.toolCalls).toEqual([{ name: "calculator", arguments: { expression: "3*3" }, status: "success" }]);
    expect(result).toMatchObject({ stopReason: "final", output: "9" });
  });

  it("asks once to re-emit valid JSON, and uses the second reply", async () => {
    const server = await startServer({
      script: [
        { content: "{ tool_calls: calculator(2+2) }", usage: { promptTokens: 100, completionTokens: 10 } },
        { content: toolCallText, usage: { promptTokens: 120, completionTokens: 20 } },
        { content: '{"answer": "2 + 2 = 4"}', usage: { promptTokens: 150, completionTokens: 8 } },
      ],
    });
    const result = await runAgent(
      { model: modelFor(server, { toolMode: "text" }), tools: tools() },
      { input: "What is 2+2?" },
    );

    expect(result).toMatchObject({ stopReason: "final", output: "2 + 2 = 4", steps: 2 });
    expect(server.requests).toHaveLength(3);
    const reemit = sentMessages(server, 1);
    expect(reemit.at(-2)).toMatchObject({ role: "assistant", content: "{ tool_calls: calculator(2+2) }" });
    expect(reemit.at(-1)).toMatchObject({ role: "user", content: REEMIT_REQUEST });
    expect(result.toolCalls).toEqual([{ name: "calculator", arguments: { expression: "2+2" }, status: "success" }]);
    expect(result.usage).toEqual({ promptTokens: 370, completionTokens: 38, totalTokens: 408 });
  });

  // Regression: the conversation teaches the model to answer in JSON, so the stage conclusion came back wrapped.
  it("unwraps a JSON answer in the stage conclusion at the step limit", async () => {
    const server = await startServer({
      script: [{ content: toolCallText }, { content: '{"answer": "So far: 2+2 is 4."}' }],
    });
    const result = await runAgent(
      { model: modelFor(server, { toolMode: "text" }), tools: tools(), maxSteps: 1 },
      { input: "What is 2+2?" },
    );
    expect(result).toMatchObject({ stopReason: "max_steps", output: "So far: 2+2 is 4." });
    const conclusionPrompt = textOf(sentMessages(server, 1)[0]);
    expect(conclusionPrompt).not.toContain("You can use these tools");
    expect(conclusionPrompt).toContain('{"answer"');
  });

  it("falls back to the text protocol when the server rejects tools, and stays there", async () => {
    const server = await startServer({
      rejectTools: true,
      script: [{ content: toolCallText }, { content: '{"answer":"4"}' }, { content: "Hello again." }],
    });
    const warnings: string[] = [];
    const model = modelFor(server, { warn: (message) => warnings.push(message) });
    expect(model.toolMode).toBe("auto");
    const result = await runAgent({ model, tools: tools() }, { input: "What is 2+2?" });

    expect(result).toMatchObject({ stopReason: "final", output: "4" });
    expect(result.toolCalls).toEqual([{ name: "calculator", arguments: { expression: "2+2" }, status: "success" }]);
    expect(model.toolMode).toBe("text");
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain("text protocol");
    // Only the first request carried tools; the rejected one consumed no script entry.
    expect(server.requests.map((request) => Array.isArray(request.body.tools))).toEqual([true, false, false]);

    const again = await runAgent({ model, tools: tools() }, { input: "Hi" });
    expect(again).toMatchObject({ stopReason: "final", output: "Hello again." });
    expect(server.requests).toHaveLength(4);
    expect(server.requests[3]?.body.tools).toBeUndefined();
    expect(warnings).toHaveLength(1);
  });

  // Regression: any 400 mentioning "tool" switched a tool-capable server to the text protocol for good.
  it("does not fall back when a 400 is about the conversation's tool messages, not the tools parameter", async () => {
    const message =
      "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.";
    const server = await startServer({ script: [{ error: { status: 400, message } }, { content: "fine" }] });
    const model = modelFor(server);
    const result = await runAgent({ model, tools: tools() }, { input: "hi" });
    expect(result.stopReason).toBe("error");
    expect(result.error?.code).toBe("model_rejected");
    expect(result.output).toContain("role 'tool'");
    expect(model.toolMode).toBe("auto");
    expect(server.requests).toHaveLength(1);
  });

  it.each(["registry.ollama.ai/library/gemma:2b does not support tools", "tools param requires --jinja flag"])(
    "falls back for another server's way of rejecting tools: %s",
    async (rejection) => {
      const server = await startServer({ rejectTools: rejection, script: [{ content: '{"answer": "hello"}' }] });
      const model = modelFor(server, { model: REFUSES_TOOLS });
      const result = await runAgent({ model, tools: tools() }, { input: "hi" });
      expect(result).toMatchObject({ stopReason: "final", output: "hello" });
      expect(model.toolMode).toBe("text");
    },
  );

  it("does not fall back in native mode: the rejection is one sentence", async () => {
    const server = await startServer({ rejectTools: true, script: [{ content: "never" }] });
    const model = modelFor(server, { model: REFUSES_TOOLS, toolMode: "native" });
    const result = await runAgent({ model, tools: tools() }, { input: "hi" });
    expect(result.stopReason).toBe("error");
    expect(result.error?.code).toBe("model_rejected");
    expect(result.output).toContain("HTTP 400");
    expect(model.toolMode).toBe("native");
  });

  it("passes a text-protocol tool call through the same tool engine (unknown tool, then answer)", async () => {
    const lookup = recordingTool("lookup_order");
    const server = await startServer({
      script: [
        { content: '{"tool_calls":[{"name":"lookup_ordr","arguments":{"order_id":"A-1"}}]}' },
        { content: "I could not find that tool." },
      ],
    });
    const result = await runAgent(
      { model: modelFor(server, { toolMode: "text" }), tools: createToolRegistry([lookup.tool]) },
      { input: "A-1?" },
    );
    expect(lookup.calls).toHaveLength(0);
    expect(textOf(sentMessages(server, 1).at(-1))).toContain('"type":"tool_not_found"');
    expect(result).toMatchObject({ stopReason: "final", output: "I could not find that tool." });
  });
});
