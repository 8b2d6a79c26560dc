// A web session's surface in a worker (src/adapters/web/text-relay.ts): the streamed answer text gathered
// and passed on in a few notices, in order, each under NOTIFY's payload limit, a step's at its end
// at the latest; of the rest of the run only an empty notice when it stored something a page shows
// (the pages read it from the store), a notice when the run waits for a run slot, and a failing
// publish costs the run nothing.
import { describe, expect, it, vi } from "vitest";
import type { AgentEvent } from "../../../../src/agent/events.js";
import type { RunResult } from "../../../../src/agent/run.js";
import { createLogger } from "../../../../src/logger.js";
import type { TextNotice } from "../../../../src/store/port-data.js";
import { createTextRelay, MAX_NOTICE_BYTES, noticesOf } from "../../../../src/adapters/web/text-relay.js";

const log = createLogger({ level: "silent" });
const delta = (step: number, text: string): AgentEvent => ({ type: "model_delta", runId: "run_1", step, text });
const modelEnd = (step: number): AgentEvent => ({
  type: "model_end",
  runId: "run_1",
  step,
  latencyMs: 5,
  response: {
    content: "",
    toolCalls: [],
    finishReason: "stop",
    usage: { promptTokens: 1, completionTokens: 1, totalTokens: 2 },
    model: "m",
  },
});

describe("the text relay of a worker's web sessions", () => {
  it("gathers a step's pieces into one notice, sent at the step's end at the latest, one after another, and starts a new one for the next step", async () => {
    const sent: TextNotice[] = [];
    let sending = 0;
    // A publish that takes a moment: the next waits for it (two at once could arrive in either order).
    const publish = async (notice: TextNotice) => {
      expect(sending).toBe(0);
      sending++;
      await new Promise((resolve) => setTimeout(resolve, 5));
      sent.push(notice);
      sending--;
    };
    const surface = createTextRelay({ publish, log, everyMs: 60_000 })("web:s1");
    for (const piece of ["It ", "is ", "42."]) surface.onEvent(delta(2, piece));
    expect(sent).toEqual([]); // gathered, not one a token
    surface.onEvent(modelEnd(2));
    // The step's text; the step itself is read with what follows it (its calls, or the run's end).
    await vi.waitFor(() => expect(sent).toEqual([{ sessionId: "web:s1", runId: "run_1", step: 2, text: "It is 42." }]));
    surface.onEvent(delta(3, "More"));
    surface.onEvent(delta(4, "Next"));
    await surface.finish({ runId: "run_1", steps: 4 } as RunResult);
    expect(sent.slice(1)).toEqual([
      { sessionId: "web:s1", runId: "run_1", step: 3, text: "More" },
      { sessionId: "web:s1", runId: "run_1", step: 4, text: "Next" },
      { sessionId: "web:s1", runId: "run_1", step: 4, text: "" }, // the run's end
    ]);
    // The page shows approvals from the store, once told to read it.
    expect(await surface.askApproval({ runId: "run_1" } as never)).toBeUndefined();
    await vi.waitFor(() => expect(sent.at(-1)).toEqual({ sessionId: "web:s1", runId: "run_1", step: 0, text: "" }));
  });

  it("sends what it gathered every few moments while the step goes on", async () => {
    const sent: TextNotice[] = [];
    const surface = createTextRelay({ publish: async (notice) => void sent.push(notice), log, everyMs: 10 })("web:s1");
    surface.onEvent(delta(1, "Thinking "));
    surface.onEvent(delta(1, "aloud"));
    await vi.waitFor(
      () => expect(sent).toEqual([{ sessionId: "web:s1", runId: "run_1", step: 1, text: "Thinking aloud" }]), // no news: nothing stored yet
      { timeout: 5_000, interval: 5 },
    );
    surface.onEvent(delta(1, "…"));
    await vi.waitFor(() => expect(sent.map((notice) => notice.text)).toEqual(["Thinking aloud", "…"]), {
      timeout: 5_000,
      interval: 5,
    });
  });

  it("says a run waits for a run slot in a notice of its own, which pages show as queued; a wait with no run named says nothing", async () => {
    const sent: TextNotice[] = [];
    const surface = createTextRelay({ publish: async (notice) => void sent.push(notice), log })("web:s1");
    surface.queued?.();
    surface.queued?.("run_1");
    await vi.waitFor(() =>
      expect(sent).toEqual([{ sessionId: "web:s1", runId: "run_1", step: 0, text: "", queued: true }]),
    );
  });

  it("cuts a long text into notices under the payload limit, in order, never inside a character", () => {
    const text = `${'ab"c\n'.repeat(900)}${"👋🏽".repeat(1_500)}${"中文".repeat(1_000)}`;
    const notices = noticesOf({ sessionId: "web:s1", runId: "run_1", step: 1, text });
    expect(notices.length).toBeGreaterThan(2);
    for (const notice of notices)
      expect(Buffer.byteLength(JSON.stringify(notice))).toBeLessThanOrEqual(MAX_NOTICE_BYTES);
    expect(notices.map((notice) => notice.text).join("")).toBe(text);
    for (const notice of notices) expect(notice.text).not.toMatch(/^[\udc00-\udfff]|[\ud800-\udbff]$/);
  });

  it("a publish that fails is logged once and the run goes on", async () => {
    const warnings: string[] = [];
    const logged = { ...log, warn: (_fields: object, message: string) => void warnings.push(message) } as typeof log;
    const surface = createTextRelay({
      publish: async () => Promise.reject(new Error("connection lost")),
      log: logged,
      everyMs: 60_000,
    })("web:s1");
    surface.onEvent(delta(1, "one"));
    surface.onEvent(modelEnd(1));
    surface.onEvent(delta(2, "two"));
    await surface.finish({ runId: "run_1", steps: 2 } as RunResult);
    await vi.waitFor(() => expect(warnings).toHaveLength(1));
    expect(warnings[0]).toContain("streamed answer text");
  });
});
