/**
 * Adding a turn to the PostgreSQL queue: one graphile-worker job in the conversation's named queue,
 * by SQL, so that it can be part of the caller's own transaction (the event claim, the message and
 * the job commit together or not at all).
 *
 * - Named queue = the conversation: graphile-worker runs one job of a named queue at a time, and
 *   takes the one with the earliest run_at first, so run_at is the enqueue's own clock time
 *   (clock_timestamp(), not the transaction's start) and turns run in the order they were enqueued.
 * - Job key = the turn's key, in `unsafe_dedupe` mode: a second add of a waiting or running turn
 *   changes nothing (the other modes replace a waiting job, moving it back in its queue, or add a
 *   second job beside a running one).
 * - A shared advisory lock, held to the end of the transaction, keeps the empty-queue cleanup away
 *   while the job's queue row exists but the job is not yet visible (see worker-liveness.ts).
 */
import { createHash } from "node:crypto";
import type pg from "pg";
import { checkTurn, type Turn } from "./types.js";

/** graphile-worker's task name for a turn. */
export const TURN_TASK = "glassbox_turn";

// graphile-worker's limits: queue names up to 128 characters, job keys up to 512.
const MAX_QUEUE_NAME = 128;
const MAX_JOB_KEY = 512;

/** A name within `limit` characters: itself when it fits, else a digest (the same name always gives the same digest). */
function bounded(name: string, limit: number): string {
  return name.length <= limit ? name : `sha256:${createHash("sha256").update(name).digest("hex")}`;
}

export const queueNameOf = (conversation: string) => bounded(conversation, MAX_QUEUE_NAME);
export const jobKeyOf = (key: string) => bounded(key, MAX_JOB_KEY);

/** A plain SQL identifier, so that it can be written into statements (schemas are configuration, not input). */
export function checkSchemaName(schema: string): void {
  if (!/^[a-z_][a-z0-9_]{0,47}$/.test(schema))
    throw new Error(
      `the queue's schema '${schema}' must be lower-case letters, digits and underscores (at most 48), starting with a letter or underscore`,
    );
}

/**
 * How many times a turn is started before it is given up: each delivery to a worker that then died
 * counts (a turn that kills its worker every time must not kill them all). graphile-worker keeps a
 * given-up job, for an operator to see in its jobs view.
 */
export const MAX_DELIVERIES = 10;

/** Adds `turn` on `client` (inside the caller's transaction, or alone); true when it was new. */
export async function addTurn(client: Pick<pg.ClientBase, "query">, schema: string, turn: Turn): Promise<boolean> {
  checkTurn(turn);
  const result = await client.query<{ revision: number }>(
    `with gate as (
       select pg_advisory_xact_lock_shared(hashtext('glassbox.queue.enqueue'), hashtext($1))
     )
     select (job).revision from (
       select "${schema}".add_job($2, $3::json, queue_name => $4, job_key => $5, job_key_mode => 'unsafe_dedupe',
                                  max_attempts => $6, run_at => clock_timestamp()) as job
       from gate offset 0
     ) added`,
    [schema, TURN_TASK, JSON.stringify(turn), queueNameOf(turn.conversation), jobKeyOf(turn.key), MAX_DELIVERIES],
  );
  // (offset 0 keeps the planner from inlining the subquery, which could call add_job once per column.)
  // A job the add found already there comes back with its revision bumped; a new one has revision 0.
  return result.rows[0]?.revision === 0;
}

/** A job's payload read back as a turn (a job this code did not add is refused rather than run). */
export function turnOf(payload: unknown): Turn {
  const turn = payload as Partial<Turn> | null;
  if (
    !turn ||
    typeof turn.conversation !== "string" ||
    typeof turn.key !== "string" ||
    typeof turn.payload !== "object" ||
    turn.payload === null
  ) {
    throw new Error("this job is not a glassbox turn (it lacks a conversation, key or payload)");
  }
  return turn as Turn;
}
