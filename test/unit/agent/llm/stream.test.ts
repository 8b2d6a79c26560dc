// Class 1 of the dialects: streamed tool calls and streams in the shapes real servers send them,
// each written byte for byte, streamed and (where the shape has a whole-reply form) not.
import { afterEach, describe, expect, it } from "vitest";
import { closeServers } from "../../../helpers/agent.js";
import {
  chunk,
  completion,
  expectCallsRan,
  finish,
  rawJson,
  rawStream,
  runDialect,
  sse,
  usageChunk,
} from "./dialects-harness.js";
import type { ScriptedReply } from "../../../../src/testing/scripted-model-server.js";

afterEach(closeServers);

const weatherArgs = '{"city":"Paris"}';

interface CallCase {
  name: string;
  /** The reply streamed. */
  stream: ScriptedReply;
  /** The same reply as one completion, where the shape has one. */
  whole?: ScriptedReply;
  /** What the tools received, in order. */
  calls: Array<{ name: "get_weather" | "get_time"; args: Record<string, unknown> }>;
}

const cases: CallCase[] = [
  {
    // Gemini's OpenAI compatibility: no `index`, a whole call with its thought signature in one delta,
    // finish_reason "stop" (THU-MAIC/OpenMAIC#1556, googleapis/python-genai#2868).
    name: "Gemini: a whole call in one delta without index, then finish_reason stop",
    stream: rawStream(
      sse([
        {
          choices: [
            {
              delta: {
                role: "assistant",
                tool_calls: [
                  {
                    extra_content: { google: { thought_signature: "CrICAdHt" } },
                    function: { arguments: weatherArgs, name: "get_weather" },
                    id: "call_297140",
                    type: "function",
                  },
                ],
              },
              index: 0,
            },
          ],
          model: "gemini-3-flash",
          object: "chat.completion.chunk",
        },
        {
          choices: [{ delta: { role: "assistant" }, finish_reason: "stop", index: 0 }],
          model: "gemini-3-flash",
          object: "chat.completion.chunk",
          usage: { completion_tokens: 9, prompt_tokens: 40, total_tokens: 49 },
        },
        "data: [DONE]\n\n",
      ]),
    ),
    whole: rawJson(
      completion(
        {
          content: null,
          tool_calls: [
            { id: "call_297140", type: "function", function: { name: "get_weather", arguments: weatherArgs } },
          ],
        },
        "stop",
      ),
    ),
    calls: [{ name: "get_weather", args: { city: "Paris" } }],
  },
  {
    // Gemini also splits a call's arguments across deltas that carry no index (open-webui/computer#224).
    name: "Gemini: arguments split across deltas without index",
    stream: rawStream(
      sse([
        chunk({
          tool_calls: [
            { id: "function-call-1", type: "function", function: { name: "get_weather", arguments: '{"ci' } },
          ],
        }),
        chunk({ tool_calls: [{ function: { arguments: 'ty":"Pa' } }] }),
        chunk({ tool_calls: [{ function: { arguments: 'ris"}' } }] }),
        finish("stop"),
        "data: [DONE]\n\n",
      ]),
    ),
    calls: [{ name: "get_weather", args: { city: "Paris" } }],
  },
  {
    // Mistral sends each call whole in one chunk, two parallel calls in one delta, with no index
    // (microsoft/semantic-kernel#6316, comet-ml/opik#8363) and 9-character ids.
    name: "Mistral: two whole calls in one delta, no index",
    stream: rawStream(
      sse([
        chunk({ role: "assistant", content: "" }),
        chunk({
          tool_calls: [
            { id: "D681PevKs", function: { name: "get_weather", arguments: weatherArgs } },
            { id: "Xq2Lm9pTz", function: { name: "get_time", arguments: "{}" } },
          ],
        }),
        finish("tool_calls", { usage: { prompt_tokens: 30, completion_tokens: 12, total_tokens: 42 } }),
        "data: [DONE]\n\n",
      ]),
    ),
    whole: rawJson(
      completion(
        {
          content: "",
          tool_calls: [
            { id: "D681PevKs", function: { name: "get_weather", arguments: weatherArgs } },
            { id: "Xq2Lm9pTz", function: { name: "get_time", arguments: "{}" } },
          ],
        },
        "tool_calls",
      ),
    ),
    calls: [
      { name: "get_weather", args: { city: "Paris" } },
      { name: "get_time", args: {} },
    ],
  },
  {
    // Claude behind OpenAI-compatible proxies numbers tool calls by content block, so text first
    // makes the first call index 1 (router-for-me/CLIProxyAPI#5229, aws-samples/bedrock-access-gateway#134).
    name: "first call at index 1, second at index 2",
    stream: rawStream(
      sse([
        chunk({ role: "assistant", content: "Checking both." }),
        chunk({
          tool_calls: [
            {
              index: 1,
              id: "toolu_01PfK17cHPYe3FT7yMeoCCJp",
              type: "function",
              function: { name: "get_weather", arguments: "" },
            },
          ],
        }),
        chunk({ tool_calls: [{ index: 1, function: { arguments: weatherArgs } }] }),
        chunk({
          tool_calls: [
            {
              index: 2,
              id: "toolu_01VHozdG7zqmG24dkFveqsLq",
              type: "function",
              function: { name: "get_time", arguments: "{}" },
            },
          ],
        }),
        finish("tool_calls"),
        usageChunk(),
        "data: [DONE]\n\n",
      ]),
    ),
    calls: [
      { name: "get_weather", args: { city: "Paris" } },
      { name: "get_time", args: {} },
    ],
  },
  {
    // Proxies in front of Gemini send `type: ""` or none (AstrBotDevs/AstrBot#6661).
    name: "no type, or an empty one",
    stream: rawStream(
      sse([
        chunk({ tool_calls: [{ index: 0, id: "call_a", function: { name: "get_weather", arguments: weatherArgs } }] }),
        chunk({ tool_calls: [{ index: 1, id: "call_b", type: "", function: { name: "get_time", arguments: "{}" } }] }),
        finish("tool_calls"),
        "data: [DONE]\n\n",
      ]),
    ),
    whole: rawJson(
      completion(
        { tool_calls: [{ id: "call_a", function: { name: "get_weather", arguments: weatherArgs } }] },
        "tool_calls",
      ),
    ),
    calls: [
      { name: "get_weather", args: { city: "Paris" } },
      { name: "get_time", args: {} },
    ],
  },
  {
    // MiniMax on NVIDIA NIM repeats the full name in every delta (NousResearch/hermes-agent#11984).
    name: "the name repeated in every delta",
    stream: rawStream(
      sse([
        chunk({
          tool_calls: [
            { index: 0, id: "call_m1", type: "function", function: { name: "get_weather", arguments: '{"city":' } },
          ],
        }),
        chunk({
          tool_calls: [
            { index: 0, id: "call_m1", type: "function", function: { name: "get_weather", arguments: '"Paris"' } },
          ],
        }),
        chunk({ tool_calls: [{ index: 0, type: "function", function: { name: "get_weather", arguments: "}" } }] }),
        finish("tool_calls"),
        "data: [DONE]\n\n",
      ]),
    ),
    calls: [{ name: "get_weather", args: { city: "Paris" } }],
  },
  {
    // Later deltas with `"name": ""` (dyedd/lens#49); the id only in the first delta, as OpenAI itself
    // streams (BerriAI/litellm#5231).
    name: "an empty name in later deltas, the id only in the first",
    stream: rawStream(
      sse([
        chunk({
          tool_calls: [
            {
              index: 0,
              id: "call_9oOUGn7XVM1S9AdJeglwUv1Z",
              type: "function",
              function: { name: "get_weather", arguments: "" },
            },
          ],
        }),
        chunk({ tool_calls: [{ index: 0, function: { name: "", arguments: '{"ci' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { name: "", arguments: 'ty":"Paris"}' } }] }),
        finish("tool_calls"),
        "data: [DONE]\n\n",
      ]),
    ),
    calls: [{ name: "get_weather", args: { city: "Paris" } }],
  },
  {
    // Gemini behind a relay put the second call's arguments under the first call's index, with no id
    // and an empty name (dyedd/lens#49): two complete objects, two calls.
    name: "two calls' arguments under one index",
    stream: rawStream(
      sse([
        chunk({
          tool_calls: [
            { index: 0, id: "toolu_530f", type: "function", function: { name: "get_weather", arguments: "" } },
          ],
        }),
        chunk({ tool_calls: [{ index: 0, function: { name: "", arguments: weatherArgs } }] }),
        chunk({ tool_calls: [{ index: 0, function: { name: "", arguments: '{"city":"Lyon"}' } }] }),
        finish("tool_calls"),
        "data: [DONE]\n\n",
      ]),
    ),
    calls: [
      { name: "get_weather", args: { city: "Paris" } },
      { name: "get_weather", args: { city: "Lyon" } },
    ],
  },
  {
    // Dynamo serving Qwen streamed every parallel call at index 0, each with its own id (ai-dynamo/dynamo#4723).
    name: "parallel calls all at index 0 with their own ids",
    stream: rawStream(
      sse([
        chunk({
          tool_calls: [
            { index: 0, id: "call-1", type: "function", function: { name: "get_weather", arguments: weatherArgs } },
          ],
        }),
        chunk({
          tool_calls: [{ index: 0, id: "call-2", type: "function", function: { name: "get_time", arguments: "{}" } }],
        }),
        finish("tool_calls"),
        "data: [DONE]\n\n",
      ]),
    ),
    calls: [
      { name: "get_weather", args: { city: "Paris" } },
      { name: "get_time", args: {} },
    ],
  },
  {
    // Azure OpenAI: a first chunk with `choices: []` and prompt_filter_results, and content-filter
    // annotations as a choice without `delta` (AbanteAI mentat#429, microsoft/autogen#6465).
    name: "Azure: choices: [] and a choice without delta",
    stream: rawStream(
      sse([
        {
          choices: [],
          created: 0,
          id: "",
          model: "",
          object: "",
          prompt_filter_results: [
            { prompt_index: 0, content_filter_results: { hate: { filtered: false, severity: "safe" } } },
          ],
        },
        chunk(
          {
            role: "assistant",
            tool_calls: [
              { index: 0, id: "call_az", type: "function", function: { name: "get_weather", arguments: "" } },
            ],
          },
          { model: "gpt-4o" },
        ),
        chunk({ tool_calls: [{ index: 0, function: { arguments: weatherArgs } }] }),
        {
          id: "",
          object: "",
          created: 0,
          model: "",
          choices: [
            {
              index: 0,
              finish_reason: null,
              content_filter_results: { hate: { filtered: false, severity: "safe" } },
              content_filter_offsets: { check_offset: 44, start_offset: 44, end_offset: 198 },
            },
          ],
          usage: null,
        },
        finish("tool_calls"),
        "data: [DONE]\n\n",
      ]),
    ),
    calls: [{ name: "get_weather", args: { city: "Paris" } }],
  },
  {
    // llama.cpp forks end the stream without `data: [DONE]` (ikawrakow/ik_llama.cpp#467, gpustack/llama-box#2),
    // and send usage on the last chunk with the finish reason.
    name: "no [DONE], usage on the finish chunk",
    stream: rawStream(
      sse([
        chunk({
          tool_calls: [
            { index: 0, id: "call_x", type: "function", function: { name: "get_weather", arguments: weatherArgs } },
          ],
        }),
        finish("tool_calls", { usage: { prompt_tokens: 40, completion_tokens: 9, total_tokens: 49 } }),
      ]),
    ),
    calls: [{ name: "get_weather", args: { city: "Paris" } }],
  },
];

describe("dialects, class 1: streamed tool calls", () => {
  for (const testCase of cases) {
    for (const mode of ["streamed", "not streamed"] as const) {
      const reply = mode === "streamed" ? testCase.stream : testCase.whole;
      if (!reply) continue;
      it(`${testCase.name} (${mode})`, async () => {
        const run = await runDialect([reply], { stream: mode === "streamed" });
        const expected =
          mode === "streamed" || testCase.whole === undefined
            ? testCase.calls
            : testCase.calls.slice(0, countCalls(testCase.whole));
        expectCallsRan(run, expected);
      });
    }
  }

  it("keeps usage from a last chunk, and reads no usage as zero with a note", async () => {
    const withUsage = await runDialect(
      [rawStream(sse([chunk({ content: "Sunny." }), finish("stop"), usageChunk(40, 9), "data: [DONE]\n\n"]))],
      { stream: true },
    );
    expect(withUsage.result.usage).toEqual({ promptTokens: 40, completionTokens: 9, totalTokens: 49 });
    expect(withUsage.responses[0]?.notes ?? []).toEqual([]);

    const without = await runDialect(
      [rawStream(sse([chunk({ content: "Sunny." }), finish("stop"), "data: [DONE]\n\n"]))],
      { stream: true },
    );
    expect(without.result).toMatchObject({
      stopReason: "final",
      output: "Sunny.",
      usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0 },
    });
    expect(without.responses[0]?.notes).toContain("the server reported no token usage for this reply");
  });
});

describe("dialects, class 1: the bytes of a stream", () => {
  const answer = "Il fait 21 °C à Paris — ensoleillé ☀️.";

  it("skips SSE comment lines (OpenRouter's keep-alive, sse-starlette's pings)", async () => {
    // OpenRouter's docs: ": OPENROUTER PROCESSING" comments; sse-starlette writes ": ping - <time>" every 15 s.
    const run = await runDialect(
      [
        rawStream([
          ": OPENROUTER PROCESSING\n\n",
          ...sse([chunk({ content: "Sunny " })]),
          ": ping - 2025-06-01 12:00:00.000000\r\n\r\n",
          ...sse([chunk({ content: "in Paris." }), finish("stop"), usageChunk(), "data: [DONE]\n\n"]),
        ]),
      ],
      { stream: true },
    );
    expect(run.result.output).toBe("Sunny in Paris.");
    expect(run.deltas[0]?.join("")).toBe("Sunny in Paris.");
  });

  it("reads CRLF line ends (sse-starlette's default separator)", async () => {
    // sse-starlette's ServerSentEvent: DEFAULT_SEPARATOR = "\r\n", so events end "\r\n\r\n".
    const run = await runDialect(
      [
        rawStream([
          ...sse([chunk({ content: "Sunny " }), chunk({ content: "in Paris." }), finish("stop"), usageChunk()], "\r\n"),
          "data: [DONE]\r\n\r\n",
        ]),
      ],
      { stream: true },
    );
    expect(run.result.output).toBe("Sunny in Paris.");
  });

  it("reads a CR cut from its LF by a network read", async () => {
    const [first = "", ...rest] = sse(
      [chunk({ content: "Sunny." }), finish("stop"), usageChunk(), "data: [DONE]\r\n\r\n"],
      "\r\n",
    );
    const run = await runDialect([rawStream([first.slice(0, -1), first.slice(-1), ...rest])], { stream: true });
    expect(run.result.output).toBe("Sunny.");
  });

  it("joins a UTF-8 character split across network reads", async () => {
    const bytes = new TextEncoder().encode(
      sse([chunk({ content: answer }), finish("stop"), usageChunk(), "data: [DONE]\n\n"]).join(""),
    );
    // Cut inside "°" (2 bytes), "—" (3 bytes) and "☀" (3 bytes).
    const text = new TextDecoder().decode(bytes);
    const cuts = ["°", "—", "☀"].map(
      (character) => new TextEncoder().encode(text.slice(0, text.indexOf(character))).length + 1,
    );
    const parts = [0, ...cuts, bytes.length]
      .slice(0, -1)
      .map((start, index, starts) => bytes.slice(start, [...starts.slice(1), bytes.length][index]));
    const run = await runDialect([rawStream(parts)], { stream: true });
    expect(run.result.output).toBe(answer);
    expect(run.deltas[0]?.join("")).toBe(answer);
  });

  it("reads a very long single delta written in many parts", async () => {
    const long = "x".repeat(300_000);
    const body = sse([
      chunk({
        tool_calls: [
          {
            index: 0,
            id: "call_long",
            type: "function",
            function: { name: "get_weather", arguments: JSON.stringify({ city: long }) },
          },
        ],
      }),
      finish("tool_calls"),
      usageChunk(),
      "data: [DONE]\n\n",
    ]).join("");
    const parts = Array.from({ length: Math.ceil(body.length / 16_384) }, (_, index) =>
      body.slice(index * 16_384, (index + 1) * 16_384),
    );
    const run = await runDialect([rawStream(parts, { partGapMs: 0 })], { stream: true });
    expect(run.received.get_weather).toEqual([{ city: long }]);
  });

  it("skips a data line that is not JSON and keeps the rest of the answer", async () => {
    const run = await runDialect(
      [
        rawStream([
          ...sse([chunk({ content: "Sunny " })]),
          'data: {"choices": [\n\n',
          ...sse([chunk({ content: "in Paris." }), finish("stop"), usageChunk(), "data: [DONE]\n\n"]),
        ]),
      ],
      { stream: true },
    );
    expect(run.result.output).toBe("Sunny in Paris.");
    expect(run.responses[0]?.notes).toContain("skipped 1 part of the reply that was not JSON");
  });

  it("reads a stream sent to a request that did not ask for one, and a JSON reply to one that did", async () => {
    const streamed = await runDialect(
      [rawStream(sse([chunk({ content: "Sunny." }), finish("stop"), usageChunk(), "data: [DONE]\n\n"]))],
      { stream: false },
    );
    expect(streamed.result.output).toBe("Sunny.");
    const whole = await runDialect([rawJson(completion({ content: "Sunny." }))], { stream: true });
    expect(whole.result.output).toBe("Sunny.");
  });
});

function countCalls(reply: ScriptedReply): number {
  if (!("raw" in reply) || typeof reply.raw.body !== "string") return 0;
  const parsed = JSON.parse(reply.raw.body) as { choices: Array<{ message: { tool_calls?: unknown[] } }> };
  return parsed.choices[0]?.message.tool_calls?.length ?? 0;
}
