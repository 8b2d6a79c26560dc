// Socket Mode and startup: the real Bolt app connected to the fake Slack over a WebSocket with an
// app token (no public URL, no signing secret), exactly-once across connections, and the
// configuration errors that stop startup with one sentence.
import { afterEach, describe, expect, it, vi } from "vitest";
import { loadConfig } from "../../../../src/config.js";
import {
  agentFor,
  APP_TOKEN,
  APPROVE,
  BOT,
  botTexts,
  cancelScript,
  CANCELLABLE_ORDER,
  CHANNEL,
  cleanUp,
  memoryLogger,
  messageAt,
  orderStatus,
  startAdapter,
  startModel,
  startSlack,
  tempPaths,
  textOf,
  visibleText,
  waitForApproval,
  waitForBotMessage,
} from "../../../helpers/slack.js";

afterEach(cleanUp);

const socketMode = { appToken: APP_TOKEN, signingSecret: undefined };
const mention = (ts: string, text = `<@${BOT}> hello over the socket`) => ({
  type: "app_mention",
  user: "U1",
  channel: CHANNEL,
  text,
  ts,
});

describe("Slack in Socket Mode", () => {
  it("is ready while its socket is connected, and not while Slack refuses to give it a new one", async () => {
    const fake = await startSlack();
    const model = await startModel([]);
    const { log } = memoryLogger();
    const { agent } = await agentFor(model, tempPaths(), log);
    const slack = await startAdapter({ fake, agent, log, slack: socketMode });
    expect(await slack.readiness()).toMatchObject({ ready: true, checks: { slack: "ok", store: "ok" } });
    fake.refuse("apps.connections.open", "internal_error");
    fake.dropSocket(0);
    const report = await vi.waitFor(async () => {
      const now = await slack.readiness();
      if (now.ready) throw new Error("still ready");
      return now;
    });
    expect(report.checks.store).toBe("ok");
    expect(["connecting", "reconnecting", "disconnected", "disconnecting"]).toContain(report.checks.slack);
  });

  it("acks an app_mention envelope and answers it in the thread", async () => {
    const fake = await startSlack();
    const model = await startModel([{ content: "Hello from the socket." }]);
    const { log } = memoryLogger();
    const { agent } = await agentFor(model, tempPaths(), log);
    const slack = await startAdapter({ fake, agent, log, slack: socketMode });
    expect(slack.eventsUrl).toBeUndefined();
    expect(fake.socketConnections()).toBe(1);
    expect(fake.callsTo("apps.connections.open").map((call) => call.token)).toEqual([APP_TOKEN]);

    const ts = fake.nextTs();
    const sent = await fake.sendSocketEvent(mention(ts));
    expect(sent.acked).toBe(true);
    await waitForBotMessage(fake, CHANNEL, ts, "Hello from the socket.");
    await slack.conversations.idle();
    expect(model.requests.map((request) => request.body.messages.filter((m) => m.role === "user").map(textOf))).toEqual(
      [["hello over the socket"]],
    );
  });

  it("answers an event delivered on two connections (two running bots on one database) once", async () => {
    const fake = await startSlack();
    const model = await startModel([{ content: "Answered once." }, { content: "Answered twice!" }]);
    const { log } = memoryLogger();
    const paths = tempPaths();
    const first = (await agentFor(model, paths, log)).agent;
    const second = (await agentFor(model, paths, log)).agent;
    const a = await startAdapter({ fake, agent: first, log, slack: socketMode });
    const b = await startAdapter({ fake, agent: second, log, slack: socketMode });
    await fake.waitForSocket(2, 15_000);

    const ts = fake.nextTs();
    const [one, two] = await Promise.all([
      fake.sendSocketEvent(mention(ts), { eventId: "Ev0TWICE", connection: 0 }),
      fake.sendSocketEvent(mention(ts), { eventId: "Ev0TWICE", connection: 1 }),
    ]);
    expect([one.acked, two.acked]).toEqual([true, true]);
    await waitForBotMessage(fake, CHANNEL, ts, "Answered once.");
    // The same connection again, as Slack's retry: still nothing new.
    const retry = await fake.sendSocketEvent(mention(ts), {
      eventId: "Ev0TWICE",
      connection: 0,
      retryAttempt: 1,
      retryReason: "timeout",
    });
    expect(retry.acked).toBe(true);
    // A new message afterwards is answered (so the retry was handled before we look).
    model.setScript([{ content: "Next one." }]);
    const next = fake.nextTs();
    await fake.sendSocketEvent(mention(next, `<@${BOT}> next`), { connection: 1 });
    await waitForBotMessage(fake, CHANNEL, next, "Next one.");
    await Promise.all([a.conversations.idle(), b.conversations.idle()]);

    expect(model.requests).toHaveLength(2);
    expect(botTexts(fake, CHANNEL, ts)).toEqual(["Answered once."]);
  });

  it("takes Approve clicks over the socket", async () => {
    const fake = await startSlack();
    const model = await startModel(cancelScript());
    const { log } = memoryLogger();
    const paths = tempPaths();
    const { agent } = await agentFor(model, paths, log);
    const slack = await startAdapter({ fake, agent, log, slack: socketMode });
    const ts = fake.nextTs();
    await fake.sendSocketEvent(mention(ts, `<@${BOT}> cancel order ${CANCELLABLE_ORDER}`));
    const approval = await waitForApproval(fake, CHANNEL, ts);
    const clicked = await fake.sendSocketBlockAction({
      userId: "U1",
      channel: CHANNEL,
      messageTs: approval.ts,
      actionId: APPROVE,
      value: approval.id,
    });
    expect(clicked.acked).toBe(true);
    await waitForBotMessage(fake, CHANNEL, ts, "order 20240410003 is cancelled");
    await slack.conversations.idle();
    expect(visibleText(messageAt(fake, CHANNEL, approval.ts))).toContain("Approved by <@U1>");
    expect(orderStatus(paths.shopDb, CANCELLABLE_ORDER)).toBe("cancelled");
  });
});

describe("Slack configuration errors", () => {
  it("a bot token without an app token or a signing secret is one sentence naming both", () => {
    let message = "";
    try {
      loadConfig({ SLACK_BOT_TOKEN: "xoxb-123" });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toContain("SLACK_APP_TOKEN");
    expect(message).toContain("SLACK_SIGNING_SECRET");
    expect(message).toMatch(/^[^.]+(\([^)]*\)[^.]*)*\.$/); // one sentence, ending with its only full stop
    expect(loadConfig({ SLACK_BOT_TOKEN: "xoxb-123", SLACK_SIGNING_SECRET: "s" }).slack?.signingSecret).toBe("s");
  });

  it("a bot token Slack refuses stops startup with a sentence about SLACK_BOT_TOKEN", async () => {
    const fake = await startSlack();
    const model = await startModel();
    const { log } = memoryLogger();
    const { agent, config } = await agentFor(model, tempPaths(), log);
    for (const mode of [{}, socketMode]) {
      const start = startAdapter({
        fake,
        agent,
        log,
        config,
        slack: { botToken: "xoxb-wrong-token", ...mode },
      });
      await expect(start).rejects.toThrow(/SLACK_BOT_TOKEN/);
      await expect(start).rejects.toThrow(/invalid_auth/);
    }
    expect(fake.callsTo("auth.test").every((call) => call.token === "xoxb-wrong-token")).toBe(true);
    expect(fake.callsTo("apps.connections.open")).toEqual([]);
    expect(fake.socketConnections()).toBe(0);
  });

  it("an unreachable SLACK_API_URL stops startup with one sentence naming it, not blaming the token", async () => {
    const fake = await startSlack();
    const model = await startModel();
    const { log } = memoryLogger();
    const { agent, config } = await agentFor(model, tempPaths(), log);
    const start = startAdapter({
      fake,
      agent,
      log,
      config,
      slack: { apiUrl: "http://127.0.0.1:9/api/" },
    });
    await expect(start).rejects.toThrow(
      "I can't reach Slack at http://127.0.0.1:9/api/; check SLACK_API_URL (or leave it unset) and the network.",
    );
  });
});
