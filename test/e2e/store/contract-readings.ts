// The store contract, what the trace viewer and selection read: the session list with its search
// and filters, where memory folded a session, and past runs as tool-usage examples.
import { expect, it } from "vitest";
import type { AnyStorePort, ToolCallRecord } from "../../../src/store/index.js";
import { outcomeOf, pause, runRecord, stepOf, type Contract } from "../helpers/store-targets.js";

const called = (name: string): ToolCallRecord => ({
  id: `call_${name}`,
  name,
  rawArguments: "{}",
  repairs: [],
  envelope: { status: "success", data: null },
  content: "{}",
  truncatedChars: 0,
  durationMs: 1,
  dangerous: false,
});
const said = (role: "user" | "assistant", content: string) => ({ message: { role, content }, tokens: 3 });

async function sessionsToSearch(store: AnyStorePort) {
  await store.record([
    { kind: "start_run", run: runRecord("run_alpha", "web:alpha", "U1", "Where is my parcel?") },
    {
      kind: "messages",
      sessionId: "web:alpha",
      runId: "run_alpha",
      entries: [said("user", "Where is my parcel?"), said("assistant", "On its way to BERLIN.")],
    },
    { kind: "step", step: stepOf("run_alpha", 1, { cost: 0.002 }) },
    { kind: "tool_calls", runId: "run_alpha", step: 1, records: [called("get_order_status")] },
    { kind: "end_run", outcome: outcomeOf("run_alpha", { promptTokens: 100, completionTokens: 10 }) },
    { kind: "price_run", runId: "run_alpha" },
  ]);
  await pause(3);
  await store.record([
    { kind: "start_run", run: runRecord("run_slack", "slack:T1:C1:1.1", "U2", `deploy the app ${"now ".repeat(80)}`) },
    { kind: "end_run", outcome: outcomeOf("run_slack", { status: "error", output: "The model failed" }) },
  ]);
  await pause(3);
  await store.record([
    { kind: "start_run", run: runRecord("run_discord", "discord:G1:C1", "U2", "cancel order 7") },
    {
      kind: "end_run",
      outcome: outcomeOf("run_discord", { status: "awaiting_approval", output: "Waiting", paused: '{"pending":[]}' }),
    },
  ]);
  await pause(3);
  await store.appendMessages("web:beta", null, [said("user", "just notes, 50 of them")]);
}

export function readingsContract({ open }: Contract): void {
  it("lists sessions most recently active first, with their first message, counts, tokens, cost and flags", async () => {
    const store = await open();
    await sessionsToSearch(store);
    const { sessions, more } = await store.searchSessions({ limit: 50 });
    expect(more).toBe(false);
    expect(sessions.map((session) => session.id)).toEqual([
      "web:beta",
      "discord:G1:C1",
      "slack:T1:C1:1.1",
      "web:alpha",
    ]);
    expect(sessions[3]).toMatchObject({
      adapter: "web",
      firstMessage: "Where is my parcel?",
      startedBy: "U1",
      runCount: 1,
      messageCount: 2,
      promptTokens: 100,
      completionTokens: 10,
      hasErrors: false,
      awaitingApproval: false,
    });
    expect(sessions[3]?.cost).toBeCloseTo(0.002, 10);
    expect(sessions[0]).toMatchObject({
      adapter: "web",
      firstMessage: "just notes, 50 of them",
      startedBy: null,
      runCount: 0,
      messageCount: 1,
      promptTokens: 0,
      cost: 0,
    });
    expect(sessions[2]).toMatchObject({ adapter: "slack", hasErrors: true, awaitingApproval: false });
    expect(sessions[2]?.firstMessage).toHaveLength(200);
    expect(sessions[2]?.firstMessage?.endsWith("…")).toBe(true);
    expect(sessions[1]).toMatchObject({ adapter: "discord", hasErrors: false, awaitingApproval: true });
    expect(Number.isNaN(Date.parse(sessions[0]?.lastActivity ?? ""))).toBe(false);
    const limited = await store.searchSessions({ limit: 2 });
    expect({ ids: limited.sessions.map((session) => session.id), more: limited.more }).toEqual({
      ids: ["web:beta", "discord:G1:C1"],
      more: true,
    });
  });

  it("searches message text, run inputs and ids (ASCII case aside, % and _ as themselves), and filters by adapter, status, tool, dates and who started it", async () => {
    const store = await open();
    await sessionsToSearch(store);
    const ids = async (filters: Omit<Parameters<AnyStorePort["searchSessions"]>[0], "limit">) =>
      (await store.searchSessions({ limit: 50, ...filters })).sessions.map((session) => session.id);
    expect(await ids({ text: "berlin" })).toEqual(["web:alpha"]);
    expect(await ids({ text: "DEPLOY THE" })).toEqual(["slack:T1:C1:1.1"]);
    expect(await ids({ text: "model failed" })).toEqual(["slack:T1:C1:1.1"]);
    expect(await ids({ text: "discord:G1" })).toEqual(["discord:G1:C1"]);
    expect(await ids({ text: "50 of" })).toEqual(["web:beta"]);
    expect(await ids({ text: "5%" })).toEqual([]);
    expect(await ids({ text: "just_notes" })).toEqual([]);
    expect(await ids({ adapter: "web" })).toEqual(["web:beta", "web:alpha"]);
    expect(await ids({ adapter: "we" })).toEqual([]);
    expect(await ids({ status: "error" })).toEqual(["slack:T1:C1:1.1"]);
    expect(await ids({ status: "awaiting_approval" })).toEqual(["discord:G1:C1"]);
    expect(await ids({ tool: "get_order_status" })).toEqual(["web:alpha"]);
    expect(await ids({ tool: "cancel_order" })).toEqual([]);
    expect(await ids({ startedBy: "U2" })).toEqual(["discord:G1:C1", "slack:T1:C1:1.1"]);
    const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
    const hourAhead = new Date(Date.now() + 3_600_000).toISOString();
    expect(await ids({ from: hourAgo, to: hourAhead, adapter: "web" })).toEqual(["web:beta", "web:alpha"]);
    expect(await ids({ from: hourAhead })).toEqual([]);
    expect(await ids({ to: hourAgo })).toEqual([]);
  });

  it("places each fold at the step its call was made for (or, without one, the first step recorded after it), with what it folded, its call, and whether the summary failed", async () => {
    const store = await open();
    await store.record([{ kind: "start_run", run: runRecord("run_f", "web:fold") }]);
    const ids = await store.appendMessages("web:fold", "run_f", [
      said("user", "one"),
      said("assistant", "two"),
      said("user", "three"),
      said("assistant", "four"),
    ]);
    const [one, two, three, four] = ids as [number, number, number, number];
    expect(await store.foldsOf("web:fold")).toEqual([]);
    await store.saveSummary("web:fold", 0, {
      content: "One and two.",
      tokens: 4,
      firstMessageId: one,
      lastMessageId: two,
    });
    await pause(3);
    await store.record([{ kind: "step", step: stepOf("run_f", 1) }]);
    await pause(3);
    await store.saveSummary("web:fold", 0, {
      content: "One and two.",
      tokens: 4,
      firstMessageId: three,
      lastMessageId: three,
    }); // the summariser failed: unchanged
    const call = {
      runId: "run_f",
      step: 2,
      model: "gpt-4o-mini",
      promptTokens: 300,
      completionTokens: 40,
      cost: 0.004,
    };
    await store.saveSummary("web:fold", 0, {
      content: "One to four.",
      tokens: 5,
      firstMessageId: four,
      lastMessageId: four,
      call,
    });
    const folds = await store.foldsOf("web:fold");
    expect(folds).toEqual([
      {
        runId: "run_f",
        step: 1,
        at: expect.any(String),
        summary: "One and two.",
        summaryTokens: 4,
        foldedMessages: 2,
        summaryFailed: false,
        call: null,
      },
      {
        runId: null,
        step: null,
        at: expect.any(String),
        summary: "One and two.",
        summaryTokens: 4,
        foldedMessages: 1,
        summaryFailed: true,
        call: null,
      },
      {
        runId: "run_f",
        step: 2,
        at: expect.any(String),
        summary: "One to four.",
        summaryTokens: 5,
        foldedMessages: 1,
        summaryFailed: false,
        call: { model: "gpt-4o-mini", promptTokens: 300, completionTokens: 40, cost: 0.004 },
      },
    ]);
    // The summarising call is a cost of the run it made room in.
    await store.record([
      { kind: "end_run", outcome: outcomeOf("run_f") },
      { kind: "price_run", runId: "run_f" },
    ]);
    expect((await store.run("run_f"))?.cost).toBeCloseTo(0.001 + 0.004, 10);
  });

  it("gives past top-level runs as tool-usage examples, oldest first: the tools they called (list_tools aside), or none for an answer", async () => {
    const store = await open();
    await store.record([
      { kind: "start_run", run: runRecord("run_tools", "web:u", "U1", "cancel my order") },
      { kind: "step", step: stepOf("run_tools", 1) },
      {
        kind: "tool_calls",
        runId: "run_tools",
        step: 1,
        records: [called("list_tools"), called("get_order_status"), called("get_order_status")],
      },
      { kind: "step", step: stepOf("run_tools", 2) },
      { kind: "tool_calls", runId: "run_tools", step: 2, records: [called("cancel_order")] },
      {
        kind: "start_run",
        run: {
          ...runRecord("run_sub", "web:u", "U1", "a specialist's task"),
          parent: { runId: "run_tools", toolCallId: "call_x" },
        },
      },
      { kind: "step", step: stepOf("run_sub", 1) },
      { kind: "tool_calls", runId: "run_sub", step: 1, records: [called("send_message")] },
      { kind: "end_run", outcome: outcomeOf("run_sub") },
      { kind: "end_run", outcome: outcomeOf("run_tools") },
    ]);
    await pause(3);
    await store.record([
      { kind: "start_run", run: runRecord("run_answer", "web:u", "U1", "hello") },
      { kind: "step", step: stepOf("run_answer", 1) },
      { kind: "end_run", outcome: outcomeOf("run_answer") },
    ]);
    await pause(3);
    await store.record([
      { kind: "start_run", run: runRecord("run_failed", "web:u", "U1", "broken") },
      { kind: "end_run", outcome: outcomeOf("run_failed", { status: "error" }) },
    ]);
    expect(await store.usageHistory()).toEqual([
      { runId: "run_tools", request: "cancel my order", tools: ["get_order_status", "cancel_order"] },
      { runId: "run_answer", request: "hello", tools: [] },
    ]);
    expect(await store.usageHistory(2)).toEqual([{ runId: "run_answer", request: "hello", tools: [] }]);
    expect(await store.runUsage("run_tools")).toEqual({
      runId: "run_tools",
      request: "cancel my order",
      tools: ["get_order_status", "cancel_order"],
    });
    expect(await store.runUsage("run_sub")).toBeUndefined();
    expect(await store.runUsage("run_failed")).toBeUndefined();
    expect(await store.runUsage("run_unknown")).toBeUndefined();
  });
}
