// What the erasure tests make a person leave through Slack, on either store: the real Slack app
// (one process on SQLite, or ingress and a worker on PostgreSQL) against the fake Slack and the
// scripted model. Ann asks for a note shared with the channel and confirms it on its card, talks on
// in that thread until memory folds it into a summary, sends a file, rates an answer, approves Bob's
// dangerous call in another channel, and stops a run of hers; each step waits for what Slack shows.
import { expect } from "vitest";
import type { FakeMessage, FakeSlack } from "../../src/testing/fake-slack.js";
import type {
  ChatCompletionRequestBody,
  ScriptedModelServer,
  ScriptedReply,
} from "../../src/testing/scripted-model-server.js";
import { APPROVE, BOT, BOT_ID, buttonsOf, CANCELLABLE_ORDER, TEAM, toolCall, WAIT } from "./slack.js";

export const ANN = "U0ANNWIPE";
export const BOB = "U0BOBSTAYS";
/** Ann's words, in what she says, the file she sends, and what the model answers her. */
export const ANN_WORD = "ZEPHYRQUOKKA";
export const FILE_WORD = "PERSIMMONLEDGER";
export const BOB_WORD = "MARMALADEOTTER";
export const ANN_CHANNEL = "C0ANN";
export const BOB_CHANNEL = "C0BOB";
/** A message that makes the model wait until its run is stopped. */
export const HOLD = "HOLDON";
/** Long enough that a few turns pass a small GLASSBOX_CONTEXT_TOKENS and are folded into a summary. */
const PADDING = Array.from({ length: 120 }, (_, index) => `detail${index}`).join(" ");
/** Turns of Ann's long thread. */
const PARTS = 5;

const textOf = (message: ChatCompletionRequestBody["messages"][number] | undefined): string =>
  typeof message?.content === "string" ? message.content : JSON.stringify(message?.content ?? "");

export const sessionKey = (channel: string, threadTs: string) => `slack:${TEAM}:${channel}:${threadTs}`;

/** The model: a summary that retells whose words it folded, a note when asked, Bob's cancellation, a wait on HOLD. */
export function erasureScript(request: ChatCompletionRequestBody): ScriptedReply {
  const all = request.messages.map(textOf).join("\n");
  if (textOf(request.messages[0]).startsWith("You maintain the running summary"))
    return { content: `Earlier, ${all.includes(ANN_WORD) ? ANN_WORD : BOB_WORD} was discussed at length.` };
  const asked = textOf(request.messages.findLast((message) => message.role === "user"));
  if (request.messages.at(-1)?.role === "tool")
    return { content: asked.includes(BOB_WORD) ? `Cancelled for ${BOB_WORD}.` : `Noted about ${ANN_WORD}.` };
  if (asked.includes(HOLD)) return { hang: true };
  if (asked.includes("please remember"))
    return {
      toolCalls: [
        toolCall("remember", { fact: `${ANN_WORD} takes oolong tea`, shared_with_channel: true }, "call_note"),
      ],
    };
  if (asked.includes("cancel order"))
    return {
      toolCalls: [toolCall("cancel_order", { order_id: CANCELLABLE_ORDER, reason: BOB_WORD }, "call_cancel")],
    };
  const part = /part (\d+)/.exec(asked)?.[1] ?? "0";
  return {
    content: `Part ${part} noted about ${ANN_WORD}${asked.includes(FILE_WORD) ? ` and ${FILE_WORD}` : ""}. ${PADDING}`,
  };
}

/** Where the Slack app receives events, the fake Slack that sends them, and the model behind the app. */
export interface SlackPlace {
  fake: FakeSlack;
  eventsUrl: string;
  model: ScriptedModelServer;
}

/** Waits until the model has been asked something that holds `words` (a run of them is in flight). */
export async function modelAsked(model: ScriptedModelServer, words: string): Promise<void> {
  await expect
    .poll(() => model.requests.some((request) => request.body.messages.map(textOf).join("\n").includes(words)), WAIT)
    .toBe(true);
}

/** People talking to the app through the fake Slack. */
export function slackPeople({ fake, eventsUrl }: SlackPlace) {
  const mention = async (
    user: string,
    channel: string,
    text: string,
    options: { threadTs?: string; files?: Array<Record<string, unknown>> } = {},
  ) => {
    const ts = fake.nextTs();
    const event = {
      type: "app_mention",
      user,
      channel,
      text: `<@${BOT}> ${text}`,
      ts,
      ...(options.threadTs ? { thread_ts: options.threadTs } : {}),
      ...(options.files ? { files: options.files } : {}),
    };
    expect((await fake.sendEvent(eventsUrl, event)).status).toBe(200);
    return ts;
  };
  /** The first bot message of the thread that satisfies `match`. */
  const botMessage = async (channel: string, threadTs: string, match: (message: FakeMessage) => boolean) => {
    let found: FakeMessage | undefined;
    await expect
      .poll(() => {
        found = fake.messages(channel, threadTs).find((message) => message.bot_id === BOT_ID && match(message));
        return found !== undefined;
      }, WAIT)
      .toBe(true);
    return found as FakeMessage;
  };
  const saying = (text: string) => (message: FakeMessage) => (message.text ?? "").includes(text);
  /** Approves the approval card of the thread as `user`. */
  const approve = async (channel: string, threadTs: string, user: string) => {
    const card = await botMessage(channel, threadTs, (message) =>
      buttonsOf(message).some((button) => button.action_id === APPROVE),
    );
    const id = buttonsOf(card).find((button) => button.action_id === APPROVE)?.value ?? "";
    const clicked = await fake.sendBlockAction(eventsUrl, {
      userId: user,
      channel,
      messageTs: card.ts,
      actionId: APPROVE,
      value: id,
    });
    expect(clicked.status).toBe(200);
  };
  return { mention, botMessage, saying, approve };
}

/**
 * Everything Ann leaves through the pipeline but what waits in the queue (the caller adds that), and
 * a conversation of Bob's with a call Ann approved. Resolves with the conversations of each.
 */
export async function annLeavesEverything(place: SlackPlace) {
  const { fake, eventsUrl } = place;
  const people = slackPeople(place);
  // A note shared with the channel, confirmed on its card.
  const noteTs = await people.mention(ANN, ANN_CHANNEL, `please remember that ${ANN_WORD} takes oolong tea`);
  await people.approve(ANN_CHANNEL, noteTs, ANN);
  await people.botMessage(ANN_CHANNEL, noteTs, people.saying(`Noted about ${ANN_WORD}.`));
  // The thread goes on until memory folds its start into a summary; one turn carries a file.
  for (let part = 1; part <= PARTS; part++) {
    const files =
      part === 2
        ? [fake.files.add({ name: "ledger.txt", mimetype: "text/plain", data: Buffer.from(`${FILE_WORD} owes 42`) })]
        : undefined;
    await people.mention(ANN, ANN_CHANNEL, `tell me more about ${ANN_WORD}, part ${part}: ${PADDING}`, {
      threadTs: noteTs,
      files,
    });
    await people.botMessage(ANN_CHANNEL, noteTs, people.saying(`Part ${part} noted`));
  }
  // Ann rates the last answer (its feedback buttons name its run).
  const answer = await people.botMessage(ANN_CHANNEL, noteTs, (message) =>
    (message.blocks ?? []).some((block) =>
      String((block as { block_id?: string }).block_id).startsWith("glassbox_feedback:"),
    ),
  );
  const feedbackBlock = (answer.blocks ?? [])
    .map((block) => String((block as { block_id?: string }).block_id))
    .find((id) => id.startsWith("glassbox_feedback:")) as string;
  const rated = await fake.sendBlockAction(eventsUrl, {
    userId: ANN,
    channel: ANN_CHANNEL,
    messageTs: answer.ts,
    actionId: "glassbox_feedback",
    value: `up:${feedbackBlock.slice("glassbox_feedback:".length)}`,
  });
  expect(rated.status).toBe(200);
  // Bob's dangerous call, approved by Ann (one of SLACK_APPROVERS).
  const bobTs = await people.mention(BOB, BOB_CHANNEL, `please cancel order ${CANCELLABLE_ORDER}, ${BOB_WORD}`);
  await people.approve(BOB_CHANNEL, bobTs, ANN);
  await people.botMessage(BOB_CHANNEL, bobTs, people.saying(`Cancelled for ${BOB_WORD}.`));
  // A run of Ann's that she stops while the model is still thinking.
  const stoppedTs = await people.mention(ANN, ANN_CHANNEL, `${HOLD} ${ANN_WORD}, think hard`);
  await modelAsked(place.model, `${HOLD} ${ANN_WORD}, think hard`);
  await people.mention(ANN, ANN_CHANNEL, "stop", { threadTs: stoppedTs });
  await people.botMessage(ANN_CHANNEL, stoppedTs, people.saying("Stopped."));
  return {
    ann: [sessionKey(ANN_CHANNEL, noteTs), sessionKey(ANN_CHANNEL, stoppedTs)],
    bob: sessionKey(BOB_CHANNEL, bobTs),
    bobTs,
  };
}
