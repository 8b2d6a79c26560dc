/**
 * The tool engine, driven directly: real registries, real handlers, real timers. No timing
 * assertions (CI is noisy): overlap is proven by counting handlers that run at once, order by events.
 */
import { describe, expect, it } from "vitest";
import {
  argumentsHash,
  executeToolCalls,
  MAX_CALLS_PER_REPLY,
  MAX_DANGEROUS_PER_REPLY,
  newToolRunState,
  resumeToolCalls,
  type ExecutorOptions,
  type PendingToolCall,
  type RunScope,
  type ToolRunState,
} from "../../../src/tools/executor.js";
import { createToolRegistry } from "../../../src/tools/registry.js";
import {
  ToolPause,
  type AnyTool,
  type ApprovalDecision,
  type ApprovalGate,
  type ApprovalRequest,
  type ToolCall,
  type ToolCallRecord,
  type ToolContext,
  type ToolEvent,
} from "../../../src/tools/types.js";

// ---- helpers ---------------------------------------------------------------------------------

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const never = () => new Promise<never>(() => undefined);

function call(id: string, name: string, args: string | Record<string, unknown> = {}): ToolCall {
  return {
    id,
    type: "function",
    function: { name, arguments: typeof args === "string" ? args : JSON.stringify(args) },
  };
}

function tool(name: string, handler: AnyTool["handler"], extra: Partial<AnyTool> = {}): AnyTool {
  return {
    name,
    description: `The ${name} tool.`,
    parameters: {
      type: "object",
      properties: { id: { type: "string" }, n: { type: "integer" }, ms: { type: "integer" } },
    },
    handler,
    ...extra,
  };
}

type TestScope = RunScope & { events: ToolEvent[] };

function scope(extra: Partial<RunScope> = {}): TestScope {
  const events: ToolEvent[] = [];
  return {
    runId: "run_1",
    sessionId: "session_1",
    userId: "user_1",
    state: newToolRunState(),
    emit: (event) => events.push(event),
    events,
    ...extra,
  };
}

function errorOf(record: ToolCallRecord | undefined): { type: string; message: string } {
  if (record?.envelope.status !== "error") throw new Error(`expected an error, got ${record?.content}`);
  return record.envelope.error;
}

/** "start:<id>" and "end:<id>" for tool events, in the order they were emitted. */
function timeline(events: ToolEvent[]): string[] {
  return events.flatMap((event) => {
    if (event.type === "tool_start") return [`start:${event.toolCallId}`];
    if (event.type === "tool_end") return [`end:${event.record.id}`];
    return [`approval:${event.request.toolCallId}`];
  });
}

/** Counts handlers running at once. */
function concurrencyMeter() {
  let active = 0;
  const meter = {
    max: 0,
    calls: 0,
    async run<T>(work: () => Promise<T>): Promise<T> {
      meter.calls++;
      active++;
      meter.max = Math.max(meter.max, active);
      try {
        return await work();
      } finally {
        active--;
      }
    },
  };
  return meter;
}

function approveAll(by = "alice"): ApprovalGate & { requests: ApprovalRequest[] } {
  const requests: ApprovalRequest[] = [];
  const gate = async (request: ApprovalRequest) => {
    requests.push(request);
    return { approved: true, by, argumentsHash: request.argumentsHash };
  };
  return Object.assign(gate, { requests });
}

// ---- results and envelopes ---------------------------------------------------------------------

describe("a successful call", () => {
  it("passes arguments and context to the handler and returns one complete record", async () => {
    let seen: { args: unknown; context: ToolContext } | undefined;
    const registry = createToolRegistry([
      tool("get_order_status", (args, context) => {
        seen = { args, context };
        return { status: "shipped" };
      }),
    ]);
    const run = scope();
    const outcome = await executeToolCalls([call("call_1", "get_order_status", { id: "A1" })], { registry }, run);

    expect(outcome.pending).toEqual([]);
    const [record] = outcome.records;
    expect(record).toMatchObject({
      id: "call_1",
      name: "get_order_status",
      rawArguments: '{"id":"A1"}',
      arguments: { id: "A1" },
      repairs: [],
      envelope: { status: "success", data: { status: "shipped" } },
      content: '{"status":"success","data":{"status":"shipped"}}',
      truncatedChars: 0,
      dangerous: false,
    });
    expect(record?.durationMs).toBeGreaterThanOrEqual(0);
    expect(seen?.args).toEqual({ id: "A1" });
    expect(seen?.context).toMatchObject({
      sessionId: "session_1",
      userId: "user_1",
      runId: "run_1",
      toolCallId: "call_1",
    });
    expect(seen?.context.signal.aborted).toBe(false);
    expect(timeline(run.events)).toEqual(["start:call_1", "end:call_1"]);
  });

  it("gives the handler its own copy of the arguments", async () => {
    const registry = createToolRegistry([
      tool("mutate", (args: Record<string, unknown>) => {
        args.id = "changed";
        return "ok";
      }),
    ]);
    const [record] = (await executeToolCalls([call("c1", "mutate", { id: "A1" })], { registry }, scope())).records;
    expect(record?.arguments).toEqual({ id: "A1" });
  });

  it("turns undefined into data null", async () => {
    const registry = createToolRegistry([tool("nothing", () => undefined)]);
    const [record] = (await executeToolCalls([call("c1", "nothing")], { registry }, scope())).records;
    expect(record?.envelope).toEqual({ status: "success", data: null });
    expect(record?.content).toBe('{"status":"success","data":null}');
  });
});

describe("unknown tools", () => {
  const registry = createToolRegistry([
    tool("get_order_status", () => 1),
    tool("cancel_order", () => 1),
    tool("search_products", () => 1),
  ]);

  it.each(["getOrderStatus", "get_order_stat", "order_status"])(
    "answers %s with tool_not_found, the closest name and the available tools",
    async (name) => {
      const [record] = (await executeToolCalls([call("c1", name, { id: "A1" })], { registry }, scope())).records;
      const error = errorOf(record);
      expect(error.type).toBe("tool_not_found");
      expect(error.message).toMatch(/did you mean 'get_order_status'\?/i);
      expect(error.message).toContain(`There is no tool named '${name}'`);
      expect(error.message).toContain("Available tools: get_order_status, cancel_order, search_products.");
      expect(record?.name).toBe(name);
      expect(record?.rawArguments).toBe('{"id":"A1"}');
    },
  );

  it("suggests nothing for an unrelated name but still lists the tools", async () => {
    const [record] = (await executeToolCalls([call("c1", "weather_forecast")], { registry }, scope())).records;
    expect(errorOf(record).message).not.toMatch(/did you mean/i);
    expect(errorOf(record).message).toContain("Available tools: get_order_status, cancel_order, search_products.");
  });
});

describe("handlers that throw", () => {
  it.each([
    [
      "a TypeError",
      () => {
        throw new TypeError("order_id must not be empty");
      },
      "TypeError: order_id must not be empty",
    ],
    [
      "a plain Error",
      () => {
        throw new Error("the shop is closed");
      },
      "the shop is closed",
    ],
    [
      "an async rejection",
      async () => {
        await sleep(1);
        throw new RangeError("too many items");
      },
      "RangeError: too many items",
    ],
    [
      "a string",
      () => {
        throw "out of stock";
      },
      "out of stock",
    ],
  ])("turn %s into execution_error with type and message, no stack", async (_label, handler, message) => {
    const registry = createToolRegistry([tool("explode", handler)]);
    const [record] = (await executeToolCalls([call("c1", "explode")], { registry }, scope())).records;
    expect(errorOf(record)).toEqual({ type: "execution_error", message });
    expect(record?.content).not.toContain("    at ");
    expect(JSON.parse(record?.content ?? "")).toEqual(record?.envelope);
  });
});

describe("results that are not JSON", () => {
  const circular: Record<string, unknown> = { name: "loop" };
  circular.self = circular;

  it.each([
    ["a BigInt", () => ({ total: 10n })],
    ["a circular object", () => circular],
  ])("turn %s into execution_error, in the envelope and in the content", async (_label, handler) => {
    const registry = createToolRegistry([tool("weird", handler)]);
    const outcome = await executeToolCalls(
      [call("c1", "weird"), call("c2", "weird", { id: "again" })],
      { registry },
      scope(),
    );
    expect(outcome.records).toHaveLength(2);
    const [record] = outcome.records;
    expect(errorOf(record).type).toBe("execution_error");
    expect(errorOf(record).message).toContain("not JSON");
    expect(JSON.parse(record?.content ?? "")).toEqual(record?.envelope);
    // The record itself is plain data: it can be stored and traced.
    expect(() => JSON.stringify(record)).not.toThrow();
  });
});

describe("results over the limit", () => {
  it("cuts a 20,000-character result to maxResultChars with a marker saying how much was cut", async () => {
    const text = "x".repeat(20_000);
    const registry = createToolRegistry([tool("dump", () => text)]);
    const [record] = (await executeToolCalls([call("c1", "dump")], { registry }, scope())).records;

    expect(record?.content.length).toBeLessThanOrEqual(4_000);
    expect(record?.content.length).toBeGreaterThan(3_800);
    const shown = JSON.parse(record?.content ?? "") as { status: string; data: string };
    expect(shown.status).toBe("success");
    const marker = / …\[cut (\d+) of 20000 characters\]$/.exec(shown.data);
    expect(marker).not.toBeNull();
    expect(Number(marker?.[1])).toBe(record?.truncatedChars);
    const kept = shown.data.slice(0, shown.data.length - (marker?.[0].length ?? 0));
    expect(kept).toBe(text.slice(0, kept.length));
    expect(kept.length + (record?.truncatedChars ?? 0)).toBe(20_000);
    // The full result stays on the record for the trace.
    expect(record?.envelope).toEqual({ status: "success", data: text });
  });

  it("respects maxResultChars for structured data full of characters that need escaping", async () => {
    const rows = Array.from({ length: 500 }, (_, index) => ({ name: `item "${index}"\n`, path: "C:\\shop\\items" }));
    const registry = createToolRegistry([tool("rows", () => rows)]);
    const [record] = (await executeToolCalls([call("c1", "rows")], { registry, maxResultChars: 500 }, scope())).records;

    expect(record?.content.length).toBeLessThanOrEqual(500);
    const shown = JSON.parse(record?.content ?? "") as { status: string; data: string };
    expect(shown.status).toBe("success");
    const full = JSON.stringify(rows);
    expect(shown.data).toContain(`of ${full.length} characters]`);
    expect(shown.data.startsWith(full.slice(0, 100))).toBe(true);
    expect(record?.truncatedChars).toBe(full.length - shown.data.indexOf(" …[cut"));
  });

  it("leaves a result within the limit alone", async () => {
    const registry = createToolRegistry([tool("small", () => "y".repeat(100))]);
    const [record] = (await executeToolCalls([call("c1", "small")], { registry }, scope())).records;
    expect(record?.truncatedChars).toBe(0);
    expect(record?.content).toBe(JSON.stringify({ status: "success", data: "y".repeat(100) }));
  });
});

// ---- timeouts -------------------------------------------------------------------------------

describe("timeouts", () => {
  it("answers a handler that ignores its signal and never resolves with timeout, and aborts its signal", async () => {
    let signal: AbortSignal | undefined;
    const registry = createToolRegistry([
      tool(
        "hang",
        (_args, context) => {
          signal = context.signal;
          return never();
        },
        { timeoutMs: 50 },
      ),
    ]);
    // The tool's own 50 ms beats a default the test would never outlast.
    const [record] = (await executeToolCalls([call("c1", "hang")], { registry, defaultTimeoutMs: 60_000 }, scope()))
      .records;
    expect(errorOf(record)).toEqual({
      type: "timeout",
      message: "'hang' did not finish within 0.05 s. Try different arguments or another way.",
    });
    expect(signal?.aborted).toBe(true);
  });

  it("uses defaultTimeoutMs for a tool without its own", async () => {
    const registry = createToolRegistry([tool("hang", () => never())]);
    const [record] = (await executeToolCalls([call("c1", "hang")], { registry, defaultTimeoutMs: 40 }, scope()))
      .records;
    expect(errorOf(record).type).toBe("timeout");
  });

  it("lets a tool's own longer timeoutMs override a short default", async () => {
    const registry = createToolRegistry([
      tool("patient", async () => (await sleep(100), "done"), { timeoutMs: 10_000 }),
    ]);
    const [record] = (await executeToolCalls([call("c1", "patient")], { registry, defaultTimeoutMs: 20 }, scope()))
      .records;
    expect(record?.envelope).toEqual({ status: "success", data: "done" });
  });

  it("does not run a tool again in a run after it timed out twice", async () => {
    const meter = concurrencyMeter();
    const registry = createToolRegistry([tool("flaky_search", () => meter.run(never), { timeoutMs: 30 })]);
    const state = newToolRunState();
    const options = { registry };

    const first = await executeToolCalls([call("c1", "flaky_search", { id: "a" })], options, scope({ state }));
    const second = await executeToolCalls([call("c2", "flaky_search", { id: "b" })], options, scope({ state }));
    const third = await executeToolCalls([call("c3", "flaky_search", { id: "c" })], options, scope({ state }));

    expect(errorOf(first.records[0]).type).toBe("timeout");
    expect(errorOf(second.records[0]).type).toBe("timeout");
    const error = errorOf(third.records[0]);
    expect(error.type).toBe("timeout");
    expect(error.message).toContain("timed out 2 times in this run and will not be run again in this run");
    expect(meter.calls).toBe(2);
    // A fresh run starts with a clean slate.
    await executeToolCalls([call("c4", "flaky_search", { id: "d" })], options, scope());
    expect(meter.calls).toBe(3);
  });

  it("reports a timed-out dangerous call as outcome unknown and never runs the identical call again", async () => {
    const meter = concurrencyMeter();
    const registry = createToolRegistry([
      tool("issue_refund", () => meter.run(never), { dangerous: true, timeoutMs: 30 }),
    ]);
    const gate = approveAll();
    const state = newToolRunState();

    const first = await executeToolCalls(
      [call("c1", "issue_refund", { id: "A1", n: 20 })],
      { registry, approve: gate },
      scope({ state }),
    );
    const timedOut = errorOf(first.records[0]);
    expect(timedOut.type).toBe("timeout");
    expect(timedOut.message).toContain("its outcome is unknown");
    expect(timedOut.message).toContain("It will not be retried automatically");
    expect(first.records[0]?.dangerous).toBe(true);

    // The same call later in the run, with keys in another order and "20" for 20.
    const later = await executeToolCalls(
      [call("c2", "issue_refund", '{"n": "20", "id": "A1"}')],
      { registry, approve: gate },
      scope({ state }),
    );
    const error = errorOf(later.records[0]);
    expect(error.type).toBe("timeout");
    expect(error.message).toContain("outcome is unknown, so it is not retried automatically");
    expect(meter.calls).toBe(1);
    expect(gate.requests).toHaveLength(1);
    expect(state.unknownOutcome).toHaveLength(1);
  });
});

// ---- repeats and duplicates -------------------------------------------------------------------

describe("repeated calls", () => {
  it("answers the third identical call of a run with repeated_call without running it", async () => {
    const meter = concurrencyMeter();
    const registry = createToolRegistry([tool("lookup", (args) => meter.run(async () => args))]);
    const state = newToolRunState();
    const step = (id: string, raw: string) =>
      executeToolCalls([call(id, "lookup", raw)], { registry }, scope({ state }));

    expect((await step("c1", '{"id": "A1", "n": 3}')).records[0]?.envelope.status).toBe("success");
    expect((await step("c2", '{"n": "3", "id": "A1"}')).records[0]?.envelope.status).toBe("success");
    const third = (await step("c3", '{ "n": 3, "id": "A1" }')).records[0];
    const error = errorOf(third);
    expect(error.type).toBe("repeated_call");
    expect(error.message).toContain("already called 2 times with these exact arguments");
    expect(third?.arguments).toEqual({ id: "A1", n: 3 });
    expect(meter.calls).toBe(2);

    // Other arguments are a different call.
    expect((await step("c4", '{"id": "A1", "n": 4}')).records[0]?.envelope.status).toBe("success");
    expect(meter.calls).toBe(3);
  });

  it("runs identical calls of one response once, with a record for each tool_call id, in order", async () => {
    const meter = concurrencyMeter();
    const registry = createToolRegistry([
      tool("lookup", (args) => meter.run(async () => ({ found: args }))),
      tool("other", () => "other"),
    ]);
    const run = scope();
    const outcome = await executeToolCalls(
      [
        call("c1", "lookup", '{"id": "A1", "n": 3}'),
        call("c2", "other"),
        call("c3", "lookup", '{"n": "3", "id": "A1"}'),
        call("c4", "lookup", '{"id":"A1","n":3}'),
      ],
      { registry },
      run,
    );
    expect(meter.calls).toBe(1);
    expect(outcome.records.map((record) => record.id)).toEqual(["c1", "c2", "c3", "c4"]);
    expect(outcome.records[2]?.envelope).toEqual(outcome.records[0]?.envelope);
    expect(outcome.records[2]?.content).toBe(outcome.records[0]?.content);
    expect(outcome.records[2]?.name).toBe("lookup");
    // Each record keeps the text its own call sent.
    expect(outcome.records.map((record) => record.rawArguments)).toEqual([
      '{"id": "A1", "n": 3}',
      "{}",
      '{"n": "3", "id": "A1"}',
      '{"id":"A1","n":3}',
    ]);
    // Counted once towards the repeat limit.
    expect(Object.values(run.state.callCounts)).toEqual([1, 1]);
  });

  it("gives identical failing calls of one response a record each", async () => {
    const registry = createToolRegistry([tool("lookup", () => 1)]);
    const outcome = await executeToolCalls([call("c1", "nope"), call("c2", "nope")], { registry }, scope());
    expect(outcome.records.map((record) => [record.id, errorOf(record).type])).toEqual([
      ["c1", "tool_not_found"],
      ["c2", "tool_not_found"],
    ]);
  });
});

// ---- parallelism and dependencies ----------------------------------------------------------

describe("parallel calls", () => {
  function slowRegistry() {
    const meter = concurrencyMeter();
    const registry = createToolRegistry([tool("slow_lookup", () => meter.run(() => sleep(200)))]);
    const calls = [
      call("c1", "slow_lookup", { id: "1" }),
      call("c2", "slow_lookup", { id: "2" }),
      call("c3", "slow_lookup", { id: "3" }),
    ];
    return { meter, registry, calls };
  }

  it("runs the calls of one response at the same time", async () => {
    const { meter, registry, calls } = slowRegistry();
    const outcome = await executeToolCalls(calls, { registry }, scope());
    expect(outcome.records.map((record) => record.envelope.status)).toEqual(["success", "success", "success"]);
    expect(meter.max).toBe(3);
  });

  it("runs at most `concurrency` calls at once", async () => {
    const { meter, registry, calls } = slowRegistry();
    const outcome = await executeToolCalls(calls, { registry, concurrency: 2 }, scope());
    expect(outcome.records).toHaveLength(3);
    expect(meter.calls).toBe(3);
    expect(meter.max).toBe(2);
  });

  it("returns records in the order of the calls even when later calls finish first", async () => {
    const registry = createToolRegistry([
      tool("wait", async (args: { ms: number }) => (await sleep(args.ms), args.ms)),
    ]);
    const run = scope();
    const outcome = await executeToolCalls(
      [call("c1", "wait", { ms: 120 }), call("c2", "wait", { ms: 40 }), call("c3", "wait", { ms: 0 })],
      { registry },
      run,
    );
    expect(outcome.records.map((record) => [record.id, record.envelope])).toEqual([
      ["c1", { status: "success", data: 120 }],
      ["c2", { status: "success", data: 40 }],
      ["c3", { status: "success", data: 0 }],
    ]);
    const ends = timeline(run.events).filter((entry) => entry.startsWith("end:"));
    expect(ends).toEqual(["end:c3", "end:c2", "end:c1"]);
  });
});

describe("dependsOn", () => {
  function ticketRegistry() {
    const meter = concurrencyMeter();
    const log: string[] = [];
    const work = (name: string) => () =>
      meter.run(async () => {
        log.push(`start:${name}`);
        await sleep(60);
        log.push(`end:${name}`);
        return name;
      });
    const registry = createToolRegistry([
      tool("create_ticket", work("create_ticket")),
      tool("notify_team", work("notify_team"), { dependsOn: ["create_ticket"] }),
      tool("search_docs", work("search_docs")),
    ]);
    return { meter, log, registry };
  }

  it("starts a call only after the calls of the tool it depends on finished, even when listed first", async () => {
    const { meter, log, registry } = ticketRegistry();
    const run = scope();
    const outcome = await executeToolCalls(
      [call("b", "notify_team"), call("a", "create_ticket"), call("c", "search_docs")],
      { registry },
      run,
    );
    expect(outcome.records.map((record) => [record.id, record.envelope.status])).toEqual([
      ["b", "success"],
      ["a", "success"],
      ["c", "success"],
    ]);
    const events = timeline(run.events);
    expect(events.indexOf("end:a")).toBeLessThan(events.indexOf("start:b"));
    expect(log.indexOf("end:create_ticket")).toBeLessThan(log.indexOf("start:notify_team"));
    // Unrelated calls still overlap: create_ticket and search_docs ran together.
    expect(log.indexOf("start:search_docs")).toBeLessThan(log.indexOf("end:create_ticket"));
    expect(meter.max).toBeGreaterThanOrEqual(2);
  });

  it("waits for every call of the depended-on tool", async () => {
    const { log, registry } = ticketRegistry();
    await executeToolCalls(
      [call("b", "notify_team"), call("a1", "create_ticket", { id: "1" }), call("a2", "create_ticket", { id: "2" })],
      { registry },
      scope(),
    );
    const notifyStart = log.indexOf("start:notify_team");
    expect(log.filter((entry, index) => entry === "end:create_ticket" && index < notifyStart)).toHaveLength(2);
  });

  it("does not wait when the depended-on tool is not called in the response", async () => {
    const { log, registry } = ticketRegistry();
    const outcome = await executeToolCalls([call("b", "notify_team")], { registry }, scope());
    expect(outcome.records[0]?.envelope).toEqual({ status: "success", data: "notify_team" });
    expect(log).toEqual(["start:notify_team", "end:notify_team"]);
  });
});

// ---- dangerous tools and approvals -------------------------------------------------------

describe("dangerous tools", () => {
  const pendingGate = (): ApprovalGate & { requests: ApprovalRequest[] } => {
    const requests: ApprovalRequest[] = [];
    return Object.assign(async (request: ApprovalRequest) => (requests.push(request), "pending" as const), {
      requests,
    });
  };

  function shop() {
    const meter = concurrencyMeter();
    const registry = createToolRegistry([
      tool("lookup", (args) => args),
      tool("delete_order", (args) => meter.run(async () => ({ deleted: args })), { dangerous: true }),
      tool("notify_team", () => "notified", { dependsOn: ["delete_order"] }),
    ]);
    return { meter, registry };
  }

  it("denies a dangerous call when there is no approval gate, without running it", async () => {
    const { meter, registry } = shop();
    const run = scope();
    const outcome = await executeToolCalls([call("c1", "delete_order", { id: "A1" })], { registry }, run);
    const [record] = outcome.records;
    expect(errorOf(record).type).toBe("denied");
    expect(errorOf(record).message).toContain("no approver is configured");
    expect(record?.dangerous).toBe(true);
    expect(record?.approval).toMatchObject({ approved: false, by: "policy" });
    expect(meter.calls).toBe(0);
    // Never started, so no tool_start; its end is announced so the trace records the refusal.
    expect(timeline(run.events)).toEqual(["end:c1"]);
  });

  it("one reply produced 300 approval cards: a reply's calls past 16, and its dangerous calls past 3, are refused with what to do", async () => {
    const { registry } = shop();
    const gate = pendingGate();
    const lookups = Array.from({ length: 20 }, (_, index) => call(`l${index}`, "lookup", { id: `L${index}` }));
    const deletions = Array.from({ length: 5 }, (_, index) => call(`d${index}`, "delete_order", { id: `D${index}` }));
    const many = await executeToolCalls(lookups, { registry, approve: gate }, scope());
    expect(many.records.map((record) => record.id)).toEqual(lookups.map((one) => one.id)); // every call answered, in order
    expect(many.records.filter((record) => record.envelope.status === "success")).toHaveLength(MAX_CALLS_PER_REPLY);
    expect(errorOf(many.records[19])).toEqual({
      type: "execution_error",
      message: `Not run: one reply may make at most ${MAX_CALLS_PER_REPLY} tool calls. Use the results of those that ran, then call this again if it is still needed.`,
    });
    const asking = await executeToolCalls(deletions, { registry, approve: gate }, scope());
    expect(asking.pending.map((waiting) => waiting.call.id)).toEqual(["d0", "d1", "d2"]);
    expect(gate.requests).toHaveLength(MAX_DANGEROUS_PER_REPLY);
    expect(asking.records.map((record) => [record.id, errorOf(record).type])).toEqual([
      ["d3", "denied"],
      ["d4", "denied"],
    ]);
  });

  it("asks for the calls a tool's rule of the arguments names, and runs the others unasked", async () => {
    let ran = 0;
    const refund: AnyTool = {
      name: "refund",
      description: "Refunds an amount.",
      parameters: { type: "object", properties: { amount: { type: "number" } }, required: ["amount"] },
      dangerous: ({ amount }: { amount: number }) => amount > 100,
      handler: ({ amount }: { amount: number }) => {
        ran += 1;
        return { refunded: amount };
      },
    };
    const broken: AnyTool = {
      name: "wipe",
      description: "Wipes.",
      parameters: { type: "object", properties: {} },
      dangerous: () => {
        throw new Error("the rule has a bug");
      },
      handler: () => "wiped",
    };
    const registry = createToolRegistry([refund, broken]);
    const calls = [
      call("small", "refund", { amount: "20" }),
      call("large", "refund", { amount: 500 }),
      call("w", "wipe"),
    ];
    const outcome = await executeToolCalls(calls, { registry }, scope());
    const byId = new Map(outcome.records.map((record) => [record.id, record]));
    // The rule reads the validated arguments ("20" became 20): the small refund runs unasked.
    expect(byId.get("small")?.envelope).toEqual({ status: "success", data: { refunded: 20 } });
    expect(byId.get("small")?.dangerous).toBe(false);
    // Without a gate, a call that needs a person is denied: the large refund, and the call whose rule throws.
    expect(errorOf(byId.get("large")).type).toBe("denied");
    expect(byId.get("large")?.dangerous).toBe(true);
    expect(errorOf(byId.get("w")).type).toBe("denied");
    expect(ran).toBe(1);
  });

  it("returns a denied envelope when the gate says no, without running the handler", async () => {
    const { meter, registry } = shop();
    const run = scope();
    const approve: ApprovalGate = async (request) => ({
      approved: false,
      by: "bob",
      reason: "not today",
      argumentsHash: request.argumentsHash,
    });
    const [record] = (await executeToolCalls([call("c1", "delete_order", { id: "A1" })], { registry, approve }, run))
      .records;
    expect(errorOf(record)).toEqual({
      type: "denied",
      message: "A person did not approve this call (not today); it was not run. Do not retry it; tell the user.",
    });
    expect(record?.approval).toEqual({
      approved: false,
      by: "bob",
      reason: "not today",
      argumentsHash: argumentsHash({ id: "A1" }),
    });
    expect(record?.arguments).toEqual({ id: "A1" });
    expect(meter.calls).toBe(0);
    expect(timeline(run.events)).toEqual(["approval:c1", "end:c1"]);
  });

  it("denies a call whose gate throws", async () => {
    const { meter, registry } = shop();
    const approve: ApprovalGate = async () => {
      throw new Error("Slack is down");
    };
    const [record] = (
      await executeToolCalls([call("c1", "delete_order", { id: "A1" })], { registry, approve }, scope())
    ).records;
    expect(errorOf(record).type).toBe("denied");
    expect(errorOf(record).message).toContain("Slack is down");
    expect(meter.calls).toBe(0);
  });

  it("runs an approved call and records the decision, in the result and in the tool_end event", async () => {
    const { meter, registry } = shop();
    const run = scope();
    const gate = approveAll("alice");
    const [record] = (
      await executeToolCalls([call("c1", "delete_order", { id: "A1" })], { registry, approve: gate }, run)
    ).records;
    expect(record?.envelope).toEqual({ status: "success", data: { deleted: { id: "A1" } } });
    expect(record?.approval).toEqual({ approved: true, by: "alice", argumentsHash: argumentsHash({ id: "A1" }) });
    expect(meter.calls).toBe(1);
    expect(gate.requests).toEqual([
      {
        runId: "run_1",
        sessionId: "session_1",
        userId: "user_1",
        toolCallId: "c1",
        toolName: "delete_order",
        arguments: { id: "A1" },
        argumentsHash: argumentsHash({ id: "A1" }),
      },
    ]);
    expect(timeline(run.events)).toEqual(["approval:c1", "start:c1", "end:c1"]);
    const end = run.events.find((event) => event.type === "tool_end");
    expect(end?.type === "tool_end" && end.record.approval?.by).toBe("alice");
  });

  it("binds the arguments hash to the canonical arguments", () => {
    expect(argumentsHash({ id: "A1", n: 3 })).toBe(argumentsHash({ n: 3, id: "A1" }));
    expect(argumentsHash({ id: "A1", n: 3 })).not.toBe(argumentsHash({ id: "A1", n: 4 }));
  });

  describe("a response mixing safe and dangerous calls, with a gate that answers later", () => {
    async function pausedStep() {
      const { meter, registry } = shop();
      const gate = pendingGate();
      const options: ExecutorOptions = { registry, approve: gate };
      const state: ToolRunState = newToolRunState();
      const run = scope({ state });
      const outcome = await executeToolCalls(
        [
          call("s1", "lookup", { id: "A1" }),
          call("d1", "delete_order", { id: "A1" }),
          call("s2", "lookup", { id: "B2" }),
        ],
        options,
        run,
      );
      // What a paused run stores is plain data.
      const pending = JSON.parse(JSON.stringify(outcome.pending)) as PendingToolCall[];
      return { meter, gate, options, state, run, outcome, pending };
    }

    it("finishes the safe calls and leaves the dangerous one pending with an approval request", async () => {
      const { meter, gate, run, outcome } = await pausedStep();
      expect(outcome.records.map((record) => [record.id, record.envelope.status])).toEqual([
        ["s1", "success"],
        ["s2", "success"],
      ]);
      expect(outcome.pending).toHaveLength(1);
      expect(outcome.pending[0]?.call.id).toBe("d1");
      expect(outcome.pending[0]?.approval).toMatchObject({
        runId: "run_1",
        toolCallId: "d1",
        toolName: "delete_order",
        arguments: { id: "A1" },
        argumentsHash: argumentsHash({ id: "A1" }),
      });
      expect(meter.calls).toBe(0);
      expect(gate.requests.map((request) => request.toolCallId)).toEqual(["d1"]);
      expect(timeline(run.events)).toContain("approval:d1");
      expect(timeline(run.events)).not.toContain("start:d1");
    });

    it("runs the pending call when resumed with an approval for it", async () => {
      const { meter, options, state, pending } = await pausedStep();
      const resumed = scope({ state });
      const decision: ApprovalDecision = { approved: true, by: "bob", argumentsHash: argumentsHash({ id: "A1" }) };
      const outcome = await resumeToolCalls(pending, { d1: decision }, options, resumed);
      expect(outcome.pending).toEqual([]);
      expect(outcome.records).toHaveLength(1);
      expect(outcome.records[0]).toMatchObject({
        id: "d1",
        envelope: { status: "success", data: { deleted: { id: "A1" } } },
        approval: decision,
      });
      expect(meter.calls).toBe(1);
      expect(timeline(resumed.events)).toEqual(["start:d1", "end:d1"]);
    });

    it("gives a denied envelope when resumed with a refusal", async () => {
      const { meter, options, state, pending } = await pausedStep();
      const outcome = await resumeToolCalls(
        pending,
        { d1: { approved: false, by: "bob", argumentsHash: argumentsHash({ id: "A1" }) } },
        options,
        scope({ state }),
      );
      expect(errorOf(outcome.records[0]).type).toBe("denied");
      expect(meter.calls).toBe(0);
    });

    it("does not run the call for a decision about other arguments; it stays pending", async () => {
      const { meter, gate, options, state, pending } = await pausedStep();
      const wrong: ApprovalDecision = { approved: true, by: "mallory", argumentsHash: argumentsHash({ id: "B2" }) };
      const outcome = await resumeToolCalls(pending, { d1: wrong }, options, scope({ state }));
      expect(outcome.records).toEqual([]);
      expect(outcome.pending.map((waiting) => waiting.call.id)).toEqual(["d1"]);
      expect(outcome.pending[0]?.approval?.argumentsHash).toBe(argumentsHash({ id: "A1" }));
      expect(meter.calls).toBe(0);
      // Nobody is asked twice about the same call.
      expect(gate.requests).toHaveLength(1);
    });

    it("does not run the call for a decision about another tool_call id", async () => {
      const { meter, options, state, pending } = await pausedStep();
      const outcome = await resumeToolCalls(
        pending,
        { d2: { approved: true, by: "bob", argumentsHash: argumentsHash({ id: "A1" }) } },
        options,
        scope({ state }),
      );
      expect(outcome.pending.map((waiting) => waiting.call.id)).toEqual(["d1"]);
      expect(meter.calls).toBe(0);
    });
  });

  it("makes each dangerous call wait for its own decision", async () => {
    const { meter, registry } = shop();
    const options: ExecutorOptions = { registry, approve: async () => "pending" };
    const state = newToolRunState();
    const first = await executeToolCalls(
      [call("d1", "delete_order", { id: "A1" }), call("d2", "delete_order", { id: "B2" })],
      options,
      scope({ state }),
    );
    expect(first.pending.map((waiting) => waiting.call.id)).toEqual(["d1", "d2"]);
    expect(first.pending.map((waiting) => waiting.approval?.argumentsHash)).toEqual([
      argumentsHash({ id: "A1" }),
      argumentsHash({ id: "B2" }),
    ]);

    const second = await resumeToolCalls(
      first.pending,
      { d2: { approved: true, by: "bob", argumentsHash: argumentsHash({ id: "B2" }) } },
      options,
      scope({ state }),
    );
    expect(second.records.map((record) => [record.id, record.envelope.status])).toEqual([["d2", "success"]]);
    expect(second.pending.map((waiting) => waiting.call.id)).toEqual(["d1"]);
    expect(meter.calls).toBe(1);

    const third = await resumeToolCalls(
      second.pending,
      { d1: { approved: true, by: "bob", argumentsHash: argumentsHash({ id: "A1" }) } },
      options,
      scope({ state }),
    );
    expect(third.records.map((record) => [record.id, record.envelope.status])).toEqual([["d1", "success"]]);
    expect(third.pending).toEqual([]);
    expect(meter.calls).toBe(2);
  });

  it("asks once for identical dangerous calls of one response and answers every tool_call id on resume", async () => {
    const { meter, registry } = shop();
    const options: ExecutorOptions = { registry, approve: async () => "pending" };
    const state = newToolRunState();
    const first = await executeToolCalls(
      [call("d1", "delete_order", { id: "A1" }), call("d2", "delete_order", '{"id": "A1"}')],
      options,
      scope({ state }),
    );
    expect(first.records).toEqual([]);
    expect(first.pending.map((waiting) => [waiting.call.id, waiting.duplicateIds])).toEqual([["d1", ["d2"]]]);

    const second = await resumeToolCalls(
      first.pending,
      { d1: { approved: true, by: "bob", argumentsHash: argumentsHash({ id: "A1" }) } },
      options,
      scope({ state }),
    );
    expect(second.records.map((record) => [record.id, record.envelope.status])).toEqual([
      ["d1", "success"],
      ["d2", "success"],
    ]);
    expect(meter.calls).toBe(1);
  });

  it("keeps a call that depends on a pending dangerous call waiting, and runs it after the approval", async () => {
    const { meter, registry } = shop();
    const options: ExecutorOptions = { registry, approve: async () => "pending" };
    const state = newToolRunState();
    const first = await executeToolCalls(
      [call("n1", "notify_team"), call("d1", "delete_order", { id: "A1" })],
      options,
      scope({ state }),
    );
    expect(first.records).toEqual([]);
    expect(first.pending.map((waiting) => [waiting.call.id, waiting.approval?.toolCallId])).toEqual([
      ["n1", undefined],
      ["d1", "d1"],
    ]);

    const resumed = scope({ state });
    const decision: ApprovalDecision = { approved: true, by: "bob", argumentsHash: argumentsHash({ id: "A1" }) };
    const second = await resumeToolCalls(first.pending, { d1: decision }, options, resumed);
    expect(second.pending).toEqual([]);
    expect(second.records.map((record) => [record.id, record.envelope.status])).toEqual([
      ["n1", "success"],
      ["d1", "success"],
    ]);
    expect(meter.calls).toBe(1);
    expect(timeline(resumed.events)).toEqual(["start:d1", "end:d1", "start:n1", "end:n1"]);
  });

  it("emits approval_requested, tool_start and tool_end", async () => {
    const { registry } = shop();
    const run = scope();
    await executeToolCalls([call("d1", "delete_order", { id: "A1" })], { registry, approve: approveAll() }, run);
    expect(run.events.map((event) => event.type)).toEqual(["approval_requested", "tool_start", "tool_end"]);
    expect(run.events[0]).toMatchObject({ type: "approval_requested", runId: "run_1", request: { toolCallId: "d1" } });
    expect(run.events[1]).toMatchObject({
      type: "tool_start",
      runId: "run_1",
      toolCallId: "d1",
      name: "delete_order",
      arguments: { id: "A1" },
    });
    expect(run.events[2]).toMatchObject({ type: "tool_end", runId: "run_1", record: { id: "d1" } });
  });
});

// ---- cancellation ---------------------------------------------------------------------------

describe("cancellation", () => {
  it("ends a hanging call promptly with execution_error when the run is cancelled", async () => {
    const controller = new AbortController();
    let signal: AbortSignal | undefined;
    const registry = createToolRegistry([
      tool("hang", (_args, context) => {
        signal = context.signal;
        setTimeout(() => controller.abort(), 20);
        return never();
      }),
    ]);
    // A tool timeout far beyond the test's own: only the cancellation can end this call.
    const [record] = (
      await executeToolCalls(
        [call("c1", "hang")],
        { registry, defaultTimeoutMs: 120_000 },
        scope({ signal: controller.signal }),
      )
    ).records;
    expect(errorOf(record)).toEqual({
      type: "execution_error",
      message: "The run was cancelled before this call finished.",
    });
    expect(signal?.aborted).toBe(true);
  });

  it("does not start calls that were still waiting for a slot when the run was cancelled", async () => {
    const controller = new AbortController();
    const meter = concurrencyMeter();
    const registry = createToolRegistry([
      tool("hang", () =>
        meter.run(() => {
          setTimeout(() => controller.abort(), 20);
          return never();
        }),
      ),
    ]);
    const outcome = await executeToolCalls(
      [call("c1", "hang", { id: "1" }), call("c2", "hang", { id: "2" })],
      { registry, concurrency: 1, defaultTimeoutMs: 120_000 },
      scope({ signal: controller.signal }),
    );
    expect(outcome.records.map((record) => errorOf(record).type)).toEqual(["execution_error", "execution_error"]);
    expect(meter.calls).toBe(1);
  });

  it("stops waiting for an approval nobody answers when the run is cancelled, and never runs the call", async () => {
    const controller = new AbortController();
    let ran = 0;
    const registry = createToolRegistry([tool("wipe", () => ++ran, { dangerous: true })]);
    const approve: ApprovalGate = () => {
      setTimeout(() => controller.abort(), 20);
      return never();
    };
    const [record] = (
      await executeToolCalls([call("c1", "wipe")], { registry, approve }, scope({ signal: controller.signal }))
    ).records;
    expect(errorOf(record)).toMatchObject({
      type: "denied",
      message: expect.stringContaining("the run was cancelled"),
    });
    expect(record?.approval).toMatchObject({ approved: false, by: "cancelled" });
    expect(ran).toBe(0);
  });

  it("gives a handler the same, already aborted signal when it looks only after its call timed out", async () => {
    let late: { first: AbortSignal; second: AbortSignal } | undefined;
    let reportLate: () => void = () => undefined;
    const looked = new Promise<void>((resolve) => (reportLate = resolve));
    const registry = createToolRegistry([
      tool(
        "slow",
        async (_args, context) => {
          await sleep(60);
          late = { first: context.signal, second: context.signal };
          reportLate();
        },
        { timeoutMs: 10 },
      ),
    ]);
    const [record] = (await executeToolCalls([call("c1", "slow")], { registry }, scope())).records;
    expect(errorOf(record).type).toBe("timeout");
    await looked;
    expect(late?.first.aborted).toBe(true);
    expect(late?.first).toBe(late?.second);
  });

  it("runs nothing when the run is already cancelled", async () => {
    const meter = concurrencyMeter();
    const registry = createToolRegistry([tool("lookup", () => meter.run(async () => "found"))]);
    const controller = new AbortController();
    controller.abort();
    const [record] = (
      await executeToolCalls([call("c1", "lookup")], { registry }, scope({ signal: controller.signal }))
    ).records;
    expect(errorOf(record).message).toContain("cancelled");
    expect(meter.calls).toBe(0);
  });
});

describe("a tool that pauses on approvals of its own (a sub-agent's)", () => {
  const inner: ApprovalRequest = {
    runId: "run_child",
    sessionId: "session_1",
    userId: "user_1",
    toolCallId: "inner_1",
    toolName: "delete_order",
    arguments: { id: "A1" },
    argumentsHash: argumentsHash({ id: "A1" }),
  };
  const resumedWith: Array<{ state: unknown; decisions: Record<string, ApprovalDecision> }> = [];
  const registry = createToolRegistry([
    tool("delegate", async () => new ToolPause([inner], { step: 3 }), {
      resume: async (state: unknown, decisions: Record<string, ApprovalDecision>) => {
        resumedWith.push({ state, decisions });
        return decisions.inner_1?.approved ? { done: "deleted A1" } : { done: "not deleted" };
      },
    }),
    tool("lookup", async () => ({ found: true })),
  ]);

  it("stays pending with the requests and its state, while the other calls of the step finish", async () => {
    const run = scope();
    const outcome = await executeToolCalls([call("p1", "delegate"), call("s1", "lookup")], { registry }, run);
    expect(outcome.records.map((record) => record.id)).toEqual(["s1"]);
    expect(outcome.pending).toEqual([
      expect.objectContaining({
        call: expect.objectContaining({ id: "p1" }),
        nested: { requests: [inner], state: { step: 3 } },
      }),
    ]);
    // Plain data: it survives being stored and read back, as a paused run is.
    expect(JSON.parse(JSON.stringify(outcome.pending))).toEqual(outcome.pending);
    expect(timeline(run.events)).not.toContain("end:p1");
  });

  it("continues through resume with its state and the decisions, and its result reaches the model", async () => {
    const { pending } = await executeToolCalls([call("p1", "delegate")], { registry }, scope());
    const decision: ApprovalDecision = { approved: true, by: "bob", argumentsHash: inner.argumentsHash };
    const stored = JSON.parse(JSON.stringify(pending)) as PendingToolCall[];
    const outcome = await resumeToolCalls(stored, { inner_1: decision }, { registry }, scope());
    expect(resumedWith.at(-1)).toEqual({ state: { step: 3 }, decisions: { inner_1: decision } });
    expect(outcome.pending).toEqual([]);
    expect(outcome.records[0]).toMatchObject({
      id: "p1",
      envelope: { status: "success", data: { done: "deleted A1" } },
    });
  });

  it("a tool that pauses without a resume gets an execution_error when resumed, not a crash", async () => {
    const bare = createToolRegistry([tool("delegate", async () => new ToolPause([inner], {}))]);
    const { pending } = await executeToolCalls([call("p1", "delegate")], { registry: bare }, scope());
    const outcome = await resumeToolCalls(pending, {}, { registry: bare }, scope());
    expect(errorOf(outcome.records[0]).type).toBe("execution_error");
    expect(errorOf(outcome.records[0]).message).toContain("cannot be resumed");
  });
});

// ---- arguments a model gets almost right -------------------------------------------------------

describe("enum values a model gets almost right", () => {
  const received: Array<Record<string, unknown>> = [];
  const notify = tool(
    "notify",
    (args: Record<string, unknown>) => {
      received.push(args);
      return args;
    },
    {
      parameters: {
        type: "object",
        properties: {
          channel: { type: "string", enum: ["email", "sms", "push_notification"] },
          status: { enum: ["open", "in_progress", "done"] },
          // Enums inside arrays of objects, behind a $ref, in a nullable anyOf, and as oneOf consts.
          tasks: {
            type: "array",
            items: { type: "object", properties: { state: { $ref: "#/$defs/state" } }, required: ["state"] },
          },
          priority: { anyOf: [{ enum: ["low", "high"] }, { type: "null" }] },
          kind: { oneOf: [{ const: "follow-up" }, { const: "reminder" }] },
          note: { type: "string" },
        },
        $defs: { state: { enum: ["to_do", "in_review"] } },
        additionalProperties: false,
      },
    },
  );
  const registry = createToolRegistry([notify]);
  const run = async (args: Record<string, unknown>) => {
    received.length = 0;
    const [record] = (await executeToolCalls([call("c1", "notify", args)], { registry }, scope())).records;
    if (!record) throw new Error("no record");
    return record;
  };

  it.each([
    ["a case variant", { channel: "SMS" }, { channel: "sms" }],
    ["spaces for underscores", { status: "in progress" }, { status: "in_progress" }],
    ["hyphens and capitals", { status: "In-Progress" }, { status: "in_progress" }],
    ["shouting", { status: "IN_PROGRESS" }, { status: "in_progress" }],
    ["camelCase", { status: "inProgress" }, { status: "in_progress" }],
    ["dots and stray spaces", { channel: " Push.Notification " }, { channel: "push_notification" }],
    ["a nullable enum (anyOf)", { priority: "HIGH" }, { priority: "high" }],
    ["a oneOf of consts", { kind: "Follow Up" }, { kind: "follow-up" }],
  ])("calibrates %s to the one allowed value it matches, and records it", async (_label, sent, calibrated) => {
    const record = await run(sent);
    expect(record.envelope).toEqual({ status: "success", data: calibrated });
    expect(received).toEqual([calibrated]);
    const [key] = Object.keys(sent) as [keyof typeof sent];
    expect(record.repairs).toEqual([
      `calibrated ${key} from ${JSON.stringify(sent[key])} to ${JSON.stringify((calibrated as Record<string, unknown>)[key])}, the allowed value it matches`,
    ]);
    // The trace keeps what the model sent beside what ran.
    expect(JSON.parse(record.rawArguments)).toEqual(sent);
  });

  it("calibrates enums inside arrays of objects (through a $ref), each one recorded with its path", async () => {
    const record = await run({ tasks: [{ state: "To Do" }, { state: "in_review" }, { state: "in-review" }] });
    expect(record.arguments).toEqual({ tasks: [{ state: "to_do" }, { state: "in_review" }, { state: "in_review" }] });
    expect(record.repairs).toEqual([
      'calibrated tasks.0.state from "To Do" to "to_do", the allowed value it matches',
      'calibrated tasks.2.state from "in-review" to "in_review", the allowed value it matches',
    ]);
  });

  it("leaves a string that is not an enum untouched, and an allowed value as it is", async () => {
    const record = await run({ note: "In Progress", status: "in_progress", channel: "sms" });
    expect(record.envelope).toEqual({
      status: "success",
      data: { note: "In Progress", status: "in_progress", channel: "sms" },
    });
    expect(record.repairs).toEqual([]);
  });

  it.each([
    [
      "matches no allowed value",
      { channel: "pigeon" },
      `property 'channel' must be one of "email", "sms", "push_notification"`,
    ],
    [
      "only shares letters with one (separators are not nothing)",
      { status: "inprogress" },
      `property 'status' must be one of "open", "in_progress", "done"`,
    ],
    [
      "is a number's spelling, not a word's",
      { channel: "1-5" },
      `property 'channel' must be one of "email", "sms", "push_notification"`,
    ],
  ])("keeps the error listing the allowed values for a string that %s", async (_label, sent, message) => {
    const record = await run(sent);
    expect(errorOf(record)).toEqual({ type: "invalid_arguments", message: expect.stringContaining(message) });
    expect(received).toEqual([]);
  });

  it("regression: two allowed values that read the same ('in-progress' and 'in_progress', 'sms' and 'SMS') are ambiguous and keep the error", async () => {
    const ambiguous = createToolRegistry([
      tool("track", (args) => args, {
        parameters: {
          type: "object",
          properties: {
            status: { enum: ["in-progress", "in_progress", "done"] },
            channel: { enum: ["sms", "SMS", "email"] },
          },
        },
      }),
    ]);
    const [record] = (
      await executeToolCalls(
        [call("c1", "track", { status: "In Progress", channel: "Sms" })],
        { registry: ambiguous },
        scope(),
      )
    ).records;
    const error = errorOf(record);
    expect(error.type).toBe("invalid_arguments");
    expect(error.message).toContain(`property 'status' must be one of "in-progress", "in_progress", "done"`);
    expect(error.message).toContain(`property 'channel' must be one of "sms", "SMS", "email"`);
    expect(record?.repairs).toEqual([]);
  });

  it("regression: in a union, a value one branch allows as it is is never 'calibrated' to itself because another branch refuses it; a near one is calibrated", async () => {
    const union = createToolRegistry([
      tool("contact", (args) => args, {
        parameters: {
          type: "object",
          properties: {
            via: {
              oneOf: [
                {
                  type: "object",
                  properties: { kind: { const: "email" }, address: { type: "string" } },
                  required: ["kind", "address"],
                },
                {
                  type: "object",
                  properties: { kind: { const: "sms" }, number: { type: "string" } },
                  required: ["kind", "number"],
                },
              ],
            },
          },
        },
      }),
    ]);
    const send = async (via: Record<string, unknown>) =>
      (await executeToolCalls([call("c1", "contact", { via })], { registry: union }, scope())).records[0];
    // The model chose email and sent the address as a number: the sms branch's refusal of "email" is no reason to touch it.
    const chose = await send({ kind: "email", address: 42 });
    expect(chose?.envelope).toEqual({ status: "success", data: { via: { kind: "email", address: "42" } } });
    expect(chose?.repairs).toEqual(['coerced via.address from 42 to "42"']);
    // Nothing fits: the error says what each branch allows.
    const neither = await send({ kind: "pigeon" });
    expect(errorOf(neither).message).toContain(`property 'via.kind' must be "email"`);
    expect(errorOf(neither).message).toContain(`property 'via.kind' must be "sms"`);
    const near = await send({ kind: "SMS", number: "555-0100" });
    expect(near?.envelope).toEqual({ status: "success", data: { via: { kind: "sms", number: "555-0100" } } });
    expect(near?.repairs).toEqual(['calibrated via.kind from "SMS" to "sms", the allowed value it matches']);
  });
});
