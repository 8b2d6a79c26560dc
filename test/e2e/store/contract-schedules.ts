// The store contract, schedules: saved and replaced by id (the last tick kept from going back),
// listed by place, paused, deleted; a tick advances once across handles, never backwards; an
// erasure of the person or the place takes the schedule with it.
import { expect, it } from "vitest";
import type { Schedule } from "../../../src/store/index.js";
import { runRecord, type Contract } from "../helpers/store-targets.js";

const scheduleOf = (id: string, sessionId: string, overrides: Partial<Schedule> = {}): Schedule => ({
  id,
  sessionId,
  userId: "U1",
  cron: "0 9 * * 1-5",
  timezone: "Europe/Berlin",
  prompt: "Summarise yesterday's incidents.",
  missed: "once",
  paused: false,
  source: "chat",
  createdAt: "2026-12-01T08:00:00.000Z",
  lastTick: "2026-12-01T08:00:00.000Z",
  ...overrides,
});

export function schedulesContract({ open }: Contract): void {
  it("saves, lists by place, replaces, pauses and deletes schedules", async () => {
    const store = await open();
    await store.saveSchedule(scheduleOf("sch_1", "slack:T1:C1:main"));
    await store.saveSchedule(scheduleOf("sch_2", "slack:T1:C12:main", { createdAt: "2026-12-02T08:00:00.000Z" }));
    await store.saveSchedule(scheduleOf("sch_3", "discord:G1:C9", { createdAt: "2026-12-03T08:00:00.000Z" }));
    expect((await store.schedules()).map((schedule) => schedule.id)).toEqual(["sch_1", "sch_2", "sch_3"]);
    expect(await store.schedules("slack:T1:C1:")).toEqual([scheduleOf("sch_1", "slack:T1:C1:main")]);
    expect((await store.schedules("slack:")).map((schedule) => schedule.id)).toEqual(["sch_1", "sch_2"]);

    // Replaced by id: what it says changes; a last tick older than the stored one does not move it back.
    await store.saveSchedule(
      scheduleOf("sch_1", "slack:T1:C1:main", { prompt: "Say good morning.", lastTick: "2026-11-01T08:00:00.000Z" }),
    );
    expect((await store.schedules("slack:T1:C1:"))[0]).toMatchObject({
      prompt: "Say good morning.",
      lastTick: "2026-12-01T08:00:00.000Z",
    });
    expect(await store.pauseSchedule("sch_1", true)).toBe(true);
    expect((await store.schedules("slack:T1:C1:"))[0]?.paused).toBe(true);
    expect(await store.pauseSchedule("sch_none", true)).toBe(false);
    expect(await store.deleteSchedule("sch_2")).toBe(true);
    expect(await store.deleteSchedule("sch_2")).toBe(false);
    expect((await store.schedules()).map((schedule) => schedule.id)).toEqual(["sch_1", "sch_3"]);
  });

  it("keeps a schedule's name, and the schedule a run was accepted for (with and without its message)", async () => {
    const store = await open();
    await store.saveSchedule(scheduleOf("cfg_named", "slack:T1:C5:main", { name: "digest", source: "settings" }));
    expect((await store.schedules("slack:T1:C5:"))[0]).toEqual(
      scheduleOf("cfg_named", "slack:T1:C5:main", { name: "digest", source: "settings" }),
    );
    const message = { message: { role: "user" as const, content: "Summarise." }, tokens: 3 };
    await store.acceptEvent({
      eventIds: ["schedule:cfg_named:2026-12-02T08:00:00.000Z"],
      run: { ...runRecord("run_ticked", "slack:T1:C5:main"), scheduleId: "cfg_named" },
      message,
    });
    await store.acceptEvent({
      eventIds: [],
      run: { ...runRecord("run_ticked_bare", "slack:T1:C5:main"), scheduleId: "cfg_named" },
    });
    await store.acceptEvent({
      eventIds: ["slack:message:C5:1.1"],
      run: runRecord("run_asked", "slack:T1:C5:main"),
      message,
    });
    expect((await store.run("run_ticked"))?.scheduleId).toBe("cfg_named");
    expect((await store.run("run_ticked_bare"))?.scheduleId).toBe("cfg_named");
    expect((await store.run("run_asked"))?.scheduleId).toBeNull();
  });

  it("advances a tick once across handles, and never backwards", async () => {
    const [first, second] = [await open(), await open()];
    await first.saveSchedule(scheduleOf("sch_t", "web:sched"));
    const tick = "2026-12-02T08:00:00.000Z";
    const outcomes = await Promise.all([first.advanceSchedule("sch_t", tick), second.advanceSchedule("sch_t", tick)]);
    expect(outcomes.filter(Boolean)).toHaveLength(1);
    expect(await first.advanceSchedule("sch_t", "2026-12-01T09:00:00.000Z")).toBe(false);
    expect((await second.schedules())[0]?.lastTick).toBe(tick);
    expect(await first.advanceSchedule("sch_gone", tick)).toBe(false);
  });

  it("an erasure of the person, the conversation, the channel or the workspace takes its schedules", async () => {
    const store = await open();
    await store.saveSchedule(scheduleOf("sch_u", "slack:T1:C1:main", { userId: "U7" }));
    await store.saveSchedule(scheduleOf("sch_c", "slack:T1:C2:main", { userId: "U8" }));
    await store.saveSchedule(scheduleOf("sch_s", "web:daily", { userId: "web:ann" }));
    await store.saveSchedule(scheduleOf("sch_w", "slack:T2:C3:main", { userId: "U8" }));
    await store.saveSchedule(scheduleOf("sch_kept", "slack:T1:C22:main", { userId: "U8" }));
    const ids = async () => (await store.schedules()).map((schedule) => schedule.id);
    expect((await store.erase({ kind: "user", id: "U7" }, "test")).removed.schedules).toBe(1);
    expect((await store.erase({ kind: "segment", id: "C2" }, "test")).removed.schedules).toBe(1);
    expect((await store.erase({ kind: "session", id: "web:daily" }, "test")).removed.schedules).toBe(1);
    expect((await store.erase({ kind: "workspace", id: "T2" }, "test")).removed.schedules).toBe(1);
    expect(await ids()).toEqual(["sch_kept"]);
  });
}
