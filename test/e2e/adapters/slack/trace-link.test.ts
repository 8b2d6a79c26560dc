// From a Slack answer to its trace, end to end: the one pipeline against the fake Slack, whose
// blocks follow Block Kit's rules (a context_actions block takes only feedback and icon buttons).
// With GLASSBOX_PUBLIC_URL every answer carries a "Trace" URL button naming the run that gave it,
// in a short answer, a streamed one, and beside plain 👍 / 👎 where Slack refuses its feedback
// buttons; a click on it is acknowledged. Without the setting there is no such button.
import { afterEach, describe, expect, it } from "vitest";
import type { FakeMessage } from "../../../../src/testing/fake-slack.js";
import {
  BOT,
  CHANNEL,
  cleanUp,
  startHarness,
  waitForBotMessage,
  type Harness,
  type HarnessOptions,
} from "../../../helpers/slack.js";

afterEach(cleanUp);

const PUBLIC_URL = "https://glassbox.example.com/bot";

interface Element {
  type?: string;
  action_id?: string;
  url?: string;
}
interface Block {
  type?: string;
  elements?: Element[];
}

/** Every element of the message's blocks, each with the type of the block it sits in. */
const elementsOf = (message: FakeMessage) =>
  ((message.blocks ?? []) as Block[]).flatMap((block) =>
    (block.elements ?? []).map((element) => ({ block: block.type, ...element })),
  );
const traceButtons = (message: FakeMessage) =>
  elementsOf(message).filter((element) => element.action_id === "glassbox_trace");

/** The run whose output is `answer`, as the store recorded it. */
function runThatAnswered(h: Harness, answer: string): { id: string; session_id: string } {
  return h.agent.store.db.prepare("SELECT id, session_id FROM runs WHERE output = ?").get(answer) as {
    id: string;
    session_id: string;
  };
}

const expectedUrl = (run: { id: string; session_id: string }) =>
  `${PUBLIC_URL}/trace#session=${encodeURIComponent(run.session_id)}&run=${encodeURIComponent(run.id)}`;

async function ask(h: Harness, question: string, answer: string) {
  const { ts } = await h.mention(`<@${BOT}> ${question}`);
  await waitForBotMessage(h.fake, CHANNEL, ts, answer.slice(-12));
  await h.slack.conversations.idle();
  // The message as it is now: a streamed answer gets its buttons when the stream stops.
  const message = h.fake.messages(CHANNEL, ts).find((m) => (m.text ?? "").includes(answer.slice(-12)));
  return { threadTs: ts, message: message as FakeMessage };
}

const withLink = (options: HarnessOptions = {}) =>
  startHarness({ ...options, env: { GLASSBOX_PUBLIC_URL: `${PUBLIC_URL}/`, ...options.env } });

describe("Slack answers link to their trace", () => {
  it("each answer's Trace button opens the run that gave it, and its click is acknowledged", async () => {
    const h = await withLink({ script: [{ content: "The first answer." }, { content: "The second answer." }] });
    const first = await ask(h, "first question", "The first answer.");
    const second = await ask(h, "second question", "The second answer.");

    for (const [asked, answer] of [
      [first, "The first answer."],
      [second, "The second answer."],
    ] as const) {
      const run = runThatAnswered(h, answer);
      expect(run.session_id).toBe(`slack:T0FAKE0001:${CHANNEL}:${asked.threadTs}`);
      expect(traceButtons(asked.message)).toEqual([
        expect.objectContaining({ block: "actions", type: "button", url: expectedUrl(run) }),
      ]);
      // Slack's own feedback buttons stay in their context_actions block.
      expect(elementsOf(asked.message).find((element) => element.type === "feedback_buttons")?.block).toBe(
        "context_actions",
      );
    }

    // Slack sends the click of a URL button too: unacknowledged, Bolt would answer 404 after 3 s.
    const click = await h.fake.sendBlockAction(h.slack.eventsUrl as string, {
      userId: "U1",
      channel: CHANNEL,
      messageTs: first.message.ts,
      actionId: "glassbox_trace",
    });
    expect(click.status).toBe(200);
    await h.slack.conversations.idle();
    expect(h.agent.store.db.prepare("SELECT count(*) FROM runs").pluck().get()).toBe(2); // a click starts nothing
  });

  it("a streamed answer carries the link when its stream stops", async () => {
    const long = `${Array.from({ length: 60 }, (_, i) => `word${i}`).join(" ")} and that is all.`;
    const h = await withLink({ script: [{ content: long }] });
    await ask(h, "tell me everything", long);
    const stop = h.fake.callsTo("chat.stopStream");
    expect(stop).toHaveLength(1);
    const blocks = (stop[0]?.args.blocks ?? []) as Block[];
    const button = blocks.flatMap((block) => block.elements ?? []).find((e) => e.action_id === "glassbox_trace");
    expect(button?.url).toBe(expectedUrl(runThatAnswered(h, long)));
  });

  it("where Slack refuses its feedback buttons, the link sits beside the plain 👍 / 👎", async () => {
    const h = await withLink({
      script: [{ content: "The answer is 42." }],
      fake: { unsupportedBlocks: ["context_actions"] },
    });
    const { message } = await ask(h, "what is the answer?", "The answer is 42.");
    const actions = ((message.blocks ?? []) as Block[]).filter((block) => block.type === "actions");
    expect(actions).toHaveLength(1);
    expect(actions[0]?.elements?.map((element) => element.action_id)).toEqual([
      "glassbox_feedback_up",
      "glassbox_feedback_down",
      "glassbox_trace",
    ]);
    expect(traceButtons(message)[0]?.url).toBe(expectedUrl(runThatAnswered(h, "The answer is 42.")));
  });

  it("without GLASSBOX_PUBLIC_URL an answer has no trace button", async () => {
    const h = await startHarness({ script: [{ content: "The answer is 42." }] });
    const { message } = await ask(h, "what is the answer?", "The answer is 42.");
    expect(elementsOf(message).map((element) => element.type)).toEqual(["feedback_buttons"]);
  });
});
