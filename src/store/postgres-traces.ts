/**
 * The trace readings on PostgreSQL: a run, a session's runs, a run's sub-agents, a run's steps, a
 * step's exact request, and usage totals by run, session, user and day (sub-agents' runs left out:
 * their tokens are counted in the runs they worked for). Keys sort as SQLite sorts them (bytes).
 */
import { modelNotesOf } from "./model-note-rows.js";
import type pg from "pg";
import type { Message, ToolSpec } from "../agent/types.js";
import type { ThreadReading } from "../agent/thread-context.js";
import { seqsOf } from "./request-refs.js";
import type { ToolCallRecord } from "../tools/types.js";
import type {
  RecordedRequest,
  RequestedCall,
  RunTrace,
  SpendScope,
  Spender,
  Spent,
  StepTrace,
  UsageTotal,
} from "./port-data.js";

const RUN_COLUMNS = `id AS "runId", session_id AS "sessionId", user_id AS "userId", input, status, output, model, steps,
  prompt_tokens AS "promptTokens", completion_tokens AS "completionTokens", cost, started_at AS "startedAt", ended_at AS "endedAt",
  parent_run_id AS "parentRunId", parent_tool_call_id AS "parentToolCallId",
  pipeline_run_id AS "pipelineRunId", pipeline_stage AS "pipelineStage", pipeline_stages AS "pipelineStages", pipeline_name AS "pipelineName",
  configuration, thread_context AS "threadContext", schedule_id AS "scheduleId"`;

interface StepRow {
  step: number;
  model: string | null;
  context_messages: number;
  context_tokens: number | null;
  content: string | null;
  reasoning: string | null;
  reasoning_cut_chars: number;
  model_notes: unknown[];
  requested_calls: RequestedCall[] | null;
  tool_calls: ToolCallRecord[];
  notes: string[];
  prompt_tokens: number;
  completion_tokens: number;
  latency_ms: number;
  cost: number | null;
  created_at: string;
}

export function createPostgresTraces(pool: pg.Pool) {
  const runs = async (where: string, value: string) =>
    (
      await pool.query<RunTrace>(`SELECT ${RUN_COLUMNS} FROM runs WHERE ${where} = $1 ORDER BY started_at, seq`, [
        value,
      ])
    ).rows;
  const totals = async (key: string, userId?: string, since?: Date): Promise<UsageTotal[]> => {
    const params: unknown[] = [];
    const conditions = ["parent_run_id IS NULL"];
    if (userId !== undefined) conditions.push(`user_id = $${params.push(userId)}`);
    if (since) conditions.push(`started_at >= $${params.push(since.toISOString())}`);
    const { rows } = await pool.query<UsageTotal>(
      `SELECT ${key} AS key, count(*) AS runs, coalesce(sum(prompt_tokens), 0) AS "promptTokens", coalesce(sum(completion_tokens), 0) AS "completionTokens",
         CASE WHEN count(*) = count(cost) THEN sum(cost) END AS cost
       FROM runs WHERE ${conditions.join(" AND ")} GROUP BY 1 ORDER BY ${key} COLLATE "C"`,
      params,
    );
    return rows;
  };
  const DAY = `to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')`;

  return {
    async run(runId: string): Promise<RunTrace | undefined> {
      return (await pool.query<RunTrace>(`SELECT ${RUN_COLUMNS} FROM runs WHERE id = $1`, [runId])).rows[0];
    },
    runsOfSession: (sessionId: string) => runs("session_id", sessionId),
    /** The newest reading of a session's thread that got through (the next mention reads after it). */
    async latestThreadReading(sessionId: string, channel?: string): Promise<ThreadReading | undefined> {
      const { rows } =
        channel === undefined
          ? await pool.query<{ reading: ThreadReading }>(
              "SELECT thread_context AS reading FROM runs WHERE session_id = $1 AND thread_context->>'through' IS NOT NULL ORDER BY started_at DESC, seq DESC LIMIT 1",
              [sessionId],
            )
          : await pool.query<{ reading: ThreadReading }>(
              "SELECT thread_context AS reading FROM runs WHERE (session_id = $1 OR starts_with(session_id, $1 || ':')) AND (thread_context->>'channel')::boolean AND thread_context->>'through' IS NOT NULL ORDER BY started_at DESC, seq DESC LIMIT 1",
              [channel],
            );
      return rows[0]?.reading;
    },
    childrenOf: (runId: string) => runs("parent_run_id", runId),
    async stagesOf(pipelineRunId: string): Promise<RunTrace[]> {
      return (
        await pool.query<RunTrace>(
          `SELECT ${RUN_COLUMNS} FROM runs WHERE pipeline_run_id = $1 ORDER BY pipeline_stage`,
          [pipelineRunId],
        )
      ).rows;
    },
    async steps(runId: string, fromStep = 1): Promise<StepTrace[]> {
      const { rows } = await pool.query<StepRow>(
        `SELECT step, model, context_messages, context_tokens, content, reasoning, reasoning_cut_chars, model_notes, requested_calls, tool_calls, notes,
           prompt_tokens, completion_tokens, latency_ms, cost, created_at FROM steps WHERE run_id = $1 AND step >= $2 ORDER BY step`,
        [runId, fromStep],
      );
      return rows.map((row) => ({
        step: row.step,
        model: row.model,
        contextMessages: row.context_messages,
        contextTokens: row.context_tokens,
        content: row.content,
        reasoning: row.reasoning,
        reasoningCutChars: row.reasoning_cut_chars,
        ...modelNotesOf(row.model_notes),
        requestedCalls: row.requested_calls ?? [],
        toolCalls: row.tool_calls,
        notes: row.notes,
        promptTokens: row.prompt_tokens,
        completionTokens: row.completion_tokens,
        latencyMs: row.latency_ms,
        cost: row.cost,
        at: row.created_at,
      }));
    },
    async payload(runId: string, step: number): Promise<RecordedRequest | undefined> {
      const { rows } = await pool.query<{
        request_refs: string;
        tools_ref: number | null;
        tool_choice: string | null;
        streamed: boolean | null;
      }>("SELECT request_refs, tools_ref, tool_choice, streamed FROM steps WHERE run_id = $1 AND step = $2", [
        runId,
        step,
      ]);
      const row = rows[0];
      if (!row) return undefined;
      const seqs = seqsOf(row.request_refs);
      const wanted = [...new Set(row.tools_ref === null ? seqs : [...seqs, row.tools_ref])];
      const parts = await pool.query<{ seq: number; body: string }>(
        "SELECT seq, body FROM step_messages WHERE run_id = $1 AND seq = ANY($2::integer[])",
        [runId, wanted],
      );
      const bodies = new Map(parts.rows.map((part) => [part.seq, part.body]));
      const part = (seq: number) => JSON.parse(bodies.get(seq) ?? "null") as unknown;
      return {
        messages: seqs.map((seq) => part(seq) as Message),
        ...(row.tools_ref !== null ? { tools: part(row.tools_ref) as ToolSpec[] } : {}),
        ...(row.tool_choice === "auto" || row.tool_choice === "none" ? { tool_choice: row.tool_choice } : {}),
        ...(row.streamed !== null ? { stream: row.streamed } : {}),
      };
    },
    totalsByRun: () => totals("id"),
    totalsBySession: () => totals("session_id"),
    totalsByUser: (userId?: string) => totals("user_id", userId),
    totalsByDay: (userId?: string) => totals(DAY, userId),
    /** One user's usage since a moment (for daily quotas). */
    async spentSince(scope: SpendScope, since: Date): Promise<Spent> {
      const params: unknown[] = [since.toISOString()];
      const conditions = ["s.created_at >= $1"];
      if (scope.place !== undefined) {
        // The place's own key, and those under it (ASCII keys: none sorts past U+FFFF after "place:").
        const [place, from, to] = [
          params.push(scope.place),
          params.push(`${scope.place}:`),
          params.push(`${scope.place}:\uffff`),
        ];
        conditions.push(
          `(r.session_id = $${place} OR (r.session_id COLLATE "C" >= $${from} AND r.session_id COLLATE "C" < $${to}))`,
        );
      }
      if (scope.userId !== undefined) conditions.push(`r.user_id = $${params.push(scope.userId)}`);
      const { rows } = await pool.query<Spent>(
        `SELECT coalesce(sum(s.prompt_tokens + s.completion_tokens), 0) AS tokens, coalesce(sum(s.cost), 0) AS cost
         FROM steps s JOIN runs r ON r.id = s.run_id WHERE ${conditions.join(" AND ")}`,
        params,
      );
      return rows[0] ?? { tokens: 0, cost: 0 };
    },
    async spendersSince(since: Date): Promise<Spender[]> {
      const { rows } = await pool.query<Spender>(
        `SELECT r.session_id AS "sessionId", r.user_id AS "userId"
         FROM steps s JOIN runs r ON r.id = s.run_id WHERE s.created_at >= $1 AND r.user_id IS NOT NULL
         GROUP BY r.session_id, r.user_id ORDER BY r.session_id COLLATE "C", r.user_id COLLATE "C"`,
        [since.toISOString()],
      );
      return rows;
    },
    async userUsageSince(userId: string, since: Date): Promise<UsageTotal> {
      return (
        (await totals("user_id", userId, since))[0] ?? {
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
