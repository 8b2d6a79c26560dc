// The engine on the store port, end to end: memory, the trace and memory's tools of real runAgent runs
// (a tool call, a remembered fact found again, a fold) write through the port and read back through
// its readers. SQLite always; with GLASSBOX_TEST_DATABASE_URL the same runs on PostgreSQL, whose
// trace must read back exactly as SQLite's does. Real openai SDK against the scripted model server.
import { afterEach, describe, expect, it } from "vitest";
import { runAgent, type AgentConfig } from "../../../src/agent/loop.js";
import { createMemoryTools } from "../../../src/agent/memory-tools.js";
import { createMemory, NOTES_START } from "../../../src/agent/memory.js";
import { createTokenCounter } from "../../../src/agent/tokens.js";
import { createTraceRecorder } from "../../../src/agent/trace.js";
import { openStorePort, type AnyStorePort } from "../../../src/store/index.js";
import type {
  ChatCompletionRequestBody,
  ScriptedModelServer,
  ScriptedReply,
} from "../../../src/testing/scripted-model-server.js";
import { createToolRegistry } from "../../../src/tools/registry.js";
import { call, closeServers, recordingTool, startServer, textOf } from "../../helpers/agent.js";
import { isSummaryRequest, prose, testModel, toMessage } from "../../helpers/memory.js";
import { TARGETS, TEST_DATABASE_URL, type StoreTarget } from "../helpers/store-targets.js";

const counter = await createTokenCounter("o200k_base");
const SESSION = "web:port";
const USER = "U1";
const BUDGET_TOKENS = 900;
const REMEMBER = "Remember that I drink green tea, then look up my orders.";
const ASK = "Which tea do I drink?";

afterEach(closeServers);

/** The model: a remember and a lookup call for the first request, a summary for the summariser, short answers otherwise. */
function script(body: ChatCompletionRequestBody): ScriptedReply {
  if (isSummaryRequest(body)) return { content: `SUMMARY: ${textOf(body.messages[1]).length} characters folded.` };
  const last = body.messages.at(-1);
  if (last?.role === "user" && textOf(last).endsWith(REMEMBER)) {
    return {
      toolCalls: [
        call("remember", { fact: "Drinks green tea" }, "call_remember"),
        call("lookup", { q: "orders" }, "call_lookup"),
      ],
    };
  }
  if (last?.role === "tool") return { content: "Noted; you have 3 orders." };
  return { content: textOf(last).includes(NOTES_START) ? "You drink green tea." : "Understood." };
}

/** Parallel calls are traced in the order they finished, which timing decides: compared by id. */
const byId = <T extends { id: string }>(records: T[]) => [...records].sort((a, b) => a.id.localeCompare(b.id));

/** Runs the conversation on a fresh database of `target`, and what the port reads back of it. */
async function conversationOn(target: StoreTarget, server: ScriptedModelServer) {
  const database = await target.fresh();
  const port: AnyStorePort = await openStorePort(database.options);
  try {
    const model = testModel(server);
    const memory = createMemory({ store: port, model, counter, budgetTokens: BUDGET_TOKENS });
    const lookup = recordingTool("lookup", () => ({ rows: 3 }));
    const agent: AgentConfig = {
      model,
      tools: createToolRegistry([lookup.tool, ...createMemoryTools(port)]),
      memory,
      trace: createTraceRecorder(port, { estimateTokens: memory.estimate }),
    };
    const inputs = [REMEMBER, ...Array.from({ length: 5 }, (_, index) => prose(90, index + 2)), ASK];
    const sentBefore = server.requests.length;
    const results = [];
    for (const [index, input] of inputs.entries())
      results.push(await runAgent(agent, { input, runId: `run_${index + 1}`, sessionId: SESSION, userId: USER }));
    const sent = server.requests.slice(sentBefore).map((request) => request.body);

    const runs = await port.runsOfSession(SESSION);
    const steps = await Promise.all(
      runs.map(async (run) => ({ runId: run.runId, steps: await port.steps(run.runId) })),
    );
    const payloads = await Promise.all(
      steps.flatMap(({ runId, steps: list }) => list.map((step) => port.payload(runId, step.step))),
    );
    const history = await port.sessionHistory(SESSION);
    return {
      results,
      sent,
      facts: (await port.searchFacts(USER, SESSION, "tea", 5)).map((fact) => fact.content),
      runs: runs.map(({ startedAt, endedAt, ...run }) => ({ ...run, ended: endedAt !== null && endedAt >= startedAt })),
      steps: steps.map(({ runId, steps: list }) => ({
        runId,
        steps: list.map(({ at, latencyMs, toolCalls, ...step }) => ({
          ...step,
          toolCalls: byId(toolCalls.map(({ durationMs, ...record }) => record)),
        })),
      })),
      payloads,
      folds: (await port.foldsOf(SESSION)).map(({ at, ...fold }) => fold),
      history: {
        epoch: history.epoch,
        summary: history.summary?.content,
        messages: history.messages.map(({ id, ...stored }) => stored),
      },
    };
  } finally {
    await port.close();
    await database.drop();
  }
}

describe(
  TEST_DATABASE_URL
    ? "the engine on the store port"
    : "the engine on the store port (PostgreSQL not run here: GLASSBOX_TEST_DATABASE_URL is not set)",
  () => {
    it("writes a run's steps, tool calls, facts and folds through the port, and reads them back as the model was sent them", async () => {
      const server = await startServer({ script });
      const sqlite = TARGETS.find((target) => target.kind === "sqlite") as StoreTarget;
      const on = await conversationOn(sqlite, server);

      expect(on.results.map((result) => result.stopReason)).toEqual(on.results.map(() => "final"));
      expect(on.results.at(-1)?.output).toBe("You drink green tea.");
      expect(on.facts).toEqual(["Drinks green tea"]);
      // The first run: its step 1 made both calls, each traced with its result, its step 2 answered.
      const first = on.steps[0]?.steps ?? [];
      expect(
        first.map((step) => step.toolCalls.map((record) => [record.id, record.name, record.envelope.status])),
      ).toEqual([
        [
          ["call_lookup", "lookup", "success"],
          ["call_remember", "remember", "success"],
        ],
        [],
      ]);
      expect(on.runs[0]).toMatchObject({
        runId: "run_1",
        status: "final",
        steps: 2,
        output: "Noted; you have 3 orders.",
        ended: true,
      });
      // Every loop request the server received is the payload the trace reads back for its step.
      const loopSent = on.sent.filter((body) => !isSummaryRequest(body));
      expect(on.payloads.map((payload) => (payload && "messages" in payload ? payload.messages : payload))).toEqual(
        loopSent.map((body) => body.messages.map(toMessage)),
      );
      // The conversation outgrew the budget: at least one fold, with its summarising call kept and costed into its run.
      expect(on.folds.length).toBeGreaterThan(0);
      const fold = on.folds[0];
      expect(fold).toMatchObject({ summaryFailed: false, call: { model: expect.any(String) } });
      expect(fold?.summary).toMatch(/^SUMMARY: /);
      expect(on.runs.find((run) => run.runId === fold?.runId)?.promptTokens).toBeGreaterThan(0);
      expect(on.history.summary).toBe(on.folds.at(-1)?.summary);
      expect(on.history.messages.at(-1)).toMatchObject({
        runId: "run_7",
        message: { role: "assistant", content: "You drink green tea." },
      });
    });

    if (TEST_DATABASE_URL)
      it("does the same on PostgreSQL, which reads back exactly what SQLite does", async () => {
        const server = await startServer({ script });
        const [sqlite, postgres] = [
          TARGETS.find((target) => target.kind === "sqlite"),
          TARGETS.find((target) => target.kind === "postgres"),
        ] as StoreTarget[];
        const onSqlite = await conversationOn(sqlite as StoreTarget, server);
        const onPostgres = await conversationOn(postgres as StoreTarget, server);
        expect(onPostgres.folds.length).toBeGreaterThan(0);
        expect(onPostgres.sent).toEqual(onSqlite.sent);
        expect(onPostgres.results).toEqual(onSqlite.results);
        for (const key of ["facts", "runs", "steps", "payloads", "folds", "history"] as const)
          expect(onPostgres[key], key).toEqual(onSqlite[key]);
      });
  },
);
