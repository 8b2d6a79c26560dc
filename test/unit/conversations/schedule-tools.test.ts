// Schedules as tools, over a real SQLite store: the words a model passes become cron expressions (or
// one sentence it can act on), ticks closer than 5 minutes or in an unknown time zone are refused, a
// schedule is kept in its place's conversation (a Slack channel's top level for any of its threads),
// listed there, and paused or deleted by its maker only.
import { describe, expect, it } from "vitest";
import { createScheduleTools } from "../../../src/conversations/schedule-tools.js";
import { cronOf, nextTicks } from "../../../src/conversations/schedule-times.js";
import { openSqlitePort } from "../../../src/store/sqlite.js";
import type { AnyTool, ToolContext } from "../../../src/tools/types.js";

const contextOf = (sessionId: string, userId: string): ToolContext => ({
  signal: new AbortController().signal,
  sessionId,
  userId,
  runId: "run_1",
  toolCallId: "call_1",
});

function toolsOver() {
  const store = openSqlitePort(":memory:");
  const tools = new Map(createScheduleTools(store).map((tool) => [tool.name, tool] as [string, AnyTool]));
  const call = (name: string, args: Record<string, unknown>, sessionId: string, userId = "U1") =>
    (tools.get(name)?.handler as (args: unknown, context: ToolContext) => Promise<Record<string, unknown>>)(
      args,
      contextOf(sessionId, userId),
    );
  return { store, tools, call };
}

describe("schedules as tools", () => {
  it("turns the words for a schedule into cron, or one sentence", () => {
    expect(cronOf("weekday 09:00")).toBe("0 9 * * 1-5");
    expect(cronOf("every day 7:30")).toBe("30 7 * * *");
    expect(cronOf("Monday 18:05")).toBe("5 18 * * 1");
    expect(cronOf("hour")).toBe("0 * * * *");
    expect(cronOf("30 minutes")).toBe("*/30 * * * *");
    expect(cronOf("0 9 1 * *")).toBe("0 9 1 * *");
    expect(() => cronOf("weekday 25:00")).toThrow("25:00 is not a time of day.");
    expect(() => cronOf("whenever you like")).toThrow(/is not a schedule; say "day 07:30"/);
  });

  it("refuses ticks closer than 5 minutes and time zones that do not exist", () => {
    expect(() => nextTicks("*/2 * * * *", "UTC")).toThrow("Runs on a schedule must be at least 5 minutes apart.");
    expect(() => nextTicks("0 9 * * *", "Mars/Olympus")).toThrow(/cannot be scheduled/);
    expect(nextTicks("0 9 * * 1-5", "Europe/Berlin", new Date("2026-12-05T12:00:00Z"), 2)).toEqual([
      new Date("2026-12-07T08:00:00Z"),
      new Date("2026-12-08T08:00:00Z"),
    ]);
  });

  it("keeps a schedule in its place's conversation, lists it there, and lets only its maker pause or delete it", async () => {
    const { store, tools, call } = toolsOver();
    expect(tools.get("schedule_run")?.dangerous).toBe(true);
    expect(tools.get("schedule_run")?.requesterConfirms).toBe(true);
    const made = await call(
      "schedule_run",
      { every: "weekday 09:00", timezone: "Europe/Berlin", prompt: "Summarise yesterday's incidents." },
      "slack:T1:C1:1700000000.000100",
    );
    expect(made).toMatchObject({ cron: "0 9 * * 1-5", timezone: "Europe/Berlin", madeBy: "U1", paused: false });
    expect(await store.schedules()).toEqual([
      expect.objectContaining({ id: made.scheduleId, sessionId: "slack:T1:C1:main", userId: "U1", source: "chat" }),
    ]);
    // Another thread of the same channel sees it; another channel does not.
    const here = await call("list_schedules", {}, "slack:T1:C1:1700000099.000100", "U2");
    expect((here.schedules as unknown[]).length).toBe(1);
    expect(((await call("list_schedules", {}, "slack:T1:C2:1.1")).schedules as unknown[]).length).toBe(0);

    await expect(call("delete_schedule", { schedule_id: made.scheduleId }, "slack:T1:C1:2.2", "U2")).rejects.toThrow(
      "Only U1, who made it, may change this schedule.",
    );
    await expect(call("pause_schedule", { schedule_id: "sch_none", paused: true }, "slack:T1:C1:2.2")).rejects.toThrow(
      /There is no schedule sch_none here/,
    );
    expect(await call("pause_schedule", { schedule_id: made.scheduleId, paused: true }, "slack:T1:C1:2.2")).toEqual({
      scheduleId: made.scheduleId,
      paused: true,
    });
    expect((await store.schedules())[0]?.paused).toBe(true);
    await call("delete_schedule", { schedule_id: made.scheduleId }, "slack:T1:C1:3.3");
    expect(await store.schedules()).toEqual([]);
    await store.close();
  });
});
