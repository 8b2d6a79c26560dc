// A note for a whole channel through the real Slack pipeline (Bolt against the fake Slack, the agent
// as `npm start` builds it over its SQLite file): it waits for the person's click on a card that
// says the note is done in their name, and no self-approval setting (the deployment's or the
// channel's) takes that confirmation from them.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { ChatCompletionRequestBody } from "../../../../src/testing/scripted-model-server.js";
import { textOf } from "../../../helpers/agent.js";
import {
  BOT,
  CHANNEL,
  cleanUp,
  DENY,
  startHarness,
  toolCall,
  visibleText,
  waitForApproval,
  waitForBotMessage,
  type Harness,
} from "../../../helpers/slack.js";

const folders: string[] = [];
afterEach(async () => {
  await cleanUp();
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

const NOTE = "The release train leaves on Thursdays.";

/** The model: a note for the channel when asked to remember, then a short answer. */
function script(request: ChatCompletionRequestBody) {
  const last = request.messages.at(-1);
  if (last?.role === "tool") return { content: `Result: ${textOf(last)}` };
  return { toolCalls: [toolCall("remember", { fact: NOTE, shared_with_channel: true }, "call_note")] };
}

const notes = (h: Harness) =>
  h.agent.store.db.prepare("SELECT user_id AS userId, scope, content FROM facts").all() as Array<{
    userId: string;
    scope: string;
    content: string;
  }>;

/** Asks for a channel note in CHANNEL as U1; returns the card. */
async function askForNote(h: Harness) {
  const before = notes(h).length;
  const { ts } = await h.mention(`<@${BOT}> remember for everyone: ${NOTE}`, { user: "U1" });
  const card = await waitForApproval(h.fake, CHANNEL, ts);
  await h.slack.conversations.idle();
  expect(notes(h)).toHaveLength(before); // nothing is kept before the click
  return { ts, card };
}

describe("a channel note on Slack", () => {
  it("regression: with GLASSBOX_REQUESTER_MAY_APPROVE=false the requester still confirms their own channel note, and the card says they can (finding 4)", async () => {
    const h = await startHarness({
      script,
      env: { GLASSBOX_REQUESTER_MAY_APPROVE: "false" },
      slack: { requesterMayApprove: false, approvers: ["U0ADMIN"] },
    });
    const { ts, card } = await askForNote(h);
    const shown = visibleText(card.message);
    expect(shown).toContain("*Confirmation needed*: I would run `remember` in <@U1>'s name");
    expect(shown).toContain("<@U1>, approve it only if you asked for it: it is done in your name");
    expect(shown).toContain(NOTE);

    expect((await h.click(card, "U1")).status).toBe(200);
    await waitForBotMessage(h.fake, CHANNEL, ts, "Result:");
    expect(notes(h)).toEqual([{ userId: "U1", scope: `slack:T0FAKE0001:${CHANNEL}`, content: NOTE }]);
  });

  it("regression: a channel whose settings say requesterMayApprove: false still lets the requester confirm their note; its approvers may too, nobody else (finding 4)", async () => {
    const folder = mkdtempSync(join(tmpdir(), "glassbox-notes-"));
    folders.push(folder);
    const settings = join(folder, "channels.yaml");
    writeFileSync(settings, `channels:\n  ${CHANNEL}:\n    approvers: [U0LEAD]\n    requesterMayApprove: false\n`);
    const h = await startHarness({ script, env: { GLASSBOX_CHANNELS: settings } });

    const first = await askForNote(h);
    await h.click(first.card, "U2"); // another member: neither the requester nor an approver
    await h.slack.conversations.idle();
    expect(notes(h)).toEqual([]);
    await h.click(first.card, "U1");
    await waitForBotMessage(h.fake, CHANNEL, first.ts, "Result:");
    expect(notes(h)).toHaveLength(1);

    // The channel's approver may decide one too; declined, nothing is kept.
    const second = await askForNote(h);
    await h.click(second.card, "U0LEAD", DENY);
    await waitForBotMessage(h.fake, CHANNEL, second.ts, /Result: .*denied/);
    expect(notes(h)).toHaveLength(1);
  });
});
