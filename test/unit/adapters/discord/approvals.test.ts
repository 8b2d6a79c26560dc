// Durable approvals on Discord, end to end: the real discord.js client against the fake Discord,
// the demo shop's real cancel_order tool over its SQLite file, the agent's store in SQLite. A
// dangerous call shows Approve / Deny buttons whose custom_id carries the approval id; a click by
// the right person decides it once and resumes the run, also after a restart; anything else
// (another person, a second click, an expired button, a replayed interaction) changes nothing.
import { MessageFlags } from "discord.js";
import { afterEach, describe, expect, it } from "vitest";
import {
  agentFor,
  APPROVER,
  botTexts,
  buttonsOf,
  CANCELLABLE_ORDER,
  cancelScript,
  CHANNEL,
  cleanUp,
  click,
  DM,
  interactionReplies,
  memoryLogger,
  messageById,
  orderStatus,
  OTHER_USER,
  REQUEST_WAIT,
  sentMessages,
  startAdapter,
  startFake,
  startHarness,
  startModel,
  tempPaths,
  toolResults,
  USER,
  waitForApproval,
  waitForBotMessage,
} from "../../../helpers/discord.js";
import { expectValidProtocol } from "../../../helpers/memory.js";

afterEach(cleanUp);

const ASK = `please cancel order ${CANCELLABLE_ORDER}, I ordered it twice`;
const DEFERRED_UPDATE = 6;

describe("Discord approvals", () => {
  it("shows the call with Approve / Deny buttons; the requester's Approve runs it and the run answers", async () => {
    const h = await startHarness({ script: cancelScript() });
    await h.mention(ASK);
    const approval = await waitForApproval(h.fake, CHANNEL);

    // The question: the tool, its arguments, who asked, and buttons bound to the approval id.
    expect(approval.id).toMatch(/^apv_/);
    expect(buttonsOf(approval.message).map((button) => [button.custom_id, button.label])).toEqual([
      [`glassbox:approve:${approval.id}`, "Approve"],
      [`glassbox:deny:${approval.id}`, "Deny"],
    ]);
    expect(approval.message.content).toContain("cancel_order");
    expect(approval.message.content).toContain(CANCELLABLE_ORDER);
    expect(approval.message.content).toContain("ordered twice");
    expect(approval.message.content).toContain(`<@${USER}>`);
    await h.discord.idle();
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("paid"); // nothing ran yet
    expect(h.model.requests).toHaveLength(1);

    const clicked = await click(h.fake, approval, USER);
    await waitForBotMessage(h.fake, CHANNEL, "order 20240410003 is cancelled");
    await h.discord.idle();

    const decided = messageById(h.fake, CHANNEL, approval.message.id);
    expect(decided?.content).toContain(`Approved by <@${USER}>`);
    expect(buttonsOf(decided)).toEqual([]);
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("cancelled");
    expect(h.model.requests).toHaveLength(2);
    expect(toolResults(h.model, 1)).toEqual([expect.objectContaining({ status: "success" })]);
    expectValidProtocol(sentMessages(h.model, 1), "after the approval");
    // The click was acknowledged (within Discord's 3 seconds) and nothing else was said to the clicker.
    expect(interactionReplies(h.fake, clicked.interactionId)).toEqual([
      { method: "POST", type: DEFERRED_UPDATE, content: undefined, flags: undefined },
    ]);
    expect(botTexts(h.fake, CHANNEL).at(-1)).toBe("Done: order 20240410003 is cancelled.");
  });

  it("Deny: the tool does not run and the model gets a denied envelope", async () => {
    const h = await startHarness({ script: cancelScript("Understood, I did not cancel it.") });
    await h.dm(ASK);
    const approval = await waitForApproval(h.fake, DM);
    await click(h.fake, approval, USER, approval.deny);
    await waitForBotMessage(h.fake, DM, "I did not cancel it");
    await h.discord.idle();

    const decided = messageById(h.fake, DM, approval.message.id);
    expect(decided?.content).toContain(`Denied by <@${USER}>`);
    expect(buttonsOf(decided)).toEqual([]);
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("paid");
    expect(toolResults(h.model, 1)).toEqual([{ status: "error", error: expect.objectContaining({ type: "denied" }) }]);
  });

  it("refuses a click by someone else with an ephemeral note and decides nothing; an approver may decide", async () => {
    const h = await startHarness({ script: cancelScript(), discord: { approvers: [APPROVER] } });
    await h.mention(ASK);
    const approval = await waitForApproval(h.fake, CHANNEL);

    for (const customId of [approval.approve, approval.deny]) {
      const clicked = await click(h.fake, approval, OTHER_USER, customId);
      await h.fake.waitForRequest("POST", /^\/webhooks\//, (r) => r.path.includes(clicked.token), REQUEST_WAIT);
      const [ack, note] = interactionReplies(h.fake, clicked.interactionId);
      expect(ack).toMatchObject({ type: DEFERRED_UPDATE });
      expect(note?.content).toBe(`Only <@${USER}> or an approver (<@${APPROVER}>) can approve this.`);
      expect(note?.flags).toBe(MessageFlags.Ephemeral);
    }
    await h.discord.idle();
    expect(buttonsOf(messageById(h.fake, CHANNEL, approval.message.id))).toHaveLength(2);
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("paid");
    expect(h.model.requests).toHaveLength(1);
    // Ephemeral: nobody else sees the notes in the channel.
    expect(botTexts(h.fake, CHANNEL).some((text) => text.startsWith("Only"))).toBe(false);

    await click(h.fake, approval, APPROVER);
    await waitForBotMessage(h.fake, CHANNEL, "order 20240410003 is cancelled");
    await h.discord.idle();
    expect(messageById(h.fake, CHANNEL, approval.message.id)?.content).toContain(`Approved by <@${APPROVER}>`);
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("cancelled");
  });

  it("expiry: the message says it expired, the model gets denied, and a late click is refused", async () => {
    const h = await startHarness({ script: cancelScript("Nobody approved, so I did not cancel it.") });
    await h.mention(ASK);
    const approval = await waitForApproval(h.fake, CHANNEL);
    await h.discord.idle();

    expect(await h.discord.expireApprovals(new Date(Date.now() + 2 * 3_600_000))).toBe(1);
    await waitForBotMessage(h.fake, CHANNEL, "Nobody approved");
    await h.discord.idle();

    const expired = messageById(h.fake, CHANNEL, approval.message.id);
    expect(expired?.content).toContain("Expired");
    expect(buttonsOf(expired)).toEqual([]);
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("paid");
    expect(toolResults(h.model, 1)).toEqual([{ status: "error", error: expect.objectContaining({ type: "denied" }) }]);

    // A click from a client that still shows the buttons.
    const late = await click(h.fake, approval, USER);
    await h.fake.waitForRequest("POST", /^\/webhooks\//, (r) => r.path.includes(late.token), REQUEST_WAIT);
    expect(interactionReplies(h.fake, late.interactionId)[1]).toMatchObject({
      content: expect.stringMatching(/expired/i),
      flags: MessageFlags.Ephemeral,
    });
    await h.discord.idle();
    expect(h.model.requests).toHaveLength(2);
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("paid");
  });

  it("survives a restart between the buttons and the click: the new process continues the run", async () => {
    const fake = await startFake();
    const model = await startModel(cancelScript());
    const paths = tempPaths();
    const { log } = memoryLogger();

    const first = (await agentFor(model, paths, log)).agent;
    const a = await startAdapter({ fake, agent: first, store: first.port, log });
    await fake.sendMessage({ channelId: CHANNEL, authorId: USER, content: ASK, mentionsBot: true });
    const approval = await waitForApproval(fake, CHANNEL);
    await a.idle();
    await a.stop();
    first.store.close();
    expect(fake.connections()).toBe(0);

    const second = (await agentFor(model, paths, log)).agent;
    const b = await startAdapter({ fake, agent: second, store: second.port, log });
    const clicked = await click(fake, approval, USER);
    await waitForBotMessage(fake, CHANNEL, "order 20240410003 is cancelled");
    await b.idle();

    expect(interactionReplies(fake, clicked.interactionId)).toEqual([
      expect.objectContaining({ type: DEFERRED_UPDATE }),
    ]);
    expect(messageById(fake, CHANNEL, approval.message.id)?.content).toContain(`Approved by <@${USER}>`);
    expect(orderStatus(paths.shopDb, CANCELLABLE_ORDER)).toBe("cancelled");
    expect(model.requests).toHaveLength(2);
    expectValidProtocol(sentMessages(model, 1), "after the restart");
  });

  it("single use: a second click is refused, and an interaction delivered twice (two connections, one store) is handled once", async () => {
    const fake = await startFake();
    const model = await startModel([...cancelScript(), { content: "A second run!" }]);
    const paths = tempPaths();
    const { log } = memoryLogger();
    // Two bot processes over the same SQLite file, each with its own gateway session: Discord
    // delivers every event to both, as it would replay an event to a resumed or second connection.
    const one = (await agentFor(model, paths, log)).agent;
    const two = (await agentFor(model, paths, log)).agent;
    const a = await startAdapter({ fake, agent: one, store: one.port, log });
    const b = await startAdapter({ fake, agent: two, store: two.port, log });
    expect(fake.connections()).toBe(2);

    await fake.sendMessage({ channelId: CHANNEL, authorId: USER, content: ASK, mentionsBot: true });
    const approval = await waitForApproval(fake, CHANNEL);
    const clicked = await click(fake, approval, USER);
    await waitForBotMessage(fake, CHANNEL, "order 20240410003 is cancelled");
    await Promise.all([a.idle(), b.idle()]);

    // One approval message, one acknowledgement of the click, one tool run, one answer.
    expect(interactionReplies(fake, clicked.interactionId)).toEqual([
      expect.objectContaining({ type: DEFERRED_UPDATE }),
    ]);
    expect(
      botTexts(fake, CHANNEL).filter((text) => text.includes("Approval needed") || text.includes("Approved by")),
    ).toHaveLength(1);
    expect(botTexts(fake, CHANNEL).filter((text) => text.includes("is cancelled"))).toHaveLength(1);
    expect(model.requests).toHaveLength(2);
    expect(orderStatus(paths.shopDb, CANCELLABLE_ORDER)).toBe("cancelled");

    // A second click (a new interaction) on the decided approval: an ephemeral note, no new run.
    const again = await click(fake, approval, USER);
    await fake.waitForRequest("POST", /^\/webhooks\//, (r) => r.path.includes(again.token), REQUEST_WAIT);
    expect(interactionReplies(fake, again.interactionId).map((reply) => reply.content)).toEqual([
      undefined,
      "This was already decided.",
    ]);
    await Promise.all([a.idle(), b.idle()]);
    expect(model.requests).toHaveLength(2);
    expect(botTexts(fake, CHANNEL)).not.toContain("A second run!");
  });
});
