// Compare and eval cases in the trace viewer, in real headless Chromium over the real server, agent and
// SQLite: two recorded runs side by side by address and from "Compare with…", a replay beside its
// recorded run with the divergent call marked, a run saved as an eval case from the page and then
// replayed by the real `glassbox eval --cases` in a child process, whose rows link back to the viewer.
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
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
  postJson,
  startPlayground,
  tempDir,
  VISIBLE,
  WAIT,
  type Playground,
} from "../../../helpers/web.js";

const PHONE = { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true };
const CLI = fileURLToPath(new URL("../../../../src/cli.ts", import.meta.url));
const TSX = import.meta.resolve("tsx");

/** The demo's rules; "diverging", the model looks up another order than the one asked about. */
let diverging = false;
function script(request: ChatCompletionRequestBody): ScriptedReply {
  if (!diverging || request.messages.at(-1)?.role === "tool") return demoReply(request);
  return { toolCalls: [{ name: "get_order_status", arguments: JSON.stringify({ order_id: CANCELLABLE_ORDER }) }] };
}

describe("compare and eval cases in the trace viewer", () => {
  let browser: Browser;
  let playground: Playground;
  let evalDir: string;
  const pageErrors: string[] = [];
  const runs: string[] = [];
  const runIn = async (session: string, input: string) => {
    const { body } = await postJson(`${playground.url}api/runs`, { session, input });
    const deadline = Date.now() + WAIT.timeout;
    while (!(await getJson<{ done: boolean }>(`${playground.url}api/runs/${body.runId as string}`)).body.done) {
      if (Date.now() > deadline) throw new Error(`${input} did not finish`);
      await new Promise((resolve) => setTimeout(resolve, WAIT.interval));
    }
    return body.runId as string;
  };
  const open = async (size: typeof PHONE | typeof DESKTOP, hash: string) => {
    const page = collectPageErrors(await browser.newPage(size), pageErrors);
    await page.goto(`${playground.url}trace${hash}`);
    return page;
  };
  /** `glassbox ...args` in a child process, on the playground's database and model. */
  const glassbox = (args: string[], env: Record<string, string> = {}) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        ["--import", TSX, CLI, ...args],
        {
          env: {
            PATH: process.env.PATH ?? "",
            OPENAI_BASE_URL: playground.model.url,
            LLM_MODEL: "scripted-model",
            GLASSBOX_DB: playground.store.db.name,
            ...env,
          },
        },
        (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
      );
    });
  const verdict = (page: Page) => page.locator(".compare-verdict").textContent();

  beforeAll(async () => {
    evalDir = join(tempDir(), "evals");
    [browser, playground] = await Promise.all([
      launchChromium(),
      startPlayground({ script, env: { GLASSBOX_EVAL_DIR: evalDir } }),
    ]);
    runs.push(await runIn("cmp", "What is the status of order 20240315001?"));
    runs.push(await runIn("cmp", `What is the status of order ${CANCELLABLE_ORDER}?`));
  });
  afterAll(async () => {
    await browser?.close();
    await cleanUp();
  });

  it("draws two runs by id side by side, steps aligned and the divergent call marked, on a desktop and a phone", async () => {
    for (const [size, name] of [
      [DESKTOP, "desktop"],
      [PHONE, "phone"],
    ] as const) {
      const page = await open(size, `#compare=${runs[0]},${runs[1]}`);
      await page.locator(".compare-verdict").waitFor(VISIBLE);
      expect(await verdict(page)).toBe(
        "The tool calls diverge at call 1 (step 1 on the left, step 1 on the right). The answers differ.",
      );
      expect(await page.locator(".compare-step.diverges").getAttribute("data-step")).toBe("1");
      expect(await page.locator(".compare-calls .call.diverges code").allTextContents()).toEqual([
        "get_order_status(order_id: 20240315001)",
        `get_order_status(order_id: ${CANCELLABLE_ORDER})`,
      ]);
      expect(await page.locator(".compare-answer.differs").count()).toBe(1);
      // Tokens, cost and model time per side; each side links to its run.
      const rows = await page.locator(".compare-totals tbody th").allTextContents();
      expect(rows).toEqual(["Model", "Stop", "Steps", "Tokens", "Cost", "Model time"]);
      expect(await page.locator(".compare-totals thead a").first().getAttribute("href")).toBe(
        `#session=web%3Acmp&run=${runs[0]}`,
      );
      expect(await pageOverflow(page)).toBeLessThanOrEqual(0);
      await page.screenshot({ path: join(artifactsDir(), `web-trace-compare-${name}.png`), fullPage: true });
      await page.close();
    }
  });

  it("gets there from a run with Compare with…", async () => {
    const page = await open(DESKTOP, "#session=web:cmp");
    const first = page.locator(`section#run-${runs[0]}`);
    await first.locator("details.compare-with summary").click();
    await first.getByLabel("Run to compare with").fill(runs[1] ?? "");
    await first.getByRole("button", { name: "Compare", exact: true }).click();
    await page.locator(".compare-verdict").waitFor(VISIBLE);
    expect(page.url()).toContain(`#compare=${runs[0]},${runs[1]}`);
    expect(await verdict(page)).toContain("diverge at call 1");
    await page.close();
  });

  it("compares a replay with its recorded run step by step, marking where the replay's call diverges", async () => {
    diverging = true;
    try {
      for (const [size, name] of [
        [DESKTOP, "desktop"],
        [PHONE, "phone"],
      ] as const) {
        const page = await open(size, `#session=web:cmp&run=${runs[0]}`);
        const replay = page.locator(`section#run-${runs[0]} details.replay`);
        await replay.locator("summary").click();
        await replay.getByRole("button", { name: "Replay" }).click();
        await replay.locator(".replay-verdict").waitFor(VISIBLE);
        expect(await replay.locator(".replay-verdict").textContent()).toContain(
          "The runs diverge at tool call 1. The answer changed.",
        );
        await replay.getByRole("button", { name: "Compare step by step" }).click();
        await page.locator(".compare-verdict").waitFor(VISIBLE);
        expect(await verdict(page)).toBe(
          "The tool calls diverge at call 1 (step 1 on the left, step 1 on the right). The answers differ.",
        );
        const marked = page.locator(".compare-step.diverges .compare-side").nth(1);
        expect(await marked.locator(".side-label").textContent()).toBe("Replay");
        expect(await marked.locator(".call.diverges").textContent()).toBe(
          `get_order_status(order_id: ${CANCELLABLE_ORDER}) — not recorded ⚠ diverges here`,
        );
        expect(await pageOverflow(page)).toBeLessThanOrEqual(0);
        await page.screenshot({ path: join(artifactsDir(), `web-trace-compare-replay-${name}.png`), fullPage: true });
        await page.getByRole("link", { name: "Back to the run" }).click();
        await page.locator(`section#run-${runs[0]}`).waitFor(VISIBLE);
        await page.close();
      }
    } finally {
      diverging = false;
    }
  });

  it("saves a run as an eval case from the page; glassbox eval --cases replays it and links the rows to compare", async () => {
    const page = await open(DESKTOP, `#session=web:cmp&run=${runs[0]}`);
    const section = page.locator(`section#run-${runs[0]}`);
    await section.getByRole("button", { name: "Save as eval case" }).click();
    const file = join(evalDir, `run-${runs[0]}.json`);
    await expect
      .poll(() => section.locator(".save-case-status").textContent(), WAIT)
      .toBe(`Saved as ${file}; glassbox eval --cases replays it.`);
    const saved = JSON.parse(readFileSync(file, "utf8")) as { format: string; runId: string; calls: unknown[] };
    expect(saved).toMatchObject({ format: "glassbox-eval-case", runId: runs[0] });
    expect(saved.calls).toHaveLength(1);
    await page.close();

    const publicUrl = playground.url.replace(/\/$/, "");
    const same = await glassbox(["eval", "--cases", evalDir], { GLASSBOX_PUBLIC_URL: publicUrl });
    expect(same.stderr).toBe("");
    expect(same.code).toBe(0);
    expect(same.stdout).toContain("All 1 replayed runs call the same tools.");
    expect(same.stdout.split("\n")[0]).toMatch(/^run\s+tool calls\s+answer\s+tokens\s+model time\s+compare$/);
    const link = new RegExp(`${publicUrl}/trace#compare=${runs[0]},[\\w-]+`).exec(same.stdout)?.[0] ?? "";
    expect(link).not.toBe("");

    // The row's link opens the recorded run beside the replay eval kept.
    const compared = collectPageErrors(await browser.newPage(DESKTOP), pageErrors);
    await compared.goto(link);
    await compared.locator(".compare-verdict").waitFor(VISIBLE);
    expect(await compared.locator(".compare-verdict").textContent()).toBe(
      "Same tool calls, same arguments. Same answer.",
    );
    await compared.screenshot({ path: join(artifactsDir(), "web-trace-compare-eval.png"), fullPage: true });
    await compared.close();

    diverging = true;
    try {
      const changed = await glassbox(["eval", "--cases", join(evalDir, `run-${runs[0]}.json`), "--json"]);
      expect(changed.code).toBe(1);
      const outcome = JSON.parse(changed.stdout) as {
        changedToolCalls: number;
        runs: Array<{ case: string; divergesAtCall: number; compareUrl: string }>;
      };
      expect(outcome.changedToolCalls).toBe(1);
      expect(outcome.runs[0]).toMatchObject({ case: file, divergesAtCall: 1 });
      expect(outcome.runs[0]?.compareUrl).toMatch(/^http:\/\/127\.0\.0\.1:8787\/trace#compare=/);
    } finally {
      diverging = false;
    }
  });

  it("saves every 👎 run of the sessions the filters find", async () => {
    expect((await postJson(`${playground.url}api/runs/${runs[1]}/feedback`, { rating: "down" })).status).toBe(200);
    const page = await open(DESKTOP, "");
    await page.locator(".session-list a").first().waitFor(VISIBLE);
    await page.getByRole("button", { name: "Save every 👎 run here as an eval case" }).click();
    await expect.poll(() => page.locator("#save-rated-down-status").textContent(), WAIT).toBe("Saved 1 eval case.");
    expect(existsSync(join(evalDir, `run-${runs[1]}.json`))).toBe(true);
    await page.close();
    expect(pageErrors).toEqual([]);
  });
});
