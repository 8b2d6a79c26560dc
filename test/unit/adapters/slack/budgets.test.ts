// Budgets from the channel settings, through the real Slack pipeline (Bolt against the fake Slack,
// the scripted model, SQLite): an answer past 80 % of the channel's daily budget carries a note, once;
// a run that reaches the budget stops there with what it had so far and says why; the next message
// is refused without a model call; another channel, with no budget, goes on.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { budgetScript as script } from "../../../helpers/budget-script.js";
import { BOT, botTexts, cleanUp, startHarness, waitForBotMessage } from "../../../helpers/slack.js";

afterEach(cleanUp);

function settingsFile(): string {
  const file = join(mkdtempSync(join(tmpdir(), "glassbox-budgets-")), "channels.yaml");
  writeFileSync(
    file,
    ["channels:", "  C0BUDGET:", "    budget:", "      channel: { daily: { tokens: 1000 } }", ""].join("\n"),
  );
  return file;
}

describe("channel budgets on Slack", () => {
  it("notes 80 % once, stops a run at 100 % with what it had, then refuses before any model call", async () => {
    const h = await startHarness({ script, env: { GLASSBOX_CHANNELS: settingsFile() } });

    const first = await h.mention(`<@${BOT}> first`, { channel: "C0BUDGET" });
    await waitForBotMessage(h.fake, "C0BUDGET", first.ts, "First answer.");
    const note = await waitForBotMessage(h.fake, "C0BUDGET", first.ts, "Note:");
    expect(note.text).toBe("Note: this channel has used 85% of its daily budget (850 tokens of 1,000 tokens).");

    const second = await h.mention(`<@${BOT}> second`, { channel: "C0BUDGET" });
    const stopped = await waitForBotMessage(h.fake, "C0BUDGET", second.ts, "I stopped:");
    expect(stopped.text).toContain("this channel has used its daily budget (1,150 tokens of 1,000 tokens)");
    expect(stopped.text).toContain("it starts again at 00:00 UTC");
    expect(stopped.text).toContain("What I had so far: Let me add that up.");
    expect(stopped.text).not.toContain("Should not be reached.");
    expect(botTexts(h.fake, "C0BUDGET", second.ts).some((text) => text.startsWith("Note:"))).toBe(false);
    const calls = h.model.requests.length;
    expect(calls).toBe(2);

    const third = await h.mention(`<@${BOT}> first`, { channel: "C0BUDGET" });
    const refused = await waitForBotMessage(h.fake, "C0BUDGET", third.ts, "This channel has used its daily budget");
    expect(refused.text).toContain("(1,150 tokens of 1,000 tokens)");
    expect(h.model.requests.length).toBe(calls);

    // Another channel has no budget: it answers, and carries no note.
    const elsewhere = await h.mention(`<@${BOT}> first`, { channel: "C0OTHER" });
    await waitForBotMessage(h.fake, "C0OTHER", elsewhere.ts, "First answer.");
    await h.slack.conversations.idle();
    expect(botTexts(h.fake, "C0OTHER", elsewhere.ts).some((text) => text.startsWith("Note:"))).toBe(false);

    // "What can you do here?" says what is left of the channel's budget.
    const asked = await h.mention(`<@${BOT}> what can you do here?`, { channel: "C0BUDGET", user: "U2" });
    const here = await waitForBotMessage(h.fake, "C0BUDGET", asked.ts, "Here is what I can do");
    expect(here.text).toContain("Left of this channel's daily budget: 0 tokens of 1,000 tokens.");
  });
});
