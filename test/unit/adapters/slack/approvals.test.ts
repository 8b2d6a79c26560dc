// Durable approvals in Slack, end to end: the real Bolt app against the fake Slack, the demo shop's
// real cancel_order tool over its SQLite file, the agent's store in SQLite. A dangerous call shows
// Approve / Deny buttons; a click by the right person decides it once and resumes the run — also
// after the bot restarted; anything else (another person, a second click, a stale or expired
// button) changes nothing.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { ChatCompletionRequestBody, ScriptedReply } from "../../../../src/testing/scripted-model-server.js";
import {
  agentFor,
  APPROVE,
  BOT,
  botTexts,
  buttonsOf,
  CALL_WAIT,
  CANCELLABLE_ORDER,
  cancelScript,
  CHANNEL,
  cleanUp,
  DENY,
  memoryLogger,
  messageAt,
  orderStatus,
  sentMessages,
  startAdapter,
  startHarness,
  startModel,
  startSlack,
  tempDir,
  tempPaths,
  toolCall,
  toolResults,
  visibleText,
  waitForApproval,
  waitForBotMessage,
} from "../../../helpers/slack.js";
import { expectValidProtocol } from "../../../helpers/memory.js";

afterEach(cleanUp);

const ASK = `<@${BOT}> please cancel order ${CANCELLABLE_ORDER}, I ordered it twice`;

describe("Slack approvals", () => {
  it("shows the call with Approve / Deny buttons; the requester's Approve runs it and the run answers in the thread", async () => {
    const h = await startHarness({ script: cancelScript() });
    const { ts } = await h.mention(ASK);
    const approval = await waitForApproval(h.fake, CHANNEL, ts);

    // The question: the tool, its arguments, who asked, and buttons bound to the approval id.
    expect(approval.id).toMatch(/^apv_/);
    expect(buttonsOf(approval.message).map((button) => [button.action_id, button.value])).toEqual([
      [APPROVE, approval.id],
      [DENY, approval.id],
    ]);
    const question = visibleText(approval.message);
    expect(question).toContain("cancel_order");
    expect(question).toContain(CANCELLABLE_ORDER);
    expect(question).toContain("ordered twice");
    expect(question).toContain("<@U1>");
    await h.slack.conversations.idle();
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("paid"); // nothing ran yet
    expect(h.model.requests).toHaveLength(1);

    const clicked = await h.click(approval, "U1");
    expect(clicked.status).toBe(200);
    await waitForBotMessage(h.fake, CHANNEL, ts, "order 20240410003 is cancelled");
    await h.slack.conversations.idle();

    const decided = messageAt(h.fake, CHANNEL, approval.ts);
    expect(visibleText(decided)).toContain("Approved by <@U1>");
    expect(buttonsOf(decided ?? { ts: "" })).toEqual([]);
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("cancelled");
    expect(h.model.requests).toHaveLength(2);
    expect(toolResults(h.model, 1)).toEqual([expect.objectContaining({ status: "success" })]);
    expectValidProtocol(sentMessages(h.model, 1), "after the approval");
    expect(h.fake.callsTo("chat.postEphemeral")).toEqual([]);
  });

  it("Deny: the tool does not run and the model gets a denied envelope", async () => {
    const h = await startHarness({ script: cancelScript("Understood, I did not cancel it.") });
    const { ts } = await h.mention(ASK);
    const approval = await waitForApproval(h.fake, CHANNEL, ts);
    await h.click(approval, "U1", DENY);
    await waitForBotMessage(h.fake, CHANNEL, ts, "I did not cancel it");
    await h.slack.conversations.idle();

    const decided = messageAt(h.fake, CHANNEL, approval.ts);
    expect(visibleText(decided)).toContain("Denied by <@U1>");
    expect(buttonsOf(decided ?? { ts: "" })).toEqual([]);
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("paid");
    expect(toolResults(h.model, 1)).toEqual([{ status: "error", error: expect.objectContaining({ type: "denied" }) }]);
  });

  it("refuses a click by someone else with an ephemeral note and decides nothing; an approver may decide", async () => {
    const h = await startHarness({ script: cancelScript(), slack: { approvers: ["U9"] } });
    const { ts } = await h.mention(ASK);
    const approval = await waitForApproval(h.fake, CHANNEL, ts);

    await h.click(approval, "U2");
    const note = await h.fake.waitForCall("chat.postEphemeral", (c) => c.args.user === "U2", CALL_WAIT);
    expect(note.args.channel).toBe(CHANNEL);
    expect(String(note.args.text)).toMatch(/only <@U1>/i);
    await h.click(approval, "U2", DENY);
    await h.fake.waitForCall("chat.postEphemeral", (c) => c.args.user === "U2", {
      ...CALL_WAIT,
      since: h.fake.calls.indexOf(note) + 1,
    });
    await h.slack.conversations.idle();
    expect(buttonsOf(messageAt(h.fake, CHANNEL, approval.ts) ?? { ts: "" })).toHaveLength(2);
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("paid");
    expect(h.model.requests).toHaveLength(1);

    await h.click(approval, "U9");
    await waitForBotMessage(h.fake, CHANNEL, ts, "order 20240410003 is cancelled");
    await h.slack.conversations.idle();
    expect(visibleText(messageAt(h.fake, CHANNEL, approval.ts))).toContain("Approved by <@U9>");
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("cancelled");
    expect(h.fake.callsTo("chat.postEphemeral").map((c) => c.args.user)).toEqual(["U2", "U2"]);
  });

  it("with the requester kept from approving their own call, their click names who can; an approver's runs it", async () => {
    const h = await startHarness({ script: cancelScript(), slack: { approvers: ["U9"], requesterMayApprove: false } });
    const { ts } = await h.mention(ASK);
    const approval = await waitForApproval(h.fake, CHANNEL, ts);

    await h.click(approval, "U1");
    const note = await h.fake.waitForCall("chat.postEphemeral", (c) => c.args.user === "U1", CALL_WAIT);
    expect(note.args.text).toBe("This needs someone other than <@U1> to approve it: <@U9>.");
    await h.slack.conversations.idle();
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("paid");

    await h.click(approval, "U9");
    await waitForBotMessage(h.fake, CHANNEL, ts, "order 20240410003 is cancelled");
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("cancelled");
  });

  it("two dangerous calls in one step: the run resumes once both are decided, with each decision in its place", async () => {
    const other = "20240418004"; // pending: cancellable too
    const h = await startHarness({
      script: [
        {
          toolCalls: [
            toolCall("cancel_order", { order_id: CANCELLABLE_ORDER, reason: "ordered twice" }, "call_a"),
            toolCall("cancel_order", { order_id: other, reason: "ordered twice" }, "call_b"),
          ],
        },
        { content: "One cancelled, one kept." },
      ],
    });
    const { ts } = await h.mention(`<@${BOT}> cancel orders ${CANCELLABLE_ORDER} and ${other}`);
    await expect
      .poll(() => h.fake.messages(CHANNEL, ts).filter((m) => buttonsOf(m).length > 0).length, { timeout: 15_000 })
      .toBe(2);
    await h.slack.conversations.idle();
    const [first, second] = h.fake.messages(CHANNEL, ts).filter((m) => buttonsOf(m).length > 0);
    const approvalOf = (message: typeof first) => ({
      channel: CHANNEL,
      ts: message?.ts ?? "",
      id: buttonsOf(message ?? { ts: "" })[0]?.value ?? "",
      message: message ?? { ts: "" },
    });
    const forOther = visibleText(first).includes(other) ? first : second;
    const forMine = forOther === first ? second : first;

    await h.click(approvalOf(forMine), "U1");
    await expect
      .poll(() => visibleText(messageAt(h.fake, CHANNEL, forMine?.ts ?? "")), { timeout: 15_000 })
      .toContain("Approved by <@U1>");
    await h.slack.conversations.idle();
    expect(h.model.requests).toHaveLength(1); // still waiting for the other decision
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("paid");

    await h.click(approvalOf(forOther), "U1", DENY);
    await waitForBotMessage(h.fake, CHANNEL, ts, "One cancelled, one kept.");
    await h.slack.conversations.idle();
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("cancelled");
    expect(orderStatus(h.paths.shopDb, other)).toBe("pending");
    const results = sentMessages(h.model, 1).filter((m) => m.role === "tool");
    expect(results.map((m) => m.tool_call_id)).toEqual(["call_a", "call_b"]);
    expect(toolResults(h.model, 1).map((r) => (r.status === "success" ? "success" : r.error?.type))).toEqual([
      "success",
      "denied",
    ]);
  });

  it("works in a direct message too: buttons in the DM, the answer after the click", async () => {
    const h = await startHarness({ script: cancelScript() });
    await h.dm(`please cancel order ${CANCELLABLE_ORDER}, I ordered it twice`);
    const approval = await waitForApproval(h.fake, "D1");
    expect(approval.message.thread_ts).toBeUndefined();
    await h.click(approval, "U1");
    await waitForBotMessage(h.fake, "D1", undefined, "order 20240410003 is cancelled");
    await h.slack.conversations.idle();
    expect(visibleText(messageAt(h.fake, "D1", approval.ts))).toContain("Approved by <@U1>");
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("cancelled");
  });

  it("a second click or a replayed payload changes nothing: the tool ran once", async () => {
    const h = await startHarness({ script: [...cancelScript(), { content: "A second run!" }] });
    const { ts } = await h.mention(ASK);
    const approval = await waitForApproval(h.fake, CHANNEL, ts);

    // Two clicks at once: exactly one decides.
    await Promise.all([h.click(approval, "U1"), h.click(approval, "U1")]);
    await h.fake.waitForCall("chat.postEphemeral", undefined, CALL_WAIT);
    await waitForBotMessage(h.fake, CHANNEL, ts, "order 20240410003 is cancelled");
    await h.slack.conversations.idle();
    // Later: the same payload again, and a Deny on the decided message.
    const since = h.fake.calls.length;
    const updatesOfDecision = h.fake.callsTo("chat.update").filter((c) => c.args.ts === approval.ts).length;
    await h.click(approval, "U1");
    await h.click(approval, "U1", DENY);
    await h.fake.waitForCall("chat.postEphemeral", undefined, { ...CALL_WAIT, since });
    await expect.poll(() => h.fake.callsTo("chat.postEphemeral").length, { timeout: 15_000 }).toBe(3);
    await h.slack.conversations.idle();

    for (const note of h.fake.callsTo("chat.postEphemeral")) expect(String(note.args.text)).toMatch(/already decided/i);
    expect(h.model.requests).toHaveLength(2);
    expect(toolResults(h.model, 1)).toEqual([expect.objectContaining({ status: "success" })]);
    expect(visibleText(messageAt(h.fake, CHANNEL, approval.ts))).toContain("Approved by <@U1>");
    expect(botTexts(h.fake, CHANNEL, ts).filter((text) => text.includes("is cancelled"))).toHaveLength(1);
    // The decision shows (ingress on the click, the worker again as the run resumes: the same text), and
    // the later clicks change nothing.
    const updates = h.fake.callsTo("chat.update").filter((c) => c.args.ts === approval.ts);
    expect(updates).toHaveLength(updatesOfDecision);
    for (const update of updates) expect(JSON.stringify(update.args)).toContain("Approved by <@U1>");
  });

  it("a newer message in the thread makes the buttons stale: 'No longer needed', and a later click runs nothing", async () => {
    const h = await startHarness({
      script: [
        {
          toolCalls: [
            toolCall("cancel_order", { order_id: CANCELLABLE_ORDER, reason: "ordered twice" }, "call_cancel_1"),
          ],
        },
        { content: "Order 20240315001 was delivered." },
        { content: "A resumed run!" },
      ],
    });
    const { ts } = await h.mention(ASK);
    const approval = await waitForApproval(h.fake, CHANNEL, ts);
    await h.slack.conversations.idle();

    await h.mention(`<@${BOT}> never mind; where is order 20240315001?`, { threadTs: ts });
    await waitForBotMessage(h.fake, CHANNEL, ts, "was delivered");
    await h.slack.conversations.idle();
    const moot = messageAt(h.fake, CHANNEL, approval.ts);
    expect(visibleText(moot)).toMatch(/no longer needed/i);
    expect(buttonsOf(moot ?? { ts: "" })).toEqual([]);
    // The new run saw the unrun call as a valid exchange (a result for every call).
    expectValidProtocol(sentMessages(h.model, 1), "after the superseded call");

    await h.click(approval, "U1");
    const note = await h.fake.waitForCall("chat.postEphemeral", undefined, CALL_WAIT);
    expect(String(note.args.text)).toMatch(/no longer waiting/i);
    await h.slack.conversations.idle();
    expect(h.model.requests).toHaveLength(2);
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("paid");
    expect(visibleText(messageAt(h.fake, CHANNEL, approval.ts))).toMatch(/no longer needed/i);
  });

  it("an approval nobody answers expires: the message says so, the model gets denied and answers", async () => {
    const h = await startHarness({ script: cancelScript("Nobody approved, so the order stays as it is.") });
    const { ts } = await h.mention(ASK);
    const approval = await waitForApproval(h.fake, CHANNEL, ts);
    await h.slack.conversations.idle();
    expect(await h.slack.conversations.expireApprovals(new Date())).toBe(0); // not yet

    expect(await h.slack.conversations.expireApprovals(new Date(Date.now() + 2 * 3_600_000))).toBe(1);
    await waitForBotMessage(h.fake, CHANNEL, ts, "order stays as it is");
    await h.slack.conversations.idle();
    const expired = messageAt(h.fake, CHANNEL, approval.ts);
    expect(visibleText(expired)).toMatch(/expired/i);
    expect(buttonsOf(expired ?? { ts: "" })).toEqual([]);
    expect(toolResults(h.model, 1)).toEqual([{ status: "error", error: expect.objectContaining({ type: "denied" }) }]);
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("paid");

    await h.click(approval, "U1");
    const note = await h.fake.waitForCall("chat.postEphemeral", undefined, CALL_WAIT);
    expect(String(note.args.text)).toMatch(/expired/i);
    await h.slack.conversations.idle();
    expect(h.model.requests).toHaveLength(2);
  });

  it("honours a short approval TTL: the question shows when it expires, and the sweep then expires it", async () => {
    const h = await startHarness({ script: cancelScript("Nobody approved in time."), approvalTtlSeconds: 1 });
    const before = Date.now();
    const { ts } = await h.mention(ASK);
    const approval = await waitForApproval(h.fake, CHANNEL, ts);
    const after = Date.now();
    await h.slack.conversations.idle();
    // "Expires <time>": a Slack date token one second after the approval was opened.
    const expires = Number(/Expires <!date\^(\d+)\^/.exec(visibleText(approval.message))?.[1]);
    expect(expires).toBeGreaterThanOrEqual(Math.floor(before / 1000) + 1);
    expect(expires).toBeLessThanOrEqual(Math.floor(after / 1000) + 1);
    // One second later by the book's clock (no waiting): the sweep expires it.
    expect(await h.slack.conversations.expireApprovals(new Date(Date.now() + 1_500))).toBe(1);
    await waitForBotMessage(h.fake, CHANNEL, ts, "Nobody approved in time.");
    await h.slack.conversations.idle();
    expect(toolResults(h.model, 1)).toEqual([{ status: "error", error: expect.objectContaining({ type: "denied" }) }]);
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("paid");
    expect(visibleText(messageAt(h.fake, CHANNEL, approval.ts))).toMatch(/expired/i);
  });

  it("survives a restart between the buttons and the click: the run continues under the new process", async () => {
    const fake = await startSlack();
    const model = await startModel(cancelScript());
    const paths = tempPaths();
    const { log } = memoryLogger();

    const first = await agentFor(model, paths, log);
    const a = await startAdapter({ fake, agent: first.agent, log });
    const ts = fake.nextTs();
    await fake.sendEvent(a.eventsUrl as string, { type: "app_mention", user: "U1", channel: CHANNEL, text: ASK, ts });
    const approval = await waitForApproval(fake, CHANNEL, ts);
    await a.conversations.idle();
    await a.stop();
    first.agent.store.close();

    const second = await agentFor(model, paths, log);
    const b = await startAdapter({ fake, agent: second.agent, log });
    expect(b.eventsUrl).not.toBe(a.eventsUrl);
    const clicked = await fake.sendBlockAction(b.eventsUrl as string, {
      userId: "U1",
      channel: CHANNEL,
      messageTs: approval.ts,
      actionId: APPROVE,
      value: approval.id,
    });
    expect(clicked.status).toBe(200);
    await waitForBotMessage(fake, CHANNEL, ts, "order 20240410003 is cancelled");
    await b.conversations.idle();

    expect(visibleText(messageAt(fake, CHANNEL, approval.ts))).toContain("Approved by <@U1>");
    expect(orderStatus(paths.shopDb, CANCELLABLE_ORDER)).toBe("cancelled");
    expect(model.requests).toHaveLength(2);
    // The continuation was built from the stored messages: the question and the call are there.
    const resumed = sentMessages(model, 1);
    expect(
      resumed.some((m) => m.role === "user" && String(m.content).includes(`cancel order ${CANCELLABLE_ORDER}`)),
    ).toBe(true);
    expectValidProtocol(resumed, "after the restart");
  });

  it("a specialist's dangerous call asks in the thread; a click after a restart finishes the specialist and the answer lands", async () => {
    // A clerk specialist with the shop's cancel_order; the main agent hands it the task.
    const agentsFile = join(tempDir(), "agents.json");
    writeFileSync(
      agentsFile,
      JSON.stringify({
        agents: {
          clerk: { description: "Cancels orders.", systemPrompt: "You are the CLERK.", tools: ["cancel_order"] },
        },
      }),
    );
    const lastTool = (body: ChatCompletionRequestBody) =>
      String(body.messages.findLast((m) => m.role === "tool")?.content ?? "");
    const script = (body: ChatCompletionRequestBody): ScriptedReply => {
      const done = body.messages.some((m) => m.role === "tool");
      if (String(body.messages[0]?.content).includes("CLERK")) {
        return done
          ? { content: `clerk: ${(JSON.parse(lastTool(body)) as { data?: { status?: string } }).data?.status}` }
          : {
              toolCalls: [
                {
                  name: "cancel_order",
                  arguments: JSON.stringify({ order_id: CANCELLABLE_ORDER, reason: "ordered twice" }),
                },
              ],
            };
      }
      return done
        ? { content: `Done — ${(JSON.parse(lastTool(body)) as { data: { answer: string } }).data.answer}` }
        : {
            toolCalls: [
              { name: "agent_clerk", arguments: JSON.stringify({ task: `Cancel order ${CANCELLABLE_ORDER}` }) },
            ],
          };
    };
    const fake = await startSlack();
    const model = await startModel(script);
    const paths = tempPaths();
    const { log } = memoryLogger();
    const env = { GLASSBOX_AGENTS: agentsFile };

    const first = await agentFor(model, paths, log, env);
    const a = await startAdapter({ fake, agent: first.agent, log });
    const ts = fake.nextTs();
    await fake.sendEvent(a.eventsUrl as string, { type: "app_mention", user: "U1", channel: CHANNEL, text: ASK, ts });
    const approval = await waitForApproval(fake, CHANNEL, ts);
    expect(visibleText(approval.message)).toContain("cancel_order");
    await a.conversations.idle();
    expect(orderStatus(paths.shopDb, CANCELLABLE_ORDER)).toBe("paid");
    await a.stop();
    first.agent.store.close();

    const second = await agentFor(model, paths, log, env);
    const b = await startAdapter({ fake, agent: second.agent, log });
    const clicked = await fake.sendBlockAction(b.eventsUrl as string, {
      userId: "U1",
      channel: CHANNEL,
      messageTs: approval.ts,
      actionId: APPROVE,
      value: approval.id,
    });
    expect(clicked.status).toBe(200);
    await waitForBotMessage(fake, CHANNEL, ts, "Done — clerk: cancelled");
    await b.conversations.idle();
    expect(orderStatus(paths.shopDb, CANCELLABLE_ORDER)).toBe("cancelled");
    expect(visibleText(messageAt(fake, CHANNEL, approval.ts))).toContain("Approved by <@U1>");
  });

  it("an approval that ran out while the bot was down expires when it starts again", async () => {
    const fake = await startSlack();
    const model = await startModel(cancelScript("Nobody approved it while I was away."));
    const paths = tempPaths();
    const { log } = memoryLogger();

    // A TTL of a millisecond: the approval is past its time long before the next start.
    const first = await agentFor(model, paths, log);
    const a = await startAdapter({
      fake,
      agent: first.agent,
      log,
      approvalTtlSeconds: 0.001,
    });
    const ts = fake.nextTs();
    await fake.sendEvent(a.eventsUrl as string, { type: "app_mention", user: "U1", channel: CHANNEL, text: ASK, ts });
    const approval = await waitForApproval(fake, CHANNEL, ts);
    await a.conversations.idle();
    await a.stop();
    first.agent.store.close();
    expect(buttonsOf(messageAt(fake, CHANNEL, approval.ts) ?? { ts: "" })).toHaveLength(2);

    const second = await agentFor(model, paths, log);
    const b = await startAdapter({ fake, agent: second.agent, log });
    await waitForBotMessage(fake, CHANNEL, ts, "Nobody approved it while I was away.");
    await b.conversations.idle();
    const expired = messageAt(fake, CHANNEL, approval.ts);
    expect(visibleText(expired)).toMatch(/expired/i);
    expect(buttonsOf(expired ?? { ts: "" })).toEqual([]);
    expect(toolResults(model, 1)).toEqual([{ status: "error", error: expect.objectContaining({ type: "denied" }) }]);
    expect(orderStatus(paths.shopDb, CANCELLABLE_ORDER)).toBe("paid");
  });
});
