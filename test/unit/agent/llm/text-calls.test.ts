// Class 4 of the dialects: tool calls a model wrote as text because the server's tool parser is
// off. They run as calls only when every one names an offered tool, the person never sees their
// text, and the trace says what was recovered.
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

/** The reply as a stream cut in small pieces (tags split too), or as one completion. */
function reply(text: string, stream: boolean): ScriptedReply {
  if (!stream) return rawJson(completion({ content: text }, "stop"));
  const pieces = text.match(/[\s\S]{1,5}/g) ?? [];
  return rawStream(
    sse([
      chunk({ role: "assistant", content: "" }),
      ...pieces.map((content) => chunk({ content })),
      finish("stop"),
      usageChunk(),
      "data: [DONE]\n\n",
    ]),
  );
}

const modes = [
  { mode: "streamed", stream: true },
  { mode: "not streamed", stream: false },
];

describe("dialects, class 4: tool calls written as text", () => {
  it.each(modes)("runs Hermes/Qwen <tool_call> tags ($mode)", async ({ stream }) => {
    // Qwen2.5 on llama-cpp-python without a tool parser puts the call in content (abetlen/llama-cpp-python#1784).
    const text =
      '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>';
    const run = await runDialect([reply(text, stream)], { stream });
    expectCallsRan(run, [
      { name: "get_weather", args: { city: "Paris" } },
      { name: "get_time", args: {} },
    ]);
    expect(run.deltas.flat().join("")).not.toContain("tool_call");
    expect(
      run.responses[0]?.notes?.some(
        (note) =>
          note.startsWith("recovered 2 tool calls (get_weather, get_time)") && note.includes("Hermes <tool_call> tags"),
      ),
    ).toBe(true);
    expect(run.responses[0]?.finishReason).toBe("tool_calls");
  });

  it.each(modes)("keeps the words before a <tool_call> and shows them ($mode)", async ({ stream }) => {
    const run = await runDialect(
      [
        reply(
          'Let me check that.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
          stream,
        ),
      ],
      { stream },
    );
    expectCallsRan(run, [{ name: "get_weather", args: { city: "Paris" } }]);
    expect(run.responses[0]?.content).toBe("Let me check that.");
    if (stream) expect(run.deltas[0]?.join("").trim()).toBe("Let me check that.");
  });

  it.each(modes)('runs Llama 3.x\'s bare {"name", "parameters"} ($mode)', async ({ stream }) => {
    // llama3.2 on Ollama writes the call as JSON in content (ollama/ollama#13519), as its template asks.
    const run = await runDialect([reply('{"name": "get_weather", "parameters": {"city": "Paris"}}', stream)], {
      stream,
    });
    expectCallsRan(run, [{ name: "get_weather", args: { city: "Paris" } }]);
    expect(run.deltas.flat().join("")).not.toContain("parameters");
  });

  it.each(modes)('runs <|python_tag|> and {"name", "arguments"} calls separated by ; ($mode)', async ({ stream }) => {
    // Llama 3.1's ipython form (raullenchai/Rapid-MLX#703) and several calls in one reply.
    const run = await runDialect(
      [
        reply(
          '<|python_tag|>{"name": "get_weather", "arguments": {"city": "Paris"}}; {"name": "get_time", "parameters": {}}',
          stream,
        ),
      ],
      { stream },
    );
    expectCallsRan(run, [
      { name: "get_weather", args: { city: "Paris" } },
      { name: "get_time", args: {} },
    ]);
  });

  it.each(modes)("runs Mistral's [TOOL_CALLS]name[ARGS]{...} ($mode)", async ({ stream }) => {
    // Devstral on SGLang without a tool parser (mistralai/mistral-vibe#594).
    const run = await runDialect([reply('[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}', stream)], { stream });
    expectCallsRan(run, [{ name: "get_weather", args: { city: "Paris" } }]);
    expect(run.deltas.flat().join("")).not.toContain("TOOL_CALLS");
  });

  it.each(modes)("runs Mistral's older [TOOL_CALLS] [{...}] list ($mode)", async ({ stream }) => {
    // Ministral-8B-Instruct-2410's template renders a JSON list after the token (ml-explore/mlx-lm#1374).
    const run = await runDialect(
      [
        reply(
          '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {}}]',
          stream,
        ),
      ],
      { stream },
    );
    expectCallsRan(run, [
      { name: "get_weather", args: { city: "Paris" } },
      { name: "get_time", args: {} },
    ]);
  });

  // Regression guard: an answer that is JSON is an answer.
  it.each(modes)("leaves JSON that names no offered tool as the answer ($mode)", async ({ stream }) => {
    const answer = '{"name": "Alice", "parameters": {"age": 30}}';
    const run = await runDialect([reply(answer, stream)], { stream, input: "Give me Alice as JSON." });
    expect(run.received.get_weather).toEqual([]);
    expect(run.result).toMatchObject({ stopReason: "final", output: answer, steps: 1 });
    if (stream) expect(run.deltas[0]?.join("")).toBe(answer);
  });

  it.each(modes)(
    "leaves a <tool_call> for a tool that is not offered as text, calling nothing ($mode)",
    async ({ stream }) => {
      const text = '<tool_call>\n{"name": "delete_everything", "arguments": {}}\n</tool_call>';
      const run = await runDialect([reply(text, stream)], { stream });
      expect(run.result).toMatchObject({ stopReason: "final", output: text, steps: 1 });
    },
  );

  it("runs recovered calls with the same engine: broken JSON repaired, ids sent back", async () => {
    const run = await runDialect(
      [reply('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris",}}\n', true)],
      { stream: true },
    );
    expectCallsRan(run, [{ name: "get_weather", args: { city: "Paris" } }]);
  });
});
