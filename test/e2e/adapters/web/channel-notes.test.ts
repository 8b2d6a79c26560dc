// A note for a whole conversation on the web, end to end: the pipeline in one process over the agent
// as `npm start` builds it (the openai SDK against the scripted model server, real SQLite files),
// through the HTTP API and through the chat page in Chromium. The note waits for the person's
// decision on a card that says it is done in their name (self-approval is off here, and the
// confirmation is still theirs); approved, it is kept; denied, it is not.
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ApprovalView } from "../../../../src/adapters/web/event-hub.js";
import type { ChatCompletionRequestBody } from "../../../../src/testing/scripted-model-server.js";
import { textOf } from "../../../helpers/agent.js";
import {
  cleanUp,
  collectPageErrors,
  getJson,
  launchChromium,
  postJson,
  readEvents,
  startPlayground,
  VISIBLE,
  WAIT,
  type Playground,
} from "../../../helpers/web.js";

const NOTE = "The office closes at six on Fridays.";

/** The model: a note for the conversation when asked to remember, then what the tool said. */
function script(request: ChatCompletionRequestBody) {
  const last = request.messages.at(-1);
  if (last?.role === "tool") return { content: `Result: ${textOf(last)}` };
  return { toolCalls: [{ name: "remember", arguments: JSON.stringify({ fact: NOTE, shared_with_channel: true }) }] };
}

describe("a channel note on the web", () => {
  let playground: Playground;
  let api: string;
  let browser: Browser;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    [browser, playground] = await Promise.all([
      launchChromium(),
      startPlayground({ script, env: { GLASSBOX_REQUESTER_MAY_APPROVE: "false" } }),
    ]);
    api = `${playground.url}api`;
  });
  afterAll(async () => {
    await browser?.close();
    await cleanUp();
  });

  const notesOf = (scope: string) =>
    playground.store.db.prepare("SELECT user_id AS userId, content FROM facts WHERE scope = ?").all(scope);

  /** Starts a run asking for the note in `session` as alice; resolves with the approval it waits for. */
  async function askThroughApi(session: string): Promise<{ runId: string; approval: ApprovalView }> {
    const started = await postJson(`${api}/runs`, {
      session,
      input: `remember for everyone: ${NOTE}`,
      userId: "alice",
    });
    expect(started.status).toBe(202);
    const runId = started.body.runId as string;
    const { events } = await readEvents(`${api}/runs/${runId}/events`, { until: (event) => event.type === "run_end" });
    const asked = events.find(({ event }) => event.type === "approval_requested")?.event;
    if (asked?.type !== "approval_requested") throw new Error("no approval was requested");
    expect(events.at(-1)?.event).toMatchObject({ type: "run_end", stopReason: "awaiting_approval" });
    return { runId, approval: asked.approval };
  }

  async function outputOf(runId: string): Promise<string> {
    let run: { done: boolean; output: string | null } | undefined;
    await expect
      .poll(
        async () => (run = (await getJson<{ done: boolean; output: string | null }>(`${api}/runs/${runId}`)).body).done,
        WAIT,
      )
      .toBe(true);
    return run?.output ?? "";
  }

  it("through the API: waits for the requester's decision, marked as theirs to confirm; kept once approved, not when denied", async () => {
    const { runId, approval } = await askThroughApi("notes-api");
    expect(approval).toMatchObject({
      tool: "remember",
      arguments: { fact: NOTE, shared_with_channel: true },
      requester: "web:alice",
      status: "pending",
      requesterConfirms: true,
    });
    expect(notesOf("web:notes-api")).toEqual([]);
    const mallory = await postJson(`${api}/approvals/${approval.id}`, { approved: true, userId: "mallory" });
    expect(mallory.status).toBe(403);
    const decided = await postJson(`${api}/approvals/${approval.id}`, { approved: true, userId: "alice" });
    expect(decided).toMatchObject({ status: 200, body: { outcome: "decided", resumed: true } });
    expect(await outputOf(runId)).toMatch(/^Result: \{"status":"success"/);
    expect(notesOf("web:notes-api")).toEqual([{ userId: "web:alice", content: NOTE }]);

    const again = await askThroughApi("notes-api");
    const denied = await postJson(`${api}/approvals/${again.approval.id}`, { approved: false, userId: "alice" });
    expect(denied.status).toBe(200);
    expect(await outputOf(again.runId)).toMatch(/^Result: \{"status":"error","error":\{"type":"denied"/);
    expect(notesOf("web:notes-api")).toHaveLength(1);
  });

  it("on the chat page: the card asks the person to confirm a note in their name; Approve keeps it, Deny does not", async () => {
    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    const page: Page = collectPageErrors(await context.newPage(), pageErrors);
    await page.goto(playground.url);
    await page.locator("#connection", { hasText: "Live" }).waitFor(VISIBLE);
    const session = `web:${String(await page.evaluate('localStorage.getItem("glassbox.session")'))}`;
    const send = async () => {
      await page.getByLabel("Message").fill(`remember for everyone: ${NOTE}`);
      await page.getByLabel("Message").press("Enter");
    };

    await send();
    const first = page.locator(".approval").nth(0);
    await first.waitFor(VISIBLE);
    expect(await first.locator("h2").textContent()).toBe("Confirmation needed");
    expect(await first.locator(".hint").textContent()).toBe(
      "It is done in your name: approve it only if you asked for it.",
    );
    expect(await first.textContent()).toContain("glassbox would run remember in your name:");
    expect(notesOf(session)).toEqual([]);
    await first.getByRole("button", { name: "Approve" }).click();
    await first.locator(".outcome", { hasText: "Approved by you" }).waitFor(VISIBLE);
    await page.locator(".message.assistant .answer", { hasText: '"status":"success"' }).waitFor(VISIBLE);
    expect(notesOf(session)).toHaveLength(1);

    await send();
    const second = page.locator(".approval").nth(1);
    await second.waitFor(VISIBLE);
    await second.getByRole("button", { name: "Deny" }).click();
    await second.locator(".outcome", { hasText: "Denied by you" }).waitFor(VISIBLE);
    await page.locator(".message.assistant .answer", { hasText: '"type":"denied"' }).waitFor(VISIBLE);
    expect(notesOf(session)).toHaveLength(1);
    expect(pageErrors).toEqual([]);
    await context.close();
  });
});
