// Slack ingress for an app installed in many workspaces: the real Bolt OAuth flow against the fake
// Slack's workspaces (installations in the store's kind of database), then events of two workspaces
// accepted with their own session keys and users, on the real store and run queue, with a worker
// that only records the turns it gets. A workspace that never installed the app is refused.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { DEFAULT_SLACK_SCOPES, type SlackConfig, type SlackOAuthConfig } from "../../../../src/config.js";
import { createNameBook } from "../../../../src/adapters/names.js";
import { startSlackIngress, type SlackIngress } from "../../../../src/adapters/slack/slack-inbound.js";
import { workOf } from "../../../../src/conversations/turns.js";
import type { Turn } from "../../../../src/queue/types.js";
import { startFakeSlack, type FakeSlack } from "../../../../src/testing/fake-slack.js";
import type { FakeWorkspace } from "../../../../src/testing/fake-slack-oauth.js";
import { keysOf, runOf, TARGETS, type IngressHarness } from "../../helpers/ingress.js";
import {
  CLIENT_ID,
  CLIENT_SECRET,
  install,
  newKey,
  ORG_WORKSPACE,
  POSTGRES,
  SQLITE,
  STATE_SECRET,
  TEAM_A,
  TEAM_B,
  WORKSPACES,
} from "../../../helpers/slack-oauth.js";

const SIGNING_SECRET = "fake-signing-secret";

for (const target of TARGETS) {
  describe.runIf(target.available)(`Slack ingress installed in many workspaces: ${target.name}`, () => {
    let harness: IngressHarness;
    let fake: FakeSlack;
    let ingress: SlackIngress;
    let directory: string;
    let drop: () => Promise<void>;
    let slackConfig: SlackConfig;

    beforeEach(async () => {
      harness = await target.open();
      directory = mkdtempSync(join(tmpdir(), "glassbox-ingress-oauth-"));
      const backend = await (target.name.startsWith("PostgreSQL") ? POSTGRES : SQLITE).fresh(
        join(directory, "installations.db"),
      );
      drop = backend.drop;
      fake = await startFakeSlack({
        signingSecret: SIGNING_SECRET,
        oauth: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, workspaces: WORKSPACES },
      });
      const oauth: SlackOAuthConfig = {
        clientId: CLIENT_ID,
        clientSecret: CLIENT_SECRET,
        stateSecret: STATE_SECRET,
        scopes: DEFAULT_SLACK_SCOPES,
        encryptionKey: newKey(),
        authorizeUrl: fake.oauth?.authorizeUrl,
        database: backend.database,
      };
      slackConfig = {
        oauth,
        signingSecret: SIGNING_SECRET,
        port: 0,
        host: "127.0.0.1",
        apiUrl: fake.apiUrl,
        allowedChannels: [],
        approvers: [],
      };
      ingress = await startSlackIngress({
        ...harness.ingress,
        slack: slackConfig,
        log: harness.log,
        counter: harness.counter,
      });
      fake.oauth?.setRedirectUrl(new URL("/slack/oauth_redirect", ingress.installUrl).toString());
    });

    afterEach(async () => {
      await ingress?.stop();
      await fake?.close();
      await harness?.close();
      await drop?.();
      rmSync(directory, { recursive: true, force: true });
    });

    const mention = (workspace: FakeWorkspace, text: string) => {
      const ts = fake.nextTs();
      return fake
        .sendEvent(
          ingress.eventsUrl as string,
          { type: "app_mention", user: "U1", channel: "C1", text: `<@${workspace.botUserId}> ${text}`, ts },
          { team: workspace },
        )
        .then((sent) => ({ ...sent, ts }));
    };

    it("accepts each workspace's events under its own session keys and users, and refuses a workspace that never installed the app", async () => {
      for (const workspace of [TEAM_A, TEAM_B])
        expect((await install(ingress.installUrl as string, workspace.teamId)).status).toBe(200);
      const fromA = await mention(TEAM_A, "hello from A");
      const fromB = await mention(TEAM_B, "hello from B");
      const stranger = await mention(ORG_WORKSPACE, "hello from nowhere");
      expect([fromA.status, fromB.status]).toEqual([200, 200]);
      expect(stranger.status).toBe(401);
      const sessionA = `slack:${TEAM_A.teamId}:C1:${fromA.ts}`;
      const sessionB = `slack:${TEAM_B.teamId}:C1:${fromB.ts}`;
      const turns = await harness.waitForTurns(2);
      expect(keysOf(turns, sessionA)).toEqual([`slack:event:${fromA.eventId}`]);
      expect(keysOf(turns, sessionB)).toEqual([`slack:event:${fromB.eventId}`]);
      const runOfSession = (session: string) =>
        harness.store.run(runOf(workOf(turns.filter((turn) => turn.conversation === session)[0] as Turn)));
      const [runA, runB] = [await runOfSession(sessionA), await runOfSession(sessionB)];
      expect(runA).toMatchObject({ userId: `${TEAM_A.teamId}:U1`, input: "hello from A", status: "accepted" });
      expect(runB).toMatchObject({ userId: `${TEAM_B.teamId}:U1`, input: "hello from B", status: "accepted" });
      expect(await harness.store.runsOfSession(`slack:${ORG_WORKSPACE.teamId}:C1:${stranger.ts}`)).toEqual([]);
    });

    it("names each workspace's people and channels with that workspace's own token; a workspace never installed shows ids", async () => {
      expect((await install(ingress.installUrl as string, TEAM_A.teamId)).status).toBe(200);
      const names = createNameBook({ slack: slackConfig }, harness.log, ingress.installations);
      expect(await names?.person(`slack:${TEAM_A.teamId}:C1:1.1`, `${TEAM_A.teamId}:U7`)).toBe("user-u7");
      expect(await names?.channel(`slack:${TEAM_A.teamId}:C1:1.1`)).toBe("channel-c1");
      const asked = fake.calls.filter((call) => call.method === "users.info" || call.method === "conversations.info");
      expect(asked.map((call) => call.token)).toEqual([TEAM_A.botToken, TEAM_A.botToken]);
      expect(await names?.person(`slack:${TEAM_B.teamId}:C1:1.1`, `${TEAM_B.teamId}:U7`)).toBeUndefined();
    });
  });
}
