// The chat page's first hour, in real headless Chromium over the real server, agent and SQLite:
// the newest answer and an approval card stay in view as a conversation grows (and the page does
// not move while the person reads above), Stop cancels a run in progress, a decided approval says
// what was decided, by whom and when, no width of window makes the page scroll sideways, and a
// request that waits for a run slot says it is queued.
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { demoReply } from "../../../../src/demo-script.js";
import type { ChatCompletionRequestBody, ScriptedReply } from "../../../../src/testing/scripted-model-server.js";
import {
  artifactsDir,
  CANCELLABLE_ORDER,
  cleanUp,
  collectPageErrors,
  DESKTOP,
  getJson,
  launchChromium,
  pageOverflow,
  PENDING_ORDER,
  PHONE,
  postJson,
  startPlayground,
  VISIBLE,
  WAIT,
  type Playground,
} from "../../../helpers/web.js";

const ORDERS = ["20240315001", CANCELLABLE_ORDER, PENDING_ORDER, "20240315001"];

/** The demo's rules; a request that says HANG is never answered (until the run is stopped). */
function script(request: ChatCompletionRequestBody): ScriptedReply {
  const last = request.messages.at(-1);
  if (last?.role === "user" && String(last.content).includes("HANG")) return { hang: true };
  return demoReply(request);
}

describe("chat page in Chromium: following the conversation, stopping, decisions", () => {
  let browser: Browser;
  let playground: Playground;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    [browser, playground] = await Promise.all([launchChromium(), startPlayground({ script })]);
  });
  afterAll(async () => {
    await browser?.close();
    await cleanUp();
  });

  const open = async (options: typeof PHONE | typeof DESKTOP) => {
    const page = collectPageErrors(await browser.newPage(options), pageErrors);
    await page.goto(playground.url);
    await page.locator("#connection", { hasText: "Live" }).waitFor(VISIBLE);
    return page;
  };
  const sessionOf = async (page: Page) =>
    `web:${String(await page.evaluate('localStorage.getItem("glassbox.session")'))}`;
  const ask = async (page: Page, text: string) => {
    const answers = await page.locator(".message.assistant").count();
    await page.getByLabel("Message").fill(text);
    await page.getByLabel("Message").press("Enter");
    await expect.poll(() => page.locator(".message.assistant").count(), WAIT).toBe(answers + 1);
  };
  /** Whether the element is wholly on screen and not under the sticky composer. */
  const inView = async (page: Page, selector: string) =>
    Boolean(
      await page.evaluate(`(() => {
        const box = [...document.querySelectorAll(${JSON.stringify(selector)})].at(-1)?.getBoundingClientRect();
        const composer = document.querySelector("#composer")?.getBoundingClientRect();
        return box !== undefined && composer !== undefined && box.height > 0 && box.top >= 0 && box.bottom <= composer.top + 1;
      })()`),
    );

  it("works over plain HTTP on a LAN address, where the browser has no crypto.randomUUID: it connects and answers", async () => {
    const page = collectPageErrors(await browser.newPage(DESKTOP), pageErrors);
    // What a browser gives a page that is not a secure context (http://192.168.x.y:8787): no randomUUID.
    await page.addInitScript("delete Crypto.prototype.randomUUID");
    await page.goto(playground.url);
    expect(await page.evaluate("typeof crypto.randomUUID")).toBe("undefined");
    await page.locator("#connection", { hasText: "Live" }).waitFor(VISIBLE);
    await ask(page, `What is the status of order ${ORDERS[0]}?`);
    await page.locator(".message.assistant .run-footer").waitFor(VISIBLE);
    expect(await page.evaluate('localStorage.getItem("glassbox.session")')).toMatch(/^[0-9a-f]{16}$/);
    await page.close();
  });

  it('"What can you do here?" beside the buttons asks it: glassbox answers for this user, without the model', async () => {
    const page = await open(DESKTOP);
    const calls = playground.model.requests.length;
    await page.getByRole("button", { name: "What can you do here?" }).click();
    const answer = page.locator(".message.assistant").last();
    await expect.poll(() => answer.textContent(), WAIT).toContain("Here is what I can do here, for you:");
    expect(await answer.textContent()).toContain("cancel_order asks first");
    expect(playground.model.requests.length).toBe(calls);
    await page.close();
  });

  it("on a phone, a conversation shorter than the window leaves the page where it is: the header whole at the top", async () => {
    const page = await open(PHONE);
    const header = async () =>
      (await page.evaluate(
        `(() => { const box = document.querySelector("header.top").getBoundingClientRect(); return { top: box.top, scrolled: document.scrollingElement.scrollTop, taller: document.scrollingElement.scrollHeight - innerHeight }; })()`,
      )) as { top: number; scrolled: number; taller: number };
    expect(await header()).toEqual({ top: 0, scrolled: 0, taller: 0 });
    await ask(page, `What is the status of order ${ORDERS[0]}?`);
    await page.locator(".message.assistant .run-footer").waitFor(VISIBLE);
    expect(await header()).toEqual({ top: 0, scrolled: 0, taller: 0 });
  });

  it("keeps the newest answer, then the approval card, in view after several exchanges on a phone", async () => {
    const page = await open(PHONE);
    for (const [index, order] of ORDERS.entries()) {
      await ask(page, `What is the status of order ${order}?`);
      await page.locator(".message.assistant .run-footer").nth(index).waitFor(VISIBLE);
      await expect
        .poll(() => inView(page, ".message.assistant .run-footer"), { ...WAIT, message: `answer ${index + 1}` })
        .toBe(true);
    }
    await ask(page, `Cancel order ${CANCELLABLE_ORDER}`);
    await page.locator(".approval").waitFor(VISIBLE);
    await page.locator(".message.assistant .status", { hasText: "Waiting for a decision" }).waitFor(VISIBLE);
    await expect.poll(() => inView(page, ".approval"), WAIT).toBe(true);
    expect(await pageOverflow(page)).toBeLessThanOrEqual(0);
    await page.screenshot({ path: join(artifactsDir(), "web-chat-phone-approval.png") });

    // Approving: the card says what was decided, by whom and when, instead of "Nothing happens…".
    const card = page.locator(".approval");
    await card.getByRole("button", { name: "Approve" }).click();
    await card.locator(".outcome", { hasText: "Approved by you at" }).waitFor(VISIBLE);
    expect(await card.locator("h2").textContent()).toBe("Approved");
    expect(await card.textContent()).not.toContain("Nothing happens until someone decides");
    expect(await card.locator(".outcome").textContent()).toMatch(
      /^✓ Approved by you at \d{1,2}:\d{2}:\d{2}( [AP]M)?\.$/,
    );
    await page.locator(".message.assistant .answer", { hasText: "is now cancelled" }).waitFor(VISIBLE);
    await expect.poll(() => inView(page, ".message.assistant .run-footer"), WAIT).toBe(true);

    // After a reload the history says the same, from the store.
    await page.reload();
    await page.locator(".approval .outcome", { hasText: "Approved by you at" }).waitFor(VISIBLE);
    expect(await page.locator(".approval").textContent()).not.toContain("Nothing happens until someone decides");
    await page.close();
  });

  it("does not move the page while the person reads above; a button says what is new below and goes there", async () => {
    const page = await open(DESKTOP);
    for (const order of ORDERS.slice(0, 3)) {
      await ask(page, `What is the status of order ${order}?`);
      await page.locator(".message.assistant .answer", { hasText: order }).last().waitFor(VISIBLE);
    }
    await page.setViewportSize({ width: 1280, height: 500 });
    await page.evaluate("window.scrollTo(0, 0)");
    // Someone (another tab, an API client) asks in the same conversation.
    const { status } = await postJson(`${playground.url}api/runs`, {
      session: await sessionOf(page),
      input: `Cancel order ${PENDING_ORDER}`,
    });
    expect(status).toBe(202);
    await page.locator(".approval").waitFor({ state: "attached", timeout: 15_000 });
    const jump = page.locator("#jump");
    await jump.waitFor(VISIBLE);
    expect(await jump.textContent()).toBe("Approval needed ↓");
    expect(await page.evaluate("scrollY")).toBe(0);
    expect(await inView(page, ".approval")).toBe(false);

    await jump.click();
    await expect.poll(() => inView(page, ".approval"), WAIT).toBe(true);
    expect(await jump.isHidden()).toBe(true);

    // Denying (as the browser's own user, who did not ask: the buttons are not offered) is for the requester; the API decides here.
    const approvalId = await page.locator(".approval").getAttribute("data-approval-id");
    await postJson(`${playground.url}api/approvals/${approvalId}`, { approved: false, userId: "web:api" });
    await page.locator(".approval .outcome", { hasText: "Denied by web:api at" }).waitFor(VISIBLE);
    expect(await page.locator(".approval h2").textContent()).toBe("Denied");
    await page.close();
  });

  it("offers Stop while a run is in progress, and Stop cancels it", async () => {
    const page = await open(DESKTOP);
    const stop = page.getByRole("button", { name: "Stop" });
    expect(await stop.isHidden()).toBe(true);
    await ask(page, "HANG on, think hard");
    await stop.waitFor(VISIBLE);
    await expect
      .poll(
        () => playground.model.requests.some((request) => JSON.stringify(request.body.messages).includes("HANG on")),
        WAIT,
      )
      .toBe(true);
    await stop.click();
    const answer = page.locator(".message.assistant .answer").last();
    await answer.filter({ hasText: "Stopped." }).waitFor(VISIBLE);
    await stop.waitFor({ state: "hidden", timeout: 15_000 });
    const { body } = await getJson<{ runs: Array<{ status: string }> }>(
      `${playground.url}api/sessions/${encodeURIComponent(await sessionOf(page))}/runs`,
    );
    expect(body.runs.map((run) => run.status)).toEqual(["cancelled"]);

    // The conversation goes on.
    await ask(page, "What is 6*7?");
    await page.locator(".message.assistant .answer", { hasText: "6*7 = 42" }).waitFor(VISIBLE);
    expect(await stop.isHidden()).toBe(true);
    await page.close();
  });

  it("never scrolls sideways, on a phone or a desktop, whatever the answer holds", async () => {
    for (const size of [PHONE, DESKTOP]) {
      const page = await open(size);
      await ask(
        page,
        `Is this valid: ${`{"key":"${"a".repeat(400)}"}`} and what is the status of order ${CANCELLABLE_ORDER}?`,
      );
      await page.locator(".message.assistant .tool.ok").waitFor(VISIBLE);
      await page.locator(".message.assistant .tool.ok summary").click();
      await page.locator(".message.assistant .answer", { hasText: "in total" }).waitFor(VISIBLE);
      expect(await pageOverflow(page), `${size.viewport.width} px`).toBeLessThanOrEqual(0);
      await page.close();
    }
    expect(pageErrors).toEqual([]);
  });
});

describe("chat page in Chromium: a request that waits for a run slot", () => {
  let browser: Browser;
  let playground: Playground;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    [browser, playground] = await Promise.all([
      launchChromium(),
      startPlayground({ script, env: { GLASSBOX_MAX_CONCURRENT_RUNS: "1" } }),
    ]);
  });
  afterAll(async () => {
    await browser?.close();
    await cleanUp();
  });

  const open = async () => {
    const page = collectPageErrors(await browser.newPage(DESKTOP), pageErrors);
    await page.goto(playground.url);
    await page.locator("#connection", { hasText: "Live" }).waitFor(VISIBLE);
    return page;
  };
  const send = async (page: Page, text: string) => {
    await page.getByLabel("Message").fill(text);
    await page.getByLabel("Message").press("Enter");
  };

  it("says it is queued while another conversation holds the only slot, and answers once that one stops", async () => {
    const busy = await open();
    await send(busy, "HANG on, think hard");
    await expect
      .poll(
        () => playground.model.requests.some((request) => JSON.stringify(request.body.messages).includes("HANG on")),
        WAIT,
      )
      .toBe(true);
    const waiting = await open(); // another browser context: another session
    await send(waiting, "What is 6*7?");
    const status = waiting.locator(".message.assistant .status").last();
    // Said once the request has waited QUEUED_NOTICE_MS for the slot.
    await status.filter({ hasText: "Queued: glassbox is busy with other requests" }).waitFor(VISIBLE);
    await busy.getByRole("button", { name: "Stop" }).click();
    await waiting.locator(".message.assistant .answer", { hasText: "6*7 = 42" }).waitFor(VISIBLE);
    expect(await status.textContent()).not.toContain("Queued");
    await Promise.all([busy.close(), waiting.close()]);
    expect(pageErrors).toEqual([]);
  });
});
