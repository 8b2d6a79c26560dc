// Which remembered notes a channel's runs are shown (the channel settings' `notes`), through the real
// Slack pipeline: by default the person's own and the channel's shared ones, `mine` the person's
// alone, `none` no notes at all.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { BOT, cleanUp, startHarness, waitForBotMessage } from "../../../helpers/slack.js";

afterEach(cleanUp);

function settingsFile(): string {
  const file = join(mkdtempSync(join(tmpdir(), "glassbox-notes-")), "channels.yaml");
  writeFileSync(file, ["channels:", "  C0MINE:", "    notes: mine", "  C0NONE:", "    notes: none", ""].join("\n"));
  return file;
}

describe("the notes a channel's runs are shown", () => {
  it("the person's and the channel's by default; the person's alone with mine; none with none", async () => {
    const h = await startHarness({ script: () => ({ content: "Noted." }), env: { GLASSBOX_CHANNELS: settingsFile() } });
    await h.agent.port.addFact("U1", "user", "U1 drinks green tea on Fridays.");
    for (const channel of ["C0OPEN", "C0MINE", "C0NONE"])
      await h.agent.port.addFact("U2", `slack:T0FAKE0001:${channel}`, `In ${channel} deploys freeze on Fridays.`);

    const sent = async (channel: string) => {
      const before = h.model.requests.length;
      const { ts } = await h.mention(`<@${BOT}> what about Fridays and tea?`, { channel });
      await waitForBotMessage(h.fake, channel, ts, "Noted.");
      return JSON.stringify(h.model.requests[before]?.body.messages);
    };
    const open = await sent("C0OPEN");
    expect(open).toContain("U1 drinks green tea on Fridays.");
    expect(open).toContain("In C0OPEN deploys freeze on Fridays.");
    const mine = await sent("C0MINE");
    expect(mine).toContain("U1 drinks green tea on Fridays.");
    expect(mine).not.toContain("deploys freeze");
    const none = await sent("C0NONE");
    expect(none).not.toContain("green tea");
    expect(none).not.toContain("deploys freeze");
  });

  it('"what can you do here?" says which notes it is shown there, and how long it keeps what it remembers', async () => {
    const h = await startHarness({
      script: () => ({ content: "Noted." }),
      env: { GLASSBOX_CHANNELS: settingsFile(), GLASSBOX_RETENTION_DAYS: "30" },
    });
    const asked = async (channel: string) => {
      const { ts } = await h.mention(`<@${BOT}> what can you do here?`, { channel });
      return (await waitForBotMessage(h.fake, channel, ts, "Here is what I can do")).text ?? "";
    };
    const open = await asked("C0OPEN");
    expect(open).toContain(
      "I remember this conversation, summarising its oldest parts, for 30 days after its last message, then deleted;",
    );
    expect(open).toContain("your notes and those shared with this channel are shown to me here");
    expect(await asked("C0MINE")).toContain("only your own notes are shown to me here");
    expect(await asked("C0NONE")).toContain("no remembered notes are shown to me here");
    expect(h.model.requests).toHaveLength(0);
  });
});
