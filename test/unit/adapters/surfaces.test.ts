// Where a worker process shows its runs (src/adapters/surfaces.ts), against the fake Discord and the
// fake Slack: Discord through discord.js REST only (a worker opens no gateway connection) in a guild
// channel and a DM, Slack threads through the Web API, HTTP API sessions nowhere; and an approval's
// message updated once it is decided. Also the role settings read from the environment.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Installation } from "@slack/bolt";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { GlassboxError } from "../../../src/agent/errors.js";
import type { RunResult } from "../../../src/agent/loop.js";
import { loadConfig } from "../../../src/config.js";
import type { Approval } from "../../../src/store/port.js";
import { startFakeDiscord, DEFAULT_GUILD, type FakeDiscord } from "../../../src/testing/fake-discord.js";
import { openSlackInstallations } from "../../../src/adapters/slack/slack-oauth.js";
import { startFakeSlack, type FakeSlack } from "../../../src/testing/fake-slack.js";
import { queueOptionsFromEnv } from "../../../src/roles/queue-settings.js";
import { openWorkerSurfaces, type WorkerSurfaces } from "../../../src/adapters/surfaces.js";
import { openDeployment } from "../../../src/roles/deployment.js";
import { startWorkerRole } from "../../../src/roles/worker.js";
import { CLIENT_ID, CLIENT_SECRET, newKey, STATE_SECRET, TEAM_A, TEAM_B } from "../../helpers/slack-oauth.js";

const log = pino({ level: "silent" });
const GUILD_CHANNEL = DEFAULT_GUILD.channels[0]?.id as string;
const DM_CHANNEL = "1100000000000000200";

const result = (sessionId: string, output: string): RunResult => ({
  runId: "run_1",
  sessionId,
  output,
  stopReason: "final",
  steps: 1,
  usage: { promptTokens: 1, completionTokens: 1, totalTokens: 2 },
  toolCalls: [],
});

const approval = (sessionId: string, status: Approval["status"] = "pending"): Approval =>
  ({
    id: "appr_1",
    runId: "run_1",
    sessionId,
    toolCallId: "call_1",
    toolName: "wipe_cache",
    arguments: {},
    requester: "42",
    status,
    createdAt: new Date().toISOString(),
    expiresAt: new Date(Date.now() + 60_000).toISOString(),
    policy: {},
    ...(status === "pending" ? {} : { decidedBy: "42", decidedAt: new Date().toISOString() }),
  }) as unknown as Approval;

describe("a worker's surfaces", () => {
  let discord: FakeDiscord | undefined;
  let slack: FakeSlack | undefined;
  let surfaces: WorkerSurfaces | undefined;
  afterEach(async () => {
    await surfaces?.close();
    await discord?.close();
    await slack?.close();
    surfaces = discord = slack = undefined;
  });

  it("posts Discord answers and approvals over REST, in a guild channel and a DM, without a gateway connection", async () => {
    discord = await startFakeDiscord({ dmChannels: [{ id: DM_CHANNEL, recipientId: "42" }] });
    const config = loadConfig({ DISCORD_TOKEN: "fake-bot-token", DISCORD_API_URL: discord.apiUrl });
    surfaces = await openWorkerSurfaces(config, log);

    const inGuild = surfaces.openSurface(`discord:${DEFAULT_GUILD.id}:${GUILD_CHANNEL}`, "42");
    inGuild.onEvent({
      type: "run_start",
      runId: "run_1",
      sessionId: `discord:${DEFAULT_GUILD.id}:${GUILD_CHANNEL}`,
    } as never);
    await inGuild.finish(result(`discord:${DEFAULT_GUILD.id}:${GUILD_CHANNEL}`, "the answer in the guild"));
    expect(discord.messages(GUILD_CHANNEL).map((message) => message.content)).toContain("the answer in the guild");

    const inDm = surfaces.openSurface(`discord:dm:${DM_CHANNEL}`, "42");
    const ref = await inDm.askApproval(approval(`discord:dm:${DM_CHANNEL}`));
    const [channelId, messageId] = (ref ?? "").split(":");
    expect(channelId).toBe(DM_CHANNEL);
    const asked = discord.messages(DM_CHANNEL).find((message) => message.id === messageId);
    expect(JSON.stringify(asked?.components)).toContain("glassbox:approve:appr_1");

    await surfaces.showDecision({ ...approval(`discord:dm:${DM_CHANNEL}`, "approved"), messageRef: ref } as Approval);
    const decided = discord.messages(DM_CHANNEL).find((message) => message.id === messageId);
    expect(decided?.content).toContain("Approved by");
    expect(decided?.components).toEqual([]);
    expect(discord.connections()).toBe(0);
  });

  it("posts Slack answers in their thread through the Web API, and shows HTTP API sessions nowhere", async () => {
    slack = await startFakeSlack();
    const config = loadConfig({
      SLACK_BOT_TOKEN: "xoxb-fake-bot-token",
      SLACK_SIGNING_SECRET: "secret",
      SLACK_API_URL: slack.apiUrl,
    });
    surfaces = await openWorkerSurfaces(config, log);
    const session = "slack:T0FAKE0001:C1:1730000000.000100";
    await surfaces.openSurface(session, "U1").finish(result(session, "the answer in the thread"));
    expect(slack.messages("C1", "1730000000.000100").map((message) => message.text)).toContain(
      "the answer in the thread",
    );

    const before = slack.calls.length;
    const web = surfaces.openSurface("web:w1", "U1");
    await web.finish(result("web:w1", "kept in the store"));
    expect(await web.askApproval(approval("web:w1"))).toBeUndefined();
    expect(slack.calls.length).toBe(before);
  });
});

describe("a worker's Slack surfaces for an app installed in many workspaces", () => {
  let directory: string | undefined;
  let slack: FakeSlack | undefined;
  let surfaces: WorkerSurfaces | undefined;
  afterEach(async () => {
    await surfaces?.close();
    await slack?.close();
    if (directory) rmSync(directory, { recursive: true, force: true });
    surfaces = slack = directory = undefined;
  });

  it("posts in each workspace with that workspace's bot token, read from the installations", async () => {
    directory = mkdtempSync(join(tmpdir(), "glassbox-worker-oauth-"));
    slack = await startFakeSlack({
      oauth: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, workspaces: [TEAM_A, TEAM_B] },
    });
    const config = loadConfig({
      SLACK_CLIENT_ID: CLIENT_ID,
      SLACK_CLIENT_SECRET: CLIENT_SECRET,
      SLACK_STATE_SECRET: STATE_SECRET,
      GLASSBOX_ENCRYPTION_KEY: newKey(),
      SLACK_SIGNING_SECRET: "secret",
      SLACK_API_URL: slack.apiUrl,
      GLASSBOX_DB: join(directory, "glassbox.db"),
    });
    // As ingress's OAuth flow stored them.
    const installations = await openSlackInstallations(
      config.slack?.oauth as NonNullable<NonNullable<typeof config.slack>["oauth"]>,
    );
    for (const team of [TEAM_A, TEAM_B]) {
      await installations.storeInstallation({
        team: { id: team.teamId },
        enterprise: undefined,
        isEnterpriseInstall: false,
        bot: { token: team.botToken, userId: team.botUserId, id: team.botId, scopes: ["chat:write"] },
      } as unknown as Installation);
    }
    await installations.close();

    surfaces = await openWorkerSurfaces(config, log);
    for (const team of [TEAM_A, TEAM_B]) {
      const session = `slack:${team.teamId}:C1:1730000000.000100`;
      await surfaces.openSurface(session, `${team.teamId}:U1`).finish(result(session, `the answer in ${team.teamId}`));
    }
    const posts = slack
      .callsTo("chat.postMessage")
      .filter((call) => String(call.args.text).startsWith("the answer in"));
    expect(posts.map((call) => [call.args.text, call.token])).toEqual([
      [`the answer in ${TEAM_A.teamId}`, TEAM_A.botToken],
      [`the answer in ${TEAM_B.teamId}`, TEAM_B.botToken],
    ]);
  });
});

describe("the worker role's settings", () => {
  it("refuses an unknown GLASSBOX_ROLE in one sentence", () => {
    expect(() => loadConfig({ GLASSBOX_ROLE: "boss" })).toThrow(
      "GLASSBOX_ROLE is 'boss'; set it to ingress, worker or all (with GLASSBOX_DATABASE_URL), or leave it unset to run everything in one process.",
    );
    expect(loadConfig({}).role).toBeUndefined();
    expect(loadConfig({ GLASSBOX_ROLE: "Worker", GLASSBOX_WORKER_CONCURRENCY: "3" })).toMatchObject({
      role: "worker",
      workerConcurrency: 3,
    });
    expect(() => loadConfig({ GLASSBOX_WORKER_CONCURRENCY: "2.5" })).toThrow(/GLASSBOX_WORKER_CONCURRENCY/);
  });

  it("refuses to start a worker without PostgreSQL, or without a model, in one sentence", async () => {
    const noDatabase = await openDeployment({ role: "worker", store: { databasePath: "unused.db" }, log })
      .then((deployment) =>
        startWorkerRole({ config: loadConfig({ OPENAI_API_KEY: "sk-test" }), deployment, log, concurrency: 1 }),
      )
      .catch((error: unknown) => error);
    expect(noDatabase).toBeInstanceOf(GlassboxError);
    expect((noDatabase as Error).message).toBe(
      "GLASSBOX_ROLE=worker needs GLASSBOX_DATABASE_URL (PostgreSQL), where ingress processes leave the turns; unset GLASSBOX_ROLE to run everything in one process.",
    );
    const deployment = await openDeployment({ role: "all", store: { databasePath: ":memory:" }, log });
    const noModel = await startWorkerRole({ config: loadConfig({}), deployment, log, concurrency: 1 }).catch(
      (error: unknown) => error,
    );
    await deployment.close();
    expect((noModel as Error).message).toMatch(/^No model is configured/);
  });

  it("reads the queue's timings from GLASSBOX_QUEUE_TIMINGS, and refuses anything else in one sentence", () => {
    expect(queueOptionsFromEnv({})).toEqual({});
    expect(queueOptionsFromEnv({ GLASSBOX_QUEUE_TIMINGS: '{"heartbeatMs":200,"deadAfterMs":1000}' })).toEqual({
      timings: { heartbeatMs: 200, deadAfterMs: 1000 },
    });
    for (const wrong of ["{", "[]", '{"heartbeat":5}', '{"heartbeatMs":-1}']) {
      expect(() => queueOptionsFromEnv({ GLASSBOX_QUEUE_TIMINGS: wrong })).toThrow(
        /^GLASSBOX_QUEUE_TIMINGS must be a JSON object of milliseconds/,
      );
    }
  });
});
