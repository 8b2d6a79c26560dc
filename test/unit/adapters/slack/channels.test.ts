// Per-channel settings through the real Slack pipeline (Bolt against the fake Slack, the scripted
// model), with the repository's example file (examples/channels.yaml): #support may look an order
// up, #random may not, each channel's system prompt reaches the model, and an edited file takes
// effect on the next message without a restart.
import { createHash } from "node:crypto";
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it, vi } from "vitest";
import { formatRunTimeline } from "../../../../src/adapters/trace-report.js";
import type { RunTrace } from "../../../../src/store/port.js";
import type { ChatCompletionRequestBody } from "../../../../src/testing/scripted-model-server.js";
import {
  BOT,
  CANCELLABLE_ORDER,
  cancelScript,
  cleanUp,
  orderStatus,
  startHarness,
  waitForApproval,
  waitForBotMessage,
} from "../../../helpers/slack.js";

afterEach(cleanUp);

const EXAMPLE = fileURLToPath(new URL("../../../../examples/channels.yaml", import.meta.url));

/** The model looks the order up when it may, then answers with what the tool said. */
function lookUpThenAnswer(body: ChatCompletionRequestBody) {
  const last = body.messages.at(-1);
  if (last?.role === "tool") return { content: `tool said: ${String(last.content).slice(0, 300)}` };
  return {
    toolCalls: [{ name: "get_order_status", arguments: JSON.stringify({ order_id: CANCELLABLE_ORDER }) }],
  };
}

const toolNames = (body: ChatCompletionRequestBody) =>
  ((body as { tools?: Array<{ function: { name: string } }> }).tools ?? []).map((tool) => tool.function.name);
const systemOf = (body: ChatCompletionRequestBody) =>
  String(body.messages.find((message) => message.role === "system")?.content ?? "");

describe("per-channel settings on Slack", () => {
  it("#support may look an order up and #random may not; each channel's prompt reaches the model", async () => {
    const h = await startHarness({ script: lookUpThenAnswer, env: { GLASSBOX_CHANNELS: EXAMPLE } });

    const support = await h.mention(`<@${BOT}> where is order ${CANCELLABLE_ORDER}?`, { channel: "C0SUPPORT" });
    const supported = await waitForBotMessage(h.fake, "C0SUPPORT", support.ts, "tool said:");
    expect(supported.text).toContain('"status":"success"');
    const [supportFirst] = h.model.requests.map((request) => request.body);
    expect(toolNames(supportFirst as ChatCompletionRequestBody)).toEqual(
      expect.arrayContaining(["get_order_status", "current_time"]),
    );
    expect(toolNames(supportFirst as ChatCompletionRequestBody)).not.toContain("cancel_order");
    expect(systemOf(supportFirst as ChatCompletionRequestBody)).toContain("You help the support team");

    const before = h.model.requests.length;
    const random = await h.mention(`<@${BOT}> where is order ${CANCELLABLE_ORDER}?`, { channel: "C0RANDOM" });
    const refused = await waitForBotMessage(h.fake, "C0RANDOM", random.ts, "tool said:");
    // The model was offered no tool, and the call it made anyway came back as a tool it does not have.
    const randomFirst = h.model.requests[before]?.body as ChatCompletionRequestBody;
    expect(toolNames(randomFirst)).toEqual([]);
    expect(systemOf(randomFirst)).toContain("the Example team's assistant");
    expect(refused.text).toContain("tool_not_found");
    expect(refused.text).not.toContain('"status":"success"');
  });

  it("#random's runs call its own model; every run records the settings' file and version it used", async () => {
    const h = await startHarness({ script: () => ({ content: "Hello there." }), env: { GLASSBOX_CHANNELS: EXAMPLE } });
    const random = await h.mention(`<@${BOT}> hi`, { channel: "C0RANDOM" });
    await waitForBotMessage(h.fake, "C0RANDOM", random.ts, "Hello there.");
    const support = await h.mention(`<@${BOT}> hi`, { channel: "C0SUPPORT" });
    await waitForBotMessage(h.fake, "C0SUPPORT", support.ts, "Hello there.");
    const [inRandom, inSupport] = h.model.requests.map((request) => request.body.model);
    expect(inRandom).toBe("gpt-4.1-nano");
    expect(inSupport).toBe(h.agent.model.name);
    expect(inSupport).not.toBe("gpt-4.1-nano");

    const version = createHash("sha256").update(readFileSync(EXAMPLE)).digest("hex").slice(0, 12);
    const runs = [
      ...(await h.agent.port.runsOfSession(`slack:T0FAKE0001:C0RANDOM:${random.ts}`)),
      ...(await h.agent.port.runsOfSession(`slack:T0FAKE0001:C0SUPPORT:${support.ts}`)),
    ];
    expect(runs.map((run) => run.configuration)).toEqual([`channels.yaml@${version}`, `channels.yaml@${version}`]);
    expect(runs[0]?.model).toBe("gpt-4.1-nano");
    expect(formatRunTimeline(runs[0] as RunTrace, [])).toContain(`settings: channels.yaml@${version}`);
  });

  it("#finance works for its people alone: anyone else is told so in the thread, and no model is called", async () => {
    const h = await startHarness({
      script: () => ({ content: "The total is 42." }),
      env: { GLASSBOX_CHANNELS: EXAMPLE },
    });
    const outsider = await h.mention(`<@${BOT}> add up the invoices`, { channel: "C0FINANCE", user: "U1" });
    await waitForBotMessage(h.fake, "C0FINANCE", outsider.ts, "I'm not set up to work for you in this channel");
    expect(h.model.requests).toHaveLength(0);

    const member = await h.mention(`<@${BOT}> add up the invoices`, { channel: "C0FINANCE", user: "U0FINANCE1" });
    await waitForBotMessage(h.fake, "C0FINANCE", member.ts, "The total is 42.");
    expect(h.model.requests).toHaveLength(1);
  });

  it('"what can you do here?" answers for this person in this channel, without a model call', async () => {
    const h = await startHarness({
      script: () => ({ content: "unused" }),
      env: { GLASSBOX_CHANNELS: EXAMPLE, GLASSBOX_USER_DAILY_TOKENS: "5000" },
    });
    /** The tools the answer says are used without asking, as a set. */
    const onTheirOwn = (text: string) =>
      new Set(/Tools I use on my own: ([^.\n]+)\./.exec(text)?.[1]?.split(", ") ?? []);
    const ask = async (channel: string, user: string) => {
      const { ts } = await h.mention(`<@${BOT}> what can you do here?`, { channel, user });
      return (
        (await waitForBotMessage(h.fake, channel, ts, /Here is what I can do|not set up to work for you/)).text ?? ""
      );
    };
    const support = await ask("C0SUPPORT", "U1");
    expect(onTheirOwn(support)).toEqual(new Set(["current_time", "calculator", "get_order_status", "forget"]));
    expect(support).toContain(
      "remember asks first when its arguments call for it: you confirm it, as it is done in your name (or an approver).",
    );
    expect(support).not.toContain("cancel_order");
    expect(support).toContain("Left of your budget today (UTC): 5,000 of 5,000 tokens");
    expect(support).toContain("glassbox erase --user");
    const random = await ask("C0RANDOM", "U1");
    expect(random).toContain("I have no tools in this channel");
    expect(await ask("C0FINANCE", "U1")).toContain("I'm not set up to work for you in this channel");
    const finance = await ask("C0FINANCE", "U0FINANCE1");
    expect(onTheirOwn(finance)).toEqual(new Set(["calculator"]));
    expect(finance).toContain("cancel_order asks first: two of U0FINANCE2, U0FINANCE3 must approve, not you.");
    expect(finance).not.toContain("remember asks first");
    expect(h.model.requests).toHaveLength(0);
  });

  it('an empty mention\'s reply has a "What can you do here?" button, answered for whoever clicks it', async () => {
    const h = await startHarness({ script: [], env: { GLASSBOX_CHANNELS: EXAMPLE } });
    const { ts } = await h.mention(`<@${BOT}>`, { channel: "C0SUPPORT" });
    const reply = await waitForBotMessage(h.fake, "C0SUPPORT", ts, "Ask me something after the mention");
    expect(JSON.stringify(reply.blocks)).toContain("glassbox_capabilities");
    await h.click(
      { channel: "C0SUPPORT", ts: reply.ts, id: "capabilities", message: reply },
      "U1",
      "glassbox_capabilities",
    );
    const answer = await waitForBotMessage(h.fake, "C0SUPPORT", ts, "Here is what I can do here, for you:");
    expect(answer.text).toContain("get_order_status");
    expect(answer.text).toContain("remember asks first");
    expect(h.model.requests).toHaveLength(0);
  });

  it("#finance: a cancellation needs two people of the channel's approvers, neither the requester; refused clicks say who can", async () => {
    const h = await startHarness({ script: cancelScript(), env: { GLASSBOX_CHANNELS: EXAMPLE } });
    const { ts } = await h.mention(`<@${BOT}> cancel order ${CANCELLABLE_ORDER}, ordered twice`, {
      channel: "C0FINANCE",
      user: "U0FINANCE1",
    });
    const approval = await waitForApproval(h.fake, "C0FINANCE", ts);

    await h.click(approval, "U0FINANCE1");
    const note = await h.fake.waitForCall("chat.postEphemeral", (c) => c.args.user === "U0FINANCE1", {
      timeoutMs: 10_000,
    });
    expect(note.args.text).toBe(
      "This needs someone other than <@U0FINANCE1> to approve it: <@U0FINANCE2>, <@U0FINANCE3>.",
    );
    expect(JSON.stringify(approval.message.blocks)).toContain(
      "Needs 2 approvals from different people, not <@U0FINANCE1>",
    );
    await h.slack.conversations.idle();
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("paid");

    // The first approval counts; the card says so and keeps its buttons; nothing runs yet.
    await h.click(approval, "U0FINANCE2");
    const counted = await h.fake.waitForCall(
      "chat.update",
      (c) => JSON.stringify(c.args.blocks).includes("1 of 2 so far, by <@U0FINANCE2>"),
      { timeoutMs: 10_000 },
    );
    expect(JSON.stringify(counted.args.blocks)).toContain("glassbox_approve");
    await h.click(approval, "U0FINANCE2");
    const again = await h.fake.waitForCall("chat.postEphemeral", (c) => c.args.user === "U0FINANCE2", {
      timeoutMs: 10_000,
    });
    expect(again.args.text).toBe("You approved this already; it needs one more approval, from someone else.");
    await h.slack.conversations.idle();
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("paid");

    await h.click(approval, "U0FINANCE3");
    await waitForBotMessage(h.fake, "C0FINANCE", ts, "order 20240410003 is cancelled");
    expect(orderStatus(h.paths.shopDb, CANCELLABLE_ORDER)).toBe("cancelled");
    expect(await h.agent.port.approval(approval.id)).toMatchObject({
      status: "approved",
      decidedBy: "U0FINANCE3",
      approvedBy: ["U0FINANCE2", "U0FINANCE3"],
    });
  });

  it("an edited file takes effect on the next message, without a restart", async () => {
    const file = join(mkdtempSync(join(tmpdir(), "glassbox-channels-")), "channels.yaml");
    copyFileSync(EXAMPLE, file);
    const h = await startHarness({ script: lookUpThenAnswer, env: { GLASSBOX_CHANNELS: file } });
    const first = await h.mention(`<@${BOT}> where is order ${CANCELLABLE_ORDER}?`, { channel: "C0RANDOM" });
    expect((await waitForBotMessage(h.fake, "C0RANDOM", first.ts, "tool said:")).text).toContain("tool_not_found");

    // #random gets the order tool too.
    writeFileSync(file, readFileSync(file, "utf8").replace("    tools: []", "    tools: [get_order_status]"));
    await vi.waitFor(async () => {
      const again = await h.mention(`<@${BOT}> where is order ${CANCELLABLE_ORDER}?`, { channel: "C0RANDOM" });
      const answer = await waitForBotMessage(h.fake, "C0RANDOM", again.ts, "tool said:");
      expect(answer.text).toContain('"status":"success"');
    }, 10_000);
  });
});
