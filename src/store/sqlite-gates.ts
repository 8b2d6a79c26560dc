/**
 * The SQLite store's gates: the quota ledger (a reservation per model call in flight, owned by its
 * process, against the user's day, made or grown in one IMMEDIATE transaction so processes sharing the
 * file cannot both take the last room), cancel requests (rows, plus a signal to the handles of this process on
 * the same file), streaming answer text (a signal alone: one process runs its runs and shows them),
 * and this process's heartbeat. Statements are prepared on first use: a read-only
 * handle on a file older than these tables never needs them.
 */
import { randomUUID } from "node:crypto";
import { resolve } from "node:path";
import type Database from "better-sqlite3";
import { INSTANCE, type InstanceRecord } from "./instances.js";
import type { TraceReader } from "./sqlite-traces.js";
import type {
  CancelNotice,
  CancelTarget,
  QuotaGrowth,
  QuotaGrowthOutcome,
  QuotaRequest,
  QuotaReservation,
  QuotaSpent,
  TextNotice,
  WorkerOffer,
} from "./port-data.js";
import { liveOffer } from "./worker-offers.js";
import {
  addCost,
  admission,
  dayOf,
  dayStart,
  DEFAULT_HOLD_SECONDS,
  growth,
  heldInFlight,
  type HoldRow,
} from "./quota-rules.js";

/** Listeners of cancel requests and of answer text, by database file: the handles of one process hear each other at once. */
const cancelListeners = new Map<string, Set<(notice: CancelNotice) => void>>();
const textListeners = new Map<string, Set<(notice: TextNotice) => void>>();

/** Adds a listener of one file's notices; returns the way to remove it. */
function listenOn<T>(
  byFile: Map<string, Set<(notice: T) => void>>,
  fileKey: string,
  listener: (notice: T) => void,
): () => void {
  const listeners = byFile.get(fileKey) ?? new Set();
  byFile.set(fileKey, listeners.add(listener));
  return () => {
    listeners.delete(listener);
    if (listeners.size === 0) byFile.delete(fileKey);
  };
}

/** Reservations whose hold ended this long ago are deleted (a late settle of one still counts its spending until then). */
const FORGET_EXPIRED_MS = 86_400_000;

export function createSqliteGates(db: Database.Database, reader: TraceReader) {
  const cache = new Map<string, Database.Statement>();
  const sql = (text: string) => {
    let statement = cache.get(text);
    if (!statement) cache.set(text, (statement = db.prepare(text)));
    return statement;
  };
  const fileKey = db.memory ? `memory:${randomUUID()}` : resolve(db.name);

  const reserve = db.transaction((request: QuotaRequest): QuotaReservation => {
    const now = request.now ?? new Date();
    const day = dayOf(now);
    sql("DELETE FROM quota_reservations WHERE expires_at <= ?").run(
      new Date(now.getTime() - FORGET_EXPIRED_MS).toISOString(),
    );
    let ledger = sql("SELECT tokens, cost FROM quota_days WHERE user_id = ? AND day = ?").get(request.userId, day) as
      | { tokens: number; cost: number | null }
      | undefined;
    if (!ledger) {
      // First seen today: what the stored runs have spent since midnight.
      const stored = reader.userUsageSince(request.userId, dayStart(day));
      ledger = { tokens: stored.promptTokens + stored.completionTokens, cost: stored.cost };
      sql("INSERT INTO quota_days (user_id, day, tokens, cost) VALUES (?, ?, ?, ?)").run(
        request.userId,
        day,
        ledger.tokens,
        ledger.cost,
      );
    }
    // By process: usually none or one of them, each judged alive or gone as its instance says.
    const holds = sql(
      `SELECT r.owner, i.id IS NOT NULL AS known, i.host, i.pid, i.heartbeat_at AS heartbeatAt, sum(r.tokens) AS tokens, sum(r.cost) AS cost, count(*) AS calls
       FROM quota_reservations r LEFT JOIN instances i ON i.id = r.owner WHERE r.user_id = ? AND r.day = ? AND r.expires_at > ? GROUP BY r.owner`,
    ).all(request.userId, day, now.toISOString()) as HoldRow[];
    const held = heldInFlight(holds);
    const verdict = admission({ ...ledger, ...held }, request.limits, request.tokens, request.cost);
    if (verdict === "wait") return { kind: "wait" };
    if (verdict !== "reserve") return verdict;
    const reservationId = `quota_${randomUUID()}`;
    const expiresAt = new Date(now.getTime() + (request.holdSeconds ?? DEFAULT_HOLD_SECONDS) * 1000).toISOString();
    // The owner's instance is recorded with its reservation: one that no instance vouches for counts as gone.
    sql("INSERT INTO instances (id, host, pid, started_at) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING").run(
      INSTANCE.id,
      INSTANCE.host,
      INSTANCE.pid,
      INSTANCE.startedAt,
    );
    sql(
      "INSERT INTO quota_reservations (id, user_id, day, tokens, cost, expires_at, owner) VALUES (?, ?, ?, ?, ?, ?, ?)",
    ).run(reservationId, request.userId, day, request.tokens, request.cost, expiresAt, INSTANCE.id);
    return { kind: "reserved", reservationId };
  });

  const grow = db.transaction((request: QuotaGrowth): QuotaGrowthOutcome => {
    const now = request.now ?? new Date();
    const held = sql("SELECT user_id AS userId, day FROM quota_reservations WHERE id = ?").get(request.reservationId) as
      | { userId: string; day: string }
      | undefined;
    if (!held) return { kind: "grown" }; // settled meanwhile: nothing left to hold
    const ledger = sql("SELECT tokens, cost FROM quota_days WHERE user_id = ? AND day = ?").get(
      held.userId,
      held.day,
    ) as { tokens: number; cost: number | null } | undefined;
    // The user's other calls in flight, judged as reserve judges them.
    const others = sql(
      `SELECT r.owner, i.id IS NOT NULL AS known, i.host, i.pid, i.heartbeat_at AS heartbeatAt, sum(r.tokens) AS tokens, sum(r.cost) AS cost, count(*) AS calls
       FROM quota_reservations r LEFT JOIN instances i ON i.id = r.owner WHERE r.user_id = ? AND r.day = ? AND r.expires_at > ? AND r.id <> ? GROUP BY r.owner`,
    ).all(held.userId, held.day, now.toISOString(), request.reservationId) as HoldRow[];
    const outcome = growth(
      { tokens: ledger?.tokens ?? 0, cost: ledger?.cost ?? 0, ...heldInFlight(others) },
      request.limits,
      request.tokens,
      request.cost,
    );
    if (outcome.kind === "grown")
      sql("UPDATE quota_reservations SET tokens = ?, cost = ? WHERE id = ?").run(
        request.tokens,
        request.cost,
        request.reservationId,
      );
    return outcome;
  });

  const settle = db.transaction((reservationId: string, spent: QuotaSpent | undefined) => {
    const held = sql("DELETE FROM quota_reservations WHERE id = ? RETURNING user_id AS userId, day").get(
      reservationId,
    ) as { userId: string; day: string } | undefined;
    if (!held || !spent) return; // settled before, or nothing spent
    const day = sql("SELECT cost FROM quota_days WHERE user_id = ? AND day = ?").get(held.userId, held.day) as
      | { cost: number | null }
      | undefined;
    sql("UPDATE quota_days SET tokens = tokens + ?, cost = ? WHERE user_id = ? AND day = ?").run(
      spent.tokens,
      addCost(day?.cost ?? null, spent.cost),
      held.userId,
      held.day,
    );
  });

  const requestCancel = db.transaction((target: CancelTarget, at: string): string[] => {
    const reached = (
      target.runId === undefined
        ? sql("SELECT id FROM runs WHERE session_id = ? AND status IN ('running', 'accepted')")
            .pluck()
            .all(target.sessionId)
        : sql("SELECT id FROM runs WHERE session_id = ? AND id = ? AND status IN ('running', 'accepted')")
            .pluck()
            .all(target.sessionId, target.runId)
    ) as string[];
    for (const runId of reached)
      sql("INSERT INTO cancel_requests (run_id, session_id, requested_at) VALUES (?, ?, ?)").run(
        runId,
        target.sessionId,
        at,
      );
    return reached;
  });

  return {
    reserveQuota: (request: QuotaRequest) => reserve.immediate(request),
    growQuota: (request: QuotaGrowth) => grow.immediate(request),
    settleQuota: (reservationId: string, spent?: QuotaSpent) => settle.immediate(reservationId, spent),
    requestCancel(target: CancelTarget): string[] {
      const runIds = requestCancel.immediate(target, new Date().toISOString());
      const notice = { sessionId: target.sessionId, runIds };
      if (runIds.length > 0)
        for (const listener of cancelListeners.get(fileKey) ?? []) queueMicrotask(() => listener(notice));
      return runIds;
    },
    cancelRequested: (runId: string) =>
      sql("SELECT 1 FROM cancel_requests WHERE run_id = ? LIMIT 1").get(runId) !== undefined,
    watchCancels: (listener: (notice: CancelNotice) => void) => listenOn(cancelListeners, fileKey, listener),
    publishText(notice: TextNotice): void {
      for (const listener of textListeners.get(fileKey) ?? []) queueMicrotask(() => listener(notice));
    },
    watchText: (listener: (notice: TextNotice) => void) => listenOn(textListeners, fileKey, listener),
    pruneCancelRequests: (olderThan: Date) =>
      sql("DELETE FROM cancel_requests WHERE requested_at < ?").run(olderThan.toISOString()).changes,
    offerTools(offer: WorkerOffer): void {
      sql(
        "INSERT INTO instances (id, host, pid, started_at, heartbeat_at, offer) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET offer = excluded.offer, heartbeat_at = excluded.heartbeat_at",
      ).run(
        INSTANCE.id,
        INSTANCE.host,
        INSTANCE.pid,
        INSTANCE.startedAt,
        new Date().toISOString(),
        JSON.stringify(offer),
      );
    },
    toolsOffered(): WorkerOffer {
      return liveOffer(
        sql(
          "SELECT id, host, pid, heartbeat_at AS heartbeatAt, offer FROM instances WHERE offer IS NOT NULL",
        ).all() as Array<InstanceRecord & { id: string; offer: string }>,
      );
    },
    heartbeat(): void {
      sql(
        "INSERT INTO instances (id, host, pid, started_at, heartbeat_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at",
      ).run(INSTANCE.id, INSTANCE.host, INSTANCE.pid, INSTANCE.startedAt, new Date().toISOString());
    },
  };
}
