/**
 * The model client: the official `openai` SDK against any OpenAI-compatible server. The SDK makes
 * the request (retries with bounded exponential backoff and jitter, honouring Retry-After, and the
 * errors of a refused request); the reply is read here, whatever shape it comes in (see stream.ts,
 * reply.ts). Streams the answer as deltas, falls back to a text protocol for servers that reject
 * native tool calling, and lets nothing but a GlassboxError out.
 */
import OpenAI from "openai";
import type { ChatCompletionCreateParams } from "openai/resources/chat/completions";
import { redactUrl } from "../../redact.js";
import { GlassboxError } from "../errors.js";
import {
  describeModelError,
  describeModelFailure,
  errorInReply,
  modelsOffered,
  readableModelErrors,
} from "./server-errors.js";
import { undiciFetch } from "../../undici-fetch.js";
import {
  addUsage,
  type ChatModel,
  type Message,
  type ModelExchange,
  type ModelRequest,
  type ModelResponse,
} from "../types.js";
import { capabilitiesOf, refusableIn, type RefusableOption } from "./capabilities.js";
import { IdFormat } from "./ids.js";
import { createImageGate, type ImageMode } from "./images.js";
import { toWireMessages } from "./outgoing.js";
import { otherLimitName, outputLimitNameFor, refusesLimitName } from "./output-limit.js";
import { judgeReply } from "./reply.js";
import { BodyReadError, BodyTooLongError, readBody, type BodyItem } from "./sse.js";
import { ReplyLimits } from "./reply-limits.js";
import { ReplyAssembler } from "./stream.js";
import { parseTextDecision, REEMIT_REQUEST, toTextProtocol } from "./text-protocol.js";
import type { AnswerStart } from "./think.js";

export type ToolMode = "native" | "text" | "auto";

export interface OpenAIModelOptions {
  model: string;
  baseURL?: string;
  apiKey?: string;
  /** Stream answers as deltas (default true). */
  stream?: boolean;
  /** "auto" (default) uses native tool calling and switches to text when the server rejects `tools`. */
  toolMode?: ToolMode;
  /** Per-request time limit, for the headers and again for the body (default 60 s). */
  timeoutMs?: number;
  /** The longest silence in the middle of a reply's body (default 30 s, at most timeoutMs). */
  idleMs?: number;
  /** The most tokens a reply may hold, sent as the server takes it (max_completion_tokens or max_tokens); unset: not sent. */
  maxOutputTokens?: number;
  /** Retries after the first try for 429, 5xx and connection errors (default 3, so 4 tries). */
  maxRetries?: number;
  /** Whether attached images go as image parts (see images.ts; default "auto"). */
  images?: ImageMode;
  warn?: (message: string) => void;
}

export const DEFAULT_BASE_URL = "https://api.openai.com/v1";

const NO_TOOLS: ReadonlySet<string> = new Set();

export function createOpenAIModel(options: OpenAIModelOptions): ChatModel & { readonly toolMode: ToolMode } {
  const baseURL = options.baseURL ?? DEFAULT_BASE_URL;
  const client = new OpenAI({
    baseURL,
    // Local servers (Ollama, vLLM) need no key, but the SDK insists on one.
    apiKey: options.apiKey || "not-needed",
    timeout: options.timeoutMs ?? 60_000, // to the headers; ReplyLimits bounds the body
    maxRetries: options.maxRetries ?? 3,
    // Error bodies of any shape reach the SDK as OpenAI-shaped ones, the server's reason kept.
    fetch: readableModelErrors(undiciFetch),
  });
  // As sentences show it: the URL's user, password and credential query values hidden.
  const where = { baseURL: redactUrl(baseURL), model: options.model };
  const timeoutMs = options.timeoutMs ?? 60_000;
  const idleMs = Math.min(options.idleMs ?? 30_000, timeoutMs);
  // Sent under the name this server takes (output-limit.ts); a refusal of the name switches it once, for the process.
  let limitName = outputLimitNameFor(baseURL);
  let limitNameLearned = false;
  const warn = options.warn ?? ((message: string) => console.warn(message));
  // Options this server refuses (tools, stream_options, ...), remembered for the process.
  const capabilities = capabilitiesOf(where, warn);
  let toolMode: ToolMode = options.toolMode ?? "auto";
  let textCallCount = 0;
  // What this server's replies have shown so far: the ids it accepts, how its answers begin.
  const ids = new IdFormat();
  let answerStart: AnswerStart = "unknown";
  const images = createImageGate(options.images ?? "auto", warn);

  /**
   * One request: its parameters built, the SDK's request made, the reply read. The one place a
   * request is sent; a refusal the request can be mended for (an id format) is sent once more.
   */
  async function send(
    messages: Message[],
    request: ModelRequest,
    withTools: boolean,
    resent = false,
  ): Promise<ModelResponse> {
    const tools = withTools && request.tools?.length ? request.tools : [];
    const offered =
      tools.length > 0 && request.toolChoice !== "none" ? new Set(tools.map((tool) => tool.function.name)) : NO_TOOLS;
    const streaming = options.stream !== false && request.onDelta !== undefined;
    const renamed = new Map<string, string>();
    const params: ChatCompletionCreateParams = {
      model: options.model,
      messages: toWireMessages(messages, ids, renamed),
      // "auto" is the default wherever tools are given, so only "none" needs saying.
      ...(tools.length > 0
        ? { tools, ...(request.toolChoice === "none" ? { tool_choice: "none" as const } : {}) }
        : {}),
      ...(streaming ? { stream: true, stream_options: { include_usage: true } } : {}),
      ...(options.maxOutputTokens === undefined ? {} : { [limitName]: options.maxOutputTokens }),
    };
    const limits = new ReplyLimits({ deadlineMs: timeoutMs, idleMs }, request.signal);
    let response: Response;
    try {
      // The raw response: its body is read by readBody, not by the SDK's parser.
      // Sent without what this server refused before, and once more without an option it refuses now.
      response = await capabilities.send(params, (sent) =>
        untilAborted(client.chat.completions.create(sent, { signal: limits.signal }).asResponse(), request.signal),
      );
    } catch (error) {
      limits.done();
      if (!resent && error instanceof OpenAI.APIError && error.status === 400 && ids.learnFromRefusal(error.message)) {
        return send(messages, request, withTools, true);
      }
      if (!resent && options.maxOutputTokens !== undefined && !limitNameLearned && refusesLimitName(error, limitName)) {
        const refused = limitName;
        limitName = otherLimitName(limitName);
        limitNameLearned = true;
        warn(
          `The model server at ${where.baseURL} refuses ${refused} for '${where.model}', so glassbox sends GLASSBOX_MAX_OUTPUT_TOKENS as ${limitName} from now on.`,
        );
        const reply = await send(messages, request, withTools, true);
        const note = `the server refused ${refused}; the output limit went as ${limitName}, as it will from now on`;
        const sent = JSON.stringify({ [refused]: options.maxOutputTokens });
        return withExchange(reply, { note, sent, received: refusalText(error) });
      }
      throw await describeModelFailure(error, where, () => modelsOffered(client));
    }
    let read: ModelResponse;
    try {
      request.meter?.began();
      limits.started();
      read = await readReply(response, request, messages, offered, streaming, () => refusableIn(params), limits);
    } catch (error) {
      throw limits.failure(where.baseURL) ?? error;
    } finally {
      limits.done();
    }
    const reply = { ...capabilities.noted(read, params), streamed: "stream" in params };
    if (renamed.size === 0) return reply;
    // The trace shows which id the server was sent for each call glassbox knows.
    const pairs = [...renamed].map(([id, sent]) => `${id} as ${sent}`);
    const note = `tool-call ids went to the server in the form it takes: ${pairs.slice(0, 8).join(", ")}${pairs.length > 8 ? ` and ${pairs.length - 8} more` : ""}`;
    return { ...reply, notes: [...(reply.notes ?? []), note] };
  }

  /** The reply read into one ModelResponse; the answer streams to `onDelta` as it comes. */
  async function readReply(
    response: Response,
    request: ModelRequest,
    messages: Message[],
    offered: ReadonlySet<string>,
    streaming: boolean,
    sent: () => RefusableOption[],
    limits: ReplyLimits,
  ): Promise<ModelResponse> {
    const meter = request.meter;
    const assembler = new ReplyAssembler({
      onAnswer: streaming ? request.onDelta : undefined,
      answerStart,
      holdTextCalls: offered.size > 0,
      ...(meter ? { onPiece: (text: string) => meter.received(text) } : {}),
    });
    const whole = response.headers.get("content-type")?.includes("json") === true; // one JSON body, not a stream
    try {
      const take = (item: BodyItem) => {
        if (item.kind === "json" && whole) {
          const failed = errorInReply(item.value, sent());
          if (failed) throw failed;
        }
        if (item.kind === "json") assembler.add(item.value, item.event);
        else if (item.kind === "unreadable") assembler.addUnreadable();
        limits.heard(assembler.chars);
      };
      const body = await readBody(response);
      if (Array.isArray(body)) body.forEach(take);
      else
        for await (const item of body) {
          take(item);
          if (limits.signal.aborted) break;
        }
      // The stream ends quietly when the run is aborted or a limit passed: what arrived is a cut-off answer, not a reply.
      if (limits.signal.aborted) throw new OpenAI.APIUserAbortError();
      if (!assembler.readSomething) throw unreadableReply(where, "no part of it was JSON");
      const judged = judgeReply(assembler.finish(), { offeredTools: offered, isTaken: (id) => isIdIn(messages, id) });
      answerStart = judged.openedInPrompt
        ? "inside"
        : answerStart === "unknown" && judged.plainAnswer
          ? "plain"
          : answerStart;
      ids.observe(judged.serverIds);
      assembler.release(judged.fromText);
      if (request.signal?.aborted) throw new OpenAI.APIUserAbortError();
      return judged.response;
    } catch (error) {
      if (error instanceof BodyTooLongError) limits.tooLong(); // its sentence is the size cap's (see send)
      throw readingError(error, request.signal);
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
    if (tools.length === 0)
      return answered(response, decision.kind === "answer" ? decision.text : (response.content ?? ""), request);
    if (decision.kind === "unreadable") {
      // One second chance: show the model its reply and ask for valid JSON.
      const retry = await send(
        [
          ...messages,
          { role: "assistant", content: response.content ?? "" },
          { role: "user", content: REEMIT_REQUEST },
        ],
        quiet,
        false,
      );
      response = { ...retry, usage: addUsage(response.usage, retry.usage) };
      decision = parseTextDecision(response.content ?? "", nextId);
    }
    if (decision.kind === "tools")
      return { ...response, content: null, toolCalls: decision.toolCalls, finishReason: "tool_calls" };
    return answered(response, decision.kind === "answer" ? decision.text : (response.content ?? ""), request);
  }

  /** One request by the tool mode in force: native tool calling, or the text protocol once the server refused `tools`. */
  async function chatWithTools(request: ModelRequest): Promise<ModelResponse> {
    if (toolMode === "auto" && capabilities.refusesTools()) toolMode = "text";
    if (toolMode === "text") return await chatInText(request);
    try {
      return await send(request.messages, request, true);
    } catch (error) {
      // A refusal of `tools` (announced once by capabilities) means the text protocol from now on.
      if (toolMode !== "auto" || !request.tools?.length || !capabilities.refusesTools(error)) throw error;
      toolMode = "text";
      const reply = await chatInText(request);
      // The trace says why this step (and every later one) described the tools in the prompt.
      // The server's own words (the error's sentence gives advice for GLASSBOX_TOOL_MODE=native, not what happened here).
      const cause = (error as { cause?: unknown }).cause;
      const said = cause instanceof OpenAI.APIError ? cause.message : (error as Error).message;
      const note = `native tool calling refused by the server (${said}); tools described in the prompt from now on (the text protocol)`;
      const sent = JSON.stringify({ tools: request.tools.map((tool) => tool.function.name) });
      return withExchange(reply, { note, sent, received: refusalText(error) });
    }
  }

  function readingError(error: unknown, signal: AbortSignal | undefined): GlassboxError {
    if (signal?.aborted || error instanceof OpenAI.APIUserAbortError)
      return describeModelError(new OpenAI.APIUserAbortError(), where);
    if (error instanceof GlassboxError) return error;
    // A mid-stream error the server reported, in the SDK's own type.
    if (error instanceof OpenAI.APIError) return describeModelError(error, where);
    if (error instanceof BodyReadError)
      return describeModelError(
        new Error("the connection closed in the middle of the answer", { cause: error.cause }),
        where,
      );
    return unreadableReply(where, error);
  }

  return {
    name: options.model,
    get toolMode() {
      return toolMode;
    },
    async chat(request) {
      try {
        // Images go as parts, or as sentences to a server that does not take them.
        return await images.send(request, chatWithTools);
      } catch (error) {
        // Whatever went wrong, the caller gets one of glassbox's errors, never a parser's.
        throw readingError(error, request.signal);
      }
    },
  };
}

/** A reply that is not a chat completion at all (an HTML page, a truncated body), in one sentence. */
function unreadableReply(where: { baseURL: string }, cause: unknown): GlassboxError {
  return new GlassboxError(
    "model_unavailable",
    `The model server at ${where.baseURL} sent a reply that is not a chat completion glassbox can read; please try again, and check that OPENAI_BASE_URL points at an OpenAI-compatible server.`,
    undefined,
    { cause },
  );
}

/** Whether a tool-call id is already in the conversation (a scan: replies carry one call or a few). */
function isIdIn(messages: Message[], id: string): boolean {
  for (const message of messages) {
    if (message.role === "assistant" && message.tool_calls?.some((call) => call.id === id)) return true;
    if (message.role === "tool" && message.tool_call_id === id) return true;
  }
  return false;
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

/** The reply with one more note for the trace, and what was sent and came back for it. */
function withExchange(reply: ModelResponse, exchange: ModelExchange): ModelResponse {
  return {
    ...reply,
    notes: [...(reply.notes ?? []), exchange.note],
    exchanges: [...(reply.exchanges ?? []), exchange],
  };
}

/** What the server answered to a refused request: its status and its own words, as the SDK read them. */
function refusalText(error: unknown): string {
  let current = error;
  while (!(current instanceof OpenAI.APIError) && current instanceof Error && current.cause !== undefined)
    current = current.cause;
  if (current instanceof OpenAI.APIError)
    return `${current.status ?? ""} ${JSON.stringify(current.error ?? current.message)}`.trim();
  return current instanceof Error ? current.message : String(current);
}
