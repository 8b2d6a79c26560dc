// Feedback on answers in Slack, end to end: the real Bolt app against the fake Slack, the agent's
// store in SQLite. Every answer carries Slack's feedback buttons (or plain 👍 / 👎 buttons where
// Slack refuses those); a click records the person's rating with the run, a 👎 opens a modal for an
// optional reason, a person's latest click is their answer, and a rating never starts a run.
import { afterEach, describe, expect, it } from "vitest";
import { createFeedbackBook } from "../../../../src/store/sqlite-feedback.js";
import type { FakeMessage } from "../../../../src/testing/fake-slack.js";
import {
  BOT,
  CALL_WAIT,
  CHANNEL,
  cleanUp,
  startHarness,
  waitForBotMessage,
  type Harness,
} from "../../../helpers/slack.js";

afterEach(cleanUp);

interface Element {
  type?: string;
  action_id?: string;
  value?: string;
  positive_button?: { value?: string };
  negative_button?: { value?: string };
}
interface Block {
  type?: string;
  elements?: Element[];
}

const blocksOf = (message: FakeMessage) => (message.blocks ?? []) as Block[];

/** The feedback buttons element of an answer (Slack's own), if it has one. */
function feedbackElement(message: FakeMessage): Element | undefined {
  return blocksOf(message)
    .filter((block) => block.type === "context_actions")
    .flatMap((block) => block.elements ?? [])
    .find((element) => element.type === "feedback_buttons");
}

async function answered(h: Harness, text = "The answer is 42.") {
  const { ts } = await h.mention(`<@${BOT}> what is the answer?`);
  const message = await waitForBotMessage(h.fake, CHANNEL, ts, text);
  await h.slack.conversations.idle();
  return { threadTs: ts, message: h.fake.messages(CHANNEL, ts).find((m) => m.ts === message.ts) as FakeMessage };
}

describe("Slack feedback", () => {
  it("an answer carries 👍 / 👎; clicks record each person's latest rating, a 👎's modal takes a reason, and no click starts a run", async () => {
    const h = await startHarness({ script: [{ content: "The answer is 42." }] });
    const { message } = await answered(h);
    const element = feedbackElement(message);
    const runId = h.agent.store.db.prepare("SELECT id FROM runs").pluck().get() as string;
    expect(element).toMatchObject({
      action_id: "glassbox_feedback",
      positive_button: { value: `up:${runId}` },
      negative_button: { value: `down:${runId}` },
    });
    const feedback = createFeedbackBook(h.agent.store);
    const url = h.slack.eventsUrl as string;
    const click = (userId: string, value: string) =>
      h.fake.sendBlockAction(url, {
        userId,
        channel: CHANNEL,
        messageTs: message.ts,
        actionId: "glassbox_feedback",
        value,
      });

    expect((await click("U1", `up:${runId}`)).status).toBe(200);
    await expect
      .poll(() => feedback.ofRun(runId).map((one) => [one.userId, one.rating, one.source]))
      .toEqual([["U1", "up", "slack"]]);
    expect(h.fake.views).toEqual([]); // a 👍 asks nothing

    // U2's 👎 opens the modal, for U2, naming the run; submitting it adds the reason to U2's 👎.
    await click("U2", `down:${runId}`);
    await h.fake.waitForCall("views.open", () => true, CALL_WAIT);
    const [modal] = h.fake.views;
    expect(modal).toMatchObject({ userId: "U2", callbackId: "glassbox_feedback_reason", privateMetadata: runId });
    const submitted = await h.fake.sendViewSubmission(url, {
      viewId: modal?.id ?? "",
      userId: "U2",
      values: { reason: { reason_input: "It ignored my question" } },
    });
    expect(submitted.status).toBe(200);
    await expect
      .poll(() => feedback.ofRun(runId).find((one) => one.userId === "U2")?.reason)
      .toBe("It ignored my question");

    // U1 changes their mind: the 👎 replaces the 👍.
    await click("U1", `down:${runId}`);
    await expect.poll(() => feedback.ofRun(runId).find((one) => one.userId === "U1")?.rating).toBe("down");
    expect(feedback.ofRun(runId)).toHaveLength(2);
    expect(feedback.counts()).toEqual({ up: 0, down: 2 });
    await h.slack.conversations.idle();
    expect(h.model.requests).toHaveLength(1); // no click started a run
  });

  it("a click delivered twice is handled once: one modal, one rating", async () => {
    const h = await startHarness({ script: [{ content: "The answer is 42." }] });
    const { message } = await answered(h);
    const runId = h.agent.store.db.prepare("SELECT id FROM runs").pluck().get() as string;
    const click = {
      userId: "U1",
      channel: CHANNEL,
      messageTs: message.ts,
      actionId: "glassbox_feedback",
      value: `down:${runId}`,
    };
    await h.fake.sendBlockAction(h.slack.eventsUrl as string, click);
    await h.fake.waitForCall("views.open", () => true, CALL_WAIT);
    const triggerId = String(h.fake.callsTo("views.open")[0]?.args.trigger_id);
    expect((await h.fake.sendBlockAction(h.slack.eventsUrl as string, { ...click, triggerId })).status).toBe(200);
    // A later, distinct click shows the first one's redelivery was passed over, not still in flight.
    await h.fake.sendBlockAction(h.slack.eventsUrl as string, { ...click, value: `up:${runId}` });
    await expect.poll(() => createFeedbackBook(h.agent.store).ofRun(runId)[0]?.rating).toBe("up");
    expect(h.fake.callsTo("views.open")).toHaveLength(1);
  });

  it("a click from another channel rates nothing and says so; an unknown run is not rated", async () => {
    const h = await startHarness({ script: [{ content: "The answer is 42." }] });
    const { message } = await answered(h);
    const runId = h.agent.store.db.prepare("SELECT id FROM runs").pluck().get() as string;
    const url = h.slack.eventsUrl as string;
    await h.fake.sendBlockAction(url, {
      userId: "U3",
      channel: "C2",
      messageTs: message.ts,
      actionId: "glassbox_feedback",
      value: `up:${runId}`,
    });
    const note = await h.fake.waitForCall("chat.postEphemeral", (c) => c.args.user === "U3", CALL_WAIT);
    expect(String(note.args.text)).toMatch(/rate it in the conversation where I gave it/);
    await h.fake.sendBlockAction(url, {
      userId: "U3",
      channel: CHANNEL,
      messageTs: message.ts,
      actionId: "glassbox_feedback",
      value: "down:run_nonexistent",
    });
    await h.fake.waitForCall(
      "chat.postEphemeral",
      (c) => c.args.user === "U3" && c.args.channel === CHANNEL,
      CALL_WAIT,
    );
    expect(h.agent.store.db.prepare("SELECT count(*) FROM feedback").pluck().get()).toBe(0);
    expect(h.fake.views).toEqual([]);
  });

  it("where Slack refuses the feedback buttons element, answers carry plain 👍 / 👎 buttons that work the same", async () => {
    const h = await startHarness({
      script: [{ content: "The answer is 42." }],
      fake: { unsupportedBlocks: ["context_actions"] },
    });
    const { message } = await answered(h);
    expect(feedbackElement(message)).toBeUndefined();
    const buttons = blocksOf(message)
      .filter((block) => block.type === "actions")
      .flatMap((block) => block.elements ?? []);
    const runId = h.agent.store.db.prepare("SELECT id FROM runs").pluck().get() as string;
    expect(buttons.map((button) => [button.action_id, button.value])).toEqual([
      ["glassbox_feedback_up", `up:${runId}`],
      ["glassbox_feedback_down", `down:${runId}`],
    ]);
    expect(message.text).toContain("The answer is 42.");
    await h.fake.sendBlockAction(h.slack.eventsUrl as string, {
      userId: "U1",
      channel: CHANNEL,
      messageTs: message.ts,
      actionId: "glassbox_feedback_down",
      value: `down:${runId}`,
    });
    await h.fake.waitForCall("views.open", () => true, CALL_WAIT);
    expect(
      createFeedbackBook(h.agent.store)
        .ofRun(runId)
        .map((one) => one.rating),
    ).toEqual(["down"]);
  });
});
