// The Slack adapter end to end: the real Bolt app (HTTP mode, signed requests) against the fake
// Slack, the real agent over the scripted model server, real SQLite. Conversations: mentions and
// threads, direct messages, what is ignored, progress, streaming and its fallback, long answers,
// model trouble, stop, allowed channels, exactly-once delivery and request signatures.
import { afterEach, describe, expect, it } from "vitest";
import { createOpenAIModel } from "../../../../src/agent/llm/index.js";
import { STATUS_INTERVAL_MS } from "../../../../src/adapters/slack/slack-surface.js";
import { createToolRegistry } from "../../../../src/tools/registry.js";
import type { ToolDefinition } from "../../../../src/tools/types.js";
import {
  BOT,
  BOT_ID,
  botTexts,
  CALL_WAIT,
  CHANNEL,
  cleanUp,
  startHarness,
  TEAM,
  textOf,
  toolCall,
  toolResults,
  userTexts,
  waitForBotMessage,
  WAIT,
} from "../../../helpers/slack.js";

afterEach(cleanUp);

describe("Slack conversations", () => {
  it("answers a mention in a thread started at the mention, with the mention stripped from what the model sees", async () => {
    const h = await startHarness({ script: [{ content: "Order 20240315001 was delivered on March 19." }] });
    const { ts } = await h.mention(`<@${BOT}> where is order 20240315001?`);

    await waitForBotMessage(h.fake, CHANNEL, ts, "delivered on March 19");
    await h.slack.conversations.idle();
    expect(userTexts(h.model, 0)).toEqual(["where is order 20240315001?"]);
    // A short answer is one reply in the mention's thread: no stream to start and stop for it.
    expect(h.fake.callsTo("chat.postMessage").map((call) => call.args)).toEqual([
      expect.objectContaining({
        channel: CHANNEL,
        thread_ts: ts,
        text: "Order 20240315001 was delivered on March 19.",
      }),
    ]);
    expect(h.fake.callsTo("chat.startStream")).toEqual([]);
    expect(h.fake.messages(CHANNEL, ts).map((m) => [m.user, m.thread_ts ?? "(top)"])).toEqual([
      ["U1", "(top)"],
      [BOT, ts],
    ]);
    expect(h.fake.messages(CHANNEL).filter((m) => m.bot_id === BOT_ID && m.thread_ts !== ts)).toEqual([]);
  });

  it("keeps one session per thread: a second mention in the thread is answered there, and the model sees the first exchange", async () => {
    const h = await startHarness({
      script: [{ content: "It was delivered." }, { content: "The tracking number is 1Z999AA10123456784." }],
    });
    const { ts } = await h.mention(`<@${BOT}> where is order 20240315001?`);
    await waitForBotMessage(h.fake, CHANNEL, ts, "It was delivered.");
    await h.slack.conversations.idle();

    await h.mention(`<@${BOT}> and its tracking number?`, { threadTs: ts });
    await waitForBotMessage(h.fake, CHANNEL, ts, "1Z999AA10123456784");
    await h.slack.conversations.idle();

    const second = h.model.requests[1]?.body.messages ?? [];
    expect(second.filter((m) => m.role !== "system").map((m) => [m.role, textOf(m)])).toEqual([
      ["user", "where is order 20240315001?"],
      ["assistant", "It was delivered."],
      ["user", "and its tracking number?"],
    ]);
    expect(h.fake.callsTo("chat.postMessage").map((call) => call.args.thread_ts)).toEqual([ts, ts]);

    // A mention at the top level of the channel starts a new thread and a new session.
    const other = await h.mention(`<@${BOT}> hello`);
    h.model.push({ content: "Hello!" });
    await waitForBotMessage(h.fake, CHANNEL, other.ts, "Hello!");
    await h.slack.conversations.idle();
    expect(h.model.requests[2]?.body.messages.filter((m) => m.role !== "system").map(textOf)).toEqual(["hello"]);
  });

  it("answers a direct message in the DM itself", async () => {
    const h = await startHarness({ script: [{ content: "Hi! How can I help?" }] });
    await h.dm("hello there");
    await waitForBotMessage(h.fake, "D1", undefined, "How can I help?");
    await h.slack.conversations.idle();
    expect(userTexts(h.model, 0)).toEqual(["hello there"]);
    // Top level in the DM (no thread), and the "Thinking…" placeholder became the answer.
    expect(
      h.fake
        .messages("D1")
        .filter((m) => m.bot_id === BOT_ID)
        .map((m) => [m.text, m.thread_ts ?? "(top)"]),
    ).toEqual([["Hi! How can I help?", "(top)"]]);
  });

  it("ignores its own messages, other bots, edits and deletions", async () => {
    const h = await startHarness({ script: [{ content: "Only this one." }, { content: "Should never be said." }] });
    const original = h.fake.nextTs();
    await h.dm("my own message", { user: BOT, extra: { bot_id: "B0FAKEBOT1", app_id: "A0FAKEAPP1" } });
    await h.dm("another bot speaks", { user: "U0OTHERBOT", extra: { bot_id: "B0OTHERBOT" } });
    await h.dm("a bot message", { user: "U2", extra: { subtype: "bot_message", bot_id: "B0OTHERBOT" } });
    await h.dm("", {
      extra: {
        subtype: "message_changed",
        user: undefined,
        message: { type: "message", user: "U1", text: "edited text", ts: original },
        previous_message: { type: "message", user: "U1", text: "old", ts: original },
      },
    });
    await h.dm("", {
      extra: {
        subtype: "message_deleted",
        user: undefined,
        deleted_ts: original,
        previous_message: { type: "message", user: "U1", text: "old", ts: original },
      },
    });
    // A genuine message after them: the only one that reaches the model.
    await h.dm("a real question");
    await waitForBotMessage(h.fake, "D1", undefined, "Only this one.");
    await h.slack.conversations.idle();
    expect(
      h.model.requests.map((request) => request.body.messages.filter((m) => m.role === "user").map(textOf)),
    ).toEqual([["a real question"]]);
    expect(botTexts(h.fake, "D1")).toEqual(["Only this one."]);
  });

  it("shows the thinking status, then the slow tool it is calling, then posts the short answer", async () => {
    // Longer than the status interval, so the status has time to say what is running.
    const lookup: ToolDefinition = {
      name: "slow_lookup",
      description: "Looks an order up, slowly.",
      parameters: { type: "object", properties: { order_id: { type: "string" } }, required: ["order_id"] },
      handler: async (args) => {
        await new Promise((resolve) => setTimeout(resolve, STATUS_INTERVAL_MS + 400));
        return { order_id: args.order_id, status: "delivered" };
      },
    };
    const h = await startHarness({
      script: [
        { toolCalls: [toolCall("slow_lookup", { order_id: "20240315001" })] },
        { content: "Your order was **delivered**." },
      ],
      agent: (agent) => ({ ...agent, tools: createToolRegistry([lookup]) }),
    });
    const { ts } = await h.mention(`<@${BOT}> where is my order 20240315001?`);
    await waitForBotMessage(h.fake, CHANNEL, ts, "Your order was");
    await h.slack.conversations.idle();

    // The status: thinking, then the call with its arguments; the answer clears it (Slack does).
    const statuses = h.fake.callsTo("assistant.threads.setStatus");
    expect(statuses.map((call) => call.args.status)).toEqual([
      "is thinking…",
      "is calling slow_lookup(order_id: 20240315001)…",
    ]);
    expect(statuses.every((call) => call.args.channel_id === CHANNEL && call.args.thread_ts === ts)).toBe(true);
    // One message: the answer, in mrkdwn; no activity message beside the status.
    expect(botTexts(h.fake, CHANNEL, ts).map((text) => text.replace(/\u200b/g, ""))).toEqual([
      "Your order was *delivered*.",
    ]);
    expect(h.fake.callsTo("chat.startStream")).toEqual([]);
    expect(toolResults(h.model, 1)).toEqual([expect.objectContaining({ status: "success" })]);
  });

  it("does not flash the status for a fast tool: a run shorter than the status interval makes two Slack calls", async () => {
    const h = await startHarness({
      script: [{ toolCalls: [toolCall("get_order_status", { order_id: "20240315001" })] }, { content: "Delivered." }],
    });
    const { ts } = await h.mention(`<@${BOT}> where is my order 20240315001?`);
    await waitForBotMessage(h.fake, CHANNEL, ts, "Delivered.");
    await h.slack.conversations.idle();
    await new Promise((resolve) => setTimeout(resolve, STATUS_INTERVAL_MS + 200)); // a late status update would land by now
    expect(h.fake.calls.filter((call) => call.method !== "auth.test").map((call) => call.method)).toEqual([
      "assistant.threads.setStatus",
      "chat.postMessage",
    ]);
    expect(toolResults(h.model, 1)).toEqual([expect.objectContaining({ status: "success" })]);
  });

  it("streams a long answer with Slack's streaming API as it is generated", async () => {
    const long = `${Array.from({ length: 60 }, (_, i) => `word${i}`).join(" ")} — and **that** is all.`;
    expect(long.length).toBeGreaterThan(300);
    const h = await startHarness({ script: [{ content: long }] });
    const { ts } = await h.mention(`<@${BOT}> tell me everything`);
    await waitForBotMessage(h.fake, CHANNEL, ts, "is all.");
    await h.slack.conversations.idle();
    const started = await h.fake.waitForCall("chat.startStream", undefined, CALL_WAIT);
    expect(started.args).toMatchObject({
      channel: CHANNEL,
      thread_ts: ts,
      recipient_team_id: TEAM,
      recipient_user_id: "U1",
    });
    expect(h.fake.callsTo("chat.stopStream")).toHaveLength(1);
    // Slack renders the streamed markdown itself.
    expect(botTexts(h.fake, CHANNEL, ts)).toEqual([long]);
  });

  it("keeps what the model said before a tool call apart from the streamed answer", async () => {
    const h = await startHarness({
      script: [
        { content: "Let me look that up.", toolCalls: [toolCall("get_order_status", { order_id: "20240315001" })] },
        { content: "Your order was delivered." },
      ],
    });
    const { ts } = await h.mention(`<@${BOT}> where is my order 20240315001?`);
    await waitForBotMessage(h.fake, CHANNEL, ts, "Your order was delivered.");
    await h.slack.conversations.idle();
    // What the model said before the tool call is kept, apart from the answer.
    expect(botTexts(h.fake, CHANNEL, ts).at(-1)).toBe("Let me look that up.\n\nYour order was delivered.");
  });

  it("without the assistant status, shows a placeholder and updates it with the tool activity", async () => {
    const h = await startHarness({
      fake: { refuse: ["assistant.threads.setStatus"] },
      script: [{ toolCalls: [toolCall("get_order_status", { order_id: "20240315001" })] }, { content: "Delivered." }],
    });
    const { ts } = await h.mention(`<@${BOT}> where is my order 20240315001?`);
    await waitForBotMessage(h.fake, CHANNEL, ts, "Delivered.");
    await h.slack.conversations.idle();

    const placeholder = await h.fake.waitForCall("chat.postMessage", (c) => c.args.text === "_Thinking…_", CALL_WAIT);
    expect(placeholder.args.thread_ts).toBe(ts);
    const placeholderTs = h.fake.messages(CHANNEL, ts).find((m) => m.bot_id === BOT_ID)?.ts;
    const updates = h.fake
      .callsTo("chat.update")
      .filter((c) => c.args.ts === placeholderTs)
      .map((c) => String(c.args.text));
    const calling = updates.findIndex((text) => text.includes("calling get_order_status(order_id: 20240315001)"));
    const done = updates.findIndex((text) => /:white_check_mark: get_order_status/.test(text));
    expect(calling).toBeGreaterThanOrEqual(0);
    expect(done).toBeGreaterThan(calling);
    expect(botTexts(h.fake, CHANNEL, ts)).toEqual([
      expect.stringMatching(/^:white_check_mark: get_order_status/),
      "Delivered.",
    ]);
  });

  it("writes a short answer in place of the Thinking… placeholder", async () => {
    const h = await startHarness({
      fake: { refuse: ["assistant.threads.setStatus"] },
      script: [{ content: "Here you go." }],
    });
    const { ts } = await h.mention(`<@${BOT}> hi`);
    await waitForBotMessage(h.fake, CHANNEL, ts, "Here you go.");
    await h.slack.conversations.idle();
    expect(h.fake.callsTo("chat.postMessage").map((c) => c.args.text)).toEqual(["_Thinking…_"]);
    expect(h.fake.callsTo("chat.startStream")).toEqual([]);
    expect(botTexts(h.fake, CHANNEL, ts)).toEqual(["Here you go."]);
  });

  it("removes the Thinking… placeholder once a streamed answer replaces it", async () => {
    const long = `Here you go: ${Array.from({ length: 60 }, (_, i) => `item${i}`).join(", ")}.`;
    const h = await startHarness({ fake: { refuse: ["assistant.threads.setStatus"] }, script: [{ content: long }] });
    const { ts } = await h.mention(`<@${BOT}> hi`);
    await waitForBotMessage(h.fake, CHANNEL, ts, "item59.");
    await h.slack.conversations.idle();
    expect(h.fake.callsTo("chat.postMessage").map((c) => c.args.text)).toEqual(["_Thinking…_"]);
    expect(h.fake.callsTo("chat.stopStream")).toHaveLength(1);
    expect(botTexts(h.fake, CHANNEL, ts)).toEqual([long]);
  });

  it("where streaming is refused, posts the answer converted to mrkdwn", async () => {
    const h = await startHarness({
      fake: { refuse: ["assistant.threads.setStatus", "chat.startStream"] },
      // Long enough to be streamed, so streaming is tried.
      script: [
        {
          content: `Order 20240315001 is **delivered**, see [tracking](https://example.com/t). ${"It took the usual route. ".repeat(12)}`,
        },
      ],
    });
    const { ts } = await h.mention(`<@${BOT}> status of 20240315001?`);
    await waitForBotMessage(h.fake, CHANNEL, ts, "delivered");
    await h.slack.conversations.idle();
    const texts = botTexts(h.fake, CHANNEL, ts);
    expect(texts).toHaveLength(1);
    const answer = texts[0] ?? "";
    expect(answer.replace(/\u200b/g, "")).toContain("*delivered*");
    expect(answer).not.toContain("**");
    expect(answer).toContain("<https://example.com/t|tracking>");
    expect(h.fake.callsTo("chat.startStream")).toHaveLength(1); // it was tried
  });

  it("splits a long answer into messages within Slack's limit, each with balanced code fences", async () => {
    const codeLines = Array.from({ length: 160 }, (_, i) => `const value${i} = compute(${i}, "item-${i}");`);
    const prose = (words: number, tag: string) => Array.from({ length: words }, (_, i) => `${tag}${i}`).join(" ");
    const markdown = [`# Report`, prose(300, "intro"), "```ts", ...codeLines, "```", prose(400, "outro")]
      .join("\n\n")
      .replace(/\n\n(const|```)/g, "\n$1");
    expect(markdown.length).toBeGreaterThan(9_000);
    const h = await startHarness({
      fake: { refuse: ["assistant.threads.setStatus", "chat.startStream"] },
      script: [{ content: markdown }],
    });
    const { ts } = await h.mention(`<@${BOT}> the full report please`);
    await waitForBotMessage(h.fake, CHANNEL, ts, "outro399");
    await h.slack.conversations.idle();

    const parts = botTexts(h.fake, CHANNEL, ts);
    expect(parts.length).toBeGreaterThanOrEqual(3);
    for (const part of parts) {
      expect(part.length).toBeLessThanOrEqual(3_900);
      expect((part.match(/```/g) ?? []).length % 2).toBe(0);
    }
    const all = parts.join("\n");
    for (const line of codeLines) expect(all).toContain(line);
    expect(all).toContain("intro0");
    // Every call stayed within Slack's own limit too (4,000 characters), drafts included.
    for (const call of h.fake.calls)
      if (typeof call.args.text === "string") expect(call.args.text.length).toBeLessThanOrEqual(4_000);
  });

  it("says in the thread when the model cannot be reached, and logs it", async () => {
    const h = await startHarness({
      agent: (agent, model) => ({
        ...agent,
        model: createOpenAIModel({ baseURL: model.url, model: "gpt-4o-mini", maxRetries: 0 }),
      }),
    });
    h.model.setScript(() => ({ error: { status: 503, message: "overloaded" } }));
    const { ts } = await h.mention(`<@${BOT}> hello?`);
    await waitForBotMessage(
      h.fake,
      CHANNEL,
      ts,
      "I can't reach the model right now (HTTP 503: overloaded); please try again in a minute.",
    );
    await h.slack.conversations.idle();
    expect(h.model.requests).toHaveLength(1);
    expect(botTexts(h.fake, CHANNEL, ts)).toEqual([
      "I can't reach the model right now (HTTP 503: overloaded); please try again in a minute.",
    ]);
    await expect
      .poll(() => h.lines.some((line) => line.level >= 40 && JSON.stringify(line).includes("HTTP 503")), WAIT)
      .toBe(true);
  });

  it("stops the running run of a thread when mentioned with just 'stop'", async () => {
    const h = await startHarness({ script: [{ hang: true }] });
    const { ts } = await h.mention(`<@${BOT}> do something that takes forever`);
    await expect.poll(() => h.model.requests.length, WAIT).toBe(1);
    expect(h.slack.conversations.busy(`slack:${TEAM}:${CHANNEL}:${ts}`)).toBe(true);

    await h.mention(`<@${BOT}> stop`, { threadTs: ts });
    await waitForBotMessage(h.fake, CHANNEL, ts, "Stopped.");
    await h.slack.conversations.idle();
    const texts = botTexts(h.fake, CHANNEL, ts);
    expect(texts.indexOf("Stopping.")).toBeGreaterThanOrEqual(0);
    expect(texts.indexOf("Stopping.")).toBeLessThan(texts.indexOf("Stopped."));
    expect(h.slack.conversations.busy(`slack:${TEAM}:${CHANNEL}:${ts}`)).toBe(false);
    expect(h.model.requests).toHaveLength(1); // "stop" itself is not a question for the model

    // Nothing running: it says so.
    await h.mention(`<@${BOT}> stop`, { threadTs: ts });
    await waitForBotMessage(h.fake, CHANNEL, ts, "Nothing is running here.");
  });

  it("a message that arrives while its thread is busy waits its turn", async () => {
    const h = await startHarness();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    h.model.setScript(async (_request, index) => {
      if (index === 0) await gate;
      return { content: index === 0 ? "First answer." : "Second answer." };
    });
    const { ts } = await h.mention(`<@${BOT}> first`);
    await expect.poll(() => h.model.requests.length, WAIT).toBe(1);
    await h.mention(`<@${BOT}> second`, { threadTs: ts });
    expect(h.model.requests).toHaveLength(1);
    release();
    await waitForBotMessage(h.fake, CHANNEL, ts, "Second answer.");
    await h.slack.conversations.idle();
    expect(botTexts(h.fake, CHANNEL, ts)).toEqual(["First answer.", "Second answer."]);
    // The second run started after the first had answered: it sees the whole first exchange.
    expect(
      h.model.requests[1]?.body.messages.filter((m) => m.role !== "system").map((m) => [m.role, textOf(m)]),
    ).toEqual([
      ["user", "first"],
      ["assistant", "First answer."],
      ["user", "second"],
    ]);
  });

  it("answers only in SLACK_ALLOWED_CHANNELS and says so once elsewhere", async () => {
    const h = await startHarness({
      slack: { allowedChannels: [CHANNEL] },
      script: [{ content: "Answered in C1." }, { content: "Never." }],
    });
    const first = await h.mention(`<@${BOT}> are you there?`, { channel: "C2" });
    await waitForBotMessage(h.fake, "C2", first.ts, `<#${CHANNEL}>`);
    await h.mention(`<@${BOT}> hello again?`, { channel: "C2" });
    // A mention in the allowed channel after them is answered (and proves the others were handled).
    const allowed = await h.mention(`<@${BOT}> and here?`);
    await waitForBotMessage(h.fake, CHANNEL, allowed.ts, "Answered in C1.");
    await h.slack.conversations.idle();
    expect(botTexts(h.fake, "C2")).toHaveLength(1);
    expect(
      h.model.requests.map((request) => request.body.messages.filter((m) => m.role === "user").map(textOf)),
    ).toEqual([["and here?"]]);
    // Direct messages are always answered.
    h.model.setScript([{ content: "DMs work." }]);
    await h.dm("a DM");
    await waitForBotMessage(h.fake, "D1", undefined, "DMs work.");
  });
});

describe("Slack delivery", () => {
  it("answers a retried event once", async () => {
    const h = await startHarness({ script: [{ content: "Once." }, { content: "Twice!" }] });
    const first = await h.mention(`<@${BOT}> hi`, { eventId: "Ev0RETRIED" });
    await h.mention(`<@${BOT}> hi`, { eventId: "Ev0RETRIED", ts: first.ts, retryNum: 1 });
    await waitForBotMessage(h.fake, CHANNEL, first.ts, "Once.");
    await h.slack.conversations.idle();
    // A third delivery after the answer changes nothing either.
    const since = h.fake.calls.length;
    await h.mention(`<@${BOT}> hi`, { eventId: "Ev0RETRIED", ts: first.ts, retryNum: 2 });
    // Another message afterwards is answered: the retries were handled before it.
    h.model.setScript([{ content: "Next." }]);
    const next = await h.mention(`<@${BOT}> next`);
    await waitForBotMessage(h.fake, CHANNEL, next.ts, "Next.");
    await h.slack.conversations.idle();
    expect(h.model.requests.map((request) => userTextsOf(request.body.messages))).toEqual([["hi"], ["next"]]);
    expect(botTexts(h.fake, CHANNEL, first.ts)).toEqual(["Once."]);
    expect(h.fake.calls.slice(since).filter((c) => c.args.thread_ts === first.ts)).toEqual([]);
  });

  it("answers one message once when it arrives as two events (app_mention and message.im)", async () => {
    const h = await startHarness({ script: [{ content: "Just once." }, { content: "Again!" }] });
    const ts = h.fake.nextTs();
    await Promise.all([h.mention(`<@${BOT}> hi in a DM`, { channel: "D1", ts }), h.dm(`<@${BOT}> hi in a DM`, { ts })]);
    await waitForBotMessage(h.fake, "D1", undefined, "Just once.");
    h.model.setScript([{ content: "Next." }]);
    await h.dm("next");
    await waitForBotMessage(h.fake, "D1", undefined, "Next.");
    await h.slack.conversations.idle();
    expect(h.model.requests.map((request) => userTextsOf(request.body.messages))).toEqual([
      ["hi in a DM"],
      expect.arrayContaining(["next"]),
    ]);
    expect(botTexts(h.fake, "D1").filter((text) => text === "Just once." || text === "Again!")).toEqual(["Just once."]);
  });

  it("rejects a bad signature and a stale timestamp with 401, and runs nothing", async () => {
    const h = await startHarness({ script: [{ content: "Signed right." }, { content: "Forged!" }] });
    const url = h.slack.eventsUrl as string;
    const forged = await h.fake.sendEvent(
      url,
      { type: "app_mention", user: "U1", channel: CHANNEL, text: `<@${BOT}> forged` },
      { signingSecret: "another-secret" },
    );
    const stale = await h.fake.sendEvent(
      url,
      { type: "app_mention", user: "U1", channel: CHANNEL, text: `<@${BOT}> stale` },
      { timestamp: Math.floor(Date.now() / 1000) - 6 * 60 },
    );
    const click = await h.fake.sendBlockAction(
      url,
      { userId: "U1", channel: CHANNEL, messageTs: h.fake.nextTs(), actionId: "glassbox_approve", value: "apv_x" },
      { signingSecret: "another-secret" },
    );
    expect([forged.status, stale.status, click.status]).toEqual([401, 401, 401]);

    const genuine = await h.mention(`<@${BOT}> genuine`);
    await waitForBotMessage(h.fake, CHANNEL, genuine.ts, "Signed right.");
    await h.slack.conversations.idle();
    expect(h.model.requests.map((request) => userTextsOf(request.body.messages))).toEqual([["genuine"]]);
    expect(h.fake.callsTo("chat.postEphemeral")).toEqual([]);
  });
});

function userTextsOf(messages: Array<{ role: string; content?: unknown }>): string[] {
  return messages.filter((m) => m.role === "user").map((m) => (typeof m.content === "string" ? m.content : ""));
}
