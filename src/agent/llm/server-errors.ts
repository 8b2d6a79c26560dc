/**
 * Model servers fail in many shapes (an OpenAI error object, `{"error": "<text>"}`, `{"object":
 * "error", "message": ...}`, a JSON array, plain text, an HTML page, an error inside an HTTP 200 or in
 * the middle of a stream). `readableModelErrors` gives the SDK every one of them in OpenAI's shape with
 * the server's own reason; `describeModelError` turns what the SDK then throws into one sentence.
 */
import OpenAI from "openai";
import { type ErrorCode, GlassboxError } from "../errors.js";
import { fixFor, refusableIn, refusedOption, type RefusableOption } from "./capabilities.js";
import { readTextUpTo } from "./sse.js";

/** How much of an error's body is read. */
const MAX_ERROR_BODY_CHARS = 100_000;

type Where = { baseURL: string; model: string };

/**
 * Words for a failed model request, naming the setting to change where one would help and keeping the
 * server's own reason. `offered` are the models the server lists, for an unknown model's advice.
 */
export function describeModelError(error: unknown, where: Where, offered: string[] = []): GlassboxError {
  if (error instanceof GlassboxError) return error;
  const cause = { cause: error };
  if (error instanceof OpenAI.APIUserAbortError)
    return new GlassboxError("cancelled", "The request was cancelled.", undefined, cause);
  if (error instanceof OpenAI.APIConnectionTimeoutError) {
    return new GlassboxError(
      "model_timeout",
      `The model server at ${where.baseURL} did not answer in time; try again, or raise GLASSBOX_MODEL_TIMEOUT_MS.`,
      undefined,
      cause,
    );
  }
  if (error instanceof OpenAI.APIConnectionError) {
    return new GlassboxError(
      "model_unreachable",
      `I can't reach the model server at ${where.baseURL}; check OPENAI_BASE_URL and that the server is running.`,
      undefined,
      cause,
    );
  }
  if (error instanceof OpenAI.APIError && (error.status !== undefined || error.error !== undefined)) {
    return describeServerError(serverError(error), where, offered, cause);
  }
  const message = error instanceof Error ? error.message : String(error);
  return new GlassboxError(
    "model_unavailable",
    `The model request failed (${message}); please try again in a minute.`,
    undefined,
    cause,
  );
}

/** describeModelError, and for an unknown model the list of what the server offers (asked with `listModels`). */
export async function describeModelFailure(
  error: unknown,
  where: Where,
  listModels: () => Promise<string[]>,
): Promise<GlassboxError> {
  const described = describeModelError(error, where);
  if (described.code !== "model_not_found" || isMissingDeployment(error)) return described;
  const offered = await listModels().catch(() => []);
  return offered.length > 0 ? describeModelError(error, where, offered) : described;
}

/** The ids GET /models lists, within a few seconds; an empty list when the server cannot say. */
export async function modelsOffered(client: OpenAI, timeoutMs = 3000): Promise<string[]> {
  const listing = client.models
    .list({ timeout: timeoutMs, maxRetries: 0 })
    .then((page) => page.data.map((model) => model.id));
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<string[]>((resolve) => (timer = setTimeout(() => resolve([]), timeoutMs + 500)));
  try {
    return await Promise.race([listing.catch(() => []), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** An error as the server reported it: the HTTP status (none mid-stream) and its fields. */
interface ServerError {
  status: number | undefined;
  reason: string;
  code?: string | number | null;
  type?: string | null;
  param?: string | null;
  /** It came inside a reply: an HTTP 200 whose body was only an error, or an error chunk mid-stream. */
  inReply: boolean;
  /** The status the error body itself gives (vLLM's `"code": 400`), where the HTTP status cannot. */
  reportedStatus?: number;
  /** What the request carried that a server may refuse. */
  sent: RefusableOption[];
}

function serverError(error: InstanceType<typeof OpenAI.APIError>): ServerError {
  const fields = readErrorBody(error.error);
  // Without an error body the SDK keeps the server's text (if any) in its message, after the status.
  const text = error.message.replace(error.status !== undefined ? new RegExp(`^${error.status}\\s*`) : /^$/, "");
  const found = fields.reason || (/status code \(no body\)$/.test(text) ? "" : readErrorBody(text).reason);
  // A page titled "502 Bad Gateway" says its status again.
  const reason = error.status !== undefined ? found.replace(new RegExp(`^${error.status}[:\\s]+(?=\\S)`), "") : found;
  const sent = error.headers?.get(SENT_HEADER)?.split(",").filter(Boolean) as RefusableOption[] | undefined;
  return {
    status: error.status,
    reason,
    code: fields.code,
    type: fields.type,
    param: fields.param,
    // An HTTP error always has headers; one built from a reply's body (mid-stream, or a 200 that is only an error) has none.
    inReply: error.status === undefined || error.headers === undefined || error.headers.get(IN_REPLY_HEADER) === "true",
    ...(fields.status ? { reportedStatus: fields.status } : {}),
    sent: sent ?? ["tools", "tool_choice", "parallel_tool_calls", "stream_options"],
  };
}

function describeServerError(
  error: ServerError,
  where: Where,
  offered: string[],
  cause: { cause: unknown },
): GlassboxError {
  const { status, reason } = error;
  // An error inside a reply has no HTTP status worth quoting: the server's words are the whole story.
  const said = error.inReply ? reason || "no reason given" : reason ? `HTTP ${status}: ${reason}` : `HTTP ${status}`;
  const fail = (code: ErrorCode, sentence: string) => new GlassboxError(code, sentence, status, cause);

  if (isUnknownModel(error)) {
    if (error.code === "DeploymentNotFound") {
      return fail(
        "model_not_found",
        `The deployment '${where.model}' was not found at ${where.baseURL} (${said}); set LLM_MODEL to the name of one of the resource's deployments.`,
      );
    }
    const choice = offered.length > 0 ? `one of: ${listed(offered)}` : "a model that server offers";
    return fail(
      "model_not_found",
      `The model '${where.model}' is not available at ${where.baseURL} (${said}); set LLM_MODEL to ${choice}.`,
    );
  }
  const refused = refusedOption({ status, message: reason, param: error.param, code: error.code }, error.sent);
  if (refused) {
    const what = refused === "tools" ? "native tool calls" : refused;
    const fallback = refused === "tools" ? ", or set GLASSBOX_TOOL_MODE=auto to use the text protocol instead" : "";
    return fail(
      "model_rejected",
      `The model server at ${where.baseURL} refuses ${what} (${said}); to fix it, ${fixFor(refused, reason, where.baseURL)}${fallback}.`,
    );
  }
  if (isWrongAddress(error)) {
    return fail(
      "model_unreachable",
      `The server at ${where.baseURL} has no chat completions endpoint (${said}); check OPENAI_BASE_URL (it usually ends in /v1).`,
    );
  }
  const keyWords = /key|token|auth|credential|permission|forbidden|access/i;
  if (status === 401 || (status === 403 && !/\bmodel\b/i.test(reason) && (!reason || keyWords.test(reason)))) {
    return fail("model_auth", `The model server rejected the API key (${said}); set OPENAI_API_KEY to a valid key.`);
  }
  if (isOutOfQuota(error)) {
    return fail(
      "model_rejected",
      `The model server refused the request (${said}); check the plan and billing of the account behind OPENAI_API_KEY.`,
    );
  }
  if (status === 429 || error.reportedStatus === 429) {
    return fail(
      "model_rate_limited",
      `The model server is rate-limiting requests (${said}) even after retries; please try again in a minute.`,
    );
  }
  if (error.inReply) {
    const reported = error.reportedStatus;
    const badRequest =
      (reported !== undefined && reported < 500) ||
      /validation|invalid|badrequest/i.test(String(error.type ?? "")) ||
      /validation error|invalid|must be <=|maximum context length|too (long|many)/i.test(reason);
    return badRequest
      ? fail("model_rejected", `The model server refused the request (${said}).`)
      : fail("model_unavailable", `The model server answered with an error (${said}); please try again in a minute.`);
  }
  if (status !== undefined && status >= 500) {
    return fail("model_unavailable", `I can't reach the model right now (${said}); please try again in a minute.`);
  }
  return fail("model_rejected", `The model server refused the request (${said}).`);
}

function isUnknownModel(error: ServerError): boolean {
  if (!error.inReply && error.status !== undefined && error.status >= 500) return false;
  if (error.code === "model_not_found" || error.code === "DeploymentNotFound" || error.type === "invalid_model")
    return true;
  return /\bmodels?\b[^.]{0,80}?\b(not found|does not exist|doesn't exist|not exist)|(invalid|unknown|no such) model\b|not a valid model/i.test(
    error.reason,
  );
}

function isMissingDeployment(error: unknown): boolean {
  return error instanceof OpenAI.APIError && readErrorBody(error.error).code === "DeploymentNotFound";
}

/** A 404 or 405 without a reason, or one that says the path is wrong; LM Studio says so in an HTTP 200. */
function isWrongAddress(error: ServerError): boolean {
  const pathWords =
    /unexpected endpoint|no route|unknown request url|invalid url|page not found|cannot (post|get) \/|endpoint not found|^(file )?not found$/i;
  if (pathWords.test(error.reason)) return true;
  return (error.status === 404 || error.status === 405) && !error.inReply && error.reason === "";
}

function isOutOfQuota(error: ServerError): boolean {
  return (
    error.code === "insufficient_quota" ||
    error.type === "insufficient_quota" ||
    /exceeded your current quota|insufficient (quota|balance|credits)/i.test(error.reason)
  );
}

function listed(models: string[]): string {
  const shown = models.slice(0, 10).join(", ");
  return models.length > 10 ? `${shown} and ${models.length - 10} more` : shown;
}

/**
 * The reason and fields of an error body in any of the shapes servers send: OpenAI's
 * `{"error": {"message", "type", "code", "param"}}`, TGI's `{"error": "<text>", "error_type"}`,
 * older vLLM's and Mistral's `{"object": "error", "message": <text or object>}`, FastAPI's
 * `{"detail": <text or list>}`, `{"code", "message"}`, Gemini's JSON array, or plain text and HTML.
 */
export function readErrorBody(body: unknown): {
  reason: string;
  code?: string | number | null;
  type?: string | null;
  param?: string | null;
  status?: number;
} {
  if (typeof body === "string") return { reason: readableText(body) };
  if (Array.isArray(body)) return body.length > 0 ? readErrorBody(body[0]) : { reason: "" };
  if (!isRecord(body)) return { reason: "" };
  const inner = isRecord(body.error) ? body.error : undefined;
  const source = inner ?? body;
  const message = inner ? inner.message : typeof body.error === "string" ? body.error : (body.message ?? body.detail);
  const code = pick(source.code) ?? pick(body.code);
  const type =
    typeof source.type === "string"
      ? source.type
      : typeof body.error_type === "string"
        ? body.error_type
        : typeof source.status === "string"
          ? source.status
          : null;
  const status = [source.code, body.code].find(
    (value): value is number => typeof value === "number" && value >= 400 && value < 600,
  );
  return {
    reason: shorten(messageText(message)),
    code,
    type,
    param: typeof source.param === "string" ? source.param : null,
    ...(status ? { status } : {}),
  };
}

/** A message that may be text, a pydantic detail list (`[{"loc": [...], "msg": "..."}]`) or an object holding one. */
function messageText(message: unknown): string {
  if (typeof message === "string") return message;
  if (Array.isArray(message)) {
    return message
      .map((item) =>
        isRecord(item) && typeof item.msg === "string"
          ? `${Array.isArray(item.loc) ? `${item.loc.join(".")}: ` : ""}${item.msg}`
          : messageText(item),
      )
      .join("; ");
  }
  if (isRecord(message))
    return "detail" in message
      ? messageText(message.detail)
      : typeof message.message === "string"
        ? message.message
        : JSON.stringify(message);
  return message === undefined || message === null ? "" : String(message);
}

/** Plain text as it is; an HTML page by its title or, failing that, its visible text. */
function readableText(text: string): string {
  if (!/<\/?[a-z][\s\S]*>/i.test(text)) return shorten(text.trim());
  const title = /<title[^>]*>([\s\S]*?)<\/title>/i.exec(text)?.[1] ?? /<h1[^>]*>([\s\S]*?)<\/h1>/i.exec(text)?.[1];
  const visible = (title ?? text.replace(/<(script|style)[\s\S]*?<\/\1>/gi, " ").replace(/<[^>]+>/g, " "))
    .replace(/\s+/g, " ")
    .trim();
  return shorten(visible);
}

function shorten(text: string): string {
  const oneLine = text.replace(/\s+/g, " ").trim();
  return oneLine.length > 240 ? `${oneLine.slice(0, 240)}…` : oneLine;
}

const pick = (value: unknown): string | number | null | undefined =>
  typeof value === "string" || typeof value === "number" ? value : undefined;
const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** Set on an error rebuilt from an HTTP 200 whose body was only an error. */
const IN_REPLY_HEADER = "x-glassbox-error-in-reply";
/** The refusable options the failed request carried, so the description judges a refusal against them. */
const SENT_HEADER = "x-glassbox-sent-options";

/**
 * A fetch for the SDK that lets it read every error shape. The SDK takes an error's reason only from
 * an OpenAI-shaped body and retries every 5xx, so this rewrites other shapes into that one (the reason
 * kept), turns an HTTP 200 whose body is only an error into that error, and marks as not worth
 * retrying a 5xx that refuses an option (llama.cpp's missing --jinja) and an exhausted quota.
 * Successful replies pass through untouched, streams unread.
 */
export function readableModelErrors(fetch: Fetch): Fetch {
  return async (input, init) => {
    const response = await fetch(input, init);
    // Successful replies pass untouched (an HTTP 200 that is only an error is found where the reply
    // is read, by errorInReply: reading every body twice here cost each step about 0.1 ms).
    if (response.ok) return response;
    // An error's reason is in its first lines; a body without end is not read to its end.
    const { text } = await readTextUpTo(response.body, MAX_ERROR_BODY_CHARS);
    const headers = new Headers(response.headers);
    headers.delete("content-length");
    headers.delete("content-encoding");
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // plain text or HTML: read as text below
    }
    const fields = readErrorBody(body);
    const sent = sentOptions(init?.body);
    const status = response.status;
    headers.set(SENT_HEADER, sent.join(","));
    const refuses =
      refusedOption({ status, message: fields.reason, param: fields.param, code: fields.code }, sent) !== undefined;
    if ((status >= 500 && refuses) || isOutOfQuota({ ...fields, status, inReply: false, sent }))
      headers.set("x-should-retry", "false");
    headers.set("content-type", "application/json");
    const error = {
      message: fields.reason,
      type: fields.type ?? null,
      param: fields.param ?? null,
      code: fields.code ?? null,
    };
    return new Response(JSON.stringify({ error }), { status, headers });
  };
}

/**
 * An HTTP 200 whose body is only an error (LM Studio's unknown path, vLLM's 400 answered as 200),
 * as the error the SDK would have made of it with its status (the one the body gives, else 502);
 * undefined for any other body. `sent` are the refusable options the request carried.
 */
export function errorInReply(body: unknown, sent: RefusableOption[]): InstanceType<typeof OpenAI.APIError> | undefined {
  if (!isOnlyAnError(body)) return undefined;
  const fields = readErrorBody(body);
  const headers = new Headers({ [IN_REPLY_HEADER]: "true", [SENT_HEADER]: sent.join(",") });
  const error = {
    message: fields.reason,
    type: fields.type ?? null,
    param: fields.param ?? null,
    code: fields.code ?? null,
  };
  return OpenAI.APIError.generate(fields.status ?? 502, { error }, undefined, headers);
}

/** A body that is an error and nothing else (no choices, no model list). */
function isOnlyAnError(body: unknown): boolean {
  if (Array.isArray(body)) return body.length > 0 && isRecord(body[0]) && body[0].error !== undefined;
  if (!isRecord(body) || "choices" in body || Array.isArray(body.data)) return false;
  // `{"code": 20012, "message": "...", "data": null}` is an error too, in the flat shape some servers use.
  const flat = typeof body.message === "string" && body.code !== undefined && body.code !== null;
  return (body.error !== undefined && body.error !== null) || body.object === "error" || flat;
}

function sentOptions(body: RequestInit["body"] | undefined): RefusableOption[] {
  if (typeof body !== "string") return [];
  try {
    const parsed: unknown = JSON.parse(body);
    return isRecord(parsed) ? refusableIn(parsed) : [];
  } catch {
    return [];
  }
}
