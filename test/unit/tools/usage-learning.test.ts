/**
 * Selection that learns from past runs: word-tool associations from (request, tools used) pairs,
 * read from the trace tables as the real store and trace recorder write them.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { AgentEvent } from "../../../src/agent/events.js";
import { openSqliteStore, type SqliteStore } from "../../../src/store/sqlite-store.js";
import { createRunUnit } from "../../../src/agent/run-unit.js";
import { createTraceRecorder, type TraceRecorder } from "../../../src/agent/trace.js";
import { emptyUsage } from "../../../src/agent/types.js";
import { createToolRegistry } from "../../../src/tools/registry.js";
import { createToolSelector, LIST_TOOLS, terms } from "../../../src/tools/selection.js";
import type { ToolCallRecord, ToolSpec } from "../../../src/tools/types.js";
import { learnAtRunEnd } from "../../../src/tools/learn-at-run-end.js";
import { createUsageLearning, requestFeatures } from "../../../src/tools/usage-learning.js";
import { selectionTasks } from "../../../bench/fixtures/selection-tasks.js";
import { tools60 } from "../../../bench/fixtures/tools-60.js";
import { sqlitePortOf } from "../../../src/store/sqlite.js";

const registry60 = createToolRegistry(tools60);
const names = (specs: ToolSpec[]) => specs.map((spec) => spec.function.name);
const NUDGE = "nudge me in 2 hours to chase Soylent";
/** Past runs besides the nudges: the benchmark's development requests that do not say "nudge". */
const background = selectionTasks
  .filter(({ request }) => !/nudge/i.test(request))
  .map(({ request, needs }) => ({ request, tools: needs }));
const pastNudges = [
  { request: "nudge me at 4 to ring the bank", tools: ["set_reminder"] },
  { request: "can you nudge me tomorrow about the board pack", tools: ["set_reminder"] },
];

describe("learning from past (request, tools used) pairs", () => {
  it("brings in a tool that past runs used for the request's words, though no description word matches", () => {
    expect(names(createToolSelector(registry60).select({ text: NUDGE }))).not.toContain("set_reminder");
    const usage = createUsageLearning();
    for (const example of background) usage.learn(example);
    expect(names(createToolSelector(registry60, { usage }).select({ text: NUDGE }))).not.toContain("set_reminder");
    for (const example of pastNudges) usage.learn(example);
    const selected = names(createToolSelector(registry60, { usage }).select({ text: NUDGE }));
    expect(selected).toContain("set_reminder");
    expect(usage.scores(NUDGE).get("set_reminder")).toBeGreaterThan(0);
  });

  it("with no history ranks and selects exactly as without learning", () => {
    const plain = createToolSelector(registry60);
    const learning = createToolSelector(registry60, { usage: createUsageLearning() });
    for (const { request } of selectionTasks) {
      expect(learning.rank(request)).toEqual(plain.rank(request));
      expect(names(learning.select({ text: request }))).toEqual(names(plain.select({ text: request })));
    }
  });

  it("passes over learned tools that are not registered", () => {
    const usage = createUsageLearning();
    usage.learn({ request: "nudge me later", tools: ["a_tool_since_removed"] });
    expect(createToolSelector(registry60, { usage }).rank(NUDGE)).toEqual(createToolSelector(registry60).rank(NUDGE));
  });

  it("counts idioms as word pairs, particles included, with the ranker's shorthand and stems", () => {
    expect(requestFeatures("drop a line to the vendor")).toEqual(
      expect.arrayContaining([...terms("drop line vendor"), `${terms("drop")[0]}+${terms("line")[0]}`]),
    );
    expect(requestFeatures("call it off")).toContain(`${terms("call")[0]}+off`);
    expect(requestFeatures("remind me tmrw pls")).toEqual(expect.arrayContaining(["remind", "tomorrow"]));
    expect(requestFeatures("she paid the invoices")).toEqual(expect.arrayContaining(["pay", "invoic"]));
  });

  it("keeps only the latest runs, and a run learned again replaces its earlier example", () => {
    const usage = createUsageLearning({ maxRuns: 2 });
    usage.learn({ runId: "r1", request: "nudge me at 4", tools: ["set_reminder"] });
    usage.learn({ runId: "r2", request: "what's the weather", tools: ["get_current_weather"] });
    usage.learn({ runId: "r2", request: "what's the weather", tools: ["get_current_weather", "get_weather_forecast"] });
    expect(usage.size).toBe(2);
    expect(usage.scores("nudge").has("set_reminder")).toBe(true);
    expect(usage.scores("weather").has("get_weather_forecast")).toBe(true);
    usage.learn({ runId: "r3", request: "ship it", tools: ["deploy_service"] });
    expect(usage.size).toBe(2);
    expect(usage.scores("nudge").size).toBe(0); // r1, the oldest, is forgotten
  });

  it("is deterministic: the same examples in the same order give the same scores", () => {
    const build = () => {
      const usage = createUsageLearning();
      for (const { request, needs } of selectionTasks) usage.learn({ request, tools: needs });
      return [...usage.scores("ping me when the deploy is done and cancel the standup")];
    };
    expect(build()).toEqual(build());
  });
});

describe("past runs from the trace tables", () => {
  const directories: string[] = [];
  const stores: SqliteStore[] = [];
  afterEach(() => {
    for (const store of stores.splice(0)) store.close();
    for (const directory of directories.splice(0)) rmSync(directory, { recursive: true, force: true });
  });
  const newStore = () => {
    const directory = mkdtempSync(join(tmpdir(), "glassbox-usage-"));
    directories.push(directory);
    const store = openSqliteStore(join(directory, "glassbox.db"));
    stores.push(store);
    return store;
  };

  const callRecord = (id: string, name: string): ToolCallRecord => ({
    id,
    name,
    rawArguments: "{}",
    arguments: {},
    repairs: [],
    envelope: { status: "success", data: { ok: true } },
    content: '{"status":"success"}',
    truncatedChars: 0,
    durationMs: 1,
    dangerous: false,
  });
  /** A run's events as the loop emits them: start, one step per list of tool calls, end. */
  function runEvents(
    runId: string,
    input: string,
    steps: string[][],
    parent?: { runId: string; toolCallId: string },
  ): AgentEvent[] {
    const events: AgentEvent[] = [
      { type: "run_start", runId, sessionId: "session_1", userId: "user_1", input, ...(parent ? { parent } : {}) },
    ];
    steps.forEach((calls, index) => {
      const step = index + 1;
      events.push({ type: "model_start", runId, step, messages: [{ role: "user", content: input }], toolCount: 60 });
      const toolCalls = calls.map((name, call) => ({
        id: `${runId}_${step}_${call}`,
        type: "function" as const,
        function: { name, arguments: "{}" },
      }));
      events.push({
        type: "model_end",
        runId,
        step,
        latencyMs: 5,
        response: { content: null, toolCalls, finishReason: "tool_calls", usage: emptyUsage(), model: "scripted" },
      });
      for (const call of toolCalls)
        events.push({ type: "tool_end", runId, step, record: callRecord(call.id, call.function.name) });
    });
    const result = {
      runId,
      sessionId: "session_1",
      output: "done",
      stopReason: "final" as const,
      steps: steps.length,
      usage: emptyUsage(),
      toolCalls: [],
    };
    events.push({ type: "run_end", runId, result });
    return events;
  }

  /** Each event in a unit of its own, committed before the next, as the loop's units are. */
  async function recordAll(trace: TraceRecorder, events: AgentEvent[]): Promise<void> {
    for (const event of events) {
      const unit = createRunUnit();
      trace.record(event, unit);
      await unit.commit(trace.store);
    }
  }

  it("reads top-level runs' requests and the tools they called (list_tools left out, sub-agents' runs too), oldest first", async () => {
    const store = newStore();
    const trace = createTraceRecorder(sqlitePortOf(store));
    await recordAll(trace, [
      ...runEvents("run_1", "nudge me at 4 to ring the bank", [[LIST_TOOLS], ["set_reminder"]]),
      ...runEvents("run_2", "what's the forecast for Rome and how much is 50 euros in dollars", [
        ["get_weather_forecast", "convert_currency"],
      ]),
      ...runEvents("run_3", "look it up for the parent", [["web_search"]], { runId: "run_2", toolCallId: "call_x" }),
      ...runEvents("run_4", "thanks!", [[]]),
    ]);

    expect(await sqlitePortOf(store).usageHistory()).toEqual([
      { runId: "run_1", request: "nudge me at 4 to ring the bank", tools: ["set_reminder"] },
      {
        runId: "run_2",
        request: "what's the forecast for Rome and how much is 50 euros in dollars",
        tools: ["get_weather_forecast", "convert_currency"],
      },
      { runId: "run_4", request: "thanks!", tools: [] },
    ]);
    expect((await sqlitePortOf(store).usageHistory(1)).map((example) => example.runId)).toEqual(["run_4"]);
  });

  it("learns each run as it ends, so the next request with those words gets the tool", async () => {
    const store = newStore();
    const usage = createUsageLearning();
    const selector = createToolSelector(registry60, { usage });
    const trace = learnAtRunEnd(createTraceRecorder(sqlitePortOf(store)), sqlitePortOf(store), usage);
    for (const [index, { request, tools }] of background.slice(0, 100).entries())
      await recordAll(trace, runEvents(`past_${index}`, request, [tools]));
    expect(usage.size).toBe(100);
    expect(names(selector.select({ text: NUDGE }))).not.toContain("set_reminder");

    await recordAll(trace, runEvents("run_1", "nudge me at 4 to ring the bank", [[LIST_TOOLS], ["set_reminder"]]));
    expect(usage.size).toBe(101);
    await recordAll(trace, runEvents("run_2", "can you nudge me tomorrow about the board pack", [["set_reminder"]]));
    expect(names(selector.select({ text: NUDGE }))).toContain("set_reminder");

    // a bot started later reads the same from the tables
    const restarted = createUsageLearning();
    for (const example of await sqlitePortOf(store).usageHistory()) restarted.learn(example);
    expect([...restarted.scores(NUDGE)]).toEqual([...usage.scores(NUDGE)]);
  });
});

describe("a word history has not seen borrows from the learned words WordNet relates to it", () => {
  const pastCancels = [
    { request: "cancel the offsite on friday", tools: ["cancel_calendar_event"] },
    { request: "cancel my 3pm with the agency", tools: ["cancel_calendar_event"] },
    { request: "what's on my calendar tomorrow", tools: ["list_calendar_events"] },
  ];

  it("scores 'scrub' with what 'cancel' taught (WordNet: scrub, cancel, call off), and not with borrowing off", () => {
    const borrowing = createUsageLearning();
    const plain = createUsageLearning({ lexicon: null });
    for (const example of pastCancels) {
      borrowing.learn(example);
      plain.learn(example);
    }
    expect(borrowing.scores("scrub the standup").get("cancel_calendar_event")).toBeGreaterThan(0);
    expect(plain.scores("scrub the standup").get("cancel_calendar_event")).toBeUndefined();
    // borrowed at a discount: less than saying "cancel" itself
    expect(borrowing.scores("scrub the standup").get("cancel_calendar_event")).toBeLessThan(
      borrowing.scores("cancel the standup").get("cancel_calendar_event") ?? 0,
    );
  });

  it("borrows by relation through the lexicon it is given, and only for words not seen", () => {
    const lexicon = {
      related: (word: string) =>
        word === "axe" || word === "offsite" ? [{ word: "cancel", relation: "synonym" as const, sense: 0 }] : [],
      has: () => true,
    };
    const usage = createUsageLearning({ lexicon });
    for (const example of pastCancels) usage.learn(example);
    const axe = usage.scores("axe it");
    expect(axe.get("cancel_calendar_event")).toBeGreaterThan(0);
    expect(axe.has("list_calendar_events")).toBe(false);
    // "offsite" was seen: it keeps its own associations and borrows nothing
    const noBorrow = createUsageLearning({ lexicon, borrow: 0 });
    for (const example of pastCancels) noBorrow.learn(example);
    expect(usage.scores("offsite")).toEqual(noBorrow.scores("offsite"));
    expect(noBorrow.scores("axe it").size).toBe(0);
  });

  it("with no history borrows nothing", () => {
    expect(createUsageLearning().scores("scrub the standup").size).toBe(0);
  });
});

describe("co-use learned from past runs", () => {
  const together = [
    { request: "first thing", tools: ["get_invoice", "translate_text"] },
    { request: "second thing", tools: ["get_invoice", "translate_text"] },
    { request: "third thing", tools: ["get_invoice"] },
  ];

  it("names the tools used with a tool in at least the given share and number of its runs", () => {
    const usage = createUsageLearning();
    for (const example of together) usage.learn(example);
    expect(usage.usedWith("get_invoice", 0.5, 2)).toEqual(["translate_text"]);
    expect(usage.usedWith("get_invoice", 0.7)).toEqual([]);
    expect(usage.usedWith("get_invoice", 0.5, 3)).toEqual([]);
    expect(usage.usedWith("translate_text", 1, 2)).toEqual(["get_invoice"]);
    expect(usage.usedWith("never_used", 0)).toEqual([]);
  });

  it("forgets co-use with the runs that taught it", () => {
    const usage = createUsageLearning({ maxRuns: 2 });
    for (const example of together.slice(0, 2)) usage.learn(example);
    expect(usage.usedWith("get_invoice", 0.5, 2)).toEqual(["translate_text"]);
    usage.learn({ request: "other", tools: ["calculator"] });
    usage.learn({ request: "another", tools: ["calculator"] });
    expect(usage.usedWith("get_invoice", 0)).toEqual([]);
  });

  it("brings along what past runs used with a best-ranked tool, and not when turned off", () => {
    const usage = createUsageLearning();
    for (const example of together) usage.learn(example);
    const text = "show me invoice INV-2291";
    const options = { limit: 2, maxLimit: 2, usage };
    expect(createToolSelector(registry60, options).rank(text).slice(0, 2)).toContain("get_invoice");
    expect(names(createToolSelector(registry60, { ...options, coUseShare: 0.5 }).select({ text }))).toContain(
      "translate_text",
    );
    expect(names(createToolSelector(registry60, { ...options, coUseShare: 0 }).select({ text }))).not.toContain(
      "translate_text",
    );
  });
});

describe("per-line caches", () => {
  it("score a run's messages the same on later calls as a fresh selector and learning do", () => {
    const learned = () => {
      const usage = createUsageLearning();
      for (const { request, needs } of selectionTasks.slice(0, 200)) usage.learn({ request, tools: needs });
      return usage;
    };
    const warm = learned();
    const selector = createToolSelector(registry60, { usage: warm });
    const texts = selectionTasks
      .slice(200, 240)
      .map(({ request }, index, all) => [request, all[(index + 1) % all.length]?.request ?? ""].join("\n"));
    for (const text of texts) selector.rank(text);
    for (const text of texts) {
      const fresh = learned();
      expect(selector.rank(text)).toEqual(createToolSelector(registry60, { usage: fresh }).rank(text));
      expect([...warm.scores(text)]).toEqual([...fresh.scores(text)]);
    }
  });
});
