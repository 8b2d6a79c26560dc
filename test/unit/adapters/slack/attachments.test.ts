// Files shared in Slack reach the model: the real Bolt app against the fake Slack, which serves
// files at url_private_download only to the bot token and can hand a download to another host.
import { afterEach, describe, expect, it } from "vitest";
import { createTraceReader } from "../../../../src/store/sqlite-traces.js";
import { fetchSlackFiles } from "../../../../src/adapters/slack/slack-files.js";
import { PNG, userContent, type Part } from "../../../helpers/attachments.js";
import {
  BOT,
  BOT_TOKEN,
  botTexts,
  CHANNEL,
  cleanUp,
  startHarness,
  startSlack,
  waitForBotMessage,
} from "../../../helpers/slack.js";

afterEach(cleanUp);

describe("files shared in Slack", () => {
  it("gives the model an image (fetched through a redirect, the token kept from the other host) and a text file's content", async () => {
    const harness = await startHarness({ script: [{ content: "A tiny image and your notes." }] });
    const { fake, model } = harness;
    const image = fake.files.add({ name: "cat.png", mimetype: "image/png", data: PNG, redirect: true });
    const notes = fake.files.add({
      name: "notes.md",
      mimetype: "text/plain",
      data: Buffer.from("# Plan\nShip on Friday."),
    });
    const { ts } = await harness.mention(`<@${BOT}> what are these?`, { extra: { files: [image, notes] } });
    await waitForBotMessage(fake, CHANNEL, ts, "A tiny image and your notes.");

    const parts = userContent(model.requests[0]!.body) as Part[];
    expect(parts[0]?.text).toContain("what are these?");
    expect(parts[0]?.text).toContain("[Attached image: cat.png (image/png, 70 B)]");
    expect(parts[1]?.image_url?.url).toBe(`data:image/png;base64,${PNG.toString("base64")}`);
    expect(parts[2]?.text).toContain('<file name="notes.md">\n# Plan\nShip on Friday.\n</file>');
    // Slack's own host got the token; the host the download was redirected to never did.
    const slackHops = fake.files.downloads.filter((download) => download.host === "slack");
    const redirected = fake.files.downloads.filter((download) => download.host === "redirected");
    expect(slackHops.length).toBe(2);
    expect(slackHops.every((download) => download.authorization === `Bearer ${BOT_TOKEN}`)).toBe(true);
    expect(redirected.length).toBe(1);
    expect(redirected[0]?.authorization).toBeUndefined();
    // The trace says what was attached and how the model got it.
    await harness.slack.conversations.idle();
    const [run] = createTraceReader(harness.agent.store).runsOfSession(`slack:T0FAKE0001:${CHANNEL}:${ts}`);
    expect(run?.input).toContain("Attached: cat.png (image/png, 70 B) — offered as an image");
    expect(run?.input).toContain("Attached: notes.md (text/plain, 22 B) — its text inlined");
  });

  it("says in one sentence that a file is too large (declared, or found while reading), and still answers the rest", async () => {
    const harness = await startHarness({ script: [{ content: "Here is what I can say." }] });
    const { fake, model } = harness;
    const huge = fake.files.add({
      name: "video.mp4",
      mimetype: "video/mp4",
      data: Buffer.from("x"),
      size: 50 * 1024 * 1024,
    });
    // Declared small, served without a length: only reading finds it is over the limit.
    const lying = fake.files.add({
      name: "dump.txt",
      mimetype: "text/plain",
      data: Buffer.alloc(9 * 1024 * 1024, 0x61),
      size: 1_000,
      chunked: true,
    });
    const { ts } = await harness.dm("summarise these", { extra: { subtype: "file_share", files: [huge, lying] } });
    await waitForBotMessage(fake, "D1", undefined, "Here is what I can say.");

    const said = botTexts(fake, "D1").join("\n");
    expect(said).toContain("I could not read video.mp4: it is 50 MB, over the 8.0 MB limit for one file.");
    expect(said).toContain(
      "I could not read dump.txt: it turned out larger than the 8.0 MB limit for one file (the download was stopped there).",
    );
    // The declared size refused the first before any request; the second was cut off while reading.
    expect(fake.files.downloads.filter((download) => download.path.includes("video.mp4"))).toHaveLength(0);
    const content = userContent(model.requests[0]!.body) as string;
    expect(content).toContain("summarise these");
    expect(content).toContain(
      "[Attached file video.mp4 (video/mp4, 50 MB) could not be read: it is 50 MB, over the 8.0 MB limit for one file.]",
    );
    expect(content).not.toContain("aaaa");
    expect(ts).toBeTruthy();
  });

  it("takes Slack's sign-in page (a token without files:read) for no file, in one sentence", async () => {
    const fake = await startSlack();
    const file = fake.files.add({ name: "cat.png", mimetype: "image/png", data: PNG });
    const fetched = await fetchSlackFiles([file], { token: "xoxb-not-this-workspace", apiUrl: fake.apiUrl });
    expect(fetched.problems).toEqual([
      "I could not read cat.png: Slack sent its sign-in page instead of the file (the app needs the files:read scope; reinstall it after adding the scope).",
    ]);
    expect(fetched.attachments[0]).not.toHaveProperty("data");
  });

  it("never sends the token to a host that is not Slack's", async () => {
    const fake = await startSlack();
    const file = fake.files.add({ name: "cat.png", mimetype: "image/png", data: PNG });
    // Without SLACK_API_URL naming it, 127.0.0.1 is not Slack: the fake gets no token and answers with its sign-in page.
    const fetched = await fetchSlackFiles([file], { token: BOT_TOKEN });
    expect(fake.files.downloads.at(-1)?.authorization).toBeUndefined();
    expect(fetched.problems[0]).toContain("sign-in page");
  });
});
