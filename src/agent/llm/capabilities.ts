/**
 * Options a model server refuses. Servers without some part of the protocol answer a request that
 * carries it with an error naming it (Ollama: "<model> does not support tools"; vLLM: '"auto" tool
 * choice requires --enable-auto-tool-choice ...'; llama.cpp: "tools param requires --jinja flag", as a
 * 500; OpenAI and Azure: "Unsupported parameter: 'parallel_tool_calls' ..."). This module reads which
 * option an error refuses, remembers it for the process (per server and model), says so once in a
 * sentence that names the server setting that would fix it, and sends the request once more without it.
 * A refused `tools` is not dropped here: without them the model needs the text protocol, which the
 * client switches to. Refusals are detected from the error itself, never from the server's name; only
 * the advice can depend on the server, and that sits in SERVER_ADVICE below.
 */
import OpenAI from "openai";
import type { ModelExchange } from "../types.js";

export type RefusableOption = "tools" | "tool_choice" | "parallel_tool_calls" | "stream_options";

const REFUSABLE: RefusableOption[] = ["tools", "tool_choice", "parallel_tool_calls", "stream_options"];

/** What an error says about itself, read from the SDK error or an error body (any shape, already read). */
export interface ErrorDetails {
  status?: number;
  message: string;
  param?: string | null;
  code?: string | number | null;
}

/**
 * The option of `sent` that the error refuses, or undefined. Where several are named (older vLLM lists
 * `tools` and `tool_choice` together), `tools` wins: the text protocol drops both.
 */
export function refusedOption(details: ErrorDetails, sent: Iterable<RefusableOption>): RefusableOption | undefined {
  const carried = new Set(sent);
  const text = details.message;
  // A 400 about the conversation (a `tool` message without its `tool_calls`) mentions tools too.
  if (
    /\bmessages\b|tool_call_id|role '?tool\b/i.test(text) &&
    !(details.param && carried.has(details.param as RefusableOption))
  )
    return undefined;
  if (
    details.param &&
    carried.has(details.param as RefusableOption) &&
    (UNSUPPORTED_CODE.test(String(details.code ?? "")) || REFUSAL.test(text))
  ) {
    return details.param as RefusableOption;
  }
  if (carried.has("tools") && TOOLS_REFUSED.some((pattern) => pattern.test(text))) return "tools";
  if (carried.has("tool_choice") && TOOL_CHOICE_REFUSED.some((pattern) => pattern.test(text))) return "tool_choice";
  if (!REFUSAL.test(text)) return undefined;
  const named = REFUSABLE.filter(
    (option) => carried.has(option) && new RegExp(`(?<![\\w])${option}(?![\\w])`).test(text),
  );
  return named.includes("tools") ? "tools" : named[0];
}

const UNSUPPORTED_CODE = /^(unsupported_parameter|unknown_parameter|unsupported_value)$/;
/** The words servers use for a field they do not take. */
const REFUSAL =
  /unsupported|not supported|does not support|unknown (parameter|name|field)|unrecognized request argument|extra inputs are not permitted|extra_forbidden|cannot find field|is not permitted|not allowed|no endpoints found that support/i;
/** Refusals of native tool calling that do not spell the field `tools`. */
const TOOLS_REFUSED = [
  /does not support (tools|tool use|tool calling|function calling)/i, // Ollama ("<model> does not support tools")
  /"?auto"? tool choice requires --enable-auto-tool-choice/i, // vLLM, current and older shapes
  /tools param requires --jinja/i, // llama.cpp server without --jinja (a 500)
  /unsupported param: tools/i, // llama.cpp server before --jinja existed
  /no endpoints found that support tool use/i, // OpenRouter (a 404)
  /only \[.{0,400}\] support tool calls/i, // Xinference, for a model outside its list
];
/** Refusals of `tool_choice` that do not spell the field. */
const TOOL_CHOICE_REFUSED = [/tool choice must be auto/i]; // Z.AI (GLM), to anything but "auto"

/** The options of a request body that could be refused. */
export function refusableIn(params: object): RefusableOption[] {
  return REFUSABLE.filter((option) => (params as Record<string, unknown>)[option] !== undefined);
}

/**
 * Advice that depends on the server, found by its address. Detection never reads this table; it only
 * picks the words of the one sentence that says how to fix a refusal. Each entry was seen in the
 * server's own documentation (see docs/works-with.md).
 */
export const SERVER_ADVICE: Array<{ server: string; url: RegExp; fixes: Partial<Record<RefusableOption, string>> }> = [
  {
    server: "Ollama",
    url: /:11434(\/|$)/,
    fixes: { tools: "pull a model whose Ollama tag lists tools (ollama.com/search?c=tools) and set LLM_MODEL to it" },
  },
  {
    server: "Azure OpenAI",
    url: /\.openai\.azure\.com|\.cognitiveservices\.azure\.com|\.services\.ai\.azure\.com/,
    fixes: {
      stream_options:
        "use the v1 API (OPENAI_BASE_URL https://<resource>.openai.azure.com/openai/v1/) instead of a dated api-version",
      parallel_tool_calls:
        "use the v1 API (OPENAI_BASE_URL https://<resource>.openai.azure.com/openai/v1/) instead of a dated api-version",
      tool_choice:
        "use the v1 API (OPENAI_BASE_URL https://<resource>.openai.azure.com/openai/v1/) instead of a dated api-version",
    },
  },
  {
    server: "OpenRouter",
    url: /openrouter\.ai/,
    fixes: {
      tools: "set LLM_MODEL to a model whose providers support tools (openrouter.ai/models?supported_parameters=tools)",
      tool_choice:
        "set LLM_MODEL to a model whose providers support tool_choice (openrouter.ai/models?supported_parameters=tool_choice)",
    },
  },
];

const DEFAULT_FIXES: Record<RefusableOption, string> = {
  tools:
    "serve a model with tool calling (see docs/works-with.md), or set GLASSBOX_TOOL_MODE=text to use the text protocol from the start",
  tool_choice: "use a server version or model that accepts tool_choice",
  parallel_tool_calls: "use a server version or model that accepts parallel_tool_calls",
  stream_options: "use a server version that accepts stream_options, or set GLASSBOX_STREAM=false",
};

/** How to fix a refusal on the server: the flags the error itself names, else the table, else a default. */
export function fixFor(option: RefusableOption, message: string, baseURL: string): string {
  const flags = [...new Set(message.match(/--[a-z][a-z0-9-]*/g) ?? [])];
  if (flags.length > 0)
    return `start the server with ${flags.map((flag) => (flag === "--tool-call-parser" ? `${flag} <parser for the model>` : flag)).join(" ")}`;
  return SERVER_ADVICE.find((entry) => entry.url.test(baseURL))?.fixes[option] ?? DEFAULT_FIXES[option];
}

const CONSEQUENCE: Record<RefusableOption, string> = {
  tools: "so glassbox describes the tools in the prompt instead (the text protocol) from now on",
  tool_choice: "so glassbox sends its requests without tool_choice from now on",
  parallel_tool_calls: "so glassbox sends its requests without parallel_tool_calls from now on",
  stream_options: "so glassbox streams without it from now on (streamed answers then report no token usage)",
};

/** Refused options per server and model, for the life of the process; each is announced once. */
const refusedByServer = new Map<string, Map<RefusableOption, string>>();

export interface ModelCapabilities {
  /** The request without every option this server and model refused before. */
  withoutRefused<T extends object>(params: T): T;
  /**
   * Sends the request; when the server refuses one of its options (other than `tools`), remembers it,
   * says so once, and sends the request again without it. Never sends the same request twice.
   */
  send<T extends object, R>(params: T, create: (params: T) => Promise<R>): Promise<R>;
  /** Whether this server refuses native tool calling: said by `error` (remembered, announced once) or before. */
  refusesTools(error?: unknown): boolean;
  /**
   * The reply with a note for the trace naming each option of `params` that was left out as refused,
   * with the option as it would have gone and the server's refusal.
   */
  noted<R extends { notes?: string[]; exchanges?: ModelExchange[] }>(reply: R, params: object): R;
}

export function capabilitiesOf(
  where: { baseURL: string; model: string },
  warn: (message: string) => void,
): ModelCapabilities {
  const key = `${where.baseURL}\n${where.model}`;
  const refused = () => refusedByServer.get(key) ?? new Map<RefusableOption, string>();

  function remember(option: RefusableOption, message: string): void {
    const known = refused();
    if (known.has(option)) return;
    known.set(option, message);
    refusedByServer.set(key, known);
    const what = option === "tools" ? "native tool calls" : option;
    warn(
      `The model server at ${where.baseURL} refuses ${what} for '${where.model}' (${message}), ${CONSEQUENCE[option]}; to fix it, ${fixFor(option, message, where.baseURL)}.`,
    );
  }

  function withoutRefused<T extends object>(params: T): T {
    const known = refused();
    if (known.size === 0) return params;
    return Object.fromEntries(Object.entries(params).filter(([name]) => !known.has(name as RefusableOption))) as T;
  }

  return {
    withoutRefused,
    async send(params, create) {
      let body = withoutRefused(params);
      for (;;) {
        try {
          return await create(body);
        } catch (error) {
          const details = detailsOf(error);
          const option = details && refusedOption(details, refusableIn(body as Record<string, unknown>));
          if (!details || !option || option === "tools") throw error;
          remember(option, details.message);
          body = withoutRefused(body);
        }
      }
    },
    refusesTools(error) {
      if (error !== undefined) {
        const details = detailsOf(error);
        if (details && refusedOption(details, ["tools"]) === "tools") remember("tools", details.message);
      }
      return refused().has("tools");
    },
    noted(reply, params) {
      const known = refused();
      const left = refusableIn(params as Record<string, unknown>).filter(
        (option) => option !== "tools" && known.has(option),
      );
      if (left.length === 0) return reply;
      const notes = left.map((option) => `${option} left out: the server refuses it (${known.get(option)})`);
      const exchanges = left.map((option, index) => ({
        note: notes[index] ?? "",
        sent: JSON.stringify({ [option]: (params as Record<string, unknown>)[option] }),
        received: known.get(option) ?? "",
      }));
      return {
        ...reply,
        notes: [...(reply.notes ?? []), ...notes],
        exchanges: [...(reply.exchanges ?? []), ...exchanges],
      };
    },
  };
}

/** The SDK error behind `error` (a glassbox error keeps it as its cause), read as details. */
export function detailsOf(error: unknown): ErrorDetails | undefined {
  let current = error;
  while (!(current instanceof OpenAI.APIError) && current instanceof Error && current.cause !== undefined)
    current = current.cause;
  if (!(current instanceof OpenAI.APIError) || current.status === undefined) return undefined;
  const body = current.error as { message?: unknown; param?: unknown; code?: unknown } | string | undefined;
  const message = typeof body === "string" ? body : typeof body?.message === "string" ? body.message : current.message;
  const param = typeof body === "object" && typeof body?.param === "string" ? body.param : null;
  const code =
    typeof body === "object" && (typeof body?.code === "string" || typeof body?.code === "number") ? body.code : null;
  return { status: current.status, message, param, code };
}
