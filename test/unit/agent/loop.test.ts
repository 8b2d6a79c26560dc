// The ReAct loop end to end: runAgent / resumeAgent over the real openai SDK talking to the scripted
// model server, with real tools in a real registry. Assertions are on recorded requests, results
// and events — never on timing.
import { afterEach, describe, expect, it, vi } from "vitest";
import { resumeAgent, runAgent, type AgentConfig, type PausedRun } from "../../../src/agent/loop.js";
import type { AgentEvent } from "../../../src/agent/events.js";
import { calculator } from "../../../src/tools/builtin/calculator.js";
import { createToolRegistry } from "../../../src/tools/registry.js";
import type { ApprovalRequest, ToolEnvelope } from "../../../src/tools/types.js";
import {
  call,
  closeServers,
  deferred,
  modelFor,
  recordEvents,
  recordingTool,
  sentMessages,
  startServer,
  textOf,
} from "../../helpers/agent.js";

afterEach(closeServers);

const envelopeOf = (content: string | undefined): ToolEnvelope => JSON.parse(content ?? "null") as ToolEnvelope;
const toolMessages = <M extends { role: string }>(messages: M[]) =>
  messages.filter((message) => message.role === "tool");
const kinds = (events: AgentEvent[]) => events.map((event) => event.type).filter((type) => type !== "model_delta");

describe.each([
  { mode: "streaming", stream: true },
  { mode: "non-streaming", stream: false },
])("runAgent ($mode)", ({ stream }) => {
  it("answers a plain question in one step, summing the server's usage", async () => {
    const answer = "The answer is forty-two, as it always was.";
    const server = await startServer({
      script: [{ content: answer, usage: { promptTokens: 11, completionTokens: 9 } }],
    });
    const { events, onEvent } = recordEvents();
    const result = await runAgent(
      { model: modelFor(server, { stream }), tools: createToolRegistry([calculator]) },
      { input: "What is the answer?", onEvent },
    );

    expect(result).toMatchObject({ output: answer, stopReason: "final", steps: 1, toolCalls: [] });
    expect(result.usage).toEqual({ promptTokens: 11, completionTokens: 9, totalTokens: 20 });
    expect(server.requests).toHaveLength(1);
    expect(server.requests[0]?.stream).toBe(stream);
    expect(sentMessages(server, 0).map((message) => message.role)).toEqual(["system", "user"]);
    expect(textOf(sentMessages(server, 0)[1])).toBe("What is the answer?");

    const deltas = events.flatMap((event) => (event.type === "model_delta" ? [event.text] : []));
    if (stream) {
      expect(deltas.length).toBeGreaterThan(1);
      expect(deltas.join("")).toBe(answer);
    } else {
      expect(deltas.length).toBeLessThanOrEqual(1);
    }
    expect(kinds(events)).toEqual(["run_start", "message", "model_start", "model_end", "message", "run_end"]);
  });

  it("runs a tool, shows the model its envelope under the matching tool_call_id, then answers", async () => {
    const server = await startServer({
      script: [
        {
          toolCalls: [call("calculator", { expression: "2+2" }, "call_add")],
          usage: { promptTokens: 30, completionTokens: 8 },
        },
        { content: "2 + 2 is 4.", usage: { promptTokens: 50, completionTokens: 6 } },
      ],
    });
    const { events, onEvent } = recordEvents();
    const result = await runAgent(
      { model: modelFor(server, { stream }), tools: createToolRegistry([calculator]) },
      { input: "2+2?", onEvent },
    );

    expect(result).toMatchObject({ output: "2 + 2 is 4.", stopReason: "final", steps: 2 });
    expect(result.usage).toEqual({ promptTokens: 80, completionTokens: 14, totalTokens: 94 });
    expect(result.toolCalls).toEqual([{ name: "calculator", arguments: { expression: "2+2" }, status: "success" }]);
    expect(server.requests[0]?.body.tools).toEqual([
      expect.objectContaining({ type: "function", function: expect.objectContaining({ name: "calculator" }) }),
    ]);

    const second = sentMessages(server, 1);
    expect(second.map((message) => message.role)).toEqual(["system", "user", "assistant", "tool"]);
    expect(second[2]?.tool_calls).toEqual([
      { id: "call_add", type: "function", function: { name: "calculator", arguments: '{"expression":"2+2"}' } },
    ]);
    expect(second[3]?.tool_call_id).toBe("call_add");
    expect(envelopeOf(textOf(second[3]))).toEqual({ status: "success", data: { expression: "2+2", result: 4 } });

    expect(kinds(events)).toEqual([
      "run_start",
      "message", // user
      "model_start",
      "model_end",
      "message", // assistant with tool_calls
      "tool_start",
      "tool_end",
      "message", // tool
      "model_start",
      "model_end",
      "message", // assistant answer
      "run_end",
    ]);
    const end = events.at(-1);
    expect(end?.type === "run_end" && end.result).toEqual(result);
    const added = events.flatMap((event) => (event.type === "message" ? [event.message.role] : []));
    expect(added).toEqual(["user", "assistant", "tool", "assistant"]);
  });

  it("answers parallel tool calls with one tool message per call, in the order of tool_calls, when the first is the slowest", async () => {
    const fastFinished = deferred();
    const slow = recordingTool("slow_lookup", async () => {
      await fastFinished.promise; // finishes only after the second call has finished
      return "slow result";
    });
    const fast = recordingTool("fast_lookup", () => {
      fastFinished.resolve();
      return "fast result";
    });
    const server = await startServer({
      script: [
        {
          toolCalls: [
            call("slow_lookup", { q: 1 }, "call_slow"),
            call("fast_lookup", { q: 2 }, "call_fast"),
            call("fast_lookup", { q: 3 }, "call_fast_2"),
          ],
        },
        { content: "Both done." },
      ],
    });
    const { events, onEvent } = recordEvents();
    const result = await runAgent(
      { model: modelFor(server, { stream }), tools: createToolRegistry([slow.tool, fast.tool]), toolTimeoutMs: 5_000 },
      { input: "look both up", onEvent },
    );

    expect(result.stopReason).toBe("final");
    const finishedOrder = events.flatMap((event) => (event.type === "tool_end" ? [event.record.id] : []));
    expect(finishedOrder.at(-1)).toBe("call_slow"); // the first call really finished last
    const second = sentMessages(server, 1);
    expect(second.map((message) => message.role)).toEqual(["system", "user", "assistant", "tool", "tool", "tool"]);
    expect((second[2]?.tool_calls as Array<{ id: string }>).map((toolCall) => toolCall.id)).toEqual([
      "call_slow",
      "call_fast",
      "call_fast_2",
    ]);
    expect(toolMessages(second).map((message) => message.tool_call_id)).toEqual([
      "call_slow",
      "call_fast",
      "call_fast_2",
    ]);
    expect(toolMessages(second).map((message) => envelopeOf(textOf(message)))).toEqual([
      { status: "success", data: "slow result" },
      { status: "success", data: "fast result" },
      { status: "success", data: "fast result" },
    ]);
    expect(result.toolCalls.map((summary) => summary.name)).toEqual(["slow_lookup", "fast_lookup", "fast_lookup"]);
  });

  it("is cancelled while the model request hangs", async () => {
    const server = await startServer({ script: [{ hang: true }] });
    const controller = new AbortController();
    const running = runAgent(
      { model: modelFor(server, { stream }), tools: createToolRegistry([calculator]) },
      { input: "hi", signal: controller.signal },
    );
    await expect.poll(() => server.requests.length).toBe(1);
    controller.abort();
    const result = await running;
    expect(result.stopReason).toBe("cancelled");
    expect(result.error).toBeUndefined();
    expect(server.requests).toHaveLength(1); // an abort is not retried
  });

  it("a run past its time limit (runTimeoutMs) stops its hanging model call and ends with a sentence saying so", async () => {
    const server = await startServer({ script: [{ hang: true }] });
    const result = await runAgent(
      { model: modelFor(server, { stream }), tools: createToolRegistry([calculator]), runTimeoutMs: 300 },
      { input: "hi" },
    );
    expect(result).toMatchObject({ stopReason: "error", error: { code: "run_timeout" } });
    expect(result.output).toBe(
      "I stopped: this request ran past its time limit of 300 ms (GLASSBOX_RUN_TIMEOUT_MS). Ask again with a narrower question, or ask an admin to raise the limit.",
    );
    expect(server.requests).toHaveLength(1);
  });

  it("a run past its time limit stops a hanging tool the same way, and asks the model nothing more", async () => {
    const hanging = recordingTool("wait_forever", () => new Promise(() => {}));
    const server = await startServer({
      script: [{ toolCalls: [call("wait_forever", {})] }, { content: "never asked" }],
    });
    const result = await runAgent(
      {
        model: modelFor(server, { stream }),
        tools: createToolRegistry([hanging.tool]),
        toolTimeoutMs: 20_000,
        runTimeoutMs: 1_000,
      },
      { input: "wait" },
    );
    expect(result).toMatchObject({ stopReason: "error", error: { code: "run_timeout" } });
    expect(result.output).toContain("time limit of 1 s");
    expect(hanging.calls[0]?.context.signal.aborted).toBe(true);
    expect(server.requests).toHaveLength(1);
  });

  it("is cancelled while a tool hangs, and the tool's signal is aborted", async () => {
    const started = deferred();
    const hanging = recordingTool("wait_forever", (_args, _context) => {
      started.resolve();
      return new Promise(() => {}); // ignores its signal on purpose: the loop must not wait for it
    });
    const server = await startServer({
      script: [{ toolCalls: [call("wait_forever", {})] }, { content: "never asked" }],
    });
    const controller = new AbortController();
    const running = runAgent(
      { model: modelFor(server, { stream }), tools: createToolRegistry([hanging.tool]), toolTimeoutMs: 20_000 },
      { input: "wait", signal: controller.signal },
    );
    await started.promise;
    controller.abort();
    const result = await running;
    expect(result.stopReason).toBe("cancelled");
    expect(hanging.calls).toHaveLength(1);
    expect(hanging.calls[0]?.context.signal.aborted).toBe(true);
    expect(server.requests).toHaveLength(1);
  });
});

describe("runAgent: context", () => {
  it("sends the system prompt, then the earlier turns, then the new input", async () => {
    const server = await startServer({ script: [{ content: "You asked about refunds." }] });
    const history = [
      { role: "user" as const, content: "Can you refund A-1?" },
      { role: "assistant" as const, content: "Refund requested." },
    ];
    await runAgent(
      { model: modelFor(server), tools: createToolRegistry([calculator]), systemPrompt: "Be brief." },
      { input: "What did I ask?", history },
    );
    expect(sentMessages(server, 0)).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: "Can you refund A-1?" },
      { role: "assistant", content: "Refund requested." },
      { role: "user", content: "What did I ask?" },
    ]);
  });
});

describe("runAgent: tool calls the model gets wrong", () => {
  it("repairs broken arguments in a streamed tool call before the tool runs", async () => {
    const lookup = recordingTool("lookup_order", (args) => ({ order: args.order_id, status: "shipped" }), {
      parameters: {
        type: "object",
        properties: { order_id: { type: "string" }, include_items: { type: "boolean" } },
        required: ["order_id"],
        additionalProperties: false,
      },
    });
    // Single quotes, a trailing comma and no closing brace: three repairs for jsonrepair.
    const server = await startServer({
      script: [
        { toolCalls: [call("lookup_order", "{'order_id': 'A-17', 'include_items': true,")] },
        { content: "Shipped." },
      ],
    });
    const result = await runAgent(
      { model: modelFor(server), tools: createToolRegistry([lookup.tool]) },
      { input: "where is A-17?" },
    );

    expect(server.requests[0]?.stream).toBe(true);
    expect(lookup.calls.map((recorded) => recorded.args)).toEqual([{ order_id: "A-17", include_items: true }]);
    expect(result.toolCalls).toEqual([
      { name: "lookup_order", arguments: { order_id: "A-17", include_items: true }, status: "success" },
    ]);
    const toolMessage = sentMessages(server, 1).at(-1);
    expect(envelopeOf(textOf(toolMessage))).toEqual({ status: "success", data: { order: "A-17", status: "shipped" } });
    expect(result.output).toBe("Shipped.");
  });

  it("tells the model about an unknown tool and carries on to an answer", async () => {
    const server = await startServer({
      script: [
        { toolCalls: [call("calculater", { expression: "1+1" }, "call_typo")] },
        { content: "Sorry, 1 + 1 is 2." },
      ],
    });
    const result = await runAgent(
      { model: modelFor(server), tools: createToolRegistry([calculator]) },
      { input: "1+1" },
    );

    const toolMessage = sentMessages(server, 1).at(-1);
    expect(toolMessage?.tool_call_id).toBe("call_typo");
    const envelope = envelopeOf(textOf(toolMessage));
    expect(envelope.status === "error" && envelope.error.type).toBe("tool_not_found");
    expect(textOf(toolMessage)).toContain("calculator");
    expect(result).toMatchObject({ stopReason: "final", output: "Sorry, 1 + 1 is 2.", steps: 2 });
    expect(result.toolCalls[0]).toMatchObject({
      name: "calculater",
      status: "error",
      error: { type: "tool_not_found" },
    });
  });
});

describe("runAgent: guards", () => {
  it("refuses an identical call the third time with repeated_call and a note to change strategy", async () => {
    const counter = recordingTool("count_rows", () => ({ rows: 12 }));
    const server = await startServer({
      script: (_request, index) =>
        index < 3
          ? { toolCalls: [call("count_rows", { table: "orders" }, `call_${index}`)] }
          : { content: "There are 12 rows." },
    });
    const { events, onEvent } = recordEvents();
    const result = await runAgent(
      { model: modelFor(server), tools: createToolRegistry([counter.tool]) },
      { input: "count", onEvent },
    );

    expect(counter.calls).toHaveLength(2); // the third identical call never reached the handler
    expect(result).toMatchObject({ stopReason: "final", output: "There are 12 rows.", steps: 4 });
    expect(result.toolCalls.map((summary) => summary.error?.type ?? summary.status)).toEqual([
      "success",
      "success",
      "repeated_call",
    ]);

    const fourth = sentMessages(server, 3);
    const lastTool = toolMessages(fourth).at(-1);
    expect(lastTool?.tool_call_id).toBe("call_2");
    const envelope = envelopeOf(textOf(lastTool));
    expect(envelope.status === "error" && envelope.error.type).toBe("repeated_call");
    const lastMessage = fourth.at(-1);
    expect(lastMessage?.role).toBe("system");
    expect(textOf(lastMessage)).toMatch(/change strategy/i);
    // The note is also an event, for traces and adapters.
    expect(events.some((event) => event.type === "note" && /change strategy/i.test(event.text))).toBe(true);
  });

  it("notes that a tool returning the same result twice in a row brings no new information", async () => {
    const status = recordingTool("ticket_status", () => ({ status: "pending" }));
    const server = await startServer({
      script: [
        { toolCalls: [call("ticket_status", { ticket: "T-1" })] },
        { toolCalls: [call("ticket_status", { ticket: "T-2" })] },
        { content: "Both are pending." },
      ],
    });
    const result = await runAgent(
      { model: modelFor(server), tools: createToolRegistry([status.tool]) },
      { input: "status?" },
    );

    expect(result.stopReason).toBe("final");
    const noteIn = (index: number) =>
      sentMessages(server, index).filter(
        (message) => message.role === "system" && /no new information/i.test(textOf(message)),
      );
    expect(noteIn(1)).toHaveLength(0);
    expect(noteIn(2)).toHaveLength(1);
    expect(sentMessages(server, 2).at(-1)?.role).toBe("system"); // the note follows the tool message
  });

  it("ends at maxSteps with one last request without tool use, and the model's stage conclusion as output", async () => {
    const calls = recordingTool("search", (args) => ({ hits: [`result for ${String(args.query)}`] }));
    // A model that calls a tool whenever it may.
    const server = await startServer({
      script: (request, index) =>
        request.tool_choice === "none"
          ? { content: "Stage conclusion: searched three times; nothing conclusive yet." }
          : { toolCalls: [call("search", { query: `q${index}` })] },
    });
    const { events, onEvent } = recordEvents();
    const result = await runAgent(
      { model: modelFor(server), tools: createToolRegistry([calls.tool]), maxSteps: 3 },
      { input: "research", onEvent },
    );

    expect(calls.calls).toHaveLength(3);
    expect(server.requests).toHaveLength(4);
    expect(server.requests.slice(0, 3).map((request) => request.body.tool_choice)).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
    expect(server.requests[3]?.body.tool_choice).toBe("none");
    const last = sentMessages(server, 3).at(-1);
    expect(last?.role).toBe("system");
    expect(textOf(last)).toMatch(/all 3 steps/);
    expect(result).toMatchObject({
      stopReason: "max_steps",
      output: "Stage conclusion: searched three times; nothing conclusive yet.",
    });
    expect(result.steps).toBe(4); // model calls made, the conclusion included
    expect(events.at(-1)?.type).toBe("run_end");
  });

  it("still ends with max_steps when the model ignores tool_choice none", async () => {
    const calls = recordingTool("search");
    const server = await startServer({
      script: (_request, index) => ({ toolCalls: [call("search", { query: `q${index}` })] }),
    });
    const result = await runAgent(
      { model: modelFor(server), tools: createToolRegistry([calls.tool]), maxSteps: 2 },
      { input: "research" },
    );
    expect(result.stopReason).toBe("max_steps");
    expect(result.output).toMatch(/stopped after 2 steps/);
    expect(calls.calls).toHaveLength(2); // the tool calls of the conclusion were not run
  });
});

describe("runAgent / resumeAgent: approvals", () => {
  const refundSchema = {
    type: "object",
    properties: { order_id: { type: "string" }, amount: { type: "number" } },
    required: ["order_id", "amount"],
  };

  it("denies a dangerous call when no approver is configured, without running it", async () => {
    const refund = recordingTool("refund_order", () => "refunded", { dangerous: true, parameters: refundSchema });
    const server = await startServer({
      script: [
        { toolCalls: [call("refund_order", { order_id: "A-1", amount: 5 })] },
        { content: "I could not refund it." },
      ],
    });
    const result = await runAgent(
      { model: modelFor(server), tools: createToolRegistry([refund.tool]) },
      { input: "refund A-1" },
    );

    expect(refund.calls).toHaveLength(0);
    const envelope = envelopeOf(textOf(sentMessages(server, 1).at(-1)));
    expect(envelope.status === "error" && envelope.error.type).toBe("denied");
    expect(result).toMatchObject({ stopReason: "final", output: "I could not refund it." });
  });

  it("runs a dangerous call at once when the gate approves it, after an approval_requested event", async () => {
    const refund = recordingTool("refund_order", () => "refunded", { dangerous: true, parameters: refundSchema });
    const server = await startServer({
      script: [
        { toolCalls: [call("refund_order", { order_id: "A-1", amount: 5 }, "call_refund")] },
        { content: "Refunded." },
      ],
    });
    const { events, onEvent } = recordEvents();
    const result = await runAgent(
      {
        model: modelFor(server),
        tools: createToolRegistry([refund.tool]),
        approve: async (request) => ({ approved: true, by: "policy", argumentsHash: request.argumentsHash }),
      },
      { input: "refund A-1", onEvent },
    );

    expect(result).toMatchObject({ stopReason: "final", output: "Refunded." });
    expect(refund.calls).toHaveLength(1);
    expect(kinds(events).filter((type) => type.startsWith("tool_") || type === "approval_requested")).toEqual([
      "approval_requested",
      "tool_start",
      "tool_end",
    ]);
  });

  async function pausedRun() {
    const refund = recordingTool("refund_order", (args) => ({ refunded: args.amount }), {
      dangerous: true,
      parameters: refundSchema,
    });
    const lookup = recordingTool("lookup_order", (args) => ({ order: args.order_id, total: 40 }));
    const server = await startServer({
      script: [
        // The dangerous call comes first, so the results must be put back in the model's order.
        {
          toolCalls: [
            call("refund_order", { order_id: "A-1", amount: 40 }, "call_refund"),
            call("lookup_order", { order_id: "A-1" }, "call_lookup"),
          ],
        },
        { content: "Refunded 40 for order A-1." },
      ],
    });
    const asked: ApprovalRequest[] = [];
    const config: AgentConfig = {
      model: modelFor(server),
      tools: createToolRegistry([refund.tool, lookup.tool]),
      approve: async (request) => {
        asked.push(request);
        return "pending";
      },
    };
    const { events, onEvent } = recordEvents();
    const result = await runAgent(config, { input: "refund order A-1", sessionId: "s1", userId: "U1", onEvent });
    return { config, server, result, refund, lookup, asked, events };
  }

  it("pauses on a pending approval with plain data, having run only the safe call", async () => {
    const { result, refund, lookup, asked, events, server } = await pausedRun();

    expect(result.stopReason).toBe("awaiting_approval");
    expect(result.output).toContain("refund_order");
    expect(lookup.calls).toHaveLength(1);
    expect(refund.calls).toHaveLength(0);
    expect(asked).toEqual([
      expect.objectContaining({
        toolCallId: "call_refund",
        toolName: "refund_order",
        arguments: { order_id: "A-1", amount: 40 },
        sessionId: "s1",
        userId: "U1",
      }),
    ]);
    expect(
      events.some((event) => event.type === "approval_requested" && event.request.toolCallId === "call_refund"),
    ).toBe(true);
    expect(server.requests).toHaveLength(1);

    const paused = result.paused;
    expect(paused).toBeDefined();
    expect(JSON.parse(JSON.stringify(paused))).toEqual(paused); // survives storage as JSON
    expect(paused?.pending.map((pending) => pending.call.id)).toEqual(["call_refund"]);
    expect(paused?.finished.map((record) => record.id)).toEqual(["call_lookup"]);
  });

  it("the wait for a person does not count toward the run's time limit: a resume has its own", async () => {
    const { config, result } = await pausedRun();
    const stored = JSON.parse(JSON.stringify(result.paused)) as PausedRun;
    const argumentsHash = stored.pending[0]?.approval?.argumentsHash ?? "";
    await new Promise((resolve) => setTimeout(resolve, 400)); // longer than the limit below
    const resumed = await resumeAgent({ ...config, runTimeoutMs: 300 }, stored, {
      call_refund: { approved: true, by: "U1", argumentsHash },
    });
    expect(resumed).toMatchObject({ stopReason: "final", output: "Refunded 40 for order A-1." });
  });

  it("resumes from stored JSON with an approval: runs the dangerous call and answers, one tool message per call in order", async () => {
    const { config, server, result, refund, lookup } = await pausedRun();
    const stored = JSON.parse(JSON.stringify(result.paused)) as PausedRun;
    const argumentsHash = stored.pending[0]?.approval?.argumentsHash ?? "";
    const { events, onEvent } = recordEvents();
    const resumed = await resumeAgent(
      config,
      stored,
      { call_refund: { approved: true, by: "U1", argumentsHash } },
      { onEvent },
    );

    expect(resumed).toMatchObject({
      stopReason: "final",
      output: "Refunded 40 for order A-1.",
      runId: result.runId,
      sessionId: "s1",
    });
    expect(refund.calls.map((recorded) => recorded.args)).toEqual([{ order_id: "A-1", amount: 40 }]);
    expect(lookup.calls).toHaveLength(1); // the safe call was not run again
    expect(server.requests).toHaveLength(2);

    const second = sentMessages(server, 1);
    expect(second.map((message) => message.role)).toEqual(["system", "user", "assistant", "tool", "tool"]);
    expect(toolMessages(second).map((message) => message.tool_call_id)).toEqual(["call_refund", "call_lookup"]);
    expect(toolMessages(second).map((message) => envelopeOf(textOf(message)))).toEqual([
      { status: "success", data: { refunded: 40 } },
      { status: "success", data: { order: "A-1", total: 40 } },
    ]);
    expect(resumed.toolCalls.map((summary) => summary.name)).toEqual(["refund_order", "lookup_order"]);
    expect(kinds(events).slice(0, 3)).toEqual(["run_resumed", "tool_start", "tool_end"]);
    expect(events.at(-1)?.type).toBe("run_end");
  });

  it("waits for each dangerous call's own decision, pausing again until all are decided", async () => {
    const refund = recordingTool("refund_order", (args) => ({ refunded: args.order_id }), {
      dangerous: true,
      parameters: refundSchema,
    });
    const server = await startServer({
      script: [
        {
          toolCalls: [
            call("refund_order", { order_id: "A-1", amount: 1 }, "call_1"),
            call("refund_order", { order_id: "A-2", amount: 2 }, "call_2"),
          ],
        },
        { content: "A-1 refunded, A-2 refused." },
      ],
    });
    const asked: ApprovalRequest[] = [];
    const config: AgentConfig = {
      model: modelFor(server),
      tools: createToolRegistry([refund.tool]),
      approve: async (request) => {
        asked.push(request);
        return "pending";
      },
    };
    const first = await runAgent(config, { input: "refund both" });
    expect(asked.map((request) => request.toolCallId)).toEqual(["call_1", "call_2"]);
    const hashOf = (id: string) => asked.find((request) => request.toolCallId === id)?.argumentsHash ?? "";

    const roundTrip = (paused: PausedRun | undefined) => JSON.parse(JSON.stringify(paused)) as PausedRun;
    const second = await resumeAgent(config, roundTrip(first.paused), {
      call_1: { approved: true, by: "U1", argumentsHash: hashOf("call_1") },
    });
    expect(second.stopReason).toBe("awaiting_approval");
    expect(second.paused?.pending.map((pending) => pending.call.id)).toEqual(["call_2"]);
    expect(refund.calls.map((recorded) => recorded.args.order_id)).toEqual(["A-1"]);
    expect(server.requests).toHaveLength(1);

    const third = await resumeAgent(config, roundTrip(second.paused), {
      call_2: { approved: false, by: "U1", argumentsHash: hashOf("call_2") },
    });
    expect(third).toMatchObject({ stopReason: "final", output: "A-1 refunded, A-2 refused." });
    expect(refund.calls).toHaveLength(1);
    const tools = toolMessages(sentMessages(server, 1));
    expect(tools.map((message) => message.tool_call_id)).toEqual(["call_1", "call_2"]);
    expect(tools.map((message) => envelopeOf(textOf(message)).status)).toEqual(["success", "error"]);
    expect(third.toolCalls.map((summary) => summary.status)).toEqual(["success", "error"]);
  });

  it("resumes with a denial: the dangerous call does not run and the model gets denied", async () => {
    const { config, server, result, refund } = await pausedRun();
    server.setScript([{ content: "The refund was not approved." }]);
    const stored = JSON.parse(JSON.stringify(result.paused)) as PausedRun;
    const argumentsHash = stored.pending[0]?.approval?.argumentsHash ?? "";
    const resumed = await resumeAgent(config, stored, {
      call_refund: { approved: false, by: "U2", reason: "too large", argumentsHash },
    });

    expect(refund.calls).toHaveLength(0);
    expect(resumed).toMatchObject({ stopReason: "final", output: "The refund was not approved." });
    const tools = toolMessages(sentMessages(server, 1));
    expect(tools.map((message) => message.tool_call_id)).toEqual(["call_refund", "call_lookup"]);
    const envelope = envelopeOf(textOf(tools[0]));
    expect(envelope.status === "error" && envelope.error.type).toBe("denied");
    expect(textOf(tools[0])).toContain("too large");
  });
});

describe("runAgent: cancellation at the edges of a model call", () => {
  it("is cancelled, not final, when the signal is aborted while the answer is streaming", async () => {
    const server = await startServer({
      script: [{ content: "A long answer that is still streaming when the person presses stop." }],
    });
    const controller = new AbortController();
    const result = await runAgent(
      { model: modelFor(server), tools: createToolRegistry([calculator]) },
      {
        input: "talk",
        signal: controller.signal,
        onEvent: (event) => event.type === "model_delta" && controller.abort(),
      },
    );
    expect(result.stopReason).toBe("cancelled");
  });

  it("does not start the tools of a response that arrived after the run was cancelled", async () => {
    const refund = recordingTool("refund_order", () => "refunded");
    const server = await startServer({ script: [{ toolCalls: [call("refund_order", {})] }, { content: "done" }] });
    const controller = new AbortController();
    const result = await runAgent(
      { model: modelFor(server, { stream: false }), tools: createToolRegistry([refund.tool]) },
      {
        input: "refund",
        signal: controller.signal,
        onEvent: (event) => event.type === "model_end" && controller.abort(),
      },
    );
    expect(result.stopReason).toBe("cancelled");
    expect(refund.calls).toHaveLength(0);
  });
});

describe("runAgent: listeners", () => {
  it("keeps running when an event listener throws", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    try {
      const server = await startServer({
        script: [{ toolCalls: [call("calculator", { expression: "6*7" })] }, { content: "42" }],
      });
      const result = await runAgent(
        { model: modelFor(server), tools: createToolRegistry([calculator]) },
        {
          input: "6*7",
          onEvent: () => {
            throw new Error("listener bug");
          },
        },
      );
      expect(result).toMatchObject({ stopReason: "final", output: "42", steps: 2 });
      expect(warn).toHaveBeenCalled();
    } finally {
      warn.mockRestore();
    }
  });
});
