// Shared set-up for the dialect fixtures: replies written byte for byte as real servers send them
// (the scripted server's raw reply), run through the real openai SDK and the agent loop, and what
// came of them: what the tool received, what the follow-up request carried, what the person saw.
import { expect } from "vitest";
import { runAgent, type RunResult } from "../../../../src/agent/loop.js";
import type { AgentEvent } from "../../../../src/agent/events.js";
import type { ModelResponse } from "../../../../src/agent/types.js";
import type { OpenAIModelOptions } from "../../../../src/agent/llm/index.js";
import type {
  ChatCompletionRequestBody,
  RawReply,
  ScriptedModelServer,
  ScriptedReply,
} from "../../../../src/testing/scripted-model-server.js";
import { createToolRegistry } from "../../../../src/tools/registry.js";
import type { ToolDefinition } from "../../../../src/tools/types.js";
import { modelFor, recordingTool, startServer } from "../../../helpers/agent.js";

/** One chunk of a stream: `choices[0].delta` is `delta`; `extra` overrides any field of the chunk. */
export function chunk(
  delta: Record<string, unknown> | undefined,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  const choice: Record<string, unknown> = { index: 0, ...(delta ? { delta } : {}), finish_reason: null };
  return {
    id: "chatcmpl-fixture",
    object: "chat.completion.chunk",
    created: 1_750_000_000,
    model: "fixture-model",
    choices: [choice],
    ...extra,
  };
}

/** The chunk that ends a stream with `reason`. */
export const finish = (reason: string | null, extra: Record<string, unknown> = {}) =>
  chunk({}, { choices: [{ index: 0, delta: {}, finish_reason: reason }], ...extra });

export const usageChunk = (prompt = 11, completion = 7) => ({
  id: "chatcmpl-fixture",
  object: "chat.completion.chunk",
  created: 1_750_000_000,
  model: "fixture-model",
  choices: [],
  usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
});

/** Events as `data:` lines; a string is written as it is (a comment, a garbage line, [DONE]). */
export function sse(events: Array<Record<string, unknown> | string>, lineEnd = "\n"): string[] {
  return events.map((event) =>
    typeof event === "string" ? event : `data: ${JSON.stringify(event)}${lineEnd}${lineEnd}`,
  );
}

/** A whole non-streamed completion whose message is `message`. */
export function completion(
  message: Record<string, unknown>,
  finishReason: string | null = "stop",
  extra: Record<string, unknown> = {},
): string {
  return JSON.stringify({
    id: "chatcmpl-fixture",
    object: "chat.completion",
    created: 1_750_000_000,
    model: "fixture-model",
    choices: [{ index: 0, message: { role: "assistant", ...message }, finish_reason: finishReason }],
    usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 },
    ...extra,
  });
}

export const raw = (body: RawReply["body"], extra: Partial<RawReply> = {}): ScriptedReply => ({
  raw: { body, ...extra },
});
export const rawStream = (
  parts: string[] | Uint8Array[] | Array<string | Uint8Array>,
  extra: Partial<RawReply> = {},
): ScriptedReply => ({ raw: { body: parts, contentType: "text/event-stream", partGapMs: 1, ...extra } });
export const rawJson = (body: string, extra: Partial<RawReply> = {}): ScriptedReply => ({
  raw: { body, contentType: "application/json", ...extra },
});

export interface DialectRun {
  result: RunResult;
  server: ScriptedModelServer;
  /** Each call the tool received, by tool name. */
  received: { get_weather: Array<Record<string, unknown>>; get_time: Array<Record<string, unknown>> };
  /** The text the person saw stream, step by step. */
  deltas: string[][];
  /** Every model reply as the loop got it (notes and reasoning included). */
  responses: ModelResponse[];
  /** The messages of request `index` (0 the first). */
  sent: (index: number) => ChatCompletionRequestBody["messages"];
}

/** The tools every fixture offers: a weather lookup with a city, and a clock without parameters. */
export function fixtureTools(extra: ToolDefinition[] = []) {
  const weather = recordingTool("get_weather", (args) => ({ city: args.city, temperature: 21 }), {
    parameters: {
      type: "object",
      properties: { city: { type: "string" } },
      required: ["city"],
      additionalProperties: false,
    },
  });
  const clock = recordingTool("get_time", () => ({ time: "12:00" }), {
    parameters: { type: "object", properties: {} },
  });
  return { weather, clock, registry: createToolRegistry([weather.tool, clock.tool, ...extra]) };
}

/**
 * Runs one turn against `script` (a follow-up answer is added when the script ends) with a client
 * streaming or not, and reports what came of it.
 */
export async function runDialect(
  script: ScriptedReply[],
  options: { stream: boolean; input?: string; model?: Partial<OpenAIModelOptions>; maxSteps?: number },
): Promise<DialectRun> {
  const server = await startServer({ script: [...script, { content: "Done." }] });
  const { weather, clock, registry } = fixtureTools();
  const deltas: string[][] = [];
  const responses: ModelResponse[] = [];
  const onEvent = (event: AgentEvent) => {
    if (event.type === "model_start") deltas.push([]);
    if (event.type === "model_delta") deltas.at(-1)?.push(event.text);
    if (event.type === "model_end") responses.push(event.response);
  };
  const model = modelFor(server, { stream: options.stream, maxRetries: 0, ...options.model });
  const result = await runAgent(
    { model, tools: registry, maxSteps: options.maxSteps ?? 4 },
    { input: options.input ?? "What is the weather in Paris?", onEvent },
  );
  return {
    result,
    server,
    received: { get_weather: weather.calls.map((call) => call.args), get_time: clock.calls.map((call) => call.args) },
    deltas,
    responses,
    sent: (index) => {
      const request = server.requests[index];
      if (!request) throw new Error(`no request #${index}; the server saw ${server.requests.length}`);
      return request.body.messages;
    },
  };
}

/** The assistant tool calls and tool results of a request, in the order sent. */
export function toolExchange(messages: ChatCompletionRequestBody["messages"]) {
  const assistant = messages.find((message) => message.role === "assistant" && Array.isArray(message.tool_calls));
  const calls = (assistant?.tool_calls ?? []) as Array<{
    id: string;
    type?: string;
    function: { name: string; arguments: string };
    [key: string]: unknown;
  }>;
  const results = messages.filter((message) => message.role === "tool").map((message) => message.tool_call_id);
  return { assistant: assistant as (Record<string, unknown> & { tool_calls?: unknown[] }) | undefined, calls, results };
}

/** The calls ran with these arguments, the follow-up answered each exactly once in order, the person saw the answer. */
export function expectCallsRan(run: DialectRun, calls: Array<{ name: string; args: Record<string, unknown> }>): void {
  const received = [
    ...run.received.get_weather.map((args) => ({ name: "get_weather", args })),
    ...run.received.get_time.map((args) => ({ name: "get_time", args })),
  ];
  expect(received.sort(byName)).toEqual([...calls].sort(byName));
  const { calls: sentCalls, results } = toolExchange(run.sent(1));
  expect(
    sentCalls.map((call) => ({ name: call.function.name, args: JSON.parse(call.function.arguments) as unknown })),
  ).toEqual(calls);
  const ids = sentCalls.map((call) => call.id);
  expect(new Set(ids).size).toBe(ids.length);
  for (const id of ids) expect(id).toMatch(/\S/);
  expect(results).toEqual(ids);
  for (const call of sentCalls) expect(call.type).toBe("function");
  expect(run.result).toMatchObject({ stopReason: "final", output: "Done." });
  // No tool-call JSON reached the person.
  expect(run.deltas.flat().join("")).not.toMatch(/"city"/);
}

const byName = (a: { name: string; args: unknown }, b: { name: string; args: unknown }) =>
  `${a.name}${JSON.stringify(a.args)}`.localeCompare(`${b.name}${JSON.stringify(b.args)}`);
