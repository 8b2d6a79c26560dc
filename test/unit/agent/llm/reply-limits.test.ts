// The bounds of a model reply's body (src/agent/llm/reply-limits.ts), through the real openai SDK
// against the scripted model server writing raw SSE: a reply that never ends, one that goes silent,
// one too long, each stopped with its sentence; and the output limit sent as this server takes it.
import { afterEach, describe, expect, it } from "vitest";
import { GlassboxError } from "../../../../src/agent/errors.js";
import { createOpenAIModel } from "../../../../src/agent/llm/index.js";
import { MAX_REPLY_CHARS } from "../../../../src/agent/llm/reply-limits.js";
import type { ScriptedModelServer } from "../../../../src/testing/scripted-model-server.js";
import { closeServers, startServer } from "../../../helpers/agent.js";

afterEach(closeServers);

const event = (content: string) => `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content } }] })}\n\n`;

function modelAt(
  server: ScriptedModelServer,
  limits: { timeoutMs: number; idleMs?: number; maxOutputTokens?: number },
) {
  return createOpenAIModel({ baseURL: server.url, model: "gpt-4o-mini", maxRetries: 0, ...limits });
}

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
    expect(failure.message).toContain(`sent a reply longer than ${MAX_REPLY_CHARS.toLocaleString("en-US")} characters`);
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
});
