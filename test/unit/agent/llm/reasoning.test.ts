// Class 3 of the dialects: reasoning in every shape servers send it. It is kept for the trace
// (ModelResponse.reasoning), never reaches the person, and goes back to the server where the
// shape says the server wants it: DeepSeek's reasoning_content, Gemini 3's thought signatures.
import { afterEach, describe, expect, it } from "vitest";
import { createMemory } from "../../../../src/agent/memory.js";
import { runAgent } from "../../../../src/agent/loop.js";
import { createTokenCounter } from "../../../../src/agent/tokens.js";
import { closeServers, modelFor, startServer } from "../../../helpers/agent.js";
import { openTestStore, removeDatabases } from "../../../helpers/memory.js";
import {
  chunk,
  completion,
  expectCallsRan,
  finish,
  fixtureTools,
  rawJson,
  rawStream,
  runDialect,
  sse,
  toolExchange,
  usageChunk,
} from "./dialects-harness.js";
import { sqlitePortOf } from "../../../../src/store/sqlite.js";

afterEach(async () => {
  await closeServers();
  removeDatabases();
});

const reasoningText = "The user wants the weather in Paris. I should call get_weather.";
const weatherCall = (id: string) => ({
  index: 0,
  id,
  type: "function",
  function: { name: "get_weather", arguments: '{"city":"Paris"}' },
});

// DeepSeek's thinking mode: reasoning_content deltas beside content: null, then the call
// (api-docs.deepseek.com, Thinking Mode; "The reasoning_content in the thinking mode must be passed back").
const deepSeekStream = (reasoning: string[]) =>
  rawStream(
    sse([
      chunk({ role: "assistant", content: null, reasoning_content: "" }, { model: "deepseek-v4-flash" }),
      ...reasoning.map((piece) => chunk({ content: null, reasoning_content: piece }, { model: "deepseek-v4-flash" })),
      chunk({
        content: null,
        reasoning_content: null,
        tool_calls: [
          { ...weatherCall("call_00_DcrBkAw4OHiJYQv1vo2a7mDa"), function: { name: "get_weather", arguments: "" } },
        ],
      }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":"Paris"}' } }] }),
      finish("tool_calls", { usage: { prompt_tokens: 120, completion_tokens: 40, total_tokens: 160 } }),
      "data: [DONE]\n\n",
    ]),
  );
const deepSeekWhole = (reasoning: string) =>
  rawJson(
    completion(
      {
        content: "",
        reasoning_content: reasoning,
        tool_calls: [
          {
            id: "call_00_DcrBkAw4OHiJYQv1vo2a7mDa",
            type: "function",
            function: { name: "get_weather", arguments: '{"city":"Paris"}' },
          },
        ],
      },
      "tool_calls",
    ),
  );

describe("dialects, class 3: reasoning_content (DeepSeek; Qwen on vLLM and SGLang)", () => {
  it.each([
    { mode: "streamed", stream: true },
    { mode: "not streamed", stream: false },
  ])(
    "keeps DeepSeek's reasoning out of the answer and sends it back on the tool-calling message ($mode)",
    async ({ stream }) => {
      const run = await runDialect(
        [
          stream
            ? deepSeekStream(["The user wants the weather in Paris.", " I should call get_weather."])
            : deepSeekWhole(reasoningText),
        ],
        { stream },
      );
      expectCallsRan(run, [{ name: "get_weather", args: { city: "Paris" } }]);
      const { assistant, calls } = toolExchange(run.sent(1));
      expect(assistant?.reasoning_content).toBe(reasoningText);
      for (const call of calls) expect(call).not.toHaveProperty("message_reasoning_content");
      expect(run.responses[0]?.reasoning).toBe(reasoningText);
      expect(run.deltas.flat().join("")).toBe(stream ? "Done." : "");
    },
  );

  // Regression: a tool-calling message with empty reasoning must still carry the field (deepseek-ai/deepseek-harness#739).
  it("sends back an empty reasoning_content when the thinking was empty", async () => {
    const run = await runDialect([deepSeekStream([])], { stream: true });
    expect(toolExchange(run.sent(1)).assistant).toHaveProperty("reasoning_content", "");
    expect(run.responses[0]).not.toHaveProperty("reasoning");
  });

  it("keeps sending it back on later turns, from the store", async () => {
    const server = await startServer({
      script: [deepSeekStream([reasoningText]), { content: "It is sunny." }, { content: "You are welcome." }],
    });
    const store = openTestStore();
    const model = modelFor(server);
    const memory = createMemory({
      store: sqlitePortOf(store),
      model,
      counter: await createTokenCounter("o200k_base"),
      budgetTokens: 12_000,
    });
    const agent = { model, tools: fixtureTools().registry, memory };
    await runAgent(agent, { input: "Weather in Paris?", sessionId: "web:deepseek", userId: "U1" });
    const second = await runAgent(agent, { input: "Thanks!", sessionId: "web:deepseek", userId: "U1" });
    expect(second.output).toBe("You are welcome.");
    const later = server.requests[2]?.body.messages ?? [];
    const earlier = later.find((message) => message.role === "assistant" && Array.isArray(message.tool_calls)) as
      | Record<string, unknown>
      | undefined;
    expect(earlier?.reasoning_content).toBe(reasoningText);
  });

  it("reads vLLM's reasoning sent twice (reasoning and reasoning_content) once", async () => {
    // vLLM sends the same text in both fields while `reasoning_content` is deprecated.
    const run = await runDialect(
      [
        rawStream(
          sse([
            chunk(
              { role: "assistant", reasoning: "Paris is", reasoning_content: "Paris is" },
              { model: "Qwen/Qwen3-8B" },
            ),
            chunk({ reasoning: " sunny.", reasoning_content: " sunny." }),
            chunk({ content: "\n\nIt is sunny in Paris." }),
            finish("stop"),
            usageChunk(),
            "data: [DONE]\n\n",
          ]),
        ),
      ],
      { stream: true },
    );
    expect(run.result.output).toBe("It is sunny in Paris.");
    expect(run.responses[0]?.reasoning).toBe("Paris is sunny.");
    expect(run.deltas[0]?.join("").trim()).toBe("It is sunny in Paris.");
  });
});

describe("dialects, class 3: reasoning (Ollama, OpenRouter)", () => {
  it.each([
    { mode: "streamed", stream: true },
    { mode: "not streamed", stream: false },
  ])("keeps `reasoning` for the trace and out of the answer, and does not send it back ($mode)", async ({ stream }) => {
    // Ollama 0.34's raw SSE: `reasoning` deltas beside `content: ""` (dirac-run/dirac#227); OpenRouter's
    // message has `reasoning` beside `content` (OpenRouter docs, reasoning tokens).
    const reply = stream
      ? rawStream(
          sse([
            chunk({ role: "assistant", content: "", reasoning: "We" }, { model: "qwen3.8:27b" }),
            chunk({ content: "", reasoning: " need the tool." }),
            chunk({ content: "", tool_calls: [weatherCall("call_k9x2m4pq")] }),
            finish("tool_calls"),
            usageChunk(),
            "data: [DONE]\n\n",
          ]),
        )
      : rawJson(
          completion(
            { content: "", reasoning: "We need the tool.", tool_calls: [weatherCall("call_k9x2m4pq")] },
            "tool_calls",
          ),
        );
    const run = await runDialect([reply], { stream });
    expectCallsRan(run, [{ name: "get_weather", args: { city: "Paris" } }]);
    expect(run.responses[0]?.reasoning).toBe("We need the tool.");
    const { assistant } = toolExchange(run.sent(1));
    expect(assistant).not.toHaveProperty("reasoning_content");
    expect(assistant).not.toHaveProperty("reasoning");
  });
});

describe("dialects, class 3: reasoning written into the content", () => {
  const answer = "It is 21 °C and sunny in Paris.";

  it.each([
    { mode: "streamed", stream: true },
    { mode: "not streamed", stream: false },
  ])("takes <think>…</think> out of the answer, tags cut across deltas too ($mode)", async ({ stream }) => {
    // DeepSeek-R1 distills and Qwen3 on llama.cpp with reasoning_format none keep the tags in content (ggml-org/llama.cpp#25292).
    const text = `<think>\nOkay, Paris. Sunny.\n</think>\n\n${answer}`;
    const pieces = ["<thi", "nk>\nOkay, Par", "is. Sunny.\n</th", "ink>\n\nIt is 21 °C", " and sunny in Paris."];
    expect(pieces.join("")).toBe(text);
    const reply = stream
      ? rawStream(
          sse([...pieces.map((content) => chunk({ content })), finish("stop"), usageChunk(), "data: [DONE]\n\n"]),
        )
      : rawJson(completion({ content: text }));
    const run = await runDialect([reply], { stream });
    expect(run.result.output).toBe(answer);
    expect(run.responses[0]?.reasoning).toBe("\nOkay, Paris. Sunny.\n");
    if (stream) expect(run.deltas[0]?.join("").trim()).toBe(answer);
    expect(run.deltas.flat().join("")).not.toMatch(/Okay|think/);
  });

  it("takes the reasoning out when only the closing </think> comes, and never streams it", async () => {
    // vLLM serving QwQ or Qwen3-Thinking without a reasoning parser: the template opens <think> in the
    // prompt, so the content starts with the reasoning and only the closing tag comes (vllm-project/vllm#31045).
    const thinking = ["Okay, the user asked", " about Paris. Hmm, sunny.", "\n</think>\n\n"];
    const reply = (text: string[]) =>
      rawStream(sse([...text.map((content) => chunk({ content })), finish("stop"), usageChunk(), "data: [DONE]\n\n"]));
    const server = await startServer({
      script: [reply([...thinking, "It is ", "sunny."]), reply([...thinking, "Still ", "sunny."])],
    });
    const model = modelFor(server);
    for (const expected of ["It is sunny.", "Still sunny."]) {
      const deltas: string[] = [];
      const response = await model.chat({
        messages: [{ role: "user", content: "Weather?" }],
        onDelta: (text) => deltas.push(text),
      });
      expect(response.content).toBe(expected);
      expect(response.reasoning).toBe("Okay, the user asked about Paris. Hmm, sunny.\n");
      expect(deltas.join("")).toBe(expected);
    }
  });

  it("streams an answer without reasoning whole, and the next ones as they come", async () => {
    const reply = rawStream(
      sse([
        chunk({ content: "Sunny " }),
        chunk({ content: "in Paris." }),
        finish("stop"),
        usageChunk(),
        "data: [DONE]\n\n",
      ]),
    );
    const run = await runDialect([reply], { stream: true, input: "Weather?" });
    expect(run.deltas[0]).toEqual(["Sunny ", "in Paris."]);
  });

  it.each([
    { mode: "streamed", stream: true },
    { mode: "not streamed", stream: false },
  ])("takes Mistral's [THINK]…[/THINK] out of the answer ($mode)", async ({ stream }) => {
    // Magistral and Ministral reasoning models write [THINK]…[/THINK] when no reasoning parser runs (waybarrios/vllm-mlx#599).
    const pieces = ["[THINK]Okay, 17×23", "…[/THI", "NK]391"];
    const reply = stream
      ? rawStream(
          sse([...pieces.map((content) => chunk({ content })), finish("stop"), usageChunk(), "data: [DONE]\n\n"]),
        )
      : rawJson(completion({ content: pieces.join("") }));
    const run = await runDialect([reply], { stream, input: "17×23?" });
    expect(run.result.output).toBe("391");
    expect(run.responses[0]?.reasoning).toBe("Okay, 17×23…");
    expect(run.deltas.flat().join("")).not.toContain("Okay");
  });

  it.each([
    { mode: "streamed", stream: true },
    { mode: "not streamed", stream: false },
  ])("reads Magistral's content as typed parts, thinking apart ($mode)", async ({ stream }) => {
    // Magistral returns content as a list: {"type": "thinking", "thinking": [{"type": "text", ...}]} then
    // {"type": "text"} (spring-projects/spring-ai#5019); streamed, delta.content is such a list (braintrustdata/braintrust-sdk-javascript#1857).
    const thinking = { type: "thinking", thinking: [{ type: "text", text: "Reasoning traces..." }] };
    const reply = stream
      ? rawStream(
          sse([
            chunk({ role: "assistant", content: [thinking] }, { model: "magistral-medium-2509" }),
            chunk({ content: [{ type: "text", text: answer }] }),
            finish("stop"),
            usageChunk(),
            "data: [DONE]\n\n",
          ]),
        )
      : rawJson(completion({ content: [thinking, { type: "text", text: answer }] }));
    const run = await runDialect([reply], { stream });
    expect(run.result.output).toBe(answer);
    expect(run.responses[0]?.reasoning).toBe("Reasoning traces...");
    expect(run.deltas.flat().join("")).not.toContain("Reasoning");
  });

  it("keeps <think> text out of the content of a tool-calling reply", async () => {
    // MiniMax-M2 writes its <think> block into content beside native tool calls.
    const run = await runDialect(
      [
        rawJson(
          completion(
            { content: "<think>I need the weather tool.</think>", tool_calls: [weatherCall("call_function_1")] },
            "tool_calls",
          ),
        ),
      ],
      { stream: false },
    );
    expectCallsRan(run, [{ name: "get_weather", args: { city: "Paris" } }]);
    expect(toolExchange(run.sent(1)).assistant?.content).toBeNull();
    expect(run.responses[0]?.reasoning).toBe("I need the weather tool.");
  });
});

describe("dialects, class 3: Gemini 3's thought signatures", () => {
  it.each([
    { mode: "streamed", stream: true },
    { mode: "not streamed", stream: false },
  ])("sends each call's extra_content back exactly as received ($mode)", async ({ stream }) => {
    // Gemini's OpenAI compatibility puts the signature on the first call only (ai.google.dev thought
    // signatures; THU-MAIC/OpenMAIC#1556 measured chunk); it must come back on that call or the next request is a 400.
    const signature = { google: { thought_signature: "EjQKMgEMOdbHJChLX75QUCJjyYlm+/==" } };
    const calls = [
      {
        id: "function-call-1",
        type: "function",
        function: { name: "get_weather", arguments: '{"city":"Paris"}' },
        extra_content: signature,
      },
      { id: "function-call-2", type: "function", function: { name: "get_time", arguments: "{}" } },
    ];
    const reply = stream
      ? rawStream(
          sse([
            {
              choices: [{ delta: { role: "assistant", tool_calls: calls }, index: 0 }],
              model: "gemini-3-flash-preview",
              object: "chat.completion.chunk",
            },
            {
              choices: [{ delta: { role: "assistant" }, finish_reason: "stop", index: 0 }],
              model: "gemini-3-flash-preview",
              object: "chat.completion.chunk",
              usage: { prompt_tokens: 40, completion_tokens: 9, total_tokens: 49 },
            },
            "data: [DONE]\n\n",
          ]),
        )
      : rawJson(completion({ content: null, tool_calls: calls }, "tool_calls"));
    const run = await runDialect([reply], { stream });
    expectCallsRan(run, [
      { name: "get_weather", args: { city: "Paris" } },
      { name: "get_time", args: {} },
    ]);
    const sent = toolExchange(run.sent(1)).calls;
    expect(sent[0]?.extra_content).toEqual(signature);
    expect(sent[1]).not.toHaveProperty("extra_content");
  });

  it("keeps a signature that came in a delta of its own", async () => {
    // Gemini can send the signature as a metadata-only delta for the call (open-webui/computer#224).
    const run = await runDialect(
      [
        rawStream(
          sse([
            chunk({
              tool_calls: [
                {
                  id: "function-call-1",
                  type: "function",
                  function: { name: "get_weather", arguments: '{"city":"Paris"}' },
                },
              ],
            }),
            chunk({
              tool_calls: [{ id: "function-call-1", extra_content: { google: { thought_signature: "c2lnbmF0dXJl" } } }],
            }),
            finish("stop"),
            usageChunk(),
            "data: [DONE]\n\n",
          ]),
        ),
      ],
      { stream: true },
    );
    expectCallsRan(run, [{ name: "get_weather", args: { city: "Paris" } }]);
    expect(toolExchange(run.sent(1)).calls[0]?.extra_content).toEqual({
      google: { thought_signature: "c2lnbmF0dXJl" },
    });
  });
});
