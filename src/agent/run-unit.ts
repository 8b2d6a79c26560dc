/**
 * One unit of a run's records: the writes memory and the trace make while the loop does one step of
 * work (a step's trace with its messages, the run's end), committed together by one `record` on the
 * store port, whole or not at all. What needs the committed rows (the ids of new messages, a read of
 * what was written) waits for the commit.
 */
import type { RecordOutcome, RunWrite } from "./contracts.js";

/** Where a run's units are committed: the store port's `record`. */
export interface RunWriter {
  record(writes: RunWrite[]): Promise<RecordOutcome>;
}

/** What memory and the trace see of a unit while the loop builds it. */
export interface RunUnit {
  add(write: RunWrite): void;
  /** A `messages` write; `stored` gets the messages' ids once the unit has committed. */
  addMessages(write: Extract<RunWrite, { kind: "messages" }>, stored: (ids: number[]) => void): void;
  /** Whether the unit already starts this run (memory starts the runs it keeps, the trace the others). */
  starts(runId: string): boolean;
  /** Called once the unit has committed (never if it failed). */
  afterCommit(callback: () => void): void;
}

export interface PendingUnit extends RunUnit {
  readonly writes: readonly RunWrite[];
  /** Commits the writes in one `record` (none: nothing to commit), then runs what waited for them. */
  commit(writer: RunWriter): Promise<void>;
}

/** One class, not closures per unit: a run makes two units a step, a bot thousands a second. */
class Unit implements PendingUnit {
  readonly writes: RunWrite[] = [];
  private readonly committed: Array<(outcome: RecordOutcome) => void> = [];
  private messageWrites = 0;

  add(write: RunWrite): void {
    if (write.kind === "messages") this.messageWrites++;
    this.writes.push(write);
  }

  addMessages(write: Extract<RunWrite, { kind: "messages" }>, stored: (ids: number[]) => void): void {
    const index = this.messageWrites; // RecordOutcome.messageIds has one list per messages write, in order
    this.add(write);
    this.committed.push((outcome) => stored(outcome.messageIds[index] ?? []));
  }

  starts(runId: string): boolean {
    return this.writes.some((write) => write.kind === "start_run" && write.run.runId === runId);
  }

  afterCommit(callback: () => void): void {
    this.committed.push(callback);
  }

  async commit(writer: RunWriter): Promise<void> {
    if (this.writes.length === 0 && this.committed.length === 0) return;
    const outcome =
      this.writes.length > 0 ? await writer.record(this.writes) : { messageIds: [], startedRuns: [], approvals: [] };
    for (const callback of this.committed) callback(outcome);
  }
}

export function createRunUnit(): PendingUnit {
  return new Unit();
}
