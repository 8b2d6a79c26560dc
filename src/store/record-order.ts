/**
 * The order of a run's records (RunStore.record): a record made while an earlier one of the same run
 * is still committing is applied after it, and only if that one committed. A run may then go on
 * before its reply has landed (src/agent/live.ts) and still never store a tool result without the
 * reply that asked for it.
 */
import type { RecordOutcome, RunWrite } from "./port-data.js";

/** The run a unit's writes are of (every write of a unit is of one run). */
export function runOfWrites(writes: readonly RunWrite[]): string | undefined {
  for (const write of writes) {
    switch (write.kind) {
      case "start_run":
        return write.run.runId;
      case "step":
        return write.step.runId;
      case "end_run":
        return write.outcome.runId;
      case "open_approvals":
        if (write.requests[0]) return write.requests[0].runId;
        break;
      default:
        if (write.runId) return write.runId;
    }
  }
  return undefined;
}

/** A store whose records could overtake each other (a pool of connections): each waits for the run's record before it. */
export function inRunOrder(record: (writes: RunWrite[]) => Promise<RecordOutcome>): (writes: RunWrite[]) => Promise<RecordOutcome> {
  const latest = new Map<string, Promise<RecordOutcome>>();
  return (writes) => {
    const runId = runOfWrites(writes);
    if (runId === undefined) return record(writes);
    const before = latest.get(runId);
    // A record after one that failed fails with its error, writing nothing.
    const mine = before ? before.then(() => record(writes)) : record(writes);
    latest.set(runId, mine);
    const forget = () => {
      if (latest.get(runId) === mine) latest.delete(runId);
    };
    mine.then(forget, forget);
    return mine;
  };
}
