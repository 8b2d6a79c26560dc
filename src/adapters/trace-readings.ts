/**
 * The trace as the viewer, the API and the command line read it: through the store port, SQLite's or
 * PostgreSQL's. What takes a synchronous reader (a replay, a timeline's sub-agents) gets what it
 * reads fetched first.
 */
import type { RecordedRuns } from "../agent/replay.js";
import type { RunTrace, StepTrace } from "../agent/trace.js";
import type { StorePort } from "../store/port.js";
import type { NestedRuns } from "./trace-report.js";

/** What a replay reads of one run: the run, its steps and its first request. */
export async function recordedRunOf(port: StorePort, runId: string): Promise<RecordedRuns> {
  const [run, steps, first] = await Promise.all([port.run(runId), port.steps(runId), port.payload(runId, 1)]);
  return {
    run: (id) => (id === runId ? run : undefined),
    steps: (id) => (id === runId ? steps : []),
    payload: (id, step) => (id === runId && step === 1 ? first : undefined),
  };
}

/** Sub-agents start sub-agents a few levels deep at most; this bounds a pathological store. */
const MAX_NESTED_RUNS = 500;

/** The sub-agents' runs under `runs`, at every depth, with their steps, for formatRunTimeline. */
export async function nestedRunsOf(port: StorePort, runs: RunTrace[]): Promise<NestedRuns> {
  const children = new Map<string, RunTrace[]>();
  const steps = new Map<string, StepTrace[]>();
  let level = runs;
  let fetched = 0;
  while (level.length > 0 && fetched < MAX_NESTED_RUNS) {
    const found = await Promise.all(level.map(async (run) => [run.runId, await port.childrenOf(run.runId)] as const));
    const next: RunTrace[] = [];
    for (const [runId, list] of found) {
      children.set(runId, list);
      next.push(...list.filter((child) => !children.has(child.runId)));
    }
    fetched += next.length;
    await Promise.all(next.map(async (child) => steps.set(child.runId, await port.steps(child.runId))));
    level = next;
  }
  return { childrenOf: (runId) => children.get(runId) ?? [], steps: (runId) => steps.get(runId) ?? [] };
}
