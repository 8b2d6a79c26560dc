// From a Slack answer to the trace viewer, in real headless Chromium: the one pipeline runs against
// the fake Slack with its web server where GLASSBOX_PUBLIC_URL says; the browser follows the Trace
// button of an answer that is not its session's last, and the viewer opens that session with that
// run in focus, and the session named by its first message and place.
import { createServer } from "node:net";
import type { Browser } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { FakeMessage } from "../../../../src/testing/fake-slack.js";
import { BOT, CHANNEL, cleanUp, startHarness, waitForBotMessage, type Harness } from "../../../helpers/slack.js";
import { collectPageErrors, DESKTOP, launchChromium, VISIBLE } from "../../../helpers/web.js";

/** A port free on loopback now, for a server whose public address must be known before it starts. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

async function ask(h: Harness, question: string, answer: string, threadTs?: string): Promise<FakeMessage> {
  const { ts } = await h.mention(`<@${BOT}> ${question}`, threadTs ? { threadTs } : {});
  await waitForBotMessage(h.fake, CHANNEL, threadTs ?? ts, answer);
  await h.slack.conversations.idle();
  return h.fake.messages(CHANNEL, threadTs ?? ts).find((m) => m.text === answer) as FakeMessage;
}

const traceUrlOf = (message: FakeMessage) =>
  ((message.blocks ?? []) as Array<{ elements?: Array<{ action_id?: string; url?: string }> }>)
    .flatMap((block) => block.elements ?? [])
    .find((element) => element.action_id === "glassbox_trace")?.url;

describe("from a Slack answer to its trace, in Chromium", () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchChromium();
  });
  afterAll(async () => browser?.close());
  afterEach(cleanUp);

  it("the Trace button opens the session that answered, with the run that gave the answer in focus", async () => {
    const port = await freePort();
    const h = await startHarness({
      script: [{ content: "Other thread's answer." }, { content: "First answer here." }, { content: "Second answer." }],
      env: { GLASSBOX_WEB_PORT: String(port), GLASSBOX_PUBLIC_URL: `http://127.0.0.1:${port}` },
    });
    await ask(h, "something else", "Other thread's answer.");
    const first = await ask(h, "first question here", "First answer here.");
    const threadTs = first.thread_ts as string;
    await ask(h, "second question", "Second answer.", threadTs);
    const run = h.agent.store.db
      .prepare("SELECT id, session_id FROM runs WHERE output = ?")
      .get("First answer here.") as { id: string; session_id: string };

    const link = traceUrlOf(first);
    expect(link).toBe(
      `http://127.0.0.1:${port}/trace#session=${encodeURIComponent(run.session_id)}&run=${encodeURIComponent(run.id)}`,
    );
    const errors: string[] = [];
    const page = collectPageErrors(await browser.newPage(DESKTOP), errors);
    await page.goto(link as string);

    const opened = page.locator(`[id="run-${run.id}"]`);
    await opened.waitFor(VISIBLE);
    await expect.poll(() => opened.textContent()).toContain("First answer here.");
    // The session is the one chosen in the list, and focus sits in the linked run (not the session's last).
    await expect
      .poll(() => page.locator('.session-list a[aria-current="true"]').getAttribute("data-session-id"))
      .toBe(run.session_id);
    await expect
      .poll(() =>
        page.evaluate(`document.getElementById(${JSON.stringify(`run-${run.id}`)})?.contains(document.activeElement)`),
      )
      .toBe(true);
    // Names, not ids: the session by its first message and place, with the ids on hover.
    const listed = page.locator(`.session-list a[data-session-id="${run.session_id}"]`);
    expect(await listed.locator(".session-title").textContent()).toBe("first question here");
    const place = listed.locator(".session-place");
    expect(await place.textContent()).toBe("#channel-c1 · thread by user-u1");
    expect(await place.getAttribute("title")).toBe(`${run.session_id} · U1`);
    const heading = page.locator("#session-detail h2");
    expect(await heading.textContent()).toBe("first question here");
    expect(await heading.getAttribute("title")).toBe(run.session_id);
    expect(await page.locator("#session-detail .session-place").textContent()).toBe("#channel-c1 · thread by user-u1");
    expect(errors).toEqual([]);
    await page.close();
  });
});
