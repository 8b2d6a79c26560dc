/**
 * The PostgreSQL queue's table and its statements. A turn is one row of `turns`; the row with
 * the lowest id among a conversation's rows is its head, and only a head that nobody holds can be
 * claimed, so a conversation's turns run one at a time, in the order they were enqueued, while any
 * number of conversations run side by side.
 *
 * - enqueue: one INSERT, in the caller's transaction or alone; a key still waiting or running adds
 *   nothing (a unique index over the rows not given up). Idle workers are woken after the commit, by
 *   a NOTIFY of its own (wakeWorkers): a transaction that notifies holds a lock over every other
 *   notifying transaction's commit, its WAL flush included, so acceptances that notified would commit
 *   one at a time.
 * - claim: one UPDATE of up to n free heads, oldest first, `for update skip locked` so that workers
 *   never wait on each other; the claim is the delivery (its count goes up by one).
 * - complete: one DELETE by the holder, committed with the others of that moment (commitTogether); the
 *   holder then looks for work at once and so finds the conversation's next turn, now its head.
 * - release: a turn given back as it was (same id, so same place in its conversation) by a worker
 *   that lost its lease.
 * - forget: the DELETE of an erasure, in the store's transaction (turnDelete).
 * A turn holds nothing between statements: a worker killed while holding one is found by the sweep
 * (worker-liveness.ts), which frees its turns for the others.
 */
import { createHash } from "node:crypto";
import type pg from "pg";
import { commitTogether } from "../store/postgres-shared.js";
import { checkTurn, type Turn, type TurnSelection } from "./types.js";

export type Queryable = Pick<pg.ClientBase, "query">;

/** How many times a turn is delivered before it is given up: a turn that kills its worker every time must not kill them all. */
export const MAX_DELIVERIES = 10;

// Index entries are bounded in size: longer conversation keys and turn keys are stored as their digests.
const MAX_CONVERSATION = 128;
const MAX_KEY = 512;

/** A name within `limit` characters: itself when it fits, else a digest (the same name always gives the same digest). */
function bounded(name: string, limit: number): string {
  return name.length <= limit ? name : `sha256:${createHash("sha256").update(name).digest("hex")}`;
}

/** A plain SQL identifier, so that it can be written into statements (schemas are configuration, not input). */
export function checkSchemaName(schema: string): void {
  if (!/^[a-z_][a-z0-9_]{0,47}$/.test(schema))
    throw new Error(
      `the queue's schema '${schema}' must be lower-case letters, digits and underscores (at most 48), starting with a letter or underscore`,
    );
}

/** The channel whose notices wake idle workers (a plain identifier, since the schema is one). */
export const wakeChannel = (schema: string) => `${schema}_turns`;

/** Creates the schema and its tables once, also when several processes start at the same moment. */
export async function installTurns(pool: pg.Pool, schema: string): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query("begin");
    await client.query("select pg_advisory_xact_lock(hashtext('glassbox.queue.install'), hashtext($1))", [schema]);
    await client.query(`create schema if not exists "${schema}"`);
    // given_up_at: delivered MAX_DELIVERIES times to workers that died; kept for an operator to look at.
    await client.query(`create table if not exists "${schema}".turns (
      id bigserial primary key,
      conversation text not null,
      key text not null,
      turn jsonb not null,
      enqueued_at timestamptz not null default clock_timestamp(),
      deliveries integer not null default 0,
      locked_by text,
      locked_at timestamptz,
      given_up_at timestamptz
    )`);
    await client.query(
      `create unique index if not exists turns_key on "${schema}".turns (key) where given_up_at is null`,
    );
    await client.query(
      `create index if not exists turns_conversation on "${schema}".turns (conversation, id) where given_up_at is null`,
    );
    await client.query(
      `create index if not exists turns_free on "${schema}".turns (id) where locked_by is null and given_up_at is null`,
    );
    await client.query(`create table if not exists "${schema}".workers (
      worker_id text primary key,
      heartbeat_at timestamptz not null default now(),
      started_at timestamptz not null default now(),
      host text not null,
      pid integer not null
    )`);
    await client.query("commit");
  } catch (error) {
    await client.query("rollback").catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}

/** Adds `turn` on `client` (inside the caller's transaction, or alone); true when it was new. */
export async function addTurn(client: Queryable, schema: string, turn: Turn): Promise<boolean> {
  const [text, values] = turnInsert(schema, turn);
  return (await client.query(text, values)).rowCount === 1;
}

/** The statement that enqueues `turn` (checked first: a turn out of bounds throws here). */
export function turnInsert(schema: string, turn: Turn): [string, unknown[]] {
  checkTurn(turn);
  return [
    `insert into "${schema}".turns (conversation, key, turn) values ($1, $2, $3)
     on conflict (key) where given_up_at is null do nothing`,
    [bounded(turn.conversation, MAX_CONVERSATION), bounded(turn.key, MAX_KEY), JSON.stringify(turn)],
  ];
}

/**
 * The statement that forgets the turns `selection` names: waiting or given up, or held by a worker
 * when their whole conversation goes (see RunQueue.forgetIn).
 */
export function turnDelete(schema: string, selection: TurnSelection): [string, unknown[]] {
  return [
    `delete from "${schema}".turns
     where conversation = any($1::text[]) or (locked_by is null and turn->'payload'->>$2 = any($3::text[]))`,
    [
      selection.conversations.map((conversation) => bounded(conversation, MAX_CONVERSATION)),
      selection.payload?.field ?? "",
      selection.payload?.values ?? [],
    ],
  ];
}

export interface ClaimedTurn {
  id: string;
  /** As stored; turnOf checks it. */
  turn: unknown;
  delivery: number;
}

/** Claims up to `limit` free conversation heads for `workerId`, oldest first. */
export async function claimTurns(
  client: Queryable,
  schema: string,
  workerId: string,
  limit: number,
): Promise<ClaimedTurn[]> {
  const result = await client.query<{ id: string; turn: unknown; deliveries: number }>(
    `update "${schema}".turns as claimed
     set locked_by = $1, locked_at = now(), deliveries = claimed.deliveries + 1
     from (
       select free.id from "${schema}".turns as free
       where free.locked_by is null and free.given_up_at is null
         and not exists (
           select 1 from "${schema}".turns as earlier
           where earlier.conversation = free.conversation and earlier.given_up_at is null and earlier.id < free.id
         )
       order by free.id
       limit $2
       for update skip locked
     ) as head
     where claimed.id = head.id
     returning claimed.id, claimed.turn, claimed.deliveries`,
    [workerId, limit],
  );
  return result.rows
    .map((row) => ({ id: row.id, turn: row.turn, delivery: row.deliveries }))
    .sort((a, b) => Number(BigInt(a.id) - BigInt(b.id)));
}

/** Deletes a finished turn that `workerId` still holds. */
export async function completeTurn(pool: pg.Pool, schema: string, id: string, workerId: string): Promise<void> {
  await commitTogether(pool, `delete from "${schema}".turns where id = $1 and locked_by = $2`, [id, workerId]);
}

/**
 * Wakes idle workers, outside any transaction (a NOTIFY without writes commits without a WAL flush).
 * One at a time: the commits that come while one is on its way share the next.
 */
export function wakeWorkers(pool: pg.Pool, schema: string, onError: (error: unknown) => void): () => void {
  let sending = false;
  let again = false;
  const send = (): void => {
    sending = true;
    again = false;
    pool
      .query("select pg_notify($1, '')", [wakeChannel(schema)])
      .catch(onError)
      .finally(() => {
        sending = false;
        if (again) send();
      });
  };
  return () => {
    if (sending) again = true;
    else send();
  };
}

/** Gives a turn `workerId` still holds back as it was, in its place, and wakes idle workers. */
export async function releaseTurn(client: Queryable, schema: string, id: string, workerId: string): Promise<void> {
  await client.query(
    `with back as (
       update "${schema}".turns set locked_by = null, locked_at = null where id = $1 and locked_by = $2 returning id
     )
     select pg_notify($3, '') from back`,
    [id, workerId, wakeChannel(schema)],
  );
}

/** A stored turn read back (a row this code did not write is refused rather than run). */
export function turnOf(stored: unknown): Turn {
  const turn = stored as Partial<Turn> | null;
  if (
    !turn ||
    typeof turn.conversation !== "string" ||
    typeof turn.key !== "string" ||
    typeof turn.payload !== "object" ||
    turn.payload === null
  ) {
    throw new Error("this queued row is not a glassbox turn (it lacks a conversation, key or payload)");
  }
  return turn as Turn;
}
