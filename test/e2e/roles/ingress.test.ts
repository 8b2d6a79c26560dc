// GLASSBOX_ROLE=ingress as the lead will start it: the configuration from environment variables with
// no model configured at all, the store and queue on PostgreSQL, Slack and the HTTP API receiving;
// the turns reach a worker that only records them, on a queue handle of its own (another process's
// view of the same database). Without PostgreSQL the role is refused in one sentence.
import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { GlassboxError } from "../../../src/agent/errors.js";
import { assertModelConfigured, loadConfig } from "../../../src/config.js";
import { openDeployment, type Deployment } from "../../../src/roles/deployment.js";
import { startIngressRole, type IngressRole } from "../../../src/roles/ingress.js";
import { workOf } from "../../../src/conversations/turns.js";
import { openPostgresRunQueue, type PostgresRunQueue } from "../../../src/queue/postgres.js";
import type { Turn } from "../../../src/queue/types.js";
import { startFakeSlack, type FakeSlack } from "../../../src/testing/fake-slack.js";
import {
  createTestDatabase,
  NEEDS_DATABASE,
  TEST_DATABASE_URL,
  type TestDatabase,
} from "../fixtures/queue-database.js";
import { WAIT } from "../helpers/ingress.js";

const log = pino({ level: "silent" });

describe("the ingress role", () => {
  let role: IngressRole | undefined;
  let fake: FakeSlack | undefined;
  let worker: PostgresRunQueue | undefined;
  let database: TestDatabase | undefined;
  let deployment: Deployment | undefined;

  afterEach(async () => {
    await role?.stop();
    await deployment?.close();
    await worker?.close();
    await fake?.close();
    await database?.drop();
    role = fake = worker = database = deployment = undefined;
  });

  it("is refused in one sentence without PostgreSQL", async () => {
    const config = loadConfig({ GLASSBOX_WEB_PORT: "0" });
    const refused = await openDeployment({ role: "ingress", store: { databasePath: "unused.db" }, log })
      .then((opened) => startIngressRole({ config, deployment: opened, log }))
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(GlassboxError);
    expect((refused as Error).message).toBe(
      "GLASSBOX_ROLE=ingress needs GLASSBOX_DATABASE_URL (PostgreSQL), which carries the work to the worker processes; unset GLASSBOX_ROLE to run everything in one process.",
    );
  });

  it.runIf(Boolean(TEST_DATABASE_URL))(
    `receives Slack events and API runs with no model configured, for workers elsewhere (${NEEDS_DATABASE})`,
    async () => {
      database = await createTestDatabase(TEST_DATABASE_URL as string);
      fake = await startFakeSlack({ signingSecret: "role-signing-secret", botUserId: "U0FAKEBOT1" });
      const config = loadConfig({
        SLACK_BOT_TOKEN: "xoxb-fake-bot-token",
        SLACK_SIGNING_SECRET: "role-signing-secret",
        SLACK_API_URL: fake.apiUrl,
        PORT: "0",
        GLASSBOX_WEB_PORT: "0",
        GLASSBOX_API_TOKEN: "role-token",
      });
      expect(() => assertModelConfigured(config)).toThrow(/No model is configured/);
      deployment = await openDeployment({
        role: "ingress",
        store: { databaseUrl: database.url, databasePath: "unused.db" },
        log,
      });
      role = await startIngressRole({ config, deployment, log });

      const ts = fake.nextTs();
      const event = await fake.sendEvent(
        role.slack?.eventsUrl as string,
        { type: "app_mention", user: "U1", channel: "C1", text: "<@U0FAKEBOT1> from Slack", ts },
        { signingSecret: "role-signing-secret" },
      );
      expect(event.status).toBe(200);
      const response = await fetch(`${role.api?.url}/api/runs`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: "Bearer role-token" },
        body: JSON.stringify({ session: "w1", input: "from the API" }),
      });
      expect(response.status).toBe(202);
      const { runId } = (await response.json()) as { runId: string };

      const turns: Turn[] = [];
      worker = await openPostgresRunQueue({
        connectionString: database.url,
        timings: { heartbeatMs: 100, deadAfterMs: 1_000, sweepMs: 100, pollIntervalMs: 200 },
      });
      await worker.work(async (turn) => void turns.push(turn), { concurrency: 2 });
      await vi.waitFor(() => expect(turns).toHaveLength(2), WAIT);
      expect(turns.map((turn) => workOf(turn)).sort((a, b) => a.sessionId.localeCompare(b.sessionId))).toEqual([
        {
          kind: "message",
          runId: expect.stringMatching(/^run_/),
          sessionId: `slack:T0FAKE0001:C1:${ts}`,
          eventIds: [`slack:event:${event.eventId}`, `slack:message:C1:${ts}`],
        },
        { kind: "message", runId, sessionId: "web:w1", eventIds: [] },
      ]);
    },
  );
});
