/**
 * The model client: the official `openai` SDK against any OpenAI-compatible server. Streams the
 * answer as deltas, assembles streamed tool calls, retries what is worth retrying (the SDK's
 * bounded exponential backoff with jitter, honouring Retry-After), and falls back to a text
 * protocol for servers that reject native tool calling.
 */
import OpenAI from "openai";
import type { ChatCompletionChunk, ChatCompletionCreateParamsBase, ChatCompletionMessageParam } from "openai/resources/chat/completions";
import { describeModelError } from "./errors.js";
import { undiciFetch } from "../undici-fetch.js";
import { parseTextDecision, REEMIT_REQUEST, toTextProtocol } from "./text-protocol.js";
import { addUsage, emptyUsage, type ChatModel, type Message, type ModelRequest, type ModelResponse, type ToolCall, type Usage } from "./types.js";

export type ToolMode = "native" | "text" | "auto";

export interface OpenAIModelOptions {
  model: string;
  baseURL?: string;
  apiKey?: string;
  /** Stream answers as deltas (default true). */
  stream?: boolean;
  /** "auto" (default) uses native tool calling and switches to text when the server rejects `tools`. */
  toolMode?: ToolMode;
  /** Per-request time limit (default 60 s). */
  timeoutMs?: number;
  /** Retries after the first try for 429, 5xx and connection errors (default 3, so 4 tries). */
  maxRetries?: number;
  warn?: (message: string) => void;
}

export const DEFAULT_BASE_URL = "https://api.openai.com/v1";

export function createOpenAIModel(options: OpenAIModelOptions): ChatModel & { readonly toolMode: ToolMode } {
  const baseURL = options.baseURL ?? DEFAULT_BASE_URL;
  const client = new OpenAI({
    baseURL,
    // Local servers (Ollama, vLLM) need no key, but the SDK insists on one.
    apiKey: options.apiKey || "not-needed",
    timeout: options.timeoutMs ?? 60_000,
    maxRetries: options.maxRetries ?? 3,
    fetch: undiciFetch,
  });
  const where = { baseURL, model: options.model };
  const warn = options.warn ?? ((message: string) => console.warn(message));
  let toolMode: ToolMode = options.toolMode ?? "auto";
  let textCallCount = 0;

  async function send(messages: Message[], request: ModelRequest, withTools: boolean): Promise<ModelResponse> {
    const params: ChatCompletionCreateParamsBase = {
      model: options.model,
      messages: messages as ChatCompletionMessageParam[],
      // "auto" is the default wherever tools are given, so only "none" needs saying.
      ...(withTools && request.tools?.length ? { tools: request.tools, ...(request.toolChoice === "none" ? { tool_choice: "none" as const } : {}) } : {}),
    };
    try {
      if (options.stream === false || !request.onDelta) {
        const completion = await untilAborted(client.chat.completions.create({ ...params, stream: false }, { signal: request.signal }), request.signal);
        const choice = completion.choices[0];
        return {
          content: choice?.message.content ?? null,
          toolCalls: (choice?.message.tool_calls ?? []).flatMap((call) =>
            call.type === "function" ? [{ id: call.id, type: "function" as const, function: { name: call.function.name, arguments: call.function.arguments } }] : [],
          ),
          finishReason: choice?.finish_reason ?? "stop",
          usage: usageOf(completion.usage),
          model: completion.model,
        };
      }
      const stream = await untilAborted(
        client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } }, { signal: request.signal }),
        request.signal,
      );
      const response = await collectStream(stream, request.onDelta);
      // The SDK ends a stream quietly when it is aborted: what arrived is a cut-off answer, not a reply.
      if (request.signal?.aborted) throw new OpenAI.APIUserAbortError();
      return response;
    } catch (error) {
      throw describeModelError(error, where);
    }
  }

  async function chatInText(request: ModelRequest): Promise<ModelResponse> {
    const tools = request.toolChoice === "none" ? [] : (request.tools ?? []);
    const messages = toTextProtocol(request.messages, tools);
    const quiet = { ...request, onDelta: undefined };
    let response = await send(messages, quiet, false);
    const nextId = () => `call_text_${++textCallCount}`;
    let decision = parseTextDecision(response.content ?? "", nextId);
    // Without tools (the stage conclusion) only an answer counts; the model still wraps it in JSON.
    if (tools.length === 0) return answered(response, decision.kind === "answer" ? decision.text : (response.content ?? ""), request);
    if (decision.kind === "unreadable") {
      // One second chance: show the model its reply and ask for valid JSON.
      const retry = await send([...messages, { role: "assistant", content: response.content ?? "" }, { role: "user", content: REEMIT_REQUEST }], quiet, false);
      response = { ...retry, usage: addUsage(response.usage, retry.usage) };
      decision = parseTextDecision(response.content ?? "", nextId);
    }
    if (decision.kind === "tools") return { ...response, content: null, toolCalls: decision.toolCalls, finishReason: "tool_calls" };
    return answered(response, decision.kind === "answer" ? decision.text : (response.content ?? ""), request);
  }

  return {
    name: options.model,
    get toolMode() {
      return toolMode;
    },
    async chat(request) {
      if (toolMode === "text") return chatInText(request);
      try {
        return await send(request.messages, request, true);
      } catch (error) {
        if (toolMode !== "auto" || !request.tools?.length || !rejectsTools(error)) throw error;
        toolMode = "text";
        warn(`The model server at ${baseURL} rejected native tool calling (${(error as Error).message}); using the text protocol for tools from now on.`);
        return chatInText(request);
      }
    },
  };
}

/**
 * Servers without function calling answer a request with `tools` with a 400 that mentions tools.
 * A 400 about the conversation itself (a `tool` message without its `tool_calls`) also mentions
 * them, but switching that server to the text protocol for good would be wrong.
 */
function rejectsTools(error: unknown): boolean {
  const status = (error as { status?: number }).status;
  const cause = (error as { cause?: unknown }).cause;
  const text = cause instanceof Error ? cause.message : String(error);
  const aboutMessages = /messages|tool_call_id|role '?tool/i.test(text);
  return (status === 400 || status === 422) && /tool/i.test(text) && !aboutMessages;
}

function answered(response: ModelResponse, text: string, request: ModelRequest): ModelResponse {
  if (text) request.onDelta?.(text);
  return { ...response, content: text, toolCalls: [], finishReason: "stop" };
}

/**
 * The SDK sleeps through a retry wait (Retry-After may ask for up to a minute) without watching the
 * signal, so a cancelled run would sit out the wait. This rejects the moment the signal fires.
 */
function untilAborted<T>(promise: PromiseLike<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return Promise.resolve(promise);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new OpenAI.APIUserAbortError());
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).then(() => signal.removeEventListener("abort", onAbort));
  });
}

/** Joins streamed chunks: text deltas go out as they come; tool-call fragments are joined by index. */
async function collectStream(stream: AsyncIterable<ChatCompletionChunk>, onDelta: ((text: string) => void) | undefined): Promise<ModelResponse> {
  let content = "";
  let finishReason = "stop";
  let usage = emptyUsage();
  let model = "";
  const calls: ToolCall[] = [];
  for await (const chunk of stream) {
    model ||= chunk.model;
    if (chunk.usage) usage = usageOf(chunk.usage);
    const choice = chunk.choices[0];
    if (!choice) continue;
    if (choice.delta.content) {
      content += choice.delta.content;
      onDelta?.(choice.delta.content);
    }
    for (const part of choice.delta.tool_calls ?? []) {
      const call = (calls[part.index] ??= { id: "", type: "function", function: { name: "", arguments: "" } });
      if (part.id) call.id = part.id;
      if (part.function?.name) call.function.name += part.function.name;
      if (part.function?.arguments) call.function.arguments += part.function.arguments;
    }
    if (choice.finish_reason) finishReason = choice.finish_reason;
  }
  const toolCalls = calls.filter((call) => call !== undefined);
  return { content: content || (toolCalls.length ? null : ""), toolCalls, finishReason, usage, model };
}

function usageOf(usage: OpenAI.CompletionUsage | null | undefined): Usage {
  if (!usage) return emptyUsage();
  return { promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens, totalTokens: usage.total_tokens };
}
