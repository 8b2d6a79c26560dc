// Budgets read from a real SQLite store: dollar budgets count the priced steps of the place or the
// person (a step without a price counts nothing), and the standings list every budget someone spent
// against this month, one reading per channel however many threads, or only those that concern a person.
import { describe, expect, it } from "vitest";
import { budgetStandings, readBudgets, usedUp } from "../../../src/conversations/channel-budget.js";
import type { ChannelSettings } from "../../../src/conversations/channel-settings.js";
import { openSqlitePort } from "../../../src/store/sqlite.js";
import { runRecord, stepOf } from "../../e2e/helpers/store-targets.js";

const settings: ChannelSettings = {
  source: { path: "channels.yaml", version: "0123456789ab" },
  defaults: { budget: { user: { daily: { cost: 2 } } } },
  workspaces: {},
  schedules: [],
  channels: { C1: { budget: { channel: { monthly: { cost: 5, tokens: 100_000 } } } } },
};

async function storeWithSpending() {
  const store = openSqlitePort(":memory:");
  const spend = async (runId: string, sessionId: string, userId: string, cost: number | null) =>
    store.record([
      { kind: "start_run", run: runRecord(runId, sessionId, userId) },
      { kind: "step", step: stepOf(runId, 1, { promptTokens: 1000, completionTokens: 100, cost }) },
    ]);
  await spend("run_1", "slack:T1:C1:1.1", "U1", 1.5);
  await spend("run_2", "slack:T1:C1:2.2", "U2", 3);
  await spend("run_3", "slack:T1:C2:3.3", "U1", 1);
  await spend("run_4", "slack:T1:C1:4.4", "U1", null);
  return store;
}

describe("channel budgets over the store", () => {
  it("reads dollar budgets from the priced steps, and finds the one used up", async () => {
    const store = await storeWithSpending();
    const readings = await readBudgets(store, settings.channels.C1?.budget ?? {}, "slack:T1:C1:9.9", "U1");
    expect(
      readings.map(({ scope, period, unit, of, used, limit }) => ({ scope, period, unit, of, used, limit })),
    ).toEqual([
      { scope: "channel", period: "monthly", unit: "tokens", of: "slack:T1:C1", used: 3300, limit: 100_000 },
      { scope: "channel", period: "monthly", unit: "cost", of: "slack:T1:C1", used: 4.5, limit: 5 },
    ]);
    expect(usedUp(readings)).toBeUndefined();
    const mine = await readBudgets(store, { user: { daily: { cost: 2 } } }, "slack:T1:C1:9.9", "U1");
    expect(usedUp(mine)).toMatchObject({ scope: "user", of: "U1", used: 2.5, limit: 2 });
    await store.close();
  });

  it("lists each budget spent against once; a person sees theirs and their places'", async () => {
    const store = await storeWithSpending();
    const all = await budgetStandings(store, settings);
    expect(all.map(({ scope, unit, of, used }) => [scope, unit, of, used])).toEqual([
      ["channel", "cost", "slack:T1:C1", 4.5],
      ["channel", "tokens", "slack:T1:C1", 3300],
      ["user", "cost", "U1", 2.5],
      ["user", "cost", "U2", 3],
    ]);
    const u2 = await budgetStandings(store, settings, "U2");
    expect(u2.map(({ scope, of }) => [scope, of])).toEqual([
      ["channel", "slack:T1:C1"],
      ["channel", "slack:T1:C1"],
      ["user", "U2"],
    ]);
    expect(await budgetStandings(store, settings, "U9")).toEqual([]);
    await store.close();
  });
});
