// The trace viewer's run view in real headless Chromium over the real server, agent and SQLite: a
// session whose first run hands a cancellation to a specialist that waits for an approval, and
// whose second run is a pipeline. Its spans as a waterfall to scale, read with the keyboard in the
// side panel (a sheet on a phone), what the model saw with what changed marked, and a run in
// progress growing in the page as it happens.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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
  postJson,
  startPlayground,
  tempDir,
  VISIBLE,
  WAIT,
  type Playground,
} from "../../../helpers/web.js";

const PHONE_TALL = { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true };
const text = (message: ChatCompletionRequestBody["messages"][number] | undefined) => String(message?.content ?? "");

/** The main agent hands work to the researcher; the researcher cancels (dangerous) or looks up; the writer writes. */
function script(request: ChatCompletionRequestBody): ScriptedReply {
  const system = text(request.messages[0]);
  const last = request.messages.at(-1);
  const hasResult = last?.role === "tool";
  const task = text(request.messages.findLast((message) => message.role === "user"));
  if (system.includes("RESEARCHER")) {
    if (hasResult) return { content: task.includes("Cancel") ? "Cancelled it." : "It was delivered." };
    const order = /\d{11}/.exec(task)?.[0] ?? "20240315001";
    return task.includes("Cancel")
      ? { toolCalls: [{ name: "cancel_order", arguments: JSON.stringify({ order_id: order, reason: "asked" }) }] }
      : { toolCalls: [{ name: "get_order_status", arguments: JSON.stringify({ order_id: order }) }] };
  }
  if (system.includes("WRITER")) return { content: `Dear customer: **${text(last)}** <b>plain</b>` };
  if (hasResult) return { content: `The researcher says: ${JSON.parse(text(last)).data?.answer}` };
  const order = /\d{11}/.exec(task)?.[0] ?? "";
  return { toolCalls: [{ name: "agent_researcher", arguments: JSON.stringify({ task: `Cancel order ${order}` }) }] };
}

interface RunRow {
  runId: string;
  done: boolean;
  status: string;
  approvals: Array<{ id: string; status: string }>;
}

describe("the run view in Chromium", () => {
  let browser: Browser;
  let playground: Playground;
  const pageErrors: string[] = [];
  const runsOf = async (session: string) =>
    (await getJson<{ runs: RunRow[] }>(`${playground.url}api/sessions/${encodeURIComponent(session)}/runs`)).body.runs;
  /** Polls (outside a test too: the set-up waits this way) until `read` gives something. */
  const until = async <T>(what: string, read: () => Promise<T | undefined>): Promise<T> => {
    const deadline = Date.now() + WAIT.timeout;
    for (;;) {
      const value = await read();
      if (value) return value;
      if (Date.now() > deadline) throw new Error(`Waited in vain for ${what}.`);
      await new Promise((resolve) => setTimeout(resolve, WAIT.interval));
    }
  };
  const pendingApproval = (session: string) =>
    until(
      `an approval in ${session}`,
      async () => (await runsOf(session)).flatMap((run) => run.approvals).find((one) => one.status === "pending")?.id,
    );
  const finished = (runId: string) =>
    until(`${runId} to finish`, async () =>
      (await getJson<{ done: boolean }>(`${playground.url}api/runs/${runId}`)).body.done ? true : undefined,
    );
  const start = async (session: string, input: string) =>
    (await postJson(`${playground.url}api/runs`, { session, input })).body.runId as string;
  const approve = async (session: string) => {
    const id = await pendingApproval(session);
    expect((await postJson(`${playground.url}api/approvals/${id}`, { approved: true })).status).toBe(200);
  };
  const open = async (size: typeof DESKTOP | typeof PHONE_TALL, session: string) => {
    const page = collectPageErrors(await browser.newPage(size), pageErrors);
    await page.goto(`${playground.url}trace#session=${encodeURIComponent(session)}`);
    await page.locator(".waterfall").first().waitFor(VISIBLE);
    return page;
  };
  const row = (page: Page, kind: string, hasText?: string) =>
    page.locator(`.waterfall [role="treeitem"][data-kind="${kind}"]`, hasText ? { hasText } : {});
  const focusedLabel = (page: Page) =>
    page.evaluate("document.activeElement?.querySelector('.span-label')?.textContent ?? ''") as Promise<string>;

  beforeAll(async () => {
    const agentsFile = join(tempDir(), "agents.json");
    writeFileSync(
      agentsFile,
      JSON.stringify({
        agents: {
          researcher: {
            description: "Looks up and cancels orders.",
            systemPrompt: "You are the RESEARCHER.",
            tools: ["get_order_status", "cancel_order"],
          },
          writer: { description: "Writes replies.", systemPrompt: "You are the WRITER." },
        },
        pipelines: { triage: ["researcher", "writer"] },
      }),
    );
    [browser, playground] = await Promise.all([
      launchChromium(),
      startPlayground({ script, env: { GLASSBOX_AGENTS: agentsFile } }),
    ]);
    // web:shop: the specialist cancels after an approval, then a pipeline runs in the same conversation.
    const first = await start("shop", `Please cancel order ${CANCELLABLE_ORDER}`);
    await approve("web:shop");
    await finished(first);
    await finished(await start("shop", "/pipeline triage order 20240315001 is late"));
  });
  afterAll(async () => {
    await browser?.close();
    await cleanUp();
  });

  it("draws each run as a waterfall to scale: model calls, tool calls, the specialist's run with its approval, the pipeline's stages", async () => {
    const page = await open(DESKTOP, "web:shop");
    const trees = page.locator(".waterfall");
    expect(await trees.count()).toBe(2);
    // Run 1: the run, its two model calls and the specialist's call; the specialist's run is one line until opened.
    const first = trees.nth(0);
    expect(await first.locator('[role="treeitem"]:not([hidden]) .span-label').allTextContents()).toEqual([
      "Run 1",
      "Model call 1",
      `agent_researcher(task: Cancel order ${CANCELLABLE_ORDER})`,
      "researcher's run",
      "Model call 2",
    ]);
    const specialist = row(page, "specialist", "researcher's run");
    expect(await specialist.getAttribute("aria-expanded")).toBe("false");
    // Tokens and cost on each span; the run's are the sum of its own calls and its specialist's.
    const tokens = async (kind: string) =>
      (await first.locator(`[data-kind="${kind}"]:not([hidden]) .prompt-tokens`).allTextContents()).map((value) =>
        Number(value.replaceAll(",", "")),
      );
    const [runPrompt = 0] = await tokens("run");
    const [specialistPrompt = 0] = await tokens("specialist");
    const models = await tokens("model");
    expect(models).toHaveLength(2);
    expect(runPrompt).toBe(models.reduce((sum, value) => sum + value, 0) + specialistPrompt);
    expect(await first.locator('[data-kind="model"]:not([hidden]) .cost').allTextContents()).toEqual(["—", "—"]);

    // The second run: a pipeline whose stages are spans, closed until opened.
    const pipeline = trees.nth(1);
    expect(await pipeline.locator('[role="treeitem"]:not([hidden]) .span-label').allTextContents()).toEqual([
      "Run 2: pipeline triage",
      "Stage 1",
      "Stage 2",
    ]);
    // Its answer as Markdown: bold as bold, nothing parsed as HTML.
    const output = page.locator("section.run.pipeline .run-output");
    expect(await output.locator("p").textContent()).toBe("Dear customer: It was delivered. <b>plain</b>");
    expect(await output.locator("strong").textContent()).toBe("It was delivered.");
    expect(await output.locator("b").count()).toBe(0);
    // The approval is listed under the run as before.
    expect(await page.getByRole("list", { name: "Approvals" }).textContent()).toMatch(
      new RegExp(`cancel_order\\(order_id: ${CANCELLABLE_ORDER}, reason: asked\\) for web:.*: approved by web:api at `),
    );

    // To scale: the main run's second model call starts after the approval was decided.
    await specialist.click();
    const approval = row(page, "approval");
    await approval.waitFor(VISIBLE);
    expect(await approval.locator(".span-label").textContent()).toBe("Approval of cancel_order: approved");
    const place = (locator: ReturnType<Page["locator"]>) =>
      locator.locator(".span-bar").evaluate((bar) => {
        const style = (bar as unknown as { style: { getPropertyValue(name: string): string } }).style;
        return [parseFloat(style.getPropertyValue("--left")), parseFloat(style.getPropertyValue("--width"))];
      });
    const [approvalLeft = 0, approvalWidth = 0] = await place(approval);
    // The run's own second call comes after its specialist's (which has a second call too).
    const [secondLeft = 0] = await place(first.locator('[data-kind="model"][data-step="2"]').last());
    expect(secondLeft).toBeGreaterThanOrEqual(approvalLeft + approvalWidth - 0.01);
    const [runLeft, runWidth] = await place(first.locator('[data-kind="run"]'));
    expect([runLeft, runWidth]).toEqual([0, 100]);
    await page.screenshot({ path: join(artifactsDir(), "run-view-desktop.png"), fullPage: true });
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it("moves between spans with the keyboard, opens one in the side panel with Enter, and closes it with Escape", async () => {
    const page = await open(DESKTOP, "web:shop");
    await row(page, "run").first().focus();
    expect(await focusedLabel(page)).toBe("Run 1");
    await page.keyboard.press("j");
    expect(await focusedLabel(page)).toBe("Model call 1");
    await page.keyboard.press("ArrowDown");
    expect(await focusedLabel(page)).toContain("agent_researcher");
    await page.keyboard.press("ArrowDown");
    expect(await focusedLabel(page)).toBe("researcher's run");
    // Right opens the specialist's run, then walks into it.
    await page.keyboard.press("ArrowRight");
    expect(await row(page, "specialist").getAttribute("aria-expanded")).toBe("true");
    await page.keyboard.press("ArrowRight");
    expect(await focusedLabel(page)).toBe("Model call 1");
    await page.keyboard.press("j");
    expect(await focusedLabel(page)).toBe("Approval of cancel_order: approved");
    await page.keyboard.press("j");
    expect(await focusedLabel(page)).toBe(`cancel_order(order_id: ${CANCELLABLE_ORDER}, reason: asked)`);
    // The focus is visible: the focused row is outlined.
    expect((await page.evaluate("getComputedStyle(document.activeElement).outlineStyle")) as string).not.toBe("none");

    await page.keyboard.press("Enter");
    const panel = page.locator("#span-panel");
    await panel.waitFor(VISIBLE);
    expect(await panel.locator("h2").textContent()).toBe(`cancel_order(order_id: ${CANCELLABLE_ORDER}, reason: asked)`);
    expect(await panel.locator(".approval-decision").textContent()).toBe("Approval: approved by web:api.");
    // The result folded as JSON, and raw on demand.
    expect(await panel.locator(".json-view").last().textContent()).toContain('"cancelled"');
    expect(await panel.locator("details.raw pre").last().isVisible()).toBe(false);
    await panel.locator("details.raw > summary").last().click();
    expect(await panel.locator("details.raw pre").last().textContent()).toContain('"status": "success"');
    await page.screenshot({ path: join(artifactsDir(), "run-view-panel-desktop.png") });
    expect(new URL(page.url()).hash).toContain("span=tool");

    await page.keyboard.press("Escape");
    await panel.waitFor({ state: "hidden" });
    expect(await focusedLabel(page)).toBe(`cancel_order(order_id: ${CANCELLABLE_ORDER}, reason: asked)`);
    // k goes back up; Left from a leaf goes to its parent run.
    await page.keyboard.press("k");
    expect(await focusedLabel(page)).toBe("Approval of cancel_order: approved");
    await page.keyboard.press("ArrowLeft");
    expect(await focusedLabel(page)).toBe("researcher's run");
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it("shows what a model call saw: the messages sent with the new tool result marked, and the tools offered", async () => {
    const page = await open(DESKTOP, "web:shop");
    await page.locator('.waterfall [data-kind="model"][data-step="2"]:not([hidden])').first().focus();
    await page.keyboard.press("Enter");
    const panel = page.locator("#span-panel");
    const sent = panel.locator("section.sent");
    await sent.locator(".payload-message, .error").first().waitFor(VISIBLE);
    expect(await sent.locator(".error").count(), await sent.innerText()).toBe(0);
    expect(await panel.locator("h2").textContent()).toBe("Model call 2");
    const roles = await sent.locator(".payload-messages > .payload-message .role").allTextContents();
    expect(roles.map((role) => role.split(" ")[0])).toEqual(["system", "user", "assistant", "tool"]);
    // What is new since model call 1: the model's own call, and the specialist's answer as a tool result.
    const changed = sent.locator(".payload-message.changed");
    expect(await changed.evaluateAll((items) => items.map((item) => item.getAttribute("data-change")))).toEqual([
      "reply",
      "tool-result",
    ]);
    const result = sent.locator(".payload-message.change-tool-result");
    expect(await result.locator(".change-label").textContent()).toBe("new tool result");
    expect(await result.textContent()).toContain("Cancelled it.");
    expect(await sent.locator(".diff-summary").textContent()).toBe(
      "2 of 4 messages are new or changed since model call 1.",
    );
    expect(
      await sent.locator(".payload-message.role-user").evaluate((item) => item.classList.contains("changed")),
    ).toBe(false);
    // The tools it was offered, as the server got them.
    const runId = String(await page.locator("section.run").first().getAttribute("id")).replace(/^run-/, "");
    const { body } = await getJson<{ request: { tools?: Array<{ function: { name: string } }> } | null }>(
      `${playground.url}api/runs/${runId}/steps/2/payload`,
    );
    expect(await sent.locator(".payload-tools > li summary code").allTextContents()).toEqual(
      body.request?.tools?.map((tool) => tool.function.name),
    );
    await page.screenshot({ path: join(artifactsDir(), "run-view-model-saw.png") });

    // The pipeline's second stage: its answer as Markdown (bold as bold, nothing parsed as HTML).
    await row(page, "stage", "Stage 2").click();
    await panel.locator("h2", { hasText: "Stage 2" }).waitFor(VISIBLE);
    expect(await panel.locator(".run-input").textContent()).toBe("Input: It was delivered.");
    expect(await panel.locator(".run-answer strong").textContent()).toBe("It was delivered.");
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it("fits a phone (390 x 844): the waterfall in two lines a row, a span read in a full-width sheet, nothing sideways", async () => {
    const page = await open(PHONE_TALL, "web:shop");
    await row(page, "specialist").locator(".toggle").click();
    await row(page, "stage", "Stage 1").locator(".toggle").click();
    await row(page, "approval").waitFor(VISIBLE);
    expect(await page.evaluate("document.documentElement.scrollWidth <= innerWidth")).toBe(true);
    expect(await pageOverflow(page)).toBeLessThanOrEqual(0);
    await page.screenshot({ path: join(artifactsDir(), "run-view-phone.png"), fullPage: true });

    // The first run's own second call (the last in its waterfall).
    await page.locator(".waterfall").first().locator('[data-kind="model"][data-step="2"]').last().click();
    const panel = page.locator("#span-panel");
    await panel.locator(".payload-message.change-tool-result").waitFor(VISIBLE);
    const width = await panel.evaluate((element) => (element as unknown as { offsetWidth: number }).offsetWidth);
    expect(width).toBe(390);
    await page.evaluate(
      "document.querySelectorAll('#span-panel details').forEach((details) => { details.open = true; })",
    );
    expect(await page.evaluate("document.documentElement.scrollWidth <= innerWidth")).toBe(true);
    expect(
      await panel.evaluate((element) => {
        const box = element as unknown as { scrollWidth: number; clientWidth: number };
        return box.scrollWidth <= box.clientWidth;
      }),
    ).toBe(true);
    await page.screenshot({ path: join(artifactsDir(), "run-view-phone-panel.png") });
    await panel.getByRole("button", { name: "Close the span" }).click();
    await panel.waitFor({ state: "hidden" });
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it("grows a run in progress as it happens: the approval waits, then the rest of the run appears without a reload", async () => {
    const runId = await start("live", `Cancel order ${PENDING_ORDER} please`);
    await pendingApproval("web:live");
    const page = await open(DESKTOP, "web:live");
    const approval = row(page, "approval");
    await row(page, "specialist").click(); // the specialist's run, where the approval is asked
    await approval.waitFor(VISIBLE);
    await expect
      .poll(() => approval.locator(".span-label").textContent(), WAIT)
      .toBe("Approval of cancel_order: waiting");
    expect(await approval.getAttribute("class")).toContain("running");
    expect(await row(page, "model").count()).toBe(2); // the main call, the specialist's first
    await page.screenshot({ path: join(artifactsDir(), "run-view-live-waiting.png") });

    await approve("web:live");
    await finished(runId);
    await expect
      .poll(() => approval.locator(".span-label").textContent(), WAIT)
      .toBe("Approval of cancel_order: approved");
    await expect.poll(() => row(page, "model").count(), WAIT).toBe(4);
    await expect
      .poll(() => page.locator("section.run .run-output p").textContent(), WAIT)
      .toBe("The researcher says: Cancelled it.");
    await page.screenshot({ path: join(artifactsDir(), "run-view-live-done.png") });
    expect(pageErrors).toEqual([]);
    await page.close();
  });
});
