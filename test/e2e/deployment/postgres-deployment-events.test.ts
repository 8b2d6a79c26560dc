// How a process without an agent (ingress) tells a followed web session what its workers did
// (src/adapters/web/store-events.ts): the runs' writes go into the real store (SQLite always, PostgreSQL
// when GLASSBOX_TEST_DATABASE_URL is set) as a worker makes them, and the hub's watchers hear the
// events the web surface would have sent: a start, a pause with its approvals, a decision, the
// resume, the end; a running run's steps (model calls, tool calls running and ended, notes) as they are stored; a pipeline's stages as one answer; no sub-agent's run; an ended run's stream
// closed; runs that ended before the page opened not sent again; the answer text workers pass on
// (publishText) as it streams, in order with the stored steps, and none for an older step or an ended run;
// a run waiting for a run slot, as its worker says, shown queued.
import { afterEach, describe, expect, it, vi } from "vitest";
import type { WebEvent } from "../../../src/adapters/web/event-hub.js";
import { followStoreEvents, type StoreEvents } from "../../../src/adapters/web/store-events.js";
import { createLogger } from "../../../src/logger.js";
import { openStorePort, type AnyStorePort } from "../../../src/store/index.js";
import type { ToolCallRecord } from "../../../src/tools/types.js";
import {
  approvalRequest,
  outcomeOf,
  pause,
  pausedWaitingFor,
  runRecord,
  stepOf,
  TARGETS,
  type TestDatabase,
} from "../helpers/store-targets.js";

const WAIT = { timeout: 10_000, interval: 20 };
const log = createLogger({ level: "silent" });

const toolCall = (id: string, name: string): ToolCallRecord => ({
  id,
  name,
  rawArguments: '{"q":"orders"}',
  arguments: { q: "orders" },
  repairs: [],
  envelope: { status: "success", data: { rows: 3 } },
  content: '{"status":"success","data":{"rows":3}}',
  truncatedChars: 0,
  durationMs: 7,
  dangerous: false,
});

for (const target of TARGETS) {
  describe(`store events for pages in ingress: ${target.name}${postgresNote(target.kind)}`, () => {
    let database: TestDatabase | undefined;
    let store: AnyStorePort | undefined;
    let events: StoreEvents | undefined;
    afterEach(async () => {
      events?.stop();
      await store?.close();
      await database?.drop();
      database = store = events = undefined;
    });

    async function open(recentMs?: number): Promise<{ store: AnyStorePort; events: StoreEvents }> {
      database = await target.fresh();
      store = await openStorePort(database.options);
      events = followStoreEvents({ store, log, everyMs: 25, ...(recentMs === undefined ? {} : { recentMs }) });
      return { store, events };
    }

    function follow(hub: StoreEvents["hub"], sessionId: string) {
      const heard: WebEvent[] = [];
      const watching = hub.watchSession(sessionId, undefined, {
        event: (numbered) => heard.push(numbered.event),
        end: () => {},
      });
      const said = (...types: string[]) =>
        vi.waitFor(() => expect(heard.map((event) => event.type)).toEqual(types), WAIT);
      return { heard, said, stop: watching.stop };
    }

    it("a run that waits for a run slot is shown queued when its worker says so, before it starts; a late notice is not shown", async () => {
      const { store, events } = await open();
      const page = follow(events.hub, "web:q1");
      const run = runRecord("run_q", "web:q1", "web:ann", "when you can");
      const message = { message: { role: "user" as const, content: "when you can" }, tokens: 4 };
      await store.acceptEvent({ eventIds: [], run, message });
      await store.publishText({ sessionId: "web:q1", runId: "run_q", step: 0, text: "", queued: true });
      await page.said("queued");
      expect(page.heard[0]).toEqual({ type: "queued", runId: "run_q", sessionId: "web:q1" });
      await store.record([{ kind: "start_run", run }]);
      await page.said("queued", "run_start");
      // Heard after the run was read as started (a notice that came late): the page already shows it running.
      await store.publishText({ sessionId: "web:q1", runId: "run_q", step: 0, text: "", queued: true });
      await store.record([{ kind: "end_run", outcome: outcomeOf("run_q", { status: "final", output: "Done" }) }]);
      await page.said("queued", "run_start", "run_end");
    });

    it("a run's start, pause, decision, resume and end, as the worker writes them", async () => {
      const { store, events } = await open();
      const page = follow(events.hub, "web:s1");
      await store.record([{ kind: "start_run", run: runRecord("run_1", "web:s1", "web:ann", "wipe it") }]);
      await page.said("run_start");
      expect(page.heard[0]).toMatchObject({ runId: "run_1", sessionId: "web:s1", userId: "web:ann", input: "wipe it" });

      const { approvals } = await store.record([
        {
          kind: "end_run",
          outcome: outcomeOf("run_1", {
            status: "awaiting_approval",
            output: "Waiting",
            paused: pausedWaitingFor({ id: "call_a", hash: "hash-call_a" }),
          }),
        },
        {
          kind: "open_approvals",
          requests: [approvalRequest("run_1", "web:s1", "call_a", "web:ann")],
          ttlSeconds: 3_600,
        },
      ]);
      await page.said("run_start", "approval_requested", "run_end");
      expect(page.heard[1]).toMatchObject({
        approval: { id: approvals[0]?.id, status: "pending", requester: "web:ann" },
      });
      expect(page.heard[2]).toMatchObject({ stopReason: "awaiting_approval" });

      // Decided (by someone, anywhere) while the run still waits: said before the resume.
      expect(
        (
          await store.decideApproval({
            approvalId: approvals[0]?.id as string,
            userId: "web:ann",
            approved: true,
            approvers: [],
          })
        ).kind,
      ).toBe("decided");
      await page.said("run_start", "approval_requested", "run_end", "approval_decided");
      expect(page.heard[3]).toMatchObject({ approval: { status: "approved", decidedBy: "web:ann" } });

      await store.record([{ kind: "resume_run", runId: "run_1" }]);
      await page.said("run_start", "approval_requested", "run_end", "approval_decided", "run_resumed");
      await store.record([
        {
          kind: "end_run",
          outcome: outcomeOf("run_1", {
            status: "final",
            output: "Wiped.",
            steps: 2,
            promptTokens: 30,
            completionTokens: 5,
          }),
        },
      ]);
      await page.said("run_start", "approval_requested", "run_end", "approval_decided", "run_resumed", "run_end");
      expect(page.heard[5]).toMatchObject({
        runId: "run_1",
        stopReason: "final",
        output: "Wiped.",
        steps: 2,
        usage: { promptTokens: 30, completionTokens: 5, totalTokens: 35 },
      });
      page.stop();
    });

    it("a pipeline's stages end as one answer, a sub-agent's run is not shown, and a run's own stream closes at its end", async () => {
      const { store, events } = await open();
      const page = follow(events.hub, "web:s2");
      const pipeline = (stage: number) => ({ name: "triage", runId: "run_p1", stage, stages: 2 });
      await store.record([
        {
          kind: "start_run",
          run: { ...runRecord("run_p1", "web:s2", "web:ann", "triage this"), pipeline: pipeline(1) },
        },
      ]);
      await page.said("run_start");

      let ended = false;
      const stream = events.hub.watchRun("run_p1", { event: () => {}, end: () => (ended = true) }, "web:s2");
      expect(stream).toBeDefined();
      await store.record([
        {
          kind: "start_run",
          run: {
            ...runRecord("run_sub", "web:s2", "web:ann", "look it up"),
            parent: { runId: "run_p1", toolCallId: "call_x" },
          },
        },
        { kind: "end_run", outcome: outcomeOf("run_sub", { status: "final", output: "Found." }) },
        { kind: "end_run", outcome: outcomeOf("run_p1", { status: "final", output: "Stage one." }) },
        {
          kind: "start_run",
          run: { ...runRecord("run_p2", "web:s2", "web:ann", "Stage one."), pipeline: pipeline(2) },
        },
      ]);
      await page.said("run_start", "run_start");
      expect(page.heard[1]).toMatchObject({
        runId: "run_p2",
        pipeline: { name: "triage", runId: "run_p1", stage: 2, stages: 2 },
      });
      expect(ended).toBe(false);

      await store.record([
        { kind: "end_run", outcome: outcomeOf("run_p2", { status: "final", output: "Dear customer." }) },
      ]);
      await page.said("run_start", "run_start", "run_end");
      expect(page.heard[2]).toMatchObject({ runId: "run_p2", output: "Dear customer." });
      await vi.waitFor(() => expect(ended).toBe(true), WAIT); // followed by the first stage's id, as POST /api/runs gave it
      page.stop();
    });

    it("a running run's steps as the worker stores them: each model call, each tool result once it has ended, the guards' notes, each once and before the end", async () => {
      const { store, events } = await open();
      const page = follow(events.hub, "web:s5");
      await store.record([{ kind: "start_run", run: runRecord("run_steps", "web:s5", "web:ann", "look it up") }]);
      await page.said("run_start");
      // The reply commits before its tool runs: the step is shown, and its call as running.
      const asked = [{ id: "call_1", name: "lookup", arguments: '{"q":"orders"}' }];
      await store.record([
        {
          kind: "step",
          step: stepOf("run_steps", 1, {
            content: null,
            promptTokens: 120,
            completionTokens: 9,
            latencyMs: 40.4,
            reasoning: "Look it up first.",
            requestedCalls: asked,
          }),
        },
      ]);
      await page.said("run_start", "model_end", "tool_start");
      expect(page.heard[1]).toMatchObject({
        type: "model_end",
        runId: "run_steps",
        step: 1,
        promptTokens: 120,
        completionTokens: 9,
        latencyMs: 40,
        reasoning: "Look it up first.",
      });
      expect(page.heard[2]).toEqual({
        type: "tool_start",
        runId: "run_steps",
        step: 1,
        toolCallId: "call_1",
        name: "lookup",
        arguments: { q: "orders" },
      });

      await store.record([
        { kind: "tool_calls", runId: "run_steps", step: 1, records: [toolCall("call_1", "lookup")] },
        {
          kind: "note",
          runId: "run_steps",
          step: 1,
          text: "'lookup' returned exactly the same result as its previous call.",
        },
      ]);
      await page.said("run_start", "model_end", "tool_start", "tool_end", "note");
      expect(page.heard[3]).toMatchObject({
        type: "tool_end",
        step: 1,
        record: { id: "call_1", name: "lookup", envelope: { status: "success", data: { rows: 3 } }, durationMs: 7 },
      });
      expect(page.heard[3]).not.toHaveProperty("record.content"); // what the model read stays in the trace
      expect(page.heard[4]).toMatchObject({
        type: "note",
        step: 1,
        text: expect.stringContaining("exactly the same result"),
      });

      // A call that waits for an approval is not running: the pause shows its card, not a running call.
      await store.record([
        {
          kind: "step",
          step: stepOf("run_steps", 2, {
            content: null,
            requestedCalls: [{ id: "call_2", name: "post_notice", arguments: "{}" }],
          }),
        },
        {
          kind: "end_run",
          outcome: outcomeOf("run_steps", {
            status: "awaiting_approval",
            output: "Waiting",
            paused: pausedWaitingFor({ id: "call_2", hash: "hash-call_2" }),
          }),
        },
        {
          kind: "open_approvals",
          requests: [approvalRequest("run_steps", "web:s5", "call_2", "web:ann")],
          ttlSeconds: 3_600,
        },
      ]);
      await page.said(
        "run_start",
        "model_end",
        "tool_start",
        "tool_end",
        "note",
        "model_end",
        "approval_requested",
        "run_end",
      );

      // Approved: the run resumes and the call runs.
      await store.record([{ kind: "resume_run", runId: "run_steps" }]);
      await page.said(
        "run_start",
        "model_end",
        "tool_start",
        "tool_end",
        "note",
        "model_end",
        "approval_requested",
        "run_end",
        "run_resumed",
        "tool_start",
      );
      expect(page.heard[9]).toMatchObject({ type: "tool_start", step: 2, toolCallId: "call_2", name: "post_notice" });
      // Its result, the last step and the end land in one commit: the step comes before the end.
      await store.record([
        { kind: "tool_calls", runId: "run_steps", step: 2, records: [toolCall("call_2", "post_notice")] },
        { kind: "step", step: stepOf("run_steps", 3, { content: "There are 3." }) },
        { kind: "end_run", outcome: outcomeOf("run_steps", { status: "final", output: "There are 3.", steps: 3 }) },
      ]);
      const all = [
        "run_start",
        "model_end",
        "tool_start",
        "tool_end",
        "note",
        "model_end",
        "approval_requested",
        "run_end",
        "run_resumed",
        "tool_start",
        "tool_end",
        "model_end",
        "run_end",
      ];
      await page.said(...all);
      expect(page.heard[11]).toMatchObject({ type: "model_end", step: 3 });
      await pause(100); // several beats: nothing is sent twice
      expect(page.heard).toHaveLength(all.length);
      page.stop();
    });

    it("a call stored with its run's pause is never shown running, even when the pause commits between the reading of the run and of its steps", async () => {
      database = await target.fresh();
      const real = await openStorePort(database.options);
      store = real;
      // The real store; once armed, a worker's commit lands right after the run was read as running,
      // before its steps are read (two queries of one reading, as any other process's commit can).
      let between: (() => Promise<unknown>) | undefined;
      const reader = {
        run: (runId: string) => real.run(runId),
        steps: (runId: string, fromStep?: number) => real.steps(runId, fromStep),
        approvalsOfRun: (runId: string) => real.approvalsOfRun(runId),
        watchText: (listener: Parameters<typeof real.watchText>[0]) => real.watchText(listener),
        async runsOfSession(sessionId: string) {
          const runs = await real.runsOfSession(sessionId);
          const write = between;
          between = undefined;
          await write?.();
          return runs;
        },
      };
      events = followStoreEvents({ store: reader, log, everyMs: 25 });
      const page = follow(events.hub, "web:s7");
      await real.record([{ kind: "start_run", run: runRecord("run_skew", "web:s7", "web:ann", "post it") }]);
      await page.said("run_start");
      between = () =>
        real.record([
          {
            kind: "step",
            step: stepOf("run_skew", 1, {
              content: null,
              requestedCalls: [{ id: "call_9", name: "post_notice", arguments: "{}" }],
            }),
          },
          {
            kind: "end_run",
            outcome: outcomeOf("run_skew", {
              status: "awaiting_approval",
              output: "Waiting",
              paused: pausedWaitingFor({ id: "call_9", hash: "hash-call_9" }),
            }),
          },
          {
            kind: "open_approvals",
            requests: [approvalRequest("run_skew", "web:s7", "call_9", "web:ann")],
            ttlSeconds: 3_600,
          },
        ]);
      await page.said("run_start", "model_end", "approval_requested", "run_end");
      expect(between).toBeUndefined(); // the commit did land between the two reads
      await pause(100); // several beats: no call shown running afterwards either
      expect(page.heard.map((event) => event.type)).toEqual([
        "run_start",
        "model_end",
        "approval_requested",
        "run_end",
      ]);
      page.stop();
    });

    it("a call read running between the model's reply and the run's pause: its approval_requested names it, so the page can put the card in its place", async () => {
      const { store, events } = await open();
      const page = follow(events.hub, "web:s8");
      await store.record([{ kind: "start_run", run: runRecord("run_gap", "web:s8", "web:ann", "post it") }]);
      await page.said("run_start");
      // The worker's reply commit: the step with its call, the run still running.
      await store.record([
        {
          kind: "step",
          step: stepOf("run_gap", 1, {
            content: null,
            requestedCalls: [{ id: "call_7", name: "post_notice", arguments: "{}" }],
          }),
        },
      ]);
      events.changed("web:s8");
      await page.said("run_start", "model_end", "tool_start");
      // Its pause, with the approval, in the run's last commit.
      await store.record([
        {
          kind: "end_run",
          outcome: outcomeOf("run_gap", {
            status: "awaiting_approval",
            output: "Waiting",
            paused: pausedWaitingFor({ id: "call_7", hash: "hash-call_7" }),
          }),
        },
        {
          kind: "open_approvals",
          requests: [approvalRequest("run_gap", "web:s8", "call_7", "web:ann")],
          ttlSeconds: 3_600,
        },
      ]);
      events.changed("web:s8");
      await page.said("run_start", "model_end", "tool_start", "approval_requested", "run_end");
      const started = page.heard[2] as Extract<WebEvent, { type: "tool_start" }>;
      const asked = page.heard[3] as Extract<WebEvent, { type: "approval_requested" }>;
      expect(started.toolCallId).toBe("call_7");
      expect(asked.approval.toolCallId).toBe("call_7");
      page.stop();
    });

    it("the answer text workers pass on streams to the page: each step's from a model_start, text from before the run was read shown after its stored steps, none for an older step or an ended run", async () => {
      const { store, events } = await open();
      const page = follow(events.hub, "web:s6");
      const text = (runId: string, step: number, piece: string) =>
        store.publishText({ sessionId: "web:s6", runId, step, text: piece });
      // Text that comes before the page knows the run: the run is read at once, its stored step sent, then the text.
      await store.record([
        { kind: "start_run", run: runRecord("run_text", "web:s6", "web:ann", "look it up") },
        { kind: "step", step: stepOf("run_text", 1, { content: null, requestedCalls: [] }) },
      ]);
      const streamed = () => page.heard.flatMap((event) => (event.type === "model_delta" ? [event.text] : [])).join("");
      await text("run_text", 2, "Three ");
      await text("run_text", 2, "rows ");
      await vi.waitFor(() => expect(streamed()).toBe("Three rows "), WAIT);
      // (the second piece may come with the first or after it, as the reading falls)
      expect(page.heard.map((event) => event.type).join()).toMatch(
        /^run_start,model_end,model_start,model_delta(,model_delta)?$/,
      );
      expect(page.heard[2]).toEqual({ type: "model_start", runId: "run_text", step: 2 });
      expect(page.heard[3]).toMatchObject({ type: "model_delta", runId: "run_text", step: 2 });
      // Read as running: each piece as it comes.
      const before = page.heard.length;
      await text("run_text", 2, "came back.");
      await vi.waitFor(() => expect(page.heard.length).toBe(before + 1), WAIT);
      expect(page.heard[before]).toEqual({ type: "model_delta", runId: "run_text", step: 2, text: "came back." });
      // The step stored and sent as ended: its text may still come (a worker sends a held-back answer with its step).
      await store.record([
        { kind: "step", step: stepOf("run_text", 2, { content: "Three rows came back. Done.", requestedCalls: [] }) },
      ]);
      await vi.waitFor(() => expect(page.heard.at(-1)).toMatchObject({ type: "model_end", step: 2 }), WAIT);
      await text("run_text", 2, " Done.");
      await vi.waitFor(
        () => expect(page.heard.at(-1)).toEqual({ type: "model_delta", runId: "run_text", step: 2, text: " Done." }),
        WAIT,
      );
      // Text of a step older than the one shown is stale.
      await text("run_text", 1, "(late)");
      // Another session's text, and text for a run nobody here follows, reach nobody.
      await store.publishText({ sessionId: "web:elsewhere", runId: "run_other", step: 1, text: "not yours" });
      await store.record([
        {
          kind: "end_run",
          outcome: outcomeOf("run_text", { status: "final", output: "Three rows came back. Done.", steps: 2 }),
        },
      ]);
      await vi.waitFor(
        () => expect(page.heard.at(-1)).toMatchObject({ type: "run_end", output: "Three rows came back. Done." }),
        WAIT,
      );
      const ended = page.heard.length;
      await text("run_text", 3, "after the end");
      // A few beats later nothing more came: the late pieces were dropped.
      await new Promise((resolve) => setTimeout(resolve, 150));
      expect(page.heard.length).toBe(ended);
      expect(streamed()).toBe("Three rows came back. Done.");
      page.stop();
    });

    it("a page opened later hears of the unfinished run, and of one that ended a moment ago (it may have loaded it running)", async () => {
      const { store, events } = await open(60_000);
      await store.record([
        { kind: "start_run", run: runRecord("run_old", "web:s3", "web:ann", "long ago") },
        { kind: "end_run", outcome: outcomeOf("run_old", { status: "final", output: "Then." }) },
        { kind: "start_run", run: runRecord("run_now", "web:s3", "web:ann", "now") },
      ]);
      // Ended just now: the page may have loaded it running, so it hears the end.
      const page = follow(events.hub, "web:s3");
      await page.said("run_start", "run_end", "run_start");
      expect(page.heard.map((event) => event.runId)).toEqual(["run_old", "run_old", "run_now"]);
      page.stop();
    });

    it("runs that ended before the page opened are history it loaded: only the unfinished one is sent", async () => {
      const { store, events } = await open(0);
      await store.record([
        { kind: "start_run", run: runRecord("run_old", "web:s4", "web:ann", "long ago") },
        { kind: "end_run", outcome: outcomeOf("run_old", { status: "final", output: "Then." }) },
        { kind: "start_run", run: runRecord("run_now", "web:s4", "web:ann", "now") },
      ]);
      const page = follow(events.hub, "web:s4");
      await page.said("run_start");
      expect(page.heard[0]).toMatchObject({ runId: "run_now" });
      await store.record([
        { kind: "end_run", outcome: outcomeOf("run_now", { status: "cancelled", output: "Stopped." }) },
      ]);
      await page.said("run_start", "run_end");
      expect(page.heard[1]).toMatchObject({ runId: "run_now", stopReason: "cancelled" });
      page.stop();
    });
  });
}

function postgresNote(kind: string): string {
  return kind === "sqlite" && TARGETS.length === 1 ? " (PostgreSQL not run: needs GLASSBOX_TEST_DATABASE_URL)" : "";
}
