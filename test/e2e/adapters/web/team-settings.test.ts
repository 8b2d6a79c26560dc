// Channel settings on the web pages, in Chromium: the playground (the demo shop, the scripted model
// over the openai SDK, real SQLite files) with settings whose defaults (the web's sessions take them)
// put cancel_order under a two-person rule with web:bob as an approver, and a daily budget per person.
// The chat page's card says who decides, the requester's approval is counted (1 of 2), bob's second
// one runs the call; an answer past 80 % of the budget is followed by its note; the trace viewer
// shows how the budgets stand.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { demoReply } from "../../../../src/demo-script.js";
import type { ChatCompletionRequestBody } from "../../../../src/testing/scripted-model-server.js";
import {
  artifactsDir,
  CANCELLABLE_ORDER,
  cleanUp,
  collectPageErrors,
  getJson,
  launchChromium,
  pageOverflow,
  PHONE,
  postJson,
  startPlayground,
  VISIBLE,
  type Playground,
} from "../../../helpers/web.js";

function settingsFile(): string {
  const file = join(mkdtempSync(join(tmpdir(), "glassbox-web-team-")), "channels.yaml");
  writeFileSync(
    file,
    [
      "defaults:",
      '  approvers: ["web:bob"]',
      "  twoPersonRule: [cancel_order]",
      "  budget:",
      "    user: { daily: { tokens: 10000 } }",
      "",
    ].join("\n"),
  );
  return file;
}

/** The demo's rules, each call 10 tokens; "hello" is answered with 8,500 (85 % of the budget). */
function script(request: ChatCompletionRequestBody) {
  const last = request.messages.at(-1);
  if (last?.role === "user" && String(last.content).includes("hello"))
    return { content: "Hello!", usage: { promptTokens: 8000, completionTokens: 500 } };
  return { ...demoReply(request), usage: { promptTokens: 8, completionTokens: 2 } };
}

describe("channel settings on the web pages", () => {
  let playground: Playground;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    [browser, playground] = await Promise.all([
      launchChromium(),
      startPlayground({ script, env: { GLASSBOX_CHANNELS: settingsFile() } }),
    ]);
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    page = collectPageErrors(await context.newPage(), pageErrors);
  });
  afterAll(async () => {
    await browser?.close();
    await cleanUp();
  });

  it("a card under the two-person rule says who decides; the requester's approval is counted, bob's runs the call", async () => {
    await page.goto(playground.url);
    await page.locator("#connection", { hasText: "Live" }).waitFor(VISIBLE);
    await page.getByLabel("Message").fill(`Cancel order ${CANCELLABLE_ORDER} because it was a mistake`);
    await page.getByLabel("Message").press("Enter");
    const card = page.locator(".approval").last();
    await card.waitFor(VISIBLE);
    expect(await card.locator(".hint").textContent()).toBe(
      "Needs 2 approvals from different people; approvers: web:bob.",
    );

    await card.getByRole("button", { name: "Approve" }).click();
    await card.locator(".outcome", { hasText: "Your approval is counted: 1 of 2" }).waitFor(VISIBLE);
    await page.screenshot({ path: join(artifactsDir(), "web-two-person-counted.png"), fullPage: true });
    const approvalId = String(await card.getAttribute("data-approval-id"));
    const bob = await postJson(`${playground.url}api/approvals/${approvalId}`, { approved: true, userId: "bob" });
    expect(bob.body).toMatchObject({ outcome: "decided", resumed: true });
    await card.locator(".outcome", { hasText: "Approved by web:bob" }).waitFor(VISIBLE);
    await page
      .locator(".message.assistant .answer", { hasText: `order ${CANCELLABLE_ORDER} is now cancelled` })
      .waitFor(VISIBLE);
  });

  it("an answer past 80 % of the person's budget is followed by its note; the trace viewer shows the budgets", async () => {
    await page.getByLabel("Message").fill("hello");
    await page.getByLabel("Message").press("Enter");
    const notice = page.locator(".message.assistant .notice").last();
    await notice.waitFor(VISIBLE);
    const user = String(await page.evaluate('localStorage.getItem("glassbox.user")'));
    const used = await getJson<{ budgets: Array<{ of: string; used: number }> }>(`${playground.url}api/usage`);
    const mine = used.body.budgets.find((standing) => standing.of === user);
    expect(mine?.used).toBeGreaterThanOrEqual(8500);
    expect(await notice.textContent()).toBe(
      `Note: you have used ${Math.floor((mine?.used ?? 0) / 100)}% of your daily budget (${(mine?.used ?? 0).toLocaleString("en-US")} tokens of 10,000 tokens).`,
    );
    expect(await page.locator(".message.assistant .answer").last().textContent()).toBe("Hello!");

    await page.goto(`${playground.url}trace`);
    const budgets = page.locator("#budgets");
    await budgets.waitFor(VISIBLE);
    await budgets.locator("summary").click();
    const row = budgets.locator("tbody tr", { hasText: user });
    await row.waitFor(VISIBLE);
    expect(await row.locator("th").textContent()).toBe("user daily");
    expect(await row.textContent()).toContain("of 10,000 tokens");
    await page.screenshot({ path: join(artifactsDir(), "trace-budgets.png"), fullPage: true });

    // On a phone the panel fits: nothing scrolls sideways.
    const phone = collectPageErrors(await (await browser.newContext(PHONE)).newPage(), pageErrors);
    await phone.goto(`${playground.url}trace`);
    await phone.locator("#budgets").waitFor(VISIBLE);
    await phone.locator("#budgets summary").click();
    await phone.locator("#budgets tbody tr", { hasText: "user daily" }).waitFor(VISIBLE);
    expect(await pageOverflow(phone)).toBe(0);
    await phone.screenshot({ path: join(artifactsDir(), "trace-budgets-phone.png"), fullPage: true });
    expect(pageErrors).toEqual([]);
  });
});
