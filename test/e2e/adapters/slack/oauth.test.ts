// One Slack app installed in many workspaces, end to end: real Bolt (its own OAuth flow and its
// authorize from our installation store) against the fake Slack, whose oauth.v2.access hands each
// workspace its own bot token and which records the token every Web API call carried. Installations
// are kept in SQLite always, and in PostgreSQL when GLASSBOX_TEST_DATABASE_URL is set.
import { readFileSync, existsSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { openSlackInstallations } from "../../../../src/adapters/slack/slack-oauth.js";
import { createTokenCipher, parseEncryptionKey } from "../../../../src/adapters/slack/token-crypto.js";
import { loadConfig } from "../../../../src/config.js";
import type { RecordedCall } from "../../../../src/testing/fake-slack.js";
import { cleanUp, WAIT } from "../../../helpers/slack.js";
import {
  consent,
  followRedirect,
  install,
  newKey,
  openInstallLink,
  ORG_WORKSPACE,
  POSTGRES,
  SQLITE,
  startInstalledBot,
  TEAM_A,
  TEAM_B,
  WORKSPACES,
  type InstalledBot,
  type InstalledBotOptions,
} from "../../../helpers/slack-oauth.js";

const stops: Array<() => Promise<void>> = [];
const drops: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop(); // the bot before the fakes
  await cleanUp();
  for (const drop of drops.splice(0)) await drop();
});

async function startBot(options: InstalledBotOptions = {}): Promise<InstalledBot> {
  const bot = await startInstalledBot(options);
  let stopped = false;
  stops.push(async () => {
    if (!stopped) await bot.slack.stop();
    stopped = true;
  });
  drops.push(bot.drop);
  return bot;
}

const CHANNEL_A = "C0CHANA001";
const CHANNEL_B = "C0CHANB001";
const TEAM_OF = { [CHANNEL_A]: TEAM_A, [CHANNEL_B]: TEAM_B } as const;
const eventsUrl = (bot: InstalledBot) => bot.slack.eventsUrl as string;

/** A mention from `workspace`'s user U1 (the same Slack user id in every workspace, on purpose). */
async function mention(bot: InstalledBot, workspace: typeof TEAM_A, channel: string, text: string, user = "U1") {
  const ts = bot.fake.nextTs();
  const sent = await bot.fake.sendEvent(
    eventsUrl(bot),
    { type: "app_mention", user, channel, text: `<@${workspace.botUserId}> ${text}`, ts },
    { team: workspace },
  );
  expect(sent.status).toBe(200);
  return ts;
}

/** The bot's answer in a thread, once it is there. */
async function answerIn(bot: InstalledBot, channel: string, threadTs: string, words: string): Promise<void> {
  await expect
    .poll(
      () =>
        bot.fake.messages(channel, threadTs).some((message) => message.bot_id && (message.text ?? "").includes(words)),
      WAIT,
    )
    .toBe(true);
}

const channelOf = (call: RecordedCall) => (call.args.channel ?? call.args.channel_id) as string | undefined;
const tokens = WORKSPACES.map((workspace) => workspace.botToken);

for (const backend of [SQLITE, POSTGRES]) {
  describe.runIf(backend.available)(`Slack installed in many workspaces, installations in ${backend.name}`, () => {
    it("installs two workspaces through the OAuth redirect and answers each one's events with its own token", async () => {
      const bot = await startBot({ backend });
      const installedA = await install(bot.slack.installUrl as string, TEAM_A.teamId);
      const installedB = await install(bot.slack.installUrl as string, TEAM_B.teamId);
      expect(installedA).toMatchObject({
        status: 200,
        page: expect.stringContaining("glassbox is installed in Team A"),
      });
      expect(installedB).toMatchObject({
        status: 200,
        page: expect.stringContaining("glassbox is installed in Team B"),
      });
      // Each code was exchanged with the app's credentials, asking for the scopes glassbox uses.
      const exchanges = bot.fake.callsTo("oauth.v2.access");
      expect(exchanges).toHaveLength(2);
      expect(
        exchanges.every((call) => call.args.client_id && call.args.client_secret && call.token === undefined),
      ).toBe(true);

      const threadA = await mention(bot, TEAM_A, CHANNEL_A, "what is the weather in team A");
      const threadB = await mention(bot, TEAM_B, CHANNEL_B, "what is the weather in team B");
      await answerIn(bot, CHANNEL_A, threadA, "You said: what is the weather in team A");
      await answerIn(bot, CHANNEL_B, threadB, "You said: what is the weather in team B");

      // Every call into a workspace's channel carried that workspace's token.
      const channelCalls = bot.fake.calls.filter(
        (call) => channelOf(call) === CHANNEL_A || channelOf(call) === CHANNEL_B,
      );
      expect(channelCalls.length).toBeGreaterThanOrEqual(2);
      for (const call of channelCalls)
        expect({ method: call.method, token: call.token }).toEqual({
          method: call.method,
          token: TEAM_OF[channelOf(call) as keyof typeof TEAM_OF].botToken,
        });

      // Without SLACK_ALLOWED_WORKSPACES any workspace may install it: the start said so.
      expect(bot.lines.some((line) => /set SLACK_ALLOWED_WORKSPACES/.test(String(line.msg)))).toBe(true);
      // The same Slack user id in two workspaces is two people to quotas and memory.
      const users = bot.store.db.prepare("SELECT DISTINCT user_id FROM runs ORDER BY user_id").pluck().all();
      expect(users).toEqual([`${TEAM_A.teamId}:U1`, `${TEAM_B.teamId}:U1`]);
      // No token or secret reached the log, at debug level and without the production logger's redaction.
      const logged = bot.logText();
      for (const secret of [...tokens, bot.oauth.clientSecret, bot.oauth.stateSecret, bot.oauth.encryptionKey])
        expect(logged).not.toContain(secret);
    });

    it("any Slack workspace can install an OAuth deployment: with SLACK_ALLOWED_WORKSPACES, another is refused at install with a page that says why, and its events go unanswered", async () => {
      const bot = await startBot({ backend, oauth: { allowedWorkspaces: [TEAM_A.teamId] } });
      expect(await install(bot.slack.installUrl as string, TEAM_A.teamId)).toMatchObject({ status: 200 });
      expect(await install(bot.slack.installUrl as string, TEAM_B.teamId)).toEqual({
        status: 403,
        page: expect.stringContaining(
          `This glassbox serves only the Slack workspaces its operator chose, and ${TEAM_B.teamId} is not one of them; ask whoever runs it to add it to SLACK_ALLOWED_WORKSPACES.`,
        ),
      });
      expect((await bot.rows()).map((row) => row.key)).toEqual([TEAM_A.teamId]);
      const modelRequests = bot.model.requests.length;
      const refused = await bot.fake.sendEvent(
        eventsUrl(bot),
        {
          type: "app_mention",
          user: "U1",
          channel: CHANNEL_B,
          text: `<@${TEAM_B.botUserId}> hello from outside`,
          ts: bot.fake.nextTs(),
        },
        { team: TEAM_B },
      );
      expect(refused.status).toBe(401);
      const threadA = await mention(bot, TEAM_A, CHANNEL_A, "hello from inside");
      await answerIn(bot, CHANNEL_A, threadA, "You said: hello from inside");
      expect(
        bot.model.requests.slice(modelRequests).map((request) => JSON.stringify(request.body.messages)),
      ).not.toContainEqual(expect.stringContaining("hello from outside"));
      expect(bot.fake.calls.filter((call) => channelOf(call) === CHANNEL_B)).toEqual([]);
      expect(bot.lines.some((line) => /set SLACK_ALLOWED_WORKSPACES/.test(String(line.msg)))).toBe(false);
    });

    it("keeps no token in plain text, and a different key cannot read the installations", async () => {
      const bot = await startBot({ backend });
      await install(bot.slack.installUrl as string, TEAM_A.teamId);
      await install(bot.slack.installUrl as string, TEAM_B.teamId);

      const rows = await bot.rows();
      expect(rows.map((row) => row.key).sort()).toEqual([TEAM_A.teamId, TEAM_B.teamId]);
      expect(rows.map((row) => row.bot_user_id).sort()).toEqual([TEAM_A.botUserId, TEAM_B.botUserId]);
      const raw = JSON.stringify(rows);
      expect(raw).not.toContain("xoxb-");
      for (const token of tokens) expect(raw).not.toContain(token);
      if (backend === SQLITE) {
        // Nor anywhere in the file or its write-ahead log.
        const bytes = [bot.dbPath, `${bot.dbPath}-wal`]
          .filter(existsSync)
          .map((path) => readFileSync(path).toString("latin1"))
          .join("");
        expect(bytes).toContain(TEAM_A.teamId);
        expect(bytes).not.toContain("xoxb-");
      }

      const rightKey = await openSlackInstallations(bot.oauth);
      const wrongKey = await openSlackInstallations({ ...bot.oauth, encryptionKey: newKey() });
      try {
        expect(await rightKey.botTokenForTeam(TEAM_B.teamId)).toBe(TEAM_B.botToken);
        await expect(
          wrongKey.fetchInstallation({ teamId: TEAM_A.teamId, enterpriseId: undefined, isEnterpriseInstall: false }),
        ).rejects.toThrow(
          /installation of T0TEAMA001 cannot be decrypted \(GLASSBOX_ENCRYPTION_KEY is not the key it was stored with\)/,
        );
        await expect(wrongKey.botTokenForTeam(TEAM_B.teamId)).rejects.toThrow(/cannot be decrypted/);
      } finally {
        await rightKey.close();
        await wrongKey.close();
      }
    });

    it("forgets a workspace that uninstalls the app: its events go unanswered, the others' still are", async () => {
      const bot = await startBot({ backend });
      await install(bot.slack.installUrl as string, TEAM_A.teamId);
      await install(bot.slack.installUrl as string, TEAM_B.teamId);
      const before = await mention(bot, TEAM_A, CHANNEL_A, "hello before uninstalling");
      await answerIn(bot, CHANNEL_A, before, "You said: hello before uninstalling");

      bot.fake.oauth?.revoke(TEAM_A.teamId);
      expect((await bot.fake.sendEvent(eventsUrl(bot), { type: "app_uninstalled" }, { team: TEAM_A })).status).toBe(
        200,
      );
      await expect.poll(async () => (await bot.rows()).map((row) => row.key), WAIT).toEqual([TEAM_B.teamId]);
      const callsAfterUninstall = bot.fake.calls.length;
      const modelRequests = bot.model.requests.length;

      // Authorizing the event fails, so ingress does not accept it (401): nothing was started.
      const refused = await bot.fake.sendEvent(
        eventsUrl(bot),
        {
          type: "app_mention",
          user: "U1",
          channel: CHANNEL_A,
          text: `<@${TEAM_A.botUserId}> hello after uninstalling`,
          ts: bot.fake.nextTs(),
        },
        { team: TEAM_A },
      );
      expect(refused.status).toBe(401);
      const threadB = await mention(bot, TEAM_B, CHANNEL_B, "still there");
      await answerIn(bot, CHANNEL_B, threadB, "You said: still there");

      const later = bot.fake.calls.slice(callsAfterUninstall);
      expect(later.filter((call) => call.token === TEAM_A.botToken || channelOf(call) === CHANNEL_A)).toEqual([]);
      expect(
        bot.model.requests.slice(modelRequests).map((request) => JSON.stringify(request.body.messages)),
      ).not.toContainEqual(expect.stringContaining("after uninstalling"));
      expect(
        bot.lines.some((line) =>
          /glassbox is not installed in Slack workspace T0TEAMA001/.test(String(line.error ?? line.msg)),
        ),
      ).toBe(true);

      // A revoked bot token is forgotten the same way.
      expect(
        (
          await bot.fake.sendEvent(
            eventsUrl(bot),
            { type: "tokens_revoked", tokens: { bot: [TEAM_B.botUserId] } },
            { team: TEAM_B },
          )
        ).status,
      ).toBe(200);
      await expect.poll(async () => (await bot.rows()).length, WAIT).toBe(0);
    });

    it("refuses a redirect whose state is not the browser's own, and installs nothing", async () => {
      const bot = await startBot({ backend });
      const url = bot.slack.installUrl as string;
      const mine = await openInstallLink(url);
      const theirs = await openInstallLink(url);
      // Slack sends back the other session's state; this browser's cookie holds its own.
      const crossed = await followRedirect(await consent(theirs.authorizeUrl, TEAM_A.teamId), mine.cookie);
      expect(crossed.status).toBe(400);
      expect(crossed.page).toContain(
        "This installation link has expired or was opened in another browser; start again at /slack/install in this browser.",
      );
      // No cookie at all, and a state that was never issued (a cookie to match it), are refused too.
      expect((await followRedirect(await consent(mine.authorizeUrl, TEAM_A.teamId), null)).status).toBe(400);
      const forged = new URL(await consent(mine.authorizeUrl, TEAM_A.teamId));
      forged.searchParams.set("state", "forged-state");
      expect((await followRedirect(forged.toString(), "slack-app-oauth-state=forged-state")).status).toBe(400);

      expect(bot.fake.callsTo("oauth.v2.access")).toEqual([]);
      expect(await bot.rows()).toEqual([]);
      // The honest session still works.
      expect((await followRedirect(await consent(mine.authorizeUrl, TEAM_B.teamId), mine.cookie)).status).toBe(200);
      expect((await bot.rows()).map((row) => row.key)).toEqual([TEAM_B.teamId]);
    });
  });
}

describe("Slack installed in many workspaces", () => {
  it("answers a workspace of an org-wide install with the org's token, wherever the run posts from", async () => {
    const bot = await startBot();
    const installed = await install(bot.slack.installUrl as string, ORG_WORKSPACE.teamId);
    expect(installed).toMatchObject({
      status: 200,
      page: expect.stringContaining("glassbox is installed in Fake Org"),
    });
    expect((await bot.rows()).map((row) => ({ key: row.key, org_wide: row.org_wide }))).toEqual([
      { key: ORG_WORKSPACE.enterpriseId, org_wide: 1 },
    ]);

    const channel = "C0ORGCHAN1";
    const ts = await mention(bot, ORG_WORKSPACE, channel, "hello from the org");
    await answerIn(bot, channel, ts, "You said: hello from the org");
    const calls = bot.fake.calls.filter((call) => channelOf(call) === channel);
    expect(calls.length).toBeGreaterThan(0);
    // Posted with the org's token, naming the workspace (an org token needs team_id).
    for (const call of calls)
      expect({ token: call.token, team: call.args.team_id }).toEqual({
        token: ORG_WORKSPACE.botToken,
        team: ORG_WORKSPACE.teamId,
      });
    expect(bot.store.db.prepare("SELECT DISTINCT user_id FROM runs").pluck().all()).toEqual([
      `${ORG_WORKSPACE.enterpriseId}:U1`,
    ]);
  });

  it("counts daily caps per workspace and user: one workspace's U1 at the cap leaves another's U1 free", async () => {
    const bot = await startBot({ env: { GLASSBOX_USER_DAILY_TOKENS: "50" } });
    await install(bot.slack.installUrl as string, TEAM_A.teamId);
    await install(bot.slack.installUrl as string, TEAM_B.teamId);
    const first = await mention(bot, TEAM_A, CHANNEL_A, "first question");
    await answerIn(bot, CHANNEL_A, first, "You said: first question");
    const second = await mention(bot, TEAM_A, CHANNEL_A, "second question");
    await answerIn(bot, CHANNEL_A, second, "You have used your daily allowance");

    const elsewhere = await mention(bot, TEAM_B, CHANNEL_B, "a question from team B");
    await answerIn(bot, CHANNEL_B, elsewhere, "You said: a question from team B");
    expect(
      bot.fake.messages(CHANNEL_B, elsewhere).some((message) => (message.text ?? "").includes("daily allowance")),
    ).toBe(false);
  });

  it("decides an approval in its own workspace and resumes the run with that workspace's token", async () => {
    const bot = await startBot();
    bot.model.setScript((_request, index) =>
      index === 0
        ? {
            toolCalls: [
              {
                name: "cancel_order",
                arguments: JSON.stringify({ order_id: "20240410003", reason: "ordered twice" }),
                id: "call_1",
              },
            ],
          }
        : { content: "Done: the order is cancelled." },
    );
    await install(bot.slack.installUrl as string, TEAM_B.teamId);
    const ts = await mention(bot, TEAM_B, CHANNEL_B, "cancel order 20240410003");
    let buttons: { ts: string; id: string } | undefined;
    await expect
      .poll(() => {
        const message = bot.fake
          .messages(CHANNEL_B, ts)
          .find((candidate) => JSON.stringify(candidate.blocks ?? []).includes("glassbox_approve"));
        const id = /"value":"([^"]+)"/.exec(JSON.stringify(message?.blocks ?? []))?.[1];
        buttons = message && id ? { ts: message.ts, id } : undefined;
        return buttons !== undefined;
      }, WAIT)
      .toBe(true);
    const click = (userId: string) =>
      bot.fake.sendBlockAction(eventsUrl(bot), {
        userId,
        channel: CHANNEL_B,
        messageTs: buttons?.ts as string,
        actionId: "glassbox_approve",
        value: buttons?.id as string,
        teamId: TEAM_B.teamId,
      });

    // Another person of that workspace may not decide; the one who asked may.
    expect((await click("U2")).status).toBe(200);
    await expect.poll(() => bot.fake.callsTo("chat.postEphemeral").length, WAIT).toBe(1);
    expect((await click("U1")).status).toBe(200);
    await answerIn(bot, CHANNEL_B, ts, "Done: the order is cancelled.");
    const calls = bot.fake.calls.filter((call) => channelOf(call) === CHANNEL_B);
    expect(calls.map((call) => call.method)).toContain("chat.update"); // the approval message, decided
    expect(new Set(calls.map((call) => call.token))).toEqual(new Set([TEAM_B.botToken]));
  });

  it("installs through Bolt's install server in Socket Mode, and answers over the socket with the workspace's token", async () => {
    const bot = await startBot({ socket: true });
    await bot.fake.waitForSocket(1);
    expect(await install(bot.slack.installUrl as string, TEAM_A.teamId)).toMatchObject({ status: 200 });
    const ts = bot.fake.nextTs();
    const sent = await bot.fake.sendSocketEvent(
      { type: "app_mention", user: "U1", channel: CHANNEL_A, text: `<@${TEAM_A.botUserId}> over the socket`, ts },
      { team: TEAM_A },
    );
    expect(sent.acked).toBe(true);
    await answerIn(bot, CHANNEL_A, ts, "You said: over the socket");
    const calls = bot.fake.calls.filter((call) => channelOf(call) === CHANNEL_A);
    expect(new Set(calls.map((call) => call.token))).toEqual(new Set([TEAM_A.botToken]));
  });
});

describe("Slack OAuth settings and the encryption key", () => {
  const oauthEnv = {
    SLACK_CLIENT_ID: "1.2",
    SLACK_CLIENT_SECRET: "secret",
    SLACK_STATE_SECRET: "state",
    SLACK_SIGNING_SECRET: "signing",
  };

  it("says in one sentence how to make a key when it is missing or malformed", () => {
    expect(() => loadConfig(oauthEnv)).toThrow(
      /^GLASSBOX_ENCRYPTION_KEY is not set, .*make one with `openssl rand -base64 32`/,
    );
    expect(() => loadConfig({ ...oauthEnv, GLASSBOX_ENCRYPTION_KEY: "too-short" })).toThrow(
      "GLASSBOX_ENCRYPTION_KEY must be 32 bytes written as base64 (44 characters) or hex (64 digits), and this one is not; make one with `openssl rand -base64 32`.",
    );
    expect(() => loadConfig({ ...oauthEnv, GLASSBOX_ENCRYPTION_KEY: "ab".repeat(31) })).toThrow(/must be 32 bytes/);
    const hex = "0f".repeat(32);
    expect(loadConfig({ ...oauthEnv, GLASSBOX_ENCRYPTION_KEY: hex }).slack?.oauth?.encryptionKey).toBe(hex);
    const slack = loadConfig({ ...oauthEnv, GLASSBOX_ENCRYPTION_KEY: newKey() }).slack;
    expect(slack?.botToken).toBeUndefined();
    expect(slack?.oauth).toMatchObject({
      clientId: "1.2",
      scopes: [
        "app_mentions:read",
        "chat:write",
        "im:history",
        "channels:history",
        "groups:history",
        "mpim:history",
        "assistant:write",
        "channels:read",
        "files:read",
        "usergroups:read",
      ],
    });
  });

  it("names what is missing, and refuses a bot token beside the OAuth settings", () => {
    const key = { GLASSBOX_ENCRYPTION_KEY: newKey() };
    expect(() => loadConfig({ ...oauthEnv, ...key, SLACK_STATE_SECRET: "" })).toThrow(
      /SLACK_STATE_SECRET is not set\.$/,
    );
    expect(() => loadConfig({ ...oauthEnv, ...key, SLACK_BOT_TOKEN: "xoxb-1" })).toThrow(
      "SLACK_BOT_TOKEN is for one workspace and SLACK_CLIENT_ID for installing in many; set one of them, not both.",
    );
    expect(() => loadConfig({ ...oauthEnv, ...key, SLACK_SIGNING_SECRET: "" })).toThrow(
      /SLACK_CLIENT_ID is set but neither SLACK_APP_TOKEN/,
    );
  });

  it("seals a token so that only its own key and its own record open it", () => {
    const cipher = createTokenCipher(parseEncryptionKey(newKey()));
    const sealed = cipher.seal("xoxb-secret-token", "T1");
    expect(sealed).not.toContain("xoxb");
    expect(cipher.seal("xoxb-secret-token", "T1")).not.toBe(sealed); // a new IV each time
    expect(cipher.open(sealed, "T1")).toBe("xoxb-secret-token");
    expect(() => cipher.open(sealed, "T2")).toThrow(/installation of T2 cannot be decrypted/); // moved to another row
    expect(() => createTokenCipher(parseEncryptionKey(newKey())).open(sealed, "T1")).toThrow(
      /not the key it was stored with/,
    );
  });
});
