// From a Discord answer to its trace, end to end: the one pipeline against the fake Discord, which
// refuses buttons Discord would (a link button needs an http(s) url and no custom_id). With
// GLASSBOX_PUBLIC_URL an answer's last message carries a link button (style 5) beside 👍 / 👎,
// naming the run that gave it; without the setting there is none.
import { afterEach, describe, expect, it } from "vitest";
import {
  buttonsOf,
  CHANNEL,
  cleanUp,
  DM,
  GUILD,
  startHarness,
  waitForBotMessage,
  type Harness,
} from "../../../helpers/discord.js";

afterEach(cleanUp);

const PUBLIC_URL = "http://127.0.0.1:8787";

function runThatAnswered(h: Harness, answer: string): { id: string; session_id: string } {
  return h.agent.store.db.prepare("SELECT id, session_id FROM runs WHERE output = ?").get(answer) as {
    id: string;
    session_id: string;
  };
}

const expectedUrl = (run: { id: string; session_id: string }) =>
  `${PUBLIC_URL}/trace#session=${encodeURIComponent(run.session_id)}&run=${encodeURIComponent(run.id)}`;

describe("Discord answers link to their trace", () => {
  it("each answer's last message links to the run that gave it, in a channel and in a DM", async () => {
    const long = `${"A line of the long answer.\n".repeat(90)}The end of the long answer.`;
    const h = await startHarness({
      script: [{ content: long }, { content: "The DM answer." }],
      env: { GLASSBOX_PUBLIC_URL: PUBLIC_URL },
    });
    await h.mention("tell me everything");
    await waitForBotMessage(h.fake, CHANNEL, "The end of the long answer.");
    await h.discord.idle();
    await h.dm("and you?");
    await waitForBotMessage(h.fake, DM, "The DM answer.");
    await h.discord.idle();

    const channelRun = runThatAnswered(h, long);
    expect(channelRun.session_id).toBe(`discord:${GUILD}:${CHANNEL}`);
    const parts = h.fake.messages(CHANNEL).filter((m) => m.author.id === h.fake.botUserId);
    expect(parts.length).toBeGreaterThan(1); // split at Discord's 2,000 characters
    // Only the last part carries the buttons: 👍, 👎 and the link.
    expect(parts.slice(0, -1).flatMap((part) => buttonsOf(part))).toEqual([]);
    expect(buttonsOf(parts.at(-1))).toEqual([
      expect.objectContaining({ custom_id: `glassbox:feedback:up:${channelRun.id}` }),
      expect.objectContaining({ custom_id: `glassbox:feedback:down:${channelRun.id}` }),
      { type: 2, style: 5, label: "Trace", url: expectedUrl(channelRun) },
    ]);

    const dmRun = runThatAnswered(h, "The DM answer.");
    expect(dmRun.session_id).toBe(`discord:dm:${DM}`);
    const dmAnswer = h.fake.messages(DM).find((m) => m.content === "The DM answer.");
    expect(buttonsOf(dmAnswer).find((button) => button.style === 5)).toMatchObject({ url: expectedUrl(dmRun) });
  });

  it("without GLASSBOX_PUBLIC_URL an answer has 👍 / 👎 alone", async () => {
    const h = await startHarness({ script: [{ content: "The answer is 42." }] });
    await h.mention("what is the answer?");
    const answer = await waitForBotMessage(h.fake, CHANNEL, "The answer is 42.");
    expect(buttonsOf(answer).map((button) => button.style)).toEqual([2, 2]);
  });
});
