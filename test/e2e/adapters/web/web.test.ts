// The web playground in real headless Chromium (Debian's chromium, driven by playwright-core): the
// chat page over Server-Sent Events with the demo's scripted model, the durable approval flow by
// clicking, and the trace viewer with its steps and chart. Screenshots go to test-artifacts/.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  artifactsDir,
  CANCELLABLE_ORDER,
  cleanUp,
  collectPageErrors,
  getJson,
  launchChromium,
  NO_MODEL,
  postJson,
  startPlayground,
  startWithoutModel,
  tempDir,
  VISIBLE,
  type Playground,
} from "../../../helpers/web.js";

describe("web playground in Chromium", () => {
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let playground: Playground;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    [browser, playground] = await Promise.all([launchChromium(), startPlayground()]);
    context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    page = collectPageErrors(await context.newPage(), pageErrors);
  });

  afterAll(async () => {
    await browser?.close();
    await cleanUp();
  });

  it("sends a message and shows the tool activity and the answer", async () => {
    await page.goto(playground.url);
    await expect.poll(() => page.locator("#model-label").textContent()).toBe("scripted model (demo)");
    await page.locator("#connection", { hasText: "Live" }).waitFor(VISIBLE);

    await page.getByLabel("Message").fill(`What is the status of order ${CANCELLABLE_ORDER}?`);
    await page.getByLabel("Message").press("Enter");

    const answer = page.locator(".message.assistant .answer").last();
    await answer.filter({ hasText: "$60.97 in total" }).waitFor(VISIBLE);
    expect(await answer.textContent()).toBe(
      `Order ${CANCELLABLE_ORDER} is paid: 2 × USB-C cable (2 m), 1 × 65 W USB-C charger, $60.97 in total. It has not shipped yet, so it can still be cancelled.`,
    );
    expect(await answer.locator("strong").textContent()).toBe("paid");
    await page.locator(".activity .tool.ok", { hasText: "get_order_status" }).waitFor(VISIBLE);
    expect(await page.locator(".message.user .text").last().textContent()).toBe(
      `What is the status of order ${CANCELLABLE_ORDER}?`,
    );
    // Screen readers hear the answer once it is complete.
    await expect.poll(() => page.locator("#announcer").textContent()).toContain("$60.97 in total");
    expect(await page.getByLabel("Message").inputValue()).toBe("");
  });

  it("asks before a dangerous tool, and on Approve runs it and shows the result", async () => {
    await page.getByLabel("Message").fill(`Cancel order ${CANCELLABLE_ORDER} because it was a mistake`);
    await page.getByRole("button", { name: "Send" }).click();

    const card = page.locator(".approval").last();
    await card.waitFor(VISIBLE);
    expect(await card.locator("code").textContent()).toBe("cancel_order");
    expect(JSON.parse((await card.locator("pre.arguments").textContent()) ?? "")).toEqual({
      order_id: CANCELLABLE_ORDER,
      reason: "it was a mistake",
    });
    await page.locator(".message.assistant .status", { hasText: "Waiting for a decision" }).last().waitFor(VISIBLE);
    await page.screenshot({ path: join(artifactsDir(), "web-chat-approval.png"), fullPage: true });

    await card.getByRole("button", { name: "Approve" }).click();
    await card.locator(".outcome", { hasText: "Approved by you" }).waitFor(VISIBLE);
    const answer = page.locator(".message.assistant .answer").last();
    await answer.filter({ hasText: "is now cancelled" }).waitFor(VISIBLE);
    expect(await answer.textContent()).toBe(
      `Done: order ${CANCELLABLE_ORDER} is now cancelled (reason: it was a mistake).`,
    );
    expect(await card.getByRole("button").count()).toBe(0);
    await page.locator(".activity .tool.ok", { hasText: "cancel_order" }).waitFor(VISIBLE);
    await page.screenshot({ path: join(artifactsDir(), "web-chat.png"), fullPage: true });

    // The same history comes back after a reload, from the store.
    await page.reload();
    await page.locator(".approval .outcome", { hasText: "Approved by you" }).waitFor(VISIBLE);
    expect(await page.locator(".message.assistant .answer").allTextContents()).toEqual([
      expect.stringContaining("$60.97 in total"),
      `Done: order ${CANCELLABLE_ORDER} is now cancelled (reason: it was a mistake).`,
    ]);
  });

  it("shows the session in the trace: each step with its tokens, a chart bar per step, and the exact messages on demand", async () => {
    const session = `web:${String(await page.evaluate('localStorage.getItem("glassbox.session")'))}`;
    const { body } = await getJson<{ runs: Array<{ runId: string }> }>(
      `${playground.url}api/sessions/${encodeURIComponent(session)}/runs`,
    );
    const steps: Array<{ step: number; promptTokens: number; completionTokens: number }> = [];
    for (const run of body.runs) {
      const answer = await getJson<{ steps: Array<{ step: number; promptTokens: number; completionTokens: number }> }>(
        `${playground.url}api/runs/${run.runId}/steps`,
      );
      steps.push(...answer.body.steps);
    }
    expect(body.runs).toHaveLength(2);
    expect(steps.length).toBe(4); // lookup + answer; cancel (paused) + answer after Approve

    await page.getByRole("navigation", { name: "Pages" }).getByRole("link", { name: "Trace" }).click();
    await page.waitForURL(/\/trace#session=/);
    await page.locator(`.session-list a[aria-current="true"][data-session-id="${session}"]`).waitFor(VISIBLE);
    const rows = page.locator('.waterfall [data-kind="model"]');
    await expect.poll(() => rows.count(), { timeout: 15_000 }).toBe(steps.length);
    const shown = await rows.evaluateAll((elements) =>
      elements.map((row) => [
        row.getAttribute("data-step"),
        row.querySelector(".prompt-tokens")?.textContent,
        row.querySelector(".completion-tokens")?.textContent,
      ]),
    );
    const format = (value: number) => value.toLocaleString("en-US");
    expect(shown).toEqual(
      steps.map((step) => [String(step.step), format(step.promptTokens), format(step.completionTokens)]),
    );
    // Cost is unknown for the scripted model: shown as —, never as $0.
    expect(await rows.locator(".cost").allTextContents()).toEqual(steps.map(() => "—"));

    // The chart: one bar per step, as tall as its prompt tokens.
    const bars = page.locator("svg.chart rect.bar");
    expect(await bars.count()).toBe(steps.length);
    expect(
      await bars.evaluateAll((elements) => elements.map((bar) => Number(bar.getAttribute("data-tokens")))),
    ).toEqual(steps.map((step) => step.promptTokens));
    const heights = await bars.evaluateAll((elements) => elements.map((bar) => Number(bar.getAttribute("height"))));
    const tallest = steps.findIndex((step) => step.promptTokens === Math.max(...steps.map((one) => one.promptTokens)));
    expect(Math.max(...heights)).toBe(heights[tallest]);
    expect(await page.locator("svg.chart").getAttribute("role")).toBe("img");

    // A tool call opens in the side panel: arguments, result envelope, approval.
    const panel = page.locator("#span-panel");
    await page.locator('.waterfall [data-kind="tool"]', { hasText: "cancel_order" }).first().click();
    await panel.locator("details.raw > summary").last().click();
    await panel.locator("pre", { hasText: '"status": "cancelled"' }).waitFor(VISIBLE);
    expect(await panel.textContent()).toContain(`Approval: approved by web:`);
    // The approval it waited for is a span of its own.
    expect(await page.locator('.waterfall [data-kind="approval"] .span-label').allTextContents()).toEqual([
      "Approval of cancel_order: approved",
    ]);

    // The exact messages of a model call load when it is opened.
    await page.locator('.waterfall [data-kind="model"]').first().click();
    const payload = panel.locator("section.sent");
    await payload.locator(".payload-message.role-system").waitFor(VISIBLE);
    expect(await payload.locator(".payload-message.role-user pre").first().textContent()).toBe(
      `What is the status of order ${CANCELLABLE_ORDER}?`,
    );

    await page.evaluate("window.scrollTo(0, 0)"); // a sticky sidebar would follow the last click down the page
    await page.screenshot({ path: join(artifactsDir(), "web-trace.png"), fullPage: true });
    expect(pageErrors).toEqual([]);
  });

  it("draws a specialist's run under the step that called it, one line until opened, with its own steps", async () => {
    const directory = tempDir();
    const agentsFile = join(directory, "agents.json");
    writeFileSync(
      agentsFile,
      JSON.stringify({
        agents: {
          researcher: {
            description: "Looks up orders.",
            systemPrompt: "You are the RESEARCHER.",
            tools: ["get_order_status"],
          },
        },
      }),
    );
    const nestedPlayground = await startPlayground({
      env: { GLASSBOX_AGENTS: agentsFile },
      script: (request) => {
        const researcher = String(request.messages[0]?.content ?? "").includes("RESEARCHER");
        const hasResult = request.messages.some((message) => message.role === "tool");
        if (researcher)
          return hasResult
            ? { content: "It was delivered." }
            : { toolCalls: [{ name: "get_order_status", arguments: '{"order_id":"20240315001"}' }] };
        return hasResult
          ? { content: "Your order was delivered." }
          : { toolCalls: [{ name: "agent_researcher", arguments: '{"task":"Status of order 20240315001?"}' }] };
      },
    });
    const { body } = await postJson(`${nestedPlayground.url}api/runs`, {
      session: "nested",
      input: "Where is my order?",
    });
    const runId = (body as { runId: string }).runId;
    await expect
      .poll(async () => (await getJson<{ done: boolean }>(`${nestedPlayground.url}api/runs/${runId}`)).body.done, {
        timeout: 15_000,
      })
      .toBe(true);

    await page.goto(`${nestedPlayground.url}trace#session=${encodeURIComponent("web:nested")}`);
    await page.locator("section.run").first().waitFor(VISIBLE);
    expect(await page.locator("section.run").count()).toBe(1); // the sub-agent's run is not a run of its own
    // Its run is under the call that started it, one line until opened.
    const sub = page.locator('.waterfall [data-kind="specialist"]');
    expect(await sub.locator(".span-label").textContent()).toBe("researcher's run");
    const call = page.locator(`.waterfall [data-key="${await sub.getAttribute("data-parent")}"]`);
    expect(await call.locator(".span-label").textContent()).toContain("agent_researcher");
    const inside = page.locator(`.waterfall [data-parent="${await sub.getAttribute("data-key")}"]`);
    expect(await inside.first().isVisible()).toBe(false);
    await sub.click();
    await inside.first().waitFor(VISIBLE);
    expect(await page.locator("#span-panel .meta").first().textContent()).toMatch(/^final · 2 steps · /);
    expect(await inside.and(page.locator('[data-kind="model"]')).count()).toBe(2);
    expect(await inside.locator(".span-label").allTextContents()).toContain("get_order_status(order_id: 20240315001)");
    expect(await page.locator("#span-panel .run-answer").textContent()).toBe("It was delivered.");
    expect(pageErrors).toEqual([]);
  });

  it("regression: a message with no break in it (a pasted key) wraps on a phone instead of widening the page", async () => {
    const phone = await browser.newPage({ viewport: { width: 390, height: 844 }, isMobile: true });
    try {
      await phone.goto(playground.url);
      await phone.locator("#connection", { hasText: "Live" }).waitFor(VISIBLE);
      const key = "k".repeat(3_000);
      await phone.getByLabel("Message").fill(`Is this key valid? ${key}`);
      await phone.getByLabel("Message").press("Enter");
      await phone.locator(".message.user .text", { hasText: key }).waitFor(VISIBLE);
      expect(Number(await phone.evaluate("document.documentElement.scrollWidth"))).toBeLessThanOrEqual(390);
    } finally {
      await phone.close();
    }
  });

  it("says plainly what to set when no model is configured, names no model (regression: it said gpt-4o-mini), and does not offer to send", async () => {
    const { url } = await startWithoutModel();
    const other = await context.newPage();
    await other.goto(url);
    const problem = other.getByRole("alert").filter({ hasText: "OPENAI_API_KEY" });
    await problem.waitFor(VISIBLE);
    expect(await problem.textContent()).toBe(`No model yet. ${NO_MODEL} Then restart glassbox.`);
    expect(await other.locator("#model-label").textContent()).toBe("none configured");
    await other.goto(`${url}trace`);
    await expect.poll(() => other.locator("#model-label").textContent()).toBe("none configured");
    await other.goto(url);
    await other.locator("#connection", { hasText: "Live" }).waitFor(VISIBLE);
    expect(await other.getByRole("button", { name: "Send" }).isDisabled()).toBe(true);
    await other.screenshot({ path: join(artifactsDir(), "web-no-model.png") });
    await other.close();
  });

  it("with an API token, takes it from ?token= once and keeps it for the API and the event stream", async () => {
    const tokened = await startPlayground({ server: { apiToken: "page-token" } });
    const other = await browser.newPage();
    await other.goto(`${tokened.url}?token=page-token`);
    await other.locator("#connection", { hasText: "Live" }).waitFor(VISIBLE);
    expect(other.url()).toBe(tokened.url); // the token left the address bar
    await other.getByLabel("Message").fill("hello");
    await other.getByLabel("Message").press("Enter");
    await other.locator(".message.assistant .answer", { hasText: "scripted demo model" }).waitFor(VISIBLE);
    await other.close();

    // Without it in the address, the page asks once, and a wrong token is asked for again.
    const asking = await browser.newPage();
    await asking.goto(tokened.url);
    const dialog = asking.getByRole("dialog", { name: "API token" });
    await dialog.waitFor(VISIBLE);
    await dialog.getByLabel("Token").fill("not-it");
    await dialog.getByLabel("Token").press("Enter");
    await dialog.getByText("That token was not accepted.").waitFor(VISIBLE);
    await dialog.getByLabel("Token").fill("page-token");
    await dialog.getByRole("button", { name: "Use this token" }).click();
    await asking.locator("#connection", { hasText: "Live" }).waitFor(VISIBLE);
    expect(await asking.locator("#model-label").textContent()).toBe("scripted model (demo)");
    await asking.close();
  });

  it("regression: a link's ?token= does not quietly replace the token this browser keeps; the header says whom it acts as", async () => {
    const shared = await startPlayground({ server: { apiUsers: { "ana-token": "web:ana", "bo-token": "web:bo" } } });
    const people = await browser.newContext();
    try {
      const first = await people.newPage();
      await first.goto(`${shared.url}?token=ana-token`);
      await first.locator("#acting", { hasText: "Acting as web:ana" }).waitFor(VISIBLE);
      await first.close();

      // Another token in a link: asked first; kept when declined, and the link's token gone from the address.
      const declined = await people.newPage();
      await declined.goto(`${shared.url}?token=bo-token`);
      const asked = declined.getByRole("dialog", { name: "Another API token" });
      await asked.waitFor(VISIBLE);
      expect(declined.url()).toBe(shared.url);
      await asked.getByRole("button", { name: "Keep my token" }).click();
      await declined.locator("#acting", { hasText: "Acting as web:ana" }).waitFor(VISIBLE);
      await declined.close();

      const accepted = await people.newPage();
      await accepted.goto(`${shared.url}trace?token=bo-token`);
      await accepted
        .getByRole("dialog", { name: "Another API token" })
        .getByRole("button", { name: "Use the link's token" })
        .click();
      await accepted.locator("#acting", { hasText: "Acting as web:bo" }).waitFor(VISIBLE);
      await accepted.close();

      // The same token again is no question.
      const again = await people.newPage();
      await again.goto(`${shared.url}?token=bo-token`);
      await again.locator("#acting", { hasText: "Acting as web:bo" }).waitFor(VISIBLE);
      expect(await again.getByRole("dialog").count()).toBe(0);
      await again.close();
    } finally {
      await people.close();
    }
  });
});
