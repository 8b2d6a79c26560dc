// Conversations on Discord, end to end: the real discord.js client against the fake Discord (REST
// and gateway), the real openai SDK against the scripted model server, real SQLite. A DM or a
// mention becomes a run of the shared agent whose answer lands in the same channel (or thread),
// with the typing indicator and a progress message while it works; each message is answered once.
import { Events } from "discord.js";
import { afterEach, describe, expect, it } from "vitest";
import { createOpenAIModel } from "../../../../src/agent/llm/index.js";
import {
  agentFor,
  botMessages,
  botTexts,
  CHANNEL,
  cleanUp,
  DM,
  GUILD,
  memoryLogger,
  OTHER_CHANNEL,
  OTHER_USER,
  REQUEST_WAIT,
  sentMessages,
  startAdapter,
  startFake,
  startHarness,
  startModel,
  tempPaths,
  textOf,
  THREAD,
  toolCall,
  toolResults,
  USER,
  userTexts,
  WAIT,
  waitForBotMessage,
} from "../../../helpers/discord.js";

afterEach(cleanUp);

describe("Discord conversations", () => {
  it("answers a DM in the DM channel; the model sees the DM text, in the session of that DM", async () => {
    const h = await startHarness({ script: [{ content: "Order 20240315001 has shipped." }] });
    await h.dm("what is the status of order 20240315001?");
    await waitForBotMessage(h.fake, DM, "Order 20240315001 has shipped.");
    await h.discord.idle();

    expect(botTexts(h.fake, DM)).toEqual(["Order 20240315001 has shipped."]);
    expect(h.model.requests).toHaveLength(1);
    expect(userTexts(h.model, 0)).toEqual(["what is the status of order 20240315001?"]);
    expect(h.agent.store.sessionUsage(`discord:dm:${DM}`).runs).toBe(1);
    // Only the DM channel was written to.
    expect(h.fake.requestsTo("POST", /^\/channels\/\d+\/messages$/).map((r) => r.path)).toEqual([
      `/channels/${DM}/messages`,
    ]);
  });

  it("answers a mention in its server channel, with the mention stripped before the model", async () => {
    const h = await startHarness({ script: [{ content: "Hello, channel." }] });
    const sent = await h.mention("hello there");
    expect(sent.content).toBe(`<@${h.fake.botUserId}> hello there`); // what the person typed
    await waitForBotMessage(h.fake, CHANNEL, "Hello, channel.");
    await h.discord.idle();

    expect(userTexts(h.model, 0)).toEqual(["hello there"]);
    expect(botTexts(h.fake, CHANNEL)).toEqual(["Hello, channel."]);
    expect(h.agent.store.sessionUsage(`discord:${GUILD}:${CHANNEL}`).runs).toBe(1);
  });

  it("ignores server messages without a mention, messages by bots (the bot itself included) and system messages", async () => {
    const h = await startHarness({ script: [{ content: "Only this one." }] });
    await h.fake.sendMessage({
      channelId: CHANNEL,
      guildId: GUILD,
      authorId: USER,
      content: "just chatting, no mention",
    });
    await h.fake.sendMessage({
      channelId: CHANNEL,
      guildId: GUILD,
      authorId: OTHER_USER,
      content: "I am a bot",
      bot: true,
      mentionsBot: true,
    });
    await h.fake.sendMessage({
      channelId: CHANNEL,
      guildId: GUILD,
      authorId: h.fake.botUserId,
      content: "talking to myself",
      mentionsBot: true,
    });
    await h.fake.sendMessage({
      channelId: CHANNEL,
      guildId: GUILD,
      authorId: USER,
      content: "pinned a message",
      mentionsBot: true,
      type: 6,
    });
    await h.fake.sendMessage({ channelId: DM, authorId: OTHER_USER, content: "a bot in a DM", bot: true });
    // The gateway delivers in order and each check happens before any await, so once this one is
    // answered, every message above has been seen (and ignored).
    await h.mention("the real question");
    await waitForBotMessage(h.fake, CHANNEL, "Only this one.");
    await h.discord.idle();

    expect(h.model.requests).toHaveLength(1);
    expect(userTexts(h.model, 0)).toEqual(["the real question"]);
    // What the bot posted (the fake's "talking to myself" message is authored by the bot, but not posted by it).
    expect(
      h.fake
        .requestsTo("POST", /^\/channels\/\d+\/messages$/)
        .map((r) => [r.path, (r.body as { content?: string }).content]),
    ).toEqual([[`/channels/${CHANNEL}/messages`, "Only this one."]]);
  });

  it("a bare mention gets a hint instead of a model call", async () => {
    const h = await startHarness({ script: [] });
    await h.mention("");
    await waitForBotMessage(h.fake, CHANNEL, "Ask me something");
    await h.discord.idle();
    expect(h.model.requests).toHaveLength(0);
  });

  it("a mention inside a thread has the thread's own session and is answered in the thread", async () => {
    const h = await startHarness({
      script: [{ content: "Thread answer one." }, { content: "Thread answer two." }, { content: "Channel answer." }],
    });
    await h.mention("my name is Ada", { channelId: THREAD });
    await waitForBotMessage(h.fake, THREAD, "Thread answer one.");
    await h.mention("what is my name?", { channelId: THREAD });
    await waitForBotMessage(h.fake, THREAD, "Thread answer two.");
    await h.mention("what is my name?", { channelId: CHANNEL });
    await waitForBotMessage(h.fake, CHANNEL, "Channel answer.");
    await h.discord.idle();

    expect(botTexts(h.fake, THREAD)).toEqual(["Thread answer one.", "Thread answer two."]);
    expect(botTexts(h.fake, CHANNEL)).toEqual(["Channel answer."]);
    expect(h.agent.store.sessionUsage(`discord:${GUILD}:${CHANNEL}:${THREAD}`).runs).toBe(2);
    expect(h.agent.store.sessionUsage(`discord:${GUILD}:${CHANNEL}`).runs).toBe(1);
    // The second thread message sees the first exchange; the parent channel sees none of it.
    expect(userTexts(h.model, 1)).toEqual(["my name is Ada", "what is my name?"]);
    expect(userTexts(h.model, 2)).toEqual(["what is my name?"]);
  });

  it("while working: typing, a progress message edited with the tool's activity, then the answer", async () => {
    const h = await startHarness({
      script: [
        { toolCalls: [toolCall("get_order_status", { order_id: "20240315001" })] },
        { content: "It shipped on March 16." },
      ],
    });
    await h.mention("where is order 20240315001?");
    const answer = await waitForBotMessage(h.fake, CHANNEL, "It shipped on March 16.");
    await h.discord.idle();

    const typing = h.fake.requestsTo("POST", `/channels/${CHANNEL}/typing`);
    expect(typing.length).toBeGreaterThanOrEqual(1);
    const posts = h.fake.requestsTo("POST", `/channels/${CHANNEL}/messages`);
    const contents = posts.map((r) => (r.body as { content?: string }).content);
    expect(contents).toEqual(["⏳ calling get_order_status(order_id: 20240315001)", "It shipped on March 16."]);
    // Typing first, then the progress message, then the answer.
    const [progressPost, answerPost] = posts;
    expect(h.fake.requests.indexOf(typing[0]!)).toBeLessThan(h.fake.requests.indexOf(progressPost!));

    const progress = botMessages(h.fake, CHANNEL)[0];
    expect(progress?.id).not.toBe(answer.id);
    const edits = h.fake.requestsTo("PATCH", `/channels/${CHANNEL}/messages/${progress?.id}`);
    expect(edits).toHaveLength(1);
    expect(h.fake.requests.indexOf(edits[0]!)).toBeLessThan(h.fake.requests.indexOf(answerPost!));
    expect(progress?.content).toMatch(/^✅ get_order_status \(\d+ ms\)$/);
    expect(botTexts(h.fake, CHANNEL)).toEqual([progress?.content, "It shipped on March 16."]);
    expect(toolResults(h.model, 1)).toEqual([expect.objectContaining({ status: "success" })]);
  });

  it("a tool that fails shows on the progress message, and the model gets the error to act on", async () => {
    const h = await startHarness({
      script: [
        { toolCalls: [toolCall("get_order_status", { order_id: "99999999999" })] },
        { content: "I could not find that order." },
      ],
    });
    await h.dm("where is order 99999999999?");
    await waitForBotMessage(h.fake, DM, "I could not find that order.");
    await h.discord.idle();

    expect(botTexts(h.fake, DM)).toEqual(["⚠️ get_order_status: execution_error", "I could not find that order."]);
    expect(toolResults(h.model, 1)).toEqual([
      {
        status: "error",
        error: expect.objectContaining({ type: "execution_error", message: expect.stringContaining("No order") }),
      },
    ]);
  });

  it("splits a 5,000-character answer into messages of at most 2,000 characters at line boundaries, code blocks closed and reopened", async () => {
    const intro = Array.from(
      { length: 12 },
      (_, i) => `Paragraph ${i}: ${"words about the order ".repeat(5).trim()}.`,
    ).join("\n\n");
    const codeLines = Array.from(
      { length: 60 },
      (_, i) => `const line${String(i).padStart(2, "0")} = computeSomething(${i}); // step ${i}`,
    );
    const outro = Array.from(
      { length: 12 },
      (_, i) => `Closing note ${i}: ${"more detail here ".repeat(6).trim()}.`,
    ).join("\n\n");
    const long = `${intro}\n\n\`\`\`ts\n${codeLines.join("\n")}\n\`\`\`\n\n${outro}`;
    expect(long.length).toBeGreaterThan(5_000);
    expect(long.length).toBeLessThan(6_000);
    const h = await startHarness({ script: [{ content: long }] });
    await h.dm("explain it at length");
    await waitForBotMessage(h.fake, DM, "Closing note 11");
    await h.discord.idle();

    const parts = botTexts(h.fake, DM);
    expect(parts.length).toBeGreaterThanOrEqual(3);
    const originalLines = new Set(long.split("\n"));
    for (const part of parts) {
      expect(part.length).toBeLessThanOrEqual(2_000);
      expect(part.match(/^```/gm)?.length ?? 0).toSatisfy((fences: number) => fences % 2 === 0); // balanced
      // Cut at line boundaries: every line of a part is a whole line of the answer (or a fence).
      for (const line of part.split("\n"))
        expect(line === "```" || originalLines.has(line), `a cut line: ${JSON.stringify(line)}`).toBe(true);
    }
    // The code block spans a split: one part closes it, the next reopens it with its language.
    const spanning = parts.findIndex(
      (part, i) => part.endsWith("\n```") && parts[i + 1]?.startsWith("```ts\nconst line"),
    );
    expect(spanning).toBeGreaterThanOrEqual(0);
    const lastBefore = parts[spanning]?.split("\n").at(-2) ?? "";
    const firstAfter = parts[spanning + 1]?.split("\n")[1] ?? "";
    expect(codeLines.indexOf(firstAfter)).toBe(codeLines.indexOf(lastBefore) + 1); // the block goes on where it was cut
    // Nothing lost, nothing doubled.
    const all = parts.join("\n");
    for (const line of [...codeLines, "Paragraph 0", "Paragraph 11", "Closing note 0", "Closing note 11"]) {
      expect(all.split(line).length - 1, line).toBe(1);
    }
  });

  it("says in the channel when the model cannot be reached, and logs it", async () => {
    const h = await startHarness({
      agent: (agent, model) => ({
        ...agent,
        model: createOpenAIModel({ baseURL: model.url, model: "gpt-4o-mini", maxRetries: 0 }),
      }),
    });
    h.model.setScript(() => ({ error: { status: 503, message: "overloaded" } }));
    await h.mention("hello?");
    await waitForBotMessage(
      h.fake,
      CHANNEL,
      "I can't reach the model right now (HTTP 503: overloaded); please try again in a minute.",
    );
    await h.discord.idle();

    expect(h.model.requests).toHaveLength(1);
    expect(botTexts(h.fake, CHANNEL)).toEqual([
      "I can't reach the model right now (HTTP 503: overloaded); please try again in a minute.",
    ]);
    await expect
      .poll(() => h.lines.some((line) => line.level >= 40 && JSON.stringify(line).includes("HTTP 503")), WAIT)
      .toBe(true);
  });
});

describe("Discord: each message is answered once", () => {
  it("a redelivered message (same id) is not answered again, also while its run is still going", async () => {
    const h = await startHarness();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    h.model.setScript(async (_request, index) => {
      if (index === 0) await gate;
      return { content: `Answer ${index + 1}.` };
    });
    const first = await h.dm("first question");
    await expect.poll(() => h.model.requests.length, WAIT).toBe(1);
    await h.fake.redeliver(first.id); // while the run is in flight
    release();
    await waitForBotMessage(h.fake, DM, "Answer 1.");
    await h.discord.idle();
    await h.fake.redeliver(first.id); // after the answer

    await h.dm("second question"); // delivered after the redeliveries, so they have been seen
    await waitForBotMessage(h.fake, DM, "Answer 2.");
    await h.discord.idle();
    expect(h.model.requests).toHaveLength(2);
    expect(botTexts(h.fake, DM)).toEqual(["Answer 1.", "Answer 2."]);
    expect(userTexts(h.model, 1)).toEqual(["first question", "second question"]);
  });

  it("the claim is in SQLite: after a restart, a redelivered message is still not answered again", async () => {
    // discord.js skips a MESSAGE_CREATE whose message it has cached, so within one process a
    // redelivery never reaches the adapter; a new process has no cache and relies on the claim.
    const fake = await startFake();
    const model = await startModel([{ content: "The one answer." }, { content: "The next answer." }]);
    const paths = tempPaths();
    const { log } = memoryLogger();
    const first = (await agentFor(model, paths, log)).agent;
    const a = await startAdapter({ fake, agent: first, store: first.port, log });
    const sent = await fake.sendMessage({ channelId: DM, authorId: USER, content: "a question" });
    await waitForBotMessage(fake, DM, "The one answer.");
    await a.stop();
    first.store.close();

    const second = (await agentFor(model, paths, log)).agent;
    const b = await startAdapter({ fake, agent: second, store: second.port, log });
    const delivered: string[] = [];
    b.client.on(Events.Raw, (packet: { t?: string; d?: { id?: string } }) => {
      if (packet.t === "MESSAGE_CREATE" && packet.d?.id) delivered.push(packet.d.id);
    });
    await fake.redeliver(sent.id);
    await fake.sendMessage({ channelId: DM, authorId: USER, content: "another question" });
    await waitForBotMessage(fake, DM, "The next answer.");
    await b.idle();

    expect(delivered[0]).toBe(sent.id); // the redelivery did reach the new process
    expect(model.requests).toHaveLength(2);
    expect(botTexts(fake, DM)).toEqual(["The one answer.", "The next answer."]);
    expect(userTexts(model, 1)).toEqual(["a question", "another question"]);
  });

  it("a dropped gateway connection resumes: replayed events give no second answer, a message sent meanwhile gets one", async () => {
    const h = await startHarness({
      script: [{ content: "Before the drop." }, { content: "After the drop." }, { content: "A second answer!" }],
    });
    const first = await h.mention("before the drop");
    await waitForBotMessage(h.fake, CHANNEL, "Before the drop.");
    await h.discord.idle();

    const delivered: string[] = []; // MESSAGE_CREATE ids as discord.js receives them, before any filtering
    h.discord.client.on(Events.Raw, (packet: { t?: string; d?: { id?: string } }) => {
      if (packet.t === "MESSAGE_CREATE" && packet.d?.id) delivered.push(packet.d.id);
    });
    const since = h.fake.gatewayPayloads.length;
    h.fake.dropConnection();
    await h.fake.redeliver(first.id); // kept by the fake and replayed on RESUME
    await h.mention("while it was down", { channelId: OTHER_CHANNEL });
    const resume = await h.fake.waitForGatewayPayload(6, { ...REQUEST_WAIT, since });
    expect(resume.d).toMatchObject({ session_id: expect.any(String) });
    await waitForBotMessage(h.fake, OTHER_CHANNEL, "After the drop.");
    await h.discord.idle();

    expect(delivered).toContain(first.id); // the replay did reach the bot
    expect(h.model.requests).toHaveLength(2);
    expect(textOf(sentMessages(h.model, 1).at(-1))).toBe("while it was down");
    expect(botTexts(h.fake, CHANNEL)).toEqual(["Before the drop."]);
    expect(botTexts(h.fake, OTHER_CHANNEL)).toEqual(["After the drop."]);
  });
});
