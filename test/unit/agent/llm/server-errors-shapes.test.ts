// Errors that are not OpenAI-shaped, end to end through the real openai SDK against the scripted
// server: plain text, HTML, TGI's `{"error": "<text>"}`, older vLLM's and Mistral's flat
// `{"object": "error", ...}`, Gemini's JSON array, an HTTP 200 whose body is only an error, and an
// error chunk in the middle of a stream. Each reaches the person as one glassbox error whose sentence
// keeps the server's own reason and names the right setting; a 4xx is never retried. Each body is
// written byte for byte; the comment above each says where that shape was seen.
import { afterEach, describe, expect, it } from "vitest";
import { GlassboxError } from "../../../../src/agent/errors.js";
import { describeModelFailure } from "../../../../src/agent/llm/server-errors.js";
import { runAgent } from "../../../../src/agent/loop.js";
import type { RawReply, ScriptedReply } from "../../../../src/testing/scripted-model-server.js";
import { calculator } from "../../../../src/tools/builtin/calculator.js";
import { createToolRegistry } from "../../../../src/tools/registry.js";
import { closeServers, modelFor, startServer } from "../../../helpers/agent.js";

afterEach(closeServers);

const question = [{ role: "user" as const, content: "What is 2+2?" }];
const modes = [
  { mode: "streamed", stream: true },
  { mode: "not streamed", stream: false },
];
/** Exact bytes, as the server sent them. */
const raw = (status: number, body: unknown, more: Partial<RawReply> = {}): ScriptedReply => ({
  raw: { status, body: typeof body === "string" ? body : JSON.stringify(body), ...more },
});
/** Keeps the SDK's waits short where a 5xx is retried. */
const quickRetry = { "retry-after-ms": "10" };

/** What the person is told: the model layer's rejection, which must be glassbox's own error. */
async function failureOf(reply: ScriptedReply | ScriptedReply[], stream: boolean, model = "scripted-model") {
  const server = await startServer({ script: Array.isArray(reply) ? reply : [reply, { content: "never" }] });
  const failure = await modelFor(server, { stream, model })
    .chat({ messages: question, onDelta: () => {} })
    .catch((error: unknown) => error);
  expect(failure).toBeInstanceOf(GlassboxError);
  return { server, error: failure as GlassboxError };
}

describe("a body that is not JSON", () => {
  it.each(modes)(
    "plain text: Ollama's '404 page not found' for a wrong path names OPENAI_BASE_URL, once ($mode)",
    async ({ stream }) => {
      // Go's mux behind Ollama, for a path it does not serve (taketwo/llm-ollama#2: "Error: 404 page not found").
      const { server, error } = await failureOf(
        raw(404, "404 page not found", { contentType: "text/plain; charset=utf-8" }),
        stream,
      );
      expect(error.code).toBe("model_unreachable");
      expect(error.message).toContain("(HTTP 404: page not found)");
      expect(error.message).toContain("OPENAI_BASE_URL");
      expect(error.message).not.toContain("LLM_MODEL");
      expect(server.requests).toHaveLength(1);
    },
  );

  it.each(modes)(
    "HTML: a proxy's 502 page is retried as a 5xx, then one sentence with its title ($mode)",
    async ({ stream }) => {
      // Cloudflare's 502 page in front of an API (yoheinakajima/babyagi#64), cut to its head.
      const page =
        '<!DOCTYPE html>\n<html class="no-js" lang="en-US">\n<head>\n<title>api.example.com | 502: Bad gateway</title>\n<meta charset="UTF-8" />\n</head>\n<body><div id="cf-wrapper"><h1><span>Bad gateway</span></h1></div></body>\n</html>\n';
      const reply = raw(502, page, { contentType: "text/html; charset=UTF-8", headers: quickRetry });
      const { server, error } = await failureOf([reply, reply, reply, reply], stream);
      expect(server.requests).toHaveLength(4);
      expect(error.code).toBe("model_unavailable");
      expect(error.message).toBe(
        "I can't reach the model right now (HTTP 502: api.example.com | 502: Bad gateway); please try again in a minute.",
      );
    },
  );
});

describe("JSON errors in other shapes keep the server's reason, and a 4xx is not retried", () => {
  const shapes = [
    {
      shape: "TGI: {error: <text>, error_type}",
      // opea-project/GenAIInfra#487 (the body), bytedance/UI-TARS-desktop#626 (an HTTP 422 through the openai SDK).
      reply: raw(422, {
        error:
          "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 2048. Given: 1887 `inputs` tokens and 1024 `max_new_tokens`",
        error_type: "validation",
      }),
      reason: "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 2048",
      status: 422,
    },
    {
      shape: "older vLLM: {object: error, message, type, code}",
      // vllm-project/vllm#12886 (the body, before vLLM nested errors in v0.10.1).
      reply: raw(400, {
        object: "error",
        message:
          "This model's maximum context length is 2048 tokens. However, you requested 2723 tokens (1699 in the messages, 1024 in the completion). Please reduce the length of the messages or completion.",
        type: "BadRequestError",
        param: null,
        code: 400,
      }),
      reason: "This model's maximum context length is 2048 tokens",
      status: 400,
    },
    {
      shape: "Gemini's OpenAI compatibility: a JSON array",
      // google-gemini/gemini-cli#12823 (the array as printed).
      reply: raw(400, [
        {
          error: {
            code: 400,
            message: "Request contains an invalid argument.",
            errors: [{ message: "Request contains an invalid argument.", domain: "global", reason: "badRequest" }],
            status: "INVALID_ARGUMENT",
          },
        },
      ]),
      reason: "Request contains an invalid argument.",
      status: 400,
    },
  ];
  for (const { mode, stream } of modes) {
    it.each(shapes)(`$shape (${mode})`, async ({ reply, reason, status }) => {
      const { server, error } = await failureOf(reply, stream);
      expect(error.code).toBe("model_rejected");
      expect(error.message).toContain(`HTTP ${status}: ${reason}`);
      expect(error.message).not.toMatch(/internal error|try again/);
      expect(server.requests).toHaveLength(1);
    });
  }

  it.each(modes)(
    "an exhausted quota (HTTP 429) is not retried and points at billing, not at waiting ($mode)",
    async ({ stream }) => {
      // ChatGPTNextWeb/NextChat#3664 (the body).
      const { server, error } = await failureOf(
        raw(429, {
          error: {
            message:
              "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
            type: "insufficient_quota",
            param: null,
            code: "insufficient_quota",
          },
        }),
        stream,
      );
      expect(server.requests).toHaveLength(1);
      expect(error.code).toBe("model_rejected");
      expect(error.message).toContain("You exceeded your current quota");
      expect(error.message).toContain("billing");
      expect(error.message).not.toContain("try again");
    },
  );

  it.each(modes)("a 403 that is not about the key does not blame OPENAI_API_KEY ($mode)", async ({ stream }) => {
    // OpenRouter's documented 403 (openrouter.ai/docs/api/reference/errors-and-debugging), its error shape.
    const { error } = await failureOf(
      raw(403, {
        error: {
          code: 403,
          message: "Your chosen model requires moderation and your input was flagged",
          metadata: { reasons: ["harassment"] },
        },
      }),
      stream,
    );
    expect(error.code).toBe("model_rejected");
    expect(error.message).toContain("your input was flagged");
    expect(error.message).not.toContain("OPENAI_API_KEY");
  });
});

describe("an unknown model: set LLM_MODEL to one of what /v1/models offers", () => {
  const unknownModel = [
    {
      server: "Ollama",
      // netease-youdao/QAnything#555 (HTTP 404 through the openai SDK).
      reply: raw(404, {
        error: {
          message: 'model "llama3" not found, try pulling it first',
          type: "api_error",
          param: null,
          code: null,
        },
      }),
    },
    {
      server: "older vLLM",
      // vllm-project/vllm#3485 (the body, HTTP 404).
      reply: raw(404, {
        object: "error",
        message: "The model `llama3` does not exist.",
        type: "NotFoundError",
        param: null,
        code: 404,
      }),
    },
    {
      server: "vLLM",
      // vllm-project/vllm#58025 (the current body).
      reply: raw(404, {
        error: { message: "The model `llama3` does not exist.", type: "NotFoundError", param: "model", code: 404 },
      }),
    },
    {
      server: "Gemini's OpenAI compatibility",
      // The message of crystal-autobot/autobot#63 ("v1main": through the compatibility layer), in Gemini's array (hexdocom/lemonai#54).
      reply: raw(404, [
        {
          error: {
            code: 404,
            message:
              "models/llama3 is not found for API version v1main, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.",
            status: "NOT_FOUND",
          },
        },
      ]),
    },
    {
      server: "DeepSeek (an HTTP 400)",
      // langbot-app/LangBot#1643, deepwn/addi#13 (the body).
      reply: raw(400, {
        error: {
          message: "Model Not Exist",
          type: "invalid_request_error",
          param: null,
          code: "invalid_request_error",
        },
      }),
    },
    {
      server: "Mistral (flat, an HTTP 400)",
      // lfnovo/open-notebook#441, tmc/langchaingo#1233 (the body).
      reply: raw(400, {
        object: "error",
        message: "Invalid model: llama3",
        type: "invalid_model",
        param: null,
        code: "1500",
      }),
    },
    {
      server: "SiliconFlow-style {code, message, data}",
      // ErlichLiu/DeepClaude#92 (the body), openai/openai-node#1317 (the same flat shape).
      reply: raw(400, { code: 20012, message: "Model does not exist. Please check it carefully.", data: null }),
    },
  ];
  for (const { mode, stream } of modes) {
    it.each(unknownModel)(`$server (${mode})`, async ({ reply }) => {
      const { server, error } = await failureOf(reply, stream, "llama3");
      expect(error.code).toBe("model_not_found");
      // The scripted server's /v1/models lists "scripted-model".
      expect(error.message).toMatch(
        /^The model 'llama3' is not available at http:\/\/127\.0\.0\.1:\d+\/v1 \(HTTP 40[04]: .+\); set LLM_MODEL to one of: scripted-model\.$/,
      );
      expect(error.message).not.toContain("OPENAI_BASE_URL");
      expect(server.requests).toHaveLength(1);
    });
  }

  it("says what the server's own reason says when it lists no models", async () => {
    const server = await startServer({ models: [], script: [{ content: "never" }] });
    const error = await modelFor(server)
      .chat({ messages: question })
      .catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(GlassboxError);
    expect((error as GlassboxError).message).toContain("set LLM_MODEL to a model that server offers");
  });

  it("still gives the sentence when listing the models fails", async () => {
    const { error } = await failureOf(unknownModel[0]!.reply, false, "llama3");
    const again = await describeModelFailure(error.cause, { baseURL: "http://127.0.0.1:1/v1", model: "llama3" }, () =>
      Promise.reject(new Error("connection refused")),
    );
    expect(again.code).toBe("model_not_found");
    expect(again.message).toContain('model "llama3" not found, try pulling it first');
    expect(again.message).toContain("set LLM_MODEL to a model that server offers");
  });

  it.each(modes)("Azure's missing deployment names the deployment, not a model list ($mode)", async ({ stream }) => {
    // chatboxai/chatbox#646, rashadphz/farfalle#79 (the body, HTTP 404).
    const { error } = await failureOf(
      raw(404, {
        error: {
          code: "DeploymentNotFound",
          message:
            "The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again.",
        },
      }),
      stream,
      "gpt-4o",
    );
    expect(error.code).toBe("model_not_found");
    expect(error.message).toContain("The API deployment for this resource does not exist");
    expect(error.message).toContain("set LLM_MODEL to the name of one of the resource's deployments");
    expect(error.message).not.toContain("one of:");
  });
});

describe("an HTTP 200 whose body is only an error", () => {
  it.each(modes)(
    "LM Studio's 200 for a path it does not serve names OPENAI_BASE_URL, not retried ($mode)",
    async ({ stream }) => {
      // lmstudio-ai/lmstudio-bug-tracker#618 (HTTP 200, application/json; also for streamed requests).
      const { server, error } = await failureOf(
        raw(
          200,
          { error: "Unexpected endpoint or method. (POST /chat/completions)" },
          { contentType: "application/json; charset=utf-8" },
        ),
        stream,
      );
      expect(error.code).toBe("model_unreachable");
      expect(error.message).toContain("Unexpected endpoint or method. (POST /chat/completions)");
      expect(error.message).toContain("OPENAI_BASE_URL");
      expect(server.requests).toHaveLength(1);
    },
  );

  it.each(modes)("vLLM's 200 carrying a 400 is a refused request, not retried ($mode)", async ({ stream }) => {
    // langgenius/dify-plugin-sdks#74 (vLLM answered the context-length error with HTTP 200), the body of vllm-project/vllm#12886.
    const { server, error } = await failureOf(
      raw(200, {
        object: "error",
        message:
          "This model's maximum context length is 2048 tokens. However, you requested 2723 tokens (1699 in the messages, 1024 in the completion). Please reduce the length of the messages or completion.",
        type: "BadRequestError",
        param: null,
        code: 400,
      }),
      stream,
    );
    expect(error.code).toBe("model_rejected");
    expect(error.message).toContain("This model's maximum context length is 2048 tokens");
    expect(error.message).not.toMatch(/internal error|try again/);
    expect(server.requests).toHaveLength(1);
  });
});

describe("an error chunk in the middle of a stream", () => {
  const sse = (...events: unknown[]) =>
    events.map((event) => `data: ${typeof event === "string" ? event : JSON.stringify(event)}\n\n`);
  const chunk = (content: string) => ({
    id: "gen-1",
    object: "chat.completion.chunk",
    created: 1,
    model: "scripted-model",
    choices: [{ index: 0, delta: { content }, finish_reason: null }],
  });

  it("OpenRouter's documented error chunk ends the answer with the provider's reason", async () => {
    // openrouter.ai/docs/api/reference/streaming ("Mid-Stream Errors", the example event).
    const body = sse(chunk("The answer is"), {
      id: "cmpl-abc123",
      object: "chat.completion.chunk",
      created: 1234567890,
      model: "gpt-3.5-turbo",
      provider: "openai",
      error: { code: "server_error", message: "Provider disconnected" },
      choices: [{ index: 0, delta: { content: "" }, finish_reason: "error" }],
    });
    const server = await startServer({ script: [{ raw: { body } }] });
    const result = await runAgent(
      { model: modelFor(server), tools: createToolRegistry([calculator]) },
      { input: "2+2?" },
    );
    expect(result.stopReason).toBe("error");
    expect(result.error?.code).toBe("model_unavailable");
    expect(result.output).toBe(
      "The model server answered with an error (Provider disconnected); please try again in a minute.",
    );
    expect(server.requests).toHaveLength(1);
  });

  it("TGI's validation error as an event is a refused request with its reason", async () => {
    // opea-project/GenAIInfra#487 (the events as TGI sent them).
    const body = sse(
      {
        error:
          "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 2048. Given: 1887 `inputs` tokens and 1024 `max_new_tokens`",
        error_type: "validation",
      },
      "[DONE]",
    );
    const { error } = await failureOf({ raw: { body } }, true);
    expect(error.code).toBe("model_rejected");
    expect(error.message).toContain("Input validation error");
    expect(error.message).not.toContain("try again");
  });

  it("vLLM's streamed error object keeps its message", async () => {
    // vLLM's create_streaming_error_response: `data: {"error": <ErrorResponse>}` (the older, flat ErrorResponse).
    const body = sse(
      chunk("Partly"),
      {
        error: {
          object: "error",
          message: "The decoder prompt is longer than the maximum model length.",
          type: "BadRequestError",
          param: null,
          code: 400,
        },
      },
      "[DONE]",
    );
    const { error } = await failureOf({ raw: { body } }, true);
    expect(error.code).toBe("model_rejected");
    expect(error.message).toContain("The decoder prompt is longer than the maximum model length.");
  });
});
