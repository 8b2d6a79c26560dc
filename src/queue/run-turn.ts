/**
 * Running one turn, the same way in every queue: a handler that throws (a lost database connection,
 * say) is called again in place after a short wait, so the conversation's later turns keep waiting
 * behind it and their order holds; after the last attempt the turn is given up and reported.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { Turn, TurnContext, TurnHandler } from "./types.js";

/** Waits between attempts: [1 s, 5 s] is three attempts in all. */
export const DEFAULT_RETRY_DELAYS_MS: readonly number[] = [1_000, 5_000];

export type TurnOutcome = "done" | "given_up" | "abandoned";

/**
 * Runs `turn` until its handler resolves, it has failed on every attempt ("given_up", reported to
 * `onError`), or `context.signal` aborts ("abandoned": another worker takes the turn over).
 */
export async function runTurn(
  handler: TurnHandler,
  turn: Turn,
  context: TurnContext,
  retryDelaysMs: readonly number[],
  onError: (error: unknown, turn: Turn) => void,
): Promise<TurnOutcome> {
  for (let attempt = 0; ; attempt++) {
    try {
      await handler(turn, context);
      return context.signal.aborted ? "abandoned" : "done";
    } catch (error) {
      if (context.signal.aborted) return "abandoned";
      const delay = retryDelaysMs[attempt];
      if (delay === undefined) {
        onError(error, turn);
        return "given_up";
      }
      try {
        await sleep(delay, undefined, { signal: context.signal });
      } catch {
        return "abandoned";
      }
    }
  }
}
