/**
 * Errors a person must see, each one sentence saying what to do, with a code an adapter can switch
 * on. Everything a model or a tool does wrong is data for the model instead (tool envelopes).
 */
import OpenAI from "openai";

export type ErrorCode =
  | "configuration" // a setting is missing or wrong: the operator must fix it
  | "model_unreachable"
  | "model_timeout"
  | "model_auth"
  | "model_not_found"
  | "model_rate_limited"
  | "model_unavailable"
  | "model_rejected"
  | "cancelled"
  | "quota" // a user is over a daily cap
  | "internal"; // a fault inside glassbox itself, such as a store that cannot write

export class GlassboxError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly status?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "GlassboxError";
  }
}

export const configurationError = (message: string) => new GlassboxError("configuration", message);

/** Words for a failed model request, naming the setting to change where one would help. */
export function describeModelError(error: unknown, where: { baseURL: string; model: string }): GlassboxError {
  if (error instanceof GlassboxError) return error;
  const cause = { cause: error };
  if (error instanceof OpenAI.APIUserAbortError) return new GlassboxError("cancelled", "The request was cancelled.", undefined, cause);
  if (error instanceof OpenAI.APIConnectionTimeoutError) {
    return new GlassboxError("model_timeout", `The model server at ${where.baseURL} did not answer in time; try again, or raise GLASSBOX_MODEL_TIMEOUT_MS.`, undefined, cause);
  }
  if (error instanceof OpenAI.APIConnectionError) {
    return new GlassboxError("model_unreachable", `I can't reach the model server at ${where.baseURL}; check OPENAI_BASE_URL and that the server is running.`, undefined, cause);
  }
  if (error instanceof OpenAI.APIError && error.status !== undefined) {
    const status = error.status;
    const detail = serverMessage(error);
    if (status === 401 || status === 403) {
      return new GlassboxError("model_auth", `The model server rejected the API key (HTTP ${status}); set OPENAI_API_KEY to a valid key.`, status, cause);
    }
    // A 404 that names the model means LLM_MODEL; any other 404 means a wrong address (often a missing /v1).
    if (status === 404 && error.code !== "model_not_found" && !/model/i.test(detail)) {
      return new GlassboxError("model_unreachable", `The server at ${where.baseURL} has no chat completions endpoint (HTTP 404); check OPENAI_BASE_URL (it usually ends in /v1).`, status, cause);
    }
    if (status === 404) {
      return new GlassboxError("model_not_found", `The model '${where.model}' was not found at ${where.baseURL} (HTTP 404); set LLM_MODEL to a model that server offers.`, status, cause);
    }
    if (status === 429) {
      return new GlassboxError("model_rate_limited", `The model server is rate-limiting requests (HTTP 429) even after retries; please try again in a minute.`, status, cause);
    }
    if (status >= 500) {
      return new GlassboxError("model_unavailable", `I can't reach the model right now (HTTP ${status}); please try again in a minute.`, status, cause);
    }
    return new GlassboxError("model_rejected", `The model server refused the request (HTTP ${status}${detail ? `: ${detail}` : ""}).`, status, cause);
  }
  const message = error instanceof Error ? error.message : String(error);
  return new GlassboxError("model_unavailable", `The model request failed (${message}); please try again in a minute.`, undefined, cause);
}

function serverMessage(error: InstanceType<typeof OpenAI.APIError>): string {
  const body = error.error as { message?: unknown } | undefined;
  const text = typeof body?.message === "string" ? body.message : "";
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}
