// The spending guard keeps its ledger in the store: two guards on two handles of one database (as two
// worker processes have) never let one user past a daily cap by more than one call's worth. SQLite
// (two connections to one file) always; PostgreSQL too when GLASSBOX_TEST_DATABASE_URL is set.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createConversations } from "../../../src/conversations/conversations.js";
import { messageTurn, workOf } from "../../../src/conversations/turns.js";
import { GlassboxError } from "../../../src/agent/errors.js";
import { COMPLETION_ALLOWANCE_TOKENS, createSpendingGuard, HOLD_MARGIN_MS } from "../../../src/agent/quota.js";
import { loadConfig } from "../../../src/config.js";
import { createLogger } from "../../../src/logger.js";
import { createAgentConfig } from "../../../src/setup.js";
import { closeServers, startServer } from "../../helpers/agent.js";
import { pause, TARGETS, useContract } from "../helpers/store-targets.js";

afterEach(closeServers);

const CALL = { promptTokens: 150, completionTokens: 10, totalTokens: 160 };
const CAP = 2_000;

for (const target of TARGETS) {
  describe(`the spending guard on ${target.name}`, () => {
    const { open } = useContract(target);

    it("an agent made over a store port (createAgentConfig({ port })) opens no SQLite file and settles its calls in that store's ledger", async () => {
      const server = await startServer({
        script: () => ({ content: "ok", usage: { promptTokens: 4_000, completionTokens: 100 } }),
      });
      const directory = mkdtempSync(join(tmpdir(), "glassbox-port-agent-"));
      const port = await open();
      const config = loadConfig({
        OPENAI_BASE_URL: server.url,
        LLM_MODEL: "gpt-4o-mini",
        GLASSBOX_DB: join(directory, "glassbox.db"),
        GLASSBOX_USER_DAILY_TOKENS: "1000",
      });
      const agent = await createAgentConfig(config, createLogger({ level: "silent" }), { port });
      try {
        expect(agent.port).toBe(port);
        expect("store" in agent).toBe(false); // the agent carries the port alone
        // Turns as a worker runs them: each message accepted (stored, its run recorded) as ingress does, then runQueued.
        const conversations = createConversations(agent, agent.port, { dailyLimits: config.dailyLimits });
        const send = async (input: string, eventId: string) => {
          const run = { runId: `run_${eventId}`, sessionId: "web:p1", userId: "U1", input };
          const message = { message: { role: "user" as const, content: input }, tokens: 5 };
          expect(await port.acceptEvent({ eventIds: [eventId], run, message })).toMatchObject({ kind: "accepted" });
          return conversations.runQueued(workOf(messageTurn(run, [eventId])), {
            signal: new AbortController().signal,
            delivery: 1,
          });
        };
        expect(await send("first", "Ev1")).toMatchObject({ stopReason: "final" });
        // The guard settled the call in this store: its ledger is at the cap for every handle.
        const elsewhere = await open();
        expect(
          await elsewhere.reserveQuota({ userId: "U1", tokens: 1, cost: 0, limits: { tokens: 1_000 } }),
        ).toMatchObject({ kind: "at_cap", cap: "tokens", spentTokens: 4_100 });
        expect(await send("second", "Ev2")).toMatchObject({ stopReason: "error", error: { code: "quota" } });
        expect(server.requests).toHaveLength(1);
        // Refused before it started: its accepted run ends with the sentence, having spent nothing.
        const runs = await port.runsOfSession("web:p1");
        expect(runs.map((run) => [run.status, run.steps, run.promptTokens])).toEqual([
          ["final", 1, 4_000],
          ["error", 0, 0],
        ]);
        expect(existsSync(join(directory, "glassbox.db"))).toBe(false);
      } finally {
        await agent.close();
        rmSync(directory, { recursive: true, force: true });
      }
    });

    it("two guards on two handles, 20 calls each started together, spend at most one call past the cap; the rest are refused in one sentence", async () => {
      const guards = [
        createSpendingGuard(await open(), { tokens: CAP }),
        createSpendingGuard(await open(), { tokens: CAP }),
      ];
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
      for (const refusal of refusals)
        expect(refusal).toMatch(
          /^You have used your daily allowance of 2,000 tokens; it resets at 00:00 UTC, in \d+ h \d+ min\.$/,
        );
      // Another user has their own allowance, on either handle.
      const other = await guards[1]?.reserve("U2", CALL.promptTokens, "gpt-4o-mini");
      expect(other).toBeTypeOf("function");
      await other?.(CALL);
    });

    it("a guard's reservation never settled holds room for the model call's time limit and the margin, then no longer", async () => {
      const store = await open();
      const limits = { tokens: 1_500 };
      const settle = await createSpendingGuard(store, limits, {}, { callTimeoutMs: 5_000 }).reserve(
        "U1",
        400,
        "gpt-4o-mini",
      );
      const hold = 5_000 + HOLD_MARGIN_MS;
      const later = (ms: number) =>
        store.reserveQuota({
          userId: "U1",
          tokens: 400 + COMPLETION_ALLOWANCE_TOKENS,
          cost: 0,
          limits,
          now: new Date(Date.now() + ms),
        });
      expect(await later(hold - 2_000)).toEqual({ kind: "wait" });
      expect(await later(hold + 2_000)).toMatchObject({ kind: "reserved" });
      await settle();
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
