/**
 * When a model call is admitted under a user's daily caps, as one pure rule both stores apply inside
 * their transaction (the rule of src/agent/quota.ts's in-process guard): refused once the day's
 * spending reaches a cap; admitted when the reservations fit, or when it would be the user's only
 * call in flight; otherwise it waits for a call in flight to settle. A user overspends a cap by at
 * most one call's worth.
 */
import type { QuotaLimits, QuotaReservation } from "./port-data.js";

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

export const DEFAULT_HOLD_SECONDS = 600;

export function admission(ledger: QuotaLedger, limits: QuotaLimits, tokens: number, cost: number): "reserve" | "wait" | Extract<QuotaReservation, { kind: "at_cap" }> {
  const atCap = (cap: "tokens" | "cost") => ({ kind: "at_cap" as const, cap, spentTokens: ledger.tokens, spentCost: ledger.cost });
  if (limits.tokens !== undefined && ledger.tokens >= limits.tokens) return atCap("tokens");
  if (limits.cost !== undefined && ledger.cost !== null && ledger.cost >= limits.cost) return atCap("cost");
  const fits =
    (limits.tokens === undefined || ledger.tokens + ledger.reservedTokens + tokens <= limits.tokens) &&
    (limits.cost === undefined || ledger.cost === null || ledger.cost + ledger.reservedCost + cost <= limits.cost);
  return fits || ledger.inFlight === 0 ? "reserve" : "wait";
}

/** The day's cost once a call settles: unknown stays unknown, and an unpriced call makes it unknown. */
export const addCost = (total: number | null, spent: number | null): number | null => (total === null || spent === null ? null : total + spent);
