// OpenTelemetry export: the real engine (a supervisor and a specialist, the scripted model, SQLite
// traces) exported by the real OTLP/HTTP exporter to a local receiver that decodes what arrives.
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { runAgent } from "../../../src/agent/loop.js";
import { createOtelExport, otelExportFromEnv, withOtelExport } from "../../../src/agent/otel-export.js";
import { loadConfig } from "../../../src/config.js";
import { createLogger } from "../../../src/logger.js";
import { createAgentConfig, type GlassboxAgent } from "../../../src/setup.js";
import type { ChatCompletionRequestBody } from "../../../src/testing/scripted-model-server.js";
import { closeServers, startServer } from "../../helpers/agent.js";

/** A span as the receiver decoded it from OTLP/JSON. */
interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  status: { code?: number; message?: string };
}

type OtlpValue = {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: OtlpValue[] };
};
const valueOf = (value: OtlpValue): unknown =>
  value.stringValue ??
  (value.intValue !== undefined ? Number(value.intValue) : undefined) ??
  value.doubleValue ??
  value.boolValue ??
  value.arrayValue?.values?.map(valueOf);

/** An OTLP/HTTP receiver on 127.0.0.1: keeps every span posted to /v1/traces. */
async function startReceiver() {
  const spans: ReceivedSpan[] = [];
  const contentTypes: string[] = [];
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      contentTypes.push(String(request.headers["content-type"]));
      if (request.url === "/v1/traces") {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
          resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<Record<string, unknown>> }> }>;
        };
        for (const resource of body.resourceSpans) {
          for (const scope of resource.scopeSpans) {
            for (const span of scope.spans) {
              const attributes = Object.fromEntries(
                ((span.attributes ?? []) as Array<{ key: string; value: OtlpValue }>).map((attribute) => [
                  attribute.key,
                  valueOf(attribute.value),
                ]),
              );
              spans.push({
                ...(span as unknown as ReceivedSpan),
                parentSpanId: String(span.parentSpanId ?? ""),
                attributes,
                status: (span.status ?? {}) as ReceivedSpan["status"],
              });
            }
          }
        }
      }
      response.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, spans, contentTypes, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

const who = (body: ChatCompletionRequestBody) =>
  String(body.messages[0]?.content ?? "").includes("RESEARCHER") ? "RESEARCHER" : "MAIN";
const sawTool = (body: ChatCompletionRequestBody) => body.messages.some((message) => message.role === "tool");

let agent: GlassboxAgent | undefined;
let receiver: Awaited<ReturnType<typeof startReceiver>> | undefined;
afterEach(async () => {
  await agent?.close();
  agent = undefined;
  await receiver?.close();
  receiver = undefined;
  await closeServers();
});

async function setUp(env: Record<string, string> = {}) {
  const server = await startServer({
    script: (body) => {
      if (who(body) === "RESEARCHER") {
        return sawTool(body)
          ? { content: "It was delivered.", usage: { promptTokens: 300, completionTokens: 30 } }
          : {
              toolCalls: [{ name: "get_order_status", arguments: '{"order_id":"20240315001"}', id: "call_lookup" }],
              usage: { promptTokens: 200, completionTokens: 20 },
            };
      }
      return sawTool(body)
        ? { content: "Your order was delivered.", usage: { promptTokens: 500, completionTokens: 50 } }
        : {
            toolCalls: [
              { name: "agent_researcher", arguments: '{"task":"Where is order 20240315001?"}', id: "call_research" },
            ],
            usage: { promptTokens: 400, completionTokens: 40 },
          };
    },
  });
  const directory = mkdtempSync(join(tmpdir(), "glassbox-otel-"));
  writeFileSync(
    join(directory, "agents.json"),
    JSON.stringify({
      agents: {
        researcher: {
          description: "Looks up orders.",
          systemPrompt: "You are the RESEARCHER.",
          tools: ["get_order_status"],
        },
      },
    }),
  );
  receiver = await startReceiver();
  const config = loadConfig({
    OPENAI_BASE_URL: server.url,
    LLM_MODEL: "gpt-4o-mini",
    GLASSBOX_DB: join(directory, "glassbox.db"),
    GLASSBOX_SHOP_DB: join(directory, "shop.db"),
    GLASSBOX_DEMO: "true",
    GLASSBOX_AGENTS: join(directory, "agents.json"),
  });
  const saved = { ...process.env };
  Object.assign(
    process.env,
    Object.fromEntries(
      Object.entries(env).map(([key, value]) => [key, value.replace("$RECEIVER", receiver?.url ?? "")]),
    ),
  );
  try {
    agent = await createAgentConfig(config, createLogger({ level: "silent" }));
  } finally {
    for (const key of Object.keys(env)) if (saved[key] === undefined) delete process.env[key];
  }
  return { agent, receiver };
}

describe("OpenTelemetry export", () => {
  it("with OTEL_EXPORTER_OTLP_ENDPOINT, sends a span per run, model call and tool call, parented as in the trace (the specialist's run under its tool call), with the GenAI attributes and no message content by default", async () => {
    const { agent, receiver } = await setUp({ OTEL_EXPORTER_OTLP_ENDPOINT: "$RECEIVER" });
    const result = await runAgent(agent, { input: "Where is my order?", sessionId: "cli:otel", userId: "U1" });
    expect(result.output).toBe("Your order was delivered.");
    await agent.close(); // sends what waits

    const { spans } = receiver;
    expect(receiver.contentTypes.every((type) => type.startsWith("application/json"))).toBe(true);
    const byName = (name: string) => spans.filter((span) => span.name === name);
    const [main, specialist] = byName("invoke_agent glassbox").sort(
      (a, b) => a.parentSpanId.length - b.parentSpanId.length,
    );
    expect(byName("invoke_agent glassbox")).toHaveLength(2);
    expect(main?.parentSpanId).toBe("");
    expect(main?.attributes).toMatchObject({
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.conversation.id": "cli:otel",
      "glassbox.run_id": result.runId,
      "glassbox.stop_reason": "final",
    });
    // One trace; the specialist's run nests under the main run's call to it.
    expect(new Set(spans.map((span) => span.traceId)).size).toBe(1);
    const handOff = byName("execute_tool agent_researcher")[0];
    expect(handOff?.parentSpanId).toBe(main?.spanId);
    expect(handOff?.attributes).toMatchObject({
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": "agent_researcher",
      "gen_ai.tool.call.id": "call_research",
    });
    expect(specialist?.parentSpanId).toBe(handOff?.spanId);
    const lookup = byName("execute_tool get_order_status")[0];
    expect(lookup?.parentSpanId).toBe(specialist?.spanId);

    const chats = byName("chat gpt-4o-mini");
    expect(chats).toHaveLength(4);
    expect(
      chats
        .filter((span) => span.parentSpanId === main?.spanId)
        .map((span) => span.attributes["gen_ai.usage.input_tokens"])
        .sort(),
    ).toEqual([400, 500]);
    expect(
      chats
        .filter((span) => span.parentSpanId === specialist?.spanId)
        .map((span) => span.attributes["gen_ai.usage.output_tokens"])
        .sort(),
    ).toEqual([20, 30]);
    for (const chat of chats) {
      expect(chat.kind).toBe(3); // CLIENT
      expect(chat.attributes).toMatchObject({
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": "gpt-4o-mini",
      });
      expect(chat.attributes["gen_ai.response.finish_reasons"]).toEqual([expect.stringMatching(/^(stop|tool_calls)$/)]);
      expect(chat.attributes["gen_ai.input.messages"]).toBeUndefined();
    }
    expect(JSON.stringify(spans)).not.toContain("Where is my order?");
  });

  it("sends the messages, arguments and results only when content capture is switched on, and marks a failed tool call as an error", async () => {
    const { agent, receiver } = await setUp();
    const exported = createOtelExport({
      tracesUrl: `${receiver.url}/v1/traces`,
      captureContent: true,
      requestModel: "gpt-4o-mini",
    });
    agent.trace = withOtelExport(agent, exported).trace;
    await runAgent(agent, { input: "Where is my order?", sessionId: "cli:otel-content", userId: "U1" });
    // A call the model got wrong: an unknown tool, refused before it ran.
    exported.record({ type: "run_start", runId: "run_x", sessionId: "cli:x", userId: "U1", input: "x" });
    exported.record({
      type: "tool_end",
      runId: "run_x",
      step: 1,
      record: {
        id: "call_bad",
        name: "nope",
        rawArguments: "{}",
        repairs: [],
        envelope: { status: "error", error: { type: "tool_not_found", message: "There is no tool 'nope'." } },
        content: "{}",
        truncatedChars: 0,
        durationMs: 0,
        dangerous: false,
      },
    });
    exported.record({
      type: "run_end",
      runId: "run_x",
      result: {
        runId: "run_x",
        sessionId: "cli:x",
        output: "",
        stopReason: "final",
        steps: 1,
        usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0 },
        toolCalls: [],
      },
    });
    await exported.shutdown();

    const chat = receiver.spans.find(
      (span) =>
        span.name === "chat gpt-4o-mini" &&
        String(span.attributes["gen_ai.input.messages"]).includes("Where is my order?"),
    );
    expect(chat, "the first model call carries its messages").toBeDefined();
    const lookup = receiver.spans.find((span) => span.name === "execute_tool get_order_status");
    expect(JSON.parse(String(lookup?.attributes["gen_ai.tool.call.arguments"]))).toEqual({ order_id: "20240315001" });
    expect(String(lookup?.attributes["gen_ai.tool.call.result"])).toContain("delivered");
    const bad = receiver.spans.find((span) => span.name === "execute_tool nope");
    expect(bad?.status.code).toBe(2); // ERROR
    expect(bad?.attributes["error.type"]).toBe("tool_not_found");
  });

  it("names an inline image by its type and size in captured messages instead of exporting its data", async () => {
    const { receiver } = await setUp();
    const exported = createOtelExport({
      tracesUrl: `${receiver.url}/v1/traces`,
      captureContent: true,
      requestModel: "gpt-4o-mini",
    });
    const data = Buffer.alloc(3_000, 7).toString("base64");
    const messages = [
      {
        role: "user" as const,
        content: [
          { type: "text" as const, text: "What is in this picture?" },
          { type: "image_url" as const, image_url: { url: `data:image/png;base64,${data}` } },
        ],
      },
    ];
    exported.record({
      type: "run_start",
      runId: "run_img",
      sessionId: "cli:img",
      userId: "U1",
      input: "What is in this picture?",
    });
    exported.record({
      type: "model_start",
      runId: "run_img",
      step: 1,
      messages,
      toolCount: 0,
      tools: [],
      toolChoice: "auto",
    });
    exported.record({
      type: "run_end",
      runId: "run_img",
      result: {
        runId: "run_img",
        sessionId: "cli:img",
        output: "",
        stopReason: "error",
        steps: 1,
        usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0 },
        toolCalls: [],
      },
    });
    await exported.shutdown();

    const chat = receiver.spans.find(
      (span) =>
        span.name.startsWith("chat") &&
        String(span.attributes["gen_ai.input.messages"]).includes("What is in this picture?"),
    );
    const sent = String(chat?.attributes["gen_ai.input.messages"]);
    expect(sent).toContain("data:image/png (3000 bytes, not exported)");
    expect(JSON.stringify(receiver.spans)).not.toContain(data.slice(0, 64));
  });

  it("is off without an OTLP endpoint", () => {
    expect(otelExportFromEnv({})).toBeUndefined();
  });
});
