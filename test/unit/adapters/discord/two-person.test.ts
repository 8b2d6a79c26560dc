// The two-person rule on Discord, end to end: the real discord.js client against the fake Discord,
// the demo shop's cancel_order over its SQLite file, a channel whose settings say a cancellation needs
// two approvers other than the person who asked. The first approval is counted on the card, which
// keeps its buttons; the same person again is told so; the second person's approval runs the call.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MessageFlags } from "discord.js";
import { afterEach, describe, expect, it } from "vitest";
import {
  APPROVER,
  buttonsOf,
  CANCELLABLE_ORDER,
  cancelScript,
  CHANNEL,
  cleanUp,
  click,
  interactionReplies,
  messageById,
  orderStatus,
  OTHER_USER,
  REQUEST_WAIT,
  startHarness,
  USER,
  waitForApproval,
  waitForBotMessage,
} from "../../../helpers/discord.js";

afterEach(cleanUp);

function settingsFile(): string {
  const file = join(mkdtempSync(join(tmpdir(), "glassbox-two-person-")), "channels.yaml");
  writeFileSync(
    file,
    [
      "channels:",
      `  "${CHANNEL}":`,
      `    approvers: ["${USER}", "${OTHER_USER}", "${APPROVER}"]`,
      "    requesterMayApprove: false",
      "    twoPersonRule: [cancel_order]",
      "",
    ].join("\n"),
  );
  return file;
}

describe("the two-person rule on Discord", () => {
  it("counts the first approval on the card, refuses the same person twice, and runs once a second approves", async () => {
    const h = await startHarness({ script: cancelScript(), env: { GLASSBOX_CHANNELS: settingsFile() } });
    await h.mention(`please cancel order ${CANCELLABLE_ORDER}, I ordered it twice`);
    const approval = await waitForApproval(h.fake, CHANNEL);
    expect(approval.message.content).toContain(`Needs 2 approvals from different people, not <@${USER}>`);

    const reply = async (userId: string) => {
      const clicked = await click(h.fake, approval, userId);
      await h.fake.waitForRequest("POST", /^\/webhooks\//, (r) => r.path.includes(clicked.token), REQUEST_WAIT);
      return interactionReplies(h.fake, clicked.interactionId)[1];
    };
    expect((await reply(USER))?.content).toBe(
      `This needs someone other than <@${USER}> to approve it: <@${OTHER_USER}>, <@${APPROVER}>.`,
    );

    await click(h.fake, approval, OTHER_USER);
    await expect
      .poll(() => messageById(h.fake, CHANNEL, approval.message.id)?.content, { timeout: 15_000 })
      .toContain(`1 of 2 so far, by <@${OTHER_USER}>`);
    expect(buttonsOf(messageById(h.fake, CHANNEL, approval.message.id))).toHaveLength(2);
    const again = await reply(OTHER_USER);
    expect(again).toMatchObject({
      content: "You approved this already; it needs one more approval, from someone else.",
      flags: MessageFlags.Ephemeral,
    });
    await h.discord.idle();
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("paid");

    await click(h.fake, approval, APPROVER);
    await waitForBotMessage(h.fake, CHANNEL, "order 20240410003 is cancelled");
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("cancelled");
    await h.discord.idle();
    expect(messageById(h.fake, CHANNEL, approval.message.id)?.content).toContain(
      `Approved by <@${OTHER_USER}> and <@${APPROVER}>`,
    );
    expect(buttonsOf(messageById(h.fake, CHANNEL, approval.message.id))).toHaveLength(0);
  });
});
