/**
 * Conversations on PostgreSQL: sessions (epochs, and a version counting writes to their history),
 * messages, summaries, and the listings over them. The write functions take the client of an open
 * transaction, so a run's writes and an event's acceptance can include them.
 */
import type pg from "pg";
import { toStoredMessage, type MessageRow } from "./message-rows.js";
import type { MessageEntry, SessionInfo, StoredMessage, Summary, SummaryCall } from "./port-data.js";
import type { SessionHistory } from "./port.js";
import { inTransaction, type Db } from "./postgres-client.js";

/** Where a session's history stands after a write: its epoch, and the version the write made. */
export interface SessionWrite {
  sessionId: string;
  epoch: number;
  version: number;
}

/**
 * The session's upsert, for a statement's WITH: creates it on first use and marks its activity,
 * counting a write to its history by $3 (1 or 0); $1 the session, $2 the moment. Returns its epoch and version.
 */
export const TOUCH_SESSION = `INSERT INTO sessions (id, created_at, updated_at, version) VALUES ($1, $2, $2, $3)
     ON CONFLICT (id) DO UPDATE SET updated_at = excluded.updated_at, version = sessions.version + $3 RETURNING epoch, version`;

/** Creates the session on first use and marks its activity; `historyChanged` counts a write to its history. */
export async function touchSession(
  db: Db,
  sessionId: string,
  at: string,
  historyChanged: boolean,
): Promise<SessionWrite> {
  const { rows } = await db.query<{ epoch: number; version: number }>(TOUCH_SESSION, [
    sessionId,
    at,
    historyChanged ? 1 : 0,
  ]);
  const row = rows[0] as { epoch: number; version: number };
  return { sessionId, epoch: row.epoch, version: row.version };
}

/**
 * The insert of messages after a WITH that names `session` (TOUCH_SESSION's): $1 the session, $2 the
 * moment, $4 the run, $5 to $9 the columns of messageColumns. Returns each id with the session's epoch and version.
 */
export const INSERT_MESSAGES = `INSERT INTO messages (session_id, epoch, run_id, role, content, tool_calls, tool_call_id, tokens, created_at)
     SELECT $1, session.epoch, $4, role, content, tool_calls, tool_call_id, tokens, $2
     FROM session, unnest($5::text[], $6::text[], $7::text[], $8::text[], $9::integer[]) WITH ORDINALITY AS entry(role, content, tool_calls, tool_call_id, tokens, position)
     ORDER BY position RETURNING id, epoch, (SELECT version FROM session) AS version`;

/** The entries as INSERT_MESSAGES's columns: role, content, tool calls, tool call id, tokens. */
export function messageColumns(entries: MessageEntry[]): unknown[][] {
  const column = <T>(pick: (entry: MessageEntry) => T) => entries.map(pick);
  return [
    column(({ message }) => message.role),
    column(({ message }) => message.content),
    column(({ message }) =>
      message.role === "assistant" && message.tool_calls?.length ? JSON.stringify(message.tool_calls) : null,
    ),
    column(({ message }) => (message.role === "tool" ? message.tool_call_id : null)),
    column(({ tokens }) => tokens),
  ];
}

/** What INSERT_MESSAGES returned: the ids in the order given, and where the session's history stands. */
export function insertedMessages(
  sessionId: string,
  rows: Array<{ id: number; epoch: number; version: number }>,
): { ids: number[]; session: SessionWrite } {
  const first = rows[0] as { epoch: number; version: number };
  // Identities are handed out in the order the rows are made, which is the order given.
  return {
    ids: rows.map((row) => row.id).sort((a, b) => a - b),
    session: { sessionId, epoch: first.epoch, version: first.version },
  };
}

/**
 * Appends messages in the current epoch, touching the session in the same statement; their ids
 * ascend in the order given. The statement is sent at once (before the answer is awaited).
 */
export function insertMessages(
  db: Db,
  sessionId: string,
  runId: string | null,
  entries: MessageEntry[],
): Promise<{ ids: number[]; session: SessionWrite }> {
  const at = new Date().toISOString();
  if (entries.length === 0)
    return touchSession(db, sessionId, at, true).then((session) => ({ ids: [] as number[], session }));
  return db
    .query<{ id: number; epoch: number; version: number }>(`WITH session AS (${TOUCH_SESSION}) ${INSERT_MESSAGES}`, [
      sessionId,
      at,
      1,
      runId,
      ...messageColumns(entries),
    ])
    .then(({ rows }) => insertedMessages(sessionId, rows));
}

async function messagesAfter(db: Db, sessionId: string, epoch: number, afterId: number): Promise<StoredMessage[]> {
  const { rows } = await db.query<MessageRow>(
    "SELECT id, run_id, role, content, tool_calls, tool_call_id, tokens FROM messages WHERE session_id = $1 AND epoch = $2 AND id > $3 ORDER BY id",
    [sessionId, epoch, afterId],
  );
  return rows.map(toStoredMessage);
}

/**
 * A session's history in one statement: first a head row (the epoch and version, and the latest
 * summary of the epoch, its last message id as `id`; nulls without one), then each message after it.
 */
const SESSION_HISTORY = `
  WITH head AS (
    SELECT coalesce(s.epoch, 0) AS epoch, coalesce(s.version, 0) AS version
    FROM (SELECT 1) AS one LEFT JOIN sessions s ON s.id = $1
  ), summary AS (
    SELECT u.content, u.tokens, u.last_message_id FROM summaries u, head
    WHERE u.session_id = $1 AND u.epoch = head.epoch ORDER BY u.id DESC LIMIT 1
  )
  SELECT 0 AS part, head.epoch, head.version, summary.last_message_id AS id, NULL AS run_id, NULL AS role,
    summary.content, NULL AS tool_calls, NULL AS tool_call_id, summary.tokens
  FROM head LEFT JOIN summary ON true
  UNION ALL
  SELECT 1, head.epoch, head.version, m.id, m.run_id, m.role, m.content, m.tool_calls, m.tool_call_id, m.tokens
  FROM messages m, head
  WHERE m.session_id = $1 AND m.epoch = head.epoch AND m.id > coalesce((SELECT last_message_id FROM summary), 0)
  ORDER BY part, id`;

type HistoryRow = MessageRow & { epoch: number; version: number };

/**
 * History versions as a handle sees them: a token per session that its own writes keep (a write
 * that took the version from the one it knew to the next) and anyone else's change. Writes are
 * noted after they commit, so a write taken back never vouches for a version.
 */
export function createHistoryVersions(limit = 10_000) {
  const known = new Map<string, { version: number; token: string }>();
  const remember = (sessionId: string, entry: { version: number; token: string }) => {
    known.delete(sessionId);
    known.set(sessionId, entry);
    if (known.size > limit) known.delete(known.keys().next().value as string); // forgetting only costs a reload
  };
  return {
    wrote(write: SessionWrite): void {
      const before = known.get(write.sessionId);
      remember(write.sessionId, {
        version: write.version,
        token: before && before.version === write.version - 1 ? before.token : `w${write.version}`,
      });
    },
    token(sessionId: string, epoch: number, version: number): string {
      const entry = known.get(sessionId);
      if (entry?.version === version) return `${epoch}:${entry.token}`;
      remember(sessionId, { version, token: `r${version}` });
      return `${epoch}:r${version}`;
    },
  };
}

export type HistoryVersions = ReturnType<typeof createHistoryVersions>;

export function createPostgresConversations(pool: pg.Pool, versions: HistoryVersions) {
  const sessionRow = async (db: Db, sessionId: string) =>
    (
      await db.query<{ epoch: number; version: number }>("SELECT epoch, version FROM sessions WHERE id = $1", [
        sessionId,
      ])
    ).rows[0] ?? { epoch: 0, version: 0 };

  return {
    async appendMessages(sessionId: string, runId: string | null, entries: MessageEntry[]): Promise<number[]> {
      const { ids, session } = await inTransaction(pool, (client) => insertMessages(client, sessionId, runId, entries));
      versions.wrote(session);
      return ids;
    },
    async sessionHistory(sessionId: string): Promise<SessionHistory> {
      // One statement, so one snapshot: the session's epoch, its latest summary and the messages after it.
      const { rows } = await pool.query<HistoryRow>(SESSION_HISTORY, [sessionId]);
      const [head, ...messages] = rows as [HistoryRow, ...HistoryRow[]];
      const summary =
        head.content === null
          ? undefined
          : { content: head.content, tokens: head.tokens, lastMessageId: head.id as number };
      return {
        epoch: head.epoch,
        summary,
        messages: messages.map(toStoredMessage),
        version: versions.token(sessionId, head.epoch, head.version),
      };
    },
    async historyVersion(sessionId: string): Promise<string> {
      const { epoch, version } = await sessionRow(pool, sessionId);
      return versions.token(sessionId, epoch, version);
    },
    messagesAfter: (sessionId: string, epoch: number, afterId: number) =>
      messagesAfter(pool, sessionId, epoch, afterId),
    async saveSummary(
      sessionId: string,
      epoch: number,
      summary: Summary & { firstMessageId: number; call?: SummaryCall },
    ): Promise<void> {
      const { call } = summary;
      const session = await inTransaction(pool, async (client) => {
        const at = new Date().toISOString();
        await client.query(
          `INSERT INTO summaries (session_id, epoch, content, tokens, first_message_id, last_message_id, created_at, run_id, step, model, prompt_tokens, completion_tokens, cost)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
          [
            sessionId,
            epoch,
            summary.content,
            summary.tokens,
            summary.firstMessageId,
            summary.lastMessageId,
            at,
            call?.runId ?? null,
            call?.step ?? null,
            call?.model ?? null,
            call?.promptTokens ?? null,
            call?.completionTokens ?? null,
            call?.cost ?? null,
          ],
        );
        const { rows } = await client.query<{ epoch: number; version: number }>(
          "UPDATE sessions SET version = version + 1 WHERE id = $1 RETURNING epoch, version",
          [sessionId],
        );
        return rows[0] && { sessionId, ...rows[0] };
      });
      if (session) versions.wrote(session);
    },
    async resetSession(sessionId: string): Promise<boolean> {
      const { rows } = await pool.query<{ epoch: number; version: number }>(
        "UPDATE sessions SET epoch = epoch + 1, version = version + 1, updated_at = $1 WHERE id = $2 RETURNING epoch, version",
        [new Date().toISOString(), sessionId],
      );
      if (rows[0]) versions.wrote({ sessionId, ...rows[0] });
      return rows.length > 0;
    },
    async sessionUsage(sessionId: string): Promise<{ runs: number; promptTokens: number; completionTokens: number }> {
      const { rows } = await pool.query<{ runs: number; promptTokens: number; completionTokens: number }>(
        `SELECT count(*) AS runs, coalesce(sum(prompt_tokens), 0) AS "promptTokens", coalesce(sum(completion_tokens), 0) AS "completionTokens"
         FROM runs WHERE session_id = $1 AND parent_run_id IS NULL`,
        [sessionId],
      );
      return rows[0] as { runs: number; promptTokens: number; completionTokens: number };
    },
    async listSessions(): Promise<SessionInfo[]> {
      const { rows } = await pool.query<SessionInfo>(`
        SELECT s.id, s.updated_at AS "lastActivity",
          (SELECT count(*) FROM messages m WHERE m.session_id = s.id) AS "messageCount",
          (SELECT coalesce(sum(r.prompt_tokens + r.completion_tokens), 0) FROM runs r WHERE r.session_id = s.id AND r.parent_run_id IS NULL) AS tokens,
          (SELECT count(*) FROM runs r WHERE r.session_id = s.id AND r.parent_run_id IS NULL) AS "runCount",
          (SELECT r.user_id FROM runs r WHERE r.session_id = s.id AND r.parent_run_id IS NULL ORDER BY r.seq LIMIT 1) AS "startedBy"
        FROM sessions s ORDER BY s.updated_at DESC`);
      return rows;
    },
    async sessionOwner(sessionId: string): Promise<string | undefined> {
      const { rows } = await pool.query<{ user_id: string }>(
        "SELECT user_id FROM runs WHERE session_id = $1 AND parent_run_id IS NULL ORDER BY seq LIMIT 1",
        [sessionId],
      );
      return rows[0]?.user_id;
    },
  };
}
