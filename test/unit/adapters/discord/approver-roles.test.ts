// Approvers named by role on Discord, end to end: the real discord.js client against the fake Discord,
// whose guild has an "Approvers" role (sent in GUILD_CREATE, and as each member's role ids with an
// interaction, as Discord does), the demo shop's cancel_order over its SQLite file, a channel whose
// settings name the role as its approvers. The card names the role without pinging it; someone
// without the role is refused, told who could; a member of the role approves, and the call runs.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  APPROVER,
  CANCELLABLE_ORDER,
  cancelScript,
  CHANNEL,
  cleanUp,
  click,
  GUILD,
  interactionReplies,
  orderStatus,
  OTHER_CHANNEL,
  OTHER_USER,
  REQUEST_WAIT,
  startHarness,
  USER,
  waitForApproval,
  waitForBotMessage,
} from "../../../helpers/discord.js";

afterEach(cleanUp);

const ROLE = "1300000000000000400";
const SECOND_APPROVER = "1300000000000000303";

function settingsFile(lines: string[]): string {
  const file = join(mkdtempSync(join(tmpdir(), "glassbox-roles-")), "channels.yaml");
  writeFileSync(file, ["channels:", `  "${CHANNEL}":`, ...lines.map((line) => `    ${line}`), ""].join("\n"));
  return file;
}

const guildWithRole = {
  guilds: [
    {
      id: GUILD,
      name: "Test Guild",
      channels: [
        { id: CHANNEL, name: "general" },
        { id: OTHER_CHANNEL, name: "random" },
      ],
      roles: [{ id: ROLE, name: "Approvers", members: [APPROVER, SECOND_APPROVER] }],
    },
  ],
};

describe("approvers named by a Discord role", () => {
  it("refuses a person without the role, saying who could, and lets a member of the role approve", async () => {
    const settings = settingsFile([`approvers: ["role:${ROLE}"]`, "requesterMayApprove: false"]);
    const h = await startHarness({ script: cancelScript(), env: { GLASSBOX_CHANNELS: settings }, fake: guildWithRole });
    await h.mention(`please cancel order ${CANCELLABLE_ORDER}, I ordered it twice`);
    const approval = await waitForApproval(h.fake, CHANNEL);
    expect(approval.message.content).toContain(`Only an approver other than <@${USER}> can decide: <@&${ROLE}>`);
    const card = h.fake.messageWrites.find((write) => write.messageId === approval.message.id);
    expect(card?.pings.roles).toEqual([]);

    for (const outsider of [USER, OTHER_USER]) {
      const clicked = await click(h.fake, approval, outsider);
      await h.fake.waitForRequest("POST", /^\/webhooks\//, (r) => r.path.includes(clicked.token), REQUEST_WAIT);
      expect(interactionReplies(h.fake, clicked.interactionId)[1]?.content).toBe(
        `This needs someone other than <@${USER}> to approve it: <@&${ROLE}>.`,
      );
    }
    await h.discord.idle();
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("paid");

    await click(h.fake, approval, APPROVER);
    await waitForBotMessage(h.fake, CHANNEL, "order 20240410003 is cancelled");
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("cancelled");
  });

  it("counts two members of one role as two people under the two-person rule", async () => {
    const settings = settingsFile([
      `approvers: ["role:${ROLE}"]`,
      "requesterMayApprove: false",
      "twoPersonRule: [cancel_order]",
    ]);
    const h = await startHarness({ script: cancelScript(), env: { GLASSBOX_CHANNELS: settings }, fake: guildWithRole });
    await h.mention(`please cancel order ${CANCELLABLE_ORDER}, I ordered it twice`);
    const approval = await waitForApproval(h.fake, CHANNEL);

    await click(h.fake, approval, APPROVER);
    await expect
      .poll(() => h.fake.messages(CHANNEL).find((m) => m.id === approval.message.id)?.content, { timeout: 15_000 })
      .toContain(`1 of 2 so far, by <@${APPROVER}>`);
    const again = await click(h.fake, approval, APPROVER);
    await h.fake.waitForRequest("POST", /^\/webhooks\//, (r) => r.path.includes(again.token), REQUEST_WAIT);
    expect(interactionReplies(h.fake, again.interactionId)[1]?.content).toBe(
      "You approved this already; it needs one more approval, from someone else.",
    );
    await h.discord.idle();
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("paid");

    await click(h.fake, approval, SECOND_APPROVER);
    await waitForBotMessage(h.fake, CHANNEL, "order 20240410003 is cancelled");
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("cancelled");
  });
});
