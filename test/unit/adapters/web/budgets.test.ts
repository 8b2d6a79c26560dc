// Budgets from the channel settings through the web playground's HTTP API: the real server over the
// real agent and the scripted model, with a daily budget per person at the defaults (the web's
// sessions take them). A run that reaches the budget stops with what it had and says why, the next
// is refused without a model call, another person goes on; GET /api/usage says how every budget
// stands, and a person's token sees only the budgets that concern them.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { budgetScript as script } from "../../../helpers/budget-script.js";
import { cleanUp, getJson, postJson, readEvents, startPlayground, type Playground } from "../../../helpers/web.js";

const SERVICE = { authorization: "Bearer service-token" };
const BOB = { authorization: "Bearer bob-token" };

interface RunBody {
  status: string;
  done: boolean;
  output: string | null;
  steps: number;
}

interface Standing {
  scope: string;
  period: string;
  unit: string;
  of: string;
  used: number;
  limit: number;
}

function settingsFile(): string {
  const file = join(mkdtempSync(join(tmpdir(), "glassbox-web-budgets-")), "channels.yaml");
  writeFileSync(file, ["defaults:", "  budget:", "    user: { daily: { tokens: 1000 } }", ""].join("\n"));
  return file;
}

describe("channel budgets through the web API", () => {
  let playground: Playground;
  let api: string;
  beforeAll(async () => {
    playground = await startPlayground({
      script,
      env: {
        GLASSBOX_CHANNELS: settingsFile(),
        GLASSBOX_API_TOKEN: "service-token",
        GLASSBOX_API_USERS: JSON.stringify({ "bob-token": "bob" }),
      },
    });
    api = `${playground.url}api`;
  });
  afterAll(cleanUp);

  /**
   * Runs `input` following its session's events, as the chat page does: the stored run, and the answer
   * as the person was shown it.
   */
  async function ask(
    input: string,
    userId: string,
    session: string,
    noted = false,
  ): Promise<RunBody & { shown: string; notices: string[] }> {
    let runId = "";
    const { events } = await readEvents(`${api}/sessions/web:${session}/events`, {
      headers: SERVICE,
      onOpen: () =>
        void postJson(`${api}/runs`, { session, input, userId }, SERVICE).then((started) => {
          runId = String(started.body.runId);
        }),
      until: (event) => event.type === (noted ? "notice" : "run_end"),
    });
    const end = events.find((streamed) => streamed.event.type === "run_end")?.event;
    const notices = events.flatMap(({ event }) => (event.type === "notice" ? [event.text] : []));
    await expect.poll(() => runId).not.toBe("");
    const run = (await getJson<RunBody>(`${api}/runs/${runId}`, SERVICE)).body;
    return { ...run, shown: end?.type === "run_end" ? end.output : "", notices };
  }

  it("stops a person's run at their budget, refuses the next, lets another person on, and reports the standings", async () => {
    const first = await ask("first", "alice", "budget-a", true);
    expect(first).toMatchObject({ status: "final", output: "First answer.", shown: "First answer." });
    expect(first.notices).toEqual(["Note: you have used 85% of your daily budget (850 tokens of 1,000 tokens)."]);
    const stopped = await ask("second", "alice", "budget-a");
    expect(stopped.status).toBe("error");
    expect(stopped.notices).toEqual([]);
    expect(stopped.output).toBe(
      "I stopped: you have used your daily budget (1,150 tokens of 1,000 tokens); it starts again at 00:00 UTC, or ask whoever runs glassbox here to raise it.\n\nWhat I had so far: Let me add that up.",
    );
    const calls = playground.model.requests.length;
    expect(calls).toBe(2);
    const refused = await ask("first", "alice", "budget-a2");
    expect(refused).toMatchObject({ status: "error", steps: 0 });
    expect(refused.output).toMatch(
      /^You have used your daily budget \(1,150 tokens of 1,000 tokens\); it starts again/,
    );
    expect(playground.model.requests.length).toBe(calls);
    expect(await ask("first", "bob", "budget-b")).toMatchObject({ status: "final", output: "First answer." });

    const all = await getJson<{ budgets: Standing[] }>(`${api}/usage`, SERVICE);
    expect(all.status).toBe(200);
    expect(all.body.budgets).toEqual([
      expect.objectContaining({
        scope: "user",
        period: "daily",
        unit: "tokens",
        of: "web:alice",
        used: 1150,
        limit: 1000,
      }),
      expect.objectContaining({
        scope: "user",
        period: "daily",
        unit: "tokens",
        of: "web:bob",
        used: 850,
        limit: 1000,
      }),
    ]);
    const bobs = await getJson<{ budgets: Standing[] }>(`${api}/usage`, BOB);
    expect(bobs.body.budgets.map((standing) => standing.of)).toEqual(["web:bob"]);
  });
});
