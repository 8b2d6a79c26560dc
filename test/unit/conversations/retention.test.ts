// GLASSBOX_RETENTION_DAYS's daily timer, on a real SQLite store under Vitest's clock: the sweep at
// start, then one a day, each with a cut-off that moves with the clock, so a conversation goes on the
// first sweep after it has been idle for the days set, and not before; stop() ends the sweeps.
import { afterEach, describe, expect, it, vi } from "vitest";
import { startRetention } from "../../../src/conversations/retention.js";
import type { Logger } from "../../../src/logger.js";
import { sqlitePortOf } from "../../../src/store/sqlite.js";
import { openTestStore, removeDatabases } from "../../helpers/memory.js";

const DAY = 86_400_000;
const START = new Date("2026-03-01T09:00:00.000Z");

afterEach(() => {
  vi.useRealTimers();
  removeDatabases();
});

/** A logger that keeps what retention says. */
function keptLog() {
  const lines: Array<{ level: string; fields: Record<string, unknown>; msg: string }> = [];
  const at = (level: string) => (fields: Record<string, unknown>, msg: string) => lines.push({ level, fields, msg });
  return { log: { info: at("info"), warn: at("warn") } as unknown as Logger, lines };
}

describe("retention's daily sweep", () => {
  it("sweeps at start and then once a day, removing each conversation on the first sweep after it has been idle for the days set", async () => {
    vi.useFakeTimers({ now: START, toFake: ["Date", "setInterval", "clearInterval", "setTimeout", "clearTimeout"] });
    const store = sqlitePortOf(openTestStore());
    const write = (sessionId: string, words: string) =>
      store.record([
        {
          kind: "messages",
          sessionId,
          runId: null,
          entries: [{ message: { role: "user", content: words }, tokens: 2 }],
        },
      ]);
    const exists = async (sessionId: string) => (await store.sessionHistory(sessionId)).messages.length > 0;
    await write("web:first", "written on day 0");
    const { log, lines } = keptLog();
    const retention = startRetention({ store, days: 2, log });
    const removals = () => lines.filter((line) => line.level === "info").map((line) => line.fields);

    await vi.advanceTimersByTimeAsync(0); // the sweep at start: nothing is two days idle
    expect(removals()).toEqual([]);
    await vi.advanceTimersByTimeAsync(DAY);
    await write("web:second", "written on day 1");
    await vi.advanceTimersByTimeAsync(DAY - 1); // a moment before day 2's sweep
    expect(removals()).toEqual([]);
    // Day 2: the first conversation is exactly two days idle, not more; it stays.
    await vi.advanceTimersByTimeAsync(1);
    expect(removals()).toEqual([]);
    expect(await exists("web:first")).toBe(true);
    // Day 3: the first is three days idle and goes; the second, two days idle, stays.
    await vi.advanceTimersByTimeAsync(DAY);
    expect(removals()).toEqual([
      {
        kind: "idle",
        at: new Date(START.getTime() + 3 * DAY).toISOString(),
        removed: { messages: 1, sessions: 1 },
        before: new Date(START.getTime() + DAY).toISOString(),
      },
    ]);
    expect(await exists("web:first")).toBe(false);
    expect(await exists("web:second")).toBe(true);
    // Day 4: the second goes.
    await vi.advanceTimersByTimeAsync(DAY);
    expect(removals()).toHaveLength(2);
    expect(await exists("web:second")).toBe(false);
    // Stopped: a conversation idle for weeks afterwards stays.
    await write("web:third", "written on day 4");
    retention.stop();
    await vi.advanceTimersByTimeAsync(30 * DAY);
    expect(await exists("web:third")).toBe(true);
    expect(lines.filter((line) => line.level === "warn")).toEqual([]);
  });
});
