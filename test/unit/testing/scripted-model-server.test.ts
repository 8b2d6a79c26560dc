// Drives the real `openai` SDK against the scripted server: if the SDK parses it, our client will too.
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { startScriptedModelServer, type ScriptedModelServer } from "../../../src/testing/scripted-model-server.js";

const servers: ScriptedModelServer[] = [];
async function start(options: Parameters<typeof startScriptedModelServer>[0] = {}) {
  const server = await startScriptedModelServer(options);
  servers.push(server);
  const client = new OpenAI({ baseURL: server.url, apiKey: "test", maxRetries: 0 });
  return { server, client };
}
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

const weatherTool = {
  type: "function" as const,
  function: {
    name: "get_weather",
    description: "Weather for a city",
    parameters: { type: "object", properties: { city: { type: "string" } } },
  },
};

describe("scripted model server", () => {
  it("answers a non-streaming text request and echoes the model", async () => {
    const { client, server } = await start({ script: [{ content: "Hello there, human." }] });
    const completion = await client.chat.completions.create({
      model: "m1",
      messages: [{ role: "user", content: "hi" }],
    });
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    expect(completion.object).toBe("chat.completion");
    expect(completion.model).toBe("m1");
    expect(completion.choices[0]?.message).toMatchObject({ role: "assistant", content: "Hello there, human." });
    expect(completion.choices[0]?.message.tool_calls).toBeUndefined();
    expect(completion.choices[0]?.finish_reason).toBe("stop");
    // "hi" is 2 characters -> 1 token; 19 characters of content -> 5 tokens.
    expect(completion.usage).toEqual({ prompt_tokens: 1, completion_tokens: 5, total_tokens: 6 });
  });

  it("answers non-streaming tool calls, passing broken JSON arguments through verbatim", async () => {
    const { client } = await start({
      script: [
        {
          toolCalls: [
            { name: "get_weather", arguments: '{"city":"Oslo"}' },
            { name: "get_weather", arguments: '{"city": "Ber', id: "call_custom" },
          ],
          usage: { promptTokens: 40, completionTokens: 7 },
        },
      ],
    });
    const completion = await client.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "weather?" }],
      tools: [weatherTool],
    });
    const choice = completion.choices[0];
    expect(choice?.finish_reason).toBe("tool_calls");
    expect(choice?.message.content).toBeNull();
    expect(choice?.message.tool_calls).toEqual([
      { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } },
      { id: "call_custom", type: "function", function: { name: "get_weather", arguments: '{"city": "Ber' } },
    ]);
    expect(completion.usage).toEqual({ prompt_tokens: 40, completion_tokens: 7, total_tokens: 47 });
  });

  it("streams text in several deltas and sends a usage chunk when asked", async () => {
    const text = "The quick brown fox jumps over the lazy dog.";
    const { client, server } = await start({ script: [{ content: text }] });
    const stream = await client.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "tell me" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const deltas: string[] = [];
    let finishReason: string | null | undefined;
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      expect(chunk.object).toBe("chat.completion.chunk");
      const choice = chunk.choices[0];
      if (choice?.delta.content) deltas.push(choice.delta.content);
      if (choice?.finish_reason) finishReason = choice.finish_reason;
      if (chunk.usage) {
        expect(chunk.choices).toEqual([]);
        usage = chunk.usage;
      }
    }
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join("")).toBe(text);
    expect(finishReason).toBe("stop");
    expect(usage).toEqual({ prompt_tokens: 2, completion_tokens: 11, total_tokens: 13 });
    expect(server.requests[0]?.stream).toBe(true);
  });

  it("streams tool calls as index-keyed deltas that reassemble to the scripted calls", async () => {
    const scripted = [
      { name: "get_weather", arguments: '{"city":"Oslo","unit":"celsius"}' },
      { name: "lookup_order", arguments: '{"order_id": 12345, "broken": ', id: "call_x" },
    ];
    const { client } = await start({ script: [{ content: "Checking.", toolCalls: scripted }] });
    const stream = await client.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "go" }],
      tools: [weatherTool],
      stream: true,
    });
    const calls: Array<{ id: string; name: string; arguments: string }> = [];
    let argumentFragments = 0;
    let content = "";
    let finishReason: string | null | undefined;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      content += choice?.delta.content ?? "";
      if (choice?.finish_reason) finishReason = choice.finish_reason;
      for (const delta of choice?.delta.tool_calls ?? []) {
        const call = (calls[delta.index] ??= { id: "", name: "", arguments: "" });
        if (delta.id) call.id = delta.id;
        if (delta.function?.name) call.name += delta.function.name;
        if (delta.function?.arguments) {
          call.arguments += delta.function.arguments;
          argumentFragments++;
        }
      }
    }
    expect(content).toBe("Checking.");
    expect(finishReason).toBe("tool_calls");
    expect(calls).toEqual([
      { id: "call_1", name: "get_weather", arguments: scripted[0]?.arguments },
      { id: "call_x", name: "lookup_order", arguments: scripted[1]?.arguments },
    ]);
    expect(argumentFragments).toBeGreaterThan(2);
  });

  it("turns an error reply into the SDK's APIError with status, message, code and headers", async () => {
    const { client } = await start({
      script: [
        {
          error: { status: 429, message: "Rate limit reached", type: "requests", code: "rate_limit_exceeded" },
          headers: { "retry-after-ms": "1500" },
        },
      ],
    });
    const error = await client.chat.completions
      .create({ model: "m", messages: [{ role: "user", content: "hi" }] })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    const apiError = error as InstanceType<typeof OpenAI.APIError>;
    expect(apiError.status).toBe(429);
    expect(apiError.message).toContain("Rate limit reached");
    expect(apiError.code).toBe("rate_limit_exceeded");
    expect(apiError.headers?.get("retry-after-ms")).toBe("1500");
  });

  it("fails loudly with a 500 once the script is exhausted, and push() extends it", async () => {
    const { client, server } = await start({ script: [] });
    const error = await client.chat.completions
      .create({ model: "m", messages: [{ role: "user", content: "hi" }] })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(OpenAI.InternalServerError);
    expect((error as Error).message).toContain("script exhausted");
    server.setScript([]);
    server.push({ content: "pushed" });
    const completion = await client.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "hi" }],
    });
    expect(completion.choices[0]?.message.content).toBe("pushed");
  });

  it("rejects a wrong API key with 401", async () => {
    const { client, server } = await start({ apiKey: "secret", script: [{ content: "never" }] });
    const error = await client.chat.completions
      .create({ model: "m", messages: [{ role: "user", content: "hi" }] })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((error as InstanceType<typeof OpenAI.APIError>).code).toBe("invalid_api_key");
    const good = new OpenAI({ baseURL: server.url, apiKey: "secret", maxRetries: 0 });
    const completion = await good.chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }] });
    expect(completion.choices[0]?.message.content).toBe("never");
  });

  it("rejects tools with 400 without consuming a script entry", async () => {
    const { client, server } = await start({ rejectTools: true, script: [{ content: "text protocol answer" }] });
    const error = await client.chat.completions
      .create({ model: "m", messages: [{ role: "user", content: "hi" }], tools: [weatherTool] })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as Error).message).toContain("--enable-auto-tool-choice");
    const completion = await client.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "hi" }],
    });
    expect(completion.choices[0]?.message.content).toBe("text protocol answer");
    expect(server.requests.map((request) => Array.isArray(request.body.tools))).toEqual([true, false]);
  });

  it("lists models and rejects unknown ones only when models were given", async () => {
    const { client } = await start({ models: ["small", "large"], script: [{ content: "ok" }] });
    const listed = await client.models.list();
    expect(listed.data.map((model) => model.id)).toEqual(["small", "large"]);
    const error = await client.chat.completions
      .create({ model: "huge", messages: [{ role: "user", content: "hi" }] })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
    expect((error as Error).message).toContain("The model `huge` does not exist");
    const completion = await client.chat.completions.create({
      model: "small",
      messages: [{ role: "user", content: "hi" }],
    });
    expect(completion.choices[0]?.message.content).toBe("ok");
  });

  it("records requests and lets a script function answer from what the model was sent", async () => {
    const { client, server } = await start({
      script: (request, index) => {
        const last = request.messages.at(-1);
        return { content: `#${index} saw ${last?.role}: ${typeof last?.content === "string" ? last.content : "?"}` };
      },
    });
    await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "first" }] });
    const completion = await client.chat.completions.create({
      model: "m",
      messages: [
        { role: "user", content: "weather?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: "{}" } }],
        },
        { role: "tool", tool_call_id: "c1", content: "sunny" },
      ],
    });
    expect(completion.choices[0]?.message.content).toBe("#1 saw tool: sunny");
    expect(server.requests).toHaveLength(2);
    expect(server.requests[0]?.body.messages).toEqual([{ role: "user", content: "first" }]);
    expect(server.requests[1]?.headers.authorization).toBe("Bearer test");
    expect(server.requests[1]?.stream).toBe(false);
    expect(typeof server.requests[1]?.at).toBe("number");
  });

  it("surfaces a dropped connection as a connection error", async () => {
    const { client } = await start({ script: [{ dropConnection: true }] });
    const error = await client.chat.completions
      .create({ model: "m", messages: [{ role: "user", content: "hi" }] })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(OpenAI.APIConnectionError);
  });

  it("hangs until the client aborts, and close() completes with a request still pending", async () => {
    const { client, server } = await start({ script: [{ hang: true }, { hang: true }] });
    const controller = new AbortController();
    const aborted = client.chat.completions
      .create({ model: "m", messages: [{ role: "user", content: "hi" }] }, { signal: controller.signal })
      .catch((caught: unknown) => caught);
    setTimeout(() => controller.abort(), 50);
    expect(await aborted).toBeInstanceOf(OpenAI.APIUserAbortError);

    const pending = client.chat.completions
      .create({ model: "m", messages: [{ role: "user", content: "hi" }] })
      .catch((caught: unknown) => caught);
    await expect.poll(() => server.requests.length).toBe(2);
    const started = Date.now();
    await server.close();
    expect(Date.now() - started).toBeLessThan(1000);
    expect(await pending).toBeInstanceOf(OpenAI.APIConnectionError);
  });
});
