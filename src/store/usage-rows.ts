/** A run's tool calls as rows (one per call, or one without a tool), and the examples they teach selection. */
import { LIST_TOOLS } from "../tools/selection.js";
import type { UsageExample } from "../tools/usage-learning.js";

export interface UsageRow {
  runId: string;
  request: string;
  status: string;
  tool: string | null;
}

/** One example per top-level run, with the tools its steps called (list_tools left out); a run that called none teaches only when it ended with an answer. */
export function examplesOf(rows: UsageRow[]): UsageExample[] {
  const byRun = new Map<string, UsageExample & { status: string }>();
  for (const row of rows) {
    let example = byRun.get(row.runId);
    if (!example)
      byRun.set(row.runId, (example = { runId: row.runId, request: row.request, status: row.status, tools: [] }));
    if (row.tool && row.tool !== LIST_TOOLS && !example.tools.includes(row.tool)) example.tools.push(row.tool);
  }
  return [...byRun.values()]
    .filter((example) => example.tools.length > 0 || example.status === "final")
    .map(({ runId, request, tools }) => ({ runId, request, tools }));
}
