/**
 * `glassbox replay <run-id>`: a recorded run re-run from its exact recorded context against another
 * model (--model) or system prompt (--system-prompt FILE), with tools answered from the recording and
 * never run (src/agent/replay.ts), shown beside the recorded one. `glassbox eval` is in eval.ts.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { formatNumber, formatTable } from "../adapters/terminal/table.js";
import { recordedRunOf } from "../adapters/trace-readings.js";
import { createOpenAIModel } from "../agent/llm/index.js";
import { replayRun, type ReplayComparison, type RunSummary } from "../agent/replay.js";
import type { ToolSpec } from "../agent/types.js";
import { assertModelConfigured, loadConfig } from "../config.js";
import { loadToolModules } from "../tools/load-modules.js";
import { createToolRegistry } from "../tools/registry.js";
import type { CommandInput } from "./command.js";
import { UsageError } from "./help.js";
import { glassboxCommand } from "./invocation.js";
import { nothingRecorded, openRecords } from "./records.js";

export async function replayCommand({ positionals, options }: CommandInput): Promise<number> {
  const [runId, ...extra] = positionals;
  if (!runId || extra.length > 0)
    throw new UsageError(
      `Name one recorded run: ${glassboxCommand()} replay <run-id> (${glassboxCommand()} trace <session> shows its runs).`,
    );
  const [comparison] = await replayAll([runId], options);
  if (!comparison) return 1;
  if (options.json) process.stdout.write(`${JSON.stringify(comparison, null, 2)}\n`);
  else process.stdout.write(`${sideBySide(comparison)}\n`);
  return 0;
}

/** Each run replayed in turn, on the configured model (or --model); none when nothing is recorded. */
async function replayAll(runIds: string[], options: CommandInput["options"]): Promise<ReplayComparison[]> {
  const config = loadConfig();
  assertModelConfigured(config);
  const systemPrompt = options["system-prompt"] === undefined ? undefined : readPrompt(options["system-prompt"]);
  const tools = options.tools.length > 0 ? await toolSpecs(options.tools) : undefined;
  const records = await openRecords();
  const { store } = records;
  if (!store) {
    process.stdout.write(`${nothingRecorded(records)}\n`);
    return [];
  }
  try {
    const model = createOpenAIModel({
      ...config.model,
      ...(options.model ? { model: options.model } : {}),
      stream: false,
    });
    const comparisons: ReplayComparison[] = [];
    for (const runId of runIds)
      comparisons.push(await replayRun(await recordedRunOf(store, runId), runId, { model, systemPrompt, tools }));
    return comparisons;
  } finally {
    await store.close();
  }
}

export function readPrompt(file: string): string {
  try {
    return readFileSync(resolve(file), "utf8").trim();
  } catch (error) {
    throw new UsageError(
      `--system-prompt: the file ${resolve(file)} cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}).`,
    );
  }
}

/** The schemas of the modules' tools (their handlers are never called in a replay). */
export async function toolSpecs(modules: string[]): Promise<ToolSpec[]> {
  const loaded = await loadToolModules(modules);
  return createToolRegistry(loaded.flatMap((module) => module.tools)).specs();
}

function sideBySide(comparison: ReplayComparison): string {
  const { original, replay } = comparison;
  const calls = (summary: RunSummary) =>
    summary.toolCalls
      .map(
        (call) => `${call.name}(${JSON.stringify(call.arguments)})${call.recorded === false ? " [not recorded]" : ""}`,
      )
      .join(", ") || "none";
  const rows = [
    ["answer", original.output, replay.output],
    ["stop", original.stopReason, replay.stopReason],
    ["tool calls", calls(original), calls(replay)],
    ["steps", String(original.steps), String(replay.steps)],
    [
      "tokens",
      `${formatNumber(original.promptTokens)} + ${formatNumber(original.completionTokens)}`,
      `${formatNumber(replay.promptTokens)} + ${formatNumber(replay.completionTokens)}`,
    ],
    [
      "cost",
      original.cost === null ? "—" : `$${original.cost.toFixed(5)}`,
      replay.cost === null ? "—" : `$${replay.cost.toFixed(5)}`,
    ],
    ["model time", ms(original.latencyMs), ms(replay.latencyMs)],
  ];
  const verdict = comparison.sameToolCalls
    ? "The replay called the same tools with the same arguments."
    : `The runs diverge at tool call ${comparison.divergesAtCall}${comparison.notRecorded ? `; ${comparison.notRecorded} call${comparison.notRecorded === 1 ? " was" : "s were"} not in the recording` : ""}.`;
  return `${formatTable([{ header: "" }, { header: `recorded (${comparison.runId})` }, { header: "replay" }], rows)}\n\n${verdict}${comparison.sameAnswer ? " Same answer." : " The answer changed."}`;
}

export const total = (summary: RunSummary) => summary.promptTokens + summary.completionTokens;
export const ms = (value: number) => `${formatNumber(Math.round(value))} ms`;
