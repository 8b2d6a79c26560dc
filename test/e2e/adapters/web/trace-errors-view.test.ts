// Errors for people in the trace viewer, in Chromium: a tool handler that throws shows where it threw
// (file and line) in its span's panel, beside the envelope the model read; a tool call the model wrote
// as text shows, under the model layer's note, the text that came back and the call it was read as.
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChatCompletionRequestBody, ScriptedReply } from "../../../../src/testing/scripted-model-server.js";
import {
  artifactsDir,
  cleanUp,
  collectPageErrors,
  getJson,
  launchChromium,
  postJson,
  startPlayground,
  VISIBLE,
  WAIT,
  type Playground,
} from "../../../helpers/web.js";

const TOOLS = fileURLToPath(new URL("../../../../examples/tools.mjs", import.meta.url));
const TEXT_CALL = '<tool_call>\n{"name": "check_stock", "arguments": {"fruit": "plum"}}\n</tool_call>';

function script(request: ChatCompletionRequestBody): ScriptedReply {
  const asked = String(request.messages.findLast((message) => message.role === "user")?.content ?? "");
  const answered = request.messages.at(-1)?.role === "tool";
  if (asked.includes("kiwi"))
    return answered
      ? { content: "I could not check kiwis." }
      : { toolCalls: [{ name: "check_stock", arguments: '{"fruit":"kiwi"}' }] };
  return answered ? { content: "There are 7 plums." } : { content: TEXT_CALL };
}

describe("errors for people in the trace viewer", () => {
  let playground: Playground;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];
  const run = async (session: string, input: string) => {
    const { body } = await postJson(`${playground.url}api/runs`, { session, input, userId: "alice" });
    await expect
      .poll(async () => (await getJson<{ done: boolean }>(`${playground.url}api/runs/${body.runId}`)).body.done, WAIT)
      .toBe(true);
    return (await getJson<{ sessionId: string }>(`${playground.url}api/runs/${body.runId}`)).body.sessionId;
  };
  const open = async (session: string, kind: string) => {
    await page.goto(`${playground.url}trace#session=${encodeURIComponent(session)}`);
    await page.locator(".waterfall").first().waitFor(VISIBLE);
    await page.locator(`.waterfall [role="treeitem"][data-kind="${kind}"]:not([hidden])`).first().click();
    const panel = page.locator("#span-panel");
    await panel.waitFor(VISIBLE);
    return panel;
  };

  beforeAll(async () => {
    [browser, playground] = await Promise.all([
      launchChromium(),
      startPlayground({ script, env: { GLASSBOX_TOOLS: TOOLS } }),
    ]);
    page = collectPageErrors(
      await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage(),
      pageErrors,
    );
  });
  afterAll(async () => {
    await browser?.close();
    await cleanUp();
  });

  it("a tool that threw shows where, for people, beside the envelope the model read", async () => {
    const panel = await open(await run("errors-kiwi", "how many kiwi do we have?"), "tool");
    const stack = panel.locator("details.error-stack");
    await stack.waitFor(VISIBLE);
    expect(await stack.locator("summary").textContent()).toBe(
      "Where it threw (for people; the model read the result above)",
    );
    expect(await stack.locator("pre").textContent()).toMatch(/examples\/tools\.mjs:\d+:\d+/);
    await page.screenshot({ path: join(artifactsDir(), "trace-error-stack.png") });
    expect(pageErrors).toEqual([]);
  });

  it("a repaired reply shows what came back and what it was read as, under the model layer's note", async () => {
    const panel = await open(await run("errors-plums", "how many plums are there?"), "model");
    const exchange = panel.locator("dl.model-exchange");
    await exchange.waitFor(VISIBLE);
    expect(await panel.locator(".model-note").first().textContent()).toContain("recovered 1 tool call (check_stock)");
    expect(await exchange.locator("dt").allTextContents()).toEqual(["Came back", "Read as"]);
    expect(await exchange.locator("dd").first().textContent()).toContain("<tool_call>");
    expect(await exchange.locator("dd").last().textContent()).toContain("check_stock");
    expect(pageErrors).toEqual([]);
  });
});
