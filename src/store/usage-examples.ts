/**
 * Tool-selection examples from a store's rows (the rules of src/tools/usage-history.ts): one per
 * top-level run, with the tools its steps called (list_tools left out); a run that called none
 * teaches only when it ended with an answer.
 */
import { LIST_TOOLS } from "../tools/selection.js";
import type { UsageExample } from "./port-data.js";

/** A run's request and status with one tool its steps called (null: a step without calls, or none). */
export interface UsageRow {
  runId: string;
  request: string;
  status: string;
  tool: string | null;
}

export function examplesOf(rows: UsageRow[]): UsageExample[] {
  const byRun = new Map<string, UsageExample & { status: string }>();
  for (const row of rows) {
    let example = byRun.get(row.runId);
    if (!example) byRun.set(row.runId, (example = { runId: row.runId, request: row.request, status: row.status, tools: [] }));
    if (row.tool && row.tool !== LIST_TOOLS && !example.tools.includes(row.tool)) example.tools.push(row.tool);
  }
  return [...byRun.values()]
    .filter((example) => example.tools.length > 0 || example.status === "final")
    .map(({ runId, request, tools }) => ({ runId, request, tools }));
}
