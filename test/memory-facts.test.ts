// Long-term facts end to end: the model calls remember / forget (the real tools over the real store),
// and later runs find the relevant facts (FTS5, bm25) in their system message — per user, per channel.
import { describe, expect, it } from "vitest";
import { runAgent, type AgentConfig, type RunResult } from "../src/agent/loop.js";
import { createMemoryTools } from "../src/agent/memory-tools.js";
import { createSqliteMemory } from "../src/agent/memory.js";
import type { Store } from "../src/agent/store.js";
import { createTokenCounter } from "../src/agent/tokens.js";
import type { ScriptedReply, ScriptedModelServer } from "../src/testing/scripted-model-server.js";
import { createToolRegistry } from "../src/tools/registry.js";
import { call, startServer, textOf } from "./agent-helpers.js";
import { cleanUpAfterEach, openTestStore, systemTextOf, testModel } from "./memory-helpers.js";

const counter = await createTokenCounter("o200k_base");
cleanUpAfterEach();

async function setUp(budgetTokens = 12_000) {
  const server = await startServer();
  const store = openTestStore();
  const model = testModel(server);
  const memory = createSqliteMemory({ store, model, counter, budgetTokens });
  const agent: AgentConfig = { model, tools: createToolRegistry(createMemoryTools(store)), memory };
  /** One run whose model replies are `replies`; returns the result and the system text of its first request. */
  async function run(input: string, sessionId: string, userId: string, replies: ScriptedReply[] = [{ content: "OK." }]) {
    const before = server.requests.length;
    server.setScript(replies);
    const result: RunResult = await runAgent(agent, { input, sessionId, userId });
    const first = server.requests[before];
    if (!first) throw new Error("the run sent no request");
    return { result, system: systemTextOf(first.body), requests: server.requests.slice(before) };
  }
  return { server, store, run };
}

const factsOf = (store: Store) => store.db.prepare("SELECT id, user_id AS userId, scope, content FROM facts ORDER BY id").all() as Array<{ id: number; userId: string; scope: string; content: string }>;
const lastToolResult = (server: ScriptedModelServer) => JSON.parse(textOf(server.requests.at(-1)?.body.messages.findLast((message) => message.role === "tool")) || "null");

describe("remember and forget", () => {
  it("remembers a fact for the user, shows it with its id in a later session, and forgets it on request", async () => {
    const { server, store, run } = await setUp();
    const remembered = await run("Please remember that I prefer green tea without sugar.", "web:first", "U1", [
      { toolCalls: [call("remember", { fact: "  Prefers green tea without sugar.  " })] },
      { content: "Noted." },
    ]);
    expect(remembered.result.stopReason).toBe("final");
    const [fact] = factsOf(store);
    expect(factsOf(store)).toEqual([{ id: expect.any(Number), userId: "U1", scope: "user", content: "Prefers green tea without sugar." }]);
    expect(lastToolResult(server)).toEqual({ status: "success", data: { factId: fact?.id, fact: "Prefers green tea without sugar.", scope: "user" } });
    // The run that stored it did not see it yet in its system message; facts are found before a run.
    expect(remembered.system).not.toContain("green tea");

    const later = await run("Which tea should I order for the meeting?", "slack:T1:C9:555.1", "U1");
    expect(later.system).toContain(`(fact ${fact?.id}) Prefers green tea without sugar.`);
    expect(later.system).toMatch(/use forget with the fact id/);

    const other = await run("Which tea should I order for the meeting?", "web:other", "U2");
    expect(other.system).not.toContain("green tea");

    // Another user cannot forget it; the model is told so, in an error envelope it can act on.
    await run("Forget fact please.", "web:other", "U2", [{ toolCalls: [call("forget", { fact_id: fact?.id })] }, { content: "I could not." }]);
    expect(lastToolResult(server)).toMatchObject({ status: "error", error: { type: "execution_error", message: `There is no fact ${fact?.id} of this user to forget.` } });
    expect(factsOf(store)).toHaveLength(1);

    const forgot = await run("Forget my tea preference.", "web:third", "U1", [{ toolCalls: [call("forget", { fact_id: fact?.id })] }, { content: "Forgotten." }]);
    expect(forgot.system).toContain(`(fact ${fact?.id})`);
    expect(lastToolResult(server)).toEqual({ status: "success", data: { forgotten: fact?.id } });
    expect(factsOf(store)).toEqual([]);

    const after = await run("Which tea should I order for the meeting?", "web:fourth", "U1");
    expect(after.system).not.toContain("green tea");
    expect(after.system).not.toContain("What you remember");
  });

  it("finds only the facts whose words the request shares, the most relevant first", async () => {
    const { store, run } = await setUp();
    const parking = store.addFact("U1", "user", "Parks in spot 42 of the north garage.");
    const tea = store.addFact("U1", "user", "Prefers green tea; oolong tea when green tea is out.");
    const coffee = store.addFact("U1", "user", "Drinks tea only in the afternoon.");
    const { system } = await run("Should I bring tea? Green or black tea?", "web:s", "U1");
    expect(system).toContain(`(fact ${tea})`);
    expect(system).toContain(`(fact ${coffee})`);
    expect(system.indexOf(`(fact ${tea})`)).toBeLessThan(system.indexOf(`(fact ${coffee})`));
    expect(system).not.toContain(`(fact ${parking})`);
  });

  it("shares a channel fact with everyone in the channel's threads, and nowhere else", async () => {
    const { store, run } = await setUp();
    await run("Remember for everyone here: the release train leaves on Thursdays.", "slack:T1:C1:100.1", "U1", [
      { toolCalls: [call("remember", { fact: "The release train leaves on Thursdays.", shared_with_channel: true })] },
      { content: "Shared with the channel." },
    ]);
    expect(factsOf(store)).toEqual([{ id: expect.any(Number), userId: "U1", scope: "slack:T1:C1", content: "The release train leaves on Thursdays." }]);

    const sameThreadOtherUser = await run("When does the release train leave?", "slack:T1:C1:200.2", "U2");
    expect(sameThreadOtherUser.system).toContain("The release train leaves on Thursdays.");
    const otherChannel = await run("When does the release train leave?", "slack:T1:C2:300.3", "U1");
    expect(otherChannel.system).not.toContain("release train");
    const dm = await run("When does the release train leave?", "discord:dm:U1", "U1");
    expect(dm.system).not.toContain("release train");
  });

  it("injects facts within a tenth of the budget and at most factLimit of them", async () => {
    const { store, run } = await setUp(1_500);
    const ids = Array.from({ length: 6 }, (_, index) =>
      store.addFact("U1", "user", `Invoice rule ${index}: invoices for customer group ${index} go to the finance mailbox after approval by the team lead, never before the end of the month.`),
    );
    const { system } = await run("Where do invoices go?", "web:s", "U1");
    const shown = ids.filter((id) => system.includes(`(fact ${id})`));
    expect(shown.length).toBeGreaterThan(0);
    const factLines = system.split("\n").filter((line) => line.startsWith("- (fact "));
    expect(factLines).toHaveLength(shown.length);
    expect(counter.text(factLines.join("\n"))).toBeLessThanOrEqual(150);
    expect(shown.length).toBeLessThan(6);

    // factLimit bounds the count when the budget would allow more.
    const server = await startServer({ script: [{ content: "OK." }] });
    const limited = createSqliteMemory({ store, model: testModel(server), counter, budgetTokens: 50_000, factLimit: 2 });
    await runAgent({ model: testModel(server), tools: createToolRegistry([]), memory: limited }, { input: "Where do invoices go?", sessionId: "web:t", userId: "U1" });
    expect(systemTextOf(server.requests[0]?.body ?? { model: "", messages: [] }).split("\n").filter((line) => line.startsWith("- (fact "))).toHaveLength(2);
  });

  it("treats FTS syntax in a request as plain words", async () => {
    const { store, run } = await setUp();
    const id = store.addFact("U1", "user", "The vault key rotates monthly.");
    const { result, system } = await run('vault AND OR "NEAR( key* -x ^y col:z', "web:s", "U1");
    expect(result.stopReason).toBe("final");
    expect(system).toContain(`(fact ${id})`);
  });
});
