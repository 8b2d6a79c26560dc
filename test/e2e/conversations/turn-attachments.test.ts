// Files through the split deployment: an ingress process and a worker process (the real src/main.ts
// with GLASSBOX_ROLE) on PostgreSQL, the fake Slack (which serves files only to the bot token, and
// hands one download to another host) and the fake Discord (whose CDN needs no token). Ingress puts
// the files' references in the turn and never downloads; the worker fetches them and the model gets
// the image as an image part and the text file's text; a file that cannot be read is one sentence
// in the conversation, and the rest of the message runs. Runs only when GLASSBOX_TEST_DATABASE_URL is set.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startFakeDiscord, type FakeDiscord } from "../../../src/testing/fake-discord.js";
import { startFakeSlack, type FakeSlack } from "../../../src/testing/fake-slack.js";
import {
  startScriptedModelServer,
  type ChatCompletionRequestBody,
  type ScriptedModelServer,
} from "../../../src/testing/scripted-model-server.js";
import { openStorePort, type AnyStorePort } from "../../../src/store/index.js";
import { PNG, type Part } from "../../helpers/attachments.js";
import {
  createTestDatabase,
  NEEDS_DATABASE,
  TEST_DATABASE_URL,
  type TestDatabase,
} from "../fixtures/queue-database.js";
import { startRoleProcess, type RoleProcess } from "../fixtures/role-processes.js";

const BOT = "U0FAKEBOT1";
const TEAM = "T0FAKE0001";
const SECRET = "ingress-files-signing-secret";
const BOT_TOKEN = "xoxb-fake-bot-token";
const GUILD = "1300000000000000100";
const CHANNEL = "1300000000000000101";
const DM = "1300000000000000200";
const USER = "1300000000000000300";
const WAIT = { timeout: 30_000, interval: 50 };

/** The user message of the request that asked about `tag`: a string, or parts. */
function requestAbout(model: ScriptedModelServer, tag: string): string | Part[] | undefined {
  const asked = (body: ChatCompletionRequestBody) =>
    body.messages.find((message) => message.role === "user" && JSON.stringify(message.content).includes(tag));
  return model.requests.map((request) => asked(request.body)).find(Boolean)?.content as string | Part[] | undefined;
}

describe.runIf(Boolean(TEST_DATABASE_URL))(
  `files through an ingress and a worker process on PostgreSQL (${NEEDS_DATABASE})`,
  () => {
    let database: TestDatabase;
    let slack: FakeSlack;
    let discord: FakeDiscord;
    let model: ScriptedModelServer;
    let store: AnyStorePort;
    let ingress: RoleProcess;
    let worker: RoleProcess;
    let directory: string;

    beforeAll(async () => {
      directory = mkdtempSync(join(tmpdir(), "glassbox-ingress-files-"));
      database = await createTestDatabase(TEST_DATABASE_URL as string);
      slack = await startFakeSlack({ signingSecret: SECRET, botUserId: BOT, teamId: TEAM });
      discord = await startFakeDiscord({
        guilds: [{ id: GUILD, name: "Test Guild", channels: [{ id: CHANNEL, name: "general" }] }],
        dmChannels: [{ id: DM, recipientId: USER }],
      });
      model = await startScriptedModelServer({ script: () => ({ content: "Seen." }) });
      const common = {
        GLASSBOX_DATABASE_URL: database.url,
        GLASSBOX_DB: join(directory, "unused.db"),
        SLACK_BOT_TOKEN: BOT_TOKEN,
        SLACK_SIGNING_SECRET: SECRET,
        SLACK_API_URL: slack.apiUrl,
        DISCORD_TOKEN: "fake-bot-token",
        DISCORD_API_URL: discord.apiUrl,
        PORT: "0",
        GLASSBOX_HOST: "127.0.0.1",
        GLASSBOX_WEB_PORT: "0",
      };
      // The worker first: it migrates the store and the queue. Ingress has no model settings at all.
      worker = await startRoleProcess("worker", {
        ...common,
        OPENAI_BASE_URL: model.url,
        OPENAI_API_KEY: "sk-test-ingress-files",
        LLM_MODEL: "gpt-4o-mini",
      });
      ingress = await startRoleProcess("ingress", common);
      await discord.identified();
      store = await openStorePort({ databaseUrl: database.url, databasePath: "unused.db", poolSize: 2 });
    }, 120_000);

    afterAll(async () => {
      await Promise.all([ingress?.kill(), worker?.kill()]);
      await store?.close();
      await model?.close();
      await slack?.close();
      await discord?.close();
      await database?.drop();
      if (directory) rmSync(directory, { recursive: true, force: true });
    }, 60_000);

    const eventsUrl = () => (ingress.lines.find((line) => /^ingress: receiving/.test(line.msg))?.slack as string) ?? "";
    const slackBotTexts = (channel: string, threadTs?: string) =>
      slack
        .messages(channel, threadTs)
        .filter((message) => message.bot_id !== undefined)
        .map((message) => message.text ?? "");

    it("Slack: the worker fetches a shared image (through a redirect, the token kept from the other host) and a text file for the model", async () => {
      const image = slack.files.add({ name: "cat.png", mimetype: "image/png", data: PNG, redirect: true });
      const notes = slack.files.add({
        name: "notes.md",
        mimetype: "text/plain",
        data: Buffer.from("# Plan\nShip on Friday."),
      });
      const ts = slack.nextTs();
      const sent = await slack.sendEvent(
        eventsUrl(),
        {
          type: "app_mention",
          user: "U1",
          channel: "C1",
          text: `<@${BOT}> what are these? slack-1`,
          ts,
          files: [image, notes],
        },
        { signingSecret: SECRET },
      );
      expect(sent.status).toBe(200);
      await vi.waitFor(() => expect(slackBotTexts("C1", ts)).toContain("Seen."), WAIT);

      const parts = requestAbout(model, "slack-1") as Part[];
      expect(parts[0]?.text).toContain("what are these? slack-1");
      expect(parts[0]?.text).toContain("[Attached image: cat.png (image/png, 70 B)]");
      expect(parts[1]?.image_url?.url).toBe(`data:image/png;base64,${PNG.toString("base64")}`);
      expect(parts[2]?.text).toContain('<file name="notes.md">\n# Plan\nShip on Friday.\n</file>');
      // Slack's own host got the bot token, from the worker; the host it redirected to never did.
      const slackHops = slack.files.downloads.filter((download) => download.host === "slack");
      expect(slackHops).toHaveLength(2);
      expect(slackHops.every((download) => download.authorization === `Bearer ${BOT_TOKEN}`)).toBe(true);
      const redirected = slack.files.downloads.filter((download) => download.host === "redirected");
      expect(redirected).toHaveLength(1);
      expect(redirected[0]?.authorization).toBeUndefined();
      // The conversation keeps the message ingress stored: the text and a line per file, no file data.
      const history = await store.sessionHistory(`slack:${TEAM}:C1:${ts}`);
      const stored = history.messages.find((message) => message.message.role === "user")?.message.content as string;
      expect(stored).toContain("what are these? slack-1");
      expect(stored).toContain(
        "[Attached file: cat.png (image/png, 70 B); what could be read of it was shown to you with this message only]",
      );
      expect(stored).toContain("[Attached file: notes.md (text/plain, 22 B);");
      expect(stored).not.toContain("Ship on Friday");
    }, 60_000);

    it("Slack: a file too large is one sentence in the conversation, and a message of files only still runs with the rest", async () => {
      const huge = slack.files.add({
        name: "video.mp4",
        mimetype: "video/mp4",
        data: Buffer.from("x"),
        size: 50 * 1024 * 1024,
      });
      const small = slack.files.add({
        name: "slack-2.txt",
        mimetype: "text/plain",
        data: Buffer.from("the second file's words"),
      });
      const ts = slack.nextTs();
      const downloadsBefore = slack.files.downloads.length;
      const sent = await slack.sendEvent(
        eventsUrl(),
        {
          type: "message",
          channel_type: "im",
          subtype: "file_share",
          user: "U1",
          channel: "D1",
          text: "",
          ts,
          files: [huge, small],
        },
        { signingSecret: SECRET },
      );
      expect(sent.status).toBe(200);
      await vi.waitFor(() => expect(slackBotTexts("D1")).toContain("Seen."), WAIT);

      expect(slackBotTexts("D1")).toContain(
        "I could not read video.mp4: it is 50 MB, over the 8.0 MB limit for one file.",
      );
      const content = requestAbout(model, "slack-2.txt") as string;
      expect(content).toContain(
        "[Attached file video.mp4 (video/mp4, 50 MB) could not be read: it is 50 MB, over the 8.0 MB limit for one file.]",
      );
      expect(content).toContain("the second file's words");
      // The declared size refused the large one before any byte was asked for.
      expect(slack.files.downloads.slice(downloadsBefore).map((download) => download.path)).toEqual([
        expect.stringContaining("slack-2.txt"),
      ]);
    }, 60_000);

    it("Discord: the worker fetches an attached image and a CSV from the CDN, with no token", async () => {
      await discord.sendMessage({
        channelId: CHANNEL,
        guildId: GUILD,
        authorId: USER,
        content: "what are these? discord-1",
        mentionsBot: true,
        attachments: [
          { filename: "pixel.png", contentType: "image/png", data: PNG },
          { filename: "sales.csv", contentType: "text/csv; charset=utf-8", data: Buffer.from("month,total\nMay,12\n") },
        ],
      });
      await vi.waitFor(
        () =>
          expect(
            discord
              .messages(CHANNEL)
              .filter((message) => message.author.id === discord.botUserId)
              .map((message) => message.content),
          ).toContain("Seen."),
        WAIT,
      );

      const parts = requestAbout(model, "discord-1") as Part[];
      expect(parts[0]?.text).toContain("[Attached image: pixel.png (image/png, 70 B)]");
      expect(parts[1]?.image_url?.url).toBe(`data:image/png;base64,${PNG.toString("base64")}`);
      expect(parts[2]?.text).toContain('<file name="sales.csv">\nmonth,total\nMay,12\n\n</file>');
      expect(discord.cdn.downloads).toHaveLength(2);
      expect(discord.cdn.downloads.every((download) => download.authorization === undefined)).toBe(true);
    }, 60_000);
  },
);
