/**
 * The PostgreSQL schema, by versioned migrations: each applied once, in order, and recorded in
 * schema_version. Several processes may start at once: each migrates inside a transaction that first
 * takes an advisory lock (per schema), so the others wait, then find the migrations done. Moments are
 * timestamptz, JSON lists jsonb; a fact's words (as search-words.ts splits them) feed a generated
 * tsvector with a GIN index for full-text search.
 */
import type pg from "pg";
import { GlassboxError } from "../agent/errors.js";
import { inTransaction } from "./postgres-client.js";

const MIGRATIONS = [
  `
  CREATE TABLE sessions (
    id text PRIMARY KEY,
    epoch integer NOT NULL DEFAULT 0, -- a reset starts a new epoch; the context reads only the current one
    version bigint NOT NULL DEFAULT 0, -- counts writes to the history (messages, summaries, resets)
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
  );
  CREATE INDEX sessions_by_activity ON sessions(updated_at DESC);
  -- the processes that run runs: a run's owner is one of these; a stale heartbeat means it is gone
  CREATE TABLE instances (
    id text PRIMARY KEY,
    host text NOT NULL,
    pid integer NOT NULL,
    started_at timestamptz NOT NULL,
    heartbeat_at timestamptz
  );
  CREATE TABLE runs (
    id text PRIMARY KEY,
    seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE, -- the order runs were recorded in
    session_id text NOT NULL REFERENCES sessions(id),
    user_id text NOT NULL,
    input text NOT NULL,
    status text NOT NULL, -- accepted | running | final | max_steps | awaiting_approval | cancelled | error | interrupted | superseded
    output text,
    steps integer NOT NULL DEFAULT 0,
    prompt_tokens integer NOT NULL DEFAULT 0,
    completion_tokens integer NOT NULL DEFAULT 0,
    paused text,
    error text,
    model text,
    cost double precision,
    parent_run_id text REFERENCES runs(id),
    parent_tool_call_id text,
    owner text,
    -- a pipeline's stage: the first stage's run (which every stage names, the first one included), its place, of how many, the pipeline's name
    pipeline_run_id text,
    pipeline_stage integer,
    pipeline_stages integer,
    pipeline_name text,
    accepted_at timestamptz,
    started_at timestamptz NOT NULL,
    ended_at timestamptz
  );
  CREATE INDEX runs_by_session ON runs(session_id, started_at);
  CREATE INDEX runs_by_user ON runs(user_id, started_at);
  CREATE INDEX runs_by_parent ON runs(parent_run_id) WHERE parent_run_id IS NOT NULL;
  CREATE INDEX runs_unfinished ON runs(owner) WHERE status IN ('running', 'accepted');
  CREATE INDEX runs_by_pipeline ON runs(pipeline_run_id, pipeline_stage) WHERE pipeline_run_id IS NOT NULL;
  CREATE TABLE messages (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id text NOT NULL REFERENCES sessions(id),
    epoch integer NOT NULL,
    run_id text REFERENCES runs(id),
    role text NOT NULL,
    content text,
    tool_calls text, -- the assistant's tool_calls as JSON text, exactly as sent back to the model
    tool_call_id text,
    tokens integer NOT NULL,
    created_at timestamptz NOT NULL
  );
  CREATE INDEX messages_by_session ON messages(session_id, epoch, id);
  CREATE TABLE summaries (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id text NOT NULL REFERENCES sessions(id),
    epoch integer NOT NULL,
    content text NOT NULL,
    tokens integer NOT NULL,
    first_message_id bigint NOT NULL,
    last_message_id bigint NOT NULL,
    created_at timestamptz NOT NULL,
    -- the summarising call, a cost of the run whose context it made room in (null: it failed)
    run_id text,
    step integer,
    model text,
    prompt_tokens integer,
    completion_tokens integer,
    cost double precision
  );
  CREATE INDEX summaries_by_session ON summaries(session_id, epoch, id);
  CREATE INDEX summaries_by_run ON summaries(run_id) WHERE run_id IS NOT NULL;
  CREATE TABLE steps (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id text NOT NULL REFERENCES runs(id),
    step integer NOT NULL,
    model text,
    context_messages integer,
    context_tokens integer,
    content text,
    reasoning text,
    reasoning_cut_chars integer NOT NULL DEFAULT 0,
    model_notes jsonb NOT NULL DEFAULT '[]',
    tool_calls jsonb NOT NULL DEFAULT '[]',
    notes jsonb NOT NULL DEFAULT '[]',
    prompt_tokens integer,
    completion_tokens integer,
    latency_ms double precision,
    cost double precision,
    request_refs text NOT NULL, -- the step_messages it was sent, as ranges ("1-40,43")
    tools_ref integer,
    tool_choice text,
    streamed boolean,
    created_at timestamptz NOT NULL,
    UNIQUE (run_id, step)
  );
  -- each distinct message (and tool list) a run sent, once, numbered within the run
  CREATE TABLE step_messages (
    run_id text NOT NULL REFERENCES runs(id),
    seq integer NOT NULL,
    body text NOT NULL,
    PRIMARY KEY (run_id, seq)
  );
  CREATE TABLE approvals (
    id text PRIMARY KEY,
    run_id text NOT NULL REFERENCES runs(id),
    session_id text NOT NULL REFERENCES sessions(id),
    tool_call_id text NOT NULL,
    tool_name text NOT NULL,
    arguments text NOT NULL,
    arguments_hash text NOT NULL,
    requester text NOT NULL,
    status text NOT NULL, -- pending | approved | denied | expired
    decided_by text,
    decided_at timestamptz,
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL,
    message_ref text, -- where the buttons are shown, to update them later
    UNIQUE (run_id, tool_call_id)
  );
  CREATE INDEX approvals_pending ON approvals(status, expires_at);
  CREATE INDEX approvals_pending_by_session ON approvals(session_id) WHERE status = 'pending';
  CREATE TABLE facts (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id text NOT NULL,
    scope text NOT NULL, -- 'user' (follows the person everywhere) or a channel key
    content text NOT NULL,
    words text NOT NULL, -- the content's words, split as the search splits a query
    search tsvector GENERATED ALWAYS AS (to_tsvector('simple', words)) STORED,
    created_at timestamptz NOT NULL
  );
  CREATE INDEX facts_by_user ON facts(user_id);
  CREATE INDEX facts_search ON facts USING gin(search);
  CREATE TABLE claims (
    id text PRIMARY KEY, -- a platform event id: claimed once, before any work starts
    claimed_at timestamptz NOT NULL
  );
  CREATE INDEX claims_by_age ON claims(claimed_at);
  -- a user's spending on a UTC day: what settled model calls spent (cost null: a model without a price)
  CREATE TABLE quota_days (
    user_id text NOT NULL,
    day date NOT NULL,
    tokens bigint NOT NULL,
    cost double precision,
    PRIMARY KEY (user_id, day)
  );
  -- model calls in flight, each holding room under the caps until it settles or its hold ends
  CREATE TABLE quota_reservations (
    id text PRIMARY KEY,
    user_id text NOT NULL,
    day date NOT NULL,
    tokens integer NOT NULL,
    cost double precision NOT NULL,
    expires_at timestamptz NOT NULL
  );
  CREATE INDEX quota_reservations_by_user ON quota_reservations(user_id, day);
  -- "stop": the runs it reached, checked between steps by whoever runs them
  CREATE TABLE cancel_requests (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id text NOT NULL,
    session_id text NOT NULL,
    requested_at timestamptz NOT NULL
  );
  CREATE INDEX cancel_requests_by_run ON cancel_requests(run_id);
  CREATE INDEX cancel_requests_by_age ON cancel_requests(requested_at);
  `,
  `
  -- 👍 / 👎 on an answer, one per person and run: a new click replaces the old one
  CREATE TABLE feedback (
    run_id text NOT NULL,
    user_id text NOT NULL,
    rating text NOT NULL CHECK (rating IN ('up', 'down')),
    reason text,
    source text NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (run_id, user_id)
  );
  CREATE INDEX feedback_by_time ON feedback(created_at);
  `,
  `
  -- the process (instance) that holds each quota reservation: one of a process that is gone holds no room
  ALTER TABLE quota_reservations ADD COLUMN owner text; -- null: made before owners were recorded
  `,
  `
  -- the calls a step's model asked for (id, name, arguments text), stored with its reply: a page
  -- following the run shows a call while it runs
  ALTER TABLE steps ADD COLUMN requested_calls jsonb;
  `,
  `
  -- what a worker can do (its tools' names, requests to suggest), for ingress processes, which load no tools
  ALTER TABLE instances ADD COLUMN offer jsonb;
  `,
  `
  -- erasures done (glassbox erase): who, when, what kind, a hash of the target, rows removed per table
  CREATE TABLE erasures (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at timestamptz NOT NULL,
    erased_by text NOT NULL,
    kind text NOT NULL,
    target_hash text NOT NULL,
    removed jsonb NOT NULL
  );
  `,
  `
  -- who may decide a call, as its tool said (JSON: approvers, requesterMayApprove); NULL: the deployment's
  ALTER TABLE approvals ADD COLUMN policy text;
  `,
  `
  -- where a note came from (JSON: runId, readContent), for notes shared with a channel
  ALTER TABLE facts ADD COLUMN origin text;
  `,
  `
  -- the channel settings a run used (GLASSBOX_CHANNELS): the file's name and the hash of what it held
  ALTER TABLE runs ADD COLUMN configuration text;
  `,
  `
  -- who approved a call so far (JSON list), for a rule of several approvals (the two-person rule)
  ALTER TABLE approvals ADD COLUMN approved_by text;
  `,
  `
  -- runs on a schedule (conversations/schedules.ts): last_tick is the latest tick fired or passed over
  CREATE TABLE schedules (
    id text PRIMARY KEY,
    session_id text NOT NULL,
    user_id text NOT NULL,
    cron text NOT NULL,
    timezone text NOT NULL,
    prompt text NOT NULL,
    missed text NOT NULL,
    paused boolean NOT NULL DEFAULT false,
    source text NOT NULL,
    created_at timestamptz NOT NULL,
    last_tick timestamptz NOT NULL
  );
  CREATE INDEX schedules_session ON schedules (session_id text_pattern_ops);
  `,
  `
  -- what a run read of its thread before the mention (messages, leftOut, through, problem)
  ALTER TABLE runs ADD COLUMN thread_context jsonb;
  `,
  `
  -- the schedule a run was made by (its trace names it), and a schedule's name (the settings file's)
  ALTER TABLE runs ADD COLUMN schedule_id text;
  ALTER TABLE schedules ADD COLUMN name text;
  `,
];

/** The schema version a database has once migrated. */
export const POSTGRES_SCHEMA_VERSION = MIGRATIONS.length;

/** Brings the database (or `schema`, created if missing) to the latest version; safe when several processes do it at once. */
export async function migratePostgres(
  pool: pg.Pool,
  schema: string | undefined,
  version = POSTGRES_SCHEMA_VERSION,
): Promise<void> {
  await inTransaction(pool, async (client) => {
    // Held until this transaction ends: a second process waits here, then finds the work done.
    await client.query(
      "SELECT pg_advisory_xact_lock(hashtext('glassbox.migrate'), hashtext(coalesce($1, current_schema(), '')))",
      [schema ?? null],
    );
    if (schema) await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`); // checked by SCHEMA_NAME
    await client.query("CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)");
    const found = await client.query<{ version: number }>("SELECT version FROM schema_version");
    const current = found.rows[0]?.version;
    if (current === undefined) await client.query("INSERT INTO schema_version (version) VALUES (0)");
    const from = current ?? 0;
    if (from > MIGRATIONS.length) {
      throw new GlassboxError(
        "configuration",
        `The database was written by a newer glassbox (schema version ${from}; this one knows ${MIGRATIONS.length}); upgrade glassbox, or set GLASSBOX_DATABASE_URL to another database.`,
      );
    }
    for (let next = from; next < version; next++) await client.query(MIGRATIONS[next] ?? "");
    if (version > from) await client.query("UPDATE schema_version SET version = $1", [version]);
  });
}

export async function postgresSchemaVersion(pool: pg.Pool): Promise<number> {
  const found = await pool.query<{ version: number }>("SELECT version FROM schema_version");
  return found.rows[0]?.version ?? 0;
}
