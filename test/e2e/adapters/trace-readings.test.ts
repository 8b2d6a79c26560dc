// The trace as the command line and the replay read it through the store port (src/adapters/trace-readings.ts):
// a run's sub-agents at every depth nested under the calls that started them, and one run's
// recording for a replay. SQLite always; PostgreSQL with GLASSBOX_TEST_DATABASE_URL.
import { describe, expect, it } from "vitest";
import { formatRunTimeline } from "../../../src/adapters/trace-report.js";
import { nestedRunsOf, recordedRunOf } from "../../../src/adapters/trace-readings.js";
import type { AnyStorePort } from "../../../src/store/index.js";
import type { ToolCallRecord } from "../../../src/tools/types.js";
import { outcomeOf, runRecord, stepOf, TARGETS, useContract } from "../helpers/store-targets.js";

const callOf = (id: string, name: string): ToolCallRecord => ({
  id,
  name,
  rawArguments: '{"task":"look"}',
  arguments: { task: "look" },
  repairs: [],
  envelope: { status: "success", data: "ok" },
  content: '{"status":"success","data":"ok"}',
  truncatedChars: 0,
  durationMs: 3,
  dangerous: false,
});

/** A run whose call started a sub-agent, whose call started another. */
async function threeLevels(store: AnyStorePort): Promise<void> {
  const levels = [
    { runId: "run_top", call: "call_top", tool: "agent_researcher" },
    { runId: "run_middle", call: "call_middle", tool: "agent_clerk" },
    { runId: "run_bottom", call: "call_bottom", tool: "get_order_status" },
  ];
  for (const [index, level] of levels.entries()) {
    const above = levels[index - 1];
    await store.record([
      {
        kind: "start_run",
        run: {
          ...runRecord(level.runId, "cli:nested"),
          ...(above ? { parent: { runId: above.runId, toolCallId: above.call } } : {}),
        },
      },
      { kind: "step", step: stepOf(level.runId, 1) },
      { kind: "tool_calls", runId: level.runId, step: 1, records: [callOf(level.call, level.tool)] },
      { kind: "end_run", outcome: outcomeOf(level.runId) },
    ]);
  }
}

describe.each(TARGETS)("trace readings on $name", (target) => {
  const contract = useContract(target);

  // Regression: a sub-agent's sub-agent lost its indentation after its first line.
  it("nests a run's sub-agents at every depth under the calls that started them", async () => {
    const store = await contract.open();
    await threeLevels(store);
    const top = await store.run("run_top");
    if (!top) throw new Error("the top run was not recorded");
    const timeline = formatRunTimeline(top, await store.steps("run_top"), await nestedRunsOf(store, [top]));
    expect(timeline).toMatch(
      /→ agent_researcher\(task: look\) {2}success[^\n]*\n {6}sub-agent Run run_middle \(final\)/,
    );
    expect(timeline).toMatch(
      /\n {10}→ agent_clerk\(task: look\) {2}success[^\n]*\n {12}sub-agent Run run_bottom \(final\)/,
    );
    expect(timeline).toMatch(/\n {16}→ get_order_status\(task: look\) {2}success/);
  });

  it("reads one run's recording for a replay: the run, its steps, its first request, and nothing of other runs", async () => {
    const store = await contract.open();
    await threeLevels(store);
    const recorded = await recordedRunOf(store, "run_middle");
    expect(recorded.run("run_middle")).toMatchObject({ runId: "run_middle", parentRunId: "run_top" });
    expect(recorded.steps("run_middle").map((step) => step.toolCalls.map((call) => call.name))).toEqual([
      ["agent_clerk"],
    ]);
    expect(recorded.payload("run_middle", 1)).toEqual({ messages: [{ role: "user", content: "hi" }] });
    expect(recorded.run("run_top")).toBeUndefined();
    expect(recorded.payload("run_middle", 2)).toBeUndefined();
  });
});
