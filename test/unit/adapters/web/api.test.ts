// The HTTP API of the web playground, without a browser: the real server over the real agent
// (openai SDK → scripted model server running the demo's rules) and real SQLite files.
import Database from "better-sqlite3";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { demoReply } from "../../../../src/demo-script.js";
import { acceptMessage, newRunId } from "../../../../src/conversations/turns.js";
import { GlassboxError } from "../../../../src/agent/errors.js";
import { runAgent } from "../../../../src/agent/loop.js";
import { MAX_STREAMS_PER_CALLER } from "../../../../src/adapters/web/stream-limits.js";
import { deferred } from "../../../helpers/agent.js";
import {
  CANCELLABLE_ORDER,
  cleanUp,
  getJson,
  NO_MODEL,
  PENDING_ORDER,
  postJson,
  readEvents,
  startPlayground,
  startWithoutModel,
  typesOf,
  WAIT,
  type Playground,
} from "../../../helpers/web.js";

interface RunBody {
  runId: string;
  status: string;
  done: boolean;
  output: string | null;
  approvals: Array<{ id: string; status: string; tool: string; requester: string; arguments: Record<string, unknown> }>;
}

describe("web API: runs, events and approvals", () => {
  let playground: Playground;
  let api: string;
  beforeAll(async () => {
    playground = await startPlayground();
    api = `${playground.url}api`;
  });
  afterAll(cleanUp);

  const startRun = async (session: string, input: string, userId = "alice") => {
    const { status, body } = await postJson(`${api}/runs`, { session, input, userId });
    expect(status).toBe(202);
    expect(body.session).toBe(`web:${session}`);
    return body.runId as string;
  };

  const pollUntilDone = async (runId: string) => {
    let run: RunBody | undefined;
    await expect.poll(async () => (run = (await getJson<RunBody>(`${api}/runs/${runId}`)).body).done, WAIT).toBe(true);
    return run as RunBody;
  };

  it("starts a run in the background and answers at once with its id; polling shows it finish with the answer", async () => {
    const runId = await startRun("polling", `What is the status of order ${CANCELLABLE_ORDER}?`);
    expect(runId).toMatch(/^run_/);
    const run = await pollUntilDone(runId);
    expect(run).toMatchObject({
      runId,
      status: "final",
      sessionId: "web:polling",
      userId: "web:alice",
      input: `What is the status of order ${CANCELLABLE_ORDER}?`,
    });
    expect(run.output).toContain(`Order ${CANCELLABLE_ORDER} is **paid**`);
  });

  it('answers "what can you do here?" itself, with the tools it has and which ask first, without a model call', async () => {
    const calls = playground.model.requests.length;
    const run = await pollUntilDone(await startRun("capabilities", "What can you do here?"));
    expect(run).toMatchObject({ status: "final", steps: 0 });
    expect(run.output).toMatch(/^Here is what I can do here, for you:/);
    expect(run.output).toContain("cancel_order asks first: you (or an approver) decide.");
    expect(playground.model.requests.length).toBe(calls);
  });

  it("streams a run's events from run_start to run_end, replaying what happened before the stream opened, then ends", async () => {
    const runId = await startRun("streaming", `Status of ${CANCELLABLE_ORDER} please`);
    const live = await readEvents(`${api}/runs/${runId}/events`);
    expect(live.endedByServer).toBe(true);
    const types = typesOf(live.events);
    expect(types[0]).toBe("run_start");
    expect(types.at(-1)).toBe("run_end");
    expect(types).toEqual(
      expect.arrayContaining(["model_start", "tool_start", "tool_end", "model_delta", "model_end"]),
    );
    expect(types.indexOf("tool_start")).toBeLessThan(types.indexOf("tool_end"));
    const end = live.events.at(-1)?.event;
    expect(end).toMatchObject({ type: "run_end", stopReason: "final", steps: 2 });
    // The streamed pieces make the answer.
    const streamed = live.events
      .flatMap(({ event }) => (event.type === "model_delta" && event.step === 2 ? [event.text] : []))
      .join("");
    expect(streamed).toBe(end?.type === "run_end" ? end.output : "");

    // Opened after the end: the whole run again, then the end of the stream.
    const replay = await readEvents(`${api}/runs/${runId}/events`);
    expect(replay.endedByServer).toBe(true);
    expect(typesOf(replay.events)).toEqual(types);
  });

  it("pauses a dangerous call for approval, refuses anyone but the requester, and resumes on Approve through the API", async () => {
    const runId = await startRun("approve", `Cancel order ${CANCELLABLE_ORDER} because I ordered it twice`);
    const untilAsked = await readEvents(`${api}/runs/${runId}/events`, { until: (event) => event.type === "run_end" });
    expect(typesOf(untilAsked.events)).toContain("approval_requested");
    const asked = untilAsked.events.find(({ event }) => event.type === "approval_requested")?.event;
    if (asked?.type !== "approval_requested") throw new Error("no approval was requested");
    expect(asked.approval).toMatchObject({
      tool: "cancel_order",
      arguments: { order_id: CANCELLABLE_ORDER, reason: "I ordered it twice" },
      requester: "web:alice",
      status: "pending",
    });
    expect(Date.parse(asked.approval.expiresAt)).toBeGreaterThan(Date.now());
    expect(untilAsked.events.at(-1)?.event).toMatchObject({ type: "run_end", stopReason: "awaiting_approval" });

    const waiting = (await getJson<RunBody>(`${api}/runs/${runId}`)).body;
    expect(waiting).toMatchObject({ status: "awaiting_approval", done: false });
    expect(waiting.approvals).toEqual([expect.objectContaining({ id: asked.approval.id, status: "pending" })]);

    const stranger = await postJson(`${api}/approvals/${asked.approval.id}`, { approved: true, userId: "mallory" });
    expect(stranger.status).toBe(403);
    expect(stranger.body.error).toBe("Only web:alice, who asked for this run, can decide this approval.");

    // The stream stays open through the pause and follows the run to its real end.
    const rest = readEvents(`${api}/runs/${runId}/events`);
    const decided = await postJson(`${api}/approvals/${asked.approval.id}`, { approved: true, userId: "alice" });
    expect(decided.status).toBe(200);
    expect(decided.body).toMatchObject({
      outcome: "decided",
      approval: { status: "approved", decidedBy: "web:alice" },
      resumed: true,
    });
    const followed = await rest;
    expect(followed.endedByServer).toBe(true);
    const after = typesOf(followed.events).slice(untilAsked.events.length);
    expect(after[0]).toBe("approval_decided");
    expect(after).toEqual(expect.arrayContaining(["run_resumed", "tool_start", "tool_end", "run_end"]));
    expect(followed.events.at(-1)?.event).toMatchObject({
      type: "run_end",
      stopReason: "final",
      output: `Done: order ${CANCELLABLE_ORDER} is now **cancelled** (reason: I ordered it twice).`,
    });

    const run = await pollUntilDone(runId);
    expect(run.status).toBe("final");
    expect(run.approvals[0]).toMatchObject({ status: "approved" });
    const again = await postJson(`${api}/approvals/${asked.approval.id}`, { approved: false, userId: "alice" });
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({
      outcome: "already_decided",
      error: "This approval was already approved by web:alice.",
    });
  });

  it("on Deny the call is not run and the answer says so", async () => {
    const runId = await startRun("deny", `Cancel order ${PENDING_ORDER}`);
    const asked = await readEvents(`${api}/runs/${runId}/events`, {
      until: (event) => event.type === "approval_requested",
    });
    const request = asked.events.at(-1)?.event;
    if (request?.type !== "approval_requested") throw new Error("no approval was requested");
    const denied = await postJson(`${api}/approvals/${request.approval.id}`, { approved: false, userId: "web:alice" });
    expect(denied.status).toBe(200);
    const run = await pollUntilDone(runId);
    expect(run.output).toBe("I did not run cancel_order, because a person did not approve it.");
    const status = await startRun("deny", `Status of ${PENDING_ORDER}?`);
    expect((await pollUntilDone(status)).output).toContain("is **pending**");
  });

  it("a newer message makes a waiting approval moot: its run's stream ends, and a late click is refused as stale", async () => {
    const runId = await startRun("moot", `Cancel order ${PENDING_ORDER}`);
    const asked = await readEvents(`${api}/runs/${runId}/events`, { until: (event) => event.type === "run_end" });
    const request = asked.events.find(({ event }) => event.type === "approval_requested")?.event;
    if (request?.type !== "approval_requested") throw new Error("no approval was requested");
    const rest = readEvents(`${api}/runs/${runId}/events`);
    const next = await startRun("moot", "hello");
    const ended = await rest;
    expect(ended.endedByServer).toBe(true);
    expect(ended.events.slice(-2).map(({ event }) => event)).toMatchObject([
      { type: "approval_decided", approval: { status: "expired", decidedBy: "superseded" } },
      { type: "run_end", stopReason: "superseded" },
    ]);
    await pollUntilDone(next);
    const late = await postJson(`${api}/approvals/${request.approval.id}`, { approved: true, userId: "alice" });
    expect(late.status).toBe(409);
    expect(late.body).toMatchObject({ outcome: "stale" });
    expect((await getJson<RunBody>(`${api}/runs/${runId}`)).body.status).toBe("superseded");
  });

  it("streams everything of a session, and replays what a reconnecting page missed (Last-Event-ID)", async () => {
    const session = "session-stream";
    let markOpen!: () => void;
    const open = new Promise<void>((resolve) => (markOpen = resolve));
    const reading = readEvents(`${api}/sessions/web:${session}/events`, {
      onOpen: markOpen,
      until: (event) => event.type === "run_end",
    });
    await open; // the server listens before it answers, so the run's start cannot be missed
    const runId = await startRun(session, "hi there");
    const seen = await reading;
    expect(typesOf(seen.events)[0]).toBe("run_start");
    expect(seen.events.every(({ event }) => event.runId === runId)).toBe(true);
    expect(seen.events.at(-1)?.event).toMatchObject({
      type: "run_end",
      output: expect.stringContaining("scripted demo model"),
    });

    const firstId = seen.events[0]?.id ?? 0;
    const missed = await readEvents(`${api}/sessions/web:${session}/events`, {
      headers: { "last-event-id": String(firstId) },
      until: (event) => event.type === "run_end",
    });
    expect(missed.events.map(({ id }) => id)).toEqual(seen.events.slice(1).map(({ id }) => id));
  });

  it("reads the trace of every session: sessions with totals, runs, steps with tokens, the exact payload, usage", async () => {
    const runId = await startRun("trace", `Status of ${CANCELLABLE_ORDER}`);
    await pollUntilDone(runId);
    // A command-line run over the same store shows up too.
    await runAgent(playground.agent, { input: "hello from the terminal", sessionId: "cli:trace-test", userId: "cli" });

    const { body: listed } = await getJson<{
      sessions: Array<{ id: string; adapter: string; runCount: number; promptTokens: number; cost: number | null }>;
    }>(`${api}/sessions`);
    expect(listed.sessions.map((session) => session.id)).toEqual(
      expect.arrayContaining(["web:trace", "cli:trace-test"]),
    );
    const web = listed.sessions.find((session) => session.id === "web:trace");
    expect(web).toMatchObject({ adapter: "web", runCount: 1, cost: null });
    expect(web?.promptTokens).toBeGreaterThan(0);

    const { body: runs } = await getJson<{ runs: Array<RunBody & { promptTokens: number; cost: number | null }> }>(
      `${api}/sessions/web:trace/runs`,
    );
    expect(runs.runs).toHaveLength(1);
    expect(runs.runs[0]).toMatchObject({ runId, status: "final", cost: null });

    const { body: steps } = await getJson<{
      steps: Array<{
        step: number;
        promptTokens: number;
        completionTokens: number;
        latencyMs: number;
        cost: number | null;
        toolCalls: Array<{ name: string; envelope: { status: string } }>;
      }>;
    }>(`${api}/runs/${runId}/steps`);
    expect(steps.steps.map((step) => step.step)).toEqual([1, 2]);
    // The tokens of each step are those the model reported for it (as the run's events showed them live).
    const { events } = await readEvents(`${api}/runs/${runId}/events`);
    const reported = events.flatMap(({ event }) =>
      event.type === "model_end" ? [[event.promptTokens, event.completionTokens]] : [],
    );
    expect(steps.steps.map((step) => [step.promptTokens, step.completionTokens])).toEqual(reported);
    expect(steps.steps[1]?.promptTokens).toBeGreaterThan(steps.steps[0]?.promptTokens ?? 0);
    const requests = playground.model.requests.filter((request) =>
      request.body.messages.some((message) => message.content === `Status of ${CANCELLABLE_ORDER}`),
    );
    expect(steps.steps[0]?.toolCalls[0]).toMatchObject({ name: "get_order_status", envelope: { status: "success" } });
    expect(steps.steps.every((step) => step.cost === null && step.latencyMs >= 0)).toBe(true);

    const { body: payload } = await getJson<{ messages: Array<{ role: string; content: string }> }>(
      `${api}/runs/${runId}/steps/1/payload`,
    );
    expect(payload.messages).toEqual(
      requests[0]?.body.messages.map((message) =>
        expect.objectContaining({ role: message.role, content: message.content }),
      ),
    );

    const { body: usage } = await getJson<{
      byUser: Array<{ key: string; runs: number }>;
      byDay: Array<{ key: string }>;
    }>(`${api}/usage`);
    expect(usage.byUser).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ key: "web:alice" }),
        expect.objectContaining({ key: "cli", runs: 1 }),
      ]),
    );
    expect(usage.byDay[0]?.key).toMatch(/^\d{4}-\d{2}-\d{2}$/);
  });

  it("decides only the web's own approvals: a Slack approval is not found here", async () => {
    // A Slack message as Slack's inbound handler takes it: stored, its turn enqueued for the worker.
    const input = `Cancel order ${CANCELLABLE_ORDER}`;
    const run = { runId: newRunId(), sessionId: "slack:T1:C1:1.0", userId: "U1", input };
    const message = { role: "user" as const, content: input };
    const { store, queue } = playground.deployment;
    await acceptMessage(store, queue, { eventIds: ["Ev1"], run, message: { message, tokens: 10 } });
    await expect
      .poll(async () => (await getJson<RunBody>(`${api}/runs/${run.runId}`)).body.status, WAIT)
      .toBe("awaiting_approval");
    const { body: runs } = await getJson<{ runs: RunBody[] }>(`${api}/sessions/slack:T1:C1:1.0/runs`);
    const approvalId = runs.runs[0]?.approvals[0]?.id ?? "";
    expect(approvalId).toMatch(/^apv_/);
    const attempt = await postJson(`${api}/approvals/${approvalId}`, { approved: true, userId: "U1" });
    expect(attempt.status).toBe(404);
    expect((await getJson<RunBody>(`${api}/runs/${run.runId}`)).body.approvals[0]?.status).toBe("pending");
  });

  it("answers bad input with 400 and one sentence, unknown things with 404, and non-JSON bodies with 415", async () => {
    const badJson = await fetch(`${api}/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{not json",
    });
    expect(badJson.status).toBe(400);
    expect(((await badJson.json()) as { error: string }).error).toMatch(/^The body is not valid JSON/);

    expect(await postJson(`${api}/runs`, { session: "x" })).toEqual({
      status: 400,
      body: { error: 'Give the message as "input", a non-empty string.' },
    });
    expect((await postJson(`${api}/runs`, { session: "no spaces allowed", input: "hi" })).status).toBe(400);
    expect((await postJson(`${api}/runs`, ["an", "array"])).body).toEqual({ error: "The body must be a JSON object." });
    expect((await postJson(`${api}/approvals/apv_nothing`, { approved: "yes", userId: "alice" })).status).toBe(400);
    expect((await postJson(`${api}/approvals/apv_nothing`, { approved: true, userId: "alice" })).status).toBe(404);

    const form = await fetch(`${api}/runs`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "session=x&input=hi",
    });
    expect(form.status).toBe(415);

    expect((await getJson(`${api}/runs/run_nothing`)).status).toBe(404);
    expect((await fetch(`${api}/runs/run_nothing/events`)).status).toBe(404);
    expect((await getJson(`${api}/sessions/web:never-used/runs`)).status).toBe(404);
    expect((await getJson(`${api}/no-such-thing`)).body).toEqual({
      error: "There is no /api/no-such-thing in this API.",
    });
    expect((await fetch(`${playground.url}nowhere`)).status).toBe(404);
    expect((await fetch(`${api}/runs`)).status).toBe(405);
  });

  it("serves the pages with a content security policy, and refuses API calls addressed to another host name", async () => {
    const page = await fetch(playground.url);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
    expect(page.headers.get("content-security-policy")).toContain("script-src 'self'");
    expect(await page.text()).toContain('<label for="message">Message</label>');
    expect((await fetch(`${playground.url}trace`)).status).toBe(200);
    expect((await fetch(`${playground.url}assets/chat.js`)).headers.get("content-type")).toContain("text/javascript");
    expect((await fetch(`${playground.url}assets/..%2Fweb-server.ts`)).status).toBe(404);

    const { request } = await import("node:http");
    const status = await new Promise<number>((resolve, reject) => {
      const url = new URL(`${api}/info`);
      request(
        { host: url.hostname, port: url.port, path: url.pathname, headers: { host: "attacker.example" } },
        (response) => {
          response.resume();
          resolve(response.statusCode ?? 0);
        },
      )
        .on("error", reject)
        .end();
    });
    expect(status).toBe(403);
  });
});

describe("web API: the bearer token", () => {
  afterEach(cleanUp);

  it("with a token set, /api needs Authorization: Bearer (401 otherwise); event streams also take ?token=", async () => {
    const { url } = await startPlayground({ server: { apiToken: "s3cret-token" } });
    const missing = await fetch(`${url}api/info`);
    expect(missing.status).toBe(401);
    expect(missing.headers.get("www-authenticate")).toContain("Bearer");
    expect(((await missing.json()) as { error: string }).error).toBe(
      "This API needs a token: send Authorization: Bearer <token>, the GLASSBOX_API_TOKEN or a user's token from GLASSBOX_API_USERS.",
    );
    expect((await fetch(`${url}api/info`, { headers: { authorization: "Bearer wrong" } })).status).toBe(401);
    expect((await fetch(`${url}api/sessions?token=s3cret-token`)).status).toBe(401); // only event streams take it in the query
    const posted = await postJson(`${url}api/runs`, { session: "tok", input: "hello" });
    expect(posted.status).toBe(401);

    const auth = { authorization: "Bearer s3cret-token" };
    const info = await getJson(`${url}api/info`, auth);
    expect(info).toEqual({
      status: 200,
      body: {
        model: "scripted model (demo)",
        priced: false,
        problem: null,
        hints: expect.any(Array),
        tools: expect.arrayContaining(["get_order_status", "cancel_order"]),
        tokenRequired: true,
        user: null,
      },
    });
    const started = await postJson(`${url}api/runs`, { session: "tok", input: "hello" }, auth);
    expect(started.status).toBe(202);
    const streamed = await readEvents(`${url}api/runs/${String(started.body.runId)}/events?token=s3cret-token`);
    expect(typesOf(streamed.events).at(-1)).toBe("run_end");
    expect((await fetch(`${url}api/runs/${String(started.body.runId)}/events?token=nope`)).status).toBe(401);
    // The pages themselves hold no data and load without it.
    expect((await fetch(url)).status).toBe(200);
  });

  it("refuses to listen beyond loopback without a token, in one sentence; with a token it does", async () => {
    const refused = await startWithoutModel({ host: "0.0.0.0" }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(GlassboxError);
    expect((refused as GlassboxError).code).toBe("configuration");
    expect((refused as GlassboxError).message).toBe(
      "GLASSBOX_WEB_HOST is 0.0.0.0, which other machines can reach; set GLASSBOX_API_TOKEN or GLASSBOX_API_USERS so that the API needs a token, or use 127.0.0.1.",
    );
    const open = await startWithoutModel({ host: "0.0.0.0", apiToken: "t" });
    expect(open.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    expect((await fetch(`${open.url}api/info`, { headers: { authorization: "Bearer t" } })).status).toBe(200);
    await open.web.stop();
  });
});

describe("web API: no model configured", () => {
  afterAll(cleanUp);

  it("still serves the pages and says what to set (no model named: regression, it named the default gpt-4o-mini); starting a run answers 503 with that sentence", async () => {
    const { url } = await startWithoutModel();
    expect((await getJson(`${url}api/info`)).body).toEqual({
      model: null,
      priced: false,
      problem: NO_MODEL,
      hints: [],
      tools: [],
      tokenRequired: false,
      user: null,
    });
    expect(await postJson(`${url}api/runs`, { session: "x", input: "hello" })).toEqual({
      status: 503,
      body: { error: NO_MODEL },
    });
    expect((await fetch(url)).status).toBe(200);
    expect((await getJson(`${url}api/sessions`)).body).toEqual({ sessions: [], more: false });
  });
});

describe("web API: daily caps", () => {
  afterAll(cleanUp);

  it("a user over the daily cap gets the sentence as the run's result, with no model call", async () => {
    const { url, model } = await startPlayground({ server: { dailyLimits: { tokens: 10 } } });
    const first = await postJson(`${url}api/runs`, { session: "capped", input: "hello", userId: "bob" });
    await expect
      .poll(async () => (await getJson<RunBody>(`${url}api/runs/${String(first.body.runId)}`)).body.status, WAIT)
      .toBe("final");
    const calls = model.requests.length;

    const second = await postJson(`${url}api/runs`, { session: "capped", input: "hello again", userId: "bob" });
    expect(second.status).toBe(202);
    const streamed = await readEvents(`${url}api/runs/${String(second.body.runId)}/events`);
    expect(streamed.endedByServer).toBe(true);
    expect(streamed.events.map(({ event }) => event)).toEqual([
      expect.objectContaining({
        type: "run_end",
        stopReason: "error",
        error: expect.objectContaining({ code: "quota" }),
        output: expect.stringMatching(/^You have used your daily allowance of 10 tokens; it resets at 00:00 UTC/),
      }),
    ]);
    const run = (await getJson<RunBody>(`${url}api/runs/${String(second.body.runId)}`)).body;
    expect(run).toMatchObject({ status: "error", done: true, output: expect.stringContaining("daily allowance") });
    expect(model.requests.length).toBe(calls);
  });
});

describe("web API: accepted means stored", () => {
  afterEach(cleanUp);

  it("regression: the 202's run is already in the SQLite file when the 202 arrives (a run waiting for its session's turn was not), and GET answers its status, never 404", async () => {
    const release = deferred();
    const playground = await startPlayground({
      script: async (request) => {
        if (JSON.stringify(request.messages).includes("hold this one")) await release.promise;
        return demoReply(request);
      },
    });
    const api = `${playground.url}api`;
    let runId = "";
    let firstId = "";
    try {
      const first = await postJson(`${api}/runs`, { session: "busy", input: "hold this one", userId: "alice" });
      expect(first.status).toBe(202);
      firstId = String(first.body.runId);
      await expect.poll(() => playground.model.requests.length, WAIT).toBeGreaterThan(0);

      // The session is busy, so this run waits: it is stored all the same, before its 202.
      const second = await postJson(`${api}/runs`, { session: "busy", input: "and then this", userId: "alice" });
      expect(second.status).toBe(202);
      runId = String(second.body.runId);
      const reader = new Database(playground.store.db.name, { readonly: true });
      try {
        expect(
          reader
            .prepare("SELECT session_id AS sessionId, user_id AS userId, input, status FROM runs WHERE id = ?")
            .get(runId),
        ).toEqual({
          sessionId: "web:busy",
          userId: "web:alice",
          input: "and then this",
          status: "accepted",
        });
      } finally {
        reader.close();
      }
      expect((await getJson<RunBody>(`${api}/runs/${runId}`)).body).toMatchObject({
        runId,
        status: "accepted",
        done: false,
      });
    } finally {
      release.resolve(); // also when an expectation failed, so the server can stop
    }
    await expect.poll(async () => (await getJson<RunBody>(`${api}/runs/${runId}`)).body.status, WAIT).toBe("final");
    const { body } = await getJson<{ runs: RunBody[] }>(`${api}/sessions/web:busy/runs`);
    expect(body.runs.map((run) => [run.runId, run.status])).toEqual([
      [firstId, "final"],
      [runId, "final"],
    ]);
  });
});

describe("web API: users' tokens (GLASSBOX_API_USERS)", () => {
  afterEach(cleanUp);

  const ALICE = { authorization: "Bearer alice-token" };
  const BOB = { authorization: "Bearer bob-token" };
  const SERVICE = { authorization: "Bearer service-token" };
  const server = { apiToken: "service-token", apiUsers: { "alice-token": "alice", "bob-token": "web:bob" } };

  const finished = async (api: string, runId: string) => {
    let run: RunBody | undefined;
    await expect
      .poll(async () => (run = (await getJson<RunBody>(`${api}/runs/${runId}`, SERVICE)).body).done, WAIT)
      .toBe(true);
    return run as RunBody & { userId: string };
  };

  it("one caller's live-view streams cannot take everyone else's: past its limit a caller gets a 503 before the stream opens, others still get theirs", async () => {
    const { url } = await startPlayground({ server });
    const api = `${url}api`;
    const controller = new AbortController();
    const open = (token: typeof ALICE, session: string) =>
      fetch(`${api}/sessions/web%3A${session}/events`, { headers: token, signal: controller.signal });
    try {
      const alice = await Promise.all(
        Array.from({ length: MAX_STREAMS_PER_CALLER }, (_, index) => open(ALICE, `alice-view-${index}`)),
      );
      expect(alice.every((response) => response.status === 200)).toBe(true);
      const refused = await open(ALICE, "alice-one-more");
      expect(refused.status).toBe(503);
      expect(await refused.json()).toEqual({
        error: `This caller already follows ${MAX_STREAMS_PER_CALLER} live views here; close some pages (or streams) and try again.`,
      });
      expect((await open(BOB, "bob-view")).status).toBe(200);
      await alice[0]?.body?.cancel(); // one of hers closes: she may open another
      await expect.poll(async () => (await open(ALICE, "alice-again")).status, WAIT).toBe(200);
    } finally {
      controller.abort();
    }
  });

  it("POST /api/erase: the service token erases a conversation and gets the receipt; a user's token is refused; a body naming two things is a 400", async () => {
    const { url } = await startPlayground({ server });
    const api = `${url}api`;
    const own = await postJson(`${api}/runs`, { session: "to-erase", input: "hello" }, ALICE);
    await finished(api, String(own.body.runId));
    expect(await postJson(`${api}/erase`, { session: "web:to-erase" }, ALICE)).toEqual({
      status: 403,
      body: { error: "Only the service token (GLASSBOX_API_TOKEN) may erase data." },
    });
    expect((await postJson(`${api}/erase`, { session: "web:to-erase", user: "web:alice" }, SERVICE)).status).toBe(400);
    const erased = await postJson(`${api}/erase`, { session: "web:to-erase" }, SERVICE);
    expect(erased).toMatchObject({ status: 200, body: { kind: "session", removed: { sessions: 1, runs: 1 } } });
    expect((await getJson(`${api}/runs/${String(own.body.runId)}`, SERVICE)).status).toBe(404);
  });

  it("regression: a user's token acts only as its user; a body naming another user is refused with 403, for runs and for approvals", async () => {
    const { url } = await startPlayground({ server });
    const api = `${url}api`;
    expect((await getJson(`${api}/info`, ALICE)).body).toMatchObject({ tokenRequired: true, user: "web:alice" });

    const impersonating = await postJson(`${api}/runs`, { session: "alice-1", input: "hello", userId: "bob" }, ALICE);
    expect(impersonating).toEqual({
      status: 403,
      body: { error: "This token acts as web:alice; it cannot act as web:bob." },
    });
    const own = await postJson(`${api}/runs`, { session: "alice-1", input: "hello" }, ALICE);
    expect(own.status).toBe(202);
    expect(await finished(api, String(own.body.runId))).toMatchObject({ userId: "web:alice", status: "final" });
    expect(
      (await postJson(`${api}/runs`, { session: "alice-1", input: "hello", userId: "web:alice" }, ALICE)).status,
    ).toBe(202);
    // The service token may act for anyone.
    const forBob = await postJson(`${api}/runs`, { session: "for-bob", input: "hello", userId: "bob" }, SERVICE);
    expect(await finished(api, String(forBob.body.runId))).toMatchObject({ userId: "web:bob" });

    const asked = await postJson(
      `${api}/runs`,
      { session: "alice-cancel", input: `Cancel order ${CANCELLABLE_ORDER}` },
      ALICE,
    );
    await expect
      .poll(
        async () => (await getJson<RunBody>(`${api}/runs/${String(asked.body.runId)}`, ALICE)).body.approvals.length,
        WAIT,
      )
      .toBe(1);
    const approvalId =
      (await getJson<RunBody>(`${api}/runs/${String(asked.body.runId)}`, ALICE)).body.approvals[0]?.id ?? "";
    expect(await postJson(`${api}/approvals/${approvalId}`, { approved: true, userId: "alice" }, BOB)).toEqual({
      status: 403,
      body: { error: "This token acts as web:bob; it cannot act as web:alice." },
    });
    expect((await postJson(`${api}/approvals/${approvalId}`, { approved: true }, BOB)).status).toBe(404); // not bob's session to see
    const decided = await postJson(`${api}/approvals/${approvalId}`, { approved: true }, ALICE);
    expect(decided).toMatchObject({
      status: 200,
      body: { outcome: "decided", approval: { status: "approved", decidedBy: "web:alice" } },
    });
  });

  it("a user's token reads only the sessions its user started (runs, steps, events, usage) and cannot write to another's; the service token reads all", async () => {
    const { url } = await startPlayground({ server });
    const api = `${url}api`;
    const alices = await postJson(`${api}/runs`, { session: "a-1", input: `Status of ${CANCELLABLE_ORDER}?` }, ALICE);
    const bobs = await postJson(`${api}/runs`, { session: "b-1", input: `Status of ${PENDING_ORDER}?` }, BOB);
    const alicesRun = String(alices.body.runId);
    const bobsRun = String(bobs.body.runId);
    await finished(api, alicesRun);
    await finished(api, bobsRun);

    const ids = async (headers: Record<string, string>) =>
      (await getJson<{ sessions: Array<{ id: string }> }>(`${api}/sessions`, headers)).body.sessions
        .map((session) => session.id)
        .sort();
    expect(await ids(ALICE)).toEqual(["web:a-1"]);
    expect(await ids(SERVICE)).toEqual(["web:a-1", "web:b-1"]);
    for (const path of [
      `runs/${bobsRun}`,
      `runs/${bobsRun}/steps`,
      `runs/${bobsRun}/steps/1/payload`,
      `sessions/web:b-1/runs`,
    ]) {
      expect((await getJson(`${api}/${path}`, ALICE)).status, path).toBe(404);
      expect((await getJson(`${api}/${path}`, SERVICE)).status, path).toBe(200);
    }
    expect((await fetch(`${api}/runs/${bobsRun}/events?token=alice-token`)).status).toBe(404);
    expect((await fetch(`${api}/sessions/web:b-1/events?token=alice-token`)).status).toBe(404);
    expect((await getJson(`${api}/runs/${alicesRun}/steps`, ALICE)).status).toBe(200);
    expect(await postJson(`${api}/runs`, { session: "b-1", input: "let me in" }, ALICE)).toEqual({
      status: 403,
      body: { error: "The session web:b-1 belongs to another user; use another session id." },
    });

    const usage = (
      await getJson<{ byUser: Array<{ key: string; runs: number }>; byDay: Array<{ key: string; runs: number }> }>(
        `${api}/usage`,
        ALICE,
      )
    ).body;
    expect(usage.byUser).toEqual([expect.objectContaining({ key: "web:alice", runs: 1 })]);
    expect(usage.byDay).toEqual([
      expect.objectContaining({ key: expect.stringMatching(/^\d{4}-\d{2}-\d{2}$/), runs: 1 }),
    ]);
    expect((await getJson<{ byUser: unknown[] }>(`${api}/usage`, SERVICE)).body.byUser).toHaveLength(2);
  });

  it("a user following a session nobody has started yet hears nothing of it once another user starts it", async () => {
    const playground = await startPlayground({ server });
    const api = `${playground.url}api`;
    let markOpen!: () => void;
    const open = new Promise<void>((resolve) => (markOpen = resolve));
    const alice = readEvents(`${api}/sessions/web:fresh/events?token=alice-token`, { onOpen: markOpen });
    const service = readEvents(`${api}/sessions/web:fresh/events?token=service-token`, {
      until: (event) => event.type === "run_end",
    });
    await open;
    const bobs = await postJson(`${api}/runs`, { session: "fresh", input: "hello" }, BOB);
    expect(bobs.status).toBe(202);
    expect(typesOf((await service).events)).toContain("run_end");
    await playground.web.stop(); // ends alice's stream, after everything the server wrote to it
    expect((await alice).events).toEqual([]);
  });

  it("a user following a session nobody has started yet hears all of it, in order, once they start it", async () => {
    const playground = await startPlayground({ server });
    const api = `${playground.url}api`;
    let markOpen!: () => void;
    const open = new Promise<void>((resolve) => (markOpen = resolve));
    const alice = readEvents(`${api}/sessions/web:hers/events?token=alice-token`, {
      onOpen: markOpen,
      until: (event) => event.type === "run_end",
    });
    await open;
    const started = await postJson(
      `${api}/runs`,
      { session: "hers", input: `What is the status of order ${CANCELLABLE_ORDER}?` },
      ALICE,
    );
    expect(started.status).toBe(202);
    const { events } = await alice;
    expect(typesOf(events)[0]).toBe("run_start");
    expect(typesOf(events)).toEqual(expect.arrayContaining(["tool_start", "tool_end", "run_end"]));
    const ids = events.map((streamed) => streamed.id);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("regression: GLASSBOX_API_USERS alone is a credential for listening beyond loopback; a bad entry is refused in one sentence", async () => {
    const host = "0.0.0.0";
    const { web: open } = await startWithoutModel({ host, apiUsers: { "carol-token": "carol" } });
    try {
      expect((await fetch(`${open.url}api/info`)).status).toBe(401);
      expect((await getJson(`${open.url}api/info`, { authorization: "Bearer carol-token" })).body).toMatchObject({
        tokenRequired: true,
        user: "web:carol",
      });
    } finally {
      await open.stop();
    }
    const badUser = await startWithoutModel({ host, apiUsers: { t: "no spaces" } }).catch((error: unknown) => error);
    expect((badUser as GlassboxError).message).toBe(
      `GLASSBOX_API_USERS gives a token the user 'no spaces'; a user id is letters, digits, "-", "_" or "." (up to 100), optionally prefixed with "web:".`,
    );
    // The API user id api is the service token's: a user's token named so would act as it.
    for (const reserved of ["api", "web:api"]) {
      const asService = await startWithoutModel({ host, apiToken: "svc", apiUsers: { "eve-token": reserved } }).catch(
        (error: unknown) => error,
      );
      expect((asService as GlassboxError).message).toBe(
        `GLASSBOX_API_USERS gives a token the user '${reserved}', which is reserved for the service token (GLASSBOX_API_TOKEN); give that user another id.`,
      );
    }
    const shared = await startWithoutModel({ host, apiToken: "same", apiUsers: { same: "dave" } }).catch(
      (error: unknown) => error,
    );
    expect((shared as GlassboxError).message).toBe(
      "GLASSBOX_API_USERS gives web:dave the same token as GLASSBOX_API_TOKEN; give each user a token of their own.",
    );
  });
});
