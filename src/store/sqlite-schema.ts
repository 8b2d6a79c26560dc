/**
 * The SQLite schema, all of it: migrations by PRAGMA user_version, each applied once, in order.
 * Existing files keep their history: a file any glassbox wrote upgrades by the migrations after
 * its version.
 */
import type Database from "better-sqlite3";

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
  `
  -- runs are owned by a process instance (an id made at its start), not by "host:pid", which a
  -- container's restarted PID 1 shares with the process it replaced; a bot's checkpoint thread
  -- beats for its instance, so one that stopped beating is known to be gone
  CREATE TABLE instances (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at TEXT NOT NULL,
    heartbeat_at TEXT -- null for processes without a checkpoint thread (the command line)
  );
  -- a run the HTTP API accepted is stored as 'accepted' before the API answers, and starts later
  ALTER TABLE runs ADD COLUMN accepted_at TEXT;
  DROP INDEX runs_running;
  CREATE INDEX runs_unfinished ON runs(owner) WHERE status IN ('running', 'accepted');
  `,
  `
  -- what a step's model thought (its reasoning, kept up to 64 K characters; reasoning_cut_chars says
  -- how many more there were) and what the model layer did to make its reply usable (a JSON list)
  ALTER TABLE steps ADD COLUMN reasoning TEXT;
  ALTER TABLE steps ADD COLUMN reasoning_cut_chars INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE steps ADD COLUMN model_notes TEXT;
  `,
  `
  -- a step's request as references: each distinct message (and tool list) of a run is stored once in
  -- step_messages, numbered within the run, and a step keeps the numbers it sent ("1-40,43"), so a
  -- long run no longer stores its whole conversation again on every step (steps.payload stays for
  -- the steps recorded before)
  CREATE TABLE step_messages (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
  ) WITHOUT ROWID;
  ALTER TABLE steps ADD COLUMN request_refs TEXT;
  ALTER TABLE steps ADD COLUMN tools_ref INTEGER;
  ALTER TABLE steps ADD COLUMN tool_choice TEXT;
  `,
  `
  -- the summarising call of a fold, as a cost of the run whose context it made room in: which run and
  -- step, the model, its tokens and cost (counted in the run's totals); null for older summaries.
  -- And whether a step's request was streamed.
  ALTER TABLE summaries ADD COLUMN run_id TEXT;
  ALTER TABLE summaries ADD COLUMN step INTEGER;
  ALTER TABLE summaries ADD COLUMN model TEXT;
  ALTER TABLE summaries ADD COLUMN prompt_tokens INTEGER;
  ALTER TABLE summaries ADD COLUMN completion_tokens INTEGER;
  ALTER TABLE summaries ADD COLUMN cost REAL;
  CREATE INDEX summaries_by_run ON summaries(run_id) WHERE run_id IS NOT NULL;
  ALTER TABLE steps ADD COLUMN streamed INTEGER;
  `,
  `
  -- a pipeline's stages are runs of their own, linked to the first stage's run (which every stage
  -- names, the first one included), with their place in it, how many stages it has and its name
  ALTER TABLE runs ADD COLUMN pipeline_run_id TEXT;
  ALTER TABLE runs ADD COLUMN pipeline_stage INTEGER;
  ALTER TABLE runs ADD COLUMN pipeline_name TEXT;
  ALTER TABLE runs ADD COLUMN pipeline_stages INTEGER;
  CREATE INDEX runs_by_pipeline ON runs(pipeline_run_id, pipeline_stage) WHERE pipeline_run_id IS NOT NULL;
  `,
  `
  -- what people said about an answer: one row per run and person (their latest click replaces the
  -- one before), a thumbs up or down, an optional reason (bounded), where it came from, and when
  CREATE TABLE feedback (
    run_id TEXT NOT NULL REFERENCES runs(id),
    user_id TEXT NOT NULL,
    rating TEXT NOT NULL, -- up | down
    reason TEXT,
    source TEXT NOT NULL, -- slack | discord | web
    created_at TEXT NOT NULL,
    PRIMARY KEY (run_id, user_id)
  ) WITHOUT ROWID;
  CREATE INDEX feedback_by_rating ON feedback(rating, created_at);
  `,
  `
  -- the process (instance) that holds each quota reservation: one of a process that is gone holds no
  -- room. The table was once made outside the migrations, when a file lacked it: made here if missing.
  CREATE TABLE IF NOT EXISTS quota_reservations (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    day TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    cost REAL NOT NULL,
    expires_at TEXT NOT NULL
  );
  CREATE INDEX IF NOT EXISTS quota_reservations_by_user ON quota_reservations(user_id, day);
  ALTER TABLE quota_reservations ADD COLUMN owner TEXT; -- null: made before owners were recorded
  `,
  `
  -- the calls a step's model asked for (id, name, arguments text; a JSON list, null for none), stored
  -- with its reply: a page following the run from another process shows a call while it runs
  ALTER TABLE steps ADD COLUMN requested_calls TEXT;
  `,
  `
  -- what a worker can do (its tools' names, requests to suggest: JSON), for processes that load no tools
  ALTER TABLE instances ADD COLUMN offer TEXT;
  `,
  `
  -- tables that were once made outside the migrations, when a file lacked them (the quota ledger and
  -- cancel requests, by the store port; Slack installations, by their own connection): made here if
  -- missing, so a file that already has them keeps them as they are.
  -- a user's spending on a UTC day: what settled model calls spent (cost null: a model without a price)
  CREATE TABLE IF NOT EXISTS quota_days (
    user_id TEXT NOT NULL,
    day TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    cost REAL,
    PRIMARY KEY (user_id, day)
  );
  -- "stop": the runs it reached, checked between steps by whoever runs them
  CREATE TABLE IF NOT EXISTS cancel_requests (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    requested_at TEXT NOT NULL
  );
  CREATE INDEX IF NOT EXISTS cancel_requests_by_run ON cancel_requests(run_id);
  CREATE INDEX IF NOT EXISTS cancel_requests_by_age ON cancel_requests(requested_at);
  CREATE TABLE IF NOT EXISTS slack_installations (
    key TEXT PRIMARY KEY, -- team id, or enterprise id of an org-wide install
    team_id TEXT,
    enterprise_id TEXT,
    org_wide INTEGER NOT NULL,
    bot_user_id TEXT NOT NULL,
    scopes TEXT NOT NULL, -- comma-separated, as Slack writes them
    sealed TEXT NOT NULL, -- the installation with its tokens, AES-256-GCM
    installed_at TEXT NOT NULL
  );
  -- workspaces of an org-wide install, as events named them
  CREATE TABLE IF NOT EXISTS slack_installation_teams (
    team_id TEXT PRIMARY KEY,
    installation_key TEXT NOT NULL
  );
  `,
  `
  -- erasures done (glassbox erase): who, when, what kind, a hash of the target, rows removed per table
  CREATE TABLE erasures (
    id INTEGER PRIMARY KEY,
    at TEXT NOT NULL,
    erased_by TEXT NOT NULL,
    kind TEXT NOT NULL,
    target_hash TEXT NOT NULL,
    removed TEXT NOT NULL
  );
  `,
  `
  -- who may decide a call, as its tool said (JSON: approvers, requesterMayApprove); NULL: the deployment's
  ALTER TABLE approvals ADD COLUMN policy TEXT;
  `,
  `
  -- where a note came from (JSON: runId, readContent), for notes shared with a channel
  ALTER TABLE facts ADD COLUMN origin TEXT;
  `,
  `
  -- the channel settings a run used (GLASSBOX_CHANNELS): the file's name and the hash of what it held
  ALTER TABLE runs ADD COLUMN configuration TEXT;
  `,
  `
  -- who approved a call so far (JSON list), for a rule of several approvals (the two-person rule)
  ALTER TABLE approvals ADD COLUMN approved_by TEXT;
  `,
  `
  -- runs on a schedule (conversations/schedules.ts): last_tick is the latest tick fired or passed over
  CREATE TABLE schedules (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    cron TEXT NOT NULL,
    timezone TEXT NOT NULL,
    prompt TEXT NOT NULL,
    missed TEXT NOT NULL,
    paused INTEGER NOT NULL DEFAULT 0,
    source TEXT NOT NULL,
    created_at TEXT NOT NULL,
    last_tick TEXT NOT NULL
  );
  CREATE INDEX schedules_session ON schedules (session_id);
  `,
  `
  -- what a run read of its thread before the mention (JSON: messages, leftOut, through, problem)
  ALTER TABLE runs ADD COLUMN thread_context TEXT;
  `,
  `
  -- the schedule a run was made by (its trace names it), and a schedule's name (the settings file's)
  ALTER TABLE runs ADD COLUMN schedule_id TEXT;
  ALTER TABLE schedules ADD COLUMN name TEXT;
  `,
];

/** The schema version a file has once migrated. */
export const SCHEMA_VERSION = MIGRATIONS.length;

export function schemaVersion(db: Database.Database): number {
  return db.pragma("user_version", { simple: true }) as number;
}

/** Brings the file to `version` (the latest unless a test writes a file of an older glassbox). */
export function migrate(db: Database.Database, version = SCHEMA_VERSION): void {
  if (schemaVersion(db) >= version) return;
  // Two processes may open a new file at once. IMMEDIATE takes the write lock before the version is
  // read again, so the second waits for the first and then finds the migrations done, instead of
  // running them twice ("table sessions already exists").
  db.transaction(() => {
    for (let next = schemaVersion(db); next < version; next++) {
      db.exec(MIGRATIONS[next] ?? "");
      db.pragma(`user_version = ${next + 1}`);
    }
  }).immediate();
}
