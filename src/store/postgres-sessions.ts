/**
 * The trace viewer's readings on PostgreSQL, as the SQLite ones read them: the session list narrowed
 * by a search over message text and by filters (sqlite-session-search.ts on SQLite), a session's folds
 * (sqlite-folds.ts), and tool-usage history for selection (sqlite-usage.ts).
 * Filters are parameters; only the shape of the query varies with which filters are given.
 */
import type pg from "pg";
import type { Fold, SessionFilters, SessionListing, UsageExample } from "./port-data.js";
import { examplesOf, type UsageRow } from "./usage-rows.js";

const FIRST_MESSAGE_CHARS = 200;
const MAX_FOLDS = 500;
const DEFAULT_HISTORY_RUNS = 5_000;

/** A column of the session's first run (not a sub-agent's). */
const FIRST_RUN = (column: string) =>
  `SELECT ${column} FROM runs r WHERE r.session_id = s.id AND r.parent_run_id IS NULL ORDER BY r.seq LIMIT 1`;
/** An aggregate over the session's own runs (not sub-agents'). */
const TOP_RUNS = (aggregate: string) =>
  `SELECT ${aggregate} FROM runs r WHERE r.session_id = s.id AND r.parent_run_id IS NULL`;

const cut = (text: string) => (text.length > FIRST_MESSAGE_CHARS ? `${text.slice(0, FIRST_MESSAGE_CHARS - 1)}…` : text);

// Sub-agents' runs are left out: their requests are written by the parent model, not by people.
const USAGE_OF = (
  recent: string,
) => `SELECT r.id AS "runId", r.input AS request, r.status, call.value ->> 'name' AS tool
  FROM (${recent}) r LEFT JOIN steps s ON s.run_id = r.id LEFT JOIN LATERAL jsonb_array_elements(s.tool_calls) WITH ORDINALITY AS call(value, position) ON true
  ORDER BY r.started_at, r.seq, s.step, call.position`;
const RECENT_RUNS = "SELECT id, input, status, started_at, seq FROM runs WHERE parent_run_id IS NULL";

interface FoldRow {
  epoch: number;
  content: string;
  tokens: number;
  created_at: string;
  model: string | null;
  prompt_tokens: number | null;
  completion_tokens: number | null;
  cost: number | null;
  folded: number;
  run_id: string | null;
  step: number | null;
}

export function createPostgresSessions(pool: pg.Pool) {
  return {
    async searchSessions(filters: SessionFilters): Promise<{ sessions: SessionListing[]; more: boolean }> {
      const params: unknown[] = [];
      const param = (value: unknown) => `$${params.push(value)}`;
      const where: string[] = [];
      if (filters.text !== undefined) {
        const pattern = param(`%${filters.text.replace(/[\\%_]/g, "\\$&")}%`);
        where.push(`(s.id ILIKE ${pattern}
          OR EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id AND m.content ILIKE ${pattern})
          OR EXISTS (SELECT 1 FROM runs r WHERE r.session_id = s.id AND (r.input ILIKE ${pattern} OR r.output ILIKE ${pattern})))`);
      }
      if (filters.adapter !== undefined) where.push(`starts_with(s.id, ${param(`${filters.adapter}:`)})`);
      if (filters.status !== undefined)
        where.push(`EXISTS (SELECT 1 FROM runs r WHERE r.session_id = s.id AND r.status = ${param(filters.status)})`);
      if (filters.tool !== undefined) {
        where.push(`EXISTS (SELECT 1 FROM runs r JOIN steps st ON st.run_id = r.id, jsonb_array_elements(st.tool_calls) call
          WHERE r.session_id = s.id AND call ->> 'name' = ${param(filters.tool)})`);
      }
      if (filters.from !== undefined || filters.to !== undefined) {
        const from = filters.from !== undefined ? param(filters.from) : undefined;
        const to = filters.to !== undefined ? param(filters.to) : undefined;
        const within = (column: string) =>
          [from ? `${column} >= ${from}` : "", to ? `${column} < ${to}` : ""].filter(Boolean).join(" AND ");
        where.push(`(EXISTS (SELECT 1 FROM runs r WHERE r.session_id = s.id AND ${within("r.started_at")})
          OR EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id AND ${within("m.created_at")}))`);
      }
      if (filters.startedBy !== undefined) where.push(`(${FIRST_RUN("r.user_id")}) = ${param(filters.startedBy)}`);
      if (filters.rated !== undefined)
        where.push(
          `EXISTS (SELECT 1 FROM runs r JOIN feedback f ON f.run_id = r.id WHERE r.session_id = s.id AND f.rating = ${param(filters.rated)})`,
        );
      const limit = param(filters.limit + 1);

      const { rows } = await pool.query<Omit<SessionListing, "adapter">>(
        `SELECT s.id, s.updated_at AS "lastActivity",
          substr(coalesce((${FIRST_RUN("r.input")}),
            (SELECT m.content FROM messages m WHERE m.session_id = s.id AND m.role = 'user' ORDER BY m.id LIMIT 1)), 1, ${FIRST_MESSAGE_CHARS + 1}) AS "firstMessage",
          (${FIRST_RUN("r.user_id")}) AS "startedBy",
          (SELECT count(*) FROM messages m WHERE m.session_id = s.id) AS "messageCount",
          (${TOP_RUNS("count(*)")}) AS "runCount",
          (${TOP_RUNS("coalesce(sum(r.prompt_tokens), 0)")}) AS "promptTokens",
          (${TOP_RUNS("coalesce(sum(r.completion_tokens), 0)")}) AS "completionTokens",
          (${TOP_RUNS("CASE WHEN count(*) = count(r.cost) THEN coalesce(sum(r.cost), 0) END")}) AS cost,
          EXISTS (SELECT 1 FROM runs r WHERE r.session_id = s.id AND r.status = 'error') AS "hasErrors",
          EXISTS (SELECT 1 FROM runs r WHERE r.session_id = s.id AND r.status = 'awaiting_approval') AS "awaitingApproval"
        FROM sessions s
        ${where.length ? `WHERE ${where.join("\n AND ")}` : ""}
        ORDER BY s.updated_at DESC, s.id COLLATE "C"
        LIMIT ${limit}`,
        params,
      );
      const sessions = rows.slice(0, filters.limit).map((row) => ({
        ...row,
        adapter: row.id.split(":")[0] ?? "",
        firstMessage: row.firstMessage === null ? null : cut(row.firstMessage),
      }));
      return { sessions, more: rows.length > filters.limit };
    },

    /**
     * Where memory folded older turns: each summary at the step it was made for (as kept with its
     * call, or else the first step of the session's own runs recorded after it), with its call.
     */
    async foldsOf(sessionId: string): Promise<Fold[]> {
      const { rows } = await pool.query<FoldRow>(
        `SELECT su.epoch, su.content, su.tokens, su.created_at, su.model, su.prompt_tokens, su.completion_tokens, su.cost,
           (SELECT count(*) FROM messages m WHERE m.session_id = su.session_id AND m.epoch = su.epoch AND m.id BETWEEN su.first_message_id AND su.last_message_id) AS folded,
           coalesce(su.run_id, next.run_id) AS run_id, CASE WHEN su.run_id IS NOT NULL THEN su.step ELSE next.step END AS step
         FROM (SELECT * FROM summaries WHERE session_id = $1 ORDER BY id LIMIT ${MAX_FOLDS}) su
         LEFT JOIN LATERAL (
           SELECT st.run_id, st.step FROM steps st JOIN runs r ON r.id = st.run_id
           WHERE su.run_id IS NULL AND r.session_id = su.session_id AND r.parent_run_id IS NULL AND st.created_at >= su.created_at ORDER BY st.created_at, st.id LIMIT 1
         ) next ON true
         ORDER BY su.id`,
        [sessionId],
      );
      return rows.map((row, index) => {
        const previous = rows.slice(0, index).findLast((earlier) => earlier.epoch === row.epoch);
        return {
          runId: row.run_id,
          step: row.step,
          call:
            row.model !== null
              ? {
                  model: row.model,
                  promptTokens: row.prompt_tokens ?? 0,
                  completionTokens: row.completion_tokens ?? 0,
                  cost: row.cost,
                }
              : null,
          at: row.created_at,
          summary: row.content,
          summaryTokens: row.tokens,
          foldedMessages: row.folded,
          summaryFailed: previous === undefined ? row.content === "" : previous.content === row.content,
        };
      });
    },

    async usageHistory(runs = DEFAULT_HISTORY_RUNS): Promise<UsageExample[]> {
      return examplesOf(
        (await pool.query<UsageRow>(USAGE_OF(`${RECENT_RUNS} ORDER BY started_at DESC, seq DESC LIMIT $1`), [runs]))
          .rows,
      );
    },
    async runUsage(runId: string): Promise<UsageExample | undefined> {
      return examplesOf((await pool.query<UsageRow>(USAGE_OF(`${RECENT_RUNS} AND id = $1`), [runId])).rows)[0];
    },
  };
}
