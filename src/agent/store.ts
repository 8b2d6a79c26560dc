/**
 * The SQLite store: sessions, runs, messages, summaries, steps, approvals, facts and event claims in
 * one file. WAL, foreign keys, a busy timeout, migrations by PRAGMA user_version. Every write is
 * committed before the call returns (or, within `atomically`, before its promise resolves), so a
 * crash loses nothing that was acknowledged.
 */
import { mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { hostname } from "node:os";
import { dirname } from "node:path";
import { Worker } from "node:worker_threads";
import Database from "better-sqlite3";
import { switchToWal } from "../sqlite-wal.js";
import type { RunResult } from "./run.js";
import type { Message } from "./types.js";

export interface StoredMessage {
  id: number;
  runId: string | null;
  message: Message;
  tokens: number;
}

export interface Summary {
  content: string;
  tokens: number;
  /** The summary covers every message of its session epoch up to and including this id. */
  lastMessageId: number;
}

export interface SessionInfo {
  id: string;
  messageCount: number;
  tokens: number;
  runCount: number;
  lastActivity: string;
}

export interface Fact {
  id: number;
  userId: string;
  scope: string;
  content: string;
  createdAt: string;
}

export interface RunRecord {
  runId: string;
  sessionId: string;
  userId: string;
  input: string;
  /** For a sub-agent's run: the run and tool call it works for. */
  parent?: { runId: string; toolCallId: string };
}

export interface RunOutcome {
  runId: string;
  status: string;
  output: string;
  steps: number;
  promptTokens: number;
  completionTokens: number;
  /** JSON of a paused run while it waits for approval; null otherwise. */
  paused: string | null;
  error: string | null;
}

/** How a run ended, as its row stores it. */
export function runOutcomeOf(result: RunResult): RunOutcome {
  return {
    runId: result.runId,
    status: result.stopReason,
    output: result.output,
    steps: result.steps,
    promptTokens: result.usage.promptTokens,
    completionTokens: result.usage.completionTokens,
    paused: result.paused ? JSON.stringify(result.paused) : null,
    error: result.error ? JSON.stringify(result.error) : null,
  };
}

const MIGRATIONS = [
  `
  CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    epoch INTEGER NOT NULL DEFAULT 0, -- a reset starts a new epoch; the context reads only the current one
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
  );
  CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    user_id TEXT NOT NULL,
    input TEXT NOT NULL,
    status TEXT NOT NULL, -- running | final | max_steps | awaiting_approval | cancelled | error
    output TEXT,
    steps INTEGER NOT NULL DEFAULT 0,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    paused TEXT,
    error TEXT,
    started_at TEXT NOT NULL,
    ended_at TEXT
  );
  CREATE INDEX runs_by_session ON runs(session_id, started_at);
  CREATE TABLE messages (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    epoch INTEGER NOT NULL,
    run_id TEXT REFERENCES runs(id),
    role TEXT NOT NULL,
    content TEXT,
    tool_calls TEXT,
    tool_call_id TEXT,
    tokens INTEGER NOT NULL,
    created_at TEXT NOT NULL
  );
  CREATE INDEX messages_by_session ON messages(session_id, epoch, id);
  CREATE TABLE summaries (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    epoch INTEGER NOT NULL,
    content TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    first_message_id INTEGER NOT NULL,
    last_message_id INTEGER NOT NULL,
    created_at TEXT NOT NULL
  );
  CREATE INDEX summaries_by_session ON summaries(session_id, epoch, id);
  CREATE TABLE steps (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    step INTEGER NOT NULL,
    model TEXT,
    context_messages INTEGER,
    context_tokens INTEGER,
    content TEXT,
    tool_calls TEXT,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    latency_ms REAL,
    created_at TEXT NOT NULL
  );
  CREATE INDEX steps_by_run ON steps(run_id, step);
  CREATE TABLE approvals (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    session_id TEXT NOT NULL REFERENCES sessions(id),
    tool_call_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    arguments TEXT NOT NULL,
    arguments_hash TEXT NOT NULL,
    requester TEXT NOT NULL,
    status TEXT NOT NULL, -- pending | approved | denied | expired
    decided_by TEXT,
    decided_at TEXT,
    expires_at TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (run_id, tool_call_id)
  );
  CREATE TABLE facts (
    id INTEGER PRIMARY KEY,
    user_id TEXT NOT NULL,
    scope TEXT NOT NULL, -- 'user' (follows the person everywhere) or a channel key
    content TEXT NOT NULL,
    created_at TEXT NOT NULL
  );
  CREATE INDEX facts_by_user ON facts(user_id);
  CREATE VIRTUAL TABLE facts_index USING fts5(content, content='facts', content_rowid='id');
  CREATE TRIGGER facts_indexed AFTER INSERT ON facts BEGIN
    INSERT INTO facts_index(rowid, content) VALUES (new.id, new.content);
  END;
  CREATE TRIGGER facts_unindexed AFTER DELETE ON facts BEGIN
    INSERT INTO facts_index(facts_index, rowid, content) VALUES ('delete', old.id, old.content);
  END;
  CREATE TABLE claims (
    id TEXT PRIMARY KEY, -- a platform event id: claimed once, before any work starts
    claimed_at TEXT NOT NULL
  );
  `,
  `
  ALTER TABLE approvals ADD COLUMN message_ref TEXT; -- where the buttons are shown, to update them later
  CREATE INDEX approvals_pending ON approvals(status, expires_at);
  `,
  `
  -- traces: what each step cost, the guards' notes, and the exact request (gzipped JSON) on demand
  ALTER TABLE steps ADD COLUMN cost REAL;
  ALTER TABLE steps ADD COLUMN notes TEXT;
  ALTER TABLE steps ADD COLUMN payload BLOB;
  ALTER TABLE runs ADD COLUMN model TEXT;
  ALTER TABLE runs ADD COLUMN cost REAL;
  CREATE UNIQUE INDEX steps_unique ON steps(run_id, step);
  CREATE INDEX runs_by_user ON runs(user_id, started_at);
  `,
  `
  -- a sub-agent's run nests under the tool call of the run it works for
  ALTER TABLE runs ADD COLUMN parent_run_id TEXT REFERENCES runs(id);
  ALTER TABLE runs ADD COLUMN parent_tool_call_id TEXT;
  CREATE INDEX runs_by_parent ON runs(parent_run_id);
  `,
  `
  -- the process running a run ("host:pid"), so a run whose process died can be told apart
  ALTER TABLE runs ADD COLUMN owner TEXT;
  CREATE INDEX runs_by_status ON runs(status);
  `,
  `
  -- fewer pages written by each commit of a run: a duplicate of steps_unique goes, and two indexes
  -- keep only the rows they are read for (sub-agents' runs; running runs, by owner)
  DROP INDEX steps_by_run;
  DROP INDEX runs_by_parent;
  CREATE INDEX runs_by_parent ON runs(parent_run_id) WHERE parent_run_id IS NOT NULL;
  DROP INDEX runs_by_status;
  CREATE INDEX runs_running ON runs(owner) WHERE status = 'running';
  `,
];

/** The store's operations; every write is committed before the call returns (within `atomically`, before its promise resolves). */
export interface Store {
  /** The connection, for modules that keep their own prepared statements (approvals, traces). */
  db: Database.Database;
  /**
   * Runs `body` as one unit: the writes it makes, through this store or its connection, take effect
   * whole or not at all. The units of one event-loop turn run together at its end, in one
   * transaction (group commit); each resolves with its body's result once that has committed, or
   * rejects with its body's error (its writes undone) or the commit's. Units do not nest.
   */
  atomically<T>(body: () => T): Promise<T>;
  /** Starts a run (creating its session on first use); false when the run was already started. */
  startRun(run: RunRecord): boolean;
  endRun(outcome: RunOutcome): void;
  /** A paused run goes on in this process: running again, so a kill now leaves it interrupted, not paused. */
  resumeRun(runId: string): void;
  /** The JSON of a run that waits for approval; undefined once it no longer waits. */
  pausedRun(runId: string): string | undefined;
  /** Appends messages in one transaction; returns their ids. */
  appendMessages(sessionId: string, runId: string | null, entries: Array<{ message: Message; tokens: number }>): number[];
  epoch(sessionId: string): number;
  /** The current epoch's messages with an id above `afterId`, oldest first. */
  messagesAfter(sessionId: string, epoch: number, afterId: number): StoredMessage[];
  latestSummary(sessionId: string, epoch: number): Summary | undefined;
  saveSummary(sessionId: string, epoch: number, summary: Summary & { firstMessageId: number }): void;
  /** A new start for the session: later runs see none of its earlier messages (which are kept). */
  resetSession(sessionId: string): boolean;
  /** Runs and tokens of one session, across resets. */
  sessionUsage(sessionId: string): { runs: number; promptTokens: number; completionTokens: number };
  listSessions(): SessionInfo[];
  addFact(userId: string, scope: string, content: string): number;
  forgetFact(userId: string, factId: number): boolean;
  /** The facts a user may see (their own, and those shared in this channel) that best match `query` (bm25). */
  searchFacts(userId: string, channel: string, query: string, limit: number): Fact[];
  /** True for the first claim of the ids, false when any was claimed before; all are claimed, in one commit. */
  claim(...eventIds: string[]): boolean;
  /** Forgets claims older than a moment (platforms redeliver within minutes, not days); returns how many. */
  pruneClaims(olderThan: Date): number;
  /** Marks `interrupted` the runs still `running` whose process is gone (killed mid-run); returns how many. */
  interruptOrphanedRuns(): number;
  /** Changes whenever another connection commits; used to notice writes by another process. */
  dataVersion(): number;
  close(): void;
}

export interface StoreOptions {
  /**
   * Checkpoint the WAL from a thread of its own, for a long-running bot: a checkpoint (copying
   * the WAL into the database file, with its fsyncs) then never stalls a commit on this thread.
   */
  checkpointInBackground?: boolean;
}

export function openStore(path: string, options: StoreOptions = {}): Store {
  if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
  const db: Database.Database = new Database(path);
  // The busy timeout first: switching to WAL takes a lock that another process opening the file may hold.
  db.pragma("busy_timeout = 5000");
  switchToWal(db);
  db.pragma("synchronous = NORMAL"); // with WAL: durable across process crashes, fast commits
  db.pragma("foreign_keys = ON");
  migrate(db);
  const checkpointer = options.checkpointInBackground && path !== ":memory:" ? startCheckpointer(db, path) : undefined;

  const now = () => new Date().toISOString();
  const statements = {
    upsertSession: db.prepare(
      "INSERT INTO sessions (id, created_at, updated_at) VALUES (?, ?, ?) ON CONFLICT(id) DO UPDATE SET updated_at = excluded.updated_at RETURNING epoch",
    ),
    epochOf: db.prepare("SELECT epoch FROM sessions WHERE id = ?").pluck(),
    resetSession: db.prepare("UPDATE sessions SET epoch = epoch + 1, updated_at = ? WHERE id = ?"),
    // Idempotent: memory and the trace both start a run they see, whichever is configured.
    insertRun: db.prepare(
      "INSERT OR IGNORE INTO runs (id, session_id, user_id, input, status, started_at, parent_run_id, parent_tool_call_id, owner) VALUES (?, ?, ?, ?, 'running', ?, ?, ?, ?)",
    ),
    endRun: db.prepare(
      "UPDATE runs SET status = @status, output = @output, steps = @steps, prompt_tokens = @promptTokens, completion_tokens = @completionTokens, paused = @paused, error = @error, ended_at = @endedAt WHERE id = @runId",
    ),
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
      "INSERT INTO summaries (session_id, epoch, content, tokens, first_message_id, last_message_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
    ),
    listSessions: db.prepare(`
      SELECT s.id, s.updated_at AS lastActivity,
        (SELECT count(*) FROM messages m WHERE m.session_id = s.id) AS messageCount,
        (SELECT coalesce(sum(r.prompt_tokens + r.completion_tokens), 0) FROM runs r WHERE r.session_id = s.id AND r.parent_run_id IS NULL) AS tokens,
        (SELECT count(*) FROM runs r WHERE r.session_id = s.id AND r.parent_run_id IS NULL) AS runCount
      FROM sessions s ORDER BY s.updated_at DESC`),
    insertFact: db.prepare("INSERT INTO facts (user_id, scope, content, created_at) VALUES (?, ?, ?, ?)"),
    deleteFact: db.prepare("DELETE FROM facts WHERE id = ? AND user_id = ?"),
    searchFacts: db.prepare(`
      SELECT f.id, f.user_id AS userId, f.scope, f.content, f.created_at AS createdAt
      FROM facts_index JOIN facts f ON f.id = facts_index.rowid
      WHERE facts_index MATCH @match AND ((f.scope = 'user' AND f.user_id = @userId) OR f.scope = @channel)
      ORDER BY bm25(facts_index) LIMIT @limit`),
    anyFact: db.prepare("SELECT 1 FROM facts LIMIT 1").pluck(),
    runExists: db.prepare("SELECT 1 FROM runs WHERE id = ?").pluck(),
    claim: db.prepare("INSERT OR IGNORE INTO claims (id, claimed_at) VALUES (?, ?)"),
    pruneClaims: db.prepare("DELETE FROM claims WHERE claimed_at < ?"),
    resumeRun: db.prepare("UPDATE runs SET status = 'running', paused = NULL, owner = ?, ended_at = NULL WHERE id = ? AND status = 'awaiting_approval'"),
    runningOwners: db.prepare("SELECT DISTINCT owner FROM runs WHERE status = 'running'").pluck(),
    interrupt: db.prepare("UPDATE runs SET status = 'interrupted', ended_at = ? WHERE status = 'running' AND owner IS ?"),
    sessionUsage: db.prepare(
      "SELECT count(*) AS runs, coalesce(sum(prompt_tokens), 0) AS promptTokens, coalesce(sum(completion_tokens), 0) AS completionTokens FROM runs WHERE session_id = ? AND parent_run_id IS NULL",
    ),
    dataVersion: db.prepare("PRAGMA data_version").pluck(),
  };

  const appendMessages = db.transaction((sessionId: string, runId: string | null, entries: Array<{ message: Message; tokens: number }>) => {
    const epoch = statements.upsertSession.pluck().get(sessionId, now(), now()) as number;
    return entries.map(({ message, tokens }) => {
      const toolCalls = message.role === "assistant" && message.tool_calls?.length ? JSON.stringify(message.tool_calls) : null;
      const toolCallId = message.role === "tool" ? message.tool_call_id : null;
      const info = statements.insertMessage.run(sessionId, epoch, runId, message.role, message.content, toolCalls, toolCallId, tokens, now());
      return Number(info.lastInsertRowid);
    });
  });

  const claimAll = db.transaction((eventIds: string[]) => eventIds.map((id) => statements.claim.run(id, now()).changes).every((changes) => changes === 1));
  const group = groupCommit(db);

  return {
    db,
    atomically: group.add,
    startRun(run: RunRecord): boolean {
      // Memory and the trace both start each run they see: the second call is a read, not a write.
      if (statements.runExists.get(run.runId) !== undefined) return false;
      return db.transaction(() => {
        statements.upsertSession.run(run.sessionId, now(), now());
        return statements.insertRun.run(run.runId, run.sessionId, run.userId, run.input, now(), run.parent?.runId ?? null, run.parent?.toolCallId ?? null, OWNER).changes === 1;
      })();
    },
    endRun(outcome: RunOutcome): void {
      statements.endRun.run({ ...outcome, endedAt: now() });
    },
    resumeRun(runId: string): void {
      statements.resumeRun.run(OWNER, runId);
    },
    pausedRun(runId: string): string | undefined {
      return statements.pausedRun.get(runId) as string | undefined;
    },
    /** Appends messages in one transaction; returns their ids. */
    appendMessages(sessionId: string, runId: string | null, entries: Array<{ message: Message; tokens: number }>): number[] {
      return appendMessages(sessionId, runId, entries);
    },
    epoch(sessionId: string): number {
      return (statements.epochOf.get(sessionId) as number | undefined) ?? 0;
    },
    /** The current epoch's messages with an id above `afterId`, oldest first. */
    messagesAfter(sessionId: string, epoch: number, afterId: number): StoredMessage[] {
      const rows = statements.messagesAfter.all(sessionId, epoch, afterId) as MessageRow[];
      return rows.map(toStoredMessage);
    },
    latestSummary(sessionId: string, epoch: number): Summary | undefined {
      const row = statements.latestSummary.get(sessionId, epoch) as { content: string; tokens: number; last_message_id: number } | undefined;
      return row && { content: row.content, tokens: row.tokens, lastMessageId: row.last_message_id };
    },
    saveSummary(sessionId: string, epoch: number, summary: Summary & { firstMessageId: number }): void {
      statements.insertSummary.run(sessionId, epoch, summary.content, summary.tokens, summary.firstMessageId, summary.lastMessageId, now());
    },
    /** A new start for the session: later runs see none of its earlier messages (which are kept). */
    resetSession(sessionId: string): boolean {
      return statements.resetSession.run(now(), sessionId).changes > 0;
    },
    /** Runs and tokens of one session, across resets. */
    sessionUsage(sessionId: string): { runs: number; promptTokens: number; completionTokens: number } {
      return statements.sessionUsage.get(sessionId) as { runs: number; promptTokens: number; completionTokens: number };
    },
    listSessions(): SessionInfo[] {
      return statements.listSessions.all() as SessionInfo[];
    },
    addFact(userId: string, scope: string, content: string): number {
      return Number(statements.insertFact.run(userId, scope, content, now()).lastInsertRowid);
    },
    forgetFact(userId: string, factId: number): boolean {
      return statements.deleteFact.run(factId, userId).changes > 0;
    },
    /**
     * The facts that best match the words of `query` (bm25): the user's personal facts, and the facts
     * anyone shared with this channel (remember's shared_with_channel promises "everyone in this channel").
     */
    searchFacts(userId: string, channel: string, query: string, limit: number): Fact[] {
      const match = ftsQuery(query);
      // A store without facts (most runs of most bots) skips the full-text query, which costs far more.
      return match && statements.anyFact.get() !== undefined ? (statements.searchFacts.all({ match, userId, channel, limit }) as Fact[]) : [];
    },
    claim(...eventIds: string[]): boolean {
      return claimAll(eventIds);
    },
    pruneClaims(olderThan: Date): number {
      return statements.pruneClaims.run(olderThan.toISOString()).changes;
    },
    interruptOrphanedRuns(): number {
      const orphaned = (statements.runningOwners.all() as Array<string | null>).filter((owner) => !ownerAlive(owner));
      return db.transaction(() => orphaned.reduce((count, owner) => count + statements.interrupt.run(now(), owner).changes, 0))();
    },
    /** Changes whenever another connection commits; used to notice writes by another process. */
    dataVersion(): number {
      return statements.dataVersion.get() as number;
    },
    close(): void {
      group.flush(); // units still waiting for the turn's end commit first
      checkpointer?.stop();
      db.close();
    },
  };
}

interface MessageRow {
  id: number;
  run_id: string | null;
  role: Message["role"];
  content: string | null;
  tool_calls: string | null;
  tool_call_id: string | null;
  tokens: number;
}

function toStoredMessage(row: MessageRow): StoredMessage {
  const content = row.content ?? "";
  const message: Message =
    row.role === "assistant"
      ? { role: "assistant", content: row.content, ...(row.tool_calls ? { tool_calls: JSON.parse(row.tool_calls) } : {}) }
      : row.role === "tool"
        ? { role: "tool", content, tool_call_id: row.tool_call_id ?? "" }
        : { role: row.role, content };
  return { id: row.id, runId: row.run_id, message, tokens: row.tokens };
}

/** Words of free text as an FTS5 query: each word quoted (so no syntax leaks in), any may match. */
function ftsQuery(text: string): string {
  const words = (text.toLowerCase().match(/[\p{L}\p{N}]{2,}/gu) ?? []).filter((word) => !STOPWORDS.has(word));
  return [...new Set(words)].slice(0, 32).map((word) => `"${word}"`).join(" OR ");
}

// Words that match nearly every fact; searching on them would inject barely relevant ones.
const STOPWORDS = new Set(
  "a an and are as at be but by can could did do does for from had has have he her his how i if in is it its me my of on or our she so that the their them they this to was we were what when where which who why will with would you your please".split(" "),
);

interface Unit {
  body: () => unknown;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/**
 * Group commit. Units wait for the end of the event-loop turn, then run back to back in one
 * transaction, each in a savepoint, and commit once. A burst of runs then writes the pages they
 * share (the tail of the messages table, its index) once a turn instead of once a unit. The
 * transaction is open only while the units run, so no other write of the turn joins it.
 */
function groupCommit(db: Database.Database) {
  let waiting: Unit[] = [];
  const inSavepoint = db.transaction((body: () => unknown) => body());
  // IMMEDIATE: a unit may read before it writes, and a deferred transaction would then fail at once
  // (SQLITE_BUSY, no waiting) if another connection committed in between.
  const together = db.transaction((units: Unit[]) =>
    units.map((unit): (() => void) => {
      try {
        const value = inSavepoint(unit.body);
        return () => unit.resolve(value);
      } catch (error) {
        // Some errors (a full disk, an I/O error) make SQLite roll back the whole transaction: then
        // no unit of the group was kept, and all of them fail.
        if (!db.inTransaction) throw error;
        return () => unit.reject(error);
      }
    }),
  ).immediate;
  const flush = () => {
    const units = waiting;
    waiting = [];
    if (units.length === 0) return;
    let settle: Array<() => void>;
    try {
      settle = together(units);
    } catch (error) {
      settle = units.map((unit) => () => unit.reject(error));
    }
    for (const done of settle) done();
  };
  return {
    flush,
    add<T>(body: () => T): Promise<T> {
      if (db.inTransaction) throw new Error("units do not nest: run the inner body as part of the outer one");
      return new Promise<T>((resolve, reject) => {
        if (waiting.length === 0) setImmediate(flush);
        waiting.push({ body, resolve: resolve as (value: unknown) => void, reject });
      });
    },
  };
}

const CHECKPOINT_EVERY_MS = 250;
/** With a checkpoint thread, this connection checkpoints only if the WAL grows this far (40 MB) all the same. */
const BACKSTOP_CHECKPOINT_PAGES = 10_000;
/** SQLite's own default: a connection checkpoints once its commits have put this many pages in the WAL. */
const DEFAULT_CHECKPOINT_PAGES = 1_000;

// The thread's whole program. PASSIVE copies what it can without waiting for readers or writers;
// a checkpoint already running on another connection is simply left to finish.
const CHECKPOINTER_PROGRAM = `
const { workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const db = new Database(workerData.path, { fileMustExist: true });
setInterval(() => {
  try {
    db.pragma("wal_checkpoint(PASSIVE)");
  } catch (error) {
    if (error.code !== "SQLITE_BUSY") throw error;
  }
}, workerData.everyMs);
`;

/**
 * Checkpoints the WAL from a worker thread. Should the thread fail, the connection goes back to
 * checkpointing after its own commits, as it does by default.
 */
function startCheckpointer(db: Database.Database, path: string): { stop(): void } {
  db.pragma(`wal_autocheckpoint = ${BACKSTOP_CHECKPOINT_PAGES}`);
  const driver = createRequire(import.meta.url).resolve("better-sqlite3");
  const worker = new Worker(CHECKPOINTER_PROGRAM, { eval: true, workerData: { driver, path, everyMs: CHECKPOINT_EVERY_MS } });
  worker.unref(); // never what keeps a process alive
  worker.on("error", () => {
    if (db.open) db.pragma(`wal_autocheckpoint = ${DEFAULT_CHECKPOINT_PAGES}`);
  });
  return { stop: () => void worker.terminate() };
}

/** This process, as the owner of the runs it starts. */
const OWNER = `${hostname()}:${process.pid}`;

/**
 * Whether the process that owns a run may still be running it. Another host's processes cannot be
 * checked, so they count as alive; runs from before owners were recorded (null) as dead.
 */
function ownerAlive(owner: string | null): boolean {
  if (owner === null) return false;
  const separator = owner.lastIndexOf(":");
  if (owner.slice(0, separator) !== hostname()) return true;
  try {
    process.kill(Number(owner.slice(separator + 1)), 0); // signal 0: only asks whether it exists
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"; // exists, owned by another user
  }
}

function migrate(db: Database.Database): void {
  const version = () => db.pragma("user_version", { simple: true }) as number;
  if (version() >= MIGRATIONS.length) return;
  // Two processes may open a new file at once. IMMEDIATE takes the write lock before the version is
  // read again, so the second waits for the first and then finds the migrations done, instead of
  // running them twice ("table sessions already exists").
  db.transaction(() => {
    for (let next = version(); next < MIGRATIONS.length; next++) {
      db.exec(MIGRATIONS[next] ?? "");
      db.pragma(`user_version = ${next + 1}`);
    }
  }).immediate();
}
