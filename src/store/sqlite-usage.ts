/**
 * Where selection's learning gets its examples on SQLite: the trace tables. A top-level run's
 * request is `runs.input`, the tools the model used are the names in its steps' `tool_calls`
 * (list_tools left out: it is always sent; a tool it led to appears as called in a later step).
 */
import type Database from "better-sqlite3";
import type { UsageExample } from "../tools/usage-learning.js";
import { examplesOf, type UsageRow } from "./usage-rows.js";

/** How many of the latest top-level runs are read at startup. */
const DEFAULT_HISTORY_RUNS = 5_000;

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
export function readUsageHistory(db: Database.Database, runs = DEFAULT_HISTORY_RUNS): UsageExample[] {
  const rows = db
    .prepare(USAGE_OF(`${RECENT_RUNS} ORDER BY started_at DESC, rowid DESC LIMIT ?`))
    .all(runs) as UsageRow[];
  return examplesOf(rows);
}

/** One run as an example, or none when it is a sub-agent's, unknown, or teaches nothing. */
export function readRunUsage(db: Database.Database, runId: string): UsageExample | undefined {
  return examplesOf(db.prepare(USAGE_OF(`${RECENT_RUNS} AND id = ?`)).all(runId) as UsageRow[])[0];
}
