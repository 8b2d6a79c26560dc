// Files uploaded in the playground reach the model, in real headless Chromium over the real server,
// agent and SQLite: chosen with "Attach files", sent with the message, shown in the conversation and
// in the trace (the run's attachments, and the image part in "Exactly what was sent").
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hasImagePart, PNG, userContent, type Part } from "../../../helpers/attachments.js";
import {
  artifactsDir,
  cleanUp,
  collectPageErrors,
  DESKTOP,
  getJson,
  launchChromium,
  postJson,
  startPlayground,
  VISIBLE,
  WAIT,
  type Playground,
} from "../../../helpers/web.js";
import { join } from "node:path";

describe("files uploaded in the playground", () => {
  let browser: Browser;
  let playground: Playground;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    [browser, playground] = await Promise.all([
      launchChromium(),
      startPlayground({ script: () => ({ content: "I see a tiny image and your notes." }) }),
    ]);
  });
  afterAll(async () => {
    await browser?.close();
    await cleanUp();
  });

  const open = async (path = "") => {
    const page = collectPageErrors(await browser.newPage(DESKTOP), pageErrors);
    await page.goto(`${playground.url}${path}`);
    return page;
  };
  const requestsBefore = () => playground.model.requests.length;

  it("sends an image and a text file with the message; the model gets an image part and the text, the page lists the files", async () => {
    const page = await open();
    await page.locator("#connection", { hasText: "Live" }).waitFor(VISIBLE);
    const before = requestsBefore();
    await page.locator("#files").setInputFiles([
      { name: "cat.png", mimeType: "image/png", buffer: PNG },
      { name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from("Ship on Friday.") },
    ]);
    await expect
      .poll(() => page.locator("#attachments li").allTextContents(), WAIT)
      .toEqual(["cat.png (70 B)×", "notes.txt (15 B)×"]);
    await page.getByLabel("Message").fill("What are these?");
    await page.getByLabel("Message").press("Enter");
    await page.locator(".message.assistant .answer", { hasText: "I see a tiny image" }).waitFor(VISIBLE);

    expect(await page.locator(".message.user .text").last().textContent()).toBe(
      "What are these?\nAttached: cat.png (70 B)\nAttached: notes.txt (15 B)",
    );
    expect(await page.locator("#attachments").isHidden()).toBe(true);
    const parts = userContent(playground.model.requests[before]!.body) as Part[];
    expect(parts[0]?.text).toContain("What are these?");
    expect(parts[1]?.image_url?.url).toBe(`data:image/png;base64,${PNG.toString("base64")}`);
    expect(parts[2]?.text).toContain('<file name="notes.txt">\nShip on Friday.\n</file>');
    await page.screenshot({ path: join(artifactsDir(), "attachments-chat.png"), fullPage: true });

    // The trace: the run's attachments, and the image part as the model was sent it.
    const session = `web:${String(await page.evaluate('localStorage.getItem("glassbox.session")'))}`;
    const trace = await open(`trace#session=${encodeURIComponent(session)}`);
    await trace.locator(".run-attachments li").first().waitFor(VISIBLE);
    expect(await trace.locator(".run-attachments li").allTextContents()).toEqual([
      "Attached: cat.png (image/png, 70 B) — offered as an image",
      "Attached: notes.txt (text/plain, 15 B) — its text inlined",
    ]);
    await trace.locator('.waterfall [data-kind="model"]').first().click(); // what the model saw, in the panel
    await trace.locator(".image-part figcaption", { hasText: "image part: image/png, 70 bytes" }).waitFor(VISIBLE);
    expect(
      await trace
        .locator(".image-part img")
        .first()
        .evaluate((image) => (image as unknown as { naturalWidth: number }).naturalWidth),
    ).toBe(1);
    await trace.screenshot({ path: join(artifactsDir(), "attachments-trace.png"), fullPage: true });
    expect(pageErrors).toEqual([]);
  });

  it("says in one sentence that a file is too large to send, and sends the rest of the message", async () => {
    const page = await open();
    await page.locator("#connection", { hasText: "Live" }).waitFor(VISIBLE);
    const before = requestsBefore();
    await page
      .locator("#files")
      .setInputFiles([
        { name: "huge.bin", mimeType: "application/octet-stream", buffer: Buffer.alloc(9 * 1024 * 1024) },
      ]);
    await page.getByLabel("Message").fill("Can you read this?");
    await page.getByLabel("Message").press("Enter");
    await page
      .locator("#send-error", {
        hasText: "I could not read huge.bin: it is 9.0 MB, over the 8.0 MB limit for one file.",
      })
      .waitFor(VISIBLE);
    await page.locator(".message.assistant .answer", { hasText: "I see a tiny image" }).last().waitFor(VISIBLE);
    expect(userContent(playground.model.requests[before]!.body)).toBe("Can you read this?");
  });

  it("a message the server refuses (too long) keeps its chosen files, to send again once it is shorter", async () => {
    const page = await open();
    await page.locator("#connection", { hasText: "Live" }).waitFor(VISIBLE);
    await page
      .locator("#files")
      .setInputFiles([{ name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from("Ship on Friday.") }]);
    await page.getByLabel("Message").fill("x".repeat(25_000));
    await page.getByLabel("Message").press("Enter");
    await page
      .locator("#send-error", { hasText: "over the limit of 20,000; shorten it, or send it in parts." })
      .waitFor(VISIBLE);
    expect(await page.locator("#attachments li").allTextContents()).toEqual(["notes.txt (15 B)×"]);

    const before = requestsBefore();
    await page.getByLabel("Message").fill("Read my notes.");
    await page.getByLabel("Message").press("Enter");
    await expect.poll(() => playground.model.requests.length, WAIT).toBeGreaterThan(before);
    expect(JSON.stringify(userContent(playground.model.requests[before]!.body))).toContain("Ship on Friday.");
    await expect.poll(() => page.locator("#attachments li").count(), WAIT).toBe(0);
  });

  it("over the API: a message of files alone runs; a file over the limit is refused from its length and told to the model and the caller", async () => {
    const before = requestsBefore();
    const big = Buffer.alloc(8 * 1024 * 1024 + 3).toString("base64");
    const { status, body } = await postJson(`${playground.url}api/runs`, {
      session: "web:api-files",
      userId: "ann",
      attachments: [
        { name: "pixel.png", type: "image/png", data: PNG.toString("base64") },
        { name: "big.bin", data: big },
      ],
    });
    expect(status).toBe(202);
    expect(body.problems).toEqual(["I could not read big.bin: it is 8.0 MB, over the 8.0 MB limit for one file."]);
    await expect.poll(() => playground.model.requests.length, WAIT).toBeGreaterThan(before);
    const sent = playground.model.requests[before]!.body;
    expect(hasImagePart(sent)).toBe(true);
    expect(JSON.stringify(sent.messages)).toContain("big.bin (application/octet-stream, 8.0 MB) could not be read");

    const refused = await postJson(`${playground.url}api/runs`, {
      session: "web:api-files",
      userId: "ann",
      input: "hi",
      attachments: "not a list",
    });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toBe(
      'Give "attachments" as a list of {"name", "type", "data"} objects, the data in base64.',
    );
  });

  it("POST /api/runs stored 200,000 attachment entries: a list longer than a message's files is refused whole, and nothing runs", async () => {
    const before = requestsBefore();
    const many = Array.from({ length: 200_000 }, (_, index) => ({ name: `f${index}.txt`, data: "aGk=" }));
    const refused = await postJson(`${playground.url}api/runs`, {
      session: "web:api-many",
      userId: "ann",
      input: "hi",
      attachments: many,
    });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toBe(
      "A message may carry at most 8 files, and this one has 200000; send the others in another message.",
    );
    // Nothing was stored: the session does not exist.
    expect((await getJson(`${playground.url}api/sessions/web%3Aapi-many/runs`)).status).toBe(404);
    expect(playground.model.requests.length).toBe(before);
  });
});
