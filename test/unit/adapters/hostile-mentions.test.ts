// A prompt-injected model, end to end: it calls tools whose names and arguments carry broadcast
// pings, asks to run a dangerous tool whose arguments try to break out of the approval card's code
// block, and answers with every kind of broadcast Slack and Discord know. Real Bolt and discord.js
// against the fakes, which record every call exactly as it arrives: nothing that would notify a
// channel, a group or a role reaches either platform, and what was written still shows as text.
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { FakeDiscord } from "../../../src/testing/fake-discord.js";
import type { FakeSlack } from "../../../src/testing/fake-slack.js";
import type { Script } from "../../../src/testing/scripted-model-server.js";
import * as discord from "../../helpers/discord.js";
import * as slack from "../../helpers/slack.js";

afterEach(async () => {
  await discord.cleanUp();
  await slack.cleanUp();
});

const ROLE = "1300000000000000900";
const SLACK_PINGS = [
  "<!channel>",
  "<!here>",
  "<!everyone>",
  "<!subteam^S0ONCALL>",
  "<!subteam^S0ONCALL|@oncall>",
  "<!here|here>",
  "<!channel|@channel>",
];
const DISCORD_PINGS = ["@everyone", "@here", `<@&${ROLE}>`, `<@${discord.OTHER_USER}>`];
const EVERY_PING = [...SLACK_PINGS, ...DISCORD_PINGS].join(" ");
/** What the dangerous tool is asked to run with: fences, backticks, zero-width tricks, commands. */
const BREAKOUT = {
  text: "```\n<!channel> out of the block?\n``` ``\u200b` `\u200b`\u200b` & <@U9> > quoted *bold* @everyone <@&1300000000000000900>",
  audience: "<!everyone> \u202eenoyreve\u202c\u2028next line",
};
/** Long enough to be streamed on Slack (web-api's stream buffer is 256 characters). */
const ANSWER = [
  `Done. ${EVERY_PING}`,
  "Read [the docs](https://example.com/docs) or <https://example.com/evil|<!channel>>, and `<!here>` in code:",
  "```\n<!everyone>\n```",
  `${"Everything went to plan, with every step recorded in the trace. ".repeat(4)}That is all.`,
].join("\n\n");

/** A lookup (slow when asked, so the assistant status shows it) and a dangerous notice board. */
function hostileTools(directory: string): string {
  const path = join(directory, "hostile-tools.mjs");
  writeFileSync(
    path,
    `const object = (properties, required) => ({ type: "object", properties, required });
export default [
  { name: "lookup_note", description: "Looks a note up.", parameters: object({ query: { type: "string" }, wait_ms: { type: "number" } }, ["query"]),
    handler: async ({ query, wait_ms }) => { if (wait_ms) await new Promise((resolve) => setTimeout(resolve, wait_ms)); return { note: "about " + query }; } },
  { name: "post_notice", description: "Posts a notice for everyone.", dangerous: true,
    parameters: object({ text: { type: "string" }, audience: { type: "string" } }, ["text"]), handler: async ({ text }) => ({ posted: text }) },
];
`,
  );
  return path;
}

function hostileScript(waitMs = 0): Script {
  const call = (name: string, args: unknown, id: string) => ({ name, arguments: JSON.stringify(args), id });
  return [
    // A lookup (slow when asked) whose arguments ping: the progress shows them.
    {
      toolCalls: [
        call("lookup_note", { query: `${EVERY_PING} notes`, ...(waitMs ? { wait_ms: waitMs } : {}) }, "call_lookup"),
      ],
    },
    { toolCalls: [call("post_notice", BREAKOUT, "call_notice")] },
    { content: ANSWER },
  ];
}

// ---- Slack

const SLACK_COMMAND = /<!(?:channel|here|everyone|group|subteam)/i;

/** Every call the bot made: no broadcast in any of them, by the fake's reading or as raw text. */
function expectNoSlackBroadcasts(fake: FakeSlack, atLeast = 6): void {
  const sent = fake.calls.filter((call) => call.method !== "auth.test");
  expect(sent.length).toBeGreaterThanOrEqual(atLeast);
  for (const call of sent) {
    expect(call.broadcasts, `${call.method} ${JSON.stringify(call.args)}`).toEqual([]);
    expect(JSON.stringify(call.args), call.method).not.toMatch(SLACK_COMMAND);
  }
}

const decodeEntities = (text: string) => text.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");

/** The approval card: the arguments in one code block nothing closes, reading back as what was asked. */
function expectSlackCard(message: { text?: string; blocks?: unknown[] }): void {
  const sections = (message.blocks ?? []) as Array<{ type: string; text?: { text: string } }>;
  const code = sections.map((block) => block.text?.text ?? "").find((text) => text.startsWith("```")) ?? "";
  const inner = /^```([^`]*)```$/.exec(code)?.[1];
  expect(inner, code).toBeDefined();
  expect(inner).not.toMatch(/[<>]/); // only entities: nothing for Slack to read as a command
  expect(JSON.parse(decodeEntities(inner ?? ""))).toEqual(BREAKOUT);
  expect(JSON.stringify(message.blocks)).toContain(`<@U1>`); // the bot's own mention of the requester stays
}

async function runSlack(options: { refuse?: string[]; direct?: boolean; waitMs?: number }) {
  const tools = hostileTools(slack.tempDir());
  const h = await slack.startHarness({
    script: hostileScript(options.waitMs),
    env: { GLASSBOX_TOOLS: tools },
    fake: { refuse: options.refuse ?? [] },
  });
  const channel = options.direct ? "D1" : slack.CHANNEL;
  const sent = options.direct
    ? await h.dm("post the notice please")
    : await h.mention(`<@${slack.BOT}> post the notice please`);
  const threadTs = options.direct ? undefined : sent.ts;
  const approval = await slack.waitForApproval(h.fake, channel, threadTs);
  await h.click(approval, "U2"); // not theirs: an ephemeral refusal
  await h.fake.waitForCall("chat.postEphemeral", undefined, slack.CALL_WAIT);
  await h.click(approval, "U1");
  await slack.waitForBotMessage(h.fake, channel, threadTs, "That is all.");
  await h.slack.conversations.idle();
  return { h, channel, threadTs, approval };
}

describe("Slack: no broadcast from the model reaches Slack", () => {
  it("in a thread with the assistant status and streaming: status, stream, approval card, outcome and ephemeral carry none (regression: the model's <!channel> reached Slack raw)", async () => {
    const { h, channel, threadTs, approval } = await runSlack({ waitMs: 1_400 });
    expectNoSlackBroadcasts(h.fake);
    expectSlackCard(approval.message);
    // Each path was taken, and says what was written, defused.
    const statuses = h.fake.callsTo("assistant.threads.setStatus").map((call) => String(call.args.status));
    expect(statuses.some((status) => status.includes("calling lookup_note(query: ‹!channel› ‹!here›"))).toBe(true);
    expect(h.fake.callsTo("chat.stopStream")).toHaveLength(1);
    const answer = slack.botTexts(h.fake, channel, threadTs).at(-1) ?? "";
    expect(answer).toContain("&lt;!channel> &lt;!here> &lt;!everyone> &lt;!subteam^S0ONCALL>");
    expect(answer).toContain("[the docs](https://example.com/docs)");
    expect(answer).toContain("That is all.");
    expect(slack.visibleText(slack.messageAt(h.fake, channel, approval.ts))).toContain("Approved by <@U1>");
  });

  it("without the assistant status or streaming: the placeholder, tool activity and the answer by edits carry none (regression: tool arguments' <!here> pinged from the progress message)", async () => {
    const { h, channel, threadTs } = await runSlack({ refuse: ["assistant.threads.setStatus", "chat.startStream"] });
    expectNoSlackBroadcasts(h.fake);
    const activity = h.fake
      .callsTo("chat.update")
      .map((call) => String(call.args.text))
      .find((text) => text.includes("calling lookup_note"));
    expect(activity).toContain("calling lookup_note(query: &lt;!channel&gt; &lt;!here&gt;");
    const answer = slack.botTexts(h.fake, channel, threadTs).at(-1) ?? "";
    expect(answer).toContain("&lt;!channel&gt; &lt;!here&gt; &lt;!everyone&gt; &lt;!subteam^S0ONCALL&gt;");
    expect(answer).toContain("<https://example.com/docs|the docs>"); // a link the conversion made stays a link
    expect(answer).toContain(`&lt;@${discord.OTHER_USER}&gt;`); // not a Slack user id: shown as text
  });

  it("in a direct message (no thread: a progress message, then the answer by edits) carries none (regression: the model's <!everyone> reached the DM raw)", async () => {
    const { h, channel } = await runSlack({ direct: true });
    expectNoSlackBroadcasts(h.fake);
    const progress = [...h.fake.callsTo("chat.postMessage"), ...h.fake.callsTo("chat.update")].map((call) =>
      String(call.args.text),
    );
    expect(progress.some((text) => text.includes("calling lookup_note(query: &lt;!channel&gt;"))).toBe(true);
    expect(slack.botTexts(h.fake, channel).at(-1)).toContain("&lt;!everyone&gt;");
  });

  it("an approval card stays within Slack's 3,000 characters a section for a 10,000-character argument (regression: backticks in an argument closed the code block)", async () => {
    const tools = hostileTools(slack.tempDir());
    const huge = { text: `<!here>${"`<&>".repeat(2_500)}` };
    const h = await slack.startHarness({
      script: [{ toolCalls: [{ name: "post_notice", arguments: JSON.stringify(huge) }] }],
      env: { GLASSBOX_TOOLS: tools },
    });
    const { ts } = await h.mention(`<@${slack.BOT}> post it`);
    const approval = await slack.waitForApproval(h.fake, slack.CHANNEL, ts); // posted: Slack did not refuse it
    const code =
      ((approval.message.blocks ?? []) as Array<{ text?: { text: string } }>)
        .map((block) => block.text?.text ?? "")
        .find((text) => text.startsWith("```")) ?? "";
    expect(code.length).toBeLessThanOrEqual(3_000);
    expect(code).toMatch(/^```[^`]*more characters\)```$/);
    expectNoSlackBroadcasts(h.fake, 2);
  });
});

// ---- Discord

/** Every message the bot created or edited went out with allowed_mentions, and pings nobody it did not mean. */
function expectNoDiscordBroadcasts(fake: FakeDiscord, card: { id: string }, atLeast = 6): void {
  expect(fake.messageWrites.length).toBeGreaterThanOrEqual(atLeast);
  for (const write of fake.messageWrites) {
    const where = `${write.kind} ${write.content.slice(0, 60)}`;
    expect(write.allowedMentions, where).toBeDefined();
    expect(write.pings.everyone, where).toBe(false);
    expect(write.pings.roles, where).toEqual([]);
    // Only the approval card names someone to notify: the person whose decision it is.
    expect(write.pings.users, where).toEqual(
      write.kind === "create" && write.messageId === card.id ? [discord.USER] : [],
    );
  }
}

describe("Discord: no broadcast from the model reaches Discord", () => {
  it("answers, progress edits, the approval card, its outcome, follow-ups and command replies ping no one but the approver-to-be (regression: the model's @everyone pinged the server)", async () => {
    const tools = hostileTools(dirname(discord.tempPaths().db));
    const h = await discord.startHarness({ script: hostileScript(), env: { GLASSBOX_TOOLS: tools } });
    await h.mention("post the notice please");
    const approval = await discord.waitForApproval(h.fake, discord.CHANNEL);
    const refused = await discord.click(h.fake, approval, discord.OTHER_USER); // not theirs: an ephemeral follow-up
    await h.fake.waitForRequest(
      "POST",
      /^\/webhooks\//,
      (request) => request.path.includes(refused.token),
      discord.REQUEST_WAIT,
    );
    await discord.click(h.fake, approval, discord.USER);
    await discord.waitForBotMessage(h.fake, discord.CHANNEL, "That is all.");
    await h.discord.idle();
    await h.mention(""); // a bare mention: the hint is a reply
    await discord.waitForBotMessage(h.fake, discord.CHANNEL, "Ask me something");
    const usage = await h.fake.runCommand({
      channelId: discord.CHANNEL,
      guildId: discord.GUILD,
      userId: discord.USER,
      name: "usage",
    });
    await h.fake.waitForRequest(
      "POST",
      /\/callback$/,
      (request) => request.path.includes(usage.interactionId),
      discord.REQUEST_WAIT,
    );

    expectNoDiscordBroadcasts(h.fake, approval.message);
    // The model's text still shows as written.
    const texts = discord.botTexts(h.fake, discord.CHANNEL).join("\n");
    expect(texts).toContain(`Done. ${EVERY_PING}`);
    expect(texts).toContain("✅ lookup_note");
    // The card: one code block that nothing in the arguments closes, reading back as what was asked.
    const card =
      h.fake.messageWrites.find((write) => write.messageId === approval.message.id && write.kind === "create")
        ?.content ?? "";
    const inner = /```json\n([^`]*)\n```/.exec(card)?.[1];
    expect(inner, card).toBeDefined();
    expect(card.match(/```/g)).toHaveLength(2);
    expect(JSON.parse(inner ?? "")).toEqual(BREAKOUT);
    expect(inner).not.toMatch(/[\u200b\u202e\u202c\u2028]/); // written as \u200b, so the approver sees them
  });

  it("an approval card for a 10,000-character argument stays within Discord's 2,000 characters (regression: backticks in an argument closed the code block)", async () => {
    const tools = hostileTools(dirname(discord.tempPaths().db));
    const h = await discord.startHarness({
      script: [
        { toolCalls: [{ name: "post_notice", arguments: JSON.stringify({ text: "`@everyone".repeat(1_000) }) }] },
      ],
      env: { GLASSBOX_TOOLS: tools },
    });
    await h.mention("post it");
    const approval = await discord.waitForApproval(h.fake, discord.CHANNEL); // posted: Discord did not refuse it
    expect(approval.message.content.length).toBeLessThanOrEqual(2_000);
    expect(approval.message.content.match(/```/g)).toHaveLength(2);
    expect(approval.message.content).toMatch(/more characters\)\n```/);
    expectNoDiscordBroadcasts(h.fake, approval.message, 1);
  });
});
