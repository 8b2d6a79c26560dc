/**
 * The trace viewer's session list: every session in the store with what tells it apart (its first
 * message, adapter, last activity, runs, tokens, cost, whether a run failed or waits for approval),
 * narrowed by a search over the text of its messages and by filters (adapter, status, tool used,
 * dates). One parameterised query, bounded: the search text and the number of sessions returned.
 */
import type { SessionFilters, SessionListing } from "./port-data.js";
import type { SqliteStore } from "./sqlite-store.js";

const FIRST_MESSAGE_CHARS = 200;

/** Sessions matching the filters, most recently active first; `more` says whether the limit left some out. */
export function createSessionSearch(store: SqliteStore) {
  const { db } = store;
  const statements = new Map<string, ReturnType<typeof db.prepare>>();

  return function searchSessions(filters: SessionFilters): { sessions: SessionListing[]; more: boolean } {
    const where: string[] = [];
    const params: Record<string, string | number> = { limit: filters.limit + 1 };
    if (filters.text !== undefined) {
      params.pattern = `%${filters.text.replace(/[\\%_]/g, "\\$&")}%`;
      where.push(`(s.id LIKE @pattern ESCAPE '\\'
        OR EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id AND m.content LIKE @pattern ESCAPE '\\')
        OR EXISTS (SELECT 1 FROM runs r WHERE r.session_id = s.id AND (r.input LIKE @pattern ESCAPE '\\' OR r.output LIKE @pattern ESCAPE '\\')))`);
    }
    if (filters.adapter !== undefined) {
      params.adapter = filters.adapter;
      where.push("substr(s.id, 1, length(@adapter) + 1) = @adapter || ':'");
    }
    if (filters.status !== undefined) {
      params.status = filters.status;
      where.push("EXISTS (SELECT 1 FROM runs r WHERE r.session_id = s.id AND r.status = @status)");
    }
    if (filters.tool !== undefined) {
      params.tool = filters.tool;
      where.push(`EXISTS (SELECT 1 FROM runs r JOIN steps st ON st.run_id = r.id, json_each(st.tool_calls) call
        WHERE r.session_id = s.id AND json_extract(call.value, '$.name') = @tool)`);
    }
    if (filters.rated !== undefined) {
      params.rated = filters.rated;
      where.push(
        "EXISTS (SELECT 1 FROM runs r JOIN feedback f ON f.run_id = r.id WHERE r.session_id = s.id AND f.rating = @rated)",
      );
    }
    if (filters.from !== undefined || filters.to !== undefined) {
      if (filters.from !== undefined) params.from = filters.from;
      if (filters.to !== undefined) params.to = filters.to;
      const within = (column: string) =>
        [filters.from !== undefined ? `${column} >= @from` : "", filters.to !== undefined ? `${column} < @to` : ""]
          .filter(Boolean)
          .join(" AND ");
      where.push(`(EXISTS (SELECT 1 FROM runs r WHERE r.session_id = s.id AND ${within("r.started_at")})
        OR EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id AND ${within("m.created_at")}))`);
    }
    if (filters.startedBy !== undefined) {
      params.startedBy = filters.startedBy;
      where.push(`(${FIRST_RUN("r.user_id")}) = @startedBy`);
    }

    // Sub-agents' runs are left out of the totals: their tokens are already counted in the runs they worked for.
    const sql = `SELECT s.id, s.updated_at AS lastActivity,
        substr(coalesce((${FIRST_RUN("r.input")}),
          (SELECT m.content FROM messages m WHERE m.session_id = s.id AND m.role = 'user' ORDER BY m.id LIMIT 1)), 1, ${FIRST_MESSAGE_CHARS + 1}) AS firstMessage,
        (${FIRST_RUN("r.user_id")}) AS startedBy,
        (SELECT count(*) FROM messages m WHERE m.session_id = s.id) AS messageCount,
        (${TOP_RUNS("count(*)")}) AS runCount,
        (${TOP_RUNS("coalesce(sum(r.prompt_tokens), 0)")}) AS promptTokens,
        (${TOP_RUNS("coalesce(sum(r.completion_tokens), 0)")}) AS completionTokens,
        (${TOP_RUNS("CASE WHEN count(*) = count(r.cost) THEN coalesce(sum(r.cost), 0) END")}) AS cost,
        EXISTS (SELECT 1 FROM runs r WHERE r.session_id = s.id AND r.status = 'error') AS hasErrors,
        EXISTS (SELECT 1 FROM runs r WHERE r.session_id = s.id AND r.status = 'awaiting_approval') AS awaitingApproval
      FROM sessions s
      ${where.length ? `WHERE ${where.join("\n AND ")}` : ""}
      ORDER BY s.updated_at DESC, s.id
      LIMIT @limit`;
    // One statement per combination of filters (at most 256), prepared once.
    let statement = statements.get(sql);
    if (!statement) statements.set(sql, (statement = db.prepare(sql)));
    const rows = statement.all(params) as Array<
      Omit<SessionListing, "adapter" | "hasErrors" | "awaitingApproval"> & {
        hasErrors: number;
        awaitingApproval: number;
      }
    >;
    const sessions = rows.slice(0, filters.limit).map((row) => ({
      ...row,
      adapter: row.id.split(":")[0] ?? "",
      firstMessage: row.firstMessage === null ? null : cut(row.firstMessage),
      hasErrors: row.hasErrors === 1,
      awaitingApproval: row.awaitingApproval === 1,
    }));
    return { sessions, more: rows.length > filters.limit };
  };
}

/** A column of the session's first run (not a sub-agent's). */
const FIRST_RUN = (column: string) =>
  `SELECT ${column} FROM runs r WHERE r.session_id = s.id AND r.parent_run_id IS NULL ORDER BY r.rowid LIMIT 1`;
/** An aggregate over the session's own runs (not sub-agents'). */
const TOP_RUNS = (aggregate: string) =>
  `SELECT ${aggregate} FROM runs r WHERE r.session_id = s.id AND r.parent_run_id IS NULL`;

function cut(text: string): string {
  return text.length > FIRST_MESSAGE_CHARS ? `${text.slice(0, FIRST_MESSAGE_CHARS - 1)}…` : text;
}
