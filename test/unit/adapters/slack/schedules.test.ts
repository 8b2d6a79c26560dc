// Schedules made and deleted in chat, through the real Slack pipeline (Bolt against the fake Slack,
// the agent as `npm start` builds it over its SQLite file, GLASSBOX_BUILTIN_TOOLS naming the
// schedules tools): a schedule waits for its maker's confirmation on a card, is kept for the
// channel's top level, and is deleted when its maker asks; someone else's request to delete it is refused.
import { afterEach, describe, expect, it } from "vitest";
import type { ChatCompletionRequestBody } from "../../../../src/testing/scripted-model-server.js";
import { textOf } from "../../../helpers/agent.js";
import {
  BOT,
  CHANNEL,
  cleanUp,
  startHarness,
  toolCall,
  visibleText,
  waitForApproval,
  waitForBotMessage,
  type Harness,
} from "../../../helpers/slack.js";

afterEach(cleanUp);

const PROMPT = "Summarise yesterday's incidents.";

/** The model: a schedule when asked for one, its deletion when asked (by the id it is told), then what the tool said. */
function script(request: ChatCompletionRequestBody) {
  const last = request.messages.at(-1);
  if (last?.role === "tool") return { content: `Result: ${textOf(last)}` };
  const asked = textOf(last);
  if (asked.includes(PROMPT)) return { content: "Nothing happened yesterday." };
  const deleting = /delete (sch_\w+)/.exec(asked);
  if (deleting) return { toolCalls: [toolCall("delete_schedule", { schedule_id: deleting[1] }, "call_delete")] };
  return {
    toolCalls: [
      toolCall("schedule_run", { every: "weekday 09:00", timezone: "Europe/Berlin", prompt: PROMPT }, "call_make"),
    ],
  };
}

const schedules = (h: Harness) =>
  h.agent.store.db
    .prepare("SELECT id, session_id AS sessionId, user_id AS userId, cron, prompt FROM schedules")
    .all() as Array<{
    id: string;
    sessionId: string;
    userId: string;
    cron: string;
    prompt: string;
  }>;

describe("schedules in Slack", () => {
  it("a schedule waits for its maker's confirmation, is kept for the channel, and only its maker deletes it", async () => {
    const h = await startHarness({
      script,
      env: { GLASSBOX_BUILTIN_TOOLS: "current_time,calculator,memory,schedules" },
    });
    const { ts } = await h.mention(`<@${BOT}> every weekday at 9 Berlin time, summarise yesterday's incidents`, {
      user: "U1",
    });
    const card = await waitForApproval(h.fake, CHANNEL, ts);
    expect(visibleText(card.message)).toContain("*Confirmation needed*: I would run `schedule_run` in <@U1>'s name");
    await h.slack.conversations.idle();
    expect(schedules(h)).toEqual([]);
    expect((await h.click(card, "U1")).status).toBe(200);
    await waitForBotMessage(h.fake, CHANNEL, ts, "Result:");
    const [made] = schedules(h);
    expect(made).toMatchObject({ sessionId: `slack:T0FAKE0001:${CHANNEL}:main`, userId: "U1", cron: "0 9 * * 1-5" });
    expect(made?.prompt).toBe(PROMPT);

    const other = await h.mention(`<@${BOT}> delete ${made?.id}`, { user: "U2" });
    const refused = await waitForBotMessage(h.fake, CHANNEL, other.ts, "Result:");
    expect(refused.text).toContain("Only U1, who made it, may change this schedule.");
    expect(schedules(h)).toHaveLength(1);

    const mine = await h.mention(`<@${BOT}> delete ${made?.id}`, { user: "U1" });
    const deleted = await waitForBotMessage(h.fake, CHANNEL, mine.ts, "Result:");
    expect(deleted.text).toContain('"deleted":true');
    expect(schedules(h)).toEqual([]);
  });

  it("a tick that came due runs the schedule's prompt as its maker and posts the answer at the channel's top level, once", async () => {
    const h = await startHarness({
      script,
      env: { GLASSBOX_BUILTIN_TOOLS: "current_time,calculator,memory,schedules", GLASSBOX_SCHEDULE_LOOK_MS: "50" },
    });
    const sessionId = `slack:T0FAKE0001:${CHANNEL}:main`;
    const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
    // Daily, at the minute half an hour ago: that tick is due, the next one is a day away.
    const due = new Date(Date.now() - 1_800_000);
    await h.agent.port.saveSchedule({
      id: "sch_digest",
      sessionId,
      userId: "U1",
      cron: `${due.getUTCMinutes()} ${due.getUTCHours()} * * *`,
      timezone: "UTC",
      prompt: PROMPT,
      missed: "once",
      paused: false,
      source: "chat",
      createdAt: hourAgo,
      lastTick: hourAgo,
    });
    const topLevel = () => h.fake.messages(CHANNEL).filter((message) => !message.thread_ts && message.bot_id);
    await expect
      .poll(() => topLevel().map((message) => message.text), { timeout: 15_000 })
      .toContain("Nothing happened yesterday.");
    const runs = await h.agent.port.runsOfSession(sessionId);
    expect(runs.map((run) => [run.input, run.userId, run.status])).toEqual([[PROMPT, "U1", "final"]]);
    // The tick moved on: later looks (every 50 ms) fire nothing more until tomorrow's.
    expect((await h.agent.port.schedules())[0]?.lastTick).not.toBe(hourAgo);
    await h.slack.conversations.idle();
    expect(await h.agent.port.runsOfSession(sessionId)).toHaveLength(1);
  });
});
