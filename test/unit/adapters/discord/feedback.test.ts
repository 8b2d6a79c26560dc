// Feedback on answers in Discord, end to end: the real discord.js client against the fake Discord,
// the agent's store in SQLite. An answer's last message carries 👍 / 👎 buttons naming its run; a
// click records the person's rating, a 👎 answers with a modal asking for an optional reason, a
// person's latest click is their answer, a replayed interaction counts once, and no click starts a run.
import { MessageFlags } from "discord.js";
import { afterEach, describe, expect, it } from "vitest";
import { createFeedbackBook } from "../../../../src/store/sqlite-feedback.js";
import type { FakeDiscord } from "../../../../src/testing/fake-discord.js";
import {
  agentFor,
  buttonsOf,
  CHANNEL,
  cleanUp,
  GUILD,
  interactionReplies,
  memoryLogger,
  OTHER_CHANNEL,
  OTHER_USER,
  REQUEST_WAIT,
  startAdapter,
  startFake,
  startHarness,
  startModel,
  tempPaths,
  USER,
  waitForBotMessage,
} from "../../../helpers/discord.js";

afterEach(cleanUp);

const MODAL = 9;

/** Waits for the bot's answer to an interaction (its callback). */
const responded = (fake: FakeDiscord, interactionId: string) =>
  fake.waitForRequest("POST", new RegExp(`^/interactions/${interactionId}/`), () => true, REQUEST_WAIT);

describe("Discord feedback", () => {
  it("an answer carries 👍 / 👎; a 👎 opens a modal whose reason is kept, a later click replaces the earlier one, and no click starts a run", async () => {
    const h = await startHarness({ script: [{ content: "The answer is 42." }] });
    await h.mention("what is the answer?");
    const answer = await waitForBotMessage(h.fake, CHANNEL, "The answer is 42.");
    await h.discord.idle();
    const runId = h.agent.store.db.prepare("SELECT id FROM runs").pluck().get() as string;
    expect(buttonsOf(answer).map((button) => button.custom_id)).toEqual([
      `glassbox:feedback:up:${runId}`,
      `glassbox:feedback:down:${runId}`,
    ]);
    const feedback = createFeedbackBook(h.agent.store);
    const click = (userId: string, rating: "up" | "down") =>
      h.fake.clickButton({
        channelId: CHANNEL,
        userId,
        messageId: answer.id,
        customId: `glassbox:feedback:${rating}:${runId}`,
      });

    const up = await click(USER, "up");
    await responded(h.fake, up.interactionId);
    expect(interactionReplies(h.fake, up.interactionId)[0]).toMatchObject({
      content: "Thanks for the 👍.",
      flags: MessageFlags.Ephemeral,
    });
    expect(feedback.ofRun(runId).map((one) => [one.userId, one.rating, one.source])).toEqual([[USER, "up", "discord"]]);

    // The other person's 👎: the answer to the click is the modal; submitting it keeps the reason.
    const down = await click(OTHER_USER, "down");
    await responded(h.fake, down.interactionId);
    expect(interactionReplies(h.fake, down.interactionId)[0]?.type).toBe(MODAL);
    expect(h.fake.modalOf(down.interactionId)).toMatchObject({ customId: `glassbox:reason:${runId}` });
    const submitted = await h.fake.submitModal({
      interactionId: down.interactionId,
      values: { reason: "It made up a number" },
    });
    await responded(h.fake, submitted.interactionId);
    expect(interactionReplies(h.fake, submitted.interactionId)[0]).toMatchObject({
      content: "Thanks, noted.",
      flags: MessageFlags.Ephemeral,
    });
    expect(feedback.ofRun(runId).find((one) => one.userId === OTHER_USER)).toMatchObject({
      rating: "down",
      reason: "It made up a number",
    });

    // USER changes their mind: one rating per person, the latest.
    const changed = await click(USER, "down");
    await responded(h.fake, changed.interactionId);
    expect(
      feedback
        .ofRun(runId)
        .map((one) => [one.userId, one.rating])
        .sort(),
    ).toEqual(
      [
        [OTHER_USER, "down"],
        [USER, "down"],
      ].sort(),
    );
    await h.discord.idle();
    expect(h.model.requests).toHaveLength(1);
  });

  it("an interaction delivered twice (two connections, one store) is answered once: one modal, one reason", async () => {
    const fake = await startFake();
    const model = await startModel([{ content: "The answer is 42." }]);
    const paths = tempPaths();
    const { log } = memoryLogger();
    const one = (await agentFor(model, paths, log)).agent;
    const two = (await agentFor(model, paths, log)).agent;
    const a = await startAdapter({ fake, agent: one, store: one.port, log });
    const b = await startAdapter({ fake, agent: two, store: two.port, log });
    expect(fake.connections()).toBe(2);
    await fake.sendMessage({
      channelId: CHANNEL,
      guildId: GUILD,
      authorId: USER,
      content: "what is the answer?",
      mentionsBot: true,
    });
    const answer = await waitForBotMessage(fake, CHANNEL, "The answer is 42.");
    await Promise.all([a.idle(), b.idle()]);
    const runId = one.store.db.prepare("SELECT id FROM runs").pluck().get() as string;

    const down = await fake.clickButton({
      channelId: CHANNEL,
      userId: USER,
      messageId: answer.id,
      customId: `glassbox:feedback:down:${runId}`,
    });
    await responded(fake, down.interactionId);
    const submitted = await fake.submitModal({ interactionId: down.interactionId, values: { reason: "Wrong" } });
    await responded(fake, submitted.interactionId);
    // A later, distinct click shows both connections have handled the earlier ones by now.
    const up = await fake.clickButton({
      channelId: CHANNEL,
      userId: OTHER_USER,
      messageId: answer.id,
      customId: `glassbox:feedback:up:${runId}`,
    });
    await responded(fake, up.interactionId);
    await expect.poll(() => createFeedbackBook(one.store).ofRun(runId).length).toBe(2);
    expect(interactionReplies(fake, down.interactionId).map((reply) => reply.type)).toEqual([MODAL]);
    expect(interactionReplies(fake, submitted.interactionId)).toHaveLength(1);
    expect(
      createFeedbackBook(one.store)
        .ofRun(runId)
        .find((given) => given.userId === USER),
    ).toMatchObject({ rating: "down", reason: "Wrong" });
    expect(model.requests).toHaveLength(1);
  });

  it("a click from another channel rates nothing and says so", async () => {
    const h = await startHarness({ script: [{ content: "The answer is 42." }] });
    await h.mention("what is the answer?");
    const answer = await waitForBotMessage(h.fake, CHANNEL, "The answer is 42.");
    await h.discord.idle();
    const runId = h.agent.store.db.prepare("SELECT id FROM runs").pluck().get() as string;
    // A message in another channel whose button names this run (as a forged or copied component would).
    const elsewhere = await h.fake.sendMessage({ channelId: OTHER_CHANNEL, authorId: USER, content: "hello" });
    const clicked = await h.fake.clickButton({
      channelId: OTHER_CHANNEL,
      userId: USER,
      messageId: elsewhere.id,
      customId: `glassbox:feedback:up:${runId}`,
    });
    await responded(h.fake, clicked.interactionId);
    expect(interactionReplies(h.fake, clicked.interactionId)[0]?.content).toMatch(
      /rate it in the conversation where I gave it/,
    );
    expect(createFeedbackBook(h.agent.store).ofRun(runId)).toEqual([]);
    expect(buttonsOf(answer)).toHaveLength(2);
  });
});
