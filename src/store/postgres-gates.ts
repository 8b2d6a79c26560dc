/**
 * The gates on PostgreSQL: event claims (a primary key and ON CONFLICT DO NOTHING: of two claims at
 * once, the second waits for the first to commit and finds it), the quota ledger (the user's day row
 * locked FOR UPDATE while a reservation is made or grown, so processes cannot both take the last room; a
 * reservation is its process's, and holds nothing once that process is gone), cancel requests
 * (rows, and a NOTIFY that every process listening on the database hears), and streaming answer
 * text (a NOTIFY alone, on a channel of its own, heard on the same listening connection).
 */
import { randomUUID } from "node:crypto";
import type pg from "pg";
import { INSTANCE } from "./instances.js";
import type {
  CancelNotice,
  CancelTarget,
  QuotaGrowth,
  QuotaGrowthOutcome,
  QuotaRequest,
  QuotaReservation,
  QuotaSpent,
  TextNotice,
} from "./port-data.js";
import { answeredLater, inTransaction, type Db, type PostgresTransaction } from "./postgres-client.js";
import { admission, dayOf, dayStart, DEFAULT_HOLD_SECONDS, growth, heldInFlight, type HoldRow } from "./quota-rules.js";

/** Reservations whose hold ended this long ago are deleted (a late settle of one still counts its spending until then). */
const FORGET_EXPIRED_MS = 86_400_000;
/** A notice names at most this many runs (NOTIFY carries under 8,000 bytes); the rows name them all. */
const NOTICE_RUNS = 100;
/** Runs whose last ask about a stop is remembered (a forgotten one is asked about again). */
const ASKED_RUNS = 10_000;

/** A notice's payload; undefined for none, or for one that is not JSON (not glassbox's: it would throw in the connection's handler). */
function parsed(payload: string | undefined): unknown {
  try {
    return payload ? (JSON.parse(payload) as unknown) : undefined;
  } catch {
    return undefined;
  }
}

/** Whether any of the ids was claimed before (the claims stay as they are). */
export async function claimedAny(db: Db, eventIds: string[]): Promise<boolean> {
  if (eventIds.length === 0) return false;
  return (await db.query("SELECT 1 FROM claims WHERE id = ANY($1::text[]) LIMIT 1", [eventIds])).rowCount === 1;
}

/**
 * Claims all the ids in one statement, sent with the transaction's next statements; the transaction
 * fails with a unique violation (isClaimedAlready) when one was claimed before.
 */
export function sendClaims(transaction: PostgresTransaction, eventIds: string[]): void {
  if (eventIds.length === 0) return;
  transaction.send("INSERT INTO claims (id, claimed_at) SELECT id, $2 FROM unnest($1::text[]) AS claim(id)", [
    eventIds,
    new Date().toISOString(),
  ]);
}

/** The failure of sendClaims's transaction when an id had been claimed before. */
export const isClaimedAlready = (error: unknown) =>
  (error as { code?: string; table?: string }).code === "23505" && (error as { table?: string }).table === "claims";

/** Claims all the ids in one statement; true when none was claimed before. */
export async function claimIn(db: Db, eventIds: string[]): Promise<boolean> {
  if (eventIds.length === 0) return true;
  const result = await db.query(
    "INSERT INTO claims (id, claimed_at) SELECT id, $2 FROM unnest($1::text[]) AS claim(id) ON CONFLICT (id) DO NOTHING",
    [eventIds, new Date().toISOString()],
  );
  return result.rowCount === eventIds.length;
}

async function spentSince(db: Db, userId: string, since: Date): Promise<{ tokens: number; cost: number | null }> {
  const { rows } = await db.query<{ runs: number; tokens: number; cost: number | null }>(
    `SELECT count(*) AS runs, coalesce(sum(prompt_tokens + completion_tokens), 0) AS tokens, CASE WHEN count(*) = count(cost) THEN sum(cost) END AS cost
     FROM runs WHERE parent_run_id IS NULL AND user_id = $1 AND started_at >= $2`,
    [userId, since.toISOString()],
  );
  const row = rows[0];
  // No runs yet: nothing spent (the SQLite store's reading says the same).
  return !row || row.runs === 0 ? { tokens: 0, cost: 0 } : { tokens: row.tokens, cost: row.cost };
}

/** The NOTIFY channels of one store (a schema has its own). */
export interface NoticeChannels {
  cancel: string;
  text: string;
}

export function createPostgresGates(pool: pg.Pool, listen: () => Promise<pg.Client>, channels: NoticeChannels) {
  const cancelListeners = new Set<(notice: CancelNotice) => void>();
  const textListeners = new Set<(notice: TextNotice) => void>();
  const listenerCount = () => cancelListeners.size + textListeners.size;
  let connection: Promise<pg.Client> | undefined;
  let closed = false;
  // Counts the listening connection's openings; 0 while it is not open. A run asked about under the
  // same opening, and named in no notice since, needs no query: a stop asked since would have come as one.
  let listening = 0;
  let openings = 0;
  const askedUnder = new Map<string, number>();

  /** The listening connection (both channels), opened for the first watcher; reopened if it breaks while someone watches. */
  function connectListener(): Promise<pg.Client> {
    if (connection) return connection;
    const opening: Promise<pg.Client> = (async () => {
      const client = await listen();
      client.on("notification", (message) => {
        const notice = parsed(message.payload);
        if (notice === undefined) return;
        if (message.channel === channels.cancel) {
          // A notice of NOTICE_RUNS runs may have been cut: every run is asked about again.
          if ((notice as CancelNotice).runIds.length >= NOTICE_RUNS) listening = ++openings;
          for (const runId of (notice as CancelNotice).runIds) askedUnder.delete(runId);
          for (const listener of cancelListeners) listener(notice as CancelNotice);
        } else if (message.channel === channels.text)
          for (const listener of textListeners) listener(notice as TextNotice);
      });
      const reopen = () => {
        if (connection !== opening) return;
        connection = undefined;
        listening = 0;
        // A cancel missed meanwhile is found by cancelRequested, which runs check between steps; missed text comes whole at the run's end.
        if (!closed && listenerCount() > 0) setTimeout(() => void connectListener().catch(() => {}), 1_000).unref();
      };
      client.on("error", reopen);
      client.on("end", reopen);
      await client.query(`LISTEN ${client.escapeIdentifier(channels.cancel)}`);
      await client.query(`LISTEN ${client.escapeIdentifier(channels.text)}`);
      listening = ++openings;
      return client;
    })();
    connection = opening;
    opening.catch(() => {
      if (connection === opening) connection = undefined;
      listening = 0;
    });
    return opening;
  }

  /** Adds a listener, opening the listening connection if it is the first; the way back closes it after the last. */
  async function watch<T>(
    listeners: Set<(notice: T) => void>,
    listener: (notice: T) => void,
  ): Promise<() => Promise<void>> {
    listeners.add(listener);
    try {
      await connectListener();
    } catch (error) {
      listeners.delete(listener);
      throw error;
    }
    return async () => {
      listeners.delete(listener);
      if (listenerCount() > 0 || !connection) return;
      const client = connection;
      connection = undefined;
      listening = 0;
      await (await client).end().catch(() => {});
    };
  }

  return {
    // Committed with what other turns send now (postgres-shared.ts).
    claim: (eventIds: string[]) =>
      inTransaction(pool, async (transaction) => answeredLater(claimIn(transaction, eventIds))),
    async pruneClaims(olderThan: Date): Promise<number> {
      return (await pool.query("DELETE FROM claims WHERE claimed_at < $1", [olderThan.toISOString()])).rowCount ?? 0;
    },

    reserveQuota(request: QuotaRequest): Promise<QuotaReservation> {
      const now = request.now ?? new Date();
      const day = dayOf(now);
      return inTransaction(pool, async (client) => {
        await client.query("DELETE FROM quota_reservations WHERE user_id = $1 AND expires_at <= $2", [
          request.userId,
          new Date(now.getTime() - FORGET_EXPIRED_MS).toISOString(),
        ]);
        const lockDay = async () =>
          (
            await client.query<{ tokens: number; cost: number | null }>(
              "SELECT tokens, cost FROM quota_days WHERE user_id = $1 AND day = $2 FOR UPDATE",
              [request.userId, day],
            )
          ).rows[0];
        let ledger = await lockDay();
        if (!ledger) {
          // First seen today: what the stored runs have spent since midnight. Of two first sightings at once, one row wins.
          const stored = await spentSince(client, request.userId, dayStart(day));
          await client.query(
            "INSERT INTO quota_days (user_id, day, tokens, cost) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
            [request.userId, day, stored.tokens, stored.cost],
          );
          ledger = (await lockDay()) as { tokens: number; cost: number | null };
        }
        // By process: usually none or one of them, each judged alive or gone as its instance says.
        const holds = await client.query<HoldRow>(
          `SELECT r.owner, i.id IS NOT NULL AS known, i.host, i.pid, i.heartbeat_at AS "heartbeatAt", sum(r.tokens) AS tokens, sum(r.cost) AS cost, count(*) AS calls
           FROM quota_reservations r LEFT JOIN instances i ON i.id = r.owner WHERE r.user_id = $1 AND r.day = $2 AND r.expires_at > $3 GROUP BY r.owner, i.id`,
          [request.userId, day, now.toISOString()],
        );
        const verdict = admission(
          { ...ledger, ...heldInFlight(holds.rows) },
          request.limits,
          request.tokens,
          request.cost,
        );
        if (verdict === "wait") return { kind: "wait" };
        if (verdict !== "reserve") return verdict;
        const reservationId = `quota_${randomUUID()}`;
        const expiresAt = new Date(now.getTime() + (request.holdSeconds ?? DEFAULT_HOLD_SECONDS) * 1000).toISOString();
        // The owner's instance is recorded with its reservation (one statement): one that no instance vouches for counts as gone.
        await client.query(
          `WITH registered AS (INSERT INTO instances (id, host, pid, started_at) VALUES ($7, $8, $9, $10) ON CONFLICT (id) DO NOTHING)
           INSERT INTO quota_reservations (id, user_id, day, tokens, cost, expires_at, owner) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
          [
            reservationId,
            request.userId,
            day,
            request.tokens,
            request.cost,
            expiresAt,
            INSTANCE.id,
            INSTANCE.host,
            INSTANCE.pid,
            INSTANCE.startedAt,
          ],
        );
        return { kind: "reserved", reservationId };
      });
    },

    growQuota(request: QuotaGrowth): Promise<QuotaGrowthOutcome> {
      const now = request.now ?? new Date();
      return inTransaction(pool, async (client) => {
        // The reservation's row, then its day's, as settleQuota locks them: never the other way round.
        const held = (
          await client.query<{ user_id: string; day: string }>(
            "SELECT user_id, day FROM quota_reservations WHERE id = $1 FOR UPDATE",
            [request.reservationId],
          )
        ).rows[0];
        if (!held) return { kind: "grown" }; // settled meanwhile: nothing left to hold
        const ledger = (
          await client.query<{ tokens: number; cost: number | null }>(
            "SELECT tokens, cost FROM quota_days WHERE user_id = $1 AND day = $2 FOR UPDATE",
            [held.user_id, held.day],
          )
        ).rows[0];
        // The user's other calls in flight, judged as reserveQuota judges them.
        const others = await client.query<HoldRow>(
          `SELECT r.owner, i.id IS NOT NULL AS known, i.host, i.pid, i.heartbeat_at AS "heartbeatAt", sum(r.tokens) AS tokens, sum(r.cost) AS cost, count(*) AS calls
           FROM quota_reservations r LEFT JOIN instances i ON i.id = r.owner WHERE r.user_id = $1 AND r.day = $2 AND r.expires_at > $3 AND r.id <> $4 GROUP BY r.owner, i.id`,
          [held.user_id, held.day, now.toISOString(), request.reservationId],
        );
        const outcome = growth(
          { tokens: ledger?.tokens ?? 0, cost: ledger?.cost ?? 0, ...heldInFlight(others.rows) },
          request.limits,
          request.tokens,
          request.cost,
        );
        if (outcome.kind === "grown")
          await client.query("UPDATE quota_reservations SET tokens = $1, cost = $2 WHERE id = $3", [
            request.tokens,
            request.cost,
            request.reservationId,
          ]);
        return outcome;
      });
    },

    async settleQuota(reservationId: string, spent?: QuotaSpent): Promise<void> {
      await inTransaction(pool, async (client) => {
        const held = (
          await client.query<{ user_id: string; day: string }>(
            "DELETE FROM quota_reservations WHERE id = $1 RETURNING user_id, day",
            [reservationId],
          )
        ).rows[0];
        if (!held || !spent) return; // settled before, or nothing spent
        await client.query(
          "UPDATE quota_days SET tokens = tokens + $1, cost = CASE WHEN cost IS NULL OR $2::double precision IS NULL THEN NULL ELSE cost + $2 END WHERE user_id = $3 AND day = $4",
          [spent.tokens, spent.cost, held.user_id, held.day],
        );
      });
    },

    requestCancel(target: CancelTarget): Promise<string[]> {
      return inTransaction(pool, async (client) => {
        const { rows } = await client.query<{ id: string }>(
          `SELECT id FROM runs WHERE session_id = $1 AND status IN ('running', 'accepted') ${target.runId === undefined ? "" : "AND id = $2"} ORDER BY seq`,
          target.runId === undefined ? [target.sessionId] : [target.sessionId, target.runId],
        );
        const runIds = rows.map((row) => row.id);
        if (runIds.length === 0) return runIds;
        await client.query(
          "INSERT INTO cancel_requests (run_id, session_id, requested_at) SELECT id, $2, $3 FROM unnest($1::text[]) AS run(id)",
          [runIds, target.sessionId, new Date().toISOString()],
        );
        // Delivered when this transaction commits, to every connection listening on the channel.
        const notice: CancelNotice = { sessionId: target.sessionId, runIds: runIds.slice(0, NOTICE_RUNS) };
        await client.query("SELECT pg_notify($1, $2)", [channels.cancel, JSON.stringify(notice)]);
        return runIds;
      });
    },
    async cancelRequested(runId: string): Promise<boolean> {
      const opening = cancelListeners.size > 0 ? listening : 0;
      if (opening !== 0 && askedUnder.get(runId) === opening) return false;
      const requested =
        (await pool.query("SELECT 1 FROM cancel_requests WHERE run_id = $1 LIMIT 1", [runId])).rows.length > 0;
      if (opening !== 0) {
        askedUnder.delete(runId);
        askedUnder.set(runId, opening);
        if (askedUnder.size > ASKED_RUNS) askedUnder.delete(askedUnder.keys().next().value as string);
      }
      return requested;
    },
    watchCancels: (listener: (notice: CancelNotice) => void) => watch(cancelListeners, listener),
    async publishText(notice: TextNotice): Promise<void> {
      await pool.query("SELECT pg_notify($1, $2)", [channels.text, JSON.stringify(notice)]);
    },
    watchText: (listener: (notice: TextNotice) => void) => watch(textListeners, listener),
    async pruneCancelRequests(olderThan: Date): Promise<number> {
      return (
        (await pool.query("DELETE FROM cancel_requests WHERE requested_at < $1", [olderThan.toISOString()])).rowCount ??
        0
      );
    },
    async close(): Promise<void> {
      closed = true;
      cancelListeners.clear();
      textListeners.clear();
      const client = connection;
      connection = undefined;
      if (client) await (await client.catch(() => undefined))?.end().catch(() => {});
    },
  };
}
