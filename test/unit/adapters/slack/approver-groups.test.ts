// Approvers named by Slack user group, end to end: Bolt against the fake Slack, whose workspace has a
// user group that usergroups.users.list answers for (as Slack does, with the bot's token), the demo
// shop's cancel_order over its SQLite file, a channel whose settings name the group as approvers.
// The card and a refused click name the group as Slack mentions one; a member of the group approves
// and the call runs; a lookup Slack refuses counts as "not a member" and is logged.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  CALL_WAIT,
  CANCELLABLE_ORDER,
  cancelScript,
  CHANNEL,
  cleanUp,
  orderStatus,
  startHarness,
  visibleText,
  waitForApproval,
  waitForBotMessage,
} from "../../../helpers/slack.js";

afterEach(cleanUp);

const GROUP = "S0APPROVERS";

function settingsFile(lines: string[]): string {
  const file = join(mkdtempSync(join(tmpdir(), "glassbox-groups-")), "channels.yaml");
  writeFileSync(file, ["channels:", `  ${CHANNEL}:`, ...lines.map((line) => `    ${line}`), ""].join("\n"));
  return file;
}

const groupOnly = () => settingsFile([`approvers: ["group:${GROUP}"]`, "requesterMayApprove: false"]);

async function askToCancel(h: Awaited<ReturnType<typeof startHarness>>) {
  const { ts } = await h.mention(`<@U0FAKEBOT1> please cancel order ${CANCELLABLE_ORDER}`, { user: "U1" });
  return waitForApproval(h.fake, CHANNEL, ts);
}

describe("approvers named by a Slack user group", () => {
  it("refuses someone outside the group, naming the group, and lets a member approve", async () => {
    const h = await startHarness({
      script: cancelScript(),
      env: { GLASSBOX_CHANNELS: groupOnly() },
      fake: { userGroups: { [GROUP]: ["U3", "U4"] } },
    });
    const card = await askToCancel(h);
    expect(visibleText(card.message)).toContain(`Only an approver other than <@U1> can decide: <!subteam^${GROUP}>`);

    await h.click(card, "U2");
    const note = await h.fake.waitForCall("chat.postEphemeral", (c) => c.args.user === "U2", CALL_WAIT);
    expect(note.args.text).toBe(`This needs someone other than <@U1> to approve it: <!subteam^${GROUP}>.`);
    // The lookup was made with the bot's own token, for the group the settings name.
    expect(h.fake.callsTo("usergroups.users.list").map((c) => [c.args.usergroup, c.token])).toEqual([
      [GROUP, "xoxb-fake-bot-token"],
    ]);
    await h.slack.conversations.idle();
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("paid");

    await h.click(card, "U3");
    await waitForBotMessage(h.fake, CHANNEL, undefined, "order 20240410003 is cancelled");
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("cancelled");
    // The group's members were kept from the first click.
    expect(h.fake.callsTo("usergroups.users.list")).toHaveLength(1);
  });

  it("counts a group's members as the people they are under the two-person rule", async () => {
    const settings = settingsFile([
      `approvers: ["group:${GROUP}", "group:S0OTHERS"]`,
      "requesterMayApprove: false",
      "twoPersonRule: [cancel_order]",
    ]);
    const h = await startHarness({
      script: cancelScript(),
      env: { GLASSBOX_CHANNELS: settings },
      // U3 is in both groups: still one person.
      fake: { userGroups: { [GROUP]: ["U3", "U4"], S0OTHERS: ["U3"] } },
    });
    const card = await askToCancel(h);
    await h.click(card, "U3");
    await h.click(card, "U3");
    const note = await h.fake.waitForCall("chat.postEphemeral", (c) => c.args.user === "U3", CALL_WAIT);
    expect(note.args.text).toBe("You approved this already; it needs one more approval, from someone else.");
    await h.slack.conversations.idle();
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("paid");

    await h.click(card, "U4");
    await waitForBotMessage(h.fake, CHANNEL, undefined, "order 20240410003 is cancelled");
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("cancelled");
  });

  it('"What can you do here?" names the group in words, and leaves a Discord role out on Slack', async () => {
    const settings = settingsFile([
      `approvers: ["group:${GROUP}", "role:1300000000000000400", U9]`,
      "requesterMayApprove: false",
    ]);
    const h = await startHarness({ env: { GLASSBOX_CHANNELS: settings, GLASSBOX_DEMO: "true" } });
    const { ts } = await h.mention("<@U0FAKEBOT1> what can you do here?", { user: "U1" });
    const answer = await waitForBotMessage(h.fake, CHANNEL, ts, "Here is what I can do here");
    expect(answer.text).toContain(
      `cancel_order asks first: the members of the Slack user group ${GROUP}, U9 decide, not you.`,
    );
    expect(answer.text).not.toContain("1300000000000000400");
    expect(h.model.requests).toHaveLength(0);
  });

  it("takes a lookup Slack refuses as not a member: the click is refused and the refusal logged", async () => {
    const h = await startHarness({
      script: cancelScript(),
      slack: { approvers: [`group:${GROUP}`], requesterMayApprove: false },
      fake: { userGroups: { [GROUP]: ["U3"] }, refuse: ["usergroups.users.list"] },
    });
    const card = await askToCancel(h);
    await h.click(card, "U3");
    const note = await h.fake.waitForCall("chat.postEphemeral", (c) => c.args.user === "U3", CALL_WAIT);
    expect(note.args.text).toBe(`This needs someone other than <@U1> to approve it: <!subteam^${GROUP}>.`);
    const logged = h.lines.find((line) => line.msg?.includes("user group's members could not be read"));
    expect(logged).toMatchObject({ usergroup: GROUP, problem: "missing_scope" });
    await h.slack.conversations.idle();
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("paid");
  });
});
