/**
 * Tool selection learns from each top-level run as it ends, read back through the store (the run's
 * request and the tools its steps called) once the unit with the run's end has committed. A paused
 * run ends again when resumed: it is learned again, replacing its earlier example.
 */
import type { UsageHistory } from "../agent/contracts.js";
import type { UsageLearning } from "./usage-learning.js";

export function learnAtRunEnd<
  Event extends { type: string; runId: string },
  Unit extends { afterCommit(callback: () => void): void },
  Recorder extends { record(event: Event, unit: Unit): void },
>(recorder: Recorder, history: Pick<UsageHistory, "runUsage">, usage: UsageLearning): Recorder {
  return {
    ...recorder,
    record(event: Event, unit: Unit) {
      recorder.record(event, unit);
      if (event.type !== "run_end") return;
      // Learning only sharpens selection: a run must not fail over it (the next end, or start, reads again).
      unit.afterCommit(
        () =>
          void history.runUsage(event.runId).then(
            (example) => example && usage.learn(example),
            () => undefined,
          ),
      );
    },
  };
}
