// The store contract, gates: event claims (exactly once across handles), quota reservations (the
// rule of the in-process guard, and never past a cap when reserved at once), cancel requests.
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";
import type { StorePortOptions } from "../../../src/store/index.js";
import { outcomeOf, pause, runRecord, type Contract } from "../helpers/store-targets.js";

const CHILD = fileURLToPath(new URL("../fixtures/store-child.ts", import.meta.url));

/** A process of its own that reserves room for a user's call and keeps it in flight, never settled, until it is killed. */
async function reservingProcess(
  options: StorePortOptions,
  userId: string,
  tokens: number,
  cap: number,
  holdSeconds: number,
): Promise<{ kill(): Promise<void> }> {
  const child = spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      CHILD,
      JSON.stringify(options),
      "reserve-quota",
      userId,
      String(tokens),
      String(cap),
      String(holdSeconds),
    ],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let text = "";
  const said = (line: string) =>
    new Promise<void>((resolve, reject) => {
      const check = () => (text.includes(line) ? resolve() : undefined);
      child.stdout.on("data", (chunk: Buffer) => {
        text += chunk.toString();
        check();
      });
      void exited.then(() => reject(new Error(`the reserving process ended saying: ${text.trim()}`)));
      check();
    });
  await said("ready\n");
  child.stdin.write("go\n");
  await said("reserved\n");
  return {
    async kill() {
      child.kill("SIGKILL");
      await exited;
    },
  };
}

export function gatesContract({ open, database }: Contract): void {
  it("claim() is true once and false ever after, also from another handle; several ids are claimed together", async () => {
    const [first, second] = [await open(), await open()];
    expect(await first.claim("Ev123")).toBe(true);
    expect(await first.claim("Ev123")).toBe(false);
    expect(await second.claim("Ev123")).toBe(false);
    expect(await second.claim("Ev456")).toBe(true);
    expect(await first.claim("slack:event:Ev1", "slack:message:C1:1.000001")).toBe(true);
    expect(await first.claim("slack:event:Ev2", "slack:message:C1:1.000001")).toBe(false);
    expect(await second.claim("slack:event:Ev2")).toBe(false); // claimed by the refused call too
  });

  it("of two handles claiming one event at once, exactly one gets it (30 events)", async () => {
    const [first, second] = [await open(), await open()];
    const pairs = await Promise.all(
      Array.from({ length: 30 }, (_, index) => Promise.all([first.claim(`Ev${index}`), second.claim(`Ev${index}`)])),
    );
    for (const pair of pairs) expect(pair.filter(Boolean)).toHaveLength(1);
  });

  it("pruneClaims() forgets only the claims older than the moment given", async () => {
    const store = await open();
    await store.claim("old");
    await pause(5);
    const moment = new Date();
    await pause(5);
    await store.claim("new");
    expect(await store.pruneClaims(moment)).toBe(1);
    expect(await store.claim("new")).toBe(false);
    expect(await store.claim("old")).toBe(true);
  });

  it("reserves quota by the guard's rule: room that fits, or the only call in flight; wait while others are; refused once spending reaches a cap", async () => {
    const store = await open();
    const limits = { tokens: 1_000 };
    const reserve = (tokens: number, userId = "U1", now?: Date) =>
      store.reserveQuota({ userId, tokens, cost: 0, limits, ...(now ? { now } : {}) });
    const first = await reserve(600);
    expect(first).toEqual({ kind: "reserved", reservationId: expect.any(String) });
    expect(await reserve(600)).toEqual({ kind: "wait" });
    expect(await reserve(600, "U2")).toMatchObject({ kind: "reserved" }); // another user's day is their own
    if (first.kind !== "reserved") return;
    await store.settleQuota(first.reservationId, { tokens: 700, cost: null });
    await store.settleQuota(first.reservationId, { tokens: 700, cost: null }); // settled once
    const alone = await reserve(600); // 700 spent: it does not fit, but it is the only call in flight
    expect(alone).toMatchObject({ kind: "reserved" });
    if (alone.kind === "reserved") await store.settleQuota(alone.reservationId, { tokens: 400, cost: null });
    expect(await reserve(1)).toEqual({ kind: "at_cap", cap: "tokens", spentTokens: 1_100, spentCost: null });

    // A reservation never settled (its process was killed) stops holding room when its hold ends.
    const held = await store.reserveQuota({ userId: "U3", tokens: 900, cost: 0, limits, holdSeconds: 1 });
    expect(held).toMatchObject({ kind: "reserved" });
    expect(await reserve(200, "U3")).toEqual({ kind: "wait" });
    expect(await reserve(200, "U3", new Date(Date.now() + 2_000))).toMatchObject({ kind: "reserved" });
  });

  it("grows a reservation of a call streaming past it when that fits beside the user's other calls in flight, or when none is; refuses otherwise; the growth is seen on another handle", async () => {
    const [store, other] = [await open(), await open()];
    const limits = { tokens: 1_000 };
    const reserve = (tokens: number, on = store) => on.reserveQuota({ userId: "U1", tokens, cost: 0, limits });
    const grow = (reservationId: string, tokens: number) => store.growQuota({ reservationId, tokens, cost: 0, limits });
    const first = await reserve(300);
    const second = await reserve(300);
    if (first.kind !== "reserved" || second.kind !== "reserved") throw new Error("both fit under the cap");
    expect(await grow(first.reservationId, 700)).toEqual({ kind: "grown" }); // 700 + 300: exactly the cap
    expect(await reserve(1, other)).toEqual({ kind: "wait" }); // the other handle sees the room taken
    expect(await grow(first.reservationId, 701)).toEqual({ kind: "at_cap", cap: "tokens" }); // beside the second: no
    await store.settleQuota(second.reservationId, { tokens: 250, cost: null });
    // Alone now: the one call that may pass the cap.
    expect(await grow(first.reservationId, 5_000)).toEqual({ kind: "grown" });
    expect(await reserve(1, other)).toEqual({ kind: "wait" });
    await store.settleQuota(first.reservationId, { tokens: 4_800, cost: null });
    expect(await grow(first.reservationId, 9_000)).toEqual({ kind: "grown" }); // settled: nothing left to hold
    expect(await reserve(1, other)).toEqual({ kind: "at_cap", cap: "tokens", spentTokens: 5_050, spentCost: null });

    // The cost cap the same way.
    const priced = { cost: 0.1 };
    const costly = await store.reserveQuota({ userId: "U2", tokens: 10, cost: 0.04, limits: priced });
    const beside = await store.reserveQuota({ userId: "U2", tokens: 10, cost: 0.04, limits: priced });
    if (costly.kind !== "reserved" || beside.kind !== "reserved") throw new Error("both fit under the cap");
    const growCost = (cost: number) =>
      store.growQuota({ reservationId: costly.reservationId, tokens: 10, cost, limits: priced });
    expect(await growCost(0.05)).toEqual({ kind: "grown" });
    expect(await growCost(0.07)).toEqual({ kind: "at_cap", cap: "cost" });
    await store.settleQuota(beside.reservationId);
    expect(await growCost(0.5)).toEqual({ kind: "grown" });
  });

  it("a reservation of another process holds room while that process lives and its hold lasts; once the process is gone (SIGKILL), none", async () => {
    const store = await open();
    const limits = { tokens: 1_000 };
    const reserve = (now?: Date, tokens = 200) =>
      store.reserveQuota({ userId: "U7", tokens, cost: 0, limits, ...(now ? { now } : {}) });
    const other = await reservingProcess(database().options, "U7", 900, limits.tokens, 60);
    try {
      expect(await reserve()).toEqual({ kind: "wait" }); // its call may still answer and settle
      const afterHold = await reserve(new Date(Date.now() + 61_000));
      expect(afterHold).toMatchObject({ kind: "reserved" }); // alive, but its hold has ended
      if (afterHold.kind === "reserved") await store.settleQuota(afterHold.reservationId);
      expect(await reserve()).toEqual({ kind: "wait" });
    } finally {
      await other.kill();
    }
    // Killed mid-call: it will never settle, so its 900 tokens are not held; two calls of 500 fit.
    expect(await reserve(undefined, 500)).toMatchObject({ kind: "reserved" });
    expect(await reserve(undefined, 500)).toMatchObject({ kind: "reserved" });
    expect(await reserve(undefined, 1)).toEqual({ kind: "wait" }); // this live process's two hold the rest
  });

  it("starts a user's day from what the stored runs spent today, and judges the cost cap in dollars (unknown once a call had no price)", async () => {
    const store = await open();
    await store.record([
      { kind: "start_run", run: runRecord("run_spent", "web:q", "U1") },
      {
        kind: "step",
        step: {
          runId: "run_spent",
          step: 1,
          model: "gpt-4o-mini",
          contextMessages: 1,
          contextTokens: 1,
          content: "ok",
          reasoning: null,
          reasoningCutChars: 0,
          modelNotes: [],
          requestedCalls: [],
          promptTokens: 800,
          completionTokens: 100,
          latencyMs: 1,
          cost: 0.05,
          request: [],
          at: new Date().toISOString(),
        },
      },
      { kind: "end_run", outcome: outcomeOf("run_spent", { promptTokens: 800, completionTokens: 100 }) },
      { kind: "price_run", runId: "run_spent" },
    ]);
    expect(await store.reserveQuota({ userId: "U1", tokens: 50, cost: 0, limits: { tokens: 900 } })).toEqual({
      kind: "at_cap",
      cap: "tokens",
      spentTokens: 900,
      spentCost: 0.05,
    });
    const costly = await store.reserveQuota({ userId: "U4", tokens: 10, cost: 0.08, limits: { cost: 0.1 } });
    expect(await store.reserveQuota({ userId: "U4", tokens: 10, cost: 0.08, limits: { cost: 0.1 } })).toEqual({
      kind: "wait",
    });
    if (costly.kind === "reserved") await store.settleQuota(costly.reservationId, { tokens: 10, cost: 0.1 });
    expect(await store.reserveQuota({ userId: "U4", tokens: 10, cost: 0.08, limits: { cost: 0.1 } })).toMatchObject({
      kind: "at_cap",
      cap: "cost",
      spentCost: 0.1,
    });
    const unpriced = await store.reserveQuota({ userId: "U5", tokens: 10, cost: 0, limits: { cost: 0.1 } });
    if (unpriced.kind === "reserved") await store.settleQuota(unpriced.reservationId, { tokens: 10, cost: null });
    expect(await store.reserveQuota({ userId: "U5", tokens: 10, cost: 5, limits: { cost: 0.1 } })).toMatchObject({
      kind: "reserved",
    });
  });

  it("of 40 reservations made at once through two handles, the reserved ones never exceed the cap", async () => {
    const [first, second] = [await open(), await open()];
    const outcomes = await Promise.all(
      Array.from({ length: 40 }, (_, index) =>
        (index % 2 ? first : second).reserveQuota({ userId: "U1", tokens: 100, cost: 0, limits: { tokens: 1_000 } }),
      ),
    );
    expect(outcomes.filter((outcome) => outcome.kind === "reserved")).toHaveLength(10);
    expect(outcomes.filter((outcome) => outcome.kind === "wait")).toHaveLength(30);
  });

  it("a cancel request reaches the session's running and accepted runs (or one of them), is heard on another handle, and is kept to be checked", async () => {
    const [store, other] = [await open(), await open()];
    await store.record([
      { kind: "start_run", run: runRecord("run_running", "slack:T1:C1:1.1") },
      { kind: "start_run", run: runRecord("run_elsewhere", "slack:T1:C1:2.2") },
    ]);
    await store.acceptEvent({ eventIds: [], run: runRecord("run_waiting", "slack:T1:C1:1.1") });
    await store.record([
      { kind: "start_run", run: runRecord("run_done", "slack:T1:C1:1.1") },
      { kind: "end_run", outcome: outcomeOf("run_done") },
    ]);
    const heard: unknown[] = [];
    const stop = await other.watchCancels((notice) => heard.push(notice));

    expect((await store.requestCancel({ sessionId: "slack:T1:C1:1.1" })).sort()).toEqual([
      "run_running",
      "run_waiting",
    ]);
    await expect.poll(() => heard, { timeout: 5_000 }).toHaveLength(1);
    expect(heard[0]).toEqual({
      sessionId: "slack:T1:C1:1.1",
      runIds: expect.arrayContaining(["run_running", "run_waiting"]),
    });
    expect(await other.cancelRequested("run_running")).toBe(true);
    expect(await other.cancelRequested("run_waiting")).toBe(true);
    expect(await other.cancelRequested("run_done")).toBe(false);
    expect(await other.cancelRequested("run_elsewhere")).toBe(false);

    expect(await store.requestCancel({ sessionId: "slack:T1:C1:2.2", runId: "run_other" })).toEqual([]);
    expect(await store.requestCancel({ sessionId: "slack:T1:C1:2.2", runId: "run_elsewhere" })).toEqual([
      "run_elsewhere",
    ]);
    expect(await store.requestCancel({ sessionId: "cli:idle" })).toEqual([]); // nothing was running
    await expect.poll(() => heard.length, { timeout: 5_000 }).toBe(2); // a request that reached no run is not announced
    expect(heard[1]).toEqual({ sessionId: "slack:T1:C1:2.2", runIds: ["run_elsewhere"] });
    expect(await other.cancelRequested("run_elsewhere")).toBe(true); // asked about before, named in a notice since
    await stop();
    await store.requestCancel({ sessionId: "slack:T1:C1:1.1" });
    await pause(200);
    expect(heard).toHaveLength(2); // stopped watching
    expect(await store.pruneCancelRequests(new Date(Date.now() + 1_000))).toBe(5);
    expect(await other.cancelRequested("run_running")).toBe(false);
  });

  it("a stop asked while a run waited is found by the checks after its start; one asked after its start is found once its notice came", async () => {
    const [store, other] = [await open(), await open()];
    const stop = await store.watchCancels(() => {});
    const heard: unknown[] = [];
    const stopOther = await other.watchCancels((notice) => heard.push(notice));
    await store.acceptEvent({ eventIds: [], run: runRecord("run_stopped_waiting", "slack:T1:C3:1.1") });
    await store.acceptEvent({ eventIds: [], run: runRecord("run_stopped_later", "slack:T1:C3:2.2") });
    expect(await other.requestCancel({ sessionId: "slack:T1:C3:1.1" })).toEqual(["run_stopped_waiting"]);

    for (const runId of ["run_stopped_waiting", "run_stopped_later"])
      expect((await store.record([{ kind: "start_run", run: runRecord(runId, "slack:T1:C3:0") }])).startedRuns).toEqual(
        [runId],
      );
    expect(await store.cancelRequested("run_stopped_waiting")).toBe(true);
    expect(await store.cancelRequested("run_stopped_later")).toBe(false);

    expect(await other.requestCancel({ sessionId: "slack:T1:C3:2.2" })).toEqual(["run_stopped_later"]);
    await expect.poll(() => heard, { timeout: 5_000 }).toHaveLength(2);
    await expect.poll(() => store.cancelRequested("run_stopped_later"), { timeout: 5_000 }).toBe(true);
    await Promise.all([stop(), stopOther()]);
  });

  it("answer text published is heard, in order, by the watchers on other handles, cancel watchers apart, and by none once they stop; none of it is stored", async () => {
    const [store, other] = [await open(), await open()];
    const heard: unknown[] = [];
    const cancels: unknown[] = [];
    const stop = await other.watchText((notice) => heard.push(notice));
    const stopCancels = await other.watchCancels((notice) => cancels.push(notice));
    const pieces = ["It ", "is ", "42 — “quoted”, 👋🏽.\n"];
    for (const text of pieces) await store.publishText({ sessionId: "web:s1", runId: "run_1", step: 2, text });
    await expect.poll(() => heard.length, { timeout: 5_000 }).toBe(3);
    expect(heard).toEqual(pieces.map((text) => ({ sessionId: "web:s1", runId: "run_1", step: 2, text })));
    expect(cancels).toEqual([]);
    await stop();
    await store.publishText({ sessionId: "web:s1", runId: "run_1", step: 2, text: "unheard" });
    await pause(200);
    expect(heard).toHaveLength(3);
    await stopCancels();
    expect(await other.run("run_1")).toBeUndefined();
  });

  it("a worker's offer (its tools' names, requests to suggest) is read on another handle while its process lives; a new offer replaces it", async () => {
    const [store, other] = [await open(), await open()];
    expect(await other.toolsOffered()).toEqual({ tools: [], hints: [] });
    await store.offerTools({ tools: ["search_orders", "calculator"], hints: ["What is 17% of 240?"] });
    expect(await other.toolsOffered()).toEqual({
      tools: ["calculator", "search_orders"],
      hints: ["What is 17% of 240?"],
    });
    await store.offerTools({ tools: ["calculator"], hints: [] });
    expect(await other.toolsOffered()).toEqual({ tools: ["calculator"], hints: [] });
  });
}
