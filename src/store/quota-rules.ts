/**
 * When a model call is admitted under a user's daily caps, as one pure rule both stores apply inside
 * their transaction (the rule of src/agent/quota.ts's in-process guard): refused once the day's
 * spending reaches a cap; admitted when the reservations fit, or when it would be the user's only
 * call in flight; otherwise it waits for a call in flight to settle. A call streaming past what it
 * reserved grows its reservation by the same measure, or stops. A user overspends a cap by at most one
 * call's worth. Only the calls of processes still alive count as in flight.
 */
import { ownerAlive, type InstanceRecord } from "./instances.js";
import type { QuotaGrowthOutcome, QuotaLimits, QuotaReservation } from "./port-data.js";

/** A user's day as a store keeps it: what settled calls spent, and what calls in flight reserved. */
export interface QuotaLedger {
  tokens: number;
  /** null once a call's model had no known price: the cost cap can no longer be judged. */
  cost: number | null;
  reservedTokens: number;
  reservedCost: number;
  inFlight: number;
}

/** The UTC day of a moment ("2024-04-10"): caps reset at 00:00 UTC. */
export const dayOf = (now: Date): string => now.toISOString().slice(0, 10);

export const dayStart = (day: string): Date => new Date(`${day}T00:00:00.000Z`);

/** The hold of a reservation made without one (the spending guard always gives its own). */
export const DEFAULT_HOLD_SECONDS = 600;

/**
 * A user's unexpired reservations of the day made by one process, as a store reads them beside
 * that process's row in the instances table (left-joined: `known` is false without one).
 */
export interface HoldRow {
  /** The instance that made them; null for reservations from before owners were recorded. */
  owner: string | null;
  known: boolean | number;
  host: string | null;
  pid: number | null;
  heartbeatAt: string | null;
  tokens: number;
  cost: number;
  calls: number;
}

/**
 * What the calls in flight hold: the reservations of processes that may still settle them. A
 * process that is gone (judged as interruptOrphanedRuns judges a run's owner: a stale heartbeat, a
 * pid gone from this host, or no instance row at all) never will, so its reservations hold no room,
 * however long their hold. Reservations without an owner are judged by their hold alone.
 */
export function heldInFlight(
  rows: HoldRow[],
  now = Date.now(),
): Pick<QuotaLedger, "reservedTokens" | "reservedCost" | "inFlight"> {
  const held = { reservedTokens: 0, reservedCost: 0, inFlight: 0 };
  for (const row of rows) {
    const instance: InstanceRecord | undefined = row.known
      ? { host: row.host ?? "", pid: row.pid ?? 0, heartbeatAt: row.heartbeatAt }
      : undefined;
    if (row.owner !== null && !ownerAlive(row.owner, instance, now)) continue;
    held.reservedTokens += row.tokens;
    held.reservedCost += row.cost;
    held.inFlight += row.calls;
  }
  return held;
}

export function admission(
  ledger: QuotaLedger,
  limits: QuotaLimits,
  tokens: number,
  cost: number,
): "reserve" | "wait" | Extract<QuotaReservation, { kind: "at_cap" }> {
  const atCap = (cap: "tokens" | "cost") => ({
    kind: "at_cap" as const,
    cap,
    spentTokens: ledger.tokens,
    spentCost: ledger.cost,
  });
  if (limits.tokens !== undefined && ledger.tokens >= limits.tokens) return atCap("tokens");
  if (limits.cost !== undefined && ledger.cost !== null && ledger.cost >= limits.cost) return atCap("cost");
  const fits =
    (limits.tokens === undefined || ledger.tokens + ledger.reservedTokens + tokens <= limits.tokens) &&
    (limits.cost === undefined || ledger.cost === null || ledger.cost + ledger.reservedCost + cost <= limits.cost);
  return fits || ledger.inFlight === 0 ? "reserve" : "wait";
}

/**
 * Whether a call in flight may hold `tokens` and `cost` in all, `ledger` holding the user's other calls
 * in flight (not this one): when that fits under the caps, or when no other call is in flight. Then this
 * is the one call that may pass a cap; with others in flight it must stop, or each could pass it.
 */
export function growth(ledger: QuotaLedger, limits: QuotaLimits, tokens: number, cost: number): QuotaGrowthOutcome {
  if (ledger.inFlight === 0) return { kind: "grown" };
  if (limits.tokens !== undefined && ledger.tokens + ledger.reservedTokens + tokens > limits.tokens)
    return { kind: "at_cap", cap: "tokens" };
  if (limits.cost !== undefined && ledger.cost !== null && ledger.cost + ledger.reservedCost + cost > limits.cost)
    return { kind: "at_cap", cap: "cost" };
  return { kind: "grown" };
}

/** The day's cost once a call settles: unknown stays unknown, and an unpriced call makes it unknown. */
export const addCost = (total: number | null, spent: number | null): number | null =>
  total === null || spent === null ? null : total + spent;
