// An approval is decided only where it was posted: on its platform, in its workspace or guild, in
// its channel and on its message. Real Bolt and discord.js against the fakes, one SQLite store;
// a click that carries a valid approval id from anywhere else is refused ("no longer waiting"),
// the approval stays pending, and the genuine click still resumes the run.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createApprovalBook } from "../../../src/store/sqlite-approvals.js";
import type { SqliteStore } from "../../../src/store/sqlite-store.js";
import type { BlockActionInput } from "../../../src/testing/fake-slack.js";
import type { ScriptedReply } from "../../../src/testing/scripted-model-server.js";
import * as discord from "../../helpers/discord.js";
import * as slack from "../../helpers/slack.js";

const stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
  await discord.cleanUp();
  await slack.cleanUp();
});

const NOT_WAITING = "This request is no longer waiting for a decision.";
const script = (): ScriptedReply[] => [
  { toolCalls: [{ name: "post_notice", arguments: JSON.stringify({ text: "lunch is here" }), id: "call_notice" }] },
  { content: "Posted the notice." },
];

/** A dangerous tool of the test's own: no demo shop needed. */
function noticeTools(): string {
  const path = join(slack.tempDir(), "notice-tools.mjs");
  writeFileSync(
    path,
    `export default [{ name: "post_notice", description: "Posts a notice.", dangerous: true,
  parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] }, handler: async ({ text }) => ({ posted: text }) }];`,
  );
  return path;
}

const statusOf = (store: SqliteStore, approvalId: string) => createApprovalBook(store).get(approvalId)?.status;

describe("Slack and Discord sharing one store", () => {
  it("a Discord click carrying a Slack approval's id is refused: the approval stays pending, and the Slack run resumes on a genuine Slack click (regression: a Discord approver's click decided a Slack approval)", async () => {
    const model = await slack.startModel(script());
    const { log } = slack.memoryLogger();
    const { agent } = await slack.agentFor(model, slack.tempPaths(), log, { GLASSBOX_TOOLS: noticeTools() });
    const slackFake = await slack.startSlack();
    const slackBot = await slack.startAdapter({ fake: slackFake, agent, log });
    const discordFake = await discord.startFake();
    // A Discord approver may decide any Discord approval: the refusal cannot come from who clicks.
    const discordBot = await discord.startAdapter({
      fake: discordFake,
      agent,
      store: agent.port,
      log,
      discord: { approvers: [discord.APPROVER] },
    });

    const ts = slackFake.nextTs();
    await slackFake.sendEvent(slackBot.eventsUrl as string, {
      type: "app_mention",
      user: "U1",
      channel: slack.CHANNEL,
      text: `<@${slack.BOT}> post the notice`,
      ts,
    });
    const approval = await slack.waitForApproval(slackFake, slack.CHANNEL, ts);
    await slackBot.conversations.idle();

    // The forged click: a button on any Discord message, its custom_id naming the Slack approval.
    const carrier = await discordFake.sendMessage({
      channelId: discord.CHANNEL,
      guildId: discord.GUILD,
      authorId: discord.APPROVER,
      content: "nothing to see",
    });
    const clicked = await discordFake.clickButton({
      channelId: discord.CHANNEL,
      guildId: discord.GUILD,
      userId: discord.APPROVER,
      messageId: carrier.id,
      customId: `glassbox:approve:${approval.id}`,
    });
    await discordFake.waitForRequest(
      "POST",
      /^\/webhooks\//,
      (request) => request.path.includes(clicked.token),
      discord.REQUEST_WAIT,
    );
    expect(discord.interactionReplies(discordFake, clicked.interactionId).at(-1)?.content).toBe(NOT_WAITING);
    await discordBot.idle();
    expect(statusOf(agent.store, approval.id)).toBe("pending");
    expect(slack.buttonsOf(slack.messageAt(slackFake, slack.CHANNEL, approval.ts) ?? { ts: "" })).toHaveLength(2);
    expect(model.requests).toHaveLength(1);

    await slackFake.sendBlockAction(slackBot.eventsUrl as string, {
      userId: "U1",
      channel: slack.CHANNEL,
      messageTs: approval.ts,
      actionId: slack.APPROVE,
      value: approval.id,
    });
    await slack.waitForBotMessage(slackFake, slack.CHANNEL, ts, "Posted the notice.");
    await slackBot.conversations.idle();
    expect(createApprovalBook(agent.store).get(approval.id)).toMatchObject({ status: "approved", decidedBy: "U1" });
    expect(slack.toolResults(model, 1)).toEqual([{ status: "success", data: { posted: "lunch is here" } }]);
    expect(discord.botTexts(discordFake, discord.CHANNEL)).toEqual([]); // nothing of the Slack run went to Discord
  });
});

describe("Slack clicks", () => {
  async function slackApproval() {
    const h = await slack.startHarness({ script: script(), env: { GLASSBOX_TOOLS: noticeTools() } });
    const { ts } = await h.mention(`<@${slack.BOT}> post the notice`);
    const approval = await slack.waitForApproval(h.fake, slack.CHANNEL, ts);
    await h.slack.conversations.idle();
    const clickOn = (from: Partial<BlockActionInput> = {}) =>
      h.fake.sendBlockAction(h.slack.eventsUrl as string, {
        userId: "U1",
        channel: slack.CHANNEL,
        messageTs: approval.ts,
        actionId: slack.APPROVE,
        value: approval.id,
        ...from,
      });
    return { h, ts, approval, clickOn };
  }

  it("from another workspace, another channel or on another message, with a valid id, are refused; the genuine click (Enterprise Grid shape) decides (regression: any signed click carrying the id decided it)", async () => {
    const { h, ts, approval, clickOn } = await slackApproval();
    const forged: Array<Partial<BlockActionInput>> = [
      { teamId: "T0OTHER001" }, // another workspace, the same channel and message
      { channel: "C2" }, // another channel, the same message ts
      { messageTs: ts }, // the same channel, another message (the mention that started the thread)
      { teamId: null, messageTs: ts }, // an org-wide install's click, on another message
    ];
    for (const from of forged) expect((await clickOn(from)).status).toBe(200);
    await expect.poll(() => h.fake.callsTo("chat.postEphemeral").length, slack.WAIT).toBe(forged.length);
    await h.slack.conversations.idle();
    expect(h.fake.callsTo("chat.postEphemeral").map((call) => call.args.text)).toEqual(forged.map(() => NOT_WAITING));
    expect(statusOf(h.agent.store, approval.id)).toBe("pending");
    expect(slack.buttonsOf(slack.messageAt(h.fake, slack.CHANNEL, approval.ts) ?? { ts: "" })).toHaveLength(2);
    expect(h.model.requests).toHaveLength(1);

    // In an Enterprise Grid org user.team_id is the org (E...); team.id is still the workspace.
    await clickOn({ enterpriseId: "E0FAKEORG1" });
    await slack.waitForBotMessage(h.fake, slack.CHANNEL, ts, "Posted the notice.");
    await h.slack.conversations.idle();
    expect(statusOf(h.agent.store, approval.id)).toBe("approved");
    expect(h.fake.callsTo("chat.postEphemeral")).toHaveLength(forged.length);
  });

  it("in an org-wide install (team null), a click on the approval's own message decides it", async () => {
    const { h, ts, approval, clickOn } = await slackApproval();
    await clickOn({ teamId: null });
    await slack.waitForBotMessage(h.fake, slack.CHANNEL, ts, "Posted the notice.");
    await h.slack.conversations.idle();
    expect(statusOf(h.agent.store, approval.id)).toBe("approved");
    expect(h.fake.callsTo("chat.postEphemeral")).toEqual([]);
  });
});

describe("Discord clicks", () => {
  it("on another message, from another channel or from a DM, with a valid id, are refused; the genuine click in the thread decides (regression: a click anywhere carrying the id decided it)", async () => {
    const h = await discord.startHarness({ script: script(), env: { GLASSBOX_TOOLS: noticeTools() } });
    const asked = await h.mention("post the notice", { channelId: discord.THREAD });
    const approval = await discord.waitForApproval(h.fake, discord.THREAD);
    await h.discord.idle();

    const elsewhere = await h.fake.sendMessage({
      channelId: discord.OTHER_CHANNEL,
      guildId: discord.GUILD,
      authorId: discord.USER,
      content: "over here",
    });
    // By another bot, so the DM starts no run of its own.
    const inDm = await h.fake.sendMessage({
      channelId: discord.DM,
      authorId: "1300000000000000399",
      bot: true,
      content: "in private",
    });
    const forged = [
      { channelId: discord.THREAD, guildId: discord.GUILD, messageId: asked.id }, // the same thread, another message
      { channelId: discord.OTHER_CHANNEL, guildId: discord.GUILD, messageId: elsewhere.id }, // another channel of the guild
      { channelId: discord.DM, messageId: inDm.id }, // a DM
    ];
    for (const place of forged) {
      const clicked = await h.fake.clickButton({ ...place, userId: discord.USER, customId: approval.approve });
      await h.fake.waitForRequest(
        "POST",
        /^\/webhooks\//,
        (request) => request.path.includes(clicked.token),
        discord.REQUEST_WAIT,
      );
      expect(discord.interactionReplies(h.fake, clicked.interactionId).at(-1)?.content).toBe(NOT_WAITING);
    }
    await h.discord.idle();
    expect(statusOf(h.agent.store, approval.id)).toBe("pending");
    expect(discord.buttonsOf(discord.messageById(h.fake, discord.THREAD, approval.message.id))).toHaveLength(2);
    expect(h.model.requests).toHaveLength(1);

    await discord.click(h.fake, approval, discord.USER);
    await discord.waitForBotMessage(h.fake, discord.THREAD, "Posted the notice.");
    await h.discord.idle();
    expect(statusOf(h.agent.store, approval.id)).toBe("approved");
  });

  it("a genuine click in a DM decides its approval", async () => {
    const h = await discord.startHarness({ script: script(), env: { GLASSBOX_TOOLS: noticeTools() } });
    await h.dm("post the notice");
    const approval = await discord.waitForApproval(h.fake, discord.DM);
    await discord.click(h.fake, approval, discord.USER);
    await discord.waitForBotMessage(h.fake, discord.DM, "Posted the notice.");
    await h.discord.idle();
    expect(statusOf(h.agent.store, approval.id)).toBe("approved");
  });
});
