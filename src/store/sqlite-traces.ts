/** Readings over the trace tables on SQLite, for the CLI and the web page. */
import { modelNotesOf } from "./model-note-rows.js";
import type { RecordedRequest } from "../agent/contracts.js";
import type { RequestedCall, RunTrace, StepTrace, UsageTotal } from "../agent/trace.js";
import type { SpendScope, Spender, Spent } from "./port-data.js";
import type { Message } from "../agent/types.js";
import type { ThreadReading } from "../agent/thread-context.js";
import type { ToolCallRecord } from "../tools/types.js";
import type { Statement } from "better-sqlite3";
import { createRequestLog } from "./sqlite-requests.js";
import type { SqliteStore } from "./sqlite-store.js";

interface StepRow {
  step: number;
  model: string | null;
  context_messages: number;
  context_tokens: number | null;
  content: string | null;
  reasoning: string | null;
  reasoning_cut_chars: number;
  model_notes: string | null;
  requested_calls: string | null;
  tool_calls: string | null;
  notes: string | null;
  prompt_tokens: number;
  completion_tokens: number;
  latency_ms: number;
  cost: number | null;
  created_at: string;
}

const RUN_COLUMNS = `id AS runId, session_id AS sessionId, user_id AS userId, input, status, output, model, steps,
  prompt_tokens AS promptTokens, completion_tokens AS completionTokens, cost, started_at AS startedAt, ended_at AS endedAt,
  parent_run_id AS parentRunId, parent_tool_call_id AS parentToolCallId,
  pipeline_run_id AS pipelineRunId, pipeline_stage AS pipelineStage, pipeline_stages AS pipelineStages, pipeline_name AS pipelineName,
  configuration, thread_context AS threadContext, schedule_id AS scheduleId`;

/** A run's row with its thread reading parsed (SQLite keeps the JSON as text). */
const traceOf = (row: unknown): RunTrace => {
  const run = row as Omit<RunTrace, "threadContext"> & { threadContext: string | null };
  return { ...run, threadContext: run.threadContext ? (JSON.parse(run.threadContext) as ThreadReading) : null };
};

export function createTraceReader(store: SqliteStore) {
  const { db } = store;
  // Read before each model call of a run with a budget: prepared once per shape (place, person, both),
  // each shape with its own conditions, so that the runs' index on the session or the user serves it.
  const spentStatements = new Map<string, Statement>();
  const spentStatement = (byPlace: boolean, byUser: boolean): Statement => {
    const shape = `${byPlace}:${byUser}`;
    let statement = spentStatements.get(shape);
    if (!statement) {
      const conditions = ["s.created_at >= @since"];
      if (byPlace) conditions.push("(r.session_id = @place OR (r.session_id >= @from AND r.session_id < @to))");
      if (byUser) conditions.push("r.user_id = @userId");
      statement = db.prepare(
        `SELECT coalesce(sum(s.prompt_tokens + s.completion_tokens), 0) AS tokens, coalesce(sum(s.cost), 0) AS cost
         FROM steps s JOIN runs r ON r.id = s.run_id WHERE ${conditions.join(" AND ")}`,
      );
      spentStatements.set(shape, statement);
    }
    return statement;
  };
  const requests = createRequestLog(db);
  const statements = {
    spenders: db.prepare(
      `SELECT DISTINCT r.session_id AS sessionId, r.user_id AS userId
       FROM steps s JOIN runs r ON r.id = s.run_id WHERE s.created_at >= ? AND r.user_id IS NOT NULL
       ORDER BY sessionId, userId`,
    ),
    run: db.prepare(`SELECT ${RUN_COLUMNS} FROM runs WHERE id = ?`),
    runsOfSession: db.prepare(`SELECT ${RUN_COLUMNS} FROM runs WHERE session_id = ? ORDER BY started_at, rowid`),
    children: db.prepare(`SELECT ${RUN_COLUMNS} FROM runs WHERE parent_run_id = ? ORDER BY started_at, rowid`),
    stages: db.prepare(`SELECT ${RUN_COLUMNS} FROM runs WHERE pipeline_run_id = ? ORDER BY pipeline_stage`),
    latestThreadReading: db
      .prepare(
        "SELECT thread_context FROM runs WHERE session_id = ? AND json_extract(thread_context, '$.through') IS NOT NULL ORDER BY started_at DESC, rowid DESC LIMIT 1",
      )
      .pluck(),
    // Keys are ASCII: none under the prefix sorts past U+FFFF after it.
    latestChannelReading: db
      .prepare(
        "SELECT thread_context FROM runs WHERE (session_id = ? OR (session_id >= ? AND session_id < ?)) AND json_extract(thread_context, '$.channel') = 1 AND json_extract(thread_context, '$.through') IS NOT NULL ORDER BY started_at DESC, rowid DESC LIMIT 1",
      )
      .pluck(),
    steps: db.prepare(
      "SELECT step, model, context_messages, context_tokens, content, reasoning, reasoning_cut_chars, model_notes, requested_calls, tool_calls, notes, prompt_tokens, completion_tokens, latency_ms, cost, created_at FROM steps WHERE run_id = ? AND step >= ? ORDER BY step",
    ),
  };
  // Sub-agents' runs are left out: their tokens are already counted in the runs they worked for.
  const totals = (groupBy: string, where = "1 = 1", ...params: unknown[]): UsageTotal[] =>
    db
      .prepare(
        `SELECT ${groupBy} AS key, count(*) AS runs, coalesce(sum(prompt_tokens), 0) AS promptTokens, coalesce(sum(completion_tokens), 0) AS completionTokens,
          CASE WHEN count(*) = count(cost) THEN sum(cost) END AS cost
         FROM runs WHERE parent_run_id IS NULL AND ${where} GROUP BY key ORDER BY key`,
      )
      .all(...params) as UsageTotal[];

  return {
    run(runId: string): RunTrace | undefined {
      const row = statements.run.get(runId);
      return row ? traceOf(row) : undefined;
    },
    runsOfSession: (sessionId: string) => statements.runsOfSession.all(sessionId).map(traceOf),
    /** The runs of sub-agents that worked for a run, to nest under its tool calls. */
    childrenOf: (runId: string) => statements.children.all(runId).map(traceOf),
    /** A pipeline's stages so far, in order, by its first stage's run. */
    stagesOf: (pipelineRunId: string) => statements.stages.all(pipelineRunId).map(traceOf),
    /** The newest reading of a session's thread that got through (the next mention reads after it). */
    latestThreadReading(sessionId: string, channel?: string): ThreadReading | undefined {
      const text = (
        channel === undefined
          ? statements.latestThreadReading.get(sessionId)
          : statements.latestChannelReading.get(channel, `${channel}:`, `${channel}:\uffff`)
      ) as string | undefined;
      return text ? (JSON.parse(text) as ThreadReading) : undefined;
    },
    steps(runId: string, fromStep = 1): StepTrace[] {
      return (statements.steps.all(runId, fromStep) as StepRow[]).map((row) => ({
        step: row.step,
        model: row.model,
        contextMessages: row.context_messages,
        contextTokens: row.context_tokens,
        content: row.content,
        reasoning: row.reasoning,
        reasoningCutChars: row.reasoning_cut_chars,
        ...modelNotesOf(JSON.parse(row.model_notes ?? "[]")),
        requestedCalls: JSON.parse(row.requested_calls ?? "[]") as RequestedCall[],
        toolCalls: JSON.parse(row.tool_calls ?? "[]") as ToolCallRecord[],
        notes: JSON.parse(row.notes ?? "[]") as string[],
        promptTokens: row.prompt_tokens,
        completionTokens: row.completion_tokens,
        latencyMs: row.latency_ms,
        cost: row.cost,
        at: row.created_at,
      }));
    },
    /** The exact request a step sent to the model (older steps: its messages alone). */
    payload: (runId: string, step: number): RecordedRequest | Message[] | undefined => requests.read(runId, step),
    totalsByRun: () => totals("id"),
    totalsBySession: () => totals("session_id"),
    /** By user; given a user, only that user's runs (a user's API token sees its own usage alone). */
    totalsByUser: (userId?: string) =>
      userId === undefined ? totals("user_id") : totals("user_id", "user_id = ?", userId),
    totalsByDay: (userId?: string) =>
      userId === undefined
        ? totals("substr(started_at, 1, 10)")
        : totals("substr(started_at, 1, 10)", "user_id = ?", userId),
    spentSince(scope: SpendScope, since: Date): Spent {
      const params = { since: since.toISOString(), ...placeRange(scope.place), userId: scope.userId ?? null };
      return spentStatement(scope.place !== undefined, scope.userId !== undefined).get(params) as Spent;
    },
    spendersSince: (since: Date): Spender[] => statements.spenders.all(since.toISOString()) as Spender[],
    /** One user's usage since a moment (for daily quotas). */
    userUsageSince(userId: string, since: Date): UsageTotal {
      return (
        totals("user_id", "user_id = ? AND started_at >= ?", userId, since.toISOString())[0] ?? {
          key: userId,
          runs: 0,
          promptTokens: 0,
          completionTokens: 0,
          cost: 0,
        }
      );
    },
  };
}

export type TraceReader = ReturnType<typeof createTraceReader>;

/** The session keys under `place` (`place:...`), as a range: keys are ASCII, so none sorts past U+FFFF after it. */
const placeRange = (place = "") => ({ place, from: `${place}:`, to: `${place}:\uffff` });
