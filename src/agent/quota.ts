/**
 * Daily caps per user (GLASSBOX_USER_DAILY_TOKENS, GLASSBOX_USER_DAILY_COST). A run is refused
 * before it starts when its user is over a cap, and every model call is checked as well: it reserves
 * room in the store (reserveQuota, atomic across processes) against what the user has spent today
 * plus what their calls in flight, in any process, have reserved. Runs started together, on one
 * worker or many, therefore cannot all pass a cap that one check at their start would let through.
 * A call counts what it spends however it ends: a reply cut off (by a limit, a cancel, the run's
 * time limit) or one without reported usage is counted by estimate, and a call streaming past its
 * reservation grows it as it goes, so the user's other calls see it.
 */
import { costOf, priceOf, type Price } from "./cost.js";
import { GlassboxError } from "./errors.js";
import type { TokenCounter } from "./tokens.js";
import type { QuotaStore } from "./contracts.js";
import type { ChatModel, ModelRequest, ReplyMeter, Usage } from "./types.js";
export interface DailyLimits {
  tokens?: number;
  /** US dollars. */
  cost?: number;
}

/**
 * What a call may write beyond its prompt, reserved until it answers, when its answer has no bound
 * of its own (GLASSBOX_MAX_OUTPUT_TOKENS); with it, the reservation is the whole answer the call may
 * stream. A call that streams past what it holds grows its reservation by this much at a time.
 */
export const COMPLETION_ALLOWANCE_TOKENS = 1_000;

/**
 * Beyond the call's time limit, how long its reservation holds. The limit covers the whole reply,
 * streamed or not (llm/reply-limits.ts). A call that outlasts its hold (the SDK retrying it, say)
 * no longer holds room for the rest of it.
 */
export const HOLD_MARGIN_MS = 60_000;

const DEFAULT_CALL_TIMEOUT_MS = 60_000;

/** The start of `now`'s day (UTC), from which the daily caps count. */
export const dayStartOf = (now: Date) => new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));

/** The sentence for a user at a cap, saying when it resets (midnight UTC). */
function capSentence(cap: "tokens" | "cost", limits: DailyLimits, now: Date): string {
  const resets = dayStartOf(now).getTime() + 86_400_000;
  const minutes = Math.ceil((resets - now.getTime()) / 60_000);
  const when = `it resets at 00:00 UTC, in ${Math.floor(minutes / 60)} h ${minutes % 60} min`;
  if (cap === "tokens")
    return `You have used your daily allowance of ${(limits.tokens ?? 0).toLocaleString("en-US")} tokens; ${when}.`;
  return `You have used your daily allowance of $${(limits.cost ?? 0).toFixed(2)}; ${when}.`;
}

/** One sentence for a user over a cap by the stored runs; undefined when within. */
export async function quotaProblem(
  store: Pick<QuotaStore, "userUsageSince">,
  userId: string,
  limits: DailyLimits,
  now = new Date(),
): Promise<string | undefined> {
  if (limits.tokens === undefined && limits.cost === undefined) return undefined;
  const used = await store.userUsageSince(userId, dayStartOf(now));
  if (limits.tokens !== undefined && used.promptTokens + used.completionTokens >= limits.tokens)
    return capSentence("tokens", limits, now);
  if (limits.cost !== undefined && used.cost !== null && used.cost >= limits.cost)
    return capSentence("cost", limits, now);
  return undefined;
}

export interface SpendingGuard {
  /**
   * Before a model call of `userId`: resolves with the call's reservation, or rejects with a
   * GlassboxError("quota") in one sentence.
   */
  reserve(userId: string, estimatedPromptTokens: number, model: string, signal?: AbortSignal): Promise<Reservation>;
}

/** The room a model call holds under its user's caps while it runs. */
export interface Reservation {
  /**
   * The call has streamed about `completionTokens` so far. Past what it holds, the reservation grows
   * (in the store, for every process to see); when it cannot grow beside the user's other calls in
   * flight, `refused` aborts with the quota sentence and the call must stop. Resolves once the
   * reservation holds what was streamed, or was refused (the call need not wait for it).
   */
  streamed(completionTokens: number): Promise<void>;
  readonly refused: AbortSignal;
  /** Ends the reservation with what the call spent (nothing: it never reached the server). Once; later calls do nothing. */
  settle(usage?: Usage): Promise<void>;
}

export interface SpendingGuardOptions {
  /**
   * The model call's own time limit (GLASSBOX_MODEL_TIMEOUT_MS; default 60 s, the model client's).
   * A reservation never settled (the store could not write the settle) holds for this plus
   * HOLD_MARGIN_MS; one of a process that is gone holds nothing at all.
   */
  callTimeoutMs?: number;
  /** The most tokens an answer may have (GLASSBOX_MAX_OUTPUT_TOKENS): reserved whole; COMPLETION_ALLOWANCE_TOKENS without one. */
  maxOutputTokens?: number;
  clock?: () => Date;
  /** The first wait before asking the store again while the user's other calls are in flight (doubling to maxPollMs). */
  pollMs?: number;
  maxPollMs?: number;
}

/**
 * Spending by user and day, kept by the store, so every process sharing it sees the same ledger: a
 * call is admitted when the reservations fit under the caps, or when it is the user's only call in
 * flight and the caps are not reached yet; otherwise it waits for a call in flight to answer (woken
 * at once by one of this process, and asking the store again with a short backoff for the others),
 * and is refused once the spending itself reaches a cap. A call streaming past its reservation grows
 * it, and is stopped when it cannot grow beside the user's other calls in flight. So a user overspends
 * a cap by at most one call's worth, however many processes there are. A call of a process that was
 * killed mid-call holds no room once the store judges that process gone (see quota-rules' heldInFlight).
 */
export function createSpendingGuard(
  store: Pick<QuotaStore, "reserveQuota" | "growQuota" | "settleQuota">,
  limits: DailyLimits,
  prices: Record<string, Price> = {},
  options: SpendingGuardOptions = {},
): SpendingGuard {
  const clock = options.clock ?? (() => new Date());
  const firstPoll = options.pollMs ?? 20;
  const maxPoll = options.maxPollMs ?? 500;
  const holdSeconds = Math.ceil(((options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS) + HOLD_MARGIN_MS) / 1000);
  const completionAllowance = options.maxOutputTokens ?? COMPLETION_ALLOWANCE_TOKENS;
  // Calls of this process waiting per user: a settle here wakes them without waiting for a poll.
  const waiting = new Map<string, Set<() => void>>();
  const wake = (userId: string) => {
    for (const resume of waiting.get(userId) ?? []) resume();
  };

  /** Sleeps until `ms` passed, a call of the user settled here, or `signal` aborted. */
  function pause(userId: string, ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const users = waiting.get(userId) ?? new Set();
      waiting.set(userId, users);
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", done);
        users.delete(done);
        if (users.size === 0 && waiting.get(userId) === users) waiting.delete(userId);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener("abort", done, { once: true });
      users.add(done);
    });
  }

  const costOfCall = (model: string, promptTokens: number, completionTokens: number) =>
    costOf(priceOf(model, prices), { promptTokens, completionTokens }) ?? 0;

  /** A reservation made: it grows as its call streams past it, one grow at a time, until it is settled. */
  function held(reservationId: string, userId: string, prompt: number, reserved: number, model: string): Reservation {
    const refusal = new AbortController();
    let holding = reserved;
    let streamed = 0;
    let growing: Promise<void> | undefined;
    let settled = false;
    const grow = async (): Promise<void> => {
      // Ahead of what was streamed by one allowance, so a long answer asks the store every 1,000 tokens or so.
      while (!settled && !refusal.signal.aborted && prompt + streamed > holding) {
        const tokens = prompt + streamed + COMPLETION_ALLOWANCE_TOKENS;
        const cost = costOfCall(model, prompt, tokens - prompt);
        const now = clock();
        const outcome = await store.growQuota({ reservationId, tokens, cost, limits, now });
        if (outcome.kind === "at_cap")
          return refusal.abort(new GlassboxError("quota", capSentence(outcome.cap, limits, now)));
        holding = tokens;
      }
    };
    return {
      refused: refusal.signal,
      streamed(completionTokens) {
        streamed = Math.max(streamed, completionTokens);
        if (growing || settled || prompt + streamed <= holding) return growing ?? Promise.resolve();
        growing = grow()
          .catch(() => {
            // A store that cannot write now: the call goes on, and its settle counts what it spent.
          })
          .finally(() => {
            growing = undefined;
          });
        return growing;
      },
      async settle(usage) {
        if (settled) return;
        settled = true;
        await growing; // the ledger sees the grow before the settle that ends it
        const spent = usage && {
          tokens: usage.promptTokens + usage.completionTokens,
          cost: costOf(priceOf(model, prices), usage),
        };
        try {
          await store.settleQuota(reservationId, spent);
        } catch {
          // A store that cannot write now: the reservation holds its room until its hold ends (the call's time limit and the margin).
        } finally {
          wake(userId);
        }
      },
    };
  }

  return {
    async reserve(userId, estimatedPromptTokens, model, signal) {
      const tokens = estimatedPromptTokens + completionAllowance;
      const cost = costOfCall(model, estimatedPromptTokens, completionAllowance);
      for (let delay = firstPoll; ; delay = Math.min(delay * 2, maxPoll)) {
        if (signal?.aborted) throw new GlassboxError("cancelled", "The run was cancelled.");
        const now = clock();
        const outcome = await store.reserveQuota({ userId, tokens, cost, limits, holdSeconds, now });
        if (outcome.kind === "at_cap") throw new GlassboxError("quota", capSentence(outcome.cap, limits, now));
        if (outcome.kind === "reserved")
          return held(outcome.reservationId, userId, estimatedPromptTokens, tokens, model);
        await pause(userId, delay, signal);
      }
    },
  };
}

/**
 * The model with every call of a known user checked against the guard: a call over a cap fails
 * with the quota sentence, which ends the run there. Calls without a user (summaries) are not checked.
 * What a call spent is the usage its server reported; where it reported none, or the call did not end
 * with a reply (a limit, a cancel, the run's time limit stopped it), the estimate: the prompt as
 * counted before the call, once the server began its reply, and what it streamed (text, reasoning, call arguments).
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
      const prompt = promptEstimate(request);
      const reservation = await guard.reserve(request.userId, prompt, model.name, request.signal);
      let began = false;
      let streamed = 0;
      const meter: ReplyMeter = {
        began() {
          began = true;
          request.meter?.began();
        },
        received(text) {
          streamed += counter.text(text);
          void reservation.streamed(streamed);
          request.meter?.received(text);
        },
      };
      const signal = request.signal ? AbortSignal.any([request.signal, reservation.refused]) : reservation.refused;
      const estimate = (reported?: Usage): Usage => {
        const promptTokens = reported?.promptTokens || prompt;
        const completionTokens = reported?.completionTokens || streamed;
        return { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens };
      };
      try {
        const response = await model.chat({ ...request, signal, meter });
        await reservation.settle(estimate(response.usage));
        return response;
      } catch (error) {
        // Never began: the server did not take the request (unreachable, refused it), so nothing was spent.
        await reservation.settle(began ? estimate() : undefined);
        if (reservation.refused.aborted && !request.signal?.aborted) throw reservation.refused.reason;
        throw error;
      }
    },
  };
}
