/**
 * A run's live side: every event goes to memory and the trace as it happens and then to the
 * listener, and their writes are committed in units, one `record` on the store port each. Events
 * emitted within a unit are announced once it has committed, so a listener never hears of a record
 * that a failed unit took back. A run that pauses opens the approvals it waits for in that same unit
 * (with approvalTtlSeconds), so a crash right after the pause still leaves them to be clicked.
 */
import { approvalsAwaited } from "../tools/executor.js";
import type { AgentEvent } from "./events.js";
import type { Memory } from "./memory.js";
import { createRunUnit, type PendingUnit, type RunWriter } from "./run-unit.js";
import type { AgentConfig, RunState, Task } from "./run.js";
import type { Message } from "./types.js";

export interface Live {
  signal?: AbortSignal;
  memory?: Memory;
  emit: (event: AgentEvent) => void;
  /** One unit of records: all that memory and the trace write during `body` is committed together before it resolves; its events are announced after. */
  atomically: <T>(body: () => T) => Promise<T>;
  /** Commits messages of the run through memory, with the unit being built (no memory: nothing to do). */
  commit: (run: RunState, messages: Message[]) => void;
}

export function liveOf(task: Pick<Task, "signal" | "onEvent">, config: AgentConfig): Live {
  const { memory, trace } = config;
  const store: RunWriter | undefined = memory?.store ?? trace?.store;
  if (memory && trace && memory.store !== trace.store)
    throw new Error("memory and the trace must write to the same store");
  const ttlSeconds = config.approvalTtlSeconds;
  const listener = task.onEvent;
  const announce = (event: AgentEvent) => {
    try {
      listener?.(event); // a listener that throws must not break the run it watches
    } catch (error) {
      console.warn(`glassbox: an event listener failed on ${event.type}: ${(error as Error).message}`);
    }
  };
  let current: { unit: PendingUnit; events: AgentEvent[] } | undefined;
  // Writes of an event outside a unit (none the loop makes today) go with the next unit.
  let loose: PendingUnit | undefined;
  const unitNow = () => current?.unit ?? (loose ??= createRunUnit());
  const emit = (event: AgentEvent) => {
    if (store) {
      const unit = unitNow();
      memory?.record(event, unit);
      trace?.record(event, unit);
      const paused = event.type === "run_end" ? event.result.paused : undefined;
      if (paused && ttlSeconds !== undefined)
        unit.add({ kind: "open_approvals", requests: approvalsAwaited(paused.pending), ttlSeconds });
    }
    if (current) current.events.push(event);
    else announce(event);
  };
  const atomically = async <T>(body: () => T): Promise<T> => {
    if (!store) return body();
    const unit = { unit: loose ?? createRunUnit(), events: [] as AgentEvent[] };
    loose = undefined;
    current = unit;
    let result: T;
    try {
      result = body();
    } finally {
      current = undefined;
    }
    // A store that cannot write must stop the run, so this may throw.
    await unit.unit.commit(store);
    for (const event of unit.events) announce(event);
    return result;
  };
  return {
    signal: task.signal,
    memory,
    emit,
    atomically,
    commit: (run, messages) => memory?.commit(run, messages, unitNow()),
  };
}
