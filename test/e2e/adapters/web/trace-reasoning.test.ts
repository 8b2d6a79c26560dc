// A step's reasoning ("thinking") and the model layer's notes, from the model's reply to every place
// that shows them: the steps rows in SQLite, the HTTP API, `glassbox trace` in a child process, and
// the trace and chat pages in headless Chromium. The model client does not fill them in yet, so a
// ChatModel of this test's own adds them to the replies of the real client (openai SDK against the
// scripted server); everything after the model port is glassbox as `npm start` builds it.
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { MAX_REASONING_CHARS } from "../../../../src/agent/trace.js";
import { textOf, type ChatModel } from "../../../../src/agent/types.js";
import { loadConfig } from "../../../../src/config.js";
import { sqliteAgentConfig, type SqliteAgent } from "../../../helpers/sqlite-agent.js";
import { startScriptedModelServer, type ScriptedModelServer } from "../../../../src/testing/scripted-model-server.js";
import {
  artifactsDir,
  getJson,
  postJson,
  quietLogger,
  startPipeline,
  WAIT,
  type WebServer,
} from "../../../helpers/web.js";

const CHROMIUM = process.env.GLASSBOX_CHROMIUM ?? "/usr/bin/chromium";
const VISIBLE = { state: "visible" as const, timeout: 15_000 };

const FIRST_THOUGHT = "The user asks for 6 times 7.\nI should use the calculator instead of guessing.";
const FIRST_NOTE = "recovered a tool call the model wrote as text";
// Longer than the trace keeps: the first MAX_REASONING_CHARS characters are stored, and the cut is said.
const LONG_THOUGHT = `The calculator says 42. ${"Let me check that once more. ".repeat(2_500)}`;
const SECOND_NOTE = "the server refused 'parallel_tool_calls'; sent again without it";
/** A request with this word gets the real client's reply unchanged: no reasoning, no notes. */
const PLAIN = "plainly";

/** The real client's reply, with the reasoning and notes a thinking model's reply would carry. */
function thinkingModel(inner: ChatModel): ChatModel {
  return {
    name: inner.name,
    async chat(request) {
      const response = await inner.chat(request);
      if (request.messages.some((message) => message.role === "user" && textOf(message.content).includes(PLAIN)))
        return response;
      return response.toolCalls.length
        ? { ...response, reasoning: FIRST_THOUGHT, notes: [FIRST_NOTE] }
        : { ...response, reasoning: LONG_THOUGHT, notes: [SECOND_NOTE] };
    },
  };
}

interface StepBody {
  step: number;
  reasoning: string | null;
  reasoningCutChars: number;
  modelNotes: string[];
  notes: string[];
  content: string | null;
}

function glassboxCli(args: string[], databasePath: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["--import", "tsx", "src/cli.ts", ...args],
      { env: { PATH: process.env.PATH ?? "", GLASSBOX_DB: databasePath } },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe("a step's thinking and the model layer's notes in the trace", () => {
  let model: ScriptedModelServer;
  let agent: SqliteAgent;
  let web: WebServer;
  const directory = mkdtempSync(join(tmpdir(), "glassbox-thinking-"));
  const databasePath = join(directory, "glassbox.db");
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];
  let thinkingRun: string;
  let plainRun: string;

  const startRun = async (session: string, input: string) => {
    const { status, body } = await postJson(`${web.url}api/runs`, { session, input, userId: "alice" });
    expect(status).toBe(202);
    const runId = body.runId as string;
    await vi.waitFor(
      async () => expect((await getJson<{ done: boolean }>(`${web.url}api/runs/${runId}`)).body.done).toBe(true),
      WAIT,
    );
    return runId;
  };

  beforeAll(async () => {
    if (!existsSync(CHROMIUM))
      throw new Error(
        `No Chromium at ${CHROMIUM}: install it (apt-get install chromium) or set GLASSBOX_CHROMIUM to its path.`,
      );
    // The scripted model: a calculator call first, then the answer once it has the result.
    model = await startScriptedModelServer({
      script: (request) =>
        request.messages.some((message) => message.role === "tool")
          ? { content: "6 × 7 is 42." }
          : { toolCalls: [{ name: "calculator", arguments: '{"expression":"6*7"}' }] },
    });
    const config = loadConfig({
      OPENAI_BASE_URL: model.url,
      OPENAI_API_KEY: "test-key",
      LLM_MODEL: "scripted-model",
      GLASSBOX_DB: databasePath,
    });
    agent = await sqliteAgentConfig(config, quietLogger());
    web = await startPipeline({
      config,
      agent: { ...agent, model: thinkingModel(agent.model) },
      store: agent.port,
      modelLabel: "scripted model (thinking)",
    });
    thinkingRun = await startRun("thinking", "What is 6 times 7?");
    plainRun = await startRun("plain", `What is 6 times 7, ${PLAIN}?`);

    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-quic",
      ],
    });
    page = await (await browser.newContext({ viewport: { width: 1200, height: 900 } })).newPage();
    page.on("pageerror", (error) => pageErrors.push(error.message));
    page.on("console", (message) => {
      if (message.type() === "error") pageErrors.push(message.text());
    });
  });

  afterAll(async () => {
    await browser?.close();
    await web?.stop();
    await agent?.close();
    await model?.close();
    rmSync(directory, { recursive: true, force: true });
  });

  it("stores each step's reasoning and notes in its steps row, the reasoning cut at 64 K characters with the cut counted", () => {
    const rows = agent.store.db
      .prepare(
        "SELECT step, reasoning, reasoning_cut_chars AS cut, model_notes AS modelNotes, notes FROM steps WHERE run_id = ? ORDER BY step",
      )
      .all(thinkingRun);
    expect(MAX_REASONING_CHARS).toBe(65_536);
    expect(LONG_THOUGHT.length).toBeGreaterThan(MAX_REASONING_CHARS);
    expect(rows).toEqual([
      { step: 1, reasoning: FIRST_THOUGHT, cut: 0, modelNotes: JSON.stringify([FIRST_NOTE]), notes: "[]" },
      {
        step: 2,
        reasoning: LONG_THOUGHT.slice(0, MAX_REASONING_CHARS),
        cut: LONG_THOUGHT.length - MAX_REASONING_CHARS,
        modelNotes: JSON.stringify([SECOND_NOTE]),
        notes: "[]",
      },
    ]);
  });

  it("regression: a reply without reasoning or notes stores none (null and an empty list), not an empty thought", () => {
    const rows = agent.store.db
      .prepare(
        "SELECT reasoning, reasoning_cut_chars AS cut, model_notes AS modelNotes FROM steps WHERE run_id = ? ORDER BY step",
      )
      .all(plainRun);
    expect(rows).toEqual([
      { reasoning: null, cut: 0, modelNotes: "[]" },
      { reasoning: null, cut: 0, modelNotes: "[]" },
    ]);
  });

  it("passes them through the steps endpoint of the HTTP API, apart from the guards' notes", async () => {
    const { status, body } = await getJson<{ steps: StepBody[] }>(`${web.url}api/runs/${thinkingRun}/steps`);
    expect(status).toBe(200);
    expect(
      body.steps.map(({ step, reasoning, reasoningCutChars, modelNotes, notes }) => ({
        step,
        reasoning,
        reasoningCutChars,
        modelNotes,
        notes,
      })),
    ).toEqual([
      { step: 1, reasoning: FIRST_THOUGHT, reasoningCutChars: 0, modelNotes: [FIRST_NOTE], notes: [] },
      {
        step: 2,
        reasoning: LONG_THOUGHT.slice(0, MAX_REASONING_CHARS),
        reasoningCutChars: LONG_THOUGHT.length - MAX_REASONING_CHARS,
        modelNotes: [SECOND_NOTE],
        notes: [],
      },
    ]);
    // The reasoning is never the answer.
    expect(body.steps[1]?.content).toBe("6 × 7 is 42.");
    const plain = await getJson<{ steps: StepBody[] }>(`${web.url}api/runs/${plainRun}/steps`);
    expect(plain.body.steps.map((step) => [step.reasoning, step.modelNotes])).toEqual([
      [null, []],
      [null, []],
    ]);
  });

  it("glassbox trace prints each step's thinking as its size and first line, and each note of the model layer", async () => {
    const { code, stdout, stderr } = await glassboxCli(["trace", thinkingRun], databasePath);
    expect(stderr).toBe("");
    expect(code).toBe(0);
    const lines = stdout.split("\n");
    const stepLine = (step: number) => lines.findIndex((line) => line.startsWith(`  step ${step}  `));
    // Under its step, before what the model said or called.
    expect(lines.slice(stepLine(1) + 1, stepLine(1) + 3)).toEqual([
      `    thinking (${FIRST_THOUGHT.length} chars): The user asks for 6 times 7. …`,
      `    model layer: ${FIRST_NOTE}`,
    ]);
    const full = LONG_THOUGHT.length.toLocaleString("en-US");
    expect(lines.slice(stepLine(2) + 1, stepLine(2) + 4)).toEqual([
      expect.stringMatching(
        new RegExp(
          `^    thinking \\(${full} chars, the first 65,536 kept\\): The calculator says 42\\. Let me check that once more\\. .{20,}…$`,
        ),
      ),
      `    model layer: ${SECOND_NOTE}`,
      "    said: 6 × 7 is 42.",
    ]);

    const plain = await glassboxCli(["trace", plainRun], databasePath);
    expect(plain.code).toBe(0);
    expect(plain.stdout).not.toMatch(/thinking|model layer/);

    const json = JSON.parse((await glassboxCli(["trace", thinkingRun, "--json"], databasePath)).stdout) as Array<{
      steps: StepBody[];
    }>;
    expect(json[0]?.steps[0]).toMatchObject({
      reasoning: FIRST_THOUGHT,
      reasoningCutChars: 0,
      modelNotes: [FIRST_NOTE],
    });
  });

  it("the trace page shows each step's thinking collapsed under Thinking, opening to the text, and the notes as visible lines", async () => {
    await page.goto(`${web.url}trace#session=${encodeURIComponent("web:thinking")}`);
    const panel = page.locator("#span-panel");
    const modelCall = (step: number) => page.locator(`.waterfall [data-kind="model"][data-step="${step}"]`);
    await modelCall(1).waitFor(VISIBLE);
    await modelCall(1).click();
    const first = panel;
    await first.locator("h2", { hasText: "Model call 1" }).waitFor(VISIBLE);
    const thinking = first.locator("details.thinking");
    expect(await thinking.count()).toBe(1);
    expect(await thinking.locator("summary").textContent()).toBe(`Thinking · ${FIRST_THOUGHT.length} characters`);
    // Collapsed: the text is there but not shown until opened.
    expect(await thinking.evaluate((details) => details.hasAttribute("open"))).toBe(false);
    expect(await thinking.locator(".thinking-text").isVisible()).toBe(false);
    expect(await first.locator(".model-note").textContent()).toBe(`Model layer: ${FIRST_NOTE}`);
    expect(await first.locator(".model-note").isVisible()).toBe(true);

    await thinking.locator("summary").click();
    await thinking.locator(".thinking-text").waitFor(VISIBLE);
    // innerText keeps the line break the thinking has.
    expect(await thinking.locator(".thinking-text").innerText()).toBe(FIRST_THOUGHT);

    await modelCall(2).click();
    const second = panel;
    await second.locator("h2", { hasText: "Model call 2" }).waitFor(VISIBLE);
    await second.locator("details.thinking summary").click();
    expect(await second.locator(".thinking-text").textContent()).toBe(LONG_THOUGHT.slice(0, MAX_REASONING_CHARS));
    expect(await second.locator("details.thinking .hint").textContent()).toBe(
      `Cut here: ${(LONG_THOUGHT.length - MAX_REASONING_CHARS).toLocaleString("en-US")} more characters were not kept.`,
    );
    expect(await second.locator(".model-note").textContent()).toBe(`Model layer: ${SECOND_NOTE}`);
    await page.screenshot({ path: join(artifactsDir(), "web-trace-thinking.png") });

    // A step without reasoning has no Thinking to open, and no notes.
    await page.goto(`${web.url}trace#session=${encodeURIComponent("web:plain")}`);
    const plainCalls = page.locator('.waterfall [data-kind="model"]');
    await plainCalls.first().waitFor(VISIBLE);
    expect(await plainCalls.count()).toBe(2);
    for (const step of [1, 2]) {
      await modelCall(step).click();
      await panel.locator("h2", { hasText: `Model call ${step}` }).waitFor(VISIBLE);
      expect(await page.locator("details.thinking, .model-note").count()).toBe(0);
    }
    expect(pageErrors).toEqual([]);
  });

  it("the chat page shows the thinking of each step collapsed above the answer", async () => {
    await page.goto(web.url);
    await page.locator("#connection", { hasText: "Live" }).waitFor(VISIBLE);
    await page.getByLabel("Message").fill("What is 6 times 7?");
    await page.getByLabel("Message").press("Enter");
    const assistant = page.locator(".message.assistant").last();
    await assistant.locator(".answer", { hasText: "6 × 7 is 42." }).waitFor(VISIBLE);

    const thoughts = assistant.locator("details.thinking");
    expect(await thoughts.count()).toBe(2);
    expect(await thoughts.evaluateAll((all) => all.map((details) => details.hasAttribute("open")))).toEqual([
      false,
      false,
    ]);
    // Above the answer in the page's order (4: Node.DOCUMENT_POSITION_FOLLOWING, the answer comes after).
    expect(
      await assistant.evaluate(
        (message) =>
          message.querySelector("details.thinking")!.compareDocumentPosition(message.querySelector(".answer")!) & 4,
      ),
    ).toBe(4);
    await thoughts.first().locator("summary").click();
    expect(await thoughts.first().locator(".thinking-text").innerText()).toBe(FIRST_THOUGHT);
    // A live event carries at most 16 K characters of thinking; the page says the rest is in the trace.
    const live = 16 * 1024;
    await thoughts.last().locator("summary").click();
    expect(await thoughts.last().locator(".thinking-text").textContent()).toBe(LONG_THOUGHT.slice(0, live));
    expect(await thoughts.last().locator(".hint").textContent()).toBe(
      `Cut here: ${(LONG_THOUGHT.length - live).toLocaleString("en-US")} more characters are not shown here; the trace keeps more.`,
    );
    expect(await assistant.locator(".answer").textContent()).toBe("6 × 7 is 42.");
    await page.screenshot({ path: join(artifactsDir(), "web-chat-thinking.png") });
    expect(pageErrors).toEqual([]);
  });
});
