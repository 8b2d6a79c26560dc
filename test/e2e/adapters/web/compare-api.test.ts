// GET /api/compare and saving eval cases over the real server, agent and SQLite, with tokens: a person's
// token compares only runs of sessions they may read and never writes files; the service token saves
// cases under names glassbox makes, whatever the request says.
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CANCELLABLE_ORDER,
  cleanUp,
  getJson,
  postJson,
  startPlayground,
  tempDir,
  WAIT,
  type Playground,
} from "../../../helpers/web.js";

const SERVICE = { authorization: "Bearer service-token" };
const ANN = { authorization: "Bearer ann-token" };
const BOB = { authorization: "Bearer bob-token" };

describe("compare and eval cases over the HTTP API", () => {
  let playground: Playground;
  let evalDir: string;
  const runAs = async (headers: Record<string, string>, session: string, input: string) => {
    const { body } = await postJson(`${playground.url}api/runs`, { session, input }, headers);
    const runId = body.runId as string;
    const deadline = Date.now() + WAIT.timeout;
    while (!(await getJson<{ done: boolean }>(`${playground.url}api/runs/${runId}`, headers)).body.done) {
      if (Date.now() > deadline) throw new Error(`${input} did not finish`);
      await new Promise((resolve) => setTimeout(resolve, WAIT.interval));
    }
    return runId;
  };
  const compare = (a: string, b: string, headers: Record<string, string>) =>
    getJson<Record<string, unknown>>(`${playground.url}api/compare?a=${a}&b=${b}`, headers);
  let ann1: string;
  let ann2: string;
  let bob1: string;

  beforeAll(async () => {
    evalDir = join(tempDir(), "cases");
    playground = await startPlayground({
      env: { GLASSBOX_EVAL_DIR: evalDir },
      server: { apiToken: "service-token", apiUsers: { "ann-token": "ann", "bob-token": "bob" } },
    });
    ann1 = await runAs(ANN, "ann-one", "What is the status of order 20240315001?");
    ann2 = await runAs(ANN, "ann-two", `What is the status of order ${CANCELLABLE_ORDER}?`);
    bob1 = await runAs(BOB, "bob-one", "What is the status of order 20240315001?");
  });
  afterAll(cleanUp);

  it("lets a person compare runs of their own sessions, and no one else's (404, as for reading a run)", async () => {
    const own = await compare(ann1, ann2, ANN);
    expect(own.status).toBe(200);
    expect(own.body).toMatchObject({ sameToolCalls: false, divergesAtCall: 1, divergesAtStep: [1, 1] });
    expect(own.body.a).toMatchObject({ runId: ann1, sessionId: "web:ann-one" });
    const others = await compare(ann1, bob1, ANN);
    expect(others.status).toBe(404);
    expect(others.body.error).toBe(`There is no run ${bob1}.`);
    expect((await compare(bob1, ann1, BOB)).status).toBe(404);
    // The service token compares any two; a missing run is named; no token is refused.
    expect((await compare(ann1, bob1, SERVICE)).body).toMatchObject({ sameToolCalls: true, sameAnswer: true });
    expect((await compare(ann1, "run_nope", SERVICE)).status).toBe(404);
    expect((await compare(ann1, bob1, {})).status).toBe(401);
    const half = await getJson<{ error: string }>(`${playground.url}api/compare?a=${ann1}`, SERVICE);
    expect(half.status).toBe(400);
    expect(half.body.error).toBe("Name the two runs to compare: /api/compare?a=<run>&b=<run>.");
  });

  it("saves eval cases only with the service token, under the run's own name, whatever the body says", async () => {
    const asAnn = await postJson(`${playground.url}api/runs/${ann1}/eval-case`, {}, ANN);
    expect(asAnn.status).toBe(403);
    expect(asAnn.body.error).toBe(
      "Only the service token (GLASSBOX_API_TOKEN) may save eval cases: they are files written on the server.",
    );
    expect((await postJson(`${playground.url}api/eval-cases`, {}, ANN)).status).toBe(403);
    expect(existsSync(evalDir)).toBe(false);

    const saved = await postJson(
      `${playground.url}api/runs/${ann1}/eval-case`,
      { file: "../../escape.json", name: "../escape" },
      SERVICE,
    );
    expect(saved.status).toBe(200);
    expect(saved.body.saved).toEqual([
      { runId: ann1, file: join(evalDir, `run-${ann1}.json`), bytes: expect.any(Number) },
    ]);
    expect(readdirSync(evalDir)).toEqual([`run-${ann1}.json`]);
    expect(existsSync(join(evalDir, "..", "escape.json"))).toBe(false);
    expect((await postJson(`${playground.url}api/runs/run_nope/eval-case`, {}, SERVICE)).status).toBe(404);
  });

  it("saves every 👎 run of the sessions the filters find, and none of the others", async () => {
    expect((await postJson(`${playground.url}api/runs/${bob1}/feedback`, { rating: "down" }, BOB)).status).toBe(200);
    expect((await postJson(`${playground.url}api/runs/${ann2}/feedback`, { rating: "down" }, ANN)).status).toBe(200);
    const filtered = await postJson(`${playground.url}api/eval-cases?q=${CANCELLABLE_ORDER}`, {}, SERVICE);
    expect(filtered.status).toBe(200);
    expect((filtered.body.saved as Array<{ runId: string }>).map((one) => one.runId)).toEqual([ann2]);
    const bad = await postJson(`${playground.url}api/eval-cases?rated=sideways&limit=0`, {}, SERVICE);
    expect(bad.status).toBe(400);
  });
});
