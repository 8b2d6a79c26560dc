// The spending guard keeps its ledger in the store: two guards on two handles of one database (as two
// worker processes have) never let one user past a daily cap by more than one call's worth. SQLite
// (two connections to one file) always; PostgreSQL too when GLASSBOX_TEST_DATABASE_URL is set.
import { describe, expect, it } from "vitest";
import { GlassboxError } from "../src/agent/errors.js";
import { COMPLETION_ALLOWANCE_TOKENS, createSpendingGuard } from "../src/agent/quota.js";
import { pause, TARGETS, useContract } from "./store-contract-helpers.js";

const CALL = { promptTokens: 150, completionTokens: 10, totalTokens: 160 };
const CAP = 2_000;

for (const target of TARGETS) {
  describe(`the spending guard on ${target.name}`, () => {
    const { open } = useContract(target);

    it("two guards on two handles, 20 calls each started together, spend at most one call past the cap; the rest are refused in one sentence", async () => {
      const guards = [createSpendingGuard(await open(), { tokens: CAP }), createSpendingGuard(await open(), { tokens: CAP })];
      const refusals: string[] = [];
      let admitted = 0;
      const oneCall = async (guard: (typeof guards)[number]) => {
        try {
          const settle = await guard.reserve("U1", CALL.promptTokens, "gpt-4o-mini");
          admitted++;
          await pause(2); // the model answers
          await settle(CALL);
        } catch (error) {
          expect(error).toBeInstanceOf(GlassboxError);
          refusals.push((error as GlassboxError).message);
        }
      };
      await Promise.all(guards.flatMap((guard) => Array.from({ length: 20 }, () => oneCall(guard))));
      const spent = admitted * (CALL.promptTokens + CALL.completionTokens);
      expect(spent).toBeGreaterThanOrEqual(CAP); // the cap is used, not refused early
      expect(spent).toBeLessThanOrEqual(CAP + CALL.promptTokens + CALL.completionTokens);
      expect(refusals).toHaveLength(40 - admitted);
      for (const refusal of refusals) expect(refusal).toMatch(/^You have used your daily allowance of 2,000 tokens; it resets at 00:00 UTC, in \d+ h \d+ min\.$/);
      // Another user has their own allowance, on either handle.
      const other = await guards[1]?.reserve("U2", CALL.promptTokens, "gpt-4o-mini");
      expect(other).toBeTypeOf("function");
      await other?.(CALL);
    });

    it("a call that does not fit beside the user's call in flight on the other handle waits until that one settles, and stops waiting when cancelled", async () => {
      const [one, two] = [await open(), await open()];
      const limits = { tokens: 1_500 };
      const guards = [createSpendingGuard(one, limits), createSpendingGuard(two, limits)];
      // 400 + the completion allowance reserved: the second call does not fit while the first is in flight.
      expect(2 * (400 + COMPLETION_ALLOWANCE_TOKENS)).toBeGreaterThan(limits.tokens);
      const settleFirst = await guards[0]?.reserve("U1", 400, "gpt-4o-mini");
      let second: "waiting" | "admitted" = "waiting";
      const waiting = guards[1]?.reserve("U1", 400, "gpt-4o-mini").then((settle) => {
        second = "admitted";
        return settle;
      });
      const cancelled = new AbortController();
      const third = guards[1]?.reserve("U1", 400, "gpt-4o-mini", cancelled.signal);
      await pause(50);
      expect(second).toBe("waiting");
      cancelled.abort();
      await expect(third).rejects.toMatchObject({ code: "cancelled" });
      await settleFirst?.({ promptTokens: 300, completionTokens: 20, totalTokens: 320 });
      const settleSecond = await waiting;
      expect(second).toBe("admitted");
      await settleSecond?.();
    });
  });
}
