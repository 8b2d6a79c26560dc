// Runs on a schedule, on the store and the run queue of each kind (SQLite with the queue in this
// process; PostgreSQL with its queue table), with two tickers as two processes have, on a clock the
// test moves: every tick fires once however many look, a paused or deleted schedule fires nothing,
// and a tick missed while nothing ran fires once (missed: once) or is passed over (missed: skip).
import { describe, expect, it } from "vitest";
import { createTokenCounter } from "../../../src/agent/tokens.js";
import { startScheduleTicker } from "../../../src/conversations/schedules.js";
import type { Logger } from "../../../src/logger.js";
import type { Schedule } from "../../../src/store/index.js";
import type { StorePort } from "../../../src/store/port.js";
import { queueBeside, TARGETS, useContract } from "../helpers/store-targets.js";

const counter = await createTokenCounter("o200k_base");
const quiet = { warn: () => {}, info: () => {}, error: () => {}, debug: () => {} } as unknown as Logger;

const schedule = (id: string, overrides: Partial<Schedule> = {}): Schedule => ({
  id,
  sessionId: `slack:T1:C1:main`,
  userId: "U1",
  cron: "0 9 * * *",
  timezone: "Europe/Berlin",
  prompt: "Summarise yesterday's incidents.",
  missed: "once",
  paused: false,
  source: "chat",
  createdAt: "2026-12-01T07:00:00.000Z",
  lastTick: "2026-12-01T07:00:00.000Z",
  ...overrides,
});

for (const target of TARGETS) {
  describe(`schedules on ${target.name}`, () => {
    const contract = useContract(target);

    /** Two tickers on two handles, as two worker processes; `at` moves their clock. */
    async function twoTickers() {
      const [first, second] = [await contract.open(), await contract.open()];
      const beside = await queueBeside(contract);
      let clock = new Date("2026-12-01T07:00:00.000Z");
      const tickers = [first, second].map((store) =>
        startScheduleTicker({
          store: store as StorePort<unknown>,
          queue: beside.queue,
          counter,
          log: quiet,
          everyMs: 60_000,
          now: () => clock,
        }),
      );
      const at = (iso: string) => {
        clock = new Date(iso);
      };
      const lookBoth = () => Promise.all(tickers.map((ticker) => ticker.look()));
      const close = async () => {
        for (const ticker of tickers) await ticker.stop();
        await beside.close();
      };
      return { store: first, at, lookBoth, close };
    }

    const inputsOf = async (store: StorePort<unknown>, sessionId: string) =>
      (await store.runsOfSession(sessionId)).map((run) => [run.input, run.userId, run.status]);

    it("fires each tick once across two processes, over several ticks, and nothing once paused or deleted", async () => {
      const { store, at, lookBoth, close } = await twoTickers();
      try {
        await store.saveSchedule(schedule("sch_daily"));
        at("2026-12-01T07:30:00.000Z");
        expect(await lookBoth()).toEqual([{}, {}]); // 09:00 in Berlin is 08:00 UTC: not yet
        for (const day of ["01", "02", "03"]) {
          at(`2026-12-${day}T08:00:30.000Z`);
          const outcomes = await lookBoth();
          // One fires it; the other finds it taken, or (looking after the first moved the tick) not due.
          expect(outcomes.map((done) => done.sch_daily ?? "not due").sort()).toContain("fired");
          expect(outcomes.every((done) => ["fired", "taken", undefined].includes(done.sch_daily))).toBe(true);
          expect(outcomes.filter((done) => done.sch_daily === "fired")).toHaveLength(1);
          expect(await lookBoth()).toEqual([{}, {}]); // looked again the same minute: nothing new
        }
        expect(await inputsOf(store, "slack:T1:C1:main")).toEqual(
          Array(3).fill(["Summarise yesterday's incidents.", "U1", "accepted"]),
        );
        expect((await store.schedules())[0]?.lastTick).toBe("2026-12-03T08:00:00.000Z");

        await store.pauseSchedule("sch_daily", true);
        at("2026-12-04T08:00:30.000Z");
        expect(await lookBoth()).toEqual([{}, {}]);
        await store.pauseSchedule("sch_daily", false);
        await store.deleteSchedule("sch_daily");
        at("2026-12-05T08:00:30.000Z");
        expect(await lookBoth()).toEqual([{}, {}]);
        expect(await store.runsOfSession("slack:T1:C1:main")).toHaveLength(3);
      } finally {
        await close();
      }
    });

    it("a tick missed while nothing ran fires once on the next look, or is passed over, as the schedule says", async () => {
      const { store, at, lookBoth, close } = await twoTickers();
      try {
        await store.saveSchedule(schedule("sch_once", { sessionId: "web:once" }));
        await store.saveSchedule(schedule("sch_skip", { sessionId: "web:skip", missed: "skip" }));
        // Everything was down from the 1st to the 4th at noon: three ticks came and went.
        at("2026-12-04T12:00:00.000Z");
        const outcomes = await lookBoth();
        expect(outcomes.filter((done) => done.sch_once === "fired")).toHaveLength(1);
        expect(outcomes.some((done) => done.sch_skip === "fired")).toBe(false);
        expect(await store.runsOfSession("web:once")).toHaveLength(1);
        expect(await store.runsOfSession("web:skip")).toHaveLength(0);
        // Both go on from the latest tick: the next day's fires for each.
        at("2026-12-05T08:00:10.000Z");
        await lookBoth();
        expect(await store.runsOfSession("web:once")).toHaveLength(2);
        expect(await store.runsOfSession("web:skip")).toHaveLength(1);
      } finally {
        await close();
      }
    });
  });
}
