// The trace viewer's API over the real server, agent and SQLite files: the session list (what tells
// sessions apart, search and filters, bounded), where memory folded a session, what a step sent, and
// stopping a run in progress.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { demoReply } from "../../../../src/demo-script.js";
import { runAgent } from "../../../../src/agent/loop.js";
import type { ChatCompletionRequestBody, ScriptedReply } from "../../../../src/testing/scripted-model-server.js";
import {
  CANCELLABLE_ORDER,
  cleanUp,
  getJson,
  postJson,
  readEvents,
  startPlayground,
  tempDir,
  WAIT,
  type Playground,
} from "../../../helpers/web.js";

interface Listed {
  id: string;
  adapter: string;
  firstMessage: string | null;
  runCount: number;
  messageCount: number;
  lastActivity: string;
  promptTokens: number;
  completionTokens: number;
  cost: number | null;
  hasErrors: boolean;
  awaitingApproval: boolean;
}

const lastUserText = (request: ChatCompletionRequestBody) =>
  String(request.messages.findLast((message) => message.role === "user")?.content ?? "");

/** The demo's rules, with two more: "BREAK" makes the model fail, "HANG" makes it never answer. */
function script(request: ChatCompletionRequestBody): ScriptedReply {
  const asked = lastUserText(request);
  if (request.messages.at(-1)?.role === "user" && asked.includes("BREAK"))
    return { error: { status: 400, message: "The model refuses this on purpose." } };
  if (request.messages.at(-1)?.role === "user" && asked.includes("HANG")) return { hang: true };
  return demoReply(request);
}

/** Waits (outside a test: expect.poll cannot) until the run no longer runs. */
async function settled(runUrl: string): Promise<void> {
  const deadline = Date.now() + WAIT.timeout;
  while ((await getJson<{ status: string }>(runUrl)).body.status.match(/^(accepted|running)$/)) {
    if (Date.now() > deadline) throw new Error(`${runUrl} was still running after ${WAIT.timeout} ms`);
    await new Promise((resolve) => setTimeout(resolve, WAIT.interval));
  }
}

describe("trace API: sessions, search and filters", () => {
  let playground: Playground;
  let api: string;
  const list = async (query = "") => {
    const { status, body } = await getJson<{ sessions: Listed[]; more: boolean; error?: string }>(
      `${api}/sessions${query ? `?${query}` : ""}`,
    );
    expect(status, body.error).toBe(200);
    return body;
  };
  const ids = async (query: string) => (await list(query)).sessions.map((session) => session.id).sort();
  const run = async (session: string, input: string) => {
    const { status, body } = await postJson(`${api}/runs`, { session, input, userId: "alice" });
    expect(status).toBe(202);
    const runId = body.runId as string;
    await settled(`${api}/runs/${runId}`);
    return runId;
  };

  beforeAll(async () => {
    playground = await startPlayground({ script });
    api = `${playground.url}api`;
    await run("lookup", `What is the status of order ${CANCELLABLE_ORDER}?`);
    await run("sums", "What is 12*7+3?");
    await run("broken", "BREAK please");
    await run("waiting", `Cancel order ${CANCELLABLE_ORDER}`);
    await runAgent(playground.agent, {
      input: "What time is it, 100% sure_?",
      sessionId: "cli:terminal",
      userId: "cli",
    });
  });
  afterAll(cleanUp);

  it("lists each session with its first message, adapter, last activity, runs, tokens, cost and whether a run failed or waits", async () => {
    const { sessions, more } = await list();
    expect(more).toBe(false);
    expect(sessions.map((session) => session.id)).toEqual([
      "cli:terminal",
      "web:waiting",
      "web:broken",
      "web:sums",
      "web:lookup",
    ]);
    const byId = new Map(sessions.map((session) => [session.id, session]));
    expect(byId.get("web:lookup")).toMatchObject({
      adapter: "web",
      firstMessage: `What is the status of order ${CANCELLABLE_ORDER}?`,
      runCount: 1,
      cost: null,
      hasErrors: false,
      awaitingApproval: false,
    });
    expect(byId.get("web:lookup")?.promptTokens).toBeGreaterThan(0);
    expect(byId.get("web:lookup")?.messageCount).toBe(4); // the question, the call, its result, the answer
    expect(Date.parse(byId.get("web:lookup")?.lastActivity ?? "")).toBeGreaterThan(Date.now() - 60_000);
    expect(byId.get("web:broken")).toMatchObject({ hasErrors: true, awaitingApproval: false });
    expect(byId.get("web:waiting")).toMatchObject({ hasErrors: false, awaitingApproval: true });
    expect(byId.get("cli:terminal")).toMatchObject({ adapter: "cli", firstMessage: "What time is it, 100% sure_?" });
  });

  it("searches the text of every message (a tool's result too), without case, with % and _ read as themselves", async () => {
    expect(await ids("q=usb-c%20CHARGER")).toEqual(["web:lookup"]); // only in the lookup's result
    expect(await ids(`q=${CANCELLABLE_ORDER}`)).toEqual(["web:lookup", "web:waiting"]);
    expect(await ids(`q=${encodeURIComponent("12*7")}`)).toEqual(["web:sums"]);
    expect(await ids(`q=${encodeURIComponent("100%")}`)).toEqual(["cli:terminal"]);
    expect(await ids(`q=${encodeURIComponent("%")}`)).toEqual(["cli:terminal"]);
    expect(await ids(`q=${encodeURIComponent("e_?")}`)).toEqual(["cli:terminal"]);
    expect(await ids(`q=${encodeURIComponent("' OR 1=1 --")}`)).toEqual([]);
    expect(await ids("q=nothing-says-this")).toEqual([]);
  });

  it("filters by adapter, by status (errors, waiting for approval), by tool used and by date, and the filters combine", async () => {
    expect(await ids("adapter=cli")).toEqual(["cli:terminal"]);
    expect(await ids("adapter=slack")).toEqual([]);
    expect(await ids("status=error")).toEqual(["web:broken"]);
    expect(await ids("status=awaiting_approval")).toEqual(["web:waiting"]);
    expect(await ids("tool=get_order_status")).toEqual(["web:lookup"]);
    expect(await ids("tool=calculator")).toEqual(["web:sums"]);
    expect(await ids("tool=current_time")).toEqual(["cli:terminal"]);
    const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
    expect(await ids(`from=${hourAgo}`)).toHaveLength(5);
    expect(await ids(`to=${hourAgo}`)).toEqual([]);
    expect(await ids("from=2001-01-01&to=2001-01-01")).toEqual([]);
    expect(await ids(`from=${new Date().toISOString().slice(0, 10)}&adapter=web&q=order`)).toEqual([
      "web:lookup",
      "web:waiting",
    ]);
  });

  it("is bounded: a limit on sessions returned (saying there are more) and on the search's length, each refusal one sentence", async () => {
    const limited = await list("limit=2");
    expect(limited.sessions).toHaveLength(2);
    expect(limited.more).toBe(true);
    const refusals = await Promise.all(
      [
        `q=${"x".repeat(201)}`,
        "limit=0",
        "limit=201",
        "limit=many",
        "status=sad",
        "adapter=Slack!",
        "tool=no%20spaces",
        "from=yesterday",
      ].map((query) => getJson<{ error: string }>(`${api}/sessions?${query}`)),
    );
    expect(refusals.map(({ status }) => status)).toEqual(refusals.map(() => 400));
    expect(refusals.map(({ body }) => body.error)).toEqual([
      "The search is 201 characters long; the limit is 200.",
      'Give "limit" as a whole number from 1 to 200.',
      'Give "limit" as a whole number from 1 to 200.',
      'Give "limit" as a whole number from 1 to 200.',
      'Give "status" as one of error, awaiting_approval.',
      'Give "adapter" as the first part of a session id, such as slack, discord, web or cli.',
      'Give "tool" as a tool name: letters, digits, "_" or "-" (up to 64).',
      'Give "from" as a date (2024-04-10) or a moment in ISO 8601 (2024-04-10T08:00:00Z).',
    ]);
  });

  it("says what a step sent: its messages, the model that answered, and the rest of the request where the trace keeps it", async () => {
    const { body } = await getJson<{ runs: Array<{ runId: string }> }>(`${api}/sessions/web:lookup/runs`);
    const { body: payload } = await getJson<{
      model: string;
      messages: Array<{ role: string }>;
      request: { tools?: Array<{ function: { name: string } }> } | null;
    }>(`${api}/runs/${body.runs[0]?.runId}/steps/1/payload`);
    expect(payload.model).toBe("scripted-model");
    expect(payload.messages.map((message) => message.role)).toEqual(["system", "user"]);
    // What the model server was sent for that step is the ground truth.
    const sent = playground.model.requests.find(
      (request) =>
        lastUserText(request.body) === `What is the status of order ${CANCELLABLE_ORDER}?` &&
        request.body.messages.length === 2,
    )?.body;
    const names = (tools: unknown[] | undefined) =>
      (tools ?? []).map((tool) => (tool as { function: { name: string } }).function.name);
    if (payload.request === null)
      expect(Object.keys(payload)).toEqual(["runId", "step", "model", "messages", "request"]);
    else expect(names(payload.request.tools)).toEqual(names(sent?.tools));
  });
});

describe("trace API: stopping a run", () => {
  let playground: Playground;
  let api: string;
  beforeAll(async () => {
    playground = await startPlayground({ script });
    api = `${playground.url}api`;
  });
  afterAll(cleanUp);

  it("cancels a run in progress: it ends as cancelled; a finished one, a second stop and a body that is not JSON are refused", async () => {
    const { body } = await postJson(`${api}/runs`, { session: "stopping", input: "HANG on" });
    const runId = body.runId as string;
    await expect
      .poll(() => playground.model.requests.filter((request) => lastUserText(request.body) === "HANG on").length, WAIT)
      .toBe(1);
    expect((await fetch(`${api}/runs/${runId}/cancel`, { method: "POST" })).status).toBe(415);

    expect(await postJson(`${api}/runs/${runId}/cancel`, {})).toEqual({
      status: 202,
      body: { runId, cancelling: true },
    });
    await expect
      .poll(async () => (await getJson<{ status: string }>(`${api}/runs/${runId}`)).body.status, WAIT)
      .toBe("cancelled");
    expect(await postJson(`${api}/runs/${runId}/cancel`, {})).toEqual({
      status: 409,
      body: { error: "This run has already ended (cancelled)." },
    });
    expect((await postJson(`${api}/runs/run_nope/cancel`, {})).status).toBe(404);

    // The session goes on: the next message runs.
    const next = await postJson(`${api}/runs`, { session: "stopping", input: "What is 2+2?" });
    await expect
      .poll(
        async () => (await getJson<{ output: string | null }>(`${api}/runs/${next.body.runId as string}`)).body.output,
        WAIT,
      )
      .toBe("2+2 = 4");
  });

  it("a paused run cannot be stopped (it is not running): the sentence says how to end it", async () => {
    const { body } = await postJson(`${api}/runs`, { session: "paused", input: `Cancel order ${CANCELLABLE_ORDER}` });
    const runId = body.runId as string;
    await expect
      .poll(async () => (await getJson<{ status: string }>(`${api}/runs/${runId}`)).body.status, WAIT)
      .toBe("awaiting_approval");
    expect(await postJson(`${api}/runs/${runId}/cancel`, {})).toEqual({
      status: 409,
      body: {
        error: "This run is paused, waiting for a decision on its approval; deny it, or send a new message, to end it.",
      },
    });
  });
});

describe("trace API: where memory folded a session", () => {
  let playground: Playground;
  let api: string;
  beforeAll(async () => {
    // A small context budget, so a few exchanges fold the older ones into a summary.
    playground = await startPlayground({ env: { GLASSBOX_CONTEXT_TOKENS: "1600" } });
    api = `${playground.url}api`;
  });
  afterAll(cleanUp);

  it("lists each fold with the step it made room for, the summary it wrote and how many messages it took out", async () => {
    for (const order of ["20240315001", "20240410003", "20240418004", "20240315001", "20240410003", "20240418004"]) {
      const { body } = await postJson(`${api}/runs`, {
        session: "long",
        input: `What is the status of order ${order}?`,
      });
      await expect
        .poll(async () => (await getJson<{ done: boolean }>(`${api}/runs/${body.runId as string}`)).body.done, WAIT)
        .toBe(true);
    }
    const { body } = await getJson<{
      runs: Array<{ runId: string }>;
      folds: Array<{
        runId: string | null;
        step: number | null;
        summary: string;
        summaryTokens: number;
        foldedMessages: number;
        summaryFailed: boolean;
      }>;
    }>(`${api}/sessions/web:long/runs`);
    expect(body.folds.length).toBeGreaterThan(0);
    const [fold] = body.folds;
    expect(fold?.summary).toMatch(/^Earlier, the user asked about order/);
    expect(fold?.summaryTokens).toBeGreaterThan(0);
    expect(fold?.foldedMessages).toBeGreaterThan(0);
    expect(fold?.summaryFailed).toBe(false);
    // The step it made room for is the first to send that summary to the model: the one before did not.
    const steps: Array<{ runId: string; step: number }> = [];
    for (const { runId } of body.runs)
      steps.push(
        ...(await getJson<{ steps: Array<{ step: number }> }>(`${api}/runs/${runId}/steps`)).body.steps.map(
          ({ step }) => ({ runId, step }),
        ),
      );
    const sent = async (at: { runId: string; step: number } | undefined) =>
      JSON.stringify(
        (await getJson<{ messages: unknown[] }>(`${api}/runs/${at?.runId}/steps/${at?.step}/payload`)).body.messages,
      );
    const index = steps.findIndex((at) => at.runId === fold?.runId && at.step === fold?.step);
    expect(index).toBeGreaterThan(0);
    expect(await sent(steps[index])).toContain(JSON.stringify(fold?.summary).slice(1, -1));
    expect(await sent(steps[index - 1])).not.toContain("Earlier, the user asked");
  });
});

describe("trace API: a pipeline's run", () => {
  afterAll(cleanUp);

  it("regression: the event stream of a pipeline's run ends with the pipeline (it stayed open: the end came under the last stage's id)", async () => {
    const agentsFile = join(tempDir(), "agents.json");
    writeFileSync(
      agentsFile,
      JSON.stringify({
        agents: {
          first: { description: "One.", systemPrompt: "You are FIRST." },
          second: { description: "Two.", systemPrompt: "You are SECOND." },
        },
        pipelines: { two: ["first", "second"] },
      }),
    );
    const playground = await startPlayground({
      env: { GLASSBOX_AGENTS: agentsFile },
      script: (request) => ({
        content: `${String(request.messages[0]?.content).includes("FIRST") ? "first" : "second"} saw: ${lastUserText(request)}`,
      }),
    });
    const { body } = await postJson(`${playground.url}api/runs`, { session: "pipe", input: "/pipeline two hello" });
    const stream = await readEvents(`${playground.url}api/runs/${body.runId as string}/events`);
    expect(stream.endedByServer).toBe(true);
    expect(stream.events.filter(({ event }) => event.type === "run_start")).toHaveLength(1);
    const { body: runs } = await getJson<{ runs: Array<{ input: string; output: string }> }>(
      `${playground.url}api/sessions/web:pipe/runs`,
    );
    expect(runs.runs.map((run) => [run.input, run.output])).toEqual([
      ["/pipeline two hello", "first saw: hello"],
      ["first saw: hello", "second saw: first saw: hello"],
    ]);
    // Each stage is linked to the pipeline's first run, with its place and the pipeline's name.
    const { body: linked } = await getJson<{
      runs: Array<{ pipelineRunId: string; pipelineStage: number; pipelineStages: number; pipelineName: string }>;
    }>(`${playground.url}api/sessions/web:pipe/runs`);
    expect(
      linked.runs.map((run) => [run.pipelineRunId, run.pipelineStage, run.pipelineStages, run.pipelineName]),
    ).toEqual([
      [body.runId, 1, 2, "two"],
      [body.runId, 2, 2, "two"],
    ]);
    // Polled by the id POST /api/runs gave, the pipeline answers as a whole (regression: it said stage 1's answer).
    const { body: polled } = await getJson<{
      status: string;
      done: boolean;
      output: string;
      stages: Array<{ stage: number; status: string }>;
    }>(`${playground.url}api/runs/${body.runId as string}`);
    expect(polled).toMatchObject({ status: "final", done: true, output: "second saw: first saw: hello" });
    expect(polled.stages.map((stage) => [stage.stage, stage.status])).toEqual([
      [1, "final"],
      [2, "final"],
    ]);
  });
});
