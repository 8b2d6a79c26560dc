/**
 * Errors a person must see, each one sentence saying what to do, with a code an adapter can switch
 * on. Everything a model or a tool does wrong is data for the model instead (tool envelopes). How a
 * model server's failures become these is the model layer's job (llm/server-errors.ts).
 */

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
  | "run_timeout" // a run went past GLASSBOX_RUN_TIMEOUT_MS
  | "quota" // a user is over a daily cap
  | "not_allowed" // the person may not use the bot where they asked (GLASSBOX_CHANNELS' users)
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
