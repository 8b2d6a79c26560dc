/** The trace viewer's replay, as the web API calls it: a run that cannot be replayed is the caller's sentence. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { replayOn } from "../../../../src/adapters/web/web-replay.js";
import { HttpError } from "../../../../src/adapters/web/http.js";
import type { ChatModel } from "../../../../src/agent/types.js";
import { createRunSlots } from "../../../../src/agent/run-slots.js";
import { openStorePort } from "../../../../src/store/index.js";
import { outcomeOf, stepOf } from "../../../e2e/helpers/store-targets.js";

const ZERO_USAGE = { promptTokens: 0, completionTokens: 0, totalTokens: 0 };

const folders: string[] = [];
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

describe("replayOn", () => {
  it("replays take a run slot: with GLASSBOX_MAX_CONCURRENT_RUNS at 1 and the slot taken, a replay waits for it", async () => {
    const folder = mkdtempSync(join(tmpdir(), "glassbox-replay-"));
    folders.push(folder);
    const store = await openStorePort({ databasePath: join(folder, "glassbox.db") });
    try {
      await store.record([
        { kind: "start_run", run: { runId: "run_done", sessionId: "web:s", userId: "u", input: "hello" } },
        {
          kind: "step",
          step: stepOf("run_done", 1, {
            request: [
              { role: "system", content: "You help." },
              { role: "user", content: "hello" },
            ],
          }),
        },
        { kind: "end_run", outcome: outcomeOf("run_done", { output: "answer 1" }) },
      ]);
      let calls = 0;
      const model: ChatModel = {
        name: "scripted-model",
        chat: async () => {
          calls += 1;
          return {
            content: "answer 1",
            toolCalls: [],
            finishReason: "stop",
            usage: ZERO_USAGE,
            model: "scripted-model",
          };
        },
      };
      const slots = createRunSlots(1);
      const release = await slots.acquire(); // a run holds the only slot
      const replaying = replayOn(model, store, undefined, slots)("run_done", {});
      await expect.poll(() => slots.counts()).toEqual({ running: 1, waiting: 1 });
      expect(calls).toBe(0);
      release();
      await replaying;
      expect(calls).toBe(1);
      expect(slots.counts()).toEqual({ running: 0, waiting: 0 });
    } finally {
      await store.close();
    }
  });

  it("regression: a run that made no model call answers 409 with why, not a 500", async () => {
    const folder = mkdtempSync(join(tmpdir(), "glassbox-replay-"));
    folders.push(folder);
    const store = await openStorePort({ databasePath: join(folder, "glassbox.db") });
    try {
      await store.record([
        { kind: "start_run", run: { runId: "run_quiet", sessionId: "web:s", userId: "u", input: "hello" } },
        {
          kind: "end_run",
          outcome: {
            runId: "run_quiet",
            status: "cancelled",
            output: "",
            steps: 0,
            promptTokens: 0,
            completionTokens: 0,
            paused: null,
            error: null,
          },
        },
      ]);
      const model = { name: "scripted-model" } as ChatModel; // never called: there is nothing to replay
      const replay = replayOn(model, store);
      const refused = await replay("run_quiet", {}).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(HttpError);
      expect(refused).toMatchObject({
        status: 409,
        message: "Run run_quiet has no recorded request to replay (it made no model call).",
      });
    } finally {
      await store.close();
    }
  });
});
