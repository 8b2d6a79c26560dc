/**
 * A run's live side: every event goes to memory and the trace as it happens and then to the
 * listener, and records are committed in units. Events recorded within a unit are announced once
 * it has committed, so a listener never hears of a record that a failed unit took back.
 */
import type { AgentEvent } from "./events.js";
import type { Memory } from "./memory.js";
import type { AgentConfig, Task } from "./run.js";

export interface Live {
  signal?: AbortSignal;
  memory?: Memory;
  emit: (event: AgentEvent) => void;
  /** One unit of records: with memory, all a body commits and records is committed together before it resolves; its events are announced after. */
  atomically: <T>(body: () => T) => Promise<T>;
}

export function liveOf(task: Pick<Task, "signal" | "onEvent">, config: AgentConfig): Live {
  const { memory, trace } = config;
  const listener = task.onEvent;
  const announce = (event: AgentEvent) => {
    try {
      listener?.(event); // a listener that throws must not break the run it watches
    } catch (error) {
      console.warn(`glassbox: an event listener failed on ${event.type}: ${(error as Error).message}`);
    }
  };
  let inUnit: AgentEvent[] | undefined;
  const emit = (event: AgentEvent) => {
    // A store that cannot write must stop the run, so these may throw.
    memory?.record(event);
    trace?.record(event);
    if (inUnit) inUnit.push(event);
    else announce(event);
  };
  const atomically = async <T>(body: () => T): Promise<T> => {
    if (!memory) return body();
    const events: AgentEvent[] = [];
    const result = await memory.atomically(() => {
      inUnit = events;
      try {
        return body();
      } finally {
        inUnit = undefined;
      }
    });
    for (const event of events) announce(event);
    return result;
  };
  return { signal: task.signal, memory, emit, atomically };
}
