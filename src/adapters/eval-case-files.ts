/**
 * Eval case files on disk (GLASSBOX_EVAL_DIR): a recorded run saved as one JSON file, named by glassbox
 * from the run's id (never from anything a request says), bounded in size, written whole or not at all;
 * and the cases of files and folders read back for `glassbox eval --cases`.
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { GlassboxError } from "../agent/errors.js";
import { evalCaseOf, parseEvalCase, type EvalCase } from "../agent/eval-case.js";
import { recordingOf } from "../agent/replay.js";
import type { StorePort } from "../store/port.js";
import { recordedRunOf } from "./trace-readings.js";

/** A case larger than this is refused: a run with huge tool results is better trimmed by hand. */
export const MAX_EVAL_CASE_BYTES = 2 * 1024 * 1024;

/** The case of a recorded run in the store; a run that cannot be replayed is one sentence (a GlassboxError). */
export async function evalCaseOfRun(store: StorePort, runId: string): Promise<EvalCase> {
  const recorded = await recordedRunOf(store, runId);
  const run = recorded.run(runId);
  const recording = recordingOf(recorded, runId);
  return evalCaseOf(recording, {
    sessionId: run?.sessionId ?? "",
    input: run?.input ?? "",
    model: run?.model ?? null,
  });
}

/** `run-<id>.json`, the id kept to safe characters: saving a run again replaces its case. */
export function evalCaseFileName(runId: string): string {
  const safe = runId.replace(/[^A-Za-z0-9_-]/g, "").slice(0, 100);
  if (!safe) throw new GlassboxError("configuration", `Run id ${runId} cannot name a file.`);
  return `run-${safe}.json`;
}

export interface SavedCase {
  /** The file's path as written (in GLASSBOX_EVAL_DIR). */
  file: string;
  bytes: number;
}

export class EvalCaseTooLarge extends Error {}

/** Writes the case into `directory` (made when missing) under its own name; the text goes whole or not at all. */
export function writeEvalCase(directory: string, evalCase: EvalCase): SavedCase {
  const text = `${JSON.stringify(evalCase, null, 2)}\n`;
  const bytes = Buffer.byteLength(text);
  if (bytes > MAX_EVAL_CASE_BYTES)
    throw new EvalCaseTooLarge(
      `Run ${evalCase.runId} makes a case of ${bytes.toLocaleString("en-US")} bytes, over the limit of ${MAX_EVAL_CASE_BYTES.toLocaleString("en-US")}.`,
    );
  mkdirSync(directory, { recursive: true });
  const file = join(directory, evalCaseFileName(evalCase.runId));
  const partial = `${file}.${process.pid}.partial`;
  writeFileSync(partial, text, { mode: 0o644 });
  renameSync(partial, file);
  return { file, bytes };
}

/** The cases in the files named, a folder's `.json` files in name order; a file that is not a case is one sentence. */
export function readEvalCases(paths: string[]): Array<{ file: string; evalCase: EvalCase }> {
  const files = paths.flatMap((path) => {
    let isFolder: boolean;
    try {
      isFolder = statSync(path).isDirectory();
    } catch {
      throw new GlassboxError("configuration", `There is no eval case file or folder ${path}.`);
    }
    if (!isFolder) return [path];
    return readdirSync(path)
      .filter((name) => name.endsWith(".json"))
      .sort()
      .map((name) => join(path, name));
  });
  return files.map((file) => ({ file, evalCase: parseEvalCase(readFileSync(file, "utf8"), file) }));
}
