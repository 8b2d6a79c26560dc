/**
 * Daily caps per user (GLASSBOX_USER_DAILY_TOKENS, GLASSBOX_USER_DAILY_COST). A run is refused
 * before it starts when its user is over a cap, and every model call is checked as well: against
 * what the user has spent today plus what their calls in flight have reserved. Runs started
 * together therefore cannot all pass a cap that one check at their start would let through.
 */
import { costOf, priceOf, type Price } from "./cost.js";
import { GlassboxError } from "./errors.js";
import type { TokenCounter } from "./tokens.js";
import type { TraceReader } from "./trace.js";
import type { ChatModel, ModelRequest, Usage } from "./types.js";

export interface DailyLimits {
  tokens?: number;
  /** US dollars. */
  cost?: number;
}

/**
 * What a call may write beyond its prompt, reserved until it answers. A call whose answer is
 * longer spends more than it reserved: the bound on overspending holds for answers within this.
 */
export const COMPLETION_ALLOWANCE_TOKENS = 1_000;

const dayStartOf = (now: Date) => new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));

/** The sentence for a user at a cap, saying when it resets (midnight UTC); undefined when within. */
function capReached(limits: DailyLimits, used: { tokens: number; cost: number | null }, now: Date): string | undefined {
  const resets = dayStartOf(now).getTime() + 86_400_000;
  const minutes = Math.ceil((resets - now.getTime()) / 60_000);
  const when = `it resets at 00:00 UTC, in ${Math.floor(minutes / 60)} h ${minutes % 60} min`;
  if (limits.tokens !== undefined && used.tokens >= limits.tokens) {
    return `You have used your daily allowance of ${limits.tokens.toLocaleString("en-US")} tokens; ${when}.`;
  }
  if (limits.cost !== undefined && used.cost !== null && used.cost >= limits.cost) {
    return `You have used your daily allowance of $${limits.cost.toFixed(2)}; ${when}.`;
  }
  return undefined;
}

/** One sentence for a user over a cap by the stored runs; undefined when within. */
export function quotaProblem(traces: TraceReader, userId: string, limits: DailyLimits, now = new Date()): string | undefined {
  if (limits.tokens === undefined && limits.cost === undefined) return undefined;
  const used = traces.userUsageSince(userId, dayStartOf(now));
  return capReached(limits, { tokens: used.promptTokens + used.completionTokens, cost: used.cost }, now);
}

interface Spending {
  day: number;
  tokens: number;
  cost: number | null;
  reservedTokens: number;
  reservedCost: number;
  inFlight: number;
  /** Calls waiting for one in flight to answer, in arrival order. */
  waiting: Array<() => void>;
}

export interface SpendingGuard {
  /**
   * Before a model call of `userId`: resolves with a settle function to call with the usage once
   * it answers (or without, if it failed), or rejects with a GlassboxError("quota") in one sentence.
   */
  reserve(userId: string, estimatedPromptTokens: number, model: string, signal?: AbortSignal): Promise<(usage?: Usage) => void>;
}

/**
 * Spending by user and day, in this process: what the stored runs had spent when the user was first
 * seen today, plus every call since, plus what calls in flight reserved. A call is admitted when
 * the reservations fit under the caps, or when it is the user's only call in flight and the caps
 * are not reached yet; otherwise it waits for a call in flight to answer, and is refused once the
 * spending itself reaches a cap. So a user overspends a cap by at most one call's worth.
 */
export function createSpendingGuard(traces: TraceReader, limits: DailyLimits, prices: Record<string, Price> = {}, clock: () => Date = () => new Date()): SpendingGuard {
  const users = new Map<string, Spending>();

  function spendingOf(userId: string, now: Date): Spending {
    const day = dayStartOf(now).getTime();
    let spending = users.get(userId);
    if (!spending || spending.day !== day) {
      const stored = traces.userUsageSince(userId, new Date(day));
      spending = { day, tokens: stored.promptTokens + stored.completionTokens, cost: stored.cost, reservedTokens: 0, reservedCost: 0, inFlight: 0, waiting: spending?.waiting ?? [] };
      users.set(userId, spending);
    }
    return spending;
  }

  function admit(userId: string, tokens: number, cost: number): ((usage?: Usage, model?: string) => void) | string | undefined {
    const now = clock();
    const spending = spendingOf(userId, now);
    const reached = capReached(limits, spending, now);
    if (reached) return reached;
    const fits =
      (limits.tokens === undefined || spending.tokens + spending.reservedTokens + tokens <= limits.tokens) &&
      (limits.cost === undefined || spending.cost === null || spending.cost + spending.reservedCost + cost <= limits.cost);
    if (!fits && spending.inFlight > 0) return undefined; // wait for a call in flight to answer
    spending.reservedTokens += tokens;
    spending.reservedCost += cost;
    spending.inFlight += 1;
    let settled = false;
    return (usage, model) => {
      if (settled) return;
      settled = true;
      spending.reservedTokens -= tokens;
      spending.reservedCost -= cost;
      spending.inFlight -= 1;
      if (usage) {
        spending.tokens += usage.promptTokens + usage.completionTokens;
        const spent = costOf(priceOf(model ?? "", prices), usage);
        spending.cost = spending.cost === null || spent === null ? null : spending.cost + spent;
      }
      // Every waiting call looks again, in arrival order: one may now fit, or the cap is reached.
      for (const wake of spending.waiting.splice(0)) wake();
    };
  }

  return {
    reserve(userId, estimatedPromptTokens, model, signal) {
      const tokens = estimatedPromptTokens + COMPLETION_ALLOWANCE_TOKENS;
      const cost = costOf(priceOf(model, prices), { promptTokens: estimatedPromptTokens, completionTokens: COMPLETION_ALLOWANCE_TOKENS }) ?? 0;
      return new Promise((resolve, reject) => {
        const attempt = () => {
          if (signal?.aborted) return reject(new GlassboxError("cancelled", "The run was cancelled."));
          const outcome = admit(userId, tokens, cost);
          if (typeof outcome === "string") reject(new GlassboxError("quota", outcome));
          else if (outcome) resolve((usage) => outcome(usage, model));
          else spendingOf(userId, clock()).waiting.push(attempt);
        };
        // A cancelled run stops waiting at once; the queue forgets it when it is next woken.
        signal?.addEventListener("abort", () => reject(new GlassboxError("cancelled", "The run was cancelled.")), { once: true });
        attempt();
      });
    },
  };
}

/**
 * The model with every call of a known user checked against the guard: a call over a cap fails
 * with the quota sentence, which ends the run there. Calls without a user (summaries) are not checked.
 */
export function withSpendingGuard(model: ChatModel, guard: SpendingGuard, counter: TokenCounter): ChatModel {
  const schemaTokens = new WeakMap<object, number>();
  const promptEstimate = (request: ModelRequest) => {
    const tools = request.tools ?? [];
    let schema = schemaTokens.get(tools);
    if (schema === undefined) schemaTokens.set(tools, (schema = counter.tools(tools)));
    return request.messages.reduce((sum, message) => sum + counter.message(message), schema);
  };
  return {
    name: model.name,
    async chat(request) {
      if (request.userId === undefined) return model.chat(request);
      const settle = await guard.reserve(request.userId, promptEstimate(request), model.name, request.signal);
      try {
        const response = await model.chat(request);
        settle(response.usage);
        return response;
      } catch (error) {
        settle(); // a failed call is billed as nothing here; the provider may differ
        throw error;
      }
    },
  };
}
