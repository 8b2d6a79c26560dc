/**
 * What one tool call came to, as data: the handler's outcome (returned, threw, timed out, cancelled)
 * raced against its time limit and the run's cancellation, the envelope the model reads, cut to the
 * result limit with a marker, and the semaphore that bounds how many calls run at once.
 */
import { redactUrlsIn } from "../redact.js";
import type { ToolEnvelope, ToolErrorType } from "./types.js";

export type Outcome =
  | { kind: "returned"; data: unknown }
  | { kind: "threw"; error: unknown }
  | { kind: "timeout" }
  | { kind: "cancelled" };

export const CANCELLED = "The run was cancelled before this call finished.";

export function envelopeFor(outcome: Outcome, name: string, timeoutMs: number, dangerous: boolean): ToolEnvelope {
  const seconds = `${Number((timeoutMs / 1000).toFixed(2))} s`;
  switch (outcome.kind) {
    case "returned": {
      const data = outcome.data === undefined ? null : outcome.data;
      // A BigInt or a cycle is the tool's mistake; the envelope must stay plain data for the store and trace.
      try {
        JSON.stringify(data);
      } catch (error) {
        return errorEnvelope("execution_error", `The tool returned a value that is not JSON (${errorText(error)}).`);
      }
      return { status: "success", data };
    }
    case "threw":
      return errorEnvelope("execution_error", errorText(outcome.error));
    case "cancelled":
      return errorEnvelope("execution_error", CANCELLED);
    case "timeout":
      return errorEnvelope(
        "timeout",
        dangerous
          ? `'${name}' did not finish within ${seconds}; its outcome is unknown (it may or may not have taken effect). It will not be retried automatically; tell the user so they can check.`
          : `'${name}' did not finish within ${seconds}. Try different arguments or another way.`,
      );
  }
}

export function errorEnvelope(type: ToolErrorType, message: string): ToolEnvelope {
  return { status: "error", error: { type, message } };
}

/** A thrown value as "Type: message" (no stack: the model cannot use one). */
export function errorText(error: unknown): string {
  if (error instanceof Error)
    return error.name && error.name !== "Error" ? `${error.name}: ${error.message}` : error.message;
  return String(error);
}

/** How many frames of a thrown error's stack the trace keeps. */
const MAX_STACK_FRAMES = 20;

/**
 * Where a thrown error came from, for the people reading the trace (never the model, which gets the
 * envelope): its stack's frames (function, file, line), at most MAX_STACK_FRAMES, with any URL's
 * credentials hidden. Undefined for a thrown value without a stack.
 */
export function stackOf(error: unknown): string | undefined {
  if (!(error instanceof Error) || typeof error.stack !== "string") return undefined;
  const frames = error.stack
    .split("\n")
    .filter((line) => /^\s+at /.test(line))
    .slice(0, MAX_STACK_FRAMES)
    .map((line) => line.trim());
  return frames.length > 0 ? redactUrlsIn(frames.join("\n")) : undefined;
}

/**
 * A call's result as a record keeps it: `content`, what the model reads (the envelope as compact
 * JSON, cut to `maxChars` with a marker saying how much was cut), and `envelope`, what the store, the
 * trace and pages keep (whole up to `storedChars` of JSON, else cut the same way, `storedCutChars`
 * saying how much it lost). A tool that returns 50 MB costs the store and the pages no more than that.
 */
export function renderForModel(
  envelope: ToolEnvelope,
  maxChars: number,
  storedChars = Math.max(maxChars, STORED_RESULT_CHARS),
): { content: string; truncatedChars: number; envelope: ToolEnvelope; storedCutChars?: number } {
  let full: string;
  try {
    full = JSON.stringify(envelope);
  } catch (error) {
    const notJson = errorEnvelope(
      "execution_error",
      `The tool returned a value that is not JSON (${errorText(error)}).`,
    );
    return renderForModel(notJson, maxChars, storedChars);
  }
  if (full.length <= maxChars) return { content: full, truncatedChars: 0, envelope };
  // The result's text, made once for both cuts (storedChars is never below maxChars).
  const text =
    envelope.status === "success"
      ? typeof envelope.data === "string"
        ? envelope.data
        : JSON.stringify(envelope.data)
      : envelope.error.message;
  const forModel = cut(envelope, text, maxChars);
  if (full.length <= storedChars) return { ...forModel, envelope };
  const stored = cut(envelope, text, storedChars);
  return { ...forModel, envelope: JSON.parse(stored.content) as ToolEnvelope, storedCutChars: stored.truncatedChars };
}

/** What the record of a call keeps of a result at most, as JSON (the model reads GLASSBOX_MAX_RESULT_CHARS of it). */
export const STORED_RESULT_CHARS = 64 * 1024;

/** The envelope, whose JSON is longer than `maxChars`, as it fits: its result's `text` cut, with a marker. */
function cut(envelope: ToolEnvelope, text: string, maxChars: number): { content: string; truncatedChars: number } {
  const wrap = (kept: string) => {
    const marked = `${kept} …[cut ${text.length - kept.length} of ${text.length} characters]`;
    return JSON.stringify(
      envelope.status === "success"
        ? { status: "success", data: marked }
        : { status: "error", error: { ...envelope.error, message: marked } },
    );
  };
  // Escaping can lengthen the text, so shrink until the whole envelope fits.
  let keep = Math.max(0, maxChars - (wrap("").length + 8));
  let content = wrap(text.slice(0, keep));
  while (content.length > maxChars && keep > 0) {
    keep = Math.max(0, keep - (content.length - maxChars));
    content = wrap(text.slice(0, keep));
  }
  return { content, truncatedChars: text.length - keep };
}

/** The handler's outcome as data; a synchronous throw counts as a throw, not a crash. */
export function callHandler(call: () => unknown): Promise<Outcome> {
  try {
    return Promise.resolve(call()).then(
      (data): Outcome => ({ kind: "returned", data }),
      (error: unknown): Outcome => ({ kind: "threw", error }),
    );
  } catch (error) {
    return Promise.resolve({ kind: "threw", error });
  }
}

export function withTimeout(work: Promise<Outcome>, timeoutMs: number): Promise<Outcome> {
  return new Promise<Outcome>((resolve) => {
    const timer = setTimeout(() => resolve({ kind: "timeout" }), timeoutMs);
    void work.then((outcome) => {
      clearTimeout(timer);
      resolve(outcome);
    });
  });
}

/** Settles like `work`, or with `onCancel()` as soon as the run is cancelled, whatever `work` is doing. */
export function settleOrCancel<T>(work: Promise<T>, signal: AbortSignal | undefined, onCancel: () => T): Promise<T> {
  if (!signal) return work;
  if (signal.aborted) return Promise.resolve(onCancel());
  let onAbort: (() => void) | undefined;
  const cancelled = new Promise<T>((resolve) => {
    onAbort = () => resolve(onCancel());
    signal.addEventListener("abort", onAbort, { once: true });
  });
  return Promise.race([work, cancelled]).finally(() => signal.removeEventListener("abort", onAbort as () => void));
}

export function createSemaphore(size: number): {
  tryAcquire(): (() => void) | undefined;
  acquire(): Promise<() => void>;
} {
  let free = Math.max(1, size);
  const waiting: Array<() => void> = [];
  const release = () => {
    const next = waiting.shift();
    if (next) next();
    else free++;
  };
  return {
    // A free slot is taken at once, without waiting for a promise to settle.
    tryAcquire: () => (free > 0 ? (free--, release) : undefined),
    acquire: () =>
      new Promise((resolve) => {
        if (free > 0) {
          free--;
          resolve(release);
        } else waiting.push(() => resolve(release));
      }),
  };
}
