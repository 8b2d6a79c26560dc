/**
 * Daily caps per user (GLASSBOX_USER_DAILY_TOKENS, GLASSBOX_USER_DAILY_COST). Checked before a run
 * starts, so a user over the cap costs nothing more: no model call is made.
 */
import type { TraceReader } from "./trace.js";

export interface DailyLimits {
  tokens?: number;
  /** US dollars. */
  cost?: number;
}

/** One sentence for a user over a cap, saying when it resets (midnight UTC); undefined when within. */
export function quotaProblem(traces: TraceReader, userId: string, limits: DailyLimits, now = new Date()): string | undefined {
  if (limits.tokens === undefined && limits.cost === undefined) return undefined;
  const dayStart = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
  const used = traces.userUsageSince(userId, dayStart);
  const resets = new Date(dayStart.getTime() + 86_400_000);
  const minutes = Math.ceil((resets.getTime() - now.getTime()) / 60_000);
  const when = `it resets at 00:00 UTC, in ${Math.floor(minutes / 60)} h ${minutes % 60} min`;
  if (limits.tokens !== undefined && used.promptTokens + used.completionTokens >= limits.tokens) {
    return `You have used your daily allowance of ${limits.tokens.toLocaleString("en-US")} tokens; ${when}.`;
  }
  if (limits.cost !== undefined && used.cost !== null && used.cost >= limits.cost) {
    return `You have used your daily allowance of $${limits.cost.toFixed(2)}; ${when}.`;
  }
  return undefined;
}
