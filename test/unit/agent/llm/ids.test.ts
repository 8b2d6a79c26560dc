// Classes 2 and 7 of the dialects: tool-call arguments and ids as servers really send them. What
// the tool receives is an object, what goes back is JSON text, and every id sent back is one the
// server takes, with the trace saying which id stands for which.
import { afterEach, describe, expect, it } from "vitest";
import { runAgent } from "../../../../src/agent/loop.js";
import type { Message } from "../../../../src/agent/types.js";
import type { ChatCompletionRequestBody, ScriptedReply } from "../../../../src/testing/scripted-model-server.js";
import { closeServers, modelFor, startServer } from "../../../helpers/agent.js";
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

afterEach(closeServers);

const modes = [
  { mode: "streamed", stream: true },
  { mode: "not streamed", stream: false },
];

/** One reply with these tool-call entries, streamed one entry per delta or whole. */
function callsReply(calls: Array<Record<string, unknown>>, stream: boolean): ScriptedReply {
  if (!stream) return rawJson(completion({ content: null, tool_calls: calls }, "tool_calls"));
  return rawStream(
    sse([
      ...calls.map((call, index) => chunk({ tool_calls: [{ index, ...call }] })),
      finish("tool_calls"),
      usageChunk(),
      "data: [DONE]\n\n",
    ]),
  );
}

describe("dialects, class 2: arguments", () => {
  it.each(modes)(
    "takes arguments sent as a JSON object, and sends them back as JSON text ($mode)",
    async ({ stream }) => {
      // Some llama.cpp builds return `arguments` as an object, not a string (ggml-org/llama.cpp#20198).
      const run = await runDialect(
        [
          callsReply(
            [{ id: "call_lc1", type: "function", function: { name: "get_weather", arguments: { city: "Paris" } } }],
            stream,
          ),
        ],
        { stream },
      );
      expectCallsRan(run, [{ name: "get_weather", args: { city: "Paris" } }]);
      expect(toolExchange(run.sent(1)).calls[0]?.function.arguments).toBe('{"city":"Paris"}');
      expect(run.responses[0]?.notes).toContain(
        "tool-call arguments came as a JSON value instead of JSON text; glassbox passed them on as JSON text",
      );
    },
  );

  // GLM through OpenRouter sends "" for a tool without parameters (Lexus2016/hermes-agent-evolution#1170), vLLM
  // sends null (langchain-ai/langchain#34242); Claude's OpenAI endpoint refuses "" when it comes back (labring/FastGPT#4755).
  it.each([
    { mode: "streamed", stream: true, sent: "", id: "call_e1" },
    { mode: "not streamed", stream: false, sent: "", id: "call_e1" },
    { mode: "streamed", stream: true, sent: null, id: "chatcmpl-tool-8b1f759d874b412e931e64cf6f57bdcc" },
    { mode: "not streamed", stream: false, sent: null, id: "chatcmpl-tool-8b1f759d874b412e931e64cf6f57bdcc" },
  ])(
    "reads $sent arguments of a tool without parameters as {}, and sends back {} ($mode)",
    async ({ stream, sent, id }) => {
      const run = await runDialect(
        [callsReply([{ id, type: "function", function: { name: "get_time", arguments: sent } }], stream)],
        { stream },
      );
      expectCallsRan(run, [{ name: "get_time", args: {} }]);
      expect(toolExchange(run.sent(1)).calls.map((call) => call.function.arguments)).toEqual(["{}"]);
    },
  );
});

describe("dialects, class 7: tool-call ids", () => {
  it.each(modes)("names calls that came without an id, nine letters and digits each ($mode)", async ({ stream }) => {
    // Devstral on SGLang streams `"id": null` (mistralai/mistral-vibe#594); proxies in front of Gemini send "" (AstrBotDevs/AstrBot#6661).
    const run = await runDialect(
      [
        callsReply(
          [
            { id: null, type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
            { id: "", type: "function", function: { name: "get_time", arguments: "{}" } },
          ],
          stream,
        ),
      ],
      { stream },
    );
    expectCallsRan(run, [
      { name: "get_weather", args: { city: "Paris" } },
      { name: "get_time", args: {} },
    ]);
    const ids = toolExchange(run.sent(1)).calls.map((call) => call.id);
    for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9]{9}$/);
    const notes = run.responses[0]?.notes ?? [];
    expect(notes).toContain(`the server sent no id for the call to 'get_weather'; glassbox named it ${ids[0]}`);
    expect(notes).toContain(`the server sent no id for the call to 'get_time'; glassbox named it ${ids[1]}`);
  });

  it.each(modes)("renames an id the server gave two calls of one reply ($mode)", async ({ stream }) => {
    // Xinference gave every call of a reply the completion's id (xorbitsai/inference#4237).
    const same = "call_f0de99f4-6fe1-4235-b4d9-1fcb010fa197";
    const run = await runDialect(
      [
        callsReply(
          [
            { id: same, type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
            { id: same, type: "function", function: { name: "get_time", arguments: "{}" } },
          ],
          stream,
        ),
      ],
      { stream },
    );
    expectCallsRan(run, [
      { name: "get_weather", args: { city: "Paris" } },
      { name: "get_time", args: {} },
    ]);
    const ids = toolExchange(run.sent(1)).calls.map((call) => call.id);
    expect(ids[0]).toBe(same);
    expect(run.responses[0]?.notes).toContain(
      `the server reused the id '${same}' for the call to 'get_time'; glassbox named it ${ids[1]}`,
    );
  });

  it("renames an id the server already used earlier in the conversation", async () => {
    // Kimi behind some proxies numbers calls per tool, so a later reply repeats an earlier id (can1357/oh-my-pi#2055).
    const call = {
      id: "functions.get_weather:0",
      type: "function",
      function: { name: "get_weather", arguments: '{"city":"Paris"}' },
    };
    const run = await runDialect(
      [
        rawJson(completion({ tool_calls: [call] }, "tool_calls")),
        rawJson(
          completion(
            { tool_calls: [{ ...call, function: { ...call.function, arguments: '{"city":"Lyon"}' } }] },
            "tool_calls",
          ),
        ),
      ],
      { stream: false },
    );
    expect(run.received.get_weather).toEqual([{ city: "Paris" }, { city: "Lyon" }]);
    const messages = run.sent(2);
    const assistantIds = messages.flatMap((message) =>
      message.role === "assistant"
        ? ((message.tool_calls ?? []) as Array<{ id: string }>).map((entry) => entry.id)
        : [],
    );
    const resultIds = messages.flatMap((message) => (message.role === "tool" ? [message.tool_call_id] : []));
    expect(new Set(assistantIds).size).toBe(2);
    expect(resultIds).toEqual(assistantIds);
  });

  describe("a server that takes only nine letters and digits (Mistral)", () => {
    const nine = /^[A-Za-z0-9]{9}$/;
    // The check Mistral's API (and vLLM serving Mistral through mistral_common) makes on every id it
    // is sent, with its words (jackmpcollins/magentic#276, vllm-project/vllm#9019).
    const mistralLike = (replies: ScriptedReply[]) => {
      let next = 0;
      return (body: ChatCompletionRequestBody): ScriptedReply => {
        for (const message of body.messages) {
          const ids = [
            ...((message.tool_calls ?? []) as Array<{ id: string }>).map((call) => call.id),
            ...(message.tool_call_id !== undefined ? [message.tool_call_id] : []),
          ];
          const bad = ids.find((id) => !nine.test(id));
          if (bad === undefined) continue;
          // Mistral's own error body, flat: {"object": "error", "message", "type", "param", "code"}.
          const refusal = `Tool call id was ${bad} but must be a-z, A-Z, 0-9, with a length of 9.`;
          return {
            raw: {
              status: 400,
              body: JSON.stringify({
                object: "error",
                message: refusal,
                type: "invalid_request_error",
                param: null,
                code: null,
              }),
            },
          };
        }
        return replies[next++] ?? { content: "Done." };
      };
    };

    it.each(modes)("accepts the ids glassbox makes for calls that came without one ($mode)", async ({ stream }) => {
      const server = await startServer({
        script: mistralLike([
          callsReply([{ type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }], stream),
        ]),
      });
      const { weather, registry } = fixtureTools();
      const result = await runAgent(
        { model: modelFor(server, { stream, maxRetries: 0 }), tools: registry },
        { input: "Weather in Paris?" },
      );
      expect(result).toMatchObject({ stopReason: "final", output: "Done." });
      expect(weather.calls.map((call) => call.args)).toEqual([{ city: "Paris" }]);
      expect(server.requests).toHaveLength(2);
    });

    it("sends ids from an earlier server in the form this one takes, once it says which, and notes the mapping", async () => {
      const history: Message[] = [
        { role: "user", content: "Weather in Lyon?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            {
              id: "call_PTLP8xhu3uwZk4l3nlnrrJha",
              type: "function",
              function: { name: "get_weather", arguments: '{"city":"Lyon"}' },
            },
          ],
        },
        {
          role: "tool",
          tool_call_id: "call_PTLP8xhu3uwZk4l3nlnrrJha",
          content: '{"status":"success","data":{"temperature":19}}',
        },
        { role: "assistant", content: "19 °C in Lyon." },
      ];
      const server = await startServer({
        script: mistralLike([
          callsReply(
            [{ id: "D681PevKs", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }],
            false,
          ),
        ]),
      });
      const { weather, registry } = fixtureTools();
      const events: Array<{ notes?: string[] }> = [];
      const result = await runAgent(
        { model: modelFor(server, { stream: false, maxRetries: 0 }), tools: registry },
        {
          input: "And in Paris?",
          history,
          onEvent: (event) => void (event.type === "model_end" && events.push(event.response)),
        },
      );
      expect(result).toMatchObject({ stopReason: "final", output: "Done." });
      expect(weather.calls.map((call) => call.args)).toEqual([{ city: "Paris" }]);
      // Refused once, then sent again with the old id in Mistral's form; the same form every time after.
      expect(server.requests).toHaveLength(3);
      const resent = toolExchange(server.requests[1]?.body.messages ?? []);
      const standIn = resent.calls[0]?.id ?? "";
      expect(standIn).toMatch(nine);
      expect(resent.results[0]).toBe(standIn);
      const last = server.requests[2]?.body.messages ?? [];
      expect(last.filter((message) => message.role === "tool").map((message) => message.tool_call_id)).toEqual([
        standIn,
        "D681PevKs",
      ]);
      expect(events[0]?.notes).toContain(
        `tool-call ids went to the server in the form it takes: call_PTLP8xhu3uwZk4l3nlnrrJha as ${standIn}`,
      );
      // glassbox's own record keeps the id it had.
      expect(history[1]).toMatchObject({ tool_calls: [{ id: "call_PTLP8xhu3uwZk4l3nlnrrJha" }] });
    });
  });
});
