// The trace viewer's first hour, in real headless Chromium over the real server, agent and SQLite:
// sessions told apart and found (search, filters), memory's folds marked (and what they replaced),
// what a step sent, a specialist's run and a pipeline's stages as spans inside their runs, an API failure said in words, and no
// horizontal page overflow on a phone or a desktop, whatever a session holds.
import { closeSync, openSync, statSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { demoReply } from "../../../../src/demo-script.js";
import { runAgent } from "../../../../src/agent/loop.js";
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
  startWithoutModel,
  tempDir,
  VISIBLE,
  WAIT,
  type Playground,
} from "../../../helpers/web.js";

const LONG_JSON = JSON.stringify({
  token: "k".repeat(2_000),
  items: Array.from({ length: 30 }, (_, index) => ({ id: `item-${index}`, note: "n".repeat(80) })),
});
const text = (message: ChatCompletionRequestBody["messages"][number] | undefined) => String(message?.content ?? "");

/** The demo's rules, with a team (a researcher, a writer) and a few more requests for these tests. */
function script(request: ChatCompletionRequestBody): ScriptedReply {
  const system = text(request.messages[0]);
  const hasResult = request.messages.at(-1)?.role === "tool";
  if (system.includes("RESEARCHER"))
    return hasResult
      ? { content: "It was delivered." }
      : { toolCalls: [{ name: "get_order_status", arguments: '{"order_id":"20240315001"}' }] };
  if (system.includes("WRITER")) return { content: `Dear customer: ${text(request.messages.at(-1))}` };
  const asked = text(request.messages.findLast((message) => message.role === "user"));
  if (!hasResult && asked.includes("researcher"))
    return { toolCalls: [{ name: "agent_researcher", arguments: '{"task":"Status of order 20240315001?"}' }] };
  if (hasResult && asked.includes("researcher")) return { content: "The researcher says it was delivered." };
  if (asked.includes("LONGJSON")) return { content: LONG_JSON };
  if (asked.includes("BREAK")) return { error: { status: 400, message: "The model refuses this on purpose." } };
  return demoReply(request);
}

describe("trace viewer in Chromium", () => {
  let browser: Browser;
  let playground: Playground;
  const pageErrors: string[] = [];
  const runIn = async (session: string, input: string) => {
    const { body } = await postJson(`${playground.url}api/runs`, { session, input });
    const deadline = Date.now() + WAIT.timeout;
    while (
      !(await getJson<{ done: boolean; status: string }>(`${playground.url}api/runs/${body.runId as string}`)).body.done
    ) {
      if (Date.now() > deadline) throw new Error(`${input} did not finish`);
      await new Promise((resolve) => setTimeout(resolve, WAIT.interval));
    }
  };
  const open = async (size: typeof PHONE | typeof DESKTOP, hash = "") => {
    const page = collectPageErrors(await browser.newPage(size), pageErrors);
    await page.goto(`${playground.url}trace${hash}`);
    await page.locator(".session-list a").first().waitFor(VISIBLE);
    return page;
  };
  const titles = (page: Page) => page.locator(".session-list .session-title").allTextContents();

  beforeAll(async () => {
    const agentsFile = join(tempDir(), "agents.json");
    writeFileSync(
      agentsFile,
      JSON.stringify({
        agents: {
          researcher: {
            description: "Looks up orders.",
            systemPrompt: "You are the RESEARCHER.",
            tools: ["get_order_status"],
          },
          writer: { description: "Writes replies.", systemPrompt: "You are the WRITER." },
        },
        pipelines: { triage: ["researcher", "writer"] },
      }),
    );
    // A small context budget: a few exchanges in one session fold the older ones into a summary.
    [browser, playground] = await Promise.all([
      launchChromium(),
      startPlayground({ script, env: { GLASSBOX_AGENTS: agentsFile, GLASSBOX_CONTEXT_TOKENS: "1800" } }),
    ]);
    for (const order of ["20240315001", CANCELLABLE_ORDER, PENDING_ORDER, "20240315001", CANCELLABLE_ORDER])
      await runIn("long", `What is the status of order ${order}?`);
    await runIn("json", "Show me LONGJSON please");
    await runIn("broken", "BREAK this");
    await runIn("team", "Ask the researcher where order 20240315001 is");
    await runAgent(playground.agent, { input: "What is 12*7?", sessionId: "cli:terminal", userId: "cli" });
  });
  afterAll(async () => {
    await browser?.close();
    await cleanUp();
  });

  it("tells sessions apart by their first message, adapter, last activity, runs, tokens and cost; search and filters narrow them", async () => {
    const page = await open(DESKTOP);
    expect(await titles(page)).toEqual([
      "What is 12*7?",
      "Ask the researcher where order 20240315001 is",
      "BREAK this",
      "Show me LONGJSON please",
      "What is the status of order 20240315001?",
    ]);
    const long = page.locator('.session-list a[data-session-id="web:long"] .session-meta');
    expect(await long.textContent()).toMatch(/^web \d{1,2}:\d{2}:\d{2}( [AP]M)? · 5 runs · [\d,]+ tokens · —$/);
    expect(await page.locator('.session-list a[data-session-id="web:broken"] .flag').allTextContents()).toEqual([
      "error",
    ]);
    expect(await page.locator("#sessions-status").textContent()).toBe("5 sessions");

    await page.getByLabel("Search the messages").fill(PENDING_ORDER);
    await expect.poll(() => titles(page), WAIT).toEqual(["What is the status of order 20240315001?"]);
    expect(await page.locator("#sessions-status").textContent()).toBe("1 session matches");
    await page.getByLabel("Search the messages").fill("delivered");
    await expect
      .poll(() => titles(page), WAIT)
      .toEqual(["Ask the researcher where order 20240315001 is", "What is the status of order 20240315001?"]);
    await page.getByLabel("Search the messages").fill("");
    await expect.poll(() => titles(page), WAIT).toHaveLength(5);

    await page.getByLabel("Status").selectOption("error");
    await expect.poll(() => titles(page), WAIT).toEqual(["BREAK this"]);
    await page.getByLabel("Status").selectOption("");
    await page.getByLabel("Adapter").selectOption("cli");
    await expect.poll(() => titles(page), WAIT).toEqual(["What is 12*7?"]);
    await page.getByLabel("Adapter").selectOption("");
    await page.getByLabel("Tool used").fill("agent_researcher");
    await expect.poll(() => titles(page), WAIT).toEqual(["Ask the researcher where order 20240315001 is"]);
    await page.getByLabel("Tool used").fill("");
    await page.getByLabel("Active from").fill("2001-01-01");
    await page.getByLabel("to", { exact: true }).fill("2001-01-31");
    await expect
      .poll(() => page.locator(".session-list .empty").textContent(), WAIT)
      .toBe("No session matches; loosen the search or the filters.");
    await page.close();
  });

  it("marks the step where memory folded older turns, in the chart and in the step, with the summary to open", async () => {
    const page = await open(DESKTOP, "#session=web:long");
    await page.locator("svg.chart rect.bar").first().waitFor(VISIBLE);
    expect(await page.locator("svg.chart rect.bar.folded").count()).toBeGreaterThan(0);
    expect(await page.locator("svg.chart path.fold-mark").count()).toBe(
      await page.locator("svg.chart rect.bar.folded").count(),
    );
    expect(await page.locator("figcaption").textContent()).toContain("marks a step where memory folded");
    const fold = page.locator('.waterfall [data-kind="fold"]').first();
    expect(await fold.locator(".span-label").textContent()).toMatch(/^Memory folded \d+ messages$/);
    const panel = page.locator("#span-panel");
    expect(await panel.locator(".fold-summary").isVisible()).toBe(false);
    await fold.click();
    await panel.locator(".fold-summary", { hasText: "Earlier, the user asked about order" }).waitFor(VISIBLE);
    expect(await panel.locator(".fold-title").textContent()).toMatch(
      /^▼Memory folded \d+ older messages into a summary before model call \d+$/,
    );
    const hint = panel.locator(".hint").first();
    expect(await hint.textContent()).toMatch(/the summary is about \d+ tokens/);
    // The summarising call, with its own tokens, counted in the run.
    expect(await hint.textContent()).toMatch(
      /That call \(.+\) took [\d,]+ prompt and [\d,]+ completion tokens \(.+\), counted in this run's totals\./,
    );
    // The messages it took out of view: sent in the model call before, not in the one after.
    const replaced = panel.locator('section[aria-label="Messages it replaced"]');
    await replaced.locator(".payload-message").first().waitFor(VISIBLE);
    expect(await replaced.locator(".payload-message.role-user").first().textContent()).toContain(
      "What is the status of order",
    );
    // The folded step is the bar marked in the chart.
    const folded = page.locator(".waterfall .span-row.folded").first();
    const step = await folded.getAttribute("data-step");
    expect(await page.locator("svg.chart rect.bar.folded").first().getAttribute("data-step")).toBe(step);
    // What that model call saw: the summary in its system message, named as such.
    await folded.click();
    const system = panel.locator("section.sent .payload-message.role-system").first();
    await system.waitFor(VISIBLE);
    expect(await system.locator(".change-label").textContent()).toBe("summary folded in");
    expect(await system.textContent()).toContain("## Earlier in this conversation (summary)");
    await page.screenshot({ path: join(artifactsDir(), "web-trace-fold.png"), fullPage: true });
    await page.close();
  });

  it("shows what a step sent: the model, the messages, and the tools and tool_choice where the trace keeps them", async () => {
    const page = await open(DESKTOP, "#session=web:json");
    await page.locator('.waterfall [data-kind="model"][data-step="1"]').first().click();
    const payload = page.locator("#span-panel section.sent");
    await payload.locator(".payload-message.role-system").waitFor(VISIBLE);
    expect(await payload.locator(".payload-message.role-user pre").textContent()).toBe("Show me LONGJSON please");
    const settings = await payload.locator(".request-settings dt").allTextContents();
    expect(settings[0]).toBe("Model");
    expect(await payload.locator(".request-settings dd").first().textContent()).toBe("scripted-model");
    // The whole request: the tools (as the server got them), tool_choice and whether it streamed.
    const runId = await page.locator("section.run").first().getAttribute("id");
    const { body } = await getJson<{
      request: { tools?: Array<{ function: { name: string } }>; tool_choice?: string; stream?: boolean } | null;
    }>(`${playground.url}api/runs/${runId?.replace(/^run-/, "")}/steps/1/payload`);
    expect(body.request?.tools?.length).toBeGreaterThan(0);
    expect(await payload.locator(".payload-tools > li summary code").allTextContents()).toEqual(
      body.request?.tools?.map((tool) => tool.function.name),
    );
    expect(settings).toEqual(expect.arrayContaining(["tool_choice", "stream"]));
    expect(typeof body.request?.stream).toBe("boolean");
    await page.close();
  });

  it("replays a finished run from the page: the two runs side by side, tools answered from the recording; the API refuses bad input in one sentence", async () => {
    const page = await open(DESKTOP, "#session=web:team");
    const replay = page.locator("section.run details.replay").first();
    await replay.locator("summary").click();
    await replay.getByLabel("System prompt for the replay").fill("You are a terse assistant.");
    await replay.getByRole("button", { name: "Replay" }).click();
    await replay.locator(".replay-verdict").waitFor(VISIBLE);
    // The same script answers the same way, and the specialist's call is answered from the recording.
    expect(await replay.locator(".replay-verdict").textContent()).toBe("Same tool calls, same arguments. Same answer.");
    const cells = await replay.locator(".replay-table tbody tr").first().locator("td").allTextContents();
    expect(cells).toEqual(["The researcher says it was delivered.", "The researcher says it was delivered."]);
    expect(
      await replay.locator(".replay-table tbody tr", { hasText: "Tool calls" }).locator("td").nth(1).textContent(),
    ).toContain("agent_researcher");
    expect(playground.model.requests.at(-2)?.body.messages[0]).toEqual({
      role: "system",
      content: "You are a terse assistant.",
    });
    expect(await pageOverflow(page)).toBe(0);
    await page.close();

    const runId =
      (await getJson<{ runs: Array<{ runId: string }> }>(`${playground.url}api/sessions/web:team/runs`)).body.runs[0]
        ?.runId ?? "";
    const tooLong = await postJson(`${playground.url}api/runs/${runId}/replay`, { systemPrompt: "x".repeat(20_001) });
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.error).toBe(
      'Say "systemPrompt" as text of up to 20,000 characters, or leave it out to replay with the recorded one.',
    );
    const otherModel = await postJson(`${playground.url}api/runs/${runId}/replay`, { model: "gpt-5" });
    expect(otherModel.status).toBe(400);
    expect(otherModel.body.error).toContain("use glassbox replay --model for another one");
    const unknown = await postJson(`${playground.url}api/runs/run_nope/replay`, {});
    expect(unknown.status).toBe(404);
  });

  it("draws a pipeline as one run whose stages open one by one, and the chat shows its stages in one answer", async () => {
    const chat = collectPageErrors(await browser.newPage(DESKTOP), pageErrors);
    await chat.goto(playground.url);
    await chat.evaluate('localStorage.setItem("glassbox.session", "team")');
    await chat.reload();
    await chat.locator("#connection", { hasText: "Live" }).waitFor(VISIBLE);
    await chat.getByLabel("Message").fill("/pipeline triage order 20240315001 is late");
    await chat.getByLabel("Message").press("Enter");
    await chat.locator(".message.assistant .answer", { hasText: "Dear customer: It was delivered." }).waitFor(VISIBLE);
    expect(await chat.locator(".message.user .text").allTextContents()).toEqual([
      "Ask the researcher where order 20240315001 is",
      "/pipeline triage order 20240315001 is late",
    ]);
    expect(await chat.locator(".activity .stage summary").allTextContents()).toEqual([
      "Stage 1 answered; stage 2 works on its answer",
    ]);
    // The same after a reload, from the store.
    await chat.reload();
    await chat.locator(".message.assistant .answer", { hasText: "Dear customer: It was delivered." }).waitFor(VISIBLE);
    expect(await chat.locator(".message.user").count()).toBe(2);
    expect(await chat.locator(".activity .stage").count()).toBe(1);
    await chat.close();

    const page = await open(DESKTOP, "#session=web:team");
    await page.locator("section.run").first().waitFor(VISIBLE);
    expect(await page.locator("section.run").count()).toBe(2);
    const pipeline = page.locator("section.run.pipeline");
    expect(await pipeline.locator("h3").textContent()).toBe(
      "Run 2: pipeline triage · /pipeline triage order 20240315001 is late",
    );
    const stages = pipeline.locator('.waterfall [data-kind="stage"]');
    expect(await stages.locator(".span-label").allTextContents()).toEqual(["Stage 1", "Stage 2"]);
    // A stage is one line until opened; choosing it opens it and reads it in the panel.
    const insideSecond = pipeline.locator(`[data-parent="${await stages.nth(1).getAttribute("data-key")}"]`);
    expect(await insideSecond.first().isVisible()).toBe(false);
    await stages.nth(1).click();
    await insideSecond.first().waitFor(VISIBLE);
    expect(await page.locator("#span-panel .run-input").textContent()).toBe("Input: It was delivered.");
    expect(await pipeline.locator(".run-output p").textContent()).toBe("Dear customer: It was delivered.");
    // The specialist of the first run: under the call that started it.
    const firstRun = page.locator("section.run").first();
    const specialist = firstRun.locator('.waterfall [data-kind="specialist"]');
    expect(await specialist.locator(".span-label").textContent()).toBe("researcher's run");
    const call = firstRun.locator(`[data-key="${await specialist.getAttribute("data-parent")}"]`);
    expect(await call.getAttribute("data-kind")).toBe("tool");
    expect(await call.locator(".span-label").textContent()).toContain("agent_researcher");
    await page.close();
  });

  it("never scrolls the page sideways, on a phone (390 px) or a desktop, with every step, payload and nested run open", async () => {
    for (const size of [PHONE, DESKTOP]) {
      for (const session of ["web:json", "web:team", "web:long"]) {
        const page = await open(size, `#session=${session}`);
        await page.locator(".waterfall").first().waitFor(VISIBLE);
        // Open every span inside another, then read the last model call with everything in it open.
        while ((await page.locator('.waterfall [aria-expanded="false"]').count()) > 0)
          await page.locator('.waterfall [aria-expanded="false"] .toggle').first().click();
        await page.locator('.waterfall [data-kind="model"]').last().click();
        await page.locator("#span-panel .payload-content").waitFor(VISIBLE);
        for (let round = 0; round < 2; round++)
          await page.evaluate("document.querySelectorAll('details').forEach((details) => { details.open = true; })");
        await expect.poll(() => page.locator(".payload-body p", { hasText: "Loading…" }).count(), WAIT).toBe(0);
        expect(await pageOverflow(page), `${session} at ${size.viewport.width} px`).toBeLessThanOrEqual(0);
        if (session === "web:json")
          await page.screenshot({ path: join(artifactsDir(), `web-trace-${size.viewport.width}.png`), fullPage: true });
        await page.close();
      }
    }
    expect(pageErrors).toEqual([]);
  });

  it("says what failed when the API fails (a damaged database answers 500), instead of an empty list", async () => {
    const { url, store, databasePath } = await startWithoutModel();
    for (let index = 0; index < 300; index++)
      store.appendMessages(`web:s${index % 20}`, null, [
        { message: { role: "user", content: `message ${index} ${"x".repeat(300)}` }, tokens: 10 },
      ]);
    store.db.pragma("wal_checkpoint(TRUNCATE)");
    damagePages(databasePath);
    const page = await browser.newPage(DESKTOP);
    await page.goto(`${url}trace`);
    const alert = page.locator("#sessions-error");
    await alert.waitFor(VISIBLE);
    expect(await alert.getAttribute("role")).toBe("alert");
    expect(await alert.textContent()).toBe(
      "The sessions could not be loaded: Something went wrong inside glassbox; the server log says what.",
    );
    expect(await page.locator(".session-list li").count()).toBe(0);
    await page.close();
  });
});

/**
 * Garbage over the data pages of a database in use, as a failing disk leaves it; another
 * connection's commit then makes the server's connection read the pages again (not its cache).
 */
function damagePages(path: string): void {
  const pageBytes = 4096;
  const file = openSync(path, "r+");
  try {
    for (let page = 2; page < statSync(path).size / pageBytes - 1; page++)
      writeSync(file, Buffer.alloc(512, 0x5a), 0, 512, page * pageBytes + 64);
  } finally {
    closeSync(file);
  }
  const other = new Database(path);
  other.pragma("application_id = 7"); // a write to the header page alone, which stays readable
  other.close();
}
