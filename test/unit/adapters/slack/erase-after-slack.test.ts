// Erasure after a real conversation: the Slack app against the fake Slack, the agent as `npm start`
// builds it over its SQLite file, daily caps on. A person asks, confirms a note for the channel on
// its card, gets an answer and rates it; another person talks in another channel. Erasing the first
// person leaves neither their words nor their id in any byte of the file or its log, and the other
// person's conversation as it was.
import { existsSync, readFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import type { ChatCompletionRequestBody } from "../../../../src/testing/scripted-model-server.js";
import { textOf } from "../../../helpers/agent.js";
import {
  BOT,
  CHANNEL,
  cleanUp,
  startHarness,
  toolCall,
  waitForApproval,
  waitForBotMessage,
} from "../../../helpers/slack.js";

afterEach(cleanUp);

const ANN = "U0ANNWIPE";
const BOB = "U0BOBSTAYS";
const ANN_WORD = "ZEPHYRQUOKKA";
const BOB_WORD = "MARMALADEOTTER";

/** The model: a note for the channel when asked to remember, then a short answer naming what it heard. */
function script(request: ChatCompletionRequestBody) {
  const last = request.messages.at(-1);
  if (last?.role === "tool") return { content: `Noted about ${ANN_WORD}.` };
  const asked = textOf(request.messages.findLast((message) => message.role === "user"));
  if (asked.includes("remember"))
    return {
      toolCalls: [
        toolCall("remember", { fact: `${ANN_WORD} takes oolong tea`, shared_with_channel: true }, "call_note"),
      ],
    };
  return { content: asked.includes(BOB_WORD) ? `Hello about ${BOB_WORD}.` : "Hello." };
}

const fileText = (path: string) =>
  [path, `${path}-wal`]
    .filter((file) => existsSync(file))
    .map((file) => readFileSync(file).toString("latin1"))
    .join("\n");

describe("erasing a person after a Slack conversation", () => {
  it("removes their words and id from every byte of the SQLite file, and keeps another person's conversation", async () => {
    const h = await startHarness({ script, env: { GLASSBOX_USER_DAILY_TOKENS: "1000000" } });
    const { ts } = await h.mention(`<@${BOT}> please remember that ${ANN_WORD} takes oolong tea`, { user: ANN });
    const card = await waitForApproval(h.fake, CHANNEL, ts);
    await h.click(card, ANN);
    const answer = await waitForBotMessage(h.fake, CHANNEL, ts, `Noted about ${ANN_WORD}.`);
    await h.slack.conversations.idle();
    const runId = h.agent.store.db.prepare("SELECT id FROM runs WHERE user_id = ?").pluck().get(ANN) as string;
    await h.fake.sendBlockAction(h.slack.eventsUrl as string, {
      userId: ANN,
      channel: CHANNEL,
      messageTs: answer.ts,
      actionId: "glassbox_feedback",
      value: `up:${runId}`,
    });
    const { ts: bobTs } = await h.mention(`<@${BOT}> tell me about ${BOB_WORD}`, { user: BOB, channel: "C2" });
    await waitForBotMessage(h.fake, "C2", bobTs, `Hello about ${BOB_WORD}.`);
    await h.slack.conversations.idle();
    await expect.poll(() => h.agent.store.db.prepare("SELECT count(*) FROM feedback").pluck().get()).toBe(1);

    // Everything a run leaves is there before the erasure.
    const counts = (table: string) => h.agent.store.db.prepare(`SELECT count(*) FROM ${table}`).pluck().get() as number;
    for (const table of ["runs", "messages", "steps", "step_messages", "approvals", "facts", "feedback", "quota_days"])
      expect(counts(table), table).toBeGreaterThan(0);
    expect(fileText(h.paths.db)).toContain(ANN_WORD);

    const receipt = await h.agent.port.erase({ kind: "user", id: ANN }, "test");
    expect(receipt.removed).toMatchObject({ runs: 1, approvals: 1, facts: 1, feedback: 1 });

    const left = fileText(h.paths.db);
    expect(left).not.toContain(ANN_WORD);
    expect(left).not.toContain(ANN);
    expect(left).toContain(BOB_WORD);
    expect(left).toContain(BOB);
    expect(h.agent.store.db.prepare("SELECT user_id FROM runs").pluck().all()).toEqual([BOB]);
  });
});
