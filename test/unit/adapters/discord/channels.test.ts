// Per-channel settings on Discord, through the real discord.js pipeline against the fake Discord:
// the same file's channels (by Discord channel id) give one channel the order tool and another none,
// and "what can you do here?" says so in each.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { ChatCompletionRequestBody } from "../../../../src/testing/scripted-model-server.js";
import { CHANNEL, cleanUp, OTHER_CHANNEL, startHarness, waitForBotMessage } from "../../../helpers/discord.js";

afterEach(cleanUp);

function settingsFile(): string {
  const file = join(mkdtempSync(join(tmpdir(), "glassbox-channels-")), "channels.yaml");
  writeFileSync(
    file,
    [
      "defaults:",
      "  tools: [current_time]",
      "channels:",
      `  "${CHANNEL}":`,
      "    tools: [current_time, get_order_status]",
      `  "${OTHER_CHANNEL}":`,
      "    tools: []",
      "",
    ].join("\n"),
  );
  return file;
}

/** Looks the order up when it may, then answers with what the tool said. */
function lookUpThenAnswer(body: ChatCompletionRequestBody) {
  const last = body.messages.at(-1);
  if (last?.role === "tool") return { content: `tool said: ${String(last.content).slice(0, 200)}` };
  return { toolCalls: [{ name: "get_order_status", arguments: JSON.stringify({ order_id: "20240410003" }) }] };
}

describe("per-channel settings on Discord", () => {
  it("one channel may look an order up, the other has no tools, and each says what it can do", async () => {
    const h = await startHarness({ script: lookUpThenAnswer, env: { GLASSBOX_CHANNELS: settingsFile() } });

    await h.mention("where is order 20240410003?", { channelId: CHANNEL });
    expect((await waitForBotMessage(h.fake, CHANNEL, "tool said:")).content).toContain('"status":"success"');
    await h.mention("where is order 20240410003?", { channelId: OTHER_CHANNEL });
    expect((await waitForBotMessage(h.fake, OTHER_CHANNEL, "tool said:")).content).toContain("tool_not_found");

    const calls = h.model.requests.length;
    await h.mention("what can you do here?", { channelId: CHANNEL });
    const here = await waitForBotMessage(h.fake, CHANNEL, "Here is what I can do");
    expect(here.content).toMatch(
      /Tools I use on my own: (current_time, get_order_status|get_order_status, current_time)\./,
    );
    await h.mention("what can you do here?", { channelId: OTHER_CHANNEL });
    const there = await waitForBotMessage(h.fake, OTHER_CHANNEL, "Here is what I can do");
    expect(there.content).toContain("I have no tools in this channel");
    expect(h.model.requests.length).toBe(calls);
  });
});
