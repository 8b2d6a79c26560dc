/**
 * The SQLite store's core, under its port (sqlite.ts): sessions, runs, messages, summaries and facts
 * in one file, through synchronous better-sqlite3 statements. WAL, foreign keys, a busy timeout,
 * migrations by PRAGMA user_version (sqlite-schema). Every write is committed before the call
 * returns (or, within `atomically`, before its promise resolves; sqlite-commit), so a crash loses
 * nothing that was acknowledged. Runs are owned by a process instance (instances.ts); the file is
 * checked when it is opened (sqlite-file).
 */
import type Database from "better-sqlite3";
import type {
  Fact,
  FactOrigin,
  RunOutcome,
  RunRecord,
  SessionInfo,
  StoredMessage,
  Summary,
  SummaryCall,
} from "../agent/contracts.js";
import type { Message } from "../agent/types.js";
import { factOf, originColumn, type FactRow } from "./fact-rows.js";
import { INSTANCE, instanceRegistration, ownerChecker } from "./instances.js";
import { toStoredMessage, type MessageRow } from "./message-rows.js";
import { groupCommit, startCheckpointer } from "./sqlite-commit.js";
import { openDatabase } from "./sqlite-file.js";
import { knowReadRows } from "./sqlite-message-rows.js";

export interface SqliteStore {
  /** The connection, for modules that keep their own prepared statements (approvals, traces). */
  db: Database.Database;
  /**
   * Runs `body` as one unit: the writes it makes, through this store or its connection, take effect
   * whole or not at all. The units of one event-loop turn run together at its end, in one
   * transaction (group commit); each resolves with its body's result once that has committed, or
   * rejects with its body's error (its writes undone) or the commit's. Units do not nest.
   */
  atomically<T>(body: () => T): Promise<T>;
  /**
   * Records a run that was accepted but waits to start (the HTTP API's, before it answers 202): it
   * is `accepted`, owned by this process, until startRun starts it or endUnstartedRun ends it.
   */
  acceptRun(run: RunRecord): void;
  /** Starts a run (creating its session on first use), or an accepted one; false when the run was already started. */
  startRun(run: RunRecord): boolean;
  endRun(outcome: RunOutcome): void;
  /** Ends an accepted run that never started (refused or failed before it began); false when it had started. */
  endUnstartedRun(outcome: RunOutcome): boolean;
  /** A paused run goes on in this process: running again, so a kill now leaves it interrupted, not paused. */
  resumeRun(runId: string): void;
  /** The JSON of a run that waits for approval; undefined once it no longer waits. */
  pausedRun(runId: string): string | undefined;
  /** Appends messages in one transaction; returns their ids. */
  appendMessages(
    sessionId: string,
    runId: string | null,
    entries: Array<{ message: Message; tokens: number }>,
  ): number[];
  epoch(sessionId: string): number;
  /** The current epoch's messages with an id above `afterId`, oldest first. */
  messagesAfter(sessionId: string, epoch: number, afterId: number): StoredMessage[];
  latestSummary(sessionId: string, epoch: number): Summary | undefined;
  saveSummary(
    sessionId: string,
    epoch: number,
    summary: Summary & { firstMessageId: number; call?: SummaryCall },
  ): void;
  /** A new start for the session: later runs see none of its earlier messages (which are kept). */
  resetSession(sessionId: string): boolean;
  /** Runs and tokens of one session, across resets. */
  sessionUsage(sessionId: string): { runs: number; promptTokens: number; completionTokens: number };
  listSessions(): SessionInfo[];
  /** The user who started the session's first run; undefined for a session without runs. */
  sessionOwner(sessionId: string): string | undefined;
  addFact(userId: string, scope: string, content: string, origin?: FactOrigin): number;
  forgetFact(userId: string, factId: number, channel?: string, approverOf?: string): boolean;
  /** The facts a user may see (their own, and those shared in this channel) that best match `query` (bm25). */
  searchFacts(userId: string, channel: string, query: string, limit: number): Fact[];
  /** True for the first claim of the ids, false when any was claimed before; all are claimed, in one commit. */
  claim(...eventIds: string[]): boolean;
  /** Forgets claims older than a moment (platforms redeliver within minutes, not days); returns how many. */
  pruneClaims(olderThan: Date): number;
  /**
   * Marks `interrupted` the runs still `running` or `accepted` whose process is gone (killed before
   * or during the run; see instances.ts), and forgets the instances that are gone; returns how many runs.
   */
  interruptOrphanedRuns(): number;
  /** Changes whenever another connection commits; used to notice writes by another process. */
  dataVersion(): number;
  /**
   * Changes whenever another connection commits or this one resets a session: a cached history read
   * through this connection is stale exactly then (StorePort.historyVersion). One statement, not two.
   */
  historyVersion(): string;
  close(): void;
}

export interface SqliteStoreOptions {
  /**
   * Checkpoint the WAL from a thread of its own, for a long-running bot: a checkpoint (copying
   * the WAL into the database file, with its fsyncs) then never stalls a commit on this thread.
   */
  checkpointInBackground?: boolean;
  /**
   * Only reads (the command line's sessions, trace and usage): opens an existing file read-only and
   * never creates one; check first with databaseExists. Writes then fail.
   */
  readOnly?: boolean;
}

const END_RUN =
  "UPDATE runs SET status = @status, output = @output, steps = @steps, prompt_tokens = @promptTokens, completion_tokens = @completionTokens, paused = @paused, error = @error, ended_at = @endedAt WHERE id = @runId";

/**
 * Opens the store; a file that is damaged or cannot be opened or written is refused with one
 * sentence naming it and GLASSBOX_DB (a configuration error).
 */
export function openSqliteStore(path: string, options: SqliteStoreOptions = {}): SqliteStore {
  const db = openDatabase(path, options.readOnly);
  const background = options.checkpointInBackground && !options.readOnly && path !== ":memory:";
  const checkpointer = background ? startCheckpointer(db, path) : undefined;
  const registerInstance = instanceRegistration(db);

  const now = () => new Date().toISOString();
  const statements = {
    upsertSession: db.prepare(
      "INSERT INTO sessions (id, created_at, updated_at) VALUES (?, ?, ?) ON CONFLICT(id) DO UPDATE SET updated_at = excluded.updated_at RETURNING epoch",
    ),
    epochOf: db.prepare("SELECT epoch FROM sessions WHERE id = ?").pluck(),
    resetSession: db.prepare("UPDATE sessions SET epoch = epoch + 1, updated_at = ? WHERE id = ?"),
    touchRunSession: db.prepare(
      "UPDATE sessions SET updated_at = ? WHERE id = (SELECT session_id FROM runs WHERE id = ?)",
    ),
    // Idempotent: memory and the trace both start a run they see, whichever is configured.
    insertRun: db.prepare(
      "INSERT OR IGNORE INTO runs (id, session_id, user_id, input, status, started_at, parent_run_id, parent_tool_call_id, owner, pipeline_run_id, pipeline_stage, pipeline_stages, pipeline_name, configuration, thread_context) VALUES (?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    ),
    // An accepted run has spent nothing yet: its cost is 0, not unknown (which would hide the day's cost from the quota).
    acceptRun: db.prepare(
      "INSERT INTO runs (id, session_id, user_id, input, status, accepted_at, started_at, owner, cost, schedule_id) VALUES (@runId, @sessionId, @userId, @input, 'accepted', @at, @at, @owner, 0, @scheduleId)",
    ),
    // The input the run starts with replaces the accepted one only where it adds to it (the lines of
    // the files the worker fetched; see agent/attachments.ts inputWithAttachments).
    startAcceptedRun: db.prepare(
      "UPDATE runs SET status = 'running', started_at = ?, owner = ?, pipeline_run_id = ?, pipeline_stage = ?, pipeline_stages = ?, pipeline_name = ?, configuration = ?, thread_context = ?, input = CASE WHEN substr(@input, 1, length(input)) = input THEN @input ELSE input END WHERE id = ? AND status = 'accepted'",
    ),
    endRun: db.prepare(END_RUN),
    endUnstartedRun: db.prepare(`${END_RUN} AND status = 'accepted'`),
    pausedRun: db.prepare("SELECT paused FROM runs WHERE id = ? AND status = 'awaiting_approval'").pluck(),
    insertMessage: db.prepare(
      "INSERT INTO messages (session_id, epoch, run_id, role, content, tool_calls, tool_call_id, tokens, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    ),
    messagesAfter: db.prepare(
      "SELECT id, run_id, role, content, tool_calls, tool_call_id, tokens FROM messages WHERE session_id = ? AND epoch = ? AND id > ? ORDER BY id",
    ),
    latestSummary: db.prepare(
      "SELECT content, tokens, last_message_id FROM summaries WHERE session_id = ? AND epoch = ? ORDER BY id DESC LIMIT 1",
    ),
    insertSummary: db.prepare(
      "INSERT INTO summaries (session_id, epoch, content, tokens, first_message_id, last_message_id, created_at, run_id, step, model, prompt_tokens, completion_tokens, cost) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    ),
    listSessions: db.prepare(`
      SELECT s.id, s.updated_at AS lastActivity,
        (SELECT count(*) FROM messages m WHERE m.session_id = s.id) AS messageCount,
        (SELECT coalesce(sum(r.prompt_tokens + r.completion_tokens), 0) FROM runs r WHERE r.session_id = s.id AND r.parent_run_id IS NULL) AS tokens,
        (SELECT count(*) FROM runs r WHERE r.session_id = s.id AND r.parent_run_id IS NULL) AS runCount,
        (SELECT r.user_id FROM runs r WHERE r.session_id = s.id AND r.parent_run_id IS NULL ORDER BY r.rowid LIMIT 1) AS startedBy
      FROM sessions s ORDER BY s.updated_at DESC`),
    sessionOwner: db
      .prepare("SELECT user_id FROM runs WHERE session_id = ? AND parent_run_id IS NULL ORDER BY rowid LIMIT 1")
      .pluck(),
    insertFact: db.prepare("INSERT INTO facts (user_id, scope, content, created_at, origin) VALUES (?, ?, ?, ?, ?)"),
    // A note shared with a channel: anyone there, or an approver of its platform (a prefix of its scope).
    deleteFact: db.prepare(`
      DELETE FROM facts WHERE id = @factId AND (user_id = @userId OR (scope <> 'user' AND (scope = @channel
        OR substr(scope, 1, length(@approverOf)) = @approverOf)))`),
    searchFacts: db.prepare(`
      SELECT f.id, f.user_id AS userId, f.scope, f.content, f.created_at AS createdAt, f.origin
      FROM facts_index JOIN facts f ON f.id = facts_index.rowid
      WHERE facts_index MATCH @match AND ((f.scope = 'user' AND f.user_id = @userId) OR f.scope = @channel)
      ORDER BY bm25(facts_index) LIMIT @limit`),
    anyFact: db.prepare("SELECT 1 FROM facts LIMIT 1").pluck(),
    runStatus: db.prepare("SELECT status FROM runs WHERE id = ?").pluck(),
    claim: db.prepare("INSERT OR IGNORE INTO claims (id, claimed_at) VALUES (?, ?)"),
    pruneClaims: db.prepare("DELETE FROM claims WHERE claimed_at < ?"),
    resumeRun: db.prepare(
      "UPDATE runs SET status = 'running', paused = NULL, owner = ?, ended_at = NULL WHERE id = ? AND status = 'awaiting_approval'",
    ),
    unfinishedOwners: db.prepare("SELECT DISTINCT owner FROM runs WHERE status IN ('running', 'accepted')").pluck(),
    interrupt: db.prepare(
      "UPDATE runs SET status = 'interrupted', ended_at = ? WHERE status IN ('running', 'accepted') AND owner IS ?",
    ),
    instances: db.prepare("SELECT id FROM instances").pluck(),
    forgetInstance: db.prepare("DELETE FROM instances WHERE id = ?"),
    sessionUsage: db.prepare(
      "SELECT count(*) AS runs, coalesce(sum(prompt_tokens), 0) AS promptTokens, coalesce(sum(completion_tokens), 0) AS completionTokens FROM runs WHERE session_id = ? AND parent_run_id IS NULL",
    ),
    dataVersion: db.prepare("PRAGMA data_version").pluck(),
  };

  const insertMessages = (
    sessionId: string,
    runId: string | null,
    entries: Array<{ message: Message; tokens: number }>,
  ) => {
    const at = now();
    // A run's session was touched when the run started (and is again when it ends): its messages only read the epoch.
    const epoch = ((runId === null ? undefined : statements.epochOf.get(sessionId)) ??
      statements.upsertSession.pluck().get(sessionId, at, at)) as number;
    return entries.map(({ message, tokens }) => {
      const toolCalls =
        message.role === "assistant" && message.tool_calls?.length ? JSON.stringify(message.tool_calls) : null;
      const toolCallId = message.role === "tool" ? message.tool_call_id : null;
      const info = statements.insertMessage.run(
        sessionId,
        epoch,
        runId,
        message.role,
        message.content,
        toolCalls,
        toolCallId,
        tokens,
        at,
      );
      return Number(info.lastInsertRowid);
    });
  };
  const appendInTransaction = db.transaction(insertMessages);
  // Inside a unit (a run's writes, every step) the unit's transaction already makes it whole: no savepoint of its own.
  const appendMessages = (
    sessionId: string,
    runId: string | null,
    entries: Array<{ message: Message; tokens: number }>,
  ) => (db.inTransaction ? insertMessages(sessionId, runId, entries) : appendInTransaction(sessionId, runId, entries));

  const claimAll = db.transaction((eventIds: string[]) =>
    eventIds.map((id) => statements.claim.run(id, now()).changes).every((changes) => changes === 1),
  );
  const group = groupCommit(db);
  // Sessions reset through this connection (another connection's reset changes data_version).
  let resets = 0;

  return {
    db,
    atomically: group.add,
    acceptRun(run: RunRecord): void {
      db.transaction(() => {
        registerInstance();
        statements.upsertSession.run(run.sessionId, now(), now());
        statements.acceptRun.run({
          runId: run.runId,
          sessionId: run.sessionId,
          userId: run.userId,
          input: run.input,
          at: now(),
          owner: INSTANCE.id,
          scheduleId: run.scheduleId ?? null,
        });
      })();
    },
    startRun(run: RunRecord): boolean {
      // Memory and the trace both start each run they see: the second call is a read, not a write.
      const status = statements.runStatus.get(run.runId);
      if (status !== undefined && status !== "accepted") return false;
      return db.transaction(() => {
        registerInstance();
        const { pipeline } = run;
        const started = [
          pipeline?.runId ?? null,
          pipeline?.stage ?? null,
          pipeline?.stages ?? null,
          pipeline?.name ?? null,
          run.configuration ?? null,
          run.threadContext ? JSON.stringify(run.threadContext) : null,
        ];
        if (status === "accepted")
          return (
            statements.startAcceptedRun.run(now(), INSTANCE.id, ...started, run.runId, { input: run.input }).changes ===
            1
          );
        statements.upsertSession.run(run.sessionId, now(), now());
        return (
          statements.insertRun.run(
            run.runId,
            run.sessionId,
            run.userId,
            run.input,
            now(),
            run.parent?.runId ?? null,
            run.parent?.toolCallId ?? null,
            INSTANCE.id,
            ...started,
          ).changes === 1
        );
      })();
    },
    endRun(outcome: RunOutcome): void {
      statements.endRun.run({ ...outcome, endedAt: now() });
      statements.touchRunSession.run(now(), outcome.runId);
    },
    endUnstartedRun(outcome: RunOutcome): boolean {
      return statements.endUnstartedRun.run({ ...outcome, endedAt: now() }).changes > 0;
    },
    resumeRun(runId: string): void {
      db.transaction(() => {
        registerInstance();
        statements.resumeRun.run(INSTANCE.id, runId);
      })();
    },
    pausedRun(runId: string): string | undefined {
      return statements.pausedRun.get(runId) as string | undefined;
    },
    /** Appends messages in one transaction; returns their ids. */
    appendMessages(
      sessionId: string,
      runId: string | null,
      entries: Array<{ message: Message; tokens: number }>,
    ): number[] {
      return appendMessages(sessionId, runId, entries);
    },
    epoch(sessionId: string): number {
      return (statements.epochOf.get(sessionId) as number | undefined) ?? 0;
    },
    /** The current epoch's messages with an id above `afterId`, oldest first. */
    messagesAfter(sessionId: string, epoch: number, afterId: number): StoredMessage[] {
      const stored = (statements.messagesAfter.all(sessionId, epoch, afterId) as MessageRow[]).map(toStoredMessage);
      knowReadRows(db, stored); // a step's recorded request can point at these rows (sqlite-requests)
      return stored;
    },
    latestSummary(sessionId: string, epoch: number): Summary | undefined {
      const row = statements.latestSummary.get(sessionId, epoch) as
        | { content: string; tokens: number; last_message_id: number }
        | undefined;
      return row && { content: row.content, tokens: row.tokens, lastMessageId: row.last_message_id };
    },
    saveSummary(
      sessionId: string,
      epoch: number,
      summary: Summary & { firstMessageId: number; call?: SummaryCall },
    ): void {
      const { call } = summary;
      statements.insertSummary.run(
        sessionId,
        epoch,
        summary.content,
        summary.tokens,
        summary.firstMessageId,
        summary.lastMessageId,
        now(),
        call?.runId ?? null,
        call?.step ?? null,
        call?.model ?? null,
        call?.promptTokens ?? null,
        call?.completionTokens ?? null,
        call?.cost ?? null,
      );
    },
    /** A new start for the session: later runs see none of its earlier messages (which are kept). */
    resetSession(sessionId: string): boolean {
      const reset = statements.resetSession.run(now(), sessionId).changes > 0;
      if (reset) resets++;
      return reset;
    },
    /** Runs and tokens of one session, across resets. */
    sessionUsage(sessionId: string): { runs: number; promptTokens: number; completionTokens: number } {
      return statements.sessionUsage.get(sessionId) as { runs: number; promptTokens: number; completionTokens: number };
    },
    listSessions(): SessionInfo[] {
      return statements.listSessions.all() as SessionInfo[];
    },
    sessionOwner(sessionId: string): string | undefined {
      return statements.sessionOwner.get(sessionId) as string | undefined;
    },
    addFact(userId: string, scope: string, content: string, origin?: FactOrigin): number {
      return Number(statements.insertFact.run(userId, scope, content, now(), originColumn(origin)).lastInsertRowid);
    },
    forgetFact(userId: string, factId: number, channel?: string, approverOf?: string): boolean {
      return (
        statements.deleteFact.run({ factId, userId, channel: channel ?? null, approverOf: approverOf || null })
          .changes > 0
      );
    },
    /**
     * The facts that best match the words of `query` (bm25): the user's personal facts, and the facts
     * anyone shared with this channel (remember's shared_with_channel promises "everyone in this channel").
     */
    searchFacts(userId: string, channel: string, query: string, limit: number): Fact[] {
      const match = ftsQuery(query);
      // A store without facts (most runs of most bots) skips the full-text query, which costs far more.
      return match && statements.anyFact.get() !== undefined
        ? (statements.searchFacts.all({ match, userId, channel, limit }) as FactRow[]).map(factOf)
        : [];
    },
    claim(...eventIds: string[]): boolean {
      return claimAll(eventIds);
    },
    pruneClaims(olderThan: Date): number {
      return statements.pruneClaims.run(olderThan.toISOString()).changes;
    },
    interruptOrphanedRuns(): number {
      const alive = ownerChecker(db);
      const orphaned = (statements.unfinishedOwners.all() as Array<string | null>).filter((owner) => !alive(owner));
      const gone = (statements.instances.all() as string[]).filter((id) => !alive(id));
      return db.transaction(() => {
        const interrupted = orphaned.reduce(
          (count, owner) => count + statements.interrupt.run(now(), owner).changes,
          0,
        );
        for (const id of gone) statements.forgetInstance.run(id); // nothing of theirs runs any more
        return interrupted;
      })();
    },
    /** Changes whenever another connection commits; used to notice writes by another process. */
    dataVersion(): number {
      return statements.dataVersion.get() as number;
    },
    historyVersion(): string {
      return `${statements.dataVersion.get() as number}:${resets}`;
    },
    close(): void {
      group.flush(); // units still waiting for the turn's end commit first
      checkpointer?.stop();
      db.close();
    },
  };
}

/** Words of free text as an FTS5 query: each word quoted (so no syntax leaks in), any may match. */
function ftsQuery(text: string): string {
  const words = (text.toLowerCase().match(/[\p{L}\p{N}]{2,}/gu) ?? []).filter((word) => !STOPWORDS.has(word));
  return [...new Set(words)]
    .slice(0, 32)
    .map((word) => `"${word}"`)
    .join(" OR ");
}

// Words that match nearly every fact; searching on them would inject barely relevant ones.
const STOPWORDS = new Set(
  "a an and are as at be but by can could did do does for from had has have he her his how i if in is it its me my of on or our she so that the their them they this to was we were what when where which who why will with would you your please".split(
    " ",
  ),
);
