// The store contract, runs: accepting an event in one transaction (exactly once, also when two
// handles accept it at once), a run's writes read back as its trace, pausing with approvals,
// interrupting the runs of a process that is gone, and migrating from several processes at once.
import { expect, it } from "vitest";
import type { Message, ToolSpec } from "../../../src/agent/types.js";
import type { ToolCallRecord } from "../../../src/store/index.js";
import {
  inProcesses,
  outcomeOf,
  pausedWaitingFor,
  approvalRequest,
  runRecord,
  stepOf,
  type Contract,
} from "../helpers/store-targets.js";

const userMessage = (content: string) => ({ message: { role: "user", content } as Message, tokens: 5 });

const toolCall = (id: string, name: string, status: "success" | "error" = "success"): ToolCallRecord => ({
  id,
  name,
  rawArguments: "{}",
  arguments: {},
  repairs: [],
  envelope:
    status === "success"
      ? { status: "success", data: { ok: true } }
      : { status: "error", error: { type: "timeout", message: "slow" } },
  content: status === "success" ? '{"status":"success","data":{"ok":true}}' : '{"status":"error"}',
  truncatedChars: 0,
  durationMs: 3.25,
  dangerous: false,
});

export function runsContract({ open, database }: Contract): void {
  it("accepts an event in one transaction: its claims, its run (accepted, then started once) and its message; a duplicate writes nothing else", async () => {
    const store = await open();
    const run = runRecord("run_ev1", "slack:T1:C1:1.1", "U1", "hello there");
    const joined: string[] = [];
    const accepted = await store.acceptEvent(
      { eventIds: ["slack:event:Ev1", "slack:message:C1:1.1"], run, message: userMessage("hello there") },
      async () => void joined.push("Ev1"),
    );
    expect(accepted).toEqual({ kind: "accepted", messageId: expect.any(Number) });
    expect(joined).toEqual(["Ev1"]);
    expect(await store.run("run_ev1")).toMatchObject({ status: "accepted", userId: "U1", input: "hello there" });
    expect(await store.messagesAfter(run.sessionId, 0, 0)).toEqual([
      {
        id: accepted.kind === "accepted" ? accepted.messageId : -1,
        runId: "run_ev1",
        message: { role: "user", content: "hello there" },
        tokens: 5,
      },
    ]);

    // A redelivery under a new event id of a message already claimed: nothing but the new id's claim.
    const again = await store.acceptEvent(
      {
        eventIds: ["slack:event:Ev2", "slack:message:C1:1.1"],
        run: runRecord("run_ev2", run.sessionId),
        message: userMessage("hello there"),
      },
      async () => void joined.push("Ev2"),
    );
    expect(again).toEqual({ kind: "duplicate" });
    expect(joined).toEqual(["Ev1"]);
    expect(await store.run("run_ev2")).toBeUndefined();
    expect(await store.messagesAfter(run.sessionId, 0, 0)).toHaveLength(1);
    expect(await store.claim("slack:event:Ev2")).toBe(false);

    expect((await store.record([{ kind: "start_run", run }])).startedRuns).toEqual(["run_ev1"]);
    expect((await store.record([{ kind: "start_run", run }])).startedRuns).toEqual([]);
    expect(await store.run("run_ev1")).toMatchObject({ status: "running" });
    expect(await store.endUnstartedRun(outcomeOf("run_ev1", { status: "error" }))).toBe(false);
    await store.acceptEvent({ eventIds: [], run: runRecord("run_refused", run.sessionId) });
    expect(await store.endUnstartedRun(outcomeOf("run_refused", { status: "error", output: "over the cap" }))).toBe(
      true,
    );
    expect(await store.run("run_refused")).toMatchObject({ status: "error", output: "over the cap" });
  });

  it("two acceptances of one message at the same moment: one is accepted, the other is a duplicate that writes nothing but its claims", async () => {
    const store = await open();
    const session = "slack:T1:C2:2.2";
    const accept = (event: string, runId: string) =>
      store.acceptEvent({
        eventIds: [`slack:event:${event}`, "slack:message:C2:2.2"],
        run: runRecord(runId, session),
        message: userMessage("hello at once"),
      });
    const outcomes = await Promise.all([accept("EvA", "run_a"), accept("EvB", "run_b")]);
    expect(outcomes.map((outcome) => outcome.kind).sort()).toEqual(["accepted", "duplicate"]);
    const loser = outcomes[0]?.kind === "duplicate" ? "run_a" : "run_b";
    expect(await store.run(loser)).toBeUndefined();
    expect(await store.messagesAfter(session, 0, 0)).toHaveLength(1);
    expect(await store.claim("slack:event:EvA")).toBe(false);
    expect(await store.claim("slack:event:EvB")).toBe(false);
  });

  it("regression: an accepted run has spent nothing, so a user's day's cost stays known (the cost cap refuses before a run)", async () => {
    const store = await open();
    await store.acceptEvent({ eventIds: ["slack:event:EvCost"], run: runRecord("run_waits", "slack:T1:C9:1.1", "U9") });
    expect(await store.run("run_waits")).toMatchObject({ status: "accepted", cost: 0 });
    expect(await store.userUsageSince("U9", new Date(Date.now() - 60_000))).toMatchObject({ cost: 0 });
  });

  it("refuses an acceptance into a session another user started, writing nothing (not even its claims)", async () => {
    const store = await open();
    await store.acceptEvent({
      eventIds: [],
      run: runRecord("run_alice", "web:taken", "web:alice"),
      sessionOwner: "web:alice",
    });
    const refused = await store.acceptEvent({
      eventIds: ["web:event:1"],
      run: runRecord("run_bob", "web:taken", "web:bob"),
      message: userMessage("mine now"),
      sessionOwner: "web:bob",
    });
    expect(refused).toEqual({ kind: "not_owner", owner: "web:alice" });
    expect(await store.run("run_bob")).toBeUndefined();
    expect(await store.messagesAfter("web:taken", 0, 0)).toEqual([]);
    expect(await store.claim("web:event:1")).toBe(true);
  });

  it("finds the newest thread reading of a session, and the newest channel-history reading of a channel's sessions", async () => {
    const store = await open();
    const reading = (through: string, channel = false) => ({
      messages: [],
      leftOut: 0,
      through,
      ...(channel ? { channel: true as const } : {}),
    });
    const start = (runId: string, sessionId: string, threadContext: ReturnType<typeof reading>) =>
      store.record([{ kind: "start_run", run: { ...runRecord(runId, sessionId), threadContext } }]);
    await start("run_r1", "slack:T1:C1:1.1", reading("1.1", true));
    await start("run_r2", "slack:T1:C1:1.1", reading("1.5"));
    await start("run_r3", "slack:T1:C1:2.2", reading("2.2", true));
    await start("run_r4", "slack:T1:C12:3.3", reading("3.3", true));
    await start("run_r5", "discord:G1:C5", reading("900", true));
    expect((await store.latestThreadReading("slack:T1:C1:1.1"))?.through).toBe("1.5");
    // The channel's history: the newest reading flagged `channel` in any of its sessions, not another channel's.
    expect(await store.latestThreadReading("slack:T1:C1:4.4", "slack:T1:C1")).toEqual(reading("2.2", true));
    expect((await store.latestThreadReading("discord:G1:C5", "discord:G1:C5"))?.through).toBe("900");
    expect(await store.latestThreadReading("discord:G1:C55", "discord:G1:C55")).toBeUndefined();
  });

  it("of two handles accepting the same event at once, exactly one accepts it (20 events)", async () => {
    const [first, second] = [await open(), await open()];
    const outcomes = await Promise.all(
      Array.from({ length: 20 }, (_, index) =>
        Promise.all(
          [first, second].map((store, which) =>
            store.acceptEvent({
              eventIds: [`slack:event:E${index}`],
              run: runRecord(`run_${index}_${which}`, `slack:T1:C1:${index}`),
              message: userMessage(`message ${index}`),
            }),
          ),
        ),
      ),
    );
    for (const pair of outcomes) expect(pair.map((outcome) => outcome.kind).sort()).toEqual(["accepted", "duplicate"]);
    for (let index = 0; index < 20; index++)
      expect(await first.messagesAfter(`slack:T1:C1:${index}`, 0, 0)).toHaveLength(1);
  });

  it("reads a run's writes back as its trace: steps with their tool calls and notes, the exact request, price, totals, sub-agents", async () => {
    const store = await open();
    const system: Message = { role: "system", content: "You are glassbox." };
    const question: Message = { role: "user", content: "Check the order" };
    const assistant: Message = {
      role: "assistant",
      content: null,
      tool_calls: [{ id: "call_1", type: "function", function: { name: "check", arguments: "{}" } }],
    };
    const tools: ToolSpec[] = [
      {
        type: "function",
        function: { name: "check", description: "Checks.", parameters: { type: "object", properties: {} } },
      },
    ];
    const run = runRecord("run_t", "web:trace", "U7", "Check the order");
    // What the model layer got back and read it as; kept beside the notes, read back apart from them.
    const exchange = { note: "a tool call was read from text", received: '<tool_call>{"name":"check"}', readAs: "[]" };
    const thrown = { ...toolCall("call_2", "lookup", "error"), errorStack: "at lookup (file:///tools.mjs:3:9)" };
    const child = {
      ...runRecord("run_child", "web:trace", "U7", "a specialist's task"),
      parent: { runId: "run_t", toolCallId: "call_1" },
    };
    await store.record([
      { kind: "start_run", run },
      { kind: "messages", sessionId: run.sessionId, runId: run.runId, entries: [{ message: question, tokens: 4 }] },
      {
        kind: "step",
        step: stepOf("run_t", 1, {
          content: null,
          request: [system, question],
          tools,
          toolChoice: "auto",
          streamed: true,
          reasoning: "Let me look.",
          modelNotes: ["a tool call was read from text"],
          modelExchanges: [exchange],
          requestedCalls: [
            { id: "call_1", name: "check", arguments: '{"what":"disk"}' },
            { id: "call_2", name: "lookup", arguments: "{}" },
          ],
        }),
      },
      { kind: "messages", sessionId: run.sessionId, runId: run.runId, entries: [{ message: assistant, tokens: 9 }] },
    ]);
    await store.record([
      { kind: "start_run", run: child },
      { kind: "step", step: stepOf("run_child", 1, { model: "gpt-4o", cost: 0.01 }) },
      { kind: "end_run", outcome: outcomeOf("run_child", { promptTokens: 40, completionTokens: 4 }) },
      { kind: "price_run", runId: "run_child" },
    ]);
    await store.record([
      {
        kind: "tool_calls",
        runId: "run_t",
        step: 1,
        records: [toolCall("call_1", "check"), thrown],
      },
      { kind: "note", runId: "run_t", step: 1, text: "'check' returned the same result." },
      { kind: "note", runId: "run_t", step: 1, text: "Answer with what you have." },
      {
        kind: "step",
        step: stepOf("run_t", 2, {
          model: "gpt-4o-mini-2024-07-18",
          request: [system, question, assistant],
          toolChoice: "none",
        }),
      },
      { kind: "step", step: stepOf("run_t", 2, { content: "a second write of a step is ignored" }) },
      {
        kind: "end_run",
        outcome: outcomeOf("run_t", { steps: 2, promptTokens: 200, completionTokens: 20, output: "All fine." }),
      },
      { kind: "price_run", runId: "run_t" },
    ]);

    expect(await store.run("run_t")).toMatchObject({
      status: "final",
      output: "All fine.",
      steps: 2,
      promptTokens: 200,
      completionTokens: 20,
      model: "gpt-4o-mini-2024-07-18",
      parentRunId: null,
    });
    expect((await store.run("run_t"))?.cost).toBeCloseTo(0.001 + 0.001 + 0.01, 10);
    const steps = await store.steps("run_t");
    expect(steps.map((step) => step.step)).toEqual([1, 2]);
    expect(steps[0]).toMatchObject({
      content: null,
      reasoning: "Let me look.",
      modelNotes: ["a tool call was read from text"],
      modelExchanges: [exchange],
      notes: ["'check' returned the same result.", "Answer with what you have."],
      promptTokens: 100,
      completionTokens: 10,
      latencyMs: 12.5,
      contextMessages: 1,
      contextTokens: 10,
    });
    expect(steps[0]?.toolCalls).toEqual([toolCall("call_1", "check"), thrown]);
    expect(steps[1]?.modelExchanges).toBeUndefined();
    expect(steps[0]?.requestedCalls).toEqual([
      { id: "call_1", name: "check", arguments: '{"what":"disk"}' },
      { id: "call_2", name: "lookup", arguments: "{}" },
    ]);
    expect(steps[1]).toMatchObject({ content: "answer 2", requestedCalls: [], toolCalls: [], notes: [] });
    expect(await store.steps("run_t", 2)).toEqual([steps[1]]); // from a step on (a page following the run reads what is new)
    expect(await store.steps("run_t", 3)).toEqual([]);
    expect(await store.payload("run_t", 1)).toEqual({
      messages: [system, question],
      tools,
      tool_choice: "auto",
      stream: true,
    });
    expect(await store.payload("run_t", 2)).toEqual({ messages: [system, question, assistant], tool_choice: "none" });
    expect(await store.payload("run_t", 3)).toBeUndefined();

    expect((await store.childrenOf("run_t")).map((trace) => trace.runId)).toEqual(["run_child"]);
    expect((await store.runsOfSession("web:trace")).map((trace) => trace.runId)).toEqual(["run_t", "run_child"]);
    expect(await store.totalsByUser()).toEqual([
      { key: "U7", runs: 1, promptTokens: 200, completionTokens: 20, cost: expect.closeTo(0.012, 10) },
    ]);
    expect((await store.totalsBySession()).map((total) => total.key)).toEqual(["web:trace"]);
    expect((await store.totalsByRun()).map((total) => total.key)).toEqual(["run_t"]); // sub-agents' runs are counted in their parent's
    expect(await store.totalsByDay("U7")).toEqual([
      {
        key: new Date().toISOString().slice(0, 10),
        runs: 1,
        promptTokens: 200,
        completionTokens: 20,
        cost: expect.closeTo(0.012, 10),
      },
    ]);
    expect(await store.totalsByDay("U8")).toEqual([]);
    expect(await store.userUsageSince("U7", new Date(Date.now() - 60_000))).toMatchObject({
      runs: 1,
      promptTokens: 200,
      completionTokens: 20,
    });
    expect(await store.userUsageSince("U7", new Date(Date.now() + 60_000))).toEqual({
      key: "U7",
      runs: 0,
      promptTokens: 0,
      completionTokens: 0,
      cost: 0,
    });

    // A step whose model has no price makes the run's cost unknown, not zero.
    await store.record([
      { kind: "start_run", run: runRecord("run_unpriced", "web:trace", "U7") },
      { kind: "step", step: stepOf("run_unpriced", 1, { cost: null }) },
      { kind: "end_run", outcome: outcomeOf("run_unpriced") },
      { kind: "price_run", runId: "run_unpriced" },
    ]);
    expect(await store.run("run_unpriced")).toMatchObject({ cost: null });
    expect((await store.totalsByUser("U7"))[0]).toMatchObject({ runs: 2, cost: null });
  });

  it("commits a running run's writes as the loop makes them: a reply with its message, the tool results, the last step with the run's end and price", async () => {
    const store = await open();
    const run = runRecord("run_points", "slack:T1:C7:1.1", "U7", "what is 6*7?");
    await store.acceptEvent({ eventIds: ["slack:event:EvPoints"], run, message: userMessage("what is 6*7?") });
    expect((await store.record([{ kind: "start_run", run }])).startedRuns).toEqual(["run_points"]);
    const call: Message = {
      role: "assistant",
      content: null,
      tool_calls: [{ id: "call_1", type: "function", function: { name: "calculator", arguments: "{}" } }],
    };
    const reply = await store.record([
      { kind: "step", step: stepOf("run_points", 1, { content: null, model: "model-a", cost: 0.002 }) },
      { kind: "messages", sessionId: run.sessionId, runId: run.runId, entries: [{ message: call, tokens: 7 }] },
    ]);
    const result: Message = { role: "tool", tool_call_id: "call_1", content: '{"status":"success","data":42}' };
    const results = await store.record([
      { kind: "tool_calls", runId: "run_points", step: 1, records: [toolCall("call_1", "calculator")] },
      { kind: "messages", sessionId: run.sessionId, runId: run.runId, entries: [{ message: result, tokens: 6 }] },
    ]);
    const answer: Message = { role: "assistant", content: "42" };
    const end = await store.record([
      { kind: "step", step: stepOf("run_points", 2, { content: "42", model: "model-b", cost: 0.003 }) },
      { kind: "messages", sessionId: run.sessionId, runId: run.runId, entries: [{ message: answer, tokens: 2 }] },
      { kind: "end_run", outcome: outcomeOf("run_points", { steps: 2, output: "42" }) },
      { kind: "price_run", runId: "run_points" },
    ]);
    const ids = [reply, results, end].map((outcome) => outcome.messageIds);
    expect(ids.map((list) => list.map((messageIds) => messageIds.length))).toEqual([[1], [1], [1]]);
    const history = await store.sessionHistory(run.sessionId);
    expect(history.messages.map((stored) => stored.message)).toEqual([
      { role: "user", content: "what is 6*7?" },
      call,
      result,
      answer,
    ]);
    expect(history.messages.slice(1).map((stored) => [stored.id])).toEqual(ids.map((list) => list[0]));
    // The price counts the step written in the same commit as the end, and takes its model.
    const ended = await store.run("run_points");
    expect(ended).toMatchObject({ status: "final", output: "42", steps: 2, model: "model-b" });
    expect(ended?.cost).toBeCloseTo(0.005, 10);
    const steps = await store.steps("run_points");
    expect(steps.map((step) => [step.step, step.toolCalls.length])).toEqual([
      [1, 1],
      [2, 0],
    ]);
    expect(await store.historyVersion(run.sessionId)).toBe(history.version);
  });

  it("keeps a step's calls in the order they ended when they are written in several writes (before a pause, after its resume)", async () => {
    const store = await open();
    await store.record([
      { kind: "start_run", run: runRecord("run_split", "web:split") },
      { kind: "step", step: stepOf("run_split", 1, { content: null }) },
    ]);
    // The call that needed no approval ended before the pause; the approved ones after the resume.
    await store.record([
      { kind: "tool_calls", runId: "run_split", step: 1, records: [toolCall("call_1", "lookup")] },
      { kind: "end_run", outcome: outcomeOf("run_split", { status: "awaiting_approval", output: "Waiting" }) },
    ]);
    await store.record([{ kind: "resume_run", runId: "run_split" }]);
    await store.record([
      {
        kind: "tool_calls",
        runId: "run_split",
        step: 1,
        records: [toolCall("call_2", "post_notice"), toolCall("call_3", "post_notice", "error")],
      },
    ]);
    await store.record([{ kind: "tool_calls", runId: "run_split", step: 1, records: [] }]);
    expect((await store.steps("run_split"))[0]?.toolCalls).toEqual([
      toolCall("call_1", "lookup"),
      toolCall("call_2", "post_notice"),
      toolCall("call_3", "post_notice", "error"),
    ]);
  });

  it("keeps a pipeline's stages as runs of their own, found in order by the first stage's run", async () => {
    const store = await open();
    const stage = (stage: number) => ({ name: "triage", runId: "run_stage1", stage, stages: 2 });
    await store.acceptEvent({
      eventIds: [],
      run: runRecord("run_stage1", "web:pipe", "U1", "/pipeline triage the bug"),
    });
    await store.record([
      { kind: "start_run", run: { ...runRecord("run_stage1", "web:pipe", "U1", "the bug"), pipeline: stage(1) } },
      { kind: "end_run", outcome: outcomeOf("run_stage1") },
    ]);
    await store.record([
      {
        kind: "start_run",
        run: { ...runRecord("run_stage2", "web:pipe", "U1", "the first stage's answer"), pipeline: stage(2) },
      },
    ]);
    expect(
      (await store.stagesOf("run_stage1")).map(({ runId, pipelineStage, pipelineStages, pipelineName, status }) => ({
        runId,
        pipelineStage,
        pipelineStages,
        pipelineName,
        status,
      })),
    ).toEqual([
      { runId: "run_stage1", pipelineStage: 1, pipelineStages: 2, pipelineName: "triage", status: "final" },
      { runId: "run_stage2", pipelineStage: 2, pipelineStages: 2, pipelineName: "triage", status: "running" },
    ]);
    expect(await store.run("run_t_none")).toBeUndefined();
    expect(await store.run("run_stage2")).toMatchObject({ pipelineRunId: "run_stage1", parentRunId: null });
    expect(await store.stagesOf("run_stage2")).toEqual([]);
  });

  it("counts what a place or a person spent since a moment, by their steps, runs under way included", async () => {
    const store = await open();
    const step = (runId: string, n: number, cost: number | null) =>
      ({ kind: "step", step: stepOf(runId, n, { promptTokens: 100, completionTokens: 10, cost }) }) as const;
    await store.record([
      { kind: "start_run", run: runRecord("run_sp1", "slack:T1:C1:1.1", "U1", "a") },
      step("run_sp1", 1, 0.5),
      step("run_sp1", 2, 0.25),
    ]);
    await store.record([
      { kind: "start_run", run: runRecord("run_sp2", "slack:T1:C1:2.2", "U2", "b") },
      step("run_sp2", 1, 1),
    ]);
    // C12 shares C1's first letters, T12 T1's: neither is under C1 or T1.
    await store.record([
      { kind: "start_run", run: runRecord("run_sp3", "slack:T1:C12:3.3", "U1", "c") },
      step("run_sp3", 1, 2),
    ]);
    await store.record([
      { kind: "start_run", run: runRecord("run_sp4", "slack:T12:C1:4.4", "U1", "d") },
      step("run_sp4", 1, null),
    ]);
    const since = new Date(Date.now() - 60_000);
    expect(await store.spentSince({ place: "slack:T1:C1" }, since)).toEqual({ tokens: 330, cost: 1.75 });
    expect(await store.spentSince({ place: "slack:T1" }, since)).toEqual({ tokens: 440, cost: 3.75 });
    // run_sp4's step has no known price: it adds its tokens and nothing to the dollars.
    expect(await store.spentSince({ userId: "U1" }, since)).toEqual({ tokens: 440, cost: 2.75 });
    expect(await store.spentSince({ place: "slack:T1", userId: "U1" }, since)).toEqual({ tokens: 330, cost: 2.75 });
    expect(await store.spentSince({ place: "slack:T1" }, new Date(Date.now() + 60_000))).toEqual({
      tokens: 0,
      cost: 0,
    });
    // A run that made no model call spent nothing: it names no spender.
    await store.record([{ kind: "start_run", run: runRecord("run_sp5", "slack:T1:C9:5.5", "U3", "e") }]);
    // In the order of their bytes, as every key: "2" sorts before ":".
    expect(await store.spendersSince(since)).toEqual([
      { sessionId: "slack:T12:C1:4.4", userId: "U1" },
      { sessionId: "slack:T1:C12:3.3", userId: "U1" },
      { sessionId: "slack:T1:C1:1.1", userId: "U1" },
      { sessionId: "slack:T1:C1:2.2", userId: "U2" },
    ]);
    expect(await store.spendersSince(new Date(Date.now() + 60_000))).toEqual([]);
  });

  it("keeps the channel settings a run used, whether it was accepted first or started at once", async () => {
    const store = await open();
    const configuration = "channels.yaml@0123456789ab";
    await store.acceptEvent({ eventIds: [], run: runRecord("run_conf_accepted", "web:conf", "U1", "hello") });
    await store.record([
      { kind: "start_run", run: { ...runRecord("run_conf_accepted", "web:conf", "U1", "hello"), configuration } },
    ]);
    await store.record([
      { kind: "start_run", run: { ...runRecord("run_conf_new", "web:conf", "U1", "again"), configuration } },
      { kind: "start_run", run: runRecord("run_conf_none", "web:conf", "U1", "without") },
    ]);
    expect((await store.runsOfSession("web:conf")).map((run) => [run.runId, run.configuration])).toEqual([
      ["run_conf_accepted", configuration],
      ["run_conf_new", configuration],
      ["run_conf_none", null],
    ]);
  });

  it("pauses a run and opens its approvals in one transaction; a resume makes it running again, once", async () => {
    const store = await open();
    const paused = pausedWaitingFor({ id: "call_a", hash: "hash-call_a" });
    const { approvals } = await store.record([
      { kind: "start_run", run: runRecord("run_p", "cli:pause") },
      { kind: "end_run", outcome: outcomeOf("run_p", { status: "awaiting_approval", output: "Waiting", paused }) },
      { kind: "open_approvals", requests: [approvalRequest("run_p", "cli:pause", "call_a")], ttlSeconds: 60 },
    ]);
    expect(approvals).toMatchObject([
      {
        runId: "run_p",
        toolCallId: "call_a",
        status: "pending",
        requester: "U1",
        arguments: { text: "lunch is here" },
        messageRef: null,
      },
    ]);
    expect(Date.parse(approvals[0]?.expiresAt ?? "") - Date.now()).toBeGreaterThan(50_000);
    // Opening again is a no-op: a call is asked once.
    expect(
      (await store.openApprovals([approvalRequest("run_p", "cli:pause", "call_a")], 60)).map((approval) => approval.id),
    ).toEqual(approvals.map((approval) => approval.id));
    expect(await store.pausedRun("run_p")).toBe(paused);
    await store.record([{ kind: "resume_run", runId: "run_p" }]);
    expect(await store.pausedRun("run_p")).toBeUndefined();
    expect(await store.run("run_p")).toMatchObject({ status: "running", endedAt: null });
    expect(await store.interruptOrphanedRuns()).toBe(0); // this process is alive
  });

  it("interrupts the runs of a process that is gone (started, or accepted, then it exited), never this process's", async () => {
    const store = await open();
    await store.record([{ kind: "start_run", run: runRecord("run_mine", "cli:orphans") }]);
    expect(await inProcesses(database().options, 1, ["start-runs", "cli:orphans", "run_gone_1", "run_gone_2"])).toEqual(
      ["started"],
    );
    expect(await store.run("run_gone_1")).toMatchObject({ status: "running" });
    expect(await store.interruptOrphanedRuns()).toBe(2);
    expect(
      await Promise.all(["run_gone_1", "run_gone_2", "run_mine"].map(async (id) => (await store.run(id))?.status)),
    ).toEqual(["interrupted", "interrupted", "running"]);
    expect((await store.run("run_gone_1"))?.endedAt).toEqual(expect.any(String));
    expect(await store.interruptOrphanedRuns()).toBe(0);
  });

  it("takes over a running or interrupted run of a process that is gone (once), never an ended or accepted one", async () => {
    const store = await open();
    expect(
      await inProcesses(database().options, 1, ["start-runs", "cli:takeover", "run_gone_a", "run_gone_b"]),
    ).toEqual(["started"]);
    await store.record([
      { kind: "start_run", run: runRecord("run_ended", "cli:takeover") },
      { kind: "end_run", outcome: outcomeOf("run_ended") },
    ]);
    await store.acceptEvent({ eventIds: [], run: runRecord("run_waiting", "cli:takeover") });
    expect(await store.interruptOrphanedRuns()).toBe(2);
    await store.record([{ kind: "start_run", run: runRecord("run_gone_a", "cli:takeover") }]); // a start is no takeover
    expect((await store.run("run_gone_a"))?.status).toBe("interrupted");
    const taken = await store.record(
      ["run_gone_a", "run_ended", "run_waiting", "run_unknown"].map((runId) => ({
        kind: "take_over_run" as const,
        runId,
      })),
    );
    expect(taken.startedRuns).toEqual(["run_gone_a"]);
    expect(await store.run("run_gone_a")).toMatchObject({ status: "running", endedAt: null });
    expect(await Promise.all(["run_ended", "run_waiting"].map(async (id) => (await store.run(id))?.status))).toEqual([
      "final",
      "accepted",
    ]);
    // Taken over, the run is this process's: no longer an orphan.
    expect(await store.interruptOrphanedRuns()).toBe(0);
    // A running run of the gone process (its turn handed to this one by the run queue) is taken over;
    // a run this process already runs is not, from any of its handles.
    expect(await inProcesses(database().options, 1, ["start-runs", "cli:takeover", "run_cut_off"])).toEqual([
      "started",
    ]);
    const other = await open();
    await other.record([{ kind: "start_run", run: runRecord("run_mine", "cli:takeover") }]);
    const outcomes = await Promise.all(
      [store, other].map((handle) =>
        handle.record([
          { kind: "take_over_run", runId: "run_cut_off" },
          { kind: "take_over_run", runId: "run_mine" },
        ]),
      ),
    );
    expect(outcomes.flatMap((outcome) => outcome.startedRuns)).toEqual(["run_cut_off"]);
    expect(await Promise.all(["run_cut_off", "run_mine"].map(async (id) => (await store.run(id))?.status))).toEqual([
      "running",
      "running",
    ]);
  });

  it("migrates once when several processes open a new database at the same moment; reopening keeps the data", async () => {
    expect(await inProcesses(database().options, 4)).toEqual(Array(4).fill("opened"));
    const first = await open();
    await first.appendMessages("cli:kept", null, [userMessage("kept across reopening")]);
    await first.close();
    const second = await open();
    expect((await second.messagesAfter("cli:kept", 0, 0)).map((stored) => stored.message)).toEqual([
      { role: "user", content: "kept across reopening" },
    ]);
  });
}
