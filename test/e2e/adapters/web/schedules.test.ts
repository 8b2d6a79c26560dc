// Schedules on the web, in Chromium and over HTTP: the playground (scripted model, real SQLite files)
// with a service token and one person's token, a schedule made in chat by ann, one by bob, and one
// from the channel settings file. The service token lists all three, pauses and deletes; ann's token
// sees and changes only hers; the file's schedule is paused here but deleted only in the file. The
// trace viewer's panel lists them, pauses one and deletes another, and fits a phone.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Schedule } from "../../../../src/store/index.js";
import {
  artifactsDir,
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

const SERVICE = { authorization: "Bearer service-token" };
const ANN = { authorization: "Bearer ann-token" };

function settingsFile(): string {
  const file = join(mkdtempSync(join(tmpdir(), "glassbox-web-schedules-")), "channels.yaml");
  writeFileSync(
    file,
    [
      "schedules:",
      "  - name: incident digest",
      "    workspace: T0FAKE0001",
      "    channel: C0DIGEST",
      "    every: weekday 09:00",
      "    timezone: Europe/Berlin",
      "    prompt: Summarise yesterday's incidents.",
      "    as: U1",
      "",
    ].join("\n"),
  );
  return file;
}

const chatSchedule = (id: string, userId: string, prompt: string): Schedule => ({
  id,
  sessionId: `${userId}-daily`,
  userId,
  cron: "30 7 * * *",
  timezone: "UTC",
  prompt,
  missed: "once",
  paused: false,
  source: "chat",
  createdAt: new Date().toISOString(),
  lastTick: new Date().toISOString(),
});

interface Listed {
  schedules: Array<Schedule & { next: string | null }>;
}

describe("schedules on the web", () => {
  let playground: Playground;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];
  const api = (path: string) => `${playground.url}api/schedules${path}`;
  const send = async (method: string, path: string, headers: Record<string, string>, body?: unknown) => {
    const response = await fetch(api(path), {
      method,
      headers: { "content-type": "application/json", ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };

  beforeAll(async () => {
    [browser, playground] = await Promise.all([
      launchChromium(),
      startPlayground({
        env: {
          GLASSBOX_CHANNELS: settingsFile(),
          GLASSBOX_API_TOKEN: "service-token",
          GLASSBOX_API_USERS: JSON.stringify({ "ann-token": "web:ann" }),
          GLASSBOX_SCHEDULE_LOOK_MS: "100",
        },
      }),
    ]);
    await playground.deployment.store.saveSchedule(chatSchedule("sch_ann", "web:ann", "Say good morning to ann."));
    await playground.deployment.store.saveSchedule(chatSchedule("sch_bob", "web:bob", "Tell bob the weather."));
    page = collectPageErrors(
      await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage(),
      pageErrors,
    );
  });
  afterAll(async () => {
    await browser?.close();
    await cleanUp();
  });

  it("the service token sees every schedule; a person's token sees and changes only theirs", async () => {
    // The file's schedule is kept once the worker's ticker has looked.
    await expect
      .poll(async () => (await getJson<Listed>(api(""), SERVICE)).body.schedules?.length ?? 0, { timeout: 10_000 })
      .toBe(3);
    const all = (await getJson<Listed>(api(""), SERVICE)).body.schedules;
    const file = all.find((schedule) => schedule.source === "settings");
    expect(file).toMatchObject({ name: "incident digest", sessionId: "slack:T0FAKE0001:C0DIGEST:main", paused: false });
    expect(Date.parse(file?.next ?? "")).toBeGreaterThan(Date.now());

    expect((await getJson<Listed>(api(""), ANN)).body.schedules.map((schedule) => schedule.id)).toEqual(["sch_ann"]);
    expect(await send("POST", "/sch_bob", ANN, { paused: true })).toEqual({
      status: 404,
      body: { error: "There is no schedule sch_bob." },
    });
    expect((await send("DELETE", "/sch_bob", ANN)).status).toBe(404);
    const paused = await send("POST", "/sch_ann", ANN, { paused: true });
    expect(paused.body).toMatchObject({ id: "sch_ann", paused: true, next: null });
    expect((await send("POST", "/sch_ann", ANN, { paused: "yes" })).body.error).toBe(
      'Send {"paused": true} to pause it, or false to resume it.',
    );
    expect(await send("DELETE", `/${file?.id}`, SERVICE)).toEqual({
      status: 409,
      body: {
        error:
          "The schedule incident digest is written in the channel settings file; take it out there, or pause it here.",
      },
    });
    expect((await postJson(api("/sch_ann"), { paused: false }, {})).status).toBe(401);
    expect((await send("POST", "/sch_ann", ANN, { paused: false })).body).toMatchObject({ paused: false });
  });

  it("the trace viewer's panel lists them, pauses one and deletes another, and fits a phone", async () => {
    await page.goto(`${playground.url}trace?token=service-token`);
    const panel = page.locator("#schedules");
    await panel.locator("summary").click();
    await expect.poll(() => panel.locator("li").count(), { timeout: 10_000 }).toBe(3);
    const bob = panel.locator('li[data-schedule="sch_bob"]');
    expect(await bob.textContent()).toContain("Tell bob the weather.");
    expect(await bob.textContent()).toContain("as web:bob");
    await bob.getByRole("button", { name: "Pause" }).click();
    await bob.getByRole("button", { name: "Resume" }).waitFor(VISIBLE);
    expect(await bob.getAttribute("class")).toBe("paused");
    expect((await playground.deployment.store.schedules()).find((schedule) => schedule.id === "sch_bob")?.paused).toBe(
      true,
    );

    const file = panel.locator("li", { hasText: "incident digest" });
    expect(await file.locator(".hint").textContent()).toBe("from the settings file");
    expect(await file.getByRole("button", { name: "Delete" }).count()).toBe(0);
    await page.screenshot({ path: join(artifactsDir(), "trace-schedules.png") });

    page.once("dialog", (dialog) => void dialog.accept());
    await panel.locator('li[data-schedule="sch_ann"]').getByRole("button", { name: "Delete" }).click();
    await expect.poll(() => panel.locator("li").count(), { timeout: 10_000 }).toBe(2);
    expect((await playground.deployment.store.schedules()).map((schedule) => schedule.id)).not.toContain("sch_ann");

    const phone = collectPageErrors(await (await browser.newContext(PHONE)).newPage(), pageErrors);
    await phone.goto(`${playground.url}trace?token=service-token`);
    await phone.locator("#schedules summary").click();
    await expect.poll(() => phone.locator("#schedules li").count(), { timeout: 10_000 }).toBe(2);
    expect(await pageOverflow(phone)).toBe(0);
    await phone.screenshot({ path: join(artifactsDir(), "trace-schedules-phone.png") });
    expect(pageErrors).toEqual([]);
  });
});
