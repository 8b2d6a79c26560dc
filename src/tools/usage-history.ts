/**
 * Where selection's learning gets its examples in a running bot: the trace tables. A top-level run's
 * request is `runs.input`, the tools the model used are the names in its steps' `tool_calls`
 * (list_tools left out: it is always sent; a tool it led to appears as called in a later step).
 * Read-only: the store and the trace recorder stay the only writers.
 */
import { LIST_TOOLS } from "./selection.js";
import type { UsageExample, UsageLearning } from "./usage-learning.js";

/** The part of a better-sqlite3 database read here (the store's `db` fits). */
export interface UsageDatabase {
  prepare(sql: string): { all(...params: unknown[]): unknown[] };
}

/** How many of the latest top-level runs are read at startup. */
const DEFAULT_HISTORY_RUNS = 5_000;

export interface UsageRow {
  runId: string;
  request: string;
  status: string;
  tool: string | null;
}

// Sub-agents' runs are left out: their requests are written by the parent model, not by people.
const RECENT_RUNS = `SELECT id, input, status, started_at, rowid AS position FROM runs WHERE parent_run_id IS NULL`;
const USAGE_OF = (
  recent: string,
) => `SELECT r.id AS runId, r.input AS request, r.status AS status, json_extract(call.value, '$.name') AS tool
  FROM (${recent}) r LEFT JOIN steps s ON s.run_id = r.id LEFT JOIN json_each(s.tool_calls) call
  ORDER BY r.started_at, r.position, s.step, call.key`;

/**
 * The latest `runs` top-level runs as examples, oldest first: those that called a tool, and those
 * that ended with an answer without one (a run that failed before doing anything teaches nothing).
 */
export function readUsageHistory(db: UsageDatabase, runs = DEFAULT_HISTORY_RUNS): UsageExample[] {
  const rows = db
    .prepare(USAGE_OF(`${RECENT_RUNS} ORDER BY started_at DESC, rowid DESC LIMIT ?`))
    .all(runs) as UsageRow[];
  return examplesOf(rows);
}

/** One run as an example, or none when it is a sub-agent's, unknown, or teaches nothing. */
export function readRunUsage(db: UsageDatabase, runId: string): UsageExample | undefined {
  return examplesOf(db.prepare(USAGE_OF(`${RECENT_RUNS} AND id = ?`)).all(runId) as UsageRow[])[0];
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

/**
 * A trace recorder that also teaches `usage` each top-level run as it ends, read back from the
 * tables once the unit with the run's end has committed. A paused run ends again when resumed: it
 * is learned again, replacing its earlier example.
 */
export function learnAtRunEnd<
  Event extends { type: string; runId: string },
  Unit extends { afterCommit(callback: () => void): void },
  Recorder extends { record(event: Event, unit: Unit): void },
>(recorder: Recorder, db: UsageDatabase, usage: UsageLearning): Recorder {
  return {
    ...recorder,
    record(event: Event, unit: Unit) {
      recorder.record(event, unit);
      if (event.type !== "run_end") return;
      unit.afterCommit(() => {
        // Learning only sharpens selection: a run must not fail over it.
        try {
          const example = readRunUsage(db, event.runId);
          if (example) usage.learn(example);
        } catch {
          // the next run end, or the next start, reads the tables again
        }
      });
    },
  };
}
