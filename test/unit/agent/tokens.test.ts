// Token counting with the real js-tiktoken rank tables: which encoding fits which model, the known
// context windows, and message counts that include everything the model is sent.
import { beforeAll, describe, expect, it } from "vitest";
import {
  contextWindowOf,
  createTokenCounter,
  encodingForModel,
  promptTokens,
  type TokenCounter,
} from "../../../src/agent/tokens.js";
import type { Message, ToolSpec } from "../../../src/agent/types.js";

let o200k: TokenCounter;
let cl100k: TokenCounter;
beforeAll(async () => {
  o200k = await createTokenCounter("o200k_base");
  cl100k = await createTokenCounter("cl100k_base");
});

describe("encodingForModel", () => {
  it.each([
    "gpt-4o",
    "gpt-4o-mini",
    "gpt-4o-2024-08-06",
    "chatgpt-4o-latest",
    "gpt-4.1",
    "gpt-4.1-nano",
    "o1",
    "o3",
    "o3-mini",
    "o4-mini",
    "gpt-5",
    "gpt-5-mini",
  ])("%s -> o200k_base", (model) => expect(encodingForModel(model)).toBe("o200k_base"));

  it.each([
    "gpt-3.5-turbo",
    "gpt-4",
    "gpt-4-turbo",
    "qwen2.5:7b",
    "qwen2.5-coder",
    "llama3",
    "llama3.1:8b",
    "mistral-small",
    "deepseek-r1",
  ])("%s -> cl100k_base", (model) => expect(encodingForModel(model)).toBe("cl100k_base"));

  it("looks past a provider prefix and ignores case", () => {
    expect(encodingForModel("openai/gpt-4o")).toBe("o200k_base");
    expect(encodingForModel("openrouter/openai/o3-mini")).toBe("o200k_base");
    expect(encodingForModel("GPT-4.1")).toBe("o200k_base");
    expect(encodingForModel("meta-llama/llama3-70b")).toBe("cl100k_base");
    // "o" followed by a digit is the o-series only at the start of the name.
    expect(encodingForModel("solar-10.7b")).toBe("cl100k_base");
  });
});

describe("contextWindowOf", () => {
  it.each([
    ["gpt-4o", 128_000],
    ["gpt-4o-mini", 128_000],
    ["openai/gpt-4o", 128_000],
    ["gpt-4-turbo", 128_000],
    ["gpt-4.1", 1_047_576],
    ["gpt-4.1-mini", 1_047_576],
    ["gpt-5", 400_000],
    ["o3", 200_000],
    ["o4-mini", 200_000],
    ["gpt-3.5-turbo", 16_385],
    ["gpt-4", 8_192],
  ] as const)("%s has a window of %i tokens", (model, window) => expect(contextWindowOf(model)).toBe(window));

  it("is undefined for models it does not know, so the configured budget is trusted", () => {
    expect(contextWindowOf("qwen2.5:7b")).toBeUndefined();
    expect(contextWindowOf("llama3")).toBeUndefined();
  });
});

describe("createTokenCounter", () => {
  it("counts text in the chosen encoding", () => {
    expect(o200k.encoding).toBe("o200k_base");
    expect(cl100k.encoding).toBe("cl100k_base");
    expect(o200k.text("")).toBe(0);
    expect(o200k.text("hello world")).toBe(2);
    expect(cl100k.text("hello world")).toBe(2);
    // The encodings differ on non-English text, which is why the choice matters.
    const greek = "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο.";
    expect(o200k.text(greek)).toBeLessThan(cl100k.text(greek));
  });

  it("counts a message as its framing, role and content", () => {
    const user = { role: "user", content: "What is the weather in Paris?" } satisfies Message;
    expect(o200k.message(user)).toBe(3 + o200k.text("user") + o200k.text(user.content));
    expect(o200k.message({ role: "assistant", content: null })).toBe(3 + o200k.text("assistant"));
  });

  it("includes every tool call of an assistant message, and the tool_call_id of a result", () => {
    const calls = [
      {
        id: "call_1",
        type: "function" as const,
        function: { name: "weather", arguments: '{"city":"Paris","unit":"celsius"}' },
      },
      {
        id: "call_2",
        type: "function" as const,
        function: { name: "lookup_order", arguments: '{"order_id":"A-1042"}' },
      },
    ];
    const bare: Message = { role: "assistant", content: "Checking." };
    const withOne: Message = { role: "assistant", content: "Checking.", tool_calls: calls.slice(0, 1) };
    const withTwo: Message = { role: "assistant", content: "Checking.", tool_calls: calls };
    const perCall = (call: (typeof calls)[number]) =>
      3 + o200k.text(call.function.name) + o200k.text(call.function.arguments);
    expect(o200k.message(withOne)).toBe(o200k.message(bare) + perCall(calls[0] as (typeof calls)[number]));
    expect(o200k.message(withTwo)).toBe(o200k.message(withOne) + perCall(calls[1] as (typeof calls)[number]));

    const result: Message = {
      role: "tool",
      tool_call_id: "call_abcdef123456",
      content: '{"status":"success","data":{"c":21}}',
    };
    expect(o200k.message(result)).toBe(
      3 + o200k.text("tool") + o200k.text(result.content) + o200k.text("call_abcdef123456"),
    );
  });

  it("counts tool schemas as the JSON the model is sent, and a prompt with its reply priming", () => {
    const tools: ToolSpec[] = [
      {
        type: "function",
        function: {
          name: "weather",
          description: "Current weather.",
          parameters: { type: "object", properties: { city: { type: "string" } } },
        },
      },
    ];
    expect(o200k.tools([])).toBe(0);
    expect(o200k.tools(tools)).toBe(o200k.text(JSON.stringify(tools)));
    expect(promptTokens([])).toBe(3);
    expect(promptTokens([10, 20])).toBe(33);
  });
});

describe("reasoning sent back", () => {
  it("counts the reasoning a tool-calling turn carries back (DeepSeek) as prompt", async () => {
    const counter = await createTokenCounter("cl100k_base");
    const call = { id: "call_1", type: "function" as const, function: { name: "get_x", arguments: "{}" } };
    const plain = counter.message({ role: "assistant", content: null, tool_calls: [call] });
    const reasoning = "First I need the order, so I will look it up before answering.";
    const carried = counter.message({
      role: "assistant",
      content: null,
      tool_calls: [{ ...call, message_reasoning_content: reasoning }],
    });
    expect(carried - plain).toBe(counter.text(reasoning));
  });
});
