/**
 * `npm start` on SQLite with Slack and Discord in one process: both adapters keep their claims,
 * approvals and feedback through the agent's store port over GLASSBOX_DB, one connection for all.
 * An event delivered again (a Slack retry, a Discord redelivery), also after a restart, is answered
 * once; the claims of long ago are pruned at start.
 */
import { spawn } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { openSqliteStore } from "../../../src/store/sqlite-store.js";
import * as discord from "../../helpers/discord.js";
import {
  BOT,
  BOT_ID,
  BOT_TOKEN,
  CHANNEL,
  cleanUp,
  SIGNING_SECRET,
  startModel,
  startSlack,
  tempPaths,
  waitForBotMessage,
} from "../../helpers/slack.js";

afterEach(async () => {
  await cleanUp();
  await discord.cleanUp();
});

/** `npm start` as a person runs it; resolves once both platforms are connected. */
async function startBot(env: Record<string, string>): Promise<{ eventsUrl: string; stop(): Promise<number | null> }> {
  const bot = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], { env, stdio: ["ignore", "pipe", "pipe"] });
  let exitCode: number | null | undefined;
  const exited = new Promise<number | null>((resolve) => bot.on("exit", (code) => resolve((exitCode = code))));
  let stderr = "";
  bot.stderr.on("data", (chunk: Buffer) => void (stderr += chunk.toString()));
  const stop = () => {
    bot.kill("SIGTERM");
    return exited;
  };
  try {
    await expect
      .poll(
        () => {
          if (exitCode !== undefined) throw new Error(`the bot exited (${exitCode}): ${stderr}`);
          return /"msg":"Slack connected"/.test(stderr) && /"msg":"Discord connected"/.test(stderr);
        },
        { timeout: 30_000, interval: 50 },
      )
      .toBe(true);
  } catch (error) {
    await stop();
    throw error;
  }
  const { eventsUrl } = JSON.parse(stderr.split("\n").find((line) => line.includes('"Slack connected"')) ?? "{}") as {
    eventsUrl: string;
  };
  return { eventsUrl, stop };
}

describe("npm start with Slack and Discord in one process, on SQLite", () => {
  it("answers a Slack retry and a Discord redelivery once each, before and after a restart, and prunes old claims at start", {
    timeout: 90_000,
  }, async () => {
    const slackFake = await startSlack();
    const discordFake = await discord.startFake();
    const model = await startModel((request) => ({
      content: `answer to ${String(request.messages.findLast((message) => message.role === "user")?.content)}`,
    }));
    const paths = tempPaths();
    // A claim from long ago, which startup forgets; a recent one, which it keeps.
    const before = openSqliteStore(paths.db);
    before.claim("slack:event:EvOLD", "slack:event:EvRECENT");
    before.db
      .prepare("UPDATE claims SET claimed_at = ? WHERE id = ?")
      .run("2020-01-01T00:00:00.000Z", "slack:event:EvOLD");
    before.close();
    const env = {
      PATH: process.env.PATH ?? "",
      SLACK_BOT_TOKEN: BOT_TOKEN,
      SLACK_SIGNING_SECRET: SIGNING_SECRET,
      SLACK_API_URL: slackFake.apiUrl,
      PORT: "0",
      GLASSBOX_HOST: "127.0.0.1",
      DISCORD_TOKEN: discordFake.token,
      DISCORD_API_URL: discordFake.apiUrl,
      OPENAI_BASE_URL: model.url,
      LLM_MODEL: "gpt-4o-mini",
      GLASSBOX_DB: paths.db,
      GLASSBOX_SHOP_DB: paths.shopDb,
    };
    const ts = slackFake.nextTs();
    const mention = { type: "app_mention", user: "U1", channel: CHANNEL, text: `<@${BOT}> hello`, ts };

    const first = await startBot(env);
    let dmId: string;
    try {
      // The web server runs beside Slack and Discord, at its default address: the trace viewer answers.
      const trace = await fetch("http://127.0.0.1:8787/trace");
      expect(trace.status).toBe(200);
      expect(await trace.text()).toMatch(/<title>[^<]*trace/i);
      expect((await slackFake.sendEvent(first.eventsUrl, mention, { eventId: "Ev0ONCE" })).status).toBe(200);
      await waitForBotMessage(slackFake, CHANNEL, ts, "answer to hello");
      dmId = (await discordFake.sendMessage({ channelId: discord.DM, authorId: discord.USER, content: "hello there" }))
        .id;
      await discord.waitForBotMessage(discordFake, discord.DM, "answer to hello there");
      expect((await slackFake.sendEvent(first.eventsUrl, mention, { eventId: "Ev0ONCE", retryNum: 1 })).status).toBe(
        200,
      );
    } finally {
      expect(await first.stop()).toBe(0);
    }

    // A new process: nothing of the first is in memory, only the claims in the file.
    const second = await startBot(env);
    try {
      expect((await slackFake.sendEvent(second.eventsUrl, mention, { eventId: "Ev0ONCE", retryNum: 2 })).status).toBe(
        200,
      );
      await discordFake.redeliver(dmId);
      // A later message of each conversation, so the deliveries again had their turn before it.
      await slackFake.sendEvent(second.eventsUrl, {
        ...mention,
        text: `<@${BOT}> again`,
        ts: slackFake.nextTs(),
        thread_ts: ts,
      });
      await waitForBotMessage(slackFake, CHANNEL, ts, "answer to again");
      await discordFake.sendMessage({ channelId: discord.DM, authorId: discord.USER, content: "and again" });
      await discord.waitForBotMessage(discordFake, discord.DM, "answer to and again");
    } finally {
      expect(await second.stop()).toBe(0);
    }

    expect(
      slackFake
        .messages(CHANNEL, ts)
        .filter((message) => message.bot_id === BOT_ID)
        .map((message) => message.text),
    ).toEqual(["answer to hello", "answer to again"]);
    expect(discord.botTexts(discordFake, discord.DM)).toEqual(["answer to hello there", "answer to and again"]);
    expect(model.requests).toHaveLength(4);
    const after = openSqliteStore(paths.db, { readOnly: true });
    try {
      const claims = after.db.prepare("SELECT id FROM claims ORDER BY id").pluck().all() as string[];
      expect(claims).not.toContain("slack:event:EvOLD");
      expect(claims).toEqual(
        expect.arrayContaining([
          "slack:event:EvRECENT",
          "slack:event:Ev0ONCE",
          `slack:message:${CHANNEL}:${ts}`,
          `discord:message:${dmId}`,
        ]),
      );
      expect(after.db.prepare("SELECT count(*) FROM runs").pluck().get()).toBe(4);
    } finally {
      after.close();
    }
  });
});
