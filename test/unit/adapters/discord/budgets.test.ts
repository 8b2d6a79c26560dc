// Budgets from the channel settings on Discord, through the real discord.js pipeline against the fake
// Discord and the scripted model: an answer past 80 % of the guild's daily budget is followed by a
// note, once; a run that reaches it stops with what it had so far; the next message is refused
// without a model call, in every channel of the guild.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { budgetScript as script } from "../../../helpers/budget-script.js";
import { CHANNEL, cleanUp, GUILD, OTHER_CHANNEL, startHarness, waitForBotMessage } from "../../../helpers/discord.js";

afterEach(cleanUp);

function settingsFile(): string {
  const file = join(mkdtempSync(join(tmpdir(), "glassbox-discord-budgets-")), "channels.yaml");
  writeFileSync(
    file,
    ["workspaces:", `  "${GUILD}":`, "    budget:", "      workspace: { daily: { tokens: 1000 } }", ""].join("\n"),
  );
  return file;
}

describe("channel budgets on Discord", () => {
  it("notes 80 % once, stops a run at the guild's budget with what it had, then refuses in every channel", async () => {
    const h = await startHarness({ script, env: { GLASSBOX_CHANNELS: settingsFile() } });

    await h.mention("first", { channelId: CHANNEL });
    await waitForBotMessage(h.fake, CHANNEL, "First answer.");
    const note = await waitForBotMessage(h.fake, CHANNEL, "Note:");
    expect(note.content).toBe("Note: this workspace has used 85% of its daily budget (850 tokens of 1,000 tokens).");

    await h.mention("second", { channelId: OTHER_CHANNEL });
    const stopped = await waitForBotMessage(h.fake, OTHER_CHANNEL, "I stopped:");
    expect(stopped.content).toContain("this workspace has used its daily budget (1,150 tokens of 1,000 tokens)");
    expect(stopped.content).toContain("What I had so far: Let me add that up.");
    expect(stopped.content).not.toContain("Should not be reached.");
    const calls = h.model.requests.length;
    expect(calls).toBe(2);

    await h.mention("first again", { channelId: CHANNEL });
    const refused = await waitForBotMessage(h.fake, CHANNEL, "This workspace has used its daily budget");
    expect(refused.content).toContain("(1,150 tokens of 1,000 tokens)");
    expect(h.model.requests.length).toBe(calls);
  });
});
