// Schedules written in the channel settings file, and scheduled runs over budget, through the real Slack
// pipeline (Bolt against the fake Slack, the scripted model, SQLite, the worker's ticker every 50 ms):
// the file's schedule is kept in the store under an id from its content, fires as its `as` person at
// the channel's top level, names its schedule in the trace, cannot be deleted in chat, and goes when
// the file drops it; a scheduled run's dangerous call waits for a click on a card at the channel's top
// level; a schedule whose channel used its budget, or whose person it no longer serves, does not run
// and says so once.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { formatRunTimeline } from "../../../../src/adapters/trace-report.js";
import type { Schedule } from "../../../../src/store/index.js";
import type { ChatCompletionRequestBody } from "../../../../src/testing/scripted-model-server.js";
import { budgetScript } from "../../../helpers/budget-script.js";
import { textOf } from "../../../helpers/agent.js";
import {
  BOT,
  CANCELLABLE_ORDER,
  cleanUp,
  startHarness,
  toolCall,
  visibleText,
  waitForApproval,
  waitForBotMessage,
  type Harness,
} from "../../../helpers/slack.js";

afterEach(cleanUp);

const TEAM = "T0FAKE0001";
const PROMPT = "Summarise yesterday's incidents.";

function settingsFile(lines: string[]): string {
  const file = join(mkdtempSync(join(tmpdir(), "glassbox-schedules-")), "channels.yaml");
  writeFileSync(file, [...lines, ""].join("\n"));
  return file;
}

const digest = (channel: string, as = "U1") => [
  "schedules:",
  "  - name: incident digest",
  `    workspace: ${TEAM}`,
  `    channel: ${channel}`,
  "    every: weekday 09:00",
  "    timezone: Europe/Berlin",
  `    prompt: ${PROMPT}`,
  `    as: ${as}`,
];

function script(request: ChatCompletionRequestBody) {
  const last = request.messages.at(-1);
  if (last?.role === "tool") return { content: `Result: ${textOf(last)}` };
  const asked = textOf(last);
  if (asked.includes(PROMPT)) return { content: "Nothing happened yesterday." };
  const deleting = /delete (cfg_\w+)/.exec(asked);
  if (deleting) return { toolCalls: [toolCall("delete_schedule", { schedule_id: deleting[1] }, "call_delete")] };
  return { content: "Hello." };
}

/** Makes the schedule's last tick an hour ago, as if it had been kept since then: its tick of today is due. */
function dueNow(h: Harness, id: string, cron: string) {
  h.agent.store.db
    .prepare("UPDATE schedules SET last_tick = ?, cron = ? WHERE id = ?")
    .run(new Date(Date.now() - 3_600_000).toISOString(), cron, id);
}

/** A schedule of U1's made in chat an hour ago, in UTC: its ticks since then are due. */
function keptSince(id: string, sessionId: string, cron: string, prompt: string): Schedule {
  const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
  return {
    id,
    sessionId,
    userId: "U1",
    cron,
    timezone: "UTC",
    prompt,
    missed: "once",
    paused: false,
    source: "chat",
    createdAt: hourAgo,
    lastTick: hourAgo,
  };
}

const minuteAgo = () => {
  const due = new Date(Date.now() - 60_000);
  return `${due.getUTCMinutes()} ${due.getUTCHours()} * * *`;
};

describe("schedules from the settings file on Slack", () => {
  it("fires as its person at the channel's top level, names itself in the trace, and is taken out in the file only", async () => {
    const file = settingsFile(digest("C0DIGEST"));
    const h = await startHarness({ script, env: { GLASSBOX_CHANNELS: file, GLASSBOX_SCHEDULE_LOOK_MS: "50" } });
    await expect.poll(() => h.agent.port.schedules(), { timeout: 10_000 }).toHaveLength(1);
    const [kept] = await h.agent.port.schedules();
    expect(kept).toMatchObject({
      name: "incident digest",
      sessionId: `slack:${TEAM}:C0DIGEST:main`,
      userId: "U1",
      cron: "0 9 * * 1-5",
      timezone: "Europe/Berlin",
      prompt: PROMPT,
      source: "settings",
    });
    expect(kept?.id).toMatch(/^cfg_[0-9a-f]{12}$/);

    // UTC, so that its tick of a minute ago is due whatever the day.
    h.agent.store.db.prepare("UPDATE schedules SET timezone = 'UTC' WHERE id = ?").run(kept?.id);
    dueNow(h, kept?.id ?? "", minuteAgo());
    const topLevel = () => h.fake.messages("C0DIGEST").filter((message) => !message.thread_ts && message.bot_id);
    await expect
      .poll(() => topLevel().map((message) => message.text), { timeout: 15_000 })
      .toContain("Nothing happened yesterday.");
    const [run] = await h.agent.port.runsOfSession(`slack:${TEAM}:C0DIGEST:main`);
    expect(run).toMatchObject({ userId: "U1", input: PROMPT, status: "final", scheduleId: kept?.id });
    expect(formatRunTimeline(run as NonNullable<typeof run>, [])).toContain(`made by schedule ${kept?.id}`);

    // Its maker cannot delete it in chat: it is the file's.
    const asked = await h.mention(`<@${BOT}> delete ${kept?.id}`, { channel: "C0DIGEST", user: "U1" });
    const refused = await waitForBotMessage(h.fake, "C0DIGEST", asked.ts, "Result:");
    expect(refused.text).toContain("This schedule is written in the channel settings file");
    expect(await h.agent.port.schedules()).toHaveLength(1);

    // The file names another person: another schedule replaces it. Then the file drops it: it goes.
    writeFileSync(file, [...digest("C0DIGEST", "U2"), ""].join("\n"));
    await expect
      .poll(async () => (await h.agent.port.schedules()).map((schedule) => schedule.userId), { timeout: 10_000 })
      .toEqual(["U2"]);
    expect((await h.agent.port.schedules())[0]?.id).not.toBe(kept?.id);
    writeFileSync(file, "channels: {}\n");
    await expect.poll(() => h.agent.port.schedules(), { timeout: 10_000 }).toEqual([]);
  });

  it("a mistake in a schedule is one sentence naming its line", async () => {
    const file = settingsFile([...digest("C0DIGEST"), "    missed: later"]);
    await expect(startHarness({ script, env: { GLASSBOX_CHANNELS: file } })).rejects.toThrow(
      `${file}:9: schedules[0].missed must be once or skip.`,
    );
  });
});

describe("a scheduled run's dangerous call on Slack", () => {
  it("waits for a click on a card at the channel's top level, then runs", async () => {
    const cancel = { order_id: CANCELLABLE_ORDER, reason: "scheduled clean-up" };
    const h = await startHarness({
      script: (request: ChatCompletionRequestBody) =>
        request.messages.at(-1)?.role === "tool"
          ? { content: `Result: ${textOf(request.messages.at(-1))}` }
          : { toolCalls: [toolCall("cancel_order", cancel, "call_cancel")] },
      env: { GLASSBOX_SCHEDULE_LOOK_MS: "50" },
    });
    await h.agent.port.saveSchedule(
      keptSince("sch_cleanup", `slack:${TEAM}:C0CLEAN:main`, minuteAgo(), "Cancel the orders left over."),
    );
    const card = await waitForApproval(h.fake, "C0CLEAN");
    expect(card.message.thread_ts).toBeUndefined();
    expect(visibleText(card.message)).toContain("asked me to run `cancel_order`");
    expect(h.model.requests).toHaveLength(1);
    expect((await h.click(card, "U1")).status).toBe(200);
    await expect
      .poll(() => h.fake.messages("C0CLEAN").find((message) => message.text?.startsWith("Result:"))?.text, {
        timeout: 15_000,
      })
      .toContain('"status":"success"');
  });
});

describe("a scheduled run over budget on Slack", () => {
  it("does not run, and says so once however many ticks come", async () => {
    const file = settingsFile(["channels:", "  C0BUDGET:", "    budget:", "      channel: { daily: { tokens: 800 } }"]);
    const h = await startHarness({
      script: budgetScript,
      env: { GLASSBOX_CHANNELS: file, GLASSBOX_SCHEDULE_LOOK_MS: "50" },
    });
    // A person's question spends the budget (850 tokens of 800).
    const first = await h.mention(`<@${BOT}> first`, { channel: "C0BUDGET" });
    await waitForBotMessage(h.fake, "C0BUDGET", first.ts, "First answer.");
    const calls = h.model.requests.length;

    const sessionId = `slack:${TEAM}:C0BUDGET:main`;
    // Every second (six fields): a tick at each look or two, each refused.
    await h.agent.port.saveSchedule(keptSince("sch_often", sessionId, "* * * * * *", "Check the queue."));
    const refusedRuns = async () =>
      (await h.agent.port.runsOfSession(sessionId)).filter((run) => run.scheduleId === "sch_often");
    await expect.poll(async () => (await refusedRuns()).length, { timeout: 20_000 }).toBeGreaterThanOrEqual(3);
    await h.agent.port.pauseSchedule("sch_often", true);
    await h.slack.conversations.idle();

    const said = h.fake
      .messages("C0BUDGET")
      .filter((message) => message.bot_id && message.text?.startsWith("A scheduled run did not run"));
    expect(said).toHaveLength(1);
    expect(said[0]?.text).toContain(
      "A scheduled run did not run. This channel has used its daily budget (850 tokens of 800 tokens)",
    );
    expect(said[0]?.text).toContain("Its later runs are skipped without a message until that changes.");
    expect(said[0]?.thread_ts).toBeUndefined();
    for (const run of await refusedRuns()) expect(run.status).toBe("error");
    expect(h.model.requests.length).toBe(calls);
  });

  it("a schedule whose person the channel no longer serves does not run, and says so once", async () => {
    const file = settingsFile(["channels:", "  C0TEAM:", "    users: [U2]"]);
    const h = await startHarness({ script, env: { GLASSBOX_CHANNELS: file, GLASSBOX_SCHEDULE_LOOK_MS: "50" } });
    const sessionId = `slack:${TEAM}:C0TEAM:main`;
    await h.agent.port.saveSchedule(keptSince("sch_left", sessionId, "* * * * * *", PROMPT));
    await expect
      .poll(async () => (await h.agent.port.runsOfSession(sessionId)).length, { timeout: 20_000 })
      .toBeGreaterThanOrEqual(3);
    await h.agent.port.pauseSchedule("sch_left", true);
    await h.slack.conversations.idle();
    const said = h.fake.messages("C0TEAM").filter((message) => message.bot_id);
    expect(said.map((message) => message.text)).toEqual([
      "A scheduled run did not run. I'm not set up to work for you in this channel; ask whoever runs glassbox here to add you, or ask me where you may. Its later runs are skipped without a message until that changes.",
    ]);
    expect(h.model.requests).toHaveLength(0);
  });
});
