// The HTTP API ingress end to end: real requests to POST /api/runs and POST /api/approvals/:id, on
// the real store and run queue (SQLite with the in-process queue always; PostgreSQL
// when GLASSBOX_TEST_DATABASE_URL is set), with a worker that only records the turns
// it gets. "Nothing was enqueued" is checked by a later accepted run of the same session, which
// would have reached the worker second.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startHttpIngress, type HttpIngress } from "../../../../src/adapters/web/web-inbound.js";
import { workOf } from "../../../../src/conversations/turns.js";
import type { Turn } from "../../../../src/queue/types.js";
import { startScriptedModelServer, type ScriptedModelServer } from "../../../../src/testing/scripted-model-server.js";
import { keysOf, pausedRunOf, TARGETS, type IngressHarness } from "../../helpers/ingress.js";

const SERVICE_TOKEN = "service-token-for-tests";
const ALICE_TOKEN = "alice-token-for-tests";
const BOB_TOKEN = "bob-token-for-tests";

for (const target of TARGETS) {
  describe.runIf(target.available)(`HTTP API ingress: ${target.name}`, () => {
    let harness: IngressHarness;
    let model: ScriptedModelServer;
    let ingress: HttpIngress;

    beforeEach(async () => {
      model = await startScriptedModelServer({ script: [{ content: "an answer nobody should ask for" }] });
      harness = await target.open();
      ingress = await startHttpIngress({
        ...harness.ingress,
        log: harness.log,
        counter: harness.counter,
        apiToken: SERVICE_TOKEN,
        apiUsers: { [ALICE_TOKEN]: "alice", [BOB_TOKEN]: "bob" },
        port: 0,
        host: "127.0.0.1",
      });
    });

    afterEach(async () => {
      await ingress?.stop();
      await harness?.close();
      expect(model.requests).toHaveLength(0);
      await model?.close();
    });

    async function post(path: string, body: unknown, token = SERVICE_TOKEN, contentType = "application/json") {
      const response = await fetch(`${ingress.url}${path}`, {
        method: "POST",
        headers: { "content-type": contentType, ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: typeof body === "string" ? body : JSON.stringify(body),
      });
      return {
        status: response.status,
        location: response.headers.get("location"),
        body: (await response.json()) as Record<string, unknown>,
      };
    }

    it("accepts a run (202 with its id) once it is stored and enqueued, the runs of a session in order, without calling the model", async () => {
      const runIds: string[] = [];
      for (const input of ["first question", "second question", "third question"]) {
        const accepted = await post("/api/runs", { session: "web:s1", input, userId: "bob" });
        expect(accepted.status).toBe(202);
        expect(accepted.body.session).toBe("web:s1");
        expect(accepted.location).toBe(`/api/runs/${accepted.body.runId as string}`);
        runIds.push(accepted.body.runId as string);
      }
      const turns = await harness.waitForTurns(3);
      expect(turns.map((turn) => workOf(turn))).toEqual(
        runIds.map((runId) => ({ kind: "message", runId, sessionId: "web:s1", eventIds: [] })),
      );
      expect(keysOf(turns, "web:s1")).toEqual(runIds);
      expect(await harness.store.run(runIds[0] as string)).toMatchObject({
        status: "accepted",
        userId: "web:bob",
        input: "first question",
      });
      expect((await harness.store.sessionHistory("web:s1")).messages.map((stored) => stored.message.content)).toEqual([
        "first question",
        "second question",
        "third question",
      ]);
      expect(JSON.stringify(turns.map((turn) => turn.payload))).not.toContain("question");
    });

    it("refuses bad requests in one sentence each and enqueues nothing for them", async () => {
      const refusals = [
        await post("/api/runs", { session: "s2", input: "hi" }, ""),
        await post("/api/runs", { session: "s2", input: "hi" }, "a-wrong-token"),
        await post("/api/runs", "session=s2&input=hi", SERVICE_TOKEN, "application/x-www-form-urlencoded"),
        await post("/api/runs", { session: "s2", input: "   " }),
        await post("/api/runs", { session: "s2", input: "x".repeat(20_001) }),
        await post("/api/runs", { session: "slack:T1:C1:1.1", input: "hi" }),
        await post("/api/runs", { session: "s2", input: "hi", userId: "bob" }, ALICE_TOKEN),
        await post("/api/nothing-here", {}),
      ];
      expect(refusals.map((refusal) => refusal.status)).toEqual([401, 401, 415, 400, 400, 400, 403, 404]);
      for (const refusal of refusals) expect(refusal.body.error).toMatch(/^[A-Z"][^\n]*[.]$/);
      const get = await fetch(`${ingress.url}/api/runs`);
      expect(get.status).toBe(405);

      // Alice's session is hers: the service acts for anyone, another user's token may not take it.
      const mine = await post("/api/runs", { session: "s2", input: "hi" }, ALICE_TOKEN);
      expect(mine.status).toBe(202);
      expect(await post("/api/runs", { session: "s2", input: "mine now" }, BOB_TOKEN)).toMatchObject({
        status: 403,
        body: { error: "The session web:s2 belongs to another user; use another session id." },
      });
      const turns = await harness.waitForTurns(1);
      expect(keysOf(turns, "web:s2")).toEqual([mine.body.runId]);
      expect((await harness.store.runsOfSession("web:s2")).map((run) => run.userId)).toEqual(["web:alice"]);
    });

    it("decides a web approval once when two requests race, enqueueing exactly one resume; a Slack approval is not the API's", async () => {
      const [approval] = await pausedRunOf(harness.store, "run_web", "web:s3", "web:U1");
      const [slackApproval] = await pausedRunOf(harness.store, "run_slack", "slack:T1:C1:1.1", "U1");
      const decisions = await Promise.all([
        post(`/api/approvals/${approval?.id}`, { approved: true, userId: "U1" }),
        post(`/api/approvals/${approval?.id}`, { approved: false, userId: "U1" }),
      ]);
      expect(decisions.map((decision) => decision.status).sort()).toEqual([200, 409]);
      expect(decisions.find((decision) => decision.status === 200)?.body).toMatchObject({
        outcome: "decided",
        resumed: true,
        approval: { id: approval?.id, runId: "run_web" },
      });
      expect(decisions.find((decision) => decision.status === 409)?.body).toMatchObject({ outcome: "already_decided" });
      expect(await post(`/api/approvals/${slackApproval?.id}`, { approved: true, userId: "U1" })).toMatchObject({
        status: 404,
        body: { error: `There is no web approval ${slackApproval?.id}.` },
      });
      expect(await post(`/api/approvals/${approval?.id}`, { approved: "yes" })).toMatchObject({ status: 400 });

      const after = await post("/api/runs", { session: "s3", input: "after the decision", userId: "U1" });
      const turns = await harness.waitForTurns(2);
      expect(keysOf(turns, "web:s3")).toEqual(["resume:run_web", after.body.runId]);
      expect(workOf(turns[0] as Turn)).toEqual({
        kind: "resume",
        runId: "run_web",
        sessionId: "web:s3",
        approvalId: approval?.id,
      });
      expect(turns).toHaveLength(2);
    });
  });
}
