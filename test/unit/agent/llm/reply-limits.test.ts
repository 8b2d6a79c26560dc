// The bounds of a model reply's body (src/agent/llm/reply-limits.ts), through the real openai SDK
// against the scripted model server writing raw bytes: a reply that never ends, one that goes silent,
// one too long (streamed, whole, or one endless line), each stopped with its sentence; and the output
// limit sent under the name the server takes (output-limit.ts).
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { GlassboxError } from "../../../../src/agent/errors.js";
import { createOpenAIModel } from "../../../../src/agent/llm/index.js";
import { outputLimitNameFor, refusesLimitName } from "../../../../src/agent/llm/output-limit.js";
import { MAX_BODY_CHARS, MAX_REPLY_CHARS } from "../../../../src/agent/llm/reply-limits.js";
import type { ScriptedModelServer } from "../../../../src/testing/scripted-model-server.js";
import { closeServers, startServer } from "../../../helpers/agent.js";

afterEach(closeServers);

const event = (content: string) => `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content } }] })}\n\n`;

function modelAt(
  server: ScriptedModelServer,
  limits: { timeoutMs: number; idleMs?: number; maxOutputTokens?: number },
  warn: (message: string) => void = () => {},
) {
  return createOpenAIModel({ baseURL: server.url, model: "gpt-4o-mini", maxRetries: 0, warn, ...limits });
}

const SIZE_SENTENCE = `sent a reply longer than ${MAX_REPLY_CHARS.toLocaleString("en-US")} characters`;

async function failureOf(promise: Promise<unknown>): Promise<GlassboxError> {
  const error = await promise.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(GlassboxError);
  return error as GlassboxError;
}

const ask = { messages: [{ role: "user" as const, content: "Tell me everything." }], onDelta: () => {} };

describe("a model reply's body is bounded", () => {
  it("a model that streams forever: a token every 20 ms for a minute is stopped at the body's deadline", async () => {
    const server = await startServer({
      script: [{ raw: { body: Array.from({ length: 3_000 }, () => event("a")), partGapMs: 20 } }],
    });
    const failure = await failureOf(modelAt(server, { timeoutMs: 400 }).chat(ask));
    expect(failure.code).toBe("model_timeout");
    expect(failure.message).toBe(
      `The model server at ${server.url} was still sending its reply 0.4 s after it began; the call was stopped. Try again, or raise GLASSBOX_MODEL_TIMEOUT_MS (or set GLASSBOX_MAX_OUTPUT_TOKENS to ask for shorter replies).`,
    );
  });

  it("a reply that goes silent in the middle is stopped after the idle limit", async () => {
    const server = await startServer({
      script: [{ raw: { body: [event("Hel"), event("lo")], partGapMs: 60_000 } }],
    });
    const failure = await failureOf(modelAt(server, { timeoutMs: 60_000, idleMs: 300 }).chat(ask));
    expect(failure.message).toBe(
      `The model server at ${server.url} went silent for 0.3 s in the middle of its reply; the call was stopped. Try again, or raise GLASSBOX_MODEL_IDLE_MS.`,
    );
  });

  it("a reply longer than the cap is stopped", async () => {
    const piece = "x".repeat(200_000);
    const server = await startServer({
      script: [{ raw: { body: Array.from({ length: 8 }, () => event(piece)), partGapMs: 1 } }],
    });
    const failure = await failureOf(modelAt(server, { timeoutMs: 60_000 }).chat(ask));
    expect(failure.message).toContain(SIZE_SENTENCE);
  });

  it("regression: a reply that is not an event stream is read no further than its bound, whatever it holds: a JSON body padded to 12,000,000 characters is stopped with the size cap's sentence (finding 1)", async () => {
    // A valid chat completion with a two-word answer, but 12 MB long: read whole, it would be answered.
    const padding = Array.from({ length: 120 }, () => " ".repeat(100_000));
    const head = JSON.stringify({ choices: [{ index: 0, message: { role: "assistant", content: "tiny answer" } }] });
    const server = await startServer({
      script: [{ raw: { body: [head.slice(0, -1), ...padding, "}"], contentType: "application/json", partGapMs: 1 } }],
    });
    expect(120 * 100_000).toBeGreaterThan(MAX_BODY_CHARS);
    const failure = await failureOf(modelAt(server, { timeoutMs: 60_000 }).chat(ask));
    expect(failure.code).toBe("model_timeout");
    expect(failure.message).toBe(
      `The model server at ${server.url} ${SIZE_SENTENCE}; the call was stopped. Set GLASSBOX_MAX_OUTPUT_TOKENS to ask for shorter replies.`,
    );
  });

  it("an event stream whose line never ends is stopped at the same bound, not held whole", async () => {
    const line = Array.from({ length: 90 }, () => "x".repeat(100_000));
    const server = await startServer({
      script: [{ raw: { body: ["data: ", ...line], contentType: "text/event-stream", partGapMs: 1 } }],
    });
    const failure = await failureOf(modelAt(server, { timeoutMs: 60_000 }).chat(ask));
    expect(failure.message).toContain(SIZE_SENTENCE);
  });

  it("a reply within its bounds reads as before, and the output limit goes as max_tokens to a server other than OpenAI", async () => {
    const server = await startServer({
      script: [{ raw: { body: [event("Hel"), event("lo"), "data: [DONE]\n\n"], partGapMs: 5 } }, { content: "plain" }],
    });
    const model = modelAt(server, { timeoutMs: 60_000, idleMs: 5_000, maxOutputTokens: 300 });
    expect((await model.chat(ask)).content).toBe("Hello");
    expect(server.requests[0]?.body).toMatchObject({ max_tokens: 300 });
    expect(server.requests[0]?.body).not.toHaveProperty("max_completion_tokens");
    const unlimited = modelAt(server, { timeoutMs: 60_000 });
    expect((await unlimited.chat(ask)).content).toBe("plain");
    expect(server.requests[1]?.body).not.toHaveProperty("max_tokens");
  });

  it("the output limit goes as max_completion_tokens to OpenAI's hosts, max_tokens to any other", () => {
    for (const url of ["https://api.openai.com/v1", "https://eu.api.openai.com/v1", "https://API.OpenAI.com/v1/"])
      expect(outputLimitNameFor(url)).toBe("max_completion_tokens");
    for (const url of [
      "http://127.0.0.1:11434/v1",
      "https://openrouter.ai/api/v1",
      "https://api.openai.com.example.net/v1",
      "https://notopenai.com/v1",
      "not a url",
    ])
      expect(outputLimitNameFor(url)).toBe("max_tokens");
  });

  it("a server that refuses max_tokens (OpenAI's reasoning models, wherever they are served) is sent max_completion_tokens, then and from then on", async () => {
    const refusal = {
      status: 400,
      message:
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
      code: "unsupported_parameter",
    };
    const server = await startServer({
      script: (body) =>
        "max_tokens" in body
          ? { error: refusal }
          : { raw: { body: [event("Hel"), event("lo"), "data: [DONE]\n\n"], partGapMs: 5 } },
    });
    const warnings: string[] = [];
    const model = modelAt(server, { timeoutMs: 60_000, maxOutputTokens: 300 }, (message) => warnings.push(message));
    const reply = await model.chat(ask);
    expect(reply.content).toBe("Hello");
    expect(reply.notes).toContain(
      "the server refused max_tokens; the output limit went as max_completion_tokens, as it will from now on",
    );
    expect(server.requests.map((request) => [request.body.max_tokens, request.body.max_completion_tokens])).toEqual([
      [300, undefined],
      [undefined, 300],
    ]);
    expect((await model.chat(ask)).content).toBe("Hello");
    expect(server.requests[2]?.body).toMatchObject({ max_completion_tokens: 300 });
    expect(server.requests[2]?.body).not.toHaveProperty("max_tokens");
    expect(warnings).toEqual([
      `The model server at ${server.url} refuses max_tokens for 'gpt-4o-mini', so glassbox sends GLASSBOX_MAX_OUTPUT_TOKENS as max_completion_tokens from now on.`,
    ]);
  });

  it("a refusal of the limit's value, not its name, is not taken for one: it reaches the person as the server's error", async () => {
    const tooLarge = {
      status: 400,
      message: "max_tokens is too large: 300000. This model supports at most 16384 completion tokens.",
      code: "invalid_value",
    };
    const server = await startServer({ script: [{ error: tooLarge }] });
    const failure = await failureOf(modelAt(server, { timeoutMs: 60_000, maxOutputTokens: 300_000 }).chat(ask));
    expect(failure.message).toContain("max_tokens is too large");
    expect(server.requests).toHaveLength(1);
  });

  it("reads a refusal of either name, by the field an error names or else by its words", () => {
    const refusal = (message: string, fields: { param?: string; code?: string } = {}) =>
      new OpenAI.BadRequestError(400, { message, ...fields }, message, new Headers());
    const openai = refusal(
      "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
      { param: "max_tokens", code: "unsupported_parameter" },
    );
    expect(refusesLimitName(openai, "max_tokens")).toBe(true);
    expect(refusesLimitName(openai, "max_completion_tokens")).toBe(false); // it names the other one
    // An older Azure API version, which does not know the newer name.
    const older = refusal("Unrecognized request argument supplied: max_completion_tokens");
    expect(refusesLimitName(older, "max_completion_tokens")).toBe(true);
    expect(refusesLimitName(refusal("max_tokens must be at least 1"), "max_tokens")).toBe(false);
  });
});
