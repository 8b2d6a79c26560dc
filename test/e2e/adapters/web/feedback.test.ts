// Feedback in the playground, end to end: real headless Chromium over the real server, agent and
// SQLite. Every answer carries 👍 / 👎; a 👎 opens a form asking why (optional); the API keeps one
// rating per person and run (the latest) and refuses bad input in one sentence; the trace viewer
// shows each run's feedback and finds the sessions rated down (or up).
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_REASON_CHARS } from "../../../../src/agent/feedback.js";
import { createFeedbackBook } from "../../../../src/store/sqlite-feedback.js";
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

describe("feedback in the playground and the trace viewer", () => {
  let browser: Browser;
  let playground: Playground;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    [browser, playground] = await Promise.all([
      launchChromium(),
      startPlayground({ script: () => ({ content: "The answer is 42." }) }),
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
  const ask = async (page: Page, text: string) => {
    await page.locator("#connection", { hasText: "Live" }).waitFor(VISIBLE);
    await page.getByLabel("Message").fill(text);
    await page.getByLabel("Message").press("Enter");
    const answer = page.locator(".message.assistant").last();
    await answer.locator(".answer", { hasText: "The answer is 42." }).waitFor(VISIBLE);
    return answer;
  };
  const runIdOf = async (answer: ReturnType<Page["locator"]>) => String(await answer.getAttribute("data-run-id"));

  it("an answer's 👍 / 👎 are stored as the browser's user; a 👎 asks why and keeps the reason; the latest click counts; a reload shows it", async () => {
    const page = await open();
    const answer = await ask(page, "What is the answer?");
    const runId = await runIdOf(answer);
    const feedback = createFeedbackBook(playground.store);
    const userId = String(await page.evaluate('localStorage.getItem("glassbox.user")'));

    await answer.getByRole("button", { name: "Good answer" }).click();
    await answer.locator(".feedback-status", { hasText: "Thanks!" }).waitFor(VISIBLE);
    expect(await answer.getByRole("button", { name: "Good answer" }).getAttribute("aria-pressed")).toBe("true");
    expect(feedback.ofRun(runId).map((one) => [one.userId, one.rating, one.reason, one.source])).toEqual([
      [userId, "up", null, "web"],
    ]);

    await answer.getByRole("button", { name: "Bad answer" }).click();
    const reason = answer.getByLabel("What went wrong? (optional)");
    await reason.waitFor(VISIBLE);
    await reason.fill("It did not show its working");
    await page.screenshot({ path: join(artifactsDir(), "web-feedback-reason.png") });
    await answer.getByRole("button", { name: "Send" }).click();
    await answer.locator(".feedback-status", { hasText: "Thanks, noted." }).waitFor(VISIBLE);
    expect(feedback.ofRun(runId).map((one) => [one.userId, one.rating, one.reason])).toEqual([
      [userId, "down", "It did not show its working"],
    ]);

    await page.reload();
    const again = page.locator(`.message.assistant[data-run-id="${runId}"]`);
    await again.locator(".feedback").waitFor(VISIBLE);
    expect(await again.getByRole("button", { name: "Bad answer" }).getAttribute("aria-pressed")).toBe("true");
    expect(await again.getByRole("button", { name: "Good answer" }).getAttribute("aria-pressed")).toBe("false");
    expect(playground.model.requests).toHaveLength(1); // rating started no run
    expect(pageErrors).toEqual([]);
  });

  it("regression: Enter sends the reason of a 👎 as it does in the message box; Shift+Enter starts a new line", async () => {
    const page = await open();
    const answer = await ask(page, "And the answer now?");
    const runId = await runIdOf(answer);
    const feedback = createFeedbackBook(playground.store);
    await answer.getByRole("button", { name: "Bad answer" }).click();
    const reason = answer.getByLabel("What went wrong? (optional)");
    await reason.waitFor(VISIBLE);
    await reason.fill("Wrong number");
    await reason.press("Shift+Enter");
    await reason.pressSequentially("twice");
    expect(await reason.inputValue()).toBe("Wrong number\ntwice");
    await reason.press("Enter");
    await answer.locator(".feedback-status", { hasText: "Thanks, noted." }).waitFor(VISIBLE);
    expect(await reason.isHidden()).toBe(true);
    expect(feedback.ofRun(runId).map((one) => [one.rating, one.reason])).toEqual([["down", "Wrong number\ntwice"]]);
    expect(pageErrors).toEqual([]);
  });

  it("POST /api/runs/:id/feedback: one sentence for bad input, 404 for an unknown run, the latest rating per user", async () => {
    const { body: started } = await postJson(`${playground.url}api/runs`, {
      session: "feedback-api",
      input: "What is the answer?",
      userId: "alice",
    });
    const runId = String(started.runId);
    await expect.poll(async () => (await getJson(`${playground.url}api/runs/${runId}`)).body.done, WAIT).toBe(true);
    const rate = (body: unknown, id = runId) => postJson(`${playground.url}api/runs/${id}/feedback`, body);

    expect(await rate({ rating: "sideways" })).toEqual({
      status: 400,
      body: expect.objectContaining({ error: 'Say "rating": "up" or "down".' }),
    });
    const long = await rate({ rating: "down", reason: "x".repeat(MAX_REASON_CHARS + 1) });
    expect(long.status).toBe(400);
    expect(String(long.body.error)).toMatch(/^Give "reason" as text of up to 1,000 characters/);
    expect((await rate({ rating: "up" }, "run_nope")).status).toBe(404);

    expect((await rate({ rating: "up", userId: "alice" })).status).toBe(200);
    expect((await rate({ rating: "down", userId: "bob", reason: "  wrong number  " })).status).toBe(200);
    const last = await rate({ rating: "down", userId: "alice" });
    expect(last.status).toBe(200);
    expect(
      (last.body.feedback as Array<{ userId: string; rating: string; reason: string | null }>)
        .map((one) => [one.userId, one.rating, one.reason])
        .sort(),
    ).toEqual([
      ["web:alice", "down", null],
      ["web:bob", "down", "wrong number"],
    ]);
    const run = await getJson<{ feedback: unknown[] }>(`${playground.url}api/runs/${runId}`);
    expect(run.body.feedback).toHaveLength(2);
  });

  it("the trace viewer shows each run's feedback and its filter finds the sessions rated down, or up", async () => {
    const rated = async (session: string, rating: "up" | "down", reason?: string) => {
      const { body } = await postJson(`${playground.url}api/runs`, {
        session,
        input: `Question for ${session}`,
        userId: "carol",
      });
      await expect
        .poll(async () => (await getJson(`${playground.url}api/runs/${String(body.runId)}`)).body.done, WAIT)
        .toBe(true);
      expect(
        (
          await postJson(`${playground.url}api/runs/${String(body.runId)}/feedback`, {
            rating,
            userId: "carol",
            ...(reason ? { reason } : {}),
          })
        ).status,
      ).toBe(200);
    };
    await rated("liked", "up");
    await rated("disliked", "down", "Too vague");
    const down = await getJson<{ sessions: Array<{ id: string }> }>(`${playground.url}api/sessions?rated=down`);
    expect(down.body.sessions.map((session) => session.id)).toContain("web:disliked");
    expect(down.body.sessions.map((session) => session.id)).not.toContain("web:liked");
    expect((await getJson(`${playground.url}api/sessions?rated=maybe`)).status).toBe(400);

    const page = await open("trace");
    await page.locator("#sessions li").first().waitFor(VISIBLE);
    await page.getByRole("combobox", { name: "Feedback" }).selectOption("down");
    await expect
      .poll(async () => page.locator("#sessions li", { hasText: "Question for liked" }).count(), WAIT)
      .toBe(0);
    await page.locator("#sessions li", { hasText: "Question for disliked" }).click();
    const list = page.getByRole("list", { name: "Feedback" });
    await list.waitFor(VISIBLE);
    await page.screenshot({ path: join(artifactsDir(), "web-feedback-trace.png"), fullPage: true });
    expect(await list.textContent()).toMatch(/👎 down by web:carol · .* · web: Too vague/);
    await page.getByRole("combobox", { name: "Feedback" }).selectOption("up");
    await page.locator("#sessions li", { hasText: "Question for liked" }).waitFor(VISIBLE);
    expect(await page.locator("#sessions li", { hasText: "Question for disliked" }).count()).toBe(0);
    expect(pageErrors).toEqual([]);
  });
});
