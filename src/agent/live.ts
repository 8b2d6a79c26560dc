/**
 * A run's persistence and announcements, listening to what the loop emits. Every event goes to
 * memory and the trace as it happens, which add what they keep (messages, steps, the run's start and
 * end) to the pending unit; at each of the loop's commit points the unit is committed, one `record`
 * on the store port. An event waits to be announced to the listener while anything before it is not
 * yet committed, so a listener never hears of a record that a failed commit took back. The request
 * an accepted run stored with its message (`Task.inputStored`) is not stored again. A run that
 * pauses opens the approvals it waits for in its last commit (with approvalTtlSeconds), so a crash
 * right after the pause still leaves them to be clicked.
 */
import { approvalsAwaited } from "../tools/executor.js";
import type { AgentEvent } from "./events.js";
import { createRunUnit, type PendingUnit, type RunWriter } from "./run-unit.js";
import type { AgentConfig, Task } from "./run.js";
import type { Message } from "./types.js";

/** Where the loop's work must be durable before it goes on: its start, a model's reply, a step's tool results, its end. */
export type CommitPoint = "start" | "reply" | "results" | "end";

export interface Live {
  /** The task's signal, and the run's time limit when it has one (an abort then has a TimeoutError as its reason). */
  signal?: AbortSignal;
  emit: (event: AgentEvent) => void;
  /** Resolves once what was emitted since the last commit point is committed (and then announced). */
  commit: (point: CommitPoint) => Promise<void>;
}

export function liveOf(task: Pick<Task, "signal" | "onEvent" | "inputStored">, config: AgentConfig): Live {
  const { memory, trace } = config;
  const signal = withTimeLimit(task.signal, config.runTimeoutMs);
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
  if (!store) return { signal, emit: announce, commit: async () => {} };

  let unit: PendingUnit = createRunUnit();
  let held: AgentEvent[] = [];
  // Consecutive messages go to memory together: one write for a step's results and notes.
  let messages: { runId: string; sessionId: string; list: Message[] } | undefined;
  const sessions = new Map<string, string>();
  let requestStored = task.inputStored === true;
  const flushMessages = () => {
    if (messages && memory) memory.commit(messages, messages.list, unit);
    messages = undefined;
  };
  const persist = (event: AgentEvent) => {
    if (event.type === "run_start" || event.type === "run_resumed") sessions.set(event.runId, event.sessionId);
    if (event.type === "message") {
      if (requestStored && event.message.role === "user") requestStored = false;
      else if (messages?.runId === event.runId) messages.list.push(event.message);
      else {
        flushMessages();
        const sessionId = sessions.get(event.runId) ?? "";
        messages = { runId: event.runId, sessionId, list: [event.message] };
      }
    } else {
      flushMessages();
      memory?.record(event, unit);
      if (event.type === "run_end") sessions.delete(event.runId);
    }
    trace?.record(event, unit);
    const paused = event.type === "run_end" ? event.result.paused : undefined;
    if (paused && ttlSeconds !== undefined)
      unit.add({ kind: "open_approvals", requests: approvalsAwaited(paused.pending), ttlSeconds });
  };
  const dropPending = () => {
    unit = createRunUnit();
    held = [];
    messages = undefined;
  };
  return {
    signal,
    emit(event) {
      try {
        persist(event);
      } catch (error) {
        dropPending(); // a unit half built is never committed
        throw error;
      }
      if (held.length > 0 || unit.writes.length > 0 || messages) held.push(event);
      else announce(event);
    },
    async commit() {
      flushMessages();
      const committing = unit;
      const announced = held;
      unit = createRunUnit();
      held = [];
      // A store that cannot write must stop the run, so this may throw.
      await committing.commit(store);
      for (const event of announced) announce(event);
    },
  };
}

/** `signal`, aborted also once `limitMs` have passed (with a TimeoutError as its reason). */
function withTimeLimit(signal: AbortSignal | undefined, limitMs: number | undefined): AbortSignal | undefined {
  if (limitMs === undefined) return signal;
  const limit = AbortSignal.timeout(limitMs);
  return signal ? AbortSignal.any([signal, limit]) : limit;
}
