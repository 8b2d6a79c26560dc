/**
 * Runs on PostgreSQL: accepted, started (once), resumed, ended; owned by a process instance, which
 * beats while it lives, so the runs of a process that is gone can be marked interrupted. The write
 * functions take the client of an open transaction (a run's writes, an event's acceptance).
 */
import type pg from "pg";
import { INSTANCE } from "./instances.js";
import { ownerAlive, type InstanceRecord } from "./instances.js";
import type { MessageEntry, RunOutcome, RunRecord, WorkerOffer } from "./port-data.js";
import { liveOffer } from "./worker-offers.js";
import { inTransaction, type Db, type PostgresTransaction } from "./postgres-client.js";
import {
  INSERT_MESSAGES,
  insertedMessages,
  messageColumns,
  type SessionWrite,
  TOUCH_SESSION,
  touchSession,
} from "./postgres-messages.js";

const UNFINISHED = "('running', 'accepted')";
const END_RUN =
  "UPDATE runs SET status = $2, output = $3, steps = $4, prompt_tokens = $5, completion_tokens = $6, paused = $7, error = $8, ended_at = $9 WHERE id = $1";
const endValues = (outcome: RunOutcome) => [
  outcome.runId,
  outcome.status,
  outcome.output,
  outcome.steps,
  outcome.promptTokens,
  outcome.completionTokens,
  outcome.paused,
  outcome.error,
  new Date().toISOString(),
];

/**
 * Handles of this process whose heartbeat keeps its instance row (a beat makes the row when it is
 * missing): while one beats, a transaction need not record the instance itself.
 */
let beatingHandles = 0;

/** Called once a handle's first beat has committed; the returned function when it stops beating. */
export function keepInstanceRow(): () => void {
  beatingHandles++;
  let released = false;
  return () => {
    if (!released) beatingHandles--;
    released = true;
  };
}

const REGISTER_INSTANCE =
  "INSERT INTO instances (id, host, pid, started_at) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING";
const instanceValues = () => [INSTANCE.id, INSTANCE.host, INSTANCE.pid, INSTANCE.startedAt];

/** Records this instance, in the statement's transaction that names it as a run's owner, unless a heartbeat keeps its row. */
async function registerInstance(db: Db): Promise<void> {
  if (beatingHandles === 0) await db.query(REGISTER_INSTANCE, instanceValues());
}

/** registerInstance, sent with the transaction's next statements. */
function sendInstance(transaction: PostgresTransaction): void {
  if (beatingHandles === 0) transaction.send(REGISTER_INSTANCE, instanceValues());
}

/** The user who started the session's first run (not a sub-agent's). */
export async function sessionOwnerIn(db: Db, sessionId: string): Promise<string | undefined> {
  const { rows } = await db.query<{ user_id: string }>(
    "SELECT user_id FROM runs WHERE session_id = $1 AND parent_run_id IS NULL ORDER BY seq LIMIT 1",
    [sessionId],
  );
  return rows[0]?.user_id;
}

/**
 * The accepted run's insert, for a statement that touches its session: $4 the run, $1 the session, $2 the moment.
 * An accepted run has spent nothing yet: its cost is 0, not unknown (which would hide the day's cost from the quota).
 */
const acceptedRun = (user: string, input: string, owner: string, schedule: string) =>
  `INSERT INTO runs (id, session_id, user_id, input, status, accepted_at, started_at, owner, cost, schedule_id) VALUES ($4, $1, ${user}, ${input}, 'accepted', $2, $2, ${owner}, 0, ${schedule})`;

/**
 * A run accepted before it starts (owned by this process until it starts or ends unstarted), with
 * the message it answers, in one statement that also makes or touches its session. Sent at once;
 * the answer is the message's id.
 */
export function acceptRun(
  transaction: PostgresTransaction,
  run: RunRecord,
  entries: MessageEntry[],
): Promise<{ ids: number[]; session?: SessionWrite }> {
  sendInstance(transaction);
  const at = new Date().toISOString();
  if (entries.length === 0) {
    transaction.send(`WITH session AS (${TOUCH_SESSION}) ${acceptedRun("$5", "$6", "$7", "$8")}`, [
      run.sessionId,
      at,
      0,
      run.runId,
      run.userId,
      run.input,
      INSTANCE.id,
      run.scheduleId ?? null,
    ]);
    return Promise.resolve({ ids: [] });
  }
  return transaction
    .query<{ id: number; epoch: number; version: number }>(
      `WITH session AS (${TOUCH_SESSION}), run AS (${acceptedRun("$10", "$11", "$12", "$13")}) ${INSERT_MESSAGES}`,
      [
        run.sessionId,
        at,
        1,
        run.runId,
        ...messageColumns(entries),
        run.userId,
        run.input,
        INSTANCE.id,
        run.scheduleId ?? null,
      ],
    )
    .then(({ rows }) => insertedMessages(run.sessionId, rows));
}

/** A run from the queue, accepted at ingress, starts in this one statement; false when it was not accepted. */
async function startAcceptedRun(db: Db, run: RunRecord): Promise<boolean> {
  await registerInstance(db);
  return (await db.query(START_ACCEPTED, startValues(run))).rowCount === 1;
}

/** startAcceptedRun, sent with the transaction's next statements. */
export function sendAcceptedStart(transaction: PostgresTransaction, run: RunRecord): Promise<boolean> {
  sendInstance(transaction);
  return transaction.query(START_ACCEPTED, startValues(run)).then((started) => started.rowCount === 1);
}

// The input the run starts with replaces the accepted one only where it adds to it (the files' lines).
const START_ACCEPTED =
  "UPDATE runs SET status = 'running', started_at = $1, owner = $2, pipeline_run_id = $4, pipeline_stage = $5, pipeline_stages = $6, pipeline_name = $7, configuration = $8, thread_context = $9, input = CASE WHEN left($10, length(input)) = input THEN $10 ELSE input END WHERE id = $3 AND status = 'accepted'";
const startValues = (run: RunRecord) => [
  new Date().toISOString(),
  INSTANCE.id,
  run.runId,
  ...startedWith(run),
  run.input,
];

/** What a run starts with besides its ids: its pipeline stage, its configuration and what it read of its thread. */
const startedWith = ({ pipeline, configuration, threadContext }: RunRecord) => [
  pipeline?.runId ?? null,
  pipeline?.stage ?? null,
  pipeline?.stages ?? null,
  pipeline?.name ?? null,
  configuration ?? null,
  threadContext ? JSON.stringify(threadContext) : null,
];

/** Starts a run, accepted or new (a sub-agent's, a CLI's); `notAccepted`: startAcceptedRun found it was not. */
export async function startRun(db: Db, run: RunRecord, notAccepted = false): Promise<boolean> {
  if (!notAccepted && (await startAcceptedRun(db, run))) return true;
  const at = new Date().toISOString();
  const started = startedWith(run);
  const { rows } = await db.query<{ status: string }>("SELECT status FROM runs WHERE id = $1", [run.runId]);
  if (rows[0] !== undefined) return false;
  await touchSession(db, run.sessionId, at, false);
  const inserted = await db.query(
    `INSERT INTO runs (id, session_id, user_id, input, status, started_at, parent_run_id, parent_tool_call_id, owner, pipeline_run_id, pipeline_stage, pipeline_stages, pipeline_name, configuration, thread_context)
     VALUES ($1, $2, $3, $4, 'running', $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) ON CONFLICT (id) DO NOTHING`,
    [
      run.runId,
      run.sessionId,
      run.userId,
      run.input,
      at,
      run.parent?.runId ?? null,
      run.parent?.toolCallId ?? null,
      INSTANCE.id,
      ...started,
    ],
  );
  return inserted.rowCount === 1;
}

export async function resumeRun(db: Db, runId: string): Promise<void> {
  await registerInstance(db);
  await db.query(
    "UPDATE runs SET status = 'running', paused = NULL, owner = $1, ended_at = NULL WHERE id = $2 AND status = 'awaiting_approval'",
    [INSTANCE.id, runId],
  );
}

/** A run whose process is gone goes on in this one; false when it is neither interrupted nor running elsewhere. */
export async function takeOverRun(db: Db, runId: string): Promise<boolean> {
  await registerInstance(db);
  const taken = await db.query(
    "UPDATE runs SET status = 'running', owner = $1, ended_at = NULL WHERE id = $2 AND (status = 'interrupted' OR (status = 'running' AND owner IS DISTINCT FROM $1))",
    [INSTANCE.id, runId],
  );
  return taken.rowCount === 1;
}

/** The run's end, sent; `priced`: with its model and cost (see PRICE), in the same statement. */
export function endRun(transaction: PostgresTransaction, outcome: RunOutcome, priced = false): void {
  transaction.send(
    priced ? END_RUN.replace(" WHERE id = $1", `, ${PRICE} WHERE id = $1`) : END_RUN,
    endValues(outcome),
  );
}

/** Run `$1`'s model (its last step's) and cost (its steps', its sub-agents' runs' and its folds' summarising calls'; unknown if any of them is). */
export const PRICE = `model = (SELECT model FROM steps WHERE run_id = $1 ORDER BY step DESC LIMIT 1),
  cost = (SELECT CASE WHEN count(*) = count(cost) THEN sum(cost) END FROM (
    SELECT cost FROM steps WHERE run_id = $1 UNION ALL SELECT cost FROM runs WHERE parent_run_id = $1
    UNION ALL SELECT cost FROM summaries WHERE run_id = $1) AS costs)`;

export function createPostgresRuns(pool: pg.Pool) {
  return {
    async endUnstartedRun(outcome: RunOutcome): Promise<boolean> {
      return ((await pool.query(`${END_RUN} AND status = 'accepted'`, endValues(outcome))).rowCount ?? 0) > 0;
    },
    async pausedRun(runId: string): Promise<string | undefined> {
      const { rows } = await pool.query<{ paused: string | null }>(
        "SELECT paused FROM runs WHERE id = $1 AND status = 'awaiting_approval'",
        [runId],
      );
      return rows[0]?.paused ?? undefined;
    },
    async interruptOrphanedRuns(): Promise<number> {
      const owners = (
        await pool.query<{ owner: string | null }>(`SELECT DISTINCT owner FROM runs WHERE status IN ${UNFINISHED}`)
      ).rows.map((row) => row.owner);
      const instances = (
        await pool.query<InstanceRecord & { id: string }>(
          'SELECT id, host, pid, heartbeat_at AS "heartbeatAt" FROM instances',
        )
      ).rows;
      const byId = new Map(instances.map((instance) => [instance.id, instance]));
      const now = Date.now();
      const alive = (owner: string | null) => ownerAlive(owner, owner === null ? undefined : byId.get(owner), now);
      const orphaned = owners.filter((owner) => !alive(owner));
      const gone = instances.map((instance) => instance.id).filter((id) => !alive(id));
      if (orphaned.length === 0 && gone.length === 0) return 0;
      return inTransaction(pool, async (client) => {
        let interrupted = 0;
        const at = new Date().toISOString();
        for (const owner of orphaned) {
          const result = await client.query(
            `UPDATE runs SET status = 'interrupted', ended_at = $1 WHERE status IN ${UNFINISHED} AND owner IS NOT DISTINCT FROM $2`,
            [at, owner],
          );
          interrupted += result.rowCount ?? 0;
        }
        if (gone.length > 0) await client.query("DELETE FROM instances WHERE id = ANY($1)", [gone]); // nothing of theirs runs any more
        return interrupted;
      });
    },
    async offerTools(offer: WorkerOffer): Promise<void> {
      await pool.query(
        "INSERT INTO instances (id, host, pid, started_at, heartbeat_at, offer) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO UPDATE SET offer = excluded.offer, heartbeat_at = excluded.heartbeat_at",
        [INSTANCE.id, INSTANCE.host, INSTANCE.pid, INSTANCE.startedAt, new Date().toISOString(), JSON.stringify(offer)],
      );
    },
    async toolsOffered(): Promise<WorkerOffer> {
      const { rows } = await pool.query<InstanceRecord & { id: string; offer: unknown }>(
        'SELECT id, host, pid, heartbeat_at AS "heartbeatAt", offer FROM instances WHERE offer IS NOT NULL',
      );
      return liveOffer(rows);
    },
    async heartbeat(): Promise<void> {
      await pool.query(
        "INSERT INTO instances (id, host, pid, started_at, heartbeat_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at",
        [INSTANCE.id, INSTANCE.host, INSTANCE.pid, INSTANCE.startedAt, new Date().toISOString()],
      );
    },
  };
}
