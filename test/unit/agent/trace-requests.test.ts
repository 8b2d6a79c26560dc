// Each step's exact request is kept by reference: a run's distinct messages once each, a step the
// numbers it sent. Checked against what the scripted server really received, step by step, through
// memory's folding and an approval's pause and resume, and against the storage it takes.
import { describe, expect, it } from "vitest";
import { resumeAgent, runAgent } from "../../../src/agent/loop.js";
import { createMemory } from "../../../src/agent/memory.js";
import { createTokenCounter, encodingForModel } from "../../../src/agent/tokens.js";
import { createTraceRecorder } from "../../../src/agent/trace.js";
import { createTraceReader } from "../../../src/store/sqlite-traces.js";
import { rangesOf, seqsOf } from "../../../src/store/request-refs.js";
import { createRequestLog, type RecordedRequest } from "../../../src/store/sqlite-requests.js";
import { createToolRegistry } from "../../../src/tools/registry.js";
import type { ApprovalGate, ToolDefinition } from "../../../src/tools/types.js";
import type { ScriptedReply } from "../../../src/testing/scripted-model-server.js";
import { call, startServer } from "../../helpers/agent.js";
import { cleanUpAfterEach, isSummaryRequest, openTestStore, prose, testModel } from "../../helpers/memory.js";
import { sqlitePortOf } from "../../../src/store/sqlite.js";

cleanUpAfterEach();

const lookup: ToolDefinition = {
  name: "lookup",
  description: "Looks a number up.",
  parameters: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] },
  handler: (args) => ({ n: args.n, text: prose(120, Number(args.n) + 1) }),
};
const wipe: ToolDefinition = {
  name: "wipe",
  description: "Wipes the cache.",
  parameters: { type: "object", properties: {} },
  dangerous: true,
  handler: () => "wiped",
};

async function setUp(budgetTokens: number, script: (index: number) => ScriptedReply) {
  let step = 0;
  const server = await startServer({
    script: (body, index) =>
      isSummaryRequest(body) ? { content: `Summary ${index}: lookups so far.` } : script(step++),
  });
  const store = openTestStore();
  const model = testModel(server);
  const counter = await createTokenCounter(encodingForModel("gpt-4o-mini"));
  const memory = createMemory({ store: sqlitePortOf(store), model, counter, budgetTokens });
  const trace = createTraceRecorder(sqlitePortOf(store), { estimateTokens: memory.estimate });
  const approve: ApprovalGate = async () => "pending";
  const config = { model, tools: createToolRegistry([lookup, wipe]), memory, trace, maxSteps: 40, approve };
  return { server, store, config, reader: createTraceReader(store) };
}

/** The requests the server got for the run's own steps (not memory's summaries), in order. */
function stepRequests(server: Awaited<ReturnType<typeof startServer>>) {
  return server.requests.filter((request) => !isSummaryRequest(request.body)).map((request) => request.body);
}

describe("a step's recorded request", () => {
  it("is exactly what the server received at every step, through folds, while the run stores each message once", async () => {
    const steps = 24;
    const { server, store, config, reader } = await setUp(2_500, (index) =>
      index < steps - 1 ? { toolCalls: [call("lookup", { n: index })] } : { content: "Looked everything up." },
    );
    const result = await runAgent(config, { input: "Look up 0 to 22.", sessionId: "test:requests", userId: "U1" });
    expect(result.output).toBe("Looked everything up.");
    const sent = stepRequests(server);
    expect(sent).toHaveLength(steps);
    expect(
      server.requests.some((request) => isSummaryRequest(request.body)),
      "memory folded during the run",
    ).toBe(true);

    for (let step = 1; step <= steps; step++) {
      const recorded = reader.payload(result.runId, step) as RecordedRequest;
      const body = sent[step - 1];
      expect(JSON.parse(JSON.stringify(recorded.messages)), `step ${step}: messages`).toEqual(body?.messages);
      expect(recorded.tools, `step ${step}: tools`).toEqual(body?.tools);
      expect(recorded.stream, `step ${step}: streamed`).toBe(body?.stream === true);
    }

    // The summarising calls are the run's costs: kept with their summaries at the step they made room for, and in the run's totals.
    const summaries = store.db
      .prepare(
        "SELECT run_id AS runId, step, prompt_tokens AS promptTokens FROM summaries WHERE session_id = 'test:requests'",
      )
      .all() as Array<{ runId: string; step: number; promptTokens: number }>;
    expect(summaries.length).toBeGreaterThan(0);
    for (const summary of summaries) {
      expect(summary.runId).toBe(result.runId);
      expect(summary.step).toBeGreaterThanOrEqual(1);
      expect(summary.step).toBeLessThanOrEqual(steps);
      expect(summary.promptTokens).toBeGreaterThan(0);
    }
    const stepTokens = reader.steps(result.runId).reduce((sum, one) => sum + one.promptTokens, 0);
    const summaryTokens = summaries.reduce((sum, one) => sum + one.promptTokens, 0);
    expect(reader.run(result.runId)?.promptTokens).toBe(stepTokens + summaryTokens);

    // Each distinct message once (and the tool list once): far fewer rows than the messages all steps sent.
    const stored = store.db
      .prepare("SELECT count(*) FROM step_messages WHERE run_id = ?")
      .pluck()
      .get(result.runId) as number;
    const distinct = new Set(sent.flatMap((body) => body.messages.map((message) => JSON.stringify(message)))).size;
    const sentInAll = sent.reduce((sum, body) => sum + body.messages.length, 0);
    expect(stored).toBeLessThanOrEqual(distinct + 1);
    expect(stored * 4).toBeLessThan(sentInAll);
    expect(store.db.prepare("SELECT count(*) FROM steps WHERE payload IS NOT NULL").pluck().get()).toBe(0);
  });

  it("goes on numbering after an approval's pause in another process, and the resumed steps read back exactly", async () => {
    const replies: ScriptedReply[] = [
      { toolCalls: [call("lookup", { n: 1 })] },
      { toolCalls: [call("wipe", {})] },
      { toolCalls: [call("lookup", { n: 2 })] },
      { content: "Wiped and looked up." },
    ];
    const { server, store, config, reader } = await setUp(50_000, (index) => replies[index] ?? { content: "?" });
    const paused = await runAgent(config, {
      input: "Look up 1, wipe, look up 2.",
      sessionId: "test:pause",
      userId: "U1",
    });
    expect(paused.stopReason).toBe("awaiting_approval");
    const decisions = Object.fromEntries(
      (paused.paused?.pending ?? []).map((pending) => [
        pending.call.id,
        { approved: true, by: "U1", argumentsHash: pending.approval?.argumentsHash ?? "" },
      ]),
    );
    // Resumed as after a restart: memory and recorder of their own, on a connection of their own.
    const again = openTestStore(store.db.name);
    const memory = createMemory({
      store: sqlitePortOf(again),
      model: config.model,
      counter: await createTokenCounter(encodingForModel("gpt-4o-mini")),
      budgetTokens: 50_000,
    });
    const restarted = {
      ...config,
      memory,
      trace: createTraceRecorder(sqlitePortOf(again), { estimateTokens: memory.estimate }),
    };
    const resumed = await resumeAgent(
      restarted,
      JSON.parse(JSON.stringify(paused.paused)) as NonNullable<typeof paused.paused>,
      decisions,
    );
    expect(resumed.output).toBe("Wiped and looked up.");

    const sent = stepRequests(server);
    expect(sent).toHaveLength(4);
    for (let step = 1; step <= 4; step++) {
      const recorded = reader.payload(paused.runId, step) as RecordedRequest;
      expect(JSON.parse(JSON.stringify(recorded.messages)), `step ${step}`).toEqual(sent[step - 1]?.messages);
    }
  });

  it("stores a message rebuilt at every step once (a run without memory: the loop builds its system message anew each step)", async () => {
    const { server, store, config, reader } = await setUp(50_000, (index) =>
      index < 5 ? { toolCalls: [call("lookup", { n: index })] } : { content: "Done." },
    );
    const { memory: _memory, ...withoutMemory } = config;
    const result = await runAgent(
      { ...withoutMemory, systemPrompt: "You look numbers up." },
      { input: "Look up 0 to 4.", sessionId: "test:rebuilt", userId: "U1" },
    );
    expect(result.output).toBe("Done.");
    const sent = stepRequests(server);
    for (let step = 1; step <= 6; step++)
      expect(JSON.parse(JSON.stringify((reader.payload(result.runId, step) as RecordedRequest).messages))).toEqual(
        sent[step - 1]?.messages,
      );
    const bodies = store.db
      .prepare("SELECT body FROM step_messages WHERE run_id = ?")
      .pluck()
      .all(result.runId) as string[];
    expect(bodies.filter((body) => body.includes("You look numbers up."))).toHaveLength(1);
    expect(new Set(bodies).size).toBe(bodies.length);
  });

  it("tells apart two rebuilt parts whose JSON hashes collide, and still finds each again by content", () => {
    const fnv = (text: string) => {
      let hash = 0x811c9dc5;
      for (let index = 0; index < text.length; index++) hash = Math.imul(hash ^ text.charCodeAt(index), 0x01000193);
      return hash >>> 0;
    };
    const message = (index: number) => ({ role: "user" as const, content: `note ${index}` });
    const seen = new Map<number, number>();
    let pair: [number, number] | undefined;
    for (let index = 0; !pair; index++) {
      const hash = fnv(JSON.stringify(message(index)));
      const earlier = seen.get(hash);
      if (earlier !== undefined) pair = [earlier, index];
      else seen.set(hash, index);
    }
    const store = openTestStore();
    store.startRun({ runId: "run_collide", sessionId: "test:collide", userId: "U1", input: "hi" });
    const log = createRequestLog(store.db);
    const [first, second] = pair;
    expect(store.db.transaction(() => log.store("run_collide", [message(first)], undefined).requestRefs)()).toBe("1");
    // New objects each time (as a rebuilt message is): found by content, the colliding one stored apart.
    expect(
      store.db.transaction(() => log.store("run_collide", [message(first), message(second)], undefined).requestRefs)(),
    ).toBe("1-2");
    expect(
      store.db.transaction(() => log.store("run_collide", [message(second), message(first)], undefined).requestRefs)(),
    ).toBe("2,1");
    expect(store.db.prepare("SELECT count(*) FROM step_messages WHERE run_id = 'run_collide'").pluck().get()).toBe(2);
  });

  it("points at the messages rows that give back exactly the message sent, stores any other message as a part, and reads both back exactly", async () => {
    const store = openTestStore();
    const port = sqlitePortOf(store);
    store.startRun({ runId: "run_rows", sessionId: "test:rows", userId: "U1", input: "hi" });
    const user = { role: "user" as const, content: "Look it up." };
    const assistant = {
      role: "assistant" as const,
      content: null,
      tool_calls: [{ id: "call_1", type: "function" as const, function: { name: "lookup", arguments: '{"n":1}' } }],
    };
    const result = { role: "tool" as const, content: '{"status":"success","data":1}', tool_call_id: "call_1" };
    // Keys in another order than the row gives back: its JSON would differ, so it is stored as a part.
    const reordered = { role: "tool" as const, tool_call_id: "call_2", content: "two" };
    const entries = [user, assistant, result, reordered].map((message) => ({ message, tokens: 1 }));
    const [ids] = (await port.record([{ kind: "messages", sessionId: "test:rows", runId: "run_rows", entries }]))
      .messageIds as [number[]];
    // A unit that was taken back leaves rows nobody may point at (their ids can be taken again).
    store.db.exec(
      "CREATE TRIGGER refuse_poison BEFORE INSERT ON messages WHEN new.content LIKE 'poison:%' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
    );
    const poisoned = { role: "user" as const, content: "poison: never stored" };
    await expect(
      port.record([
        {
          kind: "messages",
          sessionId: "test:rows",
          runId: "run_rows",
          entries: [
            { message: user, tokens: 1 },
            { message: poisoned, tokens: 1 },
          ],
        },
      ]),
    ).rejects.toThrow(/refused by the test/);
    const system = { role: "system" as const, content: "You look numbers up." };
    const log = createRequestLog(store.db);
    const request = [system, user, assistant, result, reordered, poisoned];
    const refs = store.db.transaction(() => log.store("run_rows", request, undefined).requestRefs)();
    expect(refs).toBe(`1,m${ids[0]}-${ids[2]},2-3`);
    store.db
      .prepare(
        "INSERT INTO steps (run_id, step, context_messages, prompt_tokens, completion_tokens, latency_ms, request_refs, created_at) VALUES ('run_rows', 1, 6, 0, 0, 1, ?, '2026-01-01')",
      )
      .run(refs);
    expect(JSON.stringify((createRequestLog(store.db).read("run_rows", 1) as RecordedRequest).messages)).toBe(
      JSON.stringify(request),
    );
    // Rows read back from the table are pointed at too (a resumed run, a later run's history).
    const [stored] = store.messagesAfter("test:rows", 0, 0);
    expect(
      store.db.transaction(
        () => log.store("run_rows", [system, stored?.message as typeof user], undefined).requestRefs,
      )(),
    ).toBe(`1,m${ids[0]}`);
  });

  it("reads a step recorded before references existed from its whole stored payload", async () => {
    const { store, reader } = await setUp(50_000, () => ({ content: "unused" }));
    const messages = [
      { role: "system", content: "old" },
      { role: "user", content: "hi" },
    ];
    store.db
      .prepare("INSERT INTO sessions (id, created_at, updated_at) VALUES ('test:old', '2026-01-01', '2026-01-01')")
      .run();
    store.db
      .prepare(
        "INSERT INTO runs (id, session_id, user_id, input, status, started_at) VALUES ('run-old', 'test:old', 'U1', 'hi', 'done', '2026-01-01')",
      )
      .run();
    store.db
      .prepare(
        "INSERT INTO steps (run_id, step, context_messages, prompt_tokens, completion_tokens, latency_ms, payload, created_at) VALUES ('run-old', 1, 2, 0, 0, 1, ?, '2026-01-01')",
      )
      .run(JSON.stringify(messages));
    expect(reader.payload("run-old", 1)).toEqual(messages);
    expect(reader.payload("run-old", 2)).toBeUndefined();
  });
});

describe("step ranges", () => {
  it("write runs of numbers as ranges and read them back", () => {
    for (const seqs of [[], [1], [1, 2, 3], [1, 2, 3, 5, 7, 8], [4, 1, 2, 9, 10, 11, 3]])
      expect(seqsOf(rangesOf(seqs))).toEqual(seqs);
    expect(rangesOf([1, 2, 3, 5, 7, 8])).toBe("1-3,5,7-8");
  });
});
