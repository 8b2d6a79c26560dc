// A note for a whole channel on Discord, end to end: the real discord.js client against the fake
// Discord, the agent as `npm start` builds it over its SQLite file. The note waits for the click on
// a card that says it is done in the person's name; confirmed, it is kept for the channel; declined,
// nothing is; with self-approval off, the confirmation is still the person's own.
import { afterEach, describe, expect, it } from "vitest";
import type { ChatCompletionRequestBody } from "../../../../src/testing/scripted-model-server.js";
import type { FakeDiscordMessage } from "../../../../src/testing/fake-discord.js";
import {
  type ApprovalMessage,
  botMessages,
  botTexts,
  buttonsOf,
  CHANNEL,
  cleanUp,
  click,
  GUILD,
  interactionReplies,
  messageById,
  OTHER_USER,
  REQUEST_WAIT,
  startHarness,
  textOf,
  toolCall,
  USER,
  WAIT,
  waitForBotMessage,
  type Harness,
} from "../../../helpers/discord.js";

afterEach(cleanUp);

const NOTE = "Deploys freeze on Fridays.";

/** The model: a note for the channel when asked to remember, then what the tool said. */
function script(request: ChatCompletionRequestBody) {
  const last = request.messages.at(-1);
  if (last?.role === "tool") return { content: `Result: ${textOf(last)}` };
  return { toolCalls: [toolCall("remember", { fact: NOTE, shared_with_channel: true })] };
}

/** The next approval card in the channel (the answers' 👍 / 👎 buttons are not one), other than `seen`. */
async function waitForCard(h: Harness, seen: string[] = []): Promise<ApprovalMessage> {
  await expect
    .poll(
      () =>
        botMessages(h.fake, CHANNEL).some(
          (message) =>
            !seen.includes(message.id) &&
            buttonsOf(message).some((button) => button.custom_id?.startsWith("glassbox:approve:")),
        ),
      WAIT,
    )
    .toBe(true);
  const message = botMessages(h.fake, CHANNEL).find(
    (candidate) =>
      !seen.includes(candidate.id) &&
      buttonsOf(candidate).some((button) => button.custom_id?.startsWith("glassbox:approve:")),
  ) as FakeDiscordMessage;
  const [approve = "", deny = ""] = buttonsOf(message).map((button) => button.custom_id ?? "");
  return { channelId: CHANNEL, message, id: approve.split(":").at(-1) ?? "", approve, deny };
}

const notes = (h: Harness) =>
  h.agent.store.db.prepare("SELECT user_id AS userId, scope, content FROM facts").all() as Array<{
    userId: string;
    scope: string;
    content: string;
  }>;

describe("a channel note on Discord", () => {
  it("waits for the person's click on a card that says it is done in their name, also with self-approval off; kept once confirmed, not when declined", async () => {
    const h = await startHarness({ script, discord: { requesterMayApprove: false } });
    await h.mention(`remember for everyone: ${NOTE}`);
    const card = await waitForCard(h);
    expect(card.message.content).toContain(`🔒 **Confirmation needed**: I would run \`remember\` in <@${USER}>'s name`);
    expect(card.message.content).toContain(`<@${USER}>, approve it only if you asked for it: it is done in your name`);
    expect(card.message.content).toContain(NOTE);
    await h.discord.idle();
    expect(notes(h)).toEqual([]);

    // Someone else's click decides nothing; the person's own keeps the note.
    const stranger = await click(h.fake, card, OTHER_USER);
    await h.fake.waitForRequest("POST", /^\/webhooks\//, (r) => r.path.includes(stranger.token), REQUEST_WAIT);
    expect(interactionReplies(h.fake, stranger.interactionId).map((reply) => reply.content)).toContain(
      `Only <@${USER}> can approve this.`,
    );
    expect(notes(h)).toEqual([]);
    await click(h.fake, card, USER);
    await waitForBotMessage(h.fake, CHANNEL, "Result:");
    await h.discord.idle();
    expect(notes(h)).toEqual([{ userId: USER, scope: `discord:${GUILD}:${CHANNEL}`, content: NOTE }]);
    expect(messageById(h.fake, CHANNEL, card.message.id)?.content).toContain(`Approved by <@${USER}>`);
    expect(buttonsOf(messageById(h.fake, CHANNEL, card.message.id))).toEqual([]);

    // Asked again and declined: nothing more is kept.
    await h.mention(`remember for everyone: ${NOTE}`);
    const second = await waitForCard(h, [card.message.id]);
    await click(h.fake, second, USER, second.deny);
    await expect
      .poll(() => botTexts(h.fake, CHANNEL).filter((text) => text.startsWith("Result:")).length, WAIT)
      .toBe(2);
    expect(botTexts(h.fake, CHANNEL).at(-1)).toMatch(/^Result: .*"denied"/);
    expect(notes(h)).toHaveLength(1);
  });
});
