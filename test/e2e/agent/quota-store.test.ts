// The spending guard keeps its ledger in the store: two guards on two handles of one database (as two
// worker processes have) never let one user past a daily cap by more than one call's worth, a call
// streaming past its reservation grows it, and a call cut off mid-reply still counts what it spent.
// SQLite (two connections to one file) always; PostgreSQL too when GLASSBOX_TEST_DATABASE_URL is set.
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

/** One SSE chunk of answer text, as OpenAI streams it. */
const chunk = (content: string) => `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content } }] })}\n\n`;

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
          const reservation = await guard.reserve("U1", CALL.promptTokens, "gpt-4o-mini");
          admitted++;
          await pause(2); // the model answers
          await reservation.settle(CALL);
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
      expect(other?.settle).toBeTypeOf("function");
      await other?.settle(CALL);
    });

    it("a guard's reservation never settled holds room for the model call's time limit and the margin, then no longer", async () => {
      const store = await open();
      const limits = { tokens: 1_500 };
      const reservation = await createSpendingGuard(store, limits, {}, { callTimeoutMs: 5_000 }).reserve(
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
      await reservation.settle();
    });

    it("a call that does not fit beside the user's call in flight on the other handle waits until that one settles, and stops waiting when cancelled", async () => {
      const [one, two] = [await open(), await open()];
      const limits = { tokens: 1_500 };
      const guards = [createSpendingGuard(one, limits), createSpendingGuard(two, limits)];
      // 400 + the completion allowance reserved: the second call does not fit while the first is in flight.
      expect(2 * (400 + COMPLETION_ALLOWANCE_TOKENS)).toBeGreaterThan(limits.tokens);
      const first = await guards[0]?.reserve("U1", 400, "gpt-4o-mini");
      let second: "waiting" | "admitted" = "waiting";
      const waiting = guards[1]?.reserve("U1", 400, "gpt-4o-mini").then((reservation) => {
        second = "admitted";
        return reservation;
      });
      const cancelled = new AbortController();
      const third = guards[1]?.reserve("U1", 400, "gpt-4o-mini", cancelled.signal);
      await pause(50);
      expect(second).toBe("waiting");
      cancelled.abort();
      await expect(third).rejects.toMatchObject({ code: "cancelled" });
      await first?.settle({ promptTokens: 300, completionTokens: 20, totalTokens: 320 });
      const admittedSecond = await waiting;
      expect(second).toBe("admitted");
      await admittedSecond?.settle();
    });
    it("regression: a stream cut by the reply size cap counts against the person's cap, so their next request is refused with the quota sentence (finding 1)", async () => {
      // 8 chunks of 200,000 characters (25,000 tokens each): the call is stopped after the sixth, past 1,000,000.
      const piece = "x".repeat(200_000);
      const server = await startServer({
        script: (_request, index) =>
          index === 0
            ? { raw: { body: Array.from({ length: 8 }, () => chunk(piece)), partGapMs: 1 } }
            : { content: "ok", usage: { promptTokens: 10, completionTokens: 1 } },
      });
      const directory = mkdtempSync(join(tmpdir(), "glassbox-cut-stream-"));
      const port = await open();
      const config = loadConfig({
        OPENAI_BASE_URL: server.url,
        LLM_MODEL: "gpt-4o-mini",
        GLASSBOX_DB: join(directory, "glassbox.db"),
        GLASSBOX_USER_DAILY_TOKENS: "100000",
      });
      const agent = await createAgentConfig(config, createLogger({ level: "silent" }), { port });
      try {
        const conversations = createConversations(agent, agent.port, { dailyLimits: config.dailyLimits });
        const send = async (input: string, eventId: string) => {
          const run = { runId: `run_${eventId}`, sessionId: "web:cut", userId: "U1", input };
          const message = { message: { role: "user" as const, content: input }, tokens: 5 };
          expect(await port.acceptEvent({ eventIds: [eventId], run, message })).toMatchObject({ kind: "accepted" });
          return conversations.runQueued(workOf(messageTurn(run, [eventId])), {
            signal: new AbortController().signal,
            delivery: 1,
          });
        };
        const cut = await send("Tell me everything.", "Ev1");
        expect(cut).toMatchObject({ stopReason: "error", error: { code: "model_timeout" } });
        expect(cut?.output).toContain("sent a reply longer than 1,000,000 characters");
        // What it streamed (6 x 25,000 tokens) and its prompt are in the ledger every handle reads.
        const elsewhere = await open();
        const ledger = await elsewhere.reserveQuota({ userId: "U1", tokens: 1, cost: 0, limits: { tokens: 100_000 } });
        expect(ledger).toMatchObject({ kind: "at_cap", cap: "tokens" });
        expect(ledger.kind === "at_cap" && ledger.spentTokens).toBeGreaterThan(150_000);
        const refused = await send("And now?", "Ev2");
        expect(refused).toMatchObject({ stopReason: "error", error: { code: "quota" } });
        expect(refused?.output).toMatch(
          /^You have used your daily allowance of 100,000 tokens; it resets at 00:00 UTC, in \d+ h \d+ min\.$/,
        );
        expect(server.requests).toHaveLength(1);
      } finally {
        await agent.close();
        rmSync(directory, { recursive: true, force: true });
      }
    });

    it("a call streaming past its reservation grows it, so the user's next call on the other handle waits; one that cannot grow beside another call in flight is refused with the quota sentence", async () => {
      const limits = { tokens: 4_000 };
      const [one, two] = [createSpendingGuard(await open(), limits), createSpendingGuard(await open(), limits)];
      // Each holds its prompt (100) and the allowance (1,000): two fit under the cap, and a third would.
      const streaming = await one.reserve("U1", 100, "gpt-4o-mini");
      const beside = await two.reserve("U1", 100, "gpt-4o-mini");
      expect(3 * (100 + COMPLETION_ALLOWANCE_TOKENS)).toBeLessThanOrEqual(limits.tokens);
      await streaming.streamed(600); // within what it holds: nothing to ask
      await streaming.streamed(1_050); // past it: it holds 100 + 1,050 + 1,000 now, beside the other's 1,100
      expect(streaming.refused.aborted).toBe(false);
      let third = "waiting";
      const waiting = two.reserve("U1", 100, "gpt-4o-mini").finally(() => {
        third = "answered";
      });
      await pause(50);
      expect(third).toBe("waiting");
      await streaming.streamed(2_200); // 3,300 beside 1,100 passes the cap while another call is in flight
      expect(streaming.refused.aborted).toBe(true);
      expect(streaming.refused.reason).toMatchObject({ code: "quota" });
      expect((streaming.refused.reason as Error).message).toMatch(
        /^You have used your daily allowance of 4,000 tokens; it resets at 00:00 UTC, in \d+ h \d+ min\.$/,
      );
      await streaming.settle({ promptTokens: 100, completionTokens: 2_200, totalTokens: 2_300 });
      // Alone in flight, the other call may stream past the cap: the one call a user may overspend by.
      await beside.streamed(5_000);
      expect(beside.refused.aborted).toBe(false);
      await pause(50);
      expect(third).toBe("waiting"); // it does not fit beside what that call now holds
      await beside.settle({ promptTokens: 100, completionTokens: 5_000, totalTokens: 5_100 });
      await expect(waiting).rejects.toMatchObject({ code: "quota" });
    });
  });
}
