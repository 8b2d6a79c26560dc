// Thread context on Discord, through the one pipeline (discord.js ingress, the in-process queue, the
// worker over REST) against the fake Discord and the scripted model: a mention in a thread carries the
// thread's earlier messages (names, files, another bot marked, the bot's own left out), the next
// mention only what came after; a mention that replies to a message carries the chain it replies to.
import { afterEach, describe, expect, it } from "vitest";
import { THREAD_END, THREAD_START } from "../../../../src/agent/thread-context.js";
import type { ChatCompletionRequestBody } from "../../../../src/testing/scripted-model-server.js";
import {
  CHANNEL,
  cleanUp,
  GUILD,
  OTHER_USER,
  startHarness,
  THREAD,
  waitForBotMessage,
  type Harness,
} from "../../../helpers/discord.js";

afterEach(cleanUp);

const OTHER_BOT = "1300000000000000900";

const answer = (body: ChatCompletionRequestBody) => {
  const asked = String(body.messages.findLast((message) => message.role === "user")?.content ?? "");
  return { content: asked.endsWith("and again?") ? "Second answer." : "First answer." };
};

function threadBlockOf(h: Harness, index: number): string {
  const request = h.model.requests[index];
  const user = request?.body.messages.findLast((message) => message.role === "user");
  const text = typeof user?.content === "string" ? user.content : JSON.stringify(user?.content ?? "");
  const start = text.indexOf(THREAD_START);
  return start < 0 ? "" : text.slice(start, text.indexOf(THREAD_END) + THREAD_END.length);
}

describe("thread context on Discord", () => {
  it("reads a thread's earlier messages before a mention in it, then only what came after", async () => {
    const h = await startHarness({ script: answer });
    const say = (content: string, more: Record<string, unknown> = {}) =>
      h.fake.sendMessage({ channelId: THREAD, guildId: GUILD, authorId: OTHER_USER, content, ...more });
    await say("The build broke last night.");
    await say("Logs attached.", {
      attachments: [{ filename: "build.log", contentType: "text/plain", data: new TextEncoder().encode("x") }],
    });
    await say("Nightly build: failed.", { authorId: OTHER_BOT, bot: true });

    await h.mention("what broke?", { channelId: THREAD });
    await waitForBotMessage(h.fake, THREAD, "First answer.");
    const block = threadBlockOf(h, 0);
    expect(block).toContain("- user_000301: The build broke last night.");
    expect(block).toContain("- user_000301: Logs attached. [attached: build.log]");
    expect(block).toContain("- user_000900 (bot): Nightly build: failed.");
    expect(block.match(/^- /gm)).toHaveLength(3);

    const [first] = await h.agent.port.runsOfSession(`discord:${GUILD}:${CHANNEL}:${THREAD}`);
    expect(first?.threadContext?.messages).toHaveLength(3);

    await say("Fixed it: a missing secret.");
    await h.mention("and again?", { channelId: THREAD });
    await waitForBotMessage(h.fake, THREAD, "Second answer.");
    const second = threadBlockOf(h, 1);
    expect(second).toContain("- user_000301: Fixed it: a missing secret.");
    expect(second.match(/^- /gm)).toHaveLength(1); // not the earlier ones, not the bot's answer
  });

  it("reads the chain of messages a mention replies to", async () => {
    const h = await startHarness({ script: answer });
    await h.fake.sendMessage({ channelId: CHANNEL, guildId: GUILD, authorId: OTHER_USER, content: "Unrelated." });
    const root = await h.fake.sendMessage({
      channelId: CHANNEL,
      guildId: GUILD,
      authorId: OTHER_USER,
      content: "The deploy failed at step 3.",
    });
    const reply = await h.fake.sendMessage({
      channelId: CHANNEL,
      guildId: GUILD,
      authorId: OTHER_USER,
      content: "Step 3 is the migration.",
      replyTo: root.id,
    });

    await h.mention("why?", { replyTo: reply.id });
    await waitForBotMessage(h.fake, CHANNEL, "First answer.");
    const block = threadBlockOf(h, 0);
    expect(block).toContain("- user_000301: The deploy failed at step 3.");
    expect(block).toContain("- user_000301: Step 3 is the migration.");
    expect(block).not.toContain("Unrelated.");
    expect(block.indexOf("The deploy failed")).toBeLessThan(block.indexOf("Step 3 is the migration"));
  });

  it("reads nothing for a mention that replies to nothing outside a thread", async () => {
    const h = await startHarness({ script: answer });
    await h.fake.sendMessage({ channelId: CHANNEL, guildId: GUILD, authorId: OTHER_USER, content: "Unrelated." });
    await h.mention("hello");
    await waitForBotMessage(h.fake, CHANNEL, "First answer.");
    expect(threadBlockOf(h, 0)).toBe("");
  });

  it("with the channel's history on, a mention that replies to nothing reads the channel before it, then only what is new", async () => {
    const { mkdtempSync, writeFileSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const { join } = await import("node:path");
    const file = join(mkdtempSync(join(tmpdir(), "glassbox-history-")), "channels.yaml");
    writeFileSync(file, ["channels:", `  "${CHANNEL}":`, "    threadContext: { channel: true }", ""].join("\n"));
    const h = await startHarness({ script: answer, env: { GLASSBOX_CHANNELS: file } });
    const say = (content: string) =>
      h.fake.sendMessage({ channelId: CHANNEL, guildId: GUILD, authorId: OTHER_USER, content });
    await say("The deploy failed at 10:02.");
    await say("Rolled back at 10:15.");

    await h.mention("what happened?");
    await waitForBotMessage(h.fake, CHANNEL, "First answer.");
    const block = threadBlockOf(h, 0);
    expect(block.match(/^- /gm)).toHaveLength(2);
    expect(block.indexOf("10:02")).toBeLessThan(block.indexOf("10:15"));
    const [first] = await h.agent.port.runsOfSession(`discord:${GUILD}:${CHANNEL}`);
    expect(first?.threadContext).toMatchObject({ channel: true, leftOut: 0 });

    await say("Root cause: a bad config push.");
    await h.mention("and again?");
    await waitForBotMessage(h.fake, CHANNEL, "Second answer.");
    const second = threadBlockOf(h, 1);
    // Only what came since the first mention: not the earlier messages, not the mention, not the bot's answer.
    expect(second.match(/^- /gm)).toHaveLength(1);
    expect(second).toContain("- user_000301: Root cause: a bad config push.");
  });
});
