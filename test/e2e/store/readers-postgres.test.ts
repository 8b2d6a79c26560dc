// The readers on PostgreSQL, end to end: the engine (the agent as `npm start` builds it, the openai SDK
// against the scripted model running the demo's rules) runs web conversations on a PostgreSQL store
// of its own schema, and the trace API (sessions, runs, steps, payloads, approvals, feedback) and the
// command line (glassbox trace, usage, sessions, reset, in a child process with GLASSBOX_DATABASE_URL)
// read them back from there; no SQLite file is made. The API's answers are compared with the same
// conversation on SQLite. Runs only when GLASSBOX_TEST_DATABASE_URL names a database.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { demoReply } from "../../../src/demo-script.js";
import { loadConfig } from "../../../src/config.js";
import { createAgentConfig } from "../../../src/setup.js";
import { openStorePort, type AnyStorePort, type StorePortOptions } from "../../../src/store/index.js";
import { startScriptedModelServer, type ScriptedModelServer } from "../../../src/testing/scripted-model-server.js";
import { useCli } from "../helpers/cli.js";
import { TARGETS, TEST_DATABASE_URL, type StoreTarget, type TestDatabase } from "../helpers/store-targets.js";
import {
  CANCELLABLE_ORDER,
  getJson,
  postJson,
  quietLogger,
  startPipeline,
  WAIT,
  type WebServer,
} from "../../helpers/web.js";

interface RunBody {
  runId: string;
  status: string;
  done: boolean;
  output: string | null;
  sessionId: string;
  userId: string;
  approvals: Array<{ id: string; status: string; tool: string }>;
  feedback: Array<{ userId: string; rating: string; reason: string | null; source: string }>;
}

interface StepBody {
  step: number;
  model: string | null;
  content: string | null;
  toolCalls: Array<{ name: string; arguments: unknown; envelope: { status: string } }>;
}

const LOOKUP = `What is the status of order ${CANCELLABLE_ORDER}?`;
const CANCEL = `Cancel order ${CANCELLABLE_ORDER} because I ordered it twice`;

/** The web server and agent on one store (SQLite or PostgreSQL), the scripted model, and what to close. */
interface Bot {
  api: string;
  web: WebServer;
  port: AnyStorePort;
  database: TestDatabase;
  stop(): Promise<void>;
}

async function startBot(target: StoreTarget, model: ScriptedModelServer): Promise<Bot> {
  const database = await target.fresh();
  const shop = mkdtempSync(join(tmpdir(), "glassbox-readers-"));
  const port = await openStorePort(database.options);
  const config = loadConfig({
    OPENAI_BASE_URL: model.url,
    OPENAI_API_KEY: "test-key",
    LLM_MODEL: "scripted-model",
    GLASSBOX_SHOP_DB: join(shop, "shop.db"),
    GLASSBOX_DEMO: "true",
  });
  const log = quietLogger();
  const agent = await createAgentConfig(config, log, { port });
  const web = await startPipeline({
    config,
    agent,
    store: port,
    where: database.options,
    modelLabel: "scripted model (demo)",
  });
  return {
    api: `${web.url}api`,
    web,
    port,
    database,
    async stop() {
      await web.stop();
      await agent.mcp.close();
      await port.close();
      await database.drop();
      rmSync(shop, { recursive: true, force: true });
    },
  };
}

/**
 * Polls the run until it has ended (or, with `orPaused`, until it waits for approval with its approval
 * open: the pause is recorded with the run's end, its approvals just after, in a transaction of their own).
 */
async function untilDone(api: string, runId: string, orPaused = false): Promise<RunBody> {
  const deadline = Date.now() + WAIT.timeout;
  for (;;) {
    const { body } = await getJson<RunBody>(`${api}/runs/${runId}`);
    if (body.done || (orPaused && body.status === "awaiting_approval" && body.approvals.length > 0)) return body;
    if (Date.now() > deadline) throw new Error(`${runId} was still ${body.status} after ${WAIT.timeout} ms`);
    await new Promise((resolve) => setTimeout(resolve, WAIT.interval));
  }
}

/** The same conversation on a bot: a lookup, a cancel approved through the API, a 👎 with a reason. */
async function converse(api: string) {
  const start = async (session: string, input: string) => {
    const { status, body } = await postJson(`${api}/runs`, { session, input, userId: "alice" });
    expect(status).toBe(202);
    return untilDone(api, body.runId as string, true);
  };
  const lookup = await start("lookup", LOOKUP);
  const waiting = await start("cancel", CANCEL);
  const approval = waiting.approvals[0];
  if (!approval) throw new Error(`no approval was asked for: ${JSON.stringify(waiting)}`);
  const decided = await postJson(`${api}/approvals/${approval.id}`, { approved: true, userId: "alice" });
  expect(decided.status, JSON.stringify(decided.body)).toBe(200);
  const cancelled = await untilDone(api, waiting.runId);
  const rated = await postJson(`${api}/runs/${lookup.runId}/feedback`, {
    rating: "down",
    reason: "Too terse",
    userId: "alice",
  });
  expect(rated.status, JSON.stringify(rated.body)).toBe(200);
  return { lookup: (await getJson<RunBody>(`${api}/runs/${lookup.runId}`)).body, cancelled };
}

/** What the API reads back, without what differs between any two runs (ids, times, latencies). */
async function readBack(api: string, runIds: string[]) {
  const sessions = (await getJson<{ sessions: Array<Record<string, unknown>> }>(`${api}/sessions`)).body.sessions.map(
    ({ lastActivity, ...session }) => session,
  );
  const runs = await Promise.all(
    runIds.map(async (runId) => {
      const {
        runId: _id,
        startedAt,
        endedAt,
        approvals,
        feedback,
        ...run
      } = (await getJson<RunBody & Record<string, unknown>>(`${api}/runs/${runId}`)).body;
      const steps = (await getJson<{ steps: StepBody[] }>(`${api}/runs/${runId}/steps`)).body.steps.map(
        ({ step, model, content, toolCalls }) => ({
          step,
          model,
          content,
          toolCalls: toolCalls.map(({ name, arguments: args, envelope }) => ({
            name,
            arguments: args,
            status: envelope.status,
          })),
        }),
      );
      const payload = (
        await getJson<{ model: string | null; messages: unknown[] }>(`${api}/runs/${runId}/steps/1/payload`)
      ).body;
      return {
        run,
        approvals: approvals.map(({ id, ...rest }) => ({ status: rest.status, tool: rest.tool })),
        feedback: feedback.map(({ userId, rating, reason, source }) => ({ userId, rating, reason, source })),
        steps,
        payload: { model: payload.model, messages: payload.messages.length },
      };
    }),
  );
  return { sessions, runs };
}

describe.skipIf(!TEST_DATABASE_URL)(
  "readers on PostgreSQL: the trace API and the command line read what the engine wrote",
  () => {
    const postgres = TARGETS.find((target) => target.kind === "postgres") as StoreTarget;
    const sqlite = TARGETS.find((target) => target.kind === "sqlite") as StoreTarget;
    const { glassbox, dataDir } = useCli();
    let model: ScriptedModelServer;
    let bot: Bot;
    let conversation: Awaited<ReturnType<typeof converse>>;
    let cliEnv: Record<string, string>;

    beforeAll(async () => {
      model = await startScriptedModelServer({ script: (request) => demoReply(request) });
      bot = await startBot(postgres, model);
      conversation = await converse(bot.api);
      const options: StorePortOptions = bot.database.options;
      cliEnv = {
        GLASSBOX_DATABASE_URL: options.databaseUrl ?? "",
        GLASSBOX_DATABASE_SCHEMA: options.databaseSchema ?? "",
      };
    });
    afterAll(async () => {
      await bot?.stop();
      await model?.close();
    });

    it("GET /api/runs/:id, steps and payload read the runs, their tool calls, approval and feedback from PostgreSQL", async () => {
      const { lookup, cancelled } = conversation;
      expect(lookup).toMatchObject({ status: "final", done: true, sessionId: "web:lookup", userId: "web:alice" });
      expect(lookup.output).toContain(`Order ${CANCELLABLE_ORDER} is **paid**`);
      expect(lookup.feedback).toEqual([
        expect.objectContaining({ userId: "web:alice", rating: "down", reason: "Too terse", source: "web" }),
      ]);
      expect(cancelled).toMatchObject({
        status: "final",
        output: `Done: order ${CANCELLABLE_ORDER} is now **cancelled** (reason: I ordered it twice).`,
      });
      expect(cancelled.approvals).toEqual([expect.objectContaining({ tool: "cancel_order", status: "approved" })]);

      const steps = (await getJson<{ steps: StepBody[] }>(`${bot.api}/runs/${lookup.runId}/steps`)).body.steps;
      expect(steps.map((step) => step.toolCalls.map((call) => call.name))).toEqual([["get_order_status"], []]);
      expect(steps[0]?.toolCalls[0]).toMatchObject({
        arguments: { order_id: CANCELLABLE_ORDER },
        envelope: { status: "success" },
      });
      const payload = (
        await getJson<{ model: string; messages: Array<{ role: string; content: unknown }> }>(
          `${bot.api}/runs/${lookup.runId}/steps/2/payload`,
        )
      ).body;
      expect(payload.model).toBe("scripted-model");
      expect(payload.messages.map((message) => message.role)).toEqual(["system", "user", "assistant", "tool"]);
      expect((await getJson(`${bot.api}/runs/${lookup.runId}/steps/9/payload`)).status).toBe(404);
      // Those rows are PostgreSQL's, not some file's: another handle on the schema reads the same.
      const other = await openStorePort(bot.database.options);
      try {
        expect((await other.run(lookup.runId))?.status).toBe("final");
        expect(await other.feedbackOf(lookup.runId)).toEqual([
          expect.objectContaining({ rating: "down", reason: "Too terse" }),
        ]);
      } finally {
        await other.close();
      }
    });

    it("GET /api/sessions lists, searches and filters the sessions (rated down, awaiting approval) as on SQLite", async () => {
      const listed = (
        await getJson<{ sessions: Array<{ id: string; messageCount: number; runCount: number; startedBy: string }> }>(
          `${bot.api}/sessions`,
        )
      ).body.sessions;
      expect(listed.map((session) => [session.id, session.runCount, session.startedBy])).toEqual([
        ["web:cancel", 1, "web:alice"],
        ["web:lookup", 1, "web:alice"],
      ]);
      expect(listed.find((session) => session.id === "web:lookup")?.messageCount).toBe(4);
      const ids = async (query: string) =>
        (await getJson<{ sessions: Array<{ id: string }> }>(`${bot.api}/sessions?${query}`)).body.sessions.map(
          (session) => session.id,
        );
      expect(await ids("rated=down")).toEqual(["web:lookup"]);
      expect(await ids("rated=up")).toEqual([]);
      expect(await ids("tool=cancel_order")).toEqual(["web:cancel"]);
      expect(await ids("q=TWICE")).toEqual(["web:cancel"]);
      const runs = (await getJson<{ runs: RunBody[] }>(`${bot.api}/sessions/web:lookup/runs`)).body.runs;
      expect(runs.map((run) => run.runId)).toEqual([conversation.lookup.runId]);
      expect((await getJson(`${bot.api}/sessions/web:nobody/runs`)).status).toBe(404);
    });

    it("reads back exactly what the same conversation reads back on SQLite", async () => {
      const onSqlite = await startBot(sqlite, model);
      try {
        const there = await converse(onSqlite.api);
        const expected = await readBack(onSqlite.api, [there.lookup.runId, there.cancelled.runId]);
        expect(await readBack(bot.api, [conversation.lookup.runId, conversation.cancelled.runId])).toEqual(expected);
      } finally {
        await onSqlite.stop();
      }
    });

    it("glassbox trace and glassbox usage read PostgreSQL with GLASSBOX_DATABASE_URL, and make no SQLite file", async () => {
      const traced = await glassbox(["trace", "web:lookup"], cliEnv);
      expect(traced.stderr).toBe("");
      expect(traced.code).toBe(0);
      expect(traced.stdout).toContain(`Run ${conversation.lookup.runId} (final) by web:alice`);
      expect(traced.stdout).toMatch(new RegExp(`→ get_order_status.*${CANCELLABLE_ORDER}.*success`));
      expect(traced.stdout).toContain("👎 web:alice");
      expect(traced.stdout).toContain("Too terse");
      const single = await glassbox(["trace", conversation.cancelled.runId, "--json"], cliEnv);
      const [timeline] = JSON.parse(single.stdout) as Array<{ run: { runId: string }; steps: StepBody[] }>;
      expect(timeline?.run.runId).toBe(conversation.cancelled.runId);
      expect(timeline?.steps.flatMap((step) => step.toolCalls.map((call) => call.name))).toContain("cancel_order");

      const usage = await glassbox(["usage", "--json"], cliEnv);
      expect(usage.code).toBe(0);
      const totals = JSON.parse(usage.stdout) as {
        byUser: Array<{ key: string; runs: number }>;
        bySession: Array<{ key: string }>;
        feedback: { up: number; down: number };
      };
      expect(totals.byUser).toEqual([expect.objectContaining({ key: "web:alice", runs: 2 })]);
      expect(totals.bySession.map((total) => total.key).sort()).toEqual(["web:cancel", "web:lookup"]);
      expect(totals.feedback).toEqual({ up: 0, down: 1 });
      const table = await glassbox(["usage"], cliEnv);
      expect(table.stdout).toContain("web:alice");

      const sessions = await glassbox(["sessions", "--json"], cliEnv);
      expect((JSON.parse(sessions.stdout) as Array<{ id: string }>).map((session) => session.id).sort()).toEqual([
        "web:cancel",
        "web:lookup",
      ]);
      expect(existsSync(join(dataDir, "glassbox.db"))).toBe(false);
    });

    it("glassbox reset starts a PostgreSQL session afresh; an unknown one is said so", async () => {
      expect((await bot.port.sessionHistory("web:cancel")).messages.length).toBeGreaterThan(0);
      expect(await glassbox(["reset", "--session", "web:cancel"], cliEnv)).toMatchObject({
        code: 0,
        stdout: expect.stringContaining("Session web:cancel starts afresh"),
      });
      expect((await bot.port.sessionHistory("web:cancel")).messages).toEqual([]);
      expect(await glassbox(["reset", "--session", "web:nobody"], cliEnv)).toMatchObject({
        code: 1,
        stdout: "There is no session web:nobody; see npx glassbox sessions.\n",
      });
    });
  },
);
