// Drives the REAL @slack/bolt App and @slack/web-api WebClient against the fake Slack, so the fake
// is checked against the libraries' own expectations (signing, envelopes, acks, form encoding).
import { App, type Logger, LogLevel, SocketModeReceiver, webApi } from "@slack/bolt";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { type FakeSlack, startFakeSlack } from "../../../src/testing/fake-slack.js";

const BOT_TOKEN = "xoxb-test-bot-token";
const APP_TOKEN = "xapp-1-test-app-token";
const SIGNING_SECRET = "test-signing-secret";
const CHANNEL = "C0TESTCHAN";
const USER = "U0TESTUSER";

// Bolt logs at INFO by default ("Now connected to Slack", signature warnings); keep test output clean.
const silentLogger: Logger = {
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
  setLevel: () => {},
  getLevel: () => LogLevel.ERROR,
  setName: () => {},
};

let fake: FakeSlack | undefined;
let app: App | undefined;

afterEach(async () => {
  // Stop the app first: a Socket Mode client whose server vanishes keeps retrying
  // apps.connections.open (its retryConfig allows 100 retries) long after the test.
  await app?.stop().catch(() => {});
  app = undefined;
  await fake?.close();
  fake = undefined;
});

async function start(options: Parameters<typeof startFakeSlack>[0] = {}): Promise<FakeSlack> {
  fake = await startFakeSlack({ botToken: BOT_TOKEN, appToken: APP_TOKEN, signingSecret: SIGNING_SECRET, ...options });
  return fake;
}

/** Bolt's built-in HTTPReceiver on a free port; returns the Events API request URL. */
async function startHttpApp(f: FakeSlack, register: (a: App) => void): Promise<string> {
  app = new App({
    token: BOT_TOKEN,
    signingSecret: SIGNING_SECRET,
    clientOptions: { slackApiUrl: f.apiUrl },
    logger: silentLogger,
  });
  register(app);
  const server = (await app.start({ port: 0, host: "127.0.0.1" })) as unknown as Server;
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/slack/events`;
}

const mention = (text: string, ts?: string) => ({
  type: "app_mention",
  user: USER,
  channel: CHANNEL,
  text,
  ...(ts ? { ts } : {}),
});
const webClient = (f: FakeSlack, token = BOT_TOKEN) =>
  new webApi.WebClient(token, { slackApiUrl: f.apiUrl, retryConfig: { retries: 0 }, logger: silentLogger });

describe("fake Slack with Bolt over HTTP", () => {
  it("delivers a signed app_mention and records the threaded reply", async () => {
    const f = await start();
    const url = await startHttpApp(f, (a) => {
      a.event("app_mention", async ({ event, say }) => {
        await say({ text: `you said: ${event.text}`, thread_ts: event.ts });
      });
    });
    const ts = f.nextTs();
    const sent = await f.sendEvent(url, mention("<@U0FAKEBOT1> hello", ts));
    expect(sent.status).toBe(200);
    expect(sent.eventId).toMatch(/^Ev/);

    const post = await f.waitForCall("chat.postMessage");
    expect(post.token).toBe(BOT_TOKEN);
    expect(post.args).toMatchObject({ channel: CHANNEL, thread_ts: ts, text: "you said: <@U0FAKEBOT1> hello" });
    // Bolt verified the token with auth.test before authorizing the event.
    expect(f.callsTo("auth.test")[0]?.token).toBe(BOT_TOKEN);
    // A person looking at the thread sees their mention and the bot's reply.
    expect(f.messages(CHANNEL, ts).map((m) => [m.user, m.text])).toEqual([
      [USER, "<@U0FAKEBOT1> hello"],
      ["U0FAKEBOT1", "you said: <@U0FAKEBOT1> hello"],
    ]);
  });

  it("is rejected with 401 for a bad signature or a stale timestamp, and accepted when signed right", async () => {
    const f = await start();
    const seen: string[] = [];
    const url = await startHttpApp(f, (a) => {
      a.event("app_mention", async ({ event }) => {
        seen.push(event.text);
      });
    });
    const bad = await f.sendEvent(url, mention("forged"), { signingSecret: "not-the-secret" });
    const stale = await f.sendEvent(url, mention("stale"), { timestamp: Math.floor(Date.now() / 1000) - 10 * 60 });
    expect([bad.status, stale.status]).toEqual([401, 401]);

    const good = await f.sendEvent(url, mention("genuine"));
    expect(good.status).toBe(200);
    await expect.poll(() => seen, { timeout: 5000 }).toEqual(["genuine"]);
  });

  it("answers url_verification with the challenge", async () => {
    const f = await start();
    const url = await startHttpApp(f, () => {});
    const result = await f.sendUrlVerification(url);
    expect(result.status).toBe(200);
    expect(JSON.parse(result.body)).toEqual({ challenge: result.challenge });
  });

  it("passes X-Slack-Retry-Num / X-Slack-Retry-Reason through to Bolt", async () => {
    const f = await start();
    const retries: Array<[number | undefined, string | undefined]> = [];
    const url = await startHttpApp(f, (a) => {
      a.event("app_mention", async ({ context }) => {
        retries.push([context.retryNum, context.retryReason]);
      });
    });
    await f.sendEvent(url, mention("again"), { retryNum: 2, retryReason: "http_timeout", eventId: "Ev0SAME" });
    await expect.poll(() => retries, { timeout: 5000 }).toEqual([[2, "http_timeout"]]);
  });

  it("sends a block action that Bolt acks, updates the message and uses the response_url", async () => {
    const f = await start();
    const url = await startHttpApp(f, (a) => {
      a.action("approve", async ({ ack, body, action, client, respond }) => {
        await ack();
        if (body.type !== "block_actions" || action.type !== "button" || !body.channel || !body.message) return;
        const blockId = body.actions[0]?.block_id; // the fake took it from the posted message's blocks
        await client.chat.update({
          channel: body.channel.id,
          ts: body.message.ts,
          text: `approved ${action.value} (${blockId})`,
        });
        await respond({ text: "thanks", response_type: "ephemeral" });
      });
    });
    // The bot first posts a message with a button, as the approval flow would.
    const posted = await webClient(f).chat.postMessage({
      channel: CHANNEL,
      text: "Run the tool?",
      blocks: [
        {
          type: "actions",
          block_id: "approval",
          elements: [
            { type: "button", action_id: "approve", value: "call-1", text: { type: "plain_text", text: "Approve" } },
          ],
        },
      ],
    });
    expect(f.calls.at(-1)?.args.blocks).toEqual([expect.objectContaining({ block_id: "approval" })]); // form value JSON-parsed

    const result = await f.sendBlockAction(url, {
      userId: USER,
      channel: CHANNEL,
      messageTs: posted.ts ?? "",
      actionId: "approve",
      value: "call-1",
    });
    expect(result.status).toBe(200);
    const update = await f.waitForCall("chat.update");
    expect(update.args).toMatchObject({ channel: CHANNEL, ts: posted.ts, text: "approved call-1 (approval)" });
    expect(f.messages(CHANNEL).find((m) => m.ts === posted.ts)?.text).toBe("approved call-1 (approval)");
    expect((await f.waitForCall("response_url")).args).toEqual({ text: "thanks", response_type: "ephemeral" });
  });

  it("answers Web API errors like Slack", async () => {
    const f = await start();
    await expect(webClient(f, "xoxb-wrong").auth.test()).rejects.toMatchObject({
      data: { ok: false, error: "invalid_auth" },
    });
    await expect(webClient(f, APP_TOKEN).auth.test()).rejects.toMatchObject({
      data: { error: "not_allowed_token_type" },
    });
    await expect(webClient(f).apiCall("no.such.method")).rejects.toMatchObject({ data: { error: "unknown_method" } });
    await expect(webClient(f).chat.update({ channel: CHANNEL, ts: "1.000001", text: "x" })).rejects.toMatchObject({
      data: { error: "message_not_found" },
    });
    expect(f.callsTo("auth.test").map((c) => c.token)).toEqual(["xoxb-wrong", APP_TOKEN]);
  });
});

describe("fake Slack with Bolt in Socket Mode", () => {
  it("connects with the app token, delivers an app_mention envelope, gets it acked and the reply recorded", async () => {
    const f = await start();
    app = new App({
      token: BOT_TOKEN,
      appToken: APP_TOKEN,
      socketMode: true,
      clientOptions: { slackApiUrl: f.apiUrl },
      logger: silentLogger,
    });
    app.event("app_mention", async ({ event, say }) => {
      await say({ text: "on it", thread_ts: event.ts });
    });
    await app.start(); // resolves once the fake's `hello` arrives
    expect(f.socketConnections()).toBe(1);
    expect(f.callsTo("apps.connections.open").map((c) => c.token)).toEqual([APP_TOKEN]);

    const ts = f.nextTs();
    const sent = await f.sendSocketEvent(mention("<@U0FAKEBOT1> help", ts));
    expect(sent.acked).toBe(true);
    const post = await f.waitForCall("chat.postMessage");
    expect(post.args).toMatchObject({ channel: CHANNEL, thread_ts: ts, text: "on it" });
  });

  it("delivers an interactive block action envelope", async () => {
    const f = await start();
    app = new App({
      token: BOT_TOKEN,
      appToken: APP_TOKEN,
      socketMode: true,
      clientOptions: { slackApiUrl: f.apiUrl },
      logger: silentLogger,
    });
    app.action("deny", async ({ ack, body, client }) => {
      await ack();
      if (body.type === "block_actions" && body.channel && body.message) {
        await client.chat.update({ channel: body.channel.id, ts: body.message.ts, text: "denied" });
      }
    });
    await app.start();
    const posted = await webClient(f).chat.postMessage({ channel: CHANNEL, text: "Delete everything?" });
    const sent = await f.sendSocketBlockAction({
      userId: USER,
      channel: CHANNEL,
      messageTs: posted.ts ?? "",
      actionId: "deny",
      value: "no",
    });
    expect(sent.acked).toBe(true);
    await f.waitForCall("chat.update");
    expect(f.messages(CHANNEL).map((m) => m.text)).toEqual(["denied"]);
  });

  it("refuses a wrong app token, which Bolt treats as unrecoverable", async () => {
    const f = await start();
    app = new App({
      token: BOT_TOKEN,
      appToken: "xapp-1-wrong",
      socketMode: true,
      clientOptions: { slackApiUrl: f.apiUrl },
      logger: silentLogger,
    });
    await expect(app.start()).rejects.toMatchObject({ data: { error: "invalid_auth" } });
    expect(f.socketConnections()).toBe(0);
  });

  it("reconnects through apps.connections.open after a disconnect message", async () => {
    const f = await start();
    // An explicit receiver exposes clientPingTimeout, which also sets the reconnect delay (default 5 s).
    // Its Web API client only reaches the fake through installerOptions.clientOptions.
    const receiver = new SocketModeReceiver({
      appToken: APP_TOKEN,
      clientPingTimeout: 1000,
      logger: silentLogger,
      installerOptions: { clientOptions: { slackApiUrl: f.apiUrl } },
    });
    app = new App({ token: BOT_TOKEN, receiver, clientOptions: { slackApiUrl: f.apiUrl }, logger: silentLogger });
    await app.start();
    const since = f.calls.length;
    f.disconnectSocket();
    await f.waitForCall("apps.connections.open", undefined, { since, timeoutMs: 10_000 });
    await f.waitForSocket(1);
    expect(f.callsTo("apps.connections.open")).toHaveLength(2);
    expect((await f.sendSocketEvent(mention("still there?"))).acked).toBe(true);
  });
});

describe("fake Slack with the web-api chat stream helper", () => {
  const thread = { channel: CHANNEL, recipient_team_id: "T0FAKE0001", recipient_user_id: USER };

  it("start/append/stop builds the final message text", async () => {
    const f = await start();
    const threadTs = f.nextTs();
    const streamer = webClient(f).chatStream({ ...thread, thread_ts: threadTs, buffer_size: 8 });
    await streamer.append({ markdown_text: "Hello" }); // buffered: no call yet
    await streamer.append({ markdown_text: ", world" }); // flushes: chat.startStream
    await streamer.append({ markdown_text: "! More text." }); // chat.appendStream
    await streamer.stop({ markdown_text: " Done." }); // chat.stopStream carries the tail
    expect(f.calls.map((c) => c.method)).toEqual(["chat.startStream", "chat.appendStream", "chat.stopStream"]);
    expect(f.messages(CHANNEL, threadTs)).toEqual([
      expect.objectContaining({
        ts: streamer.ts,
        thread_ts: threadTs,
        user: "U0FAKEBOT1",
        text: "Hello, world! More text. Done.",
      }),
    ]);
    await expect(
      webClient(f).chat.appendStream({ channel: CHANNEL, ts: streamer.ts ?? "", markdown_text: "late" }),
    ).rejects.toMatchObject({ data: { error: "message_not_in_streaming_state" } });
  });

  it("handles a short stream, where web-api starts empty and sends all text with stopStream", async () => {
    const f = await start();
    const threadTs = f.nextTs();
    const streamer = webClient(f).chatStream({ ...thread, thread_ts: threadTs });
    await streamer.append({ markdown_text: "short answer" });
    await streamer.stop();
    expect(f.callsTo("chat.startStream")[0]?.args.chunks).toBeUndefined();
    expect(f.callsTo("chat.stopStream")[0]?.args.chunks).toEqual([{ type: "markdown_text", text: "short answer" }]);
    expect(f.messages(CHANNEL, threadTs).map((m) => m.text)).toEqual(["short answer"]);
  });

  it("errors when chat.startStream is refused, leaving nothing posted", async () => {
    const f = await start({ refuse: ["chat.startStream"] });
    const streamer = webClient(f).chatStream({ ...thread, thread_ts: f.nextTs() });
    await streamer.append({ markdown_text: "partial" });
    await expect(streamer.stop()).rejects.toMatchObject({ data: { ok: false, error: "missing_scope" } });
    expect(f.messages(CHANNEL)).toEqual([]);
  });
});

describe("fake Slack bookkeeping", () => {
  it("issues increasing timestamps and waits for calls that arrive later", async () => {
    const f = await start();
    const [a, b] = [f.nextTs(), f.nextTs()];
    expect(a).toMatch(/^\d{10}\.\d{6}$/);
    expect(b > a).toBe(true);

    const waiting = f.waitForCall("reactions.add", (c) => c.args.name === "eyes");
    await webClient(f).reactions.add({ channel: CHANNEL, timestamp: a, name: "thumbsup" });
    await webClient(f).reactions.add({ channel: CHANNEL, timestamp: a, name: "eyes" });
    expect((await waiting).args).toMatchObject({ channel: CHANNEL, timestamp: a, name: "eyes" });
  });
});

describe("fake Slack: what a call would broadcast", () => {
  it("records the special mentions of every call's text, blocks and markdown; plain words only where Slack reads them", async () => {
    const f = await start();
    const client = webClient(f);
    // Users, channels, links and dates notify nobody beyond one person; plain @here is text without link_names.
    await client.chat.postMessage({
      channel: CHANNEL,
      text: `hi <@${USER}> in <#C0OTHER> see <https://example.com|this> at <!date^1700000000^{time}|noon>, @here`,
    });
    await client.chat.postMessage({ channel: CHANNEL, text: "<!here> and <!channel|channel>, @everyone" });
    await client.chat.postMessage({ channel: CHANNEL, text: "ping @channel", link_names: true });
    await client.chat.postMessage({
      channel: CHANNEL,
      text: "fallback",
      blocks: [{ type: "context", elements: [{ type: "mrkdwn", text: "for <!subteam^S0TEAM|@oncall>" }] }],
    });
    await client.chat.postEphemeral({ channel: CHANNEL, user: USER, text: "<!EVERYONE>" });
    await client.assistant.threads.setStatus({
      channel_id: CHANNEL,
      thread_ts: f.nextTs(),
      status: "is telling @here…",
    });
    const streamer = client.chatStream({
      channel: CHANNEL,
      thread_ts: f.nextTs(),
      recipient_team_id: "T0FAKE0001",
      recipient_user_id: USER,
      buffer_size: 1,
    });
    await streamer.append({ markdown_text: "streamed @everyone" });
    await streamer.stop();

    expect(f.calls.map((call) => [call.method, call.broadcasts])).toEqual([
      ["chat.postMessage", []],
      ["chat.postMessage", ["<!here>", "<!channel|channel>"]],
      ["chat.postMessage", ["@channel"]],
      ["chat.postMessage", ["<!subteam^S0TEAM|@oncall>"]],
      ["chat.postEphemeral", ["<!EVERYONE>"]],
      ["assistant.threads.setStatus", ["@here"]],
      ["chat.startStream", ["@everyone"]],
      ["chat.stopStream", []],
    ]);
  });

  it("refuses a section whose text is over Slack's 3,000 characters", async () => {
    const f = await start();
    const section = (length: number) => [{ type: "section", text: { type: "mrkdwn", text: "x".repeat(length) } }];
    await webClient(f).chat.postMessage({ channel: CHANNEL, text: "fits", blocks: section(3_000) });
    await expect(
      webClient(f).chat.postMessage({ channel: CHANNEL, text: "too long", blocks: section(3_001) }),
    ).rejects.toMatchObject({ data: { error: "invalid_blocks" } });
    expect(f.messages(CHANNEL).map((m) => m.text)).toEqual(["fits"]);
  });
});

describe("fake Slack: where a block action comes from", () => {
  it("sends the workspace as team.id; another workspace, an org-wide install (team null) and an Enterprise Grid org on request", async () => {
    const f = await start();
    const bodies: Array<{ team: unknown; user: { team_id?: string }; enterprise?: unknown }> = [];
    const url = await startHttpApp(f, (a) => {
      a.action("go", async ({ ack, body }) => {
        await ack();
        bodies.push(body as (typeof bodies)[number]);
      });
    });
    const click = { userId: USER, channel: CHANNEL, messageTs: f.nextTs(), actionId: "go", value: "v" };
    for (const from of [{}, { teamId: "T0OTHER001" }, { teamId: null }, { enterpriseId: "E0FAKEORG1" }]) {
      expect((await f.sendBlockAction(url, { ...click, ...from })).status).toBe(200);
    }
    await expect.poll(() => bodies.length, { timeout: 5000 }).toBe(4);
    expect(bodies.map((body) => [body.team, body.user.team_id, body.enterprise])).toEqual([
      [{ id: "T0FAKE0001", domain: "t0fake0001" }, "T0FAKE0001", null],
      [{ id: "T0OTHER001", domain: "t0other001" }, "T0OTHER001", null],
      [null, "T0FAKE0001", null],
      // Slack's block_actions reference: in an Enterprise org, user.team_id is the org's id (E...).
      [
        { id: "T0FAKE0001", domain: "t0fake0001", enterprise_id: "E0FAKEORG1", enterprise_name: "Fake Org" },
        "E0FAKEORG1",
        { id: "E0FAKEORG1", name: "Fake Org" },
      ],
    ]);
  });
});
