// Session memory through runAgent, end to end: the real openai SDK against the scripted model server,
// a real SQLite file, the real o200k_base counter. Assertions read the requests the server received
// and the rows in the database — what the model saw and what was kept.
import { describe, expect, it } from "vitest";
import { runAgent, type AgentConfig, type RunResult } from "../../../src/agent/loop.js";
import { createMemory, SUMMARY_PROMPT, type Memory } from "../../../src/agent/memory.js";
import type { SqliteStore } from "../../../src/store/sqlite-store.js";
import { createTraceRecorder } from "../../../src/agent/trace.js";
import { createTraceReader } from "../../../src/store/sqlite-traces.js";
import { createTokenCounter } from "../../../src/agent/tokens.js";
import type { Message } from "../../../src/agent/types.js";
import type {
  ChatCompletionRequestBody,
  Script,
  ScriptedModelServer,
} from "../../../src/testing/scripted-model-server.js";
import { createToolRegistry } from "../../../src/tools/registry.js";
import type { AnyTool } from "../../../src/tools/types.js";
import { call, recordingTool, startServer, textOf } from "../../helpers/agent.js";
import {
  cleanUpAfterEach,
  databasePath,
  expectValidProtocol,
  isSummaryRequest,
  openTestStore,
  prose,
  requestTokens,
  systemTextOf,
  testModel,
  toMessage,
} from "../../helpers/memory.js";
import { sqlitePortOf } from "../../../src/store/sqlite.js";

const counter = await createTokenCounter("o200k_base");
cleanUpAfterEach();

interface Harness {
  server: ScriptedModelServer;
  store: SqliteStore;
  memory: Memory;
  agent: AgentConfig;
  warnings: Array<{ fields: object; message: string }>;
  run(input: string, options?: { sessionId?: string; userId?: string }): Promise<RunResult>;
}

async function setUp(options: {
  script: Script;
  budgetTokens?: number;
  tools?: AnyTool[];
  path?: string;
  maxSteps?: number;
}): Promise<Harness> {
  const server = await startServer({ script: options.script });
  const store = openTestStore(options.path);
  const model = testModel(server);
  const warnings: Harness["warnings"] = [];
  const memory = createMemory({
    store: sqlitePortOf(store),
    model,
    counter,
    budgetTokens: options.budgetTokens ?? 12_000,
    log: { warn: (fields, message) => void warnings.push({ fields, message }), debug: () => {} },
  });
  const agent: AgentConfig = {
    model,
    tools: createToolRegistry(options.tools ?? []),
    memory,
    maxSteps: options.maxSteps,
  };
  return {
    server,
    store,
    memory,
    agent,
    warnings,
    run: (input, { sessionId = "web:s1", userId = "U1" } = {}) => runAgent(agent, { input, sessionId, userId }),
  };
}

type Row = {
  id: number;
  run_id: string | null;
  role: string;
  content: string | null;
  tool_calls: string | null;
  tool_call_id: string | null;
  tokens: number;
};
const rowsOf = (store: SqliteStore, sessionId: string) =>
  store.db
    .prepare(
      "SELECT id, run_id, role, content, tool_calls, tool_call_id, tokens FROM messages WHERE session_id = ? ORDER BY id",
    )
    .all(sessionId) as Row[];

const firstRequest = (server: ScriptedModelServer) => server.requests[0] as NonNullable<(typeof server.requests)[0]>;

/** The requests of the loop (not of the summariser). */
function loopRequests(server: ScriptedModelServer) {
  return server.requests.filter((request) => !isSummaryRequest(request.body));
}

describe("commits", () => {
  it("commits every message as it is produced, with its run and cached token count, and records the run", async () => {
    const path = databasePath();
    const observer = openTestStore(path); // another connection, like another process reading the file
    const seenByModel: string[][] = [];
    const lookup = recordingTool("lookup", () => ({ rows: 3 }));
    const seenByTool: string[][] = [];
    const tool: AnyTool = {
      ...lookup.tool,
      handler: (args, context) => (
        seenByTool.push(rowsOf(observer, "web:s1").map((row) => row.role)), lookup.tool.handler(args, context)
      ),
    };
    const h = await setUp({
      path,
      tools: [tool],
      script: (_body, index) => {
        seenByModel.push(rowsOf(observer, "web:s1").map((row) => row.role));
        return index === 0
          ? {
              toolCalls: [call("lookup", { q: "orders" }, "call_lookup")],
              usage: { promptTokens: 90, completionTokens: 12 },
            }
          : { content: "There are 3 orders.", usage: { promptTokens: 120, completionTokens: 8 } };
      },
    });
    const result = await h.run("How many orders are there?");
    expect(result).toMatchObject({ stopReason: "final", output: "There are 3 orders.", steps: 2 });

    // Each model call and the tool saw everything before it already committed.
    expect(seenByModel).toEqual([["user"], ["user", "assistant", "tool"]]);
    expect(seenByTool).toEqual([["user", "assistant"]]);

    const rows = rowsOf(h.store, "web:s1");
    expect(rows.map((row) => [row.role, row.run_id])).toEqual([
      ["user", result.runId],
      ["assistant", result.runId],
      ["tool", result.runId],
      ["assistant", result.runId],
    ]);
    expect(JSON.parse(rows[1]?.tool_calls ?? "[]")).toEqual([
      { id: "call_lookup", type: "function", function: { name: "lookup", arguments: '{"q":"orders"}' } },
    ]);
    expect(rows[2]?.tool_call_id).toBe("call_lookup");
    expect(JSON.parse(rows[2]?.content ?? "{}")).toEqual({ status: "success", data: { rows: 3 } });
    const stored = h.store.messagesAfter("web:s1", 0, 0);
    for (const entry of stored) {
      expect(entry.tokens).toBeGreaterThan(0);
      expect(entry.tokens).toBe(counter.message(entry.message));
    }

    const run = h.store.db
      .prepare(
        "SELECT session_id, user_id, input, status, output, steps, prompt_tokens, completion_tokens, ended_at FROM runs WHERE id = ?",
      )
      .get(result.runId);
    expect(run).toMatchObject({
      session_id: "web:s1",
      user_id: "U1",
      input: "How many orders are there?",
      status: "final",
      output: "There are 3 orders.",
      steps: 2,
      prompt_tokens: 210,
      completion_tokens: 20,
    });
    expect((run as { ended_at: string | null }).ended_at).not.toBeNull();
  });

  it("announces each message only once it is committed, as another connection sees it", async () => {
    const path = databasePath();
    const observer = openTestStore(path);
    const h = await setUp({
      path,
      tools: [recordingTool("lookup", () => ({ rows: 3 })).tool],
      script: (_body, index) =>
        index === 0
          ? { toolCalls: [call("lookup", { q: "orders" }, "call_lookup")] }
          : { content: "There are 3 orders." },
    });
    const announced: Array<{ role: string; visible: string[] }> = [];
    const result = await runAgent(h.agent, {
      input: "How many orders are there?",
      sessionId: "web:s1",
      onEvent: (event) => {
        if (event.type === "message")
          announced.push({ role: event.message.role, visible: rowsOf(observer, "web:s1").map((row) => row.role) });
      },
    });
    expect(result.stopReason).toBe("final");
    expect(announced).toEqual([
      { role: "user", visible: ["user"] },
      { role: "assistant", visible: ["user", "assistant"] },
      { role: "tool", visible: ["user", "assistant", "tool"] },
      { role: "assistant", visible: ["user", "assistant", "tool", "assistant"] },
    ]);
  });

  it("keeps each step's exact request, small or large, by reference to messages stored once, read back whole", async () => {
    const h = await setUp({ script: () => ({ content: "Noted." }) });
    const agent: AgentConfig = { ...h.agent, trace: createTraceRecorder(sqlitePortOf(h.store)) };
    const small = await runAgent(agent, { input: "Hello.", sessionId: "web:small" });
    const large = await runAgent(agent, { input: prose(3_000), sessionId: "web:large" });
    const reader = createTraceReader(h.store);
    const refsOf = (runId: string) =>
      h.store.db.prepare("SELECT request_refs FROM steps WHERE run_id = ? AND step = 1").pluck().get(runId);
    const rowOf = (sessionId: string) =>
      h.store.db.prepare("SELECT id FROM messages WHERE session_id = ? AND role = 'user'").pluck().get(sessionId);
    const partsOf = (runId: string) =>
      h.store.db.prepare("SELECT count(*) FROM step_messages WHERE run_id = ?").pluck().get(runId);
    for (const [index, run] of [small, large].entries()) {
      const sent = h.server.requests[index]?.body.messages.map(toMessage);
      // The system prompt is a part of the run's own; the request points at its row in the messages table.
      expect(sent).toHaveLength(2);
      expect(refsOf(run.runId)).toBe(`1,m${rowOf(run.sessionId)}`);
      expect(partsOf(run.runId)).toBe(1);
      expect((reader.payload(run.runId, 1) as { messages: unknown }).messages).toEqual(sent);
    }
    expect(reader.payload(small.runId, 2)).toBeUndefined();
  });

  it("records a step as one unit: when its reply cannot be committed, its trace row goes too, and the run ends with the error", async () => {
    const h = await setUp({
      tools: [recordingTool("lookup", () => ({ rows: 3 })).tool],
      script: (_body, index) =>
        index === 0
          ? { toolCalls: [call("lookup", { q: "orders" }, "call_lookup")] }
          : { content: "poison: this reply cannot be stored" },
    });
    const agent: AgentConfig = { ...h.agent, trace: createTraceRecorder(sqlitePortOf(h.store)) };
    // A store that refuses one row, as a full disk or a broken constraint would.
    h.store.db.exec(
      "CREATE TRIGGER refuse_poison BEFORE INSERT ON messages WHEN new.content LIKE 'poison:%' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
    );

    const result = await runAgent(agent, { input: "How many orders are there?", sessionId: "web:s1", userId: "U1" });
    expect(result).toMatchObject({ stopReason: "error", error: { code: "internal" } });
    expect(result.output).toContain("refused by the test");
    // Step 1 (the call, its result) was committed; step 2's trace row left with its reply.
    expect(rowsOf(h.store, "web:s1").map((row) => row.role)).toEqual(["user", "assistant", "tool"]);
    expect(
      h.store.db.prepare("SELECT step FROM steps WHERE run_id = ? ORDER BY step").pluck().all(result.runId),
    ).toEqual([1]);
    expect(h.store.db.prepare("SELECT status FROM runs WHERE id = ?").pluck().get(result.runId)).toBe("error");
    expect(h.store.db.inTransaction).toBe(false);
  });

  it("shows a second run in the same session exactly the first run's messages, once each (regression: the first commit cached them twice)", async () => {
    const h = await setUp({ script: [{ content: "Nice to meet you, Ada." }, { content: "Your name is Ada." }] });
    await h.run("Hi, my name is Ada.");
    const second = await h.run("What is my name?");
    expect(second.output).toBe("Your name is Ada.");
    const sent = h.server.requests[1]?.body.messages ?? [];
    expect(sent.map((message) => [message.role, textOf(message)])).toEqual([
      ["system", expect.any(String)],
      ["user", "Hi, my name is Ada."],
      ["assistant", "Nice to meet you, Ada."],
      ["user", "What is my name?"],
    ]);
    // A third run, after the session was read back from the database by a fresh memory, sees the same.
    const fresh = createMemory({ store: sqlitePortOf(h.store), model: h.agent.model, counter, budgetTokens: 12_000 });
    h.server.setScript([{ content: "Still Ada." }]);
    await runAgent({ ...h.agent, memory: fresh }, { input: "And now?", sessionId: "web:s1", userId: "U1" });
    expect(
      h.server.requests
        .at(-1)
        ?.body.messages.map((message) => textOf(message))
        .slice(1),
    ).toEqual(["Hi, my name is Ada.", "Nice to meet you, Ada.", "What is my name?", "Your name is Ada.", "And now?"]);
  });
});

/**
 * A model for long conversations: each run calls `lookup` once, then answers; summary requests are
 * answered with a numbered summary (or an error, when `failSummaries`).
 */
function conversationScript(options: { failSummaries?: boolean } = {}) {
  let summaries = 0;
  let answers = 0;
  return (body: ChatCompletionRequestBody) => {
    if (isSummaryRequest(body)) {
      if (options.failSummaries) return { error: { status: 500, message: "summariser is down" } };
      summaries++;
      return { content: `SUMMARY-${summaries}: the user asked about orders; lookups returned order details.` };
    }
    const last = body.messages.at(-1);
    if (last?.role === "user") return { toolCalls: [call("lookup", { query: textOf(last).slice(0, 40) })] };
    answers++;
    return { content: `Answer ${answers}: ${prose(25, answers)}` };
  };
}

const lookupTool = (words = 160) =>
  recordingTool("lookup", (args) => ({ query: args.query, report: prose(words, String(args.query).length) }), {
    description: "Looks up order details.",
    parameters: { type: "object", properties: { query: { type: "string" } }, required: ["query"] },
  }).tool;

/** Runs `count` turns in one session; returns each run's input and the loop requests it sent. */
async function converse(h: Harness, count: number, sessionId = "web:long") {
  const turns: Array<{ input: string; result: RunResult; requests: ChatCompletionRequestBody[] }> = [];
  for (let turn = 1; turn <= count; turn++) {
    const before = h.server.requests.length;
    const input = `Question ${turn}: ${prose(30, turn * 7)}`;
    const result = await h.run(input, { sessionId });
    const requests = h.server.requests
      .slice(before)
      .map((request) => request.body)
      .filter((body) => !isSummaryRequest(body));
    turns.push({ input, result, requests });
  }
  return turns;
}

describe("budget", () => {
  it("keeps every request of a long conversation within the budget, whole tool turns, the run's request always in view", async () => {
    const budgetTokens = 1_500;
    const h = await setUp({ budgetTokens, tools: [lookupTool()], script: conversationScript() });
    const turns = await converse(h, 32);

    for (const [index, turn] of turns.entries()) {
      expect(turn.result.stopReason, `turn ${index + 1}`).toBe("final");
      expect(turn.requests).toHaveLength(2);
      for (const body of turn.requests) {
        expectValidProtocol(body.messages, `turn ${index + 1}`);
        expect(
          body.messages.filter((message) => message.role === "user" && textOf(message) === turn.input),
          `turn ${index + 1}: its request`,
        ).toHaveLength(1);
      }
    }
    for (const [index, request] of h.server.requests.entries()) {
      expect(requestTokens(counter, request), `request #${index}`).toBeLessThanOrEqual(budgetTokens);
    }
    // The budget is what limits the context: requests fill it well, they are not trivially small.
    const largest = Math.max(...loopRequests(h.server).map((request) => requestTokens(counter, request)));
    expect(largest).toBeGreaterThan(budgetTokens * 0.7);
  });

  it("folds old turns into a rolling summary: stored with its range, incremental, shown in later system messages, without tools", async () => {
    const budgetTokens = 1_500;
    const h = await setUp({ budgetTokens, tools: [lookupTool()], script: conversationScript() });
    await converse(h, 32);

    const summaries = h.store.db
      .prepare(
        "SELECT content, first_message_id, last_message_id FROM summaries WHERE session_id = 'web:long' ORDER BY id",
      )
      .all() as Array<{ content: string; first_message_id: number; last_message_id: number }>;
    expect(summaries.length).toBeGreaterThanOrEqual(3);
    for (const [index, summary] of summaries.entries()) {
      expect(summary.content).toMatch(new RegExp(`^SUMMARY-${index + 1}:`));
      expect(summary.first_message_id).toBeLessThanOrEqual(summary.last_message_id);
      const previous = summaries[index - 1];
      if (previous) expect(summary.first_message_id).toBe(previous.last_message_id + 1);
    }

    const requests = h.server.requests.map((request) => request.body);
    const summaryRequests = requests.filter(isSummaryRequest);
    expect(summaryRequests).toHaveLength(summaries.length);
    for (const [index, body] of summaryRequests.entries()) {
      expect(body.tools).toBeUndefined();
      expect(body.messages.map((message) => message.role)).toEqual(["system", "user"]);
      expect(textOf(body.messages[0])).toBe(SUMMARY_PROMPT);
      const input = textOf(body.messages[1]);
      // Incremental: the previous summary plus the newly folded turns, whose tool results are digests.
      expect(input).toContain(index === 0 ? "Previous summary:\n(none)" : `SUMMARY-${index}:`);
      expect(input).toMatch(/Tool result: .{1,301}\n/);
      expect(input).toContain("User: Question");
    }
    // After each summary is written, every later loop request carries it in its system message.
    requests.forEach((body, index) => {
      if (isSummaryRequest(body)) return;
      const written = requests.slice(0, index).filter(isSummaryRequest).length;
      const system = textOf(body.messages[0]);
      if (written === 0) expect(system).not.toContain("SUMMARY-");
      else expect(system).toContain(`## Earlier in this conversation (summary)\nSUMMARY-${written}:`);
      expect(body.messages.slice(1).some((message) => textOf(message).includes("SUMMARY-"))).toBe(false);
    });
  });

  it("keeps the context within the budget and the protocol whole across the many steps of one long run", async () => {
    const budgetTokens = 1_500;
    let step = 0;
    const h = await setUp({
      budgetTokens,
      maxSteps: 14,
      tools: [lookupTool(120)],
      script: (body) => {
        if (isSummaryRequest(body)) return { content: "SUMMARY: many lookups so far." };
        step++;
        if (step < 13)
          return { toolCalls: [call("lookup", { query: `part ${step}` }), call("lookup", { query: `extra ${step}` })] };
        return { content: "All parts looked up." };
      },
    });
    const result = await h.run("Look up all parts one by one, please.");
    expect(result).toMatchObject({ stopReason: "final", steps: 13 });
    for (const [index, request] of loopRequests(h.server).entries()) {
      expectValidProtocol(request.body.messages, `step ${index + 1}`);
      expect(requestTokens(counter, request), `step ${index + 1}`).toBeLessThanOrEqual(budgetTokens);
      expect(
        request.body.messages.filter((message) => textOf(message) === "Look up all parts one by one, please."),
      ).toHaveLength(1);
      // The model always sees its latest step: the newest call (followed by its results, checked above).
      const latestCall = request.body.messages.findLast((message) => message.role === "assistant") as
        | { tool_calls?: Array<{ function: { arguments: string } }> }
        | undefined;
      if (index > 0)
        expect(latestCall?.tool_calls?.[0]?.function.arguments).toBe(JSON.stringify({ query: `part ${index}` }));
    }
    expect(h.server.requests.some((request) => isSummaryRequest(request.body))).toBe(true);
  });

  it("cuts a tool result larger than the budget, with a marker, and keeps the step in view (regression: the model lost its own last call)", async () => {
    const budgetTokens = 1_500;
    const report = `BEGIN-REPORT ${prose(3_000, 9)} END-REPORT`;
    const h = await setUp({
      budgetTokens,
      tools: [recordingTool("report", () => report).tool],
      script: (body) => {
        if (isSummaryRequest(body)) return { content: "SUMMARY: a report was fetched." };
        return body.messages.at(-1)?.role === "user"
          ? { toolCalls: [call("report", {}, "call_report")] }
          : { content: "The report is long." };
      },
    });
    const result = await runAgent(
      { ...h.agent, maxResultChars: 100_000 },
      { input: "Fetch the report.", sessionId: "web:s1", userId: "U1" },
    );
    expect(result.stopReason).toBe("final");
    const second = loopRequests(h.server)[1];
    expect(second).toBeDefined();
    const sent = second?.body.messages ?? [];
    expectValidProtocol(sent);
    const toolResult = textOf(sent.find((message) => message.role === "tool"));
    expect(toolResult).toContain("BEGIN-REPORT");
    expect(toolResult).not.toContain("END-REPORT");
    expect(toolResult).toMatch(/…\[cut \d+ of \d+ characters to fit the context\]$/);
    expect(requestTokens(counter, second as NonNullable<typeof second>)).toBeLessThanOrEqual(budgetTokens);
    // The store keeps the result whole.
    expect(rowsOf(h.store, "web:s1").find((row) => row.role === "tool")?.content).toContain("END-REPORT");
  });

  it("keeps the latest of several huge steps in view, step after step", async () => {
    const budgetTokens = 1_500;
    let calls = 0;
    const h = await setUp({
      budgetTokens,
      tools: [recordingTool("report", (args) => `REPORT-${String(args.n)} ${prose(2_500, Number(args.n))}`).tool],
      script: (body) => {
        if (isSummaryRequest(body)) return { content: "SUMMARY: reports were fetched." };
        return calls < 3
          ? { toolCalls: [call("report", { n: ++calls }), call("report", { n: 100 + calls })] }
          : { content: "Done." };
      },
    });
    const result = await runAgent(
      { ...h.agent, maxResultChars: 100_000 },
      { input: "Fetch three reports.", sessionId: "web:s1", userId: "U1" },
    );
    expect(result).toMatchObject({ stopReason: "final", steps: 4 });
    for (const [index, request] of loopRequests(h.server).entries()) {
      expectValidProtocol(request.body.messages, `step ${index + 1}`);
      expect(requestTokens(counter, request), `step ${index + 1}`).toBeLessThanOrEqual(budgetTokens);
      if (index === 0) continue;
      const results = request.body.messages.filter((message) => message.role === "tool").map(textOf);
      expect(
        results.some((text) => text.includes(`"data":"REPORT-${index} `)),
        `step ${index + 1} sees REPORT-${index}`,
      ).toBe(true);
      expect(
        results.some((text) => text.includes(`"data":"REPORT-${100 + index} `)),
        `step ${index + 1} sees REPORT-${100 + index}`,
      ).toBe(true);
    }
    for (const request of h.server.requests) expect(requestTokens(counter, request)).toBeLessThanOrEqual(budgetTokens);
  });

  it("falls back to truncation when the summary call fails: the run still ends final, within budget, with a warning", async () => {
    const budgetTokens = 1_500;
    const h = await setUp({ budgetTokens, tools: [lookupTool()], script: conversationScript({ failSummaries: true }) });
    const turns = await converse(h, 20);
    expect(turns.map((turn) => turn.result.stopReason)).toEqual(Array(20).fill("final"));
    expect(h.server.requests.some((request) => isSummaryRequest(request.body))).toBe(true);
    expect(h.warnings.length).toBeGreaterThan(0);
    expect(h.warnings[0]?.message).toMatch(/summary failed; fell back to truncation/);
    expect(h.warnings[0]?.fields).toMatchObject({ sessionId: "web:long" });
    for (const request of h.server.requests) {
      if (isSummaryRequest(request.body)) continue;
      expect(requestTokens(counter, request)).toBeLessThanOrEqual(budgetTokens);
      expectValidProtocol(request.body.messages);
      expect(systemTextOf(request.body)).not.toContain("Earlier in this conversation");
    }
  });

  it("keeps the previous summary when the model returns an empty one (regression: an empty reply wiped the summary)", async () => {
    const budgetTokens = 1_500;
    const script = conversationScript();
    let summaryRequests = 0;
    const h = await setUp({
      budgetTokens,
      tools: [lookupTool()],
      script: (body) => (isSummaryRequest(body) && ++summaryRequests === 2 ? { content: "   " } : script(body)),
    });
    await converse(h, 24);
    expect(summaryRequests).toBeGreaterThanOrEqual(3);
    const contents = h.store.db.prepare("SELECT content FROM summaries ORDER BY id").pluck().all() as string[];
    expect(contents.every((content) => content.startsWith("SUMMARY-"))).toBe(true);
    expect(h.warnings.map((warning) => warning.message)).toContain("summary failed; fell back to truncation");
    // The third summary request still builds on the first summary.
    const third = h.server.requests.map((request) => request.body).filter(isSummaryRequest)[2];
    expect(textOf(third?.messages[1])).toContain("Previous summary:\nSUMMARY-1:");
  });

  it("logs the drift between its estimate of each request and the usage the server reports", async () => {
    const debug: Array<{ fields: Record<string, unknown>; message: string }> = [];
    const server = await startServer({
      script: [{ content: "Hello.", usage: { promptTokens: 57, completionTokens: 2 } }],
    });
    const store = openTestStore();
    const model = testModel(server);
    const memory = createMemory({
      store: sqlitePortOf(store),
      model,
      counter,
      budgetTokens: 12_000,
      log: {
        warn: () => {},
        debug: (fields, message) => void debug.push({ fields: fields as Record<string, unknown>, message }),
      },
    });
    await runAgent(
      { model, tools: createToolRegistry([lookupTool()]), memory },
      { input: "Hi there!", sessionId: "web:d", userId: "U1" },
    );
    const estimate = requestTokens(counter, firstRequest(server));
    expect(debug.find((entry) => entry.message === "prompt token estimate vs reported usage")?.fields).toMatchObject({
      estimate,
      reported: 57,
      drift: 57 - estimate,
    });
  });

  it("cuts a single user message larger than the budget, with a marker, and keeps it whole in the store (regression: its summary request was 5,000 tokens)", async () => {
    const budgetTokens = 1_500;
    const huge = `Please review this: ${prose(4_000, 3)} END-OF-MESSAGE`;
    expect(counter.text(huge)).toBeGreaterThan(budgetTokens * 2);
    const h = await setUp({
      budgetTokens,
      script: (body) =>
        isSummaryRequest(body) ? { content: "SUMMARY: a long review request." } : { content: "Reviewed." },
    });
    const result = await h.run(huge);
    expect(result.stopReason).toBe("final");
    const first = h.server.requests[0];
    const sentUser = textOf(first?.body.messages.find((message) => message.role === "user"));
    expect(sentUser.startsWith("Please review this:")).toBe(true);
    expect(sentUser).toMatch(/…\[cut \d+ of \d+ characters to fit the context\]$/);
    expect(sentUser).not.toContain("END-OF-MESSAGE");
    expect(requestTokens(counter, first as NonNullable<typeof first>)).toBeLessThanOrEqual(budgetTokens);
    expect(rowsOf(h.store, "web:s1")[0]?.content).toBe(huge);

    // The next run in the session stays within budget too, and so does the summary of the huge turn.
    await h.run("Thanks. Anything else?");
    for (const [index, request] of h.server.requests.entries()) {
      expect(
        requestTokens(counter, request),
        `request #${index}${isSummaryRequest(request.body) ? " (summary)" : ""}`,
      ).toBeLessThanOrEqual(budgetTokens);
    }
  });
});

describe("what later runs see", () => {
  it("does not show guard notes of earlier runs to later runs", async () => {
    const note = /returned exactly the same result/;
    let calls = 0;
    const h = await setUp({
      tools: [recordingTool("status", () => ({ state: "unchanged" })).tool],
      script: (body) => {
        const last = body.messages.at(-1);
        if (last?.role === "user" && textOf(last).startsWith("Check"))
          return { toolCalls: [call("status", { attempt: ++calls })] };
        if (last?.role === "tool") return { toolCalls: [call("status", { attempt: ++calls })] };
        return { content: `done after ${calls} checks` };
      },
    });
    await h.run("Check the status twice.");
    // The second identical result made the guard speak to this run.
    const thirdOfFirstRun = h.server.requests[2]?.body;
    expect(
      thirdOfFirstRun?.messages.filter((message) => message.role === "system" && note.test(textOf(message))),
    ).toHaveLength(1);
    expect(rowsOf(h.store, "web:s1").some((row) => row.role === "system" && note.test(row.content ?? ""))).toBe(true);

    await h.run("Thanks, what did you find?");
    const later = h.server.requests.at(-1)?.body;
    expect(later?.messages.filter((message) => message.role === "system")).toHaveLength(1);
    expect(JSON.stringify(later?.messages)).not.toMatch(note);
    expectValidProtocol(later?.messages ?? []);
  });

  it("after store.resetSession on the memory's own connection (the terminal's /reset) the next run sees none of the old messages (regression: the cached session outlived the reset)", async () => {
    const h = await setUp({
      script: [{ content: "Noted: the code word is PELICAN." }, { content: "I don't know any code word." }],
    });
    await h.run("Remember the code word PELICAN.");
    expect(h.store.resetSession("web:s1")).toBe(true);
    await h.run("What is the code word?");
    expect(h.server.requests[1]?.body.messages.map((message) => message.role)).toEqual(["system", "user"]);
    expect(JSON.stringify(h.server.requests[1]?.body.messages)).not.toContain("PELICAN");
    expect(rowsOf(h.store, "web:s1").map((row) => row.content)).toEqual([
      "Remember the code word PELICAN.",
      "Noted: the code word is PELICAN.",
      "What is the code word?",
      "I don't know any code word.",
    ]);
  });

  it("after a reset by another process (glassbox reset) the next run sees none of the old messages", async () => {
    const path = databasePath();
    const h = await setUp({ path, script: [{ content: "Noted PELICAN." }, { content: "Fresh start." }] });
    await h.run("The code word is PELICAN.");
    const other = openTestStore(path);
    expect(other.resetSession("web:s1")).toBe(true);
    await h.run("What is the code word?");
    expect(JSON.stringify(h.server.requests[1]?.body.messages)).not.toContain("PELICAN");
  });

  it("a run keeps its own context whole when another process resets the session mid-run; the next run starts fresh", async () => {
    // The history is checked against the store when a run starts, not at every step: a conversation
    // has one run at a time, and the run's own writes keep memory's copy current.
    const path = databasePath();
    const other = openTestStore(path);
    const lookup = recordingTool("lookup", () => (other.resetSession("web:s1"), { rows: 3 }));
    const h = await setUp({
      path,
      tools: [lookup.tool],
      script: [
        { toolCalls: [call("lookup", { q: "PELICAN orders" }, "call_lookup")] },
        { content: "There are 3 PELICAN orders." },
        { content: "Fresh start." },
      ],
    });
    const crossing = await h.run("How many orders does PELICAN have?");
    expect(crossing).toMatchObject({ stopReason: "final", steps: 2 });
    const second = loopRequests(h.server)[1]?.body.messages.map(toMessage) ?? [];
    expect(second.map((message) => message.role)).toEqual(["system", "user", "assistant", "tool"]);
    expect(textOf(second[1])).toContain("How many orders does PELICAN have?");

    await h.run("What were we talking about?");
    const next = loopRequests(h.server)[2]?.body.messages ?? [];
    expect(JSON.stringify(next)).not.toContain("How many orders does PELICAN have?");
    expect(textOf(next.at(-1))).toBe("What were we talking about?");
  });

  it("answers a tool call that never got its result (a crash) with a synthesized error, so the protocol holds", async () => {
    const path = databasePath();
    const h = await setUp({
      path,
      script: [{ content: "First answer." }, { content: "Second answer." }, { content: "Third answer." }],
    });
    await h.run("First question.");

    // Another process committed an assistant message with tool_calls and died before any result.
    const crashed = openTestStore(path);
    crashed.startRun({ runId: "run_crashed", sessionId: "web:s1", userId: "U1", input: "Delete the old logs." });
    const dangling: Message[] = [
      { role: "user", content: "Delete the old logs." },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "call_lost_1", type: "function", function: { name: "delete_logs", arguments: '{"older_than":"30d"}' } },
          { id: "call_lost_2", type: "function", function: { name: "vacuum", arguments: "{}" } },
        ],
      },
    ];
    crashed.appendMessages(
      "web:s1",
      "run_crashed",
      dangling.map((message) => ({ message, tokens: counter.message(message) })),
    );

    await h.run("Did it work?");
    const sent = h.server.requests[1]?.body.messages ?? [];
    expectValidProtocol(sent);
    const lost = sent.filter((message) => message.role === "tool");
    expect(lost.map((message) => message.tool_call_id)).toEqual(["call_lost_1", "call_lost_2"]);
    for (const message of lost)
      expect(JSON.parse(textOf(message))).toMatchObject({ status: "error", error: { type: "execution_error" } });
    expect(textOf(sent.at(-1))).toBe("Did it work?");

    // A fresh process (new store and memory over the same file) sees the same repaired history.
    const restarted = openTestStore(path);
    const memory = createMemory({
      store: sqlitePortOf(restarted),
      model: h.agent.model,
      counter,
      budgetTokens: 12_000,
    });
    await runAgent({ ...h.agent, memory }, { input: "And now?", sessionId: "web:s1", userId: "U1" });
    expectValidProtocol(h.server.requests[2]?.body.messages ?? []);
    expect(h.server.requests[2]?.body.messages.filter((message) => message.role === "tool")).toHaveLength(2);
  });

  it("never sends a tool result whose call was folded away (the pair stays together or goes together)", async () => {
    // Every loop request of a long, folded conversation is checked message by message.
    const h = await setUp({ budgetTokens: 1_200, tools: [lookupTool(200)], script: conversationScript() });
    await converse(h, 12);
    for (const request of loopRequests(h.server)) {
      const messages = request.body.messages.map(toMessage);
      const calls = new Set(
        messages.flatMap((message) =>
          message.role === "assistant" ? (message.tool_calls ?? []).map((tool) => tool.id) : [],
        ),
      );
      for (const message of messages) if (message.role === "tool") expect(calls.has(message.tool_call_id)).toBe(true);
    }
  });
});
