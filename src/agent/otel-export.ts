/**
 * OpenTelemetry export of runs, for teams whose traces live in Jaeger, Tempo, Honeycomb or the
 * like: a span per run, per model call and per tool call, parented as in glassbox's own trace (a
 * specialist's run under the tool call that started it), with the GenAI semantic conventions'
 * attributes. Message contents go out only when OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT
 * is true. glassbox's own store stays the record; this is a copy sent over OTLP/HTTP (JSON), on a
 * tracer provider of its own, so a host application's OpenTelemetry set-up is left alone.
 */
import { context, SpanKind, SpanStatusCode, trace, type Attributes, type Span, type Tracer } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import type { AgentEvent } from "./events.js";
import type { TraceRecorder } from "./trace.js";

export interface OtelExportOptions {
  /** Where spans go: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces. */
  tracesUrl: string;
  serviceName?: string;
  /** Send prompts, answers and tool arguments and results as span attributes (off by default: they may hold personal data). */
  captureContent?: boolean;
  /** The model name requests are made with (the response names the model that answered). */
  requestModel?: string;
  /** Extra headers for the collector (OTEL_EXPORTER_OTLP_HEADERS, already parsed). */
  headers?: Record<string, string>;
}

export interface OtelExport {
  record(event: AgentEvent): void;
  /** Sends what is waiting (the processor batches). */
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

/** The export the environment asks for, or undefined when no OTLP endpoint is set. */
export function otelExportFromEnv(env: NodeJS.ProcessEnv, requestModel?: string): OtelExport | undefined {
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  const tracesUrl =
    env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || (base ? `${base.replace(/\/+$/, "")}/v1/traces` : "");
  if (!tracesUrl) return undefined;
  return createOtelExport({
    tracesUrl,
    serviceName: env.OTEL_SERVICE_NAME?.trim() || "glassbox",
    captureContent: env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT?.trim().toLowerCase() === "true",
    requestModel,
    headers: parseHeaders(env.OTEL_EXPORTER_OTLP_HEADERS),
  });
}

export function createOtelExport(options: OtelExportOptions): OtelExport {
  const exporter = new OTLPTraceExporter({ url: options.tracesUrl, headers: options.headers ?? {} });
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": options.serviceName ?? "glassbox" }),
    spanProcessors: [new BatchSpanProcessor(exporter)],
  });
  const spans = createRunSpans(provider.getTracer("glassbox"), options);
  return {
    record: spans.record,
    flush: () => provider.forceFlush(),
    shutdown: () => provider.shutdown(),
  };
}

/** Events to spans: open ones are kept by run, step and tool call until their end event. */
function createRunSpans(tracer: Tracer, options: OtelExportOptions) {
  const runs = new Map<string, Span>();
  const models = new Map<string, Span>(); // runId:step
  const tools = new Map<string, Span>(); // runId:toolCallId
  const content = options.captureContent === true;

  const startRun = (
    runId: string,
    sessionId: string,
    parent: { runId: string; toolCallId: string } | undefined,
    resumed: boolean,
  ) => {
    const parentSpan = parent
      ? (tools.get(`${parent.runId}:${parent.toolCallId}`) ?? runs.get(parent.runId))
      : undefined;
    const span = tracer.startSpan(
      "invoke_agent glassbox",
      {
        kind: SpanKind.INTERNAL,
        attributes: {
          "gen_ai.operation.name": "invoke_agent",
          "gen_ai.agent.name": "glassbox",
          "gen_ai.conversation.id": sessionId,
          "glassbox.run_id": runId,
          ...(resumed ? { "glassbox.resumed": true } : {}),
        },
      },
      parentSpan ? trace.setSpan(context.active(), parentSpan) : undefined,
    );
    runs.set(runId, span);
  };
  const child = (runId: string, name: string, kind: SpanKind, attributes: Attributes) => {
    const parent = runs.get(runId);
    return tracer.startSpan(name, { kind, attributes }, parent ? trace.setSpan(context.active(), parent) : undefined);
  };

  function record(event: AgentEvent): void {
    switch (event.type) {
      case "run_start":
        startRun(event.runId, event.sessionId, event.parent, false);
        if (content) runs.get(event.runId)?.setAttribute("glassbox.input", event.input);
        return;
      case "run_resumed":
        startRun(event.runId, event.sessionId, event.parent, true);
        return;
      case "model_start": {
        const model = options.requestModel;
        const span = child(event.runId, `chat${model ? ` ${model}` : ""}`, SpanKind.CLIENT, {
          "gen_ai.operation.name": "chat",
          "gen_ai.provider.name": "openai",
          ...(model ? { "gen_ai.request.model": model } : {}),
          "glassbox.step": event.step,
          "glassbox.tools_offered": event.toolCount,
          ...(content ? { "gen_ai.input.messages": JSON.stringify(event.messages, withoutImageData) } : {}),
        });
        models.set(`${event.runId}:${event.step}`, span);
        return;
      }
      case "model_end": {
        const key = `${event.runId}:${event.step}`;
        const span = models.get(key);
        if (!span) return;
        models.delete(key);
        const { response } = event;
        span.setAttributes({
          "gen_ai.response.model": response.model,
          "gen_ai.usage.input_tokens": response.usage.promptTokens,
          "gen_ai.usage.output_tokens": response.usage.completionTokens,
          "gen_ai.response.finish_reasons": [response.finishReason],
          ...(content
            ? {
                "gen_ai.output.messages": JSON.stringify([
                  { role: "assistant", content: response.content, tool_calls: response.toolCalls },
                ]),
              }
            : {}),
        });
        span.end();
        return;
      }
      case "tool_start": {
        const span = child(event.runId, `execute_tool ${event.name}`, SpanKind.INTERNAL, {
          "gen_ai.operation.name": "execute_tool",
          "gen_ai.tool.name": event.name,
          "gen_ai.tool.call.id": event.toolCallId,
          "gen_ai.tool.type": "function",
          ...(content ? { "gen_ai.tool.call.arguments": JSON.stringify(event.arguments) } : {}),
        });
        tools.set(`${event.runId}:${event.toolCallId}`, span);
        return;
      }
      case "tool_end": {
        const { record: call } = event;
        const key = `${event.runId}:${call.id}`;
        // A call refused before it ran (unknown tool, bad arguments, denied) has no tool_start: its span is the moment of its end.
        const span =
          tools.get(key) ??
          child(event.runId, `execute_tool ${call.name}`, SpanKind.INTERNAL, {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
          });
        tools.delete(key);
        if (call.envelope.status === "error") {
          span.setAttribute("error.type", call.envelope.error.type);
          span.setStatus({ code: SpanStatusCode.ERROR, message: call.envelope.error.message });
        }
        if (content) span.setAttribute("gen_ai.tool.call.result", call.content);
        span.end();
        return;
      }
      case "run_end": {
        const span = runs.get(event.runId);
        if (!span) return;
        runs.delete(event.runId);
        const { result } = event;
        span.setAttributes({
          "gen_ai.usage.input_tokens": result.usage.promptTokens,
          "gen_ai.usage.output_tokens": result.usage.completionTokens,
          "glassbox.stop_reason": result.stopReason,
          "glassbox.steps": result.steps,
        });
        if (result.error) span.setStatus({ code: SpanStatusCode.ERROR, message: result.error.message });
        if (content) span.setAttribute("glassbox.output", result.output);
        // A run that ended while a step or call was open (cancelled, failed) closes them too.
        for (const [key, open] of [...models, ...tools]) {
          if (!key.startsWith(`${event.runId}:`)) continue;
          open.end();
          models.delete(key);
          tools.delete(key);
        }
        span.end();
        return;
      }
      default:
        return;
    }
  }
  return { record };
}

/** "a=b,c=d" (W3C baggage style, values percent-decoded), as OTEL_EXPORTER_OTLP_HEADERS is written. */
function parseHeaders(raw: string | undefined): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const pair of (raw ?? "").split(",")) {
    const at = pair.indexOf("=");
    if (at <= 0) continue;
    try {
      headers[pair.slice(0, at).trim()] = decodeURIComponent(pair.slice(at + 1).trim());
    } catch {
      headers[pair.slice(0, at).trim()] = pair.slice(at + 1).trim();
    }
  }
  return headers;
}

/** The config with the export beside its trace recorder: every run, a specialist's too (it shares the recorder), is exported. */
export function withOtelExport<C extends { trace?: TraceRecorder }>(config: C, exported: OtelExport): C {
  const recorder = config.trace;
  if (!recorder) return config;
  const trace = Object.assign(Object.create(recorder) as TraceRecorder, {
    record(...args: Parameters<TraceRecorder["record"]>) {
      recorder.record(...args);
      exported.record(args[0]);
    },
  });
  return { ...config, trace };
}

/**
 * An image sent inline (a data: URL) is named by its type and size, not exported: megabytes of
 * base64 per span would swamp any collector, and the picture is in glassbox's own trace.
 */
function withoutImageData(key: string, value: unknown): unknown {
  if (key !== "url" || typeof value !== "string" || !value.startsWith("data:")) return value;
  const type = value.slice(5, value.indexOf(";") > 0 ? value.indexOf(";") : value.indexOf(","));
  return `data:${type} (${Math.round((value.length - value.indexOf(",") - 1) * 0.75)} bytes, not exported)`;
}
