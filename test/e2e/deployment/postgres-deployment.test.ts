// A PostgreSQL deployment, whole: the real src/main.ts with GLASSBOX_DATABASE_URL alone (no
// GLASSBOX_ROLE) runs everything in one process on PostgreSQL, in a schema of its own, never on the
// SQLite file; an HTTP API run is answered by the scripted model and its trace is read back from
// the GET routes, each user's token reading only that user's sessions, it is replayed on the same
// process's model, and a run stopped through
// the API ends cancelled on its worker. Then GLASSBOX_ROLE=ingress
// beside one worker process: in headless Chromium the chat page sends a message through ingress,
// shows the approval the worker asked for, approves it, shows the worker's tool call and the answer, and the trace viewer
// shows the run the worker ran. Runs only when GLASSBOX_TEST_DATABASE_URL is set.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import {
  startScriptedModelServer,
  type ChatCompletionRequestBody,
  type ScriptedModelServer,
  type ScriptedReply,
} from "../../../src/testing/scripted-model-server.js";
import {
  createTestDatabase,
  NEEDS_DATABASE,
  TEST_DATABASE_URL,
  type TestDatabase,
} from "../fixtures/queue-database.js";
import { startRoleProcess, type RoleProcess } from "../fixtures/role-processes.js";
import {
  collectPageErrors,
  DESKTOP,
  getJson,
  launchChromium,
  postJson,
  readEvents,
  typesOf,
  VISIBLE,
} from "../../helpers/web.js";

const WAIT = { timeout: 30_000, interval: 100 };
const ALICE = "alice-token-for-the-deployment-test";
const BOB = "bob-token-for-the-deployment-test";
const SCHEMA = "deployment_one";

const lastText = (body: ChatCompletionRequestBody) => String(body.messages.at(-1)?.content ?? "");

/** Arithmetic goes through the calculator; "clean the cache" asks for the dangerous wipe_cache, then says whether it ran. */
function reply(body: ChatCompletionRequestBody): ScriptedReply {
  const last = body.messages.at(-1);
  const asked = String(body.messages.findLast((message) => message.role === "user")?.content ?? "");
  if (asked.includes("forever")) return { hang: true };
  if (last?.role === "user")
    return asked.includes("cache")
      ? { toolCalls: [{ name: "wipe_cache", arguments: "{}" }] }
      : { toolCalls: [{ name: "calculator", arguments: '{"expression":"6*7"}' }] };
  if (asked.includes("cache")) return { content: `done: ${lastText(body).includes("wiped") ? "wiped" : "not wiped"}.` };
  const answer = `It is ${/"result":(\d+)/.exec(lastText(body))?.[1] ?? "unknown"}.`;
  return body.stream ? slowStream(["It is ", answer.slice("It is ".length)]) : { content: answer };
}

/** An answer streamed as a server sends it, its pieces well apart: a page following from another process sees them come. */
function slowStream(pieces: string[]): ScriptedReply {
  const chunk = (delta: Record<string, unknown>, finishReason: string | null = null) =>
    `data: ${JSON.stringify({ id: "chatcmpl-slow", object: "chat.completion.chunk", created: 1, model: "gpt-4o-mini", choices: [{ index: 0, delta, finish_reason: finishReason }] })}\n\n`;
  const usage = `data: ${JSON.stringify({ id: "chatcmpl-slow", object: "chat.completion.chunk", created: 1, model: "gpt-4o-mini", choices: [], usage: { prompt_tokens: 20, completion_tokens: 4, total_tokens: 24 } })}\n\n`;
  const body = [
    chunk({ role: "assistant", content: "" }),
    ...pieces.map((content) => chunk({ content })),
    `${chunk({}, "stop") + usage}data: [DONE]\n\n`,
  ];
  return { raw: { body, contentType: "text/event-stream", partGapMs: 400 } };
}

describe.runIf(Boolean(TEST_DATABASE_URL))(`a PostgreSQL deployment (${NEEDS_DATABASE})`, () => {
  let database: TestDatabase | undefined;
  let model: ScriptedModelServer | undefined;
  let processes: RoleProcess[] = [];
  let directory: string | undefined;
  let browser: Browser | undefined;
  afterEach(async () => {
    for (const running of processes) await running.kill();
    await model?.close();
    await database?.drop();
    if (directory) rmSync(directory, { recursive: true, force: true });
    processes = [];
    database = model = directory = undefined;
  }, 30_000);
  afterAll(async () => {
    await browser?.close();
  });

  async function setUp(): Promise<{ database: TestDatabase; model: ScriptedModelServer; sqlite: string }> {
    directory = mkdtempSync(join(tmpdir(), "glassbox-deployment-"));
    database = await createTestDatabase(TEST_DATABASE_URL as string);
    model = await startScriptedModelServer({ script: (body) => reply(body) });
    return { database, model, sqlite: join(directory, "never-made.db") };
  }

  it("GLASSBOX_DATABASE_URL alone runs everything on PostgreSQL and says so; an API run's trace is read back from the GET routes, by its user only", async () => {
    const { database, model, sqlite } = await setUp();
    const bot = await startRoleProcess("url-only", {
      GLASSBOX_DATABASE_URL: database.url,
      GLASSBOX_DATABASE_SCHEMA: SCHEMA,
      GLASSBOX_DB: sqlite,
      GLASSBOX_WEB_PORT: "0",
      GLASSBOX_API_USERS: JSON.stringify({ [ALICE]: "alice", [BOB]: "bob" }),
      OPENAI_BASE_URL: model.url,
      OPENAI_API_KEY: "sk-test-deployment",
    });
    processes.push(bot);
    const started = await bot.line((line) => /^glassbox on PostgreSQL/.test(line.msg));
    expect(started.msg).toContain(
      `(schema ${SCHEMA}), everything in one process (GLASSBOX_DATABASE_URL is set: GLASSBOX_ROLE=all)`,
    );
    expect(started).toMatchObject({ role: "all", store: "postgresql" });
    const base = (started.chat as string).replace(/\/$/, "");
    const alice = { authorization: `Bearer ${ALICE}` };
    const bob = { authorization: `Bearer ${BOB}` };

    // Followed live: the stream opened before the run hears it start, its steps and its end, from what the worker stored.
    let accepted: { status: number; body: Record<string, unknown> } | undefined;
    const live = await readEvents(`${base}/api/sessions/web:maths/events`, {
      headers: alice,
      onOpen: () =>
        void postJson(`${base}/api/runs`, { session: "maths", input: "What is 6*7?" }, alice).then(
          (answer) => (accepted = answer),
        ),
      until: (event) => event.type === "run_end",
      timeoutMs: WAIT.timeout,
    });
    expect(accepted?.status).toBe(202);
    const runId = accepted?.body.runId as string;
    // Each step as the worker stored it: the model's call for the calculator, its result, the answering
    // call, then the end. The calculator's start shows only if a reading fell in the millisecond it ran.
    // (The answer's text comes too, in one piece: this is the worker's first answer, which its model layer
    // holds back to its end, as it cannot yet tell this server's answers from thinking. It may come after
    // the answering call's end, or not at all if the run had ended when the piece came.)
    const shown = live.events.filter(
      (event) => !["tool_start", "model_start", "model_delta"].includes(event.event.type),
    );
    expect(typesOf(shown)).toEqual(["run_start", "model_end", "tool_end", "model_end", "run_end"]);
    expect(typesOf(live.events).join()).toMatch(
      /^run_start,model_end,(tool_start,)?tool_end,(model_start,model_delta,)?model_end,(model_start,model_delta,)?run_end$/,
    );
    expect(shown[2]?.event).toMatchObject({
      runId,
      step: 1,
      record: { name: "calculator", envelope: { status: "success" } },
    });
    expect(shown[4]?.event).toMatchObject({ runId, stopReason: "final", output: "It is 42.", steps: 2 });

    // The next answer streams: its text comes as the worker's model writes it (a piece 400 ms apart
    // here), after the calculator's result and before the run's end.
    const again = await readEvents(`${base}/api/sessions/web:maths/events`, {
      headers: alice,
      onOpen: () => void postJson(`${base}/api/runs`, { session: "maths", input: "What is 6*7, once more?" }, alice),
      until: (event) => event.type === "run_end" && event.runId !== runId,
      timeoutMs: WAIT.timeout,
    });
    const second = again.events.filter(({ event }) => event.runId !== runId);
    expect(typesOf(second).join()).toMatch(
      /^run_start,model_end,(tool_start,)?tool_end,model_start,(model_delta,)+(model_end,)?(model_delta,)*run_end$/,
    );
    const streamed = second.flatMap(({ event }) => (event.type === "model_delta" ? [event] : []));
    expect(streamed.map((event) => event.text).join("")).toBe("It is 42.");
    expect(streamed.every((event) => event.step === 2)).toBe(true);

    const run = await getJson<Record<string, unknown>>(`${base}/api/runs/${runId}`, alice);
    expect(run).toMatchObject({
      status: 200,
      body: { runId, status: "final", done: true, output: "It is 42.", userId: "web:alice", sessionId: "web:maths" },
    });
    const steps = await getJson<{ steps: Array<{ step: number; toolCalls: Array<{ name: string }> }> }>(
      `${base}/api/runs/${runId}/steps`,
      alice,
    );
    expect(steps.body.steps.map((step) => step.toolCalls.map((call) => call.name))).toEqual([["calculator"], []]);
    const sent = await getJson<{ messages: Array<{ role: string; content: unknown }> }>(
      `${base}/api/runs/${runId}/steps/1/payload`,
      alice,
    );
    expect(sent.body.messages.at(-1)).toMatchObject({ role: "user", content: "What is 6*7?" });
    const sessions = await getJson<{ sessions: Array<{ id: string }> }>(`${base}/api/sessions`, alice);
    expect(sessions.body.sessions.map((session) => session.id)).toEqual(["web:maths"]);
    const ofSession = await getJson<{ runs: Array<{ runId: string }> }>(`${base}/api/sessions/web:maths/runs`, alice);
    expect(ofSession.body.runs.map((one) => one.runId)).toEqual([runId, second[0]?.event.runId]);
    const page = await fetch(`${base}/trace`);
    expect([page.status, await page.text()]).toEqual([200, expect.stringContaining("<title>")]);

    // The pages name the tools of the worker in this process, and suggest what they can do.
    const info = await getJson<{ tools: string[]; hints: string[] }>(`${base}/api/info`, alice);
    expect(info.body.tools).toContain("calculator");
    expect(info.body.hints.length).toBeGreaterThan(0);

    // Everything runs here, the model too: the trace viewer's replay re-runs the run on it (its tools answered from the recording).
    const before = model.requests.length;
    const replayed = await postJson(`${base}/api/runs/${runId}/replay`, {}, alice);
    expect(replayed).toMatchObject({
      status: 200,
      body: {
        runId,
        original: { output: "It is 42." },
        replay: { output: "It is 42." },
        sameToolCalls: true,
        sameAnswer: true,
        notRecorded: 0,
      },
    });
    expect(model.requests.length).toBe(before + 2);
    expect((await postJson(`${base}/api/runs/${runId}/replay`, {}, bob)).status).toBe(404);

    // Bob's token reads none of Alice's; no token reads nothing.
    expect((await getJson(`${base}/api/runs/${runId}`, bob)).status).toBe(404);
    expect((await getJson(`${base}/api/runs/${runId}/steps`, bob)).status).toBe(404);
    expect((await getJson<{ sessions: unknown[] }>(`${base}/api/sessions`, bob)).body.sessions).toEqual([]);
    expect((await getJson(`${base}/api/sessions/web:maths/runs`, bob)).status).toBe(404);
    expect((await getJson(`${base}/api/sessions`)).status).toBe(401);

    // Stop from the API reaches the run on the worker, through the store.
    const slow = await postJson(`${base}/api/runs`, { session: "slow", input: "think forever" }, alice);
    const slowRun = `${base}/api/runs/${slow.body.runId as string}`;
    await vi.waitFor(async () => expect((await getJson(slowRun, alice)).body.status).toBe("running"), WAIT);
    expect(await postJson(`${slowRun}/cancel`, {}, bob)).toMatchObject({ status: 404 });
    expect(await postJson(`${slowRun}/cancel`, {}, alice)).toMatchObject({ status: 202, body: { cancelling: true } });
    await vi.waitFor(
      async () => expect((await getJson(slowRun, alice)).body).toMatchObject({ status: "cancelled", done: true }),
      WAIT,
    );

    // The run is in PostgreSQL, in the schema asked for, and no SQLite file was made beside it.
    const stored = await database.pool.query<{ status: string }>(`select status from ${SCHEMA}.runs where id = $1`, [
      runId,
    ]);
    expect(stored.rows).toEqual([{ status: "final" }]);
    expect(existsSync(sqlite)).toBe(false);
    expect(bot.lines.filter((line) => line.level >= 50)).toEqual([]);
    expect(await bot.stop()).toBe(0);
  }, 90_000);

  it("GLASSBOX_ROLE=ingress beside one worker: the chat page asks, approves and answers, and the trace viewer shows the worker's run", async () => {
    const { database, model, sqlite } = await setUp();
    const shared = {
      GLASSBOX_DATABASE_URL: database.url,
      GLASSBOX_DATABASE_SCHEMA: SCHEMA,
      GLASSBOX_DB: sqlite,
      LLM_MODEL: "gpt-4o-mini",
    };
    const [ingress, worker] = await Promise.all([
      startRoleProcess("ingress", { ...shared, GLASSBOX_WEB_PORT: "0" }),
      startRoleProcess("worker", {
        ...shared,
        OPENAI_BASE_URL: model.url,
        OPENAI_API_KEY: "sk-test-deployment",
        GLASSBOX_TOOLS: new URL("../fixtures/worker-tools.ts", import.meta.url).pathname,
      }),
      launchChromium().then((launched) => (browser = launched)),
    ]);
    processes.push(ingress, worker as RoleProcess);
    const started = await ingress.line((line) => /^glassbox on PostgreSQL/.test(line.msg));
    const chatUrl = started.chat as string;
    const pageErrors: string[] = [];
    const chat = collectPageErrors(await (browser as Browser).newPage(DESKTOP), pageErrors);
    await chat.goto(chatUrl);
    await chat.locator("#connection", { hasText: "Live" }).waitFor(VISIBLE);
    await chat.fill("#message", "Please clean the cache");
    await chat.click("#send");

    const approve = chat.locator(".approval button.approve");
    await approve.waitFor(VISIBLE);
    await approve.click();
    await chat.locator(".message.assistant .answer", { hasText: "done: wiped." }).waitFor(VISIBLE);
    await chat.locator(".approval .outcome", { hasText: "Approved by you" }).waitFor(VISIBLE);
    // The worker's tool call, read back from its stored step: shown in the activity, after the approval, before the answer.
    const activity = chat.locator(".message.assistant .activity");
    await activity.locator(".tool.ok", { hasText: "wipe_cache" }).waitFor(VISIBLE);
    expect(await activity.locator("li").evaluateAll((items) => items.map((item) => item.className))).toEqual([
      "approval-item",
      "tool ok",
    ]);
    expect(model.requests).toHaveLength(2); // both calls were the worker's: ingress has no model
    const ran = await chat.locator(".message.assistant").first().getAttribute("data-run-id");
    // Ingress loads no tools: it names the live worker's, as the worker recorded them, and suggests what they can do.
    await vi.waitFor(
      async () =>
        expect((await getJson<{ tools: string[]; hints: string[] }>(`${chatUrl}api/info`)).body.tools).toContain(
          "wipe_cache",
        ),
      WAIT,
    );
    expect((await getJson<{ hints: string[] }>(`${chatUrl}api/info`)).body.hints.length).toBeGreaterThan(0);
    const refused = await postJson(`${chatUrl}api/runs/${String(ran)}/replay`, {}); // nor does it replay
    expect(refused).toMatchObject({ status: 503, body: { error: expect.stringContaining("does not replay runs") } });
    const session = `web:${String(await chat.evaluate('localStorage.getItem("glassbox.session")'))}`;

    const trace = collectPageErrors(await (browser as Browser).newPage(DESKTOP), pageErrors);
    await trace.goto(`${chatUrl}trace#session=${encodeURIComponent(session)}`);
    await trace.locator(`.session-list a[data-session-id="${session}"]`).waitFor(VISIBLE);
    await vi.waitFor(
      async () => expect(await trace.locator('#session-detail .waterfall [data-kind="model"]').count()).toBe(2),
      WAIT,
    );
    const detail = await trace.locator("#session-detail").innerText();
    expect(detail).toContain("wipe_cache");
    expect(detail).toContain("done: wiped.");
    expect(pageErrors).toEqual([]);
    expect([...ingress.lines, ...(worker as RoleProcess).lines].filter((line) => line.level >= 50)).toEqual([]);
    expect(await ingress.stop()).toBe(0);
  }, 120_000);
});
