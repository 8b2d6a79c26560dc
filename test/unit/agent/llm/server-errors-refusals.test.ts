// Capability refusals, end to end through the real openai SDK against the scripted server: a server
// that refuses `tools`, `stream_options`, `tool_choice` or `parallel_tool_calls` is never sent the
// same request again. It gets it once more without the refused option (the text protocol where
// `tools` itself is refused), the refusal is remembered for the process and announced once, in a
// sentence naming the server setting that would fix it. Each body is written byte for byte as the
// server sent it; the comment above each says where that shape was seen.
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { GlassboxError } from "../../../../src/agent/errors.js";
import { readableModelErrors } from "../../../../src/agent/llm/server-errors.js";
import { capabilitiesOf, fixFor, refusedOption } from "../../../../src/agent/llm/capabilities.js";
import { runAgent } from "../../../../src/agent/loop.js";
import type { ScriptedReply } from "../../../../src/testing/scripted-model-server.js";
import { calculator } from "../../../../src/tools/builtin/calculator.js";
import { createToolRegistry } from "../../../../src/tools/registry.js";
import { undiciFetch } from "../../../../src/undici-fetch.js";
import { closeServers, modelFor, startServer } from "../../../helpers/agent.js";

afterEach(closeServers);

const tools = () => createToolRegistry([calculator]);
const calculatorSpec = tools().specs();
const question = [{ role: "user" as const, content: "What is 2+2?" }];
const modes = [
  { mode: "streamed", stream: true },
  { mode: "not streamed", stream: false },
];
/** Refusals are remembered per server and model for the process: every test asks for a model of its own. */
let models = 0;
const freshModel = () => `refusal-model-${++models}`;
/** Exact bytes, as the server sent them. */
const raw = (status: number, body: unknown): ScriptedReply => ({
  raw: { status, body: typeof body === "string" ? body : JSON.stringify(body) },
});

// --- `tools` refused: the text protocol, once -------------------------------------------------

const toolRefusals = [
  {
    server: "Ollama (a model without tools)",
    // louisho5/picobot#6 and ollama/ollama#6027 (curl -D: HTTP 400, application/json).
    reply: raw(400, {
      error: {
        message: "registry.ollama.ai/library/gemma3:4b does not support tools",
        type: "api_error",
        param: null,
        code: null,
      },
    }),
    fix: "GLASSBOX_TOOL_MODE=text",
  },
  {
    server: "vLLM without --enable-auto-tool-choice (current error shape)",
    // The message: vllm-project/vllm#30613 (serving_chat.py); nested in "error" since v0.10.1 (vllm-project/vllm#22099, neutree-ai/neutree#350).
    reply: raw(400, {
      error: {
        message: '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
        type: "BadRequestError",
        param: null,
        code: 400,
      },
    }),
    fix: "start the server with --enable-auto-tool-choice --tool-call-parser <parser for the model>",
  },
  {
    server: "vLLM without --enable-auto-tool-choice (older, flat error shape)",
    // langchain4j/langchain4j#3475 (title: the whole body).
    reply: raw(400, {
      object: "error",
      message: '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
      type: "BadRequestError",
      param: null,
      code: 400,
    }),
    fix: "start the server with --enable-auto-tool-choice --tool-call-parser <parser for the model>",
  },
  {
    server: "vLLM 0.5, before tool calling (pydantic extra_forbidden for tools and tool_choice)",
    // vllm-project/vllm#6631 (the message is a Python repr of the validation errors).
    reply: raw(400, {
      object: "error",
      message:
        "[{'type': 'extra_forbidden', 'loc': ('body', 'tool_choice'), 'msg': 'Extra inputs are not permitted', 'input': 'auto'}, {'type': 'extra_forbidden', 'loc': ('body', 'tools'), 'msg': 'Extra inputs are not permitted', 'input': [{'type': 'function', 'function': {'name': 'calculator'}}]}]",
      type: "BadRequestError",
      param: null,
      code: 400,
    }),
    fix: "GLASSBOX_TOOL_MODE=text",
  },
  {
    server: "llama.cpp server without --jinja (an HTTP 500)",
    // QwenLM/Qwen3.8#44 (the body), defilantech/LLMKube#126 ("500 tools param requires --jinja flag").
    reply: raw(500, { error: { code: 500, message: "tools param requires --jinja flag", type: "server_error" } }),
    fix: "start the server with --jinja",
  },
  {
    server: "llama.cpp server before --jinja (flat body, an HTTP 500)",
    // ggml-org/llama.cpp#10920, the body as the issue shows it.
    reply: raw(500, { code: 500, message: "Unsupported param: tools", type: "server_error" }),
    fix: "GLASSBOX_TOOL_MODE=text",
  },
  {
    server: "OpenRouter, a model whose providers have no tool use (an HTTP 404)",
    // evalstate/fast-agent#122, bobrware/bobrchat#60 (the response body).
    reply: raw(404, {
      error: {
        message:
          "No endpoints found that support tool use. To learn more about provider routing, visit: https://openrouter.ai/docs/provider-routing",
        code: 404,
      },
    }),
    fix: "GLASSBOX_TOOL_MODE=text",
  },
  {
    server: "Xinference, a model outside its tool-calling list (FastAPI's {detail})",
    // xorbitsai/inference#1630 (the body, HTTP 400).
    reply: raw(400, {
      detail:
        "Only ['chatglm3', 'glm4-chat', 'gorilla-openfunctions-v1', 'qwen-chat', 'qwen1.5-chat', 'qwen2-instruct'] support tool calls",
    }),
    fix: "GLASSBOX_TOOL_MODE=text",
  },
];

describe("a server that refuses tools gets the text protocol", () => {
  for (const { mode, stream } of modes) {
    it.each(toolRefusals)(`$server (${mode})`, async ({ reply, fix }) => {
      const server = await startServer({
        script: [reply, { content: '{"answer": "4"}' }, { content: '{"answer": "still 4"}' }],
      });
      const warnings: string[] = [];
      const model = modelFor(server, { model: freshModel(), stream, warn: (message) => warnings.push(message) });

      const notes: string[] = [];
      const result = await runAgent(
        { model, tools: tools() },
        {
          input: "What is 2+2?",
          onEvent: (event) => void (event.type === "model_end" && notes.push(...(event.response.notes ?? []))),
        },
      );

      expect(result).toMatchObject({ stopReason: "final", output: "4" });
      // The trace says why the step described the tools in the prompt.
      expect(notes).toEqual([
        expect.stringMatching(
          /^native tool calling refused by the server \(.+\); tools described in the prompt from now on \(the text protocol\)$/,
        ),
      ]);
      // Refused once, never sent again as it was (a 500 included: the SDK does not retry it).
      expect(server.requests).toHaveLength(2);
      expect(server.requests[0]?.stream).toBe(stream);
      expect(server.requests[0]?.body.tools).toBeDefined();
      expect(server.requests[1]?.body.tools).toBeUndefined();
      expect(server.requests[1]?.body.tool_choice).toBeUndefined();
      expect(model.toolMode).toBe("text");
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain("refuses native tool calls");
      expect(warnings[0]).toContain(fix);

      // Remembered: the next run goes straight to the text protocol, and says nothing again.
      const again = await runAgent({ model, tools: tools() }, { input: "And now?" });
      expect(again.output).toBe("still 4");
      expect(server.requests).toHaveLength(3);
      expect(server.requests[2]?.body.tools).toBeUndefined();
      expect(warnings).toHaveLength(1);
    });
  }

  it("remembers the refusal for the process: another client of the same server and model starts in text", async () => {
    const server = await startServer({
      script: [toolRefusals[0]!.reply, { content: '{"answer": "4"}' }, { content: '{"answer": "5"}' }],
    });
    const name = freshModel();
    const firstWarnings: string[] = [];
    const secondWarnings: string[] = [];
    await runAgent(
      { model: modelFor(server, { model: name, warn: (message) => firstWarnings.push(message) }), tools: tools() },
      { input: "2+2?" },
    );

    const second = modelFor(server, { model: name, warn: (message) => secondWarnings.push(message) });
    const result = await runAgent({ model: second, tools: tools() }, { input: "2+3?" });

    expect(result.output).toBe("5");
    expect(server.requests).toHaveLength(3);
    expect(server.requests[2]?.body.tools).toBeUndefined();
    expect(firstWarnings).toHaveLength(1);
    expect(secondWarnings).toEqual([]);
  });

  // Regression: llama.cpp's refusal is a 500, which the SDK retried three times before the fallback.
  it.each(modes)(
    "does not retry llama.cpp's 500 refusal in native mode, and names --jinja and GLASSBOX_TOOL_MODE ($mode)",
    async ({ stream }) => {
      const server = await startServer({ script: [toolRefusals[4]!.reply, { content: "never" }] });
      const model = modelFor(server, { model: freshModel(), stream, toolMode: "native" });

      const failure = await model
        .chat({ messages: question, tools: calculatorSpec, onDelta: () => {} })
        .catch((error: unknown) => error);

      expect(failure).toBeInstanceOf(GlassboxError);
      expect(failure).toMatchObject({ code: "model_rejected", status: 500 });
      const sentence = (failure as GlassboxError).message;
      expect(sentence).toContain("tools param requires --jinja flag");
      expect(sentence).toContain("start the server with --jinja");
      expect(sentence).toContain("GLASSBOX_TOOL_MODE=auto");
      expect(sentence).not.toContain("try again");
      expect(server.requests).toHaveLength(1);
      expect(model.toolMode).toBe("native");
    },
  );
});

// --- `stream_options` refused: streamed without it ----------------------------------------------

const streamOptionRefusals = [
  {
    server: "an OpenAI-compatible gateway (unknown_parameter)",
    // QuantumNous/new-api#418 (its request ids left out).
    reply: raw(400, {
      error: {
        message: "Unknown parameter: 'stream_options'.",
        type: "invalid_request_error",
        param: "stream_options",
        code: "unknown_parameter",
      },
    }),
  },
  {
    server: "Azure OpenAI on an older api-version",
    // Azure's wording for a field its api-version lacks (Azure/azure-sdk-for-net#45719; BurnHair/docs#85
    // for stream_options), in Azure's error shape (openai/openai-python#863).
    reply: raw(400, {
      error: {
        message: "Unrecognized request argument supplied: stream_options",
        type: "invalid_request_error",
        param: "",
        code: null,
      },
    }),
  },
  {
    server: "a FastAPI/pydantic server (Mistral's 422 shape, message an object)",
    // The shape of nomtek/mistralai_client_dart#44 (there for messages fields), here for stream_options.
    reply: raw(422, {
      object: "error",
      message: {
        detail: [
          {
            type: "extra_forbidden",
            loc: ["body", "stream_options"],
            msg: "Extra inputs are not permitted",
            input: { include_usage: true },
          },
        ],
      },
      type: "invalid_request_error",
      param: null,
      code: null,
    }),
  },
];

describe("a server that refuses stream_options streams without it", () => {
  it.each(streamOptionRefusals)("$server", async ({ reply }) => {
    const server = await startServer({ script: [reply, { content: "Four, I think." }, { content: "Five." }] });
    const warnings: string[] = [];
    const model = modelFor(server, { model: freshModel(), warn: (message) => warnings.push(message) });
    const deltas: string[] = [];

    const response = await model.chat({ messages: question, onDelta: (text) => deltas.push(text) });

    expect(response.content).toBe("Four, I think.");
    // The trace says what was left out, and why.
    expect(response.notes).toContainEqual(expect.stringContaining("stream_options left out: the server refuses it"));
    expect(deltas.join("")).toBe("Four, I think.");
    expect(server.requests).toHaveLength(2);
    expect(server.requests[0]?.body.stream_options).toEqual({ include_usage: true });
    expect(server.requests[1]?.stream).toBe(true);
    expect(server.requests[1]?.body.stream_options).toBeUndefined();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain("refuses stream_options");
    expect(warnings[0]).toContain("GLASSBOX_STREAM=false");

    await model.chat({ messages: question, onDelta: () => {} });
    expect(server.requests).toHaveLength(3);
    expect(server.requests[2]?.body.stream_options).toBeUndefined();
    expect(warnings).toHaveLength(1);
  });
});

// --- `tool_choice` refused: sent without it, tools kept ------------------------------------------

const toolChoiceRefusals = [
  {
    server: "OpenRouter (an HTTP 404)",
    // zed-industries/zed#36094 (the body).
    reply: raw(404, {
      error: {
        message:
          "No endpoints found that support the provided 'tool_choice' value. To learn more about provider routing, visit: https://openrouter.ai/docs/provider-routing",
        code: 404,
      },
    }),
  },
  {
    server: "Z.AI (GLM), to anything but auto",
    // vectorize-io/hindsight#4246 (the body, HTTP 400, through OpenRouter from Z.AI).
    reply: raw(400, { error: { message: "Tool choice must be auto", code: 400, metadata: { provider_name: "Z.AI" } } }),
  },
  {
    server: "DeepSeek's reasoner",
    // The message of i-am-bee/beeai-framework#1441 and agentscope-ai/agentscope#1608, in DeepSeek's error shape (langbot-app/LangBot#1643).
    reply: raw(400, {
      error: {
        message: "deepseek-reasoner does not support this tool_choice",
        type: "invalid_request_error",
        param: null,
        code: "invalid_request_error",
      },
    }),
  },
];

describe("a server that refuses tool_choice is asked again without it, tools kept", () => {
  for (const { mode, stream } of modes) {
    it.each(toolChoiceRefusals)(`$server (${mode})`, async ({ reply }) => {
      const server = await startServer({ script: [reply, { content: "So far: 4." }, { content: "Still 4." }] });
      const warnings: string[] = [];
      const model = modelFor(server, { model: freshModel(), stream, warn: (message) => warnings.push(message) });

      const response = await model.chat({
        messages: question,
        tools: calculatorSpec,
        toolChoice: "none",
        onDelta: () => {},
      });

      expect(response.content).toBe("So far: 4.");
      expect(response.notes).toContainEqual(expect.stringContaining("tool_choice left out: the server refuses it"));
      expect(server.requests).toHaveLength(2);
      expect(server.requests[0]?.body.tool_choice).toBe("none");
      expect(server.requests[1]?.body.tool_choice).toBeUndefined();
      expect(server.requests[1]?.body.tools).toBeDefined();
      expect(model.toolMode).toBe("auto");
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain("refuses tool_choice");

      await model.chat({ messages: question, tools: calculatorSpec, toolChoice: "none", onDelta: () => {} });
      expect(server.requests[2]?.body.tool_choice).toBeUndefined();
      expect(warnings).toHaveLength(1);
    });
  }
});

// --- `parallel_tool_calls` refused: glassbox's own client never sends it, so the SDK is used directly -

const parallelRefusals = [
  {
    server: "OpenAI, a model without parallel tool calls",
    // evalstate/fast-agent#279, run-llama/llama_index#20865.
    reply: raw(400, {
      error: {
        message: "Unsupported parameter: 'parallel_tool_calls' is not supported with this model.",
        type: "invalid_request_error",
        param: "parallel_tool_calls",
        code: "unsupported_parameter",
      },
    }),
  },
  {
    server: "Azure OpenAI, an older deployment",
    // Azure/azure-sdk-for-net#45719 (the message), openai/openai-python#1492 (Azure, unknown_parameter).
    reply: raw(400, {
      error: {
        message: "Unknown parameter: 'parallel_tool_calls'.",
        type: "invalid_request_error",
        param: "parallel_tool_calls",
        code: "unknown_parameter",
      },
    }),
  },
  {
    server: "Gemini's OpenAI compatibility (a JSON array, 'Unknown name')",
    // The array and wording of hexdocom/lemonai#54 (there for enable_thinking), here for parallel_tool_calls.
    reply: raw(400, [
      {
        error: {
          code: 400,
          message: 'Invalid JSON payload received. Unknown name "parallel_tool_calls": Cannot find field.',
          status: "INVALID_ARGUMENT",
        },
      },
    ]),
  },
];

describe("a server that refuses parallel_tool_calls is asked again without it", () => {
  for (const { mode, stream } of modes) {
    it.each(parallelRefusals)(`$server (${mode})`, async ({ reply }) => {
      const server = await startServer({ script: [reply, { content: "4" }] });
      const client = new OpenAI({
        baseURL: server.url,
        apiKey: "test-key",
        maxRetries: 0,
        fetch: readableModelErrors(undiciFetch),
      });
      const warnings: string[] = [];
      const capabilities = capabilitiesOf({ baseURL: server.url, model: freshModel() }, (message) =>
        warnings.push(message),
      );

      const body = { model: "m", messages: question, tools: calculatorSpec, parallel_tool_calls: false, stream };
      const text = await capabilities.send(body, async (params) => {
        if (!params.stream)
          return (await client.chat.completions.create({ ...params, stream: false })).choices[0]?.message.content;
        let joined = "";
        for await (const chunk of await client.chat.completions.create({ ...params, stream: true }))
          joined += chunk.choices[0]?.delta.content ?? "";
        return joined;
      });

      expect(text).toBe("4");
      expect(server.requests).toHaveLength(2);
      expect(server.requests[0]?.body.parallel_tool_calls).toBe(false);
      expect(server.requests[1]?.body.parallel_tool_calls).toBeUndefined();
      expect(server.requests[1]?.body.tools).toBeDefined();
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain("refuses parallel_tool_calls");
    });
  }
});

describe("reading a refusal", () => {
  // Regression: any 400 mentioning "tool" counted as a refusal of the tools parameter.
  it.each([
    // A conversation the server cannot follow (OpenAI's wording), not a refused option.
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
    // vLLM, tool_choice without tools: a request to mend, not an option refused (plmbr/notebook-intelligence#55).
    "Value error, When using `tool_choice`, `tools` must be set.",
    // Groq on a null tool_choice (plmbr/notebook-intelligence#115).
    "code=400, message=Only allowed string values for 'tool_choice' are [none, auto, required], type=invalid_request_error",
  ])("is not a refusal: %s", (message) => {
    expect(refusedOption({ status: 400, message }, ["tools", "tool_choice", "stream_options"])).toBeUndefined();
  });

  it("only counts an option the request carried", () => {
    const message = "Unrecognized request argument supplied: stream_options";
    expect(refusedOption({ status: 400, message }, ["tools"])).toBeUndefined();
    expect(refusedOption({ status: 400, message }, ["tools", "stream_options"])).toBe("stream_options");
  });

  it("names the setting: the flags in the error first, then the server's table entry, then glassbox's own", () => {
    expect(fixFor("tools", "tools param requires --jinja flag", "http://localhost:11434/v1")).toBe(
      "start the server with --jinja",
    );
    expect(fixFor("tools", "gemma3 does not support tools", "http://localhost:11434/v1")).toContain(
      "Ollama tag lists tools",
    );
    expect(
      fixFor(
        "stream_options",
        "Unrecognized request argument supplied: stream_options",
        "https://acme.openai.azure.com/openai/deployments/gpt-4o",
      ),
    ).toContain("/openai/v1/");
    expect(fixFor("tools", "No endpoints found that support tool use.", "https://openrouter.ai/api/v1")).toContain(
      "supported_parameters=tools",
    );
    expect(fixFor("tools", "does not support tools", "http://10.0.0.5:9000/v1")).toContain("GLASSBOX_TOOL_MODE=text");
  });
});
