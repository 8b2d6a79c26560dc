/**
 * An eval case: a recorded run kept as a file, so `glassbox eval --cases` replays it whether or not the
 * run is still in the store. It holds the run's first request (messages and tool schemas), each tool
 * call with the result the model read, and the run as compared (answer, stop reason, tool calls, steps,
 * tokens, cost): what the replay is answered from and what it is held against.
 */
import { GlassboxError } from "./errors.js";
import type { Recording } from "./replay.js";

export const EVAL_CASE_FORMAT = "glassbox-eval-case";

export interface EvalCase extends Recording {
  format: typeof EVAL_CASE_FORMAT;
  version: 1;
  /** The recorded run's session, its request (shortened) and model: for people reading the file. */
  sessionId: string;
  input: string;
  model: string | null;
  savedAt: string;
}

export function evalCaseOf(
  recording: Recording,
  about: { sessionId: string; input: string; model: string | null },
  now = new Date(),
): EvalCase {
  return { format: EVAL_CASE_FORMAT, version: 1, ...about, savedAt: now.toISOString(), ...recording };
}

/** The case a file holds, checked enough that a replay can read it; anything else is one sentence naming the file. */
export function parseEvalCase(text: string, file: string): EvalCase {
  const wrong = (why: string) =>
    new GlassboxError("configuration", `${file} is not a glassbox eval case (${why}); save one from the trace viewer.`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw wrong("it is not JSON");
  }
  if (!isObject(value) || value.format !== EVAL_CASE_FORMAT) throw wrong(`no "format": "${EVAL_CASE_FORMAT}"`);
  if (value.version !== 1) throw wrong(`version ${String(value.version)}; this glassbox reads version 1`);
  const { runId, userId, request, calls, original } = value;
  if (typeof runId !== "string" || typeof userId !== "string") throw wrong('no "runId" or "userId"');
  if (!isObject(request) || !Array.isArray(request.messages)) throw wrong('no "request" with "messages"');
  if (!Array.isArray(calls) || !calls.every((call) => isObject(call) && typeof call.name === "string"))
    throw wrong('no "calls" list');
  if (!isObject(original) || typeof original.output !== "string" || !Array.isArray(original.toolCalls))
    throw wrong('no "original" run to compare with');
  return value as unknown as EvalCase;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
