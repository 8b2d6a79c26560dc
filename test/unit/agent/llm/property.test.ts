// The model layer against generated replies: streams and bodies built from the shapes real servers
// send, then cut at random byte offsets, with fields dropped and mistyped, calls interleaved and
// garbage lines mixed in. Whatever the bytes, nothing but a GlassboxError comes out, and every
// tool-call history sent back is valid: each assistant tool call answered by exactly one tool
// message, in order, and every message the conversation keeps can be stored.
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GlassboxError } from "../../../../src/agent/errors.js";
import { runAgent } from "../../../../src/agent/loop.js";
import { createMemory } from "../../../../src/agent/memory.js";
import type { SqliteStore } from "../../../../src/store/sqlite-store.js";
import type { ModelResponse } from "../../../../src/agent/types.js";
import { createTokenCounter } from "../../../../src/agent/tokens.js";
import type {
  ChatCompletionRequestBody,
  ScriptedModelServer,
  ScriptedReply,
} from "../../../../src/testing/scripted-model-server.js";
import { closeServers, modelFor, startServer } from "../../../helpers/agent.js";
import { openTestStore, removeDatabases } from "../../../helpers/memory.js";
import { fixtureTools } from "./dialects-harness.js";
import { sqlitePortOf } from "../../../../src/store/sqlite.js";

// ---- what a generated reply is made of ------------------------------------------------------

const names = fc.constantFrom("get_weather", "get_time", "get_weather", "not_offered", "");
const argumentTexts = fc.oneof(
  fc.constantFrom('{"city":"Paris"}', "{}", "", '{"city": "Lyon", }', '{"city":', "null", "[1,2]"),
  fc.json({ maxDepth: 2 }),
  fc.string({ maxLength: 12 }),
);
const ids = fc.oneof(
  fc.constantFrom("call_1", "call_1", "D681PevKs", "", "null"),
  fc.string({ maxLength: 10 }),
  fc.constant(undefined),
);
const text = fc.oneof(
  fc.string({ maxLength: 24 }),
  fc.constantFrom(
    "<think>",
    "</think>",
    "[THINK]",
    "[/THINK]",
    "<tool_call>",
    "</tool_call>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "<|python_tag|>",
    "°C ☀️ — é",
    '{"name": "get_time", "parameters": {}}',
    "```json\n",
  ),
);
/** Any JSON-ish value, to put where a field should be. */
const junk = fc.oneof(
  fc.string({ maxLength: 6 }),
  fc.integer(),
  fc.constant(null),
  fc.boolean(),
  fc.constant([]),
  fc.constant({}),
  fc.array(fc.string({ maxLength: 4 }), { maxLength: 2 }),
);

const call = fc.record({
  name: names,
  args: argumentTexts,
  id: ids,
  index: fc.oneof(
    fc.constant("position" as const),
    fc.constant("none" as const),
    fc.constant("zero" as const),
    fc.constant("from one" as const),
  ),
  argumentsAsObject: fc.boolean(),
  repeatName: fc.boolean(),
  pieces: fc.integer({ min: 1, max: 4 }),
});

/** A change to one node of a chunk: dropped, or replaced with junk. */
const mutation = fc.record({ at: fc.nat(), kind: fc.constantFrom("drop" as const, "replace" as const), value: junk });

const plan = fc.record({
  content: fc.array(text, { maxLength: 5 }),
  reasoning: fc.array(fc.string({ maxLength: 10 }), { maxLength: 3 }),
  reasoningField: fc.constantFrom("reasoning_content", "reasoning"),
  /** Content as Magistral's typed parts (text, thinking) instead of a string. */
  contentAsParts: fc.boolean(),
  calls: fc.array(call, { maxLength: 3 }),
  /** The order the calls' fragments go out in: indexes into the remaining fragments. */
  schedule: fc.array(fc.nat(), { maxLength: 12 }),
  finishReason: fc.oneof(fc.constantFrom("stop", "tool_calls", "length", null), junk),
  usage: fc.constantFrom("last chunk", "finish chunk", "none"),
  done: fc.boolean(),
  crlf: fc.boolean(),
  extras: fc.array(
    fc.tuple(
      fc.nat(),
      fc.constantFrom(
        "garbage",
        "comment",
        "empty choices",
        "no delta",
        "event ping",
        "half event",
        "blank data",
        "error-free junk",
      ),
    ),
    { maxLength: 3 },
  ),
  mutations: fc.array(mutation, { maxLength: 3 }),
  cuts: fc.array(fc.nat(), { maxLength: 6 }),
  shape: fc.constantFrom("stream", "stream", "stream", "completion", "garbage"),
  status: fc.constantFrom(200, 200, 200, 200, 200, 200, 500, 400),
  garbage: fc.uint8Array({ maxLength: 40 }),
});

type Plan = typeof plan extends fc.Arbitrary<infer T> ? T : never;

// ---- building the bytes ---------------------------------------------------------------------

function chunksOf(p: Plan): unknown[] {
  const chunks: unknown[] = [];
  const chunk = (delta: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
    id: "chatcmpl-p",
    object: "chat.completion.chunk",
    created: 1,
    model: "property-model",
    choices: [{ index: 0, delta, finish_reason: null }],
    ...extra,
  });
  chunks.push(chunk({ role: "assistant", content: "" }));
  for (const piece of p.reasoning) chunks.push(chunk({ content: null, [p.reasoningField]: piece }));
  for (const piece of p.content)
    chunks.push(
      chunk({
        content: p.contentAsParts
          ? [
              { type: "text", text: piece },
              { type: "thinking", thinking: [{ type: "text", text: piece }] },
            ]
          : piece,
      }),
    );

  // Each call cut into fragments; the fragments of different calls interleaved by the schedule.
  const queues = p.calls.map((c, position) => {
    const argsText = c.args;
    const size = Math.max(1, Math.ceil(argsText.length / c.pieces));
    const parts =
      argsText === ""
        ? [""]
        : Array.from({ length: Math.ceil(argsText.length / size) }, (_, i) => argsText.slice(i * size, (i + 1) * size));
    const index =
      c.index === "position" ? position : c.index === "zero" ? 0 : c.index === "from one" ? position + 1 : undefined;
    return parts.map((part, i) => {
      const first = i === 0;
      const entry: Record<string, unknown> = { ...(index !== undefined ? { index } : {}) };
      if (first && c.id !== undefined) entry.id = c.id;
      if (first) entry.type = "function";
      const fn: Record<string, unknown> = {};
      if (first || c.repeatName) fn.name = c.name;
      fn.arguments = c.argumentsAsObject && parts.length === 1 ? safeParse(part) : part;
      entry.function = fn;
      return entry;
    });
  });
  let turn = 0;
  while (queues.some((queue) => queue.length > 0)) {
    const open = queues.filter((queue) => queue.length > 0);
    const queue = open[(p.schedule[turn++] ?? 0) % open.length];
    const entry = queue?.shift();
    if (entry) chunks.push(chunk({ tool_calls: [entry] }));
  }
  const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
  chunks.push({
    ...chunk({}),
    choices: [{ index: 0, delta: {}, finish_reason: p.finishReason }],
    ...(p.usage === "finish chunk" ? { usage } : {}),
  });
  if (p.usage === "last chunk")
    chunks.push({
      id: "chatcmpl-p",
      object: "chat.completion.chunk",
      created: 1,
      model: "property-model",
      choices: [],
      usage,
    });
  return chunks.map((value, position) =>
    mutate(
      value,
      p.mutations.filter((m) => m.at % chunks.length === position),
    ),
  );
}

function completionOf(p: Plan): unknown {
  const toolCalls = p.calls.map((c) => ({
    ...(c.id !== undefined ? { id: c.id } : {}),
    type: "function",
    function: { name: c.name, arguments: c.argumentsAsObject ? safeParse(c.args) : c.args },
  }));
  const message = {
    role: "assistant",
    content:
      p.content.length === 0
        ? null
        : p.contentAsParts
          ? p.content.map((piece) => ({ type: "text", text: piece }))
          : p.content.join(""),
    ...(p.reasoning.length > 0 ? { [p.reasoningField]: p.reasoning.join("") } : {}),
    ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
  };
  const body = {
    id: "chatcmpl-p",
    object: "chat.completion",
    created: 1,
    model: "property-model",
    choices: [{ index: 0, message, finish_reason: p.finishReason }],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  };
  return mutate(body, p.mutations);
}

/** The reply the server sends for a plan: an event stream, a completion, or bytes that are neither. */
function replyOf(p: Plan): ScriptedReply {
  const end = p.crlf ? "\r\n" : "\n";
  let body: Uint8Array;
  let contentType: string;
  if (p.shape === "garbage") {
    body = p.garbage;
    contentType = p.status === 200 ? "application/json" : "text/html";
  } else if (p.shape === "completion") {
    body = new TextEncoder().encode(JSON.stringify(completionOf(p)));
    contentType = "application/json";
  } else {
    const events = chunksOf(p).map((value) => `data: ${JSON.stringify(value)}${end}${end}`);
    for (const [at, kind] of p.extras) events.splice(at % (events.length + 1), 0, extraLine(kind, end));
    if (p.done) events.push(`data: [DONE]${end}${end}`);
    body = new TextEncoder().encode(events.join(""));
    contentType = "text/event-stream";
  }
  // Cut the bytes anywhere, a multi-byte character included.
  const cuts = [...new Set(p.cuts.map((cut) => (body.length === 0 ? 0 : cut % body.length)))]
    .filter((cut) => cut > 0)
    .sort((a, b) => a - b);
  const parts = [0, ...cuts].map((start, i, starts) => body.slice(start, starts[i + 1] ?? body.length));
  return {
    raw: {
      status: p.status,
      contentType,
      body: parts.length > 1 ? parts : (parts[0] ?? new Uint8Array()),
      partGapMs: 0,
    },
  };
}

function extraLine(kind: string, end: string): string {
  switch (kind) {
    case "garbage":
      return `data: not json at all${end}${end}`;
    case "comment":
      return `: OPENROUTER PROCESSING${end}${end}`;
    case "empty choices":
      return `data: {"choices":[],"prompt_filter_results":[{"prompt_index":0}]}${end}${end}`;
    case "no delta":
      return `data: {"choices":[{"index":0,"finish_reason":null,"content_filter_results":{}}]}${end}${end}`;
    case "event ping":
      return `event: ping${end}data: {"type":"ping"}${end}${end}`;
    case "half event":
      return `data: {"choices": [{"delta": {"content": "cut${end}${end}`;
    case "blank data":
      return `data:${end}${end}`;
    default:
      return `id: 7${end}retry: 100${end}${end}`;
  }
}

/** Applies each mutation to one node of the value, counted in pre-order. */
function mutate(value: unknown, mutations: Array<{ at: number; kind: "drop" | "replace"; value: unknown }>): unknown {
  let result = structuredClone(value);
  for (const m of mutations) {
    const nodes: Array<{ parent: Record<string, unknown> | unknown[]; key: string | number }> = [];
    const walk = (node: unknown) => {
      if (Array.isArray(node)) node.forEach((child, key) => (nodes.push({ parent: node, key }), walk(child)));
      else if (node && typeof node === "object")
        for (const [key, child] of Object.entries(node))
          nodes.push({ parent: node as Record<string, unknown>, key }), walk(child);
    };
    walk(result);
    const target = nodes[m.at % Math.max(1, nodes.length)];
    if (!target) {
      result = m.value;
      continue;
    }
    if (m.kind === "drop") {
      if (Array.isArray(target.parent)) target.parent.splice(target.key as number, 1);
      else delete target.parent[target.key as string];
    } else (target.parent as Record<string | number, unknown>)[target.key] = m.value;
  }
  return result;
}

function safeParse(textValue: string): unknown {
  try {
    return JSON.parse(textValue) as unknown;
  } catch {
    return textValue;
  }
}

// ---- what must hold -------------------------------------------------------------------------

/** Each assistant tool call answered by exactly one tool message, in order; no tool message without its call. */
function historyProblems(messages: ChatCompletionRequestBody["messages"]): string[] {
  const problems: string[] = [];
  const seen = new Set<string>();
  for (let index = 0; index < messages.length; index++) {
    const message = messages[index];
    if (!message) continue;
    if (message.role === "assistant") {
      if (message.content !== null && message.content !== undefined && typeof message.content !== "string")
        problems.push(`assistant content at ${index} is not text`);
      const calls = (message.tool_calls ?? []) as Array<{
        id?: unknown;
        type?: unknown;
        function?: { name?: unknown; arguments?: unknown };
      }>;
      for (const [position, entry] of calls.entries()) {
        if (typeof entry.id !== "string" || entry.id === "") problems.push(`call ${position} at ${index} has no id`);
        else if (seen.has(entry.id)) problems.push(`id ${entry.id} used twice`);
        else seen.add(entry.id);
        if (entry.type !== "function") problems.push(`call ${position} at ${index} is not a function call`);
        if (typeof entry.function?.name !== "string" || entry.function.name === "")
          problems.push(`call ${position} at ${index} has no name`);
        if (typeof entry.function?.arguments !== "string")
          problems.push(`call ${position} at ${index} has arguments that are not text`);
        const answer = messages[index + 1 + position];
        if (answer?.role !== "tool" || answer.tool_call_id !== entry.id)
          problems.push(`call ${position} at ${index} is not answered in order`);
      }
      const after = messages[index + 1 + calls.length];
      if (calls.length > 0 && after?.role === "tool")
        problems.push(`a tool message at ${index + 1 + calls.length} answers no call`);
      index += calls.length;
    } else if (message.role === "tool") problems.push(`a tool message at ${index} follows no tool call`);
  }
  return problems;
}

/** Glassbox's own exception text, which a person must never be shown. */
const INTERNAL =
  /Cannot read prop|is not a function|is not iterable|undefined|SQLite3 can only bind|Unexpected token|JSON at position|TypeError|SyntaxError/;

describe("model layer property: any bytes a server sends", () => {
  let server: ScriptedModelServer;
  let store: SqliteStore;
  let session = 0;
  beforeAll(async () => {
    server = await startServer();
    store = openTestStore();
  });
  afterAll(async () => {
    await closeServers();
    removeDatabases();
  });

  it("never lets anything but a GlassboxError out, and keeps every tool-call history it sends valid", async () => {
    const counter = await createTokenCounter("o200k_base");
    await fc.assert(
      fc.asyncProperty(plan, fc.boolean(), async (p, stream) => {
        const reply = replyOf(p);
        const { registry } = fixtureTools();

        // The client alone: a reply or a GlassboxError, whose sentence holds no parser's words.
        server.setScript([reply]);
        server.requests.length = 0;
        const model = modelFor(server, { stream, maxRetries: 0 });
        const outcome: ModelResponse | Error = await model
          .chat({ messages: [{ role: "user", content: "Weather?" }], tools: registry.specs(), onDelta: () => {} })
          .catch((error: unknown) => (error instanceof Error ? error : new Error(String(error))));
        if (outcome instanceof Error) {
          expect(outcome).toBeInstanceOf(GlassboxError);
          expect(outcome.message).not.toMatch(INTERNAL);
        } else {
          expect(typeof outcome.content === "string" || outcome.content === null).toBe(true);
          for (const entry of outcome.toolCalls) expect(typeof entry.function.arguments).toBe("string");
        }

        // A whole run with memory in SQLite: it ends with a result, never an internal error, and
        // every request after the first carries a valid history.
        server.setScript([reply, reply, { content: "Done." }, { content: "Done." }]);
        server.requests.length = 0;
        const memory = createMemory({ store: sqlitePortOf(store), model, counter, budgetTokens: 12_000 });
        const result = await runAgent(
          { model: modelFor(server, { stream, maxRetries: 0 }), tools: registry, memory, maxSteps: 3 },
          { input: "Weather in Paris?", sessionId: `web:property-${++session}` },
        );
        expect(result.error?.code).not.toBe("internal");
        if (result.stopReason === "error") expect(result.output).not.toMatch(INTERNAL);
        for (const request of server.requests) expect(historyProblems(request.body.messages)).toEqual([]);
      }),
      { numRuns: 150 },
    );
  }, 120_000);
});
