// A real HTTP server that speaks the OpenAI Chat Completions wire protocol, answering from a script.
// Tests point the real `openai` SDK at `server.url`, so retries, streaming parsing and error
// mapping are exercised exactly as in production, without a network or a model.
import { setMaxListeners } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";

/** One scripted tool call; `arguments` is sent verbatim, so it may be broken JSON on purpose. */
export interface ScriptedToolCall {
  name: string;
  arguments: string;
  id?: string;
}

/** What the server does for one chat request. */
export type ScriptedReply =
  | {
      content?: string;
      toolCalls?: ScriptedToolCall[];
      finishReason?: string;
      usage?: { promptTokens?: number; completionTokens?: number };
      delayMs?: number;
    }
  | {
      error: { status: number; message: string; type?: string; code?: string };
      headers?: Record<string, string>;
      delayMs?: number;
    }
  | { hang: true } // never answers until the client aborts or the server closes
  | { dropConnection: true } // destroys the socket without any response
  | { raw: RawReply; delayMs?: number }; // exactly these bytes, for the shapes real servers send

/**
 * A reply written byte for byte, as a real server sent it: each part of `body` is written (and
 * flushed) on its own, a pause apart, so a client reads them separately (a UTF-8 character split
 * across network reads, an SSE event cut in two). `contentType` defaults to text/event-stream
 * when the body has several parts, application/json otherwise.
 */
export interface RawReply {
  status?: number;
  headers?: Record<string, string>;
  contentType?: string;
  body: string | Uint8Array | Array<string | Uint8Array>;
  /** Pause between parts (default 5 ms). */
  partGapMs?: number;
}

/** The part of the request body the server reads; everything else is kept as sent. */
export interface ChatCompletionRequestBody {
  model: string;
  messages: Array<{
    role: string;
    content?: string | Array<{ type: string; text?: string }> | null;
    tool_calls?: unknown[];
    tool_call_id?: string;
    name?: string;
  }>;
  tools?: unknown[];
  tool_choice?: unknown;
  stream?: boolean;
  stream_options?: { include_usage?: boolean } | null;
  [key: string]: unknown;
}

export interface RecordedRequest {
  body: ChatCompletionRequestBody;
  headers: Record<string, string | string[] | undefined>;
  stream: boolean;
  at: number; // Date.now() when the request arrived
}

/** An array is answered in order; a function can answer based on what the model was sent. */
export type Script =
  | ScriptedReply[]
  | ((request: ChatCompletionRequestBody, index: number) => ScriptedReply | Promise<ScriptedReply>);

export interface ScriptedModelServer {
  url: string; // http://127.0.0.1:PORT/v1
  requests: RecordedRequest[]; // every chat completion request, including rejected ones
  setScript(script: Script): void; // replaces the script and resets its position
  push(...replies: ScriptedReply[]): void; // appends to an array script
  close(): Promise<void>;
}

export interface ScriptedModelServerOptions {
  script?: Script;
  port?: number; // 0 (default) picks a free port
  host?: string; // default 127.0.0.1
  latencyMs?: number; // added before every answer
  rejectTools?: boolean | string; // answer 400 to any request with tools, like vLLM/Ollama without tool parsing
  rejectImages?: boolean | string; // answer 400 to any request with an image part, like a text-only model (OpenAI's words by default)
  models?: string[]; // served by GET /v1/models; when given, chat requests for other models get 404
  apiKey?: string; // when given, requests must carry `Authorization: Bearer <apiKey>`
}

const DEFAULT_REJECT_IMAGES_MESSAGE = "Invalid content type. image_url is only supported by certain models.";
const DEFAULT_REJECT_TOOLS_MESSAGE =
  '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set';

export async function startScriptedModelServer(options: ScriptedModelServerOptions = {}): Promise<ScriptedModelServer> {
  let script: Script = options.script ?? [];
  let position = 0;
  let toolCallCounter = 0;
  let responseCounter = 0;
  const requests: RecordedRequest[] = [];
  const models = options.models ?? ["scripted-model"];
  const sockets = new Set<Socket>();
  const closing = new AbortController(); // cuts pending delays short on close()
  setMaxListeners(0, closing.signal); // every delayed reply listens to it; many may wait at once

  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      if (!response.headersSent)
        sendError(response, 500, `scripted model server failed: ${String(error)}`, "server_error");
      else response.destroy();
    });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const path = (request.url ?? "").split("?")[0];
    if (request.method === "GET" && path === "/v1/models") {
      if (!authorized(request)) return sendInvalidKey(response);
      const data = models.map((id) => ({ id, object: "model", created: 0, owned_by: "glassbox" }));
      return sendJson(response, 200, { object: "list", data });
    }
    if (request.method !== "POST" || path !== "/v1/chat/completions") {
      return sendError(response, 404, `No route for ${request.method} ${path}`, "invalid_request_error");
    }
    let body: ChatCompletionRequestBody;
    try {
      body = JSON.parse(await readBody(request)) as ChatCompletionRequestBody;
    } catch {
      return sendError(response, 400, "Request body is not valid JSON", "invalid_request_error");
    }
    const stream = body.stream === true;
    requests.push({ body, headers: { ...request.headers }, stream, at: Date.now() });
    if (!authorized(request)) return sendInvalidKey(response);
    if (typeof body.model !== "string" || !Array.isArray(body.messages)) {
      return sendError(response, 400, "`model` and `messages` are required", "invalid_request_error");
    }
    if (options.models && !options.models.includes(body.model)) {
      return sendError(
        response,
        404,
        `The model \`${body.model}\` does not exist`,
        "invalid_request_error",
        "model_not_found",
      );
    }
    // Rejected before the script is consulted, so a fallback retry gets the entry meant for it.
    if (options.rejectTools && Array.isArray(body.tools) && body.tools.length > 0) {
      const message = typeof options.rejectTools === "string" ? options.rejectTools : DEFAULT_REJECT_TOOLS_MESSAGE;
      return sendError(response, 400, message, "BadRequestError");
    }

    if (
      options.rejectImages &&
      body.messages.some(
        (message) => Array.isArray(message.content) && message.content.some((part) => part.type === "image_url"),
      )
    ) {
      const message = typeof options.rejectImages === "string" ? options.rejectImages : DEFAULT_REJECT_IMAGES_MESSAGE;
      return sendError(response, 400, message, "invalid_request_error");
    }

    const reply = await nextReply(body);
    if ("hang" in reply) return; // the socket stays open until the client or close() ends it
    if ("dropConnection" in reply) return void request.socket.destroy();
    await sleep((options.latencyMs ?? 0) + (reply.delayMs ?? 0), closing.signal);
    if (response.destroyed || closing.signal.aborted) return;
    if ("raw" in reply) return writeRaw(response, reply.raw);
    if ("error" in reply) {
      const { status, message, type, code } = reply.error;
      return sendError(
        response,
        status,
        message,
        type ?? (status >= 500 ? "server_error" : "invalid_request_error"),
        code,
        reply.headers,
      );
    }
    const answer = buildAnswer(reply, body);
    if (stream) writeStream(response, answer, body.stream_options?.include_usage === true);
    else sendJson(response, 200, answer.completion);
  }

  async function writeRaw(response: ServerResponse, raw: RawReply): Promise<void> {
    const parts = Array.isArray(raw.body) ? raw.body : [raw.body];
    const contentType = raw.contentType ?? (parts.length > 1 ? "text/event-stream" : "application/json");
    response.writeHead(raw.status ?? 200, { "content-type": contentType, ...raw.headers });
    for (const [index, part] of parts.entries()) {
      if (index > 0) await sleep(raw.partGapMs ?? 5, closing.signal);
      if (response.destroyed || closing.signal.aborted) return;
      response.write(part);
    }
    response.end();
  }

  async function nextReply(body: ChatCompletionRequestBody): Promise<ScriptedReply> {
    const index = position++;
    if (typeof script === "function") return script(body, index);
    // Answer loudly instead of hanging, so a test with too short a script fails with a clear message.
    return (
      script[index] ?? {
        error: {
          status: 500,
          message: `script exhausted: no reply #${index + 1} (script has ${script.length})`,
          type: "server_error",
        },
      }
    );
  }

  function authorized(request: IncomingMessage): boolean {
    return !options.apiKey || request.headers.authorization === `Bearer ${options.apiKey}`;
  }

  function sendInvalidKey(response: ServerResponse): void {
    sendError(response, 401, "Incorrect API key provided", "invalid_request_error", "invalid_api_key");
  }

  type TextReply = Extract<ScriptedReply, { content?: string }>;
  function buildAnswer(reply: TextReply, body: ChatCompletionRequestBody) {
    const content = reply.content ?? "";
    const toolCalls = (reply.toolCalls ?? []).map((call) => ({
      id: call.id ?? `call_${++toolCallCounter}`,
      type: "function" as const,
      function: { name: call.name, arguments: call.arguments },
    }));
    const promptTokens = reply.usage?.promptTokens ?? estimatePromptTokens(body);
    const completionTokens =
      reply.usage?.completionTokens ??
      Math.max(
        1,
        Math.ceil((content.length + toolCalls.reduce((sum, call) => sum + call.function.arguments.length, 0)) / 4),
      );
    const usage = {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: promptTokens + completionTokens,
    };
    const finishReason = reply.finishReason ?? (toolCalls.length > 0 ? "tool_calls" : "stop");
    const header = {
      id: `chatcmpl-scripted-${++responseCounter}`,
      created: Math.floor(Date.now() / 1000),
      model: body.model,
    };
    const message = {
      role: "assistant" as const,
      content: toolCalls.length > 0 && content === "" ? null : content,
      refusal: null,
      ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
    };
    const completion = {
      ...header,
      object: "chat.completion",
      choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason }],
      usage,
    };
    return { header, content, toolCalls, finishReason, usage, completion };
  }

  // Chunks follow OpenAI's order: role first, content pieces, per-call header then argument
  // fragments keyed by `index`, an empty delta carrying finish_reason, then the optional usage chunk.
  function writeStream(response: ServerResponse, answer: ReturnType<typeof buildAnswer>, includeUsage: boolean): void {
    response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    const send = (choices: unknown[], extra: Record<string, unknown> = {}) => {
      const chunk = {
        ...answer.header,
        object: "chat.completion.chunk",
        choices,
        ...(includeUsage ? { usage: null } : {}),
        ...extra,
      };
      response.write(`data: ${JSON.stringify(chunk)}\n\n`);
    };
    const delta = (value: Record<string, unknown>, finishReason: string | null = null) =>
      send([{ index: 0, delta: value, logprobs: null, finish_reason: finishReason }]);

    delta({ role: "assistant", content: "" });
    for (const piece of splitText(answer.content)) delta({ content: piece });
    answer.toolCalls.forEach((call, index) => {
      delta({
        tool_calls: [{ index, id: call.id, type: "function", function: { name: call.function.name, arguments: "" } }],
      });
      for (let start = 0; start < call.function.arguments.length; start += 8) {
        delta({ tool_calls: [{ index, function: { arguments: call.function.arguments.slice(start, start + 8) } }] });
      }
    });
    delta({}, answer.finishReason);
    if (includeUsage) send([], { usage: answer.usage });
    response.end("data: [DONE]\n\n");
  }

  function sendError(
    response: ServerResponse,
    status: number,
    message: string,
    type: string,
    code?: string,
    headers: Record<string, string> = {},
  ): void {
    sendJson(response, status, { error: { message, type, param: null, code: code ?? null } }, headers);
  }

  function sendJson(
    response: ServerResponse,
    status: number,
    value: unknown,
    headers: Record<string, string> = {},
  ): void {
    const text = JSON.stringify(value);
    response.writeHead(status, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(text),
      ...headers,
    });
    response.end(text);
  }

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => resolve());
  });
  const address = server.address() as AddressInfo;
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;

  return {
    url: `http://${host}:${address.port}/v1`,
    requests,
    setScript(next) {
      script = next;
      position = 0;
    },
    push(...replies) {
      if (typeof script === "function")
        throw new Error("push() needs an array script; the current script is a function");
      script.push(...replies);
    },
    close() {
      closing.abort();
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Hanging requests and keep-alive sockets would otherwise hold close() open forever.
        for (const socket of sockets) socket.destroy();
      });
    },
  };
}

/** Prompt tokens ≈ characters of all message text plus the tool definitions, over four. */
function estimatePromptTokens(body: ChatCompletionRequestBody): number {
  let characters = body.tools ? JSON.stringify(body.tools).length : 0;
  for (const message of body.messages) {
    if (typeof message.content === "string") characters += message.content.length;
    else if (Array.isArray(message.content)) for (const part of message.content) characters += part.text?.length ?? 0;
  }
  return Math.max(1, Math.ceil(characters / 4));
}

/** Word-sized pieces (long words cut at 8 characters) so that streaming deltas are observable. */
function splitText(text: string): string[] {
  if (text === "") return [];
  return text.match(/\s*\S{1,8}\s*/g) ?? [text];
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    request.on("error", reject);
  });
}

function sleep(milliseconds: number, signal: AbortSignal): Promise<void> {
  if (milliseconds <= 0 || signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(done, milliseconds);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done);
  });
}
