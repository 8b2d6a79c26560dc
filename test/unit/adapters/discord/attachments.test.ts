// Files attached to a Discord message reach the model through the one pipeline (ingress passes their
// references, the worker fetches them): the real discord.js client against the fake Discord, whose MESSAGE_CREATE carries attachments served from its CDN path (no token needed).
import { afterEach, describe, expect, it } from "vitest";
import { createTraceReader } from "../../../../src/store/sqlite-traces.js";
import { PNG, userContent, type Part } from "../../../helpers/attachments.js";
import {
  botTexts,
  cleanUp,
  DM,
  GUILD,
  startHarness,
  USER,
  waitForBotMessage,
  CHANNEL,
} from "../../../helpers/discord.js";

afterEach(cleanUp);

describe("files attached on Discord", () => {
  it("gives the model an attached image and a CSV's content, fetched from the CDN without the bot token", async () => {
    const h = await startHarness({ script: [{ content: "A pixel and two rows." }] });
    await h.fake.sendMessage({
      channelId: CHANNEL,
      guildId: GUILD,
      authorId: USER,
      content: "what are these?",
      mentionsBot: true,
      attachments: [
        { filename: "pixel.png", contentType: "image/png", data: PNG },
        { filename: "sales.csv", contentType: "text/csv; charset=utf-8", data: Buffer.from("month,total\nMay,12\n") },
      ],
    });
    await waitForBotMessage(h.fake, CHANNEL, "A pixel and two rows.");
    await h.discord.idle();

    const parts = userContent(h.model.requests[0]!.body) as Part[];
    expect(parts[0]?.text).toContain("what are these?");
    expect(parts[0]?.text).toContain("[Attached image: pixel.png (image/png, 70 B)]");
    expect(parts[1]?.image_url?.url).toBe(`data:image/png;base64,${PNG.toString("base64")}`);
    expect(parts[2]?.text).toContain('<file name="sales.csv">\nmonth,total\nMay,12\n\n</file>');
    expect(h.fake.cdn.downloads).toHaveLength(2);
    expect(h.fake.cdn.downloads.every((download) => download.authorization === undefined)).toBe(true);
    // The conversation keeps the message as it was accepted: its text, and a line per file it came with.
    const [stored] = (await h.agent.port.sessionHistory(`discord:${GUILD}:${CHANNEL}`)).messages;
    expect(stored?.message.content).toContain("what are these?");
    expect(stored?.message.content).toContain("[Attached file: pixel.png (image/png, 70 B);");
    expect(stored?.message.content).toMatch(/\[Attached file: sales\.csv \(text\/csv; ?charset=utf-8, 19 B\);/);
    // The run's trace says what was attached and how the model got it.
    const [run] = createTraceReader(h.agent.store).runsOfSession(`discord:${GUILD}:${CHANNEL}`);
    expect(run?.input).toContain("Attached: pixel.png (image/png, 70 B) — offered as an image");
    expect(run?.input).toMatch(/Attached: sales\.csv \(text\/csv; ?charset=utf-8, 19 B\) — its text inlined/);
  });

  it("answers a message of files only; a file over the limit gets one sentence, and a file of unknown type is named", async () => {
    const h = await startHarness({ script: [{ content: "I see a binary file." }] });
    await h.fake.sendMessage({
      channelId: DM,
      authorId: USER,
      content: "",
      attachments: [
        { filename: "movie.mov", contentType: "video/quicktime", data: Buffer.from("x"), size: 200 * 1024 * 1024 },
        { filename: "blob.bin", data: Buffer.from([0, 1, 2, 3]) },
      ],
    });
    await waitForBotMessage(h.fake, DM, "I see a binary file.");
    expect(botTexts(h.fake, DM)[0]).toBe(
      "I could not read movie.mov: it is 200 MB, over the 8.0 MB limit for one file.",
    );
    const content = userContent(h.model.requests[0]!.body) as string;
    expect(content).toContain(
      "[Attached file: blob.bin (application/octet-stream, 4 B); its content cannot be read here, only its name, type and size]",
    );
    expect(content).toContain("movie.mov (video/quicktime, 200 MB) could not be read");
    expect(h.fake.cdn.downloads.map((download) => download.path)).toEqual([expect.stringContaining("blob.bin")]);
  });

  it("keeps a conversation's order while a message's file is still downloading", async () => {
    const h = await startHarness({ script: [{ content: "First answer." }, { content: "Second answer." }] });
    await h.fake.sendMessage({
      channelId: DM,
      authorId: USER,
      content: "first, with a file",
      attachments: [{ filename: "slow.txt", contentType: "text/plain", data: Buffer.from("slow"), delayMs: 300 }],
    });
    await h.fake.sendMessage({ channelId: DM, authorId: USER, content: "second, without" });
    await waitForBotMessage(h.fake, DM, "Second answer.");
    const firstUser = (index: number) =>
      String(h.model.requests[index]?.body.messages.filter((message) => message.role === "user").at(-1)?.content);
    expect(firstUser(0)).toContain("first, with a file");
    expect(firstUser(1)).toContain("second, without");
  });
});
