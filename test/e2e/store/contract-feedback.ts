// The store contract, feedback: 👍 / 👎 per run and person (the latest click is their answer), a
// reason only on a 👎, the runs rated down or up, and the counts.
import { expect, it } from "vitest";
import { pause, runRecord, type Contract } from "../helpers/store-targets.js";

export function feedbackContract({ open }: Contract): void {
  it("records one rating per person and run, the latest replacing the earlier, and refuses an unknown run", async () => {
    const store = await open();
    await store.record([{ kind: "start_run", run: runRecord("run_f1", "web:f") }]);
    expect(
      await store.recordFeedback({
        runId: "run_f1",
        userId: "web:ann",
        rating: "down",
        reason: "  wrong order  ",
        source: "web",
      }),
    ).toBe("recorded");
    await pause(5);
    expect(await store.recordFeedback({ runId: "run_f1", userId: "web:bob", rating: "up", source: "web" })).toBe(
      "recorded",
    );
    expect((await store.feedbackOf("run_f1")).map(({ userId, rating, reason }) => [userId, rating, reason])).toEqual([
      ["web:ann", "down", "wrong order"],
      ["web:bob", "up", null],
    ]);
    // Ann changes her mind: her 👍 replaces her 👎, and its reason goes.
    await pause(5);
    await store.recordFeedback({ runId: "run_f1", userId: "web:ann", rating: "up", source: "web" });
    expect((await store.feedbackOf("run_f1")).map(({ userId, rating, reason }) => [userId, rating, reason])).toEqual([
      ["web:bob", "up", null],
      ["web:ann", "up", null],
    ]);
    expect(await store.recordFeedback({ runId: "run_nope", userId: "web:ann", rating: "up", source: "web" })).toBe(
      "unknown_run",
    );
    expect(await store.feedbackOf("run_nope")).toEqual([]);
  });

  it("adds a reason only to a 👎, cut to 1,000 characters", async () => {
    const store = await open();
    await store.record([{ kind: "start_run", run: runRecord("run_f2", "web:f") }]);
    await store.recordFeedback({ runId: "run_f2", userId: "web:ann", rating: "up", source: "web" });
    expect(await store.explainFeedback("run_f2", "web:ann", "it was fine")).toBe(false);
    await store.recordFeedback({ runId: "run_f2", userId: "web:ann", rating: "down", source: "web" });
    expect(await store.explainFeedback("run_f2", "web:ann", "x".repeat(1_500))).toBe(true);
    expect((await store.feedbackOf("run_f2"))[0]?.reason).toHaveLength(1_000);
  });

  it("lists the runs rated down (anyone's 👎) and up (only 👍), newest rating first, and counts them", async () => {
    const store = await open();
    for (const runId of ["run_a", "run_b", "run_c"])
      await store.record([{ kind: "start_run", run: runRecord(runId, "web:f") }]);
    const before = new Date().toISOString();
    await pause(5);
    await store.recordFeedback({ runId: "run_a", userId: "web:ann", rating: "up", source: "web" });
    await pause(5);
    await store.recordFeedback({ runId: "run_b", userId: "web:ann", rating: "up", source: "web" });
    await store.recordFeedback({ runId: "run_b", userId: "web:bob", rating: "down", source: "slack" });
    await pause(5);
    await store.recordFeedback({ runId: "run_c", userId: "web:ann", rating: "down", source: "discord" });
    expect(await store.ratedRuns("down", 10)).toEqual(["run_c", "run_b"]);
    expect(await store.ratedRuns("up", 10)).toEqual(["run_a"]);
    expect(await store.ratedRuns("all", 2)).toEqual(["run_c", "run_b"]);
    expect(await store.feedbackCounts()).toEqual({ up: 2, down: 2 });
    expect(await store.feedbackCounts(before)).toEqual({ up: 2, down: 2 });
    expect(await store.feedbackCounts(new Date(Date.now() + 60_000).toISOString())).toEqual({ up: 0, down: 0 });
  });

  it("finds the sessions with a run rated down, or up (the trace viewer's ?rated=)", async () => {
    const store = await open();
    for (const [runId, sessionId] of [
      ["run_liked", "web:liked"],
      ["run_mixed", "web:mixed"],
      ["run_unrated", "web:unrated"],
    ] as const) {
      await store.record([{ kind: "start_run", run: runRecord(runId, sessionId) }]);
      await store.appendMessages(sessionId, runId, [{ message: { role: "user", content: "hi" }, tokens: 1 }]);
    }
    await store.recordFeedback({ runId: "run_liked", userId: "web:ann", rating: "up", source: "web" });
    await store.recordFeedback({ runId: "run_mixed", userId: "web:ann", rating: "up", source: "web" });
    await store.recordFeedback({ runId: "run_mixed", userId: "web:bob", rating: "down", source: "web" });
    const ids = async (rated: "up" | "down") =>
      (await store.searchSessions({ limit: 50, rated })).sessions.map((session) => session.id).sort();
    expect(await ids("down")).toEqual(["web:mixed"]);
    expect(await ids("up")).toEqual(["web:liked", "web:mixed"]);
  });
}
